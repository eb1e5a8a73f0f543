#!/usr/bin/env bash
# `ninja bench`: run every benchmark driver; tables to stdout, CSV beside the build.
#   benchmarks/run.sh BUILD_DIR [family ...]
set -uo pipefail
build=${1:?build dir}; shift
out="$build/bench"
# OpenBLAS's idle workers spin for 2^28 cycles after each call and take a core
# from the next OpenMP region (8–16 ms stalls measured on 2 cores); a short
# timeout removes that. It applies to the sgemm ceiling as well, so ratios stay
# measured in one environment. OPENBLAS_CORETYPE is left as the machine sets it.
export OPENBLAS_THREAD_TIMEOUT=${OPENBLAS_THREAD_TIMEOUT:-4}
mkdir -p "$out"
fams=("$@")
((${#fams[@]})) || fams=(basic attention ssm mlstm model decode)
echo "phax benchmarks — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) threads, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
rc=0
for f in "${fams[@]}"; do
    exe="$build/bench_$f"
    [ -x "$exe" ] || { echo "bench: $exe not built"; rc=1; continue; }
    echo; echo "== $f =="
    "$exe" "$out/$f.csv" || rc=1
done
echo; echo "CSV: $out/"
exit $rc
