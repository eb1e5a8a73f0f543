// fast/cuda device facts for `phax info` (phax_cuda_info; fast/cpu's are fast/cpu/cpu_info.c).
#include <cstdio>

#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C" {
#include "phax/fast.h"
}

extern "C" void phax_cuda_info(char *buf, size_t len) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(buf, len, "cuda: built, no device (%s)", e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
        return;
    }
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    snprintf(buf, len, "cuda: %d device(s), 0: %s (sm_%d%d, %.1f GiB), runtime %d", n, p.name, p.major,
             p.minor, p.totalGlobalMem / 1073741824.0, rt);
}
