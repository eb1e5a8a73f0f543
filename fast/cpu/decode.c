// fast/cpu per-token decoding (phax/fcpu_decode.h): the models of
// ref/model.c and ref/model_branches.c evaluated one token at a time.
//
// One step function per layer kind — attention, GSS, SwiGLU, the aux FFN,
// mLSTM — each reading one input vector x: (d) and writing y: (d) while it
// advances its own state. The two compositions that build the families from them are
// fast/model/decode_shared.h's layer walk (fdec_block), shared with fast/cuda's decoder:
//   * parallel (pha): every branch on x, RMSNorm per branch, softplus mix,
//     x ← RMSNorm_res(α·x + mix), α the plan's DeepNorm α;
//   * prenorm (transformer, serial, swax, swa, mlstm, swa_full): per sub-layer x ← x + F(RMSNorm x).
// Vectors are float32; matrix-vector products are cblas_sgemv; dot products
// that feed exponentials (attention scores, mLSTM gates), the attention output
// sums and every recurrent state are double.
//
// Threads: a step runs on the calling thread, apart from OpenBLAS inside the
// sgemv calls (the output head is the one large enough to use them). Attention
// heads spread over OpenMP threads were tried and dropped: on this 2-core
// machine the spinning OpenMP workers starved OpenBLAS's threads, 1 k-context
// steps took ~48 ms instead of ~4 ms.
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "phax/fcpu.h"
#include "phax/fcpu_decode.h"
#include "../model/decode_shared.h"
#include "phax/model_plan.h"
#include "phax/numerics.h"

#if defined(__x86_64__) && defined(__GLIBC__)
// expf under a name GCC does not treat as a builtin, declared `simd`, so `#pragma
// omp simd` loops call libmvec's vector expf (as in activation.c and loss.c).
__attribute__((simd("notinbranch"), const, nothrow)) extern float vexpf(float) __asm__("expf");
#else
#define vexpf expf
#endif

#define MAX_SUB PHAX_PLAN_MAX_SUB  // branches of a PHA block / sub-layers of a pre-norm block

// Per-layer parameters and state: fast/model/decode_shared.h's fdec_layer.
struct fcpu_decoder {
    const fmodel *m;
    const phax_model_cfg *c;
    int max_len;
    int window;   // the call's window (0 = full, w > 0 = sliding): every layer's but swa_full's full ones
    int cap;      // the most KV entries of any attention layer (0: no attention): the score rows
    int limited;  // some layer has full attention: at most max_len tokens
    int pos;      // tokens consumed
    int chunk;    // rows of the scratch: the most tokens one pass (a prefill chunk) carries
    fdec_layer *L;     // (n_layers)
    const float *embed, *norm_emb, *norm_f, *head;  // norm_emb: pha only; norm_f: the rest
    float zero_p[MAX_SUB];                          // frozen mix logits
    int parallel;                                   // the plan's rule: 1 parallel (pha), 0 pre-norm
    float alpha;                                    // PHA residual scale (DeepNorm α, the plan's)
    // Scratch, float unless marked; R = chunk rows (one per token of a pass).
    float *x, *e, *h, *y, *t;     // (R, d) each
    float *br, *bn;               // (MAX_SUB, R, d): PHA branch outputs, normalised
    float *q, *q_raw, *o;         // (R, Hq·dh) each
    float *k_raw, *k_rot, *v_new; // (R, Hkv·dh) each
    float *rope;                  // (2, R, dh/2): cos | sin of the pass's positions
    double *score;                // (cap) attention row
    float *spass;                 // (R, cap + R) a pass's scores / weights, one head
    double *attn_acc;             // (dh) attention output accumulators
    double *acc;                  // (d) mLSTM accumulators
    float *f1, *f2, *f3;          // (R, max(hid, F, ha)) FFN / GSS / aux hidden
    float *s1, *s2, *s3, *s4;     // (R, Hs) GSS channels
    float *mq, *mk, *mv, *mo, *mh, *mhn;  // mLSTM (R, ·): d/2, d/2, d, d, d, d; GDN's q, k, v, z, o, h
    float *ga, *gb;               // GDN gate projections (R, GH)
    void *arena;
    size_t arena_bytes;     // the arena's size (every piece rounded up to 64 bytes)
    size_t state_bytes;     // the carried state at capacity: fixed_state + kv_ring + max_len · kv_per_token
    size_t kv_per_token;    // bytes one token's keys and values take, over the full-attention layers
    size_t kv_ring;         // the windowed layers' ring buffers, allocated (and carried) whole
    size_t fixed_state;     // GSS modal states and mLSTM (C, n, m): the same at any context
};

// --- small helpers -----------------------------------------------------------------------------

// y: (out) = W x, W: (out, in).
static void matvec(float *y, const float *W, const float *x, int out, int in) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, out, in, 1.0f, W, in, x, 1, 0.0f, y, 1);
}

// Y: (R, out) = X Wᵀ, X: (R, in), W: (out, in). One row stays a matrix-vector
// product (a step's bits unchanged); more rows read W once for all of them.
static void matmul(float *Y, const float *W, const float *X, int R, int out, int in) {
    if (R == 1) matvec(Y, W, X, out, in);
    else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, out, in, 1.0f, X, in, W, in, 0.0f,
                     Y, out);
}

