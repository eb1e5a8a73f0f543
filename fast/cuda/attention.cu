// fast/cuda attention: float32, the function of ref_attention_* (docs/spec.md §2.7: causal GQA,
// window w with 0 = full, dot or cosine scores with the clamped learnable scale, RoPE
// rotate-half from pos0) with fast/cpu's contract (phax/fcpu_attention.h), computed the
// FlashAttention-2 way: no T×T matrix ever exists, memory is linear in T.
//
//   prep     a thread per (b, t, head) row: the scored vectors q̂ = s_h·N(R q), k̂ = N(R k) in
//            double (R the rotation from a (cos, sin) table built once a call, N the cosine
//            normalisation, s_h = 1/√dh or e^min(ℓ_h, log 100)), stored as float
//   forward  a warp per query row, AT_ROWS rows of one head a block. Key tiles of AT_KT keys
//            (only those the window lets the block's rows see: whole tiles outside it are
//            never loaded) go to shared memory; lane j scores key j of the tile, the warp
//            takes the tile's max and sum by butterflies, then every lane adds p_j·v_j into
//            its value columns (c = lane + 32 i). Online softmax: O·e^(m_old − m_new) + P V.
//            Writes o, the row statistics (m, log l) and lse = m + log l.
//   backward from (m, log l): P = e^((S − m) − log l), dP = dO·v, dS = P (dP − D), D = dO·o.
//            Two kernels, each output row owned by one warp, so there are no atomics and the
//            bits do not depend on the schedule: dQ̂ (a warp per query row, as the forward;
//            also Σ_s dS·(S − lse) for dℓ) and dK̂, dV (a warp per key row, looping over the
//            group's query heads and the query tiles that see the key). The scores are
//            computed twice (once per kernel): the price of determinism without atomics.
//   post     a thread per row maps dQ̂, dK̂ back through the normalisation and the rotation
//            (double) and adds into dq, dk; dℓ_h sums its rows' doubles in order.
//
// Per-lane accumulators hold head dims up to 32·AT_NCH = 256; the shared memory of a block
// (at_smem) must fit the default 48 KiB: dh = dv = 128 takes 36 KiB (forward), 40 KiB (dQ), 41 KiB
// (dK, dV).
#include <limits.h>
#include <math.h>

#include "cuda_common.cuh"

#define AT_ROWS 8  // warps a block: query rows (forward, dQ) or key rows (dK, dV)
#define AT_THREADS (32 * AT_ROWS)
#define AT_KT 32   // keys (forward, dQ) or queries (dK, dV) per shared tile: one per lane
#define AT_NCH 8   // accumulators a lane: columns lane + 32 i, i < 8
#define AT_MAXD (32 * AT_NCH)
#define AT_SMEM_MAX 49152
#define AT_EW 128  // threads a block of the row kernels
#define FULL 0xffffffffu

typedef struct {
    int B, T, Hq, Hkv, g, dh, dv, half, W, rope, cosine;  // W: window, 0 = full causal
    long pos0;
} at_geom;

static at_geom at_geom_of(int B, int T, const phax_attn_cfg *c) {
    at_geom G;
    G.B = B, G.T = T, G.Hq = c->Hq, G.Hkv = c->Hkv, G.g = c->Hq / c->Hkv, G.dh = c->dh, G.dv = c->dv;
    G.half = c->dh / 2, G.W = c->window, G.rope = c->rope, G.cosine = c->score == PHAX_SCORE_COSINE;
    G.pos0 = c->pos0;
    return G;
}

// Shared-memory floats of each kernel; rows a lane reads across (one row per lane) are padded
// to an odd stride, so the 32 lanes hit 32 banks.
enum { AT_K_FWD, AT_K_DQ, AT_K_DKV };
static size_t at_smem(int kind, int dh, int dv) {
    size_t ldk = (size_t)(dh | 1), ldv = (size_t)(dv | 1);
    switch (kind) {
    case AT_K_FWD: return (AT_KT * ldk + (size_t)AT_KT * dv + (size_t)AT_ROWS * dh) * sizeof(float);
    case AT_K_DQ: return (AT_KT * ldk + AT_KT * ldv + (size_t)AT_ROWS * (dh + dv)) * sizeof(float);
    default: return (AT_KT * ldk + AT_KT * ldv + 3 * AT_KT + (size_t)AT_ROWS * (dh + dv)) * sizeof(float);
    }
}

