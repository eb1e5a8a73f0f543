// ref Gated DeltaNet cell (ref/gdn.c, docs/spec.md §2.13): the forward against values by hand
// and against an independent recurrence written here (the state times explicit Householder-like
// matrices α(I − β k̂k̂ᵀ), the form the paper writes, where ref folds it into a rank-one update);
// the backward by central differences of every input (q, k, v, g, β, the initial state) through
// both outputs (o and the final state), with and without the L2 normalisation of q and k, at
// odd T, dk ≠ dv (neither a power of two), B = H = 2; and a step with β near 2 (the negative-
// eigenvalue variant: I − βk̂k̂ᵀ then flips k̂'s direction).
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "phax/ref.h"
#include "testutil.h"

static const double U = DBL_EPSILON;  // 2^-52

typedef struct {
    int B, T, H, dk, dv;
    size_t nq, nv, ng, ns;
    double *q, *k, *v, *g, *beta, *s0, *o, *sT, *go, *gsT;                // inputs, outputs, upstream
    double *dq, *dk_, *dv_, *dg, *dbeta, *ds0;                            // gradients (tu_buf)
    phax_gdn_cfg c;
} prob;

static prob prob_new(int B, int T, int H, int dk, int dv, int l2) {
    prob p = {.B = B, .T = T, .H = H, .dk = dk, .dv = dv};
    p.nq = (size_t)B * T * H * dk, p.nv = (size_t)B * T * H * dv, p.ng = (size_t)B * T * H, p.ns = (size_t)B * H * dk * dv;
    p.q = tu_buf(p.nq), p.k = tu_buf(p.nq), p.v = tu_buf(p.nv), p.g = tu_buf(p.ng), p.beta = tu_buf(p.ng);
    p.s0 = tu_buf(p.ns), p.o = tu_buf(p.nv), p.sT = tu_buf(p.ns), p.go = tu_buf(p.nv), p.gsT = tu_buf(p.ns);
    p.dq = tu_buf(p.nq), p.dk_ = tu_buf(p.nq), p.dv_ = tu_buf(p.nv), p.dg = tu_buf(p.ng), p.dbeta = tu_buf(p.ng);
    p.ds0 = tu_buf(p.ns);
    p.c = (phax_gdn_cfg){1 / sqrt((double)dk), l2};
    return p;
}

static void prob_free(prob *p) {
    double *all[] = {p->q, p->k, p->v, p->g, p->beta, p->s0, p->o, p->sT, p->go, p->gsT,
                     p->dq, p->dk_, p->dv_, p->dg, p->dbeta, p->ds0};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tu_free(all[i]);
}

// q, k, v ~ N(0, 1); g = log α with α in [0.5, 1) (the decays GDN learns are mostly near 1);
// β in [bmin, bmax]; s0 ~ N(0, 0.5²); upstream gradients N(0, 1).
static void prob_fill(prob *p, phax_rng *r, double bmin, double bmax) {
    for (size_t i = 0; i < p->nq; i++) p->q[i] = phax_rng_normal(r), p->k[i] = phax_rng_normal(r);
    for (size_t i = 0; i < p->nv; i++) p->v[i] = phax_rng_normal(r), p->go[i] = phax_rng_normal(r);
    for (size_t i = 0; i < p->ng; i++)
        p->g[i] = log(phax_rng_uniform_range(r, 0.5, 1.0)), p->beta[i] = phax_rng_uniform_range(r, bmin, bmax);
    for (size_t i = 0; i < p->ns; i++) p->s0[i] = 0.5 * phax_rng_normal(r), p->gsT[i] = phax_rng_normal(r);
}

static void fwd(prob *p) {
    cr_assert(ref_gdn_recurrent_fwd(p->o, p->sT, p->q, p->k, p->v, p->g, p->beta, p->s0, p->B, p->T, p->H, p->dk,
                                    p->dv, &p->c) == PHAX_OK, "%s", phax_error());
}

// --- 1. the forward ----------------------------------------------------------------------------
// T 1, dk 2, dv 1, without the normalisation (scale 1): S_1 = α S_0 (I − β k kᵀ) + β v kᵀ, o = S_1 q.
// k = (1, 0), q = (0.5, 2), v = 3, α = e^{−0.5}, β = 0.25, S_0 = (2, −1):
// S_0 (I − β k kᵀ) = (2·0.75, −1) = (1.5, −1); S_1 = α (1.5, −1) + (0.75, 0); o = 0.5 S_1[0] + 2 S_1[1].
Test(gdn, known_T1) {
    double q[2] = {0.5, 2}, k[2] = {1, 0}, v[1] = {3}, g[1] = {-0.5}, beta[1] = {0.25}, s0[2] = {2, -1}, o[1] = {NAN},
           sT[2] = {NAN, NAN};
    phax_gdn_cfg c = {1, 0};
    cr_assert(ref_gdn_recurrent_fwd(o, sT, q, k, v, g, beta, s0, 1, 1, 1, 2, 1, &c) == PHAX_OK);
    double a = exp(-0.5), s1a = a * 1.5 + 0.75, s1b = -a, want = 0.5 * s1a + 2 * s1b;
    cr_expect(fabs(sT[0] - s1a) <= 4 * U && fabs(sT[1] - s1b) <= 4 * U, "sT (%.17g, %.17g)", sT[0], sT[1]);
    cr_expect(fabs(o[0] - want) <= 8 * U, "o %.17g, want %.17g", o[0], want);
    // From a zero state: o = β v (k̂·q̂), with k̂ = k/sqrt(1 + 1e-6) and q̂ = q/sqrt(4.25 + 1e-6)/√2.
    c = (phax_gdn_cfg){1 / sqrt(2.0), 1};
    cr_assert(ref_gdn_recurrent_fwd(o, NULL, q, k, v, g, beta, NULL, 1, 1, 1, 2, 1, &c) == PHAX_OK);
    want = 0.25 * 3 * (1 / sqrt(1 + 1e-6)) * (0.5 / sqrt(4.25 + 1e-6)) / sqrt(2.0);
    cr_expect(fabs(o[0] - want) <= 8 * U * fabs(want), "o %.17g, want %.17g", o[0], want);
}

