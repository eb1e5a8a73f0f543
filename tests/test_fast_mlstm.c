// The mLSTM of the fast tiers (chunkwise, float32; fast/cpu/mlstm.c on backend cpu,
// through the backend list of harness.h; case tables mcase/rcase) against
// ref/mlstm.c (float64): forward
// and all five gradients vs ref_mlstm_parallel_* at awkward sizes and gate
// regimes; the recurrent form through state_in = (0, 0, m0) and at eps = 0;
// the spec's stabiliser bound at the default eps; a long run = chunked runs
// carrying the state; determinism; NULL gradients; guard zones.
//
// Error bound (flash-attention style, with a rounding-scale term): next to each
// fast call the test runs a straightforward float32 evaluation of the same
// function — ref's parallel algorithm transcribed to float (b32_mlstm_*,
// tests/baseline_f32_mlstm.c) — and computes the first-order rounding scale of the
// formula (b32_mlstm_roundoff_scale: ref's
// algorithm in double carrying |·| shadows, one unit roundoff per operation),
// and requires per tensor (h, dq, dk, dv, dĩ, df̃), relative L2 errors vs ref:
//   err_fast ≤ C·err_naive32 + C_SCALE·scale + FLOOR   (h_judge, the scale as h_sums.extra).
// * C = 4: the chunkwise form reorders the same sums (sgemm blocking, a state
//   carried across chunks) and rounds each exponent once (formed in double), so
//   it may be a small factor off the naive order, never orders of magnitude.
// * The scale term: the mLSTM normaliser max(|S|, e^{−m}) makes a few rows with
//   |S| ≈ its kink dominate a tensor's error, and there the error of ANY float32
//   evaluation is one draw of rounding noise (a ratio of two such draws is
//   Cauchy-like): over 40 seeds × 150 tensors err_fast/err_naive32 reached 33
//   although its geometric mean is < 1 (fast is more accurate on average: its
//   log-gate sums are double). The scale is the first-order running-error
//   bound of the formula with one rounding per operation; C_SCALE = 1 takes it
//   as it is. Measured against it, naive32 reaches 0.85 and fast 0.26; it is
//   ~1e-6–1e-3 relative, where a wrong formula is off by O(1) (mutations of the
//   backward — μ, the state adjoint, the argmax routing, … — all fail).
// * FLOOR = 8·2^-24 ≈ 4.8e-7: a few float32 roundings of O(1) relative size, for
//   tensors on which the naive evaluation happens to be almost exact (T = 1).
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseline_f32.h"
#include "harness.h"
#include "phax/ref.h"

static const double C_BOUND = 4.0;
static const double C_SCALE = 1.0;
static const double U32 = 1.0 / 16777216.0;  // 2^-24
static const double FLOOR = 8.0 / 16777216.0;  // 8·2^-24

// Workspace filled with all-ones bytes (NaN as float and double): a kernel
// that reads scratch it did not write first produces NaN.
static void *wsbuf(size_t n) {
    void *w = malloc(n ? n : 1);
    cr_assert(w);
    memset(w, 0xFF, n);
    return w;
}

static double norm_d(const double *a, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * a[i];
    return sqrt(s);
}

// ---------------------------------------------------------------------------
// A problem: float inputs for fast and naive32, the same values in double for ref.
// q, k: (B, T, H, dqk); v, dh: (B, T, H, dv); ig, fg: (B, T, H).
typedef b32_mlstm_prob prob;

static void fill_pair(float *f, double *d, size_t n, phax_rng *r, double mu, double sd) {
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)(mu + sd * phax_rng_normal(r));
        d[i] = (double)f[i];
    }
}

static prob prob_new(phax_rng *r, int B, int T, int H, int dqk, int dv, double i_mu, double i_sd,
                     double f_mu, double f_sd) {
    prob p = {.B = B, .T = T, .H = H, .dqk = dqk, .dv = dv};
    p.ng = (size_t)B * T * H, p.nk = p.ng * dqk, p.nv = p.ng * dv;
    p.q = tu_fbuf(p.nk), p.k = tu_fbuf(p.nk), p.v = tu_fbuf(p.nv), p.ig = tu_fbuf(p.ng), p.fg = tu_fbuf(p.ng);
    p.dh = tu_fbuf(p.nv);
    p.qd = tu_buf(p.nk), p.kd = tu_buf(p.nk), p.vd = tu_buf(p.nv), p.igd = tu_buf(p.ng);
    p.fgd = tu_buf(p.ng), p.dhd = tu_buf(p.nv);
    fill_pair(p.q, p.qd, p.nk, r, 0, 1);
    fill_pair(p.k, p.kd, p.nk, r, 0, 1);
    fill_pair(p.v, p.vd, p.nv, r, 0, 1);
    fill_pair(p.ig, p.igd, p.ng, r, i_mu, i_sd);
    fill_pair(p.fg, p.fgd, p.ng, r, f_mu, f_sd);
    fill_pair(p.dh, p.dhd, p.nv, r, 0, 1);
    return p;
}

static bool prob_intact(const prob *p) {
    return tu_fintact(p->q) && tu_fintact(p->k) && tu_fintact(p->v) && tu_fintact(p->ig) && tu_fintact(p->fg) &&
           tu_fintact(p->dh);
}

