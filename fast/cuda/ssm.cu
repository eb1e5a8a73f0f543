// fast/cuda GSS state-space layer, float32 storage (phax/fcuda.h; semantics: ref/ssm.c;
// contract: phax/fcpu_ssm.h): the DSS kernel K = dss(Λ, C) and the causal convolution
// y = K ∗ u + D u, by cuFFT or, for short T, directly (the second half of the file).
//
// Complex numbers as pairs of doubles (no C99 complex under nvcc); ref's conventions: a
// backward carries ḡ_w with δL = Re(ḡ_w δw), so for w = x + i y, dL/dx = Re ḡ_w and
// dL/dy = −Im ḡ_w. Everything is in double, as fast/cpu's set-up and backward are:
//   E[l, n] = e^{λ_n l}: exp, cos, sin of the double arguments l·Re λ, l·Im λ (never a
//     float angle, never repeated multiplication), a thread per (l, n), in the workspace;
//   forward: K[h, l] = Re Σ_n C̃_hn E[l, n], C̃ = C·A(λ), a thread per (h, l), n in order;
//   backward: G_hn = Σ_l dK[h, l] E[l, n] and G'_hn = Σ_l dK l E[l, n], a thread per (h, n)
//     summing l in order; dC from A G, dΛ from Σ_h C (A' G + A G') (one thread per n, h in
//     order). The same bits whatever the device. O(H·N·T) work in double: a direct form,
//     not yet fast/cpu's blocked GEMM.
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"
#include "phax/numerics.h"
#ifdef PHAX_CUDA_EMU
#include "emu/cufft.h"
#else
#include <cufft.h>
#endif

#define SSM_THREADS 256u

struct cd {
    double re, im;
};
__device__ __forceinline__ cd cmul(cd a, cd b) { return cd{a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re}; }
__device__ __forceinline__ cd cadd(cd a, cd b) { return cd{a.re + b.re, a.im + b.im}; }
__device__ __forceinline__ cd cdiv(cd a, cd b) {  // as C99's a/b for these (finite, nonzero) b
    double s = b.re * b.re + b.im * b.im;
    return cd{(a.re * b.re + a.im * b.im) / s, (a.im * b.re - a.re * b.im) / s};
}

__device__ __forceinline__ cd mode_lambda(float lre, float lim) { return cd{-exp((double)lre), exp((double)lim)}; }

// A(λ) = (e^λ − 1)/λ without cancellation (phax/numerics.h).
__device__ __forceinline__ cd mode_zoh(cd lam) {
    cd a;
    phax_zoh(lam.re, lam.im, &a.re, &a.im);
    return a;
}

// A'(λ) = (e^λ − A)/λ; Taylor series Σ (j+1) λ^j/(j+2)! below |λ| = 0.5 (as fast/cpu).
static __device__ cd mode_zoh_deriv(cd lam) {
    if (hypot(lam.re, lam.im) < 0.5) {
        cd s{0, 0}, p{1, 0};
        double f = 2.0;
        for (int j = 0; j < 18; j++) {
            double c = (j + 1) / f;
            s = cadd(s, cd{c * p.re, c * p.im});
            p = cmul(p, lam);
            f *= j + 3;
        }
        return s;
    }
    double r = exp(lam.re);
    cd e{r * cos(lam.im), r * sin(lam.im)}, a = mode_zoh(lam);
    return cdiv(cd{e.re - a.re, e.im - a.im}, lam);
}

// E[l·N + n] = e^{λ_n l}.
static __global__ void dss_powers_k(cd *__restrict__ E, const float *__restrict__ Lre, const float *__restrict__ Lim,
                                    int N, int T) {
    size_t total = (size_t)T * N;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < total; k += (size_t)gridDim.x * blockDim.x) {
        size_t l = k / N;
        int n = (int)(k % N);
        cd lam = mode_lambda(Lre[n], Lim[n]);
        double r = exp((double)l * lam.re), w = (double)l * lam.im;
        E[k] = cd{r * cos(w), r * sin(w)};
    }
}

