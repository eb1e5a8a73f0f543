// ref linear: y = x Wᵀ + b (nn.Linear layout), float64, plain loops.
#include "phax/ref.h"

// y: (n, out); x: (n, in); W: (out, in); b: (out) or NULL
void ref_linear_fwd(double *y, const double *x, const double *W, const double *b, size_t n,
                    int in, int out) {
    for (size_t r = 0; r < n; r++)
        for (int o = 0; o < out; o++) {
            double s = b ? b[o] : 0.0;
            for (int i = 0; i < in; i++) s += x[r * in + i] * W[(size_t)o * in + i];
            y[r * out + o] = s;
        }
}

// dx += dy W;  dW += dyᵀ x;  db += Σ_rows dy
void ref_linear_bwd(double *dx, double *dW, double *db, const double *dy, const double *x,
                    const double *W, size_t n, int in, int out) {
    for (size_t r = 0; r < n; r++)
        for (int o = 0; o < out; o++) {
            double g = dy[r * out + o];
            if (db) db[o] += g;
            for (int i = 0; i < in; i++) {
                if (dx) dx[r * in + i] += g * W[(size_t)o * in + i];
                if (dW) dW[(size_t)o * in + i] += g * x[r * in + i];
            }
        }
}
