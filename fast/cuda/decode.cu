// fast/cuda per-token decoding and prefill (phax/fcuda_decode.h): the models of ref/model.c and
// ref/model_branches.c evaluated a pass of R tokens at a time on the device, carrying their
// state — fast/cpu/decode.c's structure, layer by layer, with the device's kernels:
//   * the products (projections, FFNs, the head) on cuBLAS through fcuda_linear_fwd — R rows
//     read each weight once;
//   * norms, activations, RoPE and the mix through the tier's own entries;
//   * attend_k: attention of one (query head, row) over its visible keys, an online softmax
//     in double (tiles of ATT_THREADS keys: scores, the tile's max and sum, the output
//     rescaled), deterministic (fixed reduction order, no atomics);
//   * gss_scan_k / mlstm_scan_k / gdn_scan_k: the recurrences token by token inside the pass, one
//     block per GSS channel / mLSTM head / Gated DeltaNet head, states in double.
// Positions and windows are fast/cpu's: row r of a pass is at pos0 + r and sees keys
// max(0, pos − w + 1) … pos; keys before the pass come from the ring (slot p % cap), the
// pass's own from its buffers, and the pass's last min(R, cap) keys enter the ring afterwards.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"
#include "phax/fcuda_decode.h"
#include "../model/decode_shared.h"
#include "phax/model_plan.h"
#include "phax/numerics.h"

#define MAX_SUB PHAX_PLAN_MAX_SUB
#define ATT_THREADS 32  // keys per tile of attend_k, and its block: a warp (the test rows, T ≤ 61, cross tiles)
#define ATT_MAX_DH 2048  // q and the output accumulators of one head sit in shared memory
#define REC_THREADS 128  // mlstm_scan_k's block
#define EW_THREADS 256

// --- kernels -----------------------------------------------------------------------------------

// Each row of x (rows, w) scaled to unit norm, the norm clamped below (§2.7); a 32-thread block
// per row, the norm in double.
static __global__ void unit_rows_k(float *__restrict__ x, int w) {
    __shared__ double red[32];
    float *v = x + (size_t)blockIdx.x * w;
    double s = 0;
    for (int i = threadIdx.x; i < w; i += blockDim.x) s += (double)v[i] * v[i];
    s = fcuda_block_sum_d(s, red);
    const double nrm = fmax(sqrt(s), PHAX_COSINE_NORM_EPS);
    for (int i = threadIdx.x; i < w; i += blockDim.x) v[i] = (float)(v[i] / nrm);
}

// The key (or value) row of position p for kv head j: the pass's row p − pos0 when p ≥ pos0,
// else the ring's slot p % cap.
__device__ __forceinline__ const float *kv_row(const float *pass, const float *ring, long p, long pos0, int j,
                                               int kd, int dh, int cap) {
    if (p >= pos0) return pass + (size_t)(p - pos0) * kd + (size_t)j * dh;
    return ring + ((size_t)j * cap + (size_t)(p % cap)) * dh;
}

// o (R, Hq·dh): row r = blockIdx.y, query head h = blockIdx.x attends to positions first … pos
// (pos = pos0 + r) with weights softmax(scale·q̃·k̃), in double. Shared: q (dh), the output
// accumulators (dh), the tile's weights (blockDim), 32 for the reductions.
static __global__ void attend_k(float *__restrict__ o, const float *__restrict__ q, const float *__restrict__ kp,
                                const float *__restrict__ vp, const float *__restrict__ kc,
                                const float *__restrict__ vc, const float *__restrict__ logscale, int Hq, int Hkv,
                                int dh, int cap, long pos0, int window) {
    PHAX_DYN_SMEM(double, sm);
    double *qs = sm, *acc = sm + dh, *p = acc + dh, *red = p + blockDim.x;
    const int h = blockIdx.x, r = blockIdx.y, j = h / (Hq / Hkv);
    const int qd = Hq * dh, kd = Hkv * dh;
    const long pos = pos0 + r, first = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
    const double scale =
        logscale ? exp(fmin((double)logscale[h], PHAX_COSINE_MAX_LOGSCALE)) : 1.0 / sqrt((double)dh);
    for (int e = threadIdx.x; e < dh; e += blockDim.x) qs[e] = q[(size_t)r * qd + (size_t)h * dh + e], acc[e] = 0;
    __syncthreads();
    double mrun = -INFINITY, lrun = 0;
    for (long t0 = first; t0 <= pos; t0 += blockDim.x) {
        const int n = pos - t0 + 1 < (long)blockDim.x ? (int)(pos - t0 + 1) : (int)blockDim.x;
        double s = -INFINITY;
        if ((int)threadIdx.x < n) {
            const float *kr = kv_row(kp, kc, t0 + threadIdx.x, pos0, j, kd, dh, cap);
            double dot = 0;
            for (int e = 0; e < dh; e++) dot += qs[e] * kr[e];
            s = scale * dot;
        }
        // The tile has at least one key (t0 ≤ pos), so mnew is finite; exp(−∞) = 0 drops the
        // empty start.
        const double mnew = fmax(mrun, fcuda_block_max_d(s, red));
        const double a = exp(mrun - mnew), pe = (int)threadIdx.x < n ? exp(s - mnew) : 0.0;
        p[threadIdx.x] = pe;
        lrun = lrun * a + fcuda_block_sum_d(pe, red);  // its barriers publish p
        mrun = mnew;
        for (int e = threadIdx.x; e < dh; e += blockDim.x) {
            double ae = acc[e] * a;
            for (int i = 0; i < n; i++) ae += p[i] * kv_row(vp, vc, t0 + i, pos0, j, kd, dh, cap)[e];
            acc[e] = ae;
        }
        __syncthreads();  // p is rewritten by the next tile
    }
    for (int e = threadIdx.x; e < dh; e += blockDim.x) o[(size_t)r * qd + (size_t)h * dh + e] = (float)(acc[e] / lrun);
}

