// fast/cpu internals of the chunkwise sequence kernels (mlstm.c, gdn.c): workspace carving,
// the per-thread slots over the B·H sequences, and OpenBLAS held at one thread while the
// sequences' threads each issue their own BLAS calls. Not a public header.
#ifndef PHAX_FCPU_SEQ_INTERNAL_H
#define PHAX_FCPU_SEQ_INTERNAL_H

#include <cblas.h>
#include <omp.h>
#include <stddef.h>

// Workspace carving: offsets 64-byte aligned; with base NULL only sizes.
typedef struct {
    char *base;
    size_t used;
} carve;

static inline void *take(carve *c, size_t bytes) {
    size_t o = (c->used + 63) & ~(size_t)63;
    c->used = o + bytes;
    return c->base ? c->base + o : NULL;
}

// Chunks of L covering T, without forming T + L − 1 (which overflows int near INT_MAX).
static inline int nchunks(int T, int L) { return T > 0 ? (T - 1) / L + 1 : 0; }

// One scratch slot per thread, at most one per (b, h) sequence.
static inline int nslots(int B, int H) {
    int t = omp_get_max_threads();
    long bh = (long)B * H;
    return (int)(bh < t ? (bh > 0 ? bh : 1) : t);
}

// The sgemm calls run inside the (b, h) parallel region, one per thread: a threaded OpenBLAS
// (pthreads build) would otherwise split products above its threshold (M·N·K > 262144, e.g.
// chunk 128) over its own thread pool from several callers at once, which serialises and
// spins. So the BLAS thread count is set to 1 for the duration of a call that runs more than
// one (b, h) thread, and restored afterwards (a process-wide setting: concurrent BLAS users in
// other threads see 1 meanwhile).
static inline int blas_single_begin(int ns) {
    int prev = openblas_get_num_threads();
    if (ns > 1 && prev > 1) openblas_set_num_threads(1);
    return prev;
}
static inline void blas_single_end(int ns, int prev) {
    if (ns > 1 && prev > 1) openblas_set_num_threads(prev);
}

#endif
