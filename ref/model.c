// ref models: creation, parameter access, and the two runners of the model plan
// (phax/model_plan.h) — the parallel rule (pha: branches on one input, output
// norms, softplus mix, DeepNorm post-norm) and the pre-norm residual stack that
// transformer, serial, swax, swa, mlstm, swa_full and swax_gdn share — in float64 (docs/spec.md §3).
// The branches themselves are in model_branches.c. The oracle side of
// fast/model/model.c, in the same order: read them side by side.
//
// The runners keep only the residual stream during the forward pass (the input
// of every block (parallel) or sub-layer (pre-norm)); the backward walks it in
// reverse, recomputing each block's or sub-layer's internals from it, in the
// ref habit of caching as little as possible.
//
// Shapes: n = B·T rows; x: (n, d) = (B, T, d). Backward functions ADD into dx
// and into the call's gradients (at each parameter's offset).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

int ref_model_new(ref_model *m, const phax_model_cfg *cfg, uint64_t seed) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    if (phax_model_cfg_resolve(&m->cfg)) return PHAX_ERR;
    if (phax_layout_build(&m->layout, &m->cfg)) return PHAX_ERR;
    m->params = phax_alloc(m->layout.numel * sizeof(double));
    m->grads = phax_alloc(m->layout.numel * sizeof(double));
    if (!m->params || !m->grads) {
        ref_model_free(m);
        return PHAX_ERR;
    }
    if (phax_model_init(m->params, &m->layout, &m->cfg, seed)) {
        ref_model_free(m);
        return PHAX_ERR;
    }
    return PHAX_OK;
}

void ref_model_free(ref_model *m) {
    phax_free(m->params);
    phax_free(m->grads);
    phax_layout_free(&m->layout);
    memset(m, 0, sizeof *m);
}

double *ref_model_param(const ref_model *m, const char *name) {
    int i = phax_layout_find(&m->layout, name);
    return i < 0 ? NULL : m->params + m->layout.p[i].offset;
}

double *ref_model_grad(const ref_model *m, const char *name) {
    int i = phax_layout_find(&m->layout, name);
    return i < 0 ? NULL : m->grads + m->layout.p[i].offset;
}

void ref_model_zero_grad(ref_model *m) { memset(m->grads, 0, m->layout.numel * sizeof(double)); }

double *rm_alloc(size_t n) { return phax_alloc((n ? n : 1) * sizeof(double)); }

// ---------------------------------------------------------------------------
// Output head + loss. x: (n, d) final hidden; logits: (n, V) output (or NULL:
// internal). With gradients also dx += ∂loss/∂x and the head weight's gradient.
static int head(const rm_ctx *cx, const double *x, double *dx, const int32_t *targets,
                double *logits, double *loss) {
    const ref_model *m = cx->m;
    int V = m->cfg.vocab_size, d = m->cfg.d_model;
    size_t n = cx->n;
    const char *wname = m->cfg.tie_embeddings ? "embed.weight" : "lm_head.weight";
    const double *W = ref_model_param(m, wname);
    double *lg = logits ? logits : rm_alloc(n * (size_t)V);
    if (!lg) return PHAX_ERR;
    int rc = PHAX_OK;
    ref_linear_fwd(lg, x, W, NULL, n, d, V);
    if (loss && (rc = ref_cross_entropy_fwd(loss, lg, targets, n, V))) goto done;
    if (cx->grads) {
        double *dlg = rm_alloc(n * (size_t)V);
        if (!dlg) {
            rc = PHAX_ERR;
            goto done;
        }
        if (!(rc = ref_cross_entropy_bwd(dlg, 1.0, lg, targets, n, V)))
            ref_linear_bwd(dx, cx->grads + (W - m->params), NULL, dlg, x, W, n, d, V);
        phax_free(dlg);
    }
done:
    if (!logits) phax_free(lg);
    return rc;
}

static double *top_grad(const rm_ctx *cx, const char *name) {
    const double *p = ref_model_param(cx->m, name);
    return p && cx->grads ? cx->grads + (p - cx->m->params) : NULL;
}

// x = E[tokens]: (n, d), and its backward dE += scatter of dx.
static int embed_fwd(const rm_ctx *cx, double *x, const int32_t *tokens) {
    const phax_model_cfg *c = &cx->m->cfg;
    return ref_embedding_fwd(x, ref_model_param(cx->m, "embed.weight"), tokens, cx->n,
                             c->vocab_size, c->d_model);
}

