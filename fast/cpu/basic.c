// fast/cpu basic: float32 embedding, linear, norms, activations, SwiGLU, RoPE,
// mix, cross-entropy and AdamW on OpenBLAS + OpenMP. Semantics: ref/*.c
// (phax/ref.h); conventions: phax/fcpu.h; API notes: phax/fcpu_basic.h.
//
// Performance notes. Matrix products are one fcpu_sgemm over all rows. The rest
// is memory-bound: one parallel loop over rows (or elements) with the row kept in
// L1/L2 between its passes. Sums vectorise through `omp simd reduction` (no
// fast-math needed): the norms' row statistics in "block-float" (float lanes over
// blocks of 256, blocks added in double; see the norms section), the long sums
// over rows or elements (column sums, mix's dot products, losses, the gradient
// norm, dg/db partials) on double accumulators.
// expf/erfcf vectorise through glibc's libmvec (declared `simd` below; the vector
// variants are accurate to a few ulp), which only `omp simd` loops may call.
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "phax/fcpu.h"
#include "phax/fcpu_gemm.h"
#include "phax/numerics.h"

#if defined(__x86_64__) && defined(__GLIBC__)
// expf/erfcf under names GCC does not treat as builtins, declared `simd`, so
// that `#pragma omp simd` loops call libmvec's _ZGV*_expf / _ZGV*_erfcf. (Under
// the builtin names, -fmath-errno makes GCC wrap expf in a range check, which
// blocks vectorisation; we never read errno.)
__attribute__((simd("notinbranch"), const, nothrow)) extern float vexpf(float) __asm__("expf");
__attribute__((simd("notinbranch"), const, nothrow)) extern float verfcf(float) __asm__("erfcf");
#else
#define vexpf expf
#define verfcf erfcf
#endif
#ifdef __AVX512F__
#include <immintrin.h>
#endif

// Below this many elements a loop runs on one thread (a parallel region costs
// a few microseconds; at ~10 GB/s that is ~64K floats).
#define PAR_MIN 32768
// The bias fill and db column sum around linear's sgemms stay on one thread below
// this many elements: each OpenMP region next to an OpenBLAS call hands the second
// core from one thread pool to the other (both spin-wait for a while), which costs
// more than the ~20 µs the fill takes alone at the model's small shapes.
#define LIN_PAR_MIN (1 << 20)
// Row chunks for the dg/db column reductions of the norms: fixed, so the result
// does not depend on the thread count.
#define NORM_CHUNKS 16

static inline size_t part_lo(size_t n, int parts, int i) { return n * (size_t)i / (size_t)parts; }

// --- embedding -----------------------------------------------------------------------------------

int fcpu_embedding_fwd(float *x, const float *E, const int32_t *tok, size_t n, int V, int d) {
    if (d < 0) return phax_fail("fcpu_embedding_fwd: width d = %d is negative", d);
    for (size_t t = 0; t < n; t++)
        if (tok[t] < 0 || tok[t] >= V)
            return phax_fail("fcpu_embedding_fwd: token id %ld at index %zu is outside [0, %d)",
                             (long)tok[t], t, V);
#pragma omp parallel for schedule(static) if (n * (size_t)d >= PAR_MIN)
    for (size_t t = 0; t < n; t++)
        memcpy(&x[t * d], &E[(size_t)tok[t] * d], (size_t)d * sizeof(float));
    return PHAX_OK;
}

// Each thread owns a block of columns and walks every token in order: no
// atomics, and each element sums in token order whatever the thread count.
void fcpu_embedding_bwd(float *dE, const float *dx, const int32_t *tok, size_t n, int d) {
    if (!dE || d <= 0) return;
#pragma omp parallel if (n * (size_t)d >= PAR_MIN)
    {
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
        // Column blocks aligned to 16 floats (one cache line).
        size_t nblk = ((size_t)d + 15) / 16;
        size_t j0 = part_lo(nblk, nt, id) * 16, j1 = part_lo(nblk, nt, id + 1) * 16;
        if (j1 > (size_t)d) j1 = d;
        for (size_t t = 0; t < n && j0 < j1; t++) {
            float *restrict row = &dE[(size_t)tok[t] * d];
            const float *restrict src = &dx[t * d];
            for (size_t j = j0; j < j1; j++) row[j] += src[j];
        }
    }
}

// --- linear --------------------------------------------------------------------------------------

void fcpu_linear_fwd(float *y, const float *x, const float *W, const float *b, size_t n, int in,
                     int out) {
    if (n == 0 || out <= 0) return;
    if (in <= 0) {  // empty product: y = b (or 0)
        for (size_t r = 0; r < n; r++)
            for (int o = 0; o < out; o++) y[r * out + o] = b ? b[o] : 0.0f;
        return;
    }
    float beta = 0.0f;
    if (b) {  // y starts as the bias rows, the product adds onto them (beta = 1)
#pragma omp parallel for schedule(static) if (n * (size_t)out >= LIN_PAR_MIN)
        for (size_t r = 0; r < n; r++) memcpy(&y[r * out], b, (size_t)out * sizeof(float));
        beta = 1.0f;
    }
    fcpu_sgemm(CblasNoTrans, CblasTrans, (int)n, out, in, 1.0f, x, in, W, in, beta,
                y, out);
}

