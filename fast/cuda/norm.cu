// fast/cuda RMSNorm, float32 (phax/fcuda.h; semantics: ref/norm.c; contract: phax/fcpu_norm.h).
//   forward: one block per row; Σ x² by a warp-shuffle + shared-memory block reduction, then
//     r = 1/sqrt(Σx²/d + eps) in double, y = g x r.
//   backward: one block per row adds dx = r dy g − (r³ Σ_j dy g x / d) x and keeps r in the
//     workspace; then dg_j += Σ_i dy_ij x_ij r_i, summed in double over fixed row chunks
//     (a thread per (chunk, column)) and the chunks in order: the same bits whatever the
//     device or the scheduling.
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

// dg in two steps, so that long columns keep the device busy and the sum does not depend on
// the launch: the rows in NCH fixed chunks, a double partial per (chunk, column) in the
// workspace, then the partials added in chunk order into dg.
#define DG_CHUNKS 64
static size_t dg_chunks(size_t n) { return n < DG_CHUNKS ? n : DG_CHUNKS; }
static size_t r_bytes(size_t n) { return (n * sizeof(float) + 15) / 16 * 16; }

static __global__ void rmsnorm_bwd_dg_part_k(double *__restrict__ part, const float *__restrict__ dy,
                                             const float *__restrict__ x, const float *__restrict__ rr,
                                             size_t n, int d) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= d) return;
    size_t c = blockIdx.y, nch = gridDim.y;
    size_t i0 = n * c / nch, i1 = n * (c + 1) / nch;
    double s = 0.0;
    for (size_t i = i0; i < i1; i++) s += (double)dy[i * d + j] * x[i * d + j] * rr[i];
    part[c * d + j] = s;
}

static __global__ void rmsnorm_bwd_dg_sum_k(float *__restrict__ dg, const double *__restrict__ part,
                                            int nch, int d) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= d) return;
    double s = 0.0;
    for (int c = 0; c < nch; c++) s += part[(size_t)c * d + j];
    dg[j] = (float)((double)dg[j] + s);
}

extern "C" int FCUDA(rmsnorm_fwd)(float *y, const float *x, const float *g, size_t n, int d,
                                  double eps, void *stream) {
    if (n == 0 || d <= 0) return PHAX_OK;
    if (n > 0x7fffffffu) return phax_fail("cuda rmsnorm_fwd: %zu rows (at most 2^31 - 1)", n);
    PHAX_LAUNCH(rmsnorm_fwd_k, (unsigned)n, row_threads(d), 0, fcuda_stream(stream), y, x, g, d, eps);
    return fcuda_check("rmsnorm_fwd");
}

// r per row, then the (chunk, column) partials of dg.
extern "C" size_t FCUDA(rmsnorm_bwd_ws)(size_t n, int d) {
    return r_bytes(n) + dg_chunks(n) * (size_t)(d > 0 ? d : 0) * sizeof(double);
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
    unsigned nch = (unsigned)dg_chunks(n), cols = ((unsigned)d + 255u) / 256u;
    double *part = reinterpret_cast<double *>(static_cast<char *>(ws) + r_bytes(n));
    PHAX_LAUNCH(rmsnorm_bwd_dg_part_k, dim3(cols, nch), 256u, 0, s, part, dy, x, (const float *)rr, n, d);
    if (fcuda_check("rmsnorm_bwd (dg partials)")) return PHAX_ERR;
    PHAX_LAUNCH(rmsnorm_bwd_dg_sum_k, cols, 256u, 0, s, dg, (const double *)part, (int)nch, d);
    return fcuda_check("rmsnorm_bwd (dg)");
}
