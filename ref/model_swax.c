// ref SWAX family (swax, swa, mlstm), float64: pre-norm blocks of a sequence
// mixer (sliding-window attention or an mLSTM layer) and a SwiGLU FFN.
// docs/spec.md §3.3. Built from the ref ops only; slow and readable.
//
//   x_0 = E[tokens]                                   (no embedding norm)
//   block l = 0..L−1:
//     mid_l   = x_l   + mixer_l(RMSNorm_{norm_mixer}(x_l))   mixer: mLSTM if phax_layer_is_mlstm
//     x_{l+1} = mid_l + SwiGLU(RMSNorm_{norm_ffn}(mid_l))
//   logits = RMSNorm_{norm_f}(x_L) Eᵀ  (or lm_headᵀ when untied);  loss = mean cross-entropy
//
// Backward keeps the residual stream (x_l and mid_l of every block) from the
// forward and recomputes everything inside a block (norms, mixer, FFN) from it,
// in the ref habit of caching as little as possible.
#include <math.h>
#include <string.h>

#include "model_internal.h"

// --------------------------------------------------------------------------------
// mLSTM gate soft-cap: cap(z) = 15·tanh(z/15) (spec §1.4), applied to ĩ and f̃.
#define GATE_CAP 15.0

static double gate_cap(double z) { return GATE_CAP * tanh(z / GATE_CAP); }
static double gate_cap_deriv(double z) {  // d cap / dz = 1 − tanh²(z/15)
    double t = tanh(z / GATE_CAP);
    return 1.0 - t * t;
}

// Activations of one mLSTM layer on its normalised input x̄: (n, d), n = B·T.
// One allocation holds them all (zeroed by phax_alloc).
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
// The cell is the PARALLEL form (ref_mlstm_parallel_*): O(T²) per sequence and
// head, but the simplest; the recurrent form computes the same function
// (spec §2.9) and the fast tiers use the chunkwise one.
static int mlstm_acts_fwd(mlstm_acts *a, const double *xbar, const ref_model *m, int l, int B, int T) {
    const phax_model_cfg *c = &m->cfg;
    size_t n = (size_t)B * T;
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
    ref_linear_fwd(a->q, xbar, rm_param(m, l, "mlstm.wq.weight"), NULL, n, d, dk);       // (n, d/2)
    ref_linear_fwd(a->k, xbar, rm_param(m, l, "mlstm.wk.weight"), NULL, n, d, dk);       // (n, d/2)
    ref_linear_fwd(a->v, xbar, rm_param(m, l, "mlstm.wv.weight"), NULL, n, d, d);        // (n, d)
    ref_linear_fwd(a->opre, xbar, rm_param(m, l, "mlstm.ogate.weight"), NULL, n, d, d);  // (n, d)
    ref_linear_fwd(a->ipre, xbar, rm_param(m, l, "mlstm.igate.weight"),
                   rm_param(m, l, "mlstm.igate.bias"), n, d, NH);                        // (n, NH)
    ref_linear_fwd(a->fpre, xbar, rm_param(m, l, "mlstm.fgate.weight"),
                   rm_param(m, l, "mlstm.fgate.bias"), n, d, NH);                        // (n, NH)
    for (size_t i = 0; i < nd; i++) a->o[i] = ref_sigmoid(a->opre[i]);
    for (size_t i = 0; i < ng; i++) a->ig[i] = gate_cap(a->ipre[i]), a->fg[i] = gate_cap(a->fpre[i]);

    // Cell: (n, NH·dqk) rows are (B, T, NH, dqk) without a copy (spec §1.1).
    if (ref_mlstm_parallel_fwd(a->hc, a->q, a->k, a->v, a->ig, a->fg, B, T, NH, dqk, dv,
                               PHAX_MLSTM_EPS))
        return PHAX_ERR;
    ref_headnorm_fwd(a->hn, a->hc, rm_param(m, l, "mlstm.headnorm.weight"), n, NH, dv,
                     c->mlstm_norm_eps);
    for (size_t i = 0; i < nd; i++) a->h[i] = a->o[i] * a->hn[i];
    return PHAX_OK;
}

