// bench_model: whole-model training steps on fast/cpu (and on ref, for the speed-up).
//
// usage:
//   bench_model [out.csv]                       the default sweep (what `ninja bench` runs)
//   bench_model --sweep [--families a,b] [--Ts 512,2048] [--no-ref] [--csv FILE]
//   bench_model --family F --T T [--B 1] [--steps N] [--warmup W] [--ref] [--window W]
//               [--config FILE.json] [--csv FILE]                    one configuration
//
// A training step is what a trainer does per batch: fmodel_zero_grad, then
// fmodel_backward (forward + backward of the mean cross-entropy; the loss is
// fused with the output projection) and fcpu_adamw_step over every parameter
// tensor (phax_adamw_cfg_default: lr 1e-3, β (0.9, 0.95), wd 0.1 on the 2-D tensors,
// global-norm clip 1.0). --ref does the same with ref_model_backward and
// ref_adamw_step in float64 (one thread, scalar).
//
// The "bench" config (every family): d_model 256, 4 layers, vocab 8192, untied
// embeddings, attention 8 query / 2 kv heads of head_dim 32, SwiGLU hidden 683 —
// the transformer is exactly the PyTorch baseline's (benchmarks/torch_baseline.py)
// — and each family's own defaults for the rest (docs/spec.md §3.5: score cosine
// for pha/transformer/serial and dot for the SWAX family, GSS F = 512, H_s = 64,
// N = 64, mLSTM heads 8 so dqk = 16, dv = 32). train_len = T, so the SWAX family's
// window is w_long = T/8 (the window passed is −1 = w_long, the evaluation window).
// Tokens and targets: uniform random ids (targets are the next token).
//
// Timing: `warmup` steps (default 2, 1 at T ≥ 8192; none for ref), then `steps`
// timed steps (default 5, 3 at T ≥ 4096, 2 at T ≥ 8192; 1 for ref — a ref step
// at T = 512 takes seconds, so it is timed directly, not scaled); the median step time
// (wall clock) gives ms/step and tokens/s = B·T / median. The table also gives
// the medians of the step's parts (forward+backward, AdamW, zeroing).
//
// Memory: the sweep runs each (family, T, fast|ref) in a fresh child process
// (fork + exec of this binary), so "peak RSS" is that configuration's alone:
// ru_maxrss of the child from wait4. Linux keeps a process's pre-exec peak in
// ru_maxrss, so it includes what the parent had resident when it forked: the
// parent stays small (a few MB, printed) and never runs a model itself. "ws MB" is
// fmodel_ws_bytes (the activation arena); parameters, gradients and the two
// AdamW moments add 16 bytes per parameter.
//
// FLOP per training step (stated, not measured; fwd + bwd = 3 × fwd, nothing
// recomputed is counted), tokens n = B·T:
//   matmuls    6 · P_mm · n, P_mm = the elements of every 2-D *.weight except the
//              embedding lookup (the tied embedding is counted once, as the output
//              projection); includes lm_head and the mLSTM gate projections
//   attention  per layer 3 · 4 · n · Tvis · dh · Hq (QKᵀ and PV on the visible keys
//              only: Tvis = the average number of keys a query sees, (T+1)/2 for
//              full causal, ≈ w with a window w)
//   mLSTM      per layer 3 · n · NH · (L·(dqk + dv) + 4·dqk·dv), the chunkwise form
//              with chunk L = 64 (the causal half of the L×L intra-chunk products, the
//              q̂C read-out and the KᵀV state update)
//   GSS SSM    per layer (3H + 5BH) · 2.5 · m·log2 m + 18·B·H·(m/2 + 1) for the FFT
//              convolution fwd + bwd with m = 2T, H = H_s (as bench_ssm counts it),
//              plus 12 · H · N · T for the DSS kernel fwd + bwd
//   (norms, activations, softmax, RoPE, the loss and AdamW are not counted)
// GFLOP/s = that / median step time. Ceiling: cblas_sgemm GFLOP/s on the model's
// most common matmul shape, (B·T × d)·(d × ffn_hidden) (x Wᵀ, the SwiGLU gate/up
// projection), measured in the same process, environment and threads just before
// the steps. "% ceil" = GFLOP/s over it.
//
// Threads: OpenMP/OpenBLAS as set by the environment (OMP_NUM_THREADS; 2 here).
// The sweep passes the environment on unchanged (OPENBLAS_CORETYPE is left as
// the machine sets it; benchmarks/run.sh sets OPENBLAS_THREAD_TIMEOUT=4).
#define _DEFAULT_SOURCE  // wait4
#include <errno.h>
#include <fftw3.h>
#include <omp.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "phax/fcpu_adamw.h"
#include "phax/fmodel.h"
#include "phax/model.h"
#include "phax/model_plan.h"
#include "phax/ref.h"
#include "phax/ref_model.h"
#include "bench_util.h"
#include "phax/fcpu_gemm.h"

#define MLSTM_CHUNK 64

// --precision bf16: fast/cpu's matmuls on bf16 operands (fcpu_mm; docs/precision.md), in this
// process and in the sweep's children.
static const char *g_precision = "f32";
#define MAX_STEPS 1000

typedef struct {
    char family[16];
    int ref, B, T, steps, warmup, window;
    int parts;           // --parts: where the time of a step goes (fmodel_ws_profile)
    const char *config;  // JSON file instead of the bench config
} opts_t;

