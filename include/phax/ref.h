// phax ref: the float64 oracle. Slow, scalar, readable; no BLAS, no threads,
// no SIMD, no fast-math, and it never calls fast/. See docs/spec.md for the math.
//
// Conventions (every function below):
//   * Row-major, batch first. Shapes are written as comments: x: (B, T, d).
//   * A linear map stores W: (out, in) and computes y = x Wᵀ + b (nn.Linear).
//   * Forward functions OVERWRITE their outputs.
//   * Backward functions ADD into every gradient buffer (like PyTorch's .grad),
//     so a tensor used twice (tied weights, residual branches) needs no copy.
//     Pass NULL for a gradient you do not want; it is then not computed.
//   * Backward functions take the forward inputs and recompute what they need:
//     the oracle trades time for having nothing cached that could go stale.
//   * Functions whose inputs can be invalid (token ids, shape attributes) or
//     that need scratch memory return PHAX_OK or PHAX_ERR with a message in
//     phax_error(); the rest return void. Shapes passed must be consistent.
#ifndef PHAX_REF_H
#define PHAX_REF_H

#include <stddef.h>
#include <stdint.h>

#include "phax/core.h"

// The op contract (attribute structs, score modes, constants) is tier-neutral: phax/ops.h.
#include "phax/ops.h"

// --- embedding (ref/embedding.c) -------------------------------------------
// x: (n, d) = E[tok]; E: (V, d); tok: (n). Fails on a token outside [0, V),
// reporting the first bad one and leaving x unwritten.
int ref_embedding_fwd(double *x, const double *E, const int32_t *tok, size_t n, int V, int d);
// dE += scatter of dx rows. Tokens are not re-validated (the forward did).
void ref_embedding_bwd(double *dE, const double *dx, const int32_t *tok, size_t n, int d);

// --- linear (ref/linear.c) ----------------------------------------------------
// y: (n, out) = x Wᵀ + b; x: (n, in); W: (out, in); b: (out) or NULL.
void ref_linear_fwd(double *y, const double *x, const double *W, const double *b,
                    size_t n, int in, int out);
// dx: (n, in), dW: (out, in), db: (out); any may be NULL.
void ref_linear_bwd(double *dx, double *dW, double *db, const double *dy, const double *x,
                    const double *W, size_t n, int in, int out);

// --- norms (ref/norm.c) ------------------------------------------------------
// rmsnorm: y = g ⊙ x / sqrt(mean(x²) + eps), over the last dim. x, y: (n, d); g: (d).
void ref_rmsnorm_fwd(double *y, const double *x, const double *g, size_t n, int d, double eps);
void ref_rmsnorm_bwd(double *dx, double *dg, const double *dy, const double *x, const double *g,
                     size_t n, int d, double eps);
// layernorm: y = g ⊙ (x − μ)/sqrt(σ² + eps) + b, biased variance. g: (d); b: (d) or NULL.
void ref_layernorm_fwd(double *y, const double *x, const double *g, const double *b, size_t n,
                       int d, double eps);
void ref_layernorm_bwd(double *dx, double *dg, double *db, const double *dy, const double *x,
                       const double *g, size_t n, int d, double eps);
// headnorm: LayerNorm over each head's slice of width dh, weight only (no bias).
// x, y: (n, H*dh); g: (H*dh) — one weight per channel, as xLSTM's MultiHeadLayerNorm.
void ref_headnorm_fwd(double *y, const double *x, const double *g, size_t n, int H, int dh,
                      double eps);
void ref_headnorm_bwd(double *dx, double *dg, const double *dy, const double *x, const double *g,
                      size_t n, int H, int dh, double eps);

// --- elementwise activations (ref/activation.c) ------------------------------
// gelu: exact erf form x Φ(x). silu: x σ(x). n elements.
void ref_gelu_fwd(double *y, const double *x, size_t n);
void ref_gelu_bwd(double *dx, const double *dy, const double *x, size_t n);
void ref_silu_fwd(double *y, const double *x, size_t n);
void ref_silu_bwd(double *dx, const double *dy, const double *x, size_t n);
// Scalar helpers used across families (stable forms).
double ref_sigmoid(double z);
double ref_softplus(double z);    // log(1 + e^z)
double ref_logsigmoid(double z);  // min(z,0) − log1p(e^{−|z|})

// --- swiglu FFN (ref/ffn.c) ----------------------------------------------------
// y = W_down(SiLU(W_gate x) ⊙ W_up x), no biases.
// x: (n, d); Wg, Wu: (hid, d); Wd: (d, hid); y: (n, d).
int ref_swiglu_fwd(double *y, const double *x, const double *Wg, const double *Wu,
                    const double *Wd, size_t n, int d, int hid);
