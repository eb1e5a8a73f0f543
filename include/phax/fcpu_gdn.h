// fast/cpu Gated DeltaNet (float32). See phax/fcpu.h for conventions.
#ifndef PHAX_FCPU_GDN_H
#define PHAX_FCPU_GDN_H

#include <stddef.h>

#include "phax/ops.h"  // phax_gdn_cfg

// --- Gated DeltaNet cell, chunkwise (WY/UT) form (fast/cpu/gdn.c) -------------------------------
// The cell of docs/spec.md §2.13 (ref_gdn_recurrent_*: S_t = α_t S_{t−1}(I − β_t k̂_t k̂_tᵀ) +
// β_t v_t k̂_tᵀ, o_t = S_t q̂_t) computed over chunks of `chunk` steps (≤ 0: FCPU_GDN_CHUNK) with
// float32 products on BLAS: per chunk the UT system for the pseudo-values solved by strsm, the
// outputs and the state handed on by sgemm. Cost O(T·chunk·(dk + dv) + T·dk·dv) per sequence.
//
// Layouts as ref: q, k: (B, T, H, dk); v, o: (B, T, H, dv); g (log α_t), beta: (B, T, H); the
// states s0 (NULL: zero) and sT (NULL: not wanted) (B, H, dk, dv), flash-linear-attention's
// [B, H, K, V]. c: the scale of q̂ and whether q, k are L2-normalised (PHAX_GDN_L2_EPS).
// Backward: dq, dk, dv_, dg, dbeta, ds0 (any may be NULL) ADDED, from do_ and dsT (NULL: no
// gradient into the final state); the exact derivative of the chunkwise function.
//
// Workspace: ws must hold fcpu_gdn_chunkwise_{fwd,bwd}_ws(...) bytes for the same sizes and
// chunk, queried under the same omp_get_max_threads() as the call (a call leaves that count as
// it found it); 0 for sizes a call refuses. Threads: OpenMP over the B·H sequences, each computed
// by one thread in a fixed order; a threaded OpenBLAS (pthreads build) held at one thread
// meanwhile (process-wide, restored on return).
// Returns PHAX_OK, or PHAX_ERR (phax_error()) for invalid sizes: dk, dv up to FCPU_GDN_MAX_DIM,
// a chunk up to FCPU_GDN_MAX_CHUNK (its L×L tables are per-thread scratch).
#define FCPU_GDN_CHUNK 64
#define FCPU_GDN_MAX_CHUNK 4096
#define FCPU_GDN_MAX_DIM 65536

size_t fcpu_gdn_chunkwise_fwd_ws(int B, int T, int H, int dk, int dv, int chunk);
int fcpu_gdn_chunkwise_fwd(float *o, float *sT, const float *q, const float *k, const float *v, const float *g,
                           const float *beta, const float *s0, int B, int T, int H, int dk, int dv,
                           const phax_gdn_cfg *c, int chunk, void *ws);

size_t fcpu_gdn_chunkwise_bwd_ws(int B, int T, int H, int dk, int dv, int chunk);
int fcpu_gdn_chunkwise_bwd(float *dq, float *dk_, float *dv_, float *dg, float *dbeta, float *ds0, const float *do_,
                           const float *dsT, const float *q, const float *k, const float *v, const float *g,
                           const float *beta, const float *s0, int B, int T, int H, int dk, int dv,
                           const phax_gdn_cfg *c, int chunk, void *ws);

// --- the GDN layer's short convolution (fast/cpu/gdn.c) -------------------------------------------
// ref_gdn_conv_*'s contract (docs/spec.md §2.13): y[b,t,c] = SiLU(Σ_{j<K} w[c,j] x[b, t−K+1+j, c]),
// x before t = 0 zero; x, y: (B, T, C); w: (C, K). The pre-activation is a float sum in ref's order
// (j = 0..K−1); the backward recomputes it once into da = dy·SiLU′(a) (ws: B·T·C floats,
// fcpu_gdn_conv_bwd_ws bytes), then gathers dx (no scatter: rows in parallel without races) and
// sums dw over (b, t) in double. Backward: dx, dw (either may be NULL) ADDED from dy. PHAX_ERR
// (phax_error()) for B, C, K < 1, T < 0 or no workspace.
int fcpu_gdn_conv_fwd(float *y, const float *x, const float *w, int B, int T, int C, int K);
size_t fcpu_gdn_conv_bwd_ws(int B, int T, int C);  // 0 for sizes the call refuses
int fcpu_gdn_conv_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, int B, int T, int C,
                      int K, void *ws);

// --- the GDN layer's gates (fast/cpu/gdn.c) -----------------------------------------------------------
// ref_gdn_gates_*'s contract (docs/spec.md §2.13): g = −e^{A_log}·softplus(a + dt_bias), β = σ(b) per
// (row, head); a, b, g, beta: (n, H); A_log, dt_bias: (H). Float arithmetic (softplus and σ formed
// stably); the per-head sums of the backward (dA_log, ddt_bias) in double, rows in order. Backward:
// da, db, dA_log, ddt_bias (any may be NULL) ADDED from dg, dbeta (either may be NULL). g or beta may
// be NULL in the forward (not wanted). PHAX_ERR for H < 1.
int fcpu_gdn_gates_fwd(float *g, float *beta, const float *a, const float *b, const float *A_log,
                       const float *dt_bias, size_t n, int H);
int fcpu_gdn_gates_bwd(float *da, float *db, float *dA_log, float *ddt_bias, const float *dg, const float *dbeta,
                       const float *a, const float *b, const float *A_log, const float *dt_bias, size_t n, int H);

#endif
