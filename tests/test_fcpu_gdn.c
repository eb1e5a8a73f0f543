// The fast tiers' Gated DeltaNet — fast/cpu/gdn.c (chunkwise on BLAS) and fast/cuda/gdn.cu (a
// block per sequence, on cuda_emu and a device), float32 — against ref/gdn.c (float64), through
// the harness (H_TEST: every backend): the outputs o and the final state, and all six gradients (q, k, v, g, β, the initial
// state), on a case table of awkward sizes — T 1, T shorter than the chunk, partial last chunks,
// dk ≠ dv and neither a power of two, B·H of 1 and 6, β up to 2 (the negative-eigenvalue variant),
// without the L2 normalisation, with and without an initial state and a final-state gradient,
// chunks of 1, 16, 32, 64. Outputs start as NaN (tu_fbuf), the workspace as NaN bytes, gradients
// are added into a known value; guard zones around every array; the same bits for 1 and 2
// threads; a run split in two through the state equals one run.
//
// Error bound (flash-attention style): per tensor, relative L2 errors against ref,
//   err_fast ≤ C·err_base + FLOOR,
// err_base the largest error of check/'s float32 baselines of the same function (check/gdn.c,
// the one phax check judges with: the recurrent form and the chunkwise form at the case's chunk,
// each rounded to nearest and stochastically from four seeds; docs/oracle.md, "The bound").
// * C = 4, as phax check: fast reorders the same sums (sgemm blocking, a strsm for the UT
//   system, the exponents formed in double) and may be a small factor off a naive order.
// * FLOOR = 8·2⁻²⁴: a few float32 roundings of O(1) relative size, where the baselines happen
//   to be nearly exact (T 1).
// A wrong formula is off by O(1): a dropped decay, β on the wrong side of the delta, a carry not
// decayed at the chunk boundary, a missing path of the backward each fail by orders of magnitude.
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "harness.h"
#include "phax/check.h"
#include "phax/fcpu_gdn.h"
#include "phax/ref.h"
#include "testutil.h"

static const double C_BOUND = 4.0, FLOOR = 8.0 / 16777216.0;

// state: 0 none, 1 an initial state and a final-state gradient, 2 the initial state only, 3 the
// final-state gradient only (ds0 wanted in 1-3). amin: see prob_new.
typedef struct {
    int B, T, H, dk, dv, chunk, l2, state;
    double bmax, amin;
} gcase;

// q, k, v ~ N(0, 1) (k at 1/√dk without the normalisation, so that I − βkkᵀ stays a
// contraction); α in [0.5, 1), or with amin set g = log α uniform in [log amin, 0] (strong
// decays); β in [0, bmax]; s0 ~ N(0, 0.5²); upstream gradients N(0, 1).
typedef struct {
    gcase c;
    size_t nq, nv, ng, ns;
    float *q, *k, *v, *g, *be, *s0, *go, *gsT;
    double *qd, *kd, *vd, *gd, *bed, *s0d, *god, *gsTd;
    phax_gdn_cfg cfg;
} prob;

static void fill(float *f, double *d, size_t n, phax_rng *r, double s) {
    for (size_t i = 0; i < n; i++) f[i] = (float)(s * phax_rng_normal(r)), d[i] = f[i];
}

static prob prob_new(const gcase *c, phax_rng *r) {
    prob p = {.c = *c};
    p.nq = (size_t)c->B * c->T * c->H * c->dk, p.nv = (size_t)c->B * c->T * c->H * c->dv;
    p.ng = (size_t)c->B * c->T * c->H, p.ns = (size_t)c->B * c->H * c->dk * c->dv;
    float **f[] = {&p.q, &p.k, &p.v, &p.g, &p.be, &p.s0, &p.go, &p.gsT};
    double **d[] = {&p.qd, &p.kd, &p.vd, &p.gd, &p.bed, &p.s0d, &p.god, &p.gsTd};
    size_t n[] = {p.nq, p.nq, p.nv, p.ng, p.ng, p.ns, p.nv, p.ns};
    for (int i = 0; i < 8; i++) *f[i] = tu_fbuf(n[i]), *d[i] = tu_buf(n[i]);
    fill(p.q, p.qd, p.nq, r, 1), fill(p.k, p.kd, p.nq, r, c->l2 ? 1 : 1 / sqrt((double)c->dk));
    fill(p.v, p.vd, p.nv, r, 1), fill(p.s0, p.s0d, p.ns, r, 0.5), fill(p.go, p.god, p.nv, r, 1);
    fill(p.gsT, p.gsTd, p.ns, r, 1);
    for (size_t i = 0; i < p.ng; i++) {
        p.g[i] = c->amin > 0 ? (float)phax_rng_uniform_range(r, log(c->amin), 0) : (float)log(phax_rng_uniform_range(r, 0.5, 1.0));
        p.gd[i] = p.g[i];
        p.be[i] = (float)phax_rng_uniform_range(r, 0, c->bmax), p.bed[i] = p.be[i];
    }
    p.cfg = (phax_gdn_cfg){1 / sqrt((double)c->dk), c->l2};
    return p;
}

