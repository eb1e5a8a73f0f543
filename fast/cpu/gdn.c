// fast/cpu Gated DeltaNet cell, chunkwise (WY/UT) form, float32, forward and backward. The
// function is docs/spec.md §2.13; ref/gdn.c is the specification (its chunkwise comments derive
// the same algebra).
//
// Per (b, h) sequence the state is kept as Z = Sᵀ (dk × dv, row-major: the stored layout
// [B, H, K, V] itself). A chunk of n ≤ L steps from Z₀, with G_t = Σ_{i≤t} g_i (chunk-local, in
// double), Γ_ts = e^{G_t − G_s} (the exponent formed in double, rounded once), k̂/q̂ the
// normalised rows (K̂, Q̂: n × dk):
//   M = I + tril₋₁(diag(β) (Γ ∘ K̂K̂ᵀ))          (n × n, unit lower triangular)
//   R = V − diag(e^G) K̂ Z₀,  M U = diag(β) R     (the pseudo-values U: n × dv, by strsm)
//   O = diag(e^G) Q̂ Z₀ + tril(Γ ∘ Q̂K̂ᵀ) U
//   Z ← e^{G_L} Z₀ + K̂ᵀ diag(e^{G_L − G}) U
// Backward, per chunk from the last, from dZ (the gradient of the state the chunk hands on) and
// dO: reverse mode through those four lines (M⁻ᵀ by strsm with the transpose), the products by
// sgemm on chunk-sized blocks, the per-row scalars (⟨dZ, Z₀⟩, dO_t·(Q̂Z₀)_t, …) in double; the
// chunks' start states are recomputed in a first pass and kept in ws ((⌈T/L⌉+1)·dk·dv floats per
// thread). G's gradient becomes dg by a suffix sum; q̂, k̂ go back through the normalisation.
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "phax/fcpu_gdn.h"
#include "phax/numerics.h"  // phax_sigmoidf, phax_softplusf
#include "seq_internal.h"

static int eff_chunk(int chunk, int T) {
    int L = chunk > 0 ? chunk : FCPU_GDN_CHUNK;
    if (T <= 0) return 1;  // nothing to do: no chunk-sized scratch either
    return L > T ? T : L;
}

static int check_args(const char *who, int B, int T, int H, int dk, int dv, int chunk, const phax_gdn_cfg *c,
                      const void *ws) {
    if (B < 1 || T < 0 || H < 1 || dk < 1 || dv < 1 || dk > FCPU_GDN_MAX_DIM || dv > FCPU_GDN_MAX_DIM)
        return phax_fail("%s: invalid sizes B=%d T=%d H=%d dk=%d dv=%d", who, B, T, H, dk, dv);
    if (chunk > FCPU_GDN_MAX_CHUNK)
        return phax_fail("%s: chunk %d is more than %d", who, chunk, FCPU_GDN_MAX_CHUNK);
    if (!c) return phax_fail("%s: cfg is NULL", who);
    if (!ws) return phax_fail("%s: ws is NULL", who);
    return PHAX_OK;
}

// One thread's scratch. The chunk's quantities (prep) and, for the backward, their gradients.
typedef struct {
    float *Kh, *Qh;          // (L, dk): k̂, q̂ rows
    float *rk, *rq;          // (L): the normalisations' 1/sqrt(Σx² + eps) (1 without)
    double *G;               // (L): chunk-local Σ g
    float *eG;               // (L): e^{G}
    float *GKK;              // (L, L): Γ ∘ K̂K̂ᵀ (s < t)
    float *P;                // (L, L): tril(Γ ∘ Q̂K̂ᵀ)
    float *M;                // (L, L): I + tril₋₁(diag(β) GKK)
    float *KZ, *QZ, *R, *U;  // (L, dv): K̂Z₀, Q̂Z₀, V − diag(e^G)K̂Z₀, the pseudo-values
    float *Ot, *w, *Wk;      // (L, dv) output rows; (L) e^{G_L − G}; (L, dk) diag(w) K̂
    float *Z;                // (dk, dv): the running state
    // backward
    float *Zs;                      // (nc + 1, dk, dv): the chunks' start states
    float *dZ, *dZ0;                // (dk, dv)
    float *DO, *dU, *dX, *T1;       // (L, dv)
    float *dKh, *dQh, *T2;          // (L, dk)
    float *dP, *dM;                 // (L, L)
    double *dG;                     // (L)
} slot;

