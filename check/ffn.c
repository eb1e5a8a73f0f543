// phax check: the SwiGLU FFN y = (SiLU(x Wgᵀ) ⊙ x Wuᵀ) Wdᵀ and its gradients at precision `pr`:
// naive matmuls and elementwise loops in the formula's order, every input and operation rounded.
// Not ref, not fast/. Outputs are overwritten. docs/spec.md §2.5.
#include <stdlib.h>

#include "phax/check.h"
#include "naive.h"

#define R(x) PHAX_CHECK_R(pr, (x))
#define RM(x) PHAX_CHECK_RM(pr, (x))

int phax_naive_swiglu(const phax_precision *pr, double *y, double *dx, double *dWg, double *dWu, double *dWd,
                      const double *gy, const double *x, const double *Wg, const double *Wu, const double *Wd,
                      size_t n, int d, int hid) {
    size_t nh = n * (size_t)hid;
    double *a = calloc(nh, sizeof *a), *u = calloc(nh, sizeof *u), *z = calloc(nh, sizeof *z),
           *dz = calloc(nh, sizeof *dz);
    if (!a || !u || !z || !dz) {
        free(a), free(u), free(z), free(dz);
        return phax_fail("check: out of memory (swiglu baseline)");
    }
    mm(pr, a, x, (size_t)d, 1, Wg, 1, (size_t)d, n, (size_t)hid, (size_t)d);  // x Wgᵀ
    mm(pr, u, x, (size_t)d, 1, Wu, 1, (size_t)d, n, (size_t)hid, (size_t)d);  // x Wuᵀ
    for (size_t i = 0; i < nh; i++) {
        double s = R(sigm(a[i]));
        z[i] = R(R(a[i] * s) * u[i]);
    }
    mm(pr, y, z, (size_t)hid, 1, Wd, 1, (size_t)hid, n, (size_t)d, (size_t)hid);     // z Wdᵀ
    mm(pr, dz, gy, (size_t)d, 1, Wd, (size_t)hid, 1, n, (size_t)hid, (size_t)d);     // gy Wd
    mm(pr, dWd, gy, 1, (size_t)d, z, (size_t)hid, 1, (size_t)d, (size_t)hid, n);     // gyᵀ z
    for (size_t i = 0; i < nh; i++) {  // da into a, du into u
        double s = R(sigm(a[i])), sa = R(a[i] * s), dsa = R(s * R(1 + R(a[i] * R(1 - s))));
        double da = R(R(dz[i] * u[i]) * dsa);
        u[i] = R(dz[i] * sa);
        a[i] = da;
    }
    // dx = da Wg + du Wu (two matmuls, then a sum); dWg = daᵀ x; dWu = duᵀ x.
    free(z);
    z = malloc(n * (size_t)d * sizeof *z);
    if (!z) {
        free(a), free(u), free(dz);
        return phax_fail("check: out of memory (swiglu baseline)");
    }
    mm(pr, dx, a, (size_t)hid, 1, Wg, (size_t)d, 1, n, (size_t)d, (size_t)hid);
    mm(pr, z, u, (size_t)hid, 1, Wu, (size_t)d, 1, n, (size_t)d, (size_t)hid);
    for (size_t i = 0; i < n * (size_t)d; i++) dx[i] = R(dx[i] + z[i]);
    mm(pr, dWg, a, 1, (size_t)hid, x, (size_t)d, 1, (size_t)hid, (size_t)d, n);
    mm(pr, dWu, u, 1, (size_t)hid, x, (size_t)d, 1, (size_t)hid, (size_t)d, n);
    free(a), free(u), free(z), free(dz);
    return PHAX_OK;
}
