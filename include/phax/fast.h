// phax fast: float32 backends. fast/cpu (OpenBLAS + OpenMP) always; fast/cuda
// when built with CUDA. Kernels arrive with the fast/cpu and fast/cuda issues.
#ifndef PHAX_FAST_H
#define PHAX_FAST_H

#include <stddef.h>

// One line describing the CPU backend (OpenBLAS build, threads) into buf.
void phax_cpu_info(char *buf, size_t len);
// One line describing CUDA (or why it is unavailable) into buf (fast/cuda/).
void phax_cuda_info(char *buf, size_t len);

#endif
