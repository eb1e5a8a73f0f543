// fast/cpu attention: float32, FlashAttention-2 style (Dao 2023, arXiv:2307.08691).
//
// Forward: a pre-pass writes the scored vectors once per row (RoPE with float64
// angles, the cosine normalisation, the logit scale folded into q) into the
// workspace, in head-major tiles. Then, in parallel over (b, query head, query
// tile of BQ rows), an online softmax runs over the key tiles of BK keys that the
// causal window can see: S = Q Kᵀ, running row max m and sum l, O = O·e^(m_old−m_new)
// + P V. Only BQ×BK scores exist at a time; a sliding window visits O(w/BK) key
// tiles per query tile, and within a tile only the keys each group of rows sees.
//
// Backward: per (b, kv head) — all query heads of the group, so dK, dV of the kv
// head are summed by one task without races, and the task owns the dQ rows of its
// heads. The FlashAttention-2 backward: for each (query tile, key tile it sees),
// S = Q Kᵀ, P = e^((S − m) − log l) from the forward's row statistics, dP = dO Vᵀ,
// dS = P ⊙ (dP − D) with D = dO·o (double, in the pre-pass), then dV += Pᵀ dO,
// dK += dSᵀ Q, dQ += dS K — five tile products, one exponential per score, one S and
// one dP tile per thread. The forward hands over (m, log l), not a float lse: with
// cosine logits near 100 a float lse alone costs P a relative ~|lse|·2⁻²⁴, 20–40× the
// error of a plain float32 evaluation on the clamp head, while S − m is exact near
// the maximum. (An earlier version kept S and dP of a whole row of key tiles to form
// D = Σ P·dP itself: at T = 2048 that is 1–1.5 MB per thread, past L2, and its
// second pass was bound by those loads; this one is 14% faster in the backward.)
// When B·Hkv is below the thread count, each query head is its own task with
// private dK, dV accumulators, summed afterwards in head order. A post-pass maps
// dQ, dK back through the cosine normalisation and RoPE (float64 row arithmetic)
// and adds into the outputs.
//
// Tile products: one register-blocked micro-kernel, C (=|+=) A·B with B read as
// 16-float vectors and A broadcast one element at a time (GCC vector extensions;
// FMA through the AVX-512 intrinsic when available), taken per group of 12 query
// rows over only the keys the group can see. Measured (benchmarks/bench_attention.c,
// one core): cblas_sgemm on one 64×64×dh tile per call reaches 61 (dh 32) and 55
// (dh 64) GFLOP/s, below the 75 and 90 GFLOP/s of this whole fused forward with its
// softmax (measured with 64×64 tiles; 128×128 now), so sgemm is not used. Peak FMA
// on this machine: ~117 GFLOP/s per core.
#include "phax/fcpu_attention.h"

#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

#define BQ 128  // query rows per tile
#define BK 128  // keys per tile
#define VL 16  // floats per vector
#define NVK (BK / VL)
#define RB 64  // RoPE position block: cos/sin(p·θ) from a per-block and a per-offset table
#define LOG2E 1.44269504088896340736

#ifndef __AVX512F__
// Without AVX-512 the 64-byte vectors are lowered to narrower ones; every function
// that passes them is static, so the ABI note GCC gives for them does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
typedef float vf __attribute__((vector_size(64)));
typedef int32_t vi __attribute__((vector_size(64)));

// --- vector helpers ------------------------------------------------------------------
static inline vf vld(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void vst(float *p, vf v) { memcpy(p, &v, sizeof v); }
static inline vf vset1(float a) {
#ifdef __AVX512F__
    return (vf)_mm512_set1_ps(a);
#else
    return (vf){a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a};
#endif
}
static inline vf vfma(vf a, vf b, vf c) {
#ifdef __AVX512F__
    return (vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#else
    return a * b + c;
#endif
}
// max/min that return x when x is NaN (so NaN inputs reach the output).
static inline vf vmax_keep(vf lo, vf x) {
#ifdef __AVX512F__
    return (vf)_mm512_max_ps((__m512)lo, (__m512)x);
#else
    vi m = lo > x;
    return (vf)(((vi)lo & m) | ((vi)x & ~m));
#endif
}
static inline vf vmin_keep(vf hi, vf x) {
#ifdef __AVX512F__
    return (vf)_mm512_min_ps((__m512)hi, (__m512)x);
#else
    vi m = hi < x;
    return (vf)(((vi)hi & m) | ((vi)x & ~m));
#endif
}
static inline vf vmax(vf a, vf b) { return vmax_keep(a, b); }
static inline float hmax(vf a) {
#ifdef __AVX512F__
    return _mm512_reduce_max_ps((__m512)a);
#else
    float m = a[0];
    for (int i = 1; i < VL; i++) m = a[i] > m ? a[i] : m;
    return m;
#endif
}
static inline float hsum(vf a) {
#ifdef __AVX512F__
    return _mm512_reduce_add_ps((__m512)a);
#else
    float s = 0;
    for (int i = 0; i < VL; i++) s += a[i];
    return s;
#endif
}
// select: m ? a : b (m lanes all-ones or zero)
static inline vf vsel(vi m, vf a, vf b) { return (vf)(((vi)a & m) | ((vi)b & ~m)); }

// e^x (Cephes expf scheme): n = round(x·log2 e) by the 1.5·2^23 trick, r = x − n·ln 2
// with ln 2 split in two (n·C1 exact, so r carries no rounding of a large x), e^r by
// a degree-7 polynomial (≲ 1 ulp), 2^n put in the exponent bits. x ≤ −127·ln 2
// gives exactly 0 (so −inf → 0); NaN stays NaN.
static inline vf vexp(vf x) {
    x = vmax_keep(vset1(-88.02969193f), x);  // n ≥ −127: 2^n's bits are then 0
    x = vmin_keep(vset1(88.7f), x);
    vf t = x * (float)LOG2E + 0x1.8p23f;
    vf n = t - 0x1.8p23f;
    vf r = vfma(n, vset1(-0.693359375f), x);
    r = vfma(n, vset1(2.12194440e-4f), r);
    vi e = ((vi)t - 0x4B400000 + 127) << 23;
    vf p = vset1(1.9875691500e-4f);
    p = vfma(p, r, vset1(1.3981999507e-3f));
    p = vfma(p, r, vset1(8.3334519073e-3f));
    p = vfma(p, r, vset1(4.1665795894e-2f));
    p = vfma(p, r, vset1(1.6666665459e-1f));
    p = vfma(p, r, vset1(5.0000001201e-1f));
    p = vfma(p, r * r, r + 1.0f);
    return p * (vf)e;
}

// --- tile products --------------------------------------------------------------------
// C (R × 16·NV, row stride ldc) = (init ? 0 : C) + A·B over k < K, with A(r, k) =
// A[r·sam + k·sak] broadcast and B row k = B[k·ldb + 0..16·NV).
#define DEFMK(R, NV)                                                                        \
    static void mk_##R##_##NV(int K, const float *A, ptrdiff_t sam, ptrdiff_t sak,          \
                              const float *Bm, ptrdiff_t ldb, float *C, ptrdiff_t ldc,     \
                              int init) {                                                   \
        vf acc[R][NV];                                                                      \
        _Pragma("GCC unroll 16") for (int r = 0; r < R; r++)                                \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)                            \
                acc[r][v] = init ? vset1(0) : vld(C + r * ldc + v * VL);                    \
        for (int k = 0; k < K; k++) {                                                       \
            vf bv[NV];                                                                      \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)                            \
                bv[v] = vld(Bm + k * ldb + v * VL);                                         \
            _Pragma("GCC unroll 16") for (int r = 0; r < R; r++) {                          \
                vf a = vset1(A[r * sam + k * sak]);                                         \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)                        \
                    acc[r][v] = vfma(a, bv[v], acc[r][v]);                                  \
            }                                                                               \
        }                                                                                   \
        _Pragma("GCC unroll 16") for (int r = 0; r < R; r++)                                \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)                            \
                vst(C + r * ldc + v * VL, acc[r][v]);                                       \
    }
