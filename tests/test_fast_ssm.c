// The SSM ops of the fast tiers (fast/cpu/ssm.c on backend cpu, through the backend
// list of harness.h) vs ref: the DSS kernel (fwd, bwd) and the SSM convolution (FFT
// and direct, fwd, bwd), every output and gradient against ref/ssm.c in float64.
// Each test runs a case table (kcase, ccase, xcase rows) on every backend.
//
// Bound (flash-attention style). For every output X the test also evaluates a
// naive float32 version of the same formula — ref's loops transcribed to float,
// tests/baseline_f32_ssm.c, sharing no code with fast/ — and requires (h_judge)
//     err_fast ≤ C·err_naive32 + floor,   err = ‖X − X_ref‖₂ / ‖X_ref‖₂,
// with C = 3 and floor = 4·2^-24 (a few float32 roundings of the result:
// fast and naive32 round inputs and outputs differently, so neither can be
// expected to beat the other by more than that). The FFT convolution has a
// different error law from the direct sum: an FFT's rounding error grows like
// log2 n (Higham, Accuracy and Stability of Numerical Algorithms, §24.1: worst
// case ≈ log2 n·η per transform, η ≈ 6·2^-24), the direct sum's with the number
// of terms. Its floor is fft_floor(n) = max(4·2^-24, 2·2^-24·log2 n): one
// rounding per butterfly stage in each of the forward and inverse transform a
// value passes through — the typical (random-walk) size, well under the
// worst-case 3·log2 n·η of three transforms. Observed: ≈ 3·2^-24, flat in T.
// Gradients are checked on top of a random prior (backward adds): the rounding
// of that final addition, 2^-24·‖result‖/‖ref‖, is added to the floor.
// Two refinements of the baseline (a second naive draw for outputs carried by a few
// elements; the error a pipeline stage inherits) are explained at check_full.
// Inputs are drawn in double, rounded to float, and the float values are what
// ref sees too. NaN or inf anywhere fails (h_judge); every comparison is printed.
#include <complex.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseline_f32.h"
#include "harness.h"
#include "phax/fcpu.h"  // plan_choice: fast/cpu's own method switch
#include "phax/ref.h"

static const double PI = 3.14159265358979323846;
static const double U32 = 5.9604644775390625e-08;  // 2^-24, float32 unit roundoff
#define C_NAIVE 3.0
#define FLOOR (4.0 * U32)
static double fft_floor(int n) {
    double f = 2.0 * U32 * log2((double)n);
    return f > FLOOR ? f : FLOOR;
}

// Draws n normals × scale in double, rounds to float into f and gives the
// float values back as doubles in d (either may be NULL-free; both required).
static void draw(float *f, double *d, size_t n, phax_rng *r, double scale) {
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)(scale * phax_rng_normal(r));
        d[i] = f[i];
    }
}
static void ffill(float *x, size_t n, float v) {
    for (size_t i = 0; i < n; i++) x[i] = v;
}

static double nrm(const double *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += x[i] * x[i];
    return sqrt(s);
}
static double fnrm(const float *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return sqrt(s);
}

// One comparison: fast (with its prior) and naive32 against ref.
//  * naive2 (may be NULL): a second, equally naive evaluation (the sums over l run
//    the other way). err_naive is then the rms of the two. Where an output is
//    carried by a few elements (dΛ: N values, a few slow modes dominate) one naive
//    error is a single draw that its own cancellation can make arbitrarily small,
//    and err_fast / err_naive — a ratio of two independent errors of the same
//    size — has a heavy (Cauchy-like) tail: seen once in ~50 runs at 10× before
//    this, with fast's error at its usual size. Two draws make a tiny baseline
//    rare (both must be small) without raising its typical value.
//  * inh (may be NULL), for a stage of a pipeline: ref's stage run in double on
//    fast's own intermediate (e.g. ref_dss_kernel_bwd on the dK the fast conv
//    produced). Its error, err_inh, is what fast inherited before the stage ran; the
//    naive pipeline inherits an error of the same size but its own rounding can
//    cancel it (seen: err_naive 6.8e-8 against err_inh 3.7e-7), so the baseline is
//    max(err_naive, err_inh).
static void check_full(const char *what, const char *shape, const float *fast, const float *prior,
                       const float *naive, const float *naive2, const double *ref, size_t n,
                       double floor, const double *inh) {
    // ref is what the op computes (ref's gradients start from 0); fast and, for the
    // judge, naive32 and ref hold prior + that.
    double *rt = tu_buf(n), *nt = tu_buf(n), *nt2 = naive2 ? tu_buf(n) : NULL, *sc = tu_buf(n);
    for (size_t i = 0; i < n; i++) {
        double p = prior ? (double)prior[i] : 0.0;
        rt[i] = ref[i] + p, nt[i] = naive[i] + p, sc[i] = fabs(ref[i]);
        if (nt2) nt2[i] = naive2[i] + p;
    }
    h_sums s = {0};
    h_pool(&s, H_F(fast), H_D(nt), rt, H_F(prior), sc, NULL, n);
    if (naive2) {  // the mean square of the two naive errors
        h_sums s2 = {0};
        h_pool(&s2, H_F(fast), H_D(nt2), rt, H_F(prior), sc, NULL, n);
        s.naive = 0.5 * (s.naive + s2.naive), s.nonfinite |= s2.nonfinite;
    }
    if (inh) {  // the baseline is max(err_naive, err_inh)
        double ei = 0;
        for (size_t i = 0; i < n; i++) ei += (inh[i] - ref[i]) * (inh[i] - ref[i]);
        if (!(ei <= s.naive)) s.naive = ei;
    }
    if (prior) s.extra = U32 * fnrm(fast, n);  // the rounding of the final addition
    cr_assert(s.add > 0, "%s %s: ref is 0 (no relative error)", what, shape);
    bool ok = h_judge(shape, what, &s, C_NAIVE, floor);
    cr_assert(ok, "%s %s: err_fast above C·max(err_naive32, err_inh) + floor (seed %llu)", what,
              shape, (unsigned long long)tu_base_seed());
    cr_assert(tu_fintact(fast), "%s %s: guard zone overwritten", what, shape);
    tu_free(rt), tu_free(nt), tu_free(nt2), tu_free(sc);
}
static void check(const char *what, const char *shape, const float *fast, const float *prior,
                  const float *naive, const double *ref, size_t n, double floor) {
    check_full(what, shape, fast, prior, naive, NULL, ref, n, floor, NULL);
}

