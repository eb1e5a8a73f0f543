// The device backends of the equivalence tests (harness.h): fast/cuda through its CPU
// emulation of the CUDA model (cuda_emu: always built and run), and on a real GPU (cuda:
// when meson found nvcc and a device is present; skipped with the reason otherwise). The
// entries (tests/harness_cuda_entries.h, one copy per library) copy host buffers to the device
// and back around each fcuda_ call.
//
// Every H_TEST runs on both (every entry filled: harness/backend_list), apart from not_applicable[]'s
// host-thread rows, skipped with their reason.
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "phax/fast.h"  // phax_cuda_info
#include "phax/fmodel.h"  // the shared runner over fast/cuda's op table
#include "phax/fcuda_emu.h"  // fcuda_emu_<op> beside fcuda_<op>
#include "phax/fcuda_decode.h"
#include "phax/fcpu_mlstm.h"  // FCPU_MLSTM_STATE_LEN

#define CUDA_GUARD 16                // floats after every device buffer
#define CUDA_GUARD_BITS 0x7fa5a5a5u  // a NaN pattern no kernel writes

_Static_assert((int)H_SSM_FFT == (int)FCUDA_SSM_FFT && (int)H_SSM_DIRECT == (int)FCUDA_SSM_DIRECT &&
                   (int)H_SSM_AUTO == (int)FCUDA_SSM_AUTO,
               "ssm methods");

// Rows that test host threads, not an op: they do not apply to a device backend.
static const char *const cuda_not_applicable[] = {
    "gemm/inside_a_parallel_region",
    "not a device backend's test: fcpu_sgemm called from inside an OpenMP parallel region",
    "norm/deterministic",
    "not a device backend's test: the same bits for 1 and N OpenMP threads or on repeat (a device's run-to-run "
    "bits are model/accumulate_deterministic's)",
    "embedding/deterministic",
    "not a device backend's test: the same bits for 1 and N OpenMP threads or on repeat (a device's run-to-run "
    "bits are model/accumulate_deterministic's)",
    "loss/deterministic",
    "not a device backend's test: the same bits for 1 and N OpenMP threads or on repeat (a device's run-to-run "
    "bits are model/accumulate_deterministic's)",
    NULL,
};

// --- cuda_emu: the kernels compiled by g++ against fast/cuda/emu ---------------------------------
#define FC(op) fcuda_emu_##op
#define N(x) emu_##x
#include "harness_cuda_entries.h"
static const char *emu_unavailable(void) { return NULL; }
const h_backend h_backend_cuda_emu = N_BACKEND("cuda_emu", emu_unavailable);
#undef FC
#undef N
#undef N_OK
#undef N_BACKEND

// --- cuda: the same kernels built by nvcc, on a device --------------------------------------------
#ifdef PHAX_HAVE_CUDA
#define FC(op) fcuda_##op
#define N(x) dev_##x
#include "harness_cuda_entries.h"
static const char *dev_unavailable(void) {
    static char why[300];
    char info[256];
    phax_cuda_info(info, sizeof info);
    if (!strstr(info, "no device")) return NULL;
    snprintf(why, sizeof why, "no CUDA device (%s)", info);
    return why;
}
const h_backend h_backend_cuda = N_BACKEND("cuda", dev_unavailable);
#else
static const char *dev_unavailable(void) { return "fast/cuda is not built here (meson found no nvcc)"; }
// No entries: every row is skipped with the reason above (test_harness's entry check knows
// a backend that cannot run here and has none).
const h_backend h_backend_cuda = {.name = "cuda", .unavailable = dev_unavailable, .not_applicable = cuda_not_applicable};
#endif
