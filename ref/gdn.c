// ref Gated DeltaNet cell (Yang, Kautz & Hatamizadeh 2024): the recurrent form, float64,
// plain loops. Math: docs/spec.md §2.13. The backward is full reverse mode through the delta
// rule, the decay gate, β and the optional L2 normalisation of q and k, so it is the exact
// derivative of the forward as written (the normalisation's eps included).
//
// Layouts (per the header): q, k: (B, T, H, dk); v, o: (B, T, H, dv); g, beta: (B, T, H);
// the state S: (dv, dk) per (b, head) here, stored in s0/sT (and their gradients) as its
// transpose, (B, H, dk, dv): flash-linear-attention's [B, H, K, V]. Each (b, head) pair is an
// independent sequence.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "phax/ref.h"

static size_t ix_g(int b, int t, int hh, int T, int H) { return ((size_t)b * T + t) * H + hh; }  // (B, T, H)
static size_t ix_v(int b, int t, int hh, int T, int H, int d) { return ix_g(b, t, hh, T, H) * (size_t)d; }

// S (dv, dk) from the stored transpose (dk, dv), or zero (st NULL); and back, added (add 1) or copied.
static void load_t(double *S, const double *st, int dk, int dv) {
    for (int i = 0; i < dv; i++)
        for (int j = 0; j < dk; j++) S[(size_t)i * dk + j] = st ? st[(size_t)j * dv + i] : 0;
}
static void store_t(double *st, const double *S, int dk, int dv, int add) {
    for (int i = 0; i < dv; i++)
        for (int j = 0; j < dk; j++) st[(size_t)j * dv + i] = (add ? st[(size_t)j * dv + i] : 0) + S[(size_t)i * dk + j];
}

static void nan_fill(double *x, size_t n) {
    if (x)
        for (size_t i = 0; i < n; i++) x[i] = NAN;
}

// x̂ = x / sqrt(Σ x² + eps) (l2 1) or x (l2 0), times s; *r: the factor 1/sqrt(Σ x² + eps) (1 when l2 0).
static void unit(double *xh, double *r, const double *x, int d, int l2, double s) {
    double ss = 0;
    for (int i = 0; i < d; i++) ss += x[i] * x[i];
    *r = l2 ? 1 / sqrt(ss + PHAX_GDN_L2_EPS) : 1;
    for (int i = 0; i < d; i++) xh[i] = s * *r * x[i];
}

// dx += s·(r·dx̂ − r³·x·(x·dx̂)) (l2 1), or s·dx̂ (l2 0): the derivative of unit().
static void unit_bwd(double *dx, const double *dxh, const double *x, double r, int d, int l2, double s) {
    double xd = 0;
    for (int i = 0; i < d; i++) xd += x[i] * dxh[i];
    for (int i = 0; i < d; i++) dx[i] += l2 ? s * (r * dxh[i] - r * r * r * x[i] * xd) : s * dxh[i];
}

// One step: S ← α·S + β·(v − α·S k̂) k̂ᵀ (S: dv × dk); e (dv): v − α·S_{t−1} k̂, the delta.
static void step(double *S, double *e, const double *kh, const double *v, double alpha, double beta, int dk, int dv) {
    for (int i = 0; i < dv; i++) {
        double u = 0;
        for (int j = 0; j < dk; j++) u += S[(size_t)i * dk + j] * kh[j];
        e[i] = v[i] - alpha * u;
        for (int j = 0; j < dk; j++) S[(size_t)i * dk + j] = alpha * S[(size_t)i * dk + j] + beta * e[i] * kh[j];
    }
}

int ref_gdn_recurrent_fwd(double *o, double *sT, const double *q, const double *k, const double *v, const double *g,
                          const double *beta, const double *s0, int B, int T, int H, int dk, int dv,
                          const phax_gdn_cfg *c) {
    size_t ns = (size_t)dk * dv;
    double *S = malloc(ns * sizeof *S), *qh = malloc((size_t)dk * sizeof *qh), *kh = malloc((size_t)dk * sizeof *kh),
           *e = malloc((size_t)dv * sizeof *e);
    if (!S || !qh || !kh || !e) {
        free(S), free(qh), free(kh), free(e);
        nan_fill(o, (size_t)B * T * H * dv), nan_fill(sT, (size_t)B * H * ns);
        return phax_fail("ref_gdn: out of memory");
    }
    double r;
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < H; hh++) {
            size_t si = ((size_t)b * H + hh) * ns;
            load_t(S, s0 ? s0 + si : NULL, dk, dv);
            for (int t = 0; t < T; t++) {
                size_t gi = ix_g(b, t, hh, T, H);
                unit(kh, &r, k + ix_v(b, t, hh, T, H, dk), dk, c->qk_l2norm, 1);
                unit(qh, &r, q + ix_v(b, t, hh, T, H, dk), dk, c->qk_l2norm, c->scale);
                step(S, e, kh, v + ix_v(b, t, hh, T, H, dv), exp(g[gi]), beta[gi], dk, dv);
                double *ot = o + ix_v(b, t, hh, T, H, dv);
                for (int i = 0; i < dv; i++) {  // o_t = S_t q̂_t
                    double acc = 0;
                    for (int j = 0; j < dk; j++) acc += S[(size_t)i * dk + j] * qh[j];
                    ot[i] = acc;
                }
            }
            if (sT) store_t(sT + si, S, dk, dv, 0);
        }
    free(S), free(qh), free(kh), free(e);
    return PHAX_OK;
}

