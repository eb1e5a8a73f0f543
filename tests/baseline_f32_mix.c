// float32 naive baseline of the softplus mix (baseline_f32.h): a plain transcription of ref's formula.
#include <math.h>
#include <stdlib.h>

#include "baseline_f32.h"

static float b32_softplus(float z) { return (z > 0 ? z : 0.0f) + log1pf(expf(-fabsf(z))); }
void b32_mix_fwd(float *m, const float *b, const float *p, int nb, size_t n) {
    float w[nb], S = 0;
    for (int i = 0; i < nb; i++) S += (w[i] = b32_softplus(p[i]));
    for (int i = 0; i < nb; i++) w[i] /= S;
    for (size_t e = 0; e < n; e++) {
        float s = 0;
        for (int i = 0; i < nb; i++) s += w[i] * b[(size_t)i * n + e];
        m[e] = s;
    }
}
void b32_mix_bwd(float *db, float *dp, const float *dm, const float *b, const float *p,
                       int nb, size_t n) {
    float w[nb], dw[nb], S = 0;
    for (int i = 0; i < nb; i++) S += (w[i] = b32_softplus(p[i]));
    for (int i = 0; i < nb; i++) w[i] /= S;
    float wdw = 0;
    for (int i = 0; i < nb; i++) {
        float s = 0;
        for (size_t e = 0; e < n; e++) {
            s += dm[e] * b[(size_t)i * n + e];
            if (db) db[(size_t)i * n + e] += w[i] * dm[e];
        }
        dw[i] = s;
        wdw += w[i] * s;
    }
    if (dp)
        for (int i = 0; i < nb; i++) dp[i] += b32_sigmoid(p[i]) * (dw[i] - wdw) / S;
}
