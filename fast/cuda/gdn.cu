// fast/cuda Gated DeltaNet cell, chunkwise (WY/UT) form: float32, the contract of
// fcpu_gdn_chunkwise_{fwd,bwd} (phax/fcpu_gdn.h; semantics ref/gdn.c, docs/spec.md §2.13) with
// device pointers, a stream and an int result (phax/fcuda.h).
//
// One block per (b, h) sequence walks its chunks in order (the state handed from chunk to chunk
// is sequential anyway); inside a chunk every product is split over the block's threads, each
// output element owned by one thread that sums in a fixed order, with a barrier between phases;
// the UT system's forward substitution (and its transpose in the backward) runs a thread per
// value column, rows in order. No atomics: the bits do not depend on the schedule. The chunk's
// tables, the state and the backward's saved start states live in the block's slot of the
// workspace (global memory: no shared-memory limit on the chunk or the head dims).
//
// The math is fast/cpu/gdn.c's, line for line (its head has the four lines of a chunk and their
// reverse): per chunk of n ≤ L steps from Z₀ = S₀ᵀ (dk × dv), with G_t = Σ_{i≤t} g_i in double,
//   M = I + tril₋₁(diag(β)(Γ ∘ K̂K̂ᵀ)),  M U = diag(β)(V − diag(e^G) K̂ Z₀),
//   O = diag(e^G) Q̂ Z₀ + tril(Γ ∘ Q̂K̂ᵀ) U,  Z ← e^{G_n} Z₀ + K̂ᵀ diag(e^{G_n − G}) U.
// Sums that fast/cpu forms in double (the normalisations, ⟨dZ, Z₀⟩, the per-row gate terms) are
// double here too; where fast/cpu adds into dG from several rows at once, the terms are kept per
// row (or per pair) and summed by one thread in a fixed order.
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cuda_common.cuh"
#include "phax/fcpu_gdn.h"  // FCPU_GDN_CHUNK, FCPU_GDN_MAX_CHUNK, FCPU_GDN_MAX_DIM
#include "phax/numerics.h"  // phax_sigmoidf, phax_softplusf
#include "phax/ops.h"       // phax_gdn_cfg, PHAX_GDN_L2_EPS

#define GDN_THREADS 256

typedef struct {
    int T, H, dk, dv, L, nc, l2;
    float scale;
} gdn_geom;

// Byte offsets into one sequence's slot (16-aligned arrays); slot: the slot's size.
typedef struct {
    size_t Kh, Qh, rk, rq, G, eG, GKK, P, M, KZ, QZ, R, U, w, Wk, Z, xr;  // the forward's
    size_t Zs, dZ, dZ0, DO, dU, dX, T1, dKh, dQh, T2, dP, dM, dG, X2;    // the backward's
    size_t slot;
} gdn_lay;

static int gdn_chunk(int chunk, int T) {
    int L = chunk > 0 ? chunk : FCPU_GDN_CHUNK;
    if (T <= 0) return 1;
    return L > T ? T : L;
}
static int gdn_nchunks(int T, int L) { return T > 0 ? (T - 1) / L + 1 : 0; }

static gdn_lay gdn_layout(int L, int dk, int dv, int nc, int bwd) {
    gdn_lay w;
    memset(&w, 0, sizeof w);
    size_t o = 0, l = (size_t)L, Ld = l * dk, Lv = l * dv, LL = l * l, kv = (size_t)dk * dv;
    const size_t f = sizeof(float), d = sizeof(double);
#define G_TAKE(field, bytes) (w.field = o, o += fcuda_align16(bytes))
    G_TAKE(Kh, Ld * f), G_TAKE(Qh, Ld * f), G_TAKE(rk, l * f), G_TAKE(rq, l * f), G_TAKE(G, l * d);
    G_TAKE(eG, l * f), G_TAKE(GKK, LL * f), G_TAKE(P, LL * f), G_TAKE(M, LL * f);
    G_TAKE(KZ, Lv * f), G_TAKE(QZ, Lv * f), G_TAKE(R, Lv * f), G_TAKE(U, Lv * f);
    G_TAKE(w, l * f), G_TAKE(Wk, Ld * f), G_TAKE(Z, kv * f), G_TAKE(xr, l * d);
    if (bwd) {
        G_TAKE(Zs, ((size_t)nc + 1) * kv * f), G_TAKE(dZ, kv * f), G_TAKE(dZ0, kv * f);
        G_TAKE(DO, Lv * f), G_TAKE(dU, Lv * f), G_TAKE(dX, Lv * f), G_TAKE(T1, Lv * f);
        G_TAKE(dKh, Ld * f), G_TAKE(dQh, Ld * f), G_TAKE(T2, Ld * f);
        G_TAKE(dP, LL * f), G_TAKE(dM, LL * f), G_TAKE(dG, l * d), G_TAKE(X2, LL * d);
    }
#undef G_TAKE
    w.slot = o;
    return w;
}

// One sequence's view of its slot and of the call's tensors.
typedef struct {
    float *Kh, *Qh, *rk, *rq, *eG, *GKK, *P, *M, *KZ, *QZ, *R, *U, *w, *Wk, *Z;
    double *G, *xr;
    float *Zs, *dZ, *dZ0, *DO, *dU, *dX, *T1, *dKh, *dQh, *T2, *dP, *dM;
    double *dG, *X2;
    size_t r0, rs;  // the gate index of the sequence's row 0 ((b, 0, h)) and of its row stride (H)
} gdn_seq;

