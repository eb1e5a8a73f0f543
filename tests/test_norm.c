// ref norms (rmsnorm, layernorm, headnorm): known values, finite-difference
// gradients for x, g and b, NULL gradients, and the invariances each norm promises.
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "phax/ref.h"
#include "testutil.h"

// A handful of correctly rounded float64 operations on O(1) values: each adds at
// most ε/2 relative error, so 4ε (twice a worst-case chain of ~4 roundings)
// separates rounding from a real error. The eps terms shift these outputs by
// ~1e-8..1e-6 relative, far above the tolerance, so a missing eps fails.
#define KNOWN_RTOL (4 * DBL_EPSILON)
// Expected zeros come out exactly (0·r, or x − μ with x = μ); an atol of the
// smallest normal double demands that and keeps 0/0 out of the error ratio.
#define KNOWN_ATOL DBL_MIN

static double *buf_of(const double *v, size_t n) {
    double *p = tu_buf(n);
    memcpy(p, v, n * sizeof *v);
    return p;
}

Test(norm, rmsnorm_known) {
    // Row 0: x = [3, 4], g = 1: mean(x²) = 12.5, y = [3, 4] / sqrt(12.5 + 1e-6)
    //        = [0.84852810348273356879, 1.1313708046436447584] (40-digit arithmetic).
    // Row 1: x = [0, 0]: y = 0 exactly — eps keeps 0/0 away.
    double xv[] = {3, 4, 0, 0}, gv[] = {1, 1};
    double want[] = {0.84852810348273356879, 1.1313708046436447584, 0, 0};
    double *x = buf_of(xv, 4), *g = buf_of(gv, 2), *y = tu_buf(4);
    ref_rmsnorm_fwd(y, x, g, 2, 2, PHAX_RMSNORM_EPS);
    double err = tu_err_ratio(y, want, 4, KNOWN_ATOL, KNOWN_RTOL);
    cr_assert(err <= 1.0, "y = [%.17g %.17g %.17g %.17g], err ratio %g", y[0], y[1], y[2], y[3],
              err);
    cr_assert(y[2] == 0.0 && y[3] == 0.0, "zero row gave [%g %g]", y[2], y[3]);
    // g = [2, −1] scales each channel: y = [6, −4] / sqrt(12.5 + 1e-6).
    g[0] = 2, g[1] = -1;
    double want2[] = {2 * want[0], -want[1]};  // ×2 and negation are exact
    tu_poison(y, 4);
    ref_rmsnorm_fwd(y, x, g, 1, 2, PHAX_RMSNORM_EPS);
    err = tu_err_ratio(y, want2, 2, KNOWN_ATOL, KNOWN_RTOL);
    cr_assert(err <= 1.0, "y = [%.17g %.17g], err ratio %g", y[0], y[1], err);
    cr_assert(isnan(y[2]) && isnan(y[3]), "n = 1 wrote past its row");
    cr_assert(tu_intact(x) && tu_intact(g) && tu_intact(y));
    tu_free(x), tu_free(g), tu_free(y);
}

