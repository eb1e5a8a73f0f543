// float32 naive baseline of AdamW (baseline_f32.h): a plain transcription of ref's formula.
#include <math.h>

#include "baseline_f32.h"

// AdamW in float32 (the norm too), as a plain transcription of ref.
void b32_adamw(h_adamw_param *ps, int np, const phax_adamw_cfg *c, long step,
                     float *gnorm) {
    float ss = 0;
    for (int j = 0; j < np; j++)
        for (size_t i = 0; i < ps[j].n; i++) ss += ps[j].g[i] * ps[j].g[i];
    float norm = sqrtf(ss), clip = (float)c->clip, coef = 1.0f;
    *gnorm = norm;
    if (clip > 0 && clip / (norm + 1e-6f) < 1.0f) coef = clip / (norm + 1e-6f);
    float b1 = (float)c->beta1, b2 = (float)c->beta2, lr = (float)c->lr;
    float bc1 = 1.0f - powf(b1, (float)step), bc2 = 1.0f - powf(b2, (float)step);
    for (int j = 0; j < np; j++) {
        h_adamw_param *p = &ps[j];
        float decay = p->decay ? lr * (float)c->weight_decay : 0.0f;
        for (size_t i = 0; i < p->n; i++) {
            float g = coef * p->g[i];
            p->p[i] -= decay * p->p[i];
            p->m[i] = b1 * p->m[i] + (1 - b1) * g;
            p->v[i] = b2 * p->v[i] + (1 - b2) * g * g;
            p->p[i] -= lr * (p->m[i] / bc1) / (sqrtf(p->v[i] / bc2) + (float)c->eps);
        }
    }
}
