// phax check: the mLSTM cell (parallel, stabilised form of docs/spec.md §2.9) as a
// straightforward implementation at precision `pr` computes it: one query row at a time,
// plain loops, every input and operation rounded. Not ref, not fast/. The backward is the
// exact derivative of this forward as written (the stabiliser's argmax and the
// max(|S|, e^{−m}) branch included), as ref's is, so the baseline differs from the truth
// by rounding only.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "phax/check.h"
#include "naive.h"

#define R(x) PHAX_CHECK_R(pr, (x))
#define RM(x) PHAX_CHECK_RM(pr, (x))

static double logsig(double z) { return fmin(z, 0.0) - log1p(exp(-fabs(z))); }

// cumsum = 0: the log-decays summed directly from r = t down (D̃_ts rounded per added
// term); cumsum = 1: as the difference of cumulative sums cs_t − cs_s, cs_r = Σ_{u≤r} logσ(f̃_u)
// (what many PyTorch versions and every chunkwise kernel write). Both are sound; the second
// carries an absolute error of ~u·|cs_t| in every decay, which grows with T, so phax check takes
// the larger error of the two (src/oracle_ops.c, op_mlstm). Each backward is its own forward's:
// the first gives f̃_r the dD of the terms its sum holds; the second gives cs_t and cs_s the dD
// with opposite signs and f̃_r the suffix sum Σ_{t≥r} dcs_t, whose parts cancel in exact
// arithmetic where f̃_r reaches no output (f̃_0 of the parallel form: its gradient is exactly 0
// in the truth and in the first, a rounding residual in the second — and in a correct bf16
// chunkwise backward, which FAILed at ratio 10.8 against the first alone: T 2, grad.fgate).
static int naive_mlstm(const phax_precision *pr, double *h, double *dq, double *dk, double *dv, double *di,
                       double *df, const double *gh, const double *q, const double *k, const double *v,
                       const double *ig, const double *fg, int B, int T, int H, int dqk, int dvh, double eps,
                       int cumsum, int stopgrad, int carry, double m0) {
    size_t nqk = (size_t)B * T * H * dqk, nv = (size_t)B * T * H * dvh, ng = (size_t)B * T * H;
    double *D = malloc((size_t)T * sizeof *D), *E = malloc((size_t)T * sizeof *E), *g = malloc((size_t)T * sizeof *g);
    double *dD = malloc((size_t)T * sizeof *dD), *qh = malloc((size_t)dqk * sizeof *qh),
           *dqh = malloc((size_t)dqk * sizeof *dqh), *cs = malloc((size_t)T * sizeof *cs),
           *dcs = malloc((size_t)T * sizeof *dcs);
    if (!D || !E || !g || !dD || !qh || !dqh || !cs || !dcs) {
        free(D), free(E), free(g), free(dD), free(qh), free(dqh), free(cs), free(dcs);
        return phax_fail("check: out of memory (mlstm baseline)");
    }
    memset(dq, 0, nqk * sizeof *dq), memset(dk, 0, nqk * sizeof *dk), memset(dv, 0, nv * sizeof *dv);
    memset(di, 0, ng * sizeof *di), memset(df, 0, ng * sizeof *df);
    double sc = R(1.0 / R(sqrt((double)dqk))), m0r = R(m0);
#define GI(t) (((size_t)b * T + (t)) * H + hh)
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < H; hh++) {
            if (cumsum)
                for (int r = 0; r < T; r++) cs[r] = R((r ? cs[r - 1] : 0.0) + R(logsig(R(fg[GI(r)])))), dcs[r] = 0;
            for (int t = 0; t < T; t++) {
                // D̃_ts = Σ_{r=s+1..t} logσ(f̃_r) + ĩ_s, summed from r = t down (or cs_t − cs_s);
                // m = max_s D̃_ts, or with the stabiliser carried from m0, max(cs_t + m0, max_s D̃_ts)
                // (arg −1: the carried term, which wins a tie as the recurrent form's forget branch).
                double F = 0, m = carry ? R(cs[t] + m0r) : -INFINITY;
                int arg = carry ? -1 : 0;
                for (int s = t; s >= 0; s--) {
                    if (cumsum) {
                        D[s] = R(R(cs[t] - cs[s]) + R(ig[GI(s)]));
                        continue;
                    }
                    D[s] = R(F + R(ig[GI(s)]));
                    F = R(F + R(logsig(R(fg[GI(s)]))));
                }
                for (int s = 0; s <= t; s++)
                    if (D[s] > m) m = D[s], arg = s;
                const double *qt = q + GI(t) * dqk;
                for (int i = 0; i < dqk; i++) qh[i] = R(R(qt[i]) * sc);
                double S = 0;
                for (int s = 0; s <= t; s++) {
                    double a = 0;
                    for (int i = 0; i < dqk; i++) a = R(a + R(RM(qh[i]) * RM(R(k[GI(s) * dqk + i]))));
                    g[s] = a;
                    E[s] = R(exp(R(D[s] - m)));
                    S = R(S + R(g[s] * E[s]));
                }
                double em = R(exp(-m)), den = R((fabs(S) >= em ? fabs(S) : em) + eps);
                double *ht = h + GI(t) * dvh;
                const double *gt = gh + GI(t) * dvh;
                double dden = 0;
                for (int j = 0; j < dvh; j++) {
                    double a = 0;
                    for (int s = 0; s <= t; s++) a = R(a + R(RM(R(g[s] * E[s])) * RM(R(v[GI(s) * dvh + j]))));
                    ht[j] = R(a / den);
                    dden = R(dden - R(R(gt[j]) * ht[j]));
                }
                dden = R(dden / den);
                // Back through the branch of the normaliser, then each C̄_s = g_s E_s.
                double dS = fabs(S) >= em ? (S >= 0 ? dden : -dden) : 0, dm = fabs(S) >= em ? 0 : R(-R(dden * em));
                if (stopgrad) dS = 0, dm = 0;  // den and m held constant (PHAX_MLSTM_GRAD_STOPGRAD_NORMALIZER)
                for (int i = 0; i < dqk; i++) dqh[i] = 0;
                for (int s = 0; s <= t; s++) {
                    double dC = 0;
                    for (int j = 0; j < dvh; j++) dC = R(dC + R(RM(R(R(gt[j]) / den)) * RM(R(v[GI(s) * dvh + j]))));
                    dC = R(dC + dS);
                    double C = R(g[s] * E[s]);
                    for (int j = 0; j < dvh; j++)
                        dv[GI(s) * dvh + j] = R(dv[GI(s) * dvh + j] + R(RM(C) * RM(R(R(gt[j]) / den))));
                    double dg = R(dC * E[s]);
                    dD[s] = R(R(dC * g[s]) * E[s]);
                    if (!stopgrad) dm = R(dm - dD[s]);
                    for (int i = 0; i < dqk; i++) {
                        dqh[i] = R(dqh[i] + R(RM(dg) * RM(R(k[GI(s) * dqk + i]))));
                        dk[GI(s) * dqk + i] = R(dk[GI(s) * dqk + i] + R(RM(dg) * RM(qh[i])));
                    }
                }
                if (arg >= 0 && !cumsum) dD[arg] = R(dD[arg] + dm);  // (the cumulative-sum form routes dm below)
                for (int i = 0; i < dqk; i++) dq[GI(t) * dqk + i] = R(dq[GI(t) * dqk + i] + R(dqh[i] * sc));
                // D̃_ts = ĩ_s + Σ_{s<r≤t} logσ(f̃_r): ĩ_s takes dD_s, f̃_r takes Σ_{s<r} dD_s·σ(−f̃_r).
                // D̃_ts = cs_t − cs_s + ĩ_s: cs_t takes Σ_s dD_s, cs_s takes −dD_s; the carried term
                // cs_t + m0, when it is the max, gives cs_t dm too (f̃_r from dcs after the rows).
                // As a chunkwise backward writes it: each term to both of its sums in turn (the
                // s = t term's two halves cancel only in exact arithmetic), then dm to cs_t and to
                // the max's winner (cs_arg, ĩ_arg), or to cs_t alone for the carried term.
                if (cumsum) {
                    for (int s = 0; s <= t; s++) {
                        di[GI(s)] = R(di[GI(s)] + dD[s]);
                        dcs[t] = R(dcs[t] + dD[s]), dcs[s] = R(dcs[s] - dD[s]);
                    }
                    dcs[t] = R(dcs[t] + dm);
                    if (arg >= 0) di[GI(arg)] = R(di[GI(arg)] + dm), dcs[arg] = R(dcs[arg] - dm);
                    continue;
                }
                double acc = 0;
                for (int s = 0; s <= t; s++) {
                    di[GI(s)] = R(di[GI(s)] + dD[s]);
                    if (s > 0) df[GI(s)] = R(df[GI(s)] + R(acc * R(sigm(-R(fg[GI(s)])))));
                    acc = R(acc + dD[s]);
                }
            }
            if (cumsum) {  // cs_r = Σ_{u≤r} logσ(f̃_u): f̃_r takes Σ_{t≥r} dcs_t·σ(−f̃_r)
                double acc = 0;
                for (int r = T - 1; r >= 0; r--) {
                    acc = R(acc + dcs[r]);
                    df[GI(r)] = R(acc * R(sigm(-R(fg[GI(r)]))));
                }
            }
        }
