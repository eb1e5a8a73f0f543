// `phax train`: train a model of any family on a text corpus, with AdamW, a
// warmup + cosine learning rate, periodic validation and checkpoints, and an
// exact resume. docs/train.md describes the command and the files it writes.
//
// Determinism: everything a step computes is a function of (options, seed,
// step) and the state at the step's start — the batch (phax_sampler_batch),
// the SWA window (phax_swax_window_at), the learning rate (phax_lr_at) — so a
// run stopped at a checkpoint and resumed ends bit-identical to one never
// stopped (same thread count; fcpu kernels are deterministic for it).
#define _GNU_SOURCE  // sigaction
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "phax/checkpoint.h"
#include "phax/data.h"
#include "phax/fcpu_basic.h"
#include "phax/fcpu_model.h"
#include "phax/model.h"
#include "phax/niah.h"
#include "phax/recall.h"
#include "phax/ref.h"
#include "phax/ref_model.h"
#include "phax/tokenizer.h"

#define MAX_SEQ 65536
#define MAX_SETS 64

// ---------------------------------------------------------------------------
// Errors: one line on stderr, "phax train: <file or option>: <what>", exit 1.

#define die(...) cli_die("phax train", __VA_ARGS__)

#define die_lib() die("%s", phax_error())  // the library's message names the file

#define now_s phax_clock

#define file_exists cli_exists
#define path_join(dir, name) cli_path_join("phax train", dir, name)

// ---------------------------------------------------------------------------
// Options

typedef struct {
    // task: "lm" (a text corpus) or "recall" (synthetic associative recall, docs/recall.md)
    const char *task;
    int recall_pairs, recall_queries;
    // model
    const char *family, *config_path;
    const char *sets[MAX_SETS];
    int nsets;
    // data
    const char *data_dir, *train_path, *valid_path, *tokenizer;
    long vocab_max;  // word tokenizer: at most this many words (0 = every word of the train file)
    // run length, batch
    long steps;
    double time_budget;
    int B, T;
    // optimizer
    double lr, min_lr, beta1, beta2, eps, wd, clip;
    long warmup;
    uint64_t seed;
    double niah_frac;  // fraction of batch rows replaced by needle-in-a-haystack examples
    const char *backend;
    // evaluation, checkpoints, output
    long eval_every, eval_tokens, ckpt_every, log_every, stop_after;
    const char *out, *cache_dir;
    int resume;
} train_opts;

static train_opts opts_default(void) {
    return (train_opts){.task = "lm", .recall_pairs = 4, .recall_queries = 1,
                        .tokenizer = "word", .steps = 0, .time_budget = 0, .B = 8, .T = 256,
                        .lr = 1e-3, .min_lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                        .wd = 0.1, .clip = 1.0, .warmup = 100, .seed = 1, .backend = "fast",
                        .eval_every = 200, .eval_tokens = 65536, .ckpt_every = 500,
                        .log_every = 10, .stop_after = 0};
}

#define DEFAULT_STEPS 1000

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
        "  --recall-pairs P    recall: needles \"key value\" per row, 1..16 (default 4)\n"
        "  --recall-queries Q  recall: queries per row, 1..P (default 1); only the answers are\n"
        "                      trained; --seq must be at least 2P + 2Q - 1\n"
        "model:\n"
        "  --family F          pha, transformer, serial, swax, swa, mlstm (or the config's)\n"
        "  --config FILE.json  a model config (docs/spec.md §3.5); --family overrides its family\n"
        "  --set KEY=VALUE     override one config key (repeatable; VALUE is JSON or a bare word:\n"
        "                      --set d_model=256 --set score=dot --set tie_embeddings=false)\n"
        "                      vocab_size is the tokenizer's; swax/swa/mlstm: train_len\n"
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
        "  --backend B         fast (float32, OpenBLAS+OpenMP; default) or ref (float64, tiny runs)\n"
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
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno) die("%s: '%s' is not an integer", flag, s);
    if (v < lo || v > hi) die("%s: %ld is out of range [%ld, %ld]", flag, v, lo, hi);
    return v;
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
static void parse_args(int argc, char **argv, train_opts *o, const char **changing) {
    *changing = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
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
        else if (!strcmp(flag, "--seq")) o->T = (int)parse_long(flag, val, 1, MAX_SEQ);
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
        else if (!strcmp(flag, "--backend")) o->backend = val;
        else if (!strcmp(flag, "--eval-every")) o->eval_every = parse_long(flag, val, 0, 1L << 40);
        else if (!strcmp(flag, "--eval-tokens")) o->eval_tokens = parse_long(flag, val, 0, 1L << 40);
        else if (!strcmp(flag, "--ckpt-every")) o->ckpt_every = parse_long(flag, val, 0, 1L << 40);
        else if (!strcmp(flag, "--log-every")) o->log_every = parse_long(flag, val, 1, 1L << 40);
        else if (!strcmp(flag, "--stop-after")) o->stop_after = parse_long(flag, val, 1, 1L << 40);
        else if (!strcmp(flag, "--out")) o->out = val;
        else die("unknown option '%s' (try --help)", flag);
    }
}

// Largest --time-budget: a century of seconds (beyond it the step count
// would not fit; 1e300 used to wrap to 1 step).
#define MAX_TIME_BUDGET 3.2e9

static int is_recall(const train_opts *o) { return !strcmp(o->task, "recall"); }

// Numbers that parse but make no sense (also checked on the options a
// resumed state restores).
static void check_numbers(const train_opts *o) {
    if (!(isfinite(o->lr) && o->lr >= 0)) die("--lr: must be a finite number >= 0, got %g", o->lr);
    if (!(isfinite(o->min_lr) && o->min_lr >= 0 && o->min_lr <= o->lr))
        die("--min-lr: must be in [0, --lr], got %g", o->min_lr);
    if (!(o->beta1 >= 0 && o->beta1 < 1)) die("--beta1: must be in [0, 1), got %g", o->beta1);
    if (!(o->beta2 >= 0 && o->beta2 < 1)) die("--beta2: must be in [0, 1), got %g", o->beta2);
    if (!(isfinite(o->eps) && o->eps > 0)) die("--eps: must be a finite number > 0, got %g", o->eps);
    if (!(isfinite(o->wd) && o->wd >= 0)) die("--wd: must be a finite number >= 0, got %g", o->wd);
    if (!(isfinite(o->clip) && o->clip >= 0)) die("--clip: must be a finite number >= 0, got %g", o->clip);
    if (!(o->niah_frac >= 0 && o->niah_frac <= 1)) die("--niah-frac: must be in [0, 1], got %g", o->niah_frac);
    if (!(isfinite(o->time_budget) && o->time_budget >= 0 && o->time_budget <= MAX_TIME_BUDGET))
        die("--time-budget: must be a number of seconds in [0, %g], got %g", MAX_TIME_BUDGET,
            o->time_budget);
    if (strcmp(o->backend, "fast") && strcmp(o->backend, "ref"))
        die("--backend: '%s' is not fast or ref", o->backend);
    if (strcmp(o->tokenizer, "word") && strcmp(o->tokenizer, "byte"))
        die("--tokenizer: '%s' is not word or byte", o->tokenizer);
    if (o->vocab_max && strcmp(o->tokenizer, "word")) die("--vocab-max: only with --tokenizer word");
    if (strcmp(o->task, "lm") && strcmp(o->task, "recall"))
        die("--task: '%s' is not lm or recall", o->task);
    if (is_recall(o)) {
        int min_T;
        if (phax_recall_min_row(o->recall_pairs, o->recall_queries, &min_T))
            die("--recall-pairs %d, --recall-queries %d: %s", o->recall_pairs, o->recall_queries,
                phax_error());
        if (o->T < min_T || o->T > PHAX_RECALL_MAX_LEN)
            die("--seq %d: too short for --recall-pairs %d and --recall-queries %d (%d tokens at least)",
                o->T, o->recall_pairs, o->recall_queries, min_T);
        if (o->niah_frac > 0) die("--niah-frac: not with --task recall (every row is a recall row)");
        if (strcmp(o->tokenizer, "word"))
            die("--tokenizer: not with --task recall (the task has its own vocabulary)");
        if (o->vocab_max) die("--vocab-max: not with --task recall (the task has its own vocabulary)");
    }
}

