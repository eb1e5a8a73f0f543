// fast/cpu ssm: the DSS kernel (GSS) as one sgemm over modes, and the causal SSM
// convolution by FFT (FFTW single precision) or, for short T, directly.
// float32 storage; the semantics are ref/ssm.c's (see phax/fcpu_ssm.h).
//
// Complex conventions as in ref/ssm.c: a backward pass carries ḡ_w with
// δL = Re(ḡ_w δw); for w = x + i y, dL/dx = Re ḡ_w and dL/dy = −Im ḡ_w.
#include <complex.h>
#include <fftw3.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "phax/fcpu.h"
#include "phax/fcpu_gemm.h"
#include "phax/numerics.h"

#ifndef CMPLX
#define CMPLX(x, y) ((double complex)((double)(x) + _Complex_I * (double)(y)))
#endif

// Lags per block in the DSS kernel: l = m·PB + j, j < PB (forward, backward).
#ifndef FCPU_DSS_BLOCK
#define FCPU_DSS_BLOCK 256
#endif
#ifndef FCPU_DSS_BLOCK_BWD
#define FCPU_DSS_BLOCK_BWD 512
#endif

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }
static size_t b64(size_t bytes) { return round_up(bytes, 64); }

// --- the scalar mode functions, in double (as ref/ssm.c) ------------------------------------

static double complex mode_lambda(float lre, float lim) { return CMPLX(-exp(lre), exp(lim)); }

// A(λ) = (e^λ − 1)/λ without cancellation; series below |λ| = 1e-4 (phax/numerics.h).
static double complex mode_zoh(double complex lam) {
    double ar, ai;
    phax_zoh(creal(lam), cimag(lam), &ar, &ai);
    return CMPLX(ar, ai);
}

// A'(λ) = (e^λ − A)/λ; Taylor series Σ (j+1) λ^j/(j+2)! below |λ| = 0.5.
static double complex mode_zoh_deriv(double complex lam) {
    if (cabs(lam) < 0.5) {
        double complex s = 0, p = 1;
        double f = 2.0;
        for (int j = 0; j < 18; j++) {
            s += (j + 1) / f * p;
            p *= lam;
            f *= j + 3;
        }
        return s;
    }
    double r = exp(creal(lam));
    return (CMPLX(r * cos(cimag(lam)), r * sin(cimag(lam))) - mode_zoh(lam)) / lam;
}

// Values below FLT_MIN are stored as 0: denormal operands would slow the sgemm
// down many times over for an absolute change below 1.2e-38.
static inline float ftz(double x) {
    float v = (float)x;
    return fabsf(v) < FLT_MIN ? 0.0f : v;
}

// re[k] + i·im[k] = e^{λ·step·k}, k < count, in double. Each is a product
// e^{λ·step·32a}·e^{λ·step·b} (k = 32a + b) of two factors from exp, cos, sin of
// double arguments — the angle is never formed in float and never built by
// repeated multiplication — so it is within a few double ulps of ref's value.
#define PW_IN 32
static void mode_powers(double *restrict re, double *restrict im, double complex lam, int step,
                        int count) {
    double pr[PW_IN], pi[PW_IN];
    double a = creal(lam) * step, w = cimag(lam) * step;
    int nin = count < PW_IN ? count : PW_IN;
    for (int b = 0; b < nin; b++) {
        double r = exp(b * a);
        pr[b] = r * cos(b * w);
        pi[b] = r * sin(b * w);
    }
    for (int k0 = 0; k0 < count; k0 += PW_IN) {
        double r = exp(k0 * a), qr = r * cos(k0 * w), qi = r * sin(k0 * w);
        int len = count - k0 < PW_IN ? count - k0 : PW_IN;
        for (int b = 0; b < len; b++) {
            re[k0 + b] = qr * pr[b] - qi * pi[b];
            im[k0 + b] = qr * pi[b] + qi * pr[b];
        }
    }
}

// The block structure: l = m·PB + j. e^{λ l} = Q_m·P_j with Q_m = e^{λ m PB}, P_j = e^{λ j}.
typedef struct {
    int PB, M;  // lags per block, blocks (M·PB ≥ T)
    int pad;    // T < M·PB: K / dK go through a padded (H, M·PB) buffer
} dss_blocks;

static dss_blocks dss_blocking(int T, int pb) {
    dss_blocks b;
    b.PB = T < pb ? T : pb;
    b.M = (T + b.PB - 1) / b.PB;
    b.pad = b.M * b.PB != T;
    return b;
}

