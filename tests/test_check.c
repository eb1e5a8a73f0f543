// `phax check`, end to end: the real binary (PHAX_BIN) judging "their" outputs made here by
// a float32 implementation (this file's own: online softmax, flash-style backward — a
// different order of operations from check/'s baseline) run correctly at float32, correctly
// at bf16 (inputs and every intermediate rounded to bf16), and with the deliberate bugs of
// issue 14's gallery. Every verdict is read from the exit status and the printed lines;
// every comparison is written so NaN fails.
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "phax/check.h"
#include "phax/ref.h"
#include "phax/safetensors.h"
#include "testutil.h"

#define BOUND_C 4.0  // src/check.c's C: a bug must exceed it

// --- their rounding: float32 as is, or bf16 (round to nearest even on the bits) -----------------
typedef float (*rnd)(float);
static float r_f32(float x) { return x; }
// x with its `drop` low significand bits rounded off, to nearest even; inf and NaN as they are.
static float r_drop(float x, int drop) {
    uint32_t u, half = (1u << (drop - 1)) - 1u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) return x;
    u += half + ((u >> drop) & 1u);
    u &= ~((1u << drop) - 1u);
    memcpy(&x, &u, 4);
    return x;
}
static float r_bf16(float x) { return r_drop(x, 16); }  // 8 significand bits

#if defined(__FLT16_MAX__)
static float r_f16(float x) { return (float)(_Float16)x; }  // IEEE binary16, round to nearest even
#endif

// A dot product's operands: as they are, or (tf32, what a TF32 tensor core does to the
// operands of a matrix product) rounded to 11 significand bits, to nearest even; the products
// and sums stay in float32. Their code below writes every product of a dot product as MM.
static float r_tf32_operand(float x) { return r_drop(x, 13); }
static rnd g_O = r_f32;  // set for one tf32 draw, back to r_f32 after it
#define MM(a, b) R(g_O(a) * g_O(b))

// --- their attention -----------------------------------------------------------------------------
typedef enum {
    OK, BUG_CAUSAL, BUG_WINDOW, BUG_ROPE_K, BUG_GQA, BUG_STAB, BUG_FSTAB, BUG_ISTAB,
    // convention mismatches phax check names (its hint): RoPE pairs (2i, 2i+1), no RoPE at all,
    // dot scores without 1/sqrt(dh), a window one key wider (FlashAttention's (w, 0))
    BUG_ROPE_IL, BUG_NO_ROPE, BUG_NO_SCALE, BUG_WINDOW_WIDE,
    // not a bug under grad=stopgrad-normalizer: a hand-written mLSTM backward that holds the
    // normaliser and the stabiliser constant
    STOPGRAD,
    BUG_CARRY,  // chunkwise mLSTM: the carried state not decayed by the chunk
    BUG_GATE1,  // mLSTM: the forget gates' preactivations 1 % off (f̃·1.01, a mis-scaled gate)
    BUG_DECAY,  // Gated DeltaNet: the decay α dropped from the state's carry (S_{t−1} kept at full weight)
    BUG_BETA,   // Gated DeltaNet: β on the wrong side (e = βv − αSk̂, the update S += e k̂ᵀ)
    BUG_GDN_CARRY  // Gated DeltaNet chunkwise: the state handed to the next chunk not decayed by the chunk
} bug;

typedef struct {
    int B, T, Hq, Hkv, dh, window, cosine, rope;
} acase;

static size_t qn(const acase *c) { return (size_t)c->B * c->T * c->Hq * c->dh; }
static size_t kn(const acase *c) { return (size_t)c->B * c->T * c->Hkv * c->dh; }

// Rotate rows (B, T, H, dh) by sign·angle in place, their way: the table in float. il: the
// interleaved pairing (2i, 2i+1) instead of phax's rotate-half (i, i + dh/2).
static void their_rope(float *x, const acase *c, int H, float sign, rnd R, int il) {
    int half = c->dh / 2;
    for (int b = 0; b < c->B; b++)
        for (int t = 0; t < c->T; t++)
            for (int h = 0; h < H; h++) {
                float *r = x + (((size_t)b * c->T + t) * H + h) * c->dh;
                for (int i = 0; i < half; i++) {
                    int i1 = il ? 2 * i : i, i2 = il ? 2 * i + 1 : i + half;
                    float th = R(powf(10000.0f, -2.0f * (float)i / (float)c->dh)), a = R((float)t * th);
                    float cs = R(cosf(a)), sn = R(sign * R(sinf(a))), x1 = r[i1], x2 = r[i2];
                    r[i1] = R(R(x1 * cs) - R(x2 * sn));
                    r[i2] = R(R(x2 * cs) + R(x1 * sn));
                }
            }
}

static void their_norm(float *x, float *nrm, size_t rows, int dh, rnd R) {
    for (size_t r = 0; r < rows; r++) {
        float s = 0;
        for (int i = 0; i < dh; i++) s = R(s + R(x[r * dh + i] * x[r * dh + i]));
        nrm[r] = fmaxf(R(sqrtf(s)), 1e-12f);
        for (int i = 0; i < dh; i++) x[r * dh + i] = R(x[r * dh + i] / nrm[r]);
    }
}

static void their_norm_bwd(float *g, const float *xh, const float *nrm, size_t rows, int dh, rnd R) {
    for (size_t r = 0; r < rows; r++) {
        float a = 0;
        for (int i = 0; i < dh; i++) a = R(a + R(xh[r * dh + i] * g[r * dh + i]));
        for (int i = 0; i < dh; i++) g[r * dh + i] = R(R(g[r * dh + i] - R(xh[r * dh + i] * a)) / nrm[r]);
    }
}

// y, dq, dk, dv, dl (doubles holding their float results) from q, k, v, l, gy. The softmax as
// g_tile says: 1, online key by key; > 1, online over tiles of that many keys (FlashAttention's
// blocks: the running max and the rescale once per tile), both with the flash backward (p from
// the log-sum-exp, D = y·g); 0, naive (the row's max, p normalised, y = Σ p v; the backward
// with D = Σ p dp). Three rounding profiles of one function.
static int g_tile = 1;
static void their_attention(const acase *c, bug bg, rnd R, const double *q, const double *k, const double *v,
                            const double *l, const double *gy, double *y, double *dq, double *dk, double *dv,
                            double *dl) {
    size_t nq = qn(c), nk = kn(c);
    int dh = c->dh, G = c->Hq / c->Hkv;
    float *qs = calloc(nq, 4), *ks = calloc(nk, 4), *vs = calloc(nk, 4), *g = calloc(nq, 4), *yo = calloc(nq, 4);
    float *dqs = calloc(nq, 4), *dks = calloc(nk, 4), *dvs = calloc(nk, 4), *lse = calloc(nq / dh, 4);
    float *qnrm = calloc(nq / dh, 4), *knrm = calloc(nk / dh, 4), dls[16] = {0}, acc[64];
    float *scr = calloc((size_t)c->T, 4), *pr = calloc((size_t)c->T, 4), *dpr = calloc((size_t)c->T, 4);
    cr_assert(qs && ks && vs && g && yo && dqs && dks && dvs && lse && qnrm && knrm && scr && pr && dpr &&
              c->Hq <= 16 && dh <= 64);
    for (size_t i = 0; i < nq; i++) qs[i] = R((float)q[i]), g[i] = R((float)gy[i]);
    for (size_t i = 0; i < nk; i++) ks[i] = R((float)k[i]), vs[i] = R((float)v[i]);
    int rope = c->rope && bg != BUG_NO_ROPE, il = bg == BUG_ROPE_IL;
    if (rope) their_rope(qs, c, c->Hq, 1, R, il);
    if (rope && bg != BUG_ROPE_K) their_rope(ks, c, c->Hkv, 1, R, il);
    if (c->cosine) their_norm(qs, qnrm, nq / dh, dh, R), their_norm(ks, knrm, nk / dh, dh, R);
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->Hq; h++) {
            int j = bg == BUG_GQA ? h % c->Hkv : h / G;
            float lh = c->cosine ? R((float)l[h]) : 0;
            float scale = c->cosine ? R(expf(fminf(lh, logf(100.0f))))
                          : bg == BUG_NO_SCALE ? 1.0f : R(1.0f / sqrtf((float)dh));
            for (int t = 0; t < c->T; t++) {
                int lo = c->window ? t - c->window + 1 - (bg == BUG_WINDOW || bg == BUG_WINDOW_WIDE) : 0;
                int hi = bg == BUG_CAUSAL && t + 1 < c->T ? t + 1 : t;
                lo = lo < 0 ? 0 : lo;
                size_t qi = ((size_t)b * c->T + t) * c->Hq + h;
                float *qv = qs + qi * dh, m = -INFINITY, z = 0, D = 0, *gv = g + qi * dh;
                for (int i = 0; i < dh; i++) acc[i] = 0;
                for (int s = lo; s <= hi; s++) {  // the row's scores
                    size_t ki = ((size_t)b * c->T + s) * c->Hkv + j;
                    float d = 0;
                    for (int i = 0; i < dh; i++) d = R(d + MM(qv[i], ks[ki * dh + i]));
                    scr[s] = R(scale * d);
                }
                if (g_tile > 0) {  // online softmax over tiles of g_tile keys: one rescale per tile
                    for (int s0 = lo; s0 <= hi; s0 += g_tile) {
                        int s1 = s0 + g_tile - 1 < hi ? s0 + g_tile - 1 : hi;
                        float mt = m;
                        for (int s = s0; s <= s1; s++) mt = fmaxf(mt, scr[s]);
                        if (mt > m) {
                            float corr = R(expf(R(m - mt)));
                            z = R(z * corr);
                            for (int i = 0; i < dh; i++) acc[i] = R(acc[i] * corr);
                            m = mt;
                        }
                        for (int s = s0; s <= s1; s++) {
                            size_t ki = ((size_t)b * c->T + s) * c->Hkv + j;
                            float e = R(expf(R(scr[s] - m)));
                            z = R(z + e);
                            for (int i = 0; i < dh; i++) acc[i] = R(acc[i] + MM(e, vs[ki * dh + i]));
                        }
                    }
                    for (int i = 0; i < dh; i++) yo[qi * dh + i] = R(acc[i] / z);
                    lse[qi] = R(m + R(logf(z)));
                    for (int i = 0; i < dh; i++) D = R(D + R(yo[qi * dh + i] * gv[i]));
                    for (int s = lo; s <= hi; s++) pr[s] = R(expf(R(scr[s] - lse[qi])));  // flash: p from the lse
                } else {  // naive: max, exponentials, their sum, p normalised, then y = Σ p v
                    for (int s = lo; s <= hi; s++) m = fmaxf(m, scr[s]);
                    for (int s = lo; s <= hi; s++) pr[s] = R(expf(R(scr[s] - m))), z = R(z + pr[s]);
                    for (int s = lo; s <= hi; s++) pr[s] = R(pr[s] / z);
                    for (int s = lo; s <= hi; s++) {
                        size_t ki = ((size_t)b * c->T + s) * c->Hkv + j;
                        for (int i = 0; i < dh; i++) acc[i] = R(acc[i] + MM(pr[s], vs[ki * dh + i]));
                    }
                    for (int i = 0; i < dh; i++) yo[qi * dh + i] = acc[i];
                }
                for (int s = lo; s <= hi; s++) {  // dp = g·v
                    size_t ki = ((size_t)b * c->T + s) * c->Hkv + j;
                    float dp = 0;
                    for (int i = 0; i < dh; i++) dp = R(dp + MM(gv[i], vs[ki * dh + i]));
                    dpr[s] = dp;
                }
                if (g_tile <= 0)  // naive: D = Σ p dp (the softmax's Jacobian), not y·g
                    for (int s = lo; s <= hi; s++) D = R(D + R(pr[s] * dpr[s]));
                for (int s = lo; s <= hi; s++) {
                    size_t ki = ((size_t)b * c->T + s) * c->Hkv + j;
                    float sc = scr[s], p = pr[s], dp = dpr[s];
                    float ds = R(p * R(dp - D)), dss = R(ds * scale);
                    if (c->cosine && lh < logf(100.0f)) dls[h] = R(dls[h] + R(ds * sc));
                    for (int i = 0; i < dh; i++) {
                        dvs[ki * dh + i] = R(dvs[ki * dh + i] + MM(p, gv[i]));
                        dqs[qi * dh + i] = R(dqs[qi * dh + i] + MM(dss, ks[ki * dh + i]));
                        dks[ki * dh + i] = R(dks[ki * dh + i] + MM(dss, qv[i]));
                    }
                }
            }
        }
    if (c->cosine) their_norm_bwd(dqs, qs, qnrm, nq / dh, dh, R), their_norm_bwd(dks, ks, knrm, nk / dh, dh, R);
    if (rope) their_rope(dqs, c, c->Hq, -1, R, il);
    if (rope && bg != BUG_ROPE_K) their_rope(dks, c, c->Hkv, -1, R, il);
    for (size_t i = 0; i < nq; i++) y[i] = yo[i], dq[i] = dqs[i];
    for (size_t i = 0; i < nk; i++) dk[i] = dks[i], dv[i] = dvs[i];
    for (int h = 0; h < c->Hq; h++) dl[h] = dls[h];
    free(qs), free(ks), free(vs), free(g), free(yo), free(dqs), free(dks), free(dvs), free(lse), free(qnrm),
        free(knrm), free(scr), free(pr), free(dpr);
}

// --- their GSS/SSM convolution: y[t] = d u[t] + Σ_{j ≤ t−shift} k[t−j−shift] u[j] (shift 1: the bug) --
static void their_conv(int B, int T, int H, int shift, rnd R, const double *u, const double *k, const double *d,
                       const double *gy, double *y, double *du, double *dk, double *dd) {
    for (int h = 0; h < H; h++) dd[h] = 0;
    for (size_t i = 0; i < (size_t)H * T; i++) dk[i] = 0;
    float *kacc = calloc((size_t)T, 4);
    cr_assert(kacc);
    for (int h = 0; h < H; h++) {
        for (int i = 0; i < T; i++) kacc[i] = 0;
        float ddh = 0, dh_ = R((float)d[h]);
        for (int b = 0; b < B; b++) {
#define UU(t) R((float)u[((size_t)b * T + (t)) * H + h])
#define GG(t) R((float)gy[((size_t)b * T + (t)) * H + h])
#define KK(i) R((float)k[(size_t)h * T + (i)])
            for (int t = 0; t < T; t++) {  // newest input first
                float s = 0;
                for (int j = t - shift; j >= 0; j--) s = R(s + MM(KK(t - j - shift), UU(j)));
                y[((size_t)b * T + t) * H + h] = R(s + R(dh_ * UU(t)));
            }
            for (int s = 0; s < T; s++) {
                float a = 0;
                for (int t = T - 1; t >= s + shift; t--) a = R(a + MM(KK(t - s - shift), GG(t)));
                du[((size_t)b * T + s) * H + h] = R(a + R(dh_ * GG(s)));
            }
            for (int lag = 0; lag + shift < T; lag++)
                for (int t = lag + shift; t < T; t++) kacc[lag] = R(kacc[lag] + MM(GG(t), UU(t - lag - shift)));
            for (int t = 0; t < T; t++) ddh = R(ddh + R(GG(t) * UU(t)));
#undef UU
#undef GG
#undef KK
        }
        for (int i = 0; i < T; i++) dk[(size_t)h * T + i] = kacc[i];
        dd[h] = ddh;
    }
    free(kacc);
}

// --- their mLSTM: parallel form, the decays from a cumulative sum (cs_t − cs_s, as many
// PyTorch versions write it), backward by hand. BUG_STAB: the normaliser's sum S is formed
// from e^{D̃} instead of e^{D̃ − m} (the stabiliser not subtracted in that one place).
static float lsigf(float z) { return fminf(z, 0) - log1pf(expf(-fabsf(z))); }
static int g_direct_decay;  // 1: the log-decays as direct sums (their other way to write it)
static void their_mlstm(int B, int T, int H, int dk_, int dv_, bug bg, rnd R, const double *q, const double *k,
                        const double *v, const double *ig, const double *fg, const double *gh, double *h, double *dq,
                        double *dk, double *dv, double *di, double *df) {
    size_t nqk = (size_t)B * T * H * dk_, nv = (size_t)B * T * H * dv_, ng = (size_t)B * T * H;
    for (size_t i = 0; i < nqk; i++) dq[i] = dk[i] = 0;
    for (size_t i = 0; i < nv; i++) dv[i] = 0;
    for (size_t i = 0; i < ng; i++) di[i] = df[i] = 0;
    float *cs = malloc((size_t)T * 4), *D = malloc((size_t)T * 4), *E = malloc((size_t)T * 4),
          *Es = malloc((size_t)T * 4), *gq = malloc((size_t)T * 4), *dD = malloc((size_t)T * 4);
    float hv[64], qh[64], dqh[64];
    cr_assert(cs && D && E && Es && gq && dD && dk_ <= 64 && dv_ <= 64);
    float sc = R(1.0f / sqrtf((float)dk_));
#define IX(t) (((size_t)b * T + (t)) * H + hh)
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < H; hh++) {
            float c = 0;
            for (int t = 0; t < T; t++) cs[t] = c = R(c + R(lsigf(R((float)fg[IX(t)]))));
            for (int t = 0; t < T; t++) {
                float m = -INFINITY, S = 0, den, dden = 0;
                int arg = 0;
                if (g_direct_decay) {  // Σ_{s<u≤t} logσ(f̃_u) summed from t down: no cancellation
                    float acc = 0;
                    for (int s = t; s >= 0; s--) {
                        D[s] = R(acc + R((float)ig[IX(s)]));
                        acc = R(acc + R(lsigf(R((float)fg[IX(s)]))));
                    }
                } else {
                    for (int s = 0; s <= t; s++) D[s] = R(R(cs[t] - cs[s]) + R((float)ig[IX(s)]));
                }
                for (int s = 0; s <= t; s++)
                    if (D[s] > m) m = D[s], arg = s;
                for (int i = 0; i < dk_; i++) qh[i] = R(R((float)q[IX(t) * dk_ + i]) * sc);
                for (int s = 0; s <= t; s++) {
                    float a = 0;
                    for (int i = 0; i < dk_; i++) a = R(a + MM(qh[i], R((float)k[IX(s) * dk_ + i])));
                    gq[s] = a, E[s] = R(expf(R(D[s] - m)));
                    Es[s] = bg == BUG_STAB ? R(expf(D[s])) : E[s];
                    S = R(S + R(gq[s] * Es[s]));
                }
                float em = R(expf(-m));
                den = R(fmaxf(fabsf(S), em) + 1e-6f);
                for (int j = 0; j < dv_; j++) {
                    float a = 0;
                    for (int s = 0; s <= t; s++) a = R(a + MM(R(gq[s] * E[s]), R((float)v[IX(s) * dv_ + j])));
                    h[IX(t) * dv_ + j] = hv[j] = R(a / den);
                    dden = R(dden + R(R((float)gh[IX(t) * dv_ + j]) * hv[j]));
                }
                dden = R(-R(dden / den));
                float dS = fabsf(S) >= em ? (S >= 0 ? dden : -dden) : 0, dm = fabsf(S) >= em ? 0 : R(-R(dden * em));
                if (bg == STOPGRAD) dS = 0, dm = 0;  // den and m held constant
                for (int i = 0; i < dk_; i++) dqh[i] = 0;
                for (int s = 0; s <= t; s++) {
                    float dC = 0;
                    for (int j = 0; j < dv_; j++)
                        dC = R(dC + MM(R((float)gh[IX(t) * dv_ + j]), R((float)v[IX(s) * dv_ + j])));
                    dC = R(dC / den);
                    float C = R(gq[s] * E[s]);
                    for (int j = 0; j < dv_; j++)
                        dv[IX(s) * dv_ + j] =
                            R((float)dv[IX(s) * dv_ + j] + MM(C, R((float)gh[IX(t) * dv_ + j] / den)));
                    float dg = R(R(dC * E[s]) + R(dS * Es[s]));
                    dD[s] = R(R(R(dC * gq[s]) * E[s]) + R(R(dS * gq[s]) * Es[s]));
                    if (bg == STOPGRAD) (void)0;
                    else if (bg != BUG_STAB) dm = R(dm - R(R(dC * gq[s]) * E[s]) - R(R(dS * gq[s]) * Es[s]));
                    else dm = R(dm - R(R(dC * gq[s]) * E[s]));
                    for (int i = 0; i < dk_; i++) {
                        dqh[i] = R(dqh[i] + MM(dg, R((float)k[IX(s) * dk_ + i])));
                        dk[IX(s) * dk_ + i] = R((float)dk[IX(s) * dk_ + i] + MM(dg, qh[i]));
                    }
                }
                dD[arg] = R(dD[arg] + dm);
                for (int i = 0; i < dk_; i++) dq[IX(t) * dk_ + i] = R((float)dq[IX(t) * dk_ + i] + R(dqh[i] * sc));
                // D̃_ts = cs_t − cs_s + ĩ_s, cs_r = Σ_{u≤r} logσ(f̃_u): f̃_u gets σ(−f̃_u) times
                // Σ_{s≤t} dD_s (through cs_t) − Σ_{u≤s≤t} dD_s (through cs_s) = Σ_{s<u} dD_s.
                float pre = 0;
                for (int u = 0; u <= t; u++) {
                    di[IX(u)] = R((float)di[IX(u)] + dD[u]);
                    if (u > 0) df[IX(u)] = R((float)df[IX(u)] + R(pre * R(1.0f / (1.0f + expf((float)fg[IX(u)])))));
                    pre = R(pre + dD[u]);
                }
            }
        }
#undef IX
    free(cs), free(D), free(E), free(Es), free(gq), free(dD);
}

// --- their mLSTM, recurrent form: float states stepped forward, the backward by hand with the
// sums over the other index first (a different order from check/'s). BUG_FSTAB: the forget
// factor f′ = e^{φ} without the stabiliser shift e^{m_{t−1} − m_t}; BUG_ISTAB: i′ = e^{ĩ}
// without −m_t. Either mixes a state scaled by e^{−m} with one that is not.
static void their_mlstm_rec(int B, int T, int H, int dk_, int dv_, bug bg, rnd R, float m0, const double *q,
                            const double *k, const double *v, const double *ig, const double *fg, const double *gh,
                            double *h, double *dq, double *dk, double *dv, double *di, double *df) {
    // the states of every step (T + 1 of them: C, n, m) kept for the backward, as a tape
    size_t T1 = (size_t)T + 1, kv = (size_t)dk_ * dv_;
    float *Cs = malloc(T1 * kv * 4), *ns = malloc(T1 * dk_ * 4), *m = malloc(T1 * 4), *fp = malloc(T1 * 4),
          *ip = malloc(T1 * 4), *s = malloc(T1 * 4), *den = malloc(T1 * 4), *qh = malloc((size_t)dk_ * 4),
          *dC = malloc(kv * 4), *dn = malloc((size_t)dk_ * 4), *g = malloc((size_t)dv_ * 4);
    int *fb = malloc(T1 * sizeof(int));
    cr_assert(Cs && ns && m && fp && ip && s && den && qh && dC && dn && g && fb);
#define C(t, i, j) Cs[((size_t)(t) * dk_ + (i)) * dv_ + (j)]
#define N(t, i) ns[(size_t)(t) * dk_ + (i)]
#define DC(i, j) dC[(size_t)(i) * dv_ + (j)]
    float sc = R(1.0f / sqrtf((float)dk_));
#define IX(t) (((size_t)b * T + (t)) * H + hh)
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < H; hh++) {
            memset(Cs, 0, kv * 4), memset(ns, 0, (size_t)dk_ * 4);
            m[0] = m0;
            for (int t = 0; t < T; t++) {
                float it = R((float)ig[IX(t)]), phi = R(lsigf(R((float)fg[IX(t)]))), a = R(phi + m[t]);
                fb[t] = a >= it;
                m[t + 1] = fmaxf(a, it);
                fp[t] = bg == BUG_FSTAB ? R(expf(phi)) : R(expf(R(a - m[t + 1])));
                ip[t] = bg == BUG_ISTAB ? R(expf(it)) : R(expf(R(it - m[t + 1])));
                for (int i = 0; i < dk_; i++) {
                    float ki = R((float)k[IX(t) * dk_ + i]);
                    for (int j = 0; j < dv_; j++)
                        C(t + 1, i, j) = R(R(fp[t] * C(t, i, j)) + R(ip[t] * MM(ki, R((float)v[IX(t) * dv_ + j]))));
                    N(t + 1, i) = R(R(fp[t] * N(t, i)) + R(ip[t] * ki));
                    qh[i] = R(R((float)q[IX(t) * dk_ + i]) * sc);
                }
                float acc = 0;
                for (int i = dk_ - 1; i >= 0; i--) acc = R(acc + MM(N(t + 1, i), qh[i]));
                s[t] = acc;
                den[t] = R(fmaxf(fabsf(acc), R(expf(-m[t + 1]))) + 1e-6f);
                for (int j = 0; j < dv_; j++) {
                    float a2 = 0;
                    for (int i = dk_ - 1; i >= 0; i--) a2 = R(a2 + MM(C(t + 1, i, j), qh[i]));
                    h[IX(t) * dv_ + j] = R(a2 / den[t]);
                }
            }
            memset(dC, 0, kv * 4), memset(dn, 0, (size_t)dk_ * 4);
            float dmc = 0;
            for (int t = T - 1; t >= 0; t--) {
                float em = R(expf(-m[t + 1])), dden = 0;
                for (int j = 0; j < dv_; j++) {
                    g[j] = R((float)gh[IX(t) * dv_ + j]);
                    dden = R(dden + R(g[j] * (float)h[IX(t) * dv_ + j]));
                }
                dden = R(-R(dden / den[t]));
                int nb = fabsf(s[t]) >= em;
                float ds = nb ? (s[t] > 0 ? dden : s[t] < 0 ? -dden : 0) : 0, dm = R(dmc + (nb ? 0 : R(-R(dden * em))));
                for (int i = 0; i < dk_; i++) qh[i] = R(R((float)q[IX(t) * dk_ + i]) * sc);
                for (int i = 0; i < dk_; i++) {
                    float a = 0;
                    for (int j = 0; j < dv_; j++) {
                        float gd = R(g[j] / den[t]);
                        a = R(a + MM(C(t + 1, i, j), gd));
                        DC(i, j) = R(DC(i, j) + MM(gd, qh[i]));
                    }
                    dn[i] = R(dn[i] + R(ds * qh[i]));
                    dq[IX(t) * dk_ + i] = R(R(a + R(ds * N(t + 1, i))) * sc);
                }
                float dfp = 0, dip = 0;
                for (int j = 0; j < dv_; j++) {
                    float vj = R((float)v[IX(t) * dv_ + j]), a = 0;
                    for (int i = 0; i < dk_; i++) a = R(a + MM(DC(i, j), R((float)k[IX(t) * dk_ + i])));
                    dv[IX(t) * dv_ + j] = R(ip[t] * a);
                    dip = R(dip + R(a * vj));
                }
                for (int i = 0; i < dk_; i++) {
                    float ki = R((float)k[IX(t) * dk_ + i]), a = dn[i];
                    for (int j = 0; j < dv_; j++) {
                        a = R(a + MM(DC(i, j), R((float)v[IX(t) * dv_ + j])));
                        dfp = R(dfp + MM(DC(i, j), C(t, i, j)));
                    }
                    dfp = R(dfp + R(dn[i] * N(t, i)));
                    dip = R(dip + R(dn[i] * ki));
                    dk[IX(t) * dk_ + i] = R(ip[t] * a);
                }
                for (int i = 0; i < dk_; i++) {
                    dn[i] = R(fp[t] * dn[i]);
                    for (int j = 0; j < dv_; j++) DC(i, j) = R(fp[t] * DC(i, j));
                }
                float ga = R(dfp * fp[t]), gi = R(dip * ip[t]);
                dm = R(R(dm - (bg == BUG_FSTAB ? 0 : ga)) - (bg == BUG_ISTAB ? 0 : gi));
                if (fb[t]) ga = R(ga + dm);
                else gi = R(gi + dm);
                di[IX(t)] = gi;
                df[IX(t)] = R(ga * R(1.0f / (1.0f + expf((float)fg[IX(t)]))));
                dmc = bg == BUG_FSTAB ? R(ga - R(dfp * fp[t])) : ga;  // the buggy f′ has no m_{t−1} path
            }
        }
