// fast/cuda mLSTM cell, chunkwise form: float32, the contract of fcpu_mlstm_chunkwise_{fwd,bwd}
// (phax/fcpu_mlstm.h; semantics ref/mlstm.c, docs/spec.md §2.9) with device pointers, a stream
// and an int result (phax/fcuda.h).
//
// One block per (b, h) sequence walks its chunks of L rows in order (the recurrence over chunk
// boundaries is sequential anyway); inside a chunk every product is split over the block's
// threads, each output element owned by one thread that sums in a fixed order, with a barrier
// between phases. No atomics: the bits do not depend on the schedule. The chunk's L×L
// matrices, the state and the per-row scalars live in the block's slot of the workspace
// (global memory: no shared-memory limit on L or the head dims).
//
// The math is fast/cpu/mlstm.c's (its head has the derivation). Per chunk, with the state
// (C, n) stabilised by M: G_a = Σ_{r≤a} logσ(f̃_r) (chunk-local), y_b = ĩ_b − G_b,
// m_a = max(G_a + M, G_a + max_{b≤a} y_b), x_a = G_a − m_a, λ_a = e^{G_a + M − m_a},
//   W_ab = (q̂_a·k_b) e^{x_a + y_b} (b ≤ a),  num_a = λ_a Cᵀq̂_a + Σ_b W_ab v_b,
//   S_a = λ_a nᵀq̂_a + Σ_b W_ab,  h_a = num_a / (max(|S_a|, e^{−m_a}) + eps),
//   C ← λ_{L−1} C + Σ_b w_b k_b v_bᵀ, n likewise, M ← m_{L−1}, w_b = e^{x_{L−1} + y_b}.
// Gate sums, stabilisers and every exponent's argument are double (rounded once to float);
// the per-row scalars of the backward (h·dh, the row and column sums of P) are double.
//
// Backward: pass 1 stores the state before each chunk (nc·(dqk·dv + dqk) floats a sequence),
// pass 2 walks the chunks in reverse carrying the state adjoint (dC, dn); the path through
// m_t goes to the first argmax of the log-gate row (the row's closed-form total onto the
// argmax entry when it lies in the row's chunk, else to ĩ_arg and, by a difference array, to
// φ_r for arg < r ≤ t), and through the normaliser to the branch taken.
#include <math.h>
#include <string.h>

#include "cuda_common.cuh"
#include "phax/fcpu_mlstm.h"  // FCPU_MLSTM_CHUNK, FCPU_MLSTM_STATE_LEN
#include "phax/numerics.h"    // phax_logsigmoid, phax_sigmoid (double, device)

#define ML_THREADS 256

typedef struct {
    int T, H, dqk, dv, L, nc;
    float sc;  // 1/√dqk
    double eps;
} ml_geom;

// Byte offsets into one sequence's slot (16-aligned arrays); slot: the slot's size.
typedef struct {
    size_t y, x, m, phi, lam, arg, W, E, P, DW, wl, rs, rsi, inv, Qs, Tk, Hi, Hn, Dn;
    size_t dS, Qr, mu, xi, corr, R, C, n, dC, dn, Cst, nst, Mst, argst, dig, dphi, mud, slot;
} ml_lay;

static int ml_chunk(int chunk, int T) {
    int L = chunk > 0 ? chunk : FCPU_MLSTM_CHUNK;
    if (T > 0 && L > T) L = T;
    return L < 1 ? 1 : L;
}
static int ml_nchunks(int T, int L) { return T > 0 ? (T - 1) / L + 1 : 0; }

