// The float32 naive baseline of attention (baseline_f32.h): ref's algorithm as plain
// loops over double values, every operation rounded to float32 when f = 1 (f = 0
// reproduces ref, and supplies the reference lse, which ref does not output), or,
// with mag, the same loops on magnitudes for the noise floor.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "baseline_f32.h"

// --- naive: ref's algorithm, every operation optionally rounded to float32 ------------------
static inline double rd(double x, int f) { return f ? (double)(float)x : x; }

static int first_key(int t, int w) { return w > 0 && t - w + 1 > 0 ? t - w + 1 : 0; }

// Scored vectors xs (rows of dh) and clamped norms of x: (B, T, H, dh).
static void naive_scored(int f, const b32_attn_shape *a, const double *x, int H, double *xs, double *nrm) {
    int dh = a->dh, half = dh / 2;
    for (int b = 0; b < a->B; b++)
        for (int t = 0; t < a->T; t++)
            for (int h = 0; h < H; h++) {
                size_t off = (((size_t)b * a->T + t) * H + h) * dh;
                const double *xr = x + off;
                double *y = xs + off;
                if (a->rope) {
                    double p = (double)(a->pos0 + t);
                    for (int i = 0; i < half; i++) {
                        double th = pow(PHAX_ROPE_BASE, -2.0 * i / dh);
                        double c = rd(cos(p * th), f), s = rd(sin(p * th), f);
                        y[i] = rd(rd(xr[i] * c, f) - rd(xr[i + half] * s, f), f);
                        y[i + half] = rd(rd(xr[i + half] * c, f) + rd(xr[i] * s, f), f);
                    }
                } else {
                    memcpy(y, xr, dh * sizeof *y);
                }
                nrm[off / dh] = 1;
                if (a->score == PHAX_SCORE_COSINE) {
                    double ss = 0;
                    for (int i = 0; i < dh; i++) ss = rd(ss + rd(y[i] * y[i], f), f);
                    double n = fmax(rd(sqrt(ss), f), rd(PHAX_COSINE_NORM_EPS, f));
                    nrm[off / dh] = n;
                    for (int i = 0; i < dh; i++) y[i] = rd(y[i] / n, f);
                }
            }
}

static double naive_scale(int f, const b32_attn_shape *a, const double *ls, int h) {
    if (a->score != PHAX_SCORE_COSINE) return rd(1.0 / rd(sqrt((double)a->dh), f), f);
    return rd(exp(fmin(ls[h], rd(PHAX_COSINE_MAX_LOGSCALE, f))), f);
}

// Softmax row p[s − s0]; returns lse, or with mag its rounding scale: the largest
// logit magnitude |scale|·Σ_i |q_i k_i| plus log Σ.
static double naive_row(int f, int mag, const b32_attn_shape *a, double *p, const double *qs, const double *ks,
                        double scale, int b, int t, int h) {
    int g = a->Hq / a->Hkv, j = h / g, s0 = first_key(t, a->window), dh = a->dh;
    const double *qv = qs + (((size_t)b * a->T + t) * a->Hq + h) * dh;
    double mx = -INFINITY, zmag = 0;
    for (int s = s0; s <= t; s++) {
        const double *kv = ks + (((size_t)b * a->T + s) * a->Hkv + j) * dh;
        double d = 0, dm = 0;
        for (int i = 0; i < dh; i++) d = rd(d + rd(qv[i] * kv[i], f), f), dm += fabs(qv[i] * kv[i]);
        p[s - s0] = rd(scale * d, f);
        if (p[s - s0] > mx) mx = p[s - s0];
        if (fabs(scale) * dm > zmag) zmag = fabs(scale) * dm;
    }
    double z = 0;
    for (int s = s0; s <= t; s++) z = rd(z + (p[s - s0] = rd(exp(rd(p[s - s0] - mx, f)), f)), f);
    for (int s = s0; s <= t; s++) p[s - s0] = rd(p[s - s0] / z, f);
    return mag ? zmag + fabs(log(z)) : rd(mx + rd(log(z), f), f);
}

