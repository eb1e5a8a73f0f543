"""Provenance: what a result was made with, so that results of different commits or builds
are never silently taken for one experiment.

  current()            the commit (full sha, dirty flag), the build (the Meson options that
                       change numerics, the C flags of the fast tier, the compiler), the
                       OpenBLAS library linked and the kernel it picks, FFTW's and glibc's
                       versions, the CPU (model, x86-64 level), and the environment
                       variables that change a run's bits
  data_checksums(ps)   sha256 of the data files a run read (cached per path, size, mtime)
  corpus_files(d)      the files of a corpus folder phax reads
  corpora_record(c)    {name: {folder, files: {file: sha256}}} of the corpora used
  check_mixed(pieces)  None when the pieces a claim rests on share one commit and build,
                       else one line saying what differs
  bits_differ(pieces)  None, or one line naming the settings that change only a run's bits
                       (the CPU's x86-64 level and its -march, OpenBLAS's kernel, the thread
                       counts) where the pieces' runs differ in them
  gate(pieces)         the report's decision: (verdict allowed, note), with
                       PHAX_EVAL_ALLOW_MIXED=1 letting mixed pieces through (named)

Nothing here names a path outside the repository: paths are relative to the repository
root, a data folder outside it is recorded by its corpus name and checksums, a library of
the system by its name and version.
"""
import hashlib
import json
import lzma
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NUMERIC_ENV = ("OMP_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS")
BUILD_OPTIONS = ("buildtype", "optimization", "b_sanitize", "cuda", "openblas_pthreads", "portable")
# The flags of fast/cpu's compile line that change code generation (meson.build's
# fast_opt_args and what the build type adds); -I/-D and diagnostics are left out.
_FLAG = re.compile(r"^(-O\S*|-g\S*|-std=\S+|-m\S+|-ffp-contract=\S+|-f(no-)?fast-math|-f(no-)?openmp\S*|"
                   r"-f(no-)?unsafe-math-optimizations|-f(no-)?trapping-math|-f(no-)?rounding-math|"
                   r"-f(no-)?finite-math-only|-f(no-)?associative-math|-f(no-)?reciprocal-math|"
                   r"-f(no-)?signed-zeros|-fexcess-precision=\S+|-fsanitize=\S+|-flto\S*)$")
OUTSIDE = "(outside the repository)"


# --- paths ------------------------------------------------------------------------------------
def inside(path):
    """path relative to the repository root, or None when it lies outside the repository."""
    rel = os.path.relpath(os.path.realpath(path), os.path.realpath(ROOT))
    return None if rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel) else rel


def _shown(path):
    rel = inside(path)
    return rel if rel is not None else OUTSIDE


_ABS = re.compile(r"(^|[\s=:,;'\"(\[])(/|\.\./)")


