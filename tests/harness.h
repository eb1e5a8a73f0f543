// The equivalence-test harness of the fast tiers: one relative error, one bound
// judge, float buffers, and the backend list that every per-op case table runs on.
//
//   * Buffers: testutil's tu_fbuf (guarded, NaN-poisoned) plus the helpers below.
//   * h_relerr: THE relative error, ‖a − ref‖/‖ref − base‖; NaN or inf anywhere
//     gives +inf, so a check written `!(err <= tol)` fails on it.
//   * h_pool + h_judge: THE bound (flash-attention's habit): pooled over a case's
//     draws, ‖fast − ref‖ ≤ C·‖naive32 − ref‖ + floor·‖scale‖, where naive32 is a
//     plain float32 evaluation of the same formula (tests/baseline_f32_*.c) and
//     scale the magnitudes a float evaluation cannot beat. The ratio fast/naive32
//     and the run's seed are printed with every verdict.
//   * h_elem_worst: derived elementwise bounds (gemm's Higham bound, AdamW's):
//     max |a − ref|/tol, NaN → +inf.
//   * Backends: h_backends[] (cpu, cuda_emu, cuda). H_TEST(family, name) defines
//     one test body and one Criterion test per backend, named <backend>_<family>/<name>;
//     a backend that cannot run here makes its test skipped with the reason
//     (cr_skip_test), never passed. Entry points take HOST pointers only: a
//     device backend copies in and out inside its entries.
#ifndef PHAX_TESTS_HARNESS_H
#define PHAX_TESTS_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "phax/core.h"
#include "phax/model.h"  // phax_model_cfg
#include "phax/ref.h"  // phax_attn_cfg, phax_adamw_cfg (the op contract's configs)
#include "testutil.h"

// --- constants of the bound ------------------------------------------------------------------
#define H_U32 0x1p-24              // float32 unit roundoff
#define H_C_FWD 2.0                // forward outputs (flash-attention's factor)
#define H_C_BWD 3.0                // gradients: chains of more rounded products
#define H_FLOOR (4.0 * H_U32)      // a few float32 roundings of the magnitudes

// --- float buffers (on top of tu_fbuf: guarded, payload NaN) --------------------------------
size_t h_flen(const float *p);
float *h_frand(size_t n, phax_rng *r, double scale);  // N(0, scale²) draws
float *h_fcopy(const float *x, size_t n);              // guarded copy
double *h_todbl(const float *x, size_t n);             // tu_buf of the same values, widened
void h_fpoison(float *p);                              // whole payload to NaN
void h_fzero(float *p);                                // whole payload to 0
bool h_fsame(const float *a, const float *b, size_t n);  // bit-identical
double *h_dabs(const double *x, size_t n);             // |x|, malloc'd
double *h_dzeros(size_t n);                            // calloc'd

// --- one relative error ----------------------------------------------------------------------
// A vector of either precision (h_vec{0}: the zero vector).
typedef struct {
    const float *f;
    const double *d;
} h_vec;
#define H_F(p) ((h_vec){.f = (p)})
#define H_D(p) ((h_vec){.d = (p)})
#define H_ZERO ((h_vec){0})
static inline double h_at(h_vec v, size_t i) { return v.f ? (double)v.f[i] : v.d ? v.d[i] : 0.0; }

// ‖a − ref‖/‖ref − base‖ (base H_ZERO: ‖ref‖); a zero denominator leaves ‖a − ref‖.
// +inf when a, ref or base holds NaN or inf.
double h_relerr(h_vec a, const double *ref, h_vec base, size_t n);

// --- one bound judge -------------------------------------------------------------------------
// Squared 2-norms of one output, pooled over draws.
typedef struct {
    double fast, naive;  // Σ (fast − ref)², Σ (naive32 − ref)²
    double add;          // Σ (ref − prior)²: what the op computed
    double scale;        // Σ scale²
    double scale0;       // Σ scale0² (the scale where ref − prior is 0 everywhere)
    bool have_scale0;
    double extra;        // added to the tolerance as it is (absolute): e.g. the rounding
                         // u·‖result‖ of a final addition into a prior
    bool nonfinite;      // NaN or inf in fast, naive32, ref or prior
} h_sums;

