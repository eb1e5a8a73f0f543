// ref mLSTM cell (xLSTM, stabilised): recurrent and parallel (quadratic) forms,
// float64, plain loops. Math: docs/spec.md §2.9 (tie rules too); sources §2.4 of
// research/spec-sources.md. Backwards are full reverse mode, including the
// stabiliser m and the max(|·|, e^{−m}) branch of the normaliser, so they are
// exact derivatives of the forwards as written (eps included).
//
// Layouts (per the header): q, k: (B, T, H, dqk); v, h: (B, T, H, dv);
// igate, fgate: (B, T, H). Each (b, h) pair is an independent sequence.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "phax/ref.h"

// Stable logσ(z) = min(z, 0) − log1p(e^{−|z|}): no overflow for large |z|.
static double lsig(double z) { return fmin(z, 0.0) - log1p(exp(-fabs(z))); }

// Stable σ(z): only ever exponentiates a non-positive number.
static double sig(double z) {
    if (z >= 0) return 1.0 / (1.0 + exp(-z));
    double e = exp(z);
    return e / (1.0 + e);
}

// Offsets into the (B, T, H, ·) layouts.
static size_t ix_g(int b, int t, int hh, int T, int H) {  // igate/fgate: (B, T, H)
    return ((size_t)b * T + t) * H + hh;
}
static size_t ix_v(int b, int t, int hh, int T, int H, int d) {  // (B, T, H, d)
    return ix_g(b, t, hh, T, H) * (size_t)d;
}

// Scratch for the oracle. On an allocation failure the functions return
// PHAX_ERR (message from phax_fail) and also make their outputs NaN, so a
// caller that ignores the code cannot mistake them for results.
static double *scratch(size_t n) {
    double *p = calloc(n ? n : 1, sizeof(double));
    if (!p) phax_fail("ref_mlstm: out of memory (%zu doubles)", n);
    return p;
}
static void nan_fill(double *x, size_t n) {
    if (x)
        for (size_t i = 0; i < n; i++) x[i] = NAN;
}

// ============================================================================
// Recurrent form
// ============================================================================

// Per-sequence record of the recurrence, kept so the backward can walk it in
// reverse. C: (T+1, dqk, dv) and n: (T+1, dqk) hold the states after each step
// (index 0 = the zero initial state); the rest are (T) per-step scalars.
typedef struct {
    double *C, *n;
    double *m;      // (T+1): m[0] = m0, m[t+1] = m after step t
    double *a;      // φ_t + m_{t−1}, the forget branch of the max
    double *fp, *ip;  // f'_t, i'_t
    double *s;      // n_tᵀ q̂_t
    double *den;    // max(|s|, e^{−m_t}) + eps
} rec_tape;

static int tape_alloc(rec_tape *w, int T, int dqk, int dv) {
    size_t T1 = (size_t)T + 1;
    w->C = scratch(T1 * dqk * dv);
    w->n = scratch(T1 * dqk);
    w->m = scratch(T1);
    w->a = scratch(T1);
    w->fp = scratch(T1);
    w->ip = scratch(T1);
    w->s = scratch(T1);
    w->den = scratch(T1);
    return w->C && w->n && w->m && w->a && w->fp && w->ip && w->s && w->den ? 0 : -1;
}

static void tape_free(rec_tape *w) {
    free(w->C), free(w->n), free(w->m), free(w->a);
    free(w->fp), free(w->ip), free(w->s), free(w->den);
}

