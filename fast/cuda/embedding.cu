// fast/cuda embedding, float32 (phax/fcuda.h; the contract of phax/fcpu_embedding.h; semantics:
// ref/embedding.c): the forward a gather, the backward a scatter-add in token order.
//
// Forward: a token outside [0, V) fails with PHAX_ERR before anything is written, as on
// fast/cpu. A first kernel records the lowest bad index (atomicMin into one device word the
// library allocates once), the gather writes nothing when it is set, and the host reads the
// word back (one 8-byte download and a stream sync per call) to report it.
// Backward: dE[tok[t], j] += dx[t, j] for every (t, j). Rows of repeated tokens meet in the same
// elements, and atomicAdd would add them in the device's order of the day (the last bits varied
// from run to run on an H200, failing the token-order and determinism tests). Instead each
// element has one owner: thread (j, p) walks all n tokens in order and adds those with
// tok mod P == p into column j, so dE is the token-order sum, bit for bit, on any schedule.
// P partitions of the vocabulary, P·ceil(d/256) blocks of 256 threads (about 32k); every thread
// reads every token id (one broadcast load a warp, the warp shares p) and only its own rows of
// dx. The tokens are trusted (the forward checked them).
#include <climits>

#include "cuda_common.cuh"

#define EMB_THREADS 256u
#define NO_BAD ULLONG_MAX

static unsigned long long *bad_word;  // device: the lowest bad token index, NO_BAD if none

static __global__ void check_tokens_k(unsigned long long *bad, const int32_t *__restrict__ tok, size_t n, int V) {
    for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < n; t += (size_t)gridDim.x * blockDim.x)
        if (tok[t] < 0 || tok[t] >= V) atomicMin(bad, (unsigned long long)t);
}

static __global__ void gather_k(float *__restrict__ x, const float *__restrict__ E, const int32_t *__restrict__ tok,
                                size_t total, int d, const unsigned long long *bad) {
    if (*bad != NO_BAD) return;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t t = i / (size_t)d, j = i % (size_t)d;
        x[i] = E[(size_t)tok[t] * d + j];
    }
}

// grid (ceil(d / EMB_THREADS), P): column j = blockIdx.x·blockDim.x + threadIdx.x, partition p = blockIdx.y.
static __global__ void scatter_add_k(float *__restrict__ dE, const float *__restrict__ dx,
                                     const int32_t *__restrict__ tok, size_t n, int d, unsigned P) {
    const size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const unsigned p = blockIdx.y;
    if (j >= (size_t)d) return;
    for (size_t t = 0; t < n; t++) {
        const unsigned v = (unsigned)tok[t];
        if ((v & (P - 1)) == p) dE[(size_t)v * d + j] += dx[t * d + j];
    }
}

extern "C" int fcuda_embedding_fwd(float *x, const float *E, const int32_t *tok, size_t n, int V, int d,
                                    void *stream) {
    if (d < 0) return phax_fail("cuda embedding_fwd: width d = %d is negative", d);
    if (n == 0) return PHAX_OK;
    cudaStream_t s = fcuda_stream(stream);
    if (!bad_word && fcuda_ok(cudaMalloc(&bad_word, sizeof *bad_word), "embedding_fwd")) {
        bad_word = nullptr;
        return PHAX_ERR;
    }
    if (fcuda_ok(cudaMemsetAsync(bad_word, 0xFF, sizeof *bad_word, s), "embedding_fwd")) return PHAX_ERR;
    PHAX_LAUNCH(check_tokens_k, fcuda_ew_blocks(n, EMB_THREADS), EMB_THREADS, 0, s, bad_word, tok, n, V);
    if (fcuda_check("embedding_fwd")) return PHAX_ERR;
    size_t total = n * (size_t)d;
    if (total) {
        PHAX_LAUNCH(gather_k, fcuda_ew_blocks(total, EMB_THREADS), EMB_THREADS, 0, s, x, E, tok, total, d,
                    (const unsigned long long *)bad_word);
        if (fcuda_check("embedding_fwd")) return PHAX_ERR;
    }
    unsigned long long bad = NO_BAD;
    if (fcuda_ok(cudaMemcpyAsync(&bad, bad_word, sizeof bad, cudaMemcpyDeviceToHost, s), "embedding_fwd") ||
        fcuda_ok(cudaStreamSynchronize(s), "embedding_fwd"))
        return PHAX_ERR;
    if (bad == NO_BAD) return PHAX_OK;
    int32_t id = 0;
    if (fcuda_ok(cudaMemcpyAsync(&id, tok + bad, sizeof id, cudaMemcpyDeviceToHost, s), "embedding_fwd") ||
        fcuda_ok(cudaStreamSynchronize(s), "embedding_fwd"))
        return PHAX_ERR;
    return phax_fail("cuda embedding_fwd: token id %ld at index %llu is outside [0, %d)", (long)id, bad, V);
}

extern "C" int fcuda_embedding_bwd(float *dE, const float *dx, const int32_t *tok, size_t n, int d, void *stream) {
    if (!dE || d <= 0 || n == 0) return PHAX_OK;
    const unsigned cols = (unsigned)(((size_t)d + EMB_THREADS - 1) / EMB_THREADS);
    unsigned P = 1;  // a power of two (tok & (P - 1)), P·cols blocks ≤ 128: about 32k threads
    while (2 * P * cols <= 32768u / EMB_THREADS) P *= 2;
    PHAX_LAUNCH(scatter_add_k, dim3(cols, P), EMB_THREADS, 0, fcuda_stream(stream), dE, dx, tok, n, d, P);
    return fcuda_check("embedding_bwd");
}
