// phax check: the precision baselines behind `phax check` (docs/oracle.md).
//
// A baseline is the error a straightforward implementation at a given precision
// makes: the op written as plain loops, with every input and the result of every
// operation rounded to the precision (check/round.c). It is neither the fast tier
// nor ref: its own code, written for this, in check/. All arithmetic is done in
// double and rounded after each operation, so one function serves every precision.
#ifndef PHAX_CHECK_H
#define PHAX_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "phax/model.h"
#include "phax/ops.h"

typedef enum { PHAX_PREC_F32 = 0, PHAX_PREC_TF32, PHAX_PREC_BF16, PHAX_PREC_F16, PHAX_PREC_N } phax_prec_id;

typedef struct {
    const char *name;  // "f32", "tf32", "bf16", "f16"
    int p;             // significand bits (with the implicit one) of every stored value and result
    int p_mm;          // significand bits of a product's operands in a dot product (tf32: 11)
    int emin, emax;    // frexp exponents: smallest normal 2^(emin-1), overflow at 2^emax
    double u;          // unit roundoff 2^-p
} phax_precision;

// The precision named `name`, or NULL.
const phax_precision *phax_precision_find(const char *name);
const phax_precision *phax_precision_get(phax_prec_id id);

// x rounded to nearest, ties to even, to p significand bits with the exponent range of
// `pr` (gradual underflow, overflow to ±inf). NaN and ±inf pass through.
double phax_round_bits(double x, int p, int emin, int emax);
double phax_round(const phax_precision *pr, double x);     // to pr->p bits
// Every rounding of this thread from now on stochastic (up with probability equal to the
// distance from the lower neighbour, in units of the spacing), drawn from a stream seeded
// with seed; 0 turns it off (round to nearest, ties to even: the default). phax check runs
// each baseline once to nearest and twice stochastically (docs/oracle.md, "The bound").
void phax_round_stochastic(uint64_t seed);
double phax_round_mm(const phax_precision *pr, double x);  // a dot product's operand: pr->p_mm bits

// Attention (docs/spec.md; the contract of ref_attention_fwd/_bwd): y and every gradient
// are OVERWRITTEN (unlike ref). dl may be NULL (dot scores). gy: the upstream gradient.
// q: (B, T, Hq, dh), k: (B, T, Hkv, dh), v: (B, T, Hkv, dv), l: (Hq) or NULL.
int phax_naive_attention(const phax_precision *pr, double *y, double *dq, double *dk, double *dv,
                         double *dl, const double *gy, const double *q, const double *k, const double *v,
                         const double *l, int B, int T, const phax_attn_cfg *c);

// The same with the backward's D = Σ_s p_s dp_s (flash_D 0, phax_naive_attention) or
// FlashAttention's D = Σ_i y_i g_i (flash_D 1): phax check's bound takes the larger error.
int phax_naive_attention_alg(const phax_precision *pr, double *y, double *dq, double *dk, double *dv,
                             double *dl, const double *gy, const double *q, const double *k, const double *v,
                             const double *l, int B, int T, const phax_attn_cfg *c, int flash_D);

// Convolution form of the GSS/SSM layer: y[b,t,h] = Σ_{s≤t} k[h,t−s] u[b,s,h] + d[h] u[b,t,h].
// Outputs overwritten. u, y, gy: (B, T, H); k: (H, T); d: (H).
int phax_naive_ssm_conv(const phax_precision *pr, double *y, double *du, double *dk, double *dd,
                        const double *gy, const double *u, const double *k, const double *d, int B, int T,
                        int H);

// mLSTM, parallel stabilised form (docs/spec.md §2.9; ref_mlstm_parallel_fwd/_bwd's contract),
// outputs overwritten. q, k: (B, T, H, dqk); v, h, gh: (B, T, H, dv); igate, fgate: (B, T, H).
int phax_naive_mlstm(const phax_precision *pr, double *h, double *dq, double *dk, double *dv, double *di,
                     double *df, const double *gh, const double *q, const double *k, const double *v,
                     const double *ig, const double *fg, int B, int T, int H, int dqk, int dv_, double eps);

// The same with the log-decays formed as differences of cumulative sums (cs_t − cs_s), the other
// standard way to write the parallel form; its rounding grows with T where the direct sum's
// does not, so phax check's bound takes the larger of the two baselines' errors.
int phax_naive_mlstm_cumsum(const phax_precision *pr, double *h, double *dq, double *dk, double *dv, double *di,
                            double *df, const double *gh, const double *q, const double *k, const double *v,
                            const double *ig, const double *fg, int B, int T, int H, int dqk, int dv_,
                            double eps);

