#!/usr/bin/env python3
"""torch_baseline.py must not call a run "tuned" when a piece of it is missing (issue 11
item 14). Needs neither torch nor numpy: the refusal comes before either is used.
Library folders are faked with PHAX_BENCH_LIBDIR; exit 0 when every check holds."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "torch_baseline.py")
failed = 0


def run(libdir, *args):
    env = dict(os.environ, PHAX_BENCH_LIBDIR=libdir)
    return subprocess.run([sys.executable, SCRIPT, *args], env=env, capture_output=True, text=True)


def expect(what, cond, detail=""):
    global failed
    print(("ok    " if cond else "FAIL  ") + what + ("" if cond else ": " + detail))
    failed += not cond


with tempfile.TemporaryDirectory() as empty, tempfile.TemporaryDirectory() as full:
    # A folder with neither jemalloc nor OpenBLAS's OpenMP build: refused, both named.
    r = run(empty, "--check-env")
    expect("--check-env without the pieces exits 2", r.returncode == 2, f"exit {r.returncode}")
    lines = r.stderr.splitlines()
    expect("it names jemalloc and its package",
           any(l.startswith("torch_baseline.py: tuned environment: missing jemalloc") and "libjemalloc2" in l
               for l in lines), r.stderr)
    expect("it names the OpenMP OpenBLAS and its package",
           any(l.startswith("torch_baseline.py: tuned environment: missing OpenBLAS") and "libopenblas0-openmp" in l
               for l in lines), r.stderr)
    # A benchmark run that asks for "tuned" stops before anything runs (before torch is needed).
    r = run(empty, "--families", "transformer", "--Ts", "512", "--no-phax")
    expect("a run asking for tuned without the pieces exits 2", r.returncode == 2, f"exit {r.returncode}: {r.stderr}")
    expect("and says it is not a tuned environment", "not a tuned environment" in r.stderr, r.stderr)
    expect("and runs nothing", "tokens/s" not in r.stdout, r.stdout)
    # Only one piece missing is still refused, either one.
    os.makedirs(os.path.join(full, "openblas-openmp"))
    open(os.path.join(full, "openblas-openmp", "libblas.so.3"), "w").close()
    r = run(full, "--check-env")
    expect("jemalloc alone missing is refused", r.returncode == 2 and "missing jemalloc" in r.stderr,
           f"exit {r.returncode}: {r.stderr}")
    os.rename(os.path.join(full, "openblas-openmp"), os.path.join(full, "openblas-aside"))
    open(os.path.join(full, "libjemalloc.so.2"), "w").close()
    r = run(full, "--check-env")
    expect("the OpenMP OpenBLAS alone missing is refused", r.returncode == 2 and "missing OpenBLAS" in r.stderr,
           f"exit {r.returncode}: {r.stderr}")
    # Both present: complete.
    os.rename(os.path.join(full, "openblas-aside"), os.path.join(full, "openblas-openmp"))
    r = run(full, "--check-env")
    expect("with every piece --check-env exits 0", r.returncode == 0, f"exit {r.returncode}: {r.stderr}")

    # A tuned run whose worker did not map what the environment asked for is not tuned.
    os.environ["PHAX_BENCH_LIBDIR"] = full
    sys.path.insert(0, HERE)
    import torch_baseline as tb  # noqa: E402
    _, tuned, _, missing = tb.make_envs(2)
    expect("make_envs finds nothing missing in the full folder", not missing, str(missing))
    good = {"libs": [full + "/libjemalloc.so.2", full + "/openblas-openmp/libblas.so.3"],
            "cpu_capability": "AVX512"}
    if tuned.get("ATEN_CPU_CAPABILITY") != "avx512":
        good["cpu_capability"] = "DEFAULT"
    expect("a run that mapped every piece is tuned", tb.not_tuned(good, tuned) == [], str(tb.not_tuned(good, tuned)))
    bad = dict(good, libs=["/usr/lib/x86_64-linux-gnu/libblas.so.3"])
    why = tb.not_tuned(bad, tuned)
    expect("a run without jemalloc and the OpenMP BLAS mapped is not tuned",
           any("jemalloc" in w for w in why) and any("OpenMP" in w for w in why), str(why))

print("test_tuned_env: %s" % ("every check holds" if not failed else f"{failed} check(s) failed"))
sys.exit(1 if failed else 0)
