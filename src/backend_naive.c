// The naive decoder of phax/backend.h, over any backend's own forward: it keeps the tokens and
// runs the whole-sequence forward over all of them for every set of logits asked for
// (O(length) forwards of O(length) each), which by definition gives the logits the backend's
// forward gives at each position. ref's decoder is this (what fcpu_decoder_* and fast/cuda's
// decoder must match). max_len is not a limit here.
#include "backend_naive.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "phax/core.h"

typedef struct {
    phax_bdecoder base;
    phax_bmodel *m;
    int window;
    int32_t *tok;  // every token stepped so far
    int n, cap;
    void *logits;  // (n, V) of the last forward, in the backend's dtype
    size_t logits_cap;
} naive_decoder;

static naive_decoder *nd(phax_bdecoder *d) { return (naive_decoder *)d; }

phax_bdecoder *phax_naive_decoder_new(phax_bmodel *m, int max_len, int window) {
    if (max_len < 1) {
        phax_fail("decoder: max_len %d < 1", max_len);
        return NULL;
    }
    if (window < -1) {
        phax_fail("decoder: window %d < -1", window);
        return NULL;
    }
    naive_decoder *d = calloc(1, sizeof *d);
    if (!d) {
        phax_fail("out of memory");
        return NULL;
    }
    d->base.be = m->be;
    d->m = m, d->window = window;
    return &d->base;
}

void phax_naive_decoder_free(phax_bdecoder *d) {
    free(nd(d)->tok);
    phax_free(nd(d)->logits);
    free(d);
}

void phax_naive_decoder_reset(phax_bdecoder *d) { nd(d)->n = 0; }

// Append n tokens (all checked first: nothing is appended on an error).
static int append(naive_decoder *d, const int32_t *tokens, int n) {
    int V = d->m->cfg->vocab_size;
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V) return phax_fail("decoder: token %d outside [0, %d)", tokens[i], V);
    if (n > INT32_MAX - d->n) return phax_fail("decoder: too many tokens");
    if (d->n + n > d->cap) {
        int cap = d->cap ? d->cap : 64;
        while (cap < d->n + n) cap = cap > INT32_MAX / 2 ? d->n + n : 2 * cap;
        int32_t *t = realloc(d->tok, (size_t)cap * sizeof *t);
        if (!t) return phax_fail("out of memory");
        d->tok = t, d->cap = cap;
    }
    memcpy(d->tok + d->n, tokens, (size_t)n * sizeof *tokens);
    d->n += n;
    return PHAX_OK;
}

// The forward over every token held: logits (n, V) in d->logits.
static int run_all(naive_decoder *d) {
    size_t es = d->m->be->dtype == PHAX_DT_F64 ? sizeof(double) : sizeof(float);
    size_t need = (size_t)d->n * (size_t)d->m->cfg->vocab_size;
    if (need > d->logits_cap) {
        phax_free(d->logits);
        d->logits_cap = 0;
        if (!(d->logits = phax_alloc(need * es))) return PHAX_ERR;
        d->logits_cap = need;
    }
    return d->m->be->forward(d->m, d->tok, NULL, 1, d->n, d->window, d->logits, NULL);
}

// Rows [first, first + n) of the last forward, as float (rounded from double for ref).
static void rows_out(const naive_decoder *d, int first, int n, float *out) {
    size_t V = (size_t)d->m->cfg->vocab_size, o = (size_t)first * V, k = (size_t)n * V;
    if (d->m->be->dtype == PHAX_DT_F64)
        for (size_t i = 0; i < k; i++) out[i] = (float)((const double *)d->logits)[o + i];
    else
        memcpy(out, (const float *)d->logits + o, k * sizeof *out);
}

static int prefill_rows(phax_bdecoder *dd, const int32_t *tokens, int n, float *logits, int all) {
    naive_decoder *d = nd(dd);
    if (n < 0) return phax_fail("decoder: n %d < 0", n);
    int first = d->n;
    if (append(d, tokens, n)) return PHAX_ERR;
    if (!logits || n == 0) return PHAX_OK;
    if (run_all(d)) {
        d->n = first;  // the state unchanged
        return PHAX_ERR;
    }
    if (all) rows_out(d, first, n, logits);
    else rows_out(d, d->n - 1, 1, logits);
    return PHAX_OK;
}

int phax_naive_decoder_step(phax_bdecoder *d, int32_t token, float *logits) {
    return prefill_rows(d, &token, 1, logits, 0);
}

int phax_naive_decoder_prefill(phax_bdecoder *d, const int32_t *tokens, int n, float *logits) {
    return prefill_rows(d, tokens, n, logits, 0);
}

int phax_naive_decoder_prefill_all(phax_bdecoder *d, const int32_t *tokens, int n, float *logits) {
    return prefill_rows(d, tokens, n, logits, 1);
}

// The state carried from one token to the next: the tokens themselves.
size_t phax_naive_decoder_state_bytes(const phax_bdecoder *d) {
    return (size_t)((const naive_decoder *)d)->n * sizeof(int32_t);
}
