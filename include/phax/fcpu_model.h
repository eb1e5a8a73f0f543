// fast/cpu models (float32): every model family of phax/ref_model.h — pha,
// transformer, serial, swax, swa, mlstm — forward and backward on the fast/cpu
// kernels, with the parameter names, layout and initialisation of ref
// (phax/model.h), proven equal to ref by tests/test_fcpu_model.c.
//
// Memory: a workspace (fcpu_model_ws) belongs to one (model config, B, T). It
// is allocated once — one arena holding every activation the backward needs,
// the kernels' scratch and the gradient buffers of the activations, with
// huge pages asked for (madvise) — and reused by every call; nothing is
// allocated per step. A training loop makes one workspace and keeps it; an
// evaluation at another T makes its own.
//
// Activations are kept, not recomputed: the forward stores every intermediate
// the backward needs in the workspace (the residual stream, each branch's
// projections, norms' inputs), so a training step costs one forward and one
// backward.
//
// Threads: OpenMP and OpenBLAS as the kernels use them; results are
// deterministic for a given thread count.
#ifndef PHAX_FCPU_MODEL_H
#define PHAX_FCPU_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "phax/model.h"

struct phax_f32_ops;  // phax/f32_ops.h

typedef struct {
    phax_model_cfg cfg;  // resolved
    phax_layout layout;
    float *params;       // (layout.numel), in layout order (docs/spec.md §3.6)
    float *grads;        // (layout.numel); backward ADDS here
    // The op table every call on the model goes through (phax/f32_ops.h): fcpu_f32_ops()
    // from fcpu_model_new; NULL (a model view filled in by hand) means the same.
    const struct phax_f32_ops *ops;
} fcpu_model;

// Resolve a copy of cfg, build the layout, allocate, and initialise exactly as
// ref_model_new does (phax_model_init in float64), rounded to float.
int fcpu_model_new(fcpu_model *m, const phax_model_cfg *cfg, uint64_t seed);
// The same model over another tier's op table (e.g. fast/cuda's fcuda_f32_ops()): parameters,
// gradients and workspaces in that tier's memory (its alloc_ws), every call through it.
// fcpu_model_param then points into that memory.
int fcpu_model_new_ops(fcpu_model *m, const phax_model_cfg *cfg, uint64_t seed, const struct phax_f32_ops *ops);
void fcpu_model_free(fcpu_model *m);
// Pointer into params by parameter name (NULL if the model has none).
float *fcpu_model_param(const fcpu_model *m, const char *name);
void fcpu_model_zero_grad(fcpu_model *m);
// Copy float64 parameters (layout order, e.g. a ref_model's) in, rounding.
void fcpu_model_set_params_f64(fcpu_model *m, const double *params);

// A workspace for calls on batches of exactly (B, T). NULL on failure
// (message in phax_error()). The OpenMP thread count at creation is the most a
// call may use.
typedef struct fcpu_model_ws fcpu_model_ws;
fcpu_model_ws *fcpu_model_ws_new(const fcpu_model *m, int B, int T);
void fcpu_model_ws_free(fcpu_model_ws *ws);
size_t fcpu_model_ws_bytes(const fcpu_model_ws *ws);  // the arena's size
// The arena fcpu_model_ws_new would allocate for a model of the resolved config cfg, counted
// without allocating it (phax info), by part (FCPU_WS_*; the parts add up to the arena): the
// residual stream kept per block, each branch kind's kept activations (all its instances), PHA's
// mix buffers (the branches' raw outputs per block; one buffer each of their normed outputs, the
// mix's input and its gradient), the step's scratch rows, the shared backward and kernel scratch.
// bytes[FCPU_WS_NPARTS]; PHAX_OK, or PHAX_ERR (phax_error()).
enum {
    FCPU_WS_RESIDUAL = 0,
    FCPU_WS_BRANCH,  // + phax_sub_kind: FCPU_WS_BRANCH + PHAX_SUB_GSS, ...
    FCPU_WS_MIX = FCPU_WS_BRANCH + 6,  // + PHAX_SUB_COUNT (checked in fast/cpu/model.c)
    FCPU_WS_SCRATCH,
    FCPU_WS_BWD,
    FCPU_WS_KERNEL,
    FCPU_WS_NPARTS
};
int fcpu_model_ws_breakdown(const phax_model_cfg *cfg, int B, int T, size_t bytes[FCPU_WS_NPARTS]);
const char *fcpu_model_ws_part_name(int part);
int fcpu_model_ws_B(const fcpu_model_ws *ws);
int fcpu_model_ws_T(const fcpu_model_ws *ws);