// --- dss kernel forward ----------------------------------------------------------------------
// Threads: the gemm is OpenBLAS's (threaded); the O(H·N·T/PB + N·PB) set-up and the
// combination around it run on the calling thread. With the set-up in an OpenMP region
// the gemm that follows shared its cores with the spinning OpenMP workers: 2-thread
// medians 1.8–2× the minimum (T = 16384: fwd 3.2 ms vs 1.8 ms, bwd 12–14 ms vs 7.4 ms).
// K[h, mPB + j] = Re Σ_n (C̃_hn Q_mn) P_nj: one sgemm
//   Kv (H·M × PB, row (h, m) = K[h, mPB : mPB + PB]) = A (H·M × 2N) · [Re P; Im P] (2N × PB),
//   A[(h, m)] = [Re(C̃_hn Q_mn) | −Im(C̃_hn Q_mn)]_n, formed in double and rounded once.
// ws: P (2N × PB f) | A (H·M × 2N f) | Kpad (H·M·PB f, when padded) | Q (2·M·N d) | C̃ (2·H·N d)
size_t fcpu_dss_kernel_fwd_ws(int H, int N, int T) {
    if (H <= 0 || N <= 0 || T <= 0) return 0;
    dss_blocks k = dss_blocking(T, FCPU_DSS_BLOCK);
    size_t HM = (size_t)H * k.M;
    return b64((size_t)2 * N * k.PB * sizeof(float)) + b64(HM * 2 * N * sizeof(float)) +
           (k.pad ? b64(HM * k.PB * sizeof(float)) : 0) + b64((size_t)2 * k.M * N * sizeof(double)) +
           b64((size_t)2 * H * N * sizeof(double));
}

void fcpu_dss_kernel_fwd(float *K, const float *Lre, const float *Lim, const float *Cre,
                         const float *Cim, int H, int N, int T, void *ws) {
    if (H <= 0 || T <= 0) return;
    if (N <= 0) {
        memset(K, 0, (size_t)H * T * sizeof *K);
        return;
    }
    const dss_blocks k = dss_blocking(T, FCPU_DSS_BLOCK);
    const int PB = k.PB, M = k.M, N2 = 2 * N;
    const size_t HM = (size_t)H * M;
    char *w = ws;
    float *P = (float *)w;
    w += b64((size_t)N2 * PB * sizeof(float));
    float *A = (float *)w;
    w += b64(HM * N2 * sizeof(float));
    float *Kpad = k.pad ? (float *)w : NULL;
    w += k.pad ? b64(HM * PB * sizeof(float)) : 0;
    double *Qre = (double *)w, *Qim = Qre + (size_t)M * N;  // Q[m * N + n]
    w += b64((size_t)2 * M * N * sizeof(double));
    double *Tre = (double *)w, *Tim = Tre + (size_t)H * N;  // C̃[h * N + n]

    {  // set-up: P, Q and C̃ per mode, then A
        double pre[FCPU_DSS_BLOCK], pim[FCPU_DSS_BLOCK], qre[64], qim[64];
        for (int n = 0; n < N; n++) {
            double complex lam = mode_lambda(Lre[n], Lim[n]), Az = mode_zoh(lam);
            mode_powers(pre, pim, lam, 1, PB);
            for (int j = 0; j < PB; j++) {
                P[(size_t)n * PB + j] = ftz(pre[j]);
                P[(size_t)(N + n) * PB + j] = ftz(pim[j]);
            }
            for (int m0 = 0; m0 < M; m0 += 64) {  // Q in pieces of 64 blocks
                int len = M - m0 < 64 ? M - m0 : 64;
                // e^{λ (m0 + i) PB} = e^{λ m0 PB} e^{λ i PB}; m0 PB = the first lag of the piece
                double r0 = exp(creal(lam) * m0 * PB), a0 = cimag(lam) * ((double)m0 * PB);
                double q0r = r0 * cos(a0), q0i = r0 * sin(a0);
                mode_powers(qre, qim, lam, PB, len);
                for (int i = 0; i < len; i++) {
                    Qre[(size_t)(m0 + i) * N + n] = q0r * qre[i] - q0i * qim[i];
                    Qim[(size_t)(m0 + i) * N + n] = q0r * qim[i] + q0i * qre[i];
                }
            }
            for (int h = 0; h < H; h++) {
                size_t hn = (size_t)h * N + n;
                double complex c = CMPLX(Cre[hn], Cim[hn]) * Az;
                Tre[hn] = creal(c), Tim[hn] = cimag(c);
            }
        }
        for (size_t hm = 0; hm < HM; hm++) {
            size_t h = hm / M, m = hm % M;
            const double *tr = Tre + h * N, *ti = Tim + h * N;
            const double *qr = Qre + m * N, *qi = Qim + m * N;
            float *a = A + hm * N2;
            for (int n = 0; n < N; n++) {
                a[n] = ftz(tr[n] * qr[n] - ti[n] * qi[n]);
                a[N + n] = ftz(-(tr[n] * qi[n] + ti[n] * qr[n]));
            }
        }
    }
    fcpu_sgemm(CblasNoTrans, CblasNoTrans, (int)HM, PB, N2, 1.0f, A, N2, P, PB,
                0.0f, k.pad ? Kpad : K, PB);
    if (k.pad)
        for (int h = 0; h < H; h++)
            memcpy(K + (size_t)h * T, Kpad + (size_t)h * M * PB, (size_t)T * sizeof *K);
}

