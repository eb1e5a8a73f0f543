// phax generate: continue a prompt with a checkpoint, token by token with the
// per-token decoder (recurrent state for GSS and mLSTM, a KV cache for
// attention, a ring buffer of w entries for SWA), greedy or sampled
// (temperature, top-k) from a seeded RNG.
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cmd_args.h"
#include "phax/checkpoint.h"
#include "phax/data.h"
#include "phax/backend.h"
#include "phax/tokenizer.h"

#define die(...) cli_die("phax generate", __VA_ARGS__)
#define die_lib() die("%s", phax_error())  // the library's message names the file

#define now_s phax_clock


// Greedy: the first maximum. Sampled: softmax(logits / temp) over the top k.
static int32_t pick(const float *lg, int V, double temp, int top_k, phax_rng *r, int *idx, double *p) {
    if (temp == 0) {
        int best = 0;
        for (int j = 1; j < V; j++)
            if (lg[j] > lg[best]) best = j;
        return best;
    }
    int k = top_k > 0 && top_k < V ? top_k : V;
    // Top k by partial selection (k is small in practice; V when 0).
    for (int j = 0; j < V; j++) idx[j] = j;
    if (k < V)
        for (int a = 0; a < k; a++) {
            int best = a;
            for (int j = a + 1; j < V; j++)
                if (lg[idx[j]] > lg[idx[best]]) best = j;
            int t = idx[a];
            idx[a] = idx[best], idx[best] = t;
        }
    double mx = -INFINITY, sum = 0;
    for (int a = 0; a < k; a++) mx = fmax(mx, lg[idx[a]]);
    for (int a = 0; a < k; a++) sum += (p[a] = exp((lg[idx[a]] - mx) / temp));
    double u = phax_rng_uniform(r) * sum, acc = 0;
    for (int a = 0; a < k; a++)
        if ((acc += p[a]) > u) return idx[a];
    return idx[k - 1];
}

int phax_generate_main(int argc, char **argv) {
    gen_opts o;
    generate_parse_args(argc, argv, &o);
    const phax_backend_ops *be = cli_backend("phax generate", o.backend);
    char *text = NULL;
    if (o.prompt_file) {
        uint8_t *buf;
        size_t len;
        if (phax_data_read(o.prompt_file, &buf, &len)) die_lib();
        text = (char *)buf;
    } else {
        text = strdup(o.prompt);
    }

    phax_ckpt ck;
    if (phax_ckpt_load(o.ckpt, -1, &ck)) die_lib();
    // As phax eval: the decoder takes --window for the SWA layers only.
    cli_check_window("phax generate", &ck.cfg, o.window);
    int32_t *ids;
    size_t np;
    if (phax_encode_prompt(ck.vocab, text, &ids, &np)) die_lib();
    if (np == 0) die("the prompt is empty (no tokens)");
    if (np + (size_t)o.ntok > PHAX_MAX_SEQ)
        die("prompt (%zu tokens) + %ld new tokens exceed the maximum sequence length %d", np, o.ntok,
            PHAX_MAX_SEQ);
    // A model over the checkpoint's parameters: the decoder only reads them.
    phax_bmodel *m = phax_bmodel_new(be, &ck.cfg, 0, ck.params);
    if (!m) die_lib();
    phax_bdecoder *d = phax_bdecoder_new(m, (int)(np + o.ntok), (int)o.window);
    if (!d) die_lib();
    int V = ck.cfg.vocab_size;
    float *lg = malloc((size_t)V * sizeof *lg);
    int *idx = malloc((size_t)V * sizeof *idx);
    double *p = malloc((size_t)V * sizeof *p);
    int32_t *out = malloc(((size_t)o.ntok + 1) * sizeof *out);
    if (!lg || !idx || !p || !out) die("out of memory");

    // Prefill (passes of many tokens): the output head only at the last prompt token.
    double t0 = now_s();
    if (phax_bdecoder_prefill(d, ids, (int)np, lg)) die_lib();  // np ≤ PHAX_MAX_SEQ
    double t1 = now_s();
    phax_rng r = phax_rng_stream(o.seed, phax_hash_str("generate"));
    for (long s = 0; s < o.ntok; s++) {
        // A token from logits that are not finite is no result (as phax eval refuses a non-finite
        // loss): overflowing or non-finite weights. Nothing is printed.
        for (int j = 0; j < V; j++)
            if (!isfinite(lg[j])) {
                int nan = isnan(lg[j]);
                free(lg), free(idx), free(p), free(out);
                die("%s: the model's logits are not finite (%s at token %d of step %ld): non-finite or "
                    "overflowing weights", ck.path, nan ? "nan" : "inf", j, s + 1);
            }
        out[s] = pick(lg, V, o.temp, (int)o.top_k, &r, idx, p);
        if (s + 1 < o.ntok && phax_bdecoder_step(d, out[s], lg)) die_lib();
    }
    double t2 = now_s();
    char *gen;
    size_t glen;
    if (phax_decode(ck.vocab, out, (size_t)o.ntok, &gen, &glen)) die_lib();
    fputs(text, stdout);
    if (phax_vocab_kind(ck.vocab) == PHAX_TOK_WORD && glen && text[0] && text[strlen(text) - 1] != '\n')
        fputc(' ', stdout);
    fwrite(gen, 1, glen, stdout);
    fputc('\n', stdout);
    if (o.stats)
        fprintf(stderr, "prefill %zu tokens %.0f tok/s; decode %ld tokens %.0f tok/s; state %.1f MB\n", np,
                np / (t1 - t0), o.ntok, o.ntok / (t2 - t1 > 0 ? t2 - t1 : 1e-9),
                phax_bdecoder_state_bytes(d) / 1e6);
    free(gen), free(lg), free(idx), free(p), free(out), free(ids), free(text);
    phax_bdecoder_free(d);
    phax_bmodel_free(m);
    phax_ckpt_free(&ck);
    return 0;
}
