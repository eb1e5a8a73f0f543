// fast/cpu mLSTM cell, chunkwise form (TFLA / NX-AI mlstm_kernels "chunkwise"),
// float32, forward and backward. The function is docs/spec.md §2.9 with the
// parallel form's stabiliser; ref/mlstm.c is the specification.
//
// Per (b, h) sequence, chunks of L rows c0..c0+L−1. Inside a chunk, with
// G_a = Σ_{r=c0..c0+a} logσ(f̃_r) (chunk-local, inclusive) and the state
// (C, n) after the previous chunk stabilised by M (= m of its last row):
//   D_ab    = G_a − G_b + ĩ_b                       (b ≤ a, the causal log-gates)
//   m_a     = max(G_a + M, max_{b≤a} D_ab)          (= the parallel form's m_t)
//   W_ab    = (q̂_a·k_b)·e^{D_ab − m_a},   λ_a = e^{G_a + M − m_a}
//   num_a   = λ_a Cᵀq̂_a + Σ_b W_ab v_b,   S_a = λ_a nᵀq̂_a + Σ_b W_ab
//   h_a     = num_a / (max(|S_a|, e^{−m_a}) + eps)
//   state:  C ← λ_{L−1} C + Σ_b w_b k_b v_bᵀ,  n ← λ_{L−1} n + Σ_b w_b k_b,
//           M ← m_{L−1},  w_b = e^{D_{L−1,b} − m_{L−1}}
// The max over the earlier chunks collapses to G_a + M, so m_a is exactly the
// parallel form's m_t and the output is the same function for any eps.
//
// Precision: logσ(f̃) is evaluated in float (AVX-512, a few ulps of itself),
// the chunk sums G in double, and every exponent (D_ab − m_a, …) is formed in
// double before one rounding to float, so long chunks of small forget gates
// (|G| ≫ 1) lose nothing to cancellation in G_a − G_b. The products (q̂Kᵀ, WV,
// the state updates, all backward products) are float32 sgemm on chunk-sized
// blocks, called from the (b, h) threads with OpenBLAS held at one thread.
// The per-row scalars of the backward (h·dh, the state's k·(dC v)) are
// accumulated in double.
//
// Backward (the derivation, m_t treated through its closed-form derivative):
// with P_ts = ∂L/∂D̃_ts at fixed m, the full derivative of m_t (through E and
// the normaliser) is μ_t = −(dh_t·h_t)·eps/den_t in both branches of the max,
// and it goes to D̃_{t,arg_t} (first argmax). So
//   dĩ_s = Σ_t P_ts + Σ_{t: arg_t = s} μ_t,
//   dφ_r = Σ_{t≥r} Σ_{s<r} P_ts + Σ_{t: arg_t < r ≤ t} μ_t.
// Chunkwise, dφ is the chunk-local suffix sum of ∂L/∂G_a:
//   ∂L/∂G_a = Q_a − R_a + [a = L−1]·(⟨dC, C_after⟩ + dn·n_after)
// with Q_a = Σ_s P_as (the whole row, intra and through the state) in closed
// form, dh_a·h_a + dS_a·S_a, R_b = Σ_a P_ab (intra columns) + w_b k_bᵀ(dC v_b + dn)
// (later chunks through the state), and (dC, dn) the adjoint of the state after
// the chunk, carried backwards: dC ← λ_{L−1} dC + Σ_a λ_a q̂_a dnum_aᵀ,
// dn ← λ_{L−1} dn + Σ_a λ_a dS_a q̂_a. (The state's own stabilisers M cancel
// exactly and are held constant.) μ_t: when the argmax lies in the row's own
// chunk, as in ref, its entry of R takes the row total Q_a + μ_a (closed form:
// 0 on the |S| branch, (dh·h)e^{−m}/den on the other) minus the row's other
// entries, so rows whose weight sits on one key are exact; otherwise μ_t goes
// to ĩ_{arg} and, by a difference array, to φ_r for arg < r ≤ t.
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#ifdef __AVX512F__
#include <immintrin.h>
#endif

#include "phax/fcpu_mlstm.h"
#include "phax/numerics.h"  // phax_logsigmoid (the non-AVX-512 path), phax_sigmoid
#include "seq_internal.h"

// ---------------------------------------------------------------------------
// One row of the intra-chunk weights: for b ≤ a, E[b] = e^{(float)(x + y[b])},
// W[b] = S[b]·E[b]; for a < b < n, E[b] = W[b] = 0. S and W may alias. Returns
// Σ_b W[b] (float, a fixed order). y must hold a+1 entries; rows are padded
// so that writes up to the next multiple of 16 ≥ n are allowed.
#ifdef __AVX512F__
// e^t for t ≤ 0 (float, ≤ ~2 ulp): t = n ln2 + r, |r| ≤ ln2/2; degree-7 Taylor
// polynomial (truncation < 6e-9 relative); 2^n applied by scalef, which
// underflows gracefully (denormals, then 0 below t ≈ −103).
static inline __m512 exp16(__m512 t) {
    t = _mm512_max_ps(t, _mm512_set1_ps(-150.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(t, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), t);  // exact for |n| < 2^8
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

// log1p(x) for x ∈ [0, 1] (float, ~2 ulp): 2·atanh(s), s = x/(2 + x) ≤ 1/3, odd
// series to s^15 (truncation < 2e-9 relative).
static inline __m512 log1p16_01(__m512 x) {
    __m512 s = _mm512_div_ps(x, _mm512_add_ps(x, _mm512_set1_ps(2.0f)));
    __m512 s2 = _mm512_mul_ps(s, s);
    __m512 p = _mm512_set1_ps(2.0f / 15);
    p = _mm512_fmadd_ps(p, s2, _mm512_set1_ps(2.0f / 13));
    p = _mm512_fmadd_ps(p, s2, _mm512_set1_ps(2.0f / 11));
    p = _mm512_fmadd_ps(p, s2, _mm512_set1_ps(2.0f / 9));
    p = _mm512_fmadd_ps(p, s2, _mm512_set1_ps(2.0f / 7));
    p = _mm512_fmadd_ps(p, s2, _mm512_set1_ps(2.0f / 5));
    p = _mm512_fmadd_ps(p, s2, _mm512_set1_ps(2.0f / 3));
    p = _mm512_fmadd_ps(p, s2, _mm512_set1_ps(2.0f));
    return _mm512_mul_ps(p, s);
}

// Lanes 0..cnt−1 of 16 (cnt ≥ 16: all).
static inline __mmask16 mask_upto(int cnt) {
    return cnt >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << cnt) - 1u);
}

