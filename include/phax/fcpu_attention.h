// fast/cpu attention (float32). See phax/fcpu.h for conventions.
//
// The function of ref_attention_* (docs/spec.md §2.7: causal GQA, window w with
// 0 = full, dot or cosine scores, RoPE rotate-half with pos0) computed the
// FlashAttention-2 way: per (batch, query head, tile of query rows) an online
// softmax over only the key tiles the causal window can see, so a sliding
// window costs O(T·w) and no T×T matrix is ever formed; memory is linear in T.
// RoPE and the cosine normalisation are applied once per row in a pre-pass.
#ifndef PHAX_FCPU_ATTENTION_H
#define PHAX_FCPU_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "phax/ops.h"

// Workspace bytes for a call on (B, T, c) run by `nthreads` OpenMP threads
// (nthreads <= 0: omp_get_max_threads()). A call uses omp_get_max_threads()
// threads, which must not exceed the nthreads the workspace was sized for.
// The size is linear in B·T (never T²). Returns 0 for a bad config.
size_t fcpu_attention_fwd_ws(int B, int T, const phax_attn_cfg *c, int nthreads);
size_t fcpu_attention_bwd_ws(int B, int T, const phax_attn_cfg *c, int nthreads);

// q: (B, T, Hq, dh); k: (B, T, Hkv, dh); v: (B, T, Hkv, dv); o: (B, T, Hq, dv).
// logscale: (Hq) (cosine mode; may be NULL for dot).
// lse: (B, Hq, T) or NULL: the natural-log log-sum-exp of each softmax row,
//   lse = log Σ_s exp(z_ts) (for callers that want it).
// stats: (B, Hq, T, 2) or NULL: each softmax row's statistics as the pair
//   (m, log l), m = max_s z_ts and l = Σ_s exp(z_ts − m), for the backward.
// ws: fcpu_attention_fwd_ws(B, T, c, ·) bytes (any alignment; contents need not persist).
int fcpu_attention_fwd(float *o, float *lse, float *stats, const float *q, const float *k,
                       const float *v, const float *logscale, int B, int T, const phax_attn_cfg *c,
                       void *ws);

// Backward: the arguments of ref_attention_bwd plus the forward's o and stats (both
// required, from a forward on the same q, k, v, logscale and config) and ws. Adds into
// dq, dk, dv (shapes of q, k, v) and dlogscale (Hq, cosine mode only); any may be NULL.
// The FlashAttention-2 backward: per (query tile, key tile the window lets it see)
// S = Q Kᵀ, P = e^((S − m) − log l), dP = dO Vᵀ, dS = P ⊙ (dP − D) with D = dO·o (a
// double dot product per row), then dV += Pᵀ dO, dK += dSᵀ Q, dQ += dS K; one S and
// one dP tile per thread exist at a time. P is rebuilt from the pair (m, log l), not
// from a float lse: S − m is exact near the maximum, while a float lse would cost P a
// relative |lse|·2⁻²⁴ (at cosine logits near 100, 20–40× the error of a plain float32
// evaluation).
// ws: fcpu_attention_bwd_ws(B, T, c, ·) bytes (any alignment).
int fcpu_attention_bwd(float *dq, float *dk, float *dv, float *dlogscale, const float *dout,
                       const float *o, const float *stats, const float *q, const float *k,
                       const float *v, const float *logscale, int B, int T, const phax_attn_cfg *c,
                       void *ws);

#endif
