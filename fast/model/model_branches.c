// fast/cpu model branches: attention, GSS, SwiGLU, aux and dual FFN, mLSTM —
// the sub-layers of every family, in float32 on the fast/cpu kernels. Each
// forward keeps the activations its backward reads (in the workspace arena),
// so nothing is recomputed; the formulas are those of ref/model_branches.c
// (docs/spec.md §3), line for line and in the same order. Every op goes through the
// table cx->ops (phax/f32_ops.h).
//
// Shapes: n = B·T rows; x, y, dx, dy: (n, d). Backward ADDS into dx and into the
// model's gradients.
#include <math.h>

#include "model_internal.h"

// Each branch reads its block's tensors from the pointers resolved at binding: p (params)
// in both directions, g (grads) only in its backward.
#define PARAMS(cx, b) (&(cx)->P->blk[(b)->layer])
#define GRADS(cx, b) (&(cx)->G->blk[(b)->layer])

// ---------------------------------------------------------------------------
// Attention sub-layer: q = x Wqᵀ, k = x Wkᵀ, v = x Wvᵀ, o = attention(q, k, v),
// y = o Woᵀ (RoPE, score mode and GQA inside the attention kernel; the config from the plan).
static int attn_fwd(const fm_ctx *cx, fm_branch *b, float *y, const float *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    const phax_f32_ops *ops = cx->ops;
    const fm_block_ptrs *p = PARAMS(cx, b);
    int d = c->d_model;
    size_t qd = (size_t)c->n_heads * c->head_dim, kd = (size_t)c->n_kv_heads * c->head_dim;  // ≤ PHAX_MAX_WIDTH
    size_t n = cx->n;
    phax_attn_cfg a = phax_plan_attn_cfg(c, b->layer, cx->window);
    ops->linear_fwd(b->q, x, p->attn_wq, NULL, n, d, qd);  // q: (B, T, Hq, dh)
    ops->linear_fwd(b->k, x, p->attn_wk, NULL, n, d, kd);  // k: (B, T, Hkv, dh)
    ops->linear_fwd(b->v, x, p->attn_wv, NULL, n, d, kd);  // v: (B, T, Hkv, dh)
    int rc;
    FM_PROF(cx, FMODEL_PART_ATTN_KERNEL,
            rc = ops->attention_fwd(b->o, NULL, b->st, b->q, b->k, b->v, p->attn_logscale, cx->B,
                                    cx->T, &a, cx->ws->kws));
    if (rc) return PHAX_ERR;
    ops->linear_fwd(y, b->o, p->attn_wo, NULL, n, qd, d);  // y: (n, d)
    return PHAX_OK;
}