#undef IX
#undef C
#undef N
#undef DC
    free(Cs), free(ns), free(m), free(fp), free(ip), free(s), free(den), free(qh), free(dC), free(dn), free(g), free(fb);
}

// --- their mLSTM, chunkwise forward and backward (the form fast kernels use): chunks of L steps;
// within a chunk the parallel form on the chunk's own cumulative log-forgets b, between chunks
// the state (C, n, m) carried, and the backward the same way in reverse: per chunk, from the
// gradients of its end state, the gradients of its inputs and of its start state. carried 1: the
// stabiliser starts at m0 and is carried as the recurrent form carries it (m_t = max(b_t +
// m_prev, max_s D_ts)), so the function is phax's form=recurrent; carried 0: it starts at −∞ (no
// state before the first chunk), so m_t is the parallel form's max_s D_ts and the function is
// form=parallel. The backward is the exact derivative of this forward as written: h =
// num/(max(|nq|, e^{−m}) + eps) depends on m only through the e^{−m} branch and eps, but every
// e^{x − m} term's path to m is taken (they cancel in exact arithmetic), and m's gradient goes
// to its max's winner (the carried term on a tie). BUG_CARRY: the chunk's decay not applied to
// the carried state (C, n kept at full weight), its gradient that of the bugged function.
static void their_mlstm_chunk(int B, int T, int H, int dk_, int dv_, bug bg, rnd R, int L, int carried, float m0,
                              const double *q, const double *k, const double *v, const double *ig, const double *fg,
                              const double *gh, double *h, double *dq, double *dk, double *dv, double *di,
                              double *df) {
    size_t kv = (size_t)dk_ * dv_;
    int nc = (T + L - 1) / L;
    // the tape: each chunk's start state; per step its stabiliser, normaliser sum and denominator
    float *Ct = malloc((size_t)nc * kv * 4), *nt = malloc((size_t)nc * dk_ * 4), *mp = malloc((size_t)nc * 4),
          *mtt = malloc((size_t)T * 4), *nqt = malloc((size_t)T * 4), *dent = malloc((size_t)T * 4);
    float *C = malloc(kv * 4), *n = malloc((size_t)dk_ * 4), *bc = malloc((size_t)L * 4), *D = malloc((size_t)L * 4),
          *qh = malloc((size_t)dk_ * 4), *num = malloc((size_t)dv_ * 4), *dC = malloc(kv * 4),
          *dn = malloc((size_t)dk_ * 4), *dCp = malloc(kv * 4), *dnp = malloc((size_t)dk_ * 4),
          *dbc = malloc((size_t)L * 4), *dqh = malloc((size_t)dk_ * 4), *dnum = malloc((size_t)dv_ * 4),
          *dks = malloc((size_t)L * dk_ * 4), *dvs = malloc((size_t)L * dv_ * 4), *dis = malloc((size_t)L * 4);
    cr_assert(Ct && nt && mp && mtt && nqt && dent && C && n && bc && D && qh && num && dC && dn && dCp && dnp && dbc &&
              dqh && dnum && dks && dvs && dis);
    float sc = R(1.0f / sqrtf((float)dk_));
#define IX(t) (((size_t)b * T + (t)) * H + hh)
#define KK(t, i) R((float)k[IX(t) * dk_ + (i)])
#define VV(t, j) R((float)v[IX(t) * dv_ + (j)])
#define IG(t) R((float)ig[IX(t)])
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < H; hh++) {
            memset(C, 0, kv * 4), memset(n, 0, (size_t)dk_ * 4);
            float m = carried ? m0 : -INFINITY;
            for (int c = 0; c < nc; c++) {
                int t0 = c * L, len = T - t0 < L ? T - t0 : L;
                memcpy(Ct + (size_t)c * kv, C, kv * 4), memcpy(nt + (size_t)c * dk_, n, (size_t)dk_ * 4), mp[c] = m;
                for (int j = 0; j < len; j++) bc[j] = R((j ? bc[j - 1] : 0.0f) + R(lsigf(R((float)fg[IX(t0 + j)]))));
                for (int j = 0; j < len; j++) {  // the outputs of the chunk
                    int t = t0 + j;
                    float mt = m == -INFINITY ? -INFINITY : R(bc[j] + m);
                    for (int s = 0; s <= j; s++) {
                        D[s] = R(R(bc[j] - bc[s]) + IG(t0 + s));
                        mt = fmaxf(mt, D[s]);
                    }
                    for (int i = 0; i < dk_; i++) qh[i] = R(R((float)q[IX(t) * dk_ + i]) * sc);
                    float ei = m == -INFINITY ? 0.0f : R(expf(R(R(bc[j] + m) - mt))), nq = 0;
                    for (int i = 0; i < dk_; i++) nq = R(nq + MM(qh[i], n[i]));
                    nq = R(ei * nq);
                    for (int jv = 0; jv < dv_; jv++) {
                        float a = 0;
                        for (int i = 0; i < dk_; i++) a = R(a + MM(qh[i], C[(size_t)i * dv_ + jv]));
                        num[jv] = R(ei * a);
                    }
                    for (int s = 0; s <= j; s++) {
                        float a = 0;
                        for (int i = 0; i < dk_; i++) a = R(a + MM(qh[i], KK(t0 + s, i)));
                        float wgt = R(a * R(expf(R(D[s] - mt))));
                        nq = R(nq + wgt);
                        for (int jv = 0; jv < dv_; jv++) num[jv] = R(num[jv] + MM(wgt, VV(t0 + s, jv)));
                    }
                    float den = R(fmaxf(fabsf(nq), R(expf(-mt))) + 1e-6f);
                    mtt[t] = mt, nqt[t] = nq, dent[t] = den;
                    for (int jv = 0; jv < dv_; jv++) h[IX(t) * dv_ + jv] = R(num[jv] / den);
                }
                // the state at the chunk's end: decayed by the chunk, plus its keys and values
                float bl = bc[len - 1], mn = m == -INFINITY ? -INFINITY : R(bl + m);
                for (int s = 0; s < len; s++) mn = fmaxf(mn, R(R(bl - bc[s]) + IG(t0 + s)));
                float sp = m == -INFINITY ? 0.0f : bg == BUG_CARRY ? 1.0f : R(expf(R(R(bl + m) - mn)));
                for (size_t i = 0; i < kv; i++) C[i] = R(sp * C[i]);
                for (int i = 0; i < dk_; i++) n[i] = R(sp * n[i]);
                for (int s = 0; s < len; s++) {
                    float w = R(expf(R(R(R(bl - bc[s]) + IG(t0 + s)) - mn)));
                    for (int i = 0; i < dk_; i++) {
                        float wk = R(w * KK(t0 + s, i));
                        n[i] = R(n[i] + wk);
                        for (int jv = 0; jv < dv_; jv++)
                            C[(size_t)i * dv_ + jv] = R(C[(size_t)i * dv_ + jv] + MM(wk, VV(t0 + s, jv)));
                    }
                }
                m = mn;
            }
            // Backward, chunk by chunk from the last: dC, dn, dm the gradients of the chunk's end state.
            memset(dC, 0, kv * 4), memset(dn, 0, (size_t)dk_ * 4);
            float dm = 0;
            for (int c = nc - 1; c >= 0; c--) {
                int t0 = c * L, len = T - t0 < L ? T - t0 : L;
                const float *Cp = Ct + (size_t)c * kv, *np = nt + (size_t)c * dk_;
                float m_ = mp[c], dmp = 0;
                int has = m_ != -INFINITY;  // a start state (carried, or the first chunk's m0)
                memset(dCp, 0, kv * 4), memset(dnp, 0, (size_t)dk_ * 4), memset(dbc, 0, (size_t)L * 4);
                memset(dks, 0, (size_t)L * dk_ * 4), memset(dvs, 0, (size_t)L * dv_ * 4), memset(dis, 0, (size_t)L * 4);
                for (int j = 0; j < len; j++) bc[j] = R((j ? bc[j - 1] : 0.0f) + R(lsigf(R((float)fg[IX(t0 + j)]))));
                float bl = bc[len - 1], dbl = 0;
                // (1) the end state C = sp·Cp + Σ_s w_s k_s v_sᵀ, n = sp·np + Σ_s w_s k_s, m = mn
                float mn = has ? R(bl + m_) : -INFINITY;
                int win = -1;  // the max's winner: −1 the carried term, else s
                for (int s = 0; s < len; s++) {
                    float x = R(R(bl - bc[s]) + IG(t0 + s));
                    if (x > mn) mn = x, win = s;
                }
                float dmn = dm;
                if (has && bg != BUG_CARRY) {
                    float sp = R(expf(R(R(bl + m_) - mn))), dsp = 0;
                    for (size_t i = 0; i < kv; i++) dsp = R(dsp + MM(dC[i], Cp[i])), dCp[i] = R(sp * dC[i]);
                    for (int i = 0; i < dk_; i++) dsp = R(dsp + MM(dn[i], np[i])), dnp[i] = R(sp * dn[i]);
                    float x = R(dsp * sp);  // d(bl + m_ − mn)
                    dbl = R(dbl + x), dmp = R(dmp + x), dmn = R(dmn - x);
                } else if (has) {  // the bug: sp = 1, a constant
                    memcpy(dCp, dC, kv * 4), memcpy(dnp, dn, (size_t)dk_ * 4);
                }
                for (int s = 0; s < len; s++) {
                    float w = R(expf(R(R(R(bl - bc[s]) + IG(t0 + s)) - mn))), dw = 0;
                    for (int i = 0; i < dk_; i++) {
                        float ki = KK(t0 + s, i), a = dn[i];
                        for (int jv = 0; jv < dv_; jv++) {
                            float g = dC[(size_t)i * dv_ + jv];
                            a = R(a + MM(g, VV(t0 + s, jv)));
                            dvs[(size_t)s * dv_ + jv] = R(dvs[(size_t)s * dv_ + jv] + MM(R(w * ki), g));
                        }
                        dw = R(dw + MM(a, ki));
                        dks[(size_t)s * dk_ + i] = R(dks[(size_t)s * dk_ + i] + R(w * a));
                    }
                    float x = R(dw * w);  // d(bl − bc_s + ĩ_s − mn)
                    dbl = R(dbl + x), dbc[s] = R(dbc[s] - x), dis[s] = R(dis[s] + x), dmn = R(dmn - x);
                }
                if (win < 0) dbl = R(dbl + dmn), dmp = R(dmp + dmn);
                else dbl = R(dbl + dmn), dbc[win] = R(dbc[win] - dmn), dis[win] = R(dis[win] + dmn);
                dbc[len - 1] = R(dbc[len - 1] + dbl);
                // (2) the outputs: h_t = num/den, den = max(|nq|, e^{−mt}) + eps,
                // nq = ei·(q̂·np) + Σ_s a_s E_s, num = ei·(q̂ᵀCp) + Σ_s a_s E_s v_s,
                // a_s = q̂·k_s, E_s = e^{D_s − mt}, ei = e^{b_j + m_ − mt}
                for (int j = 0; j < len; j++) {
                    int t = t0 + j;
                    float mt = mtt[t], nq = nqt[t], den = dent[t], em = R(expf(-mt)), dden = 0;
                    for (int jv = 0; jv < dv_; jv++) {
                        float g = R((float)gh[IX(t) * dv_ + jv]);
                        dnum[jv] = R(g / den);
                        dden = R(dden - R(g * (float)h[IX(t) * dv_ + jv]));
                    }
                    dden = R(dden / den);
                    int nb = fabsf(nq) >= em;
                    float dnq = nb ? (nq > 0 ? dden : nq < 0 ? -dden : 0) : 0, dmt = nb ? 0 : R(-R(dden * em));
                    for (int i = 0; i < dk_; i++) qh[i] = R(R((float)q[IX(t) * dk_ + i]) * sc), dqh[i] = 0;
                    int wt = -1;  // mt's winner
                    float mx = has ? R(bc[j] + m_) : -INFINITY;
                    for (int s = 0; s <= j; s++) {
                        D[s] = R(R(bc[j] - bc[s]) + IG(t0 + s));
                        if (D[s] > mx) mx = D[s], wt = s;
                    }
                    if (has) {
                        float ei = R(expf(R(R(bc[j] + m_) - mt))), dei = 0;
                        for (int i = 0; i < dk_; i++) {
                            float a = R(dnq * np[i]);
                            dei = R(dei + MM(R(qh[i] * dnq), np[i]));
                            for (int jv = 0; jv < dv_; jv++) {
                                float cij = Cp[(size_t)i * dv_ + jv];
                                a = R(a + MM(cij, dnum[jv]));
                                dei = R(dei + MM(R(qh[i] * cij), dnum[jv]));
                                dCp[(size_t)i * dv_ + jv] = R(dCp[(size_t)i * dv_ + jv] + MM(R(ei * qh[i]), dnum[jv]));
                            }
                            dnp[i] = R(dnp[i] + R(R(ei * dnq) * qh[i]));
                            dqh[i] = R(dqh[i] + R(ei * a));
                        }
                        float x = R(dei * ei);  // d(b_j + m_ − mt)
                        dbc[j] = R(dbc[j] + x), dmp = R(dmp + x), dmt = R(dmt - x);
                    }
                    for (int s = 0; s <= j; s++) {
                        float a = 0;
                        for (int i = 0; i < dk_; i++) a = R(a + MM(qh[i], KK(t0 + s, i)));
                        float E = R(expf(R(D[s] - mt))), wgt = R(a * E), dwg = dnq;
                        for (int jv = 0; jv < dv_; jv++) {
                            dwg = R(dwg + MM(dnum[jv], VV(t0 + s, jv)));
                            dvs[(size_t)s * dv_ + jv] = R(dvs[(size_t)s * dv_ + jv] + MM(wgt, dnum[jv]));
                        }
                        float da = R(dwg * E), x = R(R(dwg * a) * E);  // x: d(D_s − mt)
                        for (int i = 0; i < dk_; i++) {
                            dqh[i] = R(dqh[i] + MM(da, KK(t0 + s, i)));
                            dks[(size_t)s * dk_ + i] = R(dks[(size_t)s * dk_ + i] + MM(da, qh[i]));
                        }
                        dbc[j] = R(dbc[j] + x), dbc[s] = R(dbc[s] - x), dis[s] = R(dis[s] + x), dmt = R(dmt - x);
                    }
                    if (wt < 0) dbc[j] = R(dbc[j] + dmt), dmp = R(dmp + dmt);
                    else dbc[j] = R(dbc[j] + dmt), dbc[wt] = R(dbc[wt] - dmt), dis[wt] = R(dis[wt] + dmt);
                    for (int i = 0; i < dk_; i++) dq[IX(t) * dk_ + i] = R(dqh[i] * sc);
                }
                // b_j = Σ_{r ≤ j} φ_r: dφ_r = Σ_{j ≥ r} db_j; φ = logσ(f̃), dφ/df̃ = σ(−f̃)
                float acc = 0;
                for (int r = len - 1; r >= 0; r--) {
                    acc = R(acc + dbc[r]);
                    df[IX(t0 + r)] = R(acc * R(1.0f / (1.0f + expf((float)fg[IX(t0 + r)]))));
                    di[IX(t0 + r)] = dis[r];
                    for (int i = 0; i < dk_; i++) dk[IX(t0 + r) * dk_ + i] = dks[(size_t)r * dk_ + i];
                    for (int jv = 0; jv < dv_; jv++) dv[IX(t0 + r) * dv_ + jv] = dvs[(size_t)r * dv_ + jv];
                }
                memcpy(dC, dCp, kv * 4), memcpy(dn, dnp, (size_t)dk_ * 4), dm = dmp;
            }
        }
#undef IX
#undef KK
#undef VV
#undef IG
    free(Ct), free(nt), free(mp), free(mtt), free(nqt), free(dent), free(C), free(n), free(bc), free(D), free(qh);
    free(num), free(dC), free(dn), free(dCp), free(dnp), free(dbc), free(dqh), free(dnum), free(dks), free(dvs), free(dis);
}

// --- files and runs ------------------------------------------------------------------------------
static char *g_dir;

static double *normal(size_t n, phax_rng *r, double s) {
    double *x = malloc((n ? n : 1) * sizeof *x);
    cr_assert(x);
    for (size_t i = 0; i < n; i++) x[i] = (double)(float)(s * phax_rng_normal(r));  // float32-exact inputs
    return x;
}

static void add(phax_st_writer *w, const char *name, const double *x, int ndim, const int64_t *shape) {
    cr_assert(phax_st_add_f32_from_f64(w, name, x, ndim, shape) == PHAX_OK, "%s", phax_error());
}

static void write_free(phax_st_writer *w, const char *path) {
    cr_assert(phax_st_write(w, path) == PHAX_OK, "%s", phax_error());
    phax_st_writer_free(w);
}

typedef struct {
    int rc;
    char *out, *err;
} run;

// --max-memory of every check the tests run: the sweep's T 1024 draws hold the roundings of two
// baselines (docs/oracle.md: a large check needs the option, as a user's would).
#define CHECK_MAX_MIB "2048"

static run check(const char *op, const char *in, const char *theirs, const char *prec, int json) {
    char *o = tu_join(g_dir, "stdout"), *e = tu_join(g_dir, "stderr");
    run r;
    r.rc = tu_phax(o, e, NULL, NULL, "check", op, in, theirs, "--precision", prec, "--max-memory", CHECK_MAX_MIB,
                   json ? "--json" : NULL, NULL);
    r.out = tu_slurp(o, NULL), r.err = tu_slurp(e, NULL);
    free(o), free(e);
    if (getenv("PHAX_CHECK_PRINT")) printf("$ phax check %s IN THEIRS --precision %s\n%s", op, prec, r.out);
    return r;
}

static void run_free(run *r) { free(r->out), free(r->err); }

// The ratio on the verdict line ("... ratio X)"); NaN if absent.
static double verdict_ratio(const char *out) {
    const char *v = strstr(out, "\nFAIL: ");
    if (!v) v = strstr(out, "\nPASS: ");
    const char *r = v ? strstr(v, "ratio ") : NULL;
    return r ? strtod(r + 6, NULL) : NAN;
}

static void expect_pass(run *r, const char *what) {
    cr_log_info("%s:\n%s", what, r->out);
    cr_expect(r->rc == 0 && strstr(r->out, "\nPASS: all") && !r->err[0], "%s: exit %d, expected PASS:\n%s%s", what,
              r->rc, r->out, r->err);
    double q = verdict_ratio(r->out);
    cr_expect(q <= BOUND_C, "%s: worst ratio %g", what, q);
}

static void expect_fail(run *r, const char *what) {
    double q = verdict_ratio(r->out);
    fprintf(stderr, "gallery: %s -> FAIL, ratio %.3g\n", what, q);
    cr_log_info("%s:\n%s", what, r->out);
    cr_expect(r->rc == 1 && strstr(r->out, "\nFAIL: ") && !r->err[0], "%s: exit %d, expected FAIL:\n%s%s", what,
              r->rc, r->out, r->err);
    cr_expect(!strstr(r->out, "PASS: "), "%s: a FAIL's report says PASS too:\n%s", what, r->out);
    cr_expect(q > BOUND_C, "%s: ratio %g is not above C = %g", what, q, BOUND_C);
}

// IN for attention case c, and THEIRS from their implementation (bug bg, rounding R).
// The same from seed, with q and k drawn at scale sqk (the logits' spread).
static void attention_files_seeded(const acase *c, const char *in, const char *theirs, bug bg, rnd R, uint64_t seed,
                                   double sqk);
static void attention_files(const acase *c, const char *in, const char *theirs, bug bg, rnd R) {
    attention_files_seeded(c, in, theirs, bg, R, 1234, 1);
}
static void attention_files_seeded(const acase *c, const char *in, const char *theirs, bug bg, rnd R, uint64_t seed,
                                   double sqk) {
    phax_rng rng = phax_rng_new(seed);
    size_t nq = qn(c), nk = kn(c);
    int64_t qs[4] = {c->B, c->T, c->Hq, c->dh}, ks[4] = {c->B, c->T, c->Hkv, c->dh}, ls[1] = {c->Hq};
    double *q = normal(nq, &rng, sqk), *k = normal(nk, &rng, sqk), *v = normal(nk, &rng, 1), *gy = normal(nq, &rng, 1);
    double *l = normal((size_t)c->Hq, &rng, 0.5);
    for (int h = 0; h < c->Hq; h++) l[h] += 2;  // cosine scales around e² ≈ 7
    phax_st_writer *w = phax_st_writer_new();
    add(w, "q", q, 4, qs), add(w, "k", k, 4, ks), add(w, "v", v, 4, ks), add(w, "grad.y", gy, 4, qs);
    if (c->cosine) add(w, "logscale", l, 1, ls);
    char wbuf[32];
    snprintf(wbuf, sizeof wbuf, "%d", c->window);
    cr_assert(!phax_st_add_meta(w, "window", wbuf) && !phax_st_add_meta(w, "score", c->cosine ? "cosine" : "dot") &&
              !phax_st_add_meta(w, "rope", c->rope ? "1" : "0"));
    write_free(w, in);
    double *y = malloc(nq * 8), *dq = malloc(nq * 8), *dk = malloc(nk * 8), *dv = malloc(nk * 8), dl[16];
    cr_assert(y && dq && dk && dv);
    their_attention(c, bg, R, q, k, v, l, gy, y, dq, dk, dv, dl);
    w = phax_st_writer_new();
    add(w, "y", y, 4, qs), add(w, "grad.q", dq, 4, qs), add(w, "grad.k", dk, 4, ks), add(w, "grad.v", dv, 4, ks);
    if (c->cosine) add(w, "grad.logscale", dl, 1, ls);
    write_free(w, theirs);
    free(q), free(k), free(v), free(gy), free(l), free(y), free(dq), free(dk), free(dv);
}

static void conv_files(const char *in, const char *theirs, int shift, rnd R) {
    enum { B = 2, T = 24, H = 3 };
    phax_rng rng = phax_rng_new(99);
    int64_t us[3] = {B, T, H}, ks[2] = {H, T}, hs[1] = {H};
    double *u = normal(B * T * H, &rng, 1), *k = normal(H * T, &rng, 0.3), *d = normal(H, &rng, 1);
    double *gy = normal(B * T * H, &rng, 1);
    phax_st_writer *w = phax_st_writer_new();
    add(w, "u", u, 3, us), add(w, "k", k, 2, ks), add(w, "d", d, 1, hs), add(w, "grad.y", gy, 3, us);
    write_free(w, in);
    double y[B * T * H], du[B * T * H], dk[H * T], dd[H];
    their_conv(B, T, H, shift, R, u, k, d, gy, y, du, dk, dd);
    w = phax_st_writer_new();
    add(w, "y", y, 3, us), add(w, "grad.u", du, 3, us), add(w, "grad.k", dk, 2, ks), add(w, "grad.d", dd, 1, hs);
    write_free(w, theirs);
    free(u), free(k), free(d), free(gy);
}

static void setup(void) { g_dir = tu_tmpdir("phax_check"); }
static void teardown(void) {
    tu_rm_rf(g_dir);
    free(g_dir);
}
TestSuite(check, .init = setup, .fini = teardown);

// GQA (4 query heads on 2 kv heads), a window of 5 over T = 16, RoPE: every part a bug can hit.
static const acase DOT = {2, 16, 4, 2, 8, 5, 0, 1};
static const acase COS = {2, 16, 4, 2, 8, 5, 1, 1};

static void attention_case(const acase *c, bug bg, rnd R, const char *prec, int want_pass, const char *what) {
    char *in = tu_join(g_dir, "in.safetensors"), *th = tu_join(g_dir, "theirs.safetensors");
    attention_files(c, in, th, bg, R);
    run r = check("attention", in, th, prec, 0);
    if (want_pass) expect_pass(&r, what);
    else expect_fail(&r, what);
    run_free(&r), free(in), free(th);
}

// --- correct computations PASS at their precision -------------------------------------------
Test(check, attention_dot_f32_passes) { attention_case(&DOT, OK, r_f32, "f32", 1, "attention dot, correct f32"); }
Test(check, attention_dot_bf16_passes) { attention_case(&DOT, OK, r_bf16, "bf16", 1, "attention dot, correct bf16"); }
Test(check, attention_cosine_f32_passes) { attention_case(&COS, OK, r_f32, "f32", 1, "attention cosine, correct f32"); }
Test(check, attention_cosine_bf16_passes) {
    attention_case(&COS, OK, r_bf16, "bf16", 1, "attention cosine, correct bf16");
}
Test(check, attention_full_causal_no_rope_f32_passes) {
    acase c = DOT;
    c.window = 0, c.rope = 0;
    attention_case(&c, OK, r_f32, "f32", 1, "attention dot, full causal, no RoPE, correct f32");
}
// A correct float32 computation judged at bf16 is well inside (its error is far below bf16's).
Test(check, attention_f32_passes_at_bf16) { attention_case(&DOT, OK, r_f32, "bf16", 1, "attention, f32 at bf16"); }
// ... and a bf16 computation judged at f32 is not: the precision matters.
Test(check, attention_bf16_fails_at_f32) { attention_case(&DOT, OK, r_bf16, "f32", 0, "attention, bf16 at f32"); }

// --- the gallery: each bug FAILs, its ratio printed --------------------------------------------
Test(check, gallery_causal_off_by_one) {
    acase c = DOT;
    c.window = 0;
    attention_case(&c, BUG_CAUSAL, r_f32, "f32", 0, "causal mask off by one (s <= t+1)");
}
Test(check, gallery_window_edge) { attention_case(&DOT, BUG_WINDOW, r_f32, "f32", 0, "window edge off by one"); }
Test(check, gallery_rope_missing_on_k) { attention_case(&DOT, BUG_ROPE_K, r_f32, "f32", 0, "RoPE missing on k"); }
Test(check, gallery_gqa_mod) { attention_case(&DOT, BUG_GQA, r_f32, "f32", 0, "GQA head map h % G for h / G"); }
Test(check, gallery_window_edge_cosine_bf16) {
    attention_case(&COS, BUG_WINDOW, r_bf16, "bf16", 0, "window edge off by one (cosine, bf16)");
}
Test(check, gallery_gqa_mod_bf16) { attention_case(&DOT, BUG_GQA, r_bf16, "bf16", 0, "GQA h % G (bf16)"); }

