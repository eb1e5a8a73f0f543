// fast/cpu SwiGLU FFN: three (backward: six or eight) sgemms and one fused elementwise
// pass (phax/fcpu_ffn.h; semantics: ref/ffn.c).
#include "ops_internal.h"

// The kept pair keeps a = x Wgᵀ and b = x Wuᵀ in `keep` (2, n, hid) for the backward (whole
// models); h = SiLU(a) ⊙ b is one elementwise pass from them, so the forward makes it in its ws
// and the backward makes it again (the same loop: the same bits) rather than keeping a third
// (n, hid) per layer. The recomputing pair puts keep, then h, at the start of its ws.
size_t fcpu_swiglu_keep_len(size_t n, int hid) { return 2 * n * (size_t)(hid > 0 ? hid : 0); }
size_t fcpu_swiglu_fwd_keep_ws(size_t n, int d, int hid) {
    (void)d;
    return n * (size_t)(hid > 0 ? hid : 0) * sizeof(float);
}
size_t fcpu_swiglu_bwd_kept_ws(size_t n, int d, int hid) {
    (void)d;
    return 2 * n * (size_t)(hid > 0 ? hid : 0) * sizeof(float);
}
size_t fcpu_swiglu_fwd_ws(size_t n, int d, int hid) {
    return fcpu_swiglu_keep_len(n, hid) * sizeof(float) + fcpu_swiglu_fwd_keep_ws(n, d, hid);
}
size_t fcpu_swiglu_bwd_ws(size_t n, int d, int hid) {
    return fcpu_swiglu_keep_len(n, hid) * sizeof(float) + fcpu_swiglu_bwd_kept_ws(n, d, hid);
}

// keep = (a, b): a = x Wgᵀ, b = x Wuᵀ (two sgemms over all rows).
static void swiglu_ab(float *keep, const float *x, const float *Wg, const float *Wu, size_t n, int d, int hid) {
    size_t m = n * (size_t)hid;
    fcpu_mm(CblasNoTrans, CblasTrans, (int)n, hid, d, 1.0f, x, d, Wg, d, 0.0f, keep, hid);
    fcpu_mm(CblasNoTrans, CblasTrans, (int)n, hid, d, 1.0f, x, d, Wu, d, 0.0f, keep + m, hid);
}

// h (m) = SiLU(a) ⊙ b: the one loop both the forward and the backward's remake run.
static void swiglu_gate(float *h, const float *a, const float *b, size_t m) {
    size_t nb = (m + EW_BLOCK - 1) / EW_BLOCK;
#pragma omp parallel for schedule(static) if (m >= PAR_MIN / 4)
    for (size_t blk = 0; blk < nb; blk++) {
        size_t e1 = (blk + 1) * EW_BLOCK < m ? (blk + 1) * EW_BLOCK : m;
        const float *restrict aa = a, *restrict bb = b;
        float *restrict hh = h;
#pragma omp simd
        for (size_t i = blk * EW_BLOCK; i < e1; i++) {
            float s, sn;
            sigmoid2(aa[i], &s, &sn);
            hh[i] = (aa[i] * s) * bb[i];
        }
    }
}

int fcpu_swiglu_fwd_keep(float *y, float *keep, const float *x, const float *Wg, const float *Wu,
                         const float *Wd, size_t n, int d, int hid, void *ws) {
    if (n == 0 || d <= 0) return PHAX_OK;
    if (hid <= 0) {
        memset(y, 0, n * (size_t)d * sizeof(float));
        return PHAX_OK;
    }
    if (!keep || !ws) return phax_fail("fcpu_swiglu_fwd_keep: keep or ws is NULL (need fcpu_swiglu_fwd_keep_ws)");
    size_t m = n * (size_t)hid;
    float *h = ws;
    swiglu_ab(keep, x, Wg, Wu, n, d, hid);
    swiglu_gate(h, keep, keep + m, m);
    fcpu_mm(CblasNoTrans, CblasTrans, (int)n, d, hid, 1.0f, h, hid, Wd, hid, 0.0f, y, d);
    return PHAX_OK;
}

