// fast/cpu matrix products: every linear layer's sgemm goes through here.
#ifndef PHAX_FCPU_GEMM_H
#define PHAX_FCPU_GEMM_H

// Transpose flags of fcpu_sgemm: the values of CBLAS's CblasNoTrans and CblasTrans
// (fast/cpu/gemm.c checks they agree), so callers that include <cblas.h> may pass
// those; this header keeps <cblas.h> out of the public API.
#define FCPU_NOTRANS 111
#define FCPU_TRANS 112

// Row-major C (M×N) = alpha·op(A)·op(B) + beta·C with op(A): M×K, op(B): K×N —
// cblas_sgemm's arguments without the order. Outside an OpenMP parallel region,
// and for products of at least 2^18 multiply-adds, the caller's OpenMP threads
// split C's rows (or its columns when it has too few rows) into contiguous blocks,
// 16-aligned, and each thread runs one single-threaded cblas_sgemm on its block;
// otherwise one cblas_sgemm call. Each element of C is one call's dot product
// over the whole K, as in the unsplit call. The first call sets OpenBLAS to one
// thread, process-wide (OpenMP's thread count is kept): see fcpu_blas_single.
// ta, tb: FCPU_NOTRANS or FCPU_TRANS.
void fcpu_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                const float *B, int ldb, float beta, float *C, int ldc);

// Sets OpenBLAS to one thread once (idempotent), restoring OpenMP's own thread
// count. Why: on this 2-core machine OpenBLAS's 2-thread sgemm on the models'
// shapes (512..2048 rows, 64..8192 columns, K 64..8192) ran at 100-180 GFLOP/s,
// swinging with the state of the second core, while two single-threaded calls on
// halves of C ran at 160-200 (benchmarks/bench_gemm.c measures both on every
// product of a training step).
// Called by fcpu_sgemm; callers that time OpenBLAS's own threading restore it
// with openblas_set_num_threads(n) and call this again afterwards. Other OpenBLAS
// calls in the process then run on one thread too (the decoder's per-token sgemv
// among them; a process that only decodes never calls this).
void fcpu_blas_single(void);


// --- Matmul precision (fast/cpu/gemm_bf16.c; docs/precision.md) ---------------------------------
// The linear layers, the FFN and the output projection of the loss call fcpu_mm, which runs
// fcpu_sgemm or, when this thread's matmul precision is FCPU_MM_BF16, fcpu_gemm_bf16. The
// products inside attention, the mLSTM and the GSS/DSS kernel call fcpu_sgemm (or their own
// tiles) and stay float32 in either precision.
#define FCPU_MM_F32 0
#define FCPU_MM_BF16 1

// This thread's matmul precision (FCPU_MM_F32 unless set), and setting it: FCPU_MM_BF16 fails
// (phax_error says why) in a build without oneDNN. Thread-local: a model call that sets it
// on entry and restores it on return (src/backend_cpu.c's cpu_bf16 backend) changes no
// other caller.
int fcpu_mm_precision(void);
int fcpu_mm_precision_set(int precision);
void fcpu_mm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
             int ldb, float beta, float *C, int ldc);

// C = alpha·op(Â)·op(B̂) + beta·C with Â, B̂ the operands rounded to bf16 (to nearest, ties
// to even), every product and sum in float32 (oneDNN's matmul primitive): fcpu_sgemm's
// arguments and contract (beta 0: C only written). Primitives are cached per thread; the
// operands' bf16 copies live in a per-thread buffer that only grows.
void fcpu_gemm_bf16(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                    int ldb, float beta, float *C, int ldc);
// 1 when bf16 matmuls run here: built with oneDNN, and oneDNN has a bf16 matmul on this CPU
// (AVX-512 or AMX; probed once). Else fcpu_bf16_unavailable() says why in one line (NULL when
// available), and fcpu_mm_precision_set(FCPU_MM_BF16) fails with it.
int fcpu_bf16_available(void);
const char *fcpu_bf16_unavailable(void);
const char *fcpu_bf16_impl(int M, int N, int K);  // oneDNN's implementation name for an M×N×K product
float fcpu_bf16_round(float x);                // x to nearest bf16, ties to even (as the operands)

#endif
