// phax check: attention as a straightforward implementation at precision `pr` computes it.
// Plain loops, one query row at a time; every input and every operation's result is
// rounded (R) — the baseline of `phax check attention` (docs/oracle.md). Not ref, not fast/.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "phax/check.h"
#include "round.h"

#define R(x) PHAX_CHECK_R(pr, (x))
#define RM(x) PHAX_CHECK_RM(pr, (x))

// a·b summed left to right over n, each product and each partial sum rounded; the
// operands of a product rounded to the dot-product input format first (tf32).
static double dot(const phax_precision *pr, const double *a, const double *b, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s = R(s + R(RM(a[i]) * RM(b[i])));
    return s;
}

// cos and sin of the RoPE angle of pair i at position pos, as a float table would hold them.
static void rope_cs(const phax_precision *pr, long pos, int i, int dh, double base, double *c, double *s) {
    double theta = R(pow(base, R(-2.0 * i / dh)));
    double ang = R(R((double)pos) * theta);
    *c = R(cos(ang));
    *s = R(sin(ang));
}

// Rows x (n rows of dh, position of row r: pos0 + (r / H) % T) rotated in place by sign·angle.
static void rope_rows(const phax_precision *pr, double *x, size_t n, int T, int H, int dh, double base, long pos0,
                      double sign) {
    int half = dh / 2;
    for (size_t r = 0; r < n; r++) {
        long pos = pos0 + (long)((r / (size_t)H) % (size_t)T);
        double *xr = x + r * dh;
        for (int i = 0; i < half; i++) {
            double c, s;
            rope_cs(pr, pos, i, dh, base, &c, &s);
            s *= sign;
            double x1 = xr[i], x2 = xr[i + half];
            xr[i] = R(R(x1 * c) - R(x2 * s));
            xr[i + half] = R(R(x2 * c) + R(x1 * s));
        }
    }
}

// Rows normalised in place: x/max(‖x‖, eps); nrm gets the clamped norm.
static void normalise_rows(const phax_precision *pr, double *x, double *nrm, size_t n, int dh) {
    for (size_t r = 0; r < n; r++) {
        double *xr = x + r * dh, ss = 0;
        for (int i = 0; i < dh; i++) ss = R(ss + R(xr[i] * xr[i]));
        double m = R(sqrt(ss));
        if (!(m > PHAX_COSINE_NORM_EPS)) m = PHAX_COSINE_NORM_EPS;
        nrm[r] = m;
        for (int i = 0; i < dh; i++) xr[i] = R(xr[i] / m);
    }
}

// dx of x̂ = x/m given dx̂ (in place): (dx̂ − x̂ (x̂·dx̂))/m; with the clamp active, dx̂/m.
static void normalise_rows_bwd(const phax_precision *pr, double *g, const double *xh, const double *nrm, size_t n,
                               int dh) {
    for (size_t r = 0; r < n; r++) {
        double *gr = g + r * dh, m = nrm[r];
        const double *xr = xh + r * dh;
        double a = m > PHAX_COSINE_NORM_EPS ? dot(pr, xr, gr, dh) : 0;
        for (int i = 0; i < dh; i++) gr[i] = R(R(gr[i] - R(xr[i] * a)) / m);
    }
}

int phax_naive_attention(const phax_precision *pr, double *y, double *dq, double *dk, double *dv, double *dl,
                         const double *gy, const double *q, const double *k, const double *v, const double *l,
                         int B, int T, const phax_attn_cfg *c) {
    return phax_naive_attention_alg(pr, y, dq, dk, dv, dl, gy, q, k, v, l, B, T, c, 0);
}

