// fast tiers vs ref: one AdamW step (clipping, decay, bias correction) and the configurations it
// refuses, on every backend
// (tests/fast_ops.h: the bound, C and the floor; ref/adamw.c: the truth).
#include <stdio.h>
#include <string.h>

#include "fast_ops.h"
#include "phax/ref.h"

// --- AdamW ---------------------------------------------------------------------------------------

// Three steps on three tensors (sizes 1, 257, 1000; decay on, off, on) with
// fresh gradients each step, fast and naive32 in float32, ref in float64
// starting from the same float values. Compared: m, v (absolute), and the
// displacement p − p0 (the prior is p0: p itself moves by only ~3·lr).
//
// Besides the naive32 bound, a derived elementwise float32 bound (u = 2^-24).
// fast computes each step in double from its float state and rounds p, m, v
// once, so the errors obey e_k ≤ β e_{k−1} + u|x_k|:
//   |m_f − m_r| ≤ u Σ_k |m_k|,   |v_f − v_r| ≤ u Σ_k |v_k|    (k = steps so far).
// For p, add the error of the update lr·m̂/(√v̂ + eps) caused by those of m and
// v: with β1 = 0.9, β2 = 0.95 and k ≤ 3, Cauchy–Schwarz gives |m_j| ≤ 0.76 √v_k
// and |m̂|/√v̂ ≤ 1.6, hence ≤ 8u·lr per step, 24u·lr over three; doubled:
//   |p_f − p_r| ≤ u (Σ_k |p_k| + 48 lr).
// (Double rounding of the coefficients is ~1e-16, covered by a 1.01 factor.)
static bool adamw_elem(const char *label, const char *what, const float *f, const double *r,
                       const double *sum, double extra, size_t n) {
    double *tol = tu_buf(n);
    for (size_t i = 0; i < n; i++) tol[i] = 1.01 * H_U32 * (sum[i] + extra) + 1e-300;
    double worst = h_elem_worst(H_F(f), r, tol, n);
    tu_free(tol);
    printf("[%s] %-6s elementwise worst err/derived tol %.3f\n", label, what, worst);
    return worst <= 1.0;
}

typedef struct {
    double clip, gscale;
    int clipped;  // the clip must be active
} adamw_case_t;

static const adamw_case_t adamw_cases[] = {
    {0.0, 1.0, 0},   // no clipping
    {1.0, 10.0, 1},  // ‖g‖ ~ 350 ≫ 1: clipped
    {1e6, 1.0, 0},   // clip set but inactive
};

