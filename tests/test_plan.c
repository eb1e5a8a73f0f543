// The model plan (phax/model_plan.h) pinned against docs/spec.md §3, written out by
// hand here: every family's and PHA switch's blocks (sub-layers in order, norms,
// residual rule), DeepNorm α and β at a few depths, the window every attention layer
// gets, the attention config, and the parameter layout the plan yields (§3.6).
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "phax/model_plan.h"

static phax_model_cfg cfg_of(phax_family f, int n_layers) {
    phax_model_cfg c = phax_model_cfg_default(f);
    c.n_layers = n_layers;
    cr_assert(phax_model_cfg_resolve(&c) == PHAX_OK, "%s", phax_error());
    return c;
}

// "rule | kind norm, kind norm | mix norm_res" of block l.
static void block_str(char *s, size_t cap, const phax_model_cfg *c, int l) {
    phax_block_plan p;
    phax_plan_block(c, l, &p);
    size_t k = (size_t)snprintf(s, cap, "%s |", p.rule == PHAX_RULE_PARALLEL ? "parallel" : "prenorm");
    for (int i = 0; i < p.nsub && k < cap; i++)
        k += (size_t)snprintf(s + k, cap - k, "%s %s %s", i ? "," : "", phax_sub_kind_name(p.sub[i].kind),
                              p.sub[i].norm);
    if (k < cap) snprintf(s + k, cap - k, " | %s %s", p.mix ? p.mix : "-", p.norm_res ? p.norm_res : "-");
}

static void expect_block(const phax_model_cfg *c, int l, const char *want, const char *what) {
    char got[512];
    block_str(got, sizeof got, c, l);
    cr_expect_str_eq(got, want, "%s, block %d:\n  got  %s\n  want %s", what, l, got, want);
}

