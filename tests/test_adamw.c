// ref AdamW: hand-computed steps, with and without global-norm clipping,
// the per-tensor decay flag, and bad settings.
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "phax/ref.h"
#include "testutil.h"

static const double EPS = 0x1p-52;

// Step 1 by hand (lr 0.01, betas (0.9, 0.95), eps 1e-8, wd 0.1, no clipping),
// p = 1, g = 0.5, decayed:
//   p ← 1 − 0.01·0.1·1 = 0.999;  m = 0.1·0.5 = 0.05;  v = 0.05·0.25 = 0.0125
//   m̂ = 0.05/0.1 = 0.5;  v̂ = 0.0125/0.05 = 0.25;  p ← 0.999 − 0.01·0.5/(0.5 + 1e-8)
//   = 0.999 − 0.0099999998 = 0.9890000002
Test(adamw, step1_by_hand) {
    double p = 1.0, g = 0.5, m = 0, v = 0;
    ref_adamw_param ps = {.p = &p, .g = &g, .m = &m, .v = &v, .n = 1, .decay = 1};
    phax_adamw_cfg c = {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .clip = 0};
    double gn = NAN;
    cr_assert(ref_adamw_step(&ps, 1, &c, 1, &gn) == PHAX_OK);
    cr_assert(gn == 0.5);
    // A handful of roundings on values ≤ 1.
    cr_assert(fabs(m - 0.05) <= 4 * EPS && fabs(v - 0.0125) <= 4 * EPS, "m %g v %g", m, v);
    cr_assert(fabs(p - 0.9890000002) <= 1e-15, "p = %.17g", p);
}

// Three steps over two tensors (one decayed, one not), against values computed
// independently (plain Python floats; torch.optim.AdamW with
// clip_grad_norm_(max_norm=1.0) gives the same numbers to ≤ 1e-15).
static void three_steps(double clip, const double want_p[3][3], const double want_q[3][2],
                        const double want_norm[3]) {
    double p[3] = {1.0, -2.0, 0.5}, q[2] = {0.25, 3.0};
    double mp[3] = {0}, vp[3] = {0}, mq[2] = {0}, vq[2] = {0};
    double gs[3][5] = {{0.5, -1.5, 2.0, 4.0, -3.0}, {-0.25, 0.75, 0.1, 0.2, 0.3}, {1.0, 1.0, -1.0, 0.0, 5.0}};
    phax_adamw_cfg c = {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .clip = clip};
    for (int s = 0; s < 3; s++) {
        ref_adamw_param ps[2] = {{.p = p, .g = gs[s], .m = mp, .v = vp, .n = 3, .decay = 1},
                                 {.p = q, .g = gs[s] + 3, .m = mq, .v = vq, .n = 2, .decay = 0}};
        double gn = NAN;
        cr_assert(ref_adamw_step(ps, 2, &c, s + 1, &gn) == PHAX_OK);
        cr_assert(fabs(gn - want_norm[s]) <= 8 * EPS * want_norm[s], "norm %.17g", gn);
        // Values ≤ 3 after ~20 operations each: 1e-14 is ~50 ulps.
        for (int i = 0; i < 3; i++)
            cr_assert(fabs(p[i] - want_p[s][i]) <= 1e-14, "step %d p[%d] = %.17g want %.17g", s + 1, i, p[i], want_p[s][i]);
        for (int i = 0; i < 2; i++)
            cr_assert(fabs(q[i] - want_q[s][i]) <= 1e-14, "step %d q[%d] = %.17g want %.17g", s + 1, i, q[i], want_q[s][i]);
    }
}

static const double NORMS[3] = {5.612486080160912, 0.8746427842267951, 5.291502622129181};

// Global norm 5.61 > 1 at steps 1 and 3: both tensors scaled by 1/(norm + 1e-6).
Test(adamw, three_steps_clipped) {
    const double wp[3][3] = {{0.9890000011224973, -1.9880000003741658, 0.48950000028062435},
                             {0.9927271188805323, -1.990728118298846, 0.48045549079200045},
                             {0.9910299768398878, -1.993803208266275, 0.4770183372787327}};
    const double wq[3][2] = {{0.24000000014031217, 3.009999999812917},
                             {0.23144499048670492, 3.012213600968667},
                             {0.22474643684303952, 3.0078305701330343}};
    three_steps(1.0, wp, wq, NORMS);
}

Test(adamw, three_steps_unclipped) {
    const double wp[3][3] = {{0.9890000002, -1.9880000000666667, 0.48950000005},
                             {0.9853273057873828, -1.9833283056085687, 0.4818564032075879},
                             {0.9778545292435392, -1.9828633262631494, 0.4793157930922436}};
    const double wq[3][2] = {{0.240000000025, 3.0099999999666665},
                             {0.23284590315704734, 3.016000923228153},
                             {0.2272442611058938, 3.012929493989401}};
    three_steps(0.0, wp, wq, NORMS);
}

// Clipping is a no-op when the norm is below the threshold.
Test(adamw, clip_inactive_below_threshold) {
    double p1 = 1, g = 0.3, m1 = 0, v1 = 0, p2 = 1, m2 = 0, v2 = 0;
    ref_adamw_param a = {.p = &p1, .g = &g, .m = &m1, .v = &v1, .n = 1, .decay = 1};
    ref_adamw_param b = {.p = &p2, .g = &g, .m = &m2, .v = &v2, .n = 1, .decay = 1};
    phax_adamw_cfg c = phax_adamw_cfg_default();
    c.clip = 0.31;
    cr_assert(ref_adamw_step(&a, 1, &c, 1, NULL) == PHAX_OK);
    c.clip = 0;
    cr_assert(ref_adamw_step(&b, 1, &c, 1, NULL) == PHAX_OK);
    cr_assert(p1 == p2 && m1 == m2 && v1 == v2);
}

Test(adamw, bad_settings) {
    double p = 1, g = NAN, m = 0, v = 0;
    ref_adamw_param a = {.p = &p, .g = &g, .m = &m, .v = &v, .n = 1, .decay = 1};
    phax_adamw_cfg c = phax_adamw_cfg_default();
    cr_assert(ref_adamw_step(&a, 1, &c, 1, NULL) == PHAX_ERR);  // NaN gradient refused
    cr_assert(strstr(phax_error(), "norm") != NULL, "%s", phax_error());
    cr_assert(p == 1.0, "parameter changed on a refused step");
    g = 1;
    cr_assert(ref_adamw_step(&a, 1, &c, 0, NULL) == PHAX_ERR);  // steps count from 1
    c.beta2 = 1.0;
    cr_assert(ref_adamw_step(&a, 1, &c, 1, NULL) == PHAX_ERR);
}