typedef struct {
    char family[16];
    int ref, B, T, steps, threads;
    double tok_s, ms_med, ms_min, ms_fb, ms_adam, ms_zero;
    double peak_mb, ws_mb, state_mb;
    double params, mm_params, gflop_step, gflops, ceil_gflops;
    double loss_first, loss_last;
} result_t;

#define CSV_HEADER                                                                         \
    "family,impl,B,T,steps,threads,tokens_per_s,ms_per_step,ms_min,ms_fwd_bwd,ms_adamw,"   \
    "ms_zero_grad,peak_rss_mb,ws_mb,state_mb,params,matmul_params,gflop_per_step,gflops," \
    "sgemm_gflops,pct_ceiling,loss_first,loss_last"

static void csv_row(FILE *f, const result_t *r) {
    fprintf(f,
            "%s,%s,%d,%d,%d,%d,%.3f,%.4f,%.4f,%.4f,%.4f,%.4f,%.2f,%.2f,%.2f,%.0f,%.0f,%.4f,%.3f,"
            "%.3f,%.2f,%.6f,%.6f\n",
            r->family, r->ref ? "ref" : "fast", r->B, r->T, r->steps, r->threads, r->tok_s,
            r->ms_med, r->ms_min, r->ms_fb, r->ms_adam, r->ms_zero, r->peak_mb, r->ws_mb,
            r->state_mb, r->params, r->mm_params, r->gflop_step, r->gflops, r->ceil_gflops,
            r->ceil_gflops > 0 ? 100 * r->gflops / r->ceil_gflops : 0.0, r->loss_first,
            r->loss_last);
}
static int csv_parse(const char *line, result_t *r) {
    char impl[8];
    memset(r, 0, sizeof *r);
    int n = sscanf(line,
                   "%15[^,],%7[^,],%d,%d,%d,%d,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,"
                   "%lf,%*f,%lf,%lf",
                   r->family, impl, &r->B, &r->T, &r->steps, &r->threads, &r->tok_s, &r->ms_med,
                   &r->ms_min, &r->ms_fb, &r->ms_adam, &r->ms_zero, &r->peak_mb, &r->ws_mb,
                   &r->state_mb, &r->params, &r->mm_params, &r->gflop_step, &r->gflops,
                   &r->ceil_gflops, &r->loss_first, &r->loss_last);
    r->ref = !strcmp(impl, "ref");
    return n == 22 ? 0 : -1;
}

static void table_header(void) {
    printf("%-11s %-4s %5s %10s %10s %9s %8s %8s %8s %8s %6s %8s %7s\n", "family", "impl", "T",
           "tokens/s", "ms/step", "f+b ms", "adamw ms", "peak MB", "ws MB", "GFLOP/s", "%ceil",
           "sgemm", "loss");
}
static void table_row(const result_t *r) {
    char ws[16] = "-", pct[16] = "-", ceil[16] = "-";
    if (!r->ref) {  // ref has no workspace, and its ceiling would be a float64 one
        snprintf(ws, sizeof ws, "%.1f", r->ws_mb);
        snprintf(pct, sizeof pct, "%.1f%%", 100 * r->gflops / r->ceil_gflops);
        snprintf(ceil, sizeof ceil, "%.1f", r->ceil_gflops);
    }
    printf("%-11s %-4s %5d %10.1f %10.2f %9.2f %8.2f %8.0f %8s %8.1f %6s %8s %7.3f\n", r->family,
           r->ref ? "ref" : "fast", r->T, r->tok_s, r->ms_med, r->ms_fb, r->ms_adam, r->peak_mb, ws,
           r->gflops, pct, ceil, r->loss_last);
    fflush(stdout);
}

// --- configuration and FLOP count -------------------------------------------------------------
static int bench_cfg(phax_model_cfg *c, const opts_t *o) {
    phax_family f;
    if (phax_family_parse(o->family, &f)) return PHAX_ERR;
    if (o->config) {
        *c = phax_model_cfg_default(f);
        if (phax_model_cfg_from_json_file(c, o->config)) return PHAX_ERR;
        return phax_model_cfg_resolve(c);
    }
    *c = phax_model_cfg_default(f);
    c->vocab_size = 8192, c->d_model = 256, c->n_layers = 4;
    c->n_heads = 8, c->n_kv_heads = 2, c->head_dim = 32, c->ffn_hidden = 683;
    c->tie_embeddings = 0;
    c->train_len = o->T;
    return phax_model_cfg_resolve(c);
}

static double tvis(int T, int w) {  // average number of keys a query sees
    if (w <= 0 || w >= T) return (T + 1) / 2.0;
    // rows t < w see t + 1 keys, the rest w
    return ((double)w * (w + 1) / 2 + (double)(T - w) * w) / T;
}

// The attention kernel's FLOP of one layer's forward + backward (visible scores only).
static double attn_layer_flop(const phax_model_cfg *c, int B, int T, int window) {
    int w = phax_plan_window(c, window);
    return 12.0 * B * T * tvis(T, w) * c->head_dim * c->n_heads;
}

