// fast tiers vs ref: the embedding lookup (a gather: exact) and its scatter-sum gradient, on every backend
// (tests/fast_ops.h: the bound, C and the floor; ref/embedding.c: the truth).
#include <stdio.h>
#include <string.h>

#include <omp.h>

#include "fast_ops.h"
#include "phax/ref.h"

// --- embedding -----------------------------------------------------------------------------------

typedef struct {
    size_t n;
    int V, d;
} emb_case;

// V 11 and 1000 × rows 3, 21, 387 (tokens repeat when V = 11) × DIMS.
static int embedding_cases(emb_case *cs) {
    const int Vs[] = {11, 1000};
    int k = 0;
    for (int vi = 0; vi < 2; vi++)
        for (int ri = 0; ri < 3; ri++)
            for (int di = 0; di < 4; di++) cs[k++] = (emb_case){ROWS[ri] * 3, Vs[vi], DIMS[di]};
    return k;
}

H_TEST(embedding, matches_ref) {
    phax_rng r = tu_rng("embedding/matches_ref");
    emb_case cs[MAXCASES];
    int nc = embedding_cases(cs);
    for (int c = 0; c < nc; c++) {
                int V = cs[c].V, d = cs[c].d;
                size_t n = cs[c].n;
                char label[96];
                snprintf(label, sizeof label, "embedding n=%zu V=%d d=%d", n, V, d);
                int32_t *tok = malloc(n * sizeof *tok);
                for (size_t t = 0; t < n; t++) tok[t] = (int32_t)phax_rng_below(&r, V);
                float *E = h_frand((size_t)V * d, &r, 1.0), *x = tu_fbuf(n * d);
                cr_assert(be->embedding.fwd(x, E, tok, n, V, d) == PHAX_OK);
                // A gather is exact.
                for (size_t t = 0; t < n; t++)
                    cr_assert(h_fsame(&x[t * d], &E[(size_t)tok[t] * d], d), "%s: row %zu", label, t);
                // Backward: scatter-add into a prior.
                float *dx = h_frand(n * d, &r, 1.0);
                double *dxd = h_todbl(dx, n * d);
                grad3 dE = g3_new((size_t)V * d, &r, 1.0);
                be->embedding.bwd(dE.f, dx, tok, n, d);
                for (size_t t = 0; t < n; t++)
                    for (int j = 0; j < d; j++) dE.nv[(size_t)tok[t] * d + j] += dx[t * d + j];
                ref_embedding_bwd(dE.r, dxd, tok, n, d);
                cr_expect(g3_check(label, "dE", &dE));
                // Same float additions in the same (token) order as naive32: bit-equal.
                cr_expect(h_fsame(dE.f, dE.nv, dE.n), "%s: dE differs from the token-order sum",
                          label);
                cr_expect(tu_fintact(E) && tu_fintact(x) && tu_fintact(dx));
                g3_free(&dE), tu_ffree(E), tu_ffree(x), tu_ffree(dx), tu_free(dxd), free(tok);
            }
    h_report_worst("embedding");
}

H_TEST(embedding, bad_tokens) {
    tu_rng("embedding/bad_tokens");
    int V = 11, d = 5;
    float *E = tu_fbuf((size_t)V * d), *x = tu_fbuf(3 * d);
    for (int i = 0; i < V * d; i++) E[i] = (float)i;
    const int32_t bad[][3] = {{0, 11, 1}, {-1, 0, 0}, {3, 4, 2147483647}};
    for (int k = 0; k < 3; k++) {
        phax_clear_error();
        cr_expect(be->embedding.fwd(x, E, bad[k], 3, V, d) == PHAX_ERR, "case %d accepted", k);
        cr_expect(strstr(phax_error(), "outside") != NULL, "message: %s", phax_error());
        for (int i = 0; i < 3 * d; i++) cr_expect(isnan(x[i]), "x written on failure");
    }
    cr_expect(tu_fintact(E) && tu_fintact(x));
    tu_ffree(E), tu_ffree(x);
}

// --- determinism ---------------------------------------------------------------------------------
// The embedding's gradient (a scatter-sum with column ownership) has the same bits with the
// default number of threads and with 1, tokens repeated many times.
H_TEST(embedding, deterministic) {
    phax_rng r = tu_rng("embedding/deterministic");
    size_t n = 1000;
    int d = 256, V = 300;
    float *dy = h_frand(n * d, &r, 1.0), *out[2];
    int32_t *tok = malloc(n * 4);
    for (size_t i = 0; i < n; i++) tok[i] = (int32_t)(i * 7 % V);
    int nthreads = omp_get_max_threads();
    for (int rep = 0; rep < 2; rep++) {
        if (rep == 1) omp_set_num_threads(1);
        out[rep] = tu_fbuf((size_t)V * d);
        memset(out[rep], 0, (size_t)V * d * 4);
        be->embedding.bwd(out[rep], dy, tok, n, d);
    }
    omp_set_num_threads(nthreads);
    cr_expect(h_fsame(out[0], out[1], (size_t)V * d), "embedding dE differs between thread counts");
    cr_expect(tu_fintact(out[0]) && tu_fintact(out[1]));
    tu_ffree(out[0]), tu_ffree(out[1]), tu_ffree(dy), free(tok);
}
