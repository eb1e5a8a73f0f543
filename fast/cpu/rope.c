// fast/cpu RoPE (rotate-half), with an optional precomputed cos/sin table
// (phax/fcpu_rope.h; semantics: ref/rope.c).
#include "ops_internal.h"

static int rope_check(const char *who, int dh, int T) {
    if (dh <= 0 || dh % 2) return phax_fail("%s: head dim %d must be even and positive", who, dh);
    if (T < 0) return phax_fail("%s: T = %d is negative", who, T);
    return PHAX_OK;
}

// cos/sin of position p for i < half: ref's expressions exactly, rounded to float.
static inline void rope_row(float *c, float *s, double p, int half, int dh, double base) {
    for (int i = 0; i < half; i++) {
        double theta = pow(base, -2.0 * i / dh);
        c[i] = (float)cos(p * theta);
        s[i] = (float)sin(p * theta);
    }
}

size_t fcpu_rope_table_len(int T, int dh) { return (size_t)(T > 0 ? T : 0) * (size_t)dh; }

int fcpu_rope_table(float *cs, int T, int dh, double base, long pos0) {
    if (rope_check("fcpu_rope_table", dh, T)) return PHAX_ERR;
    int half = dh / 2;
    size_t off = (size_t)T * half;
#pragma omp parallel for schedule(static) if ((size_t)T * half >= 1024)
    for (int t = 0; t < T; t++)
        rope_row(&cs[(size_t)t * half], &cs[off + (size_t)t * half], (double)(pos0 + t), half, dh,
                 base);
    return PHAX_OK;
}

// y = R x (sign +1, overwrite) or y += Rᵀ x (sign −1, accumulate).
static void rope_apply(float *y, const float *x, int B, int T, int H, int dh, double base,
                       long pos0, const float *cs, int inverse) {
    int half = dh / 2;
    size_t rows = (size_t)B * T, toff = (size_t)T * half;
#pragma omp parallel if (rows * H * dh >= PAR_MIN)
    {
        float cbuf[cs ? 1 : half], sbuf[cs ? 1 : half];
#pragma omp for schedule(static)
        for (size_t bt = 0; bt < rows; bt++) {
            int t = (int)(bt % (size_t)T);
            const float *c, *s;
            if (cs) {
                c = &cs[(size_t)t * half];
                s = &cs[toff + (size_t)t * half];
            } else {
                rope_row(cbuf, sbuf, (double)(pos0 + t), half, dh, base);
                c = cbuf, s = sbuf;
            }
            for (int h = 0; h < H; h++) {
                size_t o = (bt * H + h) * dh;
                const float *restrict x1 = &x[o], *restrict x2 = &x[o + half];
                float *restrict y1 = &y[o], *restrict y2 = &y[o + half];
                if (!inverse) {
#pragma omp simd
                    for (int i = 0; i < half; i++) {
                        float a = x1[i], b = x2[i];
                        y1[i] = a * c[i] - b * s[i];
                        y2[i] = b * c[i] + a * s[i];
                    }
                } else {
#pragma omp simd
                    for (int i = 0; i < half; i++) {
                        float a = x1[i], b = x2[i];
                        y1[i] += a * c[i] + b * s[i];
                        y2[i] += b * c[i] - a * s[i];
                    }
                }
            }
        }
    }
}

int fcpu_rope_fwd(float *y, const float *x, int B, int T, int H, int dh, double base, long pos0,
                  const float *cs) {
    if (rope_check("fcpu_rope_fwd", dh, T)) return PHAX_ERR;
    rope_apply(y, x, B, T, H, dh, base, pos0, cs, 0);
    return PHAX_OK;
}

int fcpu_rope_bwd(float *dx, const float *dy, int B, int T, int H, int dh, double base, long pos0,
                  const float *cs) {
    if (rope_check("fcpu_rope_bwd", dh, T)) return PHAX_ERR;
    rope_apply(dx, dy, B, T, H, dh, base, pos0, cs, 1);
    return PHAX_OK;
}
