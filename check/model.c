// phax check: the whole model (docs/spec.md §3) as a straightforward implementation at
// precision `pr` computes it — forward (logits, mean cross-entropy) and backward (the
// gradient of every parameter) — composed from the op baselines of check/ (linear, the
// norms, GELU, SwiGLU, attention, the DSS kernel and SSM convolution, the mLSTM cell, the
// mix, embedding, cross-entropy) and glue (residual sums, DeepNorm α, gates, products),
// every glue operation rounded too. Not ref, not fast/: the structure (which sub-layers, in
// which order, α, windows) comes from the model plan, the parameters from the layout, both
// tier-neutral (phax/model_plan.h).
//
// The op baselines OVERWRITE their outputs and gradients; here every gradient that meets
// another (a residual stream, a parameter used twice as the tied embedding, the branches of
// one input) is summed explicitly, in the precision. Like ref, the forward keeps only the
// residual stream (each block's or sub-layer's input), and the backward recomputes a
// block's internals from it. An op baseline computes its forward and backward together; a
// forward-only call gets a zero upstream gradient and its gradients are dropped.
//
// Shapes: n = B·T rows; x, y, dx, dy: (n, d) = (B, T, d), channels last.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "phax/check.h"
#include "naive.h"
#include "phax/model_plan.h"

#define R(x) PHAX_CHECK_R(pr, (x))

typedef struct {
    const phax_precision *pr;
    const phax_model_cfg *c;
    const phax_layout *L;
    const double *params;
    double *grads;  // layout order; zeroed first, every contribution added (rounded)
    const int32_t *tok, *tg;
    int B, T, window;  // window: resolved by the plan (0 = full)
    int flash_D;       // attention's backward with FlashAttention's D = rowsum(o ⊙ dO) (phax_naive_attention_alg)
    size_t n;          // B·T
    // Scratch: a stack of allocations, released back to a mark after each step.
    double **al;
    size_t *asz;
    int nal, cap;
    size_t cur, peak;  // doubles held now / at most (phax_naive_model_doubles bounds peak)
    int err;
} nm;

// n zeroed doubles on the scratch stack; NULL (and m->err) when out of memory.
static double *get(nm *m, size_t n) {
    if (m->err) return NULL;
    if (m->nal == m->cap) {
        int cap = m->cap ? 2 * m->cap : 64;
        double **al = realloc(m->al, (size_t)cap * sizeof *al);
        if (al) m->al = al;
        size_t *asz = al ? realloc(m->asz, (size_t)cap * sizeof *asz) : NULL;
        if (asz) m->asz = asz;
        if (!al || !asz) {
            m->err = phax_fail("check: out of memory (model baseline)");
            return NULL;
        }
        m->cap = cap;
    }
    double *p = calloc(n ? n : 1, sizeof *p);
    if (!p) {
        m->err = phax_fail("check: out of memory (model baseline, %zu doubles)", n);
        return NULL;
    }
    m->al[m->nal] = p, m->asz[m->nal++] = n;
    m->cur += n;
    if (m->cur > m->peak) m->peak = m->cur;
    return p;
}

static int mark(const nm *m) { return m->nal; }

static void release(nm *m, int mk) {
    while (m->nal > mk) {
        m->nal--;
        free(m->al[m->nal]);
        m->cur -= m->asz[m->nal];
    }
}

// Parameter of block l by suffix ("attn.wq.weight"), or a top-level one (l < 0); its gradient.
static int pidx(const nm *m, int l, const char *name) {
    char full[128];
    if (l >= 0) snprintf(full, sizeof full, "blocks.%d.%s", l, name);
    return phax_layout_find(m->L, l >= 0 ? full : name);
}
static const double *par(const nm *m, int l, const char *name) {
    int i = name ? pidx(m, l, name) : -1;
    return i < 0 ? NULL : m->params + m->L->p[i].offset;
}

// dst += src over n, each sum rounded.
static void acc(const phax_precision *pr, double *dst, const double *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = R(dst[i] + src[i]);
}

// The parameter's gradient += src (its whole size).
static void gacc(nm *m, int l, const char *name, const double *src) {
    int i = pidx(m, l, name);
    if (i >= 0) acc(m->pr, m->grads + m->L->p[i].offset, src, m->L->p[i].numel);
}

// y (n, out) = x Wᵀ (+ b), W (out, in) the parameter `w` of block l. gy NULL: the forward
// (y written). gy given: the backward — dx (n, in) += gy W (when dx is given) and the
// gradients of W (and b) += — with y recomputed into scratch when NULL.
static int lin(nm *m, int l, const char *w, const char *b, double *y, double *dx, const double *gy,
               const double *x, int in, int out) {
    int mk = mark(m);
    size_t n = m->n;
    double *ys = y ? y : get(m, n * (size_t)out), *dxs = get(m, n * (size_t)in);
    double *dW = get(m, (size_t)out * in), *db = b ? get(m, (size_t)out) : NULL;
    const double *g = gy ? gy : get(m, n * (size_t)out);
    if (m->err) return PHAX_ERR;
    phax_naive_linear(m->pr, ys, dxs, dW, db, g, x, par(m, l, w), par(m, l, b), n, in, out);
    if (gy) {
        if (dx) acc(m->pr, dx, dxs, n * (size_t)in);
        gacc(m, l, w, dW);
        if (b) gacc(m, l, b, db);
    }
    release(m, mk);
    return PHAX_OK;
}

