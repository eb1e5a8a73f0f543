#!/usr/bin/env bash
# The structure suite: fast/ must not depend on the oracle it is checked against.
#   structure.sh no-ref-symbols LIB [PREFIX]
#                                     LIB (a built fast/ static library: fast/cpu, fast/cuda,
#                                     the emulated fast/cuda) defines PREFIX functions (default
#                                     fcpu_) and references no symbol of ref: no undefined
#                                     symbol starts with ref_ (C++ names demangled).
#   structure.sh no-ref-includes ROOT no file under ROOT/fast/ (.c .h .cu .cuh .cpp .in) and no
#                                     ROOT/include/phax/fcpu*.h, fcuda*.h (nor phax/ops.h,
#                                     phax/numerics.h, which fast/ builds on)
#                                     includes phax/ref.h or phax/ref_model.h, or a ref/ file.
#   structure.sh where-table ROOT FILE...
#                                     the "Where things live" section of each FILE (relative to
#                                     ROOT: docs/spec.md, README.md) has a table row for every op
#                                     family and model piece, and every `path` in the section
#                                     (a backticked token with a /, no <placeholder>) exists.
#   structure.sh where-paths ROOT FILE...  the same for a table by concern (no family rows)
#   structure.sh where-table-selftest ROOT FILE
#                                     where-table passes on FILE and fails, naming the path, on a
#                                     copy of FILE with one path misspelt (the check can fail).
#   structure.sh runner-via-table ROOT
#                                     the fast model runner (ROOT/fast/model/model.c,
#                                     model_branches.c, model_internal.h) reaches ops only
#                                     through its table (phax/f32_ops.h): it calls no fcpu_
#                                     or fcuda_ function but fcpu_f32_ops (its default
#                                     table), includes no kernel
#                                     header (phax/fcpu.h, phax/fcpu_<family>.h), and has no
#                                     OpenMP loop (elementwise work lives in the table).
#   structure.sh emu-names ROOT LIB   phax/fcuda_emu_names.h maps every entry point declared in
#                                     phax/fcuda.h and phax/fcuda_decode.h (and fast/cuda/blas.cuh's
#                                     fcuda_blas_gemm) to fcuda_emu_<op> and unmaps each again;
#                                     LIB (the emulated fast/cuda) defines fcuda_emu_<op> for
#                                     every one and no global fcuda_ symbol of the device's names.
# Exit 0 when the rule holds; 1 with the offending symbols, lines or paths otherwise.
set -euo pipefail
NM=${NM:-nm}
case "${1:-}" in
no-ref-symbols)
    lib=$2
    prefix=${3:-fcpu_}
    [ -f "$lib" ] || { echo "structure: no library at $lib" >&2; exit 1; }
    # The library must define something, or an empty nm output would pass vacuously.
    defined=$("$NM" --defined-only "$lib" 2>/dev/null | grep -c " T $prefix" || true)
    [ "$defined" -gt 0 ] || { echo "structure: $lib defines no $prefix function (wrong file?)" >&2; exit 1; }
    # -C: a C++ reference to a ref function reads ref_...(args) once demangled.
    bad=$("$NM" -C --undefined-only "$lib" | awk '$1 == "U" && $2 ~ /^ref_/ {print $2}' | sort -u)
    if [ -n "$bad" ]; then
        echo "structure: $lib references ref symbols (fast/ must not call the oracle):" >&2
        echo "$bad" >&2
        exit 1
    fi
    echo "structure: $lib: $defined $prefix functions, no undefined ref_ symbol"
    ;;
no-ref-includes)
    root=$2
    files=$(find "$root/fast" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \
                 -o -name '*.cpp' -o -name '*.in' \); \
            ls "$root"/include/phax/fcpu*.h "$root"/include/phax/fcuda*.h "$root/include/phax/ops.h" \
               "$root/include/phax/numerics.h")
    n=$(echo "$files" | wc -l)
    [ "$n" -gt 10 ] || { echo "structure: only $n files found under $root (wrong root?)" >&2; exit 1; }
    # shellcheck disable=SC2086
    bad=$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^">]*/)?(ref|ref_model)\.h[">]|^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"][^">]*\bref/' $files || true)
    if [ -n "$bad" ]; then
        echo "structure: fast/ (or a header it uses) includes a ref header:" >&2
        echo "$bad" >&2
        exit 1
    fi
    echo "structure: $n files under fast/ and include/phax/{fcpu*,fcuda*,ops,numerics}.h include no ref header"
    ;;
