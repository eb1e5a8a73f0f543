"""phax in process: the float64 oracle, `phax check` and checkpoints from Python.

ctypes over libphax (the Meson build's build/libphax.so) with numpy arrays in and out;
tensors travel as safetensors images in memory (no file is written), so every check
`phax oracle` makes on a file is made on them too.

    import numpy as np, phax
    out = phax.oracle("linear", x=x, weight=w, bias=b)           # {"y": ..., "grad.x": ..., ...}
    rep = phax.check("attention", inputs, theirs, precision="bf16")  # rep.passed, print(rep)
    params = phax.load_checkpoint("runs/pha")                    # {"embed.weight": ..., ...}

The library is found at $PHAX_LIB, else build/libphax.so of the repository this package
sits in, else libphax.so beside this file. Errors raise phax.Error with phax's one line.
"""
import ctypes
import json
import os

import numpy as np

__all__ = ["Error", "oracle", "check", "load_checkpoint", "Report", "Row", "Checkpoint", "library_path"]


class Error(Exception):
    """A phax error: its message is phax's one line (what is wrong, and where)."""


# safetensors dtype <-> numpy (little-endian always: the format's byte order).
_TO_ST = {"f8": "F64", "f4": "F32", "f2": "F16", "i1": "I8", "i2": "I16", "i4": "I32", "i8": "I64",
          "u1": "U8", "u2": "U16", "u4": "U32", "u8": "U64", "b1": "BOOL"}
_FROM_ST = {v: np.dtype("<" + k) if k != "b1" else np.dtype(bool) for k, v in _TO_ST.items()}


def library_path():
    """Where libphax is looked for, in order; the first that exists is used: $PHAX_LIB; the
    build folder of the checkout this package sits in (python/phax -> build/libphax.so); a
    libphax.so beside this file; the system's loader path (ctypes.util.find_library). An
    installed package (pip install ./python) has no checkout around it: set PHAX_LIB."""
    env = os.environ.get("PHAX_LIB")
    if env:
        if not os.path.exists(env):
            raise Error(f"PHAX_LIB={env}: no such file (build it with ninja -C build; it is build/libphax.so)")
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    for p in (os.path.join(here, "..", "..", "build", "libphax.so"), os.path.join(here, "libphax.so")):
        if os.path.exists(p):
            return os.path.normpath(p)
    import ctypes.util
    found = ctypes.util.find_library("phax")
    if found:
        return found
    raise Error("libphax.so not found: this package is ctypes over the C library, which pip does not build; "
                "build it in the phax checkout (ninja -C build) and set PHAX_LIB=<checkout>/build/libphax.so")


_lib = None


