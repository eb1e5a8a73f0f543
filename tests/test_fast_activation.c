// fast tiers vs ref: GELU (exact erf form) and SiLU, forward and backward, on every backend
// (tests/fast_ops.h: the bound, C and the floor; ref/activation.c: the truth).
#include <stdio.h>

#include "fast_ops.h"
#include "phax/ref.h"

// --- activations ---------------------------------------------------------------------------------

// x ~ 3·N(0,1), plus fixed points in the tails and at 0.
static float *act_input(size_t n, phax_rng *r) {
    float *x = h_frand(n, r, 3.0);
    const float special[] = {0.0f, -0.0f, 30.0f, -30.0f, 9.5f, -9.5f, 88.0f, -88.0f, 1e-20f};
    for (size_t i = 0; i < 9 && i < n; i++) x[n - 1 - i] = special[i];
    return x;
}

typedef struct {
    size_t n;
    int op;  // 0 GELU, 1 SiLU
} act_case;

// n 1, 7, 129·257, 100003 × (GELU, SiLU).
static int act_cases(act_case *cs) {
    const size_t NS[] = {1, 7, 129 * 257, 100003};
    int k = 0;
    for (int i = 0; i < 4; i++)
        for (int op = 0; op < 2; op++) cs[k++] = (act_case){NS[i], op};
    return k;
}

H_TEST(activation, gelu_silu) {
    phax_rng r = tu_rng("activation/gelu_silu");
    act_case cs[MAXCASES];
    int nc = act_cases(cs);
    for (int c = 0; c < nc; c++) {
            size_t n = cs[c].n;
            int op = cs[c].op;
            char label[64];
            snprintf(label, sizeof label, "%s n=%zu", op ? "silu" : "gelu", n);
            float *x = act_input(n, &r), *y = tu_fbuf(n), *yn = tu_fbuf(n), *dy = h_frand(n, &r, 1.0);
            double *xd = h_todbl(x, n), *yr = tu_buf(n), *dyd = h_todbl(dy, n);
            grad3 dx = g3_new(n, &r, 1.0);
            if (op == 0) {
                be->activation.gelu_fwd(y, x, n), b32_gelu_fwd(yn, x, n), ref_gelu_fwd(yr, xd, n);
                be->activation.gelu_bwd(dx.f, dy, x, n), b32_gelu_bwd(dx.nv, dy, x, n);
                ref_gelu_bwd(dx.r, dyd, xd, n);
            } else {
                be->activation.silu_fwd(y, x, n), b32_silu_fwd(yn, x, n), ref_silu_fwd(yr, xd, n);
                be->activation.silu_bwd(dx.f, dy, x, n), b32_silu_bwd(dx.nv, dy, x, n);
                ref_silu_bwd(dx.r, dyd, xd, n);
            }
            BOUND_FWD(label, "y", y, yn, yr, n);
            cr_expect(g3_check(label, "dx", &dx));
            // Elementwise too, so that a bad tail element cannot hide in the norm.
            // The float argument (−x/√2 for erfc, −|x| for exp) carries one
            // rounding, which the function amplifies by its relative condition
            // number κ(x) ≤ 2 + x² (erfc(u): ≈ 2u² = x² in the left tail; SiLU:
            // ≈ 1 + |x| for x ≪ 0); with libmvec's ≤ 4 ulp and the products,
            // 8·2^-24·(2 + x²)·|ref| + 1e-37 (far below FLT_MIN·x for subnormal
            // outputs) bounds every element.
            double *tol = tu_buf(n);
            for (size_t i = 0; i < n; i++) {
                double xi = x[i];
                tol[i] = 8 * H_U32 * (2 + xi * xi) * fabs(yr[i]) + 1e-37;
            }
            double ew = h_elem_worst(H_F(y), yr, tol, n);
            if (!(ew <= 1.0))  // name the first element out of its bound
                for (size_t i = 0; i < n; i++)
                    if (!(fabs(y[i] - yr[i]) <= tol[i])) {
                        cr_expect(0, "%s: y[%zu] = %.9g for x = %.9g, ref %.17g", label, i, y[i],
                                  x[i], yr[i]);
                        break;
                    }
            cr_expect(ew <= 1.0, "%s: elementwise err/tol %.3g (seed %llu)", label, ew,
                      (unsigned long long)tu_base_seed());
            tu_free(tol);
            cr_expect(tu_fintact(x) && tu_fintact(y) && tu_fintact(yn) && tu_fintact(dy));
            g3_free(&dx), tu_ffree(x), tu_ffree(y), tu_ffree(yn), tu_ffree(dy);
            tu_free(xd), tu_free(yr), tu_free(dyd);
        }
    h_report_worst("gelu/silu");
}
