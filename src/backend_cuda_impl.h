// The cuda backend's entries, written once and compiled twice by src/backend_cuda.c: FC(op) is
// fast/cuda's entry (fcuda_op on a device, fcuda_emu_op on the CPU emulation of the CUDA
// model), N(x) this copy's names. Models are fast/cpu's runner over fast/cuda's op table
// (fmodel_new_ops): parameters, gradients, moments and the workspace on the device; the
// batch (tokens, targets) and the outputs (logits, per-token losses) cross by copies.
// The decoder is fast/cuda's (fast/cuda/decode.cu): its state on the device, tokens and logits
// crossing by copies.

typedef struct {
    phax_bmodel base;
    fmodel fm;
    fmodel_ws *ws;  // for calls on (ws_B, ws_T); remade for another shape
    int ws_B, ws_T;
    float *out;         // device: logits or per-token losses of the last call
    size_t out_cap;
    float *mom1, *mom2;       // device AdamW moments (layout order)
    fcuda_adamw_param *ps;    // one per tensor (device pointers)
    void *adam_ws;
} N(model);

static N(model) *N(cm)(phax_bmodel *m) { return (N(model) *)m; }
static void N(dfree)(void *p) {
    if (p) FC(free)(p);
}
static const N(model) *N(ccm)(const phax_bmodel *m) { return (const N(model) *)m; }

// A failing void op of the table since the last check, or rc.
static int N(done)(int rc) {
    int e = FC(ops_error)();
    return rc ? rc : e;
}

static void N(model_free)(phax_bmodel *m) {
    N(model) *c = N(cm)(m);
    fmodel_ws_free(c->ws);
    fmodel_free(&c->fm);  // borrowed parameters were copied to the device: ours to free
    N(dfree)(c->out), N(dfree)(c->mom1), N(dfree)(c->mom2), N(dfree)(c->adam_ws);
    FC(ops_error)();
    free(c->ps);
    free(c);
}

static phax_bmodel *N(model_new)(const phax_backend_ops *be, const phax_model_cfg *cfg, uint64_t seed,
                                 const float *params) {
    N(model) *c = calloc(1, sizeof *c);
    if (!c) {
        phax_fail("out of memory");
        return NULL;
    }
    c->base = (phax_bmodel){.be = be, .cfg = &c->fm.cfg, .layout = &c->fm.layout, .inference = params != NULL};
    if (N(done)(fmodel_new_ops(&c->fm, cfg, seed, FC(f32_ops)()))) {
        free(c);
        return NULL;
    }
    // Borrowed parameters (inference): a device copy, read only from here on.
    if (params && FC(upload)(c->fm.params, params, c->fm.layout.numel * sizeof(float), NULL)) {
        N(model_free)(&c->base);
        return NULL;
    }
    return &c->base;
}

static fmodel_ws *N(ws_for)(N(model) *c, int B, int T) {
    if (c->ws && c->ws_B == B && c->ws_T == T) return c->ws;
    fmodel_ws_free(c->ws);
    c->ws = fmodel_ws_new(&c->fm, B, T);
    c->ws_B = B, c->ws_T = T;
    if (c->ws && FC(ops_error)()) {
        fmodel_ws_free(c->ws);
        c->ws = NULL;
    }
    return c->ws;
}

// The device output buffer for n floats.
static float *N(out_for)(N(model) *c, size_t n) {
    if (c->out && c->out_cap >= n) return c->out;
    N(dfree)(c->out);
    c->out = NULL, c->out_cap = 0;
    void *p = NULL;
    if (FC(malloc)(&p, (n ? n : 1) * sizeof(float))) return NULL;
    c->out = p, c->out_cap = n;
    return c->out;
}

static int N(forward)(phax_bmodel *m, const int32_t *tokens, const int32_t *targets, int B, int T, int window,
                      void *logits, double *loss) {
    N(model) *c = N(cm)(m);
    fmodel_ws *ws = N(ws_for)(c, B, T);
    if (!ws) return PHAX_ERR;
    size_t n = (size_t)B * T * c->fm.cfg.vocab_size;
    float *dl = logits ? N(out_for)(c, n) : NULL;
    if (logits && !dl) return PHAX_ERR;
    if (N(done)(fmodel_forward(&c->fm, ws, tokens, targets, window, dl, loss))) return PHAX_ERR;
    return logits ? FC(download)(logits, dl, n * sizeof(float), NULL) : PHAX_OK;
}

