#!/usr/bin/env bash
# kill -9 (or SIGTERM) at random moments during `phax train`, then resume:
# every run must resume and end bit-identical to one never stopped (model,
# training state, vocabulary, and the log but for its timing field).
#
#   tests/kill_resume.sh PHAX_BIN [TRIALS [SIGNAL [SEED]]]
#
# TRIALS (default 30) runs of a tiny model with a checkpoint every step; in
# each, up to three attempts are killed with SIGNAL (KILL, default, or TERM)
# after a random delay, then the run is finished. After a kill with no
# checkpoint yet, the same command is run again (docs/train.md: it starts
# over in the folder); otherwise `phax train --resume`. Prints one line per
# trial and a summary; exit 0 only when every trial resumed and matched, and
# left no litter: after the finished run, the folder holds only the current
# link, generations (ckpt-N), log.jsonl and cache/ with its token caches (no
# temporary file or folder of an interrupted write: *.tmp-*, .ckpt-tmp-*,
# .checkpoint.safetensors.link-*).
set -uo pipefail
PHAX=${1:?usage: $0 PHAX_BIN [TRIALS [SIGNAL [SEED]]]}
TRIALS=${2:-30}
SIG=${3:-KILL}
SEED=${4:-$$}
RANDOM=$SEED
export OMP_NUM_THREADS=1  # bit-identical resume needs the same thread count

work=$(mktemp -d "${TMPDIR:-/tmp}/phax_kill_XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
# A small word corpus (train + valid) so tokenizing, caching and evaluation run too.
words=(the cat sat on mat dog ran to red house a small bird flew over old tree my friend drank tea)
for f in train valid; do
    n=$([ $f = train ] && echo 400 || echo 40)
    for ((i = 0; i < n; i++)); do
        line=""
        for ((k = 0; k < 8; k++)); do line+="${words[(i * 7 + k * 3 + ${#f}) % ${#words[@]}]} "; done
        echo "$line"
    done >"$work/$f.txt"
done
train=("$PHAX" train --family swax --train "$work/train.txt" --valid "$work/valid.txt"
    --set d_model=32 --set n_layers=2 --seq 16 --batch 4 --steps 30 --warmup 3
    --eval-every 7 --eval-tokens 200 --ckpt-every 1 --log-every 1000)

strip_timing() { sed -e 's/, "tokens_per_s": [^}]*//' "$1"; }

t0=$(date +%s%N)
"${train[@]}" --out "$work/ref" >/dev/null 2>"$work/ref.err" || {
    echo "reference run failed: $(cat "$work/ref.err")"
    exit 1
}
ref_ms=$((($(date +%s%N) - t0) / 1000000))
# The folder of the current checkpoint (a generation, or the run folder itself
# for a phax that kept a single checkpoint there).
ckdir() { dirname "$(realpath "$1/checkpoint.safetensors")"; }
ref_dir=$(ckdir "$work/ref")

bad=0 unresumable=0 identical=0 kills=0 restarts=0 hit=0 littered=0
# Entries of a finished run folder that are not the run's own (one per line, relative).
litter() {
    (cd "$1" && find . -mindepth 1 \( -name '*.tmp-*' -o -name '.ckpt-tmp-*' -o -name '.checkpoint.safetensors.link-*' \
        -o \( -path './cache/*' ! -name '*.tok' \) \) -print)
}
for ((t = 1; t <= TRIALS; t++)); do
    run="$work/run$t"
    note=""
    for ((attempt = 0; attempt < 4; attempt++)); do
        if [ -e "$run/checkpoint.safetensors" ]; then
            cmd=("$PHAX" train --resume --out "$run")
        else
            cmd=("${train[@]}" --out "$run")
            ((attempt > 0)) && restarts=$((restarts + 1))
        fi
        "${cmd[@]}" >"$work/out" 2>"$work/err" &
        pid=$!
        if ((attempt < 3 && RANDOM % 4 != 0)); then
            # A random moment within the run (a whole run takes ~ref_ms, a
            # resumed one less).
            d=$((RANDOM % (ref_ms * 3 / 4 + 20)))
            sleep "$(printf '%d.%03d' $((d / 1000)) $((d % 1000)))"
            kill -s "$SIG" "$pid" 2>/dev/null && kills=$((kills + 1)) && note+=" kill@${d}ms"
        else
            attempt=3  # this attempt runs to the end
        fi
        wait "$pid"
        rc=$?
        # Killed (137 / 143), or stopped by SIGTERM with a checkpoint (143): go on.
        if ((rc != 0 && rc != 137 && rc != 143)); then
            echo "trial $t: '${cmd[*]:1:2}' exit $rc: $(head -c 300 "$work/err")"
            unresumable=$((unresumable + 1))
            continue 2
        fi
        ((attempt == 3 && rc == 0)) && break
    done
    if ((rc != 0)); then
        echo "trial $t: did not finish (exit $rc)"
        unresumable=$((unresumable + 1))
        continue
    fi
    same=1
    for f in checkpoint.safetensors checkpoint.state.safetensors checkpoint.vocab; do
        cmp -s "$ref_dir/$f" "$(ckdir "$run")/$f" || { same=0; note+=" $f differs"; }
    done
    cmp -s <(strip_timing "$work/ref/log.jsonl") <(strip_timing "$run/log.jsonl") || { same=0; note+=" log differs"; }
    if ((same)); then identical=$((identical + 1)); else bad=$((bad + 1)); fi
    left=$(litter "$run")
    if [ -n "$left" ]; then
        littered=$((littered + 1))
        note+=" litter: $(echo "$left" | tr '\n' ' ')"
    fi
    [[ $note == *kill@* ]] && hit=$((hit + 1))
    echo "trial $t:${note:- no kill landed} -> $( ((same)) && echo identical || echo DIFFERENT)"
    rm -rf "$run"
done
echo "kill_resume: SIG$SIG seed $SEED: $TRIALS trials ($hit with a kill that landed), $kills kills, $restarts restarts before a first checkpoint," \
    "$unresumable unresumable, $identical bit-identical, $bad different, $littered with litter (reference run ${ref_ms} ms)"
((unresumable == 0 && bad == 0 && littered == 0))
