// ref ssm: the DSS kernel, the direct SSM convolution and the recurrent form —
// hand-computed values, finite-difference gradients, and agreement of the two
// forms (conv ∘ kernel vs recurrence) in the output and in every gradient.
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "phax/ref.h"
#include "testutil.h"

static const double PI = 3.14159265358979323846;

static void set(double *x, const double *v, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = v[i];
}

// The mode λ = −1 + iπ/2 (Λre = 0, Λim = log(π/2)) has e^λ = i/e, so its powers
// are hand-computable. A = (e^λ − 1)/λ = (−1 + i/e)/(−1 + iπ/2)
//   = (−1 + i/e)(−1 − iπ/2)/(1 + π²/4) = [1 + π/(2e) + i(π/2 − 1/e)]/(1 + π²/4)
//   ≈ 0.455060 + 0.346922 i.
static void known_A(double *reA, double *imA) {
    double e = exp(1.0), d = 1.0 + PI * PI / 4.0;
    *reA = (1.0 + PI / (2.0 * e)) / d;
    *imA = (PI / 2.0 - 1.0 / e) / d;
}

// --- known values ------------------------------------------------------------------------

Test(dss, kernel_known) {
    // H = 2, N = 1, T = 4, λ = −1 + iπ/2, C_0 = 1, C_1 = i. With e^{λl} = (i/e)^l:
    //   C = 1: K[l] = Re(A (i/e)^l) = [ReA, −ImA/e, −ReA/e², ImA/e³]
    //   C = i: K[l] = Re(iA (i/e)^l) = [−ImA, −ReA/e, ImA/e², ReA/e³]
    double reA, imA, e = exp(1.0);
    known_A(&reA, &imA);
    double *Lre = tu_buf(1), *Lim = tu_buf(1), *Cre = tu_buf(2), *Cim = tu_buf(2), *K = tu_buf(8);
    Lre[0] = 0.0, Lim[0] = log(PI / 2.0);
    Cre[0] = 1, Cim[0] = 0, Cre[1] = 0, Cim[1] = 1;
    ref_dss_kernel_fwd(K, Lre, Lim, Cre, Cim, 2, 1, 4);
    double want[8] = {reA, -imA / e, -reA / (e * e), imA / (e * e * e),
                      -imA, -reA / e, imA / (e * e), reA / (e * e * e)};
    // exp(log(π/2)) and cos/sin of l·Imλ near multiples of π/2 are a few ulp off.
    double r = tu_err_ratio(K, want, 8, 1e-14, 1e-14);
    cr_assert(r <= 1.0, "K err ratio %g (K[0]=%.17g want %.17g)", r, K[0], want[0]);
    cr_assert(tu_intact(K));

    // Backward with dK = δ(h=0, l=1): ḡ_C = A e^λ = iA/e, so
    // dCre[0] = Re(iA/e) = −ImA/e, dCim[0] = −Im(iA/e) = −ReA/e; channel 1 gets 0.
    double *dK = tu_buf(8), *dCre = tu_buf(2), *dCim = tu_buf(2);
    tu_fill(dK, 8, 0.0), dK[1] = 1.0;
    tu_fill(dCre, 2, 0.0), tu_fill(dCim, 2, 0.0);
    ref_dss_kernel_bwd(NULL, NULL, dCre, dCim, dK, Lre, Lim, Cre, Cim, 2, 1, 4);
    double wre[2] = {-imA / e, 0.0}, wim[2] = {-reA / e, 0.0};
    cr_assert(tu_err_ratio(dCre, wre, 2, 1e-14, 1e-14) <= 1.0, "dCre %.17g", dCre[0]);
    cr_assert(tu_err_ratio(dCim, wim, 2, 1e-14, 1e-14) <= 1.0, "dCim %.17g", dCim[0]);
    cr_assert(tu_intact(dCre) && tu_intact(dCim));
    tu_free(Lre), tu_free(Lim), tu_free(Cre), tu_free(Cim), tu_free(K);
    tu_free(dK), tu_free(dCre), tu_free(dCim);
}

