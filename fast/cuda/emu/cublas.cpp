// cuBLAS on the CPU (fast/cuda/emu/cublas.h; docs/cuda.md): validation as cuBLAS documents
// it, every matrix inside one emulated allocation, then OpenBLAS's cblas_sgemm in column-major
// order with the same transpose flags.
#include "cublas.h"

#include <cblas.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <vector>

namespace phax_emu {

struct emu_cublas {
    cudaStream_t stream;
    cublasMath_t math;
};

namespace {

std::set<emu_cublas *> &live() {
    static std::set<emu_cublas *> s;
    return s;
}

char detail[512];
cublasStatus_t detail_code = CUBLAS_STATUS_SUCCESS;

cublasStatus_t fail(cublasStatus_t s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
cublasStatus_t fail(cublasStatus_t s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    detail_code = s;
    fprintf(stderr, "cuda-emu: %s\n", detail);
    return s;
}

// A fault of the device: the runtime's last error becomes cudaErrorIllegalAddress (as a
// kernel's out-of-bounds access would make it) and the call fails.
cublasStatus_t fault(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
cublasStatus_t fault(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    detail_code = CUBLAS_STATUS_EXECUTION_FAILED;
    record_error(cudaErrorIllegalAddress, "%s", detail);
    return CUBLAS_STATUS_EXECUTION_FAILED;
}

bool op_ok(cublasOperation_t t) { return t == CUBLAS_OP_N || t == CUBLAS_OP_T || t == CUBLAS_OP_C; }
const char *op_name(cublasOperation_t t) { return t == CUBLAS_OP_N ? "N" : "T"; }
int imax1(int a) { return a > 1 ? a : 1; }

// Floats spanned by a rows × cols column-major matrix with leading dimension ld.
size_t extent(int rows, int cols, int ld) {
    if (rows <= 0 || cols <= 0) return 0;
    return (size_t)(cols - 1) * (size_t)ld + (size_t)rows;
}

// The matrix [p, p + n floats) inside one allocation, or a fault naming it.
bool inside(const char *fn, const char *name, const float *p, size_t n, int rows, int cols, int ld,
            int batch, cublasStatus_t *st) {
    if (n == 0 || device_range(p, n * sizeof(float))) return true;
    char b[32] = "";
    if (batch >= 0) snprintf(b, sizeof b, ", batch %d", batch);
    *st = fault("%s: %s (%d x %d, ld %d%s) at %p: its %zu floats are not inside one cudaMalloc allocation", fn,
                name, rows, cols, ld, b, (const void *)p, n);
    return false;
}

// The TF32 copy of a matrix's span.
void tf32_copy(std::vector<float> &dst, const float *src, size_t n) {
    dst.resize(n);
    for (size_t i = 0; i < n; i++) dst[i] = tf32_round(src[i]);
}

cublasStatus_t gemm(const char *fn, cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                    int n, int k, const float *alpha, const float *A, int lda, long long sA, const float *B,
                    int ldb, long long sB, const float *beta, float *C, int ldc, long long sC, int batch,
                    bool tf32) {
    if (!h || !live().count(h))
        return fail(CUBLAS_STATUS_NOT_INITIALIZED, "%s: handle %p was not created by cublasCreate (or was destroyed)", fn,
                    (void *)h);
    if (!op_ok(ta) || !op_ok(tb))
        return fail(CUBLAS_STATUS_INVALID_VALUE, "%s: transa %d, transb %d: not CUBLAS_OP_N/T/C", fn, (int)ta, (int)tb);
    if (m < 0 || n < 0 || k < 0)
        return fail(CUBLAS_STATUS_INVALID_VALUE, "%s: m %d, n %d, k %d: negative", fn, m, n, k);
    if (batch < 0) return fail(CUBLAS_STATUS_INVALID_VALUE, "%s: batchCount %d < 0", fn, batch);
    // Stored shapes: op(A) is m × k, so A is m × k (N) or k × m (T); op(B) k × n.
    int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
    int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
    if (lda < imax1(ar))
        return fail(CUBLAS_STATUS_INVALID_VALUE, "%s: lda %d < max(1, %s) = %d (transa %s, m %d, k %d)", fn, lda,
                    ta == CUBLAS_OP_N ? "m" : "k", imax1(ar), op_name(ta), m, k);
    if (ldb < imax1(br))
        return fail(CUBLAS_STATUS_INVALID_VALUE, "%s: ldb %d < max(1, %s) = %d (transb %s, k %d, n %d)", fn, ldb,
                    tb == CUBLAS_OP_N ? "k" : "n", imax1(br), op_name(tb), k, n);
    if (ldc < imax1(m))
        return fail(CUBLAS_STATUS_INVALID_VALUE, "%s: ldc %d < max(1, m) = %d", fn, ldc, imax1(m));
    if (!alpha || !beta) return fail(CUBLAS_STATUS_INVALID_VALUE, "%s: alpha or beta is NULL", fn);
    if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;  // nothing to do
    if (device_range(alpha, sizeof(float)) || device_range(beta, sizeof(float)))
        return fault("%s: alpha or beta is device memory, but the pointer mode is host (it would be read as a host address)",
                     fn);
    float a = *alpha, b = *beta;
    bool reads_ab = k > 0 && a != 0.0f;  // otherwise A and B are not referenced
    size_t na = extent(ar, ac, lda), nb = extent(br, bc, ldb), nc = extent(m, n, ldc);
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    bool batched = !strcmp(fn, "cublasSgemmStridedBatched");  // its messages name the batch
    for (int i = 0; i < batch; i++) {
        int tag = batched ? i : -1;
        if (reads_ab && (!inside(fn, "A", A ? A + i * sA : A, na, ar, ac, lda, tag, &st) ||
                         !inside(fn, "B", B ? B + i * sB : B, nb, br, bc, ldb, tag, &st)))
            return st;
        if (!inside(fn, "C", C ? C + i * sC : C, nc, m, n, ldc, tag, &st)) return st;
    }
    std::vector<float> ta32, tb32;
    for (int i = 0; i < batch; i++) {
        const float *Ai = reads_ab ? A + i * sA : nullptr, *Bi = reads_ab ? B + i * sB : nullptr;
        float *Ci = C + i * sC;
        if (b == 0.0f)  // C is not read: poison in it must not reach the result
            for (int j = 0; j < n; j++) memset(Ci + (size_t)j * ldc, 0, (size_t)m * sizeof(float));
        if (!reads_ab) {
            if (b != 0.0f && b != 1.0f)
                for (int j = 0; j < n; j++)
                    for (int r = 0; r < m; r++) Ci[(size_t)j * ldc + r] *= b;
            continue;
        }
        if (tf32) {
            tf32_copy(ta32, Ai, na), tf32_copy(tb32, Bi, nb);
            Ai = ta32.data(), Bi = tb32.data();
        }
        cblas_sgemm(CblasColMajor, ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
                    tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, m, n, k, a, Ai, lda, Bi, ldb, b, Ci, ldc);
    }
    return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

float tf32_round(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u) return x;  // inf, NaN
    u = (u + 0x1000u) & ~0x1fffu;                     // 13 bits dropped, half of them added: ties away
    memcpy(&x, &u, sizeof x);
    return x;
}

cublasStatus_t cublasCreate(cublasHandle_t *h) {
    if (!h) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasCreate: null result pointer");
    *h = new emu_cublas{nullptr, CUBLAS_DEFAULT_MATH};
    live().insert(*h);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t h) {
    if (!h || !live().erase(h))
        return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasDestroy: handle %p was not created by cublasCreate", (void *)h);
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
    if (!h || !live().count(h))
        return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetStream: handle %p was not created by cublasCreate", (void *)h);
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t h, cudaStream_t *s) {
    if (!h || !live().count(h))
        return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasGetStream: handle %p was not created by cublasCreate", (void *)h);
    if (!s) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasGetStream: null result pointer");
    *s = h->stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode) {
    if (!h || !live().count(h))
        return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetMathMode: handle %p was not created by cublasCreate", (void *)h);
    if (mode != CUBLAS_DEFAULT_MATH && mode != CUBLAS_PEDANTIC_MATH && mode != CUBLAS_TF32_TENSOR_OP_MATH)
        return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasSetMathMode: mode %d not emulated", (int)mode);
    h->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t s) {
    switch (s) {
        case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
        case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasGetStatusString(cublasStatus_t s) {
    if (s == CUBLAS_STATUS_SUCCESS) return "success";
    return s == detail_code && detail[0] ? detail : cublasGetStatusName(s);
}

cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc) {
    bool tf32 = h && live().count(h) && h->math == CUBLAS_TF32_TENSOR_OP_MATH;
    return gemm("cublasSgemm", h, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1, tf32);
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType_t Atype, int lda, const void *B,
                            cudaDataType_t Btype, int ldb, const void *beta, void *C, cudaDataType_t Ctype, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo) {
    (void)algo;  // every algorithm computes the same product here
    if (Atype != CUDA_R_32F || Btype != CUDA_R_32F || Ctype != CUDA_R_32F)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, "cublasGemmEx: types A %d, B %d, C %d: only CUDA_R_32F is emulated",
                    (int)Atype, (int)Btype, (int)Ctype);
    if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED,
                    "cublasGemmEx: compute type %d: only CUBLAS_COMPUTE_32F and _32F_FAST_TF32 are emulated", (int)compute);
    bool tf32 = compute == CUBLAS_COMPUTE_32F_FAST_TF32 ||
                (h && live().count(h) && h->math == CUBLAS_TF32_TENSOR_OP_MATH);
    return gemm("cublasGemmEx", h, ta, tb, m, n, k, static_cast<const float *>(alpha), static_cast<const float *>(A),
                lda, 0, static_cast<const float *>(B), ldb, 0, static_cast<const float *>(beta), static_cast<float *>(C),
                ldc, 0, 1, tf32);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float *alpha, const float *A, int lda, long long strideA,
                                         const float *B, int ldb, long long strideB, const float *beta, float *C,
                                         int ldc, long long strideC, int batchCount) {
    bool tf32 = h && live().count(h) && h->math == CUBLAS_TF32_TENSOR_OP_MATH;
    return gemm("cublasSgemmStridedBatched", h, ta, tb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc,
                strideC, batchCount, tf32);
}

}  // namespace phax_emu
