// Shared pieces of the ref models (not public API): the call context and the
// branches (sub-layers) every family is built from — the ref side of
// fast/model/model_internal.h.
#ifndef PHAX_REF_MODEL_INTERNAL_H
#define PHAX_REF_MODEL_INTERNAL_H

#include "phax/model_plan.h"
#include "phax/ref_model.h"

// Everything a call needs: the model, the batch, the call's window.
typedef struct {
    const ref_model *m;
    int B, T;
    size_t n;       // B·T
    int window;     // attention window of this call (resolved by the plan: 0 = full)
    double *grads;  // gradients to add into (layout order), or NULL: forward only
} rm_ctx;

// Scratch that must be freed; NULL with an error recorded on failure.
double *rm_alloc(size_t n);

// Branch k of block l. y: (n, d) = branch(x: (n, d)).
int rm_branch_fwd(const rm_ctx *cx, phax_sub_kind k, int l, double *y, const double *x);
// dx: (n, d) += ∂/∂x, grads += the branch's parameter gradients, from dy: (n, d).
// The branch's intermediates are recomputed from x.
int rm_branch_bwd(const rm_ctx *cx, phax_sub_kind k, int l, double *dx, const double *dy,
                  const double *x);

// Parameter / gradient of block l by its name suffix ("attn.wq.weight"); NULL if absent.
// rm_grad gives NULL when the call has no gradients.
const double *rm_param(const ref_model *m, int l, const char *suffix);
double *rm_grad(const rm_ctx *cx, int l, const char *suffix);

#endif
