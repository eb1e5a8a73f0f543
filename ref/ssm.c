// ref ssm: the simplified DSS kernel (GSS) and the SSM convolution it feeds,
// in two forms — a direct causal convolution with the materialised kernel,
// and the equivalent diagonal complex recurrence. float64, plain loops.
//
// Complex conventions. λ_n = −exp(Λre_n) + i·exp(Λim_n) and C_hn = Cre + i·Cim.
// Every loss is real and every map we differentiate is holomorphic in its
// complex argument, so a backward pass carries, for each complex quantity w,
// the complex number ḡ_w with δL = Re(ḡ_w δw) (no conjugate). For w = x + i·y
// that gives dL/dx = Re ḡ_w and dL/dy = Re(i ḡ_w) = −Im ḡ_w, and through a
// holomorphic f: ḡ_w += ḡ_f · f'(w).
#include <complex.h>
#include <math.h>
#include <stdlib.h>

#include "phax/ref.h"

#ifndef CMPLX
#define CMPLX(x, y) ((double complex)((double)(x) + _Complex_I * (double)(y)))
#endif

// λ_n from its two real parameters: Re λ < 0 (decay), Im λ > 0 (rotation).
static double complex ssm_lambda(double lre, double lim) { return CMPLX(-exp(lre), exp(lim)); }

// e^{λ l}, formed as exp(l Re λ)(cos θ + i sin θ) with θ = l Im λ computed in
// double: the angle reaches ~1e4 rad for long kernels, and building the power by
// repeated multiplication would accumulate error in the kernel path.
static double complex ssm_exp(double complex lam, double l) {
    double r = exp(l * creal(lam)), th = l * cimag(lam);
    return CMPLX(r * cos(th), r * sin(th));
}

// A(λ) = (e^λ − 1)/λ, the zero-order-hold factor with Δ = 1.
static double complex ssm_zoh(double complex lam) {
    double re = creal(lam), im = cimag(lam);
    // Near 0 the quotient is 0/0-like; the series 1 + λ/2 + λ²/6 + λ³/24 leaves out
    // λ⁴/120 + …, under 1e-18 relative at |λ| < 1e-4 (below half an ulp of 1).
    if (cabs(lam) < 1e-4) return 1.0 + lam / 2.0 + lam * lam / 6.0 + lam * lam * lam / 24.0;
    // e^λ − 1 without cancellation: Re = e^re cos(im) − 1 = expm1(re) cos(im) − 2 sin²(im/2).
    double s = sin(im / 2.0);
    double complex em1 = CMPLX(expm1(re) * cos(im) - 2.0 * s * s, exp(re) * sin(im));
    return em1 / lam;
}

// A'(λ) = (e^λ − A(λ))/λ. The difference loses ~log2(1/|λ|) bits as λ → 0
// (e^λ − A ≈ λ/2), so small |λ| — which the long-memory init produces — uses the
// Taylor series A'(λ) = Σ_j (j+1) λ^j / (j+2)!; at |λ| < 0.5, 18 terms leave a
// remainder below 1e-20.
static double complex ssm_zoh_deriv(double complex lam) {
    if (cabs(lam) < 0.5) {
        double complex s = 0, p = 1;  // p = λ^j
        double f = 2.0;               // (j+2)!
        for (int j = 0; j < 18; j++) {
            s += (j + 1) / f * p;
            p *= lam;
            f *= j + 3;
        }
        return s;
    }
    return (ssm_exp(lam, 1.0) - ssm_zoh(lam)) / lam;
}

// --- dss kernel ------------------------------------------------------------------------

// K: (H, T); Lre, Lim: (N); Cre, Cim: (H, N).  K_h[l] = Re Σ_n C_hn A(λ_n) e^{λ_n l}.
void ref_dss_kernel_fwd(double *K, const double *Lre, const double *Lim, const double *Cre,
                        const double *Cim, int H, int N, int T) {
    for (size_t i = 0; i < (size_t)H * T; i++) K[i] = 0.0;
    for (int n = 0; n < N; n++) {
        double complex lam = ssm_lambda(Lre[n], Lim[n]), A = ssm_zoh(lam);
        for (int l = 0; l < T; l++) {
            double complex e = ssm_exp(lam, l);
            for (int h = 0; h < H; h++) {
                size_t hn = (size_t)h * N + n;
                double complex Ct = CMPLX(Cre[hn], Cim[hn]) * A;  // C̃_hn
                K[(size_t)h * T + l] += creal(Ct * e);
            }
        }
    }
}