static double step_flop(const phax_model_cfg *c, const phax_layout *L, int B, int T, int window,
                        double *mm_params) {
    double n = (double)B * T, mm = bench_matmul_params(c, L);
    *mm_params = mm;
    double fl = 6.0 * mm * n;
    double attn = attn_layer_flop(c, B, T, window);
    int NH = c->mlstm_heads, dqk = c->d_model / (2 * NH), dv = c->d_model / NH;
    double mlstm = 3.0 * n * NH * ((double)MLSTM_CHUNK * (dqk + dv) + 4.0 * dqk * dv);
    double H = c->gss_hidden, m = 2.0 * T;
    double gss = (3 * H + 5 * B * H) * 2.5 * m * log2(m) + 18.0 * B * H * (m / 2 + 1) +
                 12.0 * H * c->gss_state * T;
    for (int l = 0; l < c->n_layers; l++) {  // the kernels of block l's sub-layers (the plan)
        phax_block_plan bp;
        phax_plan_block(c, l, &bp);
        double lf = 0;
        for (int i = 0; i < bp.nsub; i++)
            lf += bp.sub[i].kind == PHAX_SUB_ATTN ? attn : bp.sub[i].kind == PHAX_SUB_GSS ? gss
                  : bp.sub[i].kind == PHAX_SUB_MLSTM                                      ? mlstm
                                                                                          : 0;
        fl += lf;
    }
    return fl;
}

// --- one configuration, in this process --------------------------------------------------------
static uint64_t lcg = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(lcg >> 33);
}

static double ms_median(double *t, int n) { return 1e3 * bench_median(t, n, 1); }

// Timed parts of the steps: zero_grad, forward+backward, AdamW, whole step.
typedef struct {
    double tz[MAX_STEPS], tfb[MAX_STEPS], ta[MAX_STEPS], tt[MAX_STEPS];
} step_times;

// Step s (0-based, warm-up included) ran zero_grad over [t0, t1), forward+backward over
// [t1, t2), AdamW over [t2, t3). Records the losses and the timed parts; returns 1 once
// the last timed step is in. PHAX_BENCH_STEPS=1 prints every step (warm-up, noise).
static int note_step(step_times *st, result_t *r, int s, int warmup, int steps, double t0,
                     double t1, double t2, double t3, double loss) {
    if (s == 0) r->loss_first = loss;
    r->loss_last = loss;
    if (getenv("PHAX_BENCH_STEPS"))
        fprintf(stderr, "step %d: %.2f ms (f+b %.2f) loss %.4f\n", s, 1e3 * (t3 - t0),
                1e3 * (t2 - t1), loss);
    if (s < warmup) return 0;
    int k = s - warmup;
    st->tz[k] = t1 - t0, st->tfb[k] = t2 - t1, st->ta[k] = t3 - t2, st->tt[k] = t3 - t0;
    return k == steps - 1;
}

// --- --parts: the step's time by part, each beside its FLOP rate and the ceiling ----------
// Matmul FLOP of the weights whose names contain `key` (fwd 2·n·numel, bwd 4·n·numel).
static double mm_flop(const phax_layout *L, const char *key, double n) {
    double e = 0;
    for (int i = 0; i < L->n; i++)
        if (L->p[i].ndim == 2 && strstr(L->p[i].name, key)) e += (double)L->p[i].numel;
    return 2.0 * n * e;
}

// The GSS sub-layer's kernels per layer, forward + backward (the counts step_flop uses): the
// FFT convolution (m = 2T-point real transforms: 3 per channel for K, u, y forward and 5 per
// (batch, channel) backward, 2.5·m·log2 m each, plus the spectra's products) and the DSS
// kernel (a (Hs·T) × 2N real product forward, twice that backward).
static double gss_fft_flop(const phax_model_cfg *c, int B, int T) {
    double H = c->gss_hidden, m = 2.0 * T;
    return (3 * H + 5 * B * H) * 2.5 * m * log2(m) + 18.0 * B * H * (m / 2 + 1);
}
static double gss_kernel_flop(const phax_model_cfg *c, int T) { return 12.0 * c->gss_hidden * c->gss_state * T; }

// FFTW's own rate on this run's transforms: B·Hs real transforms of 2T points forward and back,
// split over the OpenMP threads as fast/cpu/ssm.c splits them (one single-threaded FFTW_MEASURE
// plan per direction, executed on each thread's own arrays), GFLOP/s at 2.5·m·log2 m per
// transform: the ceiling the convolution's FFTs can reach here.
static double fft_ceiling(int B, int H, int T) {
    int m = 2 * T, howmany = B * H, nc = m / 2 + 1, nt = omp_get_max_threads();
    size_t sx = ((size_t)2 * nc + 63) & ~(size_t)63, sX = ((size_t)nc + 31) & ~(size_t)31;  // aligned per thread
    float *x = fftwf_alloc_real((size_t)nt * sx);
    fftwf_complex *X = fftwf_alloc_complex((size_t)nt * sX);
    if (!x || !X) return 0;
    fftwf_plan f = fftwf_plan_dft_r2c_1d(m, x, X, FFTW_MEASURE);
    fftwf_plan b = fftwf_plan_dft_c2r_1d(m, X, x, FFTW_MEASURE);
    for (size_t i = 0; i < (size_t)nt * sx; i++) x[i] = (float)(i % 7) - 3;
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        double t0 = phax_clock();
#pragma omp parallel for schedule(static) num_threads(nt)
        for (int j = 0; j < howmany; j++) {
            int id = omp_get_thread_num();
            float *xi = x + (size_t)id * sx;
            fftwf_complex *Xi = X + (size_t)id * sX;
            fftwf_execute_dft_r2c(f, xi, Xi);
            fftwf_execute_dft_c2r(b, Xi, xi);  // unnormalised: x grows by m a round, 5 rounds stay finite
        }
        double t = phax_clock() - t0;
        if (t < best) best = t;
    }
    fftwf_destroy_plan(f), fftwf_destroy_plan(b);
    fftwf_free(x), fftwf_free(X);
    return 2.0 * howmany * 2.5 * m * log2((double)m) / best * 1e-9;
}

