// ref rope: rotary position embedding, rotate-half pairing (i, i + dh/2).
#include <math.h>

#include "phax/ref.h"

// θ_i = base^{−2i/dh}; the angle p·θ_i is formed in double for every position.
static int rope_apply(double *y, const double *x, int B, int T, int H, int dh, double base,
                      long pos0, double sign, int accumulate) {
    if (dh <= 0 || dh % 2) return phax_fail("rope: head dim %d must be even and positive", dh);
    int half = dh / 2;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            double p = (double)(pos0 + t);
            for (int h = 0; h < H; h++) {
                size_t off = (((size_t)b * T + t) * H + h) * dh;
                for (int i = 0; i < half; i++) {
                    double theta = pow(base, -2.0 * i / dh);
                    double c = cos(p * theta), s = sign * sin(p * theta);
                    double x1 = x[off + i], x2 = x[off + i + half];
                    double y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
                    if (accumulate) {
                        y[off + i] += y1;
                        y[off + i + half] += y2;
                    } else {
                        y[off + i] = y1;
                        y[off + i + half] = y2;
                    }
                }
            }
        }
    return PHAX_OK;
}

// y: (B, T, H, dh) = R_{pos0+t} x
int ref_rope_fwd(double *y, const double *x, int B, int T, int H, int dh, double base, long pos0) {
    return rope_apply(y, x, B, T, H, dh, base, pos0, +1.0, 0);
}

// dx += R_pᵀ dy: the rotation is orthogonal, so its transpose is the rotation by −p.
int ref_rope_bwd(double *dx, const double *dy, int B, int T, int H, int dh, double base,
                 long pos0) {
    return rope_apply(dx, dy, B, T, H, dh, base, pos0, -1.0, 1);
}
