// The harness itself (harness.h): the relative error and the judge fail on NaN and
// inf, the judge's bound is the one documented, and the backend list agrees with
// meson.build's test_backends (which registers one test per backend and H_TEST).
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

Test(harness, relerr_nan_and_inf_are_infinite) {
    double ref[3] = {1, 2, 3};
    float a[3] = {1, 2, 3};
    cr_expect(h_relerr(H_F(a), ref, H_ZERO, 3) == 0);
    a[1] = NAN;
    cr_expect(h_relerr(H_F(a), ref, H_ZERO, 3) == INFINITY, "NaN must give +inf");
    a[1] = INFINITY;
    cr_expect(h_relerr(H_F(a), ref, H_ZERO, 3) == INFINITY, "inf must give +inf");
    double d[3] = {1, 2, 3}, r2[3] = {1, NAN, 3};
    cr_expect(h_relerr(H_D(d), r2, H_ZERO, 3) == INFINITY, "NaN in ref must give +inf");
    // ‖a − ref‖/‖ref − base‖; a zero denominator leaves the absolute error.
    double b[3] = {1, 2, 3}, e[3] = {1, 2, 5};
    cr_expect(fabs(h_relerr(H_D(e), b, H_ZERO, 3) - 2 / sqrt(14)) < 1e-15);
    cr_expect(h_relerr(H_D(e), b, H_D(b), 3) == 2);
}

Test(harness, judge_bound_and_nan) {
    double ref[2] = {1, -1};
    float fast[2] = {1.0f + 1e-6f, -1}, naive[2] = {1.0f + 4e-7f, -1};
    // ‖fast − ref‖ ≈ 1.0e-6 > 2·4.2e-7 + 4·2⁻²⁴·√2 ≈ 1.18e-6: passes; with C = 1 it fails.
    cr_expect(h_bound("t", "x", H_F(fast), H_F(naive), ref, H_ZERO, NULL, 2, H_C_FWD));
    h_sums s = {0};
    h_pool(&s, H_F(fast), H_F(naive), ref, H_ZERO, NULL, NULL, 2);
    cr_expect(!h_judge("t", "x", &s, 1.0, 0.0), "C = 1, no floor must fail");
    fast[0] = NAN;
    cr_expect(!h_bound("t", "x", H_F(fast), H_F(naive), ref, H_ZERO, NULL, 2, H_C_FWD),
              "NaN in fast must fail");
    fast[0] = 1, naive[0] = NAN;
    cr_expect(!h_bound("t", "x", H_F(fast), H_F(naive), ref, H_ZERO, NULL, 2, H_C_FWD),
              "NaN in the baseline must fail too");
    double tol[2] = {1, 1};
    float inf[2] = {INFINITY, 0};
    cr_expect(h_elem_worst(H_F(inf), ref, tol, 2) == INFINITY);
}

Test(harness, buffers_guarded_and_poisoned) {
    float *p = tu_fbuf(5);
    cr_expect(((uintptr_t)p & 15) == 0, "payload 16-byte aligned");
    for (int i = 0; i < 5; i++) cr_expect(isnan(p[i]));
    cr_expect(h_flen(p) == 5 && tu_fintact(p) && tu_fintact(NULL));
    p[5] = 0;  // one past the end: a guard
    cr_expect(!tu_fintact(p));
    tu_ffree(p);
}

// meson.build's test_backends (PHAX_TEST_BACKENDS) names the backends of h_backends[], in order.
Test(harness, backend_list) {
    const char *env = getenv("PHAX_TEST_BACKENDS");
    if (!env) cr_skip_test("PHAX_TEST_BACKENDS not set (run through meson test)");
    char *list = strdup(env), *save = NULL;
    int i = 0;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save), i++) {
        cr_assert(i < h_nbackends, "meson lists backend %s, h_backends[] has %d", t, h_nbackends);
        cr_expect(strcmp(h_backends[i]->name, t) == 0, "backend %d: meson %s, C %s", i, t,
                  h_backends[i]->name);
    }
    cr_expect(i == h_nbackends, "meson lists %d backends, h_backends[] %d", i, h_nbackends);
    free(list);
    // Every backend's entries are filled (an empty slot would crash a case, not skip it),
    // except in a table standing for a tier this build lacks (unavailable here, no entries at all).
    for (int b = 0; b < h_nbackends; b++) {
        const h_backend *be = h_backends[b];
        if (be->unavailable && be->unavailable() && !be->gemm.sgemm) continue;  // not built here
        cr_expect(be->unavailable && be->gemm.sgemm && be->attention.fwd && be->attention.bwd &&
                      be->linear.fwd && be->adamw.step && be->ssm.conv_bwd && be->mlstm.bwd &&
                      be->gdn.fwd && be->gdn.bwd && be->model.backward && be->decode.step,
                  "backend %s has empty entries", be->name);
    }
}
