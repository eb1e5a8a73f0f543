// fast/cuda rotate-half RoPE, float32 (phax/fcuda.h; semantics: ref/rope.c; contract:
// phax/fcpu_rope.h). A thread per rotated pair (x_i, x_{i+dh/2}) of one (b, t, h) row; the
// angle p·θ_i, θ_i = base^{−2i/dh}, p = pos0 + t, and its cos/sin in double, rounded to float
// once — from the table (rope_table, built once per sequence) or on the fly (cs NULL).
// Each thread reads its pair before writing it, so y may be x.
#include "cuda_common.cuh"

#define ROPE_THREADS 256u

static int rope_args(const char *op, int B, int T, int H, int dh) {
    if (dh <= 0 || dh % 2) return phax_fail("cuda %s: head dim %d must be even and positive", op, dh);
    if (B < 0 || T < 0 || H < 0) return phax_fail("cuda %s: B %d, T %d, H %d: none may be negative", op, B, T, H);
    return PHAX_OK;
}

__device__ __forceinline__ void rope_angle(float *c, float *s, double p, int i, int dh, double base) {
    double theta = pow(base, -2.0 * i / dh);
    *c = (float)cos(p * theta);
    *s = (float)sin(p * theta);
}

// cs[t·half + i] = cos, cs[T·half + t·half + i] = sin.
static __global__ void rope_table_k(float *__restrict__ cs, int T, int dh, double base, long pos0) {
    size_t half = (size_t)dh / 2, total = (size_t)T * half;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < total; k += (size_t)gridDim.x * blockDim.x) {
        size_t t = k / half;
        int i = (int)(k % half);
        rope_angle(&cs[k], &cs[total + k], (double)(pos0 + (long)t), i, dh, base);
    }
}

// inverse 0: y = R x (overwrite); 1: y += Rᵀ x (accumulate: the backward).
static __global__ void rope_apply_k(float *y, const float *x, size_t pairs, int T, int H, int dh, double base,
                                    long pos0, const float *__restrict__ cs, int inverse) {
    size_t half = (size_t)dh / 2, toff = (size_t)T * half;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < pairs; k += (size_t)gridDim.x * blockDim.x) {
        size_t row = k / half;  // (b·T + t)·H + h
        int i = (int)(k % half);
        size_t t = (row / (size_t)H) % (size_t)T;
        float c, s;
        if (cs) {
            c = cs[t * half + i];
            s = cs[toff + t * half + i];
        } else {
            rope_angle(&c, &s, (double)(pos0 + (long)t), i, dh, base);
        }
        size_t o = row * (size_t)dh + i;
        float a = x[o], b = x[o + half];
        if (!inverse) {
            y[o] = a * c - b * s;
            y[o + half] = b * c + a * s;
        } else {
            y[o] += a * c + b * s;
            y[o + half] += b * c - a * s;
        }
    }
}

extern "C" size_t fcuda_rope_table_len(int T, int dh) { return (size_t)(T > 0 ? T : 0) * (size_t)(dh > 0 ? dh : 0); }

extern "C" int fcuda_rope_table(float *cs, int T, int dh, double base, long pos0, void *stream) {
    if (rope_args("rope_table", 1, T, 1, dh)) return PHAX_ERR;
    size_t total = (size_t)T * (size_t)(dh / 2);
    if (total == 0) return PHAX_OK;
    PHAX_LAUNCH(rope_table_k, fcuda_ew_blocks(total, ROPE_THREADS), ROPE_THREADS, 0, fcuda_stream(stream), cs, T, dh,
                base, pos0);
    return fcuda_check("rope_table");
}

static int rope_run(const char *op, float *y, const float *x, int B, int T, int H, int dh, double base, long pos0,
                    const float *cs, int inverse, void *stream) {
    if (rope_args(op, B, T, H, dh)) return PHAX_ERR;
    size_t pairs = (size_t)B * (size_t)T * (size_t)H * (size_t)(dh / 2);
    if (pairs == 0) return PHAX_OK;
    PHAX_LAUNCH(rope_apply_k, fcuda_ew_blocks(pairs, ROPE_THREADS), ROPE_THREADS, 0, fcuda_stream(stream), y, x,
                pairs, T, H, dh, base, pos0, cs, inverse);
    return fcuda_check(op);
}

extern "C" int fcuda_rope_fwd(float *y, const float *x, int B, int T, int H, int dh, double base, long pos0,
                               const float *cs, void *stream) {
    return rope_run("rope_fwd", y, x, B, T, H, dh, base, pos0, cs, 0, stream);
}

extern "C" int fcuda_rope_bwd(float *dx, const float *dy, int B, int T, int H, int dh, double base, long pos0,
                               const float *cs, void *stream) {
    if (!dx) return rope_args("rope_bwd", B, T, H, dh);
    return rope_run("rope_bwd", dx, dy, B, T, H, dh, base, pos0, cs, 1, stream);
}