def _load():
    global _lib
    if _lib is not None:
        return _lib
    path = library_path()
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise Error(f"{path}: cannot load libphax: {e}") from None
    P, S, D, I = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_double, ctypes.c_int
    PP, PS = ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)
    sig = {
        "phax_capi_version": (ctypes.c_char_p, []),
        "phax_capi_error": (ctypes.c_char_p, []),
        "phax_capi_free": (None, [P]),
        "phax_capi_oracle": (I, [ctypes.c_char_p, ctypes.c_char_p, S, D, PP, PS]),
        "phax_capi_check": (I, [ctypes.c_char_p, ctypes.c_char_p, S, ctypes.c_char_p, S, ctypes.c_char_p, D, PP]),
        "phax_capi_report_verdict": (I, [P]),
        "phax_capi_report_rows": (I, [P]),
        "phax_capi_report_row": (ctypes.c_char_p, [P, I, ctypes.POINTER(D), ctypes.POINTER(I)]),
        "phax_capi_report_problems": (I, [P]),
        "phax_capi_report_problem": (ctypes.c_char_p, [P, I]),
        "phax_capi_report_text": (P, [P, I]),  # a malloc'd string: freed with phax_capi_free
        "phax_capi_report_free": (None, [P]),
        "phax_capi_checkpoint": (I, [ctypes.c_char_p, PP, PS]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    _lib = lib
    return lib


def _fail(lib):
    raise Error(lib.phax_capi_error().decode("utf-8", "replace"))


def _take(lib, ptr, n):
    """The bytes of a buffer libphax handed out, copied; the buffer is freed."""
    try:
        return ctypes.string_at(ptr, n)
    finally:
        lib.phax_capi_free(ptr)


# --- safetensors images ------------------------------------------------------------------------
def _attr(name, v):
    """An attribute as the metadata string the oracle parses."""
    if isinstance(v, str):
        return v
    if isinstance(v, (bool, np.bool_)):
        return "1" if v else "0"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return repr(float(v))  # shortest text that reads back as the same double
    if isinstance(v, dict):
        return json.dumps(v)  # a model's config
    raise Error(f"attribute '{name}': a {type(v).__name__} is neither a tensor (numpy array) nor a string or number")


def _as_array(name, v):
    """A tensor as a C-ordered little-endian numpy array, or None when v is an attribute."""
    if isinstance(v, (str, bytes, bool, int, float, dict, np.generic)):
        return None
    if hasattr(v, "detach"):  # a torch tensor, without importing torch
        v = v.detach().cpu().numpy()
    if not isinstance(v, np.ndarray):
        if not hasattr(v, "__array__"):
            return None
        v = np.asarray(v)
    key = v.dtype.kind + str(v.dtype.itemsize)
    if key not in _TO_ST:
        raise Error(f"tensor '{name}': numpy dtype {v.dtype} has no safetensors dtype phax reads "
                    f"(float64/32/16, int8..64, uint8..64)")
    # ascontiguousarray makes a 0-d array 1-d: the shape is put back (a scalar stays shape []).
    return np.ascontiguousarray(v, dtype=v.dtype.newbyteorder("<")).reshape(v.shape)


def encode(tensors, metadata=None):
    """A safetensors image of tensors (name -> numpy array) and metadata (str -> str)."""
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, a in tensors.items():
        b = a.tobytes()
        header[name] = {"dtype": _TO_ST[a.dtype.kind + str(a.dtype.itemsize)], "shape": list(a.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    return len(h).to_bytes(8, "little") + h + b"".join(blobs)


def decode(image):
    """(tensors, metadata) of an image libphax made (already validated by phax's reader)."""
    n = int.from_bytes(image[:8], "little")
    header = json.loads(image[8:8 + n])
    meta = header.pop("__metadata__", {})
    base, out = 8 + n, {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        dt = _FROM_ST[t["dtype"]]
        a = np.frombuffer(image, dtype=dt, count=(e - b) // dt.itemsize, offset=base + b)
        out[name] = a.reshape(t["shape"]).astype(dt.newbyteorder("="))  # a native, writable copy
    return out, meta


def _split(inputs, kw):
    """Tensors and attributes of an op's input: arrays are tensors, the rest attributes."""
    items = dict(inputs or {})
    overlap = set(items) & set(kw)
    if overlap:
        raise Error(f"input '{sorted(overlap)[0]}' given twice (in the dict and as a keyword)")
    items.update(kw)
    tensors, meta = {}, {}
    for name, v in items.items():
        a = _as_array(name, v)
        if a is None:
            meta[name] = _attr(name, v)
        else:
            tensors[name] = a
    return tensors, meta


def _max_mib(max_memory):
    return -1.0 if max_memory is None else float(max_memory)


# --- the oracle ----------------------------------------------------------------------------------
def oracle_image(op, inputs=None, *, max_memory=None, **kw):
    """The bytes `phax oracle OP IN OUT` writes to OUT, for IN made of inputs and kw."""
    lib = _load()
    if isinstance(inputs, (bytes, bytearray)):  # an IN image as it is (a file's bytes)
        if kw:
            raise Error("oracle: an input image takes no other inputs (keywords given: " + ", ".join(kw) + ")")
        img = bytes(inputs)
    else:
        tensors, meta = _split(inputs, kw)
        img = encode(tensors, meta)
    out, n = ctypes.c_void_p(), ctypes.c_size_t()
    if lib.phax_capi_oracle(str(op).encode(), img, len(img), _max_mib(max_memory), ctypes.byref(out), ctypes.byref(n)):
        _fail(lib)
    return _take(lib, out, n.value)


def oracle(op, inputs=None, *, max_memory=None, **kw):
    """Run op of the float64 oracle; every output and gradient, name -> float64 array.

    Tensors are numpy arrays (float: promoted to float64; int: token ids and targets), given
    as keywords or, for names that are not identifiers (grad.y, blocks.0.attn.wq.weight), in
    the dict inputs. Anything else is an attribute (score="cosine", window=3, config={...}).
    inputs may also be the bytes of an IN file, used as they are.
    max_memory: the limit in MiB (phax oracle --max-memory). As `phax oracle`, bit for bit.
    """
    return decode(oracle_image(op, inputs, max_memory=max_memory, **kw))[0]


# --- phax check ----------------------------------------------------------------------------------
class Row:
    """One judged tensor: errors relative to ||truth||, ratio = error / baseline's error."""

    __slots__ = ("name", "rel_err", "baseline_rel_err", "ratio", "bound", "passed")

    def __init__(self, name, rel_err, baseline_rel_err, ratio, bound, passed):
        self.name, self.rel_err, self.baseline_rel_err = name, rel_err, baseline_rel_err
        self.ratio, self.bound, self.passed = ratio, bound, passed

    def __repr__(self):
        return (f"Row({self.name!r}, rel_err={self.rel_err:.3e}, baseline={self.baseline_rel_err:.3e}, "
                f"ratio={self.ratio:.3g}, bound={self.bound:.3e}, {'PASS' if self.passed else 'FAIL'})")


class Report:
    """phax check's verdict: .passed, .verdict ("PASS"/"FAIL"), .rows; str() prints as the command."""

    def __init__(self, op, precision, verdict, rows, text, json_text):
        self.op, self.precision, self.verdict, self.rows = op, precision, verdict, rows
        self.passed = verdict == "PASS"
        self._text, self.json = text, json_text

    def __str__(self):
        return self._text

    def __repr__(self):
        return f"<phax.Report {self.op} at {self.precision}: {self.verdict}, {len(self.rows)} tensors>"

    def __getitem__(self, name):
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(name)


def check(op, inputs, theirs, precision="f32", *, max_memory=None):
    """`phax check OP IN THEIRS --precision P` in process.

    inputs: what oracle() takes (tensors and attributes; give the upstream gradient grad.<output>
    your backward used). theirs: your outputs and gradients by the oracle's names, float arrays
    (float64, float32 or float16). Returns a Report (PASS or FAIL). Raises Error on bad input,
    and when theirs does not fit the op's outputs (a missing, extra or misshapen tensor: the
    command's MISMATCH, exit 2), with the problems on one line.
    """
    lib = _load()
    tensors, meta = _split(inputs, {})
    img = encode(tensors, meta)
    th = {}
    for name, v in theirs.items():
        a = _as_array(name, v)
        if a is None:
            raise Error(f"theirs: '{name}' is not an array")
        th[name] = a
    timg = encode(th)
    rep = ctypes.c_void_p()
    if lib.phax_capi_check(str(op).encode(), img, len(img), timg, len(timg), str(precision).encode(),
                           _max_mib(max_memory), ctypes.byref(rep)):
        _fail(lib)
    try:
        verdict = ("PASS", "FAIL", "MISMATCH")[lib.phax_capi_report_verdict(rep)]
        if verdict == "MISMATCH":
            probs = [lib.phax_capi_report_problem(rep, i).decode("utf-8", "replace")
                     for i in range(lib.phax_capi_report_problems(rep))]
            raise Error(f"theirs does not hold op '{op}''s outputs ({len(probs)} problem"
                        f"{'' if len(probs) == 1 else 's'}): " + "; ".join(probs))
        rows = []
        v, ok = (ctypes.c_double * 4)(), ctypes.c_int()
        for i in range(lib.phax_capi_report_rows(rep)):
            name = lib.phax_capi_report_row(rep, i, v, ctypes.byref(ok)).decode()
            rows.append(Row(name, v[0], v[1], v[2], v[3], bool(ok.value)))
        texts = []
        for js in (0, 1):
            p = lib.phax_capi_report_text(rep, js)
            if not p:
                raise Error("check: out of memory")
            try:
                texts.append(ctypes.string_at(p).decode("utf-8", "replace"))
            finally:
                lib.phax_capi_free(p)
        return Report(op, str(precision), verdict, rows, texts[0], texts[1])
    finally:
        lib.phax_capi_report_free(rep)


# --- checkpoints ---------------------------------------------------------------------------------
class Checkpoint(dict):
    """A checkpoint's parameters, name -> float32 array (the layout's PyTorch-style names), with
    .config (the resolved config, a dict), .step and .tokens_seen."""


def load_checkpoint(path):
    """The parameters of a phax checkpoint (a model file or a run folder, as `phax info` takes)."""
    lib = _load()
    out, n = ctypes.c_void_p(), ctypes.c_size_t()
    if lib.phax_capi_checkpoint(os.fsencode(path), ctypes.byref(out), ctypes.byref(n)):
        _fail(lib)
    tensors, meta = decode(_take(lib, out, n.value))
    ck = Checkpoint(tensors)
    ck.config = json.loads(meta["config"])
    ck.step, ck.tokens_seen = int(meta["step"]), int(meta["tokens_seen"])
    return ck