// C̃[h·N + n] = (Cre + i Cim)·A(λ_n).
static __global__ void dss_ctilde_k(cd *__restrict__ Ct, const float *__restrict__ Lre, const float *__restrict__ Lim,
                                    const float *__restrict__ Cre, const float *__restrict__ Cim, int H, int N) {
    size_t total = (size_t)H * N;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < total; k += (size_t)gridDim.x * blockDim.x) {
        int n = (int)(k % N);
        Ct[k] = cmul(cd{Cre[k], Cim[k]}, mode_zoh(mode_lambda(Lre[n], Lim[n])));
    }
}

static __global__ void dss_fwd_k(float *__restrict__ K, const cd *__restrict__ E, const cd *__restrict__ Ct, int H,
                                 int N, int T) {
    size_t total = (size_t)H * T;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < total; k += (size_t)gridDim.x * blockDim.x) {
        size_t h = k / T, l = k % T;
        const cd *e = E + l * N, *c = Ct + h * N;
        double s = 0;
        for (int n = 0; n < N; n++) s += c[n].re * e[n].re - c[n].im * e[n].im;
        K[k] = (float)s;
    }
}

// Per (h, n): G, G' over the lags; dC += from A G; gl[h·N + n] = C (A' G + A G') for dΛ.
static __global__ void dss_bwd_hn_k(float *__restrict__ dCre, float *__restrict__ dCim, cd *__restrict__ gl,
                                    const float *__restrict__ dK, const cd *__restrict__ E,
                                    const float *__restrict__ Lre, const float *__restrict__ Lim,
                                    const float *__restrict__ Cre, const float *__restrict__ Cim, int H, int N, int T,
                                    int need_lam) {
    size_t total = (size_t)H * N;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < total; k += (size_t)gridDim.x * blockDim.x) {
        size_t h = k / N;
        int n = (int)(k % N);
        const float *dk = dK + h * T;
        cd G{0, 0}, Gp{0, 0};
        for (int l = 0; l < T; l++) {
            cd e = E[(size_t)l * N + n];
            double g = dk[l];
            G.re += g * e.re, G.im += g * e.im;
            if (need_lam) Gp.re += g * l * e.re, Gp.im += g * l * e.im;
        }
        cd lam = mode_lambda(Lre[n], Lim[n]), Az = mode_zoh(lam), gC = cmul(Az, G);
        if (dCre) dCre[k] = (float)((double)dCre[k] + gC.re);
        if (dCim) dCim[k] = (float)((double)dCim[k] - gC.im);
        if (need_lam) gl[k] = cmul(cd{Cre[k], Cim[k]}, cadd(cmul(mode_zoh_deriv(lam), G), cmul(Az, Gp)));
    }
}

static __global__ void dss_bwd_lam_k(float *__restrict__ dLre, float *__restrict__ dLim, const cd *__restrict__ gl,
                                     const float *__restrict__ Lre, const float *__restrict__ Lim, int H, int N) {
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    cd g{0, 0};
    for (int h = 0; h < H; h++) g = cadd(g, gl[(size_t)h * N + n]);
    if (dLre) dLre[n] = (float)((double)dLre[n] + g.re * -exp((double)Lre[n]));
    if (dLim) dLim[n] = (float)((double)dLim[n] + -g.im * exp((double)Lim[n]));
}

extern "C" size_t fcuda_dss_kernel_fwd_ws(int H, int N, int T) {
    if (H <= 0 || N <= 0 || T <= 0) return 0;
    return fcuda_align16((size_t)T * N * sizeof(cd)) + fcuda_align16((size_t)H * N * sizeof(cd));
}

static int dss_args(const char *op, int H, int N, int T, void *ws) {
    if (H < 0 || N < 0 || T < 0) return phax_fail("cuda %s: H %d, N %d, T %d: none may be negative", op, H, N, T);
    if (H > 0 && N > 0 && T > 0 && !ws) return phax_fail("cuda %s: no workspace", op);
    return PHAX_OK;
}

