// Benchmark: fast/cpu attention (fcpu_attention_fwd/bwd), float32.
//
// Shapes: B = 1, Hq = 8, Hkv = 2 (GQA groups of 4), dh = dv = 32 (the d = 256 model)
// and 64; T = 512 … 16384; full causal and sliding windows 64 and 256; dot scores with
// RoPE (the SWAX SWA layer).
//
// FLOPs (FlashAttention's causal convention): forward 4·T·Tvis·dh per head, Tvis the
// average number of keys a query sees (T/2 + 1/2 for full causal, ≈ w for a window);
// backward 2.5× forward, so forward+backward = 3.5× forward. Masked-away work done by
// the tiles is not counted.
//
// Ceiling: cblas_sgemm on Q·Kᵀ-shaped products, (T×dh)·(dh×N) with N = min(T, 1024),
// measured in the same run with the same threads. Also measured: single-threaded
// cblas_sgemm on one 64×64×dh tile product at a time (the size a tile would hand it),
// against the kernel's per-core rate, which is why the kernel does not call sgemm.
//
// Timing: one warm-up call, then repeats until ≥ 5 repeats or ≥ 0.5 s (at least 3),
// median. Buffers are allocated once at the largest size and touched before timing.
// Usage: bench_attention [out.csv]
// PHAX_BENCH_CLOCK=cpu times with the process CPU clock instead of the wall clock:
// on a shared, loaded machine run it with OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 for
// per-core rates that other processes do not distort (with more threads the CPU
// clock also counts the threads' waiting).
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "phax/fcpu_attention.h"
#include "phax/ref.h"
#include "bench_util.h"

// Timing (bench_util.h): one warm-up call, then at least 3 and at most 5 repeats,
// stopping after 3 once 0.5 s have passed; the median (mean of the middle two of
// an even count).
#define ATT_POLICY ((bench_policy){3, 5, 0.5, 1})
static double median_time(bench_fn f, void *ctx) { return bench_time(f, ctx, ATT_POLICY).med; }

// --- the attention calls ------------------------------------------------------------------
typedef struct {
    int B, T;
    phax_attn_cfg c;
    float *q, *k, *v, *o, *lse, *st, *dout, *dq, *dk, *dv;  // st: the forward's row stats
    void *ws;
} att_ctx;

static void run_fwd(void *p) {
    att_ctx *a = p;
    if (fcpu_attention_fwd(a->o, a->lse, a->st, a->q, a->k, a->v, NULL, a->B, a->T, &a->c, a->ws)) {
        fprintf(stderr, "fwd failed: %s\n", phax_error());
        exit(1);
    }
}

static void run_fwdbwd(void *p) {
    att_ctx *a = p;
    run_fwd(p);
    if (fcpu_attention_bwd(a->dq, a->dk, a->dv, NULL, a->dout, a->o, a->st, a->q, a->k, a->v, NULL, a->B, a->T,
                           &a->c, a->ws)) {
        fprintf(stderr, "bwd failed: %s\n", phax_error());
        exit(1);
    }
}

// --- sgemm ceilings: bench_sgemm_time (bench_util.h) on Q·Kᵀ-shaped products -------------

// 64×64×K tile products, one cblas call each, over a run of distinct tiles.
typedef struct {
    int K, ntiles;
    const float *A, *Bm;
    float *C;
} tile_ctx;

static void run_tiles(void *p) {
    tile_ctx *t = p;
    for (int i = 0; i < t->ntiles; i++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 64, 64, t->K, 1.0f,
                    t->A + (size_t)i * 64 * t->K, t->K, t->Bm + (size_t)i * 64 * t->K, t->K, 0.0f,
                    t->C + (size_t)i * 64 * 64, 64);
}

// --- ref, for the speed-up at a small size -----------------------------------------------------
typedef struct {
    int B, T;
    phax_attn_cfg c;
    double *q, *k, *v, *o, *dout, *dq, *dk, *dv;
} ref_ctx;

static void run_ref_fwd(void *p) {
    ref_ctx *r = p;
    ref_attention_fwd(r->o, r->q, r->k, r->v, NULL, r->B, r->T, &r->c);
}
static void run_ref_fwdbwd(void *p) {
    ref_ctx *r = p;
    ref_attention_fwd(r->o, r->q, r->k, r->v, NULL, r->B, r->T, &r->c);
    ref_attention_bwd(r->dq, r->dk, r->dv, NULL, r->dout, r->q, r->k, r->v, NULL, r->B, r->T, &r->c);
}