// §3.1: branches [gss, attn, ffn(, ffn_aux)] in mix order, each with its output norm; mix.p
// unless frozen; norm_res; the same in every block.
Test(plan, pha_blocks_every_switch) {
    struct {
        const char *what;
        int use_gss, use_attn, use_ffn, separate, freeze;
        const char *want;
    } cases[] = {
        {"all on", 1, 1, 1, 0, 0,
         "parallel | gss norm_gss.weight, attn norm_attn.weight, dual norm_ffn.weight | mix.p norm_res.weight"},
        {"use_gss false", 0, 1, 1, 0, 0,
         "parallel | attn norm_attn.weight, dual norm_ffn.weight | mix.p norm_res.weight"},
        {"use_attn false", 1, 0, 1, 0, 0,
         "parallel | gss norm_gss.weight, dual norm_ffn.weight | mix.p norm_res.weight"},
        {"use_ffn false", 1, 1, 0, 0, 0,
         "parallel | gss norm_gss.weight, attn norm_attn.weight | mix.p norm_res.weight"},
        {"ffn alone", 0, 0, 1, 0, 0, "parallel | dual norm_ffn.weight | mix.p norm_res.weight"},
        {"ffn_separate_mix", 1, 1, 1, 1, 0,
         "parallel | gss norm_gss.weight, attn norm_attn.weight, swiglu norm_ffn.weight, aux "
         "norm_ffn_aux.weight | mix.p norm_res.weight"},
        {"freeze_mix", 1, 1, 1, 0, 1,
         "parallel | gss norm_gss.weight, attn norm_attn.weight, dual norm_ffn.weight | - norm_res.weight"},
        {"separate + frozen, no gss", 0, 1, 1, 1, 1,
         "parallel | attn norm_attn.weight, swiglu norm_ffn.weight, aux norm_ffn_aux.weight | - "
         "norm_res.weight"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        phax_model_cfg c = phax_model_cfg_default(PHAX_FAMILY_PHA);
        c.n_layers = 3, c.use_gss = cases[i].use_gss, c.use_attn = cases[i].use_attn;
        c.use_ffn = cases[i].use_ffn, c.ffn_separate_mix = cases[i].separate, c.freeze_mix = cases[i].freeze;
        cr_assert(phax_model_cfg_resolve(&c) == PHAX_OK, "%s: %s", cases[i].what, phax_error());
        for (int l = 0; l < c.n_layers; l++) expect_block(&c, l, cases[i].want, cases[i].what);
    }
}

// §3.2–3.3: pre-norm sub-layers in order; the SWAX mixers alternate by mixer_order.
Test(plan, prenorm_blocks_every_family) {
    const char *tr = "prenorm | attn norm_attn.weight, swiglu norm_ffn.weight | - -";
    const char *se = "prenorm | gss norm_gss.weight, attn norm_attn.weight, dual norm_ffn.weight | - -";
    const char *sw = "prenorm | attn norm_mixer.weight, swiglu norm_ffn.weight | - -";
    const char *ml = "prenorm | mlstm norm_mixer.weight, swiglu norm_ffn.weight | - -";
    phax_model_cfg c;
    c = cfg_of(PHAX_FAMILY_TRANSFORMER, 3);
    for (int l = 0; l < 3; l++) expect_block(&c, l, tr, "transformer");
    c = cfg_of(PHAX_FAMILY_SERIAL, 3);
    for (int l = 0; l < 3; l++) expect_block(&c, l, se, "serial");
    c = cfg_of(PHAX_FAMILY_SWA, 3);
    for (int l = 0; l < 3; l++) expect_block(&c, l, sw, "swa");
    c = cfg_of(PHAX_FAMILY_MLSTM, 3);
    for (int l = 0; l < 3; l++) expect_block(&c, l, ml, "mlstm");
    c = cfg_of(PHAX_FAMILY_SWA_FULL, 3);  // every mixer attention; the windows differ (window_per_layer)
    for (int l = 0; l < 3; l++) expect_block(&c, l, sw, "swa_full");
    c = cfg_of(PHAX_FAMILY_SWAX, 4);  // mixer_order "mlstm_first" (default): mLSTM at even l
    for (int l = 0; l < 4; l++) expect_block(&c, l, l % 2 == 0 ? ml : sw, "swax mlstm_first");
    c = phax_model_cfg_default(PHAX_FAMILY_SWAX);
    c.n_layers = 4, c.mlstm_first = 0;  // "swa_first": SWA at even l
    cr_assert(phax_model_cfg_resolve(&c) == PHAX_OK, "%s", phax_error());
    for (int l = 0; l < 4; l++) expect_block(&c, l, l % 2 == 0 ? sw : ml, "swax swa_first");
    const char *gd = "prenorm | gdn norm_mixer.weight, swiglu norm_ffn.weight | - -";
    c = cfg_of(PHAX_FAMILY_SWAX_GDN, 4);  // the GDN layers in swax's mLSTM places
    for (int l = 0; l < 4; l++) {
        expect_block(&c, l, l % 2 == 0 ? gd : sw, "swax_gdn mlstm_first");
        cr_expect(phax_layer_is_gdn(&c, l) == (l % 2 == 0) && !phax_layer_is_mlstm(&c, l) && !phax_layer_is_full(&c, l));
    }
    c.mlstm_first = 0;
    for (int l = 0; l < 4; l++) expect_block(&c, l, l % 2 == 0 ? sw : gd, "swax_gdn swa_first");
}

Test(plan, has_kinds) {
    phax_model_cfg c = cfg_of(PHAX_FAMILY_MLSTM, 2);
    cr_expect(!phax_plan_has(&c, PHAX_SUB_ATTN) && phax_plan_has(&c, PHAX_SUB_MLSTM) && !phax_plan_has(&c, PHAX_SUB_GDN));
    c = cfg_of(PHAX_FAMILY_SWAX_GDN, 2);
    cr_expect(phax_plan_has(&c, PHAX_SUB_ATTN) && phax_plan_has(&c, PHAX_SUB_GDN) && !phax_plan_has(&c, PHAX_SUB_MLSTM));
    c = cfg_of(PHAX_FAMILY_SERIAL, 2);  // the dual FFN holds SwiGLU and aux
    cr_expect(phax_plan_has(&c, PHAX_SUB_SWIGLU) && phax_plan_has(&c, PHAX_SUB_AUX) &&
              phax_plan_has(&c, PHAX_SUB_GSS) && !phax_plan_has(&c, PHAX_SUB_MLSTM));
    c = phax_model_cfg_default(PHAX_FAMILY_PHA);
    c.use_attn = 0;
    cr_assert(phax_model_cfg_resolve(&c) == PHAX_OK);
    cr_expect(!phax_plan_has(&c, PHAX_SUB_ATTN) && phax_plan_has(&c, PHAX_SUB_GSS));
}

// §1.4 / §3.1 / §4: α = (2L)^{1/4}, β = (8L)^{−1/4}, the values written out.
Test(plan, deepnorm_alpha_beta) {
    struct {
        int L;
        double alpha, beta;
    } v[] = {
        {1, 1.1892071150027210667, 0.59460355750136053336},   // 2^{1/4}, 8^{−1/4}
        {2, 1.4142135623730950488, 0.5},                      // √2, 16^{−1/4}
        {8, 2.0, 0.35355339059327376220},                     // 16^{1/4}, 64^{−1/4} = 1/(2√2)
        {32, 2.8284271247461900976, 0.25},                    // 64^{1/4} = 2√2, 256^{−1/4}
    };
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        phax_model_cfg c = cfg_of(PHAX_FAMILY_PHA, v[i].L);
        double a = phax_plan_alpha(&c), b = phax_plan_beta(&c);
        cr_expect(fabs(a - v[i].alpha) <= 4e-16 * v[i].alpha, "L = %d: alpha %.17g, want %.17g", v[i].L, a,
                  v[i].alpha);
        cr_expect(fabs(b - v[i].beta) <= 4e-16 * v[i].beta, "L = %d: beta %.17g, want %.17g", v[i].L, b,
                  v[i].beta);
    }
}

