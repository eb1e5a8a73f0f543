// fast/cpu models: creation, parameter access, the workspace arena, and the two
// runners — PHA (parallel branches, softplus mix, DeepNorm post-norm) and the
// pre-norm residual stack that transformer, serial, swax, swa, mlstm and swa_full share.
// The branches themselves are in model_branches.c. Formulas: ref/model.c, which
// reads side by side with this file (docs/spec.md §3). Every op goes through the
// model's table (fmodel.ops, phax/f32_ops.h; fast/cpu's is fcpu_f32_ops()), which a
// workspace takes when it is made; the parameters and gradients are resolved to
// pointers when a workspace is bound to the model, not looked up by name per call.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "phax/fcpu_f32_ops.h"

// The model's op table (a view filled in by hand has none: fast/cpu's).
static const phax_f32_ops *ops_of(const fmodel *m) { return m->ops ? m->ops : fcpu_f32_ops(); }

int fmodel_new(fmodel *m, const phax_model_cfg *cfg, uint64_t seed) {
    return fmodel_new_ops(m, cfg, seed, fcpu_f32_ops());
}

// Parameters and gradients in the table's memory: host memory for fast/cpu's table, the
// table's arena allocator for another tier's (device memory for fast/cuda's).
static int foreign(const phax_f32_ops *ops) { return ops && ops != fcpu_f32_ops(); }

int fmodel_new_ops(fmodel *m, const phax_model_cfg *cfg, uint64_t seed, const struct phax_f32_ops *ops) {
    memset(m, 0, sizeof *m);
    m->ops = ops ? ops : fcpu_f32_ops();
    m->cfg = *cfg;
    if (phax_model_cfg_resolve(&m->cfg)) return PHAX_ERR;
    if (phax_layout_build(&m->layout, &m->cfg)) return PHAX_ERR;
    size_t n = m->layout.numel;
    double *p64 = phax_alloc(n * sizeof(double));
    m->params = foreign(m->ops) ? m->ops->alloc_ws(n * sizeof(float)) : phax_alloc(n * sizeof(float));
    m->grads = foreign(m->ops) ? m->ops->alloc_ws(n * sizeof(float)) : phax_alloc(n * sizeof(float));
    int rc = PHAX_ERR;
    // Initialise in float64 exactly as ref does, then round once.
    if (p64 && m->params && m->grads && !phax_model_init(p64, &m->layout, &m->cfg, seed)) {
        fmodel_set_params_f64(m, p64);
        rc = PHAX_OK;
    }
    phax_free(p64);
    if (rc) fmodel_free(m);
    return rc;
}

void fmodel_free(fmodel *m) {
    if (foreign(m->ops)) {
        m->ops->free_ws(m->params);
        m->ops->free_ws(m->grads);
    } else {
        phax_free(m->params);
        phax_free(m->grads);
    }
    phax_layout_free(&m->layout);
    memset(m, 0, sizeof *m);
}

float *fmodel_param(const fmodel *m, const char *name) {
    int i = phax_layout_find(&m->layout, name);
    return i < 0 ? NULL : m->params + m->layout.p[i].offset;
}

void fmodel_zero_grad(fmodel *m) { ops_of(m)->zero(m->grads, m->layout.numel); }

void fmodel_set_params_f64(fmodel *m, const double *params) {
    ops_of(m)->load_f64(m->params, params, m->layout.numel);
}

// ---------------------------------------------------------------------------
// The blocks come from the model plan (phax/model_plan.h): the parallel rule (pha)
// or pre-norm residual sub-layers x += F(RMSNorm x) (the other families).
static int is_pha(const phax_model_cfg *c) { return phax_plan_rule(c) == PHAX_RULE_PARALLEL; }

// ---------------------------------------------------------------------------
// Parameters (or gradients) resolved to pointers, once per binding of a workspace.
static float *at(const phax_layout *L, float *base, const char *name) {
    if (!base) return NULL;
    int i = phax_layout_find(L, name);
    return i < 0 ? NULL : base + L->p[i].offset;
}

