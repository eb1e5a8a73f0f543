// fast tiers vs ref: the linear map y = x Wᵀ + b and its gradients, on every backend
// (tests/fast_ops.h: the bound, C and the floor; ref/linear.c: the truth).
#include <stdio.h>

#include "fast_ops.h"
#include "phax/ref.h"

// --- linear --------------------------------------------------------------------------------------

typedef struct {
    size_t n;
    int in, out, bias;
} lin_case;

// One linear case: forward, the three gradients into priors, single-gradient calls.
static void linear_case(const h_backend *be, const lin_case *c, phax_rng *rng) {
    size_t n = c->n;
    int in = c->in, out = c->out, bias = c->bias;
    phax_rng r = *rng;
    char label[96];
    snprintf(label, sizeof label, "linear n=%zu %d->%d%s", n, in, out, bias ? " +b" : "");
    float *x = h_frand(n * in, &r, 1.0), *W = h_frand((size_t)out * in, &r, 1 / sqrt(in));
    float *b = bias ? h_frand(out, &r, 1.0) : NULL;
    double *xd = h_todbl(x, n * in), *Wd = h_todbl(W, (size_t)out * in);
    double *bd = bias ? h_todbl(b, out) : NULL;
    // forward
    float *y = tu_fbuf(n * out), *yn = tu_fbuf(n * out);
    double *yr = tu_buf(n * out);
    be->linear.fwd(y, x, W, b, n, in, out);
    b32_linear_fwd(yn, x, W, b, n, in, out);
    ref_linear_fwd(yr, xd, Wd, bd, n, in, out);
    // magnitudes: the same products on |inputs|
    double *ax = h_dabs(xd, n * in), *aW = h_dabs(Wd, (size_t)out * in);
    double *ab = bias ? h_dabs(bd, out) : NULL, *ymag = h_dzeros(n * out);
    ref_linear_fwd(ymag, ax, aW, ab, n, in, out);
    cr_expect(bound_m(label, "y", y, yn, yr, NULL, ymag, n * out, H_C_FWD));
    // backward into priors
    float *dy = h_frand(n * out, &r, 1.0);
    double *dyd = h_todbl(dy, n * out);
    grad3 dx = g3_new(n * in, &r, 1.0), dW = g3_new((size_t)out * in, &r, 1.0),
          db = g3_new(out, &r, 1.0);
    be->linear.bwd(dx.f, dW.f, db.f, dy, x, W, n, in, out);
    b32_linear_bwd(dx.nv, dW.nv, db.nv, dy, x, W, n, in, out);
    ref_linear_bwd(dx.r, dW.r, db.r, dyd, xd, Wd, n, in, out);
    double *ady = h_dabs(dyd, n * out);
    dx.mag = h_dzeros(dx.n), dW.mag = h_dzeros(dW.n), db.mag = h_dzeros(db.n);
    ref_linear_bwd(dx.mag, dW.mag, db.mag, ady, ax, aW, n, in, out);
    free(ax), free(aW), free(ab), free(ymag), free(ady);
    cr_expect(g3_check(label, "dx", &dx));
    cr_expect(g3_check(label, "dW", &dW));
    cr_expect(g3_check(label, "db", &db));
    // NULL skips: one gradient at a time gives the same bits.
    float *dx1 = h_fcopy(dx.p, dx.n), *dW1 = h_fcopy(dW.p, dW.n), *db1 = h_fcopy(db.p, db.n);
    be->linear.bwd(dx1, NULL, NULL, dy, x, W, n, in, out);
    be->linear.bwd(NULL, dW1, NULL, dy, x, W, n, in, out);
    be->linear.bwd(NULL, NULL, db1, dy, x, W, n, in, out);
    cr_expect(h_fsame(dx1, dx.f, dx.n) && h_fsame(dW1, dW.f, dW.n) && h_fsame(db1, db.f, db.n),
              "%s: single-gradient calls differ", label);
    cr_expect(tu_fintact(x) && tu_fintact(W) && tu_fintact(b) && tu_fintact(y) && tu_fintact(yn) && tu_fintact(dy) &&
              tu_fintact(dx1) && tu_fintact(dW1) && tu_fintact(db1));
    g3_free(&dx), g3_free(&dW), g3_free(&db);
    tu_ffree(x), tu_ffree(W), tu_ffree(b), tu_ffree(y), tu_ffree(yn), tu_ffree(dy), tu_ffree(dx1), tu_ffree(dW1),
        tu_ffree(db1);
    tu_free(xd), tu_free(Wd), tu_free(bd), tu_free(yr), tu_free(dyd);
    *rng = r;
}

// ROWS × (in, out) × bias, and n·out ≥ 2^20 (the bias fill and the db column sum in parallel).
static int linear_cases(lin_case *cs) {
    const int IO[][2] = {{24, 40}, {40, 24}, {64, 257}, {257, 64}, {1, 11}};
    int k = 0;
    for (int ri = 0; ri < 3; ri++)
        for (int io = 0; io < 5; io++)
            for (int bias = 0; bias < 2; bias++)
                cs[k++] = (lin_case){ROWS[ri], IO[io][0], IO[io][1], bias};
    cs[k++] = (lin_case){4100, 24, 257, 1};
    return k;
}

H_TEST(linear, matches_ref) {
    phax_rng r = tu_rng("linear/matches_ref");
    lin_case cs[MAXCASES];
    int nc = linear_cases(cs);
    for (int c = 0; c < nc; c++) linear_case(be, &cs[c], &r);
    h_report_worst("linear");
}