static void prob_free(prob *p) {
    tu_ffree(p->q), tu_ffree(p->k), tu_ffree(p->v), tu_ffree(p->ig), tu_ffree(p->fg), tu_ffree(p->dh);
    tu_free(p->qd), tu_free(p->kd), tu_free(p->vd), tu_free(p->igd), tu_free(p->fgd);
    tu_free(p->dhd);
}

static size_t ixg(const prob *p, int b, int t, int hh) {
    return ((size_t)b * p->T + t) * p->H + hh;
}

// u·‖x̄‖/‖ref‖, on the same footing as relerr_* (absolute when ref = 0).
static double scale_of(const double *shadow, const double *ref, size_t n) {
    double a = norm_d(shadow, n), r = norm_d(ref, n);
    return U32 * (r > 0 ? a / r : a);
}

// The forward baseline of the forms' comparisons, for the parallel form (href: its
// ref): naive32's relative error *en and the relative rounding scale *es.
static void fwd_baseline(const prob *p, float eps, const double *href, double *en, double *es) {
    float *hn = tu_fbuf(p->nv);
    b32_mlstm_fwd(hn, p, eps);
    double *hsh = tu_buf(p->nv), *gsh[5];
    size_t n[5] = {p->nk, p->nk, p->nv, p->ng, p->ng};
    for (int j = 0; j < 5; j++) gsh[j] = tu_buf(n[j]);
    b32_mlstm_roundoff_scale(hsh, gsh, p, (double)eps);
    *en = h_relerr(H_F(hn), href, H_ZERO, p->nv), *es = scale_of(hsh, href, p->nv);
    tu_ffree(hn), tu_free(hsh);
    for (int j = 0; j < 5; j++) tu_free(gsh[j]);
}

// The judge for one tensor (h_bound_rel): ‖fast − ref‖ ≤ C·‖naive32 − ref‖ + FLOOR·‖ref‖ +
// C_SCALE·u·‖x̄‖ (+ extra, absolute), given naive32's error en and the scale es relative
// to ‖ref‖ (measured on the parallel form; ref may be another form's, e.g. the recurrent).
static bool judge_rel(const char *label, const char *what, const float *fast, const double *ref,
                      size_t n, double en, double es, double extra) {
    double r = norm_d(ref, n) > 0 ? norm_d(ref, n) : 1.0;
    return h_bound_rel(label, what, H_F(fast), ref, n, C_BOUND, en, FLOOR, C_SCALE * es * r + extra);
}

// ---------------------------------------------------------------------------
// The fast calls, with fresh (NaN-filled) workspaces.
static int fast_fwd(const h_backend *be, float *h, const prob *p, float eps, int chunk, const float *sin, float *sout) {
    size_t n = be->mlstm.fwd_ws(p->B, p->T, p->H, p->dqk, p->dv, chunk);
    void *ws = wsbuf(n);
    int rc = be->mlstm.fwd(h, p->q, p->k, p->v, p->ig, p->fg, p->B, p->T, p->H, p->dqk,
                                      p->dv, eps, chunk, sin, sout, ws);
    free(ws);
    return rc;
}
static int fast_bwd(const h_backend *be, float *dq, float *dk, float *dv_, float *dig, float *dfg, const prob *p,
                    float eps, int chunk) {
    size_t n = be->mlstm.bwd_ws(p->B, p->T, p->H, p->dqk, p->dv, chunk);
    void *ws = wsbuf(n);
    int rc = be->mlstm.bwd(dq, dk, dv_, dig, dfg, p->dh, p->q, p->k, p->v, p->ig, p->fg,
                                      p->B, p->T, p->H, p->dqk, p->dv, eps, chunk, ws);
    free(ws);
    return rc;
}

// ---------------------------------------------------------------------------
// One full comparison: forward and the five gradients of fast vs ref parallel,
// each against the naive32 bound (h_judge: C = C_BOUND, floor FLOOR·‖ref‖ and
// C_SCALE·u·‖x̄‖ as h_sums.extra), for every chunk of the case.
typedef struct {
    const char *what;
    int B, T, H, dqk, dv;
    int chunks[3], nchunks;
    double i_mu, i_sd, f_mu, f_sd;  // gate pre-activations ĩ ~ N(i_mu, i_sd²), f̃ likewise
    float eps;
} mcase;