#undef GI
    free(D), free(E), free(g), free(dD), free(qh), free(dqh), free(cs), free(dcs);
    return PHAX_OK;
}

int phax_naive_mlstm(const phax_precision *pr, double *h, double *dq, double *dk, double *dv, double *di,
                     double *df, const double *gh, const double *q, const double *k, const double *v,
                     const double *ig, const double *fg, int B, int T, int H, int dqk, int dvh, double eps) {
    return naive_mlstm(pr, h, dq, dk, dv, di, df, gh, q, k, v, ig, fg, B, T, H, dqk, dvh, eps, 0, 0, 0, 0);
}

int phax_naive_mlstm_grad(const phax_precision *pr, double *h, double *dq, double *dk, double *dv, double *di,
                          double *df, const double *gh, const double *q, const double *k, const double *v,
                          const double *ig, const double *fg, int B, int T, int H, int dqk, int dvh, double eps,
                          int cumsum, int grad) {
    return naive_mlstm(pr, h, dq, dk, dv, di, df, gh, q, k, v, ig, fg, B, T, H, dqk, dvh, eps, cumsum, grad != 0, 0, 0);
}

int phax_naive_mlstm_cumsum(const phax_precision *pr, double *h, double *dq, double *dk, double *dv, double *di,
                            double *df, const double *gh, const double *q, const double *k, const double *v,
                            const double *ig, const double *fg, int B, int T, int H, int dqk, int dvh,
                            double eps) {
    return naive_mlstm(pr, h, dq, dk, dv, di, df, gh, q, k, v, ig, fg, B, T, H, dqk, dvh, eps, 1, 0, 0, 0);
}