// The independent recurrence: S_t = S_{t−1} M_t + β v k̂ᵀ with M_t = α(I − β k̂k̂ᵀ) formed as a
// dk × dk matrix, the normalisation written again here.
static void householder_fwd(const prob *p, double *o, double *sT) {
    int dk = p->dk, dv = p->dv;
    double *S = malloc((size_t)dk * dv * 8), *S2 = malloc((size_t)dk * dv * 8), *M = malloc((size_t)dk * dk * 8);
    double *qh = malloc((size_t)dk * 8), *kh = malloc((size_t)dk * 8);
    cr_assert(S && S2 && M && qh && kh);
    for (int b = 0; b < p->B; b++)
        for (int h = 0; h < p->H; h++) {
            const double *st0 = p->s0 + ((size_t)b * p->H + h) * dk * dv;  // stored (dk, dv)
            for (int i = 0; i < dv; i++)
                for (int j = 0; j < dk; j++) S[i * dk + j] = st0[j * dv + i];
            for (int t = 0; t < p->T; t++) {
                size_t gi = ((size_t)b * p->T + t) * p->H + h;
                const double *qt = p->q + gi * dk, *kt = p->k + gi * dk, *vt = p->v + gi * dv;
                double nq = 0, nk = 0;
                for (int j = 0; j < dk; j++) nq += qt[j] * qt[j], nk += kt[j] * kt[j];
                for (int j = 0; j < dk; j++) {
                    qh[j] = p->c.scale * qt[j] / (p->c.qk_l2norm ? sqrt(nq + 1e-6) : 1);
                    kh[j] = kt[j] / (p->c.qk_l2norm ? sqrt(nk + 1e-6) : 1);
                }
                double al = exp(p->g[gi]), be = p->beta[gi];
                for (int a = 0; a < dk; a++)
                    for (int c = 0; c < dk; c++) M[a * dk + c] = al * ((a == c) - be * kh[a] * kh[c]);
                for (int i = 0; i < dv; i++)
                    for (int c = 0; c < dk; c++) {
                        double s = be * vt[i] * kh[c];
                        for (int a = 0; a < dk; a++) s += S[i * dk + a] * M[a * dk + c];
                        S2[i * dk + c] = s;
                    }
                memcpy(S, S2, (size_t)dk * dv * 8);
                for (int i = 0; i < dv; i++) {
                    double s = 0;
                    for (int j = 0; j < dk; j++) s += S[i * dk + j] * qh[j];
                    o[gi * dv + i] = s;
                }
            }
            for (int i = 0; i < dv; i++)
                for (int j = 0; j < dk; j++) sT[((size_t)b * p->H + h) * dk * dv + (size_t)j * dv + i] = S[i * dk + j];
        }
    free(S), free(S2), free(M), free(qh), free(kh);
}

// Tolerance: each step adds at most ~(2dk + 4)·u of the state's size in either form, so over T
// steps T·(2dk + 4)·u relative to the largest state entry (T 33, dk 7: 33·18·2.2e-16 ≈ 1.3e-13);
// the test takes 1e-12 of max(1, max|S|) (the outputs read S through q̂, ‖q̂‖ ≤ 1 with the
// normalisation). With it, α ≤ 1 and ‖I − βk̂k̂ᵀ‖₂ ≤ 1 for β in [0, 2] keep the state bounded;
// without it (raw k, ‖k‖² ~ dk) the state grows, and the bound grows with it.
static void versus_householder(int l2, double bmax, const char *label) {
    phax_rng r = tu_rng(label);
    prob p = prob_new(2, 33, 2, 7, 5, l2);
    prob_fill(&p, &r, 0.0, bmax);
    for (size_t i = 0; i < p.nv; i++) p.o[i] = NAN;  // poison: the forward must overwrite
    for (size_t i = 0; i < p.ns; i++) p.sT[i] = NAN;
    fwd(&p);
    double *o2 = tu_buf(p.nv), *s2 = tu_buf(p.ns);
    householder_fwd(&p, o2, s2);
    double scale = fmax(1, tu_max_abs(s2, p.ns)), eo = tu_max_abs_diff(p.o, o2, p.nv), es = tu_max_abs_diff(p.sT, s2, p.ns);
    printf("[%s] max|o - householder| %.3g, max|sT - householder| %.3g (state scale %.3g)\n", label, eo, es, scale);
    cr_expect(eo <= 1e-12 * scale && es <= 1e-12 * scale, "%s: o %.3g, sT %.3g at scale %.3g", label, eo, es, scale);
    tu_free(o2), tu_free(s2);
    prob_free(&p);
}
Test(gdn, matches_householder_products_l2) { versus_householder(1, 1.0, "gdn_householder_l2"); }
Test(gdn, matches_householder_products_raw) { versus_householder(0, 1.0, "gdn_householder_raw"); }
Test(gdn, matches_householder_products_beta_to_2) { versus_householder(1, 2.0, "gdn_householder_beta2"); }