// Reverse mode over one sequence at a time: the states S_0..S_T are recomputed forward and
// kept ((T + 1)·dv·dk doubles), then walked back. With A = α_t S_{t−1}, e = v_t − A k̂_t and
// S_t = A + β_t e k̂_tᵀ: dS_t gets do_t q̂_tᵀ; then de = β dS_t k̂, dβ = eᵀ dS_t k̂,
// dk̂ = β dS_tᵀ e − Aᵀ de, dA = dS_t − de k̂ᵀ, dv = de, dS_{t−1} = α dA, dg = α⟨dA, S_{t−1}⟩.
int ref_gdn_recurrent_bwd(double *dq, double *dk_, double *dv_, double *dg, double *dbeta, double *ds0,
                          const double *do_, const double *dsT, const double *q, const double *k, const double *v,
                          const double *g, const double *beta, const double *s0, int B, int T, int H, int dk, int dv,
                          const phax_gdn_cfg *c) {
    size_t ns = (size_t)dk * dv;
    double *Ss = malloc((size_t)(T + 1) * ns * sizeof *Ss), *dS = malloc(ns * sizeof *dS), *dA = malloc(ns * sizeof *dA),
           *qh = malloc((size_t)dk * sizeof *qh), *kh = malloc((size_t)dk * sizeof *kh), *e = malloc((size_t)dv * sizeof *e),
           *de = malloc((size_t)dv * sizeof *de), *dqh = malloc((size_t)dk * sizeof *dqh),
           *dkh = malloc((size_t)dk * sizeof *dkh);
    if (!Ss || !dS || !dA || !qh || !kh || !e || !de || !dqh || !dkh) {
        free(Ss), free(dS), free(dA), free(qh), free(kh), free(e), free(de), free(dqh), free(dkh);
        size_t nq = (size_t)B * T * H * dk, nv = (size_t)B * T * H * dv, ngt = (size_t)B * T * H;
        nan_fill(dq, nq), nan_fill(dk_, nq), nan_fill(dv_, nv), nan_fill(dg, ngt), nan_fill(dbeta, ngt);
        nan_fill(ds0, (size_t)B * H * ns);
        return phax_fail("ref_gdn: out of memory");
    }
    double rq, rk;
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < H; hh++) {
            size_t si = ((size_t)b * H + hh) * ns;
            load_t(Ss, s0 ? s0 + si : NULL, dk, dv);
            for (int t = 0; t < T; t++) {  // the states after each step: Ss[t + 1]
                size_t gi = ix_g(b, t, hh, T, H);
                memcpy(Ss + (size_t)(t + 1) * ns, Ss + (size_t)t * ns, ns * sizeof *Ss);
                unit(kh, &rk, k + ix_v(b, t, hh, T, H, dk), dk, c->qk_l2norm, 1);
                step(Ss + (size_t)(t + 1) * ns, e, kh, v + ix_v(b, t, hh, T, H, dv), exp(g[gi]), beta[gi], dk, dv);
            }
            load_t(dS, dsT ? dsT + si : NULL, dk, dv);
            for (int t = T - 1; t >= 0; t--) {
                size_t gi = ix_g(b, t, hh, T, H);
                const double *qt = q + ix_v(b, t, hh, T, H, dk), *kt = k + ix_v(b, t, hh, T, H, dk);
                const double *vt = v + ix_v(b, t, hh, T, H, dv), *dot = do_ + ix_v(b, t, hh, T, H, dv);
                const double *Sp = Ss + (size_t)t * ns, *St = Ss + (size_t)(t + 1) * ns;
                double al = exp(g[gi]), be = beta[gi];
                unit(qh, &rq, qt, dk, c->qk_l2norm, c->scale);
                unit(kh, &rk, kt, dk, c->qk_l2norm, 1);
                // o_t = S_t q̂_t: dq̂ = S_tᵀ do, dS_t += do q̂ᵀ
                for (int j = 0; j < dk; j++) dqh[j] = 0;
                for (int i = 0; i < dv; i++)
                    for (int j = 0; j < dk; j++) {
                        dqh[j] += St[(size_t)i * dk + j] * dot[i];
                        dS[(size_t)i * dk + j] += dot[i] * qh[j];
                    }
                // e = v − α S_{t−1} k̂
                for (int i = 0; i < dv; i++) {
                    double u = 0;
                    for (int j = 0; j < dk; j++) u += Sp[(size_t)i * dk + j] * kh[j];
                    e[i] = vt[i] - al * u;
                }
                double db = 0;
                for (int j = 0; j < dk; j++) dkh[j] = 0;
                for (int i = 0; i < dv; i++) {
                    double dsk = 0;
                    for (int j = 0; j < dk; j++) dsk += dS[(size_t)i * dk + j] * kh[j];
                    de[i] = be * dsk;
                    db += e[i] * dsk;
                    for (int j = 0; j < dk; j++) dkh[j] += be * dS[(size_t)i * dk + j] * e[i];
                }
                // dA = dS − de k̂ᵀ; dk̂ −= Aᵀ de (A = α S_{t−1}); dα = ⟨dA, S_{t−1}⟩
                double dal = 0;
                for (int i = 0; i < dv; i++)
                    for (int j = 0; j < dk; j++) {
                        double a = dS[(size_t)i * dk + j] - de[i] * kh[j];
                        dkh[j] -= al * Sp[(size_t)i * dk + j] * de[i];
                        dal += a * Sp[(size_t)i * dk + j];
                        dA[(size_t)i * dk + j] = a;
                    }
                for (size_t x = 0; x < ns; x++) dS[x] = al * dA[x];  // dS_{t−1}
                if (dv_)
                    for (int i = 0; i < dv; i++) dv_[ix_v(b, t, hh, T, H, dv) + i] += de[i];
                if (dbeta) dbeta[gi] += db;
                if (dg) dg[gi] += al * dal;
                if (dq) unit_bwd(dq + ix_v(b, t, hh, T, H, dk), dqh, qt, rq, dk, c->qk_l2norm, c->scale);
                if (dk_) unit_bwd(dk_ + ix_v(b, t, hh, T, H, dk), dkh, kt, rk, dk, c->qk_l2norm, 1);
            }
            if (ds0) store_t(ds0 + si, dS, dk, dv, 1);
        }
    free(Ss), free(dS), free(dA), free(qh), free(kh), free(e), free(de), free(dqh), free(dkh);
    return PHAX_OK;
}

