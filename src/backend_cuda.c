// The cuda_emu backend behind phax/backend.h: fast/cuda's float32 kernels driving the shared fast
// model runner (src/backend_cuda_impl.h), compiled as C++ for the CPU emulation of the CUDA
// model (fast/cuda/emu/): the cuda backend's code, tested end to end on a machine without a
// GPU; slow (every thread of every block a fiber), small models only. The device's own table,
// `cuda`, is src/backend_cuda_dev.c (linked into phax-cuda, bench_cuda and the tests only).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "phax/backend.h"
#include "phax/core.h"
#include "phax/f32_ops.h"  // the table's zero, for the moments
#include "phax/fmodel.h"
#include "phax/fcuda_emu.h"  // fcuda_emu_<op> beside fcuda_<op>
#include "phax/fcuda_decode.h"

#define FC(op) fcuda_emu_##op
#define N(x) emu_##x
#define N_GRADS_ON_DEVICE 0  // the emulator's device memory is host memory
#include "backend_cuda_impl.h"
const phax_backend_ops phax_backend_cuda_emu =
    N_BACKEND_OPS("cuda_emu", "float32 fast/cuda on the CPU emulation of the CUDA model (tests; slow)");
