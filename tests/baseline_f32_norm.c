// float32 naive baseline of the three norms (baseline_f32.h): a plain transcription of ref's formula.
#include <math.h>

#include "baseline_f32.h"

static float b32_rms_inv(const float *x, int d, float eps) {
    float ss = 0;
    for (int j = 0; j < d; j++) ss += x[j] * x[j];
    return 1.0f / sqrtf(ss / d + eps);
}
void b32_rmsnorm_fwd(float *y, const float *x, const float *g, size_t n, int d, float eps) {
    for (size_t i = 0; i < n; i++) {
        float r = b32_rms_inv(&x[i * d], d, eps);
        for (int j = 0; j < d; j++) y[i * d + j] = g[j] * x[i * d + j] * r;
    }
}
void b32_rmsnorm_bwd(float *dx, float *dg, const float *dy, const float *x, const float *g,
                           size_t n, int d, float eps) {
    for (size_t i = 0; i < n; i++) {
        const float *xr = &x[i * d], *dyr = &dy[i * d];
        float r = b32_rms_inv(xr, d, eps);
        if (dg)
            for (int j = 0; j < d; j++) dg[j] += dyr[j] * xr[j] * r;
        if (dx) {
            float ux = 0;
            for (int j = 0; j < d; j++) ux += dyr[j] * g[j] * xr[j];
            float c = r * r * r * ux / d;
            for (int j = 0; j < d; j++) dx[i * d + j] += r * dyr[j] * g[j] - c * xr[j];
        }
    }
}
static void b32_ln_stats(const float *x, int d, float eps, float *mu, float *rstd) {
    float s = 0;
    for (int j = 0; j < d; j++) s += x[j];
    float m = s / d, v = 0;
    for (int j = 0; j < d; j++) v += (x[j] - m) * (x[j] - m);
    *mu = m;
    *rstd = 1.0f / sqrtf(v / d + eps);
}
static void b32_ln_vec_fwd(float *y, const float *x, const float *g, const float *b, int d,
                          float eps) {
    float mu, r;
    b32_ln_stats(x, d, eps, &mu, &r);
    for (int j = 0; j < d; j++) y[j] = g[j] * ((x[j] - mu) * r) + (b ? b[j] : 0.0f);
}
static void b32_ln_vec_bwd(float *dx, float *dg, float *db, const float *dy, const float *x,
                          const float *g, int d, float eps) {
    float mu, r;
    b32_ln_stats(x, d, eps, &mu, &r);
    float mean_u = 0, mean_ux = 0;
    for (int j = 0; j < d; j++) {
        float xh = (x[j] - mu) * r;
        if (dg) dg[j] += dy[j] * xh;
        if (db) db[j] += dy[j];
        mean_u += dy[j] * g[j];
        mean_ux += dy[j] * g[j] * xh;
    }
    if (!dx) return;
    mean_u /= d;
    mean_ux /= d;
    for (int j = 0; j < d; j++) dx[j] += r * (dy[j] * g[j] - mean_u - (x[j] - mu) * r * mean_ux);
}
void b32_layernorm_fwd(float *y, const float *x, const float *g, const float *b, size_t n,
                             int d, float eps) {
    for (size_t i = 0; i < n; i++) b32_ln_vec_fwd(&y[i * d], &x[i * d], g, b, d, eps);
}
void b32_layernorm_bwd(float *dx, float *dg, float *db, const float *dy, const float *x,
                             const float *g, size_t n, int d, float eps) {
    for (size_t i = 0; i < n; i++)
        b32_ln_vec_bwd(dx ? &dx[i * d] : NULL, dg, db, &dy[i * d], &x[i * d], g, d, eps);
}
void b32_headnorm_fwd(float *y, const float *x, const float *g, size_t n, int H, int dh,
                            float eps) {
    size_t w = (size_t)H * dh;
    for (size_t i = 0; i < n; i++)
        for (int h = 0; h < H; h++)
            b32_ln_vec_fwd(&y[i * w + h * dh], &x[i * w + h * dh], &g[h * dh], NULL, dh, eps);
}
void b32_headnorm_bwd(float *dx, float *dg, const float *dy, const float *x, const float *g,
                            size_t n, int H, int dh, float eps) {
    size_t w = (size_t)H * dh;
    for (size_t i = 0; i < n; i++)
        for (int h = 0; h < H; h++) {
            size_t o = i * w + h * dh;
            b32_ln_vec_bwd(dx ? &dx[o] : NULL, dg ? &dg[h * dh] : NULL, NULL, &dy[o], &x[o],
                          &g[h * dh], dh, eps);
        }
}
