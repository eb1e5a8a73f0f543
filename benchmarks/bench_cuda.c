// bench_cuda: the GPU benchmarks of benchmarks/gpu_check.sh — each rate beside the device's own
// ceiling measured in the same run.
//
// usage: bench_cuda [--backend cuda|cuda_emu] [--families pha,transformer,...] [--Ts 512,2048,...]
//                   [--attn-Ts 2048,8192] [--decode-Ts 1024,4096] [--steps N] [--csv FILE]
//
//   ceilings    FP32 SGEMM and TF32 GEMM (cuBLAS, 4096³ on a device) in GFLOP/s, device-to-device
//               copy bandwidth (GB/s, read + write counted);
//   attention   fast/cuda's fused attention forward + backward (B 1, 8 query / 2 kv heads of
//               head_dim 32 — the bench config's — full causal, cosine scores): GFLOP/s of the
//               visible scores (12·T·Tvis·dh·Hq) and the fraction of the TF32 ceiling;
//   gdn         fast/cuda's chunkwise Gated DeltaNet cell forward + backward (B 1, 4 heads, dk 32, dv
//               64, chunk 64) at the attention's T: GFLOP/s of bench_gdn's FLOP count and the fraction
//               of the FP32 ceiling;
//   models      a training step through the cuda backend (zero_grad, forward + backward, AdamW)
//               on bench_model's "bench" config (d 256, 4 layers, vocab 8192): tokens/s at each T
//               and the peak device memory the step's allocations reach (fcuda_mem_stats: model,
//               moments, workspace; cuBLAS's and cuFFT's own workspaces are not in it).
//   decode      the device decoder (fast/cuda/decode.cu) on the same config: a prompt of C tokens
//               prefilled (tokens/s), then `steps` single-token steps with their logits at context
//               C (tokens/s, the median step), and the carried state's bytes (KV cache at C for
//               full attention, the ring / recurrent state otherwise).
// Medians of `steps` timed repeats after one warm-up; each call synchronises the device.
// With --backend cuda_emu (the CPU emulation) it is a smoke test of this driver, not a rate.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_clock.h"
#include "phax/backend.h"
#include "phax/core.h"
#include "phax/fast.h"
#include "phax/fcuda_emu.h"  // fcuda_emu_<op> beside fcuda_<op>
#include "phax/model_plan.h"

typedef struct {
    int emu;  // 1: fcuda_emu_* and the cuda_emu backend
    const char *families;
    int Ts[16], nT, aTs[16], naT, dTs[16], ndT, steps;
    const char *csv;
} opts_t;

// fast/cuda's entry: the device library's (built only with nvcc) or the emulator's.
#ifdef PHAX_HAVE_CUDA
#define F(o, name) ((o)->emu ? fcuda_emu_##name : fcuda_##name)
#else
#define F(o, name) ((void)(o), fcuda_emu_##name)
#endif

