// `phax recall`: associative-recall accuracy of a checkpoint trained with
// `phax train --task recall` (docs/recall.md), by prompt length and depth of
// the queried needle. Prompts come from core/recall.c; each is read by the
// fast/cpu decoder's prefill (logits only at its last token, the query key),
// and the prompt counts as right when the argmax of those logits is the
// needle's value. The prompts of a cell are spread over the OpenMP threads, one
// decoder each (made once, for the longest length; nothing is allocated per
// prompt). Prints a table (lengths × depths) and writes every cell as JSON / CSV.
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd_args.h"
#include "phax/checkpoint.h"
#include "phax/data.h"
#include "phax/backend.h"
#include "phax/model_plan.h"
#include "phax/niah.h"  // phax_niah_logprob
#include "phax/recall.h"

#define MAX_LIST PHAX_CMD_MAX_LIST
#define MAX_LEN PHAX_MAX_SEQ  // the longest prompt

#define die(...) cli_die("phax recall", __VA_ARGS__)
#define die_lib() die("%s", phax_error())



// ---------------------------------------------------------------------------
// The grid.

// The prompt seed of one sample: a function of (S, pairs, length, sample) and
// not of the depth, so that a depth sweep draws the same keys, values and
// fillers and moves the queried needle.
static uint64_t prompt_seed(uint64_t seed, int pairs, int length, int sample) {
    char name[96];
    snprintf(name, sizeof name, "recall/%d/%d/%d", pairs, length, sample);
    phax_rng r = phax_rng_stream(seed, phax_hash_str(name));
    return phax_rng_u64(&r);
}

typedef struct {
    long correct;
    double mean_distance;
} cell;

// Per thread: a decoder for the longest prompt, its logits and a prompt buffer.
typedef struct {
    phax_bdecoder *dec;
    float *logits;
    int32_t *tokens;
} worker;

static int32_t argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;  // ties: the lower id
    return best;
}

static cell run_cell(worker *w, int V, const recall_opts *o, int length, double depth) {
    long correct = 0, dist = 0;
    int failed = 0;
    char err[512] = "";
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : correct, dist)
    for (int s = 0; s < o->samples; s++) {
        worker *me = &w[omp_get_thread_num()];
        phax_recall_spec spec = {length, o->pairs, depth, prompt_seed(o->seed, o->pairs, length, s)};
        phax_recall_prompt p;
        int rc = phax_recall_prompt_build(&spec, me->tokens, &p);
        if (rc == PHAX_OK) {
            phax_bdecoder_reset(me->dec);
            rc = phax_bdecoder_prefill(me->dec, me->tokens, length, me->logits);
        }
        if (rc != PHAX_OK) {
#pragma omp critical
            if (!failed) failed = 1, snprintf(err, sizeof err, "%s", phax_error());
            continue;
        }
        correct += argmax(me->logits, V) == p.answer;
        dist += p.distance;
    }
    if (failed) die("length %d, depth %g: %s", length, depth, err);
    return (cell){correct, (double)dist / o->samples};
}

// ---------------------------------------------------------------------------
// Output.

static void print_table(const recall_opts *o, cell *res) {
    printf("\naccuracy (%d prompt%s per cell; chance 1/16 = 0.0625; a random value of the prompt's "
           "%d: %.4g)\n%8s", o->samples, o->samples == 1 ? "" : "s", o->pairs, 1.0 / o->pairs, "length");
    for (int di = 0; di < o->n_depths; di++) printf("  d=%-5.3g", o->depths[di]);
    printf("  %7s\n", "mean");
    for (int li = 0; li < o->n_lengths; li++) {
        printf("%8d", o->lengths[li]);
        double sum = 0;
        for (int di = 0; di < o->n_depths; di++) {
            double a = (double)res[li * o->n_depths + di].correct / o->samples;
            printf("  %7.3f", a);
            sum += a;
        }
        printf("  %7.3f\n", sum / o->n_depths);
    }
}