// y: (n, d) = mLSTM layer of block l applied to x̄: (n, d).
static int mlstm_fwd(double *y, const double *xbar, const ref_model *m, int l, int B, int T) {
    int d = m->cfg.d_model;
    mlstm_acts a = {0};
    int rc = mlstm_acts_fwd(&a, xbar, m, l, B, T);
    if (!rc) ref_linear_fwd(y, a.h, rm_param(m, l, "mlstm.out.weight"), NULL, (size_t)B * T, d, d);
    phax_free(a.buf);
    return rc;
}

// dxbar += ∂/∂x̄ of Σ dy ⊙ y, and the block's mLSTM parameter gradients
// (into grads; skipped when grads is NULL). dxbar may be NULL.
static int mlstm_bwd(double *dxbar, double *grads, const double *dy, const double *xbar,
                     const ref_model *m, int l, int B, int T) {
    const phax_model_cfg *c = &m->cfg;
    size_t n = (size_t)B * T;
    int d = c->d_model, NH = c->mlstm_heads, dk = d / 2;
    int dqk = dk / NH, dv = d / NH;
    size_t nd = n * (size_t)d, nk = n * (size_t)dk, ng = n * (size_t)NH;

    mlstm_acts a = {0};
    double *buf = rm_alloc(2 * nk + 4 * nd + 2 * ng);  // zeroed: the ops below ADD into it
    int rc = PHAX_ERR;
    if (!buf || mlstm_acts_fwd(&a, xbar, m, l, B, T)) goto done;
    double *p = buf;
    double *dq = p; p += nk;   // (n, d/2)
    double *dk_ = p; p += nk;  // (n, d/2)
    double *dv_ = p; p += nd;  // (n, d)
    double *dh = p; p += nd;   // (n, d): gradient of h = o ⊙ hn
    double *dhc = p; p += nd;  // (n, d): gradient of the cell output h̃
    double *dop = p; p += nd;  // (n, d): gradient of opre (then of hn, reused below)
    double *dig = p; p += ng;  // (n, NH): gradient of ĩ, then of ipre
    double *dfg = p;           // (n, NH): gradient of f̃, then of fpre

    // y = h W_outᵀ
    ref_linear_bwd(dh, rm_grad(m, grads, l, "mlstm.out.weight"), NULL, dy, a.h,
                   rm_param(m, l, "mlstm.out.weight"), n, d, d);
    // h = o ⊙ hn, o = σ(opre):  d opre = dh ⊙ hn ⊙ o(1 − o);  d hn = dh ⊙ o (into dh, in place)
    for (size_t i = 0; i < nd; i++) {
        dop[i] = dh[i] * a.hn[i] * a.o[i] * (1.0 - a.o[i]);
        dh[i] = dh[i] * a.o[i];
    }
    // hn = headnorm(h̃)
    ref_headnorm_bwd(dhc, rm_grad(m, grads, l, "mlstm.headnorm.weight"), dh, a.hc,
                     rm_param(m, l, "mlstm.headnorm.weight"), n, NH, dv, c->mlstm_norm_eps);
    // h̃ = cell(q, k, v, ĩ, f̃)
    if ((rc = ref_mlstm_parallel_bwd(dq, dk_, dv_, dig, dfg, dhc, a.q, a.k, a.v, a.ig, a.fg, B, T,
                                     NH, dqk, dv, PHAX_MLSTM_EPS)))
        goto done;
    // ĩ = cap(ipre), f̃ = cap(fpre)
    for (size_t i = 0; i < ng; i++) {
        dig[i] *= gate_cap_deriv(a.ipre[i]);
        dfg[i] *= gate_cap_deriv(a.fpre[i]);
    }
    // The six projections of x̄, each adding into dxbar.
    ref_linear_bwd(dxbar, rm_grad(m, grads, l, "mlstm.wq.weight"), NULL, dq, xbar,
                   rm_param(m, l, "mlstm.wq.weight"), n, d, dk);
    ref_linear_bwd(dxbar, rm_grad(m, grads, l, "mlstm.wk.weight"), NULL, dk_, xbar,
                   rm_param(m, l, "mlstm.wk.weight"), n, d, dk);
    ref_linear_bwd(dxbar, rm_grad(m, grads, l, "mlstm.wv.weight"), NULL, dv_, xbar,
                   rm_param(m, l, "mlstm.wv.weight"), n, d, d);
    ref_linear_bwd(dxbar, rm_grad(m, grads, l, "mlstm.ogate.weight"), NULL, dop, xbar,
                   rm_param(m, l, "mlstm.ogate.weight"), n, d, d);
    ref_linear_bwd(dxbar, rm_grad(m, grads, l, "mlstm.igate.weight"),
                   rm_grad(m, grads, l, "mlstm.igate.bias"), dig, xbar,
                   rm_param(m, l, "mlstm.igate.weight"), n, d, NH);
    ref_linear_bwd(dxbar, rm_grad(m, grads, l, "mlstm.fgate.weight"),
                   rm_grad(m, grads, l, "mlstm.fgate.bias"), dfg, xbar,
                   rm_param(m, l, "mlstm.fgate.weight"), n, d, NH);
    rc = PHAX_OK;
done:
    phax_free(a.buf);
    phax_free(buf);
    return rc;
}

