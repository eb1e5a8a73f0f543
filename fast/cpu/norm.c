// fast/cpu norms: RMSNorm, LayerNorm and per-head LayerNorm over the last dimension
// (phax/fcpu_norm.h; semantics: ref/norm.c).
#include "ops_internal.h"

// Row chunks for the dg/db column reductions of the norms: fixed, so the result
// does not depend on the thread count.
#define NORM_CHUNKS 16

// Row sums use "block-float" accumulation: float vector accumulators (16 lanes)
// over blocks of FBLK elements, each block's sum added into a double. Every lane
// then sums at most FBLK/16 = 16 terms, so a block's error is ≤ ~20·2^-24·Σ|terms|
// whatever d is (naive sequential float: d·2^-24), at full float vector speed —
// converting each element to double instead costs 2× (conversion-bound) and
// only buys accuracy the float outputs cannot show.
#define FBLK 256

// Σ x_j and Σ x_j² (sq) or Σ x_j y_j (dot), block-float.
static inline double bsum(const float *restrict x, int d) {
    double s = 0;
    for (int j0 = 0; j0 < d; j0 += FBLK) {
        int j1 = j0 + FBLK < d ? j0 + FBLK : d;
        float b = 0;
#pragma omp simd reduction(+ : b)
        for (int j = j0; j < j1; j++) b += x[j];
        s += b;
    }
    return s;
}
static inline double bdot(const float *restrict x, const float *restrict y, int d) {
    double s = 0;
    for (int j0 = 0; j0 < d; j0 += FBLK) {
        int j1 = j0 + FBLK < d ? j0 + FBLK : d;
        float b = 0;
#pragma omp simd reduction(+ : b)
        for (int j = j0; j < j1; j++) b += x[j] * y[j];
        s += b;
    }
    return s;
}

// 1/sqrt(mean(x²) + eps).
static inline double rms_inv(const float *restrict x, int d, double eps) {
    return 1.0 / sqrt(bdot(x, x, d) / d + eps);
}

void fcpu_rmsnorm_fwd(float *y, const float *x, const float *g, size_t n, int d, double eps) {
#pragma omp parallel for schedule(static) if (n * (size_t)d >= PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        const float *restrict xr = &x[i * d];
        float *restrict yr = &y[i * d];
        float r = (float)rms_inv(xr, d, eps);
#pragma omp simd
        for (int j = 0; j < d; j++) yr[j] = g[j] * xr[j] * r;
    }
}

// Partials: NORM_CHUNKS (or n, if fewer) chunks of rows, each with its own
// double row of width w for dg and, for layernorm, one for db.
static size_t norm_ws(size_t n, size_t w, int nvec) {
    size_t ch = n < NORM_CHUNKS ? n : NORM_CHUNKS;
    return ch * w * (size_t)nvec * sizeof(double);
}

// dst[j] += Σ_c part[c·w + j] in chunk order.
static void reduce_chunks(float *dst, const double *part, size_t nch, size_t w) {
#pragma omp parallel for schedule(static) if (nch * w >= PAR_MIN)
    for (size_t j = 0; j < w; j++) {
        double s = 0;
        for (size_t c = 0; c < nch; c++) s += part[c * w + j];
        dst[j] = (float)((double)dst[j] + s);
    }
}

size_t fcpu_rmsnorm_bwd_ws(size_t n, int d) { return norm_ws(n, (size_t)d, 1); }

