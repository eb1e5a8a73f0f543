// `phax train` options: parsing, validation, the JSON stored in the training
// state (restored by --resume), and the model config they make (src/train.h).
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "phax/data.h"
#include "phax/model_plan.h"
#include "phax/niah.h"
#include "phax/recall.h"
#include "train.h"

train_opts train_opts_default(void) {
    return (train_opts){.task = "lm", .recall_pairs = 4, .recall_queries = 1,
                        .tokenizer = "word", .steps = 0, .time_budget = 0, .B = 8, .T = 256,
                        .lr = 1e-3, .min_lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                        .wd = 0.1, .clip = 1.0, .warmup = 100, .seed = 1, .backend = "fast",
                        .eval_every = 200, .eval_tokens = 65536, .ckpt_every = 500,
                        .log_every = 10, .stop_after = 0};
}

static void usage(FILE *f) {
    fputs(
        "usage: phax train [options] --out DIR\n"
        "Train a language model; DIR receives log.jsonl, checkpoint generations ckpt-<step>/\n"
        "(model, .state, .vocab), the link checkpoint.safetensors to the current one, and token\n"
        "caches (DIR/cache). See docs/train.md.\n"
        "\n"
        "task:\n"
        "  --task K            lm (default: next-token prediction on a text corpus) or recall\n"
        "                      (synthetic associative recall, docs/recall.md: every row is drawn\n"
        "                      from (seed, step), the vocabulary is the task's 64 tokens, no\n"
        "                      --data/--train/--valid/--niah-frac/--vocab-max; validation is a fixed\n"
        "                      set of max(1, eval-tokens / seq) rows: loss and accuracy of the answers)\n"
        "                      or mqar (multi-query associative recall, docs/recall.md: P pairs\n"
        "                      open each row, Q queries of distinct pairs follow among fillers,\n"
        "                      every query scored; same vocabulary and options as recall)\n"
        "  --recall-pairs P    recall: needles \"key value\" per row, 1..16 (default 4)\n"
        "  --recall-vary 0|1   mqar: each training row's pair count uniform in 1..P, its queries\n"
        "                      min(Q, half of that, rounded up) and their span varied (a\n"
        "                      curriculum; default 0; validation keeps P and Q)\n"
        "  --recall-queries Q  recall: queries per row, 1..P (default 1); only the answers are\n"
        "                      trained; --seq must be at least 2P + 2Q - 1\n"
        "model:\n"
        "  --family F          pha, transformer, serial, swax, swa, mlstm, swa_full, swax_gdn (or the config's)\n"
        "  --config FILE.json  a model config (docs/spec.md §3.5); --family overrides its family\n"
        "  --set KEY=VALUE     override one config key (repeatable; VALUE is JSON or a bare word:\n"
        "                      --set d_model=256 --set score=dot --set tie_embeddings=false)\n"
        "                      vocab_size is the tokenizer's; swax/swa/mlstm/swa_full/swax_gdn: train_len\n"
        "                      defaults to --seq (a different explicit value is warned about)\n"
        "data:\n"
        "  --data DIR          a corpus folder: train.txt[.xz] + valid.txt[.xz] (WikiText),\n"
        "                      ptb.train.txt[.xz] + ptb.valid.txt[.xz] (PTB), ptb.char.* (PTB\n"
        "                      char), or input.txt (tiny-shakespeare: its token stream is split\n"
        "                      90% train / 10% valid, the vocabulary built from all of it)\n"
        "  --train FILE        training text (plain or .xz), instead of --data\n"
        "  --valid FILE        validation text (optional with --train; none: no evaluation)\n"
        "  --tokenizer K       word | byte (default word; the word vocabulary is the train file's)\n"
        "  --vocab-max N       word tokenizer: keep <eos>, the N-2 most frequent training words\n"
        "                      and <unk>, which the others become (default 0 = every word)\n"
        "  --cache-dir DIR     token caches (default OUT/cache)\n"
        "length and batch:\n"
        "  --steps N           optimizer steps (default 1000 unless --time-budget)\n"
        "  --time-budget S     seconds (at most 3.2e9): time a few discarded steps first, then\n"
        "                      fix --steps so the run (evaluations included) fits; the steps are\n"
        "                      recorded for resume\n"
        "  --batch B           sequences per step (default 8)\n"
        "  --seq T             tokens per sequence, 1..65536 (default 256)\n"
        "optimizer (AdamW, docs/spec.md §2.12):\n"
        "  --lr X              peak learning rate (default 1e-3)\n"
        "  --min-lr X          final learning rate of the cosine decay (default 1e-4)\n"
        "  --warmup N          linear warmup steps (default 100, capped at half the steps)\n"
        "  --beta1 X --beta2 X (default 0.9, 0.95)\n"
        "  --eps X             (default 1e-8)\n"
        "  --wd X              decoupled weight decay (default 0.1), applied to 2-D '*.weight'\n"
        "                      matrices only: every linear map, the embedding (tied or not) and\n"
        "                      lm_head; not to norms, biases, mix.p, GSS Λ/C/D, attn.logscale\n"
        "  --clip X            global gradient-norm clip (default 1.0; 0 = off)\n"
        "  --seed N            seed of the initialisation, batches and SWA windows (default 1)\n"
        "  --niah-frac F       replace each batch row with probability F by a needle-in-a-\n"
        "                      haystack example (docs/niah.md; haystack: noise, distractor\n"
        "                      needles or the training text), so small models see retrieval\n"
        "                      (default 0; word vocabularies need the digits 0-9)\n"
        "  --niah-variants V,...  the variants of those rows, drawn uniformly: single, multikey,\n"
        "                      multivalue, multiquery (default: these four), passkey\n"
        "  --niah-digits D     digits of a passkey value, 1..7 (default 2)\n"
        "  --backend B         cpu or fast (float32, OpenBLAS+OpenMP; default) or ref (float64,\n"
        "                      tiny runs); cpu_bf16 is cpu with bf16 matmul operands\n"
        "  --precision P       f32 (default) or bf16: the cpu backend's matmuls (linear layers,\n"
        "                      FFN, output projection) on bf16 operands with float32 accumulation\n"
        "                      (oneDNN); everything else float32 (docs/precision.md). Same as\n"
        "                      --backend cpu_bf16; kept by --resume\n"
        "evaluation and output:\n"
        "  --eval-every N      validate every N steps and at the end (default 200; 0 = end only)\n"
        "  --eval-tokens N     the first N tokens of the valid split, windows of --seq (default\n"
        "                      65536; 0 = the whole split)\n"
        "  --ckpt-every N      checkpoint every N steps and at the end (default 500; 0 = end only)\n"
        "  --log-every N       progress line every N steps when stdout is not a terminal (default 10)\n"
        "  --out DIR           run folder (required, locked while training); must not hold a\n"
        "                      checkpoint unless --resume (one whose run stopped before its first\n"
        "                      checkpoint is started over)\n"
        "  --resume            continue the run in --out from its checkpoint; options come from\n"
        "                      the checkpoint (only --out, --cache-dir, --log-every, --stop-after\n"
        "                      may be given; --family asserts the checkpoint's family)\n"
        "  --stop-after N      stop after step N with a checkpoint, as if interrupted (resumable)\n"
        "SWAX family: every step draws the SWA window (w_short with probability p_short, else\n"
        "w_long; the last `anneal` fraction of steps w_long; docs/spec.md §3.4) from its own\n"
        "RNG stream of (seed, step), and logs it. Ctrl-C or SIGTERM stops after the current step\n"
        "with a checkpoint (exit 130 / 143). NaN/Inf in the loss or gradient norm stops the run\n"
        "(exit 1) with the last checkpoint untouched.\n",
        f);
}

