// ref mLSTM cell: hand-computed values, an unstabilised oracle, finite-difference
// gradients of both forms (incl. the stabiliser path at a large eps), recurrent
// vs parallel agreement, stabiliser independence, layout and NULL-gradient checks.
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "phax/ref.h"
#include "testutil.h"

static const double U = DBL_EPSILON;  // 2^-52

// ---------------------------------------------------------------------------
// A problem instance: inputs, output, upstream gradient and gradient buffers,
// all guarded tu_bufs. q, k: (B, T, H, dqk); v, h, dh: (B, T, H, dv);
// ig, fg: (B, T, H).
typedef struct {
    int B, T, H, dqk, dv;
    int par;        // 0: recurrent form, 1: parallel form
    double eps, m0; // m0 only for the recurrent form
    size_t nk, nv, ng;
    double *q, *k, *v, *ig, *fg, *h, *dh;
    double *dq, *dk, *dv_, *dig, *dfg;
} prob;

static prob prob_new(int B, int T, int H, int dqk, int dv) {
    prob p = {.B = B, .T = T, .H = H, .dqk = dqk, .dv = dv, .eps = PHAX_MLSTM_EPS};
    p.ng = (size_t)B * T * H, p.nk = p.ng * dqk, p.nv = p.ng * dv;
    p.q = tu_buf(p.nk), p.k = tu_buf(p.nk), p.v = tu_buf(p.nv);
    p.ig = tu_buf(p.ng), p.fg = tu_buf(p.ng);
    p.h = tu_buf(p.nv), p.dh = tu_buf(p.nv);
    p.dq = tu_buf(p.nk), p.dk = tu_buf(p.nk), p.dv_ = tu_buf(p.nv);
    p.dig = tu_buf(p.ng), p.dfg = tu_buf(p.ng);
    return p;
}

// q, k, v ~ N(0, 1); ĩ ~ N(i_mu, i_sd); f̃ ~ N(f_mu, f_sd); dh ~ N(0, 1).
static void prob_fill(prob *p, phax_rng *r, double i_mu, double i_sd, double f_mu, double f_sd) {
    tu_fill_normal(p->q, p->nk, r, 1.0);
    tu_fill_normal(p->k, p->nk, r, 1.0);
    tu_fill_normal(p->v, p->nv, r, 1.0);
    tu_fill_normal(p->ig, p->ng, r, i_sd);
    tu_fill_normal(p->fg, p->ng, r, f_sd);
    for (size_t i = 0; i < p->ng; i++) p->ig[i] += i_mu, p->fg[i] += f_mu;
    tu_fill_normal(p->dh, p->nv, r, 1.0);
}

static bool prob_intact(const prob *p) {
    const double *all[] = {p->q, p->k, p->v, p->ig, p->fg, p->h, p->dh,
                           p->dq, p->dk, p->dv_, p->dig, p->dfg};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (!tu_intact(all[i])) return false;
    return true;
}

static void prob_free(prob *p) {
    tu_free(p->q), tu_free(p->k), tu_free(p->v), tu_free(p->ig), tu_free(p->fg);
    tu_free(p->h), tu_free(p->dh);
    tu_free(p->dq), tu_free(p->dk), tu_free(p->dv_), tu_free(p->dig), tu_free(p->dfg);
}

// Forward of the chosen form into p->h (poisoned first, so a missed write is NaN).
static void prob_fwd(prob *p) {
    tu_poison(p->h, p->nv);
    if (p->par)
        ref_mlstm_parallel_fwd(p->h, p->q, p->k, p->v, p->ig, p->fg, p->B, p->T, p->H, p->dqk,
                               p->dv, p->eps);
    else
        ref_mlstm_recurrent_fwd(p->h, p->q, p->k, p->v, p->ig, p->fg, p->B, p->T, p->H, p->dqk,
                                p->dv, p->eps, p->m0);
}

// Backward of the chosen form, ADDING into the given buffers (any may be NULL).
static void prob_bwd_into(prob *p, double *dq, double *dk, double *dv_, double *dig, double *dfg) {
    if (p->par)
        ref_mlstm_parallel_bwd(dq, dk, dv_, dig, dfg, p->dh, p->q, p->k, p->v, p->ig, p->fg, p->B,
                               p->T, p->H, p->dqk, p->dv, p->eps);
    else
        ref_mlstm_recurrent_bwd(dq, dk, dv_, dig, dfg, p->dh, p->q, p->k, p->v, p->ig, p->fg,
                                p->B, p->T, p->H, p->dqk, p->dv, p->eps, p->m0);
}

// Zero the gradient buffers, then backward: the plain gradient.
static void prob_grads(prob *p) {
    tu_fill(p->dq, p->nk, 0), tu_fill(p->dk, p->nk, 0), tu_fill(p->dv_, p->nv, 0);
    tu_fill(p->dig, p->ng, 0), tu_fill(p->dfg, p->ng, 0);
    prob_bwd_into(p, p->dq, p->dk, p->dv_, p->dig, p->dfg);
}

// ---------------------------------------------------------------------------
// Unstabilised oracle, straight from the paper's definition (spec-sources §2.4.1)
// with eps = 0, written independently of ref/mlstm.c: per (b, head, t),
//   w_ts = exp(ĩ_s + Σ_{r=s+1..t} log σ(f̃_r)),  C_t = Σ_s w_ts k_s v_sᵀ,  n_t = Σ_s w_ts k_s,
//   h_t = C_tᵀ q̂ / max(|n_tᵀ q̂|, 1).
// Only for moderate gates (no overflow). Also reports, in *info (may be NULL):
//  * which branch of the normaliser each output takes: |nᵀq̂| ≥ 1 is the |s|
//    branch (stabilised: |s| ≥ e^{−m}), otherwise the e^{−m} branch;
//  * κ = max(1, max_t A_t / max(|n_tᵀq̂_t|, 1)) with A_t = Σ_s w_ts ‖q̂_t‖ ‖k_s‖:
//    how much larger the terms summed into h_t and its gradients can be than
//    the normaliser they are divided by. Rounding errors of either form scale
//    with it, and so do the derivatives of the normaliser relative to itself;
//  * margin = min_t ||n_tᵀq̂_t| − 1| / A_t: the relative distance of the
//    nearest output from the kink of max(|nᵀq̂|, 1).
typedef struct {
    int n_abs, n_exp;
    double kappa, margin;
} naive_info;

