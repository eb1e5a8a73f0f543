// fcpu_sgemm (fast/cpu/gemm.c) against a float64 product of the same float inputs.
//
// Bound, per element (the classic one for a float32 dot product of length K with
// one more rounding each for alpha, beta·C and the sum; Higham, Accuracy and
// Stability, §3.1): |c − ĉ| ≤ (K + 3)·u·(|alpha|·Σ_k |a_ik b_kj| + |beta·c0_ij|),
// u = 2⁻²⁴. It holds for any order of summation, so any blocking OpenBLAS picks.
// Outputs are poisoned (NaN where beta = 0), guard zones sit around C, and C's
// row padding (ldc > N) must come back untouched. Cases: all four transposes;
// splits by rows (M ≥ 32·threads), by columns (few rows, many columns) and none
// (small products); M and N not multiples of 16; alpha ≠ 1, beta 0 / 1 / −0.5;
// the call inside an OpenMP parallel region (one call per thread, no split).
#include <cblas.h>
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "phax/fcpu.h"
#include "phax/fcpu_gemm.h"
#include "testutil.h"

int openblas_get_num_threads(void);

#define GUARD 16
static const float GVAL = -12345.5f;

typedef struct {
    CBLAS_TRANSPOSE ta, tb;
    int M, N, K, pad;  // pad: extra floats per row of A, B and C (lda = cols + pad)
    float alpha, beta;
} gcase;

// Checks one case; returns the worst |err|/tol (≤ 1 passes; NaN fails).
static double run_case(const gcase *g, phax_rng *r, int inside_parallel) {
    int ar = g->ta == CblasNoTrans ? g->M : g->K, ac = g->ta == CblasNoTrans ? g->K : g->M;
    int br = g->tb == CblasNoTrans ? g->K : g->N, bc = g->tb == CblasNoTrans ? g->N : g->K;
    int lda = ac + g->pad, ldb = bc + g->pad, ldc = g->N + g->pad;
    float *A = malloc(sizeof(float) * ((size_t)ar * lda + 1));
    float *B = malloc(sizeof(float) * ((size_t)br * ldb + 1));
    size_t nc = (size_t)g->M * ldc;
    float *Cb = malloc(sizeof(float) * (nc + 2 * GUARD)), *C = Cb + GUARD;
    float *C0 = malloc(sizeof(float) * (nc + 1));
    cr_assert(A && B && Cb && C0);
    for (size_t i = 0; i < (size_t)ar * lda; i++) A[i] = (float)phax_rng_normal(r);
    for (size_t i = 0; i < (size_t)br * ldb; i++) B[i] = (float)phax_rng_normal(r);
    for (int i = 0; i < GUARD; i++) Cb[i] = Cb[GUARD + nc + i] = GVAL;
    for (size_t i = 0; i < nc; i++) C0[i] = (float)phax_rng_normal(r);
    for (int i = 0; i < g->M; i++)  // beta = 0: C's old values must not matter (NaN)
        for (int j = 0; j < ldc; j++)
            C[(size_t)i * ldc + j] = j >= g->N ? GVAL : g->beta == 0 ? NAN : C0[(size_t)i * ldc + j];
    if (inside_parallel) {
#pragma omp parallel num_threads(2)
        {
#pragma omp single
            fcpu_sgemm(g->ta, g->tb, g->M, g->N, g->K, g->alpha, A, lda, B, ldb, g->beta, C, ldc);
        }
    } else {
        fcpu_sgemm(g->ta, g->tb, g->M, g->N, g->K, g->alpha, A, lda, B, ldb, g->beta, C, ldc);
    }
    double worst = 0;
    for (int i = 0; i < GUARD; i++)
        cr_assert(Cb[i] == GVAL && Cb[GUARD + nc + i] == GVAL, "guard zone around C overwritten");
    for (int i = 0; i < g->M; i++) {
        for (int j = g->N; j < ldc; j++)
            cr_assert(C[(size_t)i * ldc + j] == GVAL, "row padding of C written (row %d col %d)", i, j);
        for (int j = 0; j < g->N; j++) {
            double s = 0, m = 0;
            for (int k = 0; k < g->K; k++) {
                double a = g->ta == CblasNoTrans ? A[(size_t)i * lda + k] : A[(size_t)k * lda + i];
                double b = g->tb == CblasNoTrans ? B[(size_t)k * ldb + j] : B[(size_t)j * ldb + k];
                s += a * b, m += fabs(a * b);
            }
            double c0 = g->beta == 0 ? 0 : C0[(size_t)i * ldc + j];
            double ref = (double)g->alpha * s + (double)g->beta * c0;
            double tol = (g->K + 3) * 0x1p-24 * (fabs((double)g->alpha) * m + fabs(g->beta * c0));
            double e = fabs((double)C[(size_t)i * ldc + j] - ref) / (tol > 0 ? tol : 1e-300);
            if (!(e <= worst)) worst = e;  // NaN propagates
        }
    }
    free(A), free(B), free(Cb), free(C0);
    return worst;
}

Test(fcpu_gemm, every_transpose_and_split) {
    phax_rng r = tu_rng("fcpu_gemm/every_transpose_and_split");
    const CBLAS_TRANSPOSE tr[2] = {CblasNoTrans, CblasTrans};
    // (M, N, K): rows split (M ≥ 32·threads), columns split, too small to split,
    // ragged 16-blocks, K long.
    const int shapes[][3] = {{131, 77, 65}, {70, 37, 129}, {5, 300, 97}, {3, 5, 7},
                             {64, 64, 64}, {257, 19, 300}, {33, 1000, 9}};
    const float ab[][2] = {{1.0f, 0.0f}, {0.5f, 1.0f}, {-1.25f, -0.5f}};
    int nthr = omp_get_max_threads();
    printf("fcpu_gemm: %d OpenMP threads\n", nthr);
    double worst = 0;
    int n = 0;
    for (int s = 0; s < 7; s++)
        for (int t = 0; t < 4; t++)
            for (int k = 0; k < 3; k++)
                for (int pad = 0; pad <= 3; pad += 3) {
                    gcase g = {tr[t & 1], tr[t >> 1], shapes[s][0], shapes[s][1], shapes[s][2], pad,
                               ab[k][0], ab[k][1]};
                    double e = run_case(&g, &r, 0);
                    n++;
                    cr_expect(e <= 1.0, "M %d N %d K %d trans %d/%d alpha %g beta %g pad %d: err/tol %g",
                              g.M, g.N, g.K, t & 1, t >> 1, g.alpha, g.beta, pad, e);
                    if (!(e <= worst)) worst = e;
                }
    printf("fcpu_gemm: %d cases, worst |err|/bound %.3f\n", n, worst);
    // OpenBLAS now runs on one thread; OpenMP keeps its count.
    cr_expect(openblas_get_num_threads() == 1);
    cr_expect(omp_get_max_threads() == nthr, "OpenMP threads changed: %d -> %d", nthr,
              omp_get_max_threads());
}

Test(fcpu_gemm, inside_a_parallel_region) {
    phax_rng r = tu_rng("fcpu_gemm/inside_a_parallel_region");
    gcase g = {CblasNoTrans, CblasTrans, 131, 77, 65, 2, 1.0f, 1.0f};
    double e = run_case(&g, &r, 1);
    cr_expect(e <= 1.0, "err/tol %g", e);
    gcase h = {CblasTrans, CblasNoTrans, 70, 300, 33, 0, 0.75f, 0.0f};
    e = run_case(&h, &r, 1);
    cr_expect(e <= 1.0, "err/tol %g", e);
}
