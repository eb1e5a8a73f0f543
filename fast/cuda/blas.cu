// fast/cuda's cuBLAS handle and GEMM (fast/cuda/blas.cuh): one handle for the library,
// created on first use and bound to the caller's stream at every call; every status checked
// and turned into the library's one-line error.
#include <cstring>

#include "blas.cuh"

static cublasHandle_t blas_handle;
static int blas_tf32;

extern "C" int fcuda_gemm_tf32(int on) {
    int was = blas_tf32;
    blas_tf32 = on != 0;
    return was;
}

static int blas_fail(cublasStatus_t s, const char *op, const char *fn) {
    cudaGetLastError();  // a fault it recorded is reported here, not again by the next op
    const char *why = cublasGetStatusString(s);
    if (!strncmp(why, fn, strlen(fn)))  // the emulation's message names the call itself
        return phax_fail("cuda %s: %s (%s)", op, why, cublasGetStatusName(s));
    return phax_fail("cuda %s: %s: %s (%s)", op, fn, why, cublasGetStatusName(s));
}

int fcuda_blas_gemm(const char *op, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                     float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C,
                     int ldc, void *stream) {
    cublasStatus_t s;
    if (!blas_handle && (s = cublasCreate(&blas_handle)) != CUBLAS_STATUS_SUCCESS) {
        blas_handle = nullptr;
        return blas_fail(s, op, "cublasCreate");
    }
    if ((s = cublasSetStream(blas_handle, fcuda_stream(stream))) != CUBLAS_STATUS_SUCCESS)
        return blas_fail(s, op, "cublasSetStream");
    s = cublasGemmEx(blas_handle, ta, tb, m, n, k, &alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, &beta, C,
                     CUDA_R_32F, ldc, blas_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) return blas_fail(s, op, "cublasGemmEx");
    return PHAX_OK;
}

// Row-major C (M × N, ldc) = alpha·op(A)·op(B) + beta·C, fast/cpu's fcpu_sgemm convention. In
// cuBLAS's column-major terms that is Cᵀ = op(B)ᵀ·op(A)ᵀ, and a row-major matrix is already
// its transpose there: op(B)ᵀ is B as stored when tb is 0 (CUBLAS_OP_N), its transpose otherwise.
extern "C" int fcuda_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                            const float *B, int ldb, float beta, float *C, int ldc, void *stream) {
    return fcuda_blas_gemm("sgemm", tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, alpha, B,
                            ldb, A, lda, beta, C, ldc, stream);
}