static void naive_fwd(double *h, naive_info *info, const prob *p) {
    int B = p->B, T = p->T, H = p->H, dqk = p->dqk, dv = p->dv;
    cr_assert(dv <= 64, "naive_fwd: dv %d > 64", dv);
    naive_info in = {0, 0, 1.0, INFINITY};
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < H; hh++)
            for (int t = 0; t < T; t++) {
                const double *qt = p->q + (((size_t)b * T + t) * H + hh) * dqk;
                double den = 0, num[64] = {0}, A = 0, nq = 0;
                for (int i = 0; i < dqk; i++) nq += qt[i] * qt[i];
                nq = sqrt(nq / dqk);  // ‖q̂_t‖
                for (int s = 0; s <= t; s++) {
                    double lw = p->ig[((size_t)b * T + s) * H + hh];
                    for (int r = s + 1; r <= t; r++)
                        lw += -log(1.0 + exp(-p->fg[((size_t)b * T + r) * H + hh]));
                    const double *ks = p->k + (((size_t)b * T + s) * H + hh) * dqk;
                    const double *vs = p->v + (((size_t)b * T + s) * H + hh) * dv;
                    double qk = 0, nk = 0;
                    for (int i = 0; i < dqk; i++) qk += qt[i] * ks[i], nk += ks[i] * ks[i];
                    qk /= sqrt((double)dqk);
                    den += exp(lw) * qk;
                    A += exp(lw) * nq * sqrt(nk);
                    for (int j = 0; j < dv; j++) num[j] += exp(lw) * qk * vs[j];
                }
                if (fabs(den) >= 1) in.n_abs++;
                else in.n_exp++;
                if (A > 0) in.margin = fmin(in.margin, fabs(fabs(den) - 1) / A);
                den = fmax(fabs(den), 1.0);
                in.kappa = fmax(in.kappa, A / den);
                for (int j = 0; j < dv; j++)
                    h[(((size_t)b * T + t) * H + hh) * dv + j] = num[j] / den;
            }
    if (info) *info = in;
}

// max|a − b| / max(max|a|, max|b|): the error relative to the tensor's scale.
// NaN anywhere gives NaN (so `err <= tol` fails); two all-zero tensors give 0.
static double scaled_err(const double *a, const double *b, size_t n) {
    double d = tu_max_abs_diff(a, b, n), sa = tu_max_abs(a, n), sb = tu_max_abs(b, n);
    if (isnan(d) || isnan(sa) || isnan(sb) || !isfinite(d)) return NAN;
    double s = fmax(sa, sb);
    return s > 0 ? d / s : d;
}

// ===========================================================================
// 1. Known values
// ===========================================================================

// Both forms and eps = 0 / default on the same tiny input; `want0` is the
// eps = 0 output and `wanteps` the eps = 1e-6 one (hand-derived below).
static void known_check(prob *p, const double *want0, const double *wanteps, const char *what) {
    for (int par = 0; par <= 1; par++)
        for (int e = 0; e <= 1; e++) {
            p->par = par, p->eps = e ? PHAX_MLSTM_EPS : 0.0;
            const double *want = e ? wanteps : want0;
            prob_fwd(p);
            // A few roundings of numbers of size ≤ 8 (exp/log each within an ulp).
            for (size_t i = 0; i < p->nv; i++) {
                double err = fabs(p->h[i] - want[i]);
                cr_assert(err <= 16 * U * fmax(1.0, fabs(want[i])),
                          "%s (%s, eps=%g): h[%zu] = %.17g, want %.17g", what,
                          par ? "parallel" : "recurrent", p->eps, i, p->h[i], want[i]);
            }
            cr_assert(prob_intact(p));
        }
}