// ============================================================================
// Chunkwise form (the WY/UT representation; docs/spec.md §2.13)
// ============================================================================
// Within a chunk of C steps starting from state S_0, with G_r = Σ_{i≤r} g_i (so γ_t/γ_i =
// e^{G_t − G_i}), the recurrence unrolls to S_r = e^{G_r} S_0 + Σ_{i≤r} e^{G_r − G_i} u_i k̂_iᵀ,
// where the "pseudo-values" u_t = β_t (v_t − α_t S_{t−1} k̂_t) solve the unit lower-triangular
// system u_t + β_t Σ_{i<t} e^{G_t − G_i} (k̂_t·k̂_i) u_i = β_t (v_t − e^{G_t} S_0 k̂_t) (the UT
// transform, solved here by forward substitution). Then o_t = e^{G_t} S_0 q̂_t +
// Σ_{i≤t} e^{G_t − G_i} (k̂_i·q̂_t) u_i, and the next chunk starts from S_C. The same function as
// the recurrent form by another route (sums over the chunk instead of a state update per step).
// One chunk's rows and tables (n steps from t0): k̂, q̂ (n, dk) and their normalisations'
// factors rk, rq (n each);
// G_t = Σ_{i≤t} g_i; KK[t][s] = e^{G_t − G_s} k̂_t·k̂_s (s < t), KQ[t][s] = e^{G_t − G_s} k̂_s·q̂_t
// (s ≤ t), rows of stride C.
static void chunk_tables(double *kh, double *qh, double *rk, double *rq, double *G, double *KK, double *KQ,
                         const double *q, const double *k, const double *g, int b, int hh, int t0, int n, int T, int H,
                         int dk, int C, const phax_gdn_cfg *c) {
    double acc = 0;
    for (int t = 0; t < n; t++) {
        size_t gi = ix_g(b, t0 + t, hh, T, H);
        unit(kh + (size_t)t * dk, &rk[t], k + ix_v(b, t0 + t, hh, T, H, dk), dk, c->qk_l2norm, 1);
        unit(qh + (size_t)t * dk, &rq[t], q + ix_v(b, t0 + t, hh, T, H, dk), dk, c->qk_l2norm, c->scale);
        G[t] = acc += g[gi];
    }
    for (int t = 0; t < n; t++)
        for (int s = 0; s <= t; s++) {
            double kk = 0, kq = 0;
            for (int j = 0; j < dk; j++)
                kk += kh[(size_t)t * dk + j] * kh[(size_t)s * dk + j], kq += kh[(size_t)s * dk + j] * qh[(size_t)t * dk + j];
            KK[(size_t)t * C + s] = exp(G[t] - G[s]) * kk, KQ[(size_t)t * C + s] = exp(G[t] - G[s]) * kq;
        }
}

int ref_gdn_chunkwise_fwd(double *o, double *sT, const double *q, const double *k, const double *v, const double *g,
                          const double *beta, const double *s0, int B, int T, int H, int dk, int dv, int chunk,
                          const phax_gdn_cfg *c) {
    if (chunk < 1) return phax_fail("ref_gdn_chunkwise_fwd: chunk must be >= 1 (got %d)", chunk);
    int C = chunk < T ? chunk : (T > 0 ? T : 1);
    size_t ns = (size_t)dk * dv;
    double *S = malloc(ns * sizeof *S), *S2 = malloc(ns * sizeof *S2), *qh = malloc((size_t)C * dk * sizeof *qh),
           *kh = malloc((size_t)C * dk * sizeof *kh), *u = malloc((size_t)C * dv * sizeof *u),
           *G = malloc((size_t)C * sizeof *G), *KK = malloc((size_t)C * C * sizeof *KK),
           *KQ = malloc((size_t)C * C * sizeof *KQ), *r = malloc((size_t)2 * C * sizeof *r);
    if (!S || !S2 || !qh || !kh || !u || !G || !KK || !KQ || !r) {
        free(S), free(S2), free(qh), free(kh), free(u), free(G), free(KK), free(KQ), free(r);
        nan_fill(o, (size_t)B * T * H * dv), nan_fill(sT, (size_t)B * H * ns);
        return phax_fail("ref_gdn: out of memory");
    }
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < H; hh++) {
            size_t si = ((size_t)b * H + hh) * ns;
            load_t(S, s0 ? s0 + si : NULL, dk, dv);
            for (int t0 = 0; t0 < T; t0 += C) {
                int n = T - t0 < C ? T - t0 : C;
                chunk_tables(kh, qh, r, r + C, G, KK, KQ, q, k, g, b, hh, t0, n, T, H, dk, C, c);
                // u by forward substitution
                for (int t = 0; t < n; t++) {
                    size_t gi = ix_g(b, t0 + t, hh, T, H);
                    const double *vt = v + ix_v(b, t0 + t, hh, T, H, dv), *kt = kh + (size_t)t * dk;
                    double be = beta[gi], eg = exp(G[t]);
                    for (int i = 0; i < dv; i++) {
                        double sk = 0;
                        for (int j = 0; j < dk; j++) sk += S[(size_t)i * dk + j] * kt[j];
                        double rhs = vt[i] - eg * sk;
                        for (int s = 0; s < t; s++) rhs -= KK[(size_t)t * C + s] * u[(size_t)s * dv + i];
                        u[(size_t)t * dv + i] = be * rhs;
                    }
                }
                // outputs
                for (int t = 0; t < n; t++) {
                    const double *qt = qh + (size_t)t * dk;
                    double eg = exp(G[t]), *ot = o + ix_v(b, t0 + t, hh, T, H, dv);
                    for (int i = 0; i < dv; i++) {
                        double sq = 0;
                        for (int j = 0; j < dk; j++) sq += S[(size_t)i * dk + j] * qt[j];
                        double y = eg * sq;
                        for (int s = 0; s <= t; s++) y += KQ[(size_t)t * C + s] * u[(size_t)s * dv + i];
                        ot[i] = y;
                    }
                }
                // the state the next chunk starts from: S_C = e^{G_C} S_0 + Σ_s e^{G_C − G_s} u_s k̂_sᵀ
                double eC = exp(G[n - 1]);
                for (int i = 0; i < dv; i++)
                    for (int j = 0; j < dk; j++) {
                        double x = eC * S[(size_t)i * dk + j];
                        for (int s = 0; s < n; s++) x += exp(G[n - 1] - G[s]) * u[(size_t)s * dv + i] * kh[(size_t)s * dk + j];
                        S2[(size_t)i * dk + j] = x;
                    }
                memcpy(S, S2, ns * sizeof *S);
            }
            if (sT) store_t(sT + si, S, dk, dv, 0);
        }
    free(S), free(S2), free(qh), free(kh), free(u), free(G), free(KK), free(KQ), free(r);
    return PHAX_OK;
}