static float *blk_at(const phax_layout *L, float *base, int l, const char *suffix) {
    char name[96];
    snprintf(name, sizeof name, "blocks.%d.%s", l, suffix);
    return at(L, base, name);
}

void fm_ptrs_resolve(fm_ptrs *r, fm_block_ptrs *blk, const phax_layout *L,
                     const phax_model_cfg *cfg, float *base) {
    r->embed = at(L, base, "embed.weight");
    r->norm_emb = at(L, base, "norm_emb.weight");
    r->norm_f = at(L, base, "norm_f.weight");
    r->head = at(L, base, cfg->tie_embeddings ? "embed.weight" : "lm_head.weight");
    r->blk = blk;
    for (int l = 0; l < cfg->n_layers; l++) {
        fm_block_ptrs *b = &blk[l];
        memset(b, 0, sizeof *b);
        phax_block_plan bp;
        phax_plan_block(cfg, l, &bp);
        for (int i = 0; i < bp.nsub; i++) b->norm[i] = blk_at(L, base, l, bp.sub[i].norm);
#define R(field, suffix) b->field = blk_at(L, base, l, suffix)
        R(mix_p, "mix.p"), R(norm_res, "norm_res.weight");
        R(attn_wq, "attn.wq.weight"), R(attn_wk, "attn.wk.weight"), R(attn_wv, "attn.wv.weight");
        R(attn_wo, "attn.wo.weight"), R(attn_logscale, "attn.logscale");
        R(ffn_w_gate, "ffn.w_gate.weight"), R(ffn_w_up, "ffn.w_up.weight");
        R(ffn_w_down, "ffn.w_down.weight");
        R(aux_w3, "ffn_aux.w3.weight"), R(aux_w4, "ffn_aux.w4.weight");
        R(gss_wv, "gss.wv.weight"), R(gss_wu, "gss.wu.weight"), R(gss_ln_g, "gss.ln.weight");
        R(gss_ln_b, "gss.ln.bias"), R(gss_lre, "gss.lambda_re"), R(gss_lim, "gss.lambda_im");
        R(gss_cre, "gss.c_re"), R(gss_cim, "gss.c_im"), R(gss_d, "gss.d");
        R(gss_wc, "gss.wc.weight"), R(gss_wo, "gss.wo.weight");
        R(ml_wq, "mlstm.wq.weight"), R(ml_wk, "mlstm.wk.weight"), R(ml_wv, "mlstm.wv.weight");
        R(ml_ogate, "mlstm.ogate.weight"), R(ml_igate_w, "mlstm.igate.weight");
        R(ml_igate_b, "mlstm.igate.bias"), R(ml_fgate_w, "mlstm.fgate.weight");
        R(ml_fgate_b, "mlstm.fgate.bias"), R(ml_headnorm, "mlstm.headnorm.weight");
        R(ml_out, "mlstm.out.weight");
        R(gd_wq, "gdn.wq.weight"), R(gd_wk, "gdn.wk.weight"), R(gd_wv, "gdn.wv.weight");
        R(gd_conv_q, "gdn.conv_q.weight"), R(gd_conv_k, "gdn.conv_k.weight"), R(gd_conv_v, "gdn.conv_v.weight");
        R(gd_wa, "gdn.wa.weight"), R(gd_wb, "gdn.wb.weight"), R(gd_A_log, "gdn.A_log");
        R(gd_dt_bias, "gdn.dt_bias"), R(gd_norm, "gdn.norm.weight"), R(gd_wg, "gdn.wg.weight");
        R(gd_out, "gdn.out.weight");
#undef R
    }
}

// Bind workspace w to model m: resolve its parameters and gradients.
static void ws_bind(fmodel_ws *w, const fmodel *m) {
    fm_ptrs_resolve(&w->P, w->P.blk, &m->layout, &m->cfg, m->params);
    fm_ptrs_resolve(&w->G, w->G.blk, &m->layout, &m->cfg, m->grads);
    w->bound_params = m->params, w->bound_grads = m->grads;
}

// ---------------------------------------------------------------------------
// Workspace layout (runs twice: count, then assign).
static size_t zmax(size_t a, size_t b) { return a > b ? a : b; }

