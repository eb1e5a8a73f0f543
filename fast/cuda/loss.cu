// fast/cuda cross-entropy (fused softmax, target −1 ignored) and its fusion with the output
// projection, float32 (phax/fcuda.h; semantics: ref/loss.c; contract: phax/fcpu_loss.h).
//   * The targets are checked first (the lowest bad row by atomicMin, the count of scored rows
//     by atomicAdd, in the workspace, read back: one 16-byte download and a sync a call), so a
//     bad target or a batch of only ignored rows fails before anything is written, and the
//     gradient's scale dloss/count is a launch argument.
//   * Rows: CE_BLOCKS blocks, each taking a fixed run of rows in order: max, Σ e^(x − max) in
//     double (block reductions), lse = max + log Σ; the block's losses summed in double in row
//     order into its partial; one thread adds the partials in order. The same bits on any device.
//   * linear_cross_entropy: per tile of lce_tile_rows(V) rows, logits = x Wᵀ (cuBLAS) into the
//     workspace, the rows turned into G = g (softmax − onehot) in place, then dx += G W and
//     dW += Gᵀ x (cuBLAS): the (n, V) logits never exist.
#include <cmath>

#include "blas.cuh"

#define CE_BLOCKS 256
#define CE_THREADS 256u
#define NO_BAD 0xffffffffffffffffull

// Workspace: the head ([0] lowest bad row, NO_BAD if none; [1] scored rows), then CE_BLOCKS
// partials and the running total over tiles (doubles).
typedef struct {
    unsigned long long bad, count;
} ce_head;

static __global__ void ce_head_init_k(ce_head *h) {
    h->bad = NO_BAD;
    h->count = 0;
}

static __global__ void ce_check_k(ce_head *h, const int32_t *__restrict__ t, size_t n, int V) {
    for (size_t r = blockIdx.x * (size_t)blockDim.x + threadIdx.x; r < n; r += (size_t)gridDim.x * blockDim.x) {
        if (t[r] < -1 || t[r] >= V) atomicMin(&h->bad, (unsigned long long)r);
        else if (t[r] >= 0) atomicAdd(&h->count, 1ull);
    }
}

// Checks the targets; *count = the scored rows. PHAX_ERR (nothing written) on a bad target,
// with fast/cpu's message.
static int ce_check(const char *op, size_t *count, const int32_t *targets, size_t n, int V, void *ws,
                    cudaStream_t s) {
    if (!ws) return phax_fail("cuda %s: no workspace", op);
    ce_head *h = static_cast<ce_head *>(ws), hh;
    PHAX_LAUNCH(ce_head_init_k, 1u, 1u, 0, s, h);
    if (fcuda_check(op)) return PHAX_ERR;
    if (n > 0) {
        PHAX_LAUNCH(ce_check_k, fcuda_ew_blocks(n, CE_THREADS), CE_THREADS, 0, s, h, targets, n, V);
        if (fcuda_check(op)) return PHAX_ERR;
    }
    if (fcuda_download(&hh, h, sizeof hh, s)) return PHAX_ERR;
    if (hh.bad != NO_BAD) {
        int32_t t = 0;
        if (fcuda_download(&t, targets + hh.bad, sizeof t, s)) return PHAX_ERR;
        return phax_fail("cross_entropy: target %d at row %llu is outside [0, %d) (or -1 to ignore)", (int)t,
                         hh.bad, V);
    }
    *count = (size_t)hh.count;
    return PHAX_OK;
}

// ce_check, and a batch of only ignored rows is an error too (a mean over no rows).
static int ce_prepare(const char *op, size_t *count, const int32_t *targets, size_t n, int V, void *ws,
                      cudaStream_t s) {
    if (ce_check(op, count, targets, n, V, ws, s)) return PHAX_ERR;
    if (*count == 0) return phax_fail("cross_entropy: all %zu targets are ignored (-1)", n);
    return PHAX_OK;
}