static void *ws_alloc(size_t bytes) {
    void *w = phax_alloc(bytes);
    cr_assert(w);
    memset(w, 0xFF, bytes);  // garbage (NaN floats): results must not depend on ws contents
    return w;
}

// --- inputs ----------------------------------------------------------------------------------
enum { INIT_SPEC, INIT_LONG, INIT_SMALL };
static const char *init_name[] = {"spec", "long", "small"};
// INIT_SPEC: Λre, Λim ~ N(0, 1) (spec §4); INIT_LONG: Λre = log v, v log-uniform in
// [1e-3, 1e-1], Λim = log(π(n+1)/N) (the long-memory init); INIT_SMALL: long-memory
// Λre and Im λ log-uniform in [0.01, 0.3], so |λ| < 0.5 (the series branches).
static void draw_lambda(float *Lre, double *dLre, float *Lim, double *dLim, int N, int init,
                        phax_rng *r) {
    for (int n = 0; n < N; n++) {
        double a, b;
        if (init == INIT_SPEC)
            a = phax_rng_normal(r), b = phax_rng_normal(r);
        else if (init == INIT_LONG)
            a = phax_rng_uniform_range(r, log(1e-3), log(1e-1)), b = log(PI * (n + 1) / N);
        else
            a = phax_rng_uniform_range(r, log(1e-3), log(1e-1)),
            b = phax_rng_uniform_range(r, log(0.01), log(0.3));
        Lre[n] = (float)a, Lim[n] = (float)b;
        dLre[n] = Lre[n], dLim[n] = Lim[n];
    }
}

// --- dss kernel ------------------------------------------------------------------------------

