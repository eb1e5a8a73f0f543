// fast tiers vs ref: RMSNorm, LayerNorm and the per-head RMSNorm, forward and backward, on every backend
// (tests/fast_ops.h: the bound, C and the floor; ref/norm.c: the truth).
#include <stdio.h>
#include <string.h>

#include <omp.h>

#include "fast_ops.h"
#include "phax/ref.h"

// --- norms ---------------------------------------------------------------------------------------

typedef enum { RMS, LN, HEAD } norm_kind;
static const char *norm_name[] = {"rmsnorm", "layernorm", "headnorm"};

// One norm case: forward and both (three) gradients, plus single-gradient calls.
// offset: a common shift of x (LayerNorm's cancellation case).
typedef struct {
    norm_kind kind;
    size_t n;
    int H, dh, bias;
    double offset;
} norm_case_t;

static void norm_case(const h_backend *be, const norm_case_t *c, phax_rng *r) {
    norm_kind kind = c->kind;
    size_t n = c->n;
    int H = c->H, dh = c->dh, bias = c->bias;
    double offset = c->offset;
    int d = H * dh;
    double eps = kind == RMS ? PHAX_RMSNORM_EPS : PHAX_LAYERNORM_EPS;
    char label[128];
    snprintf(label, sizeof label, "%s n=%zu d=%d%s%s off=%g", norm_name[kind], n, d,
             kind == HEAD ? (H == 1   ? " H=1"
                             : H == 2 ? " H=2"
                                      : " H>2")
                          : "",
             bias ? " +b" : "", offset);
    size_t nd = n * d;
    float *x = h_frand(nd, r, 1.0);
    for (size_t i = 0; i < nd; i++) x[i] += (float)offset;
    float *g = h_frand(d, r, 1.0), *b = bias ? h_frand(d, r, 1.0) : NULL;
    double *xd = h_todbl(x, nd), *gd = h_todbl(g, d), *bd = bias ? h_todbl(b, d) : NULL;
    float *y = tu_fbuf(nd), *yn = tu_fbuf(nd);
    double *yr = tu_buf(nd);
    switch (kind) {
        case RMS:
            be->norm.rmsnorm_fwd(y, x, g, n, d, eps);
            b32_rmsnorm_fwd(yn, x, g, n, d, (float)eps);
            ref_rmsnorm_fwd(yr, xd, gd, n, d, eps);
            break;
        case LN:
            be->norm.layernorm_fwd(y, x, g, b, n, d, eps);
            b32_layernorm_fwd(yn, x, g, b, n, d, (float)eps);
            ref_layernorm_fwd(yr, xd, gd, bd, n, d, eps);
            break;
        case HEAD:
            be->norm.headnorm_fwd(y, x, g, n, H, dh, eps);
            b32_headnorm_fwd(yn, x, g, n, H, dh, (float)eps);
            ref_headnorm_fwd(yr, xd, gd, n, H, dh, eps);
            break;
    }
    BOUND_FWD(label, "y", y, yn, yr, nd);

    float *dy = h_frand(nd, r, 1.0);
    double *dyd = h_todbl(dy, nd);
    grad3 dx = g3_new(nd, r, 1.0), dg = g3_new(d, r, 1.0), db = g3_new(d, r, 1.0);
    size_t wsz = kind == RMS  ? be->norm.rmsnorm_bwd_ws(n, d)
                 : kind == LN ? be->norm.layernorm_bwd_ws(n, d)
                              : be->norm.headnorm_bwd_ws(n, H, dh);
    float *ws = tu_fbuf(wsz / sizeof(float) + 1);
    float *dx1 = h_fcopy(dx.p, nd), *dg1 = h_fcopy(dg.p, d), *db1 = h_fcopy(db.p, d);
    switch (kind) {
        case RMS:
            be->norm.rmsnorm_bwd(dx.f, dg.f, dy, x, g, n, d, eps, ws);
            b32_rmsnorm_bwd(dx.nv, dg.nv, dy, x, g, n, d, (float)eps);
            ref_rmsnorm_bwd(dx.r, dg.r, dyd, xd, gd, n, d, eps);
            be->norm.rmsnorm_bwd(dx1, NULL, dy, x, g, n, d, eps, NULL);  // no dg: no ws needed
            be->norm.rmsnorm_bwd(NULL, dg1, dy, x, g, n, d, eps, ws);
            break;
        case LN:
            be->norm.layernorm_bwd(dx.f, dg.f, db.f, dy, x, g, n, d, eps, ws);
            b32_layernorm_bwd(dx.nv, dg.nv, db.nv, dy, x, g, n, d, (float)eps);
            ref_layernorm_bwd(dx.r, dg.r, db.r, dyd, xd, gd, n, d, eps);
            be->norm.layernorm_bwd(dx1, NULL, NULL, dy, x, g, n, d, eps, NULL);
            be->norm.layernorm_bwd(NULL, dg1, NULL, dy, x, g, n, d, eps, ws);
            be->norm.layernorm_bwd(NULL, NULL, db1, dy, x, g, n, d, eps, ws);
            break;
        case HEAD:
            be->norm.headnorm_bwd(dx.f, dg.f, dy, x, g, n, H, dh, eps, ws);
            b32_headnorm_bwd(dx.nv, dg.nv, dy, x, g, n, H, dh, (float)eps);
            ref_headnorm_bwd(dx.r, dg.r, dyd, xd, gd, n, H, dh, eps);
            be->norm.headnorm_bwd(dx1, NULL, dy, x, g, n, H, dh, eps, NULL);
            be->norm.headnorm_bwd(NULL, dg1, dy, x, g, n, H, dh, eps, ws);
            break;
    }
    cr_expect(g3_check(label, "dx", &dx));
    cr_expect(g3_check(label, "dg", &dg));
    if (kind == LN) cr_expect(g3_check(label, "db", &db));
    cr_expect(h_fsame(dx1, dx.f, nd) && h_fsame(dg1, dg.f, d) && (kind != LN || h_fsame(db1, db.f, d)),
              "%s: single-gradient calls differ", label);
    cr_expect(tu_fintact(x) && tu_fintact(g) && tu_fintact(b) && tu_fintact(y) && tu_fintact(yn) && tu_fintact(dy) &&
              tu_fintact(ws) && tu_fintact(dx1) && tu_fintact(dg1) && tu_fintact(db1));
    g3_free(&dx), g3_free(&dg), g3_free(&db);
    tu_ffree(x), tu_ffree(g), tu_ffree(b), tu_ffree(y), tu_ffree(yn), tu_ffree(dy), tu_ffree(ws), tu_ffree(dx1), tu_ffree(dg1),
        tu_ffree(db1);
    tu_free(xd), tu_free(gd), tu_free(bd), tu_free(yr), tu_free(dyd);
}