static void compare_case(const h_backend *be, phax_rng *r, const mcase *c) {
    int B = c->B, T = c->T, H = c->H, dqk = c->dqk, dv = c->dv;
    float eps = c->eps;
    prob p = prob_new(r, B, T, H, dqk, dv, c->i_mu, c->i_sd, c->f_mu, c->f_sd);
    const double epsd = (double)eps;  // ref sees the float's value
    size_t n[6] = {p.nv, p.nk, p.nk, p.nv, p.ng, p.ng};
    const char *names[6] = {"h", "dq", "dk", "dv", "dig", "dfg"};

    // ref (float64), on the float inputs; out[0] = h, out[1..5] the gradients.
    double *ref[6];
    for (int j = 0; j < 6; j++) ref[j] = tu_buf(n[j]), tu_fill(ref[j], n[j], 0);
    cr_assert_eq(
        ref_mlstm_parallel_fwd(ref[0], p.qd, p.kd, p.vd, p.igd, p.fgd, B, T, H, dqk, dv, epsd),
        PHAX_OK);
    cr_assert_eq(ref_mlstm_parallel_bwd(ref[1], ref[2], ref[3], ref[4], ref[5], p.dhd, p.qd, p.kd,
                                        p.vd, p.igd, p.fgd, B, T, H, dqk, dv, epsd),
                 PHAX_OK);
    // naive32, and the rounding shadows x̄ of each tensor.
    float *nv[6];
    for (int j = 0; j < 6; j++) nv[j] = tu_fbuf(n[j]), memset(nv[j], 0, n[j] * sizeof(float));
    b32_mlstm_fwd(nv[0], &p, eps);
    b32_mlstm_bwd(nv[1], nv[2], nv[3], nv[4], nv[5], &p, eps);
    double *sh[6];
    for (int j = 0; j < 6; j++) sh[j] = tu_buf(n[j]);
    b32_mlstm_roundoff_scale(sh[0], sh + 1, &p, epsd);

    for (int ic = 0; ic < c->nchunks; ic++) {
        int chunk = c->chunks[ic];
        // fast: forward into a poisoned h; backward into zeroed gradients (that it
        // adds rather than overwrites is the `backward_adds` test's business: a
        // random prior here would bury gradients ≪ 1 in its rounding).
        float *f[6];
        f[0] = tu_fbuf(n[0]);
        cr_assert_eq(fast_fwd(be, f[0], &p, eps, chunk, NULL, NULL), PHAX_OK);
        for (int j = 1; j < 6; j++) f[j] = tu_fbuf(n[j]), memset(f[j], 0, n[j] * sizeof(float));
        cr_assert_eq(fast_bwd(be, f[1], f[2], f[3], f[4], f[5], &p, eps, chunk), PHAX_OK);
        for (int j = 0; j < 6; j++)
            cr_assert(tu_fintact(f[j]), "%s: guard of %s overwritten", c->what, names[j]);
        cr_assert(prob_intact(&p), "%s: an input's guard was overwritten", c->what);
        char label[128];
        snprintf(label, sizeof label, "%s chunk=%d", c->what, chunk);
        for (int j = 0; j < 6; j++) {
            h_sums s = {0};
            h_pool(&s, H_F(f[j]), H_F(nv[j]), ref[j], H_ZERO, NULL, NULL, n[j]);
            s.extra = C_SCALE * U32 * norm_d(sh[j], n[j]);
            cr_assert(h_judge(label, names[j], &s, C_BOUND, FLOOR),
                      "%s: %s above %g·naive32 + %g·scale + %.1e (seed %llu)", label, names[j],
                      C_BOUND, C_SCALE, FLOOR, (unsigned long long)tu_base_seed());
        }
        for (int j = 0; j < 6; j++) tu_ffree(f[j]);
    }
    for (int j = 0; j < 6; j++) tu_free(sh[j]), tu_free(ref[j]), tu_ffree(nv[j]);
    prob_free(&p);
}

static void run_table(const h_backend *be, const char *test, const mcase *cs, int nc) {
    phax_rng r = tu_rng(test);
    for (int c = 0; c < nc; c++) compare_case(be, &r, &cs[c]);
    h_report_worst(test);
}

// The sweep of the brief, for one gate regime: T ∈ {1, 7, 64, 65, 130, 200} (1: a
// single row; 7: one partial chunk; 64: exactly one/four chunks; 65: one row into a
// new chunk; 130, 200: several chunks with a partial last one), chunk 16 and 64, head
// dims (24, 40) and (3, 5) (dqk ≠ dv, neither a multiple of the vector width).
static int sweep_cases(mcase *cs, double i_mu, double i_sd, double f_mu, double f_sd) {
    static const int Ts[] = {1, 7, 64, 65, 130, 200};
    static const int dims[][2] = {{24, 40}, {3, 5}};
    static const char *whats[6][2] = {
        {"T=1 dqk=24 dv=40", "T=1 dqk=3 dv=5"},     {"T=7 dqk=24 dv=40", "T=7 dqk=3 dv=5"},
        {"T=64 dqk=24 dv=40", "T=64 dqk=3 dv=5"},   {"T=65 dqk=24 dv=40", "T=65 dqk=3 dv=5"},
        {"T=130 dqk=24 dv=40", "T=130 dqk=3 dv=5"}, {"T=200 dqk=24 dv=40", "T=200 dqk=3 dv=5"},
    };
    int k = 0;
    for (int it = 0; it < 6; it++)
        for (int id = 0; id < 2; id++)
            cs[k++] = (mcase){whats[it][id], 2, Ts[it], 2, dims[id][0], dims[id][1], {16, 64}, 2,
                              i_mu, i_sd, f_mu, f_sd, (float)PHAX_MLSTM_EPS};
    return k;
}

