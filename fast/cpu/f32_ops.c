// The fast/cpu op table (phax/fcpu_f32_ops.h): the kernels of fast/cpu by pointer, the
// elementwise ops the model runner needs (OpenMP over elements from 65,536 on, the
// threshold of the loops they replace), the arena allocator, and the SSM plan entries
// behind void pointers. Each elementwise op computes exactly the expression, in the
// order and precision, that the runner's inline loop did before (the numerics
// fingerprint, scripts/numerics_fingerprint.sh, is bit-identical across the move).
#define _GNU_SOURCE  // madvise(MADV_HUGEPAGE)
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "phax/fcpu.h"
#include "phax/fcpu_f32_ops.h"
#include "phax/numerics.h"

// --- memory ----------------------------------------------------------------------------------
// One arena, asked for in huge pages and touched once here, so the first training step
// does not pay ~0.3 GB/s page faults.
static void *alloc_ws(size_t bytes) {
    const size_t huge = (size_t)2 << 20;
    size_t sz = (bytes + huge - 1) / huge * huge;
    void *p = NULL;
    if (bytes > SIZE_MAX - huge || posix_memalign(&p, huge, sz ? sz : huge)) {  // (sz must not wrap)
        phax_fail("model workspace: out of memory allocating %.1f MB", bytes / 1e6);
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    madvise(p, sz, MADV_HUGEPAGE);  // advisory: transparent huge pages are in madvise mode
#endif
    memset(p, 0, sz);
    return p;
}

static void free_ws(void *p) { free(p); }

static void load_f64(float *restrict y, const double *restrict x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = (float)x[i];
}

// --- elementwise -----------------------------------------------------------------------------
// Both cores: one core's memset writes ~23 GB/s here, two ~40 (28 MB at the bench config).
static void zero(float *p, size_t n) {
#pragma omp parallel if (n >= (1u << 20))
    {
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
        size_t per = (n / (size_t)nt + 15) & ~(size_t)15, lo = per * (size_t)id;
        if (lo < n) memset(p + lo, 0, ((n - lo < per) ? n - lo : per) * sizeof(float));
    }
}

static void add(float *restrict y, const float *restrict a, const float *restrict b, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= 65536)
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

static void acc(float *restrict y, const float *restrict x, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= 65536)
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

static void scale(float *restrict y, float alpha, const float *restrict x, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= 65536)
    for (size_t i = 0; i < n; i++) y[i] = alpha * x[i];
}

static void axpy(float *restrict y, float alpha, const float *restrict x, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= 65536)
    for (size_t i = 0; i < n; i++) y[i] = alpha * x[i] + y[i];
}

static void mul(float *restrict y, const float *restrict a, const float *restrict b, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= 65536)
    for (size_t i = 0; i < n; i++) y[i] = a[i] * b[i];
}

static void mul_bwd(float *restrict da, float *restrict db, const float *restrict dy,
                    const float *restrict a, const float *restrict b, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= 65536)
    for (size_t i = 0; i < n; i++) {
        da[i] = dy[i] * b[i];
        db[i] = dy[i] * a[i];
    }
}

static void sigmoid_inplace(float *restrict x, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= 65536)
    for (size_t i = 0; i < n; i++) x[i] = 1.0f / (1.0f + expf(-x[i]));
}

static void sigmoid_mul_bwd(float *restrict dz, float *restrict dh, const float *restrict hn,
                            const float *restrict o, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= 65536)
    for (size_t i = 0; i < n; i++) {
        dz[i] = dh[i] * hn[i] * o[i] * (1.0f - o[i]);
        dh[i] = dh[i] * o[i];
    }
}

// (B·T·heads elements: small; serial as before.)
static void gate_cap_fwd(float *restrict y, const float *restrict z, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = phax_gate_capf(z[i]);
}

static void gate_cap_bwd(float *restrict dy, const float *restrict z, size_t n) {
    const float cap = (float)PHAX_MLSTM_GATE_CAP;
    for (size_t i = 0; i < n; i++) {
        float t = tanhf(z[i] / cap);
        dy[i] *= 1.0f - t * t;
    }
}

// --- the SSM plan behind void pointers -------------------------------------------------------
static void *ssm_plan_new(int B, int T, int H) { return fcpu_ssm_plan_new(B, T, H); }
static void ssm_plan_free(void *p) { fcpu_ssm_plan_free(p); }
static int ssm_conv_fwd(float *y, const float *u, const float *K, const float *D, int B, int T,
                        int H, const void *plan, void *ws) {
    return fcpu_ssm_conv_fwd(y, u, K, D, B, T, H, plan, ws);
}
static int ssm_conv_bwd(float *du, float *dK, float *dD, const float *dy, const float *u,
                        const float *K, const float *D, int B, int T, int H, const void *plan,
                        void *ws) {
    return fcpu_ssm_conv_bwd(du, dK, dD, dy, u, K, D, B, T, H, plan, ws);
}
static size_t ssm_conv_fwd_ws(const void *p) { return fcpu_ssm_conv_fwd_ws(p); }
static size_t ssm_conv_bwd_ws(const void *p) { return fcpu_ssm_conv_bwd_ws(p); }

