// phax ops: the tier-neutral op contract shared by every tier — ref/ (the float64
// oracle), fast/cpu and fast/cuda. It holds what an op's caller must agree on
// with every implementation of it: attribute structs (attention, AdamW), the score
// modes, the constants fixed by the spec, and the checks and defaults of the
// attribute structs (core/ops.c). No kernel lives here: each tier computes its ops
// itself, and the oracle shares no computation with what it checks (the scalar
// helpers of the fast tiers are in phax/numerics.h; ref keeps its own).
// See docs/spec.md §Conventions for the math.
#ifndef PHAX_OPS_H
#define PHAX_OPS_H

#include "phax/core.h"

#ifdef __cplusplus
extern "C" {  // fast/cuda includes this from C++
#endif

// --- constants fixed by the spec (docs/spec.md §Conventions) ------------------------------------
#define PHAX_RMSNORM_EPS 1e-6
#define PHAX_LAYERNORM_EPS 1e-5
#define PHAX_ROPE_BASE 10000.0
#define PHAX_COSINE_NORM_EPS 1e-12                     // ‖q‖, ‖k‖ clamped below by this
#define PHAX_COSINE_MAX_LOGSCALE 4.605170185988091368  // log(100)
#define PHAX_MLSTM_EPS 1e-6
#define PHAX_HEADNORM_EPS 1e-6  // headnorm op default; models: config "mlstm_norm_eps" (same default)
// mLSTM gate soft-cap: cap(z) = c·tanh(z/c) with c = 15, applied to ĩ and f̃ (docs/spec.md §1.4).
#define PHAX_MLSTM_GATE_CAP 15.0

// --- attention ----------------------------------------------------------------------------------
typedef enum { PHAX_SCORE_DOT = 0, PHAX_SCORE_COSINE = 1 } phax_score_mode;

typedef struct {
    int Hq, Hkv;          // query heads, kv heads; query head h reads kv head h / (Hq/Hkv)
    int dh, dv;           // q/k head dim, v head dim
    int window;           // key s visible to query t iff 0 ≤ t − s < window; 0 = full causal
    phax_score_mode score;
    int rope;             // 1: rotate q and k (rotate-half) before scoring
    double rope_base;     // 10000
    long pos0;            // position of t = 0 (for a continued sequence)
} phax_attn_cfg;

// dv = dh, full causal (window 0), dot scores, RoPE with base PHAX_ROPE_BASE, pos0 0.
phax_attn_cfg phax_attn_cfg_default(int Hq, int Hkv, int dh);
// PHAX_OK, or PHAX_ERR with the reason in phax_error() (heads, head dims, RoPE's even
// dh and positive base, window ≥ 0, a known score mode).
int phax_attn_cfg_check(const phax_attn_cfg *c);

// --- Gated DeltaNet cell (docs/spec.md §2.13) ----------------------------------------------------
#define PHAX_GDN_L2_EPS 1e-6  // q, k ← x / sqrt(Σ x² + eps) (flash-linear-attention's l2norm)
typedef struct {
    double scale;   // q̂'s factor: 1/√dk in the GDN layer
    int qk_l2norm;  // 1: q and k L2-normalised inside the cell (the GDN layer's); 0: used as given
} phax_gdn_cfg;

// --- AdamW --------------------------------------------------------------------------------------
typedef struct {
    double lr, beta1, beta2, eps, weight_decay;
    double clip;  // global-norm clipping threshold; 0 disables clipping
} phax_adamw_cfg;

// lr 1e-3, betas (0.9, 0.95), eps 1e-8, wd 0.1, clip 1.
phax_adamw_cfg phax_adamw_cfg_default(void);
// PHAX_OK, or PHAX_ERR naming the settings when step < 1 or a setting is out of range
// (lr ≥ 0, betas in [0, 1), eps > 0, wd ≥ 0, clip ≥ 0; NaN fails every test).
int phax_adamw_cfg_check(const phax_adamw_cfg *c, long step);

#ifdef __cplusplus
}
#endif

#endif
