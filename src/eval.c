// phax eval: perplexity of a checkpoint on a corpus split, and the loss by
// position inside the evaluation window (to show extrapolation beyond the
// training length).
//
//   windows (default): the split is cut into consecutive windows of T tokens
//     (T = the training length unless --seq says otherwise), each scored
//     independently from an empty state (docs/spec.md §5): every token after the
//     first is predicted exactly once, by the window that holds it.
//   --carry: the split is read token by token with the per-token decoder, so
//     recurrent state (GSS, mLSTM) and the sliding-window KV cache carry across
//     the whole split; every attention layer must then have a finite window
//     (swax/swa/mlstm/swa_full/swax_gdn: w_long or --window; pha family: attn_window > 0).
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_args.h"
#include "phax/checkpoint.h"
#include "phax/data.h"
#include "phax/model_plan.h"
#include "phax/backend.h"
#include "phax/tokenizer.h"

// --carry reads the split in calls of CARRY_PASS tokens to the decoder's prefill_all, every
// token's logits kept ((CARRY_PASS, V) floats): the command's read size, not a property of
// a backend. Any size gives the losses of stepping token by token (up to float32 rounding);
// 128 bounds ref's naive decoder (one whole forward per call) and is a multiple of fast/cpu's
// prefill pass (FCPU_PREFILL_CHUNK, 128), so the cpu decoder's passes fall where one call
// over the whole split would put them.
#define CARRY_PASS 128
#define MAX_BUCKETS PHAX_EVAL_MAX_BUCKETS

#define die(...) cli_die("phax eval", __VA_ARGS__)
#define die_lib() die("%s", phax_error())  // the library's message names the file

#define now_s phax_clock



// Default buckets: 0, 16, 32, 64, ..., T.
static void default_buckets(eval_opts *o, int T) {
    o->nb = 0;
    o->edges[0] = 0;
    long e = 16;
    while (e < T && o->nb < MAX_BUCKETS - 1) o->edges[++o->nb] = e, e *= 2;
    o->edges[++o->nb] = T;
}

