// fast/cpu backend facts: which OpenBLAS, how many threads.
#include <cblas.h>
#include <omp.h>
#include <stdio.h>

#include "phax/fast.h"

void phax_cpu_info(char *buf, size_t len) {
    snprintf(buf, len, "cpu: %s, OpenBLAS threads %d, OpenMP threads %d", openblas_get_config(),
             openblas_get_num_threads(), omp_get_max_threads());
}

#ifndef PHAX_HAVE_CUDA
int phax_cuda_device_count(void) { return 0; }
void phax_cuda_info(char *buf, size_t len) { snprintf(buf, len, "cuda: not built"); }
#endif
