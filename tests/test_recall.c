// recall: the associative-recall task (core/recall.c: vocabulary ids, the
// layout of training rows and evaluation prompts checked from the tokens over
// many seeds, depths 0 and 1, the smallest lengths, errors, reproducibility) and
// the commands end to end ($PHAX_BIN): `phax train --task recall` (a checkpoint,
// bit-identical resume, refusals), `phax recall` (table, JSON, CSV, refusals),
// and a tiny model that learns the task.
#define _GNU_SOURCE  // mkdtemp
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "phax/checkpoint.h"
#include "phax/schedule.h"
#include "phax/fmodel.h"
#include "phax/recall.h"
#include "phax/tokenizer.h"
#include "testutil.h"

// --- helpers -------------------------------------------------------------------------------

static int is_key(int32_t id) { return id >= PHAX_RECALL_KEY0 && id < PHAX_RECALL_VALUE0; }
static int is_value(int32_t id) { return id >= PHAX_RECALL_VALUE0 && id < PHAX_RECALL_FILLER0; }
static int is_filler(int32_t id) { return id >= PHAX_RECALL_FILLER0 && id < PHAX_RECALL_VOCAB; }

// A haystack read back from its tokens alone: every key must be followed by a
// value, everything else must be a filler. Returns the needles found (key
// positions in pos, values by key in value_of[key], −1 for absent keys).
static int scan_haystack(const int32_t *tok, int H, int *pos, int32_t value_of[16], const char *what) {
    for (int k = 0; k < 16; k++) value_of[k] = -1;
    int n = 0;
    for (int t = 0; t < H; t++) {
        if (is_filler(tok[t])) continue;
        cr_assert(is_key(tok[t]) && t + 1 < H && is_value(tok[t + 1]),
                  "%s: token %d of the haystack (%d) is not a filler nor a needle's key", what, t, tok[t]);
        cr_assert(value_of[tok[t]] < 0, "%s: key %d twice in the haystack", what, tok[t]);
        value_of[tok[t]] = tok[t + 1];
        pos[n++] = t;
        t++;  // the value
    }
    for (int a = 0; a < 16; a++)
        for (int b = a + 1; b < 16; b++)
            cr_assert(value_of[a] < 0 || value_of[a] != value_of[b], "%s: value %d twice", what, value_of[a]);
    return n;
}

static void expect_err(int rc, const char *frag) {
    const char *e = phax_error();
    cr_assert(rc == PHAX_ERR, "accepted; expected an error with \"%s\"", frag);
    cr_assert(strstr(e, frag), "error \"%s\" lacks \"%s\"", e, frag);
    cr_assert(!strchr(e, '\n'), "error not one line: %s", e);
}

// --- vocabulary ----------------------------------------------------------------------------

Test(recall, vocab_ids) {
    phax_vocab *v;
    cr_assert(phax_recall_vocab(&v) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_vocab_kind(v) == PHAX_TOK_WORD);
    cr_assert(phax_vocab_size(v) == 64, "%zu tokens", phax_vocab_size(v));
    cr_assert(phax_vocab_eos(v) < 0 && phax_vocab_unk(v) < 0, "an <eos> or <unk> was added");
    char w[8];
    for (int i = 0; i < 16; i++) {
        snprintf(w, sizeof w, "k%d", i);
        cr_assert(phax_vocab_id(v, w, strlen(w)) == PHAX_RECALL_KEY0 + i, "%s", w);
        snprintf(w, sizeof w, "v%d", i);
        cr_assert(phax_vocab_id(v, w, strlen(w)) == PHAX_RECALL_VALUE0 + i, "%s", w);
    }
    for (int i = 0; i < 32; i++) {
        snprintf(w, sizeof w, "f%d", i);
        cr_assert(phax_vocab_id(v, w, strlen(w)) == PHAX_RECALL_FILLER0 + i, "%s", w);
    }
    cr_assert(phax_recall_vocab_check(v) == PHAX_OK, "%s", phax_error());
    // Saved and loaded (as a checkpoint's .vocab is), still the recall vocabulary.
    char *dir = tu_tmpdir("phax_recall_vocab"), *p = tu_join(dir, "r.vocab");
    phax_vocab *back;
    cr_assert(phax_vocab_save(v, p) == PHAX_OK && phax_vocab_load(p, &back) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_recall_vocab_check(back) == PHAX_OK, "%s", phax_error());
    phax_vocab_free(back);
    // Others are not: another word list, the same words in another order, bytes.
    phax_vocab *o;
    cr_assert(phax_vocab_build_text((const uint8_t *)"the cat sat", 11, "o", &o) == PHAX_OK);
    expect_err(phax_recall_vocab_check(o), "not the recall vocabulary");
    phax_vocab_free(o);
    char text[400];
    size_t n = 0;
    for (int i = 63; i >= 0; i--)  // reversed order: same words, other ids
        n += (size_t)snprintf(text + n, sizeof text - n, "%s%c%d", i < 63 ? " " : "",
                              i < 16 ? 'k' : i < 32 ? 'v' : 'f', i < 16 ? i : i < 32 ? i - 16 : i - 32);
    cr_assert(phax_vocab_build_text((const uint8_t *)text, n, "rev", &o) == PHAX_OK);
    expect_err(phax_recall_vocab_check(o), "token 0 is 'f31'");
    phax_vocab_free(o);
    cr_assert(phax_vocab_byte(&o) == PHAX_OK);
    expect_err(phax_recall_vocab_check(o), "byte");
    phax_vocab_free(o);
    phax_vocab_free(v);
    tu_rm_rf(dir);
    free(dir), free(p);
}

// --- training rows -------------------------------------------------------------------------

// One training row checked from its tokens: H = T + 1 − 2Q haystack tokens (P
// needles, distinct keys and values, fillers elsewhere), then the queries: Q
// distinct keys of needles, each followed by its value; a target exactly at
// each query key, the value the haystack gives that key.
static void check_row(uint64_t seed, uint64_t idx, int P, int Q, int T) {
    int32_t *x = malloc((size_t)T * sizeof *x), *y = malloc((size_t)T * sizeof *y);
    phax_recall_layout lay;
    cr_assert(phax_recall_train_sample(seed, idx, P, Q, T, x, y, &lay) == PHAX_OK, "%s", phax_error());
    char what[96];
    snprintf(what, sizeof what, "seed %llu row %llu P %d Q %d T %d", (unsigned long long)seed,
             (unsigned long long)idx, P, Q, T);
    int H = T + 1 - 2 * Q;
    cr_assert(lay.haystack_len == H && lay.n_pairs == P && lay.n_queries == Q, "%s", what);
    int pos[16];
    int32_t value_of[16];
    int n = scan_haystack(x, H, pos, value_of, what);
    cr_assert(n == P, "%s: %d needles in the haystack", what, n);
    for (int k = 0; k < P; k++)  // the layout says where they are, in text order
        cr_assert(lay.pos[k] == pos[k] && x[pos[k]] == lay.key[k] && x[pos[k] + 1] == lay.value[k],
                  "%s: needle %d at %d, layout says %d", what, k, pos[k], lay.pos[k]);
    int asked[16] = {0};
    for (int j = 0; j < Q; j++) {
        int t = H + 2 * j;
        cr_assert(is_key(x[t]) && value_of[x[t]] >= 0, "%s: query %d (%d) is not a needle's key", what, j, x[t]);
        cr_assert(!asked[x[t]]++, "%s: key %d queried twice", what, x[t]);
        cr_assert(lay.key[lay.query[j]] == x[t], "%s: layout's query %d", what, j);
        if (t + 1 < T) cr_assert(x[t + 1] == value_of[x[t]], "%s: query %d's value", what, j);
    }
    for (int t = 0; t < T; t++) {
        int want = t >= H && (t - H) % 2 == 0 ? value_of[x[t]] : -1;
        cr_assert(y[t] == want, "%s: target at %d is %d, expected %d", what, t, y[t], want);
    }
    free(x), free(y);
}

