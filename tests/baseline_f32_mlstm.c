// The float32 naive baseline of the mLSTM (baseline_f32.h): ref_mlstm_parallel_fwd/bwd
// transcribed line by line to float, and the first-order rounding scale of the same
// formula (running error analysis in double), the mLSTM bound's second term.
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "baseline_f32.h"

static size_t ixg(const b32_mlstm_prob *p, int b, int t, int hh) {
    return ((size_t)b * p->T + t) * p->H + hh;
}

// ---------------------------------------------------------------------------
// naive32: ref_mlstm_parallel_fwd/bwd (ref/mlstm.c) transcribed line by line to
// float32 — the same algorithm, every quantity float, libm float functions.
static float lsigf(float z) { return fminf(z, 0.0f) - log1pf(expf(-fabsf(z))); }
static float sigf(float z) {
    if (z >= 0) return 1.0f / (1.0f + expf(-z));
    float e = expf(z);
    return e / (1.0f + e);
}

static float b32_logrow(float *D, const b32_mlstm_prob *p, int b, int hh, int t, int *arg) {
    float F = 0;
    for (int s = t; s >= 0; s--) {
        D[s] = F + p->ig[ixg(p, b, s, hh)];
        F += lsigf(p->fg[ixg(p, b, s, hh)]);
    }
    float m = D[0];
    *arg = 0;
    for (int s = 1; s <= t; s++)
        if (D[s] > m) m = D[s], *arg = s;
    return m;
}

void b32_mlstm_fwd(float *h, const b32_mlstm_prob *p, float eps) {
    int T = p->T, dqk = p->dqk, dv = p->dv;
    const float sc = 1.0f / sqrtf((float)dqk);
    float *D = malloc(sizeof(float) * T), *Cb = malloc(sizeof(float) * T);
    for (int b = 0; b < p->B; b++)
        for (int hh = 0; hh < p->H; hh++)
            for (int t = 0; t < T; t++) {
                int arg;
                float m = b32_logrow(D, p, b, hh, t, &arg);
                const float *qt = p->q + ixg(p, b, t, hh) * dqk;
                float S = 0;
                for (int s = 0; s <= t; s++) {
                    const float *ks = p->k + ixg(p, b, s, hh) * dqk;
                    float qk = 0;
                    for (int i = 0; i < dqk; i++) qk += (qt[i] * sc) * ks[i];
                    Cb[s] = qk * expf(D[s] - m);
                    S += Cb[s];
                }
                float den = fmaxf(fabsf(S), expf(-m)) + eps;
                float *ht = h + ixg(p, b, t, hh) * dv;
                for (int j = 0; j < dv; j++) {
                    float acc = 0;
                    for (int s = 0; s <= t; s++) acc += Cb[s] * p->v[ixg(p, b, s, hh) * dv + j];
                    ht[j] = acc / den;
                }
            }
    free(D), free(Cb);
}

