// fast/cuda: the float32 ops on an NVIDIA GPU (fast/cuda/<stem>.cu; semantics: ref/, the
// contract of fast/cpu's phax/fcpu_<stem>.h; docs/cuda.md).
//
// Every op has fast/cpu's signature and contract (forward overwrites, backward ADDS into its
// gradients, NULL skips a gradient, _ws sizes in bytes), with three differences:
//   * every pointer, workspaces included, is DEVICE memory (fcuda_malloc);
//   * a last argument `stream` (a cudaStream_t; NULL: the default stream);
//   * an int result: PHAX_OK, or PHAX_ERR with phax_error() naming the op and the CUDA
//     error (a failed launch, a kernel fault). Nothing exits.
// Each entry point exists twice: fcuda_<op> in the real library (phax_cuda, built when
// nvcc is found) and fcuda_emu_<op> in phax_cuda_emu (the same sources compiled as C++
// for the CPU emulation of the CUDA model, fast/cuda/emu/; always built, for the tests).
// The declarations below are the device's names; phax/fcuda_emu.h declares them again
// under the emulator's (phax/fcuda_emu_names.h maps each name), so they sit outside the
// include guard.
#ifndef PHAX_FCUDA_H
#define PHAX_FCUDA_H

#include <stddef.h>
#include <stdint.h>

#include "phax/ops.h"  // phax_adamw_cfg

#ifdef __cplusplus
extern "C" {
#endif

// One tensor of fcuda_adamw_step (device pointers in a host array; fcpu_adamw_param's fields).
typedef struct {
    float *p;        // parameter (updated in place)
    const float *g;  // its gradient (not modified)
    float *m, *v;    // moments (updated in place, zero at start)
    size_t n;
    int decay;  // 1: weight decay on this tensor
} fcuda_adamw_param;

// The SSM convolution's plan (fast/cuda/ssm.cu): (B, T, H), the method and cuFFT's plans.
typedef struct fcuda_ssm_plan fcuda_ssm_plan;
enum { FCUDA_SSM_AUTO = 0, FCUDA_SSM_FFT = 1, FCUDA_SSM_DIRECT = 2 };  // fcpu's FCPU_SSM_* values

struct phax_f32_ops;  // phax/f32_ops.h

// The emulator's scheduling order (fast/cuda/emu/emu.cpp): the order in which the runnable
// threads of a block are resumed on each pass. The environment variable
// PHAX_CUDA_EMU_ORDER=forward|reverse|shuffle[:seed] sets the initial one.
enum { PHAX_CUDA_EMU_FORWARD = 0, PHAX_CUDA_EMU_REVERSE = 1, PHAX_CUDA_EMU_SHUFFLE = 2 };
void phax_cuda_emu_set_order(int mode, uint64_t seed);
int phax_cuda_emu_order(void);
// Fiber switches by ucontext (on: 1) or, on x86-64, by the emulator's own register switch (0,
// the default; PHAX_CUDA_EMU_SWITCH=ucontext sets 1). Returns the switch now in use (1:
// ucontext), or -1 from inside a launch.
int phax_cuda_emu_use_ucontext(int on);

#ifdef __cplusplus
}
#endif

#endif

