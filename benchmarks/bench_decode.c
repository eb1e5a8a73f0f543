// bench_decode: the per-token decoder (phax/fcpu_decode.h) of any model at a list
// of context lengths — prefill tokens/s, per-token decode tokens/s, the decoder's
// carried state (KV caches, ring buffers, GSS and mLSTM states) and the process's
// peak resident memory.
//
// usage:
//   bench_decode [out.csv]       what `ninja bench` runs: pha and swax at the bench
//                                config (d 256), contexts 1024, 4096, 16384
//   bench_decode --family F[,G...] [--config FILE.json] [--set KEY=VALUE ...]
//                [--contexts 512,2048,8192] [--steps 32] [--window W] [--chunk N]
//                [--csv FILE]
//
// Config: --config FILE.json (phax's model JSON, e.g. a run's config.json), its
// "family" replaced by --family, then every --set KEY=VALUE (VALUE is JSON or a
// bare word, as `phax train --set`). Without --config: the bench config of
// bench_model (d_model 256, 4 layers, vocab 8192 untied, 8 q / 2 kv heads of 32,
// SwiGLU 683, each family's defaults for the rest) with train_len 512 and
// w_short = w_long = 128. Parameters: random (the seed-1 init); the rates and the
// memory do not depend on their values. Tokens: a fixed pseudo-random sequence.
//
// Per context L (in increasing order), with a decoder made for max_len = L (its
// full-attention KV cache holds exactly L entries) before anything is timed and
// freed after — nothing is allocated while timing:
//   * prefill tok/s: fcpu_decoder_prefill of L tokens (passes of --chunk tokens,
//     default FCPU_PREFILL_CHUNK) from an empty state, L / wall time. A first
//     prefill warms up and sizes the repeats: if it took ≥ 1 s it is the result;
//     otherwise the median of 3 measurements, each ⌈0.2 s / first⌉ prefills
//     (≥ ~0.2 s each) after a reset;
//   * step tok/s: per-token decoding at context L: a prefill of L − STEPS tokens,
//     then STEPS timed fcpu_decoder_step calls with the next-token logits each (the
//     output head every token, as generation needs), STEPS / wall time of the steps.
//     When the first prefill took < 1 s: the median of 3 measurements, each of as
//     many such rounds as give ≥ 0.2 s of timed steps (at most 2 s of rounds);
//   * speedup: prefill tok/s / step tok/s;
//   * state_bytes: fcpu_decoder_state_bytes_at(d, L): full-attention KV caches of
//     L entries, ring buffers of the window, GSS and mLSTM states;
//   * peak_rss_mb: getrusage ru_maxrss of the process after the context (MB =
//     10^6 bytes), the high-water mark reset (/proc/self/clear_refs, "5") just
//     before the decoder for L is made: the resident model (parameters and its
//     zeroed gradient buffer, 8 bytes per parameter), OpenBLAS's buffers, the token
//     and logit buffers and the decoder for L — not the float64 transient of the
//     model's initialisation (8 more bytes per parameter), which would otherwise
//     be every context's peak. glibc's mmap threshold is pinned at 1 MiB so a
//     smaller context's freed decoder goes back to the system. With several
//     families each runs in its own forked child.
//
// Ceilings, measured first in this process and printed beside the rates: a pass
// runs on one OpenMP thread (see pass() in fast/cpu/decode.c), so both are taken
// with OpenMP's thread count set to 1 as there: cblas_sgemm on the pass's FFN
// shape (chunk × d)·(d × ffn_hidden)ᵀ in GFLOP/s for the prefill, and cblas_sgemv
// on the output head's shape (V × d) in GB/s of weights streamed for the step.
// The table's prefill GFLOP/s counts the matmuls only (2 · P_mm per token; P_mm as
// bench_model: every 2-D *.weight but the untied embedding lookup), a lower bound;
// the step's GB/s is (4 · P_mm + state_bytes) per token — every weight and the
// state read once.
//
// CSV: family,context,prefill_tok_s,step_tok_s,speedup,state_bytes,peak_rss_mb,
//      params,d_model,n_layers,threads   (threads: OpenMP's, omp_get_max_threads)
#define _DEFAULT_SOURCE
#include <errno.h>
#include <jansson.h>
#include <malloc.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "phax/fcpu_decode.h"
#include "phax/fmodel.h"
#include "phax/model.h"
#include "phax/model_plan.h"

