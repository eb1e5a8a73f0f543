// ref AdamW (Loshchilov & Hutter 2019): decoupled weight decay, bias-corrected
// moments, and global-norm gradient clipping in the PyTorch convention.
#include <math.h>

#include "phax/ref.h"

int ref_adamw_step(ref_adamw_param *ps, int nparams, const phax_adamw_cfg *c, long step,
                   double *gnorm) {
    if (phax_adamw_cfg_check(c, step)) return PHAX_ERR;
    // Global norm over every gradient: one clipping coefficient for all tensors.
    double ss = 0;
    for (int j = 0; j < nparams; j++)
        for (size_t i = 0; i < ps[j].n; i++) ss += ps[j].g[i] * ps[j].g[i];
    double norm = sqrt(ss);
    if (gnorm) *gnorm = norm;
    if (!isfinite(norm)) return phax_fail("adamw: gradient norm is %g (step %ld)", norm, step);
    // torch.nn.utils.clip_grad_norm_: coefficient clip/(norm + 1e-6), applied only if < 1.
    double coef = 1.0;
    if (c->clip > 0 && c->clip / (norm + 1e-6) < 1.0) coef = c->clip / (norm + 1e-6);
    double bc1 = 1.0 - pow(c->beta1, (double)step), bc2 = 1.0 - pow(c->beta2, (double)step);
    for (int j = 0; j < nparams; j++) {
        ref_adamw_param *p = &ps[j];
        double decay = p->decay ? c->lr * c->weight_decay : 0.0;
        for (size_t i = 0; i < p->n; i++) {
            double g = coef * p->g[i];
            p->p[i] -= decay * p->p[i];  // decoupled: p ← p − lr·wd·p, before the Adam update
            p->m[i] = c->beta1 * p->m[i] + (1 - c->beta1) * g;
            p->v[i] = c->beta2 * p->v[i] + (1 - c->beta2) * g * g;
            double mhat = p->m[i] / bc1, vhat = p->v[i] / bc2;
            p->p[i] -= c->lr * mhat / (sqrt(vhat) + c->eps);
        }
    }
    return PHAX_OK;
}
