// What both tiers' decoders (fast/cpu/decode.c, fast/cuda/decode.cu) share, written once; C
// and C++ (the CUDA decoder).
//
// The arena: one allocation, carved by a first pass with base NULL that only counts (its size,
// and of it the carried state and the KV caches: state_bytes, kv_per_token), then by a second
// that hands out the pieces at the same offsets. Pieces are 64-byte aligned.
#ifndef PHAX_FAST_DECODE_SHARED_H
#define PHAX_FAST_DECODE_SHARED_H

#include <math.h>  // INFINITY
#include <stddef.h>
#include <stdint.h>

#include "phax/core.h"        // phax_fail
#include "phax/model_plan.h"  // phax_block_w: a block's plan and weights

typedef struct {
    char *base;         // NULL: the counting pass
    size_t off, state;  // bytes so far; of them, per-sequence state
    size_t kv;          // of the state, the KV caches
} fdec_arena;

static inline void *fdec_take(fdec_arena *a, size_t bytes) {
    void *p = a->base ? a->base + a->off : NULL;
    a->off += (bytes + 63) / 64 * 64;
    return p;
}
// Per-sequence state (reset to zero by the decoder's reset; counted in state_bytes).
static inline void *fdec_take_state(fdec_arena *a, size_t bytes) {
    a->state += bytes;
    return fdec_take(a, bytes);
}
// Bytes of one layer's keys and values for `entries` positions: 2 · (Hkv, entries, dh) floats.
static inline size_t fdec_kv_bytes(const phax_model_cfg *c, size_t entries) {
    return 2 * entries * (size_t)c->n_kv_heads * (size_t)c->head_dim * sizeof(float);
}

// Block l's attention window and KV capacity in a decoder of max_len tokens made with the call
// window `window` (phax_plan_window's: 0 = full): the layer's window (phax_plan_layer_window:
// swa_full's full layers 0) and a ring of that many slots, or every key up to max_len for a full
// layer; both 0 where the block has no attention.
static inline void fdec_layer_window(const phax_model_cfg *c, const phax_block_w *w, int l, int window,
                                     int max_len, int *lw, int *cap) {
    *lw = 0, *cap = 0;
    if (!phax_block_w_has(w, PHAX_SUB_ATTN)) return;
    *lw = phax_plan_layer_window(c, l, window);
    *cap = *lw > 0 ? *lw : max_len;
}

// A KV cache: (Hkv, cap, dh) floats (kd = Hkv·dh), part of the state.
static inline float *fdec_take_kv(fdec_arena *a, size_t cap, size_t kd) {
    a->kv += cap * kd * sizeof(float);
    return (float *)fdec_take_state(a, cap * kd * sizeof(float));
}

// --- one layer: its weights, its carried state, its per-layer constants -----------------------
// The same layout on both tiers (host pointers on fast/cpu, device pointers on fast/cuda): the
// block's plan and block-level weights (w.mix_p: the decoder's zeros when the mix is frozen), and
// per sub-layer kind its weights (phax_plan_bind_block, phax_plan_bind_gdn) and state; pointers
// NULL where the block has no such kind.
typedef struct {
    phax_attn_w w;   // weights
    int window;      // this layer's window (0 = full) and KV capacity: the window's ring, or
    int cap;         // max_len for full attention (fdec_layer_window)
    float *k_cache;  // (Hkv, cap, dh): keys rotated (and unit-normalised in cosine mode)
    float *v_cache;  // (Hkv, cap, dh); each head's keys contiguous for its scan
} fdec_attn;
typedef struct {
    phax_gss_w w;  // weights; Λ and C read once, at creation (phax_gss_modes)
    double *ea;    // e^{λ_n}: (N, 2) re, im — a constant
    double *ct;    // C̃_hn = C_hn (e^{λ_n} − 1)/λ_n: (Hs, N, 2) — a constant
    double *z;     // modal state: (Hs, N, 2)
} fdec_gss;
typedef struct {
    phax_mlstm_w w;  // weights
    double *C;       // (NH, dqk, dv)
    double *n;       // (NH, dqk)
    double *m;       // (NH) stabiliser; −∞ = the start
} fdec_mlstm;
typedef struct {
    phax_gdn_w w;  // weights
    double *S;     // the state's transpose Sᵀ: (GH, dk, dv)
    float *conv;   // the convolution's last K − 1 inputs, a ring by position: (K − 1, 2d) = q | k | v
} fdec_gdn;
typedef struct {
    phax_block_w w;
    fdec_attn attn;
    fdec_gss gss;
    fdec_mlstm mlstm;
    fdec_gdn gdn;
} fdec_layer;