#define MAX_CTX 32
#define MAX_SETS 64
#define MAX_FAM 8
#define CSV_HEADER \
    "family,context,prefill_tok_s,step_tok_s,speedup,state_bytes,peak_rss_mb,params,d_model," \
    "n_layers,threads"

typedef struct {
    const char *config;
    const char *sets[MAX_SETS];
    int nsets;
    int ctx[MAX_CTX], nctx;
    int steps, window, chunk;
} opts_t;

static void usage(FILE *f, int rc) {
    fprintf(f,
            "usage: bench_decode [out.csv]\n"
            "       bench_decode --family F[,G...] [--config FILE.json] [--set KEY=VALUE ...]\n"
            "                    [--contexts 512,2048,8192] [--steps 32] [--window W] [--chunk N]\n"
            "                    [--csv FILE]\n"
            "  --config: phax model JSON (--family replaces its family); --set: one key (repeatable)\n"
            "  --window: SWAX family window as fcpu_decoder_new (-1 = w_long, 0 = full); --chunk:\n"
            "  prefill pass length (default %d). CSV: %s\n",
            FCPU_PREFILL_CHUNK, CSV_HEADER);
    exit(rc);
}

static void die(const char *fmt, const char *arg) {
    fprintf(stderr, "bench_decode: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    exit(2);
}

// --- configuration --------------------------------------------------------------------------
// The config of family `fam` (NULL: the file's): the file or the bench config, then --set.
static int build_cfg(phax_model_cfg *c, const char *fam, const opts_t *o) {
    json_t *j;
    if (o->config) {
        phax_model_cfg check;  // the file's own messages first
        if (phax_model_cfg_from_json_file(&check, o->config)) return PHAX_ERR;
        json_error_t e;
        if (!(j = json_load_file(o->config, 0, &e))) return phax_fail("%s: %s", o->config, e.text);
    } else {
        j = json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:i, s:i, s:i}", "vocab_size", 8192,
                      "d_model", 256, "n_layers", 4, "n_heads", 8, "n_kv_heads", 2, "head_dim", 32,
                      "ffn_hidden", 683, "tie_embeddings", 0, "train_len", 512, "w_short", 128,
                      "w_long", 128);
    }
    if (fam) json_object_set_new(j, "family", json_string(fam));
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    int rc = !s ? phax_fail("out of memory")
             : phax_model_cfg_json_set(&s, o->sets, o->nsets) ? PHAX_ERR
             : phax_model_cfg_from_json_str(c, s, o->config ? o->config : "config");
    free(s);
    return rc;
}

// --- ceilings (one OpenMP thread, as a decoder pass) ------------------------------------------
typedef struct {
    int M, N, K;
    const float *A, *B;
    float *C;
} gemm_ctx;

static void run_sgemv(void *v) {  // C (N) = B (N × K) · A (K)
    gemm_ctx *g = v;
    cblas_sgemv(CblasRowMajor, CblasNoTrans, g->N, g->K, 1.0f, g->B, g->K, g->A, 1, 0.0f, g->C, 1);
}

typedef struct {
    double sgemm_gflops, sgemv_gbs;
} ceilings;

static ceilings measure_ceilings(const phax_model_cfg *c, int chunk) {
    const int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    ceilings r;
    // A pass's FFN product: (chunk × d) · (ffn × d)ᵀ.
    r.sgemm_gflops = bench_sgemm_gflops(CblasNoTrans, CblasTrans, chunk, c->ffn_hidden, c->d_model);
    gemm_ctx h = {1, c->vocab_size, c->d_model, NULL, NULL, NULL};
    float *a = bench_falloc((size_t)c->d_model, 24);
    float *b = bench_falloc((size_t)c->vocab_size * c->d_model, 25);
    float *o = bench_falloc((size_t)c->vocab_size, 26);
    h.A = a, h.B = b, h.C = o;
    bench_stats s = bench_time(run_sgemv, &h, BENCH_POLICY);
    r.sgemv_gbs = 4.0 * c->vocab_size * (double)c->d_model / s.med * 1e-9;
    phax_free(a), phax_free(b), phax_free(o);
    omp_set_num_threads(nt);
    return r;
}

