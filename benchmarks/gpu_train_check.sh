#!/usr/bin/env bash
# End to end on a GPU: `phax train` on WikiText-2 (data/wikitext-2, vocabulary 8192) for every
# family through the cpu backend (phax) and the cuda backend (phax-cuda), the same seed, config
# and batches; prints each one's loss at the last step, the relative gap, and tokens/s, with
# the validation loss. The two are float32 with different summation orders, so their
# trajectories drift apart by rounding: a gap of a few 1e-3 after STEPS steps is rounding, a
# wrong kernel shows as 1e-1 or a NaN. Run from the repository root after gpu_check.sh --pack
# (which unpacks build/; the library path from benchmarks/gpu_env.sh).
#   benchmarks/gpu_train_check.sh [STEPS] [FAMILIES]     (default 50, pha transformer serial swax swa mlstm)
set -uo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-50}
FAMS=${2:-pha transformer serial swax swa mlstm}
. benchmarks/gpu_env.sh
W=$(mktemp -d)
args=(--data data/wikitext-2 --vocab-max 8192 --set d_model=128 --set n_layers=2 --seq 256 --batch 8
      --steps "$STEPS" --warmup 5 --eval-every 0 --eval-tokens 16384 --seed 1)
# One row from the two runs' logs: the last step's loss and tokens/s, the last validation loss.
row() {
    python3 - "$@" <<'PY'
import json, sys
def log(d):
    rs = [json.loads(l) for l in open(d + "/log.jsonl")]
    step = [r for r in rs if "loss" in r][-1]
    return step["loss"], step["tokens_per_s"], [r for r in rs if "val_loss" in r][-1]["val_loss"]
f, (lc, tc, vc), (lg, tg, vg) = sys.argv[1], log(sys.argv[2]), log(sys.argv[3])
print("%-12s %12.6f %12.6f %10.2e %12.6f %12.6f %10.0f %10.0f" % (f, lc, lg, abs(lc - lg) / abs(lc), vc, vg, tc, tg))
PY
}
printf '%-12s %12s %12s %10s %12s %12s %10s %10s\n' family "loss cpu" "loss cuda" "rel gap" "val cpu" "val cuda" "tok/s cpu" "tok/s cuda"
rc=0
for f in $FAMS; do
    build/phax train --family "$f" "${args[@]}" --backend cpu --out "$W/cpu-$f" >"$W/cpu-$f.out" 2>&1 || { echo "$f: cpu run failed: $(tail -1 "$W/cpu-$f.out")"; rc=1; continue; }
    build/phax-cuda train --family "$f" "${args[@]}" --backend cuda --out "$W/cuda-$f" >"$W/cuda-$f.out" 2>&1 || { echo "$f: cuda run failed: $(tail -1 "$W/cuda-$f.out")"; rc=1; continue; }
    row "$f" "$W/cpu-$f" "$W/cuda-$f"
done
rm -rf "$W"
exit $rc