// Layer l's plan and weights (through find(ctx, name), the tier's lookup: PHAX_ERR naming `who`
// on a missing parameter) and its attention's window and KV capacity (window: the call's).
static inline int fdec_bind_layer(const phax_model_cfg *c, int l, phax_param_find find, void *ctx, const char *who,
                                  int window, int max_len, fdec_layer *ly) {
    if (phax_plan_bind_block(c, l, find, ctx, who, &ly->w, &ly->attn.w, &ly->gss.w, &ly->mlstm.w) ||
        phax_plan_bind_gdn(c, l, find, ctx, who, &ly->gdn.w))
        return PHAX_ERR;
    fdec_layer_window(c, &ly->w, l, window, max_len, &ly->attn.window, &ly->attn.cap);
    return PHAX_OK;
}

// The sizes of layer l's state, by kind (0 where its block has none), in elements.
typedef struct {
    size_t gss_z;             // 2·Hs·N doubles
    size_t ml_C, ml_n, ml_m;  // NH·dqk·dv, NH·dqk, NH doubles
    size_t gd_S, gd_conv;     // GH·dk·dv doubles, (K − 1)·2d floats
} fdec_state_sizes;
static inline fdec_state_sizes fdec_layer_sizes(const phax_model_cfg *c, const phax_block_w *w) {
    fdec_state_sizes z = {0, 0, 0, 0, 0, 0};
    const size_t d = (size_t)c->d_model;
    if (phax_block_w_has(w, PHAX_SUB_GSS)) z.gss_z = 2 * (size_t)c->gss_hidden * c->gss_state;
    if (phax_block_w_has(w, PHAX_SUB_MLSTM)) {
        const size_t NH = (size_t)c->mlstm_heads;
        z.ml_C = NH * (d / 2 / NH) * (d / NH), z.ml_n = NH * (d / 2 / NH), z.ml_m = NH;
    }
    if (phax_block_w_has(w, PHAX_SUB_GDN)) {
        const size_t GH = (size_t)c->gdn_heads;
        z.gd_S = GH * (d / 2 / GH) * (d / GH), z.gd_conv = (size_t)(c->gdn_conv - 1) * 2 * d;
    }
    return z;
}

// Layer ly's carried state and per-layer constants carved from the arena, by the kinds its block
// has (so both tiers' state_bytes count the same bytes): the KV caches (Hkv, cap, dh) floats
// each; the GSS's e^λ and C̃ (constants) and its modal state z, complex double; the mLSTM's C,
// n, m in double; the Gated DeltaNet's Sᵀ in double and its convolution's ring, float.
static inline void fdec_carve_layer(fdec_arena *a, const phax_model_cfg *c, fdec_layer *ly) {
    const size_t kd = (size_t)c->n_kv_heads * c->head_dim, N = (size_t)c->gss_state;
    const fdec_state_sizes z = fdec_layer_sizes(c, &ly->w);
    if (phax_block_w_has(&ly->w, PHAX_SUB_ATTN)) {
        ly->attn.k_cache = fdec_take_kv(a, (size_t)ly->attn.cap, kd);
        ly->attn.v_cache = fdec_take_kv(a, (size_t)ly->attn.cap, kd);
    }
    if (phax_block_w_has(&ly->w, PHAX_SUB_GSS)) {
        ly->gss.ea = (double *)fdec_take(a, 2 * N * sizeof(double));
        ly->gss.ct = (double *)fdec_take(a, z.gss_z * sizeof(double));
        ly->gss.z = (double *)fdec_take_state(a, z.gss_z * sizeof(double));
    }
    if (phax_block_w_has(&ly->w, PHAX_SUB_MLSTM)) {
        ly->mlstm.C = (double *)fdec_take_state(a, z.ml_C * sizeof(double));
        ly->mlstm.n = (double *)fdec_take_state(a, z.ml_n * sizeof(double));
        ly->mlstm.m = (double *)fdec_take_state(a, z.ml_m * sizeof(double));
    }
    if (phax_block_w_has(&ly->w, PHAX_SUB_GDN)) {
        ly->gdn.S = (double *)fdec_take_state(a, z.gd_S * sizeof(double));
        ly->gdn.conv = (float *)fdec_take_state(a, z.gd_conv * sizeof(float));
    }
}

// Layer ly's state back to the start, through the tier's memory calls: zero(ctx, p, bytes) and
// fill(ctx, p, value, n) on doubles. The recurrent states start at 0 (the mLSTM's stabiliser at
// −∞), the convolution's ring at 0 (the inputs before position 0); the KV caches need no
// clearing (only slots of positions < pos are read), nor the constants.
static inline int fdec_reset_layer(const phax_model_cfg *c, const fdec_layer *ly,
                                   int (*zero)(void *ctx, void *p, size_t bytes),
                                   int (*fill)(void *ctx, double *p, double value, size_t n), void *ctx) {
    const fdec_state_sizes z = fdec_layer_sizes(c, &ly->w);
    if (z.gss_z && zero(ctx, ly->gss.z, z.gss_z * sizeof(double))) return PHAX_ERR;
    if (z.ml_C && (zero(ctx, ly->mlstm.C, z.ml_C * sizeof(double)) || zero(ctx, ly->mlstm.n, z.ml_n * sizeof(double)) ||
                   fill(ctx, ly->mlstm.m, -INFINITY, z.ml_m)))
        return PHAX_ERR;
    if (z.gd_S && zero(ctx, ly->gdn.S, z.gd_S * sizeof(double))) return PHAX_ERR;
    if (z.gd_conv && zero(ctx, ly->gdn.conv, z.gd_conv * sizeof(float))) return PHAX_ERR;
    return PHAX_OK;
}