static void prob_free(prob *p) {
    float *f[] = {p->q, p->k, p->v, p->g, p->be, p->s0, p->go, p->gsT};
    double *d[] = {p->qd, p->kd, p->vd, p->gd, p->bed, p->s0d, p->god, p->gsTd};
    for (int i = 0; i < 8; i++) {
        cr_expect(tu_fintact(f[i]), "input %d overwritten", i);
        tu_ffree(f[i]), tu_free(d[i]);
    }
}

static double rel_f(const float *x, const double *ref, size_t n) {
    double e = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)x[i] - ref[i];
        e += d * d, r += ref[i] * ref[i];
    }
    return !isfinite(e) ? INFINITY : r > 0 ? sqrt(e / r) : sqrt(e);
}
static double rel_d(const double *x, const double *ref, size_t n) {
    double e = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        double d = x[i] - ref[i];
        e += d * d, r += ref[i] * ref[i];
    }
    return !isfinite(e) ? INFINITY : r > 0 ? sqrt(e / r) : sqrt(e);
}

// A workspace of n bytes as NaN (scratch read before written shows), followed by a guard of
// WS_GUARD bytes of a pattern that ws_intact checks (a kernel that carves more than it asked for
// writes there).
enum { WS_GUARD = 4096 };
static void *ws_nan(size_t n) {
    unsigned char *w = malloc(n + WS_GUARD);
    cr_assert(w);
    memset(w, 0xFF, n);
    for (size_t i = 0; i < WS_GUARD; i++) w[n + i] = (unsigned char)(0xA5 ^ i);
    return w;
}
static int ws_intact(const void *w, size_t n) {
    const unsigned char *c = w;
    for (size_t i = 0; i < WS_GUARD; i++)
        if (c[n + i] != (unsigned char)(0xA5 ^ i)) return 0;
    return 1;
}

enum { NT = 8 };  // o, sT, dq, dk, dv, dg, dbeta, ds0
static const char *const NM[NT] = {"o", "final_state", "dq", "dk", "dv", "dg", "dbeta", "ds0"};

// The cpu backend's ops (fast/cpu directly): what the fcpu_gdn tests below run.
static const h_gdn_ops CPU_GDN = {fcpu_gdn_chunkwise_fwd_ws, fcpu_gdn_chunkwise_fwd, fcpu_gdn_chunkwise_bwd_ws,
                                  fcpu_gdn_chunkwise_bwd, fcpu_gdn_conv_fwd, fcpu_gdn_conv_bwd_ws, fcpu_gdn_conv_bwd,
                                  fcpu_gdn_gates_fwd, fcpu_gdn_gates_bwd};

// fast's eight tensors from ops, the gradients added into init (0: the accuracy's); s0 and dsT
// as the case's state says.
static void run_ops(const h_gdn_ops *ops, const prob *p, float *out[NT], float init) {
    const gcase *c = &p->c;
    const float *s0 = c->state == 1 || c->state == 2 ? p->s0 : NULL, *gsT = c->state == 1 || c->state == 3 ? p->gsT : NULL;
    size_t wf = ops->fwd_ws(c->B, c->T, c->H, c->dk, c->dv, c->chunk), wb = ops->bwd_ws(c->B, c->T, c->H, c->dk, c->dv, c->chunk);
    void *w1 = ws_nan(wf), *w2 = ws_nan(wb);
    cr_assert(ops->fwd(out[0], out[1], p->q, p->k, p->v, p->g, p->be, s0, c->B, c->T, c->H, c->dk, c->dv, &p->cfg,
                       c->chunk, w1) == PHAX_OK, "%s", phax_error());
    size_t n[NT] = {p->nv, p->ns, p->nq, p->nq, p->nv, p->ng, p->ng, p->ns};
    for (int i = 2; i < NT; i++)
        for (size_t x = 0; x < n[i]; x++) out[i][x] = init;
    cr_assert(ops->bwd(out[2], out[3], out[4], out[5], out[6], c->state ? out[7] : NULL, p->go, gsT, p->q, p->k, p->v,
                       p->g, p->be, s0, c->B, c->T, c->H, c->dk, c->dv, &p->cfg, c->chunk, w2) == PHAX_OK,
              "%s", phax_error());
    cr_expect(ws_intact(w1, wf) && ws_intact(w2, wb), "a workspace was written past its queried size");
    free(w1), free(w2);
}

static void run_fast(const prob *p, float *out[NT], float init) { run_ops(&CPU_GDN, p, out, init); }