Test(mlstm, known_T1) {
    prob p = prob_new(1, 1, 1, 1, 2);
    // dqk = 1, dv = 2: q = 2 (q̂ = 2), k = 0.25, v = (3, −1), f̃ = 0.
    // (a) ĩ = 0. Recurrent (m0 = 0): a = logσ(0) = −ln 2, m = max(−ln 2, 0) = 0,
    //     i' = 1; C = k vᵀ = (0.75, −0.25), n = 0.25; s = q̂ n = 0.5 < e^{−m} = 1, so
    //     the e^{−m} branch: h = q̂ C / 1 = (1.5, −0.5). Parallel: D̃ = ĩ = 0 = m,
    //     C̄ = q̂k = 0.5, S = 0.5 < 1, h = 0.5 v — the same. With eps: h/(1 + eps).
    p.q[0] = 2, p.k[0] = 0.25, p.v[0] = 3, p.v[1] = -1, p.fg[0] = 0, p.ig[0] = 0;
    double wa0[] = {1.5, -0.5}, wae[] = {1.5 / (1 + PHAX_MLSTM_EPS), -0.5 / (1 + PHAX_MLSTM_EPS)};
    known_check(&p, wa0, wae, "T1 exp branch");
    // (b) ĩ = ln 4. Unstabilised: i = 4, C = v, n = 1, nᵀq̂ = 2 ≥ 1: h = 2v/2 = v.
    //     Stabilised: m = ln 4 (both forms), i' = 1, C = (0.75, −0.25), s = 0.5 ≥ e^{−m}
    //     = 0.25: the |s| branch, h = (1.5, −0.5)/0.5 = (3, −1); with eps: /(0.5 + eps).
    p.ig[0] = log(4.0);
    double wb0[] = {3, -1}, wbe[] = {1.5 / (0.5 + PHAX_MLSTM_EPS), -0.5 / (0.5 + PHAX_MLSTM_EPS)};
    known_check(&p, wb0, wbe, "T1 |s| branch");
    // (c) Same with m0 = 3 (recurrent only, eps = 0): now a = 3 − ln 2 > ln 4 wins
    //     the max, i' = 8e^{−3}, yet the output is still v.
    p.par = 0, p.eps = 0, p.m0 = 3;
    prob_fwd(&p);
    cr_assert(fabs(p.h[0] - 3) <= 16 * U * 3 && fabs(p.h[1] + 1) <= 16 * U, "m0=3: h = (%.17g, %.17g)",
              p.h[0], p.h[1]);
    prob_free(&p);

    // (d) dqk = 4 checks the 1/√dqk scale: q = (2, 2, 0, 0) → q̂ = (1, 1, 0, 0);
    //     k = (0.5, 0.25, 7, −3): q̂·k = 0.75 < 1 (ĩ = 0): h = 0.75 v = (2.25, −0.75).
    prob p4 = prob_new(1, 1, 1, 4, 2);
    double q4[] = {2, 2, 0, 0}, k4[] = {0.5, 0.25, 7, -3};
    memcpy(p4.q, q4, sizeof q4), memcpy(p4.k, k4, sizeof k4);
    p4.v[0] = 3, p4.v[1] = -1, p4.fg[0] = 0, p4.ig[0] = 0;
    double wd0[] = {2.25, -0.75}, wde[] = {2.25 / (1 + PHAX_MLSTM_EPS), -0.75 / (1 + PHAX_MLSTM_EPS)};
    known_check(&p4, wd0, wde, "T1 dqk=4");
    prob_free(&p4);
}

Test(mlstm, known_T2) {
    // dqk = dv = 1; q = (1, 0.5), k = (1, −1), v = (2, 8), ĩ = (ln 2, −ln 4),
    // f̃ = (0, ln 3) so σ(f̃_1) = 3/4 (f̃_0 never matters at eps = 0; ln 3 rather
    // than 0 so that logσ(f̃) vs logσ(−f̃) is told apart).
    // Unstabilised: t=0: C = 2·1·2 = 4, n = 2, nᵀq̂ = 2 ≥ 1 → h = 4/2 = 2 (|s| branch).
    //   t=1: C = ¾·4 + ¼·(−1)·8 = 1, n = ¾·2 − ¼ = 1.25, nᵀq̂ = 0.625 < 1 → h = 0.5·1 = 0.5
    //   (e^{−m} branch).
    // Recurrent stabilised (m0 = 0): t=0: a = −ln 2, m = ln 2, i' = 1, C = 2, n = 1,
    //   s = 1 ≥ e^{−m} = ½, den = 1 (+eps). t=1: a = ln ¾ + ln 2 = ln 1.5 = m, f' = 1,
    //   i' = e^{−ln 4 − ln 1.5} = 1/6; C = 2 − 8/6 = 2/3, n = 5/6, s = 5/12 < e^{−m} = 2/3,
    //   den = 2/3 (+eps), num = 1/3, h = 0.5.
    // Parallel t=1: D̃ = (ln 1.5, −ln 4), m = ln 1.5, E = (1, 1/6), q̂·k = (0.5, −0.5),
    //   C̄ = (0.5, −1/12), S = 5/12 < 2/3, num = 1 − 2/3 = 1/3: the same numbers, so both
    //   forms give h = (2/(1 + eps), (1/3)/(2/3 + eps)).
    prob p = prob_new(1, 2, 1, 1, 1);
    double qv[] = {1, 0.5}, kv[] = {1, -1}, vv[] = {2, 8}, iv[] = {log(2.0), -log(4.0)},
           fv[] = {0, log(3.0)};
    memcpy(p.q, qv, sizeof qv), memcpy(p.k, kv, sizeof kv), memcpy(p.v, vv, sizeof vv);
    memcpy(p.ig, iv, sizeof iv), memcpy(p.fg, fv, sizeof fv);
    double w0[] = {2, 0.5}, we[] = {2 / (1 + PHAX_MLSTM_EPS), (1.0 / 3) / (2.0 / 3 + PHAX_MLSTM_EPS)};
    known_check(&p, w0, we, "T2");
    prob_free(&p);
}

// Both forms (eps = 0) against the unstabilised definition on random inputs.
Test(mlstm, fwd_unstabilised_oracle) {
    phax_rng r = tu_rng("mlstm/fwd_unstabilised_oracle");
    prob p = prob_new(2, 9, 2, 3, 5);
    double *want = tu_buf(p.nv);
    for (int gates = 0; gates < 2; gates++) {
        if (gates == 0) prob_fill(&p, &r, 0, 2, 3, 1.5);
        else prob_fill(&p, &r, 0, 2, -1, 2);
        naive_info in;
        naive_fwd(want, &in, &p);
        p.eps = 0;
        for (int par = 0; par <= 1; par++) {
            p.par = par;
            prob_fwd(&p);
            // Sums of ≤ T terms, each a product of ≤ T + dqk + 2 roundings, divided
            // once; 1e-13 of the scale leaves room for cancellation in Σ.
            double err = scaled_err(p.h, want, p.nv);
            printf("[mlstm/fwd_unstabilised_oracle] gates %d %s: err %.3e (|s| %d, e^-m %d)\n",
                   gates, par ? "parallel" : "recurrent", err, in.n_abs, in.n_exp);
            cr_assert(err <= 1e-13, "gates %d par %d: err %g", gates, par, err);
        }
    }
    cr_assert(tu_intact(want) && prob_intact(&p));
    tu_free(want);
    prob_free(&p);
}

