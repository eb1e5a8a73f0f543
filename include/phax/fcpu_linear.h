// fast/cpu linear layer y = x Wᵀ + b, float32 (fast/cpu/linear.c; semantics: ref/linear.c).
// Conventions: phax/fcpu.h; accumulation notes of the small ops: phax/fcpu.h.
#ifndef PHAX_FCPU_LINEAR_H
#define PHAX_FCPU_LINEAR_H

#include <stddef.h>
#include <stdint.h>

#include "phax/ops.h"

// --- linear: y = x Wᵀ + b, one cblas_sgemm over all n rows ----------------------
// y: (n, out); x: (n, in); W: (out, in); b: (out) or NULL.
void fcpu_linear_fwd(float *y, const float *x, const float *W, const float *b, size_t n, int in,
                     int out);
// dx += dy W (sgemm, beta 1); dW += dyᵀ x (sgemm, beta 1); db += column sums of dy
// (double accumulators). Any gradient may be NULL.
void fcpu_linear_bwd(float *dx, float *dW, float *db, const float *dy, const float *x,
                     const float *W, size_t n, int in, int out);

#endif