// Adds one draw. prior: what an accumulating output held before the call (H_ZERO
// for overwritten outputs), so a gradient is judged on what was added. scale:
// the per-element floor scale (NULL: |ref|); scale0: used instead when ref − prior
// is 0 everywhere (NULL: an absolute floor of 1).
void h_pool(h_sums *s, h_vec fast, h_vec naive, const double *ref, h_vec prior,
            const double *scale, const double *scale0, size_t n);

// ‖fast − ref‖ ≤ C·‖naive32 − ref‖ + floor·‖scale‖ + extra, false on anything non-finite.
// A caller may set s->naive to a combined baseline before judging (the mean square of
// two naive draws, or max with the error an inherited input brings; see test_fast_ssm.c).
// Prints label, what, both errors relative to ‖ref − prior‖, the floor, the ratio
// fast/naive32 and the seed; records the worst ratio (h_report_worst).
bool h_judge(const char *label, const char *what, const h_sums *s, double C, double floor);

// Verdict lines: every judge prints its line (the default), or with h_verbose(0) only
// failures (for tests with thousands of checks; PHAX_TEST_VERBOSE=1 prints all anyway).
void h_verbose(int on);

// One draw, judged at once (h_pool + h_judge with floor H_FLOOR).
bool h_bound(const char *label, const char *what, h_vec fast, h_vec naive, const double *ref,
             h_vec prior, const double *scale, size_t n, double C);

// The judge when the baseline is measured elsewhere, as a relative error base_rel (the
// effect of a one-ulp perturbation of the parameters; naive32 against another form):
// ‖fast − ref‖ ≤ (C·base_rel + floor)·‖ref‖ + extra (‖ref‖ read as 1 where ref = 0).
bool h_bound_rel(const char *label, const char *what, h_vec fast, const double *ref, size_t n,
                 double C, double base_rel, double floor, double extra);

// Prints and resets the worst fast/naive32 ratios seen (forward C_FWD, gradients others).
void h_report_worst(const char *name);

// --- derived elementwise bounds --------------------------------------------------------------
// max_i |a_i − ref_i|/tol_i (tol_i ≤ 0 is read as 1e-300); +inf on NaN or inf.
double h_elem_worst(h_vec a, const double *ref, const double *tol, size_t n);

// --- backends --------------------------------------------------------------------------------
// Every entry has the signature and contract of its fcpu_ counterpart (phax/fcpu.h:
// forward overwrites, backward adds, NULL skips, _ws sizes in bytes), on host memory.
typedef struct {
    // C = alpha·op(A)·op(B) + beta·C, row-major; ta/tb: op = transpose.
    void (*sgemm)(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc);
} h_gemm_ops;

typedef struct {
    size_t (*fwd_ws)(int B, int T, const phax_attn_cfg *c, int nthreads);
    size_t (*bwd_ws)(int B, int T, const phax_attn_cfg *c, int nthreads);
    int (*fwd)(float *o, float *lse, float *stats, const float *q, const float *k, const float *v,
               const float *logscale, int B, int T, const phax_attn_cfg *c, void *ws);
    int (*bwd)(float *dq, float *dk, float *dv, float *dlogscale, const float *dout, const float *o,
               const float *stats, const float *q, const float *k, const float *v,
               const float *logscale, int B, int T, const phax_attn_cfg *c, void *ws);
} h_attention_ops;

typedef struct {  // fcpu_adamw_param's fields
    float *p;        // parameter (updated in place)
    const float *g;  // its gradient
    float *m, *v;    // moments
    size_t n;
    int decay;       // 1: weight decay on this tensor
} h_adamw_param;

// The small ops, one struct per op family (the stems of ref/, fast/cpu/ and tests/test_fast_*.c).
typedef struct {
    int (*fwd)(float *x, const float *E, const int32_t *tok, size_t n, int V, int d);
    void (*bwd)(float *dE, const float *dx, const int32_t *tok, size_t n, int d);
} h_embedding_ops;

typedef struct {
    void (*fwd)(float *y, const float *x, const float *W, const float *b, size_t n, int in, int out);
    void (*bwd)(float *dx, float *dW, float *db, const float *dy, const float *x, const float *W, size_t n,
                int in, int out);
} h_linear_ops;

