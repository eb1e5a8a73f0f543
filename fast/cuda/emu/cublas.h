// cuBLAS on the CPU, for the tests (docs/cuda.md): the subset fast/cuda uses, served by
// OpenBLAS's cblas_sgemm with cuBLAS's conventions (column-major; op(A) is m × k, op(B)
// k × n, C m × n), and checked as the device would check it:
//   * the argument validation cuBLAS documents for gemm: CUBLAS_STATUS_INVALID_VALUE when
//     m, n or k < 0, a transpose flag is not N/T/C, lda < max(1, m) for op N (max(1, k) for
//     T), ldb < max(1, k) for op N (max(1, n) for T), ldc < max(1, m), alpha or beta NULL,
//     batchCount < 0; for GemmEx a data or compute type outside the FP32 subset;
//     CUBLAS_STATUS_NOT_INITIALIZED for a handle that cublasCreate did not return (or that
//     was destroyed);
//   * beyond what cuBLAS checks (on a device these are faults or silent garbage): every
//     matrix the call reads or writes, as its leading dimension lays it out, must lie inside
//     one cudaMalloc allocation, and alpha/beta (host pointer mode) must not be device memory.
//     Otherwise the call fails with CUBLAS_STATUS_EXECUTION_FAILED and the runtime's last
//     error becomes cudaErrorIllegalAddress, as a faulting kernel's would;
//   * beta = 0: C is not read (NaN or poison in C does not propagate), as cuBLAS documents;
//   * CUBLAS_COMPUTE_32F_FAST_TF32 (and cublasSetMathMode CUBLAS_TF32_TENSOR_OP_MATH for
//     cublasSgemm): A and B are rounded to TF32 (10 explicit mantissa bits, to nearest, ties
//     away from zero as cvt.rna.tf32.f32) before the product, accumulation in float32, so a
//     test of the option sees TF32-sized error.
// cublasGetStatusString returns the emulator's one-line detail of the failure last recorded
// (the call, the argument and why).
#ifndef PHAX_CUDA_EMU_CUBLAS_H
#define PHAX_CUDA_EMU_CUBLAS_H

#include "cuda_emu.h"

namespace phax_emu {

// The codes and enumerators have cuBLAS's values (cublas_api.h, library_types.h).
enum cublasStatus_t {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_MAPPING_ERROR = 11,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0, CUBLAS_PEDANTIC_MATH = 2, CUBLAS_TF32_TENSOR_OP_MATH = 3 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 };
enum cudaDataType_t { CUDA_R_32F = 0 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };

struct emu_cublas;
typedef emu_cublas *cublasHandle_t;

cublasStatus_t cublasCreate(cublasHandle_t *h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
cublasStatus_t cublasGetStream(cublasHandle_t h, cudaStream_t *s);
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode);
const char *cublasGetStatusName(cublasStatus_t s);
const char *cublasGetStatusString(cublasStatus_t s);

cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                           int k, const float *alpha, const float *A, int lda, const float *B, int ldb,
                           const float *beta, float *C, int ldc);
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                            int k, const void *alpha, const void *A, cudaDataType_t Atype, int lda,
                            const void *B, cudaDataType_t Btype, int ldb, const void *beta, void *C,
                            cudaDataType_t Ctype, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo);
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                         int m, int n, int k, const float *alpha, const float *A,
                                         int lda, long long strideA, const float *B, int ldb,
                                         long long strideB, const float *beta, float *C, int ldc,
                                         long long strideC, int batchCount);

// TF32 rounding of one float (to nearest, ties away; inf and NaN unchanged).
float tf32_round(float x);

}  // namespace phax_emu

#endif