Test(recall, train_rows_over_many_seeds) {
    phax_rng r = tu_rng("recall/train_rows_over_many_seeds");
    uint64_t seed = phax_rng_u64(&r);
    printf("recall/train_rows_over_many_seeds: seed %llu\n", (unsigned long long)seed);
    for (int i = 0; i < 3000; i++) {
        int P = 1 + (int)phax_rng_below(&r, 16), Q = 1 + (int)phax_rng_below(&r, (uint64_t)P);
        int min_T = 2 * P + 2 * Q - 1;
        // Mostly short rows (the smallest included: no filler at all), some long ones.
        int T = min_T + (int)phax_rng_below(&r, i % 10 ? 8 : 300);
        check_row(seed, (uint64_t)i, P, Q, T);
    }
    int m;
    cr_assert(phax_recall_min_row(4, 1, &m) == PHAX_OK && m == 9);
    check_row(seed, 7, 4, 1, 9);        // T = 9: 4 needles and the query, no filler
    check_row(seed, 8, 16, 16, 63);     // every key queried
}

// Needles are placed over the whole haystack: with one needle in a row of
// T = 15 (H = 14, 13 positions), every position 0..12 occurs, each about 1/13 of the time.
Test(recall, train_needle_positions_uniform) {
    phax_rng r = tu_rng("recall/train_needle_positions_uniform");
    uint64_t seed = phax_rng_u64(&r);
    printf("recall/train_needle_positions_uniform: seed %llu\n", (unsigned long long)seed);
    int count[13] = {0}, n = 13000;
    int32_t x[15], y[15];
    for (int i = 0; i < n; i++) {
        phax_recall_layout lay;
        cr_assert(phax_recall_train_sample(seed, (uint64_t)i, 1, 1, 15, x, y, &lay) == PHAX_OK);
        cr_assert(lay.pos[0] >= 0 && lay.pos[0] <= 12);
        count[lay.pos[0]]++;
    }
    // Binomial(13000, 1/13): mean 1000, sd 30; 6 sd either side.
    for (int p = 0; p < 13; p++) cr_assert(count[p] >= 820 && count[p] <= 1180, "position %d: %d of %d", p, count[p], n);
}

Test(recall, train_rows_reproducible) {
    phax_rng r = tu_rng("recall/train_rows_reproducible");
    uint64_t seed = phax_rng_u64(&r);
    printf("recall/train_rows_reproducible: seed %llu\n", (unsigned long long)seed);
    enum { T = 64 };
    int32_t x1[T], y1[T], x2[T], y2[T];
    for (uint64_t i = 0; i < 200; i++) {
        cr_assert(phax_recall_train_sample(seed, i, 4, 2, T, x1, y1, NULL) == PHAX_OK);
        cr_assert(phax_recall_train_sample(seed, i, 4, 2, T, x2, y2, NULL) == PHAX_OK);
        cr_assert(!memcmp(x1, x2, sizeof x1) && !memcmp(y1, y2, sizeof y1), "row %llu differs",
                  (unsigned long long)i);
        cr_assert(phax_recall_train_sample(seed, i + 1, 4, 2, T, x2, y2, NULL) == PHAX_OK);
        cr_assert(memcmp(x1, x2, sizeof x1), "rows %llu and %llu are the same", (unsigned long long)i,
                  (unsigned long long)i + 1);
        cr_assert(phax_recall_train_sample(seed + 1, i, 4, 2, T, x2, y2, NULL) == PHAX_OK);
        cr_assert(memcmp(x1, x2, sizeof x1), "seeds %llu and +1 give the same row %llu",
                  (unsigned long long)seed, (unsigned long long)i);
    }
}

// --- evaluation prompts --------------------------------------------------------------------

static void check_prompt(int L, int P, double depth, uint64_t seed, phax_recall_prompt *p) {
    int32_t *tok = malloc((size_t)L * sizeof *tok);
    phax_recall_spec s = {L, P, depth, seed};
    cr_assert(phax_recall_prompt_build(&s, tok, p) == PHAX_OK, "%s", phax_error());
    char what[96];
    snprintf(what, sizeof what, "seed %llu L %d P %d depth %g", (unsigned long long)seed, L, P, depth);
    int H = L - 1, pos[16];
    int32_t value_of[16];
    cr_assert(scan_haystack(tok, H, pos, value_of, what) == P, "%s: needle count", what);
    cr_assert(tok[L - 1] == p->key && is_key(p->key), "%s: the prompt does not end with the key", what);
    cr_assert(p->answer == value_of[p->key], "%s: answer %d, the haystack gives %d", what, p->answer,
              value_of[p->key]);
    cr_assert(tok[p->needle_at] == p->key && tok[p->needle_at + 1] == p->answer, "%s: needle_at", what);
    cr_assert(p->distance == L - 1 - p->needle_at, "%s: distance", what);
    // The needle's token index: its item round(depth · (N − 1)) plus the needles before it.
    int N = H - P, j0 = (int)llround(depth * (N - 1)), before = 0;
    for (int k = 0; k < P; k++) before += pos[k] < p->needle_at;
    cr_assert(p->needle_at == j0 + before, "%s: needle at %d, item %d + %d needles before", what,
              p->needle_at, j0, before);
    free(tok);
}

Test(recall, prompts_over_many_seeds) {
    phax_rng r = tu_rng("recall/prompts_over_many_seeds");
    uint64_t seed = phax_rng_u64(&r);
    printf("recall/prompts_over_many_seeds: seed %llu\n", (unsigned long long)seed);
    phax_recall_prompt p;
    for (int i = 0; i < 3000; i++) {
        int P = 1 + (int)phax_rng_below(&r, 16);
        int L = 2 * P + 1 + (int)phax_rng_below(&r, i % 10 ? 10 : 500);
        double d = i % 3 ? phax_rng_uniform(&r) : (double)(i % 2);
        check_prompt(L, P, d, seed + (uint64_t)i, &p);
        if (d == 0.0) cr_assert(p.needle_at == 0, "depth 0: needle at %d (seed %llu)", p.needle_at,
                                (unsigned long long)seed + (uint64_t)i);
        if (d == 1.0) cr_assert(p.needle_at == L - 3, "depth 1: needle at %d of %d", p.needle_at, L);
    }
    // The smallest prompt (odd, no filler): depth 0 and 1 are the first and last slots.
    for (int P = 1; P <= 16; P++) {
        int m;
        cr_assert(phax_recall_min_prompt(P, &m) == PHAX_OK && m == 2 * P + 1);
        check_prompt(m, P, 0.0, seed, &p);
        cr_assert(p.needle_at == 0 && p.distance == m - 1);
        check_prompt(m, P, 1.0, seed, &p);
        cr_assert(p.needle_at == m - 3 && p.distance == 2);
        check_prompt(m, P, 0.5, seed, &p);
    }
    // Long prompts.
    check_prompt(8192, 4, 0.0, seed, &p);
    cr_assert(p.distance == 8191);
    check_prompt(8193, 16, 1.0, seed, &p);
    cr_assert(p.distance == 2);
}

Test(recall, prompts_reproducible) {
    phax_rng r = tu_rng("recall/prompts_reproducible");
    uint64_t seed = phax_rng_u64(&r);
    printf("recall/prompts_reproducible: seed %llu\n", (unsigned long long)seed);
    enum { L = 101 };
    int32_t a[L], b[L];
    phax_recall_prompt pa, pb;
    for (int i = 0; i < 100; i++) {
        phax_recall_spec s = {L, 4, 0.25 * (i % 5), seed + (uint64_t)i};
        cr_assert(phax_recall_prompt_build(&s, a, &pa) == PHAX_OK);
        cr_assert(phax_recall_prompt_build(&s, b, &pb) == PHAX_OK);
        cr_assert(!memcmp(a, b, sizeof a) && pa.answer == pb.answer && pa.needle_at == pb.needle_at);
        s.seed++;
        cr_assert(phax_recall_prompt_build(&s, b, &pb) == PHAX_OK);
        cr_assert(memcmp(a, b, sizeof a), "seeds %llu and +1 give the same prompt", (unsigned long long)s.seed - 1);
    }
}

// --- errors --------------------------------------------------------------------------------