static void sweep(const h_backend *be, const char *name, double i_mu, double i_sd, double f_mu,
                  double f_sd) {
    mcase cs[12];
    run_table(be, name, cs, sweep_cases(cs, i_mu, i_sd, f_mu, f_sd));
}

// ĩ ~ N(0, 2), f̃ ~ N(3, 1.5): long memory (σ(f̃) ≈ 0.95), both normaliser branches.
H_TEST(mlstm, vs_ref_std_gates) { sweep(be, "fcpu_mlstm.vs_ref_std_gates", 0, 2, 3, 1.5); }

// The xLSTM-7B input-gate init bias −10: ĩ ~ N(−10, 1); e^{−m} branch dominates.
H_TEST(mlstm, vs_ref_igate_bias_m10) {
    sweep(be, "fcpu_mlstm.vs_ref_igate_bias_m10", -10, 1, 3, 1.5);
}

// Small forget gates f̃ ~ N(−2, 1.5): short memory, large |Σ logσ f̃| inside a
// chunk (the cancellation G_a − G_b the double-precision gate sums guard).
H_TEST(mlstm, vs_ref_small_f) { sweep(be, "fcpu_mlstm.vs_ref_small_f", 0, 2, -2, 1.5); }

#define E6 ((float)PHAX_MLSTM_EPS)
// Head dims 64 with chunks 128, 256 and 512 (≥ T: a single chunk) at T = 300;
// chunks 1 (a pure recurrence over chunk boundaries) and 3; the default chunk
// (0 → 64) with dqk > dv.
static const mcase dim64_chunk_cases[] = {
    {"T=300 dqk=64 dv=64", 1, 300, 2, 64, 64, {128, 256, 512}, 3, 0, 2, 3, 1.5, E6},
    {"T=65 dqk=24 dv=40", 2, 65, 2, 24, 40, {1, 3}, 2, 0, 2, 3, 1.5, E6},
    {"T=65 dqk=24 dv=40 smallf", 2, 65, 2, 24, 40, {1, 3}, 2, 0, 2, -2, 1.5, E6},
    {"T=97 dqk=40 dv=24 ig-10", 1, 97, 3, 40, 24, {0}, 1, -10, 1, 3, 1.5, E6},
};

H_TEST(mlstm, vs_ref_dim64_chunks) {
    run_table(be, "fcpu_mlstm.vs_ref_dim64_chunks", dim64_chunk_cases, 4);
}

// A large eps (0.25 and 3): the output then depends on the stabiliser m_t
// (spec §2.9), so the gradient paths through m_t (to the argmax of the log-gate
// row, across chunk boundaries too) carry weight instead of ~1e-6 of it.
static const mcase big_eps_cases[] = {
    {"T=130 dqk=24 dv=40 eps=.25", 2, 130, 2, 24, 40, {16, 64}, 2, 0, 2, 3, 1.5, 0.25f},
    {"T=130 dqk=24 dv=40 eps=3", 2, 130, 2, 24, 40, {16, 64}, 2, 0, 2, 3, 1.5, 3.0f},
    {"T=97 dqk=3 dv=5 eps=.25 sf", 2, 97, 2, 3, 5, {16, 64}, 2, 0, 2, -2, 1.5, 0.25f},
    {"T=65 dqk=24 dv=40 eps=.25 ig-2", 2, 65, 2, 24, 40, {16, 64}, 2, -2, 3, 1, 2, 0.25f},
};

H_TEST(mlstm, vs_ref_big_eps) { run_table(be, "fcpu_mlstm.vs_ref_big_eps", big_eps_cases, 4); }

// ---------------------------------------------------------------------------
// Forward against the recurrent form. h_ref from ref_mlstm_recurrent_fwd(m0);
// naive32 is the parallel transcription (its error vs the recurrent ref sets
// the scale only where the two refs agree, i.e. at eps = 0 or with state_in).
typedef struct {
    const char *what;
    int T, chunk;
    double m0;
    float eps;
    bool use_state;  // state_in = (0, 0, m0)
    double i_mu, f_mu;
} rcase;

static void vs_recurrent(const h_backend *be, phax_rng *r, const rcase *c) {
    const char *what = c->what;
    int T = c->T, chunk = c->chunk;
    double m0 = c->m0, i_mu = c->i_mu, f_mu = c->f_mu;
    float eps = c->eps;
    bool use_state = c->use_state;
    int B = 2, H = 2, dqk = 24, dv = 40;
    prob p = prob_new(r, B, T, H, dqk, dv, i_mu, 2, f_mu, 1.5);
    double *hrec = tu_buf(p.nv), *hpar = tu_buf(p.nv);
    cr_assert_eq(ref_mlstm_recurrent_fwd(hrec, p.qd, p.kd, p.vd, p.igd, p.fgd, B, T, H, dqk, dv,
                                         (double)eps, m0),
                 PHAX_OK);
    cr_assert_eq(
        ref_mlstm_parallel_fwd(hpar, p.qd, p.kd, p.vd, p.igd, p.fgd, B, T, H, dqk, dv, (double)eps),
        PHAX_OK);
    float *hf = tu_fbuf(p.nv);
    size_t SL = be->mlstm.state_len(dqk, dv);
    float *sin = tu_fbuf((size_t)B * H * SL);
    for (int s = 0; s < B * H; s++) {
        memset(sin + s * SL, 0, (SL - 1) * sizeof(float));
        sin[s * SL + SL - 1] = (float)m0;
    }
    cr_assert_eq(fast_fwd(be, hf, &p, eps, chunk, use_state ? sin : NULL, NULL), PHAX_OK);
    cr_assert(tu_fintact(hf) && tu_fintact(sin) && prob_intact(&p));
    // naive32's own error, measured against the parallel ref (its function).
    double en, es;
    fwd_baseline(&p, eps, hpar, &en, &es);
    printf("  %-36s naive32-vs-parallel %.2e  scale %.2e  (refs differ by %.2e)\n", what, en, es,
           h_relerr(H_D(hpar), hrec, H_ZERO, p.nv));
    cr_assert(judge_rel(what, "h vs recurrent", hf, hrec, p.nv, en, es, 0), "%s (seed %llu)", what,
              (unsigned long long)tu_base_seed());
    tu_free(hrec), tu_free(hpar), tu_ffree(hf), tu_ffree(sin);
    prob_free(&p);
}

