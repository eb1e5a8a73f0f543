// fast tiers vs ref: the SwiGLU FFN, forward and backward (also the kept-activation forms the
// model runner uses), on every backend
// (tests/fast_ops.h: the bound, C and the floor; ref/ffn.c: the truth).
#include <stdio.h>

#include "fast_ops.h"
#include "phax/ref.h"

// --- SwiGLU --------------------------------------------------------------------------------------

typedef struct {
    size_t n;
    int d, hid;
} swiglu_case;

// ROWS × (d, hid) with hid 40, 171, 683 (not multiples of 16).
static int swiglu_cases(swiglu_case *cs) {
    const int DH[][2] = {{24, 40}, {64, 171}, {40, 683}};
    int k = 0;
    for (int ri = 0; ri < 3; ri++)
        for (int i = 0; i < 3; i++) cs[k++] = (swiglu_case){ROWS[ri], DH[i][0], DH[i][1]};
    return k;
}

H_TEST(ffn, swiglu) {
    phax_rng r = tu_rng("ffn/swiglu");
    swiglu_case cs[MAXCASES];
    int nc = swiglu_cases(cs);
    for (int c = 0; c < nc; c++) {
            size_t n = cs[c].n;
            int d = cs[c].d, hid = cs[c].hid;
            char label[64];
            snprintf(label, sizeof label, "swiglu n=%zu d=%d hid=%d", n, d, hid);
            size_t nw = (size_t)hid * d;
            float *x = h_frand(n * d, &r, 1.0), *Wg = h_frand(nw, &r, 1 / sqrt(d)),
                  *Wu = h_frand(nw, &r, 1 / sqrt(d)), *Wd = h_frand(nw, &r, 1 / sqrt(hid));
            double *xd = h_todbl(x, n * d), *Wgd = h_todbl(Wg, nw), *Wud = h_todbl(Wu, nw),
                   *Wdd = h_todbl(Wd, nw);
            float *y = tu_fbuf(n * d), *yn = tu_fbuf(n * d);
            double *yr = tu_buf(n * d);
            size_t wsz = be->ffn.swiglu_bwd_ws(n, d, hid);
            cr_assert(wsz >= be->ffn.swiglu_fwd_ws(n, d, hid));
            float *ws = tu_fbuf(wsz / sizeof(float));
            cr_assert(be->ffn.swiglu_fwd(y, x, Wg, Wu, Wd, n, d, hid, ws) == PHAX_OK);
            b32_swiglu_fwd(yn, x, Wg, Wu, Wd, n, d, hid);
            cr_assert(ref_swiglu_fwd(yr, xd, Wgd, Wud, Wdd, n, d, hid) == PHAX_OK);
            BOUND_FWD(label, "y", y, yn, yr, n * d);
            float *dy = h_frand(n * d, &r, 1.0);
            double *dyd = h_todbl(dy, n * d);
            grad3 dx = g3_new(n * d, &r, 1.0), dWg = g3_new(nw, &r, 1.0), dWu = g3_new(nw, &r, 1.0),
                  dWd = g3_new(nw, &r, 1.0);
            h_fpoison(ws);
            cr_assert(be->ffn.swiglu_bwd(dx.f, dWg.f, dWu.f, dWd.f, dy, x, Wg, Wu, Wd, n, d, hid,
                                      ws) == PHAX_OK);
            b32_swiglu_bwd(dx.nv, dWg.nv, dWu.nv, dWd.nv, dy, x, Wg, Wu, Wd, n, d, hid);
            cr_assert(ref_swiglu_bwd(dx.r, dWg.r, dWu.r, dWd.r, dyd, xd, Wgd, Wud, Wdd, n, d,
                                     hid) == PHAX_OK);
            cr_expect(g3_check(label, "dx", &dx));
            cr_expect(g3_check(label, "dWg", &dWg));
            cr_expect(g3_check(label, "dWu", &dWu));
            cr_expect(g3_check(label, "dWd", &dWd));
            // NULL gradients are skipped: dx alone gives the same bits.
            float *dx1 = h_fcopy(dx.p, n * d);
            cr_assert(be->ffn.swiglu_bwd(dx1, NULL, NULL, NULL, dy, x, Wg, Wu, Wd, n, d, hid, ws) ==
                      PHAX_OK);
            cr_expect(h_fsame(dx1, dx.f, n * d), "%s: dx-only call differs", label);
            // The kept-activation pair (whole models): same sgemms and elementwise
            // expressions, so the same bits as the pair above, from the same priors.
            float *keep = tu_fbuf(be->ffn.swiglu_keep_len(n, hid)), *yk = tu_fbuf(n * d);
            float *wsk = tu_fbuf(be->ffn.swiglu_bwd_kept_ws(n, d, hid) / sizeof(float));
            float *wsf = tu_fbuf(be->ffn.swiglu_fwd_keep_ws(n, d, hid) / sizeof(float));
            cr_assert(be->ffn.swiglu_fwd_keep(yk, keep, x, Wg, Wu, Wd, n, d, hid, wsf) == PHAX_OK);
            cr_expect(h_fsame(yk, y, n * d), "%s: kept forward differs", label);
            float *dxk = h_fcopy(dx.p, n * d), *dWgk = h_fcopy(dWg.p, nw), *dWuk = h_fcopy(dWu.p, nw),
                  *dWdk = h_fcopy(dWd.p, nw);
            cr_assert(be->ffn.swiglu_bwd_kept(dxk, dWgk, dWuk, dWdk, dy, x, Wg, Wu, Wd, n, d, hid,
                                           keep, wsk) == PHAX_OK);
            cr_expect(h_fsame(dxk, dx.f, n * d) && h_fsame(dWgk, dWg.f, nw) && h_fsame(dWuk, dWu.f, nw) &&
                          h_fsame(dWdk, dWd.f, nw),
                      "%s: kept backward differs", label);
            cr_expect(tu_fintact(keep) && tu_fintact(yk) && tu_fintact(wsk) && tu_fintact(wsf) && tu_fintact(dxk) &&
                      tu_fintact(dWgk) && tu_fintact(dWuk) && tu_fintact(dWdk));
            tu_ffree(keep), tu_ffree(yk), tu_ffree(wsk), tu_ffree(wsf), tu_ffree(dxk), tu_ffree(dWgk), tu_ffree(dWuk), tu_ffree(dWdk);
            cr_expect(tu_fintact(x) && tu_fintact(Wg) && tu_fintact(Wu) && tu_fintact(Wd) && tu_fintact(y) &&
                      tu_fintact(yn) && tu_fintact(ws) && tu_fintact(dy) && tu_fintact(dx1));
            g3_free(&dx), g3_free(&dWg), g3_free(&dWu), g3_free(&dWd);
            tu_ffree(x), tu_ffree(Wg), tu_ffree(Wu), tu_ffree(Wd), tu_ffree(y), tu_ffree(yn), tu_ffree(ws), tu_ffree(dy),
                tu_ffree(dx1);
            tu_free(xd), tu_free(Wgd), tu_free(Wud), tu_free(Wdd), tu_free(yr), tu_free(dyd);
        }
    h_report_worst("swiglu");
}