// rms (layer 0) or layer norm (1) over groups of w channels, weight `g` (bias `b`) of block l,
// on (n, d). gy NULL: y written. gy given: dx (n, d) OVERWRITTEN with the input's gradient,
// the weight's (and bias') gradient +=.
static int norm(nm *m, int layer, int l, const char *g, const char *b, double *y, double *dx, const double *gy,
                const double *x, int d, int w, double eps) {
    int mk = mark(m);
    size_t n = m->n;
    double *ys = y ? y : get(m, n * (size_t)d), *dxs = dx ? dx : get(m, n * (size_t)d);
    double *dg = get(m, (size_t)d), *db = b ? get(m, (size_t)d) : NULL;
    const double *gg = gy ? gy : get(m, n * (size_t)d);
    if (m->err) return PHAX_ERR;
    phax_naive_norm(m->pr, layer, ys, dxs, dg, db, gg, x, par(m, l, g), par(m, l, b), n, d, w, eps);
    if (gy) {
        gacc(m, l, g, dg);
        if (b) gacc(m, l, b, db);
    }
    release(m, mk);
    return PHAX_OK;
}

// RMSNorm (eps PHAX_RMSNORM_EPS) over d_model: every residual, branch and final norm.
static int rms(nm *m, int l, const char *g, double *y, double *dx, const double *gy, const double *x) {
    return norm(m, 0, l, g, NULL, y, dx, gy, x, m->c->d_model, m->c->d_model, PHAX_RMSNORM_EPS);
}

// GELU over count elements: y = GELU(x) (gy NULL), or dx = GELU'(x) ⊙ gy (overwritten).
static int gelu(nm *m, double *y, double *dx, const double *gy, const double *x, size_t count) {
    int mk = mark(m);
    double *ys = y ? y : get(m, count), *dxs = dx ? dx : get(m, count);
    const double *g = gy ? gy : get(m, count);
    if (m->err) return PHAX_ERR;
    phax_naive_act(m->pr, 0, ys, dxs, g, x, count);
    release(m, mk);
    return PHAX_OK;
}

// --- the sub-layers ----------------------------------------------------------------------------
// Each: dy NULL — y (n, d) = F(x); dy given — dx (n, d) += ∂/∂x of Σ dy ⊙ F(x) and the
// sub-layer's parameter gradients +=, its internals recomputed from x.

// Attention: q, k, v = x W{q,k,v}ᵀ; o = attention(q, k, v) (the plan's config and window);
// y = o Woᵀ. q, o: (n, Hq·dh); k, v: (n, Hkv·dh).
static int attn(nm *m, int l, const double *x, double *y, const double *dy, double *dx) {
    const phax_model_cfg *c = m->c;
    int d = c->d_model, qd = c->n_heads * c->head_dim, kd = c->n_kv_heads * c->head_dim, mk = mark(m);
    size_t n = m->n;
    double *q = get(m, n * qd), *k = get(m, n * kd), *v = get(m, n * kd), *o = get(m, n * qd);
    double *dq = get(m, n * qd), *dk = get(m, n * kd), *dv = get(m, n * kd), *dO = get(m, n * qd);
    double *dl = get(m, (size_t)c->n_heads);
    if (m->err) return PHAX_ERR;
    phax_attn_cfg a = phax_plan_attn_cfg(c, l, m->window);
    const double *ls = c->score_cosine ? par(m, l, "attn.logscale") : NULL;
    if (lin(m, l, "attn.wq.weight", NULL, q, NULL, NULL, x, d, qd) ||
        lin(m, l, "attn.wk.weight", NULL, k, NULL, NULL, x, d, kd) ||
        lin(m, l, "attn.wv.weight", NULL, v, NULL, NULL, x, d, kd))
        return PHAX_ERR;
    // o (the upstream gradient dO is still zero: a forward)
    if (phax_naive_attention_alg(m->pr, o, dq, dk, dv, ls ? dl : NULL, dO, q, k, v, ls, m->B, m->T, &a, m->flash_D))
        return PHAX_ERR;
    if (!dy) {
        if (lin(m, l, "attn.wo.weight", NULL, y, NULL, NULL, o, qd, d)) return PHAX_ERR;
        release(m, mk);
        return PHAX_OK;
    }
    if (lin(m, l, "attn.wo.weight", NULL, NULL, dO, dy, o, qd, d)) return PHAX_ERR;  // dO = dy Wo
    if (phax_naive_attention_alg(m->pr, o, dq, dk, dv, ls ? dl : NULL, dO, q, k, v, ls, m->B, m->T, &a, m->flash_D))
        return PHAX_ERR;
    if (ls) gacc(m, l, "attn.logscale", dl);
    if (lin(m, l, "attn.wq.weight", NULL, NULL, dx, dq, x, d, qd) ||
        lin(m, l, "attn.wk.weight", NULL, NULL, dx, dk, x, d, kd) ||
        lin(m, l, "attn.wv.weight", NULL, NULL, dx, dv, x, d, kd))
        return PHAX_ERR;
    release(m, mk);
    return PHAX_OK;
}

// SwiGLU: y = (SiLU(x Wgᵀ) ⊙ x Wuᵀ) Wdᵀ, one call of its baseline (forward and backward).
static int swiglu(nm *m, int l, const double *x, double *y, const double *dy, double *dx) {
    int d = m->c->d_model, hid = m->c->ffn_hidden, mk = mark(m);
    size_t nd = m->n * (size_t)d;
    double *ys = y ? y : get(m, nd), *dxs = get(m, nd), *dWg = get(m, (size_t)hid * d), *dWu = get(m, (size_t)hid * d),
           *dWd = get(m, (size_t)hid * d);
    const double *g = dy ? dy : get(m, nd);
    if (m->err) return PHAX_ERR;
    if (phax_naive_swiglu(m->pr, ys, dxs, dWg, dWu, dWd, g, x, par(m, l, "ffn.w_gate.weight"),
                          par(m, l, "ffn.w_up.weight"), par(m, l, "ffn.w_down.weight"), m->n, d, hid))
        return PHAX_ERR;
    if (dy) {
        acc(m->pr, dx, dxs, nd);
        gacc(m, l, "ffn.w_gate.weight", dWg);
        gacc(m, l, "ffn.w_up.weight", dWu);
        gacc(m, l, "ffn.w_down.weight", dWd);
    }
    release(m, mk);
    return PHAX_OK;
}

