// Associative recall samples, training rows and evaluation prompts; see
// include/phax/recall.h and docs/recall.md.
#include "phax/recall.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Vocabulary.

// The spelling of token id (0..63) into buf: "k<i>", "v<i>", "f<i>".
static void spell(int id, char buf[16]) {
    if (id < PHAX_RECALL_VALUE0) snprintf(buf, 16, "k%d", id - PHAX_RECALL_KEY0);
    else if (id < PHAX_RECALL_FILLER0) snprintf(buf, 16, "v%d", id - PHAX_RECALL_VALUE0);
    else snprintf(buf, 16, "f%d", id - PHAX_RECALL_FILLER0);
}

int phax_recall_vocab(phax_vocab **out) {
    if (!out) return phax_fail("phax_recall_vocab: NULL argument");
    // "k0 k1 … f31": words in id order, no newline (so no "<eos>"), every word known (no "<unk>").
    char text[PHAX_RECALL_VOCAB * 5];
    size_t n = 0;
    for (int id = 0; id < PHAX_RECALL_VOCAB; id++) {
        char w[16];
        spell(id, w);
        n += (size_t)snprintf(text + n, sizeof text - n, "%s%s", id ? " " : "", w);
    }
    return phax_vocab_build_text((const uint8_t *)text, n, "recall vocabulary", out);
}

