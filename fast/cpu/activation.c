// fast/cpu activations: GELU (exact erf form) and SiLU, elementwise on libmvec
// (phax/fcpu_activation.h; semantics: ref/activation.c).
#include "ops_internal.h"

#define INV_SQRT2 0.70710678118654752440f
#define INV_SQRT_2PI 0.39894228040143267794f

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
