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

#include "phax/core.h"  // phax_fail

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
// A KV cache: (Hkv, cap, dh) floats (kd = Hkv·dh), part of the state.
static inline float *fdec_take_kv(fdec_arena *a, size_t cap, size_t kd) {
    a->kv += cap * kd * sizeof(float);
    return (float *)fdec_take_state(a, cap * kd * sizeof(float));
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

#endif