// Workspace: q̂ (B, Hq, T, dh), k̂ (B, Hkv, T, dh), the (cos, sin) table (T, dh) doubles; the
// backward adds dQ̂ and dK̂ (shapes of q̂, k̂), D (B, Hq, T) and dℓ's row terms (B, Hq, T) doubles.
typedef struct {
    size_t qh, kh, cs, dqh, dkh, D, dls, total;
} at_ws;

static at_ws at_layout(const at_geom &G, int bwd) {
    at_ws w = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t nq = (size_t)G.B * G.Hq * G.T, nk = (size_t)G.B * G.Hkv * G.T, o = 0;
    w.qh = o, o += fcuda_align16(nq * G.dh * sizeof(float));
    w.kh = o, o += fcuda_align16(nk * G.dh * sizeof(float));
    w.cs = o, o += G.rope ? fcuda_align16((size_t)G.T * G.dh * sizeof(double)) : 0;
    if (bwd) {
        w.dqh = o, o += fcuda_align16(nq * G.dh * sizeof(float));
        w.dkh = o, o += fcuda_align16(nk * G.dh * sizeof(float));
        w.D = o, o += fcuda_align16(nq * sizeof(float));
        w.dls = o, o += fcuda_align16(nq * sizeof(double));
    }
    w.total = o;
    return w;
}

// --- row arithmetic (double) ----------------------------------------------------------------------
// Per-head logit scale: 1/√dh (dot) or e^min(ℓ_h, log 100) (cosine).
__device__ static double at_scale(const at_geom &G, const float *logscale, int h) {
    if (!G.cosine) return 1.0 / sqrt((double)G.dh);
    double l = logscale[h];
    return exp(l < PHAX_COSINE_MAX_LOGSCALE ? l : PHAX_COSINE_MAX_LOGSCALE);
}

// (R x)_i of row x at table row cs (rotate-half pairs (i, i + dh/2)); x itself without RoPE.
__device__ static double at_rot(const at_geom &G, const float *x, const double *cs, int i) {
    if (!G.rope) return x[i];
    int H = G.half;
    if (i < H) return (double)x[i] * cs[i] - (double)x[i + H] * cs[H + i];
    return (double)x[i] * cs[i - H] + (double)x[i - H] * cs[i];
}

// The clamped norm of R x (1 for dot scores): max(‖R x‖, ε) as fmax (NaN gives ε).
__device__ static double at_norm(const at_geom &G, const float *x, const double *cs) {
    if (!G.cosine) return 1.0;
    double s = 0;
    for (int i = 0; i < G.dh; i++) {
        double y = at_rot(G, x, cs, i);
        s += y * y;
    }
    double r = sqrt(s);
    return r > PHAX_COSINE_NORM_EPS ? r : PHAX_COSINE_NORM_EPS;
}

// cs (T, dh): row t = (cos, sin)((pos0 + t)·θ_i), θ_i = base^(−2i/dh), i < dh/2.
static __global__ void at_table_k(double *cs, int T, int dh, double base, long pos0) {
    int half = dh / 2;
    size_t n = (size_t)T * half;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        int t = (int)(e / half), i = (int)(e % half);
        double a = (double)(pos0 + t) * pow(base, -2.0 * i / dh);
        cs[(size_t)t * dh + i] = cos(a), cs[(size_t)t * dh + half + i] = sin(a);
    }
}

// Row e of the row kernels (prep, post): (b, t) and head r of Hq query heads then Hkv kv heads;
// xo: the row's offset in q or k (B, T, H, dh), so: in the scored layout (B, H, T, dh), f: the
// logit scale (q rows) or 1, c: the rotation's table row.
typedef struct {
    bool is_q;
    size_t xo, so;
    double f;
    const double *c;
} at_row;