// Aux FFN: hpre = x W3ᵀ (n, Ha); h = GELU(hpre); y = h W4ᵀ.
static int aux(nm *m, int l, const double *x, double *y, const double *dy, double *dx) {
    int d = m->c->d_model, Ha = m->c->ffn_aux_hidden, mk = mark(m);
    size_t nh = m->n * (size_t)Ha;
    double *hpre = get(m, nh), *h = get(m, nh), *dh = get(m, nh), *dhpre = get(m, nh);
    if (m->err || lin(m, l, "ffn_aux.w3.weight", NULL, hpre, NULL, NULL, x, d, Ha) || gelu(m, h, NULL, NULL, hpre, nh))
        return PHAX_ERR;
    if (!dy) {
        if (lin(m, l, "ffn_aux.w4.weight", NULL, y, NULL, NULL, h, Ha, d)) return PHAX_ERR;
    } else if (lin(m, l, "ffn_aux.w4.weight", NULL, NULL, dh, dy, h, Ha, d) || gelu(m, NULL, dhpre, dh, hpre, nh) ||
               lin(m, l, "ffn_aux.w3.weight", NULL, NULL, dx, dhpre, x, d, Ha)) {
        return PHAX_ERR;
    }
    release(m, mk);
    return PHAX_OK;
}

// GSS (docs/spec.md §3.1): v = GELU(x Wvᵀ) (n, F); u = GELU(x Wuᵀ) (n, Hs); ū = LayerNorm(u);
// K = dss_kernel(Λ, C) (Hs, T); ys = ssm_conv(ū, K, D) (B, T, Hs); yc = ys Wcᵀ (n, F);
// gt = yc ⊙ v; y = gt Woᵀ.
static int gss(nm *m, int l, const double *x, double *y, const double *dy, double *dx) {
    const phax_model_cfg *c = m->c;
    const phax_precision *pr = m->pr;
    int d = c->d_model, F = c->gss_expand, Hs = c->gss_hidden, N = c->gss_state, T = m->T, mk = mark(m);
    size_t n = m->n, nf = n * (size_t)F, nh = n * (size_t)Hs, kn = (size_t)Hs * T, cn = (size_t)Hs * N;
    double *xv = get(m, nf), *v = get(m, nf), *xu = get(m, nh), *u = get(m, nh), *ub = get(m, nh);
    double *K = get(m, kn), *ys = get(m, nh), *yc = get(m, nf), *gt = get(m, nf);
    // Gradients (and the zero upstream gradients of the forward-only calls).
    double *dgt = get(m, nf), *dyc = get(m, nf), *dv = get(m, nf), *dys = get(m, nh), *dub = get(m, nh);
    double *dK = get(m, kn), *dD = get(m, (size_t)Hs), *du = get(m, nh), *dxu = get(m, nh), *dxv = get(m, nf);
    double *dLr = get(m, (size_t)N), *dLi = get(m, (size_t)N), *dCr = get(m, cn), *dCi = get(m, cn);
    if (m->err) return PHAX_ERR;
    const double *Lr = par(m, l, "gss.lambda_re"), *Li = par(m, l, "gss.lambda_im"), *Cr = par(m, l, "gss.c_re"),
                 *Ci = par(m, l, "gss.c_im"), *D = par(m, l, "gss.d");
    if (lin(m, l, "gss.wv.weight", NULL, xv, NULL, NULL, x, d, F) || gelu(m, v, NULL, NULL, xv, nf) ||
        lin(m, l, "gss.wu.weight", NULL, xu, NULL, NULL, x, d, Hs) || gelu(m, u, NULL, NULL, xu, nh) ||
        norm(m, 1, l, "gss.ln.weight", "gss.ln.bias", ub, NULL, NULL, u, Hs, Hs, PHAX_LAYERNORM_EPS))
        return PHAX_ERR;
    // K and ys with zero upstream gradients (dK, dys are still zero): forwards.
    phax_naive_dss_kernel(pr, K, dLr, dLi, dCr, dCi, dK, Lr, Li, Cr, Ci, Hs, N, T);
    phax_naive_ssm_conv(pr, ys, dub, dK, dD, dys, ub, K, D, m->B, T, Hs);
    if (lin(m, l, "gss.wc.weight", NULL, yc, NULL, NULL, ys, Hs, F)) return PHAX_ERR;
    for (size_t i = 0; i < nf; i++) gt[i] = R(yc[i] * v[i]);
    if (!dy) {
        if (lin(m, l, "gss.wo.weight", NULL, y, NULL, NULL, gt, F, d)) return PHAX_ERR;
        release(m, mk);
        return PHAX_OK;
    }
    if (lin(m, l, "gss.wo.weight", NULL, NULL, dgt, dy, gt, F, d)) return PHAX_ERR;  // y = gt Woᵀ
    for (size_t i = 0; i < nf; i++) dyc[i] = R(dgt[i] * v[i]), dv[i] = R(dgt[i] * yc[i]);  // gt = yc ⊙ v
    if (lin(m, l, "gss.wc.weight", NULL, NULL, dys, dyc, ys, Hs, F)) return PHAX_ERR;  // yc = ys Wcᵀ
    phax_naive_ssm_conv(pr, ys, dub, dK, dD, dys, ub, K, D, m->B, T, Hs);
    gacc(m, l, "gss.d", dD);
    phax_naive_dss_kernel(pr, K, dLr, dLi, dCr, dCi, dK, Lr, Li, Cr, Ci, Hs, N, T);
    gacc(m, l, "gss.lambda_re", dLr), gacc(m, l, "gss.lambda_im", dLi);
    gacc(m, l, "gss.c_re", dCr), gacc(m, l, "gss.c_im", dCi);
    if (norm(m, 1, l, "gss.ln.weight", "gss.ln.bias", NULL, du, dub, u, Hs, Hs, PHAX_LAYERNORM_EPS) ||
        gelu(m, NULL, dxu, du, xu, nh) || gelu(m, NULL, dxv, dv, xv, nf) ||
        lin(m, l, "gss.wu.weight", NULL, NULL, dx, dxu, x, d, Hs) ||
        lin(m, l, "gss.wv.weight", NULL, NULL, dx, dxv, x, d, F))
        return PHAX_ERR;
    release(m, mk);
    return PHAX_OK;
}