__device__ static gdn_seq gdn_seq_of(char *ws, const gdn_lay &y, int p, const gdn_geom &g, int bwd) {
    char *b = ws + (size_t)p * y.slot;
    gdn_seq s;
#define G_F(field) reinterpret_cast<float *>(b + y.field)
#define G_D(field) reinterpret_cast<double *>(b + y.field)
    s.Kh = G_F(Kh), s.Qh = G_F(Qh), s.rk = G_F(rk), s.rq = G_F(rq), s.eG = G_F(eG), s.GKK = G_F(GKK);
    s.P = G_F(P), s.M = G_F(M), s.KZ = G_F(KZ), s.QZ = G_F(QZ), s.R = G_F(R), s.U = G_F(U), s.w = G_F(w);
    s.Wk = G_F(Wk), s.Z = G_F(Z), s.G = G_D(G), s.xr = G_D(xr);
    if (bwd) {
        s.Zs = G_F(Zs), s.dZ = G_F(dZ), s.dZ0 = G_F(dZ0), s.DO = G_F(DO), s.dU = G_F(dU), s.dX = G_F(dX);
        s.T1 = G_F(T1), s.dKh = G_F(dKh), s.dQh = G_F(dQh), s.T2 = G_F(T2), s.dP = G_F(dP), s.dM = G_F(dM);
        s.dG = G_D(dG), s.X2 = G_D(X2);
    }
#undef G_F
#undef G_D
    const int bq = p / g.H, hh = p % g.H;
    s.r0 = (size_t)bq * g.T * g.H + hh, s.rs = (size_t)g.H;
    return s;
}

// --- block phases (every thread calls them; a barrier after each is the caller's) --------------
// C (m × n, ldc) = α·op(A)·op(B) + β·C over k: op(A)_ip = ta ? A[p·lda + i] : A[i·lda + p], op(B)_pj
// = tb ? B[j·ldb + p] : B[p·ldb + j]. β = 0: C is not read (it may hold NaN). A thread per
// element of C, p in order.
__device__ static void bgemm(bool ta, bool tb, int m, int n, int k, float alpha, const float *A, size_t lda,
                             const float *B, size_t ldb, float beta, float *C, size_t ldc) {
    for (size_t e = threadIdx.x; e < (size_t)m * n; e += blockDim.x) {
        const int i = (int)(e / n), j = (int)(e % n);
        float acc = 0;
        for (int p = 0; p < k; p++)
            acc += (ta ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p]) *
                   (tb ? B[(size_t)j * ldb + p] : B[(size_t)p * ldb + j]);
        float *c = C + (size_t)i * ldc + j;
        *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
    }
}

// X (n × dv) ← M⁻¹ X (trans 0) or M⁻ᵀ X (trans 1), M unit lower triangular (ld L): a thread per
// column, the rows in the substitution's order.
__device__ static void btrsm_unit_lower(bool trans, const float *M, int L, float *X, int n, int dv) {
    for (int j = threadIdx.x; j < dv; j += blockDim.x) {
        if (!trans) {
            for (int t = 1; t < n; t++) {
                float acc = 0;
                for (int s = 0; s < t; s++) acc += M[(size_t)t * L + s] * X[(size_t)s * dv + j];
                X[(size_t)t * dv + j] -= acc;
            }
        } else {
            for (int t = n - 2; t >= 0; t--) {
                float acc = 0;
                for (int s = t + 1; s < n; s++) acc += M[(size_t)s * L + t] * X[(size_t)s * dv + j];
                X[(size_t)t * dv + j] -= acc;
            }
        }
    }
}

// x̂ = s·r·x, r = 1/sqrt(Σx² + eps) (l2; the sum in double) or 1: returns r.
__device__ static float unit_row(float *xh, const float *x, int d, int l2, float s) {
    double ss = 0;
    for (int i = 0; i < d; i++) ss += (double)x[i] * x[i];
    const float r = l2 ? (float)(1 / sqrt(ss + PHAX_GDN_L2_EPS)) : 1.0f, f = s * r;
    for (int i = 0; i < d; i++) xh[i] = f * x[i];
    return r;
}

// dx += s·(r·dx̂ − r³·x·(x·dx̂)) (l2) or s·dx̂.
__device__ static void unit_row_bwd(float *dx, const float *dxh, const float *x, float r, int d, int l2, float s) {
    if (!l2) {
        for (int i = 0; i < d; i++) dx[i] += s * dxh[i];
        return;
    }
    double xd = 0;
    for (int i = 0; i < d; i++) xd += (double)x[i] * dxh[i];
    const float a = s * r, bq = (float)(s * (double)r * r * r * xd);
    for (int i = 0; i < d; i++) dx[i] += a * dxh[i] - bq * x[i];
}