// Σ a_i b_i in double (float products are exact in double). The simd reduction
// fixes a lane order at compile time: the same bits on every call.
static double dot_f64(const float *a, const float *b, int n) {
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

static void add_into(float *x, const float *y, int n) {
    for (int i = 0; i < n; i++) x[i] += y[i];
}

// Each of the rows (rows, w) scaled to unit norm, the norm clamped below by 1e-12 (§2.7).
static void unit_rows(float *x, int rows, int w) {
    for (int r = 0; r < rows; r++) {
        float *v = x + (size_t)r * w;
        double nrm = fmax(sqrt(dot_f64(v, v, w)), PHAX_COSINE_NORM_EPS);
        for (int i = 0; i < w; i++) v[i] = (float)(v[i] / nrm);
    }
}


// --- layer kinds ---------------------------------------------------------------------------------

// One query head h of attention over the visible keys s = first..pos, which lie in
// the ring slots first % cap onwards (wrapping at cap):
//   o_h: (dh) = Σ_s softmax_s(scale·q̃_h·k̃_s) v_s,   k̃_s, v_s of kv head h / (Hq/Hkv).
// score: (pos − first + 1) and acc: (dh) are scratch. The weights stay unnormalised
// (e^{z − max}) and the sum divides the accumulated output once.
static void attend_head(const fcpu_decoder *dc, const fdec_attn *A, const float *q, int pos, int h,
                        int first, float *oh, double *score, double *acc) {
    const phax_model_cfg *c = dc->c;
    const int dh = c->head_dim, j = h / (c->n_heads / c->n_kv_heads);
    const int nvis = pos - first + 1, cap = A->cap, slot0 = first % cap;
    const float *qh = q + (size_t)h * dh;
    const float *kj = A->k_cache + (size_t)j * cap * dh;  // (cap, dh)
    const float *vj = A->v_cache + (size_t)j * cap * dh;  // (cap, dh)
    const double scale = c->score_cosine
                             ? exp(fmin((double)A->w.logscale[h], PHAX_COSINE_MAX_LOGSCALE))
                             : 1.0 / sqrt((double)dh);
    double mx = -INFINITY, sum = 0;
    for (int i = 0, slot = slot0; i < nvis; i++, slot = slot + 1 == cap ? 0 : slot + 1) {
        score[i] = scale * dot_f64(qh, kj + (size_t)slot * dh, dh);
        mx = fmax(mx, score[i]);
    }
    for (int i = 0; i < nvis; i++) sum += (score[i] = exp(score[i] - mx));
    for (int e = 0; e < dh; e++) acc[e] = 0;
    for (int i = 0, slot = slot0; i < nvis; i++, slot = slot + 1 == cap ? 0 : slot + 1) {
        const float *vs = vj + (size_t)slot * dh;
        const double p = score[i];
#pragma omp simd
        for (int e = 0; e < dh; e++) acc[e] += p * vs[e];
    }
    for (int e = 0; e < dh; e++) oh[e] = (float)(acc[e] / sum);
}

// Attention of a pass of R > 1 rows at positions pos0 + r, one query head h, as
// matrix products: the keys before the pass come from the ring (positions
// pos0 − nold .. pos0 − 1, in slots from (pos0 − nold) % cap on, wrapping), the
// pass's own from k, v: (R, Hkv, dh) — a pass longer than the window would
// overwrite ring slots its first rows still need, so its keys enter the ring only
// after every head has attended. S: (R, nold + R) scratch; o: (R, Hq·dh) rows.
// Scores are float sgemm (the error dh·u·scale·|q||k| of a float32 dot product,
// as in the forward's kernel); max, exp and sums in double; P·V float sgemm.
static void attend_pass_head(fcpu_decoder *dc, const fdec_attn *A, const float *k, const float *v,
                             int R, int nold, int h, float *S) {
    const phax_model_cfg *c = dc->c;
    const int dh = c->head_dim, j = h / (c->n_heads / c->n_kv_heads);
    const int qd = c->n_heads * dh, kd = c->n_kv_heads * dh, pos0 = dc->pos, w = A->window, cap = A->cap;
    const int ns = nold + R, s0 = (pos0 - nold) % cap;
    const int na = nold < cap - s0 ? nold : cap - s0, nb = nold - na;  // ring segments
    const float *kj = A->k_cache + (size_t)j * cap * dh;  // (cap, dh)
    const float *vj = A->v_cache + (size_t)j * cap * dh;
    const float *qh = dc->q + (size_t)h * dh;  // rows of stride qd
    const double scale = c->score_cosine
                             ? exp(fmin((double)A->w.logscale[h], PHAX_COSINE_MAX_LOGSCALE))
                             : 1.0 / sqrt((double)dh);
    // S = Q Kᵀ: [ring segment a | ring segment b | the pass's keys].
    if (na > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, na, dh, 1.0f, qh, qd,
                    kj + (size_t)s0 * dh, dh, 0.0f, S, ns);
    if (nb > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, nb, dh, 1.0f, qh, qd, kj, dh, 0.0f,
                    S + na, ns);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, R, dh, 1.0f, qh, qd, k + (size_t)j * dh,
                kd, 0.0f, S + nold, ns);
    // Row r sees key column i (position pos0 − nold + i) iff it is ≤ pos0 + r and, with
    // a window, > pos0 + r − w: softmax over those, the rest weighted 0.
    // The weights are L²-many at long context: one vectorised float exp each (a few
    // ulp, like the forward kernel's), their sum in double.
    for (int r = 0; r < R; r++) {
        float *Sr = S + (size_t)r * ns;
        const int lo = w > 0 && r + nold - w + 1 > 0 ? r + nold - w + 1 : 0, hi = nold + r;
        float mx = -INFINITY;
        double sum = 0;
        for (int i = lo; i <= hi; i++) mx = Sr[i] > mx ? Sr[i] : mx;
        const double smx = scale * mx;  // the exponent formed in double, then rounded once
#pragma omp simd reduction(+ : sum)
        for (int i = lo; i <= hi; i++) sum += (Sr[i] = vexpf((float)(scale * Sr[i] - smx)));
        const float inv = (float)(1.0 / sum);
        for (int i = 0; i < lo; i++) Sr[i] = 0;
#pragma omp simd
        for (int i = lo; i <= hi; i++) Sr[i] *= inv;
        for (int i = hi + 1; i < ns; i++) Sr[i] = 0;
    }
    // o_h = P V over the same three pieces.
    float *oh = dc->o + (size_t)h * dh;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, dh, R, 1.0f, S + nold, ns,
                v + (size_t)j * dh, kd, 0.0f, oh, qd);
    if (na > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, dh, na, 1.0f, S, ns,
                    vj + (size_t)s0 * dh, dh, 1.0f, oh, qd);
    if (nb > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, dh, nb, 1.0f, S + na, ns, vj, dh,
                    1.0f, oh, qd);
}

