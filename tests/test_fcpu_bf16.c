// The bf16 tier (fast/cpu/gemm_bf16.c, backend cpu_bf16; docs/precision.md).
//
// (a) fcpu_gemm_bf16 computes C = alpha·op(Â)·op(B̂) + beta·C with Â, B̂ the operands
//     rounded to bf16 (nearest, ties to even) and float32 arithmetic. The reference is that
//     product in float64 on the rounded operands; the bound is test_fcpu_gemm.c's float32
//     one on them, (K + 3)·u·(|alpha|·Σ_k |â_ik b̂_kj| + |beta·c0_ij|), u = 2⁻²⁴: every
//     product of two bf16 values is exact in float32 (8 + 8 significand bits ≤ 24), so what
//     is left is float32 summation in any order (Higham §3.1), which is what oneDNN's
//     kernels (VDPBF16PS: float32 accumulators, a rounding per addition) do. Outputs are
//     poisoned (NaN where beta = 0), guard zones surround every buffer, C's row padding must
//     come back untouched; all four transposes, alpha ≠ 1, beta 0 / 1 / −0.5, padded rows,
//     ragged sizes, a call inside an OpenMP parallel region.
// (b) The bound can fail: the two bugs the issue names, an operand left in float32 and a
//     bf16 accumulation, each emulated exactly in float64, exceed it by far (the gap between
//     the float32 bound and bf16's unit roundoff 2⁻⁹ is what (a) rests on).
// (c) fcpu_bf16_round: ties to even, NaN, ±inf, overflow, subnormals.
// (d) The backend: cpu_bf16 trains, its float32 path (cpu) is untouched bit for bit by the
//     bf16 calls, and the thread's matmul precision is restored after every call. Whole-model
//     bounds: tests/test_check_model.c judges cpu_bf16 with `phax check --precision bf16`.
//
// Skipped (with a line) in a build without oneDNN.
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "phax/backend.h"
#include "phax/fcpu_gemm.h"

static const float GVAL = -12345.5f;  // row padding of C: must come back as it was

// Skipped, with the reason, where the tier cannot run: a build without oneDNN, or a CPU on which
// oneDNN has no bf16 matmul (AVX2 only).
#define NEED_ONEDNN()                                                        \
    do {                                                                     \
        if (!fcpu_bf16_available()) cr_skip_test("%s", fcpu_bf16_unavailable()); \
    } while (0)

typedef struct {
    bool ta, tb;
    int M, N, K, pad;
    float alpha, beta;
    bool in_parallel;
} gcase;

// How an output is made: the tier itself, or one of the bugs of (b) emulated in float64.
typedef enum { TIER, BUG_A_UNCONVERTED, BUG_BF16_ACCUMULATION } maker;

static double bf(double x) { return (double)fcpu_bf16_round((float)x); }