// --- one family -------------------------------------------------------------------------------
typedef struct {
    int context;
    double prefill, step;  // tokens/s
    size_t state;
    double peak_mb;
} row_t;

static double median3(double a, double b, double c) {
    double t[3] = {a, b, c};
    return bench_median(t, 3, 0);
}

static int fail_here(const char *what) {
    fprintf(stderr, "bench_decode: %s: %s\n", what, phax_error());
    return PHAX_ERR;
}

// Linux ≥ 4.0: reset the process's peak RSS (ru_maxrss) to its current RSS. 1 on success.
static int reset_peak_rss(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return 0;
    int ok = fputs("5", f) >= 0;
    return (fclose(f) == 0) && ok;
}
static int peak_reset_failed;

// Prefill, steps, state and peak RSS at context L on a fresh decoder for max_len L.
static int measure(const fmodel *m, const opts_t *o, const int32_t *tok, float *lg, int L,
                   row_t *r) {
    if (!reset_peak_rss()) peak_reset_failed = 1;  // the peak from here on: this context's
    fcpu_decoder *d = fcpu_decoder_new_chunked(m, L, o->window, o->chunk);
    if (!d) return fail_here("fcpu_decoder_new");
    int rc = PHAX_ERR;
    r->context = L;
    // prefill
    double t0 = bench_wall();
    if (fcpu_decoder_prefill(d, tok, L, lg)) goto out;
    const double first = bench_wall() - t0;
    const int repeat = first < 1.0;
    if (!repeat) {
        r->prefill = L / first;
    } else {
        const int k = (int)ceil(0.2 / first);
        double t[3];
        for (int i = 0; i < 3; i++) {
            t0 = bench_wall();
            for (int j = 0; j < k; j++) {
                fcpu_decoder_reset(d);
                if (fcpu_decoder_prefill(d, tok, L, lg)) goto out;
            }
            t[i] = (double)k * L / (bench_wall() - t0);
        }
        r->prefill = median3(t[0], t[1], t[2]);
    }
    // steps at context L
    double s[3];
    for (int i = 0; i < (repeat ? 3 : 1); i++) {
        double timed = 0, w0 = bench_wall();
        long n = 0;
        do {  // rounds until ≥ 0.2 s of timed steps (or 2 s spent) when the context is short
            fcpu_decoder_reset(d);
            if (fcpu_decoder_prefill(d, tok, L - o->steps, NULL)) goto out;
            t0 = bench_wall();
            for (int p = L - o->steps; p < L; p++)
                if (fcpu_decoder_step(d, tok[p], lg)) goto out;
            timed += bench_wall() - t0, n += o->steps;
        } while (repeat && timed < 0.2 && bench_wall() - w0 < 2.0);
        s[i] = n / timed;
    }
    r->step = repeat ? median3(s[0], s[1], s[2]) : s[0];
    r->state = fcpu_decoder_state_bytes_at(d, L);
    r->peak_mb = bench_peak_rss_mb(RUSAGE_SELF);
    rc = PHAX_OK;
out:
    if (rc) fail_here("decoding");
    fcpu_decoder_free(d);
    return rc;
}

static void csv_row(FILE *f, const char *fam, const row_t *r, const fmodel *m) {
    fprintf(f, "%s,%d,%.1f,%.1f,%.2f,%zu,%.1f,%zu,%d,%d,%d\n", fam, r->context, r->prefill, r->step,
            r->prefill / r->step, r->state, r->peak_mb, m->layout.numel, m->cfg.d_model,
            m->cfg.n_layers, omp_get_max_threads());
}

