// fast/cpu RMSNorm, LayerNorm and per-head LayerNorm, float32
// (fast/cpu/norm.c; semantics: ref/norm.c).
// Conventions: phax/fcpu.h; accumulation notes of the small ops: phax/fcpu.h.
#ifndef PHAX_FCPU_NORM_H
#define PHAX_FCPU_NORM_H

#include <stddef.h>
#include <stdint.h>

#include "phax/ops.h"

// --- norms over the last dimension ---------------------------------------------------
// eps stays double, as in ref (pass PHAX_RMSNORM_EPS etc.).
// Backward of every norm needs `ws` of the _bwd_ws size only when dg (or db) is
// requested (then per-chunk partial sums over rows live there); NULL otherwise.
void fcpu_rmsnorm_fwd(float *y, const float *x, const float *g, size_t n, int d, double eps);
size_t fcpu_rmsnorm_bwd_ws(size_t n, int d);
void fcpu_rmsnorm_bwd(float *dx, float *dg, const float *dy, const float *x, const float *g,
                      size_t n, int d, double eps, void *ws);
void fcpu_layernorm_fwd(float *y, const float *x, const float *g, const float *b, size_t n, int d,
                        double eps);
size_t fcpu_layernorm_bwd_ws(size_t n, int d);
void fcpu_layernorm_bwd(float *dx, float *dg, float *db, const float *dy, const float *x,
                        const float *g, size_t n, int d, double eps, void *ws);
// x, y: (n, H*dh); g: (H*dh).
void fcpu_headnorm_fwd(float *y, const float *x, const float *g, size_t n, int H, int dh,
                       double eps);
size_t fcpu_headnorm_bwd_ws(size_t n, int H, int dh);
void fcpu_headnorm_bwd(float *dx, float *dg, const float *dy, const float *x, const float *g,
                       size_t n, int H, int dh, double eps, void *ws);

#endif
