// fast/cuda's op table (phax/f32_ops.h): fast/cuda's kernels behind the entries the shared fast
// model runner (fast/model/model.c, model_branches.c) calls, so the same runner trains and
// evaluates every family on the device (fmodel_new_ops with fcuda_f32_ops()).
//
// Conventions beyond the table's (which fast/cpu's host table meets trivially):
//   * every array is device memory — the arena (alloc_ws), parameters, gradients, logits and
//     per-row losses — except the batch's tokens and targets and the scalar losses, which the
//     runner passes from its caller on the host: the entries that take them upload them into a
//     staging buffer (grown when a batch is larger, otherwise reused) and download the loss;
//   * the table's void entries cannot return an error: a failing launch is kept (the first
//     one) and fcuda_ops_error() reports it, so a caller checks once after a forward or a
//     backward;
//   * everything runs on the default stream, in order.
// The staging buffers are the process's (one table): calls must not run concurrently.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"
#include "phax/f32_ops.h"
#include "phax/numerics.h"

#define OPS_THREADS 256u

// --- the kept error and the staging buffers ----------------------------------------------------
static struct {
    int err;
    char msg[512];
    int32_t *ids;  // tokens or targets of the current call (device)
    size_t ids_cap;
    float *scalar;  // a loss (device)
    void *ws;       // scratch of entries the table gives none (mix_bwd, cross_entropy)
    size_t ws_cap;
} st;

static void keep_err(int rc) {
    if (rc && !st.err) {
        st.err = 1;
        snprintf(st.msg, sizeof st.msg, "%s", phax_error());
    }
}

extern "C" int fcuda_ops_error(void) {
    if (!st.err) return PHAX_OK;
    st.err = 0;
    return phax_fail("%s", st.msg);
}

// A device buffer of at least `bytes` in *p (capacity *cap), grown (never shrunk) as needed.
static int grow(void **p, size_t *cap, size_t bytes) {
    if (*p && *cap >= bytes) return PHAX_OK;
    if (*p && fcuda_free(*p)) return PHAX_ERR;
    *p = NULL, *cap = 0;
    size_t want = bytes < 4096 ? 4096 : bytes + bytes / 4;
    if (fcuda_malloc(p, want)) return PHAX_ERR;
    *cap = want;
    return PHAX_OK;
}

// The host ids (n) on the device, in the staging buffer.
static const int32_t *stage_ids(const int32_t *host, size_t n) {
    void *p = st.ids;
    if (grow(&p, &st.ids_cap, (n ? n : 1) * sizeof(int32_t))) return NULL;
    st.ids = static_cast<int32_t *>(p);
    if (n && fcuda_upload(st.ids, host, n * sizeof(int32_t), NULL)) return NULL;
    return st.ids;
}

static float *stage_scalar(void) {
    if (!st.scalar) {
        void *p = NULL;
        if (fcuda_malloc(&p, sizeof(float))) return NULL;
        st.scalar = static_cast<float *>(p);
    }
    return st.scalar;
}

static void *stage_ws(size_t bytes) {
    if (grow(&st.ws, &st.ws_cap, bytes ? bytes : 1)) return NULL;
    return st.ws;
}

// --- memory ------------------------------------------------------------------------------------
static void *alloc_ws(size_t bytes) {
    void *p = NULL;
    if (fcuda_malloc(&p, bytes ? bytes : 1)) return NULL;
    if (fcuda_ok(cudaMemset(p, 0, bytes ? bytes : 1), "alloc_ws")) {  // the arena comes zeroed
        fcuda_free(p);
        return NULL;
    }
    return p;
}
static void free_ws(void *p) {
    if (p) keep_err(fcuda_free(p));
}
static void load_f64(float *y, const double *x, size_t n) {
    float *t = static_cast<float *>(malloc((n ? n : 1) * sizeof(float)));
    if (!t) return keep_err(phax_fail("cuda load_f64: out of memory"));
    for (size_t i = 0; i < n; i++) t[i] = (float)x[i];
    keep_err(fcuda_upload(y, t, n * sizeof(float), NULL));
    free(t);
}

