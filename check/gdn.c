// phax check: the Gated DeltaNet cell (docs/spec.md §2.13) as a straightforward implementation
// at precision `pr` computes it, forward and backward, every input and operation rounded. Not
// ref, not fast/. Two algorithms, as people write it (phax check's bound takes the larger error):
//   chunk 0: the recurrent form, a state update per step (flash-linear-attention's
//            fused_recurrent and its PyTorch recurrence): sums over dk;
//   chunk C: the chunkwise (WY/UT) form over chunks of C steps (chunk_gated_delta_rule): sums
//            over the chunk, the UT system solved by forward substitution.
// Both backwards are the exact derivative of their forward as written (reverse mode), so each
// baseline differs from the truth by rounding only. Outputs and gradients OVERWRITTEN.
// Layouts as ref_gdn_*: q, k (B, T, H, dk); v, o (B, T, H, dv); g, beta (B, T, H); the state
// (dv, dk) per sequence here, stored transposed (B, H, dk, dv) in s0, sT, gsT, ds0.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "phax/check.h"
#include "naive.h"

#define R(x) PHAX_CHECK_R(pr, (x))
#define RM(x) PHAX_CHECK_RM(pr, (x))
#define MUL(a, b) R(RM(a) * RM(b))  // a product inside a dot product (TF32: operands rounded)

static size_t gi_(int b, int t, int hh, int T, int H) { return ((size_t)b * T + t) * H + hh; }

// x̂ = s·x/sqrt(Σx² + eps) (l2) or s·x, rounded; *r the factor (1 without l2).
static void unit(const phax_precision *pr, double *xh, double *r, const double *x, int d, int l2, double s) {
    double ss = 0;
    for (int i = 0; i < d; i++) ss = R(ss + MUL(R(x[i]), R(x[i])));
    *r = l2 ? R(1 / R(sqrt(R(ss + PHAX_GDN_L2_EPS)))) : 1;
    double f = R(R(s) * *r);
    for (int i = 0; i < d; i++) xh[i] = R(f * R(x[i]));
}

// dx = s·(r·dx̂ − r³·x·(x·dx̂)) (l2), or s·dx̂.
static void unit_bwd(const phax_precision *pr, double *dx, const double *dxh, const double *x, double r, int d, int l2,
                     double s) {
    double xd = 0, sr = R(R(s) * r), r3 = R(R(R(s) * R(r * r)) * r);
    for (int i = 0; i < d; i++) xd = R(xd + MUL(R(x[i]), dxh[i]));
    for (int i = 0; i < d; i++) dx[i] = l2 ? R(R(sr * dxh[i]) - R(R(r3 * R(x[i])) * xd)) : R(R(s) * dxh[i]);
}

static int oom(void) { return phax_fail("check: out of memory (gdn baseline)"); }

