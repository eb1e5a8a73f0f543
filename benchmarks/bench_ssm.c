// bench_ssm: fast/cpu ssm — the DSS kernel (fwd/bwd) and the SSM convolution
// (FFT and direct, fwd/bwd) at B = 1, H = 64, N = 64 (a d = 256 model's H_s = d/4),
// T = 512 … 16384; the direct/FFT crossover at small T; FFTW_ESTIMATE vs
// FFTW_MEASURE; sgemm as the machine's ceiling; speed-up over ref at T = 512.
//
// usage: bench_ssm [out.csv]
//
// FLOP counts (stated, not measured):
//   dss fwd      2·H·(2N)·T            the sgemm (H·T/256 × 2N)·(2N × 256) (lags in blocks
//                                      of 256; forming its operands, H·N·T/256 complex
//                                      products and N·(256 + T/256) powers, not counted)
//   dss bwd      2·H·(4N)·T            the dgemm (H·T/512 × 512)·(512 × 4N) (double; the
//                                      combination over blocks, 2·H·N·T/512 complex FMAs,
//                                      not counted)
//   conv fft fwd (H + 2BH)·2.5·n·log2 n + 6·BH·(n/2+1)
//                                      one real transform (r2c or c2r) of length n counted as
//                                      2.5·n·log2 n, i.e. 5·n·log2 n per r2c/c2r pair, plus
//                                      the complex products; H kernel transforms, BH of u, BH back
//   conv fft bwd (2H + 3BH)·2.5·n·log2 n + 12·BH·(n/2+1)
//                                      H kernel, BH dy, BH u forward; BH du, H dK back
//   conv direct  fwd 2·BH·T(T+1)/2 + 2·BTH, bwd twice the sum (du and dK) + 2·BTH
// "eff" columns for the FFT rows give the direct count divided by the FFT time (the
// GFLOP/s a direct convolution would need to match it).
//
// Environment. With OpenBLAS (pthreads build) and OpenMP both at 2 threads on 2 cores,
// OpenBLAS's worker spins for 2^28 cycles after every call and steals a core from the
// next OpenMP region: wall-clock medians then show 8–16 ms scheduler stalls. Run with
// OPENBLAS_THREAD_TIMEOUT=4 (read when OpenBLAS loads, so it cannot be set from main).
// On a machine shared with other jobs, BENCH_CLOCK=cpu with OMP_NUM_THREADS=1
// OPENBLAS_NUM_THREADS=1 gives the single-core compute time. BENCH_TMAX caps T;
// BENCH_NO_MEASURE skips the FFTW_MEASURE plans (seconds of planning per T).
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "phax/fcpu_ssm.h"
#include "phax/ref.h"
#include "bench_util.h"

// Timing and buffers: bench_util.h. BENCH_CLOCK=cpu times with the process CPU
// clock instead of the wall clock: with one thread (OMP_NUM_THREADS=1
// OPENBLAS_NUM_THREADS=1) that is the compute time even on a machine shared with
// other jobs, where wall-clock medians measure the scheduler.
static double tmin;  // the fastest repeat of the last time_med
// Median seconds of fn: one warm-up, then ≥ 5 repeats and ≥ 0.5 s (at most 1000).
static double time_med(bench_fn fn, void *ctx) {
    bench_stats s = bench_time(fn, ctx, BENCH_POLICY);
    tmin = s.min;
    return s.med;
}
// sgemm (row-major, no transposes) M×K · K×N on the given buffers, the ceiling's timing.
static double time_sgemm(int M, int N, int K, const float *A, const float *B, float *C) {
    bench_stats s = bench_sgemm_time(CblasNoTrans, CblasNoTrans, M, N, K, A, B, C, BENCH_POLICY);
    tmin = s.min;
    return s.med;
}