// ===========================================================================
// 2. Finite-difference gradients
// ===========================================================================

static double gc_loss(void *ctx) {
    prob *p = ctx;
    prob_fwd(p);
    return tu_dot(p->h, p->dh, p->nv);
}

static double gc_mag(void *ctx) {
    prob *p = ctx;
    prob_fwd(p);
    double s = 0;
    for (size_t i = 0; i < p->nv; i++) s += fabs(p->h[i] * p->dh[i]);
    return s;
}

static void gc_bwd(void *ctx) {
    prob *p = ctx;
    prob_bwd_into(p, p->dq, p->dk, p->dv_, p->dig, p->dfg);
}

typedef struct {
    int B, T, H, dqk, dv;
    double i_mu, i_sd, f_mu, f_sd;
    double eps, m0;
    int need_branches;  // 1: assert both normaliser branches occur in this case
} gcase;

static double max_abs_input(const prob *p) {
    double x = 1.0;
    x = fmax(x, tu_max_abs(p->q, p->nk)), x = fmax(x, tu_max_abs(p->k, p->nk));
    x = fmax(x, tu_max_abs(p->v, p->nv)), x = fmax(x, tu_max_abs(p->ig, p->ng));
    return fmax(x, tu_max_abs(p->fg, p->ng));
}

// A central difference with step δ = h·max(1, |x|) is only as good as the
// function is smooth over ±δ. Random inputs occasionally make the mLSTM output
// ill-conditioned — |nᵀq̂| a small difference of large terms (κ large), so its
// relative curvature is ~κ² and the O(δ²) truncation error exceeds the 1e-6
// tolerance, or an output within δ of the kink of max(|nᵀq̂|, 1). That is the
// input, not the backward (such cases converge to the analytic gradient as h
// shrinks; seen e.g. at κ ≈ 1e2..1e5). So the FD checks redraw (from the same
// seeded stream) until κ·X·h ≤ 1e-3, X = max(1, max|input|), making the
// truncation error (κXh)² ≤ 1e-6 relative, and every output is ≥ 100 steps
// from the kink. The cross-form and oracle tests keep the unfiltered draws.
static bool fd_friendly(const prob *p, const naive_info *in, double h) {
    double X = max_abs_input(p);
    return in->kappa * X * h <= 1e-3 && in->margin >= 100 * h * X;
}

static void grad_case(const char *label, int par, gcase c) {
    phax_rng r = tu_rng(label);
    prob p = prob_new(c.B, c.T, c.H, c.dqk, c.dv);
    p.par = par, p.eps = c.eps, p.m0 = c.m0;
    tu_gc_opts o = tu_gc_default();
    double *tmp = tu_buf(p.nv);
    naive_info in;
    int tries = 0;
    do {
        cr_assert(tries++ < 1000, "no FD-friendly draw in 1000 tries");
        prob_fill(&p, &r, c.i_mu, c.i_sd, c.f_mu, c.f_sd);
        naive_fwd(tmp, &in, &p);
    } while (!fd_friendly(&p, &in, o.h));
    // Which branch of max(|s|, e^{−m}) the outputs take (from the unstabilised
    // oracle: |nᵀq̂| ≥ 1 ⇔ |s| ≥ e^{−m}).
    printf("[%s] draw %d: kappa %.3g, margin %.3g; normaliser branches: |s| %d, e^-m %d\n",
           label, tries, in.kappa, in.margin, in.n_abs, in.n_exp);
    if (c.need_branches)
        cr_assert(in.n_abs > 0 && in.n_exp > 0, "branches |s| %d e^-m %d", in.n_abs, in.n_exp);
    tu_tensor ts[] = {{"q", p.q, p.dq, p.nk},
                      {"k", p.k, p.dk, p.nk},
                      {"v", p.v, p.dv_, p.nv},
                      {"igate", p.ig, p.dig, p.ng},
                      {"fgate", p.fg, p.dfg, p.ng}};
    tu_op op = {gc_loss, gc_bwd, gc_mag, &p};
    cr_assert(tu_gradcheck(label, op, ts, 5, &r, &o));
    cr_assert(prob_intact(&p) && tu_intact(tmp));
    tu_free(tmp);
    prob_free(&p);
}

// Default gates: ĩ ~ N(0, 2), f̃ ~ N(3, 1.5) (σ(f̃) mostly near 0.95, as the init).
#define G_DEFAULT 0, 2, 3, 1.5
// Small f̃ (σ(f̃) ~ 0.3): short memory, so |nᵀq̂| < 1 is common and both
// branches of the normaliser occur (asserted).
#define G_SMALLF 0, 2, -1, 2

