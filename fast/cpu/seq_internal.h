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
// spins. So in that build the BLAS thread count is set to 1 for the duration of a call that
// runs more than one (b, h) thread, and restored afterwards (a process-wide setting: concurrent
// BLAS users in other threads see 1 meanwhile). OpenBLAS's OpenMP build already runs one thread
// inside a parallel region, and its openblas_set_num_threads also sets OpenMP's thread count:
// restoring OpenBLAS's count there would leave omp_get_max_threads() at OpenBLAS's, and the next
// call would carve more slots than its workspace was sized for (a review found it: OpenBLAS at
// 6 threads and OpenMP at 2 wrote past the workspace). So that build is left alone, and
// OpenMP's count is restored in any case.
typedef struct {
    int blas, omp;
} blas_hold;
static inline blas_hold blas_single_begin(int ns) {
    blas_hold h = {openblas_get_num_threads(), omp_get_max_threads()};
    if (ns > 1 && h.blas > 1 && openblas_get_parallel() != 2) openblas_set_num_threads(1);
    return h;
}
static inline void blas_single_end(int ns, blas_hold h) {
    if (ns > 1 && h.blas > 1 && openblas_get_parallel() != 2) openblas_set_num_threads(h.blas);
    if (omp_get_max_threads() != h.omp) omp_set_num_threads(h.omp);
}

#endif
