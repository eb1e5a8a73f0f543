#!/usr/bin/env bash
# The main job: train and evaluate the phax model families, draw the figures and
# write <out>/summary.md. See evals/README.md and `./evals/run_all.sh --help`.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
INVOCATION="./evals/run_all.sh${*:+ $*}"
T_START=$SECONDS

usage() {
    cat <<'EOF'
usage: ./evals/run_all.sh [--quick | --full] [--data DIR] [--out DIR] [--only EXP,...] [--force]

Installs what is missing (scripts/setup.sh), builds (ninja -C build), then trains and
evaluates the model families and writes figures (plots/*.png, copied to OUT/plots) and
OUT/summary.md, which it prints at the end.

modes:
  --quick   (default) about 15-20 minutes on 2 cores: d_model 128, 4 layers, T 256,
            batch 4; 100 s of training per lm model, 60 s per SWAX window regime;
            test perplexity on the first 16384 test tokens; bench at T 512, 2048
  --full    the paper-scale runs, SEVERAL HOURS on 2 cores (about 3-4 h): d_model 256,
            4 layers, T 256, batch 8, 900 s of training per model (7 models); the whole
            test split; bench at T 512, 2048, 8192 and, when /usr/bin/python3 has torch,
            benchmarks/torch_baseline.py (PyTorch on the same models)

experiments (--only takes a comma list; default all):
  lm         train transformer, pha, serial, swax (same width/depth/T/B/time budget);
             test perplexity, tokens/s, validation-perplexity curves
  mix        PHA's learned softplus mix weights per block (the "sandwich" figure)
  extrap     test loss by position in windows of 4T (beyond the training length);
             SWAX also with state carried across windows (--carry)
  swax_niah  SWAX trained with a short, a long and a stochastic SWA window (with
             needle-in-a-haystack rows mixed in); NIAH accuracy from T/2 to 8T and
             test perplexity
  bench      bench_model: training tokens/s and peak memory vs T for every family

options:
  --data DIR  the data folder: it holds wikitext-2/ (preferred), else ptb/ (no NIAH:
              its vocabulary has no digits), else tinyshakespeare/ (byte tokenizer,
              T x4); DIR may also be one corpus folder. Default: $PHAX_DATA_DIR, else
              ./data (the repository's WikiText-2), else ../shared/data beside it
  --out DIR   where everything goes (default evals/out/quick or evals/out/full)
  --only EXP  run only these experiments (those they need are trained when missing)
  --force     redo the selected experiments' runs and outputs instead of reusing them
  -h, --help  this text

A finished run or output in OUT is reused; an interrupted training run is resumed.
Environment: BUILD_DIR (default build).
EOF
}

die() { printf 'run_all: %s\n' "$*" >&2; exit 1; }
say() { printf '== %s ==\n' "$*"; }
note() { printf '   %s\n' "$*"; }
quote_cmd() {  # a command line for copy and paste: words quoted only when they need it
    local w out="" re='^[][A-Za-z0-9_./,=:+@%^-]+$'
    for w in "$@"; do
        if [[ $w =~ $re ]]; then out+="$w "; else out+="'${w//\'/\'\\\'\'}' "; fi
    done
    printf '%s' "${out% }"
}

# ---------------------------------------------------------------------------
# Options
MODE=quick DATA_ARG="" OUT="" ONLY="" FORCE=0
while (($#)); do
    case $1 in
        --quick) MODE=quick ;;
        --full) MODE=full ;;
        --data) (($# >= 2)) || die "--data needs a folder"; DATA_ARG=$2; shift ;;
        --data=*) DATA_ARG=${1#*=} ;;
        --out) (($# >= 2)) || die "--out needs a folder"; OUT=$2; shift ;;
        --out=*) OUT=${1#*=} ;;
        --only) (($# >= 2)) || die "--only needs a comma list of experiments"; ONLY=$2; shift ;;
        --only=*) ONLY=${1#*=} ;;
        --force) FORCE=1 ;;
        -h | --help) usage; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
    shift
done

ALL_EXPS=(lm mix extrap swax_niah bench)
declare -A RUN_EXP=()
if [ -n "$ONLY" ]; then
    IFS=, read -r -a sel <<<"$ONLY"
    for e in "${sel[@]}"; do
        [[ " ${ALL_EXPS[*]} " == *" $e "* ]] || die "--only: unknown experiment '$e' (one of: ${ALL_EXPS[*]})"
        RUN_EXP[$e]=1
    done
else
    for e in "${ALL_EXPS[@]}"; do RUN_EXP[$e]=1; done
fi
want() { [ -n "${RUN_EXP[$1]:-}" ]; }

TINY=${PHAX_EVAL_TINY:-0}  # undocumented: shrink everything to seconds (smoke test)
[ "$TINY" = 1 ] || TINY=0
TINY_TAG="" TINY_SUFFIX=""
if [ "$TINY" = 1 ]; then TINY_TAG=" (PHAX_EVAL_TINY smoke settings)" TINY_SUFFIX=-tiny; fi
[ -n "$OUT" ] || OUT="evals/out/$MODE$TINY_SUFFIX"

# ---------------------------------------------------------------------------
# Settings. Every model of one mode has the same width, depth, T, B and budget.
LM_FAMILIES=(transformer pha serial swax)
BENCH_FAMILIES=(transformer pha serial swax swa mlstm)
TORCH_FAMILIES=transformer,swax,pha
NIAH_FRAC=0.25
if [ "$MODE" = quick ]; then
    D=128 L=4 T=256 B=4 LM_BUDGET=100 NIAH_BUDGET=60 WARMUP=20 LR=2e-3 MIN_LR=2e-4
    EVAL_EVERY=15 EVAL_TOKENS=4096 LOG_EVERY=20
    TEST_MAX=16384 EXTRAP_MAX=16384 CARRY_MAX=4096
    NIAH_HAYSTACKS=noise NIAH_DEPTHS=3 NIAH_SAMPLES=4
    BENCH_TS=(512 2048) BENCH_EXTRA=() TORCH=0
else
    D=256 L=4 T=256 B=8 LM_BUDGET=900 NIAH_BUDGET=900 WARMUP=50 LR=2e-3 MIN_LR=2e-4
    EVAL_EVERY=100 EVAL_TOKENS=32768 LOG_EVERY=50
    TEST_MAX=0 EXTRAP_MAX=65536 CARRY_MAX=16384
    NIAH_HAYSTACKS=noise,text NIAH_DEPTHS=5 NIAH_SAMPLES=10
    BENCH_TS=(512 2048 8192) BENCH_EXTRA=() TORCH=1
fi
TORCH_EXTRA=(--timeout 900)
if [ "$TINY" = 1 ]; then
    D=32 L=2 B=2 LM_BUDGET=3 NIAH_BUDGET=3 WARMUP=2 EVAL_EVERY=4 EVAL_TOKENS=512 LOG_EVERY=5
    TEST_MAX=1024 EXTRAP_MAX=2048 CARRY_MAX=512 NIAH_DEPTHS=2 NIAH_SAMPLES=1
    BENCH_TS=(64 128) BENCH_EXTRA=(--steps 1 --warmup 0)
    TORCH_FAMILIES=transformer TORCH_EXTRA=(--envs tuned --steps 1 --warmup 0 --timeout 120)
fi

BUILD_DIR=${BUILD_DIR:-build}
PHAX="$BUILD_DIR/phax"
BENCH="$BUILD_DIR/bench_model"
export OPENBLAS_THREAD_TIMEOUT=${OPENBLAS_THREAD_TIMEOUT:-4}  # as `ninja bench`: no spinning OpenBLAS threads

# ---------------------------------------------------------------------------
# Data: --data, else $PHAX_DATA_DIR, else the repository's ./data (WikiText-2, shipped and
# checked against its SHA256SUMS by phax), else ../shared/data beside the repository.
# Paths are kept relative to the repository (the script runs from its root), so the
# commands, summaries and results it writes never name this machine's folders.
rel() { realpath -m --relative-to="$REPO" "$1"; }
corpus_in() {  # corpus_in DIR: set CORPUS_DIR/CORPUS when DIR holds (or is) a corpus
    local d=$1 c
    for c in wikitext-2 ptb tinyshakespeare; do
        if [ -d "$d/$c" ]; then CORPUS_DIR=$(rel "$d/$c") CORPUS=$c; return 0; fi
    done
    if [ -e "$d/train.txt" ] || [ -e "$d/train.txt.xz" ]; then CORPUS=wikitext-2
    elif [ -e "$d/ptb.train.txt" ] || [ -e "$d/ptb.train.txt.xz" ]; then CORPUS=ptb
    elif [ -e "$d/input.txt" ]; then CORPUS=tinyshakespeare
    else return 1; fi
    CORPUS_DIR=$(rel "$d")
}
if [ -n "$DATA_ARG" ]; then candidates=("$DATA_ARG")
elif [ -n "${PHAX_DATA_DIR:-}" ]; then candidates=("$PHAX_DATA_DIR")
else candidates=(data ../shared/data); fi
CORPUS="" CORPUS_DIR=""
for d in "${candidates[@]}"; do [ -d "$d" ] && corpus_in "$d" && break; done
[ -n "$CORPUS" ] || die "no corpus found: looked for wikitext-2/, ptb/ or tinyshakespeare/ in ${candidates[*]} (give --data DIR or set PHAX_DATA_DIR)"

TOKENIZER=word NIAH_OK=1 CORPUS_NOTE=""
case $CORPUS in
    ptb) NIAH_OK=0 CORPUS_NOTE="PTB writes numbers as N: its vocabulary has no digits, which NIAH needs, so no swax_niah" ;;
    tinyshakespeare)
        # Bytes: a NIAH prompt needs ~350 tokens, a training example up to ~610.
        TOKENIZER=byte T=$((T * 4)) B=$((B >= 4 ? B / 4 : 1))
        CORPUS_NOTE="byte tokenizer, T x4; no test split: perplexity is on the held-out last 10% (also the validation split)" ;;
esac
mkdir -p "$OUT" || die "--out: cannot create $OUT"
OUT=$(rel "$OUT")
# input.txt (tiny-shakespeare): phax eval scores the last 10% that phax train held out.
TEST_SRC=(--data "$CORPUS_DIR" --split test) TEST_NAME="test"
[ "$CORPUS" != tinyshakespeare ] || TEST_NAME="held-out 10%"
TEST_LIMIT=() TEST_DESC="the whole $TEST_NAME split"
if ((TEST_MAX > 0)); then TEST_LIMIT=(--max-tokens "$TEST_MAX") TEST_DESC="the first $TEST_MAX $TEST_NAME tokens"; fi
T4=$((T * 4))
NIAH_LENGTHS="$((T / 2)),$T,$((2 * T)),$((4 * T)),$((8 * T))"
EXTRAP_BUCKETS="0,$((T / 32)),$((T / 16)),$((T / 8)),$((T / 4)),$((T / 2)),$T,$((3 * T / 2)),$((2 * T)),$((3 * T)),$((4 * T))"
SETTINGS="d_model $D, $L layers, T $T, batch $B, $CORPUS ($TOKENIZER)"

if ((FORCE)); then
    if want lm; then rm -rf "$OUT/lm" "$OUT"/runs/lm_*; fi
    if want mix; then rm -rf "$OUT/mix"; fi
    if want extrap; then rm -rf "$OUT/extrap"; fi
    if want swax_niah; then rm -rf "$OUT/swax_niah" "$OUT"/runs/niah_*; fi
    if want bench; then rm -rf "$OUT/bench"; fi
fi
mkdir -p "$OUT/runs" "$OUT/cache" "$OUT/plots"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------------------
# Setup and build
say "setup: packages and build ($BUILD_DIR)"
BUILD_DIR=$BUILD_DIR ./scripts/setup.sh || die "setup: scripts/setup.sh failed"
ninja -C "$BUILD_DIR" >"$OUT/build.log" 2>&1 || die "build: ninja -C $BUILD_DIR failed (log: $OUT/build.log)"
if want bench; then
    ninja -C "$BUILD_DIR" bench_model >>"$OUT/build.log" 2>&1 || die "build: ninja -C $BUILD_DIR bench_model failed (log: $OUT/build.log)"
fi
for tool in jq gnuplot; do command -v "$tool" >/dev/null || die "setup: $tool is missing (scripts/setup.sh installs it)"; done
note "$("$PHAX" version 2>/dev/null || echo phax) · mode $MODE$TINY_TAG · $SETTINGS · data $CORPUS_DIR"
note "output: $OUT"
[ -z "$CORPUS_NOTE" ] || note "note: $CORPUS_NOTE"

# ---------------------------------------------------------------------------
# Helpers

# run_logged STAGE LOG CMDFILE CMD...: record CMD in CMDFILE, run it with its output
# in LOG; a failure ends the job with the command's last line.
run_logged() {
    local stage=$1 log=$2 cmdf=$3; shift 3
    quote_cmd "$@" >"$cmdf"; echo >>"$cmdf"
    if ! "$@" >"$log" 2>&1; then
        rm -f "$cmdf"
        die "$stage: $(basename "$1") failed: $(tail -n 1 "$log") (log: $log)"
    fi
}

# train_run STAGE NAME BUDGET FAMILY [ARGS...]: train OUT/runs/NAME, or reuse it when
# finished (resume it when interrupted).
train_run() {
    local stage=$1 name=$2 budget=$3 fam=$4; shift 4
    local dir="$OUT/runs/$name"
    local cmd=("$PHAX" train --family "$fam" --data "$CORPUS_DIR" --tokenizer "$TOKENIZER"
        --set "d_model=$D" --set "n_layers=$L" --set n_heads=4 --set n_kv_heads=2 --seq "$T"
        --batch "$B" --time-budget "$budget" --lr "$LR" --min-lr "$MIN_LR"
        --warmup "$WARMUP" --eval-every "$EVAL_EVERY" --eval-tokens "$EVAL_TOKENS"
        --log-every "$LOG_EVERY" --cache-dir "$OUT/cache" "$@" --out "$dir")
    local line desc=$fam
    line=$(quote_cmd "${cmd[@]}")
    case $name in niah_*) desc="$fam, ${name#niah_} SWA window" ;; esac
    if [ -f "$dir/checkpoint.safetensors" ]; then
        [ "$(cat "$dir/cmd.txt" 2>/dev/null)" = "$line" ] ||
            die "$stage: $dir holds a run made with other settings (see its cmd.txt); redo it with --force and $stage selected, or use another --out"
        if [ -f "$dir/DONE" ]; then note "$stage: reusing the finished run of $desc ($dir)"; return 0; fi
        say "$stage: resuming $desc ($dir)"
        cmd=("$PHAX" train --resume --log-every "$LOG_EVERY" --out "$dir")
    else
        rm -rf "$dir"; mkdir -p "$dir"
        printf '%s\n' "$line" >"$dir/cmd.txt"
        say "$stage: training $desc (budget $budget s)"
        # Outputs derived from an earlier run of this name are stale now.
        case $name in
            lm_*) rm -rf "$OUT/lm/${name#lm_}.test".* "$OUT/extrap/${name#lm_}".*
                  [ "$name" != lm_swax ] || rm -rf "$OUT/extrap/swax_carry".*
                  [ "$name" != lm_pha ] || rm -rf "$OUT/mix" ;;
            niah_*) rm -rf "$OUT/swax_niah/${name#niah_}".*
                    [ "$name" != niah_short ] || rm -rf "$OUT/swax_niah/short_at_wshort".* ;;
        esac
    fi
    if ! "${cmd[@]}" 2>&1 | tee -a "$dir/train.out" | sed -u 's/^/   /'; then
        die "$stage: training $name failed: $(tail -n 1 "$dir/train.out") (log: $dir/train.out)"
    fi
    touch "$dir/DONE"
}

# eval_json STAGE RUN PREFIX [ARGS...]: phax eval of RUN on the test text into
# PREFIX.json (+ .cmd, .out); reused when PREFIX.json exists.
eval_json() {
    local stage=$1 run=$2 prefix=$3; shift 3
    if [ -f "$prefix.json" ]; then note "$stage: reusing $(basename "$prefix").json"; return 0; fi
    note "$stage: phax eval $(basename "$run") $*"
    run_logged "$stage" "$prefix.out" "$prefix.cmd" "$PHAX" eval "$OUT/runs/$run" "${TEST_SRC[@]}" \
        --cache-dir "$OUT/cache" "$@" --json "$prefix.json"
    note "  $(grep -m1 -o '[0-9]* tokens scored.*' "$prefix.out" || true)"
}

# run_info RUN: `phax info` of a run, cached in the run folder.
run_info() {
    local dir="$OUT/runs/$1"
    [ -s "$dir/info.txt" ] || "$PHAX" info "$dir" >"$dir/info.txt" 2>&1 || die "phax info $dir failed: $(tail -n 1 "$dir/info.txt")"
    cat "$dir/info.txt"
}
run_params() { run_info "$1" | awk '/^parameters/ {p = 1} p && $1 == "total" {gsub(",", "", $2); print $2; exit}'; }
run_tokens() { run_info "$1" | sed -n 's/^checkpoint: step [0-9]*, \([0-9]*\) tokens seen.*/\1/p'; }
run_steps() { run_info "$1" | sed -n 's/^checkpoint: step \([0-9]*\),.*/\1/p'; }
run_cfg() { run_info "$1" | sed -n '/^config (resolved):/,/^}/p' | sed 1d | jq -r ".$2"; }
# log_stat RUN: median tokens/s of the step lines, last val_ppl.
log_toks() { jq -s '[.[] | select(.tokens_per_s) | .tokens_per_s] | sort | if length == 0 then "n/a" else .[length / 2 | floor] end' "$OUT/runs/$1/log.jsonl"; }
log_valppl() { jq -s 'map(select(.val_ppl)) | if length == 0 then "n/a" else last.val_ppl * 100 | round / 100 end' "$OUT/runs/$1/log.jsonl"; }
json_ppl() { jq '.ppl * 100 | round / 100' "$1"; }

# plot NAME IN SUBTITLE [VAR=VALUE...]: gnuplot plots/NAME.gp → plots/NAME.png (not in
# tiny mode) and OUT/plots/NAME.png.
plot() {
    local name=$1 in=$2 sub="$MODE mode${TINY_SUFFIX:+ (tiny)}: $3"; shift 3
    local png="plots/$name.png"
    sub=${sub//_/\\_}  # enhanced text: a literal underscore
    [ "$TINY" = 0 ] || png="$OUT/plots/$name.png"
    local vars="in='$in'; out='$png'; subtitle='$sub'" kv
    for kv in "$@"; do vars="$vars; $kv"; done
    gnuplot -e "$vars" "plots/$name.gp" 2>"$OUT/plots/$name.log" ||
        die "plot: gnuplot plots/$name.gp failed: $(tail -n 1 "$OUT/plots/$name.log")"
    [ -s "$OUT/plots/$name.log" ] || rm -f "$OUT/plots/$name.log"
    [ "$png" = "$OUT/plots/$name.png" ] || cp "$png" "$OUT/plots/$name.png"
    note "figure: $png"
}

fmt_int() { awk -v x="$1" 'BEGIN { if (x == "n/a" || x == "") print "n/a"; else printf "%.0f", x }'; }

# ---------------------------------------------------------------------------
# (a) lm: the four families on the corpus, same width/depth/T/B/budget.
declare -A ENSURED=()
ensure_lm() {  # once per invocation
    [ -n "${ENSURED[$1]:-}" ] || train_run lm "lm_$1" "$LM_BUDGET" "$1"
    ENSURED[$1]=1
}

exp_lm() {
    local t0=$SECONDS fam
    mkdir -p "$OUT/lm"
    for fam in "${LM_FAMILIES[@]}"; do ensure_lm "$fam"; done
    say "lm: test perplexity ($TEST_DESC, windows of T = $T)"
    for fam in "${LM_FAMILIES[@]}"; do eval_json lm "lm_$fam" "$OUT/lm/$fam.test" "${TEST_LIMIT[@]}"; done
    # Table and curves.
    {
        printf 'family\tparams\tsteps\ttokens_seen\ttokens_per_s\tval_ppl\ttest_ppl\n'
        for fam in "${LM_FAMILIES[@]}"; do
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$fam" "$(run_params "lm_$fam")" "$(run_steps "lm_$fam")" \
                "$(run_tokens "lm_$fam")" "$(fmt_int "$(log_toks "lm_$fam")")" "$(log_valppl "lm_$fam")" \
                "$(json_ppl "$OUT/lm/$fam.test.json")"
        done
    } >"$OUT/lm/lm.tsv"
    for fam in "${LM_FAMILIES[@]}"; do
        printf 'tokens\t%s\n' "$fam"
        jq -r --argjson bt "$((B * T))" 'select(.val_ppl) | [.step * $bt, .val_ppl] | @tsv' \
            "$OUT/runs/lm_$fam/log.jsonl"
        printf '\n\n'
    done >"$OUT/lm/curves.tsv"
    column -t -s $'\t' "$OUT/lm/lm.tsv" | sed 's/^/   /'
    plot lm_curves "$OUT/lm/curves.tsv" "$SETTINGS, $LM_BUDGET s of training per model"
    note "lm: done in $((SECONDS - t0)) s"
}

# ---------------------------------------------------------------------------
# (b) mix: PHA's per-block mix weights from the last log line that has them.
exp_mix() {
    local t0=$SECONDS
    ensure_lm pha
    say "mix: PHA mix weights per block"
    mkdir -p "$OUT/mix"
    local n; n=$(jq -s 'map(select(.mix)) | length' "$OUT/runs/lm_pha/log.jsonl")
    ((n > 0)) || die "mix: $OUT/runs/lm_pha/log.jsonl has no mix weights (freeze_mix?)"
    jq -s -r 'map(select(.mix)) | last | .mix
        | (["block", "gss", "attn", "ffn", "ffn_aux"][0:(.[0] | length) + 1] | @tsv),
          (to_entries[] | [.key] + (.value | map(. * 10000 | round / 10000)) | @tsv)' \
        "$OUT/runs/lm_pha/log.jsonl" >"$OUT/mix/mix.tsv"
    jq -s -r 'map(select(.mix)) | last | "step \(.step)"' "$OUT/runs/lm_pha/log.jsonl" >"$OUT/mix/step.txt"
    column -t -s $'\t' "$OUT/mix/mix.tsv" | sed 's/^/   /'
    plot mix_sandwich "$OUT/mix/mix.tsv" "PHA, $SETTINGS, $LM_BUDGET s of training ($(cat "$OUT/mix/step.txt"))"
    note "mix: done in $((SECONDS - t0)) s"
}

# ---------------------------------------------------------------------------
# (c) extrap: loss by position in windows of 4T; SWAX also with state carried.
exp_extrap() {
    local t0=$SECONDS fam lim=()
    for fam in "${LM_FAMILIES[@]}"; do ensure_lm "$fam"; done
    say "extrap: test loss by position in windows of 4T = $T4"
    mkdir -p "$OUT/extrap"
    ((EXTRAP_MAX > 0)) && lim=(--max-tokens "$EXTRAP_MAX")
    for fam in "${LM_FAMILIES[@]}"; do
        eval_json extrap "lm_$fam" "$OUT/extrap/$fam" --seq "$T4" --buckets "$EXTRAP_BUCKETS" \
            "${lim[@]}" --csv "$OUT/extrap/$fam.csv"
    done
    eval_json extrap lm_swax "$OUT/extrap/swax_carry" --carry --seq "$T4" --buckets "$EXTRAP_BUCKETS" \
        --max-tokens "$CARRY_MAX" --csv "$OUT/extrap/swax_carry.csv"
    local label
    for fam in "${LM_FAMILIES[@]}" swax_carry; do
        label=$fam
        [ "$fam" != swax_carry ] || label="swax (state carried)"
        printf 'position\t%s\n' "$label"
        awk -F, 'NR > 1 && $3 > 0 { printf "%g\t%s\t%s\t%s\n", ($1 + $2) / 2, $4, $1, $2 }' "$OUT/extrap/$fam.csv"
        printf '\n\n'
    done >"$OUT/extrap/extrap.tsv"
    plot extrapolation "$OUT/extrap/extrap.tsv" "$SETTINGS; windows of 4T = $T4" "T=$T"
    note "extrap: done in $((SECONDS - t0)) s"
}

# ---------------------------------------------------------------------------
# (d) swax_niah: three SWA window regimes, NIAH accuracy vs length, test perplexity.
REGIMES=(short long stochastic)
regime_args() {
    case $1 in
        short) echo "--set p_short=1 --set anneal=0" ;;
        long) echo "--set p_short=0" ;;
        stochastic) echo "" ;;
    esac
}
exp_swax_niah() {
    local t0=$SECONDS r
    if ((!NIAH_OK)); then note "swax_niah: skipped ($CORPUS_NOTE)"; return 0; fi
    mkdir -p "$OUT/swax_niah"
    for r in "${REGIMES[@]}"; do
        # shellcheck disable=SC2046
        train_run swax_niah "niah_$r" "$NIAH_BUDGET" swax --niah-frac "$NIAH_FRAC" $(regime_args "$r")
    done
    local w_short w_long
    w_short=$(run_cfg niah_short w_short) w_long=$(run_cfg niah_short w_long)
    printf 'w_short\t%s\nw_long\t%s\np_short\t%s\nanneal\t%s\n' "$w_short" "$w_long" \
        "$(run_cfg niah_stochastic p_short)" "$(run_cfg niah_stochastic anneal)" >"$OUT/swax_niah/windows.tsv"
    say "swax_niah: NIAH (single needle, $NIAH_HAYSTACKS haystack, lengths $NIAH_LENGTHS) and test perplexity"
    # Evaluations: each regime at w_long (the default), the short regime also at w_short.
    local evals=(short long stochastic short_at_wshort) e run win
    for e in "${evals[@]}"; do
        run="niah_${e%_at_wshort}" win=()
        [ "$e" != short_at_wshort ] || win=(--window "$w_short")
        if [ -f "$OUT/swax_niah/$e.csv" ]; then
            note "swax_niah: reusing $e.csv"
        else
            note "swax_niah: phax niah $run${win[*]:+ ${win[*]}}"
            run_logged swax_niah "$OUT/swax_niah/$e.niah.out" "$OUT/swax_niah/$e.niah.cmd" \
                "$PHAX" niah "$OUT/runs/$run" --data "$CORPUS_DIR" --lengths "$NIAH_LENGTHS" \
                --variants single --haystacks "$NIAH_HAYSTACKS" --n-depths "$NIAH_DEPTHS" \
                --samples "$NIAH_SAMPLES" --seed 0 "${win[@]}" --csv "$OUT/swax_niah/$e.csv"
        fi
        eval_json swax_niah "$run" "$OUT/swax_niah/$e.test" "${TEST_LIMIT[@]}" "${win[@]}"
    done
    # Accuracy per length (mean over haystacks, depths and samples) and per haystack.
    {
        printf 'regime\thaystack\tlength\taccuracy\n'
        for e in "${evals[@]}"; do
            awk -F, -v e="$e" 'NR > 1 { k = $2 "\t" $3; if (!(k in n)) o[++m] = k; n[k] += $5; s[k] += $5 * $6 }
                END { for (i = 1; i <= m; i++) printf "%s\t%s\t%.4f\n", e, o[i], s[o[i]] / n[o[i]] }' \
                "$OUT/swax_niah/$e.csv"
        done
    } >"$OUT/swax_niah/niah_by_haystack.tsv"
    local label
    for e in "${evals[@]}"; do
        case $e in
            short) label="short (w=$w_short; eval w=$w_long)" ;;
            long) label="long (w=$w_long)" ;;
            stochastic) label="stochastic (eval w=$w_long)" ;;
            short_at_wshort) label="short (eval w=$w_short)" ;;
        esac
        printf 'length\t%s\n' "$label"
        awk -F, 'NR > 1 { if (!($3 in n)) o[++m] = $3; n[$3] += $5; s[$3] += $5 * $6 }
            END { for (i = 1; i <= m; i++) printf "%s\t%.4f\n", o[i], s[o[i]] / n[o[i]] }' "$OUT/swax_niah/$e.csv"
        printf '\n\n'
    done >"$OUT/swax_niah/niah.tsv"
    plot niah "$OUT/swax_niah/niah.tsv" "SWAX, $SETTINGS, $NIAH_BUDGET s, --niah-frac $NIAH_FRAC; $NIAH_HAYSTACKS haystack" "T=$T"
    note "swax_niah: done in $((SECONDS - t0)) s"
}