// §3: the SWAX family takes the call's window (−1 = w_long, 0 = full, w > 0); pha,
// transformer and serial always use attn_window.
Test(plan, window_rule) {
    const int calls[] = {-1, 0, 7};
    for (int f = 0; f < PHAX_FAMILY_COUNT; f++) {
        phax_model_cfg c = phax_model_cfg_default((phax_family)f);
        c.attn_window = 5, c.w_short = 3, c.w_long = 12;
        cr_assert(phax_model_cfg_resolve(&c) == PHAX_OK, "%s", phax_error());
        int swax = f == PHAX_FAMILY_SWAX || f == PHAX_FAMILY_SWA || f == PHAX_FAMILY_MLSTM || f == PHAX_FAMILY_SWA_FULL ||
                   f == PHAX_FAMILY_SWAX_GDN;
        cr_expect(phax_plan_takes_window(&c) == swax, "%s", phax_family_name(c.family));
        const int want[] = {swax ? 12 : 5, swax ? 0 : 5, swax ? 7 : 5};
        for (int i = 0; i < 3; i++)
            cr_expect(phax_plan_window(&c, calls[i]) == want[i], "%s, call window %d: got %d, want %d",
                      phax_family_name(c.family), calls[i], phax_plan_window(&c, calls[i]), want[i]);
    }
    phax_model_cfg c = cfg_of(PHAX_FAMILY_TRANSFORMER, 2);  // attn_window 0: full causal
    cr_expect(phax_plan_window(&c, -1) == 0 && phax_plan_window(&c, 9) == 0);
}

// swa_full: the full-attention layers take the places swax gives its mLSTM layers (mixer_order
// "mlstm_first": the even l) and attend to the whole prefix whatever the call's window; the other
// layers take the call's window, as every attention layer of every other family does.
Test(plan, window_per_layer) {
    phax_model_cfg c = cfg_of(PHAX_FAMILY_SWA_FULL, 4);
    for (int l = 0; l < 4; l++) {
        const int full = l % 2 == 0;
        cr_expect(phax_layer_is_full(&c, l) == full && !phax_layer_is_mlstm(&c, l), "layer %d", l);
        cr_expect(phax_plan_layer_window(&c, l, 7) == (full ? 0 : 7), "layer %d", l);
        cr_expect(phax_plan_attn_cfg(&c, l, 7).window == (full ? 0 : 7), "layer %d", l);
        cr_expect(phax_plan_attn_cfg(&c, l, 0).window == 0, "layer %d", l);
    }
    cr_expect(phax_plan_attn_cfg(&c, -1, 7).window == 7);  // no layer: the call's window
    c.mlstm_first = 0;  // "swa_first": the full layers at odd l
    for (int l = 0; l < 4; l++) cr_expect(phax_plan_layer_window(&c, l, 7) == (l % 2 ? 0 : 7), "swa_first %d", l);
    for (int f = 0; f < PHAX_FAMILY_COUNT; f++) {  // no other family has a full layer
        if (f == PHAX_FAMILY_SWA_FULL) continue;
        phax_model_cfg o = cfg_of((phax_family)f, 3);
        for (int l = 0; l < 3; l++)
            cr_expect(!phax_layer_is_full(&o, l) && phax_plan_attn_cfg(&o, l, 5).window == 5, "%s layer %d",
                      phax_family_name(o.family), l);
    }
}