Test(dss, kernel_tiny_lambda) {
    // Λre = Λim = −40: |λ| ≈ 6e-18, so A = 1 (the series branch) and e^{λl} = 1 to
    // ~1e-16: the kernel is the constant Re C_h and dC = (Σ_l dK, 0).
    int H = 2, T = 5;
    double *Lre = tu_buf(1), *Lim = tu_buf(1), *Cre = tu_buf(2), *Cim = tu_buf(2);
    double *K = tu_buf(10), *dK = tu_buf(10), *dCre = tu_buf(2), *dCim = tu_buf(2);
    Lre[0] = -40, Lim[0] = -40;
    Cre[0] = 3, Cim[0] = -7, Cre[1] = -0.5, Cim[1] = 2;
    ref_dss_kernel_fwd(K, Lre, Lim, Cre, Cim, H, 1, T);
    for (int h = 0; h < H; h++)
        for (int l = 0; l < T; l++)
            cr_assert(fabs(K[h * T + l] - Cre[h]) <= 1e-15 * fabs(Cre[h]), "K[%d,%d] = %.17g", h,
                      l, K[h * T + l]);
    double dKv[10] = {1, 2, 3, 4, 5, -1, 0, 0, 0, 0.25};  // row sums 15, −0.75
    set(dK, dKv, 10);
    tu_fill(dCre, 2, 0.0), tu_fill(dCim, 2, 0.0);
    ref_dss_kernel_bwd(NULL, NULL, dCre, dCim, dK, Lre, Lim, Cre, Cim, H, 1, T);
    cr_assert(fabs(dCre[0] - 15.0) <= 1e-14 && fabs(dCre[1] + 0.75) <= 1e-15, "dCre %g %g",
              dCre[0], dCre[1]);
    cr_assert(fabs(dCim[0]) <= 1e-14 && fabs(dCim[1]) <= 1e-15, "dCim %g %g", dCim[0], dCim[1]);
    cr_assert(tu_intact(K) && tu_intact(dCre) && tu_intact(dCim));
    tu_free(Lre), tu_free(Lim), tu_free(Cre), tu_free(Cim);
    tu_free(K), tu_free(dK), tu_free(dCre), tu_free(dCim);
}

Test(ssm, conv_known) {
    // B = 2, T = 3, H = 2. Channel 0: K = [1, 2, 3], D = 2; channel 1: K = [0, 1, 0]
    // (a pure one-step delay), D = 0. Batch 0 inputs u_0 = [1, −1, 2], u_1 = [5, 6, 7];
    // batch 1 inputs u_0 = [0, 1, 0], u_1 = [−2, 0, 1].
    //   b0 h0: y = [1+2, −1+2−2, 2−2+3+4] = [3, −1, 7];   b0 h1: y = [0, 5, 6]
    //   b1 h0: y = [0, 1+2, 2] = [0, 3, 2];               b1 h1: y = [0, −2, 0]
    double Kv[6] = {1, 2, 3, 0, 1, 0}, Dv[2] = {2, 0};
    // channels last: u[b][t][h]
    double uv[12] = {1, 5, -1, 6, 2, 7, 0, -2, 1, 0, 0, 1};
    double want[12] = {3, 0, -1, 5, 7, 6, 0, 0, 3, -2, 2, 0};
    double *K = tu_buf(6), *D = tu_buf(2), *u = tu_buf(12), *y = tu_buf(12);
    set(K, Kv, 6), set(D, Dv, 2), set(u, uv, 12);
    ref_ssm_conv_fwd(y, u, K, D, 2, 3, 2);
    // Small integers: exact.
    cr_assert(tu_max_abs_diff(y, want, 12) == 0.0, "y = [%g %g %g %g %g %g ...]", y[0], y[1], y[2],
              y[3], y[4], y[5]);
    cr_assert(tu_intact(y));

    // Backward with dy = 1 at (b0, t2, h0) only:
    //   du[b0, s, h0] = K[2−s] + D δ_{s,2} = [3, 2, 1+2];  dK[h0, l] = u[b0, 2−l, h0] = [2, −1, 1];
    //   dD[h0] = u[b0, 2, h0] = 2; everything else 0.
    double *dy = tu_buf(12), *du = tu_buf(12), *dK = tu_buf(6), *dD = tu_buf(2);
    tu_fill(dy, 12, 0.0), dy[4] = 1.0;
    tu_fill(du, 12, 0.0), tu_fill(dK, 6, 0.0), tu_fill(dD, 2, 0.0);
    ref_ssm_conv_bwd(du, dK, dD, dy, u, K, D, 2, 3, 2);
    double wdu[12] = {3, 0, 2, 0, 3, 0, 0, 0, 0, 0, 0, 0}, wdK[6] = {2, -1, 1, 0, 0, 0},
           wdD[2] = {2, 0};
    cr_assert(tu_max_abs_diff(du, wdu, 12) == 0.0, "du[0..4] = %g %g %g %g %g", du[0], du[1],
              du[2], du[3], du[4]);
    cr_assert(tu_max_abs_diff(dK, wdK, 6) == 0.0, "dK = %g %g %g", dK[0], dK[1], dK[2]);
    cr_assert(tu_max_abs_diff(dD, wdD, 2) == 0.0, "dD = %g %g", dD[0], dD[1]);
    cr_assert(tu_intact(du) && tu_intact(dK) && tu_intact(dD));
    tu_free(K), tu_free(D), tu_free(u), tu_free(y), tu_free(dy), tu_free(du), tu_free(dK),
        tu_free(dD);
}

