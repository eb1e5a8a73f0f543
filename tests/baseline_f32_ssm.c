// The float32 naive baseline of the SSM ops (baseline_f32.h): ref/ssm.c's loops
// transcribed to float (the DSS kernel and the direct convolution), sharing no code
// with fast/. rev = 1 runs the sums over the modes from N − 1 down to 0: a second,
// equally naive evaluation.
#include <complex.h>
#include <math.h>

#include "baseline_f32.h"

// --- naive float32 transcriptions of ref/ssm.c ----------------------------------------------
// One exception to "everything in float": the power e^{λ l} is formed as ref forms
// it — λ = −e^{Λre} + i e^{Λim} and the arguments l·Re λ, l·Im λ in double, then
// exp, cos, sin — and rounded to float once. ref's comment requires this, and it
// is not a matter of taste: e^{λ l} has condition number ~l·|λ| in λ, so rounding
// λ (or the angle) to float costs ~l·|λ|·2^-24 (2e-5 at l = 2048 with the
// long-memory init), which would make this baseline, and with it the bound,
// meaningless at long T. A, C̃, every product and every sum are float.
static float complex b32_lambda(float lre, float lim) { return CMPLXF(-expf(lre), expf(lim)); }
static float complex b32_exp(float lre, float lim, int l) {
    double r = exp(l * -exp((double)lre)), th = l * exp((double)lim);
    return CMPLXF((float)(r * cos(th)), (float)(r * sin(th)));
}
static float complex b32_zoh(float complex lam) {
    float re = crealf(lam), im = cimagf(lam);
    if (cabsf(lam) < 1e-4f) return 1.0f + lam / 2.0f + lam * lam / 6.0f;
    float s = sinf(im / 2.0f);
    float complex em1 = CMPLXF(expm1f(re) * cosf(im) - 2.0f * s * s, expf(re) * sinf(im));
    return em1 / lam;
}
static float complex b32_zoh_deriv(float complex lam) {
    if (cabsf(lam) < 0.5f) {
        float complex s = 0, p = 1;
        float f = 2.0f;
        for (int j = 0; j < 18; j++) {
            s += (j + 1) / f * p;
            p *= lam;
            f *= j + 3;
        }
        return s;
    }
    return (cexpf(lam) - b32_zoh(lam)) / lam;
}
// rev: the sums over the modes run from N − 1 down to 0 (the second naive draw).
void b32_dss_kernel_fwd(float *K, const float *Lre, const float *Lim, const float *Cre,
                           const float *Cim, int H, int N, int T, int rev) {
    for (size_t i = 0; i < (size_t)H * T; i++) K[i] = 0.0f;
    for (int j = 0; j < N; j++) {
        int n = rev ? N - 1 - j : j;
        float complex lam = b32_lambda(Lre[n], Lim[n]), A = b32_zoh(lam);
        for (int l = 0; l < T; l++) {
            float complex e = b32_exp(Lre[n], Lim[n], l);
            for (int h = 0; h < H; h++) {
                size_t hn = (size_t)h * N + n;
                float complex Ct = CMPLXF(Cre[hn], Cim[hn]) * A;
                K[(size_t)h * T + l] += crealf(Ct * e);
            }
        }
    }
}
// rev: the sums over l run from T − 1 down to 0 (the second naive draw, see check_full).
void b32_dss_kernel_bwd(float *dLre, float *dLim, float *dCre, float *dCim, const float *dK,
                           const float *Lre, const float *Lim, const float *Cre, const float *Cim,
                           int H, int N, int T, int rev) {
    for (int n = 0; n < N; n++) {
        float complex lam = b32_lambda(Lre[n], Lim[n]);
        float complex A = b32_zoh(lam), Ap = b32_zoh_deriv(lam), glam = 0;
        for (int h = 0; h < H; h++) {
            size_t hn = (size_t)h * N + n;
            float complex G = 0, Gp = 0;
            for (int i = 0; i < T; i++) {
                int l = rev ? T - 1 - i : i;
                float complex e = b32_exp(Lre[n], Lim[n], l);
                float g = dK[(size_t)h * T + l];
                G += g * e;
                Gp += (g * (float)l) * e;
            }
            float complex gC = A * G;
            dCre[hn] += crealf(gC);
            dCim[hn] -= cimagf(gC);
            glam += CMPLXF(Cre[hn], Cim[hn]) * (Ap * G + A * Gp);
        }
        dLre[n] += crealf(glam) * -expf(Lre[n]);
        dLim[n] += -cimagf(glam) * expf(Lim[n]);
    }
}
void b32_ssm_conv_fwd(float *y, const float *u, const float *K, const float *D, int B, int T,
                         int H) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                const float *ub = u + (size_t)b * T * H;
                float s = D[h] * ub[(size_t)t * H + h];
                for (int j = 0; j <= t; j++) s += K[(size_t)h * T + (t - j)] * ub[(size_t)j * H + h];
                y[((size_t)b * T + t) * H + h] = s;
            }
}
void b32_ssm_conv_bwd(float *du, float *dK, float *dD, const float *dy, const float *u,
                         const float *K, const float *D, int B, int T, int H) {
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *ub = u + (size_t)b * T * H + h;
            const float *gb = dy + (size_t)b * T * H + h;
            for (int t = 0; t < T; t++) {
                float g = gb[(size_t)t * H];
                dD[h] += g * ub[(size_t)t * H];
                du[((size_t)b * T + t) * H + h] += D[h] * g;
                for (int j = 0; j <= t; j++) {
                    du[((size_t)b * T + j) * H + h] += K[(size_t)h * T + (t - j)] * g;
                    dK[(size_t)h * T + (t - j)] += g * ub[(size_t)j * H];
                }
            }
        }
}

