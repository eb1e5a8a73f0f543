// The backend list of the equivalence tests (harness.h): fast/cpu's entry points.
// A device backend (cuda) adds a file like this one: its entries take host
// pointers, copy them to the device, call the kernel and copy the outputs back;
// its `unavailable` names why it cannot run here (not built, no device).
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "phax/fcpu.h"
#include "phax/fcpu_gemm.h"
#include "phax/fcpu_decode.h"
#include "phax/fmodel.h"

static const char *cpu_unavailable(void) { return NULL; }  // always here

static void cpu_set_threads(int n) { omp_set_num_threads(n); }
static int cpu_get_threads(void) { return omp_get_max_threads(); }

static void cpu_sgemm(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc) {
    fcpu_sgemm(ta ? FCPU_TRANS : FCPU_NOTRANS, tb ? FCPU_TRANS : FCPU_NOTRANS, M, N, K, alpha, A,
               lda, B, ldb, beta, C, ldc);
}

_Static_assert(sizeof(h_adamw_param) == sizeof(fcpu_adamw_param), "h_adamw_param layout");

static int cpu_adamw_step(h_adamw_param *ps, int np, const phax_adamw_cfg *c, long step,
                          double *gnorm) {
    fcpu_adamw_param fp[np > 0 ? np : 1];
    for (int j = 0; j < np; j++)
        fp[j] = (fcpu_adamw_param){ps[j].p, ps[j].g, ps[j].m, ps[j].v, ps[j].n, ps[j].decay};
    return fcpu_adamw_step(fp, np, c, step, gnorm);
}

_Static_assert((int)H_SSM_FFT == (int)FCPU_SSM_FFT && (int)H_SSM_DIRECT == (int)FCPU_SSM_DIRECT &&
                   (int)H_SSM_AUTO == (int)FCPU_SSM_AUTO,
               "ssm methods");
static void *cpu_ssm_plan_new(int B, int T, int H, int method) {
    return fcpu_ssm_plan_new_ex(B, T, H, method, 0);
}
static void cpu_ssm_plan_free(void *p) { fcpu_ssm_plan_free(p); }
static int cpu_ssm_plan_method(const void *p) { return fcpu_ssm_plan_method(p); }
static int cpu_ssm_plan_fft_len(const void *p) { return fcpu_ssm_plan_fft_len(p); }
static size_t cpu_ssm_conv_fwd_ws(const void *p) { return fcpu_ssm_conv_fwd_ws(p); }
static size_t cpu_ssm_conv_bwd_ws(const void *p) { return fcpu_ssm_conv_bwd_ws(p); }
static int cpu_ssm_conv_fwd(float *y, const float *u, const float *K, const float *D, int B, int T,
                            int H, const void *plan, void *ws) {
    return fcpu_ssm_conv_fwd(y, u, K, D, B, T, H, plan, ws);
}
static int cpu_ssm_conv_bwd(float *du, float *dK, float *dD, const float *dy, const float *u,
                            const float *K, const float *D, int B, int T, int H, const void *plan,
                            void *ws) {
    return fcpu_ssm_conv_bwd(du, dK, dD, dy, u, K, D, B, T, H, plan, ws);
}

static size_t cpu_mlstm_state_len(int dqk, int dv) { return FCPU_MLSTM_STATE_LEN(dqk, dv); }

