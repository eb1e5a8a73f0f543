// fast/cpu GELU and SiLU, float32 (fast/cpu/activation.c; semantics: ref/activation.c).
// Conventions: phax/fcpu.h; accumulation notes of the small ops: phax/fcpu.h.
#ifndef PHAX_FCPU_ACTIVATION_H
#define PHAX_FCPU_ACTIVATION_H

#include <stddef.h>
#include <stdint.h>

#include "phax/ops.h"

// --- elementwise activations (glibc's vector erfcf/expf) ----------------------------
void fcpu_gelu_fwd(float *y, const float *x, size_t n);  // exact erf form x Φ(x)
void fcpu_gelu_bwd(float *dx, const float *dy, const float *x, size_t n);
void fcpu_silu_fwd(float *y, const float *x, size_t n);
void fcpu_silu_bwd(float *dx, const float *dy, const float *x, size_t n);

#endif
