// ref attention: causal grouped-query attention with an optional sliding
// window, RoPE, and `dot` or scaled-`cosine` scores. Float64, plain loops,
// the full score row is formed for every query (O(T²) — this is the oracle).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "phax/ref.h"

// First key visible to query t: keys s with 0 ≤ t − s < w, or all s ≤ t when w = 0.
static int first_key(int t, int window) { return window > 0 && t - window + 1 > 0 ? t - window + 1 : 0; }

// Cosine-mode scale s_h = exp(min(ℓ_h, log 100)).
static double cos_scale(double l) { return exp(l < PHAX_COSINE_MAX_LOGSCALE ? l : PHAX_COSINE_MAX_LOGSCALE); }

// The vectors that are actually scored. dot: R q, R k. cosine: R q/‖q‖, R k/‖k‖
// (RoPE is a rotation, so the norm is the same before or after it).
// qs: (B, T, Hq, dh), ks: (B, T, Hkv, dh); qnorm/knorm get the clamped norms (cosine).
static int scored_vectors(double *qs, double *ks, double *qnorm, double *knorm, const double *q,
                          const double *k, int B, int T, const phax_attn_cfg *c) {
    size_t nq = (size_t)B * T * c->Hq, nk = (size_t)B * T * c->Hkv;
    if (c->rope) {
        if (ref_rope_fwd(qs, q, B, T, c->Hq, c->dh, c->rope_base, c->pos0)) return PHAX_ERR;
        if (ref_rope_fwd(ks, k, B, T, c->Hkv, c->dh, c->rope_base, c->pos0)) return PHAX_ERR;
    } else {
        memcpy(qs, q, nq * c->dh * sizeof *qs);
        memcpy(ks, k, nk * c->dh * sizeof *ks);
    }
    if (c->score == PHAX_SCORE_COSINE) {
        double *xs[2] = {qs, ks}, *norms[2] = {qnorm, knorm};
        size_t rows[2] = {nq, nk};
        for (int w = 0; w < 2; w++)
            for (size_t r = 0; r < rows[w]; r++) {
                double *x = xs[w] + r * c->dh, ss = 0;
                for (int i = 0; i < c->dh; i++) ss += x[i] * x[i];
                double nrm = fmax(sqrt(ss), PHAX_COSINE_NORM_EPS);
                norms[w][r] = nrm;
                for (int i = 0; i < c->dh; i++) x[i] /= nrm;
            }
    }
    return PHAX_OK;
}

// Scores of query (b, t, h) against its visible keys, softmaxed in place:
// p[s − s0] for s = s0..t. Returns the logit scale used (1/√dh or s_h).
static double score_row(double *p, const double *qs, const double *ks, const double *logscale,
                        int b, int t, int h, int T, const phax_attn_cfg *c) {
    int g = c->Hq / c->Hkv, j = h / g, s0 = first_key(t, c->window);
    double scale = c->score == PHAX_SCORE_COSINE ? cos_scale(logscale[h]) : 1.0 / sqrt(c->dh);
    const double *qv = qs + (((size_t)b * T + t) * c->Hq + h) * c->dh;
    double mx = -INFINITY;
    for (int s = s0; s <= t; s++) {
        const double *kv = ks + (((size_t)b * T + s) * c->Hkv + j) * c->dh;
        double d = 0;
        for (int i = 0; i < c->dh; i++) d += qv[i] * kv[i];
        p[s - s0] = scale * d;
        if (p[s - s0] > mx) mx = p[s - s0];
    }
    double z = 0;
    for (int s = s0; s <= t; s++) z += (p[s - s0] = exp(p[s - s0] - mx));
    for (int s = s0; s <= t; s++) p[s - s0] /= z;
    return scale;
}

typedef struct {
    double *qs, *ks, *qnorm, *knorm, *p;
} attn_tmp;

static void tmp_free(attn_tmp *w) {
    free(w->qs), free(w->ks), free(w->qnorm), free(w->knorm), free(w->p);
}

static int tmp_alloc(attn_tmp *w, int B, int T, const phax_attn_cfg *c) {
    size_t nq = (size_t)B * T * c->Hq, nk = (size_t)B * T * c->Hkv;
    w->qs = malloc(nq * c->dh * sizeof(double));
    w->ks = malloc(nk * c->dh * sizeof(double));
    w->qnorm = malloc(nq * sizeof(double));
    w->knorm = malloc(nk * sizeof(double));
    w->p = malloc((size_t)(T > 0 ? T : 1) * sizeof(double));
    if (!w->qs || !w->ks || !w->qnorm || !w->knorm || !w->p) {
        tmp_free(w);
        return phax_fail("attention: out of memory (B=%d T=%d)", B, T);
    }
    return PHAX_OK;
}

// o: (B, T, Hq, dv) = Σ_s softmax_s(score(q_t, k_s)) v_s over visible keys.
int ref_attention_fwd(double *o, const double *q, const double *k, const double *v,
                      const double *logscale, int B, int T, const phax_attn_cfg *c) {
    if (phax_attn_cfg_check(c)) return PHAX_ERR;
    if (c->score == PHAX_SCORE_COSINE && !logscale) return phax_fail("attention: cosine scores need logscale");
    attn_tmp w;
    if (tmp_alloc(&w, B, T, c)) return PHAX_ERR;
    if (scored_vectors(w.qs, w.ks, w.qnorm, w.knorm, q, k, B, T, c)) {
        tmp_free(&w);
        return PHAX_ERR;
    }
    int g = c->Hq / c->Hkv;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < c->Hq; h++) {
                score_row(w.p, w.qs, w.ks, logscale, b, t, h, T, c);
                double *ov = o + (((size_t)b * T + t) * c->Hq + h) * c->dv;
                for (int i = 0; i < c->dv; i++) ov[i] = 0;
                for (int s = first_key(t, c->window); s <= t; s++) {
                    const double *vv = v + (((size_t)b * T + s) * c->Hkv + h / g) * c->dv;
                    double ps = w.p[s - first_key(t, c->window)];
                    for (int i = 0; i < c->dv; i++) ov[i] += ps * vv[i];
                }
            }
    tmp_free(&w);
    return PHAX_OK;
}

