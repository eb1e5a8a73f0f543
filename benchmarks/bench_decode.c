// bench_decode: reading a prompt with the decoder's prefill (fcpu_decoder_prefill,
// passes of FCPU_PREFILL_CHUNK tokens) against feeding it one token at a time
// (fcpu_decoder_step), at 1k, 4k and 16k tokens of context, for a d 256 model of
// each kind of state: PHA (GSS ∥ full attention ∥ FFN, the KV cache grows) and
// SWAX (mLSTM and sliding-window attention, window 128: constant state).
//   * prefill tok/s: a prompt of L tokens in one call, divided by its wall time;
//   * step tok/s: the per-token decoder at context L, timed over the last STEPS
//     tokens after a prefill of L − STEPS (the cost a step has there; stepping
//     the whole prompt token by token would take minutes at 16k);
//   * speed-up: prefill tok/s over step tok/s at the same L. Stepping all L tokens
//     costs at most L steps at context L, so this is an upper bound of the speed-up
//     over the old per-token prompt read for attention that grows with L (for the
//     constant-state SWAX the step cost is flat and it is the speed-up).
//   bench_decode [out.csv]
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "phax/fcpu_decode.h"

#define STEPS 32

static void cfg_of(phax_model_cfg *c, phax_family f) {
    *c = phax_model_cfg_default(f);
    c->vocab_size = 8192, c->d_model = 256, c->n_layers = 4;
    c->n_heads = 8, c->n_kv_heads = 2, c->head_dim = 32, c->ffn_hidden = 683;
    c->tie_embeddings = 0, c->train_len = 512;
    c->w_short = 128, c->w_long = 128;
    if (phax_model_cfg_resolve(c)) {
        fprintf(stderr, "bench_decode: %s\n", phax_error());
        exit(1);
    }
}

int main(int argc, char **argv) {
    const char *csv_path = bench_csv_arg(argc, argv, "bench_decode");
    FILE *csv = bench_csv_open(csv_path, "family,context,prefill_tok_s,step_tok_s,speedup");
    bench_print_env(stdout, "bench_decode");
    const phax_family fams[] = {PHAX_FAMILY_PHA, PHAX_FAMILY_SWAX};
    const int Ls[] = {1024, 4096, 16384};
    printf("%-6s %8s %14s %12s %9s\n", "family", "context", "prefill tok/s", "step tok/s", "speed-up");
    for (int fi = 0; fi < 2; fi++) {
        phax_model_cfg c;
        cfg_of(&c, fams[fi]);
        fcpu_model m;
        if (fcpu_model_new(&m, &c, 1)) {
            fprintf(stderr, "bench_decode: %s\n", phax_error());
            return 1;
        }
        const int Lmax = Ls[2];
        int32_t *tok = bench_xmalloc((size_t)Lmax * sizeof *tok);
        float *lg = bench_xmalloc((size_t)c.vocab_size * sizeof *lg);
        for (int i = 0; i < Lmax; i++) tok[i] = (int32_t)((i * 2654435761u) % (unsigned)c.vocab_size);
        fcpu_decoder *d = fcpu_decoder_new(&m, Lmax, -1);
        if (!d) {
            fprintf(stderr, "bench_decode: %s\n", phax_error());
            return 1;
        }
        for (int li = 0; li < 3; li++) {
            const int L = Ls[li];
            fcpu_decoder_reset(d);
            double t0 = bench_wall();
            if (fcpu_decoder_prefill(d, tok, L, lg)) return fprintf(stderr, "%s\n", phax_error()), 1;
            const double pre = L / (bench_wall() - t0);
            fcpu_decoder_reset(d);
            if (fcpu_decoder_prefill(d, tok, L - STEPS, NULL)) return 1;
            t0 = bench_wall();
            for (int i = L - STEPS; i < L; i++)
                if (fcpu_decoder_step(d, tok[i], i + 1 == L ? lg : NULL)) return 1;
            const double step = STEPS / (bench_wall() - t0);
            printf("%-6s %8d %14.0f %12.0f %8.1fx\n", phax_family_name(c.family), L, pre, step,
                   pre / step);
            fflush(stdout);
            if (csv) fprintf(csv, "%s,%d,%.1f,%.1f,%.2f\n", phax_family_name(c.family), L, pre, step, pre / step);
        }
        fcpu_decoder_free(d);
        free(tok), free(lg);
        fcpu_model_free(&m);
    }
    bench_csv_close(csv);
    return 0;
}
