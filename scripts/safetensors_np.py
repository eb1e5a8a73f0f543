"""safetensors with numpy only (no safetensors package): what examples/torch_check.py
and benchmarks/torch_baseline.py hand to and read back from `phax oracle`.

The format, as its document specifies: u64 little-endian header length, a JSON header
{name: {dtype, shape, data_offsets}, "__metadata__": {str: str}} padded with spaces to
a multiple of 8 bytes, then the little-endian tensor bytes.
numpy is imported inside the functions: torch_baseline.py's driver stays light.
"""
import json

DTYPES = {"F64": "<f8", "F32": "<f4", "I32": "<i4", "I64": "<i8"}


def write_safetensors(path, tensors, metadata):
    import numpy as np
    names = {np.dtype(v): k for k, v in DTYPES.items()}
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name]).reshape(np.shape(tensors[name]))  # a 0-d array stays 0-d
        b = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": names[np.dtype(a.dtype.newbyteorder("<"))], "shape": list(a.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def read_safetensors(path):
    """Returns (tensors, metadata)."""
    import numpy as np
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + b:8 + n + e], dtype=DTYPES[t["dtype"]]).reshape(t["shape"])
    return out, meta
