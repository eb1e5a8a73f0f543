// The backend registry and the dispatch of phax/backend.h: every call goes
// through the table of the backend that made the model or decoder.
#include "phax/backend.h"

#include <stdio.h>
#include <string.h>

#include "phax/core.h"
#include "phax/fast.h"  // phax_cuda_info

// The backends of this build, in the order --help lists them.
static const phax_backend_ops *const built[] = {&phax_backend_ref, &phax_backend_cpu, &phax_backend_cuda_emu};
#define N_BUILT ((int)(sizeof built / sizeof *built))
// Backends found by name but not listed by phax_backend_at: they compute at a lower precision
// than float32, so the tests that hold every listed backend to float32's bound skip them
// (cpu_bf16 has its own bounds: tests/test_fcpu_bf16.c).
static const phax_backend_ops *const by_name[] = {&phax_backend_cpu_bf16};

// Backends phax knows of but this build lacks, and why. For cuda the why depends on the build
// and the machine (phax_cuda_info: fast/cuda not compiled, compiled but no device, or a device).
static const char *cuda_why(void) {
    static char why[400];
    char info[256];
    phax_cuda_info(info, sizeof info);
    if (strstr(info, "not built"))
        snprintf(why, sizeof why, "not built into this phax (meson found no nvcc; use cpu)");
    else if (strstr(info, "no device"))
        snprintf(why, sizeof why, "no CUDA device is present (%s); use cpu", info);
    else
        snprintf(why, sizeof why, "this phax does not load the CUDA libraries (cuBLAS and cuFFT cost every "
                 "command ~0.5 s and ~220 MB); run phax-cuda, built beside it (%s)", info);
    return why;
}

// The device table (src/backend_cuda_dev.c) where this program links it: phax-cuda and
// bench_cuda do, phax does not (a weak reference: NULL there).
extern const phax_backend_ops phax_backend_cuda __attribute__((weak));

// The cuda backend when this program has it and a device is present, else NULL.
static const phax_backend_ops *cuda_here(void) {
    char info[256];
    phax_cuda_info(info, sizeof info);
    if (&phax_backend_cuda && !strstr(info, "not built") && !strstr(info, "no device")) return &phax_backend_cuda;
    return NULL;
}
static const struct {
    const char *name;
    const char *(*why)(void);
} missing[] = {
    {"cuda", cuda_why},
};

int phax_backend_count(void) { return N_BUILT; }

const phax_backend_ops *phax_backend_at(int i) { return i >= 0 && i < N_BUILT ? built[i] : NULL; }

const char *phax_backend_names(void) { return "ref, cpu, cpu_bf16, cuda, cuda_emu"; }

const char *phax_backend_name(const phax_backend_ops *be) { return be->name; }

phax_dtype phax_backend_dtype(const phax_backend_ops *be) { return be->dtype; }

int phax_backend_has_decoder(const phax_backend_ops *be) { return be->decoder_new != NULL; }

const phax_backend_ops *phax_backend_find(const char *name) {
    for (int i = 0; i < N_BUILT; i++)
        if (!strcmp(name, built[i]->name)) return built[i];
    for (size_t i = 0; i < sizeof by_name / sizeof *by_name; i++)
        if (!strcmp(name, by_name[i]->name)) return by_name[i];
    const phax_backend_ops *cuda = strcmp(name, "cuda") ? NULL : cuda_here();
    if (cuda) return cuda;
    for (size_t i = 0; i < sizeof missing / sizeof *missing; i++)
        if (!strcmp(name, missing[i].name)) {
            phax_fail("%s: %s", name, missing[i].why());
            return NULL;
        }
    phax_fail("'%s' is not a backend (%s)", name, phax_backend_names());
    return NULL;
}

// --- models ---------------------------------------------------------------------------------

static int lacks(const phax_backend_ops *be, const char *what) {
    return phax_fail("the %s backend has no %s", be->name, what);
}

static int read_only(const char *what) {
    return phax_fail("%s: the model was made over borrowed parameters (inference only)", what);
}

phax_bmodel *phax_bmodel_new(const phax_backend_ops *be, const phax_model_cfg *cfg, uint64_t seed,
                             const float *params) {
    return be->model_new(be, cfg, seed, params);
}

void phax_bmodel_free(phax_bmodel *m) {
    if (m) m->be->model_free(m);
}

const phax_backend_ops *phax_bmodel_backend(const phax_bmodel *m) { return m->be; }
const phax_model_cfg *phax_bmodel_cfg(const phax_bmodel *m) { return m->cfg; }
const phax_layout *phax_bmodel_layout(const phax_bmodel *m) { return m->layout; }