Test(recall, bad_arguments_refused) {
    int32_t x[64], y[64];
    phax_recall_prompt p;
    expect_err(phax_recall_train_sample(1, 0, 0, 1, 64, x, y, NULL), "pairs 0");
    expect_err(phax_recall_train_sample(1, 0, 17, 1, 64, x, y, NULL), "pairs 17");
    expect_err(phax_recall_train_sample(1, 0, 4, 0, 64, x, y, NULL), "queries 0");
    expect_err(phax_recall_train_sample(1, 0, 4, 5, 64, x, y, NULL), "queries 5");
    expect_err(phax_recall_train_sample(1, 0, 4, 2, 10, x, y, NULL), "row of 10 tokens");  // needs 11
    cr_assert(phax_recall_train_sample(1, 0, 4, 2, 11, x, y, NULL) == PHAX_OK, "%s", phax_error());
    expect_err(phax_recall_train_sample(1, 0, 4, 1, 0, x, y, NULL), "row of 0 tokens");
    expect_err(phax_recall_train_sample(1, 0, 4, 1, -5, x, y, NULL), "row of -5 tokens");
    expect_err(phax_recall_train_sample(1, 0, 4, 1, 64, NULL, y, NULL), "NULL");
    phax_recall_spec s = {64, 4, 0.5, 1};
    cr_assert(phax_recall_prompt_build(&s, x, &p) == PHAX_OK, "%s", phax_error());
    const double bad_depth[] = {-0.01, 1.01, NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 5; i++) {
        s.depth = bad_depth[i];
        expect_err(phax_recall_prompt_build(&s, x, &p), "depth");
    }
    s.depth = 0.5;
    s.length = 8;  // 4 pairs need 9
    expect_err(phax_recall_prompt_build(&s, x, &p), "prompt of 8 tokens");
    s.length = PHAX_RECALL_MAX_LEN + 1;
    expect_err(phax_recall_prompt_build(&s, x, &p), "outside");
    s.length = 64, s.pairs = 0;
    expect_err(phax_recall_prompt_build(&s, x, &p), "pairs 0");
    s.pairs = 17;
    expect_err(phax_recall_prompt_build(&s, x, &p), "pairs 17");
    s.pairs = 4;
    expect_err(phax_recall_prompt_build(&s, NULL, &p), "NULL");
    int m;
    expect_err(phax_recall_min_row(3, 4, &m), "queries 4");
    expect_err(phax_recall_min_prompt(0, &m), "pairs 0");
}

// --- the commands ---------------------------------------------------------------------------

typedef struct {
    char *dir, *out, *err;
} sandbox;

static sandbox sandbox_new(void) {
    sandbox s;
    s.dir = tu_tmpdir("phax_recall");
    s.out = tu_join(s.dir, "out.txt");
    s.err = tu_join(s.dir, "err.txt");
    return s;
}

static void sandbox_free(sandbox *s) {
    tu_rm_rf(s->dir);
    free(s->dir), free(s->out), free(s->err);
}

#define phax_run(s, ...) tu_phax((s)->out, (s)->err, NULL, NULL, __VA_ARGS__)

static void expect_ok(const sandbox *s, int rc) {
    char *e = tu_slurp(s->err, NULL);
    cr_assert(rc == 0, "exit %d: %s", rc, e);
    free(e);
}

// The last run failed (exit 1) with one line on stderr starting with prefix and holding frag.
static void expect_fail(const sandbox *s, int rc, const char *prefix, const char *frag) {
    char *why = tu_cli_error_check(s->err, rc, prefix, frag);
    cr_assert(!why, "%s", why);
}

