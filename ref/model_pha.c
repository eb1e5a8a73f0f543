// ref models of the PHA family (docs/spec.md §3.1–3.2): the parallel hybrid PHA
// and its two baselines, transformer and serial, in float64.
//
// Every branch / sub-layer has a forward and a backward that takes the forward's
// input and recomputes its intermediates (as the ops do). The runners keep only
// the input of every block (PHA) or sub-layer (baselines) during the forward
// pass; the backward walks them in reverse, recomputing each block's internals.
//
// Shapes: n = B·T rows; x: (n, d) = (B, T, d). Backward functions ADD into dx
// and into grads (at each parameter's offset); grads == NULL skips them.
#include <math.h>
#include <string.h>

#include "model_internal.h"

// Frees a list of scratch buffers (phax_free ignores NULL).
static void free_all(double **bufs, int count) {
    for (int i = 0; i < count; i++) phax_free(bufs[i]);
}

// `count` zeroed activation buffers of nd doubles each, or NULL (error recorded).
static double **acts_new(int count, size_t nd) {
    double **xs = phax_alloc((size_t)count * sizeof *xs);  // zeroed: every entry NULL
    if (!xs) return NULL;
    for (int i = 0; i < count; i++)
        if (!(xs[i] = rm_alloc(nd))) {
            free_all(xs, count);
            phax_free(xs);
            return NULL;
        }
    return xs;
}

static void acts_free(double **xs, int count) {
    if (xs) free_all(xs, count);
    phax_free(xs);
}

// ---------------------------------------------------------------------------
// GSS branch (Mehta et al. 2022), without its own pre-norm and shortcut:
//   xv = x Wvᵀ, v = GELU(xv)            (n, F)
//   xu = x Wuᵀ, u = GELU(xu)            (n, Hs)
//   ū  = LayerNorm(u; ln.weight, ln.bias)   (n, Hs) = (B, T, Hs), channels last
//   K  = dss_kernel(Λ, C)               (Hs, T)
//   ys = ssm_conv(ū, K, D)              (B, T, Hs)
//   yc = ys Wcᵀ                         (n, F)
//   gt = yc ⊙ v                         (n, F)
//   o  = gt Woᵀ                         (n, d)
typedef struct {
    double *xv, *v, *xu, *u, *ub, *K, *ys, *yc, *gt;
} gss_acts;

static void gss_acts_free(gss_acts *a) {
    double *b[] = {a->xv, a->v, a->xu, a->u, a->ub, a->K, a->ys, a->yc, a->gt};
    free_all(b, 9);
    memset(a, 0, sizeof *a);
}

// Computes the intermediates of the GSS branch of block l (and o when non-NULL).
static int gss_forward(gss_acts *a, double *o, const double *x, const ref_model *m, int l, int B,
                       int T) {
    const phax_model_cfg *c = &m->cfg;
    size_t n = (size_t)B * T;
    int d = c->d_model, F = c->gss_expand, Hs = c->gss_hidden, N = c->gss_state;
    memset(a, 0, sizeof *a);
    a->xv = rm_alloc(n * F), a->v = rm_alloc(n * F), a->xu = rm_alloc(n * Hs);
    a->u = rm_alloc(n * Hs), a->ub = rm_alloc(n * Hs), a->K = rm_alloc((size_t)Hs * T);
    a->ys = rm_alloc(n * Hs), a->yc = rm_alloc(n * F), a->gt = rm_alloc(n * F);
    if (!a->xv || !a->v || !a->xu || !a->u || !a->ub || !a->K || !a->ys || !a->yc || !a->gt) {
        gss_acts_free(a);
        return PHAX_ERR;
    }
    ref_linear_fwd(a->xv, x, rm_param(m, l, "gss.wv.weight"), NULL, n, d, F);  // xv: (n, F)
    ref_gelu_fwd(a->v, a->xv, n * F);                                          // v: (n, F)
    ref_linear_fwd(a->xu, x, rm_param(m, l, "gss.wu.weight"), NULL, n, d, Hs); // xu: (n, Hs)
    ref_gelu_fwd(a->u, a->xu, n * Hs);                                         // u: (n, Hs)
    ref_layernorm_fwd(a->ub, a->u, rm_param(m, l, "gss.ln.weight"), rm_param(m, l, "gss.ln.bias"),
                      n, Hs, PHAX_LAYERNORM_EPS);                              // ū: (B, T, Hs)
    ref_dss_kernel_fwd(a->K, rm_param(m, l, "gss.lambda_re"), rm_param(m, l, "gss.lambda_im"),
                       rm_param(m, l, "gss.c_re"), rm_param(m, l, "gss.c_im"), Hs, N, T);  // K: (Hs, T)
    ref_ssm_conv_fwd(a->ys, a->ub, a->K, rm_param(m, l, "gss.d"), B, T, Hs);   // ys: (B, T, Hs)
    ref_linear_fwd(a->yc, a->ys, rm_param(m, l, "gss.wc.weight"), NULL, n, Hs, F);  // yc: (n, F)
    for (size_t i = 0; i < n * F; i++) a->gt[i] = a->yc[i] * a->v[i];         // gt: (n, F)
    if (o) ref_linear_fwd(o, a->gt, rm_param(m, l, "gss.wo.weight"), NULL, n, F, d);  // o: (n, d)
    return PHAX_OK;
}

