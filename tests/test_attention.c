// ref attention: known values, finite-difference gradients across GQA group
// sizes, windows, score modes and RoPE; cross-form and invariance checks.
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "phax/ref.h"
#include "testutil.h"

static const double EPS = 0x1p-52;

// Two keys with logits 0 and ln 3 give p = (1/4, 3/4): o_1 = v_0/4 + 3 v_1/4.
Test(attention, fwd_known_dot) {
    double *q = tu_buf(4), *k = tu_buf(4), *v = tu_buf(4), *o = tu_buf(4);
    double L3 = log(3.0);
    // dh = 2, scale 1/√2: q_1·k_1/√2 = ln 3 with q_1 = (1, 0), k_1 = (√2 ln 3, 0).
    double qv[] = {1, 1, 1, 0}, kv[] = {0, 0, sqrt(2.0) * L3, 0}, vv[] = {4, 0, 0, 8};
    memcpy(q, qv, sizeof qv), memcpy(k, kv, sizeof kv), memcpy(v, vv, sizeof vv);
    phax_attn_cfg c = phax_attn_cfg_default(1, 1, 2);
    c.rope = 0;
    cr_assert(ref_attention_fwd(o, q, k, v, NULL, 1, 2, &c) == PHAX_OK);
    double want[] = {4, 0, 1, 6};  // t = 0 sees only itself: o_0 = v_0
    // Few-ulp arithmetic on values ≤ 8 (√2 and ln 3 rounded once each).
    cr_assert(tu_max_abs_diff(o, want, 4) <= 64 * EPS, "o = %g %g %g %g", o[0], o[1], o[2], o[3]);
    // Window 1: every query sees only its own key, o_t = v_t exactly.
    c.window = 1;
    cr_assert(ref_attention_fwd(o, q, k, v, NULL, 1, 2, &c) == PHAX_OK);
    cr_assert(memcmp(o, vv, sizeof vv) == 0);
    cr_assert(tu_intact(o));
    tu_free(q), tu_free(k), tu_free(v), tu_free(o);
}

// Cosine: cos(q_1, k_0) = 0, cos(q_1, k_1) = 1, s = ln 3 ⇒ the same p = (1/4, 3/4),
// whatever the norms of q and k.
Test(attention, fwd_known_cosine) {
    double *q = tu_buf(4), *k = tu_buf(4), *v = tu_buf(4), *o = tu_buf(4), *ls = tu_buf(1);
    double qv[] = {1, 1, 2.5, 0}, kv[] = {0, 5, 3, 0}, vv[] = {4, 0, 0, 8};
    memcpy(q, qv, sizeof qv), memcpy(k, kv, sizeof kv), memcpy(v, vv, sizeof vv);
    ls[0] = log(log(3.0));
    phax_attn_cfg c = phax_attn_cfg_default(1, 1, 2);
    c.rope = 0, c.score = PHAX_SCORE_COSINE;
    cr_assert(ref_attention_fwd(o, q, k, v, ls, 1, 2, &c) == PHAX_OK);
    double want[] = {4, 0, 1, 6};
    cr_assert(tu_max_abs_diff(o, want, 4) <= 64 * EPS, "o = %g %g %g %g", o[0], o[1], o[2], o[3]);
    // Above the clamp: ℓ = 10 acts as log 100, so logits are 0 and 100.
    ls[0] = 10.0;
    cr_assert(ref_attention_fwd(o, q, k, v, ls, 1, 2, &c) == PHAX_OK);
    double p0 = 1.0 / (1.0 + exp(100.0));
    double want2[] = {4, 0, 4 * p0, 8 * (1 - p0)};
    cr_assert(tu_max_abs_diff(o, want2, 4) <= 64 * EPS, "clamped: o_1 = %g %g", o[2], o[3]);
    tu_free(q), tu_free(k), tu_free(v), tu_free(o), tu_free(ls);
}

// ---------------------------------------------------------------------------------
typedef struct {
    int B, T;
    phax_attn_cfg c;
    double *q, *k, *v, *ls, *o, *dout, *dq, *dk, *dv, *dls;
} att_ctx;