static void parts_row(const char *name, double f_ms, double b_ms, double step_ms, double flop,
                      double ceil) {
    double t = f_ms + b_ms;
    char rate[32] = "-", pct[32] = "-";
    if (flop > 0 && t > 0) {
        snprintf(rate, sizeof rate, "%.1f", flop / (t * 1e-3) * 1e-9);
        snprintf(pct, sizeof pct, "%.0f%%", 100 * flop / (t * 1e-3) * 1e-9 / ceil);
    }
    printf("  %-28s %9.2f %9.2f %9.2f %6.1f%% %9s %7s\n", name, f_ms, b_ms, t, 100 * t / step_ms,
           rate, pct);
}

// fwd, bwd: seconds summed over `steps` steps; zero_ms, adam_ms: per step.
static void print_parts(const phax_model_cfg *c, const phax_layout *L, int B, int T, int window,
                        int steps, const double *fwd, const double *bwd, double zero_ms,
                        double adam_ms, double step_ms, double ceil) {
    double n = (double)B * T, k = 1e3 / steps, f[FCPU_NPARTS], b[FCPU_NPARTS];
    for (int i = 0; i < FCPU_NPARTS; i++) f[i] = fwd[i] * k, b[i] = bwd[i] * k;
    int n_attn = 0;
    for (int l = 0; l < c->n_layers; l++) {
        phax_block_plan bp;
        phax_plan_block(c, l, &bp);
        for (int i = 0; i < bp.nsub; i++) n_attn += bp.sub[i].kind == PHAX_SUB_ATTN;
    }
    double attn_k = attn_layer_flop(c, B, T, window) * n_attn;  // fwd + bwd
    const char *hw = c->tie_embeddings ? "embed.weight" : "lm_head.weight";
    printf("\nwhere a step's time goes (median step %.2f ms; parts summed over %d timed steps; "
           "GFLOP/s from the stated FLOP of a part, %% of the sgemm ceiling %.1f GFLOP/s):\n",
           step_ms, steps, ceil);
    printf("  %-28s %9s %9s %9s %7s %9s %7s\n", "part", "fwd ms", "bwd ms", "ms", "share", "GFLOP/s",
           "%sgemm");
    double sub_f = 0, sub_b = 0;
    for (int i = FMODEL_PART_GSS; i <= FMODEL_PART_GDN; i++) {
        sub_f += f[i], sub_b += b[i];
        if (f[i] + b[i] <= 0) continue;
        if (i == FMODEL_PART_ATTN) {
            parts_row("attention projections", f[i] - f[FMODEL_PART_ATTN_KERNEL],
                      b[i] - b[FMODEL_PART_ATTN_KERNEL], step_ms, 3 * mm_flop(L, ".attn.w", n), ceil);
            parts_row("attention kernel", f[FMODEL_PART_ATTN_KERNEL], b[FMODEL_PART_ATTN_KERNEL],
                      step_ms, attn_k, ceil);
        } else if (i == FMODEL_PART_MLSTM) {
            parts_row("mlstm projections, gates", f[i] - f[FMODEL_PART_MLSTM_KERNEL],
                      b[i] - b[FMODEL_PART_MLSTM_KERNEL], step_ms, 3 * mm_flop(L, ".mlstm.", n), ceil);
            parts_row("mlstm kernel (chunkwise)", f[FMODEL_PART_MLSTM_KERNEL],
                      b[FMODEL_PART_MLSTM_KERNEL], step_ms, 0, ceil);
        } else if (i == FMODEL_PART_GDN) {
            parts_row("gdn projections, conv, gates, norm", f[i] - f[FMODEL_PART_GDN_KERNEL],
                      b[i] - b[FMODEL_PART_GDN_KERNEL], step_ms, 3 * mm_flop(L, ".gdn.", n), ceil);
            parts_row("gdn kernel (chunkwise)", f[FMODEL_PART_GDN_KERNEL], b[FMODEL_PART_GDN_KERNEL], step_ms, 0,
                      ceil);
        } else if (i == FMODEL_PART_GSS) {
            // The branch by what binds it: its matmuls (with GELU, LayerNorm, gate) at the sgemm
            // ceiling, the DSS kernel (a product) likewise, the convolution at FFTW's rate.
            int ng = 0;
            for (int l = 0; l < c->n_layers; l++) {
                phax_block_plan bp;
                phax_plan_block(c, l, &bp);
                for (int j = 0; j < bp.nsub; j++) ng += bp.sub[j].kind == PHAX_SUB_GSS;
            }
            double fk = f[FMODEL_PART_GSS_KERNEL], bk = b[FMODEL_PART_GSS_KERNEL];
            double fc = f[FMODEL_PART_GSS_CONV], bc = b[FMODEL_PART_GSS_CONV];
            double mmf = 3 * mm_flop(L, ".gss.w", n), kf = ng * gss_kernel_flop(c, T), cf = ng * gss_fft_flop(c, B, T);
            double fftc = fft_ceiling(B, c->gss_hidden, T);
            parts_row("gss projections, gelu, ln, gate", f[i] - fk - fc, b[i] - bk - bc, step_ms, mmf, ceil);
            parts_row("gss dss kernel", fk, bk, step_ms, kf, ceil);
            char lab[64];
            snprintf(lab, sizeof lab, "gss fft convolution (%% fftw)");
            parts_row(lab, fc, bc, step_ms, cf, fftc);
            // The roofline: each piece's FLOP at its own ceiling, summed, against the branch's time.
            double model_ms = 1e3 * (mmf / (ceil * 1e9) + kf / (ceil * 1e9) + (fftc > 0 ? cf / (fftc * 1e9) : 0));
            printf("  %-28s FFTW ceiling %.1f GFLOP/s (%d x %d-point r2c+c2r); the branch at its ceilings "
                   "%.2f ms of %.2f: %.0f%%\n", "  (gss model)", fftc, B * c->gss_hidden, 2 * T, model_ms,
                   f[i] + b[i], f[i] + b[i] > 0 ? 100 * model_ms / (f[i] + b[i]) : 0.0);
        } else {
            double fl = i == FMODEL_PART_SWIGLU ? 3 * mm_flop(L, ".ffn.w_", n)
                        : i == FMODEL_PART_AUX  ? 3 * mm_flop(L, ".ffn_aux.", n)
                        : i == FMODEL_PART_DUAL ? 3 * (mm_flop(L, ".ffn.w_", n) + mm_flop(L, ".ffn_aux.", n))
                                              : 0;  // GSS: matmuls and the FFT convolution
            parts_row(fmodel_part_name(i), f[i], b[i], step_ms, fl, ceil);
        }
    }
    parts_row("head (projection + loss)", f[FMODEL_PART_HEAD], b[FMODEL_PART_HEAD], step_ms,
              3 * mm_flop(L, hw, n), ceil);
    parts_row("embedding, norms, adds, mix", f[FMODEL_PART_TOTAL] - sub_f - f[FMODEL_PART_HEAD],
              b[FMODEL_PART_TOTAL] - sub_b - b[FMODEL_PART_HEAD], step_ms, 0, ceil);
    parts_row("zero_grad", 0, zero_ms, step_ms, 0, ceil);
    parts_row("AdamW", 0, adam_ms, step_ms, 0, ceil);
    printf("  (the head's forward and backward are one fused pass, counted as bwd; the rows add "
           "up to the mean step, %.2f ms)\n",
           f[FMODEL_PART_TOTAL] + b[FMODEL_PART_TOTAL] + zero_ms + adam_ms);
}