static ml_lay ml_layout(int T, int L, int dqk, int dv, int bwd) {
    ml_lay w;
    memset(&w, 0, sizeof w);
    size_t o = 0, l = (size_t)L, LL = l * l, CS = (size_t)dqk * dv, nc = (size_t)ml_nchunks(T, L);
    size_t f = sizeof(float), d = sizeof(double);
#define ML_TAKE(field, bytes) (w.field = o, o += fcuda_align16(bytes))
    ML_TAKE(y, l * d), ML_TAKE(x, l * d), ML_TAKE(m, l * d), ML_TAKE(phi, l * d);
    ML_TAKE(lam, l * f), ML_TAKE(arg, l * sizeof(int)), ML_TAKE(W, LL * f), ML_TAKE(wl, l * f);
    ML_TAKE(rs, l * f), ML_TAKE(Qs, l * dqk * f);
    if (!bwd) {
        ML_TAKE(inv, l * f), ML_TAKE(C, CS * f), ML_TAKE(n, (size_t)dqk * f);
    } else {
        ML_TAKE(E, LL * f), ML_TAKE(P, LL * f), ML_TAKE(DW, LL * f), ML_TAKE(rsi, l * f);
        ML_TAKE(Tk, l * dqk * f), ML_TAKE(Hi, l * dv * f), ML_TAKE(Hn, l * dv * f), ML_TAKE(Dn, l * dv * f);
        ML_TAKE(dS, l * d), ML_TAKE(Qr, l * d), ML_TAKE(mu, l * d), ML_TAKE(xi, l * d), ML_TAKE(corr, l * d);
        ML_TAKE(R, l * d), ML_TAKE(dC, CS * f), ML_TAKE(dn, (size_t)dqk * f);
        ML_TAKE(Cst, nc * CS * f), ML_TAKE(nst, nc * dqk * f), ML_TAKE(Mst, nc * d), ML_TAKE(argst, nc * sizeof(int));
        ML_TAKE(dig, (size_t)T * d), ML_TAKE(dphi, (size_t)T * d), ML_TAKE(mud, ((size_t)T + 1) * d);
    }
#undef ML_TAKE
    w.slot = o;
    return w;
}

#define ML_F(field) reinterpret_cast<float *>(base + lay.field)
#define ML_D(field) reinterpret_cast<double *>(base + lay.field)

// --- block phases (every thread calls them) -------------------------------------------------------
// The gates of rows c0..c0+Lc−1 (g0: the igate/fgate index of row c0, gs its row stride): φ by
// all threads, then thread 0 runs the prefix sums and the running max in double, in order.
// Earlier positions win a tie (the first argmax), as in ref.
__device__ static void ml_gates(double *y, double *x, double *m, double *phi, float *lam, int *arg,
                                const float *ig, const float *fg, size_t g0, size_t gs, int c0, int Lc,
                                int has, double M, int argM) {
    for (int a = threadIdx.x; a < Lc; a += blockDim.x) phi[a] = phax_logsigmoid((double)fg[g0 + a * gs]);
    __syncthreads();
    if (threadIdx.x == 0) {
        double G = 0, ymax = -INFINITY;
        int yarg = 0;
        for (int a = 0; a < Lc; a++) {
            G += phi[a];
            double ya = (double)ig[g0 + a * gs] - G;
            if (ya > ymax) ymax = ya, yarg = a;
            double intra = G + ymax, ma = intra;
            int ag = c0 + yarg;
            if (has && G + M >= intra) ma = G + M, ag = argM;
            y[a] = ya, m[a] = ma, x[a] = G - ma, arg[a] = ag;
            lam[a] = has ? (float)exp(G + M - ma) : 0.0f;
        }
    }
    __syncthreads();
}

// W_ab = (q̂_a·k_b)·e^{x_a + y_b} for b ≤ a (a thread per pair; the exponent rounded once), E
// the factors (NULL: not kept), wl the last row's factors (the state weights w_b).
__device__ static void ml_intra(float *W, float *E, float *wl, const double *x, const double *y, const float *Qc,
                                const float *Kc, size_t ldk, int Lc, int L, int dqk, float sc) {
    for (size_t e = threadIdx.x; e < (size_t)Lc * Lc; e += blockDim.x) {
        int a = (int)(e / Lc), b = (int)(e % Lc);
        if (b > a) continue;
        const float *qa = Qc + a * ldk, *kb = Kc + b * ldk;
        float s = 0;
        for (int i = 0; i < dqk; i++) s += qa[i] * kb[i];
        float ex = (float)exp(x[a] + y[b]);
        W[(size_t)a * L + b] = (sc * s) * ex;
        if (E) E[(size_t)a * L + b] = ex;
        if (a == Lc - 1) wl[b] = ex;
    }
}

// Qs_a = (sc·λ_a) q_a: the query rows that read the state.
__device__ static void ml_qs(float *Qs, const float *lam, const float *Qc, size_t ldk, int Lc, int dqk, float sc) {
    for (size_t e = threadIdx.x; e < (size_t)Lc * dqk; e += blockDim.x) {
        int a = (int)(e / dqk), i = (int)(e % dqk);
        Qs[e] = (sc * lam[a]) * Qc[a * ldk + i];
    }
}