__device__ static at_row at_row_of(const at_geom &G, size_t e, const float *logscale, const double *cs) {
    int nh = G.Hq + G.Hkv, r = (int)(e % nh);
    size_t bt = e / nh;
    int b = (int)(bt / G.T), t = (int)(bt % G.T);
    at_row w;
    w.is_q = r < G.Hq;
    int h = w.is_q ? r : r - G.Hq, H = w.is_q ? G.Hq : G.Hkv;
    w.xo = (bt * H + h) * G.dh, w.so = (((size_t)b * H + h) * G.T + t) * G.dh;
    w.f = w.is_q ? at_scale(G, logscale, h) : 1.0;
    w.c = G.rope ? cs + (size_t)t * G.dh : NULL;
    return w;
}

// The scored rows: q̂ = s_h·N(R q) into qh (B, Hq, T, dh), k̂ = N(R k) into kh (B, Hkv, T, dh).
static __global__ void at_prep_k(float *qh, float *kh, const float *q, const float *k, const float *logscale,
                                 const double *cs, at_geom G) {
    size_t n = (size_t)G.B * G.T * (G.Hq + G.Hkv);
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        at_row w = at_row_of(G, e, logscale, cs);
        const float *x = (w.is_q ? q : k) + w.xo;
        float *y = (w.is_q ? qh : kh) + w.so;
        const double *c = w.c;
        double f = w.f / at_norm(G, x, c);
        for (int i = 0; i < G.dh; i++) y[i] = (float)(at_rot(G, x, c, i) * f);
    }
}

// D = dO·o per (b, query head, t), in double, stored as float: (B, Hq, T).
static __global__ void at_dvec_k(float *D, const float *dout, const float *o, at_geom G) {
    size_t n = (size_t)G.B * G.T * G.Hq;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        int h = (int)(e % G.Hq);
        size_t bt = e / G.Hq;
        int b = (int)(bt / G.T), t = (int)(bt % G.T);
        const float *a = dout + e * G.dv, *c = o + e * G.dv;
        double s = 0;
        for (int i = 0; i < G.dv; i++) s += (double)a[i] * c[i];
        D[((size_t)b * G.Hq + h) * G.T + t] = (float)s;
    }
}

// --- warp helpers -----------------------------------------------------------------------------------
__device__ __forceinline__ float at_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL, v, o));
    return v;
}
__device__ __forceinline__ double at_warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    return v;
}
// Σ_c a[c]·b[c] in float, in order (a plain float32 dot product).
__device__ __forceinline__ float at_dot(const float *a, const float *b, int n) {
    float s = 0;
    for (int c = 0; c < n; c++) s += a[c] * b[c];
    return s;
}
// Is key s visible to query t? (0 ≤ t − s < W, W = 0: any s ≤ t.)
__device__ __forceinline__ bool at_sees(const at_geom &G, int t, int s) {
    return s <= t && (G.W == 0 || (long)t - s < G.W);
}
// The first key a query tile starting at t0 can see.
__device__ __forceinline__ int at_first_key(const at_geom &G, int t0) {
    return G.W > 0 && (long)t0 - G.W + 1 > 0 ? t0 - G.W + 1 : 0;
}

