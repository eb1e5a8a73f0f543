// float32 naive baselines of fast/cpu basic's ops (baseline_f32.h): embedding is a
// gather (exact), so from linear on: linear, the three norms, GELU/SiLU, SwiGLU,
// RoPE, mix, cross-entropy and AdamW, each a plain transcription of ref's formula.
#include <math.h>
#include <stdlib.h>

#include "baseline_f32.h"

void b32_linear_fwd(float *y, const float *x, const float *W, const float *b, size_t n,
                          int in, int out) {
    for (size_t r = 0; r < n; r++)
        for (int o = 0; o < out; o++) {
            float s = b ? b[o] : 0.0f;
            for (int i = 0; i < in; i++) s += x[r * in + i] * W[(size_t)o * in + i];
            y[r * out + o] = s;
        }
}
void b32_linear_bwd(float *dx, float *dW, float *db, const float *dy, const float *x,
                          const float *W, size_t n, int in, int out) {
    for (size_t r = 0; r < n; r++)
        for (int o = 0; o < out; o++) {
            float g = dy[r * out + o];
            if (db) db[o] += g;
            for (int i = 0; i < in; i++) {
                if (dx) dx[r * in + i] += g * W[(size_t)o * in + i];
                if (dW) dW[(size_t)o * in + i] += g * x[r * in + i];
            }
        }
}

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

static float b32_sigmoid(float z) {
    if (z >= 0) return 1.0f / (1.0f + expf(-z));
    float e = expf(z);
    return e / (1.0f + e);
}
static float b32_cdf(float z) { return 0.5f * erfcf(-z / sqrtf(2.0f)); }
static float b32_pdf(float z) { return 0.39894228040143267794f * expf(-0.5f * z * z); }
void b32_gelu_fwd(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = x[i] * b32_cdf(x[i]);
}
void b32_gelu_bwd(float *dx, const float *dy, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) dx[i] += dy[i] * (b32_cdf(x[i]) + x[i] * b32_pdf(x[i]));
}
void b32_silu_fwd(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = x[i] * b32_sigmoid(x[i]);
}
void b32_silu_bwd(float *dx, const float *dy, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float s = b32_sigmoid(x[i]);
        dx[i] += dy[i] * s * (1.0f + x[i] * b32_sigmoid(-x[i]));
    }
}

void b32_swiglu_fwd(float *y, const float *x, const float *Wg, const float *Wu,
                          const float *Wd, size_t n, int d, int hid) {
    size_t m = n * (size_t)hid;
    float *a = malloc(m * 4), *b = malloc(m * 4);
    b32_linear_fwd(a, x, Wg, NULL, n, d, hid);
    b32_linear_fwd(b, x, Wu, NULL, n, d, hid);
    for (size_t i = 0; i < m; i++) a[i] = a[i] * b32_sigmoid(a[i]) * b[i];
    b32_linear_fwd(y, a, Wd, NULL, n, hid, d);
    free(a), free(b);
}
void b32_swiglu_bwd(float *dx, float *dWg, float *dWu, float *dWd, const float *dy,
                          const float *x, const float *Wg, const float *Wu, const float *Wd,
                          size_t n, int d, int hid) {
    size_t m = n * (size_t)hid;
    float *a = malloc(m * 4), *b = malloc(m * 4), *h = malloc(m * 4);
    float *dh = calloc(m, 4), *da = calloc(m, 4), *db = calloc(m, 4);
    b32_linear_fwd(a, x, Wg, NULL, n, d, hid);
    b32_linear_fwd(b, x, Wu, NULL, n, d, hid);
    for (size_t i = 0; i < m; i++) h[i] = a[i] * b32_sigmoid(a[i]) * b[i];
    b32_linear_bwd(dh, dWd, NULL, dy, h, Wd, n, hid, d);
    for (size_t i = 0; i < m; i++) {
        float s = b32_sigmoid(a[i]);
        db[i] = dh[i] * (a[i] * s);
        da[i] = dh[i] * b[i] * (s * (1.0f + a[i] * b32_sigmoid(-a[i])));
    }
    b32_linear_bwd(dx, dWg, NULL, da, x, Wg, n, d, hid);
    b32_linear_bwd(dx, dWu, NULL, db, x, Wu, n, d, hid);
    free(a), free(b), free(h), free(dh), free(da), free(db);
}

