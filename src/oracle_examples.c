// `phax oracle OP --example IN`: a random valid IN for each op (src/oracle_ctx.h).
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "phax/model.h"
#include "phax/model_plan.h"
#include "phax/names.h"
#include "phax/ref.h"
#include "phax/ref_model.h"
#include "phax/safetensors.h"
#include "cmd_args.h"
#include "oracle.h"
#include "oracle_ctx.h"


// --- examples: a random valid input for each op -------------------------------------------------

// One example tensor of ndim dims (the shape in the va_list, ints): its values drawn uniform in
// [lo, hi) as float64 (is_int 0), or below hi as int32 (is_int 1), added to the writer.
static void ex_tensor(exw *e, const char *name, int is_int, double lo, double hi, int ndim, va_list ap) {
    int64_t s[8];
    for (int i = 0; i < ndim; i++) s[i] = va_arg(ap, int);
    size_t n = ox_numel(ndim, s), es = is_int ? sizeof(int32_t) : sizeof(double);
    void *x = n < (size_t)1 << 32 ? malloc((n ? n : 1) * es) : NULL;
    if (!x) {
        e->err = phax_fail("out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (is_int) ((int32_t *)x)[i] = (int32_t)phax_rng_below(e->r, (uint64_t)hi);
        else ((double *)x)[i] = phax_rng_uniform_range(e->r, lo, hi);
    if (is_int ? phax_st_add_i32(e->w, name, x, ndim, s) : phax_st_add_f64(e->w, name, x, ndim, s)) e->err = PHAX_ERR;
    free(x);
}

static void ex_f(exw *e, const char *name, double lo, double hi, int ndim, ...) {
    va_list ap;
    va_start(ap, ndim);
    ex_tensor(e, name, 0, lo, hi, ndim, ap);
    va_end(ap);
}

static void ex_i(exw *e, const char *name, int hi, int ndim, ...) {
    va_list ap;
    va_start(ap, ndim);
    ex_tensor(e, name, 1, 0, hi, ndim, ap);
    va_end(ap);
}

static void ex_meta(exw *e, const char *k, const char *v) {
    if (phax_st_add_meta(e->w, k, v)) e->err = PHAX_ERR;
}

// Sizes are small and awkward on purpose (odd T, GQA group 2, head dims not powers of two).
void ex_embedding(exw *e) { ex_i(e, "tokens", 11, 2, 2, 5), ex_f(e, "weight", -1, 1, 2, 11, 6); }
void ex_linear(exw *e) {
    ex_f(e, "x", -1, 1, 3, 2, 5, 6), ex_f(e, "weight", -0.5, 0.5, 2, 7, 6), ex_f(e, "bias", -1, 1, 1, 7);
}
void ex_rmsnorm(exw *e) { ex_f(e, "x", -2, 2, 3, 2, 5, 6), ex_f(e, "weight", 0.5, 1.5, 1, 6); }
void ex_layernorm(exw *e) { ex_rmsnorm(e), ex_f(e, "bias", -1, 1, 1, 6); }
void ex_headnorm(exw *e) {
    ex_f(e, "x", -2, 2, 3, 2, 5, 6), ex_f(e, "weight", 0.5, 1.5, 1, 6), ex_meta(e, "heads", "2");
}
void ex_act(exw *e) { ex_f(e, "x", -3, 3, 2, 3, 7); }
void ex_swiglu(exw *e) {
    ex_f(e, "x", -1, 1, 3, 2, 5, 6), ex_f(e, "w_gate", -0.4, 0.4, 2, 10, 6),
        ex_f(e, "w_up", -0.4, 0.4, 2, 10, 6), ex_f(e, "w_down", -0.3, 0.3, 2, 6, 10);
}
void ex_rope(exw *e) { ex_f(e, "x", -1, 1, 4, 2, 5, 3, 6), ex_meta(e, "pos0", "3"); }
void ex_attention(exw *e) {
    ex_f(e, "q", -1, 1, 4, 2, 7, 4, 6), ex_f(e, "k", -1, 1, 4, 2, 7, 2, 6), ex_f(e, "v", -1, 1, 4, 2, 7, 2, 5);
    ex_f(e, "logscale", log(5.0), log(20.0), 1, 4);
    ex_meta(e, "score", "cosine"), ex_meta(e, "window", "3"), ex_meta(e, "rope", "1");
}
void ex_dss_kernel(exw *e) {
    ex_f(e, "lambda_re", -2, 0.5, 1, 5), ex_f(e, "lambda_im", -2, 1, 1, 5), ex_f(e, "c_re", -1, 1, 2, 3, 5),
        ex_f(e, "c_im", -1, 1, 2, 3, 5), ex_meta(e, "T", "9");
}
void ex_ssm_conv(exw *e) {
    ex_f(e, "u", -1, 1, 3, 2, 9, 3), ex_f(e, "k", -1, 1, 2, 3, 9), ex_f(e, "d", -1, 1, 1, 3);
}
void ex_ssm_recurrent(exw *e) {
    ex_f(e, "u", -1, 1, 3, 2, 9, 3), ex_f(e, "d", -1, 1, 1, 3), ex_f(e, "lambda_re", -2, 0.5, 1, 5),
        ex_f(e, "lambda_im", -2, 1, 1, 5), ex_f(e, "c_re", -1, 1, 2, 3, 5), ex_f(e, "c_im", -1, 1, 2, 3, 5);
}
void ex_mlstm(exw *e) {
    ex_f(e, "q", -1, 1, 4, 2, 7, 2, 3), ex_f(e, "k", -1, 1, 4, 2, 7, 2, 3), ex_f(e, "v", -1, 1, 4, 2, 7, 2, 5);
    ex_f(e, "igate", -3, 3, 3, 2, 7, 2), ex_f(e, "fgate", 1, 5, 3, 2, 7, 2), ex_meta(e, "form", "parallel");
}
// Gated DeltaNet: dk 6, dv 5, decays e^g in [0.5, 1), beta in (0.1, 0.9), an initial state.
void ex_gdn(exw *e) {
    ex_f(e, "q", -1, 1, 4, 2, 7, 2, 6), ex_f(e, "k", -1, 1, 4, 2, 7, 2, 6), ex_f(e, "v", -1, 1, 4, 2, 7, 2, 5);
    ex_f(e, "g", -0.69, 0, 3, 2, 7, 2), ex_f(e, "beta", 0.1, 0.9, 3, 2, 7, 2);
    ex_f(e, "initial_state", -0.5, 0.5, 4, 2, 2, 6, 5);
}
void ex_mix(exw *e) { ex_f(e, "branches", -1, 1, 3, 3, 5, 6), ex_f(e, "p", -1, 1, 1, 3); }
// The loss is a scalar: training backpropagates 1 into it, so the example gives grad.loss = 1
// (a 0-d tensor) rather than leave the oracle to draw one N(0, 1) (docs/conventions.md).
void ex_cross_entropy(exw *e) {
    ex_f(e, "logits", -3, 3, 3, 2, 5, 11), ex_i(e, "targets", 11, 2, 2, 5);
    double one = 1.0;
    if (!e->err && phax_st_add_f64(e->w, "grad.loss", &one, 0, NULL)) e->err = PHAX_ERR;
}
void ex_adamw(exw *e) {
    ex_f(e, "param", -1, 1, 2, 3, 4), ex_f(e, "gradient", -1, 1, 2, 3, 4), ex_meta(e, "step", "1"),
        ex_meta(e, "lr", "0.001");
}
void ex_model(exw *e) {
    phax_model_cfg cfg = phax_model_cfg_default(PHAX_FAMILY_PHA);
    cfg.vocab_size = 11, cfg.d_model = 12, cfg.n_layers = 2, cfg.n_heads = 2, cfg.n_kv_heads = 1;
    cfg.gss_expand = 10, cfg.gss_hidden = 3, cfg.gss_state = 5, cfg.ffn_hidden = 16;
    ref_model m;
    if (ref_model_new(&m, &cfg, phax_rng_u64(e->r))) {
        e->err = PHAX_ERR;
        return;
    }
    char *json = phax_model_cfg_to_json(&m.cfg);
    if (!json) e->err = PHAX_ERR;
    else ex_meta(e, "config", json);
    free(json);
    for (int i = 0; i < m.layout.n && !e->err; i++) {
        const phax_param_info *p = &m.layout.p[i];
        if (phax_st_add_f64(e->w, p->name, m.params + p->offset, p->ndim, p->shape)) e->err = PHAX_ERR;
    }
    ref_model_free(&m);
    ex_i(e, "tokens", 11, 2, 2, 7), ex_i(e, "targets", 11, 2, 2, 7);
}