// --- forward ----------------------------------------------------------------------------------------
// grid (⌈T/AT_ROWS⌉, Hq, B), AT_THREADS threads: warp w owns query row t = blockIdx.x·AT_ROWS + w.
static __global__ void __launch_bounds__(AT_THREADS)
    at_fwd_k(float *o, float *lse, float *stats, const float *qh, const float *kh, const float *v, at_geom G) {
    PHAX_DYN_SMEM(float, sm);
    const int dh = G.dh, dv = G.dv, T = G.T, ldk = dh | 1;
    float *sk = sm, *sv = sk + AT_KT * ldk, *sq = sv + AT_KT * dv;
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int b = blockIdx.z, h = blockIdx.y, j = h / G.g, t0 = blockIdx.x * AT_ROWS, t = t0 + w;
    int tl = t0 + AT_ROWS - 1 < T - 1 ? t0 + AT_ROWS - 1 : T - 1;
    bool row = t < T;
    size_t bh = (size_t)b * G.Hq + h;
    float *myq = sq + w * dh;
    for (int c = lane; c < dh; c += 32) myq[c] = row ? qh[(bh * T + t) * dh + c] : 0.0f;
    const float *kb = kh + ((size_t)b * G.Hkv + j) * T * dh;
    const float *vb = v + (size_t)b * T * G.Hkv * dv + (size_t)j * dv;  // key s at vb + s·Hkv·dv
    float m = -INFINITY, l = 0, acc[AT_NCH];
    for (int i = 0; i < AT_NCH; i++) acc[i] = 0;
    for (int s0 = at_first_key(G, t0); s0 <= tl; s0 += AT_KT) {
        int nk = tl - s0 + 1 < AT_KT ? tl - s0 + 1 : AT_KT;
        __syncthreads();  // every warp is done with the previous tile
        for (int e = threadIdx.x; e < nk * dh; e += AT_THREADS) sk[(e / dh) * ldk + e % dh] = kb[(size_t)s0 * dh + e];
        for (int e = threadIdx.x; e < nk * dv; e += AT_THREADS)
            sv[e] = vb[(size_t)(s0 + e / dv) * G.Hkv * dv + e % dv];
        __syncthreads();
        bool vis = row && lane < nk && at_sees(G, t, s0 + lane);
        float z = vis ? at_dot(myq, sk + lane * ldk, dh) : -INFINITY;
        float mn = fmaxf(m, at_warp_max(z));
        if (mn == -INFINITY) continue;  // nothing visible yet (the same on every lane)
        float al = expf(m - mn), p = vis ? expf(z - mn) : 0.0f;
        l = l * al + fcuda_warp_sum(p);
        for (int i = 0; i < AT_NCH; i++) acc[i] *= al;
        for (int jj = 0; jj < nk; jj++) {
            float pj = __shfl_sync(FULL, p, jj);
            for (int i = 0; i < AT_NCH; i++) {
                int c = lane + 32 * i;
                if (c < dv) acc[i] += pj * sv[jj * dv + c];
            }
        }
        m = mn;
    }
    if (!row) return;
    float inv = 1.0f / l;
    float *od = o + (((size_t)b * T + t) * G.Hq + h) * dv;
    for (int i = 0; i < AT_NCH; i++) {
        int c = lane + 32 * i;
        if (c < dv) od[c] = acc[i] * inv;
    }
    if (lane == 0) {
        if (lse) lse[bh * T + t] = (float)((double)m + log((double)l));
        if (stats) stats[2 * (bh * T + t)] = m, stats[2 * (bh * T + t) + 1] = (float)log((double)l);
    }
}