// --- dss kernel backward ---------------------------------------------------------------------
// G_hn = Σ_l dK[h,l] e^{λ_n l} = Σ_m Q_mn S_hmn,  S_hmn = Σ_j dK[h, mPB+j] P_nj;
// G'_hn = Σ_l dK l e^{λ l} = Σ_m Q_mn (mPB·S_hmn + S'_hmn),  S' = Σ_j dK j P_nj.
// One dgemm: S (H·M × 4N) = dKv (H·M × PB) · [Re P; Im P; j Re P; j Im P]ᵀ, all in
// double (dK converted exactly, P never rounded), then the sums over m in double.
// Why double: dΛ sums T·H terms with cancellation, and float sums of length PB (the
// sgemm version of this, 2.1× faster) left errors of 2e-7…7e-7 on dΛ — as large as
// the naive float loop's, and with it a heavy-tailed fast/naive ratio; in double the
// result is within ~1 float rounding of ref's (the dgemm runs at ~44 GFLOP/s per core
// against sgemm's ~91, and this kernel runs once per step, not per sequence).
// ws: P (4N × PB d) | S (H·M × 4N d) | dKv (H·M × PB d) | Q (2·M·N d)
size_t fcpu_dss_kernel_bwd_ws(int H, int N, int T) {
    if (H <= 0 || N <= 0 || T <= 0) return 0;
    dss_blocks k = dss_blocking(T, FCPU_DSS_BLOCK_BWD);
    size_t HM = (size_t)H * k.M;
    return b64((size_t)4 * N * k.PB * sizeof(double)) + b64(HM * 4 * N * sizeof(double)) +
           b64(HM * k.PB * sizeof(double)) + b64((size_t)2 * k.M * N * sizeof(double));
}

