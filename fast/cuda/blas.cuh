// fast/cuda's products on cuBLAS (fast/cuda/blas.cu): the real library under nvcc, its CPU
// emulation (fast/cuda/emu/cublas.h, on OpenBLAS) under g++ with PHAX_CUDA_EMU. cuBLAS is
// column-major: a row-major (r, c) matrix is, as cuBLAS sees it, its (c × r) transpose with
// leading dimension c.
#ifndef PHAX_FAST_CUDA_BLAS_CUH
#define PHAX_FAST_CUDA_BLAS_CUH

#include "cuda_common.cuh"
#ifdef PHAX_CUDA_EMU
#include "emu/cublas.h"
#else
#include <cublas_v2.h>
#endif

// C = alpha·op(A)·op(B) + beta·C in cuBLAS's column-major terms, on stream, with the
// library's compute type (FP32, or TF32 after fcuda_gemm_tf32(1)): cublasGemmEx. PHAX_OK, or
// PHAX_ERR with the one-line error "cuda <op>: cublasGemmEx: <why> (<status>)".
int fcuda_blas_gemm(const char *op, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                     float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C,
                     int ldc, void *stream);

#endif