Test(ssm, recurrent_known) {
    // H = 1, N = 1, T = 4, λ = −1 + iπ/2 (so a = e^λ = i/e), C = 1, D = 0.5.
    // Batch 0: impulse u = [1, 0, 0, 0] → y = K + D δ = [ReA + 0.5, −ImA/e, −ReA/e², ImA/e³].
    // Batch 1: u = [0, 2, 0, 0] → y = 2·(shifted K) + D u = [0, 2ReA + 1, −2ImA/e, −2ReA/e²].
    double reA, imA, e = exp(1.0);
    known_A(&reA, &imA);
    double *Lre = tu_buf(1), *Lim = tu_buf(1), *Cre = tu_buf(1), *Cim = tu_buf(1), *D = tu_buf(1);
    double *u = tu_buf(8), *y = tu_buf(8);
    Lre[0] = 0.0, Lim[0] = log(PI / 2.0), Cre[0] = 1.0, Cim[0] = 0.0, D[0] = 0.5;
    double uv[8] = {1, 0, 0, 0, 0, 2, 0, 0};
    set(u, uv, 8);
    ref_ssm_recurrent_fwd(y, u, Lre, Lim, Cre, Cim, D, 2, 4, 1, 1);
    double want[8] = {reA + 0.5, -imA / e, -reA / (e * e), imA / (e * e * e),
                      0.0, 2 * reA + 1.0, -2 * imA / e, -2 * reA / (e * e)};
    double r = tu_err_ratio(y, want, 8, 1e-14, 1e-14);
    cr_assert(r <= 1.0, "y err ratio %g (y[1]=%.17g want %.17g)", r, y[1], want[1]);
    cr_assert(tu_intact(y));
    tu_free(Lre), tu_free(Lim), tu_free(Cre), tu_free(Cim), tu_free(D), tu_free(u), tu_free(y);
}

Test(ssm, recurrent_integrator) {
    // Λ = (−40, −40): a = 1 and A = 1 to ~1e-17, so z is the running sum of u and
    // y[t] = Re C · Σ_{s≤t} u[s] + D u[t]. C = 2 − 3i, D = −1, u = [1, 2, −4, 3, 0]:
    // cumsum = [1, 3, −1, 2, 2] → y = [2−1, 6−2, −2+4, 4−3, 4−0] = [1, 4, 2, 1, 4].
    double *Lre = tu_buf(1), *Lim = tu_buf(1), *Cre = tu_buf(1), *Cim = tu_buf(1), *D = tu_buf(1);
    double *u = tu_buf(5), *y = tu_buf(5);
    Lre[0] = -40, Lim[0] = -40, Cre[0] = 2, Cim[0] = -3, D[0] = -1;
    double uv[5] = {1, 2, -4, 3, 0}, want[5] = {1, 4, 2, 1, 4};
    set(u, uv, 5);
    ref_ssm_recurrent_fwd(y, u, Lre, Lim, Cre, Cim, D, 1, 5, 1, 1);
    double r = tu_err_ratio(y, want, 5, 1e-14, 0);
    cr_assert(r <= 1.0, "y = [%.17g %.17g %.17g %.17g %.17g]", y[0], y[1], y[2], y[3], y[4]);
    cr_assert(tu_intact(y));
    tu_free(Lre), tu_free(Lim), tu_free(Cre), tu_free(Cim), tu_free(D), tu_free(u), tu_free(y);
}

// --- parameters -----------------------------------------------------------------------------

typedef enum {
    INIT_SPEC,         // Λre ~ N(0, 1) (the spec init); Im λ ~ log-uniform in [0.1, π]
    INIT_LONG_MEMORY,  // Λre = log v, v log-uniform in [1e-3, 1e-1]; Im λ_n = π(n+1)/N
    INIT_SMALL,        // long-memory Λre, Im λ log-uniform in [0.01, 0.3]: |λ| < 0.5
} ssm_init;

// Im λ is kept in (0, π] (no aliasing past the Nyquist rotation), where the
// kernel is smooth enough for central differences with h = 1e-6.
static void init_lambda(double *Lre, double *Lim, int N, ssm_init mode, phax_rng *r) {
    for (int n = 0; n < N; n++) {
        switch (mode) {
        case INIT_SPEC:
            Lre[n] = phax_rng_normal(r);
            Lim[n] = phax_rng_uniform_range(r, log(0.1), log(PI));
            break;
        case INIT_LONG_MEMORY:
            Lre[n] = phax_rng_uniform_range(r, log(1e-3), log(1e-1));
            Lim[n] = log(PI * (n + 1) / N);
            break;
        case INIT_SMALL:
            Lre[n] = phax_rng_uniform_range(r, log(1e-3), log(1e-1));
            Lim[n] = phax_rng_uniform_range(r, log(0.01), log(0.3));
            break;
        }
    }
}