static void embed_bwd(const rm_ctx *cx, const double *dx, const int32_t *tokens) {
    double *dE = top_grad(cx, "embed.weight");
    if (dE) ref_embedding_bwd(dE, dx, tokens, cx->n, cx->m->cfg.d_model);
}

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
// The parallel rule (pha, docs/spec.md §3.1). Block l: the plan's branches in mix
// order, each RMSNorm-ed with its own output norm:
//   r_i = branch_i(x)                    (n, d)
//   b_i = RMSNorm_{norm_i}(r_i)          b: (nb, n·d) stacked
//   mx  = mix(p; b)                      (n, d); p = mix.p, or 0 (equal weights) if frozen
//   z   = α·x + mx                       (n, d), α the plan's DeepNorm α
//   y   = RMSNorm_{norm_res}(z)          (n, d)
typedef struct {
    phax_block_plan plan;
    double *r, *b, *z;
    double p[PHAX_PLAN_MAX_SUB];  // the mix logits used
} block_acts;

static void block_acts_free(block_acts *a) {
    phax_free(a->r), phax_free(a->b), phax_free(a->z);
    a->r = a->b = a->z = NULL;
}

// y: (n, d) = block l of x (y may be NULL: only the intermediates).
static int pha_block_forward(const rm_ctx *cx, int l, block_acts *a, double *y, const double *x) {
    const ref_model *m = cx->m;
    int d = m->cfg.d_model;
    size_t n = cx->n, nd = n * (size_t)d;
    phax_plan_block(&m->cfg, l, &a->plan);
    int nb = a->plan.nsub;
    a->r = rm_alloc(nb * nd), a->b = rm_alloc(nb * nd), a->z = rm_alloc(nd);
    if (!a->r || !a->b || !a->z) {
        block_acts_free(a);
        return PHAX_ERR;
    }
    for (int i = 0; i < nb; i++) {
        double *ri = a->r + i * nd, *bi = a->b + i * nd;
        if (rm_branch_fwd(cx, a->plan.sub[i].kind, l, ri, x)) {  // r_i: (n, d)
            block_acts_free(a);
            return PHAX_ERR;
        }
        ref_rmsnorm_fwd(bi, ri, rm_param(m, l, a->plan.sub[i].norm), n, d, PHAX_RMSNORM_EPS);  // b_i
    }
    // Frozen mix: p = 0 for every branch, softplus(0)/(nb·softplus(0)) = 1/nb each.
    const double *p = a->plan.mix ? rm_param(m, l, a->plan.mix) : NULL;
    for (int i = 0; i < nb; i++) a->p[i] = p ? p[i] : 0.0;
    ref_mix_fwd(a->z, a->b, a->p, nb, nd);  // z ← mx: (n, d)
    double alpha = phax_plan_alpha(&m->cfg);
    for (size_t i = 0; i < nd; i++) a->z[i] = alpha * x[i] + a->z[i];  // z = α·x + mx
    if (y) ref_rmsnorm_fwd(y, a->z, rm_param(m, l, a->plan.norm_res), n, d, PHAX_RMSNORM_EPS);
    return PHAX_OK;
}

static int pha_block_fwd(const rm_ctx *cx, int l, double *y, const double *x) {
    block_acts a;
    int rc = pha_block_forward(cx, l, &a, y, x);
    block_acts_free(&a);
    return rc;
}

// dx += ∂/∂x, grads += ∂/∂(block l's parameters), from dy: (n, d).
static int pha_block_bwd(const rm_ctx *cx, int l, double *dx, const double *dy, const double *x) {
    const ref_model *m = cx->m;
    int d = m->cfg.d_model;
    size_t n = cx->n, nd = n * (size_t)d;
    block_acts a;
    if (pha_block_forward(cx, l, &a, NULL, x)) return PHAX_ERR;
    int nb = a.plan.nsub;
    double *dz = rm_alloc(nd), *db = rm_alloc(nb * nd), *dr = rm_alloc(nd);
    int rc = PHAX_ERR;
    if (dz && db && dr) {
        // y = RMSNorm_res(z)
        ref_rmsnorm_bwd(dz, rm_grad(cx, l, a.plan.norm_res), dy, a.z,
                        rm_param(m, l, a.plan.norm_res), n, d, PHAX_RMSNORM_EPS);
        // z = α·x + mx
        double alpha = phax_plan_alpha(&m->cfg);
        for (size_t i = 0; i < nd; i++) dx[i] += alpha * dz[i];
        // mx = mix(p; b); a frozen mix has no parameter, so no dp.
        double *dp = a.plan.mix ? rm_grad(cx, l, a.plan.mix) : NULL;
        ref_mix_bwd(db, dp, dz, a.b, a.p, nb, nd);
        rc = PHAX_OK;
        for (int i = 0; i < nb && !rc; i++) {
            // b_i = RMSNorm_i(r_i); r_i = branch_i(x)
            const char *norm = a.plan.sub[i].norm;
            memset(dr, 0, nd * sizeof *dr);
            ref_rmsnorm_bwd(dr, rm_grad(cx, l, norm), db + i * nd, a.r + i * nd, rm_param(m, l, norm),
                            n, d, PHAX_RMSNORM_EPS);
            rc = rm_branch_bwd(cx, a.plan.sub[i].kind, l, dx, dr, x);
        }
    }
    phax_free(dz), phax_free(db), phax_free(dr);
    block_acts_free(&a);
    return rc;
}