// The recurrent form: S_t = α S_{t−1} + β (v − α S_{t−1} k̂) k̂ᵀ, o_t = S_t q̂ (S rounded after
// every update); backward from a tape of the T + 1 states.
static int gdn_recurrent(const phax_precision *pr, double *o, double *sT, double *dq, double *dk, double *dv,
                         double *dg, double *dbeta, double *ds0, const double *go, const double *gsT, const double *q,
                         const double *k, const double *v, const double *g, const double *beta, const double *s0,
                         int B, int T, int H, int DK, int DV, const phax_gdn_cfg *c) {
    size_t ns = (size_t)DK * DV;
    double *Ss = malloc(((size_t)T + 1) * ns * sizeof *Ss), *dS = malloc(ns * sizeof *dS),
           *qh = malloc((size_t)DK * sizeof *qh), *kh = malloc((size_t)DK * sizeof *kh),
           *e = malloc((size_t)DV * sizeof *e), *de = malloc((size_t)DV * sizeof *de),
           *dqh = malloc((size_t)DK * sizeof *dqh), *dkh = malloc((size_t)DK * sizeof *dkh);
    if (!Ss || !dS || !qh || !kh || !e || !de || !dqh || !dkh) {
        free(Ss), free(dS), free(qh), free(kh), free(e), free(de), free(dqh), free(dkh);
        return oom();
    }
#define ST(x, i, j) (x)[(size_t)(i) * DK + (j)]
    double rq, rk;
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < H; hh++) {
            size_t si = ((size_t)b * H + hh) * ns;
            for (int i = 0; i < DV; i++)
                for (int j = 0; j < DK; j++) ST(Ss, i, j) = s0 ? R(s0[si + (size_t)j * DV + i]) : 0;
            for (int t = 0; t < T; t++) {
                size_t gi = gi_(b, t, hh, T, H);
                double *S = Ss + (size_t)(t + 1) * ns, al = R(exp(R(g[gi]))), be = R(beta[gi]);
                memcpy(S, Ss + (size_t)t * ns, ns * sizeof *S);
                unit(pr, kh, &rk, k + gi * DK, DK, c->qk_l2norm, 1);
                unit(pr, qh, &rq, q + gi * DK, DK, c->qk_l2norm, c->scale);
                for (int i = 0; i < DV; i++) {
                    double u = 0;
                    for (int j = 0; j < DK; j++) u = R(u + MUL(ST(S, i, j), kh[j]));
                    e[i] = R(R(v[gi * DV + i]) - R(al * u));
                    double bei = R(be * e[i]);
                    for (int j = 0; j < DK; j++) ST(S, i, j) = R(R(al * ST(S, i, j)) + R(bei * kh[j]));
                }
                for (int i = 0; i < DV; i++) {
                    double a = 0;
                    for (int j = 0; j < DK; j++) a = R(a + MUL(ST(S, i, j), qh[j]));
                    o[gi * DV + i] = a;
                }
            }
            if (sT)
                for (int i = 0; i < DV; i++)
                    for (int j = 0; j < DK; j++) sT[si + (size_t)j * DV + i] = ST(Ss + (size_t)T * ns, i, j);
            for (int i = 0; i < DV; i++)
                for (int j = 0; j < DK; j++) ST(dS, i, j) = gsT ? R(gsT[si + (size_t)j * DV + i]) : 0;
            for (int t = T - 1; t >= 0; t--) {
                size_t gi = gi_(b, t, hh, T, H);
                const double *Sp = Ss + (size_t)t * ns, *St = Ss + (size_t)(t + 1) * ns;
                double al = R(exp(R(g[gi]))), be = R(beta[gi]), db = 0, dal = 0;
                unit(pr, qh, &rq, q + gi * DK, DK, c->qk_l2norm, c->scale);
                unit(pr, kh, &rk, k + gi * DK, DK, c->qk_l2norm, 1);
                for (int j = 0; j < DK; j++) dqh[j] = 0, dkh[j] = 0;
                for (int i = 0; i < DV; i++) {  // o = S_t q̂
                    double goi = R(go[gi * DV + i]);
                    for (int j = 0; j < DK; j++) {
                        dqh[j] = R(dqh[j] + MUL(ST(St, i, j), goi));
                        ST(dS, i, j) = R(ST(dS, i, j) + R(goi * qh[j]));
                    }
                }
                for (int i = 0; i < DV; i++) {  // S_t = α S_{t−1} + β e k̂ᵀ, e = v − α S_{t−1} k̂
                    double u = 0, dsk = 0;
                    for (int j = 0; j < DK; j++) u = R(u + MUL(ST(Sp, i, j), kh[j]));
                    e[i] = R(R(v[gi * DV + i]) - R(al * u));
                    for (int j = 0; j < DK; j++) dsk = R(dsk + MUL(ST(dS, i, j), kh[j]));
                    de[i] = R(be * dsk);
                    db = R(db + R(e[i] * dsk));
                    double bei = R(be * e[i]);
                    for (int j = 0; j < DK; j++) dkh[j] = R(dkh[j] + R(bei * ST(dS, i, j)));
                }
                for (int i = 0; i < DV; i++)
                    for (int j = 0; j < DK; j++) {  // dA = dS − de k̂ᵀ; dk̂ −= α S_{t−1}ᵀ de; dα = ⟨dA, S_{t−1}⟩
                        double a = R(ST(dS, i, j) - R(de[i] * kh[j]));
                        dkh[j] = R(dkh[j] - R(al * R(ST(Sp, i, j) * de[i])));
                        dal = R(dal + MUL(a, ST(Sp, i, j)));
                        ST(dS, i, j) = R(al * a);
                    }
                for (int i = 0; i < DV; i++) dv[gi * DV + i] = de[i];
                dbeta[gi] = db, dg[gi] = R(al * dal);
                unit_bwd(pr, dq + gi * DK, dqh, q + gi * DK, rq, DK, c->qk_l2norm, c->scale);
                unit_bwd(pr, dk + gi * DK, dkh, k + gi * DK, rk, DK, c->qk_l2norm, 1);
            }
            if (ds0)
                for (int i = 0; i < DV; i++)
                    for (int j = 0; j < DK; j++) ds0[si + (size_t)j * DV + i] = ST(dS, i, j);
        }
    free(Ss), free(dS), free(qh), free(kh), free(e), free(de), free(dqh), free(dkh);
    return PHAX_OK;
}

