// Model configuration: defaults in one place, derived values, validation with
// messages that name the field.
#include <limits.h>
#include <math.h>
#include <string.h>

#include "phax/model.h"

static const char *FAMILY_NAMES[PHAX_FAMILY_COUNT] = {"pha", "transformer", "serial",
                                                      "swax", "swa", "mlstm", "swa_full", "swax_gdn"};

const char *phax_family_name(phax_family f) {
    return (unsigned)f < PHAX_FAMILY_COUNT ? FAMILY_NAMES[f] : "?";
}

int phax_family_parse(const char *s, phax_family *f) {
    for (int i = 0; i < PHAX_FAMILY_COUNT; i++)
        if (!strcmp(s, FAMILY_NAMES[i])) {
            *f = (phax_family)i;
            return PHAX_OK;
        }
    return phax_fail("config: family \"%s\" is not one of pha, transformer, serial, swax, swa, mlstm, swa_full, swax_gdn",
                     s);
}

// The SWAX family of §3.3: the pre-norm mixer + SwiGLU blocks with a call's window.
static int is_swax_family(phax_family f) {
    return f == PHAX_FAMILY_SWAX || f == PHAX_FAMILY_SWA || f == PHAX_FAMILY_MLSTM || f == PHAX_FAMILY_SWA_FULL ||
           f == PHAX_FAMILY_SWAX_GDN;
}

phax_model_cfg phax_model_cfg_default(phax_family f) {
    phax_model_cfg c = {
        .family = f, .vocab_size = 256, .d_model = 64, .n_layers = 2,
        .n_heads = 4, .n_kv_heads = 0, .head_dim = 0,
        .score_cosine = is_swax_family(f) ? 0 : 1, .rope_base = 0, .attn_window = 0,
        .tie_embeddings = 1, .ffn_hidden = 0, .ffn_aux_hidden = 0,
        .gss_expand = 0, .gss_hidden = 0, .gss_state = 0, .gss_long_memory_init = 0,
        .use_gss = 1, .use_attn = 1, .use_ffn = 1, .ffn_separate_mix = 0, .freeze_mix = 0,
        .mlstm_heads = 0, .mlstm_first = 1, .igate_bias_init = -10.0, .fgate_init = 0.95,
        .mlstm_norm_eps = PHAX_MLSTM_NORM_EPS_DEFAULT, .gdn_heads = 0, .gdn_conv = 0, .gdn_norm_eps = 0,
        .train_len = 0, .w_short = 0, .w_long = 0, .p_short = 0.5, .anneal = 0.1,
    };
    return c;
}

#define REQUIRE(cond, ...) \
    do {                   \
        if (!(cond)) return phax_fail(__VA_ARGS__); \
    } while (0)

static int check_bool(int v, const char *key) {
    REQUIRE(v == 0 || v == 1, "config: %s must be true or false (got %d)", key, v);
    return PHAX_OK;
}

// The maxima of model.h, on a config whose other rules hold. They come before
// anything is sized from the config: a checkpoint's config is untrusted input, and
// the products below (n_heads·head_dim, the parameter count) wrapped in int before.
static int check_maxima(const phax_model_cfg *c) {
    const struct {
        const char *key;
        int v, max;
    } lim[] = {
        {"vocab_size", c->vocab_size, PHAX_MAX_VOCAB},   {"d_model", c->d_model, PHAX_MAX_D_MODEL},
        {"n_layers", c->n_layers, PHAX_MAX_LAYERS},      {"n_heads", c->n_heads, PHAX_MAX_HEADS},
        {"n_kv_heads", c->n_kv_heads, PHAX_MAX_HEADS},   {"head_dim", c->head_dim, PHAX_MAX_HEAD_DIM},
        {"ffn_hidden", c->ffn_hidden, PHAX_MAX_WIDTH},   {"ffn_aux_hidden", c->ffn_aux_hidden, PHAX_MAX_WIDTH},
        {"gss_expand", c->gss_expand, PHAX_MAX_WIDTH},   {"gss_hidden", c->gss_hidden, PHAX_MAX_WIDTH},
        {"gss_state", c->gss_state, PHAX_MAX_GSS_STATE}, {"mlstm_heads", c->mlstm_heads, PHAX_MAX_HEADS},
        {"gdn_heads", c->gdn_heads, PHAX_MAX_HEADS},     {"gdn_conv", c->gdn_conv, PHAX_MAX_GDN_CONV},
        {"train_len", c->train_len, PHAX_MAX_SEQ},       {"attn_window", c->attn_window, PHAX_MAX_SEQ},
        {"w_short", c->w_short, PHAX_MAX_SEQ},           {"w_long", c->w_long, PHAX_MAX_SEQ},
    };
    for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++)
        REQUIRE(lim[i].v <= lim[i].max, "config: %s (%d) exceeds the maximum %d", lim[i].key, lim[i].v,
                lim[i].max);
    long long qd = (long long)c->n_heads * c->head_dim;
    REQUIRE(qd <= PHAX_MAX_WIDTH, "config: n_heads x head_dim (%d x %d = %lld) exceeds the maximum %d",
            c->n_heads, c->head_dim, qd, PHAX_MAX_WIDTH);
    int64_t numel;
    if (phax_layout_count(c, NULL, &numel)) return PHAX_ERR;
    REQUIRE(numel <= PHAX_MAX_PARAMS, "config: %lld parameters exceed the maximum %lld", (long long)numel,
            PHAX_MAX_PARAMS);
    return PHAX_OK;
}

