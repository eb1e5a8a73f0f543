// fast/cpu linear: y = x Wᵀ + b as one fcpu_mm over all rows (bf16 operands when the thread asks) (phax/fcpu_linear.h;
// semantics: ref/linear.c).
#include "ops_internal.h"

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
    fcpu_mm(CblasNoTrans, CblasTrans, (int)n, out, in, 1.0f, x, in, W, in, beta,
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
        fcpu_mm(CblasNoTrans, CblasNoTrans, (int)n, in, out, 1.0f, dy, out, W,
                    in, 1.0f, dx, in);
    if (dW)  // (out, in) += (n, out)ᵀ (n, in)
        fcpu_mm(CblasTrans, CblasNoTrans, out, in, (int)n, 1.0f, dy, out, x, in,
                    1.0f, dW, in);
}