// db[o] += Σ_r dy[r, o]: blocks of 64 columns per task, double accumulators.
static void colsum_add(float *db, const float *dy, size_t n, int out) {
    int nblk = (out + 63) / 64;
#pragma omp parallel for schedule(static) if (n * (size_t)out >= LIN_PAR_MIN)
    for (int blk = 0; blk < nblk; blk++) {
        int o0 = blk * 64, w = out - o0 < 64 ? out - o0 : 64;
        double acc[64] = {0};
        for (size_t r = 0; r < n; r++) {
            const float *restrict row = &dy[r * out + o0];
#pragma omp simd
            for (int j = 0; j < w; j++) acc[j] += row[j];
        }
        for (int j = 0; j < w; j++) db[o0 + j] = (float)((double)db[o0 + j] + acc[j]);
    }
}

void fcpu_linear_bwd(float *dx, float *dW, float *db, const float *dy, const float *x,
                     const float *W, size_t n, int in, int out) {
    if (n == 0 || out <= 0) return;
    if (db) colsum_add(db, dy, n, out);
    if (in <= 0) return;
    if (dx)  // (n, in) += (n, out)(out, in)
        fcpu_sgemm(CblasNoTrans, CblasNoTrans, (int)n, in, out, 1.0f, dy, out, W,
                    in, 1.0f, dx, in);
    if (dW)  // (out, in) += (n, out)ᵀ (n, in)
        fcpu_sgemm(CblasTrans, CblasNoTrans, out, in, (int)n, 1.0f, dy, out, x, in,
                    1.0f, dW, in);
}

// --- norms ---------------------------------------------------------------------------------------
//
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

// --- activations ---------------------------------------------------------------------------------

#define INV_SQRT2 0.70710678118654752440f
#define INV_SQRT_2PI 0.39894228040143267794f

// σ(z) and σ(−z) from one e = exp(−|z|) ∈ (0, 1]: no overflow, and 1 − σ keeps
// its relative accuracy (it is never formed by subtraction). For `omp simd` loops.
static inline __attribute__((always_inline)) void sigmoid2(float z, float *s, float *sneg) {
    float e = vexpf(-fabsf(z)), q = 1.0f / (1.0f + e);
    *s = z >= 0 ? q : e * q;
    *sneg = z >= 0 ? e * q : q;
}

// Blocks of elements per task for the elementwise loops.
#define EW_BLOCK 8192

void fcpu_gelu_fwd(float *y, const float *x, size_t n) {
    size_t nb = (n + EW_BLOCK - 1) / EW_BLOCK;
#pragma omp parallel for schedule(static) if (n >= PAR_MIN / 4)
    for (size_t blk = 0; blk < nb; blk++) {
        size_t e1 = (blk + 1) * EW_BLOCK < n ? (blk + 1) * EW_BLOCK : n;
        float *restrict yy = y;
        const float *restrict xx = x;
#pragma omp simd
        for (size_t i = blk * EW_BLOCK; i < e1; i++)
            yy[i] = xx[i] * (0.5f * verfcf(-xx[i] * INV_SQRT2));
    }
}

void fcpu_gelu_bwd(float *dx, const float *dy, const float *x, size_t n) {
    if (!dx) return;
    size_t nb = (n + EW_BLOCK - 1) / EW_BLOCK;
#pragma omp parallel for schedule(static) if (n >= PAR_MIN / 4)
    for (size_t blk = 0; blk < nb; blk++) {
        size_t e1 = (blk + 1) * EW_BLOCK < n ? (blk + 1) * EW_BLOCK : n;
        float *restrict dd = dx;
        const float *restrict xx = x, *restrict gg = dy;
#pragma omp simd
        for (size_t i = blk * EW_BLOCK; i < e1; i++) {
            float z = xx[i];
            float cdf = 0.5f * verfcf(-z * INV_SQRT2), pdf = INV_SQRT_2PI * vexpf(-0.5f * z * z);
            dd[i] += gg[i] * (cdf + z * pdf);
        }
    }
}

void fcpu_silu_fwd(float *y, const float *x, size_t n) {
    size_t nb = (n + EW_BLOCK - 1) / EW_BLOCK;
#pragma omp parallel for schedule(static) if (n >= PAR_MIN / 4)
    for (size_t blk = 0; blk < nb; blk++) {
        size_t e1 = (blk + 1) * EW_BLOCK < n ? (blk + 1) * EW_BLOCK : n;
        float *restrict yy = y;
        const float *restrict xx = x;
#pragma omp simd
        for (size_t i = blk * EW_BLOCK; i < e1; i++) {
            float s, sn;
            sigmoid2(xx[i], &s, &sn);
            yy[i] = xx[i] * s;
        }
    }
}

