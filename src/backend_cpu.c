// The cpu backend: float32 models and decoders of fast/cpu (fmodel_*,
// fcpu_decoder_*, fcpu_adamw_step) behind phax/backend.h.
#include <stdlib.h>
#include <string.h>

#include "phax/backend.h"
#include "phax/core.h"
#include "phax/fcpu.h"
#include "phax/fcpu_decode.h"
#include "phax/fcpu_gemm.h"
#include "phax/fmodel.h"

typedef struct {
    phax_bmodel base;
    fmodel fm;
    fmodel_ws *ws;       // for calls on (ws_B, ws_T); remade for another shape
    int ws_B, ws_T;
    float *mom1, *mom2;      // AdamW moments (layout order)
    fcpu_adamw_param *ps;    // one per tensor
} cpu_model;

typedef struct {
    phax_bdecoder base;
    fcpu_decoder *d;
} cpu_decoder;

static cpu_model *cm(phax_bmodel *m) { return (cpu_model *)m; }
static const cpu_model *ccm(const phax_bmodel *m) { return (const cpu_model *)m; }

static void model_free(phax_bmodel *m) {
    cpu_model *c = cm(m);
    fmodel_ws_free(c->ws);
    if (m->inference) phax_layout_free(&c->fm.layout);  // the parameters are the caller's
    else fmodel_free(&c->fm);
    phax_free(c->mom1), phax_free(c->mom2);
    free(c->ps);
    free(c);
}

static phax_bmodel *model_new(const phax_backend_ops *be, const phax_model_cfg *cfg, uint64_t seed,
                              const float *params) {
    cpu_model *c = calloc(1, sizeof *c);
    if (!c) {
        phax_fail("out of memory");
        return NULL;
    }
    c->base = (phax_bmodel){.be = be, .cfg = &c->fm.cfg, .layout = &c->fm.layout, .inference = params != NULL};
    if (!params) {
        if (fmodel_new(&c->fm, cfg, seed)) {
            free(c);
            return NULL;
        }
        return &c->base;
    }
    // A view of the caller's parameters: forwards and decoders only read them.
    c->fm.cfg = *cfg;
    if (phax_model_cfg_resolve(&c->fm.cfg) || phax_layout_build(&c->fm.layout, &c->fm.cfg)) {
        free(c);
        return NULL;
    }
    c->fm.params = (float *)params;
    c->fm.grads = NULL;
    return &c->base;
}

// The workspace for (B, T), made on first use of that shape.
static fmodel_ws *ws_for(cpu_model *c, int B, int T) {
    if (c->ws && c->ws_B == B && c->ws_T == T) return c->ws;
    fmodel_ws_free(c->ws);
    c->ws = fmodel_ws_new(&c->fm, B, T);
    c->ws_B = B, c->ws_T = T;
    return c->ws;
}

// The thread's matmul precision for a call on m: bf16 on the cpu_bf16 backend (docs/precision.md),
// float32 otherwise; *prev: what to restore (mm_leave) when the call returns.
static int mm_enter(const phax_bmodel *m, int *prev) {
    *prev = fcpu_mm_precision();
    return fcpu_mm_precision_set(m->be == &phax_backend_cpu_bf16 ? FCPU_MM_BF16 : FCPU_MM_F32);
}
static int mm_leave(int prev, int rc) {
    fcpu_mm_precision_set(prev);
    return rc;
}

static int forward(phax_bmodel *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                   int window, void *logits, double *loss) {
    fmodel_ws *ws = ws_for(cm(m), B, T);
    int prev;
    if (!ws || mm_enter(m, &prev)) return PHAX_ERR;
    return mm_leave(prev, fmodel_forward(&cm(m)->fm, ws, tokens, targets, window, (float *)logits, loss));
}

static int token_losses(phax_bmodel *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                        int window, float *losses) {
    fmodel_ws *ws = ws_for(cm(m), B, T);
    int prev;
    if (!ws || mm_enter(m, &prev)) return PHAX_ERR;
    return mm_leave(prev, fmodel_token_losses(&cm(m)->fm, ws, tokens, targets, window, losses));
}

static void zero_grad(phax_bmodel *m) { fmodel_zero_grad(&cm(m)->fm); }

static int backward(phax_bmodel *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                    int window, double *loss) {
    fmodel_ws *ws = ws_for(cm(m), B, T);
    int prev;
    if (!ws || mm_enter(m, &prev)) return PHAX_ERR;
    return mm_leave(prev, fmodel_backward(&cm(m)->fm, ws, tokens, targets, window, loss));
}

static int adamw_init(phax_bmodel *m, const unsigned char *decay) {
    cpu_model *c = cm(m);
    const phax_layout *L = &c->fm.layout;
    if (c->ps) return phax_fail("AdamW: already set up");
    c->mom1 = phax_alloc(L->numel * sizeof(float)), c->mom2 = phax_alloc(L->numel * sizeof(float));
    c->ps = calloc((size_t)L->n, sizeof *c->ps);
    if (!c->mom1 || !c->mom2 || !c->ps) return phax_fail("out of memory");
    for (int i = 0; i < L->n; i++) {
        size_t off = L->p[i].offset;
        c->ps[i] = (fcpu_adamw_param){c->fm.params + off, c->fm.grads + off, c->mom1 + off,
                                      c->mom2 + off, L->p[i].numel, decay[i]};
    }
    return PHAX_OK;
}