// --------------------------------------------------------------------------------
// Mixer of block l on x̄ = RMSNorm(x): mLSTM or sliding-window attention.
static int mixer_fwd(double *y, const double *xbar, const ref_model *m, int l, int B, int T,
                     int window) {
    if (phax_layer_is_mlstm(&m->cfg, l)) return mlstm_fwd(y, xbar, m, l, B, T);
    return rm_attn_fwd(y, xbar, m, l, B, T, window);
}

static int mixer_bwd(double *dxbar, double *grads, const double *dy, const double *xbar,
                     const ref_model *m, int l, int B, int T, int window) {
    if (phax_layer_is_mlstm(&m->cfg, l)) return mlstm_bwd(dxbar, grads, dy, xbar, m, l, B, T);
    return rm_attn_bwd(dxbar, grads, dy, xbar, m, l, B, T, window);
}

// SwiGLU sub-layer of block l. x, y: (n, d).
static int ffn_fwd(double *y, const double *x, const ref_model *m, int l, size_t n) {
    return ref_swiglu_fwd(y, x, rm_param(m, l, "ffn.w_gate.weight"), rm_param(m, l, "ffn.w_up.weight"),
                          rm_param(m, l, "ffn.w_down.weight"), n, m->cfg.d_model, m->cfg.ffn_hidden);
}

static int ffn_bwd(double *dx, double *grads, const double *dy, const double *x, const ref_model *m,
                   int l, size_t n) {
    return ref_swiglu_bwd(dx, rm_grad(m, grads, l, "ffn.w_gate.weight"),
                          rm_grad(m, grads, l, "ffn.w_up.weight"),
                          rm_grad(m, grads, l, "ffn.w_down.weight"), dy, x,
                          rm_param(m, l, "ffn.w_gate.weight"), rm_param(m, l, "ffn.w_up.weight"),
                          rm_param(m, l, "ffn.w_down.weight"), n, m->cfg.d_model, m->cfg.ffn_hidden);
}