// Values that parse but make no sense.
static void check_opts(const train_opts *o) {
    check_numbers(o);
    if (o->steps && o->time_budget > 0) die("--steps and --time-budget: give one, not both");
    if (is_recall(o) && (o->data_dir || o->train_path || o->valid_path))
        die("%s: not with --task recall (the task makes its own rows)",
            o->data_dir ? "--data" : o->train_path ? "--train" : "--valid");
    if (o->data_dir && (o->train_path || o->valid_path)) die("--data and --train/--valid: give one");
    if (!is_recall(o) && !o->data_dir && !o->train_path)
        die("no data: give --data DIR or --train FILE (or --task recall)");
    if (o->valid_path && !o->train_path) die("--valid needs --train");
    if (!o->family && !o->config_path) die("no model: give --family or --config");
}

// ---------------------------------------------------------------------------
// Options <-> JSON (stored in the training state, restored by --resume)

static char *u64_str(uint64_t v, char buf[24]) {
    snprintf(buf, 24, "%" PRIu64, v);
    return buf;
}

static char *opts_to_json(const train_opts *o, const char *train, const char *valid, int split) {
    char sb[24];
    json_t *j = json_pack(
        "{s:s, s:s, s:s?, s:s?, s:b, s:I, s:f, s:i, s:i, s:f, s:f, s:I, s:f, s:f, s:f, s:f, s:f,"
        " s:s, s:I, s:I, s:I, s:f, s:s, s:i, s:i}",
        "backend", o->backend, "tokenizer", o->tokenizer, "train", train, "valid", valid,
        "split_input", split, "steps", (json_int_t)o->steps, "time_budget", o->time_budget,
        "batch", o->B, "seq", o->T, "lr", o->lr, "min_lr", o->min_lr, "warmup",
        (json_int_t)o->warmup, "beta1", o->beta1, "beta2", o->beta2, "eps", o->eps, "wd", o->wd,
        "clip", o->clip, "seed", u64_str(o->seed, sb), "eval_every", (json_int_t)o->eval_every,
        "eval_tokens", (json_int_t)o->eval_tokens, "ckpt_every", (json_int_t)o->ckpt_every,
        "niah_frac", o->niah_frac, "task", o->task, "recall_pairs", o->recall_pairs,
        "recall_queries", o->recall_queries);
    if (!j) die("out of memory");
    if (o->vocab_max) json_object_set_new(j, "vocab_max", json_integer((json_int_t)o->vocab_max));
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    if (!s) die("out of memory");
    return s;
}

// Strings in the restored options point into `keep` (alive for the run).
static void opts_from_json(train_opts *o, const char *json, const char *where, json_t **keep,
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
    if (strcmp(o->task, "lm") && strcmp(o->task, "recall"))
        die("%s: training options unreadable: \"task\" is not lm or recall", where);
    if (is_recall(o) ? !json_is_null(train) : !json_is_string(train))
        die("%s: training options unreadable: \"train\" is not %s", where,
            is_recall(o) ? "null (--task recall)" : "a path");
    o->train_path = json_is_string(train) ? json_string_value(train) : NULL;
    if (valid && !json_is_null(valid) && !json_is_string(valid))
        die("%s: training options unreadable: \"valid\" is not a path or null", where);
    o->valid_path = valid && json_is_string(valid) ? json_string_value(valid) : NULL;
    json_t *vm = json_object_get(j, "vocab_max");  // absent: every word
    if (vm && !(json_is_integer(vm) && json_integer_value(vm) >= 3 && json_integer_value(vm) <= PHAX_MAX_VOCAB))
        die("%s: training options unreadable: \"vocab_max\" is not a count in [3, %d]", where, PHAX_MAX_VOCAB);
    o->vocab_max = vm ? (long)json_integer_value(vm) : 0;
    // A crafted state must not make the run allocate or loop without bound:
    // the ranges the command line enforces.
    if (steps < 1 || steps > (1L << 40) || warmup < 0 || warmup > (1L << 40) || B < 1 ||
        B > (1 << 20) || T < 1 || T > MAX_SEQ || ee < 0 || ee > (1L << 40) || et < 0 ||
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

static int is_swax_family(phax_family f) {
    return f == PHAX_FAMILY_SWAX || f == PHAX_FAMILY_SWA || f == PHAX_FAMILY_MLSTM;
}

static phax_model_cfg build_config(const train_opts *o, int vocab_size) {
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
    if (is_swax_family(c.family) && c.train_len != o->T)
        fprintf(stderr, "phax train: warning: train_len %d differs from --seq %d (the windows derive from train_len)\n",
                c.train_len, o->T);
    return c;
}

// ---------------------------------------------------------------------------
// Data

typedef struct {
    char *train, *valid;   // files (valid may be NULL)
    int split;             // 1: one file (input.txt) split 90/10
    phax_vocab *vocab;
    int32_t *all;          // the tokens as loaded (train, or the whole split file)
    int32_t *valid_tok;    // separately loaded valid tokens (NULL when split or none)
    const int32_t *tr, *va;
    size_t ntr, nva;
} corpus;

// First of dir/<prefix><name>[.xz] that exists, or NULL.
static char *find_split(const char *dir, const char *name) {
    static const char *prefix[] = {"", "ptb.", "ptb.char."};
    char buf[64];
    for (int i = 0; i < 3; i++)
        for (int xz = 0; xz < 2; xz++) {
            snprintf(buf, sizeof buf, "%s%s%s", prefix[i], name, xz ? ".xz" : "");
            char *p = path_join(dir, buf);
            if (file_exists(p)) return p;
            free(p);
        }
    return NULL;
}

// A corpus file must be a non-empty regular file (checked before anything is written).
static void check_data_file(const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) die("%s: no such file", path);
    if (!S_ISREG(sb.st_mode)) die("%s: not a regular file", path);
    if (sb.st_size == 0) die("%s: empty file", path);
}

// Absolute paths in the stored options, so --resume works from any directory.
static void absolutise(char **path) {
    char *abs = realpath(*path, NULL);
    if (!abs) die("%s: %s", *path, strerror(errno));
    free(*path);
    *path = abs;
}

static void corpus_locate(corpus *c, const train_opts *o) {
    if (o->data_dir) {
        struct stat sb;
        if (stat(o->data_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) die("%s: no such directory", o->data_dir);
        c->train = find_split(o->data_dir, "train.txt");
        c->valid = c->train ? find_split(o->data_dir, "valid.txt") : NULL;
        if (!c->train) {
            char *in = path_join(o->data_dir, "input.txt");
            if (!file_exists(in))
                die("%s: no training file (train.txt[.xz], ptb.train.txt[.xz], ptb.char.train.txt[.xz] or input.txt)",
                    o->data_dir);
            c->train = in, c->split = 1;
        }
    } else {
        c->train = strdup(o->train_path);
        c->valid = o->valid_path ? strdup(o->valid_path) : NULL;
        c->split = 0;
    }
    check_data_file(c->train);
    if (c->valid) check_data_file(c->valid);
    absolutise(&c->train);
    if (c->valid) absolutise(&c->valid);
}

static void corpus_vocab(corpus *c, const train_opts *o) {
    int rc = strcmp(o->tokenizer, "byte") ? phax_vocab_build_file_max(c->train, (size_t)o->vocab_max, &c->vocab)
                                          : phax_vocab_byte(&c->vocab);
    if (rc) die_lib();
}

// cache_dir NULL: tokenize in memory and write no cache (a resumed run whose
// data are not verified yet).
static int load_tokens(const phax_vocab *v, const char *path, const char *cache_dir, int32_t **out,
                       size_t *n) {
    return cache_dir ? phax_tokens_load_cached(v, path, cache_dir, out, n)
                     : phax_encode_file(v, path, out, n);
}

static void corpus_tokens(corpus *c, const char *cache_dir) {
    size_t n;
    if (load_tokens(c->vocab, c->train, cache_dir, &c->all, &n)) die_lib();
    if (c->split) {
        size_t ntr = n - n / 10;
        c->tr = c->all, c->ntr = ntr;
        c->va = c->all + ntr, c->nva = n - ntr;
    } else {
        c->tr = c->all, c->ntr = n;
        if (c->valid) {
            if (load_tokens(c->vocab, c->valid, cache_dir, &c->valid_tok, &c->nva)) die_lib();
            c->va = c->valid_tok;
        }
    }
    if (c->va && c->nva < 2) c->va = NULL, c->nva = 0;  // nothing to predict
}

static void corpus_free(corpus *c) {
    free(c->train), free(c->valid), free(c->all), free(c->valid_tok);
    phax_vocab_free(c->vocab);
}

// Identity of a data file's bytes: its size and FNV-1a, read in pieces. The
// state stores it so that --resume checks a file before tokenizing it or
// writing a cache of it (a crafted run folder cannot name any readable file).
// want_bytes >= 0: stop early (NULL) when the size differs.
static json_t *file_identity(const char *path, json_int_t want_bytes) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) die("%s: cannot read: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) die("%s: not a regular file", path);
    if (want_bytes >= 0 && (json_int_t)sb.st_size != want_bytes) {
        close(fd);
        return NULL;
    }
    static uint8_t buf[1 << 16];
    uint64_t h = PHAX_FNV_INIT;
    json_int_t total = 0;
    for (;;) {
        ssize_t k = read(fd, buf, sizeof buf);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) die("%s: read error: %s", path, strerror(errno));
        if (k == 0) break;
        h = phax_fnv1a64(h, buf, (size_t)k), total += k;
    }
    close(fd);
    char hx[24];
    snprintf(hx, sizeof hx, "%016" PRIx64, h);
    return json_pack("{s:I, s:s}", "bytes", total, "fnv1a", hx);
}

