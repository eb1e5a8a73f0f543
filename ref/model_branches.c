// ref model branches: attention, GSS, SwiGLU, aux and dual FFN, mLSTM, Gated DeltaNet — the
// sub-layers of every family, in float64 on the ref ops (docs/spec.md §3). The
// oracle side of fast/model/model_branches.c, in the same order: read them side by
// side. Every backward takes the branch's input and recomputes its intermediates
// (as the ops do); nothing is kept between calls.
//
// Shapes: n = B·T rows; x, y, dx, dy: (n, d). Backward ADDS into dx and into the
// call's gradients (at each parameter's offset); grads == NULL skips them.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model_internal.h"

// ---------------------------------------------------------------------------
static int block_index(const ref_model *m, int l, const char *suffix) {
    char name[96];
    snprintf(name, sizeof name, "blocks.%d.%s", l, suffix);
    return phax_layout_find(&m->layout, name);
}

const double *rm_param(const ref_model *m, int l, const char *suffix) {
    int i = block_index(m, l, suffix);
    return i < 0 ? NULL : m->params + m->layout.p[i].offset;
}

double *rm_grad(const rm_ctx *cx, int l, const char *suffix) {
    int i = cx->grads ? block_index(cx->m, l, suffix) : -1;
    return i < 0 ? NULL : cx->grads + cx->m->layout.p[i].offset;
}

#define P(suffix) rm_param(cx->m, l, suffix)
#define G(suffix) rm_grad(cx, l, suffix)

// Frees a list of scratch buffers (phax_free ignores NULL).
static void free_all(double **bufs, int count) {
    for (int i = 0; i < count; i++) phax_free(bufs[i]);
}

// ---------------------------------------------------------------------------
// Attention sub-layer: q = x Wqᵀ, k = x Wkᵀ, v = x Wvᵀ, o = attention(q, k, v),
// y = o Woᵀ (GQA, RoPE, score mode and window from the plan's attention config).
// q, o: (n, Hq·dh); k, v: (n, Hkv·dh).
static void attn_proj(const rm_ctx *cx, int l, double *q, double *k, double *v, const double *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    int d = c->d_model;
    size_t qd = (size_t)c->n_heads * c->head_dim, kd = (size_t)c->n_kv_heads * c->head_dim;  // ≤ PHAX_MAX_WIDTH
    ref_linear_fwd(q, x, P("attn.wq.weight"), NULL, cx->n, d, qd);
    ref_linear_fwd(k, x, P("attn.wk.weight"), NULL, cx->n, d, kd);
    ref_linear_fwd(v, x, P("attn.wv.weight"), NULL, cx->n, d, kd);
}

static int attn_fwd(const rm_ctx *cx, int l, double *y, const double *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    size_t n = cx->n;
    int d = c->d_model;
    size_t qd = (size_t)c->n_heads * c->head_dim, kd = (size_t)c->n_kv_heads * c->head_dim;  // ≤ PHAX_MAX_WIDTH
    double *q = rm_alloc(n * qd), *k = rm_alloc(n * kd), *v = rm_alloc(n * kd), *o = rm_alloc(n * qd);
    int rc = PHAX_ERR;
    if (q && k && v && o) {
        phax_attn_cfg a = phax_plan_attn_cfg(c, l, cx->window);
        attn_proj(cx, l, q, k, v, x);
        rc = ref_attention_fwd(o, q, k, v, P("attn.logscale"), cx->B, cx->T, &a);
        if (!rc) ref_linear_fwd(y, o, P("attn.wo.weight"), NULL, n, qd, d);
    }
    phax_free(q), phax_free(k), phax_free(v), phax_free(o);
    return rc;
}