// §3.4: training draws the window per step in swax, swa and swa_full only.
// §3 / phax eval --carry: an attention sub-layer attends to the whole prefix when its window
// (the call's in the SWAX family, attn_window in the rest) is 0; mlstm has no attention.
Test(plan, window_draw_and_full_attention) {
    const int calls[] = {-1, 0, 7};
    //                                   draws  full at call -1, 0, 7 (attn_window 5 / w_long 12)
    const struct {
        phax_family f;
        int draws, full[3];
    } v[] = {
        {PHAX_FAMILY_PHA, 0, {0, 0, 0}},   {PHAX_FAMILY_TRANSFORMER, 0, {0, 0, 0}},
        {PHAX_FAMILY_SERIAL, 0, {0, 0, 0}}, {PHAX_FAMILY_SWAX, 1, {0, 1, 0}},
        {PHAX_FAMILY_SWA, 1, {0, 1, 0}},   {PHAX_FAMILY_MLSTM, 0, {0, 0, 0}},
        {PHAX_FAMILY_SWA_FULL, 1, {1, 1, 1}},  // its full layers attend to everything at any window
        {PHAX_FAMILY_SWAX_GDN, 1, {0, 1, 0}},  // as swax: SWA at the call's window, GDN has none
    };
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        phax_model_cfg c = phax_model_cfg_default(v[i].f);
        c.n_layers = 2, c.attn_window = 5, c.w_short = 3, c.w_long = 12;
        cr_assert(phax_model_cfg_resolve(&c) == PHAX_OK, "%s", phax_error());
        const char *fam = phax_family_name(c.family);
        cr_expect(phax_plan_draws_window(&c) == v[i].draws, "%s: draws %d", fam, phax_plan_draws_window(&c));
        for (int k = 0; k < 3; k++)
            cr_expect(phax_plan_full_attention(&c, calls[k]) == v[i].full[k], "%s, call window %d: full %d",
                      fam, calls[k], phax_plan_full_attention(&c, calls[k]));
        if (v[i].f == PHAX_FAMILY_PHA || v[i].f == PHAX_FAMILY_TRANSFORMER || v[i].f == PHAX_FAMILY_SERIAL) {
            c.attn_window = 0;  // full causal whatever the call says
            for (int k = 0; k < 3; k++)
                cr_expect(phax_plan_full_attention(&c, calls[k]) == 1, "%s, attn_window 0, call %d", fam, calls[k]);
        }
    }
    phax_model_cfg c = cfg_of(PHAX_FAMILY_PHA, 2);  // no attention branch: nothing attends
    c.use_attn = 0;
    cr_assert(phax_model_cfg_resolve(&c) == PHAX_OK);
    cr_expect(c.attn_window == 0 && !phax_plan_full_attention(&c, 0));
    c = cfg_of(PHAX_FAMILY_SWAX, 1);  // one block, mLSTM (mlstm_first): no SWA layer
    cr_expect(!phax_plan_full_attention(&c, 0));
    c.mlstm_first = 0;  // swa_first: the one block is SWA
    cr_expect(phax_plan_full_attention(&c, 0) && !phax_plan_full_attention(&c, -1));
    c = cfg_of(PHAX_FAMILY_SWA_FULL, 1);  // one block, full (mlstm_first's place)
    cr_expect(phax_plan_full_attention(&c, -1) && phax_plan_full_attention(&c, 7));
    c.mlstm_first = 0;  // the one block is SWA: full only at call window 0
    cr_expect(phax_plan_full_attention(&c, 0) && !phax_plan_full_attention(&c, -1) &&
              !phax_plan_full_attention(&c, 7));
}