// Back through x̂ = x / max(‖x‖, ε): dx = (dx̂ − x̂ (x̂·dx̂)) / ‖x‖, or dx̂/ε when clamped.
static void normalize_bwd(double *dx, const double *dxh, const double *xh, double nrm, int n) {
    if (nrm > PHAX_COSINE_NORM_EPS) {
        double d = 0;
        for (int i = 0; i < n; i++) d += xh[i] * dxh[i];
        for (int i = 0; i < n; i++) dx[i] = (dxh[i] - xh[i] * d) / nrm;
    } else {
        for (int i = 0; i < n; i++) dx[i] = dxh[i] / nrm;
    }
}

int ref_attention_bwd(double *dq, double *dk, double *dv, double *dlogscale, const double *dout,
                      const double *q, const double *k, const double *v, const double *logscale,
                      int B, int T, const phax_attn_cfg *c) {
    if (phax_attn_cfg_check(c)) return PHAX_ERR;
    if (c->score == PHAX_SCORE_COSINE && !logscale) return phax_fail("attention: cosine scores need logscale");
    attn_tmp w;
    if (tmp_alloc(&w, B, T, c)) return PHAX_ERR;
    size_t nq = (size_t)B * T * c->Hq, nk = (size_t)B * T * c->Hkv;
    // Gradients w.r.t. the scored vectors qs, ks, then mapped back to q, k.
    double *dqs = calloc(nq * c->dh, sizeof(double)), *dks = calloc(nk * c->dh, sizeof(double));
    double *dp = malloc((size_t)(T > 0 ? T : 1) * sizeof(double));
    double *tmp = malloc((size_t)c->dh * sizeof(double));
    int rc = PHAX_OK;
    if (!dqs || !dks || !dp || !tmp) {
        rc = phax_fail("attention: out of memory (B=%d T=%d)", B, T);
        goto done;
    }
    if ((rc = scored_vectors(w.qs, w.ks, w.qnorm, w.knorm, q, k, B, T, c))) goto done;
    int g = c->Hq / c->Hkv;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < c->Hq; h++) {
            int j = h / g;
            double dscale = 0;  // dL/d(logit scale) for this head (cosine mode)
            for (int t = 0; t < T; t++) {
                double scale = score_row(w.p, w.qs, w.ks, logscale, b, t, h, T, c);
                int s0 = first_key(t, c->window);
                const double *go = dout + (((size_t)b * T + t) * c->Hq + h) * c->dv;
                // dp_s = dout·v_s;  dv_s += p_s dout;  softmax: dz_s = p_s (dp_s − Σ p dp)
                double pdp = 0;
                for (int s = s0; s <= t; s++) {
                    size_t vo = (((size_t)b * T + s) * c->Hkv + j) * c->dv;
                    double d = 0;
                    for (int i = 0; i < c->dv; i++) {
                        d += go[i] * v[vo + i];
                        if (dv) dv[vo + i] += w.p[s - s0] * go[i];
                    }
                    dp[s - s0] = d;
                    pdp += w.p[s - s0] * d;
                }
                size_t qo = (((size_t)b * T + t) * c->Hq + h) * c->dh;
                for (int s = s0; s <= t; s++) {
                    size_t ko = (((size_t)b * T + s) * c->Hkv + j) * c->dh;
                    double dz = w.p[s - s0] * (dp[s - s0] - pdp);  // dL/dlogit
                    double d = 0;
                    for (int i = 0; i < c->dh; i++) {
                        dqs[qo + i] += dz * scale * w.ks[ko + i];
                        dks[ko + i] += dz * scale * w.qs[qo + i];
                        d += w.qs[qo + i] * w.ks[ko + i];
                    }
                    dscale += dz * d;
                }
            }
            // s_h = exp(min(ℓ_h, log 100)): ds/dℓ = s below the clamp, 0 above it.
            if (c->score == PHAX_SCORE_COSINE && dlogscale && logscale[h] < PHAX_COSINE_MAX_LOGSCALE)
                dlogscale[h] += dscale * cos_scale(logscale[h]);
        }
    // Undo the normalisation (cosine), then the rotation (RoPE), adding into dq, dk.
    double *dsv[2] = {dqs, dks}, *xsv[2] = {w.qs, w.ks}, *norms[2] = {w.qnorm, w.knorm};
    size_t rows[2] = {nq, nk};
    for (int which = 0; which < 2; which++) {
        if (c->score == PHAX_SCORE_COSINE)
            for (size_t r = 0; r < rows[which]; r++) {
                double *dx = dsv[which] + r * c->dh;
                normalize_bwd(tmp, dx, xsv[which] + r * c->dh, norms[which][r], c->dh);
                memcpy(dx, tmp, (size_t)c->dh * sizeof *tmp);
            }
        double *dst = which == 0 ? dq : dk;
        int H = which == 0 ? c->Hq : c->Hkv;
        if (!dst) continue;
        if (c->rope) {
            if ((rc = ref_rope_bwd(dst, dsv[which], B, T, H, c->dh, c->rope_base, c->pos0))) goto done;
        } else {
            for (size_t i = 0; i < rows[which] * c->dh; i++) dst[i] += dsv[which][i];
        }
    }
done:
    tmp_free(&w);
    free(dqs), free(dks), free(dp), free(tmp);
    return rc;
}
