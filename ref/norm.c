// ref norms over the last dimension: RMSNorm, LayerNorm (biased variance) and
// headnorm (LayerNorm over each head's slice, weight only). Backward functions
// recompute the row statistics from x rather than caching them.
#include <math.h>

#include "phax/ref.h"

// --- rmsnorm -------------------------------------------------------------------

// 1/sqrt(mean(x²) + eps) of one row. x: (d)
static double rms_inv(const double *x, int d, double eps) {
    double ss = 0;
    for (int j = 0; j < d; j++) ss += x[j] * x[j];
    return 1.0 / sqrt(ss / d + eps);
}

// y, x: (n, d); g: (d)    y = g ⊙ x · r,  r = 1/sqrt(mean(x²) + eps)
void ref_rmsnorm_fwd(double *y, const double *x, const double *g, size_t n, int d, double eps) {
    for (size_t i = 0; i < n; i++) {
        const double *xr = &x[i * d];
        double r = rms_inv(xr, d, eps);
        for (int j = 0; j < d; j++) y[i * d + j] = g[j] * xr[j] * r;
    }
}

// dx, dy, x: (n, d); dg, g: (d)
// With u = dy ⊙ g:  dx += r u − r³ x · (u·x)/d   (∂r/∂x_j = −r³ x_j / d)
//                   dg += Σ_rows dy ⊙ x r
void ref_rmsnorm_bwd(double *dx, double *dg, const double *dy, const double *x, const double *g,
                     size_t n, int d, double eps) {
    for (size_t i = 0; i < n; i++) {
        const double *xr = &x[i * d], *dyr = &dy[i * d];
        double r = rms_inv(xr, d, eps);
        if (dg)
            for (int j = 0; j < d; j++) dg[j] += dyr[j] * xr[j] * r;
        if (dx) {
            double ux = 0;  // Σ_j u_j x_j
            for (int j = 0; j < d; j++) ux += dyr[j] * g[j] * xr[j];
            double c = r * r * r * ux / d;
            for (int j = 0; j < d; j++) dx[i * d + j] += r * dyr[j] * g[j] - c * xr[j];
        }
    }
}

// --- layernorm over one vector (shared by layernorm and headnorm) ----------------

// Mean and 1/sqrt(var + eps) of x: (d), biased variance. Two passes, so a large
// common offset does not cancel the variance away (as E[x²] − μ² would).
static void ln_stats(const double *x, int d, double eps, double *mu, double *rstd) {
    double s = 0;
    for (int j = 0; j < d; j++) s += x[j];
    double m = s / d, v = 0;
    for (int j = 0; j < d; j++) v += (x[j] - m) * (x[j] - m);
    *mu = m;
    *rstd = 1.0 / sqrt(v / d + eps);
}

// y, x, g: (d); b: (d) or NULL    y = g ⊙ (x − μ) r + b
static void ln_vec_fwd(double *y, const double *x, const double *g, const double *b, int d,
                       double eps) {
    double mu, r;
    ln_stats(x, d, eps, &mu, &r);
    for (int j = 0; j < d; j++) y[j] = g[j] * ((x[j] - mu) * r) + (b ? b[j] : 0.0);
}

// dx, dy, x, g: (d); dg, db: (d) or NULL
// With x̂ = (x − μ) r and u = dy ⊙ g:  dx += r (u − mean(u) − x̂ mean(u ⊙ x̂)),
// dg += dy ⊙ x̂, db += dy.
static void ln_vec_bwd(double *dx, double *dg, double *db, const double *dy, const double *x,
                       const double *g, int d, double eps) {
    double mu, r;
    ln_stats(x, d, eps, &mu, &r);
    double mean_u = 0, mean_ux = 0;
    for (int j = 0; j < d; j++) {
        double xh = (x[j] - mu) * r;
        if (dg) dg[j] += dy[j] * xh;
        if (db) db[j] += dy[j];
        mean_u += dy[j] * g[j];
        mean_ux += dy[j] * g[j] * xh;
    }
    if (!dx) return;
    mean_u /= d;
    mean_ux /= d;
    for (int j = 0; j < d; j++) {
        double xh = (x[j] - mu) * r;
        dx[j] += r * (dy[j] * g[j] - mean_u - xh * mean_ux);
    }
}

// --- layernorm -------------------------------------------------------------------

// y, x: (n, d); g: (d); b: (d) or NULL
void ref_layernorm_fwd(double *y, const double *x, const double *g, const double *b, size_t n,
                       int d, double eps) {
    for (size_t i = 0; i < n; i++) ln_vec_fwd(&y[i * d], &x[i * d], g, b, d, eps);
}

// dx, dy, x: (n, d); dg, db, g: (d); any gradient may be NULL
void ref_layernorm_bwd(double *dx, double *dg, double *db, const double *dy, const double *x,
                       const double *g, size_t n, int d, double eps) {
    for (size_t i = 0; i < n; i++)
        ln_vec_bwd(dx ? &dx[i * d] : NULL, dg, db, &dy[i * d], &x[i * d], g, d, eps);
}

// --- headnorm ----------------------------------------------------------------------

// y, x: (n, H*dh); g: (H*dh)    head h of row i is the slice [h*dh, (h+1)*dh),
// normalised on its own and scaled by its own slice of g.
void ref_headnorm_fwd(double *y, const double *x, const double *g, size_t n, int H, int dh,
                      double eps) {
    size_t w = (size_t)H * dh;
    for (size_t i = 0; i < n; i++)
        for (int h = 0; h < H; h++) {
            size_t o = i * w + (size_t)h * dh;
            ln_vec_fwd(&y[o], &x[o], &g[(size_t)h * dh], NULL, dh, eps);
        }
}

// dx, dy, x: (n, H*dh); dg, g: (H*dh); dx, dg may be NULL
void ref_headnorm_bwd(double *dx, double *dg, const double *dy, const double *x, const double *g,
                      size_t n, int H, int dh, double eps) {
    size_t w = (size_t)H * dh;
    for (size_t i = 0; i < n; i++)
        for (int h = 0; h < H; h++) {
            size_t o = i * w + (size_t)h * dh;
            ln_vec_bwd(dx ? &dx[o] : NULL, dg ? &dg[(size_t)h * dh] : NULL, NULL, &dy[o], &x[o],
                       &g[(size_t)h * dh], dh, eps);
        }
}
