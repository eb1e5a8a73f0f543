// `phax niah`: the needle-in-a-haystack suite (docs/niah.md) on a checkpoint.
// Prompts come from core/niah.c; each is read by the fast/cpu per-token
// decoder (no logits until the last prompt token), then continued greedily
// and scored with string_match_all (passkey: exact match), and graded by the
// mean log-probability of the answer's digits under teacher forcing. Prints
// accuracy, graded score and needle-to-question distance per (variant, haystack,
// length, depth) and writes them as CSV.
#include <limits.h>
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
#include "phax/niah.h"
#include "phax/tokenizer.h"

#define MAX_LIST PHAX_CMD_MAX_LIST

// ---------------------------------------------------------------------------
// Errors: one line on stderr, "phax niah: <file or option>: <what>", exit 1.

#define die(...) cli_die("phax niah", __VA_ARGS__)

#define die_lib() die("%s", phax_error())  // the library's message names the file

#define now_s phax_clock

// ---------------------------------------------------------------------------
// Options.



// ---------------------------------------------------------------------------
// The haystack text, encoded with the checkpoint's vocabulary.

#define path_join(dir, name) cli_path_join("phax niah", dir, name)
#define file_exists cli_is_file

// DIR's validation split, as `phax train --data` finds it; for a corpus with a
// single input.txt, the last 10% of its tokens (the split phax train holds out).
static char *find_valid(const char *dir, int *tail_tenth) {
    char *p = phax_data_find_split(dir, "valid");
    *tail_tenth = 0;
    if (p) return p;
    p = path_join(dir, "input.txt");
    if (file_exists(p)) {
        *tail_tenth = 1;
        return p;
    }
    die("%s: no validation text (valid.txt[.xz], ptb.valid.txt[.xz], ptb.char.valid.txt[.xz] "
        "or input.txt)", dir);
}

// Tokens of the haystack text (NULL when none was asked for); *off: first token used.
static int32_t *load_text(const niah_opts *o, const phax_vocab *v, size_t *n, size_t *off) {
    *n = *off = 0;
    if (!o->data_dir && !o->text_path) return NULL;
    int tail_tenth = 0;
    char *path = o->text_path ? strdup(o->text_path) : find_valid(o->data_dir, &tail_tenth);
    int32_t *ids;
    if (phax_encode_file(v, path, &ids, n)) {
        free(path);  // (the refusal is one line; under LeakSanitizer a held path made it two)
        die_lib();
    }
    if (tail_tenth) *off = *n - *n / 10;
    fprintf(stderr, "haystack text: %s, %zu tokens\n", path, *n - *off);
    free(path);
    return ids;
}

// ---------------------------------------------------------------------------
// Generation.

static int32_t argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;  // ties: the lower id
    return best;
}

// Read the prompt (logits only at its last token), then n_gen greedy tokens.
// rows (n_answer, V): the teacher-forced logits of the canonical answer, row i
// after the prompt and answer[0..i−1]. While the greedy tokens are the answer's,
// greedy and teacher-forced logits are the same and are copied from the greedy
// pass; once they part, the prompt is read again and the answer fed token by token.
// Returns the tokens read (prefill and steps, both passes).
static double generate(phax_bdecoder *d, const phax_niah_prompt *p, float *logits, int V,
                       int32_t *out, float *rows) {
    const size_t rowsz = (size_t)V * sizeof *rows;
    double read = (double)p->n_tokens;
    phax_bdecoder_reset(d);
    if (phax_bdecoder_prefill(d, p->tokens, (int)p->n_tokens, logits)) die_lib();  // ≤ max_len
    size_t have = 0;  // rows copied
    int on_answer = 1;  // out[0..g−1] == answer[0..g−1]
    for (int g = 0; g < p->n_gen; g++) {
        if (on_answer && (size_t)g < p->n_answer) memcpy(rows + (size_t)g * V, logits, rowsz), have = g + 1;
        out[g] = argmax(logits, V);
        on_answer = on_answer && (size_t)g < p->n_answer && out[g] == p->answer[g];
        if (g + 1 < p->n_gen && phax_bdecoder_step(d, out[g], logits)) die_lib();
        read += g + 1 < p->n_gen;
    }
    if (have < p->n_answer) {
        phax_bdecoder_reset(d);
        if (phax_bdecoder_prefill(d, p->tokens, (int)p->n_tokens, logits)) die_lib();
        read += (double)p->n_tokens;
        for (size_t i = 0; i < p->n_answer; i++) {
            memcpy(rows + i * V, logits, rowsz);
            if (i + 1 < p->n_answer && phax_bdecoder_step(d, p->answer[i], logits)) die_lib();
            read += i + 1 < p->n_answer;
        }
    }
    return read;
}

