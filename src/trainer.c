// `phax train`'s model and optimizer on one backend (phax/backend.h): the
// batch buffers, the weight-decay rule, checkpoint parameters and moments in
// and out (src/train.h). Nothing here knows which backend it runs on beyond
// its dtype, which the training state records.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "phax/core.h"
#include "phax/model_plan.h"
#include "dist.h"
#include "train.h"

// Weight decay on 2-D "*.weight" matrices only (see --help).
static int decays(const phax_param_info *p) {
    size_t n = strlen(p->name);
    return p->ndim == 2 && n > 7 && !strcmp(p->name + n - 7, ".weight");
}

void trainer_new(trainer *t, const phax_model_cfg *cfg, const train_opts *o) {
    memset(t, 0, sizeof *t);
    t->be = train_backend(o);
    t->B = o->B, t->T = o->T;
    if (!(t->m = phax_bmodel_new(t->be, cfg, o->seed, NULL))) die_lib();
    t->cfg = *phax_bmodel_cfg(t->m), t->L = phax_bmodel_layout(t->m);
    const phax_layout *L = t->L;
    t->x = phax_alloc((size_t)o->B * o->T * sizeof(int32_t));
    t->y = phax_alloc((size_t)o->B * o->T * sizeof(int32_t));
    if (!t->x || !t->y) die_lib();
    unsigned char *decay = calloc((size_t)L->n, 1);
    if (!decay) die("out of memory");
    for (int i = 0; i < L->n; i++) decay[i] = (unsigned char)decays(&L->p[i]);
    if (phax_bmodel_adamw_init(t->m, decay)) die_lib();
    free(decay);
    int nl = t->cfg.n_layers;
    t->mix_off = calloc((size_t)nl, sizeof(int)), t->mix_nb = calloc((size_t)nl, sizeof(int));
    if (!t->mix_off || !t->mix_nb) die("out of memory");
    for (int l = 0; l < nl; l++) {  // the mix logits of the parallel rule (pha), if any
        phax_block_plan p;
        phax_plan_block(&t->cfg, l, &p);
        if (!p.mix) continue;
        char name[64];
        snprintf(name, sizeof name, "blocks.%d.%s", l, p.mix);
        int k = phax_layout_find(L, name);
        if (k >= 0) t->mix_off[l] = (int)L->p[k].offset, t->mix_nb[l] = (int)L->p[k].numel;
    }
}

void trainer_free(trainer *t) {
    phax_bmodel_free(t->m);
    free(t->mix_off), free(t->mix_nb);
    phax_free(t->x), phax_free(t->y);
}

double trainer_param_at(const trainer *t, size_t i) {
    double v;
    if (phax_bmodel_params_get(t->m, i, 1, PHAX_DT_F64, &v)) die_lib();
    return v;
}

static long count_targets(const int32_t *y, size_t n) {
    long k = 0;
    for (size_t i = 0; i < n; i++) k += y[i] >= 0;
    return k;
}

// Several ranks (src/dist.h): this rank's rows of the global batch; the backend's loss is the
// mean over the k targets of those rows, so its gradient is weighted by k/K (K: the batch's
// targets) before the sum over ranks, which then is the gradient of the mean over all K, as
// one process computes it. A rank without targets adds zeros.
int trainer_grad(trainer *t, int window, double *loss) {
    phax_bmodel_zero_grad(t->m);
    if (dist_size() < 2) return phax_bmodel_backward(t->m, t->x, t->y, t->B, t->T, window, loss);
    int row0, rows;
    dist_rows(t->B, &row0, &rows);
    size_t T = (size_t)t->T, at = (size_t)row0 * T;
    long K = count_targets(t->y, (size_t)t->B * T), k = count_targets(t->y + at, (size_t)rows * T);
    // Every rank holds the whole batch, so all agree on K: with none, all stop as one process
    // does (its cross entropy refuses a batch whose targets are all ignored), before any exchange.
    if (K == 0) return phax_fail("cross_entropy: all %zu targets are ignored (-1)", (size_t)t->B * T);
    double part = 0, l;
    if (k > 0) {
        if (phax_bmodel_backward(t->m, t->x + at, t->y + at, rows, t->T, window, &l)) return PHAX_ERR;
        part = l * (double)k / (double)K;
    }
    int dev;
    void *g = phax_bmodel_grads(t->m, &dev);
    if (!g || dist_allreduce_grads(g, t->L->numel, phax_backend_dtype(t->be), dev,
                                   (double)k / (double)K))
        return PHAX_ERR;
    dist_sum(&part, 1);
    *loss = part;
    return PHAX_OK;
}