// Attention on x: (R, d) → y: (R, d), the rows the tokens at positions pos0 + r.
// The projections take all rows at once. One row (a step): its rotated k and its v
// go into ring slot pos % cap of every kv head's cache, then every query head
// attends (attend_head, in double). More rows: every head attends by matrix
// products (attend_pass_head), then the pass's last min(R, cap) keys go into the
// ring — each row sees exactly the keys a step at its position would.
static void attn_rows(fcpu_decoder *dc, fdec_attn *A, float *y, const float *x, int R) {
    const phax_model_cfg *c = dc->c;
    const int d = c->d_model, Hq = c->n_heads, Hkv = c->n_kv_heads, dh = c->head_dim;
    const int qd = (int)((size_t)Hq * dh), kd = (int)((size_t)Hkv * dh);  // ≤ PHAX_MAX_WIDTH
    const int pos0 = dc->pos, w = A->window, cap = A->cap;
    float *k = dc->k_rot, *v = dc->v_new;  // (R, Hkv, dh) each

    matmul(dc->q_raw, A->w.wq, x, R, qd, d);  // (R, Hq, dh)
    matmul(dc->k_raw, A->w.wk, x, R, kd, d);  // (R, Hkv, dh)
    matmul(v, A->w.wv, x, R, kd, d);          // (R, Hkv, dh)
    fcpu_rope_fwd(dc->q, dc->q_raw, 1, R, Hq, dh, c->rope_base, pos0, dc->rope);
    fcpu_rope_fwd(k, dc->k_raw, 1, R, Hkv, dh, c->rope_base, pos0, dc->rope);
    if (c->score_cosine) {
        unit_rows(dc->q, R * Hq, dh);
        unit_rows(k, R * Hkv, dh);
    }
    if (R > 1) {
        // Keys before the pass that its first row sees: all of them, or w − 1.
        const int nold = w > 0 && pos0 > w - 1 ? w - 1 : pos0;
        for (int h = 0; h < Hq; h++) attend_pass_head(dc, A, k, v, R, nold, h, dc->spass);
        for (int r = R > cap ? R - cap : 0; r < R; r++) {
            const size_t slot = (size_t)((pos0 + r) % cap);
            for (int j = 0; j < Hkv; j++) {
                memcpy(A->k_cache + ((size_t)j * cap + slot) * dh,
                       k + (size_t)r * kd + (size_t)j * dh, dh * sizeof *k);
                memcpy(A->v_cache + ((size_t)j * cap + slot) * dh,
                       v + (size_t)r * kd + (size_t)j * dh, dh * sizeof *v);
            }
        }
        matmul(y, A->w.wo, dc->o, R, d, qd);
        return;
    }
    for (int r = 0; r < R; r++) {
        const int pos = pos0 + r;
        const size_t slot = (size_t)(pos % cap);
        const float *kr = k + (size_t)r * kd, *vr = v + (size_t)r * kd;
        for (int j = 0; j < Hkv; j++) {
            memcpy(A->k_cache + ((size_t)j * cap + slot) * dh, kr + (size_t)j * dh, dh * sizeof *k);
            memcpy(A->v_cache + ((size_t)j * cap + slot) * dh, vr + (size_t)j * dh, dh * sizeof *v);
        }
        const int first = w > 0 && pos - w + 1 > 0 ? pos - w + 1 : 0;
        for (int h = 0; h < Hq; h++)
            attend_head(dc, A, dc->q + (size_t)r * qd, pos, h, first,
                        dc->o + (size_t)r * qd + (size_t)h * dh, dc->score, dc->attn_acc);
    }
    matmul(y, A->w.wo, dc->o, R, d, qd);
}