// At eps = 0 the function does not depend on the stabiliser (spec §2.9), so
// the chunkwise form (parallel stabiliser) equals the recurrent one for any m0.
H_TEST(mlstm, eps0_equals_recurrent) {
    phax_rng r = tu_rng("fcpu_mlstm.eps0_equals_recurrent");
    printf("[fcpu_mlstm.eps0_equals_recurrent]\n");
    static const rcase cs[] = {
        {"eps=0 m0=0 T=130 chunk=16", 130, 16, 0.0, 0.0f, false, 0, 3},
        {"eps=0 m0=3 T=130 chunk=64", 130, 64, 3.0, 0.0f, false, 0, 3},
        {"eps=0 m0=0 T=200 chunk=64 ig-10", 200, 64, 0.0, 0.0f, false, -10, 3},
    };
    for (int c = 0; c < 3; c++) vs_recurrent(be, &r, &cs[c]);
}

// With state_in = (C = 0, n = 0, m = m0) the chunkwise stabiliser is the
// recurrent form's (m_t = max(parallel m_t, m0 + Σ_{r≤t} φ_r)), so it equals
// ref_mlstm_recurrent_fwd(m0) at the default eps — where the two refs differ.
H_TEST(mlstm, state_in_m0_is_recurrent) {
    phax_rng r = tu_rng("fcpu_mlstm.state_in_m0_is_recurrent");
    printf("[fcpu_mlstm.state_in_m0_is_recurrent]\n");
    static const rcase cs[] = {
        {"state m0=0 T=200 chunk=16 ig-10", 200, 16, 0.0, E6, true, -10, 3},
        {"state m0=0 T=130 chunk=64 ig-10", 130, 64, 0.0, E6, true, -10, 3},
        {"state m0=2 T=65 chunk=16", 65, 16, 2.0, E6, true, 0, 3},
        {"state m0=-1 T=200 chunk=64 smallf", 200, 64, -1.0, E6, true, 0, -2},
    };
    for (int c = 0; c < 4; c++) vs_recurrent(be, &r, &cs[c]);
}