static size_t nq(const att_ctx *a) { return (size_t)a->B * a->T * a->c.Hq * a->c.dh; }
static size_t nk(const att_ctx *a) { return (size_t)a->B * a->T * a->c.Hkv * a->c.dh; }
static size_t nv(const att_ctx *a) { return (size_t)a->B * a->T * a->c.Hkv * a->c.dv; }
static size_t no(const att_ctx *a) { return (size_t)a->B * a->T * a->c.Hq * a->c.dv; }

static double att_loss(void *p) {
    att_ctx *a = p;
    tu_poison(a->o, no(a));
    if (ref_attention_fwd(a->o, a->q, a->k, a->v, a->ls, a->B, a->T, &a->c)) return NAN;
    return tu_dot(a->o, a->dout, no(a));
}

static double att_mag(void *p) {
    att_ctx *a = p;
    double s = 0;
    for (size_t i = 0; i < no(a); i++) s += fabs(a->o[i] * a->dout[i]);
    return s;
}

static void att_bwd(void *p) {
    att_ctx *a = p;
    cr_assert(ref_attention_bwd(a->dq, a->dk, a->dv, a->dls, a->dout, a->q, a->k, a->v, a->ls,
                                a->B, a->T, &a->c) == PHAX_OK, "%s", phax_error());
}

static att_ctx att_new(phax_rng *r, int B, int T, phax_attn_cfg c) {
    att_ctx a = {.B = B, .T = T, .c = c};
    a.q = tu_buf(nq(&a)), a.k = tu_buf(nk(&a)), a.v = tu_buf(nv(&a)), a.ls = tu_buf(c.Hq);
    a.o = tu_buf(no(&a)), a.dout = tu_buf(no(&a));
    a.dq = tu_buf(nq(&a)), a.dk = tu_buf(nk(&a)), a.dv = tu_buf(nv(&a)), a.dls = tu_buf(c.Hq);
    tu_fill_normal(a.q, nq(&a), r, 1.0);
    tu_fill_normal(a.k, nk(&a), r, 1.0);
    tu_fill_normal(a.v, nv(&a), r, 1.0);
    // ℓ_h between log 2 and log 20: scales 2..20, away from the log 100 clamp.
    tu_fill_uniform(a.ls, c.Hq, r, log(2.0), log(20.0));
    tu_fill_normal(a.dout, no(&a), r, 1.0);
    return a;
}

static void att_free(att_ctx *a) {
    double *bufs[] = {a->q, a->k, a->v, a->ls, a->o, a->dout, a->dq, a->dk, a->dv, a->dls};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tu_free(bufs[i]);
}

static void att_grad_case(const char *label, int B, int T, phax_attn_cfg c, double clamp_ls) {
    phax_rng r = tu_rng(label);
    att_ctx a = att_new(&r, B, T, c);
    if (clamp_ls > 0) a.ls[0] = clamp_ls;  // head 0 above the clamp: its dℓ must be exactly 0
    tu_tensor ts[] = {{"q", a.q, a.dq, nq(&a)}, {"k", a.k, a.dk, nk(&a)},
                      {"v", a.v, a.dv, nv(&a)}, {"logscale", a.ls, a.dls, (size_t)c.Hq}};
    int nt = c.score == PHAX_SCORE_COSINE ? 4 : 3;
    tu_op op = {att_loss, att_bwd, att_mag, &a};
    cr_assert(tu_gradcheck(label, op, ts, nt, &r, NULL));
    if (clamp_ls > 0) {
        tu_fill(a.dls, c.Hq, 0.0);
        att_bwd(&a);
        cr_assert(a.dls[0] == 0.0, "clamped head has dℓ = %g", a.dls[0]);
    }
    cr_assert(tu_intact(a.o));
    att_free(&a);
}

// Dot scores, RoPE, GQA group 2, dh = 6 (even, not a power of two), dv ≠ dh, odd T, full causal.
Test(attention, grad_dot_gqa2_rope) {
    phax_attn_cfg c = phax_attn_cfg_default(4, 2, 6);
    c.dv = 5;
    att_grad_case("attention/grad_dot_gqa2_rope", 2, 7, c, 0);
}