void fcpu_silu_bwd(float *dx, const float *dy, const float *x, size_t n) {
    if (!dx) return;
    size_t nb = (n + EW_BLOCK - 1) / EW_BLOCK;
#pragma omp parallel for schedule(static) if (n >= PAR_MIN / 4)
    for (size_t blk = 0; blk < nb; blk++) {
        size_t e1 = (blk + 1) * EW_BLOCK < n ? (blk + 1) * EW_BLOCK : n;
        float *restrict dd = dx;
        const float *restrict xx = x, *restrict gg = dy;
#pragma omp simd
        for (size_t i = blk * EW_BLOCK; i < e1; i++) {
            float s, sn;
            sigmoid2(xx[i], &s, &sn);
            dd[i] += gg[i] * (s * (1.0f + xx[i] * sn));
        }
    }
}

// --- SwiGLU --------------------------------------------------------------------------------------

// The pair keeps its activations: the forward leaves a = x Wgᵀ, b = x Wuᵀ and
// h = SiLU(a) ⊙ b in `keep` (whole models keep it for the backward); the
// recomputing pair puts keep at the start of its ws.
size_t fcpu_swiglu_keep_len(size_t n, int hid) { return 3 * n * (size_t)(hid > 0 ? hid : 0); }
size_t fcpu_swiglu_bwd_kept_ws(size_t n, int d, int hid) {
    (void)d;
    return 2 * n * (size_t)(hid > 0 ? hid : 0) * sizeof(float);
}
size_t fcpu_swiglu_fwd_ws(size_t n, int d, int hid) {
    (void)d;
    return fcpu_swiglu_keep_len(n, hid) * sizeof(float);
}
size_t fcpu_swiglu_bwd_ws(size_t n, int d, int hid) {
    return fcpu_swiglu_fwd_ws(n, d, hid) + fcpu_swiglu_bwd_kept_ws(n, d, hid);
}

// keep = (a, b, h): a = x Wgᵀ, b = x Wuᵀ (two sgemms over all rows), h = SiLU(a) ⊙ b.
static void swiglu_hidden(float *keep, const float *x, const float *Wg, const float *Wu, size_t n,
                          int d, int hid) {
    size_t m = n * (size_t)hid;
    float *a = keep, *b = a + m, *h = b + m;
    fcpu_sgemm(CblasNoTrans, CblasTrans, (int)n, hid, d, 1.0f, x, d, Wg, d, 0.0f, a,
                hid);
    fcpu_sgemm(CblasNoTrans, CblasTrans, (int)n, hid, d, 1.0f, x, d, Wu, d, 0.0f, b,
                hid);
    size_t nb = (m + EW_BLOCK - 1) / EW_BLOCK;
#pragma omp parallel for schedule(static) if (m >= PAR_MIN / 4)
    for (size_t blk = 0; blk < nb; blk++) {
        size_t e1 = (blk + 1) * EW_BLOCK < m ? (blk + 1) * EW_BLOCK : m;
        const float *restrict aa = a, *restrict bb = b;
        float *restrict hh = h;
#pragma omp simd
        for (size_t i = blk * EW_BLOCK; i < e1; i++) {
            float s, sn;
            sigmoid2(aa[i], &s, &sn);
            hh[i] = (aa[i] * s) * bb[i];
        }
    }
}

int fcpu_swiglu_fwd_keep(float *y, float *keep, const float *x, const float *Wg, const float *Wu,
                         const float *Wd, size_t n, int d, int hid) {
    if (n == 0 || d <= 0) return PHAX_OK;
    if (hid <= 0) {
        memset(y, 0, n * (size_t)d * sizeof(float));
        return PHAX_OK;
    }
    swiglu_hidden(keep, x, Wg, Wu, n, d, hid);
    const float *h = keep + 2 * n * (size_t)hid;
    fcpu_sgemm(CblasNoTrans, CblasTrans, (int)n, d, hid, 1.0f, h, hid, Wd, hid,
                0.0f, y, d);
    return PHAX_OK;
}