static double parse_f64(const char *flag, const char *s) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno == ERANGE) die("%s: '%s' is not a number", flag, s);
    return v;
}

static long parse_long(const char *flag, const char *s, long lo, long hi) {
    return cli_parse_long("phax train", flag, s, lo, hi);
}

static uint64_t parse_u64(const char *flag, const char *s) { return cli_parse_u64("phax train", flag, s); }

// Flags that may accompany --resume (they do not change what is computed).
static int resume_compatible(const char *flag) {
    static const char *ok[] = {"--out", "--cache-dir", "--log-every", "--stop-after", "--resume",
                               "--family", NULL};
    for (int i = 0; ok[i]; i++)
        if (!strcmp(flag, ok[i])) return 1;
    return 0;
}

// Parse argv into o. *changing: the first flag that changes the run (refused
// with --resume), or NULL.
void train_parse_args(int argc, char **argv, train_opts *o, const char **changing) {
    *changing = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            cli_exit(0);
        }
        if (strncmp(a, "--", 2)) die("unexpected argument '%s' (try --help)", a);
        // "--flag=value" or "--flag value"
        char flag[64];
        const char *val = NULL, *eq = strchr(a, '=');
        size_t fl = eq ? (size_t)(eq - a) : strlen(a);
        if (fl >= sizeof flag) die("unknown option '%s' (try --help)", a);
        memcpy(flag, a, fl);
        flag[fl] = '\0';
        if (eq) val = eq + 1;
        if (!strcmp(flag, "--resume")) {
            if (val) die("--resume takes no value");
            o->resume = 1;
            continue;
        }
        if (!val) {
            if (i + 1 >= argc) die("%s: missing value", flag);
            val = argv[++i];
        }
        if (!resume_compatible(flag) && !*changing) *changing = argv[eq ? i : i - 1];
        if (!strcmp(flag, "--family")) o->family = val;
        else if (!strcmp(flag, "--task")) o->task = val;
        else if (!strcmp(flag, "--recall-pairs"))
            o->recall_pairs = (int)parse_long(flag, val, 1, PHAX_RECALL_MAX_PAIRS);
        else if (!strcmp(flag, "--recall-queries"))
            o->recall_queries = (int)parse_long(flag, val, 1, PHAX_RECALL_MAX_PAIRS);
        else if (!strcmp(flag, "--recall-vary")) {
            if (strcmp(val, "0") && strcmp(val, "1")) die("--recall-vary: '%s' is not 0 or 1", val);
            o->recall_vary = val[0] == '1';
        }
        else if (!strcmp(flag, "--config")) o->config_path = val;
        else if (!strcmp(flag, "--set")) {
            if (o->nsets == MAX_SETS) die("--set: more than %d overrides", MAX_SETS);
            if (!strchr(val, '=')) die("--set: '%s' is not KEY=VALUE", val);
            o->sets[o->nsets++] = val;
        } else if (!strcmp(flag, "--data")) o->data_dir = val;
        else if (!strcmp(flag, "--train")) o->train_path = val;
        else if (!strcmp(flag, "--valid")) o->valid_path = val;
        else if (!strcmp(flag, "--tokenizer")) o->tokenizer = val;
        else if (!strcmp(flag, "--vocab-max")) o->vocab_max = parse_long(flag, val, 3, PHAX_MAX_VOCAB);
        else if (!strcmp(flag, "--cache-dir")) o->cache_dir = val;
        else if (!strcmp(flag, "--steps")) o->steps = parse_long(flag, val, 1, 1L << 40);
        else if (!strcmp(flag, "--time-budget")) o->time_budget = parse_f64(flag, val);
        else if (!strcmp(flag, "--batch")) o->B = (int)parse_long(flag, val, 1, 1 << 20);
        else if (!strcmp(flag, "--seq")) o->T = (int)parse_long(flag, val, 1, PHAX_MAX_SEQ);
        else if (!strcmp(flag, "--lr")) o->lr = parse_f64(flag, val);
        else if (!strcmp(flag, "--min-lr")) o->min_lr = parse_f64(flag, val);
        else if (!strcmp(flag, "--warmup")) o->warmup = parse_long(flag, val, 0, 1L << 40);
        else if (!strcmp(flag, "--beta1")) o->beta1 = parse_f64(flag, val);
        else if (!strcmp(flag, "--beta2")) o->beta2 = parse_f64(flag, val);
        else if (!strcmp(flag, "--eps")) o->eps = parse_f64(flag, val);
        else if (!strcmp(flag, "--wd")) o->wd = parse_f64(flag, val);
        else if (!strcmp(flag, "--clip")) o->clip = parse_f64(flag, val);
        else if (!strcmp(flag, "--seed")) o->seed = parse_u64(flag, val);
        else if (!strcmp(flag, "--niah-frac")) o->niah_frac = parse_f64(flag, val);
        else if (!strcmp(flag, "--niah-variants")) {
            if (phax_niah_variant_list_parse(val, &o->niah_variants)) die("%s: %s", flag, phax_error());
        } else if (!strcmp(flag, "--niah-digits")) {
            if (phax_niah_digits_parse(val, &o->niah_digits)) die("%s: %s", flag, phax_error());
        }
        else if (!strcmp(flag, "--backend")) o->backend = val;
        else if (!strcmp(flag, "--precision")) o->precision = val;
        else if (!strcmp(flag, "--eval-every")) o->eval_every = parse_long(flag, val, 0, 1L << 40);
        else if (!strcmp(flag, "--eval-tokens")) o->eval_tokens = parse_long(flag, val, 0, 1L << 40);
        else if (!strcmp(flag, "--ckpt-every")) o->ckpt_every = parse_long(flag, val, 0, 1L << 40);
        else if (!strcmp(flag, "--log-every")) o->log_every = parse_long(flag, val, 1, 1L << 40);
        else if (!strcmp(flag, "--stop-after")) o->stop_after = parse_long(flag, val, 1, 1L << 40);
        else if (!strcmp(flag, "--out")) o->out = val;
        else die("unknown option '%s' (try --help)", flag);
    }
    if (o->precision) {  // --precision bf16 names the cpu backend's bf16 variant
        int cpu = !strcmp(o->backend, "fast") || !strcmp(o->backend, "cpu") || !strcmp(o->backend, "cpu_bf16");
        if (!strcmp(o->precision, "bf16")) {
            if (!cpu) die("--precision bf16: only with the cpu backend (fast/cpu), not %s", o->backend);
            o->backend = "cpu_bf16";
        } else if (!strcmp(o->precision, "f32")) {
            if (!strcmp(o->backend, "cpu_bf16")) die("--precision f32 contradicts --backend cpu_bf16");
        } else {
            die("--precision: '%s' is not f32 or bf16", o->precision);
        }
    }
}