// The pass's rows r0 … R − 1 (keys kp, values vp: (R, Hkv·dh)) into ring slots (pos0 + r) % cap.
static __global__ void ring_store_k(float *__restrict__ kc, float *__restrict__ vc, const float *__restrict__ kp,
                                    const float *__restrict__ vp, int R, int r0, int Hkv, int dh, int cap,
                                    long pos0) {
    const size_t kd = (size_t)Hkv * dh, n = (size_t)(R - r0) * kd;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = r0 + i / kd, rem = i % kd, jj = rem / dh, e = rem % dh;
        const size_t slot = (size_t)((pos0 + (long)r) % cap), dst = (jj * cap + slot) * dh + e;
        kc[dst] = kp[r * kd + rem], vc[dst] = vp[r * kd + rem];
    }
}

// GSS modes of channel h = blockIdx.x, token by token over the pass: z_hn ← e^{λ_n} z_hn + ū_h,
// ys_h = Re Σ_n C̃_hn z_hn + D_h ū_h. z, ct: (Hs, N, 2), ea: (N, 2) double; ub, ys: (R, Hs).
static __global__ void gss_scan_k(float *__restrict__ ys, const float *__restrict__ ub, double *__restrict__ z,
                                  const double *__restrict__ ea, const double *__restrict__ ct,
                                  const float *__restrict__ D, int R, int Hs, int N) {
    __shared__ double red[32];
    const int h = blockIdx.x;
    double *zh = z + (size_t)h * N * 2;
    const double *ch = ct + (size_t)h * N * 2;
    for (int r = 0; r < R; r++) {
        const double uh = ub[(size_t)r * Hs + h];
        double acc = 0;
        for (int n = threadIdx.x; n < N; n += blockDim.x) {
            const double zr = zh[2 * n], zi = zh[2 * n + 1];
            const double nr = ea[2 * n] * zr - ea[2 * n + 1] * zi + uh, ni = ea[2 * n] * zi + ea[2 * n + 1] * zr;
            zh[2 * n] = nr, zh[2 * n + 1] = ni;
            acc += ch[2 * n] * nr - ch[2 * n + 1] * ni;
        }
        acc = fcuda_block_sum_d(acc, red);
        if (threadIdx.x == 0) ys[(size_t)r * Hs + h] = (float)(acc + D[h] * uh);
    }
}

// mLSTM cell of head hh = blockIdx.x, token by token over the pass (docs/spec.md §2.9):
//   ĩ = cap(w_i·x̄ + b_i), f̃ = cap(w_f·x̄ + b_f), m' = max(logσ(f̃) + m, ĩ),
//   C ← f' C + i' k vᵀ, n ← f' n + i' k, h̃ = Cᵀ q̂ / (max(|nᵀ q̂|, e^{−m'}) + eps).
// x (R, d); q, k (R, d/2) (head hh at hh·dqk); v, hc (R, d) (head hh at hh·dv). A thread owns
// columns j of C (and rows i of n): no two threads write one state element.
static __global__ void mlstm_scan_k(float *__restrict__ hc, const float *__restrict__ x, const float *__restrict__ q,
                                    const float *__restrict__ k, const float *__restrict__ v,
                                    const float *__restrict__ wi, const float *__restrict__ bi,
                                    const float *__restrict__ wf, const float *__restrict__ bf, double *__restrict__ C,
                                    double *__restrict__ nn, double *__restrict__ mm, int R, int d, int dqk,
                                    int dv) {
    __shared__ double red[32];
    const int hh = blockIdx.x, dk = d / 2;
    const double qsc = 1.0 / sqrt((double)dqk);
    double *Ch = C + (size_t)hh * dqk * dv, *nh = nn + (size_t)hh * dqk;
    const float *wih = wi + (size_t)hh * d, *wfh = wf + (size_t)hh * d;
    for (int r = 0; r < R; r++) {
        const float *xr = x + (size_t)r * d;
        double si = 0, sf = 0;
        for (int i = threadIdx.x; i < d; i += blockDim.x) si += (double)wih[i] * xr[i], sf += (double)wfh[i] * xr[i];
        si = fcuda_block_sum_d(si, red);
        sf = fcuda_block_sum_d(sf, red);
        const double ig = phax_gate_cap(si + bi[hh]), fg = phax_gate_cap(sf + bf[hh]);
        const double a = phax_logsigmoid(fg) + mm[hh];  // −∞ at the start
        const double mt = fmax(a, ig), fp = exp(a - mt), ip = exp(ig - mt);
        const float *kh = k + (size_t)r * dk + (size_t)hh * dqk, *qh = q + (size_t)r * dk + (size_t)hh * dqk;
        const float *vh = v + (size_t)r * d + (size_t)hh * dv;
        double s = 0;
        for (int i = threadIdx.x; i < dqk; i += blockDim.x) {
            nh[i] = fp * nh[i] + ip * kh[i];
            s += nh[i] * (qh[i] * qsc);
        }
        s = fcuda_block_sum_d(s, red);  // every thread has read mm[hh] before these barriers
        if (threadIdx.x == 0) mm[hh] = mt;
        const double den = fmax(fabs(s), exp(-mt)) + PHAX_MLSTM_EPS;
        for (int jj = threadIdx.x; jj < dv; jj += blockDim.x) {
            double num = 0;
            for (int i = 0; i < dqk; i++) {
                double *c = Ch + (size_t)i * dv + jj;
                const double cij = fp * *c + ip * kh[i] * vh[jj];
                *c = cij;
                num += cij * (qh[i] * qsc);
            }
            hc[(size_t)r * d + (size_t)hh * dv + jj] = (float)(num / den);
        }
        __syncthreads();  // mm[hh] written before the next row reads it
    }
}