// The chunkwise form (ref/gdn.c's comments have the math): per chunk from its start state S0,
// G_t = Σ_{i≤t} g_i, KK_ts = e^{G_t−G_s} k̂_t·k̂_s (s < t), KQ_ts = e^{G_t−G_s} k̂_s·q̂_t (s ≤ t),
// u_t = β_t r_t with r_t = v_t − e^{G_t} S0 k̂_t − Σ_{s<t} KK_ts u_s, o_t = e^{G_t} S0 q̂_t +
// Σ_{s≤t} KQ_ts u_s, the next chunk from e^{G_L} S0 + Σ_s e^{G_L−G_s} u_s k̂_sᵀ; the backward
// chunk by chunk from the last, the start states kept from the forward.
typedef struct {
    double *S0s, *dS, *dS0, *qh, *kh, *rq, *rk, *u, *rr, *du, *G, *dG, *KK, *KQ, *dKK, *dKQ, *dqh, *dkh;
} chunk_ws;

static void chunk_ws_free(chunk_ws *w) {
    double **p = (double **)w;
    for (size_t i = 0; i < sizeof *w / sizeof(double *); i++) free(p[i]);
}

static int chunk_ws_new(chunk_ws *w, int nc, int C, int DK, int DV) {
    size_t ns = (size_t)DK * DV, cd = (size_t)C * DK, cv = (size_t)C * DV, cc = (size_t)C * C;
    size_t n[] = {((size_t)nc + 1) * ns, ns, ns, cd, cd, C, C, cv, cv, cv, C, C, cc, cc, cc, cc, cd, cd};
    double **p = (double **)w;
    int bad = 0;
    for (size_t i = 0; i < sizeof *w / sizeof(double *); i++) bad |= !(p[i] = malloc((n[i] ? n[i] : 1) * sizeof(double)));
    if (bad) chunk_ws_free(w);
    return bad ? oom() : PHAX_OK;
}

