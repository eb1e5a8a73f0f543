#!/usr/bin/env bash
# Numerics fingerprint of a build, for refactors that must not change a bit:
# for every family (and the PHA switches) on both backends, the sha256 of the tensors of the
# parameters and optimizer state after 2 training steps, the validation loss, the
# carried (decoder) evaluation and a greedy continuation. Two builds with the same
# numerics print the same lines; diff them.
#   scripts/numerics_fingerprint.sh [BUILD_DIR]   (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
B=$(cd "${1:-build}" && pwd)
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1   # reductions are deterministic per thread count
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
for i in $(seq 300); do echo "the cat sat on the mat . a dog ran in the park . 7 3 9"; done > "$w/train.txt"
cp "$w/train.txt" "$w/valid.txt"
# sha256 of a safetensors file's tensor bytes only: the header also holds the run's
# options (paths, the backend's name), which a refactor may legitimately spell anew.
payload_sha() {
  local n; n=$(od -An -t u8 -N 8 "$1" | tr -d ' ')
  tail -c +$((9 + n)) "$1" | sha256sum | cut -c1-16
}
small=(--set d_model=32 --set n_layers=2 --set n_heads=2 --set n_kv_heads=1)
cases=("pha" "pha use_attn=false" "pha use_gss=false" "pha use_ffn=false" "pha freeze_mix=true"
       "transformer" "serial" "swax" "swa" "mlstm")
for c in "${cases[@]}"; do
  read -r fam extra <<< "$c"
  sets=("${small[@]}"); [ -n "${extra:-}" ] && sets+=(--set "$extra")
  for be in fast ref; do
    o="$w/$fam-${extra:-base}-$be"
    "$B/phax" train --family "$fam" "${sets[@]}" --train "$w/train.txt" --valid "$w/valid.txt" \
      --seq 24 --batch 2 --steps 2 --eval-every 0 --log-every 1 --backend "$be" --out "$o" >/dev/null 2>&1
    ck=$(readlink -f "$o/checkpoint.safetensors"); st=${ck%.safetensors}.state.safetensors
    p=$(payload_sha "$ck"); s=$(payload_sha "$st")
    l=$(grep -o '"loss": [0-9.e+-]*' "$o/log.jsonl" | tr '\n' ' ')
    echo "$fam ${extra:-} $be params $p state $s $l"
  done
  ck="$w/$fam-${extra:-base}-fast/checkpoint.safetensors"
  ev=$("$B/phax" eval "$ck" --file "$w/valid.txt" --seq 24 2>&1 | grep -io 'loss[^,]*' | head -1 || true)
  case $fam in swax|swa|mlstm) cv=$("$B/phax" eval "$ck" --file "$w/valid.txt" --seq 24 --carry 2>&1 | grep -io 'loss[^,]*' | head -1 || true);; *) cv=-;; esac
  gen=$("$B/phax" generate "$ck" --prompt "the cat sat on" --tokens 12 2>/dev/null | sha256sum | cut -c1-16)
  echo "$fam ${extra:-} eval [$ev] carry [$cv] generate $gen"
done
