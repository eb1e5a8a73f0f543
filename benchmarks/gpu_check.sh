#!/usr/bin/env bash
# The prepared GPU check (issue 15, section 3): run it on a machine with an NVIDIA GPU, from a
# build made beforehand (no network there): the device's facts, every CUDA test on the real
# device (suite cuda), the emulated tier for comparison (suite cuda_emu), and a short table
# last. Today the CUDA tier has linear (FP32 and TF32), rmsnorm, gelu/silu and embedding;
# GPU benchmarks (GFLOP/s beside cuBLAS, model tokens/s vs T) come with the kernels that
# need them. Exit status: non-zero if any test failed.
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
echo "== summary ($((SECONDS - t0)) s)"
printf '%-28s %s\n' "suite cuda (device)" "$([ "$dev_rc" = 0 ] && echo pass || echo "FAIL (rc $dev_rc)")"
grep -E 'skipped|SKIP' /tmp/gpu_check_cuda.$$ | head -3
printf '%-28s %s\n' "suite cuda_emu (emulated)" "$([ "$emu_rc" = 0 ] && echo pass || echo "FAIL (rc $emu_rc)")"
rm -f /tmp/gpu_check_cuda.$$
exit $((dev_rc || emu_rc))