// Dot scores, no RoPE, group 1 (MHA), odd head dim 5, window larger than T.
Test(attention, grad_dot_mha_window_gt_T) {
    phax_attn_cfg c = phax_attn_cfg_default(2, 2, 5);
    c.rope = 0, c.window = 20;
    att_grad_case("attention/grad_dot_mha_window_gt_T", 1, 5, c, 0);
}

// Cosine scores, RoPE, group 3 (Hq = 3, Hkv = 1), window 3 < T = 9.
Test(attention, grad_cosine_gqa3_window) {
    phax_attn_cfg c = phax_attn_cfg_default(3, 1, 6);
    c.score = PHAX_SCORE_COSINE, c.window = 3;
    att_grad_case("attention/grad_cosine_gqa3_window", 2, 9, c, 0);
}

// Cosine with head 0's ℓ above log 100 (gradient 0 there), a continued sequence (pos0).
Test(attention, grad_cosine_clamped_pos0) {
    phax_attn_cfg c = phax_attn_cfg_default(4, 2, 4);
    c.score = PHAX_SCORE_COSINE, c.pos0 = 1000, c.dv = 3;
    att_grad_case("attention/grad_cosine_clamped_pos0", 1, 6, c, 5.0);
}

// T = 1: one key, softmax of one element; gradients to q and k are exactly zero.
Test(attention, grad_T1) {
    phax_attn_cfg c = phax_attn_cfg_default(2, 1, 4);
    c.score = PHAX_SCORE_COSINE;
    att_grad_case("attention/grad_T1", 3, 1, c, 0);
}

// Window 1: each query sees only itself.
Test(attention, grad_window1) {
    phax_attn_cfg c = phax_attn_cfg_default(2, 1, 4);
    c.window = 1;
    att_grad_case("attention/grad_window1", 1, 4, c, 0);
}

// ---------------------------------------------------------------------------------
// A window ≥ T sees every causal key: bit-identical to full attention.
Test(attention, window_ge_T_is_full) {
    phax_rng r = tu_rng("attention/window_ge_T_is_full");
    const int T = 11;
    phax_attn_cfg c = phax_attn_cfg_default(4, 2, 6);
    att_ctx a = att_new(&r, 2, T, c);
    double *full = tu_buf(no(&a));
    for (int mode = 0; mode < 2; mode++) {
        a.c.score = mode ? PHAX_SCORE_COSINE : PHAX_SCORE_DOT;
        a.c.window = 0;
        cr_assert(ref_attention_fwd(full, a.q, a.k, a.v, a.ls, 2, T, &a.c) == PHAX_OK);
        int ws[] = {T, T + 1, 1000};
        for (int i = 0; i < 3; i++) {
            a.c.window = ws[i];
            tu_poison(a.o, no(&a));
            cr_assert(ref_attention_fwd(a.o, a.q, a.k, a.v, a.ls, 2, T, &a.c) == PHAX_OK);
            cr_assert(memcmp(a.o, full, no(&a) * sizeof(double)) == 0, "window %d differs", ws[i]);
        }
        // A window < T must differ (a test that cannot tell would pass anything).
        a.c.window = T - 3;
        cr_assert(ref_attention_fwd(a.o, a.q, a.k, a.v, a.ls, 2, T, &a.c) == PHAX_OK);
        cr_assert(tu_max_abs_diff(a.o, full, no(&a)) > 1e-6);
    }
    tu_free(full);
    att_free(&a);
}

