// phax check: the linear map y = x Wᵀ + b and its gradients as a straightforward implementation
// at precision `pr` computes them: naive matmuls in the formula's order, every input and every
// operation rounded. Not ref, not fast/. Outputs are overwritten. docs/spec.md §2.2.

#include "phax/check.h"
#include "naive.h"

#define R(x) PHAX_CHECK_R(pr, (x))
#define RM(x) PHAX_CHECK_RM(pr, (x))

int phax_naive_linear(const phax_precision *pr, double *y, double *dx, double *dW, double *db, const double *gy,
                      const double *x, const double *W, const double *b, size_t n, int in, int out) {
    mm(pr, y, x, (size_t)in, 1, W, 1, (size_t)in, n, (size_t)out, (size_t)in);  // x Wᵀ
    if (b)
        for (size_t r = 0; r < n; r++)
            for (int o = 0; o < out; o++) y[r * out + o] = R(y[r * out + o] + R(b[o]));
    mm(pr, dx, gy, (size_t)out, 1, W, (size_t)in, 1, n, (size_t)in, (size_t)out);       // gy W
    mm(pr, dW, gy, 1, (size_t)out, x, (size_t)in, 1, (size_t)out, (size_t)in, n);       // gyᵀ x
    if (db)
        for (int o = 0; o < out; o++) {
            double s = 0;
            for (size_t r = 0; r < n; r++) s = R(s + R(gy[r * out + o]));
            db[o] = s;
        }
    return PHAX_OK;
}