void fcpu_rmsnorm_bwd(float *dx, float *dg, const float *dy, const float *x, const float *g,
                      size_t n, int d, double eps, void *ws) {
    if ((!dx && !dg) || n == 0 || d <= 0) return;
    size_t nch = n < NORM_CHUNKS ? n : NORM_CHUNKS;
    double *part = dg ? ws : NULL;
#pragma omp parallel for schedule(static) if (n * (size_t)d >= PAR_MIN)
    for (size_t c = 0; c < nch; c++) {
        double *restrict pg = part ? &part[c * d] : NULL;
        if (pg) memset(pg, 0, (size_t)d * sizeof(double));
        for (size_t i = part_lo(n, (int)nch, (int)c); i < part_lo(n, (int)nch, (int)c + 1); i++) {
            const float *restrict xr = &x[i * d], *restrict dyr = &dy[i * d];
            double r = rms_inv(xr, d, eps);
            if (pg) {
#pragma omp simd
                for (int j = 0; j < d; j++) pg[j] += (double)dyr[j] * xr[j] * r;
            }
            if (dx) {
                // ux = Σ_j dy_j g_j x_j, block-float
                double ux = 0;
                for (int j0 = 0; j0 < d; j0 += FBLK) {
                    int j1 = j0 + FBLK < d ? j0 + FBLK : d;
                    float b = 0;
#pragma omp simd reduction(+ : b)
                    for (int j = j0; j < j1; j++) b += dyr[j] * g[j] * xr[j];
                    ux += b;
                }
                float rf = (float)r, cf = (float)(r * r * r * ux / d);
                float *restrict dxr = &dx[i * d];
#pragma omp simd
                for (int j = 0; j < d; j++) dxr[j] += rf * dyr[j] * g[j] - cf * xr[j];
            }
        }
    }
    if (dg) reduce_chunks(dg, part, nch, (size_t)d);
}

// LayerNorm statistics of x: (d), biased variance, by shifted sums: a rough
// float mean m1 (block-float), then over t = x − m1 (small, ~σ, so neither sum
// cancels): c = Σ t and q = Σ t², giving μ = m1 + c/d and σ² = q/d − (c/d)².
// The centred value is formed as x̂ = ((x − m1) − c/d)·r in float: x − m1 is
// accurate to ~2^-24·σ (not 2^-24·|μ|), as are the sums, so a large common
// offset costs nothing (naive32's float two-pass loses ~d·2^-24·|μ|/σ).
typedef struct {
    float m1, c;  // x − μ = (x − m1) − c
    double r;     // 1/sqrt(σ² + eps)
} ln_st;

static inline ln_st ln_stats(const float *restrict x, int d, double eps) {
    float m1 = (float)(bsum(x, d) / d);
    double cs = 0, qs = 0;
    for (int j0 = 0; j0 < d; j0 += FBLK) {
        int j1 = j0 + FBLK < d ? j0 + FBLK : d;
        float cb = 0, qb = 0;
#pragma omp simd reduction(+ : cb, qb)
        for (int j = j0; j < j1; j++) {
            float t = x[j] - m1;
            cb += t;
            qb += t * t;
        }
        cs += cb, qs += qb;
    }
    double c = cs / d, var = qs / d - c * c;
    ln_st st = {m1, (float)c, 1.0 / sqrt((var > 0 ? var : 0) + eps)};
    return st;
}

// y = g ⊙ x̂ + b over one vector.
static inline void ln_vec_fwd(float *restrict y, const float *restrict x, const float *restrict g,
                              const float *restrict b, int d, double eps) {
    ln_st st = ln_stats(x, d, eps);
    float m1 = st.m1, c = st.c, r = (float)st.r;
    if (b) {
#pragma omp simd
        for (int j = 0; j < d; j++) y[j] = g[j] * (((x[j] - m1) - c) * r) + b[j];
    } else {
#pragma omp simd
        for (int j = 0; j < d; j++) y[j] = g[j] * (((x[j] - m1) - c) * r);
    }
}

// dx += r (u − mean(u) − x̂ mean(u ⊙ x̂)), u = dy ⊙ g; pg += dy ⊙ x̂, pb += dy
// (double partials; any of dx, pg, pb may be NULL).
static inline void ln_vec_bwd(float *restrict dx, double *restrict pg, double *restrict pb,
                              const float *restrict dy, const float *restrict x,
                              const float *restrict g, int d, double eps) {
    ln_st st = ln_stats(x, d, eps);
    float m1 = st.m1, c = st.c, r = (float)st.r;
    if (pg) {
#pragma omp simd
        for (int j = 0; j < d; j++) pg[j] += (double)(dy[j] * (((x[j] - m1) - c) * r));
    }
    if (pb) {
#pragma omp simd
        for (int j = 0; j < d; j++) pb[j] += dy[j];
    }
    if (!dx) return;
    double su = 0, sux = 0;  // Σ u, Σ u x̂ (block-float)
    for (int j0 = 0; j0 < d; j0 += FBLK) {
        int j1 = j0 + FBLK < d ? j0 + FBLK : d;
        float ub = 0, uxb = 0;
#pragma omp simd reduction(+ : ub, uxb)
        for (int j = j0; j < j1; j++) {
            float u = dy[j] * g[j];
            ub += u;
            uxb += u * (((x[j] - m1) - c) * r);
        }
        su += ub, sux += uxb;
    }
    float mu_u = (float)(su / d), mu_ux = (float)(sux / d);
#pragma omp simd
    for (int j = 0; j < d; j++) {
        float xh = ((x[j] - m1) - c) * r;
        dx[j] += r * (dy[j] * g[j] - mu_u - xh * mu_ux);
    }
}