// The recurrent form's function written the chunkwise way with one chunk as long as the
// sequence: the parallel form on cumulative-sum decays, its stabiliser carried from m0,
// m_t = max(cs_t + m0, max_s D̃_ts), h_t = Σ_s (q̂·k_s) e^{D̃_ts − m_t} v_s / (max(|Σ_s (q̂·k_s)
// e^{D̃_ts − m_t}|, e^{−m_t}) + eps), and its exact backward. Equal to the recurrent form in
// exact arithmetic; its sums run over t terms where the recurrent form's run over dqk, so a
// chunkwise kernel (chunks of L ≤ T, forward and backward) rounds at most about as much: phax
// check's bound on form=recurrent takes the larger of the two errors (a correct bf16 chunkwise
// mLSTM, T 257, chunks of 128, had grad.v at ratio 4.24 against the recurrent baseline alone).
int phax_naive_mlstm_chunkwise(const phax_precision *pr, double *h, double *dq, double *dk, double *dv, double *di,
                               double *df, const double *gh, const double *q, const double *k, const double *v,
                               const double *ig, const double *fg, int B, int T, int H, int dqk, int dvh, double eps,
                               double m0) {
    return naive_mlstm(pr, h, dq, dk, dv, di, df, gh, q, k, v, ig, fg, B, T, H, dqk, dvh, eps, 1, 0, 1, m0);
}

