// bench_basic: fast/cpu basic at the d = 256 model's shapes.
//
// usage: bench_basic [out.csv]
//
//   * linear fwd/bwd, n = B·T ∈ {512, 2048, 8192} rows, in→out ∈ {256→256,
//     256→683 (SwiGLU hidden), 683→256, 256→8192 (vocab)}; GFLOP/s and % of
//     sgemm timed on exactly the same calls (fwd: the one NT product; bwd: the NN
//     product for dx and the TN product for dW), in the same run, through
//     fcpu_sgemm: OpenBLAS single-threaded per block of rows, the split the
//     models use (on this machine it matched or beat OpenBLAS's own 2-thread
//     sgemm on these shapes; bench_sgemm_time in the other drivers takes the
//     faster of the two).
//       FLOP: fwd 2·n·in·out; bwd 4·n·in·out (dx and dW; db's n·out not counted).
//   * SwiGLU FFN d = 256, hid = 683: FLOP fwd 3·2·n·d·hid, bwd 8·2·n·d·hid
//     (a, b recomputed, dh, dWd, 2× dx, dWg, dWu), vs the same sgemm sequence alone.
//   * norms, activations, RoPE, mix, cross-entropy, AdamW: GB/s of compulsory
//     traffic (each array read or written once; an accumulated gradient counts
//     read + write), against a memory-bandwidth ceiling measured here with a
//     STREAM triad a = b + s·c on 2 threads (12 bytes per element, as STREAM counts).
//       fwd y = f(x): 8 B/elem;  bwd dx += f'(x, dy): 16 B/elem (x, dy, dx r+w);
//       rope bwd: 12 B/elem (dy, dx r+w);  mix fwd: 4(nb+1) B;  mix bwd: 4(3nb+1) B;
//       CE fwd+bwd: 12 B/logit (logits, dlogits r+w);  AdamW: 28 B/param (p, m, v r+w; g).
//   * fused projection + cross-entropy at V = 8192, d = 256 (FLOP 3·2·n·d·V) vs the
//     unfused chain (sgemm → CE fwd+bwd → 2 sgemms) on a materialised (n, V) logits.
//   * speed-up over ref (float64, scalar) at small sizes.
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "phax/fcpu.h"
#include "phax/fcpu_gemm.h"
#include "phax/ref.h"
#include "bench_util.h"

// Timing, buffers, the environment line: bench_util.h. Wall clock by default;
// PHAX_BENCH_CLOCK=thread switches to the calling thread's CPU time: meaningful
// only with OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1, and then nearly immune to
// other processes competing for the cores (a loaded machine otherwise inflates
// every parallel region by whole scheduler slices).
// bench_time_med: median of ≥ 5 repeats and ≥ 0.5 s; bench_time_pair: a, b, a, b, ...
// alternated, for every reported ratio; bench_falloc/bench_dalloc: touched buffers.

static void fscale(float *p, size_t n, float s) {
    for (size_t i = 0; i < n; i++) p[i] *= s;
}

// PHAX_BENCH_ONLY=<comma list of sections> runs only those of: linear, swiglu,
// pointwise (norms, activations, rope, mix), xent, adamw, ref.
static int want(const char *sec) {
    const char *only = getenv("PHAX_BENCH_ONLY");
    return !only || !*only || strstr(only, sec) != NULL;
}

static FILE *csv;
static void row(const char *op, const char *shape, double ms, double rate, const char *unit,
                double ceil_pct, const char *vs) {
    printf("%-22s %-26s %10.3f %9.1f %-6s %7.1f%% %s\n", op, shape, ms, rate, unit, ceil_pct, vs);
    if (csv) fprintf(csv, "%s,%s,%.6f,%.3f,%s,%.2f,%s\n", op, shape, ms, rate, unit, ceil_pct, vs);
}

// --- one context for everything ------------------------------------------------------------------
typedef struct {
    size_t n;
    int in, out, d, hid, V, H, dh, B, T, nb;
    float *x, *W, *b, *y, *dy, *dx, *dW, *db, *g, *dg, *Wg, *Wu, *Wd, *dWg, *dWu, *dWd, *cs, *p,
        *dp;
    int32_t *tok;
    void *ws;
    double *xd, *Wd_, *bd, *yd, *dyd, *dxd, *dWd_, *dbd, *gd, *dgd, *pd_, *dpd;
    fcpu_adamw_param *ap;
    ref_adamw_param *rp;
    int np;
    long step;
} ctx_t;