// §3: Hq = n_heads, Hkv = n_kv_heads, dh = dv = head_dim, the score mode of `score`, RoPE with
// rope_base, pos0 0, the window given.
Test(plan, attention_config) {
    phax_model_cfg c = phax_model_cfg_default(PHAX_FAMILY_SERIAL);
    c.d_model = 48, c.n_heads = 6, c.n_kv_heads = 2, c.head_dim = 10, c.rope_base = 500;
    cr_assert(phax_model_cfg_resolve(&c) == PHAX_OK, "%s", phax_error());
    phax_attn_cfg a = phax_plan_attn_cfg(&c, -1, 4);
    cr_expect(a.Hq == 6 && a.Hkv == 2 && a.dh == 10 && a.dv == 10 && a.window == 4);
    cr_expect(a.score == PHAX_SCORE_COSINE && a.rope == 1 && a.rope_base == 500 && a.pos0 == 0);
    c = cfg_of(PHAX_FAMILY_SWA, 2);  // dot scores by default in the SWAX family; rope_base 10000
    a = phax_plan_attn_cfg(&c, -1, 0);
    cr_expect(a.score == PHAX_SCORE_DOT && a.rope_base == 10000 && a.window == 0);
    cr_expect(phax_attn_cfg_check(&a) == PHAX_OK, "%s", phax_error());
}

// §3.6: the block parameter names the layout builds from the plan, in order.
static void expect_layout(const phax_model_cfg *c, const char *const *want, int nwant, const char *what) {
    phax_layout L;
    cr_assert(phax_layout_build(&L, c) == PHAX_OK, "%s", phax_error());
    cr_assert_eq(L.n, nwant, "%s: %d tensors, want %d", what, L.n, nwant);
    for (int i = 0; i < nwant; i++)
        cr_expect_str_eq(L.p[i].name, want[i], "%s: tensor %d is %s, want %s", what, i, L.p[i].name, want[i]);
    phax_layout_free(&L);
}

#define ATTN(l) "blocks." #l ".attn.wq.weight", "blocks." #l ".attn.wk.weight", \
                "blocks." #l ".attn.wv.weight", "blocks." #l ".attn.wo.weight"
#define FFN(l) "blocks." #l ".ffn.w_gate.weight", "blocks." #l ".ffn.w_up.weight", "blocks." #l ".ffn.w_down.weight"
#define AUX(l) "blocks." #l ".ffn_aux.w3.weight", "blocks." #l ".ffn_aux.w4.weight"
#define MLSTM(l) "blocks." #l ".mlstm.wq.weight", "blocks." #l ".mlstm.wk.weight", \
    "blocks." #l ".mlstm.wv.weight", "blocks." #l ".mlstm.ogate.weight", "blocks." #l ".mlstm.igate.weight", \
    "blocks." #l ".mlstm.igate.bias", "blocks." #l ".mlstm.fgate.weight", "blocks." #l ".mlstm.fgate.bias", \
    "blocks." #l ".mlstm.headnorm.weight", "blocks." #l ".mlstm.out.weight"

Test(plan, layout_from_plan) {
    // pha without GSS, FFN halves mixed separately, dot scores: output norms after their
    // group (both FFN halves, then both norms), then mix.p and norm_res.
    phax_model_cfg c = phax_model_cfg_default(PHAX_FAMILY_PHA);
    c.n_layers = 1, c.use_gss = 0, c.ffn_separate_mix = 1, c.score_cosine = 0;
    cr_assert(phax_model_cfg_resolve(&c) == PHAX_OK);
    const char *pha[] = {"embed.weight", "norm_emb.weight", ATTN(0), "blocks.0.norm_attn.weight", FFN(0),
                         AUX(0), "blocks.0.norm_ffn.weight", "blocks.0.norm_ffn_aux.weight",
                         "blocks.0.mix.p", "blocks.0.norm_res.weight"};
    expect_layout(&c, pha, sizeof pha / sizeof *pha, "pha separate mix");
    // transformer, untied, cosine: pre-norms before their sub-layer, logscale last in attn.
    c = phax_model_cfg_default(PHAX_FAMILY_TRANSFORMER);
    c.n_layers = 1, c.tie_embeddings = 0;
    cr_assert(phax_model_cfg_resolve(&c) == PHAX_OK);
    const char *tr[] = {"embed.weight", "blocks.0.norm_attn.weight", ATTN(0), "blocks.0.attn.logscale",
                        "blocks.0.norm_ffn.weight", FFN(0), "norm_f.weight", "lm_head.weight"};
    expect_layout(&c, tr, sizeof tr / sizeof *tr, "transformer untied");
    // swax, 2 layers, dot: mLSTM first, then SWA.
    c = cfg_of(PHAX_FAMILY_SWAX, 2);
    const char *sw[] = {"embed.weight", "blocks.0.norm_mixer.weight", MLSTM(0), "blocks.0.norm_ffn.weight",
                        FFN(0), "blocks.1.norm_mixer.weight", ATTN(1), "blocks.1.norm_ffn.weight", FFN(1),
                        "norm_f.weight"};
    expect_layout(&c, sw, sizeof sw / sizeof *sw, "swax");
}