// One chunk's forward from S (dv × dk): q̂, k̂, G, KK, KQ, r, u into w; o written (NULL: not
// wanted: the backward's recomputation, whose stochastic roundings are another draw); the state
// handed on into S2 (NULL: not wanted).
static void chunk_fwd(const phax_precision *pr, chunk_ws *w, const double *S, double *S2, double *o, const double *q,
                      const double *k, const double *v, const double *g, const double *beta, int b, int hh, int t0,
                      int n, int C, int T, int H, int DK, int DV, const phax_gdn_cfg *c) {
    double acc = 0;
    for (int t = 0; t < n; t++) {
        size_t gi = gi_(b, t0 + t, hh, T, H);
        unit(pr, w->kh + (size_t)t * DK, &w->rk[t], k + gi * DK, DK, c->qk_l2norm, 1);
        unit(pr, w->qh + (size_t)t * DK, &w->rq[t], q + gi * DK, DK, c->qk_l2norm, c->scale);
        w->G[t] = acc = R(acc + R(g[gi]));
    }
    for (int t = 0; t < n; t++)
        for (int s = 0; s <= t; s++) {
            double kk = 0, kq = 0, e = R(exp(R(w->G[t] - w->G[s])));
            for (int j = 0; j < DK; j++)
                kk = R(kk + MUL(w->kh[(size_t)t * DK + j], w->kh[(size_t)s * DK + j])),
                kq = R(kq + MUL(w->kh[(size_t)s * DK + j], w->qh[(size_t)t * DK + j]));
            w->KK[(size_t)t * C + s] = R(e * kk), w->KQ[(size_t)t * C + s] = R(e * kq);
        }
    for (int t = 0; t < n; t++) {
        size_t gi = gi_(b, t0 + t, hh, T, H);
        double be = R(beta[gi]), et = R(exp(w->G[t]));
        for (int i = 0; i < DV; i++) {
            double sk = 0;
            for (int j = 0; j < DK; j++) sk = R(sk + MUL(S[(size_t)i * DK + j], w->kh[(size_t)t * DK + j]));
            double rhs = R(R(v[gi * DV + i]) - R(et * sk));
            for (int s = 0; s < t; s++) rhs = R(rhs - MUL(w->KK[(size_t)t * C + s], w->u[(size_t)s * DV + i]));
            w->rr[(size_t)t * DV + i] = rhs, w->u[(size_t)t * DV + i] = R(be * rhs);
        }
    }
    for (int t = 0; t < n && o; t++) {
        size_t gi = gi_(b, t0 + t, hh, T, H);
        double et = R(exp(w->G[t]));
        for (int i = 0; i < DV; i++) {
            double sq = 0;
            for (int j = 0; j < DK; j++) sq = R(sq + MUL(S[(size_t)i * DK + j], w->qh[(size_t)t * DK + j]));
            double y = R(et * sq);
            for (int s = 0; s <= t; s++) y = R(y + MUL(w->KQ[(size_t)t * C + s], w->u[(size_t)s * DV + i]));
            o[gi * DV + i] = y;
        }
    }
    if (!S2) return;
    int L = n - 1;
    double eL = R(exp(w->G[L]));
    for (int i = 0; i < DV; i++)
        for (int j = 0; j < DK; j++) {
            double x = R(eL * S[(size_t)i * DK + j]);
            for (int s = 0; s < n; s++)
                x = R(x + MUL(R(R(exp(R(w->G[L] - w->G[s]))) * w->u[(size_t)s * DV + i]), w->kh[(size_t)s * DK + j]));
            S2[(size_t)i * DK + j] = x;
        }
}