def scrub(obj):
    """obj with every string that names a path outside the repository (absolute, or ../)
    replaced by OUTSIDE; the last guard of everything written here."""
    if isinstance(obj, dict):
        return {k: scrub(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [scrub(v) for v in obj]
    if isinstance(obj, str) and _ABS.search(obj):
        return OUTSIDE
    return obj


def _run(argv, cwd=ROOT, env=None):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=60)
        return r.stdout if r.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


# --- the commit ---------------------------------------------------------------------------------
def commit():
    """{commit: full sha, dirty: tracked files differ from HEAD, changed: those files}."""
    sha = _run(["git", "rev-parse", "HEAD"]).strip()
    st = _run(["git", "status", "--porcelain", "--untracked-files=no"])
    changed = sorted({l[3:].split(" -> ")[-1].strip() for l in st.splitlines() if len(l) > 3})
    return dict(commit=sha or None, dirty=bool(changed), changed=changed[:50])


# --- the build ----------------------------------------------------------------------------------
def _load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def build_info(build_dir):
    """The options of BUILD_DIR that change numerics, fast/cpu's code-generation flags and the
    compiler's version (meson-info/)."""
    info = dict(dir=_shown(build_dir))
    opts = _load_json(os.path.join(build_dir, "meson-info", "intro-buildoptions.json")) or []
    for o in opts:
        if o.get("name") in BUILD_OPTIONS:
            info[o["name"]] = o.get("value")
    targets = _load_json(os.path.join(build_dir, "meson-info", "intro-targets.json")) or []
    for t in targets:
        if t.get("name") == "phax_cpu":
            for s in t.get("target_sources", []):
                if s.get("language") == "c":
                    info["fast_c_args"] = [p for p in s.get("parameters", []) if _FLAG.match(p)]
                    if s.get("compiler"):
                        info["compiler"] = (_run(list(s["compiler"]) + ["--version"]).splitlines() or [None])[0]
                    break
    if "compiler" not in info:
        info["compiler"] = (_run(["cc", "--version"]).splitlines() or [None])[0]
    return info


_BLAS_PROBE = r"""
import ctypes, sys
l = ctypes.CDLL(sys.argv[1])
for f in ("openblas_get_config", "openblas_get_corename"):
    getattr(l, f).restype = ctypes.c_char_p
print(l.openblas_get_config().decode()); print(l.openblas_get_corename().decode())
"""
_FFTW_PROBE = r"""
import ctypes, sys
print((ctypes.c_char * 128).in_dll(ctypes.CDLL(sys.argv[1]), "fftwf_version").value.decode())
"""


def _linked(exe):
    """{soname: path} of the shared libraries exe loads (ldd)."""
    out = {}
    for l in _run(["ldd", exe]).splitlines():
        w = l.split()
        if len(w) >= 3 and w[1] == "=>" and w[2].startswith("/"):
            out[w[0]] = w[2]
    return out


def openblas_info(exe, linked=None):
    """The OpenBLAS that exe links, by name, flavour and version, and the kernel it picks on
    this CPU under this environment (OPENBLAS_CORETYPE): never its path."""
    for name, path in (linked if linked is not None else _linked(exe)).items():
        if not name.startswith("libopenblas"):
            continue
        real = os.path.realpath(path)
        info = dict(library=name, flavour=os.path.basename(os.path.dirname(real)))
        m = re.search(r"r(\d+\.\d+(\.\d+)?)", os.path.basename(real))
        if m:
            info["version"] = m.group(1)
        out = _run([sys.executable, "-c", _BLAS_PROBE, path], cwd=None).splitlines()
        if len(out) == 2:
            info["config"], info["core"] = out
        return info
    return None


def fftw_info(exe, linked=None):
    """FFTW's version string, which names the SIMD codelets it was built with (those it can
    pick at run time)."""
    for name, path in (linked if linked is not None else _linked(exe)).items():
        if name.startswith("libfftw3f"):
            out = _run([sys.executable, "-c", _FFTW_PROBE, path], cwd=None).strip()
            return out or name
    return None


def libc_info():
    try:
        return os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        return None


# --- the machine ------------------------------------------------------------------------------------
_V = {2: {"cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3"},
      3: {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"},
      4: {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}}


def cpu_info():
    model, flags = None, set()
    try:
        with open("/proc/cpuinfo") as f:
            for l in f:
                if l.startswith("model name") and model is None:
                    model = l.split(":", 1)[1].strip()
                elif l.startswith("flags") and not flags:
                    flags = set(l.split(":", 1)[1].split())
    except OSError:
        pass
    isa, need = "x86-64", set()
    for lvl in (2, 3, 4):
        need |= _V[lvl]
        if flags and need <= flags:
            isa = f"x86-64-v{lvl}"
    return dict(model=model, isa=isa if flags else None, cpus=os.cpu_count())


_cache = {}


def current(build_dir=None):
    """What a result made now is made with (see the module's docstring). The build part is
    computed once per build state and environment."""
    build_dir = build_dir or os.environ.get("BUILD_DIR", "build")
    exe = os.path.join(build_dir, "phax")
    try:
        st = os.stat(exe)
        stamp = (st.st_size, st.st_mtime_ns)
    except OSError:
        stamp = None
    env = {k: os.environ.get(k) for k in NUMERIC_ENV}
    key = (os.path.realpath(build_dir), stamp, tuple(sorted(env.items(), key=lambda kv: kv[0])))
    if key not in _cache:
        linked = _linked(exe) if stamp else {}
        _cache[key] = dict(build=build_info(build_dir), openblas=openblas_info(exe, linked),
                           fftw=fftw_info(exe, linked), libc=libc_info(), cpu=cpu_info())
    return scrub(dict(commit(), **json.loads(json.dumps(_cache[key])), env=env))


# --- data -----------------------------------------------------------------------------------------
_sums = {}  # realpath -> (size, mtime_ns, sha256)


def file_sha256(path):
    """sha256 of the file's content as phax reads it: an .xz file decompressed (the value its
    folder's SHA256SUMS lists), so that a copy kept plain and one kept compressed agree. A
    damaged .xz file gets the sha256 of its bytes, marked."""
    real = os.path.realpath(path)
    st = os.stat(real)
    hit = _sums.get(real)
    if hit and hit[:2] == (st.st_size, st.st_mtime_ns):
        return hit[2]
    h = hashlib.sha256()
    try:
        with (lzma.open(real, "rb") if real.endswith(".xz") else open(real, "rb")) as f:
            for b in iter(lambda: f.read(1 << 20), b""):
                h.update(b)
        sha = h.hexdigest()
    except lzma.LZMAError:
        with open(real, "rb") as f:
            sha = "damaged xz, bytes " + hashlib.sha256(f.read()).hexdigest()
    _sums[real] = (st.st_size, st.st_mtime_ns, sha)
    return sha


def data_checksums(paths, name=None):
    """{file: sha256} of the data files a run read. A file inside the repository is named by
    its path relative to the repository root; one outside it by NAME/its file name (NAME:
    the corpus', else 'external'), never by its path."""
    out = {}
    for p in paths:
        rel = inside(p)
        key = rel if rel is not None else f"{name or 'external'}/{os.path.basename(p)}"
        out[key] = file_sha256(p)
    return dict(sorted(out.items()))


_CORPUS_FILES = ["train.txt", "valid.txt", "test.txt", "ptb.train.txt", "ptb.valid.txt", "ptb.test.txt"]


def corpus_files(folder):
    """The files of a corpus folder that phax reads (train, valid, test; plain or .xz)."""
    out = []
    for fn in _CORPUS_FILES:
        for cand in (fn, fn + ".xz"):
            p = os.path.join(folder, cand)
            if os.path.isfile(p):
                out.append(p)
                break
    return out


def corpora_record(corpora, names=None):
    """{name: {folder, files}} of the corpora (name -> folder) in names (default all): the
    folder relative to the repository root (or OUTSIDE), each file's sha256."""
    rec = {}
    for name, folder in sorted(corpora.items()):
        if names is not None and name not in names:
            continue
        real = os.path.realpath(folder)  # a link to a folder outside: the folder's place
        rec[name] = dict(folder=_shown(real),
                         files={os.path.basename(k): v for k, v in
                                data_checksums(corpus_files(folder), name).items()})
    return rec


# --- claims over pieces -----------------------------------------------------------------------------
def _prov(p):
    """(commit label, build dict or None) of a piece.json dict, a provenance dict, or a
    piece.json of before provenance (its short commit only)."""
    pv = p.get("provenance") if isinstance(p.get("provenance"), dict) else (p if "build" in p else None)
    if pv:
        c = (pv.get("commit") or "unknown") + (" (dirty)" if pv.get("dirty") else "")
        b = {k: v for k, v in (pv.get("build") or {}).items() if k != "dir"}
        # What else changes a run's bits (evals/README.md, Bit-reproducibility): OpenBLAS's kernel,
        # the thread and kernel variables, the CPU's ISA level.
        if isinstance(pv.get("openblas"), dict) and pv["openblas"].get("core"):
            b["openblas.core"] = pv["openblas"]["core"]
        for k, v in (pv.get("env") or {}).items():
            b["env." + k] = v
        if isinstance(pv.get("cpu"), dict) and pv["cpu"].get("isa"):
            b["cpu.isa"] = pv["cpu"]["isa"]
        return c, b or None
    return (p.get("commit") or "unknown"), None


def _same_commit(a, b):
    ca, cb = a.split(" ")[0], b.split(" ")[0]
    dirty_a, dirty_b = a != ca, b != cb
    if dirty_a != dirty_b or "unknown" in (ca, cb):
        return a == b
    return ca.startswith(cb) or cb.startswith(ca)  # a short sha of old pieces matches its full sha


def run_builds(used):
    """The distinct builds the runs of a piece were made with: [{runs: [...], provenance}], from
    Runner.runs_used [(run, provenance.json or None)] (runs of before provenance left out)."""
    out = []
    for run, pv in used:
        if not pv:
            continue
        b = _prov(pv)[1]
        for o in out:
            if _prov(o["provenance"])[1] == b:
                o["runs"].append(run)
                break
        else:
            out.append(dict(runs=[run], provenance=pv))
    return out


def _named(pieces):
    """(name, piece) pairs, and for each piece one more per build its runs were made with (their
    commit taken as the piece's: a run's provenance.json records HEAD at its end)."""
    named = list(pieces.items()) if isinstance(pieces, dict) else \
        [(p.get("piece") or f"#{i + 1}", p) for i, p in enumerate(pieces)]
    out = []
    for name, p in named:
        out.append((name, p))
        c = _prov(p)[0]
        for rb in p.get("runs") or []:
            pv = dict(rb["provenance"], commit=c.split(" ")[0], dirty=c.endswith("(dirty)"))
            out.append((f"{name}: {', '.join(rb['runs'][:2])}{' ...' if len(rb['runs']) > 2 else ''}", {"provenance": pv}))
    return out


# Settings that change a run's bits but not what it computes (evals/README.md, Bit-reproducibility):
# the machine a session gets can change level between sessions (x86-64-v4 one day, v3 the next),
# and a claim that needs more seeds than one session trains would never have a verdict if these
# blocked it. Seeds already move a run far more than rounding does; so runs that differ only here
# are judged together, and the verdict's note names the settings (each run's provenance.json
# keeps its own, so each reproduces bit for bit on its level). The commit, the compiler, the
# build type and every other flag still block.
BITS_ONLY = ("portable", "openblas.core", "cpu.isa") + tuple("env." + k for k in NUMERIC_ENV)


def _split(b):
    """A build dict as (what blocks a verdict, what changes only the bits): BITS_ONLY's settings
    and fast_c_args' -march go to the second."""
    build, bits = {}, {}
    for k, v in b.items():
        if k in BITS_ONLY:
            bits[k] = v
        elif k == "fast_c_args" and isinstance(v, list):
            build[k] = [a for a in v if not str(a).startswith("-march=")]
            bits[k] = [a for a in v if str(a).startswith("-march=")]
        else:
            build[k] = v
    return build, bits


def _commits_and_builds(pieces):
    """[commit label, [names]] groups of the pieces (and their runs' builds), and (name, build)
    for each that recorded its build."""
    groups, builds = [], []
    for name, p in _named(pieces):
        c, b = _prov(p)
        for g in groups:
            if _same_commit(g[0], c):
                g[1].append(name)
                if len(c) > len(g[0]):
                    g[0] = c
                break
        else:
            groups.append([c, [name]])
        if b is not None:
            builds.append((name, b))
    return groups, builds


def _differences(builds):
    """'setting a (names) vs b (names)' for each setting whose recorded values differ (a setting
    one of them lacks — recorded before it existed, e.g. portable — is not compared)."""
    diff = []
    for k in sorted({k for _, b in builds for k in b}):
        vals = {}
        for name, b in builds:
            if k in b:
                v = b[k]
                vals.setdefault(" ".join(v) if isinstance(v, list) else str(v), []).append(name)
        if len(vals) > 1:
            diff.append(f"{k} " + " vs ".join(f"{v} ({', '.join(n)})" for v, n in vals.items()))
    return diff


def check_mixed(pieces):
    """pieces: the piece.json dicts a claim rests on (a list, or {piece name: dict}). None
    when they share one commit and one build, else one line: which commits (with their
    pieces), which build settings differ. A piece recorded before provenance has only its
    short commit; builds are compared among the pieces that recorded theirs, setting
    by setting (the build folder's name is no part of the build). The bits-only settings
    (BITS_ONLY, -march) are not compared here: bits_differ names them."""
    groups, builds = _commits_and_builds(pieces)
    parts = []
    if len(groups) > 1:
        parts.append("mixed commits: " + ", ".join(f"{c[:12] + c[40:] if len(c) > 40 else c} ({', '.join(n)})"
                                                   for c, n in groups))
    diff = _differences([(n, _split(b)[0]) for n, b in builds])
    if diff:
        parts.append("mixed builds: " + "; ".join(diff))
    return "; ".join(parts) if parts else None


def bits_differ(pieces):
    """None, or one line: the bits-only settings (BITS_ONLY, -march) in which the pieces' runs
    differ, with the pieces and runs of each value."""
    diff = _differences([(n, _split(b)[1]) for n, b in _commits_and_builds(pieces)[1]])
    return "runs differ in bits-only settings: " + "; ".join(diff) if diff else None


def allow_mixed():
    return os.environ.get("PHAX_EVAL_ALLOW_MIXED") == "1"


def gate(pieces):
    """(verdict allowed, note) for a claim resting on pieces: (True, None) when they share one
    commit and build (the note then names bits-only differences, bits_differ, if any); else
    (False, 'mixed commits: ...') — no verdict — unless PHAX_EVAL_ALLOW_MIXED=1, then
    (True, 'mixed (allowed by PHAX_EVAL_ALLOW_MIXED=1): ...')."""
    m = check_mixed(pieces)
    if m is None:
        return True, bits_differ(pieces)
    if allow_mixed():
        return True, f"allowed by PHAX_EVAL_ALLOW_MIXED=1: {m}"
    return False, m