// --resume: the data files must be the bytes the state names, checked before
// anything reads them further or writes. A state of an older phax has no file
// identity: its tokens are then checked in memory before any cache is written.
// Returns 1 when the files were checked here.
static int check_data_files(const corpus *c, const char *data_json, const char *where, int generation) {
    json_t *j = json_loads(data_json, 0, NULL);
    json_t *files = j ? json_object_get(j, "files") : NULL;
    if (!files) {
        json_decref(j);
        // Only a run folder of an older phax (files, no generation link) lacks identities;
        // a generation without them was not written by phax: read nothing it names.
        if (generation) die("%s: the training state names no data file identities; nothing was read", where);
        return 0;
    }
    const char *keys[2] = {"train", "valid"};
    const char *paths[2] = {c->train, c->valid};
    for (int i = 0; i < 2; i++) {
        json_t *want = json_object_get(files, keys[i]), *wb = json_object_get(want, "bytes");
        if (!paths[i] && json_is_null(want)) continue;
        if (!paths[i] || !json_is_integer(wb)) die("%s: data file identity unreadable (\"%s\")", where, keys[i]);
        json_t *got = file_identity(paths[i], json_integer_value(wb));
        if (!got || !json_equal(got, want))
            die("%s: not the file this run was trained on (its size or hash differs from %s's); nothing was read or written",
                paths[i], where);
        json_decref(got);
    }
    json_decref(j);
    return 1;
}

// The token-stream fields of two data identities agree (the file identity is
// checked separately, and states of an older phax lack it).
static int same_tokens(const char *a, const char *b) {
    static const char *keys[] = {"train_tokens", "train_hash", "valid_tokens", "valid_hash", "vocab_hash"};
    json_t *ja = json_loads(a, 0, NULL), *jb = json_loads(b, 0, NULL);
    int same = ja && jb;
    for (size_t i = 0; same && i < sizeof keys / sizeof *keys; i++) {
        json_t *x = json_object_get(ja, keys[i]), *y = json_object_get(jb, keys[i]);
        same = x && y && json_equal(x, y);
    }
    json_decref(ja), json_decref(jb);
    return same;
}

// Identity of the token streams and of the files they come from, stored in
// the state and checked on resume.
static char *corpus_identity(const corpus *c) {
    char h1[24], h2[24], hv[24];
    snprintf(h1, sizeof h1, "%016" PRIx64, phax_fnv1a64(PHAX_FNV_INIT, c->tr, c->ntr * 4));
    snprintf(h2, sizeof h2, "%016" PRIx64, phax_fnv1a64(PHAX_FNV_INIT, c->va, c->nva * 4));
    snprintf(hv, sizeof hv, "%016" PRIx64, phax_vocab_hash(c->vocab));
    json_t *files = json_pack("{s:o, s:o}", "train", file_identity(c->train, -1), "valid",
                              c->valid ? file_identity(c->valid, -1) : json_null());
    json_t *j = json_pack("{s:I, s:s, s:I, s:s, s:s, s:o}", "train_tokens", (json_int_t)c->ntr,
                          "train_hash", h1, "valid_tokens", (json_int_t)c->nva, "valid_hash", h2,
                          "vocab_hash", hv, "files", files);
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    if (!s) die("out of memory");
    return s;
}

// ---------------------------------------------------------------------------
// The model and optimizer on one backend (fast float32 or ref float64).

typedef struct {
    int ref;  // 0: fast/cpu float32; 1: ref float64
    phax_model_cfg cfg;
    const phax_layout *L;
    int B, T;
    // fast
    fcpu_model fm;
    fcpu_model_ws *ws;
    float *fm_m, *fm_v;
    fcpu_adamw_param *fps;
    // ref
    ref_model rm;
    double *rm_m, *rm_v;
    ref_adamw_param *rps;
    // shared
    float *f32;      // ref: float copy of the params for the model file
    int32_t *x, *y;  // (B, T) batch
    int *mix_off, *mix_nb;  // pha: offset and size of blocks.{l}.mix.p (nb 0 = none)
} trainer;

// Weight decay on 2-D "*.weight" matrices only (see --help).
static int decays(const phax_param_info *p) {
    size_t n = strlen(p->name);
    return p->ndim == 2 && n > 7 && !strcmp(p->name + n - 7, ".weight");
}

