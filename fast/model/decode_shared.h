// What both tiers' decoders (fast/cpu/decode.c, fast/cuda/decode.cu) share, written once; C
// and C++ (the CUDA decoder).
//
// The arena: one allocation, carved by a first pass with base NULL that only counts (its size,
// and of it the carried state and the KV caches: state_bytes, kv_per_token), then by a second
// that hands out the pieces at the same offsets. Pieces are 64-byte aligned.
#ifndef PHAX_FAST_DECODE_SHARED_H
#define PHAX_FAST_DECODE_SHARED_H

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

// One layer's carried state and per-layer constants, carved by the kinds its block has (so both
// tiers' state_bytes count the same bytes): the KV caches (Hkv, cap, dh) floats each; the GSS's
// e^λ (N) and C̃ (Hs, N), constants, and its modal state z (Hs, N), complex double; the mLSTM's
// C (NH, dqk, dv), n (NH, dqk) and m (NH) in double; the Gated DeltaNet's state Sᵀ (GH, dk, dv) in
// double and its convolution's last K − 1 inputs (K − 1, 2d: q's d/2, k's d/2, v's d), float. NULL
// where the block has no such kind.
typedef struct {
    float *k_cache, *v_cache;
    double *gss_ea, *gss_ct, *gss_z;
    double *ml_C, *ml_n, *ml_m;
    double *gd_S;
    float *gd_conv;
} fdec_layer_state;

static inline fdec_layer_state fdec_carve_layer(fdec_arena *a, const phax_model_cfg *c, const phax_block_w *w,
                                                size_t cap) {
    const size_t kd = (size_t)c->n_kv_heads * c->head_dim, Hs = (size_t)c->gss_hidden, N = (size_t)c->gss_state;
    const size_t NH = (size_t)c->mlstm_heads, dqk = NH ? (size_t)c->d_model / 2 / NH : 0,
                 dv = NH ? (size_t)c->d_model / NH : 0;
    fdec_layer_state s = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    if (phax_block_w_has(w, PHAX_SUB_ATTN)) {
        s.k_cache = fdec_take_kv(a, cap, kd);
        s.v_cache = fdec_take_kv(a, cap, kd);
    }
    if (phax_block_w_has(w, PHAX_SUB_GSS)) {
        s.gss_ea = (double *)fdec_take(a, 2 * N * sizeof(double));
        s.gss_ct = (double *)fdec_take(a, 2 * Hs * N * sizeof(double));
        s.gss_z = (double *)fdec_take_state(a, 2 * Hs * N * sizeof(double));
    }
    if (phax_block_w_has(w, PHAX_SUB_MLSTM)) {
        s.ml_C = (double *)fdec_take_state(a, NH * dqk * dv * sizeof(double));
        s.ml_n = (double *)fdec_take_state(a, NH * dqk * sizeof(double));
        s.ml_m = (double *)fdec_take_state(a, NH * sizeof(double));
    }
    if (phax_block_w_has(w, PHAX_SUB_GDN)) {
        const size_t GH = (size_t)c->gdn_heads, dk = (size_t)c->d_model / 2 / GH, gdv = (size_t)c->d_model / GH;
        s.gd_S = (double *)fdec_take_state(a, GH * dk * gdv * sizeof(double));
        s.gd_conv = (float *)fdec_take_state(a, (size_t)(c->gdn_conv - 1) * 2 * c->d_model * sizeof(float));
    }
    return s;
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
