// phax f32 op table: every float32 op the fast model runner (fast/model/model.c,
// fast/model/model_branches.c) calls, as function pointers. The runner reaches kernels,
// elementwise ops, scratch sizes and its arena only through a table, so the same runner
// drives any tier that fills one: fast/cpu fills one (fcpu_f32_ops(), phax/fcpu_f32_ops.h),
// fast/cuda fills another with device pointers in the same roles (fast/cuda/f32_ops.cu).
//
// Conventions (those of phax/fcpu.h, which the cpu table's kernels are):
//   * Every pointer argument points into the tier's memory (the arena from `alloc`, the
//     parameters and gradients); scalars and shapes are host values.
//   * Forward overwrites its outputs; backward ADDS into gradients; a NULL gradient is
//     skipped. The elementwise ops below overwrite unless they say "+=".
//   * A kernel that needs scratch has a `_ws` entry (bytes) and takes `void *ws` last.
//   * n: rows (B·T) or elements, as each entry says; shapes row-major.
// No entry is NULL in a complete table (tests/test_fmodel.c checks the cpu one).
#ifndef PHAX_F32_OPS_H
#define PHAX_F32_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "phax/ops.h"  // phax_attn_cfg

#ifdef __cplusplus
extern "C" {
#endif

typedef struct phax_f32_ops {
    const char *name;  // the tier ("cpu")
    int mlstm_chunk;   // the chunk the mLSTM kernels run with (passed as their `chunk`)
    int gdn_chunk;     // the chunk the Gated DeltaNet kernels run with

    // --- memory ---------------------------------------------------------------------------
    // The runner's arena: bytes, zeroed, 64-byte aligned at least; NULL on failure (message
    // in phax_error()). Released by free_ws (NULL is a no-op).
    void *(*alloc_ws)(size_t bytes);
    void (*free_ws)(void *p);
    // y (n, the tier's memory) = x (n, host float64) rounded to float: parameters in.
    void (*load_f64)(float *y, const double *x, size_t n);

    // --- elementwise (x, y, a, b, …: n elements; distinct buffers unless "in place") -------
    void (*zero)(float *p, size_t n);                                       // p = 0
    void (*add)(float *y, const float *a, const float *b, size_t n);        // y = a + b
    void (*acc)(float *y, const float *x, size_t n);                        // y += x
    void (*scale)(float *y, float alpha, const float *x, size_t n);         // y = α x
    void (*axpy)(float *y, float alpha, const float *x, size_t n);          // y = α x + y
    void (*mul)(float *y, const float *a, const float *b, size_t n);        // y = a ⊙ b
    // Backward of y = a ⊙ b: da = dy ⊙ b, db = dy ⊙ a (overwritten).
    void (*mul_bwd)(float *da, float *db, const float *dy, const float *a, const float *b,
                    size_t n);
    void (*sigmoid_inplace)(float *x, size_t n);                            // x = σ(x)
    // Backward of h = o ⊙ hn with o = σ(z): dz = dh ⊙ hn ⊙ o ⊙ (1 − o) (overwritten),
    // then dh = dh ⊙ o in place (the gradient of hn).
    void (*sigmoid_mul_bwd)(float *dz, float *dh, const float *hn, const float *o, size_t n);
    // The mLSTM gate cap (phax/numerics.h): y = cap(z) = c·tanh(z/c); its backward in place,
    // dy ← dy ⊙ (1 − tanh²(z/c)) (the derivative of cap at z).
    void (*gate_cap_fwd)(float *y, const float *z, size_t n);
    void (*gate_cap_bwd)(float *dy, const float *z, size_t n);

    // --- embedding, linear, norms, activations (n rows) -------------------------------------
    // x: (n, d) = E[tok] with E: (V, d); PHAX_ERR on a token outside [0, V).
    int (*embedding_fwd)(float *x, const float *E, const int32_t *tok, size_t n, int V, int d);
    void (*embedding_bwd)(float *dE, const float *dx, const int32_t *tok, size_t n, int d);
    // y: (n, out) = x (n, in) Wᵀ (W: (out, in)) + b (out) (b may be NULL).
    void (*linear_fwd)(float *y, const float *x, const float *W, const float *b, size_t n,
                       int in, int out);
    void (*linear_bwd)(float *dx, float *dW, float *db, const float *dy, const float *x,
                       const float *W, size_t n, int in, int out);
    // y, x: (n, d); g: (d).
    void (*rmsnorm_fwd)(float *y, const float *x, const float *g, size_t n, int d, double eps);
    void (*rmsnorm_bwd)(float *dx, float *dg, const float *dy, const float *x, const float *g,
                        size_t n, int d, double eps, void *ws);
    size_t (*rmsnorm_bwd_ws)(size_t n, int d);
    // y, x: (n, d); g, b: (d).
    void (*layernorm_fwd)(float *y, const float *x, const float *g, const float *b, size_t n,
                          int d, double eps);
    void (*layernorm_bwd)(float *dx, float *dg, float *db, const float *dy, const float *x,
                          const float *g, size_t n, int d, double eps, void *ws);
    size_t (*layernorm_bwd_ws)(size_t n, int d);
    // Per-head RMSNorm: y, x: (n, H, dh); g: (H·dh).
    void (*headnorm_fwd)(float *y, const float *x, const float *g, size_t n, int H, int dh,
                         double eps);
    void (*headnorm_bwd)(float *dx, float *dg, const float *dy, const float *x, const float *g,
                         size_t n, int H, int dh, double eps, void *ws);
    size_t (*headnorm_bwd_ws)(size_t n, int H, int dh);
    // Exact GELU x Φ(x), n elements.
    void (*gelu_fwd)(float *y, const float *x, size_t n);
    void (*gelu_bwd)(float *dx, const float *dy, const float *x, size_t n);
    // SiLU x σ(x), n elements; the backward ADDS dy ⊙ SiLU′(x) into dx.
    void (*silu_fwd)(float *y, const float *x, size_t n);
    void (*silu_bwd)(float *dx, const float *dy, const float *x, size_t n);

    // --- SwiGLU FFN, activations kept: y, x: (n, d); Wg, Wu: (hid, d); Wd: (d, hid) ---------
    size_t (*swiglu_keep_len)(size_t n, int hid);  // floats of `keep`: a, b
    size_t (*swiglu_fwd_keep_ws)(size_t n, int d, int hid);  // bytes of the forward's scratch (h)
    int (*swiglu_fwd_keep)(float *y, float *keep, const float *x, const float *Wg,
                           const float *Wu, const float *Wd, size_t n, int d, int hid, void *ws);
    int (*swiglu_bwd_kept)(float *dx, float *dWg, float *dWu, float *dWd, const float *dy,
                           const float *x, const float *Wg, const float *Wu, const float *Wd,
                           size_t n, int d, int hid, const float *keep, void *ws);
    size_t (*swiglu_bwd_kept_ws)(size_t n, int d, int hid);

    // --- PHA mix: m (n) = Σ_i softmax(p)_i b_i, b: (nb, n), p: (nb) -------------------------
    void (*mix_fwd)(float *m, const float *b, const float *p, int nb, size_t n);
    void (*mix_bwd)(float *db, float *dp, const float *dm, const float *b, const float *p,
                    int nb, size_t n);

    // --- losses: logits/x rows n, vocabulary V, targets −1 not counted ----------------------
    int (*cross_entropy_fwd)(float *loss, const float *logits, const int32_t *targets, size_t n,
                             int V);
    // Fused x (n, d) Wᵀ (W: (V, d)) and mean cross-entropy; with dx/dW: their gradients
    // scaled by dloss (added). No (n, V) logits.
    int (*linear_cross_entropy)(float *loss, float *dx, float *dW, float dloss, const float *x,
                                const float *W, const int32_t *targets, size_t n, int d, int V,
                                void *ws);
    int (*linear_cross_entropy_rows)(float *row_loss, const float *x, const float *W,
                                     const int32_t *targets, size_t n, int d, int V, void *ws);
    size_t (*linear_cross_entropy_ws)(size_t n, int d, int V);

    // --- attention: q, o: (B, T, Hq, dh); k, v: (B, T, Hkv, dh); stats: (B, Hq, T, 2) --------
    int (*attention_fwd)(float *o, float *lse, float *stats, const float *q, const float *k,
                         const float *v, const float *logscale, int B, int T,
                         const phax_attn_cfg *c, void *ws);
    int (*attention_bwd)(float *dq, float *dk, float *dv, float *dlogscale, const float *dout,
                         const float *o, const float *stats, const float *q, const float *k,
                         const float *v, const float *logscale, int B, int T,
                         const phax_attn_cfg *c, void *ws);
    size_t (*attention_fwd_ws)(int B, int T, const phax_attn_cfg *c, int nthreads);
    size_t (*attention_bwd_ws)(int B, int T, const phax_attn_cfg *c, int nthreads);

    // --- GSS: DSS kernel K: (H, T) from Λ, C: (H, N); convolution y, u: (B, T, H), D: (H) ---
    void (*dss_kernel_fwd)(float *K, const float *Lre, const float *Lim, const float *Cre,
                           const float *Cim, int H, int N, int T, void *ws);
    void (*dss_kernel_bwd)(float *dLre, float *dLim, float *dCre, float *dCim, const float *dK,
                           const float *Lre, const float *Lim, const float *Cre,
                           const float *Cim, int H, int N, int T, void *ws);
    size_t (*dss_kernel_fwd_ws)(int H, int N, int T);
    size_t (*dss_kernel_bwd_ws)(int H, int N, int T);
    // The convolution's plan for (B, T, H), opaque to the runner; NULL on failure.
    void *(*ssm_plan_new)(int B, int T, int H);
    void (*ssm_plan_free)(void *plan);
    int (*ssm_conv_fwd)(float *y, const float *u, const float *K, const float *D, int B, int T,
                        int H, const void *plan, void *ws);
    int (*ssm_conv_bwd)(float *du, float *dK, float *dD, const float *dy, const float *u,
                        const float *K, const float *D, int B, int T, int H, const void *plan,
                        void *ws);
    size_t (*ssm_conv_fwd_ws)(const void *plan);
    size_t (*ssm_conv_bwd_ws)(const void *plan);

    // --- mLSTM cell, chunkwise: q, k: (B, T, H, dqk); v, h: (B, T, H, dv); gates (B, T, H) ---
    int (*mlstm_fwd)(float *h, const float *q, const float *k, const float *v,
                     const float *igate, const float *fgate, int B, int T, int H, int dqk,
                     int dv, float eps, int chunk, const float *state_in, float *state_out,
                     void *ws);
    int (*mlstm_bwd)(float *dq, float *dk, float *dv_, float *digate, float *dfgate,
                     const float *dh, const float *q, const float *k, const float *v,
                     const float *igate, const float *fgate, int B, int T, int H, int dqk,
                     int dv, float eps, int chunk, void *ws);
    size_t (*mlstm_fwd_ws)(int B, int T, int H, int dqk, int dv, int chunk);
    size_t (*mlstm_bwd_ws)(int B, int T, int H, int dqk, int dv, int chunk);

    // --- Gated DeltaNet (phax/fcpu_gdn.h's contracts): the cell, chunkwise, q, k: (B, T, H, dk),
    // v, o: (B, T, H, dv), g, beta: (B, T, H), no initial state here; the layer's short
    // convolution x, y: (B, T, C), w: (C, K); its gates a, b, g, beta: (n, H). Backwards ADD. ---
    int (*gdn_fwd)(float *o, const float *q, const float *k, const float *v, const float *g, const float *beta,
                   int B, int T, int H, int dk, int dv, const phax_gdn_cfg *c, int chunk, void *ws);
    int (*gdn_bwd)(float *dq, float *dk_, float *dv_, float *dg, float *dbeta, const float *do_, const float *q,
                   const float *k, const float *v, const float *g, const float *beta, int B, int T, int H, int dk,
                   int dv, const phax_gdn_cfg *c, int chunk, void *ws);
    size_t (*gdn_fwd_ws)(int B, int T, int H, int dk, int dv, int chunk);
    size_t (*gdn_bwd_ws)(int B, int T, int H, int dk, int dv, int chunk);
    int (*gdn_conv_fwd)(float *y, const float *x, const float *w, int B, int T, int C, int K);
    int (*gdn_conv_bwd)(float *dx, float *dw, const float *dy, const float *x, const float *w, int B, int T, int C,
                        int K, void *ws);
    size_t (*gdn_conv_bwd_ws)(int B, int T, int C);
    int (*gdn_gates_fwd)(float *g, float *beta, const float *a, const float *b, const float *A_log,
                         const float *dt_bias, size_t n, int H);
    int (*gdn_gates_bwd)(float *da, float *db, float *dA_log, float *ddt_bias, const float *dg, const float *dbeta,
                         const float *a, const float *b, const float *A_log, const float *dt_bias, size_t n, int H);
} phax_f32_ops;

// The first function-pointer entry (every member from here to the end is one): for a
// completeness check over the table.
#define PHAX_F32_OPS_FIRST_FN alloc_ws

#ifdef __cplusplus
}
#endif

#endif