// The chunk at t0 (n steps) from the state Z0: everything up to the pseudo-values U.
__device__ static void chunk_prep(gdn_seq &s, const gdn_geom &g, const float *q, const float *k, const float *v,
                                  const float *gl, const float *beta, const float *Z0, int t0, int n) {
    const int dk = g.dk, dv = g.dv, L = g.L;
    for (int t = threadIdx.x; t < n; t += blockDim.x) {
        const size_t gi = s.r0 + (size_t)(t0 + t) * s.rs;
        s.rk[t] = unit_row(s.Kh + (size_t)t * dk, k + gi * dk, dk, g.l2, 1.0f);
        s.rq[t] = unit_row(s.Qh + (size_t)t * dk, q + gi * dk, dk, g.l2, g.scale);
    }
    if (threadIdx.x == 0) {
        double acc = 0;
        for (int t = 0; t < n; t++) {
            s.G[t] = acc += gl[s.r0 + (size_t)(t0 + t) * s.rs];
            s.eG[t] = (float)exp(acc);
        }
    }
    __syncthreads();
    bgemm(false, true, n, n, dk, 1.0f, s.Kh, dk, s.Kh, dk, 0.0f, s.GKK, L);  // K̂K̂ᵀ
    bgemm(false, true, n, n, dk, 1.0f, s.Qh, dk, s.Kh, dk, 0.0f, s.P, L);    // Q̂K̂ᵀ
    bgemm(false, false, n, dv, dk, 1.0f, s.Kh, dk, Z0, dv, 0.0f, s.KZ, dv);  // K̂Z₀
    __syncthreads();
    // the decays (exponents in double, rounded once), M, and R = V − diag(e^G) K̂Z₀, U = diag(β) R
    for (size_t e = threadIdx.x; e < (size_t)n * n; e += blockDim.x) {
        const int t = (int)(e / n), j = (int)(e % n);
        const size_t x = (size_t)t * L + j;
        if (j < t) {
            const float ex = (float)exp(s.G[t] - s.G[j]);
            s.GKK[x] *= ex, s.P[x] *= ex, s.M[x] = beta[s.r0 + (size_t)(t0 + t) * s.rs] * s.GKK[x];
        } else {
            s.GKK[x] = 0, s.M[x] = j == t ? 1.0f : 0.0f;
            if (j > t) s.P[x] = 0;
        }
    }
    for (size_t e = threadIdx.x; e < (size_t)n * dv; e += blockDim.x) {
        const int t = (int)(e / dv), i = (int)(e % dv);
        const size_t gi = s.r0 + (size_t)(t0 + t) * s.rs;
        const float r = v[gi * dv + i] - s.eG[t] * s.KZ[e];
        s.R[e] = r, s.U[e] = beta[gi] * r;
    }
    __syncthreads();
    btrsm_unit_lower(false, s.M, L, s.U, n, dv);  // U = M⁻¹ diag(β) R
    __syncthreads();
}

// QZ = Q̂Z₀, and (o non-NULL) the output rows O = diag(e^G) Q̂Z₀ + P U into o.
__device__ static void chunk_out(gdn_seq &s, const gdn_geom &g, const float *Z0, float *o, int t0, int n) {
    const int dk = g.dk, dv = g.dv, L = g.L;
    bgemm(false, false, n, dv, dk, 1.0f, s.Qh, dk, Z0, dv, 0.0f, s.QZ, dv);
    __syncthreads();
    if (!o) return;
    for (size_t e = threadIdx.x; e < (size_t)n * dv; e += blockDim.x) {
        const int t = (int)(e / dv), i = (int)(e % dv);
        float acc = 0;
        for (int j = 0; j <= t; j++) acc += s.P[(size_t)t * L + j] * s.U[(size_t)j * dv + i];
        o[(s.r0 + (size_t)(t0 + t) * s.rs) * dv + i] = s.eG[t] * s.QZ[e] + acc;
    }
    __syncthreads();
}

// Z (= Z₀ on entry) ← e^{G_n} Z₀ + K̂ᵀ diag(w) U, w_t = e^{G_n − G_t} (in place: each element
// read, then written, by its own thread).
__device__ static void chunk_state(gdn_seq &s, const gdn_geom &g, float *Z, int n) {
    const int dk = g.dk, dv = g.dv, Lz = n - 1;
    for (int t = threadIdx.x; t < n; t += blockDim.x) s.w[t] = (float)exp(s.G[Lz] - s.G[t]);
    __syncthreads();
    for (size_t e = threadIdx.x; e < (size_t)n * dk; e += blockDim.x) s.Wk[e] = s.w[e / dk] * s.Kh[e];
    __syncthreads();
    const float eL = s.eG[Lz];
    for (size_t e = threadIdx.x; e < (size_t)dk * dv; e += blockDim.x) {
        const int i = (int)(e / dv), j = (int)(e % dv);
        float acc = 0;
        for (int t = 0; t < n; t++) acc += s.Wk[(size_t)t * dk + i] * s.U[(size_t)t * dv + j];
        Z[e] = acc + eL * Z[e];
    }
    __syncthreads();
}

__device__ static void load_state(float *Z, const float *s0, size_t kv) {
    for (size_t e = threadIdx.x; e < kv; e += blockDim.x) Z[e] = s0 ? s0[e] : 0.0f;
    __syncthreads();
}

