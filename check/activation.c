// phax check: GELU (exact erf form) and SiLU, elementwise, at precision `pr`: each function
// evaluation one rounded operation. Not ref, not fast/. Outputs are overwritten. docs/spec.md §2.4.
#include <math.h>

#include "phax/check.h"
#include "naive.h"

#define R(x) PHAX_CHECK_R(pr, (x))
#define RM(x) PHAX_CHECK_RM(pr, (x))

// y = act(x) and dx = gy·act'(x), each function evaluation one rounded operation.
static void act1(const phax_precision *pr, int silu, double x, double gy, double *y, double *dx) {
    x = R(x);
    if (silu) {
        double s = R(sigm(x));
        *y = R(x * s);
        *dx = R(R(gy) * R(s * R(1 + R(x * R(1 - s)))));
    } else {
        double Phi = R(R(0.5 * R(1 + R(erf(R(x * 0.70710678118654752440)))))),
               phi = R(R(exp(R(R(-0.5 * x) * x))) * 0.39894228040143267794);
        *y = R(x * Phi);
        *dx = R(R(gy) * R(Phi + R(x * phi)));
    }
}

int phax_naive_act(const phax_precision *pr, int silu, double *y, double *dx, const double *gy, const double *x,
                   size_t n) {
    for (size_t i = 0; i < n; i++) act1(pr, silu, x[i], gy[i], &y[i], &dx[i]);
    return PHAX_OK;
}
