// fast/cpu models: creation, parameter access, the workspace arena, and the two
// runners — PHA (parallel branches, softplus mix, DeepNorm post-norm) and the
// pre-norm residual stack that transformer, serial, swax, swa and mlstm share.
// The branches themselves are in model_branches.c. Formulas: ref/model.c, which
// reads side by side with this file (docs/spec.md §3).
#define _GNU_SOURCE  // madvise(MADV_HUGEPAGE)
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "model_internal.h"

int fcpu_model_new(fcpu_model *m, const phax_model_cfg *cfg, uint64_t seed) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    if (phax_model_cfg_resolve(&m->cfg)) return PHAX_ERR;
    if (phax_layout_build(&m->layout, &m->cfg)) return PHAX_ERR;
    size_t n = m->layout.numel;
    double *p64 = phax_alloc(n * sizeof(double));
    m->params = phax_alloc(n * sizeof(float));
    m->grads = phax_alloc(n * sizeof(float));
    int rc = PHAX_ERR;
    // Initialise in float64 exactly as ref does, then round once.
    if (p64 && m->params && m->grads && !phax_model_init(p64, &m->layout, &m->cfg, seed)) {
        fcpu_model_set_params_f64(m, p64);
        rc = PHAX_OK;
    }
    phax_free(p64);
    if (rc) fcpu_model_free(m);
    return rc;
}

void fcpu_model_free(fcpu_model *m) {
    phax_free(m->params);
    phax_free(m->grads);
    phax_layout_free(&m->layout);
    memset(m, 0, sizeof *m);
}

float *fcpu_model_param(const fcpu_model *m, const char *name) {
    int i = phax_layout_find(&m->layout, name);
    return i < 0 ? NULL : m->params + m->layout.p[i].offset;
}

// Both cores: one core's memset writes ~23 GB/s here, two ~40 (28 MB at the bench config).
void fcpu_model_zero_grad(fcpu_model *m) {
    size_t n = m->layout.numel;
#pragma omp parallel if (n >= (1u << 20))
    {
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
        size_t per = (n / (size_t)nt + 15) & ~(size_t)15, lo = per * (size_t)id;
        if (lo < n) memset(m->grads + lo, 0, ((n - lo < per) ? n - lo : per) * sizeof(float));
    }
}

void fcpu_model_set_params_f64(fcpu_model *m, const double *params) {
    for (size_t i = 0; i < m->layout.numel; i++) m->params[i] = (float)params[i];
}

// ---------------------------------------------------------------------------
// The blocks come from the model plan (phax/model_plan.h): the parallel rule (pha)
// or pre-norm residual sub-layers x += F(RMSNorm x) (the other families).
static int is_pha(const phax_model_cfg *c) { return phax_plan_rule(c) == PHAX_RULE_PARALLEL; }

// ---------------------------------------------------------------------------
// Workspace layout (runs twice: count, then assign).
static size_t zmax(size_t a, size_t b) { return a > b ? a : b; }

static void ws_layout(fcpu_model_ws *w, fm_arena *a, const phax_model_cfg *c) {
    int B = w->B, T = w->T, d = c->d_model, L = c->n_layers;
    size_t n = (size_t)B * T, nd = n * (size_t)d;
    for (int i = 0; i < w->nx; i++) w->xs[i] = fm_take(a, nd);
    for (int j = 0; j < w->nsub; j++) fm_branch_layout(a, &w->br[j], c, B, T);
    size_t bwd = 0, kws = 0;
    for (int j = 0; j < w->nsub; j++) {
        bwd = zmax(bwd, fm_branch_bwd_len(w->br[j].kind, c, n, T));
        kws = zmax(kws, fm_branch_kernel_ws(w->br[j].kind, c, B, T, w->nthreads, w));
    }
    kws = zmax(kws, fcpu_rmsnorm_bwd_ws(n, d));
    kws = zmax(kws, fcpu_linear_cross_entropy_ws(n, d, c->vocab_size));
    if (is_pha(c)) {
        int nb = w->nsub / L;
        for (int l = 0; l < L; l++) {
            w->pr[l] = fm_take(a, (size_t)nb * nd);
            w->pb[l] = fm_take(a, (size_t)nb * nd);
            w->pz[l] = fm_take(a, nd);
        }
        w->dmix = fm_take(a, (size_t)nb * nd);
    } else {
        for (int j = 0; j < w->nsub; j++) w->hs[j] = fm_take(a, nd);
        w->xf = fm_take(a, nd);
    }
    w->tmp = fm_take(a, nd);
    w->d1 = fm_take(a, nd), w->d2 = fm_take(a, nd);
    w->bws = fm_take(a, bwd);
    w->kws_bytes = kws;
    w->kws = fm_take(a, (kws + sizeof(float) - 1) / sizeof(float));
}

