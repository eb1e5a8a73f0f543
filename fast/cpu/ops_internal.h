// fast/cpu internals shared by the op files (embedding.c, linear.c, norm.c, activation.c,
// ffn.c, rope.c, mix.c, loss.c, adamw.c): thresholds, the row partition, libmvec's
// vector expf/erfcf and the float σ pair. Not a public header: it includes <cblas.h>.
//
// Performance notes. Matrix products are one fcpu_sgemm over all rows. The rest
// is memory-bound: one parallel loop over rows (or elements) with the row kept in
// L1/L2 between its passes. Sums vectorise through `omp simd reduction` (no
// fast-math needed): the norms' row statistics in "block-float" (float lanes over
// blocks of 256, blocks added in double; see norm.c), the long sums over rows or
// elements (column sums, mix's dot products, losses, the gradient norm, dg/db
// partials) on double accumulators.
// expf/erfcf vectorise through glibc's libmvec (declared `simd` below; the vector
// variants are accurate to a few ulp), which only `omp simd` loops may call.
#ifndef PHAX_FCPU_OPS_INTERNAL_H
#define PHAX_FCPU_OPS_INTERNAL_H

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "phax/fcpu.h"
#include "phax/fcpu_gemm.h"

#if defined(__x86_64__) && defined(__GLIBC__)
// expf/erfcf under names GCC does not treat as builtins, declared `simd`, so
// that `#pragma omp simd` loops call libmvec's _ZGV*_expf / _ZGV*_erfcf. (Under
// the builtin names, -fmath-errno makes GCC wrap expf in a range check, which
// blocks vectorisation; we never read errno.)
__attribute__((simd("notinbranch"), const, nothrow)) extern float vexpf(float) __asm__("expf");
__attribute__((simd("notinbranch"), const, nothrow)) extern float verfcf(float) __asm__("erfcf");
#else
#define vexpf expf
#define verfcf erfcf
#endif
#ifdef __AVX512F__
#include <immintrin.h>
#endif

// Below this many elements a loop runs on one thread (a parallel region costs
// a few microseconds; at ~10 GB/s that is ~64K floats).
#define PAR_MIN 32768
// The bias fill and db column sum around linear's sgemms stay on one thread below
// this many elements: each OpenMP region next to an OpenBLAS call hands the second
// core from one thread pool to the other (both spin-wait for a while), which costs
// more than the ~20 µs the fill takes alone at the model's small shapes.
#define LIN_PAR_MIN (1 << 20)

static inline size_t part_lo(size_t n, int parts, int i) { return n * (size_t)i / (size_t)parts; }

// σ(z) and σ(−z) from one e = exp(−|z|) ∈ (0, 1]: no overflow, and 1 − σ keeps
// its relative accuracy (it is never formed by subtraction). For `omp simd` loops.
static inline __attribute__((always_inline)) void sigmoid2(float z, float *s, float *sneg) {
    float e = vexpf(-fabsf(z)), q = 1.0f / (1.0f + e);
    *s = z >= 0 ? q : e * q;
    *sneg = z >= 0 ? e * q : q;
}

// Blocks of elements per task for the elementwise loops.
#define EW_BLOCK 8192

#endif
