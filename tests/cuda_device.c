// The real fast/cuda library (phax_cuda, nvcc + cuBLAS) linked into an executable, so every build
// proves the link with cudart and cublas; run, it is the device check of linear: without a
// device it says so in one line and is skipped (exit 77), with one it runs linear forward and
// backward (FP32 and TF32) on 7 rows, 10 -> 5, against a double loop with the elementwise
// worst-case bounds of tests/test_cuda_blas.c.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "phax/core.h"
#include "phax/fast.h"  // phax_cuda_info
#include "phax/fcuda.h"

#define N 7
#define IN 10
#define OUT 5

static int fails;

// |got − want| ≤ c·mag + 2^-24·(|want| + mag) for every element.
static void judge(const char *what, const float *got, const double *want, const double *mag, int n, double c) {
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double tol = c * mag[i] + 0x1p-24 * (fabs(want[i]) + mag[i]) + 1e-37, e = fabs(got[i] - want[i]) / tol;
        worst = !(e <= worst) ? e : worst;
    }
    printf("%s: worst err/tol %.3g\n", what, worst);
    if (!(worst <= 1)) fails++;
}

static int up(float **d, const float *h, int n) {
    return fcuda_malloc((void **)d, n * sizeof(float)) || fcuda_upload(*d, h, n * sizeof(float), NULL);
}

int main(void) {
    char info[256];
    phax_cuda_info(info, sizeof info);
    printf("%s\n", info);
    void *probe = NULL;
    if (fcuda_malloc(&probe, 64)) {
        const char *e = phax_error();
        printf("no CUDA device: %s\n", e);
        return strchr(e, '\n') ? 1 : 77;  // the error is one line; skipped
    }
    fcuda_free(probe);
    float x[N * IN], W[OUT * IN], b[OUT], dy[N * OUT], y[N * OUT], dx[N * IN], dW[OUT * IN], db[OUT];
    unsigned s = 12345;
    float *all[] = {x, W, b, dy};
    int len[] = {N * IN, OUT * IN, OUT, N * OUT};
    for (int a = 0; a < 4; a++)
        for (int i = 0; i < len[a]; i++) s = s * 1103515245u + 12345u, all[a][i] = (float)((s >> 8) % 2001) / 1000.0f - 1.0f;
    double yr[N * OUT], ym[N * OUT], dxr[N * IN], dxm[N * IN], dWr[OUT * IN], dWm[OUT * IN];
    for (int r = 0; r < N; r++)
        for (int o = 0; o < OUT; o++) {
            double v = b[o], m = fabs(b[o]);
            for (int i = 0; i < IN; i++) v += (double)x[r * IN + i] * W[o * IN + i], m += fabs((double)x[r * IN + i] * W[o * IN + i]);
            yr[r * OUT + o] = v, ym[r * OUT + o] = m;
        }
    for (int r = 0; r < N; r++)
        for (int i = 0; i < IN; i++) {
            double v = 0, m = 0;
            for (int o = 0; o < OUT; o++) v += (double)dy[r * OUT + o] * W[o * IN + i], m += fabs((double)dy[r * OUT + o] * W[o * IN + i]);
            dxr[r * IN + i] = v, dxm[r * IN + i] = m;
        }
    for (int o = 0; o < OUT; o++)
        for (int i = 0; i < IN; i++) {
            double v = 0, m = 0;
            for (int r = 0; r < N; r++) v += (double)dy[r * OUT + o] * x[r * IN + i], m += fabs((double)dy[r * OUT + o] * x[r * IN + i]);
            dWr[o * IN + i] = v, dWm[o * IN + i] = m;
        }
    for (int tf32 = 0; tf32 < 2; tf32++) {
        fcuda_gemm_tf32(tf32);
        float *dX, *dWt, *dB, *dDY, *dY, *dDX, *dDW, *dDB;
        float zero[N * IN] = {0};
        if (up(&dX, x, N * IN) || up(&dWt, W, OUT * IN) || up(&dB, b, OUT) || up(&dDY, dy, N * OUT) ||
            up(&dY, zero, N * OUT) || up(&dDX, zero, N * IN) || up(&dDW, zero, OUT * IN) || up(&dDB, zero, OUT) ||
            fcuda_linear_fwd(dY, dX, dWt, dB, N, IN, OUT, NULL) ||
            fcuda_linear_bwd(dDX, dDW, dDB, dDY, dX, dWt, N, IN, OUT, NULL) ||
            fcuda_download(y, dY, sizeof y, NULL) || fcuda_download(dx, dDX, sizeof dx, NULL) ||
            fcuda_download(dW, dDW, sizeof dW, NULL) || fcuda_download(db, dDB, sizeof db, NULL)) {
            printf("FAIL: %s\n", phax_error());
            return 1;
        }
        // FP32: (k + 1)·1.01·u; TF32: 2u_t + u_t² on top (tests/test_cuda_blas.c derives it),
        // with u_t = 2^-10 here: a device's tensor cores may truncate the operands to TF32
        // instead of rounding them (the emulation rounds: 2^-11).
        double ut = tf32 ? 0x1p-10 : 0, u = 0x1p-24;
        judge(tf32 ? "tf32 y" : "fp32 y", y, yr, ym, N * OUT, 2 * ut + ut * ut + 1.01 * (IN + 1) * u * (1 + ut) * (1 + ut));
        judge(tf32 ? "tf32 dx" : "fp32 dx", dx, dxr, dxm, N * IN, 2 * ut + ut * ut + 1.01 * (OUT + 1) * u * (1 + ut) * (1 + ut));
        judge(tf32 ? "tf32 dW" : "fp32 dW", dW, dWr, dWm, OUT * IN, 2 * ut + ut * ut + 1.01 * (N + 1) * u * (1 + ut) * (1 + ut));
        fcuda_free(dX), fcuda_free(dWt), fcuda_free(dB), fcuda_free(dDY), fcuda_free(dY), fcuda_free(dDX), fcuda_free(dDW),
            fcuda_free(dDB);
        (void)db;
    }
    printf("%s\n", fails ? "FAIL" : "ok");
    return fails ? 1 : 0;
}