# ---------------------------------------------------------------------------
# (e) bench: bench_model per family and T (a fresh process each); torch in --full.
exp_bench() {
    local t0=$SECONDS fam t
    mkdir -p "$OUT/bench"
    say "bench: bench_model, families ${BENCH_FAMILIES[*]}, T ${BENCH_TS[*]} (batch 1, bench config)"
    for t in "${BENCH_TS[@]}"; do
        for fam in "${BENCH_FAMILIES[@]}"; do
            local p="$OUT/bench/model_${fam}_$t"
            if [ -f "$p.csv" ]; then note "bench: reusing $fam T=$t"; continue; fi
            run_logged bench "$p.out" "$p.cmd" "$BENCH" --family "$fam" --T "$t" "${BENCH_EXTRA[@]}" --csv "$p.csv"
            note "bench: $(awk -F, 'NR == 2 { printf "%-11s T=%-5s %9.1f tokens/s %8.0f MB peak", $1, $4, $7, $13 }' "$p.csv")"
        done
    done
    {
        head -n 1 "$OUT/bench/model_${BENCH_FAMILIES[0]}_${BENCH_TS[0]}.csv"
        for fam in "${BENCH_FAMILIES[@]}"; do
            for t in "${BENCH_TS[@]}"; do tail -n +2 "$OUT/bench/model_${fam}_$t.csv"; done
        done
    } >"$OUT/bench/model.csv"
    if ((TORCH)); then
        if [ -f "$OUT/bench/torch_baseline.csv" ]; then
            note "bench: reusing torch_baseline.csv"
        elif /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
            local ts; ts=$(IFS=,; echo "${BENCH_TS[*]}")
            say "bench: PyTorch baseline (benchmarks/torch_baseline.py, families $TORCH_FAMILIES, T $ts)"
            run_logged bench "$OUT/bench/torch_baseline.out" "$OUT/bench/torch_baseline.cmd" \
                /usr/bin/python3 benchmarks/torch_baseline.py --build "$BUILD_DIR" --families "$TORCH_FAMILIES" \
                --Ts "$ts" --no-phax "${TORCH_EXTRA[@]}" --csv "$OUT/bench/torch_baseline.csv"
        else
            note "bench: /usr/bin/python3 cannot import torch: no PyTorch baseline"
        fi
    fi
    # Blocks for throughput.gp / memory.gp: T, tokens/s, peak MB.
    {
        for fam in "${BENCH_FAMILIES[@]}"; do
            printf 'T\t%s\tpeak_mb\n' "$fam"
            awk -F, -v f="$fam" 'NR > 1 && $1 == f && $2 == "fast" { printf "%s\t%s\t%s\n", $4, $7, $13 }' \
                "$OUT/bench/model.csv" | sort -n
            printf '\n\n'
        done
        if [ -f "$OUT/bench/torch_baseline.csv" ]; then
            # PyTorch "tuned" rows (columns: family, T, plain/tuned tokens/s, ..., plain/tuned peak MB).
            awk -F, 'NR > 1 && $4 != "nan" && $4 != "" { if (!($1 in seen)) { seen[$1] = 1; o[++m] = $1 } r[$1] = r[$1] $2 "\t" $4 "\t" $7 "\n" }
                END { for (i = 1; i <= m; i++) printf "T\t%s (torch tuned)\tpeak_mb\n%s\n\n", o[i], r[o[i]] }' \
                "$OUT/bench/torch_baseline.csv"
        fi
    } >"$OUT/bench/bench.tsv"
    local sub
    sub="bench_model: d_model 256, 4 layers, vocab 8192, batch 1, $(nproc) threads"
    plot throughput "$OUT/bench/bench.tsv" "$sub"
    plot memory "$OUT/bench/bench.tsv" "$sub"
    note "bench: done in $((SECONDS - t0)) s"
}

