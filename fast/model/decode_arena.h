// The arena of both tiers' decoders (fast/cpu/decode.c, fast/cuda/decode.cu): one allocation,
// carved by a first pass with base NULL that only counts (its size, and of it the carried
// state and the KV caches: state_bytes, kv_per_token), then by a second that hands out the
// pieces at the same offsets. Pieces are 64-byte aligned. C and C++ (the CUDA decoder).
#ifndef PHAX_FAST_DECODE_ARENA_H
#define PHAX_FAST_DECODE_ARENA_H

#include <stddef.h>

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

#endif
