// ref AdamW (Loshchilov & Hutter 2019): decoupled weight decay, bias-corrected
// moments, and global-norm gradient clipping in the PyTorch convention.
#include <math.h>

#include "phax/ref.h"

ref_adamw_cfg ref_adamw_cfg_default(void) {
    ref_adamw_cfg c = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                       .weight_decay = 0.1, .clip = 1.0};
    return c;
}

int ref_adamw_step(ref_adamw_param *ps, int nparams, const ref_adamw_cfg *c, long step,
                   double *gnorm) {
    if (step < 1) return phax_fail("adamw: step %ld must be >= 1", step);
    if (!(c->lr >= 0) || !(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1) ||
        !(c->eps > 0) || !(c->weight_decay >= 0) || !(c->clip >= 0))
        return phax_fail("adamw: bad settings lr=%g betas=(%g, %g) eps=%g wd=%g clip=%g", c->lr,
                         c->beta1, c->beta2, c->eps, c->weight_decay, c->clip);
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
