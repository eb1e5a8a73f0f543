// Shared pieces of the fast model runner (not public API): the workspace arena, the
// parameters resolved to pointers, and the branches (sub-layers) every family is built
// from, each with the activations its backward reads kept in the arena.
//
// The runner calls every op through a table (phax/f32_ops.h; fast/cpu's is
// fcpu_f32_ops()): kernels, the elementwise ops between them, scratch sizes and its
// arena. It includes no kernel header and loops over no activation memory, so another
// tier's table drives the same code (tests/structure.sh runner-via-table checks it).
#ifndef PHAX_FCPU_MODEL_INTERNAL_H
#define PHAX_FCPU_MODEL_INTERNAL_H

#include "phax/f32_ops.h"
#include "phax/fmodel.h"
#include "phax/model_plan.h"

// --- parameters resolved to pointers --------------------------------------------------------
// The tensors of one block (params or grads), looked up by layout name once when a
// workspace is bound to a model; NULL where the block has none.
typedef struct {
    float *norm[PHAX_PLAN_MAX_SUB];  // each sub-layer's norm gain, in plan order
    float *mix_p, *norm_res;         // the parallel rule's mix logits and residual norm
    float *attn_wq, *attn_wk, *attn_wv, *attn_wo, *attn_logscale;
    float *ffn_w_gate, *ffn_w_up, *ffn_w_down;  // SwiGLU
    float *aux_w3, *aux_w4;                     // aux FFN
    float *gss_wv, *gss_wu, *gss_ln_g, *gss_ln_b, *gss_lre, *gss_lim, *gss_cre, *gss_cim,
        *gss_d, *gss_wc, *gss_wo;
    float *ml_wq, *ml_wk, *ml_wv, *ml_ogate, *ml_igate_w, *ml_igate_b, *ml_fgate_w, *ml_fgate_b,
        *ml_headnorm, *ml_out;
    float *gd_wq, *gd_wk, *gd_wv, *gd_conv_q, *gd_conv_k, *gd_conv_v, *gd_wa, *gd_wb, *gd_A_log, *gd_dt_bias,
        *gd_norm, *gd_wg, *gd_out;  // Gated DeltaNet
} fm_block_ptrs;

typedef struct {
    float *embed, *norm_emb, *norm_f;
    float *head;          // lm_head.weight, or embed.weight when tied
    fm_block_ptrs *blk;   // (n_layers)
} fm_ptrs;

// --- arena -------------------------------------------------------------------------------
// Bump allocation in two passes over the same layout code: with base == NULL
// it only counts (fm_take returns NULL), then the arena is allocated once and the
// layout runs again with the real base. Every block is 64-byte aligned.
typedef struct {
    char *base;
    size_t off;
} fm_arena;

static inline float *fm_take(fm_arena *a, size_t nfloats) {
    size_t off = a->off;
    // Saturates at SIZE_MAX (then refused by the caller) instead of wrapping to a small arena.
    if (off == SIZE_MAX || nfloats > (SIZE_MAX - off - 63) / sizeof(float)) a->off = SIZE_MAX;
    else a->off += (nfloats * sizeof(float) + 63) / 64 * 64;
    return a->base ? (float *)(a->base + off) : NULL;
}

// --- branches ----------------------------------------------------------------------------
// Branch kinds are the plan's sub-layer kinds (phax/model_plan.h); the profile indexes
// its sub-layer parts by kind.
_Static_assert((int)PHAX_SUB_GSS == FMODEL_PART_GSS && (int)PHAX_SUB_ATTN == FMODEL_PART_ATTN &&
                   (int)PHAX_SUB_SWIGLU == FMODEL_PART_SWIGLU && (int)PHAX_SUB_AUX == FMODEL_PART_AUX &&
                   (int)PHAX_SUB_DUAL == FMODEL_PART_DUAL && (int)PHAX_SUB_MLSTM == FMODEL_PART_MLSTM &&
                   (int)PHAX_SUB_GDN == FMODEL_PART_GDN,
               "phax_sub_kind and FMODEL_PART_* must agree");

// Activations one branch instance keeps for its backward (only its kind's are set).
typedef struct {
    phax_sub_kind kind;
    int layer;         // block index (its tensors: P->blk[layer], G->blk[layer])
    int sub;           // its place in the block's plan (fm_block_ptrs.norm[sub]: PHA the
                       // output norm, others the pre-norm)
    // attention: q (n, Hq·dh); k, v (n, Hkv·dh); o (n, Hq·dh)
    float *q, *k, *v, *o, *st;  // st: the softmax rows' (m, log l), (B, Hq, T, 2)
    // SwiGLU: keep (2, n, hid) = a, b (h = SiLU(a) ⊙ b is remade by the kernels)
    float *keep;
    // aux FFN: hpre (n, Ha) (h = GELU(hpre) is remade, model_branches.c)
    float *hpre;
    // GSS: xv, yc (n, F); xu, ys (n, Hs); K (Hs, T) (v, u, ū, gt are remade, model_branches.c)
    float *gxv, *gxu, *gK, *gys, *gyc;
    // mLSTM: mq, mk (n, d/2); mv, mo, mhc (n, d); ipre, fpre (n, NH) (ĩ, f̃, headnorm(h̃) and h
    // are remade, model_branches.c)
    float *mq, *mk, *mv, *mo, *mhc, *mipre, *mfpre;
    // Gated DeltaNet: the projections qp, kp (n, d/2), vp, z (n, d), a, b (n, GH) and the cell's
    // output o (n, d) (q, k, v after the convolution, g, β, the norm and the gate are remade)
    float *gqp, *gkp, *gvp, *gz, *ga, *gb, *go;
    // DUAL: the aux part's output (n, d) during the forward
    float *tmp;
} fm_branch;