// (float)(x + y[b0 + l]) for the lanes of m16 (the rest 0): the exponent is
// formed in double and rounded once.
static inline __m512 exp_args(double x, const double *y, __mmask16 m16) {
    __m512d xv = _mm512_set1_pd(x);
    __mmask8 lo = (__mmask8)(m16 & 0xFF), hi = (__mmask8)(m16 >> 8);
    __m256 tl = _mm512_cvtpd_ps(_mm512_add_pd(xv, _mm512_maskz_loadu_pd(lo, y)));
    __m256 th = _mm512_cvtpd_ps(_mm512_add_pd(xv, _mm512_maskz_loadu_pd(hi, y + 8)));
    return _mm512_insertf32x8(_mm512_castps256_ps512(tl), th, 1);
}

static float row_exp(float *W, float *E, const float *S, double x, const double *y, int a, int n) {
    __m512 acc = _mm512_setzero_ps();
    int b0 = 0;
    for (; b0 <= a; b0 += 16) {
        __mmask16 m16 = mask_upto(a + 1 - b0);
        __m512 e = _mm512_maskz_mov_ps(m16, exp16(exp_args(x, y + b0, m16)));
        __m512 w = _mm512_mul_ps(_mm512_maskz_loadu_ps(m16, S + b0), e);
        acc = _mm512_add_ps(acc, w);
        _mm512_storeu_ps(E + b0, e);
        _mm512_storeu_ps(W + b0, w);
    }
    for (; b0 < n; b0 += 16) {
        _mm512_storeu_ps(E + b0, _mm512_setzero_ps());
        _mm512_storeu_ps(W + b0, _mm512_setzero_ps());
    }
    return _mm512_reduce_add_ps(acc);
}
#else
static float row_exp(float *W, float *E, const float *S, double x, const double *y, int a, int n) {
    float acc = 0;
    for (int b = 0; b <= a; b++) {
        float e = expf((float)(x + y[b]));
        E[b] = e, W[b] = S[b] * e, acc += W[b];
    }
    for (int b = a + 1; b < n; b++) E[b] = W[b] = 0;
    return acc;
}
#endif

// e^{(float)(x + y_b)} for b < n (the state weights w_b of a chunk's last row),
// the same values as row_exp's E. w is padded to a multiple of 16.
static void exp_row(float *w, double x, const double *y, int n) {
#ifdef __AVX512F__
    for (int b0 = 0; b0 < n; b0 += 16) {
        __mmask16 m16 = mask_upto(n - b0);
        _mm512_storeu_ps(w + b0, _mm512_maskz_mov_ps(m16, exp16(exp_args(x, y + b0, m16))));
    }
#else
    for (int b = 0; b < n; b++) w[b] = expf((float)(x + y[b]));
#endif
}

// Σ_i a_i·b_i in float (16 lanes, then a tree: a fixed order).
static float dot_ff(const float *a, const float *b, int n) {
    int i = 0;
    float acc = 0;
#ifdef __AVX512F__
    __m512 s0 = _mm512_setzero_ps();
    for (; i < n; i += 16) {
        __mmask16 m = mask_upto(n - i);
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s0);
    }
    acc = _mm512_reduce_add_ps(s0);
#endif
    for (; i < n; i++) acc += a[i] * b[i];
    return acc;
}

// x[i] ← logσ(x[i]) = min(x, 0) − log1p(e^{−|x|}) in float for i < n (padded to
// 16). Each φ is accurate to a few ulps of itself, so the chunk sums G (kept in
// double) and their differences G_a − G_b (sums of φ of one sign) are too.
static void lsig_vec(float *x, int n) {
#ifdef __AVX512F__
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = mask_upto(n - i);
        __m512 z = _mm512_maskz_loadu_ps(m, x + i);
        __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(z)));
        __m512 r = _mm512_sub_ps(_mm512_min_ps(z, _mm512_setzero_ps()), log1p16_01(e));
        _mm512_mask_storeu_ps(x + i, m, r);
    }
#else
    for (int i = 0; i < n; i++) x[i] = (float)phax_logsigmoid((double)x[i]);
#endif
}

// Σ_i a_i·b_i accumulated in double (a fixed order: 8 lanes, then a tree), for
// the per-row scalars of the backward whose accuracy matters (h·dh, k·(dC v)).
static double dot_fd(const float *a, const float *b, size_t n) {
    size_t i = 0;
    double acc = 0;
#ifdef __AVX512F__
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (; i + 16 <= n; i += 16) {
        s0 = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm256_loadu_ps(a + i)),
                             _mm512_cvtps_pd(_mm256_loadu_ps(b + i)), s0);
        s1 = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm256_loadu_ps(a + i + 8)),
                             _mm512_cvtps_pd(_mm256_loadu_ps(b + i + 8)), s1);
    }
    if (i + 8 <= n) {
        s0 = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm256_loadu_ps(a + i)),
                             _mm512_cvtps_pd(_mm256_loadu_ps(b + i)), s0);
        i += 8;
    }
    acc = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