// Models: the fmodel struct behind a void pointer.
static void *cpu_model_new(const phax_model_cfg *cfg, uint64_t seed) {
    fmodel *m = calloc(1, sizeof *m);
    if (m && fmodel_new(m, cfg, seed) == PHAX_OK) return m;
    free(m);
    return NULL;
}
static void cpu_model_free(void *m) {
    if (m) fmodel_free(m), free(m);
}
static size_t cpu_model_numel(const void *m) { return ((const fmodel *)m)->layout.numel; }
static void cpu_model_set_params_f64(void *m, const double *p) { fmodel_set_params_f64(m, p); }
static void cpu_model_get_params(const void *m, float *out) {
    const fmodel *f = m;
    memcpy(out, f->params, f->layout.numel * sizeof *out);
}
static void cpu_model_set_params(void *m, const float *in) {
    fmodel *f = m;
    memcpy(f->params, in, f->layout.numel * sizeof *in);
}
static void cpu_model_get_grads(const void *m, float *out) {
    const fmodel *f = m;
    memcpy(out, f->grads, f->layout.numel * sizeof *out);
}
static void cpu_model_zero_grad(void *m) { fmodel_zero_grad(m); }
static void *cpu_model_ws_new(const void *m, int B, int T) { return fmodel_ws_new(m, B, T); }
static void cpu_model_ws_free(void *ws) { fmodel_ws_free(ws); }
static int cpu_model_forward(const void *m, void *ws, const int32_t *tok, const int32_t *tg,
                             int window, float *logits, double *loss) {
    return fmodel_forward(m, ws, tok, tg, window, logits, loss);
}
static int cpu_model_token_losses(const void *m, void *ws, const int32_t *tok, const int32_t *tg,
                                  int window, float *rows) {
    return fmodel_token_losses(m, ws, tok, tg, window, rows);
}
static int cpu_model_backward(void *m, void *ws, const int32_t *tok, const int32_t *tg, int window,
                              double *loss) {
    return fmodel_backward(m, ws, tok, tg, window, loss);
}

static void *cpu_decoder_new(const void *m, int max_len, int window) {
    return fcpu_decoder_new(m, max_len, window);
}
static void *cpu_decoder_new_chunked(const void *m, int max_len, int window, int chunk) {
    return fcpu_decoder_new_chunked(m, max_len, window, chunk);
}
static void cpu_decoder_free(void *d) { fcpu_decoder_free(d); }
static void cpu_decoder_reset(void *d) { fcpu_decoder_reset(d); }
static int cpu_decoder_pos(const void *d) { return fcpu_decoder_pos(d); }
static int cpu_decoder_step(void *d, int32_t token, float *logits) {
    return fcpu_decoder_step(d, token, logits);
}
static int cpu_decoder_prefill(void *d, const int32_t *tokens, int n, float *logits) {
    return fcpu_decoder_prefill(d, tokens, n, logits);
}
static int cpu_decoder_prefill_all(void *d, const int32_t *tokens, int n, float *logits) {
    return fcpu_decoder_prefill_all(d, tokens, n, logits);
}

