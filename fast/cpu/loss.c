// fast/cpu cross-entropy: fused softmax, and the output projection fused with it
// (phax/fcpu_loss.h; semantics: ref/loss.c).
#include "ops_internal.h"

static int ce_count(size_t *count, const int32_t *targets, size_t n, int V) {
    *count = 0;
    for (size_t r = 0; r < n; r++) {
        if (targets[r] < -1 || targets[r] >= V)
            return phax_fail(
                "cross_entropy: target %d at row %zu is outside [0, %d) (or -1 to ignore)",
                (int)targets[r], r, V);
        if (targets[r] >= 0) (*count)++;
    }
    if (*count == 0) return phax_fail("cross_entropy: all %zu targets are ignored (-1)", n);
    return PHAX_OK;
}

// One row: returns lse − x[t] (double) and, if dl, adds g·(softmax − onehot(t)).
// Passes over the row (in L1/L2): max; Σ exp(x − max) in double; the gradient.
static inline double ce_row(float *restrict dl, const float *restrict x, int t, int V, float g) {
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < V; j++) mx = x[j] > mx ? x[j] : mx;
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < V; j++) s += vexpf(x[j] - mx);
    double lse = (double)mx + log(s);
    if (dl) {
        // p_j = exp(x_j − lse): the shift x_j − mx is exact for the top logits,
        // and log(s) ≤ log V is small, so x_j − lse costs one float rounding.
        float sh = (float)(lse - (double)mx);
#pragma omp simd
        for (int j = 0; j < V; j++) dl[j] += g * vexpf((x[j] - mx) - sh);
        dl[t] -= g;
    }
    return lse - (double)x[t];
}

// Rows in parallel with a fixed per-thread partition; the loss is summed in
// double per thread and the thread partials in order.
static double ce_rows(float *dlogits, float g, const float *logits, const int32_t *targets,
                      size_t n, int V) {
    int maxt = omp_get_max_threads(), nt_used = 1;
    double part[maxt];
#pragma omp parallel num_threads(maxt) if (n * (size_t)V >= PAR_MIN)
    {
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
#pragma omp single
        nt_used = nt;
        double s = 0;
        for (size_t r = part_lo(n, nt, id); r < part_lo(n, nt, id + 1); r++) {
            if (targets[r] < 0) continue;
            s += ce_row(dlogits ? &dlogits[r * V] : NULL, &logits[r * V], targets[r], V, g);
        }
        part[id] = s;
    }
    double s = 0;
    for (int t = 0; t < nt_used; t++) s += part[t];
    return s;
}

int fcpu_cross_entropy_fwd(float *loss, const float *logits, const int32_t *targets, size_t n,
                           int V) {
    size_t count;
    if (ce_count(&count, targets, n, V)) return PHAX_ERR;
    *loss = (float)(ce_rows(NULL, 0.0f, logits, targets, n, V) / (double)count);
    return PHAX_OK;
}

int fcpu_cross_entropy_bwd(float *dlogits, float dloss, const float *logits, const int32_t *targets,
                           size_t n, int V) {
    size_t count;
    if (ce_count(&count, targets, n, V)) return PHAX_ERR;
    if (!dlogits) return PHAX_OK;
    ce_rows(dlogits, (float)((double)dloss / (double)count), logits, targets, n, V);
    return PHAX_OK;
}

int fcpu_cross_entropy_fwd_bwd(float *loss, float *dlogits, float dloss, const float *logits,
                               const int32_t *targets, size_t n, int V) {
    size_t count;
    if (ce_count(&count, targets, n, V)) return PHAX_ERR;
    double s = ce_rows(dlogits, (float)((double)dloss / (double)count), logits, targets, n, V);
    if (loss) *loss = (float)(s / (double)count);
    return PHAX_OK;
}

size_t fcpu_lce_tile_rows(int V) {
    size_t r = V > 0 ? ((size_t)4 << 20) / (size_t)V : FCPU_LCE_TILE_MAX;  // 16 MiB of floats
    return r < FCPU_LCE_TILE_MIN ? FCPU_LCE_TILE_MIN : r > FCPU_LCE_TILE_MAX ? FCPU_LCE_TILE_MAX : r;
}

size_t fcpu_linear_cross_entropy_ws(size_t n, int d, int V) {
    (void)d;
    size_t tile = fcpu_lce_tile_rows(V), rows = n < tile ? n : tile;
    return rows * (size_t)(V > 0 ? V : 0) * sizeof(float);
}