static int gdn_chunkwise(const phax_precision *pr, double *o, double *sT, double *dq, double *dk, double *dv,
                         double *dg, double *dbeta, double *ds0, const double *go, const double *gsT, const double *q,
                         const double *k, const double *v, const double *g, const double *beta, const double *s0,
                         int B, int T, int H, int DK, int DV, int chunk, const phax_gdn_cfg *c) {
    int C = chunk < T ? chunk : (T > 0 ? T : 1), nc = T > 0 ? (T + C - 1) / C : 0;
    size_t ns = (size_t)DK * DV;
    chunk_ws w;
    if (chunk_ws_new(&w, nc, C, DK, DV)) return PHAX_ERR;
#define SS(x, i, j) (x)[(size_t)(i) * DK + (j)]
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < H; hh++) {
            size_t si = ((size_t)b * H + hh) * ns;
            for (int i = 0; i < DV; i++)
                for (int j = 0; j < DK; j++) SS(w.S0s, i, j) = s0 ? R(s0[si + (size_t)j * DV + i]) : 0;
            for (int cI = 0; cI < nc; cI++) {
                int t0 = cI * C, n = T - t0 < C ? T - t0 : C;
                chunk_fwd(pr, &w, w.S0s + (size_t)cI * ns, w.S0s + (size_t)(cI + 1) * ns, o, q, k, v, g, beta, b, hh, t0,
                          n, C, T, H, DK, DV, c);
            }
            if (sT)
                for (int i = 0; i < DV; i++)
                    for (int j = 0; j < DK; j++) sT[si + (size_t)j * DV + i] = SS(w.S0s + (size_t)nc * ns, i, j);
            for (int i = 0; i < DV; i++)
                for (int j = 0; j < DK; j++) SS(w.dS, i, j) = gsT ? R(gsT[si + (size_t)j * DV + i]) : 0;
            for (int cI = nc - 1; cI >= 0; cI--) {
                int t0 = cI * C, n = T - t0 < C ? T - t0 : C, L = n - 1;
                const double *S = w.S0s + (size_t)cI * ns;
                chunk_fwd(pr, &w, S, NULL, NULL, q, k, v, g, beta, b, hh, t0, n, C, T, H, DK, DV, c);  // w's values again
                for (int t = 0; t < n; t++) {
                    w.dG[t] = 0;
                    for (int s = 0; s <= t; s++) w.dKK[(size_t)t * C + s] = 0, w.dKQ[(size_t)t * C + s] = 0;
                }
                for (size_t x = 0; x < (size_t)n * DK; x++) w.dqh[x] = 0, w.dkh[x] = 0;
                for (size_t x = 0; x < (size_t)n * DV; x++) w.du[x] = 0;
                // the state handed on: e^{G_L} S0 + Σ_s e^{G_L−G_s} u_s k̂_sᵀ
                double eL = R(exp(w.G[L])), x0 = 0;
                for (size_t x = 0; x < ns; x++) w.dS0[x] = R(eL * w.dS[x]), x0 = R(x0 + MUL(w.dS[x], S[x]));
                w.dG[L] = R(w.dG[L] + R(eL * x0));
                for (int s = 0; s < n; s++) {
                    double ws_ = R(exp(R(w.G[L] - w.G[s]))), xs = 0;
                    for (int i = 0; i < DV; i++) {
                        double dsk = 0, us = w.u[(size_t)s * DV + i];
                        for (int j = 0; j < DK; j++) {
                            dsk = R(dsk + MUL(SS(w.dS, i, j), w.kh[(size_t)s * DK + j]));
                            w.dkh[(size_t)s * DK + j] = R(w.dkh[(size_t)s * DK + j] + R(R(ws_ * SS(w.dS, i, j)) * us));
                        }
                        w.du[(size_t)s * DV + i] = R(w.du[(size_t)s * DV + i] + R(ws_ * dsk));
                        xs = R(xs + MUL(us, dsk));
                    }
                    double x = R(ws_ * xs);
                    w.dG[L] = R(w.dG[L] + x), w.dG[s] = R(w.dG[s] - x);
                }
                // o_t = e^{G_t} S0 q̂_t + Σ_{s≤t} KQ_ts u_s
                for (int t = 0; t < n; t++) {
                    size_t gi = gi_(b, t0 + t, hh, T, H);
                    const double *qt = w.qh + (size_t)t * DK;
                    double et = R(exp(w.G[t])), xg = 0;
                    for (int i = 0; i < DV; i++) {
                        double sq = 0, goi = R(go[gi * DV + i]), eg = R(et * goi);
                        for (int j = 0; j < DK; j++) {
                            sq = R(sq + MUL(SS(S, i, j), qt[j]));
                            SS(w.dS0, i, j) = R(SS(w.dS0, i, j) + R(eg * qt[j]));
                            w.dqh[(size_t)t * DK + j] = R(w.dqh[(size_t)t * DK + j] + R(eg * SS(S, i, j)));
                        }
                        xg = R(xg + MUL(goi, sq));
                    }
                    w.dG[t] = R(w.dG[t] + R(et * xg));
                    for (int s = 0; s <= t; s++) {
                        double a = 0, kq = w.KQ[(size_t)t * C + s];
                        for (int i = 0; i < DV; i++) {
                            double goi = R(go[gi * DV + i]);
                            a = R(a + MUL(goi, w.u[(size_t)s * DV + i]));
                            w.du[(size_t)s * DV + i] = R(w.du[(size_t)s * DV + i] + R(kq * goi));
                        }
                        w.dKQ[(size_t)t * C + s] = R(w.dKQ[(size_t)t * C + s] + a);
                    }
                }
                // the UT solve, backwards: du_t is complete when t is reached
                for (int t = n - 1; t >= 0; t--) {
                    size_t gi = gi_(b, t0 + t, hh, T, H);
                    double be = R(beta[gi]), et = R(exp(w.G[t])), db = 0, xg = 0, *dr = w.du + (size_t)t * DV;
                    const double *kt = w.kh + (size_t)t * DK;
                    for (int i = 0; i < DV; i++) db = R(db + MUL(dr[i], w.rr[(size_t)t * DV + i])), dr[i] = R(be * dr[i]);
                    dbeta[gi] = db;
                    for (int i = 0; i < DV; i++) {
                        double sk = 0, edr = R(et * dr[i]);
                        dv[gi * DV + i] = dr[i];
                        for (int j = 0; j < DK; j++) {
                            sk = R(sk + MUL(SS(S, i, j), kt[j]));
                            SS(w.dS0, i, j) = R(SS(w.dS0, i, j) - R(edr * kt[j]));
                            w.dkh[(size_t)t * DK + j] = R(w.dkh[(size_t)t * DK + j] - R(edr * SS(S, i, j)));
                        }
                        xg = R(xg + MUL(dr[i], sk));
                    }
                    w.dG[t] = R(w.dG[t] - R(et * xg));
                    for (int s = 0; s < t; s++) {
                        double a = 0, kk = w.KK[(size_t)t * C + s];
                        for (int i = 0; i < DV; i++) {
                            a = R(a + MUL(dr[i], w.u[(size_t)s * DV + i]));
                            w.du[(size_t)s * DV + i] = R(w.du[(size_t)s * DV + i] - R(kk * dr[i]));
                        }
                        w.dKK[(size_t)t * C + s] = R(w.dKK[(size_t)t * C + s] - a);
                    }
                }
                // KK, KQ to k̂, q̂ and G
                for (int t = 0; t < n; t++)
                    for (int s = 0; s <= t; s++) {
                        double e = R(exp(R(w.G[t] - w.G[s]))), dkk = s < t ? w.dKK[(size_t)t * C + s] : 0,
                               dkq = w.dKQ[(size_t)t * C + s];
                        double x = R((s < t ? R(dkk * w.KK[(size_t)t * C + s]) : 0) + R(dkq * w.KQ[(size_t)t * C + s]));
                        w.dG[t] = R(w.dG[t] + x), w.dG[s] = R(w.dG[s] - x);
                        double ekk = R(e * dkk), ekq = R(e * dkq);
                        for (int j = 0; j < DK; j++) {
                            double kt = w.kh[(size_t)t * DK + j], ks = w.kh[(size_t)s * DK + j], qt = w.qh[(size_t)t * DK + j];
                            if (s < t) {
                                w.dkh[(size_t)t * DK + j] = R(w.dkh[(size_t)t * DK + j] + R(ekk * ks));
                                w.dkh[(size_t)s * DK + j] = R(w.dkh[(size_t)s * DK + j] + R(ekk * kt));
                            }
                            w.dkh[(size_t)s * DK + j] = R(w.dkh[(size_t)s * DK + j] + R(ekq * qt));
                            w.dqh[(size_t)t * DK + j] = R(w.dqh[(size_t)t * DK + j] + R(ekq * ks));
                        }
                    }
                double gacc = 0;  // G_t = Σ_{i≤t} g_i
                for (int t = n - 1; t >= 0; t--) {
                    size_t gi = gi_(b, t0 + t, hh, T, H);
                    dg[gi] = gacc = R(gacc + w.dG[t]);
                    unit_bwd(pr, dq + gi * DK, w.dqh + (size_t)t * DK, q + gi * DK, w.rq[t], DK, c->qk_l2norm, c->scale);
                    unit_bwd(pr, dk + gi * DK, w.dkh + (size_t)t * DK, k + gi * DK, w.rk[t], DK, c->qk_l2norm, 1);
                }
                memcpy(w.dS, w.dS0, ns * sizeof *w.dS);
            }
            if (ds0)
                for (int i = 0; i < DV; i++)
                    for (int j = 0; j < DK; j++) ds0[si + (size_t)j * DV + i] = SS(w.dS, i, j);
        }