// The gate cap of docs/spec.md §1.4, 15·tanh(z/15), and its derivative 1 − tanh²(z/15).
static double cap(const phax_precision *pr, double z) {
    return R(PHAX_MLSTM_GATE_CAP * R(tanh(R(R(z) / PHAX_MLSTM_GATE_CAP))));
}
static double cap_d(const phax_precision *pr, double z) {
    double t = R(tanh(R(R(z) / PHAX_MLSTM_GATE_CAP)));
    return R(1 - R(t * t));
}

// mLSTM layer (docs/spec.md §3.3): q, k = x W{q,k}ᵀ (n, d/2); v = x Wvᵀ; o = σ(x Woᵀ) (n, d);
// ĩ, f̃ = cap(x W{i,f}ᵀ + b) (n, NH); h̃ = cell(q, k, v, ĩ, f̃) (parallel form); h = o ⊙ headnorm(h̃);
// y = h W_outᵀ.
static int mlstm(nm *m, int l, const double *x, double *y, const double *dy, double *dx) {
    const phax_model_cfg *c = m->c;
    const phax_precision *pr = m->pr;
    int d = c->d_model, NH = c->mlstm_heads, dk = d / 2, dqk = dk / NH, dvh = d / NH, mk = mark(m);
    size_t n = m->n, nd = n * (size_t)d, nk = n * (size_t)dk, ng = n * (size_t)NH;
    double *q = get(m, nk), *k = get(m, nk), *v = get(m, nd), *opre = get(m, nd), *o = get(m, nd);
    double *ipre = get(m, ng), *fpre = get(m, ng), *ig = get(m, ng), *fg = get(m, ng);
    double *hc = get(m, nd), *hn = get(m, nd), *h = get(m, nd);
    double *dq = get(m, nk), *dkk = get(m, nk), *dv = get(m, nd), *dh = get(m, nd), *dhc = get(m, nd),
           *dop = get(m, nd), *dig = get(m, ng), *dfg = get(m, ng);
    if (m->err) return PHAX_ERR;
    if (lin(m, l, "mlstm.wq.weight", NULL, q, NULL, NULL, x, d, dk) ||
        lin(m, l, "mlstm.wk.weight", NULL, k, NULL, NULL, x, d, dk) ||
        lin(m, l, "mlstm.wv.weight", NULL, v, NULL, NULL, x, d, d) ||
        lin(m, l, "mlstm.ogate.weight", NULL, opre, NULL, NULL, x, d, d) ||
        lin(m, l, "mlstm.igate.weight", "mlstm.igate.bias", ipre, NULL, NULL, x, d, NH) ||
        lin(m, l, "mlstm.fgate.weight", "mlstm.fgate.bias", fpre, NULL, NULL, x, d, NH))
        return PHAX_ERR;
    for (size_t i = 0; i < nd; i++) o[i] = R(sigm(opre[i]));
    for (size_t i = 0; i < ng; i++) ig[i] = cap(pr, ipre[i]), fg[i] = cap(pr, fpre[i]);
    // The cell with a zero upstream gradient (dhc is still zero): a forward.
    if (phax_naive_mlstm(pr, hc, dq, dkk, dv, dig, dfg, dhc, q, k, v, ig, fg, m->B, m->T, NH, dqk, dvh,
                         PHAX_MLSTM_EPS) ||
        norm(m, 1, l, "mlstm.headnorm.weight", NULL, hn, NULL, NULL, hc, d, dvh, c->mlstm_norm_eps))
        return PHAX_ERR;
    for (size_t i = 0; i < nd; i++) h[i] = R(o[i] * hn[i]);
    if (!dy) {
        if (lin(m, l, "mlstm.out.weight", NULL, y, NULL, NULL, h, d, d)) return PHAX_ERR;
        release(m, mk);
        return PHAX_OK;
    }
    if (lin(m, l, "mlstm.out.weight", NULL, NULL, dh, dy, h, d, d)) return PHAX_ERR;  // y = h W_outᵀ
    // h = o ⊙ hn, o = σ(opre): d opre = dh ⊙ hn ⊙ o(1 − o); d hn = dh ⊙ o (into dh)
    for (size_t i = 0; i < nd; i++) {
        dop[i] = R(R(R(dh[i] * hn[i]) * o[i]) * R(1 - o[i]));
        dh[i] = R(dh[i] * o[i]);
    }
    if (norm(m, 1, l, "mlstm.headnorm.weight", NULL, NULL, dhc, dh, hc, d, dvh, c->mlstm_norm_eps) ||
        phax_naive_mlstm(pr, hc, dq, dkk, dv, dig, dfg, dhc, q, k, v, ig, fg, m->B, m->T, NH, dqk, dvh,
                         PHAX_MLSTM_EPS))
        return PHAX_ERR;
    for (size_t i = 0; i < ng; i++) dig[i] = R(dig[i] * cap_d(pr, ipre[i])), dfg[i] = R(dfg[i] * cap_d(pr, fpre[i]));
    if (lin(m, l, "mlstm.wq.weight", NULL, NULL, dx, dq, x, d, dk) ||
        lin(m, l, "mlstm.wk.weight", NULL, NULL, dx, dkk, x, d, dk) ||
        lin(m, l, "mlstm.wv.weight", NULL, NULL, dx, dv, x, d, d) ||
        lin(m, l, "mlstm.ogate.weight", NULL, NULL, dx, dop, x, d, d) ||
        lin(m, l, "mlstm.igate.weight", "mlstm.igate.bias", NULL, dx, dig, x, d, NH) ||
        lin(m, l, "mlstm.fgate.weight", "mlstm.fgate.bias", NULL, dx, dfg, x, d, NH))
        return PHAX_ERR;
    release(m, mk);
    return PHAX_OK;
}