int fcpu_swiglu_bwd_kept(float *dx, float *dWg, float *dWu, float *dWd, const float *dy,
                         const float *x, const float *Wg, const float *Wu, const float *Wd,
                         size_t n, int d, int hid, const float *keep, void *ws) {
    if (n == 0 || d <= 0 || hid <= 0 || (!dx && !dWg && !dWu && !dWd)) return PHAX_OK;
    if (!ws) return phax_fail("fcpu_swiglu_bwd_kept: ws is NULL (need fcpu_swiglu_bwd_kept_ws)");
    size_t m = n * (size_t)hid;
    const float *a = keep, *b = a + m, *h = b + m;
    float *da = ws, *db = da + m;
    if (dWd)  // (d, hid) += dyᵀ h
        fcpu_sgemm(CblasTrans, CblasNoTrans, d, hid, (int)n, 1.0f, dy, d, h, hid,
                    1.0f, dWd, hid);
    // dh = dy Wd: (n, d)(d, hid) → da's slot; then, with s = σ(a):
    // da = dh b s (1 + a σ(−a)), db = dh SiLU(a).
    fcpu_sgemm(CblasNoTrans, CblasNoTrans, (int)n, hid, d, 1.0f, dy, d, Wd, hid,
                0.0f, da, hid);
    size_t nb = (m + EW_BLOCK - 1) / EW_BLOCK;
#pragma omp parallel for schedule(static) if (m >= PAR_MIN / 4)
    for (size_t blk = 0; blk < nb; blk++) {
        size_t e1 = (blk + 1) * EW_BLOCK < m ? (blk + 1) * EW_BLOCK : m;
        const float *restrict aa = a, *restrict bb = b;
        float *restrict ga = da, *restrict gb = db;
#pragma omp simd
        for (size_t i = blk * EW_BLOCK; i < e1; i++) {
            float av = aa[i], bv = bb[i], g = ga[i], s, sn;
            sigmoid2(av, &s, &sn);
            float silu = av * s;
            gb[i] = g * silu;
            ga[i] = (g * bv) * (s * (1.0f + av * sn));
        }
    }
    if (dx) {  // (n, d) += da Wg + db Wu
        fcpu_sgemm(CblasNoTrans, CblasNoTrans, (int)n, d, hid, 1.0f, da, hid, Wg, d,
                    1.0f, dx, d);
        fcpu_sgemm(CblasNoTrans, CblasNoTrans, (int)n, d, hid, 1.0f, db, hid, Wu, d,
                    1.0f, dx, d);
    }
    if (dWg)  // (hid, d) += daᵀ x
        fcpu_sgemm(CblasTrans, CblasNoTrans, hid, d, (int)n, 1.0f, da, hid, x, d,
                    1.0f, dWg, d);
    if (dWu)
        fcpu_sgemm(CblasTrans, CblasNoTrans, hid, d, (int)n, 1.0f, db, hid, x, d,
                    1.0f, dWu, d);
    return PHAX_OK;
}

// The recomputing pair: the same functions with keep at the start of ws.
int fcpu_swiglu_fwd(float *y, const float *x, const float *Wg, const float *Wu, const float *Wd,
                    size_t n, int d, int hid, void *ws) {
    if (n == 0 || d <= 0) return PHAX_OK;
    if (!ws && hid > 0) return phax_fail("fcpu_swiglu_fwd: ws is NULL (need fcpu_swiglu_fwd_ws)");
    return fcpu_swiglu_fwd_keep(y, ws, x, Wg, Wu, Wd, n, d, hid);
}

int fcpu_swiglu_bwd(float *dx, float *dWg, float *dWu, float *dWd, const float *dy, const float *x,
                    const float *Wg, const float *Wu, const float *Wd, size_t n, int d, int hid,
                    void *ws) {
    if (n == 0 || d <= 0 || hid <= 0 || (!dx && !dWg && !dWu && !dWd)) return PHAX_OK;
    if (!ws) return phax_fail("fcpu_swiglu_bwd: ws is NULL (need fcpu_swiglu_bwd_ws)");
    float *keep = ws;
    swiglu_hidden(keep, x, Wg, Wu, n, d, hid);  // recompute a, b, h
    return fcpu_swiglu_bwd_kept(dx, dWg, dWu, dWd, dy, x, Wg, Wu, Wd, n, d, hid, keep,
                                keep + fcpu_swiglu_keep_len(n, hid));
}

// --- RoPE ----------------------------------------------------------------------------------------

static int rope_check(const char *who, int dh, int T) {
    if (dh <= 0 || dh % 2) return phax_fail("%s: head dim %d must be even and positive", who, dh);
    if (T < 0) return phax_fail("%s: T = %d is negative", who, T);
    return PHAX_OK;
}

// cos/sin of position p for i < half: ref's expressions exactly, rounded to float.
static inline void rope_row(float *c, float *s, double p, int half, int dh, double base) {
    for (int i = 0; i < half; i++) {
        double theta = pow(base, -2.0 * i / dh);
        c[i] = (float)cos(p * theta);
        s[i] = (float)sin(p * theta);
    }
}

size_t fcpu_rope_table_len(int T, int dh) { return (size_t)(T > 0 ? T : 0) * (size_t)dh; }

int fcpu_rope_table(float *cs, int T, int dh, double base, long pos0) {
    if (rope_check("fcpu_rope_table", dh, T)) return PHAX_ERR;
    int half = dh / 2;
    size_t off = (size_t)T * half;
#pragma omp parallel for schedule(static) if ((size_t)T * half >= 1024)
    for (int t = 0; t < T; t++)
        rope_row(&cs[(size_t)t * half], &cs[off + (size_t)t * half], (double)(pos0 + t), half, dh,
                 base);
    return PHAX_OK;
}

