// phax check: the GSS/SSM convolution as a straightforward implementation at precision
// `pr` computes it: plain loops, every input and operation rounded. Not ref, not fast/.
#include <math.h>
#include <string.h>

#include "phax/check.h"
#include "round.h"

#define R(x) PHAX_CHECK_R(pr, (x))
#define RM(x) PHAX_CHECK_RM(pr, (x))

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

// --- the DSS kernel, complex numbers as (re, im) pairs, every real operation rounded ------------
typedef struct {
    double re, im;
} cx;

static cx cmul(const phax_precision *pr, cx a, cx b) {
    return (cx){R(R(a.re * b.re) - R(a.im * b.im)), R(R(a.re * b.im) + R(a.im * b.re))};
}
// The same as a matrix product's term (tf32: the operands rounded to its 11 bits).
static cx cmul_mm(const phax_precision *pr, cx a, cx b) {
    return (cx){R(R(RM(a.re) * RM(b.re)) - R(RM(a.im) * RM(b.im))), R(R(RM(a.re) * RM(b.im)) + R(RM(a.im) * RM(b.re)))};
}
static cx cadd(const phax_precision *pr, cx a, cx b) { return (cx){R(a.re + b.re), R(a.im + b.im)}; }
static cx csub(const phax_precision *pr, cx a, cx b) { return (cx){R(a.re - b.re), R(a.im - b.im)}; }
static cx cdiv(const phax_precision *pr, cx a, cx b) {
    double den = R(R(b.re * b.re) + R(b.im * b.im));
    return (cx){R(R(R(a.re * b.re) + R(a.im * b.im)) / den), R(R(R(a.im * b.re) - R(a.re * b.im)) / den)};
}
// e^{λ l} = e^{l Re λ}(cos(l Im λ) + i sin(l Im λ)), the angle formed in the precision.
static cx cexp_l(const phax_precision *pr, cx lam, double l) {
    double r = R(exp(R(l * lam.re))), th = R(l * lam.im);
    return (cx){R(r * R(cos(th))), R(r * R(sin(th)))};
}

// k (H, T) = Re Σ_n C_hn A(λ_n) e^{λ_n l}, A(λ) = (e^λ − 1)/λ, λ_n = −e^{Λre} + i e^{Λim}; the
// gradients of Λ and C from dk (every output overwritten). A and A' = (e^λ − A)/λ are the
// textbook quotients, with the cancellation they have at small |λ|.
int phax_naive_dss_kernel(const phax_precision *pr, double *k, double *dLre, double *dLim, double *dCre,
                          double *dCim, const double *dk, const double *Lre, const double *Lim, const double *Cre,
                          const double *Cim, int H, int N, int T) {
    for (size_t i = 0; i < (size_t)H * T; i++) k[i] = 0;
    for (int n = 0; n < N; n++) {
        cx lam = {-R(exp(R(Lre[n]))), R(exp(R(Lim[n])))}, e1 = cexp_l(pr, lam, 1);
        cx A = cdiv(pr, (cx){R(e1.re - 1), e1.im}, lam), Ap = cdiv(pr, csub(pr, e1, A), lam), glam = {0, 0};
        for (int h = 0; h < H; h++) {
            size_t hn = (size_t)h * N + n;
            cx C = {R(Cre[hn]), R(Cim[hn])}, Ct = cmul(pr, C, A), G = {0, 0}, Gp = {0, 0};
            for (int l = 0; l < T; l++) {
                cx e = cexp_l(pr, lam, l);
                // k = C̃·V and G, G' = dk·Vᵀ are matrix products over the Vandermonde V = e^{λ l}
                cx ce = cmul_mm(pr, Ct, e);
                k[(size_t)h * T + l] = R(k[(size_t)h * T + l] + ce.re);
                double g = R(dk[(size_t)h * T + l]), gl = R(g * l);
                G = cadd(pr, G, (cx){R(RM(g) * RM(e.re)), R(RM(g) * RM(e.im))});
                Gp = cadd(pr, Gp, (cx){R(RM(gl) * RM(e.re)), R(RM(gl) * RM(e.im))});
            }
            cx gC = cmul(pr, A, G);
            dCre[hn] = gC.re, dCim[hn] = -gC.im;
            glam = cadd(pr, glam, cmul(pr, C, cadd(pr, cmul(pr, Ap, G), cmul(pr, A, Gp))));
        }
        dLre[n] = R(glam.re * -R(exp(R(Lre[n]))));
        dLim[n] = R(-glam.im * R(exp(R(Lim[n]))));
    }
    return PHAX_OK;
}
