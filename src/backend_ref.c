// The ref backend: the float64 oracle's models (ref_model_*, ref_adamw_step)
// behind phax/backend.h. Its decoder is the naive one (src/backend_naive.c): it keeps the tokens and
// runs the whole-sequence forward over all of them for every set of logits asked
// for (O(length) forwards of O(length) each), which by definition gives the
// logits ref_model_forward gives at each position — what fcpu_decoder_* must match.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend_naive.h"
#include "phax/backend.h"
#include "phax/core.h"
#include "phax/ref.h"
#include "phax/ref_model.h"

typedef struct {
    phax_bmodel base;
    ref_model rm;
    double *mom1, *mom2;   // AdamW moments (layout order)
    ref_adamw_param *ps;   // one per tensor
    double *logits;        // token_losses: (B, T, V) of the last shape
    size_t logits_n;
} ref_bmodel;

static ref_bmodel *rb(phax_bmodel *m) { return (ref_bmodel *)m; }
static const ref_bmodel *crb(const phax_bmodel *m) { return (const ref_bmodel *)m; }

static void model_free(phax_bmodel *m) {
    ref_bmodel *r = rb(m);
    ref_model_free(&r->rm);
    phax_free(r->mom1), phax_free(r->mom2), phax_free(r->logits);
    free(r->ps);
    free(r);
}

static phax_bmodel *model_new(const phax_backend_ops *be, const phax_model_cfg *cfg, uint64_t seed,
                              const float *params) {
    ref_bmodel *r = calloc(1, sizeof *r);
    if (!r) {
        phax_fail("out of memory");
        return NULL;
    }
    if (ref_model_new(&r->rm, cfg, params ? 0 : seed)) {
        free(r);
        return NULL;
    }
    r->base = (phax_bmodel){.be = be, .cfg = &r->rm.cfg, .layout = &r->rm.layout, .inference = params != NULL};
    if (params)  // float64 copies: ref computes in double whatever it is given
        for (size_t i = 0; i < r->rm.layout.numel; i++) r->rm.params[i] = (double)params[i];
    return &r->base;
}

static int forward(phax_bmodel *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                   int window, void *logits, double *loss) {
    return ref_model_forward(&rb(m)->rm, tokens, targets, B, T, window, (double *)logits, loss);
}

// The logits of a forward, then −log softmax at each counted target, in double.
static int token_losses(phax_bmodel *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                        int window, float *losses) {
    ref_bmodel *r = rb(m);
    int V = r->rm.cfg.vocab_size;
    size_t BT = (size_t)B * T, n = BT * (size_t)V;
    if (n > r->logits_n) {
        phax_free(r->logits);
        r->logits_n = 0;
        if (!(r->logits = phax_alloc(n * sizeof(double)))) return PHAX_ERR;
        r->logits_n = n;
    }
    if (ref_model_forward(&r->rm, tokens, NULL, B, T, window, r->logits, NULL)) return PHAX_ERR;
    for (size_t i = 0; i < BT; i++) {
        if (targets[i] < 0) {
            losses[i] = 0;
            continue;
        }
        if (targets[i] >= V) return phax_fail("target %d at %zu: outside [0, %d)", targets[i], i, V);
        const double *l = r->logits + i * (size_t)V;
        double mx = l[0], se = 0;
        for (int j = 1; j < V; j++) mx = l[j] > mx ? l[j] : mx;
        for (int j = 0; j < V; j++) se += exp(l[j] - mx);
        losses[i] = (float)(mx + log(se) - l[targets[i]]);
    }
    return PHAX_OK;
}

static void zero_grad(phax_bmodel *m) { ref_model_zero_grad(&rb(m)->rm); }

static int backward(phax_bmodel *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                    int window, double *loss) {
    return ref_model_backward(&rb(m)->rm, tokens, targets, B, T, window, loss);
}

static int adamw_init(phax_bmodel *m, const unsigned char *decay) {
    ref_bmodel *r = rb(m);
    const phax_layout *L = &r->rm.layout;
    if (r->ps) return phax_fail("AdamW: already set up");
    r->mom1 = phax_alloc(L->numel * sizeof(double)), r->mom2 = phax_alloc(L->numel * sizeof(double));
    r->ps = calloc((size_t)L->n, sizeof *r->ps);
    if (!r->mom1 || !r->mom2 || !r->ps) return phax_fail("out of memory");
    for (int i = 0; i < L->n; i++) {
        size_t off = L->p[i].offset;
        r->ps[i] = (ref_adamw_param){r->rm.params + off, r->rm.grads + off, r->mom1 + off,
                                     r->mom2 + off, L->p[i].numel, decay[i]};
    }
    return PHAX_OK;
}

static int adamw_step(phax_bmodel *m, const phax_adamw_cfg *a, long step, double *gnorm) {
    ref_bmodel *r = rb(m);
    if (!r->ps) return phax_fail("AdamW: phax_bmodel_adamw_init first");
    return ref_adamw_step(r->ps, r->rm.layout.n, a, step, gnorm);
}

static void *grads(phax_bmodel *m, int *on_device) {
    *on_device = 0;
    return rb(m)->rm.grads;
}

static int params_get(const phax_bmodel *m, size_t off, size_t n, phax_dtype dt, void *out) {
    const double *p = crb(m)->rm.params + off;
    if (dt == PHAX_DT_F64) memcpy(out, p, n * sizeof(double));
    else
        for (size_t i = 0; i < n; i++) ((float *)out)[i] = (float)p[i];
    return PHAX_OK;
}

static int params_set(phax_bmodel *m, phax_dtype dt, const void *src) {
    ref_model *r = &rb(m)->rm;
    if (dt == PHAX_DT_F64) memcpy(r->params, src, r->layout.numel * sizeof(double));
    else
        for (size_t i = 0; i < r->layout.numel; i++) r->params[i] = (double)((const float *)src)[i];
    return PHAX_OK;
}

static int moments_get(const phax_bmodel *m, void *mom1, void *mom2) {
    const ref_bmodel *r = crb(m);
    if (!r->ps) return phax_fail("AdamW: phax_bmodel_adamw_init first");
    size_t bytes = r->rm.layout.numel * sizeof(double);
    memcpy(mom1, r->mom1, bytes), memcpy(mom2, r->mom2, bytes);
    return PHAX_OK;
}

static int moments_set(phax_bmodel *m, const void *mom1, const void *mom2) {
    ref_bmodel *r = rb(m);
    if (!r->ps) return phax_fail("AdamW: phax_bmodel_adamw_init first");
    size_t bytes = r->rm.layout.numel * sizeof(double);
    memcpy(r->mom1, mom1, bytes), memcpy(r->mom2, mom2, bytes);
    return PHAX_OK;
}

const phax_backend_ops phax_backend_ref = {
    .name = "ref",
    .summary = "float64 oracle (ref/: scalar, readable, slow; a naive decoder)",
    .dtype = PHAX_DT_F64,
    .model_new = model_new,
    .model_free = model_free,
    .forward = forward,
    .token_losses = token_losses,
    .zero_grad = zero_grad,
    .backward = backward,
    .adamw_init = adamw_init,
    .adamw_step = adamw_step,
    .params_get = params_get,
    .params_set = params_set,
    .moments_get = moments_get,
    .moments_set = moments_set,
    .grads = grads,
    PHAX_NAIVE_DECODER_OPS,
};
