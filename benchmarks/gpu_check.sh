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
OUTD=${OUT:-.gpu}
mkdir -p "$OUTD"
if [ "${1:-}" = --pack ]; then
    P=${2:?gpu_check: --pack needs the packed file}
    . benchmarks/gpu_env.sh
    X=$GPU_UNPACKED B=build
    rm -rf "$X" && mkdir -p "$X/logs" "$B" && tar -xJf "$P" -C "$X" && cp "$X"/bin/* "$B"/ || exit 2
else
    B=${1:-build}
    [ -f "$B/build.ninja" ] || { echo "gpu_check: no build in $B (meson setup with nvcc on PATH first)" >&2; exit 2; }
    [ -f "$B/test_cuda_device" ] || { echo "gpu_check: $B was configured without nvcc (no test_cuda_device)" >&2; exit 2; }
fi
echo "== device"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader
"$B/phax" info 2>/dev/null | grep -i '^cuda' || true
t0=$SECONDS
emu_rc=0
if [ -n "${X:-}" ]; then
    echo "== tests on the device (suite cuda from the pack, $(wc -l <"$X/tests.txt") tests, 8 at a time)"
    # Each line of tests.txt: name, timeout, env assignments, command; the verdict is the exit
    # status (77: meson's skip). Outputs in $OUT/cuda_tests.log.
    run_one() {
        IFS=$'\t' read -r name limit envs cmd <<<"$1"
        eval "env $envs timeout $limit $cmd" >"$2/${name//\//_}.log" 2>&1
        case $? in 0) echo "ok   $name" ;; 77) echo "SKIP $name" ;; *) echo "FAIL $name" ;; esac
    }
    export -f run_one
    tr '\n' '\0' <"$X/tests.txt" | xargs -0 -P 8 -I{} bash -c 'run_one "$1" "$2"' _ {} "$X/logs" | sort >"$X/verdicts"
    for f in "$X"/logs/*.log; do echo "=== $(basename "$f" .log)"; cat "$f"; done >"$OUTD/cuda_tests.log"
    grep -E '^(FAIL|SKIP)' "$X/verdicts" | head -20
    dev_rc=$(grep -c '^FAIL' "$X/verdicts")
    dev_line="$(grep -c '^ok' "$X/verdicts") ok, $dev_rc failed, $(grep -c '^SKIP' "$X/verdicts") skipped"
else
    echo "== tests on the device (suite cuda)"
    meson test -C "$B" --no-rebuild --suite cuda --print-errorlogs -v 2>&1 | tee "$OUTD/cuda_tests.log" | tail -40
    dev_rc=${PIPESTATUS[0]}
    dev_line="rc $dev_rc; $(grep -cE 'SKIP' "$OUTD/cuda_tests.log") skip lines"
    echo "== the same kernels on the CPU emulation (suite cuda_emu)"
    meson test -C "$B" --no-rebuild --suite cuda_emu --print-errorlogs 2>&1 | tail -8
    emu_rc=${PIPESTATUS[0]}
fi
echo "== GPU benchmarks (bench_cuda)"
timeout "${BENCH_S:-300}" "$B/bench_cuda" --steps 3 --csv "$OUTD/gpu_check_bench.csv" 2>&1 | tail -80
bench_rc=${PIPESTATUS[0]}
echo "== summary ($((SECONDS - t0)) s)"
printf '%-28s %s\n' "suite cuda (device)" "$([ "$dev_rc" = 0 ] && echo pass || echo FAIL): $dev_line"
[ -z "${X:-}" ] && printf '%-28s %s\n' "suite cuda_emu (emulated)" "$([ "$emu_rc" = 0 ] && echo pass || echo "FAIL (rc $emu_rc)")"
printf '%-28s %s\n' "bench_cuda" "$([ "$bench_rc" = 0 ] && echo done || echo "FAIL or cut (rc $bench_rc)")"
exit $((dev_rc != 0 || emu_rc != 0))
