// Kernels that test the CUDA emulator itself (tests/cuda_emu_kernels.cu, compiled as C++ for
// the emulation; called from tests/test_cuda_emu.c). Each entry copies its host inputs to
// emulated device memory, launches, copies the result back and returns the launch's CUDA
// error code (0: success); emu_error() is the emulator's one-line message of the last error.
#ifndef PHAX_TESTS_CUDA_EMU_KERNELS_H
#define PHAX_TESTS_CUDA_EMU_KERNELS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Deliberate bugs the reductions can be built with (the tests show each is caught).
enum {
    EMU_OK = 0,
    EMU_BUG_STRIDE_GT1 = 1,     // the stride loop stops at s > 1 instead of s > 0
    EMU_BUG_NO_SYNC_STORE = 2,  // no __syncthreads between storing values and reading them
    EMU_BUG_NO_SYNC_LOOP = 3,   // no __syncthreads inside the tree loop
};

// out[b] = Σ in[b·block .. (b+1)·block): a shared-memory tree with __syncthreads (dynamic
// shared memory of block floats; any block size).
int emu_tree_sum(int bug, unsigned grid, unsigned block, float *out, const float *in);
// The same by __shfl_down_sync within warps (partial warps by their lane mask), warp
// partials in static shared memory, summed by warp 0.
int emu_shfl_sum(int bug, unsigned grid, unsigned block, float *out, const float *in);
// out[b] = Σ by __shfl_xor_sync butterflies, checked equal on every lane (1 if so) in
// ok[b]; votes[b] = popcount of __ballot_sync(v > 0) summed over warps, any/all in anyall[b].
int emu_xor_vote(unsigned grid, unsigned block, float *out, int *ok, int *votes, int *anyall,
                 const float *in);
// Static and dynamic shared memory written by block 0 only, read by every block after a
// barrier: out[(b·block + t)·2 + {0, 1}] (block ≤ 64).
int emu_smem_poison(unsigned grid, unsigned block, float *out);
// Broken kernels, each of which must be reported: 0 only even threads reach __syncthreads;
// 1 even and odd threads wait at different __syncthreads; 2 a lane named in a shuffle's
// mask has exited; 3 a shuffle of lanes 0-15 while lanes 16-31 shuffle with another mask.
int emu_broken(int which, unsigned block);
// A launch with `block` threads (1025: an invalid configuration) of a kernel that writes
// out[t] = t for every thread (out of block floats).
int emu_config(unsigned block, float *out);
// cudaMemcpy host-to-device with the device pointer on the source side: must fail.
int emu_bad_copy(void);
// Fresh cudaMalloc'd memory reads as NaN (1 if every float of n is NaN).
int emu_malloc_poisoned(size_t n);
// The emulator's message of the last error.
const char *emu_error(void);

// cuBLAS (the emulation, fast/cuda/emu/cublas.h) called as a kernel file calls it, on device
// buffers the caller allocated: C = op(A)·op(B) + beta·C, column-major, alpha 1. Returns the
// cublasStatus_t (0: success); emu_error() is cublasGetStatusString's message.
enum {
    EMU_BLAS_SGEMM = 0,          // cublasSgemm
    EMU_BLAS_GEMMEX = 1,         // cublasGemmEx, FP32 data, CUBLAS_COMPUTE_32F
    EMU_BLAS_GEMMEX_TF32 = 2,    // cublasGemmEx, CUBLAS_COMPUTE_32F_FAST_TF32
    EMU_BLAS_STRIDED = 3,        // cublasSgemmStridedBatched (batch, strides sA, sB, sC)
    EMU_BLAS_DESTROYED = 4,      // cublasSgemm on a destroyed handle
    EMU_BLAS_ALPHA_DEVICE = 5,   // cublasSgemm with alpha in device memory (host pointer mode)
    EMU_BLAS_GEMMEX_64F = 6,     // cublasGemmEx with an unsupported compute type
};
int emu_blas(int which, int ta, int tb, int m, int n, int k, const float *A, int lda, const float *B,
             int ldb, float beta, float *C, int ldc, int batch, long long sA, long long sB, long long sC);

#ifdef __cplusplus
}
#endif

#endif