// RoPE: the angle in double as the spec requires on every tier (a float angle
// would be off by ~p·2^-24 rad); cos/sin rounded to float; the rotation in float.
void b32_rope(float *y, const float *x, int B, int T, int H, int dh, double base, long pos0,
                    float sign, int acc) {
    int half = dh / 2;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                size_t off = (((size_t)b * T + t) * H + h) * dh;
                for (int i = 0; i < half; i++) {
                    double th = pow(base, -2.0 * i / dh), p = (double)(pos0 + t);
                    float c = (float)cos(p * th), s = sign * (float)sin(p * th);
                    float x1 = x[off + i], x2 = x[off + i + half];
                    float y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
                    if (acc)
                        y[off + i] += y1, y[off + i + half] += y2;
                    else
                        y[off + i] = y1, y[off + i + half] = y2;
                }
            }
}

static float b32_softplus(float z) { return (z > 0 ? z : 0.0f) + log1pf(expf(-fabsf(z))); }
void b32_mix_fwd(float *m, const float *b, const float *p, int nb, size_t n) {
    float w[nb], S = 0;
    for (int i = 0; i < nb; i++) S += (w[i] = b32_softplus(p[i]));
    for (int i = 0; i < nb; i++) w[i] /= S;
    for (size_t e = 0; e < n; e++) {
        float s = 0;
        for (int i = 0; i < nb; i++) s += w[i] * b[(size_t)i * n + e];
        m[e] = s;
    }
}
void b32_mix_bwd(float *db, float *dp, const float *dm, const float *b, const float *p,
                       int nb, size_t n) {
    float w[nb], dw[nb], S = 0;
    for (int i = 0; i < nb; i++) S += (w[i] = b32_softplus(p[i]));
    for (int i = 0; i < nb; i++) w[i] /= S;
    float wdw = 0;
    for (int i = 0; i < nb; i++) {
        float s = 0;
        for (size_t e = 0; e < n; e++) {
            s += dm[e] * b[(size_t)i * n + e];
            if (db) db[(size_t)i * n + e] += w[i] * dm[e];
        }
        dw[i] = s;
        wdw += w[i] * s;
    }
    if (dp)
        for (int i = 0; i < nb; i++) dp[i] += b32_sigmoid(p[i]) * (dw[i] - wdw) / S;
}

static float b32_lse(const float *x, int V) {
    float mx = -INFINITY, s = 0;
    for (int j = 0; j < V; j++) mx = x[j] > mx ? x[j] : mx;
    for (int j = 0; j < V; j++) s += expf(x[j] - mx);
    return mx + logf(s);
}
static size_t b32_count(const int32_t *t, size_t n) {
    size_t c = 0;
    for (size_t r = 0; r < n; r++) c += t[r] >= 0;
    return c;
}
float b32_ce_fwd(const float *logits, const int32_t *t, size_t n, int V) {
    float s = 0;
    for (size_t r = 0; r < n; r++)
        if (t[r] >= 0) s += b32_lse(&logits[r * V], V) - logits[r * V + t[r]];
    return s / (float)b32_count(t, n);
}
void b32_ce_bwd(float *dl, float dloss, const float *logits, const int32_t *t, size_t n,
                      int V) {
    float g = dloss / (float)b32_count(t, n);
    for (size_t r = 0; r < n; r++) {
        if (t[r] < 0) continue;
        float lse = b32_lse(&logits[r * V], V);
        for (int j = 0; j < V; j++)
            dl[r * V + j] += g * (expf(logits[r * V + j] - lse) - (j == t[r]));
    }
}

// AdamW in float32 (the norm too), as a plain transcription of ref.
void b32_adamw(h_adamw_param *ps, int np, const phax_adamw_cfg *c, long step,
                     float *gnorm) {
    float ss = 0;
    for (int j = 0; j < np; j++)
        for (size_t i = 0; i < ps[j].n; i++) ss += ps[j].g[i] * ps[j].g[i];
    float norm = sqrtf(ss), clip = (float)c->clip, coef = 1.0f;
    *gnorm = norm;
    if (clip > 0 && clip / (norm + 1e-6f) < 1.0f) coef = clip / (norm + 1e-6f);
    float b1 = (float)c->beta1, b2 = (float)c->beta2, lr = (float)c->lr;
    float bc1 = 1.0f - powf(b1, (float)step), bc2 = 1.0f - powf(b2, (float)step);
    for (int j = 0; j < np; j++) {
        h_adamw_param *p = &ps[j];
        float decay = p->decay ? lr * (float)c->weight_decay : 0.0f;
        for (size_t i = 0; i < p->n; i++) {
            float g = coef * p->g[i];
            p->p[i] -= decay * p->p[i];
            p->m[i] = b1 * p->m[i] + (1 - b1) * g;
            p->v[i] = b2 * p->v[i] + (1 - b2) * g * g;
            p->p[i] -= lr * (p->m[i] / bc1) / (sqrtf(p->v[i] / bc2) + (float)c->eps);
        }
    }
}