// §3.6: the tensor counts and sizes of every family with every default (2 layers).
Test(plan, layout_counts_every_family) {
    const struct {
        phax_family f;
        int n;
        int64_t numel;
    } v[] = {{PHAX_FAMILY_PHA, 54, 175022},   {PHAX_FAMILY_TRANSFORMER, 22, 123208},
             {PHAX_FAMILY_SERIAL, 50, 174888}, {PHAX_FAMILY_SWAX, 26, 123784},
             {PHAX_FAMILY_SWA, 20, 123200},    {PHAX_FAMILY_MLSTM, 32, 124368},
             {PHAX_FAMILY_SWA_FULL, 20, 123200},  // swa's tensors: its layers differ in window only
             {PHAX_FAMILY_SWAX_GDN, 29, 124248}};  // swax's 10 mLSTM tensors (16,968) → 13 GDN (17,432)
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        phax_model_cfg c = phax_model_cfg_default(v[i].f);
        cr_assert(phax_model_cfg_resolve(&c) == PHAX_OK);
        int n;
        int64_t numel;
        cr_assert(phax_layout_count(&c, &n, &numel) == PHAX_OK, "%s", phax_error());
        cr_expect(n == v[i].n && numel == v[i].numel, "%s: %d tensors / %lld values, want %d / %lld",
                  phax_family_name(v[i].f), n, (long long)numel, v[i].n, (long long)v[i].numel);
    }
}

// --- the decoders' binding (phax_plan_bind_block) ---------------------------------------------

// A layout over a fake buffer: name -> base + offset; `hide` is reported missing.
typedef struct {
    const phax_layout *L;
    const float *base;
    const char *hide;
} fake_params;

static const float *fake_find(void *ctx, const char *name) {
    const fake_params *f = ctx;
    if (f->hide && !strcmp(name, f->hide)) return NULL;
    const int i = phax_layout_find(f->L, name);
    return i < 0 ? NULL : f->base + f->L->p[i].offset;
}