// Gated DeltaNet layer (swax_gdn; docs/spec.md §2.13 "The layer"): the projections, the short
// convolutions with SiLU, the gates, the cell — the recurrent form, or with flash_D (the second
// baseline) the chunkwise form at PHAX_GDN_CHECK_CHUNK, so the bound covers both, as phax check
// gdn's — the RMSNorm over each head's dv (one weight for all heads) ⊙ SiLU(z), the output
// projection; the backward recomputes the forward (no upstream gradient into the cell there).
static int gdn(nm *m, int l, const double *x, double *y, const double *dy, double *dx) {
    const phax_model_cfg *c = m->c;
    const phax_precision *pr = m->pr;
    const int d = c->d_model, GH = c->gdn_heads, K = c->gdn_conv, dq = d / 2, dk = dq / GH, dv = d / GH, mk = mark(m);
    const int chunk = m->flash_D ? PHAX_GDN_CHECK_CHUNK : 0;
    const phax_gdn_cfg cc = {1 / sqrt((double)dk), 1};
    const size_t n = m->n, nd = n * (size_t)d, nk = n * (size_t)dq, ng = n * (size_t)GH;
    double *qp = get(m, nk), *kp = get(m, nk), *vp = get(m, nd), *z = get(m, nd), *a = get(m, ng), *b = get(m, ng);
    double *q = get(m, nk), *k = get(m, nk), *v = get(m, nd), *g = get(m, ng), *beta = get(m, ng);
    double *o = get(m, nd), *on = get(m, nd), *sz = get(m, nd), *h = get(m, nd);
    double *dq_ = get(m, nk), *dk_ = get(m, nk), *dv_ = get(m, nd), *dg = get(m, ng), *dbeta = get(m, ng);
    double *go = get(m, nd), *dh = get(m, nd), *dz = get(m, nd), *dsz = get(m, nd), *dp = get(m, nd);
    double *da = get(m, ng), *db = get(m, ng), *dw = get(m, (size_t)d * K), *dnorm = get(m, (size_t)dv);
    double *dA = get(m, (size_t)GH), *ddt = get(m, (size_t)GH), *dzero = get(m, nd);
    if (m->err) return PHAX_ERR;
    if (lin(m, l, "gdn.wq.weight", NULL, qp, NULL, NULL, x, d, dq) || lin(m, l, "gdn.wk.weight", NULL, kp, NULL, NULL, x, d, dq) ||
        lin(m, l, "gdn.wv.weight", NULL, vp, NULL, NULL, x, d, d) || lin(m, l, "gdn.wg.weight", NULL, z, NULL, NULL, x, d, d) ||
        lin(m, l, "gdn.wa.weight", NULL, a, NULL, NULL, x, d, GH) || lin(m, l, "gdn.wb.weight", NULL, b, NULL, NULL, x, d, GH))
        return PHAX_ERR;
    const double *cq = par(m, l, "gdn.conv_q.weight"), *ck = par(m, l, "gdn.conv_k.weight"),
                 *cv = par(m, l, "gdn.conv_v.weight"), *A_log = par(m, l, "gdn.A_log"),
                 *dt_bias = par(m, l, "gdn.dt_bias"), *wn = par(m, l, "gdn.norm.weight");
    if (!cq || !ck || !cv || !A_log || !dt_bias || !wn) return phax_fail("check: block %d has no gdn weights", l);
    if (phax_naive_gdn_conv(pr, q, NULL, NULL, NULL, qp, cq, m->B, m->T, dq, K) ||
        phax_naive_gdn_conv(pr, k, NULL, NULL, NULL, kp, ck, m->B, m->T, dq, K) ||
        phax_naive_gdn_conv(pr, v, NULL, NULL, NULL, vp, cv, m->B, m->T, d, K) ||
        phax_naive_gdn_gates(pr, g, beta, NULL, NULL, NULL, NULL, NULL, NULL, a, b, A_log, dt_bias, n, GH) ||
        phax_naive_gdn(pr, o, NULL, dq_, dk_, dv_, dg, dbeta, NULL, dzero, NULL, q, k, v, g, beta, NULL, m->B, m->T, GH,
                       dk, dv, &cc, chunk))
        return PHAX_ERR;
    phax_naive_norm(pr, 0, on, dp, dnorm, NULL, dzero, o, wn, NULL, n * (size_t)GH, dv, dv, c->gdn_norm_eps);
    phax_naive_act(pr, 1, sz, dsz, dzero, z, nd);
    for (size_t i = 0; i < nd; i++) h[i] = R(on[i] * sz[i]);
    if (!dy) {
        if (lin(m, l, "gdn.out.weight", NULL, y, NULL, NULL, h, d, d)) return PHAX_ERR;
        release(m, mk);
        return PHAX_OK;
    }
    if (lin(m, l, "gdn.out.weight", NULL, NULL, dh, dy, h, d, d)) return PHAX_ERR;  // y = h Woᵀ
    for (size_t i = 0; i < nd; i++) dsz[i] = R(dh[i] * on[i]), dh[i] = R(dh[i] * sz[i]);  // d sz; d on (in dh)
    phax_naive_act(pr, 1, sz, dz, dsz, z, nd);  // dz = SiLU′(z) ⊙ d sz
    if (lin(m, l, "gdn.wg.weight", NULL, NULL, dx, dz, x, d, d)) return PHAX_ERR;
    phax_naive_norm(pr, 0, on, go, dnorm, NULL, dh, o, wn, NULL, n * (size_t)GH, dv, dv, c->gdn_norm_eps);
    gacc(m, l, "gdn.norm.weight", dnorm);
    if (phax_naive_gdn(pr, o, NULL, dq_, dk_, dv_, dg, dbeta, NULL, go, NULL, q, k, v, g, beta, NULL, m->B, m->T, GH,
                       dk, dv, &cc, chunk) ||
        phax_naive_gdn_gates(pr, NULL, NULL, da, db, dA, ddt, dg, dbeta, a, b, A_log, dt_bias, n, GH))
        return PHAX_ERR;
    gacc(m, l, "gdn.A_log", dA), gacc(m, l, "gdn.dt_bias", ddt);
    if (lin(m, l, "gdn.wa.weight", NULL, NULL, dx, da, x, d, GH) || lin(m, l, "gdn.wb.weight", NULL, NULL, dx, db, x, d, GH))
        return PHAX_ERR;
    const char *wn_[3] = {"gdn.wq.weight", "gdn.wk.weight", "gdn.wv.weight"}, *cn[3] = {"gdn.conv_q.weight",
                          "gdn.conv_k.weight", "gdn.conv_v.weight"};
    const double *pre[3] = {qp, kp, vp}, *ws[3] = {cq, ck, cv}, *dpost[3] = {dq_, dk_, dv_};
    const int C[3] = {dq, dq, d};
    for (int s = 0; s < 3; s++) {
        if (phax_naive_gdn_conv(pr, NULL, dp, dw, dpost[s], pre[s], ws[s], m->B, m->T, C[s], K)) return PHAX_ERR;
        gacc(m, l, cn[s], dw);
        if (lin(m, l, wn_[s], NULL, NULL, dx, dp, x, d, C[s])) return PHAX_ERR;
    }
    release(m, mk);
    return PHAX_OK;
}