int fcpu_linear_cross_entropy(float *loss, float *dx, float *dW, float dloss, const float *x,
                              const float *W, const int32_t *targets, size_t n, int d, int V,
                              void *ws) {
    size_t count;
    if (ce_count(&count, targets, n, V)) return PHAX_ERR;
    if (!ws) return phax_fail("fcpu_linear_cross_entropy: ws is NULL");
    float g = (float)((double)dloss / (double)count);
    int grad = dx || dW;
    float *L = ws;  // (rows, V): logits, then G in place
    double total = 0;
    size_t tile = fcpu_lce_tile_rows(V);
    for (size_t r0 = 0; r0 < n; r0 += tile) {
        size_t R = n - r0 < tile ? n - r0 : tile;
        const float *xt = &x[r0 * d];
        // logits = x_tile Wᵀ: (R, V)
        if (d > 0)
            fcpu_mm(CblasNoTrans, CblasTrans, (int)R, V, d, 1.0f, xt, d, W, d,
                        0.0f, L, V);
        else
            memset(L, 0, R * (size_t)V * sizeof(float));
        // Per row: loss, and L ← G = g (softmax − onehot) (0 for ignored rows).
        int maxt = omp_get_max_threads(), nt_used = 1;
        double part[maxt];
#pragma omp parallel num_threads(maxt) if (R * (size_t)V >= PAR_MIN)
        {
            int nt = omp_get_num_threads(), id = omp_get_thread_num();
#pragma omp single
            nt_used = nt;
            double s = 0;
            for (size_t r = part_lo(R, nt, id); r < part_lo(R, nt, id + 1); r++) {
                float *restrict row = &L[r * V];
                int t = targets[r0 + r];
                if (t < 0) {
                    if (grad) memset(row, 0, (size_t)V * sizeof(float));
                    continue;
                }
                float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
                for (int j = 0; j < V; j++) mx = row[j] > mx ? row[j] : mx;
                double se = 0, zt = row[t];  // the target's logit (row is overwritten)
                if (grad) {  // one exponential per logit: keep e^(x − max), then scale by g/Σ
#pragma omp simd reduction(+ : se)
                    for (int j = 0; j < V; j++) {
                        float e = vexpf(row[j] - mx);
                        row[j] = e;
                        se += e;
                    }
                } else {
#pragma omp simd reduction(+ : se)
                    for (int j = 0; j < V; j++) se += vexpf(row[j] - mx);
                }
                double lse = (double)mx + log(se);
                s += lse - zt;
                if (grad) {
                    float sc = (float)((double)g / se);
#pragma omp simd
                    for (int j = 0; j < V; j++) row[j] *= sc;
                    row[t] -= g;
                }
            }
            part[id] = s;
        }
        for (int t = 0; t < nt_used; t++) total += part[t];
        if (!grad || d <= 0) continue;
        if (dx)  // (R, d) += G (R, V) W (V, d)
            fcpu_mm(CblasNoTrans, CblasNoTrans, (int)R, d, V, 1.0f, L, V, W, d,
                        1.0f, &dx[r0 * d], d);
        if (dW)  // (V, d) += Gᵀ x_tile
            fcpu_mm(CblasTrans, CblasNoTrans, V, d, (int)R, 1.0f, L, V, xt, d,
                        1.0f, dW, d);
    }
    if (loss) *loss = (float)(total / (double)count);
    return PHAX_OK;
}

// Per-row losses of the fused projection (evaluation: loss by position).
int fcpu_linear_cross_entropy_rows(float *row_loss, const float *x, const float *W,
                                   const int32_t *targets, size_t n, int d, int V, void *ws) {
    for (size_t r = 0; r < n; r++)
        if (targets[r] < -1 || targets[r] >= V)
            return phax_fail("cross_entropy: target %d at row %zu is outside [0, %d) (or -1 to ignore)",
                             (int)targets[r], r, V);
    if (!ws) return phax_fail("fcpu_linear_cross_entropy_rows: ws is NULL");
    float *L = ws;  // (rows, V) logits of one tile
    size_t tile = fcpu_lce_tile_rows(V);
    for (size_t r0 = 0; r0 < n; r0 += tile) {
        size_t R = n - r0 < tile ? n - r0 : tile;
        if (d > 0)
            fcpu_mm(CblasNoTrans, CblasTrans, (int)R, V, d, 1.0f, &x[r0 * d], d,
                        W, d, 0.0f, L, V);
        else
            memset(L, 0, R * (size_t)V * sizeof(float));
#pragma omp parallel for schedule(static) if (R * (size_t)V >= PAR_MIN)
        for (size_t r = 0; r < R; r++) {
            const float *restrict row = &L[r * V];
            int t = targets[r0 + r];
            if (t < 0) {
                row_loss[r0 + r] = 0.0f;
                continue;
            }
            float mx = -INFINITY;
            for (int j = 0; j < V; j++) mx = row[j] > mx ? row[j] : mx;
            double se = 0;
            for (int j = 0; j < V; j++) se += vexpf(row[j] - mx);
            row_loss[r0 + r] = (float)((double)mx + log(se) - (double)row[t]);
        }
    }
    return PHAX_OK;
}
