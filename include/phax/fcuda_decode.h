// fast/cuda per-token decoding and prefill (fast/cuda/decode.cu): fast/cpu's decoder contract
// (phax/fcpu_decode.h) with the model's parameters, the carried state and every working
// buffer in device memory. Step t gives the logits ref_model_forward gives at position t of
// the tokens stepped so far (tests/test_fast_decode.c runs its decode/* and prefill/* rows on
// the cuda backends too).
//
// State per layer, as fast/cpu's: the KV cache of rotated (cosine: unit) keys and the values,
// (Hkv, cap, dh) each, cap = max_len for full attention, the window for a ring buffer; the GSS
// modal state z (Hs, N) complex double, z ← e^{λ} z + ū with e^{λ} and C̃ formed once in double
// at creation; the mLSTM (C, n, m) in double from m = −∞ (the parallel form's stabiliser at
// every step); the Gated DeltaNet's Sᵀ (GH, dk, dv) in double from 0 and its short
// convolution's last K − 1 inputs (q, k, v: 2d floats each) in a ring by position, zero before
// the first. state_bytes counts the same bytes as fcpu_decoder_state_bytes.
//
// A pass of R ≤ chunk tokens (a step is R = 1): the projections, FFNs and the head are cuBLAS
// products over the R rows; attention is one block per (query head, row), an online softmax
// in double over the visible keys — the ring's (positions before the pass) and the pass's own
// (its keys enter the ring after every row has attended, so a pass longer than the window
// reads nothing overwritten); the GSS, mLSTM and Gated DeltaNet recurrences (the latter with
// its convolution) advance token by token inside the pass (one block per channel / head, in
// double), as a step does.
//
// Tokens and logits are HOST arrays (the decoder uploads the pass's tokens and downloads the
// logits it is asked for); the model's parameters are device memory, read at every pass (make
// a new decoder after they change). The stream is the default one. One decoder is one sequence.
#ifndef PHAX_FCUDA_DECODE_H
#define PHAX_FCUDA_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "phax/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fcuda_decoder fcuda_decoder;

// The prefill pass length of decoder_new's callers (the backends), and the most it takes.
// Scratch grows by ~chunk × (20 d + 3 hidden + V) floats: the logits of prefill_all's pass.
#define FCUDA_PREFILL_CHUNK 256
#define FCUDA_PREFILL_CHUNK_MAX 4096

#ifdef __cplusplus
}
#endif

#endif

// --- the entry points: the device's names, declared again under the emulator's by
// phax/fcuda_emu.h (so outside the include guard, as phax/fcuda.h's) ----------------------------
#ifdef __cplusplus
extern "C" {
#endif

// A decoder at position 0 for the model (cfg resolved, its layout, params: device, layout
// order). max_len, window as fcpu_decoder_new's; chunk in [1, FCUDA_PREFILL_CHUNK_MAX].
// NULL on failure (message in phax_error()).
fcuda_decoder *fcuda_decoder_new(const phax_model_cfg *cfg, const phax_layout *L,
                                 const float *params, int max_len, int window, int chunk);
void fcuda_decoder_free(fcuda_decoder *d);
// Back to position 0, empty state. PHAX_ERR if the device failed (the decoder then refuses
// every call until a reset succeeds).
int fcuda_decoder_reset(fcuda_decoder *d);
int fcuda_decoder_pos(const fcuda_decoder *d);
size_t fcuda_decoder_state_bytes(const fcuda_decoder *d);
// As fcpu_decoder_step / _prefill / _prefill_all; tokens and logits on the host.
int fcuda_decoder_step(fcuda_decoder *d, int32_t token, float *logits);
int fcuda_decoder_prefill(fcuda_decoder *d, const int32_t *tokens, int n, float *logits);
int fcuda_decoder_prefill_all(fcuda_decoder *d, const int32_t *tokens, int n, float *logits);

#ifdef __cplusplus
}
#endif