// One case: worst |err|/tol of the output `mk` makes against the rounded-operand product.
static double run_case(const gcase *g, maker mk, phax_rng *r) {
    int ar = !g->ta ? g->M : g->K, ac = !g->ta ? g->K : g->M;
    int br = !g->tb ? g->K : g->N, bc = !g->tb ? g->N : g->K;
    int lda = ac + g->pad, ldb = bc + g->pad, ldc = g->N + g->pad;
    size_t nc = (size_t)g->M * ldc;
    float *A = h_frand((size_t)ar * lda, r, 1.0), *B = h_frand((size_t)br * ldb, r, 1.0);
    float *C0 = h_frand(nc, r, 1.0), *C = tu_fbuf(nc);
    for (int i = 0; i < g->M; i++)
        for (int j = 0; j < ldc; j++)
            C[(size_t)i * ldc + j] = j >= g->N ? GVAL : g->beta == 0 ? NAN : C0[(size_t)i * ldc + j];
    size_t n = (size_t)g->M * g->N;
    double *ref = tu_buf(n), *tol = tu_buf(n);
    float *got = tu_fbuf(n);
    if (mk == TIER) {
        if (g->in_parallel) {
#pragma omp parallel num_threads(2)
            {
#pragma omp single
                fcpu_gemm_bf16(g->ta ? FCPU_TRANS : FCPU_NOTRANS, g->tb ? FCPU_TRANS : FCPU_NOTRANS, g->M, g->N, g->K,
                               g->alpha, A, lda, B, ldb, g->beta, C, ldc);
            }
        } else {
            fcpu_gemm_bf16(g->ta ? FCPU_TRANS : FCPU_NOTRANS, g->tb ? FCPU_TRANS : FCPU_NOTRANS, g->M, g->N, g->K,
                           g->alpha, A, lda, B, ldb, g->beta, C, ldc);
        }
        cr_assert(tu_fintact(C), "guard zone around C overwritten");
        cr_assert(tu_fintact(A) && tu_fintact(B), "guard zone around A or B overwritten");
        for (int i = 0; i < g->M; i++)
            for (int j = g->N; j < ldc; j++)
                cr_assert(C[(size_t)i * ldc + j] == GVAL, "row padding of C written (row %d col %d)", i, j);
    }
    for (int i = 0; i < g->M; i++)
        for (int j = 0; j < g->N; j++) {
            double s = 0, m = 0, bug = 0;
            for (int k = 0; k < g->K; k++) {
                double a = !g->ta ? A[(size_t)i * lda + k] : A[(size_t)k * lda + i];
                double b = !g->tb ? B[(size_t)k * ldb + j] : B[(size_t)j * ldb + k];
                s += bf(a) * bf(b), m += fabs(bf(a) * bf(b));
                if (mk == BUG_A_UNCONVERTED) bug += a * bf(b);
                if (mk == BUG_BF16_ACCUMULATION) bug = bf(bug + bf(a) * bf(b));
            }
            double c0 = g->beta == 0 ? 0 : C0[(size_t)i * ldc + j];
            size_t e = (size_t)i * g->N + j;
            ref[e] = (double)g->alpha * s + (double)g->beta * c0;
            tol[e] = (g->K + 3) * H_U32 * (fabs((double)g->alpha) * m + fabs(g->beta * c0));
            got[e] = mk == TIER ? C[(size_t)i * ldc + j] : (float)((double)g->alpha * bug + (double)g->beta * c0);
        }
    double worst = h_elem_worst(H_F(got), ref, tol, n);
    tu_ffree(A), tu_ffree(B), tu_ffree(C), tu_ffree(C0), tu_ffree(got), tu_free(ref), tu_free(tol);
    return worst;
}

// Shapes (M, N, K): large enough for oneDNN's blocked kernels, ragged, tiny, K long, K odd.
static const int SHAPES[][3] = {{131, 77, 65}, {70, 37, 129}, {5, 300, 97}, {3, 5, 7},
                                {64, 64, 64},  {257, 19, 300}, {33, 1000, 9}, {512, 256, 256},
                                {300, 200, 700}};  // K past oneDNN's K block: its reduction loop
static const float AB[][2] = {{1.0f, 0.0f}, {0.5f, 1.0f}, {-1.25f, -0.5f}};
#define NSHAPES ((int)(sizeof SHAPES / sizeof *SHAPES))

Test(bf16, gemm_every_transpose_and_scale) {
    NEED_ONEDNN();
    phax_rng r = tu_rng("bf16/gemm_every_transpose_and_scale");
    double worst = 0;
    int n = 0;
    for (int s = 0; s < NSHAPES; s++)
        for (int t = 0; t < 4; t++)
            for (int k = 0; k < 3; k++)
                for (int pad = 0; pad <= 3; pad += 3) {
                    gcase g = {t & 1, t >> 1, SHAPES[s][0], SHAPES[s][1], SHAPES[s][2], pad, AB[k][0], AB[k][1], false};
                    double e = run_case(&g, TIER, &r);
                    cr_expect(e <= 1.0, "M %d N %d K %d trans %d/%d alpha %g beta %g pad %d: err/tol %g (seed %llu)", g.M,
                              g.N, g.K, g.ta, g.tb, g.alpha, g.beta, g.pad, e, (unsigned long long)tu_base_seed());
                    if (!(e <= worst)) worst = e;
                    n++;
                }
    printf("bf16 gemm: %d cases, worst |err|/bound %.3f (oneDNN: %s at 512x256x256)\n", n, worst,
           fcpu_bf16_impl(512, 256, 256));
}