#undef SS
    chunk_ws_free(&w);
    return PHAX_OK;
}

int phax_naive_gdn(const phax_precision *pr, double *o, double *sT, double *dq, double *dk, double *dv, double *dg,
                   double *dbeta, double *ds0, const double *go, const double *gsT, const double *q, const double *k,
                   const double *v, const double *g, const double *beta, const double *s0, int B, int T, int H, int dk_,
                   int dv_, const phax_gdn_cfg *c, int chunk) {
    if (chunk < 0) return phax_fail("check: gdn chunk must be >= 0 (got %d)", chunk);
    return chunk ? gdn_chunkwise(pr, o, sT, dq, dk, dv, dg, dbeta, ds0, go, gsT, q, k, v, g, beta, s0, B, T, H, dk_, dv_,
                                 chunk, c)
                 : gdn_recurrent(pr, o, sT, dq, dk, dv, dg, dbeta, ds0, go, gsT, q, k, v, g, beta, s0, B, T, H, dk_, dv_,
                                 c);
}

// The layer's short convolution (ref_gdn_conv_*'s function, docs/spec.md §2.13): y = SiLU(a),
// a[b,t,c] = Σ_j w[c,j] x[b,t−K+1+j,c] summed in j's order, every product and sum rounded; with gy,
// da = gy ⊙ SiLU′(a), dx gathered and dw summed over (b, t) in order. Outputs overwritten (y, dx,
// dw may be NULL: not wanted).
int phax_naive_gdn_conv(const phax_precision *pr, double *y, double *dx, double *dw, const double *gy, const double *x,
                        const double *w, int B, int T, int C, int K) {
    const size_t n = (size_t)B * T * C;
    double *da = gy ? malloc((n + 1) * sizeof *da) : NULL;
    if (gy && !da) return phax_fail("check: out of memory (gdn conv baseline)");
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                double a = 0;
                for (int j = 0; j < K; j++) {
                    const int s = t - K + 1 + j;
                    if (s >= 0) a = R(a + MUL(w[(size_t)c * K + j], x[((size_t)b * T + s) * C + c]));
                }
                const size_t i = ((size_t)b * T + t) * C + c;
                const double sg = R(sigm(a));
                if (y) y[i] = R(a * sg);
                if (da) da[i] = R(gy[i] * R(sg * R(1 + R(a * R(1 - sg)))));
            }
    if (da) {
        if (dx)
            for (int b = 0; b < B; b++)
                for (int s = 0; s < T; s++)
                    for (int c = 0; c < C; c++) {
                        double acc = 0;
                        for (int j = 0; j < K; j++) {
                            const int t = s + K - 1 - j;
                            if (t < T) acc = R(acc + MUL(w[(size_t)c * K + j], da[((size_t)b * T + t) * C + c]));
                        }
                        dx[((size_t)b * T + s) * C + c] = acc;
                    }
        if (dw)
            for (int c = 0; c < C; c++)
                for (int j = 0; j < K; j++) {
                    double acc = 0;
                    for (int b = 0; b < B; b++)
                        for (int t = 0; t < T; t++) {
                            const int s = t - K + 1 + j;
                            if (s >= 0)
                                acc = R(acc + MUL(x[((size_t)b * T + s) * C + c], da[((size_t)b * T + t) * C + c]));
                        }
                    dw[(size_t)c * K + j] = acc;
                }
    }
    free(da);
    return PHAX_OK;
}

