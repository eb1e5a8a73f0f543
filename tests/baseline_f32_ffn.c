// float32 naive baseline of SwiGLU (baseline_f32.h): a plain transcription of ref's formula.
#include <stdlib.h>

#include "baseline_f32.h"

void b32_swiglu_fwd(float *y, const float *x, const float *Wg, const float *Wu,
                          const float *Wd, size_t n, int d, int hid) {
    size_t m = n * (size_t)hid;
    float *a = malloc(m * 4), *b = malloc(m * 4);
    b32_linear_fwd(a, x, Wg, NULL, n, d, hid);
    b32_linear_fwd(b, x, Wu, NULL, n, d, hid);
    for (size_t i = 0; i < m; i++) a[i] = a[i] * b32_sigmoid(a[i]) * b[i];
    b32_linear_fwd(y, a, Wd, NULL, n, hid, d);
    free(a), free(b);
}
void b32_swiglu_bwd(float *dx, float *dWg, float *dWu, float *dWd, const float *dy,
                          const float *x, const float *Wg, const float *Wu, const float *Wd,
                          size_t n, int d, int hid) {
    size_t m = n * (size_t)hid;
    float *a = malloc(m * 4), *b = malloc(m * 4), *h = malloc(m * 4);
    float *dh = calloc(m, 4), *da = calloc(m, 4), *db = calloc(m, 4);
    b32_linear_fwd(a, x, Wg, NULL, n, d, hid);
    b32_linear_fwd(b, x, Wu, NULL, n, d, hid);
    for (size_t i = 0; i < m; i++) h[i] = a[i] * b32_sigmoid(a[i]) * b[i];
    b32_linear_bwd(dh, dWd, NULL, dy, h, Wd, n, hid, d);
    for (size_t i = 0; i < m; i++) {
        float s = b32_sigmoid(a[i]);
        db[i] = dh[i] * (a[i] * s);
        da[i] = dh[i] * b[i] * (s * (1.0f + a[i] * b32_sigmoid(-a[i])));
    }
    b32_linear_bwd(dx, dWg, NULL, da, x, Wg, n, d, hid);
    b32_linear_bwd(dx, dWu, NULL, db, x, Wu, n, d, hid);
    free(a), free(b), free(h), free(dh), free(da), free(db);
}