// --------------------------------------------------------------------------------
int ref_swax_family_run(const ref_model *m, const int32_t *tokens, const int32_t *targets, int B,
                        int T, int window, double *logits, double *loss, double *grads) {
    const phax_model_cfg *c = &m->cfg;
    const int L = c->n_layers, d = c->d_model;
    const size_t n = (size_t)B * T, nd = n * (size_t)d;
    const double eps = PHAX_RMSNORM_EPS;
    int rc = PHAX_ERR;

    // Residual stream kept for backward: xs = x_0..x_L, mids = mid_0..mid_{L−1}, each (n, d).
    double *xs = rm_alloc((size_t)(L + 1) * nd), *mids = rm_alloc((size_t)L * nd);
    double *xbar = rm_alloc(nd), *y = rm_alloc(nd), *xf = rm_alloc(nd);  // (n, d) scratch
    double *dx = NULL, *dxbar = NULL, *dxf = NULL;
    int grads_touched = 0;  // set once backward may have added into grads
    if (!xs || !mids || !xbar || !y || !xf) goto done;

    // ---- forward ----
    if (rm_embed_fwd(xs, m, tokens, n)) goto done;  // x_0 = E[tokens]: (n, d)
    for (int l = 0; l < L; l++) {
        const double *x = xs + (size_t)l * nd;
        double *mid = mids + (size_t)l * nd, *xnext = xs + (size_t)(l + 1) * nd;
        // mid = x + mixer(RMSNorm x)
        ref_rmsnorm_fwd(xbar, x, rm_param(m, l, "norm_mixer.weight"), n, d, eps);
        if (mixer_fwd(y, xbar, m, l, B, T, window)) goto done;
        for (size_t i = 0; i < nd; i++) mid[i] = x[i] + y[i];
        // x_{l+1} = mid + SwiGLU(RMSNorm mid)
        ref_rmsnorm_fwd(xbar, mid, rm_param(m, l, "norm_ffn.weight"), n, d, eps);
        if (ffn_fwd(y, xbar, m, l, n)) goto done;
        for (size_t i = 0; i < nd; i++) xnext[i] = mid[i] + y[i];
    }
    const double *xL = xs + (size_t)L * nd;
    const double *gf = rm_top(m, "norm_f.weight");
    ref_rmsnorm_fwd(xf, xL, gf, n, d, eps);  // final norm: (n, d)

    if (!grads) {  // forward only: logits and / or loss
        rc = rm_head(m, NULL, xf, NULL, targets, n, logits, loss);
        goto done;
    }

    // ---- backward of the mean loss (dloss = 1), adding into grads ----
    dx = rm_alloc(nd), dxbar = rm_alloc(nd), dxf = rm_alloc(nd);  // (n, d), zeroed
    if (!dx || !dxbar || !dxf) goto done;
    // rm_head writes no gradient when it fails (bad target, no memory).
    if (rm_head(m, grads, xf, dxf, targets, n, logits, loss)) goto done;  // dxf = ∂loss/∂xf
    grads_touched = 1;
    ref_rmsnorm_bwd(dx, rm_top_grad(m, grads, "norm_f.weight"), dxf, xL, gf, n, d, eps);  // dx = ∂/∂x_L
    for (int l = L - 1; l >= 0; l--) {
        const double *x = xs + (size_t)l * nd, *mid = mids + (size_t)l * nd;
        const double *g_ffn = rm_param(m, l, "norm_ffn.weight");
        const double *g_mix = rm_param(m, l, "norm_mixer.weight");
        // x_{l+1} = mid + SwiGLU(RMSNorm mid): dx (= ∂/∂x_{l+1}) passes the identity
        // path unchanged and gains the FFN path, becoming ∂/∂mid.
        ref_rmsnorm_fwd(xbar, mid, g_ffn, n, d, eps);
        memset(dxbar, 0, nd * sizeof *dxbar);
        if (ffn_bwd(dxbar, grads, dx, xbar, m, l, n)) goto done;
        ref_rmsnorm_bwd(dx, rm_grad(m, grads, l, "norm_ffn.weight"), dxbar, mid, g_ffn, n, d, eps);
        // mid = x + mixer(RMSNorm x): likewise dx becomes ∂/∂x_l.
        ref_rmsnorm_fwd(xbar, x, g_mix, n, d, eps);
        memset(dxbar, 0, nd * sizeof *dxbar);
        if (mixer_bwd(dxbar, grads, dx, xbar, m, l, B, T, window)) goto done;
        ref_rmsnorm_bwd(dx, rm_grad(m, grads, l, "norm_mixer.weight"), dxbar, x, g_mix, n, d, eps);
    }
    rm_embed_bwd(m, grads, dx, tokens, n);  // dE += scatter of ∂/∂x_0
    rc = PHAX_OK;

done:
    if (rc) {  // make a failure loud (spec §1.1): nothing left can pass for a result
        if (loss) *loss = NAN;
        if (logits)
            for (size_t i = 0; i < n * (size_t)c->vocab_size; i++) logits[i] = NAN;
        if (grads_touched)  // only allocation failures get here: bad tokens and targets fail earlier
            for (size_t i = 0; i < m->layout.numel; i++) grads[i] += NAN;
    }
    phax_free(xs), phax_free(mids), phax_free(xbar), phax_free(y), phax_free(xf);
    phax_free(dx), phax_free(dxbar), phax_free(dxf);
    return rc;
}
