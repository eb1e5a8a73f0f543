// Benchmark: fast/cpu mLSTM chunkwise forward and backward (fcpu_mlstm_chunkwise_*).
//
// Sizes: B = 1, H = 4, dqk = 32, dv = 64 (one mLSTM layer of a d = 256 model),
// T = 512 … 16384, chunk 32 / 64 / 128. Each timing: one warm-up call, then
// repeats until ≥ 5 runs and ≥ 0.5 s; the median is reported.
//
// FLOP counts (the sgemm work the kernels execute; the L×L products are
// computed in full although only their causal half is used):
//   forward  = B·H·T·(2L(dqk + dv) + 4·dqk·dv)
//              [q̂Kᵀ, W V per chunk: 2L²dqk + 2L²dv; inter q̂C and the state
//               update KᵀV: 2·2L·dqk·dv]
//   backward = B·H·T·(6L(dqk + dv) + 12·dqk·dv)
//              [recompute q̂Kᵀ, WV, q̂C; dnum Vᵀ, dW K, dWᵀ q̂, Wᵀ dnum; dnum Cᵀ,
//               V dCᵀ, (wK) dC, q̂ᵀ dnum; the state pass]
// Elementwise work (L²/2 exps per chunk, gates) is not counted.
//
// Ceiling: cblas_sgemm on the chunk-sized products the kernels issue, run the
// same way (one product per OpenMP thread, all threads at once, OpenBLAS set to
// one thread as the kernels do): the mix q̂Kᵀ (L×dqk·dqk×L), W V (L×L·L×dv), KᵀV (dqk×L·L×dv),
// q̂C (L×dqk·dqk×dv) in the kernel's proportions. "% sgemm" = kernel GFLOP/s
// over that mix's GFLOP/s. A large sgemm (1024³, OpenBLAS threads) is printed
// as the machine's peak for reference.
//
// Times: wall clock (the number that matters on an idle machine) and, beside
// it, CPU seconds summed over the process's threads — the robust figure on a
// shared, loaded machine, where a thread descheduled mid-call stalls the other
// at the end of the parallel region (OpenMP spin-waits count as CPU time).
//
// Speed-up over ref: ref_mlstm_parallel_fwd/bwd (float64, O(T²)) at T = 512,
// timed once each (and ref_mlstm_recurrent_*, O(T·dqk·dv), for comparison).
//
// Usage: bench_mlstm [out.csv]
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "phax/fast.h"
#include "phax/fcpu_mlstm.h"
#include "phax/ref.h"
#include "bench_util.h"

// Timing (bench_util.h): one warm-up, then ≥ 5 runs and ≥ 0.5 s (≤ 200 runs);
// median wall seconds, and in *cpu the median CPU seconds summed over threads.
static double timeit2(void (*fn)(void *), void *ctx, double *cpu) {
    bench_stats s = bench_time(fn, ctx, (bench_policy){5, 200, 0.5, 0});
    if (cpu) *cpu = s.cpu_med;
    return s.med;
}
typedef struct {
    int B, T, H, dqk, dv, chunk;
    float *q, *k, *v, *ig, *fg, *h, *dh, *dq, *dk, *dvv, *dig, *dfg;
    void *wsf, *wsb;
} mctx;

static void run_fwd(void *p) {
    mctx *c = p;
    fcpu_mlstm_chunkwise_fwd(c->h, c->q, c->k, c->v, c->ig, c->fg, c->B, c->T, c->H, c->dqk, c->dv,
                             (float)PHAX_MLSTM_EPS, c->chunk, NULL, NULL, c->wsf);
}
static void run_bwd(void *p) {
    mctx *c = p;
    fcpu_mlstm_chunkwise_bwd(c->dq, c->dk, c->dvv, c->dig, c->dfg, c->dh, c->q, c->k, c->v, c->ig,
                             c->fg, c->B, c->T, c->H, c->dqk, c->dv, (float)PHAX_MLSTM_EPS,
                             c->chunk, c->wsb);
}

// --- sgemm ceiling: the kernel's chunk-sized products, one per thread ---------
typedef struct {
    int L, dqk, dv, reps;
    float *buf[8];  // per thread: A, B, C scratch
} gctx;