// --- a FAIL that is a known convention mismatch is named (phax_check_diagnose) ------------------
// Their correct float32 attention under another convention: FAIL, and the hint line names it;
// a bug that is no convention (GQA h % G, causal off by one) gets no hint, nor does a PASS.
static void hint_case(const acase *c, bug bg, const char *prec, const char *frag, const char *what) {
    char *in = tu_join(g_dir, "in.safetensors"), *th = tu_join(g_dir, "theirs.safetensors");
    attention_files(c, in, th, bg, bg == OK ? r_f32 : r_f32);
    run r = check("attention", in, th, prec, 0);
    if (frag) {
        expect_fail(&r, what);
        char *h = strstr(r.out, "\nhint: ");
        cr_expect(h && strstr(h, frag), "%s: no hint naming '%s':\n%s", what, frag, r.out);
    } else {
        cr_expect(!strstr(r.out, "hint:"), "%s: a hint where none fits:\n%s", what, r.out);
    }
    run_free(&r), free(in), free(th);
}
Test(check, hint_window_one_wider) {
    hint_case(&DOT, BUG_WINDOW_WIDE, "f32", "window 6, one key more", "window w+1 (FlashAttention (w, 0))");
    hint_case(&COS, BUG_WINDOW_WIDE, "bf16", "window 6, one key more", "window w+1, cosine, at bf16");
}
Test(check, hint_rope_interleaved) {
    hint_case(&DOT, BUG_ROPE_IL, "f32", "interleaved pairing", "RoPE interleaved");
    hint_case(&COS, BUG_ROPE_IL, "f32", "interleaved pairing", "RoPE interleaved, cosine");
}
Test(check, hint_rope_off) { hint_case(&DOT, BUG_NO_ROPE, "f32", "no RoPE", "no RoPE on q and k"); }
Test(check, hint_missing_scale) { hint_case(&DOT, BUG_NO_SCALE, "f32", "without the 1/sqrt(dh)", "no 1/sqrt(dh)"); }
Test(check, no_hint_for_other_bugs_or_a_pass) {
    hint_case(&DOT, BUG_GQA, "f32", NULL, "GQA h % G");
    acase c = DOT;
    c.window = 0;
    hint_case(&c, BUG_CAUSAL, "f32", NULL, "causal off by one");
    hint_case(&DOT, OK, "f32", NULL, "correct");
}

static void conv_case(int shift, rnd R, const char *prec, int want_pass, const char *what) {
    char *in = tu_join(g_dir, "in.safetensors"), *th = tu_join(g_dir, "theirs.safetensors");
    conv_files(in, th, shift, R);
    run r = check("ssm_conv", in, th, prec, 0);
    if (want_pass) expect_pass(&r, what);
    else expect_fail(&r, what);
    run_free(&r), free(in), free(th);
}
Test(check, ssm_conv_f32_passes) { conv_case(0, r_f32, "f32", 1, "ssm_conv, correct f32"); }
Test(check, ssm_conv_bf16_passes) { conv_case(0, r_bf16, "bf16", 1, "ssm_conv, correct bf16"); }
Test(check, gallery_conv_kernel_shifted) { conv_case(1, r_f32, "f32", 0, "GSS conv kernel shifted by one"); }

// --- what cannot be judged: reported by name, one line each, exit 2, nothing written ------------
// THEIRS rewritten from the correct float32 one: without `drop`, plus `extra`, or with
// `reshape` given a wrong shape, or `retype` stored as I32.
static run mangled(const char *drop, const char *extra, const char *reshape, const char *retype) {
    char *in = tu_join(g_dir, "in.safetensors"), *th = tu_join(g_dir, "theirs.safetensors"),
         *bad = tu_join(g_dir, "bad.safetensors");
    attention_files(&DOT, in, th, OK, r_f32);
    phax_st_file f;
    cr_assert(phax_st_read(&f, th) == PHAX_OK, "%s", phax_error());
    phax_st_writer *w = phax_st_writer_new();
    for (int i = 0; i < f.n; i++) {
        const phax_st_tensor *t = &f.t[i];
        if (drop && !strcmp(t->name, drop)) continue;
        if (reshape && !strcmp(t->name, reshape)) {
            int64_t s[4] = {t->shape[0], t->shape[1], t->shape[2] * t->shape[3], 1};
            cr_assert(!phax_st_add_raw(w, t->name, t->dtype, 4, s, t->data));
        } else if (retype && !strcmp(t->name, retype)) {
            cr_assert(!phax_st_add_raw(w, t->name, PHAX_DT_I32, t->ndim, t->shape, t->data));
        } else {
            cr_assert(!phax_st_add_raw(w, t->name, t->dtype, t->ndim, t->shape, t->data));
        }
    }
    if (extra) {
        double z[3] = {0};
        int64_t s[1] = {3};
        add(w, extra, z, 1, s);
    }
    write_free(w, bad);
    phax_st_free(&f);
    run r = check("attention", in, bad, "f32", 0);
    free(in), free(th), free(bad);
    return r;
}

static void expect_mismatch(run *r, const char *line) {
    cr_expect(r->rc == 2, "exit %d, expected 2:\n%s%s", r->rc, r->out, r->err);
    cr_expect(strstr(r->out, line) != NULL, "no line '%s' in:\n%s", line, r->out);
    cr_expect(strstr(r->out, "\nMISMATCH: ") != NULL && !strstr(r->out, "PASS"), "verdict:\n%s", r->out);
}

Test(check, missing_tensor_named) {
    run r = mangled("grad.k", NULL, NULL, NULL);
    expect_mismatch(&r, "missing: tensor 'grad.k' (2, 16, 2, 8) is not in ");
    run_free(&r);
}
Test(check, extra_tensor_named) {
    run r = mangled(NULL, "grad.bias", NULL, NULL);
    expect_mismatch(&r, "extra: tensor 'grad.bias' in ");
    run_free(&r);
}
Test(check, shape_mismatch_named) {
    run r = mangled(NULL, NULL, "grad.v", NULL);
    expect_mismatch(&r, "shape: tensor 'grad.v' is (2, 16, 16, 1) in ");
    run_free(&r);
}
Test(check, dtype_mismatch_named) {
    run r = mangled(NULL, NULL, NULL, "y");
    expect_mismatch(&r, "dtype: tensor 'y' is I32 in ");
    run_free(&r);
}
Test(check, two_problems_two_lines) {
    run r = mangled("y", "extra_one", NULL, NULL);
    expect_mismatch(&r, "missing: tensor 'y'");
    expect_mismatch(&r, "extra: tensor 'extra_one'");
    cr_expect(strstr(r.out, "(2 problems above)") != NULL, "%s", r.out);
    run_free(&r);
}

// NaN anywhere in theirs fails the tensor (the comparison is written so NaN cannot pass).
Test(check, nan_fails) {
    char *in = tu_join(g_dir, "in.safetensors"), *th = tu_join(g_dir, "theirs.safetensors");
    attention_files(&DOT, in, th, OK, r_f32);
    phax_st_file f;
    cr_assert(phax_st_read(&f, th) == PHAX_OK);
    phax_st_writer *w = phax_st_writer_new();
    for (int i = 0; i < f.n; i++) {
        phax_st_tensor *t = &f.t[i];
        if (!strcmp(t->name, "grad.v")) {
            float nan = NAN;
            memcpy((unsigned char *)t->data + 4 * 7, &nan, 4);  // the reader's buffer is ours to change
        }
        cr_assert(!phax_st_add_raw(w, t->name, t->dtype, t->ndim, t->shape, t->data));
    }
    write_free(w, th);
    phax_st_free(&f);
    run r = check("attention", in, th, "f32", 0);
    cr_expect(r.rc == 1 && strstr(r.out, "\nFAIL: 1 of 4") && strstr(r.out, "grad.v"), "exit %d:\n%s", r.rc, r.out);
    run_free(&r), free(in), free(th);
}

// --json: one object with the same verdict.
Test(check, json_verdicts) {
    char *in = tu_join(g_dir, "in.safetensors"), *th = tu_join(g_dir, "theirs.safetensors");
    attention_files(&DOT, in, th, BUG_GQA, r_f32);
    run r = check("attention", in, th, "f32", 1);
    cr_expect(r.rc == 1 && strstr(r.out, "\"verdict\": \"FAIL\"") && strstr(r.out, "\"pass\": false") &&
                  r.out[0] == '{' && strstr(r.out, "}\n") == r.out + strlen(r.out) - 2,
              "exit %d:\n%s", r.rc, r.out);
    run_free(&r);
    attention_files(&DOT, in, th, OK, r_f32);
    r = check("attention", in, th, "f32", 1);
    cr_expect(r.rc == 0 && strstr(r.out, "\"verdict\": \"PASS\"") && !strstr(r.out, "\"pass\": false"), "exit %d:\n%s",
              r.rc, r.out);
    run_free(&r), free(in), free(th);
}

// Several THEIRS against one IN (the truth and the bound made once): each report the same as
// its own run gives, under a heading naming the file; exit status the worst verdict; --json an
// array; a bad file among them refused before anything is judged (nothing on stdout).
Test(check, several_theirs_one_bound) {
    char *in = tu_join(g_dir, "in.safetensors"), *ok = tu_join(g_dir, "ok.safetensors"),
         *bad = tu_join(g_dir, "bug.safetensors"), *junk = tu_join(g_dir, "junk.safetensors"),
         *o = tu_join(g_dir, "o"), *e = tu_join(g_dir, "e");
    attention_files(&DOT, in, bad, BUG_GQA, r_f32);
    attention_files(&DOT, in, ok, OK, r_f32);
    run a = check("attention", in, ok, "f32", 0), b = check("attention", in, bad, "f32", 0);
    cr_assert(a.rc == 0 && b.rc == 1, "alone: exit %d and %d", a.rc, b.rc);
    int rc = tu_phax(o, e, NULL, NULL, "check", "attention", in, ok, bad, "--precision", "f32", NULL);
    char *out = tu_slurp(o, NULL), *err = tu_slurp(e, NULL);
    char *h1 = strstr(out, "== THEIRS 1 of 2: "), *h2 = strstr(out, "== THEIRS 2 of 2: ");
    cr_expect(rc == 1 && !err[0] && h1 == out && h2 && strstr(h1, "ok.safetensors ==\n") < h2 &&
                  strstr(h2, "bug.safetensors ==\n"),
              "exit %d:\n%s%s", rc, out, err);
    if (h1 && h2) {  // each report as its own run printed it
        char *r1 = strchr(h1, '\n') + 1, *r2 = strchr(h2, '\n') + 1;
        cr_expect(!strncmp(r1, a.out, strlen(a.out)) && r1 + strlen(a.out) + 1 == h2, "first report:\n%s\nalone:\n%s", r1,
                  a.out);
        cr_expect(!strcmp(r2, b.out), "second report:\n%s\nalone:\n%s", r2, b.out);
    }
    free(out), free(err);
    rc = tu_phax(o, e, NULL, NULL, "check", "attention", in, bad, ok, "--json", NULL);
    out = tu_slurp(o, NULL);
    cr_expect(rc == 1 && out[0] == '[' && strstr(out, "\"verdict\": \"FAIL\"") < strstr(out, "\"verdict\": \"PASS\"") &&
                  !strcmp(out + strlen(out) - 4, "}\n]\n"),
              "exit %d:\n%s", rc, out);
    free(out);
    tu_write_file(junk, "\xff\xff\xff\xff\xff\xff\xff\x7f{", 9);
    rc = tu_phax(o, e, NULL, NULL, "check", "attention", in, ok, junk, NULL);
    out = tu_slurp(o, NULL), err = tu_slurp(e, NULL);
    cr_expect(rc == 2 && !out[0] && strstr(err, "junk.safetensors") && strchr(err, '\n') == err + strlen(err) - 1,
              "exit %d:\n%s%s", rc, out, err);
    free(out), free(err);
    run_free(&a), run_free(&b);
    free(in), free(ok), free(bad), free(junk), free(o), free(e);
}

// Bad files, a bad precision, an op without a baseline: one line on stderr naming the
// problem (and the file), exit 2, nothing on stdout, and no file left behind.
static void expect_error(const char *op, const char *in, const char *th, const char *prec, const char *frag) {
    char *o = tu_join(g_dir, "o"), *e = tu_join(g_dir, "e");
    int rc = tu_phax(o, e, NULL, NULL, "check", op, in, th, "--precision", prec, NULL);
    char *out = tu_slurp(o, NULL), *err = tu_slurp(e, NULL), *nl = strchr(err, '\n');
    cr_expect(rc == 2, "exit %d: %s", rc, err);
    cr_expect(!out[0], "stdout: %s", out);
    cr_expect(nl && !nl[1] && !strncmp(err, "phax: ", 6) && strstr(err, frag), "stderr: %s (want %s)", err, frag);
    free(o), free(e), free(out), free(err);
}

Test(check, bad_files_one_line) {
    char *in = tu_join(g_dir, "in.safetensors"), *th = tu_join(g_dir, "theirs.safetensors"),
         *junk = tu_join(g_dir, "junk.safetensors"), *none = tu_join(g_dir, "none.safetensors");
    attention_files(&DOT, in, th, OK, r_f32);
    tu_write_file(junk, "\xff\xff\xff\xff\xff\xff\xff\x7f{", 9);
    expect_error("attention", in, junk, "f32", "junk.safetensors");
    expect_error("attention", junk, th, "f32", "junk.safetensors");
    expect_error("attention", in, none, "f32", "none.safetensors");
    expect_error("attention", in, th, "fp8", "--precision");
    expect_error("nonesuch", in, th, "f32", "unknown op 'nonesuch'");  // every op has a baseline now
    expect_error("attention", th, th, "f32", "is not an input of op 'attention'");  // IN and THEIRS swapped
    {  // too few arguments, an unknown option, and one THEIRS too many (17): one line, exit 2
        char *o = tu_join(g_dir, "o"), *e = tu_join(g_dir, "e");
        int rc1 = tu_phax(o, e, NULL, NULL, "check", "attention", in, NULL);
        char *e1 = tu_slurp(e, NULL);
        int rc2 = tu_phax(o, e, NULL, NULL, "check", "attention", in, th, "--fast", NULL);
        char *e2 = tu_slurp(e, NULL);
        cr_expect(rc1 == 2 && strstr(e1, "usage: phax check") && rc2 == 2 && strstr(e2, "usage: phax check"),
                  "exit %d: %s / exit %d: %s", rc1, e1, rc2, e2);
        const char *argv[24] = {"check", "attention", in};
        for (int i = 0; i < 17; i++) argv[3 + i] = th;  // NULL-terminated by the initialiser
        int rc5 = tu_phax_v(o, e, NULL, NULL, argv);
        char *e5 = tu_slurp(e, NULL);
        cr_expect(rc5 == 2 && strstr(e5, "at most 16 THEIRS"), "exit %d: %s", rc5, e5);
        free(e5);
        int rc3 = tu_phax(o, e, NULL, NULL, "check", "attention", in, th, "--max-memory", "0", NULL);
        char *e3 = tu_slurp(e, NULL);
        // the case plans just over 1 MiB (the truth and the five runs of the baseline): 2 is ample
        int rc4 = tu_phax(o, e, NULL, NULL, "check", "attention", in, th, "--max-memory", "2", NULL);
        char *e4 = tu_slurp(e, NULL);
        cr_expect(rc3 == 2 && strstr(e3, "--max-memory takes") && rc4 == 0, "exit %d: %s / exit %d: %s", rc3, e3, rc4, e4);
        free(e4);
        free(o), free(e), free(e1), free(e2), free(e3);
    }
    cr_expect(!tu_exists(none), "check created %s", none);  // nothing written, even a missing file's name
    free(in), free(th), free(junk), free(none);
}

// --- the rounding every baseline uses ------------------------------------------------------------
Test(check, rounding_matches_the_formats) {
    phax_rng r = phax_rng_new(7);
    const phax_precision *f32 = phax_precision_find("f32"), *bf = phax_precision_find("bf16"),
                         *f16 = phax_precision_find("f16"), *tf = phax_precision_find("tf32");
    cr_assert(f32 && bf && f16 && tf && !phax_precision_find("f8"));
    long bad = 0;
    for (int i = 0; i < 200000; i++) {
        double x = phax_rng_normal(&r) * ldexp(1.0, (int)(phax_rng_normal(&r) * 40));
        bad += !(phax_round(f32, x) == (double)(float)x);  // the hardware's double -> float
        float xf = (float)x;
        bad += !(phax_round(bf, xf) == (double)r_bf16(xf));  // bit-level RNE of a float
        bad += !(phax_round_mm(tf, xf) == phax_round_bits(xf, 11, -125, 128));
        bad += !(phax_round(tf, x) == (double)(float)x);
#if defined(__FLT16_MAX__)
        bad += !(phax_round(f16, x) == (double)(_Float16)x);  // gcc's correctly rounded conversion
#endif
    }
    cr_expect(bad == 0, "%ld roundings differ", bad);
    // Ties go to even; overflow to inf; subnormals keep gradual underflow.
    cr_expect(phax_round(bf, 1.0 + 0x1p-8) == 1.0 && phax_round(bf, 1.0 + 3 * 0x1p-8) == 1.0 + 0x1p-6);
    cr_expect(isinf(phax_round(f16, 65520.0)) && phax_round(f16, 65519.0) == 65504.0);
    cr_expect(phax_round(f16, 0x1p-24) == 0x1p-24 && phax_round(f16, 0x1p-26) == 0);
    cr_expect(isnan(phax_round(bf, NAN)) && isinf(phax_round(f32, INFINITY)));
}

// Stochastic rounding (the bound's four extra roundings of each baseline): every result one of
// x's two float neighbours (a float stays itself), up with probability equal to x's distance
// from the lower one. 10,000 draws at fractions 0.3 and 0.9: the frequency lands within 5 sd
// (sd = sqrt(f(1 − f)/n) ≤ 0.0046) of f unless the rounding is biased. Also at the edges check/
// round.h hands to its slow path (float subnormals from double subnormals, 2^-1074) and at
// overflow; and a bf16 value that rounds up must carry into the exponent.
Test(check, rounding_stochastic_is_unbiased) {
    const phax_precision *f32 = phax_precision_find("f32"), *bf = phax_precision_find("bf16");
    phax_round_stochastic(0x5eed);
    static const double fr[] = {0.3, 0.9};
    long bad = 0;
    for (int j = 0; j < 2; j++) {
        double lo = 1.5, x = lo + fr[j] * 0x1p-23;  // between 1.5 and its next float
        int up = 0;
        for (int i = 0; i < 10000; i++) {
            double y = phax_round(f32, x);
            bad += !(y == lo || y == lo + 0x1p-23);
            up += y > lo;
        }
        cr_expect(fabs(up / 1e4 - fr[j]) <= 5 * sqrt(fr[j] * (1 - fr[j]) / 1e4), "fraction %g rounded up %.4f", fr[j],
                  up / 1e4);
    }
    phax_rng r = phax_rng_new(11);
    for (int i = 0; i < 100000; i++) {
        float f = (float)(phax_rng_normal(&r) * ldexp(1.0, (int)(phax_rng_normal(&r) * 40)));
        if (!(fabsf(f) < 0x1p127f)) continue;  // its upper neighbour finite
        double x = (double)f, y = x + (nextafterf(f, INFINITY) - x) * phax_rng_uniform(&r);
        double z = phax_round(f32, y);
        bad += !(phax_round(f32, x) == x);  // a float stays
        bad += !(z == x || z == (double)nextafterf(f, INFINITY) || (x == 0 && z == 0));
    }
    cr_expect(bad == 0, "%ld stochastic roundings off their two neighbours", bad);
    double s = phax_round(f32, 0x1p-1074), t = phax_round(f32, 0x1p-140 + 0x1p-200);
    cr_expect(s == 0 || s == 0x1p-149, "2^-1074 rounds to %a", s);
    cr_expect(t == 0x1p-140 || t == 0x1p-140 + 0x1p-149, "2^-140 + 2^-200 rounds to %a", t);
    cr_expect(isinf(phax_round(f32, 0x1p128)) && phax_round(bf, 255.9) >= 255 && phax_round(bf, 255.9) <= 256);
    phax_round_stochastic(0);
    cr_expect(phax_round(bf, 255.9) == 256 && phax_round(f32, 0x1p-1074) == 0);
}

// --- mLSTM --------------------------------------------------------------------------------------
// One mLSTM case, either form: parallel (T 16, dqk = dv = 8), or recurrent from m0 = 0.5 (an
// attribute; T 21 odd, dqk 6 ≠ dv 5). "Their" outputs from the float implementation of that form.
static const char *g_mlstm_grad;  // mlstm_case: IN's 'grad' attribute (NULL: absent, exact)

static void mlstm_case(int recurrent, bug bg, rnd R, const char *prec, int want_pass, const char *what) {
    const int B = 2, H = 2, T = recurrent ? 21 : 16, DK = recurrent ? 6 : 8, DV = recurrent ? 5 : 8;
    char *in = tu_join(g_dir, "in.safetensors"), *th = tu_join(g_dir, "theirs.safetensors");
    unsigned seed = recurrent ? 8765 : 4321;
    printf("mlstm %s case seed %u\n", recurrent ? "recurrent" : "parallel", seed);
    phax_rng rng = phax_rng_new(seed);
    int64_t qs[4] = {B, T, H, DK}, vs[4] = {B, T, H, DV}, gs[3] = {B, T, H};
    size_t nq = (size_t)B * T * H * DK, nv = (size_t)B * T * H * DV, ng = (size_t)B * T * H;
    double *q = normal(nq, &rng, 1), *k = normal(nq, &rng, 1), *v = normal(nv, &rng, 1), *gh = normal(nv, &rng, 1);
    double *ig = normal(ng, &rng, 1.5), *fg = normal(ng, &rng, 1.5);
    for (size_t i = 0; i < ng; i++) fg[i] = (double)(float)(fg[i] + 3);  // forget gates mostly open
    phax_st_writer *w = phax_st_writer_new();
    add(w, "q", q, 4, qs), add(w, "k", k, 4, qs), add(w, "v", v, 4, vs), add(w, "igate", ig, 3, gs);
    add(w, "fgate", fg, 3, gs), add(w, "grad.h", gh, 4, vs);
    if (recurrent) cr_assert(!phax_st_add_meta(w, "form", "recurrent") && !phax_st_add_meta(w, "m0", "0.5"));
    if (g_mlstm_grad) cr_assert(!phax_st_add_meta(w, "grad", g_mlstm_grad));
    write_free(w, in);
    double *h = malloc(nv * 8), *dq = malloc(nq * 8), *dk = malloc(nq * 8), *dv = malloc(nv * 8), *di = malloc(ng * 8),
           *df = malloc(ng * 8);
    cr_assert(h && dq && dk && dv && di && df);
    double *fgt = malloc(ng * 8);  // the forget gates their code reads
    cr_assert(fgt);
    for (size_t i = 0; i < ng; i++) fgt[i] = bg == BUG_GATE1 ? fg[i] * 1.01 : fg[i];
    bug bt = bg == BUG_GATE1 ? OK : bg;
    if (recurrent) their_mlstm_rec(B, T, H, DK, DV, bt, R, 0.5f, q, k, v, ig, fgt, gh, h, dq, dk, dv, di, df);
    else their_mlstm(B, T, H, DK, DV, bt, R, q, k, v, ig, fgt, gh, h, dq, dk, dv, di, df);
    free(fgt);
    w = phax_st_writer_new();
    add(w, "h", h, 4, vs), add(w, "grad.q", dq, 4, qs), add(w, "grad.k", dk, 4, qs), add(w, "grad.v", dv, 4, vs);
    add(w, "grad.igate", di, 3, gs), add(w, "grad.fgate", df, 3, gs);
    write_free(w, th);
    run r = check("mlstm", in, th, prec, 0);
    if (want_pass) expect_pass(&r, what);
    else expect_fail(&r, what);
    run_free(&r), free(in), free(th), free(q), free(k), free(v), free(gh), free(ig), free(fg), free(h), free(dq),
        free(dk), free(dv), free(di), free(df);
}
Test(check, mlstm_f32_passes) { mlstm_case(0, OK, r_f32, "f32", 1, "mlstm, correct f32"); }

// The cumulative-sum form at long T with N(0,1) gates (issue 26: a correct float32 mLSTM that
// forms the log-decay as cs_t − cs_s was judged FAIL at T >= 64, ratio up to 26): its decays
// carry an absolute error ~u·|cs_t| that the direct sum of the baseline does not, so the bound
// takes the larger of the two algorithms' baseline errors. Four draws at T 128, one at 1024.
static void mlstm_long_case(int T, unsigned seed, bug bg, int want_pass) {
    const int B = 1, H = 2, DK = 8, DV = 8;
    char *in = tu_join(g_dir, "in.safetensors"), *th = tu_join(g_dir, "theirs.safetensors");
    printf("mlstm cumulative-sum form T %d seed %u\n", T, seed);
    phax_rng rng = phax_rng_new(seed);
    int64_t qs[4] = {B, T, H, DK}, vs[4] = {B, T, H, DV}, gs[3] = {B, T, H};
    size_t nq = (size_t)B * T * H * DK, nv = (size_t)B * T * H * DV, ng = (size_t)B * T * H;
    double *q = normal(nq, &rng, 1), *k = normal(nq, &rng, 1), *v = normal(nv, &rng, 1), *gh = normal(nv, &rng, 1);
    double *ig = normal(ng, &rng, 1), *fg = normal(ng, &rng, 1);
    phax_st_writer *w = phax_st_writer_new();
    add(w, "q", q, 4, qs), add(w, "k", k, 4, qs), add(w, "v", v, 4, vs), add(w, "igate", ig, 3, gs);
    add(w, "fgate", fg, 3, gs), add(w, "grad.h", gh, 4, vs);
    write_free(w, in);
    double *h = malloc(nv * 8), *dq = malloc(nq * 8), *dk = malloc(nq * 8), *dv = malloc(nv * 8), *di = malloc(ng * 8),
           *df = malloc(ng * 8);
    cr_assert(h && dq && dk && dv && di && df);
    their_mlstm(B, T, H, DK, DV, bg, r_f32, q, k, v, ig, fg, gh, h, dq, dk, dv, di, df);
    w = phax_st_writer_new();
    add(w, "h", h, 4, vs), add(w, "grad.q", dq, 4, qs), add(w, "grad.k", dk, 4, qs), add(w, "grad.v", dv, 4, vs);
    add(w, "grad.igate", di, 3, gs), add(w, "grad.fgate", df, 3, gs);
    write_free(w, th);
    run r = check("mlstm", in, th, "f32", 0);
    if (want_pass) expect_pass(&r, "mlstm cumulative-sum form, correct f32, N(0,1) gates");
    else expect_fail(&r, "mlstm cumulative-sum form, stabiliser not subtracted in S");
    run_free(&r), free(in), free(th), free(q), free(k), free(v), free(gh), free(ig), free(fg), free(h), free(dq),
        free(dk), free(dv), free(di), free(df);
}
Test(check, mlstm_cumsum_form_long_T_passes) {
    for (unsigned s = 0; s < 4; s++) mlstm_long_case(128, 100 + s, OK, 1);
    mlstm_long_case(1024, 7, OK, 1);
}
Test(check, gallery_mlstm_stabiliser_long_T) {
    mlstm_long_case(128, 100, BUG_STAB, 0);
    mlstm_long_case(1024, 7, BUG_STAB, 0);
}
Test(check, mlstm_bf16_passes) { mlstm_case(0, OK, r_bf16, "bf16", 1, "mlstm, correct bf16"); }
// grad=stopgrad-normalizer: a hand-written backward that holds the normaliser and stabiliser
// constant PASSes under it (f32 and bf16) and FAILs under the default exact gradient; an exact
// backward FAILs under it.
Test(check, mlstm_stopgrad_normalizer_convention) {
    g_mlstm_grad = "stopgrad-normalizer";
    mlstm_case(0, STOPGRAD, r_f32, "f32", 1, "mlstm, stopgrad backward, grad=stopgrad-normalizer, f32");
    mlstm_case(0, STOPGRAD, r_bf16, "bf16", 1, "mlstm, stopgrad backward, grad=stopgrad-normalizer, bf16");
    mlstm_case(0, OK, r_f32, "f32", 0, "mlstm, exact backward judged under grad=stopgrad-normalizer");
    g_mlstm_grad = NULL;
    mlstm_case(0, STOPGRAD, r_f32, "f32", 0, "mlstm, stopgrad backward judged under the exact gradient");
}
Test(check, gallery_mlstm_stabiliser) { mlstm_case(0, BUG_STAB, r_f32, "f32", 0, "mLSTM stabiliser not subtracted in S"); }
Test(check, gallery_mlstm_stabiliser_bf16) {
    mlstm_case(0, BUG_STAB, r_bf16, "bf16", 0, "mLSTM stabiliser not subtracted in S (bf16)");
}
// A 1 % gate error (the forget gates' preactivations read as 1.01·f̃): at f32 and TF32 far
// beyond rounding in both forms; at bf16 (u = 2^-8) it is within a few units of the
// precision's own error and not asked.
Test(check, gallery_mlstm_fgate_one_percent) {
    mlstm_case(0, BUG_GATE1, r_f32, "f32", 0, "mLSTM forget gates 1 % off (parallel, f32)");
    mlstm_case(1, BUG_GATE1, r_f32, "f32", 0, "mLSTM forget gates 1 % off (recurrent, f32)");
    mlstm_case(1, BUG_GATE1, r_f32, "tf32", 0, "mLSTM forget gates 1 % off (recurrent, f32 judged at tf32)");
}
Test(check, mlstm_recurrent_f32_passes) { mlstm_case(1, OK, r_f32, "f32", 1, "mlstm recurrent, correct f32"); }
Test(check, mlstm_recurrent_bf16_passes) { mlstm_case(1, OK, r_bf16, "bf16", 1, "mlstm recurrent, correct bf16"); }
Test(check, gallery_mlstm_recurrent_forget_stabiliser) {
    mlstm_case(1, BUG_FSTAB, r_f32, "f32", 0, "mLSTM recurrent: f' without the stabiliser shift");
}
Test(check, gallery_mlstm_recurrent_input_stabiliser) {
    mlstm_case(1, BUG_ISTAB, r_f32, "f32", 0, "mLSTM recurrent: i' without -m");
}
Test(check, gallery_mlstm_recurrent_input_stabiliser_bf16) {
    mlstm_case(1, BUG_ISTAB, r_bf16, "bf16", 0, "mLSTM recurrent: i' without -m (bf16)");
}