// Runs the recurrence for one (b, hh) sequence, records it in w, and writes h
// (if non-NULL) for that sequence. q̂ = q/√dqk is formed on the fly.
static void rec_run(rec_tape *w, double *h, const double *q, const double *k, const double *v,
                    const double *igate, const double *fgate, int b, int hh, int T, int H,
                    int dqk, int dv, double eps, double m0) {
    const double sc = 1.0 / sqrt((double)dqk);
    const size_t CS = (size_t)dqk * dv;
    // Zero initial state; m starts at m0 (the output does not depend on it at eps = 0).
    memset(w->C, 0, CS * sizeof(double));
    memset(w->n, 0, (size_t)dqk * sizeof(double));
    w->m[0] = m0;
    for (int t = 0; t < T; t++) {
        size_t g = ix_g(b, t, hh, T, H);
        const double *qt = q + ix_v(b, t, hh, T, H, dqk), *kt = k + ix_v(b, t, hh, T, H, dqk);
        const double *vt = v + ix_v(b, t, hh, T, H, dv);
        const double *Cp = w->C + (size_t)t * CS, *np = w->n + (size_t)t * dqk;
        double *Ct = w->C + (size_t)(t + 1) * CS, *nt = w->n + (size_t)(t + 1) * dqk;
        // Stabiliser: m_t = max(φ_t + m_{t−1}, ĩ_t) keeps f', i' ≤ 1.
        double a = lsig(fgate[g]) + w->m[t];
        double mt = fmax(a, igate[g]);
        double fp = exp(a - mt), ip = exp(igate[g] - mt);
        // C_t = f' C_{t−1} + i' k vᵀ;  n_t = f' n_{t−1} + i' k.
        for (int i = 0; i < dqk; i++) {
            for (int j = 0; j < dv; j++)
                Ct[(size_t)i * dv + j] = fp * Cp[(size_t)i * dv + j] + ip * kt[i] * vt[j];
            nt[i] = fp * np[i] + ip * kt[i];
        }
        // Normaliser: s = n_tᵀ q̂; den = max(|s|, e^{−m_t}) + eps.
        double s = 0;
        for (int i = 0; i < dqk; i++) s += nt[i] * (qt[i] * sc);
        double den = fmax(fabs(s), exp(-mt)) + eps;
        w->m[t + 1] = mt, w->a[t + 1] = a, w->fp[t + 1] = fp, w->ip[t + 1] = ip;
        w->s[t + 1] = s, w->den[t + 1] = den;
        if (h) {
            // h_t = C_tᵀ q̂ / den.
            double *ht = h + ix_v(b, t, hh, T, H, dv);
            for (int j = 0; j < dv; j++) {
                double num = 0;
                for (int i = 0; i < dqk; i++) num += Ct[(size_t)i * dv + j] * (qt[i] * sc);
                ht[j] = num / den;
            }
        }
    }
}

// h: (B, T, H, dv); q, k: (B, T, H, dqk); v: (B, T, H, dv); igate, fgate: (B, T, H)
int ref_mlstm_recurrent_fwd(double *h, const double *q, const double *k, const double *v,
                             const double *igate, const double *fgate, int B, int T, int H,
                             int dqk, int dv, double eps, double m0) {
    rec_tape w;
    if (tape_alloc(&w, T, dqk, dv)) {
        nan_fill(h, (size_t)B * T * H * dv);
        tape_free(&w);
        return PHAX_ERR;
    }
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < H; hh++)
            rec_run(&w, h, q, k, v, igate, fgate, b, hh, T, H, dqk, dv, eps, m0);
    tape_free(&w);
    return PHAX_OK;
}

