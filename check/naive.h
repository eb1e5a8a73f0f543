// phax check's shared loops (private to check/): a rounded dot product and naive matmul, and
// the logistic functions in double, each baseline rounding their results itself. One copy for
// every baseline file (they had three copies of σ).
#ifndef PHAX_CHECK_NAIVE_H
#define PHAX_CHECK_NAIVE_H

#include <math.h>
#include <stddef.h>

#include "round.h"

// σ(z) and softplus(z) = log(1 + e^z) in double, formed without overflow.
static inline double sigm(double z) { return z >= 0 ? 1 / (1 + exp(-z)) : exp(z) / (1 + exp(z)); }
static inline double softplus(double z) { return z > 0 ? z + log1p(exp(-z)) : log1p(exp(z)); }

// Σ_i a[i·sa]·b[i·sb], left to right, rounded throughout (dot-product operands as a matmul's).
static inline double sdot(const phax_precision *pr, const double *a, size_t sa, const double *b, size_t sb, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        double x = PHAX_CHECK_RM(pr, PHAX_CHECK_R(pr, a[i * sa])), y = PHAX_CHECK_RM(pr, PHAX_CHECK_R(pr, b[i * sb]));
        s = PHAX_CHECK_R(pr, s + PHAX_CHECK_R(pr, x * y));
    }
    return s;
}

// C (m, n) = A·B with A element (i, l) at A[i·ai + l·al] and B (l, j) at B[l·bl + j·bj]: a naive
// matmul with the strides of a transpose where needed.
static inline void mm(const phax_precision *pr, double *C, const double *A, size_t ai, size_t al, const double *Bm,
                      size_t bl, size_t bj, size_t m, size_t n, size_t k) {
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) C[i * n + j] = sdot(pr, A + i * ai, al, Bm + j * bj, bl, k);
}

#endif