static int sub(nm *m, phax_sub_kind k, int l, const double *x, double *y, const double *dy, double *dx) {
    switch (k) {
    case PHAX_SUB_GSS: return gss(m, l, x, y, dy, dx);
    case PHAX_SUB_ATTN: return attn(m, l, x, y, dy, dx);
    case PHAX_SUB_SWIGLU: return swiglu(m, l, x, y, dy, dx);
    case PHAX_SUB_AUX: return aux(m, l, x, y, dy, dx);
    case PHAX_SUB_MLSTM: return mlstm(m, l, x, y, dy, dx);
    case PHAX_SUB_GDN: return gdn(m, l, x, y, dy, dx);
    case PHAX_SUB_DUAL: {  // y = SwiGLU(x) + aux(x); dy reaches both unchanged
        if (dy) return swiglu(m, l, x, NULL, dy, dx) || aux(m, l, x, NULL, dy, dx) ? PHAX_ERR : PHAX_OK;
        int mk = mark(m);
        double *ya = get(m, m->n * (size_t)m->c->d_model);
        if (m->err || swiglu(m, l, x, y, NULL, NULL) || aux(m, l, x, ya, NULL, NULL)) return PHAX_ERR;
        acc(m->pr, y, ya, m->n * (size_t)m->c->d_model);
        release(m, mk);
        return PHAX_OK;
    }
    }
    return phax_fail("check: unknown sub-layer kind %d", (int)k);
}

// --- the parallel rule (pha, §3.1) ---------------------------------------------------------------
// r_i = branch_i(x); b_i = RMSNorm_i(r_i); mx = mix(p; b) (p = 0 when frozen); z = α·x + mx;
// y = RMSNorm_res(z). dy NULL: y written; dy given: dx (zeroed by the caller) += ∂/∂x.
static int pha_block(nm *m, int l, const double *x, double *y, const double *dy, double *dx) {
    const phax_precision *pr = m->pr;
    phax_block_plan bp;
    phax_plan_block(m->c, l, &bp);
    int nb = bp.nsub, mk = mark(m);
    size_t nd = m->n * (size_t)m->c->d_model;
    double *r = get(m, nb * nd), *b = get(m, nb * nd), *mx = get(m, nd), *z = get(m, nd), *dz = get(m, nd),
           *db = get(m, nb * nd), *dr = get(m, nd), p[PHAX_PLAN_MAX_SUB], dp[PHAX_PLAN_MAX_SUB];
    if (m->err) return PHAX_ERR;
    for (int i = 0; i < nb; i++)
        if (sub(m, bp.sub[i].kind, l, x, r + i * nd, NULL, NULL) ||
            rms(m, l, bp.sub[i].norm, b + i * nd, NULL, NULL, r + i * nd))
            return PHAX_ERR;
    const double *pp = bp.mix ? par(m, l, bp.mix) : NULL;
    for (int i = 0; i < nb; i++) p[i] = pp ? pp[i] : 0.0;
    phax_naive_mix(pr, mx, db, dp, dz, b, p, nb, nd);  // dz still zero: the forward
    double alpha = R(phax_plan_alpha(m->c));
    for (size_t i = 0; i < nd; i++) z[i] = R(R(alpha * x[i]) + mx[i]);
    if (!dy) {
        if (rms(m, l, bp.norm_res, y, NULL, NULL, z)) return PHAX_ERR;
        release(m, mk);
        return PHAX_OK;
    }
    if (rms(m, l, bp.norm_res, NULL, dz, dy, z)) return PHAX_ERR;  // y = RMSNorm_res(z)
    for (size_t i = 0; i < nd; i++) dx[i] = R(dx[i] + R(alpha * dz[i]));  // z = α·x + mx
    phax_naive_mix(pr, mx, db, dp, dz, b, p, nb, nd);
    if (bp.mix) gacc(m, l, bp.mix, dp);  // a frozen mix has no parameter
    for (int i = 0; i < nb; i++)  // b_i = RMSNorm_i(r_i), r_i = branch_i(x)
        if (rms(m, l, bp.sub[i].norm, NULL, dr, db + i * nd, r + i * nd) || sub(m, bp.sub[i].kind, l, x, NULL, dr, dx))
            return PHAX_ERR;
    release(m, mk);
    return PHAX_OK;
}