// --- backward: dQ̂ and dℓ's row terms ------------------------------------------------------------------
// The forward's grid and rows. Per visible key: x = (S − m) − log l, P = e^x, dP = dO·v,
// dS = P (dP − D); dQ̂ += dS k̂; dls row term += dS·x (x = S − lse: Σ_s dS = 0 makes the shift free).
static __global__ void __launch_bounds__(AT_THREADS)
    at_dq_k(float *dqh, double *dls, const float *qh, const float *kh, const float *v, const float *dout,
            const float *stats, const float *D, at_geom G) {
    PHAX_DYN_SMEM(float, sm);
    const int dh = G.dh, dv = G.dv, T = G.T, ldk = dh | 1, ldv = dv | 1;
    float *sk = sm, *sv = sk + AT_KT * ldk, *sq = sv + AT_KT * ldv, *sdo = sq + AT_ROWS * dh;
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int b = blockIdx.z, h = blockIdx.y, j = h / G.g, t0 = blockIdx.x * AT_ROWS, t = t0 + w;
    int tl = t0 + AT_ROWS - 1 < T - 1 ? t0 + AT_ROWS - 1 : T - 1;
    bool row = t < T;
    size_t bh = (size_t)b * G.Hq + h, r = bh * T + (row ? t : 0);
    float *myq = sq + w * dh, *mydo = sdo + w * dv;
    for (int c = lane; c < dh; c += 32) myq[c] = row ? qh[r * dh + c] : 0.0f;
    for (int c = lane; c < dv; c += 32) mydo[c] = row ? dout[(((size_t)b * T + t) * G.Hq + h) * dv + c] : 0.0f;
    float mt = row ? stats[2 * r] : 0.0f, lg = row ? stats[2 * r + 1] : 0.0f, Dt = row ? D[r] : 0.0f;
    const float *kb = kh + ((size_t)b * G.Hkv + j) * T * dh;
    const float *vb = v + (size_t)b * T * G.Hkv * dv + (size_t)j * dv;
    float acc[AT_NCH];
    for (int i = 0; i < AT_NCH; i++) acc[i] = 0;
    double dl = 0;
    for (int s0 = at_first_key(G, t0); s0 <= tl; s0 += AT_KT) {
        int nk = tl - s0 + 1 < AT_KT ? tl - s0 + 1 : AT_KT;
        __syncthreads();
        for (int e = threadIdx.x; e < nk * dh; e += AT_THREADS) sk[(e / dh) * ldk + e % dh] = kb[(size_t)s0 * dh + e];
        for (int e = threadIdx.x; e < nk * dv; e += AT_THREADS)
            sv[(e / dv) * ldv + e % dv] = vb[(size_t)(s0 + e / dv) * G.Hkv * dv + e % dv];
        __syncthreads();
        float ds = 0;
        if (row && lane < nk && at_sees(G, t, s0 + lane)) {
            float x = (at_dot(myq, sk + lane * ldk, dh) - mt) - lg;
            float p = expf(x), dp = at_dot(mydo, sv + lane * ldv, dv);
            ds = p * (dp - Dt);
            dl += (double)ds * x;
        }
        for (int jj = 0; jj < nk; jj++) {
            float dsj = __shfl_sync(FULL, ds, jj);
            for (int i = 0; i < AT_NCH; i++) {
                int c = lane + 32 * i;
                if (c < dh) acc[i] += dsj * sk[jj * ldk + c];
            }
        }
    }
    dl = at_warp_sum_d(dl);
    if (!row) return;
    for (int i = 0; i < AT_NCH; i++) {
        int c = lane + 32 * i;
        if (c < dh) dqh[r * dh + c] = acc[i];
    }
    if (lane == 0) dls[r] = dl;
}