// Odd T, dqk ≠ dv, neither a power of two, B = H = 2.
Test(mlstm, grad_recurrent_T7) {
    grad_case("mlstm/grad_recurrent_T7", 0,
              (gcase){2, 7, 2, 3, 5, G_DEFAULT, PHAX_MLSTM_EPS, 0, 0});
}
Test(mlstm, grad_parallel_T7) {
    grad_case("mlstm/grad_parallel_T7", 1, (gcase){2, 7, 2, 3, 5, G_DEFAULT, PHAX_MLSTM_EPS, 0, 0});
}
// Longer, dqk > dv.
Test(mlstm, grad_recurrent_T13) {
    grad_case("mlstm/grad_recurrent_T13", 0,
              (gcase){2, 13, 2, 5, 3, G_DEFAULT, PHAX_MLSTM_EPS, 0, 0});
}
Test(mlstm, grad_parallel_T13) {
    grad_case("mlstm/grad_parallel_T13", 1,
              (gcase){2, 13, 2, 5, 3, G_DEFAULT, PHAX_MLSTM_EPS, 0, 0});
}
// A single step.
Test(mlstm, grad_recurrent_T1) {
    grad_case("mlstm/grad_recurrent_T1", 0, (gcase){2, 1, 2, 3, 5, G_DEFAULT, PHAX_MLSTM_EPS, 0, 0});
}
Test(mlstm, grad_parallel_T1) {
    grad_case("mlstm/grad_parallel_T1", 1, (gcase){2, 1, 2, 3, 5, G_DEFAULT, PHAX_MLSTM_EPS, 0, 0});
}
// Small f̃: both normaliser branches occur (asserted), so the e^{−m} branch's
// gradient (to m, hence to the gates) is checked.
Test(mlstm, grad_recurrent_smallf) {
    grad_case("mlstm/grad_recurrent_smallf", 0,
              (gcase){2, 13, 2, 3, 5, G_SMALLF, PHAX_MLSTM_EPS, 0, 1});
}
Test(mlstm, grad_parallel_smallf) {
    grad_case("mlstm/grad_parallel_smallf", 1,
              (gcase){2, 13, 2, 3, 5, G_SMALLF, PHAX_MLSTM_EPS, 0, 1});
}
// A large eps makes the output depend on m at O(1) (h = num/(nrm + eps e^{m})
// in unstabilised terms), so the stabiliser path of the backward — e^{−m} and
// max(a, ĩ) — is checked at full weight. At eps = 0 the total gradient reaching
// each m_t is exactly zero (h does not depend on the stabiliser), so where the
// max routes it (a vs ĩ, or which argmax) cannot be seen by the eps = 0
// cross-form test and only at the eps·e^{m} level (≲ 1e-3 relative) in the
// default-eps checks. Recurrent also with m0 ≠ 0.
Test(mlstm, grad_recurrent_big_eps) {
    grad_case("mlstm/grad_recurrent_big_eps", 0, (gcase){2, 13, 2, 3, 5, G_SMALLF, 0.3, 0.7, 1});
}
Test(mlstm, grad_parallel_big_eps) {
    grad_case("mlstm/grad_parallel_big_eps", 1, (gcase){2, 13, 2, 3, 5, G_SMALLF, 0.3, 0, 1});
}
// Gates over the whole range the layer's cap(z) = 15 tanh(z/15) allows:
// exp of ±15-sized logits, where only the stabilised forms stay finite.
Test(mlstm, grad_recurrent_capped_gates) {
    grad_case("mlstm/grad_recurrent_capped_gates", 0,
              (gcase){2, 7, 2, 3, 5, 0, 7, 0, 7, PHAX_MLSTM_EPS, 0, 0});
}
Test(mlstm, grad_parallel_capped_gates) {
    grad_case("mlstm/grad_parallel_capped_gates", 1,
              (gcase){2, 7, 2, 3, 5, 0, 7, 0, 7, PHAX_MLSTM_EPS, 0, 0});
}

// ===========================================================================
// 3. Recurrent vs parallel
// ===========================================================================

// Runs both forms on one input (same dh) and returns, per tensor (h, dq, dk,
// dv, dĩ, df̃), the error relative to the tensor's scale (scaled_err).
static void cross_errs(double err[6], prob *p) {
    prob rec = *p, par = *p;  // shares the inputs; separate outputs below
    rec.par = 0, par.par = 1;
    par.h = tu_buf(p->nv), par.dq = tu_buf(p->nk), par.dk = tu_buf(p->nk);
    par.dv_ = tu_buf(p->nv), par.dig = tu_buf(p->ng), par.dfg = tu_buf(p->ng);
    prob_fwd(&rec), prob_grads(&rec);
    prob_fwd(&par), prob_grads(&par);
    err[0] = scaled_err(rec.h, par.h, p->nv);
    err[1] = scaled_err(rec.dq, par.dq, p->nk);
    err[2] = scaled_err(rec.dk, par.dk, p->nk);
    err[3] = scaled_err(rec.dv_, par.dv_, p->nv);
    err[4] = scaled_err(rec.dig, par.dig, p->ng);
    err[5] = scaled_err(rec.dfg, par.dfg, p->ng);
    cr_assert(prob_intact(&rec) && prob_intact(&par));
    tu_free(par.h), tu_free(par.dq), tu_free(par.dk), tu_free(par.dv_), tu_free(par.dig);
    tu_free(par.dfg);
}

static const char *CROSS_NAMES[6] = {"h", "dq", "dk", "dv", "digate", "dfgate"};

// Rounding tolerance (relative to a tensor's scale) for two computations of the
// same function in float64 that group the sums differently (recurrent vs
// parallel, or two stabilisers m0): every element of h and of the gradients is
// a sum of ≤ T terms, each a chain of ≤ n = T + dqk + dv roundings, so each
// form is within ~n·u·κ of the exact value, κ (naive_fwd) being the cancellation
// factor; 64 covers the constant from products of such sums in the backward.
// Observed over 1500 seeds: ≤ 0.12 of this tolerance (κ from 1 to ~6e3).
static double round_tol(const prob *p) {
    double *tmp = tu_buf(p->nv);
    naive_info in;
    naive_fwd(tmp, &in, p);
    tu_free(tmp);
    return 64.0 * (p->T + p->dqk + p->dv) * U * in.kappa;
}

// Three gate regimes: default, small f̃ (both normaliser branches common), and
// N(0, 7) gates reaching the ±15 of the layer's cap (large dynamic range).
static void fill_regime(prob *p, phax_rng *r, int regime) {
    if (regime == 0) prob_fill(p, r, G_DEFAULT);
    else if (regime == 1) prob_fill(p, r, G_SMALLF);
    else prob_fill(p, r, 0, 7, 0, 7);
}

