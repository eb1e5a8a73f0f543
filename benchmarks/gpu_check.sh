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
set -uo pipefail
cd "$(dirname "$0")/.."
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