static void gemm_mix(void *p) {
    gctx *g = p;
    int L = g->L, dqk = g->dqk, dv = g->dv;
#pragma omp parallel
    {
        float *A = g->buf[omp_get_thread_num() % 8];
        float *Bm = A + 256 * 256, *C = Bm + 256 * 256;
        for (int r = 0; r < g->reps; r++) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, L, L, dqk, 1.0f, A, dqk, Bm, dqk,
                        0.0f, C, L);  // q̂Kᵀ
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, L, dv, L, 1.0f, A, L, Bm, dv,
                        0.0f, C, dv);  // W V
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, dqk, dv, L, 1.0f, A, dqk, Bm, dv,
                        1.0f, C, dv);  // Kᵀ V
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, L, dv, dqk, 1.0f, A, dqk, Bm, dv,
                        0.0f, C, dv);  // q̂ C
        }
    }
}

static void fill(float *x, size_t n, unsigned *s, float mu, float sd) {
    for (size_t i = 0; i < n; i++) {
        *s = *s * 1664525u + 1013904223u;
        float u1 = ((*s >> 8) + 0.5f) / 16777216.0f;
        *s = *s * 1664525u + 1013904223u;
        float u2 = ((*s >> 8) + 0.5f) / 16777216.0f;
        x[i] = mu + sd * sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
    }
}

