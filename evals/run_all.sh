#!/usr/bin/env bash
# The main job. Today phax has its float64 oracle (ref/) and nothing to train
# yet, so this builds everything and runs the ref smoke demo; the evaluation
# runs and figures (perplexity, needle-in-a-haystack, efficiency) join here as
# the models, fast backends and trainer land.
#   ./evals/run_all.sh [--seed N] [--T N]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
./scripts/setup.sh
ninja -C "$BUILD_DIR" >/dev/null
"$BUILD_DIR/phax" info
"$BUILD_DIR/phax" demo "$@"
