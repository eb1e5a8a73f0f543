// phax/numerics.h, the scalar helpers of the fast tiers, against what fast/cpu computed
// before they existed: the oracle's double helpers (ref_sigmoid, ref_softplus,
// ref_logsigmoid, the mLSTM gate cap) and C99 `double complex` code for the ZOH factor
// and the complex quotient. The helpers were introduced so that results stay
// bit-identical, so every comparison here is exact (bits, NaN only to NaN).
#include <complex.h>
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "phax/numerics.h"
#include "phax/ref.h"
#include "testutil.h"

#ifndef CMPLX
#define CMPLX(x, y) ((double complex)((double)(x) + _Complex_I * (double)(y)))
#endif

static bool same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b)); }

// Edge values every scalar helper sees once.
static const double EDGES[] = {0.0, -0.0, 1.0, -1.0, 1e-300, -1e-300, 4.9e-324, -4.9e-324, 15.0, -15.0,
                               36.0, -36.0, 709.0, -709.0, 710.0, -745.5, 1e308, -1e308, INFINITY,
                               -INFINITY, NAN};

// Random doubles over every magnitude, subnormals included.
static double any_magnitude(phax_rng *r) {
    double m = 1.0 + phax_rng_uniform(r);
    int e = (int)phax_rng_below(r, 2090) - 1070;
    return (phax_rng_below(r, 2) ? -1.0 : 1.0) * ldexp(m, e);
}

Test(numerics, scalar_helpers_equal_ref_bitwise) {
    phax_rng r = tu_rng("numerics/scalar_helpers_equal_ref_bitwise");
    long bad = 0, n = 0;
    for (size_t i = 0; i < 2000000 + sizeof EDGES / sizeof *EDGES; i++) {
        double z = i < sizeof EDGES / sizeof *EDGES ? EDGES[i]
                   : i % 2                          ? phax_rng_uniform_range(&r, -60.0, 60.0)
                                                    : any_magnitude(&r);
        n++;
        if (!same_bits(phax_sigmoid(z), ref_sigmoid(z)) || !same_bits(phax_softplus(z), ref_softplus(z)) ||
            !same_bits(phax_logsigmoid(z), ref_logsigmoid(z)) ||
            !same_bits(phax_gate_cap(z), 15.0 * tanh(z / 15.0))) {
            if (bad++ < 5) cr_log_error("z = %a: a helper differs from the oracle's form", z);
        }
        float zf = (float)z;
        if (!same_bits(phax_gate_capf(zf), 15.0f * tanhf(zf / 15.0f))) {
            if (bad++ < 5) cr_log_error("z = %a: phax_gate_capf differs from 15f·tanhf(z/15f)", (double)zf);
        }
    }
    cr_assert(bad == 0, "%ld of %ld values differ", bad, n);
}

// The ZOH factor as fast/cpu/ssm.c and ref/ssm.c write it with C99 complex arithmetic.
static double complex zoh_complex(double complex lam) {
    double re = creal(lam), im = cimag(lam);
    if (cabs(lam) < 1e-4) return 1.0 + lam / 2.0 + lam * lam / 6.0 + lam * lam * lam / 24.0;
    double s = sin(im / 2.0);
    double complex em1 = CMPLX(expm1(re) * cos(im) - 2.0 * s * s, exp(re) * sin(im));
    return em1 / lam;
}

// A(λ) = Σ_{j≥0} λ^j / (j+1)! in long double (64-bit mantissa), 12 terms: at |λ| ≤ 1e-3 the
// first term left out is < 1e-39, so this is A to the long double's ~5e-20.
static long double complex zoh_precise(double re, double im) {
    long double complex lam = CMPLXL(re, im), term = 1.0L, sum = 0.0L;
    for (int j = 0; j < 12; j++) {
        sum += term;
        term *= lam / (long double)(j + 2);
    }
    return sum;
}