// A baseline must compute the truth's function: at 53 bits (every rounding the identity) it is
// a float64 evaluation in another order, so it must equal ref to float64 rounding. A baseline
// with a wrong gradient path would only loosen the bound (its error is the yardstick), which
// no FAIL test would notice; this does. Bound: each output is a sum of at most T·dqk·dv = 630
// products through exp/log of arguments |x| ≲ 10, so two float64 orders differ by ≲
// 630·2^-53·10 ≈ 7e-13 relative; 1e-11 leaves that a factor ~15, a missing path is O(1).
static const phax_precision F64 = {"f64", 53, 53, -1021, 1024, 0x1p-53};
static double dot(const double *a, const double *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}
static double rel(const double *a, const double *b, size_t n) {
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) e += (a[i] - b[i]) * (a[i] - b[i]), s += b[i] * b[i];
    return sqrt(e / (s > 0 ? s : 1));
}
Test(check, mlstm_baselines_at_f64_equal_ref) {
    enum { B = 2, T = 21, H = 2, DK = 6, DV = 5 };
    unsigned seed = 97531;
    printf("mlstm f64 baseline seed %u\n", seed);
    phax_rng rng = phax_rng_new(seed);
    size_t nq = B * T * H * DK, nv = B * T * H * DV, ng = B * T * H;
    double *q = normal(nq, &rng, 1), *k = normal(nq, &rng, 1), *v = normal(nv, &rng, 1), *gh = normal(nv, &rng, 1);
    double *ig = normal(ng, &rng, 1.5), *fg = normal(ng, &rng, 1.5);
    for (size_t i = 0; i < ng; i++) fg[i] += 3;
    double *o[2][6];  // [ref, baseline][h, dq, dk, dv, di, df]
    size_t sz[6] = {nv, nq, nq, nv, ng, ng};
    const char *nm[6] = {"h", "dq", "dk", "dv", "digate", "dfgate"};
    for (int form = 0; form < 2; form++) {
        for (int a = 0; a < 2; a++)
            for (int j = 0; j < 6; j++) cr_assert((o[a][j] = calloc(sz[j], 8)));
        double eps = PHAX_MLSTM_EPS, m0 = 0.5;
        if (form) {
            cr_assert(!ref_mlstm_recurrent_fwd(o[0][0], q, k, v, ig, fg, B, T, H, DK, DV, eps, m0));
            cr_assert(!ref_mlstm_recurrent_bwd(o[0][1], o[0][2], o[0][3], o[0][4], o[0][5], gh, q, k, v, ig, fg, B, T,
                                               H, DK, DV, eps, m0));
            cr_assert(!phax_naive_mlstm_recurrent(&F64, o[1][0], o[1][1], o[1][2], o[1][3], o[1][4], o[1][5], gh, q,
                                                  k, v, ig, fg, B, T, H, DK, DV, eps, m0));
            // the chunkwise way (phax check's second baseline for form=recurrent), at m0 and at an
            // m0 large enough that b_t + m0 is the stabiliser (the branch a bug would drop)
            for (int big = 0; big < 2; big++) {
                double *r6[6], *c6[6], m0c = big ? 40 : m0;
                for (int j = 0; j < 6; j++) cr_assert((r6[j] = calloc(sz[j], 8)) && (c6[j] = calloc(sz[j], 8)));
                cr_assert(!ref_mlstm_recurrent_fwd(r6[0], q, k, v, ig, fg, B, T, H, DK, DV, eps, m0c));
                cr_assert(!ref_mlstm_recurrent_bwd(r6[1], r6[2], r6[3], r6[4], r6[5], gh, q, k, v, ig, fg, B, T, H, DK,
                                                   DV, eps, m0c));
                cr_assert(!phax_naive_mlstm_chunkwise(&F64, c6[0], c6[1], c6[2], c6[3], c6[4], c6[5], gh, q, k, v, ig,
                                                      fg, B, T, H, DK, DV, eps, m0c));
                for (int j = 0; j < 6; j++) {
                    double e = rel(c6[j], r6[j], sz[j]);
                    printf("mlstm chunkwise %s (m0 %g) at 53 bits vs ref recurrent, relative %.3g\n", nm[j], m0c, e);
                    cr_expect(e <= 1e-11, "mlstm chunkwise baseline %s (m0 %g) differs from ref recurrent: %.3g", nm[j],
                              m0c, e);
                }
                for (int j = 0; j < 6; j++) free(r6[j]), free(c6[j]);
            }
        } else {
            cr_assert(!ref_mlstm_parallel_fwd(o[0][0], q, k, v, ig, fg, B, T, H, DK, DV, eps));
            cr_assert(!ref_mlstm_parallel_bwd(o[0][1], o[0][2], o[0][3], o[0][4], o[0][5], gh, q, k, v, ig, fg, B, T,
                                              H, DK, DV, eps));
            cr_assert(!phax_naive_mlstm(&F64, o[1][0], o[1][1], o[1][2], o[1][3], o[1][4], o[1][5], gh, q, k, v, ig, fg,
                                        B, T, H, DK, DV, eps));
        }
        for (int j = 0; j < 6; j++) {
            double e = rel(o[1][j], o[0][j], sz[j]);
            printf("mlstm %s %s: baseline at 53 bits vs ref, relative %.3g\n", form ? "recurrent" : "parallel", nm[j], e);
            cr_expect(e <= 1e-11, "mlstm %s baseline %s differs from ref: %.3g", form ? "recurrent" : "parallel",
                      nm[j], e);
        }
        for (int a = 0; a < 2; a++)
            for (int j = 0; j < 6; j++) free(o[a][j]);
    }
    // grad = stopgrad-normalizer, both decay forms of the baseline against ref's.
    for (int cs = 0; cs < 2; cs++) {
        double *r[6], *b[6];
        for (int j = 0; j < 6; j++) cr_assert((r[j] = calloc(sz[j], 8)) && (b[j] = calloc(sz[j], 8)));
        cr_assert(!ref_mlstm_parallel_bwd_grad(r[1], r[2], r[3], r[4], r[5], gh, q, k, v, ig, fg, B, T, H, DK, DV,
                                               PHAX_MLSTM_EPS, PHAX_MLSTM_GRAD_STOPGRAD_NORMALIZER));
        cr_assert(!phax_naive_mlstm_grad(&F64, b[0], b[1], b[2], b[3], b[4], b[5], gh, q, k, v, ig, fg, B, T, H, DK, DV,
                                         PHAX_MLSTM_EPS, cs, PHAX_MLSTM_GRAD_STOPGRAD_NORMALIZER));
        for (int j = 1; j < 6; j++) {
            double e = rel(b[j], r[j], sz[j]);
            cr_expect(e <= 1e-11, "mlstm stopgrad baseline (cumsum %d) %s differs from ref: %.3g", cs, nm[j], e);
        }
        for (int j = 0; j < 6; j++) free(r[j]), free(b[j]);
    }
    free(q), free(k), free(v), free(gh), free(ig), free(fg);
}

// The same for attention (cosine scores with a learned scale, window 5 < T, RoPE, GQA group 2;
// dot scores, full causal) and the SSM convolution. Attention's outputs are sums of T·dh = 112
// products through a softmax, the convolution's of T = 13: the bound above covers both.
Test(check, attention_conv_baselines_at_f64_equal_ref) {
    unsigned seed = 24680;
    printf("attention/conv f64 baseline seed %u\n", seed);
    phax_rng rng = phax_rng_new(seed);
    for (int cos = 0; cos < 2; cos++) {
        enum { B = 2, T = 7 * 2 + 1, Hq = 4, Hkv = 2, dh = 8 };
        phax_attn_cfg a = phax_attn_cfg_default(Hq, Hkv, dh);
        a.window = cos ? 5 : 0, a.score = cos ? PHAX_SCORE_COSINE : PHAX_SCORE_DOT, a.pos0 = 3;
        size_t nq = (size_t)B * T * Hq * dh, nk = (size_t)B * T * Hkv * dh;
        double *q = normal(nq, &rng, 1), *k = normal(nk, &rng, 1), *v = normal(nk, &rng, 1), *gy = normal(nq, &rng, 1);
        double l[Hq] = {1.0, 1.5, 2.0, 2.5};
        double *o[2][5];
        size_t sz[5] = {nq, nq, nk, nk, Hq};
        const char *nm[5] = {"y", "dq", "dk", "dv", "dlogscale"};
        for (int x = 0; x < 2; x++)
            for (int j = 0; j < 5; j++) cr_assert((o[x][j] = calloc(sz[j], 8)));
        cr_assert(!ref_attention_fwd(o[0][0], q, k, v, cos ? l : NULL, B, T, &a));
        cr_assert(!ref_attention_bwd(o[0][1], o[0][2], o[0][3], cos ? o[0][4] : NULL, gy, q, k, v, cos ? l : NULL, B,
                                     T, &a));
        cr_assert(!phax_naive_attention(&F64, o[1][0], o[1][1], o[1][2], o[1][3], cos ? o[1][4] : NULL, gy, q, k, v,
                                        cos ? l : NULL, B, T, &a));
        for (int j = 0; j < 5; j++) {
            double e = rel(o[1][j], o[0][j], sz[j]);
            printf("attention %s %s: baseline at 53 bits vs ref, relative %.3g (norm %.3g)\n", cos ? "cosine" : "dot", nm[j], e, sqrt(dot(o[0][j], o[0][j], sz[j])));
            cr_expect(e <= 1e-11, "attention baseline %s differs from ref: %.3g", nm[j], e);
        }
        for (int x = 0; x < 2; x++)
            for (int j = 0; j < 5; j++) free(o[x][j]);
        free(q), free(k), free(v), free(gy);
    }
    enum { B = 2, T = 13, H = 3 };
    size_t nu = (size_t)B * T * H;
    double *u = normal(nu, &rng, 1), *K = normal((size_t)H * T, &rng, 0.5), *D = normal(H, &rng, 1),
           *gy = normal(nu, &rng, 1);
    double *o[2][4];
    size_t sz[4] = {nu, nu, (size_t)H * T, H};
    const char *nm[4] = {"y", "du", "dK", "dD"};
    for (int x = 0; x < 2; x++)
        for (int j = 0; j < 4; j++) cr_assert((o[x][j] = calloc(sz[j], 8)));
    ref_ssm_conv_fwd(o[0][0], u, K, D, B, T, H);
    ref_ssm_conv_bwd(o[0][1], o[0][2], o[0][3], gy, u, K, D, B, T, H);
    cr_assert(!phax_naive_ssm_conv(&F64, o[1][0], o[1][1], o[1][2], o[1][3], gy, u, K, D, B, T, H));
    for (int j = 0; j < 4; j++) {
        double e = rel(o[1][j], o[0][j], sz[j]);
        printf("ssm_conv %s: baseline at 53 bits vs ref, relative %.3g\n", nm[j], e);
        cr_expect(e <= 1e-11, "ssm_conv baseline %s differs from ref: %.3g", nm[j], e);
    }
    for (int x = 0; x < 2; x++)
        for (int j = 0; j < 4; j++) free(o[x][j]);
    free(u), free(K), free(D), free(gy);
}

// --- the small ops: their float code (sums newest-first, a different order from check/'s) -------
// a[i·sa]·b[i·sb] summed from the last term down.
static float tdot(rnd R, const double *a, size_t sa, const double *b, size_t sb, size_t n) {
    float s = 0;
    for (size_t i = n; i-- > 0;) s = R(s + MM(R((float)a[i * sa]), R((float)b[i * sb])));
    return s;
}
// C (m, n) = A·B, A (i, l) at A[i·ai + l·al], B (l, j) at B[l·bl + j·bj].
static void tmm(rnd R, double *C, const double *A, size_t ai, size_t al, const double *Bm, size_t bl, size_t bj,
                size_t m, size_t n, size_t k) {
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) C[i * n + j] = tdot(R, A + i * ai, al, Bm + j * bj, bl, k);
}

static void their_linear(rnd R, const double *x, const double *W, const double *b, const double *gy, size_t n, int in,
                         int out, double *y, double *dx, double *dW, double *db) {
    tmm(R, y, x, in, 1, W, 1, in, n, out, in);
    for (size_t r = 0; r < n; r++)
        for (int o = 0; o < out; o++) y[r * out + o] = R((float)y[r * out + o] + R((float)b[o]));
    tmm(R, dx, gy, out, 1, W, in, 1, n, in, out);
    tmm(R, dW, gy, 1, out, x, in, 1, out, in, n);
    for (int o = 0; o < out; o++) {
        float s = 0;
        for (size_t r = n; r-- > 0;) s = R(s + R((float)gy[r * out + o]));
        db[o] = s;
    }
}

// layer 0: RMSNorm; 1: LayerNorm; groups of w channels; b NULL: no bias. The variance in two
// passes (the mean, then the squares about it) or (g_norm_one_pass) in one: E[x²] − E[x]², which
// loses digits to cancellation where |mean| ≫ spread (a sound, common float32 LayerNorm).
static int g_norm_one_pass;
static void their_lnorm(rnd R, int layer, const double *x, const double *g, const double *b, const double *gy, size_t n,
                       int d, int w, float eps, double *y, double *dx, double *dg, double *db) {
    for (int i = 0; i < d; i++) dg[i] = 0, db[i] = 0;
    float xh[64], dxh[64];
    cr_assert(w <= 64);
    for (size_t r = 0; r < n; r++)
        for (int o = 0; o < d; o += w) {
            float mu = 0, var = 0, m1 = 0, m2 = 0;
            if (layer && g_norm_one_pass) {  // Σx and Σx² in one pass: var = E[x²] − E[x]²,
                float s2 = 0;                 // accumulated in float32 (as any bf16 kernel does)
                for (int i = w; i-- > 0;) {
                    float xi = R((float)x[r * d + o + i]);
                    mu = mu + xi, s2 = s2 + xi * xi;
                }
                mu = mu / (float)w;
                var = fmaxf(s2 / (float)w - mu * mu, 0.0f);
                mu = R(mu), var = R(var);
            } else {
                for (int i = w; layer && i-- > 0;) mu = R(mu + R((float)x[r * d + o + i]));
                mu = R(mu / (float)w);
                for (int i = w; i-- > 0;) {
                    float c = R(R((float)x[r * d + o + i]) - mu);
                    var = R(var + R(c * c));
                }
                var = R(var / (float)w);
            }
            float rs = R(1.0f / R(sqrtf(R(var + eps))));
            for (int i = 0; i < w; i++) {
                size_t k = r * d + o + i;
                float gg = R((float)gy[k]);
                xh[i] = R(R(R((float)x[k]) - mu) * rs);
                y[k] = R(R(R((float)g[o + i]) * xh[i]) + (b ? R((float)b[o + i]) : 0.0f));
                dxh[i] = R(gg * R((float)g[o + i]));
                dg[o + i] = R((float)dg[o + i] + R(gg * xh[i]));
                db[o + i] = R((float)db[o + i] + gg);
                m1 = R(m1 + dxh[i]), m2 = R(m2 + R(dxh[i] * xh[i]));
            }
            m1 = layer ? R(m1 / (float)w) : 0, m2 = R(m2 / (float)w);
            for (int i = 0; i < w; i++) dx[r * d + o + i] = R(R(R(dxh[i] - m1) - R(xh[i] * m2)) * rs);
        }
}

static void their_act(rnd R, int silu, const double *x, const double *gy, size_t n, double *y, double *dx) {
    for (size_t i = 0; i < n; i++) {
        float v = R((float)x[i]), g = R((float)gy[i]);
        if (silu) {
            float s = R(1.0f / R(1.0f + R(expf(-v))));
            y[i] = R(v * s);
            dx[i] = R(g * R(s + R(R(v * s) * R(1.0f - s))));
        } else {
            float Phi = R(R(1.0f + R(erff(R(v * 0.70710678f)))) * 0.5f);
            y[i] = R(v * Phi);
            dx[i] = R(g * R(Phi + R(v * R(R(expf(R(-0.5f * R(v * v)))) * 0.39894228f))));
        }
    }
}

static void their_swiglu(rnd R, const double *x, const double *Wg, const double *Wu, const double *Wd,
                         const double *gy, size_t n, int d, int hid, double *y, double *dx, double *dWg,
                         double *dWu, double *dWd) {
    size_t nh = n * hid;
    double *a = malloc(nh * 8), *u = malloc(nh * 8), *z = calloc(nh, 8), *dz = malloc(nh * 8), *t = malloc(n * d * 8);
    cr_assert(a && u && z && dz && t);
    tmm(R, a, x, d, 1, Wg, 1, d, n, hid, d);
    tmm(R, u, x, d, 1, Wu, 1, d, n, hid, d);
    for (size_t i = 0; i < nh; i++) {
        float s = R(1.0f / R(1.0f + R(expf(-(float)a[i]))));
        z[i] = R(R((float)a[i] * s) * (float)u[i]);
    }
    tmm(R, y, z, hid, 1, Wd, 1, hid, n, d, hid);
    tmm(R, dz, gy, d, 1, Wd, hid, 1, n, hid, d);
    tmm(R, dWd, gy, 1, d, z, hid, 1, d, hid, n);
    for (size_t i = 0; i < nh; i++) {
        float av = (float)a[i], s = R(1.0f / R(1.0f + R(expf(-av)))), sa = R(av * s);
        float dsa = R(s + R(sa * R(1.0f - s)));
        a[i] = R(R((float)dz[i] * (float)u[i]) * dsa);
        u[i] = R((float)dz[i] * sa);
    }
    tmm(R, dx, a, hid, 1, Wg, d, 1, n, d, hid);
    tmm(R, t, u, hid, 1, Wu, d, 1, n, d, hid);
    for (size_t i = 0; i < n * d; i++) dx[i] = R((float)dx[i] + (float)t[i]);
    tmm(R, dWg, a, 1, hid, x, d, 1, hid, d, n);
    tmm(R, dWu, u, 1, hid, x, d, 1, hid, d, n);
    free(a), free(u), free(z), free(dz), free(t);
}

// Fused (the loss from the log-sum-exp, the gradient from e^{x − max − log z}), or unfused
// (g_xent_unfused: log_softmax as a tensor, then the NLL and e^{log p}, as torch's two modules).
static int g_xent_unfused;
static void their_xent(rnd R, const double *x, const int32_t *tg, double gl, size_t n, int V, double *loss,
                       double *dx) {
    float s = 0, cnt = 0;
    for (size_t r = 0; r < n; r++) cnt += tg[r] >= 0;
    float gc = R(R((float)gl) / cnt);
    for (size_t r = 0; r < n; r++) {
        for (int j = 0; j < V; j++) dx[r * V + j] = 0;
        if (tg[r] < 0) continue;
        float mx = -INFINITY, z = 0;
        for (int j = 0; j < V; j++) mx = fmaxf(mx, R((float)x[r * V + j]));
        for (int j = V; j-- > 0;) z = R(z + R(expf(R(R((float)x[r * V + j]) - mx))));
        float lz = R(logf(z));
        if (g_xent_unfused) {  // log_softmax stored, then the NLL, and softmax = e^{log p}
            for (int j = 0; j < V; j++) dx[r * V + j] = R(R(R((float)x[r * V + j]) - mx) - lz);
            s = R(s - (float)dx[r * V + tg[r]]);
            for (int j = 0; j < V; j++)
                dx[r * V + j] = R(gc * R(R(expf((float)dx[r * V + j])) - (j == tg[r] ? 1.0f : 0.0f)));
            continue;
        }
        s = R(s + R(R(lz + mx) - R((float)x[r * V + tg[r]])));
        for (int j = 0; j < V; j++)
            dx[r * V + j] = R(gc * R(R(expf(R(R(R((float)x[r * V + j]) - mx) - lz))) - (j == tg[r] ? 1.0f : 0.0f)));
    }
    *loss = R(s / cnt);
}

// Cross-entropy with IN giving no grad.loss (phax draws it N(0,1) from 'seed'), theirs computed
// with grad.loss = 1, as a loss's gradient usually is: FAIL, and the hint names the upstream
// gradients; with grad.loss = 1 in IN the same THEIRS PASSes.
Test(check, hint_upstream_gradient_not_given) {
    char *in = tu_join(g_dir, "in.safetensors"), *th = tu_join(g_dir, "theirs.safetensors");
    phax_rng rng = phax_rng_new(77);
    enum { N = 6, V = 40 };
    int64_t ls[2] = {N, V}, ts[1] = {N}, zs[1] = {0};
    double *lg = normal(N * V, &rng, 2), loss, dx[N * V], one = 1;
    int32_t tg[N] = {3, -1, 0, 39, 17, 8};
    their_xent(r_f32, lg, tg, 1.0, N, V, &loss, dx);
    for (int with_one = 0; with_one < 2; with_one++) {
        phax_st_writer *w = phax_st_writer_new(), *t = phax_st_writer_new();
        add(w, "logits", lg, 2, ls);
        cr_assert(phax_st_add_i32(w, "targets", tg, 1, ts) == PHAX_OK, "%s", phax_error());
        if (with_one) add(w, "grad.loss", &one, 0, zs);
        write_free(w, in);
        add(t, "loss", &loss, 0, zs), add(t, "grad.logits", dx, 2, ls);
        write_free(t, th);
        run r = check("cross_entropy", in, th, "f32", 0);
        if (with_one) {
            expect_pass(&r, "cross_entropy, grad.loss = 1 in IN");
        } else {
            expect_fail(&r, "cross_entropy, grad.loss drawn by phax, theirs at 1");
            char *h = strstr(r.out, "\nhint: ");
            cr_expect(h && strstr(h, "upstream gradients of 1"), "no hint naming the upstream gradient:\n%s", r.out);
        }
        run_free(&r);
    }
    free(lg), free(in), free(th);
}

// One small op end to end: IN with the inputs (and the upstream gradient), THEIRS from their
// code above, judged at prec. bug: their result perturbed the way a real slip would (below).
// The sizes and scales (the sweep draws others): SN rows (a multiple of 3, ≥ 6), SD channels
// (even, a multiple of 4, ≤ 64), SH hidden, SV classes (≥ 40); inputs at scale g_small_scale,
// the norms' inputs shifted by g_small_shift, their eps from IN where g_norm_eps > 0.
static int SN = 6, SD = 16, SH = 24, SV = 40;
static double g_small_scale = 1, g_small_shift = 0, g_norm_eps = 0;
static uint64_t g_small_seed;  // 0: the op's name hashed

