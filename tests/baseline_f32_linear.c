// float32 naive baseline of linear (baseline_f32.h): a plain transcription of ref's formula.

#include "baseline_f32.h"

void b32_linear_fwd(float *y, const float *x, const float *W, const float *b, size_t n,
                          int in, int out) {
    for (size_t r = 0; r < n; r++)
        for (int o = 0; o < out; o++) {
            float s = b ? b[o] : 0.0f;
            for (int i = 0; i < in; i++) s += x[r * in + i] * W[(size_t)o * in + i];
            y[r * out + o] = s;
        }
}
void b32_linear_bwd(float *dx, float *dW, float *db, const float *dy, const float *x,
                          const float *W, size_t n, int in, int out) {
    for (size_t r = 0; r < n; r++)
        for (int o = 0; o < out; o++) {
            float g = dy[r * out + o];
            if (db) db[o] += g;
            for (int i = 0; i < in; i++) {
                if (dx) dx[r * in + i] += g * W[(size_t)o * in + i];
                if (dW) dW[(size_t)o * in + i] += g * x[r * in + i];
            }
        }
}
