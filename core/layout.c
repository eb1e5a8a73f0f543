// Parameter layout (names, shapes, order) and seeded initialisation, shared by
// every backend. Names follow PyTorch module paths; linear weights are (out, in).
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "phax/model.h"
#include "phax/model_plan.h"

// Appends parameters in order; on allocation failure remembers it and stops.
// With L->p == NULL and count_only set it only counts (phax_layout_count).
typedef struct {
    phax_layout *L;
    int cap;
    int failed;
    int count_only;
} builder;

static void add(builder *b, int ndim, int64_t d0, int64_t d1, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void add(builder *b, int ndim, int64_t d0, int64_t d1, const char *fmt, ...) {
    if (b->failed) return;
    // Sizes in 64 bits with overflow checks: a layout must never wrap to a small
    // total (a checkpoint's tensors are copied into a buffer of that size).
    int64_t e1 = ndim == 2 ? d1 : 1;
    if (d0 < 0 || e1 < 0 || (e1 && d0 > INT64_MAX / e1) || b->L->n == INT32_MAX) {
        b->failed = phax_fail("layout: parameter %d has an impossible size (%lld x %lld)", b->L->n,
                              (long long)d0, (long long)e1);
        return;
    }
    int64_t numel = d0 * e1;
    if ((uint64_t)numel > SIZE_MAX - b->L->numel || (uint64_t)numel > (uint64_t)INT64_MAX - b->L->numel) {
        b->failed = phax_fail("layout: the parameter count overflows");
        return;
    }
    if (b->count_only) {
        b->L->n++;
        b->L->numel += (size_t)numel;
        return;
    }
    if (b->L->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 64;
        phax_param_info *p = realloc(b->L->p, (size_t)cap * sizeof *p);
        if (!p) {
            b->failed = phax_fail("layout: out of memory");
            return;
        }
        b->L->p = p, b->cap = cap;
    }
    phax_param_info *t = &b->L->p[b->L->n++];
    memset(t, 0, sizeof *t);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    t->ndim = ndim;
    t->shape[0] = d0, t->shape[1] = d1;
    t->numel = (size_t)numel;
    t->offset = b->L->numel;
    b->L->numel += t->numel;
}

static void add_linear(builder *b, int64_t out, int64_t in, const char *prefix, int l, const char *name) {
    add(b, 2, out, in, "blocks.%d.%s.%s.weight", l, prefix, name);
}

// A norm gain, by its name in the block ("norm_attn.weight").
static void add_norm(builder *b, int d, int l, const char *name) {
    add(b, 1, d, 0, "blocks.%d.%s", l, name);
}

static void add_attn(builder *b, const phax_model_cfg *c, int l) {
    int64_t d = c->d_model, qd = (int64_t)c->n_heads * c->head_dim, kd = (int64_t)c->n_kv_heads * c->head_dim;
    add_linear(b, qd, d, "attn", l, "wq");
    add_linear(b, kd, d, "attn", l, "wk");
    add_linear(b, kd, d, "attn", l, "wv");
    add_linear(b, d, qd, "attn", l, "wo");
    if (c->score_cosine) add(b, 1, c->n_heads, 0, "blocks.%d.attn.logscale", l);
}

static void add_swiglu(builder *b, const phax_model_cfg *c, int l) {
    add_linear(b, c->ffn_hidden, c->d_model, "ffn", l, "w_gate");
    add_linear(b, c->ffn_hidden, c->d_model, "ffn", l, "w_up");
    add_linear(b, c->d_model, c->ffn_hidden, "ffn", l, "w_down");
}

static void add_ffn_aux(builder *b, const phax_model_cfg *c, int l) {
    add_linear(b, c->ffn_aux_hidden, c->d_model, "ffn_aux", l, "w3");
    add_linear(b, c->d_model, c->ffn_aux_hidden, "ffn_aux", l, "w4");
}

static void add_gss(builder *b, const phax_model_cfg *c, int l) {
    int d = c->d_model, F = c->gss_expand, H = c->gss_hidden, N = c->gss_state;
    add_linear(b, F, d, "gss", l, "wv");
    add_linear(b, H, d, "gss", l, "wu");
    add(b, 1, H, 0, "blocks.%d.gss.ln.weight", l);
    add(b, 1, H, 0, "blocks.%d.gss.ln.bias", l);
    add(b, 1, N, 0, "blocks.%d.gss.lambda_re", l);
    add(b, 1, N, 0, "blocks.%d.gss.lambda_im", l);
    add(b, 2, H, N, "blocks.%d.gss.c_re", l);
    add(b, 2, H, N, "blocks.%d.gss.c_im", l);
    add(b, 1, H, 0, "blocks.%d.gss.d", l);
    add_linear(b, F, H, "gss", l, "wc");
    add_linear(b, d, F, "gss", l, "wo");
}

static void add_mlstm(builder *b, const phax_model_cfg *c, int l) {
    int d = c->d_model, NH = c->mlstm_heads;
    add_linear(b, d / 2, d, "mlstm", l, "wq");
    add_linear(b, d / 2, d, "mlstm", l, "wk");
    add_linear(b, d, d, "mlstm", l, "wv");
    add_linear(b, d, d, "mlstm", l, "ogate");
    add_linear(b, NH, d, "mlstm", l, "igate");
    add(b, 1, NH, 0, "blocks.%d.mlstm.igate.bias", l);
    add_linear(b, NH, d, "mlstm", l, "fgate");
    add(b, 1, NH, 0, "blocks.%d.mlstm.fgate.bias", l);
    add(b, 1, d, 0, "blocks.%d.mlstm.headnorm.weight", l);
    add_linear(b, d, d, "mlstm", l, "out");
}

static void add_gdn(builder *b, const phax_model_cfg *c, int l) {
    int d = c->d_model, GH = c->gdn_heads, K = c->gdn_conv;
    add_linear(b, d / 2, d, "gdn", l, "wq");
    add_linear(b, d / 2, d, "gdn", l, "wk");
    add_linear(b, d, d, "gdn", l, "wv");
    add(b, 2, d / 2, K, "blocks.%d.gdn.conv_q.weight", l);
    add(b, 2, d / 2, K, "blocks.%d.gdn.conv_k.weight", l);
    add(b, 2, d, K, "blocks.%d.gdn.conv_v.weight", l);
    add_linear(b, GH, d, "gdn", l, "wa");
    add_linear(b, GH, d, "gdn", l, "wb");
    add(b, 1, GH, 0, "blocks.%d.gdn.A_log", l);
    add(b, 1, GH, 0, "blocks.%d.gdn.dt_bias", l);
    add(b, 1, d / GH, 0, "blocks.%d.gdn.norm.weight", l);
    add_linear(b, d, d, "gdn", l, "wg");
    add_linear(b, d, d, "gdn", l, "out");
}

// The parameters of one sub-layer (its groups of docs/spec.md §3.6), norm excluded.
static void add_sub(builder *b, const phax_model_cfg *c, int l, phax_sub_kind k) {
    switch (k) {
    case PHAX_SUB_GSS: add_gss(b, c, l); return;
    case PHAX_SUB_ATTN: add_attn(b, c, l); return;
    case PHAX_SUB_SWIGLU: add_swiglu(b, c, l); return;
    case PHAX_SUB_AUX: add_ffn_aux(b, c, l); return;
    case PHAX_SUB_DUAL: add_swiglu(b, c, l), add_ffn_aux(b, c, l); return;
    case PHAX_SUB_MLSTM: add_mlstm(b, c, l); return;
    case PHAX_SUB_GDN: add_gdn(b, c, l); return;
    }
    b->failed = phax_fail("layout: unknown sub-layer kind %d", (int)k);
}

static void layout_add_all(builder *b, const phax_model_cfg *c);

int phax_layout_build(phax_layout *L, const phax_model_cfg *c) {
    memset(L, 0, sizeof *L);
    builder b = {.L = L};
    layout_add_all(&b, c);
    if (b.failed) {
        phax_layout_free(L);
        return PHAX_ERR;
    }
    return PHAX_OK;
}

int phax_layout_count(const phax_model_cfg *c, int *n_tensors, int64_t *numel) {
    phax_layout L = {0};
    builder b = {.L = &L, .count_only = 1};
    layout_add_all(&b, c);
    if (b.failed) return PHAX_ERR;
    if (n_tensors) *n_tensors = L.n;
    if (numel) *numel = (int64_t)L.numel;
    return PHAX_OK;
}

// Block l in the plan's order (phax/model_plan.h), a group of sub-layers at a time: a
// pre-norm precedes its sub-layer's parameters; output norms (parallel rule) follow their
// group's parameters; then the mix logits (unless frozen) and the post-norm.
static void add_block(builder *b, const phax_model_cfg *c, int l) {
    phax_block_plan p;
    phax_plan_block(c, l, &p);
    for (int i = 0, j; i < p.nsub; i = j) {
        j = i + 1;
        while (j < p.nsub && p.sub[j].group == p.sub[i].group) j++;
        if (p.rule == PHAX_RULE_PRENORM) {
            for (int k = i; k < j; k++)
                add_norm(b, c->d_model, l, p.sub[k].norm), add_sub(b, c, l, p.sub[k].kind);
        } else {
            for (int k = i; k < j; k++) add_sub(b, c, l, p.sub[k].kind);
            for (int k = i; k < j; k++) add_norm(b, c->d_model, l, p.sub[k].norm);
        }
    }
    if (p.mix) add(b, 1, p.nsub, 0, "blocks.%d.%s", l, p.mix);
    if (p.norm_res) add_norm(b, c->d_model, l, p.norm_res);
}

static void layout_add_all(builder *b, const phax_model_cfg *c) {
    int d = c->d_model, parallel = phax_plan_rule(c) == PHAX_RULE_PARALLEL;
    add(b, 2, c->vocab_size, d, "embed.weight");
    if (parallel) add(b, 1, d, 0, "norm_emb.weight");
    for (int l = 0; l < c->n_layers; l++) add_block(b, c, l);
    if (!parallel) add(b, 1, d, 0, "norm_f.weight");
    if (!c->tie_embeddings) add(b, 2, c->vocab_size, d, "lm_head.weight");
}

void phax_layout_free(phax_layout *L) {
    free(L->p);
    memset(L, 0, sizeof *L);
}

int phax_layout_find(const phax_layout *L, const char *name) {
    for (int i = 0; i < L->n; i++)
        if (!strcmp(L->p[i].name, name)) return i;
    return -1;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

// DeepNorm β = (8L)^{−1/4} scales PHA's attention W_v/W_o, every FFN weight,
// and GSS W_u/W_o at init (forward-neutral under the branch RMSNorms).
static int deepnorm_scaled(const char *name) {
    static const char *parts[] = {".attn.wv.weight", ".attn.wo.weight", ".ffn.", ".ffn_aux.",
                                  ".gss.wu.weight", ".gss.wo.weight"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (strstr(name, parts[i])) return 1;
    return 0;
}

int phax_model_init(double *x, const phax_layout *L, const phax_model_cfg *c, uint64_t seed) {
    double beta = phax_plan_beta(c);
    for (int i = 0; i < L->n; i++) {
        const phax_param_info *t = &L->p[i];
        double *p = x + t->offset;
        phax_rng r = phax_rng_stream(seed, phax_hash_str(t->name));
        const char *nm = t->name;
        if (!strcmp(nm, "embed.weight") || !strcmp(nm, "lm_head.weight")) {
            for (size_t j = 0; j < t->numel; j++) p[j] = 0.02 * phax_rng_normal(&r);
        } else if (ends_with(nm, "norm_emb.weight") || ends_with(nm, "norm_f.weight") ||
                   (strstr(nm, ".norm_") && ends_with(nm, ".weight")) || ends_with(nm, ".ln.weight") ||
                   ends_with(nm, ".headnorm.weight") || ends_with(nm, ".gdn.norm.weight")) {
            for (size_t j = 0; j < t->numel; j++) p[j] = 1.0;  // norm gains
        } else if (ends_with(nm, ".ln.bias") || ends_with(nm, ".mix.p")) {
            for (size_t j = 0; j < t->numel; j++) p[j] = 0.0;  // equal mix: softplus(0) each
        } else if (ends_with(nm, ".attn.logscale")) {
            for (size_t j = 0; j < t->numel; j++) p[j] = log(10.0);
        } else if (ends_with(nm, ".igate.bias")) {
            for (size_t j = 0; j < t->numel; j++) p[j] = c->igate_bias_init;
        } else if (ends_with(nm, ".fgate.bias")) {
            double bf = log(c->fgate_init / (1.0 - c->fgate_init));  // σ(b_f) = fgate_init
            for (size_t j = 0; j < t->numel; j++) p[j] = bf;
        } else if (c->gss_long_memory_init && ends_with(nm, ".gss.lambda_re")) {
            // Λre = log u, u log-uniform in [1e-3, 1e-1]: slowly decaying modes.
            for (size_t j = 0; j < t->numel; j++)
                p[j] = log(1e-3) + (log(1e-1) - log(1e-3)) * phax_rng_uniform(&r);
        } else if (c->gss_long_memory_init && ends_with(nm, ".gss.lambda_im")) {
            // Frequencies spread over (0, π]: Λim_n = log(π (n+1) / N).
            for (size_t j = 0; j < t->numel; j++) p[j] = log(3.14159265358979323846 * (double)(j + 1) / (double)t->numel);
        } else if (strstr(nm, ".gss.lambda_") || strstr(nm, ".gss.c_") || ends_with(nm, ".gss.d")) {
            for (size_t j = 0; j < t->numel; j++) p[j] = phax_rng_normal(&r);  // N(0,1), public GSS code
        } else if (ends_with(nm, ".gdn.A_log")) {
            // flash-linear-attention: A ~ U(0, 16), A_log = log A (16·(1 − U) keeps A > 0).
            for (size_t j = 0; j < t->numel; j++) p[j] = log(16.0 * (1.0 - phax_rng_uniform(&r)));
        } else if (ends_with(nm, ".gdn.dt_bias")) {
            // flash-linear-attention (Mamba-2's Δ init): dt log-uniform in [1e-3, 0.1), dt_bias its
            // inverse softplus, so softplus(dt_bias) = dt.
            for (size_t j = 0; j < t->numel; j++) {
                double dt = exp(log(1e-3) + (log(0.1) - log(1e-3)) * phax_rng_uniform(&r));
                p[j] = dt + log(-expm1(-dt));
            }
        } else if (strstr(nm, ".gdn.conv_") && t->ndim == 2) {
            // PyTorch's Conv1d default (fan_in = K for a depthwise kernel): U(−1/√K, 1/√K).
            double a = 1.0 / sqrt((double)t->shape[1]);
            for (size_t j = 0; j < t->numel; j++) p[j] = a * (2.0 * phax_rng_uniform(&r) - 1.0);
        } else if (t->ndim == 2 && ends_with(nm, ".weight")) {
            double sd = 1.0 / sqrt((double)t->shape[1]);  // 1/sqrt(fan_in)
            if (phax_plan_rule(c) == PHAX_RULE_PARALLEL && deepnorm_scaled(nm)) sd *= beta;
            for (size_t j = 0; j < t->numel; j++) p[j] = sd * phax_rng_normal(&r);
        } else {
            return phax_fail("init: no rule for parameter %s", nm);
        }
    }
    return PHAX_OK;
}