static void trainer_new(trainer *t, const phax_model_cfg *cfg, const train_opts *o) {
    memset(t, 0, sizeof *t);
    t->ref = !strcmp(o->backend, "ref");
    t->B = o->B, t->T = o->T;
    if (t->ref) {
        if (ref_model_new(&t->rm, cfg, o->seed)) die_lib();
        t->cfg = t->rm.cfg, t->L = &t->rm.layout;
    } else {
        if (fcpu_model_new(&t->fm, cfg, o->seed)) die_lib();
        t->cfg = t->fm.cfg, t->L = &t->fm.layout;
        if (!(t->ws = fcpu_model_ws_new(&t->fm, o->B, o->T))) die_lib();
    }
    const phax_layout *L = t->L;
    size_t n = L->numel;
    t->f32 = phax_alloc(n * sizeof(float));
    t->x = phax_alloc((size_t)o->B * o->T * sizeof(int32_t));
    t->y = phax_alloc((size_t)o->B * o->T * sizeof(int32_t));
    if (!t->f32 || !t->x || !t->y) die_lib();
    if (t->ref) {
        t->rm_m = phax_alloc(n * sizeof(double)), t->rm_v = phax_alloc(n * sizeof(double));
        t->rps = calloc((size_t)L->n, sizeof *t->rps);
        if (!t->rm_m || !t->rm_v || !t->rps) die("out of memory");
        for (int i = 0; i < L->n; i++) {
            size_t off = L->p[i].offset;
            t->rps[i] = (ref_adamw_param){t->rm.params + off, t->rm.grads + off, t->rm_m + off,
                                          t->rm_v + off, L->p[i].numel, decays(&L->p[i])};
        }
    } else {
        t->fm_m = phax_alloc(n * sizeof(float)), t->fm_v = phax_alloc(n * sizeof(float));
        t->fps = calloc((size_t)L->n, sizeof *t->fps);
        if (!t->fm_m || !t->fm_v || !t->fps) die("out of memory");
        for (int i = 0; i < L->n; i++) {
            size_t off = L->p[i].offset;
            t->fps[i] = (fcpu_adamw_param){t->fm.params + off, t->fm.grads + off, t->fm_m + off,
                                           t->fm_v + off, L->p[i].numel, decays(&L->p[i])};
        }
    }
    int nl = t->cfg.n_layers;
    t->mix_off = calloc((size_t)nl, sizeof(int)), t->mix_nb = calloc((size_t)nl, sizeof(int));
    if (!t->mix_off || !t->mix_nb) die("out of memory");
    for (int l = 0; l < nl && t->cfg.family == PHAX_FAMILY_PHA; l++) {
        char name[64];
        snprintf(name, sizeof name, "blocks.%d.mix.p", l);
        int k = phax_layout_find(L, name);
        if (k >= 0) t->mix_off[l] = (int)L->p[k].offset, t->mix_nb[l] = (int)L->p[k].numel;
    }
}

static void trainer_free(trainer *t) {
    if (t->ref) ref_model_free(&t->rm);
    else fcpu_model_ws_free(t->ws), fcpu_model_free(&t->fm);
    phax_free(t->fm_m), phax_free(t->fm_v), phax_free(t->rm_m), phax_free(t->rm_v);
    free(t->fps), free(t->rps), free(t->mix_off), free(t->mix_nb);
    phax_free(t->f32), phax_free(t->x), phax_free(t->y);
}

// One parameter value as double (for the mix weights).
static double param_at(const trainer *t, size_t i) {
    return t->ref ? t->rm.params[i] : (double)t->fm.params[i];
}

// Forward + backward on the batch in t->x / t->y: *loss.
static int trainer_grad(trainer *t, int window, double *loss) {
    if (t->ref) {
        ref_model_zero_grad(&t->rm);
        return ref_model_backward(&t->rm, t->x, t->y, t->B, t->T, window, loss);
    }
    fcpu_model_zero_grad(&t->fm);
    return fcpu_model_backward(&t->fm, t->ws, t->x, t->y, window, loss);
}

// AdamW update number `step1` (1-based). PHAX_ERR (nothing updated) on a
// non-finite gradient norm, which is still returned in *gnorm.
static int trainer_update(trainer *t, const train_opts *o, double lr, long step1, double *gnorm) {
    ref_adamw_cfg a = {.lr = lr, .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps,
                       .weight_decay = o->wd, .clip = o->clip};
    if (t->ref) return ref_adamw_step(t->rps, t->L->n, &a, step1, gnorm);
    return fcpu_adamw_step(t->fps, t->L->n, &a, step1, gnorm);
}

// Mean loss of the batch in t->x / t->y (forward only).
static int trainer_loss(trainer *t, int window, double *loss) {
    if (t->ref) return ref_model_forward(&t->rm, t->x, t->y, t->B, t->T, window, NULL, loss);
    return fcpu_model_forward(&t->fm, t->ws, t->x, t->y, window, NULL, loss);
}

// Forward of the batch in t->x / t->y with the logits (B, T, V) into logits_f
// (fast) or logits_d (ref), and the mean loss.
static int trainer_logits(trainer *t, int window, float *logits_f, double *logits_d, double *loss) {
    if (t->ref) return ref_model_forward(&t->rm, t->x, t->y, t->B, t->T, window, logits_d, loss);
    return fcpu_model_forward(&t->fm, t->ws, t->x, t->y, window, logits_f, loss);
}

// The parameters in float (the model file's dtype).
static const float *trainer_params_f32(trainer *t) {
    if (!t->ref) return t->fm.params;
    for (size_t i = 0; i < t->L->numel; i++) t->f32[i] = (float)t->rm.params[i];
    return t->f32;
}

// Install a checkpoint's parameters and moments.
static void trainer_restore(trainer *t, const phax_ckpt *ck, const phax_ckpt_state *s, const char *sp) {
    size_t n = t->L->numel;
    if (t->ref) {
        if (s->dtype != PHAX_DT_F64 || !s->master)
            die("%s: the ref backend needs float64 moments and master parameters", sp);
        memcpy(t->rm.params, s->master, n * sizeof(double));
        memcpy(t->rm_m, s->m, n * sizeof(double)), memcpy(t->rm_v, s->v, n * sizeof(double));
    } else {
        if (s->dtype != PHAX_DT_F32) die("%s: the fast backend needs float32 moments", sp);
        memcpy(t->fm.params, ck->params, n * sizeof(float));
        memcpy(t->fm_m, s->m, n * sizeof(float)), memcpy(t->fm_v, s->v, n * sizeof(float));
    }
}

// ---------------------------------------------------------------------------
// Evaluation: the first eval_tokens of the valid split in windows of T, B
// windows per forward (rows past the end padded with target −1); the mean
// token cross-entropy over the n − 1 predicted tokens.

static int count_targets(const int32_t *y, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += y[i] >= 0;
    return k;
}

static double evaluate(trainer *t, const int32_t *tok, size_t n, int window) {
    phax_eval_iter it;
    if (phax_eval_iter_init(&it, tok, n, t->T)) die_lib();
    size_t BT = (size_t)t->B * t->T;
    double sum = 0;
    long count = 0;
    for (;;) {
        int rows = 0;
        for (; rows < t->B; rows++)
            if (!phax_eval_iter_next(&it, t->x + (size_t)rows * t->T, t->y + (size_t)rows * t->T)) break;
        if (rows == 0) break;
        for (size_t i = (size_t)rows * t->T; i < BT; i++) t->x[i] = 0, t->y[i] = -1;
        int k = count_targets(t->y, BT);
        double loss;
        if (k > 0) {
            if (trainer_loss(t, window, &loss)) die_lib();
            sum += loss * k, count += k;
        }
        if (rows < t->B) break;
    }
    return count ? sum / (double)count : NAN;
}