// Largest --time-budget: a century of seconds (beyond it the step count
// would not fit; 1e300 used to wrap to 1 step).
#define MAX_TIME_BUDGET 3.2e9

// --backend: a name of phax/backend.h; "fast" (the default, and what the states of
// earlier runs hold) is the cpu backend.
const phax_backend_ops *train_backend(const train_opts *o) {
    const phax_backend_ops *be = phax_backend_find(strcmp(o->backend, "fast") ? o->backend : "cpu");
    if (!be) die("--backend: %s", phax_error());
    return be;
}

int train_is_recall(const train_opts *o) { return !strcmp(o->task, "recall") || train_is_mqar(o); }

int train_is_mqar(const train_opts *o) { return !strcmp(o->task, "mqar"); }

// The --task names (lm: a corpus; recall, mqar: core/recall.c's rows).
static int task_known(const char *t) { return !strcmp(t, "lm") || !strcmp(t, "recall") || !strcmp(t, "mqar"); }

void train_check_numbers(const train_opts *o) {
    if (!(isfinite(o->lr) && o->lr >= 0)) die("--lr: must be a finite number >= 0, got %g", o->lr);
    if (!(isfinite(o->min_lr) && o->min_lr >= 0 && o->min_lr <= o->lr))
        die("--min-lr: must be in [0, --lr], got %g", o->min_lr);
    if (!(o->beta1 >= 0 && o->beta1 < 1)) die("--beta1: must be in [0, 1), got %g", o->beta1);
    if (!(o->beta2 >= 0 && o->beta2 < 1)) die("--beta2: must be in [0, 1), got %g", o->beta2);
    if (!(isfinite(o->eps) && o->eps > 0)) die("--eps: must be a finite number > 0, got %g", o->eps);
    if (!(isfinite(o->wd) && o->wd >= 0)) die("--wd: must be a finite number >= 0, got %g", o->wd);
    if (!(isfinite(o->clip) && o->clip >= 0)) die("--clip: must be a finite number >= 0, got %g", o->clip);
    if (!(o->niah_frac >= 0 && o->niah_frac <= 1)) die("--niah-frac: must be in [0, 1], got %g", o->niah_frac);
    if (o->niah_variants && !(o->niah_frac > 0)) die("--niah-variants: only with --niah-frac > 0");
    if (o->niah_digits && !(o->niah_variants & (1u << PHAX_NIAH_PASSKEY)))
        die("--niah-digits: only with passkey in --niah-variants");
    if (!(isfinite(o->time_budget) && o->time_budget >= 0 && o->time_budget <= MAX_TIME_BUDGET))
        die("--time-budget: must be a number of seconds in [0, %g], got %g", MAX_TIME_BUDGET,
            o->time_budget);
    train_backend(o);
    if (strcmp(o->tokenizer, "word") && strcmp(o->tokenizer, "byte"))
        die("--tokenizer: '%s' is not word or byte", o->tokenizer);
    if (o->vocab_max && strcmp(o->tokenizer, "word")) die("--vocab-max: only with --tokenizer word");
    if (!task_known(o->task)) die("--task: '%s' is not lm, recall or mqar", o->task);
    if (train_is_recall(o)) {
        int min_T;
        if (train_is_mqar(o) ? phax_mqar_min_row(o->recall_pairs, o->recall_queries, &min_T)
                             : phax_recall_min_row(o->recall_pairs, o->recall_queries, &min_T))
            die("--recall-pairs %d, --recall-queries %d: %s", o->recall_pairs, o->recall_queries,
                phax_error());
        if (o->T < min_T || o->T > PHAX_RECALL_MAX_LEN)
            die("--seq %d: too short for --recall-pairs %d and --recall-queries %d (%d tokens at least)",
                o->T, o->recall_pairs, o->recall_queries, min_T);
        if (o->recall_vary && !train_is_mqar(o)) die("--recall-vary: only with --task mqar");
        if (o->niah_frac > 0) die("--niah-frac: not with --task %s (every row is a recall row)", o->task);
        if (strcmp(o->tokenizer, "word"))
            die("--tokenizer: not with --task %s (the task has its own vocabulary)", o->task);
        if (o->vocab_max) die("--vocab-max: not with --task %s (the task has its own vocabulary)", o->task);
    }
}