// Co = decay·Ci + Σ_b (w_b k_b) v_bᵀ, no = decay·ni + Σ_b w_b k_b: a thread per element, b in
// order. In place is fine (each element is read, then written, by its own thread).
__device__ static void ml_state_step(float *Co, float *no, const float *Ci, const float *ni, float decay,
                                     const float *w, const float *Kc, size_t ldk, const float *Vc, size_t ldv,
                                     int Lc, int dqk, int dv) {
    size_t CS = (size_t)dqk * dv;
    for (size_t e = threadIdx.x; e < CS; e += blockDim.x) {
        int i = (int)(e / dv), j = (int)(e % dv);
        float acc = 0;
        for (int b = 0; b < Lc; b++) acc += (w[b] * Kc[b * ldk + i]) * Vc[b * ldv + j];
        Co[e] = acc + decay * Ci[e];
    }
    for (int i = threadIdx.x; i < dqk; i += blockDim.x) {
        float acc = 0;
        for (int b = 0; b < Lc; b++) acc += w[b] * Kc[b * ldk + i];
        no[i] = decay * ni[i] + acc;
    }
}

// --- forward --------------------------------------------------------------------------------------
// grid (B·H), ML_THREADS threads: block p = b·H + h owns sequence (b, h) and state record p.
static __global__ void __launch_bounds__(ML_THREADS)
    ml_fwd_k(float *h, const float *q, const float *k, const float *v, const float *ig, const float *fg,
             const float *st_in, float *st_out, char *ws, ml_geom g, ml_lay lay) {
    const int p = blockIdx.x, bq = p / g.H, hh = p % g.H, T = g.T, L = g.L, dqk = g.dqk, dv = g.dv;
    const size_t ldk = (size_t)g.H * dqk, ldv = (size_t)g.H * dv, CS = (size_t)dqk * dv;
    const size_t SL = FCPU_MLSTM_STATE_LEN(dqk, dv);
    char *base = ws + (size_t)p * lay.slot;
    double *y = ML_D(y), *x = ML_D(x), *m = ML_D(m), *phi = ML_D(phi);
    float *lam = ML_F(lam), *W = ML_F(W), *wl = ML_F(wl), *rs = ML_F(rs), *inv = ML_F(inv), *Qs = ML_F(Qs);
    float *C = ML_F(C), *n = ML_F(n);
    int *arg = reinterpret_cast<int *>(base + lay.arg);

    const float *si = st_in ? st_in + (size_t)p * SL : NULL;
    int has = si && si[CS + dqk] > -INFINITY, argM = -1;  // argM only matters in the backward
    double M = has ? (double)si[CS + dqk] : -INFINITY;
    for (size_t e = threadIdx.x; e < CS; e += blockDim.x) C[e] = has ? si[e] : 0.0f;
    for (int i = threadIdx.x; i < dqk; i += blockDim.x) n[i] = has ? si[CS + i] : 0.0f;
    __syncthreads();

    for (int c = 0; c < g.nc; c++) {
        const int c0 = c * L, Lc = T - c0 < L ? T - c0 : L;
        const size_t r0 = ((size_t)bq * T + c0) * g.H + hh;  // the (b, c0, h) row
        const float *Qc = q + r0 * dqk, *Kc = k + r0 * dqk, *Vc = v + r0 * dv;
        float *hc = h + r0 * dv;
        ml_gates(y, x, m, phi, lam, arg, ig, fg, r0, (size_t)g.H, c0, Lc, has, M, argM);
        ml_intra(W, NULL, wl, x, y, Qc, Kc, ldk, Lc, L, dqk, g.sc);
        if (has) ml_qs(Qs, lam, Qc, ldk, Lc, dqk, g.sc);
        __syncthreads();
        // S_a and the row's 1/den (a thread per row).
        for (int a = threadIdx.x; a < Lc; a += blockDim.x) {
            float s = 0;
            for (int b = 0; b <= a; b++) s += W[(size_t)a * L + b];
            if (has) {
                float t = 0;
                for (int i = 0; i < dqk; i++) t += Qs[(size_t)a * dqk + i] * n[i];
                s += t;
            }
            rs[a] = s;
            inv[a] = (float)(1.0 / (fmax(fabs((double)s), exp(-m[a])) + g.eps));
        }
        __syncthreads();
        // h_a = (λ_a Cᵀq̂_a + Σ_b W_ab v_b)/den_a (a thread per element).
        for (size_t e = threadIdx.x; e < (size_t)Lc * dv; e += blockDim.x) {
            int a = (int)(e / dv), j = (int)(e % dv);
            float acc = 0;
            if (has)
                for (int i = 0; i < dqk; i++) acc += Qs[(size_t)a * dqk + i] * C[(size_t)i * dv + j];
            for (int b = 0; b <= a; b++) acc += W[(size_t)a * L + b] * Vc[b * ldv + j];
            hc[a * ldv + j] = acc * inv[a];
        }
        __syncthreads();  // C, n are read above and written below
        if (c < g.nc - 1 || st_out) {
            ml_state_step(C, n, C, n, has ? lam[Lc - 1] : 0.0f, wl, Kc, ldk, Vc, ldv, Lc, dqk, dv);
            M = m[Lc - 1], argM = arg[Lc - 1], has = 1;
            __syncthreads();
        }
    }
    if (!st_out) return;
    float *so = st_out + (size_t)p * SL;
    if (!has) {  // T = 0 and no state in: the empty state
        for (size_t e = threadIdx.x; e < CS + dqk; e += blockDim.x) so[e] = 0.0f;
        if (threadIdx.x == 0) so[CS + dqk] = -INFINITY;
        return;
    }
    // M rounded to float, C and n rescaled to it exactly: ·e^{M − (float)M}.
    float Mf = (float)M, f = (float)exp(M - (double)Mf);
    for (size_t e = threadIdx.x; e < CS; e += blockDim.x) so[e] = C[e] * f;
    for (int i = threadIdx.x; i < dqk; i += blockDim.x) so[CS + i] = n[i] * f;
    if (threadIdx.x == 0) so[CS + dqk] = Mf;
}