// ---------------------------------------------------------------------------
// Recall: rows and validation.

// Row b of a batch: recall row (seed, first + b), for rows past n padding (x 0, y −1).
static void recall_rows(const train_opts *o, trainer *t, uint64_t seed, uint64_t first, size_t n) {
    for (int b = 0; b < t->B; b++) {
        size_t off = (size_t)b * t->T;
        if ((size_t)b >= n) {
            for (int i = 0; i < t->T; i++) t->x[off + i] = 0, t->y[off + i] = -1;
            continue;
        }
        if (phax_recall_train_sample(seed, first + (uint64_t)b, o->recall_pairs, o->recall_queries,
                                     t->T, t->x + off, t->y + off, NULL))
            die_lib();
    }
}

// ---------------------------------------------------------------------------
// Run state, log and checkpoints

typedef struct {
    train_opts o;
    phax_model_cfg cfg;
    corpus data;
    trainer tr;
    phax_sampler sampler;
    uint64_t batch_seed, window_seed;
    int stochastic_window;  // swax, swa: the §3.4 draw per step
    phax_niah *niah;        // --niah-frac > 0: the task that makes the retrieval rows
    uint64_t niah_seed, niah_mix_seed;
    int recall;             // --task recall: every row from phax_recall_train_sample
    uint64_t recall_seed, recall_valid_seed;
    float *logits_f;        // recall validation: (B, T, V) logits (fast)
    double *logits_d;       // (ref)
    long start, total;      // first step to run, total steps
    size_t eval_n;          // valid tokens scored per evaluation (recall: rows)
    char *model_path;       // OUT/checkpoint.safetensors: the link to the current generation
    char *state_path;       // --resume: the state of the generation resumed
    char *log_path;
    char *options_json, *rng_json, *data_json;
    int raw_checked;        // --resume: the data files' bytes matched the state's before any read
    FILE *log;
    int tty;
} run;

typedef struct {
    double loss, acc;
    long answers;
} recall_eval;

// Rows 0..n−1 of the validation seed, B per forward: the mean cross-entropy of
// the answers (the only targets) and the fraction whose argmax is the answer
// (ties: the lower id).
static recall_eval evaluate_recall(run *r, int window) {
    trainer *t = &r->tr;
    int V = t->cfg.vocab_size;
    double sum = 0;
    long count = 0, right = 0;
    for (size_t first = 0; first < r->eval_n; first += (size_t)t->B) {
        size_t n = r->eval_n - first < (size_t)t->B ? r->eval_n - first : (size_t)t->B;
        recall_rows(&r->o, t, r->recall_valid_seed, first, n);
        size_t BT = (size_t)t->B * t->T;
        int k = count_targets(t->y, BT);
        double loss;
        if (trainer_logits(t, window, r->logits_f, r->logits_d, &loss)) die_lib();
        sum += loss * k, count += k;
        for (size_t i = 0; i < BT; i++) {
            if (t->y[i] < 0) continue;
            int best = 0;
            for (int v = 1; v < V; v++) {
                double a = t->ref ? r->logits_d[i * V + v] : r->logits_f[i * V + v];
                double b = t->ref ? r->logits_d[i * V + best] : r->logits_f[i * V + best];
                if (a > b) best = v;
            }
            right += best == t->y[i];
        }
    }
    return (recall_eval){count ? sum / (double)count : NAN, count ? (double)right / count : NAN, count};
}

// SIGINT (Ctrl-C) and SIGTERM (kill, systemd, Docker, Slurm): finish the
// step, checkpoint, exit 128 + the signal.
static volatile sig_atomic_t interrupted = 0;
static void on_sigint(int sig) { interrupted = sig; }

static void save_checkpoint(run *r, long steps_done) {
    trainer *t = &r->tr;
    phax_ckpt_state s = {.step = steps_done, .options_json = r->options_json,
                         .rng_json = r->rng_json, .data_json = r->data_json};
    if (t->ref) s.dtype = PHAX_DT_F64, s.m = t->rm_m, s.v = t->rm_v, s.master = t->rm.params;
    else s.dtype = PHAX_DT_F32, s.m = t->fm_m, s.v = t->fm_v;
    phax_ckpt ck = {.cfg = t->cfg, .layout = *t->L, .params = (float *)trainer_params_f32(t),
                    .vocab = r->data.vocab, .step = steps_done,
                    .tokens_seen = (int64_t)steps_done * r->o.B * r->o.T, .train_batch = r->o.B,
                    .train_seq = r->o.T};
    // The log lines up to this step are durable before the generation that they lead to
    // (a resumed run truncates the log to its checkpoint; it cannot restore lost lines).
    if (fflush(r->log) || fsync(fileno(r->log))) die("%s: write failed: %s", r->log_path, strerror(errno));
    // A whole generation (state, vocabulary, model) becomes current in one step;
    // the previous one stays until then (phax_ckpt_save_generation).
    if (phax_ckpt_save_generation(r->o.out, &ck, t->L, &s)) die_lib();
}

static void log_line(run *r, const char *line) {
    fputs(line, r->log);
    fputc('\n', r->log);
    if (fflush(r->log)) die("%s: write failed: %s", r->log_path, strerror(errno));
}

// Append `"mix": [[w, ...], ...]` (softplus-normalised, per block) for pha.
static size_t fmt_mix(const run *r, char *buf, size_t cap) {
    const trainer *t = &r->tr;
    if (t->cfg.family != PHAX_FAMILY_PHA || !t->mix_nb[0]) return 0;
    size_t k = (size_t)snprintf(buf, cap, ", \"mix\": [");
    for (int l = 0; l < t->cfg.n_layers && k < cap; l++) {
        double sp[8], S = 0;
        int nb = t->mix_nb[l];
        for (int i = 0; i < nb && i < 8; i++) {
            double z = param_at(t, (size_t)t->mix_off[l] + i);
            sp[i] = fmax(z, 0) + log1p(exp(-fabs(z))), S += sp[i];
        }
        k += (size_t)snprintf(buf + k, cap - k, "%s[", l ? ", " : "");
        for (int i = 0; i < nb && i < 8 && k < cap; i++)
            k += (size_t)snprintf(buf + k, cap - k, "%s%.6g", i ? ", " : "", sp[i] / S);
        if (k < cap) k += (size_t)snprintf(buf + k, cap - k, "]");
    }
    if (k < cap) k += (size_t)snprintf(buf + k, cap - k, "]");
    return k;
}

static void fmt_eta(char *buf, size_t cap, double s) {
    if (!(s >= 0 && s < 1e9)) {  // no float->long overflow on an absurd estimate
        snprintf(buf, cap, "--");
        return;
    }
    long v = (long)(s + 0.5);
    if (v >= 3600) snprintf(buf, cap, "%ld:%02ld:%02ld", v / 3600, v / 60 % 60, v % 60);
    else snprintf(buf, cap, "%ld:%02ld", v / 60, v % 60);
}

static void progress(run *r, long done, double loss, double tps, double eta, int window) {
    char e[32], w[32] = "";
    fmt_eta(e, sizeof e, eta);
    if (r->stochastic_window) snprintf(w, sizeof w, " | w %d", window);
    if (r->tty) {
        int width = 24, fill = (int)(width * done / r->total);
        char bar[32];
        for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
        bar[width] = '\0';
        printf("\r%ld/%ld [%s] loss %.4f | %.0f tok/s | ETA %s%s\033[K", done, r->total, bar, loss,
               tps, e, w);
        fflush(stdout);
    } else if (done % r->o.log_every == 0 || done == r->total) {
        printf("step %ld/%ld loss %.4f tok/s %.0f eta %s%s\n", done, r->total, loss, tps, e, w);
        fflush(stdout);
    }
}

