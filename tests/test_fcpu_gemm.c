// The matrix product (fcpu_sgemm, fast/cpu/gemm.c, through the backend list of
// harness.h) against a float64 product of the same float inputs.
//
// Bound, per element (the classic one for a float32 dot product of length K with
// one more rounding each for alpha, beta·C and the sum; Higham, Accuracy and
// Stability, §3.1): |c − ĉ| ≤ (K + 3)·u·(|alpha|·Σ_k |a_ik b_kj| + |beta·c0_ij|),
// u = 2⁻²⁴ (h_elem_worst). It holds for any order of summation, so any blocking a
// backend picks. Outputs are poisoned (NaN where beta = 0), guard zones sit around
// C (tu_fbuf), and C's row padding (ldc > N) must come back untouched.
//
// The case table gemm_cases: all four transposes; splits by rows (M ≥ 32·threads),
// by columns (few rows, many columns) and none (small products); M and N not
// multiples of 16; alpha ≠ 1, beta 0 / 1 / −0.5; row padding 0 and 3; and the call
// inside an OpenMP parallel region (one call per thread, no split).
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

int openblas_get_num_threads(void);

static const float GVAL = -12345.5f;  // row padding of C: must come back as it was

typedef struct {
    bool ta, tb;
    int M, N, K, pad;  // pad: extra floats per row of A, B and C (lda = cols + pad)
    float alpha, beta;
    bool in_parallel;  // called from inside an OpenMP parallel region
} gcase;

// Checks one case; returns the worst |err|/tol (≤ 1 passes; NaN gives +inf).
static double run_case(const h_backend *be, const gcase *g, phax_rng *r) {
    int ar = !g->ta ? g->M : g->K, ac = !g->ta ? g->K : g->M;
    int br = !g->tb ? g->K : g->N, bc = !g->tb ? g->N : g->K;
    int lda = ac + g->pad, ldb = bc + g->pad, ldc = g->N + g->pad;
    size_t nc = (size_t)g->M * ldc;
    float *A = h_frand((size_t)ar * lda, r, 1.0), *B = h_frand((size_t)br * ldb, r, 1.0);
    float *C0 = h_frand(nc, r, 1.0), *C = tu_fbuf(nc);
    for (int i = 0; i < g->M; i++)  // beta = 0: C's old values must not matter (NaN)
        for (int j = 0; j < ldc; j++)
            C[(size_t)i * ldc + j] = j >= g->N ? GVAL : g->beta == 0 ? NAN : C0[(size_t)i * ldc + j];
    if (g->in_parallel) {
#pragma omp parallel num_threads(2)
        {
#pragma omp single
            be->gemm.sgemm(g->ta, g->tb, g->M, g->N, g->K, g->alpha, A, lda, B, ldb, g->beta, C, ldc);
        }
    } else {
        be->gemm.sgemm(g->ta, g->tb, g->M, g->N, g->K, g->alpha, A, lda, B, ldb, g->beta, C, ldc);
    }
    cr_assert(tu_fintact(C), "guard zone around C overwritten");
    cr_assert(tu_fintact(A) && tu_fintact(B), "guard zone around A or B overwritten");
    size_t n = (size_t)g->M * g->N;
    double *ref = tu_buf(n), *tol = tu_buf(n);
    float *got = tu_fbuf(n);
    for (int i = 0; i < g->M; i++) {
        for (int j = g->N; j < ldc; j++)
            cr_assert(C[(size_t)i * ldc + j] == GVAL, "row padding of C written (row %d col %d)", i, j);
        for (int j = 0; j < g->N; j++) {
            double s = 0, m = 0;
            for (int k = 0; k < g->K; k++) {
                double a = !g->ta ? A[(size_t)i * lda + k] : A[(size_t)k * lda + i];
                double b = !g->tb ? B[(size_t)k * ldb + j] : B[(size_t)j * ldb + k];
                s += a * b, m += fabs(a * b);
            }
            double c0 = g->beta == 0 ? 0 : C0[(size_t)i * ldc + j];
            size_t e = (size_t)i * g->N + j;
            ref[e] = (double)g->alpha * s + (double)g->beta * c0;
            tol[e] = (g->K + 3) * H_U32 * (fabs((double)g->alpha) * m + fabs(g->beta * c0));
            got[e] = C[(size_t)i * ldc + j];
        }
    }
    double worst = h_elem_worst(H_F(got), ref, tol, n);
    tu_ffree(A), tu_ffree(B), tu_ffree(C), tu_ffree(C0), tu_ffree(got), tu_free(ref), tu_free(tol);
    return worst;
}

