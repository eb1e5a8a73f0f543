// bench_ffn: fast/cpu's SwiGLU FFN at the d = 256 model's shapes (hidden 683).
//
// usage: bench_ffn [out.csv]
//
//   * fwd/bwd at n = B·T ∈ {512, 2048, 8192} rows: GFLOP/s and % of the same sgemm sequence
//     alone (into the same scratch), timed alternately with it in the same run.
//       FLOP: fwd 3·2·n·d·hid; bwd 8·2·n·d·hid (a, b recomputed, dh, dWd, 2× dx, dWg, dWu).
//   * the speed-up over ref (float64, scalar) at n = 64.
// Timing, buffers, the environment line: bench_util.h (PHAX_BENCH_CLOCK=thread there).
#include "phax/fcpu.h"
#include "phax/fcpu_gemm.h"
#include "phax/ref.h"
#include "bench_util.h"

typedef struct {
    size_t n;
    int d, hid;
    float *x, *y, *dy, *dx, *Wg, *Wu, *Wd, *dWg, *dWu, *dWd, *ws;
    double *xd, *yd, *dyd, *dxd, *Wgd, *Wud, *Wdd, *dWgd, *dWud, *dWdd;
} ctx_t;

static void k_fwd(void *v) {
    ctx_t *c = v;
    fcpu_swiglu_fwd(c->y, c->x, c->Wg, c->Wu, c->Wd, c->n, c->d, c->hid, c->ws);
}
static void k_bwd(void *v) {
    ctx_t *c = v;
    fcpu_swiglu_bwd(c->dx, c->dWg, c->dWu, c->dWd, c->dy, c->x, c->Wg, c->Wu, c->Wd, c->n, c->d, c->hid, c->ws);
}
// The same sgemms alone (into the same scratch).
static void k_sgemm_fwd(void *v) {
    ctx_t *c = v;
    const int n = (int)c->n, d = c->d, h = c->hid;
    float *a = c->ws, *bb = a + c->n * h;
    fcpu_sgemm(CblasNoTrans, CblasTrans, n, h, d, 1, c->x, d, c->Wg, d, 0, a, h);
    fcpu_sgemm(CblasNoTrans, CblasTrans, n, h, d, 1, c->x, d, c->Wu, d, 0, bb, h);
    fcpu_sgemm(CblasNoTrans, CblasTrans, n, d, h, 1, a, h, c->Wd, h, 0, c->y, d);
}
static void k_sgemm_bwd(void *v) {
    ctx_t *c = v;
    const int n = (int)c->n, d = c->d, h = c->hid;
    float *a = c->ws, *bb = a + c->n * h, *dh = bb + c->n * h;
    fcpu_sgemm(CblasNoTrans, CblasTrans, n, h, d, 1, c->x, d, c->Wg, d, 0, a, h);
    fcpu_sgemm(CblasNoTrans, CblasTrans, n, h, d, 1, c->x, d, c->Wu, d, 0, bb, h);
    fcpu_sgemm(CblasNoTrans, CblasNoTrans, n, h, d, 1, c->dy, d, c->Wd, h, 0, dh, h);
    fcpu_sgemm(CblasTrans, CblasNoTrans, d, h, n, 1, c->dy, d, dh, h, 1, c->dWd, h);
    fcpu_sgemm(CblasNoTrans, CblasNoTrans, n, d, h, 1, a, h, c->Wg, d, 1, c->dx, d);
    fcpu_sgemm(CblasNoTrans, CblasNoTrans, n, d, h, 1, bb, h, c->Wu, d, 1, c->dx, d);
    fcpu_sgemm(CblasTrans, CblasNoTrans, h, d, n, 1, a, h, c->x, d, 1, c->dWg, d);
    fcpu_sgemm(CblasTrans, CblasNoTrans, h, d, n, 1, bb, h, c->x, d, 1, c->dWu, d);
}
static void k_ref_fwd(void *v) {
    ctx_t *c = v;
    ref_swiglu_fwd(c->yd, c->xd, c->Wgd, c->Wud, c->Wdd, c->n, c->d, c->hid);
}
static void k_ref_bwd(void *v) {
    ctx_t *c = v;
    ref_swiglu_bwd(c->dxd, c->dWgd, c->dWud, c->dWdd, c->dyd, c->xd, c->Wgd, c->Wud, c->Wdd, c->n, c->d, c->hid);
}