static void one_case(const h_gdn_ops *ops, const gcase *c, const char *label) {
    phax_rng r = tu_rng(label);
    prob p = prob_new(c, &r);
    size_t n[NT] = {p.nv, p.ns, p.nq, p.nq, p.nv, p.ng, p.ng, p.ns};
    const double *s0 = c->state == 1 || c->state == 2 ? p.s0d : NULL, *gsT = c->state == 1 || c->state == 3 ? p.gsTd : NULL;
    // the truth
    double *t[NT];
    for (int i = 0; i < NT; i++) t[i] = tu_buf(n[i]), memset(t[i], 0, n[i] * sizeof(double));
    cr_assert(!ref_gdn_recurrent_fwd(t[0], t[1], p.qd, p.kd, p.vd, p.gd, p.bed, s0, c->B, c->T, c->H, c->dk, c->dv, &p.cfg));
    cr_assert(!ref_gdn_recurrent_bwd(t[2], t[3], t[4], t[5], t[6], c->state ? t[7] : NULL, p.god, gsT, p.qd, p.kd, p.vd,
                                     p.gd, p.bed, s0, c->B, c->T, c->H, c->dk, c->dv, &p.cfg));
    // the baselines' largest error per tensor: two algorithms, five roundings each
    const phax_precision *f32 = phax_precision_find("f32");
    double eb[NT] = {0};
    double *b[NT];
    for (int i = 0; i < NT; i++) b[i] = tu_buf(n[i]);
    for (int alg = 0; alg < 2; alg++)
        for (int sr = 0; sr < 5; sr++) {
            phax_round_stochastic(sr ? 0x9e3779b97f4a7c15ull * (uint64_t)sr : 0);
            cr_assert(!phax_naive_gdn(f32, b[0], b[1], b[2], b[3], b[4], b[5], b[6], c->state ? b[7] : NULL, p.god, gsT,
                                      p.qd, p.kd, p.vd, p.gd, p.bed, s0, c->B, c->T, c->H, c->dk, c->dv, &p.cfg,
                                      alg ? c->chunk : 0), "%s", phax_error());
            phax_round_stochastic(0);
            for (int i = 0; i < NT - !c->state; i++) {
                double e = rel_d(b[i], t[i], n[i]);
                if (!(e <= eb[i])) eb[i] = e;
            }
        }
    float *f[NT];
    for (int i = 0; i < NT; i++) f[i] = tu_fbuf(n[i]);
    run_ops(ops, &p, f, 0.0f);
    for (int i = 0; i < NT - !c->state; i++) {
        double e = rel_f(f[i], t[i], n[i]), bound = C_BOUND * eb[i] + FLOOR;
        printf("[%s] B %d T %d H %d dk %d dv %d chunk %d l2 %d state %d: %-11s fast %.3g base %.3g (ratio %.3g)\n",
               label, c->B, c->T, c->H, c->dk, c->dv, c->chunk, c->l2, c->state, NM[i], e, eb[i], e / eb[i]);
        cr_expect(e <= bound, "[%s] %s: fast %.3g > bound %.3g (4 x base %.3g + floor)", label, NM[i], e, bound, eb[i]);
        cr_expect(tu_fintact(f[i]), "[%s] %s: guard zone written", label, NM[i]);
    }
    for (int i = 0; i < NT; i++) tu_free(t[i]), tu_free(b[i]), tu_ffree(f[i]);
    prob_free(&p);
}

// B, T, H, dk, dv, chunk, l2, state, β max, α min
static const gcase CASES[] = {
    {2, 1, 3, 7, 5, 16, 1, 1, 1.0, 0},     // T 1
    {1, 7, 1, 5, 9, 16, 1, 2, 1.0, 0},     // T shorter than the chunk, B·H 1, s0 without dsT
    {2, 33, 3, 7, 5, 16, 1, 1, 1.0, 0},    // a partial last chunk, B·H 6
    {1, 64, 2, 16, 12, 64, 1, 0, 1.0, 0},  // one whole chunk, no state
    {2, 100, 1, 12, 6, 32, 1, 3, 2.0, 0},  // β to 2, partial chunk, dsT without s0 (ds0 still wanted)
    {1, 45, 2, 6, 10, 1, 1, 1, 1.0, 0},    // chunks of one step
    {2, 29, 2, 9, 7, 16, 0, 1, 1.0, 0},    // without the normalisation
    {1, 257, 1, 10, 14, 0, 1, 1, 1.0, 0},  // several chunks of the default size (chunk 0)
    {2, 70, 2, 8, 6, 64, 1, 1, 1.0, 3.4e-4}, // strong decays (g in [−8, 0]: e^G underflows float within a chunk)
};

