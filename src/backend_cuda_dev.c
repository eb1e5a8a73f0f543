// The cuda backend behind phax/backend.h: fast/cuda built by nvcc, on a device (the entries of
// src/backend_cuda_impl.h over fcuda_*). Not in the phax command itself: loading cuBLAS and
// cuFFT costs every start ~0.5 s and ~220 MB of resident memory (measured here), so it is
// linked (whole) into `phax-cuda`, built beside phax when meson finds nvcc, and into
// bench_cuda; src/backend.c finds it through a weak reference (phax: NULL, phax-cuda: this).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "phax/backend.h"
#include "phax/core.h"
#include "phax/f32_ops.h"
#include "phax/fmodel.h"
#include "phax/fcuda.h"
#include "phax/fcuda_decode.h"

#define FC(op) fcuda_##op
#define N(x) dev_##x
#include "backend_cuda_impl.h"
const phax_backend_ops phax_backend_cuda =
    N_BACKEND_OPS("cuda", "float32 fast tier on an NVIDIA GPU (fast/cuda: cuBLAS, cuFFT)");