void train_check_opts(const train_opts *o) {
    train_check_numbers(o);
    if (o->steps && o->time_budget > 0) die("--steps and --time-budget: give one, not both");
    if (train_is_recall(o) && (o->data_dir || o->train_path || o->valid_path))
        die("%s: not with --task recall (the task makes its own rows)",
            o->data_dir ? "--data" : o->train_path ? "--train" : "--valid");
    if (o->data_dir && (o->train_path || o->valid_path)) die("--data and --train/--valid: give one");
    if (!train_is_recall(o) && !o->data_dir && !o->train_path)
        die("no data: give --data DIR or --train FILE (or --task recall)");
    if (o->valid_path && !o->train_path) die("--valid needs --train");
    if (!o->family && !o->config_path) die("no model: give --family or --config");
}

// ---------------------------------------------------------------------------
// Options <-> JSON (stored in the training state, restored by --resume)

char *train_u64_str(uint64_t v, char buf[24]) {
    snprintf(buf, 24, "%" PRIu64, v);
    return buf;
}

char *train_opts_to_json(const train_opts *o, const char *train, const char *valid, int split) {
    char sb[24];
    json_t *j = json_pack(
        "{s:s, s:s, s:s?, s:s?, s:b, s:I, s:f, s:i, s:i, s:f, s:f, s:I, s:f, s:f, s:f, s:f, s:f,"
        " s:s, s:I, s:I, s:I, s:f, s:s, s:i, s:i}",
        "backend", o->backend, "tokenizer", o->tokenizer, "train", train, "valid", valid,
        "split_input", split, "steps", (json_int_t)o->steps, "time_budget", o->time_budget,
        "batch", o->B, "seq", o->T, "lr", o->lr, "min_lr", o->min_lr, "warmup",
        (json_int_t)o->warmup, "beta1", o->beta1, "beta2", o->beta2, "eps", o->eps, "wd", o->wd,
        "clip", o->clip, "seed", train_u64_str(o->seed, sb), "eval_every", (json_int_t)o->eval_every,
        "eval_tokens", (json_int_t)o->eval_tokens, "ckpt_every", (json_int_t)o->ckpt_every,
        "niah_frac", o->niah_frac, "task", o->task, "recall_pairs", o->recall_pairs,
        "recall_queries", o->recall_queries);
    if (!j) die("out of memory");
    if (o->vocab_max) json_object_set_new(j, "vocab_max", json_integer((json_int_t)o->vocab_max));
    if (o->recall_vary) json_object_set_new(j, "recall_vary", json_true());  // absent: fixed P
    if (o->niah_variants) {  // absent: RULER's four
        char list[128] = "";
        for (int v = 0; v < PHAX_NIAH_N_ALL_VARIANTS; v++)
            if (o->niah_variants & (1u << v))
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", *list ? "," : "",
                         phax_niah_variant_name((phax_niah_variant)v));
        json_object_set_new(j, "niah_variants", json_string(list));
    }
    if (o->niah_digits) json_object_set_new(j, "niah_digits", json_integer(o->niah_digits));
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    if (!s) die("out of memory");
    return s;
}

