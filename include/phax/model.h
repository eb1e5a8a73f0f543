// phax models: configuration, parameter layout and initialisation — shared by
// every backend, so that the same (config, seed) gives the same named weights
// in ref and fast, and checkpoints and oracle files are interchangeable.
#ifndef PHAX_MODEL_H
#define PHAX_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "phax/core.h"

#ifdef __cplusplus
extern "C" {  // read by fast/cuda (C++ and CUDA) too
#endif

typedef enum {
    PHAX_FAMILY_PHA = 0,      // parallel hybrid: GSS ∥ attention ∥ dual FFN, softplus mix, DeepNorm
    PHAX_FAMILY_TRANSFORMER,  // pre-norm attention + SwiGLU
    PHAX_FAMILY_SERIAL,       // pre-norm GSS, then attention, then dual FFN, each with a residual
    PHAX_FAMILY_SWAX,         // SWA and mLSTM mixers alternating 1:1, each followed by SwiGLU
    PHAX_FAMILY_SWA,          // every mixer SWA
    PHAX_FAMILY_MLSTM,        // every mixer mLSTM
    PHAX_FAMILY_SWA_FULL,     // full-attention and SWA mixers alternating 1:1 (the attention hybrid)
    PHAX_FAMILY_SWAX_GDN,     // SWA and Gated DeltaNet mixers alternating 1:1 (SWAX on the GDN backbone)
    PHAX_FAMILY_COUNT
} phax_family;

// Default eps of the mLSTM head norm (config key "mlstm_norm_eps"): 1e-6, the norm eps of
// xLSTM-7B (Beck et al. 2025), which phax's SWAX layers follow. SPEC's LayerNorm says 1e-5;
// at init (input-gate bias −10) a head's variance is ~1e-6, so the choice matters.
#define PHAX_MLSTM_NORM_EPS_DEFAULT 1e-6
// Defaults of the Gated DeltaNet layer (config keys "gdn_conv", "gdn_norm_eps"): the short
// convolution's kernel 4 and the output norm's eps 1e-5, flash-linear-attention's GatedDeltaNet.
#define PHAX_GDN_CONV_DEFAULT 4
#define PHAX_GDN_NORM_EPS_DEFAULT 1e-5

const char *phax_family_name(phax_family f);          // "pha", "transformer", ...
int phax_family_parse(const char *s, phax_family *f);  // PHAX_ERR on an unknown name

// Every field of the JSON config, with its JSON key in the comment. A value of
// 0 in a field marked "0 = derived" is replaced by phax_model_cfg_resolve().
typedef struct {
    phax_family family;    // "family"
    int vocab_size;        // "vocab_size"
    int d_model;           // "d_model"
    int n_layers;          // "n_layers"
    // attention (every family that has attention)
    int n_heads;           // "n_heads": query heads Hq
    int n_kv_heads;        // "n_kv_heads": Hkv, divides n_heads (0 = derived: n_heads)
    int head_dim;          // "head_dim" (0 = derived: d_model / n_heads); even (RoPE)
    int score_cosine;      // "score": "cosine" (1) or "dot" (0); default cosine for pha/transformer/serial, dot for the SWAX family
    double rope_base;      // "rope_base" (0 = derived: 10000)
    int attn_window;       // "attn_window": window of the attention branch in pha/transformer/serial (0 = full)
    int tie_embeddings;    // "tie_embeddings": 1 = logits use E (default 1)
    // FFNs
    int ffn_hidden;        // "ffn_hidden": SwiGLU hidden (0 = derived: round_up(8 d / 3, 64))
    int ffn_aux_hidden;    // "ffn_aux_hidden": aux GELU FFN hidden, pha/serial (0 = derived: d / 2)
    // GSS (pha, serial)
    int gss_expand;        // "gss_expand": F, gate width (0 = derived: 2 d)
    int gss_hidden;        // "gss_hidden": H_s, SSM channels (0 = derived: max(1, d / 4))
    int gss_state;         // "gss_state": N, modes per channel (0 = derived: 64)
    int gss_long_memory_init;  // "gss_long_memory_init": 0 = N(0,1) as the public GSS code, 1 = long-memory init
    // PHA switches
    int use_gss, use_attn, use_ffn;  // "use_gss", "use_attn", "use_ffn" (default 1 each; at least one)
    int ffn_separate_mix;  // "ffn_separate_mix": 1 = main and aux FFN are two branches of the mix
    int freeze_mix;        // "freeze_mix": 1 = equal weights, no mix parameter
    // SWAX family
    int mlstm_heads;       // "mlstm_heads" (0 = derived: n_heads); divides d_model / 2
    int mlstm_first;       // "mixer_order": "mlstm_first" (1, default: even layers mLSTM) or "swa_first" (0)
    double igate_bias_init;  // "igate_bias_init" (default −10, xLSTM-7B)
    double fgate_init;       // "fgate_init": σ(b_f) at init (default 0.95)
    double mlstm_norm_eps;   // "mlstm_norm_eps": eps of the mLSTM head norm (0 = derived: 1e-6,
                             // xLSTM-7B's; SPEC's LayerNorm says 1e-5); finite, in (0, 1]
    int gdn_heads;         // "gdn_heads": Gated DeltaNet heads (0 = derived: n_heads); divides d_model / 2
    int gdn_conv;          // "gdn_conv": the GDN short convolution's kernel K (0 = derived: 4)
    double gdn_norm_eps;   // "gdn_norm_eps": eps of the GDN output norm (0 = derived: 1e-5); in (0, 1]
    int train_len;         // "train_len": training sequence length (0 = derived: 256)
    int w_short, w_long;   // "w_short", "w_long" (0 = derived: train_len/128 (≥1), train_len/8)
    double p_short;        // "p_short": probability of the short window per step (default 0.5)
    double anneal;         // "anneal": final fraction of steps at w_long (default 0.1)
} phax_model_cfg;

// Defaults for a family (a small model: vocab 256, d 64, 2 layers, 4 heads).
phax_model_cfg phax_model_cfg_default(phax_family f);
// Fill every "0 = derived" field and check the whole config; on error the
// message names the field: "config: n_heads (6) is not divisible by n_kv_heads (4)".
// A resolved config also keeps within the maxima below (docs/spec.md §3.5), so
// configs and checkpoints from untrusted files cannot ask for absurd sizes: every
// width and per-row product (n_heads·head_dim included) fits an int, and every
// parameter count and byte size fits size_t. They are far above what the CPU
// tiers can train.
int phax_model_cfg_resolve(phax_model_cfg *c);

#define PHAX_MAX_VOCAB (1 << 21)      // vocab_size: 2,097,152
#define PHAX_MAX_D_MODEL (1 << 16)    // d_model: 65,536
#define PHAX_MAX_LAYERS 1024          // n_layers
#define PHAX_MAX_HEADS 4096           // n_heads, n_kv_heads, mlstm_heads, gdn_heads
#define PHAX_MAX_GDN_CONV 256         // gdn_conv
#define PHAX_MAX_HEAD_DIM 4096        // head_dim
#define PHAX_MAX_WIDTH (1 << 18)      // n_heads·head_dim, ffn_hidden, ffn_aux_hidden, gss_expand, gss_hidden: 262,144
#define PHAX_MAX_GSS_STATE 4096       // gss_state
#define PHAX_MAX_SEQ 65536            // train_len, attn_window, w_short, w_long (and the CLI's --seq)
#define PHAX_MAX_PARAMS 2147483647LL  // all parameters together: 2^31 − 1 elements (8 GiB of float32)

// ---------------------------------------------------------------------------
// Parameter layout: one named list per config, PyTorch-style dotted names
// (blocks.3.attn.wq.weight), nn.Linear shapes (out, in). Parameters are stored
// back to back in this order in one buffer (offset in elements).
typedef struct {
    char name[80];
    int ndim;
    int64_t shape[3];
    size_t numel, offset;
} phax_param_info;

typedef struct {
    int n;
    phax_param_info *p;
    size_t numel;  // total elements
} phax_layout;

// Layout of a resolved config. Free with phax_layout_free. Every size is
// computed in 64 bits; a negative or overflowing one is an error.
int phax_layout_build(phax_layout *L, const phax_model_cfg *c);
// The layout's tensor count and total elements, without building it (nothing is
// allocated); PHAX_ERR as phax_layout_build.
int phax_layout_count(const phax_model_cfg *c, int *n_tensors, int64_t *numel);
void phax_layout_free(phax_layout *L);
// Index of a parameter by name, or −1.
int phax_layout_find(const phax_layout *L, const char *name);

// Initialise all parameters (float64, in layout order) from a seed. Each tensor
// draws from its own stream phax_rng_stream(seed, hash(name)), so the values
// of one tensor do not depend on which other tensors exist.
int phax_model_init(double *params, const phax_layout *L, const phax_model_cfg *c, uint64_t seed);

// SWAX family: is layer l an mLSTM layer (1) or not (0)? (swax: the layers mixer_order gives
// the mLSTM; mlstm: every layer.)
int phax_layer_is_mlstm(const phax_model_cfg *c, int l);
// swa_full: is layer l a full-attention layer (1) or SWA (0)? The full layers take the places
// swax gives its mLSTM layers (mixer_order "mlstm_first": the even l). 0 in every other family.
int phax_layer_is_full(const phax_model_cfg *c, int l);
// swax_gdn: is layer l a Gated DeltaNet layer (1) or SWA (0)? The GDN layers take the places swax
// gives its mLSTM layers. 0 in every other family.
int phax_layer_is_gdn(const phax_model_cfg *c, int l);

// ---------------------------------------------------------------------------
// JSON config I/O (jansson). Unknown keys, wrong types, and impossible values are errors
// that name the key: "config.json: key \"n_heads\" must be an integer, got string".
// "family" is required and selects the defaults (phax_model_cfg_default); every other key
// overrides one; then phax_model_cfg_resolve() runs, its message prefixed by `where`.
// Int fields take JSON numbers with an integral value in int range (4 and 4.0 both read
// as 4); switch fields take true/false; "score" "cosine"|"dot"; "mixer_order"
// "mlstm_first"|"swa_first". Duplicate keys, a top level that is not an object, invalid
// JSON ("where:line:column: invalid JSON: ...") and non-UTF-8 text are errors. On error
// *c is left unchanged.
int phax_model_cfg_from_json_str(phax_model_cfg *c, const char *json, const char *where);  // where = file name or "<string>" for messages
int phax_model_cfg_from_json_file(phax_model_cfg *c, const char *path);
// The `--set KEY=VALUE` overrides of phax train and the benchmarks, applied in order to the
// JSON object text *json: VALUE is JSON (4, 1e-3, false, "x"), else a bare word taken as a
// string (score=dot). *json is replaced by the new text (malloc'd; the old one is freed). An
// empty or over-long key, or text that is not an object, is an error naming the item.
int phax_model_cfg_json_set(char **json, const char *const *sets, int n);
// Serialise a config (every field, resolved values, stable key order); caller frees with free().
char *phax_model_cfg_to_json(const phax_model_cfg *c);
int phax_model_cfg_write_json_file(const phax_model_cfg *c, const char *path);  // atomic: temp file + rename; no partial file on failure

#ifdef __cplusplus
}
#endif

#endif