// eps = 0: the forms compute the same function; only rounding differs.
Test(mlstm, cross_form_eps0) {
    phax_rng r = tu_rng("mlstm/cross_form_eps0");
    for (int regime = 0; regime < 3; regime++) {
        prob p = prob_new(2, 13, 2, 3, 5);
        fill_regime(&p, &r, regime);
        p.eps = 0;
        double err[6], tol = round_tol(&p);
        cross_errs(err, &p);
        for (int i = 0; i < 6; i++) {
            printf("[mlstm/cross_form_eps0] regime %d %-6s err %.3e (tol %.3e)\n", regime,
                   CROSS_NAMES[i], err[i], tol);
            cr_assert(err[i] <= tol, "regime %d %s: err %g > tol %g", regime, CROSS_NAMES[i],
                      err[i], tol);
        }
        prob_free(&p);
    }
}

// eps = 1e-6: the forms differ by more than rounding because eps is added after
// the e^{−m} scaling: in unstabilised terms h = num/(nrm + eps·e^{m}) with
// nrm = max(|nᵀq̂|, 1) ≥ 1. The recurrent m_t is max(m0 + Σ_{r≤t} φ_r, the
// parallel m_t), and where the first term wins it is ≤ m0 = 0 (φ < 0), so
// |e^{m_rec} − e^{m_par}| ≤ 1 and |Δh_t| ≤ eps·|h_t|: h agrees to eps relative.
// The gradients are derivatives of that O(eps) relative perturbation, which
// brings product-rule constants (quotient, e^{m}); 10·eps bounds them.
// Observed over 1500 seeds: h typically ~1e-8 of scale (SPEC's figure; median
// 1.5e-8 with the default gates) and at most 4.7e-7; gradients at most 3.4e-6.
Test(mlstm, cross_form_eps_default) {
    phax_rng r = tu_rng("mlstm/cross_form_eps_default");
    for (int regime = 0; regime < 3; regime++) {
        prob p = prob_new(2, 13, 2, 3, 5);
        fill_regime(&p, &r, regime);
        p.eps = PHAX_MLSTM_EPS;
        double err[6], tol = round_tol(&p);
        cross_errs(err, &p);
        for (int i = 0; i < 6; i++) {
            double t = (i == 0 ? 1.0 : 10.0) * PHAX_MLSTM_EPS + tol;
            printf("[mlstm/cross_form_eps_default] regime %d %-6s err %.3e (tol %.3e)\n", regime,
                   CROSS_NAMES[i], err[i], t);
            cr_assert(err[i] <= t, "regime %d %s: err %g > tol %g", regime, CROSS_NAMES[i], err[i],
                      t);
        }
        prob_free(&p);
    }
}

// ===========================================================================
// 4. Stabiliser independence (recurrent, eps = 0): m0 ∈ {0, 3, −3}
// ===========================================================================

// The states are the unstabilised ones times e^{−m_t}, and the output is their
// ratio, so any m0 gives the same h (and gradients) up to rounding. m0 = +3
// changes every early m_t (the forget branch wins the max); m0 = −3 changes
// the run only where some ĩ_0 < φ_0 − 3 (common in the N(0, 7) regime,
// otherwise the run is bit-identical to m0 = 0).

Test(mlstm, stabiliser_m0) {
    phax_rng r = tu_rng("mlstm/stabiliser_m0");
    for (int regime = 0; regime < 3; regime++) {
        prob p = prob_new(2, 13, 2, 3, 5);
        fill_regime(&p, &r, regime);
        p.eps = 0, p.par = 0;
        double tol = round_tol(&p);
        // Reference run at m0 = 0.
        p.m0 = 0;
        prob_fwd(&p), prob_grads(&p);
        double *h0 = tu_copy(p.h, p.nv), *g0[5] = {tu_copy(p.dq, p.nk), tu_copy(p.dk, p.nk),
                                                  tu_copy(p.dv_, p.nv), tu_copy(p.dig, p.ng),
                                                  tu_copy(p.dfg, p.ng)};
        double m0s[] = {3.0, -3.0};
        for (int j = 0; j < 2; j++) {
            p.m0 = m0s[j];
            prob_fwd(&p), prob_grads(&p);
            double err[6] = {scaled_err(p.h, h0, p.nv),   scaled_err(p.dq, g0[0], p.nk),
                             scaled_err(p.dk, g0[1], p.nk), scaled_err(p.dv_, g0[2], p.nv),
                             scaled_err(p.dig, g0[3], p.ng), scaled_err(p.dfg, g0[4], p.ng)};
            for (int i = 0; i < 6; i++) {
                printf("[mlstm/stabiliser_m0] regime %d m0 %+g %-6s err %.3e (tol %.3e)\n", regime,
                       p.m0, CROSS_NAMES[i], err[i], tol);
                cr_assert(err[i] <= tol, "regime %d m0 %g %s: err %g > tol %g", regime, p.m0,
                          CROSS_NAMES[i], err[i], tol);
            }
        }
        cr_assert(prob_intact(&p) && tu_intact(h0));
        tu_free(h0);
        for (int i = 0; i < 5; i++) tu_free(g0[i]);
        prob_free(&p);
    }
}

// ===========================================================================
// 5. Layout and API conventions
// ===========================================================================

