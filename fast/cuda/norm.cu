// fast/cuda RMSNorm, LayerNorm and per-head LayerNorm, float32 (phax/fcuda.h; semantics:
// ref/norm.c; contract: phax/fcpu_norm.h).
//   forward: one block per row; Σ x² by a warp-shuffle + shared-memory block reduction, then
//     r = 1/sqrt(Σx²/d + eps) in double, y = g x r.
//   backward: one block per row adds dx = r dy g − (r³ Σ_j dy g x / d) x and keeps r in the
//     workspace; then dg_j += Σ_i dy_ij x_ij r_i, summed in double over fixed row chunks
//     (a thread per (chunk, column)) and the chunks in order: the same bits whatever the
//     device or the scheduling.
#include "cuda_common.cuh"

// Threads per row block: a multiple of 32 covering d, at most 1024 (the row kernels are
// compiled for 1024-thread blocks: __launch_bounds__).
static unsigned row_threads(int d) {
    unsigned t = ((unsigned)d + 31u) / 32u * 32u;
    return t < 32 ? 32 : t > 1024 ? 1024 : t;
}

static __global__ void __launch_bounds__(1024) rmsnorm_fwd_k(float *__restrict__ y, const float *__restrict__ x,
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
static __global__ void __launch_bounds__(1024) rmsnorm_bwd_rows_k(float *__restrict__ dx, float *__restrict__ rr,
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
static size_t r_bytes(size_t n) { return fcuda_align16(n * sizeof(float)); }

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

extern "C" int fcuda_rmsnorm_fwd(float *y, const float *x, const float *g, size_t n, int d,
                                  double eps, void *stream) {
    if (n == 0 || d <= 0) return PHAX_OK;
    if (n > 0x7fffffffu) return phax_fail("cuda rmsnorm_fwd: %zu rows (at most 2^31 - 1)", n);
    PHAX_LAUNCH(rmsnorm_fwd_k, (unsigned)n, row_threads(d), 0, fcuda_stream(stream), y, x, g, d, eps);
    return fcuda_check("rmsnorm_fwd");
}

// r per row, then the (chunk, column) partials of dg.
extern "C" size_t fcuda_rmsnorm_bwd_ws(size_t n, int d) {
    return r_bytes(n) + dg_chunks(n) * (size_t)(d > 0 ? d : 0) * sizeof(double);
}

extern "C" int fcuda_rmsnorm_bwd(float *dx, float *dg, const float *dy, const float *x, const float *g,
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

// --- LayerNorm and per-head LayerNorm ------------------------------------------------------------
// Both normalise "vectors" of length dh: LayerNorm's rows (H = 1, dh = d, bias b), headnorm's
// (row, head) slices of an (n, H·dh) matrix — vector v = i·H + h sits at [v·dh, (v + 1)·dh) and
// takes g[h·dh ...]. A block per vector: mean and biased variance in double (two passes, so a
// large common offset costs nothing), x̂ = (x − μ)·r rounded once, r = 1/sqrt(σ² + eps).
//   backward: dx += r (u − mean(u) − x̂ mean(u x̂)), u = dy g, the means in double; the rows'
//   (μ, r) kept in the workspace; then dg (+ db) over fixed row chunks as for RMSNorm.

__device__ __forceinline__ void ln_stats(double *mu, double *r, const float *xv, int dh, double eps, double *red) {
    double s = 0;
    for (int j = threadIdx.x; j < dh; j += blockDim.x) s += xv[j];
    double m = fcuda_block_sum_d(s, red) / dh, q = 0;
    for (int j = threadIdx.x; j < dh; j += blockDim.x) {
        double t = xv[j] - m;
        q += t * t;
    }
    double var = fcuda_block_sum_d(q, red) / dh;
    *mu = m;
    *r = 1.0 / sqrt(var + eps);
}

static __global__ void __launch_bounds__(1024) ln_fwd_k(float *__restrict__ y, const float *__restrict__ x, const float *__restrict__ g,
                                const float *__restrict__ b, int H, int dh, double eps) {
    __shared__ double red[32];
    size_t v = blockIdx.x;
    const float *xv = x + v * dh, *gv = g + (v % (size_t)H) * dh;
    float *yv = y + v * dh;
    double mu, r;
    ln_stats(&mu, &r, xv, dh, eps, red);
    for (int j = threadIdx.x; j < dh; j += blockDim.x) {
        float xh = (float)((xv[j] - mu) * r);
        yv[j] = b ? gv[j] * xh + b[j] : gv[j] * xh;
    }
}

// dx (may be NULL) += ...; st (may be NULL) [2v], [2v + 1] = μ, r.
static __global__ void __launch_bounds__(1024) ln_bwd_rows_k(float *__restrict__ dx, double *__restrict__ st, const float *__restrict__ dy,
                                     const float *__restrict__ x, const float *__restrict__ g, int H, int dh,
                                     double eps) {
    __shared__ double red[32];
    size_t v = blockIdx.x;
    const float *xv = x + v * dh, *dyv = dy + v * dh, *gv = g + (v % (size_t)H) * dh;
    double mu, r;
    ln_stats(&mu, &r, xv, dh, eps, red);
    if (st && threadIdx.x == 0) st[2 * v] = mu, st[2 * v + 1] = r;
    if (!dx) return;  // uniform over the block: no barrier follows
    double su = 0, sux = 0;
    for (int j = threadIdx.x; j < dh; j += blockDim.x) {
        double u = (double)dyv[j] * gv[j];
        su += u;
        sux += u * ((xv[j] - mu) * r);
    }
    double mu_u = fcuda_block_sum_d(su, red) / dh, mu_ux = fcuda_block_sum_d(sux, red) / dh;
    float *dxv = dx + v * dh;
    for (int j = threadIdx.x; j < dh; j += blockDim.x) {
        double xh = (xv[j] - mu) * r, u = (double)dyv[j] * gv[j];
        dxv[j] = (float)((double)dxv[j] + r * (u - mu_u - xh * mu_ux));
    }
}

// pg[c·w + j] = Σ_{i in chunk c} dy_ij x̂_ij, pb likewise Σ dy_ij (either may be NULL); w = H·dh.
static __global__ void ln_bwd_part_k(double *__restrict__ pg, double *__restrict__ pb, const float *__restrict__ dy,
                                     const float *__restrict__ x, const double *__restrict__ st, size_t n, int H,
                                     int dh) {
    size_t w = (size_t)H * dh;
    size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (j >= w) return;
    size_t c = blockIdx.y, nch = gridDim.y, i0 = n * c / nch, i1 = n * (c + 1) / nch, h = j / (size_t)dh;
    double sg = 0, sb = 0;
    for (size_t i = i0; i < i1; i++) {
        size_t v = i * H + h;
        double d_ = dy[i * w + j];
        sg += d_ * (float)((x[i * w + j] - st[2 * v]) * st[2 * v + 1]);  // x̂ as the forward rounds it
        sb += d_;
    }
    if (pg) pg[c * w + j] = sg;
    if (pb) pb[c * w + j] = sb;
}

static size_t ln_st_bytes(size_t nv) { return nv * 2 * sizeof(double); }

static size_t ln_ws(size_t n, int H, int dh, int nvec) {
    size_t w = (size_t)(H > 0 ? H : 0) * (size_t)(dh > 0 ? dh : 0);
    return ln_st_bytes(n * (size_t)(H > 0 ? H : 0)) + (size_t)nvec * dg_chunks(n) * w * sizeof(double);
}

static int ln_fwd(const char *op, float *y, const float *x, const float *g, const float *b, size_t n, int H, int dh,
                  double eps, void *stream) {
    size_t nv = n * (size_t)(H > 0 ? H : 0);
    if (nv == 0 || dh <= 0) return PHAX_OK;
    if (nv > 0x7fffffffu) return phax_fail("cuda %s: %zu vectors (at most 2^31 - 1)", op, nv);
    PHAX_LAUNCH(ln_fwd_k, (unsigned)nv, row_threads(dh), 0, fcuda_stream(stream), y, x, g, b, H, dh, eps);
    return fcuda_check(op);
}

static int ln_bwd(const char *op, float *dx, float *dg, float *db, const float *dy, const float *x, const float *g,
                  size_t n, int H, int dh, double eps, void *ws, void *stream) {
    size_t nv = n * (size_t)(H > 0 ? H : 0), w = (size_t)(H > 0 ? H : 0) * (size_t)(dh > 0 ? dh : 0);
    if ((!dx && !dg && !db) || nv == 0 || dh <= 0) return PHAX_OK;
    if (nv > 0x7fffffffu) return phax_fail("cuda %s: %zu vectors (at most 2^31 - 1)", op, nv);
    if ((dg || db) && !ws) return phax_fail("cuda %s: dg or db requested without a workspace", op);
    if (w > 0x7fffffffu) return phax_fail("cuda %s: width H·dh = %zu (at most 2^31 - 1)", op, w);
    cudaStream_t s = fcuda_stream(stream);
    double *st = (dg || db) ? static_cast<double *>(ws) : nullptr;
    PHAX_LAUNCH(ln_bwd_rows_k, (unsigned)nv, row_threads(dh), 0, s, dx, st, dy, x, g, H, dh, eps);
    if (fcuda_check(op)) return PHAX_ERR;
    if (!dg && !db) return PHAX_OK;
    unsigned nch = (unsigned)dg_chunks(n), cols = (unsigned)((w + 255) / 256);
    double *pg = reinterpret_cast<double *>(static_cast<char *>(ws) + ln_st_bytes(nv));
    double *pb = pg + (size_t)nch * w;  // LayerNorm's second row of partials
    PHAX_LAUNCH(ln_bwd_part_k, dim3(cols, nch), 256u, 0, s, dg ? pg : nullptr, db ? pb : nullptr, dy, x,
                (const double *)st, n, H, dh);
    if (fcuda_check(op)) return PHAX_ERR;
    if (dg) PHAX_LAUNCH(rmsnorm_bwd_dg_sum_k, cols, 256u, 0, s, dg, (const double *)pg, (int)nch, (int)w);
    if (db) PHAX_LAUNCH(rmsnorm_bwd_dg_sum_k, cols, 256u, 0, s, db, (const double *)pb, (int)nch, (int)w);
    return fcuda_check(op);
}

extern "C" int fcuda_layernorm_fwd(float *y, const float *x, const float *g, const float *b, size_t n, int d,
                                    double eps, void *stream) {
    return ln_fwd("layernorm_fwd", y, x, g, b, n, 1, d, eps, stream);
}
extern "C" size_t fcuda_layernorm_bwd_ws(size_t n, int d) { return ln_ws(n, 1, d, 2); }
extern "C" int fcuda_layernorm_bwd(float *dx, float *dg, float *db, const float *dy, const float *x, const float *g,
                                    size_t n, int d, double eps, void *ws, void *stream) {
    return ln_bwd("layernorm_bwd", dx, dg, db, dy, x, g, n, 1, d, eps, ws, stream);
}
extern "C" int fcuda_headnorm_fwd(float *y, const float *x, const float *g, size_t n, int H, int dh, double eps,
                                   void *stream) {
    return ln_fwd("headnorm_fwd", y, x, g, nullptr, n, H, dh, eps, stream);
}
extern "C" size_t fcuda_headnorm_bwd_ws(size_t n, int H, int dh) { return ln_ws(n, H, dh, 1); }
extern "C" int fcuda_headnorm_bwd(float *dx, float *dg, const float *dy, const float *x, const float *g, size_t n,
                                   int H, int dh, double eps, void *ws, void *stream) {
    return ln_bwd("headnorm_bwd", dx, dg, nullptr, dy, x, g, n, H, dh, eps, ws, stream);
}