static slot slot_carve(carve *c, int L, int dk, int dv, int nc, int bwd) {
    slot s;
    memset(&s, 0, sizeof s);
    size_t Ld = (size_t)L * dk, Lv = (size_t)L * dv, LL = (size_t)L * L, kv = (size_t)dk * dv;
    s.Kh = take(c, Ld * 4), s.Qh = take(c, Ld * 4), s.rk = take(c, (size_t)L * 4), s.rq = take(c, (size_t)L * 4);
    s.G = take(c, (size_t)L * 8), s.eG = take(c, (size_t)L * 4);
    s.GKK = take(c, LL * 4), s.P = take(c, LL * 4), s.M = take(c, LL * 4);
    s.KZ = take(c, Lv * 4), s.QZ = take(c, Lv * 4), s.R = take(c, Lv * 4), s.U = take(c, Lv * 4);
    s.Ot = take(c, Lv * 4), s.w = take(c, (size_t)L * 4), s.Wk = take(c, Ld * 4), s.Z = take(c, kv * 4);
    if (!bwd) return s;
    s.Zs = take(c, ((size_t)nc + 1) * kv * 4), s.dZ = take(c, kv * 4), s.dZ0 = take(c, kv * 4);
    s.DO = take(c, Lv * 4), s.dU = take(c, Lv * 4), s.dX = take(c, Lv * 4), s.T1 = take(c, Lv * 4);
    s.dKh = take(c, Ld * 4), s.dQh = take(c, Ld * 4), s.T2 = take(c, Ld * 4);
    s.dP = take(c, LL * 4), s.dM = take(c, LL * 4), s.dG = take(c, (size_t)L * 8);
    return s;
}

static size_t slot_bytes(int L, int dk, int dv, int nc, int bwd) {
    carve c = {NULL, 0};
    (void)slot_carve(&c, L, dk, dv, nc, bwd);
    return (c.used + 63) & ~(size_t)63;
}

// The sizes a call accepts (check_args): with them every slot's size fits comfortably in size_t.
static int ws_sizes_ok(int B, int T, int H, int dk, int dv, int chunk) {
    return B >= 1 && H >= 1 && T >= 0 && dk >= 1 && dv >= 1 && dk <= FCPU_GDN_MAX_DIM && dv <= FCPU_GDN_MAX_DIM &&
           chunk <= FCPU_GDN_MAX_CHUNK;
}

size_t fcpu_gdn_chunkwise_fwd_ws(int B, int T, int H, int dk, int dv, int chunk) {
    if (!ws_sizes_ok(B, T, H, dk, dv, chunk)) return 0;
    int L = eff_chunk(chunk, T);
    return 64 + (size_t)nslots(B, H) * slot_bytes(L, dk, dv, nchunks(T, L), 0);
}

size_t fcpu_gdn_chunkwise_bwd_ws(int B, int T, int H, int dk, int dv, int chunk) {
    if (!ws_sizes_ok(B, T, H, dk, dv, chunk)) return 0;
    int L = eff_chunk(chunk, T);
    return 64 + (size_t)nslots(B, H) * slot_bytes(L, dk, dv, nchunks(T, L), 1);
}

// The sequence's index pieces: row t of a (B, T, H, d) tensor, and of a gate.
typedef struct {
    int b, hh, T, H, dk, dv, L;
} seq;
static size_t gix(const seq *q, int t) { return ((size_t)q->b * q->T + t) * q->H + q->hh; }

