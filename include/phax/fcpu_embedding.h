// fast/cpu embedding, float32 (fast/cpu/embedding.c; semantics: ref/embedding.c).
// Conventions: phax/fcpu.h; accumulation notes of the small ops: phax/fcpu.h.
#ifndef PHAX_FCPU_EMBEDDING_H
#define PHAX_FCPU_EMBEDDING_H

#include <stddef.h>
#include <stdint.h>

#include "phax/ops.h"

// --- embedding ---------------------------------------------------------------
// x: (n, d) = E[tok]; E: (V, d); tok: (n). A token outside [0, V) fails with
// PHAX_ERR before anything is written.
int fcpu_embedding_fwd(float *x, const float *E, const int32_t *tok, size_t n, int V, int d);
// dE: (V, d) += scatter of dx: (n, d) rows, in token order (parallel over columns).
void fcpu_embedding_bwd(float *dE, const float *dx, const int32_t *tok, size_t n, int d);

#endif
