// The naive decoder (src/backend_naive.c): any backend's decoder entries over its own forward.
#ifndef PHAX_SRC_BACKEND_NAIVE_H
#define PHAX_SRC_BACKEND_NAIVE_H

#include "phax/backend.h"

phax_bdecoder *phax_naive_decoder_new(phax_bmodel *m, int max_len, int window);
void phax_naive_decoder_free(phax_bdecoder *d);
void phax_naive_decoder_reset(phax_bdecoder *d);
int phax_naive_decoder_step(phax_bdecoder *d, int32_t token, float *logits);
int phax_naive_decoder_prefill(phax_bdecoder *d, const int32_t *tokens, int n, float *logits);
int phax_naive_decoder_prefill_all(phax_bdecoder *d, const int32_t *tokens, int n, float *logits);
size_t phax_naive_decoder_state_bytes(const phax_bdecoder *d);

// The decoder entries of a backend table that uses it.
#define PHAX_NAIVE_DECODER_OPS                                                                    \
    .decoder_new = phax_naive_decoder_new, .decoder_free = phax_naive_decoder_free,               \
    .decoder_reset = phax_naive_decoder_reset, .decoder_step = phax_naive_decoder_step,           \
    .decoder_prefill = phax_naive_decoder_prefill, .decoder_prefill_all = phax_naive_decoder_prefill_all, \
    .decoder_state_bytes = phax_naive_decoder_state_bytes

#endif
