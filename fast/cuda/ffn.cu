// fast/cuda SwiGLU FFN y = W_down(SiLU(W_gate x) ⊙ W_up x), float32 (phax/fcuda.h; semantics:
// ref/ffn.c; contract: phax/fcpu_ffn.h): the products on cuBLAS (row-major fcuda_sgemm, the
// calls of fast/cpu/ffn.c one for one), the SiLU gate and its derivative fused elementwise
// kernels. The kept form stores a = x Wgᵀ, b = x Wuᵀ in keep (2, n, hid) for the backward and
// makes h = SiLU(a) ⊙ b in its ws (the backward makes it again: the same kernel, the same bits);
// the recomputing pair keeps them at the start of its workspace.
#include "blas.cuh"

#define FFN_THREADS 256u

static __global__ void swiglu_gate_k(float *__restrict__ h, const float *__restrict__ a, const float *__restrict__ b,
                                     size_t m) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < m; i += (size_t)gridDim.x * blockDim.x) {
        float s, sn;
        fcuda_sigmoid2(a[i], &s, &sn);
        h[i] = (a[i] * s) * b[i];
    }
}

// da holds dh = dy Wd on entry: da ← dh b s (1 + a σ(−a)), db ← dh SiLU(a).
static __global__ void swiglu_gate_bwd_k(float *__restrict__ da, float *__restrict__ db, const float *__restrict__ a,
                                         const float *__restrict__ b, size_t m) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < m; i += (size_t)gridDim.x * blockDim.x) {
        float av = a[i], bv = b[i], g = da[i], s, sn;
        fcuda_sigmoid2(av, &s, &sn);
        db[i] = g * (av * s);
        da[i] = (g * bv) * (s * (1.0f + av * sn));
    }
}

extern "C" size_t fcuda_swiglu_keep_len(size_t n, int hid) { return 2 * n * (size_t)(hid > 0 ? hid : 0); }
extern "C" size_t fcuda_swiglu_fwd_keep_ws(size_t n, int d, int hid) {
    (void)d;
    return n * (size_t)(hid > 0 ? hid : 0) * sizeof(float);
}
extern "C" size_t fcuda_swiglu_bwd_kept_ws(size_t n, int d, int hid) {
    (void)d;
    return 2 * n * (size_t)(hid > 0 ? hid : 0) * sizeof(float);
}
extern "C" size_t fcuda_swiglu_fwd_ws(size_t n, int d, int hid) {
    return fcuda_swiglu_keep_len(n, hid) * sizeof(float) + fcuda_swiglu_fwd_keep_ws(n, d, hid);
}
extern "C" size_t fcuda_swiglu_bwd_ws(size_t n, int d, int hid) {
    return fcuda_swiglu_keep_len(n, hid) * sizeof(float) + fcuda_swiglu_bwd_kept_ws(n, d, hid);
}

// keep = (a, b).
static int swiglu_ab(float *keep, const float *x, const float *Wg, const float *Wu, size_t n, int d, int hid,
                     void *stream) {
    size_t m = n * (size_t)hid;
    if (fcuda_sgemm(0, 1, (int)n, hid, d, 1.0f, x, d, Wg, d, 0.0f, keep, hid, stream)) return PHAX_ERR;
    return fcuda_sgemm(0, 1, (int)n, hid, d, 1.0f, x, d, Wu, d, 0.0f, keep + m, hid, stream);
}

// h (m) = SiLU(a) ⊙ b: the forward's and the backward's remake.
static int swiglu_gate(float *h, const float *a, const float *b, size_t m, void *stream) {
    PHAX_LAUNCH(swiglu_gate_k, fcuda_ew_blocks(m, FFN_THREADS), FFN_THREADS, 0, fcuda_stream(stream), h, a, b, m);
    return fcuda_check("swiglu (gate)");
}

extern "C" int fcuda_swiglu_fwd_keep(float *y, float *keep, const float *x, const float *Wg, const float *Wu,
                                      const float *Wd, size_t n, int d, int hid, void *ws, void *stream) {
    if (n == 0 || d <= 0) return PHAX_OK;
    if (fcuda_rows_fit(n, "swiglu_fwd")) return PHAX_ERR;
    if (hid <= 0)
        return fcuda_ok(cudaMemsetAsync(y, 0, n * (size_t)d * sizeof(float), fcuda_stream(stream)), "swiglu_fwd");
    if (!keep || !ws) return phax_fail("cuda swiglu_fwd: no room for the activations (keep or ws is NULL)");
    size_t m = n * (size_t)hid;
    float *h = static_cast<float *>(ws);
    if (swiglu_ab(keep, x, Wg, Wu, n, d, hid, stream) || swiglu_gate(h, keep, keep + m, m, stream)) return PHAX_ERR;
    return fcuda_sgemm(0, 1, (int)n, d, hid, 1.0f, h, hid, Wd, hid, 0.0f, y, d, stream);
}