H_TEST(gdn, matches_ref_on_case_table) {
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        char label[64];
        snprintf(label, sizeof label, "%s_gdn_case%zu", be->name, i);
        one_case(&be->gdn, &CASES[i], label);
    }
}

// The same bits for one and two threads (each sequence one thread in a fixed order).
Test(fcpu_gdn, threads_do_not_change_bits) {
    gcase c = {2, 41, 3, 7, 5, 16, 1, 1, 1.0, 0};
    phax_rng r = tu_rng("fcpu_gdn_threads");
    prob p = prob_new(&c, &r);
    size_t n[NT] = {p.nv, p.ns, p.nq, p.nq, p.nv, p.ng, p.ng, p.ns};
    float *a[NT], *b[NT];
    for (int i = 0; i < NT; i++) a[i] = tu_fbuf(n[i]), b[i] = tu_fbuf(n[i]);
    int prev = omp_get_max_threads();
    omp_set_num_threads(1);
    run_fast(&p, a, 0.0f);
    omp_set_num_threads(2);
    run_fast(&p, b, 0.0f);
    omp_set_num_threads(prev);
    for (int i = 0; i < NT; i++) {
        cr_expect(!memcmp(a[i], b[i], n[i] * sizeof(float)), "%s differs between 1 and 2 threads", NM[i]);
        tu_ffree(a[i]), tu_ffree(b[i]);
    }
    prob_free(&p);
}

// A run of T1 steps then T2 from its final state equals one run of T1 + T2 (the forward: o and
// the final state), to float32 rounding of the state carried (1e-5 of the outputs' scale).
Test(fcpu_gdn, split_run_through_the_state) {
    const int B = 1, T1 = 21, T2 = 19, H = 2, DK = 6, DV = 5, T = T1 + T2;
    gcase c = {B, T, H, DK, DV, 16, 1, 1, 1.0, 0};
    phax_rng r = tu_rng("fcpu_gdn_split");
    prob p = prob_new(&c, &r);
    size_t ws = fcpu_gdn_chunkwise_fwd_ws(B, T, H, DK, DV, 16);
    void *w = ws_nan(ws);
    float *o = tu_fbuf(p.nv), *sT = tu_fbuf(p.ns), *o2 = tu_fbuf(p.nv), *mid = tu_fbuf(p.ns), *sT2 = tu_fbuf(p.ns);
    cr_assert(!fcpu_gdn_chunkwise_fwd(o, sT, p.q, p.k, p.v, p.g, p.be, p.s0, B, T, H, DK, DV, &p.cfg, 16, w));
    // B = 1: the first T1 steps are the first T1·H rows of every (B, T, H, ·) tensor
    cr_assert(!fcpu_gdn_chunkwise_fwd(o2, mid, p.q, p.k, p.v, p.g, p.be, p.s0, B, T1, H, DK, DV, &p.cfg, 16, w));
    size_t qo = (size_t)T1 * H * DK, vo = (size_t)T1 * H * DV, go = (size_t)T1 * H;
    cr_assert(!fcpu_gdn_chunkwise_fwd(o2 + vo, sT2, p.q + qo, p.k + qo, p.v + vo, p.g + go, p.be + go, mid, B, T2, H, DK,
                                      DV, &p.cfg, 16, w));
    double so = 0, eo = 0, ss = 0, es = 0;
    for (size_t i = 0; i < p.nv; i++) so = fmax(so, fabs(o[i])), eo = fmax(eo, fabs(o[i] - o2[i]));
    for (size_t i = 0; i < p.ns; i++) ss = fmax(ss, fabs(sT[i])), es = fmax(es, fabs(sT[i] - sT2[i]));
    printf("split run: max|o diff| %.3g (scale %.3g), max|sT diff| %.3g (scale %.3g)\n", eo, so, es, ss);
    cr_expect(eo <= 1e-5 * so && es <= 1e-5 * ss, "o %.3g / %.3g, sT %.3g / %.3g", eo, so, es, ss);
    cr_expect(tu_fintact(o) && tu_fintact(o2) && tu_fintact(mid) && tu_fintact(sT2));
    tu_ffree(o), tu_ffree(sT), tu_ffree(o2), tu_ffree(mid), tu_ffree(sT2), free(w);
    prob_free(&p);
}

// Invalid sizes and a missing workspace are refused with a message.
Test(fcpu_gdn, bad_arguments_refused) {
    phax_gdn_cfg c = {1, 1};
    float x = 0;
    char w[64];
    cr_expect(fcpu_gdn_chunkwise_fwd(&x, NULL, &x, &x, &x, &x, &x, NULL, 0, 1, 1, 1, 1, &c, 16, w) == PHAX_ERR);
    cr_expect(strstr(phax_error(), "invalid sizes"), "%s", phax_error());
    cr_expect(fcpu_gdn_chunkwise_bwd(&x, &x, &x, &x, &x, NULL, &x, NULL, &x, &x, &x, &x, &x, NULL, 1, 1, 1, 1, 1, &c, 16,
                                     NULL) == PHAX_ERR);
    cr_expect(strstr(phax_error(), "ws is NULL"), "%s", phax_error());
    cr_expect(fcpu_gdn_chunkwise_fwd_ws(1, 1, 1, 0, 1, 16) == 0);
}