// x̂ = s·r·x, r = 1/sqrt(Σx² + eps) (l2) or 1 (the sum in double).
static float unit_row(float *xh, const float *x, int d, int l2, float s) {
    double ss = 0;
    for (int i = 0; i < d; i++) ss += (double)x[i] * x[i];
    float r = l2 ? (float)(1 / sqrt(ss + PHAX_GDN_L2_EPS)) : 1.0f, f = s * r;
    for (int i = 0; i < d; i++) xh[i] = f * x[i];
    return r;
}

// dx += s·(r·dx̂ − r³·x·(x·dx̂)) (l2) or s·dx̂.
static void unit_row_bwd(float *dx, const float *dxh, const float *x, float r, int d, int l2, float s) {
    if (!l2) {
        for (int i = 0; i < d; i++) dx[i] += s * dxh[i];
        return;
    }
    double xd = 0;
    for (int i = 0; i < d; i++) xd += (double)x[i] * dxh[i];
    float a = s * r, bq = (float)(s * (double)r * r * r * xd);
    for (int i = 0; i < d; i++) dx[i] += a * dxh[i] - bq * x[i];
}

// The chunk at t0 (n steps) from the state Z₀: everything up to the pseudo-values U.
static void chunk_prep(slot *s, const seq *sq, const float *q, const float *k, const float *v, const float *g,
                       const float *beta, const float *Z0, int t0, int n, const phax_gdn_cfg *c) {
    const int dk = sq->dk, dv = sq->dv, L = sq->L;
    double acc = 0;
    for (int t = 0; t < n; t++) {
        size_t gi = gix(sq, t0 + t);
        s->rk[t] = unit_row(s->Kh + (size_t)t * dk, k + gi * dk, dk, c->qk_l2norm, 1.0f);
        s->rq[t] = unit_row(s->Qh + (size_t)t * dk, q + gi * dk, dk, c->qk_l2norm, (float)c->scale);
        s->G[t] = acc += g[gi];
        s->eG[t] = (float)exp(acc);
    }
    // K̂K̂ᵀ and Q̂K̂ᵀ (n × n), then the decays (exponents in double, rounded once)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, dk, 1.0f, s->Kh, dk, s->Kh, dk, 0.0f, s->GKK, L);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, dk, 1.0f, s->Qh, dk, s->Kh, dk, 0.0f, s->P, L);
    for (int t = 0; t < n; t++) {
        float bt = beta[gix(sq, t0 + t)];
        for (int j = 0; j < n; j++) {
            size_t x = (size_t)t * L + j;
            if (j < t) {
                float e = (float)exp(s->G[t] - s->G[j]);
                s->GKK[x] *= e, s->P[x] *= e, s->M[x] = bt * s->GKK[x];
            } else {
                s->GKK[x] = 0, s->M[x] = j == t ? 1.0f : 0.0f;
                if (j > t) s->P[x] = 0;
            }
        }
    }
    // R = V − diag(e^G) K̂Z₀; U = M⁻¹ diag(β) R
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dv, dk, 1.0f, s->Kh, dk, Z0, dv, 0.0f, s->KZ, dv);
    for (int t = 0; t < n; t++) {
        size_t gi = gix(sq, t0 + t);
        const float *vt = v + gi * dv;
        float bt = beta[gi];
        for (int i = 0; i < dv; i++) {
            float r = vt[i] - s->eG[t] * s->KZ[(size_t)t * dv + i];
            s->R[(size_t)t * dv + i] = r, s->U[(size_t)t * dv + i] = bt * r;
        }
    }
    cblas_strsm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, n, dv, 1.0f, s->M, L, s->U, dv);
}

// s->QZ = Q̂Z₀, and (o non-NULL) O = diag(e^G) Q̂Z₀ + P U into s->Ot and the rows of o.
static void chunk_out(slot *s, const seq *sq, const float *Z0, float *o, int t0, int n) {
    const int dk = sq->dk, dv = sq->dv, L = sq->L;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dv, dk, 1.0f, s->Qh, dk, Z0, dv, 0.0f, s->QZ, dv);
    if (!o) return;
    for (int t = 0; t < n; t++)
        for (int i = 0; i < dv; i++) s->Ot[(size_t)t * dv + i] = s->eG[t] * s->QZ[(size_t)t * dv + i];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dv, n, 1.0f, s->P, L, s->U, dv, 1.0f, s->Ot, dv);
    for (int t = 0; t < n; t++) memcpy(o + gix(sq, t0 + t) * dv, s->Ot + (size_t)t * dv, (size_t)dv * 4);
}

