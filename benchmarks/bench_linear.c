// bench_linear: fast/cpu's linear layer at the d = 256 model's shapes.
//
// usage: bench_linear [out.csv]
//
//   * fwd/bwd at n = B·T ∈ {512, 2048, 8192} rows, in→out ∈ {256→256, 256→683 (SwiGLU
//     hidden), 683→256, 256→8192 (vocab)}: GFLOP/s and % of sgemm timed on exactly the same
//     calls in the same run (fwd: the one NT product; bwd: the NN product for dx and the TN
//     product for dW), alternated with them, through fcpu_sgemm — OpenBLAS single-threaded per
//     block of rows, the split the models use.
//       FLOP: fwd 2·n·in·out; bwd 4·n·in·out (dx and dW; db's n·out not counted).
//   * the speed-up over ref (float64, scalar) at n = 256, 256→256.
// Timing, buffers, the environment line: bench_util.h (PHAX_BENCH_CLOCK=thread there).
#include "phax/fcpu.h"
#include "phax/fcpu_gemm.h"
#include "phax/ref.h"
#include "bench_util.h"

typedef struct {
    size_t n;
    int in, out;
    float *x, *W, *b, *y, *dy, *dx, *dW, *db;
    double *xd, *Wd, *bd, *yd, *dyd, *dxd, *dWd, *dbd;
} ctx_t;

static void k_fwd(void *v) {
    ctx_t *c = v;
    fcpu_linear_fwd(c->y, c->x, c->W, c->b, c->n, c->in, c->out);
}
static void k_bwd(void *v) {
    ctx_t *c = v;
    fcpu_linear_bwd(c->dx, c->dW, c->db, c->dy, c->x, c->W, c->n, c->in, c->out);
}
static void k_sgemm_fwd(void *v) {
    ctx_t *c = v;
    fcpu_sgemm(CblasNoTrans, CblasTrans, (int)c->n, c->out, c->in, 1.0f, c->x, c->in, c->W, c->in, 0.0f, c->y, c->out);
}
static void k_sgemm_bwd(void *v) {
    ctx_t *c = v;
    fcpu_sgemm(CblasNoTrans, CblasNoTrans, (int)c->n, c->in, c->out, 1.0f, c->dy, c->out, c->W, c->in, 1.0f, c->dx,
               c->in);
    fcpu_sgemm(CblasTrans, CblasNoTrans, c->out, c->in, (int)c->n, 1.0f, c->dy, c->out, c->x, c->in, 1.0f, c->dW, c->in);
}
static void k_ref_fwd(void *v) {
    ctx_t *c = v;
    ref_linear_fwd(c->yd, c->xd, c->Wd, c->bd, c->n, c->in, c->out);
}
static void k_ref_bwd(void *v) {
    ctx_t *c = v;
    ref_linear_bwd(c->dxd, c->dWd, c->dbd, c->dyd, c->xd, c->Wd, c->n, c->in, c->out);
}

int main(int argc, char **argv) {
    FILE *csv = bench_csv_open(bench_csv_arg(argc, argv, "bench_linear"), BENCH_OPS_CSV_HEADER);
    bench_ops_start("bench_linear");
    printf("ceiling: sgemm on the same calls (fcpu_sgemm), timed alternately with each op\n");
    bench_ops_header();
    const size_t NS[] = {512, 2048, 8192};
    const int IO[][2] = {{256, 256}, {256, 683}, {683, 256}, {256, 8192}};
    const size_t maxn = 8192, maxw = 256 * 8192;
    ctx_t c = {0};
    c.x = bench_falloc(maxn * 683, 11), c.W = bench_falloc(maxw, 12), c.b = bench_falloc(8192, 13);
    c.y = bench_falloc(maxn * 8192, 14), c.dy = bench_falloc(maxn * 8192, 15);
    c.dx = bench_falloc(maxn * 683, 16), c.dW = bench_falloc(maxw, 17), c.db = bench_falloc(8192, 18);
    bench_fscale(c.dy, maxn * 8192, 1e-3f);
    for (int k = 0; k < 4; k++)
        for (int ni = 0; ni < 3; ni++) {
            c.n = NS[ni], c.in = IO[k][0], c.out = IO[k][1];
            const double fl = 2.0 * c.n * c.in * c.out;
            char shape[64], note[64];
            snprintf(shape, sizeof shape, "n=%zu %d->%d", c.n, c.in, c.out);
            double tf, tsf, tb, tsb;
            bench_time_pair(k_fwd, &c, k_sgemm_fwd, &c, &tf, &tsf);
            bench_time_pair(k_bwd, &c, k_sgemm_bwd, &c, &tb, &tsb);
            snprintf(note, sizeof note, "sgemm %.1f GFLOP/s (+bias)", fl / tsf / 1e9);
            bench_row(csv, "linear fwd", shape, tf * 1e3, fl / tf / 1e9, "GFLOP/s", 100 * tsf / tf, note);
            snprintf(note, sizeof note, "sgemm %.1f GFLOP/s (+db)", 2 * fl / tsb / 1e9);
            bench_row(csv, "linear bwd", shape, tb * 1e3, 2 * fl / tb / 1e9, "GFLOP/s", 100 * tsb / tb, note);
        }

    printf("\nspeed-up over ref (float64, scalar) at a small size:\n");
    const size_t E = 256 * 256;
    c.n = 256, c.in = 256, c.out = 256;
    c.xd = bench_dalloc(E, 111), c.yd = bench_dalloc(E, 112), c.dyd = bench_dalloc(E, 113), c.dxd = bench_dalloc(E, 114);
    c.Wd = bench_dalloc(E, 115), c.bd = bench_dalloc(256, 116), c.dWd = bench_dalloc(E, 117), c.dbd = bench_dalloc(256, 118);
    bench_vs_ref(csv, "linear fwd", "n=256 256->256", k_fwd, &c, k_ref_fwd, &c);
    bench_vs_ref(csv, "linear bwd", "n=256 256->256", k_bwd, &c, k_ref_bwd, &c);
    phax_free(c.x), phax_free(c.W), phax_free(c.b), phax_free(c.y), phax_free(c.dy), phax_free(c.dx);
    phax_free(c.dW), phax_free(c.db);
    phax_free(c.xd), phax_free(c.yd), phax_free(c.dyd), phax_free(c.dxd), phax_free(c.Wd), phax_free(c.bd);
    phax_free(c.dWd), phax_free(c.dbd);
    bench_csv_close(csv);
    return 0;
}