where-table | where-paths)
    # where-paths: only the paths (a table by concern, docs/architecture.md); where-table: the
    # paths and a row per op family.
    mode=$1 root=$2
    shift 2
    [ $# -gt 0 ] || { echo "structure: $mode: no file given" >&2; exit 2; }
    families="embedding linear norm activation ffn rope attention ssm mlstm mix loss adamw gemm model plan decoder backend"
    [ "$mode" = where-table ] || families=""
    status=0
    for f in "$@"; do
        path=$f
        [ -f "$path" ] || path=$root/$f
        [ -f "$path" ] || { echo "structure: where-table: no file $f under $root" >&2; status=1; continue; }
        # The section: from a "Where things live" heading to the next heading.
        section=$(awk '/^#+ / { if (on) exit; if (tolower($0) ~ /^#+ where things live/) on = 1 } on' "$path")
        [ -n "$section" ] || { echo "structure: $f: no \"Where things live\" section" >&2; status=1; continue; }
        rows=$(printf '%s\n' "$section" | awk -F'|' '/^\|/ && !/^\|[-| ]*$/ { gsub(/^ +| +$/, "", $2); print $2 }')
        for fam in $families; do
            # A here-string, not printf | grep -q: grep -q leaves at the first match, and under
            # pipefail printf's write into the closed pipe (SIGPIPE) failed the pipeline at random.
            grep -qx "$fam" <<<"$rows" || { echo "structure: $f: no row for $fam" >&2; status=1; }
        done
        paths=$(printf '%s\n' "$section" | grep -o '`[^`]*`' | tr -d '`' | grep '/' | grep -v '[<> ]' | sort -u || true)
        n=$(printf '%s\n' "$paths" | grep -c . || true)
        [ "$n" -ge 20 ] || { echo "structure: $f: only $n paths in the table (wrong section?)" >&2; status=1; }
        missing=0
        for p in $paths; do
            [ -e "$root/$p" ] || { echo "structure: $f: $p does not exist" >&2; missing=$((missing + 1)); }
        done
        [ "$missing" -eq 0 ] || status=1
        [ "$status" -ne 0 ] || echo "structure: $f: $n paths, every one exists${families:+; a row for each of the ${families// /, }}"
    done
    exit $status
    ;;
where-table-selftest)
    root=$2
    f=$3
    self=${BASH_SOURCE[0]}
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    cp "$root/$f" "$tmp/good.md"
    bash "$self" where-table "$root" "$tmp/good.md" >/dev/null || { echo "structure: where-table fails on $f itself" >&2; exit 1; }
    # Misspell the first ref/ path of the table (ref/x.c -> ref/xx.c).
    victim=$(grep -o '`ref/[a-z_]*\.c`' "$tmp/good.md" | head -1 | tr -d '`')
    [ -n "$victim" ] || { echo "structure: $f has no ref/ path to misspell" >&2; exit 1; }
    bad=${victim%.c}x.c
    sed "s|\`$victim\`|\`$bad\`|" "$tmp/good.md" > "$tmp/bad.md"
    if out=$(bash "$self" where-table "$root" "$tmp/bad.md" 2>&1); then
        echo "structure: where-table passed a table with $bad (misspelt from $victim)" >&2
        exit 1
    fi
    grep -q "$bad does not exist" <<<"$out" || { echo "structure: where-table failed without naming $bad: $out" >&2; exit 1; }
    echo "structure: where-table catches a misspelt path: $out"
    ;;