// --- backward: dK̂, dV --------------------------------------------------------------------------------
// grid (⌈T/AT_ROWS⌉, Hkv, B): warp w owns key row s = blockIdx.x·AT_ROWS + w of kv head j and
// loops over the group's query heads and the query tiles that see the block's keys; lane i
// takes query i of a tile. dK̂ += dS q̂, dV += P dO (dV added into the output: no post-pass).
static __global__ void __launch_bounds__(AT_THREADS)
    at_dkv_k(float *dkh, float *dv_out, const float *qh, const float *kh, const float *v, const float *dout,
             const float *stats, const float *D, at_geom G) {
    PHAX_DYN_SMEM(float, sm);
    const int dh = G.dh, dv = G.dv, T = G.T, ldk = dh | 1, ldv = dv | 1;
    float *sq = sm, *sdo = sq + AT_KT * ldk, *sst = sdo + AT_KT * ldv, *sk = sst + 3 * AT_KT, *svr = sk + AT_ROWS * dh;
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int b = blockIdx.z, j = blockIdx.y, s0b = blockIdx.x * AT_ROWS, s = s0b + w;
    int sl = s0b + AT_ROWS - 1 < T - 1 ? s0b + AT_ROWS - 1 : T - 1;
    long th = G.W > 0 ? (long)sl + G.W - 1 : (long)T - 1;
    int t_hi = th < T - 1 ? (int)th : T - 1;
    bool key = s < T;
    size_t rk = ((size_t)b * G.Hkv + j) * T + (key ? s : 0);
    float *myk = sk + w * dh, *myv = svr + w * dv;
    for (int c = lane; c < dh; c += 32) myk[c] = key ? kh[rk * dh + c] : 0.0f;
    for (int c = lane; c < dv; c += 32) myv[c] = key ? v[(((size_t)b * T + s) * G.Hkv + j) * dv + c] : 0.0f;
    float ak[AT_NCH], av[AT_NCH];
    for (int i = 0; i < AT_NCH; i++) ak[i] = 0, av[i] = 0;
    for (int h = j * G.g; h < (j + 1) * G.g; h++) {
        size_t bh = (size_t)b * G.Hq + h;
        for (int q0 = s0b; q0 <= t_hi; q0 += AT_KT) {
            int nq = t_hi - q0 + 1 < AT_KT ? t_hi - q0 + 1 : AT_KT;
            __syncthreads();
            for (int e = threadIdx.x; e < nq * dh; e += AT_THREADS)
                sq[(e / dh) * ldk + e % dh] = qh[(bh * T + q0) * dh + e];
            for (int e = threadIdx.x; e < nq * dv; e += AT_THREADS)
                sdo[(e / dv) * ldv + e % dv] = dout[(((size_t)b * T + q0 + e / dv) * G.Hq + h) * dv + e % dv];
            for (int e = threadIdx.x; e < nq; e += AT_THREADS) {
                size_t r = bh * T + q0 + e;
                sst[e] = stats[2 * r], sst[AT_KT + e] = stats[2 * r + 1], sst[2 * AT_KT + e] = D[r];
            }
            __syncthreads();
            float p = 0, ds = 0;
            if (key && lane < nq && at_sees(G, q0 + lane, s)) {
                float x = (at_dot(sq + lane * ldk, myk, dh) - sst[lane]) - sst[AT_KT + lane];
                float dp = at_dot(sdo + lane * ldv, myv, dv);
                p = expf(x), ds = p * (dp - sst[2 * AT_KT + lane]);
            }
            for (int jj = 0; jj < nq; jj++) {
                float pj = __shfl_sync(FULL, p, jj), dsj = __shfl_sync(FULL, ds, jj);
                for (int i = 0; i < AT_NCH; i++) {
                    int c = lane + 32 * i;
                    if (c < dh) ak[i] += dsj * sq[jj * ldk + c];
                    if (c < dv) av[i] += pj * sdo[jj * ldv + c];
                }
            }
        }
    }
    if (!key) return;
    float *dvr = dv_out ? dv_out + (((size_t)b * T + s) * G.Hkv + j) * dv : NULL;
    for (int i = 0; i < AT_NCH; i++) {
        int c = lane + 32 * i;
        if (c < dh) dkh[rk * dh + c] = ak[i];
        if (dvr && c < dv) dvr[c] += av[i];
    }
}

// --- backward: back through the normalisation and the rotation -----------------------------------------
// A thread per (b, t, head) row: dy = s_h·dQ̂ (q rows) or dK̂ (k rows); cosine: dy ← (dy − x̂ (x̂·dy))/‖R x‖
// (dy/ε where the norm is clamped); dx += Rᵀ dy (the rotation by −angle), each element rounded once.
static __global__ void at_post_k(float *dq, float *dk, const float *q, const float *k, const float *dqh,
                                 const float *dkh, const float *logscale, const double *cs, at_geom G) {
    int H = G.half;
    size_t n = (size_t)G.B * G.T * (G.Hq + G.Hkv);
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        at_row w = at_row_of(G, e, logscale, cs);
        float *dx = w.is_q ? dq : dk;
        if (!dx) continue;
        dx += w.xo;
        const float *x = (w.is_q ? q : k) + w.xo, *gr = (w.is_q ? dqh : dkh) + w.so;
        const double *c = w.c;
        double f = w.f;
        double nrm = at_norm(G, x, c), inv = 1.0 / nrm, d = 0;
        bool proj = G.cosine && nrm > PHAX_COSINE_NORM_EPS;
        if (proj)
            for (int i = 0; i < G.dh; i++) d += at_rot(G, x, c, i) * inv * (f * gr[i]);
        // dy_i of the normalised row (cosine) or of R x itself (dot).
#define AT_DY(i) (G.cosine ? (proj ? (f * gr[i] - at_rot(G, x, c, i) * inv * d) * inv : f * gr[i] * inv) : f * gr[i])
        if (G.rope) {
            for (int i = 0; i < H; i++) {
                double y1 = AT_DY(i), y2 = AT_DY(i + H);
                dx[i] += (float)(y1 * c[i] + y2 * c[H + i]);
                dx[i + H] += (float)(y2 * c[i] - y1 * c[H + i]);
            }
        } else {
            for (int i = 0; i < G.dh; i++) dx[i] += (float)AT_DY(i);
        }
#undef AT_DY
    }
}