extern "C" int fcuda_dss_kernel_fwd(float *K, const float *Lre, const float *Lim, const float *Cre, const float *Cim,
                                     int H, int N, int T, void *ws, void *stream) {
    if (dss_args("dss_kernel_fwd", H, N, T, ws)) return PHAX_ERR;
    if (H == 0 || T == 0) return PHAX_OK;
    cudaStream_t s = fcuda_stream(stream);
    if (N == 0) return fcuda_ok(cudaMemsetAsync(K, 0, (size_t)H * T * sizeof(float), s), "dss_kernel_fwd");
    cd *E = static_cast<cd *>(ws);
    cd *Ct = reinterpret_cast<cd *>(static_cast<char *>(ws) + fcuda_align16((size_t)T * N * sizeof(cd)));
    size_t ne = (size_t)T * N, nc = (size_t)H * N, nk = (size_t)H * T;
    PHAX_LAUNCH(dss_powers_k, fcuda_ew_blocks(ne, SSM_THREADS), SSM_THREADS, 0, s, E, Lre, Lim, N, T);
    if (fcuda_check("dss_kernel_fwd")) return PHAX_ERR;
    PHAX_LAUNCH(dss_ctilde_k, fcuda_ew_blocks(nc, SSM_THREADS), SSM_THREADS, 0, s, Ct, Lre, Lim, Cre, Cim, H, N);
    if (fcuda_check("dss_kernel_fwd")) return PHAX_ERR;
    PHAX_LAUNCH(dss_fwd_k, fcuda_ew_blocks(nk, SSM_THREADS), SSM_THREADS, 0, s, K, (const cd *)E, (const cd *)Ct, H, N,
                T);
    return fcuda_check("dss_kernel_fwd");
}

extern "C" size_t fcuda_dss_kernel_bwd_ws(int H, int N, int T) { return fcuda_dss_kernel_fwd_ws(H, N, T); }

extern "C" int fcuda_dss_kernel_bwd(float *dLre, float *dLim, float *dCre, float *dCim, const float *dK,
                                     const float *Lre, const float *Lim, const float *Cre, const float *Cim, int H,
                                     int N, int T, void *ws, void *stream) {
    if (dss_args("dss_kernel_bwd", H, N, T, ws)) return PHAX_ERR;
    if (H == 0 || N == 0 || T == 0 || !(dLre || dLim || dCre || dCim)) return PHAX_OK;
    cudaStream_t s = fcuda_stream(stream);
    int need_lam = dLre || dLim;
    cd *E = static_cast<cd *>(ws);
    cd *gl = reinterpret_cast<cd *>(static_cast<char *>(ws) + fcuda_align16((size_t)T * N * sizeof(cd)));
    size_t ne = (size_t)T * N, nc = (size_t)H * N;
    PHAX_LAUNCH(dss_powers_k, fcuda_ew_blocks(ne, SSM_THREADS), SSM_THREADS, 0, s, E, Lre, Lim, N, T);
    if (fcuda_check("dss_kernel_bwd")) return PHAX_ERR;
    PHAX_LAUNCH(dss_bwd_hn_k, fcuda_ew_blocks(nc, SSM_THREADS), SSM_THREADS, 0, s, dCre, dCim, gl, dK, (const cd *)E,
                Lre, Lim, Cre, Cim, H, N, T, need_lam);
    if (fcuda_check("dss_kernel_bwd")) return PHAX_ERR;
    if (!need_lam) return PHAX_OK;
    PHAX_LAUNCH(dss_bwd_lam_k, (unsigned)((N + 255) / 256), 256u, 0, s, dLre, dLim, (const cd *)gl, Lre, Lim, H, N);
    return fcuda_check("dss_kernel_bwd");
}

