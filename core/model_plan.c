// The model plan (phax/model_plan.h): every family's block structure, DeepNorm α and β,
// and the window rule, written once (docs/spec.md §3).
#include <math.h>

#include "phax/model_plan.h"

const char *phax_sub_kind_name(phax_sub_kind k) {
    static const char *names[PHAX_SUB_COUNT] = {"gss", "attn", "swiglu", "aux", "dual", "mlstm"};
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
    default:  // swax, swa, mlstm (§3.3): the mixer of layer l, then SwiGLU
        add(p, phax_layer_is_mlstm(c, l) ? PHAX_SUB_MLSTM : PHAX_SUB_ATTN, "norm_mixer.weight", 0);
        add(p, PHAX_SUB_SWIGLU, "norm_ffn.weight", 1);
        return;
    }
}

int phax_plan_has(const phax_model_cfg *c, phax_sub_kind k) {
    for (int l = 0; l < c->n_layers; l++) {
        phax_block_plan p;
        phax_plan_block(c, l, &p);
        for (int i = 0; i < p.nsub; i++) {
            phax_sub_kind s = p.sub[i].kind;
            if (s == k || (s == PHAX_SUB_DUAL && (k == PHAX_SUB_SWIGLU || k == PHAX_SUB_AUX))) return 1;
        }
    }
    return 0;
}

double phax_plan_alpha(const phax_model_cfg *c) { return pow(2.0 * c->n_layers, 0.25); }

double phax_plan_beta(const phax_model_cfg *c) { return pow(8.0 * c->n_layers, -0.25); }

int phax_plan_takes_window(const phax_model_cfg *c) {
    return c->family == PHAX_FAMILY_SWAX || c->family == PHAX_FAMILY_SWA ||
           c->family == PHAX_FAMILY_MLSTM;
}

int phax_plan_draws_window(const phax_model_cfg *c) {
    return c->family == PHAX_FAMILY_SWAX || c->family == PHAX_FAMILY_SWA;
}

int phax_plan_full_attention(const phax_model_cfg *c, int window) {
    return phax_plan_has(c, PHAX_SUB_ATTN) && phax_plan_window(c, window) == 0;
}

int phax_plan_window(const phax_model_cfg *c, int window) {
    if (!phax_plan_takes_window(c)) return c->attn_window;
    return window < 0 ? c->w_long : window;
}

phax_attn_cfg phax_plan_attn_cfg(const phax_model_cfg *c, int window) {
    return (phax_attn_cfg){.Hq = c->n_heads, .Hkv = c->n_kv_heads, .dh = c->head_dim,
                          .dv = c->head_dim, .window = window,
                          .score = c->score_cosine ? PHAX_SCORE_COSINE : PHAX_SCORE_DOT,
                          .rope = 1, .rope_base = c->rope_base, .pos0 = 0};
}