// linear
static void k_lin_fwd(void *v) {
    ctx_t *c = v;
    fcpu_linear_fwd(c->y, c->x, c->W, c->b, c->n, c->in, c->out);
}
static void k_lin_bwd(void *v) {
    ctx_t *c = v;
    fcpu_linear_bwd(c->dx, c->dW, c->db, c->dy, c->x, c->W, c->n, c->in, c->out);
}
static void k_sgemm_fwd(void *v) {
    ctx_t *c = v;
    fcpu_sgemm(CblasNoTrans, CblasTrans, (int)c->n, c->out, c->in, 1.0f, c->x,
                c->in, c->W, c->in, 0.0f, c->y, c->out);
}
static void k_sgemm_bwd(void *v) {
    ctx_t *c = v;
    fcpu_sgemm(CblasNoTrans, CblasNoTrans, (int)c->n, c->in, c->out, 1.0f, c->dy,
                c->out, c->W, c->in, 1.0f, c->dx, c->in);
    fcpu_sgemm(CblasTrans, CblasNoTrans, c->out, c->in, (int)c->n, 1.0f, c->dy,
                c->out, c->x, c->in, 1.0f, c->dW, c->in);
}
static void k_ref_lin_fwd(void *v) {
    ctx_t *c = v;
    ref_linear_fwd(c->yd, c->xd, c->Wd_, c->bd, c->n, c->in, c->out);
}
static void k_ref_lin_bwd(void *v) {
    ctx_t *c = v;
    ref_linear_bwd(c->dxd, c->dWd_, c->dbd, c->dyd, c->xd, c->Wd_, c->n, c->in, c->out);
}

// swiglu
static void k_swi_fwd(void *v) {
    ctx_t *c = v;
    fcpu_swiglu_fwd(c->y, c->x, c->Wg, c->Wu, c->Wd, c->n, c->d, c->hid, c->ws);
}
static void k_swi_bwd(void *v) {
    ctx_t *c = v;
    fcpu_swiglu_bwd(c->dx, c->dWg, c->dWu, c->dWd, c->dy, c->x, c->Wg, c->Wu, c->Wd, c->n, c->d,
                    c->hid, c->ws);
}
// The same sgemms alone (into the same scratch).
static void k_swi_sgemm_fwd(void *v) {
    ctx_t *c = v;
    int n = (int)c->n, d = c->d, h = c->hid;
    float *a = c->ws, *bb = a + c->n * h;
    fcpu_sgemm(CblasNoTrans, CblasTrans, n, h, d, 1, c->x, d, c->Wg, d, 0, a, h);
    fcpu_sgemm(CblasNoTrans, CblasTrans, n, h, d, 1, c->x, d, c->Wu, d, 0, bb, h);
    fcpu_sgemm(CblasNoTrans, CblasTrans, n, d, h, 1, a, h, c->Wd, h, 0, c->y, d);
}
static void k_swi_sgemm_bwd(void *v) {
    ctx_t *c = v;
    int n = (int)c->n, d = c->d, h = c->hid;
    float *a = c->ws, *bb = a + c->n * h, *dh = bb + c->n * h;
    fcpu_sgemm(CblasNoTrans, CblasTrans, n, h, d, 1, c->x, d, c->Wg, d, 0, a, h);
    fcpu_sgemm(CblasNoTrans, CblasTrans, n, h, d, 1, c->x, d, c->Wu, d, 0, bb, h);
    fcpu_sgemm(CblasNoTrans, CblasNoTrans, n, h, d, 1, c->dy, d, c->Wd, h, 0, dh,
                h);
    fcpu_sgemm(CblasTrans, CblasNoTrans, d, h, n, 1, c->dy, d, dh, h, 1, c->dWd, h);
    fcpu_sgemm(CblasNoTrans, CblasNoTrans, n, d, h, 1, a, h, c->Wg, d, 1, c->dx, d);
    fcpu_sgemm(CblasNoTrans, CblasNoTrans, n, d, h, 1, bb, h, c->Wu, d, 1, c->dx,
                d);
    fcpu_sgemm(CblasTrans, CblasNoTrans, h, d, n, 1, a, h, c->x, d, 1, c->dWg, d);
    fcpu_sgemm(CblasTrans, CblasNoTrans, h, d, n, 1, bb, h, c->x, d, 1, c->dWu, d);
}
static void k_ref_swi_fwd(void *v) {
    ctx_t *c = v;
    ref_swiglu_fwd(c->yd, c->xd, c->Wd_, c->Wd_, c->Wd_, c->n, c->d, c->hid);
}
static void k_ref_swi_bwd(void *v) {
    ctx_t *c = v;
    ref_swiglu_bwd(c->dxd, c->dWd_, NULL, NULL, c->dyd, c->xd, c->Wd_, c->Wd_, c->Wd_, c->n, c->d,
                   c->hid);
}