// part (may be NULL): the bytes of each FMODEL_WS_* part, added up as the layout goes.
static void ws_layout(fmodel_ws *w, fm_arena *a, const phax_model_cfg *c, size_t *part) {
    const phax_f32_ops *ops = w->ops;
    int B = w->B, T = w->T, d = c->d_model, L = c->n_layers;
    size_t n = (size_t)B * T, nd = n * (size_t)d, mark = a->off;
#define TALLY(p)                                                      \
    do {                                                              \
        if (part && a->off != SIZE_MAX) part[p] += a->off - mark;     \
        mark = a->off;                                                \
    } while (0)
    for (int i = 0; i < w->nx; i++) w->xs[i] = fm_take(a, nd);
    TALLY(FMODEL_WS_RESIDUAL);
    for (int j = 0; j < w->nsub; j++) {
        fm_branch_layout(ops, a, &w->br[j], c, B, T);
        TALLY(FMODEL_WS_BRANCH + w->br[j].kind);
    }
    size_t bwd = 0, kws = 0;
    for (int j = 0; j < w->nsub; j++) {
        bwd = zmax(bwd, fm_branch_bwd_len(ops, w->br[j].kind, c, n, T));
        kws = zmax(kws, fm_branch_kernel_ws(ops, w->br[j].kind, c, B, T, w->nthreads, w));
    }
    kws = zmax(kws, ops->rmsnorm_bwd_ws(n, d));
    kws = zmax(kws, ops->linear_cross_entropy_ws(n, d, c->vocab_size));
    if (is_pha(c)) {
        // Kept per block: the branches' raw outputs r_i (their norms' backward needs them).
        // Not kept: the normed outputs b_i and the mix's input z, which the backward
        // recomputes from r_i and x bit for bit (pha_run); one buffer of each serves every
        // block. At d 128, T 8192 that is (L − 1)(nb + 1)·n·d floats less: 50 of 623 MB.
        int nb = w->nsub / L;
        for (int l = 0; l < L; l++) w->pr[l] = fm_take(a, (size_t)nb * nd);
        float *pb = fm_take(a, (size_t)nb * nd), *pz = fm_take(a, nd);
        for (int l = 0; l < L; l++) w->pb[l] = pb, w->pz[l] = pz;
        w->dmix = fm_take(a, (size_t)nb * nd);
        w->pzero = fm_take(a, PHAX_PLAN_MAX_SUB);  // zero: the arena comes zeroed
        TALLY(FMODEL_WS_MIX);
    } else {
        for (int j = 0; j < w->nsub; j++) w->hs[j] = fm_take(a, nd);
        TALLY(FMODEL_WS_RESIDUAL);
        w->xf = fm_take(a, nd);
    }
    w->tmp = fm_take(a, nd);
    w->d1 = fm_take(a, nd), w->d2 = fm_take(a, nd);
    TALLY(FMODEL_WS_SCRATCH);
    w->bws = fm_take(a, bwd);
    TALLY(FMODEL_WS_BWD);
    w->kws_bytes = kws;
    w->kws = fm_take(a, (kws + sizeof(float) - 1) / sizeof(float));
    TALLY(FMODEL_WS_KERNEL);
#undef TALLY
}

// A workspace with its layout counted (w->bytes; by part into `part` when not NULL) but no arena
// yet (one arena for everything, from the table's alloc_ws).
static fmodel_ws *ws_plan(const phax_f32_ops *ops, const phax_model_cfg *c, int B, int T, size_t *part) {
    if (B < 1 || T < 1) {
        phax_fail("model workspace: batch %d x %d must be at least 1 x 1", B, T);
        return NULL;
    }
    fmodel_ws *w = calloc(1, sizeof *w);
    if (!w) {
        phax_fail("model workspace: out of memory");
        return NULL;
    }
    w->ops = ops;
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
    w->P.blk = calloc((size_t)L, sizeof *w->P.blk);
    w->G.blk = calloc((size_t)L, sizeof *w->G.blk);
    if (!w->br || !w->xs || !w->hs || !w->pr || !w->pb || !w->pz || !w->P.blk || !w->G.blk) {
        phax_fail("model workspace: out of memory");
        goto fail;
    }
    for (int l = 0; l < L; l++) {
        phax_plan_block(c, l, &bp);
        for (int i = 0; i < per; i++) {
            fm_branch *b = &w->br[l * per + i];
            b->kind = bp.sub[i].kind, b->layer = l, b->sub = i;
        }
    }
    if (phax_plan_has(c, PHAX_SUB_GSS) && !(w->ssm_plan = ops->ssm_plan_new(B, T, c->gss_hidden))) goto fail;
    fm_arena a = {NULL, 0};
    ws_layout(w, &a, c, part);
    w->bytes = a.off;
    if (w->bytes == SIZE_MAX) {  // fm_take saturated
        phax_fail("model workspace: batch %d x %d of this model does not fit the address space", B, T);
        goto fail;
    }
    return w;
fail:
    fmodel_ws_free(w);
    return NULL;
}