// Gated DeltaNet cell of head hh = blockIdx.x, token by token over the pass (docs/spec.md §2.13,
// fast/cpu/decode.c's gdn_rows): per row the short convolution + SiLU of the head's q, k, v
// channels from the ring of the last K − 1 inputs (zero before position 0), then
//   q̂ = q·(1/√dk)/‖q‖, k̂ = k/‖k‖ (‖·‖ with PHAX_GDN_L2_EPS), α = exp(−e^{A_log}·softplus(a + dt_bias)),
//   β = σ(b), e = β (v − α S k̂), Sᵀ ← α Sᵀ + k̂ eᵀ, o = S q̂.
// q, k (R, d/2) (head hh at hh·dk), v, o (R, d) (head hh at hh·dv), in place: q, k, v leave
// convolved; ga, gb (R, GH); S (GH, dk, dv); ring (K − 1, 2d) = q | k | v by position, holding
// the raw projections. A thread owns channels (the convolution) and columns j of Sᵀ (the
// update): no two threads write one state element.
static __global__ void gdn_scan_k(float *__restrict__ o, float *__restrict__ q, float *__restrict__ k,
                                  float *__restrict__ v, const float *__restrict__ ga, const float *__restrict__ gb,
                                  const float *__restrict__ cq, const float *__restrict__ ck,
                                  const float *__restrict__ cv, const float *__restrict__ A_log,
                                  const float *__restrict__ dt_bias, double *__restrict__ S, float *__restrict__ ring,
                                  int R, int d, int GH, int dk, int dv, int K, long pos0) {
    __shared__ double red[32];
    const int hh = blockIdx.x, dq = d / 2, nr = K - 1;
    const double scale = 1.0 / sqrt((double)dk);
    double *Sh = S + (size_t)hh * dk * dv;
    for (int r = 0; r < R; r++) {
        const long p = pos0 + r;
        // the convolution: channel c of q (c < dk), k (dk ≤ c < 2dk) or v, Σ_j w[c,j] x[p−K+1+j]
        for (int c = threadIdx.x; c < 2 * dk + dv; c += blockDim.x) {
            const int s = c < dk ? 0 : c < 2 * dk ? 1 : 2;
            const int ch = s == 0 ? hh * dk + c : s == 1 ? hh * dk + c - dk : hh * dv + c - 2 * dk;
            const int off = s == 0 ? 0 : s == 1 ? dq : d;  // its column in the ring's rows
            float *col = s == 0 ? q + (size_t)r * dq : s == 1 ? k + (size_t)r * dq : v + (size_t)r * d;
            const float *w = (s == 0 ? cq : s == 1 ? ck : cv) + (size_t)ch * K, now = col[ch];
            float a = 0;
            for (int j = 0; j < nr; j++) {
                const long t = p - nr + j;  // the position tap j reads (negative: before 0, zero)
                a += w[j] * (t < 0 ? 0.0f : ring[(size_t)(t % nr) * 2 * d + off + ch]);
            }
            a += w[K - 1] * now;
            if (nr > 0) ring[(size_t)(p % nr) * 2 * d + off + ch] = now;  // x[p] for later rows
            col[ch] = a * phax_sigmoidf(a);
        }
        __syncthreads();  // the head's convolved q, k, v seen by every thread
        const float *qh = q + (size_t)r * dq + (size_t)hh * dk, *kh = k + (size_t)r * dq + (size_t)hh * dk;
        const float *vh = v + (size_t)r * d + (size_t)hh * dv;
        double nq = 0, nk = 0;
        for (int i = threadIdx.x; i < dk; i += blockDim.x) nq += (double)qh[i] * qh[i], nk += (double)kh[i] * kh[i];
        nq = fcuda_block_sum_d(nq, red);
        nk = fcuda_block_sum_d(nk, red);
        const double rq = scale / sqrt(nq + PHAX_GDN_L2_EPS), rk = 1.0 / sqrt(nk + PHAX_GDN_L2_EPS);
        const double zg = (double)ga[(size_t)r * GH + hh] + dt_bias[hh];
        const double alpha = exp(-exp((double)A_log[hh]) * phax_softplus(zg));
        const double beta = phax_sigmoid((double)gb[(size_t)r * GH + hh]);
        for (int j = threadIdx.x; j < dv; j += blockDim.x) {
            double e = 0;
            for (int i = 0; i < dk; i++) e += Sh[(size_t)i * dv + j] * (kh[i] * rk);
            e = beta * (vh[j] - alpha * e);
            double out = 0;
            for (int i = 0; i < dk; i++) {
                double *sij = Sh + (size_t)i * dv + j;
                *sij = alpha * *sij + (kh[i] * rk) * e;
                out += *sij * (qh[i] * rq);
            }
            o[(size_t)r * d + (size_t)hh * dv + j] = (float)out;
        }
        __syncthreads();  // this row's q, k read before the next row's convolution writes its own
    }
}

// Elementwise: y = a ⊙ b (y may be a); y = σ(z) ⊙ b; y ⊙= SiLU(z); y = α x + y2; x += y.
static __global__ void mul_k(float *y, const float *a, const float *b, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = a[i] * b[i];
}
static __global__ void sigmoid_mul_k(float *__restrict__ y, const float *__restrict__ z, const float *__restrict__ b,
                                     size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = (float)phax_sigmoid(z[i]) * b[i];
}
static __global__ void silu_mul_k(float *__restrict__ y, const float *__restrict__ z, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] *= z[i] * phax_sigmoidf(z[i]);
}
static __global__ void scale_add_k(float *__restrict__ y, float alpha, const float *__restrict__ x,
                                   const float *__restrict__ y2, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = alpha * x[i] + y2[i];
}
static __global__ void add_into_k(float *__restrict__ x, const float *__restrict__ y, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] += y[i];
}
static __global__ void fill_d_k(double *p, double value, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = value;
}

