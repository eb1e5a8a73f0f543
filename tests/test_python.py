"""python/phax (libphax over ctypes) against the phax command: `python3 tests/test_python.py PART`.

PART: oracle (phax.oracle equals `phax oracle`'s output bit for bit, every op, on the examples
and on seeded variants with float32 inputs), check (phax.check's verdict, numbers and text equal
`phax check`'s), checkpoint (load_checkpoint equals the model file of a 2-step `phax train`),
errors (bad input raises phax.Error with one line, the command's line). Needs Debian's python3
with numpy (exit 77, a skip, without it); PHAX_BIN (the command) and PHAX_LIB (libphax.so) from
meson, PYTHONPATH=python. Random inputs come from PHAX_TEST_SEED or a fresh seed, printed.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("skip: this python3 has no numpy (Debian: apt-get install python3-numpy)")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
# The test's own safetensors reader and writer (not phax's encoder): an error in the package's
# encoding or dtype map then shows as a difference from the command.
from safetensors_np import read_safetensors, write_safetensors  # noqa: E402

import phax  # noqa: E402

BIN = os.environ.get("PHAX_BIN", os.path.join(ROOT, "build", "phax"))
SEED = int(os.environ.get("PHAX_TEST_SEED") or random.SystemRandom().randrange(1 << 31))
print(f"seed {SEED} (replay: PHAX_TEST_SEED={SEED})")
failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args, ok=(0,)):
    p = subprocess.run([BIN, *args], capture_output=True, text=True)
    if p.returncode not in ok:
        raise SystemExit(f"phax {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    return p


def ops():
    out = run("oracle", "--list").stdout
    return [l for l in out.splitlines() if l and l[0].isalpha() and " " not in l]


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def inputs_of(path):
    """A file's tensors and metadata as phax.oracle's arguments (one dict)."""
    t, meta = read_safetensors(path)
    d = {k: np.array(v) for k, v in t.items()}
    d.update(meta)
    return d


def part_oracle(tmp):
    rng = np.random.default_rng(SEED)
    names = ops()
    expect(len(names) >= 18, f"phax oracle --list names {len(names)} ops")
    for op in names:
        ex = os.path.join(tmp, f"{op}.in.safetensors")
        run("oracle", op, "--example", ex)
        variants = [("example", ex)]
        # Seeded variant: float inputs perturbed and stored as F32 (promoted by the oracle),
        # integers as I64, and another upstream-gradient seed.
        t, meta = read_safetensors(ex)
        var = {}
        for k, v in t.items():
            if v.dtype.kind == "f":
                var[k] = (v * (1 + 1e-3 * rng.standard_normal(v.shape))).astype(np.float32)
            else:
                var[k] = v.astype(np.int64)
        meta = dict(meta, seed=str(int(rng.integers(1 << 20))))
        vpath = os.path.join(tmp, f"{op}.var.safetensors")
        write_safetensors(vpath, var, meta)
        variants.append(("seeded f32", vpath))
        for label, inp in variants:
            out = os.path.join(tmp, f"{op}.out.safetensors")
            run("oracle", op, inp, out)
            with open(out, "rb") as f:
                want = f.read()
            args = inputs_of(inp)
            got = phax.oracle_image(op, args)
            expect(got == want, f"oracle {op} ({label}): image differs from `phax oracle`'s file "
                                f"({len(got)} vs {len(want)} bytes)")
            arrays = phax.oracle(op, args)
            ref, _ = read_safetensors(out)
            expect(set(arrays) == set(ref), f"oracle {op} ({label}): names {sorted(arrays)} vs {sorted(ref)}")
            for k in ref:
                expect(k in arrays and arrays[k].dtype == np.float64 and same_bits(arrays[k], np.asarray(ref[k])),
                       f"oracle {op} ({label}): tensor {k} differs")
            # The file's own bytes as an input image give the same.
            with open(inp, "rb") as f:
                expect(phax.oracle_image(op, f.read()) == want, f"oracle {op} ({label}): from the file's bytes")
        print(f"ok oracle {op}: {len(ref)} tensors bit for bit, example and seeded f32")


# --- phax check: a correct float32 linear layer and ssm convolution, written here with numpy ------
def linear_f32(x, w, b, gy):
    x, w, b, gy = (a.astype(np.float32) for a in (x, w, b, gy))
    x2, g2 = x.reshape(-1, x.shape[-1]), gy.reshape(-1, gy.shape[-1])
    return {"y": x @ w.T + b, "grad.x": (g2 @ w).reshape(x.shape), "grad.weight": g2.T @ x2,
            "grad.bias": g2.sum(0)}


def ssm_conv_f32(u, k, d, gy):
    u, k, d, gy = (a.astype(np.float32) for a in (u, k, d, gy))
    B, T, H = u.shape
    y, du = np.zeros_like(u), np.zeros_like(u)
    dk, dd = np.zeros_like(k), (gy * u).sum((0, 1))
    for j in range(T):  # lag j: y[t] += k[j] u[t - j]
        y[:, j:] += k[:, j] * u[:, :T - j]
        du[:, :T - j] += k[:, j] * gy[:, j:]
        dk[:, j] = (gy[:, j:] * u[:, :T - j]).sum((0, 1))
    return {"y": y + d * u, "grad.u": du + d * gy, "grad.k": dk, "grad.d": dd}


def part_check(tmp):
    rng = np.random.default_rng(SEED + 1)
    cases = []
    x, w, b = rng.uniform(-1, 1, (3, 5, 8)), rng.uniform(-.5, .5, (6, 8)), rng.uniform(-1, 1, 6)
    gy = rng.standard_normal((3, 5, 6))
    cases.append(("linear", {"x": x, "weight": w, "bias": b, "grad.y": gy}, linear_f32(x, w, b, gy)))
    u, k, d = rng.uniform(-1, 1, (2, 11, 3)), rng.uniform(-1, 1, (3, 11)), rng.uniform(-1, 1, 3)
    gy = rng.standard_normal((2, 11, 3))
    cases.append(("ssm_conv", {"u": u, "k": k, "d": d, "grad.y": gy}, ssm_conv_f32(u, k, d, gy)))
    for op, inp, theirs in cases:
        bad = dict(theirs)
        name = sorted(k for k in theirs if k.startswith("grad."))[0]
        bad[name] = bad[name].copy()
        bad[name].flat[int(rng.integers(bad[name].size))] *= 1.01  # one element 1% off: a bug
        inpath = os.path.join(tmp, f"{op}.check.in.safetensors")
        write_safetensors(inpath, inp, {})
        for label, th, want in (("correct", theirs, "PASS"), ("perturbed", bad, "FAIL")):
            for prec in ("f32", "bf16"):
                if label == "perturbed" and prec == "bf16":
                    continue  # 1% of one element is within bf16's own error
                thpath = os.path.join(tmp, f"{op}.theirs.safetensors")
                write_safetensors(thpath, th, {})
                rep = phax.check(op, inp, th, precision=prec)
                cli = run("check", op, inpath, thpath, "--precision", prec, ok=(0, 1))
                clij = run("check", op, inpath, thpath, "--precision", prec, "--json", ok=(0, 1))
                expect(rep.verdict == want, f"check {op} {label} at {prec}: {rep.verdict}, expected {want}")
                expect(rep.passed == (cli.returncode == 0), f"check {op} {label}: exit {cli.returncode}")
                expect(str(rep) == cli.stdout, f"check {op} {label} at {prec}: text differs from the command's:\n"
                                               f"{rep}---\n{cli.stdout}")
                expect(rep.json == clij.stdout, f"check {op} {label} at {prec}: --json differs")
                j = json.loads(clij.stdout)
                for r, c in zip(rep.rows, j["tensors"]):
                    expect(r.name == c["name"] and r.passed == c["pass"] and
                           float(f"{r.ratio:.6g}") == c["ratio"] and float(f"{r.rel_err:.6g}") == c["rel_err"],
                           f"check {op} {label}: row {r} vs {c}")
                if label == "perturbed":
                    expect(not rep[name].passed, f"check {op}: the perturbed {name} passed")
                print(f"ok check {op} {label} at {prec}: {rep.verdict}, as `phax check` "
                      f"(worst ratio {max(r.ratio for r in rep.rows):.3g})")


def part_checkpoint(tmp):
    data = os.path.join(tmp, "data")
    os.makedirs(data)
    lines = ["the cat sat on the mat", "the dog ran to the red house", "a small bird flew over the old tree"]
    for name, n in (("train.txt", 60), ("valid.txt", 8)):
        with open(os.path.join(data, name), "w") as f:
            f.write("".join(lines[i % 3] + "\n" for i in range(n)))
    run_dir = os.path.join(tmp, "run")
    run("train", "--family", "pha", "--data", data, "--set", "d_model=32", "--set", "n_layers=2", "--seq", "16",
        "--batch", "4", "--steps", "2", "--warmup", "1", "--eval-every", "0", "--seed", str(SEED % 1000),
        "--out", run_dir)
    ck = phax.load_checkpoint(run_dir)
    ref, meta = read_safetensors(os.path.realpath(os.path.join(run_dir, "checkpoint.safetensors")))
    expect(set(ck) == set(ref), f"checkpoint names: {sorted(set(ck) ^ set(ref))}")
    for k in ref:
        expect(k in ck and ck[k].dtype == np.float32 and same_bits(ck[k], np.asarray(ref[k])),
               f"checkpoint tensor {k} differs from the file")
    expect(ck.step == 2 and ck.config == json.loads(meta["config"]), f"checkpoint step {ck.step} / config")
    info = run("info", run_dir).stdout
    total = sum(a.size for a in ck.values())
    expect(f"parameters ({len(ck)} tensors)" in info, f"phax info's tensor count is not {len(ck)}")
    expect(f"{total:,}".replace(",", " ") in info or f"{total:,}" in info or str(total) in info,
           f"phax info's total is not {total}")
    # The names are the oracle's: the checkpoint runs as a model with no renaming.
    tokens = np.random.default_rng(SEED).integers(0, ck.config["vocab_size"], (1, 8)).astype(np.int32)
    out = phax.oracle("model", dict(ck, tokens=tokens, targets=tokens), config=ck.config)
    expect(out["logits"].shape == (1, 8, ck.config["vocab_size"]) and np.isfinite(out["loss"]).all(),
           "model on the checkpoint")
    print(f"ok checkpoint: {len(ck)} tensors, {total} values bit for bit as the file; step {ck.step}; "
          f"model loss {float(out['loss']):.4f}")


def raises(what, fn, *frags):
    try:
        fn()
    except phax.Error as e:
        m = str(e)
        expect(m and "\n" not in m, f"{what}: not one line: {m!r}")
        for f in frags:
            expect(f in m, f"{what}: {m!r} lacks {f!r}")
        print(f"ok error {what}: {m}")
        return m
    except Exception as e:  # noqa: BLE001: any other exception is the failure reported
        expect(False, f"{what}: raised {type(e).__name__}: {e}")
        return None
    expect(False, f"{what}: no error")
    return None


def part_errors(tmp):
    ex = os.path.join(tmp, "linear.in.safetensors")
    run("oracle", "linear", "--example", ex)
    with open(ex, "rb") as f:
        img = f.read()
    good = inputs_of(ex)
    # The command's line for the same input, its path read as "inputs".
    def same_as_cli(what, args, path, *cli_args):
        m = raises(what, lambda: phax.oracle(*args), "inputs")
        p = subprocess.run([BIN, "oracle", *cli_args], capture_output=True, text=True)
        cli = p.stderr.strip().removeprefix("phax: ").replace(path, "inputs")
        expect(p.returncode == 1 and m == cli, f"{what}: {m!r} vs the command's {cli!r}")

    missing = {k: v for k, v in good.items() if k != "weight"}
    mpath = os.path.join(tmp, "missing.safetensors")
    write_safetensors(mpath, {k: v for k, v in missing.items() if isinstance(v, np.ndarray)},
                      {k: v for k, v in missing.items() if not isinstance(v, np.ndarray)})
    same_as_cli("missing tensor", ("linear", missing), mpath, "linear", mpath, os.path.join(tmp, "o1"))
    trunc = os.path.join(tmp, "trunc.safetensors")
    with open(trunc, "wb") as f:
        f.write(img[:len(img) - 3])
    raises("truncated image", lambda: phax.oracle("linear", img[:len(img) - 3]), "inputs")
    same_as_cli("truncated image (vs the command)", ("linear", img[:len(img) - 3]), trunc, "linear", trunc,
                os.path.join(tmp, "o2"))
    raises("short image", lambda: phax.oracle("linear", img[:5]), "too short")
    raises("header beyond", lambda: phax.oracle("linear", (1 << 40).to_bytes(8, "little") + img[8:]), "header length")
    bad_json = img[:8] + b"x" + img[9:]
    raises("header not JSON", lambda: phax.oracle("linear", bad_json), "inputs: header is not valid JSON")
    raises("unknown op", lambda: phax.oracle("linaer", good), "unknown op 'linaer'")
    raises("unknown attribute", lambda: phax.oracle("linear", good, windw=3), "unknown attribute 'windw'")
    raises("bad attribute value", lambda: phax.oracle("attention", dict(inputs_of(_example(tmp, "attention")),
                                                                        score="sine")), "score")
    raises("dtype without a safetensors one", lambda: phax.oracle("linear", dict(good, x=good["x"] + 0j)),
           "complex128")
    raises("an argument twice", lambda: phax.oracle("linear", good, x=good["x"]), "twice")
    raises("unknown precision", lambda: phax.check("linear", good, {}, precision="fp8"), "precision")
    out = phax.oracle("linear", good)
    short = {k: v for k, v in out.items() if k != "grad.bias"}
    raises("check: tensor missing from theirs", lambda: phax.check("linear", good, short), "grad.bias", "missing")
    raises("check: unknown op", lambda: phax.check("nonesuch", good, out), "unknown op 'nonesuch'")
    raises("checkpoint that is not there", lambda: phax.load_checkpoint(os.path.join(tmp, "nope")), "nope")
    raises("checkpoint that is not a checkpoint", lambda: phax.load_checkpoint(ex), ex)
    # After every error the library still answers.
    expect(same_bits(phax.oracle("linear", good)["y"], out["y"]), "a call after the errors")


def _example(tmp, op):
    p = os.path.join(tmp, f"{op}.ex.safetensors")
    run("oracle", op, "--example", p)
    return p


# --- pip install ./python and phax.testing, from the installed copy -----------------------------
INSTALLED_CHECK = r"""
import os, sys
import numpy as np
import phax
from phax.testing import assert_matches_oracle
assert os.path.realpath(phax.__file__).startswith(os.path.realpath(sys.argv[1])), phax.__file__
rng = np.random.default_rng(int(sys.argv[2]))
x, w, b, gy = rng.uniform(-1, 1, (3, 5, 8)), rng.uniform(-.5, .5, (6, 8)), rng.uniform(-1, 1, 6), rng.standard_normal((3, 5, 6))
f = lambda a: a.astype(np.float32)
xf, wf, bf, gf = f(x), f(w), f(b), f(gy)
x2, g2 = xf.reshape(-1, 8), gf.reshape(-1, 6)
ours = {"y": xf @ wf.T + bf, "grad.x": (g2 @ wf).reshape(xf.shape), "grad.weight": g2.T @ x2, "grad.bias": g2.sum(0)}
inputs = {"x": x, "weight": w, "bias": b, "grad.y": gy}
rep = assert_matches_oracle("linear", inputs, ours, precision="f32")
assert rep.passed
bad = dict(ours, **{"grad.weight": ours["grad.weight"] * 1.01})
try:
    assert_matches_oracle("linear", inputs, bad, precision="f32")
    raise SystemExit("a 1 % error in grad.weight passed")