// --- forward --------------------------------------------------------------------------------------
// grid (B·H), GDN_THREADS threads: block p = b·H + h owns sequence (b, h) and state p.
static __global__ void __launch_bounds__(GDN_THREADS)
    gdn_fwd_k(float *o, float *sT, const float *q, const float *k, const float *v, const float *gl,
              const float *beta, const float *s0, char *ws, gdn_geom g, gdn_lay lay) {
    const int p = blockIdx.x;
    const size_t kv = (size_t)g.dk * g.dv;
    gdn_seq s = gdn_seq_of(ws, lay, p, g, 0);
    load_state(s.Z, s0 ? s0 + (size_t)p * kv : NULL, kv);
    for (int ci = 0; ci < g.nc; ci++) {
        const int t0 = ci * g.L, n = g.T - t0 < g.L ? g.T - t0 : g.L;
        chunk_prep(s, g, q, k, v, gl, beta, s.Z, t0, n);
        chunk_out(s, g, s.Z, o, t0, n);
        chunk_state(s, g, s.Z, n);
    }
    if (sT)
        for (size_t e = threadIdx.x; e < kv; e += blockDim.x) sT[(size_t)p * kv + e] = s.Z[e];
}

// --- backward -------------------------------------------------------------------------------------
typedef struct {
    float *dq, *dk_, *dv_, *dg, *dbeta, *ds0;
    const float *do_, *dsT, *q, *k, *v, *g, *beta, *s0;
} gdn_bargs;