#endif
    for (; i < n; i++) acc += (double)a[i] * b[i];
    return acc;
}

// One row of the backward's elementwise pass: for b ≤ a, dw = dW[b] + dS,
// P = dw·W[b] (float), R[b] += P (double), dW[b] = dw·E[b]; dW[b] = 0 for
// a < b < n. Returns Σ_{b≤a} P in double (a fixed order). Rows are padded to a
// multiple of 16; R holds that many doubles.
static double row_grad(float *dW, double *R, const float *W, const float *E, float dS, int a,
                       int n) {
    int b0 = 0;
    double sum = 0;
#ifdef __AVX512F__
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    const __m512 dSv = _mm512_set1_ps(dS);
    for (; b0 <= a; b0 += 16) {
        int cnt = a + 1 - b0 < 16 ? a + 1 - b0 : 16;
        __mmask16 m = (__mmask16)((1u << cnt) - 1u);
        __m512 dw = _mm512_add_ps(_mm512_maskz_loadu_ps(m, dW + b0), dSv);
        __m512 P = _mm512_maskz_mul_ps(m, dw, _mm512_maskz_loadu_ps(m, W + b0));
        __m512d plo = _mm512_cvtps_pd(_mm512_castps512_ps256(P));
        __m512d phi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(P, 1));
        s0 = _mm512_add_pd(s0, plo), s1 = _mm512_add_pd(s1, phi);
        _mm512_storeu_pd(R + b0, _mm512_add_pd(_mm512_loadu_pd(R + b0), plo));
        _mm512_storeu_pd(R + b0 + 8, _mm512_add_pd(_mm512_loadu_pd(R + b0 + 8), phi));
        _mm512_storeu_ps(dW + b0, _mm512_maskz_mul_ps(m, dw, _mm512_maskz_loadu_ps(m, E + b0)));
    }
    sum = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    for (; b0 < n; b0 += 16) _mm512_storeu_ps(dW + b0, _mm512_setzero_ps());
#else
    for (; b0 <= a; b0++) {
        float dw = dW[b0] + dS, P = dw * W[b0];
        R[b0] += P, sum += P;
        dW[b0] = dw * E[b0];
    }
    for (; b0 < n; b0++) dW[b0] = 0;
#endif
    return sum;
}

// Software prefetch of rows r0..r0+n−1 of a (·, d) slice with row stride ld
// floats (the next chunk's rows of one head: 64-byte lines, strided by H·d).
// For long sequences the chunk-sized products otherwise wait on memory.
static void prefetch_rows(const float *p, int n, size_t ld, int d, int write) {
    for (int r = 0; r < n; r++)
        for (int j = 0; j < d; j += 16) {
            if (write)
                __builtin_prefetch(p + (size_t)r * ld + j, 1, 3);
            else
                __builtin_prefetch(p + (size_t)r * ld + j, 0, 3);
        }
}

// ---------------------------------------------------------------------------
// Gates of one chunk (rows c0..c0+Lc−1 of sequence (b, hh)), all double:
// G_a (inclusive chunk-local Σ logσ f̃), y_a = ĩ_a − G_a, m_a, arg_a (global
// first argmax of the log-gate row), x_a = G_a − m_a, lam_a = e^{G_a + M − m_a}
// (0 without a state). `has`: a state with stabiliser M (first argmax argM).
typedef struct {
    double *G, *y, *x, *m, *la;
    float *lam, *phi;
    int *arg;
} gates;

static void chunk_gates(const gates *g, const float *ig, const float *fg, size_t g0, size_t gs,
                        int c0, int Lc, int has, double M, int argM) {
    for (int a = 0; a < Lc; a++) g->phi[a] = fg[g0 + (size_t)a * gs];
    lsig_vec(g->phi, Lc);
    double G = 0, ymax = -INFINITY;
    int yarg = 0;
    for (int a = 0; a < Lc; a++) {
        G += (double)g->phi[a];
        double y = (double)ig[g0 + (size_t)a * gs] - G;
        if (y > ymax) ymax = y, yarg = a;  // strict: the first argmax
        double intra = G + ymax, m = intra;
        int arg = c0 + yarg;
        // Earlier positions s < c0 come before the chunk: they win a tie.
        if (has && G + M >= intra) m = G + M, arg = argM;
        g->G[a] = G, g->y[a] = y, g->m[a] = m, g->x[a] = G - m, g->arg[a] = arg;
        g->la[a] = has ? G + M - m : 0.0;
    }
    if (has)
        exp_row(g->lam, 0.0, g->la, Lc);  // λ_a = e^{G_a + M − m_a} ≤ 1
    else
        for (int a = 0; a < Lc; a++) g->lam[a] = 0.0f;
}

// ---------------------------------------------------------------------------
static int eff_chunk(int chunk, int T) {
    int L = chunk > 0 ? chunk : FCPU_MLSTM_CHUNK;
    if (T > 0 && L > T) L = T;
    return L < 1 ? 1 : L;
}
static int pad16(int n) { return (n + 15) & ~15; }