static int gss_fwd(double *o, const double *x, const ref_model *m, int l, int B, int T) {
    gss_acts a;
    int rc = gss_forward(&a, o, x, m, l, B, T);
    gss_acts_free(&a);
    return rc;
}

// dx += ∂/∂x, grads += ∂/∂(wv, wu, ln, Λ, C, D, wc, wo), from do = dy: (n, d).
static int gss_bwd(double *dx, double *grads, const double *dy, const double *x, const ref_model *m,
                   int l, int B, int T) {
    const phax_model_cfg *c = &m->cfg;
    size_t n = (size_t)B * T;
    int d = c->d_model, F = c->gss_expand, Hs = c->gss_hidden, N = c->gss_state;
    gss_acts a;
    if (gss_forward(&a, NULL, x, m, l, B, T)) return PHAX_ERR;
    // Gradients of the intermediates, zeroed (every backward op adds).
    double *dgt = rm_alloc(n * F), *dyc = rm_alloc(n * F), *dv = rm_alloc(n * F);
    double *dys = rm_alloc(n * Hs), *dub = rm_alloc(n * Hs), *dK = rm_alloc((size_t)Hs * T);
    double *du = rm_alloc(n * Hs), *dxu = rm_alloc(n * Hs), *dxv = rm_alloc(n * F);
    double *bufs[] = {dgt, dyc, dv, dys, dub, dK, du, dxu, dxv};
    int rc = PHAX_ERR;
    if (dgt && dyc && dv && dys && dub && dK && du && dxu && dxv) {
        // o = gt Woᵀ
        ref_linear_bwd(dgt, rm_grad(m, grads, l, "gss.wo.weight"), NULL, dy, a.gt,
                       rm_param(m, l, "gss.wo.weight"), n, F, d);
        // gt = yc ⊙ v
        for (size_t i = 0; i < n * F; i++) {
            dyc[i] = dgt[i] * a.v[i];
            dv[i] = dgt[i] * a.yc[i];
        }
        // yc = ys Wcᵀ
        ref_linear_bwd(dys, rm_grad(m, grads, l, "gss.wc.weight"), NULL, dyc, a.ys,
                       rm_param(m, l, "gss.wc.weight"), n, Hs, F);
        // ys = ssm_conv(ū, K, D); K = dss_kernel(Λ, C)
        ref_ssm_conv_bwd(dub, dK, rm_grad(m, grads, l, "gss.d"), dys, a.ub, a.K,
                         rm_param(m, l, "gss.d"), B, T, Hs);
        ref_dss_kernel_bwd(rm_grad(m, grads, l, "gss.lambda_re"), rm_grad(m, grads, l, "gss.lambda_im"),
                           rm_grad(m, grads, l, "gss.c_re"), rm_grad(m, grads, l, "gss.c_im"), dK,
                           rm_param(m, l, "gss.lambda_re"), rm_param(m, l, "gss.lambda_im"),
                           rm_param(m, l, "gss.c_re"), rm_param(m, l, "gss.c_im"), Hs, N, T);
        // ū = LayerNorm(u)
        ref_layernorm_bwd(du, rm_grad(m, grads, l, "gss.ln.weight"), rm_grad(m, grads, l, "gss.ln.bias"),
                          dub, a.u, rm_param(m, l, "gss.ln.weight"), n, Hs, PHAX_LAYERNORM_EPS);
        // u = GELU(xu), v = GELU(xv)
        ref_gelu_bwd(dxu, du, a.xu, n * Hs);
        ref_gelu_bwd(dxv, dv, a.xv, n * F);
        // xu = x Wuᵀ, xv = x Wvᵀ
        ref_linear_bwd(dx, rm_grad(m, grads, l, "gss.wu.weight"), NULL, dxu, x,
                       rm_param(m, l, "gss.wu.weight"), n, d, Hs);
        ref_linear_bwd(dx, rm_grad(m, grads, l, "gss.wv.weight"), NULL, dxv, x,
                       rm_param(m, l, "gss.wv.weight"), n, d, F);
        rc = PHAX_OK;
    }
    free_all(bufs, 9);
    gss_acts_free(&a);
    return rc;
}