// --- the convolution -----------------------------------------------------------------------------
// y[b,t,h] = Σ_{s≤t} K[h,t−s] u[b,s,h] + D[h] u[b,t,h]; u, y (B, T, H) channels last, K (H, T).
//   FFT: every (b, h) row zero-padded to n ≥ 2T − 1 (the smallest n of the form 2^a, 3·2^a or
//     5·2^a, as fast/cpu's: no circular wrap) in the workspace, batched R2C transforms
//     (cuFFT, unnormalised), spectra multiplied, one C2R, 1/n and D u on the way out. The
//     backward's correlations are products with the conjugate: du from DY·conj(K̂), dK from
//     Σ_b DY·conj(Û) (summed over b in order, in double), dD = Σ dy·u in double directly.
//   direct (T ≤ FCUDA_SSM_DIRECT_MAX_T): a thread per output summing in order in double.
// The crossover on a device is not measured yet (no GPU so far): fast/cpu's 128 is used.
#define FCUDA_SSM_DIRECT_MAX_T 128

struct fcuda_ssm_plan {
    int B, T, H, method, n;
    cufftHandle fu, iu, fk, ik;  // R2C over B·H rows, C2R over B·H, R2C over H, C2R over H
    int have[4];
};

static int ssm_fft_len(int T) {
    int need = 2 * T - 1 > 2 ? 2 * T - 1 : 2, best = 0;
    for (int m = 1; m <= 5; m += 2)
        for (long c = m; c < 2L * need + 8; c *= 2)
            if (c >= need && c % 2 == 0 && (!best || c < best)) best = (int)c;
    return best;
}

static int cufft_ok(cufftResult r, const char *op, const char *call) {
    if (r == CUFFT_SUCCESS) return PHAX_OK;
    return phax_fail("cuda %s: %s failed (cufftResult %d)", op, call, (int)r);
}

extern "C" void fcuda_ssm_plan_free(fcuda_ssm_plan *p) {
    if (!p) return;
    cufftHandle h[4] = {p->fu, p->iu, p->fk, p->ik};
    for (int i = 0; i < 4; i++)
        if (p->have[i]) cufftDestroy(h[i]);
    free(p);
}

extern "C" fcuda_ssm_plan *fcuda_ssm_plan_new(int B, int T, int H, int method) {
    if (B < 1 || T < 1 || H < 1) {
        phax_fail("cuda ssm_plan_new: B %d, T %d, H %d must be >= 1", B, T, H);
        return NULL;
    }
    if (method < FCUDA_SSM_AUTO || method > FCUDA_SSM_DIRECT) {
        phax_fail("cuda ssm_plan_new: unknown method %d", method);
        return NULL;
    }
    fcuda_ssm_plan *p = (fcuda_ssm_plan *)calloc(1, sizeof *p);
    if (!p) {
        phax_fail("cuda ssm_plan_new: out of memory");
        return NULL;
    }
    p->B = B, p->T = T, p->H = H;
    p->method = method == FCUDA_SSM_AUTO ? (T <= FCUDA_SSM_DIRECT_MAX_T ? FCUDA_SSM_DIRECT : FCUDA_SSM_FFT) : method;
    if (p->method == FCUDA_SSM_DIRECT) return p;
    p->n = ssm_fft_len(T);
    if ((size_t)B * H > 0x7fffffffu) {
        phax_fail("cuda ssm_plan_new: B·H = %zu rows: cuFFT takes at most 2147483647", (size_t)B * H);
        fcuda_ssm_plan_free(p);
        return NULL;
    }
    cufftHandle *h[4] = {&p->fu, &p->iu, &p->fk, &p->ik};
    cufftType ty[4] = {CUFFT_R2C, CUFFT_C2R, CUFFT_R2C, CUFFT_C2R};
    int batch[4] = {B * H, B * H, H, H};
    for (int i = 0; i < 4; i++) {
        if (cufft_ok(cufftPlan1d(h[i], p->n, ty[i], batch[i]), "ssm_plan_new", "cufftPlan1d")) {
            fcuda_ssm_plan_free(p);
            return NULL;
        }
        p->have[i] = 1;
    }
    return p;
}

