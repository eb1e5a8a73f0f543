// The small ops' tests of the fast tiers (tests/test_fast_<stem>.c: embedding, linear, norm,
// activation, ffn, rope, mix, loss, adamw; float32 on every backend of harness.h) against ref
// (float64): every op forward and every gradient, at awkward sizes (a case table per op),
// outputs NaN-poisoned and guarded. This header holds what they share.
//
// Inputs are drawn as float, and their exact double values are given to ref, so
// both tiers see identical inputs. The error bound is the flash-attention one:
// a plain-loop float32 transcription of ref's formula ("naive32",
// tests/baseline_f32_<stem>.c, with float accumulators, compiled without FMA
// contraction) is run on the same inputs, and (h_bound, harness.h)
//     err(fast) = ‖fast − ref‖/‖ref − prior‖ ≤ C·err(naive32) + FLOOR,
// where prior is what a gradient buffer held before the backward added into it
// (0 for forward outputs), so an accumulated gradient is judged on what was
// added, not on the prior that dominates its norm. NaN or inf anywhere gives
// err = +inf, and every comparison is written `err <= tol`.
//   C = 2 for forwards, 3 for gradients (flash-attention's factors: a backward
//     chains several products, each with its own rounding);
//   FLOOR = 4·2^-24 · ‖|ref| + mag‖/‖ref − prior‖: a few float32 roundings of
//     the quantities involved — the stored output itself (prior + increment,
//     measured against the increment) and, where an output element is a sum
//     that can cancel (a dot product, a loss lse − x_t), mag = Σ|terms| of that
//     sum, computed in double from |inputs| (e.g. |dy|·|W| for linear's dx).
//     No float evaluation can beat this scale, and naive32 may undercut it by
//     luck when an output is a handful of numbers (one element at n = 1).
// Every err(fast)/err(naive32) ratio is printed ("ratio").
#ifndef PHAX_TESTS_FAST_OPS_H
#define PHAX_TESTS_FAST_OPS_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "baseline_f32.h"
#include "harness.h"

// The one judge (h_bound) with the floor scale |ref| + mag (mag NULL: |ref|).
static inline bool bound_m(const char *label, const char *what, const float *fast, const float *naive,
                    const double *ref, const float *base, const double *mag, size_t n, double C) {
    double *sc = NULL;
    if (mag) {
        sc = malloc(n * sizeof *sc);
        for (size_t i = 0; i < n; i++) sc[i] = fabs(ref[i]) + mag[i];
    }
    bool ok = h_bound(label, what, H_F(fast), H_F(naive), ref, H_F(base), sc, n, C);
    free(sc);
    return ok;
}
static inline bool bound(const char *label, const char *what, const float *fast, const float *naive,
                  const double *ref, const float *base, size_t n, double C) {
    return bound_m(label, what, fast, naive, ref, base, NULL, n, C);
}
#define BOUND_FWD(label, what, f, nv, r, n) \
    cr_expect(bound(label, what, f, nv, r, NULL, n, H_C_FWD), "%s %s", label, what)
#define BOUND_BWD(label, what, f, nv, r, prior, n) \
    cr_expect(bound(label, what, f, nv, r, prior, n, H_C_BWD), "%s %s", label, what)


// Fill a gradient triple (fast, naive32, ref) with the same random prior.
typedef struct {
    float *f, *nv, *p;  // fast, naive32, the prior itself
    double *r;
    size_t n;
    double *mag;  // Σ|terms| per element, or NULL (owned)
} grad3;

static inline grad3 g3_new(size_t n, phax_rng *rng, double scale) {
    grad3 g = {.n = n};
    g.p = h_frand(n, rng, scale);
    g.f = h_fcopy(g.p, n), g.nv = h_fcopy(g.p, n), g.r = h_todbl(g.p, n);
    return g;
}
static inline void g3_free(grad3 *g) {
    cr_expect(tu_fintact(g->f) && tu_fintact(g->nv) && tu_fintact(g->p) && tu_intact(g->r),
              "gradient guard overwritten");
    tu_ffree(g->f), tu_ffree(g->nv), tu_ffree(g->p), tu_free(g->r), free(g->mag);
}
static inline bool g3_check(const char *label, const char *what, grad3 *g) {
    return bound_m(label, what, g->f, g->nv, g->r, g->p, g->mag, g->n, H_C_BWD);
}

// The case tables' axes: each op has a case struct and a table built from them (the cross
// product, as the loops of the tests before the harness ran them) plus rows added for one
// reason each; one body per op runs every row on the backend.
static const size_t ROWS[] __attribute__((unused)) = {1, 7, 129};     // 1 row; fewer rows than threads·chunks; odd
static const int DIMS[] __attribute__((unused)) = {24, 40, 64, 257};  // head-dim-like widths and an odd prime
#define MAXCASES 128

#endif