// Z (= Z₀ on entry) ← e^{G_L} Z₀ + K̂ᵀ diag(w) U, w_s = e^{G_L − G_s}.
static void chunk_state(slot *s, const seq *sq, float *Z, int n) {
    const int dk = sq->dk, dv = sq->dv, Lz = n - 1;
    for (int t = 0; t < n; t++) {
        s->w[t] = (float)exp(s->G[Lz] - s->G[t]);
        for (int j = 0; j < dk; j++) s->Wk[(size_t)t * dk + j] = s->w[t] * s->Kh[(size_t)t * dk + j];
    }
    float eL = s->eG[Lz];
    for (size_t x = 0; x < (size_t)dk * dv; x++) Z[x] *= eL;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, dk, dv, n, 1.0f, s->Wk, dk, s->U, dv, 1.0f, Z, dv);
}

static void load_state(float *Z, const float *s0, size_t kv) {
    if (s0) memcpy(Z, s0, kv * 4);
    else memset(Z, 0, kv * 4);
}

// One chunk's backward (its prep, outputs' QZ and U in s from the same start state Z₀): from
// s->dZ (the handed-on state's gradient) and do_, into the inputs' gradients and s->dZ0.
static void chunk_bwd(slot *s, const seq *sq, const float *Z0, const float *q, const float *k, const float *beta,
                      const float *do_, float *dq, float *dk_, float *dv_, float *dg, float *dbeta, int t0, int n,
                      const phax_gdn_cfg *c) {
    const int dk = sq->dk, dv = sq->dv, L = sq->L, Lz = n - 1;
    const size_t kv = (size_t)dk * dv;
    for (int t = 0; t < n; t++) s->dG[t] = 0;
    memset(s->dKh, 0, (size_t)n * dk * 4), memset(s->dQh, 0, (size_t)n * dk * 4), memset(s->dU, 0, (size_t)n * dv * 4);
    // (a) Z = e^{G_L} Z₀ + K̂ᵀ diag(w) U
    for (int t = 0; t < n; t++) s->w[t] = (float)exp(s->G[Lz] - s->G[t]);
    double zz = 0;
    for (size_t x = 0; x < kv; x++) s->dZ0[x] = s->eG[Lz] * s->dZ[x], zz += (double)s->dZ[x] * Z0[x];
    s->dG[Lz] += s->eG[Lz] * zz;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dv, dk, 1.0f, s->Kh, dk, s->dZ, dv, 0.0f, s->T1, dv);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, dk, dv, 1.0f, s->U, dv, s->dZ, dv, 0.0f, s->T2, dk);
    for (int t = 0; t < n; t++) {
        double x = 0;
        for (int i = 0; i < dv; i++) {
            float a = s->T1[(size_t)t * dv + i];
            x += (double)a * s->U[(size_t)t * dv + i];
            s->dU[(size_t)t * dv + i] += s->w[t] * a;
        }
        for (int j = 0; j < dk; j++) s->dKh[(size_t)t * dk + j] += s->w[t] * s->T2[(size_t)t * dk + j];
        x *= s->w[t];
        s->dG[Lz] += x, s->dG[t] -= x;
    }
    // (b) O = diag(e^G) Q̂Z₀ + P U
    for (int t = 0; t < n; t++) {
        const float *dot = do_ + gix(sq, t0 + t) * dv;
        double x = 0;
        for (int i = 0; i < dv; i++) {
            s->DO[(size_t)t * dv + i] = dot[i];
            s->T1[(size_t)t * dv + i] = s->eG[t] * dot[i];
            x += (double)dot[i] * s->QZ[(size_t)t * dv + i];
        }
        s->dG[t] += s->eG[t] * x;
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, dk, dv, n, 1.0f, s->Qh, dk, s->T1, dv, 1.0f, s->dZ0, dv);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, dk, dv, 1.0f, s->T1, dv, Z0, dv, 1.0f, s->dQh, dk);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, dv, 1.0f, s->DO, dv, s->U, dv, 0.0f, s->dP, L);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, dv, n, 1.0f, s->P, L, s->DO, dv, 1.0f, s->dU, dv);
    // (c) M U = diag(β) R: dX = M⁻ᵀ dU, dM = −dX Uᵀ (s < t)
    memcpy(s->dX, s->dU, (size_t)n * dv * 4);
    cblas_strsm(CblasRowMajor, CblasLeft, CblasLower, CblasTrans, CblasUnit, n, dv, 1.0f, s->M, L, s->dX, dv);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, dv, -1.0f, s->dX, dv, s->U, dv, 0.0f, s->dM, L);
    for (int t = 0; t < n; t++) {
        size_t gi = gix(sq, t0 + t);
        float bt = beta[gi];
        double db = 0, x = 0;
        for (int i = 0; i < dv; i++) {
            float dx = s->dX[(size_t)t * dv + i], dr = bt * dx;
            db += (double)dx * s->R[(size_t)t * dv + i];
            if (dv_) dv_[gi * dv + i] += dr;
            s->T1[(size_t)t * dv + i] = s->eG[t] * dr;  // diag(e^G) dR
            x += (double)dr * s->KZ[(size_t)t * dv + i];
        }
        s->dG[t] -= s->eG[t] * x;
        // M_ts = β_t GKK_ts (s < t): dβ_t, and dGKK_ts = β_t dM_ts (into dM)
        for (int j = 0; j < t; j++) {
            size_t y = (size_t)t * L + j;
            db += (double)s->dM[y] * s->GKK[y];
            s->dM[y] *= bt;
        }
        if (dbeta) dbeta[gi] += (float)db;
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, dk, dv, n, -1.0f, s->Kh, dk, s->T1, dv, 1.0f, s->dZ0, dv);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, dk, dv, -1.0f, s->T1, dv, Z0, dv, 1.0f, s->dKh, dk);
    // (d) GKK = Γ ∘ K̂K̂ᵀ (s < t), P = Γ ∘ Q̂K̂ᵀ (s ≤ t): the decays' part to G, the rest to K̂, Q̂
    for (int t = 0; t < n; t++)
        for (int j = 0; j < n; j++) {
            size_t y = (size_t)t * L + j;
            if (j > t) {
                s->dM[y] = 0, s->dP[y] = 0;
                continue;
            }
            float e = j < t ? (float)exp(s->G[t] - s->G[j]) : 1.0f;
            double x = (double)s->dP[y] * s->P[y];
            if (j < t) x += (double)s->dM[y] * s->GKK[y];
            else s->dM[y] = 0;
            s->dG[t] += x, s->dG[j] -= x;
            s->dM[y] *= e, s->dP[y] *= e;  // dKK (strictly lower), dKQ
        }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dk, n, 1.0f, s->dP, L, s->Kh, dk, 1.0f, s->dQh, dk);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, dk, n, 1.0f, s->dP, L, s->Qh, dk, 1.0f, s->dKh, dk);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dk, n, 1.0f, s->dM, L, s->Kh, dk, 1.0f, s->dKh, dk);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, dk, n, 1.0f, s->dM, L, s->Kh, dk, 1.0f, s->dKh, dk);
    // (e) G_t = Σ_{i≤t} g_i; q̂, k̂ through the normalisation
    double acc = 0;
    for (int t = n - 1; t >= 0; t--) {
        size_t gi = gix(sq, t0 + t);
        acc += s->dG[t];
        if (dg) dg[gi] += (float)acc;
        if (dq) unit_row_bwd(dq + gi * dk, s->dQh + (size_t)t * dk, q + gi * dk, s->rq[t], dk, c->qk_l2norm, (float)c->scale);
        if (dk_) unit_row_bwd(dk_ + gi * dk, s->dKh + (size_t)t * dk, k + gi * dk, s->rk[t], dk, c->qk_l2norm, 1.0f);
    }
}

