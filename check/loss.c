// phax check: mean softmax cross-entropy and its gradient at precision `pr`: max subtraction,
// plain loops, every input and operation rounded. Not ref, not fast/. Outputs are overwritten.
// docs/spec.md §2.11.
#include <math.h>
#include <string.h>

#include "phax/check.h"
#include "naive.h"

#define R(x) PHAX_CHECK_R(pr, (x))
#define RM(x) PHAX_CHECK_RM(pr, (x))

// loss = mean over rows with a target ≥ 0 of lse(x_r) − x_r[t_r]; dlogits = gl/count ·
// (softmax(x_r) − onehot(t_r)) on those rows, 0 elsewhere. Targets were checked by ref.
int phax_naive_cross_entropy(const phax_precision *pr, double *loss, double *dx, double gl, const double *x,
                             const int32_t *tg, size_t n, int V) {
    size_t count = 0;
    for (size_t r = 0; r < n; r++) count += tg[r] >= 0;
    if (!count) return phax_fail("check: every target is ignored");
    double s = 0, gc = R(R(gl) / R((double)count));
    memset(dx, 0, n * (size_t)V * sizeof *dx);
    for (size_t r = 0; r < n; r++) {
        if (tg[r] < 0) continue;
        const double *xr = x + r * V;
        double mx = -INFINITY, z = 0;
        for (int j = 0; j < V; j++) mx = fmax(mx, R(xr[j]));
        for (int j = 0; j < V; j++) z = R(z + R(exp(R(R(xr[j]) - mx))));
        double lse = R(mx + R(log(z)));
        s = R(s + R(lse - R(xr[tg[r]])));
        for (int j = 0; j < V; j++) {
            double p = R(R(exp(R(R(xr[j]) - mx))) / z);
            dx[r * V + j] = R(gc * R(p - (j == tg[r])));
        }
    }
    *loss = R(s / R((double)count));
    return PHAX_OK;
}