static double run_table(const h_backend *be, const gcase *cs, int nc, phax_rng *r) {
    double worst = 0;
    for (int c = 0; c < nc; c++) {
        const gcase *g = &cs[c];
        double e = run_case(be, g, r);
        cr_expect(e <= 1.0, "%s: M %d N %d K %d trans %d/%d alpha %g beta %g pad %d%s: err/tol %g (seed %llu)",
                  be->name, g->M, g->N, g->K, g->ta, g->tb, g->alpha, g->beta, g->pad,
                  g->in_parallel ? " in a parallel region" : "", e, (unsigned long long)tu_base_seed());
        if (!(e <= worst)) worst = e;
    }
    return worst;
}

// The table: every (shape, transpose pair, (alpha, beta), pad) of the axes below.
// Shapes (M, N, K): rows split (M ≥ 32·threads), columns split, too small to split,
// ragged 16-blocks, K long.
static const int SHAPES[][3] = {{131, 77, 65}, {70, 37, 129}, {5, 300, 97}, {3, 5, 7},
                                {64, 64, 64},  {257, 19, 300}, {33, 1000, 9}};
static const float AB[][2] = {{1.0f, 0.0f}, {0.5f, 1.0f}, {-1.25f, -0.5f}};
#define NSHAPES ((int)(sizeof SHAPES / sizeof *SHAPES))
#define NGEMM (NSHAPES * 4 * 3 * 2)

static int gemm_cases(gcase *cs) {
    int n = 0;
    for (int s = 0; s < NSHAPES; s++)
        for (int t = 0; t < 4; t++)
            for (int k = 0; k < 3; k++)
                for (int pad = 0; pad <= 3; pad += 3)
                    cs[n++] = (gcase){t & 1, t >> 1, SHAPES[s][0], SHAPES[s][1], SHAPES[s][2],
                                      pad, AB[k][0], AB[k][1], false};
    return n;
}

// Inside a parallel region: one call per thread, no split.
static const gcase parallel_cases[] = {
    {false, true, 131, 77, 65, 2, 1.0f, 1.0f, true},
    {true, false, 70, 300, 33, 0, 0.75f, 0.0f, true},
};

H_TEST(gemm, every_transpose_and_split) {
    phax_rng r = tu_rng("gemm/every_transpose_and_split");
    gcase cs[NGEMM];
    int n = gemm_cases(cs);
    int nthr = omp_get_max_threads();
    printf("gemm: %d OpenMP threads\n", nthr);
    double worst = run_table(be, cs, n, &r);
    printf("gemm: %d cases, worst |err|/bound %.3f\n", n, worst);
    if (strcmp(be->name, "cpu") == 0) {
        // OpenBLAS now runs on one thread; OpenMP keeps its count.
        cr_expect(openblas_get_num_threads() == 1);
        cr_expect(omp_get_max_threads() == nthr, "OpenMP threads changed: %d -> %d", nthr,
                  omp_get_max_threads());
    }
}

H_TEST(gemm, inside_a_parallel_region) {
    phax_rng r = tu_rng("gemm/inside_a_parallel_region");
    run_table(be, parallel_cases, 2, &r);
}