int ref_swiglu_bwd(double *dx, double *dWg, double *dWu, double *dWd, const double *dy,
                    const double *x, const double *Wg, const double *Wu, const double *Wd,
                    size_t n, int d, int hid);

// --- rope (ref/rope.c) -------------------------------------------------------------
// Rotate-half RoPE: pairs (i, i + dh/2), θ_i = base^{−2i/dh}, angle p·θ_i with
// p = pos0 + t (double). x, y: (B, T, H, dh); dh must be even.
int ref_rope_fwd(double *y, const double *x, int B, int T, int H, int dh, double base, long pos0);
// dx += Rᵀ dy (the inverse rotation).
int ref_rope_bwd(double *dx, const double *dy, int B, int T, int H, int dh, double base, long pos0);

// --- attention (ref/attention.c) -------------------------------------------------
// Attribute struct phax_attn_cfg, its default and check: phax/ops.h.
// q: (B, T, Hq, dh); k: (B, T, Hkv, dh); v: (B, T, Hkv, dv); o: (B, T, Hq, dv).
// logscale: (Hq), the learnable ℓ_h of cosine mode (ignored and may be NULL for dot).
int ref_attention_fwd(double *o, const double *q, const double *k, const double *v,
                      const double *logscale, int B, int T, const phax_attn_cfg *c);
// dq, dk, dv, dlogscale: same shapes as their inputs; any may be NULL.
int ref_attention_bwd(double *dq, double *dk, double *dv, double *dlogscale, const double *dout,
                      const double *q, const double *k, const double *v, const double *logscale,
                      int B, int T, const phax_attn_cfg *c);

// --- state space: DSS kernel and SSM convolution (ref/ssm.c) ---------------------
// λ_n = −exp(Λre_n) + i·exp(Λim_n); C̃_hn = (Cre_hn + i Cim_hn)(e^{λ_n} − 1)/λ_n;
// K_h[l] = Re Σ_n C̃_hn e^{λ_n l}, l = 0..T−1.
// Lre, Lim: (N); Cre, Cim: (H, N); K: (H, T).
void ref_dss_kernel_fwd(double *K, const double *Lre, const double *Lim, const double *Cre,
                        const double *Cim, int H, int N, int T);
void ref_dss_kernel_bwd(double *dLre, double *dLim, double *dCre, double *dCim, const double *dK,
                        const double *Lre, const double *Lim, const double *Cre, const double *Cim,
                        int H, int N, int T);
// Direct causal convolution: y_h[t] = Σ_{s≤t} K_h[t−s] u_h[s] + D_h u_h[t].
// u, y: (B, T, H) (channels last); K: (H, T); D: (H).
void ref_ssm_conv_fwd(double *y, const double *u, const double *K, const double *D, int B, int T,
                      int H);
void ref_ssm_conv_bwd(double *du, double *dK, double *dD, const double *dy, const double *u,
                      const double *K, const double *D, int B, int T, int H);
// The same map as a recurrence over complex states, parametrised by Λ and C
// directly: z_hn[t] = e^{λ_n} z_hn[t−1] + u_h[t], y_h[t] = Re Σ_n C̃_hn z_hn[t] + D_h u_h[t].
void ref_ssm_recurrent_fwd(double *y, const double *u, const double *Lre, const double *Lim,
                           const double *Cre, const double *Cim, const double *D, int B, int T,
                           int H, int N);
int ref_ssm_recurrent_bwd(double *du, double *dLre, double *dLim, double *dCre, double *dCim,
                           double *dD, const double *dy, const double *u, const double *Lre,
                           const double *Lim, const double *Cre, const double *Cim,
                           const double *D, int B, int T, int H, int N);

// --- mLSTM cell (ref/mlstm.c) --------------------------------------------------------
// Stabilised mLSTM (xLSTM). q, k: (B, T, H, dqk); v: (B, T, H, dv);
// igate (ĩ), fgate (f̃): (B, T, H) pre-activations; h: (B, T, H, dv).
// eps is the 1e-6 added to the normaliser (PHAX_MLSTM_EPS); 0 makes the output
// exactly independent of the stabiliser.
// Recurrent form: states C, n, m start at zero, except m which starts at m0
// (0 by default; the output does not depend on it when eps = 0).
int ref_mlstm_recurrent_fwd(double *h, const double *q, const double *k, const double *v,
                             const double *igate, const double *fgate, int B, int T, int H,
                             int dqk, int dv, double eps, double m0);
int ref_mlstm_recurrent_bwd(double *dq, double *dk, double *dv_, double *digate, double *dfgate,
                             const double *dh, const double *q, const double *k, const double *v,
                             const double *igate, const double *fgate, int B, int T, int H,
                             int dqk, int dv, double eps, double m0);
