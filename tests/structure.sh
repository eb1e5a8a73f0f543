#!/usr/bin/env bash
# The structure suite: fast/ must not depend on the oracle it is checked against.
#   structure.sh no-ref-symbols LIB   LIB (the built fast/cpu static library) references no
#                                     symbol of ref: no undefined symbol starts with ref_.
#   structure.sh no-ref-includes ROOT no file under ROOT/fast/ and no ROOT/include/phax/fcpu*.h
#                                     (nor phax/ops.h, phax/numerics.h, which fast/ builds on)
#                                     includes phax/ref.h or phax/ref_model.h, or a ref/ file.
#   structure.sh runner-via-table ROOT
#                                     the fast model runner (ROOT/fast/cpu/model.c,
#                                     model_branches.c, model_internal.h) reaches ops only
#                                     through its table (phax/f32_ops.h): it calls no fcpu_
#                                     function but its own fcpu_model_*, fcpu_part_name and
#                                     fcpu_f32_ops (taking the table), includes no kernel
#                                     header (phax/fcpu.h, phax/fcpu_<family>.h), and has no
#                                     OpenMP loop (elementwise work lives in the table).
# Exit 0 when the rule holds; 1 with the offending symbols or lines otherwise.
set -euo pipefail
NM=${NM:-nm}
case "${1:-}" in
no-ref-symbols)
    lib=$2
    [ -f "$lib" ] || { echo "structure: no library at $lib" >&2; exit 1; }
    # The library must define something, or an empty nm output would pass vacuously.
    defined=$("$NM" --defined-only "$lib" 2>/dev/null | grep -c ' T fcpu_' || true)
    [ "$defined" -gt 0 ] || { echo "structure: $lib defines no fcpu_ function (wrong file?)" >&2; exit 1; }
    bad=$("$NM" --undefined-only "$lib" | awk '$1 == "U" && $2 ~ /^ref_/ {print $2}' | sort -u)
    if [ -n "$bad" ]; then
        echo "structure: $lib references ref symbols (fast/ must not call the oracle):" >&2
        echo "$bad" >&2
        exit 1
    fi
    echo "structure: $lib: $defined fcpu_ functions, no undefined ref_ symbol"
    ;;
no-ref-includes)
    root=$2
    files=$(find "$root/fast" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \); \
            ls "$root"/include/phax/fcpu*.h "$root/include/phax/ops.h" "$root/include/phax/numerics.h")
    n=$(echo "$files" | wc -l)
    [ "$n" -gt 10 ] || { echo "structure: only $n files found under $root (wrong root?)" >&2; exit 1; }
    # shellcheck disable=SC2086
    bad=$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^">]*/)?(ref|ref_model)\.h[">]|^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"][^">]*\bref/' $files || true)
    if [ -n "$bad" ]; then
        echo "structure: fast/ (or a header it uses) includes a ref header:" >&2
        echo "$bad" >&2
        exit 1
    fi
    echo "structure: $n files under fast/ and include/phax/{fcpu*,ops,numerics}.h include no ref header"
    ;;
runner-via-table)
    root=$2
    files="$root/fast/cpu/model.c $root/fast/cpu/model_branches.c $root/fast/cpu/model_internal.h"
    for f in $files; do [ -f "$f" ] || { echo "structure: no runner file $f" >&2; exit 1; }; done
    # The runner must take its table somewhere, or the rule would hold vacuously.
    # shellcheck disable=SC2086
    grep -q 'fcpu_f32_ops()' $files || { echo "structure: the runner never takes fcpu_f32_ops()" >&2; exit 1; }
    # shellcheck disable=SC2086
    calls=$(grep -noE '\bfcpu_[a-z0-9_]+[[:space:]]*\(' $files \
            | grep -vE ':fcpu_(model_[a-z0-9_]+|part_name|f32_ops)[[:space:]]*\($' || true)
    # shellcheck disable=SC2086
    incs=$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]phax/fcpu(_[a-z0-9]+)?\.h[">]' $files \
           | grep -vE 'phax/fcpu_(model|f32_ops)\.h' || true)
    # shellcheck disable=SC2086
    omp=$(grep -nE '^[[:space:]]*#[[:space:]]*pragma[[:space:]]+omp' $files || true)
    if [ -n "$calls$incs$omp" ]; then
        echo "structure: the fast model runner goes around its op table (phax/f32_ops.h):" >&2
        [ -n "$calls" ] && { echo "direct kernel calls:" >&2; echo "$calls" >&2; }
        [ -n "$incs" ] && { echo "kernel headers:" >&2; echo "$incs" >&2; }
        [ -n "$omp" ] && { echo "OpenMP loops (elementwise work belongs in the table):" >&2; echo "$omp" >&2; }
        exit 1
    fi
    echo "structure: the fast model runner calls ops only through its table"
    ;;
*)
    echo "usage: structure.sh no-ref-symbols LIB | no-ref-includes ROOT | runner-via-table ROOT" >&2
    exit 2
    ;;
esac