DEFMK(6, 4)
DEFMK(4, 4)
DEFMK(1, 4)
DEFMK(8, 3)
DEFMK(4, 3)
DEFMK(1, 3)
DEFMK(12, 2)
DEFMK(4, 2)
DEFMK(1, 2)
DEFMK(8, 1)
DEFMK(4, 1)
DEFMK(1, 1)

typedef void (*mk_fn)(int, const float *, ptrdiff_t, ptrdiff_t, const float *, ptrdiff_t, float *,
                      ptrdiff_t, int);

// C (M × N) (init ? = : +=) A (M × K) · B (K × N); N a multiple of 16. Row blocks of
// 12 (the band groups below) split exactly for every N.
static void gemm_k(int M, int N, int K, const float *A, ptrdiff_t sam, ptrdiff_t sak,
                   const float *Bm, ptrdiff_t ldb, float *C, ptrdiff_t ldc, int init) {
    static const mk_fn big[5] = {0, mk_8_1, mk_12_2, mk_8_3, mk_6_4};
    static const mk_fn mid[5] = {0, mk_4_1, mk_4_2, mk_4_3, mk_4_4};
    static const int rbig[5] = {0, 8, 12, 8, 6}, rmid[5] = {0, 4, 4, 4, 4};
    static const mk_fn one[5] = {0, mk_1_1, mk_1_2, mk_1_3, mk_1_4};
    for (int n0 = 0; n0 < N; n0 += 4 * VL) {
        int nv = (N - n0) / VL < 4 ? (N - n0) / VL : 4;
        const float *Bn = Bm + n0;
        float *Cn = C + n0;
        int m = 0;
        for (; m + rbig[nv] <= M; m += rbig[nv]) big[nv](K, A + m * sam, sam, sak, Bn, ldb, Cn + m * ldc, ldc, init);
        for (; m + rmid[nv] <= M; m += rmid[nv]) mid[nv](K, A + m * sam, sam, sak, Bn, ldb, Cn + m * ldc, ldc, init);
        for (; m < M; m++) one[nv](K, A + m * sam, sam, sak, Bn, ldb, Cn + m * ldc, ldc, init);
    }
}
static void gemm_acc(int M, int N, int K, const float *A, ptrdiff_t sam, ptrdiff_t sak,
                     const float *Bm, ptrdiff_t ldb, float *C, ptrdiff_t ldc) {
    gemm_k(M, N, K, A, sam, sak, Bm, ldb, C, ldc, 0);
}
static void gemm_set(int M, int N, int K, const float *A, ptrdiff_t sam, ptrdiff_t sak,
                     const float *Bm, ptrdiff_t ldb, float *C, ptrdiff_t ldc) {
    gemm_k(M, N, K, A, sam, sak, Bm, ldb, C, ldc, 1);
}

// --- geometry and workspace layout ---------------------------------------------------------
typedef struct {
    int B, T, Hq, Hkv, g, dh, dv, half, dhp, dvp, nqt, nkt, Tq, Tk, w, nthr, nsplit, nblk;
    long pb;  // position of block 0 (a multiple of RB, ≤ pos0)
    int rope, cosine;
    // byte offsets into the workspace
    size_t qs, kt, kr, vr, vt, dO, dD, dqa, dkp, dvp_, dls, sc, theta, lotab, thr, thr_bytes, total;
} plan;

static size_t al64(size_t x) { return (x + 63) & ~(size_t)63; }
static int rup(int x, int m) { return (x + m - 1) / m * m; }

static int nthreads_of(int nthreads) {
    int n = nthreads > 0 ? nthreads : omp_get_max_threads();
    return n > 0 ? n : 1;
}

static void plan_common(plan *p, int B, int T, const phax_attn_cfg *c, int nthr) {
    memset(p, 0, sizeof *p);
    p->B = B, p->T = T, p->Hq = c->Hq, p->Hkv = c->Hkv, p->g = c->Hq / c->Hkv;
    p->dh = c->dh, p->dv = c->dv, p->half = c->dh / 2;
    p->dhp = rup(c->dh, VL), p->dvp = rup(c->dv, VL);
    p->nqt = (T + BQ - 1) / BQ, p->nkt = (T + BK - 1) / BK;
    p->Tq = p->nqt * BQ, p->Tk = p->nkt * BK;
    p->w = c->window > 0 ? c->window : INT_MAX;
    p->nthr = nthr;
    p->rope = c->rope, p->cosine = c->score == PHAX_SCORE_COSINE;
    long r = c->pos0 % RB;
    if (r < 0) r += RB;
    p->pb = c->pos0 - r;
    p->nblk = (int)((r + T + RB - 1) / RB);
}

#define F4 sizeof(float)
#define D8 sizeof(double)

// Forward layout. Shared: Qs (B,Hq,Tq,dhp), Kt (B,Hkv,nkt,dh,BK), Vr (B,Hkv,Tk,dvp),
// per-head scale (Hq doubles), θ (half), the RoPE offset table (RB·half cos, sin).
// Per thread: S (BQ·BK), Oacc (BQ·dvp), m, l, mx, alpha (BQ each).
static void plan_fwd(plan *p, size_t base) {
    size_t o = base, nb = (size_t)p->B;
    p->qs = o, o = al64(o + nb * p->Hq * p->Tq * p->dhp * F4);
    p->kt = o, o = al64(o + nb * p->Hkv * p->Tk * p->dh * F4);
    p->vr = o, o = al64(o + nb * p->Hkv * p->Tk * p->dvp * F4);
    p->sc = o, o = al64(o + (size_t)p->Hq * D8);
    p->theta = o, o = al64(o + (size_t)(p->half + 1) * D8);
    p->lotab = o, o = al64(o + (size_t)RB * 2 * (p->half + 1) * D8);
    size_t tb1 = al64((size_t)BQ * BK * F4) + al64((size_t)BQ * p->dvp * F4) + 4 * al64(BQ * F4);
    size_t tb2 = al64((size_t)(2 * p->dh + 4 * (p->half + 1)) * D8);  // pre-pass rows
    p->thr_bytes = tb1 > tb2 ? tb1 : tb2;
    p->thr = o, o += (size_t)p->nthr * p->thr_bytes;
    p->total = o;
}