// --- elementwise: fast/cpu/f32_ops.c's expressions, a thread per element ----------------------------
#define EW(e, n) for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < (n); e += (size_t)gridDim.x * blockDim.x)
static __global__ void add_k(float *y, const float *a, const float *b, size_t n) { EW(i, n) y[i] = a[i] + b[i]; }
static __global__ void acc_k(float *y, const float *x, size_t n) { EW(i, n) y[i] += x[i]; }
static __global__ void scale_k(float *y, float al, const float *x, size_t n) { EW(i, n) y[i] = al * x[i]; }
static __global__ void axpy_k(float *y, float al, const float *x, size_t n) { EW(i, n) y[i] = al * x[i] + y[i]; }
static __global__ void mul_k(float *y, const float *a, const float *b, size_t n) { EW(i, n) y[i] = a[i] * b[i]; }
static __global__ void mul_bwd_k(float *da, float *db, const float *dy, const float *a, const float *b, size_t n) {
    EW(i, n) {
        float g = dy[i];
        da[i] = g * b[i], db[i] = g * a[i];
    }
}
static __global__ void sigmoid_k(float *x, size_t n) { EW(i, n) x[i] = 1.0f / (1.0f + expf(-x[i])); }
static __global__ void sigmoid_mul_bwd_k(float *dz, float *dh, const float *hn, const float *o, size_t n) {
    EW(i, n) {
        float g = dh[i];
        dz[i] = g * hn[i] * o[i] * (1.0f - o[i]);
        dh[i] = g * o[i];
    }
}
static __global__ void gate_cap_fwd_k(float *y, const float *z, size_t n) { EW(i, n) y[i] = phax_gate_capf(z[i]); }
static __global__ void gate_cap_bwd_k(float *dy, const float *z, size_t n) {
    const float cap = (float)PHAX_MLSTM_GATE_CAP;
    EW(i, n) {
        float t = tanhf(z[i] / cap);
        dy[i] *= 1.0f - t * t;
    }
}
#undef EW