// One chunk's backward (its prep and QZ in s from the start state Z0): from s.dZ and do_ into the
// inputs' gradients and s.dZ0. fast/cpu/gdn.c's chunk_bwd, (a)-(e).
// red: 32 doubles of the block's shared memory (fcuda_block_sum_d).
__device__ static void chunk_bwd(gdn_seq &s, const gdn_geom &g, const gdn_bargs &a, const float *Z0, int t0, int n,
                                 double *red) {
    const int dk = g.dk, dv = g.dv, L = g.L, Lz = n - 1;
    const size_t kv = (size_t)dk * dv;
    for (int t = threadIdx.x; t < n; t += blockDim.x) {
        s.dG[t] = 0;
        s.w[t] = (float)exp(s.G[Lz] - s.G[t]);
    }
    for (size_t e = threadIdx.x; e < (size_t)n * dk; e += blockDim.x) s.dKh[e] = 0, s.dQh[e] = 0;
    for (size_t e = threadIdx.x; e < (size_t)n * dv; e += blockDim.x) s.dU[e] = 0;
    // (a) Z = e^{G_n} Z₀ + K̂ᵀ diag(w) U
    double zz = 0;
    for (size_t e = threadIdx.x; e < kv; e += blockDim.x) s.dZ0[e] = s.eG[Lz] * s.dZ[e], zz += (double)s.dZ[e] * Z0[e];
    zz = fcuda_block_sum_d(zz, red);
    bgemm(false, false, n, dv, dk, 1.0f, s.Kh, dk, s.dZ, dv, 0.0f, s.T1, dv);  // K̂ dZ
    bgemm(false, true, n, dk, dv, 1.0f, s.U, dv, s.dZ, dv, 0.0f, s.T2, dk);    // U dZᵀ
    __syncthreads();
    for (int t = threadIdx.x; t < n; t += blockDim.x) {
        double x = 0;
        for (int i = 0; i < dv; i++) {
            const float a1 = s.T1[(size_t)t * dv + i];
            x += (double)a1 * s.U[(size_t)t * dv + i];
            s.dU[(size_t)t * dv + i] += s.w[t] * a1;
        }
        for (int j = 0; j < dk; j++) s.dKh[(size_t)t * dk + j] += s.w[t] * s.T2[(size_t)t * dk + j];
        s.xr[t] = x * s.w[t];
    }
    __syncthreads();
    if (threadIdx.x == 0) {  // dG_n gets every row's term, in row order, after e^{G_n}⟨dZ, Z₀⟩
        double acc = s.eG[Lz] * zz;
        for (int t = 0; t < n; t++) acc += s.xr[t], s.dG[t] -= s.xr[t];
        s.dG[Lz] += acc;
    }
    __syncthreads();  // xr is written again below
    // (b) O = diag(e^G) Q̂Z₀ + P U
    for (int t = threadIdx.x; t < n; t += blockDim.x) {
        const float *dot = a.do_ + (s.r0 + (size_t)(t0 + t) * s.rs) * dv;
        double x = 0;
        for (int i = 0; i < dv; i++) {
            s.DO[(size_t)t * dv + i] = dot[i];
            s.T1[(size_t)t * dv + i] = s.eG[t] * dot[i];
            x += (double)dot[i] * s.QZ[(size_t)t * dv + i];
        }
        s.xr[t] = s.eG[t] * x;
    }
    __syncthreads();
    for (int t = threadIdx.x; t < n; t += blockDim.x) s.dG[t] += s.xr[t];
    bgemm(true, false, dk, dv, n, 1.0f, s.Qh, dk, s.T1, dv, 1.0f, s.dZ0, dv);   // dZ₀ += Q̂ᵀ diag(e^G) dO
    bgemm(false, true, n, dk, dv, 1.0f, s.T1, dv, Z0, dv, 1.0f, s.dQh, dk);     // dQ̂ += diag(e^G) dO Z₀ᵀ
    bgemm(false, true, n, n, dv, 1.0f, s.DO, dv, s.U, dv, 0.0f, s.dP, L);       // dP = dO Uᵀ
    bgemm(true, false, n, dv, n, 1.0f, s.P, L, s.DO, dv, 1.0f, s.dU, dv);       // dU += Pᵀ dO
    __syncthreads();
    // (c) M U = diag(β) R: dX = M⁻ᵀ dU, dM = −dX Uᵀ (s < t)
    for (size_t e = threadIdx.x; e < (size_t)n * dv; e += blockDim.x) s.dX[e] = s.dU[e];
    __syncthreads();
    btrsm_unit_lower(true, s.M, L, s.dX, n, dv);
    __syncthreads();
    bgemm(false, true, n, n, dv, -1.0f, s.dX, dv, s.U, dv, 0.0f, s.dM, L);
    __syncthreads();
    for (int t = threadIdx.x; t < n; t += blockDim.x) {
        const size_t gi = s.r0 + (size_t)(t0 + t) * s.rs;
        const float bt = a.beta[gi];
        double db = 0, x = 0;
        for (int i = 0; i < dv; i++) {
            const float dx = s.dX[(size_t)t * dv + i], dr = bt * dx;
            db += (double)dx * s.R[(size_t)t * dv + i];
            if (a.dv_) a.dv_[gi * dv + i] += dr;
            s.T1[(size_t)t * dv + i] = s.eG[t] * dr;  // diag(e^G) dR
            x += (double)dr * s.KZ[(size_t)t * dv + i];
        }
        s.dG[t] -= s.eG[t] * x;
        for (int j = 0; j < t; j++) {  // M_tj = β_t GKK_tj: dβ_t, and dGKK_tj = β_t dM_tj (into dM)
            const size_t y = (size_t)t * L + j;
            db += (double)s.dM[y] * s.GKK[y];
            s.dM[y] *= bt;
        }
        if (a.dbeta) a.dbeta[gi] += (float)db;
    }
    __syncthreads();
    bgemm(true, false, dk, dv, n, -1.0f, s.Kh, dk, s.T1, dv, 1.0f, s.dZ0, dv);  // dZ₀ −= K̂ᵀ diag(e^G) dR
    bgemm(false, true, n, dk, dv, -1.0f, s.T1, dv, Z0, dv, 1.0f, s.dKh, dk);    // dK̂ −= diag(e^G) dR Z₀ᵀ
    __syncthreads();
    // (d) GKK = Γ ∘ K̂K̂ᵀ (s < t), P = Γ ∘ Q̂K̂ᵀ (s ≤ t): the decays' part to G (a pair's term X2_tj
    // goes to dG_t and, negated, to dG_j), the rest to K̂, Q̂
    for (size_t e = threadIdx.x; e < (size_t)n * n; e += blockDim.x) {
        const int t = (int)(e / n), j = (int)(e % n);
        const size_t y = (size_t)t * L + j;
        if (j > t) {
            s.dM[y] = 0, s.dP[y] = 0, s.X2[e] = 0;
            continue;
        }
        const float ex = j < t ? (float)exp(s.G[t] - s.G[j]) : 1.0f;
        double x = (double)s.dP[y] * s.P[y];
        if (j < t) x += (double)s.dM[y] * s.GKK[y];
        else s.dM[y] = 0;
        s.X2[e] = x;
        s.dM[y] *= ex, s.dP[y] *= ex;  // dKK (strictly lower), dKQ
    }
    __syncthreads();
    for (int u = threadIdx.x; u < n; u += blockDim.x) {
        double acc = 0;
        for (int j = 0; j <= u; j++) acc += s.X2[(size_t)u * n + j];
        for (int t = u; t < n; t++) acc -= s.X2[(size_t)t * n + u];
        s.dG[u] += acc;
    }
    bgemm(false, false, n, dk, n, 1.0f, s.dP, L, s.Kh, dk, 1.0f, s.dQh, dk);  // dQ̂ += dKQ K̂
    __syncthreads();
    bgemm(true, false, n, dk, n, 1.0f, s.dP, L, s.Qh, dk, 1.0f, s.dKh, dk);   // dK̂ += dKQᵀ Q̂
    __syncthreads();
    bgemm(false, false, n, dk, n, 1.0f, s.dM, L, s.Kh, dk, 1.0f, s.dKh, dk);  // + dKK K̂
    __syncthreads();
    bgemm(true, false, n, dk, n, 1.0f, s.dM, L, s.Kh, dk, 1.0f, s.dKh, dk);   // + dKKᵀ K̂
    __syncthreads();
    // (e) G_t = Σ_{i≤t} g_i (a suffix sum, one thread); q̂, k̂ back through the normalisation
    if (threadIdx.x == 0 && a.dg) {
        double acc = 0;
        for (int t = n - 1; t >= 0; t--) {
            acc += s.dG[t];
            a.dg[s.r0 + (size_t)(t0 + t) * s.rs] += (float)acc;
        }
    }
    for (int t = threadIdx.x; t < n; t += blockDim.x) {
        const size_t gi = s.r0 + (size_t)(t0 + t) * s.rs;
        if (a.dq) unit_row_bwd(a.dq + gi * dk, s.dQh + (size_t)t * dk, a.q + gi * dk, s.rq[t], dk, g.l2, g.scale);
        if (a.dk_) unit_row_bwd(a.dk_ + gi * dk, s.dKh + (size_t)t * dk, a.k + gi * dk, s.rk[t], dk, g.l2, 1.0f);
    }
    __syncthreads();
}

