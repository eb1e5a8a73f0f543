// bench_loss: fast/cpu's cross-entropy and the fused output projection + cross-entropy at
// vocabulary 8192 (the d = 256 model's head).
//
// usage: bench_loss [out.csv]
//
//   * cross-entropy forward + backward on materialised logits (n, V), n ∈ {512, 2048, 8192}:
//     GB/s of compulsory traffic (12 B/logit: logits, dlogits r+w) against the
//     memory-bandwidth ceiling measured here (bench_util.h's STREAM triad).
//   * the fused projection + cross-entropy (FLOP 3·2·n·d·V) against the unfused chain (sgemm →
//     cross-entropy fwd+bwd → 2 sgemms on a materialised (n, V) logits), alternated: the
//     "of ceil" column is unfused time / fused time.
//   * the speed-up over ref (float64, scalar) at n = 256, V = 683.
// Timing, buffers, the environment line: bench_util.h (PHAX_BENCH_CLOCK=thread there).
#include "phax/fcpu.h"
#include "phax/ref.h"
#include "bench_util.h"

typedef struct {
    size_t n;
    int d, V;
    int32_t *tok;
    float *logits, *dlogits;       // (n, V)
    float *x, *W, *dx, *dW, *ws;   // the fused form: x (n, d), W (V, d)
    double *logitsd, *dlogitsd;
} ctx_t;

static void k_ce(void *v) {
    ctx_t *c = v;
    float loss;
    fcpu_cross_entropy_fwd_bwd(&loss, c->dlogits, 1.0f, c->logits, c->tok, c->n, c->V);
}
static void k_ref_ce(void *v) {
    ctx_t *c = v;
    double loss;
    ref_cross_entropy_fwd(&loss, c->logitsd, c->tok, c->n, c->V);
    ref_cross_entropy_bwd(c->dlogitsd, 1.0, c->logitsd, c->tok, c->n, c->V);
}
static void k_fused(void *v) {
    ctx_t *c = v;
    float loss;
    fcpu_linear_cross_entropy(&loss, c->dx, c->dW, 1.0f, c->x, c->W, c->tok, c->n, c->d, c->V, c->ws);
}
// unfused: logits and dlogits materialised (dlogits zeroed each time, as a model would)
static void k_unfused(void *v) {
    ctx_t *c = v;
    float loss;
    fcpu_linear_fwd(c->logits, c->x, c->W, NULL, c->n, c->d, c->V);
    memset(c->dlogits, 0, c->n * c->V * sizeof(float));
    fcpu_cross_entropy_fwd_bwd(&loss, c->dlogits, 1.0f, c->logits, c->tok, c->n, c->V);
    fcpu_linear_bwd(c->dx, c->dW, NULL, c->dlogits, c->x, c->W, c->n, c->d, c->V);
}

int main(int argc, char **argv) {
    FILE *csv = bench_csv_open(bench_csv_arg(argc, argv, "bench_loss"), BENCH_OPS_CSV_HEADER);
    const int threads = bench_ops_start("bench_loss");
    const double bw = bench_triad_print(threads);
    bench_ops_header();
    const size_t NS[] = {512, 2048, 8192}, maxn = 8192;
    ctx_t c = {.V = 8192, .d = 256};
    const size_t nv = maxn * c.V;
    c.logits = bench_falloc(nv, 61), c.dlogits = bench_falloc(nv, 62);
    bench_fscale(c.logits, nv, 3.0f);
    c.tok = bench_xmalloc(maxn * sizeof *c.tok);
    for (size_t i = 0; i < maxn; i++) c.tok[i] = (int32_t)(i * 2654435761u % c.V);
    char shape[64], note[96];
    for (int ni = 0; ni < 3; ni++) {
        c.n = NS[ni];
        snprintf(shape, sizeof shape, "n=%zu V=8192", c.n);
        const double t = bench_time_med(k_ce, &c), gbs = 12.0 * c.n * c.V / t / 1e9;
        bench_row(csv, "xent fwd+bwd", shape, t * 1e3, gbs, "GB/s", 100 * gbs / bw, "");
    }
    c.x = bench_falloc(maxn * c.d, 63), c.W = bench_falloc((size_t)c.V * c.d, 64);
    c.dx = bench_falloc(maxn * c.d, 65), c.dW = bench_falloc((size_t)c.V * c.d, 66);
    bench_fscale(c.W, (size_t)c.V * c.d, 0.2f);
    c.ws = bench_falloc(fcpu_linear_cross_entropy_ws(maxn, c.d, c.V) / 4 + 1, 69);
    for (int ni = 0; ni < 3; ni++) {
        c.n = NS[ni];
        const double fl = 3 * 2.0 * c.n * c.d * c.V;
        snprintf(shape, sizeof shape, "n=%zu d=256 V=8192", c.n);
        double tf, tu;
        bench_time_pair(k_fused, &c, k_unfused, &c, &tf, &tu);
        snprintf(note, sizeof note, "unfused %.2f ms (%.0f MB logits+grad); ws %.0f MB", tu * 1e3,
                 8.0 * c.n * c.V / 1e6, fcpu_linear_cross_entropy_ws(c.n, c.d, c.V) / 1e6);
        bench_row(csv, "linear+xent fused", shape, tf * 1e3, fl / tf / 1e9, "GFLOP/s", 100 * tu / tf, note);
    }

    printf("\nspeed-up over ref (float64, scalar) at a small size:\n");
    c.n = 256, c.V = 683;
    c.logitsd = bench_dalloc(c.n * c.V, 111), c.dlogitsd = bench_dalloc(c.n * c.V, 112);
    for (size_t i = 0; i < c.n; i++) c.tok[i] = (int32_t)(i * 37 % 683);
    bench_vs_ref(csv, "xent fwd+bwd", "n=256 V=683", k_ce, &c, k_ref_ce, &c);
    printf("\nmemory ceiling again at the end: %.1f GB/s (start: %.1f GB/s)\n", bench_triad_gbs(threads), bw);
    phax_free(c.logits), phax_free(c.dlogits), phax_free(c.x), phax_free(c.W), phax_free(c.dx), phax_free(c.dW);
    phax_free(c.ws), phax_free(c.logitsd), phax_free(c.dlogitsd), free(c.tok);
    bench_csv_close(csv);
    return 0;
}