// Default eps, no state: fast (parallel stabiliser m) vs the recurrent ref
// (stabiliser m′ = max(m, m0 + Σφ)). Spec §2.9: |h_t − h′_t| ≤ |h_t|·eps·|e^{m_t} − e^{m′_t}|.
// Check ‖fast − rec‖ ≤ ‖bound‖ + (C·err_naive32 + FLOOR)·‖rec‖, and that the
// refs themselves obey the bound.
H_TEST(mlstm, default_eps_vs_recurrent_bound) {
    phax_rng r = tu_rng("fcpu_mlstm.default_eps_vs_recurrent_bound");
    int B = 2, T = 200, H = 2, dqk = 24, dv = 40, chunk = 64;
    const float eps = (float)PHAX_MLSTM_EPS;
    prob p = prob_new(&r, B, T, H, dqk, dv, -10, 1, 3, 1.5);
    double *hrec = tu_buf(p.nv), *hpar = tu_buf(p.nv), *bnd = tu_buf((size_t)B * T * H);
    cr_assert_eq(ref_mlstm_recurrent_fwd(hrec, p.qd, p.kd, p.vd, p.igd, p.fgd, B, T, H, dqk, dv,
                                         (double)eps, 0.0),
                 PHAX_OK);
    cr_assert_eq(
        ref_mlstm_parallel_fwd(hpar, p.qd, p.kd, p.vd, p.igd, p.fgd, B, T, H, dqk, dv, (double)eps),
        PHAX_OK);
    // Per row: m_t (parallel), m′_t = max(m_t, Σ_{r≤t} logσ f̃_r) (recurrent, m0 = 0).
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < H; hh++) {
            double cs = 0;
            for (int t = 0; t < T; t++) {
                double z = p.fgd[ixg(&p, b, t, hh)];
                cs += fmin(z, 0) - log1p(exp(-fabs(z)));
                double m = -INFINITY, F = 0;
                for (int s = t; s >= 0; s--) {
                    m = fmax(m, F + p.igd[ixg(&p, b, s, hh)]);
                    F += fmin(p.fgd[ixg(&p, b, s, hh)], 0) -
                         log1p(exp(-fabs(p.fgd[ixg(&p, b, s, hh)])));
                }
                double mr = fmax(m, cs), hn2 = 0;
                for (int j = 0; j < dv; j++)
                    hn2 += hpar[ixg(&p, b, t, hh) * dv + j] * hpar[ixg(&p, b, t, hh) * dv + j];
                bnd[ixg(&p, b, t, hh)] = (double)eps * sqrt(hn2) * fabs(exp(mr) - exp(m));
            }
        }
    float *hf = tu_fbuf(p.nv);
    cr_assert_eq(fast_fwd(be, hf, &p, eps, chunk, NULL, NULL), PHAX_OK);
    cr_assert(tu_fintact(hf) && prob_intact(&p));
    double nrec = norm_d(hrec, p.nv), nb = norm_d(bnd, (size_t)B * T * H);
    double dref = h_relerr(H_D(hpar), hrec, H_ZERO, p.nv) * nrec;  // ‖par − rec‖
    double dfast = h_relerr(H_F(hf), hrec, H_ZERO, p.nv) * nrec;   // ‖fast − rec‖
    double en, es;
    fwd_baseline(&p, eps, hpar, &en, &es);
    printf(
        "[default_eps_vs_recurrent_bound] ‖par−rec‖=%.3e ‖bound‖=%.3e ‖fast−rec‖=%.3e "
        "‖rec‖=%.3e naive32 %.2e scale %.2e\n",
        dref, nb, dfast, nrec, en, es);
    cr_assert(dref <= nb * (1 + 1e-9) + 1e-14 * nrec, "refs violate the spec bound");
    // ‖fast − rec‖ ≤ ‖bound‖ + (C·err_naive32 + scale + FLOOR)·‖rec‖
    cr_assert(judge_rel("default eps", "h vs recurrent", hf, hrec, p.nv, en, es, nb * (1 + 1e-9)),
              "fast outside the bound (seed %llu)", (unsigned long long)tu_base_seed());
    tu_free(hrec), tu_free(hpar), tu_free(bnd), tu_ffree(hf);
    prob_free(&p);
}

// ---------------------------------------------------------------------------
// A long run equals chunked runs carrying the state: T = 200 split at 77 and
// 127 (none a multiple of the chunk), each piece started from the previous
// piece's state_out. Compared with the single run (fast) and with ref.
static void slice(prob *dst, const prob *src, int t0, int Tn) {
    // dst was created with T = Tn; copy rows t0..t0+Tn−1 of src.
    for (int b = 0; b < src->B; b++)
        for (int t = 0; t < Tn; t++)
            for (int hh = 0; hh < src->H; hh++) {
                size_t gs = ixg(src, b, t0 + t, hh), gd = ixg(dst, b, t, hh);
                memcpy(dst->q + gd * src->dqk, src->q + gs * src->dqk, sizeof(float) * src->dqk);
                memcpy(dst->k + gd * src->dqk, src->k + gs * src->dqk, sizeof(float) * src->dqk);
                memcpy(dst->v + gd * src->dv, src->v + gs * src->dv, sizeof(float) * src->dv);
                dst->ig[gd] = src->ig[gs], dst->fg[gd] = src->fg[gs];
            }
}

static void chunked_runs(const h_backend *be, phax_rng *r, const char *what, int chunk, double f_mu) {
    int B = 2, T = 200, H = 2, dqk = 24, dv = 40;
    const int cuts[] = {0, 77, 127, 200};
    const float eps = (float)PHAX_MLSTM_EPS;
    prob p = prob_new(r, B, T, H, dqk, dv, 0, 2, f_mu, 1.5);
    double *href = tu_buf(p.nv);
    cr_assert_eq(
        ref_mlstm_parallel_fwd(href, p.qd, p.kd, p.vd, p.igd, p.fgd, B, T, H, dqk, dv, (double)eps),
        PHAX_OK);
    float *hone = tu_fbuf(p.nv), *hcat = tu_fbuf(p.nv);
    cr_assert_eq(fast_fwd(be, hone, &p, eps, chunk, NULL, NULL), PHAX_OK);
    size_t SL = be->mlstm.state_len(dqk, dv);
    float *st[2] = {tu_fbuf((size_t)B * H * SL), tu_fbuf((size_t)B * H * SL)};
    for (int piece = 0; piece < 3; piece++) {
        int t0 = cuts[piece], Tn = cuts[piece + 1] - t0;
        phax_rng dummy = phax_rng_new(1);
        prob sp = prob_new(&dummy, B, Tn, H, dqk, dv, 0, 1, 0, 1);
        slice(&sp, &p, t0, Tn);
        float *hs = tu_fbuf(sp.nv);
        h_fpoison(st[piece & 1]);
        cr_assert_eq(
            fast_fwd(be, hs, &sp, eps, chunk, piece ? st[(piece + 1) & 1] : NULL, st[piece & 1]),
            PHAX_OK);
        cr_assert(tu_fintact(hs) && tu_fintact(st[0]) && tu_fintact(st[1]));
        for (int b = 0; b < B; b++)
            for (int t = 0; t < Tn; t++)
                for (int hh = 0; hh < H; hh++)
                    memcpy(hcat + ixg(&p, b, t0 + t, hh) * dv, hs + ixg(&sp, b, t, hh) * dv,
                           sizeof(float) * dv);
        tu_ffree(hs);
        prob_free(&sp);
    }
    double en, es;
    fwd_baseline(&p, eps, href, &en, &es);
    // chunked vs one run, both float: each within the naive bound of ref.
    cr_assert(judge_rel(what, "h chunked", hcat, href, p.nv, en, es, 0), "%s: chunked runs", what);
    cr_assert(judge_rel(what, "h one run", hone, href, p.nv, en, es, 0), "%s: one run", what);
    tu_free(href), tu_ffree(hone), tu_ffree(hcat), tu_ffree(st[0]), tu_ffree(st[1]);
    prob_free(&p);
}