// ---------------------------------------------------------------------------------------------
// The GDN cell without an initial state or a final state (the model's use).
static int gdn_fwd(float *o, const float *q, const float *k, const float *v, const float *g, const float *beta, int B,
                   int T, int H, int dk, int dv, const phax_gdn_cfg *c, int chunk, void *ws) {
    return fcpu_gdn_chunkwise_fwd(o, NULL, q, k, v, g, beta, NULL, B, T, H, dk, dv, c, chunk, ws);
}
static int gdn_bwd(float *dq, float *dk, float *dv_, float *dg, float *dbeta, const float *do_, const float *q,
                   const float *k, const float *v, const float *g, const float *beta, int B, int T, int H, int dk_,
                   int dv, const phax_gdn_cfg *c, int chunk, void *ws) {
    return fcpu_gdn_chunkwise_bwd(dq, dk, dv_, dg, dbeta, NULL, do_, NULL, q, k, v, g, beta, NULL, B, T, H, dk_, dv, c,
                                  chunk, ws);
}

static const phax_f32_ops cpu_ops = {
    .name = "cpu",
    .mlstm_chunk = FCPU_MLSTM_CHUNK,
    .gdn_chunk = FCPU_GDN_CHUNK,
    .alloc_ws = alloc_ws,
    .free_ws = free_ws,
    .load_f64 = load_f64,
    .zero = zero,
    .add = add,
    .acc = acc,
    .scale = scale,
    .axpy = axpy,
    .mul = mul,
    .mul_bwd = mul_bwd,
    .sigmoid_inplace = sigmoid_inplace,
    .sigmoid_mul_bwd = sigmoid_mul_bwd,
    .gate_cap_fwd = gate_cap_fwd,
    .gate_cap_bwd = gate_cap_bwd,
    .embedding_fwd = fcpu_embedding_fwd,
    .embedding_bwd = fcpu_embedding_bwd,
    .linear_fwd = fcpu_linear_fwd,
    .linear_bwd = fcpu_linear_bwd,
    .rmsnorm_fwd = fcpu_rmsnorm_fwd,
    .rmsnorm_bwd = fcpu_rmsnorm_bwd,
    .rmsnorm_bwd_ws = fcpu_rmsnorm_bwd_ws,
    .layernorm_fwd = fcpu_layernorm_fwd,
    .layernorm_bwd = fcpu_layernorm_bwd,
    .layernorm_bwd_ws = fcpu_layernorm_bwd_ws,
    .headnorm_fwd = fcpu_headnorm_fwd,
    .headnorm_bwd = fcpu_headnorm_bwd,
    .headnorm_bwd_ws = fcpu_headnorm_bwd_ws,
    .gelu_fwd = fcpu_gelu_fwd,
    .gelu_bwd = fcpu_gelu_bwd,
    .silu_fwd = fcpu_silu_fwd,
    .silu_bwd = fcpu_silu_bwd,
    .swiglu_keep_len = fcpu_swiglu_keep_len,
    .swiglu_fwd_keep = fcpu_swiglu_fwd_keep,
    .swiglu_fwd_keep_ws = fcpu_swiglu_fwd_keep_ws,
    .swiglu_bwd_kept = fcpu_swiglu_bwd_kept,
    .swiglu_bwd_kept_ws = fcpu_swiglu_bwd_kept_ws,
    .mix_fwd = fcpu_mix_fwd,
    .mix_bwd = fcpu_mix_bwd,
    .cross_entropy_fwd = fcpu_cross_entropy_fwd,
    .linear_cross_entropy = fcpu_linear_cross_entropy,
    .linear_cross_entropy_rows = fcpu_linear_cross_entropy_rows,
    .linear_cross_entropy_ws = fcpu_linear_cross_entropy_ws,
    .attention_fwd = fcpu_attention_fwd,
    .attention_bwd = fcpu_attention_bwd,
    .attention_fwd_ws = fcpu_attention_fwd_ws,
    .attention_bwd_ws = fcpu_attention_bwd_ws,
    .dss_kernel_fwd = fcpu_dss_kernel_fwd,
    .dss_kernel_bwd = fcpu_dss_kernel_bwd,
    .dss_kernel_fwd_ws = fcpu_dss_kernel_fwd_ws,
    .dss_kernel_bwd_ws = fcpu_dss_kernel_bwd_ws,
    .ssm_plan_new = ssm_plan_new,
    .ssm_plan_free = ssm_plan_free,
    .ssm_conv_fwd = ssm_conv_fwd,
    .ssm_conv_bwd = ssm_conv_bwd,
    .ssm_conv_fwd_ws = ssm_conv_fwd_ws,
    .ssm_conv_bwd_ws = ssm_conv_bwd_ws,
    .mlstm_fwd = fcpu_mlstm_chunkwise_fwd,
    .mlstm_bwd = fcpu_mlstm_chunkwise_bwd,
    .mlstm_fwd_ws = fcpu_mlstm_chunkwise_fwd_ws,
    .mlstm_bwd_ws = fcpu_mlstm_chunkwise_bwd_ws,
    .gdn_fwd = gdn_fwd,
    .gdn_bwd = gdn_bwd,
    .gdn_fwd_ws = fcpu_gdn_chunkwise_fwd_ws,
    .gdn_bwd_ws = fcpu_gdn_chunkwise_bwd_ws,
    .gdn_conv_fwd = fcpu_gdn_conv_fwd,
    .gdn_conv_bwd = fcpu_gdn_conv_bwd,
    .gdn_conv_bwd_ws = fcpu_gdn_conv_bwd_ws,
    .gdn_gates_fwd = fcpu_gdn_gates_fwd,
    .gdn_gates_bwd = fcpu_gdn_gates_bwd,
};

const phax_f32_ops *fcpu_f32_ops(void) { return &cpu_ops; }