// --- the entry points (declared once per naming: see above) -----------------------------------
#ifdef __cplusplus
extern "C" {
#endif

// the op table of the shared fast model runner (fast/cuda/f32_ops.cu): device arrays;
// tokens, targets and scalar losses on the host. ops_error: the first failure of a void
// entry since the last call (PHAX_ERR with its message), then cleared
const struct phax_f32_ops *fcuda_f32_ops(void);
int fcuda_ops_error(void);
// device memory and copies (bytes); sync waits for the stream
int fcuda_malloc(void **p, size_t bytes);
int fcuda_free(void *p);
int fcuda_upload(void *dst, const void *src, size_t bytes, void *stream);
int fcuda_download(void *dst, const void *src, size_t bytes, void *stream);
int fcuda_sync(void *stream);
int fcuda_copy(void *dst, const void *src, size_t bytes, void *stream);  // device to device
// bytes allocated by fcuda_malloc now and at the peak since the last reset (not cuBLAS's or
// cuFFT's own workspaces)
void fcuda_mem_stats(size_t *now, size_t *peak);
void fcuda_mem_reset_peak(void);
// embedding: x (n, d) = E[tok]; E (V, d); tok (n) int32 on the device. A token outside
// [0, V) fails before anything is written (the call syncs its stream to read the check).
// Backward dE += scatter of dx rows by atomicAdd (order of repeated tokens not fixed).
int fcuda_embedding_fwd(float *x, const float *E, const int32_t *tok, size_t n, int V, int d,
                        void *stream);
int fcuda_embedding_bwd(float *dE, const float *dx, const int32_t *tok, size_t n, int d,
                        void *stream);
// norm: rmsnorm over the last dim; x, y: (n, d), g: (d)
int fcuda_rmsnorm_fwd(float *y, const float *x, const float *g, size_t n, int d, double eps,
                      void *stream);
// ws (device) only when dg is requested
size_t fcuda_rmsnorm_bwd_ws(size_t n, int d);
int fcuda_rmsnorm_bwd(float *dx, float *dg, const float *dy, const float *x, const float *g,
                      size_t n, int d, double eps, void *ws, void *stream);
// layernorm over the last dim (bias b may be NULL); headnorm: a LayerNorm without bias of
// each head's slice of x (n, H·dh), g (H·dh). ws (device) only when dg or db is requested
int fcuda_layernorm_fwd(float *y, const float *x, const float *g, const float *b, size_t n, int d,
                        double eps, void *stream);
size_t fcuda_layernorm_bwd_ws(size_t n, int d);
int fcuda_layernorm_bwd(float *dx, float *dg, float *db, const float *dy, const float *x,
                        const float *g, size_t n, int d, double eps, void *ws, void *stream);
int fcuda_headnorm_fwd(float *y, const float *x, const float *g, size_t n, int H, int dh,
                       double eps, void *stream);
size_t fcuda_headnorm_bwd_ws(size_t n, int H, int dh);
int fcuda_headnorm_bwd(float *dx, float *dg, const float *dy, const float *x, const float *g,
                       size_t n, int H, int dh, double eps, void *ws, void *stream);
// activation: elementwise, n elements; gelu the exact erf form x Φ(x)
int fcuda_gelu_fwd(float *y, const float *x, size_t n, void *stream);
int fcuda_gelu_bwd(float *dx, const float *dy, const float *x, size_t n, void *stream);
int fcuda_silu_fwd(float *y, const float *x, size_t n, void *stream);
int fcuda_silu_bwd(float *dx, const float *dy, const float *x, size_t n, void *stream);
// linear: y = x Wᵀ + b on cuBLAS; x (n, in), W (out, in), b (out) or NULL, y (n, out);
// backward dx += dy W, dW += dyᵀ x, db += column sums of dy (NULL skips)
int fcuda_linear_fwd(float *y, const float *x, const float *W, const float *b, size_t n, int in,
                     int out, void *stream);
int fcuda_linear_bwd(float *dx, float *dW, float *db, const float *dy, const float *x,
                     const float *W, size_t n, int in, int out, void *stream);
// the compute type of every cuBLAS product: FP32 (0, the default) or TF32 (1, the
// tensor cores' 10-bit mantissa inputs); returns the previous setting
int fcuda_gemm_tf32(int on);
// sgemm: row-major C (M, N) = alpha op(A) op(B) + beta C on cuBLAS, fcpu_sgemm's
// convention (ta/tb nonzero: transposed; lda/ldb/ldc row strides)
int fcuda_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                const float *B, int ldb, float beta, float *C, int ldc, void *stream);
// rope: rotate-half RoPE on x, y (B, T, H, dh) (y may be x); cs: the (2, T, dh/2) cos/sin
// table of rope_table (device, rope_table_len floats) or NULL (evaluated per element,
// the same bits). Backward dx += Rᵀ dy. dh odd or a negative size: PHAX_ERR.
size_t fcuda_rope_table_len(int T, int dh);
int fcuda_rope_table(float *cs, int T, int dh, double base, long pos0, void *stream);
int fcuda_rope_fwd(float *y, const float *x, int B, int T, int H, int dh, double base, long pos0,
                   const float *cs, void *stream);