// Near the switch between the series and the expm1 quotient (|λ| = 1e-4) and below it, A(λ)
// is within 4 ulp of the precise value on both sides, at every angle. With the series cut at
// λ²/6 it was |λ|³/24 off: 4e-14 relative at |λ| = 1e-4 (400 ulp), which this fails.
Test(numerics, zoh_near_the_switch_against_long_double) {
    phax_rng r = tu_rng("numerics/zoh_near_the_switch_against_long_double");
    double worst = 0;
    for (long i = 0; i < 200000; i++) {
        double mag = i % 2 ? 1e-4 * phax_rng_uniform_range(&r, 0.9, 1.1) : pow(10.0, phax_rng_uniform_range(&r, -9, -3));
        double th = phax_rng_uniform_range(&r, 0, 6.283185307179586), re = mag * cos(th), im = mag * sin(th);
        long double complex want = zoh_precise(re, im);
        double ar, ai;
        phax_zoh(re, im, &ar, &ai);
        double complex A = zoh_complex(CMPLX(re, im));  // ref/ssm.c's form
        double e1 = (double)cabsl(CMPLXL(ar, ai) - want) / (double)cabsl(want);
        double e2 = (double)cabsl((long double complex)A - want) / (double)cabsl(want);
        double e = e1 > e2 ? e1 : e2;
        if (!(e <= 4 * DBL_EPSILON))
            cr_assert_fail("λ = %a + i%a (|λ| %.3g): relative error %.3g (> 4 ulp = %.3g)", re, im, mag, e, 4 * DBL_EPSILON);
        if (e > worst) worst = e;
    }
    printf("numerics/zoh_near_the_switch_against_long_double: worst %.3g ulp\n", worst / DBL_EPSILON);
}

Test(numerics, zoh_equals_complex_form_bitwise) {
    phax_rng r = tu_rng("numerics/zoh_equals_complex_form_bitwise");
    long bad = 0, n = 0;
    for (long i = 0; i < 2000000; i++) {
        // λ = −e^{Λre} + i e^{Λim} with Λ from float parameters (as the models store them) in
        // the models' range, from the small-|λ| series region, and from the whole exp range.
        double lre, lim;
        switch (i % 4) {
        case 0: lre = (float)phax_rng_uniform_range(&r, -20, 20), lim = (float)phax_rng_uniform_range(&r, -20, 20); break;
        case 1: lre = (float)phax_rng_uniform_range(&r, -12, -4), lim = (float)phax_rng_uniform_range(&r, -12, -4); break;
        case 2: lre = phax_rng_uniform_range(&r, -700, 700), lim = phax_rng_uniform_range(&r, -700, 700); break;
        default: lre = log(1e-3 * phax_rng_uniform(&r)), lim = log(1e-3 * phax_rng_uniform(&r)); break;
        }
        double re = -exp(lre), im = exp(lim), ar, ai;
        double complex A = zoh_complex(CMPLX(re, im));
        phax_zoh(re, im, &ar, &ai);
        n++;
        if (!same_bits(ar, creal(A)) || !same_bits(ai, cimag(A)))
            if (bad++ < 5) cr_log_error("λ = %a + i%a: (%a, %a), complex form (%a, %a)", re, im, ar, ai, creal(A), cimag(A));
    }
    cr_assert(bad == 0, "%ld of %ld λ differ", bad, n);
}

Test(numerics, cdiv_equals_complex_division_bitwise) {
    phax_rng r = tu_rng("numerics/cdiv_equals_complex_division_bitwise");
    long bad = 0, n = 0;
    for (long i = 0; i < 2000000; i++) {
        double v[4];
        for (int j = 0; j < 4; j++) {
            if (i % 2) {  // any finite bit pattern: subnormals, huge and tiny values
                uint64_t b = phax_rng_u64(&r);
                memcpy(&v[j], &b, sizeof b);
            } else {
                v[j] = phax_rng_uniform_range(&r, -1, 1) * pow(10.0, phax_rng_uniform_range(&r, -10, 10));
            }
        }
        if (!isfinite(v[0]) || !isfinite(v[1]) || !isfinite(v[2]) || !isfinite(v[3])) continue;
        double complex q = CMPLX(v[0], v[1]) / CMPLX(v[2], v[3]);
        double x, y;
        phax_cdiv(v[0], v[1], v[2], v[3], &x, &y);
        n++;
        if (!same_bits(x, creal(q)) || !same_bits(y, cimag(q)))
            if (bad++ < 5) cr_log_error("(%a + i%a)/(%a + i%a): (%a, %a), C (%a, %a)", v[0], v[1], v[2], v[3], x, y, creal(q), cimag(q));
    }
    cr_assert(bad == 0, "%ld of %ld quotients differ", bad, n);
}