static char *locate_split(eval_opts *o) {
    if (o->file) {
        struct stat sb;
        if (stat(o->file, &sb) != 0) die("%s: no such file", o->file);
        if (!S_ISREG(sb.st_mode) || sb.st_size == 0) die("%s: empty or not a regular file", o->file);
        return strdup(o->file);
    }
    struct stat sb;
    if (stat(o->data_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) die("%s: no such directory", o->data_dir);
    char *p = phax_data_find_split(o->data_dir, o->split);
    char *train = p ? NULL : phax_data_find_split(o->data_dir, "train");
    if (!p && !train) {
        // One input.txt (tiny-shakespeare), split 90/10 on its token stream as phax train does.
        char *in = cli_path_join("phax eval", o->data_dir, "input.txt");
        if (cli_is_file(in)) {
            o->part = strcmp(o->split, "train") ? 2 : 1;
            p = in;
        } else {
            free(in);
        }
    }
    free(train);
    if (!p) die("%s: no %s split (%s.txt[.xz], ptb.%s.txt[.xz], ptb.char.%s.txt[.xz], or input.txt)",
                o->data_dir, o->split, o->split, o->split, o->split);
    if (stat(p, &sb) == 0 && sb.st_size == 0) die("%s: empty file", p);
    return p;
}

typedef struct {
    double sum[MAX_BUCKETS];
    long count[MAX_BUCKETS];
    double total;
    long n;
} tally;

static void tally_add(tally *t, const eval_opts *o, long pos, double loss) {
    t->total += loss, t->n++;
    for (int b = 0; b < o->nb; b++)
        if (pos >= o->edges[b] && pos < o->edges[b + 1]) {
            t->sum[b] += loss, t->count[b]++;
            return;
        }
}

// Independent windows of T, B per forward.
static void eval_windows(phax_bmodel *m, const int32_t *tok, size_t n, const eval_opts *o, tally *t) {
    size_t BT = (size_t)o->B * o->T;
    int32_t *x = malloc(BT * sizeof *x), *y = malloc(BT * sizeof *y);
    float *loss = malloc(BT * sizeof *loss);
    if (!x || !y || !loss) die("out of memory");
    phax_eval_iter it;
    if (phax_eval_iter_init(&it, tok, n, o->T)) die_lib();
    for (;;) {
        int rows = 0;
        for (; rows < o->B; rows++)
            if (!phax_eval_iter_next(&it, x + (size_t)rows * o->T, y + (size_t)rows * o->T)) break;
        if (rows == 0) break;
        for (size_t i = (size_t)rows * o->T; i < BT; i++) x[i] = 0, y[i] = -1;
        if (phax_bmodel_token_losses(m, x, y, o->B, o->T, o->window, loss)) die_lib();
        for (size_t i = 0; i < BT; i++)
            if (y[i] >= 0) tally_add(t, o, (long)(i % o->T), loss[i]);
        if (rows < o->B) break;
    }
    free(x), free(y), free(loss);
}

// Token by token, state carried over the whole split; "position" is the index
// modulo T, so the buckets compare with the windowed mode.
static void eval_carry(phax_bmodel *m, const int32_t *tok, size_t n, const eval_opts *o, tally *t) {
    const phax_model_cfg *c = phax_bmodel_cfg(m);
    if (phax_plan_full_attention(c, o->window))
        die("--carry needs windowed attention: this %s model attends to the whole split "
            "(use the windowed mode, or a model with a finite window)", phax_family_name(c->family));
    phax_bdecoder *d = phax_bdecoder_new(m, 1, o->window);
    if (!d) die_lib();
    int V = c->vocab_size;
    // Read in passes of CARRY_PASS tokens, every token's logits kept: the same losses as
    // stepping one token at a time, faster.
    const size_t R = CARRY_PASS;
    float *lg = malloc(R * (size_t)V * sizeof *lg);  // (R, V)
    if (!lg) die("out of memory");
    double t0 = now_s();
    for (size_t i0 = 0; i0 + 1 < n; i0 += R) {
        const size_t r = n - 1 - i0 < R ? n - 1 - i0 : R;
        if (phax_bdecoder_prefill_all(d, tok + i0, (int)r, lg)) die_lib();
        for (size_t k = 0; k < r; k++) {
            const size_t i = i0 + k;
            const float *l = lg + k * (size_t)V;
            float mx = l[0];
            for (int j = 1; j < V; j++) mx = l[j] > mx ? l[j] : mx;
            double se = 0;
            for (int j = 0; j < V; j++) se += exp((double)l[j] - mx);
            tally_add(t, o, (long)(i % o->T), mx + log(se) - l[tok[i + 1]]);
        }
        if (isatty(2) && (i0 / R) % 8 == 7)
            fprintf(stderr, "\r%zu / %zu tokens, %.0f tok/s ", i0 + r, n - 1, (i0 + r) / (now_s() - t0));
    }
    if (isatty(2)) fputc('\n', stderr);
    free(lg);
    phax_bdecoder_free(d);
}

static void write_outputs(const eval_opts *o, const phax_ckpt *ck, const char *split_path, size_t n,
                          const tally *t, double secs) {
    double loss = t->total / (double)t->n;
    if (o->json_out) {
        // Every bucket, as in the CSV; an empty one has loss and ppl null (JSON has no NaN).
        json_t *b = json_array();
        for (int i = 0; i < o->nb; i++) {
            double l = t->count[i] ? t->sum[i] / t->count[i] : NAN;
            json_t *e = json_pack("{s:I, s:I, s:I, s:o, s:o}", "lo", (json_int_t)o->edges[i], "hi",
                                  (json_int_t)o->edges[i + 1], "tokens", (json_int_t)t->count[i],
                                  "loss", isfinite(l) ? json_real(l) : json_null(), "ppl",
                                  isfinite(exp(l)) ? json_real(exp(l)) : json_null());
            if (!e || json_array_append_new(b, e)) die("%s: cannot build the JSON of bucket %d", o->json_out, i);
        }
        json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:I, s:i, s:i, s:s, s:f, s:f, s:f, s:o}", "checkpoint",
                              ck->path, "family", phax_family_name(ck->cfg.family), "split", split_path,
                              "tokens_in_split", (json_int_t)n, "tokens_scored", (json_int_t)t->n,
                              "seq", o->T, "window", o->window, "mode", o->carry ? "carry" : "windows",
                              "loss", loss, "ppl", exp(loss), "seconds", secs, "buckets", b);
        if (!j) die("%s: cannot build the JSON result (loss %g)", o->json_out, loss);
        char *s = json_dumps(j, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        json_decref(j);
        if (!s) die("%s: cannot format the JSON result", o->json_out);
        if (phax_write_file_atomic(o->json_out, s, strlen(s))) die_lib();
        free(s);
    }
    if (o->csv_out) {
        size_t cap = 128 + (size_t)o->nb * 96, len = 0;
        char *s = malloc(cap);
        len += snprintf(s + len, cap - len, "lo,hi,tokens,loss,ppl\n");
        for (int i = 0; i < o->nb; i++) {
            double l = t->count[i] ? t->sum[i] / t->count[i] : NAN;
            len += snprintf(s + len, cap - len, "%ld,%ld,%ld,%.6f,%.4f\n", o->edges[i], o->edges[i + 1],
                            t->count[i], l, exp(l));
        }
        if (phax_write_file_atomic(o->csv_out, s, len)) die_lib();
        free(s);
    }
}

