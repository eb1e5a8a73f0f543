// Kernels that test the CUDA emulator (tests/cuda_emu_kernels.h), compiled as C++ for the
// emulation (PHAX_CUDA_EMU), and by nvcc when it is found (built, not run).
#include "../fast/cuda/cuda_common.cuh"
#include "cuda_emu_kernels.h"
#ifdef PHAX_CUDA_EMU
#include "../fast/cuda/emu/cublas.h"
#else
#include <cublas_v2.h>
#endif

static const char *last_msg = "";

// --- reductions ----------------------------------------------------------------------------------
template <int BUG>
static __global__ void tree_sum_k(float *out, const float *in) {
    PHAX_DYN_SMEM(float, s);
    unsigned t = threadIdx.x, n = blockDim.x;
    s[t] = in[blockIdx.x * n + t];
    if (BUG != EMU_BUG_NO_SYNC_STORE) __syncthreads();
    unsigned p = 1;
    while (p < n) p <<= 1;
    for (unsigned st = p / 2; BUG == EMU_BUG_STRIDE_GT1 ? st > 1 : st > 0; st >>= 1) {
        if (t < st && t + st < n) s[t] += s[t + st];
        if (BUG != EMU_BUG_NO_SYNC_LOOP) __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

// Σ v over the first nl lanes of a warp (mask: those lanes) by shuffles down.
template <int BUG>
__device__ float warp_sum_down(float v, unsigned mask, unsigned lane, unsigned nl) {
    for (unsigned o = 16; BUG == EMU_BUG_STRIDE_GT1 ? o > 1 : o > 0; o >>= 1) {
        float u = __shfl_down_sync(mask, v, o);
        if (lane + o < nl) v += u;
    }
    return v;
}

template <int BUG>
static __global__ void shfl_sum_k(float *out, const float *in) {
    __shared__ float part[32];
    unsigned t = threadIdx.x, lane = t & 31, w = t >> 5, nw = (blockDim.x + 31) / 32;
    unsigned nl = blockDim.x - w * 32 < 32 ? blockDim.x - w * 32 : 32;
    unsigned mask = nl == 32 ? 0xffffffffu : (1u << nl) - 1u;
    float v = warp_sum_down<BUG>(in[blockIdx.x * blockDim.x + t], mask, lane, nl);
    if (lane == 0) part[w] = v;
    if (BUG != EMU_BUG_NO_SYNC_STORE) __syncthreads();
    if (w == 0) {
        v = warp_sum_down<BUG>(lane < nw ? part[lane] : 0.0f, mask, lane, nl);
        if (lane == 0) out[blockIdx.x] = v;
    }
}

static __global__ void xor_vote_k(float *out, int *ok, int *votes, int *anyall, const float *in) {
    __shared__ float part[32];
    __shared__ int nvote[32], nany[32], nall[32], nsame[32];
    unsigned t = threadIdx.x, lane = t & 31, w = t >> 5, nw = blockDim.x / 32;
    float x = in[blockIdx.x * blockDim.x + t];
    float v = fcuda_warp_sum(x);
    float v0 = __shfl_sync(0xffffffffu, v, 0);  // every lane must hold lane 0's sum
    unsigned same = __ballot_sync(0xffffffffu, v == v0);
    unsigned pos = __ballot_sync(0xffffffffu, x > 0);
    int any_big = __any_sync(0xffffffffu, x > 2.5f), all_small = __all_sync(0xffffffffu, x < 100.0f);
    if (lane == 0) part[w] = v, nvote[w] = __popc(pos), nany[w] = any_big, nall[w] = all_small, nsame[w] = same == 0xffffffffu;
    __syncthreads();
    if (t == 0) {
        float s = 0;
        int nv = 0, na = 0, al = 1, sm = 1;
        for (unsigned k = 0; k < nw; k++) s += part[k], nv += nvote[k], na |= nany[k], al &= nall[k], sm &= nsame[k];
        out[blockIdx.x] = s, votes[blockIdx.x] = nv, anyall[blockIdx.x] = na * 2 + al, ok[blockIdx.x] = sm;
    }
}

// --- shared memory poison ------------------------------------------------------------------------
static __global__ void smem_poison_k(float *out) {
    __shared__ float s[64];
    PHAX_DYN_SMEM(float, dyn);
    unsigned t = threadIdx.x;
    if (blockIdx.x == 0) s[t] = 1.0f, dyn[t] = 2.0f;
    __syncthreads();
    out[(blockIdx.x * blockDim.x + t) * 2] = s[t];
    out[(blockIdx.x * blockDim.x + t) * 2 + 1] = dyn[t];
}

// --- broken kernels ------------------------------------------------------------------------------
static __global__ void broken_k(int which, float *out) {
    unsigned t = threadIdx.x, lane = t & 31;
    float v = (float)t;
    switch (which) {
        case 0:
            if (t % 2 == 0) __syncthreads();
            break;
        case 1:
            if (t % 2 == 0)
                __syncthreads();
            else
                __syncthreads();
            break;
        case 2:
            if (lane == 5) return;
            v = __shfl_xor_sync(0xffffffffu, v, 1);
            break;
        case 3:
            v = __shfl_xor_sync(lane < 16 ? 0x0000ffffu : 0xffffffffu, v, 1);
            break;
    }
    out[t] = v;
}

static __global__ void iota_k(float *out) { out[threadIdx.x] = (float)threadIdx.x; }

// --- host side -----------------------------------------------------------------------------------
static int fail(cudaError_t e) {
    last_msg = cudaGetErrorString(e);
    return (int)e;
}
#define TRY(call)                              \
    do {                                       \
        cudaError_t e_ = (call);               \
        if (e_ != cudaSuccess) return fail(e_); \
    } while (0)

template <class K>
static int run_sum(K k, unsigned grid, unsigned block, size_t smem, float *out, const float *in) {
    float *din, *dout;
    TRY(cudaMalloc(&din, (size_t)grid * block * sizeof(float)));
    TRY(cudaMalloc(&dout, grid * sizeof(float)));
    TRY(cudaMemcpy(din, in, (size_t)grid * block * sizeof(float), cudaMemcpyHostToDevice));
    PHAX_LAUNCH(k, grid, block, smem, 0, dout, din);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaMemcpy(out, dout, grid * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(din), cudaFree(dout);
    return e == cudaSuccess ? 0 : fail(e);
}

extern "C" int emu_tree_sum(int bug, unsigned grid, unsigned block, float *out, const float *in) {
    size_t sm = block * sizeof(float);
    switch (bug) {
        case EMU_BUG_STRIDE_GT1: return run_sum(tree_sum_k<EMU_BUG_STRIDE_GT1>, grid, block, sm, out, in);
        case EMU_BUG_NO_SYNC_STORE: return run_sum(tree_sum_k<EMU_BUG_NO_SYNC_STORE>, grid, block, sm, out, in);
        case EMU_BUG_NO_SYNC_LOOP: return run_sum(tree_sum_k<EMU_BUG_NO_SYNC_LOOP>, grid, block, sm, out, in);
        default: return run_sum(tree_sum_k<EMU_OK>, grid, block, sm, out, in);
    }
}

extern "C" int emu_shfl_sum(int bug, unsigned grid, unsigned block, float *out, const float *in) {
    switch (bug) {
        case EMU_BUG_STRIDE_GT1: return run_sum(shfl_sum_k<EMU_BUG_STRIDE_GT1>, grid, block, 0, out, in);
        case EMU_BUG_NO_SYNC_STORE: return run_sum(shfl_sum_k<EMU_BUG_NO_SYNC_STORE>, grid, block, 0, out, in);
        default: return run_sum(shfl_sum_k<EMU_OK>, grid, block, 0, out, in);
    }
}

extern "C" int emu_xor_vote(unsigned grid, unsigned block, float *out, int *ok, int *votes, int *anyall,
                            const float *in) {
    float *din, *dout;
    int *dok, *dvotes, *danyall;
    TRY(cudaMalloc(&din, (size_t)grid * block * sizeof(float)));
    TRY(cudaMalloc(&dout, grid * sizeof(float)));
    TRY(cudaMalloc(&dok, grid * sizeof(int)));
    TRY(cudaMalloc(&dvotes, grid * sizeof(int)));
    TRY(cudaMalloc(&danyall, grid * sizeof(int)));
    TRY(cudaMemcpy(din, in, (size_t)grid * block * sizeof(float), cudaMemcpyHostToDevice));
    PHAX_LAUNCH(xor_vote_k, grid, block, 0, 0, dout, dok, dvotes, danyall, (const float *)din);
    TRY(cudaGetLastError());
    TRY(cudaMemcpy(out, dout, grid * sizeof(float), cudaMemcpyDeviceToHost));
    TRY(cudaMemcpy(ok, dok, grid * sizeof(int), cudaMemcpyDeviceToHost));
    TRY(cudaMemcpy(votes, dvotes, grid * sizeof(int), cudaMemcpyDeviceToHost));
    TRY(cudaMemcpy(anyall, danyall, grid * sizeof(int), cudaMemcpyDeviceToHost));
    cudaFree(din), cudaFree(dout), cudaFree(dok), cudaFree(dvotes), cudaFree(danyall);
    return 0;
}

extern "C" int emu_smem_poison(unsigned grid, unsigned block, float *out) {
    float *d;
    size_t n = (size_t)grid * block * 2;
    TRY(cudaMalloc(&d, n * sizeof(float)));
    PHAX_LAUNCH(smem_poison_k, grid, block, block * sizeof(float), 0, d);
    TRY(cudaGetLastError());
    TRY(cudaMemcpy(out, d, n * sizeof(float), cudaMemcpyDeviceToHost));
    cudaFree(d);
    return 0;
}

extern "C" int emu_broken(int which, unsigned block) {
    float *d;
    TRY(cudaMalloc(&d, block * sizeof(float)));
    PHAX_LAUNCH(broken_k, 1, block, 0, 0, which, d);
    cudaError_t e = cudaGetLastError();
    cudaFree(d);
    return e == cudaSuccess ? 0 : fail(e);
}

extern "C" int emu_config(unsigned block, float *out) {
    float *d;
    TRY(cudaMalloc(&d, block * sizeof(float)));
    PHAX_LAUNCH(iota_k, 1, block, 0, 0, d);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaMemcpy(out, d, block * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(d);
    return e == cudaSuccess ? 0 : fail(e);
}

extern "C" int emu_bad_copy(void) {
    float *d, h[4] = {0, 0, 0, 0};
    TRY(cudaMalloc(&d, sizeof h));
    cudaError_t e = cudaMemcpy(h, d, sizeof h, cudaMemcpyHostToDevice);  // arguments swapped
    cudaFree(d);
    return e == cudaSuccess ? 0 : fail(e);
}

extern "C" int emu_malloc_poisoned(size_t n) {
    float *d, *h = new float[n];
    if (cudaMalloc(&d, n * sizeof(float)) != cudaSuccess) return 0;
    int all = cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess;
    for (size_t i = 0; i < n; i++) all = all && h[i] != h[i];
    cudaFree(d);
    delete[] h;
    return all;
}

extern "C" const char *emu_error(void) { return last_msg; }

// --- cuBLAS --------------------------------------------------------------------------------------
extern "C" int emu_blas(int which, int ta, int tb, int m, int n, int k, const float *A, int lda, const float *B,
                        int ldb, float beta, float *C, int ldc, int batch, long long sA, long long sB, long long sC) {
    cublasHandle_t h;
    cublasStatus_t s = cublasCreate(&h);
    if (s != CUBLAS_STATUS_SUCCESS) return (int)s;
    float alpha = 1.0f;
    const float *pa = &alpha;
    cublasOperation_t oa = (cublasOperation_t)ta, ob = (cublasOperation_t)tb;
    if (which == EMU_BLAS_DESTROYED) cublasDestroy(h);
    if (which == EMU_BLAS_ALPHA_DEVICE) pa = A;
    switch (which) {
        case EMU_BLAS_GEMMEX:
        case EMU_BLAS_GEMMEX_TF32:
        case EMU_BLAS_GEMMEX_64F:
            s = cublasGemmEx(h, oa, ob, m, n, k, pa, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, &beta, C, CUDA_R_32F, ldc,
                             which == EMU_BLAS_GEMMEX        ? CUBLAS_COMPUTE_32F
                             : which == EMU_BLAS_GEMMEX_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                             : (cublasComputeType_t)70,
                             CUBLAS_GEMM_DEFAULT);
            break;
        case EMU_BLAS_STRIDED:
            s = cublasSgemmStridedBatched(h, oa, ob, m, n, k, pa, A, lda, sA, B, ldb, sB, &beta, C, ldc, sC, batch);
            break;
        default: s = cublasSgemm(h, oa, ob, m, n, k, pa, A, lda, B, ldb, &beta, C, ldc); break;
    }
    last_msg = s == CUBLAS_STATUS_SUCCESS ? "" : cublasGetStatusString(s);
    cudaGetLastError();
    if (which != EMU_BLAS_DESTROYED) cublasDestroy(h);
    return (int)s;
}