// A call's arguments, for the per-sequence walks below (NULL where the call has none).
typedef struct {
    float *o, *sT, *dq, *dk_, *dv_, *dg, *dbeta, *ds0;
    const float *do_, *dsT, *q, *k, *v, *g, *beta, *s0;
    int B, T, H, dk, dv;
    const phax_gdn_cfg *c;
} gdn_args;

// Sequence p of the call forward, chunk by chunk: the outputs o and the final state sT, or
// (Zs non-NULL, the backward's first pass) only the chunks' start states into Zs[0..nc].
static void walk_fwd(slot *s, const seq *sq, const gdn_args *a, long p, float *Zs) {
    const size_t kv = (size_t)a->dk * a->dv;
    const int T = a->T, L = sq->L, nc = nchunks(T, L);
    load_state(Zs ? Zs : s->Z, a->s0 ? a->s0 + (size_t)p * kv : NULL, kv);
    for (int ci = 0; ci < nc - (Zs != NULL); ci++) {  // (the backward needs no state after the last chunk)
        int t0 = ci * L, n = T - t0 < L ? T - t0 : L;
        float *Z = Zs ? Zs + (size_t)(ci + 1) * kv : s->Z;  // stepped in place from the chunk's start
        if (Zs) memcpy(Z, Zs + (size_t)ci * kv, kv * 4);
        chunk_prep(s, sq, a->q, a->k, a->v, a->g, a->beta, Z, t0, n, a->c);
        if (!Zs) chunk_out(s, sq, Z, a->o, t0, n);
        chunk_state(s, sq, Z, n);
    }
    if (!Zs && a->sT) memcpy(a->sT + (size_t)p * kv, s->Z, kv * 4);
}

