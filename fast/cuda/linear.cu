// fast/cuda linear layer y = x Wᵀ + b, float32 (phax/fcuda.h; the contract of
// phax/fcpu_linear.h; semantics: ref/linear.c). The products are cuBLAS GEMMs over all rows
// (fast/cuda/blas.cuh); the bias fill and db's column sums are kernels.
//
// In cuBLAS's column-major terms a row-major (r, c) matrix is its (c × r) transpose, ld c:
//   y = x Wᵀ       ⇔  yᵀ (out × n)  = W  · xᵀ   : A = W  (stored in × out: op T), B = x  (op N)
//   dx += dy W     ⇔  dxᵀ (in × n)  += Wᵀ · dyᵀ : A = W  (stored in × out: op N), B = dy (op N)
//   dW += dyᵀ x    ⇔  dWᵀ (in × out) += xᵀ · dy : A = x  (stored in × n: op N),   B = dy (op T)
#include "blas.cuh"

#define LIN_THREADS 256u

// y[r, o] = b[o] (b NULL: 0) over all n·out elements.
static __global__ void bias_rows_k(float *__restrict__ y, const float *__restrict__ b, size_t total, int out) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
        y[i] = b ? b[i % (size_t)out] : 0.0f;
}

// db[o] += Σ_r dy[r, o]: a thread per column, a double accumulator (fast/cpu's sum), rows in
// order, so the bits depend on nothing but the data.
static __global__ void colsum_add_k(float *__restrict__ db, const float *__restrict__ dy, size_t n, int out) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= out) return;
    double acc = 0.0;
    for (size_t r = 0; r < n; r++) acc += dy[r * (size_t)out + o];
    db[o] = (float)((double)db[o] + acc);
}

extern "C" int fcuda_linear_fwd(float *y, const float *x, const float *W, const float *b, size_t n, int in, int out,
                                 void *stream) {
    if (n == 0 || out <= 0) return PHAX_OK;
    if (fcuda_rows_fit(n, "linear_fwd")) return PHAX_ERR;
    cudaStream_t s = fcuda_stream(stream);
    size_t total = n * (size_t)out;
    if (b || in <= 0) {  // y starts as the bias rows (or 0 for an empty product); the GEMM adds
        PHAX_LAUNCH(bias_rows_k, fcuda_ew_blocks(total, LIN_THREADS), LIN_THREADS, 0, s, y, b, total, out);
        if (fcuda_check("linear_fwd")) return PHAX_ERR;
    }
    if (in <= 0) return PHAX_OK;
    return fcuda_blas_gemm("linear_fwd", CUBLAS_OP_T, CUBLAS_OP_N, out, (int)n, in, 1.0f, W, in, x, in,
                            b ? 1.0f : 0.0f, y, out, stream);
}

extern "C" int fcuda_linear_bwd(float *dx, float *dW, float *db, const float *dy, const float *x, const float *W,
                                 size_t n, int in, int out, void *stream) {
    if (n == 0 || out <= 0) return PHAX_OK;
    if (fcuda_rows_fit(n, "linear_bwd")) return PHAX_ERR;
    if (db) {
        unsigned blocks = (unsigned)((out + LIN_THREADS - 1) / LIN_THREADS);
        PHAX_LAUNCH(colsum_add_k, blocks, LIN_THREADS, 0, fcuda_stream(stream), db, dy, n, out);
        if (fcuda_check("linear_bwd")) return PHAX_ERR;
    }
    if (in <= 0) return PHAX_OK;
    if (dx && fcuda_blas_gemm("linear_bwd dx", CUBLAS_OP_N, CUBLAS_OP_N, in, (int)n, out, 1.0f, W, in, dy, out,
                               1.0f, dx, in, stream))
        return PHAX_ERR;
    if (dW && fcuda_blas_gemm("linear_bwd dW", CUBLAS_OP_N, CUBLAS_OP_T, in, out, (int)n, 1.0f, x, in, dy, out,
                               1.0f, dW, in, stream))
        return PHAX_ERR;
    return PHAX_OK;
}
