// phax check: RMSNorm, LayerNorm and the per-head RMSNorm at precision `pr`, with the variance
// in two passes or (phax_naive_norm_alg) in one. Plain loops in the formula's order, every
// input and operation rounded. Not ref, not fast/. Outputs are overwritten. docs/spec.md §2.3.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "phax/check.h"
#include "naive.h"

#define R(x) PHAX_CHECK_R(pr, (x))
#define RM(x) PHAX_CHECK_RM(pr, (x))

// rms (layer = 0) or layer norm over groups of width w (headnorm: w = dh, one weight per
// channel; rmsnorm/layernorm: w = d). x, y, dx: (n, d); g, dg, b, db: (d); b/db may be NULL.
int phax_naive_norm(const phax_precision *pr, int layer, double *y, double *dx, double *dg, double *db,
                    const double *gy, const double *x, const double *g, const double *b, size_t n, int d, int w,
                    double eps) {
    return phax_naive_norm_alg(pr, layer, y, dx, dg, db, gy, x, g, b, n, d, w, eps, 0);
}

// The one-pass variance's two sums, in float32 at least: a kernel at a narrower precision
// accumulates in float32 (bf16 accumulators would cancel E[x²] − E[x]² to nothing at |mean| of
// a few spreads, which is not a sound algorithm but a broken one).
static double acc_round(const phax_precision *pr, double x) {
    return pr->p >= 24 ? R(x) : phax_round(phax_precision_get(PHAX_PREC_F32), x);
}

int phax_naive_norm_alg(const phax_precision *pr, int layer, double *y, double *dx, double *dg, double *db,
                        const double *gy, const double *x, const double *g, const double *b, size_t n, int d, int w,
                        double eps, int one_pass) {
    double *xh = malloc((size_t)w * sizeof *xh), *dxh = malloc((size_t)w * sizeof *dxh);
    if (!xh || !dxh) {
        free(xh), free(dxh);
        return phax_fail("check: out of memory (norm baseline)");
    }
    memset(dg, 0, (size_t)d * sizeof *dg);
    if (db) memset(db, 0, (size_t)d * sizeof *db);
    double rw = R(1.0 / w);
    for (size_t r = 0; r < n; r++)
        for (int o = 0; o < d; o += w) {
            const double *xr = x + r * d + o, *gr = gy + r * d + o;
            double mu = 0, var = 0;
            if (layer && one_pass) {  // var = E[x²] − E[x]², Σx and Σx² in one pass
                double s2 = 0;
                for (int i = 0; i < w; i++) {
                    double xi = R(xr[i]);
                    mu = acc_round(pr, mu + xi), s2 = acc_round(pr, s2 + acc_round(pr, xi * xi));
                }
                mu = acc_round(pr, mu * rw);
                var = fmax(acc_round(pr, acc_round(pr, s2 * rw) - acc_round(pr, mu * mu)), 0);
                mu = R(mu);
            } else {
                if (layer) {
                    for (int i = 0; i < w; i++) mu = R(mu + R(xr[i]));
                    mu = R(mu * rw);
                }
                for (int i = 0; i < w; i++) {
                    double c = R(R(xr[i]) - mu);
                    var = R(var + R(c * c));
                }
                var = R(var * rw);
            }
            double rs = R(1.0 / R(sqrt(R(var + eps))));
            double m1 = 0, m2 = 0;  // mean(dx̂), mean(dx̂ ⊙ x̂)
            for (int i = 0; i < w; i++) {
                xh[i] = R(R(R(xr[i]) - mu) * rs);
                y[r * d + o + i] = R(R(R(g[o + i]) * xh[i]) + (b ? R(b[o + i]) : 0));
                dxh[i] = R(R(gr[i]) * R(g[o + i]));
                dg[o + i] = R(dg[o + i] + R(R(gr[i]) * xh[i]));
                if (db) db[o + i] = R(db[o + i] + R(gr[i]));
                m1 = R(m1 + dxh[i]);
                m2 = R(m2 + R(dxh[i] * xh[i]));
            }
            m1 = layer ? R(m1 * rw) : 0, m2 = R(m2 * rw);
            for (int i = 0; i < w; i++) dx[r * d + o + i] = R(rs * R(R(dxh[i] - m1) - R(xh[i] * m2)));
        }
    free(xh), free(dxh);
    return PHAX_OK;
}