// The backward adds: a second call into the same buffers gives exactly twice the first (the same
// bits added to themselves).
Test(fcpu_gdn, gradients_are_added) {
    gcase c = {1, 23, 2, 6, 5, 16, 1, 1, 1.0, 0};
    phax_rng r = tu_rng("fcpu_gdn_adds");
    prob p = prob_new(&c, &r);
    size_t n[NT] = {p.nv, p.ns, p.nq, p.nq, p.nv, p.ng, p.ng, p.ns};
    float *a[NT];
    for (int i = 0; i < NT; i++) a[i] = tu_fbuf(n[i]), memset(a[i], 0, n[i] * sizeof(float));
    size_t wb = fcpu_gdn_chunkwise_bwd_ws(1, 23, 2, 6, 5, 16);
    void *w = ws_nan(wb);
    float *once[NT];
    for (int k = 0; k < 2; k++) {
        cr_assert(!fcpu_gdn_chunkwise_bwd(a[2], a[3], a[4], a[5], a[6], a[7], p.go, p.gsT, p.q, p.k, p.v, p.g, p.be, p.s0,
                                          1, 23, 2, 6, 5, &p.cfg, 16, w));
        if (!k)
            for (int i = 2; i < NT; i++) once[i] = malloc(n[i] * sizeof(float)), memcpy(once[i], a[i], n[i] * sizeof(float));
    }
    for (int i = 2; i < NT; i++) {
        size_t bad = 0;
        for (size_t x = 0; x < n[i]; x++) bad += a[i][x] != 2 * once[i][x];
        cr_expect(bad == 0, "%s: %zu elements not twice the first call's", NM[i], bad);
        free(once[i]);
    }
    for (int i = 0; i < NT; i++) tu_ffree(a[i]);
    free(w);
    prob_free(&p);
}

// OpenMP's thread count is what it was after a call, whatever OpenBLAS's is: with OpenBLAS at 3
// threads and OpenMP at 2, the OpenMP build's openblas_set_num_threads moved OpenMP to 3 on the
// way out, and the next call carved three slots from a workspace sized for two (a review found
// it: ASan, a heap overflow in the backward). The guard after the workspace shows such a write.
Test(fcpu_gdn, omp_threads_kept_whatever_openblas_has) {
    gcase c = {2, 41, 3, 7, 5, 16, 1, 1, 1.0, 0};
    phax_rng r = tu_rng("fcpu_gdn_omp_kept");
    prob p = prob_new(&c, &r);
    int prev_omp = omp_get_max_threads(), prev_blas = openblas_get_num_threads();
    openblas_set_num_threads(3);
    omp_set_num_threads(2);
    float *o = tu_fbuf(p.nv), *sT = tu_fbuf(p.ns);
    size_t wf = fcpu_gdn_chunkwise_fwd_ws(c.B, c.T, c.H, c.dk, c.dv, c.chunk);  // sized for 2 threads
    void *w = ws_nan(wf);
    cr_assert(!fcpu_gdn_chunkwise_fwd(o, sT, p.q, p.k, p.v, p.g, p.be, p.s0, c.B, c.T, c.H, c.dk, c.dv, &p.cfg, c.chunk, w));
    int after = omp_get_max_threads();
    openblas_set_num_threads(prev_blas);
    omp_set_num_threads(prev_omp);
    // (an assert: the next call would write past the workspace)
    cr_assert(after == 2, "OpenMP threads %d after the call, 2 before", after);
    cr_expect(ws_intact(w, wf));
    free(w), tu_ffree(o), tu_ffree(sT);
    prob_free(&p);
}