// Strings in the restored options point into `keep` (alive for the run).
void train_opts_from_json(train_opts *o, const char *json, const char *where, json_t **keep,
                           int *split) {
    json_error_t e;
    json_t *j = json_loads(json, 0, &e);
    const char *seed = NULL;
    json_t *valid = NULL;  // a string, or null for a run without validation data
    json_t *train = NULL;  // a string, or null for --task recall
    int pairs = o->recall_pairs, queries = o->recall_queries;  // older states: lm, no recall keys
    json_int_t steps, warmup, ee, et, ce, B, T;  // wide, range-checked below
    if (!j || json_unpack_ex(j, &e, 0,
                             "{s:s, s:s, s:o, s?o, s:b, s:I, s:F, s:I, s:I, s:F, s:F, s:I, s:F, s:F,"
                             " s:F, s:F, s:F, s:s, s:I, s:I, s:I, s?F, s?s, s?i, s?i}",
                             "backend", &o->backend, "tokenizer", &o->tokenizer, "train",
                             &train, "valid", &valid, "split_input", split, "steps", &steps,
                             "time_budget", &o->time_budget, "batch", &B, "seq", &T, "lr", &o->lr,
                             "min_lr", &o->min_lr, "warmup", &warmup, "beta1", &o->beta1, "beta2",
                             &o->beta2, "eps", &o->eps, "wd", &o->wd, "clip", &o->clip, "seed",
                             &seed, "eval_every", &ee, "eval_tokens", &et, "ckpt_every", &ce,
                             "niah_frac", &o->niah_frac, "task", &o->task, "recall_pairs", &pairs,
                             "recall_queries", &queries))
        die("%s: training options unreadable: %s", where, e.text);
    o->recall_pairs = pairs, o->recall_queries = queries;
    if (!task_known(o->task)) die("%s: training options unreadable: \"task\" is not lm, recall or mqar", where);
    if (train_is_recall(o) ? !json_is_null(train) : !json_is_string(train))
        die("%s: training options unreadable: \"train\" is not %s", where,
            train_is_recall(o) ? "null (--task recall)" : "a path");
    o->train_path = json_is_string(train) ? json_string_value(train) : NULL;
    if (valid && !json_is_null(valid) && !json_is_string(valid))
        die("%s: training options unreadable: \"valid\" is not a path or null", where);
    o->valid_path = valid && json_is_string(valid) ? json_string_value(valid) : NULL;
    json_t *vm = json_object_get(j, "vocab_max");  // absent: every word
    if (vm && !(json_is_integer(vm) && json_integer_value(vm) >= 3 && json_integer_value(vm) <= PHAX_MAX_VOCAB))
        die("%s: training options unreadable: \"vocab_max\" is not a count in [3, %d]", where, PHAX_MAX_VOCAB);
    o->vocab_max = vm ? (long)json_integer_value(vm) : 0;
    json_t *rv = json_object_get(j, "recall_vary");
    if (rv && !json_is_boolean(rv)) die("%s: training options unreadable: \"recall_vary\" is not a boolean", where);
    o->recall_vary = rv && json_is_true(rv);
    json_t *nv = json_object_get(j, "niah_variants"), *nd = json_object_get(j, "niah_digits");
    o->niah_variants = 0, o->niah_digits = 0;
    if (nv && !(json_is_string(nv) && !phax_niah_variant_list_parse(json_string_value(nv), &o->niah_variants)))
        die("%s: training options unreadable: \"niah_variants\" is not a list of variants", where);
    if (nd && !(json_is_integer(nd) && json_integer_value(nd) >= 1 && json_integer_value(nd) <= PHAX_NIAH_DIGITS))
        die("%s: training options unreadable: \"niah_digits\" is not a count in [1, %d]", where, PHAX_NIAH_DIGITS);
    if (nd) o->niah_digits = (int)json_integer_value(nd);
    // A crafted state must not make the run allocate or loop without bound:
    // the ranges the command line enforces.
    if (steps < 1 || steps > (1L << 40) || warmup < 0 || warmup > (1L << 40) || B < 1 ||
        B > (1 << 20) || T < 1 || T > PHAX_MAX_SEQ || ee < 0 || ee > (1L << 40) || et < 0 ||
        et > (1L << 40) || ce < 0 || ce > (1L << 40))
        die("%s: training options out of range (steps, warmup, batch, seq or an interval)", where);
    o->steps = (long)steps, o->warmup = (long)warmup, o->B = (int)B, o->T = (int)T;
    o->eval_every = (long)ee, o->eval_tokens = (long)et, o->ckpt_every = (long)ce;
    o->seed = parse_u64("seed", seed);
    o->data_dir = NULL;
    *keep = j;
}

