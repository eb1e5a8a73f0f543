// fast/cpu mixed-precision matrix products: bf16 operands, float32 accumulation and
// result, through oneDNN's matmul primitive (AVX512-BF16 on this machine's cores). See
// phax/fcpu_gemm.h for the contract; docs/precision.md for when it is used.
//
// Per call: A and B are rounded to bf16 (to nearest, ties to even) into this thread's
// scratch, in their own layout (a transposed operand stays transposed: oneDNN reads it
// through strides), and one matmul primitive computes C = alpha·A·B + beta·C in float32.
// Primitives are made once per (shape, layout, alpha, beta) and kept in a small per-thread
// table: creating one costs ~10-100 µs, executing a small one less.
#include "phax/fcpu_gemm.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "phax/core.h"

// The matmul precision of this thread (fcpu_mm reads it).
static _Thread_local int mm_precision = FCPU_MM_F32;

int fcpu_mm_precision(void) { return mm_precision; }

int fcpu_mm_precision_set(int precision) {
    if (precision != FCPU_MM_F32 && precision != FCPU_MM_BF16)
        return phax_fail("matmul precision %d is neither FCPU_MM_F32 nor FCPU_MM_BF16", precision);
    if (precision == FCPU_MM_BF16 && !fcpu_bf16_available()) return phax_fail("%s", fcpu_bf16_unavailable());
    mm_precision = precision;
    return PHAX_OK;
}

