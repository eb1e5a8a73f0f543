// ref activations: GELU (exact erf form), SiLU, and the stable scalar helpers
// σ, softplus and logσ that other families (mlstm, mix, swiglu) build on.
#include <math.h>

#include "phax/ref.h"

// σ(z) without overflow: exp is only ever taken of −|z| ≤ 0, so it lies in (0, 1].
double ref_sigmoid(double z) {
    if (z >= 0) return 1.0 / (1.0 + exp(-z));
    double e = exp(z);  // z < 0 (a NaN z also lands here and propagates)
    return e / (1.0 + e);
}

// log(1 + e^z) = max(z, 0) + log1p(e^{−|z|}): no overflow for large z, and
// log1p keeps full relative accuracy for large negative z, where the value is ≈ e^z.
double ref_softplus(double z) {
    double pos = z > 0 ? z : 0.0;
    return pos + log1p(exp(-fabs(z)));  // a NaN z propagates through the log1p term
}

// log σ(z) = −softplus(−z) = min(z, 0) − log1p(e^{−|z|}).
double ref_logsigmoid(double z) {
    double neg = z < 0 ? z : 0.0;
    return neg - log1p(exp(-fabs(z)));
}

// Φ(z), the standard normal CDF. erfc rather than 1 + erf keeps relative
// accuracy in the left tail, where 1 + erf(z/√2) would cancel.
static double normal_cdf(double z) { return 0.5 * erfc(-z / sqrt(2.0)); }

// φ(z), the standard normal density.
static double normal_pdf(double z) {
    static const double inv_sqrt_2pi = 0.39894228040143267794;  // 1/√(2π)
    return inv_sqrt_2pi * exp(-0.5 * z * z);
}

// y, x: (n)    y = x Φ(x)
void ref_gelu_fwd(double *y, const double *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = x[i] * normal_cdf(x[i]);
}

// dx, dy, x: (n)    dx += dy (Φ(x) + x φ(x))
void ref_gelu_bwd(double *dx, const double *dy, const double *x, size_t n) {
    if (!dx) return;
    for (size_t i = 0; i < n; i++) dx[i] += dy[i] * (normal_cdf(x[i]) + x[i] * normal_pdf(x[i]));
}

// y, x: (n)    y = x σ(x)
void ref_silu_fwd(double *y, const double *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = x[i] * ref_sigmoid(x[i]);
}

// dx, dy, x: (n)    dx += dy σ(x) (1 + x (1 − σ(x)))
// 1 − σ(x) is taken as σ(−x) so it keeps relative accuracy for large x.
void ref_silu_bwd(double *dx, const double *dy, const double *x, size_t n) {
    if (!dx) return;
    for (size_t i = 0; i < n; i++) {
        double s = ref_sigmoid(x[i]);
        dx[i] += dy[i] * s * (1.0 + x[i] * ref_sigmoid(-x[i]));
    }
}
