// fast/cuda device memory and copies (phax/fcuda.h): every CUDA call checked, one-line errors.
#include "cuda_common.cuh"

extern "C" int FCUDA(malloc)(void **p, size_t bytes) {
    *p = nullptr;
    cudaError_t e = cudaMalloc(p, bytes);
    if (e != cudaSuccess) *p = nullptr;
    return fcuda_ok(e, "malloc");
}

extern "C" int FCUDA(free)(void *p) { return fcuda_ok(cudaFree(p), "free"); }

extern "C" int FCUDA(upload)(void *dst, const void *src, size_t bytes, void *stream) {
    return fcuda_ok(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, fcuda_stream(stream)), "upload");
}

extern "C" int FCUDA(download)(void *dst, const void *src, size_t bytes, void *stream) {
    cudaStream_t s = fcuda_stream(stream);
    if (fcuda_ok(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s), "download")) return PHAX_ERR;
    return fcuda_ok(cudaStreamSynchronize(s), "download");  // the host reads it next
}

extern "C" int FCUDA(sync)(void *stream) {
    return fcuda_ok(cudaStreamSynchronize(fcuda_stream(stream)), "sync");
}
