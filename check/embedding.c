// phax check: the embedding lookup and its scatter-sum gradient at precision `pr`. Not ref,
// not fast/. Outputs are overwritten. docs/spec.md §2.1.
#include <string.h>

#include "phax/check.h"
#include "naive.h"

#define R(x) PHAX_CHECK_R(pr, (x))
#define RM(x) PHAX_CHECK_RM(pr, (x))

int phax_naive_embedding(const phax_precision *pr, double *y, double *dE, const double *gy, const double *E,
                         const int32_t *tok, size_t n, int V, int d) {
    memset(dE, 0, (size_t)V * d * sizeof *dE);
    for (size_t r = 0; r < n; r++)
        for (int j = 0; j < d; j++) {
            y[r * d + j] = R(E[(size_t)tok[r] * d + j]);
            dE[(size_t)tok[r] * d + j] = R(dE[(size_t)tok[r] * d + j] + R(gy[r * d + j]));
        }
    return PHAX_OK;
}