// --- backward -------------------------------------------------------------------------------------
// grid (B·H), ML_THREADS threads: block p = b·H + h owns sequence (b, h): pass 1 the states
// before each chunk, pass 2 the chunks in reverse. Gradients are added (NULL: skipped; the
// intermediates are the same either way, so each gradient's bits do not depend on the others).
static __global__ void __launch_bounds__(ML_THREADS)
    ml_bwd_k(float *dq, float *dk, float *dv_, float *dig_o, float *dfg_o, const float *dh, const float *q,
             const float *k, const float *v, const float *ig, const float *fg, char *ws, ml_geom g, ml_lay lay) {
    __shared__ double red[32];
    const int p = blockIdx.x, bq = p / g.H, hh = p % g.H, T = g.T, L = g.L, dqk = g.dqk, dv = g.dv, nc = g.nc;
    const size_t ldk = (size_t)g.H * dqk, ldv = (size_t)g.H * dv, CS = (size_t)dqk * dv, gs = (size_t)g.H;
    const float sc = g.sc;
    const double eps = g.eps;
    char *base = ws + (size_t)p * lay.slot;
    double *y = ML_D(y), *x = ML_D(x), *m = ML_D(m), *phi = ML_D(phi);
    double *dSv = ML_D(dS), *Qr = ML_D(Qr), *mu = ML_D(mu), *xi = ML_D(xi), *corr = ML_D(corr), *R = ML_D(R);
    double *Mst = ML_D(Mst), *dig = ML_D(dig), *dphi = ML_D(dphi), *mud = ML_D(mud);
    float *lam = ML_F(lam), *W = ML_F(W), *E = ML_F(E), *P = ML_F(P), *DW = ML_F(DW), *wl = ML_F(wl);
    float *rs = ML_F(rs), *rsi = ML_F(rsi), *Qs = ML_F(Qs), *Tk = ML_F(Tk), *Hi = ML_F(Hi), *Hn = ML_F(Hn);
    float *Dn = ML_F(Dn), *dC = ML_F(dC), *dn = ML_F(dn), *Cst = ML_F(Cst), *nst = ML_F(nst);
    int *arg = reinterpret_cast<int *>(base + lay.arg), *argst = reinterpret_cast<int *>(base + lay.argst);

    // --- pass 1: the state before each chunk (the last chunk's own state is never needed) ---
    for (size_t e = threadIdx.x; e < CS; e += blockDim.x) Cst[e] = 0.0f;
    for (int i = threadIdx.x; i < dqk; i += blockDim.x) nst[i] = 0.0f;
    if (threadIdx.x == 0) Mst[0] = -INFINITY, argst[0] = 0;
    __syncthreads();
    for (int c = 0; c + 1 < nc; c++) {
        const int c0 = c * L, Lc = L, has = c > 0;
        const size_t r0 = ((size_t)bq * T + c0) * g.H + hh;
        const float *Kc = k + r0 * dqk, *Vc = v + r0 * dv;
        ml_gates(y, x, m, phi, lam, arg, ig, fg, r0, gs, c0, Lc, has, Mst[c], argst[c]);
        for (int b = threadIdx.x; b < Lc; b += blockDim.x) wl[b] = (float)exp(x[Lc - 1] + y[b]);
        __syncthreads();
        ml_state_step(Cst + (size_t)(c + 1) * CS, nst + (size_t)(c + 1) * dqk, Cst + (size_t)c * CS,
                      nst + (size_t)c * dqk, has ? lam[Lc - 1] : 0.0f, wl, Kc, ldk, Vc, ldv, Lc, dqk, dv);
        if (threadIdx.x == 0) Mst[c + 1] = m[Lc - 1], argst[c + 1] = arg[Lc - 1];
        __syncthreads();
    }

    // --- pass 2: chunks in reverse, carrying the state adjoint (dC, dn) ---
    for (size_t e = threadIdx.x; e < CS; e += blockDim.x) dC[e] = 0.0f;
    for (int i = threadIdx.x; i < dqk; i += blockDim.x) dn[i] = 0.0f;
    for (int r = threadIdx.x; r < T; r += blockDim.x) dig[r] = 0, dphi[r] = 0;
    for (int r = threadIdx.x; r <= T; r += blockDim.x) mud[r] = 0;
    __syncthreads();
    for (int c = nc - 1; c >= 0; c--) {
        const int c0 = c * L, Lc = T - c0 < L ? T - c0 : L, has = c > 0, last = c == nc - 1;
        const size_t r0 = ((size_t)bq * T + c0) * g.H + hh;
        const float *Qc = q + r0 * dqk, *Kc = k + r0 * dqk, *Vc = v + r0 * dv, *dhc = dh + r0 * dv;
        const float *Cp = Cst + (size_t)c * CS, *np = nst + (size_t)c * dqk;
        ml_gates(y, x, m, phi, lam, arg, ig, fg, r0, gs, c0, Lc, has, Mst[c], argst[c]);

        // Recompute the forward: W, E, Qs; then S_a (its state part rsi), the state part of num
        // (Hi) and num (Hn).
        ml_intra(W, E, wl, x, y, Qc, Kc, ldk, Lc, L, dqk, sc);
        if (has) ml_qs(Qs, lam, Qc, ldk, Lc, dqk, sc);
        __syncthreads();
        for (int a = threadIdx.x; a < Lc; a += blockDim.x) {
            float s = 0, t = 0;
            for (int b = 0; b <= a; b++) s += W[(size_t)a * L + b];
            if (has)
                for (int i = 0; i < dqk; i++) t += Qs[(size_t)a * dqk + i] * np[i];
            rs[a] = has ? s + t : s, rsi[a] = t;
        }
        for (size_t e = threadIdx.x; e < (size_t)Lc * dv; e += blockDim.x) {
            int a = (int)(e / dv), j = (int)(e % dv);
            float acc = 0;
            if (has)
                for (int i = 0; i < dqk; i++) acc += Qs[(size_t)a * dqk + i] * Cp[(size_t)i * dv + j];
            Hi[e] = acc;
            for (int b = 0; b <= a; b++) acc += W[(size_t)a * L + b] * Vc[b * ldv + j];
            Hn[e] = acc;
        }
        __syncthreads();

        // Per row: den, h·dh, the normaliser's branch, dnum = dh/den, μ (dL/dm in full) and the
        // row's closed-form total Qr (a thread per row).
        for (int a = threadIdx.x; a < Lc; a += blockDim.x) {
            const float *dha = dhc + a * ldv;
            double S = (double)rs[a], em = exp(-m[a]);
            double den = fmax(fabs(S), em) + eps, iv = 1.0 / den, hd = 0, xa = 0;
            for (int j = 0; j < dv; j++) hd += (double)dha[j] * Hn[(size_t)a * dv + j];
            hd *= iv;  // dh_a·h_a
            if (has)
                for (int j = 0; j < dv; j++) xa += (double)dha[j] * Hi[(size_t)a * dv + j];
            float fi = (float)iv;
            for (int j = 0; j < dv; j++) Dn[(size_t)a * dv + j] = dha[j] * fi;
            double dden = -hd * iv, dS = 0;
            bool sbranch = fabs(S) >= em;
            if (sbranch) dS = S > 0 ? dden : (S < 0 ? -dden : 0.0);
            dSv[a] = dS, mu[a] = -hd * eps * iv;
            if (arg[a] >= c0) {
                // The argmax is in this chunk: the row total Σ_s P_as + μ_a (0 on the |S| branch,
                // where a shift of the whole row cancels), and the row's part through the state.
                Qr[a] = sbranch ? 0.0 : hd * em * iv;
                xi[a] = xa * iv + dS * (double)rsi[a];
            } else {
                Qr[a] = hd + dS * S;  // Σ_s P_as at fixed m (μ is routed separately)
                xi[a] = 0;
            }
        }
        __syncthreads();

        // dW_ab = dnum_a·v_b + dS_a; P = dW∘W (∂L/∂D at fixed m); DW = dW∘E. And, for the later
        // chunks through the state after this one, Tk_b = dC v_b + dn.
        for (size_t e = threadIdx.x; e < (size_t)Lc * Lc; e += blockDim.x) {
            int a = (int)(e / Lc), b = (int)(e % Lc);
            if (b > a) continue;
            const float *da = Dn + (size_t)a * dv, *vb = Vc + b * ldv;
            float s = 0;
            for (int j = 0; j < dv; j++) s += da[j] * vb[j];
            float dw = s + (float)dSv[a];
            size_t ab = (size_t)a * L + b;
            P[ab] = dw * W[ab], DW[ab] = dw * E[ab];
        }
        if (!last)
            for (size_t e = threadIdx.x; e < (size_t)Lc * dqk; e += blockDim.x) {
                int b = (int)(e / dqk), i = (int)(e % dqk);
                const float *vb = Vc + b * ldv, *dCi = dC + (size_t)i * dv;
                float s = 0;
                for (int j = 0; j < dv; j++) s += vb[j] * dCi[j];
                Tk[e] = s + dn[i];
            }
        __syncthreads();

        // The argmax entry's correction (a thread per row): the row total minus the row's other
        // entries, intra and through the state, so rows whose weight sits on one key are exact.
        for (int a = threadIdx.x; a < Lc; a += blockDim.x) {
            int ag = arg[a] - c0;
            if (ag < 0) {
                corr[a] = 0;
                continue;
            }
            double sum = 0, Pag = (double)P[(size_t)a * L + ag];
            for (int b = 0; b <= a; b++) sum += (double)P[(size_t)a * L + b];
            corr[a] = (Qr[a] - xi[a] - (sum - Pag)) - Pag;
        }
        // dq̂ = DW K + diag(λ)(dnum Cᵀ + dS nᵀ) (a thread per element).
        if (dq)
            for (size_t e = threadIdx.x; e < (size_t)Lc * dqk; e += blockDim.x) {
                int a = (int)(e / dqk), i = (int)(e % dqk);
                float s = 0;
                for (int b = 0; b <= a; b++) s += DW[(size_t)a * L + b] * Kc[b * ldk + i];
                float *o = dq + r0 * dqk + a * ldk + i;
                *o += sc * s;
                if (has) {
                    const float *da = Dn + (size_t)a * dv, *Ci = Cp + (size_t)i * dv;
                    float t = 0;
                    for (int j = 0; j < dv; j++) t += da[j] * Ci[j];
                    *o += (sc * lam[a]) * (t + (float)dSv[a] * np[i]);
                }
            }
        // dk = DWᵀ q̂ (+ w_b Tk_b through the state).
        if (dk)
            for (size_t e = threadIdx.x; e < (size_t)Lc * dqk; e += blockDim.x) {
                int b = (int)(e / dqk), i = (int)(e % dqk);
                float s = 0;
                for (int a = b; a < Lc; a++) s += DW[(size_t)a * L + b] * Qc[a * ldk + i];
                float *o = dk + r0 * dqk + b * ldk + i;
                *o += sc * s;
                if (!last) *o += wl[b] * Tk[e];
            }
        // dv = Wᵀ dnum (+ (w_b k_b)ᵀ dC through the state).
        if (dv_)
            for (size_t e = threadIdx.x; e < (size_t)Lc * dv; e += blockDim.x) {
                int b = (int)(e / dv), j = (int)(e % dv);
                float s = 0;
                for (int a = b; a < Lc; a++) s += W[(size_t)a * L + b] * Dn[(size_t)a * dv + j];
                float *o = dv_ + r0 * dv + b * ldv + j;
                *o += s;
                if (!last) {
                    float t = 0;
                    for (int i = 0; i < dqk; i++) t += (wl[b] * Kc[b * ldk + i]) * dC[(size_t)i * dv + j];
                    *o += t;
                }
            }
        // ∂L/∂(a common shift of the state after the chunk's log-factors): ⟨dC, C⟩ + dn·n.
        double lastterm = 0;
        if (!last) {
            const float *Ca = Cst + (size_t)(c + 1) * CS, *na = nst + (size_t)(c + 1) * dqk;
            double part = 0;
            for (size_t e = threadIdx.x; e < CS; e += blockDim.x) part += (double)dC[e] * Ca[e];
            for (int i = threadIdx.x; i < dqk; i += blockDim.x) part += (double)dn[i] * na[i];
            lastterm = fcuda_block_sum_d(part, red);
        }
        __syncthreads();

        // Column sums R_b = Σ_a P_ab (+ the argmax corrections, + w_b k_b·Tk_b), a thread per column;
        // and the state adjoint to before the chunk: dC ← λ_{L−1} dC + Qsᵀ dnum, dn likewise.
        for (int b = threadIdx.x; b < Lc; b += blockDim.x) {
            double s = 0;
            for (int a = b; a < Lc; a++) {
                s += (double)P[(size_t)a * L + b];
                if (arg[a] - c0 == b) s += corr[a];
            }
            if (!last) {
                double t = 0;
                for (int i = 0; i < dqk; i++) t += (double)Kc[b * ldk + i] * Tk[(size_t)b * dqk + i];
                s += (double)wl[b] * t;
            }
            R[b] = s;
        }
        if (has) {
            float dec = lam[Lc - 1];
            for (size_t e = threadIdx.x; e < CS; e += blockDim.x) {
                int i = (int)(e / dv), j = (int)(e % dv);
                float s = 0;
                for (int a = 0; a < Lc; a++) s += Qs[(size_t)a * dqk + i] * Dn[(size_t)a * dv + j];
                dC[e] = s + dec * dC[e];
            }
            for (int i = threadIdx.x; i < dqk; i += blockDim.x) {
                double t = 0;
                for (int a = 0; a < Lc; a++) t += dSv[a] * Qs[(size_t)a * dqk + i];
                dn[i] = dec * dn[i] + (float)t;
            }
        }
        __syncthreads();

        // Gates (thread 0, rows in reverse): dĩ_b += R_b; dφ = chunk-local suffix sums of
        // ∂L/∂G_a = Qr_a − R_a (+ lastterm at the last row); μ of rows whose argmax lies in an
        // earlier chunk to ĩ_arg and, by a difference array, to φ_r for arg < r ≤ t.
        if (threadIdx.x == 0) {
            double acc = 0;
            for (int a = Lc - 1; a >= 0; a--) {
                acc += Qr[a] - R[a] + (a == Lc - 1 ? lastterm : 0.0);
                dphi[c0 + a] = acc;
                dig[c0 + a] += R[a];
                int ag = arg[a];
                if (ag < c0) dig[ag] += mu[a], mud[ag + 1] += mu[a], mud[c0 + a + 1] -= mu[a];
            }
        }
        __syncthreads();
    }

    // Write out: dĩ, and df̃ = dφ·σ(−f̃) (φ_0 does not enter the parallel form).
    if (threadIdx.x == 0) {
        double run = 0;
        for (int r = 0; r < T; r++) run += mud[r], mud[r] = run;
    }
    __syncthreads();
    for (int r = threadIdx.x; r < T; r += blockDim.x) {
        size_t gi = ((size_t)bq * T + r) * g.H + hh;
        if (dig_o) dig_o[gi] += (float)dig[r];
        if (dfg_o && r > 0) dfg_o[gi] += (float)((dphi[r] + mud[r]) * phax_sigmoid(-(double)fg[gi]));
    }
}