int phax_eval_main(int argc, char **argv) {
    eval_opts o;
    eval_parse_args(argc, argv, &o);
    o.be = cli_backend("phax eval", o.backend);
    char *split_path = locate_split(&o);  // the data is checked before the checkpoint is read
    phax_ckpt ck;
    if (phax_ckpt_load(o.ckpt, -1, &ck)) die_lib();
    if (!o.T) o.T = ck.train_seq > 0 ? ck.train_seq : 256;
    if (o.nb < 0) default_buckets(&o, o.T);
    // Windows of the SWA layers of a call: the SWAX family's (−1 = w_long).
    cli_check_window("phax eval", &ck.cfg, o.window);
    if (phax_plan_takes_window(&ck.cfg)) o.window = phax_plan_window(&ck.cfg, o.window);

    // Tokens of the split with the checkpoint's vocabulary (cached).
    char *cache = NULL;
    if (o.cache_dir) cache = strdup(o.cache_dir);
    else {
        // Beside the path the user named, not the file a run folder's link resolves to:
        // a run folder's generations (ckpt-<step>/) are pruned as training goes on, and
        // phax train keeps its own caches in OUT/cache, which this then shares.
        size_t len = strlen(o.ckpt) + 16;
        cache = malloc(len);
        if (!cache) die("out of memory");
        struct stat st;
        if (stat(o.ckpt, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(cache, len, "%s/cache", o.ckpt);
        else {
            snprintf(cache, len, "%s", o.ckpt);
            char *slash = strrchr(cache, '/');
            if (slash) strcpy(slash + 1, "cache");
            else strcpy(cache, "cache");
        }
        // The default cache lies in the run folder (or beside the model): a link planted there
        // must not send the caches elsewhere, as phax train refuses too (--cache-dir may name
        // anything the user chooses).
        struct stat csb;
        if (lstat(cache, &csb) == 0 && S_ISLNK(csb.st_mode))
            die("%s: a symbolic link; the default token cache must be a folder (or pass --cache-dir)", cache);
        // The default place may not be writable (a checkpoint in a read-only folder):
        // then tokenize in memory, saying so, rather than fail.
        const char *why = phax_mkdir_p(cache) != PHAX_OK ? phax_error()
                          : access(cache, W_OK) != 0     ? strerror(errno)
                                                         : NULL;
        if (why) {
            fprintf(stderr, "phax eval: note: no token cache beside the checkpoint (%s: %s); "
                    "tokenizing in memory (--cache-dir DIR keeps one)\n", cache, why);
            free(cache);
            cache = NULL;
        }
    }
    int32_t *all;
    size_t n;
    if (cache ? phax_tokens_load_cached(ck.vocab, split_path, cache, &all, &n)
              : phax_encode_file(ck.vocab, split_path, &all, &n))
        die_lib();
    const int32_t *tok = all;
    if (o.part) {  // input.txt: phax train's split of the token stream, n − n/10 | n/10
        size_t ntr = n - n / 10;
        if (o.part == 2) tok = all + ntr, n -= ntr;
        else n = ntr;
        fprintf(stderr, "phax eval: %s has no %s split: scoring its %s (as phax train splits it)\n",
                split_path, o.split, o.part == 2 ? "held-out last 10% of tokens" : "first 90% of tokens");
    }
    if (o.max_tokens > 0 && (size_t)o.max_tokens < n) n = (size_t)o.max_tokens;
    if (n < 2) die("%s: fewer than 2 tokens to score", split_path);

    // A model over the checkpoint's parameters: forwards and the decoder only read them.
    phax_bmodel *m = phax_bmodel_new(o.be, &ck.cfg, 0, ck.params);
    if (!m) die_lib();
    tally t = {0};
    double t0 = now_s();
    if (o.carry) eval_carry(m, tok, n, &o, &t);
    else eval_windows(m, tok, n, &o, &t);
    phax_bmodel_free(m);
    double secs = now_s() - t0;
    double loss = t.total / (double)t.n;
    // A perplexity of nan or inf is no result: the weights or the forward are not finite.
    if (!isfinite(loss))
        die("%s: the loss on %s is %s: the model's outputs are not finite (non-finite or "
            "overflowing weights)", ck.path, split_path, isnan(loss) ? "nan" : "infinite");
    printf("%s  %s  %s: %ld tokens scored, loss %.4f nats, perplexity %.2f  (%s, T %d, %.1f s, "
           "%.0f tok/s)\n",
           ck.path, phax_family_name(ck.cfg.family), split_path, t.n, loss, exp(loss),
           o.carry ? "state carried across the split" : "independent windows", o.T, secs,
           t.n / secs);
    if (phax_plan_takes_window(&ck.cfg)) printf("  SWA window %d\n", o.window);
    printf("  %-16s %10s %10s %10s\n", "positions", "tokens", "loss", "ppl");
    for (int b = 0; b < o.nb; b++) {
        char r[40];
        snprintf(r, sizeof r, "[%ld, %ld)", o.edges[b], o.edges[b + 1]);
        double l = t.count[b] ? t.sum[b] / t.count[b] : NAN;
        printf("  %-16s %10ld %10.4f %10.2f\n", r, t.count[b], l, exp(l));
    }
    write_outputs(&o, &ck, split_path, n, &t, secs);
    free(all), free(cache), free(split_path);
    phax_ckpt_free(&ck);
    return 0;
}