// ---------------------------------------------------------------------------
// The suite.

typedef struct {
    const phax_ckpt *ck;
    phax_bmodel *model;  // over the checkpoint's parameters
    phax_bdecoder *dec;
    int dec_cap;       // max_len the decoder was made for
    float *logits;
    int32_t *gen;
    int gen_cap;
    float *rows;       // teacher-forced logits of the answer: (rows_cap, V)
    size_t rows_cap;
    double tokens, seconds;  // decoder throughput
} runner;

// A decoder that holds `need` tokens (full attention caches are sized by it).
static phax_bdecoder *decoder_for(runner *r, int need, int window) {
    if (r->dec && r->dec_cap >= need) return r->dec;
    phax_bdecoder_free(r->dec);
    r->dec = phax_bdecoder_new(r->model, need, window);
    if (!r->dec) die_lib();
    r->dec_cap = need;
    return r->dec;
}

// The prompt seed of one sample: a function of (S, variant, haystack, length,
// sample) and not of the depth, so that a depth sweep moves only the needle.
static uint64_t prompt_seed(uint64_t seed, phax_niah_variant v, phax_niah_haystack h, int length,
                            int sample) {
    char name[128];
    snprintf(name, sizeof name, "niah/%s/%s/%d/%d", phax_niah_variant_name(v),
             phax_niah_haystack_name(h), length, sample);
    phax_rng r = phax_rng_stream(seed, phax_hash_str(name));
    return phax_rng_u64(&r);
}

// One (variant, haystack, length, depth) cell: means over its samples.
typedef struct {
    double acc;       // score (string_match_all, or exact match for passkey)
    double logp;      // graded score: mean log p of the answer's digit tokens
    double distance;  // tokens from the needle to the last prompt token
} cell;

static cell run_cell(runner *r, const niah_opts *o, const phax_niah *t, phax_niah_variant var,
                     phax_niah_haystack h, int length, double depth) {
    const phax_vocab *v = r->ck->vocab;
    const int V = r->ck->cfg.vocab_size;
    double sum = 0, sum_logp = 0, sum_dist = 0;
    for (int s = 0; s < o->samples; s++) {
        phax_niah_spec spec = {var, h, length, depth, prompt_seed(o->seed, var, h, length, s)};
        phax_niah_prompt p;
        if (phax_niah_build(t, &spec, &p)) die_lib();
        if (p.n_gen > r->gen_cap) {
            free(r->gen);
            r->gen = malloc((size_t)p.n_gen * sizeof *r->gen);
            if (!r->gen) die("out of memory");
            r->gen_cap = p.n_gen;
        }
        if (p.n_answer > r->rows_cap) {
            free(r->rows);
            r->rows = malloc(p.n_answer * (size_t)V * sizeof *r->rows);
            if (!r->rows) die("out of memory");
            r->rows_cap = p.n_answer;
        }
        phax_bdecoder *d = decoder_for(r, length + p.n_gen, o->window);
        double t0 = now_s();
        r->tokens += generate(d, &p, r->logits, V, r->gen, r->rows);
        r->seconds += now_s() - t0;
        double score, logp;
        if (phax_niah_score(v, r->gen, (size_t)p.n_gen, &p, &score)) die_lib();
        if (phax_niah_graded(&p, r->rows, V, &logp)) die_lib();
        sum += score;
        sum_logp += logp;
        sum_dist += (double)p.distance;
        if (o->verbose) {
            char *text;
            if (phax_decode(v, r->gen, (size_t)p.n_gen, &text, NULL)) die_lib();
            for (char *c = text; *c; c++)
                if (*c == '\n') *c = '|';
            printf("  %s %s L=%d d=%.3f #%d: expected %s%s, score %.2f, logp %.3f, distance %zu: "
                   "%s\n", phax_niah_variant_name(var), phax_niah_haystack_name(h), length, depth,
                   s, p.values[0], p.n_values > 1 ? ",..." : "", score, logp, p.distance, text);
            free(text);
        }
        phax_niah_prompt_free(&p);
    }
    return (cell){sum / o->samples, sum_logp / o->samples, sum_dist / o->samples};
}