static void small_files(const char *op, rnd R, int bug, const char *in, const char *th) {
    phax_rng rng = phax_rng_new(g_small_seed ? g_small_seed : phax_hash_str(op));
    int64_t xs[2] = {SN, SD}, ds[1] = {SD}, wh[2] = {SH, SD}, hw[2] = {SD, SH}, ls[2] = {SN, SV}, ts[1] = {SN};
    size_t ny = (size_t)SN * (SV > SH ? SV : SH);  // ≥ SN·SD too (SV ≥ 40 ≥ ... SD ≤ 64: below)
    if (ny < (size_t)SN * SD) ny = (size_t)SN * SD;
    double *x = normal(ny, &rng, g_small_scale), *gy = normal(ny, &rng, 1), *g = normal(SD, &rng, 0.3),
           *b = normal(SD, &rng, 0.5), *Wa = normal(SH * SD, &rng, 0.25), *Wb = normal(SH * SD, &rng, 0.25),
           *Wc = normal(SH * SD, &rng, 0.25), *lg = normal(SN * SV, &rng, 2 * g_small_scale);
    for (int i = 0; i < SD; i++) g[i] = (double)(float)(g[i] + 1);
    double *y = malloc(ny * 8), *dx = malloc(ny * 8), *d1 = malloc(SH * SD * 8), *d2 = malloc(SH * SD * 8),
           *d3 = malloc(SH * SD * 8), loss, gl = 0.75;
    int32_t *tg = malloc(SN * sizeof *tg);
    cr_assert(y && dx && d1 && d2 && d3 && tg);
    static const int32_t tg0[6] = {3, -1, 0, 39, 17, 8};
    for (int r = 0; r < SN; r++)  // a target of −1 is ignored
        tg[r] = r < 6 ? tg0[r] : phax_rng_u64(&rng) % 8 == 0 ? -1 : (int32_t)(phax_rng_u64(&rng) % (uint64_t)SV);
    phax_st_writer *w = phax_st_writer_new(), *t = phax_st_writer_new();
    if (!strcmp(op, "linear")) {  // x (6, 16) -> (6, 24) with bias
        int64_t ys[2] = {SN, SH}, bs[1] = {SH};
        double *bb = normal(SH, &rng, 0.5);
        add(w, "x", x, 2, xs), add(w, "weight", Wa, 2, wh), add(w, "bias", bb, 1, bs), add(w, "grad.y", gy, 2, ys);
        their_linear(R, x, Wa, bb, gy, SN, SD, SH, y, dx, d1, d2);
        if (bug) d2[0] = 0;  // grad.bias: the first output's gradient lost
        add(t, "y", y, 2, ys), add(t, "grad.x", dx, 2, xs), add(t, "grad.weight", d1, 2, wh);
        add(t, "grad.bias", d2, 1, bs);
        free(bb);
    } else if (!strcmp(op, "rmsnorm") || !strcmp(op, "layernorm") || !strcmp(op, "headnorm")) {
        int layer = op[0] != 'r', heads = op[0] == 'h' ? 4 : 1;
        for (int i = 0; i < SN * SD; i++) x[i] += g_small_shift;
        add(w, "x", x, 2, xs), add(w, "weight", g, 1, ds), add(w, "grad.y", gy, 2, xs);
        if (op[0] == 'l') add(w, "bias", b, 1, ds);
        if (heads > 1) cr_assert(!phax_st_add_meta(w, "heads", "4"));
        float e = op[0] == 'l' ? 1e-5f : 1e-6f;
        if (g_norm_eps > 0) {
            char eb[32];
            snprintf(eb, sizeof eb, "%.9g", g_norm_eps);
            cr_assert(!phax_st_add_meta(w, "eps", eb));
            e = (float)g_norm_eps;
        }
        if (bug) e = 0;  // the bug: eps left out (shows where IN's eps is large enough to matter)
        their_lnorm(R, layer, x, g, op[0] == 'l' ? b : NULL, gy, SN, SD, SD / heads, e, y, dx, d1, d2);
        add(t, "y", y, 2, xs), add(t, "grad.x", dx, 2, xs), add(t, "grad.weight", d1, 1, ds);
        if (op[0] == 'l') add(t, "grad.bias", d2, 1, ds);
    } else if (!strcmp(op, "gelu") || !strcmp(op, "silu")) {
        add(w, "x", x, 2, xs), add(w, "grad.y", gy, 2, xs);
        their_act(R, op[0] == 's', x, gy, SN * SD, y, dx);
        if (bug) their_act(R, op[0] != 's', x, gy, SN * SD, y, dx);  // the other activation
        add(t, "y", y, 2, xs), add(t, "grad.x", dx, 2, xs);
    } else if (!strcmp(op, "swiglu")) {
        add(w, "x", x, 2, xs), add(w, "w_gate", Wa, 2, wh), add(w, "w_up", Wb, 2, wh), add(w, "w_down", Wc, 2, hw);
        add(w, "grad.y", gy, 2, xs);
        // the bug: gate and up swapped (SiLU on the up projection)
        their_swiglu(R, x, bug ? Wb : Wa, bug ? Wa : Wb, Wc, gy, SN, SD, SH, y, dx, bug ? d2 : d1, bug ? d1 : d2, d3);
        add(t, "y", y, 2, xs), add(t, "grad.x", dx, 2, xs), add(t, "grad.w_gate", d1, 2, wh);
        add(t, "grad.w_up", d2, 2, wh), add(t, "grad.w_down", d3, 2, hw);
    } else if (!strcmp(op, "embedding")) {  // the bug: a repeated token's gradient overwritten, not summed
        enum { EV = 12 };
        static const int32_t tok0[6] = {3, 7, 3, 0, 11, 3};
        int32_t *tok = malloc(SN * sizeof *tok);
        int64_t es[2] = {EV, SD}, os[2] = {SN, SD};
        double *E = normal(EV * SD, &rng, 1), *dE = calloc(EV * SD, 8);
        cr_assert(tok && dE);
        for (int r = 0; r < SN; r++) tok[r] = r < 6 ? tok0[r] : (int32_t)(phax_rng_u64(&rng) % EV);
        cr_assert(!phax_st_add_i32(w, "tokens", tok, 1, ts));
        add(w, "weight", E, 2, es), add(w, "grad.y", gy, 2, os);
        for (int r = SN; r-- > 0;)
            for (int j = 0; j < SD; j++) {
                y[r * SD + j] = R((float)E[tok[r] * SD + j]);
                float gg = R((float)gy[r * SD + j]);
                dE[tok[r] * SD + j] = bug ? gg : R((float)dE[tok[r] * SD + j] + gg);
            }
        add(t, "y", y, 2, os), add(t, "grad.weight", dE, 2, es);
        free(E), free(tok), free(dE);
    } else if (!strcmp(op, "rope")) {  // the bug: pairs (2i, 2i+1) rotated instead of (i, i + dh/2)
        acase c = {1, 6, 2, 2, SD / 2, 0, 0, 1};  // x: (1, 6, 2, 8)
        int64_t rs[4] = {1, 6, 2, SD / 2};
        size_t nr = 6 * 2 * (SD / 2);
        add(w, "x", x, 4, rs), add(w, "grad.y", gy, 4, rs);
        float *fx = malloc(nr * 4), *fg = malloc(nr * 4);
        cr_assert(fx && fg);
        for (size_t i = 0; i < nr; i++) fx[i] = R((float)x[i]), fg[i] = R((float)gy[i]);
        if (!bug) {
            their_rope(fx, &c, 2, 1, R, 0), their_rope(fg, &c, 2, -1, R, 0);
        } else {
            for (size_t r = 0; r < nr / c.dh; r++)
                for (int i = 0; i < c.dh / 2; i++) {
                    int tt = (int)((r / 2) % 6);
                    float th = R(powf(10000.0f, -2.0f * (float)i / (float)c.dh)), a = R((float)tt * th);
                    float cs = R(cosf(a)), sn = R(sinf(a));
                    float *px[2] = {fx, fg};
                    for (int k = 0; k < 2; k++) {
                        float sg = k ? -sn : sn, x1 = px[k][r * c.dh + 2 * i], x2 = px[k][r * c.dh + 2 * i + 1];
                        px[k][r * c.dh + 2 * i] = R(R(x1 * cs) - R(x2 * sg));
                        px[k][r * c.dh + 2 * i + 1] = R(R(x2 * cs) + R(x1 * sg));
                    }
                }
        }
        for (size_t i = 0; i < nr; i++) y[i] = fx[i], dx[i] = fg[i];
        add(t, "y", y, 4, rs), add(t, "grad.x", dx, 4, rs);
        free(fx), free(fg);
    } else if (!strcmp(op, "mix")) {  // the bug: softmax(p) for softplus(p)/Σ softplus(p)
        enum { NB = 3 };
        int NE = SN * SD / 3;
        int64_t bs[3] = {NB, SN / 3, SD}, ps[1] = {NB}, ys[2] = {SN / 3, SD};
        double p[NB] = {0.3, -1.25, 2.0}, dp[NB];
        add(w, "branches", x, 3, bs), add(w, "p", p, 1, ps), add(w, "grad.y", gy, 2, ys);
        float wt[NB], sg[NB], S = 0, dw[NB], wdw = 0;
        for (int i = 0; i < NB; i++) {
            float pi = R((float)p[i]);
            wt[i] = R(bug ? expf(pi) : log1pf(expf(pi)));
            sg[i] = R(bug ? wt[i] : 1.0f / (1.0f + expf(-pi)));  // d/dp of the unnormalised weight
            S = R(S + wt[i]);
        }
        for (int i = 0; i < NB; i++) wt[i] = R(wt[i] / S);
        for (int e = 0; e < NE; e++) {
            float a = 0;
            for (int i = NB; i-- > 0;) a = R(a + R(wt[i] * R((float)x[i * NE + e])));
            y[e] = a;
        }
        for (int i = 0; i < NB; i++) {
            float a = 0;
            for (int e = NE; e-- > 0;) {
                float gg = R((float)gy[e]);
                a = R(a + R(gg * R((float)x[i * NE + e])));
                dx[i * NE + e] = R(wt[i] * gg);
            }
            dw[i] = a;
            wdw = R(wdw + R(wt[i] * a));
        }
        for (int i = 0; i < NB; i++) dp[i] = R(R(sg[i] * R(dw[i] - wdw)) / S);
        add(t, "y", y, 2, ys), add(t, "grad.branches", dx, 3, bs), add(t, "grad.p", dp, 1, ps);
    } else if (!strcmp(op, "adamw")) {  // step 3 from given moments; the bug: no bias correction
        double *m0 = normal(SN * SD, &rng, 0.1), *v0 = normal(SN * SD, &rng, 0.1), *pn = malloc(SN * SD * 8), gn;
        cr_assert(pn);
        for (int i = 0; i < SN * SD; i++) v0[i] = (double)(float)(v0[i] * v0[i]);
        add(w, "param", x, 2, xs), add(w, "gradient", gy, 2, xs), add(w, "exp_avg", m0, 2, xs);
        add(w, "exp_avg_sq", v0, 2, xs);
        cr_assert(!phax_st_add_meta(w, "step", "3") && !phax_st_add_meta(w, "clip", "2"));
        float ss = 0, lr = 1e-3f, b1 = 0.9f, b2 = 0.95f;
        for (int i = SN * SD; i-- > 0;) ss = R(ss + R(R((float)gy[i]) * R((float)gy[i])));
        float norm = R(sqrtf(ss)), coef = R(2.0f / R(norm + 1e-6f));
        coef = coef < 1 ? coef : 1;
        float bc1 = bug ? 1 : R(1 - R(b1 * R(b1 * b1))), bc2 = bug ? 1 : R(1 - R(b2 * R(b2 * b2)));
        for (int i = 0; i < SN * SD; i++) {
            float gi = R(coef * R((float)gy[i])), pi = R((float)x[i]);
            pi = R(pi - R(R(lr * 0.1f) * pi));
            float mi = R(R(b1 * R((float)m0[i])) + R(R(1 - b1) * gi));
            float vi = R(R(b2 * R((float)v0[i])) + R(R(R(1 - b2) * gi) * gi));
            pn[i] = R(pi - R(R(lr * R(mi / bc1)) / R(R(sqrtf(R(vi / bc2))) + 1e-8f)));
            dx[i] = mi, y[i] = vi;
        }
        gn = norm;
        int64_t zs[1] = {1};
        add(t, "param", pn, 2, xs), add(t, "exp_avg", dx, 2, xs), add(t, "exp_avg_sq", y, 2, xs);
        add(t, "grad_norm", &gn, 0, zs);
        free(m0), free(v0), free(pn);
    } else {  // cross_entropy; the bug: the ignored row (-1) counted, as if its target were 0
        int64_t zs[1] = {1};
        add(w, "logits", lg, 2, ls), add(w, "grad.loss", &gl, 0, zs);
        cr_assert(!phax_st_add_i32(w, "targets", tg, 1, ts));
        int32_t *tb = malloc(SN * sizeof *tb);
        cr_assert(tb);
        memcpy(tb, tg, SN * sizeof *tb);
        if (bug) tb[1] = 0;
        their_xent(R, lg, tb, gl, SN, SV, &loss, dx);
        add(t, "loss", &loss, 0, zs), add(t, "grad.logits", dx, 2, ls);
        free(tb);
    }
    write_free(w, in), write_free(t, th);
    free(x), free(gy), free(g), free(b), free(Wa), free(Wb), free(Wc), free(lg), free(y), free(dx), free(d1), free(d2),
        free(d3), free(tg);
}

// One small op at the fixed sizes, judged at prec (the norms' bug: IN asks for eps 0.1).
static void small_case(const char *op, rnd R, const char *prec, int bug, int want_pass) {
    char *in = tu_join(g_dir, "in.safetensors"), *th = tu_join(g_dir, "theirs.safetensors");
    g_norm_eps = bug ? 0.1 : 0;
    small_files(op, R, bug, in, th);
    g_norm_eps = 0;
    char what[96];
    snprintf(what, sizeof what, "%s%s at %s", op, bug ? " (bug)" : ", correct", prec);
    run r = check(op, in, th, prec, 0);
    if (want_pass) expect_pass(&r, what);
    else expect_fail(&r, what);
    run_free(&r), free(in), free(th);
}

static const char *const SMALL[] = {"embedding", "linear", "rmsnorm", "layernorm", "headnorm", "gelu",
                                    "silu",      "swiglu", "rope",    "mix",       "cross_entropy", "adamw", NULL};
Test(check, small_ops_f32_pass) {
    for (int i = 0; SMALL[i]; i++) small_case(SMALL[i], r_f32, "f32", 0, 1);
}
Test(check, small_ops_bf16_pass) {
    for (int i = 0; SMALL[i]; i++) small_case(SMALL[i], r_bf16, "bf16", 0, 1);
}
Test(check, small_ops_bugs_fail) {
    for (int i = 0; SMALL[i]; i++) small_case(SMALL[i], r_f32, "f32", 1, 0);
}

// f16 (binary16, its narrow range included): a correct f16 computation PASSes at f16.
#if defined(__FLT16_MAX__)
Test(check, f16_passes) {
    attention_case(&DOT, OK, r_f16, "f16", 1, "attention dot, correct f16");
    attention_case(&COS, OK, r_f16, "f16", 1, "attention cosine, correct f16");
    mlstm_case(0, OK, r_f16, "f16", 1, "mlstm, correct f16");
    conv_case(0, r_f16, "f16", 1, "ssm_conv, correct f16");
    for (int i = 0; SMALL[i]; i++) small_case(SMALL[i], r_f16, "f16", 0, 1);
    attention_case(&DOT, BUG_GQA, r_f16, "f16", 0, "GQA h % G (f16)");
}
#endif
// tf32: a float32 computation is at least as accurate as TF32's (11-bit products) and PASSes.
Test(check, f32_passes_at_tf32) {
    attention_case(&DOT, OK, r_f32, "tf32", 1, "attention dot, f32 at tf32");
    mlstm_case(0, OK, r_f32, "tf32", 1, "mlstm, f32 at tf32");
}

// The upstream gradient (grad.y) may sit in THEIRS beside the results: it is an input, not
// judged and not "extra".
Test(check, upstream_in_theirs_is_not_judged) {
    char *in = tu_join(g_dir, "in.safetensors"), *th = tu_join(g_dir, "theirs.safetensors");
    attention_files(&DOT, in, th, OK, r_f32);
    phax_st_file f, fi;
    cr_assert(phax_st_read(&f, th) == PHAX_OK && phax_st_read(&fi, in) == PHAX_OK);
    phax_st_writer *w = phax_st_writer_new();
    for (int i = 0; i < f.n; i++)
        cr_assert(!phax_st_add_raw(w, f.t[i].name, f.t[i].dtype, f.t[i].ndim, f.t[i].shape, f.t[i].data));
    const phax_st_tensor *g = phax_st_find(&fi, "grad.y");
    cr_assert(g && !phax_st_add_raw(w, "grad.y", g->dtype, g->ndim, g->shape, g->data));
    write_free(w, th);
    phax_st_free(&f), phax_st_free(&fi);
    run r = check("attention", in, th, "f32", 0);
    cr_expect(r.rc == 0 && strstr(r.out, "\nPASS: all 4 tensors") && !strstr(r.out, "grad.y"), "exit %d:\n%s%s", r.rc,
              r.out, r.err);
    run_free(&r), free(in), free(th);
}

// --- the DSS kernel: their float code (complex as float pairs; A(λ) by the textbook quotient) ---
// bug 1: the ZOH factor A(λ) left out (k = Re Σ C e^{λ l}); bug 2: Im λ's sign flipped (λ̄).
static void their_dss(rnd R, int bug, const double *Lre, const double *Lim, const double *Cre, const double *Cim,
                      const double *dk, int H, int N, int T, double *k, double *dLre, double *dLim, double *dCre,
                      double *dCim) {
    for (int i = 0; i < H * T; i++) k[i] = 0;
    for (int n = 0; n < N; n++) {
        float lr = -R(expf(R((float)Lre[n]))), li = (bug == 2 ? -1 : 1) * R(expf(R((float)Lim[n])));
        float er = R(expf(lr)), c1 = R(cosf(li)), s1 = R(sinf(li));
        float ar = R(R(er * c1) - 1), ai = R(er * s1), dd = R(R(lr * lr) + R(li * li));
        float Ar = bug == 1 ? 1 : R(R(R(ar * lr) + R(ai * li)) / dd);
        float Ai = bug == 1 ? 0 : R(R(R(ai * lr) - R(ar * li)) / dd);
        // A' = (e^λ − A)/λ
        float pr_ = R(R(er * c1) - Ar), pi_ = R(R(er * s1) - Ai);
        float Apr = bug == 1 ? 0 : R(R(R(pr_ * lr) + R(pi_ * li)) / dd);
        float Api = bug == 1 ? 0 : R(R(R(pi_ * lr) - R(pr_ * li)) / dd);
        float glr = 0, gli = 0;
        for (int h = H; h-- > 0;) {
            int hn = h * N + n;
            float cr = R((float)Cre[hn]), ci = R((float)Cim[hn]);
            float ctr = R(R(cr * Ar) - R(ci * Ai)), cti = R(R(cr * Ai) + R(ci * Ar));
            float Gr = 0, Gi = 0, Pr = 0, Pi = 0;
            for (int l = T; l-- > 0;) {
                float r = R(expf(R((float)l * lr))), th = R((float)l * li);
                float e_r = R(r * R(cosf(th))), e_i = R(r * R(sinf(th)));
                // k = C̃·V and G = dk·Vᵀ are matrix products (V the Vandermonde e^{λ_n l})
                k[h * T + l] = R((float)k[h * T + l] + R(MM(ctr, e_r) - MM(cti, e_i)));
                float g = R((float)dk[h * T + l]), gl = R(g * (float)l);
                Gr = R(Gr + MM(g, e_r)), Gi = R(Gi + MM(g, e_i));
                Pr = R(Pr + MM(gl, e_r)), Pi = R(Pi + MM(gl, e_i));
            }
            dCre[hn] = R(R(Ar * Gr) - R(Ai * Gi));
            dCim[hn] = -R(R(Ar * Gi) + R(Ai * Gr));
            // C (A' G + A Gp)
            float xr = R(R(R(Apr * Gr) - R(Api * Gi)) + R(R(Ar * Pr) - R(Ai * Pi)));
            float xi = R(R(R(Apr * Gi) + R(Api * Gr)) + R(R(Ar * Pi) + R(Ai * Pr)));
            glr = R(glr + R(R(cr * xr) - R(ci * xi))), gli = R(gli + R(R(cr * xi) + R(ci * xr)));
        }
        dLre[n] = R(glr * lr);  // dλre/dΛre = −e^{Λre} = λre
        dLim[n] = R(-gli * (bug == 2 ? -li : li));  // dλim/dΛim = e^{Λim} = λim
    }
}

static void dss_case(int bug, rnd R, const char *prec, int want_pass, const char *what) {
    enum { H = 3, N = 4, T = 32 };
    char *in = tu_join(g_dir, "in.safetensors"), *th = tu_join(g_dir, "theirs.safetensors");
    phax_rng rng = phax_rng_new(77);
    double Lre[N] = {-2.3, -1.1, -0.4, -3.0}, Lim[N] = {-1.5, -0.2, 0.6, -2.5};
    double *Cre = normal(H * N, &rng, 0.5), *Cim = normal(H * N, &rng, 0.5), *dk = normal(H * T, &rng, 1);
    int64_t ns[1] = {N}, cs[2] = {H, N}, ks[2] = {H, T};
    phax_st_writer *w = phax_st_writer_new();
    add(w, "lambda_re", Lre, 1, ns), add(w, "lambda_im", Lim, 1, ns), add(w, "c_re", Cre, 2, cs);
    add(w, "c_im", Cim, 2, cs), add(w, "grad.k", dk, 2, ks);
    cr_assert(!phax_st_add_meta(w, "T", "32"));
    write_free(w, in);
    double k[H * T], a[N], b[N], c[H * N], d[H * N];
    their_dss(R, bug, Lre, Lim, Cre, Cim, dk, H, N, T, k, a, b, c, d);
    w = phax_st_writer_new();
    add(w, "k", k, 2, ks), add(w, "grad.lambda_re", a, 1, ns), add(w, "grad.lambda_im", b, 1, ns);
    add(w, "grad.c_re", c, 2, cs), add(w, "grad.c_im", d, 2, cs);
    write_free(w, th);
    run r = check("dss_kernel", in, th, prec, 0);
    if (want_pass) expect_pass(&r, what);
    else expect_fail(&r, what);
    run_free(&r), free(in), free(th), free(Cre), free(Cim), free(dk);
}
Test(check, dss_kernel_passes) {
    dss_case(0, r_f32, "f32", 1, "dss_kernel, correct f32");
    dss_case(0, r_bf16, "bf16", 1, "dss_kernel, correct bf16");
}
Test(check, gallery_dss_zoh_missing) { dss_case(1, r_f32, "f32", 0, "DSS kernel without the ZOH factor A(lambda)"); }

// ssm_recurrent judged against their kernel-then-convolution float code (the same function).
static void recurrent_case(int bug, rnd R, const char *prec, int want_pass, const char *what) {
    enum { B = 2, H = 3, N = 4, T = 24 };
    char *in = tu_join(g_dir, "in.safetensors"), *th = tu_join(g_dir, "theirs.safetensors");
    phax_rng rng = phax_rng_new(78);
    double Lre[N] = {-2.3, -1.1, -0.4, -3.0}, Lim[N] = {-1.5, -0.2, 0.6, -2.5};
    double *Cre = normal(H * N, &rng, 0.5), *Cim = normal(H * N, &rng, 0.5), *u = normal(B * T * H, &rng, 1);
    double *dd0 = normal(H, &rng, 1), *gy = normal(B * T * H, &rng, 1);
    int64_t ns[1] = {N}, cs[2] = {H, N}, us[3] = {B, T, H}, hs[1] = {H};
    phax_st_writer *w = phax_st_writer_new();
    add(w, "lambda_re", Lre, 1, ns), add(w, "lambda_im", Lim, 1, ns), add(w, "c_re", Cre, 2, cs);
    add(w, "c_im", Cim, 2, cs), add(w, "u", u, 3, us), add(w, "d", dd0, 1, hs), add(w, "grad.y", gy, 3, us);
    write_free(w, in);
    double k[H * T], zero[H * T] = {0}, gk[H * T], a[N], b[N], c[H * N], d[H * N], y[B * T * H], du[B * T * H], dd[H];
    their_dss(R, bug, Lre, Lim, Cre, Cim, zero, H, N, T, k, a, b, c, d);
    for (int i = 0; i < H * T; i++) k[i] = R((float)k[i]);
    their_conv(B, T, H, 0, R, u, k, dd0, gy, y, du, gk, dd);
    their_dss(R, bug, Lre, Lim, Cre, Cim, gk, H, N, T, zero, a, b, c, d);
    w = phax_st_writer_new();
    add(w, "y", y, 3, us), add(w, "grad.u", du, 3, us), add(w, "grad.d", dd, 1, hs);
    add(w, "grad.lambda_re", a, 1, ns), add(w, "grad.lambda_im", b, 1, ns);
    add(w, "grad.c_re", c, 2, cs), add(w, "grad.c_im", d, 2, cs);
    write_free(w, th);
    run r = check("ssm_recurrent", in, th, prec, 0);
    if (want_pass) expect_pass(&r, what);
    else expect_fail(&r, what);
    run_free(&r), free(in), free(th), free(Cre), free(Cim), free(u), free(dd0), free(gy);
}
Test(check, ssm_recurrent_passes) {
    recurrent_case(0, r_f32, "f32", 1, "ssm_recurrent, correct f32");
    recurrent_case(0, r_bf16, "bf16", 1, "ssm_recurrent, correct bf16");
}
Test(check, gallery_ssm_lambda_conjugated) {
    recurrent_case(2, r_f32, "f32", 0, "GSS/SSM with Im lambda's sign flipped");
}

// --- the no-false-FAIL sweep (issue 26) -----------------------------------------------------------
// Random draws of correct float implementations of every algorithm this file has, each judged
// by `phax check` at its precision: all must PASS, whatever the sizes, scales and gates; on the
// same draw a bug of the gallery that the draw can show must FAIL. The margins are the result:
// the worst PASS ratio (||theirs − truth|| / ||baseline − truth||, the bound at C = 4) and the
// weakest FAIL ratio per (op, algorithm, precision). PHAX_CHECK_DRAWS draws of each (default 3,
// sizes up to T 257; with 200 — the issue's count — every 25th draw is at T 1024):
//   PHAX_CHECK_DRAWS=200 build/tests/test_check --filter 'check/sweep_*' --verbose
// Each draw's seed is printed; PHAX_CHECK_SEED moves them all.
typedef struct {
    const char *name;
    double worst_pass, weakest_fail;
    int passes, fails, hidden;
} sweep_stat;

// The bound and the relative error phax check printed for tensor `name` on its table line
// "name  rel.err  baseline  ratio  bound  verdict"; NaN if absent.
static double printed_bound(const char *out, const char *name, double *rel_out, double *base_out) {
    size_t n = strlen(name);
    *rel_out = *base_out = NAN;
    for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        double rel, base, ratio, bound;
        if (!strncmp(l, name, n) && l[n] == ' ' && sscanf(l + n, "%lf %lf %lf %lf", &rel, &base, &ratio, &bound) == 4)
            return *rel_out = rel, *base_out = base, bound;
    }
    return NAN;
}

// Does a bug show on this draw? Their bugged outputs (bug_path) against the float64 truth
// (`phax oracle OP IN`, the same truth phax check judges by): a draw can hide a bug (T 1 has no
// stabiliser to forget; a window of 1 makes every key's RoPE moot), and at bf16 a long mLSTM's
// rounding can move its gradients by tens of percent, so a bug is judged where it puts some
// tensor more than twice that tensor's bound from the truth (relative to ‖truth‖, or to 1 where
// the truth is all zeros, as phax check measures; the bound the one printed for the correct
// result on the same IN): a PASS there would be the check's fault. *effect: the largest of
// these relative errors.
static int bug_shows(const char *op, const char *in, const char *bug_path, const char *ok_out, double *effect) {
    char *tp = tu_join(g_dir, "truth.safetensors"), *o = tu_join(g_dir, "stdout"), *e = tu_join(g_dir, "stderr");
    int rc = tu_phax(o, e, NULL, NULL, "oracle", op, in, tp, NULL);
    cr_assert(rc == 0, "phax oracle %s failed (exit %d)", op, rc);
    phax_st_file a = {0}, b = {0};
    cr_assert(!phax_st_read(&a, tp) && !phax_st_read(&b, bug_path), "%s", phax_error());
    int shows = 0;
    *effect = 0;
    for (int i = 0; i < b.n; i++) {
        const phax_st_tensor *y = &b.t[i], *x = phax_st_find(&a, y->name);
        cr_assert(x && y->numel == x->numel, "no truth for %s", y->name);
        double *u = malloc(x->numel * 8 + 8), *v = malloc(x->numel * 8 + 8), num = 0, den = 0;
        cr_assert(u && v && !phax_st_to_f64(x, u) && !phax_st_to_f64(y, v));
        for (size_t j = 0; j < x->numel; j++) num += (u[j] - v[j]) * (u[j] - v[j]), den += u[j] * u[j];
        double rel, base, bound = printed_bound(ok_out, y->name, &rel, &base);
        cr_assert(bound >= 0, "no bound printed for %s:\n%s", y->name, ok_out);
        double err = sqrt(num) / (den > 0 ? sqrt(den) : 1);
        if (!(err <= *effect)) *effect = err;
        // an unresolved tensor (the baseline 1/C or more off: src/check.c) shows no bug
        shows |= !(err <= 2 * bound) && !(BOUND_C * base >= 1);
        free(u), free(v);
    }
    phax_st_free(&a), phax_st_free(&b);
    free(tp), free(o), free(e);
    return shows;
}

#define SWEEP_STAT(name) {name, 0, INFINITY, 0, 0, 0}  // nothing judged yet

static int sweep_draws(void) {
    const char *e = getenv("PHAX_CHECK_DRAWS");
    int n = e ? atoi(e) : 3;
    return n > 0 && n <= 100000 ? n : 3;
}

static uint64_t sweep_seed(int op, int draw) {
    const char *e = getenv("PHAX_CHECK_SEED");
    uint64_t base = e ? strtoull(e, NULL, 10) : 2026;
    return base * 1000003u + (uint64_t)op * 100000u + (uint64_t)draw;
}

// Judge one pair; a PASS where a FAIL is wanted (or the reverse) fails the test with the output.
static char *g_ok_out;  // the table of the last PASS sweep_judge saw (bug_shows reads its bounds)