void fcpu_dss_kernel_bwd(float *dLre, float *dLim, float *dCre, float *dCim, const float *dK,
                         const float *Lre, const float *Lim, const float *Cre, const float *Cim,
                         int H, int N, int T, void *ws) {
    if (H <= 0 || N <= 0 || T <= 0) return;
    if (!(dLre || dLim || dCre || dCim)) return;
    const dss_blocks k = dss_blocking(T, FCPU_DSS_BLOCK_BWD);
    const int PB = k.PB, M = k.M, N4 = 4 * N;
    const size_t HM = (size_t)H * M;
    const int need_jP = dLre || dLim;  // S' only feeds dΛ
    const int ncol = need_jP ? N4 : 2 * N;
    char *w = ws;
    double *P = (double *)w;
    w += b64((size_t)N4 * PB * sizeof(double));
    double *S = (double *)w;
    w += b64(HM * N4 * sizeof(double));
    double *dKv = (double *)w;
    w += b64(HM * PB * sizeof(double));
    double *Qre = (double *)w, *Qim = Qre + (size_t)M * N;

    {  // set-up: P and Q per mode, dK in double
        double qre[64], qim[64];
        for (int n = 0; n < N; n++) {
            double complex lam = mode_lambda(Lre[n], Lim[n]);
            double *p0 = P + (size_t)n * PB, *p1 = P + (size_t)(N + n) * PB;
            mode_powers(p0, p1, lam, 1, PB);
            if (need_jP) {
                double *p2 = P + (size_t)(2 * N + n) * PB, *p3 = P + (size_t)(3 * N + n) * PB;
                for (int j = 0; j < PB; j++) p2[j] = j * p0[j], p3[j] = j * p1[j];
            }
            for (int m0 = 0; m0 < M; m0 += 64) {
                int len = M - m0 < 64 ? M - m0 : 64;
                double r0 = exp(creal(lam) * m0 * PB), a0 = cimag(lam) * ((double)m0 * PB);
                double q0r = r0 * cos(a0), q0i = r0 * sin(a0);
                mode_powers(qre, qim, lam, PB, len);
                for (int i = 0; i < len; i++) {
                    Qre[(size_t)(m0 + i) * N + n] = q0r * qre[i] - q0i * qim[i];
                    Qim[(size_t)(m0 + i) * N + n] = q0r * qim[i] + q0i * qre[i];
                }
            }
        }
        for (int h = 0; h < H; h++) {  // dKv row block of h: dK[h, :] in double, zero-padded
            double *o = dKv + (size_t)h * M * PB;
            const float *in = dK + (size_t)h * T;
            for (int l = 0; l < T; l++) o[l] = in[l];
            for (int l = T; l < M * PB; l++) o[l] = 0.0;
        }
    }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)HM, ncol, PB, 1.0, dKv, PB, P, PB,
                0.0, S, N4);

    for (int n = 0; n < N; n++) {
        double complex lam = mode_lambda(Lre[n], Lim[n]);
        double complex Az = mode_zoh(lam), Ap = need_jP ? mode_zoh_deriv(lam) : 0;
        double complex glam = 0;
        for (int h = 0; h < H; h++) {
            double complex G = 0, Gp = 0;
            for (int m = 0; m < M; m++) {
                const double *sr = S + ((size_t)h * M + m) * N4;
                double complex q = CMPLX(Qre[(size_t)m * N + n], Qim[(size_t)m * N + n]);
                double complex sm = CMPLX(sr[n], sr[N + n]);
                G += q * sm;
                if (need_jP) Gp += q * ((double)m * PB * sm + CMPLX(sr[2 * N + n], sr[3 * N + n]));
            }
            size_t hn = (size_t)h * N + n;
            double complex gC = Az * G;
            if (dCre) dCre[hn] += (float)creal(gC);
            if (dCim) dCim[hn] -= (float)cimag(gC);
            if (need_jP) glam += CMPLX(Cre[hn], Cim[hn]) * (Ap * G + Az * Gp);
        }
        if (dLre) dLre[n] += (float)(creal(glam) * -exp((double)Lre[n]));
        if (dLim) dLim[n] += (float)(-cimag(glam) * exp((double)Lim[n]));
    }
}

// --- ssm conv: plan ----------------------------------------------------------------------------

struct fcpu_ssm_plan {
    int B, T, H;
    int method;    // FCPU_SSM_FFT or FCPU_SSM_DIRECT
    int nt;        // OpenMP threads the calls use
    int n;         // FFT length (FFT method)
    size_t rs;     // floats per padded row: ≥ n + 2 (in-place r2c), a multiple of 16
    int hb_f;      // channels per forward work unit (unit = one b, hb_f channels)
    int hb_b;      // channels per backward work unit (unit = hb_b channels, all b)
    fftwf_plan r2c, c2r;
};

// The FFT length: the smallest n ≥ x of the forms 2^a, 3·2^a, 5·2^a (a ≥ 1, so n is
// even — FFTW's fast real transforms). Higher powers of 3 and 5 and factors of 7 are
// left out: planned with FFTW_ESTIMATE they ran up to 2× slower per n·log2 n here
// (540 = 2²·3³·5: 0.47 ns, 640 = 2⁷·5: 0.24 ns, 1024: 0.23 ns per n·log2 n and pair).
static int fft_len(int x) {
    long best = 0;
    const int base[3] = {1, 3, 5};
    for (int i = 0; i < 3; i++) {
        long m = 2L * base[i];
        while (m < x) m *= 2;
        if (!best || m < best) best = m;
    }
    return (int)best;
}