// The chunkwise (WY/UT) form against the recurrent one: chunks of 1 (every step its own
// chunk), 3 and 4 (partial last chunks at T 13 and 33), 16 and one longer than T, with and
// without the normalisation, β up to 2. Both float64; the chunkwise sums over up to C terms with
// decays e^{G_t − G_s} ≤ 1 where the recurrent form updates a state: the same T·(2dk + 4)·u
// per unit of state as above, 1e-12 of max(1, max|S|).
static void chunk_case(int T, int chunk, int l2, double bmax, const char *label) {
    phax_rng r = tu_rng(label);
    prob p = prob_new(2, T, 2, 7, 5, l2);
    prob_fill(&p, &r, 0.0, bmax);
    fwd(&p);
    double *o2 = tu_buf(p.nv), *s2 = tu_buf(p.ns);
    cr_assert(ref_gdn_chunkwise_fwd(o2, s2, p.q, p.k, p.v, p.g, p.beta, p.s0, p.B, p.T, p.H, p.dk, p.dv, chunk, &p.c) ==
              PHAX_OK, "%s", phax_error());
    double scale = fmax(1, tu_max_abs(p.sT, p.ns)), eo = tu_max_abs_diff(p.o, o2, p.nv), es = tu_max_abs_diff(p.sT, s2, p.ns);
    printf("[%s] T %d chunk %d: max|o diff| %.3g, max|sT diff| %.3g (state scale %.3g)\n", label, T, chunk, eo, es, scale);
    cr_expect(eo <= 1e-12 * scale && es <= 1e-12 * scale, "%s: T %d chunk %d: o %.3g sT %.3g", label, T, chunk, eo, es);
    cr_expect(tu_intact(o2) && tu_intact(s2));
    tu_free(o2), tu_free(s2);
    prob_free(&p);
}
Test(gdn, chunkwise_equals_recurrent) {
    static const int chunks[] = {1, 3, 4, 16, 64};
    for (int i = 0; i < 5; i++) {
        chunk_case(13, chunks[i], 1, 1.0, "gdn_chunk_T13_l2");
        chunk_case(33, chunks[i], 0, 1.0, "gdn_chunk_T33_raw");
        chunk_case(33, chunks[i], 1, 2.0, "gdn_chunk_T33_beta2");
    }
    chunk_case(1, 4, 1, 1.0, "gdn_chunk_T1");
    double x = 0;  // chunk 0 is refused
    phax_gdn_cfg c = {1, 1};
    cr_expect(ref_gdn_chunkwise_fwd(&x, NULL, &x, &x, &x, &x, &x, NULL, 1, 1, 1, 1, 1, 0, &c) == PHAX_ERR);
}

// The chunkwise backward against the recurrent one (which the central differences below
// check): every gradient, chunks of 1, 3, 4 (partial last chunks), 16 and longer than T, with
// and without the normalisation, β up to 2, with an initial state and a final-state gradient and
// without either. Both float64, both reverse mode of the same function by different routes: the
// same 1e-12 of the gradient's scale (max(1, max|grad|)) as the forwards above.
static void chunk_bwd_case(int T, int chunk, int l2, double bmax, int with_state, const char *label) {
    phax_rng r = tu_rng(label);
    prob p = prob_new(2, T, 2, 7, 5, l2);
    prob_fill(&p, &r, 0.0, bmax);
    const double *s0 = with_state ? p.s0 : NULL, *gsT = with_state ? p.gsT : NULL;
    double *a[6] = {p.dq, p.dk_, p.dv_, p.dg, p.dbeta, p.ds0};
    size_t n[6] = {p.nq, p.nq, p.nv, p.ng, p.ng, p.ns};
    double *b2[6];
    for (int i = 0; i < 6; i++) memset(a[i], 0, n[i] * sizeof(double)), b2[i] = tu_buf(n[i]), memset(b2[i], 0, n[i] * sizeof(double));
    cr_assert(ref_gdn_recurrent_bwd(p.dq, p.dk_, p.dv_, p.dg, p.dbeta, p.ds0, p.go, gsT, p.q, p.k, p.v, p.g, p.beta, s0,
                                    p.B, p.T, p.H, p.dk, p.dv, &p.c) == PHAX_OK);
    cr_assert(ref_gdn_chunkwise_bwd(b2[0], b2[1], b2[2], b2[3], b2[4], b2[5], p.go, gsT, p.q, p.k, p.v, p.g, p.beta, s0,
                                    p.B, p.T, p.H, p.dk, p.dv, chunk, &p.c) == PHAX_OK, "%s", phax_error());
    static const char *nm[6] = {"dq", "dk", "dv", "dg", "dbeta", "ds0"};
    for (int i = 0; i < 6; i++) {
        double scale = fmax(1, tu_max_abs(a[i], n[i])), e = tu_max_abs_diff(a[i], b2[i], n[i]);
        cr_expect(e <= 1e-12 * scale && tu_intact(b2[i]), "%s: T %d chunk %d %s: max diff %.3g (scale %.3g)", label, T,
                  chunk, nm[i], e, scale);
        if (i == 3) printf("[%s] T %d chunk %d: dg max diff %.3g (scale %.3g)\n", label, T, chunk, e, scale);
        tu_free(b2[i]);
    }
    prob_free(&p);
}
Test(gdn, chunkwise_backward_equals_recurrent) {
    static const int chunks[] = {1, 3, 4, 16, 64};
    for (int i = 0; i < 5; i++) {
        chunk_bwd_case(13, chunks[i], 1, 1.0, 1, "gdn_chunk_bwd_T13_l2");
        chunk_bwd_case(33, chunks[i], 0, 1.0, 1, "gdn_chunk_bwd_T33_raw");
        chunk_bwd_case(33, chunks[i], 1, 2.0, 1, "gdn_chunk_bwd_T33_beta2");
        chunk_bwd_case(13, chunks[i], 1, 1.0, 0, "gdn_chunk_bwd_T13_nostate");
    }
    chunk_bwd_case(1, 4, 1, 1.0, 1, "gdn_chunk_bwd_T1");
    double x = 0;  // chunk 0 is refused
    phax_gdn_cfg c = {1, 1};
    cr_expect(ref_gdn_chunkwise_bwd(&x, &x, &x, &x, &x, NULL, &x, NULL, &x, &x, &x, &x, &x, NULL, 1, 1, 1, 1, 1, 0, &c) ==
              PHAX_ERR);
}

