// fast/cpu embedding: float32 lookup and its scatter-add backward (phax/fcpu_embedding.h;
// semantics: ref/embedding.c).
#include "ops_internal.h"

int fcpu_embedding_fwd(float *x, const float *E, const int32_t *tok, size_t n, int V, int d) {
    if (d < 0) return phax_fail("fcpu_embedding_fwd: width d = %d is negative", d);
    for (size_t t = 0; t < n; t++)
        if (tok[t] < 0 || tok[t] >= V)
            return phax_fail("fcpu_embedding_fwd: token id %ld at index %zu is outside [0, %d)",
                             (long)tok[t], t, V);
#pragma omp parallel for schedule(static) if (n * (size_t)d >= PAR_MIN)
    for (size_t t = 0; t < n; t++)
        memcpy(&x[t * d], &E[(size_t)tok[t] * d], (size_t)d * sizeof(float));
    return PHAX_OK;
}

// Each thread owns a block of columns and walks every token in order: no
// atomics, and each element sums in token order whatever the thread count.
void fcpu_embedding_bwd(float *dE, const float *dx, const int32_t *tok, size_t n, int d) {
    if (!dE || d <= 0) return;
#pragma omp parallel if (n * (size_t)d >= PAR_MIN)
    {
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
        // Column blocks aligned to 16 floats (one cache line).
        size_t nblk = ((size_t)d + 15) / 16;
        size_t j0 = part_lo(nblk, nt, id) * 16, j1 = part_lo(nblk, nt, id + 1) * 16;
        if (j1 > (size_t)d) j1 = d;
        for (size_t t = 0; t < n && j0 < j1; t++) {
            float *restrict row = &dE[(size_t)tok[t] * d];
            const float *restrict src = &dx[t * d];
            for (size_t j = j0; j < j1; j++) row[j] += src[j];
        }
    }
}