fmodel_ws *fmodel_ws_new(const fmodel *m, int B, int T) {
    const phax_model_cfg *c = &m->cfg;
    fmodel_ws *w = ws_plan(ops_of(m), c, B, T, NULL);
    if (!w) return NULL;
    if (!(w->arena = w->ops->alloc_ws(w->bytes))) {
        fmodel_ws_free(w);
        return NULL;
    }
    fm_arena a = {w->arena, 0};
    ws_layout(w, &a, c, NULL);
    ws_bind(w, m);
    return w;
}

_Static_assert(FMODEL_WS_BRANCH + PHAX_SUB_COUNT == FMODEL_WS_MIX, "one workspace part per branch kind");

int fmodel_ws_breakdown(const phax_model_cfg *cfg, int B, int T, size_t bytes[FMODEL_WS_NPARTS]) {
    memset(bytes, 0, FMODEL_WS_NPARTS * sizeof *bytes);
    fmodel_ws *w = ws_plan(fcpu_f32_ops(), cfg, B, T, bytes);
    if (!w) return PHAX_ERR;
    fmodel_ws_free(w);
    return PHAX_OK;
}

const char *fmodel_ws_part_name(int part) {
    static const char *names[FMODEL_WS_NPARTS] = {
        "residual stream", "gss branch", "attention branch", "swiglu branch", "aux ffn branch",
        "dual ffn branch", "mlstm branch", "gdn branch", "pha mix buffers", "step scratch", "backward scratch",
        "kernel scratch"};
    return part >= 0 && part < FMODEL_WS_NPARTS ? names[part] : "?";
}

void fmodel_ws_free(fmodel_ws *w) {
    if (!w) return;
    w->ops->free_ws(w->arena);
    if (w->ssm_plan) w->ops->ssm_plan_free(w->ssm_plan);
    free(w->br), free(w->xs), free(w->hs), free(w->pr), free(w->pb), free(w->pz);
    free(w->P.blk), free(w->G.blk);
    free(w);
}

size_t fmodel_ws_bytes(const fmodel_ws *w) { return w ? w->bytes : 0; }
int fmodel_ws_B(const fmodel_ws *w) { return w->B; }
int fmodel_ws_T(const fmodel_ws *w) { return w->T; }