// Parallel (quadratic) form, same function (m_t = max_s of the log-gate matrix).
int ref_mlstm_parallel_fwd(double *h, const double *q, const double *k, const double *v,
                            const double *igate, const double *fgate, int B, int T, int H,
                            int dqk, int dv, double eps);
int ref_mlstm_parallel_bwd(double *dq, double *dk, double *dv_, double *digate, double *dfgate,
                            const double *dh, const double *q, const double *k, const double *v,
                            const double *igate, const double *fgate, int B, int T, int H,
                            int dqk, int dv, double eps);
// The same under a gradient convention: PHAX_MLSTM_GRAD_EXACT (the function's own gradient, what
// ref_mlstm_parallel_bwd computes) or PHAX_MLSTM_GRAD_STOPGRAD_NORMALIZER (the normaliser
// max(|S_t|, e^{-m_t}) + eps and the stabiliser m_t held constant: what a hand-written backward
// that detaches them computes; not the gradient of h, but of h with those two frozen at their
// values, which tests/test_mlstm.c checks by finite differences of that frozen function).
#define PHAX_MLSTM_GRAD_EXACT 0
#define PHAX_MLSTM_GRAD_STOPGRAD_NORMALIZER 1
int ref_mlstm_parallel_bwd_grad(double *dq, double *dk, double *dv_, double *digate, double *dfgate,
                                const double *dh, const double *q, const double *k, const double *v,
                                const double *igate, const double *fgate, int B, int T, int H, int dqk, int dv,
                                double eps, int grad);

// --- Gated DeltaNet cell (ref/gdn.c; docs/spec.md §2.13) -------------------------------------------
// The delta rule with a scalar decay gate (Yang, Kautz & Hatamizadeh 2024). q, k: (B, T, H, dk);
// v, o: (B, T, H, dv); g (log α_t ≤ 0 in use, any real accepted), beta: (B, T, H); the state
// S: (dv, dk) per sequence and head, stored transposed in s0 (initial, NULL: zero) and sT (final,
// NULL: not wanted): (B, H, dk, dv), flash-linear-attention's [B, H, K, V]. Per step: S_t = α_t S_{t−1} (I − β_t k̂_t k̂_tᵀ) + β_t v_t k̂_tᵀ, o_t = S_t q̂_t,
// α_t = e^{g_t}, k̂ = k/sqrt(Σk² + eps) and q̂ = c->scale·q/sqrt(Σq² + eps) (c->qk_l2norm; else
// k̂ = k, q̂ = c->scale·q). Backward: dq, dk, dv, dg, dbeta, ds0 (each may be NULL) ADDED, from do
// and dsT (NULL: no gradient into the final state).
int ref_gdn_recurrent_fwd(double *o, double *sT, const double *q, const double *k, const double *v, const double *g,
                          const double *beta, const double *s0, int B, int T, int H, int dk, int dv,
                          const phax_gdn_cfg *c);
int ref_gdn_recurrent_bwd(double *dq, double *dk_, double *dv_, double *dg, double *dbeta, double *ds0,
                          const double *do_, const double *dsT, const double *q, const double *k, const double *v,
                          const double *g, const double *beta, const double *s0, int B, int T, int H, int dk, int dv,
                          const phax_gdn_cfg *c);
// The chunkwise (WY/UT) form's forward, chunks of `chunk` ≥ 1 steps (the last may be shorter):
// the same function by another route (docs/spec.md §2.13), for checking chunked kernels' forward.
int ref_gdn_chunkwise_fwd(double *o, double *sT, const double *q, const double *k, const double *v, const double *g,
                          const double *beta, const double *s0, int B, int T, int H, int dk, int dv, int chunk,
                          const phax_gdn_cfg *c);
// Its backward, reverse mode through the chunkwise forward as written (the UT solve run
// backwards): the recurrent backward's contract, the same gradients by the chunkwise route.
int ref_gdn_chunkwise_bwd(double *dq, double *dk_, double *dv_, double *dg, double *dbeta, double *ds0,
                          const double *do_, const double *dsT, const double *q, const double *k, const double *v,
                          const double *g, const double *beta, const double *s0, int B, int T, int H, int dk, int dv,
                          int chunk, const phax_gdn_cfg *c);

// The GDN layer's short convolution (docs/spec.md §2.13): causal, depthwise, kernel K, then SiLU.
// y[b,t,c] = SiLU(Σ_{j<K} w[c,j] x[b, t−K+1+j, c]) (x before t = 0: zero); x, y: (B, T, C); w: (C, K).
// Backward: dx, dw (either may be NULL) ADDED from dy. PHAX_ERR for B, C, K < 1 or T < 0.
int ref_gdn_conv_fwd(double *y, const double *x, const double *w, int B, int T, int C, int K);
int ref_gdn_conv_bwd(double *dx, double *dw, const double *dy, const double *x, const double *w, int B, int T, int C,
                     int K);

