// fast/cpu softplus mix of branch outputs, float32 (fast/cpu/mix.c; semantics: ref/mix.c).
// Conventions: phax/fcpu.h; accumulation notes of the small ops: phax/fcpu.h.
#ifndef PHAX_FCPU_MIX_H
#define PHAX_FCPU_MIX_H

#include <stddef.h>
#include <stdint.h>

#include "phax/ops.h"

// --- softplus mix ----------------------------------------------------------------------------
// b: (nb, n); p: (nb); m: (n). Weights in double, rounded to float once.
void fcpu_mix_fwd(float *m, const float *b, const float *p, int nb, size_t n);
void fcpu_mix_bwd(float *db, float *dp, const float *dm, const float *b, const float *p, int nb,
                  size_t n);

#endif