static double abs_dot(const double *a, const double *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += fabs(a[i] * b[i]);
    return s;
}

// --- gradient checks: dss kernel --------------------------------------------------------------

typedef struct {
    int H, N, T;
    double *Lre, *Lim, *Cre, *Cim, *K, *dK;
    double *gLre, *gLim, *gCre, *gCim;
} dss_ctx;

static double dss_loss(void *p) {
    dss_ctx *c = p;
    tu_poison(c->K, (size_t)c->H * c->T);
    ref_dss_kernel_fwd(c->K, c->Lre, c->Lim, c->Cre, c->Cim, c->H, c->N, c->T);
    return tu_dot(c->K, c->dK, (size_t)c->H * c->T);
}

static double dss_mag(void *p) {
    dss_ctx *c = p;
    return abs_dot(c->K, c->dK, (size_t)c->H * c->T);
}

static void dss_bwd(void *p) {
    dss_ctx *c = p;
    ref_dss_kernel_bwd(c->gLre, c->gLim, c->gCre, c->gCim, c->dK, c->Lre, c->Lim, c->Cre, c->Cim,
                       c->H, c->N, c->T);
}

static void dss_grad_case(const char *label, int H, int N, int T, ssm_init mode) {
    phax_rng r = tu_rng(label);
    size_t hn = (size_t)H * N, ht = (size_t)H * T;
    dss_ctx c = {.H = H, .N = N, .T = T};
    c.Lre = tu_buf(N), c.Lim = tu_buf(N), c.Cre = tu_buf(hn), c.Cim = tu_buf(hn);
    c.K = tu_buf(ht), c.dK = tu_buf(ht);
    c.gLre = tu_buf(N), c.gLim = tu_buf(N), c.gCre = tu_buf(hn), c.gCim = tu_buf(hn);
    init_lambda(c.Lre, c.Lim, N, mode, &r);
    tu_fill_normal(c.Cre, hn, &r, 1.0), tu_fill_normal(c.Cim, hn, &r, 1.0);
    tu_fill_normal(c.dK, ht, &r, 1.0);
    tu_tensor ts[] = {{"Lre", c.Lre, c.gLre, (size_t)N}, {"Lim", c.Lim, c.gLim, (size_t)N},
                      {"Cre", c.Cre, c.gCre, hn}, {"Cim", c.Cim, c.gCim, hn}};
    tu_op op = {dss_loss, dss_bwd, dss_mag, &c};
    cr_assert(tu_gradcheck(label, op, ts, 4, &r, NULL));
    cr_assert(tu_intact(c.K) && tu_intact(c.dK));
    tu_free(c.Lre), tu_free(c.Lim), tu_free(c.Cre), tu_free(c.Cim), tu_free(c.K), tu_free(c.dK);
    tu_free(c.gLre), tu_free(c.gLim), tu_free(c.gCre), tu_free(c.gCim);
}

// Odd T, H and N not powers of two.
Test(dss, grad) { dss_grad_case("ssm/dss_grad", 3, 5, 13, INIT_SPEC); }
// T = 1: K = Re C̃ only, the gradient flows through A(λ) alone.
Test(dss, grad_T1) { dss_grad_case("ssm/dss_grad_T1", 3, 5, 1, INIT_SPEC); }
// Slow modes with |λ| < 0.5: A'(λ) takes its series branch.
Test(dss, grad_small_lambda) { dss_grad_case("ssm/dss_grad_small_lambda", 2, 3, 7, INIT_SMALL); }
// The long-memory init over a longer kernel.
Test(dss, grad_long_memory) { dss_grad_case("ssm/dss_grad_long_memory", 3, 5, 64, INIT_LONG_MEMORY); }

// --- gradient checks: ssm conv ----------------------------------------------------------------

typedef struct {
    int B, T, H;
    double *u, *K, *D, *y, *dy, *du, *dK, *dD;
} conv_ctx;

static double conv_loss(void *p) {
    conv_ctx *c = p;
    size_t n = (size_t)c->B * c->T * c->H;
    tu_poison(c->y, n);
    ref_ssm_conv_fwd(c->y, c->u, c->K, c->D, c->B, c->T, c->H);
    return tu_dot(c->y, c->dy, n);
}

static double conv_mag(void *p) {
    conv_ctx *c = p;
    return abs_dot(c->y, c->dy, (size_t)c->B * c->T * c->H);
}

static void conv_bwd(void *p) {
    conv_ctx *c = p;
    ref_ssm_conv_bwd(c->du, c->dK, c->dD, c->dy, c->u, c->K, c->D, c->B, c->T, c->H);
}