// Backward layout. Shared: Qs, Kt as forward, Kr (B,Hkv,Tk,dhp), Vt (B,Hkv,nkt,dv,BK),
// dO (B,Hq,Tq,dvp), D = dO·o (B,Hq,Tq), the dQ accumulator (B,Hq,Tq,dhp), dK and dV
// accumulators per task (B,Hkv,nsplit,Tk,dhp|dvp), dlogscale per (b, head) (doubles),
// the scale/θ/RoPE tables. Per thread: one S and one dP tile (BQ·BK each), the dQ tile,
// row stats, and the float64 rows of the pre/post-passes.
static void plan_bwd(plan *p, int B) {
    size_t o = 0, nb = (size_t)B;
    p->nsplit = (size_t)B * p->Hkv >= (size_t)p->nthr ? 1 : p->g;
    p->qs = o, o = al64(o + nb * p->Hq * p->Tq * p->dhp * F4);
    p->kt = o, o = al64(o + nb * p->Hkv * p->Tk * p->dh * F4);
    p->kr = o, o = al64(o + nb * p->Hkv * p->Tk * p->dhp * F4);
    p->vt = o, o = al64(o + nb * p->Hkv * p->Tk * p->dv * F4);
    p->dO = o, o = al64(o + nb * p->Hq * p->Tq * p->dvp * F4);
    p->dD = o, o = al64(o + nb * p->Hq * p->Tq * F4);
    p->dqa = o, o = al64(o + nb * p->Hq * p->Tq * p->dhp * F4);
    p->dkp = o, o = al64(o + nb * p->Hkv * p->nsplit * p->Tk * p->dhp * F4);
    p->dvp_ = o, o = al64(o + nb * p->Hkv * p->nsplit * p->Tk * p->dvp * F4);
    p->dls = o, o = al64(o + nb * p->Hq * D8);
    p->sc = o, o = al64(o + (size_t)p->Hq * D8);
    p->theta = o, o = al64(o + (size_t)(p->half + 1) * D8);
    p->lotab = o, o = al64(o + (size_t)RB * 2 * (p->half + 1) * D8);
    size_t tb1 = 2 * al64((size_t)BQ * BK * F4) + al64((size_t)BQ * p->dhp * F4) +
                 5 * al64((size_t)BQ * F4);  // the S and dP tiles, the dQ tile, m, log l, D, Dx, Hx
    size_t tb2 = al64((size_t)(4 * p->dh + 4 * (p->half + 1) + p->dv) * D8);
    p->thr_bytes = tb1 > tb2 ? tb1 : tb2;
    p->thr = o, o += (size_t)p->nthr * p->thr_bytes;
    p->total = o;
}

static int check_args(int B, int T, const phax_attn_cfg *c, const float *logscale) {
    if (phax_attn_cfg_check(c)) return PHAX_ERR;
    if (B < 0 || T < 0) return phax_fail("attention: B=%d T=%d must be >= 0", B, T);
    if (c->score == PHAX_SCORE_COSINE && !logscale) return phax_fail("attention: cosine scores need logscale");
    return PHAX_OK;
}

size_t fcpu_attention_fwd_ws(int B, int T, const phax_attn_cfg *c, int nthreads) {
    if (phax_attn_cfg_check(c) || B < 0 || T < 0) return 0;
    plan p;
    plan_common(&p, B, T, c, nthreads_of(nthreads));
    plan_fwd(&p, 0);
    return p.total + 64;  // + alignment slack
}

size_t fcpu_attention_bwd_ws(int B, int T, const phax_attn_cfg *c, int nthreads) {
    if (phax_attn_cfg_check(c) || B < 0 || T < 0) return 0;
    plan p;
    plan_common(&p, B, T, c, nthreads_of(nthreads));
    plan_bwd(&p, B);
    return p.total + 64;
}

static char *align_ws(void *ws) { return (char *)(((uintptr_t)ws + 63) & ~(uintptr_t)63); }

// --- per-row pre/post arithmetic (float64) ----------------------------------------------------
// Per-head logit scale: 1/√dh (dot) or exp(min(ℓ_h, log 100)) (cosine).
static double head_scale(const plan *p, const float *logscale, int h) {
    if (!p->cosine) return 1.0 / sqrt((double)p->dh);
    double l = logscale[h];
    return exp(l < PHAX_COSINE_MAX_LOGSCALE ? l : PHAX_COSINE_MAX_LOGSCALE);
}

// θ_i = base^(−2i/dh) (as ref) and lo[o] = (cos, sin)(o·θ_i) for o < RB.
static void rope_tables(const plan *p, double base, double *theta, double *lo) {
    if (!p->rope) return;
    for (int i = 0; i < p->half; i++) theta[i] = pow(base, -2.0 * i / p->dh);
    for (int o = 0; o < RB; o++)
        for (int i = 0; i < p->half; i++) {
            lo[(size_t)o * 2 * p->half + i] = cos(o * theta[i]);
            lo[(size_t)o * 2 * p->half + p->half + i] = sin(o * theta[i]);
        }
}

// (cos, sin)(ph·θ_i) for the block starting at position ph.
static void rope_block(const plan *p, long ph, const double *theta, double *hi) {
    if (!p->rope) return;
    for (int i = 0; i < p->half; i++) {
        double a = (double)ph * theta[i];
        hi[i] = cos(a), hi[p->half + i] = sin(a);
    }
}

// cs = (cos, sin)((ph + off)·θ_i) by the angle-sum formula.
static void rope_row(const plan *p, const double *hi, const double *lo, int off, double *cs) {
    if (!p->rope) return;
    int H = p->half;
    const double *l = lo + (size_t)off * 2 * H;
    for (int i = 0; i < H; i++) {
        cs[i] = hi[i] * l[i] - hi[H + i] * l[H + i];
        cs[H + i] = hi[H + i] * l[i] + hi[i] * l[H + i];
    }
}

