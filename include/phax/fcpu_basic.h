// fast/cpu basic (float32). See phax/fcpu.h for conventions.
//
// Every op of phax/ref.h except attention, ssm and mlstm, in float32: the same
// arguments in the same order as the ref_ function (float for double), forward
// overwrites, backward ADDS, a NULL gradient is skipped. Extra arguments, always
// last: `void *ws` (scratch the caller allocates once, size from the _ws
// function) and, for RoPE, an optional precomputed cos/sin table.
//
// Sums over rows or elements (column sums, dot products, losses, the global
// gradient norm, the norms' dg/db) are accumulated in double; the norms' row
// statistics in float lanes over blocks of 256 whose sums are added in double
// (error ~20·2^-24 of Σ|terms| for any width), LayerNorm's about a float shift so
// a common offset does not cancel; the elementwise math is float.
// Reductions over rows (dg, db, dW of embedding, losses) use a fixed partition,
// so the results are bit-identical from run to run; those of the norms and
// embedding do not even depend on the thread count.
#pragma once
#include "phax/fcpu.h"

// --- embedding ---------------------------------------------------------------
// x: (n, d) = E[tok]; E: (V, d); tok: (n). A token outside [0, V) fails with
// PHAX_ERR before anything is written.
int fcpu_embedding_fwd(float *x, const float *E, const int32_t *tok, size_t n, int V, int d);
// dE: (V, d) += scatter of dx: (n, d) rows, in token order (parallel over columns).
void fcpu_embedding_bwd(float *dE, const float *dx, const int32_t *tok, size_t n, int d);

// --- linear: y = x Wᵀ + b, one cblas_sgemm over all n rows ----------------------
// y: (n, out); x: (n, in); W: (out, in); b: (out) or NULL.
void fcpu_linear_fwd(float *y, const float *x, const float *W, const float *b, size_t n, int in,
                     int out);
// dx += dy W (sgemm, beta 1); dW += dyᵀ x (sgemm, beta 1); db += column sums of dy
// (double accumulators). Any gradient may be NULL.
void fcpu_linear_bwd(float *dx, float *dW, float *db, const float *dy, const float *x,
                     const float *W, size_t n, int in, int out);

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

// --- elementwise activations (glibc's vector erfcf/expf) ----------------------------
void fcpu_gelu_fwd(float *y, const float *x, size_t n);  // exact erf form x Φ(x)
void fcpu_gelu_bwd(float *dx, const float *dy, const float *x, size_t n);
void fcpu_silu_fwd(float *y, const float *x, size_t n);
void fcpu_silu_bwd(float *dx, const float *dy, const float *x, size_t n);

// --- SwiGLU FFN: y = W_down(SiLU(W_gate x) ⊙ W_up x) ------------------------------------
// x: (n, d); Wg, Wu: (hid, d); Wd: (d, hid); y: (n, d). Three (bwd: eight, the
// hidden pre-activations recomputed) sgemms over all rows and one fused elementwise
// pass; the (n, hid) activations live in ws.
// Returns PHAX_OK (the int mirrors ref_swiglu_*; ws == NULL fails).
size_t fcpu_swiglu_fwd_ws(size_t n, int d, int hid);  // 3 n hid floats
int fcpu_swiglu_fwd(float *y, const float *x, const float *Wg, const float *Wu, const float *Wd,
                    size_t n, int d, int hid, void *ws);
size_t fcpu_swiglu_bwd_ws(size_t n, int d, int hid);  // 5 n hid floats
int fcpu_swiglu_bwd(float *dx, float *dWg, float *dWu, float *dWd, const float *dy, const float *x,
                    const float *Wg, const float *Wu, const float *Wd, size_t n, int d, int hid,
                    void *ws);

// Kept-activation variant (whole models): the forward stores a = x Wgᵀ, b = x Wuᵀ and
// h = SiLU(a) ⊙ b in keep: (3, n, hid) (fcpu_swiglu_keep_len floats); the backward reads
// them instead of recomputing a and b (6 sgemms, not 8). Same values as the pair above:
// the same sgemms and elementwise expressions, so bit-identical outputs and gradients.
size_t fcpu_swiglu_keep_len(size_t n, int hid);
int fcpu_swiglu_fwd_keep(float *y, float *keep, const float *x, const float *Wg, const float *Wu,
                         const float *Wd, size_t n, int d, int hid);
size_t fcpu_swiglu_bwd_kept_ws(size_t n, int d, int hid);  // 2 n hid floats
int fcpu_swiglu_bwd_kept(float *dx, float *dWg, float *dWu, float *dWd, const float *dy,
                         const float *x, const float *Wg, const float *Wu, const float *Wd,
                         size_t n, int d, int hid, const float *keep, void *ws);

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

// --- softplus mix ----------------------------------------------------------------------------
// b: (nb, n); p: (nb); m: (n). Weights in double, rounded to float once.
void fcpu_mix_weights(float *w, const float *p, int nb);
void fcpu_mix_fwd(float *m, const float *b, const float *p, int nb, size_t n);
void fcpu_mix_bwd(float *db, float *dp, const float *dm, const float *b, const float *p, int nb,
                  size_t n);

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
