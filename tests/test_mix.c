// ref mix: weights, known values, gradients to branches and mixing logits.
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "phax/ref.h"
#include "testutil.h"

static const double EPS = 0x1p-52;

Test(mix, fwd_known) {
    // p = 0 for all three: equal weights 1/3 (PHA's initial mix).
    double *b = tu_buf(6), *p = tu_buf(3), *m = tu_buf(2);
    double bv[] = {3, 6, 9, 0, -3, 3};
    memcpy(b, bv, sizeof bv);
    tu_fill(p, 3, 0.0);
    ref_mix_fwd(m, b, p, 3, 2);
    // (3 + 9 − 3)/3 = 3, (6 + 0 + 3)/3 = 3; three roundings of values ≤ 9.
    cr_assert(fabs(m[0] - 3) <= 16 * EPS && fabs(m[1] - 3) <= 16 * EPS, "m = %g %g", m[0], m[1]);
    // softplus(p) = (log 2, 1, ...) : p = (0, log(e − 1)) gives softplus = (log 2, 1).
    double w[2], pp[2] = {0.0, log(exp(1.0) - 1.0)};
    ref_mix_weights(w, pp, 2);
    double S = log(2.0) + 1.0;
    cr_assert(fabs(w[0] - log(2.0) / S) <= 8 * EPS && fabs(w[1] - 1.0 / S) <= 8 * EPS);
    // Extreme logits: no overflow, weights still sum to 1 and stay in [0, 1].
    double pe[3] = {-800, 0, 800}, we[3];
    ref_mix_weights(we, pe, 3);
    cr_assert(isfinite(we[0]) && isfinite(we[1]) && isfinite(we[2]));
    cr_assert(fabs(we[0] + we[1] + we[2] - 1.0) <= 4 * EPS);
    cr_assert(we[2] > 0.99 && we[0] >= 0);
    cr_assert(tu_intact(m));
    tu_free(b), tu_free(p), tu_free(m);
}

typedef struct {
    int nb;
    size_t n;
    double *b, *p, *m, *dm, *db, *dp;
} mix_ctx;

static double mix_loss(void *v) {
    mix_ctx *c = v;
    tu_poison(c->m, c->n);
    ref_mix_fwd(c->m, c->b, c->p, c->nb, c->n);
    return tu_dot(c->m, c->dm, c->n);
}

static void mix_bwd(void *v) {
    mix_ctx *c = v;
    ref_mix_bwd(c->db, c->dp, c->dm, c->b, c->p, c->nb, c->n);
}

static void mix_case(const char *label, int nb, size_t n) {
    phax_rng r = tu_rng(label);
    mix_ctx c = {.nb = nb, .n = n};
    c.b = tu_buf(nb * n), c.p = tu_buf(nb), c.m = tu_buf(n), c.dm = tu_buf(n);
    c.db = tu_buf(nb * n), c.dp = tu_buf(nb);
    tu_fill_normal(c.b, nb * n, &r, 1.0);
    tu_fill_normal(c.p, nb, &r, 1.5);
    tu_fill_normal(c.dm, n, &r, 1.0);
    tu_tensor ts[] = {{"b", c.b, c.db, nb * n}, {"p", c.p, c.dp, (size_t)nb}};
    tu_op op = {mix_loss, mix_bwd, NULL, &c};
    cr_assert(tu_gradcheck(label, op, ts, 2, &r, NULL));
    tu_free(c.b), tu_free(c.p), tu_free(c.m), tu_free(c.dm), tu_free(c.db), tu_free(c.dp);
}

// Three branches (GSS, attention, joined FFN), odd element count.
Test(mix, grad_3) { mix_case("mix/grad_3", 3, 35); }
// Four branches (separate FFN mixing).
Test(mix, grad_4) { mix_case("mix/grad_4", 4, 9); }
// One branch: w = 1 whatever p, so dp must be 0.
Test(mix, grad_1) { mix_case("mix/grad_1", 1, 5); }