static void write_json(const recall_opts *o, const phax_ckpt *ck, int window, cell *res) {
    json_t *cells = json_array();
    for (int li = 0; li < o->n_lengths; li++)
        for (int di = 0; di < o->n_depths; di++) {
            cell c = res[li * o->n_depths + di];
            json_t *e = json_pack("{s:i, s:f, s:i, s:I, s:f, s:f}", "length", o->lengths[li], "depth",
                                  o->depths[di], "samples", o->samples, "correct", (json_int_t)c.correct,
                                  "accuracy", (double)c.correct / o->samples, "mean_distance",
                                  c.mean_distance);
            if (!cells || !e || json_array_append_new(cells, e)) die("%s: out of memory", o->json_path);
        }
    char seed[24];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
    json_t *j = json_pack("{s:s, s:s, s:i, s:i, s:i, s:s, s:f, s:f, s:o}", "checkpoint", ck->path,
                          "family", phax_family_name(ck->cfg.family), "window", window, "pairs",
                          o->pairs, "samples", o->samples, "seed", seed, "chance",
                          1.0 / PHAX_RECALL_N_VALUES, "value_guess", 1.0 / o->pairs, "cells", cells);
    char *s = j ? json_dumps(j, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10)) : NULL;
    json_decref(j);
    if (!s) die("%s: cannot format the JSON result", o->json_path);
    if (phax_write_file_atomic(o->json_path, s, strlen(s))) die_lib();
    free(s);
}

static void write_csv(const recall_opts *o, cell *res) {
    size_t cap = 64 + (size_t)o->n_lengths * o->n_depths * 96, k = 0;
    char *buf = malloc(cap);
    if (!buf) die("out of memory");
    k += (size_t)snprintf(buf, cap, "length,depth,samples,correct,accuracy,mean_distance\n");
    for (int li = 0; li < o->n_lengths; li++)
        for (int di = 0; di < o->n_depths; di++) {
            cell c = res[li * o->n_depths + di];
            k += (size_t)snprintf(buf + k, cap - k, "%d,%.6g,%d,%ld,%.6f,%.3f\n", o->lengths[li],
                                  o->depths[di], o->samples, c.correct, (double)c.correct / o->samples,
                                  c.mean_distance);
        }
    if (phax_write_file_atomic(o->csv_path, buf, k)) die_lib();
    free(buf);
}

// ---------------------------------------------------------------------------
// --task mqar: every query of a multi-query prompt, by distance bin.

// One (length, bin) cell: queries scored, right, Σ log p(value), Σ distance,
// Σ floor (1 / (P − j) of each query j: the elimination floor of its place).
typedef struct {
    long n, correct;
    double logp, dist, floor;
} mq_cell;

static int bin_of(const recall_opts *o, int d) {
    int b = -1;
    for (int i = 0; i < o->n_bins && d >= o->bins[i]; i++) b = i;
    return b;  // −1: below the first edge (not counted)
}

// The prompts of one length; each query j is read by prefilling up to its key
// (the logits of that token), then the prompt goes on from there. res: (n_bins).
static void run_mqar_length(worker *w, int V, const recall_opts *o, int length, mq_cell *res, int nt) {
    mq_cell *part = calloc((size_t)nt * o->n_bins, sizeof *part);
    if (!part) die("out of memory");
    int failed = 0;
    char err[512] = "";
#pragma omp parallel for schedule(dynamic, 1)
    for (int s = 0; s < o->samples; s++) {
        int me_i = omp_get_thread_num();
        worker *me = &w[me_i];
        mq_cell *mine = part + (size_t)me_i * o->n_bins;
        char name[96];
        snprintf(name, sizeof name, "mqar/%d/%d/%d/%d", o->pairs, o->queries, length, s);
        phax_rng r = phax_rng_stream(o->seed, phax_hash_str(name));
        phax_mqar_layout lay;
        int rc = phax_mqar_sample(phax_rng_u64(&r), length, o->pairs, o->queries, me->tokens, &lay);
        if (rc == PHAX_OK) phax_bdecoder_reset(me->dec);
        int at = 0;
        for (int j = 0; rc == PHAX_OK && j < o->queries; j++) {
            int end = lay.qpos[j] + 1;  // through the query's key
            rc = phax_bdecoder_prefill(me->dec, me->tokens + at, end - at, me->logits);
            if (rc != PHAX_OK) break;
            at = end;
            int32_t answer = lay.value[lay.qpair[j]];
            int b = bin_of(o, lay.distance[j]);
            if (b < 0) continue;
            mq_cell *c = &mine[b];
            c->n++;
            c->correct += argmax(me->logits, V) == answer;
            c->logp += phax_niah_logprob(me->logits, V, answer);  // log softmax at the answer
            c->dist += lay.distance[j];
            c->floor += phax_mqar_query_floor(o->pairs, j);
        }
        if (rc != PHAX_OK) {
#pragma omp critical
            if (!failed) failed = 1, snprintf(err, sizeof err, "%s", phax_error());
        }
    }
    if (failed) die("length %d: %s", length, err);
    for (int i = 0; i < nt; i++)
        for (int b = 0; b < o->n_bins; b++) {
            mq_cell *c = &part[(size_t)i * o->n_bins + b];
            res[b].n += c->n, res[b].correct += c->correct, res[b].logp += c->logp;
            res[b].dist += c->dist, res[b].floor += c->floor;
        }
    free(part);
}