static int run_one(const opts_t *o, result_t *r) {
    phax_model_cfg c;
    if (bench_cfg(&c, o)) return PHAX_ERR;
    const int B = o->B, T = o->T, V = c.vocab_size;
    memset(r, 0, sizeof *r);
    snprintf(r->family, sizeof r->family, "%s", phax_family_name(c.family));
    r->ref = o->ref, r->B = B, r->T = T, r->threads = o->ref ? 1 : omp_get_max_threads();
    int steps = o->steps, warmup = o->warmup;
    if (steps <= 0) steps = o->ref ? 1 : T >= 8192 ? 2 : T >= 4096 ? 3 : 5;
    if (warmup < 0) warmup = o->ref ? 0 : T >= 8192 ? 1 : 2;
    if (steps > MAX_STEPS) steps = MAX_STEPS;
    r->steps = steps;

    int32_t *tok = malloc((size_t)B * (T + 1) * sizeof *tok), *tg = malloc((size_t)B * T * 4);
    if (!tok || !tg) return phax_fail("out of memory");
    for (size_t i = 0; i < (size_t)B * (T + 1); i++) tok[i] = (int32_t)(rnd() % (uint32_t)V);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) tg[(size_t)b * T + t] = tok[(size_t)b * (T + 1) + t + 1];
    int32_t *in = malloc((size_t)B * T * sizeof *in);
    for (int b = 0; b < B; b++) memcpy(in + (size_t)b * T, tok + (size_t)b * (T + 1), T * 4);
    free(tok);

    // Ceiling first, in this process and environment (before the model's memory exists).
    if (!o->ref) {
        bench_stats s = bench_sgemm_time(CblasNoTrans, CblasTrans, B * T, c.ffn_hidden, c.d_model,
                                         NULL, NULL, NULL, BENCH_POLICY);
        r->ceil_gflops = 2.0 * B * T * (double)c.ffn_hidden * c.d_model / s.med * 1e-9;
    }

    step_times st;
    phax_adamw_cfg ac = phax_adamw_cfg_default();
    int rc = PHAX_ERR;
    if (!o->ref) {
        fmodel m;
        if (fmodel_new(&m, &c, 1234)) goto out;
        fmodel_ws *ws = fmodel_ws_new(&m, B, T);
        if (!ws) {
            fmodel_free(&m);
            goto out;
        }
        r->ws_mb = fmodel_ws_bytes(ws) / 1e6;
        size_t np = m.layout.numel;
        r->params = (double)np, r->state_mb = 16.0 * np / 1e6;
        r->gflop_step = step_flop(&m.cfg, &m.layout, B, T, o->window, &r->mm_params) * 1e-9;
        float *mom = bench_xmalloc(2 * np * sizeof *mom);  // AdamW m, v (zero, touched)
        fcpu_adamw_param *ap = calloc(m.layout.n, sizeof *ap);
        for (int i = 0; i < m.layout.n; i++) {
            const phax_param_info *p = &m.layout.p[i];
            ap[i] = (fcpu_adamw_param){m.params + p->offset, m.grads + p->offset,
                                       mom + p->offset, mom + np + p->offset, p->numel,
                                       p->ndim == 2};
        }
        for (int s = 0; s < warmup + steps; s++) {
            if (o->parts && s == warmup) fmodel_ws_profile(ws, 1);
            double loss, t0 = bench_wall();
            fmodel_zero_grad(&m);
            double t1 = bench_wall();
            if (fmodel_backward(&m, ws, in, tg, o->window, &loss)) break;
            double t2 = bench_wall();
            if (fcpu_adamw_step(ap, m.layout.n, &ac, s + 1, NULL)) break;
            double t3 = bench_wall();
            if (note_step(&st, r, s, warmup, steps, t0, t1, t2, t3, loss)) rc = PHAX_OK;
        }
        if (rc == PHAX_OK && o->parts) {
            double pf[FCPU_NPARTS], pb[FCPU_NPARTS];
            fmodel_ws_profile_get(ws, pf, pb);
            double zsum = 0, asum = 0;  // zero_grad and AdamW over the timed steps
            for (int k = 0; k < steps; k++) zsum += st.tz[k], asum += st.ta[k];
            print_parts(&m.cfg, &m.layout, B, T, o->window, steps, pf, pb, 1e3 * zsum / steps,
                        1e3 * asum / steps, ms_median(st.tt, steps), r->ceil_gflops);
        }
        free(ap), free(mom);
        fmodel_ws_free(ws);
        fmodel_free(&m);
    } else {
        ref_model m;
        if (ref_model_new(&m, &c, 1234)) goto out;
        size_t np = m.layout.numel;
        r->params = (double)np, r->state_mb = 32.0 * np / 1e6;
        r->gflop_step = step_flop(&m.cfg, &m.layout, B, T, o->window, &r->mm_params) * 1e-9;
        double *mom = bench_xmalloc(2 * np * sizeof *mom);
        ref_adamw_param *ap = calloc(m.layout.n, sizeof *ap);
        for (int i = 0; i < m.layout.n; i++) {
            const phax_param_info *p = &m.layout.p[i];
            ap[i] = (ref_adamw_param){m.params + p->offset, m.grads + p->offset, mom + p->offset,
                                      mom + np + p->offset, p->numel, p->ndim == 2};
        }
        for (int s = 0; s < warmup + steps; s++) {
            double loss, t0 = bench_wall();
            ref_model_zero_grad(&m);
            double t1 = bench_wall();
            if (ref_model_backward(&m, in, tg, B, T, o->window, &loss)) break;
            double t2 = bench_wall();
            if (ref_adamw_step(ap, m.layout.n, &ac, s + 1, NULL)) break;
            double t3 = bench_wall();
            if (note_step(&st, r, s, warmup, steps, t0, t1, t2, t3, loss)) rc = PHAX_OK;
        }
        free(ap), free(mom);
        ref_model_free(&m);
    }
    if (rc == PHAX_OK) {
        double sorted[MAX_STEPS];
        memcpy(sorted, st.tt, steps * sizeof *st.tt);
        r->ms_med = ms_median(sorted, steps), r->ms_min = 1e3 * sorted[0];
        r->ms_fb = ms_median(st.tfb, steps), r->ms_adam = ms_median(st.ta, steps);
        r->ms_zero = ms_median(st.tz, steps);
        r->tok_s = (double)B * T / (r->ms_med * 1e-3);
        r->gflops = r->gflop_step / (r->ms_med * 1e-3);
        if (!isfinite(r->loss_last)) rc = phax_fail("non-finite loss %g", r->loss_last);
    }
