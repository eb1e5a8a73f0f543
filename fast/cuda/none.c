// fast/cuda in a build without CUDA (meson option cuda, or no nvcc): says so.
#include <stdio.h>

#include "phax/fast.h"

void phax_cuda_info(char *buf, size_t len) { snprintf(buf, len, "cuda: not built"); }
