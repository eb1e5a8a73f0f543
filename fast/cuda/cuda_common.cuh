// What every fast/cuda kernel file includes: the runtime (real, or the CPU emulation of
// fast/cuda/emu/ when compiled as C++ with PHAX_CUDA_EMU), the launch macro, dynamic shared
// memory, the entry points' names, launch checking and the block reductions.
#ifndef PHAX_FAST_CUDA_COMMON_CUH
#define PHAX_FAST_CUDA_COMMON_CUH

#ifdef PHAX_CUDA_EMU
#include "emu/cuda_emu.h"
// The entry points fcuda_<op> defined here are the emulated library's fcuda_emu_<op>
// (phax/fcuda_emu_names.h, kept on for the whole unit).
#define PHAX_FCUDA_EMU_KEEP_NAMES
#else
#include <cuda_runtime.h>
// PHAX_LAUNCH(kernel, grid, block, smem bytes, stream, args...): a kernel launch.
#define PHAX_LAUNCH(k, grid, block, smem, stream, ...) k<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__)
// PHAX_DYN_SMEM(T, name): the launch's dynamic shared memory as T name[].
#define PHAX_DYN_SMEM(T, name) extern __shared__ __align__(16) T name[]
#endif

#include "phax/core.h"
#ifdef PHAX_CUDA_EMU
#include "phax/fcuda_emu.h"
#else
#include "phax/fcuda.h"
#endif

// The error of the last launch (or of anything before it) as the library's one-line error.
static inline int fcuda_check(const char *op) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return PHAX_OK;
    return phax_fail("cuda %s: %s (%s)", op, cudaGetErrorString(e), cudaGetErrorName(e));
}
// A CUDA call's result the same way.
static inline int fcuda_ok(cudaError_t e, const char *op) {
    if (e == cudaSuccess) return PHAX_OK;
    cudaGetLastError();  // clear it, so the next check does not report it twice
    return phax_fail("cuda %s: %s (%s)", op, cudaGetErrorString(e), cudaGetErrorName(e));
}
static inline cudaStream_t fcuda_stream(void *s) { return (cudaStream_t)s; }

// Blocks of a grid-stride loop over n elements with `threads` per block: at most 1024
// (with 256 threads, about the resident threads of an H100/H200's 132 SMs); beyond that each
// thread takes several elements.
#define FCUDA_EW_MAX_BLOCKS 1024u
static inline unsigned fcuda_ew_blocks(size_t n, unsigned threads) {
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b > FCUDA_EW_MAX_BLOCKS ? FCUDA_EW_MAX_BLOCKS : b);
}

// A size in bytes rounded up to 16, for workspaces carved into several arrays.
static inline size_t fcuda_align16(size_t bytes) { return (bytes + 15) / 16 * 16; }

// cuBLAS takes int dimensions: a row count over INT_MAX is refused with the op's one-line error.
static inline int fcuda_rows_fit(size_t n, const char *op) {
    if (n <= 0x7fffffffu) return PHAX_OK;
    return phax_fail("cuda %s: %zu rows: cuBLAS takes at most 2147483647", op, n);
}

// σ(z) and σ(−z) without overflow (exp of −|z| only): SiLU and its derivative (activation.cu,
// ffn.cu), the formulas of fast/cpu's sigmoid2.
__device__ __forceinline__ void fcuda_sigmoid2(float z, float *s, float *sneg) {
    float e = expf(-fabsf(z)), q = 1.0f / (1.0f + e);
    *s = z >= 0 ? q : e * q;
    *sneg = z >= 0 ? e * q : q;
}

// Σ v over a warp by butterfly: every lane ends with the same bits (a + b = b + a).
__device__ __forceinline__ float fcuda_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Σ v over the block, returned to every thread. blockDim.x a multiple of 32 (≤ 1024), every
// thread of the block calls it; red: 32 floats of shared memory, free again on return.
__device__ __forceinline__ float fcuda_block_sum(float v, float *red) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = fcuda_warp_sum(v);
    if (lane == 0) red[w] = v;
    __syncthreads();
    v = fcuda_warp_sum(lane < nw ? red[lane] : 0.0f);  // every warp sums the partials: a broadcast
    __syncthreads();                                   // before red is written again
    return v;
}

// The same in double (a warp's butterfly, then the warps' partials in order): for statistics
// that must not lose the 2^-24 of a float sum. red: 32 doubles of shared memory.
__device__ __forceinline__ double fcuda_block_sum_d(double v, double *red) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) red[w] = v;
    __syncthreads();
    v = 0;
    for (int k = 0; k < nw; k++) v += red[k];  // every thread, the same order: the same bits
    __syncthreads();                            // before red is written again
    return v;
}

// max v over the block, returned to every thread (as fcuda_block_sum; NaN-blind like fmaxf).
__device__ __forceinline__ float fcuda_block_max(float v, float *red) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) red[w] = v;
    __syncthreads();
    v = -INFINITY;
    for (int k = 0; k < nw; k++) v = fmaxf(v, red[k]);
    __syncthreads();
    return v;
}

// The same in double (the decoder's online softmax over scores kept in double).
__device__ __forceinline__ double fcuda_block_max_d(double v, double *red) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) red[w] = v;
    __syncthreads();
    v = -INFINITY;
    for (int k = 0; k < nw; k++) v = fmax(v, red[k]);
    __syncthreads();
    return v;
}

#endif