// 8 doubles, and 8 floats widened to them, for the float64 row arithmetic.
typedef double vd __attribute__((vector_size(64)));
typedef float vf8 __attribute__((vector_size(32)));
static inline vd vd_ld(const double *p) {
    vd v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void vd_st(double *p, vd v) { memcpy(p, &v, sizeof v); }
static inline vd vd_ldf(const float *p) {
    vf8 v;
    memcpy(&v, p, sizeof v);
    return __builtin_convertvector(v, vd);
}
static inline double lanes_sum(vd a) {
    double s = 0;
    for (int i = 0; i < 8; i++) s += a[i];
    return s;
}

// Σ a_i·b_i in double over 8 lanes (then the lanes in order), not one serial chain:
// a strict left-to-right sum is a chain of dependent adds (~4 cycles each) that cost
// more than the rest of the row's arithmetic. The order differs from ref's; in
// double that is far below the float rounding of every value the sums feed.
// dot_dd for double rows, dot_ff for float rows (widened).
#define DEF_LANE_DOT(name, T, load)                                \
    static inline double name(const T *a, const T *b, int n) {     \
        vd acc = {0};                                              \
        int i = 0;                                                 \
        for (; i + 8 <= n; i += 8) acc += load(a + i) * load(b + i); \
        double s = lanes_sum(acc);                                 \
        for (; i < n; i++) s += (double)a[i] * b[i];               \
        return s;                                                  \
    }
DEF_LANE_DOT(dot_dd, double, vd_ld)
DEF_LANE_DOT(dot_ff, float, vd_ldf)

// max(r, ε) as fmax (a NaN r gives ε), without fmax's library call.
static inline double clamp_norm(double r) { return r > PHAX_COSINE_NORM_EPS ? r : PHAX_COSINE_NORM_EPS; }

// The scored vector of a row, y = R x (then ·1/max(‖R x‖, ε) in cosine mode), in
// double; returns the clamped norm (1 for dot). Rotate-half pairs (i, i + dh/2).
static double scored_row(const plan *p, const double *cs, const float *x, double *y) {
    int H = p->half, dh = p->dh;
    if (p->rope && H % 8 == 0) {  // the same arithmetic, 8 pairs at a time
        vd acc = {0};
        for (int i = 0; i < H; i += 8) {
            vd c = vd_ld(cs + i), s = vd_ld(cs + H + i), x1 = vd_ldf(x + i), x2 = vd_ldf(x + H + i);
            vd y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
            vd_st(y + i, y1), vd_st(y + H + i, y2);
            acc += y1 * y1 + y2 * y2;
        }
        if (!p->cosine) return 1.0;
        double nrm = clamp_norm(sqrt(lanes_sum(acc)));
        vd inv = (vd){0} + 1.0 / nrm;
        for (int i = 0; i < dh; i += 8) vd_st(y + i, vd_ld(y + i) * inv);
        return nrm;
    }
    if (p->rope) {
        for (int i = 0; i < H; i++) {
            double c = cs[i], s = cs[H + i], x1 = x[i], x2 = x[i + H];
            y[i] = x1 * c - x2 * s, y[i + H] = x2 * c + x1 * s;
        }
    } else {
        for (int i = 0; i < dh; i++) y[i] = x[i];
    }
    if (!p->cosine) return 1.0;
    double nrm = clamp_norm(sqrt(dot_dd(y, y, dh))), inv = 1.0 / nrm;
    for (int i = 0; i < dh; i++) y[i] *= inv;
    return nrm;
}

// dx += Rᵀ N'(dy): back through the normalisation (cosine: xh, nrm from scored_row)
// and the rotation (Rᵀ is the rotation by −p).
static void unscore_row(const plan *p, const double *cs, const double *xh, double nrm, double *dy,
                        float *dx) {
    int H = p->half, dh = p->dh;
    if (p->cosine) {
        double inv = 1.0 / nrm;
        if (nrm > PHAX_COSINE_NORM_EPS) {
            double d = dot_dd(xh, dy, dh);
            for (int i = 0; i < dh; i++) dy[i] = (dy[i] - xh[i] * d) * inv;
        } else {
            for (int i = 0; i < dh; i++) dy[i] *= inv;
        }
    }
    if (p->rope && H % 8 == 0) {
        for (int i = 0; i < H; i += 8) {
            vd c = vd_ld(cs + i), s = vd_ld(cs + H + i), y1 = vd_ld(dy + i), y2 = vd_ld(dy + H + i);
            vf8 a, b2, g1 = __builtin_convertvector(y1 * c + y2 * s, vf8),
                       g2 = __builtin_convertvector(y2 * c - y1 * s, vf8);
            memcpy(&a, dx + i, sizeof a), memcpy(&b2, dx + H + i, sizeof b2);
            a += g1, b2 += g2;
            memcpy(dx + i, &a, sizeof a), memcpy(dx + H + i, &b2, sizeof b2);
        }
    } else if (p->rope) {
        for (int i = 0; i < H; i++) {
            double c = cs[i], s = cs[H + i], y1 = dy[i], y2 = dy[i + H];
            dx[i] += (float)(y1 * c + y2 * s), dx[i + H] += (float)(y2 * c - y1 * s);
        }
    } else {
        for (int i = 0; i < dh; i++) dx[i] += (float)dy[i];
    }
}

// Row indices of the block: t in [t_lo, t_hi), offset within the block t − t_lo + off0.
static void block_rows(const plan *p, long pos0, int blk, int *t_lo, int *t_hi, int *off0) {
    long first = p->pb + (long)blk * RB - pos0;  // t of the block's first position
    long lo = first < 0 ? 0 : first, hi = first + RB < p->T ? first + RB : p->T;
    *t_lo = (int)lo, *t_hi = (int)hi, *off0 = (int)(lo - first);
}

// --- pre-pass -----------------------------------------------------------------------------
// Scored q (× the logit scale) into Qs rows, scored k into Kt tiles (and Kr rows), v
// into Vr rows (forward) or Vt tiles and dO rows (backward).
typedef struct {
    const float *q, *k, *v, *dout, *o;
    long pos0;
} pre_in;

static void prepass(const plan *p, char *w, const pre_in *in, int bwd) {
    float *Qs = (float *)(w + p->qs), *Kt = (float *)(w + p->kt);
    float *Kr = bwd ? (float *)(w + p->kr) : NULL;
    float *Vr = bwd ? NULL : (float *)(w + p->vr), *Vt = bwd ? (float *)(w + p->vt) : NULL;
    float *dO = bwd ? (float *)(w + p->dO) : NULL;
    const double *sc = (const double *)(w + p->sc), *theta = (const double *)(w + p->theta);
    const double *lo = (const double *)(w + p->lotab);
    int B = p->B, T = p->T, Hq = p->Hq, Hkv = p->Hkv, dh = p->dh, dv = p->dv;
    int dhp = p->dhp, dvp = p->dvp;
#pragma omp parallel num_threads(p->nthr)
    {
        double *rw = (double *)(w + p->thr + (size_t)omp_get_thread_num() * p->thr_bytes);
        double *hi = rw, *cs = hi + 2 * (p->half + 1), *y = cs + 2 * (p->half + 1);
#pragma omp for schedule(static)
        for (long task = 0; task < (long)B * p->nblk; task++) {
            int b = (int)(task / p->nblk), blk = (int)(task % p->nblk), t_lo, t_hi, off;
            block_rows(p, in->pos0, blk, &t_lo, &t_hi, &off);
            rope_block(p, p->pb + (long)blk * RB, theta, hi);
            for (int t = t_lo; t < t_hi; t++, off++) {
                rope_row(p, hi, lo, off, cs);
                for (int h = 0; h < Hq; h++) {
                    size_t ri = ((size_t)b * T + t) * Hq + h;
                    scored_row(p, cs, in->q + ri * dh, y);
                    float *qd = Qs + (((size_t)b * Hq + h) * p->Tq + t) * dhp;
                    for (int i = 0; i < dh; i++) qd[i] = (float)(y[i] * sc[h]);
                    for (int i = dh; i < dhp; i++) qd[i] = 0;
                    if (!bwd) continue;
                    float *gd = dO + (((size_t)b * Hq + h) * p->Tq + t) * dvp;
                    const float *gs = in->dout + ri * dv;
                    for (int i = 0; i < dv; i++) gd[i] = gs[i];
                    // D = Σ_s P·dP = dO·o (o = Σ_s P v_s), in double
                    double D = dot_ff(gs, in->o + ri * dv, dv);
                    ((float *)(w + p->dD))[((size_t)b * Hq + h) * p->Tq + t] = (float)D;
                    for (int i = dv; i < dvp; i++) gd[i] = 0;
                }
                for (int j = 0; j < Hkv; j++) {
                    size_t ri = ((size_t)b * T + t) * Hkv + j, hj = (size_t)b * Hkv + j;
                    scored_row(p, cs, in->k + ri * dh, y);
                    float *kt = Kt + (hj * p->Tk + (size_t)(t / BK) * BK) * dh + t % BK;
                    for (int i = 0; i < dh; i++) kt[(size_t)i * BK] = (float)y[i];
                    const float *vs = in->v + ri * dv;
                    if (bwd) {
                        float *kr = Kr + (hj * p->Tk + t) * dhp;
                        for (int i = 0; i < dh; i++) kr[i] = (float)y[i];
                        for (int i = dh; i < dhp; i++) kr[i] = 0;
                        float *vt = Vt + (hj * p->Tk + (size_t)(t / BK) * BK) * dv + t % BK;
                        for (int i = 0; i < dv; i++) vt[(size_t)i * BK] = vs[i];
                    } else {
                        float *vr = Vr + (hj * p->Tk + t) * dvp;
                        for (int i = 0; i < dv; i++) vr[i] = vs[i];
                        for (int i = dv; i < dvp; i++) vr[i] = 0;
                    }
                }
            }
        }
    }
    // Padding rows (t ≥ T) of the last tiles: zero (never used as query rows; padding
    // keys are masked).
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < Hq; h++)
            for (int t = T; t < p->Tq; t++) {
                size_t li = ((size_t)b * Hq + h) * p->Tq + t;
                memset(Qs + li * dhp, 0, (size_t)dhp * F4);
                if (!bwd) continue;
                memset(dO + li * dvp, 0, (size_t)dvp * F4);
            }
        for (int j = 0; j < Hkv; j++)
            for (int t = T; t < p->Tk; t++) {
                size_t hj = (size_t)b * Hkv + j;
                float *kt = Kt + (hj * p->Tk + (size_t)(t / BK) * BK) * dh + t % BK;
                for (int i = 0; i < dh; i++) kt[(size_t)i * BK] = 0;
                if (bwd) {
                    memset(Kr + (hj * p->Tk + t) * dhp, 0, (size_t)dhp * F4);
                    float *vt = Vt + (hj * p->Tk + (size_t)(t / BK) * BK) * dv + t % BK;
                    for (int i = 0; i < dv; i++) vt[(size_t)i * BK] = 0;
                } else {
                    memset(Vr + (hj * p->Tk + t) * dvp, 0, (size_t)dvp * F4);
                }
            }
    }
}

