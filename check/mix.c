// phax check: PHA's softplus-normalised mix of branches and its gradients at precision `pr`:
// plain loops, every input and operation rounded. Not ref, not fast/. Outputs are overwritten.
// docs/spec.md §2.10.
#include <stdlib.h>

#include "phax/check.h"
#include "naive.h"

#define R(x) PHAX_CHECK_R(pr, (x))
#define RM(x) PHAX_CHECK_RM(pr, (x))

int phax_naive_mix(const phax_precision *pr, double *y, double *db, double *dp, const double *gy, const double *b,
                   const double *p, int nb, size_t n) {
    double *w = malloc((size_t)nb * sizeof *w), *dw = malloc((size_t)nb * sizeof *dw), S = 0, wdw = 0;
    if (!w || !dw) {
        free(w), free(dw);
        return phax_fail("check: out of memory (mix baseline)");
    }
    for (int i = 0; i < nb; i++) S = R(S + (w[i] = R(softplus(R(p[i])))));
    for (int i = 0; i < nb; i++) w[i] = R(w[i] / S);
    for (size_t e = 0; e < n; e++) {
        double s = 0;
        for (int i = 0; i < nb; i++) s = R(s + R(w[i] * R(b[(size_t)i * n + e])));
        y[e] = s;
    }
    for (int i = 0; i < nb; i++) {
        double s = 0;
        for (size_t e = 0; e < n; e++) {
            s = R(s + R(R(gy[e]) * R(b[(size_t)i * n + e])));
            db[(size_t)i * n + e] = R(w[i] * R(gy[e]));
        }
        dw[i] = s;
        wdw = R(wdw + R(w[i] * s));
    }
    for (int i = 0; i < nb; i++) dp[i] = R(R(R(sigm(R(p[i]))) * R(dw[i] - wdw)) / S);
    free(w), free(dw);
    return PHAX_OK;
}