// --- 2. the backward by central differences ----------------------------------------------------
// L = Σ go ⊙ o + Σ gsT ⊙ sT, through every input.
static double gc_loss(void *ctx) {
    prob *p = ctx;
    fwd(p);
    return tu_dot(p->o, p->go, p->nv) + tu_dot(p->sT, p->gsT, p->ns);
}
static double gc_mag(void *ctx) {
    prob *p = ctx;
    fwd(p);
    double s = 0;
    for (size_t i = 0; i < p->nv; i++) s += fabs(p->o[i] * p->go[i]);
    for (size_t i = 0; i < p->ns; i++) s += fabs(p->sT[i] * p->gsT[i]);
    return s;
}
static void gc_bwd(void *ctx) {
    prob *p = ctx;
    cr_assert(ref_gdn_recurrent_bwd(p->dq, p->dk_, p->dv_, p->dg, p->dbeta, p->ds0, p->go, p->gsT, p->q, p->k, p->v,
                                    p->g, p->beta, p->s0, p->B, p->T, p->H, p->dk, p->dv, &p->c) == PHAX_OK);
}

// The default step (1e-6 of max(1, |x|)) and tolerance (1e-6 of the tensor's gradient scale):
// the function is smooth (exp, products, 1/sqrt of Σx² + 1e-6 ≥ 1e-6), its inputs O(1), so the
// central difference's truncation error (~h²·|f'''|) and rounding (~u·|L|/h ≈ 1e-10) are far below.
static void grad_case(const char *label, int T, int dk, int dv, int l2, double bmax) {
    phax_rng r = tu_rng(label);
    prob p = prob_new(2, T, 2, dk, dv, l2);
    prob_fill(&p, &r, 0.05, bmax);
    tu_gc_opts o = tu_gc_default();
    tu_tensor ts[] = {{"q", p.q, p.dq, p.nq},       {"k", p.k, p.dk_, p.nq},          {"v", p.v, p.dv_, p.nv},
                      {"g", p.g, p.dg, p.ng},       {"beta", p.beta, p.dbeta, p.ng}, {"s0", p.s0, p.ds0, p.ns}};
    tu_op op = {gc_loss, gc_bwd, gc_mag, &p};
    cr_assert(tu_gradcheck(label, op, ts, 6, &r, &o));
    prob_free(&p);
}
Test(gdn, grad_T7_l2) { grad_case("gdn_grad_T7_l2", 7, 5, 3, 1, 1.0); }
Test(gdn, grad_T7_raw) { grad_case("gdn_grad_T7_raw", 7, 5, 3, 0, 1.0); }
Test(gdn, grad_T1) { grad_case("gdn_grad_T1", 1, 6, 5, 1, 1.0); }
Test(gdn, grad_T13_beta_to_2) { grad_case("gdn_grad_T13_beta2", 13, 3, 7, 1, 2.0); }

// NULL gradients are skipped, and the wanted ones equal those of a call that wants them all
// (both add into zeros).
Test(gdn, null_gradients_skipped) {
    phax_rng r = tu_rng("gdn_null");
    prob p = prob_new(1, 5, 2, 4, 3, 1);
    prob_fill(&p, &r, 0.1, 1.0);
    double *dq2 = tu_buf(p.nq), *dg2 = tu_buf(p.ng);
    double *dq3 = tu_buf(p.nq), *dk3 = tu_buf(p.nq), *dv3 = tu_buf(p.nv), *dg3 = tu_buf(p.ng), *db3 = tu_buf(p.ng);
    double *z[] = {dq2, dg2, dq3, dk3, dv3, dg3, db3};  // tu_buf starts as NaN: the gradients start at 0
    for (int i = 0; i < 7; i++) memset(z[i], 0, tu_len(z[i]) * sizeof(double));
    cr_assert(ref_gdn_recurrent_bwd(dq2, NULL, NULL, dg2, NULL, NULL, p.go, NULL, p.q, p.k, p.v, p.g, p.beta, NULL, 1,
                                    5, 2, 4, 3, &p.c) == PHAX_OK);
    cr_assert(ref_gdn_recurrent_bwd(dq3, dk3, dv3, dg3, db3, NULL, p.go, NULL, p.q, p.k, p.v, p.g, p.beta, NULL, 1, 5,
                                    2, 4, 3, &p.c) == PHAX_OK);
    cr_expect(tu_max_abs_diff(dq2, dq3, p.nq) == 0 && tu_max_abs_diff(dg2, dg3, p.ng) == 0 && tu_max_abs(dq3, p.nq) > 0);
    cr_expect(tu_intact(dq2) && tu_intact(dg2) && tu_intact(dq3) && tu_intact(db3));
    tu_free(dq2), tu_free(dg2), tu_free(dq3), tu_free(dk3), tu_free(dv3), tu_free(dg3), tu_free(db3);
    prob_free(&p);
}