static void setup_tables(const plan *p, char *w, const float *logscale, const phax_attn_cfg *c) {
    double *sc = (double *)(w + p->sc);
    for (int h = 0; h < p->Hq; h++) sc[h] = head_scale(p, logscale, h);
    rope_tables(p, c->rope_base, (double *)(w + p->theta), (double *)(w + p->lotab));
}


// Is the whole tile (rows t0..t1, keys s0..s0+BK−1) visible?
static inline int tile_full(int t0, int t1, int s0, int w) {
    return s0 + BK - 1 <= t0 && (long)t1 - s0 < w;
}

// Row groups of a (query tile, key tile) pair: group g holds query rows
// t0 + [g·RG, g·RG + RG) and sees the key offsets [lo_g, hi_g] of the tile (lo > hi:
// none), stored at 16-key granularity as chunks [c0_g, c1_g]. Tile products are taken
// per group over its keys only, so a sliding window costs about its band, not the
// whole tiles it touches. Every key outside a group's range is invisible to its rows.
#define RG 12
#define NG ((BQ + RG - 1) / RG)
typedef struct {
    int n, lo[NG], hi[NG], c0[NG], c1[NG];
} band;

static void band_of(band *bd, int t0, int nr, int s0, int nk, int w) {
    bd->n = (nr + RG - 1) / RG;
    for (int g = 0; g < bd->n; g++) {
        long ta = t0 + g * RG, tb = ta + RG - 1 < t0 + nr - 1 ? ta + RG - 1 : t0 + nr - 1;
        long lo = w == INT_MAX ? 0 : ta - w + 1 - s0, hi = tb - s0;
        if (lo < 0) lo = 0;
        if (hi > nk - 1) hi = nk - 1;
        bd->lo[g] = (int)lo, bd->hi[g] = (int)hi;
        bd->c0[g] = lo <= hi ? (int)lo / VL : 1, bd->c1[g] = lo <= hi ? (int)hi / VL : 0;
    }
}

// Query-row offsets [*lo, *hi] of the tile at t0 that see any key of [sa, sb].
static void rows_seeing(int sa, int sb, int t0, int nr, int w, int *lo, int *hi) {
    long a = (long)sa - t0, b = w == INT_MAX ? nr - 1 : (long)sb + w - 1 - t0;
    *lo = (int)(a < 0 ? 0 : a), *hi = (int)(b > nr - 1 ? nr - 1 : b);
}

// Max of the scores of row r (query t) over its group's chunks of the key tile at s0,
// first masking them (unless the tile is fully visible): −inf where s is not visible
// (s > t or t − s ≥ w). Returns −inf for a row that sees nothing of the tile.
static inline float row_max(float *Sr, const band *bd, int r, int t, int s0, int w, int full) {
    static const vi iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    vf mv = vset1(-INFINITY);
    for (int v = bd->c0[r / RG]; v <= bd->c1[r / RG]; v++) {
        vf x = vld(Sr + v * VL);
        if (!full) {
            vi d = (t - s0 - v * VL) - iota;  // t − s
            x = vsel((d >= 0) & (d < w), x, vset1(-INFINITY));
            vst(Sr + v * VL, x);
        }
        mv = vmax(mv, x);
    }
    return hmax(mv);
}

// S (rows × BK, row stride BK) = A·B per group over its chunks only; entries outside
// are left as they were (the caller masks or ignores them).
static void band_gemm_set(const band *bd, int nr, int K, const float *A, ptrdiff_t lda,
                          const float *Bt, float *S) {
    for (int g = 0; g < bd->n; g++) {
        if (bd->c0[g] > bd->c1[g]) continue;
        int r0 = g * RG, rows = nr - r0 < RG ? nr - r0 : RG, n = (bd->c1[g] - bd->c0[g] + 1) * VL;
        gemm_set(rows, n, K, A + (size_t)r0 * lda, lda, 1, Bt + bd->c0[g] * VL, BK,
                 S + (size_t)r0 * BK + bd->c0[g] * VL, BK);
    }
}