extern "C" int fcuda_ssm_plan_method(const fcuda_ssm_plan *p) { return p->method; }
extern "C" int fcuda_ssm_plan_fft_len(const fcuda_ssm_plan *p) { return p->method == FCUDA_SSM_FFT ? p->n : 0; }

// Workspace: real rows R (n floats) and complex rows C (n/2 + 1 pairs) for u, dy, K and the
// products: forward ur, uc, kr, kc; backward also dyr, dyc, zr, zc, dkr, dkc.
typedef struct {
    size_t ur, uc, kr, kc, dyr, dyc, zr, zc, dkr, dkc, total;
} ssm_ws;

static ssm_ws ssm_layout(const fcuda_ssm_plan *p, int bwd) {
    ssm_ws w;
    memset(&w, 0, sizeof w);
    if (p->method != FCUDA_SSM_FFT) return w;
    size_t BH = (size_t)p->B * p->H, nr = (size_t)p->n * sizeof(float), nc = (size_t)(p->n / 2 + 1) * sizeof(cufftComplex);
    size_t o = 0;
    w.ur = o, o += fcuda_align16(BH * nr);
    w.uc = o, o += fcuda_align16(BH * nc);
    w.kr = o, o += fcuda_align16((size_t)p->H * nr);
    w.kc = o, o += fcuda_align16((size_t)p->H * nc);
    if (bwd) {
        w.dyr = o, o += fcuda_align16(BH * nr);
        w.dyc = o, o += fcuda_align16(BH * nc);
        w.zr = o, o += fcuda_align16(BH * nr);
        w.zc = o, o += fcuda_align16(BH * nc);
        w.dkr = o, o += fcuda_align16((size_t)p->H * nr);
        w.dkc = o, o += fcuda_align16((size_t)p->H * nc);
    }
    w.total = o;
    return w;
}

extern "C" size_t fcuda_ssm_conv_fwd_ws(const fcuda_ssm_plan *p) { return ssm_layout(p, 0).total; }
extern "C" size_t fcuda_ssm_conv_bwd_ws(const fcuda_ssm_plan *p) { return ssm_layout(p, 1).total; }

#define EW_LOOP(e, n) for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < (n); e += (size_t)gridDim.x * blockDim.x)

