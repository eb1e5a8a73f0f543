// ref mix: softplus-normalised mixing of branch outputs (PHA's per-block mixer).
#include "phax/ref.h"

// w: (nb) = softplus(p) / Σ softplus(p). softplus > 0, so the sum never vanishes.
void ref_mix_weights(double *w, const double *p, int nb) {
    double S = 0;
    for (int i = 0; i < nb; i++) S += (w[i] = ref_softplus(p[i]));
    for (int i = 0; i < nb; i++) w[i] /= S;
}

// m: (n) = Σ_i w_i b_i;  b: (nb, n);  p: (nb)
void ref_mix_fwd(double *m, const double *b, const double *p, int nb, size_t n) {
    double w[nb];
    ref_mix_weights(w, p, nb);
    for (size_t e = 0; e < n; e++) {
        double s = 0;
        for (int i = 0; i < nb; i++) s += w[i] * b[(size_t)i * n + e];
        m[e] = s;
    }
}

// db_i += w_i dm;  with dw_i = ⟨dm, b_i⟩ and S = Σ softplus(p):
// dp_i += σ(p_i) (dw_i − Σ_j w_j dw_j) / S   (softplus' = σ)
void ref_mix_bwd(double *db, double *dp, const double *dm, const double *b, const double *p,
                 int nb, size_t n) {
    double w[nb], dw[nb], S = 0;
    for (int i = 0; i < nb; i++) S += ref_softplus(p[i]);
    ref_mix_weights(w, p, nb);
    double wdw = 0;
    for (int i = 0; i < nb; i++) {
        double s = 0;
        for (size_t e = 0; e < n; e++) {
            s += dm[e] * b[(size_t)i * n + e];
            if (db) db[(size_t)i * n + e] += w[i] * dm[e];
        }
        dw[i] = s;
        wdw += w[i] * s;
    }
    if (dp)
        for (int i = 0; i < nb; i++) dp[i] += ref_sigmoid(p[i]) * (dw[i] - wdw) / S;
}