// --- forward --------------------------------------------------------------------------------
static void fwd_tiles(const plan *p, char *w, float *o, float *lse, float *stats) {
    const float *Qs = (const float *)(w + p->qs), *Kt = (const float *)(w + p->kt);
    const float *Vr = (const float *)(w + p->vr);
    int T = p->T, Hq = p->Hq, dvp = p->dvp, dv = p->dv, dhp = p->dhp, nqt = p->nqt;
    long ntask = (long)p->B * Hq * nqt;
#pragma omp parallel num_threads(p->nthr)
    {
        char *tw = w + p->thr + (size_t)omp_get_thread_num() * p->thr_bytes;
        float *S = (float *)tw;
        float *Oa = (float *)(tw + al64((size_t)BQ * BK * F4));
        float *m = (float *)((char *)Oa + al64((size_t)BQ * dvp * F4));
        float *l = m + BQ, *mx = l + BQ, *al = mx + BQ;
        // (al64(BQ·4) = BQ·4 as BQ is a multiple of 16)
#pragma omp for schedule(dynamic, 1)
        for (long task = 0; task < ntask; task++) {
            // Longest tasks (last query tiles) first.
            int qi = nqt - 1 - (int)(task % nqt);
            int bh = (int)(task / nqt), b = bh / Hq, h = bh % Hq, j = h / p->g;
            int t0 = qi * BQ, nr = T - t0 < BQ ? T - t0 : BQ, t1 = t0 + nr - 1;
            int s_lo = p->w == INT_MAX || t0 - p->w + 1 < 0 ? 0 : t0 - p->w + 1;
            int kt_lo = s_lo / BK, kt_hi = t1 / BK;
            const float *Q = Qs + ((size_t)bh * p->Tq + t0) * dhp;
            const float *Kb = Kt + ((size_t)b * p->Hkv + j) * p->Tk * p->dh;
            const float *Vb = Vr + ((size_t)b * p->Hkv + j) * p->Tk * dvp;
            for (int r = 0; r < BQ; r++) m[r] = mx[r] = -INFINITY, l[r] = 0;
            memset(Oa, 0, (size_t)nr * dvp * F4);
            for (int kt = kt_lo; kt <= kt_hi; kt++) {
                int s0 = kt * BK, nk = T - s0 < BK ? T - s0 : BK;
                band bd;
                band_of(&bd, t0, nr, s0, nk, p->w);
                band_gemm_set(&bd, nr, p->dh, Q, dhp, Kb + (size_t)kt * BK * p->dh, S);
                int full = tile_full(t0, t1, s0, p->w);
                for (int r = 0; r < nr; r++) mx[r] = row_max(S + (size_t)r * BK, &bd, r, t0 + r, s0, p->w, full);
                // New row maxima and the rescale factors e^(m_old − m_new), BQ rows at a time.
                for (int r = 0; r < BQ; r += VL) {
                    vf mo = vld(m + r), mn = vmax(mo, vld(mx + r));
                    vi dead = mn == vset1(-INFINITY);  // nothing visible yet: keep 0 as reference
                    vf ref = vsel(dead, vset1(0), mn);
                    vst(al + r, vexp(mo - ref));
                    vst(m + r, mn);
                    vst(mx + r, ref);
                }
                for (int r = 0; r < nr; r++) {
                    float *Sr = S + (size_t)r * BK;
                    vf ref = vset1(mx[r]), sum = vset1(0);
                    for (int v = bd.c0[r / RG]; v <= bd.c1[r / RG]; v++) {
                        vf e = vexp(vld(Sr + v * VL) - ref);
                        vst(Sr + v * VL, e);
                        sum += e;
                    }
                    l[r] = l[r] * al[r] + hsum(sum);
                    if (al[r] != 1.0f) {
                        float *Or = Oa + (size_t)r * dvp;
                        vf a = vset1(al[r]);
                        for (int i = 0; i < dvp; i += VL) vst(Or + i, vld(Or + i) * a);
                    }
                }
                for (int g = 0; g < bd.n; g++) {
                    if (bd.lo[g] > bd.hi[g]) continue;
                    int r0 = g * RG, rows = nr - r0 < RG ? nr - r0 : RG;
                    gemm_acc(rows, dvp, bd.hi[g] - bd.lo[g] + 1, S + (size_t)r0 * BK + bd.lo[g], BK, 1,
                             Vb + (size_t)(s0 + bd.lo[g]) * dvp, dvp, Oa + (size_t)r0 * dvp, dvp);
                }
            }
            for (int r = 0; r < nr; r++) {
                int t = t0 + r;
                float inv = 1.0f / l[r];
                float *od = o + (((size_t)b * T + t) * Hq + h) * dv;
                const float *Or = Oa + (size_t)r * dvp;
                for (int i = 0; i < dv; i++) od[i] = Or[i] * inv;
                if (lse) lse[(size_t)bh * T + t] = (float)((double)m[r] + log((double)l[r]));
                if (stats) {  // (m, log l): what the backward rebuilds P from
                    stats[2 * ((size_t)bh * T + t)] = m[r];
                    stats[2 * ((size_t)bh * T + t) + 1] = (float)log((double)l[r]);
                }
            }
        }
    }
}

static int fwd_impl(float *o, float *lse, float *stats, const float *q, const float *k, const float *v,
                    const float *logscale, int B, int T, const phax_attn_cfg *c, void *ws, int nthr) {
    if (!ws) return phax_fail("attention: workspace is NULL");
    plan p;
    plan_common(&p, B, T, c, nthr);
    plan_fwd(&p, 0);
    char *w = align_ws(ws);
    setup_tables(&p, w, logscale, c);
    pre_in in = {.q = q, .k = k, .v = v, .pos0 = c->pos0};
    prepass(&p, w, &in, 0);
    fwd_tiles(&p, w, o, lse, stats);
    return PHAX_OK;
}

int fcpu_attention_fwd(float *o, float *lse, float *stats, const float *q, const float *k,
                       const float *v, const float *logscale, int B, int T, const phax_attn_cfg *c,
                       void *ws) {
    if (check_args(B, T, c, logscale)) return PHAX_ERR;
    if (B == 0 || T == 0) return PHAX_OK;
    return fwd_impl(o, lse, stats, q, k, v, logscale, B, T, c, ws, nthreads_of(0));
}

// --- backward -------------------------------------------------------------------------------
typedef struct {
    int need_dq, need_dk, need_dv, need_dls;
} bwd_need;

