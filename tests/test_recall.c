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