fcpu_ssm_plan *fcpu_ssm_plan_new_ex(int B, int T, int H, int method, int fftw_measure) {
    if (B <= 0 || T <= 0 || H <= 0 || T > (1 << 28)) {
        phax_fail("fcpu_ssm_plan_new: bad shape B=%d T=%d H=%d", B, T, H);
        return NULL;
    }
    if (method != FCPU_SSM_AUTO && method != FCPU_SSM_FFT && method != FCPU_SSM_DIRECT) {
        phax_fail("fcpu_ssm_plan_new: unknown method %d", method);
        return NULL;
    }
    fcpu_ssm_plan *p = calloc(1, sizeof *p);
    if (!p) {
        phax_fail("fcpu_ssm_plan_new: out of memory");
        return NULL;
    }
    p->B = B, p->T = T, p->H = H;
    p->nt = omp_get_max_threads();
    if (p->nt < 1) p->nt = 1;
    if (method == FCPU_SSM_AUTO) method = T <= FCPU_SSM_DIRECT_MAX_T ? FCPU_SSM_DIRECT : FCPU_SSM_FFT;
    p->method = method;
    if (method == FCPU_SSM_DIRECT) return p;

    p->n = fft_len(2 * T - 1);
    p->rs = round_up((size_t)p->n + 2, 16);
    // Work units: enough of them to keep every thread busy (≥ 2 per thread when
    // the shape allows), each as wide as a cache line of channels otherwise. The
    // result of a channel does not depend on the unit it lands in.
    // (Narrower units, sized to keep a unit's rows in L2 at large n, measured slower: the
    // strided gather then reads each cache line of u several times.)
    int hb = 16;
    while (hb > 1 && B * ((H + hb - 1) / hb) < 2 * p->nt) hb /= 2;
    p->hb_f = hb;
    hb = 16;
    while (hb > 1 && (H + hb - 1) / hb < 2 * p->nt) hb /= 2;
    p->hb_b = hb;

    float *buf = fftwf_malloc(p->rs * sizeof(float));
    if (!buf) {
        free(p);
        phax_fail("fcpu_ssm_plan_new: out of memory");
        return NULL;
    }
    unsigned flags = (fftw_measure ? FFTW_MEASURE : FFTW_ESTIMATE);
#pragma omp critical(phax_fftw_planner)
    {
        // In place: the row holds n reals in, n/2 + 1 complex out.
        p->r2c = fftwf_plan_dft_r2c_1d(p->n, buf, (fftwf_complex *)buf, flags);
        p->c2r = fftwf_plan_dft_c2r_1d(p->n, (fftwf_complex *)buf, buf, flags);
    }
    fftwf_free(buf);
    if (!p->r2c || !p->c2r) {
        int n = p->n;
        fcpu_ssm_plan_free(p);
        phax_fail("fcpu_ssm_plan_new: FFTW planning failed (n = %d)", n);
        return NULL;
    }
    return p;
}

fcpu_ssm_plan *fcpu_ssm_plan_new(int B, int T, int H) {
    return fcpu_ssm_plan_new_ex(B, T, H, FCPU_SSM_AUTO, 0);
}

void fcpu_ssm_plan_free(fcpu_ssm_plan *p) {
    if (!p) return;
#pragma omp critical(phax_fftw_planner)
    {
        if (p->r2c) fftwf_destroy_plan(p->r2c);
        if (p->c2r) fftwf_destroy_plan(p->c2r);
    }
    free(p);
}

int fcpu_ssm_plan_method(const fcpu_ssm_plan *p) { return p->method; }
int fcpu_ssm_plan_fft_len(const fcpu_ssm_plan *p) { return p->method == FCPU_SSM_FFT ? p->n : 0; }

// Workspace layouts (floats, every piece 64-byte aligned):
//   FFT fwd:    K̂ (H rows of rs) | nt × hb_f rows of rs
//   FFT bwd:    K̂ (H rows of rs) | nt × 3·hb_b rows of rs (dy, u, dK̂ accumulators)
//   direct fwd: Kᵀ (T × H)
//   direct bwd: Kᵀ (T × H) | dKᵀ (T × H) | nt rows of H (du accumulators)
static size_t fl64(size_t nfloats) { return round_up(nfloats * sizeof(float), 64); }

size_t fcpu_ssm_conv_fwd_ws(const fcpu_ssm_plan *p) {
    if (p->method == FCPU_SSM_DIRECT) return fl64((size_t)p->T * p->H);
    return fl64((size_t)p->H * p->rs) + fl64((size_t)p->nt * p->hb_f * p->rs);
}

size_t fcpu_ssm_conv_bwd_ws(const fcpu_ssm_plan *p) {
    if (p->method == FCPU_SSM_DIRECT)
        return 2 * fl64((size_t)p->T * p->H) + (size_t)p->nt * fl64((size_t)p->H);
    return fl64((size_t)p->H * p->rs) + fl64((size_t)p->nt * 3 * p->hb_b * p->rs);
}

// --- ssm conv: FFT ------------------------------------------------------------------------------