// --- the decoder -------------------------------------------------------------------------------

// Per-layer parameters and state (device pointers): fast/model/decode_shared.h's fdec_layer.
struct fcuda_decoder {
    phax_model_cfg c;
    int max_len, pos, chunk, parallel;
    int window;   // the call's window (0 = full): every SWA layer's (swa_full's full layers: 0)
    int cap;      // the most KV slots of any attention layer (0: no attention)
    int limited;  // some layer has full attention: at most max_len tokens
    int broken;  // 1: a pass failed midway, 2: a reset failed; every call refused until a reset
    float alpha;
    fdec_layer *L;
    const float *embed, *norm_emb, *norm_f, *head;
    float *zero_p;  // (MAX_SUB) zeros: a frozen mix's logits
    // Scratch (device), R = chunk rows.
    int32_t *tok;                          // (R)
    float *x, *e, *h, *y, *t;              // (R, d)
    float *br, *bn;                        // (MAX_SUB, R, d)
    float *q, *q_raw, *o;                  // (R, Hq·dh)
    float *k_raw, *k_rot, *v_new;          // (R, Hkv·dh)
    float *rope;                           // the pass's cos/sin table
    float *f1, *f2, *f3;                   // (R, max(hid, F, ha))
    float *s1, *s2, *s3, *s4;              // (R, Hs)
    float *mq, *mk, *mv, *mo, *mh, *mhn;   // (R, ·): d/2, d/2, d, d, d, d (mLSTM; GDN's q, k, v, z, o, h)
    float *ga, *gb;                        // GDN gate projections (R, GH)
    float *logits;                         // (R, V)
    void *arena;
    size_t state_bytes;
};

#define TRY(call)                                \
    do {                                         \
        if ((call) != PHAX_OK) return PHAX_ERR;  \
    } while (0)

static int ew_launch_check(const char *what) { return fcuda_check(what); }

// Y: (R, out) = X Wᵀ on cuBLAS.
static int lin(float *Y, const float *W, const float *X, int R, int out, int in) {
    return fcuda_linear_fwd(Y, X, W, NULL, (size_t)R, in, out, NULL);
}

static int rms(float *y, const float *x, const float *g, int R, int d) {
    return fcuda_rmsnorm_fwd(y, x, g, (size_t)R, d, PHAX_RMSNORM_EPS, NULL);
}

static int attn_rows(fcuda_decoder *dc, fdec_attn *A, float *y, const float *x, int R) {
    const phax_model_cfg *c = &dc->c;
    const int d = c->d_model, Hq = c->n_heads, Hkv = c->n_kv_heads, dh = c->head_dim;
    const int qd = Hq * dh, kd = Hkv * dh;
    const long pos0 = dc->pos;
    TRY(lin(dc->q_raw, A->w.wq, x, R, qd, d));
    TRY(lin(dc->k_raw, A->w.wk, x, R, kd, d));
    TRY(lin(dc->v_new, A->w.wv, x, R, kd, d));
    TRY(fcuda_rope_fwd(dc->q, dc->q_raw, 1, R, Hq, dh, c->rope_base, pos0, dc->rope, NULL));
    TRY(fcuda_rope_fwd(dc->k_rot, dc->k_raw, 1, R, Hkv, dh, c->rope_base, pos0, dc->rope, NULL));
    if (c->score_cosine) {
        PHAX_LAUNCH(unit_rows_k, (unsigned)(R * Hq), 32, 0, NULL, dc->q, dh);
        PHAX_LAUNCH(unit_rows_k, (unsigned)(R * Hkv), 32, 0, NULL, dc->k_rot, dh);
        TRY(ew_launch_check("decoder unit_rows"));
    }
    const size_t smem = (2 * (size_t)dh + ATT_THREADS + 32) * sizeof(double);
    PHAX_LAUNCH(attend_k, dim3((unsigned)Hq, (unsigned)R), ATT_THREADS, smem, NULL, dc->o, dc->q, dc->k_rot,
                dc->v_new, A->k_cache, A->v_cache, c->score_cosine ? A->w.logscale : NULL, Hq, Hkv, dh, A->cap, pos0,
                A->window);
    TRY(ew_launch_check("decoder attend"));
    const int r0 = R > A->cap ? R - A->cap : 0;  // earlier rows' slots are overwritten within the pass
    const size_t n = (size_t)(R - r0) * kd;
    PHAX_LAUNCH(ring_store_k, fcuda_ew_blocks(n, EW_THREADS), EW_THREADS, 0, NULL, A->k_cache, A->v_cache, dc->k_rot,
                dc->v_new, R, r0, Hkv, dh, A->cap, pos0);
    TRY(ew_launch_check("decoder ring_store"));
    return lin(y, A->w.wo, dc->o, R, d, qd);
}