// dK: (H, T); dLre, dLim: (N); dCre, dCim: (H, N); any gradient may be NULL.
// L = Σ dK ⊙ K = Re Σ_hn C_hn A(λ_n) G_hn with G_hn = Σ_l dK[h,l] e^{λ_n l}, so
// ḡ_C = A G and ḡ_λ = Σ_h C (A' G + A G'), G' = dG/dλ = Σ_l dK[h,l] l e^{λ l}.
void ref_dss_kernel_bwd(double *dLre, double *dLim, double *dCre, double *dCim, const double *dK,
                        const double *Lre, const double *Lim, const double *Cre, const double *Cim,
                        int H, int N, int T) {
    for (int n = 0; n < N; n++) {
        double complex lam = ssm_lambda(Lre[n], Lim[n]);
        double complex A = ssm_zoh(lam), Ap = ssm_zoh_deriv(lam);
        double complex glam = 0;  // ḡ_λn, summed over channels (λ is shared)
        for (int h = 0; h < H; h++) {
            size_t hn = (size_t)h * N + n;
            double complex G = 0, Gp = 0;
            for (int l = 0; l < T; l++) {
                double complex e = ssm_exp(lam, l);
                double g = dK[(size_t)h * T + l];
                G += g * e;
                Gp += (g * l) * e;
            }
            double complex gC = A * G;
            if (dCre) dCre[hn] += creal(gC);
            if (dCim) dCim[hn] -= cimag(gC);
            glam += CMPLX(Cre[hn], Cim[hn]) * (Ap * G + A * Gp);
        }
        // λre = −exp(Λre), λim = exp(Λim).
        if (dLre) dLre[n] += creal(glam) * -exp(Lre[n]);
        if (dLim) dLim[n] += -cimag(glam) * exp(Lim[n]);
    }
}

// --- ssm conv: direct causal convolution ---------------------------------------------------

// y, u: (B, T, H) channels last; K: (H, T); D: (H).
// y[b,t,h] = Σ_{s≤t} K[h,t−s] u[b,s,h] + D[h] u[b,t,h].
void ref_ssm_conv_fwd(double *y, const double *u, const double *K, const double *D, int B, int T,
                      int H) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                const double *ub = u + (size_t)b * T * H;
                double s = D[h] * ub[(size_t)t * H + h];
                for (int j = 0; j <= t; j++) s += K[(size_t)h * T + (t - j)] * ub[(size_t)j * H + h];
                y[((size_t)b * T + t) * H + h] = s;
            }
}

// du: (B, T, H); dK: (H, T); dD: (H); any may be NULL.
// du[b,s,h] += Σ_{t≥s} K[h,t−s] dy[b,t,h] + D[h] dy[b,s,h]  (the transposed, anti-causal conv)
// dK[h,l]  += Σ_b Σ_{t≥l} dy[b,t,h] u[b,t−l,h];   dD[h] += Σ_{b,t} dy[b,t,h] u[b,t,h].
void ref_ssm_conv_bwd(double *du, double *dK, double *dD, const double *dy, const double *u,
                      const double *K, const double *D, int B, int T, int H) {
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const double *ub = u + (size_t)b * T * H + h;  // ub[t*H] = u[b,t,h]
            const double *gb = dy + (size_t)b * T * H + h;
            for (int t = 0; t < T; t++) {
                double g = gb[(size_t)t * H];
                if (dD) dD[h] += g * ub[(size_t)t * H];
                if (du) du[((size_t)b * T + t) * H + h] += D[h] * g;
                for (int j = 0; j <= t; j++) {  // output t reads input j at lag t − j
                    if (du) du[((size_t)b * T + j) * H + h] += K[(size_t)h * T + (t - j)] * g;
                    if (dK) dK[(size_t)h * T + (t - j)] += g * ub[(size_t)j * H];
                }
            }
        }
}

// --- ssm recurrent: the same map as a diagonal complex recurrence -----------------------------

