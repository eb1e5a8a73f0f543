// fast tiers vs ref: RoPE (its table, the rotation and its transpose), on every backend
// (tests/fast_ops.h: the bound, C and the floor; ref/rope.c: the truth).
#include <stdio.h>

#include "fast_ops.h"
#include "phax/ref.h"

// --- RoPE ----------------------------------------------------------------------------------------

typedef struct {
    int B, T, H, dh;
    long pos0;
} rope_case;

// B 2 × T 1, 7, 33 × H 1, 3 × dh 2, 24, 40, 64 × pos0 0, 4097, 10⁶.
static int rope_cases(rope_case *cs) {
    const int Ts[] = {1, 7, 33}, Hs[] = {1, 3}, DHs[] = {2, 24, 40, 64};
    const long P0[] = {0, 4097, 1000000};
    int k = 0;
    for (int ti = 0; ti < 3; ti++)
        for (int hi = 0; hi < 2; hi++)
            for (int di = 0; di < 4; di++)
                for (int pi = 0; pi < 3; pi++) cs[k++] = (rope_case){2, Ts[ti], Hs[hi], DHs[di], P0[pi]};
    return k;
}

H_TEST(rope, matches_ref) {
    phax_rng r = tu_rng("rope/matches_ref");
    rope_case rc[MAXCASES];
    int nc = rope_cases(rc);
    for (int c = 0; c < nc; c++) {
                    int B = rc[c].B, T = rc[c].T, H = rc[c].H, dh = rc[c].dh;
                    long pos0 = rc[c].pos0;
                    double base = PHAX_ROPE_BASE;
                    size_t n = (size_t)B * T * H * dh;
                    char label[96];
                    snprintf(label, sizeof label, "rope T=%d H=%d dh=%d pos0=%ld", T, H, dh, pos0);
                    float *x = h_frand(n, &r, 1.0), *y = tu_fbuf(n), *yt = tu_fbuf(n), *yn = tu_fbuf(n);
                    float *cs = tu_fbuf(be->rope.table_len(T, dh));
                    double *xd = h_todbl(x, n), *yr = tu_buf(n);
                    cr_assert(be->rope.table(cs, T, dh, base, pos0) == PHAX_OK);
                    cr_assert(be->rope.fwd(y, x, B, T, H, dh, base, pos0, NULL) == PHAX_OK);
                    cr_assert(be->rope.fwd(yt, x, B, T, H, dh, base, pos0, cs) == PHAX_OK);
                    b32_rope(yn, x, B, T, H, dh, base, pos0, 1.0f, 0);
                    cr_assert(ref_rope_fwd(yr, xd, B, T, H, dh, base, pos0) == PHAX_OK);
                    BOUND_FWD(label, "y", y, yn, yr, n);
                    cr_expect(h_fsame(y, yt, n), "%s: table and on-the-fly differ", label);
                    float *dy = h_frand(n, &r, 1.0);
                    double *dyd = h_todbl(dy, n);
                    grad3 dx = g3_new(n, &r, 1.0);
                    float *dxt = h_fcopy(dx.p, n);
                    cr_assert(be->rope.bwd(dx.f, dy, B, T, H, dh, base, pos0, NULL) == PHAX_OK);
                    cr_assert(be->rope.bwd(dxt, dy, B, T, H, dh, base, pos0, cs) == PHAX_OK);
                    b32_rope(dx.nv, dy, B, T, H, dh, base, pos0, -1.0f, 1);
                    cr_assert(ref_rope_bwd(dx.r, dyd, B, T, H, dh, base, pos0) == PHAX_OK);
                    cr_expect(g3_check(label, "dx", &dx));
                    cr_expect(h_fsame(dx.f, dxt, n), "%s: table and on-the-fly differ (bwd)", label);
                    cr_expect(tu_fintact(x) && tu_fintact(y) && tu_fintact(yt) && tu_fintact(yn) &&
                              tu_fintact(cs) && tu_fintact(dy) && tu_fintact(dxt));
                    g3_free(&dx), tu_ffree(x), tu_ffree(y), tu_ffree(yt), tu_ffree(yn), tu_ffree(cs), tu_ffree(dy),
                        tu_ffree(dxt);
                    tu_free(xd), tu_free(yr), tu_free(dyd);
                }
    // An odd head dim fails everywhere.
    float *x = tu_fbuf(6), *y = tu_fbuf(6), *cs = tu_fbuf(6);
    cr_expect(be->rope.table(cs, 2, 3, 1e4, 0) == PHAX_ERR);
    cr_expect(be->rope.fwd(y, x, 1, 2, 1, 3, 1e4, 0, NULL) == PHAX_ERR);
    cr_expect(be->rope.bwd(y, x, 1, 2, 1, 3, 1e4, 0, NULL) == PHAX_ERR);
    cr_expect(tu_fintact(x) && tu_fintact(y) && tu_fintact(cs));
    tu_ffree(x), tu_ffree(y), tu_ffree(cs);
    h_report_worst("rope");
}
