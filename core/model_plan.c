// The model plan (phax/model_plan.h): every family's block structure, DeepNorm α and β,
// and the window rule, written once (docs/spec.md §3).
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "phax/core.h"
#include "phax/model_plan.h"

const char *phax_sub_kind_name(phax_sub_kind k) {
    static const char *names[PHAX_SUB_COUNT] = {"gss", "attn", "swiglu", "aux", "dual", "mlstm", "gdn"};
    return (int)k >= 0 && (int)k < PHAX_SUB_COUNT ? names[k] : "?";
}

phax_block_rule phax_plan_rule(const phax_model_cfg *c) {
    return c->family == PHAX_FAMILY_PHA ? PHAX_RULE_PARALLEL : PHAX_RULE_PRENORM;
}

static void add(phax_block_plan *p, phax_sub_kind k, const char *norm, int group) {
    p->sub[p->nsub++] = (phax_sub){k, norm, group};
}

void phax_plan_block(const phax_model_cfg *c, int l, phax_block_plan *p) {
    *p = (phax_block_plan){.rule = phax_plan_rule(c)};
    switch (c->family) {
    case PHAX_FAMILY_PHA:  // §3.1: the present branches in mix order [gss, attn, ffn(, ffn_aux)]
        if (c->use_gss) add(p, PHAX_SUB_GSS, "norm_gss.weight", 0);
        if (c->use_attn) add(p, PHAX_SUB_ATTN, "norm_attn.weight", 1);
        if (c->use_ffn && c->ffn_separate_mix) {
            add(p, PHAX_SUB_SWIGLU, "norm_ffn.weight", 2);
            add(p, PHAX_SUB_AUX, "norm_ffn_aux.weight", 2);
        } else if (c->use_ffn) {
            add(p, PHAX_SUB_DUAL, "norm_ffn.weight", 2);
        }
        p->mix = c->freeze_mix ? NULL : "mix.p";
        p->norm_res = "norm_res.weight";
        return;
    case PHAX_FAMILY_TRANSFORMER:  // §3.2
        add(p, PHAX_SUB_ATTN, "norm_attn.weight", 0);
        add(p, PHAX_SUB_SWIGLU, "norm_ffn.weight", 1);
        return;
    case PHAX_FAMILY_SERIAL:  // §3.2
        add(p, PHAX_SUB_GSS, "norm_gss.weight", 0);
        add(p, PHAX_SUB_ATTN, "norm_attn.weight", 1);
        add(p, PHAX_SUB_DUAL, "norm_ffn.weight", 2);
        return;
    default:  // swax, swa, mlstm, swa_full, swax_gdn (§3.3): the mixer of layer l, then SwiGLU
        add(p, phax_layer_is_mlstm(c, l) ? PHAX_SUB_MLSTM : phax_layer_is_gdn(c, l) ? PHAX_SUB_GDN : PHAX_SUB_ATTN,
            "norm_mixer.weight", 0);
        add(p, PHAX_SUB_SWIGLU, "norm_ffn.weight", 1);
        return;
    }
}

// Is a sub-layer of kind s one of kind k? (DUAL is SWIGLU and AUX too.)
static int sub_is(phax_sub_kind s, phax_sub_kind k) {
    return s == k || (s == PHAX_SUB_DUAL && (k == PHAX_SUB_SWIGLU || k == PHAX_SUB_AUX));
}

int phax_plan_has(const phax_model_cfg *c, phax_sub_kind k) {
    for (int l = 0; l < c->n_layers; l++) {
        phax_block_plan p;
        phax_plan_block(c, l, &p);
        for (int i = 0; i < p.nsub; i++)
            if (sub_is(p.sub[i].kind, k)) return 1;
    }
    return 0;
}

int phax_block_w_has(const phax_block_w *b, phax_sub_kind k) {
    for (int i = 0; i < b->nsub; i++)
        if (sub_is(b->sub[i], k)) return 1;
    return 0;
}