// dq, dk: (B, T, H, dqk); dv_: (B, T, H, dv); digate, dfgate: (B, T, H); dh: (B, T, H, dv).
// All gradients are ADDED; any may be NULL. Re-runs the forward per sequence to
// record the states, then walks the recurrence backwards.
int ref_mlstm_recurrent_bwd(double *dq, double *dk, double *dv_, double *digate, double *dfgate,
                             const double *dh, const double *q, const double *k, const double *v,
                             const double *igate, const double *fgate, int B, int T, int H,
                             int dqk, int dv, double eps, double m0) {
    const double sc = 1.0 / sqrt((double)dqk);
    const size_t CS = (size_t)dqk * dv;
    rec_tape w;
    int rc = PHAX_OK;
    // Adjoints carried backwards through time: dC (dqk, dv), dn (dqk), and
    // per-step work vectors dnum (dv), dqh (dqk).
    double *dC = scratch(CS), *dn = scratch(dqk), *dnum = scratch(dv), *dqh = scratch(dqk);
    double *hbuf = scratch(dv);
    if (tape_alloc(&w, T, dqk, dv) || !dC || !dn || !dnum || !dqh || !hbuf) {
        size_t nk = (size_t)B * T * H * dqk, nv = (size_t)B * T * H * dv, ng = (size_t)B * T * H;
        nan_fill(dq, nk), nan_fill(dk, nk), nan_fill(dv_, nv);
        nan_fill(digate, ng), nan_fill(dfgate, ng);
        rc = PHAX_ERR;
        goto out;
    }
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < H; hh++) {
            rec_run(&w, NULL, q, k, v, igate, fgate, b, hh, T, H, dqk, dv, eps, m0);
            memset(dC, 0, CS * sizeof(double));
            memset(dn, 0, (size_t)dqk * sizeof(double));
            double dm_carry = 0;  // dL/dm_{t} arriving from step t+1 through a_{t+1}
            for (int t = T - 1; t >= 0; t--) {
                size_t g = ix_g(b, t, hh, T, H);
                const double *qt = q + ix_v(b, t, hh, T, H, dqk);
                const double *kt = k + ix_v(b, t, hh, T, H, dqk);
                const double *vt = v + ix_v(b, t, hh, T, H, dv);
                const double *dht = dh + ix_v(b, t, hh, T, H, dv);
                const double *Cp = w.C + (size_t)t * CS, *np = w.n + (size_t)t * dqk;
                const double *Ct = w.C + (size_t)(t + 1) * CS, *nt = w.n + (size_t)(t + 1) * dqk;
                double mt = w.m[t + 1], a = w.a[t + 1], fp = w.fp[t + 1], ip = w.ip[t + 1];
                double s = w.s[t + 1], den = w.den[t + 1];
                double dm = dm_carry;

                // --- output h = num / den, num = C_tᵀ q̂ ---
                double hdot = 0;  // dh · h
                for (int j = 0; j < dv; j++) {
                    double num = 0;
                    for (int i = 0; i < dqk; i++) num += Ct[(size_t)i * dv + j] * (qt[i] * sc);
                    hbuf[j] = num / den;
                    hdot += dht[j] * hbuf[j];
                    dnum[j] = dht[j] / den;
                }
                double dden = -hdot / den;
                // den = max(|s|, e^{−m}) + eps: the gradient goes to the branch taken
                // (|s| on a tie, as the forward's fmax returns either value).
                double ds = 0, em = exp(-mt);
                if (fabs(s) >= em)
                    ds = s > 0 ? dden : (s < 0 ? -dden : 0.0);
                else
                    dm += -dden * em;
                // dC_t += q̂ dnumᵀ; dq̂ = C_t dnum + ds n_t; dn_t += ds q̂.
                for (int i = 0; i < dqk; i++) {
                    double qh = qt[i] * sc, acc = ds * nt[i];
                    for (int j = 0; j < dv; j++) {
                        dC[(size_t)i * dv + j] += qh * dnum[j];
                        acc += Ct[(size_t)i * dv + j] * dnum[j];
                    }
                    dqh[i] = acc;
                    dn[i] += ds * qh;
                }
                if (dq)
                    for (int i = 0; i < dqk; i++) dq[ix_v(b, t, hh, T, H, dqk) + i] += dqh[i] * sc;

                // --- state update C_t = f' C_{t−1} + i' k vᵀ, n_t = f' n_{t−1} + i' k ---
                double dfp = 0, dip = 0;
                for (int i = 0; i < dqk; i++) {
                    double dCv = 0;  // (dC_t v)_i
                    for (int j = 0; j < dv; j++) {
                        dfp += dC[(size_t)i * dv + j] * Cp[(size_t)i * dv + j];
                        dCv += dC[(size_t)i * dv + j] * vt[j];
                    }
                    dfp += dn[i] * np[i];
                    dip += kt[i] * dCv + dn[i] * kt[i];
                    if (dk) dk[ix_v(b, t, hh, T, H, dqk) + i] += ip * (dCv + dn[i]);
                }
                if (dv_)
                    for (int j = 0; j < dv; j++) {
                        double acc = 0;  // (dC_tᵀ k)_j
                        for (int i = 0; i < dqk; i++) acc += dC[(size_t)i * dv + j] * kt[i];
                        dv_[ix_v(b, t, hh, T, H, dv) + j] += ip * acc;
                    }
                // Carry to step t−1: the state enters C_t scaled by f'.
                for (size_t e = 0; e < CS; e++) dC[e] *= fp;
                for (int i = 0; i < dqk; i++) dn[i] *= fp;

                // --- gates f' = e^{a − m}, i' = e^{ĩ − m}, m = max(a, ĩ) ---
                double da = dfp * fp, di = dip * ip;
                dm -= dfp * fp + dip * ip;
                if (a >= igate[g])  // the forward's fmax picks a on a tie
                    da += dm;
                else
                    di += dm;
                if (digate) digate[g] += di;
                // a = φ(f̃) + m_{t−1}: da flows to m_{t−1} and to f̃ via φ' = σ(−f̃).
                if (dfgate) dfgate[g] += da * sig(-fgate[g]);
                dm_carry = da;
            }
        }
out:
    tape_free(&w);
    free(dC), free(dn), free(dnum), free(dqh), free(hbuf);
    return rc;
}

// ============================================================================
// Parallel (quadratic) form
// ============================================================================