H_TEST(mlstm, long_run_equals_chunked_runs) {
    phax_rng r = tu_rng("fcpu_mlstm.long_run_equals_chunked_runs");
    printf("[fcpu_mlstm.long_run_equals_chunked_runs] T = 200 as 77 + 50 + 73\n");
    static const struct {
        const char *what;
        int chunk;
        double f_mu;
    } cs[] = {{"chunk=16", 16, 3}, {"chunk=64", 64, 3}, {"chunk=64 small f", 64, -2}};
    for (int c = 0; c < 3; c++) chunked_runs(be, &r, cs[c].what, cs[c].chunk, cs[c].f_mu);
}

// ---------------------------------------------------------------------------
// Same inputs → bit-identical outputs (fresh workspaces, different garbage),
// with 2 threads and with 1.
H_TEST(mlstm, deterministic) {
    phax_rng r = tu_rng("fcpu_mlstm.deterministic");
    prob p = prob_new(&r, 2, 130, 2, 24, 40, 0, 2, 3, 1.5);
    const float eps = (float)PHAX_MLSTM_EPS;
    float *h[2], *g[2][5];
    size_t n[5] = {p.nk, p.nk, p.nv, p.ng, p.ng};
    for (int rep = 0; rep < 2; rep++) {
        h[rep] = tu_fbuf(p.nv);
        cr_assert_eq(fast_fwd(be, h[rep], &p, eps, 16, NULL, NULL), PHAX_OK);
        for (int j = 0; j < 5; j++)
            g[rep][j] = tu_fbuf(n[j]), memset(g[rep][j], 0, n[j] * sizeof(float));
        cr_assert_eq(fast_bwd(be, g[rep][0], g[rep][1], g[rep][2], g[rep][3], g[rep][4], &p, eps, 16),
                     PHAX_OK);
    }
    cr_assert(memcmp(h[0], h[1], p.nv * sizeof(float)) == 0, "forward not deterministic");
    for (int j = 0; j < 5; j++)
        cr_assert(memcmp(g[0][j], g[1][j], n[j] * sizeof(float)) == 0,
                  "gradient %d not deterministic", j);
    // Each (b, h) sequence is computed by one thread in a fixed order, so even
    // the thread count does not change the bits (workspaces queried per count).
    int nt = be->get_threads ? be->get_threads() : 1;
    if (be->set_threads) be->set_threads(1);
    float *h1 = tu_fbuf(p.nv), *g1[5];
    cr_assert_eq(fast_fwd(be, h1, &p, eps, 16, NULL, NULL), PHAX_OK);
    for (int j = 0; j < 5; j++) g1[j] = tu_fbuf(n[j]), memset(g1[j], 0, n[j] * sizeof(float));
    cr_assert_eq(fast_bwd(be, g1[0], g1[1], g1[2], g1[3], g1[4], &p, eps, 16), PHAX_OK);
    if (be->set_threads) be->set_threads(nt);
    cr_assert(memcmp(h1, h[0], p.nv * sizeof(float)) == 0, "forward depends on the thread count");
    for (int j = 0; j < 5; j++) {
        cr_assert(memcmp(g1[j], g[0][j], n[j] * sizeof(float)) == 0,
                  "gradient %d depends on the thread count", j);
        tu_ffree(g1[j]);
    }
    tu_ffree(h1);
    for (int rep = 0; rep < 2; rep++) {
        tu_ffree(h[rep]);
        for (int j = 0; j < 5; j++) tu_ffree(g[rep][j]);
    }
    prob_free(&p);
}

