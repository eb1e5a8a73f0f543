// Benchmark: fast/cpu Gated DeltaNet chunkwise forward and backward (fcpu_gdn_chunkwise_*),
// beside fast/cpu's mLSTM (fcpu_mlstm_chunkwise_*) at the same widths in the same run, so the
// two linear layers of SWAX compare as a ratio of one machine's times.
//
// Sizes as bench_mlstm: B = 1, H = 4, dk = 32, dv = 64 (one layer of a d = 256 model),
// T = 512 … 16384, chunk 32 / 64 / 128. Each timing: one warm-up call, then repeats until ≥ 5
// runs and ≥ 0.5 s; the median is reported (wall, and CPU seconds summed over the threads).
//
// FLOP counts (the BLAS work the kernel executes; the L×L products in full, the strsm as L²·dv
// per chunk), per token, with L the chunk:
//   forward  = 4L·dk + 3L·dv + 6·dk·dv
//              [K̂K̂ᵀ, Q̂K̂ᵀ: 4L²dk; the UT solve L²dv; P U 2L²dv; K̂Z, Q̂Z, the state K̂ᵀU: 6L·dk·dv]
//   backward = 16L·dk + 11L·dv + 20·dk·dv
//              [the start states' pass (prep and state) and the chunk's prep again; Q̂Z, P U; the
//               state's two products, the outputs' four, the solve's strsm and three, the
//               decays' four]
// Elementwise work (the L²/2 exps, the normalisations) is not counted.
// Ceiling: bench_sgemm_time's 1024³ sgemm (the machine's peak in this run), and the kernel's own
// GFLOP/s beside it; the mLSTM's rows give its times at the same sizes and the ratio gdn/mLSTM.
//
// Speed-up over ref at T = 512: ref_gdn_recurrent_fwd/bwd (float64), timed once each.
//
// Usage: bench_gdn [out.csv]
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "phax/fast.h"
#include "phax/fcpu_gdn.h"
#include "phax/fcpu_mlstm.h"
#include "phax/ref.h"
#include "bench_util.h"

typedef struct {
    int B, T, H, dk, dv, chunk;
    float *q, *k, *v, *g, *be, *o, *sT, *go, *dq, *dk_, *dvv, *dg, *db;  // gdn
    float *ig, *fg;                                                       // mLSTM's gates
    phax_gdn_cfg cfg;
    void *wsf, *wsb;
} ctx;

static void gdn_fwd(void *p) {
    ctx *c = p;
    fcpu_gdn_chunkwise_fwd(c->o, c->sT, c->q, c->k, c->v, c->g, c->be, NULL, c->B, c->T, c->H, c->dk, c->dv, &c->cfg,
                           c->chunk, c->wsf);
}
static void gdn_bwd(void *p) {
    ctx *c = p;
    fcpu_gdn_chunkwise_bwd(c->dq, c->dk_, c->dvv, c->dg, c->db, NULL, c->go, NULL, c->q, c->k, c->v, c->g, c->be, NULL,
                           c->B, c->T, c->H, c->dk, c->dv, &c->cfg, c->chunk, c->wsb);
}
static void mlstm_fwd(void *p) {
    ctx *c = p;
    fcpu_mlstm_chunkwise_fwd(c->o, c->q, c->k, c->v, c->ig, c->fg, c->B, c->T, c->H, c->dk, c->dv,
                             (float)PHAX_MLSTM_EPS, c->chunk, NULL, NULL, c->wsf);
}
static void mlstm_bwd(void *p) {
    ctx *c = p;
    fcpu_mlstm_chunkwise_bwd(c->dq, c->dk_, c->dvv, c->dg, c->db, c->go, c->q, c->k, c->v, c->ig, c->fg, c->B, c->T,
                             c->H, c->dk, c->dv, (float)PHAX_MLSTM_EPS, c->chunk, c->wsb);
}

static double timeit(void (*fn)(void *), void *c, double *cpu) {
    bench_stats s = bench_time(fn, c, (bench_policy){5, 200, 0.5, 0});
    *cpu = s.cpu_med;
    return s.med;
}

