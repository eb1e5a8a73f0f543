// fast/cpu facts for `phax info`: which OpenBLAS, how many threads (fast/cuda's:
// fast/cuda/device_info.cu).
#include <cblas.h>
#include <omp.h>
#include <stdio.h>

#include "phax/fast.h"

void phax_cpu_info(char *buf, size_t len) {
    snprintf(buf, len, "cpu: %s, OpenBLAS threads %d, OpenMP threads %d", openblas_get_config(),
             openblas_get_num_threads(), omp_get_max_threads());
}
