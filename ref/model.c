// ref models: creation, parameter access, dispatch to the family runners, and
// the pieces every family shares (embedding, output head + loss, attention sub-layer).
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

static int check_batch(const ref_model *m, const int32_t *tokens, int B, int T) {
    if (B < 1 || T < 1) return phax_fail("model: batch %d x %d must be at least 1 x 1", B, T);
    if (!tokens) return phax_fail("model: tokens missing");
    (void)m;
    return PHAX_OK;
}

static int run(const ref_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
               int window, double *logits, double *loss, double *grads) {
    if (check_batch(m, tokens, B, T)) return PHAX_ERR;
    if ((loss || grads) && !targets) return phax_fail("model: a loss needs targets");
    switch (m->cfg.family) {
    case PHAX_FAMILY_PHA:
    case PHAX_FAMILY_TRANSFORMER:
    case PHAX_FAMILY_SERIAL:
        return ref_pha_family_run(m, tokens, targets, B, T, logits, loss, grads);
    default:
        if (window < 0) window = m->cfg.w_long;
        return ref_swax_family_run(m, tokens, targets, B, T, window, logits, loss, grads);
    }
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

double *rm_grad(const ref_model *m, double *grads, int l, const char *suffix) {
    int i = grads ? block_index(m, l, suffix) : -1;
    return i < 0 ? NULL : grads + m->layout.p[i].offset;
}

const double *rm_top(const ref_model *m, const char *name) { return ref_model_param(m, name); }

double *rm_top_grad(const ref_model *m, double *grads, const char *name) {
    int i = grads ? phax_layout_find(&m->layout, name) : -1;
    return i < 0 ? NULL : grads + m->layout.p[i].offset;
}

double *rm_alloc(size_t n) { return phax_alloc((n ? n : 1) * sizeof(double)); }

// ---------------------------------------------------------------------------
int rm_embed_fwd(double *x, const ref_model *m, const int32_t *tokens, size_t n) {
    return ref_embedding_fwd(x, rm_top(m, "embed.weight"), tokens, n, m->cfg.vocab_size, m->cfg.d_model);
}

void rm_embed_bwd(const ref_model *m, double *grads, const double *dx, const int32_t *tokens, size_t n) {
    double *dE = rm_top_grad(m, grads, "embed.weight");
    if (dE) ref_embedding_bwd(dE, dx, tokens, n, m->cfg.d_model);
}

int rm_head(const ref_model *m, double *grads, const double *x, double *dx, const int32_t *targets,
            size_t n, double *logits, double *loss) {
    int V = m->cfg.vocab_size, d = m->cfg.d_model;
    const char *wname = m->cfg.tie_embeddings ? "embed.weight" : "lm_head.weight";
    const double *W = rm_top(m, wname);
    double *lg = logits ? logits : rm_alloc(n * (size_t)V);
    if (!lg) return PHAX_ERR;
    int rc = PHAX_OK;
    ref_linear_fwd(lg, x, W, NULL, n, d, V);
    if (loss && (rc = ref_cross_entropy_fwd(loss, lg, targets, n, V))) goto done;
    if (grads) {
        double *dlg = rm_alloc(n * (size_t)V);
        if (!dlg) {
            rc = PHAX_ERR;
            goto done;
        }
        if (!(rc = ref_cross_entropy_bwd(dlg, 1.0, lg, targets, n, V)))
            ref_linear_bwd(dx, rm_top_grad(m, grads, wname), NULL, dlg, x, W, n, d, V);
        phax_free(dlg);
    }
done:
    if (!logits) phax_free(lg);
    return rc;
}

// ---------------------------------------------------------------------------
static ref_attn_cfg attn_cfg(const ref_model *m, int window) {
    const phax_model_cfg *c = &m->cfg;
    ref_attn_cfg a = ref_attn_cfg_default(c->n_heads, c->n_kv_heads, c->head_dim);
    a.score = c->score_cosine ? PHAX_SCORE_COSINE : PHAX_SCORE_DOT;
    a.window = window;
    a.rope = 1;
    a.rope_base = c->rope_base;
    return a;
}

// Projections of the attention sub-layer. q: (n, Hq·dh); k, v: (n, Hkv·dh).
static void attn_proj(double *q, double *k, double *v, const double *x, const ref_model *m, int l,
                      size_t n) {
    const phax_model_cfg *c = &m->cfg;
    int d = c->d_model;
    size_t qd = (size_t)c->n_heads * c->head_dim, kd = (size_t)c->n_kv_heads * c->head_dim;  // ≤ PHAX_MAX_WIDTH
    ref_linear_fwd(q, x, rm_param(m, l, "attn.wq.weight"), NULL, n, d, qd);
    ref_linear_fwd(k, x, rm_param(m, l, "attn.wk.weight"), NULL, n, d, kd);
    ref_linear_fwd(v, x, rm_param(m, l, "attn.wv.weight"), NULL, n, d, kd);
}

int rm_attn_fwd(double *y, const double *x, const ref_model *m, int l, int B, int T, int window) {
    const phax_model_cfg *c = &m->cfg;
    size_t n = (size_t)B * T;
    int d = c->d_model;
    size_t qd = (size_t)c->n_heads * c->head_dim, kd = (size_t)c->n_kv_heads * c->head_dim;  // ≤ PHAX_MAX_WIDTH
    double *q = rm_alloc(n * qd), *k = rm_alloc(n * kd), *v = rm_alloc(n * kd), *o = rm_alloc(n * qd);
    int rc = PHAX_ERR;
    if (q && k && v && o) {
        ref_attn_cfg a = attn_cfg(m, window);
        attn_proj(q, k, v, x, m, l, n);
        rc = ref_attention_fwd(o, q, k, v, rm_param(m, l, "attn.logscale"), B, T, &a);
        if (!rc) ref_linear_fwd(y, o, rm_param(m, l, "attn.wo.weight"), NULL, n, qd, d);
    }
    phax_free(q), phax_free(k), phax_free(v), phax_free(o);
    return rc;
}

int rm_attn_bwd(double *dx, double *grads, const double *dy, const double *x, const ref_model *m,
                int l, int B, int T, int window) {
    const phax_model_cfg *c = &m->cfg;
    size_t n = (size_t)B * T;
    int d = c->d_model;
    size_t qd = (size_t)c->n_heads * c->head_dim, kd = (size_t)c->n_kv_heads * c->head_dim;  // ≤ PHAX_MAX_WIDTH
    double *q = rm_alloc(n * qd), *k = rm_alloc(n * kd), *v = rm_alloc(n * kd), *o = rm_alloc(n * qd);
    double *dq = rm_alloc(n * qd), *dk = rm_alloc(n * kd), *dv = rm_alloc(n * kd), *dO = rm_alloc(n * qd);
    int rc = PHAX_ERR;
    if (q && k && v && o && dq && dk && dv && dO) {
        ref_attn_cfg a = attn_cfg(m, window);
        const double *ls = rm_param(m, l, "attn.logscale");
        attn_proj(q, k, v, x, m, l, n);
        if (!(rc = ref_attention_fwd(o, q, k, v, ls, B, T, &a))) {
            const double *Wo = rm_param(m, l, "attn.wo.weight");
            ref_linear_bwd(dO, rm_grad(m, grads, l, "attn.wo.weight"), NULL, dy, o, Wo, n, qd, d);
            rc = ref_attention_bwd(dq, dk, dv, rm_grad(m, grads, l, "attn.logscale"), dO, q, k, v, ls, B, T, &a);
        }
        if (!rc) {
            ref_linear_bwd(dx, rm_grad(m, grads, l, "attn.wq.weight"), NULL, dq, x, rm_param(m, l, "attn.wq.weight"), n, d, qd);
            ref_linear_bwd(dx, rm_grad(m, grads, l, "attn.wk.weight"), NULL, dk, x, rm_param(m, l, "attn.wk.weight"), n, d, kd);
            ref_linear_bwd(dx, rm_grad(m, grads, l, "attn.wv.weight"), NULL, dv, x, rm_param(m, l, "attn.wv.weight"), n, d, kd);
        }
    }
    phax_free(q), phax_free(k), phax_free(v), phax_free(o);
    phax_free(dq), phax_free(dk), phax_free(dv), phax_free(dO);
    return rc;
}