static void kernel_case(const h_backend *be, int H, int N, int T, int init, phax_rng *r) {
    char shape[96];
    snprintf(shape, sizeof shape, "(H=%d N=%d T=%d %s)", H, N, T, init_name[init]);
    size_t HN = (size_t)H * N, HT = (size_t)H * T;
    float *Lre = tu_fbuf(N), *Lim = tu_fbuf(N), *Cre = tu_fbuf(HN), *Cim = tu_fbuf(HN);
    double *dLre_ = tu_buf(N), *dLim_ = tu_buf(N), *dCre_ = tu_buf(HN), *dCim_ = tu_buf(HN);
    draw_lambda(Lre, dLre_, Lim, dLim_, N, init, r);
    draw(Cre, dCre_, HN, r, 1.0), draw(Cim, dCim_, HN, r, 1.0);

    // forward
    // Two naive draws (see check_full): at small H·T, K is a few sums over N modes.
    float *K = tu_fbuf(HT), *Kn = tu_fbuf(HT), *Kn2 = tu_fbuf(HT);
    double *Kr = tu_buf(HT);
    void *ws = ws_alloc(be->ssm.kernel_fwd_ws(H, N, T));
    be->ssm.kernel_fwd(K, Lre, Lim, Cre, Cim, H, N, T, ws);
    b32_dss_kernel_fwd(Kn, Lre, Lim, Cre, Cim, H, N, T, 0);
    b32_dss_kernel_fwd(Kn2, Lre, Lim, Cre, Cim, H, N, T, 1);
    ref_dss_kernel_fwd(Kr, dLre_, dLim_, dCre_, dCim_, H, N, T);
    check_full("dss K", shape, K, NULL, Kn, Kn2, Kr, HT, FLOOR, NULL);
    phax_free(ws);

    // backward, on top of random priors scaled like the gradient
    float *dK = tu_fbuf(HT);
    double *dKd = tu_buf(HT);
    draw(dK, dKd, HT, r, 1.0);
    double *g[4] = {tu_buf(N), tu_buf(N), tu_buf(HN), tu_buf(HN)};
    size_t len[4] = {(size_t)N, (size_t)N, HN, HN};
    for (int i = 0; i < 4; i++) tu_fill(g[i], len[i], 0.0);
    ref_dss_kernel_bwd(g[0], g[1], g[2], g[3], dKd, dLre_, dLim_, dCre_, dCim_, H, N, T);
    float *gf[4], *gn[4], *gr[4], *pr[4];
    for (int i = 0; i < 4; i++) {
        gf[i] = tu_fbuf(len[i]), gn[i] = tu_fbuf(len[i]), gr[i] = tu_fbuf(len[i]), pr[i] = tu_fbuf(len[i]);
        ffill(gn[i], len[i], 0.0f), ffill(gr[i], len[i], 0.0f);
        double rms = nrm(g[i], len[i]) / sqrt((double)len[i]);
        for (size_t j = 0; j < len[i]; j++) pr[i][j] = gf[i][j] = (float)(rms * phax_rng_normal(r));
    }
    ws = ws_alloc(be->ssm.kernel_bwd_ws(H, N, T));
    be->ssm.kernel_bwd(gf[0], gf[1], gf[2], gf[3], dK, Lre, Lim, Cre, Cim, H, N, T, ws);
    b32_dss_kernel_bwd(gn[0], gn[1], gn[2], gn[3], dK, Lre, Lim, Cre, Cim, H, N, T, 0);
    b32_dss_kernel_bwd(gr[0], gr[1], gr[2], gr[3], dK, Lre, Lim, Cre, Cim, H, N, T, 1);
    const char *names[4] = {"dss dLre", "dss dLim", "dss dCre", "dss dCim"};
    for (int i = 0; i < 4; i++)
        check_full(names[i], shape, gf[i], pr[i], gn[i], gr[i], g[i], len[i], FLOOR, NULL);

    // NULL gradients are skipped (without dΛ the kernel takes a shorter path: the
    // sgemm is narrower, so the bits may differ; the bound is the same).
    float *only = tu_fbuf(HN);
    memcpy(only, pr[3], HN * sizeof *only);
    be->ssm.kernel_bwd(NULL, NULL, NULL, only, dK, Lre, Lim, Cre, Cim, H, N, T, ws);
    check_full("dss dCim alone", shape, only, pr[3], gn[3], gr[3], g[3], HN, FLOOR, NULL);
    phax_free(ws);

    for (int i = 0; i < 4; i++) tu_free(g[i]), tu_ffree(gf[i]), tu_ffree(gn[i]), tu_ffree(gr[i]), tu_ffree(pr[i]);
    tu_ffree(only), tu_ffree(dK), tu_free(dKd), tu_ffree(K), tu_ffree(Kn), tu_ffree(Kn2), tu_free(Kr);
    tu_ffree(Lre), tu_ffree(Lim), tu_ffree(Cre), tu_ffree(Cim);
    tu_free(dLre_), tu_free(dLim_), tu_free(dCre_), tu_free(dCim_);
}

// T: 1 and 2 (degenerate), 7 (odd), 64, 100, 257 (odd, one past a DSS block of 256).
static const int Ts[] = {1, 2, 7, 64, 100, 257};
// The conv adds T whose FFT length is not a power of two: 90 → n = 192 = 3·2⁶,
// 150 → 320 = 5·2⁶, 257 → 640 = 5·2⁷ (the others give 2, 4, 16, 128, 256).
static const int Tconv[] = {1, 2, 7, 64, 90, 100, 150, 257};

typedef struct {
    int H, N, T, init;
} kcase;

#define MAXCASES 160

// Ts × H 3, 16 × N 5, 64 × the three Λ inits.
static int kernel_cases(kcase *cs) {
    int k = 0;
    for (int it = 0; it < 6; it++)
        for (int H = 3; H <= 16; H += 13)
            for (int N = 5; N <= 64; N += 59)
                for (int init = 0; init < 3; init++) cs[k++] = (kcase){H, N, Ts[it], init};
    return k;
}

static void kernel_table(const h_backend *be, const char *test, const kcase *cs, int nc) {
    phax_rng r = tu_rng(test);
    for (int c = 0; c < nc; c++) kernel_case(be, cs[c].H, cs[c].N, cs[c].T, cs[c].init, &r);
    h_report_worst(test);
}

H_TEST(ssm, kernel_vs_ref) {
    kcase cs[MAXCASES];
    kernel_table(be, "fcpu_ssm/kernel_vs_ref", cs, kernel_cases(cs));
}