// The chunkwise form's backward: reverse mode through the chunkwise forward as written, chunk
// by chunk from the last, each from the gradient of the state it hands on (dS_C) and of its
// outputs, giving its inputs' gradients and the gradient of the state it started from (the
// previous chunk's dS_C). The start states of the chunks are recomputed forward and kept
// ((⌈T/C⌉ + 1)·dv·dk doubles). Per chunk, with E_t = e^{G_t}, KK_ts, KQ_ts and the pseudo-values u
// as in the forward, r_t = v_t − E_t S_0 k̂_t − Σ_{s<t} KK_ts u_s (so u_t = β_t r_t):
//   S_C = E_L S_0 + Σ_s e^{G_L − G_s} u_s k̂_sᵀ (L the last step): dS_0 += E_L dS_C, du_s +=
//     e^{G_L − G_s} dS_C k̂_s, dk̂_s += e^{G_L − G_s} dS_Cᵀ u_s, and G_L, G_s the exponents' parts;
//   o_t = E_t S_0 q̂_t + Σ_{s≤t} KQ_ts u_s: dS_0 += E_t do_t q̂_tᵀ, dq̂_t += E_t S_0ᵀ do_t,
//     dKQ_ts = do_t·u_s, du_s += KQ_ts do_t;
//   then the triangular solve backwards (t from the last, so du_t is complete when reached):
//     dβ_t = du_t·r_t, dr_t = β_t du_t, dv_t += dr_t, dS_0 −= E_t dr_t k̂_tᵀ, dk̂_t −= E_t S_0ᵀ dr_t,
//     dKK_ts = −dr_t·u_s, du_s −= KK_ts dr_t (s < t);
//   KK_ts = e^{G_t − G_s} k̂_t·k̂_s and KQ_ts = e^{G_t − G_s} k̂_s·q̂_t to k̂, q̂ and G; G_t = Σ_{i≤t} g_i
//   gives dg_i = Σ_{t≥i} dG_t; q̂, k̂ back through the normalisation (unit_bwd).
int ref_gdn_chunkwise_bwd(double *dq, double *dk_, double *dv_, double *dg, double *dbeta, double *ds0,
                          const double *do_, const double *dsT, const double *q, const double *k, const double *v,
                          const double *g, const double *beta, const double *s0, int B, int T, int H, int dk, int dv,
                          int chunk, const phax_gdn_cfg *c) {
    if (chunk < 1) return phax_fail("ref_gdn_chunkwise_bwd: chunk must be >= 1 (got %d)", chunk);
    int C = chunk < T ? chunk : (T > 0 ? T : 1), nc = T > 0 ? (T - 1) / C + 1 : 0;  // (no T + C − 1: int)
    size_t ns = (size_t)dk * dv, cd = (size_t)C * dk, cv = (size_t)C * dv, cc = (size_t)C * C;
    double *S0s = malloc(((size_t)nc + 1) * ns * sizeof *S0s), *dS = malloc(ns * sizeof *dS),
           *dS0 = malloc(ns * sizeof *dS0), *qh = malloc(cd * sizeof *qh), *kh = malloc(cd * sizeof *kh),
           *rq = malloc((size_t)C * sizeof *rq), *rk = malloc((size_t)C * sizeof *rk), *u = malloc(cv * sizeof *u),
           *rr = malloc(cv * sizeof *rr), *du = malloc(cv * sizeof *du), *G = malloc((size_t)C * sizeof *G),
           *dG = malloc((size_t)C * sizeof *dG), *KK = malloc(cc * sizeof *KK), *KQ = malloc(cc * sizeof *KQ),
           *dKK = malloc(cc * sizeof *dKK), *dKQ = malloc(cc * sizeof *dKQ), *dqh = malloc(cd * sizeof *dqh),
           *dkh = malloc(cd * sizeof *dkh);
    if (!S0s || !dS || !dS0 || !qh || !kh || !rq || !rk || !u || !rr || !du || !G || !dG || !KK || !KQ || !dKK ||
        !dKQ || !dqh || !dkh) {
        free(S0s), free(dS), free(dS0), free(qh), free(kh), free(rq), free(rk), free(u), free(rr), free(du), free(G);
        free(dG), free(KK), free(KQ), free(dKK), free(dKQ), free(dqh), free(dkh);
        size_t nq = (size_t)B * T * H * dk, nv = (size_t)B * T * H * dv, ngt = (size_t)B * T * H;
        nan_fill(dq, nq), nan_fill(dk_, nq), nan_fill(dv_, nv), nan_fill(dg, ngt), nan_fill(dbeta, ngt);
        nan_fill(ds0, (size_t)B * H * ns);
        return phax_fail("ref_gdn: out of memory");
    }
#define SS(x, i, j) (x)[(size_t)(i) * dk + (j)]
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < H; hh++) {
            size_t si = ((size_t)b * H + hh) * ns;
            // the chunks' start states (the recurrent steps give the same function; the chunkwise
            // forward's own route would too: the start states are inputs of each chunk here)
            load_t(S0s, s0 ? s0 + si : NULL, dk, dv);
            for (int cI = 0; cI < nc; cI++) {
                double *S = S0s + (size_t)(cI + 1) * ns, r, *e = du;  // du: scratch here
                memcpy(S, S0s + (size_t)cI * ns, ns * sizeof *S);
                for (int t = cI * C; t < T && t - cI * C < C; t++) {
                    size_t gi = ix_g(b, t, hh, T, H);
                    unit(kh, &r, k + ix_v(b, t, hh, T, H, dk), dk, c->qk_l2norm, 1);
                    step(S, e, kh, v + ix_v(b, t, hh, T, H, dv), exp(g[gi]), beta[gi], dk, dv);
                }
            }
            load_t(dS, dsT ? dsT + si : NULL, dk, dv);
            for (int cI = nc - 1; cI >= 0; cI--) {
                int t0 = cI * C, n = T - t0 < C ? T - t0 : C, L = n - 1;
                const double *S = S0s + (size_t)cI * ns;
                chunk_tables(kh, qh, rk, rq, G, KK, KQ, q, k, g, b, hh, t0, n, T, H, dk, C, c);
                for (int t = 0; t < n; t++) {
                    dG[t] = 0;
                    for (int s = 0; s <= t; s++) dKK[(size_t)t * C + s] = 0, dKQ[(size_t)t * C + s] = 0;
                }
                for (int t = 0; t < n; t++) {  // u (and r, before β) by forward substitution
                    size_t gi = ix_g(b, t0 + t, hh, T, H);
                    const double *vt = v + ix_v(b, t0 + t, hh, T, H, dv), *kt = kh + (size_t)t * dk;
                    for (int i = 0; i < dv; i++) {
                        double sk = 0;
                        for (int j = 0; j < dk; j++) sk += SS(S, i, j) * kt[j];
                        double rhs = vt[i] - exp(G[t]) * sk;
                        for (int s = 0; s < t; s++) rhs -= KK[(size_t)t * C + s] * u[(size_t)s * dv + i];
                        rr[(size_t)t * dv + i] = rhs, u[(size_t)t * dv + i] = beta[gi] * rhs;
                    }
                }
                for (size_t x = 0; x < cd; x++) dqh[x] = 0, dkh[x] = 0;
                for (size_t x = 0; x < cv; x++) du[x] = 0;
                // S_C = E_L S_0 + Σ_s e^{G_L − G_s} u_s k̂_sᵀ
                double eL = exp(G[L]), x0 = 0;
                for (size_t x = 0; x < ns; x++) dS0[x] = eL * dS[x], x0 += dS[x] * S[x];
                dG[L] += eL * x0;
                for (int s = 0; s < n; s++) {
                    double w = exp(G[L] - G[s]), xs = 0;
                    for (int i = 0; i < dv; i++) {
                        double dsk = 0;
                        for (int j = 0; j < dk; j++) {
                            dsk += SS(dS, i, j) * kh[(size_t)s * dk + j];
                            dkh[(size_t)s * dk + j] += w * SS(dS, i, j) * u[(size_t)s * dv + i];
                        }
                        du[(size_t)s * dv + i] += w * dsk;
                        xs += u[(size_t)s * dv + i] * dsk;
                    }
                    dG[L] += w * xs, dG[s] -= w * xs;
                }
                // o_t = E_t S_0 q̂_t + Σ_{s≤t} KQ_ts u_s
                for (int t = 0; t < n; t++) {
                    const double *dot = do_ + ix_v(b, t0 + t, hh, T, H, dv), *qt = qh + (size_t)t * dk;
                    double et = exp(G[t]), xg = 0;
                    for (int i = 0; i < dv; i++) {
                        double sq = 0;
                        for (int j = 0; j < dk; j++) {
                            sq += SS(S, i, j) * qt[j];
                            SS(dS0, i, j) += et * dot[i] * qt[j];
                            dqh[(size_t)t * dk + j] += et * SS(S, i, j) * dot[i];
                        }
                        xg += dot[i] * sq;
                    }
                    dG[t] += et * xg;
                    for (int s = 0; s <= t; s++) {
                        double a = 0;
                        for (int i = 0; i < dv; i++) {
                            a += dot[i] * u[(size_t)s * dv + i];
                            du[(size_t)s * dv + i] += KQ[(size_t)t * C + s] * dot[i];
                        }
                        dKQ[(size_t)t * C + s] += a;
                    }
                }
                // the triangular solve, backwards
                for (int t = n - 1; t >= 0; t--) {
                    size_t gi = ix_g(b, t0 + t, hh, T, H);
                    double be = beta[gi], et = exp(G[t]), db = 0, xg = 0, *dr = du + (size_t)t * dv;
                    const double *kt = kh + (size_t)t * dk;
                    for (int i = 0; i < dv; i++) db += du[(size_t)t * dv + i] * rr[(size_t)t * dv + i], dr[i] *= be;
                    if (dbeta) dbeta[gi] += db;
                    if (dv_)
                        for (int i = 0; i < dv; i++) dv_[ix_v(b, t0 + t, hh, T, H, dv) + i] += dr[i];
                    for (int i = 0; i < dv; i++) {
                        double sk = 0;
                        for (int j = 0; j < dk; j++) {
                            sk += SS(S, i, j) * kt[j];
                            SS(dS0, i, j) -= et * dr[i] * kt[j];
                            dkh[(size_t)t * dk + j] -= et * SS(S, i, j) * dr[i];
                        }
                        xg += dr[i] * sk;
                    }
                    dG[t] -= et * xg;
                    for (int s = 0; s < t; s++) {
                        double a = 0;
                        for (int i = 0; i < dv; i++) {
                            a += dr[i] * u[(size_t)s * dv + i];
                            du[(size_t)s * dv + i] -= KK[(size_t)t * C + s] * dr[i];
                        }
                        dKK[(size_t)t * C + s] -= a;
                    }
                }
                // KK, KQ to k̂, q̂ and G
                for (int t = 0; t < n; t++)
                    for (int s = 0; s <= t; s++) {
                        double e = exp(G[t] - G[s]), dkk = s < t ? dKK[(size_t)t * C + s] : 0, dkq = dKQ[(size_t)t * C + s];
                        double xg = dkk * KK[(size_t)t * C + s] * (s < t) + dkq * KQ[(size_t)t * C + s];
                        dG[t] += xg, dG[s] -= xg;
                        for (int j = 0; j < dk; j++) {
                            double kt = kh[(size_t)t * dk + j], ks = kh[(size_t)s * dk + j], qt = qh[(size_t)t * dk + j];
                            dkh[(size_t)t * dk + j] += e * dkk * ks;
                            dkh[(size_t)s * dk + j] += e * dkk * kt + e * dkq * qt;
                            dqh[(size_t)t * dk + j] += e * dkq * ks;
                        }
                    }
                // G_t = Σ_{i≤t} g_i; q̂, k̂ back through the normalisation
                double gacc = 0;
                for (int t = n - 1; t >= 0; t--) {
                    gacc += dG[t];
                    if (dg) dg[ix_g(b, t0 + t, hh, T, H)] += gacc;
                    if (dq)
                        unit_bwd(dq + ix_v(b, t0 + t, hh, T, H, dk), dqh + (size_t)t * dk,
                                 q + ix_v(b, t0 + t, hh, T, H, dk), rq[t], dk, c->qk_l2norm, c->scale);
                    if (dk_)
                        unit_bwd(dk_ + ix_v(b, t0 + t, hh, T, H, dk), dkh + (size_t)t * dk,
                                 k + ix_v(b, t0 + t, hh, T, H, dk), rk[t], dk, c->qk_l2norm, 1);
                }
                memcpy(dS, dS0, ns * sizeof *dS);
            }
            if (ds0) store_t(ds0 + si, dS, dk, dv, 1);
        }