static void run_eval(run *r, long done) {
    if (r->recall) {
        double t0 = now_s();
        recall_eval e = evaluate_recall(r, -1);
        char line[256];
        snprintf(line, sizeof line,
                 "{\"step\": %ld, \"val_loss\": %.9g, \"val_acc\": %.9g, \"val_rows\": %zu, "
                 "\"val_answers\": %ld}", done, e.loss, e.acc, r->eval_n, e.answers);
        log_line(r, line);
        if (r->tty) printf("\r\033[K");
        printf("eval step %ld: val_loss %.4f val_acc %.4f (%ld answers in %zu rows, %.1fs)\n", done,
               e.loss, e.acc, e.answers, r->eval_n, now_s() - t0);
        fflush(stdout);
        return;
    }
    if (!r->data.va) return;
    double t0 = now_s();
    double vl = evaluate(&r->tr, r->data.va, r->eval_n, -1);
    char line[256];
    snprintf(line, sizeof line, "{\"step\": %ld, \"val_loss\": %.9g, \"val_ppl\": %.9g, \"val_tokens\": %zu}",
             done, vl, exp(vl), r->eval_n);
    log_line(r, line);
    if (r->tty) printf("\r\033[K");
    printf("eval step %ld: val_loss %.4f val_ppl %.2f (%zu tokens, %.1fs)\n", done, vl, exp(vl),
           r->eval_n, now_s() - t0);
    fflush(stdout);
}

// --niah-frac: row b of step s becomes a needle-in-a-haystack example when the
// first uniform of its own stream (mix seed, s·B + b) is below the fraction; the
// example itself is drawn from (niah seed, s·B + b). Both are functions of the
// step, so a resumed run makes the same batches. Returns the rows replaced.
static int mix_niah_rows(run *r, long s) {
    if (!r->niah) return 0;
    trainer *t = &r->tr;
    int k = 0;
    for (int b = 0; b < r->o.B; b++) {
        uint64_t idx = (uint64_t)s * (uint64_t)r->o.B + (uint64_t)b;
        phax_rng u = phax_rng_stream(r->niah_mix_seed, idx);
        if (!(phax_rng_uniform(&u) < r->o.niah_frac)) continue;
        size_t off = (size_t)b * r->o.T;
        if (phax_niah_train_sample(r->niah, r->niah_seed, idx, r->o.T, t->x + off, t->y + off, NULL))
            die_lib();
        k++;
    }
    return k;
}

// One optimizer step s (0-based), logged; exits on a non-finite loss or gradient norm.
static void train_step(run *r, long s, double *loss_out, int *win_out, double *dt) {
    trainer *t = &r->tr;
    double t0 = now_s();
    int niah_rows = 0;
    if (r->recall) {
        recall_rows(&r->o, t, r->recall_seed, (uint64_t)s * (uint64_t)r->o.B, (size_t)r->o.B);
    } else {
        if (phax_sampler_batch(&r->sampler, (uint64_t)s, t->x, t->y, NULL)) die_lib();
        niah_rows = mix_niah_rows(r, s);
    }
    int window = r->stochastic_window ? phax_swax_window_at(&t->cfg, r->window_seed, s, r->total) : -1;
    phax_lr_schedule ls = {r->o.lr, r->o.min_lr, r->o.warmup, r->total};
    double lr = phax_lr_at(&ls, s), loss = NAN, gnorm = NAN;
    if (trainer_grad(t, window, &loss)) die_lib();
    const char *bad = !isfinite(loss) ? "loss" : NULL;
    if (!bad && trainer_update(t, &r->o, lr, s + 1, &gnorm)) {
        if (isfinite(gnorm)) die_lib();
        bad = "gradient norm";
    }
    if (bad) {
        double v = !strcmp(bad, "loss") ? loss : gnorm;
        die("step %ld: %s is %s; stopped (the last checkpoint, %s, is untouched)", s + 1, bad,
            isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf",
            file_exists(r->model_path) ? r->model_path : "none yet");
    }
    *dt = now_s() - t0;
    char line[8192];
    size_t k = (size_t)snprintf(line, sizeof line,
                                "{\"step\": %ld, \"loss\": %.9g, \"lr\": %.9g, \"gnorm\": %.9g", s + 1,
                                loss, lr, gnorm);
    if (r->stochastic_window) k += (size_t)snprintf(line + k, sizeof line - k, ", \"window\": %d", window);
    if (r->niah) k += (size_t)snprintf(line + k, sizeof line - k, ", \"niah_rows\": %d", niah_rows);
    k += fmt_mix(r, line + k, sizeof line - k);
    if (k < sizeof line)
        snprintf(line + k, sizeof line - k, ", \"tokens_per_s\": %.1f}", (double)r->o.B * r->o.T / *dt);
    log_line(r, line);
    *loss_out = loss, *win_out = window;
}

// --time-budget: time one warm-up and two measured steps and one forward on
// step 0's batch, all discarded (gradients only, no update), then fix the
// steps so that steps and evaluations fit.
static long steps_for_budget(run *r) {
    trainer *t = &r->tr;
    double loss, t0 = now_s();
    if (r->recall) recall_rows(&r->o, t, r->recall_seed, 0, (size_t)r->o.B);
    else if (phax_sampler_batch(&r->sampler, 0, t->x, t->y, NULL)) die_lib();
    int window = r->stochastic_window ? r->tr.cfg.w_long : -1;
    if (trainer_grad(t, window, &loss)) die_lib();
    double t1 = now_s();
    for (int i = 0; i < 2; i++)
        if (trainer_grad(t, window, &loss)) die_lib();
    double step_s = (now_s() - t1) / 2, t2 = now_s();
    if (trainer_loss(t, window, &loss)) die_lib();
    double fwd_s = now_s() - t2;
    double left = r->o.time_budget - (now_s() - t0);
    // Cost of one evaluation: its forwards.
    double windows = r->recall ? (double)r->eval_n : r->data.va ? ceil((double)r->eval_n / r->o.T) : 0;
    double eval_s = ceil(windows / r->o.B) * fwd_s;
    double per_step = step_s + (r->o.eval_every ? eval_s / (double)r->o.eval_every : 0);
    // In double first: a step count beyond --steps' range is refused, not wrapped.
    double Sd = floor((left - eval_s) / per_step);
    if (!(Sd <= (double)(1L << 40)))
        die("--time-budget: %g s at %.3g s per step is more than %ld steps", r->o.time_budget,
            per_step, 1L << 40);
    long S = Sd < 1 ? 1 : (long)Sd;
    printf("time budget %.0fs: %.3fs per step, %.2fs per evaluation -> %ld steps\n",
           r->o.time_budget, step_s, eval_s, S);
    return S;
}

// ---------------------------------------------------------------------------
// Setup: a new run, or a resumed one.

// --resume: the options, config, vocabulary, parameters and moments of DIR's
// checkpoint; the log cut back to the checkpoint's step.
// One training per run folder: an exclusive lock on the folder, held (the
// descriptor stays open) until the process exits, when the kernel drops it.
static void lock_run_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) die("%s: cannot open the run folder: %s", dir, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK)
            die("%s: another phax train is using this run folder (wait for it, or use another --out)", dir);
        die("%s: cannot lock the run folder: %s", dir, strerror(errno));
    }
}