except AssertionError as e:
    msg = str(e)
    assert msg.startswith("phax check linear at f32: FAIL") and "grad.weight" in msg and "ratio" in msg, msg
try:
    assert_matches_oracle("linear", inputs, {"y": ours["y"]}, precision="f32")
    raise SystemExit("missing gradients were accepted")
except phax.Error as e:
    assert "missing" in str(e), e
print("installed ok")
"""


def part_install(tmp):
    """pip installs ./python (no network: --no-build-isolation, the system's setuptools) into a
    folder; that copy, with PHAX_LIB, checks a float32 linear layer in one line
    (phax.testing.assert_matches_oracle: a PASS returns, a 1 % error raises AssertionError with
    the table, a missing output phax.Error); without PHAX_LIB and outside the checkout it says
    how to point it at the library."""
    target, src = os.path.join(tmp, "site"), os.path.join(tmp, "src")
    # From a copy: setuptools writes build/ and *.egg-info beside the sources it builds.
    shutil.copytree(os.path.join(ROOT, "python"), src, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
                        "--quiet", "--target", target, src],
                       capture_output=True, text=True)
    expect(r.returncode == 0, f"pip install ./python failed (scripts/setup.sh installs python3-pip and "
                              f"python3-setuptools): {r.stderr[-2000:]}")
    if r.returncode:
        return
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = target
    r = subprocess.run([sys.executable, "-c", INSTALLED_CHECK, target, str(SEED)], capture_output=True, text=True,
                       env=env, cwd=tmp)
    expect(r.returncode == 0 and "installed ok" in r.stdout, f"installed phax: {r.stdout}{r.stderr}")
    env.pop("PHAX_LIB", None), env.pop("LD_LIBRARY_PATH", None)  # (meson sets the latter: the loader path)
    r = subprocess.run([sys.executable, "-c", "import numpy as np, phax; phax.oracle('silu', x=np.ones((1, 2)))"],
                       capture_output=True, text=True, env=env, cwd=tmp)
    expect(r.returncode != 0 and "set PHAX_LIB=" in r.stderr, f"installed phax without PHAX_LIB: {r.stderr[-800:]}")
    print("ok install: pip install ./python; phax.testing.assert_matches_oracle PASS, FAIL and MISMATCH")


PARTS = {"oracle": part_oracle, "check": part_check, "checkpoint": part_checkpoint, "errors": part_errors,
         "install": part_install}

if __name__ == "__main__":
    parts = sys.argv[1:] or list(PARTS)
    tmp = tempfile.mkdtemp(prefix="phax_py_")
    try:
        for p in parts:
            PARTS[p](tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"{len(failures)} failure(s); seed {SEED}")
        sys.exit(1)
    print("ok")
