// bench_adamw: fast/cpu's AdamW step (global-norm clipping, decoupled weight decay) over a
// d = 256 model's tensors.
//
// usage: bench_adamw [out.csv]
//
//   * one step over the tensor sizes of a d = 256, 8-layer model, roughly (embedding 8192×256;
//     per layer 4·256² + 3·256·683 weights and a 512-element norm): GB/s of compulsory traffic,
//     28 B/param (p, m, v read + written; g read), against the memory-bandwidth ceiling measured
//     here (bench_util.h's STREAM triad).
//   * the speed-up over ref (float64, scalar) on 1 M parameters in 4 tensors.
// Timing, buffers, the environment line: bench_util.h (PHAX_BENCH_CLOCK=thread there).
#include "phax/fcpu.h"
#include "phax/ref.h"
#include "bench_util.h"

typedef struct {
    fcpu_adamw_param *ap;
    ref_adamw_param *rp;
    int np;
    long step;
} ctx_t;

static void k_step(void *v) {
    ctx_t *c = v;
    phax_adamw_cfg cfg = phax_adamw_cfg_default();
    double gn;
    fcpu_adamw_step(c->ap, c->np, &cfg, ++c->step, &gn);
}
static void k_ref_step(void *v) {
    ctx_t *c = v;
    phax_adamw_cfg cfg = phax_adamw_cfg_default();
    double gn;
    ref_adamw_step(c->rp, c->np, &cfg, ++c->step, &gn);
}

static void free_params(ctx_t *c) {
    for (int j = 0; j < c->np; j++) {
        if (c->ap)
            phax_free(c->ap[j].p), phax_free((float *)c->ap[j].g), phax_free(c->ap[j].m), phax_free(c->ap[j].v);
        if (c->rp)
            phax_free(c->rp[j].p), phax_free((double *)c->rp[j].g), phax_free(c->rp[j].m), phax_free(c->rp[j].v);
    }
    free(c->ap), free(c->rp);
    c->ap = NULL, c->rp = NULL;
}

int main(int argc, char **argv) {
    FILE *csv = bench_csv_open(bench_csv_arg(argc, argv, "bench_adamw"), BENCH_OPS_CSV_HEADER);
    const int threads = bench_ops_start("bench_adamw");
    const double bw = bench_triad_print(threads);
    bench_ops_header();
    const int L = 8;
    ctx_t c = {.np = 1 + 3 * L};
    c.ap = bench_xmalloc(c.np * sizeof *c.ap);
    size_t total = 0;
    for (int j = 0; j < c.np; j++) {
        const size_t n = j == 0 ? (size_t)8192 * 256 : j % 3 == 1 ? 4 * 256 * 256 : j % 3 == 2 ? 3 * 256 * 683 : 512;
        c.ap[j] = (fcpu_adamw_param){bench_falloc(n, 80 + j), bench_falloc(n, 120 + j), bench_falloc(n, 160 + j),
                                     bench_falloc(n, 200 + j), n, j % 3 != 0};
        for (size_t i = 0; i < n; i++) c.ap[j].m[i] = 0, c.ap[j].v[i] = 0;
        total += n;
    }
    char shape[64];
    snprintf(shape, sizeof shape, "%zu params, %d tensors", total, c.np);
    const double t = bench_time_med(k_step, &c), gbs = 28.0 * total / t / 1e9;
    bench_row(csv, "adamw step", shape, t * 1e3, gbs, "GB/s", 100 * gbs / bw, "clip 1, wd 0.1");
    free_params(&c);

    printf("\nspeed-up over ref (float64, scalar) at a small size:\n");
    c.np = 4, c.step = 0;
    c.ap = bench_xmalloc(4 * sizeof *c.ap), c.rp = bench_xmalloc(4 * sizeof *c.rp);
    for (int j = 0; j < 4; j++) {
        const size_t n = 1 << 18;
        c.ap[j] = (fcpu_adamw_param){bench_falloc(n, 130 + j), bench_falloc(n, 140 + j), bench_falloc(n, 150 + j),
                                     bench_falloc(n, 160 + j), n, 1};
        c.rp[j] = (ref_adamw_param){bench_dalloc(n, 170 + j), bench_dalloc(n, 180 + j), bench_dalloc(n, 190 + j),
                                    bench_dalloc(n, 200 + j), n, 1};
        for (size_t i = 0; i < n; i++) c.ap[j].m[i] = c.ap[j].v[i] = 0, c.rp[j].m[i] = c.rp[j].v[i] = 0;
    }
    // The steps count on from each other's: both sides run the same number of updates, which
    // cost the same whatever the step.
    bench_vs_ref(csv, "adamw step", "1M params", k_step, &c, k_ref_step, &c);
    printf("\nmemory ceiling again at the end: %.1f GB/s (start: %.1f GB/s)\n", bench_triad_gbs(threads), bw);
    free_params(&c);
    bench_csv_close(csv);
    return 0;
}