double phax_plan_alpha(const phax_model_cfg *c) { return pow(2.0 * c->n_layers, 0.25); }

double phax_plan_beta(const phax_model_cfg *c) { return pow(8.0 * c->n_layers, -0.25); }

int phax_plan_takes_window(const phax_model_cfg *c) {
    return c->family == PHAX_FAMILY_SWAX || c->family == PHAX_FAMILY_SWA || c->family == PHAX_FAMILY_MLSTM ||
           c->family == PHAX_FAMILY_SWA_FULL || c->family == PHAX_FAMILY_SWAX_GDN;
}

int phax_plan_draws_window(const phax_model_cfg *c) {
    return c->family == PHAX_FAMILY_SWAX || c->family == PHAX_FAMILY_SWA || c->family == PHAX_FAMILY_SWA_FULL ||
           c->family == PHAX_FAMILY_SWAX_GDN;
}

int phax_plan_window(const phax_model_cfg *c, int window) {
    if (!phax_plan_takes_window(c)) return c->attn_window;
    return window < 0 ? c->w_long : window;
}

int phax_plan_layer_window(const phax_model_cfg *c, int l, int window) {
    return l >= 0 && phax_layer_is_full(c, l) ? 0 : window;
}

int phax_plan_full_attention(const phax_model_cfg *c, int window) {
    const int w = phax_plan_window(c, window);
    for (int l = 0; l < c->n_layers; l++) {
        phax_block_plan p;
        phax_plan_block(c, l, &p);
        for (int i = 0; i < p.nsub; i++)
            if (p.sub[i].kind == PHAX_SUB_ATTN && phax_plan_layer_window(c, l, w) == 0) return 1;
    }
    return 0;
}

phax_attn_cfg phax_plan_attn_cfg(const phax_model_cfg *c, int l, int window) {
    return (phax_attn_cfg){.Hq = c->n_heads, .Hkv = c->n_kv_heads, .dh = c->head_dim,
                          .dv = c->head_dim, .window = phax_plan_layer_window(c, l, window),
                          .score = c->score_cosine ? PHAX_SCORE_COSINE : PHAX_SCORE_DOT,
                          .rope = 1, .rope_base = c->rope_base, .pos0 = 0};
}

// --- binding a block's weights ---------------------------------------------------------------------
typedef struct {
    const phax_model_cfg *c;
    phax_param_find find;
    void *ctx;
    const char *who;
    int l, missing;
} binder;

static const float *bind(binder *bd, const char *suffix) {
    char name[112];
    snprintf(name, sizeof name, "blocks.%d.%s", bd->l, suffix);
    const float *p = bd->find(bd->ctx, name);
    if (!p && !bd->missing) bd->missing = 1, phax_fail("%s: the model has no %s", bd->who, name);
    return p;
}