// norms
static void k_rms_fwd(void *v) {
    ctx_t *c = v;
    fcpu_rmsnorm_fwd(c->y, c->x, c->g, c->n, c->d, PHAX_RMSNORM_EPS);
}
static void k_rms_bwd(void *v) {
    ctx_t *c = v;
    fcpu_rmsnorm_bwd(c->dx, c->dg, c->dy, c->x, c->g, c->n, c->d, PHAX_RMSNORM_EPS, c->ws);
}
static void k_ln_fwd(void *v) {
    ctx_t *c = v;
    fcpu_layernorm_fwd(c->y, c->x, c->g, c->b, c->n, c->d, PHAX_LAYERNORM_EPS);
}
static void k_ln_bwd(void *v) {
    ctx_t *c = v;
    fcpu_layernorm_bwd(c->dx, c->dg, c->db, c->dy, c->x, c->g, c->n, c->d, PHAX_LAYERNORM_EPS,
                       c->ws);
}
static void k_hn_fwd(void *v) {
    ctx_t *c = v;
    fcpu_headnorm_fwd(c->y, c->x, c->g, c->n, c->H, c->dh, PHAX_HEADNORM_EPS);
}
static void k_hn_bwd(void *v) {
    ctx_t *c = v;
    fcpu_headnorm_bwd(c->dx, c->dg, c->dy, c->x, c->g, c->n, c->H, c->dh, PHAX_HEADNORM_EPS, c->ws);
}
static void k_ref_rms_fwd(void *v) {
    ctx_t *c = v;
    ref_rmsnorm_fwd(c->yd, c->xd, c->gd, c->n, c->d, PHAX_RMSNORM_EPS);
}
static void k_ref_rms_bwd(void *v) {
    ctx_t *c = v;
    ref_rmsnorm_bwd(c->dxd, c->dgd, c->dyd, c->xd, c->gd, c->n, c->d, PHAX_RMSNORM_EPS);
}
static void k_ref_ln_fwd(void *v) {
    ctx_t *c = v;
    ref_layernorm_fwd(c->yd, c->xd, c->gd, c->bd, c->n, c->d, PHAX_LAYERNORM_EPS);
}
static void k_ref_ln_bwd(void *v) {
    ctx_t *c = v;
    ref_layernorm_bwd(c->dxd, c->dgd, c->dbd, c->dyd, c->xd, c->gd, c->n, c->d, PHAX_LAYERNORM_EPS);
}
static void k_ref_hn_fwd(void *v) {
    ctx_t *c = v;
    ref_headnorm_fwd(c->yd, c->xd, c->gd, c->n, c->H, c->dh, PHAX_HEADNORM_EPS);
}
static void k_ref_hn_bwd(void *v) {
    ctx_t *c = v;
    ref_headnorm_bwd(c->dxd, c->dgd, c->dyd, c->xd, c->gd, c->n, c->H, c->dh, PHAX_HEADNORM_EPS);
}

// activations (n elements)
static void k_gelu_fwd(void *v) {
    ctx_t *c = v;
    fcpu_gelu_fwd(c->y, c->x, c->n);
}
static void k_gelu_bwd(void *v) {
    ctx_t *c = v;
    fcpu_gelu_bwd(c->dx, c->dy, c->x, c->n);
}
static void k_silu_fwd(void *v) {
    ctx_t *c = v;
    fcpu_silu_fwd(c->y, c->x, c->n);
}
static void k_silu_bwd(void *v) {
    ctx_t *c = v;
    fcpu_silu_bwd(c->dx, c->dy, c->x, c->n);
}
static void k_ref_gelu_fwd(void *v) {
    ctx_t *c = v;
    ref_gelu_fwd(c->yd, c->xd, c->n);
}
static void k_ref_gelu_bwd(void *v) {
    ctx_t *c = v;
    ref_gelu_bwd(c->dxd, c->dyd, c->xd, c->n);
}
static void k_ref_silu_fwd(void *v) {
    ctx_t *c = v;
    ref_silu_fwd(c->yd, c->xd, c->n);
}
static void k_ref_silu_bwd(void *v) {
    ctx_t *c = v;
    ref_silu_bwd(c->dxd, c->dyd, c->xd, c->n);
}

// rope
static void k_rope_fwd(void *v) {
    ctx_t *c = v;
    fcpu_rope_fwd(c->y, c->x, c->B, c->T, c->H, c->dh, PHAX_ROPE_BASE, 0, c->cs);
}
static void k_rope_bwd(void *v) {
    ctx_t *c = v;
    fcpu_rope_bwd(c->dx, c->dy, c->B, c->T, c->H, c->dh, PHAX_ROPE_BASE, 0, c->cs);
}
static void k_rope_table(void *v) {
    ctx_t *c = v;
    fcpu_rope_table(c->cs, c->T, c->dh, PHAX_ROPE_BASE, 0);
}
static void k_ref_rope_fwd(void *v) {
    ctx_t *c = v;
    ref_rope_fwd(c->yd, c->xd, c->B, c->T, c->H, c->dh, PHAX_ROPE_BASE, 0);
}
static void k_ref_rope_bwd(void *v) {
    ctx_t *c = v;
    ref_rope_bwd(c->dxd, c->dyd, c->B, c->T, c->H, c->dh, PHAX_ROPE_BASE, 0);
}

// mix
static void k_mix_fwd(void *v) {
    ctx_t *c = v;
    fcpu_mix_fwd(c->y, c->x, c->p, c->nb, c->n);
}
static void k_mix_bwd(void *v) {
    ctx_t *c = v;
    fcpu_mix_bwd(c->dx, c->dp, c->dy, c->x, c->p, c->nb, c->n);
}
static void k_ref_mix_fwd(void *v) {
    ctx_t *c = v;
    ref_mix_fwd(c->yd, c->xd, c->pd_, c->nb, c->n);
}
static void k_ref_mix_bwd(void *v) {
    ctx_t *c = v;
    ref_mix_bwd(c->dxd, c->dpd, c->dyd, c->xd, c->pd_, c->nb, c->n);
}

