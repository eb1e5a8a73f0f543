// phax backends: one interface over the ways phax can run a model, so that the
// commands (train, eval, generate, niah, recall) name a backend and never call
// a tier directly.
//
//   ref   float64 oracle (ref/ref_model_*): slow, readable; its decoder is naive (the
//         whole-sequence forward over every token so far, for each set of logits)
//   cpu   float32 fast tier (fast/cpu: fmodel_*, fcpu_decoder_*)
//   cuda  float32 on an NVIDIA GPU: fast/cuda's kernels under the shared fast model runner
//         (src/backend_cuda.c); found only in a build with nvcc on a machine with a device
//   cuda_emu  the same, on the CPU emulation of the CUDA model (tests; slow)
//
// A backend is a table of functions (phax_backend_ops). A model on a backend
// (phax_bmodel) and a decoder (phax_bdecoder) carry the table they were made
// by; every call below dispatches through it. Functions return PHAX_OK or
// PHAX_ERR with a one-line message in phax_error(); a call the backend cannot
// make (e.g. a decoder on ref) fails with a message that says so.
//
// Memory: parameters, gradients and optimizer moments live on the backend, in
// its dtype (phax_backend_dtype: F64 for ref, F32 for cpu); the host reads and
// writes them only by copy (params_get/set, moments_get/set), so a device
// backend can keep them in device memory. Tokens, targets, logits and losses
// are host buffers.
#ifndef PHAX_BACKEND_H
#define PHAX_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "phax/model.h"
#include "phax/ops.h"          // phax_adamw_cfg: AdamW's hyper-parameters (docs/spec.md §2.12)
#include "phax/safetensors.h"  // phax_dtype

typedef struct phax_backend_ops phax_backend_ops;
typedef struct phax_bmodel phax_bmodel;
typedef struct phax_bdecoder phax_bdecoder;

// --- the registry ---------------------------------------------------------------------------

// The backend named `name` ("ref", "cpu"), or NULL with a one-line message in
// phax_error(): "'NAME' is not a backend (ref, cpu)" for an unknown name,
// for cuda, why it cannot run here: "cuda: not built into this phax (...)" without nvcc,
// "cuda: no CUDA device is present (...)" on a machine without a GPU.
const phax_backend_ops *phax_backend_find(const char *name);
// The backends this build has, in order (ref, cpu, ...): i in [0, phax_backend_count()).
int phax_backend_count(void);
const phax_backend_ops *phax_backend_at(int i);
// "ref, cpu": the names of phax_backend_at, for messages and --help.
const char *phax_backend_names(void);
const char *phax_backend_name(const phax_backend_ops *be);
// The dtype of the backend's parameters, gradients, moments and logits.
phax_dtype phax_backend_dtype(const phax_backend_ops *be);
// Whether the backend has a per-token decoder (phax_bdecoder_new).
int phax_backend_has_decoder(const phax_backend_ops *be);

// --- models ---------------------------------------------------------------------------------

// A model of config cfg (resolved here, on a copy) on backend be.
//   params NULL: parameters initialised from seed exactly as phax_model_init does
//     (float64, rounded once on a float32 backend); gradients allocated.
//   params non-NULL: an inference model over these float32 parameters (layout order,
//     e.g. a checkpoint's). The caller keeps them alive and unchanged while the model
//     lives (a float32 backend may read them in place); seed is ignored; backward,
//     zero_grad and the optimizer are refused.
// NULL on failure (phax_error()).
phax_bmodel *phax_bmodel_new(const phax_backend_ops *be, const phax_model_cfg *cfg, uint64_t seed,
                             const float *params);
void phax_bmodel_free(phax_bmodel *m);  // NULL is fine
const phax_backend_ops *phax_bmodel_backend(const phax_bmodel *m);
const phax_model_cfg *phax_bmodel_cfg(const phax_bmodel *m);     // resolved
const phax_layout *phax_bmodel_layout(const phax_bmodel *m);

// tokens, targets: (B, T) int32; a target of −1 is not counted. window: the SWA
// window of this call in the SWAX family (−1 = cfg.w_long, 0 = full attention),
// ignored by the PHA family. A backend keeps what a call on (B, T) needs (e.g.
// fast/cpu's workspace) for the next call of the same shape.
//
// Forward: logits (B, T, V) in the backend's dtype (double for ref, float for cpu),
// or NULL; loss: the mean cross-entropy over the counted targets, or NULL.
int phax_bmodel_forward(phax_bmodel *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                        int window, void *logits, double *loss);
// Per-token cross-entropy (nats) of a forward: losses (B, T), 0 where the target is −1.
int phax_bmodel_token_losses(phax_bmodel *m, const int32_t *tokens, const int32_t *targets, int B,
                             int T, int window, float *losses);
void phax_bmodel_zero_grad(phax_bmodel *m);
// Forward, then backward of the mean loss: gradients += ∂loss/∂params; *loss gets the loss.
int phax_bmodel_backward(phax_bmodel *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                         int window, double *loss);

// AdamW: moments allocated (zero) once; decay[i] = 1 applies weight decay to tensor i
// of the layout. A step (1-based step number) uses the gradients as they are and
// returns the global gradient norm before clipping in *gnorm; PHAX_ERR with nothing
// updated when that norm is not finite (it is still returned).
int phax_bmodel_adamw_init(phax_bmodel *m, const unsigned char *decay);
int phax_bmodel_adamw_step(phax_bmodel *m, const phax_adamw_cfg *c, long step, double *gnorm);