// x[f] *= k[f] (conj: x[f] *= conj(k[f])), f < nc, interleaved complex.
static void cmul(float *restrict x, const float *restrict k, int nc, int conj) {
    float s = conj ? -1.0f : 1.0f;
    for (int f = 0; f < nc; f++) {
        float xr = x[2 * f], xi = x[2 * f + 1], kr = k[2 * f], ki = s * k[2 * f + 1];
        x[2 * f] = xr * kr - xi * ki;
        x[2 * f + 1] = xr * ki + xi * kr;
    }
}

// acc[f] (=|+=) conj(a[f]) · b[f].
static void cmul_conj_acc(float *restrict acc, const float *restrict a, const float *restrict b,
                          int nc, int first) {
    for (int f = 0; f < nc; f++) {
        float ar = a[2 * f], ai = a[2 * f + 1], br = b[2 * f], bi = b[2 * f + 1];
        float re = ar * br + ai * bi, im = ar * bi - ai * br;
        if (first) {
            acc[2 * f] = re;
            acc[2 * f + 1] = im;
        } else {
            acc[2 * f] += re;
            acc[2 * f + 1] += im;
        }
    }
}

// K̂_h = FFT(K[h, :] zero-padded to n) / n, for all h (scale folded in once).
static void fft_kernels(const fcpu_ssm_plan *p, float *Kh, const float *K) {
    const int T = p->T, n = p->n, nc = n / 2 + 1;
    const float scale = 1.0f / (float)n;
#pragma omp parallel for schedule(static) num_threads(p->nt)
    for (int h = 0; h < p->H; h++) {
        float *r = Kh + (size_t)h * p->rs;
        memcpy(r, K + (size_t)h * T, (size_t)T * sizeof *r);
        memset(r + T, 0, (size_t)(p->rs - T) * sizeof *r);
        fftwf_execute_dft_r2c(p->r2c, r, (fftwf_complex *)r);
        for (int f = 0; f < 2 * nc; f++) r[f] *= scale;
    }
}

// rows[k][t] = x[b, t, h0 + k] for k < w, t < T; zero to n.
static void gather(float *rows, size_t rs, const float *x, int b, int T, int H, int h0, int w,
                   int n) {
    for (int t = 0; t < T; t++) {
        const float *xr = x + ((size_t)b * T + t) * H + h0;
        for (int k = 0; k < w; k++) rows[k * rs + t] = xr[k];
    }
    for (int k = 0; k < w; k++) memset(rows + k * rs + T, 0, (size_t)(n - T) * sizeof *rows);
}

static void conv_fwd_fft(const fcpu_ssm_plan *p, float *y, const float *u, const float *K,
                         const float *D, void *ws) {
    const int B = p->B, T = p->T, H = p->H, n = p->n, nc = n / 2 + 1, hb = p->hb_f;
    const size_t rs = p->rs;
    float *Kh = ws;
    float *bufs = (float *)((char *)ws + fl64((size_t)H * rs));
    fft_kernels(p, Kh, K);
    const int nblk = (H + hb - 1) / hb;
#pragma omp parallel for schedule(static) num_threads(p->nt)
    for (int unit = 0; unit < B * nblk; unit++) {
        int b = unit / nblk, h0 = (unit % nblk) * hb, w = H - h0 < hb ? H - h0 : hb;
        float *rows = bufs + (size_t)omp_get_thread_num() * hb * rs;
        gather(rows, rs, u, b, T, H, h0, w, n);
        for (int k = 0; k < w; k++) {
            float *r = rows + k * rs;
            fftwf_execute_dft_r2c(p->r2c, r, (fftwf_complex *)r);
            cmul(r, Kh + (size_t)(h0 + k) * rs, nc, 0);
            fftwf_execute_dft_c2r(p->c2r, (fftwf_complex *)r, r);
        }
        for (int t = 0; t < T; t++) {
            size_t i = ((size_t)b * T + t) * H + h0;
            for (int k = 0; k < w; k++) y[i + k] = rows[k * rs + t] + D[h0 + k] * u[i + k];
        }
    }
}