// --- the layer's short convolution (ref_gdn_conv_*) ---------------------------------------------

static double silu_d(double a) { return a / (1 + exp(-a)); }

// Values by hand: B 1, T 3, C 2, K 2; w[c, 1] weighs the current step, w[c, 0] the one before.
Test(gdn, conv_known) {
    const double x[6] = {1, -2, 0.5, 3, -1, 0.25}, w[4] = {0.5, 2, -1, 0.25};  // x: (T 3, C 2); w: (C 2, K 2)
    double y[6];
    cr_assert(ref_gdn_conv_fwd(y, x, w, 1, 3, 2, 2) == PHAX_OK);
    const double a[6] = {2 * 1, 0.25 * -2, 0.5 * 1 + 2 * 0.5, -1 * -2 + 0.25 * 3, 0.5 * 0.5 + 2 * -1, -1 * 3 + 0.25 * 0.25};
    for (int i = 0; i < 6; i++) cr_expect(y[i] == silu_d(a[i]), "y[%d] = %.17g, by hand %.17g", i, y[i], silu_d(a[i]));
}

// Against the definition written another way: each sequence padded on the left with K − 1 zeros,
// then correlated (PyTorch's Conv1d with padding K − 1, cut to the first T outputs); K longer
// than T too. Both sum the same products in the same order: bit for bit.
Test(gdn, conv_equals_padded_correlation) {
    phax_rng r = tu_rng("gdn_conv_padded");
    const int B = 2, C = 5, shapes[][2] = {{7, 4}, {3, 4}, {9, 1}, {1, 3}};
    for (int s = 0; s < 4; s++) {
        const int T = shapes[s][0], K = shapes[s][1];
        double *x = tu_buf((size_t)B * T * C), *w = tu_buf((size_t)C * K), *y = tu_buf((size_t)B * T * C);
        for (size_t i = 0; i < tu_len(x); i++) x[i] = phax_rng_normal(&r);
        for (size_t i = 0; i < tu_len(w); i++) w[i] = phax_rng_normal(&r);
        cr_assert(ref_gdn_conv_fwd(y, x, w, B, T, C, K) == PHAX_OK);
        double *pad = calloc((size_t)(T + K - 1), sizeof *pad);
        cr_assert(pad);
        for (int b = 0; b < B; b++)
            for (int c = 0; c < C; c++) {
                for (int t = 0; t < T; t++) pad[K - 1 + t] = x[((size_t)b * T + t) * C + c];
                for (int t = 0; t < T; t++) {
                    double a = 0;
                    for (int j = 0; j < K; j++)
                        if (t + j >= K - 1) a += w[(size_t)c * K + j] * pad[t + j];
                    cr_expect(y[((size_t)b * T + t) * C + c] == silu_d(a), "T %d K %d: b %d t %d c %d", T, K, b, t, c);
                }
            }
        free(pad);
        cr_assert(tu_intact(y));
        tu_free(x), tu_free(w), tu_free(y);
    }
}

// The backward by central differences of L = Σ r ⊙ y (r ~ N(0,1)) in every element of x and w,
// step h = 1e-5: the truncation error h²/6·|L‴| (≤ ~1e-10 here: L is a sum of SiLUs of O(1)
// arguments, whose third derivatives are below 0.5) and the rounding error ~2⁻⁵²·Σ|r y|/h
// (~1e-10) both far below 1e-7 of the gradients' scale; a missing or misplaced term is O(1).
// The gradients are added into 0.5.
Test(gdn, conv_grad_finite_differences) {
    phax_rng r = tu_rng("gdn_conv_grad");
    const int B = 2, T = 6, C = 3, K = 4;
    const size_t nx = (size_t)B * T * C, nw = (size_t)C * K;
    double *x = tu_buf(nx), *w = tu_buf(nw), *y = tu_buf(nx), *dy = tu_buf(nx), *dx = tu_buf(nx), *dw = tu_buf(nw);
    for (size_t i = 0; i < nx; i++) x[i] = phax_rng_normal(&r), dy[i] = phax_rng_normal(&r), dx[i] = 0.5;
    for (size_t i = 0; i < nw; i++) w[i] = 0.7 * phax_rng_normal(&r), dw[i] = 0.5;
    cr_assert(ref_gdn_conv_bwd(dx, dw, dy, x, w, B, T, C, K) == PHAX_OK);
    const double h = 1e-5;
    double scale = 0;
    for (size_t i = 0; i < nx; i++) scale = fmax(scale, fabs(dx[i] - 0.5));
    for (size_t i = 0; i < nw; i++) scale = fmax(scale, fabs(dw[i] - 0.5));
    for (int which = 0; which < 2; which++) {
        double *p = which ? w : x, *g = which ? dw : dx;
        const size_t n = which ? nw : nx;
        for (size_t i = 0; i < n; i++) {
            double L[2], keep = p[i];
            for (int sgn = 0; sgn < 2; sgn++) {
                p[i] = keep + (sgn ? -h : h);
                cr_assert(ref_gdn_conv_fwd(y, x, w, B, T, C, K) == PHAX_OK);
                L[sgn] = 0;
                for (size_t e = 0; e < nx; e++) L[sgn] += dy[e] * y[e];
            }
            p[i] = keep;
            const double fd = (L[0] - L[1]) / (2 * h), err = fabs(fd - (g[i] - 0.5));
            cr_expect(err <= 1e-7 * scale, "d%s[%zu]: backward %.12g, central difference %.12g", which ? "w" : "x", i,
                      g[i] - 0.5, fd);
        }
    }
    // x's last step reaches no output but its own, w's first tap none at t < K − 1: both still checked above.
    cr_assert(tu_intact(dx) && tu_intact(dw) && tu_intact(y));
    // NULL gradients are skipped, the other unchanged
    double *dx2 = tu_buf(nx);
    for (size_t i = 0; i < nx; i++) dx2[i] = 0.5;
    cr_assert(ref_gdn_conv_bwd(dx2, NULL, dy, x, w, B, T, C, K) == PHAX_OK);
    cr_expect(tu_max_abs_diff(dx2, dx, nx) == 0);
    cr_assert(ref_gdn_conv_bwd(NULL, NULL, dy, x, w, B, T, C, K) == PHAX_OK);
    tu_free(x), tu_free(w), tu_free(y), tu_free(dy), tu_free(dx), tu_free(dw), tu_free(dx2);
}