Test(bf16, gemm_inside_a_parallel_region) {
    NEED_ONEDNN();
    phax_rng r = tu_rng("bf16/gemm_inside_a_parallel_region");
    const gcase cs[] = {{false, true, 131, 77, 65, 2, 1.0f, 1.0f, true}, {true, false, 70, 300, 33, 0, 0.75f, 0.0f, true}};
    for (int c = 0; c < 2; c++) {
        double e = run_case(&cs[c], TIER, &r);
        cr_expect(e <= 1.0, "case %d in a parallel region: err/tol %g (seed %llu)", c, e,
                  (unsigned long long)tu_base_seed());
    }
}

// (b) The two bugs, on the shapes of a linear layer: each must exceed the bound (by far: it
// is printed). Not the tier's code, so no oneDNN needed.
Test(bf16, the_bound_fails_an_unconverted_operand_and_a_bf16_accumulation) {
    phax_rng r = tu_rng("bf16/the_bound_fails");
    const gcase cs[] = {{false, true, 64, 48, 64, 0, 1.0f, 0.0f, false}, {true, false, 33, 40, 257, 1, 0.5f, 1.0f, false}};
    for (int c = 0; c < 2; c++) {
        double ua = run_case(&cs[c], BUG_A_UNCONVERTED, &r), acc = run_case(&cs[c], BUG_BF16_ACCUMULATION, &r);
        printf("bf16 bound: case %d: A left in float32 %.1f x the bound, bf16 accumulation %.1f x\n", c, ua, acc);
        cr_expect(ua > 1.0, "an operand left unconverted passes the bound (%g)", ua);
        cr_expect(acc > 1.0, "a bf16 accumulation passes the bound (%g)", acc);
    }
}