// The run folder has a current checkpoint (the link, even a dangling one).
static int holds_checkpoint(const run *r) {
    struct stat sb;
    return lstat(r->model_path, &sb) == 0;
}

static void resume_setup(run *r, const char *changing, phax_ckpt *ck, phax_ckpt_state *st, json_t **keep) {
    if (changing) die("%s: cannot be changed on --resume (the run's options come from its checkpoint)", changing);
    struct stat sb;
    if (stat(r->o.out, &sb) != 0) die("%s: no checkpoint to resume (no such folder)", r->model_path);
    lock_run_dir(r->o.out);
    if (!holds_checkpoint(r)) {
        if (file_exists(r->log_path))
            die("%s: no checkpoint to resume: the run stopped before its first one; start it over with "
                "the same phax train command without --resume (it reuses the folder)", r->model_path);
        die("%s: no checkpoint to resume", r->model_path);
    }
    int fam = -1;
    if (r->o.family) {
        phax_family f;
        if (phax_family_parse(r->o.family, &f)) die("--family: '%s' is not a model family", r->o.family);
        fam = (int)f;
    }
    if (phax_ckpt_load(r->o.out, fam, ck)) die_lib();  // the current generation
    if (!(r->state_path = phax_ckpt_state_path(ck->path))) die_lib();
    if (phax_ckpt_state_load(r->state_path, &ck->layout, st)) die_lib();
    if (phax_ckpt_state_check(r->state_path, st, ck->step)) die_lib();
    int split = 0;
    opts_from_json(&r->o, st->options_json, r->state_path, keep, &split);
    check_numbers(&r->o);
    r->cfg = ck->cfg;
    r->start = ck->step;
    r->total = r->o.steps;
    if (is_recall(&r->o)) {
        // No data files: the rows come from the seed; the vocabulary must be the task's.
        if (phax_recall_vocab_check(ck->vocab)) die("%s: %s", ck->path, phax_error());
        r->raw_checked = 1;
        r->data.vocab = ck->vocab;
        ck->vocab = NULL;
        return;
    }
    r->data.train = strdup(r->o.train_path);
    r->data.valid = r->o.valid_path ? strdup(r->o.valid_path) : NULL;
    r->data.split = split;
    check_data_file(r->data.train);
    if (r->data.valid) check_data_file(r->data.valid);
    struct stat lsb;  // a generation's link (phax_ckpt_save_generation), or an older phax's file
    int generation = lstat(r->model_path, &lsb) == 0 && S_ISLNK(lsb.st_mode);
    r->raw_checked = check_data_files(&r->data, st->data_json, r->state_path, generation);
    r->data.vocab = ck->vocab;  // the checkpoint's vocabulary, not a rebuilt one
    ck->vocab = NULL;
}

// Keep the log lines of steps <= keep_step (a resumed run rewrites the rest).
static void truncate_log(const char *path, long keep_step) {
    uint8_t *buf;
    size_t n;
    if (!file_exists(path)) return;
    if (phax_data_read_raw(path, &buf, &n, NULL)) {
        if (strstr(phax_error(), "empty")) return;
        die_lib();
    }
    size_t out = 0;
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && buf[e] != '\n') e++;
        json_t *j = json_loadb((const char *)buf + i, e - i, 0, NULL);
        json_t *s = j ? json_object_get(j, "step") : NULL;
        if (s && json_is_integer(s) && json_integer_value(s) <= keep_step) {
            memmove(buf + out, buf + i, e - i);
            out += e - i;
            buf[out++] = '\n';
        }
        json_decref(j);
        i = e + 1;
    }
    if (phax_write_file_atomic(path, buf, out)) die_lib();
    free(buf);
}

static void new_run_setup(run *r) {
    check_opts(&r->o);
    if (holds_checkpoint(r)) die("%s: holds a run already (use --resume, or another --out)", r->o.out);
    if (is_recall(&r->o)) {
        if (phax_recall_vocab(&r->data.vocab)) die_lib();
    } else {
        corpus_locate(&r->data, &r->o);
        corpus_vocab(&r->data, &r->o);
    }
    r->cfg = build_config(&r->o, (int)phax_vocab_size(r->data.vocab));
    r->start = 0;
}

static char *rng_identity(const run *r) {
    char a[24], b[24], c[24];
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s}", "seed", u64_str(r->o.seed, a), "batch_seed",
                          u64_str(r->batch_seed, b), "window_seed", u64_str(r->window_seed, c),
                          "batches", "phax_sampler_batch(batch_seed, step)", "window",
                          "phax_swax_window_at(cfg, window_seed, step, steps)");
    if (r->recall) {
        char d[24], e[24];
        json_object_set_new(j, "recall_seed", json_string(u64_str(r->recall_seed, d)));
        json_object_set_new(j, "recall_valid_seed", json_string(u64_str(r->recall_valid_seed, e)));
        json_object_set_new(j, "batches", json_string("phax_recall_train_sample(recall_seed, step*B + b)"));
        json_object_set_new(j, "valid", json_string("phax_recall_train_sample(recall_valid_seed, row)"));
    }
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    if (!s) die("out of memory");
    return s;
}

// --task recall: what the state's "data" holds in place of the corpus identity
// (compared on resume).
static char *recall_identity(const run *r) {
    char hv[24];
    snprintf(hv, sizeof hv, "%016" PRIx64, phax_vocab_hash(r->data.vocab));
    json_t *j = json_pack("{s:s, s:i, s:i, s:s}", "task", "recall", "recall_pairs", r->o.recall_pairs,
                          "recall_queries", r->o.recall_queries, "vocab_hash", hv);
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    if (!s) die("out of memory");
    return s;
}