int phax_bmodel_forward(phax_bmodel *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                        int window, void *logits, double *loss) {
    if (!m->be->forward) return lacks(m->be, "forward");
    return m->be->forward(m, tokens, targets, B, T, window, logits, loss);
}

int phax_bmodel_token_losses(phax_bmodel *m, const int32_t *tokens, const int32_t *targets, int B,
                             int T, int window, float *losses) {
    if (!m->be->token_losses) return lacks(m->be, "per-token losses");
    return m->be->token_losses(m, tokens, targets, B, T, window, losses);
}

void phax_bmodel_zero_grad(phax_bmodel *m) {
    if (!m->inference) m->be->zero_grad(m);
}

int phax_bmodel_backward(phax_bmodel *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                         int window, double *loss) {
    if (m->inference) return read_only("backward");
    if (!m->be->backward) return lacks(m->be, "backward");
    return m->be->backward(m, tokens, targets, B, T, window, loss);
}

int phax_bmodel_adamw_init(phax_bmodel *m, const unsigned char *decay) {
    if (m->inference) return read_only("AdamW");
    if (!m->be->adamw_init) return lacks(m->be, "AdamW");
    return m->be->adamw_init(m, decay);
}

int phax_bmodel_adamw_step(phax_bmodel *m, const phax_adamw_cfg *c, long step, double *gnorm) {
    if (m->inference) return read_only("AdamW");
    if (!m->be->adamw_step) return lacks(m->be, "AdamW");
    return m->be->adamw_step(m, c, step, gnorm);
}

void *phax_bmodel_grads(phax_bmodel *m, int *on_device) {
    if (m->inference) {
        read_only("gradients");
        return NULL;
    }
    if (!m->be->grads) {
        lacks(m->be, "gradient span");
        return NULL;
    }
    return m->be->grads(m, on_device);
}

static int check_range(const phax_bmodel *m, size_t off, size_t n, phax_dtype dt) {
    if (dt != PHAX_DT_F32 && dt != PHAX_DT_F64)
        return phax_fail("parameters: dtype %s is not F32 or F64", phax_dtype_name(dt));
    if (off > m->layout->numel || n > m->layout->numel - off)
        return phax_fail("parameters [%zu, %zu): outside the model's %zu", off, off + n, m->layout->numel);
    return PHAX_OK;
}

int phax_bmodel_params_get(const phax_bmodel *m, size_t off, size_t n, phax_dtype dt, void *out) {
    if (check_range(m, off, n, dt)) return PHAX_ERR;
    return m->be->params_get(m, off, n, dt, out);
}

int phax_bmodel_params_set(phax_bmodel *m, phax_dtype dt, const void *src) {
    if (m->inference) return read_only("setting parameters");
    if (check_range(m, 0, m->layout->numel, dt)) return PHAX_ERR;
    return m->be->params_set(m, dt, src);
}

int phax_bmodel_moments_get(const phax_bmodel *m, void *mom1, void *mom2) {
    if (!m->be->moments_get) return lacks(m->be, "AdamW");
    return m->be->moments_get(m, mom1, mom2);
}

int phax_bmodel_moments_set(phax_bmodel *m, const void *mom1, const void *mom2) {
    if (m->inference) return read_only("AdamW");
    if (!m->be->moments_set) return lacks(m->be, "AdamW");
    return m->be->moments_set(m, mom1, mom2);
}

// --- decoders -------------------------------------------------------------------------------

phax_bdecoder *phax_bdecoder_new(phax_bmodel *m, int max_len, int window) {
    if (!m->be->decoder_new) {
        lacks(m->be, "per-token decoder (use --backend cpu)");
        return NULL;
    }
    return m->be->decoder_new(m, max_len, window);
}

void phax_bdecoder_free(phax_bdecoder *d) {
    if (d) d->be->decoder_free(d);
}

void phax_bdecoder_reset(phax_bdecoder *d) { d->be->decoder_reset(d); }

int phax_bdecoder_step(phax_bdecoder *d, int32_t token, float *logits) {
    return d->be->decoder_step(d, token, logits);
}

int phax_bdecoder_prefill(phax_bdecoder *d, const int32_t *tokens, int n, float *logits) {
    return d->be->decoder_prefill(d, tokens, n, logits);
}

int phax_bdecoder_prefill_all(phax_bdecoder *d, const int32_t *tokens, int n, float *logits) {
    return d->be->decoder_prefill_all(d, tokens, n, logits);
}

size_t phax_bdecoder_state_bytes(const phax_bdecoder *d) { return d->be->decoder_state_bytes(d); }