// Gradients ADDED (all non-NULL here).
void b32_mlstm_bwd(float *dq, float *dk, float *dv_, float *dig, float *dfg, const b32_mlstm_prob *p,
                        float eps) {
    int T = p->T, dqk = p->dqk, dv = p->dv;
    const float sc = 1.0f / sqrtf((float)dqk);
    float *D = malloc(sizeof(float) * T), *E = malloc(sizeof(float) * T);
    float *G = malloc(sizeof(float) * T), *dD = malloc(sizeof(float) * T);
    float *num = malloc(sizeof(float) * dv), *dnum = malloc(sizeof(float) * dv);
    float *dphi = malloc(sizeof(float) * T);
    for (int b = 0; b < p->B; b++)
        for (int hh = 0; hh < p->H; hh++) {
            memset(dphi, 0, sizeof(float) * T);
            for (int t = 0; t < T; t++) {
                int arg;
                float m = b32_logrow(D, p, b, hh, t, &arg);
                const float *qt = p->q + ixg(p, b, t, hh) * dqk;
                const float *dht = p->dh + ixg(p, b, t, hh) * dv;
                float S = 0;
                for (int s = 0; s <= t; s++) {
                    const float *ks = p->k + ixg(p, b, s, hh) * dqk;
                    float qk = 0;
                    for (int i = 0; i < dqk; i++) qk += (qt[i] * sc) * ks[i];
                    G[s] = qk, E[s] = expf(D[s] - m);
                    S += qk * E[s];
                }
                float em = expf(-m), den = fmaxf(fabsf(S), em) + eps;
                float hdot = 0;
                for (int j = 0; j < dv; j++) {
                    num[j] = 0;
                    for (int s = 0; s <= t; s++)
                        num[j] += G[s] * E[s] * p->v[ixg(p, b, s, hh) * dv + j];
                    hdot += dht[j] * num[j] / den;
                    dnum[j] = dht[j] / den;
                }
                float dden = -hdot / den, dS = 0, dm = 0;
                if (fabsf(S) >= em)
                    dS = S > 0 ? dden : (S < 0 ? -dden : 0.0f);
                else
                    dm += -dden * em;
                for (int s = 0; s <= t; s++) {
                    const float *ks = p->k + ixg(p, b, s, hh) * dqk;
                    const float *vs = p->v + ixg(p, b, s, hh) * dv;
                    float dCb = dS;
                    for (int j = 0; j < dv; j++) dCb += dnum[j] * vs[j];
                    for (int j = 0; j < dv; j++)
                        dv_[ixg(p, b, s, hh) * dv + j] += G[s] * E[s] * dnum[j];
                    float dg = dCb * E[s], dE = dCb * G[s];
                    for (int i = 0; i < dqk; i++) {
                        dq[ixg(p, b, t, hh) * dqk + i] += dg * ks[i] * sc;
                        dk[ixg(p, b, s, hh) * dqk + i] += dg * qt[i] * sc;
                    }
                    dD[s] = dE * E[s];
                    dm -= dE * E[s];
                }
                dD[arg] += dm;
                float P = 0;
                for (int s = 0; s <= t; s++) {
                    dig[ixg(p, b, s, hh)] += dD[s];
                    if (s < t) {
                        P += dD[s];
                        dphi[s + 1] += P;
                    }
                }
            }
            for (int r = 0; r < T; r++)
                dfg[ixg(p, b, r, hh)] += dphi[r] * sigf(-p->fg[ixg(p, b, r, hh)]);
        }
    free(D), free(E), free(G), free(dD), free(num), free(dnum), free(dphi);
}