int fcpu_swiglu_bwd_kept(float *dx, float *dWg, float *dWu, float *dWd, const float *dy,
                         const float *x, const float *Wg, const float *Wu, const float *Wd,
                         size_t n, int d, int hid, const float *keep, void *ws) {
    if (n == 0 || d <= 0 || hid <= 0 || (!dx && !dWg && !dWu && !dWd)) return PHAX_OK;
    if (!ws) return phax_fail("fcpu_swiglu_bwd_kept: ws is NULL (need fcpu_swiglu_bwd_kept_ws)");
    size_t m = n * (size_t)hid;
    const float *a = keep, *b = a + m;
    float *da = ws, *db = da + m;
    if (dWd) {  // (d, hid) += dyᵀ h, h made again in db's slot (written below)
        swiglu_gate(db, a, b, m);
        fcpu_mm(CblasTrans, CblasNoTrans, d, hid, (int)n, 1.0f, dy, d, db, hid, 1.0f, dWd, hid);
    }
    // dh = dy Wd: (n, d)(d, hid) → da's slot; then, with s = σ(a):
    // da = dh b s (1 + a σ(−a)), db = dh SiLU(a).
    fcpu_mm(CblasNoTrans, CblasNoTrans, (int)n, hid, d, 1.0f, dy, d, Wd, hid,
                0.0f, da, hid);
    size_t nb = (m + EW_BLOCK - 1) / EW_BLOCK;
#pragma omp parallel for schedule(static) if (m >= PAR_MIN / 4)
    for (size_t blk = 0; blk < nb; blk++) {
        size_t e1 = (blk + 1) * EW_BLOCK < m ? (blk + 1) * EW_BLOCK : m;
        const float *restrict aa = a, *restrict bb = b;
        float *restrict ga = da, *restrict gb = db;
#pragma omp simd
        for (size_t i = blk * EW_BLOCK; i < e1; i++) {
            float av = aa[i], bv = bb[i], g = ga[i], s, sn;
            sigmoid2(av, &s, &sn);
            float silu = av * s;
            gb[i] = g * silu;
            ga[i] = (g * bv) * (s * (1.0f + av * sn));
        }
    }
    if (dx) {  // (n, d) += da Wg + db Wu
        fcpu_mm(CblasNoTrans, CblasNoTrans, (int)n, d, hid, 1.0f, da, hid, Wg, d,
                    1.0f, dx, d);
        fcpu_mm(CblasNoTrans, CblasNoTrans, (int)n, d, hid, 1.0f, db, hid, Wu, d,
                    1.0f, dx, d);
    }
    if (dWg)  // (hid, d) += daᵀ x
        fcpu_mm(CblasTrans, CblasNoTrans, hid, d, (int)n, 1.0f, da, hid, x, d,
                    1.0f, dWg, d);
    if (dWu)
        fcpu_mm(CblasTrans, CblasNoTrans, hid, d, (int)n, 1.0f, db, hid, x, d,
                    1.0f, dWu, d);
    return PHAX_OK;
}

// The recomputing pair: the same functions with keep (then h or the gradients' scratch) in ws.
int fcpu_swiglu_fwd(float *y, const float *x, const float *Wg, const float *Wu, const float *Wd,
                    size_t n, int d, int hid, void *ws) {
    if (n == 0 || d <= 0) return PHAX_OK;
    if (!ws && hid > 0) return phax_fail("fcpu_swiglu_fwd: ws is NULL (need fcpu_swiglu_fwd_ws)");
    float *keep = ws;
    return fcpu_swiglu_fwd_keep(y, keep, x, Wg, Wu, Wd, n, d, hid,
                                hid > 0 ? keep + fcpu_swiglu_keep_len(n, hid) : NULL);
}

int fcpu_swiglu_bwd(float *dx, float *dWg, float *dWu, float *dWd, const float *dy, const float *x,
                    const float *Wg, const float *Wu, const float *Wd, size_t n, int d, int hid,
                    void *ws) {
    if (n == 0 || d <= 0 || hid <= 0 || (!dx && !dWg && !dWu && !dWd)) return PHAX_OK;
    if (!ws) return phax_fail("fcpu_swiglu_bwd: ws is NULL (need fcpu_swiglu_bwd_ws)");
    float *keep = ws;
    swiglu_ab(keep, x, Wg, Wu, n, d, hid);  // recompute a, b
    return fcpu_swiglu_bwd_kept(dx, dWg, dWu, dWd, dy, x, Wg, Wu, Wd, n, d, hid, keep,
                                keep + fcpu_swiglu_keep_len(n, hid));
}
