// fast/cuda device memory and copies (phax/fcuda.h): every CUDA call checked, one-line errors.
// The bytes allocated through fcuda_malloc are counted (now and the peak since the last reset),
// for the benchmarks' device memory; cuBLAS's and cuFFT's own workspaces are not in it.
#include <mutex>
#include <unordered_map>

#include "cuda_common.cuh"

static std::mutex mem_mu;
static std::unordered_map<void *, size_t> mem_sizes;
static size_t mem_now, mem_peak;

extern "C" int fcuda_malloc(void **p, size_t bytes) {
    *p = nullptr;
    cudaError_t e = cudaMalloc(p, bytes);
    if (e != cudaSuccess) *p = nullptr;
    if (e == cudaSuccess) {
        std::lock_guard<std::mutex> g(mem_mu);
        mem_sizes[*p] = bytes;
        mem_now += bytes;
        if (mem_now > mem_peak) mem_peak = mem_now;
    }
    return fcuda_ok(e, "malloc");
}

extern "C" int fcuda_free(void *p) {
    if (p) {
        std::lock_guard<std::mutex> g(mem_mu);
        auto it = mem_sizes.find(p);
        if (it != mem_sizes.end()) mem_now -= it->second, mem_sizes.erase(it);
    }
    return fcuda_ok(cudaFree(p), "free");
}

extern "C" void fcuda_mem_stats(size_t *now, size_t *peak) {
    std::lock_guard<std::mutex> g(mem_mu);
    if (now) *now = mem_now;
    if (peak) *peak = mem_peak;
}

extern "C" void fcuda_mem_reset_peak(void) {
    std::lock_guard<std::mutex> g(mem_mu);
    mem_peak = mem_now;
}

extern "C" int fcuda_copy(void *dst, const void *src, size_t bytes, void *stream) {
    return fcuda_ok(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, fcuda_stream(stream)), "copy");
}

extern "C" int fcuda_upload(void *dst, const void *src, size_t bytes, void *stream) {
    return fcuda_ok(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, fcuda_stream(stream)), "upload");
}

extern "C" int fcuda_download(void *dst, const void *src, size_t bytes, void *stream) {
    cudaStream_t s = fcuda_stream(stream);
    if (fcuda_ok(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s), "download")) return PHAX_ERR;
    return fcuda_ok(cudaStreamSynchronize(s), "download");  // the host reads it next
}

extern "C" int fcuda_sync(void *stream) {
    return fcuda_ok(cudaStreamSynchronize(fcuda_stream(stream)), "sync");
}