static double tvis(int T, int w) {  // average visible keys per query
    double s = 0;
    for (int t = 0; t < T; t++) s += w > 0 && w < t + 1 ? w : t + 1;
    return s / T;
}

static float *falloc(size_t n, unsigned *seed) {
    float *x = malloc(n * sizeof *x);
    if (!x) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        x[i] = ((int)(*seed >> 8) - (1 << 23)) * (1.0f / (1 << 23));  // uniform(-1, 1): touches the pages
    }
    return x;
}

int main(int argc, char **argv) {
    FILE *csv = bench_csv_open(bench_csv_arg(argc, argv, "bench_attention"),
                               "op,dh,T,window,tvis,ms_fwd,ms_fwdbwd,gflops_fwd,gflops_fwdbwd,"
                               "sgemm_gflops,pct_sgemm_fwd,pct_sgemm_fwdbwd,ws_fwd_bytes,"
                               "ws_bwd_bytes");
    bench_clock_from_env("PHAX_BENCH_CLOCK", "cpu", CLOCK_PROCESS_CPUTIME_ID);
    const int B = 1, Hq = 8, Hkv = 2, Tmax = 16384, NG = 1024;
    const int Ts[] = {512, 1024, 2048, 4096, 8192, 16384}, nT = 6;
    const int dhs[] = {32, 64}, wins[] = {0, 64, 256};
    int nthr = omp_get_max_threads();
    bench_print_env(stdout, "bench_attention");
    printf("%s clock\n", bench_clock_id == CLOCK_MONOTONIC ? "wall" : "process CPU");
    printf("FLOPs: fwd 4·T·Tvis·dh·Hq (B=1, Hq=8, Hkv=2); fwd+bwd 3.5× that. sgemm: (T×dh)·(dh×min(T,%d)).\n", NG);

    unsigned seed = 12345;
    size_t nq = (size_t)B * Tmax * Hq * 64, nk = (size_t)B * Tmax * Hkv * 64;
    att_ctx a = {.B = B};
    a.q = falloc(nq, &seed), a.k = falloc(nk, &seed), a.v = falloc(nk, &seed);
    a.o = falloc(nq, &seed), a.dout = falloc(nq, &seed), a.dq = falloc(nq, &seed);
    a.dk = falloc(nk, &seed), a.dv = falloc(nk, &seed), a.lse = falloc((size_t)B * Hq * Tmax, &seed);
    a.st = falloc(2 * (size_t)B * Hq * Tmax, &seed);
    size_t wsmax = 0;
    for (int di = 0; di < 2; di++)
        for (int wi = 0; wi < 3; wi++) {
            phax_attn_cfg c = phax_attn_cfg_default(Hq, Hkv, dhs[di]);
            c.window = wins[wi];
            size_t f = fcpu_attention_fwd_ws(B, Tmax, &c, nthr), b = fcpu_attention_bwd_ws(B, Tmax, &c, nthr);
            if (f > wsmax) wsmax = f;
            if (b > wsmax) wsmax = b;
        }
    a.ws = malloc(wsmax);
    if (!a.ws) return 1;
    memset(a.ws, 0, wsmax);
    float *gA = falloc((size_t)Tmax * 64, &seed), *gB = falloc((size_t)NG * 64, &seed);
    float *gC = falloc((size_t)Tmax * NG, &seed);

    // Tile-size sgemm (single thread) vs the kernel's per-core rate, reported below.
    int ntiles = 256;
    float *tA = falloc((size_t)ntiles * 64 * 64, &seed), *tB = falloc((size_t)ntiles * 64 * 64, &seed);
    float *tC = falloc((size_t)ntiles * 64 * 64, &seed);
    double tile_gf[2];
    int blas_thr = openblas_get_num_threads();
    openblas_set_num_threads(1);
    for (int di = 0; di < 2; di++) {
        tile_ctx tc = {.K = dhs[di], .ntiles = ntiles, .A = tA, .Bm = tB, .C = tC};
        double t = median_time(run_tiles, &tc);
        tile_gf[di] = 2.0 * 64 * 64 * dhs[di] * ntiles / t * 1e-9;
    }
    openblas_set_num_threads(blas_thr);

    printf("\n%-7s %3s %6s %6s %8s %9s %10s %8s %8s %8s %6s %6s %11s %11s %9s\n", "op", "dh", "T",
           "window", "Tvis", "fwd ms", "f+b ms", "fwd GF/s", "f+b GF/s", "sgemm", "%fwd", "%f+b",
           "ws fwd B", "ws bwd B", "f+b ms/kT");
    double perf_core[2] = {0, 0};
    for (int di = 0; di < 2; di++) {
        int dh = dhs[di];
        for (int wi = 0; wi < 3; wi++) {
            int w = wins[wi];
            for (int ti = 0; ti < nT; ti++) {
                int T = Ts[ti];
                a.T = T;
                a.c = phax_attn_cfg_default(Hq, Hkv, dh);
                a.c.window = w;
                double tv = tvis(T, w);
                double fl = 4.0 * T * tv * dh * Hq * B;
                double tf = median_time(run_fwd, &a), tfb = median_time(run_fwdbwd, &a);
                int gn = T < NG ? T : NG;
                double tg = bench_sgemm_time(CblasNoTrans, CblasTrans, T, gn, dh, gA, gB, gC,
                                             ATT_POLICY).med;
                double ggf = 2.0 * T * gn * dh / tg * 1e-9;
                double gf = fl / tf * 1e-9, gfb = 3.5 * fl / tfb * 1e-9;
                size_t wf = fcpu_attention_fwd_ws(B, T, &a.c, nthr), wb = fcpu_attention_bwd_ws(B, T, &a.c, nthr);
                const char *op = w ? "swa" : "causal";
                printf("%-7s %3d %6d %6d %8.1f %9.3f %10.3f %8.1f %8.1f %8.1f %5.0f%% %5.0f%% %11zu %11zu %9.3f\n",
                       op, dh, T, w, tv, tf * 1e3, tfb * 1e3, gf, gfb, ggf, 100 * gf / ggf,
                       100 * gfb / ggf, wf, wb, tfb * 1e3 / (T / 1024.0));
                if (csv)
                    fprintf(csv, "%s,%d,%d,%d,%.2f,%.4f,%.4f,%.2f,%.2f,%.2f,%.1f,%.1f,%zu,%zu\n", op, dh,
                            T, w, tv, tf * 1e3, tfb * 1e3, gf, gfb, ggf, 100 * gf / ggf, 100 * gfb / ggf,
                            wf, wb);
                if (w == 0 && T == 4096) perf_core[di] = gf / nthr;
                fflush(stdout);
            }
        }
    }
    printf("\nTile products through cblas_sgemm (1 thread, one call per 64×64×dh tile, %d tiles):\n", ntiles);
    for (int di = 0; di < 2; di++)
        printf("  dh=%d: %.1f GFLOP/s per core; the fused kernel's forward (causal, T=4096) runs at %.1f "
               "GFLOP/s per core including softmax and masking\n",
               dhs[di], tile_gf[di], perf_core[di]);

    // Speed-up over ref (float64, plain loops) at T = 512, dh = 32, full causal.
    {
        int T = 512, dh = 32;
        ref_ctx r = {.B = B, .T = T, .c = phax_attn_cfg_default(Hq, Hkv, dh)};
        size_t n1 = (size_t)B * T * Hq * dh, n2 = (size_t)B * T * Hkv * dh;
        double *bufs[8];
        size_t lens[8] = {n1, n2, n2, n1, n1, n1, n2, n2};
        for (int i = 0; i < 8; i++) {
            bufs[i] = malloc(lens[i] * sizeof(double));
            for (size_t e = 0; e < lens[i]; e++) bufs[i][e] = a.q[e % nq];
        }
        r.q = bufs[0], r.k = bufs[1], r.v = bufs[2], r.o = bufs[3], r.dout = bufs[4];
        r.dq = bufs[5], r.dk = bufs[6], r.dv = bufs[7];
        double rf = median_time(run_ref_fwd, &r), rfb = median_time(run_ref_fwdbwd, &r);
        a.T = T, a.c = r.c;
        double tf = median_time(run_fwd, &a), tfb = median_time(run_fwdbwd, &a);
        printf("\nref (float64) at T=%d dh=%d full causal: fwd %.1f ms, fwd+bwd %.1f ms; fast is %.0fx and "
               "%.0fx faster (%d threads vs ref's 1)\n",
               T, dh, rf * 1e3, rfb * 1e3, rf / tf, rfb / tfb, nthr);
        if (csv) fprintf(csv, "ref_speedup,%d,%d,0,,%.4f,%.4f,%.1f,%.1f,,,,,\n", dh, T, rf * 1e3, rfb * 1e3, rf / tf, rfb / tfb);
        for (int i = 0; i < 8; i++) free(bufs[i]);
    }
    bench_csv_close(csv);
    free(a.q), free(a.k), free(a.v), free(a.o), free(a.dout), free(a.dq), free(a.dk), free(a.dv);
    free(a.lse), free(a.st), free(a.ws), free(gA), free(gB), free(gC), free(tA), free(tB), free(tC);
    return 0;
}