// dℓ_h += Σ_b Σ_t (row terms), in order, where ℓ_h is below the clamp (above it the gradient is 0).
static __global__ void at_dls_k(float *dlogscale, const double *dls, const float *logscale, at_geom G) {
    int h = blockIdx.x * blockDim.x + threadIdx.x;
    if (h >= G.Hq || !(logscale[h] < PHAX_COSINE_MAX_LOGSCALE)) return;
    double s = 0;
    for (int b = 0; b < G.B; b++)
        for (int t = 0; t < G.T; t++) s += dls[((size_t)b * G.Hq + h) * G.T + t];
    dlogscale[h] += (float)s;
}

// --- entries ------------------------------------------------------------------------------------------
static int at_args(const char *op, int B, int T, const phax_attn_cfg *c, const float *logscale) {
    if (phax_attn_cfg_check(c)) return PHAX_ERR;
    if (B < 0 || T < 0) return phax_fail("cuda %s: B=%d T=%d must be >= 0", op, B, T);
    if (c->score == PHAX_SCORE_COSINE && !logscale) return phax_fail("cuda %s: cosine scores need logscale", op);
    if (c->dh > AT_MAXD || c->dv > AT_MAXD)
        return phax_fail("cuda %s: head dims dh %d, dv %d: this kernel takes at most %d", op, c->dh, c->dv, AT_MAXD);
    size_t sm = at_smem(AT_K_DKV, c->dh, c->dv);
    if (sm > AT_SMEM_MAX)
        return phax_fail("cuda %s: head dims dh %d, dv %d need %zu bytes of shared memory a block, more than %d", op,
                         c->dh, c->dv, sm, AT_SMEM_MAX);
    return PHAX_OK;
}

extern "C" size_t fcuda_attention_fwd_ws(int B, int T, const phax_attn_cfg *c) {
    if (phax_attn_cfg_check(c) || B < 0 || T < 0) return 0;
    return at_layout(at_geom_of(B, T, c), 0).total + 16;
}
extern "C" size_t fcuda_attention_bwd_ws(int B, int T, const phax_attn_cfg *c) {
    if (phax_attn_cfg_check(c) || B < 0 || T < 0) return 0;
    return at_layout(at_geom_of(B, T, c), 1).total + 16;
}

// The table and the scored rows, into ws (laid out by L).
static int at_prepare(const at_geom &G, const at_ws &L, char *ws, const float *q, const float *k,
                      const float *logscale, const phax_attn_cfg *c, cudaStream_t s, const char *op) {
    double *cs = G.rope ? reinterpret_cast<double *>(ws + L.cs) : NULL;
    if (G.rope) {
        PHAX_LAUNCH(at_table_k, fcuda_ew_blocks((size_t)G.T * G.half, AT_EW), AT_EW, 0, s, cs, G.T, G.dh, c->rope_base,
                    G.pos0);
        if (fcuda_check(op)) return PHAX_ERR;
    }
    size_t rows = (size_t)G.B * G.T * (G.Hq + G.Hkv);
    PHAX_LAUNCH(at_prep_k, fcuda_ew_blocks(rows, AT_EW), AT_EW, 0, s, reinterpret_cast<float *>(ws + L.qh),
                reinterpret_cast<float *>(ws + L.kh), q, k, logscale, (const double *)cs, G);
    return fcuda_check(op);
}

static char *at_align(void *ws) { return reinterpret_cast<char *>(((uintptr_t)ws + 15) & ~(uintptr_t)15); }

