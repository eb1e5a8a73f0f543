#!/usr/bin/env bash
# Install the Debian packages phax needs (only those missing; quiet when all
# are there) and configure the Meson build directory. Idempotent.
#   BUILD_DIR=build (default)   MESON_ARGS="-Dcuda=disabled" (extra setup options)
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(meson ninja-build pkg-config gcc libc6-dev libcriterion-dev libopenblas-dev libopenblas-openmp-dev libfftw3-dev
      libjansson-dev liblzma-dev xz-utils gnuplot-nox jq python3-numpy python3-pip python3-setuptools libopenmpi-dev
      openmpi-bin libdnnl-dev)

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
        SUDO=sudo
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq >/dev/null
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# nvcc (fast/cuda): NVIDIA's packages install it under /usr/local/cuda/bin, which is often not
# on PATH, and meson looks for it on PATH only. Found, the build compiles every .cu (docs/cuda.md).
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH=/usr/local/cuda/bin:$PATH
fi

BUILD_DIR=${BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
    # shellcheck disable=SC2086
    meson setup "$BUILD_DIR" ${MESON_ARGS:-} >/dev/null || { echo "setup: meson setup failed (see $BUILD_DIR/meson-logs/meson-log.txt)" >&2; exit 1; }
    echo "setup: configured $BUILD_DIR"
fi