// One arena for everything, asked for in huge pages and touched once here, so the
// first training step does not pay ~0.3 GB/s page faults.
static char *arena_alloc(size_t bytes) {
    const size_t huge = (size_t)2 << 20;
    size_t sz = (bytes + huge - 1) / huge * huge;
    void *p = NULL;
    if (bytes > SIZE_MAX - huge || posix_memalign(&p, huge, sz ? sz : huge)) {  // (sz must not wrap)
        phax_fail("model workspace: out of memory allocating %.1f MB", bytes / 1e6);
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    madvise(p, sz, MADV_HUGEPAGE);  // advisory: transparent huge pages are in madvise mode
#endif
    memset(p, 0, sz);
    return p;
}

// A workspace with its layout counted (w->bytes) but no arena yet.
static fcpu_model_ws *ws_plan(const phax_model_cfg *c, int B, int T) {
    if (B < 1 || T < 1) {
        phax_fail("model workspace: batch %d x %d must be at least 1 x 1", B, T);
        return NULL;
    }
    fcpu_model_ws *w = calloc(1, sizeof *w);
    if (!w) {
        phax_fail("model workspace: out of memory");
        return NULL;
    }
    w->family = c->family, w->B = B, w->T = T, w->nthreads = omp_get_max_threads();
    int L = c->n_layers;
    phax_block_plan bp;
    phax_plan_block(c, 0, &bp);
    int per = bp.nsub;  // the same in every block
    w->nsub = L * per;
    w->nx = is_pha(c) ? L + 2 : w->nsub + 1;
    w->br = calloc((size_t)w->nsub, sizeof *w->br);
    w->xs = calloc((size_t)w->nx, sizeof *w->xs);
    w->hs = calloc((size_t)w->nsub, sizeof *w->hs);
    w->pr = calloc((size_t)L, sizeof *w->pr);
    w->pb = calloc((size_t)L, sizeof *w->pb);
    w->pz = calloc((size_t)L, sizeof *w->pz);
    if (!w->br || !w->xs || !w->hs || !w->pr || !w->pb || !w->pz) {
        phax_fail("model workspace: out of memory");
        goto fail;
    }
    for (int l = 0; l < L; l++) {
        phax_plan_block(c, l, &bp);
        for (int i = 0; i < per; i++) {
            fm_branch *b = &w->br[l * per + i];
            b->kind = bp.sub[i].kind, b->layer = l, b->norm = bp.sub[i].norm;
        }
    }
    if (phax_plan_has(c, PHAX_SUB_GSS) && !(w->ssm_plan = fcpu_ssm_plan_new(B, T, c->gss_hidden))) goto fail;
    fm_arena a = {NULL, 0};
    ws_layout(w, &a, c);
    w->bytes = a.off;
    if (w->bytes == SIZE_MAX) {  // fm_take saturated
        phax_fail("model workspace: batch %d x %d of this model does not fit the address space", B, T);
        goto fail;
    }
    return w;
fail:
    fcpu_model_ws_free(w);
    return NULL;
}

fcpu_model_ws *fcpu_model_ws_new(const fcpu_model *m, int B, int T) {
    const phax_model_cfg *c = &m->cfg;
    fcpu_model_ws *w = ws_plan(c, B, T);
    if (!w) return NULL;
    if (!(w->arena = arena_alloc(w->bytes))) {
        fcpu_model_ws_free(w);
        return NULL;
    }
    fm_arena a = {w->arena, 0};
    ws_layout(w, &a, c);
    return w;
}

size_t fcpu_model_ws_size(const phax_model_cfg *cfg, int B, int T) {
    fcpu_model_ws *w = ws_plan(cfg, B, T);
    size_t n = w ? w->bytes : 0;
    fcpu_model_ws_free(w);
    return n;
}

void fcpu_model_ws_free(fcpu_model_ws *w) {
    if (!w) return;
    free(w->arena);
    if (w->ssm_plan) fcpu_ssm_plan_free(w->ssm_plan);
    free(w->br), free(w->xs), free(w->hs), free(w->pr), free(w->pb), free(w->pz);
    free(w);
}

size_t fcpu_model_ws_bytes(const fcpu_model_ws *w) { return w ? w->bytes : 0; }
int fcpu_model_ws_B(const fcpu_model_ws *w) { return w->B; }
int fcpu_model_ws_T(const fcpu_model_ws *w) { return w->T; }

// ---------------------------------------------------------------------------
// Output head + loss. x: (n, d) final hidden. Forward: logits (optional) and loss
// (optional). Backward (dx != NULL): dx += ∂loss/∂x, head weight gradient, fused
// (no (n, V) logits).
static int head(const fm_ctx *cx, const float *x, float *dx, const int32_t *targets,
                float *logits, double *loss) {
    const fcpu_model *m = cx->m;
    int V = m->cfg.vocab_size, d = m->cfg.d_model;
    const char *wname = m->cfg.tie_embeddings ? "embed.weight" : "lm_head.weight";
    const float *W = fcpu_model_param(m, wname);
    float lf = 0;
    if (cx->row_loss)
        return fcpu_linear_cross_entropy_rows(cx->row_loss, x, W, targets, cx->n, d, V, cx->ws->kws);
    if (dx) {
        float *dW = cx->grads ? cx->grads + (fcpu_model_param(m, wname) - m->params) : NULL;
        if (fcpu_linear_cross_entropy(&lf, dx, dW, 1.0f, x, W, targets, cx->n, d, V, cx->ws->kws))
            return PHAX_ERR;
        if (loss) *loss = lf;
        return PHAX_OK;
    }
    if (logits) {
        fcpu_linear_fwd(logits, x, W, NULL, cx->n, d, V);
        if (loss && fcpu_cross_entropy_fwd(&lf, logits, targets, cx->n, V)) return PHAX_ERR;
    } else if (loss &&
               fcpu_linear_cross_entropy(&lf, NULL, NULL, 1.0f, x, W, targets, cx->n, d, V, cx->ws->kws)) {
        return PHAX_ERR;
    }
    if (loss) *loss = lf;
    return PHAX_OK;
}

static float *top_grad(const fm_ctx *cx, const char *name) {
    const float *p = fcpu_model_param(cx->m, name);
    return p && cx->grads ? cx->grads + (p - cx->m->params) : NULL;
}

static void fm_add(float *restrict y, const float *restrict a, const float *restrict b, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= 65536)
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

static void fzero(float *p, size_t n) { memset(p, 0, n * sizeof *p); }

// ---------------------------------------------------------------------------
// Profiling (phax/fcpu_model.h).
// The forward half ends here: its total, then the backward table.
static void prof_next_half(fm_ctx *cx) {
    if (!cx->prof) return;
    double now = phax_clock();
    cx->prof[FCPU_PART_TOTAL] += now - cx->t_half;
    cx->prof = cx->ws->prof_bwd, cx->t_half = now;
}

const char *fcpu_part_name(int part) {
    static const char *names[FCPU_NPARTS] = {"gss", "attention", "swiglu", "aux ffn", "dual ffn",
                                             "mlstm", "attention kernel", "mlstm kernel", "head",
                                             "total"};
    return part >= 0 && part < FCPU_NPARTS ? names[part] : "?";
}

void fcpu_model_ws_profile(fcpu_model_ws *ws, int on) {
    if (!ws) return;
    if (on) memset(ws->prof_fwd, 0, sizeof ws->prof_fwd), memset(ws->prof_bwd, 0, sizeof ws->prof_bwd);
    ws->profile = on != 0;
}

void fcpu_model_ws_profile_get(const fcpu_model_ws *ws, double fwd[FCPU_NPARTS],
                               double bwd[FCPU_NPARTS]) {
    for (int i = 0; i < FCPU_NPARTS; i++) {
        if (fwd) fwd[i] = ws ? ws->prof_fwd[i] : 0;
        if (bwd) bwd[i] = ws ? ws->prof_bwd[i] : 0;
    }
}

// ---------------------------------------------------------------------------
// PHA (docs/spec.md §3.1): x_1 = RMSNorm_emb(E[tokens]); block l:
//   r_i = branch_i(x), b_i = RMSNorm_i(r_i), z = α x + mix(p; b), y = RMSNorm_res(z).
// xs[0] = E[tokens], xs[l + 1] = input of block l, xs[L + 1] feeds the head.
static int pha_run(fm_ctx *cx, const int32_t *tokens, const int32_t *targets, float *logits,
                   double *loss) {
    const fcpu_model *m = cx->m;
    const phax_model_cfg *c = &m->cfg;
    fcpu_model_ws *w = cx->ws;
    int d = c->d_model, L = c->n_layers, nb = w->nsub / L;
    size_t n = cx->n, nd = n * (size_t)d;
    float alpha = (float)phax_plan_alpha(c);
    float pzero[4] = {0, 0, 0, 0};
    if (fcpu_embedding_fwd(w->xs[0], fcpu_model_param(m, "embed.weight"), tokens, n, c->vocab_size, d))
        return PHAX_ERR;
    const float *gemb = fcpu_model_param(m, "norm_emb.weight");
    fcpu_rmsnorm_fwd(w->xs[1], w->xs[0], gemb, n, d, PHAX_RMSNORM_EPS);
    for (int l = 0; l < L; l++) {
        const float *x = w->xs[l + 1];
        for (int i = 0; i < nb; i++) {
            fm_branch *b = &w->br[l * nb + i];
            float *ri = w->pr[l] + i * nd, *bi = w->pb[l] + i * nd;
            int rc;
            FM_PROF(cx, b->kind, rc = fm_branch_fwd(cx, b, ri, x));  // r_i: (n, d)
            if (rc) return PHAX_ERR;
            fcpu_rmsnorm_fwd(bi, ri, fm_param(m, l, b->norm), n, d, PHAX_RMSNORM_EPS);  // b_i
        }
        const float *p = c->freeze_mix ? pzero : fm_param(m, l, "mix.p");
        float *z = w->pz[l];
        fcpu_mix_fwd(z, w->pb[l], p, nb, nd);  // z ← mix: (n, d)
#pragma omp parallel for simd schedule(static) if (nd >= 65536)
        for (size_t i = 0; i < nd; i++) z[i] = alpha * x[i] + z[i];
        fcpu_rmsnorm_fwd(w->xs[l + 2], z, fm_param(m, l, "norm_res.weight"), n, d, PHAX_RMSNORM_EPS);
    }
    const float *xL = w->xs[L + 1];
    int rc;
    if (!cx->grads) {
        FM_PROF(cx, FCPU_PART_HEAD, rc = head(cx, xL, NULL, targets, logits, loss));
        return rc;
    }

    // Backward of the mean loss. d1 = ∂loss/∂(current block output).
    prof_next_half(cx);
    float *d1 = w->d1, *d2 = w->d2;
    fzero(d1, nd);
    FM_PROF(cx, FCPU_PART_HEAD, rc = head(cx, xL, d1, targets, logits, loss));
    if (rc) return PHAX_ERR;
    for (int l = L - 1; l >= 0; l--) {
        const float *x = w->xs[l + 1];
        // y = RMSNorm_res(z): d2 = ∂/∂z
        fzero(d2, nd);
        fcpu_rmsnorm_bwd(d2, fm_grad(cx, l, "norm_res.weight"), d1, w->pz[l],
                         fm_param(m, l, "norm_res.weight"), n, d, PHAX_RMSNORM_EPS, w->kws);
        // z = α x + mix(p; b): dmix = ∂/∂b, dp; then d1 ← α d2 (= ∂/∂x so far)
        const float *p = c->freeze_mix ? pzero : fm_param(m, l, "mix.p");
        float *dp = c->freeze_mix ? NULL : fm_grad(cx, l, "mix.p");
        fzero(w->dmix, (size_t)nb * nd);
        fcpu_mix_bwd(w->dmix, dp, d2, w->pb[l], p, nb, nd);
#pragma omp parallel for simd schedule(static) if (nd >= 65536)
        for (size_t i = 0; i < nd; i++) d1[i] = alpha * d2[i];
        for (int i = 0; i < nb; i++) {
            fm_branch *b = &w->br[l * nb + i];
            // b_i = RMSNorm_i(r_i); r_i = branch_i(x)
            fzero(w->tmp, nd);
            fcpu_rmsnorm_bwd(w->tmp, fm_grad(cx, l, b->norm), w->dmix + i * nd, w->pr[l] + i * nd,
                             fm_param(m, l, b->norm), n, d, PHAX_RMSNORM_EPS, w->kws);
            FM_PROF(cx, b->kind, rc = fm_branch_bwd(cx, b, d1, w->tmp, x));
            if (rc) return PHAX_ERR;
        }
    }
    fzero(d2, nd);
    fcpu_rmsnorm_bwd(d2, top_grad(cx, "norm_emb.weight"), d1, w->xs[0], gemb, n, d,
                     PHAX_RMSNORM_EPS, w->kws);
    float *dE = top_grad(cx, "embed.weight");
    if (dE) fcpu_embedding_bwd(dE, d2, tokens, n, d);
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// The other families (docs/spec.md §3.2–3.3): x_0 = E[tokens]; sub-layer j:
// xs[j + 1] = xs[j] + F_j(RMSNorm_j xs[j]); logits = RMSNorm_f(xs[J]) Wᵀ.
static int stack_run(fm_ctx *cx, const int32_t *tokens, const int32_t *targets, float *logits,
                     double *loss) {
    const fcpu_model *m = cx->m;
    const phax_model_cfg *c = &m->cfg;
    fcpu_model_ws *w = cx->ws;
    int d = c->d_model, J = w->nsub;
    size_t n = cx->n, nd = n * (size_t)d;
    if (fcpu_embedding_fwd(w->xs[0], fcpu_model_param(m, "embed.weight"), tokens, n, c->vocab_size, d))
        return PHAX_ERR;
    for (int j = 0; j < J; j++) {
        fm_branch *b = &w->br[j];
        fcpu_rmsnorm_fwd(w->hs[j], w->xs[j], fm_param(m, b->layer, b->norm), n, d, PHAX_RMSNORM_EPS);
        int rc;
        FM_PROF(cx, b->kind, rc = fm_branch_fwd(cx, b, w->tmp, w->hs[j]));
        if (rc) return PHAX_ERR;
        fm_add(w->xs[j + 1], w->xs[j], w->tmp, nd);
    }
    const float *gf = fcpu_model_param(m, "norm_f.weight");
    fcpu_rmsnorm_fwd(w->xf, w->xs[J], gf, n, d, PHAX_RMSNORM_EPS);
    int rc;
    if (!cx->grads) {
        FM_PROF(cx, FCPU_PART_HEAD, rc = head(cx, w->xf, NULL, targets, logits, loss));
        return rc;
    }

    // Backward: d1 = ∂loss/∂xs[j + 1] walking down; rmsnorm_bwd adds the branch
    // path into d1 in place, which already holds the identity path.
    prof_next_half(cx);
    float *d1 = w->d1, *d2 = w->d2;
    fzero(d2, nd);
    FM_PROF(cx, FCPU_PART_HEAD, rc = head(cx, w->xf, d2, targets, logits, loss));  // d2 = ∂/∂x_f
    if (rc) return PHAX_ERR;
    fzero(d1, nd);
    fcpu_rmsnorm_bwd(d1, top_grad(cx, "norm_f.weight"), d2, w->xs[J], gf, n, d, PHAX_RMSNORM_EPS,
                     w->kws);
    for (int j = J - 1; j >= 0; j--) {
        fm_branch *b = &w->br[j];
        fzero(d2, nd);
        FM_PROF(cx, b->kind, rc = fm_branch_bwd(cx, b, d2, d1, w->hs[j]));  // d2 = ∂/∂h_j
        if (rc) return PHAX_ERR;
        fcpu_rmsnorm_bwd(d1, fm_grad(cx, b->layer, b->norm), d2, w->xs[j],
                         fm_param(m, b->layer, b->norm), n, d, PHAX_RMSNORM_EPS, w->kws);
    }
    float *dE = top_grad(cx, "embed.weight");
    if (dE) fcpu_embedding_bwd(dE, d1, tokens, n, d);
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
static int run(const fcpu_model *m, fcpu_model_ws *w, const int32_t *tokens,
               const int32_t *targets, int window, float *logits, double *loss, float *grads,
               float *row_loss) {
    if (!w) return phax_fail("model: no workspace");
    if (w->family != m->cfg.family) return phax_fail("model: the workspace was made for another model");
    if (!tokens) return phax_fail("model: tokens missing");
    if ((loss || grads) && !targets) return phax_fail("model: a loss needs targets");
    if (omp_get_max_threads() > w->nthreads)
        return phax_fail("model: %d OpenMP threads, but the workspace was made for %d",
                         omp_get_max_threads(), w->nthreads);
    const phax_model_cfg *c = &m->cfg;
    fm_ctx cx = {m, w, w->B, w->T, (size_t)w->B * w->T, phax_plan_window(c, window), grads, row_loss,
                 w->profile ? w->prof_fwd : NULL, w->profile ? phax_clock() : 0};
    int rc = is_pha(c) ? pha_run(&cx, tokens, targets, logits, loss)
                       : stack_run(&cx, tokens, targets, logits, loss);
    if (cx.prof) cx.prof[FCPU_PART_TOTAL] += phax_clock() - cx.t_half;
    if (rc && loss) *loss = NAN;
    return rc;
}

int fcpu_model_forward(const fcpu_model *m, fcpu_model_ws *ws, const int32_t *tokens,
                       const int32_t *targets, int window, float *logits, double *loss) {
    return run(m, ws, tokens, targets, window, logits, loss, NULL, NULL);
}

int fcpu_model_token_losses(const fcpu_model *m, fcpu_model_ws *ws, const int32_t *tokens,
                            const int32_t *targets, int window, float *losses) {
    if (!losses || !targets) return phax_fail("model: token losses need targets and an output");
    return run(m, ws, tokens, targets, window, NULL, NULL, NULL, losses);
}

int fcpu_model_backward(fcpu_model *m, fcpu_model_ws *ws, const int32_t *tokens,
                        const int32_t *targets, int window, double *loss) {
    double l = 0;
    int rc = run(m, ws, tokens, targets, window, NULL, &l, m->grads, NULL);
    if (loss) *loss = l;
    return rc;
}