// Results: cells[variant][haystack][length][depth]; acc NAN for skipped lengths.
typedef struct {
    cell c[PHAX_NIAH_N_ALL_VARIANTS][PHAX_NIAH_N_HAYSTACKS][MAX_LIST][MAX_LIST];
} results;

// One table of a (variant, haystack) block: accuracy (what 0), graded score (1) or distance (2).
static void print_table(const niah_opts *o, const results *res, phax_niah_variant var,
                        phax_niah_haystack h, int what) {
    static const char *const title[3] = {"accuracy", "graded: mean log p(answer digits), teacher-forced",
                                         "mean needle-to-question distance, tokens"};
    printf("\n%s, %s haystack (%s, %d sample%s per cell)\n%8s", phax_niah_variant_name(var),
           phax_niah_haystack_name(h), title[what], o->samples, o->samples == 1 ? "" : "s", "length");
    for (int di = 0; di < o->n_depths; di++) printf("  d=%-5.3g", o->depths[di]);
    printf("  %7s\n", "mean");
    for (int li = 0; li < o->n_lengths; li++) {
        printf("%8d", o->lengths[li]);
        double sum = 0;
        for (int di = 0; di < o->n_depths; di++) {
            const cell *c = &res->c[var][h][li][di];
            double a = isnan(c->acc) ? NAN : what == 0 ? c->acc : what == 1 ? c->logp : c->distance;
            if (isnan(a)) printf("  %7s", "-");
            else if (what == 2) printf("  %7.1f", a);
            else printf("  %7.3f", a);
            sum += a;
        }
        if (isnan(sum)) printf("  %7s\n", "skipped");
        else if (what == 2) printf("  %7.1f\n", sum / o->n_depths);
        else printf("  %7.3f\n", sum / o->n_depths);
    }
}

static void print_block(const niah_opts *o, const results *res, int vi, int hi) {
    for (int what = 0; what < 3; what++) print_table(o, res, o->variants[vi], o->haystacks[hi], what);
}

static void write_csv(const niah_opts *o, const results *res) {
    size_t cap = 256 + (size_t)PHAX_NIAH_N_ALL_VARIANTS * PHAX_NIAH_N_HAYSTACKS * MAX_LIST * MAX_LIST * 128;
    char *buf = malloc(cap);
    if (!buf) die("out of memory");
    size_t k = (size_t)snprintf(buf, cap, "variant,haystack,length,depth,samples,accuracy,mean_logp,"
                                          "mean_distance\n");
    for (int vi = 0; vi < o->n_variants; vi++)
        for (int hi = 0; hi < o->n_haystacks; hi++)
            for (int li = 0; li < o->n_lengths; li++)
                for (int di = 0; di < o->n_depths; di++) {
                    const cell *c = &res->c[o->variants[vi]][o->haystacks[hi]][li][di];
                    if (isnan(c->acc)) continue;
                    k += (size_t)snprintf(buf + k, cap - k, "%s,%s,%d,%.6g,%d,%.6f,%.6f,%.3f\n",
                                          phax_niah_variant_name(o->variants[vi]),
                                          phax_niah_haystack_name(o->haystacks[hi]),
                                          o->lengths[li], o->depths[di], o->samples, c->acc,
                                          c->logp, c->distance);
                }
    if (phax_write_file_atomic(o->csv_path, buf, k)) die_lib();
    free(buf);
}

// Fill the defaults that depend on the checkpoint and the text.
static void default_sweep(niah_opts *o, const phax_ckpt *ck, int have_text) {
    if (!o->n_lengths) {
        int tl = ck->train_seq > 0 ? ck->train_seq : ck->cfg.train_len;
        const int mult2[] = {1, 2, 4, 8, 16};  // ×½, 1, 2, 4, 8
        for (int i = 0; i < 5; i++) o->lengths[o->n_lengths++] = tl * mult2[i] / 2;
    }
    if (!o->n_haystacks) {
        o->haystacks[o->n_haystacks++] = PHAX_NIAH_NOISE;
        if (have_text) o->haystacks[o->n_haystacks++] = PHAX_NIAH_TEXT;
    }
    for (int hi = 0; hi < o->n_haystacks; hi++)
        if (o->haystacks[hi] == PHAX_NIAH_TEXT && !have_text)
            die("--haystacks text: needs --data DIR or --text FILE");
}