#define EW_LAUNCH(k, n, ...)                                                                            \
    do {                                                                                                \
        if ((n) == 0) return;                                                                           \
        PHAX_LAUNCH(k, fcuda_ew_blocks((n), OPS_THREADS), OPS_THREADS, 0, (cudaStream_t)0, __VA_ARGS__); \
        keep_err(fcuda_check(#k));                                                                      \
    } while (0)

static void zero(float *p, size_t n) {
    if (n) keep_err(fcuda_ok(cudaMemsetAsync(p, 0, n * sizeof(float), (cudaStream_t)0), "zero"));
}
static void add(float *y, const float *a, const float *b, size_t n) { EW_LAUNCH(add_k, n, y, a, b, n); }
static void acc(float *y, const float *x, size_t n) { EW_LAUNCH(acc_k, n, y, x, n); }
static void scale(float *y, float al, const float *x, size_t n) { EW_LAUNCH(scale_k, n, y, al, x, n); }
static void axpy(float *y, float al, const float *x, size_t n) { EW_LAUNCH(axpy_k, n, y, al, x, n); }
static void mul(float *y, const float *a, const float *b, size_t n) { EW_LAUNCH(mul_k, n, y, a, b, n); }
static void mul_bwd(float *da, float *db, const float *dy, const float *a, const float *b, size_t n) {
    EW_LAUNCH(mul_bwd_k, n, da, db, dy, a, b, n);
}
static void sigmoid_inplace(float *x, size_t n) { EW_LAUNCH(sigmoid_k, n, x, n); }
static void sigmoid_mul_bwd(float *dz, float *dh, const float *hn, const float *o, size_t n) {
    EW_LAUNCH(sigmoid_mul_bwd_k, n, dz, dh, hn, o, n);
}
static void gate_cap_fwd(float *y, const float *z, size_t n) { EW_LAUNCH(gate_cap_fwd_k, n, y, z, n); }
static void gate_cap_bwd(float *dy, const float *z, size_t n) { EW_LAUNCH(gate_cap_bwd_k, n, dy, z, n); }

// --- the kernels, with the stream (NULL) and the table's host conventions ----------------------------
static int embedding_fwd(float *x, const float *E, const int32_t *tok, size_t n, int V, int d) {
    const int32_t *t = stage_ids(tok, n);
    return t ? fcuda_embedding_fwd(x, E, t, n, V, d, NULL) : PHAX_ERR;
}
static void embedding_bwd(float *dE, const float *dx, const int32_t *tok, size_t n, int d) {
    const int32_t *t = stage_ids(tok, n);
    keep_err(t ? fcuda_embedding_bwd(dE, dx, t, n, d, NULL) : PHAX_ERR);
}
static void linear_fwd(float *y, const float *x, const float *W, const float *b, size_t n, int in, int out) {
    keep_err(fcuda_linear_fwd(y, x, W, b, n, in, out, NULL));
}
static void linear_bwd(float *dx, float *dW, float *db, const float *dy, const float *x, const float *W, size_t n,
                       int in, int out) {
    keep_err(fcuda_linear_bwd(dx, dW, db, dy, x, W, n, in, out, NULL));
}
static void rmsnorm_fwd(float *y, const float *x, const float *g, size_t n, int d, double eps) {
    keep_err(fcuda_rmsnorm_fwd(y, x, g, n, d, eps, NULL));
}
static void rmsnorm_bwd(float *dx, float *dg, const float *dy, const float *x, const float *g, size_t n, int d,
                        double eps, void *ws) {
    keep_err(fcuda_rmsnorm_bwd(dx, dg, dy, x, g, n, d, eps, ws, NULL));
}
static size_t rmsnorm_bwd_ws(size_t n, int d) { return fcuda_rmsnorm_bwd_ws(n, d); }
static void layernorm_fwd(float *y, const float *x, const float *g, const float *b, size_t n, int d, double eps) {
    keep_err(fcuda_layernorm_fwd(y, x, g, b, n, d, eps, NULL));
}
static void layernorm_bwd(float *dx, float *dg, float *db, const float *dy, const float *x, const float *g, size_t n,
                          int d, double eps, void *ws) {
    keep_err(fcuda_layernorm_bwd(dx, dg, db, dy, x, g, n, d, eps, ws, NULL));
}
static size_t layernorm_bwd_ws(size_t n, int d) { return fcuda_layernorm_bwd_ws(n, d); }
static void headnorm_fwd(float *y, const float *x, const float *g, size_t n, int H, int dh, double eps) {
    keep_err(fcuda_headnorm_fwd(y, x, g, n, H, dh, eps, NULL));
}
static void headnorm_bwd(float *dx, float *dg, const float *dy, const float *x, const float *g, size_t n, int H,
                         int dh, double eps, void *ws) {
    keep_err(fcuda_headnorm_bwd(dx, dg, dy, x, g, n, H, dh, eps, ws, NULL));
}
static size_t headnorm_bwd_ws(size_t n, int H, int dh) { return fcuda_headnorm_bwd_ws(n, H, dh); }
static void gelu_fwd(float *y, const float *x, size_t n) { keep_err(fcuda_gelu_fwd(y, x, n, NULL)); }
static void gelu_bwd(float *dx, const float *dy, const float *x, size_t n) {
    keep_err(fcuda_gelu_bwd(dx, dy, x, n, NULL));
}
static size_t swiglu_keep_len(size_t n, int hid) { return fcuda_swiglu_keep_len(n, hid); }
static size_t swiglu_fwd_keep_ws(size_t n, int d, int hid) { return fcuda_swiglu_fwd_keep_ws(n, d, hid); }
static int swiglu_fwd_keep(float *y, float *keep, const float *x, const float *Wg, const float *Wu, const float *Wd,
                           size_t n, int d, int hid, void *ws) {
    return fcuda_swiglu_fwd_keep(y, keep, x, Wg, Wu, Wd, n, d, hid, ws, NULL);
}
static int swiglu_bwd_kept(float *dx, float *dWg, float *dWu, float *dWd, const float *dy, const float *x,
                           const float *Wg, const float *Wu, const float *Wd, size_t n, int d, int hid,
                           const float *keep, void *ws) {
    return fcuda_swiglu_bwd_kept(dx, dWg, dWu, dWd, dy, x, Wg, Wu, Wd, n, d, hid, keep, ws, NULL);
}
static size_t swiglu_bwd_kept_ws(size_t n, int d, int hid) { return fcuda_swiglu_bwd_kept_ws(n, d, hid); }
static void mix_fwd(float *m, const float *b, const float *p, int nb, size_t n) {
    keep_err(fcuda_mix_fwd(m, b, p, nb, n, NULL));
}
static void mix_bwd(float *db, float *dp, const float *dm, const float *b, const float *p, int nb, size_t n) {
    void *ws = stage_ws(fcuda_mix_bwd_ws(nb, n));
    keep_err(ws ? fcuda_mix_bwd(db, dp, dm, b, p, nb, n, ws, NULL) : PHAX_ERR);
}
static int cross_entropy_fwd(float *loss, const float *logits, const int32_t *targets, size_t n, int V) {
    const int32_t *t = stage_ids(targets, n);
    float *dl = stage_scalar();
    void *ws = stage_ws(fcuda_cross_entropy_ws());
    if (!t || !dl || !ws || fcuda_cross_entropy_fwd(dl, logits, t, n, V, ws, NULL)) return PHAX_ERR;
    return fcuda_download(loss, dl, sizeof(float), NULL);
}
static int linear_cross_entropy(float *loss, float *dx, float *dW, float dloss, const float *x, const float *W,
                                const int32_t *targets, size_t n, int d, int V, void *ws) {
    const int32_t *t = stage_ids(targets, n);
    float *dl = stage_scalar();
    if (!t || !dl || fcuda_linear_cross_entropy(loss ? dl : NULL, dx, dW, dloss, x, W, t, n, d, V, ws, NULL))
        return PHAX_ERR;
    return loss ? fcuda_download(loss, dl, sizeof(float), NULL) : PHAX_OK;
}
static int linear_cross_entropy_rows(float *rows, const float *x, const float *W, const int32_t *targets, size_t n,
                                     int d, int V, void *ws) {
    const int32_t *t = stage_ids(targets, n);
    return t ? fcuda_linear_cross_entropy_rows(rows, x, W, t, n, d, V, ws, NULL) : PHAX_ERR;
}
static size_t linear_cross_entropy_ws(size_t n, int d, int V) { return fcuda_linear_cross_entropy_ws(n, d, V); }
static int attention_fwd(float *o, float *lse, float *stats, const float *q, const float *k, const float *v,
                         const float *logscale, int B, int T, const phax_attn_cfg *c, void *ws) {
    return fcuda_attention_fwd(o, lse, stats, q, k, v, logscale, B, T, c, ws, NULL);
}
static int attention_bwd(float *dq, float *dk, float *dv, float *dls, const float *dout, const float *o,
                         const float *stats, const float *q, const float *k, const float *v, const float *logscale,
                         int B, int T, const phax_attn_cfg *c, void *ws) {
    return fcuda_attention_bwd(dq, dk, dv, dls, dout, o, stats, q, k, v, logscale, B, T, c, ws, NULL);
}
static size_t attention_fwd_ws(int B, int T, const phax_attn_cfg *c, int nthreads) {
    (void)nthreads;
    return fcuda_attention_fwd_ws(B, T, c);
}
static size_t attention_bwd_ws(int B, int T, const phax_attn_cfg *c, int nthreads) {
    (void)nthreads;
    return fcuda_attention_bwd_ws(B, T, c);
}
static void dss_kernel_fwd(float *K, const float *Lre, const float *Lim, const float *Cre, const float *Cim, int H,
                           int N, int T, void *ws) {
    keep_err(fcuda_dss_kernel_fwd(K, Lre, Lim, Cre, Cim, H, N, T, ws, NULL));
}
static void dss_kernel_bwd(float *dLre, float *dLim, float *dCre, float *dCim, const float *dK, const float *Lre,
                           const float *Lim, const float *Cre, const float *Cim, int H, int N, int T, void *ws) {
    keep_err(fcuda_dss_kernel_bwd(dLre, dLim, dCre, dCim, dK, Lre, Lim, Cre, Cim, H, N, T, ws, NULL));
}
static size_t dss_kernel_fwd_ws(int H, int N, int T) { return fcuda_dss_kernel_fwd_ws(H, N, T); }
static size_t dss_kernel_bwd_ws(int H, int N, int T) { return fcuda_dss_kernel_bwd_ws(H, N, T); }
static void *ssm_plan_new(int B, int T, int H) { return fcuda_ssm_plan_new(B, T, H, FCUDA_SSM_AUTO); }
static void ssm_plan_free(void *p) { fcuda_ssm_plan_free(static_cast<fcuda_ssm_plan *>(p)); }
static int ssm_conv_fwd(float *y, const float *u, const float *K, const float *D, int B, int T, int H,
                        const void *plan, void *ws) {
    return fcuda_ssm_conv_fwd(y, u, K, D, B, T, H, static_cast<const fcuda_ssm_plan *>(plan), ws, NULL);
}
static int ssm_conv_bwd(float *du, float *dK, float *dD, const float *dy, const float *u, const float *K,
                        const float *D, int B, int T, int H, const void *plan, void *ws) {
    return fcuda_ssm_conv_bwd(du, dK, dD, dy, u, K, D, B, T, H, static_cast<const fcuda_ssm_plan *>(plan), ws,
                               NULL);
}
static size_t ssm_conv_fwd_ws(const void *p) { return fcuda_ssm_conv_fwd_ws(static_cast<const fcuda_ssm_plan *>(p)); }
static size_t ssm_conv_bwd_ws(const void *p) { return fcuda_ssm_conv_bwd_ws(static_cast<const fcuda_ssm_plan *>(p)); }
static int mlstm_fwd(float *h, const float *q, const float *k, const float *v, const float *ig, const float *fg, int B,
                     int T, int H, int dqk, int dv, float eps, int chunk, const float *sin, float *sout, void *ws) {
    return fcuda_mlstm_fwd(h, q, k, v, ig, fg, B, T, H, dqk, dv, eps, chunk, sin, sout, ws, NULL);
}
static int mlstm_bwd(float *dq, float *dk, float *dv_, float *dig, float *dfg, const float *dh, const float *q,
                     const float *k, const float *v, const float *ig, const float *fg, int B, int T, int H, int dqk,
                     int dv, float eps, int chunk, void *ws) {
    return fcuda_mlstm_bwd(dq, dk, dv_, dig, dfg, dh, q, k, v, ig, fg, B, T, H, dqk, dv, eps, chunk, ws, NULL);
}
static size_t mlstm_fwd_ws(int B, int T, int H, int dqk, int dv, int chunk) {
    return fcuda_mlstm_fwd_ws(B, T, H, dqk, dv, chunk);
}
static size_t mlstm_bwd_ws(int B, int T, int H, int dqk, int dv, int chunk) {
    return fcuda_mlstm_bwd_ws(B, T, H, dqk, dv, chunk);
}

static void silu_fwd(float *y, const float *x, size_t n) { keep_err(fcuda_silu_fwd(y, x, n, NULL)); }
static void silu_bwd(float *dx, const float *dy, const float *x, size_t n) {
    keep_err(fcuda_silu_bwd(dx, dy, x, n, NULL));
}
static int gdn_fwd(float *o, const float *q, const float *k, const float *v, const float *g, const float *beta, int B,
                   int T, int H, int dk, int dv, const phax_gdn_cfg *c, int chunk, void *ws) {
    return fcuda_gdn_fwd(o, NULL, q, k, v, g, beta, NULL, B, T, H, dk, dv, c, chunk, ws, NULL);
}
static int gdn_bwd(float *dq, float *dk, float *dv_, float *dg, float *dbeta, const float *do_, const float *q,
                   const float *k, const float *v, const float *g, const float *beta, int B, int T, int H, int dk_,
                   int dv, const phax_gdn_cfg *c, int chunk, void *ws) {
    return fcuda_gdn_bwd(dq, dk, dv_, dg, dbeta, NULL, do_, NULL, q, k, v, g, beta, NULL, B, T, H, dk_, dv, c, chunk,
                         ws, NULL);
}
static int gdn_conv_fwd(float *y, const float *x, const float *w, int B, int T, int C, int K) {
    return fcuda_gdn_conv_fwd(y, x, w, B, T, C, K, NULL);
}
static int gdn_conv_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, int B, int T, int C,
                        int K, void *ws) {
    return fcuda_gdn_conv_bwd(dx, dw, dy, x, w, B, T, C, K, ws, NULL);
}
static int gdn_gates_fwd(float *g, float *beta, const float *a, const float *b, const float *A_log,
                         const float *dt_bias, size_t n, int H) {
    return fcuda_gdn_gates_fwd(g, beta, a, b, A_log, dt_bias, n, H, NULL);
}
static int gdn_gates_bwd(float *da, float *db, float *dA_log, float *ddt_bias, const float *dg, const float *dbeta,
                         const float *a, const float *b, const float *A_log, const float *dt_bias, size_t n, int H) {
    return fcuda_gdn_gates_bwd(da, db, dA_log, ddt_bias, dg, dbeta, a, b, A_log, dt_bias, n, H, NULL);
}

static phax_f32_ops make_table(void) {
    phax_f32_ops t;
    memset(&t, 0, sizeof t);
#ifdef PHAX_CUDA_EMU
    t.name = "cuda_emu";
#else
    t.name = "cuda";
#endif
    t.mlstm_chunk = 64;  // fast/cpu's FCPU_MLSTM_CHUNK
    t.gdn_chunk = 64;    // fast/cpu's FCPU_GDN_CHUNK
    t.alloc_ws = alloc_ws, t.free_ws = free_ws, t.load_f64 = load_f64;
    t.zero = zero, t.add = add, t.acc = acc, t.scale = scale, t.axpy = axpy, t.mul = mul, t.mul_bwd = mul_bwd;
    t.sigmoid_inplace = sigmoid_inplace, t.sigmoid_mul_bwd = sigmoid_mul_bwd;
    t.gate_cap_fwd = gate_cap_fwd, t.gate_cap_bwd = gate_cap_bwd;
    t.embedding_fwd = embedding_fwd, t.embedding_bwd = embedding_bwd;
    t.linear_fwd = linear_fwd, t.linear_bwd = linear_bwd;
    t.rmsnorm_fwd = rmsnorm_fwd, t.rmsnorm_bwd = rmsnorm_bwd, t.rmsnorm_bwd_ws = rmsnorm_bwd_ws;
    t.layernorm_fwd = layernorm_fwd, t.layernorm_bwd = layernorm_bwd, t.layernorm_bwd_ws = layernorm_bwd_ws;
    t.headnorm_fwd = headnorm_fwd, t.headnorm_bwd = headnorm_bwd, t.headnorm_bwd_ws = headnorm_bwd_ws;
    t.gelu_fwd = gelu_fwd, t.gelu_bwd = gelu_bwd, t.silu_fwd = silu_fwd, t.silu_bwd = silu_bwd;
    t.swiglu_keep_len = swiglu_keep_len, t.swiglu_fwd_keep = swiglu_fwd_keep, t.swiglu_fwd_keep_ws = swiglu_fwd_keep_ws;
    t.swiglu_bwd_kept = swiglu_bwd_kept, t.swiglu_bwd_kept_ws = swiglu_bwd_kept_ws;
    t.mix_fwd = mix_fwd, t.mix_bwd = mix_bwd;
    t.cross_entropy_fwd = cross_entropy_fwd, t.linear_cross_entropy = linear_cross_entropy;
    t.linear_cross_entropy_rows = linear_cross_entropy_rows, t.linear_cross_entropy_ws = linear_cross_entropy_ws;
    t.attention_fwd = attention_fwd, t.attention_bwd = attention_bwd;
    t.attention_fwd_ws = attention_fwd_ws, t.attention_bwd_ws = attention_bwd_ws;
    t.dss_kernel_fwd = dss_kernel_fwd, t.dss_kernel_bwd = dss_kernel_bwd;
    t.dss_kernel_fwd_ws = dss_kernel_fwd_ws, t.dss_kernel_bwd_ws = dss_kernel_bwd_ws;
    t.ssm_plan_new = ssm_plan_new, t.ssm_plan_free = ssm_plan_free;
    t.ssm_conv_fwd = ssm_conv_fwd, t.ssm_conv_bwd = ssm_conv_bwd;
    t.ssm_conv_fwd_ws = ssm_conv_fwd_ws, t.ssm_conv_bwd_ws = ssm_conv_bwd_ws;
    t.mlstm_fwd = mlstm_fwd, t.mlstm_bwd = mlstm_bwd, t.mlstm_fwd_ws = mlstm_fwd_ws, t.mlstm_bwd_ws = mlstm_bwd_ws;
    t.gdn_fwd = gdn_fwd, t.gdn_bwd = gdn_bwd, t.gdn_fwd_ws = fcuda_gdn_fwd_ws, t.gdn_bwd_ws = fcuda_gdn_bwd_ws;
    t.gdn_conv_fwd = gdn_conv_fwd, t.gdn_conv_bwd = gdn_conv_bwd, t.gdn_conv_bwd_ws = fcuda_gdn_conv_bwd_ws;
    t.gdn_gates_fwd = gdn_gates_fwd, t.gdn_gates_bwd = gdn_gates_bwd;
    return t;
}

extern "C" const phax_f32_ops *fcuda_f32_ops(void) {
    static const phax_f32_ops t = make_table();
    return &t;
}