static const h_backend cpu = {
    .name = "cpu",
    .unavailable = cpu_unavailable,
    .set_threads = cpu_set_threads,
    .get_threads = cpu_get_threads,
    .gemm = {.sgemm = cpu_sgemm},
    .attention =
        {
            .fwd_ws = fcpu_attention_fwd_ws,
            .bwd_ws = fcpu_attention_bwd_ws,
            .fwd = fcpu_attention_fwd,
            .bwd = fcpu_attention_bwd,
        },
    .embedding = {.fwd = fcpu_embedding_fwd, .bwd = fcpu_embedding_bwd},
    .linear = {.fwd = fcpu_linear_fwd, .bwd = fcpu_linear_bwd},
    .norm =
        {
            .rmsnorm_fwd = fcpu_rmsnorm_fwd,
            .rmsnorm_bwd_ws = fcpu_rmsnorm_bwd_ws,
            .rmsnorm_bwd = fcpu_rmsnorm_bwd,
            .layernorm_fwd = fcpu_layernorm_fwd,
            .layernorm_bwd_ws = fcpu_layernorm_bwd_ws,
            .layernorm_bwd = fcpu_layernorm_bwd,
            .headnorm_fwd = fcpu_headnorm_fwd,
            .headnorm_bwd_ws = fcpu_headnorm_bwd_ws,
            .headnorm_bwd = fcpu_headnorm_bwd,
        },
    .activation =
        {
            .gelu_fwd = fcpu_gelu_fwd,
            .gelu_bwd = fcpu_gelu_bwd,
            .silu_fwd = fcpu_silu_fwd,
            .silu_bwd = fcpu_silu_bwd,
        },
    .ffn =
        {
            .swiglu_fwd_ws = fcpu_swiglu_fwd_ws,
            .swiglu_fwd = fcpu_swiglu_fwd,
            .swiglu_bwd_ws = fcpu_swiglu_bwd_ws,
            .swiglu_bwd = fcpu_swiglu_bwd,
            .swiglu_keep_len = fcpu_swiglu_keep_len,
            .swiglu_fwd_keep = fcpu_swiglu_fwd_keep,
            .swiglu_fwd_keep_ws = fcpu_swiglu_fwd_keep_ws,
            .swiglu_bwd_kept_ws = fcpu_swiglu_bwd_kept_ws,
            .swiglu_bwd_kept = fcpu_swiglu_bwd_kept,
        },
    .rope =
        {
            .table_len = fcpu_rope_table_len,
            .table = fcpu_rope_table,
            .fwd = fcpu_rope_fwd,
            .bwd = fcpu_rope_bwd,
        },
    .mix = {.fwd = fcpu_mix_fwd, .bwd = fcpu_mix_bwd},
    .loss =
        {
            .cross_entropy_fwd = fcpu_cross_entropy_fwd,
            .cross_entropy_bwd = fcpu_cross_entropy_bwd,
            .cross_entropy_fwd_bwd = fcpu_cross_entropy_fwd_bwd,
            .lce_tile_rows = fcpu_lce_tile_rows,
            .linear_cross_entropy_ws = fcpu_linear_cross_entropy_ws,
            .linear_cross_entropy = fcpu_linear_cross_entropy,
        },
    .adamw = {.step = cpu_adamw_step},
    .ssm =
        {
            .kernel_fwd_ws = fcpu_dss_kernel_fwd_ws,
            .kernel_fwd = fcpu_dss_kernel_fwd,
            .kernel_bwd_ws = fcpu_dss_kernel_bwd_ws,
            .kernel_bwd = fcpu_dss_kernel_bwd,
            .plan_new = cpu_ssm_plan_new,
            .plan_free = cpu_ssm_plan_free,
            .plan_method = cpu_ssm_plan_method,
            .plan_fft_len = cpu_ssm_plan_fft_len,
            .conv_fwd_ws = cpu_ssm_conv_fwd_ws,
            .conv_bwd_ws = cpu_ssm_conv_bwd_ws,
            .conv_fwd = cpu_ssm_conv_fwd,
            .conv_bwd = cpu_ssm_conv_bwd,
        },
    .mlstm =
        {
            .state_len = cpu_mlstm_state_len,
            .fwd_ws = fcpu_mlstm_chunkwise_fwd_ws,
            .fwd = fcpu_mlstm_chunkwise_fwd,
            .bwd_ws = fcpu_mlstm_chunkwise_bwd_ws,
            .bwd = fcpu_mlstm_chunkwise_bwd,
        },
    .gdn =
        {
            .fwd_ws = fcpu_gdn_chunkwise_fwd_ws,
            .fwd = fcpu_gdn_chunkwise_fwd,
            .bwd_ws = fcpu_gdn_chunkwise_bwd_ws,
            .bwd = fcpu_gdn_chunkwise_bwd,
            .conv_fwd = fcpu_gdn_conv_fwd,
            .conv_bwd_ws = fcpu_gdn_conv_bwd_ws,
            .conv_bwd = fcpu_gdn_conv_bwd,
            .gates_fwd = fcpu_gdn_gates_fwd,
            .gates_bwd = fcpu_gdn_gates_bwd,
        },
    .model =
        {
            .new_model = cpu_model_new,
            .free_model = cpu_model_free,
            .numel = cpu_model_numel,
            .set_params_f64 = cpu_model_set_params_f64,
            .get_params = cpu_model_get_params,
            .set_params = cpu_model_set_params,
            .get_grads = cpu_model_get_grads,
            .zero_grad = cpu_model_zero_grad,
            .ws_new = cpu_model_ws_new,
            .ws_free = cpu_model_ws_free,
            .forward = cpu_model_forward,
            .token_losses = cpu_model_token_losses,
            .backward = cpu_model_backward,
        },
    .decode =
        {
            .new_decoder = cpu_decoder_new,
            .new_chunked = cpu_decoder_new_chunked,
            .free_decoder = cpu_decoder_free,
            .reset = cpu_decoder_reset,
            .pos = cpu_decoder_pos,
            .step = cpu_decoder_step,
            .prefill = cpu_decoder_prefill,
            .prefill_all = cpu_decoder_prefill_all,
            .chunk_max = FCPU_PREFILL_CHUNK_MAX,
        },
};

extern const h_backend h_backend_cuda_emu, h_backend_cuda;  // tests/harness_cuda.c
const h_backend *const h_backends[] = {&cpu, &h_backend_cuda_emu, &h_backend_cuda};
const int h_nbackends = (int)(sizeof h_backends / sizeof *h_backends);