static int N(token_losses)(phax_bmodel *m, const int32_t *tokens, const int32_t *targets, int B, int T, int window,
                           float *losses) {
    N(model) *c = N(cm)(m);
    fmodel_ws *ws = N(ws_for)(c, B, T);
    size_t n = (size_t)B * T;
    float *dr = ws ? N(out_for)(c, n) : NULL;
    if (!dr || N(done)(fmodel_token_losses(&c->fm, ws, tokens, targets, window, dr))) return PHAX_ERR;
    return FC(download)(losses, dr, n * sizeof(float), NULL);
}

static void N(zero_grad)(phax_bmodel *m) { fmodel_zero_grad(&N(cm)(m)->fm); }

static int N(backward)(phax_bmodel *m, const int32_t *tokens, const int32_t *targets, int B, int T, int window,
                       double *loss) {
    N(model) *c = N(cm)(m);
    fmodel_ws *ws = N(ws_for)(c, B, T);
    if (!ws) return PHAX_ERR;
    return N(done)(fmodel_backward(&c->fm, ws, tokens, targets, window, loss));
}

static int N(adamw_init)(phax_bmodel *m, const unsigned char *decay) {
    N(model) *c = N(cm)(m);
    const phax_layout *L = &c->fm.layout;
    if (c->ps) return phax_fail("AdamW: already set up");
    size_t bytes = L->numel * sizeof(float);
    void *a = NULL, *b = NULL, *w = NULL;
    if (FC(malloc)(&a, bytes ? bytes : 1) || FC(malloc)(&b, bytes ? bytes : 1) ||
        FC(malloc)(&w, FC(adamw_ws)(L->n) ? FC(adamw_ws)(L->n) : 1)) {
        N(dfree)(a), N(dfree)(b), N(dfree)(w);
        return PHAX_ERR;
    }
    c->mom1 = a, c->mom2 = b, c->adam_ws = w;
    c->fm.ops->zero(c->mom1, L->numel), c->fm.ops->zero(c->mom2, L->numel);
    if (!(c->ps = calloc((size_t)L->n, sizeof *c->ps))) return phax_fail("out of memory");
    for (int i = 0; i < L->n; i++) {
        size_t off = L->p[i].offset;
        c->ps[i] = (fcuda_adamw_param){c->fm.params + off, c->fm.grads + off, c->mom1 + off, c->mom2 + off,
                                       L->p[i].numel, decay[i]};
    }
    return N(done)(PHAX_OK);
}

static int N(adamw_step)(phax_bmodel *m, const phax_adamw_cfg *a, long step, double *gnorm) {
    N(model) *c = N(cm)(m);
    if (!c->ps) return phax_fail("AdamW: phax_bmodel_adamw_init first");
    return FC(adamw_step)(c->ps, c->fm.layout.n, a, step, gnorm, c->adam_ws, NULL);
}

static int N(params_get)(const phax_bmodel *m, size_t off, size_t n, phax_dtype dt, void *out) {
    const float *p = N(ccm)(m)->fm.params + off;
    if (dt == PHAX_DT_F32) return FC(download)(out, p, n * sizeof(float), NULL);
    float *t = malloc((n ? n : 1) * sizeof *t);
    if (!t) return phax_fail("out of memory");
    int rc = FC(download)(t, p, n * sizeof(float), NULL);
    for (size_t i = 0; !rc && i < n; i++) ((double *)out)[i] = (double)t[i];
    free(t);
    return rc;
}

static int N(params_set)(phax_bmodel *m, phax_dtype dt, const void *src) {
    fmodel *f = &N(cm)(m)->fm;
    if (dt == PHAX_DT_F32) return FC(upload)(f->params, src, f->layout.numel * sizeof(float), NULL);
    fmodel_set_params_f64(f, (const double *)src);
    return N(done)(PHAX_OK);
}