// x uniform in [lo, hi) from the stream s (phax's generator).
static void fill(float *x, size_t n, phax_rng *s, float lo, float hi) {
    for (size_t i = 0; i < n; i++) x[i] = (float)phax_rng_uniform_range(s, lo, hi);
}

int main(int argc, char **argv) {
    const int B = 1, H = 4, dk = 32, dv = 64, Tmax = 16384;
    const int Ts[] = {512, 1024, 2048, 4096, 8192, 16384}, chunks[] = {32, 64, 128};
    FILE *csv = bench_csv_open(bench_csv_arg(argc, argv, "bench_gdn"),
                               "op,B,T,H,dk,dv,chunk,median_ms,gflops,pct_peak,median_cpu_ms,mlstm_median_ms,"
                               "gdn_over_mlstm,speedup_vs_ref_wall");
    char info[256];
    phax_cpu_info(info, sizeof info);
    bench_print_env(stdout, "bench_gdn");
    printf("%s\n", info);

    size_t ng = (size_t)B * Tmax * H, nk = ng * dk, nv = ng * dv;
    phax_rng seed = phax_rng_new(4242u);
    ctx c = {.B = B, .H = H, .dk = dk, .dv = dv, .cfg = {1 / sqrt((double)dk), 1}};
    float **bufs[] = {&c.q, &c.k, &c.dq, &c.dk_}, **vbufs[] = {&c.v, &c.o, &c.go, &c.dvv},
          **gbufs[] = {&c.g, &c.be, &c.dg, &c.db, &c.ig, &c.fg};
    for (int i = 0; i < 4; i++) *bufs[i] = bench_xmalloc(nk * 4), *vbufs[i] = bench_xmalloc(nv * 4);
    for (int i = 0; i < 6; i++) *gbufs[i] = bench_xmalloc(ng * 4);
    c.sT = bench_xmalloc((size_t)B * H * dk * dv * 4);
    fill(c.q, nk, &seed, -1.7f, 1.7f), fill(c.k, nk, &seed, -1.7f, 1.7f), fill(c.v, nv, &seed, -1.7f, 1.7f);
    fill(c.go, nv, &seed, -1.7f, 1.7f), fill(c.be, ng, &seed, 0, 1), fill(c.ig, ng, &seed, -2, 2);
    fill(c.fg, ng, &seed, 1, 5);
    for (size_t i = 0; i < ng; i++) c.g[i] = (float)log(phax_rng_uniform_range(&seed, 0.5, 1.0));  // g = log α
    size_t wsf = 0, wsb = 0;
    for (int ic = 0; ic < 3; ic++) {
        size_t a[4] = {fcpu_gdn_chunkwise_fwd_ws(B, Tmax, H, dk, dv, chunks[ic]),
                       fcpu_gdn_chunkwise_bwd_ws(B, Tmax, H, dk, dv, chunks[ic]),
                       fcpu_mlstm_chunkwise_fwd_ws(B, Tmax, H, dk, dv, chunks[ic]),
                       fcpu_mlstm_chunkwise_bwd_ws(B, Tmax, H, dk, dv, chunks[ic])};
        wsf = a[0] > wsf ? a[0] : wsf, wsb = a[1] > wsb ? a[1] : wsb;
        wsf = a[2] > wsf ? a[2] : wsf, wsb = a[3] > wsb ? a[3] : wsb;
    }
    c.wsf = bench_xmalloc(wsf), c.wsb = bench_xmalloc(wsb);

    float *A = bench_xmalloc(1024 * 1024 * 4), *Bm = bench_xmalloc(1024 * 1024 * 4), *C = bench_xmalloc(1024 * 1024 * 4);
    fill(A, 1024 * 1024, &seed, -1, 1), fill(Bm, 1024 * 1024, &seed, -1, 1);
    bench_stats sbig = bench_sgemm_time(CblasNoTrans, CblasNoTrans, 1024, 1024, 1024, A, Bm, C,
                                        (bench_policy){5, 200, 0.5, 0});
    double peak = 2.0 * 1024 * 1024 * 1024 / sbig.med * 1e-9;
    free(A), free(Bm), free(C);
    printf("sgemm 1024^3 (the machine's ceiling in this run): %.1f GFLOP/s\n", peak);

    double ref_f = 0, ref_b = 0;
    {  // ref at T = 512, float64, once each (single-threaded)
        int T = 512;
        size_t g = (size_t)B * T * H, K = g * dk, V = g * dv;
        double *q = bench_xmalloc(K * 8), *k = bench_xmalloc(K * 8), *v = bench_xmalloc(V * 8),
               *gg = bench_xmalloc(g * 8), *be = bench_xmalloc(g * 8), *o = bench_xmalloc(V * 8),
               *go = bench_xmalloc(V * 8), *dq = bench_xmalloc(K * 8), *dkk = bench_xmalloc(K * 8),
               *dvv = bench_xmalloc(V * 8), *dg = bench_xmalloc(g * 8), *db = bench_xmalloc(g * 8);
        for (size_t i = 0; i < K; i++) q[i] = c.q[i], k[i] = c.k[i];
        for (size_t i = 0; i < V; i++) v[i] = c.v[i], go[i] = c.go[i];
        for (size_t i = 0; i < g; i++) gg[i] = c.g[i], be[i] = c.be[i];
        double t0 = bench_wall();
        ref_gdn_recurrent_fwd(o, NULL, q, k, v, gg, be, NULL, B, T, H, dk, dv, &c.cfg);
        ref_f = bench_wall() - t0, t0 = bench_wall();
        ref_gdn_recurrent_bwd(dq, dkk, dvv, dg, db, NULL, go, NULL, q, k, v, gg, be, NULL, B, T, H, dk, dv, &c.cfg);
        ref_b = bench_wall() - t0;
        printf("ref_gdn_recurrent T=512 (float64): fwd %.1f ms, bwd %.1f ms\n", ref_f * 1e3, ref_b * 1e3);
        free(q), free(k), free(v), free(gg), free(be), free(o), free(go), free(dq), free(dkk), free(dvv), free(dg),
            free(db);
    }

    printf("\n%-4s %-24s %9s %8s %7s %9s %12s %10s %9s\n", "op", "(B,T,H,dk,dv) chunk", "wall ms", "GFLOP/s", "%peak",
           "CPU ms", "mLSTM ms", "gdn/mLSTM", "vs ref");
    for (int ic = 0; ic < 3; ic++)
        for (size_t it = 0; it < sizeof Ts / sizeof *Ts; it++) {
            int T = Ts[it], L = chunks[ic];
            c.T = T, c.chunk = L;
            for (int op = 0; op < 2; op++) {
                double tc, tm_c, t = timeit(op ? gdn_bwd : gdn_fwd, &c, &tc);
                double tm = timeit(op ? mlstm_bwd : mlstm_fwd, &c, &tm_c);
                double fl = (double)B * H * T *
                            (op ? 16.0 * L * dk + 11.0 * L * dv + 20.0 * dk * dv : 4.0 * L * dk + 3.0 * L * dv + 6.0 * dk * dv);
                double gf = fl / t * 1e-9, sp = T == 512 ? (op ? ref_b : ref_f) / t : 0;
                char shape[64], spb[32] = "";
                snprintf(shape, sizeof shape, "(%d,%d,%d,%d,%d) %d", B, T, H, dk, dv, L);
                if (sp > 0) snprintf(spb, sizeof spb, "%.0fx", sp);
                printf("%-4s %-24s %9.3f %8.1f %6.1f%% %9.3f %12.3f %10.2f %9s\n", op ? "bwd" : "fwd", shape, t * 1e3, gf,
                       100 * gf / peak, tc * 1e3, tm * 1e3, t / tm, spb);
                if (csv)
                    fprintf(csv, "%s,%d,%d,%d,%d,%d,%d,%.6f,%.3f,%.2f,%.6f,%.6f,%.4f,", op ? "bwd" : "fwd", B, T, H, dk, dv,
                            L, t * 1e3, gf, 100 * gf / peak, tc * 1e3, tm * 1e3, t / tm),
                        fprintf(csv, sp > 0 ? "%.1f\n" : "\n", sp);
            }
        }
    bench_csv_close(csv);
    return 0;
}
