#!/usr/bin/env bash
# Install what benchmarks/torch_baseline.py needs (only the missing Debian packages):
# Debian's python3 with numpy and torch, and the pieces of its "tuned" environment
# (jemalloc, OpenBLAS's OpenMP build). Then `torch_baseline.py --check-env` says
# whether "tuned" is complete. Root or sudo.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(python3 python3-numpy python3-torch libjemalloc2 libopenblas0-openmp)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "benchmarks/setup.sh: installing ${missing[*]}"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null || { echo "benchmarks/setup.sh: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
        SUDO=sudo
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq >/dev/null
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
/usr/bin/python3 benchmarks/torch_baseline.py --check-env
