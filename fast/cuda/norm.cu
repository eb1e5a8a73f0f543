// fast/cuda RMSNorm, float32 (phax/fcuda.h; semantics: ref/norm.c; contract: phax/fcpu_norm.h).
//   forward: one block per row; Σ x² by a warp-shuffle + shared-memory block reduction, then
//     r = 1/sqrt(Σx²/d + eps) in double, y = g x r.
//   backward: one block per row adds dx = r dy g − (r³ Σ_j dy g x / d) x and keeps r in the
//     workspace; then one thread per column adds dg_j = Σ_i dy_ij x_ij r_i (summed in
//     double, in row order, into dg: the same result whatever the launch shape).
#include "cuda_common.cuh"

// Threads per row block: a multiple of 32 covering d, at most 1024.
static unsigned row_threads(int d) {
    unsigned t = ((unsigned)d + 31u) / 32u * 32u;
    return t < 32 ? 32 : t > 1024 ? 1024 : t;
}

static __global__ void rmsnorm_fwd_k(float *__restrict__ y, const float *__restrict__ x,
                                     const float *__restrict__ g, int d, double eps) {
    __shared__ float red[32];
    size_t row = blockIdx.x;
    const float *xr = x + row * d;
    float *yr = y + row * d;
    float ss = 0.0f;
    for (int j = threadIdx.x; j < d; j += blockDim.x) ss += xr[j] * xr[j];
    ss = fcuda_block_sum(ss, red);
    float r = (float)(1.0 / sqrt((double)ss / d + eps));
    for (int j = threadIdx.x; j < d; j += blockDim.x) yr[j] = g[j] * xr[j] * r;
}

// dx (may be NULL) += r dy g − c x; rr (may be NULL) [row] = r.
static __global__ void rmsnorm_bwd_rows_k(float *__restrict__ dx, float *__restrict__ rr,
                                          const float *__restrict__ dy, const float *__restrict__ x,
                                          const float *__restrict__ g, int d, double eps) {
    __shared__ float red[32];
    size_t row = blockIdx.x;
    const float *xr = x + row * d, *dyr = dy + row * d;
    float ss = 0.0f, ux = 0.0f;
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        ss += xr[j] * xr[j];
        ux += dyr[j] * g[j] * xr[j];
    }
    ss = fcuda_block_sum(ss, red);
    double r = 1.0 / sqrt((double)ss / d + eps);
    if (rr && threadIdx.x == 0) rr[row] = (float)r;
    if (!dx) return;  // uniform over the block: no barrier follows
    ux = fcuda_block_sum(ux, red);
    float rf = (float)r, cf = (float)(r * r * r * (double)ux / d);
    float *dxr = dx + row * d;
    for (int j = threadIdx.x; j < d; j += blockDim.x) dxr[j] += rf * dyr[j] * g[j] - cf * xr[j];
}

static __global__ void rmsnorm_bwd_dg_k(float *__restrict__ dg, const float *__restrict__ dy,
                                        const float *__restrict__ x, const float *__restrict__ rr,
                                        size_t n, int d) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= d) return;
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)(dy[i * d + j] * x[i * d + j]) * rr[i];
    dg[j] = (float)((double)dg[j] + s);
}

extern "C" int FCUDA(rmsnorm_fwd)(float *y, const float *x, const float *g, size_t n, int d,
                                  double eps, void *stream) {
    if (n == 0 || d <= 0) return PHAX_OK;
    if (n > 0x7fffffffu) return phax_fail("cuda rmsnorm_fwd: %zu rows (at most 2^31 - 1)", n);
    PHAX_LAUNCH(rmsnorm_fwd_k, (unsigned)n, row_threads(d), 0, fcuda_stream(stream), y, x, g, d, eps);
    return fcuda_check("rmsnorm_fwd");
}

extern "C" size_t FCUDA(rmsnorm_bwd_ws)(size_t n, int d) {
    (void)d;
    return n * sizeof(float);  // r per row
}

extern "C" int FCUDA(rmsnorm_bwd)(float *dx, float *dg, const float *dy, const float *x, const float *g,
                                  size_t n, int d, double eps, void *ws, void *stream) {
    if ((!dx && !dg) || n == 0 || d <= 0) return PHAX_OK;
    if (n > 0x7fffffffu) return phax_fail("cuda rmsnorm_bwd: %zu rows (at most 2^31 - 1)", n);
    if (dg && !ws) return phax_fail("cuda rmsnorm_bwd: dg requested without a workspace");
    cudaStream_t s = fcuda_stream(stream);
    float *rr = dg ? static_cast<float *>(ws) : nullptr;
    PHAX_LAUNCH(rmsnorm_bwd_rows_k, (unsigned)n, row_threads(d), 0, s, dx, rr, dy, x, g, d, eps);
    if (fcuda_check("rmsnorm_bwd (rows)")) return PHAX_ERR;
    if (!dg) return PHAX_OK;
    PHAX_LAUNCH(rmsnorm_bwd_dg_k, ((unsigned)d + 255u) / 256u, 256u, 0, s, dg, dy, x,
                (const float *)rr, n, d);
    return fcuda_check("rmsnorm_bwd (dg)");
}
