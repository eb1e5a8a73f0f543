// float32 naive baselines of the equivalence tests: ref's formulas transcribed to
// float with plain loops and float accumulators (no fast path, no BLAS, compiled
// without FMA contraction). The bound judge (harness.h) measures how far an honest
// float32 evaluation lands from ref; the fast tiers must land no farther than a
// small multiple of that. One file per op family: baseline_f32_<family>.c.
// Backward baselines ADD into their gradients, as the kernels do.
#ifndef PHAX_TESTS_BASELINE_F32_H
#define PHAX_TESTS_BASELINE_F32_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "harness.h"

// --- the small ops (baseline_f32_<stem>.c: linear, norm, activation, ffn, rope, mix, loss, adamw;
// embedding is a gather, exact: no baseline) ------------------------------------------------------
// σ(z) in float, formed without overflow (activation, ffn and mix use it).
static inline float b32_sigmoid(float z) {
    if (z >= 0) return 1.0f / (1.0f + expf(-z));
    float e = expf(z);
    return e / (1.0f + e);
}
void b32_linear_fwd(float *y, const float *x, const float *W, const float *b, size_t n, int in, int out);
void b32_linear_bwd(float *dx, float *dW, float *db, const float *dy, const float *x, const float *W, size_t n, int in, int out);
void b32_rmsnorm_fwd(float *y, const float *x, const float *g, size_t n, int d, float eps);
void b32_rmsnorm_bwd(float *dx, float *dg, const float *dy, const float *x, const float *g, size_t n, int d, float eps);
void b32_layernorm_fwd(float *y, const float *x, const float *g, const float *b, size_t n, int d, float eps);
void b32_layernorm_bwd(float *dx, float *dg, float *db, const float *dy, const float *x, const float *g, size_t n, int d, float eps);
void b32_headnorm_fwd(float *y, const float *x, const float *g, size_t n, int H, int dh, float eps);
void b32_headnorm_bwd(float *dx, float *dg, const float *dy, const float *x, const float *g, size_t n, int H, int dh, float eps);
void b32_gelu_fwd(float *y, const float *x, size_t n);
void b32_gelu_bwd(float *dx, const float *dy, const float *x, size_t n);
void b32_silu_fwd(float *y, const float *x, size_t n);
void b32_silu_bwd(float *dx, const float *dy, const float *x, size_t n);
void b32_swiglu_fwd(float *y, const float *x, const float *Wg, const float *Wu, const float *Wd, size_t n, int d, int hid);
void b32_swiglu_bwd(float *dx, float *dWg, float *dWu, float *dWd, const float *dy, const float *x, const float *Wg, const float *Wu, const float *Wd, size_t n, int d, int hid);
void b32_rope(float *y, const float *x, int B, int T, int H, int dh, double base, long pos0, float sign, int acc);
void b32_mix_fwd(float *m, const float *b, const float *p, int nb, size_t n);
void b32_mix_bwd(float *db, float *dp, const float *dm, const float *b, const float *p, int nb, size_t n);
float b32_ce_fwd(const float *logits, const int32_t *t, size_t n, int V);
void b32_ce_bwd(float *dl, float dloss, const float *logits, const int32_t *t, size_t n, int V);
void b32_adamw(h_adamw_param *ps, int np, const phax_adamw_cfg *c, long step, float *gnorm);

// --- attention (baseline_f32_attention.c) -------------------------------------------------------
// The shape and options of one attention call (phax_attn_cfg's fields that matter here).
typedef struct {
    int B, T, Hq, Hkv, dh, dv, window, score, rope;
    long pos0;
} b32_attn_shape;
// Outputs (double arrays): o (B,T,Hq,dv), lse (B,Hq,T), dq, dk, dv, dls (Hq).
typedef struct {
    double *o, *lse, *dq, *dk, *dv, *dls;
} b32_attn_out;
// f = 1: every operation rounded to float32 (the baseline); f = 0: ref's values in double.
// mag (with f = 0): 0 values; 2 magnitudes of the terms (dz exact); 1 also dz expanded.
// q, k, v, ls, dout: the inputs' exact values; dout the upstream gradient of o.
void b32_attention(int f, int mag, const b32_attn_shape *a, const double *q, const double *k,
                   const double *v, const double *ls, const double *dout, b32_attn_out *out);

// --- ssm (baseline_f32_ssm.c) --------------------------------------------------------------------
// Kernel K: (H, T) from Λ (N), C̃ (H, N); conv: y = K ∗ u + D u over (B, T, H). Backward adds.
void b32_dss_kernel_fwd(float *K, const float *Lre, const float *Lim, const float *Cre, const float *Cim, int H, int N, int T, int rev);
void b32_dss_kernel_bwd(float *dLre, float *dLim, float *dCre, float *dCim, const float *dK, const float *Lre, const float *Lim, const float *Cre, const float *Cim, int H, int N, int T, int rev);
void b32_ssm_conv_fwd(float *y, const float *u, const float *K, const float *D, int B, int T, int H);
void b32_ssm_conv_bwd(float *du, float *dK, float *dD, const float *dy, const float *u, const float *K, const float *D, int B, int T, int H);

// --- mlstm (baseline_f32_mlstm.c) ----------------------------------------------------------------
// A problem: float inputs for fast and naive32, the same values in double for ref.
// q, k: (B, T, H, dqk); v, dh: (B, T, H, dv); ig, fg: (B, T, H).
typedef struct {
    int B, T, H, dqk, dv;
    size_t nk, nv, ng;
    float *q, *k, *v, *ig, *fg, *dh;
    double *qd, *kd, *vd, *igd, *fgd, *dhd;
} b32_mlstm_prob;
void b32_mlstm_fwd(float *h, const b32_mlstm_prob *p, float eps);
// Gradients ADDED (all non-NULL).
void b32_mlstm_bwd(float *dq, float *dk, float *dv_, float *dig, float *dfg, const b32_mlstm_prob *p,
                   float eps);
// Shadows x̄ of h and of the five gradients (dq, dk, dv, dĩ, df̃): a float32 evaluation
// of x is off by about 2⁻²⁴·x̄.
void b32_mlstm_roundoff_scale(double *hs, double *gs[5], const b32_mlstm_prob *p, double eps);

#endif