int trainer_update(trainer *t, const train_opts *o, double lr, long step1, double *gnorm) {
    phax_adamw_cfg a = {.lr = lr, .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps,
                            .weight_decay = o->wd, .clip = o->clip};
    return phax_bmodel_adamw_step(t->m, &a, step1, gnorm);
}

int trainer_loss(trainer *t, int window, double *loss) {
    return phax_bmodel_forward(t->m, t->x, t->y, t->B, t->T, window, NULL, loss);
}

void *trainer_logits_new(const trainer *t) {
    size_t n = (size_t)t->B * t->T * (size_t)t->cfg.vocab_size;
    void *p = phax_alloc(n * phax_dtype_size(phax_backend_dtype(t->be)));
    if (!p) die_lib();
    return p;
}

double trainer_logit(const trainer *t, const void *logits, size_t i) {
    return phax_backend_dtype(t->be) == PHAX_DT_F64 ? ((const double *)logits)[i]
                                                    : (double)((const float *)logits)[i];
}

int trainer_logits(trainer *t, int window, void *logits, double *loss) {
    return phax_bmodel_forward(t->m, t->x, t->y, t->B, t->T, window, logits, loss);
}

// A float64 backend keeps float64 master parameters in the state (the model file
// holds them rounded to float); a float32 one has the model file's.
void trainer_restore(trainer *t, const phax_ckpt *ck, const phax_ckpt_state *s, const char *sp) {
    if (phax_backend_dtype(t->be) == PHAX_DT_F64) {
        if (s->dtype != PHAX_DT_F64 || !s->master)
            die("%s: the ref backend needs float64 moments and master parameters", sp);
        if (phax_bmodel_params_set(t->m, PHAX_DT_F64, s->master)) die_lib();
    } else {
        if (s->dtype != PHAX_DT_F32) die("%s: the fast backend needs float32 moments", sp);
        if (phax_bmodel_params_set(t->m, PHAX_DT_F32, ck->params)) die_lib();
    }
    if (phax_bmodel_moments_set(t->m, s->m, s->v)) die_lib();
}

void trainer_snapshot(const trainer *t, float **params, phax_ckpt_state *s) {
    size_t n = t->L->numel;
    phax_dtype dt = phax_backend_dtype(t->be);
    size_t es = phax_dtype_size(dt);
    *params = phax_alloc(n * sizeof(float));
    s->dtype = dt;
    s->m = phax_alloc(n * es), s->v = phax_alloc(n * es);
    s->master = dt == PHAX_DT_F64 ? phax_alloc(n * es) : NULL;
    if (!*params || !s->m || !s->v || (dt == PHAX_DT_F64 && !s->master)) die_lib();
    if (phax_bmodel_params_get(t->m, 0, n, PHAX_DT_F32, *params) ||
        phax_bmodel_moments_get(t->m, s->m, s->v) ||
        (s->master && phax_bmodel_params_get(t->m, 0, n, PHAX_DT_F64, s->master)))
        die_lib();
}

void trainer_snapshot_free(float *params, phax_ckpt_state *s) {
    phax_free(params), phax_free(s->m), phax_free(s->v), phax_free(s->master);
    s->m = s->v = s->master = NULL;
}
