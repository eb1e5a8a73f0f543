// bench_rope: fast/cpu's rotary position embedding at the d = 256 model's attention shapes
// (4 heads of 64, T = 512).
//
// usage: bench_rope [out.csv]
//
//   * fwd/bwd, with the angle table and without (angles formed on the fly), at B·T ∈ {512,
//     2048, 8192}: GB/s of compulsory traffic against the memory-bandwidth ceiling measured here
//     (bench_util.h's STREAM triad); the table's own cost, once per forward.
//       fwd y = R x: 8 B/elem;  bwd dx += Rᵀ dy: 12 B/elem (dy, dx r+w).
//   * the speed-up over ref (float64, scalar) at B 1, T 256.
// Timing, buffers, the environment line: bench_util.h (PHAX_BENCH_CLOCK=thread there).
#include "phax/fcpu.h"
#include "phax/ref.h"
#include "bench_util.h"

typedef struct {
    int B, T, H, dh;
    float *x, *y, *dy, *dx, *cs;  // cs: the angle table, or NULL (angles on the fly)
    double *xd, *yd, *dyd, *dxd;
} ctx_t;

static void k_fwd(void *v) {
    ctx_t *c = v;
    fcpu_rope_fwd(c->y, c->x, c->B, c->T, c->H, c->dh, PHAX_ROPE_BASE, 0, c->cs);
}
static void k_bwd(void *v) {
    ctx_t *c = v;
    fcpu_rope_bwd(c->dx, c->dy, c->B, c->T, c->H, c->dh, PHAX_ROPE_BASE, 0, c->cs);
}
static void k_table(void *v) {
    ctx_t *c = v;
    fcpu_rope_table(c->cs, c->T, c->dh, PHAX_ROPE_BASE, 0);
}
static void k_ref_fwd(void *v) {
    ctx_t *c = v;
    ref_rope_fwd(c->yd, c->xd, c->B, c->T, c->H, c->dh, PHAX_ROPE_BASE, 0);
}
static void k_ref_bwd(void *v) {
    ctx_t *c = v;
    ref_rope_bwd(c->dxd, c->dyd, c->B, c->T, c->H, c->dh, PHAX_ROPE_BASE, 0);
}

int main(int argc, char **argv) {
    FILE *csv = bench_csv_open(bench_csv_arg(argc, argv, "bench_rope"), BENCH_OPS_CSV_HEADER);
    const int threads = bench_ops_start("bench_rope");
    const double bw = bench_triad_print(threads);
    bench_ops_header();
    const size_t NS[] = {512, 2048, 8192}, maxe = (size_t)8192 * 256;
    ctx_t c = {.T = 512, .H = 4, .dh = 64};
    c.x = bench_falloc(maxe, 41), c.y = bench_falloc(maxe, 42), c.dy = bench_falloc(maxe, 43);
    c.dx = bench_falloc(maxe, 44);
    float *table = bench_falloc(fcpu_rope_table_len(8192, 64), 52);
    bench_fscale(c.dy, maxe, 1e-3f);
    for (int ni = 0; ni < 3; ni++) {
        c.B = (int)(NS[ni] / 512), c.cs = table;
        const double e = (double)c.B * c.T * c.H * c.dh;
        char shape[64];
        snprintf(shape, sizeof shape, "B=%d T=512 H=4 dh=64", c.B);
        k_table(&c);
        double t = bench_time_med(k_fwd, &c), gbs = 8 * e / t / 1e9;
        bench_row(csv, "rope fwd (table)", shape, t * 1e3, gbs, "GB/s", 100 * gbs / bw, "");
        t = bench_time_med(k_bwd, &c), gbs = 12 * e / t / 1e9;
        bench_row(csv, "rope bwd (table)", shape, t * 1e3, gbs, "GB/s", 100 * gbs / bw, "");
        c.cs = NULL;
        t = bench_time_med(k_fwd, &c), gbs = 8 * e / t / 1e9;
        bench_row(csv, "rope fwd (no table)", shape, t * 1e3, gbs, "GB/s", 100 * gbs / bw, "");
        c.cs = table;
        t = bench_time_med(k_table, &c);
        bench_row(csv, "rope table", "T=512 dh=64", t * 1e3, 0, "-", 0, "once per forward");
    }

    printf("\nspeed-up over ref (float64, scalar) at a small size:\n");
    c.B = 1, c.T = 256, c.cs = table;
    k_table(&c);
    const size_t E = 256 * 256;
    c.xd = bench_dalloc(E, 111), c.yd = bench_dalloc(E, 112), c.dyd = bench_dalloc(E, 113), c.dxd = bench_dalloc(E, 114);
    bench_vs_ref(csv, "rope fwd (table)", "B=1 T=256 H=4 dh=64", k_fwd, &c, k_ref_fwd, &c);
    bench_vs_ref(csv, "rope bwd (table)", "B=1 T=256 H=4 dh=64", k_bwd, &c, k_ref_bwd, &c);
    printf("\nmemory ceiling again at the end: %.1f GB/s (start: %.1f GB/s)\n", bench_triad_gbs(threads), bw);
    phax_free(c.x), phax_free(c.y), phax_free(c.dy), phax_free(c.dx), phax_free(table);
    phax_free(c.xd), phax_free(c.yd), phax_free(c.dyd), phax_free(c.dxd);
    bench_csv_close(csv);
    return 0;
}
