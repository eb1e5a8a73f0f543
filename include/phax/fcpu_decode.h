// fast/cpu per-token decoding (float32): run a model of phax/fmodel.h one
// token at a time, carrying its state, for text generation and long-context
// evaluation (needle-in-a-haystack). Step t computes exactly the logits that
// ref_model_forward gives at position t of the sequence of tokens stepped so
// far (checked by tests/test_fast_decode.c for every family), at a cost of
// O(params + context) per step and with no allocation after fcpu_decoder_new.
//
// State per layer (allocated once, in one arena):
//   * attention: a KV cache of the RoPE-rotated keys (unit-normalised in cosine
//     mode) and the values, (Hkv, cap, dh) each. Full attention (window 0): cap =
//     max_len, and stepping past max_len is an error. Sliding window w > 0: a ring
//     buffer of cap = w entries and no length limit. Either way the RoPE position of
//     a token is its absolute index (the number of tokens stepped before it).
//   * GSS (pha, serial): the complex modal state z: (Hs, N) in double, updated
//     z ← e^{λ} z + ū; e^{λ} and C̃ = C·(e^{λ} − 1)/λ are formed once in double at
//     fcpu_decoder_new.
//   * mLSTM (swax, mlstm): C: (NH, dqk, dv), n: (NH, dqk), m: (NH) in double, the
//     recurrent form of docs/spec.md §2.9, started at m = −∞ (C = n = 0). That start
//     makes m_t = max(m_{t−1} + logσ(f̃_t), ĩ_t) equal to the parallel form's
//     max_s D̃_ts at every t, so decoding computes the models' cell (the parallel
//     form) for any eps — not only within the stabiliser bound that separates the
//     m0 = 0 recurrent form from it.
//   * Gated DeltaNet (swax_gdn): Sᵀ: (GH, dk, dv) in double, the delta-rule step of
//     docs/spec.md §2.13 per token from S = 0; the short convolution's last K − 1
//     inputs (q, k, v: 2d floats each) in a ring by position, zero before the first.
//
// Numerics: float32 storage and float32 matrix-vector products (cblas_sgemv);
// attention scores, softmax sums and the attention output accumulated in double;
// RoPE angles, the GSS, mLSTM and GDN states and the scalar gates in double.
// Threads: the calling thread, plus OpenBLAS's inside the sgemv calls of a step;
// a prefill pass runs on the calling thread alone (see pass() in fast/cpu/decode.c).
//
// The decoder keeps pointers into the model's parameters (read at every step) and
// precomputes the GSS modes from them at creation: make a new decoder after the
// parameters change. One decoder is one sequence; it is not safe to step it from
// two threads at once (different decoders on one model are independent).
#ifndef PHAX_FCPU_DECODE_H
#define PHAX_FCPU_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "phax/fmodel.h"

typedef struct fcpu_decoder fcpu_decoder;

// A decoder for model m at position 0. max_len (≥ 1): the most tokens a sequence
// may hold when the model has full attention (the KV cache size); ignored as a
// limit otherwise. window: the SWA window of the SWAX family (−1 = cfg.w_long,
// 0 = full, w > 0 = w), as ref_model_forward's; the PHA family uses
// cfg.attn_window and ignores it (it must still be ≥ −1). NULL on failure
// (message in phax_error()).
fcpu_decoder *fcpu_decoder_new(const fmodel *m, int max_len, int window);
void fcpu_decoder_free(fcpu_decoder *d);
// Back to position 0 with an empty state (no allocation).
void fcpu_decoder_reset(fcpu_decoder *d);
// Tokens consumed so far (the RoPE position of the next token).
int fcpu_decoder_pos(const fcpu_decoder *d);
// Bytes of the per-sequence state, what is carried from one token to the next:
// KV caches at their allocated capacity (max_len entries for full attention, the
// window for a ring buffer), GSS modal states, mLSTM states (not the scratch
// vectors or the precomputed GSS modes). With Hkv = n_kv_heads, dh = head_dim:
//   Σ over attention layers 2·Hkv·dh·cap·4  +  Σ over GSS layers 2·Hs·N·8
//   + Σ over mLSTM layers NH·(dqk·dv + dqk + 1)·8
//   + Σ over GDN layers GH·dk·dv·8 + (K − 1)·2d·4.
size_t fcpu_decoder_state_bytes(const fcpu_decoder *d);
// The same for a decoder holding `context` tokens: full-attention KV caches with
// min(context, max_len) entries (context ≤ 0: none); ring buffers, GSS and mLSTM
// states as allocated, whatever the context. It equals fcpu_decoder_state_bytes of
// a decoder made by fcpu_decoder_new(m, context, window) for 1 ≤ context ≤ max_len.
size_t fcpu_decoder_state_bytes_at(const fcpu_decoder *d, int context);
// Every other byte the decoder allocated: the working buffers (per-pass scratch,
// the attention score rows, which grow with max_len for full attention), the
// precomputed GSS modes, the arena's 64-byte padding, the layer table and the
// decoder itself. state_bytes + scratch_bytes = all of the decoder's memory (not
// the model's parameters).
size_t fcpu_decoder_scratch_bytes(const fcpu_decoder *d);

// Feed one token; logits: (V) gets the next-token logits, or NULL to skip the
// output head (e.g. while reading a prompt). PHAX_ERR, with nothing written and
// the state unchanged, for a token outside [0, V) or a full-attention decoder
// already holding max_len tokens.
int fcpu_decoder_step(fcpu_decoder *d, int32_t token, float *logits);

// Prefill: feed n ≥ 0 tokens at once, as n steps would (same state after, same
// next-token logits within float32 rounding: suite fcpu_prefill in tests/test_fast_decode.c), but in
// passes of up to `chunk` tokens whose projections and FFNs are matrix-matrix
// products (cblas_sgemm) reading each weight once per pass instead of once per
// token, and whose attention is matrix products too (scores against the ring's
// keys and the pass's own, float32 as in the forward's kernel; softmax in
// double). The recurrences — the GSS modal state, the mLSTM (C, n, m) — still
// advance token by token inside a pass, in double as in a step, and the pass's
// keys go into the KV cache / ring buffer after it, so the state handed to the
// next step is the decoder's own. logits: (V) of
// the last token (n ≥ 1), or NULL. PHAX_ERR, with nothing consumed, for a token
// outside [0, V) or more tokens than a full-attention decoder has room for.
int fcpu_decoder_prefill(fcpu_decoder *d, const int32_t *tokens, int n, float *logits);
// The same, with the next-token logits of every token: logits: (n, V) (e.g. the
// losses of a long evaluation read in passes, phax eval --carry).
int fcpu_decoder_prefill_all(fcpu_decoder *d, const int32_t *tokens, int n, float *logits);

// The prefill pass length of fcpu_decoder_new, and the most fcpu_decoder_new_chunked
// takes. The scratch grows by ~chunk × (20 d + 3 hidden) floats.
#define FCPU_PREFILL_CHUNK 128
#define FCPU_PREFILL_CHUNK_MAX 4096
// fcpu_decoder_new with a prefill pass length chunk in [1, FCPU_PREFILL_CHUNK_MAX].
fcpu_decoder *fcpu_decoder_new_chunked(const fmodel *m, int max_len, int window, int chunk);

#endif