void fcpu_mm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
             const float *B, int ldb, float beta, float *C, int ldc) {
    if (mm_precision == FCPU_MM_BF16)
        fcpu_gemm_bf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else
        fcpu_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// Round to nearest bf16, ties to even (what VCVTNEPS2BF16 does, except that it also flushes
// subnormals: here they are rounded like any other value). NaN stays NaN (quieted).
static inline uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float fcpu_bf16_round(float x) {
    uint32_t u = (uint32_t)to_bf16(x) << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#ifdef PHAX_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>

// oneDNN has a bf16 matmul only on CPUs with AVX-512 (AVX512-BF16 natively, plain AVX-512 core
// by conversion) or AMX: on an AVX2-only CPU its primitive descriptor is "unimplemented". Probed
// once, with the one shape every use shares the code path of (a 16 x 16 x 16 product), so that
// callers refuse the tier with one line instead of failing inside a step.
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static const char *unavailable_why;  // NULL: available

static void probe(void) {
    static char why[200];
    dnnl_engine_t eng = NULL;
    dnnl_memory_desc_t a, b, c;
    dnnl_dims_t dims = {16, 16}, strides = {16, 1};
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t st = dnnl_engine_create(&eng, dnnl_cpu, 0);
    if (st == dnnl_success) st = dnnl_memory_desc_init_by_strides(&a, 2, dims, dnnl_bf16, strides);
    if (st == dnnl_success) st = dnnl_memory_desc_init_by_strides(&b, 2, dims, dnnl_bf16, strides);
    if (st == dnnl_success) st = dnnl_memory_desc_init_by_strides(&c, 2, dims, dnnl_f32, strides);
    if (st == dnnl_success) st = dnnl_matmul_desc_init(&desc, &a, &b, NULL, &c);
    if (st == dnnl_success) st = dnnl_primitive_desc_create(&pd, &desc, NULL, eng, NULL);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (eng) dnnl_engine_destroy(eng);
    if (st == dnnl_success) return;
    snprintf(why, sizeof why,
             "bf16 matmuls: oneDNN has none on this CPU (%s; it needs AVX-512 or AMX; docs/precision.md)",
             st == dnnl_unimplemented ? "unimplemented" : "its matmul failed to set up");
    unavailable_why = why;
}

int fcpu_bf16_available(void) {
    pthread_once(&probe_once, probe);
    return !unavailable_why;
}

const char *fcpu_bf16_unavailable(void) { return fcpu_bf16_available() ? NULL : unavailable_why; }

// rows × cols of src (row stride ld) into dst, packed (row stride cols).
static void convert(uint16_t *restrict dst, const float *restrict src, int rows, int cols, int ld) {
    long n = (long)rows * cols;
#pragma omp parallel for schedule(static) if (n >= (1L << 15) && !omp_in_parallel())
    for (int i = 0; i < rows; i++) {
        const float *s = src + (size_t)i * ld;
        uint16_t *d = dst + (size_t)i * cols;
#pragma omp simd
        for (int j = 0; j < cols; j++) d[j] = to_bf16(s[j]);
    }
}

typedef struct {
    int M, N, K, ta, tb, ldc;
    float alpha, beta;
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c;
    unsigned long used;  // last use (least recently used entry is replaced)
} entry;

#define N_ENTRIES 64  // a training step of the largest model uses ~30 distinct products

typedef struct {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    entry e[N_ENTRIES];
    int n;
    unsigned long clock;
    uint16_t *buf;   // bf16 operands: A then B
    size_t cap;      // elements of buf
} thread_state;

static _Thread_local thread_state ts;

static void dnnl_die(dnnl_status_t st, const char *what) {
    // Unreachable with the shapes fcpu_gemm_bf16 is given (checked positive); an internal
    // error of the library is not a condition a caller could handle.
    fprintf(stderr, "phax: oneDNN %s failed (status %d)\n", what, (int)st);
    abort();
}
#define DNNL_OK(call, what)                        \
    do {                                           \
        dnnl_status_t st_ = (call);                \
        if (st_ != dnnl_success) dnnl_die(st_, what); \
    } while (0)

static void md_2d(dnnl_memory_desc_t *md, int rows, int cols, dnnl_dim_t s0, dnnl_dim_t s1, dnnl_data_type_t dt) {
    dnnl_dims_t dims = {rows, cols}, strides = {s0, s1};
    DNNL_OK(dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides), "memory descriptor");
}

static entry *lookup(int ta, int tb, int M, int N, int K, float alpha, float beta, int ldc) {
    thread_state *t = &ts;
    if (!t->eng) {
        DNNL_OK(dnnl_engine_create(&t->eng, dnnl_cpu, 0), "engine");
        DNNL_OK(dnnl_stream_create(&t->stream, t->eng, dnnl_stream_default_flags), "stream");
    }
    t->clock++;
    for (int i = 0; i < t->n; i++) {
        entry *e = &t->e[i];
        if (e->M == M && e->N == N && e->K == K && e->ta == ta && e->tb == tb && e->ldc == ldc &&
            e->alpha == alpha && e->beta == beta) {
            e->used = t->clock;
            return e;
        }
    }
    entry *e;
    if (t->n < N_ENTRIES) {
        e = &t->e[t->n++];
    } else {  // replace the least recently used
        e = &t->e[0];
        for (int i = 1; i < N_ENTRIES; i++)
            if (t->e[i].used < e->used) e = &t->e[i];
        dnnl_primitive_destroy(e->prim);
        dnnl_memory_destroy(e->a), dnnl_memory_destroy(e->b), dnnl_memory_destroy(e->c);
    }
    *e = (entry){.M = M, .N = N, .K = K, .ta = ta, .tb = tb, .ldc = ldc, .alpha = alpha, .beta = beta,
                 .used = t->clock};
    // Operands packed in the call's own layout (a transposed one read through strides). Tried
    // and measured (bench_model, d = 256, T = 512, bf16 tokens/s): this 5806 (pha) and 7810
    // (transformer); transposing A into row-major, B into "ba", or both while rounding
    // 4887-5202 / 6651-7057, and 3605 / 4958: a transpose costs more than oneDNN loses on it.
    dnnl_memory_desc_t a_md, b_md, c_md;
    md_2d(&a_md, M, K, ta ? 1 : K, ta ? M : 1, dnnl_bf16);
    md_2d(&b_md, K, N, tb ? 1 : N, tb ? K : 1, dnnl_bf16);
    md_2d(&c_md, M, N, ldc, 1, dnnl_f32);
    dnnl_matmul_desc_t desc;
    DNNL_OK(dnnl_matmul_desc_init(&desc, &a_md, &b_md, NULL, &c_md), "matmul descriptor");
    dnnl_primitive_attr_t attr;
    DNNL_OK(dnnl_primitive_attr_create(&attr), "attribute");
    if (alpha != 1.0f) DNNL_OK(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha), "output scale");
    if (beta != 0.0f) {  // C ← alpha·AB + beta·C; with beta 0, C is only written (its NaNs do not matter)
        dnnl_post_ops_t po;
        DNNL_OK(dnnl_post_ops_create(&po), "post-ops");
        DNNL_OK(dnnl_post_ops_append_sum(po, beta), "sum post-op");
        DNNL_OK(dnnl_primitive_attr_set_post_ops(attr, po), "post-ops");
        dnnl_post_ops_destroy(po);
    }
    dnnl_primitive_desc_t pd;
    DNNL_OK(dnnl_primitive_desc_create(&pd, &desc, attr, t->eng, NULL), "matmul primitive descriptor");
    dnnl_primitive_attr_destroy(attr);
    DNNL_OK(dnnl_primitive_create(&e->prim, pd), "matmul primitive");
    dnnl_primitive_desc_destroy(pd);
    DNNL_OK(dnnl_memory_create(&e->a, &a_md, t->eng, DNNL_MEMORY_NONE), "memory");
    DNNL_OK(dnnl_memory_create(&e->b, &b_md, t->eng, DNNL_MEMORY_NONE), "memory");
    DNNL_OK(dnnl_memory_create(&e->c, &c_md, t->eng, DNNL_MEMORY_NONE), "memory");
    return e;
}