// Each (b, head) is an independent sequence: running the full (B=2, H=2)
// problem must give, bit for bit, what each slice gives alone (B = H = 1), with
// the slice gathered by explicit (B, T, H, d) indexing. Catches stride mix-ups
// that the cross-form test (same indexing in both forms) cannot.
Test(mlstm, layout_slices) {
    phax_rng r = tu_rng("mlstm/layout_slices");
    const int B = 2, T = 5, H = 3, dqk = 3, dv = 2;
    prob p = prob_new(B, T, H, dqk, dv);
    prob_fill(&p, &r, G_SMALLF);
    for (int par = 0; par <= 1; par++) {
        p.par = par, p.m0 = 0.5;
        prob_fwd(&p), prob_grads(&p);
        for (int b = 0; b < B; b++)
            for (int hh = 0; hh < H; hh++) {
                prob s = prob_new(1, T, 1, dqk, dv);
                s.par = par, s.m0 = p.m0, s.eps = p.eps;
                for (int t = 0; t < T; t++) {
                    size_t g = ((size_t)b * T + t) * H + hh;
                    s.ig[t] = p.ig[g], s.fg[t] = p.fg[g];
                    for (int i = 0; i < dqk; i++)
                        s.q[t * dqk + i] = p.q[g * dqk + i], s.k[t * dqk + i] = p.k[g * dqk + i];
                    for (int j = 0; j < dv; j++)
                        s.v[t * dv + j] = p.v[g * dv + j], s.dh[t * dv + j] = p.dh[g * dv + j];
                }
                prob_fwd(&s), prob_grads(&s);
                for (int t = 0; t < T; t++) {
                    size_t g = ((size_t)b * T + t) * H + hh;
                    cr_assert(s.dig[t] == p.dig[g] && s.dfg[t] == p.dfg[g], "par %d b %d h %d t %d",
                              par, b, hh, t);
                    for (int i = 0; i < dqk; i++)
                        cr_assert(s.dq[t * dqk + i] == p.dq[g * dqk + i] &&
                                      s.dk[t * dqk + i] == p.dk[g * dqk + i],
                                  "par %d b %d h %d t %d i %d", par, b, hh, t, i);
                    for (int j = 0; j < dv; j++)
                        cr_assert(s.h[t * dv + j] == p.h[g * dv + j] &&
                                      s.dv_[t * dv + j] == p.dv_[g * dv + j],
                                  "par %d b %d h %d t %d j %d", par, b, hh, t, j);
                }
                cr_assert(prob_intact(&s));
                prob_free(&s);
            }
    }
    cr_assert(prob_intact(&p));
    prob_free(&p);
}

// NULL gradient pointers are skipped and the rest are unchanged: one backward
// per tensor with only that gradient requested equals the full backward bit
// for bit; and backward ADDS (a second call doubles the gradient).
Test(mlstm, null_grads_and_accumulate) {
    phax_rng r = tu_rng("mlstm/null_grads_and_accumulate");
    prob p = prob_new(2, 6, 2, 3, 5);
    prob_fill(&p, &r, G_SMALLF);
    double tol = round_tol(&p);
    for (int par = 0; par <= 1; par++) {
        p.par = par;
        prob_grads(&p);
        double *full[5] = {p.dq, p.dk, p.dv_, p.dig, p.dfg};
        size_t n[5] = {p.nk, p.nk, p.nv, p.ng, p.ng};
        for (int which = 0; which < 5; which++) {
            double *one = tu_buf(n[which]);
            tu_fill(one, n[which], 0);
            double *ptr[5] = {NULL, NULL, NULL, NULL, NULL};
            ptr[which] = one;
            prob_bwd_into(&p, ptr[0], ptr[1], ptr[2], ptr[3], ptr[4]);
            cr_assert(memcmp(one, full[which], n[which] * sizeof(double)) == 0,
                      "par %d: gradient %d alone differs from the full backward", par, which);
            // Accumulation: a second call adds the same gradient again, giving 2×
            // up to rounding (the parallel form adds per key into the buffer, so
            // the partial sums round differently once the buffer is non-zero).
            prob_bwd_into(&p, ptr[0], ptr[1], ptr[2], ptr[3], ptr[4]);
            for (size_t i = 0; i < n[which]; i++) full[which][i] *= 2;
            double err = scaled_err(one, full[which], n[which]);
            cr_assert(err <= tol, "par %d grad %d: 2nd call err %g > %g", par, which, err, tol);
            for (size_t i = 0; i < n[which]; i++) full[which][i] /= 2;
            cr_assert(tu_intact(one));
            tu_free(one);
        }
    }
    cr_assert(prob_intact(&p));
    prob_free(&p);
}

// ---------------------------------------------------------------------------
// grad = stopgrad-normalizer (ref_mlstm_parallel_bwd_grad): the gradient of h with the
// normaliser den_t = max(|S_t|, e^{−m_t}) + eps and the stabiliser m_t frozen at their values.
// Checked by central differences of that frozen function, written here from the definition:
//   h_t(θ) = Σ_s (q̂_t·k_s) e^{D̃_ts − m0_t} v_s / den0_t,  D̃_ts = ĩ_s + Σ_{r=s+1..t} log σ(f̃_r).
// Step δ = 1e-6: truncation ~δ²·|L'''|/6 ≈ 1e-12, rounding ~2^-52·|L|/δ ≈ 1e-9 (|L| ≲ 10), so the
// bound 1e-7·(1 + |g|) is ~50× above both. And the convention matters: on these gates (the
// |S| branch active in some rows) it differs from the exact gradient by far more.
static void frozen_fwd(const prob *p, const double *den0, const double *m0, double *h) {
    double sc = 1.0 / sqrt((double)p->dqk);
    for (int b = 0; b < p->B; b++)
        for (int hh = 0; hh < p->H; hh++)
            for (int t = 0; t < p->T; t++) {
                size_t gt = ((size_t)b * p->T + t) * p->H + hh;
                double *ht = h + gt * p->dv;
                for (int j = 0; j < p->dv; j++) ht[j] = 0;
                for (int s = 0; s <= t; s++) {
                    size_t gs = ((size_t)b * p->T + s) * p->H + hh;
                    double D = p->ig[gs];
                    for (int r = s + 1; r <= t; r++) D += -log1p(exp(-p->fg[((size_t)b * p->T + r) * p->H + hh]));
                    double qk = 0;
                    for (int i = 0; i < p->dqk; i++) qk += p->q[gt * p->dqk + i] * sc * p->k[gs * p->dqk + i];
                    double w = qk * exp(D - m0[gt]) / den0[gt];
                    for (int j = 0; j < p->dv; j++) ht[j] += w * p->v[gs * p->dv + j];
                }
            }
}