// x (B, T, H) → rows (B·H, n), zero past T.
static __global__ void pad_bth_k(float *r, const float *x, int B, int T, int H, int n) {
    EW_LOOP(e, (size_t)B * H * n) {
        size_t row = e / n;
        int t = (int)(e % n), b = (int)(row / H), h = (int)(row % H);
        r[e] = t < T ? x[((size_t)b * T + t) * H + h] : 0.0f;
    }
}
// K (H, T) → rows (H, n), zero past T.
static __global__ void pad_ht_k(float *r, const float *K, int H, int T, int n) {
    EW_LOOP(e, (size_t)H * n) {
        int t = (int)(e % n);
        r[e] = t < T ? K[(e / n) * T + t] : 0.0f;
    }
}
// z[row, f] = a[row, f]·(conj ? conj(k[row % H, f]) : k[row % H, f]) over rows (B·H, nc).
static __global__ void spec_mul_k(cufftComplex *z, const cufftComplex *a, const cufftComplex *k, size_t rows, int H,
                                  int nc, int conj) {
    EW_LOOP(e, rows * nc) {
        size_t row = e / nc;
        cufftComplex x = a[e], y = k[(row % H) * nc + e % nc];
        float yi = conj ? -y.y : y.y;
        z[e].x = x.x * y.x - x.y * yi, z[e].y = x.x * yi + x.y * y.x;
    }
}
// dkc[h, f] = Σ_b dyc[b·H + h, f]·conj(uc[b·H + h, f]), b in order, in double.
static __global__ void spec_dk_k(cufftComplex *dkc, const cufftComplex *dyc, const cufftComplex *uc, int B, int H,
                                 int nc) {
    EW_LOOP(e, (size_t)H * nc) {
        double re = 0, im = 0;
        for (int b = 0; b < B; b++) {
            cufftComplex x = dyc[(size_t)b * H * nc + e], y = uc[(size_t)b * H * nc + e];
            re += (double)x.x * y.x + (double)x.y * y.y, im += (double)x.y * y.x - (double)x.x * y.y;
        }
        dkc[e].x = (float)re, dkc[e].y = (float)im;
    }
}
// y[b,t,h] = zr[b·H + h, t]/n + D[h] u[b,t,h] (acc: y += that).
static __global__ void unpad_bth_k(float *y, const float *zr, const float *u, const float *D, int B, int T, int H,
                                   int n, int acc) {
    EW_LOOP(e, (size_t)B * T * H) {
        int h = (int)(e % H);
        size_t bt = e / H;
        int b = (int)(bt / T), t = (int)(bt % T);
        float v = zr[((size_t)b * H + h) * n + t] / (float)n + D[h] * u[e];
        y[e] = acc ? y[e] + v : v;
    }
}
// dK[h, l] += dkr[h, l]/n, l < T.
static __global__ void unpad_ht_add_k(float *dK, const float *dkr, int H, int T, int n) {
    EW_LOOP(e, (size_t)H * T) dK[e] += dkr[(e / T) * n + e % T] / (float)n;
}
// dD[h] += Σ_b Σ_t dy·u, in order, in double.
static __global__ void conv_dD_k(float *dD, const float *dy, const float *u, int B, int T, int H) {
    int h = blockIdx.x * blockDim.x + threadIdx.x;
    if (h >= H) return;
    double s = 0;
    for (size_t bt = 0; bt < (size_t)B * T; bt++) s += (double)dy[bt * H + h] * u[bt * H + h];
    dD[h] = (float)((double)dD[h] + s);
}
// Direct forms, in double, in order: y; du (+= Σ_{t≥s} K[t−s] dy[t] + D dy[s]); dK (+= Σ_b Σ_t dy u).
static __global__ void direct_fwd_k(float *y, const float *u, const float *K, const float *D, int B, int T, int H) {
    EW_LOOP(e, (size_t)B * T * H) {
        int h = (int)(e % H);
        size_t bt = e / H;
        int t = (int)(bt % T);
        const float *ub = u + (bt - t) * H + h;  // row b, channel h: ub[s·H]
        double s = 0;
        for (int j = 0; j <= t; j++) s += (double)K[(size_t)h * T + j] * ub[(size_t)(t - j) * H];
        y[e] = (float)(s + (double)D[h] * u[e]);
    }
}
static __global__ void direct_du_k(float *du, const float *dy, const float *K, const float *D, int B, int T, int H) {
    EW_LOOP(e, (size_t)B * T * H) {
        int h = (int)(e % H);
        size_t bt = e / H;
        int s0 = (int)(bt % T);
        const float *db = dy + (bt - s0) * H + h;
        double s = 0;
        for (int t = s0; t < T; t++) s += (double)K[(size_t)h * T + (t - s0)] * db[(size_t)t * H];
        du[e] = (float)((double)du[e] + (s + (double)D[h] * dy[e]));
    }
}
static __global__ void direct_dK_k(float *dK, const float *dy, const float *u, int B, int T, int H) {
    EW_LOOP(e, (size_t)H * T) {
        int h = (int)(e / T), l = (int)(e % T);
        double s = 0;
        for (int b = 0; b < B; b++)
            for (int t = l; t < T; t++) s += (double)dy[((size_t)b * T + t) * H + h] * u[((size_t)b * T + t - l) * H + h];
        dK[e] = (float)((double)dK[e] + s);
    }
}
// n floats of all-ones bits, a NaN: what a call off its plan leaves in its outputs.
static void ssm_poison(float *x, size_t n, cudaStream_t s) {
    if (x && n) cudaMemsetAsync(x, 0xFF, n * sizeof(float), s);
}

