// The CUDA execution model on the CPU, for the tests (docs/cuda.md). fast/cuda's .cu files
// are compiled by g++ as C++ with PHAX_CUDA_EMU defined; fast/cuda/cuda_common.cuh then
// includes this header instead of <cuda_runtime.h>, and PHAX_LAUNCH calls
// phax_emu::launch_kernel instead of <<<...>>>.
//
//   * Blocks run one after another; the threads of a block are fibers (ucontext) on the
//     calling OS thread, scheduled cooperatively: a thread runs until it reaches a
//     __syncthreads, a warp operation (shuffle, vote, __syncwarp) or its end. The order in
//     which runnable threads are resumed on each pass is set by phax_cuda_emu_set_order
//     (forward by default; reverse; a seeded shuffle): a missing barrier then reads a
//     value its writer has not produced yet (emu.cpp says which order exposes what).
//   * __syncthreads releases when every thread of the block waits at the same one; a
//     thread that exited, or waits at another __syncthreads or at a warp operation, makes
//     the launch fail with one line naming the kernel (undefined behaviour on a GPU).
//   * Warp operations complete when every lane named in the mask has arrived at the same
//     operation with the same mask; a lane that exited or does not exist is an error.
//   * Shared memory: static __shared__ arrays live in one section of the binary (one
//     storage per array; blocks run in sequence), dynamic shared memory (PHAX_DYN_SMEM)
//     is a heap buffer of the launch's size; both are filled with 0xFF bytes (NaN as
//     float) before every block, so a read of something this block never wrote is seen.
//   * cudaMalloc'd memory is host memory, 0xFF-filled; cudaMemcpy checks that the device
//     side of a copy lies inside one allocation and that the direction matches.
//
// cuBLAS is emulated beside this file (emu/cublas.h, on OpenBLAS); cuFFT will be (emu/cufft.h).
#ifndef PHAX_CUDA_EMU_H
#define PHAX_CUDA_EMU_H

#ifndef PHAX_CUDA_EMU
#error "fast/cuda/emu/cuda_emu.h is the emulated CUDA runtime: compile with -DPHAX_CUDA_EMU"
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

namespace phax_emu {

// --- types --------------------------------------------------------------------------------------
struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
    constexpr dim3(uint3 u) : x(u.x), y(u.y), z(u.z) {}
};

// The codes have CUDA's values.
enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorNoDevice = 100,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchFailure = 719,
};
typedef enum cudaError cudaError_t;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};

struct emu_stream;
typedef emu_stream *cudaStream_t;  // streams are no-ops: everything runs at once, in order

// --- runtime (served by host memory) -------------------------------------------------------------
cudaError_t cudaMalloc(void **p, size_t bytes);
template <class T>
inline cudaError_t cudaMalloc(T **p, size_t bytes) {
    return cudaMalloc(reinterpret_cast<void **>(p), bytes);
}
cudaError_t cudaFree(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t s = nullptr);
cudaError_t cudaMemset(void *p, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s = nullptr);
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
// The emulator's own detail (kernel, block, thread) when e is the error last recorded.
const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetDeviceCount(int *n);

// For the emulated libraries beside the runtime (emu/cublas.h): whether [p, p + bytes) lies
// inside one cudaMalloc allocation, and recording an error as the runtime's last (its detail
// becomes cudaGetErrorString's; printed to stderr).
bool device_range(const void *p, size_t bytes);
cudaError_t record_error(cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// --- the execution model -------------------------------------------------------------------------
// The running thread's builtins (set by the scheduler on every switch).
extern uint3 cur_threadIdx, cur_blockIdx;
extern dim3 cur_blockDim, cur_gridDim;

// The launch: runs thunk(ctx) once per thread of every block.
cudaError_t launch(const char *name, dim3 grid, dim3 block, size_t smem, void (*thunk)(void *),
                   void *ctx);

// Arguments are converted to the kernel's parameter types once, on the host, as a launch does.
template <class... P, class... A>
inline cudaError_t launch_kernel(const char *name, dim3 grid, dim3 block, size_t smem,
                                 cudaStream_t, void (*k)(P...), A &&...a) {
    static_assert(sizeof...(P) == sizeof...(A), "kernel launched with the wrong number of arguments");
    struct call {
        void (*k)(P...);
        std::tuple<typename std::decay<P>::type...> args;
    } c{k, std::tuple<typename std::decay<P>::type...>(std::forward<A>(a)...)};
    return launch(
        name, grid, block, smem,
        [](void *p) {
            call *cc = static_cast<call *>(p);
            std::apply(cc->k, cc->args);
        },
        &c);
}

void syncthreads(const char *file, int line);
void *dyn_smem(void);  // the launch's dynamic shared memory (nullptr when smem = 0)

enum warp_kind { W_SYNC, W_SHFL, W_SHFL_UP, W_SHFL_DOWN, W_SHFL_XOR, W_BALLOT, W_ANY, W_ALL };
// One warp operation of the running thread: blocks until every lane of mask arrives.
uint64_t warp_op(warp_kind k, unsigned mask, uint64_t bits, int arg, int width, const char *file,
                 int line);

template <class T>
inline uint64_t to_bits(T v) {
    static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8, "shuffle of a type over 8 bytes");
    uint64_t b = 0;
    std::memcpy(&b, &v, sizeof v);
    return b;
}
template <class T>
inline T from_bits(uint64_t b) {
    T v;
    std::memcpy(&v, &b, sizeof v);
    return v;
}

}  // namespace phax_emu