static void frozen_consts(const prob *p, double *den0, double *m0) {
    double sc = 1.0 / sqrt((double)p->dqk);
    for (int b = 0; b < p->B; b++)
        for (int hh = 0; hh < p->H; hh++)
            for (int t = 0; t < p->T; t++) {
                size_t gt = ((size_t)b * p->T + t) * p->H + hh;
                double m = -INFINITY, D[64];
                for (int s = 0; s <= t; s++) {
                    D[s] = p->ig[((size_t)b * p->T + s) * p->H + hh];
                    for (int r = s + 1; r <= t; r++) D[s] += -log1p(exp(-p->fg[((size_t)b * p->T + r) * p->H + hh]));
                    m = fmax(m, D[s]);
                }
                double S = 0;
                for (int s = 0; s <= t; s++) {
                    size_t gs = ((size_t)b * p->T + s) * p->H + hh;
                    double qk = 0;
                    for (int i = 0; i < p->dqk; i++) qk += p->q[gt * p->dqk + i] * sc * p->k[gs * p->dqk + i];
                    S += qk * exp(D[s] - m);
                }
                m0[gt] = m, den0[gt] = fmax(fabs(S), exp(-m)) + p->eps;
            }
}

static double frozen_loss(const prob *p, const double *den0, const double *m0, double *h) {
    frozen_fwd(p, den0, m0, h);
    double L = 0;
    for (size_t i = 0; i < p->nv; i++) L += p->dh[i] * h[i];
    return L;
}

Test(mlstm, stopgrad_normalizer_is_the_gradient_with_den_and_m_frozen) {
    prob p = prob_new(2, 7, 2, 3, 4);
    p.par = 1;
    phax_rng r = tu_rng("mlstm/stopgrad_normalizer");
    prob_fill(&p, &r, 1.5, 1.0, 2.0, 1.0);  // large ĩ: e^{−m} small, the |S| branch taken in most rows
    double den0[2 * 7 * 2], m0[2 * 7 * 2], *hb = tu_buf(p.nv);
    frozen_consts(&p, den0, m0);
    // The frozen function's value is h itself at θ0.
    prob_fwd(&p);
    frozen_fwd(&p, den0, m0, hb);
    for (size_t i = 0; i < p.nv; i++) cr_assert(fabs(hb[i] - p.h[i]) <= 1e-12 * (1 + fabs(p.h[i])), "h[%zu]", i);
    tu_fill(p.dq, p.nk, 0), tu_fill(p.dk, p.nk, 0), tu_fill(p.dv_, p.nv, 0), tu_fill(p.dig, p.ng, 0), tu_fill(p.dfg, p.ng, 0);
    cr_assert(ref_mlstm_parallel_bwd_grad(p.dq, p.dk, p.dv_, p.dig, p.dfg, p.dh, p.q, p.k, p.v, p.ig, p.fg, p.B, p.T, p.H,
                                          p.dqk, p.dv, p.eps, PHAX_MLSTM_GRAD_STOPGRAD_NORMALIZER) == PHAX_OK);
    double *xs[5] = {p.q, p.k, p.v, p.ig, p.fg}, *gs[5] = {p.dq, p.dk, p.dv_, p.dig, p.dfg};
    size_t ns[5] = {p.nk, p.nk, p.nv, p.ng, p.ng};
    const char *names[5] = {"q", "k", "v", "igate", "fgate"};
    const double d = 1e-6;
    double worst = 0;
    for (int a = 0; a < 5; a++)
        for (size_t i = 0; i < ns[a]; i++) {
            double x0 = xs[a][i];
            xs[a][i] = x0 + d;
            double lp = frozen_loss(&p, den0, m0, hb);
            xs[a][i] = x0 - d;
            double lm = frozen_loss(&p, den0, m0, hb);
            xs[a][i] = x0;
            double fd = (lp - lm) / (2 * d), g = gs[a][i], e = fabs(fd - g) / (1e-7 * (1 + fabs(g)));
            cr_expect(e <= 1, "grad.%s[%zu]: stopgrad %.12g, finite differences %.12g", names[a], i, g, fd);
            if (!(e <= worst)) worst = e;
        }
    printf("mlstm stopgrad-normalizer vs finite differences of the frozen function: worst %.3g of the bound\n", worst);
    // The exact gradient is another function's: far from these on the same inputs.
    double *eq = tu_buf(p.nk);
    tu_fill(eq, p.nk, 0);
    cr_assert(ref_mlstm_parallel_bwd(eq, NULL, NULL, NULL, NULL, p.dh, p.q, p.k, p.v, p.ig, p.fg, p.B, p.T, p.H, p.dqk,
                                     p.dv, p.eps) == PHAX_OK);
    double diff = 0, norm = 0;
    for (size_t i = 0; i < p.nk; i++) diff += (eq[i] - p.dq[i]) * (eq[i] - p.dq[i]), norm += eq[i] * eq[i];
    printf("mlstm grad.q, exact vs stopgrad-normalizer: relative difference %.3g\n", sqrt(diff / norm));
    cr_expect(sqrt(diff / norm) > 0.05, "the conventions agree on grad.q (%g): the test inputs do not tell them apart",
              sqrt(diff / norm));
    tu_free(hb), tu_free(eq);
    prob_free(&p);
}