// y, u: (B, T, H); Lre, Lim: (N); Cre, Cim: (H, N); D: (H).
// z_hn[t] = a_n z_hn[t−1] + u_h[t] (z[−1] = 0), a_n = e^{λ_n};
// y_h[t] = Re Σ_n C̃_hn z_hn[t] + D_h u_h[t].  Repeated multiplication by a is
// fine here: |a| < 1, so old rounding errors are damped, not amplified.
void ref_ssm_recurrent_fwd(double *y, const double *u, const double *Lre, const double *Lim,
                           const double *Cre, const double *Cim, const double *D, int B, int T,
                           int H, int N) {
    for (size_t i = 0; i < (size_t)B * T * H; i++) y[i] = D[i % H] * u[i];
    for (int n = 0; n < N; n++) {
        double complex lam = ssm_lambda(Lre[n], Lim[n]);
        double complex a = ssm_exp(lam, 1.0), A = ssm_zoh(lam);
        for (int h = 0; h < H; h++) {
            size_t hn = (size_t)h * N + n;
            double complex Ct = CMPLX(Cre[hn], Cim[hn]) * A;
            for (int b = 0; b < B; b++) {
                double complex z = 0;
                for (int t = 0; t < T; t++) {
                    size_t i = ((size_t)b * T + t) * H + h;
                    z = a * z + u[i];
                    y[i] += creal(Ct * z);
                }
            }
        }
    }
}

// du, dy: (B, T, H); dLre, dLim: (N); dCre, dCim: (H, N); dD: (H); any gradient may be NULL.
// Adjoint recursion backward in time, with g = ḡ_z[t]:
//   g[t] = dy[t] C̃ + g[t+1] a;  ḡ_a += g[t] z[t−1];  du[t] += Re g[t];  ḡ_C̃ += dy[t] z[t].
// Then C̃ = C A(λ), a = e^λ give ḡ_C = ḡ_C̃ A and ḡ_λ = ḡ_C̃ C A'(λ) + ḡ_a e^λ.
// The states z[t] of one (b, h, n) are kept (T complex numbers) for the backward sweep.
int ref_ssm_recurrent_bwd(double *du, double *dLre, double *dLim, double *dCre, double *dCim,
                           double *dD, const double *dy, const double *u, const double *Lre,
                           const double *Lim, const double *Cre, const double *Cim,
                           const double *D, int B, int T, int H, int N) {
    // The skip term D u, whose gradients do not involve the states.
    for (size_t i = 0; i < (size_t)B * T * H; i++) {
        if (dD) dD[i % H] += dy[i] * u[i];
        if (du) du[i] += D[i % H] * dy[i];
    }
    if (!(du || dLre || dLim || dCre || dCim) || T <= 0) return PHAX_OK;

    double complex *z = malloc((size_t)T * sizeof *z);
    if (!z) return phax_fail("ref_ssm_recurrent_bwd: out of memory (T = %d)", T);
    for (int n = 0; n < N; n++) {
        double complex lam = ssm_lambda(Lre[n], Lim[n]);
        double complex a = ssm_exp(lam, 1.0), A = ssm_zoh(lam), Ap = ssm_zoh_deriv(lam);
        double complex ga = 0, glam = 0;  // ḡ_a and ḡ_λ, summed over b and h (λ is shared)
        for (int h = 0; h < H; h++) {
            size_t hn = (size_t)h * N + n;
            double complex C = CMPLX(Cre[hn], Cim[hn]), Ct = C * A;
            double complex gCt = 0;  // ḡ_C̃, summed over b
            for (int b = 0; b < B; b++) {
                double complex zt = 0;  // forward again: z[t] for this (b, h, n)
                for (int t = 0; t < T; t++) {
                    zt = a * zt + u[((size_t)b * T + t) * H + h];
                    z[t] = zt;
                }
                double complex g = 0;  // ḡ_z[t+1] on entry, ḡ_z[t] after the update
                for (int t = T - 1; t >= 0; t--) {
                    size_t i = ((size_t)b * T + t) * H + h;
                    g = g * a + dy[i] * Ct;
                    gCt += dy[i] * z[t];
                    if (t > 0) ga += g * z[t - 1];
                    if (du) du[i] += creal(g);
                }
            }
            double complex gC = gCt * A;
            if (dCre) dCre[hn] += creal(gC);
            if (dCim) dCim[hn] -= cimag(gC);
            glam += gCt * C * Ap;
        }
        glam += ga * a;  // d e^λ / dλ = e^λ = a
        if (dLre) dLre[n] += creal(glam) * -exp(Lre[n]);
        if (dLim) dLim[n] += -cimag(glam) * exp(Lim[n]);
    }
    free(z);
    return PHAX_OK;
}
