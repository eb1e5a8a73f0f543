// bench_gemm: fcpu_sgemm (fast/cpu/gemm.c: C split into one block per OpenMP
// thread, one single-threaded OpenBLAS call per block) against cblas_sgemm with
// OpenBLAS's own threads and against one thread, on the products of the d = 256
// models (every (transpose, M, N, K) a training step of the bench config makes:
// projections, SwiGLU, the fused head's tile, their weight gradients).
//
// usage: bench_gemm [out.csv]
//
// GFLOP/s = 2·M·N·K / median. The two 2-thread modes are timed in alternating
// blocks (OpenBLAS threaded, split, threaded, split — 0.3 s each; switching
// OpenBLAS's thread count between single calls costs more than a small product),
// and each mode's figure is the better of its two block medians, so both see the
// same states of the machine. "1 thread" is one cblas_sgemm on one core: twice
// it is what two independent cores could do. "bf16" is fcpu_gemm_bf16 (fast/cpu/gemm_bf16.c:
// both operands rounded to bf16 in the call, oneDNN's matmul, float32 result) on all threads,
// conversion included; its ceiling row is a 2048³ product, timed in the same run.
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>

#include "bench_util.h"
#include "phax/fcpu_gemm.h"

typedef struct {
    CBLAS_TRANSPOSE ta, tb;
    int M, N, K;
    const char *what;
} shape;

typedef struct {
    shape s;
    const float *A, *B;
    float *C;
    int mode;  // 0: cblas_sgemm (OpenBLAS threads as set), 1: fcpu_sgemm, 2: fcpu_gemm_bf16
} gctx;

static void run(void *v) {
    gctx *g = v;
    int lda = g->s.ta == CblasNoTrans ? g->s.K : g->s.M, ldb = g->s.tb == CblasNoTrans ? g->s.N : g->s.K;
    if (g->mode == 2)
        fcpu_gemm_bf16(g->s.ta, g->s.tb, g->s.M, g->s.N, g->s.K, 1.0f, g->A, lda, g->B, ldb, 0.0f, g->C, g->s.N);
    else if (g->mode)
        fcpu_sgemm(g->s.ta, g->s.tb, g->s.M, g->s.N, g->s.K, 1.0f, g->A, lda, g->B, ldb, 0.0f, g->C,
                   g->s.N);
    else
        cblas_sgemm(CblasRowMajor, g->s.ta, g->s.tb, g->s.M, g->s.N, g->s.K, 1.0f, g->A, lda, g->B,
                    ldb, 0.0f, g->C, g->s.N);
}

int main(int argc, char **argv) {
    const CBLAS_TRANSPOSE N_ = CblasNoTrans, T_ = CblasTrans;
    const int rows[] = {512, 2048};
    int nt = omp_get_max_threads();
    FILE *csv = bench_csv_open(bench_csv_arg(argc, argv, "bench_gemm"),
                               "op,trans,M,N,K,gflops_openblas_threads,gflops_split,gflops_1thread,gflops_bf16");
    bench_print_env(stdout, "bench_gemm");
    printf("%d OpenMP threads; GFLOP/s = 2·M·N·K / median; threaded and split timed in alternating "
           "blocks (better block each)\n\n",
           nt);
    int bf16 = fcpu_bf16_available();
    printf("bf16 products: %s\n\n", bf16 ? fcpu_bf16_impl(2048, 2048, 2048) : "none (built without oneDNN)");
    printf("%-26s %2s %5s %5s %5s %10s %10s %10s %8s %10s %9s\n", "product", "tr", "M", "N", "K",
           "OB thr", "split", "1 thread", "split/OB", "bf16", "bf16/split");
    bench_policy bp = {3, 1000, 0.3, 0};
    for (int ri = 0; ri < 2; ri++) {
        int n = rows[ri];
        const shape sh[] = {
            {N_, T_, n, 683, 256, "SwiGLU gate/up  x.W^T"},
            {N_, T_, n, 256, 683, "SwiGLU down     h.W^T"},
            {N_, T_, n, 256, 256, "q / out proj    x.W^T"},
            {N_, T_, n, 64, 256, "k / v proj      x.W^T"},
            {N_, N_, n, 256, 683, "SwiGLU dx       dh.W"},
            {N_, N_, n, 256, 64, "k / v dx        dy.W"},
            {T_, N_, 683, 256, n, "SwiGLU dW       dy^T.x"},
            {T_, N_, 64, 256, n, "k / v dW        dy^T.x"},
            {N_, T_, 512, 8192, 256, "head tile logits"},
            {N_, N_, 512, 256, 8192, "head tile dx    G.W"},
            {T_, N_, 8192, 256, 512, "head tile dW    G^T.x"},
        };
        int ns = ri == 0 ? 11 : 8;  // the head's tile is 512 rows at any T
        if (ri == 1) ns = 9;          // and the ceiling row: a 2048³ product
        shape ceil_row = {N_, N_, 2048, 2048, 2048, "ceiling (square)"};
        for (int i = 0; i < ns; i++) {
            shape s = ri == 1 && i == 8 ? ceil_row : sh[i];
            float *A = bench_falloc((size_t)s.M * s.K, 31), *B = bench_falloc((size_t)s.K * s.N, 32);
            float *C = bench_falloc((size_t)s.M * s.N, 33);
            gctx g = {s, A, B, C, 0};
            double best[2] = {1e30, 1e30};
            for (int blk = 0; blk < 4; blk++) {
                int mode = blk & 1;
                if (mode) {
                    fcpu_blas_single();
                } else {
                    openblas_set_num_threads(nt);
                    omp_set_num_threads(nt);
                }
                g.mode = mode;
                double t = bench_time(run, &g, bp).med;
                if (t < best[mode]) best[mode] = t;
            }
            fcpu_blas_single();  // one thread: a plain call (OpenBLAS is single-threaded now)
            g.mode = 0;
            omp_set_num_threads(1);
            double t1 = bench_time(run, &g, bp).med;
            omp_set_num_threads(nt);
            double tb = NAN;
            if (bf16) {
                g.mode = 2;
                tb = bench_time(run, &g, bp).med;
            }
            double f = 2.0 * s.M * s.N * s.K * 1e-9;
            char tr[3] = {s.ta == N_ ? 'N' : 'T', s.tb == N_ ? 'N' : 'T', 0};
            printf("%-26s %2s %5d %5d %5d %10.1f %10.1f %10.1f %7.2fx %10.1f %8.2fx\n", s.what, tr, s.M, s.N,
                   s.K, f / best[0], f / best[1], f / t1, best[0] / best[1], f / tb, best[1] / tb);
            if (csv)
                fprintf(csv, "%s,%s,%d,%d,%d,%.2f,%.2f,%.2f,%.2f\n", s.what, tr, s.M, s.N, s.K, f / best[0],
                        f / best[1], f / t1, f / tb);
            phax_free(A), phax_free(B), phax_free(C);
        }
    }
    char la[64];
    printf("\nload average at the end %s\n", bench_loadavg(la, sizeof la));
    bench_csv_close(csv);
    return 0;
}