#undef SS
    free(S0s), free(dS), free(dS0), free(qh), free(kh), free(rq), free(rk), free(u), free(rr), free(du), free(G);
    free(dG), free(KK), free(KQ), free(dKK), free(dKQ), free(dqh), free(dkh);
    return PHAX_OK;
}

// ============================================================================
// The layer's short convolution (docs/spec.md §2.13): causal, depthwise, kernel K, then SiLU.
// ============================================================================

static int conv_sizes(const char *who, int B, int T, int C, int K) {
    if (B < 1 || T < 0 || C < 1 || K < 1) return phax_fail("%s: invalid sizes B=%d T=%d C=%d K=%d", who, B, T, C, K);
    return PHAX_OK;
}

// a[b,t,c] = Σ_j w[c,j] x[b, t−K+1+j, c] (the terms before t = 0 absent).
static double conv_pre(const double *x, const double *w, int b, int t, int c, int T, int C, int K) {
    double a = 0;
    for (int j = 0; j < K; j++) {
        const int s = t - K + 1 + j;
        if (s >= 0) a += w[(size_t)c * K + j] * x[((size_t)b * T + s) * C + c];
    }
    return a;
}

int ref_gdn_conv_fwd(double *y, const double *x, const double *w, int B, int T, int C, int K) {
    if (conv_sizes("ref_gdn_conv_fwd", B, T, C, K)) return PHAX_ERR;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                const double a = conv_pre(x, w, b, t, c, T, C, K);
                y[((size_t)b * T + t) * C + c] = a / (1 + exp(-a));  // SiLU
            }
    return PHAX_OK;
}

