// bench_clock.h: clocks and the median timer, with nothing of a backend (no BLAS, no
// OpenMP), so that every driver, bench_cuda's included, times the same way.
//
// Timing policy (bench_time): one warm-up call, then repeats while fewer than
// min_reps were run or less than min_s seconds have passed since the first timed
// repeat, at most max_reps; the result is the median (and the fastest repeat,
// and the median CPU seconds of all the process's threads). BENCH_POLICY (≥ 5
// repeats and ≥ 0.5 s, ≤ 1000) is what the drivers use unless they say otherwise.
//
// Clock: wall (CLOCK_MONOTONIC) unless a driver switches bench_clock_id
// (bench_clock_from_env): with one thread (OMP_NUM_THREADS=1
// OPENBLAS_NUM_THREADS=1) a CPU clock gives the compute time even on a machine
// shared with other jobs, where wall-clock medians measure the scheduler.
#ifndef PHAX_BENCH_CLOCK_H
#define PHAX_BENCH_CLOCK_H

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "phax/core.h"

// --- clocks ---------------------------------------------------------------------------------
static clockid_t bench_clock_id = CLOCK_MONOTONIC;

static inline double bench_clock_read(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
static inline double bench_now(void) { return bench_clock_read(bench_clock_id); }
static inline double bench_wall(void) { return bench_clock_read(CLOCK_MONOTONIC); }
// CPU seconds of all the process's threads.
static inline double bench_cpu(void) { return bench_clock_read(CLOCK_PROCESS_CPUTIME_ID); }

// If the environment variable var equals word, time with clock id; returns 1 then.
static inline int bench_clock_from_env(const char *var, const char *word, clockid_t id) {
    const char *v = getenv(var);
    if (v && !strcmp(v, word)) {
        bench_clock_id = id;
        return 1;
    }
    return 0;
}

// --- medians --------------------------------------------------------------------------------
typedef void (*bench_fn)(void *ctx);

static inline int bench_cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
// Median of t[0..n) (sorted in place). avg_even: mean of the two middle values
// when n is even; otherwise the upper one, t[n/2].
static inline double bench_median(double *t, int n, int avg_even) {
    if (n <= 0) return 0;
    qsort(t, (size_t)n, sizeof *t, bench_cmp_d);
    return avg_even && n % 2 == 0 ? 0.5 * (t[n / 2 - 1] + t[n / 2]) : t[n / 2];
}

typedef struct {
    int min_reps, max_reps;  // at least / at most this many timed repeats
    double min_s;            // keep repeating (up to max_reps) until this much time has passed
    int avg_even;            // median of an even count: mean of the middle two (1) or upper (0)
} bench_policy;
#define BENCH_POLICY ((bench_policy){5, 1000, 0.5, 0})

typedef struct {
    double med, min;  // seconds on bench_clock_id: median and fastest repeat
    double cpu_med;   // median CPU seconds of all the process's threads
    int reps;
} bench_stats;

static inline bench_stats bench_time(bench_fn fn, void *ctx, bench_policy p) {
    if (p.max_reps < 1) p.max_reps = 1;
    if (p.min_reps > p.max_reps) p.min_reps = p.max_reps;
    double *t = malloc(2 * (size_t)p.max_reps * sizeof *t);
    if (!t) phax_die("bench_time: out of memory");
    double *c = t + p.max_reps;
    fn(ctx);  // warm-up
    int k = 0;
    double start = bench_now();
    while (k < p.max_reps && (k < p.min_reps || bench_now() - start < p.min_s)) {
        double c0 = bench_cpu(), t0 = bench_now();
        fn(ctx);
        t[k] = bench_now() - t0, c[k] = bench_cpu() - c0;
        k++;
    }
    bench_stats s = {.reps = k};
    s.med = bench_median(t, k, p.avg_even);
    s.min = t[0];
    s.cpu_med = bench_median(c, k, p.avg_even);
    free(t);
    return s;
}
// Median seconds under BENCH_POLICY.
static inline double bench_time_med(bench_fn fn, void *ctx) {
    return bench_time(fn, ctx, BENCH_POLICY).med;
}

// Medians of fa and fb timed alternately (a, b, a, b, ...), so that both see the
// same machine conditions: for every reported ratio of the two. One warm-up call
// each, then ≥ 5 pairs and ≥ 1 s (at most 500 pairs).
static inline void bench_time_pair(bench_fn fa, void *ca, bench_fn fb, void *cb, double *ta,
                                   double *tb) {
    fa(ca), fb(cb);
    double A[500], Bt[500];
    int k = 0;
    double start = bench_now();
    while (k < 500 && (k < 5 || bench_now() - start < 1.0)) {
        double t0 = bench_now();
        fa(ca);
        double t1 = bench_now();
        fb(cb);
        A[k] = t1 - t0, Bt[k] = bench_now() - t1, k++;
    }
    *ta = bench_median(A, k, 0), *tb = bench_median(Bt, k, 0);
}

#endif