// NULL gradients are skipped; every other gradient is bit-identical to the full call.
H_TEST(mlstm, null_grads) {
    phax_rng r = tu_rng("fcpu_mlstm.null_grads");
    prob p = prob_new(&r, 1, 70, 2, 24, 40, 0, 2, 3, 1.5);
    const float eps = (float)PHAX_MLSTM_EPS;
    size_t n[5] = {p.nk, p.nk, p.nv, p.ng, p.ng};
    float *full[5], *one[5];
    for (int j = 0; j < 5; j++) full[j] = tu_fbuf(n[j]), memset(full[j], 0, n[j] * sizeof(float));
    cr_assert_eq(fast_bwd(be, full[0], full[1], full[2], full[3], full[4], &p, eps, 16), PHAX_OK);
    for (int keep = 0; keep < 5; keep++) {
        for (int j = 0; j < 5; j++) one[j] = NULL;
        one[keep] = tu_fbuf(n[keep]);
        memset(one[keep], 0, n[keep] * sizeof(float));
        cr_assert_eq(fast_bwd(be, one[0], one[1], one[2], one[3], one[4], &p, eps, 16), PHAX_OK);
        cr_assert(tu_fintact(one[keep]));
        cr_assert(memcmp(one[keep], full[keep], n[keep] * sizeof(float)) == 0,
                  "gradient %d differs when the others are NULL", keep);
        tu_ffree(one[keep]);
    }
    cr_assert_eq(fast_bwd(be, NULL, NULL, NULL, NULL, NULL, &p, eps, 16), PHAX_OK);
    for (int j = 0; j < 5; j++) tu_ffree(full[j]);
    prob_free(&p);
}

// Backward ADDS: onto a random prior of the gradients' own size, the result
// minus the prior equals the gradient computed from zero to a few roundings
// (the adds happen in a few pieces), and overwriting or dropping would be off by
// the prior's or the gradient's whole norm.
H_TEST(mlstm, backward_adds) {
    phax_rng r = tu_rng("fcpu_mlstm.backward_adds");
    prob p = prob_new(&r, 2, 130, 2, 24, 40, 0, 2, 3, 1.5);
    const float eps = (float)PHAX_MLSTM_EPS;
    size_t n[5] = {p.nk, p.nk, p.nv, p.ng, p.ng};
    float *g0[5], *g1[5], *pr[5];
    for (int j = 0; j < 5; j++) g0[j] = tu_fbuf(n[j]), memset(g0[j], 0, n[j] * sizeof(float));
    cr_assert_eq(fast_bwd(be, g0[0], g0[1], g0[2], g0[3], g0[4], &p, eps, 16), PHAX_OK);
    for (int j = 0; j < 5; j++) {
        double s2 = 0;
        for (size_t i = 0; i < n[j]; i++) s2 += (double)g0[j][i] * g0[j][i];
        double rms = sqrt(s2 / n[j]);
        g1[j] = tu_fbuf(n[j]), pr[j] = tu_fbuf(n[j]);
        for (size_t i = 0; i < n[j]; i++) pr[j][i] = g1[j][i] = (float)(rms * phax_rng_normal(&r));
    }
    cr_assert_eq(fast_bwd(be, g1[0], g1[1], g1[2], g1[3], g1[4], &p, eps, 16), PHAX_OK);
    for (int j = 0; j < 5; j++) {
        cr_assert(tu_fintact(g1[j]));
        double d = 0, a = 0, b = 0;
        for (size_t i = 0; i < n[j]; i++) {
            double e = ((double)g1[j][i] - pr[j][i]) - g0[j][i];
            d += e * e, a += (double)pr[j][i] * pr[j][i], b += (double)g0[j][i] * g0[j][i];
        }
        d = sqrt(d), a = sqrt(a), b = sqrt(b);
        cr_assert(d <= 64.0 / 16777216.0 * (a + b),
                  "gradient %d: ‖(after − prior) − g0‖ = %.3e, "
                  "‖prior‖ = %.3e, ‖g0‖ = %.3e",
                  j, d, a, b);
        tu_ffree(g0[j]), tu_ffree(g1[j]), tu_ffree(pr[j]);
    }
    prob_free(&p);
}

// T = 0 does nothing (state passes through); invalid sizes fail with a message.
H_TEST(mlstm, sizes_and_errors) {
    float *h = tu_fbuf(4), *s = tu_fbuf(be->mlstm.state_len(1, 1)),
          *so = tu_fbuf(be->mlstm.state_len(1, 1));
    float x[4] = {0};
    void *ws = wsbuf(be->mlstm.fwd_ws(1, 0, 1, 1, 1, 0) + 64);
    s[0] = 0.5f, s[1] = 0.25f, s[2] = 1.0f;
    cr_assert_eq(be->mlstm.fwd(h, x, x, x, x, x, 1, 0, 1, 1, 1, 1e-6f, 0, s, so, ws),
                 PHAX_OK);
    cr_assert(isnan(h[0]) && tu_fintact(h) && tu_fintact(so));
    cr_assert(so[0] == 0.5f && so[1] == 0.25f && so[2] == 1.0f,
              "T = 0 must pass the state through");
    cr_assert_eq(
        be->mlstm.fwd(h, x, x, x, x, x, 0, 4, 1, 1, 1, 1e-6f, 0, NULL, NULL, ws),
        PHAX_ERR);
    cr_assert_eq(
        be->mlstm.bwd(h, h, h, h, h, x, x, x, x, x, x, 1, 4, 1, 0, 1, 1e-6f, 0, ws),
        PHAX_ERR);
    cr_assert(isnan(h[0]) && tu_fintact(h));
    free(ws), tu_ffree(h), tu_ffree(s), tu_ffree(so);
}
