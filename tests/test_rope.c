// ref rope: known values, the relative-position property, orthogonality, gradients.
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "phax/ref.h"
#include "testutil.h"

static const double EPS = 0x1p-52;  // float64 machine epsilon

Test(rope, fwd_known) {
    // dh = 4, H = 1, position 1: θ = (1, 10000^{-1/2} = 0.01).
    // Pairs (0, 2) rotate by 1 rad, (1, 3) by 0.01 rad.
    double *x = tu_buf(8), *y = tu_buf(8);
    double xv[] = {0, 0, 0, 0, /* t=1: */ 1, 2, 3, 4};
    memcpy(x, xv, sizeof xv);
    cr_assert(ref_rope_fwd(y, x, 1, 2, 1, 4, 10000.0, 0) == PHAX_OK);
    double want[] = {0, 0, 0, 0,
                     1 * cos(1.0) - 3 * sin(1.0), 2 * cos(0.01) - 4 * sin(0.01),
                     3 * cos(1.0) + 1 * sin(1.0), 4 * cos(0.01) + 2 * sin(0.01)};
    // Same operations in the same order up to the angle's pow(): a few ulps of |x| ≤ 4.
    double err = tu_max_abs_diff(y, want, 8);
    cr_assert(err <= 16 * EPS * 8, "max err %g", err);
    // Position 0 is the identity, exactly.
    cr_assert(y[0] == 0 && y[3] == 0);
    cr_assert(ref_rope_fwd(y, x, 1, 1, 2, 4, 10000.0, 0) == PHAX_OK);
    cr_assert(tu_intact(y));
    tu_free(x), tu_free(y);
}

Test(rope, relative_property) {
    // ⟨R_m q, R_n k⟩ = ⟨q, R_{n−m} k⟩ for small and for large positions.
    phax_rng r = tu_rng("rope/relative_property");
    const int dh = 10;  // not a power of two
    double *q = tu_buf(dh), *k = tu_buf(dh), *a = tu_buf(dh), *b = tu_buf(dh), *c = tu_buf(dh);
    long pos[][2] = {{3, 17}, {17, 3}, {0, 0}, {100000, 100005}, {4095, 1}};
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++) {
        tu_fill_normal(q, dh, &r, 1.0);
        tu_fill_normal(k, dh, &r, 1.0);
        long m = pos[i][0], n = pos[i][1];
        cr_assert(ref_rope_fwd(a, q, 1, 1, 1, dh, 1e4, m) == PHAX_OK);
        cr_assert(ref_rope_fwd(b, k, 1, 1, 1, dh, 1e4, n) == PHAX_OK);
        cr_assert(ref_rope_fwd(c, k, 1, 1, 1, dh, 1e4, n - m) == PHAX_OK);
        double lhs = tu_dot(a, b, dh), rhs = tu_dot(q, c, dh);
        // Angles p·θ carry a relative error ε, i.e. an absolute error ε·p
        // radians; the two sides see positions up to m + n. Each term of the dot
        // product is off by ≤ ε·(m+n+2)·|q_i||k_i|: bound by 64·ε·(m+n+2)·‖q‖‖k‖.
        double nq = sqrt(tu_dot(q, q, dh)), nk = sqrt(tu_dot(k, k, dh));
        double tol = 64 * EPS * (double)(labs(m) + labs(n) + 2) * nq * nk;
        cr_assert(fabs(lhs - rhs) <= tol, "m=%ld n=%ld: %.17g vs %.17g (tol %g)", m, n, lhs, rhs, tol);
        // Rotation keeps the norm (orthogonal).
        double na = sqrt(tu_dot(a, a, dh));
        cr_assert(fabs(na - nq) <= 8 * dh * EPS * nq, "norm %g vs %g", na, nq);
    }
    cr_assert(tu_intact(a) && tu_intact(b) && tu_intact(c));
    tu_free(q), tu_free(k), tu_free(a), tu_free(b), tu_free(c);
}

Test(rope, bad_odd_dim) {
    double *x = tu_buf(3), *y = tu_buf(3);
    tu_fill(x, 3, 1.0);
    cr_assert(ref_rope_fwd(y, x, 1, 1, 1, 3, 1e4, 0) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "even") != NULL, "message: %s", phax_error());
    tu_free(x), tu_free(y);
}

typedef struct {
    int B, T, H, dh;
    long pos0;
    double *x, *y, *dy, *dx;
} rope_ctx;

static double rope_loss(void *p) {
    rope_ctx *c = p;
    size_t n = (size_t)c->B * c->T * c->H * c->dh;
    tu_poison(c->y, n);
    ref_rope_fwd(c->y, c->x, c->B, c->T, c->H, c->dh, 1e4, c->pos0);
    return tu_dot(c->y, c->dy, n);
}

static void rope_bwd(void *p) {
    rope_ctx *c = p;
    ref_rope_bwd(c->dx, c->dy, c->B, c->T, c->H, c->dh, 1e4, c->pos0);
}

// Odd T, H = 3, dh = 6 (even, not a power of two), a continued sequence (pos0 = 37).
Test(rope, grad) {
    phax_rng r = tu_rng("rope/grad");
    rope_ctx c = {.B = 2, .T = 5, .H = 3, .dh = 6, .pos0 = 37};
    size_t n = (size_t)c.B * c.T * c.H * c.dh;
    c.x = tu_buf(n), c.y = tu_buf(n), c.dy = tu_buf(n), c.dx = tu_buf(n);
    tu_fill_normal(c.x, n, &r, 1.0);
    tu_fill_normal(c.dy, n, &r, 1.0);
    tu_tensor ts[] = {{"x", c.x, c.dx, n}};
    tu_op op = {rope_loss, rope_bwd, NULL, &c};
    cr_assert(tu_gradcheck("rope/grad", op, ts, 1, &r, NULL));
    tu_free(c.x), tu_free(c.y), tu_free(c.dy), tu_free(c.dx);
}