// ---------------------------------------------------------------------------
// Model config: {"family"} or the --config file, then --family, then every
// --set, then vocab_size (the tokenizer's) and train_len (= T unless given).

phax_model_cfg train_build_config(const train_opts *o, int vocab_size) {
    json_t *j;
    if (o->config_path) {
        phax_model_cfg check;
        if (phax_model_cfg_from_json_file(&check, o->config_path)) die_lib();  // its own messages
        json_error_t e;
        if (!(j = json_load_file(o->config_path, 0, &e))) die("%s: %s", o->config_path, e.text);
    } else {
        j = json_object();
    }
    if (o->family) {
        phax_family f;
        if (phax_family_parse(o->family, &f)) die("--family: '%s' is not a model family", o->family);
        json_object_set_new(j, "family", json_string(o->family));
    }
    if (o->nsets) {
        char *txt = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        if (!txt) die("out of memory");
        if (phax_model_cfg_json_set(&txt, o->sets, o->nsets)) die_lib();
        j = json_loads(txt, 0, NULL);
        free(txt);
        if (!j) die("out of memory");
    }
    json_t *vs = json_object_get(j, "vocab_size");
    if (vs && !(json_is_integer(vs) && json_integer_value(vs) == vocab_size))
        die("config: vocab_size must be the tokenizer's %d (leave it out)", vocab_size);
    json_object_set_new(j, "vocab_size", json_integer(vocab_size));
    int explicit_len = json_object_get(j, "train_len") != NULL;
    if (!explicit_len) json_object_set_new(j, "train_len", json_integer(o->T));
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    phax_model_cfg c;
    if (!s || phax_model_cfg_from_json_str(&c, s, o->config_path ? o->config_path : "config"))
        die_lib();
    free(s);
    if (phax_plan_takes_window(&c) && c.train_len != o->T)
        fprintf(stderr, "phax train: warning: train_len %d differs from --seq %d (the windows derive from train_len)\n",
                c.train_len, o->T);
    return c;
}