static int attn_bwd(const rm_ctx *cx, int l, double *dx, const double *dy, const double *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    size_t n = cx->n;
    int d = c->d_model;
    size_t qd = (size_t)c->n_heads * c->head_dim, kd = (size_t)c->n_kv_heads * c->head_dim;  // ≤ PHAX_MAX_WIDTH
    double *q = rm_alloc(n * qd), *k = rm_alloc(n * kd), *v = rm_alloc(n * kd), *o = rm_alloc(n * qd);
    double *dq = rm_alloc(n * qd), *dk = rm_alloc(n * kd), *dv = rm_alloc(n * kd), *dO = rm_alloc(n * qd);
    int rc = PHAX_ERR;
    if (q && k && v && o && dq && dk && dv && dO) {
        phax_attn_cfg a = phax_plan_attn_cfg(c, l, cx->window);
        const double *ls = P("attn.logscale");
        attn_proj(cx, l, q, k, v, x);
        if (!(rc = ref_attention_fwd(o, q, k, v, ls, cx->B, cx->T, &a))) {
            ref_linear_bwd(dO, G("attn.wo.weight"), NULL, dy, o, P("attn.wo.weight"), n, qd, d);
            rc = ref_attention_bwd(dq, dk, dv, G("attn.logscale"), dO, q, k, v, ls, cx->B, cx->T, &a);
        }
        if (!rc) {
            ref_linear_bwd(dx, G("attn.wq.weight"), NULL, dq, x, P("attn.wq.weight"), n, d, qd);
            ref_linear_bwd(dx, G("attn.wk.weight"), NULL, dk, x, P("attn.wk.weight"), n, d, kd);
            ref_linear_bwd(dx, G("attn.wv.weight"), NULL, dv, x, P("attn.wv.weight"), n, d, kd);
        }
    }
    phax_free(q), phax_free(k), phax_free(v), phax_free(o);
    phax_free(dq), phax_free(dk), phax_free(dv), phax_free(dO);
    return rc;
}

// ---------------------------------------------------------------------------
// FFNs. Main: SwiGLU (w_gate, w_up, w_down). Aux: y = W4 GELU(W3 x).
static int swiglu_fwd(const rm_ctx *cx, int l, double *y, const double *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    return ref_swiglu_fwd(y, x, P("ffn.w_gate.weight"), P("ffn.w_up.weight"), P("ffn.w_down.weight"),
                          cx->n, c->d_model, c->ffn_hidden);
}

static int swiglu_bwd(const rm_ctx *cx, int l, double *dx, const double *dy, const double *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    return ref_swiglu_bwd(dx, G("ffn.w_gate.weight"), G("ffn.w_up.weight"), G("ffn.w_down.weight"),
                          dy, x, P("ffn.w_gate.weight"), P("ffn.w_up.weight"),
                          P("ffn.w_down.weight"), cx->n, c->d_model, c->ffn_hidden);
}

// hpre = x W3ᵀ: (n, Ha); h = GELU(hpre); y = h W4ᵀ: (n, d).
static int aux_fwd(const rm_ctx *cx, int l, double *y, const double *x) {
    int d = cx->m->cfg.d_model, Ha = cx->m->cfg.ffn_aux_hidden;
    size_t n = cx->n;
    double *hpre = rm_alloc(n * Ha), *h = rm_alloc(n * Ha);
    int rc = PHAX_ERR;
    if (hpre && h) {
        ref_linear_fwd(hpre, x, P("ffn_aux.w3.weight"), NULL, n, d, Ha);
        ref_gelu_fwd(h, hpre, n * Ha);
        ref_linear_fwd(y, h, P("ffn_aux.w4.weight"), NULL, n, Ha, d);
        rc = PHAX_OK;
    }
    phax_free(hpre), phax_free(h);
    return rc;
}

static int aux_bwd(const rm_ctx *cx, int l, double *dx, const double *dy, const double *x) {
    int d = cx->m->cfg.d_model, Ha = cx->m->cfg.ffn_aux_hidden;
    size_t n = cx->n;
    double *hpre = rm_alloc(n * Ha), *h = rm_alloc(n * Ha);
    double *dh = rm_alloc(n * Ha), *dhpre = rm_alloc(n * Ha);
    int rc = PHAX_ERR;
    if (hpre && h && dh && dhpre) {
        const double *W3 = P("ffn_aux.w3.weight"), *W4 = P("ffn_aux.w4.weight");
        ref_linear_fwd(hpre, x, W3, NULL, n, d, Ha);
        ref_gelu_fwd(h, hpre, n * Ha);
        ref_linear_bwd(dh, G("ffn_aux.w4.weight"), NULL, dy, h, W4, n, Ha, d);
        ref_gelu_bwd(dhpre, dh, hpre, n * Ha);
        ref_linear_bwd(dx, G("ffn_aux.w3.weight"), NULL, dhpre, x, W3, n, d, Ha);
        rc = PHAX_OK;
    }
    phax_free(hpre), phax_free(h), phax_free(dh), phax_free(dhpre);
    return rc;
}