int phax_train_main(int argc, char **argv) {
    run r;
    memset(&r, 0, sizeof r);
    r.o = opts_default();
    const char *changing;
    parse_args(argc, argv, &r.o, &changing);
    if (!r.o.out) die("--out DIR is required (try --help)");
    r.model_path = path_join(r.o.out, PHAX_CKPT_DEFAULT_NAME ".safetensors");
    r.log_path = path_join(r.o.out, "log.jsonl");
    phax_ckpt ck = {0};
    phax_ckpt_state st = {0};
    json_t *keep = NULL;
    if (r.o.resume) resume_setup(&r, changing, &ck, &st, &keep);
    else new_run_setup(&r);

    // Nothing has been written so far; from here the run folder is used.
    int restart = 0;
    if (!r.o.resume) {
        if (phax_mkdir_p(r.o.out)) die_lib();
        lock_run_dir(r.o.out);
        // Again under the lock: a run started at the same time may have checkpointed.
        if (holds_checkpoint(&r)) die("%s: holds a run already (use --resume, or another --out)", r.o.out);
        restart = file_exists(r.log_path);
    }
    r.recall = is_recall(&r.o);
    if (r.recall) {
        // No corpus, no cache: the rows are functions of (seed, step) and (seed, row).
        r.data_json = recall_identity(&r);
        if (r.o.resume && strcmp(r.data_json, st.data_json))
            die("%s: the task differs from the checkpoint's (%s, now %s)", r.state_path, st.data_json,
                r.data_json);
        long rows = r.o.eval_tokens / r.o.T;
        r.eval_n = rows > 1 ? (size_t)rows : 1;
        r.recall_seed = phax_seed_derive(r.o.seed, "train.recall");
        r.recall_valid_seed = phax_seed_derive(r.o.seed, "valid.recall");
    } else {
        char *cache = r.o.cache_dir ? strdup(r.o.cache_dir) : path_join(r.o.out, "cache");
        struct stat csb;
        // The default cache lies inside the run folder: a link planted there must not send the
        // caches elsewhere (an explicit --cache-dir may be anything the user names).
        if (!r.o.cache_dir && lstat(cache, &csb) == 0 && S_ISLNK(csb.st_mode))
            die("%s: a symbolic link; the run folder's cache must be a folder (or pass --cache-dir)", cache);
        if (r.o.resume && !r.raw_checked) {
            // A state without file identities: compare the tokens before any cache is written.
            corpus_tokens(&r.data, NULL);
        } else {
            if (phax_mkdir_p(cache)) die_lib();
            corpus_tokens(&r.data, cache);
        }
        free(cache);
        r.data_json = corpus_identity(&r.data);
        if (r.o.resume && !same_tokens(r.data_json, st.data_json))
            die("%s: the training data differ from the checkpoint's (%s, now %s)", r.data.train,
                st.data_json, r.data_json);
        r.eval_n = r.o.eval_tokens && (size_t)r.o.eval_tokens < r.data.nva ? (size_t)r.o.eval_tokens : r.data.nva;
        if (phax_sampler_init(&r.sampler, r.data.tr, r.data.ntr, r.o.B, r.o.T,
                              r.batch_seed = phax_seed_derive(r.o.seed, "train.batches")))
            die("%s: %zu tokens, too few for --seq %d (%s)", r.data.train, r.data.ntr, r.o.T, phax_error());
    }
    r.window_seed = phax_seed_derive(r.o.seed, "swax.window");
    r.stochastic_window = r.cfg.family == PHAX_FAMILY_SWAX || r.cfg.family == PHAX_FAMILY_SWA;
    if (r.o.niah_frac > 0) {
        // Text haystacks come from the training tokens (never the validation split).
        if (phax_niah_new(r.data.vocab, r.data.tr, r.data.ntr, NULL, &r.niah))
            die("--niah-frac: %s", phax_error());
        r.niah_seed = phax_seed_derive(r.o.seed, "train.niah");
        r.niah_mix_seed = phax_seed_derive(r.o.seed, "train.niah.mix");
        // Every variant must fit a row (multi-needle ones need ~2x a single needle):
        // probe the first 256 examples of this run's stream before anything is trained.
        int32_t *x = malloc((size_t)r.o.T * sizeof *x), *y = malloc((size_t)r.o.T * sizeof *y);
        if (!x || !y) die("out of memory");
        for (uint64_t i = 0; i < 256; i++)
            if (phax_niah_train_sample(r.niah, r.niah_seed, i, r.o.T, x, y, NULL))
                die("--niah-frac with --seq %d: %s (use a longer --seq)", r.o.T, phax_error());
        free(x), free(y);
    }
    trainer_new(&r.tr, &r.cfg, &r.o);
    if (r.recall) {
        size_t nl = (size_t)r.o.B * r.o.T * (size_t)r.tr.cfg.vocab_size;
        if (r.tr.ref) r.logits_d = phax_alloc(nl * sizeof(double));
        else r.logits_f = phax_alloc(nl * sizeof(float));
        if (!r.logits_d && !r.logits_f) die_lib();
    }
    if (r.o.resume) {
        trainer_restore(&r.tr, &ck, &st, r.state_path);
        truncate_log(r.log_path, r.start);
    } else {
        r.total = r.o.steps ? r.o.steps : r.o.time_budget > 0 ? steps_for_budget(&r) : DEFAULT_STEPS;
        r.o.steps = r.total;
        if (r.o.warmup > r.total / 2) r.o.warmup = r.total / 2;  // leave half the run to decay
    }
    r.options_json = opts_to_json(&r.o, r.data.train, r.data.valid, r.data.split);
    r.rng_json = rng_identity(&r);
    phax_ckpt_free(&ck);
    phax_ckpt_state_free(&st);
    if (restart)
        printf("%s: a run that stopped before its first checkpoint; starting it over (its log is replaced)\n",
               r.o.out);
    // A new run starts its log (over one without a checkpoint) with an empty file put in place
    // atomically, which replaces a symlink planted there instead of writing through it; a
    // resumed run continues it. Both append without following a link (O_NOFOLLOW).
    if (!r.o.resume && phax_write_file_atomic(r.log_path, "", 0)) die_lib();
    int log_fd = open(r.log_path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (log_fd < 0)
        die("%s: cannot open: %s", r.log_path, errno == ELOOP ? "a symbolic link (refused)" : strerror(errno));
    if (!(r.log = fdopen(log_fd, "a"))) die("%s: cannot open: %s", r.log_path, strerror(errno));
    r.tty = isatty(STDOUT_FILENO);
    struct sigaction sa = {.sa_handler = on_sigint};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    long s = r.start;
    if (r.start >= r.total) {
        printf("%s: the run finished at step %ld; nothing to do\n", r.o.out, r.start);
        goto done;
    }
    char what[128];
    if (r.recall)
        snprintf(what, sizeof what, "recall task (%d pairs, %d quer%s, %zu validation rows)",
                 r.o.recall_pairs, r.o.recall_queries, r.o.recall_queries == 1 ? "y" : "ies", r.eval_n);
    else
        snprintf(what, sizeof what, "%zu train / %zu valid tokens", r.data.ntr, r.data.nva);
    printf("%s %s: %zu parameters, %s backend, %s, vocab %zu, steps %ld..%ld of %ld, batch %d x %d\n",
           r.o.resume ? "resuming" : "training", phax_family_name(r.cfg.family), r.tr.L->numel,
           r.o.backend, what, phax_vocab_size(r.data.vocab), r.start + 1, r.total, r.total, r.o.B,
           r.o.T);
    fflush(stdout);
    long stop = r.o.stop_after && r.o.stop_after < r.total ? r.o.stop_after : r.total;
    double t_run = 0, ema = 0;
    for (; s < stop; s++) {
        double loss, dt;
        int window;
        train_step(&r, s, &loss, &window, &dt);
        long done = s + 1;
        t_run += dt;
        double tps = (double)r.o.B * r.o.T / dt;
        ema = ema > 0 ? 0.9 * ema + 0.1 * tps : tps;
        progress(&r, done, loss, ema, (double)(r.total - done) * r.o.B * r.o.T / ema, window);
        int last = done == r.total;
        if (last || (r.o.eval_every && done % r.o.eval_every == 0)) run_eval(&r, done);
        if (last || done == stop || interrupted || (r.o.ckpt_every && done % r.o.ckpt_every == 0))
            save_checkpoint(&r, done);
        if (interrupted) {
            s++;
            break;
        }
    }
    if (r.tty) printf("\n");
    if (s > r.start)
        printf("%s at step %ld/%ld: %.1f s, %.0f tokens/s; checkpoint %s\n",
               s == r.total ? "done" : "stopped", s, r.total, t_run,
               (double)(s - r.start) * r.o.B * r.o.T / t_run, r.model_path);
    if (s < r.total) printf("resume with: phax train --resume --out %s\n", r.o.out);
done:
    fclose(r.log);
    trainer_free(&r.tr);
    phax_free(r.logits_f), phax_free(r.logits_d);
    phax_niah_free(r.niah);
    corpus_free(&r.data);
    json_decref(keep);
    free(r.model_path), free(r.state_path), free(r.log_path);
    free(r.options_json), free(r.rng_json), free(r.data_json);
    return interrupted ? 128 + interrupted : 0;
}