static void fwd_seq(slot *s, const seq *sq, const gdn_args *a, long p) { walk_fwd(s, sq, a, p, NULL); }

// Sequence p backward: the start states, then the chunks from the last.
static void bwd_seq(slot *s, const seq *sq, const gdn_args *a, long p) {
    const size_t kv = (size_t)a->dk * a->dv;
    const int T = a->T, L = sq->L, nc = nchunks(T, L);
    walk_fwd(s, sq, a, p, s->Zs);
    load_state(s->dZ, a->dsT ? a->dsT + (size_t)p * kv : NULL, kv);
    for (int ci = nc - 1; ci >= 0; ci--) {
        int t0 = ci * L, n = T - t0 < L ? T - t0 : L;
        const float *Z0 = s->Zs + (size_t)ci * kv;
        chunk_prep(s, sq, a->q, a->k, a->v, a->g, a->beta, Z0, t0, n, a->c);
        chunk_out(s, sq, Z0, NULL, t0, n);  // Q̂Z₀ only: the outputs themselves are not needed
        chunk_bwd(s, sq, Z0, a->q, a->k, a->beta, a->do_, a->dq, a->dk_, a->dv_, a->dg, a->dbeta, t0, n, a->c);
        memcpy(s->dZ, s->dZ0, kv * 4);
    }
    if (a->ds0)
        for (size_t x = 0; x < kv; x++) a->ds0[(size_t)p * kv + x] += s->dZ[x];
}