// A tiny recall run: d 32, 2 layers, T 64, batch 8.
#define TINY_RECALL(s, family, out, steps, ...)                                                    \
    phax_run(s, "train", "--task", "recall", "--family", family, "--set", "d_model=32", "--set",   \
             "n_layers=2", "--seq", "64", "--batch", "8", "--steps", steps, "--warmup", "2", "--lr", \
             "3e-3", "--eval-every", "5", "--eval-tokens", "1024", "--out", out, ##__VA_ARGS__, NULL)

static char *gen_file(const char *run, const char *name) {
    char *m = phax_ckpt_model_path(run);
    cr_assert(m);
    *strrchr(m, '/') = '\0';
    char *p = tu_join(m, name);
    free(m);
    return p;
}

static void same_bytes(const char *a, const char *b) {
    size_t na, nb;
    char *x = tu_slurp(a, &na), *y = tu_slurp(b, &nb);
    cr_assert(na == nb && !memcmp(x, y, na), "%s and %s differ", a, b);
    free(x), free(y);
}

// 20 steps straight vs 10 (--stop-after) + --resume: the same model, state,
// vocabulary and log (validation lines included). swax: the stochastic window too.
Test(recall, train_resume_bit_identical_swax) {
    sandbox s = sandbox_new();
    char *a = tu_join(s.dir, "a"), *b = tu_join(s.dir, "b");
    expect_ok(&s, TINY_RECALL(&s, "swax", a, "20", "--ckpt-every", "7", "--recall-queries", "2"));
    expect_ok(&s, TINY_RECALL(&s, "swax", b, "20", "--ckpt-every", "7", "--recall-queries", "2",
                              "--stop-after", "10"));
    expect_ok(&s, phax_run(&s, "train", "--resume", "--out", b, NULL));
    const char *files[] = {"checkpoint.safetensors", "checkpoint.state.safetensors", "checkpoint.vocab"};
    for (int i = 0; i < 3; i++) {
        char *fa = gen_file(a, files[i]), *fb = gen_file(b, files[i]);
        same_bytes(fa, fb);
        free(fa), free(fb);
    }
    char *la = tu_join(a, "log.jsonl"), *lb = tu_join(b, "log.jsonl");
    char *ta = tu_log_without_timing(la), *tb = tu_log_without_timing(lb);
    cr_assert_str_eq(ta, tb, "logs differ beyond timing");
    cr_assert(strstr(ta, "\"window\": ") && strstr(ta, "\"val_acc\": "), "%s", ta);
    cr_assert(strstr(ta, "\"val_answers\": 32"), "16 rows x 2 queries: %s", ta);
    // The checkpoint holds the recall vocabulary and the options.
    phax_ckpt ck;
    cr_assert(phax_ckpt_load(a, PHAX_FAMILY_SWAX, &ck) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_recall_vocab_check(ck.vocab) == PHAX_OK, "%s", phax_error());
    cr_assert(ck.step == 20 && ck.train_seq == 64 && ck.cfg.vocab_size == 64);
    char *sp = phax_ckpt_state_path(ck.path);
    phax_ckpt_state st;
    cr_assert(phax_ckpt_state_load(sp, &ck.layout, &st) == PHAX_OK, "%s", phax_error());
    cr_assert(strstr(st.options_json, "\"task\":\"recall\"") && strstr(st.options_json, "\"recall_queries\":2") &&
              strstr(st.options_json, "\"recall_pairs\":4") && strstr(st.options_json, "\"train\":null"),
              "%s", st.options_json);
    phax_ckpt_state_free(&st);
    phax_ckpt_free(&ck);
    free(sp), free(ta), free(tb), free(la), free(lb), free(a), free(b);
    sandbox_free(&s);
}

// Another seed makes other rows: the losses differ from the first step on.
Test(recall, train_rows_follow_the_seed) {
    sandbox s = sandbox_new();
    char *a = tu_join(s.dir, "a"), *b = tu_join(s.dir, "b");
    expect_ok(&s, TINY_RECALL(&s, "transformer", a, "2", "--seed", "1"));
    expect_ok(&s, TINY_RECALL(&s, "transformer", b, "2", "--seed", "2"));
    char *la = tu_join(a, "log.jsonl"), *lb = tu_join(b, "log.jsonl");
    char *ta = tu_log_without_timing(la), *tb = tu_log_without_timing(lb);
    cr_assert(strcmp(ta, tb), "seeds 1 and 2 gave the same log");
    free(ta), free(tb), free(la), free(lb), free(a), free(b);
    sandbox_free(&s);
}

// Refusals of phax train: one line, exit 1, nothing written.
Test(recall, train_bad_input_refused) {
    sandbox s = sandbox_new();
    char *run = tu_join(s.dir, "run"), *txt = tu_join(s.dir, "t.txt");
    tu_write_file(txt, "the cat sat\n", 12);
    const char *P = "phax train: ";
    expect_fail(&s, TINY_RECALL(&s, "swax", run, "2", "--data", s.dir), P, "--data: not with --task recall");
    expect_fail(&s, TINY_RECALL(&s, "swax", run, "2", "--train", txt), P, "--train: not with --task recall");
    expect_fail(&s, TINY_RECALL(&s, "swax", run, "2", "--valid", txt), P, "--valid: not with --task recall");
    expect_fail(&s, TINY_RECALL(&s, "swax", run, "2", "--niah-frac", "0.5"), P, "--niah-frac");
    expect_fail(&s, TINY_RECALL(&s, "swax", run, "2", "--tokenizer", "byte"), P, "--tokenizer");
    expect_fail(&s, TINY_RECALL(&s, "swax", run, "2", "--vocab-max", "10"), P, "--vocab-max");
    expect_fail(&s, TINY_RECALL(&s, "swax", run, "2", "--recall-pairs", "17"), P, "--recall-pairs");
    expect_fail(&s, TINY_RECALL(&s, "swax", run, "2", "--recall-pairs", "0"), P, "--recall-pairs");
    expect_fail(&s, TINY_RECALL(&s, "swax", run, "2", "--recall-queries", "5"), P, "queries 5");
    expect_fail(&s, TINY_RECALL(&s, "swax", run, "2", "--seq", "8"), P, "--seq 8: too short");  // 4 pairs: 9
    expect_fail(&s, phax_run(&s, "train", "--task", "nope", "--family", "swax", "--out", run, NULL), P,
                "--task: 'nope' is not lm, recall or mqar");
    cr_assert(!tu_exists(run), "the run folder was created");
    // --seq 9 is the shortest row for 4 pairs and 1 query.
    expect_ok(&s, TINY_RECALL(&s, "swax", run, "1", "--seq", "9"));
    free(run), free(txt);
    sandbox_free(&s);
}

// Rewrite key of the run's options in its state (as a crafted run folder might).
static void craft_option(const char *run, const char *key, const char *value) {
    phax_ckpt ck;
    phax_ckpt_state st;
    cr_assert(phax_ckpt_load(run, -1, &ck) == PHAX_OK, "%s", phax_error());
    char *sp = phax_ckpt_state_path(ck.path);
    cr_assert(phax_ckpt_state_load(sp, &ck.layout, &st) == PHAX_OK, "%s", phax_error());
    // options_json is compact with sorted keys: replace "key":<value> textually.
    char *k = tu_xprintf("\"%s\":", key), *at = strstr(st.options_json, k);
    cr_assert(at, "no %s in %s", key, st.options_json);
    char *end = at + strlen(k);
    if (*end == '"') end = strchr(end + 1, '"') + 1;
    else while (*end && *end != ',' && *end != '}') end++;
    char *o = tu_xprintf("%.*s%s%s%s", (int)(at - st.options_json), st.options_json, k, value, end);
    free(st.options_json);
    st.options_json = o;
    cr_assert(phax_ckpt_state_save(sp, &ck.layout, &st) == PHAX_OK, "%s", phax_error());
    phax_ckpt_state_free(&st);
    phax_ckpt_free(&ck);
    free(sp), free(k);
}

// A crafted state: recall options out of range, or a recall run turned into an lm one (which
// would read a corpus it names), are refused before anything is read or trained.
Test(recall, train_resume_crafted_options_refused) {
    sandbox s = sandbox_new();
    char *run = tu_join(s.dir, "run"), *txt = tu_join(s.dir, "t.txt");
    tu_write_file(txt, "the cat sat\n", 12);
    expect_ok(&s, TINY_RECALL(&s, "swax", run, "6", "--stop-after", "3"));
    craft_option(run, "recall_pairs", "99");
    expect_fail(&s, phax_run(&s, "train", "--resume", "--out", run, NULL), "phax train: ", "pairs 99");
    craft_option(run, "recall_pairs", "4");
    craft_option(run, "task", "\"lm\"");
    expect_fail(&s, phax_run(&s, "train", "--resume", "--out", run, NULL), "phax train: ", "\"train\" is not a path");
    char *q = tu_xprintf("\"%s\"", txt);
    craft_option(run, "train", q);
    free(q);
    expect_fail(&s, phax_run(&s, "train", "--resume", "--out", run, NULL), "phax train: ", "no data file identities");
    craft_option(run, "task", "\"recall\"");
    expect_fail(&s, phax_run(&s, "train", "--resume", "--out", run, NULL), "phax train: ", "\"train\" is not null");
    craft_option(run, "train", "null");
    craft_option(run, "recall_queries", "2");  // other rows than the checkpoint's data identity says
    expect_fail(&s, phax_run(&s, "train", "--resume", "--out", run, NULL), "phax train: ", "the task differs");
    craft_option(run, "recall_queries", "1");
    expect_ok(&s, phax_run(&s, "train", "--resume", "--out", run, NULL));
    free(run), free(txt);
    sandbox_free(&s);
}

// The prompt seed phax recall uses for sample s of a cell (docs/recall.md).
static uint64_t prompt_seed(uint64_t seed, int pairs, int length, int sample) {
    char name[96];
    snprintf(name, sizeof name, "recall/%d/%d/%d", pairs, length, sample);
    phax_rng r = phax_rng_stream(seed, phax_hash_str(name));
    return phax_rng_u64(&r);
}

// Prompts of one cell scored here by a whole-sequence forward (not phax recall's
// decoder): *right the prompts whose argmax at the last position is the answer,
// *near those whose top two logits are within 1e-3 (where the two paths' float
// roundings may pick differently). *dist: the summed distances.
static void score_cell(const phax_ckpt *ck, int L, double depth, int samples, uint64_t seed,
                       int *right, int *near, long *dist) {
    fmodel m = {.cfg = ck->cfg, .layout = ck->layout, .params = ck->params, .grads = NULL};
    fmodel_ws *ws = fmodel_ws_new(&m, 1, L);
    cr_assert(ws, "%s", phax_error());
    int V = ck->cfg.vocab_size;
    int32_t *tok = malloc((size_t)L * sizeof *tok);
    float *logits = malloc((size_t)L * V * sizeof *logits);
    *right = *near = 0, *dist = 0;
    for (int s = 0; s < samples; s++) {
        phax_recall_spec spec = {L, 4, depth, prompt_seed(seed, 4, L, s)};
        phax_recall_prompt p;
        cr_assert(phax_recall_prompt_build(&spec, tok, &p) == PHAX_OK, "%s", phax_error());
        cr_assert(fmodel_forward(&m, ws, tok, NULL, -1, logits, NULL) == PHAX_OK, "%s", phax_error());
        const float *z = logits + (size_t)(L - 1) * V;
        int best = 0;
        for (int v = 1; v < V; v++)
            if (z[v] > z[best]) best = v;
        float second = -INFINITY;
        for (int v = 0; v < V; v++)
            if (v != best && z[v] > second) second = z[v];
        *right += best == p.answer;
        *near += z[best] - second < 1e-3f;
        *dist += p.distance;
    }
    free(tok), free(logits);
    fmodel_ws_free(ws);
}

static double json_num(const char *text, const char *key) {
    char *k = tu_xprintf("\"%s\": ", key);
    const char *p = strstr(text, k);
    cr_assert(p, "no %s in %s", key, text);
    double v = strtod(p + strlen(k), NULL);
    free(k);
    return v;
}

// The run's last validation line against the rows of phax_seed_derive(seed,
// "valid.recall") scored here with the checkpoint's parameters (the last
// evaluation comes after the last step): loss and argmax accuracy of the answers,
// n_rows rows in batches of B (the last one padded).
static void check_validation(const char *run, uint64_t seed, int P, int Q, int B, int T, int n_rows) {
    phax_ckpt ck;
    cr_assert(phax_ckpt_load(run, -1, &ck) == PHAX_OK, "%s", phax_error());
    fmodel m = {.cfg = ck.cfg, .layout = ck.layout, .params = ck.params, .grads = NULL};
    fmodel_ws *ws = fmodel_ws_new(&m, B, T);
    cr_assert(ws, "%s", phax_error());
    int32_t *x = malloc(sizeof(int32_t) * B * T), *y = malloc(sizeof(int32_t) * B * T);
    float *logits = malloc(sizeof(float) * B * T * 64);
    uint64_t valid_seed = phax_seed_derive(seed, "valid.recall");
    double sum = 0;
    long k = 0, right = 0;
    for (int first = 0; first < n_rows; first += B) {
        for (int b = 0; b < B; b++) {
            if (first + b < n_rows)
                cr_assert(phax_recall_train_sample(valid_seed, (uint64_t)(first + b), P, Q, T, x + b * T,
                                                   y + b * T, NULL) == PHAX_OK);
            else
                for (int i = 0; i < T; i++) x[b * T + i] = 0, y[b * T + i] = -1;
        }
        double loss;
        cr_assert(fmodel_forward(&m, ws, x, y, -1, logits, &loss) == PHAX_OK, "%s", phax_error());
        int n = 0;
        for (int i = 0; i < B * T; i++) {
            if (y[i] < 0) continue;
            n++;
            int best = 0;
            for (int v = 1; v < 64; v++)
                if (logits[i * 64 + v] > logits[i * 64 + best]) best = v;
            right += best == y[i];
        }
        sum += loss * n, k += n;
    }
    cr_assert(k == (long)n_rows * Q, "%ld answers", k);
    char *log = tu_join(run, "log.jsonl"), *t = tu_slurp(log, NULL), *v = t, *p;
    while ((p = strstr(v + 1, "\"val_loss\": "))) v = p;
    cr_assert(v != t, "no validation line: %s", t);
    printf("%s: %s", run, v);
    cr_assert(fabs(json_num(v, "val_loss") - sum / k) <= 1e-5 * (sum / k), "val_loss %.9g, rows give %.9g",
              json_num(v, "val_loss"), sum / k);
    cr_assert(json_num(v, "val_acc") == (double)right / k, "val_acc %g, rows give %g", json_num(v, "val_acc"),
              (double)right / k);
    cr_assert(json_num(v, "val_answers") == k && json_num(v, "val_rows") == n_rows, "%s", v);
    free(x), free(y), free(logits), free(log), free(t);
    fmodel_ws_free(ws);
    phax_ckpt_free(&ck);
}

// phax recall on a tiny swax run: the table, and JSON / CSV with every cell in
// order; each cell's count agrees with prompts scored here by the forward pass.
Test(recall, recall_command_table_json_csv) {
    sandbox s = sandbox_new();
    char *run = tu_join(s.dir, "run"), *js = tu_join(s.dir, "r.json"), *csv = tu_join(s.dir, "r.csv");
    expect_ok(&s, TINY_RECALL(&s, "swax", run, "30"));
    expect_ok(&s, phax_run(&s, "recall", "--ckpt", run, "--lengths", "64,96", "--depths", "0,0.5,1",
                           "--samples", "12", "--seed", "5", "--json", js, "--csv", csv, NULL));
    char *o = tu_slurp(s.out, NULL);
    cr_assert(strstr(o, "chance 1/16 = 0.0625") && strstr(o, "d=0.5") && strstr(o, "mean"), "%s", o);
    cr_assert(strstr(o, "\n      64  ") && strstr(o, "\n      96  "), "no rows for 64 and 96:\n%s", o);
    free(o);
    phax_ckpt ck;
    cr_assert(phax_ckpt_load(run, -1, &ck) == PHAX_OK, "%s", phax_error());
    char *j = tu_slurp(js, NULL), *c = tu_slurp(csv, NULL);
    cr_assert(strstr(j, "\"family\": \"swax\"") && strstr(j, "\"pairs\": 4") && strstr(j, "\"samples\": 12") &&
              strstr(j, "\"chance\": 0.0625") && strstr(j, "\"value_guess\": 0.25"), "%s", j);
    cr_assert(json_num(j, "window") == ck.cfg.w_long, "%s", j);
    cr_assert(!strncmp(c, "length,depth,samples,correct,accuracy,mean_distance\n", 52), "%s", c);
    const int lengths[] = {64, 96};
    const double depths[] = {0, 0.5, 1};
    const char *jp = strstr(j, "\"cells\""), *cp = strchr(c, '\n') + 1;
    int total_right = 0;
    for (int li = 0; li < 2; li++)
        for (int di = 0; di < 3; di++) {
            int L = lengths[li], right, near;
            long dist;
            score_cell(&ck, L, depths[di], 12, 5, &right, &near, &dist);
            jp = strstr(jp + 1, "\"length\": ");
            cr_assert(jp, "cell %d %d missing:\n%s", li, di, j);
            cr_assert(json_num(jp, "length") == L && json_num(jp, "depth") == depths[di] &&
                      json_num(jp, "samples") == 12, "cell %d %d", li, di);
            int got = (int)json_num(jp, "correct");
            cr_assert(abs(got - right) <= near, "L %d depth %g: phax recall %d right, the forward %d (%d near ties)",
                      L, depths[di], got, right, near);
            // The JSON holds 10 significant digits.
            cr_assert(fabs(json_num(jp, "accuracy") - got / 12.0) <= 1e-9, "accuracy");
            cr_assert(fabs(json_num(jp, "mean_distance") - dist / 12.0) <= 1e-9 * L, "mean distance %g, expected %g",
                      json_num(jp, "mean_distance"), dist / 12.0);
            if (depths[di] == 0) cr_assert(json_num(jp, "mean_distance") == L - 1);
            if (depths[di] == 1) cr_assert(json_num(jp, "mean_distance") == 2);
            char *line = tu_xprintf("%d,%g,12,%d,%.6f,", L, depths[di], got, got / 12.0);
            cr_assert(!strncmp(cp, line, strlen(line)), "csv line %s, expected %s...", cp, line);
            free(line);
            cp = strchr(cp, '\n') + 1;
            total_right += right;
        }
    cr_assert(*cp == '\0', "extra csv lines: %s", cp);
    free(j), free(c);
    phax_ckpt_free(&ck);
    // The checkpoint given as its model file, the default depths and lengths (train_seq x 1, 2, 4, 8).
    char *model = tu_join(run, "checkpoint.safetensors");
    expect_ok(&s, phax_run(&s, "recall", model, "--samples", "2", "--json", js, NULL));
    j = tu_slurp(js, NULL);
    for (int i = 0; i < 4; i++) {
        char *want = tu_xprintf("\"length\": %d", 64 << i);
        cr_assert(strstr(j, want), "%s missing in %s", want, j);
        free(want);
    }
    cr_assert(strstr(j, "\"depth\": 0.25") && strstr(j, "\"depth\": 0.75"));
    free(j), free(model);
    free(run), free(js), free(csv);
    sandbox_free(&s);
}

// Refusals of phax recall: one line, exit 1.
Test(recall, recall_command_bad_input_refused) {
    sandbox s = sandbox_new();
    char *run = tu_join(s.dir, "run"), *pha = tu_join(s.dir, "pha"), *lm = tu_join(s.dir, "lm");
    char *data = tu_join(s.dir, "t.txt");
    FILE *f = fopen(data, "w");
    for (int i = 0; i < 50; i++) fputs("the cat sat on the mat\n", f);
    fclose(f);
    expect_ok(&s, TINY_RECALL(&s, "swax", run, "2"));
    expect_ok(&s, TINY_RECALL(&s, "pha", pha, "2"));
    expect_ok(&s, phax_run(&s, "train", "--family", "swax", "--train", data, "--set", "d_model=32", "--set",
                           "n_layers=2", "--seq", "16", "--batch", "2", "--steps", "2", "--out", lm, NULL));
    const char *P = "phax recall: ";
    expect_fail(&s, phax_run(&s, "recall", lm, "--samples", "2", NULL), P, "not the recall vocabulary");
    expect_fail(&s, phax_run(&s, "recall", pha, "--window", "8", NULL), P,
                "--window applies to the swax, swa, mlstm, swa_full and swax_gdn families; pha uses attn_window");
    expect_fail(&s, phax_run(&s, "recall", run, "--lengths", "8", NULL), P, "--lengths: 8 is outside [9,");
    expect_fail(&s, phax_run(&s, "recall", run, "--lengths", "70000", NULL), P, "--lengths");
    expect_fail(&s, phax_run(&s, "recall", run, "--pairs", "2", "--lengths", "4", NULL), P, "--lengths: 4");
    expect_fail(&s, phax_run(&s, "recall", run, "--depths", "0,1.5", NULL), P, "'1.5' is not a depth");
    expect_fail(&s, phax_run(&s, "recall", run, "--depths", "nan", NULL), P, "'nan' is not a depth");
    expect_fail(&s, phax_run(&s, "recall", run, "--pairs", "0", NULL), P, "--pairs");
    expect_fail(&s, phax_run(&s, "recall", run, "--pairs", "17", NULL), P, "--pairs");
    expect_fail(&s, phax_run(&s, "recall", run, "--samples", "0", NULL), P, "--samples");
    expect_fail(&s, phax_run(&s, "recall", run, "--frob", "1", NULL), P, "--frob");
    expect_fail(&s, phax_run(&s, "recall", "--samples", "3", NULL), P, "no checkpoint");
    char *nope = tu_join(s.dir, "nope");
    expect_fail(&s, phax_run(&s, "recall", nope, NULL), P, "nope");
    // The shortest prompt (4 pairs: 9 tokens) and --window on swax are fine.
    expect_ok(&s, phax_run(&s, "recall", run, "--lengths", "9", "--samples", "2", "--window", "4", NULL));
    free(run), free(pha), free(lm), free(data), free(nope);
    sandbox_free(&s);
}

// Every family trains on the task and phax recall reads it.
Test(recall, every_family_trains_and_is_scored) {
    const char *fams[] = {"pha", "transformer", "serial", "swax", "swa", "mlstm"};
    sandbox s = sandbox_new();
    for (int i = 0; i < 6; i++) {
        char *run = tu_join(s.dir, fams[i]);
        expect_ok(&s, TINY_RECALL(&s, fams[i], run, "3"));
        char *log = tu_join(run, "log.jsonl"), *t = tu_slurp(log, NULL);
        cr_assert(strstr(t, "\"val_acc\": "), "%s: %s", fams[i], t);
        expect_ok(&s, phax_run(&s, "recall", run, "--lengths", "64,128", "--samples", "3", NULL));
        char *o = tu_slurp(s.out, NULL);
        cr_assert(strstr(o, "chance 1/16"), "%s: %s", fams[i], o);
        free(o), free(t), free(log), free(run);
    }
    sandbox_free(&s);
}

// A tiny transformer learns the task with one needle (T 32, 200 steps, ~2 s): phax recall
// finds the answer well above chance (1/16) at the training length, at every depth, and so
// does the validation, whose loss and accuracy are checked against the rows scored here.
Test(recall, tiny_transformer_learns_one_pair) {
    sandbox s = sandbox_new();
    char *run = tu_join(s.dir, "run"), *js = tu_join(s.dir, "r.json");
    expect_ok(&s, phax_run(&s, "train", "--task", "recall", "--recall-pairs", "1", "--family", "transformer",
                           "--set", "d_model=32", "--set", "n_layers=2", "--seq", "32", "--batch", "32",
                           "--steps", "200", "--lr", "1e-2", "--eval-every", "0", "--eval-tokens", "2208",
                           "--out", run, NULL));
    expect_ok(&s, phax_run(&s, "recall", run, "--pairs", "1", "--lengths", "32", "--samples", "50",
                           "--json", js, NULL));
    char *j = tu_slurp(js, NULL), *o = tu_slurp(s.out, NULL);
    printf("%s", o);
    const char *p = j;
    for (int d = 0; d < 5; d++) {
        p = strstr(p + 1, "\"accuracy\": ");
        cr_assert(p, "%s", j);
        double a = json_num(p, "accuracy");
        cr_assert(a >= 0.5, "depth %g: accuracy %.3f:\n%s", 0.25 * d, a, o);
    }
    char *log = tu_join(run, "log.jsonl"), *t = tu_slurp(log, NULL), *last = strstr(t, "\"val_acc\": ");
    cr_assert(last && json_num(last, "val_acc") >= 0.5, "%s", t);
    free(log), free(t);
    // The validation line: 69 rows (2208 / 32), two full batches of 32 and one padded.
    check_validation(run, 1, 1, 1, 32, 32, 69);
    free(j), free(o), free(run), free(js);
    sandbox_free(&s);
}

// With lr 0 the parameters never move, so every logged loss is the initial
// model's: step s's loss is that of rows s·B + b of the seed
// phax_seed_derive(seed, "train.recall"); the validation line that of rows
// 0..n−1 of phax_seed_derive(seed, "valid.recall") (n = eval-tokens / T = 6
// rows: a full batch of 4 and one padded).
Test(recall, train_rows_and_validation_as_documented) {
    sandbox s = sandbox_new();
    char *run = tu_join(s.dir, "run");
    enum { B = 4, T = 32, STEPS = 3, ROWS = 6 };
    expect_ok(&s, phax_run(&s, "train", "--task", "recall", "--recall-queries", "2", "--family", "transformer",
                           "--set", "d_model=32", "--set", "n_layers=2", "--seq", "32", "--batch", "4",
                           "--steps", "3", "--lr", "0", "--min-lr", "0", "--seed", "11", "--eval-every", "3",
                           "--eval-tokens", "192", "--out", run, NULL));
    phax_ckpt ck;
    cr_assert(phax_ckpt_load(run, -1, &ck) == PHAX_OK, "%s", phax_error());
    fmodel m;
    cr_assert(fmodel_new(&m, &ck.cfg, 11) == PHAX_OK, "%s", phax_error());
    for (size_t i = 0; i < ck.layout.numel; i++)
        cr_assert(m.params[i] == ck.params[i], "lr 0 moved parameter %zu", i);
    fmodel_ws *ws = fmodel_ws_new(&m, B, T);
    int32_t x[B * T], y[B * T];
    char *log = tu_join(run, "log.jsonl"), *t = tu_slurp(log, NULL), *p = t;
    uint64_t train_seed = phax_seed_derive(11, "train.recall");
    for (int st = 0; st < STEPS; st++) {
        for (int b = 0; b < B; b++)
            cr_assert(phax_recall_train_sample(train_seed, (uint64_t)(st * B + b), 4, 2, T, x + b * T, y + b * T,
                                               NULL) == PHAX_OK);
        double loss;
        cr_assert(fmodel_forward(&m, ws, x, y, -1, NULL, &loss) == PHAX_OK, "%s", phax_error());
        p = strstr(p, "\"loss\": ");
        cr_assert(p, "%s", t);
        double logged = json_num(p, "loss");
        p++;
        cr_assert(fabs(logged - loss) <= 1e-5 * loss, "step %d: logged %.9g, rows give %.9g", st + 1, logged, loss);
    }
    check_validation(run, 11, 4, 2, B, T, ROWS);
    free(log), free(t), free(run);
    fmodel_ws_free(ws);
    fmodel_free(&m);
    phax_ckpt_free(&ck);
    sandbox_free(&s);
}

// --- multi-query associative recall (MQAR) ---------------------------------------------------

// A sample read back from its tokens alone: the P pairs open it (distinct keys,
// distinct values), then every token is a filler or a query "key value" whose
// value is its pair's; the layout says the same. Checks that no answer leaks:
// before query j's key, its value occurs exactly once (in its pair).
static void check_mqar_tokens(const int32_t *tok, int n, int P, int Q, const phax_mqar_layout *lay,
                              const char *what) {
    cr_assert(lay->n_pairs == P && lay->n_queries == Q, "%s: counts %d %d", what, lay->n_pairs, lay->n_queries);
    int32_t value_of[16];
    for (int k = 0; k < 16; k++) value_of[k] = -1;
    for (int i = 0; i < P; i++) {
        cr_assert(is_key(tok[2 * i]) && is_value(tok[2 * i + 1]), "%s: pair %d is not key value", what, i);
        cr_assert(tok[2 * i] == lay->key[i] && tok[2 * i + 1] == lay->value[i], "%s: pair %d vs layout", what, i);
        cr_assert(value_of[tok[2 * i]] < 0, "%s: key %d twice", what, tok[2 * i]);
        value_of[tok[2 * i]] = tok[2 * i + 1];
        for (int k = 0; k < i; k++) cr_assert(lay->value[k] != lay->value[i], "%s: value twice", what);
    }
    int asked[16] = {0}, q = 0;
    for (int t = 2 * P; t < n; t++) {
        if (is_filler(tok[t])) continue;
        cr_assert(q < Q, "%s: more than %d queries", what, Q);
        cr_assert(is_key(tok[t]) && value_of[tok[t]] >= 0, "%s: token %d (%d) is not a filler nor a pair's key", what,
                  t, tok[t]);
        cr_assert(lay->qpos[q] == t, "%s: query %d at %d, layout %d", what, q, t, lay->qpos[q]);
        int p = lay->qpair[q];
        cr_assert(p >= 0 && p < P && lay->key[p] == tok[t], "%s: query %d asks pair %d", what, q, p);
        cr_assert(!asked[p]++, "%s: pair %d asked twice", what, p);
        cr_assert(lay->distance[q] == t - 2 * p, "%s: distance", what);
        if (t + 1 < n) cr_assert(tok[t + 1] == value_of[tok[t]], "%s: query %d not followed by its value", what, q);
        int seen = 0;
        for (int u = 0; u < t; u++) seen += tok[u] == lay->value[p];
        cr_assert(seen == 1, "%s: query %d's value occurs %d times before it", what, q, seen);
        q++, t++;
    }
    cr_assert(q == Q, "%s: %d queries found, %d expected", what, q, Q);
}

Test(recall, mqar_samples_over_many_seeds) {
    phax_rng r = tu_rng("recall/mqar_samples_over_many_seeds");
    uint64_t seed = phax_rng_u64(&r);
    printf("recall/mqar_samples_over_many_seeds: seed %llu\n", (unsigned long long)seed);
    static int32_t tok[400], x[400], y[400];
    for (int i = 0; i < 3000; i++) {
        int P = 1 + (int)phax_rng_below(&r, 16), Q = 1 + (int)phax_rng_below(&r, (uint64_t)P);
        int n = 2 * P + 2 * Q + (int)phax_rng_below(&r, i % 10 ? 6 : 300);  // the smallest included
        phax_mqar_layout lay, lay2;
        char what[64];
        snprintf(what, sizeof what, "sample %d (P %d, Q %d, n %d)", i, P, Q, n);
        cr_assert(phax_mqar_sample(seed + (uint64_t)i, n, P, Q, tok, &lay) == PHAX_OK, "%s", phax_error());
        check_mqar_tokens(tok, n, P, Q, &lay, what);
        // A training row of T = n − 1: x the sample's first T tokens, y the answers only.
        int T = n - 1;
        cr_assert(phax_mqar_train_sample(seed, (uint64_t)i, P, Q, 0, T, x, y, &lay2) == PHAX_OK, "%s", phax_error());
        check_mqar_tokens(x, T, P, Q, &lay2, what);
        int answers = 0;
        for (int t = 0; t < T; t++) {
            if (y[t] < 0) continue;
            cr_assert(is_key(x[t]), "%s: a target after a non-key at %d", what, t);
            int j = 0;
            while (j < Q && lay2.qpos[j] != t) j++;
            cr_assert(j < Q && y[t] == lay2.value[lay2.qpair[j]], "%s: target at %d is not a query's value", what, t);
            answers++;
        }
        cr_assert(answers == Q, "%s: %d targets", what, answers);
    }
    int m;
    cr_assert(phax_mqar_min_len(16, 8, &m) == PHAX_OK && m == 48);
}

// The elimination floor is what a model without binding scores: the best it can do
// on query j is a uniform pick among the values not yet answered. Simulated here
// over samples (each query: P − j candidates), the mean is the floor within 5 SE.
Test(recall, mqar_floor_is_the_elimination_guess) {
    cr_assert(fabs(phax_mqar_floor(16, 8) - (1. / 16 + 1. / 15 + 1. / 14 + 1. / 13 + 1. / 12 + 1. / 11 + 1. / 10 + 1. / 9) / 8) < 1e-15);
    cr_assert(phax_mqar_floor(1, 1) == 1.0 && phax_mqar_floor(4, 1) == 0.25);
    cr_assert(isnan(phax_mqar_floor(4, 5)) && isnan(phax_mqar_floor(0, 1)) && isnan(phax_mqar_floor(17, 1)));
    phax_rng r = tu_rng("recall/mqar_floor_is_the_elimination_guess");
    uint64_t seed = phax_rng_u64(&r);
    printf("recall/mqar_floor_is_the_elimination_guess: seed %llu\n", (unsigned long long)seed);
    enum { P = 8, Q = 6, n = 80, S = 20000 };
    int32_t tok[n];
    long right = 0;
    for (int s = 0; s < S; s++) {
        phax_mqar_layout lay;
        cr_assert(phax_mqar_sample(seed + (uint64_t)s, n, P, Q, tok, &lay) == PHAX_OK);
        int answered[16] = {0};
        for (int j = 0; j < Q; j++) {
            int cand[16], nc = 0;
            for (int i = 0; i < P; i++)
                if (!answered[i]) cand[nc++] = i;
            int pick = cand[phax_rng_below(&r, (uint64_t)nc)];
            right += lay.value[pick] == lay.value[lay.qpair[j]];
            answered[lay.qpair[j]] = 1;
        }
    }
    double p = phax_mqar_floor(P, Q), acc = (double)right / (S * Q), se = sqrt(p * (1 - p) / (S * Q));
    cr_assert(fabs(acc - p) <= 5 * se, "elimination guess scores %.4f, floor %.4f (se %.4f)", acc, p, se);
}

// Queries fall over the whole region: with one pair and one query in n = 12
// tokens the query's key is at 2..10 (9 places), each about 1/9 of the time;
// and each of the P pairs is asked about equally often.
Test(recall, mqar_places_and_pairs_uniform) {
    phax_rng r = tu_rng("recall/mqar_places_and_pairs_uniform");
    uint64_t seed = phax_rng_u64(&r);
    printf("recall/mqar_places_and_pairs_uniform: seed %llu\n", (unsigned long long)seed);
    int at[12] = {0}, asked[4] = {0};
    int32_t tok[40];
    for (int s = 0; s < 9000; s++) {
        phax_mqar_layout lay;
        cr_assert(phax_mqar_sample(seed + (uint64_t)s, 12, 1, 1, tok, &lay) == PHAX_OK);
        cr_assert(lay.qpos[0] >= 2 && lay.qpos[0] <= 10, "query at %d", lay.qpos[0]);
        at[lay.qpos[0]]++;
        cr_assert(phax_mqar_sample(seed ^ (uint64_t)s << 20, 40, 4, 1, tok, &lay) == PHAX_OK);
        asked[lay.qpair[0]]++;
    }
    // Binomial(9000, 1/9): sd 30, 6 sd; Binomial(9000, 1/4): sd 41, 6 sd.
    for (int t = 2; t <= 10; t++) cr_assert(at[t] >= 820 && at[t] <= 1180, "place %d: %d", t, at[t]);
    for (int i = 0; i < 4; i++) cr_assert(asked[i] >= 2250 - 246 && asked[i] <= 2250 + 246, "pair %d: %d", i, asked[i]);
}

// The curriculum: a row's pair count is uniform in 1..P (queries min(Q, ⌈that/2⌉)), reproducible.
Test(recall, mqar_vary_rows) {
    phax_rng r = tu_rng("recall/mqar_vary_rows");
    uint64_t seed = phax_rng_u64(&r);
    printf("recall/mqar_vary_rows: seed %llu\n", (unsigned long long)seed);
    int count[17] = {0};
    int32_t x[64], y[64], x2[64], y2[64];
    for (int i = 0; i < 8000; i++) {
        phax_mqar_layout lay;
        cr_assert(phax_mqar_train_sample(seed, (uint64_t)i, 8, 4, 1, 63, x, y, &lay) == PHAX_OK, "%s", phax_error());
        int half = (lay.n_pairs + 1) / 2;
        cr_assert(lay.n_pairs >= 1 && lay.n_pairs <= 8 && lay.n_queries == (half < 4 ? half : 4),
                  "%d pairs, %d queries", lay.n_pairs, lay.n_queries);
        check_mqar_tokens(x, 63, lay.n_pairs, lay.n_queries, &lay, "vary");
        count[lay.n_pairs]++;
        cr_assert(phax_mqar_train_sample(seed, (uint64_t)i, 8, 4, 1, 63, x2, y2, NULL) == PHAX_OK);
        cr_assert(!memcmp(x, x2, 63 * sizeof *x) && !memcmp(y, y2, 63 * sizeof *y), "row %d not reproducible", i);
    }
    // Binomial(8000, 1/8): sd 29.6, 6 sd.
    for (int p = 1; p <= 8; p++) cr_assert(count[p] >= 1000 - 178 && count[p] <= 1000 + 178, "P %d: %d", p, count[p]);
    // The span: every query in the region's first half in about half the rows or more
    // (M ≤ N/2 alone has probability ~1/2). Placed over the whole region instead, that
    // happens with probability ~2^-Q: 0.15 averaged over the pair counts. sd < 0.006.
    int early = 0;
    for (int i = 0; i < 8000; i++) {
        phax_mqar_layout lay;
        cr_assert(phax_mqar_train_sample(seed, (uint64_t)i, 8, 4, 1, 63, x, y, &lay) == PHAX_OK);
        int N = 64 - 2 * lay.n_pairs - lay.n_queries, last = lay.qpos[lay.n_queries - 1];
        early += last - 2 * lay.n_pairs - (lay.n_queries - 1) < N / 2;  // its item index
    }
    cr_assert(early >= 0.45 * 8000, "%d of 8000 rows with every query in the first half", early);
}

Test(recall, mqar_bad_arguments_refused) {
    int32_t tok[64], y[64];
    expect_err(phax_mqar_sample(1, 47, 16, 8, tok, NULL), "outside [48");
    expect_err(phax_mqar_sample(1, 64, 17, 1, tok, NULL), "pairs 17");
    expect_err(phax_mqar_sample(1, 64, 4, 5, tok, NULL), "queries 5");
    expect_err(phax_mqar_sample(1, 64, 4, 0, tok, NULL), "queries 0");
    expect_err(phax_mqar_train_sample(1, 0, 16, 8, 0, 46, tok, y, NULL), "training row of 46");
    expect_err(phax_mqar_sample(1, 64, 4, 4, NULL, NULL), "NULL");
    cr_assert(phax_mqar_train_sample(1, 0, 16, 8, 0, 47, tok, y, NULL) == PHAX_OK, "%s", phax_error());
}

// phax train --task mqar and phax recall --task mqar end to end: a resumed run is
// bit-identical (the curriculum's rows follow (seed, step)); every query of every
// prompt is counted once, in the bin of its distance, with its elimination floor
// (recomputed here from core/recall.c with the command's prompt seeds); refusals.
Test(recall, mqar_commands_end_to_end) {
    sandbox s = sandbox_new();
    char *a = tu_join(s.dir, "a"), *b = tu_join(s.dir, "b"), *js = tu_join(s.dir, "m.json");
#define TINY_MQAR(out, steps, ...)                                                                          \
    phax_run(&s, "train", "--task", "mqar", "--family", "swax", "--set", "d_model=32", "--set", "n_layers=2", \
             "--recall-pairs", "6", "--recall-queries", "3", "--recall-vary", "1", "--seq", "48", "--batch",  \
             "4", "--steps", steps, "--warmup", "2", "--lr", "3e-3", "--eval-every", "5", "--eval-tokens",    \
             "512", "--out", out, ##__VA_ARGS__, NULL)
    expect_ok(&s, TINY_MQAR(a, "12"));
    expect_ok(&s, TINY_MQAR(b, "12", "--stop-after", "6"));
    expect_ok(&s, phax_run(&s, "train", "--resume", "--out", b, NULL));
    char *ma = gen_file(a, "checkpoint.safetensors"), *mb = gen_file(b, "checkpoint.safetensors");
    same_bytes(ma, mb);
    free(ma), free(mb);
    const char *P = "phax train: ";
    expect_fail(&s, phax_run(&s, "train", "--task", "mqar", "--family", "swax", "--recall-pairs", "6",
                             "--recall-queries", "3", "--seq", "16", "--out", tu_join(s.dir, "c"), NULL),
                P, "--seq 16: too short");
    expect_fail(&s, phax_run(&s, "train", "--task", "recall", "--recall-vary", "1", "--out", tu_join(s.dir, "d"), NULL),
                P, "--recall-vary: only with --task mqar");
    // The evaluation: lengths 48 and 100, bins 1, 8, 32.
    expect_ok(&s, phax_run(&s, "recall", a, "--task", "mqar", "--pairs", "6", "--queries", "3", "--lengths",
                           "48,100", "--bins", "1,8,32", "--samples", "10", "--seed", "3", "--json", js, NULL));
    char *j = tu_slurp(js, NULL);
    cr_assert(strstr(j, "\"task\": \"mqar\"") && strstr(j, "\"queries\": 3"), "%s", j);
    cr_assert(fabs(json_num(j, "floor") - phax_mqar_floor(6, 3)) < 1e-9, "%s", j);
    const int lengths[] = {48, 100}, edges[] = {1, 8, 32};
    const char *jp = strstr(j, "\"cells\"");
    for (int li = 0; li < 2; li++) {
        long n[3] = {0};
        double dist[3] = {0}, floor[3] = {0};
        for (int sm = 0; sm < 10; sm++) {
            char name[96];
            snprintf(name, sizeof name, "mqar/6/3/%d/%d", lengths[li], sm);
            phax_rng r = phax_rng_stream(3, phax_hash_str(name));
            int32_t tok[100];
            phax_mqar_layout lay;
            cr_assert(phax_mqar_sample(phax_rng_u64(&r), lengths[li], 6, 3, tok, &lay) == PHAX_OK);
            for (int q = 0; q < 3; q++) {
                int bi = lay.distance[q] >= 32 ? 2 : lay.distance[q] >= 8 ? 1 : 0;
                n[bi]++, dist[bi] += lay.distance[q], floor[bi] += 1.0 / (6 - q);
            }
        }
        for (int bi = 0; bi < 3; bi++) {
            if (!n[bi]) continue;
            jp = strstr(jp + 1, "\"length\": ");
            cr_assert(jp, "length %d bin %d missing:\n%s", lengths[li], bi, j);
            cr_assert(json_num(jp, "length") == lengths[li] && json_num(jp, "bin_lo") == edges[bi] &&
                      json_num(jp, "bin_hi") == (bi < 2 ? edges[bi + 1] : -1), "cell %d %d:\n%s", li, bi, jp);
            cr_assert(json_num(jp, "queries") == n[bi], "length %d bin %d: %g queries, expected %ld", lengths[li], bi,
                      json_num(jp, "queries"), n[bi]);
            cr_assert(fabs(json_num(jp, "mean_distance") - dist[bi] / n[bi]) < 1e-6, "mean distance");
            cr_assert(fabs(json_num(jp, "floor") - floor[bi] / n[bi]) < 1e-9, "floor");
            double acc = json_num(jp, "accuracy"), lp = json_num(jp, "mean_logp");
            cr_assert(acc >= 0 && acc <= 1 && lp < 0 && lp > -50, "accuracy %g, logp %g", acc, lp);
        }
    }
    cr_assert(!strstr(jp + 1, "\"length\": "), "extra cells: %s", jp);
    free(j);
    const char *R = "phax recall: ";
    expect_fail(&s, phax_run(&s, "recall", a, "--task", "mqar", "--pairs", "4", "--queries", "5", NULL), R,
                "--queries 5: more than --pairs 4");
    expect_fail(&s, phax_run(&s, "recall", a, "--task", "mqar", "--depths", "0", NULL), R, "--depths: not with");
    expect_fail(&s, phax_run(&s, "recall", a, "--task", "mqar", "--bins", "4,2", NULL), R, "--bins: edges must increase");
    expect_fail(&s, phax_run(&s, "recall", a, "--bins", "1,2", NULL), R, "--bins: only with --task mqar");
    expect_fail(&s, phax_run(&s, "recall", a, "--task", "mqar", "--lengths", "47", NULL), R, "--lengths: 47");
    expect_fail(&s, phax_run(&s, "recall", a, "--task", "frob", NULL), R, "--task: 'frob'");
#undef TINY_MQAR
    free(a), free(b), free(js);
    sandbox_free(&s);
}