// The GDN layer's gates (docs/spec.md §2.13): g[r,h] = −e^{A_log[h]}·softplus(a[r,h] + dt_bias[h]),
// beta[r,h] = σ(b[r,h]); a, b, g, beta: (n, H); A_log, dt_bias: (H). Backward: da, db, dA_log,
// ddt_bias (any may be NULL) ADDED from dg, dbeta (either may be NULL: no gradient through it).
// PHAX_ERR for H < 1.
int ref_gdn_gates_fwd(double *g, double *beta, const double *a, const double *b, const double *A_log,
                      const double *dt_bias, size_t n, int H);
int ref_gdn_gates_bwd(double *da, double *db, double *dA_log, double *ddt_bias, const double *dg, const double *dbeta,
                      const double *a, const double *b, const double *A_log, const double *dt_bias, size_t n, int H);

// The Gated DeltaNet layer (docs/spec.md §2.13, "The layer"; swax_gdn's linear mixer) on x̄: (B, T, d),
// H heads of dk = d/(2H), dv = d/H: q, k = SiLU(conv(x̄ W{q,k}ᵀ)) (n, d/2), v = SiLU(conv(x̄ Wvᵀ)) (n, d),
// g, β = gates(x̄ Waᵀ, x̄ Wbᵀ), o = cell(q, k, v, g, β) (qk L2-normalised, scale 1/√dk, no initial
// state), y = (RMSNorm(o_h; norm) ⊙ SiLU(x̄ Wgᵀ)) Woᵀ, the RMSNorm over each head's dv values with one
// weight for every head (flash-linear-attention's FusedRMSNormGated). Weights (shapes (out, in)): wq, wk
// (d/2, d), wv (d, d), conv_q, conv_k (d/2, K), conv_v (d, K), wa, wb (H, d), A_log, dt_bias (H), norm (d/H),
// wg, wo (d, d).
typedef struct {
    const double *wq, *wk, *wv, *conv_q, *conv_k, *conv_v, *wa, *wb, *A_log, *dt_bias, *norm, *wg, *wo;
} ref_gdn_layer_w;
typedef struct {  // their gradients, ADDED (any may be NULL: skipped)
    double *wq, *wk, *wv, *conv_q, *conv_k, *conv_v, *wa, *wb, *A_log, *dt_bias, *norm, *wg, *wo;
} ref_gdn_layer_g;
// y: (B, T, d) overwritten; the backward ADDS into dx (B, T, d) and *gw from dy. PHAX_ERR (message)
// for B, H, K < 1, T < 0, d odd or H not dividing d/2, or out of memory.
int ref_gdn_layer_fwd(double *y, const double *x, const ref_gdn_layer_w *w, int B, int T, int d, int H, int K,
                      double norm_eps);
int ref_gdn_layer_bwd(double *dx, const ref_gdn_layer_g *gw, const double *dy, const double *x, const ref_gdn_layer_w *w,
                      int B, int T, int d, int H, int K, double norm_eps);

// --- softplus mix (ref/mix.c) --------------------------------------------------------
// w_i = softplus(p_i) / Σ_j softplus(p_j);  m = Σ_i w_i b_i.
// b: (nb, n) — nb branch tensors of n elements each, stacked; p: (nb); m: (n).
void ref_mix_weights(double *w, const double *p, int nb);
void ref_mix_fwd(double *m, const double *b, const double *p, int nb, size_t n);
void ref_mix_bwd(double *db, double *dp, const double *dm, const double *b, const double *p,
                 int nb, size_t n);

// --- cross-entropy (ref/loss.c) ---------------------------------------------------------
// loss = mean over counted rows of −log softmax(logits_r)[target_r]; a target of
// −1 is ignored (not counted). logits: (n, V); targets: (n).
// Fails on a target outside [−1, V) or when no row is counted.
int ref_cross_entropy_fwd(double *loss, const double *logits, const int32_t *targets, size_t n,
                          int V);
// dlogits += dloss · (softmax − onehot) / count.
int ref_cross_entropy_bwd(double *dlogits, double dloss, const double *logits,
                          const int32_t *targets, size_t n, int V);

// --- AdamW (ref/adamw.c) -------------------------------------------------------------------
// Settings phax_adamw_cfg, default and check: phax/ops.h.
typedef struct {
    double *p;          // parameter (updated in place)
    const double *g;    // its gradient (not modified)
    double *m, *v;      // first and second moments (updated in place, zero at start)
    size_t n;
    int decay;          // 1: apply weight decay to this tensor
} ref_adamw_param;

// One step number `step` (1-based) over all tensors; returns the global
// gradient norm before clipping in *gnorm (may be NULL).
int ref_adamw_step(ref_adamw_param *ps, int nparams, const phax_adamw_cfg *c, long step,
                   double *gnorm);

#endif