Test(norm, layernorm_known) {
    // x = [1, 2, 3]: μ = 2, biased σ² = 2/3, s = sqrt(2/3 + 1e-5), x̂ = [−1, 0, 1]/s,
    // 1/s = 1.224735685908390169.  g = [1, 2, 3], b = 0.5:
    // y = [0.5 − 1/s, 0.5, 0.5 + 3/s] = [−0.724735685908390169, 0.5, 4.174207057725170507].
    // Row 1: x = [4, 4, 4] is constant: x̂ = 0 and y = b exactly.
    double xv[] = {1, 2, 3, 4, 4, 4}, gv[] = {1, 2, 3}, bv[] = {0.5, 0.5, 0.5};
    double want[] = {-0.724735685908390169, 0.5, 4.174207057725170507, 0.5, 0.5, 0.5};
    double *x = buf_of(xv, 6), *g = buf_of(gv, 3), *b = buf_of(bv, 3), *y = tu_buf(6);
    ref_layernorm_fwd(y, x, g, b, 2, 3, PHAX_LAYERNORM_EPS);
    // Adding b to −1/s loses bits of the larger operand: relative to |y| = 0.72
    // that is ~2× the usual error, still within KNOWN_RTOL.
    double err = tu_err_ratio(y, want, 6, KNOWN_ATOL, KNOWN_RTOL);
    cr_assert(err <= 1.0, "y = [%.17g %.17g %.17g | %.17g %.17g %.17g], err ratio %g", y[0],
              y[1], y[2], y[3], y[4], y[5], err);
    // b = NULL: y = g x̂ = [−1.224735685908390169, 0, 3.674207057725170507].
    double want_nb[] = {-1.224735685908390169, 0, 3.674207057725170507};
    tu_poison(y, 6);
    ref_layernorm_fwd(y, x, g, NULL, 1, 3, PHAX_LAYERNORM_EPS);
    err = tu_err_ratio(y, want_nb, 3, KNOWN_ATOL, KNOWN_RTOL);
    cr_assert(err <= 1.0, "no-bias y = [%.17g %.17g %.17g], err ratio %g", y[0], y[1], y[2], err);
    cr_assert(tu_intact(x) && tu_intact(g) && tu_intact(b) && tu_intact(y));
    tu_free(x), tu_free(g), tu_free(b), tu_free(y);
}

Test(norm, headnorm_known) {
    // H = 2, dh = 2: x = [1, 3 | 10, −10], g = [1, 1 | 2, 2].
    // Head 0: μ = 2, σ² = 1, x̂ = [−1, 1]/sqrt(1 + 1e-5) = ∓0.9999950000374996875.
    // Head 1: μ = 0, σ² = 100, y = 2·[10, −10]/sqrt(100 + 1e-5) = ±1.9999999000000075.
    // (A LayerNorm over the whole width 4 would give different values: μ = 1.)
    double xv[] = {1, 3, 10, -10}, gv[] = {1, 1, 2, 2};
    double want[] = {-0.9999950000374996875, 0.9999950000374996875, 1.9999999000000075,
                     -1.9999999000000075};
    double *x = buf_of(xv, 4), *g = buf_of(gv, 4), *y = tu_buf(4);
    ref_headnorm_fwd(y, x, g, 1, 2, 2, PHAX_LAYERNORM_EPS);
    double err = tu_err_ratio(y, want, 4, KNOWN_ATOL, KNOWN_RTOL);
    cr_assert(err <= 1.0, "y = [%.17g %.17g %.17g %.17g], err ratio %g", y[0], y[1], y[2], y[3],
              err);
    // With H = 1 headnorm is LayerNorm without bias: same operations, same bits.
    double *y1 = tu_buf(4);
    ref_headnorm_fwd(y, x, g, 1, 1, 4, PHAX_LAYERNORM_EPS);
    ref_layernorm_fwd(y1, x, g, NULL, 1, 4, PHAX_LAYERNORM_EPS);
    cr_assert(tu_max_abs_diff(y, y1, 4) == 0.0, "H = 1 headnorm differs from layernorm");
    cr_assert(tu_intact(x) && tu_intact(g) && tu_intact(y) && tu_intact(y1));
    tu_free(x), tu_free(g), tu_free(y), tu_free(y1);
}

// --- finite-difference gradients ----------------------------------------------------

typedef enum { RMS, LN, HEAD } norm_kind;

typedef struct {
    norm_kind kind;
    size_t n;
    int d, H, dh, bias;  // d = H·dh for headnorm
    double *x, *g, *b, *y, *dy, *dx, *dg, *db;
} norm_ctx;

static void norm_fwd(norm_ctx *c) {
    tu_poison(c->y, c->n * c->d);
    switch (c->kind) {
    case RMS: ref_rmsnorm_fwd(c->y, c->x, c->g, c->n, c->d, PHAX_RMSNORM_EPS); break;
    case LN:
        ref_layernorm_fwd(c->y, c->x, c->g, c->bias ? c->b : NULL, c->n, c->d,
                          PHAX_LAYERNORM_EPS);
        break;
    case HEAD: ref_headnorm_fwd(c->y, c->x, c->g, c->n, c->H, c->dh, PHAX_LAYERNORM_EPS); break;
    }
}

