// ref activations: GELU and SiLU known values and gradients, and the stable
// scalar helpers σ, softplus, logσ at ordinary and extreme arguments.
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "phax/ref.h"
#include "testutil.h"

// The expected values below were computed with 40-digit arithmetic (mpmath).
// Each function is a few float64 operations around one libm call (erfc, exp,
// log1p: glibc keeps these within ~1 ulp), so the result is within a few ε
// relative; 4ε separates rounding from a wrong formula. Exact zeros must be exact.
#define KNOWN_RTOL (4 * DBL_EPSILON)
#define KNOWN_ATOL DBL_MIN

static void check_known(const char *what, double (*f)(double), const double *z, const double *want,
                        int n) {
    for (int i = 0; i < n; i++) {
        double got = f(z[i]);
        double err = tu_err_ratio(&got, &want[i], 1, KNOWN_ATOL, KNOWN_RTOL);
        cr_assert(err <= 1.0, "%s(%g) = %.17g, want %.17g (err ratio %g)", what, z[i], got,
                  want[i], err);
    }
}

// Elementwise ops as scalar functions, through the array API.
static double gelu1(double x) {
    double *in = tu_buf(1), *out = tu_buf(1);
    in[0] = x;
    ref_gelu_fwd(out, in, 1);
    double y = out[0];
    cr_assert(tu_intact(in) && tu_intact(out));
    tu_free(in), tu_free(out);
    return y;
}

static double silu1(double x) {
    double *in = tu_buf(1), *out = tu_buf(1);
    in[0] = x;
    ref_silu_fwd(out, in, 1);
    double y = out[0];
    cr_assert(tu_intact(in) && tu_intact(out));
    tu_free(in), tu_free(out);
    return y;
}

Test(activation, gelu_known) {
    // gelu(x) = x Φ(x): gelu(0) = 0; gelu(1) = Φ(1) = 0.8413447460685429;
    // gelu(−1) = −Φ(−1) = −0.15865525393145705; gelu(2) = 2Φ(2) = 1.9544997361036416;
    // gelu(−3) = −3Φ(−3) = −0.0040496940948902836 (Φ from erfc keeps the tail accurate);
    // gelu(40) = 40 (Φ(40) rounds to 1).
    const double z[] = {0, 1, -1, 2, -3, 40};
    const double want[] = {0, 0.84134474606854294859, -0.15865525393145705141,
                           1.9544997361036415856, -0.00404969409489028358, 40};
    check_known("gelu", gelu1, z, want, 6);
    // gelu(−40) = −40·Φ(−40) ≈ −40·3.7e−350: below the smallest subnormal, so 0
    // (or −0) — finite, not NaN.
    double y = gelu1(-40);
    cr_assert(y == 0.0, "gelu(-40) = %g", y);
}

Test(activation, silu_known) {
    // silu(x) = x σ(x): silu(0) = 0; silu(1) = σ(1) = 0.7310585786300049;
    // silu(−1) = −σ(−1) = −0.2689414213699951; silu(2) = 1.7615941559557649;
    // silu(−5) = −0.033464254621424278; silu(800) = 800 (σ(800) = 1).
    const double z[] = {0, 1, -1, 2, -5, 800};
    const double want[] = {0,
                           0.73105857863000487925,
                           -0.26894142136999512075,
                           1.7615941559557648881,
                           -0.033464254621424277797,
                           800};
    check_known("silu", silu1, z, want, 6);
    // silu(−800) = −800·e^{−800}: underflows to (−)0, with no inf·0 = NaN on the way.
    double y = silu1(-800);
    cr_assert(y == 0.0, "silu(-800) = %g", y);
}

// Both derivatives are exactly 1/2 at 0 (Φ(0) = σ(0) = 1/2, and the x·(…) term
// vanishes), and the backward adds: dx = 0.25 + 3·0.5 = 1.75 exactly.
Test(activation, bwd_known_at_zero) {
    double *x = tu_buf(1), *dy = tu_buf(1), *dx = tu_buf(1);
    x[0] = 0, dy[0] = 3;
    dx[0] = 0.25;
    ref_gelu_bwd(dx, dy, x, 1);
    cr_assert(dx[0] == 1.75, "gelu: dx = %.17g", dx[0]);
    dx[0] = 0.25;
    ref_silu_bwd(dx, dy, x, 1);
    cr_assert(dx[0] == 1.75, "silu: dx = %.17g", dx[0]);
    ref_gelu_bwd(NULL, dy, x, 1);  // NULL gradients are skipped
    ref_silu_bwd(NULL, dy, x, 1);
    cr_assert(tu_intact(x) && tu_intact(dy) && tu_intact(dx));
    tu_free(x), tu_free(dy), tu_free(dx);
}

Test(activation, sigmoid_known) {
    // σ(0) = 1/2; σ(3) = 0.95257412682243321912;
    // σ(−30) = 9.3576229688392989538e−14 — relative accuracy in the tail, which
    //   1 − σ(30) would lose entirely;
    // σ(800) = 1 and σ(−800) = e^{−800} → 0: no overflow of e^{800} for either sign.
    const double z[] = {0, 3, -30, 800, -800};
    const double want[] = {0.5, 0.95257412682243321912, 9.3576229688392989538e-14, 1, 0};
    check_known("sigmoid", ref_sigmoid, z, want, 5);
    // σ(z) + σ(−z) = 1: two values each within ~2 ulp of their true values.
    for (double s = -37.5; s <= 37.5; s += 2.5) {
        double sum = ref_sigmoid(s) + ref_sigmoid(-s);
        cr_assert(fabs(sum - 1.0) <= 4 * DBL_EPSILON, "σ(%g) + σ(%g) = %.17g", s, -s, sum);
    }
}

