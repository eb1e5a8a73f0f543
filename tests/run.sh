#!/usr/bin/env bash
# The test command: install what is missing, build, run every test, and end
# with meson's summary and a line "N passed, N failed".
# Extra arguments go to `meson test` (e.g. --suite attention, or a test name).
# PHAX_TEST_SEED=<n> replays the random inputs of an earlier run.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
./scripts/setup.sh || exit 1
ninja -C "$BUILD_DIR" >/dev/null || { ninja -C "$BUILD_DIR"; echo "0 passed, 1 failed"; exit 1; }
meson test -C "$BUILD_DIR" --print-errorlogs --num-processes "$(nproc)" "$@"
rc=$?
log="$BUILD_DIR/meson-logs/testlog.json"
pass=$(grep -c '"result": "OK"' "$log" 2>/dev/null || true)
total=$(grep -c '"result": ' "$log" 2>/dev/null || true)
skip=$(grep -c '"result": "SKIP"' "$log" 2>/dev/null || true)
fail=$((total - pass - skip))
if ((skip)); then echo "${pass:-0} passed, ${fail} failed, ${skip} skipped"; else echo "${pass:-0} passed, ${fail} failed"; fi
exit $rc