// The norms' table, by kind: ROWS × widths (× bias for LayerNorm; × heads for HeadNorm),
// more rows than chunks·threads, and a large common offset (x̂ cancels; ref and fast take
// two passes in double).
static int norm_cases(norm_kind kind, norm_case_t *cs) {
    const int HD[][2] = {{1, 24}, {3, 40}, {4, 64}, {2, 257}};
    int k = 0;
    for (int ri = 0; ri < 3; ri++)
        for (int di = 0; di < 4; di++)
            for (int bias = 0; bias < (kind == LN ? 2 : 1); bias++) {
                int H = kind == HEAD ? HD[di][0] : 1, dh = kind == HEAD ? HD[di][1] : DIMS[di];
                cs[k++] = (norm_case_t){kind, ROWS[ri], H, dh, bias, 0.0};
            }
    switch (kind) {
        case RMS:
            cs[k++] = (norm_case_t){RMS, 1000, 1, 256, 0, 0.0};
            cs[k++] = (norm_case_t){RMS, 7, 1, 64, 0, 30.0};
            break;
        case LN:
            cs[k++] = (norm_case_t){LN, 1000, 1, 256, 1, 0.0};
            cs[k++] = (norm_case_t){LN, 129, 1, 257, 1, 100.0};
            break;
        case HEAD:
            cs[k++] = (norm_case_t){HEAD, 1000, 4, 64, 0, 0.0};
            cs[k++] = (norm_case_t){HEAD, 7, 3, 40, 0, 50.0};
            break;
    }
    return k;
}

static void norm_table(const h_backend *be, norm_kind kind, const char *test) {
    phax_rng r = tu_rng(test);
    norm_case_t cs[MAXCASES];
    int nc = norm_cases(kind, cs);
    for (int c = 0; c < nc; c++) norm_case(be, &cs[c], &r);
    h_report_worst(norm_name[kind]);
}

H_TEST(norm, rmsnorm) { norm_table(be, RMS, "norm/rmsnorm"); }

H_TEST(norm, layernorm) { norm_table(be, LN, "norm/layernorm"); }

H_TEST(norm, headnorm) { norm_table(be, HEAD, "norm/headnorm"); }

// --- determinism ---------------------------------------------------------------------------------
// The same inputs give the same bits on repeat, and the norms' gradients do not depend on the
// thread count (fixed row chunks): LayerNorm's backward with the default threads, then with 1.
H_TEST(norm, deterministic) {
    phax_rng r = tu_rng("norm/deterministic");
    size_t n = 1000;
    int d = 256;
    float *x = h_frand(n * d, &r, 1.0), *g = h_frand(d, &r, 1.0), *dy = h_frand(n * d, &r, 1.0);
    float *ws = tu_fbuf(be->norm.layernorm_bwd_ws(n, d) / 4 + 1);
    float *out[2][3];
    int nthreads = omp_get_max_threads();
    for (int rep = 0; rep < 2; rep++) {
        if (rep == 1) omp_set_num_threads(1);
        float **o = out[rep];
        o[0] = tu_fbuf(n * d), o[1] = tu_fbuf(d), o[2] = tu_fbuf(d);
        memset(o[0], 0, n * d * 4), memset(o[1], 0, d * 4), memset(o[2], 0, d * 4);
        be->norm.layernorm_bwd(o[0], o[1], o[2], dy, x, g, n, d, PHAX_LAYERNORM_EPS, ws);
    }
    omp_set_num_threads(nthreads);
    const size_t len[3] = {n * d, (size_t)d, (size_t)d};
    const char *what[3] = {"layernorm dx", "layernorm dg", "layernorm db"};
    for (int k = 0; k < 3; k++) {
        cr_expect(h_fsame(out[0][k], out[1][k], len[k]), "%s differs between thread counts", what[k]);
        cr_expect(tu_fintact(out[0][k]) && tu_fintact(out[1][k]));
        tu_ffree(out[0][k]), tu_ffree(out[1][k]);
    }
    tu_ffree(x), tu_ffree(g), tu_ffree(dy), tu_ffree(ws);
}