static float f_of(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static uint32_t u_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

// (c) Rounding: to nearest, ties to even, at the 16th bit; what the oneDNN operands get.
Test(bf16, rounding_is_to_nearest_ties_to_even) {
    cr_expect(u_of(fcpu_bf16_round(f_of(0x3f808000u))) == 0x3f800000u, "tie below an even: down");
    cr_expect(u_of(fcpu_bf16_round(f_of(0x3f818000u))) == 0x3f820000u, "tie below an odd: up");
    cr_expect(u_of(fcpu_bf16_round(f_of(0x3f808001u))) == 0x3f810000u, "past the tie: up");
    cr_expect(u_of(fcpu_bf16_round(f_of(0x3f807fffu))) == 0x3f800000u, "short of the tie: down");
    cr_expect(u_of(fcpu_bf16_round(f_of(0xbf818000u))) == 0xbf820000u, "negative: by magnitude");
    cr_expect(isnan(fcpu_bf16_round(NAN)) && isnan(fcpu_bf16_round(f_of(0x7f800001u))), "NaN stays NaN");
    cr_expect(fcpu_bf16_round(INFINITY) == INFINITY && fcpu_bf16_round(-INFINITY) == -INFINITY);
    cr_expect(fcpu_bf16_round(f_of(0x7f7fffffu)) == INFINITY, "FLT_MAX rounds up to inf (past bf16's largest)");
    cr_expect(u_of(fcpu_bf16_round(f_of(0x00018000u))) == 0x00020000u, "subnormal tie below an odd: up");
    cr_expect(u_of(fcpu_bf16_round(f_of(0x00008000u))) == 0x00000000u, "subnormal tie below an even (0): down");
    // Against the definition on random bit patterns: x to a multiple of its bf16 spacing.
    phax_rng r = tu_rng("bf16/rounding");
    for (int i = 0; i < 100000; i++) {
        float x = f_of((uint32_t)phax_rng_u64(&r));
        if (!isfinite(x) || fabsf(x) > 3.3e38f) continue;
        int e;
        frexp((double)x, &e);    // x = m·2^e, |m| in [0.5, 1): 8 significand bits are spacing 2^(e−8)
        if (e < -125) e = -125;  // below the normal range the spacing stays 2^−133
        double w = ldexp(nearbyint(ldexp((double)x, 8 - e)), e - 8);  // nearest, ties to even
        cr_assert(fcpu_bf16_round(x) == (float)w, "%a rounds to %a, not %a", x, fcpu_bf16_round(x), (float)w);
    }
}

// (d) The backend: trains (the loss falls over a few steps of a fixed batch), leaves the float32
// tier's results bit for bit as they were, restores the thread's precision.
static double train_losses(const char *backend, int steps, float *out_params, size_t *P) {
    phax_model_cfg cfg = phax_model_cfg_default(PHAX_FAMILY_PHA);
    cfg.vocab_size = 37, cfg.d_model = 48, cfg.n_layers = 2, cfg.n_heads = 4, cfg.n_kv_heads = 2;
    cr_assert(phax_model_cfg_resolve(&cfg) == PHAX_OK, "%s", phax_error());
    phax_bmodel *m = phax_bmodel_new(phax_backend_find(backend), &cfg, 5, NULL);
    cr_assert(m, "%s", phax_error());
    const phax_layout *L = phax_bmodel_layout(m);
    unsigned char *decay = calloc((size_t)L->n, 1);
    cr_assert(phax_bmodel_adamw_init(m, decay) == PHAX_OK, "%s", phax_error());
    enum { B = 2, T = 33 };
    int32_t tok[B * T], tg[B * T];
    phax_rng r = phax_rng_new(17);
    for (int i = 0; i < B * T; i++) tok[i] = (int32_t)phax_rng_below(&r, 37), tg[i] = (int32_t)phax_rng_below(&r, 37);
    phax_adamw_cfg a = {.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.0, .clip = 1.0};
    double first = NAN, loss = NAN, gn;
    for (int s = 1; s <= steps; s++) {
        phax_bmodel_zero_grad(m);
        cr_assert(phax_bmodel_backward(m, tok, tg, B, T, -1, &loss) == PHAX_OK, "%s", phax_error());
        cr_assert(fcpu_mm_precision() == FCPU_MM_F32, "%s: the thread's matmul precision was not restored", backend);
        if (s == 1) first = loss;
        cr_assert(phax_bmodel_adamw_step(m, &a, s, &gn) == PHAX_OK, "%s", phax_error());
    }
    *P = L->numel;
    if (out_params) cr_assert(phax_bmodel_params_get(m, 0, L->numel, PHAX_DT_F32, out_params) == PHAX_OK);
    phax_bmodel_free(m);
    free(decay);
    printf("%s: loss %.4f -> %.4f over %d steps\n", backend, first, loss, steps);
    cr_expect(loss < first - 0.5, "%s: the loss did not fall (%g -> %g)", backend, first, loss);
    return loss;
}

Test(bf16, backend_trains_and_leaves_float32_bit_for_bit) {
    NEED_ONEDNN();
    size_t P;
    float *p32 = malloc(1 << 24), *again = malloc(1 << 24), *p16 = malloc(1 << 24);
    double l32 = train_losses("cpu", 30, p32, &P);
    double l16 = train_losses("cpu_bf16", 30, p16, &P);
    double l32b = train_losses("cpu", 30, again, &P);
    cr_expect(l32 == l32b && !memcmp(p32, again, P * sizeof *p32),
              "the float32 path changed after bf16 calls in the same process");
    size_t differ = 0;
    for (size_t i = 0; i < P; i++) differ += p32[i] != p16[i];
    printf("cpu vs cpu_bf16 after 30 steps: %zu of %zu parameters differ; losses %.5f vs %.5f\n", differ, P, l32, l16);
    cr_expect(differ > P / 2, "cpu_bf16 computed what cpu did (%zu of %zu parameters differ): are its matmuls bf16?",
              differ, P);
    free(p32), free(again), free(p16);
}