static int N(moments_get)(const phax_bmodel *m, void *mom1, void *mom2) {
    const N(model) *c = N(ccm)(m);
    if (!c->ps) return phax_fail("AdamW: phax_bmodel_adamw_init first");
    size_t bytes = c->fm.layout.numel * sizeof(float);
    return FC(download)(mom1, c->mom1, bytes, NULL) || FC(download)(mom2, c->mom2, bytes, NULL) ? PHAX_ERR : PHAX_OK;
}

static int N(moments_set)(phax_bmodel *m, const void *mom1, const void *mom2) {
    N(model) *c = N(cm)(m);
    if (!c->ps) return phax_fail("AdamW: phax_bmodel_adamw_init first");
    size_t bytes = c->fm.layout.numel * sizeof(float);
    return FC(upload)(c->mom1, mom1, bytes, NULL) || FC(upload)(c->mom2, mom2, bytes, NULL) ? PHAX_ERR : PHAX_OK;
}

// --- decoders: fast/cuda/decode.cu -------------------------------------------------------------
typedef struct {
    phax_bdecoder base;
    fcuda_decoder *d;
} N(decoder);

static fcuda_decoder *N(cd)(phax_bdecoder *d) { return ((N(decoder) *)d)->d; }

static phax_bdecoder *N(decoder_new)(phax_bmodel *m, int max_len, int window) {
    N(decoder) *d = calloc(1, sizeof *d);
    if (!d) {
        phax_fail("out of memory");
        return NULL;
    }
    d->base.be = m->be;
    const fmodel *f = &N(cm)(m)->fm;
    if (!(d->d = FC(decoder_new)(&f->cfg, &f->layout, f->params, max_len, window, FCUDA_PREFILL_CHUNK))) {
        free(d);
        return NULL;
    }
    return &d->base;
}

static void N(decoder_free)(phax_bdecoder *d) {
    FC(decoder_free)(N(cd)(d));
    free(d);
}

// A failed reset leaves the decoder refusing every call with that reason (fcuda_decoder_reset).
// The GSS modes (e^λ, C̃) are formed from the parameters at creation: make a new decoder after
// they change (as for fast/cpu's).
static void N(decoder_reset)(phax_bdecoder *d) { (void)FC(decoder_reset)(N(cd)(d)); }

static int N(decoder_step)(phax_bdecoder *d, int32_t token, float *logits) {
    return FC(decoder_step)(N(cd)(d), token, logits);
}

static int N(decoder_prefill)(phax_bdecoder *d, const int32_t *tokens, int n, float *logits) {
    return FC(decoder_prefill)(N(cd)(d), tokens, n, logits);
}

static int N(decoder_prefill_all)(phax_bdecoder *d, const int32_t *tokens, int n, float *logits) {
    return FC(decoder_prefill_all)(N(cd)(d), tokens, n, logits);
}

static size_t N(decoder_state_bytes)(const phax_bdecoder *d) {
    return FC(decoder_state_bytes)(((const N(decoder) *)d)->d);
}

// The gradient span: device memory in the device copy; the emulator's "device" memory is the
// host's (src/backend_cuda.c defines N_GRADS_ON_DEVICE 0 for it).
#ifndef N_GRADS_ON_DEVICE
#define N_GRADS_ON_DEVICE 1
#endif
static void *N(grads)(phax_bmodel *m, int *on_device) {
    *on_device = N_GRADS_ON_DEVICE;
    return N(cm)(m)->fm.grads;
}

#define N_BACKEND_OPS(nm, sum)                                                                    \
    {                                                                                             \
        .name = nm, .summary = sum, .dtype = PHAX_DT_F32, .model_new = N(model_new),              \
        .model_free = N(model_free), .forward = N(forward), .token_losses = N(token_losses),      \
        .zero_grad = N(zero_grad), .backward = N(backward), .adamw_init = N(adamw_init),          \
        .adamw_step = N(adamw_step), .params_get = N(params_get), .params_set = N(params_set),    \
        .moments_get = N(moments_get), .moments_set = N(moments_set), .grads = N(grads),          \
        .decoder_new = N(decoder_new), .decoder_free = N(decoder_free),                           \
        .decoder_reset = N(decoder_reset), .decoder_step = N(decoder_step),                       \
        .decoder_prefill = N(decoder_prefill), .decoder_prefill_all = N(decoder_prefill_all),     \
        .decoder_state_bytes = N(decoder_state_bytes),                                            \
    }