// --- contexts ------------------------------------------------------------------------------
typedef struct {
    int B, T, H, N;
    float *Lre, *Lim, *Cre, *Cim, *K, *dK, *D, *u, *y, *dy, *du, *dD;
    float *gLre, *gLim, *gCre, *gCim;
    void *ws;
    fcpu_ssm_plan *plan;
    // ref
    double *rLre, *rLim, *rCre, *rCim, *rK, *rdK, *rD, *ru, *ry, *rdy, *rdu, *rdD, *rg[4];
} ctx_t;

static void f_dss_fwd(void *p) {
    ctx_t *c = p;
    fcpu_dss_kernel_fwd(c->K, c->Lre, c->Lim, c->Cre, c->Cim, c->H, c->N, c->T, c->ws);
}
static void f_dss_bwd(void *p) {
    ctx_t *c = p;
    fcpu_dss_kernel_bwd(c->gLre, c->gLim, c->gCre, c->gCim, c->dK, c->Lre, c->Lim, c->Cre, c->Cim,
                        c->H, c->N, c->T, c->ws);
}
static void f_conv_fwd(void *p) {
    ctx_t *c = p;
    if (fcpu_ssm_conv_fwd(c->y, c->u, c->K, c->D, c->B, c->T, c->H, c->plan, c->ws) != PHAX_OK)
        phax_die("%s", phax_error());
}
static void f_conv_bwd(void *p) {
    ctx_t *c = p;
    if (fcpu_ssm_conv_bwd(c->du, c->dK, c->dD, c->dy, c->u, c->K, c->D, c->B, c->T, c->H, c->plan,
                          c->ws) != PHAX_OK)
        phax_die("%s", phax_error());
}
static void f_ref_dss_fwd(void *p) {
    ctx_t *c = p;
    ref_dss_kernel_fwd(c->rK, c->rLre, c->rLim, c->rCre, c->rCim, c->H, c->N, c->T);
}
static void f_ref_dss_bwd(void *p) {
    ctx_t *c = p;
    ref_dss_kernel_bwd(c->rg[0], c->rg[1], c->rg[2], c->rg[3], c->rdK, c->rLre, c->rLim, c->rCre,
                       c->rCim, c->H, c->N, c->T);
}
static void f_ref_conv_fwd(void *p) {
    ctx_t *c = p;
    ref_ssm_conv_fwd(c->ry, c->ru, c->rK, c->rD, c->B, c->T, c->H);
}
static void f_ref_conv_bwd(void *p) {
    ctx_t *c = p;
    ref_ssm_conv_bwd(c->rdu, c->rdK, c->rdD, c->rdy, c->ru, c->rK, c->rD, c->B, c->T, c->H);
}

static FILE *csv;
static double sgemm_gf;  // the ceiling
static void row(const char *op, int B, int T, int H, int N, int n, double sec, double mn,
                double flop, double eff_flop, double ref_sec) {
    double gf = flop / sec * 1e-9;
    printf("%-16s T=%-5d n=%-5d %9.3f ms (min %9.3f) %7.2f GF/s %5.1f%% sgemm", op, T, n,
           sec * 1e3, mn * 1e3, gf, 100 * gf / sgemm_gf);
    (void)B, (void)H, (void)N;
    if (eff_flop > 0) printf("  eff %8.2f GF/s", eff_flop / sec * 1e-9);
    if (ref_sec > 0) printf("  x%.1f vs ref", ref_sec / sec);
    printf("\n");
    if (csv)
        fprintf(csv, "%s,%d,%d,%d,%d,%d,%.6f,%.6f,%.3f,%.4f,%.3f,%.2f\n", op, B, T, H, N, n,
                sec * 1e3, mn * 1e3, gf, gf / sgemm_gf, eff_flop > 0 ? eff_flop / sec * 1e-9 : 0.0,
                ref_sec > 0 ? ref_sec / sec : 0.0);
}

static double fft_flop(int n, int transforms) { return transforms * 2.5 * n * log2((double)n); }

