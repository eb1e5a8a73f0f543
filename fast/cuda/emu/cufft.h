// cuFFT on the CPU, for the tests (docs/cuda.md): the subset fast/cuda uses — batched 1-D
// single-precision real-to-complex and complex-to-real transforms of contiguous rows
// (cufftPlan1d's basic layout: real rows of n floats, complex rows of n/2 + 1) — served by
// FFTW (fftwf, FFTW_ESTIMATE), with cuFFT's conventions and checks:
//   * unnormalised transforms (C2R of R2C multiplies by n), as cuFFT's;
//   * C2R may overwrite its input (cuFFT documents that it can; the emulation always does:
//     it poisons the input after the transform, so code that reads it again sees NaN);
//   * cufftPlan1d: CUFFT_INVALID_SIZE for n < 2 or batch < 1, CUFFT_INVALID_TYPE for a type
//     other than R2C or C2R; cufftExec*: CUFFT_INVALID_PLAN for a handle that cufftPlan1d did
//     not return (or that was destroyed), CUFFT_INVALID_TYPE for the wrong direction;
//   * beyond what cuFFT checks (a device would fault): the input and output rows, batch of
//     them, must each lie inside one cudaMalloc allocation, else CUFFT_EXEC_FAILED and the
//     runtime's last error cudaErrorIllegalAddress.
#ifndef PHAX_CUDA_EMU_CUFFT_H
#define PHAX_CUDA_EMU_CUFFT_H

#include "cuda_emu.h"

namespace phax_emu {

// cuFFT's values (cufft.h).
enum cufftResult {
    CUFFT_SUCCESS = 0,
    CUFFT_INVALID_PLAN = 1,
    CUFFT_ALLOC_FAILED = 2,
    CUFFT_INVALID_TYPE = 3,
    CUFFT_INVALID_VALUE = 4,
    CUFFT_INTERNAL_ERROR = 5,
    CUFFT_EXEC_FAILED = 6,
    CUFFT_SETUP_FAILED = 7,
    CUFFT_INVALID_SIZE = 8,
};
enum cufftType { CUFFT_R2C = 0x2a, CUFFT_C2R = 0x2c };
typedef int cufftHandle;
typedef float cufftReal;
struct cufftComplex {
    float x, y;
};

cufftResult cufftPlan1d(cufftHandle *plan, int nx, cufftType type, int batch);
cufftResult cufftDestroy(cufftHandle plan);
cufftResult cufftSetStream(cufftHandle plan, cudaStream_t stream);
cufftResult cufftExecR2C(cufftHandle plan, cufftReal *idata, cufftComplex *odata);
cufftResult cufftExecC2R(cufftHandle plan, cufftComplex *idata, cufftReal *odata);

}  // namespace phax_emu

using phax_emu::cufftComplex;
using phax_emu::cufftDestroy;
using phax_emu::cufftExecC2R;
using phax_emu::cufftExecR2C;
using phax_emu::cufftHandle;
using phax_emu::cufftPlan1d;
using phax_emu::cufftReal;
using phax_emu::cufftResult;
using phax_emu::cufftSetStream;
using phax_emu::cufftType;
using phax_emu::CUFFT_C2R;
using phax_emu::CUFFT_R2C;
using phax_emu::CUFFT_SUCCESS;

#endif