// --- the layer's short convolution: fcpu_gdn_conv_* against ref_gdn_conv_* --------------------------
// Per element, a worst-case bound of a float32 evaluation of the formula around ref's values (u =
// 2⁻²⁴, S_a = Σ_j |w_j x_j| over the taps, a the pre-activation):
//   a:  a K-term float dot product, |δa| ≤ (K+1)·u·S_a;
//   y = SiLU(a): |SiLU′| ≤ 1.1 carries δa, and expf (< 1 ulp), the sum and the division add ≤ 4u·|y|;
//   da = dy·SiLU′(a): |SiLU″| ≤ 0.5 carries δa, SiLU′'s own float evaluation is off by ≤ 8u·(1 + |a|),
//       the product ≤ u·|da|;
//   dx = Σ_j w_j da_j (float): Σ_j |w_j|·|δda_j| + (K+1)·u·Σ_j |w_j da_j|;
//   dw = Σ_{b,t} x·da (double, rounded once): Σ |x|·|δda| + u·|dw|.
// Each tolerance is twice its bound (the second-order terms left out); !(err <= tol) fails NaN.
// Sizes: K 4 (the layer's) and K longer than T, C odd, B·T rows over two threads; gradients added
// into 0.25 (the accuracy measured on what was added).
static void conv_case(const h_backend *be, int B, int T, int C, int K, const char *label) {
    phax_rng r = tu_rng(label);
    const size_t nx = (size_t)B * T * C, nw = (size_t)C * K;
    const double u = 1.0 / 16777216.0;
    float *x = tu_fbuf(nx), *w = tu_fbuf(nw), *dy = tu_fbuf(nx), *y = tu_fbuf(nx), *dx = tu_fbuf(nx), *dw = tu_fbuf(nw);
    double *xd = tu_buf(nx), *wd = tu_buf(nw), *dyd = tu_buf(nx), *yr = tu_buf(nx), *dxr = tu_buf(nx), *dwr = tu_buf(nw);
    for (size_t i = 0; i < nx; i++) x[i] = (float)(2 * phax_rng_normal(&r)), xd[i] = x[i], dy[i] = (float)phax_rng_normal(&r), dyd[i] = dy[i];
    for (size_t i = 0; i < nw; i++) w[i] = (float)(0.6 * phax_rng_normal(&r)), wd[i] = w[i];
    for (size_t i = 0; i < nx; i++) dx[i] = 0.25f, dxr[i] = 0;
    for (size_t i = 0; i < nw; i++) dw[i] = 0.25f, dwr[i] = 0;
    cr_assert(ref_gdn_conv_fwd(yr, xd, wd, B, T, C, K) == PHAX_OK);
    cr_assert(ref_gdn_conv_bwd(dxr, dwr, dyd, xd, wd, B, T, C, K) == PHAX_OK);
    int prev = be->get_threads ? be->get_threads() : 0;
    if (be->set_threads) be->set_threads(2);
    cr_assert(be->gdn.conv_fwd(y, x, w, B, T, C, K) == PHAX_OK, "%s", phax_error());
    const size_t wsn = be->gdn.conv_bwd_ws(B, T, C);
    void *ws = ws_nan(wsn);
    cr_assert(be->gdn.conv_bwd(dx, dw, dy, x, w, B, T, C, K, ws) == PHAX_OK, "%s", phax_error());
    cr_expect(ws_intact(ws, wsn), "[%s] the workspace was written past its queried size", label);
    free(ws);
    if (be->set_threads) be->set_threads(prev);
    // per (b, t, c): a, S_a and the bound of δda; then each output's tolerance
    double *da_err = tu_buf(nx), *da = tu_buf(nx), worst[3] = {0, 0, 0};
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                const size_t i = ((size_t)b * T + t) * C + c;
                double a = 0, S = 0;
                for (int j = 0; j < K; j++) {
                    const int s = t - K + 1 + j;
                    if (s < 0) continue;
                    const double p = wd[(size_t)c * K + j] * xd[((size_t)b * T + s) * C + c];
                    a += p, S += fabs(p);
                }
                const double sg = 1 / (1 + exp(-a)), d1 = sg * (1 + a * (1 - sg)), dA = (K + 1) * u * S;
                da[i] = dyd[i] * d1;
                da_err[i] = fabs(dyd[i]) * (0.5 * dA + 8 * u * (1 + fabs(a))) + u * fabs(da[i]);
                const double tol = 2 * (1.1 * dA + 4 * u * fabs(yr[i])), err = fabs((double)y[i] - yr[i]);
                cr_expect(err <= tol, "[%s] y[%zu]: %.9g vs ref %.17g (tol %.3g)", label, i, y[i], yr[i], tol);
                worst[0] = fmax(worst[0], err / tol);
            }
    for (int b = 0; b < B; b++)
        for (int s = 0; s < T; s++)
            for (int c = 0; c < C; c++) {
                const size_t i = ((size_t)b * T + s) * C + c;
                double e = 0, m = 0;
                for (int j = 0; j < K; j++) {
                    const int t = s + K - 1 - j;
                    if (t >= T) continue;
                    const size_t o = ((size_t)b * T + t) * C + c;
                    e += fabs(wd[(size_t)c * K + j]) * da_err[o], m += fabs(wd[(size_t)c * K + j] * da[o]);
                }
                const double tol = 2 * (e + (K + 1) * u * m + u * 0.25), err = fabs(((double)dx[i] - 0.25) - dxr[i]);
                cr_expect(err <= tol, "[%s] dx[%zu]: %.9g vs ref %.17g (tol %.3g)", label, i, dx[i] - 0.25, dxr[i], tol);
                worst[1] = fmax(worst[1], err / tol);
            }
    for (int c = 0; c < C; c++)
        for (int j = 0; j < K; j++) {
            double e = 0;
            for (int b = 0; b < B; b++)
                for (int t = K - 1 - j; t < T; t++)
                    e += fabs(xd[((size_t)b * T + t - K + 1 + j) * C + c]) * da_err[((size_t)b * T + t) * C + c];
            const size_t i = (size_t)c * K + j;
            const double tol = 2 * (e + u * (fabs(dwr[i]) + 0.25)), err = fabs(((double)dw[i] - 0.25) - dwr[i]);
            cr_expect(err <= tol, "[%s] dw[%zu]: %.9g vs ref %.17g (tol %.3g)", label, i, dw[i] - 0.25, dwr[i], tol);
            worst[2] = fmax(worst[2], err / tol);
        }
    printf("[%s] B %d T %d C %d K %d: worst err/tol y %.3g, dx %.3g, dw %.3g\n", label, B, T, C, K, worst[0], worst[1],
           worst[2]);
    cr_expect(tu_fintact(y) && tu_fintact(dx) && tu_fintact(dw) && tu_fintact(x) && tu_fintact(w) && tu_fintact(dy));
    tu_ffree(x), tu_ffree(w), tu_ffree(dy), tu_ffree(y), tu_ffree(dx), tu_ffree(dw);
    tu_free(xd), tu_free(wd), tu_free(dyd), tu_free(yr), tu_free(dxr), tu_free(dwr), tu_free(da_err), tu_free(da);
}