#undef ML_F
#undef ML_D

// --- entries --------------------------------------------------------------------------------------
static int ml_args(const char *op, int B, int T, int H, int dqk, int dv, const void *ws) {
    if (B < 1 || T < 0 || H < 1 || dqk < 1 || dv < 1)
        return phax_fail("cuda %s: invalid sizes B=%d T=%d H=%d dqk=%d dv=%d", op, B, T, H, dqk, dv);
    if (!ws) return phax_fail("cuda %s: no workspace", op);
    return PHAX_OK;
}

static ml_geom ml_geom_of(int T, int H, int dqk, int dv, float eps, int chunk) {
    ml_geom G;
    G.T = T, G.H = H, G.dqk = dqk, G.dv = dv, G.L = ml_chunk(chunk, T), G.nc = ml_nchunks(T, G.L);
    G.sc = (float)(1.0 / sqrt((double)dqk)), G.eps = (double)eps;
    return G;
}

static size_t ml_ws_bytes(int B, int T, int H, int dqk, int dv, int chunk, int bwd) {
    if (B < 1 || H < 1 || T < 0 || dqk < 1 || dv < 1) return 0;
    return 16 + (size_t)B * H * ml_layout(T, ml_chunk(chunk, T), dqk, dv, bwd).slot;
}