int ref_gdn_conv_bwd(double *dx, double *dw, const double *dy, const double *x, const double *w, int B, int T, int C,
                     int K) {
    if (conv_sizes("ref_gdn_conv_bwd", B, T, C, K)) return PHAX_ERR;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                const double a = conv_pre(x, w, b, t, c, T, C, K), s = 1 / (1 + exp(-a));
                const double da = dy[((size_t)b * T + t) * C + c] * s * (1 + a * (1 - s));  // SiLU′ = σ(1 + a(1 − σ))
                for (int j = 0; j < K; j++) {
                    const int u = t - K + 1 + j;
                    if (u < 0) continue;
                    const size_t xi = ((size_t)b * T + u) * C + c;
                    if (dx) dx[xi] += w[(size_t)c * K + j] * da;
                    if (dw) dw[(size_t)c * K + j] += x[xi] * da;
                }
            }
    return PHAX_OK;
}

// ============================================================================
// The layer's gates (docs/spec.md §2.13): the decay's log g and the writing strength β.
// ============================================================================

static double softplus_d(double z) { return z > 0 ? z + log1p(exp(-z)) : log1p(exp(z)); }
static double sigmoid_d(double z) { return z >= 0 ? 1 / (1 + exp(-z)) : exp(z) / (1 + exp(z)); }