// ---------------------------------------------------------------------------
// GSS branch (Mehta et al. 2022; docs/spec.md §3.1), without its own pre-norm and shortcut:
//   xv = x Wvᵀ, v = GELU(xv)            (n, F)
//   xu = x Wuᵀ, u = GELU(xu)            (n, Hs)
//   ū  = LayerNorm(u; ln.weight, ln.bias)   (n, Hs) = (B, T, Hs), channels last
//   K  = dss_kernel(Λ, C)               (Hs, T)
//   ys = ssm_conv(ū, K, D)              (B, T, Hs)
//   yc = ys Wcᵀ                         (n, F)
//   gt = yc ⊙ v                         (n, F)
//   y  = gt Woᵀ                         (n, d)
typedef struct {
    double *xv, *v, *xu, *u, *ub, *K, *ys, *yc, *gt;
} gss_acts;

static void gss_acts_free(gss_acts *a) {
    double *b[] = {a->xv, a->v, a->xu, a->u, a->ub, a->K, a->ys, a->yc, a->gt};
    free_all(b, 9);
    memset(a, 0, sizeof *a);
}

// Computes the intermediates of the GSS branch of block l (and y when non-NULL).
static int gss_forward(const rm_ctx *cx, int l, gss_acts *a, double *y, const double *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    size_t n = cx->n;
    int B = cx->B, T = cx->T;
    int d = c->d_model, F = c->gss_expand, Hs = c->gss_hidden, N = c->gss_state;
    memset(a, 0, sizeof *a);
    a->xv = rm_alloc(n * F), a->v = rm_alloc(n * F), a->xu = rm_alloc(n * Hs);
    a->u = rm_alloc(n * Hs), a->ub = rm_alloc(n * Hs), a->K = rm_alloc((size_t)Hs * T);
    a->ys = rm_alloc(n * Hs), a->yc = rm_alloc(n * F), a->gt = rm_alloc(n * F);
    if (!a->xv || !a->v || !a->xu || !a->u || !a->ub || !a->K || !a->ys || !a->yc || !a->gt) {
        gss_acts_free(a);
        return PHAX_ERR;
    }
    ref_linear_fwd(a->xv, x, P("gss.wv.weight"), NULL, n, d, F);   // xv: (n, F)
    ref_gelu_fwd(a->v, a->xv, n * F);                               // v: (n, F)
    ref_linear_fwd(a->xu, x, P("gss.wu.weight"), NULL, n, d, Hs);  // xu: (n, Hs)
    ref_gelu_fwd(a->u, a->xu, n * Hs);                              // u: (n, Hs)
    ref_layernorm_fwd(a->ub, a->u, P("gss.ln.weight"), P("gss.ln.bias"), n, Hs,
                      PHAX_LAYERNORM_EPS);                          // ū: (B, T, Hs)
    ref_dss_kernel_fwd(a->K, P("gss.lambda_re"), P("gss.lambda_im"), P("gss.c_re"), P("gss.c_im"),
                       Hs, N, T);                                   // K: (Hs, T)
    ref_ssm_conv_fwd(a->ys, a->ub, a->K, P("gss.d"), B, T, Hs);     // ys: (B, T, Hs)
    ref_linear_fwd(a->yc, a->ys, P("gss.wc.weight"), NULL, n, Hs, F);  // yc: (n, F)
    for (size_t i = 0; i < n * F; i++) a->gt[i] = a->yc[i] * a->v[i];  // gt: (n, F)
    if (y) ref_linear_fwd(y, a->gt, P("gss.wo.weight"), NULL, n, F, d);  // y: (n, d)
    return PHAX_OK;
}

static int gss_fwd(const rm_ctx *cx, int l, double *y, const double *x) {
    gss_acts a;
    int rc = gss_forward(cx, l, &a, y, x);
    gss_acts_free(&a);
    return rc;
}