out:
    free(in), free(tg);
    r->peak_mb = bench_peak_rss_mb(RUSAGE_SELF);
    return rc;
}

// --- the sweep: each configuration in a child ---------------------------------------------------
// Runs `bench_model --family F --T T --B 1 [--ref] --result-fd K` as a child; its result
// line comes back through a pipe, its peak RSS from wait4. threads > 0: the child runs
// with OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = threads. 0 on success.
static int run_child(const char *family, int T, int ref, int steps, int threads, result_t *r) {
    int fd[2];
    if (pipe(fd)) return -1;
    char Ts[16], fds[16], st[16];
    snprintf(Ts, sizeof Ts, "%d", T), snprintf(fds, sizeof fds, "%d", fd[1]);
    snprintf(st, sizeof st, "%d", steps);
    fflush(stdout), fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return close(fd[0]), close(fd[1]), -1;
    if (pid == 0) {
        close(fd[0]);
        char *args[16];
        int a = 0;
        args[a++] = "bench_model", args[a++] = "--family", args[a++] = (char *)family;
        args[a++] = "--T", args[a++] = Ts, args[a++] = "--B", args[a++] = "1";
        args[a++] = "--result-fd", args[a++] = fds;
        if (steps > 0) args[a++] = "--steps", args[a++] = st;
        if (ref) args[a++] = "--ref";
        args[a++] = "--precision", args[a++] = (char *)g_precision;
        args[a] = NULL;
        if (threads > 0) {
            char th[16];
            snprintf(th, sizeof th, "%d", threads);
            setenv("OMP_NUM_THREADS", th, 1), setenv("OPENBLAS_NUM_THREADS", th, 1);
        }
        execv("/proc/self/exe", args);
        perror("exec /proc/self/exe");
        _exit(127);
    }
    close(fd[1]);
    char buf[1024];
    size_t len = 0;
    ssize_t k;
    while ((k = read(fd[0], buf + len, sizeof buf - 1 - len)) > 0 || (k < 0 && errno == EINTR))
        if (k > 0) len += (size_t)k;
    buf[len] = 0;
    close(fd[0]);
    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) || csv_parse(buf, r)) {
        memset(r, 0, sizeof *r);
        snprintf(r->family, sizeof r->family, "%s", family);
        r->T = T, r->ref = ref;
        return -1;
    }
    r->peak_mb = ru.ru_maxrss * 1024.0 / 1e6;  // this child's own peak
    return 0;
}