static void adamw_case(const h_backend *be, const adamw_case_t *ac, phax_rng *r) {
    double clip = ac->clip, gscale = ac->gscale;
    int clipped = ac->clipped;
    char label[64];
    snprintf(label, sizeof label, "adamw clip=%g gscale=%g", clip, gscale);
    const size_t NS[] = {1, 257, 1000};
    const int DEC[] = {1, 0, 1};
    phax_adamw_cfg c = phax_adamw_cfg_default();
    c.clip = clip;
    c.lr = 1e-2;  // large enough that the displacement is not lost in p's rounding
    float *p0[3], *pf[3], *pn[3], *mf[3], *vf[3], *mn[3], *vn[3];
    double *pr[3], *mr[3], *vr[3];
    double *sp[3], *sm[3], *sv[3];  // Σ_k |p_k|, |m_k|, |v_k| of ref
    h_adamw_param fp[3], np[3];
    ref_adamw_param rp[3];
    for (int j = 0; j < 3; j++) {
        size_t n = NS[j];
        p0[j] = h_frand(n, r, 1.0);
        pf[j] = h_fcopy(p0[j], n), pn[j] = h_fcopy(p0[j], n), pr[j] = h_todbl(p0[j], n);
        mf[j] = tu_fbuf(n), vf[j] = tu_fbuf(n), mn[j] = tu_fbuf(n), vn[j] = tu_fbuf(n);
        mr[j] = tu_buf(n), vr[j] = tu_buf(n);
        sp[j] = calloc(n, 8), sm[j] = calloc(n, 8), sv[j] = calloc(n, 8);
        for (size_t i = 0; i < n; i++) mf[j][i] = vf[j][i] = mn[j][i] = vn[j][i] = 0.0f;
        tu_fill(mr[j], n, 0.0), tu_fill(vr[j], n, 0.0);
        fp[j] = (h_adamw_param){pf[j], NULL, mf[j], vf[j], n, DEC[j]};
        np[j] = (h_adamw_param){pn[j], NULL, mn[j], vn[j], n, DEC[j]};
        rp[j] = (ref_adamw_param){pr[j], NULL, mr[j], vr[j], n, DEC[j]};
    }
    for (long step = 1; step <= 3; step++) {
        float *g[3];
        double *gd[3];
        for (int j = 0; j < 3; j++) {
            g[j] = h_frand(NS[j], r, gscale), gd[j] = h_todbl(g[j], NS[j]);
            fp[j].g = g[j], np[j].g = g[j], rp[j].g = gd[j];
        }
        double gnf, gnr;
        float gnn;
        cr_assert(be->adamw.step(fp, 3, &c, step, &gnf) == PHAX_OK);
        b32_adamw(np, 3, &c, step, &gnn);
        cr_assert(ref_adamw_step(rp, 3, &c, step, &gnr) == PHAX_OK);
        cr_assert((clip > 0 && gnr > clip) == clipped, "%s: the clip should be %s", label,
                  clipped ? "active" : "inactive");
        for (int j = 0; j < 3; j++)
            for (size_t i = 0; i < NS[j]; i++)
                sp[j][i] += fabs(pr[j][i]), sm[j][i] += fabs(mr[j][i]), sv[j][i] += fabs(vr[j][i]);
        float gnff = (float)gnf;
        BOUND_FWD(label, "gnorm", &gnff, &gnn, &gnr, 1);
        for (int j = 0; j < 3; j++) tu_ffree(g[j]), tu_free(gd[j]);
    }
    for (int j = 0; j < 3; j++) {
        char what[16];
        snprintf(what, sizeof what, "p%d", j);
        cr_expect(bound(label, what, pf[j], pn[j], pr[j], p0[j], NS[j], H_C_BWD));
        // m's floor scale is the size of the steps' m_k (sm), not |m| alone: m = Σ_k
        // β1^(3−k)(1−β1) g_k may cancel to far below its terms, and each step's
        // rounding of m_k (≤ u|m_k|, fast and naive alike) carries into it. On one
        // element (n 1) the naive baseline is one draw of that noise and may be
        // near-exact (seed 545184994: m 0.43 of its derived bound, the naive draw
        // 14x smaller). A dropped or misweighted term errs by ~|m_k|, still far over.
        // v is a sum of non-negative terms and cannot cancel: |v| is its scale.
        snprintf(what, sizeof what, "m%d", j);
        cr_expect(bound_m(label, what, mf[j], mn[j], mr[j], NULL, sm[j], NS[j], H_C_BWD));
        snprintf(what, sizeof what, "v%d", j);
        cr_expect(bound(label, what, vf[j], vn[j], vr[j], NULL, NS[j], H_C_BWD));
        cr_expect(adamw_elem(label, "p", pf[j], pr[j], sp[j], 48 * c.lr, NS[j]), "p%d", j);
        cr_expect(adamw_elem(label, "m", mf[j], mr[j], sm[j], 0, NS[j]), "m%d", j);
        cr_expect(adamw_elem(label, "v", vf[j], vr[j], sv[j], 0, NS[j]), "v%d", j);
        free(sp[j]), free(sm[j]), free(sv[j]);
        cr_expect(tu_fintact(pf[j]) && tu_fintact(mf[j]) && tu_fintact(vf[j]) && tu_fintact(p0[j]));
        tu_ffree(p0[j]), tu_ffree(pf[j]), tu_ffree(pn[j]), tu_ffree(mf[j]), tu_ffree(vf[j]), tu_ffree(mn[j]),
            tu_ffree(vn[j]);
        tu_free(pr[j]), tu_free(mr[j]), tu_free(vr[j]);
    }
}

H_TEST(adamw, matches_ref) {
    phax_rng r = tu_rng("adamw/matches_ref");
    for (size_t c = 0; c < sizeof adamw_cases / sizeof *adamw_cases; c++)
        adamw_case(be, &adamw_cases[c], &r);
    h_report_worst("adamw");
}

H_TEST(adamw, bad_config) {
    tu_rng("adamw/bad_config");
    float p[3] = {1, 2, 3}, g[3] = {0.1f, NAN, 0.3f}, m[3] = {0}, v[3] = {0};
    h_adamw_param ps = {p, g, m, v, 3, 1};
    phax_adamw_cfg c = phax_adamw_cfg_default();
    double gn;
    cr_expect(be->adamw.step(&ps, 1, &c, 1, &gn) == PHAX_ERR, "NaN gradient accepted");
    cr_expect(p[0] == 1 && p[1] == 2 && p[2] == 3 && m[0] == 0 && v[2] == 0, "state changed");
    g[1] = 0.2f;
    cr_expect(be->adamw.step(&ps, 1, &c, 0, &gn) == PHAX_ERR, "step 0 accepted");
    c.beta1 = 1.0;
    cr_expect(be->adamw.step(&ps, 1, &c, 1, &gn) == PHAX_ERR, "beta1 = 1 accepted");
    c = phax_adamw_cfg_default(), c.eps = 0;
    cr_expect(be->adamw.step(&ps, 1, &c, 1, &gn) == PHAX_ERR, "eps = 0 accepted");
    cr_expect(p[0] == 1 && p[1] == 2 && p[2] == 3, "state changed");
}