int ref_gdn_gates_fwd(double *g, double *beta, const double *a, const double *b, const double *A_log,
                      const double *dt_bias, size_t n, int H) {
    if (H < 1) return phax_fail("ref_gdn_gates_fwd: H = %d must be >= 1", H);
    for (size_t r = 0; r < n; r++)
        for (int h = 0; h < H; h++) {
            const size_t i = r * H + h;
            if (g) g[i] = -exp(A_log[h]) * softplus_d(a[i] + dt_bias[h]);
            if (beta) beta[i] = sigmoid_d(b[i]);
        }
    return PHAX_OK;
}

int ref_gdn_gates_bwd(double *da, double *db, double *dA_log, double *ddt_bias, const double *dg, const double *dbeta,
                      const double *a, const double *b, const double *A_log, const double *dt_bias, size_t n, int H) {
    if (H < 1) return phax_fail("ref_gdn_gates_bwd: H = %d must be >= 1", H);
    for (size_t r = 0; r < n; r++)
        for (int h = 0; h < H; h++) {
            const size_t i = r * H + h;
            if (dg) {
                const double E = exp(A_log[h]), z = a[i] + dt_bias[h], dz = -dg[i] * E * sigmoid_d(z);
                if (da) da[i] += dz;
                if (ddt_bias) ddt_bias[h] += dz;
                if (dA_log) dA_log[h] += dg[i] * (-E * softplus_d(z));  // ∂g/∂A_log = g
            }
            if (dbeta && db) {
                const double s = sigmoid_d(b[i]);
                db[i] += dbeta[i] * s * (1 - s);
            }
        }
    return PHAX_OK;
}

// ============================================================================
// The Gated DeltaNet layer (docs/spec.md §2.13, "The layer"): projections, the short
// convolutions with SiLU, the gates, the cell, the gated per-head RMSNorm, the output projection.
// Every activation is recomputed in the backward (ref keeps nothing between calls).
// ============================================================================

typedef struct {  // the layer's activations, n = B·T rows
    double *qp, *kp, *vp;  // projections (n, d/2), (n, d/2), (n, d)
    double *q, *k, *v;     // after the convolution and SiLU, same shapes
    double *a, *b;         // gate projections (n, H)
    double *g, *beta;      // the cell's log-decay and writing strength (n, H)
    double *o, *on;        // the cell's output and its RMSNorm over each head (n, d)
    double *z, *sz, *h;    // the output gate's projection, SiLU(z), on ⊙ SiLU(z) (n, d)
    double *buf;
} gdn_layer_acts;

static int layer_sizes(const char *who, int B, int T, int d, int H, int K) {
    if (B < 1 || T < 0 || d < 2 || d % 2 || H < 1 || (d / 2) % H || K < 1)
        return phax_fail("%s: B %d, T %d, d %d, H %d, K %d (need B, H, K >= 1, T >= 0, d even, H dividing d/2)", who,
                         B, T, d, H, K);
    return PHAX_OK;
}

static int layer_acts_fwd(gdn_layer_acts *a, const double *x, const ref_gdn_layer_w *w, int B, int T, int d, int H,
                          int K, double eps) {
    const size_t n = (size_t)B * T, dh = (size_t)d / 2, nd = n * d, nh = n * dh, ng = n * H;
    a->buf = calloc(4 * nh + 7 * nd + 4 * ng + 1, sizeof *a->buf);
    if (!a->buf) return phax_fail("ref_gdn_layer: out of memory");
    double *p = a->buf;
    a->qp = p, p += nh, a->kp = p, p += nh, a->q = p, p += nh, a->k = p, p += nh;
    a->vp = p, p += nd, a->v = p, p += nd, a->o = p, p += nd, a->on = p, p += nd;
    a->z = p, p += nd, a->sz = p, p += nd, a->h = p, p += nd;
    a->a = p, p += ng, a->b = p, p += ng, a->g = p, p += ng, a->beta = p;
    ref_linear_fwd(a->qp, x, w->wq, NULL, n, d, d / 2);
    ref_linear_fwd(a->kp, x, w->wk, NULL, n, d, d / 2);
    ref_linear_fwd(a->vp, x, w->wv, NULL, n, d, d);
    if (ref_gdn_conv_fwd(a->q, a->qp, w->conv_q, B, T, d / 2, K) || ref_gdn_conv_fwd(a->k, a->kp, w->conv_k, B, T, d / 2, K) ||
        ref_gdn_conv_fwd(a->v, a->vp, w->conv_v, B, T, d, K))
        return PHAX_ERR;
    ref_linear_fwd(a->a, x, w->wa, NULL, n, d, H);
    ref_linear_fwd(a->b, x, w->wb, NULL, n, d, H);
    if (ref_gdn_gates_fwd(a->g, a->beta, a->a, a->b, w->A_log, w->dt_bias, n, H)) return PHAX_ERR;
    const int dk = d / 2 / H, dv = d / H;
    const phax_gdn_cfg c = {1 / sqrt((double)dk), 1};
    if (ref_gdn_recurrent_fwd(a->o, NULL, a->q, a->k, a->v, a->g, a->beta, NULL, B, T, H, dk, dv, &c)) return PHAX_ERR;
    ref_rmsnorm_fwd(a->on, a->o, w->norm, n * H, dv, eps);  // each head's dv values, one weight (dv) for all
    ref_linear_fwd(a->z, x, w->wg, NULL, n, d, d);
    ref_silu_fwd(a->sz, a->z, nd);
    for (size_t i = 0; i < nd; i++) a->h[i] = a->on[i] * a->sz[i];
    return PHAX_OK;
}