static double norm_loss(void *p) {
    norm_ctx *c = p;
    norm_fwd(c);
    return tu_dot(c->y, c->dy, c->n * c->d);
}

// Σ |dy ⊙ y|, the rounding scale of the loss.
static double norm_loss_mag(void *p) {
    norm_ctx *c = p;
    norm_fwd(c);
    double s = 0;
    for (size_t i = 0; i < c->n * c->d; i++) s += fabs(c->dy[i] * c->y[i]);
    return s;
}

static void norm_bwd(void *p) {
    norm_ctx *c = p;
    switch (c->kind) {
    case RMS:
        ref_rmsnorm_bwd(c->dx, c->dg, c->dy, c->x, c->g, c->n, c->d, PHAX_RMSNORM_EPS);
        break;
    case LN:
        ref_layernorm_bwd(c->dx, c->dg, c->bias ? c->db : NULL, c->dy, c->x, c->g, c->n, c->d,
                          PHAX_LAYERNORM_EPS);
        break;
    case HEAD:
        ref_headnorm_bwd(c->dx, c->dg, c->dy, c->x, c->g, c->n, c->H, c->dh, PHAX_LAYERNORM_EPS);
        break;
    }
}

static norm_ctx norm_ctx_new(phax_rng *r, norm_kind kind, size_t n, int H, int dh, int bias) {
    int d = H * dh;
    norm_ctx c = {.kind = kind, .n = n, .d = d, .H = H, .dh = dh, .bias = bias};
    c.x = tu_buf(n * d), c.y = tu_buf(n * d), c.dy = tu_buf(n * d), c.dx = tu_buf(n * d);
    c.g = tu_buf(d), c.b = tu_buf(d), c.dg = tu_buf(d), c.db = tu_buf(d);
    // x with a nonzero mean and spread, so centring matters; g away from 1 so a
    // backward that drops g fails; dy random (an all-ones dy would hide terms,
    // e.g. LayerNorm's Σ dx = 0 makes the mean(u) term vanish for g = 1).
    tu_fill_normal(c.x, n * d, r, 1.5);
    for (size_t i = 0; i < n * d; i++) c.x[i] += 0.7;
    tu_fill_normal(c.g, d, r, 0.5);
    for (int j = 0; j < d; j++) c.g[j] += 1.0;
    tu_fill_normal(c.b, d, r, 1.0);
    tu_fill_normal(c.dy, n * d, r, 1.0);
    return c;
}

static void norm_ctx_free(norm_ctx *c) {
    cr_assert(tu_intact(c->y) && tu_intact(c->dy), "guard zone overwritten");
    tu_free(c->x), tu_free(c->y), tu_free(c->dy), tu_free(c->dx);
    tu_free(c->g), tu_free(c->b), tu_free(c->dg), tu_free(c->db);
}

static void norm_grad_case(const char *label, norm_kind kind, size_t n, int H, int dh, int bias) {
    phax_rng r = tu_rng(label);
    norm_ctx c = norm_ctx_new(&r, kind, n, H, dh, bias);
    size_t nx = n * c.d, ng = (size_t)c.d;
    tu_tensor ts[] = {{"x", c.x, c.dx, nx}, {"g", c.g, c.dg, ng}, {"b", c.b, c.db, ng}};
    tu_op op = {norm_loss, norm_bwd, norm_loss_mag, &c};
    cr_assert(tu_gradcheck(label, op, ts, bias ? 3 : 2, &r, NULL));
    norm_ctx_free(&c);
}