int fcuda_rope_bwd(float *dx, const float *dy, int B, int T, int H, int dh, double base,
                   long pos0, const float *cs, void *stream);
// mix: m (n) = Σ_i w_i b_i, w = softplus(p)/Σ softplus(p); b (nb, n), p (nb). Backward
// db += w dm, dp += σ(p)(dw − w·dw)/S, dw_i = Σ_e dm_e b_ie in double over fixed chunks
// (ws: mix_bwd_ws bytes, needed for dp)
int fcuda_mix_fwd(float *m, const float *b, const float *p, int nb, size_t n, void *stream);
size_t fcuda_mix_bwd_ws(int nb, size_t n);
int fcuda_mix_bwd(float *db, float *dp, const float *dm, const float *b, const float *p, int nb,
                  size_t n, void *ws, void *stream);
// swiglu: y = Wd(SiLU(Wg x) ⊙ Wu x) (fcpu_ffn.h's shapes and pairs): products on cuBLAS;
// the kept form stores (a, b) in keep (swiglu_keep_len floats) for its backward and makes h
// in ws (swiglu_fwd_keep_ws bytes; the backward makes it again)
size_t fcuda_swiglu_fwd_ws(size_t n, int d, int hid);
int fcuda_swiglu_fwd(float *y, const float *x, const float *Wg, const float *Wu, const float *Wd,
                     size_t n, int d, int hid, void *ws, void *stream);
size_t fcuda_swiglu_bwd_ws(size_t n, int d, int hid);
int fcuda_swiglu_bwd(float *dx, float *dWg, float *dWu, float *dWd, const float *dy,
                     const float *x, const float *Wg, const float *Wu, const float *Wd, size_t n,
                     int d, int hid, void *ws, void *stream);
size_t fcuda_swiglu_keep_len(size_t n, int hid);
size_t fcuda_swiglu_fwd_keep_ws(size_t n, int d, int hid);
int fcuda_swiglu_fwd_keep(float *y, float *keep, const float *x, const float *Wg,
                          const float *Wu, const float *Wd, size_t n, int d, int hid,
                          void *ws, void *stream);
size_t fcuda_swiglu_bwd_kept_ws(size_t n, int d, int hid);
int fcuda_swiglu_bwd_kept(float *dx, float *dWg, float *dWu, float *dWd, const float *dy,
                          const float *x, const float *Wg, const float *Wu, const float *Wd,
                          size_t n, int d, int hid, const float *keep, void *ws, void *stream);
// cross_entropy (target −1 ignored; a target outside [−1, V) or only ignored rows:
// PHAX_ERR, nothing written; the targets are checked first, a 16-byte read back): loss a
// device float; dlogits += dloss (softmax − onehot)/count; ws: cross_entropy_ws() bytes
size_t fcuda_cross_entropy_ws(void);
int fcuda_cross_entropy_fwd(float *loss, const float *logits, const int32_t *targets, size_t n,
                            int V, void *ws, void *stream);
int fcuda_cross_entropy_bwd(float *dlogits, float dloss, const float *logits,
                            const int32_t *targets, size_t n, int V, void *ws, void *stream);
int fcuda_cross_entropy_fwd_bwd(float *loss, float *dlogits, float dloss, const float *logits,
                                const int32_t *targets, size_t n, int V, void *ws, void *stream);
