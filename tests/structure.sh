#!/usr/bin/env bash
# The structure suite: fast/ must not depend on the oracle it is checked against.
#   structure.sh no-ref-symbols LIB   LIB (the built fast/cpu static library) references no
#                                     symbol of ref: no undefined symbol starts with ref_.
#   structure.sh no-ref-includes ROOT no file under ROOT/fast/ and no ROOT/include/phax/fcpu*.h
#                                     (nor phax/ops.h, phax/numerics.h, which fast/ builds on)
#                                     includes phax/ref.h or phax/ref_model.h, or a ref/ file.
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
*)
    echo "usage: structure.sh no-ref-symbols LIB | no-ref-includes ROOT" >&2
    exit 2
    ;;
esac
