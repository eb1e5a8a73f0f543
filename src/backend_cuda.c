// The cuda backends behind phax/backend.h: fast/cuda's float32 kernels driving the shared fast
// model runner (src/backend_cuda_impl.h, compiled once per library):
//   cuda      fast/cuda built by nvcc, on a device (when meson found nvcc; listed as built only
//             when a device is present, else --backend cuda says why not: src/backend.c)
//   cuda_emu  the same kernel sources compiled as C++ for the CPU emulation of the CUDA model
//             (fast/cuda/emu/): for testing the backend end to end on a machine without a GPU;
//             slow (every thread of every block a fiber), small models only.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend_naive.h"
#include "phax/backend.h"
#include "phax/core.h"
#include "phax/f32_ops.h"  // the table's zero, for the moments
#include "phax/fcpu_model.h"
#include "phax/fcuda.h"

#define FC(op) fcuda_emu_##op
#define N(x) emu_##x
#include "backend_cuda_impl.h"
const phax_backend_ops phax_backend_cuda_emu =
    N_BACKEND_OPS("cuda_emu", "float32 fast/cuda on the CPU emulation of the CUDA model (tests; slow; a naive decoder)");
#undef FC
#undef N
#undef N_BACKEND_OPS

#ifdef PHAX_HAVE_CUDA
#define FC(op) fcuda_##op
#define N(x) dev_##x
#include "backend_cuda_impl.h"
const phax_backend_ops phax_backend_cuda =
    N_BACKEND_OPS("cuda", "float32 fast tier on an NVIDIA GPU (fast/cuda: cuBLAS, cuFFT; a naive decoder)");
#endif
