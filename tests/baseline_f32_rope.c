// float32 naive baseline of RoPE (baseline_f32.h): a plain transcription of ref's formula.
#include <math.h>

#include "baseline_f32.h"

// RoPE: the angle in double as the spec requires on every tier (a float angle
// would be off by ~p·2^-24 rad); cos/sin rounded to float; the rotation in float.
void b32_rope(float *y, const float *x, int B, int T, int H, int dh, double base, long pos0,
                    float sign, int acc) {
    int half = dh / 2;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                size_t off = (((size_t)b * T + t) * H + h) * dh;
                for (int i = 0; i < half; i++) {
                    double th = pow(base, -2.0 * i / dh), p = (double)(pos0 + t);
                    float c = (float)cos(p * th), s = sign * (float)sin(p * th);
                    float x1 = x[off + i], x2 = x[off + i + half];
                    float y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
                    if (acc)
                        y[off + i] += y1, y[off + i + half] += y2;
                    else
                        y[off + i] = y1, y[off + i + half] = y2;
                }
            }
}