static int gss_rows(fcuda_decoder *dc, fdec_gss *G, float *y, const float *x, int R) {
    const phax_model_cfg *c = &dc->c;
    const int d = c->d_model, F = c->gss_expand, Hs = c->gss_hidden, N = c->gss_state;
    float *xv = dc->f1, *v = dc->f2, *gt = dc->f3;
    float *xu = dc->s1, *u = dc->s2, *ub = dc->s3, *ys = dc->s4;
    TRY(lin(xv, G->w.wv, x, R, F, d));
    TRY(fcuda_gelu_fwd(v, xv, (size_t)R * F, NULL));
    TRY(lin(xu, G->w.wu, x, R, Hs, d));
    TRY(fcuda_gelu_fwd(u, xu, (size_t)R * Hs, NULL));
    TRY(fcuda_layernorm_fwd(ub, u, G->w.ln_w, G->w.ln_b, (size_t)R, Hs, PHAX_LAYERNORM_EPS, NULL));
    const unsigned th = N >= 128 ? 128u : (unsigned)((N + 31) / 32 * 32);
    PHAX_LAUNCH(gss_scan_k, (unsigned)Hs, th, 0, NULL, ys, ub, G->z, G->ea, G->ct, G->w.D, R, Hs, N);
    TRY(ew_launch_check("decoder gss_scan"));
    TRY(lin(xv, G->w.wc, ys, R, F, Hs));
    const size_t n = (size_t)R * F;
    PHAX_LAUNCH(mul_k, fcuda_ew_blocks(n, EW_THREADS), EW_THREADS, 0, NULL, gt, xv, v, n);
    TRY(ew_launch_check("decoder gss gate"));
    return lin(y, G->w.wo, gt, R, d, F);
}

static int swiglu_rows(fcuda_decoder *dc, const fdec_layer *ly, float *y, const float *x, int R) {
    const int d = dc->c.d_model, hid = dc->c.ffn_hidden;
    const size_t n = (size_t)R * hid;
    TRY(lin(dc->f1, ly->w.ffn_wg, x, R, hid, d));
    TRY(lin(dc->f2, ly->w.ffn_wu, x, R, hid, d));
    TRY(fcuda_silu_fwd(dc->f3, dc->f1, n, NULL));
    PHAX_LAUNCH(mul_k, fcuda_ew_blocks(n, EW_THREADS), EW_THREADS, 0, NULL, dc->f3, dc->f3, dc->f2, n);
    TRY(ew_launch_check("decoder swiglu"));
    return lin(y, ly->w.ffn_wd, dc->f3, R, d, hid);
}

static int aux_rows(fcuda_decoder *dc, const fdec_layer *ly, float *y, const float *x, int R) {
    const int d = dc->c.d_model, ha = dc->c.ffn_aux_hidden;
    TRY(lin(dc->f1, ly->w.aux_w3, x, R, ha, d));
    TRY(fcuda_gelu_fwd(dc->f2, dc->f1, (size_t)R * ha, NULL));
    return lin(y, ly->w.aux_w4, dc->f2, R, d, ha);
}

static int mlstm_rows(fcuda_decoder *dc, fdec_mlstm *M, float *y, const float *x, int R) {
    const int d = dc->c.d_model, NH = dc->c.mlstm_heads, dk = d / 2;
    const int dqk = dk / NH, dv = d / NH;
    TRY(lin(dc->mq, M->w.wq, x, R, dk, d));
    TRY(lin(dc->mk, M->w.wk, x, R, dk, d));
    TRY(lin(dc->mv, M->w.wv, x, R, d, d));
    TRY(lin(dc->mo, M->w.wog, x, R, d, d));
    PHAX_LAUNCH(mlstm_scan_k, (unsigned)NH, REC_THREADS, 0, NULL, dc->mh, x, dc->mq, dc->mk, dc->mv, M->w.wi, M->w.bi,
                M->w.wf, M->w.bf, M->C, M->n, M->m, R, d, dqk, dv);
    TRY(ew_launch_check("decoder mlstm_scan"));
    TRY(fcuda_headnorm_fwd(dc->mhn, dc->mh, M->w.hnorm, (size_t)R, NH, dv, dc->c.mlstm_norm_eps, NULL));
    const size_t n = (size_t)R * d;
    PHAX_LAUNCH(sigmoid_mul_k, fcuda_ew_blocks(n, EW_THREADS), EW_THREADS, 0, NULL, dc->mh, dc->mo, dc->mhn, n);
    TRY(ew_launch_check("decoder mlstm gate"));
    return lin(y, M->w.wout, dc->mh, R, d, d);
}

// Gated DeltaNet layer (docs/spec.md §2.13 "The layer") on R rows in order: the projections on
// cuBLAS, the convolution and the cell in gdn_scan_k, then the RMSNorm over each head's dv ⊙
// SiLU(z) and the output projection.
static int gdn_rows(fcuda_decoder *dc, fdec_gdn *G, float *y, const float *x, int R) {
    const phax_model_cfg *c = &dc->c;
    const int d = c->d_model, GH = c->gdn_heads, dq = d / 2, dk = dq / GH, dv = d / GH;
    float *q = dc->mq, *k = dc->mk, *v = dc->mv, *z = dc->mo, *o = dc->mh, *h = dc->mhn;
    TRY(lin(q, G->w.wq, x, R, dq, d));
    TRY(lin(k, G->w.wk, x, R, dq, d));
    TRY(lin(v, G->w.wv, x, R, d, d));
    TRY(lin(z, G->w.wg, x, R, d, d));
    TRY(lin(dc->ga, G->w.wa, x, R, GH, d));
    TRY(lin(dc->gb, G->w.wb, x, R, GH, d));
    PHAX_LAUNCH(gdn_scan_k, (unsigned)GH, REC_THREADS, 0, NULL, o, q, k, v, dc->ga, dc->gb, G->w.conv_q, G->w.conv_k,
                G->w.conv_v, G->w.A_log, G->w.dt_bias, G->S, G->conv, R, d, GH, dk, dv, c->gdn_conv, (long)dc->pos);
    TRY(ew_launch_check("decoder gdn_scan"));
    TRY(fcuda_rmsnorm_fwd(h, o, G->w.norm, (size_t)R * GH, dv, c->gdn_norm_eps, NULL));
    const size_t n = (size_t)R * d;
    PHAX_LAUNCH(silu_mul_k, fcuda_ew_blocks(n, EW_THREADS), EW_THREADS, 0, NULL, h, z, n);
    TRY(ew_launch_check("decoder gdn gate"));
    return lin(y, G->w.wout, h, R, d, d);
}

