// ref cross-entropy: known values, stability, ignored rows, gradients, bad targets.
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "phax/ref.h"
#include "testutil.h"

static const double EPS = 0x1p-52;

Test(cross_entropy, fwd_known) {
    // Row 0: logits (0, 0), target 0: log 2.  Row 1: (0, ln 3), target 1: −log(3/4).
    // Row 2: ignored (−1), whatever its logits (NaN-free but huge).
    double *x = tu_buf(6), loss = NAN;
    double xv[] = {0, 0, 0, log(3.0), 1e300, -1e300};
    memcpy(x, xv, sizeof xv);
    int32_t tg[] = {0, 1, -1};
    cr_assert(ref_cross_entropy_fwd(&loss, x, tg, 3, 2) == PHAX_OK);
    double want = (log(2.0) - log(0.75)) / 2;
    cr_assert(fabs(loss - want) <= 16 * EPS, "loss %.17g want %.17g", loss, want);
    // Large logits: the max shift keeps it finite. (1000, 0), target 1: loss ≈ 1000.
    double big[] = {1000, 0};
    int32_t t1[] = {1};
    cr_assert(ref_cross_entropy_fwd(&loss, big, t1, 1, 2) == PHAX_OK);
    cr_assert(fabs(loss - 1000.0) <= 1e-12 * 1000, "loss %g", loss);
    tu_free(x);
}

Test(cross_entropy, bad_targets) {
    double x[4] = {0, 0, 0, 0}, loss;
    int32_t tg[] = {0, 2};
    cr_assert(ref_cross_entropy_fwd(&loss, x, tg, 2, 2) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "target 2 at row 1") != NULL, "%s", phax_error());
    int32_t tn[] = {-2, 0};
    cr_assert(ref_cross_entropy_fwd(&loss, x, tn, 2, 2) == PHAX_ERR);
    int32_t ti[] = {-1, -1};
    cr_assert(ref_cross_entropy_fwd(&loss, x, ti, 2, 2) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "ignored") != NULL, "%s", phax_error());
    cr_assert(ref_cross_entropy_bwd(x, 1.0, x, tg, 2, 2) == PHAX_ERR);
}

typedef struct {
    size_t n;
    int V;
    int32_t *tg;
    double dloss;
    double *x, *dx;
} ce_ctx;

static double ce_loss(void *v) {
    ce_ctx *c = v;
    double l = NAN;
    if (ref_cross_entropy_fwd(&l, c->x, c->tg, c->n, c->V)) return NAN;
    return c->dloss * l;
}

static void ce_bwd(void *v) {
    ce_ctx *c = v;
    cr_assert(ref_cross_entropy_bwd(c->dx, c->dloss, c->x, c->tg, c->n, c->V) == PHAX_OK);
}

// 7 rows (one ignored), V = 11, a random upstream scalar; logits of scale 3.
Test(cross_entropy, grad) {
    phax_rng r = tu_rng("cross_entropy/grad");
    ce_ctx c = {.n = 7, .V = 11};
    int32_t tg[7];
    for (int i = 0; i < 7; i++) tg[i] = (int32_t)phax_rng_below(&r, 11);
    tg[3] = -1;
    c.tg = tg;
    c.dloss = phax_rng_uniform_range(&r, 0.5, 2.0) * (phax_rng_uniform(&r) < 0.5 ? -1 : 1);
    c.x = tu_buf(77), c.dx = tu_buf(77);
    tu_fill_normal(c.x, 77, &r, 3.0);
    tu_tensor ts[] = {{"logits", c.x, c.dx, 77}};
    tu_op op = {ce_loss, ce_bwd, NULL, &c};
    tu_gc_opts o = tu_gc_default();
    o.max_elems = 77;
    cr_assert(tu_gradcheck("cross_entropy/grad", op, ts, 1, &r, &o));
    // The ignored row gets no gradient at all; counted rows' gradients sum to 0.
    tu_fill(c.dx, 77, 0.0);
    ce_bwd(&c);
    for (int j = 0; j < 11; j++) cr_assert(c.dx[3 * 11 + j] == 0.0);
    double s = 0;
    for (int j = 0; j < 11; j++) s += c.dx[j];
    cr_assert(fabs(s) <= 64 * EPS, "row sum %g", s);
    tu_free(c.x), tu_free(c.dx);
}