// mode 0 (cross_entropy): dl (may be NULL) += g (softmax − onehot), L read only.
// mode 1 (linear_cross_entropy's tile): L ← G = g (softmax − onehot) in place when grad (ignored
// rows zeroed), else read only. part[block] = Σ over its scored rows of lse − x_t.
static __global__ void ce_rows_k(double *__restrict__ part, float *dl, float *L, const int32_t *__restrict__ targets,
                                 size_t n, int V, float g, int mode, int grad) {
    __shared__ float redf[32];
    __shared__ double redd[32];
    size_t b = blockIdx.x, nb = gridDim.x, r0 = n * b / nb, r1 = n * (b + 1) / nb;
    double acc = 0;
    for (size_t r = r0; r < r1; r++) {
        float *x = L + r * (size_t)V;
        int t = targets[r];
        if (t < 0) {  // uniform over the block
            if (mode == 1 && grad)
                for (int j = threadIdx.x; j < V; j += blockDim.x) x[j] = 0.0f;
            continue;
        }
        float mx = -INFINITY;
        for (int j = threadIdx.x; j < V; j += blockDim.x) mx = fmaxf(mx, x[j]);
        mx = fcuda_block_max(mx, redf);
        float zt = x[t];
        double se = 0;
        for (int j = threadIdx.x; j < V; j += blockDim.x) se += expf(x[j] - mx);
        se = fcuda_block_sum_d(se, redd);  // every thread has read x before any writes below
        double lse = (double)mx + log(se);
        acc += lse - zt;
        if (mode == 0 && dl) {
            float sh = (float)(lse - (double)mx), *d = dl + r * (size_t)V;
            for (int j = threadIdx.x; j < V; j += blockDim.x) {
                float v = d[j] + g * expf((x[j] - mx) - sh);
                d[j] = j == t ? v - g : v;
            }
        } else if (mode == 1 && grad) {
            float sc = (float)((double)g / se);
            for (int j = threadIdx.x; j < V; j += blockDim.x) {
                float v = expf(x[j] - mx) * sc;
                x[j] = j == t ? v - g : v;
            }
        }
    }
    if (threadIdx.x == 0) part[b] = acc;
}

// run (device) = the running total over tiles (0 when first) + the partials in order; loss (may
// be NULL) = (float)(total / count).
static __global__ void ce_total_k(double *__restrict__ run, const double *__restrict__ part, int nb, int first,
                                  float *loss, double count) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    double s = first ? 0.0 : *run;
    for (int k = 0; k < nb; k++) s += part[k];
    *run = s;
    if (loss) *loss = (float)(s / count);
}

static int ce_run(const char *op, float *loss, float *dl, float g, float *L, const int32_t *targets, size_t n, int V,
                  int mode, int grad, void *ws, int first, double count, cudaStream_t s) {
    unsigned nb = (unsigned)(n < CE_BLOCKS ? n : CE_BLOCKS);
    double *part = reinterpret_cast<double *>(static_cast<char *>(ws) + sizeof(ce_head)), *tot = part + CE_BLOCKS;
    if (nb > 0) {
        PHAX_LAUNCH(ce_rows_k, nb, CE_THREADS, 0, s, part, dl, L, targets, n, V, g, mode, grad);
        if (fcuda_check(op)) return PHAX_ERR;
    }
    PHAX_LAUNCH(ce_total_k, 1u, 32u, 0, s, tot, (const double *)part, (int)nb, first, loss, count);
    return fcuda_check(op);
}

extern "C" size_t fcuda_cross_entropy_ws(void) { return sizeof(ce_head) + (CE_BLOCKS + 1) * sizeof(double); }

extern "C" int fcuda_cross_entropy_fwd(float *loss, const float *logits, const int32_t *targets, size_t n, int V,
                                        void *ws, void *stream) {
    return fcuda_cross_entropy_fwd_bwd(loss, nullptr, 0.0f, logits, targets, n, V, ws, stream);
}

extern "C" int fcuda_cross_entropy_bwd(float *dlogits, float dloss, const float *logits, const int32_t *targets,
                                        size_t n, int V, void *ws, void *stream) {
    size_t count;
    if (!dlogits) return ce_prepare("cross_entropy_bwd", &count, targets, n, V, ws, fcuda_stream(stream));
    return fcuda_cross_entropy_fwd_bwd(nullptr, dlogits, dloss, logits, targets, n, V, ws, stream);
}

extern "C" int fcuda_cross_entropy_fwd_bwd(float *loss, float *dlogits, float dloss, const float *logits,
                                            const int32_t *targets, size_t n, int V, void *ws, void *stream) {
    cudaStream_t s = fcuda_stream(stream);
    size_t count;
    if (ce_prepare("cross_entropy", &count, targets, n, V, ws, s)) return PHAX_ERR;
    float g = (float)((double)dloss / (double)count);
    return ce_run("cross_entropy", loss, dlogits, g, const_cast<float *>(logits), targets, n, V, 0, 0, ws, 1,
                  (double)count, s);
}

extern "C" size_t fcuda_lce_tile_rows(int V) {
    size_t r = V > 0 ? ((size_t)4 << 20) / (size_t)V : 1024;  // 16 MiB of logits, as fast/cpu
    return r < 256 ? 256 : r > 1024 ? 1024 : r;
}

// The workspace: one tile of logits (rows × V floats, 16-byte aligned), then cross_entropy's.
static size_t lce_tile_bytes(size_t n, int V) {
    size_t tile = fcuda_lce_tile_rows(V), rows = n < tile ? n : tile;
    return fcuda_align16(rows * (size_t)(V > 0 ? V : 0) * sizeof(float));
}

extern "C" size_t fcuda_linear_cross_entropy_ws(size_t n, int d, int V) {
    (void)d;
    return lce_tile_bytes(n, V) + fcuda_cross_entropy_ws();
}

