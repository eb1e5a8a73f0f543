// float32 naive baseline of cross-entropy (baseline_f32.h): a plain transcription of ref's formula.
#include <math.h>

#include "baseline_f32.h"

static float b32_lse(const float *x, int V) {
    float mx = -INFINITY, s = 0;
    for (int j = 0; j < V; j++) mx = x[j] > mx ? x[j] : mx;
    for (int j = 0; j < V; j++) s += expf(x[j] - mx);
    return mx + logf(s);
}
static size_t b32_count(const int32_t *t, size_t n) {
    size_t c = 0;
    for (size_t r = 0; r < n; r++) c += t[r] >= 0;
    return c;
}
float b32_ce_fwd(const float *logits, const int32_t *t, size_t n, int V) {
    float s = 0;
    for (size_t r = 0; r < n; r++)
        if (t[r] >= 0) s += b32_lse(&logits[r * V], V) - logits[r * V + t[r]];
    return s / (float)b32_count(t, n);
}
void b32_ce_bwd(float *dl, float dloss, const float *logits, const int32_t *t, size_t n,
                      int V) {
    float g = dloss / (float)b32_count(t, n);
    for (size_t r = 0; r < n; r++) {
        if (t[r] < 0) continue;
        float lse = b32_lse(&logits[r * V], V);
        for (int j = 0; j < V; j++)
            dl[r * V + j] += g * (expf(logits[r * V + j] - lse) - (j == t[r]));
    }
}