int main(int argc, char **argv) {
    const int B = 1, H = 4, dqk = 32, dv = 64, Tmax = 16384;
    const int Ts[] = {512, 1024, 2048, 4096, 8192, 16384};
    const int chunks[] = {32, 64, 128};
    FILE *csv = bench_csv_open(bench_csv_arg(argc, argv, "bench_mlstm"),
                               "op,B,T,H,dqk,dv,chunk,median_ms,gflops,pct_sgemm,median_cpu_ms,"
                               "gflop_per_cpu_s,pct_sgemm_cpu,speedup_vs_ref_wall,"
                               "speedup_vs_ref_cpu");
    char info[256];
    phax_cpu_info(info, sizeof info);
    bench_print_env(stdout, "bench_mlstm");
    printf("%s\n", info);

    // Buffers for the largest T, allocated and touched once.
    size_t ng = (size_t)B * Tmax * H, nk = ng * dqk, nv = ng * dv;
    unsigned seed = 12345u;
    mctx c = {.B = B, .H = H, .dqk = dqk, .dv = dv};
    c.q = bench_xmalloc(nk * 4), c.k = bench_xmalloc(nk * 4), c.v = bench_xmalloc(nv * 4);
    c.ig = bench_xmalloc(ng * 4), c.fg = bench_xmalloc(ng * 4), c.h = bench_xmalloc(nv * 4), c.dh = bench_xmalloc(nv * 4);
    c.dq = bench_xmalloc(nk * 4), c.dk = bench_xmalloc(nk * 4), c.dvv = bench_xmalloc(nv * 4);
    c.dig = bench_xmalloc(ng * 4), c.dfg = bench_xmalloc(ng * 4);
    fill(c.q, nk, &seed, 0, 1), fill(c.k, nk, &seed, 0, 1), fill(c.v, nv, &seed, 0, 1);
    fill(c.ig, ng, &seed, 0, 2), fill(c.fg, ng, &seed, 3, 1.5f), fill(c.dh, nv, &seed, 0, 1);
    size_t wsf = 0, wsb = 0;
    for (int ic = 0; ic < 3; ic++) {
        size_t a = fcpu_mlstm_chunkwise_fwd_ws(B, Tmax, H, dqk, dv, chunks[ic]);
        size_t b = fcpu_mlstm_chunkwise_bwd_ws(B, Tmax, H, dqk, dv, chunks[ic]);
        wsf = a > wsf ? a : wsf, wsb = b > wsb ? b : wsb;
    }
    c.wsf = bench_xmalloc(wsf), c.wsb = bench_xmalloc(wsb);

    // Ceilings.
    float *bgA = bench_xmalloc(1024 * 1024 * 4), *bgB = bench_xmalloc(1024 * 1024 * 4);
    float *bgC = bench_xmalloc(1024 * 1024 * 4);
    fill(bgA, 1024 * 1024, &seed, 0, 1), fill(bgB, 1024 * 1024, &seed, 0, 1);
    bench_stats sbig = bench_sgemm_time(CblasNoTrans, CblasNoTrans, 1024, 1024, 1024, bgA, bgB,
                                        bgC, (bench_policy){5, 200, 0.5, 0});
    double tbig = sbig.med, tbigc = sbig.cpu_med;
    free(bgA), free(bgB), free(bgC);
    printf("sgemm 1024^3 (OpenBLAS threads): %.1f GFLOP/s wall, %.1f GFLOP per CPU-second\n",
           2.0 * 1024 * 1024 * 1024 / tbig * 1e-9, 2.0 * 1024 * 1024 * 1024 / tbigc * 1e-9);
    double mix_gf[3], mix_cpu[3];
    gctx gc = {.dqk = dqk, .dv = dv, .reps = 200};
    for (int i = 0; i < 8; i++) {
        gc.buf[i] = bench_xmalloc(3 * 256 * 256 * 4);
        fill(gc.buf[i], 3 * 256 * 256, &seed, 0, 1);
    }
    int nth = omp_get_max_threads(), blas_threads = openblas_get_num_threads();
    if (nth > 1) openblas_set_num_threads(1);  // as the kernels do: one BLAS call per thread
    for (int ic = 0; ic < 3; ic++) {
        int L = chunks[ic];
        gc.L = L;
        double tc, t = timeit2(gemm_mix, &gc, &tc);
        double fl =
            (double)nth * gc.reps * (2.0 * L * L * dqk + 2.0 * L * L * dv + 4.0 * L * dqk * dv);
        mix_gf[ic] = fl / t * 1e-9, mix_cpu[ic] = fl / tc * 1e-9;
        printf(
            "sgemm chunk mix L=%-3d (%d threads, one product each): %.1f GFLOP/s wall, "
            "%.1f GFLOP per CPU-second\n",
            L, nth, mix_gf[ic], mix_cpu[ic]);
        if (csv)
            fprintf(csv, "sgemm_mix,%d,%d,%d,%d,%d,%d,%.6f,%.3f,100,%.6f,%.3f,100,,\n", B, 0, H,
                    dqk, dv, L, t * 1e3 / gc.reps, mix_gf[ic], tc * 1e3 / gc.reps, mix_cpu[ic]);
    }
    openblas_set_num_threads(blas_threads);

    // Reference at T = 512 (float64), once each.
    double ref_fwd_s = 0, ref_bwd_s = 0, rrec_fwd_s = 0, rrec_bwd_s = 0;
    double ref_fwd_c = 0, ref_bwd_c = 0, rrec_fwd_c = 0, rrec_bwd_c = 0;
    {
        int T = 512;
        size_t g = (size_t)B * T * H, K = g * dqk, V = g * dv;
        double *q = bench_xmalloc(K * 8), *k = bench_xmalloc(K * 8), *v = bench_xmalloc(V * 8), *ig = bench_xmalloc(g * 8);
        double *fg = bench_xmalloc(g * 8), *h = bench_xmalloc(V * 8), *dh = bench_xmalloc(V * 8);
        double *dq = bench_xmalloc(K * 8), *dk = bench_xmalloc(K * 8), *dvv = bench_xmalloc(V * 8);
        double *dig = bench_xmalloc(g * 8), *dfg = bench_xmalloc(g * 8);
        // Same values as the float buffers' first T rows (layout (B, T, H, ·), B = 1).
        for (size_t i = 0; i < K; i++) q[i] = c.q[i], k[i] = c.k[i];
        for (size_t i = 0; i < V; i++) v[i] = c.v[i], dh[i] = c.dh[i];
        for (size_t i = 0; i < g; i++) ig[i] = c.ig[i], fg[i] = c.fg[i];
        // (single-threaded: wall and CPU time agree on an idle machine; the CPU
        // time is kept as the robust figure)
        double a = bench_wall(), ca = bench_cpu();
        ref_mlstm_parallel_fwd(h, q, k, v, ig, fg, B, T, H, dqk, dv, PHAX_MLSTM_EPS);
        ref_fwd_s = bench_wall() - a, ref_fwd_c = bench_cpu() - ca;
        a = bench_wall(), ca = bench_cpu();
        ref_mlstm_parallel_bwd(dq, dk, dvv, dig, dfg, dh, q, k, v, ig, fg, B, T, H, dqk, dv,
                               PHAX_MLSTM_EPS);
        ref_bwd_s = bench_wall() - a, ref_bwd_c = bench_cpu() - ca;
        a = bench_wall(), ca = bench_cpu();
        ref_mlstm_recurrent_fwd(h, q, k, v, ig, fg, B, T, H, dqk, dv, PHAX_MLSTM_EPS, 0.0);
        rrec_fwd_s = bench_wall() - a, rrec_fwd_c = bench_cpu() - ca;
        a = bench_wall(), ca = bench_cpu();
        ref_mlstm_recurrent_bwd(dq, dk, dvv, dig, dfg, dh, q, k, v, ig, fg, B, T, H, dqk, dv,
                                PHAX_MLSTM_EPS, 0.0);
        rrec_bwd_s = bench_wall() - a, rrec_bwd_c = bench_cpu() - ca;
        printf(
            "ref T=512 (wall / CPU ms): parallel fwd %.1f / %.1f, bwd %.1f / %.1f; "
            "recurrent fwd %.1f / %.1f, bwd %.1f / %.1f\n",
            ref_fwd_s * 1e3, ref_fwd_c * 1e3, ref_bwd_s * 1e3, ref_bwd_c * 1e3, rrec_fwd_s * 1e3,
            rrec_fwd_c * 1e3, rrec_bwd_s * 1e3, rrec_bwd_c * 1e3);
        free(q), free(k), free(v), free(ig), free(fg), free(h), free(dh);
        free(dq), free(dk), free(dvv), free(dig), free(dfg);
    }

    printf("\n%-4s %-26s %9s %8s %7s %9s %8s %7s %14s\n", "op", "(B,T,H,dqk,dv) chunk", "wall ms",
           "GFLOP/s", "%sgemm", "CPU ms", "GF/CPUs", "%sgemm", "vs ref w/CPU");
    for (int ic = 0; ic < 3; ic++)
        for (size_t it = 0; it < sizeof Ts / sizeof *Ts; it++) {
            int T = Ts[it], L = chunks[ic];
            c.T = T, c.chunk = L;
            for (int op = 0; op < 2; op++) {
                double tc, t = timeit2(op ? run_bwd : run_fwd, &c, &tc);
                double fl = (double)B * H * T *
                            (op ? 6.0 * L * (dqk + dv) + 12.0 * dqk * dv
                                : 2.0 * L * (dqk + dv) + 4.0 * dqk * dv);
                double gf = fl / t * 1e-9, pct = 100 * gf / mix_gf[ic];
                double gfc = fl / tc * 1e-9, pctc = 100 * gfc / mix_cpu[ic];
                double sp = T == 512 ? (op ? ref_bwd_s : ref_fwd_s) / t : 0;
                double spc = T == 512 ? (op ? ref_bwd_c : ref_fwd_c) / tc : 0;
                char shape[64], spb[48] = "";
                snprintf(shape, sizeof shape, "(%d,%d,%d,%d,%d) %d", B, T, H, dqk, dv, L);
                if (sp > 0) snprintf(spb, sizeof spb, "%.0fx / %.0fx", sp, spc);
                printf("%-4s %-26s %9.3f %8.1f %6.1f%% %9.3f %8.1f %6.1f%% %14s\n",
                       op ? "bwd" : "fwd", shape, t * 1e3, gf, pct, tc * 1e3, gfc, pctc, spb);
                if (csv) {
                    fprintf(csv, "%s,%d,%d,%d,%d,%d,%d,%.6f,%.3f,%.2f,%.6f,%.3f,%.2f,",
                            op ? "bwd" : "fwd", B, T, H, dqk, dv, L, t * 1e3, gf, pct, tc * 1e3,
                            gfc, pctc);
                    if (sp > 0)
                        fprintf(csv, "%.1f,%.1f", sp, spc);
                    else
                        fprintf(csv, ",");
                    fprintf(csv, "\n");
                }
            }
        }
    bench_csv_close(csv);
    return 0;
}