static int attn_bwd(const fm_ctx *cx, fm_branch *b, float *dx, const float *dy, const float *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    const phax_f32_ops *ops = cx->ops;
    const fm_block_ptrs *p = PARAMS(cx, b), *g = GRADS(cx, b);
    int d = c->d_model;
    size_t qd = (size_t)c->n_heads * c->head_dim, kd = (size_t)c->n_kv_heads * c->head_dim;  // ≤ PHAX_MAX_WIDTH
    size_t n = cx->n;
    phax_attn_cfg a = phax_plan_attn_cfg(c, b->layer, cx->window);
    float *dO = cx->ws->bws, *dq = dO + n * qd, *dk = dq + n * qd, *dv = dk + n * kd;
    ops->zero(dO, n * (2 * (size_t)qd + 2 * (size_t)kd));
    ops->linear_bwd(dO, g->attn_wo, NULL, dy, b->o, p->attn_wo, n, qd, d);
    int rc;
    FM_PROF(cx, FMODEL_PART_ATTN_KERNEL,
            rc = ops->attention_bwd(dq, dk, dv, g->attn_logscale, dO, b->o, b->st, b->q, b->k,
                                    b->v, p->attn_logscale, cx->B, cx->T, &a, cx->ws->kws));
    if (rc) return PHAX_ERR;
    ops->linear_bwd(dx, g->attn_wq, NULL, dq, x, p->attn_wq, n, d, qd);
    ops->linear_bwd(dx, g->attn_wk, NULL, dk, x, p->attn_wk, n, d, kd);
    ops->linear_bwd(dx, g->attn_wv, NULL, dv, x, p->attn_wv, n, d, kd);
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// FFNs. Main: SwiGLU (w_gate, w_up, w_down), activations kept. Aux: y = W4 GELU(W3 x).
static int swiglu_fwd(const fm_ctx *cx, fm_branch *b, float *y, const float *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    const phax_f32_ops *ops = cx->ops;
    const fm_block_ptrs *p = PARAMS(cx, b);
    // h = SiLU(a) ⊙ b in the backward scratch (free during a forward); the backward makes it again
    return ops->swiglu_fwd_keep(y, b->keep, x, p->ffn_w_gate, p->ffn_w_up, p->ffn_w_down, cx->n,
                                c->d_model, c->ffn_hidden, cx->ws->bws);
}

static int swiglu_bwd(const fm_ctx *cx, fm_branch *b, float *dx, const float *dy, const float *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    const phax_f32_ops *ops = cx->ops;
    const fm_block_ptrs *p = PARAMS(cx, b), *g = GRADS(cx, b);
    return ops->swiglu_bwd_kept(dx, g->ffn_w_gate, g->ffn_w_up, g->ffn_w_down, dy, x,
                                p->ffn_w_gate, p->ffn_w_up, p->ffn_w_down, cx->n, c->d_model,
                                c->ffn_hidden, b->keep, cx->ws->kws);
}

// Only hpre is kept: h = GELU(hpre) lives in the backward scratch (free during a forward) and the
// backward makes it again, bit for bit (the same op on the same values).
static int aux_fwd(const fm_ctx *cx, fm_branch *b, float *y, const float *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    const phax_f32_ops *ops = cx->ops;
    const fm_block_ptrs *p = PARAMS(cx, b);
    int d = c->d_model, Ha = c->ffn_aux_hidden;
    size_t n = cx->n;
    float *ha = cx->ws->bws;
    ops->linear_fwd(b->hpre, x, p->aux_w3, NULL, n, d, Ha);  // hpre: (n, Ha)
    ops->gelu_fwd(ha, b->hpre, n * Ha);                      // h: (n, Ha)
    ops->linear_fwd(y, ha, p->aux_w4, NULL, n, Ha, d);       // y: (n, d)
    return PHAX_OK;
}

static int aux_bwd(const fm_ctx *cx, fm_branch *b, float *dx, const float *dy, const float *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    const phax_f32_ops *ops = cx->ops;
    const fm_block_ptrs *p = PARAMS(cx, b), *g = GRADS(cx, b);
    int d = c->d_model, Ha = c->ffn_aux_hidden;
    size_t n = cx->n;
    float *dh = cx->ws->bws, *dhpre = dh + n * Ha, *ha = dhpre + n * Ha;
    ops->zero(dh, 2 * n * Ha);
    ops->gelu_fwd(ha, b->hpre, n * Ha);  // h, as the forward made it
    ops->linear_bwd(dh, g->aux_w4, NULL, dy, ha, p->aux_w4, n, Ha, d);
    ops->gelu_bwd(dhpre, dh, b->hpre, n * Ha);
    ops->linear_bwd(dx, g->aux_w3, NULL, dhpre, x, p->aux_w3, n, d, Ha);
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// GSS branch (docs/spec.md §3.1), without its own pre-norm and shortcut:
//   xv = x Wvᵀ, v = GELU(xv) (n, F);  xu = x Wuᵀ, u = GELU(xu) (n, Hs);  ū = LayerNorm(u)
//   K = dss_kernel(Λ, C) (Hs, T);  ys = ssm_conv(ū, K, D) (B, T, Hs)
//   yc = ys Wcᵀ (n, F);  gt = yc ⊙ v;  y = gt Woᵀ (n, d)
// Kept per block: xv, xu, ys, yc and K. v, u, ū and gt are one elementwise op (or a LayerNorm)
// from what is kept: the forward makes them in the backward scratch (free during a forward) and
// the backward makes them again, bit for bit (the same ops on the same values). At d 128, T 8192
// that is 4 blocks × (2F + 2Hs)·n floats less, 75.5 MB, for one (n, F) more of backward scratch,
// 8.4 MB (phax info; evals/README.md, "Training memory").
static int gss_fwd(const fm_ctx *cx, fm_branch *b, float *y, const float *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    const phax_f32_ops *ops = cx->ops;
    const fm_block_ptrs *p = PARAMS(cx, b);
    int d = c->d_model, F = c->gss_expand, Hs = c->gss_hidden, N = c->gss_state;
    size_t n = cx->n, nF = n * (size_t)F, nH = n * (size_t)Hs;
    void *kws = cx->ws->kws;
    float *v = cx->ws->bws, *gt = v + nF, *u = gt + nF, *ub = u + nH;
    ops->linear_fwd(b->gxv, x, p->gss_wv, NULL, n, d, F);
    ops->gelu_fwd(v, b->gxv, nF);
    ops->linear_fwd(b->gxu, x, p->gss_wu, NULL, n, d, Hs);
    ops->gelu_fwd(u, b->gxu, nH);
    ops->layernorm_fwd(ub, u, p->gss_ln_g, p->gss_ln_b, n, Hs, PHAX_LAYERNORM_EPS);
    FM_PROF(cx, FMODEL_PART_GSS_KERNEL,
            ops->dss_kernel_fwd(b->gK, p->gss_lre, p->gss_lim, p->gss_cre, p->gss_cim, Hs, N, cx->T, kws));
    int rc;
    FM_PROF(cx, FMODEL_PART_GSS_CONV,
            rc = ops->ssm_conv_fwd(b->gys, ub, b->gK, p->gss_d, cx->B, cx->T, Hs, cx->ws->ssm_plan, kws));
    if (rc) return PHAX_ERR;
    ops->linear_fwd(b->gyc, b->gys, p->gss_wc, NULL, n, Hs, F);
    ops->mul(gt, b->gyc, v, nF);  // gt = yc ⊙ v
    ops->linear_fwd(y, gt, p->gss_wo, NULL, n, F, d);
    return PHAX_OK;
}

static int gss_bwd(const fm_ctx *cx, fm_branch *b, float *dx, const float *dy, const float *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    const phax_f32_ops *ops = cx->ops;
    const fm_block_ptrs *p = PARAMS(cx, b), *g = GRADS(cx, b);
    int d = c->d_model, F = c->gss_expand, Hs = c->gss_hidden, N = c->gss_state;
    int B = cx->B, T = cx->T;
    size_t n = cx->n, nF = n * (size_t)F, nH = n * (size_t)Hs;
    void *kws = cx->ws->kws;
    float *dgt = cx->ws->bws, *dyc = dgt + nF, *dv = dyc + nF, *dxv = dv + nF;
    float *dys = dxv + nF, *dub = dys + nH, *du = dub + nH, *dxu = du + nH, *dK = dxu + nH;
    float *v = dK + (size_t)Hs * T;  // the forward's v, made again
    // Slots not yet written when a remade value is read: gt in dxv's, u in dxu's, ū in du's
    // (each zeroed again before its gradient is added there).
    float *gt = dxv, *u = dxu, *ub = du;
    ops->zero(dgt, 4 * nF + 4 * nH + (size_t)Hs * T);
    ops->gelu_fwd(v, b->gxv, nF);
    ops->mul(gt, b->gyc, v, nF);
    // y = gt Woᵀ
    ops->linear_bwd(dgt, g->gss_wo, NULL, dy, gt, p->gss_wo, n, F, d);
    ops->zero(dxv, nF);
    // gt = yc ⊙ v
    ops->mul_bwd(dyc, dv, dgt, b->gyc, v, nF);
    // yc = ys Wcᵀ
    ops->linear_bwd(dys, g->gss_wc, NULL, dyc, b->gys, p->gss_wc, n, Hs, F);
    // ys = ssm_conv(ū, K, D); K = dss_kernel(Λ, C)
    ops->gelu_fwd(u, b->gxu, nH);
    ops->layernorm_fwd(ub, u, p->gss_ln_g, p->gss_ln_b, n, Hs, PHAX_LAYERNORM_EPS);
    int rc;
    FM_PROF(cx, FMODEL_PART_GSS_CONV,
            rc = ops->ssm_conv_bwd(dub, dK, g->gss_d, dys, ub, b->gK, p->gss_d, B, T, Hs, cx->ws->ssm_plan, kws));
    if (rc) return PHAX_ERR;
    FM_PROF(cx, FMODEL_PART_GSS_KERNEL,
            ops->dss_kernel_bwd(g->gss_lre, g->gss_lim, g->gss_cre, g->gss_cim, dK, p->gss_lre, p->gss_lim,
                                p->gss_cre, p->gss_cim, Hs, N, T, kws));
    // ū = LayerNorm(u); u = GELU(xu); v = GELU(xv)
    ops->zero(du, nH);
    ops->layernorm_bwd(du, g->gss_ln_g, g->gss_ln_b, dub, u, p->gss_ln_g, n, Hs,
                       PHAX_LAYERNORM_EPS, kws);
    ops->zero(dxu, nH);
    ops->gelu_bwd(dxu, du, b->gxu, nH);
    ops->gelu_bwd(dxv, dv, b->gxv, nF);
    // xu = x Wuᵀ, xv = x Wvᵀ
    ops->linear_bwd(dx, g->gss_wu, NULL, dxu, x, p->gss_wu, n, d, Hs);
    ops->linear_bwd(dx, g->gss_wv, NULL, dxv, x, p->gss_wv, n, d, F);
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// mLSTM layer (docs/spec.md §3.3) on its normalised input x̄ = x here:
//   q, k = x̄ W_{q,k}ᵀ (n, d/2); v = x̄ W_vᵀ (n, d); o = σ(x̄ W_oᵀ) (n, d)
//   ĩ = cap(x̄ W_iᵀ + b_i), f̃ = cap(x̄ W_fᵀ + b_f) (n, NH), cap(z) = 15 tanh(z/15)
//   h̃ = cell(q, k, v, ĩ, f̃) (chunkwise; the parallel form's function)
//   h = o ⊙ headnorm(h̃);  y = h W_outᵀ
// Kept per layer: q, k, v, o, the gates' preactivations and h̃. ĩ, f̃, headnorm(h̃) and h are an
// elementwise op or a norm from those: the forward makes them in the backward scratch and the
// backward makes them again (the same ops, the same bits).
static int mlstm_fwd(const fm_ctx *cx, fm_branch *b, float *y, const float *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    const phax_f32_ops *ops = cx->ops;
    const fm_block_ptrs *p = PARAMS(cx, b);
    int d = c->d_model, NH = c->mlstm_heads, dk = d / 2;
    int dqk = dk / NH, dv = d / NH;
    size_t n = cx->n, nd = n * (size_t)d, ng = n * (size_t)NH;
    float *ig = cx->ws->bws, *fg = ig + ng, *hn = fg + ng, *h = hn + nd;
    ops->linear_fwd(b->mq, x, p->ml_wq, NULL, n, d, dk);
    ops->linear_fwd(b->mk, x, p->ml_wk, NULL, n, d, dk);
    ops->linear_fwd(b->mv, x, p->ml_wv, NULL, n, d, d);
    ops->linear_fwd(b->mo, x, p->ml_ogate, NULL, n, d, d);  // opre, then σ in place
    ops->linear_fwd(b->mipre, x, p->ml_igate_w, p->ml_igate_b, n, d, NH);
    ops->linear_fwd(b->mfpre, x, p->ml_fgate_w, p->ml_fgate_b, n, d, NH);
    ops->sigmoid_inplace(b->mo, nd);
    ops->gate_cap_fwd(ig, b->mipre, ng);
    ops->gate_cap_fwd(fg, b->mfpre, ng);
    int rc;
    FM_PROF(cx, FMODEL_PART_MLSTM_KERNEL,
            rc = ops->mlstm_fwd(b->mhc, b->mq, b->mk, b->mv, ig, fg, cx->B, cx->T, NH,
                                dqk, dv, (float)PHAX_MLSTM_EPS, ops->mlstm_chunk, NULL, NULL,
                                cx->ws->kws));
    if (rc) return PHAX_ERR;
    ops->headnorm_fwd(hn, b->mhc, p->ml_headnorm, n, NH, dv, c->mlstm_norm_eps);
    ops->mul(h, b->mo, hn, nd);  // h = o ⊙ hn
    ops->linear_fwd(y, h, p->ml_out, NULL, n, d, d);
    return PHAX_OK;
}

static int mlstm_bwd(const fm_ctx *cx, fm_branch *b, float *dx, const float *dy, const float *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    const phax_f32_ops *ops = cx->ops;
    const fm_block_ptrs *p = PARAMS(cx, b), *g = GRADS(cx, b);
    int d = c->d_model, NH = c->mlstm_heads, dk = d / 2;
    int dqk = dk / NH, dv = d / NH;
    size_t n = cx->n, nd = n * (size_t)d, nk = n * (size_t)dk, ng = n * (size_t)NH;
    float *dq = cx->ws->bws, *dk_ = dq + nk, *dv_ = dk_ + nk, *dh = dv_ + nd, *dhc = dh + nd,
          *dop = dhc + nd, *dig = dop + nd, *dfg = dig + ng;
    float *hn = dfg + ng, *ig = hn + nd, *fg = ig + ng, *h = dhc;  // remade; h in dhc's slot
    ops->zero(dq, 2 * nk + 4 * nd + 2 * ng);
    ops->headnorm_fwd(hn, b->mhc, p->ml_headnorm, n, NH, dv, c->mlstm_norm_eps);
    ops->mul(h, b->mo, hn, nd);
    // y = h W_outᵀ
    ops->linear_bwd(dh, g->ml_out, NULL, dy, h, p->ml_out, n, d, d);
    ops->zero(dhc, nd);
    // h = o ⊙ hn, o = σ(opre): d opre = dh hn o (1 − o); d hn = dh o (in place)
    ops->sigmoid_mul_bwd(dop, dh, hn, b->mo, nd);
    ops->headnorm_bwd(dhc, g->ml_headnorm, dh, b->mhc, p->ml_headnorm, n, NH, dv,
                      c->mlstm_norm_eps, cx->ws->kws);
    ops->gate_cap_fwd(ig, b->mipre, ng);
    ops->gate_cap_fwd(fg, b->mfpre, ng);
    int rc;
    FM_PROF(cx, FMODEL_PART_MLSTM_KERNEL,
            rc = ops->mlstm_bwd(dq, dk_, dv_, dig, dfg, dhc, b->mq, b->mk, b->mv, ig, fg,
                                cx->B, cx->T, NH, dqk, dv, (float)PHAX_MLSTM_EPS,
                                ops->mlstm_chunk, cx->ws->kws));
    if (rc) return PHAX_ERR;
    // ĩ = cap(ipre), f̃ = cap(fpre): d cap/dz = 1 − tanh²(z/15)
    ops->gate_cap_bwd(dig, b->mipre, ng);
    ops->gate_cap_bwd(dfg, b->mfpre, ng);
    ops->linear_bwd(dx, g->ml_wq, NULL, dq, x, p->ml_wq, n, d, dk);
    ops->linear_bwd(dx, g->ml_wk, NULL, dk_, x, p->ml_wk, n, d, dk);
    ops->linear_bwd(dx, g->ml_wv, NULL, dv_, x, p->ml_wv, n, d, d);
    ops->linear_bwd(dx, g->ml_ogate, NULL, dop, x, p->ml_ogate, n, d, d);
    ops->linear_bwd(dx, g->ml_igate_w, g->ml_igate_b, dig, x, p->ml_igate_w, n, d, NH);
    ops->linear_bwd(dx, g->ml_fgate_w, g->ml_fgate_b, dfg, x, p->ml_fgate_w, n, d, NH);
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// Gated DeltaNet layer (swax_gdn; docs/spec.md §2.13 "The layer", ref_gdn_layer_*): the
// projections, the short convolutions with SiLU, the gates, the chunkwise cell, the RMSNorm over
// each head's dv ⊙ SiLU(z), the output projection. Kept: the projections and the cell's output.
static phax_gdn_cfg gdn_cell_cfg(int dk) { return (phax_gdn_cfg){1 / sqrt((double)dk), 1}; }

// The cell's inputs from the kept projections: q, k (n, d/2), v (n, d) = SiLU(conv(qp, kp, vp)),
// g, β (n, GH) = gates(a, b). The forward makes them; the backward remakes them.
static int gdn_cell_inputs(const fm_ctx *cx, const fm_branch *b, float *q, float *k, float *v, float *g, float *beta) {
    const phax_model_cfg *c = &cx->m->cfg;
    const phax_f32_ops *ops = cx->ops;
    const fm_block_ptrs *p = PARAMS(cx, b);
    const int d = c->d_model, K = c->gdn_conv;
    if (ops->gdn_conv_fwd(q, b->gqp, p->gd_conv_q, cx->B, cx->T, d / 2, K) ||
        ops->gdn_conv_fwd(k, b->gkp, p->gd_conv_k, cx->B, cx->T, d / 2, K) ||
        ops->gdn_conv_fwd(v, b->gvp, p->gd_conv_v, cx->B, cx->T, d, K))
        return PHAX_ERR;
    return ops->gdn_gates_fwd(g, beta, b->ga, b->gb, p->gd_A_log, p->gd_dt_bias, cx->n, c->gdn_heads);
}

static int gdn_fwd(const fm_ctx *cx, fm_branch *b, float *y, const float *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    const phax_f32_ops *ops = cx->ops;
    const fm_block_ptrs *p = PARAMS(cx, b);
    int d = c->d_model, GH = c->gdn_heads, dk = d / 2 / GH, dv = d / GH;
    size_t n = cx->n, nd = n * (size_t)d, nk = n * (size_t)(d / 2), ng = n * (size_t)GH;
    float *q = cx->ws->bws, *k = q + nk, *v = k + nk, *g = v + nd, *beta = g + ng, *on = beta + ng, *sz = on + nd,
          *h = sz + nd;
    ops->linear_fwd(b->gqp, x, p->gd_wq, NULL, n, d, d / 2);
    ops->linear_fwd(b->gkp, x, p->gd_wk, NULL, n, d, d / 2);
    ops->linear_fwd(b->gvp, x, p->gd_wv, NULL, n, d, d);
    ops->linear_fwd(b->gz, x, p->gd_wg, NULL, n, d, d);
    ops->linear_fwd(b->ga, x, p->gd_wa, NULL, n, d, GH);
    ops->linear_fwd(b->gb, x, p->gd_wb, NULL, n, d, GH);
    if (gdn_cell_inputs(cx, b, q, k, v, g, beta)) return PHAX_ERR;
    const phax_gdn_cfg cc = gdn_cell_cfg(dk);
    int rc;
    FM_PROF(cx, FMODEL_PART_GDN_KERNEL,
            rc = ops->gdn_fwd(b->go, q, k, v, g, beta, cx->B, cx->T, GH, dk, dv, &cc, ops->gdn_chunk, cx->ws->kws));
    if (rc) return PHAX_ERR;
    ops->rmsnorm_fwd(on, b->go, p->gd_norm, n * (size_t)GH, dv, c->gdn_norm_eps);
    ops->silu_fwd(sz, b->gz, nd);
    ops->mul(h, on, sz, nd);
    ops->linear_fwd(y, h, p->gd_out, NULL, n, d, d);
    return PHAX_OK;
}

static int gdn_bwd(const fm_ctx *cx, fm_branch *b, float *dx, const float *dy, const float *x) {
    const phax_model_cfg *c = &cx->m->cfg;
    const phax_f32_ops *ops = cx->ops;
    const fm_block_ptrs *p = PARAMS(cx, b), *gr = GRADS(cx, b);
    int d = c->d_model, GH = c->gdn_heads, K = c->gdn_conv, dk = d / 2 / GH, dv = d / GH;
    size_t n = cx->n, nd = n * (size_t)d, nk = n * (size_t)(d / 2), ng = n * (size_t)GH;
    float *dh = cx->ws->bws, *on = dh + nd, *sz = on + nd, *dz = sz + nd, *dsz = dz + nd, *dv_ = dsz + nd,
          *v = dv_ + nd, *dp = v + nd;                               // (n, d) each
    float *q = dp + nd, *k = q + nk, *dq = k + nk, *dk_ = dq + nk;   // (n, d/2) each
    float *g = dk_ + nk, *beta = g + ng, *dg = beta + ng, *dbeta = dg + ng, *da = dbeta + ng, *db = da + ng;
    float *h = dz, *don = dp, *do_ = dsz;  // h: spent before dz is formed; don, do_: reuse (below)
    ops->zero(dh, 8 * nd + 4 * nk + 6 * ng);
    // remade: on = RMSNorm(o), sz = SiLU(z), h = on ⊙ sz
    ops->rmsnorm_fwd(on, b->go, p->gd_norm, n * (size_t)GH, dv, c->gdn_norm_eps);
    ops->silu_fwd(sz, b->gz, nd);
    ops->mul(h, on, sz, nd);
    // y = h Woᵀ; h = on ⊙ sz
    ops->linear_bwd(dh, gr->gd_out, NULL, dy, h, p->gd_out, n, d, d);
    ops->mul_bwd(don, dsz, dh, on, sz, nd);  // d on = dh ⊙ sz, d sz = dh ⊙ on (overwritten)
    ops->zero(dz, nd);
    ops->silu_bwd(dz, dsz, b->gz, nd);  // z = x Wgᵀ
    ops->linear_bwd(dx, gr->gd_wg, NULL, dz, x, p->gd_wg, n, d, d);
    ops->zero(do_, nd);  // dsz is spent
    ops->rmsnorm_bwd(do_, gr->gd_norm, don, b->go, p->gd_norm, n * (size_t)GH, dv, c->gdn_norm_eps, cx->ws->kws);
    if (gdn_cell_inputs(cx, b, q, k, v, g, beta)) return PHAX_ERR;  // remade
    const phax_gdn_cfg cc = gdn_cell_cfg(dk);
    int rc;
    FM_PROF(cx, FMODEL_PART_GDN_KERNEL,
            rc = ops->gdn_bwd(dq, dk_, dv_, dg, dbeta, do_, q, k, v, g, beta, cx->B, cx->T, GH, dk, dv, &cc,
                              ops->gdn_chunk, cx->ws->kws));
    if (rc) return PHAX_ERR;
    if (ops->gdn_gates_bwd(da, db, gr->gd_A_log, gr->gd_dt_bias, dg, dbeta, b->ga, b->gb, p->gd_A_log, p->gd_dt_bias,
                           n, GH))
        return PHAX_ERR;
    ops->linear_bwd(dx, gr->gd_wa, NULL, da, x, p->gd_wa, n, d, GH);
    ops->linear_bwd(dx, gr->gd_wb, NULL, db, x, p->gd_wb, n, d, GH);
    // q, k, v: the convolutions (their scratch: the kernel workspace, free again), then the
    // projections; dp (don, spent) holds each projection's gradient in turn
    const float *dpost[3] = {dq, dk_, dv_}, *pre[3] = {b->gqp, b->gkp, b->gvp};
    const float *cw[3] = {p->gd_conv_q, p->gd_conv_k, p->gd_conv_v}, *pw[3] = {p->gd_wq, p->gd_wk, p->gd_wv};
    float *dcw[3] = {gr->gd_conv_q, gr->gd_conv_k, gr->gd_conv_v}, *dpw[3] = {gr->gd_wq, gr->gd_wk, gr->gd_wv};
    const int C[3] = {d / 2, d / 2, d};
    for (int s = 0; s < 3; s++) {
        ops->zero(dp, n * (size_t)C[s]);
        if (ops->gdn_conv_bwd(dp, dcw[s], dpost[s], pre[s], cw[s], cx->B, cx->T, C[s], K, cx->ws->kws)) return PHAX_ERR;
        ops->linear_bwd(dx, dpw[s], NULL, dp, x, pw[s], n, d, C[s]);
    }
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
    case PHAX_SUB_GDN: return gdn_fwd(cx, b, y, x);
    case PHAX_SUB_DUAL: {  // y = SwiGLU(x) + aux(x)
        if (swiglu_fwd(cx, b, y, x) || aux_fwd(cx, b, b->tmp, x)) return PHAX_ERR;
        cx->ops->acc(y, b->tmp, cx->n * (size_t)cx->m->cfg.d_model);
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
    case PHAX_SUB_GDN: return gdn_bwd(cx, b, dx, dy, x);
    case PHAX_SUB_DUAL:  // dy reaches both parts unchanged
        if (swiglu_bwd(cx, b, dx, dy, x)) return PHAX_ERR;
        return aux_bwd(cx, b, dx, dy, x);
    }
    return phax_fail("model: unknown branch kind %d", (int)b->kind);
}

// ---------------------------------------------------------------------------
// Sizes. The layout functions run twice (count, then assign), so they only take.
void fm_branch_layout(const phax_f32_ops *ops, fm_arena *a, fm_branch *b, const phax_model_cfg *c,
                      int B, int T) {
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
        b->keep = fm_take(a, ops->swiglu_keep_len(n, c->ffn_hidden));
        if (b->kind == PHAX_SUB_SWIGLU) break;
        /* fall through */
    case PHAX_SUB_AUX:
        b->hpre = fm_take(a, n * c->ffn_aux_hidden);
        break;
    case PHAX_SUB_GSS: {
        size_t nF = n * c->gss_expand, nH = n * c->gss_hidden;
        b->gxv = fm_take(a, nF), b->gyc = fm_take(a, nF);
        b->gxu = fm_take(a, nH), b->gys = fm_take(a, nH);
        b->gK = fm_take(a, (size_t)c->gss_hidden * T);
        break;
    }
    case PHAX_SUB_MLSTM: {
        size_t nk = n * (size_t)(d / 2), ng = n * (size_t)c->mlstm_heads;
        b->mq = fm_take(a, nk), b->mk = fm_take(a, nk);
        b->mv = fm_take(a, nd), b->mo = fm_take(a, nd), b->mhc = fm_take(a, nd);
        b->mipre = fm_take(a, ng), b->mfpre = fm_take(a, ng);
        break;
    }
    case PHAX_SUB_GDN: {
        size_t nk = n * (size_t)(d / 2), ng = n * (size_t)c->gdn_heads;
        b->gqp = fm_take(a, nk), b->gkp = fm_take(a, nk);
        b->gvp = fm_take(a, nd), b->gz = fm_take(a, nd), b->go = fm_take(a, nd);
        b->ga = fm_take(a, ng), b->gb = fm_take(a, ng);
        break;
    }
    }
}

static size_t zmax(size_t a, size_t b) { return a > b ? a : b; }

size_t fm_branch_bwd_len(const phax_f32_ops *ops, phax_sub_kind k, const phax_model_cfg *c, size_t n, int T) {
    size_t d = (size_t)c->d_model;
    // SwiGLU's forward makes h here (its kernel's fwd_keep_ws, bytes)
    size_t hs = (ops->swiglu_fwd_keep_ws(n, c->d_model, c->ffn_hidden) + sizeof(float) - 1) / sizeof(float);
    switch (k) {
    case PHAX_SUB_ATTN: return n * (2 * (size_t)c->n_heads + 2 * (size_t)c->n_kv_heads) * c->head_dim;
    case PHAX_SUB_SWIGLU: return hs;
    case PHAX_SUB_AUX: return 3 * n * c->ffn_aux_hidden;  // dh, dhpre, h remade
    case PHAX_SUB_DUAL: return zmax(hs, 3 * n * c->ffn_aux_hidden);
    // dgt dyc dv dxv, dys dub du dxu, dK, v remade (the forward's 2F + 2Hs fit in it)
    case PHAX_SUB_GSS: return 5 * n * c->gss_expand + 4 * n * c->gss_hidden + (size_t)c->gss_hidden * T;
    // dq dk, dv dh dhc dop, dig dfg; hn, ĩ, f̃ remade (h in dhc's slot; the forward's 2 nd + 2 ng fit)
    case PHAX_SUB_MLSTM: return 2 * n * (d / 2) + 5 * n * d + 4 * n * c->mlstm_heads;
    // dh on sz dz do dv v dp, q k dq dk, g β dg dβ da db (the forward's 4 nd + 2 nk + 2 ng fit)
    case PHAX_SUB_GDN: return 8 * n * d + 4 * n * (d / 2) + 6 * n * c->gdn_heads;
    }
    return 0;
}


size_t fm_branch_kernel_ws(const phax_f32_ops *ops, phax_sub_kind k, const phax_model_cfg *c,
                           int B, int T, int nthreads, const struct fmodel_ws *ws) {
    size_t n = (size_t)B * T, s = 0;
    switch (k) {
    case PHAX_SUB_ATTN: {
        // Every window a call may use: full, the configured ones.
        int wins[4] = {0, c->attn_window, c->w_short, c->w_long};
        for (int i = 0; i < 4; i++) {
            phax_attn_cfg a = phax_plan_attn_cfg(c, -1, wins[i] > 0 ? wins[i] : 0);
            s = zmax(s, ops->attention_fwd_ws(B, T, &a, nthreads));
            s = zmax(s, ops->attention_bwd_ws(B, T, &a, nthreads));
        }
        return s;
    }
    case PHAX_SUB_SWIGLU:
    case PHAX_SUB_DUAL: return ops->swiglu_bwd_kept_ws(n, c->d_model, c->ffn_hidden);
    case PHAX_SUB_AUX: return 0;
    case PHAX_SUB_GSS:
        s = zmax(ops->dss_kernel_fwd_ws(c->gss_hidden, c->gss_state, T),
                 ops->dss_kernel_bwd_ws(c->gss_hidden, c->gss_state, T));
        s = zmax(s, ops->ssm_conv_fwd_ws(ws->ssm_plan));
        s = zmax(s, ops->ssm_conv_bwd_ws(ws->ssm_plan));
        return zmax(s, ops->layernorm_bwd_ws(n, c->gss_hidden));
    case PHAX_SUB_MLSTM: {
        int NH = c->mlstm_heads, dqk = c->d_model / 2 / NH, dv = c->d_model / NH;
        s = ops->mlstm_fwd_ws(B, T, NH, dqk, dv, ops->mlstm_chunk);
        s = zmax(s, ops->mlstm_bwd_ws(B, T, NH, dqk, dv, ops->mlstm_chunk));
        return zmax(s, ops->headnorm_bwd_ws(n, NH, dv));
    }
    case PHAX_SUB_GDN: {
        int GH = c->gdn_heads, dk = c->d_model / 2 / GH, dv = c->d_model / GH;
        s = ops->gdn_fwd_ws(B, T, GH, dk, dv, ops->gdn_chunk);
        s = zmax(s, ops->gdn_bwd_ws(B, T, GH, dk, dv, ops->gdn_chunk));
        s = zmax(s, ops->rmsnorm_bwd_ws(n * (size_t)GH, dv));
        return zmax(s, ops->gdn_conv_bwd_ws(B, T, c->d_model));
    }
    }
    return 0;
}