// Conv fwd/bwd for one plan method; returns the two times.
static double mf, mb;  // the fastest repeats of the last bench_conv
static void bench_conv(ctx_t *c, int method, int measure, double *tf, double *tb, int *nfft,
                       double *plan_s) {
    double t0 = bench_now();
    c->plan = fcpu_ssm_plan_new_ex(c->B, c->T, c->H, method, measure);
    if (!c->plan) phax_die("%s", phax_error());
    *plan_s = bench_now() - t0;
    size_t w = fcpu_ssm_conv_fwd_ws(c->plan), wb = fcpu_ssm_conv_bwd_ws(c->plan);
    c->ws = phax_alloc(w > wb ? w : wb);
    if (!c->ws) phax_die("%s", phax_error());
    memset(c->ws, 0, w > wb ? w : wb);
    *nfft = fcpu_ssm_plan_fft_len(c->plan);
    *tf = time_med(f_conv_fwd, c);
    mf = tmin;
    *tb = time_med(f_conv_bwd, c);
    mb = tmin;
    phax_free(c->ws);
    fcpu_ssm_plan_free(c->plan);
}

static void setup(ctx_t *c, int B, int T, int H, int N) {
    memset(c, 0, sizeof *c);
    c->B = B, c->T = T, c->H = H, c->N = N;
    size_t BTH = (size_t)B * T * H, HT = (size_t)H * T, HN = (size_t)H * N;
    c->Lre = bench_falloc(N, 1), c->Lim = bench_falloc(N, 2), c->Cre = bench_falloc(HN, 3), c->Cim = bench_falloc(HN, 4);
    for (int n = 0; n < N; n++) {  // long-memory init
        c->Lre[n] = (float)log(1e-3 * pow(100.0, (n + 0.5) / N));
        c->Lim[n] = (float)log(3.14159265358979 * (n + 1) / N);
    }
    c->K = bench_falloc(HT, 5), c->dK = bench_falloc(HT, 6), c->D = bench_falloc(H, 7), c->u = bench_falloc(BTH, 8);
    c->y = bench_falloc(BTH, 9), c->dy = bench_falloc(BTH, 10), c->du = bench_falloc(BTH, 11), c->dD = bench_falloc(H, 12);
    c->gLre = bench_falloc(N, 13), c->gLim = bench_falloc(N, 14), c->gCre = bench_falloc(HN, 15),
    c->gCim = bench_falloc(HN, 16);
}
static void teardown(ctx_t *c) {
    float *f[] = {c->Lre, c->Lim, c->Cre, c->Cim, c->K, c->dK, c->D, c->u, c->y, c->dy, c->du,
                  c->dD, c->gLre, c->gLim, c->gCre, c->gCim};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++) phax_free(f[i]);
}