// dx += ∂/∂x, grads += ∂/∂(wv, wu, ln, Λ, C, D, wc, wo), from dy: (n, d).
static int gss_bwd(const rm_ctx *cx, int l, double *dx, const double *dy, const double *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    size_t n = cx->n;
    int B = cx->B, T = cx->T;
    int d = c->d_model, F = c->gss_expand, Hs = c->gss_hidden, N = c->gss_state;
    gss_acts a;
    if (gss_forward(cx, l, &a, NULL, x)) return PHAX_ERR;
    // Gradients of the intermediates, zeroed (every backward op adds).
    double *dgt = rm_alloc(n * F), *dyc = rm_alloc(n * F), *dv = rm_alloc(n * F);
    double *dys = rm_alloc(n * Hs), *dub = rm_alloc(n * Hs), *dK = rm_alloc((size_t)Hs * T);
    double *du = rm_alloc(n * Hs), *dxu = rm_alloc(n * Hs), *dxv = rm_alloc(n * F);
    double *bufs[] = {dgt, dyc, dv, dys, dub, dK, du, dxu, dxv};
    int rc = PHAX_ERR;
    if (dgt && dyc && dv && dys && dub && dK && du && dxu && dxv) {
        // y = gt Woᵀ
        ref_linear_bwd(dgt, G("gss.wo.weight"), NULL, dy, a.gt, P("gss.wo.weight"), n, F, d);
        // gt = yc ⊙ v
        for (size_t i = 0; i < n * F; i++) {
            dyc[i] = dgt[i] * a.v[i];
            dv[i] = dgt[i] * a.yc[i];
        }
        // yc = ys Wcᵀ
        ref_linear_bwd(dys, G("gss.wc.weight"), NULL, dyc, a.ys, P("gss.wc.weight"), n, Hs, F);
        // ys = ssm_conv(ū, K, D); K = dss_kernel(Λ, C)
        ref_ssm_conv_bwd(dub, dK, G("gss.d"), dys, a.ub, a.K, P("gss.d"), B, T, Hs);
        ref_dss_kernel_bwd(G("gss.lambda_re"), G("gss.lambda_im"), G("gss.c_re"), G("gss.c_im"), dK,
                           P("gss.lambda_re"), P("gss.lambda_im"), P("gss.c_re"), P("gss.c_im"), Hs,
                           N, T);
        // ū = LayerNorm(u)
        ref_layernorm_bwd(du, G("gss.ln.weight"), G("gss.ln.bias"), dub, a.u, P("gss.ln.weight"), n,
                          Hs, PHAX_LAYERNORM_EPS);
        // u = GELU(xu), v = GELU(xv)
        ref_gelu_bwd(dxu, du, a.xu, n * Hs);
        ref_gelu_bwd(dxv, dv, a.xv, n * F);
        // xu = x Wuᵀ, xv = x Wvᵀ
        ref_linear_bwd(dx, G("gss.wu.weight"), NULL, dxu, x, P("gss.wu.weight"), n, d, Hs);
        ref_linear_bwd(dx, G("gss.wv.weight"), NULL, dxv, x, P("gss.wv.weight"), n, d, F);
        rc = PHAX_OK;
    }
    free_all(bufs, 9);
    gss_acts_free(&a);
    return rc;
}

// ---------------------------------------------------------------------------
// mLSTM layer (docs/spec.md §3.3) on its normalised input x̄ = x here:
//   q, k = x̄ W_{q,k}ᵀ (n, d/2); v = x̄ W_vᵀ (n, d); o = σ(x̄ W_oᵀ) (n, d)
//   ĩ = cap(x̄ W_iᵀ + b_i), f̃ = cap(x̄ W_fᵀ + b_f) (n, NH), cap(z) = 15 tanh(z/15) (spec §1.4)
//   h̃ = cell(q, k, v, ĩ, f̃) (the PARALLEL form: O(T²) per sequence and head, but the
//   simplest; the recurrent form computes the same function (spec §2.9) and the fast tiers
//   use the chunkwise one)
//   h = o ⊙ headnorm(h̃);  y = h W_outᵀ
#define GATE_CAP PHAX_MLSTM_GATE_CAP  // the contract's constant (phax/ops.h); the formula is ref's own

static double gate_cap(double z) { return GATE_CAP * tanh(z / GATE_CAP); }
static double gate_cap_deriv(double z) {  // d cap / dz = 1 − tanh²(z/15)
    double t = tanh(z / GATE_CAP);
    return 1.0 - t * t;
}