static void conv_bwd_fft(const fcpu_ssm_plan *p, float *du, float *dK, float *dD, const float *dy,
                         const float *u, const float *K, const float *D, void *ws) {
    const int B = p->B, T = p->T, H = p->H, n = p->n, nc = n / 2 + 1, hb = p->hb_b;
    const size_t rs = p->rs;
    float *Kh = ws;
    float *bufs = (float *)((char *)ws + fl64((size_t)H * rs));
    if (du) fft_kernels(p, Kh, K);
    const int nblk = (H + hb - 1) / hb;
    const float scale = 1.0f / (float)n;
#pragma omp parallel for schedule(static) num_threads(p->nt)
    for (int blk = 0; blk < nblk; blk++) {
        int h0 = blk * hb, w = H - h0 < hb ? H - h0 : hb;
        float *gy = bufs + (size_t)omp_get_thread_num() * 3 * hb * rs;  // dy rows
        float *gu = gy + (size_t)hb * rs;                                // u rows
        float *acc = gu + (size_t)hb * rs;  // Σ_b conj(Û) DŶ, then dK rows
        double dsum[16] = {0};
        for (int b = 0; b < B; b++) {
            if (dD)
                for (int t = 0; t < T; t++) {
                    size_t i = ((size_t)b * T + t) * H + h0;
                    for (int k = 0; k < w; k++) dsum[k] += (double)dy[i + k] * u[i + k];
                }
            if (!du && !dK) continue;
            gather(gy, rs, dy, b, T, H, h0, w, n);
            if (dK) gather(gu, rs, u, b, T, H, h0, w, n);
            for (int k = 0; k < w; k++) {
                float *r = gy + k * rs;
                fftwf_execute_dft_r2c(p->r2c, r, (fftwf_complex *)r);
                if (dK) {
                    float *ru = gu + k * rs;
                    fftwf_execute_dft_r2c(p->r2c, ru, (fftwf_complex *)ru);
                    cmul_conj_acc(acc + k * rs, ru, r, nc, b == 0);
                }
                if (du) {
                    cmul(r, Kh + (size_t)(h0 + k) * rs, nc, 1);
                    fftwf_execute_dft_c2r(p->c2r, (fftwf_complex *)r, r);
                }
            }
            if (du)
                for (int t = 0; t < T; t++) {
                    size_t i = ((size_t)b * T + t) * H + h0;
                    for (int k = 0; k < w; k++) du[i + k] += gy[k * rs + t] + D[h0 + k] * dy[i + k];
                }
        }
        if (dK)
            for (int k = 0; k < w; k++) {
                float *r = acc + k * rs;
                fftwf_execute_dft_c2r(p->c2r, (fftwf_complex *)r, r);
                float *o = dK + (size_t)(h0 + k) * T;
                for (int l = 0; l < T; l++) o[l] += r[l] * scale;
            }
        if (dD)
            for (int k = 0; k < w; k++) dD[h0 + k] += (float)dsum[k];
    }
}

// --- ssm conv: direct ---------------------------------------------------------------------------

// Kt[l][h] = K[h][l].
static void transpose_k(float *restrict Kt, const float *restrict K, int T, int H) {
    for (int h = 0; h < H; h++)
        for (int l = 0; l < T; l++) Kt[(size_t)l * H + h] = K[(size_t)h * T + l];
}

static void conv_fwd_direct(const fcpu_ssm_plan *p, float *restrict y, const float *restrict u,
                            const float *K, const float *D, void *ws) {
    const int B = p->B, T = p->T, H = p->H;
    float *restrict Kt = ws;
    transpose_k(Kt, K, T, H);
    // Rows (b, t) are independent; later rows cost more, so deal them out round-robin.
#pragma omp parallel for schedule(static, 1) num_threads(p->nt)
    for (int bt = 0; bt < B * T; bt++) {
        int b = bt / T, t = bt % T;
        float *restrict yr = y + (size_t)bt * H;
        const float *ub = u + (size_t)b * T * H;
        for (int h = 0; h < H; h++) yr[h] = 0.0f;
        for (int j = 0; j <= t; j++) {
            const float *kr = Kt + (size_t)(t - j) * H, *ur = ub + (size_t)j * H;
            for (int h = 0; h < H; h++) yr[h] += kr[h] * ur[h];
        }
        const float *ut = ub + (size_t)t * H;
        for (int h = 0; h < H; h++) yr[h] += D[h] * ut[h];
    }
}