int main(int argc, char **argv) {
    bench_clock_from_env("BENCH_CLOCK", "cpu", CLOCK_PROCESS_CPUTIME_ID);
    int tmax = getenv("BENCH_TMAX") ? atoi(getenv("BENCH_TMAX")) : 16384;
    csv = bench_csv_open(bench_csv_arg(argc, argv, "bench_ssm"),
                         "op,B,T,H,N,n_fft,ms,min_ms,gflops,frac_sgemm,eff_gflops,speedup_vs_ref");
    const char *tto = getenv("OPENBLAS_THREAD_TIMEOUT");
    bench_print_env(stdout, "bench_ssm");
    printf("clock %s\n", bench_clock_id == CLOCK_MONOTONIC ? "wall" : "process cpu");
    if (!tto && openblas_get_num_threads() > 1 && omp_get_max_threads() > 1)
        printf("warning: OpenBLAS's idle threads spin for 2^28 cycles after each call and take a "
               "core from the next OpenMP region (8-16 ms stalls seen here); run with "
               "OPENBLAS_THREAD_TIMEOUT=4\n");

    // Ceiling: square sgemm 1024³.
    double ts = time_sgemm(1024, 1024, 1024, NULL, NULL, NULL);  // touched buffers, seeds 21-23
    sgemm_gf = 2.0 * 1024 * 1024 * 1024 / ts * 1e-9;
    printf("sgemm 1024^3: %.3f ms, %.1f GFLOP/s (the ceiling below)\n\n", ts * 1e3, sgemm_gf);

    const int B = 1, H = 64, N = 64;
    // --- speed-up over ref at T = 512 ---------------------------------------------------
    double ref_t[4];
    {
        ctx_t c;
        setup(&c, B, 512, H, N);
        size_t BTH = (size_t)B * 512 * H, HT = (size_t)H * 512, HN = (size_t)H * N;
        c.rLre = bench_dalloc(N, 1), c.rLim = bench_dalloc(N, 2), c.rCre = bench_dalloc(HN, 3),
        c.rCim = bench_dalloc(HN, 4), c.rK = bench_dalloc(HT, 5), c.rdK = bench_dalloc(HT, 6), c.rD = bench_dalloc(H, 7),
        c.ru = bench_dalloc(BTH, 8), c.ry = bench_dalloc(BTH, 9), c.rdy = bench_dalloc(BTH, 10),
        c.rdu = bench_dalloc(BTH, 11), c.rdD = bench_dalloc(H, 12);
        for (int n = 0; n < N; n++) c.rLre[n] = c.Lre[n], c.rLim[n] = c.Lim[n];
        for (int i = 0; i < 4; i++) c.rg[i] = bench_dalloc(i < 2 ? N : HN, 30 + i);
        ref_t[0] = time_med(f_ref_dss_fwd, &c);
        ref_t[1] = time_med(f_ref_dss_bwd, &c);
        ref_t[2] = time_med(f_ref_conv_fwd, &c);
        ref_t[3] = time_med(f_ref_conv_bwd, &c);
        printf("ref at T=512: dss fwd %.2f ms, dss bwd %.2f ms, conv fwd %.2f ms, conv bwd %.2f ms\n\n",
               ref_t[0] * 1e3, ref_t[1] * 1e3, ref_t[2] * 1e3, ref_t[3] * 1e3);
        double *d[] = {c.rLre, c.rLim, c.rCre, c.rCim, c.rK, c.rdK, c.rD, c.ru, c.ry, c.rdy,
                       c.rdu, c.rdD, c.rg[0], c.rg[1], c.rg[2], c.rg[3]};
        for (size_t i = 0; i < sizeof d / sizeof *d; i++) phax_free(d[i]);
        teardown(&c);
    }

    // --- main sweep -----------------------------------------------------------------------
    for (int T = 512; T <= tmax; T *= 2) {
        ctx_t c;
        setup(&c, B, T, H, N);
        size_t w = fcpu_dss_kernel_fwd_ws(H, N, T), wb = fcpu_dss_kernel_bwd_ws(H, N, T);
        c.ws = phax_alloc(w > wb ? w : wb);
        memset(c.ws, 0, w > wb ? w : wb);
        double t = time_med(f_dss_fwd, &c);
        row("dss_fwd", B, T, H, N, 0, t, tmin, 2.0 * H * 2 * N * T, 0, T == 512 ? ref_t[0] : 0);
        t = time_med(f_dss_bwd, &c);
        row("dss_bwd", B, T, H, N, 0, t, tmin, 2.0 * H * 4 * N * T, 0, T == 512 ? ref_t[1] : 0);
        // the same-shaped sgemm (H × T × 2N) as the forward's own ceiling
        float *gb = bench_falloc((size_t)2 * N * T, 24);
        t = time_sgemm(H, T, 2 * N, c.dK, gb, c.K);
        row("sgemm_HxTx2N", B, T, H, N, 0, t, tmin, 2.0 * H * T * 2 * N, 0, 0);
        phax_free(gb);
        phax_free(c.ws);

        double direct = (double)B * H * T * (T + 1.0);
        double tf, tb, ps, tf2, tb2, ps2;
        int n;
        bench_conv(&c, FCPU_SSM_FFT, 0, &tf, &tb, &n, &ps);
        row("conv_fwd_fft", B, T, H, N, n, tf, mf,
            fft_flop(n, H + 2 * B * H) + 6.0 * B * H * (n / 2 + 1), direct + 2.0 * B * T * H,
            T == 512 ? ref_t[2] : 0);
        row("conv_bwd_fft", B, T, H, N, n, tb, mb,
            fft_flop(n, 2 * H + 3 * B * H) + 12.0 * B * H * (n / 2 + 1),
            2 * direct + 2.0 * B * T * H, T == 512 ? ref_t[3] : 0);
        if (getenv("BENCH_NO_MEASURE")) goto direct;
        bench_conv(&c, FCPU_SSM_FFT, 1, &tf2, &tb2, &n, &ps2);
        printf("  FFTW_MEASURE: fwd %.3f ms (%.2fx), bwd %.3f ms (%.2fx); planning %.1f ms vs "
               "ESTIMATE %.2f ms\n",
               tf2 * 1e3, tf / tf2, tb2 * 1e3, tb / tb2, ps2 * 1e3, ps * 1e3);
        if (csv)
            fprintf(csv, "conv_fwd_fft_measure,%d,%d,%d,%d,%d,%.6f,0,0,0,0,0\nconv_bwd_fft_measure,"
                         "%d,%d,%d,%d,%d,%.6f,0,0,0,0,0\n",
                    B, T, H, N, n, tf2 * 1e3, B, T, H, N, n, tb2 * 1e3);
    direct:
        if (T <= 2048) {
            bench_conv(&c, FCPU_SSM_DIRECT, 0, &tf, &tb, &n, &ps);
            row("conv_fwd_direct", B, T, H, N, 0, tf, mf, direct + 2.0 * B * T * H, 0,
                T == 512 ? ref_t[2] : 0);
            row("conv_bwd_direct", B, T, H, N, 0, tb, mb, 2 * direct + 2.0 * B * T * H, 0,
                T == 512 ? ref_t[3] : 0);
        }
        printf("\n");
        teardown(&c);
    }

    // --- crossover direct vs FFT at small T -------------------------------------------------
    printf("crossover (B=%d H=%d): T, fwd direct/fft ms, bwd direct/fft ms\n", B, H);
    for (int T = 8; T <= 512; T *= 2) {
        for (int T2 = T; T2 <= T + T / 2 && T2 <= 512; T2 += T / 2) {
            ctx_t c;
            setup(&c, B, T2, H, N);
            double df, db, ff, fb, ps;
            int n;
            bench_conv(&c, FCPU_SSM_DIRECT, 0, &df, &db, &n, &ps);
            bench_conv(&c, FCPU_SSM_FFT, 0, &ff, &fb, &n, &ps);
            printf("  T=%-4d n=%-5d fwd %8.4f / %8.4f ms  bwd %8.4f / %8.4f ms  %s\n", T2, n,
                   df * 1e3, ff * 1e3, db * 1e3, fb * 1e3,
                   df + db < ff + fb ? "direct" : "fft");
            if (csv)
                fprintf(csv, "xover_direct_fwd,%d,%d,%d,%d,0,%.6f,0,0,0,0,0\n"
                             "xover_fft_fwd,%d,%d,%d,%d,%d,%.6f,0,0,0,0,0\n"
                             "xover_direct_bwd,%d,%d,%d,%d,0,%.6f,0,0,0,0,0\n"
                             "xover_fft_bwd,%d,%d,%d,%d,%d,%.6f,0,0,0,0,0\n",
                        B, T2, H, N, df * 1e3, B, T2, H, N, n, ff * 1e3, B, T2, H, N, db * 1e3, B,
                        T2, H, N, n, fb * 1e3);
            teardown(&c);
        }
    }
    bench_csv_close(csv);
    return 0;
}
