// core: the RNG is reproducible and platform-independent; errors are one line.
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "phax/core.h"
#include "testutil.h"

// SplitMix64 from state 0: the published first outputs of the generator.
Test(core, rng_known_values) {
    phax_rng r = phax_rng_new(0);
    cr_assert(phax_rng_u64(&r) == 0xE220A8397B1DCDAFull);
    cr_assert(phax_rng_u64(&r) == 0x6E789E6AA1B965F4ull);
    cr_assert(phax_rng_u64(&r) == 0x06C45D188009454Full);
}

Test(core, rng_streams_deterministic) {
    phax_rng a = phax_rng_stream(42, 7), b = phax_rng_stream(42, 7), c = phax_rng_stream(42, 8);
    int same_c = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = phax_rng_u64(&a), y = phax_rng_u64(&b), z = phax_rng_u64(&c);
        cr_assert(x == y);
        same_c += x == z;
    }
    cr_assert(same_c == 0, "streams 7 and 8 overlap");
}

Test(core, rng_distributions) {
    phax_rng r = tu_rng("core/rng_distributions");
    const int n = 200000;
    double s = 0, s2 = 0, umin = 1, umax = 0;
    for (int i = 0; i < n; i++) {
        double z = phax_rng_normal(&r), u = phax_rng_uniform(&r);
        s += z, s2 += z * z;
        umin = fmin(umin, u), umax = fmax(umax, u);
        cr_assert(phax_rng_below(&r, 7) < 7);
    }
    // Sample mean of N(0,1): standard error 1/√n ≈ 0.0022; 6 sigma = 0.0134.
    cr_assert(fabs(s / n) <= 6 / sqrt(n), "mean %g", s / n);
    // Sample variance: standard error √(2/n) ≈ 0.0032; 6 sigma.
    cr_assert(fabs(s2 / n - 1) <= 6 * sqrt(2.0 / n), "var %g", s2 / n);
    cr_assert(umin >= 0 && umax < 1);
}

Test(core, error_message) {
    cr_assert(phax_fail("file %s: bad %d", "x.bin", 3) == PHAX_ERR);
    cr_assert_str_eq(phax_error(), "file x.bin: bad 3");
    phax_clear_error();
    cr_assert_str_eq(phax_error(), "");
}

Test(core, guard_detects_overrun) {
    double *b = tu_buf(5);
    cr_assert(tu_intact(b));
    cr_assert(isnan(b[0]) && isnan(b[4]), "buffers start poisoned");
    b[5] = 0;  // one past the end: inside the guard zone
    cr_assert(!tu_intact(b));
    tu_free(b);
}