// Block p: the chunks' start states (a forward walk), then the chunks from the last, carrying
// the state's gradient.
static __global__ void __launch_bounds__(GDN_THREADS) gdn_bwd_k(gdn_bargs a, char *ws, gdn_geom g, gdn_lay lay) {
    const int p = blockIdx.x;
    const size_t kv = (size_t)g.dk * g.dv;
    __shared__ double red[32];
    gdn_seq s = gdn_seq_of(ws, lay, p, g, 1);
    load_state(s.Zs, a.s0 ? a.s0 + (size_t)p * kv : NULL, kv);
    for (int ci = 0; ci + 1 < g.nc; ci++) {  // (no state is needed after the last chunk)
        const int t0 = ci * g.L, n = g.T - t0 < g.L ? g.T - t0 : g.L;
        float *Z = s.Zs + (size_t)(ci + 1) * kv;
        for (size_t e = threadIdx.x; e < kv; e += blockDim.x) Z[e] = s.Zs[(size_t)ci * kv + e];
        __syncthreads();
        chunk_prep(s, g, a.q, a.k, a.v, a.g, a.beta, Z, t0, n);
        chunk_state(s, g, Z, n);
    }
    load_state(s.dZ, a.dsT ? a.dsT + (size_t)p * kv : NULL, kv);
    for (int ci = g.nc - 1; ci >= 0; ci--) {
        const int t0 = ci * g.L, n = g.T - t0 < g.L ? g.T - t0 : g.L;
        const float *Z0 = s.Zs + (size_t)ci * kv;
        chunk_prep(s, g, a.q, a.k, a.v, a.g, a.beta, Z0, t0, n);
        chunk_out(s, g, Z0, NULL, t0, n);  // Q̂Z₀ only
        chunk_bwd(s, g, a, Z0, t0, n, red);
        for (size_t e = threadIdx.x; e < kv; e += blockDim.x) s.dZ[e] = s.dZ0[e];
        __syncthreads();
    }
    if (a.ds0)
        for (size_t e = threadIdx.x; e < kv; e += blockDim.x) a.ds0[(size_t)p * kv + e] += s.dZ[e];
}

// --- the layer's short convolution -----------------------------------------------------------------
// ref_gdn_conv_*'s function (docs/spec.md §2.13) with fast/cpu's arithmetic: the pre-activation a float
// sum over the taps in order, SiLU′ = σ(1 + a(1 − σ)). The backward forms da = dy·SiLU′(a) once
// into the workspace, then dx a thread per element gathering from the outputs it reaches (no
// atomics), dw a thread per (c, j) summing over (b, t) in order in double.
__device__ static float conv_pre(const float *x0, const float *w, int t, int c, int C, int K) {
    float a = 0;
    for (int j = t < K - 1 ? K - 1 - t : 0; j < K; j++) a += w[(size_t)c * K + j] * x0[(size_t)(t - K + 1 + j) * C + c];
    return a;
}

static __global__ void conv_fwd_k(float *y, const float *x, const float *w, int T, int C, int K, size_t n) {
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        const size_t r = e / C;
        const int c = (int)(e % C), t = (int)(r % T);
        const float a = conv_pre(x + (r - t) * C, w, t, c, C, K);
        y[e] = a * phax_sigmoidf(a);
    }
}

static __global__ void conv_da_k(float *da, const float *dy, const float *x, const float *w, int T, int C, int K,
                                 size_t n) {
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        const size_t r = e / C;
        const int c = (int)(e % C), t = (int)(r % T);
        const float a = conv_pre(x + (r - t) * C, w, t, c, C, K), s = phax_sigmoidf(a);
        da[e] = dy[e] * (s * (1.0f + a * (1.0f - s)));
    }
}

static __global__ void conv_dx_k(float *dx, const float *da, const float *w, int T, int C, int K, size_t n) {
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        const size_t r = e / C;
        const int c = (int)(e % C), s = (int)(r % T);
        float acc = 0;
        for (int j = 0; j < K; j++)
            if (s + K - 1 - j < T) acc += w[(size_t)c * K + j] * da[(r + K - 1 - j) * C + c];
        dx[e] += acc;
    }
}

static __global__ void conv_dw_k(float *dw, const float *da, const float *x, int B, int T, int C, int K) {
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < (size_t)C * K; e += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(e / K), j = (int)(e % K);
        double acc = 0;
        for (int b = 0; b < B; b++) {
            const float *x0 = x + (size_t)b * T * C, *da0 = da + (size_t)b * T * C;
            for (int t = K - 1 - j; t < T; t++) acc += (double)x0[(size_t)(t - K + 1 + j) * C + c] * da0[(size_t)t * C + c];
        }
        dw[e] += (float)acc;
    }
}

static int conv_sizes(const char *op, int B, int T, int C, int K) {
    if (B < 1 || T < 0 || C < 1 || K < 1) return phax_fail("cuda %s: invalid sizes B=%d T=%d C=%d K=%d", op, B, T, C, K);
    return PHAX_OK;
}