// linear_cross_entropy: logits = x Wᵀ never formed whole: lce_tile_rows(V) rows at a
// time in ws (linear_cross_entropy_ws bytes); loss (device), dx += G W, dW += Gᵀ x
size_t fcuda_lce_tile_rows(int V);
size_t fcuda_linear_cross_entropy_ws(size_t n, int d, int V);
// per-row losses (row_loss (n), device; 0 where the target is −1), the same ws
int fcuda_linear_cross_entropy_rows(float *row_loss, const float *x, const float *W,
                                    const int32_t *targets, size_t n, int d, int V, void *ws,
                                    void *stream);
int fcuda_linear_cross_entropy(float *loss, float *dx, float *dW, float dloss, const float *x,
                               const float *W, const int32_t *targets, size_t n, int d, int V,
                               void *ws, void *stream);
// dss kernel (the GSS layer's K = dss(Λ, C)): Lre, Lim (N); Cre, Cim (H, N); K (H, T);
// backward adds into dLre, dLim, dCre, dCim (any may be NULL); ws: _ws bytes
size_t fcuda_dss_kernel_fwd_ws(int H, int N, int T);
int fcuda_dss_kernel_fwd(float *K, const float *Lre, const float *Lim, const float *Cre,
                         const float *Cim, int H, int N, int T, void *ws, void *stream);
size_t fcuda_dss_kernel_bwd_ws(int H, int N, int T);
int fcuda_dss_kernel_bwd(float *dLre, float *dLim, float *dCre, float *dCim, const float *dK,
                         const float *Lre, const float *Lim, const float *Cre, const float *Cim,
                         int H, int N, int T, void *ws, void *stream);
// attention: fcpu_attention's contract (phax/fcpu_attention.h; q, o (B, T, Hq, dh|dv),
// k, v (B, T, Hkv, dh|dv), stats (B, Hq, T, 2)); head dims up to 256 whose tiles fit 48 KiB
// of shared memory; ws: _ws(B, T, c) bytes
size_t fcuda_attention_fwd_ws(int B, int T, const phax_attn_cfg *c);
size_t fcuda_attention_bwd_ws(int B, int T, const phax_attn_cfg *c);
int fcuda_attention_fwd(float *o, float *lse, float *stats, const float *q, const float *k,
                        const float *v, const float *logscale, int B, int T,
                        const phax_attn_cfg *c, void *ws, void *stream);
int fcuda_attention_bwd(float *dq, float *dk, float *dv, float *dlogscale, const float *dout,
                        const float *o, const float *stats, const float *q, const float *k,
                        const float *v, const float *logscale, int B, int T,
                        const phax_attn_cfg *c, void *ws, void *stream);
// mlstm: fcpu_mlstm_chunkwise_*'s contract (phax/fcpu_mlstm.h): q, k (B, T, H, dqk), v,
// h (B, T, H, dv), gates (B, T, H), state records (B, H, FCPU_MLSTM_STATE_LEN); ws: _ws
size_t fcuda_mlstm_fwd_ws(int B, int T, int H, int dqk, int dv, int chunk);
int fcuda_mlstm_fwd(float *h, const float *q, const float *k, const float *v, const float *igate,
                    const float *fgate, int B, int T, int H, int dqk, int dv, float eps,
                    int chunk, const float *state_in, float *state_out, void *ws, void *stream);
size_t fcuda_mlstm_bwd_ws(int B, int T, int H, int dqk, int dv, int chunk);
int fcuda_mlstm_bwd(float *dq, float *dk, float *dv_, float *digate, float *dfgate,
                    const float *dh, const float *q, const float *k, const float *v,
                    const float *igate, const float *fgate, int B, int T, int H, int dqk, int dv,
                    float eps, int chunk, void *ws, void *stream);
