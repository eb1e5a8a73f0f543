// fast/cuda GSS state-space layer, float32 storage (phax/fcuda.h; semantics: ref/ssm.c;
// contract: phax/fcpu_ssm.h). So far the DSS kernel K = dss(Λ, C); the convolution comes
// with the cuFFT path.
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
#include "cuda_common.cuh"
#include "phax/numerics.h"

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

extern "C" size_t FCUDA(dss_kernel_fwd_ws)(int H, int N, int T) {
    if (H <= 0 || N <= 0 || T <= 0) return 0;
    return fcuda_align16((size_t)T * N * sizeof(cd)) + fcuda_align16((size_t)H * N * sizeof(cd));
}

static int dss_args(const char *op, int H, int N, int T, void *ws) {
    if (H < 0 || N < 0 || T < 0) return phax_fail("cuda %s: H %d, N %d, T %d: none may be negative", op, H, N, T);
    if (H > 0 && N > 0 && T > 0 && !ws) return phax_fail("cuda %s: no workspace", op);
    return PHAX_OK;
}

extern "C" int FCUDA(dss_kernel_fwd)(float *K, const float *Lre, const float *Lim, const float *Cre, const float *Cim,
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

extern "C" size_t FCUDA(dss_kernel_bwd_ws)(int H, int N, int T) { return FCUDA(dss_kernel_fwd_ws)(H, N, T); }

extern "C" int FCUDA(dss_kernel_bwd)(float *dLre, float *dLim, float *dCre, float *dCim, const float *dK,
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