int phax_niah_main(int argc, char **argv) {
    niah_opts o;
    niah_parse_args(argc, argv, &o);
    o.be = cli_backend("phax niah", o.backend);
    phax_ckpt ck;
    if (phax_ckpt_load(o.checkpoint, -1, &ck)) die_lib();
    // As phax eval and generate: --window sets the SWA layers only.
    cli_check_window("phax niah", &ck.cfg, o.window);
    size_t n_text, off;
    int32_t *text = load_text(&o, ck.vocab, &n_text, &off);
    default_sweep(&o, &ck, text != NULL);
    phax_niah_opts no = {.no_header = o.no_header, .n_multi = o.n_multi,
                         .passkey_digits = o.passkey_digits};
    phax_niah *t;
    if (phax_niah_new(ck.vocab, text ? text + off : NULL, n_text - off, &no, &t)) die_lib();
    if (*phax_niah_unknown_words(t))
        fprintf(stderr, "note: the vocabulary lacks %s: encoded as <unk>\n", phax_niah_unknown_words(t));
    printf("phax niah: %s (%s, vocab %d), seed %llu\n", ck.path, phax_family_name(ck.cfg.family),
           ck.cfg.vocab_size, (unsigned long long)o.seed);

    runner r = {.ck = &ck};
    if (!(r.model = phax_bmodel_new(o.be, &ck.cfg, 0, ck.params))) die_lib();
    r.logits = malloc((size_t)ck.cfg.vocab_size * sizeof *r.logits);
    results *res = malloc(sizeof *res);
    if (!r.logits || !res) die("out of memory");
    for (int a = 0; a < PHAX_NIAH_N_ALL_VARIANTS; a++)  // cells not run: skipped
        for (int b = 0; b < PHAX_NIAH_N_HAYSTACKS; b++)
            for (int l = 0; l < MAX_LIST; l++)
                for (int d = 0; d < MAX_LIST; d++) res->c[a][b][l][d] = (cell){NAN, NAN, NAN};
    for (int vi = 0; vi < o.n_variants; vi++) {
        phax_niah_variant var = o.variants[vi];
        int min_len;
        if (phax_niah_min_length(t, var, &min_len)) die_lib();
        for (int hi = 0; hi < o.n_haystacks; hi++) {
            phax_niah_haystack h = o.haystacks[hi];
            if (var == PHAX_NIAH_PASSKEY && h == PHAX_NIAH_NEEDLES) {
                fprintf(stderr, "passkey needles: skipped (the passkey needle has no key that "
                                "distractor needles could differ in)\n");
                continue;
            }
            for (int li = 0; li < o.n_lengths; li++) {
                int L = o.lengths[li];
                double t0 = now_s();
                for (int di = 0; di < o.n_depths; di++)
                    res->c[var][h][li][di] = L < min_len ? (cell){NAN, NAN, NAN}
                                                         : run_cell(&r, &o, t, var, h, L, o.depths[di]);
                fflush(stdout);  // --verbose lines before the progress line
                if (L < min_len)
                    fprintf(stderr, "%s %s %d: skipped (a %s prompt needs %d tokens)\n",
                            phax_niah_variant_name(var), phax_niah_haystack_name(h), L,
                            phax_niah_variant_name(var), min_len);
                else
                    fprintf(stderr, "%s %s %d: %.1f s\n", phax_niah_variant_name(var),
                            phax_niah_haystack_name(h), L, now_s() - t0);
            }
            print_block(&o, res, vi, hi);
        }
    }
    if (r.seconds > 0)
        printf("\ndecoder: %.0f tokens in %.1f s (%.0f tokens/s, prefill and generation)\n",
               r.tokens, r.seconds, r.tokens / r.seconds);
    if (o.csv_path) {
        write_csv(&o, res);
        printf("wrote %s\n", o.csv_path);
    }
    phax_bdecoder_free(r.dec);
    phax_bmodel_free(r.model);
    free(r.logits), free(r.gen), free(r.rows), free(res), free(text);
    phax_niah_free(t);
    phax_ckpt_free(&ck);
    return 0;
}