// Activations of one mLSTM layer on x̄: (n, d). One allocation holds them all (zeroed).
typedef struct {
    double *buf;
    double *q, *k;        // (n, d/2) = (B, T, NH, dqk)
    double *v;            // (n, d)   = (B, T, NH, dv)
    double *opre, *o;     // (n, d): x̄ W_oᵀ and the output gate σ(x̄ W_oᵀ)
    double *ipre, *fpre;  // (n, NH): x̄ W_iᵀ + b_i, x̄ W_fᵀ + b_f (before the cap)
    double *ig, *fg;      // (n, NH) = (B, T, NH): ĩ = cap(ipre), f̃ = cap(fpre)
    double *hc;           // (n, d) = (B, T, NH, dv): cell output h̃
    double *hn;           // (n, d): headnorm(h̃)
    double *h;            // (n, d): o ⊙ headnorm(h̃), the input of W_out
} mlstm_acts;

// Forward of the mLSTM layer up to (not including) the out projection.
static int mlstm_acts_fwd(const rm_ctx *cx, int l, mlstm_acts *a, const double *xbar) {
    const phax_model_cfg *c = &cx->m->cfg;
    size_t n = cx->n;
    int d = c->d_model, NH = c->mlstm_heads, dk = d / 2;
    int dqk = dk / NH, dv = d / NH;
    size_t nd = n * (size_t)d, nk = n * (size_t)dk, ng = n * (size_t)NH;

    a->buf = rm_alloc(2 * nk + 6 * nd + 4 * ng);
    if (!a->buf) return PHAX_ERR;
    double *p = a->buf;
    a->q = p, p += nk;
    a->k = p, p += nk;
    a->v = p, p += nd;
    a->opre = p, p += nd;
    a->o = p, p += nd;
    a->ipre = p, p += ng;
    a->fpre = p, p += ng;
    a->ig = p, p += ng;
    a->fg = p, p += ng;
    a->hc = p, p += nd;
    a->hn = p, p += nd;
    a->h = p;

    // Projections of x̄: (n, d).
    ref_linear_fwd(a->q, xbar, P("mlstm.wq.weight"), NULL, n, d, dk);       // (n, d/2)
    ref_linear_fwd(a->k, xbar, P("mlstm.wk.weight"), NULL, n, d, dk);       // (n, d/2)
    ref_linear_fwd(a->v, xbar, P("mlstm.wv.weight"), NULL, n, d, d);        // (n, d)
    ref_linear_fwd(a->opre, xbar, P("mlstm.ogate.weight"), NULL, n, d, d);  // (n, d)
    ref_linear_fwd(a->ipre, xbar, P("mlstm.igate.weight"), P("mlstm.igate.bias"), n, d, NH);  // (n, NH)
    ref_linear_fwd(a->fpre, xbar, P("mlstm.fgate.weight"), P("mlstm.fgate.bias"), n, d, NH);  // (n, NH)
    for (size_t i = 0; i < nd; i++) a->o[i] = ref_sigmoid(a->opre[i]);
    for (size_t i = 0; i < ng; i++) a->ig[i] = gate_cap(a->ipre[i]), a->fg[i] = gate_cap(a->fpre[i]);

    // Cell: (n, NH·dqk) rows are (B, T, NH, dqk) without a copy (spec §1.1).
    if (ref_mlstm_parallel_fwd(a->hc, a->q, a->k, a->v, a->ig, a->fg, cx->B, cx->T, NH, dqk, dv,
                               PHAX_MLSTM_EPS))
        return PHAX_ERR;
    ref_headnorm_fwd(a->hn, a->hc, P("mlstm.headnorm.weight"), n, NH, dv, c->mlstm_norm_eps);
    for (size_t i = 0; i < nd; i++) a->h[i] = a->o[i] * a->hn[i];
    return PHAX_OK;
}

static int mlstm_fwd(const rm_ctx *cx, int l, double *y, const double *xbar) {
    int d = cx->m->cfg.d_model;
    mlstm_acts a = {0};
    int rc = mlstm_acts_fwd(cx, l, &a, xbar);
    if (!rc) ref_linear_fwd(y, a.h, P("mlstm.out.weight"), NULL, cx->n, d, d);
    phax_free(a.buf);
    return rc;
}