int phax_recall_vocab_check(const phax_vocab *v) {
    if (!v) return phax_fail("phax_recall_vocab_check: NULL argument");
    if (phax_vocab_kind(v) != PHAX_TOK_WORD)
        return phax_fail("a byte vocabulary, not the recall vocabulary (phax train --task recall)");
    if (phax_vocab_size(v) != PHAX_RECALL_VOCAB)
        return phax_fail("a vocabulary of %zu tokens, not the recall vocabulary of %d "
                         "(phax train --task recall)", phax_vocab_size(v), PHAX_RECALL_VOCAB);
    for (int id = 0; id < PHAX_RECALL_VOCAB; id++) {
        char w[16];
        spell(id, w);
        size_t len;
        const char *s = phax_vocab_token(v, id, &len);
        if (!s || len != strlen(w) || memcmp(s, w, len))
            return phax_fail("not the recall vocabulary: token %d is '%.16s', expected '%s' "
                             "(phax train --task recall)", id, s ? s : "", w);
    }
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// Arguments.

static int check_pairs(int pairs, int queries) {
    if (pairs < 1 || pairs > PHAX_RECALL_MAX_PAIRS)
        return phax_fail("recall: pairs %d is outside [1, %d]", pairs, PHAX_RECALL_MAX_PAIRS);
    if (queries < 1 || queries > pairs)
        return phax_fail("recall: queries %d is outside [1, pairs = %d]", queries, pairs);
    return PHAX_OK;
}

int phax_recall_min_row(int pairs, int queries, int *out) {
    if (!out) return phax_fail("phax_recall_min_row: NULL argument");
    if (check_pairs(pairs, queries)) return PHAX_ERR;
    *out = 2 * pairs + 2 * queries - 1;
    return PHAX_OK;
}

int phax_recall_min_prompt(int pairs, int *out) {
    if (!out) return phax_fail("phax_recall_min_prompt: NULL argument");
    if (check_pairs(pairs, 1)) return PHAX_ERR;
    *out = 2 * pairs + 1;
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// Drawing a sample.

// k distinct values of 0..n−1 (k ≤ n ≤ 16) in random order: a partial Fisher–Yates shuffle.
static void draw_distinct(phax_rng *r, int n, int k, int *out) {
    int a[PHAX_RECALL_MAX_PAIRS];
    for (int i = 0; i < n; i++) a[i] = i;
    for (int i = 0; i < k; i++) {
        int j = i + (int)phax_rng_below(r, (uint64_t)(n - i));
        int t = a[i];
        a[i] = a[j], a[j] = t;
        out[i] = a[i];
    }
}

// A uniform random k-subset of 0..n−1 (k ≤ 16, k ≤ n), any n: Floyd's algorithm.
static void draw_subset(phax_rng *r, int n, int k, int *out) {
    int m = 0;
    for (int j = n - k; j < n; j++) {
        int t = (int)phax_rng_below(r, (uint64_t)j + 1), seen = 0;
        for (int i = 0; i < m; i++) seen |= out[i] == t;
        out[m++] = seen ? j : t;
    }
}

// The sample of n tokens (n ≥ 2P + 2Q) with P pairs and Q queries; the first
// `cap` tokens go to out (the rest are only in lay). depth < 0: every needle at
// random (training); else needle 0 at item round(depth · (N − 1)) and Q = 1, the
// query asking needle 0. lay: where everything went (needles in text order).
static void draw_sample(phax_rng *r, int n, int P, int Q, double depth, int32_t *out, int cap,
                        phax_recall_layout *lay) {
    int key[PHAX_RECALL_MAX_PAIRS], val[PHAX_RECALL_MAX_PAIRS], item[PHAX_RECALL_MAX_PAIRS];
    int query[PHAX_RECALL_MAX_PAIRS];
    draw_distinct(r, PHAX_RECALL_N_KEYS, P, key);
    draw_distinct(r, PHAX_RECALL_N_VALUES, P, val);
    int H = n - 2 * Q, N = H - P;  // haystack tokens; items (fillers and needles)
    if (depth < 0) {
        draw_subset(r, N, P, item);
        draw_distinct(r, P, Q, query);
    } else {
        int j0 = (int)llround(depth * (double)(N - 1));
        item[0] = j0;
        draw_subset(r, N - 1, P - 1, item + 1);
        for (int i = 1; i < P; i++) item[i] += item[i] >= j0;  // skip j0's slot
        query[0] = 0;
    }
    // Needles in text order: sort needle ids by item (insertion sort, P ≤ 16).
    int order[PHAX_RECALL_MAX_PAIRS], rank[PHAX_RECALL_MAX_PAIRS];
    for (int i = 0; i < P; i++) order[i] = i;
    for (int i = 1; i < P; i++)
        for (int j = i; j > 0 && item[order[j]] < item[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    for (int k = 0; k < P; k++) rank[order[k]] = k;
    lay->n_pairs = P, lay->n_queries = Q, lay->haystack_len = H;
    for (int k = 0; k < P; k++) {
        int i = order[k];
        lay->key[k] = PHAX_RECALL_KEY0 + key[i];
        lay->value[k] = PHAX_RECALL_VALUE0 + val[i];
        lay->pos[k] = item[i] + k;  // each needle before it adds one token
    }
    for (int j = 0; j < Q; j++) lay->query[j] = rank[query[j]];
    // The haystack, item by item; then the queries.
    int t = 0, k = 0;
    for (int j = 0; j < N; j++) {
        if (k < P && item[order[k]] == j) {
            if (t < cap) out[t] = lay->key[k];
            if (t + 1 < cap) out[t + 1] = lay->value[k];
            t += 2, k++;
        } else {
            int32_t f = PHAX_RECALL_FILLER0 + (int32_t)phax_rng_below(r, PHAX_RECALL_N_FILLERS);
            if (t < cap) out[t] = f;
            t++;
        }
    }
    for (int j = 0; j < Q; j++, t += 2) {
        int q = lay->query[j];
        if (t < cap) out[t] = lay->key[q];
        if (t + 1 < cap) out[t + 1] = lay->value[q];
    }
}

// ---------------------------------------------------------------------------
// Training rows and prompts.

int phax_recall_train_sample(uint64_t seed, uint64_t index, int pairs, int queries, int T,
                             int32_t *x, int32_t *y, phax_recall_layout *lay) {
    if (!x || !y) return phax_fail("phax_recall_train_sample: NULL argument");
    int min_T;
    if (phax_recall_min_row(pairs, queries, &min_T)) return PHAX_ERR;
    if (T < min_T || T > PHAX_RECALL_MAX_LEN)
        return phax_fail("recall: a training row of %d tokens is outside [%d, %d] for %d pairs "
                         "and %d queries", T, min_T, PHAX_RECALL_MAX_LEN, pairs, queries);
    phax_rng r = phax_rng_stream(seed, index);
    phax_recall_layout l;
    draw_sample(&r, T + 1, pairs, queries, -1.0, x, T, &l);
    for (int t = 0; t < T; t++) y[t] = -1;
    for (int j = 0; j < queries; j++) y[l.haystack_len + 2 * j] = l.value[l.query[j]];
    if (lay) *lay = l;
    return PHAX_OK;
}

int phax_recall_prompt_build(const phax_recall_spec *spec, int32_t *tokens, phax_recall_prompt *out) {
    if (!spec || !tokens || !out) return phax_fail("phax_recall_prompt_build: NULL argument");
    int min_L;
    if (phax_recall_min_prompt(spec->pairs, &min_L)) return PHAX_ERR;
    if (!(spec->depth >= 0.0 && spec->depth <= 1.0))
        return phax_fail("recall: depth %g is outside [0, 1]", spec->depth);
    if (spec->length < min_L || spec->length > PHAX_RECALL_MAX_LEN)
        return phax_fail("recall: a prompt of %d tokens is outside [%d, %d] for %d pairs",
                         spec->length, min_L, PHAX_RECALL_MAX_LEN, spec->pairs);
    phax_rng r = phax_rng_new(spec->seed);
    int L = spec->length;
    memset(out, 0, sizeof *out);
    draw_sample(&r, L + 1, spec->pairs, 1, spec->depth, tokens, L, &out->layout);
    int q = out->layout.query[0];
    out->key = out->layout.key[q];
    out->answer = out->layout.value[q];
    out->needle_at = out->layout.pos[q];
    out->distance = (L - 1) - out->needle_at;
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// Multi-query associative recall.

int phax_mqar_min_len(int pairs, int queries, int *out) {
    if (!out) return phax_fail("phax_mqar_min_len: NULL argument");
    if (check_pairs(pairs, queries)) return PHAX_ERR;
    *out = 2 * pairs + 2 * queries;
    return PHAX_OK;
}

int phax_mqar_min_row(int pairs, int queries, int *out) {
    if (phax_mqar_min_len(pairs, queries, out)) return PHAX_ERR;
    *out -= 1;
    return PHAX_OK;
}

double phax_mqar_query_floor(int pairs, int j) {
    if (pairs < 1 || pairs > PHAX_RECALL_MAX_PAIRS || j < 0 || j >= pairs) return NAN;
    return 1.0 / (pairs - j);
}

double phax_mqar_floor(int pairs, int queries) {
    if (pairs < 1 || pairs > PHAX_RECALL_MAX_PAIRS || queries < 1 || queries > pairs) return NAN;
    double s = 0;
    for (int j = 0; j < queries; j++) s += phax_mqar_query_floor(pairs, j);
    return s / queries;
}

// The sample of n tokens from r (arguments checked by the callers); the first
// `cap` tokens go to out (a training row leaves the last one out). span: the
// queries go among the first `span` region items (span ≥ Q; N: the whole region).
static void draw_mqar(phax_rng *r, int n, int P, int Q, int span, int32_t *out, int cap,
                      phax_mqar_layout *lay) {
    int key[PHAX_RECALL_MAX_PAIRS], val[PHAX_RECALL_MAX_PAIRS], item[PHAX_RECALL_MAX_PAIRS];
    draw_distinct(r, PHAX_RECALL_N_KEYS, P, key);
    draw_distinct(r, PHAX_RECALL_N_VALUES, P, val);
    lay->n_pairs = P, lay->n_queries = Q;
    draw_distinct(r, P, Q, lay->qpair);
    int N = n - 2 * P - Q;  // region items: fillers (one token) and queries (two)
    if (span < Q || span > N) span = N;
    draw_subset(r, span, Q, item);
    for (int i = 1; i < Q; i++)  // sort the query places (insertion sort, Q ≤ 16)
        for (int j = i; j > 0 && item[j] < item[j - 1]; j--) {
            int t = item[j];
            item[j] = item[j - 1], item[j - 1] = t;
        }
    for (int i = 0; i < P; i++) {
        lay->key[i] = PHAX_RECALL_KEY0 + key[i];
        lay->value[i] = PHAX_RECALL_VALUE0 + val[i];
        if (2 * i < cap) out[2 * i] = lay->key[i];
        if (2 * i + 1 < cap) out[2 * i + 1] = lay->value[i];
    }
    int t = 2 * P, q = 0;
    for (int j = 0; j < N; j++) {
        if (q < Q && item[q] == j) {
            int p = lay->qpair[q];
            lay->qpos[q] = t;
            lay->distance[q] = t - 2 * p;
            if (t < cap) out[t] = lay->key[p];
            if (t + 1 < cap) out[t + 1] = lay->value[p];
            t += 2, q++;
        } else {
            int32_t f = PHAX_RECALL_FILLER0 + (int32_t)phax_rng_below(r, PHAX_RECALL_N_FILLERS);
            if (t < cap) out[t] = f;
            t++;
        }
    }
}

static int check_mqar(int n, int pairs, int queries) {
    int min_n;
    if (phax_mqar_min_len(pairs, queries, &min_n)) return PHAX_ERR;
    if (n < min_n || n > PHAX_RECALL_MAX_LEN)
        return phax_fail("mqar: a sample of %d tokens is outside [%d, %d] for %d pairs and %d queries", n,
                         min_n, PHAX_RECALL_MAX_LEN, pairs, queries);
    return PHAX_OK;
}

int phax_mqar_sample(uint64_t seed, int n, int pairs, int queries, int32_t *tokens, phax_mqar_layout *lay) {
    if (!tokens) return phax_fail("phax_mqar_sample: NULL argument");
    if (check_mqar(n, pairs, queries)) return PHAX_ERR;
    phax_rng r = phax_rng_new(seed);
    phax_mqar_layout l;
    draw_mqar(&r, n, pairs, queries, 0, tokens, n, &l);
    if (lay) *lay = l;
    return PHAX_OK;
}

int phax_mqar_train_sample(uint64_t seed, uint64_t index, int pairs, int queries, int vary, int T,
                           int32_t *x, int32_t *y, phax_mqar_layout *lay) {
    if (!x || !y) return phax_fail("phax_mqar_train_sample: NULL argument");
    int min_T;
    if (phax_mqar_min_row(pairs, queries, &min_T)) return PHAX_ERR;
    if (T < min_T || T >= PHAX_RECALL_MAX_LEN)
        return phax_fail("mqar: a training row of %d tokens is outside [%d, %d] for %d pairs and %d "
                         "queries", T, min_T, PHAX_RECALL_MAX_LEN - 1, pairs, queries);
    // The sample has T + 1 tokens; its last (a filler or the last query's
    // value) is only ever a target, so x holds the first T.
    phax_rng r = phax_rng_stream(seed, index);
    int span = 0;  // the whole region
    if (vary) {
        pairs = 1 + (int)phax_rng_below(&r, (uint64_t)pairs);
        int half = (pairs + 1) / 2;  // at most half the pairs asked: elimination stays weak
        queries = queries < half ? queries : half;
        int N = T + 1 - 2 * pairs - queries;
        span = queries + (int)phax_rng_below(&r, (uint64_t)(N - queries + 1));
    }
    phax_mqar_layout l;
    draw_mqar(&r, T + 1, pairs, queries, span, x, T, &l);
    for (int t = 0; t < T; t++) y[t] = -1;
    for (int j = 0; j < queries; j++) y[l.qpos[j]] = l.value[l.qpair[j]];
    if (lay) *lay = l;
    return PHAX_OK;
}
