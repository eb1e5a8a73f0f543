// bench_activation: fast/cpu's GELU and SiLU at the SwiGLU hidden activations' sizes.
//
// usage: bench_activation [out.csv]
//
//   * fwd/bwd on n = B·T·683 elements, B·T ∈ {512, 2048, 8192}: GB/s of compulsory traffic
//     against the memory-bandwidth ceiling measured here (bench_util.h's STREAM triad).
//       fwd y = f(x): 8 B/elem;  bwd dx += f'(x)·dy: 16 B/elem (x, dy, dx r+w).
//   * the speed-up over ref (float64, scalar) on 256·683 elements.
// Timing, buffers, the environment line: bench_util.h (PHAX_BENCH_CLOCK=thread there).
#include "phax/fcpu.h"
#include "phax/ref.h"
#include "bench_util.h"

typedef struct {
    size_t n;
    float *x, *y, *dy, *dx;
    double *xd, *yd, *dyd, *dxd;
} ctx_t;

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

int main(int argc, char **argv) {
    FILE *csv = bench_csv_open(bench_csv_arg(argc, argv, "bench_activation"), BENCH_OPS_CSV_HEADER);
    const int threads = bench_ops_start("bench_activation");
    const double bw = bench_triad_print(threads);
    bench_ops_header();
    const size_t NS[] = {512, 2048, 8192}, maxe = (size_t)8192 * 683;
    ctx_t c = {0};
    c.x = bench_falloc(maxe, 41), c.y = bench_falloc(maxe, 42), c.dy = bench_falloc(maxe, 43);
    c.dx = bench_falloc(maxe, 44);
    bench_fscale(c.dy, maxe, 1e-3f);
    const struct {
        const char *name;
        bench_fn fn, ref;
        double bytes;  // per element
    } ops[] = {{"gelu fwd", k_gelu_fwd, k_ref_gelu_fwd, 8},
               {"gelu bwd", k_gelu_bwd, k_ref_gelu_bwd, 16},
               {"silu fwd", k_silu_fwd, k_ref_silu_fwd, 8},
               {"silu bwd", k_silu_bwd, k_ref_silu_bwd, 16}};
    for (int ni = 0; ni < 3; ni++) {
        c.n = NS[ni] * 683;
        char shape[64];
        snprintf(shape, sizeof shape, "n=%zu (%zux683)", c.n, NS[ni]);
        for (int k = 0; k < 4; k++) {
            const double t = bench_time_med(ops[k].fn, &c), gbs = ops[k].bytes * (double)c.n / t / 1e9;
            bench_row(csv, ops[k].name, shape, t * 1e3, gbs, "GB/s", 100 * gbs / bw, "");
        }
    }

    printf("\nspeed-up over ref (float64, scalar) at a small size:\n");
    c.n = 256 * 683;
    c.xd = bench_dalloc(c.n, 111), c.yd = bench_dalloc(c.n, 112), c.dyd = bench_dalloc(c.n, 113);
    c.dxd = bench_dalloc(c.n, 114);
    for (int k = 0; k < 4; k++) bench_vs_ref(csv, ops[k].name, "n=174848", ops[k].fn, &c, ops[k].ref, &c);
    printf("\nmemory ceiling again at the end: %.1f GB/s (start: %.1f GB/s)\n", bench_triad_gbs(threads), bw);
    phax_free(c.x), phax_free(c.y), phax_free(c.dy), phax_free(c.dx);
    phax_free(c.xd), phax_free(c.yd), phax_free(c.dyd), phax_free(c.dxd);
    bench_csv_close(csv);
    return 0;
}