static int check_sizes(const char *who, int B, int T, int H, int dqk, int dv) {
    if (B < 1 || T < 0 || H < 1 || dqk < 1 || dv < 1)
        return phax_fail("%s: invalid sizes B=%d T=%d H=%d dqk=%d dv=%d", who, B, T, H, dqk, dv);
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// Forward
// ---------------------------------------------------------------------------
typedef struct {
    gates g;
    float *S;      // (L, Lp): QKᵀ, then W in place
    float *E;      // (Lp): one row of e^{D − m}
    float *Qs;     // (L, dqk): λ_a q̂_a
    float *Kw;     // (L, dqk): w_b k_b
    float *C, *n;  // the running state
    float *rs;     // (L): S_a
} fw_slot;

static fw_slot fw_carve(carve *c, int L, int dqk, int dv) {
    int Lp = pad16(L);
    fw_slot s;
    s.g.G = take(c, (size_t)Lp * sizeof(double));
    s.g.y = take(c, (size_t)Lp * sizeof(double));
    s.g.x = take(c, (size_t)Lp * sizeof(double));
    s.g.m = take(c, (size_t)Lp * sizeof(double));
    s.g.la = take(c, (size_t)Lp * sizeof(double));
    s.g.phi = take(c, (size_t)Lp * sizeof(float));
    s.g.lam = take(c, (size_t)Lp * sizeof(float));
    s.g.arg = take(c, (size_t)Lp * sizeof(int));
    s.S = take(c, (size_t)L * Lp * sizeof(float));
    s.E = take(c, (size_t)Lp * sizeof(float));
    s.Qs = take(c, (size_t)L * dqk * sizeof(float));
    s.Kw = take(c, (size_t)L * dqk * sizeof(float));
    s.C = take(c, (size_t)dqk * dv * sizeof(float));
    s.n = take(c, (size_t)dqk * sizeof(float));
    s.rs = take(c, (size_t)Lp * sizeof(float));
    return s;
}

static size_t slot_bytes_fwd(int L, int dqk, int dv) {
    carve c = {NULL, 0};
    (void)fw_carve(&c, L, dqk, dv);
    return (c.used + 63) & ~(size_t)63;
}

size_t fcpu_mlstm_chunkwise_fwd_ws(int B, int T, int H, int dqk, int dv, int chunk) {
    if (B < 1 || H < 1 || T < 0 || dqk < 1 || dv < 1) return 0;
    return 64 + (size_t)nslots(B, H) * slot_bytes_fwd(eff_chunk(chunk, T), dqk, dv);
}

// State update over one chunk: C ← decay·C + Σ_b w_b k_b v_bᵀ, n likewise.
// w: (Lc) weights; Kw: scratch (Lc, dqk).
static void state_step(float *C, float *n, float *Kw, const float *w, float decay, const float *Kc,
                       size_t ldk, const float *Vc, size_t ldv, int Lc, int dqk, int dv) {
    for (int i = 0; i < dqk; i++) n[i] *= decay;
    for (int b = 0; b < Lc; b++) {
        const float *kb = Kc + (size_t)b * ldk;
        float *kw = Kw + (size_t)b * dqk;
        for (int i = 0; i < dqk; i++) kw[i] = w[b] * kb[i];
        for (int i = 0; i < dqk; i++) n[i] += kw[i];
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, dqk, dv, Lc, 1.0f, Kw, dqk, Vc, (int)ldv,
                decay, C, dv);
}

static void fwd_seq(fw_slot *s, float *h, const float *q, const float *k, const float *v,
                    const float *ig, const float *fg, int b, int hh, int T, int H, int dqk, int dv,
                    double eps, int L, const float *st_in, float *st_out) {
    const float sc = (float)(1.0 / sqrt((double)dqk));
    const size_t ldk = (size_t)H * dqk, ldv = (size_t)H * dv, gs = (size_t)H;
    const int Lp = pad16(L), nc = nchunks(T, L);
    const size_t CS = (size_t)dqk * dv;
    int has = 0, argM = 0;
    double M = -INFINITY;
    memset(s->C, 0, CS * sizeof(float));
    memset(s->n, 0, (size_t)dqk * sizeof(float));
    if (st_in && st_in[CS + dqk] > -INFINITY) {
        memcpy(s->C, st_in, CS * sizeof(float));
        memcpy(s->n, st_in + CS, (size_t)dqk * sizeof(float));
        M = st_in[CS + dqk], has = 1, argM = -1;  // argM only matters in the backward
    }
    for (int c = 0; c < nc; c++) {
        const int c0 = c * L, Lc = T - c0 < L ? T - c0 : L;
        const size_t r0 = ((size_t)b * T + c0) * H + hh;  // (b, c0, hh) row index
        const float *Qc = q + r0 * dqk, *Kc = k + r0 * dqk, *Vc = v + r0 * dv;
        float *hc = h + r0 * dv;
        if (c + 1 < nc) {  // the next chunk's rows
            const size_t r1 = r0 + (size_t)L * H;
            const int n1 = T - c0 - L < L ? T - c0 - L : L;
            prefetch_rows(q + r1 * dqk, n1, ldk, dqk, 0);
            prefetch_rows(k + r1 * dqk, n1, ldk, dqk, 0);
            prefetch_rows(v + r1 * dv, n1, ldv, dv, 0);
            prefetch_rows(h + r1 * dv, n1, ldv, dv, 1);
        }
        chunk_gates(&s->g, ig, fg, r0, gs, c0, Lc, has, M, argM);
        // Intra: S = q̂ Kᵀ, then W = S ∘ e^{D − m} (causal), row sums into rs.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Lc, Lc, dqk, sc, Qc, (int)ldk, Kc,
                    (int)ldk, 0.0f, s->S, Lp);
        for (int a = 0; a < Lc; a++)
            s->rs[a] = row_exp(s->S + (size_t)a * Lp, s->E, s->S + (size_t)a * Lp, s->g.x[a],
                               s->g.y, a, Lc);
        // Inter: num = diag(λ) q̂ C; S += λ q̂·n.
        if (has) {
            for (int a = 0; a < Lc; a++) {
                float f = sc * s->g.lam[a], *qs = s->Qs + (size_t)a * dqk;
                for (int i = 0; i < dqk; i++) qs[i] = f * Qc[(size_t)a * ldk + i];
                s->rs[a] += dot_ff(qs, s->n, dqk);
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Lc, dv, dqk, 1.0f, s->Qs, dqk,
                        s->C, dv, 0.0f, hc, (int)ldv);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Lc, dv, Lc, 1.0f, s->S, Lp, Vc,
                    (int)ldv, has ? 1.0f : 0.0f, hc, (int)ldv);
        for (int a = 0; a < Lc; a++) {
            double den = fmax(fabs((double)s->rs[a]), exp(-s->g.m[a])) + eps;
            float inv = (float)(1.0 / den);
            float *ha = hc + (size_t)a * ldv;
            for (int j = 0; j < dv; j++) ha[j] *= inv;
        }
        // The state after this chunk (needed by the next chunk or the caller).
        if (c < nc - 1 || st_out) {
            // w_b = e^{D_{Lc−1,b} − m_{Lc−1}}: row_exp left the last row's E in s->E.
            state_step(s->C, s->n, s->Kw, s->E, has ? s->g.lam[Lc - 1] : 0.0f, Kc, ldk, Vc, ldv, Lc,
                       dqk, dv);
            M = s->g.m[Lc - 1], argM = s->g.arg[Lc - 1], has = 1;
        }
    }
    if (st_out) {
        if (!has) {  // T = 0 and no state in: the empty state
            memset(st_out, 0, (CS + dqk) * sizeof(float));
            st_out[CS + dqk] = -INFINITY;
            return;
        }
        // Round M to float and rescale C, n to it exactly: C·e^{M − (float)M}.
        float Mf = (float)M, f = (float)exp(M - (double)Mf);
        for (size_t e = 0; e < CS; e++) st_out[e] = s->C[e] * f;
        for (int i = 0; i < dqk; i++) st_out[CS + i] = s->n[i] * f;
        st_out[CS + dqk] = Mf;
    }
}