typedef struct {
    void (*rmsnorm_fwd)(float *y, const float *x, const float *g, size_t n, int d, double eps);
    size_t (*rmsnorm_bwd_ws)(size_t n, int d);
    void (*rmsnorm_bwd)(float *dx, float *dg, const float *dy, const float *x, const float *g,
                        size_t n, int d, double eps, void *ws);
    void (*layernorm_fwd)(float *y, const float *x, const float *g, const float *b, size_t n, int d,
                          double eps);
    size_t (*layernorm_bwd_ws)(size_t n, int d);
    void (*layernorm_bwd)(float *dx, float *dg, float *db, const float *dy, const float *x,
                          const float *g, size_t n, int d, double eps, void *ws);
    void (*headnorm_fwd)(float *y, const float *x, const float *g, size_t n, int H, int dh,
                         double eps);
    size_t (*headnorm_bwd_ws)(size_t n, int H, int dh);
    void (*headnorm_bwd)(float *dx, float *dg, const float *dy, const float *x, const float *g,
                         size_t n, int H, int dh, double eps, void *ws);
} h_norm_ops;

typedef struct {
    void (*gelu_fwd)(float *y, const float *x, size_t n);
    void (*gelu_bwd)(float *dx, const float *dy, const float *x, size_t n);
    void (*silu_fwd)(float *y, const float *x, size_t n);
    void (*silu_bwd)(float *dx, const float *dy, const float *x, size_t n);
} h_activation_ops;

typedef struct {  // the SwiGLU FFN
    size_t (*swiglu_fwd_ws)(size_t n, int d, int hid);
    int (*swiglu_fwd)(float *y, const float *x, const float *Wg, const float *Wu, const float *Wd,
                      size_t n, int d, int hid, void *ws);
    size_t (*swiglu_bwd_ws)(size_t n, int d, int hid);
    int (*swiglu_bwd)(float *dx, float *dWg, float *dWu, float *dWd, const float *dy,
                      const float *x, const float *Wg, const float *Wu, const float *Wd, size_t n,
                      int d, int hid, void *ws);
    size_t (*swiglu_keep_len)(size_t n, int hid);
    size_t (*swiglu_fwd_keep_ws)(size_t n, int d, int hid);
    int (*swiglu_fwd_keep)(float *y, float *keep, const float *x, const float *Wg, const float *Wu,
                           const float *Wd, size_t n, int d, int hid, void *ws);
    size_t (*swiglu_bwd_kept_ws)(size_t n, int d, int hid);
    int (*swiglu_bwd_kept)(float *dx, float *dWg, float *dWu, float *dWd, const float *dy,
                           const float *x, const float *Wg, const float *Wu, const float *Wd,
                           size_t n, int d, int hid, const float *keep, void *ws);
} h_ffn_ops;

typedef struct {
    size_t (*table_len)(int T, int dh);
    int (*table)(float *cs, int T, int dh, double base, long pos0);
    int (*fwd)(float *y, const float *x, int B, int T, int H, int dh, double base, long pos0, const float *cs);
    int (*bwd)(float *dx, const float *dy, int B, int T, int H, int dh, double base, long pos0, const float *cs);
} h_rope_ops;

typedef struct {  // PHA's softplus mix
    void (*fwd)(float *m, const float *b, const float *p, int nb, size_t n);
    void (*bwd)(float *db, float *dp, const float *dm, const float *b, const float *p, int nb, size_t n);
} h_mix_ops;

typedef struct {  // cross-entropy, alone and fused with the output projection
    int (*cross_entropy_fwd)(float *loss, const float *logits, const int32_t *targets, size_t n,
                             int V);
    int (*cross_entropy_bwd)(float *dlogits, float dloss, const float *logits,
                             const int32_t *targets, size_t n, int V);
    int (*cross_entropy_fwd_bwd)(float *loss, float *dlogits, float dloss, const float *logits,
                                 const int32_t *targets, size_t n, int V);
    size_t (*lce_tile_rows)(int V);
    size_t (*linear_cross_entropy_ws)(size_t n, int d, int V);
    int (*linear_cross_entropy)(float *loss, float *dx, float *dW, float dloss, const float *x,
                                const float *W, const int32_t *targets, size_t n, int d, int V,
                                void *ws);
} h_loss_ops;

typedef struct {
    int (*step)(h_adamw_param *ps, int nparams, const phax_adamw_cfg *c, long step, double *gnorm);
} h_adamw_ops;

