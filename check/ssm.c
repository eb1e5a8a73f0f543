// phax check: the GSS/SSM convolution as a straightforward implementation at precision
// `pr` computes it: plain loops, every input and operation rounded. Not ref, not fast/.
#include <string.h>

#include "phax/check.h"

#define R(x) phax_round(pr, (x))
#define RM(x) phax_round_mm(pr, (x))

int phax_naive_ssm_conv(const phax_precision *pr, double *y, double *du, double *dk, double *dd, const double *gy,
                        const double *u, const double *k, const double *d, int B, int T, int H) {
    size_t n = (size_t)B * T * H;
    memset(du, 0, n * sizeof *du);
    memset(dk, 0, (size_t)H * T * sizeof *dk);
    memset(dd, 0, (size_t)H * sizeof *dd);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const double *kh = k + (size_t)h * T;
            double dh = R(d[h]);
#define U(t) R(u[((size_t)b * T + (t)) * H + h])
#define G(t) R(gy[((size_t)b * T + (t)) * H + h])
            for (int t = 0; t < T; t++) {
                double s = R(dh * U(t));
                for (int j = 0; j <= t; j++) s = R(s + R(RM(R(kh[t - j])) * RM(U(j))));
                y[((size_t)b * T + t) * H + h] = s;
            }
            for (int s = 0; s < T; s++) {  // du[s] = Σ_{t≥s} k[t−s] g[t] + d g[s]
                double a = R(dh * G(s));
                for (int t = s; t < T; t++) a = R(a + R(RM(R(kh[t - s])) * RM(G(t))));
                du[((size_t)b * T + s) * H + h] = a;
            }
            for (int lag = 0; lag < T; lag++) {  // dk[lag] += Σ_t g[t] u[t − lag]
                double a = dk[(size_t)h * T + lag];
                for (int t = lag; t < T; t++) a = R(a + R(RM(G(t)) * RM(U(t - lag))));
                dk[(size_t)h * T + lag] = a;
            }
            for (int t = 0; t < T; t++) dd[h] = R(dd[h] + R(G(t) * U(t)));
#undef U
#undef G
        }
    return PHAX_OK;
}