int fcpu_mlstm_chunkwise_fwd(float *h, const float *q, const float *k, const float *v,
                             const float *igate, const float *fgate, int B, int T, int H, int dqk,
                             int dv, float eps, int chunk, const float *state_in, float *state_out,
                             void *ws) {
    if (check_sizes("fcpu_mlstm_chunkwise_fwd", B, T, H, dqk, dv)) return PHAX_ERR;
    if (!ws) return phax_fail("fcpu_mlstm_chunkwise_fwd: ws is NULL");
    const int L = eff_chunk(chunk, T), ns = nslots(B, H);
    const size_t slot = slot_bytes_fwd(L, dqk, dv), SL = FCPU_MLSTM_STATE_LEN(dqk, dv);
    char *base = (char *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
    const long BH = (long)B * H;
    const blas_hold blas_prev = blas_single_begin(ns);
#pragma omp parallel num_threads(ns)
    {
        carve cv = {base + (size_t)omp_get_thread_num() * slot, 0};
        fw_slot s = fw_carve(&cv, L, dqk, dv);
#pragma omp for schedule(static)
        for (long p = 0; p < BH; p++) {
            int b = (int)(p / H), hh = (int)(p % H);
            fwd_seq(&s, h, q, k, v, igate, fgate, b, hh, T, H, dqk, dv, (double)eps, L,
                    state_in ? state_in + (size_t)p * SL : NULL,
                    state_out ? state_out + (size_t)p * SL : NULL);
        }
    }
    blas_single_end(ns, blas_prev);
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// Backward
// ---------------------------------------------------------------------------
typedef struct {
    gates g;
    float *S;                        // (L, Lp): QKᵀ, then W
    float *E;                        // (L, Lp): e^{D − m} (causal; 0 above the diagonal)
    float *dW;                       // (L, Lp): dW, then dW ∘ E
    float *Qs;                       // (L, dqk): λ_a q̂_a
    float *Kw;                       // (L, dqk): w_b k_b
    float *Tk;                       // (L, dqk): dnum Cᵀ, then V dCᵀ
    float *Hn;                       // (L, dv): num, then dnum = dh/den
    float *dC, *dn;                  // the state adjoint
    float *w;                        // (Lp): state weights of the chunk's last row
    float *rs;                       // (L): S_a
    double *den, *dS, *Qr, *mu, *R;  // per row / column of the chunk
    double *xi, *rsi;                // (L): dh_a·(inter part of num_a), inter part of S_a
    double *dnacc;                   // (dqk)
    // Per sequence:
    float *Cst, *nst;          // (nc, dqk·dv), (nc, dqk): the state before each chunk
    double *Mst;               // (nc)
    int *argst;                // (nc)
    double *dig, *dphi, *mud;  // (T), (T), (T+1)
} bw_slot;

static bw_slot bw_carve(carve *c, int T, int L, int dqk, int dv) {
    int Lp = pad16(L), nc = T > 0 ? nchunks(T, L) : 1;
    size_t fl = sizeof(float), db = sizeof(double);
    bw_slot s;
    s.g.G = take(c, (size_t)Lp * db);
    s.g.y = take(c, (size_t)Lp * db);
    s.g.x = take(c, (size_t)Lp * db);
    s.g.m = take(c, (size_t)Lp * db);
    s.g.la = take(c, (size_t)Lp * db);
    s.g.phi = take(c, (size_t)Lp * fl);
    s.g.lam = take(c, (size_t)Lp * fl);
    s.g.arg = take(c, (size_t)Lp * sizeof(int));
    s.S = take(c, (size_t)L * Lp * fl);
    s.E = take(c, (size_t)L * Lp * fl);
    s.dW = take(c, (size_t)L * Lp * fl);
    s.Qs = take(c, (size_t)L * dqk * fl);
    s.Kw = take(c, (size_t)L * dqk * fl);
    s.Tk = take(c, (size_t)L * dqk * fl);
    s.Hn = take(c, (size_t)L * dv * fl);
    s.dC = take(c, (size_t)dqk * dv * fl);
    s.dn = take(c, (size_t)dqk * fl);
    s.w = take(c, (size_t)Lp * fl);
    s.rs = take(c, (size_t)Lp * fl);
    s.den = take(c, (size_t)Lp * db);
    s.dS = take(c, (size_t)Lp * db);
    s.Qr = take(c, (size_t)Lp * db);
    s.mu = take(c, (size_t)Lp * db);
    s.R = take(c, (size_t)Lp * db);
    s.xi = take(c, (size_t)Lp * db);
    s.rsi = take(c, (size_t)Lp * db);
    s.dnacc = take(c, (size_t)dqk * db);
    s.Cst = take(c, (size_t)nc * dqk * dv * fl);
    s.nst = take(c, (size_t)nc * dqk * fl);
    s.Mst = take(c, (size_t)nc * db);
    s.argst = take(c, (size_t)nc * sizeof(int));
    s.dig = take(c, (size_t)(T > 0 ? T : 1) * db);
    s.dphi = take(c, (size_t)(T > 0 ? T : 1) * db);
    s.mud = take(c, ((size_t)T + 1) * db);
    return s;
}

static size_t slot_bytes_bwd(int T, int L, int dqk, int dv) {
    carve c = {NULL, 0};
    (void)bw_carve(&c, T, L, dqk, dv);
    return (c.used + 63) & ~(size_t)63;
}

size_t fcpu_mlstm_chunkwise_bwd_ws(int B, int T, int H, int dqk, int dv, int chunk) {
    if (B < 1 || H < 1 || T < 0 || dqk < 1 || dv < 1) return 0;
    return 64 + (size_t)nslots(B, H) * slot_bytes_bwd(T, eff_chunk(chunk, T), dqk, dv);
}

typedef struct {
    float *dq, *dk, *dv_, *dig, *dfg;
    const float *dh, *q, *k, *v, *ig, *fg;
    int T, H, dqk, dv, L;
    double eps;
} bw_args;

static void bwd_seq(bw_slot *s, const bw_args *A, int b, int hh) {
    const int T = A->T, H = A->H, dqk = A->dqk, dv = A->dv, L = A->L;
    const float sc = (float)(1.0 / sqrt((double)dqk));
    const size_t ldk = (size_t)H * dqk, ldv = (size_t)H * dv, gs = (size_t)H;
    const int Lp = pad16(L), nc = nchunks(T, L);
    const size_t CS = (size_t)dqk * dv;
    const double eps = A->eps;

    // --- pass 1: the state before each chunk ---
    memset(s->Cst, 0, CS * sizeof(float));
    memset(s->nst, 0, (size_t)dqk * sizeof(float));
    s->Mst[0] = -INFINITY, s->argst[0] = 0;
    for (int c = 0; c + 1 < nc; c++) {
        const int c0 = c * L, Lc = L;  // never the (partial) last chunk
        const size_t r0 = ((size_t)b * T + c0) * H + hh;
        float *C = s->Cst + (size_t)(c + 1) * CS, *n = s->nst + (size_t)(c + 1) * dqk;
        memcpy(C, s->Cst + (size_t)c * CS, CS * sizeof(float));
        memcpy(n, s->nst + (size_t)c * dqk, (size_t)dqk * sizeof(float));
        int has = c > 0;
        if (c + 2 < nc) {
            const size_t r1 = r0 + (size_t)L * H;
            prefetch_rows(A->k + r1 * dqk, L, ldk, dqk, 0);
            prefetch_rows(A->v + r1 * dv, L, ldv, dv, 0);
        }
        chunk_gates(&s->g, A->ig, A->fg, r0, gs, c0, Lc, has, s->Mst[c], s->argst[c]);
        exp_row(s->w, s->g.x[Lc - 1], s->g.y, Lc);
        state_step(C, n, s->Kw, s->w, has ? s->g.lam[Lc - 1] : 0.0f, A->k + r0 * dqk, ldk,
                   A->v + r0 * dv, ldv, Lc, dqk, dv);
        s->Mst[c + 1] = s->g.m[Lc - 1], s->argst[c + 1] = s->g.arg[Lc - 1];
    }

    // --- pass 2: chunks in reverse, carrying the state adjoint (dC, dn) ---
    memset(s->dC, 0, CS * sizeof(float));
    memset(s->dn, 0, (size_t)dqk * sizeof(float));
    memset(s->dig, 0, (size_t)T * sizeof(double));
    memset(s->dphi, 0, (size_t)T * sizeof(double));
    memset(s->mud, 0, ((size_t)T + 1) * sizeof(double));
    for (int c = nc - 1; c >= 0; c--) {
        const int c0 = c * L, Lc = T - c0 < L ? T - c0 : L, has = c > 0, last = c == nc - 1;
        const size_t r0 = ((size_t)b * T + c0) * H + hh;
        const float *Qc = A->q + r0 * dqk, *Kc = A->k + r0 * dqk, *Vc = A->v + r0 * dv;
        const float *dhc = A->dh + r0 * dv;
        const float *Cp = s->Cst + (size_t)c * CS, *np = s->nst + (size_t)c * dqk;
        if (c > 0) {  // the previous chunk's rows (the next to be processed; always full)
            const size_t r1 = r0 - (size_t)L * H;
            prefetch_rows(A->q + r1 * dqk, L, ldk, dqk, 0);
            prefetch_rows(A->k + r1 * dqk, L, ldk, dqk, 0);
            prefetch_rows(A->v + r1 * dv, L, ldv, dv, 0);
            prefetch_rows(A->dh + r1 * dv, L, ldv, dv, 0);
            if (A->dq) prefetch_rows(A->dq + r1 * dqk, L, ldk, dqk, 1);
            if (A->dk) prefetch_rows(A->dk + r1 * dqk, L, ldk, dqk, 1);
            if (A->dv_) prefetch_rows(A->dv_ + r1 * dv, L, ldv, dv, 1);
            prefetch_rows(s->Cst + (size_t)(c - 1) * CS, 1, 0, (int)CS, 0);  // its state
        }
        chunk_gates(&s->g, A->ig, A->fg, r0, gs, c0, Lc, has, s->Mst[c], s->argst[c]);

        // Recompute the forward of the chunk: W, E, S_a, num.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Lc, Lc, dqk, sc, Qc, (int)ldk, Kc,
                    (int)ldk, 0.0f, s->S, Lp);
        for (int a = 0; a < Lc; a++)
            s->rs[a] = row_exp(s->S + (size_t)a * Lp, s->E + (size_t)a * Lp, s->S + (size_t)a * Lp,
                               s->g.x[a], s->g.y, a, Lc);
        if (has) {
            for (int a = 0; a < Lc; a++) {
                float f = sc * s->g.lam[a], *qs = s->Qs + (size_t)a * dqk;
                for (int i = 0; i < dqk; i++) qs[i] = f * Qc[(size_t)a * ldk + i];
                float acc = dot_ff(qs, np, dqk);
                s->rs[a] += acc;
                s->rsi[a] = acc;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Lc, dv, dqk, 1.0f, s->Qs, dqk,
                        Cp, dv, 0.0f, s->Hn, dv);
            for (int a = 0; a < Lc; a++)
                s->xi[a] = dot_fd(dhc + (size_t)a * ldv, s->Hn + (size_t)a * dv, (size_t)dv);
        } else {
            for (int a = 0; a < Lc; a++) s->xi[a] = s->rsi[a] = 0;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Lc, dv, Lc, 1.0f, s->S, Lp, Vc,
                    (int)ldv, has ? 1.0f : 0.0f, s->Hn, dv);

        // Per row: den, h·dh, the normaliser branch, dnum = dh/den (over num).
        for (int a = 0; a < Lc; a++) {
            double S = (double)s->rs[a], em = exp(-s->g.m[a]);
            double den = fmax(fabs(S), em) + eps, inv = 1.0 / den;
            float *Ha = s->Hn + (size_t)a * dv;
            const float *dha = dhc + (size_t)a * ldv;
            double hdot = dot_fd(dha, Ha, (size_t)dv) * inv;  // dh_a·h_a
            float finv = (float)inv;
            for (int j = 0; j < dv; j++) Ha[j] = dha[j] * finv;
            double dden = -hdot * inv, dS = 0;
            if (fabs(S) >= em) dS = S > 0 ? dden : (S < 0 ? -dden : 0.0);
            s->den[a] = den, s->dS[a] = dS;
            s->mu[a] = -hdot * eps * inv;  // dL/dm_a in full
            if (s->g.arg[a] >= c0) {
                // The argmax is in this chunk: the row's total Σ_s P_as + μ_a in
                // closed form (0 on the |S| branch, where the row shift cancels).
                s->Qr[a] = fabs(S) >= em ? 0.0 : hdot * em * inv;
                // Its part through the state: λ_a (dnum_a·Cᵀq̂_a + dS_a nᵀq̂_a).
                s->xi[a] = s->xi[a] * inv + dS * s->rsi[a];
            } else {
                s->Qr[a] = hdot + dS * S;  // Σ_s P_as at fixed m (μ goes separately)
            }
        }
        float *dnum = s->Hn;

        // dW = dnum Vᵀ + dS 1ᵀ; column sums of P = dW ∘ W; then dW ← dW ∘ E.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Lc, Lc, dv, 1.0f, dnum, dv, Vc,
                    (int)ldv, 0.0f, s->dW, Lp);
        for (int bb = 0; bb < Lp; bb++) s->R[bb] = 0;
        for (int a = 0; a < Lc; a++) {
            float *dWa = s->dW + (size_t)a * Lp;
            const float *Wa = s->S + (size_t)a * Lp, *Ea = s->E + (size_t)a * Lp;
            const float dSa = (float)s->dS[a];
            const int ag = s->g.arg[a] - c0;  // < 0: the argmax is in an earlier chunk
            // P_{a,ag} (the same float product as in the loop) and the row sum.
            double Pag = ag >= 0 ? (double)((dWa[ag] + dSa) * Wa[ag]) : 0;
            double rest = row_grad(dWa, s->R, Wa, Ea, dSa, a, Lc) - Pag;  // Σ_{b≠ag} P_ab
            // As ref: the argmax entry takes the row total (Σ_s P_as + μ_a = Qr,
            // closed form) minus the row's other entries, intra (rest) and
            // through the state (xi); so μ needs no separate routing.
            if (ag >= 0) s->R[ag] += (s->Qr[a] - s->xi[a] - rest) - Pag;
        }

        // dq̂ = dW K + diag(λ)(dnum Cᵀ + dS nᵀ); dk = dWᵀ q̂; dv = Wᵀ dnum.
        if (A->dq) {
            float *dqc = A->dq + r0 * dqk;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Lc, dqk, Lc, sc, s->dW, Lp, Kc,
                        (int)ldk, 1.0f, dqc, (int)ldk);
            if (has) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Lc, dqk, dv, 1.0f, dnum, dv,
                            Cp, dv, 0.0f, s->Tk, dqk);
                for (int a = 0; a < Lc; a++) {
                    float f = sc * s->g.lam[a], dSa = (float)s->dS[a];
                    for (int i = 0; i < dqk; i++)
                        dqc[(size_t)a * ldk + i] += f * (s->Tk[(size_t)a * dqk + i] + dSa * np[i]);
                }
            }
        }
        if (A->dk)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Lc, dqk, Lc, sc, s->dW, Lp, Qc,
                        (int)ldk, 1.0f, A->dk + r0 * dqk, (int)ldk);
        if (A->dv_)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Lc, dv, Lc, 1.0f, s->S, Lp, dnum,
                        dv, 1.0f, A->dv_ + r0 * dv, (int)ldv);

        // Later chunks, through the state after this one: w_b k_b v_bᵀ in C.
        double lastterm = 0;
        if (!last) {
            // w_b = e^{D_{Lc−1,b} − m_{Lc−1}}: the last row of E.
            const float *w = s->E + (size_t)(Lc - 1) * Lp;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Lc, dqk, dv, 1.0f, Vc, (int)ldv,
                        s->dC, dv, 0.0f, s->Tk, dqk);  // V dCᵀ
            float *dkc = A->dk ? A->dk + r0 * dqk : NULL;
            for (int bb = 0; bb < Lc; bb++) {
                const float *kb = Kc + (size_t)bb * ldk;
                float *t = s->Tk + (size_t)bb * dqk;
                for (int i = 0; i < dqk; i++) t[i] += s->dn[i];  // (dC v_b + dn)_i
                s->R[bb] += (double)w[bb] * dot_fd(kb, t, (size_t)dqk);
                if (dkc)
                    for (int i = 0; i < dqk; i++) dkc[(size_t)bb * ldk + i] += w[bb] * t[i];
            }
            if (A->dv_) {
                for (int bb = 0; bb < Lc; bb++)
                    for (int i = 0; i < dqk; i++)
                        s->Kw[(size_t)bb * dqk + i] = w[bb] * Kc[(size_t)bb * ldk + i];
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Lc, dv, dqk, 1.0f, s->Kw,
                            dqk, s->dC, dv, 1.0f, A->dv_ + r0 * dv, (int)ldv);
            }
            // ∂L/∂(a shift of every log-factor of the state after the chunk).
            const float *Ca = s->Cst + (size_t)(c + 1) * CS, *na = s->nst + (size_t)(c + 1) * dqk;
            lastterm = dot_fd(s->dC, Ca, CS) + dot_fd(s->dn, na, (size_t)dqk);
        }

        // Gates: dĩ_b += R_b; dφ = chunk-local suffix sums of ∂L/∂G_a; μ to the argmax.
        double acc = 0;
        for (int a = Lc - 1; a >= 0; a--) {
            acc += s->Qr[a] - s->R[a] + (a == Lc - 1 ? lastterm : 0.0);
            s->dphi[c0 + a] = acc;
            s->dig[c0 + a] += s->R[a];
            int ag = s->g.arg[a];
            if (ag < c0) {  // μ to D̃_{t,ag}: to ĩ_ag and to φ_r for ag < r ≤ t
                s->dig[ag] += s->mu[a];
                s->mud[ag + 1] += s->mu[a];
                s->mud[c0 + a + 1] -= s->mu[a];
            }
        }

        // State adjoint to before the chunk: dC ← λ_{Lc−1} dC + Qsᵀ dnum.
        if (has) {
            float decay = s->g.lam[Lc - 1];
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, dqk, dv, Lc, 1.0f, s->Qs, dqk,
                        dnum, dv, last ? 0.0f : decay, s->dC, dv);
            double *t = s->dnacc;  // Σ_a dS_a λ_a q̂_a, in double
            for (int i = 0; i < dqk; i++) t[i] = 0;
            for (int a = 0; a < Lc; a++) {
                const double dSa = s->dS[a];
                const float *qa = s->Qs + (size_t)a * dqk;
                for (int i = 0; i < dqk; i++) t[i] += dSa * qa[i];
            }
            for (int i = 0; i < dqk; i++) s->dn[i] = decay * s->dn[i] + (float)t[i];
        }
    }

    // Write out: dĩ, and df̃ = dφ·σ(−f̃) (φ_0 does not enter the parallel form).
    double run = 0;
    for (int r = 0; r < T; r++) {
        size_t gi = ((size_t)b * T + r) * H + hh;
        run += s->mud[r];
        if (A->dig) A->dig[gi] += (float)s->dig[r];
        if (A->dfg && r > 0)
            A->dfg[gi] += (float)((s->dphi[r] + run) * phax_sigmoid(-(double)A->fg[gi]));
    }
}