// y = R x (sign +1, overwrite) or y += Rᵀ x (sign −1, accumulate).
static void rope_apply(float *y, const float *x, int B, int T, int H, int dh, double base,
                       long pos0, const float *cs, int inverse) {
    int half = dh / 2;
    size_t rows = (size_t)B * T, toff = (size_t)T * half;
#pragma omp parallel if (rows * H * dh >= PAR_MIN)
    {
        float cbuf[cs ? 1 : half], sbuf[cs ? 1 : half];
#pragma omp for schedule(static)
        for (size_t bt = 0; bt < rows; bt++) {
            int t = (int)(bt % (size_t)T);
            const float *c, *s;
            if (cs) {
                c = &cs[(size_t)t * half];
                s = &cs[toff + (size_t)t * half];
            } else {
                rope_row(cbuf, sbuf, (double)(pos0 + t), half, dh, base);
                c = cbuf, s = sbuf;
            }
            for (int h = 0; h < H; h++) {
                size_t o = (bt * H + h) * dh;
                const float *restrict x1 = &x[o], *restrict x2 = &x[o + half];
                float *restrict y1 = &y[o], *restrict y2 = &y[o + half];
                if (!inverse) {
#pragma omp simd
                    for (int i = 0; i < half; i++) {
                        float a = x1[i], b = x2[i];
                        y1[i] = a * c[i] - b * s[i];
                        y2[i] = b * c[i] + a * s[i];
                    }
                } else {
#pragma omp simd
                    for (int i = 0; i < half; i++) {
                        float a = x1[i], b = x2[i];
                        y1[i] += a * c[i] + b * s[i];
                        y2[i] += b * c[i] - a * s[i];
                    }
                }
            }
        }
    }
}

int fcpu_rope_fwd(float *y, const float *x, int B, int T, int H, int dh, double base, long pos0,
                  const float *cs) {
    if (rope_check("fcpu_rope_fwd", dh, T)) return PHAX_ERR;
    rope_apply(y, x, B, T, H, dh, base, pos0, cs, 0);
    return PHAX_OK;
}

int fcpu_rope_bwd(float *dx, const float *dy, int B, int T, int H, int dh, double base, long pos0,
                  const float *cs) {
    if (rope_check("fcpu_rope_bwd", dh, T)) return PHAX_ERR;
    rope_apply(dx, dy, B, T, H, dh, base, pos0, cs, 1);
    return PHAX_OK;
}

// --- mix -----------------------------------------------------------------------------------------

static void mix_weights_d(double *w, double *S, const float *p, int nb) {
    double s = 0;
    for (int i = 0; i < nb; i++) s += (w[i] = phax_softplus(p[i]));
    for (int i = 0; i < nb; i++) w[i] /= s;
    *S = s;
}

void fcpu_mix_weights(float *w, const float *p, int nb) {
    double wd[nb > 0 ? nb : 1], S;
    mix_weights_d(wd, &S, p, nb);
    for (int i = 0; i < nb; i++) w[i] = (float)wd[i];
}

void fcpu_mix_fwd(float *m, const float *b, const float *p, int nb, size_t n) {
    float w[nb > 0 ? nb : 1];
    fcpu_mix_weights(w, p, nb);
    size_t nblk = (n + EW_BLOCK - 1) / EW_BLOCK;
#pragma omp parallel for schedule(static) if (n * (size_t)(nb + 1) >= PAR_MIN)
    for (size_t blk = 0; blk < nblk; blk++) {
        size_t e0 = blk * EW_BLOCK, e1 = e0 + EW_BLOCK < n ? e0 + EW_BLOCK : n;
        float *restrict mm = m;
        if (nb <= 0) {
            for (size_t e = e0; e < e1; e++) mm[e] = 0.0f;
            continue;
        }
        // s = 0 + w0 b0 + w1 b1 + ..., in ref's order.
        const float *restrict b0 = b;
        float w0 = w[0];
#pragma omp simd
        for (size_t e = e0; e < e1; e++) mm[e] = w0 * b0[e];
        for (int i = 1; i < nb; i++) {
            const float *restrict bi = &b[(size_t)i * n];
            float wi = w[i];
#pragma omp simd
            for (size_t e = e0; e < e1; e++) mm[e] += wi * bi[e];
        }
    }
}

void fcpu_mix_bwd(float *db, float *dp, const float *dm, const float *b, const float *p, int nb,
                  size_t n) {
    if (nb <= 0 || (!db && !dp)) return;
    double wd[nb], S;
    mix_weights_d(wd, &S, p, nb);
    float w[nb];
    for (int i = 0; i < nb; i++) w[i] = (float)wd[i];
    int maxt = omp_get_max_threads(), nt_used = 1;
    double part[maxt][nb];  // per-thread partial dots, summed in thread order
#pragma omp parallel num_threads(maxt) if (n * (size_t)nb >= PAR_MIN)
    {
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
#pragma omp single
        nt_used = nt;
        size_t e0 = part_lo(n, nt, id), e1 = part_lo(n, nt, id + 1);
        for (int i = 0; i < nb; i++) {
            const float *restrict bi = &b[(size_t)i * n];
            const float *restrict g = dm;
            double s = 0;
            if (dp) {
#pragma omp simd reduction(+ : s)
                for (size_t e = e0; e < e1; e++) s += (double)g[e] * bi[e];
            }
            part[id][i] = s;
            if (db) {
                float *restrict dbi = &db[(size_t)i * n];
                float wi = w[i];
#pragma omp simd
                for (size_t e = e0; e < e1; e++) dbi[e] += wi * g[e];
            }
        }
    }
    if (!dp) return;
    double dw[nb], wdw = 0;
    for (int i = 0; i < nb; i++) {
        double s = 0;
        for (int t = 0; t < nt_used; t++) s += part[t][i];
        dw[i] = s;
        wdw += wd[i] * s;
    }
    for (int i = 0; i < nb; i++)
        dp[i] = (float)((double)dp[i] + phax_sigmoid(p[i]) * (dw[i] - wdw) / S);
}

