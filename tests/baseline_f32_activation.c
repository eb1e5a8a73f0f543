// float32 naive baseline of GELU and SiLU (baseline_f32.h): a plain transcription of ref's formula.
#include <math.h>

#include "baseline_f32.h"

static float b32_cdf(float z) { return 0.5f * erfcf(-z / sqrtf(2.0f)); }
static float b32_pdf(float z) { return 0.39894228040143267794f * expf(-0.5f * z * z); }
void b32_gelu_fwd(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = x[i] * b32_cdf(x[i]);
}
void b32_gelu_bwd(float *dx, const float *dy, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) dx[i] += dy[i] * (b32_cdf(x[i]) + x[i] * b32_pdf(x[i]));
}
void b32_silu_fwd(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = x[i] * b32_sigmoid(x[i]);
}
void b32_silu_bwd(float *dx, const float *dy, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float s = b32_sigmoid(x[i]);
        dx[i] += dy[i] * s * (1.0f + x[i] * b32_sigmoid(-x[i]));
    }
}