static char *ml_align(void *ws) { return reinterpret_cast<char *>(((uintptr_t)ws + 15) & ~(uintptr_t)15); }

extern "C" size_t fcuda_mlstm_fwd_ws(int B, int T, int H, int dqk, int dv, int chunk) {
    return ml_ws_bytes(B, T, H, dqk, dv, chunk, 0);
}
extern "C" size_t fcuda_mlstm_bwd_ws(int B, int T, int H, int dqk, int dv, int chunk) {
    return ml_ws_bytes(B, T, H, dqk, dv, chunk, 1);
}

extern "C" int fcuda_mlstm_fwd(float *h, const float *q, const float *k, const float *v, const float *igate,
                                const float *fgate, int B, int T, int H, int dqk, int dv, float eps, int chunk,
                                const float *state_in, float *state_out, void *ws, void *stream) {
    const char *op = "mlstm_fwd";
    if (ml_args(op, B, T, H, dqk, dv, ws)) return PHAX_ERR;
    if (T == 0 && !state_out) return PHAX_OK;
    ml_geom G = ml_geom_of(T, H, dqk, dv, eps, chunk);
    ml_lay lay = ml_layout(T, G.L, dqk, dv, 0);
    PHAX_LAUNCH(ml_fwd_k, (unsigned)((size_t)B * H), ML_THREADS, 0, fcuda_stream(stream), h, q, k, v, igate,
                fgate, state_in, state_out, ml_align(ws), G, lay);
    return fcuda_check(op);
}

extern "C" int fcuda_mlstm_bwd(float *dq, float *dk, float *dv_, float *digate, float *dfgate, const float *dh,
                                const float *q, const float *k, const float *v, const float *igate,
                                const float *fgate, int B, int T, int H, int dqk, int dv, float eps, int chunk,
                                void *ws, void *stream) {
    const char *op = "mlstm_bwd";
    if (ml_args(op, B, T, H, dqk, dv, ws)) return PHAX_ERR;
    if (T == 0 || !(dq || dk || dv_ || digate || dfgate)) return PHAX_OK;
    ml_geom G = ml_geom_of(T, H, dqk, dv, eps, chunk);
    ml_lay lay = ml_layout(T, G.L, dqk, dv, 1);
    PHAX_LAUNCH(ml_bwd_k, (unsigned)((size_t)B * H), ML_THREADS, 0, fcuda_stream(stream), dq, dk, dv_, digate,
                dfgate, dh, q, k, v, igate, fgate, ml_align(ws), G, lay);
    return fcuda_check(op);
}
