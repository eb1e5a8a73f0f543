// ref SwiGLU FFN: a hand-computed case, agreement with a direct per-element
// evaluation, finite-difference gradients for x and all three weights, and NULL
// gradients.
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "phax/ref.h"
#include "testutil.h"

static double *buf_of(const double *v, size_t n) {
    double *p = tu_buf(n);
    memcpy(p, v, n * sizeof *v);
    return p;
}

Test(ffn, swiglu_known) {
    // d = 2, hid = 2, x = [1, 2].
    // Wg = [[1, 0], [0, 0]]  → a = x Wgᵀ = [1, 0]
    //                       → SiLU(a) = [σ(1), 0] = [0.7310585786300049, 0]
    // Wu = [[0, 1], [1, 1]]  → b = x Wuᵀ = [2, 3]
    // h = SiLU(a) ⊙ b = [2σ(1), 0] = [1.4621171572600098, 0]
    // Wd = [[1, 0], [−2, 5]] → y = h Wdᵀ = [h0, −2 h0]
    //                       = [1.4621171572600098, −2.9242343145200195]
    // (the second hidden unit is gated off: its Wu row and Wd column do not matter).
    double xv[] = {1, 2}, Wgv[] = {1, 0, 0, 0}, Wuv[] = {0, 1, 1, 1}, Wdv[] = {1, 0, -2, 5};
    double want[] = {1.4621171572600097585, -2.924234314520019517};
    double *x = buf_of(xv, 2), *Wg = buf_of(Wgv, 4), *Wu = buf_of(Wuv, 4), *Wd = buf_of(Wdv, 4);
    double *y = tu_buf(2);
    ref_swiglu_fwd(y, x, Wg, Wu, Wd, 1, 2, 2);
    // σ(1) from exp and a division (~1.5 ulp), ×1 and ×2 exact, ×(−2) exact: 4ε relative.
    double err = tu_err_ratio(y, want, 2, 0, 4 * DBL_EPSILON);
    cr_assert(err <= 1.0, "y = [%.17g %.17g], err ratio %g", y[0], y[1], err);
    cr_assert(tu_intact(x) && tu_intact(Wg) && tu_intact(Wu) && tu_intact(Wd) && tu_intact(y));
    tu_free(x), tu_free(Wg), tu_free(Wu), tu_free(Wd), tu_free(y);
}

// --- shared random problem --------------------------------------------------------------

typedef struct {
    size_t n;
    int d, hid;
    double *x, *Wg, *Wu, *Wd, *y, *dy, *dx, *dWg, *dWu, *dWd;
} ffn_ctx;

static ffn_ctx ffn_ctx_new(phax_rng *r, size_t n, int d, int hid) {
    ffn_ctx c = {.n = n, .d = d, .hid = hid};
    size_t nx = n * d, nw = (size_t)hid * d;
    c.x = tu_buf(nx), c.y = tu_buf(nx), c.dy = tu_buf(nx), c.dx = tu_buf(nx);
    c.Wg = tu_buf(nw), c.Wu = tu_buf(nw), c.Wd = tu_buf(nw);
    c.dWg = tu_buf(nw), c.dWu = tu_buf(nw), c.dWd = tu_buf(nw);
    // The default init scales (std 1/sqrt(fan_in)), with x ~ N(0, 1.5²) so the
    // gate pre-activations reach SiLU's curved region on both sides.
    tu_fill_normal(c.x, nx, r, 1.5);
    tu_fill_normal(c.Wg, nw, r, 1.0 / sqrt(d));
    tu_fill_normal(c.Wu, nw, r, 1.0 / sqrt(d));
    tu_fill_normal(c.Wd, nw, r, 1.0 / sqrt(hid));
    tu_fill_normal(c.dy, nx, r, 1.0);
    return c;
}

static void ffn_ctx_free(ffn_ctx *c) {
    cr_assert(tu_intact(c->x) && tu_intact(c->y) && tu_intact(c->dy) && tu_intact(c->dx));
    cr_assert(tu_intact(c->Wg) && tu_intact(c->Wu) && tu_intact(c->Wd));
    cr_assert(tu_intact(c->dWg) && tu_intact(c->dWu) && tu_intact(c->dWd));
    tu_free(c->x), tu_free(c->y), tu_free(c->dy), tu_free(c->dx);
    tu_free(c->Wg), tu_free(c->Wu), tu_free(c->Wd);
    tu_free(c->dWg), tu_free(c->dWu), tu_free(c->dWd);
}