// GSS on x: (R, d) → y: (R, d), per row:
//   v = GELU(W_v x): (F);  ū = LayerNorm(GELU(W_u x)): (Hs)
//   z_hn ← e^{λ_n} z_hn + ū_h;  ys_h = Re Σ_n C̃_hn z_hn + D_h ū_h: (Hs)
//   y = W_o((W_c ys) ⊙ v)
// Only the modal update runs token by token; it carries z across rows and passes.
static void gss_rows(fcpu_decoder *dc, fdec_gss *G, float *y, const float *x, int R) {
    const phax_model_cfg *c = dc->c;
    const int d = c->d_model, F = c->gss_expand, Hs = c->gss_hidden, N = c->gss_state;
    float *xv = dc->f1, *v = dc->f2, *gt = dc->f3;         // (R, F)
    float *xu = dc->s1, *u = dc->s2, *ub = dc->s3, *ys = dc->s4;  // (R, Hs)

    matmul(xv, G->w.wv, x, R, F, d);
    fcpu_gelu_fwd(v, xv, (size_t)R * F);
    matmul(xu, G->w.wu, x, R, Hs, d);
    fcpu_gelu_fwd(u, xu, (size_t)R * Hs);
    fcpu_layernorm_fwd(ub, u, G->w.ln_w, G->w.ln_b, R, Hs, PHAX_LAYERNORM_EPS);
    for (int r = 0; r < R; r++) {
        for (int h = 0; h < Hs; h++) {
            const double uh = ub[(size_t)r * Hs + h];
            double *z = G->z + (size_t)h * N * 2;
            const double *ct = G->ct + (size_t)h * N * 2, *ea = G->ea;
            double acc = 0;
            for (int n = 0; n < N; n++) {
                const double zr = z[2 * n], zi = z[2 * n + 1];
                const double nr = ea[2 * n] * zr - ea[2 * n + 1] * zi + uh;
                const double ni = ea[2 * n] * zi + ea[2 * n + 1] * zr;
                z[2 * n] = nr, z[2 * n + 1] = ni;
                acc += ct[2 * n] * nr - ct[2 * n + 1] * ni;  // Re(C̃ z)
            }
            ys[(size_t)r * Hs + h] = (float)(acc + G->w.D[h] * uh);
        }
    }
    matmul(xv, G->w.wc, ys, R, F, Hs);  // W_c ys: (R, F), reusing xv
    for (size_t i = 0; i < (size_t)R * F; i++) gt[i] = xv[i] * v[i];
    matmul(y, G->w.wo, gt, R, d, F);
}

// SwiGLU: y = W_d(SiLU(W_g x) ⊙ W_u x); hidden (R, hid).
static void swiglu_rows(fcpu_decoder *dc, const fdec_layer *ly, float *y, const float *x, int R) {
    const int d = dc->c->d_model, hid = dc->c->ffn_hidden;
    float *g = dc->f1, *u = dc->f2, *a = dc->f3;
    matmul(g, ly->w.ffn_wg, x, R, hid, d);
    matmul(u, ly->w.ffn_wu, x, R, hid, d);
    fcpu_silu_fwd(a, g, (size_t)R * hid);
    for (size_t i = 0; i < (size_t)R * hid; i++) a[i] *= u[i];
    matmul(y, ly->w.ffn_wd, a, R, d, hid);
}

// Aux FFN: y = W4 GELU(W3 x); hidden (R, ha).
static void aux_rows(fcpu_decoder *dc, const fdec_layer *ly, float *y, const float *x, int R) {
    const int d = dc->c->d_model, ha = dc->c->ffn_aux_hidden;
    matmul(dc->f1, ly->w.aux_w3, x, R, ha, d);
    fcpu_gelu_fwd(dc->f2, dc->f1, (size_t)R * ha);
    matmul(y, ly->w.aux_w4, dc->f2, R, d, ha);
}

// mLSTM layer on x̄: (R, d) → y: (R, d) (docs/spec.md §2.9, §3.3), per row and head hh:
//   ĩ = cap(w_i·x̄ + b_i), f̃ = cap(w_f·x̄ + b_f)
//   m' = max(logσ(f̃) + m, ĩ);  f' = e^{logσ(f̃) + m − m'};  i' = e^{ĩ − m'}
//   C ← f' C + i' k vᵀ;  n ← f' n + i' k;  h̃ = Cᵀ q̂ / (max(|nᵀ q̂|, e^{−m'}) + eps)
// then y = W_out(σ(W_o x̄) ⊙ headnorm(h̃)). The cell runs row by row, carrying (C, n, m).
static void mlstm_rows(fcpu_decoder *dc, fdec_mlstm *M, float *y, const float *x, int R) {
    const int d = dc->c->d_model, NH = dc->c->mlstm_heads, dk = d / 2;
    const int dqk = dk / NH, dv = d / NH;
    const double qs = 1.0 / sqrt((double)dqk);
    float *q = dc->mq, *k = dc->mk, *v = dc->mv, *og = dc->mo, *hc = dc->mh, *hn = dc->mhn;

    matmul(q, M->w.wq, x, R, dk, d);   // (R, NH, dqk)
    matmul(k, M->w.wk, x, R, dk, d);   // (R, NH, dqk)
    matmul(v, M->w.wv, x, R, d, d);    // (R, NH, dv)
    matmul(og, M->w.wog, x, R, d, d);  // (R, d), before σ
    for (int r = 0; r < R; r++) {
        const float *xr = x + (size_t)r * d;
        for (int hh = 0; hh < NH; hh++) {
            const double ig = phax_gate_cap(dot_f64(M->w.wi + (size_t)hh * d, xr, d) + M->w.bi[hh]);
            const double fg = phax_gate_cap(dot_f64(M->w.wf + (size_t)hh * d, xr, d) + M->w.bf[hh]);
            const double a = phax_logsigmoid(fg) + M->m[hh];  // −∞ at the start
            const double mt = fmax(a, ig), fp = exp(a - mt), ip = exp(ig - mt);
            M->m[hh] = mt;
            const float *kh = k + (size_t)r * dk + (size_t)hh * dqk;
            const float *qh = q + (size_t)r * dk + (size_t)hh * dqk;
            const float *vh = v + (size_t)r * d + (size_t)hh * dv;
            double *C = M->C + (size_t)hh * dqk * dv, *n = M->n + (size_t)hh * dqk;
            double *num = dc->acc, s = 0;
            for (int j = 0; j < dv; j++) num[j] = 0;
            for (int i = 0; i < dqk; i++) {
                const double iki = ip * kh[i], qi = qh[i] * qs;
                double *Ci = C + (size_t)i * dv;
                for (int j = 0; j < dv; j++) {
                    Ci[j] = fp * Ci[j] + iki * vh[j];
                    num[j] += Ci[j] * qi;  // (Cᵀ q̂)_j
                }
                n[i] = fp * n[i] + iki;
                s += n[i] * qi;
            }
            const double den = fmax(fabs(s), exp(-mt)) + PHAX_MLSTM_EPS;
            float *hr = hc + (size_t)r * d + (size_t)hh * dv;
            for (int j = 0; j < dv; j++) hr[j] = (float)(num[j] / den);
        }
    }
    fcpu_headnorm_fwd(hn, hc, M->w.hnorm, R, NH, dv, dc->c->mlstm_norm_eps);
    for (size_t i = 0; i < (size_t)R * d; i++) hc[i] = (float)phax_sigmoid(og[i]) * hn[i];  // h = o ⊙ headnorm(h̃)
    matmul(y, M->w.wout, hc, R, d, d);
}