// Odd row counts, widths 5 and 7 (not powers of two), and n = 1.
Test(norm, rmsnorm_grad) { norm_grad_case("norm/rmsnorm_grad", RMS, 3, 1, 7, 0); }
Test(norm, rmsnorm_grad_single_row) {
    norm_grad_case("norm/rmsnorm_grad_single_row", RMS, 1, 1, 5, 0);
}
Test(norm, layernorm_grad_bias) { norm_grad_case("norm/layernorm_grad_bias", LN, 5, 1, 7, 1); }
Test(norm, layernorm_grad_nobias) {
    norm_grad_case("norm/layernorm_grad_nobias", LN, 1, 1, 5, 0);
}
// H = 3 heads of dh = 5: g has 15 entries, one per channel.
Test(norm, headnorm_grad) { norm_grad_case("norm/headnorm_grad", HEAD, 3, 3, 5, 0); }
Test(norm, headnorm_grad_single_row) {
    norm_grad_case("norm/headnorm_grad_single_row", HEAD, 1, 2, 7, 0);
}

// A NULL gradient is skipped and does not change the others: the same
// arithmetic runs either way, so the results must match bit for bit.
Test(norm, null_grads) {
    phax_rng r = tu_rng("norm/null_grads");
    for (int kind = RMS; kind <= HEAD; kind++) {
        norm_ctx c = norm_ctx_new(&r, (norm_kind)kind, 3, kind == HEAD ? 3 : 1, 5, kind == LN);
        size_t nx = c.n * c.d, ng = (size_t)c.d;
        tu_fill(c.dx, nx, 0), tu_fill(c.dg, ng, 0), tu_fill(c.db, ng, 0);
        norm_bwd(&c);  // all gradients
        double *dx = tu_copy(c.dx, nx), *dg = tu_copy(c.dg, ng), *db = tu_copy(c.db, ng);
        double *keep_dx = c.dx, *keep_dg = c.dg, *keep_db = c.db;
        for (int only = 0; only < 3; only++) {
            tu_fill(keep_dx, nx, 0), tu_fill(keep_dg, ng, 0), tu_fill(keep_db, ng, 0);
            c.dx = only == 0 ? keep_dx : NULL;
            c.dg = only == 1 ? keep_dg : NULL;
            c.db = only == 2 ? keep_db : NULL;
            if (kind != LN && only == 2) continue;  // only layernorm has a bias
            norm_bwd(&c);
            const double *got = only == 0 ? keep_dx : only == 1 ? keep_dg : keep_db;
            const double *want = only == 0 ? dx : only == 1 ? dg : db;
            size_t len = only == 0 ? nx : ng;
            cr_assert(tu_max_abs_diff(got, want, len) == 0.0, "kind %d, gradient %d alone differs",
                      kind, only);
        }
        c.dx = keep_dx, c.dg = keep_dg, c.db = keep_db;
        cr_assert(tu_intact(dx) && tu_intact(dg) && tu_intact(db));
        tu_free(dx), tu_free(dg), tu_free(db);
        norm_ctx_free(&c);
    }
}

// --- invariances ---------------------------------------------------------------------

