// fast/cpu model branches: attention, GSS, SwiGLU, aux and dual FFN, mLSTM —
// the sub-layers of every family, in float32 on the fast/cpu kernels. Each
// forward keeps the activations its backward reads (in the workspace arena),
// so nothing is recomputed; the formulas are those of ref/model_branches.c
// (docs/spec.md §3), line for line and in the same order.
//
// Shapes: n = B·T rows; x, y, dx, dy: (n, d). Backward ADDS into dx and into the
// model's gradients.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model_internal.h"
#include "phax/numerics.h"

// ---------------------------------------------------------------------------
const float *fm_param(const fcpu_model *m, int l, const char *suffix) {
    char name[96];
    snprintf(name, sizeof name, "blocks.%d.%s", l, suffix);
    return fcpu_model_param(m, name);
}

float *fm_grad(const fm_ctx *cx, int l, const char *suffix) {
    if (!cx->grads) return NULL;
    char name[96];
    snprintf(name, sizeof name, "blocks.%d.%s", l, suffix);
    int i = phax_layout_find(&cx->m->layout, name);
    return i < 0 ? NULL : cx->grads + cx->m->layout.p[i].offset;
}

#define P(suffix) fm_param(cx->m, l, suffix)
#define G(suffix) fm_grad(cx, l, suffix)

static void fzero(float *p, size_t n) { memset(p, 0, n * sizeof *p); }

// ---------------------------------------------------------------------------
// Attention sub-layer: q = x Wqᵀ, k = x Wkᵀ, v = x Wvᵀ, o = attention(q, k, v),
// y = o Woᵀ (RoPE, score mode and GQA inside the attention kernel; the config from the plan).
static int attn_fwd(const fm_ctx *cx, fm_branch *b, float *y, const float *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    int l = b->layer, d = c->d_model;
    size_t qd = (size_t)c->n_heads * c->head_dim, kd = (size_t)c->n_kv_heads * c->head_dim;  // ≤ PHAX_MAX_WIDTH
    size_t n = cx->n;
    phax_attn_cfg a = phax_plan_attn_cfg(c, cx->window);
    fcpu_linear_fwd(b->q, x, P("attn.wq.weight"), NULL, n, d, qd);  // q: (B, T, Hq, dh)
    fcpu_linear_fwd(b->k, x, P("attn.wk.weight"), NULL, n, d, kd);  // k: (B, T, Hkv, dh)
    fcpu_linear_fwd(b->v, x, P("attn.wv.weight"), NULL, n, d, kd);  // v: (B, T, Hkv, dh)
    int rc;
    FM_PROF(cx, FCPU_PART_ATTN_KERNEL,
            rc = fcpu_attention_fwd(b->o, NULL, b->st, b->q, b->k, b->v, P("attn.logscale"), cx->B,
                                    cx->T, &a, cx->ws->kws));
    if (rc) return PHAX_ERR;
    fcpu_linear_fwd(y, b->o, P("attn.wo.weight"), NULL, n, qd, d);  // y: (n, d)
    return PHAX_OK;
}