Test(gdn, conv_bad_sizes_refused) {
    double a[4] = {0}, w[4] = {0};
    cr_expect(ref_gdn_conv_fwd(a, a, w, 1, 2, 2, 0) == PHAX_ERR && strstr(phax_error(), "K=0"), "%s", phax_error());
    cr_expect(ref_gdn_conv_fwd(a, a, w, 0, 2, 2, 1) == PHAX_ERR);
    cr_expect(ref_gdn_conv_bwd(a, w, a, a, w, 1, -1, 2, 1) == PHAX_ERR);
    cr_expect(ref_gdn_conv_fwd(a, a, w, 1, 0, 2, 1) == PHAX_OK);  // T 0: nothing to do
}

// --- the layer's gates (ref_gdn_gates_*) --------------------------------------------------------

// Values by hand, and the backward by central differences of L = Σ r_g ⊙ g + Σ r_β ⊙ β in every
// element of a, b, A_log, dt_bias (h = 1e-6: truncation h²/6·|L‴| ~ 1e-12·|L| and rounding
// 2⁻⁵²·Σ|r g|/h ~ 1e-9, both far below 1e-6 of the gradients' scale; a term missing or on the
// wrong input is O(1)). z = a + dt_bias spans both branches of the stable softplus (|z| to ~9).
Test(gdn, gates_known_and_grad) {
    const double a1[2] = {0.5, -3}, b1[2] = {1, -2}, Al[2] = {log(2.0), 0}, dt[2] = {-0.5, 1};
    double g1[2], be1[2];
    cr_assert(ref_gdn_gates_fwd(g1, be1, a1, b1, Al, dt, 1, 2) == PHAX_OK);
    cr_expect(fabs(g1[0] - -2 * log(2.0)) <= 4 * U && fabs(g1[1] - -log1p(exp(-2.0))) <= 4 * U, "%.17g %.17g", g1[0], g1[1]);
    cr_expect(fabs(be1[0] - 1 / (1 + exp(-1.0))) <= 2 * U && fabs(be1[1] - 1 / (1 + exp(2.0))) <= 2 * U);

    phax_rng r = tu_rng("gdn_gates_grad");
    const size_t n = 7;
    const int H = 3;
    const size_t ne = n * H;
    double *a = tu_buf(ne), *b = tu_buf(ne), *A = tu_buf(H), *d = tu_buf(H), *rg = tu_buf(ne), *rb = tu_buf(ne);
    double *g = tu_buf(ne), *be = tu_buf(ne), *da = tu_buf(ne), *db = tu_buf(ne), *dA = tu_buf(H), *dd = tu_buf(H);
    for (size_t i = 0; i < ne; i++) a[i] = 3 * phax_rng_normal(&r), b[i] = 3 * phax_rng_normal(&r);
    for (size_t i = 0; i < ne; i++) rg[i] = phax_rng_normal(&r), rb[i] = phax_rng_normal(&r), da[i] = db[i] = 0;
    for (int h = 0; h < H; h++) A[h] = log(1 + 15 * phax_rng_uniform(&r)), d[h] = -2 - 4 * phax_rng_uniform(&r), dA[h] = dd[h] = 0;
    cr_assert(ref_gdn_gates_bwd(da, db, dA, dd, rg, rb, a, b, A, d, n, H) == PHAX_OK);
    double scale = 0;
    for (size_t i = 0; i < ne; i++) scale = fmax(scale, fmax(fabs(da[i]), fabs(db[i])));
    for (int h = 0; h < H; h++) scale = fmax(scale, fmax(fabs(dA[h]), fabs(dd[h])));
    double *ps[4] = {a, b, A, d}, *gs[4] = {da, db, dA, dd};
    const size_t ns[4] = {ne, ne, (size_t)H, (size_t)H};
    const char *nm[4] = {"a", "b", "A_log", "dt_bias"};
    const double hs = 1e-6;
    for (int k = 0; k < 4; k++)
        for (size_t i = 0; i < ns[k]; i++) {
            double L[2], keep = ps[k][i];
            for (int s = 0; s < 2; s++) {
                ps[k][i] = keep + (s ? -hs : hs);
                cr_assert(ref_gdn_gates_fwd(g, be, a, b, A, d, n, H) == PHAX_OK);
                L[s] = 0;
                for (size_t e = 0; e < ne; e++) L[s] += rg[e] * g[e] + rb[e] * be[e];
            }
            ps[k][i] = keep;
            const double fd = (L[0] - L[1]) / (2 * hs);
            cr_expect(fabs(fd - gs[k][i]) <= 1e-6 * scale, "d%s[%zu]: backward %.12g, central difference %.12g", nm[k], i,
                      gs[k][i], fd);
        }
    cr_expect(ref_gdn_gates_fwd(g, be, a, b, A, d, n, 0) == PHAX_ERR);
    double *all[] = {a, b, A, d, rg, rb, g, be, da, db, dA, dd};
    for (int i = 0; i < 12; i++) {
        cr_expect(tu_intact(all[i]));
        tu_free(all[i]);
    }
}