// Long kernels: the backward sums over T lags — where float accumulation over long T
// would show (naive32's error grows with T; fast's should not). Also the lag blocking
// of fcpu/ssm.c (256 lags per block forward, 512 backward, block powers in pieces of
// 64 blocks): T = 1000 and 1537 have several blocks and a padded last one; T = 40000
// has more than 64 blocks in both directions.
static const kcase kernel_long_cases[] = {
    {5, 7, 1000, INIT_SPEC}, {5, 7, 1537, INIT_LONG},   {8, 64, 2048, INIT_LONG},
    {4, 64, 16384, INIT_LONG}, {4, 16, 16384, INIT_SPEC}, {2, 4, 40000, INIT_LONG},
    {2, 4, 40000, INIT_SMALL},
};

H_TEST(ssm, kernel_long) {
    kernel_table(be, "fcpu_ssm/kernel_long", kernel_long_cases,
                 (int)(sizeof kernel_long_cases / sizeof *kernel_long_cases));
}

// --- ssm conv --------------------------------------------------------------------------------

static const char *meth_name(int m) { return m == H_SSM_FFT ? "fft" : "direct"; }

// Runs fast fwd + bwd with the given method against ref and naive32.
// K from the caller (float and its double copy).
static void conv_case(const h_backend *be, int B, int T, int H, int method, const float *K, const double *Kd,
                      phax_rng *r, const char *tag) {
    void *p = be->ssm.plan_new(B, T, H, method);
    cr_assert(p, "%s", phax_error());
    int m = be->ssm.plan_method(p), n = be->ssm.plan_fft_len(p);
    char shape[128];
    snprintf(shape, sizeof shape, "(B=%d T=%d H=%d %s n=%d %s)", B, T, H, meth_name(m), n, tag);
    // FFT: rounding grows like log2 n (see the top of the file).
    double floor = m == H_SSM_FFT ? fft_floor(n) : FLOOR;
    size_t BTH = (size_t)B * T * H, HT = (size_t)H * T;
    float *u = tu_fbuf(BTH), *D = tu_fbuf(H), *dy = tu_fbuf(BTH);
    double *ud = tu_buf(BTH), *Dd = tu_buf(H), *dyd = tu_buf(BTH);
    draw(u, ud, BTH, r, 1.0), draw(D, Dd, H, r, 1.0), draw(dy, dyd, BTH, r, 1.0);

    float *y = tu_fbuf(BTH), *yn = tu_fbuf(BTH);
    double *yr = tu_buf(BTH);
    void *ws = ws_alloc(be->ssm.conv_fwd_ws(p));
    cr_assert(be->ssm.conv_fwd(y, u, K, D, B, T, H, p, ws) == PHAX_OK, "%s", phax_error());
    b32_ssm_conv_fwd(yn, u, K, D, B, T, H);
    ref_ssm_conv_fwd(yr, ud, Kd, Dd, B, T, H);
    check("conv y", shape, y, NULL, yn, yr, BTH, floor);
    cr_assert(tu_fintact(u) && tu_fintact(D) && tu_fintact(K));
    phax_free(ws);

    double *g[3] = {tu_buf(BTH), tu_buf(HT), tu_buf(H)};
    size_t len[3] = {BTH, HT, (size_t)H};
    for (int i = 0; i < 3; i++) tu_fill(g[i], len[i], 0.0);
    ref_ssm_conv_bwd(g[0], g[1], g[2], dyd, ud, Kd, Dd, B, T, H);
    float *gf[3], *gn[3], *pr[3];
    for (int i = 0; i < 3; i++) {
        gf[i] = tu_fbuf(len[i]), gn[i] = tu_fbuf(len[i]), pr[i] = tu_fbuf(len[i]);
        ffill(gn[i], len[i], 0.0f);
        double rms = nrm(g[i], len[i]) / sqrt((double)len[i]);
        for (size_t j = 0; j < len[i]; j++) pr[i][j] = gf[i][j] = (float)(rms * phax_rng_normal(r));
    }
    ws = ws_alloc(be->ssm.conv_bwd_ws(p));
    cr_assert(be->ssm.conv_bwd(gf[0], gf[1], gf[2], dy, u, K, D, B, T, H, p, ws) == PHAX_OK);
    b32_ssm_conv_bwd(gn[0], gn[1], gn[2], dy, u, K, D, B, T, H);
    const char *names[3] = {"conv du", "conv dK", "conv dD"};
    // dD is a plain Σ dy·u (no FFT) in both methods: the plain floor.
    for (int i = 0; i < 3; i++)
        check(names[i], shape, gf[i], pr[i], gn[i], g[i], len[i], i == 2 ? FLOOR : floor);

    // Each gradient alone: the same bits as with all three requested.
    for (int i = 0; i < 3; i++) {
        float *one = tu_fbuf(len[i]);
        memcpy(one, pr[i], len[i] * sizeof *one);
        float *a[3] = {NULL, NULL, NULL};
        a[i] = one;
        cr_assert(be->ssm.conv_bwd(a[0], a[1], a[2], dy, u, K, D, B, T, H, p, ws) == PHAX_OK);
        cr_assert(memcmp(one, gf[i], len[i] * sizeof *one) == 0, "%s alone differs %s", names[i],
                  shape);
        cr_assert(tu_fintact(one));
        tu_ffree(one);
    }
    phax_free(ws);
    be->ssm.plan_free(p);
    for (int i = 0; i < 3; i++) tu_free(g[i]), tu_ffree(gf[i]), tu_ffree(gn[i]), tu_ffree(pr[i]);
    tu_ffree(u), tu_ffree(D), tu_ffree(dy), tu_ffree(y), tu_ffree(yn);
    tu_free(ud), tu_free(Dd), tu_free(dyd), tu_free(yr);
}

