// ref linear: known values and finite-difference gradients.
#include <criterion/criterion.h>
#include <math.h>

#include "phax/ref.h"
#include "testutil.h"

Test(linear, fwd_known) {
    // x = [[1, 2, 3]], W = [[1, 0, -1], [0.5, 0.5, 0.5]], b = [10, -1]
    // y = [1 - 3 + 10, 0.5*(1+2+3) - 1] = [8, 2]
    double *x = tu_buf(3), *W = tu_buf(6), *b = tu_buf(2), *y = tu_buf(2);
    double xv[] = {1, 2, 3}, Wv[] = {1, 0, -1, 0.5, 0.5, 0.5}, bv[] = {10, -1}, want[] = {8, 2};
    for (int i = 0; i < 3; i++) x[i] = xv[i];
    for (int i = 0; i < 6; i++) W[i] = Wv[i];
    for (int i = 0; i < 2; i++) b[i] = bv[i];
    ref_linear_fwd(y, x, W, b, 1, 3, 2);
    // Exact in binary floating point: small integers and halves.
    cr_assert(tu_max_abs_diff(y, want, 2) == 0.0, "y = [%g, %g]", y[0], y[1]);
    ref_linear_fwd(y, x, W, NULL, 1, 3, 2);
    cr_assert(y[0] == -2.0 && y[1] == 3.0, "no-bias y = [%g, %g]", y[0], y[1]);
    cr_assert(tu_intact(y) && tu_intact(x) && tu_intact(W) && tu_intact(b));
    tu_free(x), tu_free(W), tu_free(b), tu_free(y);
}

typedef struct {
    size_t n;
    int in, out, bias;
    double *x, *W, *b, *y, *dy, *dx, *dW, *db;
} lin_ctx;

static double lin_loss(void *p) {
    lin_ctx *c = p;
    tu_poison(c->y, c->n * c->out);
    ref_linear_fwd(c->y, c->x, c->W, c->bias ? c->b : NULL, c->n, c->in, c->out);
    return tu_dot(c->y, c->dy, c->n * c->out);
}

static void lin_bwd(void *p) {
    lin_ctx *c = p;
    ref_linear_bwd(c->dx, c->dW, c->bias ? c->db : NULL, c->dy, c->x, c->W, c->n, c->in, c->out);
}

static void lin_grad_case(const char *label, size_t n, int in, int out, int bias) {
    phax_rng r = tu_rng(label);
    lin_ctx c = {.n = n, .in = in, .out = out, .bias = bias};
    c.x = tu_buf(n * in), c.W = tu_buf((size_t)out * in), c.b = tu_buf(out);
    c.y = tu_buf(n * out), c.dy = tu_buf(n * out);
    c.dx = tu_buf(n * in), c.dW = tu_buf((size_t)out * in), c.db = tu_buf(out);
    tu_fill_normal(c.x, n * in, &r, 1.0);
    tu_fill_normal(c.W, (size_t)out * in, &r, 1.0 / sqrt(in));
    tu_fill_normal(c.b, out, &r, 1.0);
    tu_fill_normal(c.dy, n * out, &r, 1.0);
    tu_tensor ts[] = {{"x", c.x, c.dx, n * in}, {"W", c.W, c.dW, (size_t)out * in},
                      {"b", c.b, c.db, (size_t)out}};
    tu_op op = {lin_loss, lin_bwd, NULL, &c};
    cr_assert(tu_gradcheck(label, op, ts, bias ? 3 : 2, &r, NULL));
    cr_assert(tu_intact(c.y) && tu_intact(c.dy));
    tu_free(c.x), tu_free(c.W), tu_free(c.b), tu_free(c.y), tu_free(c.dy);
    tu_free(c.dx), tu_free(c.dW), tu_free(c.db);
}

// Odd sizes, out != in, several rows.
Test(linear, grad_bias) { lin_grad_case("linear/grad_bias", 7, 5, 3, 1); }
// Without bias; a single row (n = 1).
Test(linear, grad_nobias) { lin_grad_case("linear/grad_nobias", 1, 9, 13, 0); }