// ---------------------------------------------------------------------------
// FFNs. Main: SwiGLU (w_gate, w_up, w_down). Aux: y = W4 GELU(W3 x).
static int swiglu_fwd(double *y, const double *x, const ref_model *m, int l, size_t n) {
    return ref_swiglu_fwd(y, x, rm_param(m, l, "ffn.w_gate.weight"), rm_param(m, l, "ffn.w_up.weight"),
                          rm_param(m, l, "ffn.w_down.weight"), n, m->cfg.d_model, m->cfg.ffn_hidden);
}

static int swiglu_bwd(double *dx, double *grads, const double *dy, const double *x,
                      const ref_model *m, int l, size_t n) {
    return ref_swiglu_bwd(dx, rm_grad(m, grads, l, "ffn.w_gate.weight"),
                          rm_grad(m, grads, l, "ffn.w_up.weight"), rm_grad(m, grads, l, "ffn.w_down.weight"),
                          dy, x, rm_param(m, l, "ffn.w_gate.weight"), rm_param(m, l, "ffn.w_up.weight"),
                          rm_param(m, l, "ffn.w_down.weight"), n, m->cfg.d_model, m->cfg.ffn_hidden);
}

// hpre = x W3ᵀ: (n, Ha); h = GELU(hpre); y = h W4ᵀ: (n, d).
static int aux_fwd(double *y, const double *x, const ref_model *m, int l, size_t n) {
    int d = m->cfg.d_model, Ha = m->cfg.ffn_aux_hidden;
    double *hpre = rm_alloc(n * Ha), *h = rm_alloc(n * Ha);
    int rc = PHAX_ERR;
    if (hpre && h) {
        ref_linear_fwd(hpre, x, rm_param(m, l, "ffn_aux.w3.weight"), NULL, n, d, Ha);
        ref_gelu_fwd(h, hpre, n * Ha);
        ref_linear_fwd(y, h, rm_param(m, l, "ffn_aux.w4.weight"), NULL, n, Ha, d);
        rc = PHAX_OK;
    }
    phax_free(hpre), phax_free(h);
    return rc;
}

static int aux_bwd(double *dx, double *grads, const double *dy, const double *x, const ref_model *m,
                   int l, size_t n) {
    int d = m->cfg.d_model, Ha = m->cfg.ffn_aux_hidden;
    double *hpre = rm_alloc(n * Ha), *h = rm_alloc(n * Ha);
    double *dh = rm_alloc(n * Ha), *dhpre = rm_alloc(n * Ha);
    int rc = PHAX_ERR;
    if (hpre && h && dh && dhpre) {
        const double *W3 = rm_param(m, l, "ffn_aux.w3.weight"), *W4 = rm_param(m, l, "ffn_aux.w4.weight");
        ref_linear_fwd(hpre, x, W3, NULL, n, d, Ha);
        ref_gelu_fwd(h, hpre, n * Ha);
        ref_linear_bwd(dh, rm_grad(m, grads, l, "ffn_aux.w4.weight"), NULL, dy, h, W4, n, Ha, d);
        ref_gelu_bwd(dhpre, dh, hpre, n * Ha);
        ref_linear_bwd(dx, rm_grad(m, grads, l, "ffn_aux.w3.weight"), NULL, dhpre, x, W3, n, d, Ha);
        rc = PHAX_OK;
    }
    phax_free(hpre), phax_free(h), phax_free(dh), phax_free(dhpre);
    return rc;
}