static void conv_grad_case(const char *label, int B, int T, int H) {
    phax_rng r = tu_rng(label);
    size_t n = (size_t)B * T * H, ht = (size_t)H * T;
    conv_ctx c = {.B = B, .T = T, .H = H};
    c.u = tu_buf(n), c.K = tu_buf(ht), c.D = tu_buf(H), c.y = tu_buf(n), c.dy = tu_buf(n);
    c.du = tu_buf(n), c.dK = tu_buf(ht), c.dD = tu_buf(H);
    tu_fill_normal(c.u, n, &r, 1.0), tu_fill_normal(c.K, ht, &r, 1.0);
    tu_fill_normal(c.D, H, &r, 1.0), tu_fill_normal(c.dy, n, &r, 1.0);
    tu_tensor ts[] = {{"u", c.u, c.du, n}, {"K", c.K, c.dK, ht}, {"D", c.D, c.dD, (size_t)H}};
    tu_op op = {conv_loss, conv_bwd, conv_mag, &c};
    cr_assert(tu_gradcheck(label, op, ts, 3, &r, NULL));
    cr_assert(tu_intact(c.y) && tu_intact(c.dy));
    tu_free(c.u), tu_free(c.K), tu_free(c.D), tu_free(c.y), tu_free(c.dy);
    tu_free(c.du), tu_free(c.dK), tu_free(c.dD);
}

Test(ssm, grad_conv) { conv_grad_case("ssm/grad_conv", 2, 7, 3); }
Test(ssm, grad_conv_T1) { conv_grad_case("ssm/grad_conv_T1", 2, 1, 3); }
Test(ssm, grad_conv_T13) { conv_grad_case("ssm/grad_conv_T13", 1, 13, 5); }

// --- gradient checks: ssm recurrent -------------------------------------------------------------

typedef struct {
    int B, T, H, N;
    double *u, *Lre, *Lim, *Cre, *Cim, *D, *y, *dy;
    double *du, *gLre, *gLim, *gCre, *gCim, *dD;
} rec_ctx;

static double rec_loss(void *p) {
    rec_ctx *c = p;
    size_t n = (size_t)c->B * c->T * c->H;
    tu_poison(c->y, n);
    ref_ssm_recurrent_fwd(c->y, c->u, c->Lre, c->Lim, c->Cre, c->Cim, c->D, c->B, c->T, c->H,
                          c->N);
    return tu_dot(c->y, c->dy, n);
}

static double rec_mag(void *p) {
    rec_ctx *c = p;
    return abs_dot(c->y, c->dy, (size_t)c->B * c->T * c->H);
}

static void rec_bwd(void *p) {
    rec_ctx *c = p;
    ref_ssm_recurrent_bwd(c->du, c->gLre, c->gLim, c->gCre, c->gCim, c->dD, c->dy, c->u, c->Lre,
                          c->Lim, c->Cre, c->Cim, c->D, c->B, c->T, c->H, c->N);
}

static void rec_grad_case(const char *label, int B, int T, int H, int N, ssm_init mode) {
    phax_rng r = tu_rng(label);
    size_t n = (size_t)B * T * H, hn = (size_t)H * N;
    rec_ctx c = {.B = B, .T = T, .H = H, .N = N};
    c.u = tu_buf(n), c.Lre = tu_buf(N), c.Lim = tu_buf(N), c.Cre = tu_buf(hn), c.Cim = tu_buf(hn);
    c.D = tu_buf(H), c.y = tu_buf(n), c.dy = tu_buf(n);
    c.du = tu_buf(n), c.gLre = tu_buf(N), c.gLim = tu_buf(N), c.gCre = tu_buf(hn);
    c.gCim = tu_buf(hn), c.dD = tu_buf(H);
    tu_fill_normal(c.u, n, &r, 1.0);
    init_lambda(c.Lre, c.Lim, N, mode, &r);
    tu_fill_normal(c.Cre, hn, &r, 1.0), tu_fill_normal(c.Cim, hn, &r, 1.0);
    tu_fill_normal(c.D, H, &r, 1.0), tu_fill_normal(c.dy, n, &r, 1.0);
    tu_tensor ts[] = {{"u", c.u, c.du, n},          {"Lre", c.Lre, c.gLre, (size_t)N},
                      {"Lim", c.Lim, c.gLim, (size_t)N}, {"Cre", c.Cre, c.gCre, hn},
                      {"Cim", c.Cim, c.gCim, hn},   {"D", c.D, c.dD, (size_t)H}};
    tu_op op = {rec_loss, rec_bwd, rec_mag, &c};
    cr_assert(tu_gradcheck(label, op, ts, 6, &r, NULL));
    cr_assert(tu_intact(c.y) && tu_intact(c.dy));
    tu_free(c.u), tu_free(c.Lre), tu_free(c.Lim), tu_free(c.Cre), tu_free(c.Cim), tu_free(c.D);
    tu_free(c.y), tu_free(c.dy), tu_free(c.du), tu_free(c.gLre), tu_free(c.gLim);
    tu_free(c.gCre), tu_free(c.gCim), tu_free(c.dD);
}