static int adamw_step(phax_bmodel *m, const phax_adamw_cfg *a, long step, double *gnorm) {
    cpu_model *c = cm(m);
    if (!c->ps) return phax_fail("AdamW: phax_bmodel_adamw_init first");
    return fcpu_adamw_step(c->ps, c->fm.layout.n, a, step, gnorm);
}

static int params_get(const phax_bmodel *m, size_t off, size_t n, phax_dtype dt, void *out) {
    const float *p = ccm(m)->fm.params + off;
    if (dt == PHAX_DT_F32) memcpy(out, p, n * sizeof(float));
    else
        for (size_t i = 0; i < n; i++) ((double *)out)[i] = (double)p[i];
    return PHAX_OK;
}

static int params_set(phax_bmodel *m, phax_dtype dt, const void *src) {
    fmodel *f = &cm(m)->fm;
    if (dt == PHAX_DT_F32) memcpy(f->params, src, f->layout.numel * sizeof(float));
    else fmodel_set_params_f64(f, (const double *)src);
    return PHAX_OK;
}

static int moments_get(const phax_bmodel *m, void *mom1, void *mom2) {
    const cpu_model *c = ccm(m);
    if (!c->ps) return phax_fail("AdamW: phax_bmodel_adamw_init first");
    size_t bytes = c->fm.layout.numel * sizeof(float);
    memcpy(mom1, c->mom1, bytes), memcpy(mom2, c->mom2, bytes);
    return PHAX_OK;
}

static int moments_set(phax_bmodel *m, const void *mom1, const void *mom2) {
    cpu_model *c = cm(m);
    if (!c->ps) return phax_fail("AdamW: phax_bmodel_adamw_init first");
    size_t bytes = c->fm.layout.numel * sizeof(float);
    memcpy(c->mom1, mom1, bytes), memcpy(c->mom2, mom2, bytes);
    return PHAX_OK;
}

static void *grads(phax_bmodel *m, int *on_device) {
    *on_device = 0;
    return cm(m)->fm.grads;
}

// --- decoders -------------------------------------------------------------------------------

static fcpu_decoder *cd(phax_bdecoder *d) { return ((cpu_decoder *)d)->d; }

static phax_bdecoder *decoder_new(phax_bmodel *m, int max_len, int window) {
    cpu_decoder *d = calloc(1, sizeof *d);
    if (!d) {
        phax_fail("out of memory");
        return NULL;
    }
    d->base.be = m->be;
    if (!(d->d = fcpu_decoder_new(&cm(m)->fm, max_len, window))) {
        free(d);
        return NULL;
    }
    return &d->base;
}

static void decoder_free(phax_bdecoder *d) {
    fcpu_decoder_free(cd(d));
    free(d);
}

static void decoder_reset(phax_bdecoder *d) { fcpu_decoder_reset(cd(d)); }

static int decoder_step(phax_bdecoder *d, int32_t token, float *logits) {
    return fcpu_decoder_step(cd(d), token, logits);
}

static int decoder_prefill(phax_bdecoder *d, const int32_t *tokens, int n, float *logits) {
    return fcpu_decoder_prefill(cd(d), tokens, n, logits);
}

static int decoder_prefill_all(phax_bdecoder *d, const int32_t *tokens, int n, float *logits) {
    return fcpu_decoder_prefill_all(cd(d), tokens, n, logits);
}

static size_t decoder_state_bytes(const phax_bdecoder *d) {
    return fcpu_decoder_state_bytes(((const cpu_decoder *)d)->d);
}

// The entries the cpu and cpu_bf16 tables share: all but model_new (the model calls set the
// matmul precision from the model's backend: mm_enter).
#define CPU_SHARED_OPS                                \
    .dtype = PHAX_DT_F32, .forward = forward, .token_losses = token_losses, .backward = backward, \
    .model_free = model_free, .zero_grad = zero_grad, .adamw_init = adamw_init, \
    .adamw_step = adamw_step, .params_get = params_get, .params_set = params_set,                     \
    .moments_get = moments_get, .moments_set = moments_set, .grads = grads, .decoder_new = decoder_new, \
    .decoder_free = decoder_free, .decoder_reset = decoder_reset, .decoder_step = decoder_step,       \
    .decoder_prefill = decoder_prefill, .decoder_prefill_all = decoder_prefill_all,                   \
    .decoder_state_bytes = decoder_state_bytes

const phax_backend_ops phax_backend_cpu = {
    .name = "cpu",
    .summary = "float32 fast tier (fast/cpu: OpenBLAS + OpenMP)",
    .model_new = model_new,
    CPU_SHARED_OPS,
};

// --- cpu_bf16: the same models with bf16 matmul operands -------------------------------------
// Forward and backward run with this thread's matmul precision set to bf16 (mm_enter; fcpu_mm: the
// linear layers, the FFN, the output projection; docs/precision.md) and restored on return;
// parameters, gradients, AdamW moments, norms, softmax, the GSS/DSS kernel, the mLSTM and the
// loss stay float32, and so do the decoders (one token at a time: no matmul to speed up).

static phax_bmodel *model_new_bf16(const phax_backend_ops *be, const phax_model_cfg *cfg, uint64_t seed,
                                   const float *params) {
    if (!fcpu_bf16_available()) {
        phax_fail("cpu_bf16: %s", fcpu_bf16_unavailable());
        return NULL;
    }
    return model_new(be, cfg, seed, params);
}

const phax_backend_ops phax_backend_cpu_bf16 = {
    .name = "cpu_bf16",
    .summary = "fast/cpu with bf16 matmul operands, float32 accumulation and state (oneDNN)",
    .model_new = model_new_bf16,
    CPU_SHARED_OPS,
};