static int bin_hi(const recall_opts *o, int b) { return b + 1 < o->n_bins ? o->bins[b + 1] : -1; }

static void mqar_report(const recall_opts *o, const phax_ckpt *ck, int window, const mq_cell *res) {
    printf("\naccuracy by key-to-query distance (%d prompts per length, %d pairs, %d queries each; "
           "chance 1/16; elimination floor %.4g)\n%8s  %-15s %7s %8s %9s %7s\n", o->samples, o->pairs,
           o->queries, phax_mqar_floor(o->pairs, o->queries), "length", "distance", "queries", "accuracy",
           "mean logp", "floor");
    for (int li = 0; li < o->n_lengths; li++)
        for (int b = 0; b < o->n_bins; b++) {
            const mq_cell *c = &res[(size_t)li * o->n_bins + b];
            if (!c->n) continue;
            char range[40];
            if (bin_hi(o, b) < 0) snprintf(range, sizeof range, "[%d, inf)", o->bins[b]);
            else snprintf(range, sizeof range, "[%d, %d)", o->bins[b], bin_hi(o, b));
            printf("%8d  %-15s %7ld %8.3f %9.3f %7.3f\n", o->lengths[li], range, c->n,
                   (double)c->correct / c->n, c->logp / c->n, c->floor / c->n);
        }
    if (o->json_path) {
        json_t *cells = json_array();
        for (int li = 0; li < o->n_lengths; li++)
            for (int b = 0; b < o->n_bins; b++) {
                const mq_cell *c = &res[(size_t)li * o->n_bins + b];
                if (!c->n) continue;
                json_t *e = json_pack("{s:i, s:i, s:i, s:I, s:I, s:f, s:f, s:f, s:f}", "length", o->lengths[li],
                                      "bin_lo", o->bins[b], "bin_hi", bin_hi(o, b), "queries", (json_int_t)c->n,
                                      "correct", (json_int_t)c->correct, "accuracy", (double)c->correct / c->n,
                                      "mean_logp", c->logp / c->n, "mean_distance", c->dist / c->n, "floor",
                                      c->floor / c->n);
                if (!cells || !e || json_array_append_new(cells, e)) die("%s: out of memory", o->json_path);
            }
        char seed[24];
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
        json_t *j = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:s, s:f, s:f, s:o}", "task", "mqar",
                              "checkpoint", ck->path, "family", phax_family_name(ck->cfg.family), "window",
                              window, "pairs", o->pairs, "queries", o->queries, "samples", o->samples, "seed",
                              seed, "chance", 1.0 / PHAX_RECALL_N_VALUES, "floor",
                              phax_mqar_floor(o->pairs, o->queries), "cells", cells);
        char *s = j ? json_dumps(j, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10)) : NULL;
        json_decref(j);
        if (!s) die("%s: cannot format the JSON result", o->json_path);
        if (phax_write_file_atomic(o->json_path, s, strlen(s))) die_lib();
        free(s);
        printf("wrote %s\n", o->json_path);
    }
    if (o->csv_path) {
        size_t cap = 128 + (size_t)o->n_lengths * o->n_bins * 128, k = 0;
        char *buf = malloc(cap);
        if (!buf) die("out of memory");
        k += (size_t)snprintf(buf, cap, "length,bin_lo,bin_hi,queries,correct,accuracy,mean_logp,mean_distance,floor\n");
        for (int li = 0; li < o->n_lengths; li++)
            for (int b = 0; b < o->n_bins; b++) {
                const mq_cell *c = &res[(size_t)li * o->n_bins + b];
                if (!c->n) continue;
                k += (size_t)snprintf(buf + k, cap - k, "%d,%d,%d,%ld,%ld,%.6f,%.6f,%.3f,%.6f\n", o->lengths[li],
                                      o->bins[b], bin_hi(o, b), c->n, c->correct, (double)c->correct / c->n,
                                      c->logp / c->n, c->dist / c->n, c->floor / c->n);
            }
        if (phax_write_file_atomic(o->csv_path, buf, k)) die_lib();
        free(buf);
        printf("wrote %s\n", o->csv_path);
    }
}

