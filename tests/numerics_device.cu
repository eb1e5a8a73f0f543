// Build-time check (meson, when CUDA is built): phax/numerics.h compiles as CUDA device
// code, every helper called from a kernel. Nothing runs it; a header change that nvcc
// cannot compile fails the build.
#include "phax/numerics.h"

__global__ void phax_numerics_device_check(double *y, float *yf, const double *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double ar, ai, qr, qi;
    phax_zoh(-exp(x[i]), exp(x[i]), &ar, &ai);
    phax_cdiv(ar, ai, x[i], 1.0, &qr, &qi);
    y[i] = phax_sigmoid(x[i]) + phax_softplus(x[i]) + phax_logsigmoid(x[i]) + phax_gate_cap(x[i]) + qr + qi;
    yf[i] = phax_gate_capf((float)x[i]);
}