static int attn_bwd(const fm_ctx *cx, fm_branch *b, float *dx, const float *dy, const float *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    int l = b->layer, d = c->d_model;
    size_t qd = (size_t)c->n_heads * c->head_dim, kd = (size_t)c->n_kv_heads * c->head_dim;  // ≤ PHAX_MAX_WIDTH
    size_t n = cx->n;
    phax_attn_cfg a = phax_plan_attn_cfg(c, cx->window);
    float *dO = cx->ws->bws, *dq = dO + n * qd, *dk = dq + n * qd, *dv = dk + n * kd;
    fzero(dO, n * (2 * (size_t)qd + 2 * (size_t)kd));
    fcpu_linear_bwd(dO, G("attn.wo.weight"), NULL, dy, b->o, P("attn.wo.weight"), n, qd, d);
    int rc;
    FM_PROF(cx, FCPU_PART_ATTN_KERNEL,
            rc = fcpu_attention_bwd(dq, dk, dv, G("attn.logscale"), dO, b->o, b->st, b->q, b->k,
                                    b->v, P("attn.logscale"), cx->B, cx->T, &a, cx->ws->kws));
    if (rc) return PHAX_ERR;
    fcpu_linear_bwd(dx, G("attn.wq.weight"), NULL, dq, x, P("attn.wq.weight"), n, d, qd);
    fcpu_linear_bwd(dx, G("attn.wk.weight"), NULL, dk, x, P("attn.wk.weight"), n, d, kd);
    fcpu_linear_bwd(dx, G("attn.wv.weight"), NULL, dv, x, P("attn.wv.weight"), n, d, kd);
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// FFNs. Main: SwiGLU (w_gate, w_up, w_down), activations kept. Aux: y = W4 GELU(W3 x).
static int swiglu_fwd(const fm_ctx *cx, fm_branch *b, float *y, const float *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    int l = b->layer;
    return fcpu_swiglu_fwd_keep(y, b->keep, x, P("ffn.w_gate.weight"), P("ffn.w_up.weight"),
                                P("ffn.w_down.weight"), cx->n, c->d_model, c->ffn_hidden);
}

static int swiglu_bwd(const fm_ctx *cx, fm_branch *b, float *dx, const float *dy, const float *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    int l = b->layer;
    return fcpu_swiglu_bwd_kept(dx, G("ffn.w_gate.weight"), G("ffn.w_up.weight"),
                                G("ffn.w_down.weight"), dy, x, P("ffn.w_gate.weight"),
                                P("ffn.w_up.weight"), P("ffn.w_down.weight"), cx->n, c->d_model,
                                c->ffn_hidden, b->keep, cx->ws->kws);
}

static int aux_fwd(const fm_ctx *cx, fm_branch *b, float *y, const float *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    int l = b->layer, d = c->d_model, Ha = c->ffn_aux_hidden;
    size_t n = cx->n;
    fcpu_linear_fwd(b->hpre, x, P("ffn_aux.w3.weight"), NULL, n, d, Ha);  // hpre: (n, Ha)
    fcpu_gelu_fwd(b->ha, b->hpre, n * Ha);                                // h: (n, Ha)
    fcpu_linear_fwd(y, b->ha, P("ffn_aux.w4.weight"), NULL, n, Ha, d);    // y: (n, d)
    return PHAX_OK;
}

static int aux_bwd(const fm_ctx *cx, fm_branch *b, float *dx, const float *dy, const float *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    int l = b->layer, d = c->d_model, Ha = c->ffn_aux_hidden;
    size_t n = cx->n;
    float *dh = cx->ws->bws, *dhpre = dh + n * Ha;
    fzero(dh, 2 * n * Ha);
    fcpu_linear_bwd(dh, G("ffn_aux.w4.weight"), NULL, dy, b->ha, P("ffn_aux.w4.weight"), n, Ha, d);
    fcpu_gelu_bwd(dhpre, dh, b->hpre, n * Ha);
    fcpu_linear_bwd(dx, G("ffn_aux.w3.weight"), NULL, dhpre, x, P("ffn_aux.w3.weight"), n, d, Ha);
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// GSS branch (docs/spec.md §3.1), without its own pre-norm and shortcut:
//   xv = x Wvᵀ, v = GELU(xv) (n, F);  xu = x Wuᵀ, u = GELU(xu) (n, Hs);  ū = LayerNorm(u)
//   K = dss_kernel(Λ, C) (Hs, T);  ys = ssm_conv(ū, K, D) (B, T, Hs)
//   yc = ys Wcᵀ (n, F);  gt = yc ⊙ v;  y = gt Woᵀ (n, d)
static int gss_fwd(const fm_ctx *cx, fm_branch *b, float *y, const float *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    int l = b->layer, d = c->d_model, F = c->gss_expand, Hs = c->gss_hidden, N = c->gss_state;
    size_t n = cx->n;
    void *kws = cx->ws->kws;
    fcpu_linear_fwd(b->gxv, x, P("gss.wv.weight"), NULL, n, d, F);
    fcpu_gelu_fwd(b->gv, b->gxv, n * F);
    fcpu_linear_fwd(b->gxu, x, P("gss.wu.weight"), NULL, n, d, Hs);
    fcpu_gelu_fwd(b->gu, b->gxu, n * Hs);
    fcpu_layernorm_fwd(b->gub, b->gu, P("gss.ln.weight"), P("gss.ln.bias"), n, Hs,
                       PHAX_LAYERNORM_EPS);
    fcpu_dss_kernel_fwd(b->gK, P("gss.lambda_re"), P("gss.lambda_im"), P("gss.c_re"), P("gss.c_im"),
                        Hs, N, cx->T, kws);
    if (fcpu_ssm_conv_fwd(b->gys, b->gub, b->gK, P("gss.d"), cx->B, cx->T, Hs, cx->ws->ssm_plan, kws))
        return PHAX_ERR;
    fcpu_linear_fwd(b->gyc, b->gys, P("gss.wc.weight"), NULL, n, Hs, F);
    size_t nF = n * (size_t)F;
    const float *restrict yc = b->gyc, *restrict v = b->gv;
    float *restrict gt = b->ggt;
#pragma omp parallel for simd schedule(static) if (nF >= 65536)
    for (size_t i = 0; i < nF; i++) gt[i] = yc[i] * v[i];
    fcpu_linear_fwd(y, b->ggt, P("gss.wo.weight"), NULL, n, F, d);
    return PHAX_OK;
}

static int gss_bwd(const fm_ctx *cx, fm_branch *b, float *dx, const float *dy, const float *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    int l = b->layer, d = c->d_model, F = c->gss_expand, Hs = c->gss_hidden, N = c->gss_state;
    int B = cx->B, T = cx->T;
    size_t n = cx->n, nF = n * (size_t)F, nH = n * (size_t)Hs;
    void *kws = cx->ws->kws;
    float *dgt = cx->ws->bws, *dyc = dgt + nF, *dv = dyc + nF, *dxv = dv + nF;
    float *dys = dxv + nF, *dub = dys + nH, *du = dub + nH, *dxu = du + nH, *dK = dxu + nH;
    fzero(dgt, 4 * nF + 4 * nH + (size_t)Hs * T);
    // y = gt Woᵀ
    fcpu_linear_bwd(dgt, G("gss.wo.weight"), NULL, dy, b->ggt, P("gss.wo.weight"), n, F, d);
    // gt = yc ⊙ v
    {
        const float *restrict g = dgt, *restrict v = b->gv, *restrict yc = b->gyc;
        float *restrict a = dyc, *restrict bb = dv;
#pragma omp parallel for simd schedule(static) if (nF >= 65536)
        for (size_t i = 0; i < nF; i++) {
            a[i] = g[i] * v[i];
            bb[i] = g[i] * yc[i];
        }
    }
    // yc = ys Wcᵀ
    fcpu_linear_bwd(dys, G("gss.wc.weight"), NULL, dyc, b->gys, P("gss.wc.weight"), n, Hs, F);
    // ys = ssm_conv(ū, K, D); K = dss_kernel(Λ, C)
    if (fcpu_ssm_conv_bwd(dub, dK, G("gss.d"), dys, b->gub, b->gK, P("gss.d"), B, T, Hs,
                          cx->ws->ssm_plan, kws))
        return PHAX_ERR;
    fcpu_dss_kernel_bwd(G("gss.lambda_re"), G("gss.lambda_im"), G("gss.c_re"), G("gss.c_im"), dK,
                        P("gss.lambda_re"), P("gss.lambda_im"), P("gss.c_re"), P("gss.c_im"), Hs, N,
                        T, kws);
    // ū = LayerNorm(u); u = GELU(xu); v = GELU(xv)
    fcpu_layernorm_bwd(du, G("gss.ln.weight"), G("gss.ln.bias"), dub, b->gu, P("gss.ln.weight"), n,
                       Hs, PHAX_LAYERNORM_EPS, kws);
    fcpu_gelu_bwd(dxu, du, b->gxu, nH);
    fcpu_gelu_bwd(dxv, dv, b->gxv, nF);
    // xu = x Wuᵀ, xv = x Wvᵀ
    fcpu_linear_bwd(dx, G("gss.wu.weight"), NULL, dxu, x, P("gss.wu.weight"), n, d, Hs);
    fcpu_linear_bwd(dx, G("gss.wv.weight"), NULL, dxv, x, P("gss.wv.weight"), n, d, F);
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// mLSTM layer (docs/spec.md §3.3) on its normalised input x̄ = x here:
//   q, k = x̄ W_{q,k}ᵀ (n, d/2); v = x̄ W_vᵀ (n, d); o = σ(x̄ W_oᵀ) (n, d)
//   ĩ = cap(x̄ W_iᵀ + b_i), f̃ = cap(x̄ W_fᵀ + b_f) (n, NH), cap(z) = 15 tanh(z/15)
//   h̃ = cell(q, k, v, ĩ, f̃) (chunkwise; the parallel form's function)
//   h = o ⊙ headnorm(h̃);  y = h W_outᵀ
#define GATE_CAP ((float)PHAX_MLSTM_GATE_CAP)

static int mlstm_fwd(const fm_ctx *cx, fm_branch *b, float *y, const float *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    int l = b->layer, d = c->d_model, NH = c->mlstm_heads, dk = d / 2;
    int dqk = dk / NH, dv = d / NH;
    size_t n = cx->n, nd = n * (size_t)d, ng = n * (size_t)NH;
    fcpu_linear_fwd(b->mq, x, P("mlstm.wq.weight"), NULL, n, d, dk);
    fcpu_linear_fwd(b->mk, x, P("mlstm.wk.weight"), NULL, n, d, dk);
    fcpu_linear_fwd(b->mv, x, P("mlstm.wv.weight"), NULL, n, d, d);
    fcpu_linear_fwd(b->mo, x, P("mlstm.ogate.weight"), NULL, n, d, d);  // opre, then σ in place
    fcpu_linear_fwd(b->mipre, x, P("mlstm.igate.weight"), P("mlstm.igate.bias"), n, d, NH);
    fcpu_linear_fwd(b->mfpre, x, P("mlstm.fgate.weight"), P("mlstm.fgate.bias"), n, d, NH);
    {
        float *restrict o = b->mo;
#pragma omp parallel for simd schedule(static) if (nd >= 65536)
        for (size_t i = 0; i < nd; i++) o[i] = 1.0f / (1.0f + expf(-o[i]));
    }
    for (size_t i = 0; i < ng; i++) {
        b->mig[i] = phax_gate_capf(b->mipre[i]);
        b->mfg[i] = phax_gate_capf(b->mfpre[i]);
    }
    int rc;
    FM_PROF(cx, FCPU_PART_MLSTM_KERNEL,
            rc = fcpu_mlstm_chunkwise_fwd(b->mhc, b->mq, b->mk, b->mv, b->mig, b->mfg, cx->B, cx->T,
                                          NH, dqk, dv, (float)PHAX_MLSTM_EPS, FCPU_MLSTM_CHUNK,
                                          NULL, NULL, cx->ws->kws));
    if (rc) return PHAX_ERR;
    fcpu_headnorm_fwd(b->mhn, b->mhc, P("mlstm.headnorm.weight"), n, NH, dv, c->mlstm_norm_eps);
    {
        const float *restrict o = b->mo, *restrict hn = b->mhn;
        float *restrict h = b->mh;
#pragma omp parallel for simd schedule(static) if (nd >= 65536)
        for (size_t i = 0; i < nd; i++) h[i] = o[i] * hn[i];
    }
    fcpu_linear_fwd(y, b->mh, P("mlstm.out.weight"), NULL, n, d, d);
    return PHAX_OK;
}

static int mlstm_bwd(const fm_ctx *cx, fm_branch *b, float *dx, const float *dy, const float *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    int l = b->layer, d = c->d_model, NH = c->mlstm_heads, dk = d / 2;
    int dqk = dk / NH, dv = d / NH;
    size_t n = cx->n, nd = n * (size_t)d, nk = n * (size_t)dk, ng = n * (size_t)NH;
    float *dq = cx->ws->bws, *dk_ = dq + nk, *dv_ = dk_ + nk, *dh = dv_ + nd, *dhc = dh + nd,
          *dop = dhc + nd, *dig = dop + nd, *dfg = dig + ng;
    fzero(dq, 2 * nk + 4 * nd + 2 * ng);
    // y = h W_outᵀ
    fcpu_linear_bwd(dh, G("mlstm.out.weight"), NULL, dy, b->mh, P("mlstm.out.weight"), n, d, d);
    // h = o ⊙ hn, o = σ(opre): d opre = dh hn o (1 − o); d hn = dh o (in place)
    {
        const float *restrict o = b->mo, *restrict hn = b->mhn;
        float *restrict g = dh, *restrict gop = dop;
#pragma omp parallel for simd schedule(static) if (nd >= 65536)
        for (size_t i = 0; i < nd; i++) {
            gop[i] = g[i] * hn[i] * o[i] * (1.0f - o[i]);
            g[i] = g[i] * o[i];
        }
    }
    fcpu_headnorm_bwd(dhc, G("mlstm.headnorm.weight"), dh, b->mhc, P("mlstm.headnorm.weight"), n,
                      NH, dv, c->mlstm_norm_eps, cx->ws->kws);
    int rc;
    FM_PROF(cx, FCPU_PART_MLSTM_KERNEL,
            rc = fcpu_mlstm_chunkwise_bwd(dq, dk_, dv_, dig, dfg, dhc, b->mq, b->mk, b->mv, b->mig,
                                          b->mfg, cx->B, cx->T, NH, dqk, dv,
                                          (float)PHAX_MLSTM_EPS, FCPU_MLSTM_CHUNK, cx->ws->kws));
    if (rc) return PHAX_ERR;
    // ĩ = cap(ipre), f̃ = cap(fpre): d cap/dz = 1 − tanh²(z/15)
    for (size_t i = 0; i < ng; i++) {
        float ti = tanhf(b->mipre[i] / GATE_CAP), tf = tanhf(b->mfpre[i] / GATE_CAP);
        dig[i] *= 1.0f - ti * ti;
        dfg[i] *= 1.0f - tf * tf;
    }
    fcpu_linear_bwd(dx, G("mlstm.wq.weight"), NULL, dq, x, P("mlstm.wq.weight"), n, d, dk);
    fcpu_linear_bwd(dx, G("mlstm.wk.weight"), NULL, dk_, x, P("mlstm.wk.weight"), n, d, dk);
    fcpu_linear_bwd(dx, G("mlstm.wv.weight"), NULL, dv_, x, P("mlstm.wv.weight"), n, d, d);
    fcpu_linear_bwd(dx, G("mlstm.ogate.weight"), NULL, dop, x, P("mlstm.ogate.weight"), n, d, d);
    fcpu_linear_bwd(dx, G("mlstm.igate.weight"), G("mlstm.igate.bias"), dig, x,
                    P("mlstm.igate.weight"), n, d, NH);
    fcpu_linear_bwd(dx, G("mlstm.fgate.weight"), G("mlstm.fgate.bias"), dfg, x,
                    P("mlstm.fgate.weight"), n, d, NH);
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
int fm_branch_fwd(const fm_ctx *cx, fm_branch *b, float *y, const float *x) {
    switch (b->kind) {
    case PHAX_SUB_GSS: return gss_fwd(cx, b, y, x);
    case PHAX_SUB_ATTN: return attn_fwd(cx, b, y, x);
    case PHAX_SUB_SWIGLU: return swiglu_fwd(cx, b, y, x);
    case PHAX_SUB_AUX: return aux_fwd(cx, b, y, x);
    case PHAX_SUB_MLSTM: return mlstm_fwd(cx, b, y, x);
    case PHAX_SUB_DUAL: {  // y = SwiGLU(x) + aux(x)
        if (swiglu_fwd(cx, b, y, x) || aux_fwd(cx, b, b->tmp, x)) return PHAX_ERR;
        size_t nd = cx->n * (size_t)cx->m->cfg.d_model;
        float *restrict yy = y;
        const float *restrict t = b->tmp;
#pragma omp parallel for simd schedule(static) if (nd >= 65536)
        for (size_t i = 0; i < nd; i++) yy[i] += t[i];
        return PHAX_OK;
    }
    }
    return phax_fail("model: unknown branch kind %d", (int)b->kind);
}

int fm_branch_bwd(const fm_ctx *cx, fm_branch *b, float *dx, const float *dy, const float *x) {
    switch (b->kind) {
    case PHAX_SUB_GSS: return gss_bwd(cx, b, dx, dy, x);
    case PHAX_SUB_ATTN: return attn_bwd(cx, b, dx, dy, x);
    case PHAX_SUB_SWIGLU: return swiglu_bwd(cx, b, dx, dy, x);
    case PHAX_SUB_AUX: return aux_bwd(cx, b, dx, dy, x);
    case PHAX_SUB_MLSTM: return mlstm_bwd(cx, b, dx, dy, x);
    case PHAX_SUB_DUAL:  // dy reaches both parts unchanged
        if (swiglu_bwd(cx, b, dx, dy, x)) return PHAX_ERR;
        return aux_bwd(cx, b, dx, dy, x);
    }
    return phax_fail("model: unknown branch kind %d", (int)b->kind);
}

// ---------------------------------------------------------------------------
// Sizes. The layout functions run twice (count, then assign), so they only take.
void fm_branch_layout(fm_arena *a, fm_branch *b, const phax_model_cfg *c, int B, int T) {
    size_t n = (size_t)B * T;
    int d = c->d_model;
    size_t nd = n * (size_t)d;
    switch (b->kind) {
    case PHAX_SUB_ATTN: {
        size_t qd = (size_t)c->n_heads * c->head_dim, kd = (size_t)c->n_kv_heads * c->head_dim;
        b->q = fm_take(a, n * qd), b->k = fm_take(a, n * kd), b->v = fm_take(a, n * kd);
        b->o = fm_take(a, n * qd), b->st = fm_take(a, n * 2 * (size_t)c->n_heads);
        break;
    }
    case PHAX_SUB_DUAL:
        b->tmp = fm_take(a, nd);
        /* fall through */
    case PHAX_SUB_SWIGLU:
        b->keep = fm_take(a, fcpu_swiglu_keep_len(n, c->ffn_hidden));
        if (b->kind == PHAX_SUB_SWIGLU) break;
        /* fall through */
    case PHAX_SUB_AUX:
        b->hpre = fm_take(a, n * c->ffn_aux_hidden), b->ha = fm_take(a, n * c->ffn_aux_hidden);
        break;
    case PHAX_SUB_GSS: {
        size_t nF = n * c->gss_expand, nH = n * c->gss_hidden;
        b->gxv = fm_take(a, nF), b->gv = fm_take(a, nF), b->gyc = fm_take(a, nF), b->ggt = fm_take(a, nF);
        b->gxu = fm_take(a, nH), b->gu = fm_take(a, nH), b->gub = fm_take(a, nH), b->gys = fm_take(a, nH);
        b->gK = fm_take(a, (size_t)c->gss_hidden * T);
        break;
    }
    case PHAX_SUB_MLSTM: {
        size_t nk = n * (size_t)(d / 2), ng = n * (size_t)c->mlstm_heads;
        b->mq = fm_take(a, nk), b->mk = fm_take(a, nk);
        b->mv = fm_take(a, nd), b->mo = fm_take(a, nd), b->mhc = fm_take(a, nd);
        b->mhn = fm_take(a, nd), b->mh = fm_take(a, nd);
        b->mipre = fm_take(a, ng), b->mfpre = fm_take(a, ng), b->mig = fm_take(a, ng), b->mfg = fm_take(a, ng);
        break;
    }
    }
}

size_t fm_branch_bwd_len(phax_sub_kind k, const phax_model_cfg *c, size_t n, int T) {
    size_t d = (size_t)c->d_model;
    switch (k) {
    case PHAX_SUB_ATTN: return n * (2 * (size_t)c->n_heads + 2 * (size_t)c->n_kv_heads) * c->head_dim;
    case PHAX_SUB_SWIGLU: return 0;
    case PHAX_SUB_AUX:
    case PHAX_SUB_DUAL: return 2 * n * c->ffn_aux_hidden;
    case PHAX_SUB_GSS: return 4 * n * c->gss_expand + 4 * n * c->gss_hidden + (size_t)c->gss_hidden * T;
    case PHAX_SUB_MLSTM: return 2 * n * (d / 2) + 4 * n * d + 2 * n * c->mlstm_heads;
    }
    return 0;
}

static size_t zmax(size_t a, size_t b) { return a > b ? a : b; }

size_t fm_branch_kernel_ws(phax_sub_kind k, const phax_model_cfg *c, int B, int T, int nthreads,
                           const struct fcpu_model_ws *ws) {
    size_t n = (size_t)B * T, s = 0;
    switch (k) {
    case PHAX_SUB_ATTN: {
        // Every window a call may use: full, the configured ones.
        int wins[4] = {0, c->attn_window, c->w_short, c->w_long};
        for (int i = 0; i < 4; i++) {
            phax_attn_cfg a = phax_plan_attn_cfg(c, wins[i] > 0 ? wins[i] : 0);
            s = zmax(s, fcpu_attention_fwd_ws(B, T, &a, nthreads));
            s = zmax(s, fcpu_attention_bwd_ws(B, T, &a, nthreads));
        }
        return s;
    }
    case PHAX_SUB_SWIGLU:
    case PHAX_SUB_DUAL: return fcpu_swiglu_bwd_kept_ws(n, c->d_model, c->ffn_hidden);
    case PHAX_SUB_AUX: return 0;
    case PHAX_SUB_GSS:
        s = zmax(fcpu_dss_kernel_fwd_ws(c->gss_hidden, c->gss_state, T),
                 fcpu_dss_kernel_bwd_ws(c->gss_hidden, c->gss_state, T));
        s = zmax(s, fcpu_ssm_conv_fwd_ws(ws->ssm_plan));
        s = zmax(s, fcpu_ssm_conv_bwd_ws(ws->ssm_plan));
        return zmax(s, fcpu_layernorm_bwd_ws(n, c->gss_hidden));
    case PHAX_SUB_MLSTM: {
        int NH = c->mlstm_heads, dqk = c->d_model / 2 / NH, dv = c->d_model / NH;
        s = fcpu_mlstm_chunkwise_fwd_ws(B, T, NH, dqk, dv, FCPU_MLSTM_CHUNK);
        s = zmax(s, fcpu_mlstm_chunkwise_bwd_ws(B, T, NH, dqk, dv, FCPU_MLSTM_CHUNK));
        return zmax(s, fcpu_headnorm_bwd_ws(n, NH, dv));
    }
    }
    return 0;
}
