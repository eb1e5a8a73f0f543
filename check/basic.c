// phax check: the small ops (linear, the norms, GELU and SiLU, the SwiGLU FFN, softmax
// cross-entropy) as a straightforward implementation at precision `pr` computes them:
// plain loops in the formula's order, every input and every operation rounded. Not ref,
// not fast/. Outputs are overwritten. docs/spec.md has the formulas.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "phax/check.h"
#include "round.h"

#define R(x) PHAX_CHECK_R(pr, (x))
#define RM(x) PHAX_CHECK_RM(pr, (x))

// Σ_i a[i·sa]·b[i·sb], left to right, rounded throughout (dot-product operands as a matmul's).
static double sdot(const phax_precision *pr, const double *a, size_t sa, const double *b, size_t sb, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s = R(s + R(RM(R(a[i * sa])) * RM(R(b[i * sb]))));
    return s;
}

// C (m, n) = A·B with A element (i, l) at A[i·ai + l·al] and B (l, j) at B[l·bl + j·bj]: a naive
// matmul with the strides of a transpose where needed.
static void mm(const phax_precision *pr, double *C, const double *A, size_t ai, size_t al, const double *Bm, size_t bl,
               size_t bj, size_t m, size_t n, size_t k) {
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) C[i * n + j] = sdot(pr, A + i * ai, al, Bm + j * bj, bl, k);
}

int phax_naive_linear(const phax_precision *pr, double *y, double *dx, double *dW, double *db, const double *gy,
                      const double *x, const double *W, const double *b, size_t n, int in, int out) {
    mm(pr, y, x, (size_t)in, 1, W, 1, (size_t)in, n, (size_t)out, (size_t)in);  // x Wᵀ
    if (b)
        for (size_t r = 0; r < n; r++)
            for (int o = 0; o < out; o++) y[r * out + o] = R(y[r * out + o] + R(b[o]));
    mm(pr, dx, gy, (size_t)out, 1, W, (size_t)in, 1, n, (size_t)in, (size_t)out);       // gy W
    mm(pr, dW, gy, 1, (size_t)out, x, (size_t)in, 1, (size_t)out, (size_t)in, n);       // gyᵀ x
    if (db)
        for (int o = 0; o < out; o++) {
            double s = 0;
            for (size_t r = 0; r < n; r++) s = R(s + R(gy[r * out + o]));
            db[o] = s;
        }
    return PHAX_OK;
}

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

static double sigm(double z) { return z >= 0 ? 1 / (1 + exp(-z)) : exp(z) / (1 + exp(z)); }

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

int phax_naive_swiglu(const phax_precision *pr, double *y, double *dx, double *dWg, double *dWu, double *dWd,
                      const double *gy, const double *x, const double *Wg, const double *Wu, const double *Wd,
                      size_t n, int d, int hid) {
    size_t nh = n * (size_t)hid;
    double *a = calloc(nh, sizeof *a), *u = calloc(nh, sizeof *u), *z = calloc(nh, sizeof *z),
           *dz = calloc(nh, sizeof *dz);
    if (!a || !u || !z || !dz) {
        free(a), free(u), free(z), free(dz);
        return phax_fail("check: out of memory (swiglu baseline)");
    }
    mm(pr, a, x, (size_t)d, 1, Wg, 1, (size_t)d, n, (size_t)hid, (size_t)d);  // x Wgᵀ
    mm(pr, u, x, (size_t)d, 1, Wu, 1, (size_t)d, n, (size_t)hid, (size_t)d);  // x Wuᵀ
    for (size_t i = 0; i < nh; i++) {
        double s = R(sigm(a[i]));
        z[i] = R(R(a[i] * s) * u[i]);
    }
    mm(pr, y, z, (size_t)hid, 1, Wd, 1, (size_t)hid, n, (size_t)d, (size_t)hid);     // z Wdᵀ
    mm(pr, dz, gy, (size_t)d, 1, Wd, (size_t)hid, 1, n, (size_t)hid, (size_t)d);     // gy Wd
    mm(pr, dWd, gy, 1, (size_t)d, z, (size_t)hid, 1, (size_t)d, (size_t)hid, n);     // gyᵀ z
    for (size_t i = 0; i < nh; i++) {  // da into a, du into u
        double s = R(sigm(a[i])), sa = R(a[i] * s), dsa = R(s * R(1 + R(a[i] * R(1 - s))));
        double da = R(R(dz[i] * u[i]) * dsa);
        u[i] = R(dz[i] * sa);
        a[i] = da;
    }
    // dx = da Wg + du Wu (two matmuls, then a sum); dWg = daᵀ x; dWu = duᵀ x.
    free(z);
    z = malloc(n * (size_t)d * sizeof *z);
    if (!z) {
        free(a), free(u), free(dz);
        return phax_fail("check: out of memory (swiglu baseline)");
    }
    mm(pr, dx, a, (size_t)hid, 1, Wg, (size_t)d, 1, n, (size_t)d, (size_t)hid);
    mm(pr, z, u, (size_t)hid, 1, Wu, (size_t)d, 1, n, (size_t)d, (size_t)hid);
    for (size_t i = 0; i < n * (size_t)d; i++) dx[i] = R(dx[i] + z[i]);
    mm(pr, dWg, a, 1, (size_t)hid, x, (size_t)d, 1, (size_t)hid, (size_t)d, n);
    mm(pr, dWu, u, 1, (size_t)hid, x, (size_t)d, 1, (size_t)hid, (size_t)d, n);
    free(a), free(u), free(z), free(dz);
    return PHAX_OK;
}

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

int phax_naive_embedding(const phax_precision *pr, double *y, double *dE, const double *gy, const double *E,
                         const int32_t *tok, size_t n, int V, int d) {
    memset(dE, 0, (size_t)V * d * sizeof *dE);
    for (size_t r = 0; r < n; r++)
        for (int j = 0; j < d; j++) {
            y[r * d + j] = R(E[(size_t)tok[r] * d + j]);
            dE[(size_t)tok[r] * d + j] = R(dE[(size_t)tok[r] * d + j] + R(gy[r * d + j]));
        }
    return PHAX_OK;
}

static double softplus(double z) { return z > 0 ? z + log1p(exp(-z)) : log1p(exp(z)); }

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