Test(ssm, grad_recurrent) { rec_grad_case("ssm/grad_recurrent", 2, 13, 3, 5, INIT_SPEC); }
Test(ssm, grad_recurrent_T1) { rec_grad_case("ssm/grad_recurrent_T1", 2, 1, 3, 5, INIT_SPEC); }
Test(ssm, grad_recurrent_small_lambda) {
    rec_grad_case("ssm/grad_recurrent_small_lambda", 2, 7, 3, 5, INIT_SMALL);
}
Test(ssm, grad_recurrent_long_memory) {
    rec_grad_case("ssm/grad_recurrent_long_memory", 2, 64, 3, 5, INIT_LONG_MEMORY);
}

// --- cross-form: conv(dss_kernel(Λ, C), D, u) == recurrent(Λ, C, D, u) ------------------------
//
// Tolerance, derived rather than fitted. Both forms compute the same finite sums in
// a different order and with differently rounded mode powers:
//   * the kernel forms e^{λl} from the angle l·Im λ (abs. error ≲ l|λ| eps) and exp/cos/sin
//     (a few ulp); the recurrence forms a^l by l complex multiply-adds (≲ 4 eps each), and
//     a gradient term may be a product of two such chains (ḡ_z[t] · z[t−1]). So each term
//     carries a relative error ≲ eps (T (|λ|max + 8) + 8);
//   * every term then passes through at most (B H + 2) T + N additions (the longest chain
//     is ḡ_a = Σ_{b,h,t} ḡ_z z, whose factors are themselves T-step recursions), and
//     recursive summation adds ≲ eps per addition relative to Σ|terms|.
// Every compared value is therefore within  c · eps · S  of the exact result, with
//   c = T (|λ|max + 8) + (B H + 2) T + N + 16
// and S a bound on its Σ|terms|, written with |A(λ)| ≤ 1, |A'(λ)| ≤ 1/2 (A and A' are
// averages of e^{sλ} and s e^{sλ} over s in [0, 1], and Re λ < 0), U = max|u|,
// Y = max|dy|, ρ_n = |a_n| = e^{−exp Λre_n}, R_n = Σ_{l<T} ρ_n^l, R1_n = Σ_{l<T} l ρ_n^l:
//   y:   U  max_h (Σ_n |C_hn| R_n + |D_h|)        du:  the same with Y for U
//   dC:  B T U Y max_n R_n                        dD:  B T U Y
//   dλ_n: B T U Y Σ_h |C_hn| (R_n / 2 + R1_n), times exp(Λre_n) or exp(Λim_n) for dΛ.
// The bound is worst-case (all rounding errors aligned), so measured ratios sit orders of
// magnitude under 1 (it works out at ~1e-13..1e-9 relative to the largest value; float64
// sums of this size typically agree to ~1e-15). A wrong formula is off by O(|grad|) and
// fails by many orders of magnitude.
typedef struct {
    double c, y, du, dC, dD, dLre, dLim;
} cross_tol;

static cross_tol cross_tolerance(const double *u, const double *dy, const double *Lre,
                                 const double *Lim, const double *Cre, const double *Cim,
                                 const double *D, int B, int T, int H, int N) {
    size_t n = (size_t)B * T * H;
    double U = tu_max_abs(u, n), Y = tu_max_abs(dy, n), lam_max = 0, Rmax = 0;
    cross_tol s = {0};
    for (int nn = 0; nn < N; nn++) {
        double re = exp(Lre[nn]), im = exp(Lim[nn]), rho = exp(-re), R = 0, R1 = 0, Ch = 0;
        lam_max = fmax(lam_max, hypot(re, im));
        for (int l = 0; l < T; l++) R += pow(rho, l), R1 += l * pow(rho, l);
        Rmax = fmax(Rmax, R);
        for (int h = 0; h < H; h++) Ch += hypot(Cre[h * N + nn], Cim[h * N + nn]);
        double Sl = (double)B * T * U * Y * Ch * (R / 2 + R1);
        s.dLre = fmax(s.dLre, Sl * re);
        s.dLim = fmax(s.dLim, Sl * im);
    }
    for (int h = 0; h < H; h++) {
        double sh = fabs(D[h]);
        for (int nn = 0; nn < N; nn++) {
            double rho = exp(-exp(Lre[nn])), R = 0;
            for (int l = 0; l < T; l++) R += pow(rho, l);
            sh += hypot(Cre[h * N + nn], Cim[h * N + nn]) * R;
        }
        s.y = fmax(s.y, U * sh);
        s.du = fmax(s.du, Y * sh);
    }
    s.dC = (double)B * T * U * Y * Rmax;
    s.dD = (double)B * T * U * Y;
    s.c = T * (lam_max + 8) + ((double)B * H + 2) * T + N + 16;
    return s;
}

