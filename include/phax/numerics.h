// phax numerics: small scalar helpers of the fast tiers, usable from C (fast/cpu) and
// from CUDA device code (fast/cuda): each is `static inline` and marked PHAX_HD.
// Plain real arithmetic only (no C99 complex: nvcc has none), in the precision the
// fast kernels use them in (the double forms are those fast/cpu has always used, so
// results stay bit-identical; the float forms likewise).
//
// ref/ keeps its own scalar copies (ref_sigmoid, ... in ref/activation.c and ref/ssm.c):
// the oracle shares no code with what it checks. Only the constants are shared, and
// they are contract (phax/ops.h).
#ifndef PHAX_NUMERICS_H
#define PHAX_NUMERICS_H

#include <float.h>
#include <math.h>

#include "phax/ops.h"

#ifdef __CUDACC__
#define PHAX_HD __host__ __device__
#else
#define PHAX_HD
#endif

// σ(z) without overflow: exp is only ever taken of −|z| ≤ 0. A NaN z propagates.
PHAX_HD static inline double phax_sigmoid(double z) {
    if (z >= 0) return 1.0 / (1.0 + exp(-z));
    double e = exp(z);
    return e / (1.0 + e);
}

// softplus(z) = log(1 + e^z) = max(z, 0) + log1p(e^{−|z|}).
PHAX_HD static inline double phax_softplus(double z) {
    return (z > 0 ? z : 0.0) + log1p(exp(-fabs(z)));
}

// The float forms (the GDN layer's gates and its convolution's SiLU′, fast/cpu/gdn.c and
// fast/cuda/gdn.cu): the same formulations in float.
PHAX_HD static inline float phax_sigmoidf(float z) {
    if (z >= 0) return 1.0f / (1.0f + expf(-z));
    float e = expf(z);
    return e / (1.0f + e);
}
PHAX_HD static inline float phax_softplusf(float z) { return (z > 0 ? z : 0.0f) + log1pf(expf(-fabsf(z))); }

// log σ(z) = min(z, 0) − log1p(e^{−|z|}).
PHAX_HD static inline double phax_logsigmoid(double z) {
    double neg = z < 0 ? z : 0.0;
    return neg - log1p(exp(-fabs(z)));
}

// mLSTM gate soft-cap cap(z) = c·tanh(z/c), c = PHAX_MLSTM_GATE_CAP (docs/spec.md §1.4).
PHAX_HD static inline double phax_gate_cap(double z) {
    return PHAX_MLSTM_GATE_CAP * tanh(z / PHAX_MLSTM_GATE_CAP);
}
PHAX_HD static inline float phax_gate_capf(float z) {
    return (float)PHAX_MLSTM_GATE_CAP * tanhf(z / (float)PHAX_MLSTM_GATE_CAP);
}

