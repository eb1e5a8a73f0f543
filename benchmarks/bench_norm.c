// bench_norm: fast/cpu's RMSNorm, LayerNorm and head norm at the d = 256 model's shapes.
//
// usage: bench_norm [out.csv]
//
//   * fwd/bwd at n = B·T ∈ {512, 2048, 8192} rows of d = 256 (head norm: 4 heads of 64): GB/s
//     of compulsory traffic (each array read or written once; an accumulated gradient counts
//     read + write) against the memory-bandwidth ceiling measured here (bench_util.h's STREAM
//     triad, 12 bytes per element as STREAM counts).
//       fwd y = f(x): 8 B/elem;  bwd dx += f'(x, dy): 16 B/elem (x, dy, dx r+w).
//   * the speed-up over ref (float64, scalar) at n = 256.
// Timing, buffers, the environment line: bench_util.h (PHAX_BENCH_CLOCK=thread there).
#include "phax/fcpu.h"
#include "phax/ref.h"
#include "bench_util.h"

typedef struct {
    size_t n;
    int d, H, dh;
    float *x, *y, *dy, *dx, *g, *b, *dg, *db, *ws;
    double *xd, *yd, *dyd, *dxd, *gd, *bd, *dgd, *dbd;
} ctx_t;

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
    fcpu_layernorm_bwd(c->dx, c->dg, c->db, c->dy, c->x, c->g, c->n, c->d, PHAX_LAYERNORM_EPS, c->ws);
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

int main(int argc, char **argv) {
    FILE *csv = bench_csv_open(bench_csv_arg(argc, argv, "bench_norm"), BENCH_OPS_CSV_HEADER);
    const int threads = bench_ops_start("bench_norm");
    const double bw = bench_triad_print(threads);
    bench_ops_header();
    const size_t NS[] = {512, 2048, 8192}, maxe = (size_t)8192 * 256;
    ctx_t c = {.d = 256, .H = 4, .dh = 64};
    c.x = bench_falloc(maxe, 41), c.y = bench_falloc(maxe, 42), c.dy = bench_falloc(maxe, 43);
    c.dx = bench_falloc(maxe, 44), c.g = bench_falloc(256, 45), c.b = bench_falloc(256, 46);
    c.dg = bench_falloc(256, 47), c.db = bench_falloc(256, 48);
    size_t ws = fcpu_rmsnorm_bwd_ws(8192, 256);  // the largest of the three backward workspaces
    if (fcpu_layernorm_bwd_ws(8192, 256) > ws) ws = fcpu_layernorm_bwd_ws(8192, 256);
    if (fcpu_headnorm_bwd_ws(8192, 4, 64) > ws) ws = fcpu_headnorm_bwd_ws(8192, 4, 64);
    c.ws = bench_falloc(ws / 4 + 1, 51);
    bench_fscale(c.dy, maxe, 1e-3f);
    const struct {
        const char *name;
        bench_fn fn, ref;
        double bytes;  // per element
    } ops[] = {{"rmsnorm fwd", k_rms_fwd, k_ref_rms_fwd, 8},  {"rmsnorm bwd", k_rms_bwd, k_ref_rms_bwd, 16},
               {"layernorm fwd", k_ln_fwd, k_ref_ln_fwd, 8}, {"layernorm bwd", k_ln_bwd, k_ref_ln_bwd, 16},
               {"headnorm fwd", k_hn_fwd, k_ref_hn_fwd, 8},  {"headnorm bwd", k_hn_bwd, k_ref_hn_bwd, 16}};
    for (int ni = 0; ni < 3; ni++) {
        c.n = NS[ni];
        const double e = (double)c.n * c.d;
        char shape[64], hshape[64];
        snprintf(shape, sizeof shape, "n=%zu d=256", c.n);
        snprintf(hshape, sizeof hshape, "n=%zu d=256 H=4", c.n);
        for (int k = 0; k < 6; k++) {
            const double t = bench_time_med(ops[k].fn, &c), gbs = ops[k].bytes * e / t / 1e9;
            bench_row(csv, ops[k].name, k >= 4 ? hshape : shape, t * 1e3, gbs, "GB/s", 100 * gbs / bw, "");
        }
    }

    printf("\nspeed-up over ref (float64, scalar) at a small size:\n");
    c.n = 256;
    const size_t E = 256 * 256;
    c.xd = bench_dalloc(E, 111), c.yd = bench_dalloc(E, 112), c.dyd = bench_dalloc(E, 113), c.dxd = bench_dalloc(E, 114);
    c.gd = bench_dalloc(256, 115), c.bd = bench_dalloc(256, 116), c.dgd = bench_dalloc(256, 117);
    c.dbd = bench_dalloc(256, 118);
    for (int k = 0; k < 6; k++)
        bench_vs_ref(csv, ops[k].name, k >= 4 ? "n=256 H=4 dh=64" : "n=256 d=256", ops[k].fn, &c, ops[k].ref, &c);
    printf("\nmemory ceiling again at the end: %.1f GB/s (start: %.1f GB/s)\n", bench_triad_gbs(threads), bw);
    phax_free(c.x), phax_free(c.y), phax_free(c.dy), phax_free(c.dx), phax_free(c.g), phax_free(c.b);
    phax_free(c.dg), phax_free(c.db), phax_free(c.ws);
    phax_free(c.xd), phax_free(c.yd), phax_free(c.dyd), phax_free(c.dxd), phax_free(c.gd), phax_free(c.bd);
    phax_free(c.dgd), phax_free(c.dbd);
    bench_csv_close(csv);
    return 0;
}