// The call against its plan, and the workspace's alignment (16 bytes: cuFFT's complex rows).
static int ssm_shape_ok(const fcuda_ssm_plan *p, int B, int T, int H, const void *ws, const char *op) {
    if (!p) return phax_fail("cuda %s: no plan", op);
    if ((uintptr_t)ws % 16) return phax_fail("cuda %s: workspace %p is not 16-byte aligned (plan's rows)", op, ws);
    if (B == p->B && T == p->T && H == p->H) return PHAX_OK;
    return phax_fail("cuda %s: shape (B %d, T %d, H %d) is not the plan's (B %d, T %d, H %d)", op, B, T, H, p->B, p->T,
                     p->H);
}

#define SSM_LAUNCH(k, n, ...)                                                         \
    do {                                                                              \
        PHAX_LAUNCH(k, fcuda_ew_blocks((n), SSM_THREADS), SSM_THREADS, 0, s, __VA_ARGS__); \
        if (fcuda_check(op)) return PHAX_ERR;                                         \
    } while (0)


extern "C" int fcuda_ssm_conv_fwd(float *y, const float *u, const float *K, const float *D, int B, int T, int H,
                                   const fcuda_ssm_plan *p, void *ws, void *stream) {
    const char *op = "ssm_conv_fwd";
    cudaStream_t s = fcuda_stream(stream);
    if (ssm_shape_ok(p, B, T, H, ws, op)) {
        if (B > 0 && T > 0 && H > 0) ssm_poison(y, (size_t)B * T * H, s);
        return PHAX_ERR;
    }
    size_t BTH = (size_t)B * T * H, BH = (size_t)B * H;
    if (p->method == FCUDA_SSM_DIRECT) {
        SSM_LAUNCH(direct_fwd_k, BTH, y, u, K, D, B, T, H);
        return PHAX_OK;
    }
    if (!ws) return phax_fail("cuda %s: no workspace", op);
    ssm_ws L = ssm_layout(p, 0);
    char *w = static_cast<char *>(ws);
    int n = p->n, nc = n / 2 + 1;
    float *ur = (float *)(w + L.ur), *kr = (float *)(w + L.kr);
    cufftComplex *uc = (cufftComplex *)(w + L.uc), *kc = (cufftComplex *)(w + L.kc);
    SSM_LAUNCH(pad_bth_k, BH * n, ur, u, B, T, H, n);
    SSM_LAUNCH(pad_ht_k, (size_t)H * n, kr, K, H, T, n);
    if (cufft_ok(cufftSetStream(p->fu, s), op, "cufftSetStream") || cufft_ok(cufftSetStream(p->fk, s), op, "cufftSetStream") ||
        cufft_ok(cufftSetStream(p->iu, s), op, "cufftSetStream") ||
        cufft_ok(cufftExecR2C(p->fu, ur, uc), op, "cufftExecR2C") ||
        cufft_ok(cufftExecR2C(p->fk, kr, kc), op, "cufftExecR2C"))
        return PHAX_ERR;
    SSM_LAUNCH(spec_mul_k, BH * nc, uc, (const cufftComplex *)uc, (const cufftComplex *)kc, BH, H, nc, 0);
    if (cufft_ok(cufftExecC2R(p->iu, uc, ur), op, "cufftExecC2R")) return PHAX_ERR;
    SSM_LAUNCH(unpad_bth_k, BTH, y, (const float *)ur, u, D, B, T, H, n, 0);
    return PHAX_OK;
}