// cross-entropy; x = logits (n, V), dx = dlogits
static void k_ce(void *v) {
    ctx_t *c = v;
    float loss;
    fcpu_cross_entropy_fwd_bwd(&loss, c->dx, 1.0f, c->x, c->tok, c->n, c->V);
}
static void k_ref_ce(void *v) {
    ctx_t *c = v;
    double loss;
    ref_cross_entropy_fwd(&loss, c->xd, c->tok, c->n, c->V);
    ref_cross_entropy_bwd(c->dxd, 1.0, c->xd, c->tok, c->n, c->V);
}
// fused projection + CE: x (n, d), W (V, d)
static void k_lce(void *v) {
    ctx_t *c = v;
    float loss;
    fcpu_linear_cross_entropy(&loss, c->dx, c->dW, 1.0f, c->x, c->W, c->tok, c->n, c->d, c->V,
                              c->ws);
}
// unfused: logits in y (n, V), dlogits in dy (zeroed each time, as a model would)
static void k_lce_unfused(void *v) {
    ctx_t *c = v;
    float loss;
    size_t nv = c->n * c->V;
    fcpu_linear_fwd(c->y, c->x, c->W, NULL, c->n, c->d, c->V);
    memset(c->dy, 0, nv * sizeof(float));
    fcpu_cross_entropy_fwd_bwd(&loss, c->dy, 1.0f, c->y, c->tok, c->n, c->V);
    fcpu_linear_bwd(c->dx, c->dW, NULL, c->dy, c->x, c->W, c->n, c->d, c->V);
}

// adamw
static void k_adamw(void *v) {
    ctx_t *c = v;
    phax_adamw_cfg cfg = phax_adamw_cfg_default();
    double gn;
    fcpu_adamw_step(c->ap, c->np, &cfg, ++c->step, &gn);
}
static void k_ref_adamw(void *v) {
    ctx_t *c = v;
    phax_adamw_cfg cfg = phax_adamw_cfg_default();
    double gn;
    ref_adamw_step(c->rp, c->np, &cfg, ++c->step, &gn);
}

// STREAM triad a = b + s c on 2 threads (1 under PHAX_BENCH_CLOCK=thread)
static int triad_threads = 2;
typedef struct {
    float *a, *b, *c;
    size_t n;
} triad_t;
static void k_triad(void *v) {
    triad_t *t = v;
    float *restrict a = t->a;
    const float *restrict b = t->b, *restrict c = t->c;
#pragma omp parallel for schedule(static) num_threads(triad_threads)
    for (size_t i = 0; i < t->n; i++) a[i] = b[i] + 3.0f * c[i];
}