// GQA: Hkv = 2 shared by groups of 3 query heads equals MHA with each kv head
// repeated 3 times consecutively (head h reads kv head h / 3). Bit-identical.
Test(attention, gqa_equals_repeated_kv) {
    phax_rng r = tu_rng("attention/gqa_equals_repeated_kv");
    const int B = 1, T = 5, dh = 4, g = 3;
    phax_attn_cfg c = phax_attn_cfg_default(6, 2, dh);
    c.score = PHAX_SCORE_COSINE;
    att_ctx a = att_new(&r, B, T, c);
    phax_attn_cfg m = c;
    m.Hkv = 6;
    double *k6 = tu_buf((size_t)B * T * 6 * dh), *v6 = tu_buf((size_t)B * T * 6 * dh);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < 6; h++)
            for (int i = 0; i < dh; i++) {
                k6[(t * 6 + h) * dh + i] = a.k[(t * 2 + h / g) * dh + i];
                v6[(t * 6 + h) * dh + i] = a.v[(t * 2 + h / g) * dh + i];
            }
    double *o6 = tu_buf(no(&a));
    cr_assert(ref_attention_fwd(a.o, a.q, a.k, a.v, a.ls, B, T, &c) == PHAX_OK);
    cr_assert(ref_attention_fwd(o6, a.q, k6, v6, a.ls, B, T, &m) == PHAX_OK);
    cr_assert(memcmp(a.o, o6, no(&a) * sizeof(double)) == 0);
    tu_free(k6), tu_free(v6), tu_free(o6);
    att_free(&a);
}

// Cosine scores ignore the length of q and k rows: scaling rows by positive
// numbers leaves the output unchanged up to rounding.
Test(attention, cosine_scale_invariance) {
    phax_rng r = tu_rng("attention/cosine_scale_invariance");
    const int B = 2, T = 7;
    phax_attn_cfg c = phax_attn_cfg_default(4, 2, 6);
    c.score = PHAX_SCORE_COSINE;
    att_ctx a = att_new(&r, B, T, c);
    a.ls[1] = log(100.0);  // the largest scale: the most sensitive case
    double *ref = tu_buf(no(&a));
    cr_assert(ref_attention_fwd(ref, a.q, a.k, a.v, a.ls, B, T, &c) == PHAX_OK);
    for (size_t row = 0; row < nq(&a) / c.dh; row++) {
        double s = phax_rng_uniform_range(&r, 0.01, 100.0);
        for (int i = 0; i < c.dh; i++) a.q[row * c.dh + i] *= s;
    }
    for (size_t row = 0; row < nk(&a) / c.dh; row++) {
        double s = phax_rng_uniform_range(&r, 0.01, 100.0);
        for (int i = 0; i < c.dh; i++) a.k[row * c.dh + i] *= s;
    }
    cr_assert(ref_attention_fwd(a.o, a.q, a.k, a.v, a.ls, B, T, &c) == PHAX_OK);
    // The normalised vectors change by a few ulps (≈ dh·ε); logits by ≤ s_h·dh·ε
    // with s_h ≤ 100; softmax turns a logit error δ into a relative change ≤ 2δ
    // of the output, whose entries are ≤ max|v|. Bound: 2·100·dh·4ε·max|v|.
    double tol = 2 * 100 * c.dh * 4 * EPS * tu_max_abs(a.v, nv(&a));
    double err = tu_max_abs_diff(a.o, ref, no(&a));
    cr_assert(err <= tol, "err %g > tol %g", err, tol);
    tu_free(ref);
    att_free(&a);
}

Test(attention, bad_config) {
    double *x = tu_buf(64);
    tu_fill(x, 64, 1.0);
    phax_attn_cfg c = phax_attn_cfg_default(3, 2, 4);
    cr_assert(ref_attention_fwd(x, x, x, x, NULL, 1, 1, &c) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "divisible") != NULL, "%s", phax_error());
    c = phax_attn_cfg_default(2, 2, 5);  // RoPE with an odd head dim
    cr_assert(ref_attention_fwd(x, x, x, x, NULL, 1, 1, &c) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "even") != NULL, "%s", phax_error());
    c = phax_attn_cfg_default(2, 2, 4);
    c.score = PHAX_SCORE_COSINE;
    cr_assert(ref_attention_fwd(x, x, x, x, NULL, 1, 1, &c) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "logscale") != NULL, "%s", phax_error());
    c = phax_attn_cfg_default(2, 2, 4);
    c.window = -1;
    cr_assert(ref_attention_fwd(x, x, x, x, NULL, 1, 1, &c) == PHAX_ERR);
    tu_free(x);
}
