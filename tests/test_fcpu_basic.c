// fast/cpu basic (float32) against ref (float64): every op forward and every
// gradient, at awkward sizes, outputs NaN-poisoned and guarded.
//
// Inputs are drawn as float, and their exact double values are given to ref, so
// both tiers see identical inputs. The error bound is the flash-attention one:
// a plain-loop float32 transcription of ref's formula ("naive32", below, with
// float accumulators, compiled like this file without FMA contraction) is run
// on the same inputs, and
//     err(fast) = ‖fast − ref‖/‖ref − prior‖ ≤ C·err(naive32) + FLOOR,
// where prior is what a gradient buffer held before the backward added into it
// (0 for forward outputs), so an accumulated gradient is judged on what was
// added, not on the prior that dominates its norm. NaN or inf anywhere gives
// err = +inf, and every comparison is written `err <= tol`.
//   C = 2 for forwards, 3 for gradients (flash-attention's factors: a backward
//     chains several products, each with its own rounding);
//   FLOOR = 4·2^-24 · ‖|ref| + mag‖/‖ref − prior‖: a few float32 roundings of
//     the quantities involved — the stored output itself (prior + increment,
//     measured against the increment) and, where an output element is a sum
//     that can cancel (a dot product, a loss lse − x_t), mag = Σ|terms| of that
//     sum, computed in double from |inputs| (e.g. |dy|·|W| for linear's dx).
//     No float evaluation can beat this scale, and naive32 may undercut it by
//     luck when an output is a handful of numbers (one element at n = 1).
// Every err(fast)/err(naive32) ratio is printed ("ratio").
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "phax/fcpu.h"
#include "phax/ref.h"
#include "testutil.h"

#define C_FWD 2.0
#define C_BWD 3.0
#define FLOOR (4.0 * 0x1p-24)

// --- guarded float buffers -----------------------------------------------------------------------
// [n as size_t][pad][FG guard floats][n payload][FG guard floats]; payload NaN.
#define FG 16
#define FHDR 4  // floats of header (16 bytes: keeps the payload 16-byte aligned)
static const uint32_t FGUARD = 0x7FA1CAFEu;  // a signalling-NaN pattern

static void fset_guard(float *g) {
    for (int i = 0; i < FG; i++) memcpy(&g[i], &FGUARD, 4);
}
static bool fguard_ok(const float *g) {
    for (int i = 0; i < FG; i++)
        if (memcmp(&g[i], &FGUARD, 4) != 0) return false;
    return true;
}
static float *fbuf(size_t n) {
    float *base = malloc((n + 2 * FG + FHDR) * sizeof(float));
    cr_assert(base, "out of memory");
    memcpy(base, &n, sizeof n);
    fset_guard(base + FHDR);
    fset_guard(base + FHDR + FG + n);
    float *p = base + FHDR + FG;
    for (size_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}
static size_t flen(const float *p) {
    size_t n;
    memcpy(&n, p - FG - FHDR, sizeof n);
    return n;
}
static bool fintact(const float *p) { return !p || (fguard_ok(p - FG) && fguard_ok(p + flen(p))); }
static void ffree(float *p) {
    if (p) free(p - FG - FHDR);
}
static void fpoison(float *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = NAN;
}
static float *frand(size_t n, phax_rng *r, double scale) {
    float *f = fbuf(n);
    for (size_t i = 0; i < n; i++) f[i] = (float)(scale * phax_rng_normal(r));
    return f;
}
static float *fcopy(const float *x, size_t n) {
    float *y = fbuf(n);
    memcpy(y, x, n * sizeof *x);
    return y;
}
static double *todbl(const float *f, size_t n) {
    double *d = tu_buf(n);
    for (size_t i = 0; i < n; i++) d[i] = f[i];
    return d;
}
static bool fsame(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof(float)) == 0;
}

// --- error measure and bound ---------------------------------------------------------------------

// ‖a − ref‖ / ‖ref − base‖ (base NULL: 0); +inf if anything is NaN/inf. A
// zero denominator (nothing added) leaves the absolute error. *amp (if not
// NULL) gets ‖ref‖/‖ref − base‖: how much larger the stored values are than
// what was added to them.
static double relerr_amp(const float *a, const double *ref, const float *base, size_t n,
                         const double *mag, double *amp) {
    double num = 0, den = 0, tot = 0;
    if (amp) *amp = 1.0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(ref[i])) return INFINITY;
        double e = (double)a[i] - ref[i], v = ref[i] - (base ? (double)base[i] : 0.0);
        double sc = fabs(ref[i]) + (mag ? mag[i] : 0.0);
        num += e * e, den += v * v, tot += sc * sc;
    }
    if (amp) *amp = den > 0 ? sqrt(tot / den) : 1.0;
    return den > 0 ? sqrt(num / den) : sqrt(num);
}
static double relerr(const float *a, const double *ref, const float *base, size_t n) {
    return relerr_amp(a, ref, base, n, NULL, NULL);
}

static double worst_ratio[2];  // per test: max fast/naive32 over checks (fwd, bwd)

// mag: per-element Σ|terms| (or NULL), see FLOOR.
static bool bound_m(const char *label, const char *what, const float *fast, const float *naive,
                    const double *ref, const float *base, const double *mag, size_t n, double C) {
    double amp, ef = relerr_amp(fast, ref, base, n, mag, &amp), en = relerr(naive, ref, base, n);
    bool ok = ef <= C * en + FLOOR * amp;
    double ratio = en > 0 ? ef / en : (ef > 0 ? INFINITY : 0);
    printf("[%s] %-6s err fast %.3e naive32 %.3e ratio %.2f%s\n", label, what, ef, en, ratio,
           ok ? "" : "  FAIL");
    int k = C == C_BWD;
    if (!(ratio <= worst_ratio[k])) worst_ratio[k] = ratio;
    return ok;
}
static bool bound(const char *label, const char *what, const float *fast, const float *naive,
                  const double *ref, const float *base, size_t n, double C) {
    return bound_m(label, what, fast, naive, ref, base, NULL, n, C);
}
#define BOUND_FWD(label, what, f, nv, r, n) \
    cr_expect(bound(label, what, f, nv, r, NULL, n, C_FWD), "%s %s", label, what)
#define BOUND_BWD(label, what, f, nv, r, prior, n) \
    cr_expect(bound(label, what, f, nv, r, prior, n, C_BWD), "%s %s", label, what)

// |x| as a fresh malloc'd double array (for the magnitude sums).
static double *dabs(const double *x, size_t n) {
    double *a = malloc(n * sizeof *a);
    for (size_t i = 0; i < n; i++) a[i] = fabs(x[i]);
    return a;
}
static double *dzeros(size_t n) { return calloc(n, sizeof(double)); }
// Per counted row, |lse| + |x_t|: the magnitude of the terms of the loss
// (averaged like the loss); logits in double.
static double loss_mag(const double *L, const int32_t *t, size_t n, int V) {
    double s = 0;
    size_t cnt = 0;
    for (size_t r = 0; r < n; r++) {
        if (t[r] < 0) continue;
        const double *x = &L[r * V];
        double mx = -INFINITY, se = 0;
        for (int j = 0; j < V; j++) mx = x[j] > mx ? x[j] : mx;
        for (int j = 0; j < V; j++) se += exp(x[j] - mx);
        s += fabs(mx + log(se)) + fabs(x[t[r]]);
        cnt++;
    }
    return s / (double)cnt;
}

// Fill a gradient triple (fast, naive32, ref) with the same random prior.
typedef struct {
    float *f, *nv, *p;  // fast, naive32, the prior itself
    double *r;
    size_t n;
    double *mag;  // Σ|terms| per element, or NULL (owned)
} grad3;

static grad3 g3_new(size_t n, phax_rng *rng, double scale) {
    grad3 g = {.n = n};
    g.p = frand(n, rng, scale);
    g.f = fcopy(g.p, n), g.nv = fcopy(g.p, n), g.r = todbl(g.p, n);
    return g;
}
static void g3_free(grad3 *g) {
    cr_expect(fintact(g->f) && fintact(g->nv) && fintact(g->p) && tu_intact(g->r),
              "gradient guard overwritten");
    ffree(g->f), ffree(g->nv), ffree(g->p), tu_free(g->r), free(g->mag);
}
static bool g3_check(const char *label, const char *what, grad3 *g) {
    return bound_m(label, what, g->f, g->nv, g->r, g->p, g->mag, g->n, C_BWD);
}

// ============================================================================================
// naive32: ref's formulas transcribed to float, plain loops, float accumulators.
// ============================================================================================