int phax_model_cfg_resolve(phax_model_cfg *c) {
    REQUIRE((unsigned)c->family < PHAX_FAMILY_COUNT, "config: family %d is unknown", (int)c->family);
    REQUIRE(c->vocab_size >= 2, "config: vocab_size (%d) must be >= 2", c->vocab_size);
    REQUIRE(c->d_model >= 2, "config: d_model (%d) must be >= 2", c->d_model);
    REQUIRE(c->n_layers >= 1, "config: n_layers (%d) must be >= 1", c->n_layers);
    REQUIRE(c->n_heads >= 1, "config: n_heads (%d) must be >= 1", c->n_heads);
    if (c->n_kv_heads == 0) c->n_kv_heads = c->n_heads;
    REQUIRE(c->n_kv_heads >= 1, "config: n_kv_heads (%d) must be >= 1", c->n_kv_heads);
    REQUIRE(c->n_heads % c->n_kv_heads == 0, "config: n_heads (%d) is not divisible by n_kv_heads (%d)",
            c->n_heads, c->n_kv_heads);
    if (c->head_dim == 0) {
        REQUIRE(c->d_model % c->n_heads == 0,
                "config: d_model (%d) is not divisible by n_heads (%d); set head_dim", c->d_model, c->n_heads);
        c->head_dim = c->d_model / c->n_heads;
    }
    REQUIRE(c->head_dim >= 2 && c->head_dim % 2 == 0, "config: head_dim (%d) must be even and >= 2 (RoPE)", c->head_dim);
    if (c->rope_base == 0) c->rope_base = 10000.0;
    REQUIRE(c->rope_base > 0 && isfinite(c->rope_base), "config: rope_base (%g) must be > 0", c->rope_base);
    if (check_bool(c->score_cosine, "score (cosine)")) return PHAX_ERR;
    REQUIRE(c->attn_window >= 0, "config: attn_window (%d) must be >= 0 (0 = full)", c->attn_window);
    if (check_bool(c->tie_embeddings, "tie_embeddings")) return PHAX_ERR;
    if (c->ffn_hidden == 0) {  // in 64 bits: 8 d overflows int for d > 2^28
        long long h = (8LL * c->d_model / 3 + 63) / 64 * 64;
        REQUIRE(h <= INT_MAX, "config: d_model (%d) is too large: the derived ffn_hidden overflows int", c->d_model);
        c->ffn_hidden = (int)h;
    }
    REQUIRE(c->ffn_hidden >= 1, "config: ffn_hidden (%d) must be >= 1", c->ffn_hidden);
    if (c->ffn_aux_hidden == 0) c->ffn_aux_hidden = c->d_model / 2 > 0 ? c->d_model / 2 : 1;
    REQUIRE(c->ffn_aux_hidden >= 1, "config: ffn_aux_hidden (%d) must be >= 1", c->ffn_aux_hidden);
    if (c->gss_expand == 0) {
        REQUIRE(c->d_model <= INT_MAX / 2, "config: d_model (%d) is too large: the derived gss_expand overflows int",
                c->d_model);
        c->gss_expand = 2 * c->d_model;
    }
    if (c->gss_hidden == 0) c->gss_hidden = c->d_model / 4 > 0 ? c->d_model / 4 : 1;
    if (c->gss_state == 0) c->gss_state = 64;
    REQUIRE(c->gss_expand >= 1, "config: gss_expand (%d) must be >= 1", c->gss_expand);
    REQUIRE(c->gss_hidden >= 1, "config: gss_hidden (%d) must be >= 1", c->gss_hidden);
    REQUIRE(c->gss_state >= 1, "config: gss_state (%d) must be >= 1", c->gss_state);
    const char *bools[] = {"gss_long_memory_init", "use_gss", "use_attn", "use_ffn",
                           "ffn_separate_mix", "freeze_mix", "mixer_order (mlstm_first)"};
    int vals[] = {c->gss_long_memory_init, c->use_gss, c->use_attn, c->use_ffn,
                  c->ffn_separate_mix, c->freeze_mix, c->mlstm_first};
    for (int i = 0; i < 7; i++)
        if (check_bool(vals[i], bools[i])) return PHAX_ERR;
    if (c->family == PHAX_FAMILY_PHA)
        REQUIRE(c->use_gss || c->use_attn || c->use_ffn,
                "config: use_gss, use_attn and use_ffn are all false: a PHA block needs a branch");
    if (c->mlstm_heads == 0) c->mlstm_heads = c->n_heads;
    REQUIRE(c->mlstm_heads >= 1, "config: mlstm_heads (%d) must be >= 1", c->mlstm_heads);
    if (c->family == PHAX_FAMILY_SWAX || c->family == PHAX_FAMILY_MLSTM) {
        REQUIRE(c->d_model % 2 == 0, "config: d_model (%d) must be even for mLSTM (q, k have width d/2)", c->d_model);
        REQUIRE(c->mlstm_heads >= 1 && (c->d_model / 2) % c->mlstm_heads == 0,
                "config: mlstm_heads (%d) must divide d_model/2 (%d)", c->mlstm_heads, c->d_model / 2);
    }
    REQUIRE(isfinite(c->igate_bias_init), "config: igate_bias_init must be finite");
    REQUIRE(c->fgate_init > 0 && c->fgate_init < 1, "config: fgate_init (%g) must be in (0, 1)", c->fgate_init);
    if (c->mlstm_norm_eps == 0) c->mlstm_norm_eps = PHAX_MLSTM_NORM_EPS_DEFAULT;
    // An eps above 1 would swamp a head's variance at any scale the model reaches; NaN fails here too.
    REQUIRE(c->mlstm_norm_eps > 0 && c->mlstm_norm_eps <= 1, "config: mlstm_norm_eps (%g) must be in (0, 1]",
            c->mlstm_norm_eps);
    if (c->gdn_heads == 0) c->gdn_heads = c->n_heads;
    REQUIRE(c->gdn_heads >= 1, "config: gdn_heads (%d) must be >= 1", c->gdn_heads);
    if (c->family == PHAX_FAMILY_SWAX_GDN) {
        REQUIRE(c->d_model % 2 == 0, "config: d_model (%d) must be even for Gated DeltaNet (q, k have width d/2)",
                c->d_model);
        REQUIRE((c->d_model / 2) % c->gdn_heads == 0, "config: gdn_heads (%d) must divide d_model/2 (%d)",
                c->gdn_heads, c->d_model / 2);
    }
    if (c->gdn_conv == 0) c->gdn_conv = PHAX_GDN_CONV_DEFAULT;
    REQUIRE(c->gdn_conv >= 1, "config: gdn_conv (%d) must be >= 1", c->gdn_conv);
    if (c->gdn_norm_eps == 0) c->gdn_norm_eps = PHAX_GDN_NORM_EPS_DEFAULT;
    REQUIRE(c->gdn_norm_eps > 0 && c->gdn_norm_eps <= 1, "config: gdn_norm_eps (%g) must be in (0, 1]",
            c->gdn_norm_eps);
    if (c->train_len == 0) c->train_len = 256;
    REQUIRE(c->train_len >= 1, "config: train_len (%d) must be >= 1", c->train_len);
    if (c->w_short == 0) c->w_short = c->train_len / 128 > 0 ? c->train_len / 128 : 1;
    if (c->w_long == 0) c->w_long = c->train_len / 8 > c->w_short ? c->train_len / 8 : c->w_short;
    REQUIRE(c->w_short >= 1, "config: w_short (%d) must be >= 1", c->w_short);
    REQUIRE(c->w_long >= c->w_short, "config: w_long (%d) must be >= w_short (%d)", c->w_long, c->w_short);
    REQUIRE(c->p_short >= 0 && c->p_short <= 1, "config: p_short (%g) must be in [0, 1]", c->p_short);
    REQUIRE(c->anneal >= 0 && c->anneal <= 1, "config: anneal (%g) must be in [0, 1]", c->anneal);
    return check_maxima(c);
}

// Is layer l the alternating hybrid's other mixer (swax: mLSTM; swa_full: full attention) rather
// than SWA? mixer_order "mlstm_first" puts it at the even l.
static int alternate_layer(const phax_model_cfg *c, int l) { return (l % 2 == 0) == (c->mlstm_first == 1); }

int phax_layer_is_mlstm(const phax_model_cfg *c, int l) {
    if (c->family == PHAX_FAMILY_MLSTM) return 1;
    return c->family == PHAX_FAMILY_SWAX && alternate_layer(c, l);
}

int phax_layer_is_full(const phax_model_cfg *c, int l) {
    return c->family == PHAX_FAMILY_SWA_FULL && alternate_layer(c, l);
}

int phax_layer_is_gdn(const phax_model_cfg *c, int l) {
    return c->family == PHAX_FAMILY_SWAX_GDN && alternate_layer(c, l);
}