// dxbar += ∂/∂x̄ of Σ dy ⊙ y, and the block's mLSTM parameter gradients.
static int mlstm_bwd(const rm_ctx *cx, int l, double *dxbar, const double *dy, const double *xbar) {
    const phax_model_cfg *c = &cx->m->cfg;
    size_t n = cx->n;
    int d = c->d_model, NH = c->mlstm_heads, dk = d / 2;
    int dqk = dk / NH, dv = d / NH;
    size_t nd = n * (size_t)d, nk = n * (size_t)dk, ng = n * (size_t)NH;

    mlstm_acts a = {0};
    double *buf = rm_alloc(2 * nk + 4 * nd + 2 * ng);  // zeroed: the ops below ADD into it
    int rc = PHAX_ERR;
    if (!buf || mlstm_acts_fwd(cx, l, &a, xbar)) goto done;
    double *p = buf;
    double *dq = p; p += nk;   // (n, d/2)
    double *dk_ = p; p += nk;  // (n, d/2)
    double *dv_ = p; p += nd;  // (n, d)
    double *dh = p; p += nd;   // (n, d): gradient of h = o ⊙ hn
    double *dhc = p; p += nd;  // (n, d): gradient of the cell output h̃
    double *dop = p; p += nd;  // (n, d): gradient of opre
    double *dig = p; p += ng;  // (n, NH): gradient of ĩ, then of ipre
    double *dfg = p;           // (n, NH): gradient of f̃, then of fpre

    // y = h W_outᵀ
    ref_linear_bwd(dh, G("mlstm.out.weight"), NULL, dy, a.h, P("mlstm.out.weight"), n, d, d);
    // h = o ⊙ hn, o = σ(opre):  d opre = dh ⊙ hn ⊙ o(1 − o);  d hn = dh ⊙ o (into dh, in place)
    for (size_t i = 0; i < nd; i++) {
        dop[i] = dh[i] * a.hn[i] * a.o[i] * (1.0 - a.o[i]);
        dh[i] = dh[i] * a.o[i];
    }
    // hn = headnorm(h̃)
    ref_headnorm_bwd(dhc, G("mlstm.headnorm.weight"), dh, a.hc, P("mlstm.headnorm.weight"), n, NH,
                     dv, c->mlstm_norm_eps);
    // h̃ = cell(q, k, v, ĩ, f̃)
    if ((rc = ref_mlstm_parallel_bwd(dq, dk_, dv_, dig, dfg, dhc, a.q, a.k, a.v, a.ig, a.fg, cx->B,
                                     cx->T, NH, dqk, dv, PHAX_MLSTM_EPS)))
        goto done;
    // ĩ = cap(ipre), f̃ = cap(fpre)
    for (size_t i = 0; i < ng; i++) {
        dig[i] *= gate_cap_deriv(a.ipre[i]);
        dfg[i] *= gate_cap_deriv(a.fpre[i]);
    }
    // The six projections of x̄, each adding into dxbar.
    ref_linear_bwd(dxbar, G("mlstm.wq.weight"), NULL, dq, xbar, P("mlstm.wq.weight"), n, d, dk);
    ref_linear_bwd(dxbar, G("mlstm.wk.weight"), NULL, dk_, xbar, P("mlstm.wk.weight"), n, d, dk);
    ref_linear_bwd(dxbar, G("mlstm.wv.weight"), NULL, dv_, xbar, P("mlstm.wv.weight"), n, d, d);
    ref_linear_bwd(dxbar, G("mlstm.ogate.weight"), NULL, dop, xbar, P("mlstm.ogate.weight"), n, d, d);
    ref_linear_bwd(dxbar, G("mlstm.igate.weight"), G("mlstm.igate.bias"), dig, xbar,
                   P("mlstm.igate.weight"), n, d, NH);
    ref_linear_bwd(dxbar, G("mlstm.fgate.weight"), G("mlstm.fgate.bias"), dfg, xbar,
                   P("mlstm.fgate.weight"), n, d, NH);
    rc = PHAX_OK;
done:
    phax_free(a.buf);
    phax_free(buf);
    return rc;
}