int main(int argc, char **argv) {
    FILE *csv = bench_csv_open(bench_csv_arg(argc, argv, "bench_ffn"), BENCH_OPS_CSV_HEADER);
    bench_ops_start("bench_ffn");
    printf("ceiling: the op's own sgemm sequence (fcpu_sgemm), timed alternately with it\n");
    bench_ops_header();
    const size_t NS[] = {512, 2048, 8192}, maxn = 8192;
    ctx_t c = {.d = 256, .hid = 683};
    const size_t nw = (size_t)c.d * c.hid;
    c.x = bench_falloc(maxn * c.d, 21), c.y = bench_falloc(maxn * c.d, 22), c.dy = bench_falloc(maxn * c.d, 23);
    c.dx = bench_falloc(maxn * c.d, 24);
    c.Wg = bench_falloc(nw, 25), c.Wu = bench_falloc(nw, 26), c.Wd = bench_falloc(nw, 27);
    c.dWg = bench_falloc(nw, 28), c.dWu = bench_falloc(nw, 29), c.dWd = bench_falloc(nw, 30);
    bench_fscale(c.Wg, nw, 0.06f), bench_fscale(c.Wu, nw, 0.06f), bench_fscale(c.Wd, nw, 0.04f);
    c.ws = bench_falloc(fcpu_swiglu_bwd_ws(maxn, c.d, c.hid) / 4, 31);
    for (int ni = 0; ni < 3; ni++) {
        c.n = NS[ni];
        const double fl = 2.0 * c.n * c.d * c.hid;
        char shape[64], note[64];
        snprintf(shape, sizeof shape, "n=%zu d=256 hid=683", c.n);
        double tf, tsf, tb, tsb;
        bench_time_pair(k_fwd, &c, k_sgemm_fwd, &c, &tf, &tsf);
        bench_time_pair(k_bwd, &c, k_sgemm_bwd, &c, &tb, &tsb);
        snprintf(note, sizeof note, "its 3 sgemms alone %.3f ms", tsf * 1e3);
        bench_row(csv, "swiglu fwd", shape, tf * 1e3, 3 * fl / tf / 1e9, "GFLOP/s", 100 * tsf / tf, note);
        snprintf(note, sizeof note, "its 8 sgemms alone %.3f ms", tsb * 1e3);
        bench_row(csv, "swiglu bwd", shape, tb * 1e3, 8 * fl / tb / 1e9, "GFLOP/s", 100 * tsb / tb, note);
    }

    printf("\nspeed-up over ref (float64, scalar) at a small size:\n");
    c.n = 64;
    const size_t E = 64 * 256;
    c.xd = bench_dalloc(E, 111), c.yd = bench_dalloc(E, 112), c.dyd = bench_dalloc(E, 113), c.dxd = bench_dalloc(E, 114);
    c.Wgd = bench_dalloc(nw, 115), c.Wud = bench_dalloc(nw, 116), c.Wdd = bench_dalloc(nw, 117);
    c.dWgd = bench_dalloc(nw, 118), c.dWud = bench_dalloc(nw, 119), c.dWdd = bench_dalloc(nw, 120);
    bench_vs_ref(csv, "swiglu fwd", "n=64 d=256 hid=683", k_fwd, &c, k_ref_fwd, &c);
    bench_vs_ref(csv, "swiglu bwd", "n=64 d=256 hid=683", k_bwd, &c, k_ref_bwd, &c);
    phax_free(c.x), phax_free(c.y), phax_free(c.dy), phax_free(c.dx), phax_free(c.Wg), phax_free(c.Wu);
    phax_free(c.Wd), phax_free(c.dWg), phax_free(c.dWu), phax_free(c.dWd), phax_free(c.ws);
    phax_free(c.xd), phax_free(c.yd), phax_free(c.dyd), phax_free(c.dxd), phax_free(c.Wgd), phax_free(c.Wud);
    phax_free(c.Wdd), phax_free(c.dWgd), phax_free(c.dWud), phax_free(c.dWdd);
    bench_csv_close(csv);
    return 0;
}