void fcpu_layernorm_fwd(float *y, const float *x, const float *g, const float *b, size_t n, int d,
                        double eps) {
#pragma omp parallel for schedule(static) if (n * (size_t)d >= PAR_MIN)
    for (size_t i = 0; i < n; i++) ln_vec_fwd(&y[i * d], &x[i * d], g, b, d, eps);
}

size_t fcpu_layernorm_bwd_ws(size_t n, int d) { return norm_ws(n, (size_t)d, 2); }

void fcpu_layernorm_bwd(float *dx, float *dg, float *db, const float *dy, const float *x,
                        const float *g, size_t n, int d, double eps, void *ws) {
    if ((!dx && !dg && !db) || n == 0 || d <= 0) return;
    size_t nch = n < NORM_CHUNKS ? n : NORM_CHUNKS;
    double *partg = dg ? ws : NULL, *partb = db ? (double *)ws + nch * d : NULL;
#pragma omp parallel for schedule(static) if (n * (size_t)d >= PAR_MIN)
    for (size_t c = 0; c < nch; c++) {
        double *pg = partg ? &partg[c * d] : NULL, *pb = partb ? &partb[c * d] : NULL;
        if (pg) memset(pg, 0, (size_t)d * sizeof(double));
        if (pb) memset(pb, 0, (size_t)d * sizeof(double));
        for (size_t i = part_lo(n, (int)nch, (int)c); i < part_lo(n, (int)nch, (int)c + 1); i++)
            ln_vec_bwd(dx ? &dx[i * d] : NULL, pg, pb, &dy[i * d], &x[i * d], g, d, eps);
    }
    if (dg) reduce_chunks(dg, partg, nch, (size_t)d);
    if (db) reduce_chunks(db, partb, nch, (size_t)d);
}

void fcpu_headnorm_fwd(float *y, const float *x, const float *g, size_t n, int H, int dh,
                       double eps) {
    size_t w = (size_t)H * dh;
#pragma omp parallel for schedule(static) if (n * w >= PAR_MIN)
    for (size_t i = 0; i < n; i++)
        for (int h = 0; h < H; h++) {
            size_t o = i * w + (size_t)h * dh;
            ln_vec_fwd(&y[o], &x[o], &g[(size_t)h * dh], NULL, dh, eps);
        }
}

size_t fcpu_headnorm_bwd_ws(size_t n, int H, int dh) { return norm_ws(n, (size_t)H * dh, 1); }

void fcpu_headnorm_bwd(float *dx, float *dg, const float *dy, const float *x, const float *g,
                       size_t n, int H, int dh, double eps, void *ws) {
    size_t w = (size_t)H * dh;
    if ((!dx && !dg) || n == 0 || w == 0) return;
    size_t nch = n < NORM_CHUNKS ? n : NORM_CHUNKS;
    double *part = dg ? ws : NULL;
#pragma omp parallel for schedule(static) if (n * w >= PAR_MIN)
    for (size_t c = 0; c < nch; c++) {
        double *pg = part ? &part[c * w] : NULL;
        if (pg) memset(pg, 0, w * sizeof(double));
        for (size_t i = part_lo(n, (int)nch, (int)c); i < part_lo(n, (int)nch, (int)c + 1); i++)
            for (int h = 0; h < H; h++) {
                size_t o = i * w + (size_t)h * dh;
                ln_vec_bwd(dx ? &dx[o] : NULL, pg ? &pg[(size_t)h * dh] : NULL, NULL, &dy[o], &x[o],
                           &g[(size_t)h * dh], dh, eps);
            }
    }
    if (dg) reduce_chunks(dg, part, nch, w);
}