H_TEST(gdn, conv_matches_ref) {
    conv_case(be, 2, 37, 13, 4, "gdn_conv_K4");   // the layer's kernel, odd T and C
    conv_case(be, 3, 3, 7, 5, "gdn_conv_K_gt_T");  // K longer than T: every output sees the zero padding
    conv_case(be, 1, 1, 2, 1, "gdn_conv_T1_K1");   // a pointwise SiLU
}

H_TEST(gdn, conv_bad_sizes_refused) {
    float a[4] = {0}, w[4] = {0};
    cr_expect(be->gdn.conv_fwd(a, a, w, 1, 2, 2, 0) == PHAX_ERR && strstr(phax_error(), "K=0"), "%s", phax_error());
    cr_expect(be->gdn.conv_bwd(a, w, a, a, w, 0, 2, 2, 1, a) == PHAX_ERR);
    cr_expect(be->gdn.conv_bwd_ws(0, 2, 2) == 0);
    cr_expect(be->gdn.conv_fwd(a, a, w, 1, 0, 2, 1) == PHAX_OK);
}

// --- the layer's gates: fcpu/fcuda gdn_gates_* against ref_gdn_gates_* ------------------------------
// Per element, a worst-case bound of a float32 evaluation around ref's values (u = 2⁻²⁴; z = a +
// dt_bias, E = e^{A_log}, σ = σ(z)): z rounded (u|z|, carried by softplus′ = σ and σ′ = σ(1 − σ));
// expf, log1pf and σ's division within a few ulp:
//   g:  E·σ·u|z| + 6u·|g|;   β: 4u·β;   da: |dg|·E·(σ(1 − σ)·u|z| + 8u·σ);
//   db = dβ·s(1 − s): 1 − s loses what s carries (4u·s absolute): |dβ|·12u·s;
//   dA_log = Σ_r dg·g_r, ddt_bias = Σ_r da_r (double sums): the terms' bounds summed, + u·|sum|.
// Each tolerance is twice its bound; gradients added into 0.25 (+ u·0.25). a ~ 3·N(0,1) with
// dt_bias in [−6, −2] puts z on both sides of 0 and past 9; b ~ 3·N(0,1) saturates σ.
H_TEST(gdn, gates_match_ref) {
    phax_rng r = tu_rng("gdn_gates_match_ref");
    const size_t n = 61;
    const int H = 5;
    const size_t ne = n * H;
    const double u = 1.0 / 16777216.0;
    float *a = tu_fbuf(ne), *b = tu_fbuf(ne), *A = tu_fbuf(H), *d = tu_fbuf(H), *dg = tu_fbuf(ne), *dbt = tu_fbuf(ne);
    float *g = tu_fbuf(ne), *be_ = tu_fbuf(ne), *da = tu_fbuf(ne), *db = tu_fbuf(ne), *dA = tu_fbuf(H), *dd = tu_fbuf(H);
    double *ad = tu_buf(ne), *bd = tu_buf(ne), *Ad = tu_buf(H), *dd_ = tu_buf(H), *dgd = tu_buf(ne), *dbd = tu_buf(ne);
    double *gr = tu_buf(ne), *br = tu_buf(ne), *dar = tu_buf(ne), *dbr = tu_buf(ne), *dAr = tu_buf(H), *ddr = tu_buf(H);
    for (size_t i = 0; i < ne; i++) {
        a[i] = (float)(3 * phax_rng_normal(&r)), b[i] = (float)(3 * phax_rng_normal(&r));
        dg[i] = (float)phax_rng_normal(&r), dbt[i] = (float)phax_rng_normal(&r);
        ad[i] = a[i], bd[i] = b[i], dgd[i] = dg[i], dbd[i] = dbt[i], da[i] = db[i] = 0.25f, dar[i] = dbr[i] = 0;
    }
    for (int h = 0; h < H; h++) {
        A[h] = (float)log(1 + 15 * phax_rng_uniform(&r)), d[h] = (float)(-2 - 4 * phax_rng_uniform(&r));
        Ad[h] = A[h], dd_[h] = d[h], dA[h] = dd[h] = 0.25f, dAr[h] = ddr[h] = 0;
    }
    cr_assert(ref_gdn_gates_fwd(gr, br, ad, bd, Ad, dd_, n, H) == PHAX_OK);
    cr_assert(ref_gdn_gates_bwd(dar, dbr, dAr, ddr, dgd, dbd, ad, bd, Ad, dd_, n, H) == PHAX_OK);
    cr_assert(be->gdn.gates_fwd(g, be_, a, b, A, d, n, H) == PHAX_OK, "%s", phax_error());
    cr_assert(be->gdn.gates_bwd(da, db, dA, dd, dg, dbt, a, b, A, d, n, H) == PHAX_OK, "%s", phax_error());
    double worst[6] = {0}, eA[8] = {0}, eT[8] = {0};
    for (size_t i = 0; i < ne; i++) {
        const int h = (int)(i % H);
        const double z = ad[i] + dd_[h], E = exp(Ad[h]), s = 1 / (1 + exp(-z)), sb = 1 / (1 + exp(-bd[i]));
        const double tg = 2 * (E * s * u * fabs(z) + 6 * u * fabs(gr[i])), tb = 2 * 4 * u * br[i];
        const double dda = fabs(dgd[i]) * E * (s * (1 - s) * u * fabs(z) + 8 * u * s);
        const double ta = 2 * (dda + u * 0.25), tdb = 2 * (fabs(dbd[i]) * 12 * u * sb + u * 0.25);
        const double e[4] = {fabs(g[i] - gr[i]), fabs(be_[i] - br[i]), fabs((da[i] - 0.25) - dar[i]), fabs((db[i] - 0.25) - dbr[i])};
        const double t[4] = {tg, tb, ta, tdb};
        const char *nm[4] = {"g", "beta", "da", "db"};
        for (int k = 0; k < 4; k++) {
            cr_expect(e[k] <= t[k], "%s[%zu]: err %.3g > tol %.3g (z %.3g, b %.3g)", nm[k], i, e[k], t[k], z, bd[i]);
            worst[k] = fmax(worst[k], e[k] / t[k]);
        }
        eA[h] += fabs(dgd[i]) * tg / 2, eT[h] += dda;
    }
    for (int h = 0; h < H; h++) {
        const double tA = 2 * (eA[h] + u * (fabs(dAr[h]) + 0.25)), tT = 2 * (eT[h] + u * (fabs(ddr[h]) + 0.25));
        const double e1 = fabs((dA[h] - 0.25) - dAr[h]), e2 = fabs((dd[h] - 0.25) - ddr[h]);
        cr_expect(e1 <= tA, "dA_log[%d]: err %.3g > tol %.3g", h, e1, tA);
        cr_expect(e2 <= tT, "ddt_bias[%d]: err %.3g > tol %.3g", h, e2, tT);
        worst[4] = fmax(worst[4], e1 / tA), worst[5] = fmax(worst[5], e2 / tT);
    }
    printf("[gdn_gates_match_ref] %s: worst err/tol g %.3g, beta %.3g, da %.3g, db %.3g, dA_log %.3g, ddt_bias %.3g\n",
           be->name, worst[0], worst[1], worst[2], worst[3], worst[4], worst[5]);
    float *f[] = {a, b, A, d, dg, dbt, g, be_, da, db, dA, dd};
    for (int i = 0; i < 12; i++) {
        cr_expect(tu_fintact(f[i]));
        tu_ffree(f[i]);
    }
    double *dl[] = {ad, bd, Ad, dd_, dgd, dbd, gr, br, dar, dbr, dAr, ddr};
    for (int i = 0; i < 12; i++) tu_free(dl[i]);
    cr_expect(be->gdn.gates_fwd(NULL, NULL, NULL, NULL, NULL, NULL, 3, 0) == PHAX_ERR);
}