// SSM: the DSS kernel and the convolution. A plan is the backend's own (opaque);
// method H_SSM_FFT or H_SSM_DIRECT (H_SSM_AUTO: the backend picks).
enum { H_SSM_AUTO = 0, H_SSM_FFT = 1, H_SSM_DIRECT = 2 };
typedef struct {
    size_t (*kernel_fwd_ws)(int H, int N, int T);
    void (*kernel_fwd)(float *K, const float *Lre, const float *Lim, const float *Cre,
                       const float *Cim, int H, int N, int T, void *ws);
    size_t (*kernel_bwd_ws)(int H, int N, int T);
    void (*kernel_bwd)(float *dLre, float *dLim, float *dCre, float *dCim, const float *dK,
                       const float *Lre, const float *Lim, const float *Cre, const float *Cim,
                       int H, int N, int T, void *ws);
    void *(*plan_new)(int B, int T, int H, int method);
    void (*plan_free)(void *plan);
    int (*plan_method)(const void *plan);   // H_SSM_FFT or H_SSM_DIRECT
    int (*plan_fft_len)(const void *plan);  // 0 for the direct method
    size_t (*conv_fwd_ws)(const void *plan);
    size_t (*conv_bwd_ws)(const void *plan);
    int (*conv_fwd)(float *y, const float *u, const float *K, const float *D, int B, int T, int H,
                    const void *plan, void *ws);
    int (*conv_bwd)(float *du, float *dK, float *dD, const float *dy, const float *u,
                    const float *K, const float *D, int B, int T, int H, const void *plan,
                    void *ws);
} h_ssm_ops;

// mLSTM, chunkwise. state: state_len(dqk, dv) floats per (b, h): [C (dqk×dv) | n (dqk) | m].
typedef struct {
    size_t (*state_len)(int dqk, int dv);
    size_t (*fwd_ws)(int B, int T, int H, int dqk, int dv, int chunk);
    int (*fwd)(float *h, const float *q, const float *k, const float *v, const float *igate,
               const float *fgate, int B, int T, int H, int dqk, int dv, float eps, int chunk,
               const float *state_in, float *state_out, void *ws);
    size_t (*bwd_ws)(int B, int T, int H, int dqk, int dv, int chunk);
    int (*bwd)(float *dq, float *dk, float *dv_, float *digate, float *dfgate, const float *dh,
               const float *q, const float *k, const float *v, const float *igate,
               const float *fgate, int B, int T, int H, int dqk, int dv, float eps, int chunk,
               void *ws);
} h_mlstm_ops;

// Gated DeltaNet, chunkwise: fcpu_gdn_chunkwise_*'s contract (phax/fcpu_gdn.h).
typedef struct {
    size_t (*fwd_ws)(int B, int T, int H, int dk, int dv, int chunk);
    int (*fwd)(float *o, float *sT, const float *q, const float *k, const float *v, const float *g,
               const float *beta, const float *s0, int B, int T, int H, int dk, int dv,
               const phax_gdn_cfg *c, int chunk, void *ws);
    size_t (*bwd_ws)(int B, int T, int H, int dk, int dv, int chunk);
    int (*bwd)(float *dq, float *dk_, float *dv_, float *dg, float *dbeta, float *ds0, const float *do_,
               const float *dsT, const float *q, const float *k, const float *v, const float *g,
               const float *beta, const float *s0, int B, int T, int H, int dk, int dv,
               const phax_gdn_cfg *c, int chunk, void *ws);
    // the layer's short convolution: fcpu_gdn_conv_*'s contract
    int (*conv_fwd)(float *y, const float *x, const float *w, int B, int T, int C, int K);
    size_t (*conv_bwd_ws)(int B, int T, int C);
    int (*conv_bwd)(float *dx, float *dw, const float *dy, const float *x, const float *w, int B, int T, int C, int K,
                    void *ws);
    // the layer's gates: fcpu_gdn_gates_*'s contract
    int (*gates_fwd)(float *g, float *beta, const float *a, const float *b, const float *A_log, const float *dt_bias,
                     size_t n, int H);
    int (*gates_bwd)(float *da, float *db, float *dA_log, float *ddt_bias, const float *dg, const float *dbeta,
                     const float *a, const float *b, const float *A_log, const float *dt_bias, size_t n, int H);
} h_gdn_ops;

