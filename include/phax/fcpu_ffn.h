// fast/cpu SwiGLU FFN, float32 (fast/cpu/ffn.c; semantics: ref/ffn.c).
// Conventions: phax/fcpu.h; accumulation notes of the small ops: phax/fcpu.h.
#ifndef PHAX_FCPU_FFN_H
#define PHAX_FCPU_FFN_H

#include <stddef.h>
#include <stdint.h>

#include "phax/ops.h"

// --- SwiGLU FFN: y = W_down(SiLU(W_gate x) ⊙ W_up x) ------------------------------------
// x: (n, d); Wg, Wu: (hid, d); Wd: (d, hid); y: (n, d). Three (bwd: eight, the
// hidden pre-activations recomputed) sgemms over all rows and one fused elementwise
// pass; the (n, hid) activations live in ws.
// Returns PHAX_OK (the int mirrors ref_swiglu_*; ws == NULL fails).
size_t fcpu_swiglu_fwd_ws(size_t n, int d, int hid);  // 3 n hid floats
int fcpu_swiglu_fwd(float *y, const float *x, const float *Wg, const float *Wu, const float *Wd,
                    size_t n, int d, int hid, void *ws);
size_t fcpu_swiglu_bwd_ws(size_t n, int d, int hid);  // 4 n hid floats
int fcpu_swiglu_bwd(float *dx, float *dWg, float *dWu, float *dWd, const float *dy, const float *x,
                    const float *Wg, const float *Wu, const float *Wd, size_t n, int d, int hid,
                    void *ws);

// Kept-activation variant (whole models): the forward stores a = x Wgᵀ and b = x Wuᵀ in keep:
// (2, n, hid) (fcpu_swiglu_keep_len floats), making h = SiLU(a) ⊙ b in ws
// (fcpu_swiglu_fwd_keep_ws bytes, scratch); the backward reads a and b instead of recomputing
// them (6 sgemms, not 8) and makes h again. Same values as the pair above: the same sgemms and
// elementwise expressions, so bit-identical outputs and gradients.
size_t fcpu_swiglu_keep_len(size_t n, int hid);
size_t fcpu_swiglu_fwd_keep_ws(size_t n, int d, int hid);  // n hid floats
int fcpu_swiglu_fwd_keep(float *y, float *keep, const float *x, const float *Wg, const float *Wu,
                         const float *Wd, size_t n, int d, int hid, void *ws);
size_t fcpu_swiglu_bwd_kept_ws(size_t n, int d, int hid);  // 2 n hid floats
int fcpu_swiglu_bwd_kept(float *dx, float *dWg, float *dWu, float *dWd, const float *dy,
                         const float *x, const float *Wg, const float *Wu, const float *Wd,
                         size_t n, int d, int hid, const float *keep, void *ws);

#endif