// ---------------------------------------------------------------------------
// Branches by kind: the unit both PHA (parallel, mixed) and the baselines
// (pre-norm residual sub-layers) are built from. y, x: (n, d).
typedef enum {
    BR_GSS,     // GSS(x)
    BR_ATTN,    // rm_attn (window cfg.attn_window)
    BR_SWIGLU,  // SwiGLU(x)
    BR_AUX,     // W4 GELU(W3 x)
    BR_DUAL,    // SwiGLU(x) + W4 GELU(W3 x)
} branch_kind;

static int branch_fwd(branch_kind k, double *y, const double *x, const ref_model *m, int l, int B,
                      int T) {
    size_t n = (size_t)B * T, nd = n * (size_t)m->cfg.d_model;
    switch (k) {
    case BR_GSS: return gss_fwd(y, x, m, l, B, T);
    case BR_ATTN: return rm_attn_fwd(y, x, m, l, B, T, m->cfg.attn_window);
    case BR_SWIGLU: return swiglu_fwd(y, x, m, l, n);
    case BR_AUX: return aux_fwd(y, x, m, l, n);
    case BR_DUAL: {
        double *ya = rm_alloc(nd);
        if (!ya || swiglu_fwd(y, x, m, l, n) || aux_fwd(ya, x, m, l, n)) {
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

static int branch_bwd(branch_kind k, double *dx, double *grads, const double *dy, const double *x,
                      const ref_model *m, int l, int B, int T) {
    size_t n = (size_t)B * T;
    switch (k) {
    case BR_GSS: return gss_bwd(dx, grads, dy, x, m, l, B, T);
    case BR_ATTN: return rm_attn_bwd(dx, grads, dy, x, m, l, B, T, m->cfg.attn_window);
    case BR_SWIGLU: return swiglu_bwd(dx, grads, dy, x, m, l, n);
    case BR_AUX: return aux_bwd(dx, grads, dy, x, m, l, n);
    case BR_DUAL:  // y = SwiGLU(x) + aux(x): dy reaches both unchanged
        if (swiglu_bwd(dx, grads, dy, x, m, l, n)) return PHAX_ERR;
        return aux_bwd(dx, grads, dy, x, m, l, n);
    }
    return phax_fail("model: unknown branch kind %d", (int)k);
}

// ---------------------------------------------------------------------------
// PHA block l (§3.1). The present branches, in mix order [gss, attn, ffn(, ffn_aux)],
// each RMSNorm-ed with its own norm:
//   r_i = branch_i(x)                    (n, d)
//   b_i = RMSNorm_{norm_i}(r_i)          b: (nb, n·d) stacked
//   mx  = mix(p; b)                      (n, d); p = mix.p, or 0 (equal weights) if frozen
//   z   = α·x + mx,  α = (2L)^{1/4}      (n, d)
//   y   = RMSNorm_{norm_res}(z)          (n, d)
#define PHA_MAX_BRANCHES 4

typedef struct {
    int nb;
    branch_kind kind[PHA_MAX_BRANCHES];
    const char *norm[PHA_MAX_BRANCHES];  // suffix of the branch's output norm
} pha_plan;

static pha_plan pha_branches(const phax_model_cfg *c) {
    pha_plan p = {0};
    if (c->use_gss) p.kind[p.nb] = BR_GSS, p.norm[p.nb++] = "norm_gss.weight";
    if (c->use_attn) p.kind[p.nb] = BR_ATTN, p.norm[p.nb++] = "norm_attn.weight";
    if (c->use_ffn && c->ffn_separate_mix) {
        p.kind[p.nb] = BR_SWIGLU, p.norm[p.nb++] = "norm_ffn.weight";
        p.kind[p.nb] = BR_AUX, p.norm[p.nb++] = "norm_ffn_aux.weight";
    } else if (c->use_ffn) {
        p.kind[p.nb] = BR_DUAL, p.norm[p.nb++] = "norm_ffn.weight";
    }
    return p;
}

static double pha_alpha(const phax_model_cfg *c) { return pow(2.0 * c->n_layers, 0.25); }

// Intermediates of one PHA block: r, b: (nb, n·d); z: (n, d); p: the mix logits used.
typedef struct {
    pha_plan plan;
    double *r, *b, *z;
    double p[PHA_MAX_BRANCHES];
} pha_acts;

static void pha_acts_free(pha_acts *a) {
    phax_free(a->r), phax_free(a->b), phax_free(a->z);
    a->r = a->b = a->z = NULL;
}

// y: (n, d) = block l of x (y may be NULL: only the intermediates).
static int pha_block_forward(pha_acts *a, double *y, const double *x, const ref_model *m, int l,
                             int B, int T) {
    const phax_model_cfg *c = &m->cfg;
    int d = c->d_model;
    size_t n = (size_t)B * T, nd = n * (size_t)d;
    a->plan = pha_branches(c);
    int nb = a->plan.nb;
    a->r = rm_alloc(nb * nd), a->b = rm_alloc(nb * nd), a->z = rm_alloc(nd);
    if (!a->r || !a->b || !a->z) {
        pha_acts_free(a);
        return PHAX_ERR;
    }
    for (int i = 0; i < nb; i++) {
        double *ri = a->r + i * nd, *bi = a->b + i * nd;
        if (branch_fwd(a->plan.kind[i], ri, x, m, l, B, T)) {  // r_i: (n, d)
            pha_acts_free(a);
            return PHAX_ERR;
        }
        ref_rmsnorm_fwd(bi, ri, rm_param(m, l, a->plan.norm[i]), n, d, PHAX_RMSNORM_EPS);  // b_i
    }
    // Frozen mix: p = 0 for every branch, softplus(0)/(nb·softplus(0)) = 1/nb each.
    const double *p = rm_param(m, l, "mix.p");
    for (int i = 0; i < nb; i++) a->p[i] = c->freeze_mix ? 0.0 : p[i];
    ref_mix_fwd(a->z, a->b, a->p, nb, nd);  // z ← mx: (n, d)
    double alpha = pha_alpha(c);
    for (size_t i = 0; i < nd; i++) a->z[i] = alpha * x[i] + a->z[i];  // z = α·x + mx
    if (y) ref_rmsnorm_fwd(y, a->z, rm_param(m, l, "norm_res.weight"), n, d, PHAX_RMSNORM_EPS);
    return PHAX_OK;
}

static int pha_block_fwd(double *y, const double *x, const ref_model *m, int l, int B, int T) {
    pha_acts a;
    int rc = pha_block_forward(&a, y, x, m, l, B, T);
    pha_acts_free(&a);
    return rc;
}

// dx += ∂/∂x, grads += ∂/∂(block l's parameters), from dy: (n, d).
static int pha_block_bwd(double *dx, double *grads, const double *dy, const double *x,
                         const ref_model *m, int l, int B, int T) {
    const phax_model_cfg *c = &m->cfg;
    int d = c->d_model;
    size_t n = (size_t)B * T, nd = n * (size_t)d;
    pha_acts a;
    if (pha_block_forward(&a, NULL, x, m, l, B, T)) return PHAX_ERR;
    int nb = a.plan.nb;
    double *dz = rm_alloc(nd), *db = rm_alloc(nb * nd), *dr = rm_alloc(nd);
    int rc = PHAX_ERR;
    if (dz && db && dr) {
        // y = RMSNorm_res(z)
        ref_rmsnorm_bwd(dz, rm_grad(m, grads, l, "norm_res.weight"), dy, a.z,
                        rm_param(m, l, "norm_res.weight"), n, d, PHAX_RMSNORM_EPS);
        // z = α·x + mx
        double alpha = pha_alpha(c);
        for (size_t i = 0; i < nd; i++) dx[i] += alpha * dz[i];
        // mx = mix(p; b); a frozen mix has no parameter, so no dp.
        double *dp = c->freeze_mix ? NULL : rm_grad(m, grads, l, "mix.p");
        ref_mix_bwd(db, dp, dz, a.b, a.p, nb, nd);
        rc = PHAX_OK;
        for (int i = 0; i < nb && !rc; i++) {
            // b_i = RMSNorm_i(r_i); r_i = branch_i(x)
            memset(dr, 0, nd * sizeof *dr);
            ref_rmsnorm_bwd(dr, rm_grad(m, grads, l, a.plan.norm[i]), db + i * nd, a.r + i * nd,
                            rm_param(m, l, a.plan.norm[i]), n, d, PHAX_RMSNORM_EPS);
            rc = branch_bwd(a.plan.kind[i], dx, grads, dr, x, m, l, B, T);
        }
    }
    phax_free(dz), phax_free(db), phax_free(dr);
    pha_acts_free(&a);
    return rc;
}

// x_1 = RMSNorm_emb(E[tokens]); x_{l+1} = block_l(x_l); logits = x_{L+1} Eᵀ (or lm_head).
static int run_pha(const ref_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                   double *logits, double *loss, double *grads) {
    const phax_model_cfg *c = &m->cfg;
    int d = c->d_model, L = c->n_layers;
    size_t n = (size_t)B * T, nd = n * (size_t)d;
    // xs[0] = E[tokens]; xs[l + 1] = x_{l+1} in the spec's 1-based numbering:
    // xs[1] is the normalised embedding, the input of block 0; xs[L + 1] feeds the head.
    double **xs = acts_new(L + 2, nd);
    double *dx = NULL, *dprev = NULL;
    int rc = PHAX_ERR;
    if (!xs) return PHAX_ERR;
    const double *gemb = rm_top(m, "norm_emb.weight");
    if (rm_embed_fwd(xs[0], m, tokens, n)) goto done;                    // (n, d)
    ref_rmsnorm_fwd(xs[1], xs[0], gemb, n, d, PHAX_RMSNORM_EPS);         // x_1: (n, d)
    for (int l = 0; l < L; l++)
        if (pha_block_fwd(xs[l + 2], xs[l + 1], m, l, B, T)) goto done;  // x_{l+2}
    if (!grads) {
        rc = rm_head(m, NULL, xs[L + 1], NULL, targets, n, logits, loss);
        goto done;
    }
    // Backward of the loss (dloss = 1). dx: gradient w.r.t. the current block output.
    if (!(dx = rm_alloc(nd)) || !(dprev = rm_alloc(nd))) goto done;
    if (rm_head(m, grads, xs[L + 1], dx, targets, n, logits, loss)) goto done;
    for (int l = L - 1; l >= 0; l--) {
        memset(dprev, 0, nd * sizeof *dprev);
        if (pha_block_bwd(dprev, grads, dx, xs[l + 1], m, l, B, T)) goto done;
        double *t = dx;
        dx = dprev, dprev = t;  // dx ← ∂loss/∂x_{l+1}
    }
    memset(dprev, 0, nd * sizeof *dprev);
    ref_rmsnorm_bwd(dprev, rm_top_grad(m, grads, "norm_emb.weight"), dx, xs[0], gemb, n, d,
                    PHAX_RMSNORM_EPS);
    rm_embed_bwd(m, grads, dprev, tokens, n);
    rc = PHAX_OK;
done:
    acts_free(xs, L + 2);
    phax_free(dx), phax_free(dprev);
    return rc;
}

// ---------------------------------------------------------------------------
// Baselines (§3.2): pre-norm residual sub-layers  x ← x + F(RMSNorm_g x).
//   transformer: per layer [attn, SwiGLU]
//   serial:      per layer [GSS, attn, SwiGLU + aux]
// then x_f = RMSNorm_{norm_f}(x) and logits = x_f Eᵀ (or lm_head).
typedef struct {
    branch_kind kind;
    const char *norm;  // suffix of the pre-norm
} sublayer;

static int baseline_sublayers(const phax_model_cfg *c, sublayer *s) {
    if (c->family == PHAX_FAMILY_TRANSFORMER) {
        s[0] = (sublayer){BR_ATTN, "norm_attn.weight"};
        s[1] = (sublayer){BR_SWIGLU, "norm_ffn.weight"};
        return 2;
    }
    s[0] = (sublayer){BR_GSS, "norm_gss.weight"};
    s[1] = (sublayer){BR_ATTN, "norm_attn.weight"};
    s[2] = (sublayer){BR_DUAL, "norm_ffn.weight"};
    return 3;
}

// y = x + F(RMSNorm_g x). h, y, x: (n, d).
static int sublayer_fwd(double *y, const double *x, sublayer s, const ref_model *m, int l, int B,
                        int T) {
    int d = m->cfg.d_model;
    size_t n = (size_t)B * T, nd = n * (size_t)d;
    double *h = rm_alloc(nd), *f = rm_alloc(nd);
    int rc = PHAX_ERR;
    if (h && f) {
        ref_rmsnorm_fwd(h, x, rm_param(m, l, s.norm), n, d, PHAX_RMSNORM_EPS);  // h = RMSNorm x
        if (!(rc = branch_fwd(s.kind, f, h, m, l, B, T)))                       // f = F(h)
            for (size_t i = 0; i < nd; i++) y[i] = x[i] + f[i];
    }
    phax_free(h), phax_free(f);
    return rc;
}

// dx += dy + ∂/∂x of F(RMSNorm x); grads += the sub-layer's parameter gradients.
static int sublayer_bwd(double *dx, double *grads, const double *dy, const double *x, sublayer s,
                        const ref_model *m, int l, int B, int T) {
    int d = m->cfg.d_model;
    size_t n = (size_t)B * T, nd = n * (size_t)d;
    const double *g = rm_param(m, l, s.norm);
    double *h = rm_alloc(nd), *dh = rm_alloc(nd);
    int rc = PHAX_ERR;
    if (h && dh) {
        ref_rmsnorm_fwd(h, x, g, n, d, PHAX_RMSNORM_EPS);
        if (!(rc = branch_bwd(s.kind, dh, grads, dy, h, m, l, B, T))) {
            for (size_t i = 0; i < nd; i++) dx[i] += dy[i];  // the residual path
            ref_rmsnorm_bwd(dx, rm_grad(m, grads, l, s.norm), dh, x, g, n, d, PHAX_RMSNORM_EPS);
        }
    }
    phax_free(h), phax_free(dh);
    return rc;
}

static int run_baseline(const ref_model *m, const int32_t *tokens, const int32_t *targets, int B,
                        int T, double *logits, double *loss, double *grads) {
    const phax_model_cfg *c = &m->cfg;
    int d = c->d_model, L = c->n_layers;
    size_t n = (size_t)B * T, nd = n * (size_t)d;
    sublayer sub[3];
    int S = baseline_sublayers(c, sub);
    int nx = L * S + 1;  // xs[j]: input of sub-layer j (j = l·S + s); xs[L·S]: the last output
    double **xs = acts_new(nx, nd);
    double *xf = NULL, *dx = NULL, *dprev = NULL;
    const double *gf = rm_top(m, "norm_f.weight");
    int rc = PHAX_ERR;
    if (!xs) return PHAX_ERR;
    if (!(xf = rm_alloc(nd))) goto done;
    if (rm_embed_fwd(xs[0], m, tokens, n)) goto done;  // x = E[tokens]: (n, d)
    for (int l = 0; l < L; l++)
        for (int s = 0; s < S; s++)
            if (sublayer_fwd(xs[l * S + s + 1], xs[l * S + s], sub[s], m, l, B, T)) goto done;
    ref_rmsnorm_fwd(xf, xs[nx - 1], gf, n, d, PHAX_RMSNORM_EPS);  // x_f: (n, d)
    if (!grads) {
        rc = rm_head(m, NULL, xf, NULL, targets, n, logits, loss);
        goto done;
    }
    // Backward of the loss (dloss = 1).
    if (!(dx = rm_alloc(nd)) || !(dprev = rm_alloc(nd))) goto done;
    if (rm_head(m, grads, xf, dprev, targets, n, logits, loss)) goto done;  // dprev = ∂/∂x_f
    ref_rmsnorm_bwd(dx, rm_top_grad(m, grads, "norm_f.weight"), dprev, xs[nx - 1], gf, n, d,
                    PHAX_RMSNORM_EPS);
    for (int l = L - 1; l >= 0; l--)
        for (int s = S - 1; s >= 0; s--) {
            memset(dprev, 0, nd * sizeof *dprev);
            if (sublayer_bwd(dprev, grads, dx, xs[l * S + s], sub[s], m, l, B, T)) goto done;
            double *t = dx;
            dx = dprev, dprev = t;  // dx ← ∂loss/∂(input of sub-layer l·S + s)
        }
    rm_embed_bwd(m, grads, dx, tokens, n);
    rc = PHAX_OK;
done:
    acts_free(xs, nx);
    phax_free(xf), phax_free(dx), phax_free(dprev);
    return rc;
}

// ---------------------------------------------------------------------------
int ref_pha_family_run(const ref_model *m, const int32_t *tokens, const int32_t *targets, int B,
                       int T, double *logits, double *loss, double *grads) {
    if (B < 1 || T < 1) return phax_fail("model: batch %d x %d must be at least 1 x 1", B, T);
    switch (m->cfg.family) {
    case PHAX_FAMILY_PHA: return run_pha(m, tokens, targets, B, T, logits, loss, grads);
    case PHAX_FAMILY_TRANSFORMER:
    case PHAX_FAMILY_SERIAL: return run_baseline(m, tokens, targets, B, T, logits, loss, grads);
    default: return phax_fail("model: family %s is not of the PHA family", phax_family_name(m->cfg.family));
    }
}