extern "C" int fcuda_attention_fwd(float *o, float *lse, float *stats, const float *q, const float *k,
                                    const float *v, const float *logscale, int B, int T, const phax_attn_cfg *c,
                                    void *ws, void *stream) {
    const char *op = "attention_fwd";
    if (at_args(op, B, T, c, logscale)) return PHAX_ERR;
    if (B == 0 || T == 0) return PHAX_OK;
    if (!ws) return phax_fail("cuda %s: no workspace", op);
    at_geom G = at_geom_of(B, T, c);
    at_ws L = at_layout(G, 0);
    char *w = at_align(ws);
    cudaStream_t s = fcuda_stream(stream);
    if (at_prepare(G, L, w, q, k, logscale, c, s, op)) return PHAX_ERR;
    dim3 grid((unsigned)((T + AT_ROWS - 1) / AT_ROWS), (unsigned)G.Hq, (unsigned)B);
    PHAX_LAUNCH(at_fwd_k, grid, AT_THREADS, at_smem(AT_K_FWD, G.dh, G.dv), s, o, lse, stats,
                (const float *)(w + L.qh), (const float *)(w + L.kh), v, G);
    return fcuda_check(op);
}

extern "C" int fcuda_attention_bwd(float *dq, float *dk, float *dv, float *dlogscale, const float *dout,
                                    const float *o, const float *stats, const float *q, const float *k,
                                    const float *v, const float *logscale, int B, int T, const phax_attn_cfg *c,
                                    void *ws, void *stream) {
    const char *op = "attention_bwd";
    if (at_args(op, B, T, c, logscale)) return PHAX_ERR;
    if (B == 0 || T == 0) return PHAX_OK;
    if (!ws) return phax_fail("cuda %s: no workspace", op);
    if (!o || !stats) return phax_fail("cuda %s: the backward needs the forward's o and stats", op);
    at_geom G = at_geom_of(B, T, c);
    int need_dls = G.cosine && dlogscale;
    if (!dq && !dk && !dv && !need_dls) return PHAX_OK;
    at_ws L = at_layout(G, 1);
    char *w = at_align(ws);
    cudaStream_t s = fcuda_stream(stream);
    if (at_prepare(G, L, w, q, k, logscale, c, s, op)) return PHAX_ERR;
    float *qh = reinterpret_cast<float *>(w + L.qh), *kh = reinterpret_cast<float *>(w + L.kh);
    float *dqh = reinterpret_cast<float *>(w + L.dqh), *dkh = reinterpret_cast<float *>(w + L.dkh);
    float *D = reinterpret_cast<float *>(w + L.D);
    double *dls = reinterpret_cast<double *>(w + L.dls);
    PHAX_LAUNCH(at_dvec_k, fcuda_ew_blocks((size_t)B * T * G.Hq, AT_EW), AT_EW, 0, s, D, dout, o, G);
    if (fcuda_check(op)) return PHAX_ERR;
    unsigned nt = (unsigned)((T + AT_ROWS - 1) / AT_ROWS);
    if (dq || need_dls) {
        PHAX_LAUNCH(at_dq_k, dim3(nt, (unsigned)G.Hq, (unsigned)B), AT_THREADS, at_smem(AT_K_DQ, G.dh, G.dv), s, dqh,
                    dls, (const float *)qh, (const float *)kh, v, dout, stats, (const float *)D, G);
        if (fcuda_check(op)) return PHAX_ERR;
    }
    if (dk || dv) {
        PHAX_LAUNCH(at_dkv_k, dim3(nt, (unsigned)G.Hkv, (unsigned)B), AT_THREADS, at_smem(AT_K_DKV, G.dh, G.dv), s,
                    dkh, dv, (const float *)qh, (const float *)kh, v, dout, stats, (const float *)D, G);
        if (fcuda_check(op)) return PHAX_ERR;
    }
    if (dq || dk) {
        size_t rows = (size_t)B * T * (G.Hq + G.Hkv);
        PHAX_LAUNCH(at_post_k, fcuda_ew_blocks(rows, AT_EW), AT_EW, 0, s, dq, dk, q, k, (const float *)dqh,
                    (const float *)dkh, logscale, G.rope ? (const double *)(w + L.cs) : (const double *)NULL, G);
        if (fcuda_check(op)) return PHAX_ERR;
    }
    if (need_dls) {
        PHAX_LAUNCH(at_dls_k, (unsigned)((G.Hq + 31) / 32), 32u, 0, s, dlogscale, (const double *)dls, logscale, G);
        if (fcuda_check(op)) return PHAX_ERR;
    }
    return PHAX_OK;
}