// Either form (cumsum 0/1) under a gradient convention (phax/ref.h's PHAX_MLSTM_GRAD_*).
int phax_naive_mlstm_grad(const phax_precision *pr, double *h, double *dq, double *dk, double *dv, double *di,
                          double *df, const double *gh, const double *q, const double *k, const double *v,
                          const double *ig, const double *fg, int B, int T, int H, int dqk, int dv_, double eps,
                          int cumsum, int grad);

// The recurrent form's function (from m0) as a chunkwise kernel with one chunk computes it,
// forward and backward (check/mlstm.c): the second baseline of phax check's bound on
// form=recurrent. Shapes as phax_naive_mlstm.
int phax_naive_mlstm_chunkwise(const phax_precision *pr, double *h, double *dq, double *dk, double *dv, double *di,
                               double *df, const double *gh, const double *q, const double *k, const double *v,
                               const double *ig, const double *fg, int B, int T, int H, int dqk, int dv_, double eps,
                               double m0);

// Gated DeltaNet (ref_gdn_recurrent_fwd/_bwd's contract, docs/spec.md §2.13): o and every
// gradient OVERWRITTEN (all non-NULL but sT and ds0: NULL, not wanted); gsT NULL: no gradient into
// the final state. chunk 0: the recurrent form; chunk C ≥ 1: the chunkwise (WY/UT) form over chunks of
// C steps (check/gdn.c). phax check's bound takes the larger error of the recurrent form and
// the chunkwise form at PHAX_GDN_CHECK_CHUNK.
#define PHAX_GDN_CHECK_CHUNK 64
int phax_naive_gdn(const phax_precision *pr, double *o, double *sT, double *dq, double *dk, double *dv, double *dg,
                   double *dbeta, double *ds0, const double *go, const double *gsT, const double *q, const double *k,
                   const double *v, const double *g, const double *beta, const double *s0, int B, int T, int H, int dk_,
                   int dv_, const phax_gdn_cfg *c, int chunk);

// The Gated DeltaNet layer's short convolution and gates (check/gdn.c; ref_gdn_conv_* and
// ref_gdn_gates_*'s functions, docs/spec.md §2.13), forward and (with an upstream gradient)
// backward at pr; outputs OVERWRITTEN, any may be NULL (not wanted). conv: x, y, gy, dx (B, T, C),
// w, dw (C, K). gates: a, b, g, beta, dg, dbeta, da, db (n, H); A_log, dt_bias and their gradients (H).
int phax_naive_gdn_conv(const phax_precision *pr, double *y, double *dx, double *dw, const double *gy, const double *x,
                        const double *w, int B, int T, int C, int K);
int phax_naive_gdn_gates(const phax_precision *pr, double *g, double *beta, double *da, double *db, double *dA_log,
                         double *ddt_bias, const double *dg, const double *dbeta, const double *a, const double *b,
                         const double *A_log, const double *dt_bias, size_t n, int H);

// mLSTM, recurrent form from the stabiliser m0 (ref_mlstm_recurrent_fwd/_bwd's contract), outputs
// overwritten; shapes as phax_naive_mlstm.
int phax_naive_mlstm_recurrent(const phax_precision *pr, double *h, double *dq, double *dk, double *dv, double *di,
                               double *df, const double *gh, const double *q, const double *k, const double *v,
                               const double *ig, const double *fg, int B, int T, int H, int dqk, int dv_, double eps,
                               double m0);

// The small ops (check/<stem>.c: linear, norm, activation, ffn, loss, embedding, mix, adamw),
// outputs overwritten; a NULL bias (db, b) is skipped.
// linear: x (n, in), W (out, in), b (out), y (n, out).
int phax_naive_linear(const phax_precision *pr, double *y, double *dx, double *dW, double *db, const double *gy,
                      const double *x, const double *W, const double *b, size_t n, int in, int out);
// rmsnorm (layer 0) / layernorm (1) over groups of w channels (headnorm: w = dh, no bias).
int phax_naive_norm(const phax_precision *pr, int layer, double *y, double *dx, double *dg, double *db,
                    const double *gy, const double *x, const double *g, const double *b, size_t n, int d, int w,
                    double eps);
// The same with the variance in two passes (one_pass 0: phax_naive_norm) or in one,
// E[x²] − E[x]² (its sums in float32 at least): the other common way, which loses digits where
// |mean| ≫ spread; phax check's LayerNorm/headnorm bound takes the larger of the two errors.
int phax_naive_norm_alg(const phax_precision *pr, int layer, double *y, double *dx, double *dg, double *db,
                        const double *gy, const double *x, const double *g, const double *b, size_t n, int d, int w,
                        double eps, int one_pass);