// The B·H sequences over OpenMP threads, one slot of ws each.
static int run_seqs(const char *who, const gdn_args *a, int chunk, void *ws, int bwd) {
    if (check_args(who, a->B, a->T, a->H, a->dk, a->dv, chunk, a->c, ws)) return PHAX_ERR;
    const int L = eff_chunk(chunk, a->T), ns = nslots(a->B, a->H), nc = nchunks(a->T, L);
    const size_t sb = slot_bytes(L, a->dk, a->dv, nc, bwd);
    char *base = (char *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
    const long BH = (long)a->B * a->H;
    const blas_hold prev = blas_single_begin(ns);
#pragma omp parallel num_threads(ns)
    {
        carve cv = {base + (size_t)omp_get_thread_num() * sb, 0};
        slot s = slot_carve(&cv, L, a->dk, a->dv, nc, bwd);
#pragma omp for schedule(static)
        for (long p = 0; p < BH; p++) {
            seq sq = {(int)(p / a->H), (int)(p % a->H), a->T, a->H, a->dk, a->dv, L};
            (bwd ? bwd_seq : fwd_seq)(&s, &sq, a, p);
        }
    }
    blas_single_end(ns, prev);
    return PHAX_OK;
}

int fcpu_gdn_chunkwise_fwd(float *o, float *sT, const float *q, const float *k, const float *v, const float *g,
                           const float *beta, const float *s0, int B, int T, int H, int dk, int dv,
                           const phax_gdn_cfg *c, int chunk, void *ws) {
    gdn_args a = {.o = o, .sT = sT, .q = q, .k = k, .v = v, .g = g, .beta = beta, .s0 = s0, .B = B, .T = T, .H = H,
                  .dk = dk, .dv = dv, .c = c};
    return run_seqs("fcpu_gdn_chunkwise_fwd", &a, chunk, ws, 0);
}

int fcpu_gdn_chunkwise_bwd(float *dq, float *dk_, float *dv_, float *dg, float *dbeta, float *ds0, const float *do_,
                           const float *dsT, const float *q, const float *k, const float *v, const float *g,
                           const float *beta, const float *s0, int B, int T, int H, int dk, int dv,
                           const phax_gdn_cfg *c, int chunk, void *ws) {
    gdn_args a = {.dq = dq, .dk_ = dk_, .dv_ = dv_, .dg = dg, .dbeta = dbeta, .ds0 = ds0, .do_ = do_, .dsT = dsT,
                  .q = q, .k = k, .v = v, .g = g, .beta = beta, .s0 = s0, .B = B, .T = T, .H = H, .dk = dk, .dv = dv,
                  .c = c};
    return run_seqs("fcpu_gdn_chunkwise_bwd", &a, chunk, ws, 1);
}

// --- the layer's short convolution ------------------------------------------------------------------

static int conv_sizes(const char *who, int B, int T, int C, int K) {
    if (B < 1 || T < 0 || C < 1 || K < 1) return phax_fail("%s: invalid sizes B=%d T=%d C=%d K=%d", who, B, T, C, K);
    return PHAX_OK;
}

// The pre-activation a[b,t,c] = Σ_j w[c,j] x[b, t−K+1+j, c] in float, j in order (terms before t = 0
// absent); x0: the row (b, 0) of x.
static float conv_pre_f(const float *x0, const float *w, int t, int c, int C, int K) {
    float a = 0;
    for (int j = t < K - 1 ? K - 1 - t : 0; j < K; j++) a += w[(size_t)c * K + j] * x0[(size_t)(t - K + 1 + j) * C + c];
    return a;
}

// da = dy · SiLU′(a), SiLU′ = σ(a)(1 + a(1 − σ(a))).
static float conv_da(float a, float dy) {
    const float s = phax_sigmoidf(a);
    return dy * (s * (1.0f + a * (1.0f - s)));
}

int fcpu_gdn_conv_fwd(float *y, const float *x, const float *w, int B, int T, int C, int K) {
    if (conv_sizes("fcpu_gdn_conv_fwd", B, T, C, K)) return PHAX_ERR;
    const long rows = (long)B * T;
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        const int b = (int)(r / T), t = (int)(r % T);
        const float *x0 = x + (size_t)b * T * C;
        for (int c = 0; c < C; c++) {
            const float a = conv_pre_f(x0, w, t, c, C, K);
            y[(size_t)r * C + c] = a * phax_sigmoidf(a);
        }
    }
    return PHAX_OK;
}