static void nv_linear_fwd(float *y, const float *x, const float *W, const float *b, size_t n,
                          int in, int out) {
    for (size_t r = 0; r < n; r++)
        for (int o = 0; o < out; o++) {
            float s = b ? b[o] : 0.0f;
            for (int i = 0; i < in; i++) s += x[r * in + i] * W[(size_t)o * in + i];
            y[r * out + o] = s;
        }
}
static void nv_linear_bwd(float *dx, float *dW, float *db, const float *dy, const float *x,
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

static float nv_rms_inv(const float *x, int d, float eps) {
    float ss = 0;
    for (int j = 0; j < d; j++) ss += x[j] * x[j];
    return 1.0f / sqrtf(ss / d + eps);
}
static void nv_rmsnorm_fwd(float *y, const float *x, const float *g, size_t n, int d, float eps) {
    for (size_t i = 0; i < n; i++) {
        float r = nv_rms_inv(&x[i * d], d, eps);
        for (int j = 0; j < d; j++) y[i * d + j] = g[j] * x[i * d + j] * r;
    }
}
static void nv_rmsnorm_bwd(float *dx, float *dg, const float *dy, const float *x, const float *g,
                           size_t n, int d, float eps) {
    for (size_t i = 0; i < n; i++) {
        const float *xr = &x[i * d], *dyr = &dy[i * d];
        float r = nv_rms_inv(xr, d, eps);
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
static void nv_ln_stats(const float *x, int d, float eps, float *mu, float *rstd) {
    float s = 0;
    for (int j = 0; j < d; j++) s += x[j];
    float m = s / d, v = 0;
    for (int j = 0; j < d; j++) v += (x[j] - m) * (x[j] - m);
    *mu = m;
    *rstd = 1.0f / sqrtf(v / d + eps);
}
static void nv_ln_vec_fwd(float *y, const float *x, const float *g, const float *b, int d,
                          float eps) {
    float mu, r;
    nv_ln_stats(x, d, eps, &mu, &r);
    for (int j = 0; j < d; j++) y[j] = g[j] * ((x[j] - mu) * r) + (b ? b[j] : 0.0f);
}
static void nv_ln_vec_bwd(float *dx, float *dg, float *db, const float *dy, const float *x,
                          const float *g, int d, float eps) {
    float mu, r;
    nv_ln_stats(x, d, eps, &mu, &r);
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
static void nv_layernorm_fwd(float *y, const float *x, const float *g, const float *b, size_t n,
                             int d, float eps) {
    for (size_t i = 0; i < n; i++) nv_ln_vec_fwd(&y[i * d], &x[i * d], g, b, d, eps);
}
static void nv_layernorm_bwd(float *dx, float *dg, float *db, const float *dy, const float *x,
                             const float *g, size_t n, int d, float eps) {
    for (size_t i = 0; i < n; i++)
        nv_ln_vec_bwd(dx ? &dx[i * d] : NULL, dg, db, &dy[i * d], &x[i * d], g, d, eps);
}
static void nv_headnorm_fwd(float *y, const float *x, const float *g, size_t n, int H, int dh,
                            float eps) {
    size_t w = (size_t)H * dh;
    for (size_t i = 0; i < n; i++)
        for (int h = 0; h < H; h++)
            nv_ln_vec_fwd(&y[i * w + h * dh], &x[i * w + h * dh], &g[h * dh], NULL, dh, eps);
}
static void nv_headnorm_bwd(float *dx, float *dg, const float *dy, const float *x, const float *g,
                            size_t n, int H, int dh, float eps) {
    size_t w = (size_t)H * dh;
    for (size_t i = 0; i < n; i++)
        for (int h = 0; h < H; h++) {
            size_t o = i * w + h * dh;
            nv_ln_vec_bwd(dx ? &dx[o] : NULL, dg ? &dg[h * dh] : NULL, NULL, &dy[o], &x[o],
                          &g[h * dh], dh, eps);
        }
}

static float nv_sigmoid(float z) {
    if (z >= 0) return 1.0f / (1.0f + expf(-z));
    float e = expf(z);
    return e / (1.0f + e);
}
static float nv_cdf(float z) { return 0.5f * erfcf(-z / sqrtf(2.0f)); }
static float nv_pdf(float z) { return 0.39894228040143267794f * expf(-0.5f * z * z); }
static void nv_gelu_fwd(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = x[i] * nv_cdf(x[i]);
}
static void nv_gelu_bwd(float *dx, const float *dy, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) dx[i] += dy[i] * (nv_cdf(x[i]) + x[i] * nv_pdf(x[i]));
}
static void nv_silu_fwd(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = x[i] * nv_sigmoid(x[i]);
}
static void nv_silu_bwd(float *dx, const float *dy, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float s = nv_sigmoid(x[i]);
        dx[i] += dy[i] * s * (1.0f + x[i] * nv_sigmoid(-x[i]));
    }
}

static void nv_swiglu_fwd(float *y, const float *x, const float *Wg, const float *Wu,
                          const float *Wd, size_t n, int d, int hid) {
    size_t m = n * (size_t)hid;
    float *a = malloc(m * 4), *b = malloc(m * 4);
    nv_linear_fwd(a, x, Wg, NULL, n, d, hid);
    nv_linear_fwd(b, x, Wu, NULL, n, d, hid);
    for (size_t i = 0; i < m; i++) a[i] = a[i] * nv_sigmoid(a[i]) * b[i];
    nv_linear_fwd(y, a, Wd, NULL, n, hid, d);
    free(a), free(b);
}
static void nv_swiglu_bwd(float *dx, float *dWg, float *dWu, float *dWd, const float *dy,
                          const float *x, const float *Wg, const float *Wu, const float *Wd,
                          size_t n, int d, int hid) {
    size_t m = n * (size_t)hid;
    float *a = malloc(m * 4), *b = malloc(m * 4), *h = malloc(m * 4);
    float *dh = calloc(m, 4), *da = calloc(m, 4), *db = calloc(m, 4);
    nv_linear_fwd(a, x, Wg, NULL, n, d, hid);
    nv_linear_fwd(b, x, Wu, NULL, n, d, hid);
    for (size_t i = 0; i < m; i++) h[i] = a[i] * nv_sigmoid(a[i]) * b[i];
    nv_linear_bwd(dh, dWd, NULL, dy, h, Wd, n, hid, d);
    for (size_t i = 0; i < m; i++) {
        float s = nv_sigmoid(a[i]);
        db[i] = dh[i] * (a[i] * s);
        da[i] = dh[i] * b[i] * (s * (1.0f + a[i] * nv_sigmoid(-a[i])));
    }
    nv_linear_bwd(dx, dWg, NULL, da, x, Wg, n, d, hid);
    nv_linear_bwd(dx, dWu, NULL, db, x, Wu, n, d, hid);
    free(a), free(b), free(h), free(dh), free(da), free(db);
}

// RoPE: the angle in double as the spec requires on every tier (a float angle
// would be off by ~p·2^-24 rad); cos/sin rounded to float; the rotation in float.
static void nv_rope(float *y, const float *x, int B, int T, int H, int dh, double base, long pos0,
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

static float nv_softplus(float z) { return (z > 0 ? z : 0.0f) + log1pf(expf(-fabsf(z))); }
static void nv_mix_fwd(float *m, const float *b, const float *p, int nb, size_t n) {
    float w[nb], S = 0;
    for (int i = 0; i < nb; i++) S += (w[i] = nv_softplus(p[i]));
    for (int i = 0; i < nb; i++) w[i] /= S;
    for (size_t e = 0; e < n; e++) {
        float s = 0;
        for (int i = 0; i < nb; i++) s += w[i] * b[(size_t)i * n + e];
        m[e] = s;
    }
}
static void nv_mix_bwd(float *db, float *dp, const float *dm, const float *b, const float *p,
                       int nb, size_t n) {
    float w[nb], dw[nb], S = 0;
    for (int i = 0; i < nb; i++) S += (w[i] = nv_softplus(p[i]));
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
        for (int i = 0; i < nb; i++) dp[i] += nv_sigmoid(p[i]) * (dw[i] - wdw) / S;
}

static float nv_lse(const float *x, int V) {
    float mx = -INFINITY, s = 0;
    for (int j = 0; j < V; j++) mx = x[j] > mx ? x[j] : mx;
    for (int j = 0; j < V; j++) s += expf(x[j] - mx);
    return mx + logf(s);
}
static size_t nv_count(const int32_t *t, size_t n) {
    size_t c = 0;
    for (size_t r = 0; r < n; r++) c += t[r] >= 0;
    return c;
}
static float nv_ce_fwd(const float *logits, const int32_t *t, size_t n, int V) {
    float s = 0;
    for (size_t r = 0; r < n; r++)
        if (t[r] >= 0) s += nv_lse(&logits[r * V], V) - logits[r * V + t[r]];
    return s / (float)nv_count(t, n);
}
static void nv_ce_bwd(float *dl, float dloss, const float *logits, const int32_t *t, size_t n,
                      int V) {
    float g = dloss / (float)nv_count(t, n);
    for (size_t r = 0; r < n; r++) {
        if (t[r] < 0) continue;
        float lse = nv_lse(&logits[r * V], V);
        for (int j = 0; j < V; j++)
            dl[r * V + j] += g * (expf(logits[r * V + j] - lse) - (j == t[r]));
    }
}

// AdamW in float32 (the norm too), as a plain transcription of ref.
static void nv_adamw(fcpu_adamw_param *ps, int np, const ref_adamw_cfg *c, long step,
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
        fcpu_adamw_param *p = &ps[j];
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

// ============================================================================================
// tests
// ============================================================================================

static const size_t ROWS[] = {1, 7, 129};     // 1 row; fewer rows than threads·chunks; odd
static const int DIMS[] = {24, 40, 64, 257};  // head-dim-like widths and an odd prime

static void report_worst(const char *name) {
    printf("[%s] worst ratio fast/naive32: forward %.2f, gradients %.2f\n", name, worst_ratio[0],
           worst_ratio[1]);
    worst_ratio[0] = worst_ratio[1] = 0;
}

// --- embedding -----------------------------------------------------------------------------------

Test(fcpu_basic, embedding) {
    phax_rng r = tu_rng("fcpu_basic/embedding");
    const int Vs[] = {11, 1000};
    for (int vi = 0; vi < 2; vi++)
        for (int ri = 0; ri < 3; ri++)
            for (int di = 0; di < 4; di++) {
                int V = Vs[vi], d = DIMS[di];
                size_t n = ROWS[ri] * 3;  // 3, 21, 387: tokens repeat when V = 11
                char label[96];
                snprintf(label, sizeof label, "embedding n=%zu V=%d d=%d", n, V, d);
                int32_t *tok = malloc(n * sizeof *tok);
                for (size_t t = 0; t < n; t++) tok[t] = (int32_t)phax_rng_below(&r, V);
                float *E = frand((size_t)V * d, &r, 1.0), *x = fbuf(n * d);
                cr_assert(fcpu_embedding_fwd(x, E, tok, n, V, d) == PHAX_OK);
                // A gather is exact.
                for (size_t t = 0; t < n; t++)
                    cr_assert(fsame(&x[t * d], &E[(size_t)tok[t] * d], d), "%s: row %zu", label, t);
                // Backward: scatter-add into a prior.
                float *dx = frand(n * d, &r, 1.0);
                double *dxd = todbl(dx, n * d);
                grad3 dE = g3_new((size_t)V * d, &r, 1.0);
                fcpu_embedding_bwd(dE.f, dx, tok, n, d);
                for (size_t t = 0; t < n; t++)
                    for (int j = 0; j < d; j++) dE.nv[(size_t)tok[t] * d + j] += dx[t * d + j];
                ref_embedding_bwd(dE.r, dxd, tok, n, d);
                cr_expect(g3_check(label, "dE", &dE));
                // Same float additions in the same (token) order as naive32: bit-equal.
                cr_expect(fsame(dE.f, dE.nv, dE.n), "%s: dE differs from the token-order sum",
                          label);
                cr_expect(fintact(E) && fintact(x) && fintact(dx));
                g3_free(&dE), ffree(E), ffree(x), ffree(dx), tu_free(dxd), free(tok);
            }
    report_worst("embedding");
}

Test(fcpu_basic, embedding_bad_tokens) {
    tu_rng("fcpu_basic/embedding_bad_tokens");
    int V = 11, d = 5;
    float *E = fbuf((size_t)V * d), *x = fbuf(3 * d);
    for (int i = 0; i < V * d; i++) E[i] = (float)i;
    const int32_t bad[][3] = {{0, 11, 1}, {-1, 0, 0}, {3, 4, 2147483647}};
    for (int k = 0; k < 3; k++) {
        phax_clear_error();
        cr_expect(fcpu_embedding_fwd(x, E, bad[k], 3, V, d) == PHAX_ERR, "case %d accepted", k);
        cr_expect(strstr(phax_error(), "outside") != NULL, "message: %s", phax_error());
        for (int i = 0; i < 3 * d; i++) cr_expect(isnan(x[i]), "x written on failure");
    }
    cr_expect(fintact(E) && fintact(x));
    ffree(E), ffree(x);
}

// --- linear --------------------------------------------------------------------------------------

// One linear case: forward, the three gradients into priors, single-gradient calls.
static void linear_case(size_t n, int in, int out, int bias, phax_rng *rng) {
    phax_rng r = *rng;
    char label[96];
    snprintf(label, sizeof label, "linear n=%zu %d->%d%s", n, in, out, bias ? " +b" : "");
    float *x = frand(n * in, &r, 1.0), *W = frand((size_t)out * in, &r, 1 / sqrt(in));
    float *b = bias ? frand(out, &r, 1.0) : NULL;
    double *xd = todbl(x, n * in), *Wd = todbl(W, (size_t)out * in);
    double *bd = bias ? todbl(b, out) : NULL;
    // forward
    float *y = fbuf(n * out), *yn = fbuf(n * out);
    double *yr = tu_buf(n * out);
    fcpu_linear_fwd(y, x, W, b, n, in, out);
    nv_linear_fwd(yn, x, W, b, n, in, out);
    ref_linear_fwd(yr, xd, Wd, bd, n, in, out);
    // magnitudes: the same products on |inputs|
    double *ax = dabs(xd, n * in), *aW = dabs(Wd, (size_t)out * in);
    double *ab = bias ? dabs(bd, out) : NULL, *ymag = dzeros(n * out);
    ref_linear_fwd(ymag, ax, aW, ab, n, in, out);
    cr_expect(bound_m(label, "y", y, yn, yr, NULL, ymag, n * out, C_FWD));
    // backward into priors
    float *dy = frand(n * out, &r, 1.0);
    double *dyd = todbl(dy, n * out);
    grad3 dx = g3_new(n * in, &r, 1.0), dW = g3_new((size_t)out * in, &r, 1.0),
          db = g3_new(out, &r, 1.0);
    fcpu_linear_bwd(dx.f, dW.f, db.f, dy, x, W, n, in, out);
    nv_linear_bwd(dx.nv, dW.nv, db.nv, dy, x, W, n, in, out);
    ref_linear_bwd(dx.r, dW.r, db.r, dyd, xd, Wd, n, in, out);
    double *ady = dabs(dyd, n * out);
    dx.mag = dzeros(dx.n), dW.mag = dzeros(dW.n), db.mag = dzeros(db.n);
    ref_linear_bwd(dx.mag, dW.mag, db.mag, ady, ax, aW, n, in, out);
    free(ax), free(aW), free(ab), free(ymag), free(ady);
    cr_expect(g3_check(label, "dx", &dx));
    cr_expect(g3_check(label, "dW", &dW));
    cr_expect(g3_check(label, "db", &db));
    // NULL skips: one gradient at a time gives the same bits.
    float *dx1 = fcopy(dx.p, dx.n), *dW1 = fcopy(dW.p, dW.n), *db1 = fcopy(db.p, db.n);
    fcpu_linear_bwd(dx1, NULL, NULL, dy, x, W, n, in, out);
    fcpu_linear_bwd(NULL, dW1, NULL, dy, x, W, n, in, out);
    fcpu_linear_bwd(NULL, NULL, db1, dy, x, W, n, in, out);
    cr_expect(fsame(dx1, dx.f, dx.n) && fsame(dW1, dW.f, dW.n) && fsame(db1, db.f, db.n),
              "%s: single-gradient calls differ", label);
    cr_expect(fintact(x) && fintact(W) && fintact(b) && fintact(y) && fintact(yn) && fintact(dy) &&
              fintact(dx1) && fintact(dW1) && fintact(db1));
    g3_free(&dx), g3_free(&dW), g3_free(&db);
    ffree(x), ffree(W), ffree(b), ffree(y), ffree(yn), ffree(dy), ffree(dx1), ffree(dW1),
        ffree(db1);
    tu_free(xd), tu_free(Wd), tu_free(bd), tu_free(yr), tu_free(dyd);
    *rng = r;
}

Test(fcpu_basic, linear) {
    phax_rng r = tu_rng("fcpu_basic/linear");
    const int IO[][2] = {{24, 40}, {40, 24}, {64, 257}, {257, 64}, {1, 11}};
    for (int ri = 0; ri < 3; ri++)
        for (int k = 0; k < 5; k++)
            for (int bias = 0; bias < 2; bias++)
                linear_case(ROWS[ri], IO[k][0], IO[k][1], bias, &r);
    // n·out ≥ 2^20: the bias fill and the db column sum run in parallel.
    linear_case(4100, 24, 257, 1, &r);
    report_worst("linear");
}

// --- norms ---------------------------------------------------------------------------------------

typedef enum { RMS, LN, HEAD } norm_kind;
static const char *norm_name[] = {"rmsnorm", "layernorm", "headnorm"};

// One norm case: forward and both (three) gradients, plus single-gradient calls.
// offset: a common shift of x (LayerNorm's cancellation case).
static void norm_case(norm_kind kind, size_t n, int H, int dh, int bias, double offset,
                      phax_rng *r) {
    int d = H * dh;
    double eps = kind == RMS ? PHAX_RMSNORM_EPS : PHAX_LAYERNORM_EPS;
    char label[128];
    snprintf(label, sizeof label, "%s n=%zu d=%d%s%s off=%g", norm_name[kind], n, d,
             kind == HEAD ? (H == 1   ? " H=1"
                             : H == 2 ? " H=2"
                                      : " H>2")
                          : "",
             bias ? " +b" : "", offset);
    size_t nd = n * d;
    float *x = frand(nd, r, 1.0);
    for (size_t i = 0; i < nd; i++) x[i] += (float)offset;
    float *g = frand(d, r, 1.0), *b = bias ? frand(d, r, 1.0) : NULL;
    double *xd = todbl(x, nd), *gd = todbl(g, d), *bd = bias ? todbl(b, d) : NULL;
    float *y = fbuf(nd), *yn = fbuf(nd);
    double *yr = tu_buf(nd);
    switch (kind) {
        case RMS:
            fcpu_rmsnorm_fwd(y, x, g, n, d, eps);
            nv_rmsnorm_fwd(yn, x, g, n, d, (float)eps);
            ref_rmsnorm_fwd(yr, xd, gd, n, d, eps);
            break;
        case LN:
            fcpu_layernorm_fwd(y, x, g, b, n, d, eps);
            nv_layernorm_fwd(yn, x, g, b, n, d, (float)eps);
            ref_layernorm_fwd(yr, xd, gd, bd, n, d, eps);
            break;
        case HEAD:
            fcpu_headnorm_fwd(y, x, g, n, H, dh, eps);
            nv_headnorm_fwd(yn, x, g, n, H, dh, (float)eps);
            ref_headnorm_fwd(yr, xd, gd, n, H, dh, eps);
            break;
    }
    BOUND_FWD(label, "y", y, yn, yr, nd);

    float *dy = frand(nd, r, 1.0);
    double *dyd = todbl(dy, nd);
    grad3 dx = g3_new(nd, r, 1.0), dg = g3_new(d, r, 1.0), db = g3_new(d, r, 1.0);
    size_t wsz = kind == RMS  ? fcpu_rmsnorm_bwd_ws(n, d)
                 : kind == LN ? fcpu_layernorm_bwd_ws(n, d)
                              : fcpu_headnorm_bwd_ws(n, H, dh);
    float *ws = fbuf(wsz / sizeof(float) + 1);
    float *dx1 = fcopy(dx.p, nd), *dg1 = fcopy(dg.p, d), *db1 = fcopy(db.p, d);
    switch (kind) {
        case RMS:
            fcpu_rmsnorm_bwd(dx.f, dg.f, dy, x, g, n, d, eps, ws);
            nv_rmsnorm_bwd(dx.nv, dg.nv, dy, x, g, n, d, (float)eps);
            ref_rmsnorm_bwd(dx.r, dg.r, dyd, xd, gd, n, d, eps);
            fcpu_rmsnorm_bwd(dx1, NULL, dy, x, g, n, d, eps, NULL);  // no dg: no ws needed
            fcpu_rmsnorm_bwd(NULL, dg1, dy, x, g, n, d, eps, ws);
            break;
        case LN:
            fcpu_layernorm_bwd(dx.f, dg.f, db.f, dy, x, g, n, d, eps, ws);
            nv_layernorm_bwd(dx.nv, dg.nv, db.nv, dy, x, g, n, d, (float)eps);
            ref_layernorm_bwd(dx.r, dg.r, db.r, dyd, xd, gd, n, d, eps);
            fcpu_layernorm_bwd(dx1, NULL, NULL, dy, x, g, n, d, eps, NULL);
            fcpu_layernorm_bwd(NULL, dg1, NULL, dy, x, g, n, d, eps, ws);
            fcpu_layernorm_bwd(NULL, NULL, db1, dy, x, g, n, d, eps, ws);
            break;
        case HEAD:
            fcpu_headnorm_bwd(dx.f, dg.f, dy, x, g, n, H, dh, eps, ws);
            nv_headnorm_bwd(dx.nv, dg.nv, dy, x, g, n, H, dh, (float)eps);
            ref_headnorm_bwd(dx.r, dg.r, dyd, xd, gd, n, H, dh, eps);
            fcpu_headnorm_bwd(dx1, NULL, dy, x, g, n, H, dh, eps, NULL);
            fcpu_headnorm_bwd(NULL, dg1, dy, x, g, n, H, dh, eps, ws);
            break;
    }
    cr_expect(g3_check(label, "dx", &dx));
    cr_expect(g3_check(label, "dg", &dg));
    if (kind == LN) cr_expect(g3_check(label, "db", &db));
    cr_expect(fsame(dx1, dx.f, nd) && fsame(dg1, dg.f, d) && (kind != LN || fsame(db1, db.f, d)),
              "%s: single-gradient calls differ", label);
    cr_expect(fintact(x) && fintact(g) && fintact(b) && fintact(y) && fintact(yn) && fintact(dy) &&
              fintact(ws) && fintact(dx1) && fintact(dg1) && fintact(db1));
    g3_free(&dx), g3_free(&dg), g3_free(&db);
    ffree(x), ffree(g), ffree(b), ffree(y), ffree(yn), ffree(dy), ffree(ws), ffree(dx1), ffree(dg1),
        ffree(db1);
    tu_free(xd), tu_free(gd), tu_free(bd), tu_free(yr), tu_free(dyd);
}

Test(fcpu_basic, rmsnorm) {
    phax_rng r = tu_rng("fcpu_basic/rmsnorm");
    for (int ri = 0; ri < 3; ri++)
        for (int di = 0; di < 4; di++) norm_case(RMS, ROWS[ri], 1, DIMS[di], 0, 0.0, &r);
    norm_case(RMS, 1000, 1, 256, 0, 0.0, &r);  // more rows than chunks·threads
    norm_case(RMS, 7, 1, 64, 0, 30.0, &r);
    report_worst("rmsnorm");
}

Test(fcpu_basic, layernorm) {
    phax_rng r = tu_rng("fcpu_basic/layernorm");
    for (int ri = 0; ri < 3; ri++)
        for (int di = 0; di < 4; di++)
            for (int bias = 0; bias < 2; bias++)
                norm_case(LN, ROWS[ri], 1, DIMS[di], bias, 0.0, &r);
    norm_case(LN, 1000, 1, 256, 1, 0.0, &r);
    // A large common offset: x̂ cancels; ref and fast take two passes in double.
    norm_case(LN, 129, 1, 257, 1, 100.0, &r);
    report_worst("layernorm");
}

Test(fcpu_basic, headnorm) {
    phax_rng r = tu_rng("fcpu_basic/headnorm");
    const int HD[][2] = {{1, 24}, {3, 40}, {4, 64}, {2, 257}};
    for (int ri = 0; ri < 3; ri++)
        for (int k = 0; k < 4; k++) norm_case(HEAD, ROWS[ri], HD[k][0], HD[k][1], 0, 0.0, &r);
    norm_case(HEAD, 1000, 4, 64, 0, 0.0, &r);
    norm_case(HEAD, 7, 3, 40, 0, 50.0, &r);
    report_worst("headnorm");
}

// --- activations ---------------------------------------------------------------------------------

// x ~ 3·N(0,1), plus fixed points in the tails and at 0.
static float *act_input(size_t n, phax_rng *r) {
    float *x = frand(n, r, 3.0);
    const float special[] = {0.0f, -0.0f, 30.0f, -30.0f, 9.5f, -9.5f, 88.0f, -88.0f, 1e-20f};
    for (size_t i = 0; i < 9 && i < n; i++) x[n - 1 - i] = special[i];
    return x;
}

Test(fcpu_basic, gelu_silu) {
    phax_rng r = tu_rng("fcpu_basic/gelu_silu");
    const size_t NS[] = {1, 7, 129 * 257, 100003};
    for (int k = 0; k < 4; k++)
        for (int op = 0; op < 2; op++) {
            size_t n = NS[k];
            char label[64];
            snprintf(label, sizeof label, "%s n=%zu", op ? "silu" : "gelu", n);
            float *x = act_input(n, &r), *y = fbuf(n), *yn = fbuf(n), *dy = frand(n, &r, 1.0);
            double *xd = todbl(x, n), *yr = tu_buf(n), *dyd = todbl(dy, n);
            grad3 dx = g3_new(n, &r, 1.0);
            if (op == 0) {
                fcpu_gelu_fwd(y, x, n), nv_gelu_fwd(yn, x, n), ref_gelu_fwd(yr, xd, n);
                fcpu_gelu_bwd(dx.f, dy, x, n), nv_gelu_bwd(dx.nv, dy, x, n);
                ref_gelu_bwd(dx.r, dyd, xd, n);
            } else {
                fcpu_silu_fwd(y, x, n), nv_silu_fwd(yn, x, n), ref_silu_fwd(yr, xd, n);
                fcpu_silu_bwd(dx.f, dy, x, n), nv_silu_bwd(dx.nv, dy, x, n);
                ref_silu_bwd(dx.r, dyd, xd, n);
            }
            BOUND_FWD(label, "y", y, yn, yr, n);
            cr_expect(g3_check(label, "dx", &dx));
            // Elementwise too, so that a bad tail element cannot hide in the norm.
            // The float argument (−x/√2 for erfc, −|x| for exp) carries one
            // rounding, which the function amplifies by its relative condition
            // number κ(x) ≤ 2 + x² (erfc(u): ≈ 2u² = x² in the left tail; SiLU:
            // ≈ 1 + |x| for x ≪ 0); with libmvec's ≤ 4 ulp and the products,
            // 8·2^-24·(2 + x²)·|ref| + 1e-37 (far below FLT_MIN·x for subnormal
            // outputs) bounds every element.
            for (size_t i = 0; i < n; i++) {
                double xi = x[i], e = fabs(y[i] - yr[i]);
                double tol = 8 * 0x1p-24 * (2 + xi * xi) * fabs(yr[i]) + 1e-37;
                cr_expect(e <= tol, "%s: y[%zu] = %.9g for x = %.9g, ref %.17g", label, i, y[i],
                          x[i], yr[i]);
                if (!(e <= tol)) break;
            }
            cr_expect(fintact(x) && fintact(y) && fintact(yn) && fintact(dy));
            g3_free(&dx), ffree(x), ffree(y), ffree(yn), ffree(dy);
            tu_free(xd), tu_free(yr), tu_free(dyd);
        }
    report_worst("gelu/silu");
}

// --- SwiGLU --------------------------------------------------------------------------------------

Test(fcpu_basic, swiglu) {
    phax_rng r = tu_rng("fcpu_basic/swiglu");
    const int DH[][2] = {{24, 40}, {64, 171}, {40, 683}};  // hid: 40, 171, 683 (not ×16)
    for (int ri = 0; ri < 3; ri++)
        for (int k = 0; k < 3; k++) {
            size_t n = ROWS[ri];
            int d = DH[k][0], hid = DH[k][1];
            char label[64];
            snprintf(label, sizeof label, "swiglu n=%zu d=%d hid=%d", n, d, hid);
            size_t nw = (size_t)hid * d;
            float *x = frand(n * d, &r, 1.0), *Wg = frand(nw, &r, 1 / sqrt(d)),
                  *Wu = frand(nw, &r, 1 / sqrt(d)), *Wd = frand(nw, &r, 1 / sqrt(hid));
            double *xd = todbl(x, n * d), *Wgd = todbl(Wg, nw), *Wud = todbl(Wu, nw),
                   *Wdd = todbl(Wd, nw);
            float *y = fbuf(n * d), *yn = fbuf(n * d);
            double *yr = tu_buf(n * d);
            size_t wsz = fcpu_swiglu_bwd_ws(n, d, hid);
            cr_assert(wsz >= fcpu_swiglu_fwd_ws(n, d, hid));
            float *ws = fbuf(wsz / sizeof(float));
            cr_assert(fcpu_swiglu_fwd(y, x, Wg, Wu, Wd, n, d, hid, ws) == PHAX_OK);
            nv_swiglu_fwd(yn, x, Wg, Wu, Wd, n, d, hid);
            cr_assert(ref_swiglu_fwd(yr, xd, Wgd, Wud, Wdd, n, d, hid) == PHAX_OK);
            BOUND_FWD(label, "y", y, yn, yr, n * d);
            float *dy = frand(n * d, &r, 1.0);
            double *dyd = todbl(dy, n * d);
            grad3 dx = g3_new(n * d, &r, 1.0), dWg = g3_new(nw, &r, 1.0), dWu = g3_new(nw, &r, 1.0),
                  dWd = g3_new(nw, &r, 1.0);
            fpoison(ws, wsz / sizeof(float));
            cr_assert(fcpu_swiglu_bwd(dx.f, dWg.f, dWu.f, dWd.f, dy, x, Wg, Wu, Wd, n, d, hid,
                                      ws) == PHAX_OK);
            nv_swiglu_bwd(dx.nv, dWg.nv, dWu.nv, dWd.nv, dy, x, Wg, Wu, Wd, n, d, hid);
            cr_assert(ref_swiglu_bwd(dx.r, dWg.r, dWu.r, dWd.r, dyd, xd, Wgd, Wud, Wdd, n, d,
                                     hid) == PHAX_OK);
            cr_expect(g3_check(label, "dx", &dx));
            cr_expect(g3_check(label, "dWg", &dWg));
            cr_expect(g3_check(label, "dWu", &dWu));
            cr_expect(g3_check(label, "dWd", &dWd));
            // NULL gradients are skipped: dx alone gives the same bits.
            float *dx1 = fcopy(dx.p, n * d);
            cr_assert(fcpu_swiglu_bwd(dx1, NULL, NULL, NULL, dy, x, Wg, Wu, Wd, n, d, hid, ws) ==
                      PHAX_OK);
            cr_expect(fsame(dx1, dx.f, n * d), "%s: dx-only call differs", label);
            // The kept-activation pair (whole models): same sgemms and elementwise
            // expressions, so the same bits as the pair above, from the same priors.
            float *keep = fbuf(fcpu_swiglu_keep_len(n, hid)), *yk = fbuf(n * d);
            float *wsk = fbuf(fcpu_swiglu_bwd_kept_ws(n, d, hid) / sizeof(float));
            cr_assert(fcpu_swiglu_fwd_keep(yk, keep, x, Wg, Wu, Wd, n, d, hid) == PHAX_OK);
            cr_expect(fsame(yk, y, n * d), "%s: kept forward differs", label);
            float *dxk = fcopy(dx.p, n * d), *dWgk = fcopy(dWg.p, nw), *dWuk = fcopy(dWu.p, nw),
                  *dWdk = fcopy(dWd.p, nw);
            cr_assert(fcpu_swiglu_bwd_kept(dxk, dWgk, dWuk, dWdk, dy, x, Wg, Wu, Wd, n, d, hid,
                                           keep, wsk) == PHAX_OK);
            cr_expect(fsame(dxk, dx.f, n * d) && fsame(dWgk, dWg.f, nw) && fsame(dWuk, dWu.f, nw) &&
                          fsame(dWdk, dWd.f, nw),
                      "%s: kept backward differs", label);
            cr_expect(fintact(keep) && fintact(yk) && fintact(wsk) && fintact(dxk) &&
                      fintact(dWgk) && fintact(dWuk) && fintact(dWdk));
            ffree(keep), ffree(yk), ffree(wsk), ffree(dxk), ffree(dWgk), ffree(dWuk), ffree(dWdk);
            cr_expect(fintact(x) && fintact(Wg) && fintact(Wu) && fintact(Wd) && fintact(y) &&
                      fintact(yn) && fintact(ws) && fintact(dy) && fintact(dx1));
            g3_free(&dx), g3_free(&dWg), g3_free(&dWu), g3_free(&dWd);
            ffree(x), ffree(Wg), ffree(Wu), ffree(Wd), ffree(y), ffree(yn), ffree(ws), ffree(dy),
                ffree(dx1);
            tu_free(xd), tu_free(Wgd), tu_free(Wud), tu_free(Wdd), tu_free(yr), tu_free(dyd);
        }
    report_worst("swiglu");
}

// --- RoPE ----------------------------------------------------------------------------------------

Test(fcpu_basic, rope) {
    phax_rng r = tu_rng("fcpu_basic/rope");
    const int Ts[] = {1, 7, 33}, Hs[] = {1, 3}, DHs[] = {2, 24, 40, 64};
    const long P0[] = {0, 4097, 1000000};
    for (int ti = 0; ti < 3; ti++)
        for (int hi = 0; hi < 2; hi++)
            for (int di = 0; di < 4; di++)
                for (int pi = 0; pi < 3; pi++) {
                    int B = 2, T = Ts[ti], H = Hs[hi], dh = DHs[di];
                    long pos0 = P0[pi];
                    double base = PHAX_ROPE_BASE;
                    size_t n = (size_t)B * T * H * dh;
                    char label[96];
                    snprintf(label, sizeof label, "rope T=%d H=%d dh=%d pos0=%ld", T, H, dh, pos0);
                    float *x = frand(n, &r, 1.0), *y = fbuf(n), *yt = fbuf(n), *yn = fbuf(n);
                    float *cs = fbuf(fcpu_rope_table_len(T, dh));
                    double *xd = todbl(x, n), *yr = tu_buf(n);
                    cr_assert(fcpu_rope_table(cs, T, dh, base, pos0) == PHAX_OK);
                    cr_assert(fcpu_rope_fwd(y, x, B, T, H, dh, base, pos0, NULL) == PHAX_OK);
                    cr_assert(fcpu_rope_fwd(yt, x, B, T, H, dh, base, pos0, cs) == PHAX_OK);
                    nv_rope(yn, x, B, T, H, dh, base, pos0, 1.0f, 0);
                    cr_assert(ref_rope_fwd(yr, xd, B, T, H, dh, base, pos0) == PHAX_OK);
                    BOUND_FWD(label, "y", y, yn, yr, n);
                    cr_expect(fsame(y, yt, n), "%s: table and on-the-fly differ", label);
                    float *dy = frand(n, &r, 1.0);
                    double *dyd = todbl(dy, n);
                    grad3 dx = g3_new(n, &r, 1.0);
                    float *dxt = fcopy(dx.p, n);
                    cr_assert(fcpu_rope_bwd(dx.f, dy, B, T, H, dh, base, pos0, NULL) == PHAX_OK);
                    cr_assert(fcpu_rope_bwd(dxt, dy, B, T, H, dh, base, pos0, cs) == PHAX_OK);
                    nv_rope(dx.nv, dy, B, T, H, dh, base, pos0, -1.0f, 1);
                    cr_assert(ref_rope_bwd(dx.r, dyd, B, T, H, dh, base, pos0) == PHAX_OK);
                    cr_expect(g3_check(label, "dx", &dx));
                    cr_expect(fsame(dx.f, dxt, n), "%s: table and on-the-fly differ (bwd)", label);
                    cr_expect(fintact(x) && fintact(y) && fintact(yt) && fintact(yn) &&
                              fintact(cs) && fintact(dy) && fintact(dxt));
                    g3_free(&dx), ffree(x), ffree(y), ffree(yt), ffree(yn), ffree(cs), ffree(dy),
                        ffree(dxt);
                    tu_free(xd), tu_free(yr), tu_free(dyd);
                }
    // An odd head dim fails everywhere.
    float *x = fbuf(6), *y = fbuf(6), *cs = fbuf(6);
    cr_expect(fcpu_rope_table(cs, 2, 3, 1e4, 0) == PHAX_ERR);
    cr_expect(fcpu_rope_fwd(y, x, 1, 2, 1, 3, 1e4, 0, NULL) == PHAX_ERR);
    cr_expect(fcpu_rope_bwd(y, x, 1, 2, 1, 3, 1e4, 0, NULL) == PHAX_ERR);
    cr_expect(fintact(x) && fintact(y) && fintact(cs));
    ffree(x), ffree(y), ffree(cs);
    report_worst("rope");
}

// --- mix -----------------------------------------------------------------------------------------

Test(fcpu_basic, mix) {
    phax_rng r = tu_rng("fcpu_basic/mix");
    const int NB[] = {1, 2, 3, 5};
    const size_t NS[] = {1, 7, 129 * 257};
    for (int bi = 0; bi < 4; bi++)
        for (int k = 0; k < 3; k++) {
            int nb = NB[bi];
            size_t n = NS[k], m = (size_t)nb * n;
            char label[64];
            snprintf(label, sizeof label, "mix nb=%d n=%zu", nb, n);
            float *b = frand(m, &r, 1.0), *p = frand(nb, &r, 2.0);
            double *bd = todbl(b, m), *pd = todbl(p, nb);
            float *y = fbuf(n), *yn = fbuf(n);
            double *yr = tu_buf(n);
            fcpu_mix_fwd(y, b, p, nb, n), nv_mix_fwd(yn, b, p, nb, n),
                ref_mix_fwd(yr, bd, pd, nb, n);
            // magnitudes: m_e = Σ_i w_i b_ie → Σ_i w_i |b_ie|
            double w[nb], S = 0;
            ref_mix_weights(w, pd, nb);
            for (int i = 0; i < nb; i++) S += ref_softplus(pd[i]);
            double *mmag = dzeros(n);
            for (int i = 0; i < nb; i++)
                for (size_t e = 0; e < n; e++) mmag[e] += w[i] * fabs(bd[(size_t)i * n + e]);
            cr_expect(bound_m(label, "m", y, yn, yr, NULL, mmag, n, C_FWD));
            free(mmag);
            float *dm = frand(n, &r, 1.0);
            double *dmd = todbl(dm, n);
            grad3 db = g3_new(m, &r, 1.0), dp = g3_new(nb, &r, 1.0);
            fcpu_mix_bwd(db.f, dp.f, dm, b, p, nb, n);
            nv_mix_bwd(db.nv, dp.nv, dm, b, p, nb, n);
            ref_mix_bwd(db.r, dp.r, dmd, bd, pd, nb, n);
            // dp_i = σ(p_i)(dw_i − Σ_j w_j dw_j)/S with dw_i = ⟨dm, b_i⟩:
            // magnitude σ(p_i)(A_i + Σ_j w_j A_j)/S, A_i = Σ_e |dm_e b_ie|.
            double A[nb], wA = 0;
            for (int i = 0; i < nb; i++) {
                A[i] = 0;
                for (size_t e = 0; e < n; e++) A[i] += fabs(dmd[e] * bd[(size_t)i * n + e]);
                wA += w[i] * A[i];
            }
            dp.mag = dzeros(nb);
            for (int i = 0; i < nb; i++) dp.mag[i] = ref_sigmoid(pd[i]) * (A[i] + wA) / S;
            cr_expect(g3_check(label, "db", &db));
            cr_expect(g3_check(label, "dp", &dp));
            float *db1 = fcopy(db.p, m), *dp1 = fcopy(dp.p, nb);
            fcpu_mix_bwd(db1, NULL, dm, b, p, nb, n);
            fcpu_mix_bwd(NULL, dp1, dm, b, p, nb, n);
            cr_expect(fsame(db1, db.f, m) && fsame(dp1, dp.f, nb), "%s: single calls differ",
                      label);
            cr_expect(fintact(b) && fintact(p) && fintact(y) && fintact(yn) && fintact(dm) &&
                      fintact(db1) && fintact(dp1));
            g3_free(&db), g3_free(&dp);
            ffree(b), ffree(p), ffree(y), ffree(yn), ffree(dm), ffree(db1), ffree(dp1);
            tu_free(bd), tu_free(pd), tu_free(yr), tu_free(dmd);
        }
    report_worst("mix");
}

// --- cross-entropy
// ----------------------------------------------------------------------------------------

static int32_t *ce_targets(size_t n, int V, phax_rng *r) {
    int32_t *t = malloc(n * sizeof *t);
    for (size_t i = 0; i < n; i++)
        t[i] = phax_rng_uniform(r) < 0.2 ? -1 : (int32_t)phax_rng_below(r, V);
    t[0] = (int32_t)phax_rng_below(r, V);  // at least one counted row
    if (n > 2) t[n - 1] = -1;              // at least one ignored row
    return t;
}

Test(fcpu_basic, cross_entropy) {
    phax_rng r = tu_rng("fcpu_basic/cross_entropy");
    const int Vs[] = {11, 1000};
    const double SC[] = {1.0, 10.0};  // logit scale: soft and peaked softmax
    for (int ri = 0; ri < 3; ri++)
        for (int vi = 0; vi < 2; vi++)
            for (int si = 0; si < 2; si++) {
                size_t n = ROWS[ri];
                int V = Vs[vi];
                size_t nv = n * V;
                char label[80];
                snprintf(label, sizeof label, "ce n=%zu V=%d scale=%g", n, V, SC[si]);
                int32_t *t = ce_targets(n, V, &r);
                float *L = frand(nv, &r, SC[si]);
                double *Ld = todbl(L, nv);
                float *loss = fbuf(1), lossn = nv_ce_fwd(L, t, n, V);
                double lossr;
                cr_assert(fcpu_cross_entropy_fwd(loss, L, t, n, V) == PHAX_OK);
                cr_assert(ref_cross_entropy_fwd(&lossr, Ld, t, n, V) == PHAX_OK);
                double lmag = loss_mag(Ld, t, n, V);
                cr_expect(bound_m(label, "loss", loss, &lossn, &lossr, NULL, &lmag, 1, C_FWD));
                float dloss = (float)(0.5 + phax_rng_uniform(&r));
                grad3 dl = g3_new(nv, &r, 1.0 / V);
                cr_assert(fcpu_cross_entropy_bwd(dl.f, dloss, L, t, n, V) == PHAX_OK);
                nv_ce_bwd(dl.nv, dloss, L, t, n, V);
                cr_assert(ref_cross_entropy_bwd(dl.r, dloss, Ld, t, n, V) == PHAX_OK);
                cr_expect(g3_check(label, "dlogit", &dl));
                // The fused call = the two separate calls, bit for bit.
                float *loss2 = fbuf(1), *dl2 = fcopy(dl.p, nv);
                cr_assert(fcpu_cross_entropy_fwd_bwd(loss2, dl2, dloss, L, t, n, V) == PHAX_OK);
                cr_expect(fsame(loss2, loss, 1) && fsame(dl2, dl.f, nv), "%s: fused differs",
                          label);
                cr_expect(fintact(L) && fintact(loss) && fintact(loss2) && fintact(dl2));
                g3_free(&dl), ffree(L), ffree(loss), ffree(loss2), ffree(dl2), tu_free(Ld), free(t);
            }
    report_worst("cross_entropy");
}

Test(fcpu_basic, cross_entropy_bad_targets) {
    tu_rng("fcpu_basic/cross_entropy_bad_targets");
    int V = 11;
    float *L = fbuf(3 * V), *dl = fbuf(3 * V), *loss = fbuf(1), *x = fbuf(3 * 4), *W = fbuf(V * 4),
          *dx = fbuf(3 * 4), *dW = fbuf(V * 4);
    for (int i = 0; i < 3 * V; i++) L[i] = 0.1f * i;
    for (int i = 0; i < 12; i++) x[i] = 0.1f * i;
    for (int i = 0; i < 4 * V; i++) W[i] = 0.01f * i;
    float *ws = fbuf(fcpu_linear_cross_entropy_ws(3, 4, V) / 4);
    const int32_t bad[][3] = {{0, 11, 1}, {-2, 0, 0}, {-1, -1, -1}};
    for (int k = 0; k < 3; k++) {
        cr_expect(fcpu_cross_entropy_fwd(loss, L, bad[k], 3, V) == PHAX_ERR, "fwd case %d", k);
        cr_expect(fcpu_cross_entropy_bwd(dl, 1.0f, L, bad[k], 3, V) == PHAX_ERR, "bwd case %d", k);
        cr_expect(fcpu_cross_entropy_fwd_bwd(loss, dl, 1.0f, L, bad[k], 3, V) == PHAX_ERR);
        cr_expect(fcpu_linear_cross_entropy(loss, dx, dW, 1.0f, x, W, bad[k], 3, 4, V, ws) ==
                  PHAX_ERR);
        cr_expect(strstr(phax_error(), k < 2 ? "outside" : "ignored") != NULL, "message: %s",
                  phax_error());
    }
    // Nothing written on failure.
    cr_expect(isnan(loss[0]));
    for (int i = 0; i < 3 * V; i++) cr_expect(isnan(dl[i]));
    for (int i = 0; i < 12; i++) cr_expect(isnan(dx[i]));
    for (int i = 0; i < 4 * V; i++) cr_expect(isnan(dW[i]));
    cr_expect(fintact(L) && fintact(dl) && fintact(loss) && fintact(x) && fintact(W) &&
              fintact(dx) && fintact(dW) && fintact(ws));
    ffree(L), ffree(dl), ffree(loss), ffree(x), ffree(W), ffree(dx), ffree(dW), ffree(ws);
}

// Fused projection + loss against ref composed from its parts (linear → CE → linear bwd).
Test(fcpu_basic, linear_cross_entropy) {
    phax_rng r = tu_rng("fcpu_basic/linear_cross_entropy");
    const size_t Ns[] = {1, 7, 129, 0};  // 0: a tile and 87 rows (crosses a tile)
    const int Ds[] = {24, 64}, Vs[] = {11, 1000, 5000};  // 1024, 1024 and 838 rows per tile
    for (int ni = 0; ni < 4; ni++)
        for (int di = 0; di < 2; di++)
            for (int vi = 0; vi < 3; vi++) {
                size_t n = Ns[ni] ? Ns[ni] : fcpu_lce_tile_rows(Vs[vi]) + 87;
                int d = Ds[di], V = Vs[vi];
                size_t nw = (size_t)V * d, nv = n * V;
                char label[80];
                snprintf(label, sizeof label, "lin_ce n=%zu d=%d V=%d", n, d, V);
                int32_t *t = ce_targets(n, V, &r);
                float *x = frand(n * d, &r, 1.0), *W = frand(nw, &r, 3.0 / sqrt(d));
                double *xd = todbl(x, n * d), *Wd = todbl(W, nw);
                float dloss = 0.75f;
                grad3 dx = g3_new(n * d, &r, 0.1), dW = g3_new(nw, &r, 0.1);
                float *ws = fbuf(fcpu_linear_cross_entropy_ws(n, d, V) / sizeof(float));
                float *loss = fbuf(1);
                cr_assert(fcpu_linear_cross_entropy(loss, dx.f, dW.f, dloss, x, W, t, n, d, V,
                                                    ws) == PHAX_OK);
                // naive32
                float *Ln = malloc(nv * 4), *dLn = calloc(nv, 4);
                nv_linear_fwd(Ln, x, W, NULL, n, d, V);
                float lossn = nv_ce_fwd(Ln, t, n, V);
                nv_ce_bwd(dLn, dloss, Ln, t, n, V);
                nv_linear_bwd(dx.nv, dW.nv, NULL, dLn, x, W, n, d, V);
                // ref
                double *Lr = tu_buf(nv), *dLr = tu_buf(nv), lossr;
                ref_linear_fwd(Lr, xd, Wd, NULL, n, d, V);
                cr_assert(ref_cross_entropy_fwd(&lossr, Lr, t, n, V) == PHAX_OK);
                tu_fill(dLr, nv, 0.0);
                cr_assert(ref_cross_entropy_bwd(dLr, dloss, Lr, t, n, V) == PHAX_OK);
                ref_linear_bwd(dx.r, dW.r, NULL, dLr, xd, Wd, n, d, V);
                double lmag = loss_mag(Lr, t, n, V);
                cr_expect(bound_m(label, "loss", loss, &lossn, &lossr, NULL, &lmag, 1, C_FWD));
                // dx = G W, dW = Gᵀ x: magnitudes from |G|, |W|, |x| (the logits'
                // own rounding reaches G as ~|G|·|logit| relative, covered by C·naive32).
                double *aG = dabs(dLr, nv), *aW = dabs(Wd, nw), *ax = dabs(xd, n * d);
                dx.mag = dzeros(dx.n), dW.mag = dzeros(dW.n);
                ref_linear_bwd(dx.mag, dW.mag, NULL, aG, ax, aW, n, d, V);
                free(aG), free(aW), free(ax);
                cr_expect(g3_check(label, "dx", &dx));
                cr_expect(g3_check(label, "dW", &dW));
                // Loss only (no gradients) gives the same loss.
                float *loss2 = fbuf(1);
                cr_assert(fcpu_linear_cross_entropy(loss2, NULL, NULL, dloss, x, W, t, n, d, V,
                                                    ws) == PHAX_OK);
                cr_expect(fsame(loss, loss2, 1), "%s: loss-only call differs", label);
                cr_expect(fintact(x) && fintact(W) && fintact(ws) && fintact(loss) &&
                          fintact(loss2));
                g3_free(&dx), g3_free(&dW);
                ffree(x), ffree(W), ffree(ws), ffree(loss), ffree(loss2), free(Ln), free(dLn),
                    free(t);
                tu_free(xd), tu_free(Wd), tu_free(Lr), tu_free(dLr);
            }
    report_worst("linear_cross_entropy");
}

// --- AdamW ---------------------------------------------------------------------------------------

// Three steps on three tensors (sizes 1, 257, 1000; decay on, off, on) with
// fresh gradients each step, fast and naive32 in float32, ref in float64
// starting from the same float values. Compared: m, v (absolute), and the
// displacement p − p0 (the prior is p0: p itself moves by only ~3·lr).
//
// Besides the naive32 bound, a derived elementwise float32 bound (u = 2^-24).
// fast computes each step in double from its float state and rounds p, m, v
// once, so the errors obey e_k ≤ β e_{k−1} + u|x_k|:
//   |m_f − m_r| ≤ u Σ_k |m_k|,   |v_f − v_r| ≤ u Σ_k |v_k|    (k = steps so far).
// For p, add the error of the update lr·m̂/(√v̂ + eps) caused by those of m and
// v: with β1 = 0.9, β2 = 0.95 and k ≤ 3, Cauchy–Schwarz gives |m_j| ≤ 0.76 √v_k
// and |m̂|/√v̂ ≤ 1.6, hence ≤ 8u·lr per step, 24u·lr over three; doubled:
//   |p_f − p_r| ≤ u (Σ_k |p_k| + 48 lr).
// (Double rounding of the coefficients is ~1e-16, covered by a 1.01 factor.)
static bool adamw_elem(const char *label, const char *what, const float *f, const double *r,
                       const double *sum, double extra, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double tol = 1.01 * 0x1p-24 * (sum[i] + extra) + 1e-300;
        double q = fabs((double)f[i] - r[i]) / tol;
        if (!(q <= worst)) worst = q;
    }
    printf("[%s] %-6s elementwise worst err/derived tol %.3f\n", label, what, worst);
    return worst <= 1.0;
}

static void adamw_case(double clip, double gscale, int clipped, phax_rng *r) {
    char label[64];
    snprintf(label, sizeof label, "adamw clip=%g gscale=%g", clip, gscale);
    const size_t NS[] = {1, 257, 1000};
    const int DEC[] = {1, 0, 1};
    ref_adamw_cfg c = ref_adamw_cfg_default();
    c.clip = clip;
    c.lr = 1e-2;  // large enough that the displacement is not lost in p's rounding
    float *p0[3], *pf[3], *pn[3], *mf[3], *vf[3], *mn[3], *vn[3];
    double *pr[3], *mr[3], *vr[3];
    double *sp[3], *sm[3], *sv[3];  // Σ_k |p_k|, |m_k|, |v_k| of ref
    fcpu_adamw_param fp[3], np[3];
    ref_adamw_param rp[3];
    for (int j = 0; j < 3; j++) {
        size_t n = NS[j];
        p0[j] = frand(n, r, 1.0);
        pf[j] = fcopy(p0[j], n), pn[j] = fcopy(p0[j], n), pr[j] = todbl(p0[j], n);
        mf[j] = fbuf(n), vf[j] = fbuf(n), mn[j] = fbuf(n), vn[j] = fbuf(n);
        mr[j] = tu_buf(n), vr[j] = tu_buf(n);
        sp[j] = calloc(n, 8), sm[j] = calloc(n, 8), sv[j] = calloc(n, 8);
        for (size_t i = 0; i < n; i++) mf[j][i] = vf[j][i] = mn[j][i] = vn[j][i] = 0.0f;
        tu_fill(mr[j], n, 0.0), tu_fill(vr[j], n, 0.0);
        fp[j] = (fcpu_adamw_param){pf[j], NULL, mf[j], vf[j], n, DEC[j]};
        np[j] = (fcpu_adamw_param){pn[j], NULL, mn[j], vn[j], n, DEC[j]};
        rp[j] = (ref_adamw_param){pr[j], NULL, mr[j], vr[j], n, DEC[j]};
    }
    for (long step = 1; step <= 3; step++) {
        float *g[3];
        double *gd[3];
        for (int j = 0; j < 3; j++) {
            g[j] = frand(NS[j], r, gscale), gd[j] = todbl(g[j], NS[j]);
            fp[j].g = g[j], np[j].g = g[j], rp[j].g = gd[j];
        }
        double gnf, gnr;
        float gnn;
        cr_assert(fcpu_adamw_step(fp, 3, &c, step, &gnf) == PHAX_OK);
        nv_adamw(np, 3, &c, step, &gnn);
        cr_assert(ref_adamw_step(rp, 3, &c, step, &gnr) == PHAX_OK);
        cr_assert((clip > 0 && gnr > clip) == clipped, "%s: the clip should be %s", label,
                  clipped ? "active" : "inactive");
        for (int j = 0; j < 3; j++)
            for (size_t i = 0; i < NS[j]; i++)
                sp[j][i] += fabs(pr[j][i]), sm[j][i] += fabs(mr[j][i]), sv[j][i] += fabs(vr[j][i]);
        float gnff = (float)gnf;
        BOUND_FWD(label, "gnorm", &gnff, &gnn, &gnr, 1);
        for (int j = 0; j < 3; j++) ffree(g[j]), tu_free(gd[j]);
    }
    for (int j = 0; j < 3; j++) {
        char what[16];
        snprintf(what, sizeof what, "p%d", j);
        cr_expect(bound(label, what, pf[j], pn[j], pr[j], p0[j], NS[j], C_BWD));
        snprintf(what, sizeof what, "m%d", j);
        cr_expect(bound(label, what, mf[j], mn[j], mr[j], NULL, NS[j], C_BWD));
        snprintf(what, sizeof what, "v%d", j);
        cr_expect(bound(label, what, vf[j], vn[j], vr[j], NULL, NS[j], C_BWD));
        cr_expect(adamw_elem(label, "p", pf[j], pr[j], sp[j], 48 * c.lr, NS[j]), "p%d", j);
        cr_expect(adamw_elem(label, "m", mf[j], mr[j], sm[j], 0, NS[j]), "m%d", j);
        cr_expect(adamw_elem(label, "v", vf[j], vr[j], sv[j], 0, NS[j]), "v%d", j);
        free(sp[j]), free(sm[j]), free(sv[j]);
        cr_expect(fintact(pf[j]) && fintact(mf[j]) && fintact(vf[j]) && fintact(p0[j]));
        ffree(p0[j]), ffree(pf[j]), ffree(pn[j]), ffree(mf[j]), ffree(vf[j]), ffree(mn[j]),
            ffree(vn[j]);
        tu_free(pr[j]), tu_free(mr[j]), tu_free(vr[j]);
    }
}

Test(fcpu_basic, adamw) {
    phax_rng r = tu_rng("fcpu_basic/adamw");
    adamw_case(0.0, 1.0, 0, &r);   // no clipping
    adamw_case(1.0, 10.0, 1, &r);  // ‖g‖ ~ 350 ≫ 1: clipped
    adamw_case(1e6, 1.0, 0, &r);   // clip set but inactive
    report_worst("adamw");
}

Test(fcpu_basic, adamw_bad) {
    tu_rng("fcpu_basic/adamw_bad");
    float p[3] = {1, 2, 3}, g[3] = {0.1f, NAN, 0.3f}, m[3] = {0}, v[3] = {0};
    fcpu_adamw_param ps = {p, g, m, v, 3, 1};
    ref_adamw_cfg c = ref_adamw_cfg_default();
    double gn;
    cr_expect(fcpu_adamw_step(&ps, 1, &c, 1, &gn) == PHAX_ERR, "NaN gradient accepted");
    cr_expect(p[0] == 1 && p[1] == 2 && p[2] == 3 && m[0] == 0 && v[2] == 0, "state changed");
    g[1] = 0.2f;
    cr_expect(fcpu_adamw_step(&ps, 1, &c, 0, &gn) == PHAX_ERR, "step 0 accepted");
    c.beta1 = 1.0;
    cr_expect(fcpu_adamw_step(&ps, 1, &c, 1, &gn) == PHAX_ERR, "beta1 = 1 accepted");
    c = ref_adamw_cfg_default(), c.eps = 0;
    cr_expect(fcpu_adamw_step(&ps, 1, &c, 1, &gn) == PHAX_ERR, "eps = 0 accepted");
    cr_expect(p[0] == 1 && p[1] == 2 && p[2] == 3, "state changed");
}

// --- determinism ---------------------------------------------------------------------------------
// The same inputs give the same bits on repeat; the norms' and embedding's
// gradients do not even depend on the thread count (fixed row chunks / column
// ownership), which is checked with 1 vs the default number of threads.

Test(fcpu_basic, deterministic) {
    phax_rng r = tu_rng("fcpu_basic/deterministic");
    size_t n = 1000;
    int d = 256, V = 300;
    float *x = frand(n * d, &r, 1.0), *g = frand(d, &r, 1.0), *dy = frand(n * d, &r, 1.0);
    float *W = frand((size_t)V * d, &r, 0.1);
    int32_t *t = ce_targets(n, V, &r);
    float *ws = fbuf(fcpu_layernorm_bwd_ws(n, d) / 4 + fcpu_linear_cross_entropy_ws(n, d, V) / 4);
    float *out[2][6];
    int nthreads = omp_get_max_threads();
    for (int rep = 0; rep < 2; rep++) {
        if (rep == 1) omp_set_num_threads(1);
        float **o = out[rep];
        o[0] = fbuf(n * d), o[1] = fbuf(d), o[2] = fbuf(d), o[3] = fbuf((size_t)V * d),
        o[4] = fbuf(n * d), o[5] = fbuf(1);
        memset(o[0], 0, n * d * 4), memset(o[1], 0, d * 4), memset(o[2], 0, d * 4);
        memset(o[3], 0, (size_t)V * d * 4), memset(o[4], 0, n * d * 4);
        fcpu_layernorm_bwd(o[0], o[1], o[2], dy, x, g, n, d, PHAX_LAYERNORM_EPS, ws);
        int32_t *tok = malloc(n * 4);
        for (size_t i = 0; i < n; i++) tok[i] = (int32_t)(i * 7 % V);
        fcpu_embedding_bwd(o[3], dy, tok, n, d);
        free(tok);
        omp_set_num_threads(nthreads);
        fcpu_linear_cross_entropy(o[5], o[4], NULL, 1.0f, x, W, t, n, d, V, ws);
    }
    omp_set_num_threads(nthreads);
    const size_t len[6] = {n * d, (size_t)d, (size_t)d, (size_t)V * d, n * d, 1};
    const char *what[6] = {"layernorm dx", "layernorm dg", "layernorm db",
                           "embedding dE", "lin_ce dx",    "lin_ce loss"};
    for (int k = 0; k < 6; k++) {
        cr_expect(fsame(out[0][k], out[1][k], len[k]), "%s differs between runs/thread counts",
                  what[k]);
        cr_expect(fintact(out[0][k]) && fintact(out[1][k]));
        ffree(out[0][k]), ffree(out[1][k]);
    }
    ffree(x), ffree(g), ffree(dy), ffree(W), ffree(ws), free(t);
}
