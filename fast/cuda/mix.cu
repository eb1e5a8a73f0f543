// fast/cuda softplus mix of branch outputs, float32 (phax/fcuda.h; semantics: ref/mix.c;
// contract: phax/fcpu_mix.h). The weights w_i = softplus(p_i)/S, S = Σ softplus(p_j), in
// double and rounded to float once, by thread 0 of every block into shared memory (p lives
// on the device; nb is a handful).
//   forward: m = w_0 b_0 + w_1 b_1 + ..., in ref's order, a thread per element.
//   backward: db_i += w_i dm elementwise; dp_i += σ(p_i)(dw_i − Σ_j w_j dw_j)/S with
//     dw_i = Σ_e dm_e b_ie in double: a block per (fixed row chunk, branch) writes its partial
//     to the workspace, then one thread adds the chunks in order: the same bits on any device.
#include "cuda_common.cuh"
#include "phax/numerics.h"

#define MIX_THREADS 256u
#define MIX_CHUNKS 64
// The weights sit in dynamic shared memory (48 KiB without opt-in) and the partials' grid has
// one row per branch (gridDim.y <= 65535): a model mixes a handful of branches.
#define MIX_MAX_BRANCHES 4096

static size_t mix_chunks(size_t n) { return n < MIX_CHUNKS ? n : MIX_CHUNKS; }

// w (shared, nb floats) from p; every thread of the block calls it.
__device__ __forceinline__ void mix_weights_shared(float *w, const float *p, int nb) {
    if (threadIdx.x == 0) {
        double s = 0;
        for (int i = 0; i < nb; i++) s += phax_softplus((double)p[i]);
        for (int i = 0; i < nb; i++) w[i] = (float)(phax_softplus((double)p[i]) / s);
    }
    __syncthreads();
}

static __global__ void mix_fwd_k(float *__restrict__ m, const float *__restrict__ b, const float *__restrict__ p,
                                 int nb, size_t n) {
    PHAX_DYN_SMEM(float, w);
    mix_weights_shared(w, p, nb);
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        float acc = w[0] * b[e];
        for (int i = 1; i < nb; i++) acc += w[i] * b[(size_t)i * n + e];
        m[e] = acc;
    }
}

static __global__ void fill0_k(float *__restrict__ m, size_t n) {
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x)
        m[e] = 0.0f;
}

static __global__ void mix_bwd_db_k(float *__restrict__ db, const float *__restrict__ dm, const float *__restrict__ p,
                                    int nb, size_t n) {
    PHAX_DYN_SMEM(float, w);
    mix_weights_shared(w, p, nb);
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x)
        for (int i = 0; i < nb; i++) db[(size_t)i * n + e] += w[i] * dm[e];
}

// part[c·nb + i] = Σ_{e in chunk c} dm_e b_ie in double (grid: chunks × nb, MIX_THREADS a block).
static __global__ void mix_bwd_part_k(double *__restrict__ part, const float *__restrict__ dm,
                                      const float *__restrict__ b, int nb, size_t n) {
    __shared__ double red[32];
    size_t c = blockIdx.x, nch = gridDim.x;
    int i = blockIdx.y;
    size_t e0 = n * c / nch, e1 = n * (c + 1) / nch;
    const float *bi = b + (size_t)i * n;
    double s = 0;
    for (size_t e = e0 + threadIdx.x; e < e1; e += blockDim.x) s += (double)dm[e] * bi[e];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (lane == 0) red[wid] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0;
        for (int k = 0; k < nw; k++) t += red[k];
        part[c * nb + i] = t;
    }
}

// One thread: dw_i from the chunks in order, then dp.
static __global__ void mix_bwd_dp_k(float *__restrict__ dp, const double *__restrict__ part,
                                    const float *__restrict__ p, int nb, int nch) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    double S = 0, wdw = 0;
    for (int i = 0; i < nb; i++) S += phax_softplus((double)p[i]);
    for (int i = 0; i < nb; i++) {
        double dw = 0;
        for (int c = 0; c < nch; c++) dw += part[(size_t)c * nb + i];
        wdw += phax_softplus((double)p[i]) / S * dw;
    }
    for (int i = 0; i < nb; i++) {
        double dw = 0;
        for (int c = 0; c < nch; c++) dw += part[(size_t)c * nb + i];
        dp[i] = (float)((double)dp[i] + phax_sigmoid((double)p[i]) * (dw - wdw) / S);
    }
}

extern "C" int fcuda_mix_fwd(float *m, const float *b, const float *p, int nb, size_t n, void *stream) {
    if (n == 0) return PHAX_OK;
    if (nb > MIX_MAX_BRANCHES) return phax_fail("cuda mix_fwd: %d branches (at most %d)", nb, MIX_MAX_BRANCHES);
    cudaStream_t s = fcuda_stream(stream);
    if (nb <= 0) {
        PHAX_LAUNCH(fill0_k, fcuda_ew_blocks(n, MIX_THREADS), MIX_THREADS, 0, s, m, n);
        return fcuda_check("mix_fwd");
    }
    PHAX_LAUNCH(mix_fwd_k, fcuda_ew_blocks(n, MIX_THREADS), MIX_THREADS, (size_t)nb * sizeof(float), s, m, b, p, nb, n);
    return fcuda_check("mix_fwd");
}

extern "C" size_t fcuda_mix_bwd_ws(int nb, size_t n) { return mix_chunks(n) * (size_t)(nb > 0 ? nb : 0) * sizeof(double); }

extern "C" int fcuda_mix_bwd(float *db, float *dp, const float *dm, const float *b, const float *p, int nb, size_t n,
                              void *ws, void *stream) {
    if (nb <= 0 || (!db && !dp)) return PHAX_OK;
    if (dp && n > 0 && !ws) return phax_fail("cuda mix_bwd: dp requested without a workspace");
    if (nb > MIX_MAX_BRANCHES) return phax_fail("cuda mix_bwd: %d branches (at most %d)", nb, MIX_MAX_BRANCHES);
    cudaStream_t s = fcuda_stream(stream);
    if (db && n > 0) {
        PHAX_LAUNCH(mix_bwd_db_k, fcuda_ew_blocks(n, MIX_THREADS), MIX_THREADS, (size_t)nb * sizeof(float), s, db, dm,
                    p, nb, n);
        if (fcuda_check("mix_bwd (db)")) return PHAX_ERR;
    }
    if (!dp) return PHAX_OK;
    int nch = (int)mix_chunks(n);
    if (nch > 0) {
        PHAX_LAUNCH(mix_bwd_part_k, dim3((unsigned)nch, (unsigned)nb), MIX_THREADS, 0, s, (double *)ws, dm, b, nb, n);
        if (fcuda_check("mix_bwd (partials)")) return PHAX_ERR;
    }
    PHAX_LAUNCH(mix_bwd_dp_k, 1u, 32u, 0, s, dp, (const double *)ws, p, nb, nch);
    return fcuda_check("mix_bwd (dp)");
}