extern "C" int fcuda_swiglu_bwd_kept(float *dx, float *dWg, float *dWu, float *dWd, const float *dy, const float *x,
                                      const float *Wg, const float *Wu, const float *Wd, size_t n, int d, int hid,
                                      const float *keep, void *ws, void *stream) {
    if (n == 0 || d <= 0 || hid <= 0 || (!dx && !dWg && !dWu && !dWd)) return PHAX_OK;
    if (fcuda_rows_fit(n, "swiglu_bwd")) return PHAX_ERR;
    if (!ws) return phax_fail("cuda swiglu_bwd: ws is NULL (need swiglu_bwd_kept_ws)");
    size_t m = n * (size_t)hid;
    const float *a = keep, *b = a + m;
    float *da = static_cast<float *>(ws), *db = da + m;
    // (d, hid) += dyᵀ h, h made again in db's slot (written below)
    if (dWd && (swiglu_gate(db, a, b, m, stream) ||
                fcuda_sgemm(1, 0, d, hid, (int)n, 1.0f, dy, d, db, hid, 1.0f, dWd, hid, stream)))
        return PHAX_ERR;
    if (fcuda_sgemm(0, 0, (int)n, hid, d, 1.0f, dy, d, Wd, hid, 0.0f, da, hid, stream))
        return PHAX_ERR;  // dh = dy Wd
    PHAX_LAUNCH(swiglu_gate_bwd_k, fcuda_ew_blocks(m, FFN_THREADS), FFN_THREADS, 0, fcuda_stream(stream), da, db, a,
                b, m);
    if (fcuda_check("swiglu_bwd (gate)")) return PHAX_ERR;
    if (dx) {  // (n, d) += da Wg + db Wu
        if (fcuda_sgemm(0, 0, (int)n, d, hid, 1.0f, da, hid, Wg, d, 1.0f, dx, d, stream)) return PHAX_ERR;
        if (fcuda_sgemm(0, 0, (int)n, d, hid, 1.0f, db, hid, Wu, d, 1.0f, dx, d, stream)) return PHAX_ERR;
    }
    if (dWg && fcuda_sgemm(1, 0, hid, d, (int)n, 1.0f, da, hid, x, d, 1.0f, dWg, d, stream)) return PHAX_ERR;
    if (dWu && fcuda_sgemm(1, 0, hid, d, (int)n, 1.0f, db, hid, x, d, 1.0f, dWu, d, stream)) return PHAX_ERR;
    return PHAX_OK;
}

extern "C" int fcuda_swiglu_fwd(float *y, const float *x, const float *Wg, const float *Wu, const float *Wd,
                                 size_t n, int d, int hid, void *ws, void *stream) {
    float *keep = static_cast<float *>(ws);
    return fcuda_swiglu_fwd_keep(y, keep, x, Wg, Wu, Wd, n, d, hid,
                                  keep && hid > 0 ? keep + fcuda_swiglu_keep_len(n, hid) : NULL, stream);
}

extern "C" int fcuda_swiglu_bwd(float *dx, float *dWg, float *dWu, float *dWd, const float *dy, const float *x,
                                 const float *Wg, const float *Wu, const float *Wd, size_t n, int d, int hid, void *ws,
                                 void *stream) {
    if (n == 0 || d <= 0 || hid <= 0 || (!dx && !dWg && !dWu && !dWd)) return PHAX_OK;
    if (fcuda_rows_fit(n, "swiglu_bwd")) return PHAX_ERR;
    if (!ws) return phax_fail("cuda swiglu_bwd: ws is NULL (need swiglu_bwd_ws)");
    float *keep = static_cast<float *>(ws);
    if (swiglu_ab(keep, x, Wg, Wu, n, d, hid, stream)) return PHAX_ERR;  // recompute a, b
    return fcuda_swiglu_bwd_kept(dx, dWg, dWu, dWd, dy, x, Wg, Wu, Wd, n, d, hid, keep,
                                  keep + fcuda_swiglu_keep_len(n, hid), stream);
}
