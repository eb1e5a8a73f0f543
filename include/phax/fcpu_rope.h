// fast/cpu rotate-half RoPE, float32 (fast/cpu/rope.c; semantics: ref/rope.c).
// Conventions: phax/fcpu.h; accumulation notes of the small ops: phax/fcpu.h.
#ifndef PHAX_FCPU_ROPE_H
#define PHAX_FCPU_ROPE_H

#include <stddef.h>
#include <stdint.h>

#include "phax/ops.h"

// --- RoPE (rotate-half) ------------------------------------------------------------------
// cos/sin of the angle p·θ_i, p = pos0 + t, θ_i = base^{−2i/dh}, formed and
// evaluated in double exactly as ref does, then rounded to float.
// cs: (2, T, dh/2) — cos[t][i] then, at offset T·dh/2, sin[t][i]. Build it once
// per forward and pass it to every rope call of that sequence (q and k, fwd and bwd).
size_t fcpu_rope_table_len(int T, int dh);  // floats: T·dh
int fcpu_rope_table(float *cs, int T, int dh, double base, long pos0);
// x, y: (B, T, H, dh). cs: a table from fcpu_rope_table for the same (T, dh,
// base, pos0), or NULL to evaluate cos/sin per (b, t) on the fly (same values,
// bit-identical results; slower by the cost of B·T·dh/2 double sin+cos).
int fcpu_rope_fwd(float *y, const float *x, int B, int T, int H, int dh, double base, long pos0,
                  const float *cs);
int fcpu_rope_bwd(float *dx, const float *dy, int B, int T, int H, int dh, double base, long pos0,
                  const float *cs);

#endif
