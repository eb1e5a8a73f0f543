// fast/cpu ssm (float32). See phax/fcpu.h for conventions.
//
// The GSS state-space layer: the DSS kernel K = dss(Λ, C) and the causal SSM
// convolution y = K ∗ u + D u, with the semantics of ref_dss_kernel_* and
// ref_ssm_conv_* (phax/ref.h, docs/spec.md §2.8).
//
//   * dss kernel: lags are split l = m·PB + j, so e^{λ l} = e^{λ m PB}·e^{λ j}; both
//     factors come from exp/cos/sin of double arguments (the angle l·Im λ is never
//     formed in float). Forward: one sgemm over the 2N real mode components,
//     K(h, m; j) = Re Σ_n (C̃_hn e^{λ_n m PB})·e^{λ_n j}. Backward: one dgemm over the
//     lags of a block and the sums over blocks in double, so dΛ and dC are within
//     about one float rounding of ref whatever T is.
//   * ssm conv: FFT (FFTW single precision, in-place real transforms, zero-padded to
//     the smallest n ≥ 2T − 1 of the form 2^a, 3·2^a or 5·2^a: no circular wrap) or,
//     for T ≤ FCPU_SSM_DIRECT_MAX_T, the direct O(T²) sum; the plan chooses
//     (FCPU_SSM_AUTO) or is told (FCPU_SSM_FFT / FCPU_SSM_DIRECT).
#ifndef PHAX_FCPU_SSM_H
#define PHAX_FCPU_SSM_H

#include <stddef.h>
#include <stdint.h>

#include "phax/ops.h"

// --- dss kernel --------------------------------------------------------------------------
// Lre, Lim: (N); Cre, Cim: (H, N); K: (H, T).  ws: fcpu_dss_kernel_fwd_ws(H, N, T)
// bytes, 64-byte aligned (phax_alloc), reused across calls. Threads: OpenBLAS's, in
// the one gemm; the set-up around it runs on the calling thread (see fast/cpu/ssm.c).
size_t fcpu_dss_kernel_fwd_ws(int H, int N, int T);
void fcpu_dss_kernel_fwd(float *K, const float *Lre, const float *Lim, const float *Cre,
                         const float *Cim, int H, int N, int T, void *ws);
// dK: (H, T); dLre, dLim: (N); dCre, dCim: (H, N); any gradient may be NULL (adds).
size_t fcpu_dss_kernel_bwd_ws(int H, int N, int T);
void fcpu_dss_kernel_bwd(float *dLre, float *dLim, float *dCre, float *dCim, const float *dK,
                         const float *Lre, const float *Lim, const float *Cre, const float *Cim,
                         int H, int N, int T, void *ws);

// --- ssm conv ----------------------------------------------------------------------------
// A plan fixes (B, T, H), the method, the FFT length and the FFTW plans, and
// the OpenMP thread count (omp_get_max_threads() at creation; calls run with
// that many threads, so the workspace sized for it is enough). Creation and
// freeing allocate and call the FFTW planner (serialised among phax callers by
// an OpenMP critical section; not safe against FFTW planning done concurrently
// elsewhere in the process). A plan is read-only during calls: several threads
// may use one plan at once, each with its own workspace. Each channel's result
// does not depend on which thread computes it, so outputs are the same bits for
// any thread count (checked for 1 and 2).
typedef struct fcpu_ssm_plan fcpu_ssm_plan;

enum {
    FCPU_SSM_AUTO = 0,    // direct for T <= FCPU_SSM_DIRECT_MAX_T, else FFT
    FCPU_SSM_FFT = 1,
    FCPU_SSM_DIRECT = 2,
};
// The crossover measured by benchmarks/bench_ssm.c at B = 1, H = 64 (fwd + bwd, direct
// vs FFT): one Zen 5 core T = 128 0.153 vs 0.192 ms, T = 192 0.341 vs 0.272 ms; two
// cores T = 96 0.087 vs 0.097 ms, T = 128 0.134 vs 0.119 ms (within noise of each other
// from 96 to 128), T = 192 0.254 vs 0.164 ms.
#define FCPU_SSM_DIRECT_MAX_T 128

// Returns NULL (message in phax_error()) on bad shapes or allocation failure.
fcpu_ssm_plan *fcpu_ssm_plan_new(int B, int T, int H);  // FCPU_SSM_AUTO, FFTW_ESTIMATE
// method: FCPU_SSM_*; fftw_measure: 0 plans with FFTW_ESTIMATE (the default:
// the same FFT algorithm, hence the same bits, in every process), 1 with
// FFTW_MEASURE (timed at creation, 0.5–2.2 s per plan here; the FFT convolution then
// ran 1.15–1.55× faster at T = 1024…16384, but the algorithm — and the bits — may
// change from run to run).
fcpu_ssm_plan *fcpu_ssm_plan_new_ex(int B, int T, int H, int method, int fftw_measure);
void fcpu_ssm_plan_free(fcpu_ssm_plan *p);
int fcpu_ssm_plan_method(const fcpu_ssm_plan *p);   // FCPU_SSM_FFT or FCPU_SSM_DIRECT
int fcpu_ssm_plan_fft_len(const fcpu_ssm_plan *p);  // n (0 for the direct method)

// Workspace bytes for a call with this plan; the pointer must be 64-byte aligned.
size_t fcpu_ssm_conv_fwd_ws(const fcpu_ssm_plan *p);
size_t fcpu_ssm_conv_bwd_ws(const fcpu_ssm_plan *p);

// y, u: (B, T, H) channels last; K: (H, T); D: (H).
// y[b,t,h] = Σ_{s≤t} K[h,t−s] u[b,s,h] + D[h] u[b,t,h].
// Returns PHAX_ERR (and writes NaN to y) when (B, T, H) differ from the plan's
// or ws is misaligned.
int fcpu_ssm_conv_fwd(float *y, const float *u, const float *K, const float *D, int B, int T,
                      int H, const fcpu_ssm_plan *plan, void *ws);
// du: (B, T, H); dK: (H, T); dD: (H); any may be NULL (adds).
// du[b,s,h] += Σ_{t≥s} K[h,t−s] dy[b,t,h] + D[h] dy[b,s,h];
// dK[h,l] += Σ_b Σ_{t≥l} dy[b,t,h] u[b,t−l,h];  dD[h] += Σ_{b,t} dy u.
// Returns PHAX_ERR (and adds NaN to the requested gradients) on a plan mismatch.
int fcpu_ssm_conv_bwd(float *du, float *dK, float *dD, const float *dy, const float *u,
                      const float *K, const float *D, int B, int T, int H,
                      const fcpu_ssm_plan *plan, void *ws);

#endif