// One task: kv head j of batch b, query heads [h_lo, h_hi); adds into this task's dK, dV
// rows (dKp, dVp: Tk rows each) and owns dQ rows and dℓ of its heads. Per (query tile,
// key tile it sees), the FlashAttention-2 backward: S = Q Kᵀ, P = e^((S − m) − log l)
// from the forward's row statistics, dP = dO Vᵀ, dS = P ⊙ (dP − D) with D = dO·o from
// the pre-pass, then dV += Pᵀ dO, dK += dSᵀ Q, dQ += dS K and dℓ += Σ dS ⊙ (S − lse).
// Only one S and one dP tile exist at a time (they stay in L1/L2).
static void bwd_task(const plan *p, char *w, char *tw, int b, int j, int h_lo, int h_hi,
                     const float *stats, float *dKp, float *dVp, double *dls, bwd_need nd) {
    const float *Qs = (const float *)(w + p->qs), *Kt = (const float *)(w + p->kt);
    const float *Kr = (const float *)(w + p->kr), *Vt = (const float *)(w + p->vt);
    const float *dO = (const float *)(w + p->dO), *dD = (const float *)(w + p->dD);
    float *dQa = (float *)(w + p->dqa);
    size_t tile = al64((size_t)BQ * BK * F4);
    float *S = (float *)tw, *dP = (float *)(tw + tile), *dQt = (float *)(tw + 2 * tile);
    float *m = (float *)((char *)dQt + al64((size_t)BQ * p->dhp * F4)), *L2 = m + BQ, *Da = L2 + BQ;
    float *Dx = Da + BQ, *Hx = Dx + BQ;  // Σ_s P·dP and Σ_s P·(S − lse) per row (for dℓ)
    int T = p->T, dh = p->dh, dv = p->dv, dhp = p->dhp, dvp = p->dvp;
    size_t hj = (size_t)b * p->Hkv + j;
    const float *Ktb = Kt + hj * p->Tk * dh, *Krb = Kr + hj * p->Tk * dhp, *Vtb = Vt + hj * p->Tk * dv;
    int need_ds = nd.need_dq || nd.need_dk || nd.need_dls;  // dv alone needs only P
    if (nd.need_dk) memset(dKp, 0, (size_t)p->Tk * dhp * F4);
    if (nd.need_dv) memset(dVp, 0, (size_t)p->Tk * dvp * F4);
    for (int h = h_lo; h < h_hi; h++) {
        size_t bh = (size_t)b * p->Hq + h;
        double dl = 0;
        for (int qt = 0; qt < p->nqt; qt++) {
            int t0 = qt * BQ, nr = T - t0 < BQ ? T - t0 : BQ, t1 = t0 + nr - 1;
            int s_lo = p->w == INT_MAX || t0 - p->w + 1 < 0 ? 0 : t0 - p->w + 1;
            int kt_lo = s_lo / BK, kt_hi = t1 / BK;
            const float *Q = Qs + (bh * p->Tq + t0) * dhp, *G = dO + (bh * p->Tq + t0) * dvp;
            const float *st = stats + 2 * (bh * T + t0);
            for (int r = 0; r < nr; r++) {
                m[r] = st[2 * r], L2[r] = st[2 * r + 1], Da[r] = dD[bh * p->Tq + t0 + r];
                Dx[r] = Hx[r] = 0;
            }
            if (nd.need_dq) memset(dQt, 0, (size_t)nr * dhp * F4);
            for (int kt = kt_lo; kt <= kt_hi; kt++) {
                int s0 = kt * BK, nk = T - s0 < BK ? T - s0 : BK;
                band bd;
                band_of(&bd, t0, nr, s0, nk, p->w);
                band_gemm_set(&bd, nr, dh, Q, dhp, Ktb + (size_t)s0 * dh, S);
                if (!tile_full(t0, t1, s0, p->w))  // −∞ where the window hides the key
                    for (int r = 0; r < nr; r++) row_max(S + (size_t)r * BK, &bd, r, t0 + r, s0, p->w, 0);
                if (need_ds) band_gemm_set(&bd, nr, dv, G, dvp, Vtb + (size_t)s0 * dv, dP);
                for (int r = 0; r < nr; r++) {
                    float *Sr = S + (size_t)r * BK, *dPr = dP + (size_t)r * BK;
                    vf M = vset1(m[r]), L = vset1(L2[r]), Dv = vset1(Da[r]), acc = vset1(0);
                    vf dx = vset1(0), hx = vset1(0);
                    int c0 = bd.c0[r / RG], c1 = bd.c1[r / RG];
                    for (int v = 0; v < NVK; v++) {
                        if (v < c0 || v > c1) {  // outside the group's keys: zeros for the products
                            vst(Sr + v * VL, vset1(0));
                            vst(dPr + v * VL, vset1(0));
                            continue;
                        }
                        vf x = (vld(Sr + v * VL) - M) - L;
                        vf e = vexp(x);
                        vst(Sr + v * VL, e);  // S → P
                        if (!need_ds) continue;
                        vf dp = vld(dPr + v * VL), ds = e * (dp - Dv);
                        if (nd.need_dls) {
                            vf xf = vmax_keep(vset1(-1e4f), x);  // −∞ → finite (P = 0 there)
                            acc = vfma(ds, xf, acc);
                            dx = vfma(e, dp, dx), hx = vfma(e, xf, hx);
                        }
                        vst(dPr + v * VL, ds);  // dP → dS
                    }
                    if (nd.need_dls) dl += hsum(acc), Dx[r] += hsum(dx), Hx[r] += hsum(hx);
                }
                // dV += Pᵀ dO, dK += dSᵀ Q per group of RG keys, over the query rows that see them.
                for (int k0 = 0; k0 < nk && (nd.need_dv || nd.need_dk); k0 += RG) {
                    int kr = nk - k0 < RG ? nk - k0 : RG, rlo, rhi;
                    rows_seeing(s0 + k0, s0 + k0 + kr - 1, t0, nr, p->w, &rlo, &rhi);
                    if (rlo > rhi) continue;
                    if (nd.need_dv)
                        gemm_acc(kr, dvp, rhi - rlo + 1, S + (size_t)rlo * BK + k0, 1, BK, G + (size_t)rlo * dvp,
                                 dvp, dVp + (size_t)(s0 + k0) * dvp, dvp);
                    if (nd.need_dk)
                        gemm_acc(kr, dhp, rhi - rlo + 1, dP + (size_t)rlo * BK + k0, 1, BK, Q + (size_t)rlo * dhp,
                                 dhp, dKp + (size_t)(s0 + k0) * dhp, dhp);
                }
                if (nd.need_dq)  // dQ += dS K per group of query rows, over the keys they see
                    for (int g = 0; g < bd.n; g++) {
                        if (bd.lo[g] > bd.hi[g]) continue;
                        int r0 = g * RG, rows = nr - r0 < RG ? nr - r0 : RG;
                        gemm_acc(rows, dhp, bd.hi[g] - bd.lo[g] + 1, dP + (size_t)r0 * BK + bd.lo[g], BK, 1,
                                 Krb + (size_t)(s0 + bd.lo[g]) * dhp, dhp, dQt + (size_t)r0 * dhp, dhp);
                    }
            }
            if (nd.need_dq) memcpy(dQa + (bh * p->Tq + t0) * dhp, dQt, (size_t)nr * dhp * F4);
            // dℓ with D replaced by Dx = Σ_s P·dP, consistent with this P and dP: the dS
            // used above is P ⊙ (dP − D); P ⊙ (dP − Dx) adds (D − Dx)·Σ_s P·(S − lse) per row.
            // Σ_s dS = 0 then holds to rounding, which the shift by lse relies on; with
            // the float dot product D alone, dℓ's error grew 20–400× (measured).
            if (nd.need_dls)
                for (int r = 0; r < nr; r++) dl += ((double)Da[r] - Dx[r]) * Hx[r];
        }
        if (nd.need_dls) dls[h - h_lo] = dl;
    }
}