// tokens, targets: (B, T) int32 (targets −1 are not counted). logits: (B, T, V)
// or NULL; loss: mean cross-entropy or NULL (then targets may be NULL).
// window: SWA window of this call in the SWAX family (−1 = cfg.w_long, 0 = full);
// ignored by the PHA family. Without logits, the output projection and the loss
// are fused (the (B·T, V) logits are never formed).
int fcpu_model_forward(const fcpu_model *m, fcpu_model_ws *ws, const int32_t *tokens,
                       const int32_t *targets, int window, float *logits, double *loss);
// Per-token cross-entropy (nats) of a forward: losses: (B, T), 0 where the target is −1.
// For evaluation by position; the logits are never formed.
int fcpu_model_token_losses(const fcpu_model *m, fcpu_model_ws *ws, const int32_t *tokens,
                            const int32_t *targets, int window, float *losses);
// Forward, then backward of the mean loss: grads += ∂loss/∂params; *loss gets the loss.
int fcpu_model_backward(fcpu_model *m, fcpu_model_ws *ws, const int32_t *tokens,
                        const int32_t *targets, int window, double *loss);

// --- where a call's time goes (for benchmarks; off by default) ---------------------------
// With profiling on, every call on the workspace adds the wall-clock seconds of each part
// to a table: the sub-layers by kind (each including its projections), the attention and
// mLSTM kernels and the GSS sub-layer's DSS kernel and convolution alone (also inside their
// sub-layer's time), the output head (projection
// + loss; in a backward call its forward and backward run as one fused pass and count as
// backward), and the whole call. Embedding, norms, residual adds and the PHA mix are the
// call minus its sub-layers and head. On costs two clock reads per part.
enum {
    FCPU_PART_GSS, FCPU_PART_ATTN, FCPU_PART_SWIGLU, FCPU_PART_AUX, FCPU_PART_DUAL,
    FCPU_PART_MLSTM,         // the sub-layers (fm_kind order)
    FCPU_PART_ATTN_KERNEL,   // fcpu_attention_fwd/bwd alone
    FCPU_PART_MLSTM_KERNEL,  // fcpu_mlstm_chunkwise_fwd/bwd alone
    FCPU_PART_GSS_KERNEL,    // fcpu_dss_kernel_fwd/bwd alone (the GSS sub-layer's K)
    FCPU_PART_GSS_CONV,      // fcpu_ssm_conv_fwd/bwd alone (the FFT convolution)
    FCPU_PART_HEAD,          // fused output projection + cross-entropy
    FCPU_PART_TOTAL,         // the whole call
    FCPU_NPARTS
};
const char *fcpu_part_name(int part);
// on != 0: zero the table and start; 0: stop (the table stays readable).
void fcpu_model_ws_profile(fcpu_model_ws *ws, int on);
// Seconds per part, summed over the calls since profiling was turned on: fwd[] for the
// forward half of each call, bwd[] for the backward half (fwd[TOTAL], bwd[TOTAL]: the halves).
void fcpu_model_ws_profile_get(const fcpu_model_ws *ws, double fwd[FCPU_NPARTS],
                               double bwd[FCPU_NPARTS]);

#endif
