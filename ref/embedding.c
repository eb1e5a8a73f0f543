// ref embedding: x_t = E[token_t] (a row gather) and its adjoint, a row scatter-add.
#include "phax/ref.h"

// x: (n, d); E: (V, d); tok: (n)
// Every token is validated before anything is written, so on failure x is left
// exactly as the caller had it (no partially gathered rows); phax_error() names
// the first bad token id and its index.
int ref_embedding_fwd(double *x, const double *E, const int32_t *tok, size_t n, int V, int d) {
    if (d < 0) return phax_fail("ref_embedding_fwd: width d = %d is negative", d);
    for (size_t t = 0; t < n; t++)
        if (tok[t] < 0 || tok[t] >= V)
            return phax_fail("ref_embedding_fwd: token id %ld at index %zu is outside [0, %d)",
                             (long)tok[t], t, V);
    for (size_t t = 0; t < n; t++) {
        const double *row = &E[(size_t)tok[t] * d];
        for (int j = 0; j < d; j++) x[t * d + j] = row[j];
    }
    return PHAX_OK;
}

// dE: (V, d); dx: (n, d); tok: (n)
// dE[tok_t] += dx_t. A token that occurs several times accumulates every row.
void ref_embedding_bwd(double *dE, const double *dx, const int32_t *tok, size_t n, int d) {
    if (!dE) return;
    for (size_t t = 0; t < n; t++) {
        double *row = &dE[(size_t)tok[t] * d];
        for (int j = 0; j < d; j++) row[j] += dx[t * d + j];
    }
}