runner-via-table)
    root=$2
    files="$root/fast/model/model.c $root/fast/model/model_branches.c $root/fast/model/model_internal.h"
    for f in $files; do [ -f "$f" ] || { echo "structure: no runner file $f" >&2; exit 1; }; done
    # The runner must take its table somewhere, or the rule would hold vacuously.
    # shellcheck disable=SC2086
    grep -q 'fcpu_f32_ops()' $files || { echo "structure: the runner never takes fcpu_f32_ops()" >&2; exit 1; }
    # shellcheck disable=SC2086
    calls=$(grep -noE '\bfc(pu|uda)_[a-z0-9_]+[[:space:]]*\(' $files \
            | grep -vE ':fcpu_f32_ops[[:space:]]*\($' || true)
    # shellcheck disable=SC2086
    incs=$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]phax/fc(pu|uda)(_[a-z0-9]+)?\.h[">]' $files \
           | grep -vE 'phax/fcpu_f32_ops\.h' || true)
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
emu-names)
    root=$2
    lib=$3
    names=$root/include/phax/fcuda_emu_names.h
    [ -f "$lib" ] && [ -f "$names" ] || { echo "structure: no $lib or $names" >&2; exit 1; }
    # Declared entry points: names before "(" in the headers' entry-point sections.
    declared=$( (sed -n '/^\/\/ --- the entry points/,$p' "$root/include/phax/fcuda.h" "$root/include/phax/fcuda_decode.h";
                 grep -E '^int fcuda_blas_gemm\(' "$root/fast/cuda/blas.cuh") |
               grep -v '^//' | grep -oE '\bfcuda_[a-z0-9_]+\(' | tr -d '(' | sort -u)
    mapped=$(grep -oE '^#define fcuda_[a-z0-9_]+ +fcuda_emu_[a-z0-9_]+$' "$names" | awk '{ if ("fcuda_emu_" substr($2, 7) != $3) print "BAD " $2; else print $2 }' | sort)
    unmapped=$(grep -oE '^#undef fcuda_[a-z0-9_]+$' "$names" | awk '{print $2}' | sort)
    [ "$(echo "$declared" | wc -l)" -gt 50 ] || { echo "structure: only $(echo "$declared" | wc -l) entry points found (wrong root?)" >&2; exit 1; }
    bad=$(diff <(echo "$declared") <(echo "$mapped") || true)
    [ -z "$bad" ] || { echo "structure: $names's maps differ from the declared entry points (< declared, > mapped):" >&2; echo "$bad" >&2; exit 1; }
    bad=$(diff <(echo "$mapped") <(echo "$unmapped") || true)
    [ -z "$bad" ] || { echo "structure: $names does not unmap what it maps (< mapped, > unmapped):" >&2; echo "$bad" >&2; exit 1; }
    # -C: a C++-linkage entry (fcuda_blas_gemm) reads name(args) once demangled.
    defs=$("$NM" -C --defined-only "$lib" | awk '$2 ~ /^[TWDBR]$/ {sub(/^[^ ]* [^ ]* /, ""); sub(/\(.*/, ""); print}' | sort -u)
    leaked=$(echo "$defs" | grep -E '^fcuda_' | grep -vE '^fcuda_emu_' || true)
    [ -z "$leaked" ] || { echo "structure: $lib defines the device's names (missing from $names):" >&2; echo "$leaked" >&2; exit 1; }
    missing=$(comm -23 <(echo "$declared" | sed 's/^fcuda_/fcuda_emu_/') <(echo "$defs") || true)
    [ -z "$missing" ] || { echo "structure: $lib lacks declared entry points:" >&2; echo "$missing" >&2; exit 1; }
    echo "structure: $(echo "$declared" | wc -l) fast/cuda entry points, each fcuda_emu_<op> in $lib"
    ;;
*)
    echo "usage: structure.sh no-ref-symbols LIB | no-ref-includes ROOT | where-table ROOT FILE... | where-paths ROOT FILE... | where-table-selftest ROOT FILE | runner-via-table ROOT | emu-names ROOT LIB" >&2
    exit 2
    ;;
esac