static void conv_bwd_direct(const fcpu_ssm_plan *p, float *du, float *dK, float *dD,
                            const float *dy, const float *u, const float *K, const float *D,
                            void *ws) {
    const int B = p->B, T = p->T, H = p->H;
    float *restrict Kt = ws;
    float *restrict dKt = (float *)((char *)ws + fl64((size_t)T * H));
    float *accs = (float *)((char *)dKt + fl64((size_t)T * H));
    if (du) transpose_k(Kt, K, T, H);
#pragma omp parallel num_threads(p->nt)
    {
        float *restrict acc = accs + (size_t)omp_get_thread_num() * (fl64(H) / sizeof(float));
        if (du) {
#pragma omp for schedule(static, 1)
            for (int bs = 0; bs < B * T; bs++) {  // du[b, s, :] = Σ_{t≥s} K[:, t−s] dy[b, t, :]
                int b = bs / T, s = bs % T;
                const float *gb = dy + (size_t)b * T * H;
                for (int h = 0; h < H; h++) acc[h] = 0.0f;
                for (int t = s; t < T; t++) {
                    const float *kr = Kt + (size_t)(t - s) * H, *gr = gb + (size_t)t * H;
                    for (int h = 0; h < H; h++) acc[h] += kr[h] * gr[h];
                }
                float *o = du + (size_t)bs * H;
                const float *gs = gb + (size_t)s * H;
                for (int h = 0; h < H; h++) o[h] += acc[h] + D[h] * gs[h];
            }
        }
        if (dK) {
#pragma omp for schedule(static, 1)
            for (int l = 0; l < T; l++) {  // dK[:, l] = Σ_b Σ_{t≥l} dy[b, t, :] u[b, t−l, :]
                float *restrict o = dKt + (size_t)l * H;
                for (int h = 0; h < H; h++) o[h] = 0.0f;
                for (int b = 0; b < B; b++)
                    for (int t = l; t < T; t++) {
                        const float *gr = dy + ((size_t)b * T + t) * H;
                        const float *ur = u + ((size_t)b * T + t - l) * H;
                        for (int h = 0; h < H; h++) o[h] += gr[h] * ur[h];
                    }
            }
#pragma omp for schedule(static)
            for (int h = 0; h < H; h++)
                for (int l = 0; l < T; l++) dK[(size_t)h * T + l] += dKt[(size_t)l * H + h];
        }
        if (dD) {
#pragma omp for schedule(static)
            for (int h = 0; h < H; h++) {
                double s = 0;
                for (size_t i = h; i < (size_t)B * T * H; i += H) s += (double)dy[i] * u[i];
                dD[h] += (float)s;
            }
        }
    }
}

// --- ssm conv: entry points -----------------------------------------------------------------------

static int check(const fcpu_ssm_plan *p, int B, int T, int H, const void *ws, const char *who) {
    if (!p) return phax_fail("%s: no plan", who);
    if (B != p->B || T != p->T || H != p->H)
        return phax_fail("%s: shape B=%d T=%d H=%d but the plan is for B=%d T=%d H=%d", who, B, T,
                         H, p->B, p->T, p->H);
    if ((uintptr_t)ws % 64 != 0) return phax_fail("%s: workspace not 64-byte aligned", who);
    return PHAX_OK;
}

static void add_nan(float *x, size_t n) {
    if (x)
        for (size_t i = 0; i < n; i++) x[i] += NAN;
}

int fcpu_ssm_conv_fwd(float *y, const float *u, const float *K, const float *D, int B, int T,
                      int H, const fcpu_ssm_plan *plan, void *ws) {
    if (check(plan, B, T, H, ws, "fcpu_ssm_conv_fwd") != PHAX_OK) {
        if (B > 0 && T > 0 && H > 0)
            for (size_t i = 0; i < (size_t)B * T * H; i++) y[i] = NAN;
        return PHAX_ERR;
    }
    if (plan->method == FCPU_SSM_DIRECT)
        conv_fwd_direct(plan, y, u, K, D, ws);
    else
        conv_fwd_fft(plan, y, u, K, D, ws);
    return PHAX_OK;
}

int fcpu_ssm_conv_bwd(float *du, float *dK, float *dD, const float *dy, const float *u,
                      const float *K, const float *D, int B, int T, int H,
                      const fcpu_ssm_plan *plan, void *ws) {
    if (check(plan, B, T, H, ws, "fcpu_ssm_conv_bwd") != PHAX_OK) {
        if (B > 0 && T > 0 && H > 0) {
            add_nan(du, (size_t)B * T * H);
            add_nan(dK, (size_t)H * T);
            add_nan(dD, (size_t)H);
        }
        return PHAX_ERR;
    }
    if (!(du || dK || dD)) return PHAX_OK;
    if (plan->method == FCPU_SSM_DIRECT)
        conv_bwd_direct(plan, du, dK, dD, dy, u, K, D, ws);
    else
        conv_bwd_fft(plan, du, dK, dD, dy, u, K, D, ws);
    return PHAX_OK;
}