// Every context of one family; CSV rows to csv (may be NULL). 0 on success.
static int run_family(const char *fam, const opts_t *o, FILE *csv) {
    phax_model_cfg c;
    if (build_cfg(&c, fam, o)) return fail_here(fam ? fam : "config");
    const char *name = phax_family_name(c.family);
    ceilings ce = measure_ceilings(&c, o->chunk);
    fmodel m;
    if (fmodel_new(&m, &c, 1)) return fail_here("fmodel_new");
    const double pmm = bench_matmul_params(&c, &m.layout);
    const int Lmax = o->ctx[o->nctx - 1];
    int32_t *tok = bench_xmalloc((size_t)Lmax * sizeof *tok);
    float *lg = bench_xmalloc((size_t)c.vocab_size * sizeof *lg);
    for (int i = 0; i < Lmax; i++) tok[i] = (int32_t)((i * 2654435761u) % (unsigned)c.vocab_size);
    const int win = phax_plan_window(&c, o->window);
    printf("\n%s: %zu parameters (%.0f in matmuls), d_model %d, %d layers, vocab %d, heads %d q / %d "
           "kv of %d; %d steps, prefill chunk %d, attention window %d (0 = full)\n"
           "ceilings on 1 OpenMP thread (as a pass): sgemm (%d x %d)(%d x %d)^T %.1f GFLOP/s; "
           "sgemv (%d x %d) %.1f GB/s\n",
           name, m.layout.numel, pmm, c.d_model, c.n_layers, c.vocab_size, c.n_heads, c.n_kv_heads,
           c.head_dim, o->steps, o->chunk, win, o->chunk, c.d_model, c.ffn_hidden, c.d_model,
           ce.sgemm_gflops, c.vocab_size, c.d_model, ce.sgemv_gbs);
    printf("%-11s %7s %12s %10s %8s %10s %8s %9s %6s %8s %6s\n", "family", "context",
           "prefill t/s", "step t/s", "speedup", "state MB", "peak MB", "pre GF/s", "%sgemm",
           "step GB/s", "%sgemv");
    fflush(stdout);
    int rc = 0;
    for (int i = 0; i < o->nctx; i++) {
        row_t r;
        if (measure(&m, o, tok, lg, o->ctx[i], &r)) {
            rc = 1;
            break;
        }
        const double gf = 2.0 * pmm * r.prefill * 1e-9;
        const double gbs = (4.0 * pmm + (double)r.state) * r.step * 1e-9;
        printf("%-11s %7d %12.0f %10.1f %7.1fx %10.3f %8.1f %9.1f %5.0f%% %9.2f %5.0f%%\n", name,
               r.context, r.prefill, r.step, r.prefill / r.step, r.state / 1e6, r.peak_mb, gf,
               100 * gf / ce.sgemm_gflops, gbs, 100 * gbs / ce.sgemv_gbs);
        fflush(stdout);
        if (csv) csv_row(csv, name, &r, &m), fflush(csv);
    }
    if (peak_reset_failed)
        printf("(/proc/self/clear_refs could not reset the peak RSS: peak MB is the process's "
               "peak so far, model initialisation included)\n");
    free(tok), free(lg);
    fmodel_free(&m);
    return rc;
}