// Gated DeltaNet layer (docs/spec.md §2.13 "The layer") on R rows in order: the projections as
// matrices, then per row the short convolution from the ring of the last K − 1 inputs, the gates,
// and the delta-rule step per head in double (Sᵀ ← α Sᵀ + β k̂ (v − α S k̂)ᵀ, o = S q̂); then the
// RMSNorm over each head's dv ⊙ SiLU(z) and the output projection.
static int gdn_rows(fcpu_decoder *dc, fdec_gdn *G, float *y, const float *x, int R) {
    const phax_model_cfg *c = dc->c;
    const int d = c->d_model, GH = c->gdn_heads, K = c->gdn_conv, dk = d / 2 / GH, dv = d / GH, dq = d / 2;
    const double scale = 1.0 / sqrt((double)dk);
    float *q = dc->mq, *k = dc->mk, *v = dc->mv, *z = dc->mo, *o = dc->mh, *h = dc->mhn, *ga = dc->ga, *gb = dc->gb;
    matmul(q, G->w.wq, x, R, dq, d);  // projections first; the convolution runs in place below
    matmul(k, G->w.wk, x, R, dq, d);
    matmul(v, G->w.wv, x, R, d, d);
    matmul(z, G->w.wg, x, R, d, d);
    matmul(ga, G->w.wa, x, R, GH, d);
    matmul(gb, G->w.wb, x, R, GH, d);
    const int ring = K - 1;
    for (int r = 0; r < R; r++) {
        const long p = (long)dc->pos + r;
        // the convolution: Σ_j w[c,j] x[p−K+1+j] in ref's order, the ring holding x[p−K+1 .. p−1]
        float *cols[3] = {q + (size_t)r * dq, k + (size_t)r * dq, v + (size_t)r * d};
        const float *ws[3] = {G->w.conv_q, G->w.conv_k, G->w.conv_v};
        const int width[3] = {dq, dq, d}, off[3] = {0, dq, d};
        for (int s = 0; s < 3; s++)
            for (int ch = 0; ch < width[s]; ch++) {
                const float *w = ws[s] + (size_t)ch * K, now = cols[s][ch];
                float a = 0;
                for (int j = 0; j < ring; j++) {
                    const long t = p - ring + j;  // the position tap j reads (negative: before 0, zero)
                    a += w[j] * (t < 0 ? 0.0f : G->conv[(size_t)(t % ring) * 2 * d + off[s] + ch]);
                }
                a += w[K - 1] * now;
                if (ring > 0) G->conv[(size_t)(p % ring) * 2 * d + off[s] + ch] = now;  // x[p] for later rows
                cols[s][ch] = a * phax_sigmoidf(a);
            }
        for (int hh = 0; hh < GH; hh++) {
            const float *qh = cols[0] + (size_t)hh * dk, *kh = cols[1] + (size_t)hh * dk, *vh = cols[2] + (size_t)hh * dv;
            double nq = 0, nk = 0;
            for (int i = 0; i < dk; i++) nq += (double)qh[i] * qh[i], nk += (double)kh[i] * kh[i];
            const double rq = scale / sqrt(nq + PHAX_GDN_L2_EPS), rk = 1.0 / sqrt(nk + PHAX_GDN_L2_EPS);
            const double zg = (double)ga[(size_t)r * GH + hh] + G->w.dt_bias[hh];
            const double alpha = exp(-exp((double)G->w.A_log[hh]) * phax_softplus(zg));
            const double beta = phax_sigmoid((double)gb[(size_t)r * GH + hh]);
            double *S = G->S + (size_t)hh * dk * dv, *e = dc->acc;  // e: (dv) = v − α S k̂, then o
            for (int j = 0; j < dv; j++) e[j] = 0;
            for (int i = 0; i < dk; i++)
                for (int j = 0; j < dv; j++) e[j] += S[(size_t)i * dv + j] * (kh[i] * rk);
            for (int j = 0; j < dv; j++) e[j] = beta * (vh[j] - alpha * e[j]);
            for (int i = 0; i < dk; i++)
                for (int j = 0; j < dv; j++) S[(size_t)i * dv + j] = alpha * S[(size_t)i * dv + j] + (kh[i] * rk) * e[j];
            float *oh = o + (size_t)r * d + (size_t)hh * dv;
            for (int j = 0; j < dv; j++) {
                double s = 0;
                for (int i = 0; i < dk; i++) s += S[(size_t)i * dv + j] * (qh[i] * rq);
                oh[j] = (float)s;
            }
        }
    }
    fcpu_rmsnorm_fwd(h, o, G->w.norm, (size_t)R * GH, dv, c->gdn_norm_eps);
    for (size_t i = 0; i < (size_t)R * d; i++) h[i] *= z[i] * phax_sigmoidf(z[i]);  // ⊙ SiLU(z)
    matmul(y, G->w.wout, h, R, d, d);
    return PHAX_OK;
}

