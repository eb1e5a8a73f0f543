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

#define R(x) phax_round(pr, (x))
#define RM(x) phax_round_mm(pr, (x))

static double logsig(double z) { return fmin(z, 0.0) - log1p(exp(-fabs(z))); }
static double sigm(double z) { return z >= 0 ? 1 / (1 + exp(-z)) : exp(z) / (1 + exp(z)); }

int phax_naive_mlstm(const phax_precision *pr, double *h, double *dq, double *dk, double *dv, double *di,
                     double *df, const double *gh, const double *q, const double *k, const double *v,
                     const double *ig, const double *fg, int B, int T, int H, int dqk, int dvh, double eps) {
    size_t nqk = (size_t)B * T * H * dqk, nv = (size_t)B * T * H * dvh, ng = (size_t)B * T * H;
    double *D = malloc((size_t)T * sizeof *D), *E = malloc((size_t)T * sizeof *E), *g = malloc((size_t)T * sizeof *g);
    double *dD = malloc((size_t)T * sizeof *dD), *qh = malloc((size_t)dqk * sizeof *qh),
           *dqh = malloc((size_t)dqk * sizeof *dqh);
    if (!D || !E || !g || !dD || !qh || !dqh) {
        free(D), free(E), free(g), free(dD), free(qh), free(dqh);
        return phax_fail("check: out of memory (mlstm baseline)");
    }
    memset(dq, 0, nqk * sizeof *dq), memset(dk, 0, nqk * sizeof *dk), memset(dv, 0, nv * sizeof *dv);
    memset(di, 0, ng * sizeof *di), memset(df, 0, ng * sizeof *df);
    double sc = R(1.0 / R(sqrt((double)dqk)));
#define GI(t) (((size_t)b * T + (t)) * H + hh)
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < H; hh++)
            for (int t = 0; t < T; t++) {
                // D̃_ts = Σ_{r=s+1..t} logσ(f̃_r) + ĩ_s, summed from r = t down; m = max_s D̃_ts.
                double F = 0, m = -INFINITY;
                int arg = 0;
                for (int s = t; s >= 0; s--) {
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
                    dm = R(dm - dD[s]);
                    for (int i = 0; i < dqk; i++) {
                        dqh[i] = R(dqh[i] + R(RM(dg) * RM(R(k[GI(s) * dqk + i]))));
                        dk[GI(s) * dqk + i] = R(dk[GI(s) * dqk + i] + R(RM(dg) * RM(qh[i])));
                    }
                }
                dD[arg] = R(dD[arg] + dm);
                for (int i = 0; i < dqk; i++) dq[GI(t) * dqk + i] = R(dq[GI(t) * dqk + i] + R(dqh[i] * sc));
                // D̃_ts = ĩ_s + Σ_{s<r≤t} logσ(f̃_r): ĩ_s takes dD_s, f̃_r takes Σ_{s<r} dD_s·σ(−f̃_r).
                double acc = 0;
                for (int s = 0; s <= t; s++) {
                    di[GI(s)] = R(di[GI(s)] + dD[s]);
                    if (s > 0) df[GI(s)] = R(df[GI(s)] + R(acc * R(sigm(-R(fg[GI(s)])))));
                    acc = R(acc + dD[s]);
                }
            }
#undef GI
    free(D), free(E), free(g), free(dD), free(qh), free(dqh);
    return PHAX_OK;
}