int phax_recall_main(int argc, char **argv) {
    recall_opts o;
    recall_parse_args(argc, argv, &o);
    o.be = cli_backend("phax recall", o.backend);
    int min_len;
    if (o.mqar ? phax_mqar_min_len(o.pairs, o.queries, &min_len) : phax_recall_min_prompt(o.pairs, &min_len))
        die("--pairs: %s", phax_error());
    phax_ckpt ck;
    if (phax_ckpt_load(o.ckpt, -1, &ck)) die_lib();
    if (phax_recall_vocab_check(ck.vocab)) die("%s: %s", ck.path, phax_error());
    cli_check_window("phax recall", &ck.cfg, o.window);
    int window = phax_plan_window(&ck.cfg, o.window);
    if (!o.n_lengths) {
        int tl = ck.train_seq > 0 ? ck.train_seq : ck.cfg.train_len;
        for (int i = 0; i < 4; i++) o.lengths[o.n_lengths++] = tl << i;
    }
    int max_len = 0;
    for (int i = 0; i < o.n_lengths; i++) {
        if (o.lengths[i] < min_len || o.lengths[i] > MAX_LEN)
            die("--lengths: %d is outside [%d, %d] (%d pairs and the quer%s need %d tokens)", o.lengths[i],
                min_len, MAX_LEN, o.pairs, o.queries == 1 ? "y" : "ies", min_len);
        if (o.lengths[i] > max_len) max_len = o.lengths[i];
    }
    printf("phax recall: %s (%s, %s %d), %s%d pairs, %d quer%s, seed %llu\n", ck.path,
           phax_family_name(ck.cfg.family), phax_plan_takes_window(&ck.cfg) ? "SWA window" : "attn_window",
           window, o.mqar ? "mqar, " : "", o.pairs, o.queries, o.queries == 1 ? "y" : "ies",
           (unsigned long long)o.seed);
    fflush(stdout);

    // A model over the checkpoint's parameters; one decoder per thread for the longest prompt.
    phax_bmodel *m = phax_bmodel_new(o.be, &ck.cfg, 0, ck.params);
    if (!m) die_lib();
    int V = ck.cfg.vocab_size, nt = omp_get_max_threads();
    if (nt > o.samples) nt = o.samples;
    omp_set_num_threads(nt);
    worker *w = calloc((size_t)nt, sizeof *w);
    cell *res = calloc((size_t)o.n_lengths * o.n_depths, sizeof *res);
    if (!w || !res) die("out of memory");
    for (int i = 0; i < nt; i++) {
        w[i].dec = phax_bdecoder_new(m, max_len, o.window);
        w[i].logits = malloc((size_t)V * sizeof *w[i].logits);
        w[i].tokens = malloc((size_t)max_len * sizeof *w[i].tokens);
        if (!w[i].dec) die_lib();
        if (!w[i].logits || !w[i].tokens) die("out of memory");
    }
    double t_all = phax_clock(), tokens = 0;
    mq_cell *mres = o.mqar ? calloc((size_t)o.n_lengths * o.n_bins, sizeof *mres) : NULL;
    if (o.mqar && !mres) die("out of memory");
    for (int li = 0; o.mqar && li < o.n_lengths; li++) {
        double t0 = phax_clock();
        run_mqar_length(w, V, &o, o.lengths[li], mres + (size_t)li * o.n_bins, nt);
        tokens += (double)o.lengths[li] * o.samples;
        fprintf(stderr, "length %d: %.1f s\n", o.lengths[li], phax_clock() - t0);
    }
    if (o.mqar) {
        double secs = phax_clock() - t_all;
        mqar_report(&o, &ck, window, mres);
        printf("\n%.0f prompt tokens in %.1f s (%.0f tokens/s, %d thread%s)\n", tokens, secs, tokens / secs, nt,
               nt == 1 ? "" : "s");
        free(mres);
        goto done;
    }
    for (int li = 0; li < o.n_lengths; li++) {
        double t0 = phax_clock();
        for (int di = 0; di < o.n_depths; di++)
            res[li * o.n_depths + di] = run_cell(w, V, &o, o.lengths[li], o.depths[di]);
        tokens += (double)o.lengths[li] * o.samples * o.n_depths;
        fprintf(stderr, "length %d: %.1f s\n", o.lengths[li], phax_clock() - t0);
    }
    double secs = phax_clock() - t_all;
    print_table(&o, res);
    printf("\n%.0f prompt tokens in %.1f s (%.0f tokens/s, %d thread%s)\n", tokens, secs,
           tokens / secs, nt, nt == 1 ? "" : "s");
    if (o.json_path) {
        write_json(&o, &ck, window, res);
        printf("wrote %s\n", o.json_path);
    }
    if (o.csv_path) {
        write_csv(&o, res);
        printf("wrote %s\n", o.csv_path);
    }
done:
    for (int i = 0; i < nt; i++) phax_bdecoder_free(w[i].dec), free(w[i].logits), free(w[i].tokens);
    free(w), free(res);
    phax_bmodel_free(m);
    phax_ckpt_free(&ck);
    return 0;
}