size_t fcpu_gdn_conv_bwd_ws(int B, int T, int C) {
    return B < 1 || T < 0 || C < 1 ? 0 : (size_t)B * T * C * sizeof(float);
}

int fcpu_gdn_conv_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, int B, int T, int C,
                      int K, void *ws) {
    if (conv_sizes("fcpu_gdn_conv_bwd", B, T, C, K)) return PHAX_ERR;
    if (!ws) return phax_fail("fcpu_gdn_conv_bwd: ws is NULL");
    const long rows = (long)B * T;
    float *da = ws;  // (B, T, C): dy·SiLU′(a), each pre-activation formed once
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        const int b = (int)(r / T), t = (int)(r % T);
        const float *x0 = x + (size_t)b * T * C;
        for (int c = 0; c < C; c++) da[(size_t)r * C + c] = conv_da(conv_pre_f(x0, w, t, c, C, K), dy[(size_t)r * C + c]);
    }
    if (dx) {
        // dx[b,s,c] = Σ_j w[c,j] da[b, s+K−1−j, c]: each row gathers from the outputs it reaches.
#pragma omp parallel for schedule(static)
        for (long r = 0; r < rows; r++) {
            const int s = (int)(r % T);
            for (int c = 0; c < C; c++) {
                float acc = 0;
                for (int j = 0; j < K; j++)
                    if (s + K - 1 - j < T) acc += w[(size_t)c * K + j] * da[(size_t)(r + K - 1 - j) * C + c];
                dx[(size_t)r * C + c] += acc;
            }
        }
    }
    if (dw) {
        // dw[c,j] = Σ_{b,t} x[b, t−K+1+j, c] da[b,t,c], in double, (b, t) in order: a channel per task.
#pragma omp parallel for schedule(static)
        for (int c = 0; c < C; c++)
            for (int j = 0; j < K; j++) {
                double acc = 0;
                for (int b = 0; b < B; b++) {
                    const float *x0 = x + (size_t)b * T * C, *da0 = da + (size_t)b * T * C;
                    for (int t = K - 1 - j; t < T; t++)
                        acc += (double)x0[(size_t)(t - K + 1 + j) * C + c] * da0[(size_t)t * C + c];
                }
                dw[(size_t)c * K + j] += (float)acc;
            }
    }
    return PHAX_OK;
}

// --- the layer's gates ---------------------------------------------------------------------------------

int fcpu_gdn_gates_fwd(float *g, float *beta, const float *a, const float *b, const float *A_log,
                       const float *dt_bias, size_t n, int H) {
    if (H < 1) return phax_fail("fcpu_gdn_gates_fwd: H = %d must be >= 1", H);
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < n; r++)
        for (int h = 0; h < H; h++) {
            const size_t i = r * H + h;
            if (g) g[i] = -expf(A_log[h]) * phax_softplusf(a[i] + dt_bias[h]);
            if (beta) beta[i] = phax_sigmoidf(b[i]);
        }
    return PHAX_OK;
}

int fcpu_gdn_gates_bwd(float *da, float *db, float *dA_log, float *ddt_bias, const float *dg, const float *dbeta,
                       const float *a, const float *b, const float *A_log, const float *dt_bias, size_t n, int H) {
    if (H < 1) return phax_fail("fcpu_gdn_gates_bwd: H = %d must be >= 1", H);
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < n; r++)
        for (int h = 0; h < H; h++) {
            const size_t i = r * H + h;
            if (dg && da) da[i] += -dg[i] * expf(A_log[h]) * phax_sigmoidf(a[i] + dt_bias[h]);
            if (dbeta && db) {
                const float s = phax_sigmoidf(b[i]);
                db[i] += dbeta[i] * (s * (1.0f - s));
            }
        }
    if (dg && (dA_log || ddt_bias)) {
#pragma omp parallel for schedule(static)
        for (int h = 0; h < H; h++) {
            const float E = expf(A_log[h]);
            double sa = 0, st = 0;  // Σ_r dg·g, Σ_r dg·(−E σ(z)), rows in order
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
    return PHAX_OK;
}