int main(int argc, char **argv) {
    csv = bench_csv_open(bench_csv_arg(argc, argv, "bench_basic"), "op,shape,median_ms,rate,unit,pct_of_ceiling,vs");
    if (bench_clock_from_env("PHAX_BENCH_CLOCK", "thread", CLOCK_THREAD_CPUTIME_ID)) {
        triad_threads = 1;
        printf("timing: thread CPU time (PHAX_BENCH_CLOCK=thread); valid with 1 thread only\n");
    }
    // Other processes distort every number: the line says how busy the machine was.
    bench_print_env(stdout, "bench_basic");

    // --- bandwidth ceiling -----------------------------------------------------------------
    triad_t tr = {.n = (size_t)32 << 20};  // 3 × 128 MiB
    tr.a = bench_falloc(tr.n, 1), tr.b = bench_falloc(tr.n, 2), tr.c = bench_falloc(tr.n, 3);
    double t_triad = bench_time_med(k_triad, &tr);
    double bw = 12.0 * tr.n / t_triad / 1e9;
    printf("memory ceiling: STREAM triad, %d thread(s), %zu floats/array: %.1f GB/s\n",
           triad_threads, tr.n, bw);
    phax_free(tr.a), phax_free(tr.b), phax_free(tr.c);

    printf("\n%-22s %-26s %10s %9s %-6s %8s %s\n", "op", "shape", "median ms", "rate", "unit",
           "of ceil", "note");

    // --- linear ---------------------------------------------------------------------------------
    const size_t NS[] = {512, 2048, 8192};
    const int IO[][2] = {{256, 256}, {256, 683}, {683, 256}, {256, 8192}};
    if (want("linear")) {
        size_t maxn = 8192, maxw = 256 * 8192;
        ctx_t c = {0};
        c.x = bench_falloc(maxn * 683, 11), c.W = bench_falloc(maxw, 12), c.b = bench_falloc(8192, 13);
        c.y = bench_falloc(maxn * 8192, 14), c.dy = bench_falloc(maxn * 8192, 15);
        c.dx = bench_falloc(maxn * 683, 16), c.dW = bench_falloc(maxw, 17), c.db = bench_falloc(8192, 18);
        fscale(c.dy, maxn * 8192, 1e-3f);
        for (int k = 0; k < 4; k++)
            for (int ni = 0; ni < 3; ni++) {
                c.n = NS[ni], c.in = IO[k][0], c.out = IO[k][1];
                double fl = 2.0 * c.n * c.in * c.out;
                char shape[64], note[64];
                snprintf(shape, sizeof shape, "n=%zu %d->%d", c.n, c.in, c.out);
                double tf, tsf, tb, tsb;
                bench_time_pair(k_lin_fwd, &c, k_sgemm_fwd, &c, &tf, &tsf);
                bench_time_pair(k_lin_bwd, &c, k_sgemm_bwd, &c, &tb, &tsb);
                snprintf(note, sizeof note, "sgemm %.1f GFLOP/s (+bias)", fl / tsf / 1e9);
                row("linear fwd", shape, tf * 1e3, fl / tf / 1e9, "GFLOP/s", 100 * tsf / tf, note);
                snprintf(note, sizeof note, "sgemm %.1f GFLOP/s (+db)", 2 * fl / tsb / 1e9);
                row("linear bwd", shape, tb * 1e3, 2 * fl / tb / 1e9, "GFLOP/s", 100 * tsb / tb,
                    note);
            }
        phax_free(c.x), phax_free(c.W), phax_free(c.b), phax_free(c.y), phax_free(c.dy);
        phax_free(c.dx), phax_free(c.dW), phax_free(c.db);
    }

    // --- SwiGLU -----------------------------------------------------------------------------
    if (want("swiglu")) {
        ctx_t c = {.d = 256, .hid = 683};
        size_t maxn = 8192, nw = (size_t)c.d * c.hid;
        c.x = bench_falloc(maxn * c.d, 21), c.y = bench_falloc(maxn * c.d, 22), c.dy = bench_falloc(maxn * c.d, 23);
        c.dx = bench_falloc(maxn * c.d, 24);
        c.Wg = bench_falloc(nw, 25), c.Wu = bench_falloc(nw, 26), c.Wd = bench_falloc(nw, 27);
        c.dWg = bench_falloc(nw, 28), c.dWu = bench_falloc(nw, 29), c.dWd = bench_falloc(nw, 30);
        fscale(c.Wg, nw, 0.06f), fscale(c.Wu, nw, 0.06f), fscale(c.Wd, nw, 0.04f);
        c.ws = bench_falloc(fcpu_swiglu_bwd_ws(maxn, c.d, c.hid) / 4, 31);
        for (int ni = 0; ni < 3; ni++) {
            c.n = NS[ni];
            double fl = 2.0 * c.n * c.d * c.hid;
            char shape[64], note[64];
            snprintf(shape, sizeof shape, "n=%zu d=256 hid=683", c.n);
            double tf, tsf, tb, tsb;
            bench_time_pair(k_swi_fwd, &c, k_swi_sgemm_fwd, &c, &tf, &tsf);
            bench_time_pair(k_swi_bwd, &c, k_swi_sgemm_bwd, &c, &tb, &tsb);
            snprintf(note, sizeof note, "its 3 sgemms alone %.3f ms", tsf * 1e3);
            row("swiglu fwd", shape, tf * 1e3, 3 * fl / tf / 1e9, "GFLOP/s", 100 * tsf / tf, note);
            snprintf(note, sizeof note, "its 8 sgemms alone %.3f ms", tsb * 1e3);
            row("swiglu bwd", shape, tb * 1e3, 8 * fl / tb / 1e9, "GFLOP/s", 100 * tsb / tb, note);
        }
        phax_free(c.x), phax_free(c.y), phax_free(c.dy), phax_free(c.dx), phax_free(c.Wg);
        phax_free(c.Wu), phax_free(c.Wd), phax_free(c.dWg), phax_free(c.dWu), phax_free(c.dWd);
        phax_free(c.ws);
    }

    // --- norms, activations, rope, mix (memory-bound) -----------------------------------------
    if (want("pointwise")) {
        size_t maxe = (size_t)8192 * 683;
        ctx_t c = {0};
        c.x = bench_falloc(maxe * 3, 41), c.y = bench_falloc(maxe, 42), c.dy = bench_falloc(maxe, 43);
        c.dx = bench_falloc(maxe * 3, 44), c.g = bench_falloc(1024, 45), c.b = bench_falloc(1024, 46);
        c.dg = bench_falloc(1024, 47), c.db = bench_falloc(1024, 48), c.p = bench_falloc(8, 49), c.dp = bench_falloc(8, 50);
        c.ws = bench_falloc(fcpu_layernorm_bwd_ws(8192, 1024) / 4, 51);
        c.cs = bench_falloc(fcpu_rope_table_len(8192, 64), 52);
        fscale(c.dy, maxe, 1e-3f);
        char shape[64], note[80];
        for (int ni = 0; ni < 3; ni++) {
            c.n = NS[ni], c.d = 256, c.H = 4, c.dh = 64;
            double e = (double)c.n * c.d;
            snprintf(shape, sizeof shape, "n=%zu d=256", c.n);
            struct {
                const char *name;
                bench_fn fn;
                double bytes;
            } ops[] = {{"rmsnorm fwd", k_rms_fwd, 8 * e},  {"rmsnorm bwd", k_rms_bwd, 16 * e},
                       {"layernorm fwd", k_ln_fwd, 8 * e}, {"layernorm bwd", k_ln_bwd, 16 * e},
                       {"headnorm fwd", k_hn_fwd, 8 * e},  {"headnorm bwd", k_hn_bwd, 16 * e}};
            for (int k = 0; k < 6; k++) {
                double t = bench_time_med(ops[k].fn, &c), gbs = ops[k].bytes / t / 1e9;
                row(ops[k].name,
                    k >= 4 ? (snprintf(note, sizeof note, "%s H=4", shape), note) : shape, t * 1e3,
                    gbs, "GB/s", 100 * gbs / bw, "");
            }
        }
        for (int ni = 0; ni < 3; ni++) {
            c.n = NS[ni] * 683;  // the SwiGLU hidden activations
            double e = (double)c.n;
            snprintf(shape, sizeof shape, "n=%zu (%zux683)", c.n, NS[ni]);
            struct {
                const char *name;
                bench_fn fn;
                double bytes;
            } ops[] = {{"gelu fwd", k_gelu_fwd, 8 * e},
                       {"gelu bwd", k_gelu_bwd, 16 * e},
                       {"silu fwd", k_silu_fwd, 8 * e},
                       {"silu bwd", k_silu_bwd, 16 * e}};
            for (int k = 0; k < 4; k++) {
                double t = bench_time_med(ops[k].fn, &c), gbs = ops[k].bytes / t / 1e9;
                row(ops[k].name, shape, t * 1e3, gbs, "GB/s", 100 * gbs / bw, "");
            }
        }
        for (int ni = 0; ni < 3; ni++) {
            c.B = (int)(NS[ni] / 512), c.T = 512, c.H = 4, c.dh = 64;
            double e = (double)c.B * c.T * c.H * c.dh;
            snprintf(shape, sizeof shape, "B=%d T=512 H=4 dh=64", c.B);
            k_rope_table(&c);
            double t = bench_time_med(k_rope_fwd, &c), gbs = 8 * e / t / 1e9;
            row("rope fwd (table)", shape, t * 1e3, gbs, "GB/s", 100 * gbs / bw, "");
            t = bench_time_med(k_rope_bwd, &c), gbs = 12 * e / t / 1e9;
            row("rope bwd (table)", shape, t * 1e3, gbs, "GB/s", 100 * gbs / bw, "");
            float *keep = c.cs;
            c.cs = NULL;
            t = bench_time_med(k_rope_fwd, &c), gbs = 8 * e / t / 1e9;
            row("rope fwd (no table)", shape, t * 1e3, gbs, "GB/s", 100 * gbs / bw, "");
            c.cs = keep;
            t = bench_time_med(k_rope_table, &c);
            row("rope table", "T=512 dh=64", t * 1e3, 0, "-", 0, "once per forward");
        }
        for (int ni = 0; ni < 3; ni++) {
            c.n = NS[ni] * 256, c.nb = 3;
            double e = (double)c.n;
            snprintf(shape, sizeof shape, "nb=3 n=%zu", c.n);
            double t = bench_time_med(k_mix_fwd, &c), gbs = 4 * (c.nb + 1) * e / t / 1e9;
            row("mix fwd", shape, t * 1e3, gbs, "GB/s", 100 * gbs / bw, "");
            t = bench_time_med(k_mix_bwd, &c), gbs = 4 * (3 * c.nb + 1) * e / t / 1e9;
            row("mix bwd", shape, t * 1e3, gbs, "GB/s", 100 * gbs / bw, "");
        }
        phax_free(c.x), phax_free(c.y), phax_free(c.dy), phax_free(c.dx), phax_free(c.g);
        phax_free(c.b), phax_free(c.dg), phax_free(c.db), phax_free(c.p), phax_free(c.dp);
        phax_free(c.ws), phax_free(c.cs);
    }

    // --- cross-entropy at V = 8192 -------------------------------------------------------------
    if (want("xent")) {
        ctx_t c = {.V = 8192, .d = 256};
        size_t maxn = 8192, nv = maxn * c.V;
        c.x = bench_falloc(nv, 61), c.dx = bench_falloc(nv, 62);
        fscale(c.x, nv, 3.0f);
        c.tok = malloc(maxn * sizeof *c.tok);
        for (size_t i = 0; i < maxn; i++) c.tok[i] = (int32_t)(i * 2654435761u % c.V);
        char shape[64], note[96];
        for (int ni = 0; ni < 3; ni++) {
            c.n = NS[ni];
            snprintf(shape, sizeof shape, "n=%zu V=8192", c.n);
            double t = bench_time_med(k_ce, &c), gbs = 12.0 * c.n * c.V / t / 1e9;
            row("xent fwd+bwd", shape, t * 1e3, gbs, "GB/s", 100 * gbs / bw, "");
        }
        phax_free(c.x), phax_free(c.dx);
        // fused projection + CE vs unfused
        c.x = bench_falloc(maxn * c.d, 63), c.W = bench_falloc((size_t)c.V * c.d, 64);
        c.dx = bench_falloc(maxn * c.d, 65), c.dW = bench_falloc((size_t)c.V * c.d, 66);
        fscale(c.W, (size_t)c.V * c.d, 0.2f);
        c.y = bench_falloc(nv, 67), c.dy = bench_falloc(nv, 68);
        c.ws = bench_falloc(fcpu_linear_cross_entropy_ws(maxn, c.d, c.V) / 4, 69);
        for (int ni = 0; ni < 3; ni++) {
            c.n = NS[ni];
            double fl = 3 * 2.0 * c.n * c.d * c.V;
            snprintf(shape, sizeof shape, "n=%zu d=256 V=8192", c.n);
            double tf, tu;
            bench_time_pair(k_lce, &c, k_lce_unfused, &c, &tf, &tu);
            snprintf(note, sizeof note, "unfused %.2f ms (%.0f MB logits+grad); ws %.0f MB",
                     tu * 1e3, 8.0 * c.n * c.V / 1e6,
                     fcpu_linear_cross_entropy_ws(c.n, c.d, c.V) / 1e6);
            row("linear+xent fused", shape, tf * 1e3, fl / tf / 1e9, "GFLOP/s", 100 * tu / tf,
                note);
        }
        phax_free(c.x), phax_free(c.W), phax_free(c.dx), phax_free(c.dW), phax_free(c.y);
        phax_free(c.dy), phax_free(c.ws), free(c.tok);
    }

    // --- AdamW ---------------------------------------------------------------------------------
    if (want("adamw")) {
        // A d = 256 model's tensor sizes, roughly: embedding 8192×256 and 8 layers
        // of 4·256² + 3·256·683 weights + norms.
        ctx_t c = {0};
        int L = 8;
        c.np = 1 + 3 * L;
        c.ap = calloc(c.np, sizeof *c.ap);
        size_t total = 0;
        for (int j = 0; j < c.np; j++) {
            size_t n = j == 0       ? (size_t)8192 * 256
                       : j % 3 == 1 ? 4 * 256 * 256
                       : j % 3 == 2 ? 3 * 256 * 683
                                    : 512;
            c.ap[j] = (fcpu_adamw_param){
                bench_falloc(n, 80 + j), bench_falloc(n, 120 + j), bench_falloc(n, 160 + j), bench_falloc(n, 200 + j), n,
                j % 3 != 0};
            for (size_t i = 0; i < n; i++) c.ap[j].m[i] = 0, c.ap[j].v[i] = 0;
            total += n;
        }
        char shape[64];
        snprintf(shape, sizeof shape, "%zu params, %d tensors", total, c.np);
        double t = bench_time_med(k_adamw, &c), gbs = 28.0 * total / t / 1e9;
        row("adamw step", shape, t * 1e3, gbs, "GB/s", 100 * gbs / bw, "clip 1, wd 0.1");
        for (int j = 0; j < c.np; j++)
            phax_free(c.ap[j].p), phax_free((float *)c.ap[j].g), phax_free(c.ap[j].m),
                phax_free(c.ap[j].v);
        free(c.ap);
    }

    // --- speed-up over ref at small sizes -----------------------------------------------------
    if (want("ref")) {
        printf("\nspeed-up over ref (float64, scalar) at small sizes:\n");
        ctx_t c = {0};
        size_t E = 256 * 683 + 16;
        c.x = bench_falloc(E * 3, 91), c.y = bench_falloc(E * 3, 92), c.dy = bench_falloc(E * 3, 93);
        c.dx = bench_falloc(E * 3, 94), c.W = bench_falloc(E, 95), c.b = bench_falloc(1024, 96);
        c.dW = bench_falloc(E, 97), c.db = bench_falloc(1024, 98), c.g = bench_falloc(1024, 99),
        c.dg = bench_falloc(1024, 100);
        c.Wg = bench_falloc(E, 101), c.Wu = bench_falloc(E, 102), c.Wd = bench_falloc(E, 103);
        c.dWg = bench_falloc(E, 104), c.dWu = bench_falloc(E, 105), c.dWd = bench_falloc(E, 106);
        c.p = bench_falloc(8, 107), c.dp = bench_falloc(8, 108), c.cs = bench_falloc(256 * 64, 109);
        c.xd = bench_dalloc(E * 3, 111), c.yd = bench_dalloc(E * 3, 112), c.dyd = bench_dalloc(E * 3, 113);
        c.dxd = bench_dalloc(E * 3, 114), c.Wd_ = bench_dalloc(E, 115), c.bd = bench_dalloc(1024, 116);
        c.dWd_ = bench_dalloc(E, 117), c.dbd = bench_dalloc(1024, 118), c.gd = bench_dalloc(1024, 119);
        c.dgd = bench_dalloc(1024, 120), c.pd_ = bench_dalloc(8, 121), c.dpd = bench_dalloc(8, 122);
        c.ws = bench_falloc(fcpu_swiglu_bwd_ws(256, 256, 683) / 4 + 4 * 256 * 1024, 123);
        c.tok = malloc(256 * sizeof *c.tok);
        for (int i = 0; i < 256; i++) c.tok[i] = i * 37 % 683;
        struct {
            const char *name, *shape;
            bench_fn fast, ref;
            size_t n;
            int in, out, d, hid, H, dh, B, T, V, nb;
        } cases[] = {
            {"linear fwd", "n=256 256->256", k_lin_fwd, k_ref_lin_fwd, .n = 256, .in = 256,
             .out = 256},
            {"linear bwd", "n=256 256->256", k_lin_bwd, k_ref_lin_bwd, .n = 256, .in = 256,
             .out = 256},
            {"swiglu fwd", "n=64 d=256 hid=683", k_swi_fwd, k_ref_swi_fwd, .n = 64, .d = 256,
             .hid = 683},
            {"swiglu bwd", "n=64 d=256 hid=683", k_swi_bwd, k_ref_swi_bwd, .n = 64, .d = 256,
             .hid = 683},
            {"rmsnorm fwd", "n=256 d=256", k_rms_fwd, k_ref_rms_fwd, .n = 256, .d = 256},
            {"rmsnorm bwd", "n=256 d=256", k_rms_bwd, k_ref_rms_bwd, .n = 256, .d = 256},
            {"layernorm fwd", "n=256 d=256", k_ln_fwd, k_ref_ln_fwd, .n = 256, .d = 256},
            {"layernorm bwd", "n=256 d=256", k_ln_bwd, k_ref_ln_bwd, .n = 256, .d = 256},
            {"headnorm fwd", "n=256 H=4 dh=64", k_hn_fwd, k_ref_hn_fwd, .n = 256, .d = 256, .H = 4,
             .dh = 64},
            {"headnorm bwd", "n=256 H=4 dh=64", k_hn_bwd, k_ref_hn_bwd, .n = 256, .d = 256, .H = 4,
             .dh = 64},
            {"gelu fwd", "n=174848", k_gelu_fwd, k_ref_gelu_fwd, .n = 256 * 683},
            {"gelu bwd", "n=174848", k_gelu_bwd, k_ref_gelu_bwd, .n = 256 * 683},
            {"silu fwd", "n=174848", k_silu_fwd, k_ref_silu_fwd, .n = 256 * 683},
            {"silu bwd", "n=174848", k_silu_bwd, k_ref_silu_bwd, .n = 256 * 683},
            {"rope fwd (table)", "B=1 T=256 H=4 dh=64", k_rope_fwd, k_ref_rope_fwd, .H = 4,
             .dh = 64, .B = 1, .T = 256},
            {"rope bwd (table)", "B=1 T=256 H=4 dh=64", k_rope_bwd, k_ref_rope_bwd, .H = 4,
             .dh = 64, .B = 1, .T = 256},
            {"mix fwd", "nb=3 n=65536", k_mix_fwd, k_ref_mix_fwd, .n = 65536, .nb = 3},
            {"mix bwd", "nb=3 n=65536", k_mix_bwd, k_ref_mix_bwd, .n = 65536, .nb = 3},
            {"xent fwd+bwd", "n=256 V=683", k_ce, k_ref_ce, .n = 256, .V = 683},
        };
        fscale(c.Wg, E, 0.06f), fscale(c.Wu, E, 0.06f), fscale(c.Wd, E, 0.04f);
        for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
            c.n = cases[k].n, c.in = cases[k].in, c.out = cases[k].out, c.d = cases[k].d;
            c.hid = cases[k].hid, c.H = cases[k].H, c.dh = cases[k].dh, c.B = cases[k].B;
            c.T = cases[k].T, c.V = cases[k].V, c.nb = cases[k].nb;
            if (c.T) k_rope_table(&c);
            double tf, tr;
            bench_time_pair(cases[k].fast, &c, cases[k].ref, &c, &tf, &tr);
            char note[64];
            snprintf(note, sizeof note, "ref %.3f ms: %.1fx", tr * 1e3, tr / tf);
            printf("  %-20s %-22s fast %9.4f ms   %s\n", cases[k].name, cases[k].shape, tf * 1e3,
                   note);
            if (csv)
                fprintf(csv, "%s vs ref,%s,%.6f,%.3f,x,0,ref %.6f ms\n", cases[k].name,
                        cases[k].shape, tf * 1e3, tr / tf, tr * 1e3);
        }
        // adamw, 1M params in 4 tensors
        c.np = 4;
        c.ap = calloc(4, sizeof *c.ap), c.rp = calloc(4, sizeof *c.rp);
        for (int j = 0; j < 4; j++) {
            size_t n = 1 << 18;
            c.ap[j] = (fcpu_adamw_param){bench_falloc(n, 130 + j),
                                         bench_falloc(n, 140 + j),
                                         bench_falloc(n, 150 + j),
                                         bench_falloc(n, 160 + j),
                                         n,
                                         1};
            c.rp[j] = (ref_adamw_param){bench_dalloc(n, 170 + j),
                                        bench_dalloc(n, 180 + j),
                                        bench_dalloc(n, 190 + j),
                                        bench_dalloc(n, 200 + j),
                                        n,
                                        1};
            for (size_t i = 0; i < n; i++)
                c.ap[j].m[i] = c.ap[j].v[i] = 0, c.rp[j].m[i] = c.rp[j].v[i] = 0;
        }
        double tf = bench_time_med(k_adamw, &c);
        c.step = 0;
        double tr = bench_time_med(k_ref_adamw, &c);
        printf("  %-20s %-22s fast %9.4f ms   ref %.3f ms: %.1fx\n", "adamw step", "1M params",
               tf * 1e3, tr * 1e3, tr / tf);
        if (csv)
            fprintf(csv, "adamw step vs ref,1M params,%.6f,%.3f,x,0,ref %.6f ms\n", tf * 1e3,
                    tr / tf, tr * 1e3);
    }
    // The ceiling again, to show how much the machine's state drifted during the run.
    tr.a = bench_falloc(tr.n, 1), tr.b = bench_falloc(tr.n, 2), tr.c = bench_falloc(tr.n, 3);
    printf("\nmemory ceiling again at the end: %.1f GB/s (start: %.1f GB/s)\n",
           12.0 * tr.n / bench_time_med(k_triad, &tr) / 1e9, bw);
    phax_free(tr.a), phax_free(tr.b), phax_free(tr.c);
    bench_csv_close(csv);
    return 0;
}