extern "C" int fcuda_linear_cross_entropy(float *loss, float *dx, float *dW, float dloss, const float *x,
                                           const float *W, const int32_t *targets, size_t n, int d, int V, void *ws,
                                           void *stream) {
    cudaStream_t s = fcuda_stream(stream);
    if (!ws) return phax_fail("cuda linear_cross_entropy: no workspace");
    size_t tile = fcuda_lce_tile_rows(V);
    float *L = static_cast<float *>(ws);
    void *cws = static_cast<char *>(ws) + lce_tile_bytes(n, V);
    size_t count;
    if (ce_prepare("linear_cross_entropy", &count, targets, n, V, cws, s)) return PHAX_ERR;
    float g = (float)((double)dloss / (double)count);
    int grad = dx || dW;
    for (size_t r0 = 0; r0 < n; r0 += tile) {
        size_t R = n - r0 < tile ? n - r0 : tile;
        const float *xt = x + r0 * (size_t)d;
        if (d > 0) {  // logits (R, V) = x_tile Wᵀ
            if (fcuda_sgemm(0, 1, (int)R, V, d, 1.0f, xt, d, W, d, 0.0f, L, V, stream)) return PHAX_ERR;
        } else if (fcuda_ok(cudaMemsetAsync(L, 0, R * (size_t)V * sizeof(float), s), "linear_cross_entropy")) {
            return PHAX_ERR;
        }
        int last = r0 + R >= n;
        if (ce_run("linear_cross_entropy", last ? loss : nullptr, nullptr, g, L, targets + r0, R, V, 1, grad, cws,
                   r0 == 0, (double)count, s))
            return PHAX_ERR;
        if (!grad || d <= 0) continue;
        if (dx && fcuda_sgemm(0, 0, (int)R, d, V, 1.0f, L, V, W, d, 1.0f, dx + r0 * (size_t)d, d, stream))
            return PHAX_ERR;  // (R, d) += G (R, V) W (V, d)
        if (dW && fcuda_sgemm(1, 0, V, d, (int)R, 1.0f, L, V, xt, d, 1.0f, dW, d, stream))
            return PHAX_ERR;  // (V, d) += Gᵀ x_tile
    }
    return PHAX_OK;
}

// Per-row losses of the fused projection (evaluation by position): row_loss[r] = lse − x_t in
// the row's float, 0 where t = −1. A block per row of the tile; max, Σ e^(x − max) in double.
static __global__ void ce_row_loss_k(float *__restrict__ out, const float *__restrict__ L,
                                     const int32_t *__restrict__ targets, int V) {
    __shared__ float redf[32];
    __shared__ double redd[32];
    size_t r = blockIdx.x;
    const float *x = L + r * (size_t)V;
    int t = targets[r];
    if (t < 0) {  // uniform over the block
        if (threadIdx.x == 0) out[r] = 0.0f;
        return;
    }
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < V; j += blockDim.x) mx = fmaxf(mx, x[j]);
    mx = fcuda_block_max(mx, redf);
    double se = 0;
    for (int j = threadIdx.x; j < V; j += blockDim.x) se += expf(x[j] - mx);
    se = fcuda_block_sum_d(se, redd);
    if (threadIdx.x == 0) out[r] = (float)((double)mx + log(se) - (double)x[t]);
}

extern "C" int fcuda_linear_cross_entropy_rows(float *row_loss, const float *x, const float *W,
                                                const int32_t *targets, size_t n, int d, int V, void *ws,
                                                void *stream) {
    const char *op = "linear_cross_entropy_rows";
    cudaStream_t s = fcuda_stream(stream);
    if (!ws) return phax_fail("cuda %s: no workspace", op);
    size_t tile = fcuda_lce_tile_rows(V);
    float *L = static_cast<float *>(ws);
    void *cws = static_cast<char *>(ws) + lce_tile_bytes(n, V);
    // The targets checked first (nothing written on a bad one); rows of −1 only are fine here.
    size_t count;
    if (ce_check(op, &count, targets, n, V, cws, s)) return PHAX_ERR;
    for (size_t r0 = 0; r0 < n; r0 += tile) {
        size_t R = n - r0 < tile ? n - r0 : tile;
        if (d > 0) {
            if (fcuda_sgemm(0, 1, (int)R, V, d, 1.0f, x + r0 * (size_t)d, d, W, d, 0.0f, L, V, stream))
                return PHAX_ERR;
        } else if (fcuda_ok(cudaMemsetAsync(L, 0, R * (size_t)V * sizeof(float), s), op)) {
            return PHAX_ERR;
        }
        PHAX_LAUNCH(ce_row_loss_k, (unsigned)R, CE_THREADS, 0, s, row_loss + r0, (const float *)L, targets + r0, V);
        if (fcuda_check(op)) return PHAX_ERR;
    }
    return PHAX_OK;
}
