// bench_util.h: what every CPU benchmark driver needs — bench_clock.h's clocks and
// median timer, the sgemm ceiling, the environment line (OpenBLAS core, threads, load), CSV files,
// touched buffers and peak resident memory. Header-only (static inline), one
// copy per driver; drivers are single translation units.
//
// Ceiling: bench_sgemm_time times the product on the shape given two ways, with
// the caller's OpenMP threads, and keeps the faster: cblas_sgemm with OpenBLAS
// threaded over them (OpenBLAS's own parallelism), and fcpu_sgemm (fast/cpu's
// split of C over the threads, one single-threaded OpenBLAS call per block, which
// the models use). The ceiling is always measured in the same environment as the
// kernels it is compared with (OPENBLAS_CORETYPE is left as the machine sets it;
// bench_print_env shows it and the kernel OpenBLAS chose).
#ifndef PHAX_BENCH_UTIL_H
#define PHAX_BENCH_UTIL_H

#include <cblas.h>
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench_clock.h"
#include "phax/atomic_file.h"
#include "phax/core.h"
#include "phax/fcpu_gemm.h"
#include "phax/model.h"

int openblas_get_num_threads(void);
void openblas_set_num_threads(int);

// --- buffers --------------------------------------------------------------------------------
// Touched (written) buffers: the first touch of fresh pages is slow, so it is
// done before timing. Values uniform in [-1, 1] from srand(seed)/rand().
static inline float *bench_falloc(size_t n, unsigned seed) {
    float *p = phax_alloc(n * sizeof *p);
    if (!p) phax_die("%s", phax_error());
    srand(seed);
    for (size_t i = 0; i < n; i++) p[i] = (float)rand() / RAND_MAX * 2.0f - 1.0f;
    return p;
}
static inline double *bench_dalloc(size_t n, unsigned seed) {
    double *p = phax_alloc(n * sizeof *p);
    if (!p) phax_die("%s", phax_error());
    srand(seed);
    for (size_t i = 0; i < n; i++) p[i] = (double)rand() / RAND_MAX * 2.0 - 1.0;
    return p;
}
// malloc, zeroed (touched), exits with a message when out of memory.
static inline void *bench_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory (%zu bytes)\n", n);
        exit(1);
    }
    memset(p, 0, n);
    return p;
}

// --- the sgemm ceiling ----------------------------------------------------------------------
typedef struct {
    CBLAS_TRANSPOSE ta, tb;
    int M, N, K;
    const float *A, *B;
    float *C;
    int split;  // 1: fcpu_mm (fcpu_sgemm, or bf16 operands where the thread asks); 0: cblas_sgemm
} bench_sgemm_ctx;

static inline void bench_sgemm_run(void *v) {
    bench_sgemm_ctx *g = v;
    int lda = g->ta == CblasNoTrans ? g->K : g->M, ldb = g->tb == CblasNoTrans ? g->N : g->K;
    if (g->split)  // the thread's matmul precision: the ceiling of what the models' matmuls run at
        fcpu_mm(g->ta, g->tb, g->M, g->N, g->K, 1.0f, g->A, lda, g->B, ldb, 0.0f, g->C, g->N);
    else
        cblas_sgemm(CblasRowMajor, g->ta, g->tb, g->M, g->N, g->K, 1.0f, g->A, lda, g->B, ldb,
                    0.0f, g->C, g->N);
}
// Row-major C (M×N) = op(A)·op(B), op(A): M×K, op(B): K×N, on the caller's OpenMP
// threads, timed as OpenBLAS-threaded cblas_sgemm and as fcpu_sgemm; returns the
// faster timing (OpenBLAS is left single-threaded, as fcpu_sgemm wants it). A, B,
// C may be NULL: then touched buffers are allocated for this call. GFLOP/s =
// 2·M·N·K / med.
static inline bench_stats bench_sgemm_time(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N,
                                           int K, const float *A, const float *B, float *C,
                                           bench_policy p) {
    float *a = NULL, *b = NULL, *c = NULL;
    if (!A) A = a = bench_falloc((size_t)M * K, 21);
    if (!B) B = b = bench_falloc((size_t)K * N, 22);
    if (!C) C = c = bench_falloc((size_t)M * N, 23);
    int nt = omp_get_max_threads();
    bench_sgemm_ctx g = {ta, tb, M, N, K, A, B, C, 0};
    openblas_set_num_threads(nt);  // OpenBLAS's own threading (fcpu_sgemm turns it off)
    omp_set_num_threads(nt);
    bench_stats s = bench_time(bench_sgemm_run, &g, p);
    fcpu_blas_single();
    g.split = 1;
    bench_stats s2 = bench_time(bench_sgemm_run, &g, p);
    phax_free(a), phax_free(b), phax_free(c);
    return s2.med < s.med ? s2 : s;
}
static inline double bench_sgemm_gflops(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N,
                                        int K) {
    bench_stats s = bench_sgemm_time(ta, tb, M, N, K, NULL, NULL, NULL, BENCH_POLICY);
    return 2.0 * M * N * K / s.med * 1e-9;
}