# ---------------------------------------------------------------------------
for e in "${ALL_EXPS[@]}"; do
    if want "$e"; then "exp_$e"; fi
done

# ---------------------------------------------------------------------------
# summary.md: every number the figures show, the commands, the machine, the date.
md_table() {  # md_table FILE.tsv [HEADER]: a TSV with a header line (or HEADER, tab-separated) as a Markdown table
    awk -F'\t' -v hdr="${2:-}" 'NR == 1 { if (hdr != "") $0 = hdr; h = "|"; s = "|"; for (i = 1; i <= NF; i++) { h = h " " $i " |"; s = s "---|" }
        print h; print s; next } { r = "|"; for (i = 1; i <= NF; i++) r = r " " $i " |"; print r }' "$1"
}
cmds() {  # cmds FILE...: the commands recorded for these outputs, one sh block
    local f any=0
    for f in "$@"; do [ -f "$f" ] && any=1; done
    ((any)) || return 0
    echo '```sh'
    for f in "$@"; do [ -f "$f" ] && cat "$f"; done
    echo '```'
}
fig() { echo "![$1](plots/$1.png)"; echo; }

S="$OUT/summary.md"
{
    echo "# phax evaluation — $MODE mode$TINY_TAG"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- machine: $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) memory; load average at start $LOAD_START, at end $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- uptime: $(uptime)"
    dirty=""
    if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then dirty=" (with uncommitted changes)"; fi
    echo "- phax: $("$PHAX" version 2>/dev/null || echo '?'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$dirty; OPENBLAS_THREAD_TIMEOUT=$OPENBLAS_THREAD_TIMEOUT"
    echo "- invocation: \`$INVOCATION\` (from the repository root; this invocation took $((SECONDS - T_START)) s, reused outputs not counted)"
    echo "- data: $CORPUS_DIR ($CORPUS, $TOKENIZER tokenizer)${CORPUS_NOTE:+; $CORPUS_NOTE}"
    echo "- models: $SETTINGS; AdamW lr $LR → $MIN_LR cosine, warmup $WARMUP (capped at half the steps); validation every $EVAL_EVERY steps on the first $EVAL_TOKENS validation tokens; time budget $LM_BUDGET s per lm model, $NIAH_BUDGET s per SWAX regime (evaluations included)"
    echo
    if [ -f "$OUT/lm/lm.tsv" ]; then
        echo "## lm: perplexity and throughput"
        echo
        echo "Same width, depth, T, batch and time budget per family. tokens/s: median over the logged training steps; val ppl: the last validation (first $EVAL_TOKENS validation tokens); test ppl: $TEST_DESC in windows of T = $T (no state carried)."
        echo
        md_table "$OUT/lm/lm.tsv" "$(printf 'family\tparameters\tsteps\ttokens seen\ttokens/s\tval ppl\ttest ppl')"
        echo
        fig lm_curves
        echo "Validation perplexity vs tokens seen (the curves):"
        echo
        echo "| family | tokens seen | val ppl |"
        echo "|---|---|---|"
        awk -F'\t' '/^tokens\t/ { f = $2; next } NF == 2 { printf "| %s | %s | %.2f |\n", f, $1, $2 }' "$OUT/lm/curves.tsv"
        echo
        files=()
        for f in "${LM_FAMILIES[@]}"; do files+=("$OUT/runs/lm_$f/cmd.txt"); done
        for f in "${LM_FAMILIES[@]}"; do files+=("$OUT/lm/$f.test.cmd"); done
        cmds "${files[@]}"
        echo
    fi
    if [ -f "$OUT/mix/mix.tsv" ]; then
        echo "## mix: PHA mix weights per block ($(cat "$OUT/mix/step.txt"))"
        echo
        echo "Softplus-normalised weights of each block's branches (block 0 is nearest the embedding). The papers' sandwich: GSS dominates the first and last blocks, attention the middle."
        echo
        md_table "$OUT/mix/mix.tsv"
        echo
        fig mix_sandwich
        echo "From the last line with \`mix\` in \`$OUT/runs/lm_pha/log.jsonl\` (the lm PHA run)."
        echo
    fi
    if [ -f "$OUT/extrap/extrap.tsv" ]; then
        echo "## extrap: loss by position in windows of 4T = $T4"
        echo
        echo "Test loss (nats/token) per position bucket inside windows of $T4 tokens; training length T = $T. Windows: $([ "$EXTRAP_MAX" -gt 0 ] && echo "the first $EXTRAP_MAX $TEST_NAME tokens" || echo "the whole $TEST_NAME split"); swax (state carried): the first $CARRY_MAX tokens read token by token, recurrent state and SWA cache carried across windows."
        echo
        extrap_csvs=()
        for f in "${LM_FAMILIES[@]}" swax_carry; do extrap_csvs+=("$OUT/extrap/$f.csv"); done
        awk -F, 'FNR == 1 { k++; name[k] = FILENAME; sub(/.*\//, "", name[k]); sub(/\.csv$/, "", name[k]); next }
            { key = "[" $1 ", " $2 ")"; if (k == 1) o[++m] = key; if ($3 > 0) v[key, k] = sprintf("%.4f", $4) }
            END { printf "positions"; for (j = 1; j <= k; j++) printf "\t%s", name[j]; printf "\n"
                  for (i = 1; i <= m; i++) { printf "%s", o[i]; for (j = 1; j <= k; j++) printf "\t%s", ((o[i], j) in v ? v[o[i], j] : "-"); printf "\n" } }' \
            "${extrap_csvs[@]}" >"$OUT/extrap/table.tsv"
        md_table "$OUT/extrap/table.tsv"
        echo
        echo "| model | tokens scored | loss | ppl |"
        echo "|---|---|---|---|"
        for f in "${LM_FAMILIES[@]}" swax_carry; do
            jq -r --arg f "$f" '"| \($f) | \(.tokens_scored) | \(.loss * 10000 | round / 10000) | \(.ppl * 100 | round / 100) |"' "$OUT/extrap/$f.json"
        done
        echo
        fig extrapolation
        files=()
        for f in "${LM_FAMILIES[@]}" swax_carry; do files+=("$OUT/extrap/$f.cmd"); done
        cmds "${files[@]}"
        echo
    fi
    if want swax_niah && ((!NIAH_OK)); then
        echo "## swax_niah: skipped"
        echo
        echo "$CORPUS_NOTE."
        echo
    fi
    if [ -f "$OUT/swax_niah/niah.tsv" ]; then
        echo "## swax_niah: SWA window regimes, needle in a haystack and perplexity"
        echo
        echo "SWAX ($SETTINGS, $NIAH_BUDGET s each) with --niah-frac $NIAH_FRAC. Windows: $(awk -F'\t' '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2 }' "$OUT/swax_niah/windows.tsv"). Regimes: short = w_short every step (\`--set p_short=1 --set anneal=0\`), long = w_long every step (\`--set p_short=0\`), stochastic = the default draw, annealed to w_long. NIAH: single needle, $NIAH_HAYSTACKS haystack, $NIAH_DEPTHS depths × $NIAH_SAMPLES samples per length, greedy, string_match_all; each regime evaluated at w_long, and the short regime also at its training window w_short."
        echo
        echo "Accuracy (mean over depths, samples and haystacks) by context length:"
        echo
        {
            printf 'length'
            awk -F'\t' '/^length\t/ { printf "\t%s", $2 }' "$OUT/swax_niah/niah.tsv"
            printf '\n'
            awk -F'\t' '/^length\t/ { b++; next } NF == 2 { if (!($1 in seen)) { seen[$1] = 1; o[++m] = $1 } v[$1, b] = $2 }
                END { for (i = 1; i <= m; i++) { l = o[i]; printf "%s", l; for (j = 1; j <= b; j++) printf "\t%s", ((l, j) in v ? v[l, j] : "skipped"); printf "\n" } }' \
                "$OUT/swax_niah/niah.tsv"
        } >"$OUT/swax_niah/table.tsv"
        md_table "$OUT/swax_niah/table.tsv"
        echo
        if [ "$NIAH_HAYSTACKS" != noise ]; then
            echo "By haystack:"
            echo
            md_table "$OUT/swax_niah/niah_by_haystack.tsv"
            echo
        fi
        echo "Test perplexity ($TEST_DESC, windows of T = $T):"
        echo
        echo "| regime | eval window | test ppl | tokens/s (training, median) | steps |"
        echo "|---|---|---|---|---|"
        for e in short long stochastic short_at_wshort; do
            run="niah_${e%_at_wshort}"
            echo "| ${e%_at_wshort} | $(jq -r 'if .window < 0 then "w_long" else .window end' "$OUT/swax_niah/$e.test.json") | $(json_ppl "$OUT/swax_niah/$e.test.json") | $(fmt_int "$(log_toks "$run")") | $(run_steps "$run") |"
        done
        echo
        fig niah
        files=()
        for f in "${REGIMES[@]}"; do files+=("$OUT/runs/niah_$f/cmd.txt"); done
        for f in short long stochastic short_at_wshort; do files+=("$OUT/swax_niah/$f.niah.cmd" "$OUT/swax_niah/$f.test.cmd"); done
        cmds "${files[@]}"
        echo
    fi
    if [ -f "$OUT/bench/bench.tsv" ]; then
        echo "## bench: training throughput and memory vs T"
        echo
        echo "\`bench_model\` (benchmarks/README.md): one training step (forward, backward, AdamW) of the bench config (d_model 256, 4 layers, vocab 8192, batch 1), median step, peak resident memory of a fresh process."
        echo
        {
            printf 'family'
            for t in "${BENCH_TS[@]}"; do printf '\ttokens/s T=%s\tpeak MB T=%s' "$t" "$t"; done
            printf '\n'
            awk -F'\t' '/^T\t/ { f = $2; fs[++m] = f; next } NF == 3 { tok[f, $1] = $2; mb[f, $1] = $3 }
                END { n = split(Ts, t, ","); for (i = 1; i <= m; i++) { f = fs[i]; printf "%s", f
                      for (j = 1; j <= n; j++) printf "\t%s\t%s", ((f, t[j]) in tok ? sprintf("%.1f", tok[f, t[j]]) : "-"), ((f, t[j]) in mb ? sprintf("%.0f", mb[f, t[j]]) : "-")
                      printf "\n" } }' Ts="$(IFS=,; echo "${BENCH_TS[*]}")" "$OUT/bench/bench.tsv"
        } >"$OUT/bench/table.tsv"
        md_table "$OUT/bench/table.tsv"
        echo
        if [ -f "$OUT/bench/torch_baseline.csv" ]; then
            echo "PyTorch baseline (benchmarks/torch_baseline.py; plain = as it comes, tuned = jemalloc, OpenMP OpenBLAS, AVX-512):"
            echo
            awk -F, 'BEGIN { print "family\tT\ttorch plain tokens/s\ttorch tuned tokens/s\tphax tokens/s\ttorch plain MB\ttorch tuned MB\tphax MB\tphax / tuned speed" }
                FNR == 1 { k++; next }
                k == 1 && $2 == "fast" { tok[$1, $4] = $7; mb[$1, $4] = $13; next }
                k == 2 { pt = tok[$1, $2]; pm = mb[$1, $2]
                    printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", $1, $2, r1($3), r1($4), r1(pt), r0($6), r0($7), r0(pm),
                        (pt != "" && $4 + 0 > 0 ? sprintf("%.2f", pt / $4) : "-") }
                function r1(x) { return (x == "" || x == "nan") ? "-" : sprintf("%.1f", x) }
                function r0(x) { return (x == "" || x == "nan") ? "-" : sprintf("%.0f", x) }' \
                "$OUT/bench/model.csv" "$OUT/bench/torch_baseline.csv" >"$OUT/bench/torch_table.tsv"
            md_table "$OUT/bench/torch_table.tsv"
            echo
        fi
        fig throughput
        fig memory
        files=()
        for t in "${BENCH_TS[@]}"; do for f in "${BENCH_FAMILIES[@]}"; do files+=("$OUT/bench/model_${f}_$t.cmd"); done; done
        cmds "${files[@]}" "$OUT/bench/torch_baseline.cmd"
        echo
    fi
    echo "Every output and log is under \`$OUT\`: runs/ (training runs: cmd.txt, log.jsonl, train.out, checkpoint), lm/, mix/, extrap/, swax_niah/, bench/ (TSV/CSV/JSON and each command's .cmd/.out), plots/."
} >"$S"

say "summary: $S (total $((SECONDS - T_START)) s)"
cat "$S"