typedef struct {
    int T, H;  // B = 2; both methods on the same K
} ccase;

// Tconv × H 3, 16.
static int conv_cases(ccase *cs) {
    int k = 0;
    for (int it = 0; it < 8; it++)
        for (int H = 3; H <= 16; H += 13) cs[k++] = (ccase){Tconv[it], H};
    return k;
}

H_TEST(ssm, conv_vs_ref) {
    phax_rng r = tu_rng("fcpu_ssm/conv_vs_ref");
    ccase cs[MAXCASES];
    int nc = conv_cases(cs);
    for (int c = 0; c < nc; c++) {
        {
            int T = cs[c].T, H = cs[c].H;
            // K ~ N(0, 1) iid: no decay, every lag matters.
            float *K = tu_fbuf((size_t)H * T);
            double *Kd = tu_buf((size_t)H * T);
            draw(K, Kd, (size_t)H * T, &r, 1.0);
            conv_case(be, 2, T, H, H_SSM_FFT, K, Kd, &r, "K iid");
            conv_case(be, 2, T, H, H_SSM_DIRECT, K, Kd, &r, "K iid");
            tu_ffree(K), tu_free(Kd);
        }
    }
    h_report_worst("conv_vs_ref");
}

// fast/cpu's own method switch (not an equivalence test: no backend list):
// direct up to FCPU_SSM_DIRECT_MAX_T, FFT above; FFT
// lengths ≥ 2T − 1 (no wrap), of the form {1, 3, 5}·2^a with a ≥ 1, the smallest such.
Test(cpu_ssm, plan_choice) {
    const int Tc[] = {1, 2, 7, FCPU_SSM_DIRECT_MAX_T, FCPU_SSM_DIRECT_MAX_T + 1, 90, 100, 150,
                      257, 1000, 4097};
    for (size_t i = 0; i < sizeof Tc / sizeof *Tc; i++) {
        fcpu_ssm_plan *p = fcpu_ssm_plan_new(1, Tc[i], 4);
        cr_assert(p);
        int want = Tc[i] <= FCPU_SSM_DIRECT_MAX_T ? FCPU_SSM_DIRECT : FCPU_SSM_FFT;
        cr_assert(fcpu_ssm_plan_method(p) == want, "T=%d", Tc[i]);
        fcpu_ssm_plan_free(p);
        p = fcpu_ssm_plan_new_ex(1, Tc[i], 4, FCPU_SSM_FFT, 0);
        int n = fcpu_ssm_plan_fft_len(p), m = n;
        cr_assert(n >= 2 * Tc[i] - 1 && n % 2 == 0, "T=%d n=%d", Tc[i], n);
        while (m % 2 == 0) m /= 2;
        cr_assert(m == 1 || m == 3 || m == 5, "T=%d n=%d not {1,3,5}·2^a", Tc[i], n);
        for (int c = 2 * Tc[i] - 1; c < n; c++) {  // and no smaller length of that form
            int q = c;
            while (q % 2 == 0) q /= 2;
            cr_assert(!(c % 2 == 0 && (q == 1 || q == 3 || q == 5)), "T=%d: n=%d > %d", Tc[i], n, c);
        }
        fcpu_ssm_plan_free(p);
    }
    cr_assert(fcpu_ssm_plan_new(0, 4, 4) == NULL && fcpu_ssm_plan_new(1, 4, -1) == NULL);
}

// A call whose shape differs from the plan's fails loudly: PHAX_ERR, NaN output.
H_TEST(ssm, plan_mismatch) {
    void *p = be->ssm.plan_new(1, 16, 4, H_SSM_FFT);
    void *ws = ws_alloc(be->ssm.conv_bwd_ws(p) + be->ssm.conv_fwd_ws(p));
    float *u = tu_fbuf(2 * 16 * 4), *y = tu_fbuf(2 * 16 * 4), *K = tu_fbuf(64), *D = tu_fbuf(4),
          *dD = tu_fbuf(4);
    ffill(u, 128, 1.0f), ffill(y, 128, 0.0f), ffill(K, 64, 1.0f), ffill(D, 4, 1.0f);
    ffill(dD, 4, 0.0f);
    cr_assert(be->ssm.conv_fwd(y, u, K, D, 2, 16, 4, p, ws) == PHAX_ERR);
    cr_assert(isnan(y[0]) && isnan(y[127]) && tu_fintact(y));
    cr_assert(strstr(phax_error(), "plan") != NULL, "%s", phax_error());
    cr_assert(be->ssm.conv_bwd(NULL, NULL, dD, u, u, K, D, 1, 16, 4, p, (char *)ws + 4) ==
              PHAX_ERR);
    cr_assert(isnan(dD[0]) && tu_fintact(dD));
    tu_ffree(u), tu_ffree(y), tu_ffree(K), tu_ffree(D), tu_ffree(dD);
    phax_free(ws);
    be->ssm.plan_free(p);
}