int ref_gdn_layer_fwd(double *y, const double *x, const ref_gdn_layer_w *w, int B, int T, int d, int H, int K,
                      double norm_eps) {
    if (layer_sizes("ref_gdn_layer_fwd", B, T, d, H, K)) return PHAX_ERR;
    gdn_layer_acts a = {0};
    int rc = layer_acts_fwd(&a, x, w, B, T, d, H, K, norm_eps);
    if (!rc) ref_linear_fwd(y, a.h, w->wo, NULL, (size_t)B * T, d, d);
    free(a.buf);
    return rc;
}

int ref_gdn_layer_bwd(double *dx, const ref_gdn_layer_g *gw, const double *dy, const double *x, const ref_gdn_layer_w *w,
                      int B, int T, int d, int H, int K, double norm_eps) {
    if (layer_sizes("ref_gdn_layer_bwd", B, T, d, H, K)) return PHAX_ERR;
    gdn_layer_acts a = {0};
    const size_t n = (size_t)B * T, dh = (size_t)d / 2, nd = n * d, nh = n * dh, ng = n * H;
    double *g2 = calloc(3 * nh + 7 * nd + 4 * ng + 1, sizeof *g2);  // the activations' gradients
    int rc = g2 ? layer_acts_fwd(&a, x, w, B, T, d, H, K, norm_eps) : phax_fail("ref_gdn_layer: out of memory");
    if (rc) goto done;
    double *dq = g2, *dk_ = dq + nh, *dqkp = dk_ + nh;    // (n, d/2) each: dq, dk, a projection's
    double *dv_ = dqkp + nh, *dvp = dv_ + nd, *dh_ = dvp + nd, *dz = dh_ + nd, *don = dz + nd, *dsz = don + nd,
           *do_ = dsz + nd;                                                      // (n, d) each
    double *dg = do_ + nd, *dbeta = dg + ng, *da = dbeta + ng, *db = da + ng;  // (n, H) each
    const int dk = d / 2 / H, dv = d / H;
    const phax_gdn_cfg c = {1 / sqrt((double)dk), 1};
    // y = h Woᵀ;  h = on ⊙ SiLU(z)
    ref_linear_bwd(dh_, gw->wo, NULL, dy, a.h, w->wo, n, d, d);
    for (size_t i = 0; i < nd; i++) don[i] = dh_[i] * a.sz[i], dsz[i] = dh_[i] * a.on[i];
    ref_silu_bwd(dz, dsz, a.z, nd);
    ref_linear_bwd(dx, gw->wg, NULL, dz, x, w->wg, n, d, d);
    // on = RMSNorm of each head of o; o = cell(q, k, v, g, β)
    ref_rmsnorm_bwd(do_, gw->norm, don, a.o, w->norm, n * H, dv, norm_eps);
    if ((rc = ref_gdn_recurrent_bwd(dq, dk_, dv_, dg, dbeta, NULL, do_, NULL, a.q, a.k, a.v, a.g, a.beta, NULL, B, T, H,
                                    dk, dv, &c)))
        goto done;
    // g, β = gates(a, b); a = x Waᵀ, b = x Wbᵀ
    if ((rc = ref_gdn_gates_bwd(da, db, gw->A_log, gw->dt_bias, dg, dbeta, a.a, a.b, w->A_log, w->dt_bias, n, H)))
        goto done;
    ref_linear_bwd(dx, gw->wa, NULL, da, x, w->wa, n, d, H);
    ref_linear_bwd(dx, gw->wb, NULL, db, x, w->wb, n, d, H);
    // q, k, v = SiLU(conv(projections)); projections = x W{q,k,v}ᵀ
    if ((rc = ref_gdn_conv_bwd(dvp, gw->conv_v, dv_, a.vp, w->conv_v, B, T, d, K))) goto done;
    ref_linear_bwd(dx, gw->wv, NULL, dvp, x, w->wv, n, d, d);
    if ((rc = ref_gdn_conv_bwd(dqkp, gw->conv_q, dq, a.qp, w->conv_q, B, T, d / 2, K))) goto done;
    ref_linear_bwd(dx, gw->wq, NULL, dqkp, x, w->wq, n, d, d / 2);
    memset(dqkp, 0, nh * sizeof *dqkp);
    if ((rc = ref_gdn_conv_bwd(dqkp, gw->conv_k, dk_, a.kp, w->conv_k, B, T, d / 2, K))) goto done;
    ref_linear_bwd(dx, gw->wk, NULL, dqkp, x, w->wk, n, d, d / 2);
done:
    free(a.buf), free(g2);
    return rc;
}