// The tier's kernels of the shared layer walk (fast/model/decode_shared.h: fdec_block).
static int k_sub(void *v, int l, phax_sub_kind k, float *y, const float *x, int R) {
    fcpu_decoder *dc = v;
    fdec_layer *ly = &dc->L[l];
    switch (k) {
    case PHAX_SUB_GSS: gss_rows(dc, &ly->gss, y, x, R); return PHAX_OK;
    case PHAX_SUB_ATTN: attn_rows(dc, &ly->attn, y, x, R); return PHAX_OK;
    case PHAX_SUB_SWIGLU: swiglu_rows(dc, ly, y, x, R); return PHAX_OK;
    case PHAX_SUB_AUX: aux_rows(dc, ly, y, x, R); return PHAX_OK;
    case PHAX_SUB_MLSTM: mlstm_rows(dc, &ly->mlstm, y, x, R); return PHAX_OK;
    case PHAX_SUB_DUAL: break;  // walked by fdec_sub
    case PHAX_SUB_GDN: return gdn_rows(dc, &ly->gdn, y, x, R);
    }
    return phax_fail("fcpu decoder: sub-layer kind %d has no kernel", (int)k);
}
static int k_rms(void *v, float *y, const float *x, const float *g, int R) {
    fcpu_rmsnorm_fwd(y, x, g, R, ((fcpu_decoder *)v)->c->d_model, PHAX_RMSNORM_EPS);
    return PHAX_OK;
}
static int k_mix(void *v, float *m, const float *b, const float *p, int nb, size_t n) {
    (void)v;
    fcpu_mix_fwd(m, b, p, nb, n);
    return PHAX_OK;
}
static int k_axpy(void *v, float *t, float alpha, const float *x, const float *y, size_t n) {
    (void)v;
    for (size_t i = 0; i < n; i++) t[i] = alpha * x[i] + y[i];
    return PHAX_OK;
}
static int k_add(void *v, float *x, const float *y, size_t n) {
    (void)v;
    add_into(x, y, (int)n);
    return PHAX_OK;
}
static const fdec_kernels cpu_kernels = {k_sub, k_rms, k_mix, k_axpy, k_add};

// --- creation ------------------------------------------------------------------------------------