// Post-pass over (b, block of positions): dq += Rᵀ N'(scale·dQ); dk += Rᵀ N'(Σ dK
// partials) (Q carried the scale: ∂z/∂k̂ = scale·q̂ = Q); dv += Σ dV partials.
static void bwd_post(const plan *p, char *w, float *dq, float *dk, float *dv, const float *q,
                     const float *k, long pos0, bwd_need nd) {
    const double *sc = (const double *)(w + p->sc), *theta = (const double *)(w + p->theta);
    const double *lo = (const double *)(w + p->lotab);
    const float *dQa = (const float *)(w + p->dqa), *dKp = (const float *)(w + p->dkp);
    const float *dVp = (const float *)(w + p->dvp_);
    int B = p->B, T = p->T, Hq = p->Hq, Hkv = p->Hkv, dh = p->dh, dv_ = p->dv;
    int dhp = p->dhp, dvp = p->dvp, ns = p->nsplit;
#pragma omp parallel num_threads(p->nthr)
    {
        double *rw = (double *)(w + p->thr + (size_t)omp_get_thread_num() * p->thr_bytes);
        double *hi = rw, *cs = hi + 2 * (p->half + 1), *y = cs + 2 * (p->half + 1), *dy = y + dh;
#pragma omp for schedule(static)
        for (long task = 0; task < (long)B * p->nblk; task++) {
            int b = (int)(task / p->nblk), blk = (int)(task % p->nblk), t_lo, t_hi, off;
            block_rows(p, pos0, blk, &t_lo, &t_hi, &off);
            rope_block(p, p->pb + (long)blk * RB, theta, hi);
            for (int t = t_lo; t < t_hi; t++, off++) {
                rope_row(p, hi, lo, off, cs);
                if (nd.need_dq)
                    for (int h = 0; h < Hq; h++) {
                        size_t ri = ((size_t)b * T + t) * Hq + h;
                        const float *G = dQa + (((size_t)b * Hq + h) * p->Tq + t) * dhp;
                        // x̂ and ‖·‖ only for cosine mode's normalisation
                        double nrm = p->cosine ? scored_row(p, cs, q + ri * dh, y) : 1.0, s = sc[h];
                        for (int i = 0; i < dh; i++) dy[i] = s * G[i];
                        unscore_row(p, cs, y, nrm, dy, dq + ri * dh);
                    }
                for (int j = 0; j < Hkv; j++) {
                    size_t ri = ((size_t)b * T + t) * Hkv + j, hj = (size_t)b * Hkv + j;
                    if (nd.need_dk) {
                        double nrm = p->cosine ? scored_row(p, cs, k + ri * dh, y) : 1.0;
                        for (int i = 0; i < dh; i++) dy[i] = 0;
                        for (int r = 0; r < ns; r++) {
                            const float *Gk = dKp + ((hj * ns + r) * p->Tk + t) * dhp;
                            for (int i = 0; i < dh; i++) dy[i] += Gk[i];
                        }
                        unscore_row(p, cs, y, nrm, dy, dk + ri * dh);
                    }
                    if (nd.need_dv) {
                        float *dvd = dv + ri * dv_;
                        for (int i = 0; i < dv_; i++) {
                            float s = 0;
                            for (int r = 0; r < ns; r++) s += dVp[((hj * ns + r) * p->Tk + t) * dvp + i];
                            dvd[i] += s;
                        }
                    }
                }
            }
        }
    }
}

int fcpu_attention_bwd(float *dq, float *dk, float *dv, float *dlogscale, const float *dout,
                       const float *o, const float *stats, const float *q, const float *k,
                       const float *v, const float *logscale, int B, int T, const phax_attn_cfg *c,
                       void *ws) {
    if (check_args(B, T, c, logscale)) return PHAX_ERR;
    if (B == 0 || T == 0) return PHAX_OK;
    if (!ws) return phax_fail("attention: workspace is NULL");
    if (!o || !stats) return phax_fail("attention: the backward needs the forward's o and stats");
    plan p;
    plan_common(&p, B, T, c, nthreads_of(0));
    plan_bwd(&p, B);
    char *w = align_ws(ws);
    bwd_need nd = {.need_dq = dq != NULL, .need_dk = dk != NULL, .need_dv = dv != NULL,
                   .need_dls = p.cosine && dlogscale != NULL};
    if (!nd.need_dq && !nd.need_dk && !nd.need_dv && !nd.need_dls) return PHAX_OK;
    setup_tables(&p, w, logscale, c);
    pre_in in = {.q = q, .k = k, .v = v, .dout = dout, .o = o, .pos0 = c->pos0};
    prepass(&p, w, &in, 1);
    float *dKp = (float *)(w + p.dkp), *dVp = (float *)(w + p.dvp_);
    double *dls = (double *)(w + p.dls);
    long nunits = (long)B * p.Hkv * p.nsplit;
#pragma omp parallel num_threads(p.nthr)
    {
        char *tw = w + p.thr + (size_t)omp_get_thread_num() * p.thr_bytes;
#pragma omp for schedule(dynamic, 1)
        for (long u = 0; u < nunits; u++) {
            int r = (int)(u % p.nsplit), bj = (int)(u / p.nsplit), b = bj / p.Hkv, j = bj % p.Hkv;
            int h_lo = p.nsplit == 1 ? j * p.g : j * p.g + r, h_hi = p.nsplit == 1 ? h_lo + p.g : h_lo + 1;
            bwd_task(&p, w, tw, b, j, h_lo, h_hi, stats, dKp + (size_t)u * p.Tk * p.dhp,
                     dVp + (size_t)u * p.Tk * p.dvp, dls + (size_t)b * p.Hq + h_lo, nd);
        }
    }
    if (nd.need_dq || nd.need_dk || nd.need_dv) bwd_post(&p, w, dq, dk, dv, q, k, c->pos0, nd);
    // dℓ_h = s_h·Σ dz·(q̂·k̂) = Σ_t Σ_s dz_ts (S_ts − lse_t): the shift by lse_t is free
    // (Σ_s dz_ts = 0) and keeps the terms small.
    if (nd.need_dls)
        for (int h = 0; h < p.Hq; h++) {
            if (!(logscale[h] < PHAX_COSINE_MAX_LOGSCALE)) continue;
            double s = 0;
            for (int b = 0; b < B; b++) s += dls[(size_t)b * p.Hq + h];
            dlogscale[h] += (float)s;
        }
    return PHAX_OK;
}
