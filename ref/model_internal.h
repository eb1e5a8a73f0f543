// Shared pieces of the ref models (not public API).
#ifndef PHAX_REF_MODEL_INTERNAL_H
#define PHAX_REF_MODEL_INTERNAL_H

#include "phax/ref_model.h"

// Parameter / gradient of block l by its name suffix: P(m, l, "attn.wq.weight").
// Returns NULL if absent. G() gives the gradient slot, or NULL when grads is NULL.
const double *rm_param(const ref_model *m, int l, const char *suffix);
double *rm_grad(const ref_model *m, double *grads, int l, const char *suffix);
// Same for top-level names ("embed.weight").
const double *rm_top(const ref_model *m, const char *name);
double *rm_top_grad(const ref_model *m, double *grads, const char *name);

// Scratch that must be freed; NULL with an error recorded on failure.
double *rm_alloc(size_t n);

// Attention sub-layer of block l: q = x Wqᵀ, k = x Wkᵀ, v = x Wvᵀ, attention
// (GQA, RoPE, cfg score mode, window), y = o Woᵀ. x, y: (B, T, d).
int rm_attn_fwd(double *y, const double *x, const ref_model *m, int l, int B, int T, int window);
// dx += ∂/∂x, grads += ∂/∂(wq, wk, wv, wo, logscale). dx or grads may be NULL.
int rm_attn_bwd(double *dx, double *grads, const double *dy, const double *x, const ref_model *m,
                int l, int B, int T, int window);

// Embedding lookup (B·T rows) and the output head: logits = x Eᵀ (tied) or x lm_headᵀ.
int rm_embed_fwd(double *x, const ref_model *m, const int32_t *tokens, size_t n);
void rm_embed_bwd(const ref_model *m, double *grads, const double *dx, const int32_t *tokens, size_t n);
// Head + loss. x: (n, d) final hidden; logits: (n, V) output (or NULL: internal).
// When grads != NULL also computes dx += ∂loss/∂x and head gradients.
int rm_head(const ref_model *m, double *grads, const double *x, double *dx, const int32_t *targets,
            size_t n, double *logits, double *loss);

// Family runners: forward (grads == NULL) or forward + backward (grads != NULL).
int ref_pha_family_run(const ref_model *m, const int32_t *tokens, const int32_t *targets, int B,
                       int T, double *logits, double *loss, double *grads);
int ref_swax_family_run(const ref_model *m, const int32_t *tokens, const int32_t *targets, int B,
                        int T, int window, double *logits, double *loss, double *grads);

#endif
