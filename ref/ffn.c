// ref SwiGLU FFN: y = W_down(SiLU(W_gate x) ⊙ W_up x), no biases, composed from
// ref_linear_* and ref_silu_* for readability (the oracle is not meant to be fast).
#include <math.h>

#include "phax/ref.h"

// Scratch of `count` (n, hid) matrices in one zeroed block, or NULL with the
// error recorded by phax_alloc.
static double *scratch(size_t count, size_t n, int hid) {
    return phax_alloc(count * n * (size_t)hid * sizeof(double));
}

// Adds NaN to p: (len), unless p is NULL — so a caller that ignores the
// returned PHAX_ERR still cannot mistake the gradients for results.
static void add_nan(double *p, size_t len) {
    const double nan = (double)NAN;
    if (p)
        for (size_t i = 0; i < len; i++) p[i] += nan;
}

// The hidden activations of the forward pass, recomputed by the backward.
// a = x Wgᵀ, b = x Wuᵀ, s = SiLU(a), h = s ⊙ b; all (n, hid).
static void hidden(double *a, double *b, double *s, double *h, const double *x, const double *Wg,
                   const double *Wu, size_t n, int d, int hid) {
    size_t m = n * (size_t)hid;
    ref_linear_fwd(a, x, Wg, NULL, n, d, hid);
    ref_linear_fwd(b, x, Wu, NULL, n, d, hid);
    ref_silu_fwd(s, a, m);
    for (size_t i = 0; i < m; i++) h[i] = s[i] * b[i];
}

// y, x: (n, d); Wg, Wu: (hid, d); Wd: (d, hid)
// On an allocation failure: PHAX_ERR, phax_error() says why, and y is NaN.
int ref_swiglu_fwd(double *y, const double *x, const double *Wg, const double *Wu,
                    const double *Wd, size_t n, int d, int hid) {
    size_t m = n * (size_t)hid;
    double *buf = scratch(4, n, hid);
    if (!buf) {
        for (size_t i = 0; i < n * (size_t)d; i++) y[i] = (double)NAN;
        return PHAX_ERR;
    }
    double *a = buf, *b = buf + m, *s = buf + 2 * m, *h = buf + 3 * m;
    hidden(a, b, s, h, x, Wg, Wu, n, d, hid);
    ref_linear_fwd(y, h, Wd, NULL, n, hid, d);
    phax_free(buf);
    return PHAX_OK;
}

// dx, dy, x: (n, d); dWg, dWu: (hid, d); dWd: (d, hid); any gradient may be NULL.
//   dh = dy Wd,  dWd += dyᵀ h
//   db = dh ⊙ s,  da = dh ⊙ b ⊙ SiLU'(a)
//   dx += da Wg + db Wu,  dWg += daᵀ x,  dWu += dbᵀ x
// On an allocation failure: PHAX_ERR, and every requested gradient gets NaN added.
int ref_swiglu_bwd(double *dx, double *dWg, double *dWu, double *dWd, const double *dy,
                    const double *x, const double *Wg, const double *Wu, const double *Wd,
                    size_t n, int d, int hid) {
    size_t m = n * (size_t)hid;
    double *buf = scratch(7, n, hid);
    if (!buf) {
        size_t nx = n * (size_t)d, nw = (size_t)hid * d;  // Wd: (d, hid) has nw too
        add_nan(dx, nx), add_nan(dWg, nw), add_nan(dWu, nw), add_nan(dWd, nw);
        return PHAX_ERR;
    }
    double *a = buf, *b = buf + m, *s = buf + 2 * m, *h = buf + 3 * m;
    double *dh = buf + 4 * m, *da = buf + 5 * m, *db = buf + 6 * m;  // zeroed by phax_alloc
    hidden(a, b, s, h, x, Wg, Wu, n, d, hid);

    // y = h Wdᵀ: the gradient reaches h through Wd (dh accumulates into zeros).
    ref_linear_bwd(dh, dWd, NULL, dy, h, Wd, n, hid, d);

    // h = SiLU(a) ⊙ b. ref_silu_bwd adds dh ⊙ b ⊙ SiLU'(a) into the zeroed da.
    double *dh_b = h;  // h is no longer needed: reuse it for dh ⊙ b
    for (size_t i = 0; i < m; i++) {
        db[i] = dh[i] * s[i];
        dh_b[i] = dh[i] * b[i];
    }
    ref_silu_bwd(da, dh_b, a, m);

    // a = x Wgᵀ, b = x Wuᵀ: both paths add into dx.
    ref_linear_bwd(dx, dWg, NULL, da, x, Wg, n, d, hid);
    ref_linear_bwd(dx, dWu, NULL, db, x, Wu, n, d, hid);
    phax_free(buf);
    return PHAX_OK;
}