using phax_emu::cudaError_t;
using phax_emu::cudaStream_t;
using phax_emu::dim3;
using phax_emu::uint3;
using namespace phax_emu;  // the runtime's names, as <cuda_runtime.h> gives them

// --- the CUDA keywords and builtins ----------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
// __restrict__ is g++'s own.
// Static shared arrays: one storage each, in the section the scheduler poisons between blocks
// (a function-local static is one object for every thread of the block: CUDA's semantics).
#define __shared__ static __attribute__((section("phax_emu_smem"), aligned(16)))

#define threadIdx (static_cast<const ::phax_emu::uint3 &>(::phax_emu::cur_threadIdx))
#define blockIdx (static_cast<const ::phax_emu::uint3 &>(::phax_emu::cur_blockIdx))
#define blockDim (static_cast<const ::phax_emu::dim3 &>(::phax_emu::cur_blockDim))
#define gridDim (static_cast<const ::phax_emu::dim3 &>(::phax_emu::cur_gridDim))
#define warpSize 32

// Warp operations and barriers are functions; the call site (file, line) names the barrier.
inline void __syncthreads(const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    ::phax_emu::syncthreads(file, line);
}
inline void __syncwarp(unsigned mask = 0xffffffffu, const char *file = __builtin_FILE(),
                       int line = __builtin_LINE()) {
    ::phax_emu::warp_op(::phax_emu::W_SYNC, mask, 0, 0, 32, file, line);
}
#define PHAX_EMU_SHFL_(fn, kind)                                                                  \
    template <class T>                                                                            \
    inline T fn(unsigned mask, T v, int arg, int width = 32, const char *file = __builtin_FILE(), \
                int line = __builtin_LINE()) {                                                    \
        return ::phax_emu::from_bits<T>(                                                          \
            ::phax_emu::warp_op(::phax_emu::kind, mask, ::phax_emu::to_bits(v), arg, width, file, line)); \
    }
PHAX_EMU_SHFL_(__shfl_sync, W_SHFL)
PHAX_EMU_SHFL_(__shfl_up_sync, W_SHFL_UP)
PHAX_EMU_SHFL_(__shfl_down_sync, W_SHFL_DOWN)
PHAX_EMU_SHFL_(__shfl_xor_sync, W_SHFL_XOR)
#undef PHAX_EMU_SHFL_
inline unsigned __ballot_sync(unsigned mask, int p, const char *file = __builtin_FILE(),
                              int line = __builtin_LINE()) {
    return (unsigned)::phax_emu::warp_op(::phax_emu::W_BALLOT, mask, p ? 1u : 0u, 0, 32, file, line);
}
inline int __any_sync(unsigned mask, int p, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    return (int)::phax_emu::warp_op(::phax_emu::W_ANY, mask, p ? 1u : 0u, 0, 32, file, line);
}
inline int __all_sync(unsigned mask, int p, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    return (int)::phax_emu::warp_op(::phax_emu::W_ALL, mask, p ? 1u : 0u, 0, 32, file, line);
}

// Atomics: fibers are cooperative on one OS thread, so a plain read-modify-write is atomic.
template <class T>
inline T atomicAdd(T *p, T v) {
    T old = *p;
    *p = old + v;
    return old;
}
template <class T>
inline T atomicMax(T *p, T v) {
    T old = *p;
    *p = old < v ? v : old;
    return old;
}
template <class T>
inline T atomicMin(T *p, T v) {
    T old = *p;
    *p = v < old ? v : old;
    return old;
}
template <class T>
inline T atomicExch(T *p, T v) {
    T old = *p;
    *p = v;
    return old;
}
template <class T>
inline T atomicCAS(T *p, T cmp, T v) {
    T old = *p;
    if (old == cmp) *p = v;
    return old;
}

// Device math that the host library lacks.
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
template <class T>
inline T __ldg(const T *p) {
    return *p;
}

// The launch, and dynamic shared memory (fast/cuda/cuda_common.cuh has the nvcc forms).
#define PHAX_LAUNCH(k, grid, block, smem, stream, ...) \
    ::phax_emu::launch_kernel(#k, dim3(grid), dim3(block), (smem), (stream), k, ##__VA_ARGS__)
#define PHAX_DYN_SMEM(T, name) T *name = static_cast<T *>(::phax_emu::dyn_smem())

#endif
