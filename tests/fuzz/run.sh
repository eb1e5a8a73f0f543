#!/usr/bin/env bash
# Fuzz every harness (or the ones named) for SECONDS each, under ASan + UBSan:
#   tests/fuzz/run.sh [-s SECONDS] [-j PARALLEL] [-k] [HARNESS...]   (defaults: 30 s, 1 at a time)
# $FUZZ_SEED: libFuzzer's -seed (default 0: a fresh random seed each run; CI fixes it,
#     so a finding there comes from the change under test, not from the draw).
# -k: keep going after a finding (libFuzzer's fork mode; every reproducer is kept
#     in $FUZZ_BUILD_DIR/crashes/<h>/), for long exploratory runs.
# Builds with build.sh first. Each harness starts from tests/fuzz/seeds/<h>
# and keeps what it finds in $FUZZ_BUILD_DIR/corpus/<h> (reused next time).
# A crash, leak, timeout (> 10 s for one input) or an allocation over
# FUZZ_MALLOC_MB (default 256 MB; issue 11: no input under 1 MB may need much
# more than 100 MB) fails the run; its reproducer's path is printed, to be
# replayed with build/fuzz_replay_<h> <h> PATH and added under tests/fuzz/regress/<h>/.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${FUZZ_BUILD_DIR:-build-fuzz}
secs=30 par=1 keep=0
while getopts "s:j:k" o; do
    case $o in
    s) secs=$OPTARG ;;
    j) par=$OPTARG ;;
    k) keep=1 ;;
    *) echo "usage: $0 [-s SECONDS] [-j PARALLEL] [HARNESS...]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
tests/fuzz/build.sh >/dev/null || exit 1
harnesses=("$@")
# Default: every harness of tests/fuzz (fuzz_<h>.c; fuzz_util and the replay's selftest are none).
if ((${#harnesses[@]} == 0)); then
    for f in tests/fuzz/fuzz_*.c; do
        h=$(basename "${f%.c}")
        h=${h#fuzz_}
        [[ $h == util || $h == selftest ]] || harnesses+=("$h")
    done
fi

one() {  # harness → exit status; log in $OUT/logs/<h>.log
    local h=$1 corpus="$OUT/corpus/$1" crashes="$PWD/$OUT/crashes/$1/"  # absolute: a harness may chdir
    mkdir -p "$corpus" "$crashes" "$OUT/logs"
    [ -x "$OUT/fuzz_$h" ] || { echo "fuzz: no harness $h" >&2; return 1; }
    local opts=()
    case $h in config | checkpoint | oracle) opts+=(-dict=tests/fuzz/config.dict) ;; esac
    ((keep)) && opts+=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1} \
        "$OUT/fuzz_$h" "$corpus" "tests/fuzz/seeds/$h" -max_total_time="$secs" -timeout=10 \
        -rss_limit_mb=2048 -malloc_limit_mb="${FUZZ_MALLOC_MB:-256}" -max_len=65536 \
        -seed="${FUZZ_SEED:-0}" -artifact_prefix="$crashes" -print_final_stats=1 "${opts[@]}" >"$OUT/logs/$h.log" 2>&1
    local rc=$? runs
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$OUT/logs/$h.log" | grep -o '[0-9]*$' | tail -1)
    # Fork mode prints no final stats: its last status line has the count (#N).
    [ -n "$runs" ] || runs=$(grep -o '^#[0-9]*' "$OUT/logs/$h.log" | tail -1 | tr -d '#')
    if ((keep)); then
        echo "fuzz: $h ${runs:-?} runs in ${secs} s (keep going), $(ls "$crashes" | wc -l) reproducer(s) in $crashes"
        return 0
    fi
    if ((rc)); then
        local art
        art=$(grep -o "Test unit written to .*" "$OUT/logs/$h.log" | tail -1 | sed 's/Test unit written to //')
        echo "fuzz: $h FAILED after ${runs:-?} runs: $(grep -m1 -E '^==[0-9]+==ERROR|runtime error|property violated|ERROR: libFuzzer' "$OUT/logs/$h.log" | cut -c1-200)"
        echo "fuzz: $h reproducer: ${art:-none written} (log: $OUT/logs/$h.log)"
    else
        echo "fuzz: $h ok, ${runs:-?} runs in ${secs} s, corpus $(ls "$corpus" | wc -l) files"
    fi
    return $rc
}
# The harnesses write their inputs (and phax its outputs, with fsync) to temporary
# files: on tmpfs that costs nothing, on a disk it makes the checkpoint harness ~50x slower.
if [ -z "${FUZZ_TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then FUZZ_TMPDIR=/dev/shm; fi
# One folder for the whole run, removed at the end (an input that crashes cannot clean up).
run_tmp=$(mktemp -d "${FUZZ_TMPDIR:-${TMPDIR:-/tmp}}/phax-fuzz-run.XXXXXX") || exit 1
trap 'rm -rf "$run_tmp"' EXIT
export TMPDIR=$run_tmp
export -f one
export OUT secs keep
printf '%s\n' "${harnesses[@]}" | xargs -P "$par" -I{} bash -c 'one {}'
rc=$?
if ((keep)); then
    echo "fuzz: done (keep going); reproducers, if any, are listed above"
elif ((rc == 0)); then
    echo "fuzz: every harness ran ${secs} s without a finding"
else
    echo "fuzz: findings above (replay one: build/fuzz_replay_<h> <h> PATH)"
fi
exit $((rc != 0))
