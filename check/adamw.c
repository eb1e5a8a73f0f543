// phax check: one AdamW step at precision `pr` (ref_adamw_step's contract): plain loops, every
// input, constant and operation rounded. Not ref, not fast/. docs/spec.md §2.12.
#include <math.h>

#include "phax/check.h"
#include "naive.h"

#define R(x) PHAX_CHECK_R(pr, (x))
#define RM(x) PHAX_CHECK_RM(pr, (x))

// One AdamW step (ref_adamw_step's contract, one tensor): p, m, v updated in place; *gnorm the
// gradient's norm before clipping. The constants (lr, betas, eps, wd) rounded like any input.
int phax_naive_adamw(const phax_precision *pr, double *p, double *m, double *v, double *gnorm, const double *g,
                     size_t n, const phax_adamw_cfg *c, long step, int decay) {
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss = R(ss + R(R(g[i]) * R(g[i])));
    double norm = R(sqrt(ss)), coef = 1, clip = R(c->clip);
    *gnorm = norm;
    if (clip > 0 && R(clip / R(norm + 1e-6)) < 1) coef = R(clip / R(norm + 1e-6));
    double b1 = R(c->beta1), b2 = R(c->beta2), lr = R(c->lr), eps = R(c->eps);
    double bc1 = R(1 - R(pow(b1, (double)step))), bc2 = R(1 - R(pow(b2, (double)step)));
    double dec = decay ? R(lr * R(c->weight_decay)) : 0, ob1 = R(1 - b1), ob2 = R(1 - b2);
    for (size_t i = 0; i < n; i++) {
        double gi = R(coef * R(g[i])), pi = R(p[i]);
        pi = R(pi - R(dec * pi));
        m[i] = R(R(b1 * R(m[i])) + R(ob1 * gi));
        v[i] = R(R(b2 * R(v[i])) + R(R(ob2 * gi) * gi));
        double mh = R(m[i] / bc1), vh = R(v[i] / bc2);
        p[i] = R(pi - R(R(lr * mh) / R(R(sqrt(vh)) + eps)));
    }
    return PHAX_OK;
}