// ============================================================================================
// The layer (ref_gdn_layer_*, docs/spec.md §2.13 "The layer")
// ============================================================================================

enum { LW_N = 13 };  // the layer's weight tensors, in ref_gdn_layer_w's order
static const char *const lw_name[LW_N] = {"wq", "wk", "wv", "conv_q", "conv_k", "conv_v", "wa",
                                          "wb", "A_log", "dt_bias", "norm", "wg", "wo"};
typedef struct {
    int B, T, d, H, K;
    size_t n, len[LW_N];
    double *w[LW_N], *gw[LW_N], *x, *dx, *y, *dy;
} layer_prob;

static ref_gdn_layer_w lp_w(const layer_prob *p) {
    double *const *w = p->w;
    return (ref_gdn_layer_w){w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8], w[9], w[10], w[11], w[12]};
}
static ref_gdn_layer_g lp_g(const layer_prob *p) {
    double *const *g = p->gw;
    return (ref_gdn_layer_g){g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12]};
}

// Weights as the layer's init draws them (docs/spec.md §4), wider so every path carries signal:
// projections N(0, 1/d), convolution taps U(−1/√K, 1/√K)·2, A_log = log U(1, 16), dt_bias the
// inverse softplus of U(1e-3, 0.1), norm 1 + N(0, 0.1²); x and dy N(0, 1).
static layer_prob layer_new(phax_rng *r, int B, int T, int d, int H, int K) {
    layer_prob p = {.B = B, .T = T, .d = d, .H = H, .K = K, .n = (size_t)B * T};
    size_t dh = (size_t)d / 2, dd = (size_t)d * d;
    const size_t len[LW_N] = {dh * d, dh * d, dd, dh * K, dh * K, (size_t)d * K, (size_t)H * d, (size_t)H * d,
                              (size_t)H, (size_t)H, (size_t)d / H, dd, dd};
    for (int i = 0; i < LW_N; i++) {
        p.len[i] = len[i], p.w[i] = tu_buf(len[i]), p.gw[i] = tu_buf(len[i]);
        tu_fill(p.gw[i], len[i], 0);
    }
    int proj[] = {0, 1, 2, 6, 7, 11, 12};
    for (size_t j = 0; j < sizeof proj / sizeof *proj; j++) tu_fill_normal(p.w[proj[j]], len[proj[j]], r, 1 / sqrt((double)d));
    for (int i = 3; i <= 5; i++) tu_fill_uniform(p.w[i], len[i], r, -2 / sqrt((double)K), 2 / sqrt((double)K));
    for (int h = 0; h < H; h++) {
        p.w[8][h] = log(phax_rng_uniform_range(r, 1, 16));
        double dt = phax_rng_uniform_range(r, 1e-3, 0.1);
        p.w[9][h] = dt + log(-expm1(-dt));  // softplus(dt_bias) = dt
    }
    for (int i = 0; i < d / H; i++) p.w[10][i] = 1 + 0.1 * phax_rng_normal(r);
    size_t nx = p.n * d;
    p.x = tu_buf(nx), p.dx = tu_buf(nx), p.y = tu_buf(nx), p.dy = tu_buf(nx);
    tu_fill_normal(p.x, nx, r, 1), tu_fill_normal(p.dy, nx, r, 1), tu_fill(p.dx, nx, 0);
    return p;
}
static void layer_free(layer_prob *p) {
    for (int i = 0; i < LW_N; i++) tu_free(p->w[i]), tu_free(p->gw[i]);
    tu_free(p->x), tu_free(p->dx), tu_free(p->y), tu_free(p->dy);
}
static void layer_fwd(layer_prob *p) {
    ref_gdn_layer_w w = lp_w(p);
    cr_assert(ref_gdn_layer_fwd(p->y, p->x, &w, p->B, p->T, p->d, p->H, p->K, 1e-6) == PHAX_OK, "%s", phax_error());
}
static double lgc_loss(void *ctx) {
    layer_prob *p = ctx;
    layer_fwd(p);
    return tu_dot(p->y, p->dy, p->n * p->d);
}
static double lgc_mag(void *ctx) {
    layer_prob *p = ctx;
    layer_fwd(p);
    double s = 0;
    for (size_t i = 0; i < p->n * p->d; i++) s += fabs(p->y[i] * p->dy[i]);
    return s;
}
static void lgc_bwd(void *ctx) {
    layer_prob *p = ctx;
    ref_gdn_layer_w w = lp_w(p);
    ref_gdn_layer_g g = lp_g(p);
    cr_assert(ref_gdn_layer_bwd(p->dx, &g, p->dy, p->x, &w, p->B, p->T, p->d, p->H, p->K, 1e-6) == PHAX_OK, "%s",
              phax_error());
}

