// fast/cpu mlstm (float32). See phax/fcpu.h for conventions.
#ifndef PHAX_FCPU_MLSTM_H
#define PHAX_FCPU_MLSTM_H

#include <stddef.h>
#include <stdint.h>

#include "phax/ops.h"

// --- mLSTM cell, chunkwise form (fast/cpu/mlstm.c) -------------------------------------
// The stabilised mLSTM of docs/spec.md §2.9 computed chunkwise (TFLA, Beck et al.
// 2025): a recurrence of the stabilised states (C: dqk×dv, n: dqk, m) over chunk
// boundaries plus a parallel part with the causal log-gate matrix inside each
// chunk. Cost O(T·chunk·(dqk+dv) + T·dqk·dv), memory O(chunk²) per sequence.
//
// Layouts as ref: q, k: (B, T, H, dqk); v, h: (B, T, H, dv); igate (ĩ), fgate (f̃):
// (B, T, H). q̂ = q/√dqk is applied inside. chunk ≤ 0 means FCPU_MLSTM_CHUNK.
//
// Stabiliser: that of ref_mlstm_parallel_fwd exactly (m_t = max_{s≤t} D̃_ts), so
// with state_in = NULL the result is the same function as the parallel form for
// any eps, not only at eps = 0. With a state_in of C = 0, n = 0, m = m0 it is the
// recurrent form started at m0 (ref_mlstm_recurrent_fwd), again for any eps.
//
// State (for carrying a sequence across calls), per (b, h) a record of
// FCPU_MLSTM_STATE_LEN(dqk, dv) floats: [C (dqk×dv, row-major) | n (dqk) | m];
// records in (B, H) order. m = −inf means "no state" (the parallel start).
// state_in / state_out may be NULL; they may not alias each other or other args.
// Running T1 steps with state_out, then T2 steps with it as state_in, equals one
// run of T1 + T2 steps (up to float rounding: m is stored as a float and C, n are
// rescaled to it exactly).
//
// Workspace: ws must hold fcpu_mlstm_chunkwise_{fwd,bwd}_ws(...) bytes for the
// same sizes and chunk, queried under the same omp_get_max_threads() as the call
// (one scratch slot per thread). No alignment is required of ws.
// Threads: OpenMP over the B·H sequences; each sequence is computed by one thread
// in a fixed order, so results are bit-identical for any thread count. While a
// call runs more than one thread, OpenBLAS is held at one thread (process-wide;
// restored on return).
//
// Backward: gradients of the parallel form (state_in = NULL), ADDED into dq, dk,
// dv_, digate, dfgate (any may be NULL): the exact derivative of the stabilised
// function, including the paths through m_t (to the first argmax of the log-gate
// row) and through the max(|nᵀq̂|, e^{−m}) branch of the normaliser, as
// ref_mlstm_parallel_bwd. The backward recomputes the chunk-boundary states in a
// first pass and keeps them in ws (O(T/chunk · dqk·dv) floats per thread).
//
// Returns PHAX_OK, or PHAX_ERR (phax_error()) for invalid sizes.
#define FCPU_MLSTM_CHUNK 64
#define FCPU_MLSTM_STATE_LEN(dqk, dv) ((size_t)(dqk) * (size_t)(dv) + (size_t)(dqk) + 1)

size_t fcpu_mlstm_chunkwise_fwd_ws(int B, int T, int H, int dqk, int dv, int chunk);
int fcpu_mlstm_chunkwise_fwd(float *h, const float *q, const float *k, const float *v,
                             const float *igate, const float *fgate, int B, int T, int H, int dqk,
                             int dv, float eps, int chunk, const float *state_in, float *state_out,
                             void *ws);

size_t fcpu_mlstm_chunkwise_bwd_ws(int B, int T, int H, int dqk, int dv, int chunk);
int fcpu_mlstm_chunkwise_bwd(float *dq, float *dk, float *dv_, float *digate, float *dfgate,
                             const float *dh, const float *q, const float *k, const float *v,
                             const float *igate, const float *fgate, int B, int T, int H, int dqk,
                             int dv, float eps, int chunk, void *ws);

#endif