extern "C" int fcuda_gdn_conv_fwd(float *y, const float *x, const float *w, int B, int T, int C, int K, void *stream) {
    const char *op = "gdn_conv_fwd";
    if (conv_sizes(op, B, T, C, K)) return PHAX_ERR;
    const size_t n = (size_t)B * T * C;
    if (n == 0) return PHAX_OK;
    PHAX_LAUNCH(conv_fwd_k, fcuda_ew_blocks(n, GDN_THREADS), GDN_THREADS, 0, fcuda_stream(stream), y, x, w, T, C, K, n);
    return fcuda_check(op);
}

extern "C" size_t fcuda_gdn_conv_bwd_ws(int B, int T, int C) {
    return B < 1 || T < 0 || C < 1 ? 0 : (size_t)B * T * C * sizeof(float);
}

extern "C" int fcuda_gdn_conv_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, int B, int T,
                                  int C, int K, void *ws, void *stream) {
    const char *op = "gdn_conv_bwd";
    if (conv_sizes(op, B, T, C, K)) return PHAX_ERR;
    if (!ws) return phax_fail("cuda %s: no workspace", op);
    const size_t n = (size_t)B * T * C;
    if (n == 0 || !(dx || dw)) return PHAX_OK;
    float *da = (float *)ws;
    PHAX_LAUNCH(conv_da_k, fcuda_ew_blocks(n, GDN_THREADS), GDN_THREADS, 0, fcuda_stream(stream), da, dy, x, w, T, C, K,
                n);
    if (dx)
        PHAX_LAUNCH(conv_dx_k, fcuda_ew_blocks(n, GDN_THREADS), GDN_THREADS, 0, fcuda_stream(stream), dx, da, w, T, C, K,
                    n);
    if (dw)
        PHAX_LAUNCH(conv_dw_k, fcuda_ew_blocks((size_t)C * K, GDN_THREADS), GDN_THREADS, 0, fcuda_stream(stream), dw, da,
                    x, B, T, C, K);
    return fcuda_check(op);
}

// --- the layer's gates ---------------------------------------------------------------------------------
// ref_gdn_gates_*'s function with fast/cpu's arithmetic: a thread per (row, head) for g, β, da, db;
// a thread per head for dA_log and ddt_bias, summing its rows in order in double.

static __global__ void gates_fwd_k(float *g, float *beta, const float *a, const float *b, const float *A_log,
                                   const float *dt_bias, size_t n, int H) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n * H; i += (size_t)gridDim.x * blockDim.x) {
        const int h = (int)(i % H);
        if (g) g[i] = -expf(A_log[h]) * phax_softplusf(a[i] + dt_bias[h]);
        if (beta) beta[i] = phax_sigmoidf(b[i]);
    }
}

static __global__ void gates_bwd_k(float *da, float *db, const float *dg, const float *dbeta, const float *a,
                                   const float *b, const float *A_log, const float *dt_bias, size_t n, int H) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n * H; i += (size_t)gridDim.x * blockDim.x) {
        const int h = (int)(i % H);
        if (dg && da) da[i] += -dg[i] * expf(A_log[h]) * phax_sigmoidf(a[i] + dt_bias[h]);
        if (dbeta && db) {
            const float s = phax_sigmoidf(b[i]);
            db[i] += dbeta[i] * (s * (1.0f - s));
        }
    }
}

static __global__ void gates_sums_k(float *dA_log, float *ddt_bias, const float *dg, const float *a,
                                    const float *A_log, const float *dt_bias, size_t n, int H) {
    for (int h = blockIdx.x * blockDim.x + threadIdx.x; h < H; h += gridDim.x * blockDim.x) {
        const float E = expf(A_log[h]);
        double sa = 0, st = 0;
        for (size_t r = 0; r < n; r++) {
            const size_t i = r * H + h;
            const float z = a[i] + dt_bias[h];
            sa += (double)dg[i] * (-E * phax_softplusf(z));
            st += (double)dg[i] * (-E * phax_sigmoidf(z));
        }
        if (dA_log) dA_log[h] += (float)sa;
        if (ddt_bias) ddt_bias[h] += (float)st;
    }
}

extern "C" int fcuda_gdn_gates_fwd(float *g, float *beta, const float *a, const float *b, const float *A_log,
                                   const float *dt_bias, size_t n, int H, void *stream) {
    const char *op = "gdn_gates_fwd";
    if (H < 1) return phax_fail("cuda %s: H = %d must be >= 1", op, H);
    if (n == 0) return PHAX_OK;
    PHAX_LAUNCH(gates_fwd_k, fcuda_ew_blocks(n * H, GDN_THREADS), GDN_THREADS, 0, fcuda_stream(stream), g, beta, a, b,
                A_log, dt_bias, n, H);
    return fcuda_check(op);
}