static void sweep_verdict(run r, const char *op, const char *in, const char *th, int want_pass, sweep_stat *st,
                          const char *what) {
    if (want_pass) free(g_ok_out), g_ok_out = strdup(r.out);
    double q = verdict_ratio(r.out);
    // A correct result must PASS (its ratio may pass C where the floor covers it: a tensor of a
    // few elements whose baseline happened to round exactly); a bug must FAIL beyond C.
    int ok = want_pass ? r.rc == 0 && strstr(r.out, "\nPASS: all") != NULL
                       : r.rc == 1 && strstr(r.out, "\nFAIL: ") && !strstr(r.out, "PASS: ") && q > BOUND_C;
    cr_expect(ok, "%s: %s, exit %d, ratio %g:\n%s%s", what, want_pass ? "expected PASS" : "expected FAIL", r.rc, q,
              r.out, r.err);
    const char *keep = getenv("PHAX_CHECK_KEEP");  // a folder: the files of every unexpected verdict
    if (!ok && keep) tu_check_keep(keep, op, in, th);
    printf("  verdict %s %s ratio %.4g\n", want_pass ? "correct" : "bug", r.rc == 0 ? "PASS" : r.rc == 1 ? "FAIL" : "ERROR",
           q);  // every verdict, so that a sweep stopped early still tells its counts and margins
    if (want_pass && q > BOUND_C / 2)  // near the bound: the draw to look at (its seed is above)
        printf("  near the bound: PASS at ratio %.3g\n%s", q, r.out);
    if (want_pass) {
        st->passes++;
        if (!(q <= st->worst_pass)) st->worst_pass = q;
    } else {
        st->fails++;
        if (!(q >= st->weakest_fail)) st->weakest_fail = q;
    }
}

// phax check's report on one of several THEIRS: the text after heading k (of the form
// "== THEIRS k of n: ...") up to the next, and its exit status as its verdict line says.
static run report_of(const run *all, int k, int n) {
    run r = {.rc = 2, .out = tu_check_report(all->out, k, n), .err = strdup(all->err)};
    if (r.out[0]) r.rc = strstr(r.out, "\nPASS: all") ? 0 : strstr(r.out, "\nFAIL: ") ? 1 : 2;
    return r;
}

// One draw: their correct outputs (ok) and, where the draw has a bug (bug not NULL), their bugged
// ones, judged by one `phax check` with both files (one truth, one bound: half the time of two
// runs). The correct must PASS; the bug must FAIL where it shows (bug_shows, against the truth).
static void sweep_judge(const char *op, const char *in, const char *ok, const char *bug, const char *prec,
                        sweep_stat *st, const char *what) {
    char *o = tu_join(g_dir, "stdout"), *e = tu_join(g_dir, "stderr");
    run all;
    const char *argv[] = {"check", op, in, ok, "--precision", prec, "--max-memory", CHECK_MAX_MIB, bug, NULL};
    all.rc = tu_phax_v(o, e, NULL, NULL, argv);
    all.out = tu_slurp(o, NULL), all.err = tu_slurp(e, NULL);
    free(o), free(e);
    if (getenv("PHAX_CHECK_PRINT")) printf("$ phax check %s IN OK%s --precision %s\n%s", op, bug ? " BUG" : "", prec, all.out);
    run r1 = bug ? report_of(&all, 1, 2) : all;
    sweep_verdict(r1, op, in, ok, 1, st, what);
    if (bug && g_ok_out && strstr(g_ok_out, "\nPASS: all")) {  // else the correct one failed (reported): no bounds
        double eff;
        run r2 = report_of(&all, 2, 2);
        if (bug_shows(op, in, bug, g_ok_out, &eff)) sweep_verdict(r2, op, in, bug, 0, st, what);
        else {
            st->hidden++;
            printf("  the bug puts no output more than twice its bound from the truth (at most %.3g): hidden by this draw\n",
                   eff);
        }
        run_free(&r2);
    }
    if (bug) run_free(&r1);
    run_free(&all);
}

static void sweep_report(const sweep_stat *st, int n) {
    free(g_ok_out), g_ok_out = NULL;
    for (int i = 0; i < n; i++)
        printf("sweep %-30s %4d PASS (worst ratio %.3g)  %4d FAIL (weakest ratio %.3g)  %3d bugs hidden by the draw\n",
               st[i].name, st[i].passes, st[i].passes ? st[i].worst_pass : NAN, st[i].fails,
               st[i].fails ? st[i].weakest_fail : NAN, st[i].hidden);
    fflush(stdout);
}

static int pick(phax_rng *r, int n) { return (int)(phax_rng_u64(r) % (uint64_t)n); }

// PHAX_CHECK_MAXT=n (PHAX_CHECK_MINT=n): draws of T > n (T < n) are skipped, the rest drawn as
// they would be (each draw has its own seed): a record's part repeated, or split in two.
static int sweep_skip(int T) {
    const char *e = getenv("PHAX_CHECK_MAXT"), *f = getenv("PHAX_CHECK_MINT");
    return (e && T > atoi(e)) || (f && T < atoi(f));
}

// PHAX_CHECK_STREAMS=a,b,...: only the streams of these numbers are drawn (the rest skipped, each
// stream's draws unchanged): a record split over cores, or one stream repeated.
static int sweep_stream_on(int stream) {
    const char *e = getenv("PHAX_CHECK_STREAMS");
    if (!e) return 1;
    for (const char *q = e; *q;) {
        char *end;
        long v = strtol(q, &end, 10);
        if (end == q) return 0;  // malformed: nothing drawn, so the sweep's empty report shows it
        if (v == stream) return 1;
        q = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return 0;
    }
    return 0;
}

static int sweep_T(phax_rng *r, int draw, int ndraws) {
    static const int Ts[] = {1, 2, 7, 16, 33, 64, 100, 128, 257};
    if (ndraws >= 25 && draw % 25 == 24) return 1024;
    return Ts[pick(r, (int)(sizeof Ts / sizeof *Ts))];
}

// The precisions their code runs at: its rounding of values and results, of a dot product's
// operands, and the name phax check is asked for.
typedef struct {
    rnd R, O;
    const char *name;
} sweep_prec;
static const sweep_prec SP_F32 = {r_f32, r_f32, "f32"}, SP_BF16 = {r_bf16, r_bf16, "bf16"},
                        SP_TF32 = {r_f32, r_tf32_operand, "tf32"};

// Attention: GQA groups 1-3 on 1-2 kv heads, head dims 6-20, windows 1 .. beyond T, dot and
// cosine scores, RoPE on and off, logits' spread 0.3-3; online softmax key by key, over tiles
// of 16-128 keys, and naive; float32, TF32 operands, bf16.
Test(check, sweep_attention, .timeout = 7200) {
    int n = sweep_draws();
    enum { NV = 9 };
    static const struct {
        const char *name;
        int tile;  // 1 online, 0 naive, -1 tiled (the tile drawn)
        const sweep_prec *pr;
        int stream;  // the seed's stream (the first two kept from the sweep's first version)
    } V[NV] = {{"attention online-softmax f32", 1, &SP_F32, 1}, {"attention online-softmax bf16", 1, &SP_BF16, 2},
               {"attention online-softmax tf32", 1, &SP_TF32, 3}, {"attention tiled f32", -1, &SP_F32, 4},
               {"attention tiled bf16", -1, &SP_BF16, 5},         {"attention tiled tf32", -1, &SP_TF32, 6},
               {"attention naive f32", 0, &SP_F32, 7},            {"attention naive bf16", 0, &SP_BF16, 8},
               {"attention naive tf32", 0, &SP_TF32, 9}};
    sweep_stat st[NV];
    for (int v = 0; v < NV; v++) st[v] = (sweep_stat)SWEEP_STAT(V[v].name);
    char *in = tu_join(g_dir, "in.safetensors"), *th = tu_join(g_dir, "theirs.safetensors"),
         *ok = tu_join(g_dir, "ok.safetensors");
    for (int d = 0; d < n; d++)
        for (int p = 0; p < NV; p++) {
            if (!sweep_stream_on(V[p].stream)) continue;
            uint64_t seed = sweep_seed(V[p].stream, d);
            phax_rng r = phax_rng_new(seed);
            static const int dhs[] = {6, 8, 12, 16, 20}, tiles[] = {16, 32, 64, 128};
            static const double sqk[] = {0.3, 1, 3};
            acase c;
            c.T = sweep_T(&r, d, n);
            if (sweep_skip(c.T)) continue;
            c.B = c.T >= 1024 ? 1 : 1 + pick(&r, 2);
            c.Hkv = 1 + pick(&r, 2);
            c.Hq = c.Hkv * (1 + pick(&r, 3));
            c.dh = dhs[pick(&r, 5)];
            int wk = pick(&r, 5);
            c.window = wk == 0 ? 0 : wk == 1 ? 1 : wk == 2 ? 3 : wk == 3 ? c.T / 2 + 1 : c.T + 5;
            c.cosine = pick(&r, 2);
            c.rope = pick(&r, 2);
            double s = sqk[pick(&r, 3)];
            g_tile = V[p].tile >= 0 ? V[p].tile : tiles[pick(&r, 4)], g_O = V[p].pr->O;
            rnd R = V[p].pr->R;
            const char *prec = V[p].pr->name;
            char what[256];
            snprintf(what, sizeof what, "%s seed %llu: B %d T %d Hq %d Hkv %d dh %d window %d %s rope %d scale %g tile %d",
                     V[p].name, (unsigned long long)seed, c.B, c.T, c.Hq, c.Hkv, c.dh, c.window,
                     c.cosine ? "cosine" : "dot", c.rope, s, g_tile);
            printf("%s\n", what);
            attention_files_seeded(&c, in, ok, OK, R, seed, s);
            // A bug this draw can show: a head map that differs (G > 1, Hkv > 1), keys without
            // RoPE, a window edge inside T (float32: its one extra key is far above rounding).
            bug bg = c.Hkv > 1 && c.Hq > c.Hkv ? BUG_GQA : c.rope && c.T > 1 ? BUG_ROPE_K
                     : c.window > 0 && c.window < c.T ? BUG_WINDOW : c.T > 1 ? BUG_CAUSAL : OK;
            if (bg != OK) attention_files_seeded(&c, in, th, bg, R, seed, s);
            sweep_judge("attention", in, ok, bg != OK ? th : NULL, prec, &st[p], what);
            g_tile = 1, g_O = r_f32;
        }
    sweep_report(st, NV);
    free(in), free(th), free(ok);
}

// A float FFT of n (a power of two) points in place, iterative radix 2, twiddles in float:
// the way a hand-written or library float32 FFT convolution rounds (inv: the inverse, scaled).
static void fft_f(float *re, float *im, int n, int inv) {
    for (int i = 1, j = 0; i < n; i++) {
        int bit = n >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j ^= bit;
        if (i < j) {
            float t = re[i];
            re[i] = re[j], re[j] = t, t = im[i], im[i] = im[j], im[j] = t;
        }
    }
    for (int len = 2; len <= n; len <<= 1) {
        float ang = (inv ? 2.0f : -2.0f) * 3.14159265358979f / (float)len;
        for (int i = 0; i < n; i += len)
            for (int k = 0; k < len / 2; k++) {
                float wr = cosf(ang * (float)k), wi = sinf(ang * (float)k);
                float ur = re[i + k], ui = im[i + k];
                float vr = re[i + k + len / 2] * wr - im[i + k + len / 2] * wi;
                float vi = re[i + k + len / 2] * wi + im[i + k + len / 2] * wr;
                re[i + k] = ur + vr, im[i + k] = ui + vi;
                re[i + k + len / 2] = ur - vr, im[i + k + len / 2] = ui - vi;
            }
    }
    if (inv)
        for (int i = 0; i < n; i++) re[i] /= (float)n, im[i] /= (float)n;
}

// out[i] (i < T) = IFFT(op(A) · B)[i]: conj 0 the linear convolution Σ_j a[j] b[i − j], conj 1
// the correlation Σ_j a[j] b[i + j]; a, b: T floats zero-padded to n ≥ 2T (no wrap-around).
static void fft_conv_f(const float *a, const float *b, float *out, int T, int n, int conj) {
    float *ar = calloc((size_t)n, 4), *ai = calloc((size_t)n, 4), *br = calloc((size_t)n, 4), *bi = calloc((size_t)n, 4);
    cr_assert(ar && ai && br && bi);
    for (int i = 0; i < T; i++) ar[i] = a[i], br[i] = b[i];
    fft_f(ar, ai, n, 0), fft_f(br, bi, n, 0);
    for (int i = 0; i < n; i++) {
        float xr = ar[i], xi = conj ? -ai[i] : ai[i];
        float pr = xr * br[i] - xi * bi[i], pi = xr * bi[i] + xi * br[i];
        ar[i] = pr, ai[i] = pi;
    }
    fft_f(ar, ai, n, 1);
    for (int i = 0; i < T; i++) out[i] = ar[i];
    free(ar), free(ai), free(br), free(bi);
}

// The GSS/SSM convolution through float32 FFTs (what S4/DSS/GSS codes do for long T): y = k ∗ u
// + d u, du = k ⋆ gy + d gy, dk = Σ_b u ⋆ gy, dd = Σ gy u. Its error is normwise (each output
// carries ~u log n of the whole signal), where the direct sum's is per output.
static void their_conv_fft(int B, int T, int H, const double *u, const double *k, const double *d, const double *gy,
                           double *y, double *du, double *dk, double *dd) {
    int n = 1;
    while (n < 2 * T) n <<= 1;
    float *kf = malloc((size_t)T * 4), *uf = malloc((size_t)T * 4), *gf = malloc((size_t)T * 4),
          *o = malloc((size_t)T * 4), *kacc = malloc((size_t)T * 4);
    cr_assert(kf && uf && gf && o && kacc);
    for (int h = 0; h < H; h++) {
        float dh_ = (float)d[h], ddh = 0;
        for (int i = 0; i < T; i++) kf[i] = (float)k[(size_t)h * T + i], kacc[i] = 0;
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++)
                uf[t] = (float)u[((size_t)b * T + t) * H + h], gf[t] = (float)gy[((size_t)b * T + t) * H + h];
            fft_conv_f(kf, uf, o, T, n, 0);
            for (int t = 0; t < T; t++) y[((size_t)b * T + t) * H + h] = o[t] + dh_ * uf[t];
            fft_conv_f(kf, gf, o, T, n, 1);
            for (int t = 0; t < T; t++) du[((size_t)b * T + t) * H + h] = o[t] + dh_ * gf[t];
            fft_conv_f(uf, gf, o, T, n, 1);
            for (int t = 0; t < T; t++) kacc[t] += o[t], ddh += gf[t] * uf[t];
        }
        for (int i = 0; i < T; i++) dk[(size_t)h * T + i] = kacc[i];
        dd[h] = ddh;
    }
    free(kf), free(uf), free(gf), free(o), free(kacc);
}

// The SSM convolution: direct sums (float32, bf16, TF32 operands) and float32 FFTs; kernels of scale 0.03-1,
// decaying or not; the gallery's kernel shifted by one lag.
Test(check, sweep_ssm_conv, .timeout = 3600) {
    int n = sweep_draws();
    sweep_stat st[4] = {SWEEP_STAT("ssm_conv direct f32"), SWEEP_STAT("ssm_conv direct bf16"),
                        SWEEP_STAT("ssm_conv fft f32"), SWEEP_STAT("ssm_conv direct tf32")};
    char *in = tu_join(g_dir, "in.safetensors"), *th = tu_join(g_dir, "theirs.safetensors"),
         *ok = tu_join(g_dir, "ok.safetensors");
    for (int dr = 0; dr < n; dr++)
        for (int v = 0; v < 4; v++) {
            uint64_t seed = sweep_seed(10 + v, dr);
            phax_rng r = phax_rng_new(seed);
            static const double ks_[] = {0.03, 0.3, 1};
            int T = sweep_T(&r, dr, n), B = 1 + pick(&r, 2), H = 1 + pick(&r, 3), decay = pick(&r, 2);
            if (sweep_skip(T)) continue;
            double ksc = ks_[pick(&r, 3)];
            int64_t us[3] = {B, T, H}, kss[2] = {H, T}, hs[1] = {H};
            size_t nu = (size_t)B * T * H, nk = (size_t)H * T;
            double *u = normal(nu, &r, 1), *k = normal(nk, &r, ksc), *d = normal((size_t)H, &r, 1),
                   *gy = normal(nu, &r, 1);
            if (decay)  // an SSM kernel decays along the lag (S4/DSS: |e^{λ t}|)
                for (int h = 0; h < H; h++)
                    for (int t = 0; t < T; t++) k[(size_t)h * T + t] = (double)(float)(k[(size_t)h * T + t] * exp(-0.05 * t));
            char what[200];
            const char *prec = v == 1 ? "bf16" : v == 3 ? "tf32" : "f32";
            g_O = v == 3 ? r_tf32_operand : r_f32;
            snprintf(what, sizeof what, "ssm_conv %s seed %llu: B %d T %d H %d kernel scale %g%s", st[v].name,
                     (unsigned long long)seed, B, T, H, ksc, decay ? " decaying" : "");
            printf("%s\n", what);
            phax_st_writer *w = phax_st_writer_new();
            add(w, "u", u, 3, us), add(w, "k", k, 2, kss), add(w, "d", d, 1, hs), add(w, "grad.y", gy, 3, us);
            write_free(w, in);
            double *y = malloc(nu * 8), *du = malloc(nu * 8), *dk = malloc(nk * 8), *dd = malloc((size_t)H * 8);
            cr_assert(y && du && dk && dd);
            for (int bugged = 0; bugged < 2; bugged++) {
                if (bugged && T < 2) break;
                if (v == 2 && !bugged) their_conv_fft(B, T, H, u, k, d, gy, y, du, dk, dd);
                else their_conv(B, T, H, bugged, v == 1 ? r_bf16 : r_f32, u, k, d, gy, y, du, dk, dd);
                w = phax_st_writer_new();
                add(w, "y", y, 3, us), add(w, "grad.u", du, 3, us), add(w, "grad.k", dk, 2, kss);
                add(w, "grad.d", dd, 1, hs);
                write_free(w, bugged ? th : ok);
            }
            sweep_judge("ssm_conv", in, ok, T >= 2 ? th : NULL, prec, &st[v], what);
            free(u), free(k), free(d), free(gy), free(y), free(du), free(dk), free(dd);
            g_O = r_f32;
        }
    sweep_report(st, 4);
    free(in), free(th), free(ok);
}

// The mLSTM: the parallel form with the log-decays as cumulative-sum differences and as direct
// sums, the recurrent form (from a drawn m0), and the chunkwise form (chunks of 16-256, the
// stabiliser carried either way), T up to 1024 for all; float32, TF32 operands, bf16; gates N(0, s²) with s 1-3, forget gates centred at 0 or +3 (mostly open),
// q/k/v head dims 4-16. Gallery: the stabiliser not subtracted in S (parallel), i′ without −m
// (recurrent), the carried state not decayed by its chunk (chunkwise).
// The mLSTM sweep's algorithms (form, precision).
enum { MLSTM_NV = 15 };
static const struct {
    const char *name;
    // 0 parallel with cumulative-sum decays, 1 recurrent, 2 parallel with direct sums,
    // 3 chunkwise with the stabiliser carried from m0 (judged as form=recurrent), 4 chunkwise
    // with the parallel form's stabiliser (judged as form=parallel)
    int form;
    const sweep_prec *pr;
} MLSTM_V[MLSTM_NV] = {{"mlstm parallel cumsum f32", 0, &SP_F32},   {"mlstm parallel cumsum bf16", 0, &SP_BF16},
           {"mlstm recurrent f32", 1, &SP_F32},         {"mlstm recurrent bf16", 1, &SP_BF16},
           {"mlstm parallel cumsum tf32", 0, &SP_TF32}, {"mlstm parallel direct f32", 2, &SP_F32},
           {"mlstm parallel direct bf16", 2, &SP_BF16}, {"mlstm parallel direct tf32", 2, &SP_TF32},
           {"mlstm recurrent tf32", 1, &SP_TF32},       {"mlstm chunkwise carried f32", 3, &SP_F32},
           {"mlstm chunkwise carried tf32", 3, &SP_TF32}, {"mlstm chunkwise carried bf16", 3, &SP_BF16},
           {"mlstm chunkwise parallel-m f32", 4, &SP_F32}, {"mlstm chunkwise parallel-m tf32", 4, &SP_TF32},
           {"mlstm chunkwise parallel-m bf16", 4, &SP_BF16}};

// Draw dr (of n) of stream v: their correct and bugged outputs, judged (files in, ok, th).
static void mlstm_sweep_draw(int v, int dr, int n, sweep_stat *st, const char *in, const char *ok, const char *th) {
    int rec = MLSTM_V[v].form == 1 || MLSTM_V[v].form == 3, chunk = MLSTM_V[v].form >= 3;
    uint64_t seed = sweep_seed(v < 9 ? 20 + v : 110 + v, dr);
    phax_rng r = phax_rng_new(seed);
    static const double gsc[] = {1, 2, 3};
    int T = sweep_T(&r, dr, n), B = T >= 1024 ? 1 : 1 + pick(&r, 2), H = 1 + pick(&r, 2);
    if (sweep_skip(T)) return;
    int DK = 4 + pick(&r, 13), DV = 4 + pick(&r, 13);
    if (chunk) {  // a chunk of 16-256 shorter than T where one is (a carry to get wrong)
        int nc = 0;
        while (nc < 5 && (16 << nc) < T) nc++;
        chunk = 16 << (nc ? pick(&r, nc) : 0);
    }
    double gs_ = gsc[pick(&r, 3)], shift = pick(&r, 2) ? 3 : 0, m0 = rec ? (double)(float)(2 * phax_rng_normal(&r)) : 0;
    int64_t qs[4] = {B, T, H, DK}, vs[4] = {B, T, H, DV}, gs[3] = {B, T, H};
    size_t nq = (size_t)B * T * H * DK, nv = (size_t)B * T * H * DV, ng = (size_t)B * T * H;
    double *q = normal(nq, &r, 1), *k = normal(nq, &r, 1), *vv = normal(nv, &r, 1), *gh = normal(nv, &r, 1);
    double *ig = normal(ng, &r, gs_), *fg = normal(ng, &r, gs_);
    for (size_t i = 0; i < ng; i++) fg[i] = (double)(float)(fg[i] + shift);
    const char *prec = MLSTM_V[v].pr->name;
    rnd R = MLSTM_V[v].pr->R;
    g_O = MLSTM_V[v].pr->O, g_direct_decay = MLSTM_V[v].form == 2;
    char what[240], m0s[64];
    snprintf(m0s, sizeof m0s, "%.9g", m0);
    snprintf(what, sizeof what, "%s seed %llu: B %d T %d H %d dqk %d dv %d gates sd %g fgate shift %g chunk %d%s%s",
             st->name, (unsigned long long)seed, B, T, H, DK, DV, gs_, shift, chunk, rec ? " m0 " : "",
             rec ? m0s : "");
    printf("%s\n", what);
    phax_st_writer *w = phax_st_writer_new();
    add(w, "q", q, 4, qs), add(w, "k", k, 4, qs), add(w, "v", vv, 4, vs), add(w, "igate", ig, 3, gs);
    add(w, "fgate", fg, 3, gs), add(w, "grad.h", gh, 4, vs);
    if (rec) cr_assert(!phax_st_add_meta(w, "form", "recurrent") && !phax_st_add_meta(w, "m0", m0s));
    write_free(w, in);
    double *h = malloc(nv * 8), *dq = malloc(nq * 8), *dk = malloc(nq * 8), *dv = malloc(nv * 8),
           *di = malloc(ng * 8), *df = malloc(ng * 8);
    cr_assert(h && dq && dk && dv && di && df);
    for (int bugged = 0; bugged < 2; bugged++) {
        bug bg = !bugged ? OK : chunk ? BUG_CARRY : rec ? BUG_ISTAB : BUG_STAB;
        if (chunk)
            their_mlstm_chunk(B, T, H, DK, DV, bg, R, chunk, rec, (float)m0, q, k, vv, ig, fg, gh, h, dq, dk, dv, di, df);
        else if (rec) their_mlstm_rec(B, T, H, DK, DV, bg, R, (float)m0, q, k, vv, ig, fg, gh, h, dq, dk, dv, di, df);
        else their_mlstm(B, T, H, DK, DV, bg, R, q, k, vv, ig, fg, gh, h, dq, dk, dv, di, df);
        w = phax_st_writer_new();
        add(w, "h", h, 4, vs), add(w, "grad.q", dq, 4, qs), add(w, "grad.k", dk, 4, qs);
        add(w, "grad.v", dv, 4, vs), add(w, "grad.igate", di, 3, gs), add(w, "grad.fgate", df, 3, gs);
        write_free(w, bugged ? th : ok);
    }
    sweep_judge("mlstm", in, ok, th, prec, st, what);
    free(q), free(k), free(vv), free(gh), free(ig), free(fg), free(h), free(dq), free(dk), free(dv), free(di),
        free(df);
    g_O = r_f32, g_direct_decay = 0;
}

// A sweep of nv streams (name(v) each): every draw of every stream in turn, then the report.
typedef void (*sweep_draw_fn)(int v, int dr, int n, sweep_stat *st, const char *in, const char *ok, const char *th);
static void sweep_streams(int nv, const char *(*name)(int), sweep_draw_fn draw) {
    int n = sweep_draws();
    sweep_stat *st = malloc((size_t)nv * sizeof *st);
    cr_assert(st);
    for (int v = 0; v < nv; v++) st[v] = (sweep_stat)SWEEP_STAT(name(v));
    char *in = tu_join(g_dir, "in.safetensors"), *th = tu_join(g_dir, "theirs.safetensors"),
         *ok = tu_join(g_dir, "ok.safetensors");
    for (int dr = 0; dr < n; dr++)
        for (int v = 0; v < nv; v++) draw(v, dr, n, &st[v], in, ok, th);
    sweep_report(st, nv);
    free(in), free(th), free(ok), free(st);
}

static const char *mlstm_stream_name(int v) { return MLSTM_V[v].name; }
Test(check, sweep_mlstm, .timeout = 7200) { sweep_streams(MLSTM_NV, mlstm_stream_name, mlstm_sweep_draw); }

// One draw dr of mLSTM stream v judged again as the sweep judges it (sweep_verdict fails the test
// if the correct one FAILs): 1 if the correct outputs PASSed.
static int mlstm_draw_passes(int v, int dr) {
    char *in = tu_join(g_dir, "in.safetensors"), *th = tu_join(g_dir, "theirs.safetensors"),
         *ok = tu_join(g_dir, "ok.safetensors");
    sweep_stat st = SWEEP_STAT(MLSTM_V[v].name);
    mlstm_sweep_draw(v, dr, 200, &st, in, ok, th);
    free(in), free(th), free(ok);
    return st.passes == 1;
}

// The mLSTM sweep's false FAIL at 468d8cc (seed 2028306169, draw 91 of "mlstm recurrent bf16":
// T 257, gates of sd 3): their correct bf16 recurrent mLSTM's grad.q was 590 % off the truth
// where the baseline's was 41 % (ratio 14.3). At bf16 these gradients are beyond resolution —
// the bound (C·41 %) already admits an all-zero output — so phax check calls such tensors
// unresolved and lets a finite error pass (src/check.c). The draw must PASS now, with a note.
Test(check, mlstm_bf16_unresolved_gradients) {
    cr_expect(mlstm_draw_passes(3, 91));
    cr_expect(g_ok_out && strstr(g_ok_out, "unresolved at bf16"), "%s", g_ok_out ? g_ok_out : "");
}

// The mLSTM sweep's last false FAIL at 468d8cc (seed 2038106271, draw 193 of "mlstm chunkwise
// carried bf16": T 1, B 1, H 2): their correct grad.igate, two elements, one a cancellation to
// ~0, was 37 % off the truth where the worst of the baseline's five roundings was 8.5 % (ratio
// 4.38). A norm over two elements does not concentrate, so five draws of the rounding do not say
// how large a sound error can be: a tensor of n elements now gets about 256/n stochastic
// roundings (at most 64; src/oracle.c, sr_draws), which reach 113 % there. The draw must PASS,
// and the JSON must say how many roundings the small tensors got.
Test(check, mlstm_few_elements_more_roundings) {
    cr_expect(mlstm_draw_passes(11, 193));
    char *in = tu_join(g_dir, "in.safetensors"), *ok = tu_join(g_dir, "ok.safetensors");  // the draw's files
    run r = check("mlstm", in, ok, "bf16", 1);
    const char *gi = strstr(r.out, "\"name\": \"grad.igate\"");  // B·T·H = 2 elements: 64 stochastic + nearest
    cr_expect(r.rc == 0 && gi && !strncmp(strstr(gi, "\"draws\": "), "\"draws\": 65,", 12), "%s", r.out);
    run_free(&r);
    free(in), free(ok);
}