// mag (with f = 0): magnitudes for the noise floor, the same loops on absolute values
// (every later subtraction an addition of magnitudes), so |fl(x) − x| ≲ n·u·mag.
//   mag = 2: with the true softmax gradient dz = p(dp − Σp·dp) — the size of the terms
//            whose sums the result is (for dlogscale, a sum over all (t, s) that
//            cancels heavily, this is what its rounding error scales with);
//   mag = 1: also dz expanded to p(|dp| + |Σp·dp|): needed where dz is exactly 0 (one
//            visible key: dq = dk = 0 while float rounding of P(dP − D) leaves ~u·mag).
#define MG(x) (mag ? fabs(x) : (x))
#define SUB(a, b) (mag ? (a) + (b) : (a) - (b))
#define MGX(x) (mag == 1 ? fabs(x) : (x))
#define SUBX(a, b) (mag == 1 ? (a) + (b) : (a) - (b))
void b32_attention(int f, int mag, const b32_attn_shape *a, const double *q, const double *k, const double *v,
                  const double *ls, const double *dout, b32_attn_out *out) {
    int B = a->B, T = a->T, Hq = a->Hq, Hkv = a->Hkv, dh = a->dh, dv = a->dv, g = Hq / Hkv;
    size_t nq = (size_t)B * T * Hq, nk = (size_t)B * T * Hkv;
    double *qs = calloc(nq * dh, 8), *ks = calloc(nk * dh, 8), *qn = calloc(nq, 8), *kn = calloc(nk, 8);
    double *dqs = calloc(nq * dh, 8), *dks = calloc(nk * dh, 8);
    double *p = calloc(T, 8), *dp = calloc(T, 8);
    naive_scored(f, a, q, Hq, qs, qn);
    naive_scored(f, a, k, Hkv, ks, kn);
    for (size_t i = 0; i < nk * dv; i++) out->dv[i] = 0;
    for (int h = 0; h < Hq; h++) out->dls[h] = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < Hq; h++) {
            int j = h / g;
            double scale = naive_scale(f, a, ls, h), dscale = 0;
            for (int t = 0; t < T; t++) {
                int s0 = first_key(t, a->window);
                out->lse[((size_t)b * Hq + h) * T + t] = naive_row(f, mag, a, p, qs, ks, scale, b, t, h);
                size_t ro = (((size_t)b * T + t) * Hq + h);
                double *ov = out->o + ro * dv;
                const double *go = dout + ro * dv;
                for (int i = 0; i < dv; i++) ov[i] = 0;
                double pdp = 0;
                for (int s = s0; s <= t; s++) {
                    size_t vo = (((size_t)b * T + s) * Hkv + j) * dv;
                    double d = 0;
                    for (int i = 0; i < dv; i++) {
                        ov[i] = rd(ov[i] + rd(p[s - s0] * MG(v[vo + i]), f), f);
                        d = rd(d + rd(MGX(go[i]) * MGX(v[vo + i]), f), f);
                        out->dv[vo + i] = rd(out->dv[vo + i] + rd(p[s - s0] * MG(go[i]), f), f);
                    }
                    dp[s - s0] = d;
                    pdp = rd(pdp + rd(p[s - s0] * d, f), f);
                }
                double *dqv = dqs + ro * dh;
                const double *qv = qs + ro * dh;
                for (int s = s0; s <= t; s++) {
                    size_t ko = (((size_t)b * T + s) * Hkv + j) * dh;
                    double dz = MG(rd(p[s - s0] * rd(SUBX(dp[s - s0], pdp), f), f)), dzs = rd(dz * scale, f);
                    double d = 0;
                    for (int i = 0; i < dh; i++) {
                        dqv[i] = rd(dqv[i] + rd(dzs * MG(ks[ko + i]), f), f);
                        dks[ko + i] = rd(dks[ko + i] + rd(dzs * MG(qv[i]), f), f);
                        d = rd(d + rd(MG(qv[i]) * MG(ks[ko + i]), f), f);
                    }
                    dscale = rd(dscale + rd(dz * d, f), f);
                }
            }
            if (a->score == PHAX_SCORE_COSINE && ls[h] < PHAX_COSINE_MAX_LOGSCALE)
                out->dls[h] = rd(out->dls[h] + rd(dscale * scale, f), f);
        }
    // Back through the normalisation and the rotation.
    double *dsv[2] = {dqs, dks}, *xsv[2] = {qs, ks}, *nv[2] = {qn, kn}, *dst[2] = {out->dq, out->dk};
    size_t rows[2] = {nq, nk};
    int Hs[2] = {Hq, Hkv}, half = dh / 2;
    double *tmp = calloc(dh, 8);
    for (int w = 0; w < 2; w++)
        for (size_t r = 0; r < rows[w]; r++) {
            double *dx = dsv[w] + r * dh, *xh = xsv[w] + r * dh, n = nv[w][r];
            if (a->score == PHAX_SCORE_COSINE) {
                if (n > rd(PHAX_COSINE_NORM_EPS, f)) {
                    double d = 0;
                    for (int i = 0; i < dh; i++) d = rd(d + rd(MG(xh[i]) * MG(dx[i]), f), f);
                    for (int i = 0; i < dh; i++) dx[i] = rd(rd(SUB(MG(dx[i]), rd(MG(xh[i]) * d, f)), f) / n, f);
                } else {
                    for (int i = 0; i < dh; i++) dx[i] = rd(MG(dx[i]) / n, f);
                }
            }
            double *y = dst[w] + r * dh;
            if (a->rope) {
                int t = (int)((r / Hs[w]) % T);
                double p = (double)(a->pos0 + t);
                for (int i = 0; i < half; i++) {
                    double th = pow(PHAX_ROPE_BASE, -2.0 * i / dh);
                    double c = rd(cos(p * th), f), s = rd(sin(p * th), f);
                    tmp[i] = rd(rd(MG(dx[i]) * MG(c), f) + rd(MG(dx[i + half]) * MG(s), f), f);
                    tmp[i + half] = rd(SUB(rd(MG(dx[i + half]) * MG(c), f), rd(MG(dx[i]) * MG(s), f)), f);
                }
                memcpy(y, tmp, dh * sizeof *y);
            } else {
                for (int i = 0; i < dh; i++) y[i] = MG(dx[i]);
            }
        }
    free(qs), free(ks), free(qn), free(kn), free(dqs), free(dks), free(p), free(dp), free(tmp);
}