// x_1 = RMSNorm_emb(E[tokens]); x_{l+1} = block_l(x_l); logits = x_{L+1} Wᵀ.
// *touched is set once gradients may have been written.
static int pha_run(const rm_ctx *cx, const int32_t *tokens, const int32_t *targets, double *logits,
                   double *loss, int *touched) {
    const ref_model *m = cx->m;
    int d = m->cfg.d_model, L = m->cfg.n_layers;
    size_t n = cx->n, nd = n * (size_t)d;
    // xs[0] = E[tokens]; xs[l + 1] = x_{l+1} in the spec's 1-based numbering:
    // xs[1] is the normalised embedding, the input of block 0; xs[L + 1] feeds the head.
    double **xs = acts_new(L + 2, nd);
    double *dx = NULL, *dprev = NULL;
    int rc = PHAX_ERR;
    if (!xs) return PHAX_ERR;
    const double *gemb = ref_model_param(m, "norm_emb.weight");
    if (embed_fwd(cx, xs[0], tokens)) goto done;                          // (n, d)
    ref_rmsnorm_fwd(xs[1], xs[0], gemb, n, d, PHAX_RMSNORM_EPS);          // x_1: (n, d)
    for (int l = 0; l < L; l++)
        if (pha_block_fwd(cx, l, xs[l + 2], xs[l + 1])) goto done;        // x_{l+2}
    if (!cx->grads) {
        rc = head(cx, xs[L + 1], NULL, targets, logits, loss);
        goto done;
    }
    // Backward of the loss (dloss = 1). dx: gradient w.r.t. the current block output.
    if (!(dx = rm_alloc(nd)) || !(dprev = rm_alloc(nd))) goto done;
    if (head(cx, xs[L + 1], dx, targets, logits, loss)) goto done;
    *touched = 1;
    for (int l = L - 1; l >= 0; l--) {
        memset(dprev, 0, nd * sizeof *dprev);
        if (pha_block_bwd(cx, l, dprev, dx, xs[l + 1])) goto done;
        double *t = dx;
        dx = dprev, dprev = t;  // dx ← ∂loss/∂x_{l+1}
    }
    memset(dprev, 0, nd * sizeof *dprev);
    ref_rmsnorm_bwd(dprev, top_grad(cx, "norm_emb.weight"), dx, xs[0], gemb, n, d, PHAX_RMSNORM_EPS);
    embed_bwd(cx, dprev, tokens);
    rc = PHAX_OK;
done:
    acts_free(xs, L + 2);
    phax_free(dx), phax_free(dprev);
    return rc;
}

