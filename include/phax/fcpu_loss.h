// fast/cpu cross-entropy and its fusion with the output projection, float32
// (fast/cpu/loss.c; semantics: ref/loss.c).
// Conventions: phax/fcpu.h; accumulation notes of the small ops: phax/fcpu.h.
#ifndef PHAX_FCPU_LOSS_H
#define PHAX_FCPU_LOSS_H

#include <stddef.h>
#include <stdint.h>

#include "phax/ops.h"

// --- cross-entropy (fused softmax; target −1 ignored) ----------------------------------------
// logits: (n, V); targets: (n). PHAX_ERR on a target outside [−1, V) or when
// every target is −1 (nothing written then).
int fcpu_cross_entropy_fwd(float *loss, const float *logits, const int32_t *targets, size_t n,
                           int V);
int fcpu_cross_entropy_bwd(float *dlogits, float dloss, const float *logits, const int32_t *targets,
                           size_t n, int V);
// Both in one call, each logits row read from memory once (its passes run in
// cache): *loss = the forward's loss, dlogits += dloss·(softmax − onehot)/count
// (dlogits may be NULL: loss only). Same bits as the two calls.
int fcpu_cross_entropy_fwd_bwd(float *loss, float *dlogits, float dloss, const float *logits,
                               const int32_t *targets, size_t n, int V);

// Fused output projection + cross-entropy (e.g. tied embedding W = E: (V, d)):
// logits = x Wᵀ, loss as fcpu_cross_entropy_fwd, and with G = dloss·(softmax −
// onehot)/count: dx += G W, dW += Gᵀ x — computed fcpu_lce_tile_rows(V) rows at a
// time, so the (n, V) logits never exist; ws holds one (tile, V) block.
// x: (n, d); W: (V, d); dx: (n, d) or NULL; dW: (V, d) or NULL.
// Rows per tile: as many as fit 16 MiB of logits, at least 256 and at most 1024
// (V 8192: 512 rows; V 33278: 256, 34 MB). Fewer tiles mean fewer passes of the
// (V, d) gradient dW through memory and larger products.
#define FCPU_LCE_TILE_MIN 256
#define FCPU_LCE_TILE_MAX 1024
size_t fcpu_lce_tile_rows(int V);
size_t fcpu_linear_cross_entropy_ws(size_t n, int d, int V);
int fcpu_linear_cross_entropy(float *loss, float *dx, float *dW, float dloss, const float *x,
                              const float *W, const int32_t *targets, size_t n, int d, int V,
                              void *ws);

// Per-row cross-entropy of the fused projection: row_loss[r] = lse(x_r Wᵀ) − (x_r Wᵀ)[t_r]
// (0 where t_r = −1), for evaluation by position. Same tiling and ws as above.
int fcpu_linear_cross_entropy_rows(float *row_loss, const float *x, const float *W,
                                   const int32_t *targets, size_t n, int d, int V, void *ws);

#endif