// ---------------------------------------------------------------------------
// Gated DeltaNet layer (swax_gdn, docs/spec.md §2.13 "The layer"): ref_gdn_layer on the block's
// gdn.* weights; its backward recomputes the layer from x.
static ref_gdn_layer_w gdn_weights(const rm_ctx *cx, int l) {
    return (ref_gdn_layer_w){P("gdn.wq.weight"), P("gdn.wk.weight"),     P("gdn.wv.weight"),
                             P("gdn.conv_q.weight"), P("gdn.conv_k.weight"), P("gdn.conv_v.weight"),
                             P("gdn.wa.weight"),  P("gdn.wb.weight"),     P("gdn.A_log"),
                             P("gdn.dt_bias"),    P("gdn.norm.weight"),   P("gdn.wg.weight"),
                             P("gdn.out.weight")};
}

static int gdn_fwd(const rm_ctx *cx, int l, double *y, const double *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    ref_gdn_layer_w w = gdn_weights(cx, l);
    return ref_gdn_layer_fwd(y, x, &w, cx->B, cx->T, c->d_model, c->gdn_heads, c->gdn_conv, c->gdn_norm_eps);
}

static int gdn_bwd(const rm_ctx *cx, int l, double *dx, const double *dy, const double *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    ref_gdn_layer_w w = gdn_weights(cx, l);
    ref_gdn_layer_g g = {G("gdn.wq.weight"), G("gdn.wk.weight"),     G("gdn.wv.weight"),
                         G("gdn.conv_q.weight"), G("gdn.conv_k.weight"), G("gdn.conv_v.weight"),
                         G("gdn.wa.weight"),  G("gdn.wb.weight"),     G("gdn.A_log"),
                         G("gdn.dt_bias"),    G("gdn.norm.weight"),   G("gdn.wg.weight"),
                         G("gdn.out.weight")};
    return ref_gdn_layer_bwd(dx, &g, dy, x, &w, cx->B, cx->T, c->d_model, c->gdn_heads, c->gdn_conv,
                             c->gdn_norm_eps);
}

// ---------------------------------------------------------------------------
int rm_branch_fwd(const rm_ctx *cx, phax_sub_kind k, int l, double *y, const double *x) {
    switch (k) {
    case PHAX_SUB_GSS: return gss_fwd(cx, l, y, x);
    case PHAX_SUB_ATTN: return attn_fwd(cx, l, y, x);
    case PHAX_SUB_SWIGLU: return swiglu_fwd(cx, l, y, x);
    case PHAX_SUB_AUX: return aux_fwd(cx, l, y, x);
    case PHAX_SUB_MLSTM: return mlstm_fwd(cx, l, y, x);
    case PHAX_SUB_GDN: return gdn_fwd(cx, l, y, x);
    case PHAX_SUB_DUAL: {  // y = SwiGLU(x) + aux(x)
        size_t nd = cx->n * (size_t)cx->m->cfg.d_model;
        double *ya = rm_alloc(nd);
        if (!ya || swiglu_fwd(cx, l, y, x) || aux_fwd(cx, l, ya, x)) {
            phax_free(ya);
            return PHAX_ERR;
        }
        for (size_t i = 0; i < nd; i++) y[i] += ya[i];
        phax_free(ya);
        return PHAX_OK;
    }
    }
    return phax_fail("model: unknown branch kind %d", (int)k);
}

int rm_branch_bwd(const rm_ctx *cx, phax_sub_kind k, int l, double *dx, const double *dy,
                  const double *x) {
    switch (k) {
    case PHAX_SUB_GSS: return gss_bwd(cx, l, dx, dy, x);
    case PHAX_SUB_ATTN: return attn_bwd(cx, l, dx, dy, x);
    case PHAX_SUB_SWIGLU: return swiglu_bwd(cx, l, dx, dy, x);
    case PHAX_SUB_AUX: return aux_bwd(cx, l, dx, dy, x);
    case PHAX_SUB_MLSTM: return mlstm_bwd(cx, l, dx, dy, x);
    case PHAX_SUB_GDN: return gdn_bwd(cx, l, dx, dy, x);
    case PHAX_SUB_DUAL:  // dy reaches both parts unchanged
        if (swiglu_bwd(cx, l, dx, dy, x)) return PHAX_ERR;
        return aux_bwd(cx, l, dx, dy, x);
    }
    return phax_fail("model: unknown branch kind %d", (int)k);
}