extern "C" int fcuda_gdn_gates_bwd(float *da, float *db, float *dA_log, float *ddt_bias, const float *dg,
                                   const float *dbeta, const float *a, const float *b, const float *A_log,
                                   const float *dt_bias, size_t n, int H, void *stream) {
    const char *op = "gdn_gates_bwd";
    if (H < 1) return phax_fail("cuda %s: H = %d must be >= 1", op, H);
    if (n == 0) return PHAX_OK;
    PHAX_LAUNCH(gates_bwd_k, fcuda_ew_blocks(n * H, GDN_THREADS), GDN_THREADS, 0, fcuda_stream(stream), da, db, dg,
                dbeta, a, b, A_log, dt_bias, n, H);
    if (dg && (dA_log || ddt_bias))
        PHAX_LAUNCH(gates_sums_k, fcuda_ew_blocks((size_t)H, GDN_THREADS), GDN_THREADS, 0, fcuda_stream(stream), dA_log,
                    ddt_bias, dg, a, A_log, dt_bias, n, H);
    return fcuda_check(op);
}

// --- entries --------------------------------------------------------------------------------------
static int gdn_args(const char *op, int B, int T, int H, int dk, int dv, int chunk, const phax_gdn_cfg *c,
                    const void *ws) {
    if (B < 1 || T < 0 || H < 1 || dk < 1 || dv < 1 || dk > FCPU_GDN_MAX_DIM || dv > FCPU_GDN_MAX_DIM)
        return phax_fail("cuda %s: invalid sizes B=%d T=%d H=%d dk=%d dv=%d", op, B, T, H, dk, dv);
    if (chunk > FCPU_GDN_MAX_CHUNK) return phax_fail("cuda %s: chunk %d is more than %d", op, chunk, FCPU_GDN_MAX_CHUNK);
    if (!c) return phax_fail("cuda %s: cfg is NULL", op);
    if (!ws) return phax_fail("cuda %s: no workspace", op);
    return PHAX_OK;
}

static gdn_geom gdn_geom_of(int T, int H, int dk, int dv, int chunk, const phax_gdn_cfg *c) {
    gdn_geom g;
    g.T = T, g.H = H, g.dk = dk, g.dv = dv, g.L = gdn_chunk(chunk, T), g.nc = gdn_nchunks(T, g.L);
    g.l2 = c->qk_l2norm, g.scale = (float)c->scale;
    return g;
}

static size_t gdn_ws_bytes(int B, int T, int H, int dk, int dv, int chunk, int bwd) {
    if (B < 1 || H < 1 || T < 0 || dk < 1 || dv < 1 || dk > FCPU_GDN_MAX_DIM || dv > FCPU_GDN_MAX_DIM ||
        chunk > FCPU_GDN_MAX_CHUNK)
        return 0;
    const int L = gdn_chunk(chunk, T);
    return 16 + (size_t)B * H * gdn_layout(L, dk, dv, gdn_nchunks(T, L), bwd).slot;
}

static char *gdn_align(void *ws) { return reinterpret_cast<char *>(((uintptr_t)ws + 15) & ~(uintptr_t)15); }

extern "C" size_t fcuda_gdn_fwd_ws(int B, int T, int H, int dk, int dv, int chunk) {
    return gdn_ws_bytes(B, T, H, dk, dv, chunk, 0);
}
extern "C" size_t fcuda_gdn_bwd_ws(int B, int T, int H, int dk, int dv, int chunk) {
    return gdn_ws_bytes(B, T, H, dk, dv, chunk, 1);
}

extern "C" int fcuda_gdn_fwd(float *o, float *sT, const float *q, const float *k, const float *v, const float *g,
                             const float *beta, const float *s0, int B, int T, int H, int dk, int dv,
                             const phax_gdn_cfg *c, int chunk, void *ws, void *stream) {
    const char *op = "gdn_fwd";
    if (gdn_args(op, B, T, H, dk, dv, chunk, c, ws)) return PHAX_ERR;
    if (T == 0 && !sT) return PHAX_OK;
    const gdn_geom G = gdn_geom_of(T, H, dk, dv, chunk, c);
    const gdn_lay lay = gdn_layout(G.L, dk, dv, G.nc, 0);
    PHAX_LAUNCH(gdn_fwd_k, (unsigned)((size_t)B * H), GDN_THREADS, 0, fcuda_stream(stream), o, sT, q, k, v, g, beta,
                s0, gdn_align(ws), G, lay);
    return fcuda_check(op);
}

extern "C" int fcuda_gdn_bwd(float *dq, float *dk_, float *dv_, float *dg, float *dbeta, float *ds0, const float *do_,
                             const float *dsT, const float *q, const float *k, const float *v, const float *g,
                             const float *beta, const float *s0, int B, int T, int H, int dk, int dv,
                             const phax_gdn_cfg *c, int chunk, void *ws, void *stream) {
    const char *op = "gdn_bwd";
    if (gdn_args(op, B, T, H, dk, dv, chunk, c, ws)) return PHAX_ERR;
    if (!(dq || dk_ || dv_ || dg || dbeta || ds0)) return PHAX_OK;
    const gdn_geom G = gdn_geom_of(T, H, dk, dv, chunk, c);
    const gdn_lay lay = gdn_layout(G.L, dk, dv, G.nc, 1);
    gdn_bargs a = {dq, dk_, dv_, dg, dbeta, ds0, do_, dsT, q, k, v, g, beta, s0};
    PHAX_LAUNCH(gdn_bwd_k, (unsigned)((size_t)B * H), GDN_THREADS, 0, fcuda_stream(stream), a, gdn_align(ws), G, lay);
    return fcuda_check(op);
}
