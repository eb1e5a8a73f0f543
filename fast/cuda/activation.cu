// fast/cuda GELU (exact erf form) and SiLU, float32, elementwise by grid-stride loops
// (phax/fcuda.h; semantics: ref/activation.c; the formulas of fast/cpu/activation.c).
#include "cuda_common.cuh"

#define INV_SQRT2 0.70710678118654752440f
#define INV_SQRT_2PI 0.39894228040143267794f
#define EW_THREADS 256u

#define GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

static __global__ void gelu_fwd_k(float *__restrict__ y, const float *__restrict__ x, size_t n) {
    GRID_STRIDE(i, n) y[i] = x[i] * (0.5f * erfcf(-x[i] * INV_SQRT2));
}

static __global__ void gelu_bwd_k(float *__restrict__ dx, const float *__restrict__ dy,
                                  const float *__restrict__ x, size_t n) {
    GRID_STRIDE(i, n) {
        float z = x[i];
        float cdf = 0.5f * erfcf(-z * INV_SQRT2), pdf = INV_SQRT_2PI * expf(-0.5f * z * z);
        dx[i] += dy[i] * (cdf + z * pdf);
    }
}

static __global__ void silu_fwd_k(float *__restrict__ y, const float *__restrict__ x, size_t n) {
    GRID_STRIDE(i, n) {
        float s, sn;
        fcuda_sigmoid2(x[i], &s, &sn);
        y[i] = x[i] * s;
    }
}

static __global__ void silu_bwd_k(float *__restrict__ dx, const float *__restrict__ dy,
                                  const float *__restrict__ x, size_t n) {
    GRID_STRIDE(i, n) {
        float s, sn;
        fcuda_sigmoid2(x[i], &s, &sn);
        dx[i] += dy[i] * (s * (1.0f + x[i] * sn));
    }
}

extern "C" int fcuda_gelu_fwd(float *y, const float *x, size_t n, void *stream) {
    if (n == 0) return PHAX_OK;
    PHAX_LAUNCH(gelu_fwd_k, fcuda_ew_blocks(n, EW_THREADS), EW_THREADS, 0, fcuda_stream(stream), y, x, n);
    return fcuda_check("gelu_fwd");
}

extern "C" int fcuda_gelu_bwd(float *dx, const float *dy, const float *x, size_t n, void *stream) {
    if (!dx || n == 0) return PHAX_OK;
    PHAX_LAUNCH(gelu_bwd_k, fcuda_ew_blocks(n, EW_THREADS), EW_THREADS, 0, fcuda_stream(stream), dx, dy, x, n);
    return fcuda_check("gelu_bwd");
}

extern "C" int fcuda_silu_fwd(float *y, const float *x, size_t n, void *stream) {
    if (n == 0) return PHAX_OK;
    PHAX_LAUNCH(silu_fwd_k, fcuda_ew_blocks(n, EW_THREADS), EW_THREADS, 0, fcuda_stream(stream), y, x, n);
    return fcuda_check("silu_fwd");
}

extern "C" int fcuda_silu_bwd(float *dx, const float *dy, const float *x, size_t n, void *stream) {
    if (!dx || n == 0) return PHAX_OK;
    PHAX_LAUNCH(silu_bwd_k, fcuda_ew_blocks(n, EW_THREADS), EW_THREADS, 0, fcuda_stream(stream), dx, dy, x, n);
    return fcuda_check("silu_bwd");
}