// A family in a forked child: its CSV rows come back through a pipe (so each
// family's peak RSS is its own). 0 on success.
static int run_family_child(const char *fam, const opts_t *o, FILE *csv) {
    int fd[2];
    if (pipe(fd)) return perror("pipe"), 1;
    fflush(stdout), fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return perror("fork"), close(fd[0]), close(fd[1]), 1;
    if (pid == 0) {
        close(fd[0]);
        FILE *f = fdopen(fd[1], "w");
        int rc = run_family(fam, o, f);
        if (f) fclose(f);
        fflush(stdout);
        _exit(rc ? 1 : 0);
    }
    close(fd[1]);
    char buf[4096];
    ssize_t k;
    while ((k = read(fd[0], buf, sizeof buf)) > 0 || (k < 0 && errno == EINTR))
        if (k > 0 && csv) fwrite(buf, 1, (size_t)k, csv);
    close(fd[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return !WIFEXITED(status) || WEXITSTATUS(status);
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 1 << 20);  // freed large blocks return to the system (peak RSS)
#endif
    opts_t o = {.steps = 32, .window = -1, .chunk = FCPU_PREFILL_CHUNK};
    const char *csv_path = NULL, *fams_s = NULL, *ctx_s = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (!strcmp(a, name) && (v ? 1 : (die("%s needs a value", name), 0)) && ++i)
        if (ARG("--family")) fams_s = v;
        else if (ARG("--config")) o.config = v;
        else if (ARG("--set")) {
            if (o.nsets == MAX_SETS) die("--set: more than %s overrides", "64");
            if (!strchr(v, '=')) die("--set: '%s' is not KEY=VALUE", v);
            o.sets[o.nsets++] = v;
        } else if (ARG("--contexts")) ctx_s = v;
        else if (ARG("--steps")) o.steps = atoi(v);
        else if (ARG("--window")) o.window = atoi(v);
        else if (ARG("--chunk")) o.chunk = atoi(v);
        else if (ARG("--csv")) csv_path = v;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) usage(stdout, 0);
        else if (a[0] != '-' && !csv_path) csv_path = a;  // `ninja bench`: bench_decode out.csv
        else {
            fprintf(stderr, "bench_decode: unexpected argument '%s'\n", a);
            usage(stderr, 2);
        }
#undef ARG
    }
    // contexts
    if (!ctx_s) ctx_s = "1024,4096,16384";
    for (const char *s = ctx_s; s && *s;) {
        char *e;
        long L = strtol(s, &e, 10);
        if (e == s || (*e && *e != ',') || L < 1 || L > (1L << 24) || o.nctx == MAX_CTX)
            die("--contexts: '%s' is not a list of positive integers (at most 32)", ctx_s);
        o.ctx[o.nctx++] = (int)L;
        s = *e ? e + 1 : NULL;
    }
    qsort(o.ctx, (size_t)o.nctx, sizeof *o.ctx, cmp_int);
    if (o.steps < 1 || o.steps >= o.ctx[0]) die("--steps must be in [1, smallest context) (%s)", ctx_s);
    if (o.chunk < 1 || o.chunk > FCPU_PREFILL_CHUNK_MAX) die("--chunk: out of range%s", "");
    if (o.window < -1) die("--window: must be -1, 0 or positive%s", "");
    // families: the list, the config file's own, or (neither) pha and swax
    char fams[MAX_FAM][16];
    int nf = 0;
    if (!fams_s && !o.config) fams_s = "pha,swax";
    for (const char *s = fams_s; s && *s && nf < MAX_FAM;) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        snprintf(fams[nf++], 16, "%.*s", (int)(len < 15 ? len : 15), s);
        phax_family f;
        if (phax_family_parse(fams[nf - 1], &f)) die("--family: '%s' is not a model family", fams[nf - 1]);
        s = e ? e + 1 : NULL;
    }

    FILE *csv = bench_csv_open(csv_path, CSV_HEADER);
    bench_print_env(stdout, "bench_decode");
    printf("decoder: prefill = fcpu_decoder_prefill of L tokens; step = fcpu_decoder_step with "
           "logits at context L (%d steps after a prefill of L - %d); state = "
           "fcpu_decoder_state_bytes_at(L); peak = ru_maxrss after L, reset before L's decoder; a "
           "decoder per L, max_len L\n",
           o.steps, o.steps);
    int rc = 0;
    if (nf <= 1) rc = run_family(nf ? fams[0] : NULL, &o, csv) != 0;
    else
        for (int i = 0; i < nf; i++) rc |= run_family_child(fams[i], &o, csv);
    char la[64];
    printf("\nload average at the end %s\n", bench_loadavg(la, sizeof la));
    if (rc) {
        if (csv) fclose(csv), phax_atomic_abort(&bench_csv_af);
        return 1;
    }
    bench_csv_close(csv);
    return 0;
}