// Row t of the log-gate matrix for one sequence: D̃_ts = F_ts + ĩ_s, s = 0..t,
// with F_ts = Σ_{r=s+1..t} logσ(f̃_r) accumulated backwards from F_tt = 0
// (not as cs_t − cs_s, which loses precision for long sequences). Returns
// m_t = max_s D̃_ts and its first argmax in *arg.
static double par_logrow(double *D, const double *igate, const double *fgate, int b, int hh,
                         int t, int T, int H, int *arg) {
    double F = 0;
    for (int s = t; s >= 0; s--) {
        D[s] = F + igate[ix_g(b, s, hh, T, H)];
        F += lsig(fgate[ix_g(b, s, hh, T, H)]);  // F_{t,s−1} = F_ts + logσ(f̃_s)
    }
    double m = D[0];
    *arg = 0;
    for (int s = 1; s <= t; s++)
        if (D[s] > m) m = D[s], *arg = s;
    return m;
}

// h: (B, T, H, dv); q, k: (B, T, H, dqk); v: (B, T, H, dv); igate, fgate: (B, T, H)
int ref_mlstm_parallel_fwd(double *h, const double *q, const double *k, const double *v,
                            const double *igate, const double *fgate, int B, int T, int H,
                            int dqk, int dv, double eps) {
    int rc = PHAX_OK;
    const double sc = 1.0 / sqrt((double)dqk);
    double *D = scratch((size_t)T), *Cb = scratch((size_t)T);  // D̃_t·, C̄_t·
    if (!D || !Cb) {
        nan_fill(h, (size_t)B * T * H * dv);
        rc = PHAX_ERR;
        goto out;
    }
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < H; hh++)
            for (int t = 0; t < T; t++) {
                int arg;
                double m = par_logrow(D, igate, fgate, b, hh, t, T, H, &arg);
                const double *qt = q + ix_v(b, t, hh, T, H, dqk);
                // C̄_s = (q̂_t·k_s) e^{D̃_ts − m_t}; S = Σ_s C̄_s.
                double S = 0;
                for (int s = 0; s <= t; s++) {
                    const double *ks = k + ix_v(b, s, hh, T, H, dqk);
                    double qk = 0;
                    for (int i = 0; i < dqk; i++) qk += (qt[i] * sc) * ks[i];
                    Cb[s] = qk * exp(D[s] - m);
                    S += Cb[s];
                }
                double den = fmax(fabs(S), exp(-m)) + eps;
                double *ht = h + ix_v(b, t, hh, T, H, dv);
                for (int j = 0; j < dv; j++) {
                    double acc = 0;
                    for (int s = 0; s <= t; s++) acc += Cb[s] * v[ix_v(b, s, hh, T, H, dv) + j];
                    ht[j] = acc / den;
                }
            }
out:
    free(D), free(Cb);
    return rc;
}

// Gradients as in the recurrent backward (ADDED; any may be NULL). Per query
// row t: back through h = Σ C̄_s v_s / den, den = max(|S|, e^{−m}) + eps,
// C̄_s = g_s E_s with g_s = q̂_t·k_s, E_s = e^{D̃_ts − m}, m = max_s D̃_ts
// (its gradient goes to the argmax), D̃_ts = F_ts + ĩ_s.
int ref_mlstm_parallel_bwd(double *dq, double *dk, double *dv_, double *digate, double *dfgate,
                            const double *dh, const double *q, const double *k, const double *v,
                            const double *igate, const double *fgate, int B, int T, int H,
                            int dqk, int dv, double eps) {
    return ref_mlstm_parallel_bwd_grad(dq, dk, dv_, digate, dfgate, dh, q, k, v, igate, fgate, B, T, H, dqk, dv, eps,
                                       PHAX_MLSTM_GRAD_EXACT);
}

