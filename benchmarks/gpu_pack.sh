#!/usr/bin/env bash
# Packs a build made here for a GPU machine that has the CUDA toolkit but none of phax's other
# packages (no Criterion, OpenBLAS, FFTW, jansson, Open MPI, and no way to install them): the
# programs the device check runs, the shared libraries they need that are not the C library's or
# CUDA's own, and tests.txt, one line per test of suite cuda as meson would run it (paths made
# relative to the repository root). benchmarks/gpu_check.sh --pack PACK runs it there, from the
# repository root of the same commit, without meson.
#   benchmarks/gpu_pack.sh [BUILD_DIR] [OUT.tar.xz]     (default build, .gpu/pack.tar.xz)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
OUT=${2:-.gpu/pack.tar.xz}
[ -f "$B/test_cuda_device" ] || { echo "gpu_pack: $B has no test_cuda_device (configure it with nvcc on PATH)" >&2; exit 2; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
# tests.txt: name<TAB>timeout<TAB>env assignments<TAB>program and arguments, from meson's own list.
meson introspect "$B" --tests | python3 -c '
import json, os, shlex, sys
root, build = os.path.abspath("."), os.path.abspath(sys.argv[1])
def rel(s):
    return s.replace(build + "/", "build/").replace(build, "build").replace(root + "/", "").replace(root, ".")
progs = set()
for t in json.load(sys.stdin):
    if "phax:cuda" not in t["suite"]:
        continue
    cmd = [rel(a) for a in t["cmd"]]
    progs.add(os.path.basename(t["cmd"][0]))
    env = " ".join(f"{k}={shlex.quote(rel(v))}" for k, v in sorted(t["env"].items()))
    name, limit = t["name"], t["timeout"]
    print(f"{name}\t{limit}\t{env}\t{shlex.join(cmd)}")
open(sys.argv[2], "w").write("\n".join(sorted(progs)) + "\n")
' "$B" "$stage/progs.txt" >"$stage/tests.txt"
for p in $(cat "$stage/progs.txt") bench_cuda phax phax-cuda; do
    [ -x "$B/$p" ] && cp "$B/$p" "$stage/bin/"
done
# The libraries: all that ldd resolves outside CUDA's folders and the C runtime's own.
for p in "$stage"/bin/*; do ldd "$p"; done | awk '$3 ~ /^\// {print $3}' | sort -u | while read -r l; do
    case "$l" in
    */cuda*/* | */libc.so* | */libm.so* | */libmvec.so* | */ld-linux* | */libpthread.so* | */librt.so* | */libdl.so* | */libresolv.so* | */libstdc++.so* | */libgcc_s.so*) ;;
    *) cp -L "$l" "$stage/lib/" ;;
    esac
done
mkdir -p "$(dirname "$OUT")"
tar -C "$stage" -cf - bin lib tests.txt | xz -T0 -6 >"$OUT"
echo "gpu_pack: $OUT ($(du -h "$OUT" | cut -f1); $(wc -l <"$stage/tests.txt") tests, $(ls "$stage/bin" | wc -l) programs, $(ls "$stage/lib" | wc -l) libraries)"
