// ref models: whole PHA / transformer / serial / SWAX / swa / mlstm models in
// float64, forward and backward, built from the ref ops. The oracle for whole
// models; slow and readable, activations recomputed or kept per call.
#ifndef PHAX_REF_MODEL_H
#define PHAX_REF_MODEL_H

#include <stdint.h>

#include "phax/model.h"
#include "phax/ref.h"

typedef struct {
    phax_model_cfg cfg;  // resolved
    phax_layout layout;
    double *params;      // (layout.numel), in layout order
    double *grads;       // (layout.numel); backward ADDS here
} ref_model;

// Resolve a copy of cfg, build the layout, allocate, initialise from seed.
int ref_model_new(ref_model *m, const phax_model_cfg *cfg, uint64_t seed);
void ref_model_free(ref_model *m);
// Pointers into params / grads by parameter name (NULL if the model has none).
double *ref_model_param(const ref_model *m, const char *name);
double *ref_model_grad(const ref_model *m, const char *name);
void ref_model_zero_grad(ref_model *m);

// tokens, targets: (B, T) int32; a target of −1 is not counted.
// logits: (B, T, V) or NULL. loss: mean cross-entropy over counted targets, or
// NULL (then targets may be NULL).
// window: the SWA window for this call in the SWAX family (−1 = cfg.w_long;
// 0 = full attention); ignored by the other families.
int ref_model_forward(const ref_model *m, const int32_t *tokens, const int32_t *targets, int B,
                      int T, int window, double *logits, double *loss);
// Forward, then backward of the mean loss: grads += ∂loss/∂params. *loss gets the loss.
int ref_model_backward(ref_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                       int window, double *loss);

#endif
