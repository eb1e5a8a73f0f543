// fast/cpu softplus mix of branch outputs (phax/fcpu_mix.h; semantics: ref/mix.c).
#include "ops_internal.h"
#include "phax/numerics.h"

static void mix_weights_d(double *w, double *S, const float *p, int nb) {
    double s = 0;
    for (int i = 0; i < nb; i++) s += (w[i] = phax_softplus(p[i]));
    for (int i = 0; i < nb; i++) w[i] /= s;
    *S = s;
}

// w: (nb) = the weights in double, rounded to float once.
static void mix_weights(float *w, const float *p, int nb) {
    double wd[nb > 0 ? nb : 1], S;
    mix_weights_d(wd, &S, p, nb);
    for (int i = 0; i < nb; i++) w[i] = (float)wd[i];
}

void fcpu_mix_fwd(float *m, const float *b, const float *p, int nb, size_t n) {
    float w[nb > 0 ? nb : 1];
    mix_weights(w, p, nb);
    size_t nblk = (n + EW_BLOCK - 1) / EW_BLOCK;
#pragma omp parallel for schedule(static) if (n * (size_t)(nb + 1) >= PAR_MIN)
    for (size_t blk = 0; blk < nblk; blk++) {
        size_t e0 = blk * EW_BLOCK, e1 = e0 + EW_BLOCK < n ? e0 + EW_BLOCK : n;
        float *restrict mm = m;
        if (nb <= 0) {
            for (size_t e = e0; e < e1; e++) mm[e] = 0.0f;
            continue;
        }
        // s = 0 + w0 b0 + w1 b1 + ..., in ref's order.
        const float *restrict b0 = b;
        float w0 = w[0];
#pragma omp simd
        for (size_t e = e0; e < e1; e++) mm[e] = w0 * b0[e];
        for (int i = 1; i < nb; i++) {
            const float *restrict bi = &b[(size_t)i * n];
            float wi = w[i];
#pragma omp simd
            for (size_t e = e0; e < e1; e++) mm[e] += wi * bi[e];
        }
    }
}

void fcpu_mix_bwd(float *db, float *dp, const float *dm, const float *b, const float *p, int nb,
                  size_t n) {
    if (nb <= 0 || (!db && !dp)) return;
    double wd[nb], S;
    mix_weights_d(wd, &S, p, nb);
    float w[nb];
    for (int i = 0; i < nb; i++) w[i] = (float)wd[i];
    int maxt = omp_get_max_threads(), nt_used = 1;
    double part[maxt][nb];  // per-thread partial dots, summed in thread order
#pragma omp parallel num_threads(maxt) if (n * (size_t)nb >= PAR_MIN)
    {
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
#pragma omp single
        nt_used = nt;
        size_t e0 = part_lo(n, nt, id), e1 = part_lo(n, nt, id + 1);
        for (int i = 0; i < nb; i++) {
            const float *restrict bi = &b[(size_t)i * n];
            const float *restrict g = dm;
            double s = 0;
            if (dp) {
#pragma omp simd reduction(+ : s)
                for (size_t e = e0; e < e1; e++) s += (double)g[e] * bi[e];
            }
            part[id][i] = s;
            if (db) {
                float *restrict dbi = &db[(size_t)i * n];
                float wi = w[i];
#pragma omp simd
                for (size_t e = e0; e < e1; e++) dbi[e] += wi * g[e];
            }
        }
    }
    if (!dp) return;
    double dw[nb], wdw = 0;
    for (int i = 0; i < nb; i++) {
        double s = 0;
        for (int t = 0; t < nt_used; t++) s += part[t][i];
        dw[i] = s;
        wdw += wd[i] * s;
    }
    for (int i = 0; i < nb; i++)
        dp[i] = (float)((double)dp[i] + phax_sigmoid(p[i]) * (dw[i] - wdw) / S);
}