int phax_naive_attention_alg(const phax_precision *pr, double *y, double *dq, double *dk, double *dv, double *dl,
                             const double *gy, const double *q, const double *k, const double *v, const double *l,
                             int B, int T, const phax_attn_cfg *c, int flash_D) {
    int Hq = c->Hq, Hkv = c->Hkv, dh = c->dh, dvh = c->dv, G = Hq / Hkv, cos_mode = c->score == PHAX_SCORE_COSINE;
    size_t nq = (size_t)B * T * Hq, nk = (size_t)B * T * Hkv;
    double *qs = malloc(nq * dh * sizeof *qs), *ks = malloc(nk * dh * sizeof *ks);
    double *vr = malloc(nk * dvh * sizeof *vr), *gr = malloc(nq * dvh * sizeof *gr);
    double *qn = malloc(nq * sizeof *qn), *kn = malloc(nk * sizeof *kn);
    double *p = malloc((size_t)T * sizeof *p), *dp = malloc((size_t)T * sizeof *dp);
    if (!qs || !ks || !vr || !gr || !qn || !kn || !p || !dp) {
        free(qs), free(ks), free(vr), free(gr), free(qn), free(kn), free(p), free(dp);
        return phax_fail("check: out of memory (attention baseline)");
    }
    // Inputs in the precision; q, k rotated, then normalised (cosine).
    for (size_t i = 0; i < nq * dh; i++) qs[i] = R(q[i]);
    for (size_t i = 0; i < nk * dh; i++) ks[i] = R(k[i]);
    for (size_t i = 0; i < nk * dvh; i++) vr[i] = R(v[i]);
    for (size_t i = 0; i < nq * dvh; i++) gr[i] = R(gy[i]);
    if (c->rope) {
        rope_rows(pr, qs, nq, T, Hq, dh, c->rope_base, c->pos0, 1.0);
        rope_rows(pr, ks, nk, T, Hkv, dh, c->rope_base, c->pos0, 1.0);
    }
    if (cos_mode) {
        normalise_rows(pr, qs, qn, nq, dh);
        normalise_rows(pr, ks, kn, nk, dh);
    }
    memset(dq, 0, nq * dh * sizeof *dq);
    memset(dk, 0, nk * dh * sizeof *dk);
    memset(dv, 0, nk * dvh * sizeof *dv);
    if (dl) memset(dl, 0, (size_t)Hq * sizeof *dl);
    for (int h = 0; h < Hq; h++) {
        int j = h / G;
        double lh = cos_mode ? R(l[h]) : 0;
        double scale = cos_mode ? R(exp(lh < PHAX_COSINE_MAX_LOGSCALE ? lh : PHAX_COSINE_MAX_LOGSCALE))
                                : R(1.0 / R(sqrt((double)dh)));
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                int s0 = c->window > 0 && t - c->window + 1 > 0 ? t - c->window + 1 : 0;
                size_t qi = ((size_t)b * T + t) * Hq + h;
                const double *qv = qs + qi * dh;
                double mx = -INFINITY, z = 0;
                for (int s = s0; s <= t; s++) {
                    p[s - s0] = R(scale * dot(pr, qv, ks + (((size_t)b * T + s) * Hkv + j) * dh, dh));
                    if (p[s - s0] > mx) mx = p[s - s0];
                }
                for (int s = s0; s <= t; s++) z = R(z + (p[s - s0] = R(exp(R(p[s - s0] - mx)))));
                for (int s = s0; s <= t; s++) p[s - s0] = R(p[s - s0] / z);
                double *yo = y + qi * dvh;
                const double *g = gr + qi * dvh;
                for (int i = 0; i < dvh; i++) yo[i] = 0;
                for (int s = s0; s <= t; s++) {
                    const double *vs = vr + (((size_t)b * T + s) * Hkv + j) * dvh;
                    for (int i = 0; i < dvh; i++) yo[i] = R(yo[i] + R(RM(p[s - s0]) * RM(vs[i])));
                }
                // Backward of the row: dp = g·v, ds = p (dp − D), then through the scale. D = Σ p dp
                // (the softmax's Jacobian), or (flash_D) FlashAttention's rowsum(y ⊙ g): equal in
                // exact arithmetic, but only the first cancels dp's rounding (at T 1, ds = 0 exactly),
                // so the two err differently where dp's operands are rounded more than y·g's (tf32),
                // or where D is summed in another order than dp: a flash backward reduces y ⊙ g on
                // its own (the forward's output, a row reduction) and g·v in a product, and at T 1
                // (y = v) that order decides whether ds is 0 or u-sized. Summed in dp's own order
                // it lands on dp exactly whenever y = v, so this baseline sums D from the last
                // element (a model sweep's correct float32 flash backward had grad.wq 4e-7 off a
                // truth of 0 where both baselines were exactly 0: tests/test_check_model.c,
                // model_flash_D_other_order). Another order can still land on dp exactly: a
                // row that sees one key (T 1, window 1) then has ds = 0 in every rounding of this
                // baseline too, while a sound flash backward's D is a few ulp off dp (its own
                // order, FMA). There the baseline takes D one ulp of the precision away from dp,
                // the smallest difference such an algorithm shows (model_flash_D_one_ulp).
                double D = 0;
                for (int i = dvh - 1; flash_D && i >= 0; i--) D = R(D + R(yo[i] * g[i]));
                for (int s = s0; s <= t; s++) {
                    size_t kvi = ((size_t)b * T + s) * Hkv + j;
                    dp[s - s0] = dot(pr, g, vr + kvi * dvh, dvh);
                    if (!flash_D) D = R(D + R(p[s - s0] * dp[s - s0]));
                    if (flash_D && s0 == t && D == dp[0] && D != 0) {
                        int e;
                        frexp(D, &e);  // D = m·2^e, m in [0.5, 1): the spacing there is 2^(e − p)
                        D = R(D + copysign(ldexp(1.0, (e > pr->emin ? e : pr->emin) - pr->p), D));
                    }
                    double *dvs = dv + kvi * dvh;
                    for (int i = 0; i < dvh; i++) dvs[i] = R(dvs[i] + R(RM(p[s - s0]) * RM(g[i])));
                }
                double *dqv = dq + qi * dh;
                for (int s = s0; s <= t; s++) {
                    size_t kvi = ((size_t)b * T + s) * Hkv + j;
                    double ds = R(p[s - s0] * R(dp[s - s0] - D));
                    if (dl && lh < PHAX_COSINE_MAX_LOGSCALE)  // ∂(scale·q̂·k̂)/∂ℓ = scale·q̂·k̂
                        dl[h] = R(dl[h] + R(ds * R(scale * dot(pr, qv, ks + kvi * dh, dh))));
                    double dss = R(ds * scale);
                    const double *kv = ks + kvi * dh;
                    double *dkv = dk + kvi * dh;
                    for (int i = 0; i < dh; i++) {
                        dqv[i] = R(dqv[i] + R(RM(dss) * RM(kv[i])));
                        dkv[i] = R(dkv[i] + R(RM(dss) * RM(qv[i])));
                    }
                }
            }
    }
    // Back through the normalisation and the rotation (its transpose: the rotation by −angle).
    if (cos_mode) {
        normalise_rows_bwd(pr, dq, qs, qn, nq, dh);
        normalise_rows_bwd(pr, dk, ks, kn, nk, dh);
    }
    if (c->rope) {
        rope_rows(pr, dq, nq, T, Hq, dh, c->rope_base, c->pos0, -1.0);
        rope_rows(pr, dk, nk, T, Hkv, dh, c->rope_base, c->pos0, -1.0);
    }
    free(qs), free(ks), free(vr), free(gr), free(qn), free(kn), free(p), free(dp);
    return PHAX_OK;
}

int phax_naive_rope(const phax_precision *pr, double *y, double *dx, const double *gy, const double *x, int B, int T,
                    int H, int dh, double base, long pos0) {
    size_t n = (size_t)B * T * H;
    for (size_t i = 0; i < n * dh; i++) y[i] = R(x[i]), dx[i] = R(gy[i]);
    rope_rows(pr, y, n, T, H, dh, base, pos0, 1.0);
    rope_rows(pr, dx, n, T, H, dh, base, pos0, -1.0);
    return PHAX_OK;
}