// Elements of a model's matmul weights (2-D "*.weight"; the embedding only as the tied
// output projection): 6 FLOP per element and token in a training step, 2 in a forward.
static inline double bench_matmul_params(const phax_model_cfg *c, const phax_layout *L) {
    double mm = 0;
    for (int i = 0; i < L->n; i++) {
        const phax_param_info *p = &L->p[i];
        size_t len = strlen(p->name);
        if (p->ndim != 2 || len < 7 || strcmp(p->name + len - 7, ".weight")) continue;
        if (!strcmp(p->name, "embed.weight") && !c->tie_embeddings) continue;
        mm += (double)p->numel;
    }
    return mm;
}

// --- environment ----------------------------------------------------------------------------
// The 1/5/15-minute load averages ("?" if unreadable), without the newline.
static inline const char *bench_loadavg(char *buf, size_t n) {
    snprintf(buf, n, "?");
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        double a, b, c;
        if (fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3) snprintf(buf, n, "%.2f %.2f %.2f", a, b, c);
        fclose(f);
    }
    return buf;
}
static inline const char *bench_env_or(const char *var, const char *dflt) {
    const char *v = getenv(var);
    return v ? v : dflt;
}
// One line: the kernel OpenBLAS chose (openblas_get_corename) and its build,
// the thread counts, the environment variables that change the numbers, and the
// machine's load at the start.
static inline void bench_print_env(FILE *f, const char *name) {
    char la[64];
    fprintf(f,
            "%s: OpenBLAS core %s (%s); OpenBLAS threads %d, OpenMP threads %d; "
            "OPENBLAS_CORETYPE=%s OPENBLAS_THREAD_TIMEOUT=%s OMP_WAIT_POLICY=%s; "
            "load average %s\n",
            name, openblas_get_corename(), openblas_get_config(), openblas_get_num_threads(),
            omp_get_max_threads(), bench_env_or("OPENBLAS_CORETYPE", "(unset)"),
            bench_env_or("OPENBLAS_THREAD_TIMEOUT", "(unset)"),
            bench_env_or("OMP_WAIT_POLICY", "(unset)"), bench_loadavg(la, sizeof la));
}

// --- CSV ------------------------------------------------------------------------------------
// Open path for writing and write the header line (no newline needed in header);
// NULL path → NULL (no CSV). Exits with a message if the file cannot be written.
// The CSV is written through phax's one atomic writer (phax/atomic_file.h: an
// exclusive temporary file beside PATH, renamed by bench_csv_close), so an
// interrupted run never leaves a half-written PATH. At most one CSV is open at a time.
static phax_atomic_file bench_csv_af = {.fd = -1};
static inline FILE *bench_csv_open(const char *path, const char *header) {
    if (!path) return NULL;
    int fd;
    FILE *f = NULL;
    if (phax_atomic_begin(&bench_csv_af, path) || (fd = dup(bench_csv_af.fd)) < 0 || !(f = fdopen(fd, "w"))) {
        if (bench_csv_af.fd >= 0) fprintf(stderr, "%s: %s\n", path, strerror(errno));
        else fprintf(stderr, "%s\n", phax_error());
        phax_atomic_abort(&bench_csv_af);
        exit(1);
    }
    if (header) fprintf(f, "%s\n", header);
    return f;
}
static inline void bench_csv_close(FILE *f) {
    if (!f) return;
    if (fclose(f)) {
        fprintf(stderr, "%s: could not write the CSV (%s)\n", bench_csv_af.path, strerror(errno));
        phax_atomic_abort(&bench_csv_af);
        exit(1);
    }
    if (phax_atomic_commit(&bench_csv_af)) {
        fprintf(stderr, "%s\n", phax_error());
        exit(1);
    }
}

// The drivers without options take one optional argument, the CSV path. -h/--help
// prints the usage; anything else that starts with '-', or a second argument, is an
// error (so `bench_x --help` cannot become a CSV named "--help").
static inline const char *bench_csv_arg(int argc, char **argv, const char *name) {
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: %s [out.csv]   (tables on stdout; the CSV is written atomically)\n", name);
        exit(0);
    }
    if (argc > 2 || (argc > 1 && argv[1][0] == '-')) {
        fprintf(stderr, "%s: unexpected argument '%s' (usage: %s [out.csv])\n", name,
                argv[argc > 2 && argv[1][0] != '-' ? 2 : 1], name);
        exit(2);
    }
    return argc > 1 ? argv[1] : NULL;
}