// The forward at T 1 by hand, from the ops' definitions alone: the convolution sees only its
// last tap, the cell's state is β v k̂ᵀ, so o = β (k̂·q̂) v per head; then y = (RMSNorm_head(o) ⊙
// SiLU(x Wgᵀ)) Woᵀ, the RMSNorm over each head's dv values with one weight (dv). A layer that routes a weight to the wrong place (conv_k on q, wa for wb, the
// norm over the wrong width) fails it.
Test(gdn, layer_T1_by_hand) {
    phax_rng r = tu_rng("gdn_layer_T1");
    const int d = 12, H = 2, K = 4, dk = d / 2 / H, dv = d / H;
    layer_prob p = layer_new(&r, 1, 1, d, H, K);
    layer_fwd(&p);
    double q[6], k[6], v[12], o[12], h[12];
    for (int c = 0; c < d; c++) {
        double sq = 0, sk = 0, sv = 0;
        for (int i = 0; i < d; i++) {
            if (c < d / 2) sq += p.w[0][c * d + i] * p.x[i], sk += p.w[1][c * d + i] * p.x[i];
            sv += p.w[2][c * d + i] * p.x[i];
        }
        double silu_v = sv * p.w[5][c * K + K - 1];
        v[c] = silu_v / (1 + exp(-silu_v));
        if (c < d / 2) {
            double a = sq * p.w[3][c * K + K - 1], b = sk * p.w[4][c * K + K - 1];
            q[c] = a / (1 + exp(-a)), k[c] = b / (1 + exp(-b));
        }
    }
    for (int hh = 0; hh < H; hh++) {
        double bpre = 0, nq = 0, nk = 0, kq = 0;
        for (int i = 0; i < d; i++) bpre += p.w[7][hh * d + i] * p.x[i];
        double beta = 1 / (1 + exp(-bpre));
        for (int j = 0; j < dk; j++) {
            double qj = q[hh * dk + j], kj = k[hh * dk + j];
            nq += qj * qj, nk += kj * kj, kq += qj * kj;
        }
        kq *= 1 / sqrt((double)dk) / sqrt(nq + 1e-6) / sqrt(nk + 1e-6);
        double ms = 0;
        for (int j = 0; j < dv; j++) o[hh * dv + j] = beta * kq * v[hh * dv + j], ms += o[hh * dv + j] * o[hh * dv + j];
        double rs = 1 / sqrt(ms / dv + 1e-6);
        for (int j = 0; j < dv; j++) {
            int c = hh * dv + j;
            double z = 0;
            for (int i = 0; i < d; i++) z += p.w[11][c * d + i] * p.x[i];
            h[c] = o[c] * rs * p.w[10][j] * z / (1 + exp(-z));
        }
    }
    double worst = 0, scale = 0;
    for (int c = 0; c < d; c++) {
        double y = 0;
        for (int i = 0; i < d; i++) y += p.w[12][c * d + i] * h[i];
        worst = fmax(worst, fabs(y - p.y[c])), scale = fmax(scale, fabs(y));
    }
    // Both sides are O(d) double operations on O(1) values: 1e3·u of the scale is far above their
    // rounding, and far below any misrouted weight's effect (O(scale)).
    cr_expect(worst <= 1e3 * U * scale && scale > 1e-3, "T 1 by hand: |Δ| %.3g, scale %.3g", worst, scale);
    cr_expect(tu_intact(p.y), "y guard");
    layer_free(&p);
}

// The backward by central differences through x and all 13 weights, at odd T (convolution and
// state across steps), B 2, H 2 heads of dk 3, dv 6, K 4. Step and tolerance as the cell's
// (grad_case above): every path is smooth (SiLU, exp, softplus, σ, 1/sqrt of sums ≥ eps).
static void layer_grad_case(const char *label, int B, int T, int d, int H, int K) {
    phax_rng r = tu_rng(label);
    layer_prob p = layer_new(&r, B, T, d, H, K);
    tu_tensor ts[LW_N + 1];
    ts[0] = (tu_tensor){"x", p.x, p.dx, p.n * d};
    for (int i = 0; i < LW_N; i++) ts[i + 1] = (tu_tensor){lw_name[i], p.w[i], p.gw[i], p.len[i]};
    tu_gc_opts o = tu_gc_default();
    tu_op op = {lgc_loss, lgc_bwd, lgc_mag, &p};
    cr_assert(tu_gradcheck(label, op, ts, LW_N + 1, &r, &o));
    layer_free(&p);
}
Test(gdn, layer_grad_T7) { layer_grad_case("gdn_layer_grad_T7", 2, 7, 12, 2, 4); }
Test(gdn, layer_grad_T3_K1_one_head) { layer_grad_case("gdn_layer_grad_T3_K1", 1, 3, 10, 1, 1); }

Test(gdn, layer_bad_sizes_refused) {
    double x = 0;
    ref_gdn_layer_w w = {0};
    cr_expect(ref_gdn_layer_fwd(&x, &x, &w, 1, 1, 12, 4, 4, 1e-6) == PHAX_ERR);  // 4 heads do not divide d/2 = 6
    cr_expect(ref_gdn_layer_fwd(&x, &x, &w, 1, 1, 11, 1, 4, 1e-6) == PHAX_ERR);  // d odd
    cr_expect(ref_gdn_layer_fwd(&x, &x, &w, 1, 1, 12, 2, 0, 1e-6) == PHAX_ERR);  // K 0
    cr_expect(strstr(phax_error(), "K 0") != NULL, "%s", phax_error());
}