Test(activation, softplus_known) {
    // softplus(0) = log 2 = 0.69314718055994530942; softplus(1) = 1.313261687518222834;
    // softplus(−30) = log1p(e^{−30}) = 9.3576229688397367794e−14;
    // softplus(30) = 30 + 9.36e−14 = 30.000000000000093576;
    // softplus(800) = 800 (no e^{800} overflow); softplus(−800) = e^{−800} → 0.
    const double z[] = {0, 1, -30, 30, 800, -800};
    const double want[] = {0.69314718055994530942, 1.313261687518222834, 9.3576229688397367794e-14,
                           30.000000000000093576, 800, 0};
    check_known("softplus", ref_softplus, z, want, 6);
}

Test(activation, logsigmoid_known) {
    // logσ(0) = −log 2; logσ(2) = −log1p(e^{−2}) = −0.12692801104297249644;
    // logσ(−30) = −30.000000000000093576; logσ(−800) = −800 exactly (no log(0) = −inf);
    // logσ(800) = −log1p(e^{−800}) = −0.
    const double z[] = {0, 2, -30, -800, 800};
    const double want[] = {-0.69314718055994530942, -0.12692801104297249644,
                           -30.000000000000093576, -800, 0};
    check_known("logsigmoid", ref_logsigmoid, z, want, 5);
}

// The helpers agree with each other: logσ(z) = −softplus(−z) bit for bit (the
// same operations up to an exact negation), and σ(z) = exp(logσ(z)) to a few
// ulp (exp magnifies logσ's absolute error δ into relative error δ, and
// |δ| ≤ ~2ε·max(1, |logσ|) over this range: ≤ 2ε·40 < 100ε).
Test(activation, helpers_consistent) {
    for (double z = -40; z <= 40; z += 0.37) {
        cr_assert(ref_logsigmoid(z) == -ref_softplus(-z), "logσ(%g) ≠ −softplus(%g)", z, -z);
        double s = ref_sigmoid(z), e = exp(ref_logsigmoid(z));
        cr_assert(fabs(s - e) <= 100 * DBL_EPSILON * s, "σ(%g) = %.17g vs exp(logσ) = %.17g", z,
                  s, e);
    }
}

// A NaN argument stays NaN (max/min written as comparisons must not swallow it).
Test(activation, helpers_nan) {
    cr_assert(isnan(ref_sigmoid(NAN)) && isnan(ref_softplus(NAN)) && isnan(ref_logsigmoid(NAN)));
    cr_assert(isnan(gelu1(NAN)) && isnan(silu1(NAN)));
}

// --- finite-difference gradients ---------------------------------------------------

typedef struct {
    int silu;
    size_t n;
    double *x, *y, *dy, *dx;
} act_ctx;

static void act_fwd(act_ctx *c) {
    tu_poison(c->y, c->n);
    if (c->silu)
        ref_silu_fwd(c->y, c->x, c->n);
    else
        ref_gelu_fwd(c->y, c->x, c->n);
}

static double act_loss(void *p) {
    act_ctx *c = p;
    act_fwd(c);
    return tu_dot(c->y, c->dy, c->n);
}

// Σ |dy ⊙ y|, the rounding scale of the loss.
static double act_loss_mag(void *p) {
    act_ctx *c = p;
    act_fwd(c);
    double s = 0;
    for (size_t i = 0; i < c->n; i++) s += fabs(c->dy[i] * c->y[i]);
    return s;
}

static void act_bwd(void *p) {
    act_ctx *c = p;
    if (c->silu)
        ref_silu_bwd(c->dx, c->dy, c->x, c->n);
    else
        ref_gelu_bwd(c->dx, c->dy, c->x, c->n);
}

// n = 45 < 48, so every element is checked. x ~ 2·N(0,1) covers both curved
// regions; a few fixed points add 0, the tails (±9) and a mid value.
static void act_grad_case(const char *label, int silu) {
    phax_rng r = tu_rng(label);
    const size_t n = 45;
    act_ctx c = {.silu = silu, .n = n};
    c.x = tu_buf(n), c.y = tu_buf(n), c.dy = tu_buf(n), c.dx = tu_buf(n);
    tu_fill_normal(c.x, n, &r, 2.0);
    c.x[0] = 0, c.x[1] = -9, c.x[2] = 9, c.x[3] = -1.5;
    tu_fill_normal(c.dy, n, &r, 1.0);
    tu_tensor ts[] = {{"x", c.x, c.dx, n}};
    tu_op op = {act_loss, act_bwd, act_loss_mag, &c};
    cr_assert(tu_gradcheck(label, op, ts, 1, &r, NULL));
    cr_assert(tu_intact(c.y) && tu_intact(c.dy));
    tu_free(c.x), tu_free(c.y), tu_free(c.dy), tu_free(c.dx);
}

Test(activation, gelu_grad) { act_grad_case("activation/gelu_grad", 0); }
Test(activation, silu_grad) { act_grad_case("activation/silu_grad", 1); }