// logits (n, V) = x Wᵀ, W the tied embedding or lm_head; loss and dlogits by the cross-entropy
// baseline (upstream gradient 1); then dx (n, d) += dlogits W and W's gradient +=.
static int head(nm *m, const double *x, double *logits, double *loss, double *dx) {
    int d = m->c->d_model, V = m->c->vocab_size, mk = mark(m);
    const char *w = m->c->tie_embeddings ? "embed.weight" : "lm_head.weight";
    double *dlg = get(m, m->n * (size_t)V);
    if (m->err || lin(m, -1, w, NULL, logits, NULL, NULL, x, d, V)) return PHAX_ERR;
    if (phax_naive_cross_entropy(m->pr, loss, dlg, 1.0, logits, m->tg, m->n, V)) return PHAX_ERR;
    if (lin(m, -1, w, NULL, NULL, dx, dlg, x, d, V)) return PHAX_ERR;
    release(m, mk);
    return PHAX_OK;
}

// x (n, d) = E[tokens] (gy NULL), or E's gradient += the scatter-sum of gy.
static int embed(nm *m, double *x, const double *gy) {
    int d = m->c->d_model, V = m->c->vocab_size, mk = mark(m);
    size_t nd = m->n * (size_t)d;
    double *xs = x ? x : get(m, nd), *dE = get(m, (size_t)V * d);
    const double *g = gy ? gy : get(m, nd);
    if (m->err) return PHAX_ERR;
    phax_naive_embedding(m->pr, xs, dE, g, par(m, -1, "embed.weight"), m->tok, m->n, V, d);
    if (gy) gacc(m, -1, "embed.weight", dE);  // tied: added to the head's gradient
    release(m, mk);
    return PHAX_OK;
}

// x_1 = RMSNorm_emb(E[tokens]); x_{l+2} = block_l(x_{l+1}); logits = x_{L+1} Wᵀ (no final norm).
static int pha_run(nm *m, double *logits, double *loss) {
    int L = m->c->n_layers;
    size_t nd = m->n * (size_t)m->c->d_model;
    double *xs = get(m, (size_t)(L + 2) * nd), *dx = get(m, nd), *dp = get(m, nd);
    if (m->err || embed(m, xs, NULL) || rms(m, -1, "norm_emb.weight", xs + nd, NULL, NULL, xs)) return PHAX_ERR;
    for (int l = 0; l < L; l++)
        if (pha_block(m, l, xs + (l + 1) * nd, xs + (l + 2) * nd, NULL, NULL)) return PHAX_ERR;
    if (head(m, xs + (L + 1) * nd, logits, loss, dx)) return PHAX_ERR;
    for (int l = L - 1; l >= 0; l--) {
        memset(dp, 0, nd * sizeof *dp);
        if (pha_block(m, l, xs + (l + 1) * nd, NULL, dx, dp)) return PHAX_ERR;
        double *t = dx;
        dx = dp, dp = t;  // dx ← ∂loss/∂x_{l+1}
    }
    if (rms(m, -1, "norm_emb.weight", NULL, dp, dx, xs)) return PHAX_ERR;
    return embed(m, NULL, dp);
}

// --- the pre-norm rule (transformer, serial, swax, swa, mlstm, swa_full; §3.2–3.3) -------------------------
// x_0 = E[tokens]; sub-layer j: x_{j+1} = x_j + F_j(RMSNorm_j x_j); logits = RMSNorm_f(x_J) Wᵀ.
static int stack_run(nm *m, double *logits, double *loss) {
    const phax_precision *pr = m->pr;
    int L = m->c->n_layers;
    size_t nd = m->n * (size_t)m->c->d_model;
    phax_block_plan bp;
    phax_plan_block(m->c, 0, &bp);
    int J = L * bp.nsub;  // the same count in every block
    double *xs = get(m, (size_t)(J + 1) * nd), *h = get(m, nd), *f = get(m, nd), *xf = get(m, nd),
           *dxf = get(m, nd), *dx = get(m, nd), *dh = get(m, nd), *dn = get(m, nd);
    if (m->err || embed(m, xs, NULL)) return PHAX_ERR;
    for (int j = 0; j < J; j++) {
        int l = j / bp.nsub;
        phax_plan_block(m->c, l, &bp);
        const phax_sub *s = &bp.sub[j % bp.nsub];
        if (rms(m, l, s->norm, h, NULL, NULL, xs + j * nd) || sub(m, s->kind, l, h, f, NULL, NULL)) return PHAX_ERR;
        for (size_t i = 0; i < nd; i++) xs[(j + 1) * nd + i] = R(xs[j * nd + i] + f[i]);
    }
    if (rms(m, -1, "norm_f.weight", xf, NULL, NULL, xs + J * nd) || head(m, xf, logits, loss, dxf) ||
        rms(m, -1, "norm_f.weight", NULL, dx, dxf, xs + J * nd))
        return PHAX_ERR;
    for (int j = J - 1; j >= 0; j--) {  // dx = ∂loss/∂x_{j+1} → ∂loss/∂x_j: identity + sub-layer path
        int l = j / bp.nsub;
        phax_plan_block(m->c, l, &bp);
        const phax_sub *s = &bp.sub[j % bp.nsub];
        memset(dh, 0, nd * sizeof *dh);
        if (rms(m, l, s->norm, h, NULL, NULL, xs + j * nd) || sub(m, s->kind, l, h, NULL, dx, dh) ||
            rms(m, l, s->norm, NULL, dn, dh, xs + j * nd))
            return PHAX_ERR;
        acc(pr, dx, dn, nd);
    }
    return embed(m, NULL, dx);
}