// Every block of every family and PHA switch binds, and what it binds is exactly the block's
// tensors of the layout, each once: a parameter a decoder would not read (or read twice)
// fails here. Sub-layers the block lacks stay NULL; a frozen mix is NULL (the decoders'
// zeros); the structure is phax_plan_block's.
Test(plan, bind_block_covers_the_layout) {
    struct {
        phax_family f;
        int use_gss, use_attn, use_ffn, separate, freeze, cosine;
    } v[] = {{PHAX_FAMILY_PHA, 1, 1, 1, 0, 0, 1},         {PHAX_FAMILY_PHA, 0, 1, 1, 1, 1, 0},
             {PHAX_FAMILY_PHA, 1, 0, 1, 0, 0, 1},         {PHAX_FAMILY_PHA, 1, 1, 0, 0, 1, 1},
             {PHAX_FAMILY_TRANSFORMER, 1, 1, 1, 0, 0, 1}, {PHAX_FAMILY_TRANSFORMER, 1, 1, 1, 0, 0, 0},
             {PHAX_FAMILY_SERIAL, 1, 1, 1, 0, 0, 1},      {PHAX_FAMILY_SWAX, 1, 1, 1, 0, 0, 0},
             {PHAX_FAMILY_SWA, 1, 1, 1, 0, 0, 0},         {PHAX_FAMILY_MLSTM, 1, 1, 1, 0, 0, 0},
             {PHAX_FAMILY_SWA_FULL, 1, 1, 1, 0, 0, 1}};
    for (size_t k = 0; k < sizeof v / sizeof *v; k++) {
        phax_model_cfg c = phax_model_cfg_default(v[k].f);
        c.n_layers = 3;
        if (v[k].f == PHAX_FAMILY_PHA)
            c.use_gss = v[k].use_gss, c.use_attn = v[k].use_attn, c.use_ffn = v[k].use_ffn,
            c.ffn_separate_mix = v[k].separate, c.freeze_mix = v[k].freeze;
        c.score_cosine = v[k].cosine;
        cr_assert(phax_model_cfg_resolve(&c) == PHAX_OK, "%s", phax_error());
        phax_layout L;
        cr_assert(phax_layout_build(&L, &c) == PHAX_OK, "%s", phax_error());
        float *buf = calloc(L.numel, sizeof *buf);
        int *seen = calloc((size_t)L.n, sizeof *seen);
        cr_assert(buf && seen);
        fake_params fp = {&L, buf, NULL};
        for (int l = 0; l < c.n_layers; l++) {
            phax_block_w b;
            phax_attn_w a;
            phax_gss_w g;
            phax_mlstm_w m;
            cr_assert(phax_plan_bind_block(&c, l, fake_find, &fp, "t", &b, &a, &g, &m) == PHAX_OK, "%s",
                      phax_error());
            phax_block_plan bp;
            phax_plan_block(&c, l, &bp);
            cr_expect(b.nsub == bp.nsub, "%s block %d: nsub", phax_family_name(c.family), l);
            for (int i = 0; i < bp.nsub; i++) cr_expect(b.sub[i] == bp.sub[i].kind);
            // Every non-NULL pointer the binder filled: which tensor it is.
            const float *ptrs[64];
            int np = 0;
            for (int i = 0; i < b.nsub; i++) ptrs[np++] = b.norm[i];
            const float *const more[] = {b.mix_p, b.norm_res, b.ffn_wg, b.ffn_wu, b.ffn_wd, b.aux_w3, b.aux_w4,
                                         a.wq, a.wk, a.wv, a.wo, a.logscale,
                                         g.wv, g.wu, g.ln_w, g.ln_b, g.D, g.wc, g.wo, g.lre, g.lim, g.cre, g.cim,
                                         m.wq, m.wk, m.wv, m.wog, m.wi, m.bi, m.wf, m.bf, m.hnorm, m.wout};
            for (size_t i = 0; i < sizeof more / sizeof *more; i++)
                if (more[i]) ptrs[np++] = more[i];
            for (int i = 0; i < np; i++) {
                cr_assert(ptrs[i], "%s block %d: a norm is NULL", phax_family_name(c.family), l);
                int t = -1;
                for (int j = 0; j < L.n; j++)
                    if (buf + L.p[j].offset == ptrs[i]) t = j;
                cr_assert(t >= 0, "%s block %d: a pointer that is no tensor", phax_family_name(c.family), l);
                char pre[32];
                snprintf(pre, sizeof pre, "blocks.%d.", l);
                cr_expect(!strncmp(L.p[t].name, pre, strlen(pre)), "block %d bound %s", l, L.p[t].name);
                seen[t]++;
            }
            cr_expect((b.mix_p == NULL) == (c.family != PHAX_FAMILY_PHA || c.freeze_mix),
                      "%s block %d: mix", phax_family_name(c.family), l);
            cr_expect((a.logscale != NULL) == (a.wq != NULL && c.score_cosine));
        }
        for (int j = 0; j < L.n; j++)
            if (!strncmp(L.p[j].name, "blocks.", 7))
                cr_expect(seen[j] == 1, "%s (use_gss %d use_attn %d use_ffn %d separate %d frozen %d): %s bound %d times",
                          phax_family_name(c.family), c.use_gss, c.use_attn, c.use_ffn, c.ffn_separate_mix,
                          c.freeze_mix, L.p[j].name, seen[j]);
        // A missing parameter: PHAX_ERR naming it, after the caller's WHO.
        for (int j = 0; j < L.n; j++) {
            if (strncmp(L.p[j].name, "blocks.2.", 9)) continue;
            fp.hide = L.p[j].name;
            phax_block_w b;
            phax_attn_w a;
            phax_gss_w g;
            phax_mlstm_w m;
            cr_expect(phax_plan_bind_block(&c, 2, fake_find, &fp, "who_new", &b, &a, &g, &m) == PHAX_ERR,
                      "%s: missing %s accepted", phax_family_name(c.family), fp.hide);
            char want[160];
            snprintf(want, sizeof want, "who_new: the model has no %s", fp.hide);
            cr_expect_str_eq(phax_error(), want);
        }
        fp.hide = NULL;
        free(buf), free(seen);
        phax_layout_free(&L);
    }
}
