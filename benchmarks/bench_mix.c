// bench_mix: fast/cpu's branch mix (PHA's softplus-normalised weights over nb branches) at the
// d = 256 model's shapes, three branches.
//
// usage: bench_mix [out.csv]
//
//   * fwd/bwd over n = B·T·256 elements per branch, B·T ∈ {512, 2048, 8192}: GB/s of
//     compulsory traffic against the memory-bandwidth ceiling measured here (bench_util.h's
//     STREAM triad).
//       fwd m = Σ w_i b_i: 4(nb+1) B/elem;  bwd db_i += w_i dm and dp: 4(3nb+1) B/elem.
//   * the speed-up over ref (float64, scalar) at n = 65536.
// Timing, buffers, the environment line: bench_util.h (PHAX_BENCH_CLOCK=thread there).
#include "phax/fcpu.h"
#include "phax/ref.h"
#include "bench_util.h"

typedef struct {
    size_t n;
    int nb;
    float *b, *m, *dm, *db, *p, *dp;  // b, db: (nb, n); m, dm: (n); p, dp: (nb)
    double *bd, *md, *dmd, *dbd, *pd, *dpd;
} ctx_t;

static void k_fwd(void *v) {
    ctx_t *c = v;
    fcpu_mix_fwd(c->m, c->b, c->p, c->nb, c->n);
}
static void k_bwd(void *v) {
    ctx_t *c = v;
    fcpu_mix_bwd(c->db, c->dp, c->dm, c->b, c->p, c->nb, c->n);
}
static void k_ref_fwd(void *v) {
    ctx_t *c = v;
    ref_mix_fwd(c->md, c->bd, c->pd, c->nb, c->n);
}
static void k_ref_bwd(void *v) {
    ctx_t *c = v;
    ref_mix_bwd(c->dbd, c->dpd, c->dmd, c->bd, c->pd, c->nb, c->n);
}

int main(int argc, char **argv) {
    FILE *csv = bench_csv_open(bench_csv_arg(argc, argv, "bench_mix"), BENCH_OPS_CSV_HEADER);
    const int threads = bench_ops_start("bench_mix");
    const double bw = bench_triad_print(threads);
    bench_ops_header();
    const size_t NS[] = {512, 2048, 8192}, maxn = (size_t)8192 * 256;
    ctx_t c = {.nb = 3};
    c.b = bench_falloc(3 * maxn, 41), c.m = bench_falloc(maxn, 42), c.dm = bench_falloc(maxn, 43);
    c.db = bench_falloc(3 * maxn, 44), c.p = bench_falloc(8, 49), c.dp = bench_falloc(8, 50);
    bench_fscale(c.dm, maxn, 1e-3f);
    for (int ni = 0; ni < 3; ni++) {
        c.n = NS[ni] * 256;
        const double e = (double)c.n;
        char shape[64];
        snprintf(shape, sizeof shape, "nb=3 n=%zu", c.n);
        double t = bench_time_med(k_fwd, &c), gbs = 4 * (c.nb + 1) * e / t / 1e9;
        bench_row(csv, "mix fwd", shape, t * 1e3, gbs, "GB/s", 100 * gbs / bw, "");
        t = bench_time_med(k_bwd, &c), gbs = 4 * (3 * c.nb + 1) * e / t / 1e9;
        bench_row(csv, "mix bwd", shape, t * 1e3, gbs, "GB/s", 100 * gbs / bw, "");
    }

    printf("\nspeed-up over ref (float64, scalar) at a small size:\n");
    c.n = 65536;
    c.bd = bench_dalloc(3 * c.n, 111), c.md = bench_dalloc(c.n, 112), c.dmd = bench_dalloc(c.n, 113);
    c.dbd = bench_dalloc(3 * c.n, 114), c.pd = bench_dalloc(8, 115), c.dpd = bench_dalloc(8, 116);
    bench_vs_ref(csv, "mix fwd", "nb=3 n=65536", k_fwd, &c, k_ref_fwd, &c);
    bench_vs_ref(csv, "mix bwd", "nb=3 n=65536", k_bwd, &c, k_ref_bwd, &c);
    printf("\nmemory ceiling again at the end: %.1f GB/s (start: %.1f GB/s)\n", bench_triad_gbs(threads), bw);
    phax_free(c.b), phax_free(c.m), phax_free(c.dm), phax_free(c.db), phax_free(c.p), phax_free(c.dp);
    phax_free(c.bd), phax_free(c.md), phax_free(c.dmd), phax_free(c.dbd), phax_free(c.pd), phax_free(c.dpd);
    bench_csv_close(csv);
    return 0;
}