int ref_mlstm_parallel_bwd_grad(double *dq, double *dk, double *dv_, double *digate, double *dfgate,
                                const double *dh, const double *q, const double *k, const double *v,
                                const double *igate, const double *fgate, int B, int T, int H, int dqk, int dv,
                                double eps, int grad) {
    // grad = PHAX_MLSTM_GRAD_STOPGRAD_NORMALIZER: the normaliser den and the stabiliser m are
    // constants (no dS, no dm): the gradient a hand-written backward that detaches them computes.
    const int stop = grad == PHAX_MLSTM_GRAD_STOPGRAD_NORMALIZER;
    int rc = PHAX_OK;
    const double sc = 1.0 / sqrt((double)dqk);
    double *D = scratch((size_t)T), *E = scratch((size_t)T), *G = scratch((size_t)T);
    double *dD = scratch((size_t)T), *num = scratch((size_t)dv), *dnum = scratch((size_t)dv);
    double *dphi = scratch((size_t)T);  // dL/dφ_r for one sequence (φ_r = logσ(f̃_r))
    if (!D || !E || !G || !dD || !num || !dnum || !dphi) {
        size_t nk = (size_t)B * T * H * dqk, nv = (size_t)B * T * H * dv, ng = (size_t)B * T * H;
        nan_fill(dq, nk), nan_fill(dk, nk), nan_fill(dv_, nv);
        nan_fill(digate, ng), nan_fill(dfgate, ng);
        rc = PHAX_ERR;
        goto out;
    }
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < H; hh++) {
            memset(dphi, 0, (size_t)T * sizeof(double));
            for (int t = 0; t < T; t++) {
                // --- recompute row t of the forward ---
                int arg;
                double m = par_logrow(D, igate, fgate, b, hh, t, T, H, &arg);
                const double *qt = q + ix_v(b, t, hh, T, H, dqk);
                const double *dht = dh + ix_v(b, t, hh, T, H, dv);
                double S = 0;
                for (int s = 0; s <= t; s++) {
                    const double *ks = k + ix_v(b, s, hh, T, H, dqk);
                    double qk = 0;
                    for (int i = 0; i < dqk; i++) qk += (qt[i] * sc) * ks[i];
                    G[s] = qk, E[s] = exp(D[s] - m);
                    S += qk * E[s];
                }
                double em = exp(-m), den = fmax(fabs(S), em) + eps;
                double hdot = 0;  // dh · h
                for (int j = 0; j < dv; j++) {
                    num[j] = 0;
                    for (int s = 0; s <= t; s++)
                        num[j] += G[s] * E[s] * v[ix_v(b, s, hh, T, H, dv) + j];
                    hdot += dht[j] * num[j] / den;
                    dnum[j] = dht[j] / den;
                }
                // --- den = max(|S|, e^{−m}) + eps: gradient to the branch taken ---
                double dden = -hdot / den, dS = 0, dm = 0;
                if (stop)
                    ;  // den and m held constant
                else if (fabs(S) >= em)
                    dS = S > 0 ? dden : (S < 0 ? -dden : 0.0);
                else
                    dm += -dden * em;
                // --- per key s: C̄_s feeds num (via v_s) and S ---
                for (int s = 0; s <= t; s++) {
                    const double *ks = k + ix_v(b, s, hh, T, H, dqk);
                    const double *vs = v + ix_v(b, s, hh, T, H, dv);
                    double dCb = dS;
                    for (int j = 0; j < dv; j++) dCb += dnum[j] * vs[j];
                    if (dv_)
                        for (int j = 0; j < dv; j++)
                            dv_[ix_v(b, s, hh, T, H, dv) + j] += G[s] * E[s] * dnum[j];
                    // C̄ = g E: dg = dC̄ E (to q̂_t and k_s); dE = dC̄ g.
                    double dg = dCb * E[s], dE = dCb * G[s];
                    for (int i = 0; i < dqk; i++) {
                        if (dq) dq[ix_v(b, t, hh, T, H, dqk) + i] += dg * ks[i] * sc;
                        if (dk) dk[ix_v(b, s, hh, T, H, dqk) + i] += dg * qt[i] * sc;
                    }
                    // E = e^{D̃ − m}: to D̃_ts and (negatively) to m.
                    dD[s] = dE * E[s];
                    if (!stop) dm -= dE * E[s];
                }
                // --- m = max_s D̃_ts: the argmax takes dm ---
                dD[arg] += dm;
                // --- D̃_ts = F_ts + ĩ_s with F_ts = Σ_{r=s+1..t} φ_r ---
                // dφ_r += Σ_{s<r} dD̃_ts for r = 1..t (running prefix sum).
                double P = 0;
                for (int s = 0; s <= t; s++) {
                    if (digate) digate[ix_g(b, s, hh, T, H)] += dD[s];
                    if (s < t) {
                        P += dD[s];
                        dphi[s + 1] += P;
                    }
                }
            }
            if (dfgate)
                for (int r = 0; r < T; r++)
                    dfgate[ix_g(b, r, hh, T, H)] += dphi[r] * sig(-fgate[ix_g(b, r, hh, T, H)]);
        }
out:
    free(D), free(E), free(G), free(dD), free(num), free(dnum), free(dphi);
    return rc;
}
