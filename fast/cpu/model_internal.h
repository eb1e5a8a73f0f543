// Shared pieces of the fast/cpu models (not public API): the workspace arena and
// the branches (sub-layers) every family is built from, each with the
// activations its backward reads kept in the arena.
#ifndef PHAX_FCPU_MODEL_INTERNAL_H
#define PHAX_FCPU_MODEL_INTERNAL_H

#include "phax/fcpu.h"
#include "phax/fcpu_model.h"
#include "phax/model_plan.h"

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
_Static_assert((int)PHAX_SUB_GSS == FCPU_PART_GSS && (int)PHAX_SUB_ATTN == FCPU_PART_ATTN &&
                   (int)PHAX_SUB_SWIGLU == FCPU_PART_SWIGLU && (int)PHAX_SUB_AUX == FCPU_PART_AUX &&
                   (int)PHAX_SUB_DUAL == FCPU_PART_DUAL && (int)PHAX_SUB_MLSTM == FCPU_PART_MLSTM,
               "phax_sub_kind and FCPU_PART_* must agree");

// Activations one branch instance keeps for its backward (only its kind's are set).
typedef struct {
    phax_sub_kind kind;
    int layer;         // block index (parameter names blocks.<layer>.*)
    const char *norm;  // its norm's suffix: PHA the output norm, others the pre-norm
    // attention: q (n, Hq·dh); k, v (n, Hkv·dh); o (n, Hq·dh)
    float *q, *k, *v, *o, *st;  // st: the softmax rows' (m, log l), (B, Hq, T, 2)
    // SwiGLU: keep (3, n, hid) = a, b, h
    float *keep;
    // aux FFN: hpre, h (n, Ha)
    float *hpre, *ha;
    // GSS: xv, v (n, F); xu, u, ub, ys (n, Hs); K (Hs, T); yc, gt (n, F)
    float *gxv, *gv, *gxu, *gu, *gub, *gK, *gys, *gyc, *ggt;
    // mLSTM: mq, mk (n, d/2); mv, mo, mhc, mhn, mh (n, d); ipre, fpre, ig, fg (n, NH)
    float *mq, *mk, *mv, *mo, *mhc, *mhn, *mh, *mipre, *mfpre, *mig, *mfg;
    // DUAL: the aux part's output (n, d) during the forward
    float *tmp;
} fm_branch;

// Everything a call needs: the model, the workspace sizes, the call's window.
typedef struct {
    const fcpu_model *m;
    struct fcpu_model_ws *ws;
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
void fm_branch_layout(fm_arena *a, fm_branch *b, const phax_model_cfg *c, int B, int T);
// Backward scratch (floats) a branch kind needs, shared by all branches.
size_t fm_branch_bwd_len(phax_sub_kind k, const phax_model_cfg *c, size_t n, int T);
// Kernel scratch (bytes) a branch kind needs in any call.
size_t fm_branch_kernel_ws(phax_sub_kind k, const phax_model_cfg *c, int B, int T, int nthreads,
                           const struct fcpu_model_ws *ws);

// y: (n, d) = branch(x: (n, d)); keeps its activations in b.
int fm_branch_fwd(const fm_ctx *cx, fm_branch *b, float *y, const float *x);
// dx: (n, d) += ∂/∂x, grads += the branch's parameter gradients, from dy: (n, d).
int fm_branch_bwd(const fm_ctx *cx, fm_branch *b, float *dx, const float *dy, const float *x);

// Parameter / gradient of block l by suffix ("attn.wq.weight"); NULL if absent.
const float *fm_param(const fcpu_model *m, int l, const char *suffix);
float *fm_grad(const fm_ctx *cx, int l, const char *suffix);

// --- the workspace ------------------------------------------------------------------------
struct fcpu_model_ws {
    phax_family family;
    int B, T, nthreads;
    char *arena;
    size_t bytes;
    fcpu_ssm_plan *ssm_plan;  // GSS convolution plan for (B, T, Hs), or NULL
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
    int profile;              // fcpu_model_ws_profile: on/off
    double prof_fwd[FCPU_NPARTS], prof_bwd[FCPU_NPARTS];
};

#endif
