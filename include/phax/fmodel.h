// The fast model runner (fast/model/, float32): every model family of phax/ref_model.h —
// pha, transformer, serial, swax, swa, mlstm, swa_full — forward and backward over an op table
// (phax/f32_ops.h): fast/cpu's (fcpu_f32_ops(), the default) or fast/cuda's
// (fcuda_f32_ops()), with the parameter names, layout and initialisation of ref
// (phax/model.h), proven equal to ref on every tier by tests/test_fmodel.c.
//
// Memory: a workspace (fmodel_ws) belongs to one (model config, B, T). It
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
#ifndef PHAX_FMODEL_H
#define PHAX_FMODEL_H

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
    // from fmodel_new; NULL (a model view filled in by hand) means the same.
    const struct phax_f32_ops *ops;
} fmodel;

// Resolve a copy of cfg, build the layout, allocate, and initialise exactly as
// ref_model_new does (phax_model_init in float64), rounded to float.
int fmodel_new(fmodel *m, const phax_model_cfg *cfg, uint64_t seed);
// The same model over another tier's op table (e.g. fast/cuda's fcuda_f32_ops()): parameters,
// gradients and workspaces in that tier's memory (its alloc_ws), every call through it.
// fmodel_param then points into that memory.
int fmodel_new_ops(fmodel *m, const phax_model_cfg *cfg, uint64_t seed, const struct phax_f32_ops *ops);
void fmodel_free(fmodel *m);
// Pointer into params by parameter name (NULL if the model has none).
float *fmodel_param(const fmodel *m, const char *name);
void fmodel_zero_grad(fmodel *m);
// Copy float64 parameters (layout order, e.g. a ref_model's) in, rounding.
void fmodel_set_params_f64(fmodel *m, const double *params);

// A workspace for calls on batches of exactly (B, T). NULL on failure
// (message in phax_error()). The OpenMP thread count at creation is the most a
// call may use.
typedef struct fmodel_ws fmodel_ws;
fmodel_ws *fmodel_ws_new(const fmodel *m, int B, int T);
void fmodel_ws_free(fmodel_ws *ws);
size_t fmodel_ws_bytes(const fmodel_ws *ws);  // the arena's size
// The arena fmodel_ws_new would allocate for a model of the resolved config cfg, counted
// without allocating it (phax info), by part (FMODEL_WS_*; the parts add up to the arena): the
// residual stream kept per block, each branch kind's kept activations (all its instances), PHA's
// mix buffers (the branches' raw outputs per block; one buffer each of their normed outputs, the
// mix's input and its gradient), the step's scratch rows, the shared backward and kernel scratch.
// bytes[FMODEL_WS_NPARTS]; PHAX_OK, or PHAX_ERR (phax_error()).
enum {
    FMODEL_WS_RESIDUAL = 0,
    FMODEL_WS_BRANCH,  // + phax_sub_kind: FMODEL_WS_BRANCH + PHAX_SUB_GSS, ...
    FMODEL_WS_MIX = FMODEL_WS_BRANCH + 7,  // + PHAX_SUB_COUNT (checked in fast/model/model.c)
    FMODEL_WS_SCRATCH,
    FMODEL_WS_BWD,
    FMODEL_WS_KERNEL,
    FMODEL_WS_NPARTS
};
int fmodel_ws_breakdown(const phax_model_cfg *cfg, int B, int T, size_t bytes[FMODEL_WS_NPARTS]);
const char *fmodel_ws_part_name(int part);
int fmodel_ws_B(const fmodel_ws *ws);
int fmodel_ws_T(const fmodel_ws *ws);

// tokens, targets: (B, T) int32 (targets −1 are not counted). logits: (B, T, V)
// or NULL; loss: mean cross-entropy or NULL (then targets may be NULL).
// window: SWA window of this call in the SWAX family (−1 = cfg.w_long, 0 = full);
// ignored by the PHA family. Without logits, the output projection and the loss
// are fused (the (B·T, V) logits are never formed).
int fmodel_forward(const fmodel *m, fmodel_ws *ws, const int32_t *tokens,
                       const int32_t *targets, int window, float *logits, double *loss);
// Per-token cross-entropy (nats) of a forward: losses: (B, T), 0 where the target is −1.
// For evaluation by position; the logits are never formed.
int fmodel_token_losses(const fmodel *m, fmodel_ws *ws, const int32_t *tokens,
                            const int32_t *targets, int window, float *losses);
// Forward, then backward of the mean loss: grads += ∂loss/∂params; *loss gets the loss.
int fmodel_backward(fmodel *m, fmodel_ws *ws, const int32_t *tokens,
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
    FMODEL_PART_GSS, FMODEL_PART_ATTN, FMODEL_PART_SWIGLU, FMODEL_PART_AUX, FMODEL_PART_DUAL,
    FMODEL_PART_MLSTM,
    FMODEL_PART_GDN,           // the sub-layers (phax_sub_kind order)
    FMODEL_PART_ATTN_KERNEL,   // fcpu_attention_fwd/bwd alone
    FMODEL_PART_MLSTM_KERNEL,  // fcpu_mlstm_chunkwise_fwd/bwd alone
    FMODEL_PART_GDN_KERNEL,    // the Gated DeltaNet cell alone
    FMODEL_PART_GSS_KERNEL,    // fcpu_dss_kernel_fwd/bwd alone (the GSS sub-layer's K)
    FMODEL_PART_GSS_CONV,      // fcpu_ssm_conv_fwd/bwd alone (the FFT convolution)
    FMODEL_PART_HEAD,          // fused output projection + cross-entropy
    FMODEL_PART_TOTAL,         // the whole call
    FCPU_NPARTS
};
const char *fmodel_part_name(int part);
// on != 0: zero the table and start; 0: stop (the table stays readable).
void fmodel_ws_profile(fmodel_ws *ws, int on);
// Seconds per part, summed over the calls since profiling was turned on: fwd[] for the
// forward half of each call, bwd[] for the backward half (fwd[TOTAL], bwd[TOTAL]: the halves).
void fmodel_ws_profile_get(const fmodel_ws *ws, double fwd[FCPU_NPARTS],
                               double bwd[FCPU_NPARTS]);

#endif