// ---------------------------------------------------------------------------
// Output head + loss. x: (n, d) final hidden. Forward: logits (optional) and loss
// (optional). Backward (dx != NULL): dx += ∂loss/∂x, head weight gradient, fused
// (no (n, V) logits).
static int head(const fm_ctx *cx, const float *x, float *dx, const int32_t *targets,
                float *logits, double *loss) {
    const phax_f32_ops *ops = cx->ops;
    int V = cx->m->cfg.vocab_size, d = cx->m->cfg.d_model;
    const float *W = cx->P->head;
    float lf = 0;
    if (cx->row_loss)
        return ops->linear_cross_entropy_rows(cx->row_loss, x, W, targets, cx->n, d, V, cx->ws->kws);
    if (dx) {
        if (ops->linear_cross_entropy(&lf, dx, cx->G->head, 1.0f, x, W, targets, cx->n, d, V,
                                      cx->ws->kws))
            return PHAX_ERR;
        if (loss) *loss = lf;
        return PHAX_OK;
    }
    if (logits) {
        ops->linear_fwd(logits, x, W, NULL, cx->n, d, V);
        if (loss && ops->cross_entropy_fwd(&lf, logits, targets, cx->n, V)) return PHAX_ERR;
    } else if (loss &&
               ops->linear_cross_entropy(&lf, NULL, NULL, 1.0f, x, W, targets, cx->n, d, V, cx->ws->kws)) {
        return PHAX_ERR;
    }
    if (loss) *loss = lf;
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// Profiling (phax/fmodel.h).
// The forward half ends here: its total, then the backward table.
static void prof_next_half(fm_ctx *cx) {
    if (!cx->prof) return;
    double now = phax_clock();
    cx->prof[FMODEL_PART_TOTAL] += now - cx->t_half;
    cx->prof = cx->ws->prof_bwd, cx->t_half = now;
}

const char *fmodel_part_name(int part) {
    static const char *names[FCPU_NPARTS] = {"gss", "attention", "swiglu", "aux ffn", "dual ffn",
                                             "mlstm", "gdn", "attention kernel", "mlstm kernel",
                                             "gdn kernel", "gss dss kernel", "gss convolution", "head",
                                             "total"};
    return part >= 0 && part < FCPU_NPARTS ? names[part] : "?";
}

void fmodel_ws_profile(fmodel_ws *ws, int on) {
    if (!ws) return;
    if (on) memset(ws->prof_fwd, 0, sizeof ws->prof_fwd), memset(ws->prof_bwd, 0, sizeof ws->prof_bwd);
    ws->profile = on != 0;
}

void fmodel_ws_profile_get(const fmodel_ws *ws, double fwd[FCPU_NPARTS],
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
    const phax_f32_ops *ops = cx->ops;
    const fm_ptrs *P = cx->P, *G = cx->G;
    const phax_model_cfg *c = &cx->m->cfg;
    fmodel_ws *w = cx->ws;
    int d = c->d_model, L = c->n_layers, nb = w->nsub / L;
    size_t n = cx->n, nd = n * (size_t)d;
    float alpha = (float)phax_plan_alpha(c);
    if (ops->embedding_fwd(w->xs[0], P->embed, tokens, n, c->vocab_size, d)) return PHAX_ERR;
    ops->rmsnorm_fwd(w->xs[1], w->xs[0], P->norm_emb, n, d, PHAX_RMSNORM_EPS);
    for (int l = 0; l < L; l++) {
        const fm_block_ptrs *pl = &P->blk[l];
        const float *x = w->xs[l + 1];
        for (int i = 0; i < nb; i++) {
            fm_branch *b = &w->br[l * nb + i];
            float *ri = w->pr[l] + i * nd, *bi = w->pb[l] + i * nd;
            int rc;
            FM_PROF(cx, b->kind, rc = fm_branch_fwd(cx, b, ri, x));  // r_i: (n, d)
            if (rc) return PHAX_ERR;
            ops->rmsnorm_fwd(bi, ri, pl->norm[b->sub], n, d, PHAX_RMSNORM_EPS);  // b_i
        }
        const float *p = c->freeze_mix ? w->pzero : pl->mix_p;
        float *z = w->pz[l];
        ops->mix_fwd(z, w->pb[l], p, nb, nd);  // z ← mix: (n, d)
        ops->axpy(z, alpha, x, nd);            // z ← α x + z
        ops->rmsnorm_fwd(w->xs[l + 2], z, pl->norm_res, n, d, PHAX_RMSNORM_EPS);
    }
    const float *xL = w->xs[L + 1];
    int rc;
    if (!cx->grads) {
        FM_PROF(cx, FMODEL_PART_HEAD, rc = head(cx, xL, NULL, targets, logits, loss));
        return rc;
    }

    // Backward of the mean loss. d1 = ∂loss/∂(current block output).
    prof_next_half(cx);
    float *d1 = w->d1, *d2 = w->d2;
    ops->zero(d1, nd);
    FM_PROF(cx, FMODEL_PART_HEAD, rc = head(cx, xL, d1, targets, logits, loss));
    if (rc) return PHAX_ERR;
    for (int l = L - 1; l >= 0; l--) {
        const fm_block_ptrs *pl = &P->blk[l], *gl = &G->blk[l];
        const float *x = w->xs[l + 1];
        const float *p = c->freeze_mix ? w->pzero : pl->mix_p;
        // b_i and z again, as the forward made them (the same ops on the same inputs: the same
        // bits; the workspace keeps one buffer of each, ws_layout).
        for (int i = 0; i < nb; i++)
            ops->rmsnorm_fwd(w->pb[l] + i * nd, w->pr[l] + i * nd, pl->norm[w->br[l * nb + i].sub], n, d,
                             PHAX_RMSNORM_EPS);
        ops->mix_fwd(w->pz[l], w->pb[l], p, nb, nd);
        ops->axpy(w->pz[l], alpha, x, nd);
        // y = RMSNorm_res(z): d2 = ∂/∂z
        ops->zero(d2, nd);
        ops->rmsnorm_bwd(d2, gl->norm_res, d1, w->pz[l], pl->norm_res, n, d, PHAX_RMSNORM_EPS,
                         w->kws);
        // z = α x + mix(p; b): dmix = ∂/∂b, dp; then d1 ← α d2 (= ∂/∂x so far)
        float *dp = c->freeze_mix ? NULL : gl->mix_p;
        ops->zero(w->dmix, (size_t)nb * nd);
        ops->mix_bwd(w->dmix, dp, d2, w->pb[l], p, nb, nd);
        ops->scale(d1, alpha, d2, nd);
        for (int i = 0; i < nb; i++) {
            fm_branch *b = &w->br[l * nb + i];
            // b_i = RMSNorm_i(r_i); r_i = branch_i(x)
            ops->zero(w->tmp, nd);
            ops->rmsnorm_bwd(w->tmp, gl->norm[b->sub], w->dmix + i * nd, w->pr[l] + i * nd,
                             pl->norm[b->sub], n, d, PHAX_RMSNORM_EPS, w->kws);
            FM_PROF(cx, b->kind, rc = fm_branch_bwd(cx, b, d1, w->tmp, x));
            if (rc) return PHAX_ERR;
        }
    }
    ops->zero(d2, nd);
    ops->rmsnorm_bwd(d2, G->norm_emb, d1, w->xs[0], P->norm_emb, n, d, PHAX_RMSNORM_EPS, w->kws);
    if (G->embed) ops->embedding_bwd(G->embed, d2, tokens, n, d);
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// The other families (docs/spec.md §3.2–3.3): x_0 = E[tokens]; sub-layer j:
// xs[j + 1] = xs[j] + F_j(RMSNorm_j xs[j]); logits = RMSNorm_f(xs[J]) Wᵀ.
static int stack_run(fm_ctx *cx, const int32_t *tokens, const int32_t *targets, float *logits,
                     double *loss) {
    const phax_f32_ops *ops = cx->ops;
    const fm_ptrs *P = cx->P, *G = cx->G;
    const phax_model_cfg *c = &cx->m->cfg;
    fmodel_ws *w = cx->ws;
    int d = c->d_model, J = w->nsub;
    size_t n = cx->n, nd = n * (size_t)d;
    if (ops->embedding_fwd(w->xs[0], P->embed, tokens, n, c->vocab_size, d)) return PHAX_ERR;
    for (int j = 0; j < J; j++) {
        fm_branch *b = &w->br[j];
        ops->rmsnorm_fwd(w->hs[j], w->xs[j], P->blk[b->layer].norm[b->sub], n, d, PHAX_RMSNORM_EPS);
        int rc;
        FM_PROF(cx, b->kind, rc = fm_branch_fwd(cx, b, w->tmp, w->hs[j]));
        if (rc) return PHAX_ERR;
        ops->add(w->xs[j + 1], w->xs[j], w->tmp, nd);
    }
    ops->rmsnorm_fwd(w->xf, w->xs[J], P->norm_f, n, d, PHAX_RMSNORM_EPS);
    int rc;
    if (!cx->grads) {
        FM_PROF(cx, FMODEL_PART_HEAD, rc = head(cx, w->xf, NULL, targets, logits, loss));
        return rc;
    }

    // Backward: d1 = ∂loss/∂xs[j + 1] walking down; rmsnorm_bwd adds the branch
    // path into d1 in place, which already holds the identity path.
    prof_next_half(cx);
    float *d1 = w->d1, *d2 = w->d2;
    ops->zero(d2, nd);
    FM_PROF(cx, FMODEL_PART_HEAD, rc = head(cx, w->xf, d2, targets, logits, loss));  // d2 = ∂/∂x_f
    if (rc) return PHAX_ERR;
    ops->zero(d1, nd);
    ops->rmsnorm_bwd(d1, G->norm_f, d2, w->xs[J], P->norm_f, n, d, PHAX_RMSNORM_EPS, w->kws);
    for (int j = J - 1; j >= 0; j--) {
        fm_branch *b = &w->br[j];
        ops->zero(d2, nd);
        FM_PROF(cx, b->kind, rc = fm_branch_bwd(cx, b, d2, d1, w->hs[j]));  // d2 = ∂/∂h_j
        if (rc) return PHAX_ERR;
        ops->rmsnorm_bwd(d1, G->blk[b->layer].norm[b->sub], d2, w->xs[j],
                         P->blk[b->layer].norm[b->sub], n, d, PHAX_RMSNORM_EPS, w->kws);
    }
    if (G->embed) ops->embedding_bwd(G->embed, d1, tokens, n, d);
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
static int run(const fmodel *m, fmodel_ws *w, const int32_t *tokens,
               const int32_t *targets, int window, float *logits, double *loss, float *grads,
               float *row_loss) {
    if (!w) return phax_fail("model: no workspace");
    if (w->family != m->cfg.family || w->ops != ops_of(m))
        return phax_fail("model: the workspace was made for another model");
    if (!tokens) return phax_fail("model: tokens missing");
    if ((loss || grads) && !targets) return phax_fail("model: a loss needs targets");
    if (omp_get_max_threads() > w->nthreads)
        return phax_fail("model: %d OpenMP threads, but the workspace was made for %d",
                         omp_get_max_threads(), w->nthreads);
    // A model other than the one bound (another model, or a view whose tensors moved).
    if (w->bound_params != m->params || w->bound_grads != m->grads) ws_bind(w, m);
    // A forward-only call sees no gradient (its G is all NULL; only backward paths read G->blk).
    static const fm_ptrs no_grads = {0};
    const phax_model_cfg *c = &m->cfg;
    fm_ctx cx = {m, w->ops, &w->P, grads ? &w->G : &no_grads, w, w->B, w->T,
                 (size_t)w->B * w->T, phax_plan_window(c, window), grads, row_loss,
                 w->profile ? w->prof_fwd : NULL, w->profile ? phax_clock() : 0};
    int rc = is_pha(c) ? pha_run(&cx, tokens, targets, logits, loss)
                       : stack_run(&cx, tokens, targets, logits, loss);
    if (cx.prof) cx.prof[FMODEL_PART_TOTAL] += phax_clock() - cx.t_half;
    if (rc && loss) *loss = NAN;
    return rc;
}

int fmodel_forward(const fmodel *m, fmodel_ws *ws, const int32_t *tokens,
                       const int32_t *targets, int window, float *logits, double *loss) {
    return run(m, ws, tokens, targets, window, logits, loss, NULL, NULL);
}

int fmodel_token_losses(const fmodel *m, fmodel_ws *ws, const int32_t *tokens,
                            const int32_t *targets, int window, float *losses) {
    if (!losses || !targets) return phax_fail("model: token losses need targets and an output");
    return run(m, ws, tokens, targets, window, NULL, NULL, NULL, losses);
}

int fmodel_backward(fmodel *m, fmodel_ws *ws, const int32_t *tokens,
                        const int32_t *targets, int window, double *loss) {
    double l = 0;
    int rc = run(m, ws, tokens, targets, window, NULL, &l, m->grads, NULL);
    if (loss) *loss = l;
    return rc;
}