// The tier's kernels of the shared layer walk (fast/model/decode_shared.h: fdec_block).
static int k_sub(void *v, int l, phax_sub_kind k, float *y, const float *x, int R) {
    fcuda_decoder *dc = static_cast<fcuda_decoder *>(v);
    fdec_layer *ly = &dc->L[l];
    switch (k) {
    case PHAX_SUB_GSS: return gss_rows(dc, &ly->gss, y, x, R);
    case PHAX_SUB_ATTN: return attn_rows(dc, &ly->attn, y, x, R);
    case PHAX_SUB_SWIGLU: return swiglu_rows(dc, ly, y, x, R);
    case PHAX_SUB_AUX: return aux_rows(dc, ly, y, x, R);
    case PHAX_SUB_MLSTM: return mlstm_rows(dc, &ly->mlstm, y, x, R);
    case PHAX_SUB_DUAL: break;  // walked by fdec_sub
    case PHAX_SUB_GDN: return gdn_rows(dc, &ly->gdn, y, x, R);
    }
    return phax_fail("fcuda decoder: sub-layer kind %d has no kernel", (int)k);
}
static int k_rms(void *v, float *y, const float *x, const float *g, int R) {
    return rms(y, x, g, R, static_cast<fcuda_decoder *>(v)->c.d_model);
}
static int k_mix(void *v, float *m, const float *b, const float *p, int nb, size_t n) {
    (void)v;
    return fcuda_mix_fwd(m, b, p, nb, n, NULL);
}
static int k_axpy(void *v, float *t, float alpha, const float *x, const float *y, size_t n) {
    (void)v;
    PHAX_LAUNCH(scale_add_k, fcuda_ew_blocks(n, EW_THREADS), EW_THREADS, 0, NULL, t, alpha, x, y, n);
    return ew_launch_check("decoder residual");
}
static int k_add(void *v, float *x, const float *y, size_t n) {
    (void)v;
    PHAX_LAUNCH(add_into_k, fcuda_ew_blocks(n, EW_THREADS), EW_THREADS, 0, NULL, x, y, n);
    return ew_launch_check("decoder residual");
}
static const fdec_kernels cuda_kernels = {k_sub, k_rms, k_mix, k_axpy, k_add};

// R (≤ chunk) tokens through every layer; logits (host): (V) of the last token, (R, V) of every
// token when all, or NULL. The position advances only when the pass succeeds; a failed pass
// leaves the state part-advanced, so the decoder refuses further calls until a reset.
static int pass(fcuda_decoder *dc, const int32_t *tok, int R, float *logits, int all) {
    const phax_model_cfg *c = &dc->c;
    const int d = c->d_model, V = c->vocab_size;
    dc->broken = 1;
    TRY(fcuda_upload(dc->tok, tok, (size_t)R * sizeof *tok, NULL));
    if (dc->cap > 0) TRY(fcuda_rope_table(dc->rope, R, c->head_dim, c->rope_base, dc->pos, NULL));
    float *x = dc->x;
    if (dc->parallel) {  // x_1 = RMSNorm_emb(E[tok])
        TRY(fcuda_embedding_fwd(dc->e, dc->embed, dc->tok, (size_t)R, V, d, NULL));
        TRY(rms(x, dc->e, dc->norm_emb, R, d));
    } else {
        TRY(fcuda_embedding_fwd(x, dc->embed, dc->tok, (size_t)R, V, d, NULL));
    }
    const fdec_scratch s = {dc->br, dc->bn, dc->y, dc->t, dc->h};
    for (int l = 0; l < c->n_layers; l++)
        TRY(fdec_block(&cuda_kernels, dc, l, &dc->L[l].w, dc->parallel, dc->alpha, d, x, R, &s));
    if (logits) {
        const int rows = all ? R : 1;
        const float *xf = all ? x : x + (size_t)(R - 1) * d;  // PHA: normalised already
        if (dc->norm_f) {
            TRY(rms(dc->e, xf, dc->norm_f, rows, d));
            xf = dc->e;
        }
        TRY(lin(dc->logits, dc->head, xf, rows, V, d));
        TRY(fcuda_download(logits, dc->logits, (size_t)rows * V * sizeof(float), NULL));
    } else {
        TRY(fcuda_sync(NULL));  // a fault of this pass is reported by this call
    }
    dc->pos += R;
    dc->broken = 0;
    return PHAX_OK;
}

// --- creation ------------------------------------------------------------------------------------