// --- cross-entropy
// ----------------------------------------------------------------------------------

static int ce_count(size_t *count, const int32_t *targets, size_t n, int V) {
    *count = 0;
    for (size_t r = 0; r < n; r++) {
        if (targets[r] < -1 || targets[r] >= V)
            return phax_fail(
                "cross_entropy: target %d at row %zu is outside [0, %d) (or -1 to ignore)",
                (int)targets[r], r, V);
        if (targets[r] >= 0) (*count)++;
    }
    if (*count == 0) return phax_fail("cross_entropy: all %zu targets are ignored (-1)", n);
    return PHAX_OK;
}

// One row: returns lse − x[t] (double) and, if dl, adds g·(softmax − onehot(t)).
// Passes over the row (in L1/L2): max; Σ exp(x − max) in double; the gradient.
static inline double ce_row(float *restrict dl, const float *restrict x, int t, int V, float g) {
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < V; j++) mx = x[j] > mx ? x[j] : mx;
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < V; j++) s += vexpf(x[j] - mx);
    double lse = (double)mx + log(s);
    if (dl) {
        // p_j = exp(x_j − lse): the shift x_j − mx is exact for the top logits,
        // and log(s) ≤ log V is small, so x_j − lse costs one float rounding.
        float sh = (float)(lse - (double)mx);
#pragma omp simd
        for (int j = 0; j < V; j++) dl[j] += g * vexpf((x[j] - mx) - sh);
        dl[t] -= g;
    }
    return lse - (double)x[t];
}

// Rows in parallel with a fixed per-thread partition; the loss is summed in
// double per thread and the thread partials in order.
static double ce_rows(float *dlogits, float g, const float *logits, const int32_t *targets,
                      size_t n, int V) {
    int maxt = omp_get_max_threads(), nt_used = 1;
    double part[maxt];
#pragma omp parallel num_threads(maxt) if (n * (size_t)V >= PAR_MIN)
    {
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
#pragma omp single
        nt_used = nt;
        double s = 0;
        for (size_t r = part_lo(n, nt, id); r < part_lo(n, nt, id + 1); r++) {
            if (targets[r] < 0) continue;
            s += ce_row(dlogits ? &dlogits[r * V] : NULL, &logits[r * V], targets[r], V, g);
        }
        part[id] = s;
    }
    double s = 0;
    for (int t = 0; t < nt_used; t++) s += part[t];
    return s;
}

int fcpu_cross_entropy_fwd(float *loss, const float *logits, const int32_t *targets, size_t n,
                           int V) {
    size_t count;
    if (ce_count(&count, targets, n, V)) return PHAX_ERR;
    *loss = (float)(ce_rows(NULL, 0.0f, logits, targets, n, V) / (double)count);
    return PHAX_OK;
}

int fcpu_cross_entropy_bwd(float *dlogits, float dloss, const float *logits, const int32_t *targets,
                           size_t n, int V) {
    size_t count;
    if (ce_count(&count, targets, n, V)) return PHAX_ERR;
    if (!dlogits) return PHAX_OK;
    ce_rows(dlogits, (float)((double)dloss / (double)count), logits, targets, n, V);
    return PHAX_OK;
}

int fcpu_cross_entropy_fwd_bwd(float *loss, float *dlogits, float dloss, const float *logits,
                               const int32_t *targets, size_t n, int V) {
    size_t count;
    if (ce_count(&count, targets, n, V)) return PHAX_ERR;
    double s = ce_rows(dlogits, (float)((double)dloss / (double)count), logits, targets, n, V);
    if (loss) *loss = (float)(s / (double)count);
    return PHAX_OK;
}

size_t fcpu_lce_tile_rows(int V) {
    size_t r = V > 0 ? ((size_t)4 << 20) / (size_t)V : FCPU_LCE_TILE_MAX;  // 16 MiB of floats
    return r < FCPU_LCE_TILE_MIN ? FCPU_LCE_TILE_MIN : r > FCPU_LCE_TILE_MAX ? FCPU_LCE_TILE_MAX : r;
}

size_t fcpu_linear_cross_entropy_ws(size_t n, int d, int V) {
    (void)d;
    size_t tile = fcpu_lce_tile_rows(V), rows = n < tile ? n : tile;
    return rows * (size_t)(V > 0 ? V : 0) * sizeof(float);
}

