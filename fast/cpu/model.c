// fast/cpu models: creation and parameter access (the family runners are in
// model_pha.c and model_swax.c; the workspace in model_ws.c).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "phax/fcpu_model.h"

int fcpu_model_new(fcpu_model *m, const phax_model_cfg *cfg, uint64_t seed) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    if (phax_model_cfg_resolve(&m->cfg)) return PHAX_ERR;
    if (phax_layout_build(&m->layout, &m->cfg)) return PHAX_ERR;
    size_t n = m->layout.numel;
    double *p64 = phax_alloc(n * sizeof(double));
    m->params = phax_alloc(n * sizeof(float));
    m->grads = phax_alloc(n * sizeof(float));
    int rc = PHAX_ERR;
    // Initialise in float64 exactly as ref does, then round once.
    if (p64 && m->params && m->grads && !phax_model_init(p64, &m->layout, &m->cfg, seed)) {
        fcpu_model_set_params_f64(m, p64);
        rc = PHAX_OK;
    }
    phax_free(p64);
    if (rc) fcpu_model_free(m);
    return rc;
}

void fcpu_model_free(fcpu_model *m) {
    phax_free(m->params);
    phax_free(m->grads);
    phax_layout_free(&m->layout);
    memset(m, 0, sizeof *m);
}

float *fcpu_model_param(const fcpu_model *m, const char *name) {
    int i = phax_layout_find(&m->layout, name);
    return i < 0 ? NULL : m->params + m->layout.p[i].offset;
}

float *fcpu_model_grad(const fcpu_model *m, const char *name) {
    int i = phax_layout_find(&m->layout, name);
    return i < 0 ? NULL : m->grads + m->layout.p[i].offset;
}

void fcpu_model_zero_grad(fcpu_model *m) { memset(m->grads, 0, m->layout.numel * sizeof(float)); }

void fcpu_model_set_params_f64(fcpu_model *m, const double *params) {
    for (size_t i = 0; i < m->layout.numel; i++) m->params[i] = (float)params[i];
}