static int parse_list(const char *s, char out[][16], int max) {
    int n = 0;
    while (s && *s && n < max) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        snprintf(out[n++], 16, "%.*s", (int)(len < 15 ? len : 15), s);
        s = e ? e + 1 : NULL;
    }
    return n;
}

static int sweep(const char *csv_path, const char *fams_s, const char *Ts_s, int with_ref) {
    char fams[PHAX_FAMILY_COUNT + 4][16], tss[8][16];
    int nf = fams_s ? parse_list(fams_s, fams, PHAX_FAMILY_COUNT + 4) : 0;
    if (!nf) {
        const phax_family order[] = {PHAX_FAMILY_TRANSFORMER, PHAX_FAMILY_PHA,
                                     PHAX_FAMILY_SERIAL,      PHAX_FAMILY_SWAX,
                                     PHAX_FAMILY_SWA,         PHAX_FAMILY_MLSTM};
        for (int i = 0; i < 6; i++) snprintf(fams[nf++], 16, "%s", phax_family_name(order[i]));
    }
    int Ts[8], nT = Ts_s ? parse_list(Ts_s, tss, 8) : 0;
    for (int i = 0; i < nT; i++) Ts[i] = atoi(tss[i]);
    if (!nT) Ts[0] = 512, Ts[1] = 2048, Ts[2] = 8192, nT = 3;
    FILE *csv = bench_csv_open(csv_path, CSV_HEADER);
    bench_print_env(stdout, "bench_model");
    printf("training step = zero_grad + forward + backward + AdamW over all parameters; B = 1;\n"
           "bench config: d 256, 4 layers, vocab 8192 untied, 8 q / 2 kv heads of 32, SwiGLU 683;\n"
           "each row a fresh child process (peak MB = its ru_maxrss, which includes the %.0f MB\n"
           "this parent had when it forked); ref: float64, 1 thread, 1 step at T = 512 (the\n"
           "speed-up is fast tokens/s over ref tokens/s at the same T).\n\n",
           bench_peak_rss_mb(RUSAGE_SELF));
    table_header();
    int rc = 0;
    double t0 = bench_wall();
    result_t fast512[PHAX_FAMILY_COUNT + 4];
    memset(fast512, 0, sizeof fast512);
    for (int f = 0; f < nf; f++)
        for (int i = 0; i < nT; i++) {
            result_t r;
            if (run_child(fams[f], Ts[i], 0, 0, 0, &r)) {
                printf("%-11s fast %5d   FAILED (see the message above)\n", fams[f], Ts[i]);
                rc = 1;
                continue;
            }
            table_row(&r);
            if (csv) csv_row(csv, &r), fflush(csv);
            if (Ts[i] == 512) fast512[f] = r;
        }
    if (with_ref) {
        printf("\nref (float64, scalar, 1 thread), 1 timed step at T = 512, and the speed-up of fast "
               "(%d threads):\n",
               omp_get_max_threads());
        for (int f = 0; f < nf; f++) {
            result_t r;
            if (run_child(fams[f], 512, 1, 1, 0, &r)) {
                printf("%-11s ref   512   FAILED\n", fams[f]);
                rc = 1;
                continue;
            }
            table_row(&r);
            if (csv) csv_row(csv, &r), fflush(csv);
            // fast on one thread, right after ref: the per-core speed-up, which the
            // second core's state (this machine's 2-thread rates swing ±30%) leaves alone
            result_t r1;
            int ok1 = run_child(fams[f], 512, 0, 10, 1, &r1) == 0;
            if (ok1 && csv) csv_row(csv, &r1), fflush(csv);
            // Two more 2-thread runs, after ref and the 1-thread run: the speed-up uses
            // the median of the three, taken minutes apart (the sweep's row and these).
            double t3[3] = {fast512[f].tok_s, 0, 0};
            for (int k = 1; k < 3; k++) {
                result_t rk;
                if (run_child(fams[f], 512, 0, 0, 0, &rk) == 0) t3[k] = rk.tok_s;
            }
            double lo = t3[0] < t3[1] ? t3[0] : t3[1], hi = t3[0] < t3[1] ? t3[1] : t3[0];
            double med = t3[2] < lo ? lo : t3[2] > hi ? hi : t3[2];
            if (fast512[f].tok_s > 0)
                printf("%-11s speed-up fast/ref at T = 512: %.0fx (%.0f vs %.1f tokens/s; fast the "
                       "median of 3 runs %.0f, %.0f, %.0f); fast on 1 thread %.0f tokens/s = %.0fx "
                       "per core; first-step loss fast %.6f, ref %.6f\n",
                       fams[f], med / r.tok_s, med, r.tok_s, t3[0], t3[1], t3[2],
                       ok1 ? r1.tok_s : 0.0, ok1 ? r1.tok_s / r.tok_s : 0.0,
                       fast512[f].loss_first, r.loss_first);
        }
    }
    char la[64];
    printf("\nsweep took %.0f s; load average at the end %s\n", bench_wall() - t0,
           bench_loadavg(la, sizeof la));
    if (csv) bench_csv_close(csv), printf("CSV: %s\n", csv_path);
    return rc;
}