// Everything a call needs: the model, the op table, the resolved tensors, the workspace
// sizes, the call's window.
typedef struct {
    const fmodel *m;
    const phax_f32_ops *ops;
    const fm_ptrs *P;  // parameters
    const fm_ptrs *G;  // gradients (every pointer NULL in a forward-only call)
    struct fmodel_ws *ws;
    int B, T;
    size_t n;      // B·T
    int window;    // attention window of this call (resolved: 0 = full)
    float *grads;     // NULL in a forward-only call
    float *row_loss;  // (n) per-token losses instead of the mean (evaluation), or NULL
    double *prof;     // the profile half this code is in (ws->prof_fwd/bwd), or NULL: off
    double t_half;    // when that half began (profiling)
} fm_ctx;

// Profiling: time `stmt` into part `part` of cx's current half, if on.
#define FM_PROF(cx, part, stmt)                                    \
    do {                                                           \
        double fm_t0_ = (cx)->prof ? phax_clock() : 0;               \
        stmt;                                                      \
        if ((cx)->prof) (cx)->prof[part] += phax_clock() - fm_t0_;   \
    } while (0)

// Lay out the kept activations of branch b (n = B·T rows).
void fm_branch_layout(const phax_f32_ops *ops, fm_arena *a, fm_branch *b, const phax_model_cfg *c,
                      int B, int T);
// Backward scratch (floats) a branch kind needs, shared by all branches.
// (Also the forward's scratch of the values the backward makes again: free during a forward.)
size_t fm_branch_bwd_len(const phax_f32_ops *ops, phax_sub_kind k, const phax_model_cfg *c, size_t n, int T);
// Kernel scratch (bytes) a branch kind needs in any call.
size_t fm_branch_kernel_ws(const phax_f32_ops *ops, phax_sub_kind k, const phax_model_cfg *c,
                           int B, int T, int nthreads, const struct fmodel_ws *ws);

// y: (n, d) = branch(x: (n, d)); keeps its activations in b.
int fm_branch_fwd(const fm_ctx *cx, fm_branch *b, float *y, const float *x);
// dx: (n, d) += ∂/∂x, grads += the branch's parameter gradients, from dy: (n, d).
int fm_branch_bwd(const fm_ctx *cx, fm_branch *b, float *dx, const float *dy, const float *x);

// Resolve every tensor of a model with layout L whose first element is at base (params or
// grads; base NULL: every pointer NULL). blk must hold cfg->n_layers entries.
void fm_ptrs_resolve(fm_ptrs *r, fm_block_ptrs *blk, const phax_layout *L,
                     const phax_model_cfg *cfg, float *base);

// --- the workspace ------------------------------------------------------------------------
struct fmodel_ws {
    const phax_f32_ops *ops;  // the table every op of a call goes through (its model's)
    phax_family family;
    int B, T, nthreads;
    char *arena;
    size_t bytes;
    // The model the pointers below were resolved for (its params and grads): bound when the
    // workspace is made, bound anew only if a call brings a model whose tensors moved.
    const float *bound_params, *bound_grads;
    fm_ptrs P, G;             // parameters, gradients (G's pointers NULL without grads)
    void *ssm_plan;           // GSS convolution plan for (B, T, Hs) (ops->ssm_plan_new), or NULL
    void *kws;                // kernel scratch (64-byte aligned)
    size_t kws_bytes;
    float *bws;               // backward scratch shared by the branches
    // Residual stream and per-family activations.
    int nsub;                 // branches (PHA: over all blocks; others: sub-layers)
    fm_branch *br;            // (nsub)
    float **xs;               // residual-stream tensors (n, d), count nx
    int nx;
    float **hs;               // pre-norm outputs of each sub-layer (n, d) (non-PHA)
    float **pr, **pb, **pz;   // PHA per block: r, b (nb, n·d); z (n, d)
    float *xf;                // final norm output (n, d) (non-PHA)
    float *tmp;               // (n, d) branch output
    float *d1, *d2;           // (n, d) gradient buffers
    float *dmix;              // PHA: (nb, n·d) gradient of the branch norms' outputs
    float *pzero;             // PHA with freeze_mix: (PHAX_PLAN_MAX_SUB) zero mix logits
    int profile;              // fmodel_ws_profile: on/off
    double prof_fwd[FCPU_NPARTS], prof_bwd[FCPU_NPARTS];
};

#endif