// The checks before n more tokens enter a decoder at position pos (nothing changed on failure):
// tokens in [0, V), and, where full attention keeps every key (limited), room below max_len.
// fn names the caller in the message.
static inline int fdec_admit(const char *fn, const int32_t *tok, int n, int V, int limited, int max_len, int pos) {
    if (n < 0 || (n > 0 && !tok)) return phax_fail("%s: %d tokens", fn, n);
    for (int i = 0; i < n; i++)
        if (tok[i] < 0 || tok[i] >= V) return phax_fail("%s: token %d is outside [0, %d)", fn, (int)tok[i], V);
    if (limited && n > max_len - pos)
        return phax_fail("%s: the decoder holds %d of max_len = %d tokens and cannot take %d more "
                         "(full attention keeps every key); reset it or create one with a larger max_len",
                         fn, pos, max_len, n);
    if (n > 0x7fffffff - pos) return phax_fail("%s: position limit %d reached", fn, 0x7fffffff);
    return PHAX_OK;
}

// --- the layer walk --------------------------------------------------------------------------
// A block's sub-layers in the plan's order under its rule, written once; a tier supplies the
// kernels (dc: its decoder). Every entry returns PHAX_OK or PHAX_ERR (phax_error()).
typedef struct {
    // y (R, d) = sub-layer `kind` of layer l on x (R, d), for every kind but DUAL (walked here)
    int (*sub)(void *dc, int l, phax_sub_kind kind, float *y, const float *x, int R);
    int (*rms)(void *dc, float *y, const float *x, const float *g, int R);             // rows of d
    int (*mix)(void *dc, float *m, const float *b, const float *p, int nb, size_t n);  // PHA's mix
    int (*axpy)(void *dc, float *t, float alpha, const float *x, const float *y, size_t n);  // t = αx + y
    int (*add)(void *dc, float *x, const float *y, size_t n);                              // x += y
} fdec_kernels;

// The decoder's buffers a walk uses: br, bn (nsub·R·d: the branches' raw and normed rows), y,
// t, h (R·d each).
typedef struct {
    float *br, *bn, *y, *t, *h;
} fdec_scratch;

// y = sub-layer kind of layer l on x; DUAL: SwiGLU(x) + aux(x), the aux part through t.
static inline int fdec_sub(const fdec_kernels *k, void *dc, int l, phax_sub_kind kind, float *y,
                           const float *x, int R, size_t n, float *t) {
    if (kind != PHAX_SUB_DUAL) return k->sub(dc, l, kind, y, x, R);
    if (k->sub(dc, l, PHAX_SUB_SWIGLU, y, x, R) || k->sub(dc, l, PHAX_SUB_AUX, t, x, R)) return PHAX_ERR;
    return k->add(dc, y, t, n);
}

// Block l (plan and weights w) on x: (R, d), in place.
//   parallel (pha): b_i = RMSNorm_i(branch_i(x)); x ← RMSNorm_res(α x + mix(p; b)) — branch i's
//     rows at br + i·R·d, so the mix sees (nsub, R·d);
//   prenorm (the rest): for each sub-layer, x ← x + F(RMSNorm x).
static inline int fdec_block(const fdec_kernels *k, void *dc, int l, const phax_block_w *w, int parallel,
                             float alpha, int d, float *x, int R, const fdec_scratch *s) {
    const size_t n = (size_t)R * d;
    if (parallel) {
        for (int i = 0; i < w->nsub; i++) {
            float *r = s->br + i * n, *b = s->bn + i * n;
            if (fdec_sub(k, dc, l, w->sub[i], r, x, R, n, s->t) || k->rms(dc, b, r, w->norm[i], R)) return PHAX_ERR;
        }
        if (k->mix(dc, s->y, s->bn, w->mix_p, w->nsub, n) || k->axpy(dc, s->t, alpha, x, s->y, n)) return PHAX_ERR;
        return k->rms(dc, x, s->t, w->norm_res, R);
    }
    for (int i = 0; i < w->nsub; i++)
        if (k->rms(dc, s->h, x, w->norm[i], R) || fdec_sub(k, dc, l, w->sub[i], s->y, s->h, R, n, s->t) ||
            k->add(dc, x, s->y, n))
            return PHAX_ERR;
    return PHAX_OK;
}

#endif