// --- Gated DeltaNet ------------------------------------------------------------------------------
// Their Gated DeltaNet, the recurrent form as flash-linear-attention's PyTorch recurrence writes
// it: per step the state decayed, the delta rule S += β (v − S k̂) k̂ᵀ on the decayed state, o =
// S q̂; float32 (or R) state; the backward by hand from a tape of the states, its sums over dv
// first (another order than check/gdn.c's). q̂, k̂ L2-normalised (eps 1e-6 inside the root),
// q̂ scaled by 1/√dk. Bugs: BUG_DECAY (α dropped), BUG_BETA (β on v only: e = βv − S k̂).
static void their_gdn(int B, int T, int H, int DK, int DV, bug bg, rnd R, const double *q, const double *k,
                      const double *v, const double *g, const double *beta, const double *s0, const double *go,
                      const double *gsT, double *o, double *sT, double *dq, double *dk, double *dv, double *dg,
                      double *db, double *ds0) {
    size_t ns = (size_t)DK * DV;
    float *Ss = malloc(((size_t)T + 1) * ns * 4), *dS = malloc(ns * 4), *kh = malloc((size_t)DK * 4),
          *qh = malloc((size_t)DK * 4), *e = malloc((size_t)DV * 4), *de = malloc((size_t)DV * 4),
          *dkh = malloc((size_t)DK * 4), *dqh = malloc((size_t)DK * 4), *A = malloc(ns * 4);
    cr_assert(Ss && dS && kh && qh && e && de && dkh && dqh && A);
    float sc = R(1.0f / sqrtf((float)DK));
#define IX(t) (((size_t)b * T + (t)) * H + hh)
#define SX(x, i, j) (x)[(size_t)(i) * DK + (j)]
    // x̂ = s·x/√(Σx² + eps) and its derivative
#define UNIT(xh, rr, src, s_)                                                                      \
    do {                                                                                           \
        float ss_ = 0;                                                                             \
        for (int j = 0; j < DK; j++) ss_ = R(ss_ + MM(R((float)(src)[j]), R((float)(src)[j])));    \
        rr = R(1.0f / R(sqrtf(R(ss_ + 1e-6f))));                                                   \
        for (int j = 0; j < DK; j++) (xh)[j] = R(R((s_) * rr) * R((float)(src)[j]));              \
    } while (0)
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < H; hh++) {
            size_t si = ((size_t)b * H + hh) * ns;
            for (int i = 0; i < DV; i++)
                for (int j = 0; j < DK; j++) SX(Ss, i, j) = s0 ? R((float)s0[si + (size_t)j * DV + i]) : 0;
            for (int t = 0; t < T; t++) {
                float *S = Ss + (size_t)(t + 1) * ns, al = bg == BUG_DECAY ? 1.0f : R(expf(R((float)g[IX(t)]))),
                      be = R((float)beta[IX(t)]), r;
                UNIT(kh, r, k + IX(t) * DK, 1.0f);
                UNIT(qh, r, q + IX(t) * DK, sc);
                for (size_t x = 0; x < ns; x++) S[x] = R(al * Ss[(size_t)t * ns + x]);  // decay first
                for (int i = 0; i < DV; i++) {
                    float sk = 0, vi = R((float)v[IX(t) * DV + i]);
                    for (int j = DK - 1; j >= 0; j--) sk = R(sk + MM(SX(S, i, j), kh[j]));
                    e[i] = bg == BUG_BETA ? R(R(be * vi) - sk) : R(be * R(vi - sk));
                    for (int j = 0; j < DK; j++) SX(S, i, j) = R(SX(S, i, j) + R(e[i] * kh[j]));
                }
                for (int i = 0; i < DV; i++) {
                    float a = 0;
                    for (int j = DK - 1; j >= 0; j--) a = R(a + MM(SX(S, i, j), qh[j]));
                    o[IX(t) * DV + i] = a;
                }
            }
            for (int i = 0; i < DV; i++)
                for (int j = 0; j < DK; j++) {
                    sT[si + (size_t)j * DV + i] = SX(Ss + (size_t)T * ns, i, j);
                    SX(dS, i, j) = gsT ? R((float)gsT[si + (size_t)j * DV + i]) : 0;
                }
            for (int t = T - 1; t >= 0; t--) {
                const float *St = Ss + (size_t)(t + 1) * ns, *Sp = Ss + (size_t)t * ns;
                float al = bg == BUG_DECAY ? 1.0f : R(expf(R((float)g[IX(t)]))), be = R((float)beta[IX(t)]), rq, rk;
                UNIT(kh, rk, k + IX(t) * DK, 1.0f);
                UNIT(qh, rq, q + IX(t) * DK, sc);
                for (size_t x = 0; x < ns; x++) A[x] = R(al * Sp[x]);  // the decayed state
                for (int j = 0; j < DK; j++) {  // o = S_t q̂: dq̂ = S_tᵀ do (sums over dv), dS += do q̂ᵀ
                    float a = 0;
                    for (int i = 0; i < DV; i++) a = R(a + MM(SX(St, i, j), R((float)go[IX(t) * DV + i])));
                    dqh[j] = a, dkh[j] = 0;
                }
                for (int i = 0; i < DV; i++)
                    for (int j = 0; j < DK; j++) SX(dS, i, j) = R(SX(dS, i, j) + R(R((float)go[IX(t) * DV + i]) * qh[j]));
                // S_t = A + e k̂ᵀ, e = β (v − A k̂) (or βv − A k̂): de = dS k̂, dk̂ = dSᵀ e − Aᵀ d(Ak̂), dA = dS − d(Ak̂) k̂ᵀ
                float dbe = 0;
                for (int i = 0; i < DV; i++) {
                    float sk = 0, dsk = 0, vi = R((float)v[IX(t) * DV + i]);
                    for (int j = 0; j < DK; j++) sk = R(sk + MM(SX(A, i, j), kh[j])), dsk = R(dsk + MM(SX(dS, i, j), kh[j]));
                    e[i] = bg == BUG_BETA ? R(R(be * vi) - sk) : R(be * R(vi - sk));
                    float dsk_ = bg == BUG_BETA ? dsk : R(be * dsk);  // d(A k̂)_i = −that
                    de[i] = dsk_;
                    dbe = R(dbe + R(dsk * (bg == BUG_BETA ? vi : R(vi - sk))));
                    dv[IX(t) * DV + i] = bg == BUG_BETA ? R(be * dsk) : dsk_;
                }
                for (int j = 0; j < DK; j++) {
                    float a = 0;
                    for (int i = 0; i < DV; i++) a = R(R(a + MM(SX(dS, i, j), e[i])) - MM(SX(A, i, j), de[i]));
                    dkh[j] = a;
                }
                float dal = 0;
                for (int i = 0; i < DV; i++)
                    for (int j = 0; j < DK; j++) {
                        float dA = R(SX(dS, i, j) - R(de[i] * kh[j]));
                        dal = R(dal + MM(dA, SX(Sp, i, j)));
                        SX(dS, i, j) = R(al * dA);
                    }
                db[IX(t)] = dbe;
                dg[IX(t)] = bg == BUG_DECAY ? 0 : R(al * dal);
                float xq = 0, xk = 0;  // back through the normalisations
                for (int j = 0; j < DK; j++)
                    xq = R(xq + MM(R((float)q[IX(t) * DK + j]), dqh[j])), xk = R(xk + MM(R((float)k[IX(t) * DK + j]), dkh[j]));
                for (int j = 0; j < DK; j++) {
                    float qj = R((float)q[IX(t) * DK + j]), kj = R((float)k[IX(t) * DK + j]);
                    dq[IX(t) * DK + j] = R(sc * R(R(rq * dqh[j]) - R(R(R(rq * rq) * rq) * R(qj * xq))));
                    dk[IX(t) * DK + j] = R(R(rk * dkh[j]) - R(R(R(rk * rk) * rk) * R(kj * xk)));
                }
            }
            if (ds0)
                for (int i = 0; i < DV; i++)
                    for (int j = 0; j < DK; j++) ds0[si + (size_t)j * DV + i] = SX(dS, i, j);
        }
#undef IX
#undef SX
#undef UNIT
    free(Ss), free(dS), free(kh), free(qh), free(e), free(de), free(dkh), free(dqh), free(A);
}

// One Gated DeltaNet case: B 2, H 2, dk 7, dv 5 (neither a power of two), odd T, decays α in
// [0.5, 1), β in [0, 1], an initial state and an upstream gradient of the final state.
static void gdn_case(int T, bug bg, rnd R, const char *prec, int want_pass, const char *what) {
    const int B = 2, H = 2, DK = 7, DV = 5;
    char *in = tu_join(g_dir, "in.safetensors"), *th = tu_join(g_dir, "theirs.safetensors");
    unsigned seed = 2468u + (unsigned)T;
    printf("gdn case seed %u\n", seed);
    phax_rng rng = phax_rng_new(seed);
    int64_t qs[4] = {B, T, H, DK}, vs[4] = {B, T, H, DV}, gs[3] = {B, T, H}, ss[4] = {B, H, DK, DV};
    size_t nq = (size_t)B * T * H * DK, nv = (size_t)B * T * H * DV, ng = (size_t)B * T * H, ns = (size_t)B * H * DK * DV;
    double *q = normal(nq, &rng, 1), *k = normal(nq, &rng, 1), *v = normal(nv, &rng, 1), *go = normal(nv, &rng, 1);
    double *s0 = normal(ns, &rng, 0.5), *gsT = normal(ns, &rng, 1), *g = malloc(ng * 8), *be = malloc(ng * 8);
    cr_assert(g && be);
    for (size_t i = 0; i < ng; i++)
        g[i] = (double)(float)log(phax_rng_uniform_range(&rng, 0.5, 1.0)),
        be[i] = (double)(float)phax_rng_uniform_range(&rng, 0, 1);
    phax_st_writer *w = phax_st_writer_new();
    add(w, "q", q, 4, qs), add(w, "k", k, 4, qs), add(w, "v", v, 4, vs), add(w, "g", g, 3, gs), add(w, "beta", be, 3, gs);
    add(w, "initial_state", s0, 4, ss), add(w, "grad.o", go, 4, vs), add(w, "grad.final_state", gsT, 4, ss);
    write_free(w, in);
    double *o = malloc(nv * 8), *sT = malloc(ns * 8), *dq = malloc(nq * 8), *dk = malloc(nq * 8), *dv = malloc(nv * 8),
           *dg = malloc(ng * 8), *db = malloc(ng * 8), *ds0 = malloc(ns * 8);
    cr_assert(o && sT && dq && dk && dv && dg && db && ds0);
    their_gdn(B, T, H, DK, DV, bg, R, q, k, v, g, be, s0, go, gsT, o, sT, dq, dk, dv, dg, db, ds0);
    w = phax_st_writer_new();
    add(w, "o", o, 4, vs), add(w, "final_state", sT, 4, ss), add(w, "grad.q", dq, 4, qs), add(w, "grad.k", dk, 4, qs);
    add(w, "grad.v", dv, 4, vs), add(w, "grad.g", dg, 3, gs), add(w, "grad.beta", db, 3, gs);
    add(w, "grad.initial_state", ds0, 4, ss);
    write_free(w, th);
    run r = check("gdn", in, th, prec, 0);
    if (want_pass) expect_pass(&r, what);
    else expect_fail(&r, what);
    run_free(&r), free(in), free(th);
    double *all[] = {q, k, v, go, s0, gsT, g, be, o, sT, dq, dk, dv, dg, db, ds0};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]);
}
Test(check, gdn_passes) {
    gdn_case(13, OK, r_f32, "f32", 1, "gdn, correct f32 (T 13)");
    gdn_case(77, OK, r_f32, "f32", 1, "gdn, correct f32 (T 77: two of the chunkwise baseline's chunks)");
    gdn_case(13, OK, r_bf16, "bf16", 1, "gdn, correct bf16");
    gdn_case(13, OK, r_f32, "tf32", 1, "gdn, f32 judged at tf32");
}
Test(check, gallery_gdn_decay_dropped) {
    gdn_case(13, BUG_DECAY, r_f32, "f32", 0, "gdn: decay alpha dropped (f32)");
    gdn_case(13, BUG_DECAY, r_bf16, "bf16", 0, "gdn: decay alpha dropped (bf16)");
}
Test(check, gallery_gdn_beta_wrong_side) {
    gdn_case(13, BUG_BETA, r_f32, "f32", 0, "gdn: beta on v only (f32)");
    gdn_case(13, BUG_BETA, r_bf16, "bf16", 0, "gdn: beta on v only (bf16)");
}

// Both Gated DeltaNet baselines (recurrent; chunkwise at chunks of 3, 64 and longer than T) at
// 53 bits equal ref's recurrent form, every output and gradient, with and without an initial
// state: they differ from the truth by rounding only (1e-12 of each tensor's scale, as
// tests/test_gdn.c's chunkwise-vs-recurrent comparison).
Test(check, gdn_baselines_at_f64_equal_ref) {
    enum { B = 2, T = 21, H = 2, DK = 6, DV = 5 };
    unsigned seed = 86420;
    printf("gdn f64 baseline seed %u\n", seed);
    phax_rng rng = phax_rng_new(seed);
    size_t nq = B * T * H * DK, nv = B * T * H * DV, ng = B * T * H, ns = B * H * DK * DV;
    double *q = normal(nq, &rng, 1), *k = normal(nq, &rng, 1), *v = normal(nv, &rng, 1), *go = normal(nv, &rng, 1);
    double *s0 = normal(ns, &rng, 0.5), *gsT = normal(ns, &rng, 1), *g = malloc(ng * 8), *be = malloc(ng * 8);
    cr_assert(g && be);
    for (size_t i = 0; i < ng; i++) g[i] = log(phax_rng_uniform_range(&rng, 0.5, 1.0)), be[i] = phax_rng_uniform_range(&rng, 0, 1.5);
    size_t sz[8] = {nv, ns, nq, nq, nv, ng, ng, ns};
    const char *nm[8] = {"o", "sT", "dq", "dk", "dv", "dg", "dbeta", "ds0"};
    for (int l2 = 0; l2 < 2; l2++)
        for (int st = 0; st < 2; st++) {
            phax_gdn_cfg c = {0.4, l2};
            const double *s0p = st ? s0 : NULL, *gp = st ? gsT : NULL;
            double *r8[8];
            for (int j = 0; j < 8; j++) cr_assert((r8[j] = calloc(sz[j], 8)));
            cr_assert(!ref_gdn_recurrent_fwd(r8[0], r8[1], q, k, v, g, be, s0p, B, T, H, DK, DV, &c));
            cr_assert(!ref_gdn_recurrent_bwd(r8[2], r8[3], r8[4], r8[5], r8[6], r8[7], go, gp, q, k, v, g, be, s0p, B, T,
                                             H, DK, DV, &c));
            static const int chunks[] = {0, 3, 64};
            for (int a = 0; a < 3; a++) {
                double *b8[8];
                for (int j = 0; j < 8; j++) cr_assert((b8[j] = calloc(sz[j], 8)));
                cr_assert(!phax_naive_gdn(&F64, b8[0], b8[1], b8[2], b8[3], b8[4], b8[5], b8[6], b8[7], go, gp, q, k, v, g,
                                          be, s0p, B, T, H, DK, DV, &c, chunks[a]), "%s", phax_error());
                for (int j = 0; j < 8; j++) {
                    double e = rel(b8[j], r8[j], sz[j]);
                    cr_expect(e <= 1e-12, "gdn baseline chunk %d (l2 %d, state %d) %s differs from ref: %.3g", chunks[a],
                              l2, st, nm[j], e);
                    if (j == 5) printf("gdn chunk %d l2 %d state %d: dg relative %.3g\n", chunks[a], l2, st, e);
                }
                for (int j = 0; j < 8; j++) free(b8[j]);
            }
            for (int j = 0; j < 8; j++) free(r8[j]);
        }
    free(q), free(k), free(v), free(go), free(s0), free(gsT), free(g), free(be);
}

// Their Gated DeltaNet, chunkwise the way flash-linear-attention's chunk_gated_delta_rule
// computes it, forward and backward. Per chunk of L steps from the state S₀ (dv × dk) the UT
// transform made explicit — A = (I + N)⁻¹, N_ts = β_t e^{G_t−G_s} k̂_t·k̂_s (s < t), by forward
// substitution on the identity — then W = A (β e^{G} ⊙ K̂) and U = A (β ⊙ V), the pseudo-values
// u_t = U_t − S₀ W_t, o_t = e^{G_t} S₀ q̂_t + Σ_{s≤t} e^{G_t−G_s} (k̂_s·q̂_t) u_s, and the state
// handed on e^{G_L} S₀ + Σ_s e^{G_L−G_s} u_s k̂_sᵀ (BUG_GDN_CARRY: S₀ not decayed there). The
// backward in reverse through those lines (dA = dU Vbᵀ + dW Wbᵀ, dN = −Aᵀ dA Aᵀ), chunk by
// chunk from the last with the chunks' start states kept. The same function as the recurrence,
// rounded the chunk's way (sums over the chunk, an explicit inverse, float state).
typedef struct {
    float *kh, *qh, *rk, *rq, *G, *be, *A, *Wb, *Vb, *W, *U, *u, *KQ;
} gdn_chunk_t;

static void their_gdn_chunk_prep(gdn_chunk_t *c, rnd R, const float *S, int b, int hh, int t0, int n, int L, int T,
                                 int H, int DK, int DV, const double *q, const double *k, const double *v,
                                 const double *g, const double *beta) {
    float sc = R(1.0f / sqrtf((float)DK)), acc = 0;
#define IX(t) (((size_t)b * T + (t)) * H + hh)
    for (int t = 0; t < n; t++) {
        const double *kt = k + IX(t0 + t) * DK, *qt = q + IX(t0 + t) * DK;
        float sk = 0, sq = 0;
        for (int j = 0; j < DK; j++)
            sk = R(sk + MM(R((float)kt[j]), R((float)kt[j]))), sq = R(sq + MM(R((float)qt[j]), R((float)qt[j])));
        c->rk[t] = R(1.0f / R(sqrtf(R(sk + 1e-6f)))), c->rq[t] = R(1.0f / R(sqrtf(R(sq + 1e-6f))));
        float fq = R(c->rq[t] * sc);
        for (int j = 0; j < DK; j++)
            c->kh[(size_t)t * DK + j] = R(c->rk[t] * R((float)kt[j])), c->qh[(size_t)t * DK + j] = R(fq * R((float)qt[j]));
        c->G[t] = acc = R(acc + R((float)g[IX(t0 + t)])), c->be[t] = R((float)beta[IX(t0 + t)]);
    }
    for (int t = 0; t < n; t++)  // A = (I + N)⁻¹, row t from the rows before it
        for (int cc = 0; cc < n; cc++) {
            float x = t == cc ? 1.0f : 0.0f;
            for (int s2 = cc; s2 < t; s2++) {
                float kk = 0;
                for (int j = 0; j < DK; j++) kk = R(kk + MM(c->kh[(size_t)t * DK + j], c->kh[(size_t)s2 * DK + j]));
                float m = R(R(c->be[t] * R(expf(R(c->G[t] - c->G[s2])))) * kk);
                x = R(x - MM(m, c->A[(size_t)s2 * L + cc]));
            }
            c->A[(size_t)t * L + cc] = cc > t ? 0.0f : x;
        }
    for (int t = 0; t < n; t++) {
        float bg = R(c->be[t] * R(expf(c->G[t])));
        for (int j = 0; j < DK; j++) c->Wb[(size_t)t * DK + j] = R(bg * c->kh[(size_t)t * DK + j]);
        for (int i = 0; i < DV; i++) c->Vb[(size_t)t * DV + i] = R(c->be[t] * R((float)v[IX(t0 + t) * DV + i]));
    }
    for (int t = 0; t < n; t++) {  // W = A Wb, U = A Vb, u = U − S₀ W
        for (int j = 0; j < DK; j++) {
            float x = 0;
            for (int s2 = 0; s2 <= t; s2++) x = R(x + MM(c->A[(size_t)t * L + s2], c->Wb[(size_t)s2 * DK + j]));
            c->W[(size_t)t * DK + j] = x;
        }
        for (int i = 0; i < DV; i++) {
            float x = 0;
            for (int s2 = 0; s2 <= t; s2++) x = R(x + MM(c->A[(size_t)t * L + s2], c->Vb[(size_t)s2 * DV + i]));
            c->U[(size_t)t * DV + i] = x;
        }
        for (int i = 0; i < DV; i++) {
            float x = 0;
            for (int j = 0; j < DK; j++) x = R(x + MM(S[(size_t)i * DK + j], c->W[(size_t)t * DK + j]));
            c->u[(size_t)t * DV + i] = R(c->U[(size_t)t * DV + i] - x);
        }
    }
    for (int t = 0; t < n; t++)  // KQ_ts = k̂_s·q̂_t
        for (int s2 = 0; s2 <= t; s2++) {
            float x = 0;
            for (int j = 0; j < DK; j++) x = R(x + MM(c->kh[(size_t)s2 * DK + j], c->qh[(size_t)t * DK + j]));
            c->KQ[(size_t)t * L + s2] = x;
        }
#undef IX
}