// The recurrent form (docs/spec.md §2.9): per row and head the states C (dqk, dv), n (dqk),
// m, starting from C = 0, n = 0, m = m0, stepped t = 0..T−1 as written there, every
// operation rounded. The backward runs the steps in reverse from a tape of the states
// before each step (dC, dn carried back through f′, dm through m_t = max(φ_t + m_{t−1}, ĩ_t));
// ties as the spec says: the forget branch over ĩ, |nᵀq̂| over e^{−m}.
int phax_naive_mlstm_recurrent(const phax_precision *pr, double *h, double *dq, double *dk, double *dv, double *di,
                               double *df, const double *gh, const double *q, const double *k, const double *v,
                               const double *ig, const double *fg, int B, int T, int H, int dqk, int dvh, double eps,
                               double m0) {
    size_t nqk = (size_t)B * T * H * dqk, nv = (size_t)B * T * H * dvh, ng = (size_t)B * T * H;
    size_t cs = (size_t)dqk * dvh, T1 = (size_t)T + 1;
    // Tape: C_t, n_t, m_t for t = −1..T−1 (index t+1); per step the values its backward needs.
    double *Ct = malloc(T1 * cs * sizeof *Ct), *nt = malloc(T1 * (size_t)dqk * sizeof *nt),
           *mt = malloc(T1 * sizeof *mt), *fp = malloc((size_t)T * sizeof *fp), *ip = malloc((size_t)T * sizeof *ip),
           *sv = malloc((size_t)T * sizeof *sv), *den = malloc((size_t)T * sizeof *den),
           *dC = malloc(cs * sizeof *dC), *dn = malloc((size_t)dqk * sizeof *dn), *qh = malloc((size_t)dqk * sizeof *qh),
           *dqh = malloc((size_t)dqk * sizeof *dqh), *dnum = malloc((size_t)dvh * sizeof *dnum);
    char *fbr = malloc((size_t)T);  // 1: m_t took the forget branch φ_t + m_{t−1}
    if (!Ct || !nt || !mt || !fp || !ip || !sv || !den || !dC || !dn || !qh || !dqh || !dnum || !fbr) {
        free(Ct), free(nt), free(mt), free(fp), free(ip), free(sv), free(den), free(dC), free(dn), free(qh);
        free(dqh), free(dnum), free(fbr);
        return phax_fail("check: out of memory (mlstm recurrent baseline)");
    }
    memset(dq, 0, nqk * sizeof *dq), memset(dk, 0, nqk * sizeof *dk), memset(dv, 0, nv * sizeof *dv);
    memset(di, 0, ng * sizeof *di), memset(df, 0, ng * sizeof *df);
    double sc = R(1.0 / R(sqrt((double)dqk)));
#define GI(t) (((size_t)b * T + (t)) * H + hh)
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < H; hh++) {
            memset(Ct, 0, cs * sizeof *Ct), memset(nt, 0, (size_t)dqk * sizeof *nt);
            mt[0] = R(m0);
            for (int t = 0; t < T; t++) {
                const double *Cp = Ct + (size_t)t * cs, *np = nt + (size_t)t * dqk;
                double *C = Ct + (size_t)(t + 1) * cs, *n = nt + (size_t)(t + 1) * dqk;
                double it = R(ig[GI(t)]), a = R(R(logsig(R(fg[GI(t)]))) + mt[t]);
                fbr[t] = a >= it;
                double m = mt[t + 1] = fbr[t] ? a : it;
                fp[t] = R(exp(R(a - m))), ip[t] = R(exp(R(it - m)));
                const double *kt = k + GI(t) * dqk, *vt = v + GI(t) * dvh, *qt = q + GI(t) * dqk;
                for (int i = 0; i < dqk; i++) {
                    double ik = R(ip[t] * R(kt[i]));
                    for (int j = 0; j < dvh; j++)
                        C[(size_t)i * dvh + j] = R(R(fp[t] * Cp[(size_t)i * dvh + j]) + R(RM(ik) * RM(R(vt[j]))));
                    n[i] = R(R(fp[t] * np[i]) + ik);
                    qh[i] = R(R(qt[i]) * sc);
                }
                double s = 0;
                for (int i = 0; i < dqk; i++) s = R(s + R(RM(n[i]) * RM(qh[i])));
                sv[t] = s;
                double em = R(exp(-m));
                den[t] = R((fabs(s) >= em ? fabs(s) : em) + eps);
                for (int j = 0; j < dvh; j++) {
                    double acc = 0;
                    for (int i = 0; i < dqk; i++) acc = R(acc + R(RM(C[(size_t)i * dvh + j]) * RM(qh[i])));
                    h[GI(t) * dvh + j] = R(acc / den[t]);
                }
            }
            // Reverse: dC, dn are the gradients of C_t, n_t; dmc that of m_t from step t+1.
            memset(dC, 0, cs * sizeof *dC), memset(dn, 0, (size_t)dqk * sizeof *dn);
            double dmc = 0;
            for (int t = T - 1; t >= 0; t--) {
                const double *Cp = Ct + (size_t)t * cs, *np = nt + (size_t)t * dqk;
                const double *C = Ct + (size_t)(t + 1) * cs;
                const double *kt = k + GI(t) * dqk, *vt = v + GI(t) * dvh, *qt = q + GI(t) * dqk,
                             *gt = gh + GI(t) * dvh;
                double m = mt[t + 1], em = R(exp(-m)), s = sv[t];
                for (int i = 0; i < dqk; i++) qh[i] = R(R(qt[i]) * sc), dqh[i] = 0;
                // h_j = num_j / den: dnum_j = gh_j / den, dden = −Σ_j gh_j h_j / den.
                double dden = 0;
                for (int j = 0; j < dvh; j++) {
                    dnum[j] = R(R(gt[j]) / den[t]);
                    dden = R(dden - R(R(gt[j]) * h[GI(t) * dvh + j]));
                }
                dden = R(dden / den[t]);
                double ds = fabs(s) >= em ? (s > 0 ? dden : s < 0 ? -dden : 0) : 0;
                double dm = R(dmc + (fabs(s) >= em ? 0 : R(-R(dden * em))));
                for (int i = 0; i < dqk; i++) {
                    double a = 0;
                    for (int j = 0; j < dvh; j++) {
                        dC[(size_t)i * dvh + j] = R(dC[(size_t)i * dvh + j] + R(RM(dnum[j]) * RM(qh[i])));
                        a = R(a + R(RM(C[(size_t)i * dvh + j]) * RM(dnum[j])));
                    }
                    dn[i] = R(dn[i] + R(ds * qh[i]));
                    dqh[i] = R(R(dqh[i] + a) + R(ds * nt[(size_t)(t + 1) * dqk + i]));
                    dq[GI(t) * dqk + i] = R(dqh[i] * sc);
                }
                // C_t = f′ C_{t−1} + i′ k vᵀ, n_t = f′ n_{t−1} + i′ k.
                double dfp = 0, dip = 0;
                for (int i = 0; i < dqk; i++) {
                    double kv = 0, ki = R(kt[i]);
                    for (int j = 0; j < dvh; j++) {
                        double g = dC[(size_t)i * dvh + j];
                        dfp = R(dfp + R(RM(g) * RM(Cp[(size_t)i * dvh + j])));
                        kv = R(kv + R(RM(g) * RM(R(vt[j]))));
                        dv[GI(t) * dvh + j] = R(dv[GI(t) * dvh + j] + R(RM(R(ip[t] * ki)) * RM(g)));
                    }
                    dfp = R(dfp + R(dn[i] * np[i]));
                    kv = R(kv + dn[i]);
                    dip = R(dip + R(kv * ki));
                    dk[GI(t) * dqk + i] = R(ip[t] * kv);
                }
                for (size_t x = 0; x < cs; x++) dC[x] = R(fp[t] * dC[x]);
                for (int i = 0; i < dqk; i++) dn[i] = R(fp[t] * dn[i]);
                // f′ = e^{a − m}, i′ = e^{ĩ − m}, m = max(a, ĩ), a = φ + m_{t−1}, φ = logσ(f̃).
                double ga = R(dfp * fp[t]), gi = R(dip * ip[t]);
                dm = R(R(dm - ga) - gi);
                if (fbr[t]) ga = R(ga + dm);
                else gi = R(gi + dm);
                di[GI(t)] = gi;
                df[GI(t)] = R(ga * R(sigm(-R(fg[GI(t)]))));
                dmc = ga;  // to m_{t−1} (m0 at t = 0 is a constant)
            }
        }
#undef GI
    free(Ct), free(nt), free(mt), free(fp), free(ip), free(sv), free(den), free(dC), free(dn), free(qh);
    free(dqh), free(dnum), free(fbr);
    return PHAX_OK;
}
