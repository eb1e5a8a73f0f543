// cuFFT on the CPU (fast/cuda/emu/cufft.h; docs/cuda.md): cufftPlan1d's batched real
// transforms on FFTW, with cuFFT's validation and the emulator's allocation checks.
#include "cufft.h"

#include <fftw3.h>

#include <cmath>
#include <cstdio>
#include <map>

namespace phax_emu {

namespace {

struct plan1d {
    int n, batch;
    cufftType type;
    fftwf_plan p;
};

std::map<cufftHandle, plan1d> &plans() {
    static std::map<cufftHandle, plan1d> m;
    return m;
}
int next_handle = 1;

cufftResult exec_fault(const char *fn, const char *what, const void *p, size_t bytes) {
    record_error(cudaErrorIllegalAddress, "%s: %s at %p: its %zu bytes are not inside one cudaMalloc allocation", fn,
                 what, p, bytes);
    return phax_emu::CUFFT_EXEC_FAILED;
}

}  // namespace

cufftResult cufftPlan1d(cufftHandle *plan, int nx, cufftType type, int batch) {
    if (!plan) return CUFFT_INVALID_VALUE;
    if (type != CUFFT_R2C && type != CUFFT_C2R) return CUFFT_INVALID_TYPE;
    if (nx < 2 || batch < 1) return CUFFT_INVALID_SIZE;
    // Planned once on scratch rows; executed on the caller's by the new-array interface
    // (FFTW_UNALIGNED: device buffers carry no alignment promise to FFTW).
    size_t nc = (size_t)(nx / 2 + 1);
    float *r = fftwf_alloc_real((size_t)nx * batch);
    fftwf_complex *c = fftwf_alloc_complex(nc * batch);
    if (!r || !c) {
        fftwf_free(r), fftwf_free(c);
        return CUFFT_ALLOC_FAILED;
    }
    unsigned fl = FFTW_ESTIMATE | FFTW_UNALIGNED;
    fftwf_plan p = type == CUFFT_R2C
                       ? fftwf_plan_many_dft_r2c(1, &nx, batch, r, NULL, 1, nx, c, NULL, 1, (int)nc, fl)
                       : fftwf_plan_many_dft_c2r(1, &nx, batch, c, NULL, 1, (int)nc, r, NULL, 1, nx, fl);
    fftwf_free(r), fftwf_free(c);
    if (!p) return CUFFT_SETUP_FAILED;
    *plan = next_handle++;
    plans()[*plan] = plan1d{nx, batch, type, p};
    return CUFFT_SUCCESS;
}

cufftResult cufftDestroy(cufftHandle plan) {
    auto it = plans().find(plan);
    if (it == plans().end()) return CUFFT_INVALID_PLAN;
    fftwf_destroy_plan(it->second.p);
    plans().erase(it);
    return CUFFT_SUCCESS;
}

cufftResult cufftSetStream(cufftHandle plan, cudaStream_t) {
    return plans().count(plan) ? CUFFT_SUCCESS : CUFFT_INVALID_PLAN;
}

cufftResult cufftExecR2C(cufftHandle plan, cufftReal *idata, cufftComplex *odata) {
    auto it = plans().find(plan);
    if (it == plans().end()) return CUFFT_INVALID_PLAN;
    const plan1d &q = it->second;
    if (q.type != CUFFT_R2C) return CUFFT_INVALID_TYPE;
    size_t ri = (size_t)q.n * q.batch * sizeof(float), co = (size_t)(q.n / 2 + 1) * q.batch * sizeof(cufftComplex);
    if (!device_range(idata, ri)) return exec_fault("cufftExecR2C", "idata", idata, ri);
    if (!device_range(odata, co)) return exec_fault("cufftExecR2C", "odata", odata, co);
    fftwf_execute_dft_r2c(q.p, idata, reinterpret_cast<fftwf_complex *>(odata));
    return CUFFT_SUCCESS;
}

cufftResult cufftExecC2R(cufftHandle plan, cufftComplex *idata, cufftReal *odata) {
    auto it = plans().find(plan);
    if (it == plans().end()) return CUFFT_INVALID_PLAN;
    const plan1d &q = it->second;
    if (q.type != CUFFT_C2R) return CUFFT_INVALID_TYPE;
    size_t ci = (size_t)(q.n / 2 + 1) * q.batch * sizeof(cufftComplex), ro = (size_t)q.n * q.batch * sizeof(float);
    if (!device_range(idata, ci)) return exec_fault("cufftExecC2R", "idata", idata, ci);
    if (!device_range(odata, ro)) return exec_fault("cufftExecC2R", "odata", odata, ro);
    fftwf_execute_dft_c2r(q.p, reinterpret_cast<fftwf_complex *>(idata), odata);
    // cuFFT may overwrite a C2R input: the emulation always does, so no caller relies on it.
    float *f = reinterpret_cast<float *>(idata);
    for (size_t i = 0; i < ci / sizeof(float); i++) f[i] = NAN;
    return CUFFT_SUCCESS;
}

}  // namespace phax_emu