// gdn: fcpu_gdn_chunkwise_*'s contract (phax/fcpu_gdn.h): q, k (B, T, H, dk), v, o (B, T, H, dv),
// g, beta (B, T, H), states s0, sT (B, H, dk, dv) (NULL: zero / not wanted); gradients ADDED (any
// NULL); chunk ≤ 0: FCPU_GDN_CHUNK; ws: _ws bytes for the same sizes and chunk.
size_t fcuda_gdn_fwd_ws(int B, int T, int H, int dk, int dv, int chunk);
int fcuda_gdn_fwd(float *o, float *sT, const float *q, const float *k, const float *v, const float *g,
                  const float *beta, const float *s0, int B, int T, int H, int dk, int dv,
                  const phax_gdn_cfg *c, int chunk, void *ws, void *stream);
size_t fcuda_gdn_bwd_ws(int B, int T, int H, int dk, int dv, int chunk);
int fcuda_gdn_bwd(float *dq, float *dk_, float *dv_, float *dg, float *dbeta, float *ds0, const float *do_,
                  const float *dsT, const float *q, const float *k, const float *v, const float *g,
                  const float *beta, const float *s0, int B, int T, int H, int dk, int dv,
                  const phax_gdn_cfg *c, int chunk, void *ws, void *stream);
// gdn conv: fcpu_gdn_conv_*'s contract (the GDN layer's short convolution): x, y, dx, dy (B, T, C),
// w, dw (C, K); gradients ADDED (either NULL); ws: fcuda_gdn_conv_bwd_ws bytes (da, formed once).
int fcuda_gdn_conv_fwd(float *y, const float *x, const float *w, int B, int T, int C, int K, void *stream);
size_t fcuda_gdn_conv_bwd_ws(int B, int T, int C);
int fcuda_gdn_conv_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, int B, int T, int C,
                       int K, void *ws, void *stream);
// gdn gates: fcpu_gdn_gates_*'s contract: a, b, g, beta (n, H), A_log, dt_bias (H); gradients ADDED.
int fcuda_gdn_gates_fwd(float *g, float *beta, const float *a, const float *b, const float *A_log,
                        const float *dt_bias, size_t n, int H, void *stream);
int fcuda_gdn_gates_bwd(float *da, float *db, float *dA_log, float *ddt_bias, const float *dg, const float *dbeta,
                        const float *a, const float *b, const float *A_log, const float *dt_bias, size_t n, int H,
                        void *stream);
// ssm conv: fcpu_ssm_conv's contract (phax/fcpu_ssm.h): y, u (B, T, H), K (H, T), D (H);
// a plan per (B, T, H) (host object; NULL with phax_error() on bad shapes); ws: _ws(plan)
// bytes, 16-byte aligned. A call off its plan's shape fails, writing (adding) NaN
fcuda_ssm_plan *fcuda_ssm_plan_new(int B, int T, int H, int method);
void fcuda_ssm_plan_free(fcuda_ssm_plan *p);
int fcuda_ssm_plan_method(const fcuda_ssm_plan *p);
int fcuda_ssm_plan_fft_len(const fcuda_ssm_plan *p);
size_t fcuda_ssm_conv_fwd_ws(const fcuda_ssm_plan *p);
size_t fcuda_ssm_conv_bwd_ws(const fcuda_ssm_plan *p);
int fcuda_ssm_conv_fwd(float *y, const float *u, const float *K, const float *D, int B, int T,
                       int H, const fcuda_ssm_plan *p, void *ws, void *stream);
int fcuda_ssm_conv_bwd(float *du, float *dK, float *dD, const float *dy, const float *u,
                       const float *K, const float *D, int B, int T, int H,
                       const fcuda_ssm_plan *p, void *ws, void *stream);
// adamw: one step of AdamW with global-norm clipping over every tensor of ps (fcpu's
// rules); the norm comes back to *gnorm (a stream sync); NaN/inf norm: PHAX_ERR, nothing
// written. ws: adamw_ws(nparams) bytes of device memory
size_t fcuda_adamw_ws(int nparams);
int fcuda_adamw_step(const fcuda_adamw_param *ps, int nparams, const phax_adamw_cfg *c,
                     long step, double *gnorm, void *ws, void *stream);

#ifdef __cplusplus
}
#endif