extern "C" int fcuda_ssm_conv_bwd(float *du, float *dK, float *dD, const float *dy, const float *u, const float *K,
                                   const float *D, int B, int T, int H, const fcuda_ssm_plan *p, void *ws,
                                   void *stream) {
    const char *op = "ssm_conv_bwd";
    cudaStream_t s = fcuda_stream(stream);
    if (ssm_shape_ok(p, B, T, H, ws, op)) {  // NaN added to what was asked for
        size_t nn[3] = {(size_t)B * T * H, (size_t)H * T, (size_t)H};
        float *g[3] = {du, dK, dD};
        for (int i = 0; i < 3; i++)
            if (B > 0 && T > 0 && H > 0) ssm_poison(g[i], nn[i], s);
        return PHAX_ERR;
    }
    size_t BTH = (size_t)B * T * H, BH = (size_t)B * H;
    if (dD) {
        PHAX_LAUNCH(conv_dD_k, (unsigned)((H + 127) / 128), 128u, 0, s, dD, dy, u, B, T, H);
        if (fcuda_check(op)) return PHAX_ERR;
    }
    if (!du && !dK) return PHAX_OK;
    if (p->method == FCUDA_SSM_DIRECT) {
        if (du) SSM_LAUNCH(direct_du_k, BTH, du, dy, K, D, B, T, H);
        if (dK) SSM_LAUNCH(direct_dK_k, (size_t)H * T, dK, dy, u, B, T, H);
        return PHAX_OK;
    }
    if (!ws) return phax_fail("cuda %s: no workspace", op);
    ssm_ws L = ssm_layout(p, 1);
    char *w = static_cast<char *>(ws);
    int n = p->n, nc = n / 2 + 1;
    float *dyr = (float *)(w + L.dyr), *zr = (float *)(w + L.zr);
    cufftComplex *dyc = (cufftComplex *)(w + L.dyc), *zc = (cufftComplex *)(w + L.zc);
    cufftHandle hs[4] = {p->fu, p->iu, p->fk, p->ik};
    for (int i = 0; i < 4; i++)
        if (cufft_ok(cufftSetStream(hs[i], s), op, "cufftSetStream")) return PHAX_ERR;
    SSM_LAUNCH(pad_bth_k, BH * n, dyr, dy, B, T, H, n);
    if (cufft_ok(cufftExecR2C(p->fu, dyr, dyc), op, "cufftExecR2C")) return PHAX_ERR;
    if (du) {
        float *kr = (float *)(w + L.kr);
        cufftComplex *kc = (cufftComplex *)(w + L.kc);
        SSM_LAUNCH(pad_ht_k, (size_t)H * n, kr, K, H, T, n);
        if (cufft_ok(cufftExecR2C(p->fk, kr, kc), op, "cufftExecR2C")) return PHAX_ERR;
        SSM_LAUNCH(spec_mul_k, BH * nc, zc, (const cufftComplex *)dyc, (const cufftComplex *)kc, BH, H, nc, 1);
        if (cufft_ok(cufftExecC2R(p->iu, zc, zr), op, "cufftExecC2R")) return PHAX_ERR;
        SSM_LAUNCH(unpad_bth_k, BTH, du, (const float *)zr, dy, D, B, T, H, n, 1);
    }
    if (dK) {
        float *ur = (float *)(w + L.ur), *dkr = (float *)(w + L.dkr);
        cufftComplex *uc = (cufftComplex *)(w + L.uc), *dkc = (cufftComplex *)(w + L.dkc);
        SSM_LAUNCH(pad_bth_k, BH * n, ur, u, B, T, H, n);
        if (cufft_ok(cufftExecR2C(p->fu, ur, uc), op, "cufftExecR2C")) return PHAX_ERR;
        SSM_LAUNCH(spec_dk_k, (size_t)H * nc, dkc, (const cufftComplex *)dyc, (const cufftComplex *)uc, B, H, nc);
        if (cufft_ok(cufftExecC2R(p->ik, dkc, dkr), op, "cufftExecC2R")) return PHAX_ERR;
        SSM_LAUNCH(unpad_ht_add_k, (size_t)H * T, dK, (const float *)dkr, H, T, n);
    }
    return PHAX_OK;
}