static size_t max3(size_t a, size_t b, size_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

// One arena (fast/model/decode_shared.h), carved twice: sizes, then pieces.
static void carve(fcuda_decoder *dc, fdec_arena *a) {
    const phax_model_cfg *c = &dc->c;
    const size_t d = c->d_model, qd = (size_t)c->n_heads * c->head_dim;
    const size_t kd = (size_t)c->n_kv_heads * c->head_dim;
    const size_t Hs = c->gss_hidden;
    const size_t wide = max3(c->ffn_hidden, c->gss_expand, c->ffn_aux_hidden);
    const size_t R = (size_t)dc->chunk;
    dc->zero_p = (float *)fdec_take(a, MAX_SUB * sizeof(float));
    dc->tok = (int32_t *)fdec_take(a, R * sizeof(int32_t));
    float **vd[] = {&dc->x, &dc->e, &dc->h, &dc->y, &dc->t, &dc->mv, &dc->mo, &dc->mh, &dc->mhn};
    for (size_t i = 0; i < sizeof vd / sizeof *vd; i++) *vd[i] = (float *)fdec_take(a, R * d * sizeof(float));
    dc->mq = (float *)fdec_take(a, R * (d / 2) * sizeof(float));
    dc->mk = (float *)fdec_take(a, R * (d / 2) * sizeof(float));
    dc->br = (float *)fdec_take(a, MAX_SUB * R * d * sizeof(float));
    dc->bn = (float *)fdec_take(a, MAX_SUB * R * d * sizeof(float));
    dc->q = (float *)fdec_take(a, R * qd * sizeof(float));
    dc->q_raw = (float *)fdec_take(a, R * qd * sizeof(float));
    dc->o = (float *)fdec_take(a, R * qd * sizeof(float));
    dc->k_raw = (float *)fdec_take(a, R * kd * sizeof(float));
    dc->k_rot = (float *)fdec_take(a, R * kd * sizeof(float));
    dc->v_new = (float *)fdec_take(a, R * kd * sizeof(float));
    dc->rope = (float *)fdec_take(a, fcuda_rope_table_len((int)R, c->head_dim) * sizeof(float));
    dc->f1 = (float *)fdec_take(a, R * wide * sizeof(float));
    dc->f2 = (float *)fdec_take(a, R * wide * sizeof(float));
    dc->f3 = (float *)fdec_take(a, R * wide * sizeof(float));
    float **vs[] = {&dc->s1, &dc->s2, &dc->s3, &dc->s4};
    for (int i = 0; i < 4; i++) *vs[i] = (float *)fdec_take(a, R * Hs * sizeof(float));
    dc->ga = (float *)fdec_take(a, R * (size_t)c->gdn_heads * sizeof(float));
    dc->gb = (float *)fdec_take(a, R * (size_t)c->gdn_heads * sizeof(float));
    dc->logits = (float *)fdec_take(a, R * (size_t)c->vocab_size * sizeof(float));
    for (int l = 0; l < c->n_layers; l++) fdec_carve_layer(a, c, &dc->L[l]);
}

// Parameter lookup in the layout (device pointers into params), recording the first missing
// name: the model-level parameters here, the blocks' through phax_plan_bind_block.
typedef struct {
    const phax_layout *L;
    const float *params;
    int missing;
} lookup;

static const float *find_param(void *ctx, const char *name) {
    const lookup *lk = (const lookup *)ctx;
    const int i = phax_layout_find(lk->L, name);
    return i < 0 ? NULL : lk->params + lk->L->p[i].offset;
}

static const float *P(lookup *lk, const char *name) {
    const float *p = find_param(lk, name);
    if (!p && !lk->missing) lk->missing = 1, phax_fail("fcuda_decoder_new: the model has no %s", name);
    return p;
}

// e^{λ_n} and C̃_hn of one GSS layer (phax_gss_modes, as fast/cpu's decoder), in double on the
// host from the parameters downloaded once, then uploaded.
static int gss_modes(fdec_gss *G, int Hs, int N) {
    const size_t nh = (size_t)Hs * N;
    float *lre = (float *)malloc((2 * N + 2 * nh) * sizeof(float));
    double *ea = (double *)malloc((2 * N + 2 * nh) * sizeof(double));
    int rc = PHAX_ERR;
    if (!lre || !ea) {
        phax_fail("fcuda_decoder_new: out of memory");
        goto done;
    }
    {
        float *lim = lre + N, *cre = lim + N, *cim = cre + nh;
        double *ct = ea + 2 * N;
        if (fcuda_download(lre, G->w.lre, N * sizeof(float), NULL) ||
            fcuda_download(lim, G->w.lim, N * sizeof(float), NULL) ||
            fcuda_download(cre, G->w.cre, nh * sizeof(float), NULL) ||
            fcuda_download(cim, G->w.cim, nh * sizeof(float), NULL))
            goto done;
        phax_gss_modes(lre, lim, cre, cim, Hs, N, ea, ct);
        if (fcuda_upload(G->ea, ea, 2 * N * sizeof(double), NULL) ||
            fcuda_upload(G->ct, ct, 2 * nh * sizeof(double), NULL))
            goto done;
        rc = PHAX_OK;
    }
done:
    free(lre);
    free(ea);
    return rc;
}

extern "C" void fcuda_decoder_free(fcuda_decoder *dc) {
    if (!dc) return;
    if (dc->arena) fcuda_free(dc->arena);
    free(dc->L);
    free(dc);
}

extern "C" fcuda_decoder *fcuda_decoder_new(const phax_model_cfg *cfg, const phax_layout *L, const float *params,
                                             int max_len, int window, int chunk) {
    if (chunk < 1 || chunk > FCUDA_PREFILL_CHUNK_MAX) {
        phax_fail("fcuda_decoder_new: prefill chunk %d must be in [1, %d]", chunk, FCUDA_PREFILL_CHUNK_MAX);
        return NULL;
    }
    if (!cfg || !L || !params) {
        phax_fail("fcuda_decoder_new: no model");
        return NULL;
    }
    if (max_len < 1) {
        phax_fail("fcuda_decoder_new: max_len %d must be at least 1", max_len);
        return NULL;
    }
    if (window < -1) {
        phax_fail("fcuda_decoder_new: window %d must be -1 (w_long), 0 (full) or positive", window);
        return NULL;
    }
    if (cfg->head_dim > ATT_MAX_DH) {
        phax_fail("fcuda_decoder_new: head_dim %d is over the decoder's %d (one head's query and output "
                  "sit in shared memory)",
                  cfg->head_dim, ATT_MAX_DH);
        return NULL;
    }
    fcuda_decoder *dc = (fcuda_decoder *)calloc(1, sizeof *dc);
    if (!dc) {
        phax_fail("fcuda_decoder_new: out of memory");
        return NULL;
    }
    const phax_model_cfg *c = &dc->c;
    dc->c = *cfg, dc->max_len = max_len, dc->chunk = chunk;
    dc->window = phax_plan_window(c, window);
    dc->parallel = phax_plan_rule(c) == PHAX_RULE_PARALLEL;
    dc->alpha = (float)phax_plan_alpha(c);
    lookup top = {L, params, 0};
    dc->embed = P(&top, "embed.weight");
    dc->head = P(&top, c->tie_embeddings ? "embed.weight" : "lm_head.weight");
    if (dc->parallel) dc->norm_emb = P(&top, "norm_emb.weight");
    else dc->norm_f = P(&top, "norm_f.weight");
    if (top.missing) goto fail;
    if (!(dc->L = (fdec_layer *)calloc((size_t)c->n_layers, sizeof(fdec_layer)))) {
        phax_fail("fcuda_decoder_new: out of memory");
        goto fail;
    }
    for (int l = 0; l < c->n_layers; l++) {
        fdec_layer *ly = &dc->L[l];
        if (fdec_bind_layer(c, l, find_param, &top, "fcuda_decoder_new", dc->window, max_len, ly)) goto fail;
        if (ly->attn.cap > dc->cap) dc->cap = ly->attn.cap;
        if (ly->attn.cap > 0 && ly->attn.window == 0) dc->limited = 1;
    }
    // A decoder with full attention never holds more than max_len tokens: no pass (nor its
    // (R, V) logits buffer) needs more rows.
    if (dc->limited && dc->chunk > max_len) dc->chunk = max_len;
    {
        fdec_arena a = {NULL, 0, 0, 0};
        carve(dc, &a);  // sizing pass
        void *base = NULL;
        if (fcuda_malloc(&base, a.off)) goto fail;
        dc->arena = base;
        if (fcuda_ok(cudaMemset(base, 0, a.off), "memset")) goto fail;
        a.base = (char *)base, a.off = a.state = a.kv = 0;
        carve(dc, &a);
        dc->state_bytes = a.state;
    }
    for (int l = 0; l < c->n_layers; l++) {
        fdec_layer *ly = &dc->L[l];
        if (dc->parallel && !ly->w.mix_p) ly->w.mix_p = dc->zero_p;
        if (phax_block_w_has(&ly->w, PHAX_SUB_GSS) && gss_modes(&ly->gss, c->gss_hidden, c->gss_state)) goto fail;
    }
    if (fcuda_decoder_reset(dc)) goto fail;
    return dc;
fail:
    fcuda_decoder_free(dc);
    return NULL;
}

static int dev_zero(void *ctx, void *p, size_t bytes) {
    (void)ctx;
    return fcuda_ok(cudaMemset(p, 0, bytes), "memset");
}
static int dev_fill(void *ctx, double *p, double value, size_t n) {
    (void)ctx;
    PHAX_LAUNCH(fill_d_k, 1, 32, 0, NULL, p, value, n);
    return ew_launch_check("decoder reset");
}

extern "C" int fcuda_decoder_reset(fcuda_decoder *dc) {
    dc->broken = 2;  // until the reset succeeds
    for (int l = 0; l < dc->c.n_layers; l++) TRY(fdec_reset_layer(&dc->c, &dc->L[l], dev_zero, dev_fill, NULL));
    TRY(fcuda_sync(NULL));
    dc->pos = 0;
    dc->broken = 0;
    return PHAX_OK;
}

extern "C" int fcuda_decoder_pos(const fcuda_decoder *dc) { return dc->pos; }

extern "C" size_t fcuda_decoder_state_bytes(const fcuda_decoder *dc) { return dc->state_bytes; }

// Checks for n more tokens (nothing changed on failure).
static int admit(const fcuda_decoder *dc, const char *fn, const int32_t *tok, int n) {
    const int V = dc->c.vocab_size;
    if (dc->broken)
        return phax_fail(dc->broken == 2 ? "%s: the decoder's last reset failed on the device; reset it again"
                                         : "%s: an earlier call failed on the device mid-pass; reset the decoder",
                         fn);
    return fdec_admit(fn, tok, n, V, dc->limited, dc->max_len, dc->pos);
}

extern "C" int fcuda_decoder_step(fcuda_decoder *dc, int32_t token, float *logits) {
    TRY(admit(dc, "fcuda_decoder_step", &token, 1));
    return pass(dc, &token, 1, logits, 0);
}

extern "C" int fcuda_decoder_prefill(fcuda_decoder *dc, const int32_t *tokens, int n, float *logits) {
    TRY(admit(dc, "fcuda_decoder_prefill", tokens, n));
    if (n == 0 && logits) return phax_fail("fcuda_decoder_prefill: logits asked of no tokens");
    for (int i = 0; i < n; i += dc->chunk) {
        const int R = n - i < dc->chunk ? n - i : dc->chunk;
        TRY(pass(dc, tokens + i, R, i + R == n ? logits : NULL, 0));
    }
    return PHAX_OK;
}

extern "C" int fcuda_decoder_prefill_all(fcuda_decoder *dc, const int32_t *tokens, int n, float *logits) {
    TRY(admit(dc, "fcuda_decoder_prefill_all", tokens, n));
    if (!logits) return phax_fail("fcuda_decoder_prefill_all: no logits buffer");
    const size_t V = (size_t)dc->c.vocab_size;
    for (int i = 0; i < n; i += dc->chunk) {
        const int R = n - i < dc->chunk ? n - i : dc->chunk;
        TRY(pass(dc, tokens + i, R, logits + (size_t)i * V, 1));
    }
    return PHAX_OK;
}