// --- the small ops' drivers (bench_<stem>.c of linear, ffn, norm, activation, rope, mix, loss,
// adamw): their ceilings, table rows and the `ref` speed-up rows ----------------------------------
// PHAX_BENCH_CLOCK=thread switches to the calling thread's CPU time: meaningful only with
// OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1, and then nearly immune to other processes competing
// for the cores (a loaded machine otherwise inflates every parallel region by whole scheduler
// slices). Returns the thread count the bandwidth ceiling uses (2, or 1 with that clock).
static inline int bench_ops_start(const char *name) {
    int threads = 2;
    if (bench_clock_from_env("PHAX_BENCH_CLOCK", "thread", CLOCK_THREAD_CPUTIME_ID)) {
        threads = 1;
        printf("timing: thread CPU time (PHAX_BENCH_CLOCK=thread); valid with 1 thread only\n");
    }
    bench_print_env(stdout, name);  // other processes distort every number: how busy the machine was
    return threads;
}

// The memory-bandwidth ceiling of the memory-bound ops: a STREAM triad a = b + s·c over three
// arrays of 32 Mi floats (3 × 128 MiB, far beyond the caches) on `threads` threads, 12 bytes per
// element as STREAM counts; GB/s of the median repeat.
typedef struct {
    float *a, *b, *c;
    size_t n;
    int threads;
} bench_triad_t;
static inline void bench_triad_run(void *v) {
    bench_triad_t *t = (bench_triad_t *)v;
    float *restrict a = t->a;
    const float *restrict b = t->b, *restrict c = t->c;
#pragma omp parallel for schedule(static) num_threads(t->threads)
    for (size_t i = 0; i < t->n; i++) a[i] = b[i] + 3.0f * c[i];
}
static inline double bench_triad_gbs(int threads) {
    bench_triad_t tr = {NULL, NULL, NULL, (size_t)32 << 20, threads};
    tr.a = bench_falloc(tr.n, 1), tr.b = bench_falloc(tr.n, 2), tr.c = bench_falloc(tr.n, 3);
    const double gbs = 12.0 * tr.n / bench_time_med(bench_triad_run, &tr) / 1e9;
    phax_free(tr.a), phax_free(tr.b), phax_free(tr.c);
    return gbs;
}
static inline double bench_triad_print(int threads) {
    const double bw = bench_triad_gbs(threads);
    printf("memory ceiling: STREAM triad, %d thread(s), %zu floats/array: %.1f GB/s\n", threads, (size_t)32 << 20,
           bw);
    return bw;
}

// The CSV header of the small ops' drivers, the table's header, one row of both.
#define BENCH_OPS_CSV_HEADER "op,shape,median_ms,rate,unit,pct_of_ceiling,vs"
static inline void bench_ops_header(void) {
    printf("\n%-22s %-26s %10s %9s %-6s %8s %s\n", "op", "shape", "median ms", "rate", "unit", "of ceil", "note");
}
static inline void bench_row(FILE *csv, const char *op, const char *shape, double ms, double rate, const char *unit,
                             double ceil_pct, const char *vs) {
    printf("%-22s %-26s %10.3f %9.1f %-6s %7.1f%% %s\n", op, shape, ms, rate, unit, ceil_pct, vs);
    if (csv) fprintf(csv, "%s,%s,%.6f,%.3f,%s,%.2f,%s\n", op, shape, ms, rate, unit, ceil_pct, vs);
}
// fast (float32) against ref (float64, scalar) on the same small problem, alternated: the
// speed-up row ("<op> vs ref" in the CSV, the rate column the ratio).
static inline void bench_vs_ref(FILE *csv, const char *op, const char *shape, bench_fn fast, void *fc, bench_fn ref,
                                void *rc) {
    double tf, tr;
    bench_time_pair(fast, fc, ref, rc, &tf, &tr);
    printf("  %-20s %-22s fast %9.4f ms   ref %.3f ms: %.1fx\n", op, shape, tf * 1e3, tr * 1e3, tr / tf);
    if (csv) fprintf(csv, "%s vs ref,%s,%.6f,%.3f,x,0,ref %.6f ms\n", op, shape, tf * 1e3, tr / tf, tr * 1e3);
}
static inline void bench_fscale(float *p, size_t n, float s) {
    for (size_t i = 0; i < n; i++) p[i] *= s;
}

// --- memory ---------------------------------------------------------------------------------
// Peak resident set size in MB (10^6 bytes) of this process (RUSAGE_SELF) or of
// its waited-for children (RUSAGE_CHILDREN: the largest of them); ru_maxrss is
// in KiB on Linux.
static inline double bench_peak_rss_mb(int who) {
    struct rusage ru;
    if (getrusage(who, &ru)) return 0;
    return ru.ru_maxrss * 1024.0 / 1e6;
}

#endif
