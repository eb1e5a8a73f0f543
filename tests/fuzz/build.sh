#!/usr/bin/env bash
# Build the libFuzzer harnesses with clang: coverage-guided, AddressSanitizer +
# UBSan, core/ and ref/ instrumented too. Output: $FUZZ_BUILD_DIR (default
# build-fuzz) with fuzz_<harness> for each harness in tests/fuzz/fuzz_*.c.
# Not meson: the main build's dependencies (OpenMP, OpenBLAS, FFTW, Criterion)
# are not needed here and clang's OpenMP would be one more package.
# Needs Debian's clang and libclang-rt-14-dev (scripts/setup.sh does not
# install them; .ci/run does).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${FUZZ_BUILD_DIR:-build-fuzz}
CC=${FUZZ_CC:-clang}
command -v "$CC" >/dev/null || { echo "fuzz: $CC not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }
mkdir -p "$OUT/obj"
CFLAGS=(-std=c11 -D_POSIX_C_SOURCE=200809L -Iinclude -g -O1 -fno-omit-frame-pointer
        -fsanitize=address,undefined -fno-sanitize-recover=all -fsanitize=fuzzer-no-link)
LIBS=(-ljansson -llzma -lm)

# One object per library source, rebuilt when it or any header is newer.
newest_hdr=$(ls -t include/phax/*.h | head -1)
objs=()
jobs=()
for src in core/*.c ref/*.c; do
    obj="$OUT/obj/$(echo "${src%.c}" | tr / _).o"
    objs+=("$obj")
    extra=()
    [[ $src == ref/* ]] && extra=(-ffp-contract=off -fno-fast-math)
    if [[ ! -f $obj || $src -nt $obj || $newest_hdr -nt $obj || $0 -nt $obj ]]; then
        jobs+=("$CC ${CFLAGS[*]} ${extra[*]} -c $src -o $obj")
    fi
done
if ((${#jobs[@]})); then
    printf '%s\n' "${jobs[@]}" | xargs -P "$(nproc)" -I{} sh -c '{}' || { echo "fuzz: compiling the libraries failed" >&2; exit 1; }
fi

for h in tests/fuzz/fuzz_*.c; do
    name=$(basename "${h%.c}")
    [[ $name == fuzz_util || $name == fuzz_selftest ]] && continue
    extra=()
    # src/oracle*.c as they are (with phax check's precision baselines, check/, which it calls);
    # its exit (phax_die) becomes the harness's longjmp.
    [[ $name == fuzz_oracle ]] && extra=(-Dphax_die=fz_oracle_die -ffp-contract=off src/oracle.c src/oracle_ctx.c src/oracle_ops.c src/oracle_examples.c src/tool_args.c src/cli.c check/*.c)
    # phax train's state readers as they are; their refusals reach the harness through cli_die_hook.
    [[ $name == fuzz_trainstate ]] && extra=(-Isrc src/train_opts.c src/train_data.c src/cli.c)
    [[ $name == fuzz_trainlog ]] && extra=(-Isrc src/train_log.c src/cli.c)
    # Every command's parser (src/cmd_args.h); refusals and --help through cli_die_hook / cli_exit_hook.
    [[ $name == fuzz_cli ]] && extra=(-Isrc src/cli.c src/eval_args.c src/niah_args.c src/recall_args.c
                                      src/generate_args.c src/tool_args.c src/train_opts.c check/round.c)
    "$CC" "${CFLAGS[@]}" -fsanitize=fuzzer "$h" tests/fuzz/fuzz_util.c "${extra[@]}" "${objs[@]}" "${LIBS[@]}" \
        -o "$OUT/$name" || { echo "fuzz: building $name failed" >&2; exit 1; }
done
echo "fuzz: harnesses in $OUT: $(cd "$OUT" && ls fuzz_* | tr '\n' ' ')"