// |a − b| ≤ c·eps·S everywhere (tu_err_ratio with atol only; NaN gives +inf and fails).
static double cross_check(const char *label, const char *what, const double *a, const double *b,
                          size_t n, double c, double S) {
    double tol = c * DBL_EPSILON * S;
    double r = tu_err_ratio(a, b, n, tol, 0.0);
    double mx = tu_max_abs(b, n);
    printf("[%s] %-4s max|x|=%.3e tol=%.3e (rtol vs max %.1e) err/tol=%.3e\n", label, what, mx, tol,
           tol / mx, r);
    cr_expect(r <= 1.0, "[%s] %s: forms differ, err/tol = %g", label, what, r);
    return r;
}

static void cross_case(const char *label, int B, int T, int H, int N, ssm_init mode) {
    phax_rng r = tu_rng(label);
    size_t n = (size_t)B * T * H, hn = (size_t)H * N, ht = (size_t)H * T;
    double *u = tu_buf(n), *Lre = tu_buf(N), *Lim = tu_buf(N), *Cre = tu_buf(hn),
           *Cim = tu_buf(hn), *D = tu_buf(H), *dy = tu_buf(n);
    tu_fill_normal(u, n, &r, 1.0);
    init_lambda(Lre, Lim, N, mode, &r);
    tu_fill_normal(Cre, hn, &r, 1.0), tu_fill_normal(Cim, hn, &r, 1.0);
    tu_fill_normal(D, H, &r, 1.0), tu_fill_normal(dy, n, &r, 1.0);

    // Forward: the kernel then the direct convolution, and the recurrence.
    double *K = tu_buf(ht), *y1 = tu_buf(n), *y2 = tu_buf(n);
    ref_dss_kernel_fwd(K, Lre, Lim, Cre, Cim, H, N, T);
    cr_assert(tu_intact(K));
    ref_ssm_conv_fwd(y1, u, K, D, B, T, H);
    cr_assert(tu_intact(y1));
    ref_ssm_recurrent_fwd(y2, u, Lre, Lim, Cre, Cim, D, B, T, H, N);
    cr_assert(tu_intact(y2));

    // Backward through conv then the kernel (dK composed), and through the recurrence.
    double *du1 = tu_buf(n), *dK = tu_buf(ht), *dD1 = tu_buf(H), *dLre1 = tu_buf(N),
           *dLim1 = tu_buf(N), *dCre1 = tu_buf(hn), *dCim1 = tu_buf(hn);
    double *du2 = tu_buf(n), *dD2 = tu_buf(H), *dLre2 = tu_buf(N), *dLim2 = tu_buf(N),
           *dCre2 = tu_buf(hn), *dCim2 = tu_buf(hn);
    double *gs[] = {du1, dK, dD1, dLre1, dLim1, dCre1, dCim1, du2, dD2, dLre2, dLim2, dCre2, dCim2};
    for (size_t i = 0; i < sizeof gs / sizeof *gs; i++) tu_fill(gs[i], tu_len(gs[i]), 0.0);
    ref_ssm_conv_bwd(du1, dK, dD1, dy, u, K, D, B, T, H);
    ref_dss_kernel_bwd(dLre1, dLim1, dCre1, dCim1, dK, Lre, Lim, Cre, Cim, H, N, T);
    ref_ssm_recurrent_bwd(du2, dLre2, dLim2, dCre2, dCim2, dD2, dy, u, Lre, Lim, Cre, Cim, D, B, T,
                          H, N);
    for (size_t i = 0; i < sizeof gs / sizeof *gs; i++) cr_assert(tu_intact(gs[i]));

    cross_tol s = cross_tolerance(u, dy, Lre, Lim, Cre, Cim, D, B, T, H, N);
    cross_check(label, "y", y1, y2, n, s.c, s.y);
    cross_check(label, "du", du1, du2, n, s.c, s.du);
    cross_check(label, "dD", dD1, dD2, H, s.c, s.dD);
    cross_check(label, "dCre", dCre1, dCre2, hn, s.c, s.dC);
    cross_check(label, "dCim", dCim1, dCim2, hn, s.c, s.dC);
    cross_check(label, "dLre", dLre1, dLre2, N, s.c, s.dLre);
    cross_check(label, "dLim", dLim1, dLim2, N, s.c, s.dLim);
    fflush(stdout);

    double *all[] = {u, Lre, Lim, Cre, Cim, D, dy, K, y1, y2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tu_free(all[i]);
    for (size_t i = 0; i < sizeof gs / sizeof *gs; i++) tu_free(gs[i]);
}

Test(ssm, cross_form) { cross_case("ssm/cross_form", 2, 13, 3, 5, INIT_SPEC); }
Test(ssm, cross_form_T1) { cross_case("ssm/cross_form_T1", 2, 1, 3, 5, INIT_SPEC); }
Test(ssm, cross_form_small_lambda) {
    cross_case("ssm/cross_form_small_lambda", 2, 7, 3, 5, INIT_SMALL);
}
// Slowly decaying modes (|a| up to 0.999): the kernel barely decays over T = 64.
Test(ssm, cross_form_long_memory) {
    cross_case("ssm/cross_form_long_memory", 2, 64, 3, 5, INIT_LONG_MEMORY);
}

// --- NULL gradient pointers ------------------------------------------------------------------
// A backward with some gradients NULL computes the others exactly as the full call.

Test(ssm, null_grads) {
    phax_rng r = tu_rng("ssm/null_grads");
    int B = 2, T = 7, H = 3, N = 5;
    size_t n = (size_t)B * T * H, hn = (size_t)H * N, ht = (size_t)H * T;
    double *u = tu_buf(n), *Lre = tu_buf(N), *Lim = tu_buf(N), *Cre = tu_buf(hn),
           *Cim = tu_buf(hn), *D = tu_buf(H), *dy = tu_buf(n), *K = tu_buf(ht), *dK = tu_buf(ht);
    tu_fill_normal(u, n, &r, 1.0);
    init_lambda(Lre, Lim, N, INIT_SPEC, &r);
    tu_fill_normal(Cre, hn, &r, 1.0), tu_fill_normal(Cim, hn, &r, 1.0);
    tu_fill_normal(D, H, &r, 1.0), tu_fill_normal(dy, n, &r, 1.0);
    tu_fill_normal(K, ht, &r, 1.0), tu_fill_normal(dK, ht, &r, 1.0);

    // Recurrent: six gradients, each alone vs all together.
    size_t len[6] = {n, (size_t)N, (size_t)N, hn, hn, (size_t)H};
    double *full[6], *one[6];
    for (int j = 0; j < 6; j++) {
        full[j] = tu_buf(len[j]), one[j] = tu_buf(len[j]);
        tu_fill(full[j], len[j], 0.0);
    }
    ref_ssm_recurrent_bwd(full[0], full[1], full[2], full[3], full[4], full[5], dy, u, Lre, Lim,
                          Cre, Cim, D, B, T, H, N);
    for (int j = 0; j < 6; j++) {
        double *p[6] = {NULL};
        tu_fill(one[j], len[j], 0.0);
        p[j] = one[j];
        ref_ssm_recurrent_bwd(p[0], p[1], p[2], p[3], p[4], p[5], dy, u, Lre, Lim, Cre, Cim, D, B,
                              T, H, N);
        cr_assert(tu_max_abs_diff(one[j], full[j], len[j]) == 0.0, "recurrent grad %d alone", j);
        cr_assert(tu_intact(one[j]) && tu_intact(full[j]));
    }
    // DSS kernel: four gradients (reusing the Λ and C buffers' slots 1..4).
    for (int j = 1; j <= 4; j++) tu_fill(full[j], len[j], 0.0);
    ref_dss_kernel_bwd(full[1], full[2], full[3], full[4], dK, Lre, Lim, Cre, Cim, H, N, T);
    for (int j = 1; j <= 4; j++) {
        double *p[5] = {NULL};
        tu_fill(one[j], len[j], 0.0);
        p[j] = one[j];
        ref_dss_kernel_bwd(p[1], p[2], p[3], p[4], dK, Lre, Lim, Cre, Cim, H, N, T);
        cr_assert(tu_max_abs_diff(one[j], full[j], len[j]) == 0.0, "dss grad %d alone", j);
    }
    // Conv: du, dK, dD.
    double *cf[3] = {tu_buf(n), tu_buf(ht), tu_buf(H)}, *co[3] = {tu_buf(n), tu_buf(ht), tu_buf(H)};
    size_t clen[3] = {n, ht, (size_t)H};
    for (int j = 0; j < 3; j++) tu_fill(cf[j], clen[j], 0.0);
    ref_ssm_conv_bwd(cf[0], cf[1], cf[2], dy, u, K, D, B, T, H);
    for (int j = 0; j < 3; j++) {
        double *p[3] = {NULL};
        tu_fill(co[j], clen[j], 0.0);
        p[j] = co[j];
        ref_ssm_conv_bwd(p[0], p[1], p[2], dy, u, K, D, B, T, H);
        cr_assert(tu_max_abs_diff(co[j], cf[j], clen[j]) == 0.0, "conv grad %d alone", j);
        cr_assert(tu_intact(co[j]));
    }

    double *all[] = {u, Lre, Lim, Cre, Cim, D, dy, K, dK};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tu_free(all[i]);
    for (int j = 0; j < 6; j++) tu_free(full[j]), tu_free(one[j]);
    for (int j = 0; j < 3; j++) tu_free(cf[j]), tu_free(co[j]);
}