// (a + ib)/(c + id) into *x + i·*y: Smith's algorithm with the operation order, the
// power-of-two rescalings and the subnormal-ratio branch of GCC's __divdc3 (libgcc,
// GCC ≥ 12), which C's `double complex` division calls. The rescalings are exact, so on
// finite operands this gives __divdc3's result bit for bit; what it does not copy is
// __divdc3's final recovery of infinities from a NaN + iNaN result (tests/test_numerics.c
// checks the equality on the λ range of the models and at its edges).
PHAX_HD static inline void phax_cdiv(double a, double b, double c, double d, double *x, double *y) {
    const double rbig = DBL_MAX / 2, rmin = DBL_MIN, rmin2 = DBL_EPSILON, rminscal = 1 / DBL_EPSILON;
    const double rmax2 = rbig * rmin2;
    double ratio, denom;
    if (fabs(c) < fabs(d)) {
        if (fabs(d) >= rbig) a /= 2, b /= 2, c /= 2, d /= 2;
        if (fabs(d) < rmin2 || (fabs(a) < rmin && fabs(b) < rmax2 && fabs(d) < rmax2) ||
            (fabs(b) < rmin && fabs(a) < rmax2 && fabs(d) < rmax2))
            a *= rminscal, b *= rminscal, c *= rminscal, d *= rminscal;
        ratio = c / d;
        denom = (c * ratio) + d;
        if (fabs(ratio) > rmin) {
            *x = ((a * ratio) + b) / denom;
            *y = ((b * ratio) - a) / denom;
        } else {
            *x = ((c * (a / d)) + b) / denom;
            *y = ((c * (b / d)) - a) / denom;
        }
    } else {
        if (fabs(c) >= rbig) a /= 2, b /= 2, c /= 2, d /= 2;
        if (fabs(c) < rmin2 || (fabs(a) < rmin && fabs(b) < rmax2 && fabs(c) < rmax2) ||
            (fabs(b) < rmin && fabs(a) < rmax2 && fabs(c) < rmax2))
            a *= rminscal, b *= rminscal, c *= rminscal, d *= rminscal;
        ratio = d / c;
        denom = (d * ratio) + c;
        if (fabs(ratio) > rmin) {
            *x = ((b * ratio) + a) / denom;
            *y = (b - (a * ratio)) / denom;
        } else {
            *x = (a + (d * (b / c))) / denom;
            *y = (b - (d * (a / c))) / denom;
        }
    }
}

// The zero-order-hold factor A(λ) = (e^λ − 1)/λ (Δ = 1) of λ = re + i·im, into *ar + i·*ai
// (docs/spec.md §2.8). Near 0 the series 1 + λ/2 + λ²/6 + λ³/24 (what it leaves out is
// under 1e-18 relative at |λ| < 1e-4); elsewhere
// e^λ − 1 without cancellation, Re = expm1(re) cos(im) − 2 sin²(im/2), divided by λ.
// The same operations, in the same order, as `double complex` code computing it.
PHAX_HD static inline void phax_zoh(double re, double im, double *ar, double *ai) {
    if (hypot(re, im) < 1e-4) {
        double a = re * re - im * im, b = re * im + im * re;  // λ², as (λ·λ)
        *ar = ((1.0 + re / 2.0) + a / 6.0) + (a * re - b * im) / 24.0;
        *ai = (im / 2.0 + b / 6.0) + (a * im + b * re) / 24.0;
        return;
    }
    double s = sin(im / 2.0);
    phax_cdiv(expm1(re) * cos(im) - 2.0 * s * s, exp(re) * sin(im), re, im, ar, ai);
}

// The modes a GSS decoder's recurrence z ← e^{λ} z + u steps with, in double, from one
// layer's parameters (docs/spec.md §2.8): λ_n = −e^{Λre_n} + i e^{Λim_n}, e^{λ_n} =
// e^{Re λ}(cos Im λ + i sin Im λ) into ea: (N, 2), and C̃_hn = C_hn A(λ_n) into ct: (Hs, N, 2).
// lre, lim: (N); cre, cim: (Hs, N). fast/cpu's and fast/cuda's decoders both start from it.
PHAX_HD static inline void phax_gss_modes(const float *lre, const float *lim, const float *cre,
                                          const float *cim, int Hs, int N, double *ea, double *ct) {
    for (int n = 0; n < N; n++) {
        double Ar, Ai;
        phax_zoh(-exp((double)lre[n]), exp((double)lim[n]), &Ar, &Ai);
        const double r = exp(-exp((double)lre[n])), th = exp((double)lim[n]);
        ea[2 * n] = r * cos(th), ea[2 * n + 1] = r * sin(th);
        for (int h = 0; h < Hs; h++) {
            const double cr = cre[(size_t)h * N + n], ci = cim[(size_t)h * N + n];
            double *c = ct + ((size_t)h * N + n) * 2;
            c[0] = cr * Ar - ci * Ai, c[1] = cr * Ai + ci * Ar;
        }
    }
}

#endif