// The gradients where they live, as one span of layout.numel values of the backend's dtype in
// layout order (what backward accumulates into and AdamW reads): for data-parallel training,
// which all-reduces them between backward and the step (src/dist.c). *on_device: 1 when the
// span is device memory (the cuda backend: only device-side code such as NCCL may touch it),
// 0 for host memory (ref, cpu, cuda_emu). NULL with a message for an inference model or a
// backend without the entry.
void *phax_bmodel_grads(phax_bmodel *m, int *on_device);

// Copy parameters [off, off + n) (layout order) out as dtype dt (F32 or F64): a
// conversion from the backend's dtype when they differ (rounding to float once).
int phax_bmodel_params_get(const phax_bmodel *m, size_t off, size_t n, phax_dtype dt, void *out);
// Replace every parameter from src (layout.numel values of dtype F32 or F64).
int phax_bmodel_params_set(phax_bmodel *m, phax_dtype dt, const void *src);
// The AdamW moments (layout.numel values each) in the backend's dtype, copied out / in.
int phax_bmodel_moments_get(const phax_bmodel *m, void *mom1, void *mom2);
int phax_bmodel_moments_set(phax_bmodel *m, const void *mom1, const void *mom2);

// --- per-token decoding ---------------------------------------------------------------------
// As fcpu_decoder_* (phax/fcpu_decode.h): one sequence, state carried token by token;
// logits are float (V) or (n, V). max_len: the most tokens a full-attention decoder
// holds; window as phax_bmodel_forward's. The decoder reads the model's parameters:
// make a new one after they change. ref's decoder holds every token and has no length
// limit. NULL, with a message, when the backend has no decoder.
phax_bdecoder *phax_bdecoder_new(phax_bmodel *m, int max_len, int window);
void phax_bdecoder_free(phax_bdecoder *d);  // NULL is fine
void phax_bdecoder_reset(phax_bdecoder *d);
int phax_bdecoder_step(phax_bdecoder *d, int32_t token, float *logits);
int phax_bdecoder_prefill(phax_bdecoder *d, const int32_t *tokens, int n, float *logits);
int phax_bdecoder_prefill_all(phax_bdecoder *d, const int32_t *tokens, int n, float *logits);
size_t phax_bdecoder_state_bytes(const phax_bdecoder *d);

// --- for implementations --------------------------------------------------------------------
// A backend fills this table; a model / decoder it makes starts with the header
// (phax_bmodel / phax_bdecoder) that points back to it. An entry may be NULL where the
// backend cannot do the call (the dispatcher then fails with "the NAME backend has no ...").
struct phax_bmodel {
    const phax_backend_ops *be;
    const phax_model_cfg *cfg;   // resolved, owned by the implementation
    const phax_layout *layout;   // of cfg, owned by the implementation
    int inference;               // made over borrowed parameters: read-only
};
struct phax_bdecoder {
    const phax_backend_ops *be;
};

struct phax_backend_ops {
    const char *name;     // "ref", "cpu", "cuda"
    const char *summary;  // one line: precision and where it runs
    phax_dtype dtype;     // of parameters, gradients, moments and logits
    phax_bmodel *(*model_new)(const phax_backend_ops *be, const phax_model_cfg *cfg, uint64_t seed,
                              const float *params);
    void (*model_free)(phax_bmodel *m);
    int (*forward)(phax_bmodel *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                   int window, void *logits, double *loss);
    int (*token_losses)(phax_bmodel *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                        int window, float *losses);
    void (*zero_grad)(phax_bmodel *m);
    int (*backward)(phax_bmodel *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                    int window, double *loss);
    int (*adamw_init)(phax_bmodel *m, const unsigned char *decay);
    int (*adamw_step)(phax_bmodel *m, const phax_adamw_cfg *c, long step, double *gnorm);
    int (*params_get)(const phax_bmodel *m, size_t off, size_t n, phax_dtype dt, void *out);
    int (*params_set)(phax_bmodel *m, phax_dtype dt, const void *src);
    int (*moments_get)(const phax_bmodel *m, void *mom1, void *mom2);
    int (*moments_set)(phax_bmodel *m, const void *mom1, const void *mom2);
    void *(*grads)(phax_bmodel *m, int *on_device);
    phax_bdecoder *(*decoder_new)(phax_bmodel *m, int max_len, int window);
    void (*decoder_free)(phax_bdecoder *d);
    void (*decoder_reset)(phax_bdecoder *d);
    int (*decoder_step)(phax_bdecoder *d, int32_t token, float *logits);
    int (*decoder_prefill)(phax_bdecoder *d, const int32_t *tokens, int n, float *logits);
    int (*decoder_prefill_all)(phax_bdecoder *d, const int32_t *tokens, int n, float *logits);
    size_t (*decoder_state_bytes)(const phax_bdecoder *d);
};

// The tables of src/backend_ref.c, src/backend_cpu.c and src/backend_cuda.c (cuda: only in a
// build with nvcc).
extern const phax_backend_ops phax_backend_ref;
extern const phax_backend_ops phax_backend_cpu;
extern const phax_backend_ops phax_backend_cpu_bf16;  // found by name only (src/backend.c)
extern const phax_backend_ops phax_backend_cuda_emu;
extern const phax_backend_ops phax_backend_cuda;

#endif
