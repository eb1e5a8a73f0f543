// ref cross-entropy fused with the softmax: mean over counted rows of
// −log softmax(logits_r)[target_r]; target −1 marks a row that is not counted.
#include <math.h>

#include "phax/ref.h"

static int count_targets(size_t *count, const int32_t *targets, size_t n, int V) {
    *count = 0;
    for (size_t r = 0; r < n; r++) {
        if (targets[r] < -1 || targets[r] >= V)
            return phax_fail("cross_entropy: target %d at row %zu is outside [0, %d) (or -1 to ignore)",
                             (int)targets[r], r, V);
        if (targets[r] >= 0) (*count)++;
    }
    if (*count == 0) return phax_fail("cross_entropy: all %zu targets are ignored (-1)", n);
    return PHAX_OK;
}

// log Σ_j exp(x_j), shifted by the row maximum so exp never overflows.
static double logsumexp(const double *x, int V) {
    double mx = -INFINITY;
    for (int j = 0; j < V; j++)
        if (x[j] > mx) mx = x[j];
    double s = 0;
    for (int j = 0; j < V; j++) s += exp(x[j] - mx);
    return mx + log(s);
}

// logits: (n, V); targets: (n)
int ref_cross_entropy_fwd(double *loss, const double *logits, const int32_t *targets, size_t n,
                          int V) {
    size_t count;
    if (count_targets(&count, targets, n, V)) return PHAX_ERR;
    double s = 0;
    for (size_t r = 0; r < n; r++)
        if (targets[r] >= 0) s += logsumexp(logits + r * V, V) - logits[r * V + targets[r]];
    *loss = s / (double)count;
    return PHAX_OK;
}

// dlogits += dloss · (softmax(logits_r) − onehot(target_r)) / count, counted rows only.
int ref_cross_entropy_bwd(double *dlogits, double dloss, const double *logits,
                          const int32_t *targets, size_t n, int V) {
    size_t count;
    if (count_targets(&count, targets, n, V)) return PHAX_ERR;
    double g = dloss / (double)count;
    for (size_t r = 0; r < n; r++) {
        if (targets[r] < 0) continue;
        const double *x = logits + r * V;
        double lse = logsumexp(x, V);
        for (int j = 0; j < V; j++) dlogits[r * V + j] += g * (exp(x[j] - lse) - (j == targets[r]));
    }
    return PHAX_OK;
}