// This thread's operand scratch, grown (never shrunk) to n elements.
static uint16_t *scratch(size_t n) {
    thread_state *t = &ts;
    if (n <= t->cap) return t->buf;
    phax_free(t->buf);
    t->buf = phax_alloc(n * sizeof *t->buf);
    if (!t->buf) {
        fprintf(stderr, "phax: out of memory (bf16 operands of %zu elements)\n", n);
        abort();
    }
    t->cap = n;
    return t->buf;
}

const char *fcpu_bf16_impl(int M, int N, int K) {
    static _Thread_local char name[64];
    entry *e = lookup(0, 1, M, N, K, 1.0f, 0.0f, N);
    const_dnnl_primitive_desc_t pd;
    const char *s = NULL;
    if (dnnl_primitive_get_primitive_desc(e->prim, &pd) == dnnl_success &&
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, (void *)&s) == dnnl_success && s)
        snprintf(name, sizeof name, "%s", s);
    else
        snprintf(name, sizeof name, "unknown");
    return name;
}

void fcpu_gemm_bf16(int ta_flag, int tb_flag, int M, int N, int K, float alpha, const float *A, int lda,
                    const float *B, int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    int ta = ta_flag == FCPU_TRANS, tb = tb_flag == FCPU_TRANS;
    if (K <= 0) {  // C ← beta·C (BLAS: beta 0 writes zeros, whatever C held)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
        return;
    }
    size_t na = (size_t)M * K, nb = (size_t)K * N;
    uint16_t *a = scratch(na + nb), *b = a + na;
    if (ta) convert(a, A, K, M, lda);  // A stored K×M
    else convert(a, A, M, K, lda);
    if (tb) convert(b, B, N, K, ldb);  // B stored N×K
    else convert(b, B, K, N, ldb);
    entry *e = lookup(ta, tb, M, N, K, alpha, beta, ldc);
    DNNL_OK(dnnl_memory_set_data_handle(e->a, a), "data handle");
    DNNL_OK(dnnl_memory_set_data_handle(e->b, b), "data handle");
    DNNL_OK(dnnl_memory_set_data_handle(e->c, C), "data handle");
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, e->a}, {DNNL_ARG_WEIGHTS, e->b}, {DNNL_ARG_DST, e->c}};
    DNNL_OK(dnnl_primitive_execute(e->prim, ts.stream, 3, args), "matmul");
    DNNL_OK(dnnl_stream_wait(ts.stream), "stream wait");
}

#else  // no oneDNN in this build: fcpu_mm_precision_set refuses bf16, so only tests reach these

int fcpu_bf16_available(void) { return 0; }
const char *fcpu_bf16_unavailable(void) {
    return "bf16 matmuls need oneDNN: this build has none (install libdnnl-dev and reconfigure; docs/precision.md)";
}
const char *fcpu_bf16_impl(int M, int N, int K) {
    (void)M, (void)N, (void)K;
    return "none (built without oneDNN)";
}
void fcpu_gemm_bf16(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                    const float *B, int ldb, float beta, float *C, int ldc) {
    (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B, (void)ldb,
        (void)beta, (void)C, (void)ldc;
    fprintf(stderr, "phax: fcpu_gemm_bf16 called in a build without oneDNN\n");
    abort();
}
#endif