// gelu (silu 0, the exact erf form) or silu (1), elementwise.
int phax_naive_act(const phax_precision *pr, int silu, double *y, double *dx, const double *gy, const double *x,
                   size_t n);
// y = (SiLU(x Wgᵀ) ⊙ x Wuᵀ) Wdᵀ; x (n, d), Wg, Wu (hid, d), Wd (d, hid).
int phax_naive_swiglu(const phax_precision *pr, double *y, double *dx, double *dWg, double *dWu, double *dWd,
                      const double *gy, const double *x, const double *Wg, const double *Wu, const double *Wd,
                      size_t n, int d, int hid);
// Mean softmax cross-entropy over the rows whose target is not −1; gl: the loss's upstream gradient.
int phax_naive_cross_entropy(const phax_precision *pr, double *loss, double *dx, double gl, const double *x,
                             const int32_t *tg, size_t n, int V);
// rope: x, y, gy, dx (B, T, H, dh); y = R_{pos0+t} x, dx = R_{pos0+t}ᵀ gy, the table in the precision.
int phax_naive_rope(const phax_precision *pr, double *y, double *dx, const double *gy, const double *x, int B, int T,
                    int H, int dh, double base, long pos0);
// embedding: y (n, d) = E[tok]; dE (V, d) the scatter-sum of gy (tokens checked by ref).
int phax_naive_embedding(const phax_precision *pr, double *y, double *dE, const double *gy, const double *E,
                         const int32_t *tok, size_t n, int V, int d);
// mix: y (n) = Σ_i w_i b_i, w = softplus(p)/Σ softplus(p); b, db (nb, n); p, dp (nb).
int phax_naive_mix(const phax_precision *pr, double *y, double *db, double *dp, const double *gy, const double *b,
                   const double *p, int nb, size_t n);
// One AdamW step on one tensor (ref_adamw_step's contract): p, m, v (n) updated in place.
int phax_naive_adamw(const phax_precision *pr, double *p, double *m, double *v, double *gnorm, const double *g,
                     size_t n, const phax_adamw_cfg *c, long step, int decay);
// The DSS kernel k (H, T) from Λ (lambda_re, lambda_im: (N)) and C (c_re, c_im: (H, N)), and the
// gradients of Λ and C from dk (ref_dss_kernel_fwd/_bwd's contract; outputs overwritten).
int phax_naive_dss_kernel(const phax_precision *pr, double *k, double *dLre, double *dLim, double *dCre,
                          double *dCim, const double *dk, const double *Lre, const double *Lim, const double *Cre,
                          const double *Cim, int H, int N, int T);

// The whole model (docs/spec.md §3; ref_model_forward/_backward's contract), forward and
// backward, composed from the baselines above and glue rounded the same way (check/model.c):
// logits (B, T, V), *loss (the mean cross-entropy), grads (layout order, L->numel) OVERWRITTEN
// with the gradient of the loss. cfg resolved, L its layout, params in layout order; tokens
// and targets (B, T) valid (ref checks them first); window: the call's (−1 = w_long; the plan
// resolves it per family). *peak (may be NULL): the most doubles its own scratch held at once.
int phax_naive_model(const phax_precision *pr, double *logits, double *loss, double *grads, const phax_model_cfg *cfg,
                     const phax_layout *L, const double *params, const int32_t *tok, const int32_t *tg, int B, int T,
                     int window, size_t *peak);
// The same with attention's backward taking FlashAttention's D = rowsum(o ⊙ dO) (flash_D 1)
// instead of D = Σ p·dp (0, phax_naive_model): phax check's second baseline of a model with
// attention. Where a gradient's truth is exactly 0 (a query that sees one key: T 1, window 1)
// the first gives exactly 0 and a flash-style kernel u-sized noise of the terms that cancel.
int phax_naive_model_alg(const phax_precision *pr, double *logits, double *loss, double *grads,
                         const phax_model_cfg *cfg, const phax_layout *L, const double *params, const int32_t *tok,
                         const int32_t *tg, int B, int T, int window, size_t *peak, int flash_D);
// An upper bound on the doubles phax_naive_model holds at once (its scratch and its ops'),
// from the shapes alone, for the oracle's memory plan; outputs and gradients not included.
size_t phax_naive_model_doubles(const phax_model_cfg *cfg, int B, int T);

#endif