int fcpu_linear_cross_entropy(float *loss, float *dx, float *dW, float dloss, const float *x,
                              const float *W, const int32_t *targets, size_t n, int d, int V,
                              void *ws) {
    size_t count;
    if (ce_count(&count, targets, n, V)) return PHAX_ERR;
    if (!ws) return phax_fail("fcpu_linear_cross_entropy: ws is NULL");
    float g = (float)((double)dloss / (double)count);
    int grad = dx || dW;
    float *L = ws;  // (rows, V): logits, then G in place
    double total = 0;
    size_t tile = fcpu_lce_tile_rows(V);
    for (size_t r0 = 0; r0 < n; r0 += tile) {
        size_t R = n - r0 < tile ? n - r0 : tile;
        const float *xt = &x[r0 * d];
        // logits = x_tile Wᵀ: (R, V)
        if (d > 0)
            fcpu_sgemm(CblasNoTrans, CblasTrans, (int)R, V, d, 1.0f, xt, d, W, d,
                        0.0f, L, V);
        else
            memset(L, 0, R * (size_t)V * sizeof(float));
        // Per row: loss, and L ← G = g (softmax − onehot) (0 for ignored rows).
        int maxt = omp_get_max_threads(), nt_used = 1;
        double part[maxt];
#pragma omp parallel num_threads(maxt) if (R * (size_t)V >= PAR_MIN)
        {
            int nt = omp_get_num_threads(), id = omp_get_thread_num();
#pragma omp single
            nt_used = nt;
            double s = 0;
            for (size_t r = part_lo(R, nt, id); r < part_lo(R, nt, id + 1); r++) {
                float *restrict row = &L[r * V];
                int t = targets[r0 + r];
                if (t < 0) {
                    if (grad) memset(row, 0, (size_t)V * sizeof(float));
                    continue;
                }
                float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
                for (int j = 0; j < V; j++) mx = row[j] > mx ? row[j] : mx;
                double se = 0, zt = row[t];  // the target's logit (row is overwritten)
                if (grad) {  // one exponential per logit: keep e^(x − max), then scale by g/Σ
#pragma omp simd reduction(+ : se)
                    for (int j = 0; j < V; j++) {
                        float e = vexpf(row[j] - mx);
                        row[j] = e;
                        se += e;
                    }
                } else {
#pragma omp simd reduction(+ : se)
                    for (int j = 0; j < V; j++) se += vexpf(row[j] - mx);
                }
                double lse = (double)mx + log(se);
                s += lse - zt;
                if (grad) {
                    float sc = (float)((double)g / se);
#pragma omp simd
                    for (int j = 0; j < V; j++) row[j] *= sc;
                    row[t] -= g;
                }
            }
            part[id] = s;
        }
        for (int t = 0; t < nt_used; t++) total += part[t];
        if (!grad || d <= 0) continue;
        if (dx)  // (R, d) += G (R, V) W (V, d)
            fcpu_sgemm(CblasNoTrans, CblasNoTrans, (int)R, d, V, 1.0f, L, V, W, d,
                        1.0f, &dx[r0 * d], d);
        if (dW)  // (V, d) += Gᵀ x_tile
            fcpu_sgemm(CblasTrans, CblasNoTrans, V, d, (int)R, 1.0f, L, V, xt, d,
                        1.0f, dW, d);
    }
    if (loss) *loss = (float)(total / (double)count);
    return PHAX_OK;
}

// Per-row losses of the fused projection (evaluation: loss by position).
int fcpu_linear_cross_entropy_rows(float *row_loss, const float *x, const float *W,
                                   const int32_t *targets, size_t n, int d, int V, void *ws) {
    for (size_t r = 0; r < n; r++)
        if (targets[r] < -1 || targets[r] >= V)
            return phax_fail("cross_entropy: target %d at row %zu is outside [0, %d) (or -1 to ignore)",
                             (int)targets[r], r, V);
    if (!ws) return phax_fail("fcpu_linear_cross_entropy_rows: ws is NULL");
    float *L = ws;  // (rows, V) logits of one tile
    size_t tile = fcpu_lce_tile_rows(V);
    for (size_t r0 = 0; r0 < n; r0 += tile) {
        size_t R = n - r0 < tile ? n - r0 : tile;
        if (d > 0)
            fcpu_sgemm(CblasNoTrans, CblasTrans, (int)R, V, d, 1.0f, &x[r0 * d], d,
                        W, d, 0.0f, L, V);
        else
            memset(L, 0, R * (size_t)V * sizeof(float));
#pragma omp parallel for schedule(static) if (R * (size_t)V >= PAR_MIN)
        for (size_t r = 0; r < R; r++) {
            const float *restrict row = &L[r * V];
            int t = targets[r0 + r];
            if (t < 0) {
                row_loss[r0 + r] = 0.0f;
                continue;
            }
            float mx = -INFINITY;
            for (int j = 0; j < V; j++) mx = row[j] > mx ? row[j] : mx;
            double se = 0;
            for (int j = 0; j < V; j++) se += vexpf(row[j] - mx);
            row_loss[r0 + r] = (float)((double)mx + log(se) - (double)row[t]);
        }
    }
    return PHAX_OK;
}

// --- AdamW ---------------------------------------------------------------------------------------

typedef struct {
    double coef, b1, b2, lr, eps, ibc1, ibc2;
} adamw_k;

