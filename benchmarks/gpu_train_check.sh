#!/usr/bin/env bash
# End to end on a GPU: `phax train` on WikiText-2 (data/wikitext-2, vocabulary 8192) for every
# family through the cpu backend (phax) and the cuda backend (phax-cuda), the same seed, config
# and batches; prints each one's loss at the last step, the relative gap, and tokens/s, with
# the validation loss. The two are float32 with different summation orders, so their
# trajectories drift apart by rounding: a gap of a few 1e-3 after STEPS steps is rounding, a
# wrong kernel shows as 1e-1 or a NaN. Run from the repository root after gpu_check.sh --pack
# (it unpacks build/ and sets nothing else; LD_LIBRARY_PATH as gpu_check sets it).
#   benchmarks/gpu_train_check.sh [STEPS] [FAMILIES]     (default 50, pha transformer serial swax swa mlstm)
set -uo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-50}
FAMS=${2:-pha transformer serial swax swa mlstm}
X=.gpu/unpacked
extra=$(python3 -c 'import glob, os, nvidia; print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(d + "/*/lib/lib*.so*")})))' 2>/dev/null)
export LD_LIBRARY_PATH=$PWD/$X/lib:/usr/local/cuda/lib64:${extra}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
W=$(mktemp -d)
args=(--data data/wikitext-2 --vocab-max 8192 --set d_model=128 --set n_layers=2 --seq 256 --batch 8
      --steps "$STEPS" --warmup 5 --eval-every 0 --eval-tokens 16384 --seed 1)
last() { grep '"loss"' "$1/log.jsonl" | tail -1 | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print(r["loss"], r["tokens_per_s"])'; }
val() { grep '"val_loss"' "$1/log.jsonl" | tail -1 | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["val_loss"])'; }
printf '%-12s %12s %12s %10s %12s %12s %10s %10s\n' family "loss cpu" "loss cuda" "rel gap" "val cpu" "val cuda" "tok/s cpu" "tok/s cuda"
rc=0
for f in $FAMS; do
    build/phax train --family "$f" "${args[@]}" --backend cpu --out "$W/cpu-$f" >"$W/cpu-$f.out" 2>&1 || { echo "$f: cpu run failed: $(tail -1 "$W/cpu-$f.out")"; rc=1; continue; }
    build/phax-cuda train --family "$f" "${args[@]}" --backend cuda --out "$W/cuda-$f" >"$W/cuda-$f.out" 2>&1 || { echo "$f: cuda run failed: $(tail -1 "$W/cuda-$f.out")"; rc=1; continue; }
    read -r lc tc <<<"$(last "$W/cpu-$f")"
    read -r lg tg <<<"$(last "$W/cuda-$f")"
    python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print(f'%-12s %12.6f %12.6f %10.2e %12.6f %12.6f %10.0f %10.0f' % (sys.argv[3], a, b, abs(a - b) / abs(a), float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7])))" \
        "$lc" "$lg" "$f" "$(val "$W/cpu-$f")" "$(val "$W/cuda-$f")" "$tc" "$tg"
done
rm -rf "$W"
exit $rc