// The same function written out per output element, with no shared code:
// y_ik = Σ_j Wd_kj · SiLU(Σ_l Wg_jl x_il) · (Σ_l Wu_jl x_il).
// Both sides sum the same terms in the same order, but the direct form
// evaluates SiLU as a/(1 + e^{−a}); the few-ulp differences in each term are
// summed over hid terms, so |Δy_ik| ≤ 8ε·Σ_j |Wd_kj h_ij| (bounded via the
// per-term magnitude, computed alongside).
Test(ffn, swiglu_matches_direct) {
    phax_rng r = tu_rng("ffn/swiglu_matches_direct");
    ffn_ctx c = ffn_ctx_new(&r, 3, 5, 7);
    ref_swiglu_fwd(c.y, c.x, c.Wg, c.Wu, c.Wd, c.n, c.d, c.hid);
    for (size_t i = 0; i < c.n; i++)
        for (int k = 0; k < c.d; k++) {
            double want = 0, mag = 0;
            for (int j = 0; j < c.hid; j++) {
                double a = 0, b = 0;
                for (int l = 0; l < c.d; l++) {
                    a += c.Wg[(size_t)j * c.d + l] * c.x[i * c.d + l];
                    b += c.Wu[(size_t)j * c.d + l] * c.x[i * c.d + l];
                }
                double term = c.Wd[(size_t)k * c.hid + j] * (a / (1 + exp(-a))) * b;
                want += term;
                mag += fabs(term);
            }
            double err = fabs(c.y[i * c.d + k] - want), tol = 8 * DBL_EPSILON * mag;
            cr_assert(err <= tol, "y[%zu][%d] = %.17g vs direct %.17g (|Δ| %.3e > tol %.3e)", i,
                      k, c.y[i * c.d + k], want, err, tol);
        }
    ffn_ctx_free(&c);
}

// --- finite-difference gradients -------------------------------------------------------

static void ffn_fwd(ffn_ctx *c) {
    tu_poison(c->y, c->n * c->d);
    ref_swiglu_fwd(c->y, c->x, c->Wg, c->Wu, c->Wd, c->n, c->d, c->hid);
}

static double ffn_loss(void *p) {
    ffn_ctx *c = p;
    ffn_fwd(c);
    return tu_dot(c->y, c->dy, c->n * c->d);
}

// Σ |dy ⊙ y|, the rounding scale of the loss.
static double ffn_loss_mag(void *p) {
    ffn_ctx *c = p;
    ffn_fwd(c);
    double s = 0;
    for (size_t i = 0; i < c->n * c->d; i++) s += fabs(c->dy[i] * c->y[i]);
    return s;
}

static void ffn_bwd(void *p) {
    ffn_ctx *c = p;
    ref_swiglu_bwd(c->dx, c->dWg, c->dWu, c->dWd, c->dy, c->x, c->Wg, c->Wu, c->Wd, c->n, c->d,
                   c->hid);
}

static void ffn_grad_case(const char *label, size_t n, int d, int hid) {
    phax_rng r = tu_rng(label);
    ffn_ctx c = ffn_ctx_new(&r, n, d, hid);
    size_t nx = n * d, nw = (size_t)hid * d;
    tu_tensor ts[] = {{"x", c.x, c.dx, nx},
                      {"Wg", c.Wg, c.dWg, nw},
                      {"Wu", c.Wu, c.dWu, nw},
                      {"Wd", c.Wd, c.dWd, nw}};
    tu_op op = {ffn_loss, ffn_bwd, ffn_loss_mag, &c};
    cr_assert(tu_gradcheck(label, op, ts, 4, &r, NULL));
    ffn_ctx_free(&c);
}

// Odd sizes, hid > d (as in a real FFN) and hid < d; n = 1.
Test(ffn, swiglu_grad) { ffn_grad_case("ffn/swiglu_grad", 3, 5, 7); }
Test(ffn, swiglu_grad_single_row) { ffn_grad_case("ffn/swiglu_grad_single_row", 1, 7, 5); }

// A NULL gradient is skipped and does not change the others (same arithmetic,
// so bit-for-bit equal).
Test(ffn, null_grads) {
    phax_rng r = tu_rng("ffn/null_grads");
    ffn_ctx c = ffn_ctx_new(&r, 3, 5, 7);
    size_t nx = c.n * c.d, nw = (size_t)c.hid * c.d;
    double *g[4] = {c.dx, c.dWg, c.dWu, c.dWd};
    size_t len[4] = {nx, nw, nw, nw};
    for (int k = 0; k < 4; k++) tu_fill(g[k], len[k], 0);
    ref_swiglu_bwd(g[0], g[1], g[2], g[3], c.dy, c.x, c.Wg, c.Wu, c.Wd, c.n, c.d, c.hid);
    double *full[4];
    for (int k = 0; k < 4; k++) full[k] = tu_copy(g[k], len[k]);
    for (int only = 0; only < 4; only++) {
        double *a[4] = {NULL, NULL, NULL, NULL};
        a[only] = g[only];
        tu_fill(g[only], len[only], 0);
        ref_swiglu_bwd(a[0], a[1], a[2], a[3], c.dy, c.x, c.Wg, c.Wu, c.Wd, c.n, c.d, c.hid);
        cr_assert(tu_max_abs_diff(g[only], full[only], len[only]) == 0.0,
                  "gradient %d computed alone differs", only);
    }
    for (int k = 0; k < 4; k++) {
        cr_assert(tu_intact(full[k]));
        tu_free(full[k]);
    }
    ffn_ctx_free(&c);
}