// ---------------------------------------------------------------------------
// Rounding-error scale of the formula (running error analysis, first order):
// ref's parallel algorithm in double where every quantity x carries a shadow
// x̄ ≥ |x| such that a float32 evaluation of x is off by about u·x̄ (u = 2^-24):
// inputs x̄ = |x|; sums add shadows (plus |partial sum| for the long
// same-sign sum F of the log-gates); z = x·y: x̄|y| + |x|ȳ; z = x/d:
// x̄/|d| + |x|·d̄/d²; z = e^a: e^a(1 + ā); max/abs pass the winner's shadow.
// For the sums with cancellation that dominate ill-conditioned rows (S = Σ_s W_s
// near the kink of max(|S|, e^{−m}), dS + dnum·v on the |S| branch) u·x̄ is the
// size of the rounding noise of ANY float32 evaluation, including naive32's.
// A single naive32 error is one draw of that noise: when one or two such rows
// dominate a tensor it can be ≪ u·x̄ by luck (measured: a second, equally good
// float evaluation exceeded 4× naive32's error in ~1.5% of tensors).
void b32_mlstm_roundoff_scale(double *hs, double *gs[5], const b32_mlstm_prob *p, double eps) {
    int T = p->T, dqk = p->dqk, dv = p->dv;
    const double sc = 1.0 / sqrt((double)dqk);
    double *dq = gs[0], *dk = gs[1], *dv_ = gs[2], *dig = gs[3], *dfg = gs[4];
    size_t n[5] = {p->nk, p->nk, p->nv, p->ng, p->ng};
    for (int j = 0; j < 5; j++) memset(gs[j], 0, n[j] * sizeof(double));
    double *D = calloc(T, 8), *Db = calloc(T, 8), *E = calloc(T, 8), *Eb = calloc(T, 8);
    double *G = calloc(T, 8), *Gb = calloc(T, 8), *dDb = calloc(T, 8), *dphib = calloc(T, 8);
    double *num = calloc(dv, 8), *numb = calloc(dv, 8), *dnum = calloc(dv, 8),
           *dnumb = calloc(dv, 8);
    double *hh_ = calloc(dv, 8), *hb = calloc(dv, 8);
    for (int b = 0; b < p->B; b++)
        for (int hh = 0; hh < p->H; hh++) {
            memset(dphib, 0, T * sizeof(double));
            for (int t = 0; t < T; t++) {
                // Log-gate row with shadows: F accumulated backwards.
                double F = 0, Fb = 0;
                for (int s = t; s >= 0; s--) {
                    double ig = p->igd[ixg(p, b, s, hh)], fz = p->fgd[ixg(p, b, s, hh)];
                    D[s] = F + ig, Db[s] = Fb + fabs(ig) + fabs(D[s]);
                    double ph = fmin(fz, 0) - log1p(exp(-fabs(fz)));
                    F += ph, Fb += fabs(ph) + fabs(F);
                }
                int arg = 0;
                for (int s = 1; s <= t; s++)
                    if (D[s] > D[arg]) arg = s;
                double m = D[arg], mb = Db[arg];
                const double *qt = p->qd + ixg(p, b, t, hh) * dqk;
                const double *dht = p->dhd + ixg(p, b, t, hh) * dv;
                double S = 0, Sb = 0;
                for (int s = 0; s <= t; s++) {
                    const double *ks = p->kd + ixg(p, b, s, hh) * dqk;
                    double qk = 0, qkb = 0;
                    for (int i = 0; i < dqk; i++)
                        qk += qt[i] * sc * ks[i], qkb += fabs(qt[i] * sc * ks[i]);
                    G[s] = qk, Gb[s] = qkb;
                    E[s] = exp(D[s] - m), Eb[s] = E[s] * (1 + Db[s] + mb);
                    S += qk * E[s], Sb += qkb * E[s] + fabs(qk) * Eb[s];
                }
                double em = exp(-m), emb = em * (1 + mb);
                bool br1 = fabs(S) >= em;
                double den = (br1 ? fabs(S) : em) + eps, denb = (br1 ? Sb : emb) + den;
                double hdot = 0, hdotb = 0;
                double *hrow = hs + ixg(p, b, t, hh) * dv;
                for (int j = 0; j < dv; j++) {
                    num[j] = numb[j] = 0;
                    for (int s = 0; s <= t; s++) {
                        double vs = p->vd[ixg(p, b, s, hh) * dv + j], W = G[s] * E[s];
                        double Wb = Gb[s] * E[s] + fabs(G[s]) * Eb[s];
                        num[j] += W * vs, numb[j] += Wb * fabs(vs);
                    }
                    hh_[j] = num[j] / den;
                    hb[j] = numb[j] / den + fabs(hh_[j]) * denb / den;
                    hrow[j] = hb[j];
                    hdot += dht[j] * hh_[j], hdotb += fabs(dht[j]) * hb[j];
                    dnum[j] = dht[j] / den;
                    dnumb[j] = fabs(dht[j]) / den * (1 + denb / den);
                }
                double dden = -hdot / den, ddenb = hdotb / den + fabs(hdot) * denb / (den * den);
                double dSb = br1 ? ddenb : 0, dS = br1 ? (S > 0 ? dden : -dden) : 0;
                double dmb = br1 ? 0 : ddenb * em + fabs(dden) * emb;
                for (int s = 0; s <= t; s++) {
                    const double *ks = p->kd + ixg(p, b, s, hh) * dqk;
                    const double *vs = p->vd + ixg(p, b, s, hh) * dv;
                    double dCb = dS, dCbb = dSb;
                    for (int j = 0; j < dv; j++)
                        dCb += dnum[j] * vs[j], dCbb += dnumb[j] * fabs(vs[j]);
                    double W = G[s] * E[s], Wb = Gb[s] * E[s] + fabs(G[s]) * Eb[s];
                    for (int j = 0; j < dv; j++)
                        dv_[ixg(p, b, s, hh) * dv + j] += Wb * fabs(dnum[j]) + fabs(W) * dnumb[j];
                    double dgb = dCbb * E[s] + fabs(dCb) * Eb[s];
                    double dE = dCb * G[s], dEb = dCbb * fabs(G[s]) + fabs(dCb) * Gb[s];
                    for (int i = 0; i < dqk; i++) {
                        dq[ixg(p, b, t, hh) * dqk + i] += dgb * fabs(ks[i]) * sc;
                        dk[ixg(p, b, s, hh) * dqk + i] += dgb * fabs(qt[i]) * sc;
                    }
                    dDb[s] = dEb * E[s] + fabs(dE) * Eb[s];
                    dmb += dDb[s];
                }
                dDb[arg] += dmb;
                double P = 0;
                for (int s = 0; s <= t; s++) {
                    dig[ixg(p, b, s, hh)] += dDb[s];
                    if (s < t) P += dDb[s], dphib[s + 1] += P;
                }
            }
            for (int r = 0; r < T; r++) {
                double z = p->fgd[ixg(p, b, r, hh)];
                double sg = z >= 0 ? 1 / (1 + exp(-z)) : exp(z) / (1 + exp(z));
                dfg[ixg(p, b, r, hh)] += dphib[r] * (1 - sg) * 2;  // σ(−f̃) and its rounding
            }
        }
    free(D), free(Db), free(E), free(Eb), free(G), free(Gb), free(dDb), free(dphib);
    free(num), free(numb), free(dnum), free(dnumb), free(hh_), free(hb);
}