int phax_plan_bind_block(const phax_model_cfg *c, int l, phax_param_find find, void *ctx,
                         const char *who, phax_block_w *b, phax_attn_w *a, phax_gss_w *g,
                         phax_mlstm_w *m) {
    binder bd = {c, find, ctx, who, l, 0};
    phax_block_plan bp;
    int has[PHAX_SUB_COUNT] = {0};
    phax_plan_block(c, l, &bp);
    memset(b, 0, sizeof *b), memset(a, 0, sizeof *a), memset(g, 0, sizeof *g), memset(m, 0, sizeof *m);
    b->nsub = bp.nsub;
    for (int i = 0; i < bp.nsub; i++)
        b->sub[i] = bp.sub[i].kind, has[bp.sub[i].kind] = 1, b->norm[i] = bind(&bd, bp.sub[i].norm);
    if (bp.rule == PHAX_RULE_PARALLEL) {
        b->mix_p = bp.mix ? bind(&bd, bp.mix) : NULL;
        b->norm_res = bind(&bd, bp.norm_res);
    }
    if (has[PHAX_SUB_ATTN]) {
        a->wq = bind(&bd, "attn.wq.weight"), a->wk = bind(&bd, "attn.wk.weight");
        a->wv = bind(&bd, "attn.wv.weight"), a->wo = bind(&bd, "attn.wo.weight");
        if (c->score_cosine) a->logscale = bind(&bd, "attn.logscale");
    }
    if (has[PHAX_SUB_SWIGLU] || has[PHAX_SUB_DUAL]) {
        b->ffn_wg = bind(&bd, "ffn.w_gate.weight"), b->ffn_wu = bind(&bd, "ffn.w_up.weight");
        b->ffn_wd = bind(&bd, "ffn.w_down.weight");
    }
    if (has[PHAX_SUB_AUX] || has[PHAX_SUB_DUAL])
        b->aux_w3 = bind(&bd, "ffn_aux.w3.weight"), b->aux_w4 = bind(&bd, "ffn_aux.w4.weight");
    if (has[PHAX_SUB_MLSTM]) {
        m->wq = bind(&bd, "mlstm.wq.weight"), m->wk = bind(&bd, "mlstm.wk.weight");
        m->wv = bind(&bd, "mlstm.wv.weight"), m->wog = bind(&bd, "mlstm.ogate.weight");
        m->wi = bind(&bd, "mlstm.igate.weight"), m->bi = bind(&bd, "mlstm.igate.bias");
        m->wf = bind(&bd, "mlstm.fgate.weight"), m->bf = bind(&bd, "mlstm.fgate.bias");
        m->hnorm = bind(&bd, "mlstm.headnorm.weight"), m->wout = bind(&bd, "mlstm.out.weight");
    }
    if (has[PHAX_SUB_GSS]) {
        g->wv = bind(&bd, "gss.wv.weight"), g->wu = bind(&bd, "gss.wu.weight");
        g->ln_w = bind(&bd, "gss.ln.weight"), g->ln_b = bind(&bd, "gss.ln.bias");
        g->D = bind(&bd, "gss.d"), g->wc = bind(&bd, "gss.wc.weight"), g->wo = bind(&bd, "gss.wo.weight");
        g->lre = bind(&bd, "gss.lambda_re"), g->lim = bind(&bd, "gss.lambda_im");
        g->cre = bind(&bd, "gss.c_re"), g->cim = bind(&bd, "gss.c_im");
    }
    return bd.missing ? PHAX_ERR : PHAX_OK;
}

int phax_plan_bind_gdn(const phax_model_cfg *c, int l, phax_param_find find, void *ctx, const char *who,
                       phax_gdn_w *gd) {
    binder bd = {c, find, ctx, who, l, 0};
    memset(gd, 0, sizeof *gd);
    phax_block_plan bp;
    phax_plan_block(c, l, &bp);
    int has = 0;
    for (int i = 0; i < bp.nsub; i++) has |= bp.sub[i].kind == PHAX_SUB_GDN;
    if (!has) return PHAX_OK;
    gd->wq = bind(&bd, "gdn.wq.weight"), gd->wk = bind(&bd, "gdn.wk.weight"), gd->wv = bind(&bd, "gdn.wv.weight");
    gd->conv_q = bind(&bd, "gdn.conv_q.weight"), gd->conv_k = bind(&bd, "gdn.conv_k.weight");
    gd->conv_v = bind(&bd, "gdn.conv_v.weight"), gd->wa = bind(&bd, "gdn.wa.weight");
    gd->wb = bind(&bd, "gdn.wb.weight"), gd->A_log = bind(&bd, "gdn.A_log"), gd->dt_bias = bind(&bd, "gdn.dt_bias");
    gd->norm = bind(&bd, "gdn.norm.weight"), gd->wg = bind(&bd, "gdn.wg.weight"), gd->wout = bind(&bd, "gdn.out.weight");
    return bd.missing ? PHAX_ERR : PHAX_OK;
}