// The layer's gates (ref_gdn_gates_*'s function): g = −e^{A_log}·softplus(a + dt_bias), β = σ(b), each
// function one rounded operation; with dg/dbeta: da = −dg·e^{A_log}·σ(z), db = dbeta·β(1 − β), and
// the per-head sums dA_log = Σ dg·g, ddt_bias = Σ da in row order. Outputs overwritten (any may be
// NULL: not wanted; the backward needs dg and dbeta both, or neither).
int phax_naive_gdn_gates(const phax_precision *pr, double *g, double *beta, double *da, double *db, double *dA_log,
                         double *ddt_bias, const double *dg, const double *dbeta, const double *a, const double *b,
                         const double *A_log, const double *dt_bias, size_t n, int H) {
    if (dA_log) memset(dA_log, 0, (size_t)H * sizeof *dA_log);
    if (ddt_bias) memset(ddt_bias, 0, (size_t)H * sizeof *ddt_bias);
    for (size_t r = 0; r < n; r++)
        for (int h = 0; h < H; h++) {
            const size_t i = r * H + h;
            const double E = R(exp(R(A_log[h]))), z = R(R(a[i]) + R(dt_bias[h])), gi = R(-R(E * R(softplus(z))));
            const double be = R(sigm(R(b[i])));
            if (g) g[i] = gi;
            if (beta) beta[i] = be;
            if (dg && dbeta) {
                const double dz = R(-R(R(dg[i] * E) * R(sigm(z))));
                if (da) da[i] = dz;
                if (ddt_bias) ddt_bias[h] = R(ddt_bias[h] + dz);
                if (dA_log) dA_log[h] = R(dA_log[h] + R(dg[i] * gi));
                if (db) db[i] = R(R(dbeta[i] * be) * R(1 - be));
            }
        }
    return PHAX_OK;
}