// Elements [i0, i1) of one tensor, in double, each stored value rounded once:
//   g ← coef·g;  m ← β1 m + (1−β1) g;  v ← β2 v + (1−β2) g²;
//   p ← (1 − lr·wd) p − lr (m/bc1) / (sqrt(v/bc2) + eps)        (keep = 1 − lr·wd or 1)
// AVX-512 by hand: GCC will not vectorise sqrt under -fmath-errno.
static void adamw_span(float *restrict p, float *restrict m, float *restrict v,
                       const float *restrict g, size_t i0, size_t i1, const adamw_k *k,
                       double keep) {
    size_t i = i0;
#ifdef __AVX512F__
    const __m512d coef = _mm512_set1_pd(k->coef), b1 = _mm512_set1_pd(k->b1),
                  c1 = _mm512_set1_pd(1 - k->b1), b2 = _mm512_set1_pd(k->b2),
                  c2 = _mm512_set1_pd(1 - k->b2), lr = _mm512_set1_pd(k->lr),
                  eps = _mm512_set1_pd(k->eps), ibc1 = _mm512_set1_pd(k->ibc1),
                  ibc2 = _mm512_set1_pd(k->ibc2), kp = _mm512_set1_pd(keep);
    for (; i + 8 <= i1; i += 8) {
        __m512d gd = _mm512_mul_pd(coef, _mm512_cvtps_pd(_mm256_loadu_ps(&g[i])));
        __m512d md = _mm512_cvtps_pd(_mm256_loadu_ps(&m[i]));
        __m512d vd = _mm512_cvtps_pd(_mm256_loadu_ps(&v[i]));
        __m512d pd = _mm512_cvtps_pd(_mm256_loadu_ps(&p[i]));
        md = _mm512_add_pd(_mm512_mul_pd(b1, md), _mm512_mul_pd(c1, gd));
        vd = _mm512_add_pd(_mm512_mul_pd(b2, vd), _mm512_mul_pd(_mm512_mul_pd(c2, gd), gd));
        __m512d den = _mm512_add_pd(_mm512_sqrt_pd(_mm512_mul_pd(vd, ibc2)), eps);
        __m512d upd = _mm512_div_pd(_mm512_mul_pd(lr, _mm512_mul_pd(md, ibc1)), den);
        pd = _mm512_sub_pd(_mm512_mul_pd(kp, pd), upd);
        _mm256_storeu_ps(&m[i], _mm512_cvtpd_ps(md));
        _mm256_storeu_ps(&v[i], _mm512_cvtpd_ps(vd));
        _mm256_storeu_ps(&p[i], _mm512_cvtpd_ps(pd));
    }
#endif
    for (; i < i1; i++) {
        double gd = k->coef * g[i];
        double md = k->b1 * m[i] + (1 - k->b1) * gd;
        double vd = k->b2 * v[i] + (1 - k->b2) * gd * gd;
        m[i] = (float)md;
        v[i] = (float)vd;
        p[i] = (float)(keep * p[i] - k->lr * (md * k->ibc1) / (sqrt(vd * k->ibc2) + k->eps));
    }
}

int fcpu_adamw_step(fcpu_adamw_param *ps, int nparams, const phax_adamw_cfg *c, long step,
                    double *gnorm) {
    if (phax_adamw_cfg_check(c, step)) return PHAX_ERR;
    size_t total = 0;
    for (int j = 0; j < nparams; j++) total += ps[j].n;
    // Global norm: each thread sums its slice of every tensor in double.
    int maxt = omp_get_max_threads(), nt_used = 1;
    double part[maxt];
#pragma omp parallel num_threads(maxt) if (total >= PAR_MIN)
    {
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
#pragma omp single
        nt_used = nt;
        double s = 0;
        for (int j = 0; j < nparams; j++) {
            const float *restrict g = ps[j].g;
            size_t i0 = part_lo(ps[j].n, nt, id), i1 = part_lo(ps[j].n, nt, id + 1);
#pragma omp simd reduction(+ : s)
            for (size_t i = i0; i < i1; i++) s += (double)g[i] * g[i];
        }
        part[id] = s;
    }
    double ss = 0;
    for (int t = 0; t < nt_used; t++) ss += part[t];
    double norm = sqrt(ss);
    if (gnorm) *gnorm = norm;
    if (!isfinite(norm)) return phax_fail("adamw: gradient norm is %g (step %ld)", norm, step);
    double coef = 1.0;
    if (c->clip > 0 && c->clip / (norm + 1e-6) < 1.0) coef = c->clip / (norm + 1e-6);
    adamw_k k = {.coef = coef,
                 .b1 = c->beta1,
                 .b2 = c->beta2,
                 .lr = c->lr,
                 .eps = c->eps,
                 .ibc1 = 1.0 / (1.0 - pow(c->beta1, (double)step)),
                 .ibc2 = 1.0 / (1.0 - pow(c->beta2, (double)step))};
#pragma omp parallel if (total >= PAR_MIN)
    {
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
        for (int j = 0; j < nparams; j++) {
            fcpu_adamw_param *q = &ps[j];
            double keep = 1.0 - (q->decay ? c->lr * c->weight_decay : 0.0);
            adamw_span(q->p, q->m, q->v, q->g, part_lo(q->n, nt, id), part_lo(q->n, nt, id + 1), &k,
                       keep);
        }
    }
    return PHAX_OK;
}
