#!/usr/bin/env bash
# The main job: every claim of the two papers tested at this machine's scale, with
# seeds, verdicts and figures. Installs what is missing (scripts/setup.sh), builds,
# then runs evals/phax_evals (Python 3 standard library, which Meson itself needs):
# training runs, evaluations, benchmarks, gnuplot figures and OUT/summary.md.
#   ./evals/run_all.sh [--quick | --full] [--data DIR] [--out DIR] [--only EXP,...] [--force]
# See evals/README.md and --help.
set -euo pipefail
cd "$(dirname "$0")/.."
for a in "$@"; do
    case $a in -h | --help) exec python3 -m evals.phax_evals.main --help ;; esac
done
# Bit-reproducibility (evals/README.md): unless BUILD_DIR names a build, fast/cpu is built for
# this CPU's x86-64 level (-Dportable) instead of -march=native, and OpenBLAS's kernel is pinned
# to that level's, so that every CPU of the level computes the same bits; the thread count is
# stated (each run's provenance.json records all three).
if [ -z "${BUILD_DIR:-}" ]; then
    LEVEL=$(python3 -c 'from evals.phax_evals.provenance import cpu_info; print(cpu_info()["isa"] or "")')
    case $LEVEL in
        x86-64-v4) CORE=SkylakeX ;;
        x86-64-v3) CORE=Haswell ;;
        *) LEVEL="" ;;
    esac
    if [ -n "$LEVEL" ]; then
        BUILD_DIR=build-$LEVEL
        export MESON_ARGS="-Dportable=$LEVEL -Dtests=disabled -Dcuda=disabled ${MESON_ARGS:-}"
        export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$CORE}
    fi
fi
BUILD_DIR=${BUILD_DIR:-build}
export BUILD_DIR
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
echo "== setup: packages and build ($BUILD_DIR) =="
./scripts/setup.sh || { echo "run_all: setup: scripts/setup.sh failed" >&2; exit 1; }
mkdir -p evals/out
if ! ninja -C "$BUILD_DIR" phax bench_model bench_decode >evals/out/build.log 2>&1; then
    echo "run_all: build: ninja -C $BUILD_DIR failed (log: evals/out/build.log)" >&2
    exit 1
fi
command -v gnuplot >/dev/null || { echo "run_all: gnuplot is missing (scripts/setup.sh installs it)" >&2; exit 1; }
export OPENBLAS_THREAD_TIMEOUT=${OPENBLAS_THREAD_TIMEOUT:-4}  # as `ninja bench`: no spinning OpenBLAS threads
exec python3 -m evals.phax_evals.main "$@"
