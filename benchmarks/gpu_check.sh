#!/usr/bin/env bash
# The prepared GPU check (issue 15, section 3): run it on a machine with an NVIDIA GPU, from a
# build made beforehand (no network there): the device's facts, every CUDA test on the real
# device (suite cuda: every row of the per-op harness, the model and decoder rows), the emulated
# tier for comparison (suite cuda_emu), the GPU benchmarks (bench_cuda: SGEMM FP32/TF32 and copy
# ceilings, fused attention GFLOP/s, training tokens/s and peak device memory vs T for every
# family through the cuda backend; the device decoder's prefill and step tokens/s at 1k, 4k, 16k),
# and a short table last. Exit status: non-zero if any test
# failed. Sized to finish in under 8 minutes on an H200 (the benchmark is cut at 5).
#   benchmarks/gpu_check.sh [BUILD_DIR]      (default build; the device must be visible)
#   benchmarks/gpu_check.sh --pack PACK      (a machine without phax's packages or meson: the
#       programs, libraries and test list that benchmarks/gpu_pack.sh packed from a build of this
#       commit; suite cuda runs 8 at a time, each test's output in $OUT/cuda_tests.log)
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --pack ]; then
    P=${2:?gpu_check: --pack needs the packed file}
    X=.gpu/unpacked
    rm -rf "$X" && mkdir -p "$X" build && tar -xJf "$P" -C "$X" && cp "$X"/bin/* build/ || exit 2
    # CUDA's libraries from the toolkit, else from the nvidia-* Python packages; phax's from the pack.
    extra=$(python3 -c 'import glob, os, nvidia; print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(d + "/*/lib/lib*.so*")})))' 2>/dev/null)
    export LD_LIBRARY_PATH=$PWD/$X/lib:/usr/local/cuda/lib64:${extra}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    echo "== device"
    nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader
    build/phax info 2>&1 | grep -i cuda
    t0=$SECONDS
    echo "== tests on the device (suite cuda, $(wc -l <"$X/tests.txt") tests, 8 at a time)"
    log=${OUT:-.gpu}/cuda_tests.log
    : >"$log"
    # Each line: name, timeout, env assignments, command; a test's verdict is its exit status.
    run_one() {
        IFS=$'\t' read -r name limit envs cmd <<<"$1"
        eval "env $envs timeout $limit $cmd" >"$2/${name//\//_}.log" 2>&1
        rc=$?
        case $rc in 0) echo "ok   $name" ;; 77) echo "SKIP $name" ;; *) echo "FAIL $name (rc $rc)" ;; esac
    }
    export -f run_one
    mkdir -p "$X/logs"
    tr '\n' '\0' <"$X/tests.txt" | xargs -0 -P 8 -I{} bash -c 'run_one "$1" "$2"' _ {} "$X/logs" | sort >"$X/verdicts"
    for f in "$X"/logs/*.log; do echo "=== $(basename "$f" .log)"; cat "$f"; done >"$log"
    grep FAIL "$X/verdicts"
    fails=$(grep -c FAIL "$X/verdicts")
    echo "suite cuda on the device: $(grep -c '^ok' "$X/verdicts") ok, $fails failed, $(grep -c SKIP "$X/verdicts") skipped (not-applicable rows; all, if no device) ($((SECONDS - t0)) s)"
    echo "== GPU benchmarks (bench_cuda)"
    timeout "${BENCH_S:-300}" build/bench_cuda --steps 3 --csv "${OUT:-.gpu}/gpu_check_bench.csv" 2>&1 | tail -80
    brc=${PIPESTATUS[0]}
    echo "== summary ($((SECONDS - t0)) s): suite cuda $([ "$fails" = 0 ] && echo pass || echo "FAIL ($fails)"), bench_cuda rc $brc"
    exit $((fails > 0))
fi
B=${1:-build}
[ -f "$B/build.ninja" ] || { echo "gpu_check: no build in $B (meson setup with nvcc on PATH first)" >&2; exit 2; }
[ -f "$B/test_cuda_device" ] || { echo "gpu_check: $B was configured without nvcc (no test_cuda_device)" >&2; exit 2; }
echo "== device"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader
"$B/phax" info 2>/dev/null | grep -i '^cuda' || true
t0=$SECONDS
echo "== tests on the device (suite cuda)"
meson test -C "$B" --no-rebuild --suite cuda --print-errorlogs -v 2>&1 | tee /tmp/gpu_check_cuda.$$ | tail -40
dev_rc=${PIPESTATUS[0]}
echo "== the same kernels on the CPU emulation (suite cuda_emu)"
meson test -C "$B" --no-rebuild --suite cuda_emu --print-errorlogs 2>&1 | tail -8
emu_rc=${PIPESTATUS[0]}
echo "== GPU benchmarks (bench_cuda)"
timeout 300 "$B/bench_cuda" --steps 3 --csv /tmp/gpu_check_bench.$$.csv 2>&1 | tee /tmp/gpu_check_bench.$$ | tail -80
bench_rc=${PIPESTATUS[0]}
echo "== summary ($((SECONDS - t0)) s)"
printf '%-28s %s\n' "suite cuda (device)" "$([ "$dev_rc" = 0 ] && echo pass || echo "FAIL (rc $dev_rc)")"
grep -E 'skipped|SKIP' /tmp/gpu_check_cuda.$$ | head -3
printf '%-28s %s\n' "suite cuda_emu (emulated)" "$([ "$emu_rc" = 0 ] && echo pass || echo "FAIL (rc $emu_rc)")"
printf '%-28s %s\n' "bench_cuda" "$([ "$bench_rc" = 0 ] && echo done || echo "FAIL or cut (rc $bench_rc)")"
grep -E '^ceilings' /tmp/gpu_check_bench.$$ || true
[ -f /tmp/gpu_check_bench.$$.csv ] && cp /tmp/gpu_check_bench.$$.csv "${OUT:-.}/gpu_check_bench.csv" 2>/dev/null
rm -f /tmp/gpu_check_cuda.$$ /tmp/gpu_check_bench.$$ /tmp/gpu_check_bench.$$.csv
exit $((dev_rc || emu_rc))