static void usage(void) {
    fprintf(stderr,
            "usage: bench_model [out.csv]\n"
            "       bench_model --sweep [--families a,b] [--Ts 512,2048] [--no-ref] [--csv FILE]\n"
            "       bench_model --family F --T T [--B 1] [--steps N] [--warmup W] [--ref]\n"
            "                   [--window W] [--config FILE.json] [--csv FILE] [--parts]\n"
            "  --precision f32|bf16: fast/cpu's matmuls in float32 (default) or on bf16 operands\n"
            "  --parts: also print where a step's time goes (sub-layers, kernels, head, AdamW)\n");
    exit(2);
}

int main(int argc, char **argv) {
    opts_t o = {.B = 1, .T = 0, .steps = 0, .warmup = -1, .window = -1};
    const char *csv_path = NULL, *fams = NULL, *Ts = NULL;
    int result_fd = -1, do_sweep = 0, with_ref = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (!strcmp(a, name) && (v ? 1 : (usage(), 0)) && ++i)
        if (ARG("--family")) snprintf(o.family, sizeof o.family, "%s", v);
        else if (ARG("--T")) o.T = atoi(v);
        else if (ARG("--B")) o.B = atoi(v);
        else if (ARG("--steps")) o.steps = atoi(v);
        else if (ARG("--warmup")) o.warmup = atoi(v);
        else if (ARG("--window")) o.window = atoi(v);
        else if (ARG("--config")) o.config = v;
        else if (ARG("--csv")) csv_path = v;
        else if (ARG("--precision")) g_precision = v;
        else if (ARG("--result-fd")) result_fd = atoi(v);
        else if (ARG("--families")) fams = v, do_sweep = 1;
        else if (ARG("--Ts")) Ts = v, do_sweep = 1;
        else if (!strcmp(a, "--ref")) o.ref = 1;
        else if (!strcmp(a, "--parts")) o.parts = 1;
        else if (!strcmp(a, "--no-ref")) with_ref = 0, do_sweep = 1;
        else if (!strcmp(a, "--sweep")) do_sweep = 1;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) usage();
        else if (a[0] != '-' && !csv_path) csv_path = a;  // `ninja bench`: bench_model out.csv
        else usage();
#undef ARG
    }
    if (strcmp(g_precision, "f32") && strcmp(g_precision, "bf16")) {
        fprintf(stderr, "bench_model: --precision: '%s' is not f32 or bf16\n", g_precision);
        return 2;
    }
    if (!strcmp(g_precision, "bf16") && fcpu_mm_precision_set(FCPU_MM_BF16)) {
        fprintf(stderr, "bench_model: --precision bf16: %s\n", phax_error());
        return 2;
    }
    if (result_fd < 0) printf("matmul precision: %s\n", g_precision);
    if (do_sweep || !o.family[0]) return sweep(csv_path, fams, Ts, with_ref);

    if (o.T <= 0 || o.B <= 0) usage();
    alarm(o.ref ? 1800 : 600);  // a stuck configuration must not stall the sweep
    result_t r;
    if (result_fd < 0) bench_print_env(stdout, "bench_model");
    if (run_one(&o, &r)) {
        fprintf(stderr, "bench_model %s T=%d%s: %s\n", o.family, o.T, o.ref ? " (ref)" : "",
                phax_error());
        return 1;
    }
    if (result_fd >= 0) {  // a child of the sweep: one CSV line back to the parent
        FILE *f = fdopen(result_fd, "w");
        if (!f) return 1;
        csv_row(f, &r);
        fclose(f);
        return 0;
    }
    printf("%s, B=%d T=%d, %d timed steps; %.0f parameters (%.0f in matmuls), %.2f GFLOP/step;\n"
           "parameters + grads + AdamW moments %.1f MB; zero_grad %.2f ms/step\n",
           r.family, r.B, r.T, r.steps, r.params, r.mm_params, r.gflop_step, r.state_mb,
           r.ms_zero);
    table_header();
    table_row(&r);
    if (csv_path) {
        FILE *csv = bench_csv_open(csv_path, CSV_HEADER);
        csv_row(csv, &r);
        bench_csv_close(csv);
    }
    return 0;
}