// One arena (fast/model/decode_shared.h): carve() runs once with base == NULL to size it, then
// again to hand out the pieces (the layer plans must be bound first).
static size_t max3(size_t a, size_t b, size_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

static void carve(fcpu_decoder *dc, fdec_arena *a) {
    const phax_model_cfg *c = dc->c;
    const size_t d = c->d_model, qd = (size_t)c->n_heads * c->head_dim;
    const size_t kd = (size_t)c->n_kv_heads * c->head_dim, dh = c->head_dim;
    const size_t Hs = c->gss_hidden;
    const size_t wide = max3(c->ffn_hidden, c->gss_expand, c->ffn_aux_hidden);
    const size_t R = (size_t)dc->chunk;  // rows of every per-token scratch buffer
    float **vd[] = {&dc->x, &dc->e, &dc->h, &dc->y, &dc->t, &dc->mv, &dc->mo, &dc->mh, &dc->mhn};
    for (size_t i = 0; i < sizeof vd / sizeof *vd; i++) *vd[i] = fdec_take(a, R * d * sizeof(float));
    dc->mq = fdec_take(a, R * (d / 2) * sizeof(float));
    dc->mk = fdec_take(a, R * (d / 2) * sizeof(float));
    dc->br = fdec_take(a, MAX_SUB * R * d * sizeof(float));
    dc->bn = fdec_take(a, MAX_SUB * R * d * sizeof(float));
    dc->q = fdec_take(a, R * qd * sizeof(float));
    dc->q_raw = fdec_take(a, R * qd * sizeof(float));
    dc->o = fdec_take(a, R * qd * sizeof(float));
    dc->k_raw = fdec_take(a, R * kd * sizeof(float));
    dc->k_rot = fdec_take(a, R * kd * sizeof(float));
    dc->v_new = fdec_take(a, R * kd * sizeof(float));
    dc->rope = fdec_take(a, fcpu_rope_table_len((int)R, (int)dh) * sizeof(float));
    dc->score = fdec_take(a, (size_t)dc->cap * sizeof(double));
    dc->spass = dc->cap > 0 && R > 1 ? fdec_take(a, R * ((size_t)dc->cap + R) * sizeof(float)) : NULL;
    dc->attn_acc = fdec_take(a, dh * sizeof(double));
    dc->acc = fdec_take(a, d * sizeof(double));
    dc->f1 = fdec_take(a, R * wide * sizeof(float));
    dc->f2 = fdec_take(a, R * wide * sizeof(float));
    dc->f3 = fdec_take(a, R * wide * sizeof(float));
    float **vs[] = {&dc->s1, &dc->s2, &dc->s3, &dc->s4};
    for (int i = 0; i < 4; i++) *vs[i] = fdec_take(a, R * Hs * sizeof(float));
    dc->ga = fdec_take(a, R * (size_t)c->gdn_heads * sizeof(float));
    dc->gb = fdec_take(a, R * (size_t)c->gdn_heads * sizeof(float));
    // Per-layer state and constants, by the kinds the layer has.
    for (int l = 0; l < c->n_layers; l++) fdec_carve_layer(a, c, &dc->L[l]);
}

// Parameter lookup of the model-level parameters (embedding, norms, head), recording the
// first missing name; the blocks' go through phax_plan_bind_block with find_param.
typedef struct {
    const fmodel *m;
    int missing;
} lookup;

static const float *P(lookup *lk, const char *name) {
    const float *p = fmodel_param(lk->m, name);
    if (!p && !lk->missing) lk->missing = 1, phax_fail("fcpu_decoder_new: the model has no %s", name);
    return p;
}

static const float *find_param(void *m, const char *name) {
    return fmodel_param((const fmodel *)m, name);
}

// Plan, parameter pointers and window of layer l (no arena needed). PHAX_ERR on a missing parameter.
static int bind_layer(fcpu_decoder *dc, fdec_layer *ly, int l) {
    if (fdec_bind_layer(dc->c, l, find_param, (void *)dc->m, "fcpu_decoder_new", dc->window, dc->max_len, ly))
        return PHAX_ERR;
    if (dc->parallel && !ly->w.mix_p) ly->w.mix_p = dc->zero_p;  // a frozen mix: p = 0
    return PHAX_OK;
}

fcpu_decoder *fcpu_decoder_new(const fmodel *m, int max_len, int window) {
    return fcpu_decoder_new_chunked(m, max_len, window, FCPU_PREFILL_CHUNK);
}

fcpu_decoder *fcpu_decoder_new_chunked(const fmodel *m, int max_len, int window, int chunk) {
    if (chunk < 1 || chunk > FCPU_PREFILL_CHUNK_MAX) {
        phax_fail("fcpu_decoder_new: prefill chunk %d must be in [1, %d]", chunk, FCPU_PREFILL_CHUNK_MAX);
        return NULL;
    }
    if (!m || !m->params) {
        phax_fail("fcpu_decoder_new: no model");
        return NULL;
    }
    if (max_len < 1) {
        phax_fail("fcpu_decoder_new: max_len %d must be at least 1", max_len);
        return NULL;
    }
    if (window < -1) {
        phax_fail("fcpu_decoder_new: window %d must be -1 (w_long), 0 (full) or positive", window);
        return NULL;
    }
    fcpu_decoder *dc = phax_alloc(sizeof *dc);
    if (!dc) return NULL;
    const phax_model_cfg *c = &m->cfg;
    dc->m = m, dc->c = c, dc->max_len = max_len, dc->chunk = chunk;
    dc->window = phax_plan_window(c, window);
    dc->parallel = phax_plan_rule(c) == PHAX_RULE_PARALLEL;
    dc->alpha = (float)phax_plan_alpha(c);

    lookup top = {m, 0};
    dc->embed = P(&top, "embed.weight");
    dc->head = P(&top, c->tie_embeddings ? "embed.weight" : "lm_head.weight");
    if (dc->parallel) dc->norm_emb = P(&top, "norm_emb.weight");
    else dc->norm_f = P(&top, "norm_f.weight");
    int full_layers = 0;  // the attention layers whose caches grow with the context
    if (top.missing || !(dc->L = phax_alloc((size_t)c->n_layers * sizeof(fdec_layer)))) goto fail;
    for (int l = 0; l < c->n_layers; l++) {
        fdec_attn *A = &dc->L[l].attn;
        if (bind_layer(dc, &dc->L[l], l)) goto fail;
        if (A->cap > dc->cap) dc->cap = A->cap;
        if (A->cap > 0 && A->window == 0) dc->limited = 1, full_layers++;
    }

    fdec_arena a = {0};
    carve(dc, &a);  // sizing pass
    if (!(a.base = dc->arena = phax_alloc(a.off))) goto fail;
    a.off = a.state = a.kv = 0;
    carve(dc, &a);
    dc->arena_bytes = a.off, dc->state_bytes = a.state;
    dc->kv_per_token = fdec_kv_bytes(c, 1) * (size_t)full_layers;
    dc->kv_ring = a.kv - dc->kv_per_token * (size_t)max_len;
    dc->fixed_state = a.state - a.kv;
    for (int l = 0; l < c->n_layers; l++)
        if (phax_block_w_has(&dc->L[l].w, PHAX_SUB_GSS)) {
            fdec_gss *G = &dc->L[l].gss;  // the modes the recurrence steps with (phax/numerics.h)
            phax_gss_modes(G->w.lre, G->w.lim, G->w.cre, G->w.cim, c->gss_hidden, c->gss_state, G->ea, G->ct);
        }
    fcpu_decoder_reset(dc);
    return dc;
fail:
    fcpu_decoder_free(dc);
    return NULL;
}

void fcpu_decoder_free(fcpu_decoder *dc) {
    if (!dc) return;
    phax_free(dc->arena);
    phax_free(dc->L);
    phax_free(dc);
}

static int host_zero(void *ctx, void *p, size_t bytes) {
    (void)ctx;
    memset(p, 0, bytes);
    return PHAX_OK;
}
static int host_fill(void *ctx, double *p, double value, size_t n) {
    (void)ctx;
    for (size_t i = 0; i < n; i++) p[i] = value;
    return PHAX_OK;
}

void fcpu_decoder_reset(fcpu_decoder *dc) {
    for (int l = 0; l < dc->c->n_layers; l++) fdec_reset_layer(dc->c, &dc->L[l], host_zero, host_fill, NULL);
    dc->pos = 0;
}

int fcpu_decoder_pos(const fcpu_decoder *dc) { return dc->pos; }

size_t fcpu_decoder_state_bytes(const fcpu_decoder *dc) { return dc->state_bytes; }

size_t fcpu_decoder_state_bytes_at(const fcpu_decoder *dc, int context) {
    // a ring buffer is allocated, and carried, whole; a full layer's cache holds the context
    const size_t held = context <= 0 ? 0 : context < dc->max_len ? (size_t)context : (size_t)dc->max_len;
    return dc->fixed_state + dc->kv_ring + held * dc->kv_per_token;
}

size_t fcpu_decoder_scratch_bytes(const fcpu_decoder *dc) {
    return dc->arena_bytes - dc->state_bytes + (size_t)dc->c->n_layers * sizeof(fdec_layer) + sizeof *dc;
}

// --- passes ------------------------------------------------------------------------------------

// R (≤ chunk) valid tokens at positions pos .. pos + R − 1 through every layer, the
// states advanced by R; logits: (V) of the last token, or (R, V) of every token when
// all, or NULL.
static int pass_rows(fcpu_decoder *dc, const int32_t *tok, int R, float *logits, int all);

// A pass runs on the calling thread alone (OpenMP's thread count set to 1 for its
// duration; OpenBLAS built with OpenMP follows it): the elementwise kernels'
// OpenMP workers, left spinning after each region, starved OpenBLAS's threads in
// the sgemm calls between them. Measured on this 2-core machine under a load of ~5,
// a 1k prompt at d 256: 420 tok/s with 2 threads, 4.3k with OMP_WAIT_POLICY=passive,
// 4.4k on one thread.
static int pass(fcpu_decoder *dc, const int32_t *tok, int R, float *logits, int all) {
    const int nt = omp_get_max_threads();
    if (nt > 1) omp_set_num_threads(1);
    const int rc = pass_rows(dc, tok, R, logits, all);
    if (nt > 1) omp_set_num_threads(nt);
    return rc;
}

static int pass_rows(fcpu_decoder *dc, const int32_t *tok, int R, float *logits, int all) {
    const phax_model_cfg *c = dc->c;
    const int d = c->d_model, V = c->vocab_size;
    // The pass's RoPE cos/sin, shared by every attention layer.
    if (dc->cap > 0 && fcpu_rope_table(dc->rope, R, c->head_dim, c->rope_base, dc->pos))
        return PHAX_ERR;
    float *x = dc->x;  // the residual stream: (R, d)
    for (int r = 0; r < R; r++) {
        const float *row = dc->embed + (size_t)tok[r] * d;
        if (dc->parallel)  // x_1 = RMSNorm_emb(E[tok])
            fcpu_rmsnorm_fwd(x + (size_t)r * d, row, dc->norm_emb, 1, d, PHAX_RMSNORM_EPS);
        else memcpy(x + (size_t)r * d, row, (size_t)d * sizeof *x);  // x = E[tok]
    }
    const fdec_scratch s = {dc->br, dc->bn, dc->y, dc->t, dc->h};
    for (int l = 0; l < c->n_layers; l++)
        if (fdec_block(&cpu_kernels, dc, l, &dc->L[l].w, dc->parallel, (float)dc->alpha, d, x, R, &s)) return PHAX_ERR;
    dc->pos += R;
    if (logits && all) {
        const float *xf = x;  // (R, d)
        if (dc->norm_f) fcpu_rmsnorm_fwd(dc->e, x, dc->norm_f, R, d, PHAX_RMSNORM_EPS), xf = dc->e;
        matmul(logits, dc->head, xf, R, V, d);
    } else if (logits) {
        const float *xf = x + (size_t)(R - 1) * d;  // PHA: already normalised; the rest: RMSNorm_f
        if (dc->norm_f) fcpu_rmsnorm_fwd(dc->e, xf, dc->norm_f, 1, d, PHAX_RMSNORM_EPS), xf = dc->e;
        matvec(logits, dc->head, xf, V, d);
    }
    return PHAX_OK;
}

// Checks for n more tokens (nothing changed on failure).
static int admit(const fcpu_decoder *dc, const char *fn, const int32_t *tok, int n) {
    return fdec_admit(fn, tok, n, dc->c->vocab_size, dc->limited, dc->max_len, dc->pos);
}

int fcpu_decoder_step(fcpu_decoder *dc, int32_t token, float *logits) {
    if (admit(dc, "fcpu_decoder_step", &token, 1)) return PHAX_ERR;
    return pass(dc, &token, 1, logits, 0);
}

int fcpu_decoder_prefill(fcpu_decoder *dc, const int32_t *tokens, int n, float *logits) {
    if (admit(dc, "fcpu_decoder_prefill", tokens, n)) return PHAX_ERR;
    if (n == 0 && logits) return phax_fail("fcpu_decoder_prefill: logits asked of no tokens");
    for (int i = 0; i < n; i += dc->chunk) {
        const int R = n - i < dc->chunk ? n - i : dc->chunk;
        if (pass(dc, tokens + i, R, i + R == n ? logits : NULL, 0)) return PHAX_ERR;
    }
    return PHAX_OK;
}

int fcpu_decoder_prefill_all(fcpu_decoder *dc, const int32_t *tokens, int n, float *logits) {
    if (admit(dc, "fcpu_decoder_prefill_all", tokens, n)) return PHAX_ERR;
    if (!logits) return phax_fail("fcpu_decoder_prefill_all: no logits buffer");
    const size_t V = (size_t)dc->c->vocab_size;
    for (int i = 0; i < n; i += dc->chunk) {
        const int R = n - i < dc->chunk ? n - i : dc->chunk;
        if (pass(dc, tokens + i, R, logits + (size_t)i * V, 1)) return PHAX_ERR;
    }
    return PHAX_OK;
}