static void *dalloc(const opts_t *o, size_t bytes) {
    void *p = NULL;
    if (F(o, malloc)(&p, bytes ? bytes : 1)) {
        fprintf(stderr, "bench_cuda: %s\n", phax_error());
        exit(1);
    }
    return p;
}
static void dfill(const opts_t *o, float *d, size_t n, float scale) {
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) h[i] = scale * (float)((int)(i * 2654435761u % 2001) - 1000) / 1000.0f;
    F(o, upload)(d, h, n * sizeof *h, NULL);
    free(h);
}
#define CHECK(call)                                                          \
    do {                                                                     \
        if ((call) != PHAX_OK) {                                             \
            fprintf(stderr, "bench_cuda: %s: %s\n", #call, phax_error()); \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

// --- ceilings -------------------------------------------------------------------------------------
static double gemm_gflops(const opts_t *o, int n, int tf32) {
    float *A = dalloc(o, (size_t)n * n * 4), *B = dalloc(o, (size_t)n * n * 4), *C = dalloc(o, (size_t)n * n * 4);
    dfill(o, A, (size_t)n * n, 1), dfill(o, B, (size_t)n * n, 1);
    int was = F(o, gemm_tf32)(tf32);
    double t[16];
    int reps = o->steps;
    for (int r = -1; r < reps; r++) {
        double t0 = bench_wall();
        CHECK(F(o, sgemm)(0, 0, n, n, n, 1.0f, A, n, B, n, 0.0f, C, n, NULL));
        CHECK(F(o, sync)(NULL));
        if (r >= 0) t[r] = bench_wall() - t0;
    }
    F(o, gemm_tf32)(was);
    F(o, free)(A), F(o, free)(B), F(o, free)(C);
    return 2.0 * n * n * (double)n / bench_median(t, reps, 1) / 1e9;
}

static double copy_gbs(const opts_t *o, size_t bytes) {
    void *a = dalloc(o, bytes), *b = dalloc(o, bytes);
    double t[16];
    for (int r = -1; r < o->steps; r++) {
        double t0 = bench_wall();
        CHECK(F(o, copy)(b, a, bytes, NULL));
        CHECK(F(o, sync)(NULL));
        if (r >= 0) t[r] = bench_wall() - t0;
    }
    F(o, free)(a), F(o, free)(b);
    return 2.0 * bytes / bench_median(t, o->steps, 1) / 1e9;
}

// --- attention ------------------------------------------------------------------------------------
static double attention_gflops(const opts_t *o, int T, double *ms) {
    phax_attn_cfg c = phax_attn_cfg_default(8, 2, 32);
    c.score = PHAX_SCORE_COSINE;
    size_t nq = (size_t)T * 8 * 32, nk = (size_t)T * 2 * 32;
    float *q = dalloc(o, nq * 4), *k = dalloc(o, nk * 4), *v = dalloc(o, nk * 4), *out = dalloc(o, nq * 4);
    float *dout = dalloc(o, nq * 4), *dq = dalloc(o, nq * 4), *dk = dalloc(o, nk * 4), *dv = dalloc(o, nk * 4);
    float *st = dalloc(o, (size_t)T * 8 * 2 * 4), *ls = dalloc(o, 8 * 4), *dls = dalloc(o, 8 * 4);
    dfill(o, q, nq, 1), dfill(o, k, nk, 1), dfill(o, v, nk, 1), dfill(o, dout, nq, 1), dfill(o, ls, 8, 2);
    // the backward adds into its gradients: they start at 0 (device memory comes uninitialised)
    dfill(o, dq, nq, 0), dfill(o, dk, nk, 0), dfill(o, dv, nk, 0), dfill(o, dls, 8, 0);
    size_t wf = F(o, attention_fwd_ws)(1, T, &c), wb = F(o, attention_bwd_ws)(1, T, &c);
    void *ws = dalloc(o, wf > wb ? wf : wb);
    double t[16];
    for (int r = -1; r < o->steps; r++) {
        double t0 = bench_wall();
        CHECK(F(o, attention_fwd)(out, NULL, st, q, k, v, ls, 1, T, &c, ws, NULL));
        CHECK(F(o, attention_bwd)(dq, dk, dv, dls, dout, out, st, q, k, v, ls, 1, T, &c, ws, NULL));
        CHECK(F(o, sync)(NULL));
        if (r >= 0) t[r] = bench_wall() - t0;
    }
    void *all[] = {q, k, v, out, dout, dq, dk, dv, st, ls, dls, ws};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) F(o, free)(all[i]);
    *ms = bench_median(t, o->steps, 1) * 1e3;
    return 12.0 * T * ((T + 1) / 2.0) * 32 * 8 / (*ms / 1e3) / 1e9;
}

// --- Gated DeltaNet -------------------------------------------------------------------------------
// fast/cuda's chunkwise cell forward + backward at one layer of a d = 256 swax_gdn model (B 1, 4
// heads, dk 32, dv 64, chunk 64, q and k L2-normalised in the cell): GFLOP/s of bench_gdn's count
// of the cell's products — per token and head, with L the chunk, forward 4L·dk + 3L·dv + 6·dk·dv,
// backward 16L·dk + 11L·dv + 20·dk·dv — against the FP32 ceiling (gdn.cu runs its products on the
// CUDA cores, not the tensor cores).
static double gdn_gflops(const opts_t *o, int T, double *ms) {
    const int H = 4, dk = 32, dv = 64, L = 64;
    const phax_gdn_cfg c = {1 / sqrt((double)dk), 1};
    const size_t nk = (size_t)T * H * dk, nv = (size_t)T * H * dv, ng = (size_t)T * H;
    float *q = dalloc(o, nk * 4), *k = dalloc(o, nk * 4), *v = dalloc(o, nv * 4), *out = dalloc(o, nv * 4);
    float *g = dalloc(o, ng * 4), *be = dalloc(o, ng * 4), *dout = dalloc(o, nv * 4), *dq = dalloc(o, nk * 4);
    float *dk_ = dalloc(o, nk * 4), *dv_ = dalloc(o, nv * 4), *dg = dalloc(o, ng * 4), *db = dalloc(o, ng * 4);
    dfill(o, q, nk, 1), dfill(o, k, nk, 1), dfill(o, v, nv, 1), dfill(o, dout, nv, 1);
    // the backward adds into its gradients: they start at 0 (device memory comes uninitialised)
    dfill(o, dq, nk, 0), dfill(o, dk_, nk, 0), dfill(o, dv_, nv, 0), dfill(o, dg, ng, 0), dfill(o, db, ng, 0);
    float *h = malloc(ng * sizeof *h);  // log-decays in [-0.1, -0.05], β 0.5: a stable state
    for (size_t i = 0; i < ng; i++) h[i] = -0.05f - 0.05f * (float)(i * 2654435761u % 1001) / 1000.0f;
    F(o, upload)(g, h, ng * sizeof *h, NULL);
    for (size_t i = 0; i < ng; i++) h[i] = 0.5f;
    F(o, upload)(be, h, ng * sizeof *h, NULL);
    free(h);
    size_t wf = F(o, gdn_fwd_ws)(1, T, H, dk, dv, L), wb = F(o, gdn_bwd_ws)(1, T, H, dk, dv, L);
    void *ws = dalloc(o, wf > wb ? wf : wb);
    double t[16];
    for (int r = -1; r < o->steps; r++) {
        double t0 = bench_wall();
        CHECK(F(o, gdn_fwd)(out, NULL, q, k, v, g, be, NULL, 1, T, H, dk, dv, &c, L, ws, NULL));
        CHECK(F(o, gdn_bwd)(dq, dk_, dv_, dg, db, NULL, dout, NULL, q, k, v, g, be, NULL, 1, T, H, dk, dv, &c, L, ws,
                            NULL));
        CHECK(F(o, sync)(NULL));
        if (r >= 0) t[r] = bench_wall() - t0;
    }
    void *all[] = {q, k, v, out, g, be, dout, dq, dk_, dv_, dg, db, ws};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) F(o, free)(all[i]);
    *ms = bench_median(t, o->steps, 1) * 1e3;
    const double per = (4.0 + 16) * L * dk + (3.0 + 11) * L * dv + (6.0 + 20) * dk * dv;
    return per * T * H / (*ms / 1e3) / 1e9;
}

// --- models ---------------------------------------------------------------------------------------
// bench_model's "bench" config of a family at training length T.
static int bench_cfg(const char *family, int T, phax_model_cfg *c) {
    phax_family f;
    if (phax_family_parse(family, &f)) return PHAX_ERR;
    *c = phax_model_cfg_default(f);
    c->vocab_size = 8192, c->d_model = 256, c->n_layers = 4;
    c->n_heads = 8, c->n_kv_heads = 2, c->head_dim = 32, c->ffn_hidden = 683;
    c->tie_embeddings = 0, c->train_len = T;
    return phax_model_cfg_resolve(c);
}

static int model_step(const opts_t *o, const char *family, int T, double *tok_s, double *peak_mb) {
    phax_model_cfg c;
    if (bench_cfg(family, T, &c)) return PHAX_ERR;
    const phax_backend_ops *be = phax_backend_find(o->emu ? "cuda_emu" : "cuda");
    if (!be) return PHAX_ERR;
    F(o, mem_reset_peak)();
    size_t base;
    F(o, mem_stats)(&base, NULL);
    phax_bmodel *m = phax_bmodel_new(be, &c, 1, NULL);
    if (!m) return PHAX_ERR;
    const phax_layout *L = phax_bmodel_layout(m);
    unsigned char *decay = malloc((size_t)L->n);
    for (int i = 0; i < L->n; i++) decay[i] = L->p[i].ndim >= 2;
    int32_t *tok = malloc((size_t)T * 4), *tg = malloc((size_t)T * 4);
    for (int i = 0; i < T; i++) tok[i] = (int32_t)((i * 7919u) % 8192), tg[i] = (int32_t)(((i + 1) * 7919u) % 8192);
    phax_adamw_cfg a = phax_adamw_cfg_default();
    int rc = phax_bmodel_adamw_init(m, decay);
    double t[16], gn;
    for (int r = -1; !rc && r < o->steps; r++) {
        double t0 = bench_wall();
        phax_bmodel_zero_grad(m);
        rc = phax_bmodel_backward(m, tok, tg, 1, T, -1, NULL);
        if (!rc) rc = phax_bmodel_adamw_step(m, &a, r + 2, &gn);  // its norm read back: a sync
        if (r >= 0) t[r] = bench_wall() - t0;
    }
    size_t peak;
    F(o, mem_stats)(NULL, &peak);
    phax_bmodel_free(m);
    free(decay), free(tok), free(tg);
    if (rc) return PHAX_ERR;
    *tok_s = T / bench_median(t, o->steps, 1);
    *peak_mb = (peak - base) / 1e6;
    return PHAX_OK;
}

// The decoder at context C: prefill tokens/s, then the median of `steps` single steps (logits
// downloaded, so each is synchronised) as tokens/s; the state's bytes after them.
static int decode_at(const opts_t *o, const char *family, int C, double *prefill_s, double *step_s, double *state_mb) {
    phax_model_cfg c;
    if (bench_cfg(family, 512, &c)) return PHAX_ERR;
    const phax_backend_ops *be = phax_backend_find(o->emu ? "cuda_emu" : "cuda");
    if (!be) return PHAX_ERR;
    phax_bmodel *m = phax_bmodel_new(be, &c, 1, NULL);
    if (!m) return PHAX_ERR;
    phax_bdecoder *d = phax_bdecoder_new(m, C + o->steps + 1, -1);
    int32_t *tok = malloc((size_t)C * 4);
    float *logits = malloc((size_t)c.vocab_size * sizeof *logits);
    int rc = PHAX_OK;
    if (!d) rc = PHAX_ERR;
    else if (!tok || !logits) rc = phax_fail("out of memory");
    for (int i = 0; i < C && tok; i++) tok[i] = (int32_t)((i * 7919u) % 8192);
    double t0 = bench_wall(), t[16];
    if (!rc) rc = phax_bdecoder_prefill(d, tok, C, logits);  // the last row's logits: a sync
    *prefill_s = C / (bench_wall() - t0);
    for (int r = 0; !rc && r < o->steps; r++) {
        t0 = bench_wall();
        rc = phax_bdecoder_step(d, (int32_t)((r * 31u) % 8192), logits);
        t[r] = bench_wall() - t0;
    }
    if (!rc) *step_s = 1 / bench_median(t, o->steps, 1), *state_mb = phax_bdecoder_state_bytes(d) / 1e6;
    phax_bdecoder_free(d);
    phax_bmodel_free(m);
    free(tok), free(logits);
    return rc;
}

static int parse_ints(const char *s, int *out, int max) {
    int n = 0;
    for (const char *p = s; *p && n < max;) {
        out[n++] = atoi(p);
        const char *c = strchr(p, ',');
        if (!c) break;
        p = c + 1;
    }
    return n;
}

int main(int argc, char **argv) {
    opts_t o = {.emu = 0, .families = "pha,transformer,serial,swax,swa,mlstm,swax_gdn", .steps = 5};
    o.nT = parse_ints("512,2048,8192,32768", o.Ts, 16);
    o.naT = parse_ints("2048,8192,32768", o.aTs, 16);
    o.ndT = parse_ints("1024,4096,16384", o.dTs, 16);
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(argv[i], "--backend")) o.emu = !strcmp(v, "cuda_emu"), i++;
        else if (!strcmp(argv[i], "--families")) o.families = v, i++;
        else if (!strcmp(argv[i], "--Ts")) o.nT = parse_ints(v, o.Ts, 16), i++;
        else if (!strcmp(argv[i], "--attn-Ts")) o.naT = parse_ints(v, o.aTs, 16), i++;
        else if (!strcmp(argv[i], "--decode-Ts")) o.ndT = parse_ints(v, o.dTs, 16), i++;
        else if (!strcmp(argv[i], "--steps")) o.steps = atoi(v), i++;
        else if (!strcmp(argv[i], "--csv")) o.csv = v, i++;
        else {
            fprintf(stderr, "usage: bench_cuda [--backend cuda|cuda_emu] [--families a,b] [--Ts 512,...] "
                            "[--attn-Ts 2048,...] [--decode-Ts 1024,...] [--steps N] [--csv FILE]\n");
            return 2;
        }
    }
    if (o.steps < 1 || o.steps > 16) o.steps = 5;
    char info[256];
    phax_cuda_info(info, sizeof info);
    printf("bench_cuda: %s%s\n", o.emu ? "CPU emulation (a smoke test, not a rate); " : "", info);
    if (!o.emu && (strstr(info, "not built") || strstr(info, "no device"))) {
        printf("bench_cuda: skipped: no CUDA device\n");
        return 0;
    }
    FILE *csv = o.csv ? fopen(o.csv, "w") : NULL;
    if (csv) fprintf(csv, "what,T,value,unit,extra\n");
    int gn = o.emu ? 256 : 4096;
    double fp32 = gemm_gflops(&o, gn, 0), tf32 = gemm_gflops(&o, gn, 1);
    double bw = copy_gbs(&o, o.emu ? ((size_t)16 << 20) : ((size_t)1 << 30));
    printf("ceilings: SGEMM FP32 %.0f GFLOP/s, TF32 %.0f GFLOP/s (%d^3); device copy %.0f GB/s\n", fp32, tf32, gn,
           bw);
    if (csv) fprintf(csv, "sgemm_fp32,%d,%.1f,GFLOP/s,\nsgemm_tf32,%d,%.1f,GFLOP/s,\ncopy,0,%.1f,GB/s,\n", gn, fp32, gn,
                     tf32, bw);
    printf("\n%-10s %8s %10s %10s %12s\n", "attention", "T", "ms", "GFLOP/s", "of TF32 peak");
    for (int i = 0; i < o.naT; i++) {
        double ms, g = attention_gflops(&o, o.aTs[i], &ms);
        printf("%-10s %8d %10.2f %10.0f %11.1f%%\n", "fwd+bwd", o.aTs[i], ms, g, 100 * g / tf32);
        if (csv) fprintf(csv, "attention,%d,%.1f,GFLOP/s,%.3f ms\n", o.aTs[i], g, ms);
    }
    printf("\n%-10s %8s %10s %10s %12s\n", "gdn", "T", "ms", "GFLOP/s", "of FP32 peak");
    for (int i = 0; i < o.naT; i++) {
        double ms, g = gdn_gflops(&o, o.aTs[i], &ms);
        printf("%-10s %8d %10.2f %10.1f %11.1f%%\n", "fwd+bwd", o.aTs[i], ms, g, 100 * g / fp32);
        if (csv) fprintf(csv, "gdn,%d,%.1f,GFLOP/s,%.3f ms\n", o.aTs[i], g, ms);
    }
    printf("\n%-12s %8s %12s %14s\n", "model", "T", "tokens/s", "peak dev MB");
    char fam[256];
    int bad = 0;
    snprintf(fam, sizeof fam, "%s", o.families);
    for (char *f = strtok(fam, ","); f; f = strtok(NULL, ","))
        for (int i = 0; i < o.nT; i++) {
            double ts, mb;
            if (model_step(&o, f, o.Ts[i], &ts, &mb)) {
                printf("%-12s %8d   failed: %s\n", f, o.Ts[i], phax_error());
                bad = 1;
                continue;
            }
            printf("%-12s %8d %12.0f %14.1f\n", f, o.Ts[i], ts, mb);
            if (csv) fprintf(csv, "train_%s,%d,%.1f,tokens/s,%.1f MB\n", f, o.Ts[i], ts, mb);
        }
    printf("\n%-12s %8s %14s %14s %12s\n", "decode", "context", "prefill tok/s", "step tok/s", "state MB");
    snprintf(fam, sizeof fam, "%s", o.families);
    for (char *f = strtok(fam, ","); f; f = strtok(NULL, ","))
        for (int i = 0; i < o.ndT; i++) {
            double ps, ss, mb;
            if (decode_at(&o, f, o.dTs[i], &ps, &ss, &mb)) {
                printf("%-12s %8d   failed: %s\n", f, o.dTs[i], phax_error());
                bad = 1;
                continue;
            }
            printf("%-12s %8d %14.0f %14.1f %12.2f\n", f, o.dTs[i], ps, ss, mb);
            if (csv)
                fprintf(csv, "prefill_%s,%d,%.1f,tokens/s,\ndecode_%s,%d,%.2f,tokens/s,%.3f MB state\n", f, o.dTs[i],
                        ps, f, o.dTs[i], ss, mb);
        }
    if (csv) fclose(csv);
    return bad;
}
