// The model plan (docs/spec.md §3): the structure of every model family, written once.
// Which sub-layers each block has, in which order, under which residual / norm rule;
// DeepNorm α; the attention window of a call and the attention config every
// attention sub-layer gets. ref (ref/model*.c), fast/cpu (fast/model/model*.c,
// fast/cpu/decode.c), fast/cuda (fast/cuda/decode.cu) and the parameter layout
// (core/layout.c) all read it; both fast tiers' decoders bind their weights through it.
//
// Structure only: the plan names sub-layers, norms and parameters; it holds none of
// the ops' arithmetic, so sharing it leaves ref independent of what it checks.
#ifndef PHAX_MODEL_PLAN_H
#define PHAX_MODEL_PLAN_H

#include "phax/model.h"
#include "phax/ops.h"  // phax_attn_cfg: the tier-neutral attention config

#ifdef __cplusplus
extern "C" {  // fast/cuda (C++ and CUDA) reads the plan too
#endif

// Sub-layer kinds, with the parameter groups of docs/spec.md §3.6 they own.
typedef enum {      // the order of FMODEL_PART_* (phax/fmodel.h)
    PHAX_SUB_GSS,     // GSS(x)                      gss
    PHAX_SUB_ATTN,    // attention sub-layer         attn
    PHAX_SUB_SWIGLU,  // SwiGLU(x)                   ffn
    PHAX_SUB_AUX,     // W4 GELU(W3 x)               ffn_aux
    PHAX_SUB_DUAL,    // SwiGLU(x) + W4 GELU(W3 x)   ffn, ffn_aux
    PHAX_SUB_MLSTM,   // mLSTM layer                 mlstm
    PHAX_SUB_GDN,     // Gated DeltaNet layer        gdn
} phax_sub_kind;
#define PHAX_SUB_COUNT (PHAX_SUB_GDN + 1)

const char *phax_sub_kind_name(phax_sub_kind k);  // "gss", "attn", "swiglu", "aux", "dual", "mlstm", "gdn"

// How a model composes its blocks (the residual / norm rule).
typedef enum {
    // pha (§3.1): x_1 = RMSNorm_emb(E[tokens]); block: every sub-layer (branch) on the same x,
    // b_i = RMSNorm_{norm_i}(branch_i(x)), x ← RMSNorm_res(α·x + mix(p; b)); logits = x_{L+1} Wᵀ
    // (no final norm).
    PHAX_RULE_PARALLEL,
    // transformer, serial, swax, swa, mlstm, swa_full, swax_gdn (§3.2–3.3): x = E[tokens]; per sub-layer in order
    // x ← x + F(RMSNorm_{norm_i} x); logits = RMSNorm_f(x) Wᵀ.
    PHAX_RULE_PRENORM,
} phax_block_rule;

#define PHAX_PLAN_MAX_SUB 4  // sub-layers of a block (pha with every branch and ffn_separate_mix)

typedef struct {
    phax_sub_kind kind;
    const char *norm;  // its norm, name in the block ("norm_attn.weight"): the branch's output
                       // norm (parallel) or the sub-layer's pre-norm (prenorm)
    int group;         // parameter group in the layout (§3.6): sub-layers of one group lay out
                       // their parameters together (pha's separately mixed FFN halves)
} phax_sub;

typedef struct {
    phax_block_rule rule;
    int nsub;
    phax_sub sub[PHAX_PLAN_MAX_SUB];  // parallel: branches in mix order; prenorm: in order
    const char *mix;       // parallel: "mix.p" ((nsub) mix logits), NULL when frozen (p = 0)
    const char *norm_res;  // parallel: "norm_res.weight"; NULL for prenorm
} phax_block_plan;

// The rule of a (resolved) config's family.
phax_block_rule phax_plan_rule(const phax_model_cfg *c);
// The plan of block l (0..n_layers−1) of a resolved config.
void phax_plan_block(const phax_model_cfg *c, int l, phax_block_plan *p);
// Does any block of the model have a sub-layer of kind k (DUAL counts as SWIGLU and AUX too)?
int phax_plan_has(const phax_model_cfg *c, phax_sub_kind k);

// DeepNorm (Wang et al. 2022): residual scale α = (2L)^{1/4} of the parallel rule, and the
// init scale β = (8L)^{−1/4} of pha's branch weights (§4).
double phax_plan_alpha(const phax_model_cfg *c);
double phax_plan_beta(const phax_model_cfg *c);

// The window rule (§3): the attention window of a call, given the call's window (−1 = the
// config's w_long, 0 = full causal, w > 0): the SWAX family (swax, swa, mlstm, swa_full, swax_gdn) takes
// the call's window; pha, transformer and serial always use their attn_window and ignore it.
// Returns 0 (full) or the window. Every attention sub-layer uses it but swa_full's full layers.
int phax_plan_window(const phax_model_cfg *c, int window);
// The window of layer l's attention in a call whose window (as phax_plan_window returns it) is
// `window`: 0 for swa_full's full-attention layers (phax_layer_is_full), `window` for every other
// layer; `window` for l < 0 (no layer: the call's window itself).
int phax_plan_layer_window(const phax_model_cfg *c, int l, int window);
// 1 when the family takes a call's window (swax, swa, mlstm, swa_full, swax_gdn), 0 when it ignores it.
int phax_plan_takes_window(const phax_model_cfg *c);
// 1 when training draws the window per step (§3.4: the families built with SWA layers,
// swax, swa and swa_full), 0 when every step uses the config's windows (mlstm has no
// attention; pha, transformer and serial use attn_window).
int phax_plan_draws_window(const phax_model_cfg *c);
// 1 when some attention sub-layer of a call with this window (as phax_plan_window takes
// it) attends to the whole causal prefix: a model whose per-token state grows with the
// sequence (swa_full always). 0 when every attention sub-layer has a finite window or there
// is none.
int phax_plan_full_attention(const phax_model_cfg *c, int window);
// The attention config of layer l's attention sub-layer (§3, §2.7): Hq = n_heads, Hkv =
// n_kv_heads, dh = dv = head_dim, the config's score mode, RoPE with rope_base, pos0 = 0, and
// the window phax_plan_layer_window(c, l, window) (`window` resolved: 0 = full or w > 0; see
// phax_plan_window; l < 0: `window` as given).
phax_attn_cfg phax_plan_attn_cfg(const phax_model_cfg *c, int l, int window);

// --- a block's weights by role (the decoders' binding) ------------------------------------------
// What a fast tier's decoder reads of block l, each the parameter of that name in §3.6
// (NULL where the block has no such sub-layer). Pointers into the tier's own parameter
// buffer (host for fast/cpu, device for fast/cuda): the plan only names them.
typedef struct {
    const float *wq, *wk, *wv, *wo;  // attn.w{q,k,v,o}.weight
    const float *logscale;           // attn.logscale: (Hq), cosine score mode only
} phax_attn_w;
typedef struct {
    const float *wv, *wu, *ln_w, *ln_b, *D, *wc, *wo;  // gss.{wv,wu,ln,d,wc,wo}
    const float *lre, *lim, *cre, *cim;               // Λ: (N) each; C: (Hs, N) each
} phax_gss_w;
typedef struct {
    const float *wq, *wk, *wv, *wog, *wi, *bi, *wf, *bf, *hnorm, *wout;  // mlstm.*
} phax_mlstm_w;
typedef struct {  // gdn.*: wq, wk (d/2, d), wv, wg, out (d, d), conv_* (C, K), wa, wb (GH, d), A_log,
                  // dt_bias (GH), norm (d/GH)
    const float *wq, *wk, *wv, *conv_q, *conv_k, *conv_v, *wa, *wb, *A_log, *dt_bias, *norm, *wg, *wout;
} phax_gdn_w;
typedef struct {
    int nsub;
    phax_sub_kind sub[PHAX_PLAN_MAX_SUB];  // parallel: branches in mix order; prenorm: in order
    const float *norm[PHAX_PLAN_MAX_SUB];  // each branch's output norm / sub-layer's pre-norm
    const float *mix_p;                    // parallel: (nsub) logits; NULL: frozen (p = 0)
    const float *norm_res;                 // parallel: the post-norm
    const float *ffn_wg, *ffn_wu, *ffn_wd; // SwiGLU (swiglu, dual): ffn.w_{gate,up,down}
    const float *aux_w3, *aux_w4;          // aux FFN (aux, dual): ffn_aux.w{3,4}
} phax_block_w;

// Does a bound block have a sub-layer of kind k (DUAL counts as SWIGLU and AUX too)? (The decoders'
// per-layer test; phax_plan_has asks it of the whole model.)
int phax_block_w_has(const phax_block_w *b, phax_sub_kind k);

// The parameter named `name` ("blocks.0.attn.wq.weight"), or NULL when the model has none.
typedef const float *(*phax_param_find)(void *ctx, const char *name);

// Binds block l's weights through find: the block's structure (phax_plan_block) into b, its
// attention, GSS and mLSTM weights into a, g, m (zeroed when absent). PHAX_ERR, with
// "WHO: the model has no NAME" for the first parameter find does not have.
int phax_plan_bind_block(const phax_model_cfg *c, int l, phax_param_find find, void *ctx,
                         const char *who, phax_block_w *b, phax_attn_w *a, phax_gss_w *g,
                         phax_mlstm_w *m);
// Block l's Gated DeltaNet weights into gd (zeroed when the block has none); as above.
int phax_plan_bind_gdn(const phax_model_cfg *c, int l, phax_param_find find, void *ctx, const char *who,
                       phax_gdn_w *gd);

#ifdef __cplusplus
}
#endif

#endif