int fcpu_mlstm_chunkwise_bwd(float *dq, float *dk, float *dv_, float *digate, float *dfgate,
                             const float *dh, const float *q, const float *k, const float *v,
                             const float *igate, const float *fgate, int B, int T, int H, int dqk,
                             int dv, float eps, int chunk, void *ws) {
    if (check_sizes("fcpu_mlstm_chunkwise_bwd", B, T, H, dqk, dv)) return PHAX_ERR;
    if (!ws) return phax_fail("fcpu_mlstm_chunkwise_bwd: ws is NULL");
    if (T == 0) return PHAX_OK;
    const int L = eff_chunk(chunk, T), ns = nslots(B, H);
    const size_t slot = slot_bytes_bwd(T, L, dqk, dv);
    char *base = (char *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
    const long BH = (long)B * H;
    bw_args A = {dq,    dk,    dv_, digate, dfgate, dh, q, k,          v,
                 igate, fgate, T,   H,      dqk,    dv, L, (double)eps};
    const blas_hold blas_prev = blas_single_begin(ns);
#pragma omp parallel num_threads(ns)
    {
        carve cv = {base + (size_t)omp_get_thread_num() * slot, 0};
        bw_slot s = bw_carve(&cv, T, L, dqk, dv);
#pragma omp for schedule(static)
        for (long p = 0; p < BH; p++) bwd_seq(&s, &A, (int)(p / H), (int)(p % H));
    }
    blas_single_end(ns, blas_prev);
    return PHAX_OK;
}
