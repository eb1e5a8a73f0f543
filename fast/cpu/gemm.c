// fast/cpu matrix products: a row (or column) split of C over the OpenMP threads,
// one single-threaded OpenBLAS sgemm per block. See phax/fcpu_gemm.h for why.
#include "phax/fcpu_gemm.h"

#include <cblas.h>
#include <omp.h>

_Static_assert(FCPU_NOTRANS == CblasNoTrans && FCPU_TRANS == CblasTrans,
               "fcpu_gemm.h's transpose flags must be CBLAS's");

int openblas_get_num_threads(void);
void openblas_set_num_threads(int);

void fcpu_blas_single(void) {
    if (openblas_get_num_threads() == 1) return;
    int nt = omp_get_max_threads();
    openblas_set_num_threads(1);
    omp_set_num_threads(nt);  // the OpenMP build of OpenBLAS may have lowered it too
}

// Start of block i of n over [0, len): 16-aligned, the last one takes the rest.
static int block_lo(int len, int n, int i) {
    int per = ((len + n - 1) / n + 15) & ~15;
    long lo = (long)per * i;
    return lo < len ? (int)lo : len;
}

void fcpu_sgemm(int ta_flag, int tb_flag, int M, int N, int K, float alpha,
                const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    const CBLAS_TRANSPOSE ta = (CBLAS_TRANSPOSE)ta_flag, tb = (CBLAS_TRANSPOSE)tb_flag;
    int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (!omp_in_parallel()) fcpu_blas_single();
    long work = (long)M * N * K;
    int split_m = M >= 32 * nt, split_n = !split_m && N >= 32 * nt;
    if (nt <= 1 || work < (1L << 18) || !(split_m || split_n)) {
        cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
#pragma omp parallel num_threads(nt)
    {
        int n = omp_get_num_threads(), i = omp_get_thread_num();
        if (split_m) {  // rows m0..m1 of C and of op(A)
            int m0 = block_lo(M, n, i), m1 = block_lo(M, n, i + 1);
            const float *Ai = ta == CblasNoTrans ? A + (long)m0 * lda : A + m0;
            if (m1 > m0)
                cblas_sgemm(CblasRowMajor, ta, tb, m1 - m0, N, K, alpha, Ai, lda, B, ldb, beta,
                            C + (long)m0 * ldc, ldc);
        } else {  // columns n0..n1 of C and of op(B)
            int n0 = block_lo(N, n, i), n1 = block_lo(N, n, i + 1);
            const float *Bi = tb == CblasNoTrans ? B + n0 : B + (long)n0 * ldb;
            if (n1 > n0)
                cblas_sgemm(CblasRowMajor, ta, tb, M, n1 - n0, K, alpha, A, lda, Bi, ldb, beta,
                            C + n0, ldc);
        }
    }
}