int phax_naive_model_alg(const phax_precision *pr, double *logits, double *loss, double *grads,
                         const phax_model_cfg *cfg, const phax_layout *L, const double *params, const int32_t *tok,
                         const int32_t *tg, int B, int T, int window, size_t *peak, int flash_D) {
    nm m = {.pr = pr, .c = cfg, .L = L, .params = params, .grads = grads, .tok = tok, .tg = tg, .B = B, .T = T,
            .window = phax_plan_window(cfg, window), .flash_D = flash_D, .n = (size_t)B * T};
    memset(grads, 0, L->numel * sizeof *grads);
    int rc = phax_plan_rule(cfg) == PHAX_RULE_PARALLEL ? pha_run(&m, logits, loss) : stack_run(&m, logits, loss);
    if (peak) *peak = m.peak;
    release(&m, 0);
    free(m.al), free(m.asz);
    return rc || m.err ? PHAX_ERR : PHAX_OK;
}

int phax_naive_model(const phax_precision *pr, double *logits, double *loss, double *grads, const phax_model_cfg *cfg,
                     const phax_layout *L, const double *params, const int32_t *tok, const int32_t *tg, int B, int T,
                     int window, size_t *peak) {
    return phax_naive_model_alg(pr, logits, loss, grads, cfg, L, params, tok, tg, B, T, window, peak, 0);
}

// Counted from the functions above, with room: the residual stream (pha: L + 2 inputs and
// two gradients; pre-norm: J + 1 inputs and seven (n, d) buffers); the head (dlogits, and in
// its linear a zero upstream gradient or recomputed logits, dx, dW); one block's scratch
// (pha: r, b, db over nb ≤ 4 branches and four (n, d) buffers; a norm's three) and one
// sub-layer's, each at most 24 arrays of the widest per-token width w (the mLSTM's twenty
// (n, d) arrays and its linear's scratch are the most; attention's projections, outputs,
// gradients and its op's copies of q, k, v, dy are 16), its widest weight's gradient and
// upstream copies, the GSS kernel and its gradient (Hs, T) and complex C (Hs, N), and the
// mLSTM's and attention's per-row scratch of T; with Gated DeltaNet layers, its cell's own scratch
// (the recurrent form's tape of T + 1 states of dk·dv, the chunkwise form's chunk tables) and its
// convolution's (n, d). Sums of sizes saturate (no wrap).
size_t phax_naive_model_doubles(const phax_model_cfg *c, int B, int T) {
#define SM(a, b) ((b) && (a) > SIZE_MAX / (b) ? SIZE_MAX : (a) * (b))
#define SA(a, b) ((a) > SIZE_MAX - (b) ? SIZE_MAX : (a) + (b))
    size_t n = SM((size_t)B, (size_t)T), d = (size_t)c->d_model, V = (size_t)c->vocab_size, L = (size_t)c->n_layers;
    size_t qd = (size_t)c->n_heads * (size_t)c->head_dim, kd = (size_t)c->n_kv_heads * (size_t)c->head_dim;
    size_t w = d, widths[] = {qd, kd, (size_t)c->gss_expand, (size_t)c->gss_hidden, (size_t)c->ffn_hidden,
                              (size_t)c->ffn_aux_hidden};
    for (size_t i = 0; i < sizeof widths / sizeof *widths; i++)
        if (widths[i] > w) w = widths[i];
    size_t streams = SM(SA(SA(L, L), SA(L, 8)), SM(n, d));  // (3L + 8)(n, d): J ≤ 3L sub-layers
    size_t head = SA(SM(2, SM(n, V)), SA(SM(n, d), SM(2, SM(V, d))));
    size_t hs = (size_t)c->gss_hidden, blk = SM(19, SM(n, d));
    blk = SA(blk, SM(24, SM(n, w)));
    blk = SA(blk, SM(4, SM(w, w)));  // a weight's gradient and copies: every weight is at most w × w
    blk = SA(blk, SA(SM(4, SM(hs, (size_t)T)), SM(4, SM(hs, (size_t)c->gss_state))));
    blk = SA(blk, SA(SM(8, (size_t)T), SA(SM(4, w), 256)));
    if (phax_plan_has(c, PHAX_SUB_GDN)) {
        const size_t GH = (size_t)c->gdn_heads, ns = SM(d / 2 / GH, d / GH), C = PHAX_GDN_CHECK_CHUNK;
        blk = SA(blk, SA(SM((size_t)T + 2, ns), SA(SM(8, SM(C, C + d)), SM(n, d))));
    }
    return SA(streams, SA(head, blk));
#undef SM
#undef SA
}