static void their_gdn_chunk(int B, int T, int H, int DK, int DV, bug bg, rnd R, int L, const double *q, const double *k,
                            const double *v, const double *g, const double *beta, const double *s0, const double *go,
                            const double *gsT, double *o, double *sT, double *dq, double *dk, double *dv, double *dg,
                            double *db, double *ds0) {
    size_t ns = (size_t)DK * DV, Ld = (size_t)L * DK, Lv = (size_t)L * DV, LL = (size_t)L * L;
    int nc = T > 0 ? (T + L - 1) / L : 0;
    float *Ss = malloc(((size_t)nc + 1) * ns * 4), *dS = malloc(ns * 4), *dS0 = malloc(ns * 4);
    gdn_chunk_t c = {malloc(Ld * 4), malloc(Ld * 4), malloc((size_t)L * 4), malloc((size_t)L * 4), malloc((size_t)L * 4),
                     malloc((size_t)L * 4), malloc(LL * 4),       malloc(Ld * 4),             malloc(Lv * 4),
                     malloc(Ld * 4),        malloc(Lv * 4),       malloc(Lv * 4),             malloc(LL * 4)};
    float *dkh = malloc(Ld * 4), *dqh = malloc(Ld * 4), *du = malloc(Lv * 4), *dU = malloc(Lv * 4), *dW = malloc(Ld * 4),
          *dA = malloc(LL * 4), *dN = malloc(LL * 4), *dG = malloc((size_t)L * 4), *tmp = malloc(LL * 4);
    cr_assert(Ss && dS && dS0 && c.kh && c.qh && c.rk && c.rq && c.G && c.be && c.A && c.Wb && c.Vb && c.W && c.U &&
              c.u && c.KQ && dkh && dqh && du && dU && dW && dA && dN && dG && tmp);
#define IX(t) (((size_t)b * T + (t)) * H + hh)
#define SX(x, i, j) (x)[(size_t)(i) * DK + (j)]
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < H; hh++) {
            size_t si = ((size_t)b * H + hh) * ns;
            for (int i = 0; i < DV; i++)
                for (int j = 0; j < DK; j++) SX(Ss, i, j) = s0 ? R((float)s0[si + (size_t)j * DV + i]) : 0;
            for (int ci = 0; ci < nc; ci++) {  // forward: outputs and the chunks' start states
                int t0 = ci * L, n = T - t0 < L ? T - t0 : L;
                const float *S = Ss + (size_t)ci * ns;
                float *S2 = Ss + (size_t)(ci + 1) * ns;
                their_gdn_chunk_prep(&c, R, S, b, hh, t0, n, L, T, H, DK, DV, q, k, v, g, beta);
                for (int t = 0; t < n; t++) {
                    float et = R(expf(c.G[t]));
                    for (int i = 0; i < DV; i++) {
                        float x = 0;
                        for (int j = 0; j < DK; j++) x = R(x + MM(SX(S, i, j), c.qh[(size_t)t * DK + j]));
                        x = R(et * x);
                        for (int s2 = 0; s2 <= t; s2++)
                            x = R(x + MM(R(R(expf(R(c.G[t] - c.G[s2]))) * c.KQ[(size_t)t * L + s2]), c.u[(size_t)s2 * DV + i]));
                        o[IX(t0 + t) * DV + i] = x;
                    }
                }
                float eL = bg == BUG_GDN_CARRY ? 1.0f : R(expf(c.G[n - 1]));
                for (int i = 0; i < DV; i++)
                    for (int j = 0; j < DK; j++) {
                        float x = R(eL * SX(S, i, j));
                        for (int s2 = 0; s2 < n; s2++)
                            x = R(x + MM(R(R(expf(R(c.G[n - 1] - c.G[s2]))) * c.u[(size_t)s2 * DV + i]), c.kh[(size_t)s2 * DK + j]));
                        SX(S2, i, j) = x;
                    }
            }
            for (int i = 0; i < DV; i++)
                for (int j = 0; j < DK; j++) {
                    sT[si + (size_t)j * DV + i] = SX(Ss + (size_t)nc * ns, i, j);
                    SX(dS, i, j) = gsT ? R((float)gsT[si + (size_t)j * DV + i]) : 0;
                }
            for (int ci = nc - 1; ci >= 0; ci--) {  // backward, chunk by chunk from the last
                int t0 = ci * L, n = T - t0 < L ? T - t0 : L, Lz = n - 1;
                const float *S = Ss + (size_t)ci * ns;
                their_gdn_chunk_prep(&c, R, S, b, hh, t0, n, L, T, H, DK, DV, q, k, v, g, beta);
                memset(dkh, 0, Ld * 4), memset(dqh, 0, Ld * 4), memset(du, 0, Lv * 4), memset(dG, 0, (size_t)L * 4);
                // (1) the state handed on
                float eL = bg == BUG_GDN_CARRY ? 1.0f : R(expf(c.G[Lz])), zz = 0;
                for (size_t x = 0; x < ns; x++) dS0[x] = R(eL * dS[x]), zz = R(zz + MM(dS[x], S[x]));
                if (bg != BUG_GDN_CARRY) dG[Lz] = R(dG[Lz] + R(eL * zz));
                for (int s2 = 0; s2 < n; s2++) {
                    float w = R(expf(R(c.G[Lz] - c.G[s2]))), xs = 0;
                    for (int i = 0; i < DV; i++) {
                        float dsk = 0, us = c.u[(size_t)s2 * DV + i];
                        for (int j = 0; j < DK; j++) {
                            dsk = R(dsk + MM(SX(dS, i, j), c.kh[(size_t)s2 * DK + j]));
                            dkh[(size_t)s2 * DK + j] = R(dkh[(size_t)s2 * DK + j] + R(R(w * SX(dS, i, j)) * us));
                        }
                        du[(size_t)s2 * DV + i] = R(du[(size_t)s2 * DV + i] + R(w * dsk));
                        xs = R(xs + MM(us, dsk));
                    }
                    float x = R(w * xs);
                    dG[Lz] = R(dG[Lz] + x), dG[s2] = R(dG[s2] - x);
                }
                // (2) the outputs
                for (int t = 0; t < n; t++) {
                    float et = R(expf(c.G[t])), xg = 0;
                    for (int i = 0; i < DV; i++) {
                        float goi = R((float)go[IX(t0 + t) * DV + i]), eg = R(et * goi), sq = 0;
                        for (int j = 0; j < DK; j++) {
                            sq = R(sq + MM(SX(S, i, j), c.qh[(size_t)t * DK + j]));
                            SX(dS0, i, j) = R(SX(dS0, i, j) + R(eg * c.qh[(size_t)t * DK + j]));
                            dqh[(size_t)t * DK + j] = R(dqh[(size_t)t * DK + j] + R(eg * SX(S, i, j)));
                        }
                        xg = R(xg + MM(goi, sq));
                    }
                    dG[t] = R(dG[t] + R(et * xg));
                    for (int s2 = 0; s2 <= t; s2++) {
                        float e = R(expf(R(c.G[t] - c.G[s2]))), P = R(e * c.KQ[(size_t)t * L + s2]), dP = 0;
                        for (int i = 0; i < DV; i++) {
                            float goi = R((float)go[IX(t0 + t) * DV + i]);
                            dP = R(dP + MM(goi, c.u[(size_t)s2 * DV + i]));
                            du[(size_t)s2 * DV + i] = R(du[(size_t)s2 * DV + i] + R(P * goi));
                        }
                        float x = R(dP * P), dkq = R(dP * e);
                        dG[t] = R(dG[t] + x), dG[s2] = R(dG[s2] - x);
                        for (int j = 0; j < DK; j++) {
                            dqh[(size_t)t * DK + j] = R(dqh[(size_t)t * DK + j] + R(dkq * c.kh[(size_t)s2 * DK + j]));
                            dkh[(size_t)s2 * DK + j] = R(dkh[(size_t)s2 * DK + j] + R(dkq * c.qh[(size_t)t * DK + j]));
                        }
                    }
                }
                // (3) u = U − S₀ W: dU = du, dW = −S₀ᵀ du, dS₀ −= du Wᵀ
                for (int t = 0; t < n; t++) {
                    for (int i = 0; i < DV; i++) dU[(size_t)t * DV + i] = du[(size_t)t * DV + i];
                    for (int j = 0; j < DK; j++) {
                        float x = 0;
                        for (int i = 0; i < DV; i++) x = R(x + MM(SX(S, i, j), du[(size_t)t * DV + i]));
                        dW[(size_t)t * DK + j] = R(-x);
                    }
                    for (int i = 0; i < DV; i++)
                        for (int j = 0; j < DK; j++)
                            SX(dS0, i, j) = R(SX(dS0, i, j) - R(du[(size_t)t * DV + i] * c.W[(size_t)t * DK + j]));
                }
                // (4) U = A Vb, W = A Wb: dA = dU Vbᵀ + dW Wbᵀ (lower), dVb = Aᵀ dU, dWb = Aᵀ dW
                for (int t = 0; t < n; t++)
                    for (int s2 = 0; s2 <= t; s2++) {
                        float x = 0;
                        for (int i = 0; i < DV; i++) x = R(x + MM(dU[(size_t)t * DV + i], c.Vb[(size_t)s2 * DV + i]));
                        for (int j = 0; j < DK; j++) x = R(x + MM(dW[(size_t)t * DK + j], c.Wb[(size_t)s2 * DK + j]));
                        dA[(size_t)t * L + s2] = x;
                    }
                for (int s2 = 0; s2 < n; s2++) {
                    size_t gi = IX(t0 + s2);
                    float dbe = 0, egs = R(expf(c.G[s2])), bg_ = R(c.be[s2] * egs), xg = 0;
                    for (int i = 0; i < DV; i++) {
                        float x = 0, vi = R((float)v[gi * DV + i]);
                        for (int t = s2; t < n; t++) x = R(x + MM(c.A[(size_t)t * L + s2], dU[(size_t)t * DV + i]));
                        dbe = R(dbe + MM(x, vi));
                        dv[gi * DV + i] = R(c.be[s2] * x);
                    }
                    for (int j = 0; j < DK; j++) {
                        float x = 0;
                        for (int t = s2; t < n; t++) x = R(x + MM(c.A[(size_t)t * L + s2], dW[(size_t)t * DK + j]));
                        float xk = R(x * c.kh[(size_t)s2 * DK + j]);
                        dbe = R(dbe + R(egs * xk)), xg = R(xg + xk);
                        dkh[(size_t)s2 * DK + j] = R(dkh[(size_t)s2 * DK + j] + R(bg_ * x));
                    }
                    dG[s2] = R(dG[s2] + R(bg_ * xg));
                    db[gi] = dbe;  // + the N part below
                }
                // (5) A = (I + N)⁻¹: dN = −Aᵀ dA Aᵀ (s < t), then N_ts = β_t e^{G_t−G_s} k̂_t·k̂_s
                for (int t = 0; t < n; t++)  // tmp = dA Aᵀ
                    for (int s2 = 0; s2 < n; s2++) {
                        float x = 0;
                        for (int r = 0; r < n; r++)
                            if (r <= t && r <= s2) x = R(x + MM(dA[(size_t)t * L + r], c.A[(size_t)s2 * L + r]));
                        tmp[(size_t)t * L + s2] = x;
                    }
                for (int t = 0; t < n; t++)
                    for (int s2 = 0; s2 < t; s2++) {
                        float x = 0;
                        for (int r = t; r < n; r++) x = R(x + MM(c.A[(size_t)r * L + t], tmp[(size_t)r * L + s2]));
                        dN[(size_t)t * L + s2] = R(-x);
                    }
                for (int t = 0; t < n; t++) {
                    float dbt = 0;
                    for (int s2 = 0; s2 < t; s2++) {
                        float kk = 0, e = R(expf(R(c.G[t] - c.G[s2]))), d = dN[(size_t)t * L + s2];
                        for (int j = 0; j < DK; j++) kk = R(kk + MM(c.kh[(size_t)t * DK + j], c.kh[(size_t)s2 * DK + j]));
                        float ekk = R(e * kk), N = R(c.be[t] * ekk), x = R(d * N), dkk = R(R(d * c.be[t]) * e);
                        dbt = R(dbt + R(d * ekk));
                        dG[t] = R(dG[t] + x), dG[s2] = R(dG[s2] - x);
                        for (int j = 0; j < DK; j++) {
                            float kt = c.kh[(size_t)t * DK + j], ks = c.kh[(size_t)s2 * DK + j];
                            dkh[(size_t)t * DK + j] = R(dkh[(size_t)t * DK + j] + R(dkk * ks));
                            dkh[(size_t)s2 * DK + j] = R(dkh[(size_t)s2 * DK + j] + R(dkk * kt));
                        }
                    }
                    db[IX(t0 + t)] = R((float)db[IX(t0 + t)] + dbt);
                }
                // (6) G = cumsum g; q̂, k̂ through the normalisations
                float gacc = 0, sc = R(1.0f / sqrtf((float)DK));
                for (int t = n - 1; t >= 0; t--) {
                    size_t gi = IX(t0 + t);
                    dg[gi] = gacc = R(gacc + dG[t]);
                    float xq = 0, xk = 0, rq = c.rq[t], rk = c.rk[t];
                    for (int j = 0; j < DK; j++)
                        xq = R(xq + MM(R((float)q[gi * DK + j]), dqh[(size_t)t * DK + j])),
                        xk = R(xk + MM(R((float)k[gi * DK + j]), dkh[(size_t)t * DK + j]));
                    for (int j = 0; j < DK; j++) {
                        float qj = R((float)q[gi * DK + j]), kj = R((float)k[gi * DK + j]);
                        dq[gi * DK + j] = R(sc * R(R(rq * dqh[(size_t)t * DK + j]) - R(R(R(rq * rq) * rq) * R(qj * xq))));
                        dk[gi * DK + j] = R(R(rk * dkh[(size_t)t * DK + j]) - R(R(R(rk * rk) * rk) * R(kj * xk)));
                    }
                }
                memcpy(dS, dS0, ns * 4);
            }
            if (ds0)
                for (int i = 0; i < DV; i++)
                    for (int j = 0; j < DK; j++) ds0[si + (size_t)j * DV + i] = SX(dS, i, j);
        }
#undef IX
#undef SX
    float *all[] = {Ss, dS, dS0, c.kh, c.qh, c.rk, c.rq, c.G, c.be, c.A, c.Wb, c.Vb, c.W, c.U, c.u, c.KQ,
                    dkh, dqh, du, dU, dW, dA, dN, dG, tmp};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]);
}

// The Gated DeltaNet sweep: their recurrence and their chunkwise form (chunks of 16-64), each
// forward and backward, at f32, TF32 operands and bf16; T as the
// other sweeps, B 1-2, H 1-2, dk and dv 4-16, decays α in [0.5, 1) or [0.9, 1), β in [0, 1] or
// [0, 2] (the negative-eigenvalue variant), an initial state and a final-state gradient on
// half the draws, q/k L2-normalised (flash-linear-attention's use_qk_l2norm_in_kernel). Gallery:
// the decay dropped (recurrence), the chunk's carry not decayed (chunkwise).
enum { GDN_NV = 6 };
static const struct {
    const char *name;
    int chunk;
    const sweep_prec *pr;
} GDN_V[GDN_NV] = {{"gdn recurrent f32", 0, &SP_F32}, {"gdn recurrent tf32", 0, &SP_TF32},
                   {"gdn recurrent bf16", 0, &SP_BF16}, {"gdn chunkwise f32", 1, &SP_F32},
                   {"gdn chunkwise tf32", 1, &SP_TF32}, {"gdn chunkwise bf16", 1, &SP_BF16}};

// Their two algorithms behind one signature (L: the chunk; the recurrence has none).
typedef void (*their_gdn_fn)(int B, int T, int H, int DK, int DV, bug bg, rnd R, int L, const double *q, const double *k,
                             const double *v, const double *g, const double *beta, const double *s0, const double *go,
                             const double *gsT, double *o, double *sT, double *dq, double *dk, double *dv, double *dg,
                             double *db, double *ds0);
static void their_gdn_rec(int B, int T, int H, int DK, int DV, bug bg, rnd R, int L, const double *q, const double *k,
                          const double *v, const double *g, const double *beta, const double *s0, const double *go,
                          const double *gsT, double *o, double *sT, double *dq, double *dk, double *dv, double *dg,
                          double *db, double *ds0) {
    (void)L;
    their_gdn(B, T, H, DK, DV, bg, R, q, k, v, g, beta, s0, go, gsT, o, sT, dq, dk, dv, dg, db, ds0);
}
static const their_gdn_fn their_gdn_chunk_l = their_gdn_chunk;

static void gdn_sweep_draw(int v, int dr, int n, sweep_stat *st, const char *in, const char *ok, const char *th) {
    uint64_t seed = sweep_seed(130 + v, dr);
    phax_rng r = phax_rng_new(seed);
    int T = sweep_T(&r, dr, n), B = T >= 1024 ? 1 : 1 + pick(&r, 2), H = 1 + pick(&r, 2);
    if (sweep_skip(T)) return;
    int DK = 4 + pick(&r, 13), DV = 4 + pick(&r, 13), L = 16 << pick(&r, 3), state = pick(&r, 2);
    double amin = pick(&r, 2) ? 0.9 : 0.5, bmax = pick(&r, 2) ? 2 : 1;
    int64_t qs[4] = {B, T, H, DK}, vs[4] = {B, T, H, DV}, gs[3] = {B, T, H}, ss[4] = {B, H, DK, DV};
    size_t nq = (size_t)B * T * H * DK, nv = (size_t)B * T * H * DV, ng = (size_t)B * T * H, ns = (size_t)B * H * DK * DV;
    double *q = normal(nq, &r, 1), *k = normal(nq, &r, 1), *vv = normal(nv, &r, 1), *go = normal(nv, &r, 1);
    double *s0 = normal(ns, &r, 0.5), *gsT = normal(ns, &r, 1), *g = malloc(ng * 8), *be = malloc(ng * 8);
    cr_assert(g && be);
    for (size_t i = 0; i < ng; i++)
        g[i] = (double)(float)log(phax_rng_uniform_range(&r, amin, 1.0)),
        be[i] = (double)(float)phax_rng_uniform_range(&r, 0, bmax);
    const char *prec = GDN_V[v].pr->name;
    rnd R = GDN_V[v].pr->R;
    g_O = GDN_V[v].pr->O;
    char what[240];
    snprintf(what, sizeof what, "%s seed %llu: B %d T %d H %d dk %d dv %d alpha >= %g beta <= %g chunk %d%s", st->name,
             (unsigned long long)seed, B, T, H, DK, DV, amin, bmax, GDN_V[v].chunk ? L : 0, state ? " state" : "");
    printf("%s\n", what);
    phax_st_writer *w = phax_st_writer_new();
    add(w, "q", q, 4, qs), add(w, "k", k, 4, qs), add(w, "v", vv, 4, vs), add(w, "g", g, 3, gs), add(w, "beta", be, 3, gs);
    add(w, "grad.o", go, 4, vs);
    if (state) add(w, "initial_state", s0, 4, ss), add(w, "grad.final_state", gsT, 4, ss);
    else {
        double *z = calloc(ns, 8);  // no final-state gradient: zeros (else phax oracle draws one)
        cr_assert(z);
        add(w, "grad.final_state", z, 4, ss);
        free(z);
    }
    write_free(w, in);
    double *o = malloc(nv * 8), *sT = malloc(ns * 8), *dq = malloc(nq * 8), *dk = malloc(nq * 8), *dv = malloc(nv * 8),
           *dg = malloc(ng * 8), *db = malloc(ng * 8), *ds0 = malloc(ns * 8);
    cr_assert(o && sT && dq && dk && dv && dg && db && ds0);
    for (int bugged = 0; bugged < 2; bugged++) {
        bug bg = !bugged ? OK : GDN_V[v].chunk ? BUG_GDN_CARRY : BUG_DECAY;
        (GDN_V[v].chunk ? their_gdn_chunk_l : their_gdn_rec)(B, T, H, DK, DV, bg, R, L, q, k, vv, g, be,
                                                              state ? s0 : NULL, go, state ? gsT : NULL, o, sT, dq, dk, dv,
                                                              dg, db, ds0);
        w = phax_st_writer_new();
        add(w, "o", o, 4, vs), add(w, "final_state", sT, 4, ss), add(w, "grad.q", dq, 4, qs), add(w, "grad.k", dk, 4, qs);
        add(w, "grad.v", dv, 4, vs), add(w, "grad.g", dg, 3, gs), add(w, "grad.beta", db, 3, gs);
        if (state) add(w, "grad.initial_state", ds0, 4, ss);
        write_free(w, bugged ? th : ok);
    }
    sweep_judge("gdn", in, ok, th, prec, st, what);
    double *all[] = {q, k, vv, go, s0, gsT, g, be, o, sT, dq, dk, dv, dg, db, ds0};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]);
    g_O = r_f32;
}

static const char *gdn_stream_name(int v) { return GDN_V[v].name; }
Test(check, sweep_gdn, .timeout = 7200) { sweep_streams(GDN_NV, gdn_stream_name, gdn_sweep_draw); }

// A false FAIL of the mLSTM sweep at 3a4342c (seed 2038406138, draw 60 of "mlstm chunkwise
// parallel-m bf16": T 2, B 1, H 1): their chunkwise backward forms grad.fgate as the suffix sum of
// the cumulative log-forgets' gradients, whose parts cancel for f̃_0 (it reaches no output of the
// parallel form: 0 in the truth) only in exact arithmetic; its bf16 residual put grad.fgate 114 %
// off where the baselines, which never touched f̃_0, were 10.6 % (ratio 10.8). The cumulative-sum
// baseline's backward is now its own forward's as a chunkwise backward writes it (each term to
// cs_t and cs_s in turn, dm routed apart): its residual there is 2,000 % of the truth, which bf16
// cannot resolve, and the draw PASSes with grad.fgate unresolved.
Test(check, mlstm_cumsum_backward_residual) { cr_expect(mlstm_draw_passes(14, 60)); }

// One draw of sweep_small: stream o (an op of SMALL, or 12-14: LayerNorm and headnorm with the
// one-pass variance, the cross-entropy unfused) at precision pr, its sizes and scales from seed
// (the globals small_files reads).
enum { SMALL_NOPS = 12 };
static void small_draw(int o, const sweep_prec *pr, uint64_t seed) {
    phax_rng r = phax_rng_new(seed);
    static const int Ns[] = {6, 9, 30, 96}, Ds[] = {8, 16, 24, 48, 64}, Hs[] = {8, 24, 40, 96}, Vs[] = {40, 100, 1000};
    static const double scs[] = {0.3, 1, 3};
    SN = Ns[pick(&r, 4)], SD = Ds[pick(&r, 5)], SH = Hs[pick(&r, 4)], SV = Vs[pick(&r, 3)];
    g_small_scale = scs[pick(&r, 3)], g_small_shift = pick(&r, 2) ? 4 : 0, g_norm_eps = pick(&r, 2) ? 0.1 : 0;
    g_small_seed = phax_rng_u64(&r) | 1;
    g_norm_one_pass = o >= SMALL_NOPS && o - SMALL_NOPS < 2, g_xent_unfused = o == SMALL_NOPS + 2, g_O = pr->O;
}
static void small_draw_reset(void) {
    SN = 6, SD = 16, SH = 24, SV = 40, g_small_scale = 1, g_small_shift = 0, g_norm_eps = 0, g_small_seed = 0;
    g_O = r_f32, g_norm_one_pass = g_xent_unfused = 0;
}

// The sweep's first false FAIL after the one-pass LayerNorm got its own baseline: a correct
// one-pass LayerNorm (mean 4, spread 0.3: the variance cancels 180-fold) FAILed at ratio 6.13
// on grad.weight, judged against that baseline rounded once to nearest (one lucky draw of its
// rounding). The second baselines now run with the same four stochastic roundings as the first:
// it PASSes (ratio 1.0).
Test(check, layernorm_one_pass_lucky_baseline) {
    char *in = tu_join(g_dir, "in.safetensors"), *th = tu_join(g_dir, "theirs.safetensors");
    small_draw(SMALL_NOPS, &SP_TF32, 2033706133u);  // sweep_small's stream, seed 2033706133
    small_files("layernorm", r_f32, 0, in, th);
    small_draw_reset();
    run r = check("layernorm", in, th, "tf32", 0);
    expect_pass(&r, "one-pass LayerNorm, mean 4 spreads of 0.3, at tf32");
    run_free(&r), free(in), free(th);
}

// The sweep's scalar loss one ulp off: a correct float32 cross-entropy (8 rows, 1,000 classes)
// whose loss lands one float from the truth (1.9u) while all five roundings of the baseline
// land on the nearest float (3.7e-9): ratio 29.8, a FAIL at the old floor of u; the floor of 2u
// (one ulp at the bottom of a binade) covers it.
Test(check, cross_entropy_loss_one_ulp_off) {
    char *in = tu_join(g_dir, "in.safetensors"), *th = tu_join(g_dir, "theirs.safetensors");
    small_draw(10, &SP_TF32, 2033106080u);  // sweep_small's cross_entropy tf32 stream, seed 2033106080
    small_files("cross_entropy", r_f32, 0, in, th);
    small_draw_reset();
    run r = check("cross_entropy", in, th, "tf32", 0);
    cr_expect(r.rc == 0 && strstr(r.out, "\nPASS: all"), "cross_entropy one ulp off: exit %d\n%s%s", r.rc, r.out,
              r.err);
    run_free(&r), free(in), free(th);
}

// The small ops (every op of SMALL, and LayerNorm/headnorm with the one-pass variance, the
// cross-entropy unfused): rows 6-96, channels 8-64, hidden 8-96, classes 40-1000, inputs at
// scale 0.3-3, the norms' inputs shifted by 0 or 4 (a mean of 4 spreads of one: where the
// one-pass variance cancels) with IN's eps the default or 0.1; float32, TF32 operands, bf16.
// Gallery: the fixed cases' bugs (small_files), each on every draw that can show it.
Test(check, sweep_small, .timeout = 7200) {
    int n = sweep_draws();
    enum { NOPS = SMALL_NOPS, NALT = 3, NP = 3, NV = (NOPS + NALT) * NP };
    static const char *const alt_op[NALT] = {"layernorm", "headnorm", "cross_entropy"};
    static const char *const alt_name[NALT] = {"one-pass", "one-pass", "unfused"};
    static const sweep_prec *const P[NP] = {&SP_F32, &SP_TF32, &SP_BF16};
    sweep_stat st[NV];
    char names[NV][48];
    for (int v = 0; v < NV; v++) {
        int o = v / NP;
        snprintf(names[v], sizeof names[v], "%s%s%s %s", o < NOPS ? SMALL[o] : alt_op[o - NOPS],
                 o < NOPS ? "" : " ", o < NOPS ? "" : alt_name[o - NOPS], P[v % NP]->name);
        st[v] = (sweep_stat)SWEEP_STAT(names[v]);
    }
    char *in = tu_join(g_dir, "in.safetensors"), *th = tu_join(g_dir, "theirs.safetensors"),
         *ok = tu_join(g_dir, "ok.safetensors");
    for (int d = 0; d < n; d++)
        for (int v = 0; v < NV; v++) {
            int o = v / NP;
            const char *op = o < NOPS ? SMALL[o] : alt_op[o - NOPS];
            const sweep_prec *pr = P[v % NP];
            uint64_t seed = sweep_seed(40 + v, d);
            small_draw(o, pr, seed);
            char what[256];
            snprintf(what, sizeof what, "%.47s seed %llu: rows %d channels %d hidden %d classes %d scale %g shift %g eps %g",
                     names[v], (unsigned long long)seed, SN, SD, SH, SV, g_small_scale, g_small_shift, g_norm_eps);
            printf("%s\n", what);
            small_files(op, pr->R, 0, in, ok);
            small_files(op, pr->R, 1, in, th);
            sweep_judge(op, in, ok, th, pr->name, &st[v], what);
            g_O = r_f32, g_norm_one_pass = g_xent_unfused = 0;
        }
    small_draw_reset();
    sweep_report(st, NV);
    free(in), free(th), free(ok);
}

// The DSS kernel and the SSM's recurrent op (the kernel, then the convolution): H 1-4, N 1-8,
// T as the other sweeps; Λre so that Re λ = −e^{Λre} spans 0.0025-2.7 (the quotient A(λ)'s
// cancellation at small |λ| included), Im λ = e^{Λim} from 0.05 to ~π·N (DSS's initialisation);
// float32, TF32 operands (k = C̃·V and dk·Vᵀ as matrix products), bf16. Gallery: the ZOH factor
// A(λ) left out, Im λ's sign flipped, on alternate draws.
Test(check, sweep_dss, .timeout = 7200) {
    int n = sweep_draws();
    enum { NP = 3, NV = 2 * NP };
    static const sweep_prec *const P[NP] = {&SP_F32, &SP_TF32, &SP_BF16};
    static const char *const OPS[2] = {"dss_kernel", "ssm_recurrent"};
    sweep_stat st[NV];
    char names[NV][40];
    for (int v = 0; v < NV; v++) {
        snprintf(names[v], sizeof names[v], "%s %s", OPS[v / NP], P[v % NP]->name);
        st[v] = (sweep_stat)SWEEP_STAT(names[v]);
    }
    char *in = tu_join(g_dir, "in.safetensors"), *th = tu_join(g_dir, "theirs.safetensors"),
         *ok = tu_join(g_dir, "ok.safetensors");
    for (int dr = 0; dr < n; dr++)
        for (int v = 0; v < NV; v++) {
            int rec = v / NP;
            const sweep_prec *pr = P[v % NP];
            uint64_t seed = sweep_seed(100 + v, dr);
            phax_rng r = phax_rng_new(seed);
            int T = sweep_T(&r, dr, n), H = 1 + pick(&r, 4), N = 1 + pick(&r, 8), B = 1 + pick(&r, 2);
            if (sweep_skip(T)) continue;
            size_t hn = (size_t)H * N, ht = (size_t)H * T, nu = (size_t)B * T * H;
            double *Lre = malloc((size_t)N * 8), *Lim = malloc((size_t)N * 8);
            cr_assert(Lre && Lim);
            for (int i = 0; i < N; i++) {
                Lre[i] = -6 + 7 * (double)(phax_rng_u64(&r) >> 11) * 0x1p-53;  // Re λ: −e^{−6} .. −e^{1}
                Lim[i] = log(0.05 + 3.14159265358979 * (i + 1) * (double)(phax_rng_u64(&r) >> 11) * 0x1p-53);
            }
            double *Cre = normal(hn, &r, 0.5), *Cim = normal(hn, &r, 0.5), *dk = normal(ht, &r, 1),
                   *u = normal(nu, &r, 1), *dd0 = normal((size_t)H, &r, 1), *gy = normal(nu, &r, 1);
            int64_t ns[1] = {N}, cs[2] = {H, N}, ks[2] = {H, T}, us[3] = {B, T, H}, hs[1] = {H};
            char what[200];
            snprintf(what, sizeof what, "%s seed %llu: B %d H %d N %d T %d", names[v], (unsigned long long)seed, B, H, N,
                     T);
            printf("%s\n", what);
            phax_st_writer *w = phax_st_writer_new();
            add(w, "lambda_re", Lre, 1, ns), add(w, "lambda_im", Lim, 1, ns), add(w, "c_re", Cre, 2, cs);
            add(w, "c_im", Cim, 2, cs);
            if (rec) {
                add(w, "u", u, 3, us), add(w, "d", dd0, 1, hs), add(w, "grad.y", gy, 3, us);
            } else {
                char tb[16];
                snprintf(tb, sizeof tb, "%d", T);
                add(w, "grad.k", dk, 2, ks);
                cr_assert(!phax_st_add_meta(w, "T", tb));
            }
            write_free(w, in);
            double *k = malloc(ht * 8), *zero = calloc(ht, 8), *gk = malloc(ht * 8), *a = malloc((size_t)N * 8),
                   *b = malloc((size_t)N * 8), *c = malloc(hn * 8), *d = malloc(hn * 8), *y = malloc(nu * 8),
                   *du = malloc(nu * 8), *dd = malloc((size_t)H * 8);
            cr_assert(k && zero && gk && a && b && c && d && y && du && dd);
            g_O = pr->O;
            for (int bugged = 0; bugged < 2; bugged++) {
                int bg = bugged ? 1 + dr % 2 : 0;
                w = phax_st_writer_new();
                if (rec) {  // the kernel, the convolution with it, the kernel's backward from dk
                    their_dss(pr->R, bg, Lre, Lim, Cre, Cim, zero, H, N, T, k, a, b, c, d);
                    for (size_t i = 0; i < ht; i++) k[i] = pr->R((float)k[i]);
                    their_conv(B, T, H, 0, pr->R, u, k, dd0, gy, y, du, gk, dd);
                    their_dss(pr->R, bg, Lre, Lim, Cre, Cim, gk, H, N, T, zero, a, b, c, d);
                    for (size_t i = 0; i < ht; i++) zero[i] = 0;  // their_dss wrote k into it
                    add(w, "y", y, 3, us), add(w, "grad.u", du, 3, us), add(w, "grad.d", dd, 1, hs);
                } else {
                    their_dss(pr->R, bg, Lre, Lim, Cre, Cim, dk, H, N, T, k, a, b, c, d);
                    add(w, "k", k, 2, ks);
                }
                add(w, "grad.lambda_re", a, 1, ns), add(w, "grad.lambda_im", b, 1, ns);
                add(w, "grad.c_re", c, 2, cs), add(w, "grad.c_im", d, 2, cs);
                write_free(w, bugged ? th : ok);
            }
            sweep_judge(OPS[rec], in, ok, th, pr->name, &st[v], what);
            g_O = r_f32;
            free(Lre), free(Lim), free(Cre), free(Cim), free(dk), free(u), free(dd0), free(gy), free(k), free(zero),
                free(gk), free(a), free(b), free(c), free(d), free(y), free(du), free(dd);
        }
    sweep_report(st, NV);
    free(in), free(th), free(ok);
}