// ---------------------------------------------------------------------------
// The pre-norm rule (transformer, serial, swax, swa, mlstm, swa_full, swax_gdn; docs/spec.md §3.2–3.3):
// x_0 = E[tokens]; sub-layer j (the plan's sub-layers of every block, in order):
// xs[j + 1] = xs[j] + F_j(RMSNorm_j xs[j]); logits = RMSNorm_f(xs[J]) Wᵀ.
static int stack_run(const rm_ctx *cx, const int32_t *tokens, const int32_t *targets, double *logits,
                     double *loss, int *touched) {
    const ref_model *m = cx->m;
    const phax_model_cfg *c = &m->cfg;
    int d = c->d_model, L = c->n_layers;
    size_t n = cx->n, nd = n * (size_t)d;
    // The sub-layers of every block, flattened: sub-layer j is (layer[j], sub[j]).
    phax_block_plan bp;
    phax_plan_block(c, 0, &bp);
    int J = L * bp.nsub;  // the same count in every block
    int *layer = calloc((size_t)J, sizeof *layer);
    phax_sub *sub = calloc((size_t)J, sizeof *sub);
    double **xs = acts_new(J + 1, nd);  // xs[j]: input of sub-layer j; xs[J]: the last output
    double *h = rm_alloc(nd), *f = rm_alloc(nd), *xf = rm_alloc(nd);  // (n, d) scratch
    double *dx = NULL, *dh = NULL, *dxf = NULL;
    const double *gf = ref_model_param(m, "norm_f.weight");
    int rc = PHAX_ERR;
    if (!layer || !sub) phax_fail("model: out of memory");
    if (!layer || !sub || !xs || !h || !f || !xf) goto done;
    for (int l = 0, j = 0; l < L; l++) {
        phax_plan_block(c, l, &bp);
        for (int s = 0; s < bp.nsub; s++, j++) layer[j] = l, sub[j] = bp.sub[s];
    }
    if (embed_fwd(cx, xs[0], tokens)) goto done;  // x_0 = E[tokens]: (n, d)
    for (int j = 0; j < J; j++) {
        // xs[j + 1] = xs[j] + F(RMSNorm xs[j])
        ref_rmsnorm_fwd(h, xs[j], rm_param(m, layer[j], sub[j].norm), n, d, PHAX_RMSNORM_EPS);
        if (rm_branch_fwd(cx, sub[j].kind, layer[j], f, h)) goto done;
        for (size_t i = 0; i < nd; i++) xs[j + 1][i] = xs[j][i] + f[i];
    }
    ref_rmsnorm_fwd(xf, xs[J], gf, n, d, PHAX_RMSNORM_EPS);  // x_f: (n, d)
    if (!cx->grads) {
        rc = head(cx, xf, NULL, targets, logits, loss);
        goto done;
    }
    // Backward of the loss (dloss = 1): dx = ∂loss/∂xs[j + 1] walking down; rmsnorm_bwd
    // adds the sub-layer's path into dx in place, which already holds the identity path.
    dx = rm_alloc(nd), dh = rm_alloc(nd), dxf = rm_alloc(nd);  // (n, d), zeroed
    if (!dx || !dh || !dxf) goto done;
    if (head(cx, xf, dxf, targets, logits, loss)) goto done;  // dxf = ∂loss/∂x_f
    *touched = 1;
    ref_rmsnorm_bwd(dx, top_grad(cx, "norm_f.weight"), dxf, xs[J], gf, n, d, PHAX_RMSNORM_EPS);
    for (int j = J - 1; j >= 0; j--) {
        const double *g = rm_param(m, layer[j], sub[j].norm);
        ref_rmsnorm_fwd(h, xs[j], g, n, d, PHAX_RMSNORM_EPS);
        memset(dh, 0, nd * sizeof *dh);
        if (rm_branch_bwd(cx, sub[j].kind, layer[j], dh, dx, h)) goto done;  // dh = ∂/∂h_j
        ref_rmsnorm_bwd(dx, rm_grad(cx, layer[j], sub[j].norm), dh, xs[j], g, n, d, PHAX_RMSNORM_EPS);
    }
    embed_bwd(cx, dx, tokens);  // dE += scatter of ∂/∂x_0
    rc = PHAX_OK;
done:
    free(layer), free(sub);
    acts_free(xs, J + 1);
    phax_free(h), phax_free(f), phax_free(xf);
    phax_free(dx), phax_free(dh), phax_free(dxf);
    return rc;
}

// ---------------------------------------------------------------------------
static int run(const ref_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
               int window, double *logits, double *loss, double *grads) {
    if (B < 1 || T < 1) return phax_fail("model: batch %d x %d must be at least 1 x 1", B, T);
    if (!tokens) return phax_fail("model: tokens missing");
    if ((loss || grads) && !targets) return phax_fail("model: a loss needs targets");
    const phax_model_cfg *c = &m->cfg;
    rm_ctx cx = {m, B, T, (size_t)B * T, phax_plan_window(c, window), grads};
    int touched = 0;  // set once the backward may have added into grads
    int rc = phax_plan_rule(c) == PHAX_RULE_PARALLEL
                 ? pha_run(&cx, tokens, targets, logits, loss, &touched)
                 : stack_run(&cx, tokens, targets, logits, loss, &touched);
    if (rc) {  // make a failure loud (spec §1.1): nothing left can pass for a result
        if (loss) *loss = NAN;
        if (logits)
            for (size_t i = 0; i < cx.n * (size_t)c->vocab_size; i++) logits[i] = NAN;
        if (touched)  // only allocation failures get here: bad tokens and targets fail earlier
            for (size_t i = 0; i < m->layout.numel; i++) grads[i] += NAN;
    }
    return rc;
}

int ref_model_forward(const ref_model *m, const int32_t *tokens, const int32_t *targets, int B,
                      int T, int window, double *logits, double *loss) {
    return run(m, tokens, targets, B, T, window, logits, loss, NULL);
}

int ref_model_backward(ref_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                       int window, double *loss) {
    double l = 0;
    int rc = run(m, tokens, targets, B, T, window, NULL, &l, m->grads);
    if (loss) *loss = l;
    return rc;
}