// Whole models (phax/model.h configs). A model and a workspace are the backend's own
// (opaque); parameters and gradients cross as host float arrays of numel(m) values in
// the layout's order.
typedef struct {
    void *(*new_model)(const phax_model_cfg *cfg, uint64_t seed);  // NULL on error
    void (*free_model)(void *m);
    size_t (*numel)(const void *m);
    void (*set_params_f64)(void *m, const double *params);
    void (*get_params)(const void *m, float *out);
    void (*set_params)(void *m, const float *in);
    void (*get_grads)(const void *m, float *out);
    void (*zero_grad)(void *m);
    void *(*ws_new)(const void *m, int B, int T);  // NULL on error
    void (*ws_free)(void *ws);
    int (*forward)(const void *m, void *ws, const int32_t *tokens, const int32_t *targets,
                   int window, float *logits, double *loss);
    int (*token_losses)(const void *m, void *ws, const int32_t *tokens, const int32_t *targets,
                        int window, float *rows);
    int (*backward)(void *m, void *ws, const int32_t *tokens, const int32_t *targets, int window,
                    double *loss);
} h_model_ops;

// Per-token decoding of a model made by h_model_ops.new_model (opaque decoder).
typedef struct {
    void *(*new_decoder)(const void *model, int max_len, int window);  // NULL on error
    void *(*new_chunked)(const void *model, int max_len, int window, int chunk);
    void (*free_decoder)(void *d);
    void (*reset)(void *d);
    int (*pos)(const void *d);
    int (*step)(void *d, int32_t token, float *logits);
    int (*prefill)(void *d, const int32_t *tokens, int n, float *logits);
    int (*prefill_all)(void *d, const int32_t *tokens, int n, float *logits);
    int chunk_max;  // the longest prefill pass new_chunked takes
} h_decode_ops;

typedef struct {
    const char *name;  // "cpu"; the Criterion suites are <name>_<family>
    // NULL when the backend can run here, else why not (e.g. "no CUDA device").
    const char *(*unavailable)(void);
    // Tests ("family/name") that do not apply to this backend, each followed by why, NULL-
    // terminated pairs (e.g. an OpenMP thread-count test on a device): skipped with that reason.
    const char *const *not_applicable;
    // Sets the number of host threads a kernel may use (tests of thread-count
    // independence); NULL where that has no meaning.
    void (*set_threads)(int n);
    int (*get_threads)(void);
    h_gemm_ops gemm;
    h_attention_ops attention;
    h_embedding_ops embedding;
    h_linear_ops linear;
    h_norm_ops norm;
    h_activation_ops activation;
    h_ffn_ops ffn;
    h_rope_ops rope;
    h_mix_ops mix;
    h_loss_ops loss;
    h_adamw_ops adamw;
    h_ssm_ops ssm;
    h_mlstm_ops mlstm;
    h_gdn_ops gdn;
    h_model_ops model;
    h_decode_ops decode;
} h_backend;

// The backend list. Keep it in step with `test_backends` in meson.build (the test
// harness/backend_list checks that) and with H_BACKENDS below.
extern const h_backend *const h_backends[];
extern const int h_nbackends;
const h_backend *h_backend_named(const char *name);

// Runs body on the named backend, or skips the test with the backend's reason (also
// for backends listed in PHAX_TEST_UNAVAILABLE=name,...); meson then shows SKIP.
void h_run(const char *backend, const char *test, void (*body)(const h_backend *));

#define H_BACKENDS(X, fam, name) X(cpu, fam, name) X(cuda_emu, fam, name) X(cuda, fam, name)
#define H_TEST_ON(be, fam, name) \
    Test(be##_##fam, name) { h_run(#be, #be "_" #fam "/" #name, h_body_##fam##_##name); }
// H_TEST(attention, cosine) { ... uses `be` ... }: one body, a Criterion test per backend.
// The line must start with "H_TEST(" (meson.build registers each from the source).
#define H_TEST(fam, name)                                         \
    static void h_body_##fam##_##name(const h_backend *be);       \
    H_BACKENDS(H_TEST_ON, fam, name)                              \
    static void h_body_##fam##_##name(const h_backend *be)

#endif
