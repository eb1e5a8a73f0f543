// fast/cpu AdamW with global-norm clipping, float32 (fast/cpu/adamw.c; semantics: ref/adamw.c).
// Conventions: phax/fcpu.h; accumulation notes of the small ops: phax/fcpu.h.
#ifndef PHAX_FCPU_ADAMW_H
#define PHAX_FCPU_ADAMW_H

#include <stddef.h>
#include <stdint.h>

#include "phax/ops.h"

// --- AdamW with global-norm clipping (the rules of ref_adamw_step) -----------------------------
// float32 parameters and moments; the gradient norm is accumulated in double
// (fixed per-thread partition, summed in thread order) and the per-element
// update is computed in double and rounded once per stored value.
typedef struct {
    float *p;        // parameter (updated in place)
    const float *g;  // its gradient (not modified)
    float *m, *v;    // moments (updated in place, zero at start)
    size_t n;
    int decay;  // 1: apply weight decay to this tensor
} fcpu_adamw_param;
int fcpu_adamw_step(fcpu_adamw_param *ps, int nparams, const phax_adamw_cfg *c, long step,
                    double *gnorm);

#endif