// --- cross-form: fcpu conv ∘ fcpu kernel vs ref's recurrence ------------------------------------
// The fast pipeline K = dss(Λ, C), y = K ∗ u + D u, backward through both, against
// ref_ssm_recurrent_* (float64, which never forms K), and naive32 kernel ∘ conv.
static void cross_case(const h_backend *be, int B, int T, int H, int N, int init, int method, phax_rng *r) {
    char shape[128];
    size_t HN = (size_t)H * N, HT = (size_t)H * T, BTH = (size_t)B * T * H;
    float *Lre = tu_fbuf(N), *Lim = tu_fbuf(N), *Cre = tu_fbuf(HN), *Cim = tu_fbuf(HN), *D = tu_fbuf(H);
    double *Lre_ = tu_buf(N), *Lim_ = tu_buf(N), *Cre_ = tu_buf(HN), *Cim_ = tu_buf(HN),
           *D_ = tu_buf(H);
    draw_lambda(Lre, Lre_, Lim, Lim_, N, init, r);
    draw(Cre, Cre_, HN, r, 1.0), draw(Cim, Cim_, HN, r, 1.0), draw(D, D_, H, r, 1.0);
    float *u = tu_fbuf(BTH), *dy = tu_fbuf(BTH);
    double *u_ = tu_buf(BTH), *dy_ = tu_buf(BTH);
    draw(u, u_, BTH, r, 1.0), draw(dy, dy_, BTH, r, 1.0);

    void *p = be->ssm.plan_new(B, T, H, method);
    int n = be->ssm.plan_fft_len(p);
    snprintf(shape, sizeof shape, "(B=%d T=%d H=%d N=%d %s %s)", B, T, H, N, init_name[init],
             meth_name(be->ssm.plan_method(p)));
    double floor = n ? fft_floor(n) : FLOOR;
    size_t wsb = be->ssm.kernel_fwd_ws(H, N, T);
    if (be->ssm.kernel_bwd_ws(H, N, T) > wsb) wsb = be->ssm.kernel_bwd_ws(H, N, T);
    if (be->ssm.conv_fwd_ws(p) > wsb) wsb = be->ssm.conv_fwd_ws(p);
    if (be->ssm.conv_bwd_ws(p) > wsb) wsb = be->ssm.conv_bwd_ws(p);
    void *ws = ws_alloc(wsb);  // one workspace shared by the four calls

    float *K = tu_fbuf(HT), *Kn = tu_fbuf(HT), *y = tu_fbuf(BTH), *yn = tu_fbuf(BTH);
    double *yr = tu_buf(BTH);
    be->ssm.kernel_fwd(K, Lre, Lim, Cre, Cim, H, N, T, ws);
    cr_assert(be->ssm.conv_fwd(y, u, K, D, B, T, H, p, ws) == PHAX_OK);
    b32_dss_kernel_fwd(Kn, Lre, Lim, Cre, Cim, H, N, T, 0);
    b32_ssm_conv_fwd(yn, u, Kn, D, B, T, H);
    ref_ssm_recurrent_fwd(yr, u_, Lre_, Lim_, Cre_, Cim_, D_, B, T, H, N);
    // ref's conv on the fast K: the error y inherits from K.
    double *Kf = tu_buf(HT), *yi = tu_buf(BTH);
    for (size_t i = 0; i < HT; i++) Kf[i] = K[i];
    ref_ssm_conv_fwd(yi, u_, Kf, D_, B, T, H);
    check_full("cross y", shape, y, NULL, yn, NULL, yr, BTH, floor, yi);

    // gradients: ref recurrent bwd vs fast conv bwd → dK → kernel bwd (zero priors here;
    // accumulation is covered above).
    size_t len[6] = {BTH, (size_t)N, (size_t)N, HN, HN, (size_t)H};
    double *g[6];
    float *gf[6], *gn[6], *gr[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    for (int i = 0; i < 6; i++) {
        g[i] = tu_buf(len[i]), tu_fill(g[i], len[i], 0.0);
        gf[i] = tu_fbuf(len[i]), ffill(gf[i], len[i], 0.0f);
        gn[i] = tu_fbuf(len[i]), ffill(gn[i], len[i], 0.0f);
        if (i >= 1 && i <= 4) gr[i] = tu_fbuf(len[i]), ffill(gr[i], len[i], 0.0f);
    }
    cr_assert(ref_ssm_recurrent_bwd(g[0], g[1], g[2], g[3], g[4], g[5], dy_, u_, Lre_, Lim_, Cre_,
                                    Cim_, D_, B, T, H, N) == PHAX_OK);
    float *dK = tu_fbuf(HT), *dKn = tu_fbuf(HT);
    ffill(dK, HT, 0.0f), ffill(dKn, HT, 0.0f);
    cr_assert(be->ssm.conv_bwd(gf[0], dK, gf[5], dy, u, K, D, B, T, H, p, ws) == PHAX_OK);
    be->ssm.kernel_bwd(gf[1], gf[2], gf[3], gf[4], dK, Lre, Lim, Cre, Cim, H, N, T, ws);
    b32_ssm_conv_bwd(gn[0], dKn, gn[5], dy, u, Kn, D, B, T, H);
    b32_dss_kernel_bwd(gn[1], gn[2], gn[3], gn[4], dKn, Lre, Lim, Cre, Cim, H, N, T, 0);
    b32_dss_kernel_bwd(gr[1], gr[2], gr[3], gr[4], dKn, Lre, Lim, Cre, Cim, H, N, T, 1);
    const char *names[6] = {"cross du", "cross dLre", "cross dLim", "cross dCre", "cross dCim",
                            "cross dD"};
    // What each stage inherits: du, dD from ref's conv bwd on the fast K; dΛ, dC from
    // ref's kernel bwd on the fast dK.
    double *gi[6];
    for (int i = 0; i < 6; i++) gi[i] = tu_buf(len[i]), tu_fill(gi[i], len[i], 0.0);
    double *dKf = tu_buf(HT);
    for (size_t i = 0; i < HT; i++) dKf[i] = dK[i];
    ref_ssm_conv_bwd(gi[0], NULL, gi[5], dy_, u_, Kf, D_, B, T, H);
    ref_dss_kernel_bwd(gi[1], gi[2], gi[3], gi[4], dKf, Lre_, Lim_, Cre_, Cim_, H, N, T);
    for (int i = 0; i < 6; i++)
        check_full(names[i], shape, gf[i], NULL, gn[i], gr[i], g[i], len[i], floor, gi[i]);
    for (int i = 0; i < 6; i++) tu_free(gi[i]);
    tu_free(dKf), tu_free(Kf), tu_free(yi);

    phax_free(ws);
    be->ssm.plan_free(p);
    for (int i = 0; i < 6; i++) tu_free(g[i]), tu_ffree(gf[i]), tu_ffree(gn[i]), tu_ffree(gr[i]);
    tu_ffree(dK), tu_ffree(dKn), tu_ffree(K), tu_ffree(Kn), tu_ffree(y), tu_ffree(yn), tu_free(yr);
    tu_ffree(Lre), tu_ffree(Lim), tu_ffree(Cre), tu_ffree(Cim), tu_ffree(D), tu_ffree(u), tu_ffree(dy);
    tu_free(Lre_), tu_free(Lim_), tu_free(Cre_), tu_free(Cim_), tu_free(D_), tu_free(u_),
        tu_free(dy_);
}

typedef struct {
    int T, H, N, init, method;  // B = 2
} xcase;

// T 1, 7, 100, 257 × H 3, 16 × N 5, 64 × the three inits, FFT and (T ≤ 100) direct.
static int cross_cases(xcase *cs) {
    const int Tc[] = {1, 7, 100, 257};
    int k = 0;
    for (int i = 0; i < 4; i++)
        for (int H = 3; H <= 16; H += 13)
            for (int N = 5; N <= 64; N += 59)
                for (int init = 0; init < 3; init++) {
                    cs[k++] = (xcase){Tc[i], H, N, init, H_SSM_FFT};
                    if (Tc[i] <= 100) cs[k++] = (xcase){Tc[i], H, N, init, H_SSM_DIRECT};
                }
    return k;
}

H_TEST(ssm, cross_form) {
    phax_rng r = tu_rng("fcpu_ssm/cross_form");
    xcase cs[MAXCASES];
    int nc = cross_cases(cs);
    for (int c = 0; c < nc; c++) cross_case(be, 2, cs[c].T, cs[c].H, cs[c].N, cs[c].init, cs[c].method, &r);
    h_report_worst("cross_form");
}

// --- long T: FFT vs the naive float32 direct sum ------------------------------------------------
// Long-memory Λ makes K decay slowly (|e^{λ l}| ≥ e^{−0.1 l}, and for the slowest
// modes ≈ e^{−0.001 l}), so y sums many terms of similar size. Observed (B = 2, H = 16,
// N = 64; printed by every run), T = 256 → 2048:
//   FFT      y 1.76e-7 → 1.79e-7, du 1.82e-7 → 1.83e-7, dK 2.04e-7 → 2.36e-7: flat (the
//            log2 n growth, 9 → 12 stages, is below the noise);
//   naive32  y 1.95e-7 → 3.53e-7 (~T^0.3: K's decay shortens the sums), du 2.49e-7 →
//            7.76e-7 and dK 3.23e-7 → 9.43e-7 (~√T: a random walk of roundings, not T).
static const int long_T_cases[] = {256, 512, 1024, 2048};  // B = 2, H = 16, N = 64, FFT

H_TEST(ssm, long_T) {
    phax_rng r = tu_rng("fcpu_ssm/long_T");
    const int B = 2, H = 16, N = 64;
    for (int c = 0; c < 4; c++) {
        int T = long_T_cases[c];
        size_t HN = (size_t)H * N, HT = (size_t)H * T;
        float *Lre = tu_fbuf(N), *Lim = tu_fbuf(N), *Cre = tu_fbuf(HN), *Cim = tu_fbuf(HN), *K = tu_fbuf(HT);
        double *Lre_ = tu_buf(N), *Lim_ = tu_buf(N), *Cre_ = tu_buf(HN), *Cim_ = tu_buf(HN),
               *Kd = tu_buf(HT);
        draw_lambda(Lre, Lre_, Lim, Lim_, N, INIT_LONG, &r);
        draw(Cre, Cre_, HN, &r, 1.0), draw(Cim, Cim_, HN, &r, 1.0);
        ref_dss_kernel_fwd(Kd, Lre_, Lim_, Cre_, Cim_, H, N, T);
        for (size_t i = 0; i < HT; i++) K[i] = (float)Kd[i], Kd[i] = K[i];
        conv_case(be, B, T, H, H_SSM_FFT, K, Kd, &r, "long-memory K");
        tu_ffree(Lre), tu_ffree(Lim), tu_ffree(Cre), tu_ffree(Cim), tu_ffree(K);
        tu_free(Lre_), tu_free(Lim_), tu_free(Cre_), tu_free(Cim_), tu_free(Kd);
    }
    h_report_worst("long_T");
}

// --- determinism ---------------------------------------------------------------------------------
// The same inputs give the same bits: repeated calls, a fresh plan and workspace
// (filled with different garbage), for the kernel and both conv methods.
H_TEST(ssm, determinism) {
    phax_rng r = tu_rng("fcpu_ssm/determinism");
    const int B = 2, T = 300, H = 16, N = 64;
    size_t HN = (size_t)H * N, HT = (size_t)H * T, BTH = (size_t)B * T * H;
    float *Lre = tu_fbuf(N), *Lim = tu_fbuf(N), *Cre = tu_fbuf(HN), *Cim = tu_fbuf(HN), *D = tu_fbuf(H);
    double *tmp = tu_buf(BTH);
    draw_lambda(Lre, tmp, Lim, tmp, N, INIT_LONG, &r);
    draw(Cre, tmp, HN, &r, 1.0), draw(Cim, tmp, HN, &r, 1.0), draw(D, tmp, H, &r, 1.0);
    float *u = tu_fbuf(BTH), *dy = tu_fbuf(BTH);
    draw(u, tmp, BTH, &r, 1.0), draw(dy, tmp, BTH, &r, 1.0);
    // 0 K, 1 y fft, 2 du fft, 3 y direct, 4 du direct, 5 dK, 6 dD, 7 dLre, 8 dLim, 9 dCim
    // (5..9 accumulate over both methods).
    enum { NO = 10 };
    size_t len[NO] = {HT, BTH, BTH, BTH, BTH, HT, (size_t)H, (size_t)N, (size_t)N, HN};
    float *out[2][NO];
    for (int rep = 0; rep < 2; rep++) {
        for (int i = 0; i < NO; i++) out[rep][i] = tu_fbuf(len[i]), ffill(out[rep][i], len[i], 0.0f);
        for (int method = H_SSM_FFT; method <= H_SSM_DIRECT; method++) {
            void *p = be->ssm.plan_new(B, T, H, method);
            size_t wsb = be->ssm.kernel_bwd_ws(H, N, T) + be->ssm.conv_bwd_ws(p) +
                         be->ssm.conv_fwd_ws(p) + be->ssm.kernel_fwd_ws(H, N, T);
            void *ws = ws_alloc(wsb);
            if (rep) memset(ws, 0x5A, wsb);
            float **o = out[rep];
            int k = method == H_SSM_FFT ? 0 : 2;
            be->ssm.kernel_fwd(o[0], Lre, Lim, Cre, Cim, H, N, T, ws);
            cr_assert(be->ssm.conv_fwd(o[1 + k], u, o[0], D, B, T, H, p, ws) == PHAX_OK);
            cr_assert(be->ssm.conv_bwd(o[2 + k], o[5], o[6], dy, u, o[0], D, B, T, H, p, ws) ==
                      PHAX_OK);
            be->ssm.kernel_bwd(o[7], o[8], NULL, o[9], o[5], Lre, Lim, Cre, Cim, H, N, T, ws);
            phax_free(ws);
            be->ssm.plan_free(p);
        }
    }
    for (int i = 0; i < NO; i++) {
        cr_assert(memcmp(out[0][i], out[1][i], len[i] * sizeof(float)) == 0, "output %d differs",
                  i);
        cr_assert(tu_fintact(out[0][i]) && tu_fintact(out[1][i]));
        tu_ffree(out[0][i]), tu_ffree(out[1][i]);
    }
    tu_ffree(Lre), tu_ffree(Lim), tu_ffree(Cre), tu_ffree(Cim), tu_ffree(D), tu_ffree(u), tu_ffree(dy), tu_free(tmp);
}