// rmsnorm(c·x) = g ⊙ x / sqrt(m + eps/c²) with m = mean(x²), against
// g ⊙ x / sqrt(m + eps) for c = 1: the ratio is sqrt((m + eps)/(m + eps/c²)),
// so |Δy| ≤ |y| · eps/(2m) (first order, the (1 − 1/c²) factor ≤ 1), plus
// rounding: each side is ~5 roundings of ε/2, so 8ε·|y| covers both.
Test(norm, rmsnorm_scale_invariance) {
    phax_rng r = tu_rng("norm/rmsnorm_scale_invariance");
    enum { n = 5, d = 7 };
    double *x = tu_buf(n * d), *cx = tu_buf(n * d), *g = tu_buf(d);
    double *y = tu_buf(n * d), *cy = tu_buf(n * d);
    tu_fill_normal(x, n * d, &r, 1.0);
    tu_fill_normal(g, d, &r, 1.0);
    const double scales[] = {1e3, 3.7e5, 1e100};
    for (int k = 0; k < 3; k++) {
        double c = scales[k];
        for (int i = 0; i < n * d; i++) cx[i] = c * x[i];
        tu_poison(y, n * d), tu_poison(cy, n * d);
        ref_rmsnorm_fwd(y, x, g, n, d, PHAX_RMSNORM_EPS);
        ref_rmsnorm_fwd(cy, cx, g, n, d, PHAX_RMSNORM_EPS);
        for (int i = 0; i < n; i++) {
            double m = 0;
            for (int j = 0; j < d; j++) m += x[i * d + j] * x[i * d + j] / d;
            for (int j = 0; j < d; j++) {
                double yi = y[i * d + j];
                double tol = fabs(yi) * (PHAX_RMSNORM_EPS / (2 * m) + 8 * DBL_EPSILON);
                double err = fabs(cy[i * d + j] - yi);
                cr_assert(err <= tol, "c = %g, row %d col %d: |Δ| = %.3e > tol %.3e", c, i, j, err,
                          tol);
            }
        }
    }
    // With eps = 0 and c a power of two every step scales exactly (squares by
    // c², sqrt by c, the quotient by 1), so the outputs agree bit for bit.
    for (int i = 0; i < n * d; i++) cx[i] = 1024.0 * x[i];
    ref_rmsnorm_fwd(y, x, g, n, d, 0.0);
    ref_rmsnorm_fwd(cy, cx, g, n, d, 0.0);
    cr_assert(tu_max_abs_diff(y, cy, n * d) == 0.0, "eps = 0, c = 1024 not exact");
    cr_assert(tu_intact(x) && tu_intact(cx) && tu_intact(g) && tu_intact(y) && tu_intact(cy));
    tu_free(x), tu_free(cx), tu_free(g), tu_free(y), tu_free(cy);
}

// layernorm(x + s) = layernorm(x) for a constant shift s, and the two-pass
// variance keeps that true at s = 1e6 (E[x²] − μ² would cancel ~12 digits). The
// only error is rounding x + s: |δ| ≤ ulp(s)/2 ≤ s·ε/2 per element, so x − μ is off
// by ≤ s·ε and x̂ = (x − μ)/σ by ≤ s·ε/σ (plus the same relative error in σ),
// so |Δy| ≤ |g|·4·s·ε/σ per row with margin for that second term.
Test(norm, layernorm_shift_invariance) {
    phax_rng r = tu_rng("norm/layernorm_shift_invariance");
    enum { n = 4, d = 7 };
    const double s = 1e6;
    double *x = tu_buf(n * d), *sx = tu_buf(n * d), *g = tu_buf(d), *b = tu_buf(d);
    double *y = tu_buf(n * d), *sy = tu_buf(n * d);
    tu_fill_normal(x, n * d, &r, 1.0);
    tu_fill_normal(g, d, &r, 1.0);
    tu_fill_normal(b, d, &r, 1.0);
    for (int i = 0; i < n * d; i++) sx[i] = x[i] + s;
    ref_layernorm_fwd(y, x, g, b, n, d, PHAX_LAYERNORM_EPS);
    ref_layernorm_fwd(sy, sx, g, b, n, d, PHAX_LAYERNORM_EPS);
    double gmax = tu_max_abs(g, d);
    for (int i = 0; i < n; i++) {
        double mu = 0, var = 0;
        for (int j = 0; j < d; j++) mu += x[i * d + j] / d;
        for (int j = 0; j < d; j++) var += (x[i * d + j] - mu) * (x[i * d + j] - mu) / d;
        double tol = gmax * 4 * s * DBL_EPSILON / sqrt(var) +
                     8 * DBL_EPSILON * tu_max_abs(&y[i * d], d);
        for (int j = 0; j < d; j++) {
            double err = fabs(sy[i * d + j] - y[i * d + j]);
            cr_assert(err <= tol, "row %d col %d: |Δ| = %.3e > tol %.3e", i, j, err, tol);
        }
    }
    cr_assert(tu_intact(x) && tu_intact(sx) && tu_intact(g) && tu_intact(b) && tu_intact(y) &&
              tu_intact(sy));
    tu_free(x), tu_free(sx), tu_free(g), tu_free(b), tu_free(y), tu_free(sy);
}
