// phax/backend.h: every registered backend against ref, through the interface
// only, and --backend in every command that runs a model.
//
// Numerics: for each family, every backend's model is given the same float32
// parameters (params_set) and its forward loss, per-token losses and the gradient
// norm of a step (zero_grad, backward, AdamW) are compared with ref's under the
// bound of tests/test_fmodel.c:
//   |backend − ref| / |ref|  ≤  C · baseline + FLOOR,   C = 16, FLOOR = 16 u, u = 2^-24,
// baseline = the larger change of ref and of the backend when every parameter moves
// by one float ulp in a random direction (max of two draws): the noise a float32
// evaluation of this computation carries. ref against itself is exact.
// The gradient norm comes from the second of two backwards with zero_grad between
// them, so a zero_grad that does not zero (backward adds) doubles it.
//
// Decoders: every backend's decoder reads a sequence (prefill_all) and its logits at
// every position are compared with ref's (the naive decoder: ref's forward over the
// tokens so far) under the same bound, the baseline measured on the logits.
//
// Registry: ref and cpu are listed and found; an unknown name and a backend this
// build lacks (cuda) each give one message. CLI: --backend ref and cpu are taken by
// train (also fast), eval (windows and --carry), generate, niah and recall; an
// unknown backend is one line, exit 1.
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "phax/backend.h"
#include "phax/model_plan.h"
#include "phax/fcpu_gemm.h"
#include "phax/fast.h"  // phax_cuda_info
#include "phax/core.h"
#include "harness.h"
#include "testutil.h"

#define U32 0x1p-24
#define C_MODEL 16.0
#define FLOOR (16.0 * U32)

// ---------------------------------------------------------------------------
// The registry.

Test(backend, registry_lists_ref_and_cpu) {
    cr_assert(phax_backend_count() >= 2);
    cr_assert_str_eq(phax_backend_name(phax_backend_at(0)), "ref");
    cr_assert_str_eq(phax_backend_name(phax_backend_at(1)), "cpu");
    cr_assert(phax_backend_at(phax_backend_count()) == NULL);
    for (int i = 0; i < phax_backend_count(); i++) {
        const phax_backend_ops *be = phax_backend_at(i);
        cr_assert(phax_backend_find(phax_backend_name(be)) == be);
    }
    cr_assert(phax_backend_dtype(phax_backend_find("ref")) == PHAX_DT_F64);
    cr_assert(phax_backend_dtype(phax_backend_find("cpu")) == PHAX_DT_F32);
    for (int i = 0; i < phax_backend_count(); i++) cr_assert(phax_backend_has_decoder(phax_backend_at(i)));
}

// What --backend cuda must say on this build and machine: without nvcc "not built"; built but
// without a GPU "no CUDA device"; with a device, to run phax-cuda (phax does not link the
// device backend: src/backend_cuda_dev.c).
static const char *cuda_frag(void) {
    char info[256];
    phax_cuda_info(info, sizeof info);
    return strstr(info, "not built")   ? "cuda: not built"
           : strstr(info, "no device") ? "cuda: no CUDA device is present"
                                       : "cuda: this phax does not load the CUDA libraries";
}

Test(backend, unknown_and_unbuilt_names_fail_with_one_message) {
    cr_assert(phax_backend_find("nope") == NULL);
    cr_assert(strstr(phax_error(), "'nope' is not a backend (ref, cpu, cpu_bf16, cuda, cuda_emu)"), "%s", phax_error());
    cr_assert(phax_backend_find("cuda") == NULL);
    cr_assert(strstr(phax_error(), cuda_frag()), "%s (expected '%s')", phax_error(), cuda_frag());
    cr_assert(!strchr(phax_error(), '\n'));
    cr_assert(phax_backend_find("fast") == NULL, "fast is phax train's alias, not a backend name");
}

// ---------------------------------------------------------------------------
// Numerics through the interface.

typedef struct {
    const char *label;
    phax_family family;
    int window;
} bcase;

// Small awkward config: vocab 37, d 24, 2 layers, 3 query heads of width 6 over 1 kv
// head, SwiGLU hidden 40, GSS F 36, Hs 5, N 7, mLSTM 2 heads (as tests/test_fmodel.c).
static phax_model_cfg small_cfg(phax_family f) {
    phax_model_cfg c = phax_model_cfg_default(f);
    c.vocab_size = 37, c.d_model = 24, c.n_layers = 2;
    c.n_heads = 3, c.n_kv_heads = 1, c.head_dim = 6;
    c.ffn_hidden = 40, c.ffn_aux_hidden = 11;
    c.gss_expand = 36, c.gss_hidden = 5, c.gss_state = 7;
    c.mlstm_heads = 2, c.train_len = 9;
    return c;
}

enum { B = 2, T = 9 };

typedef struct {
    double loss, gnorm;
    float rows[B * T];
} outputs;

// One backend at float parameters p: forward loss, token losses, and the gradient norm
// of an AdamW step after two backwards with zero_grad between.
static outputs run_backend(const phax_backend_ops *be, const phax_model_cfg *cfg, const float *p,
                           const int32_t *tok, const int32_t *tg, int window) {
    outputs o;
    phax_bmodel *m = phax_bmodel_new(be, cfg, 7, NULL);
    cr_assert(m, "%s: %s", phax_backend_name(be), phax_error());
    const phax_layout *L = phax_bmodel_layout(m);
    cr_assert(phax_bmodel_params_set(m, PHAX_DT_F32, p) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_bmodel_forward(m, tok, tg, B, T, window, NULL, &o.loss) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_bmodel_token_losses(m, tok, tg, B, T, window, o.rows) == PHAX_OK, "%s", phax_error());
    unsigned char *decay = calloc((size_t)L->n, 1);
    cr_assert(phax_bmodel_adamw_init(m, decay) == PHAX_OK, "%s", phax_error());
    double l1, l2;
    phax_bmodel_zero_grad(m);
    cr_assert(phax_bmodel_backward(m, tok, tg, B, T, window, &l1) == PHAX_OK, "%s", phax_error());
    phax_bmodel_zero_grad(m);
    cr_assert(phax_bmodel_backward(m, tok, tg, B, T, window, &l2) == PHAX_OK, "%s", phax_error());
    cr_assert(l1 == l2, "%s: backward losses %.9g, %.9g", phax_backend_name(be), l1, l2);
    phax_adamw_cfg a = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0, .clip = 0};
    cr_assert(phax_bmodel_adamw_step(m, &a, 1, &o.gnorm) == PHAX_OK, "%s", phax_error());
    free(decay);
    phax_bmodel_free(m);
    return o;
}

// The harness's one relative error (NaN or inf anywhere: +inf) of a float result
// against a float reference, widened.
static double rel_f(const float *a, const float *b, size_t n) {
    double *bd = h_todbl(b, n);
    double e = h_relerr(H_F(a), bd, H_ZERO, n);
    tu_free(bd);
    return e;
}
static double rel_rows(const float *a, const float *b) { return rel_f(a, b, (size_t)B * T); }

// The harness's judge with the baseline measured here (a one-ulp perturbation):
// ‖got − want‖ ≤ (C·base + FLOOR)·‖want‖.
static bool within(const char *label, const char *be, const char *what, const float *got,
                   const float *want, size_t n, double base) {
    double *wd = h_todbl(want, n);
    char lab[160];
    snprintf(lab, sizeof lab, "%s %s", label, be);
    bool ok = h_bound_rel(lab, what, H_F(got), wd, n, C_MODEL, base, FLOOR, 0.0);
    tu_free(wd);
    return ok;
}
static bool within_d(const char *label, const char *be, const char *what, double got, double want,
                     double base) {
    char lab[160];
    snprintf(lab, sizeof lab, "%s %s", label, be);
    return h_bound_rel(lab, what, H_D(&got), &want, 1, C_MODEL, base, FLOOR, 0.0);
}

// The logits (T, V) of a decoder reading the first T tokens with prefill_all.
static float *decode_all(const phax_backend_ops *be, const phax_model_cfg *cfg, const float *p,
                         const int32_t *tok, int window) {
    phax_bmodel *m = phax_bmodel_new(be, cfg, 0, p);
    cr_assert(m, "%s: %s", phax_backend_name(be), phax_error());
    phax_bdecoder *d = phax_bdecoder_new(m, T, window);
    cr_assert(d, "%s: %s", phax_backend_name(be), phax_error());
    float *lg = malloc((size_t)T * cfg->vocab_size * sizeof *lg);
    cr_assert(phax_bdecoder_prefill_all(d, tok, T, lg) == PHAX_OK, "%s: %s", phax_backend_name(be), phax_error());
    phax_bdecoder_free(d);
    phax_bmodel_free(m);
    return lg;
}

static void check_decoders(const char *label, const phax_model_cfg *cfg, const float *p, float *q, size_t P,
                           const int32_t *tok, int window, phax_rng *r) {
    const phax_backend_ops *ref = phax_backend_find("ref");
    size_t n = (size_t)T * cfg->vocab_size;
    float *want = decode_all(ref, cfg, p, tok, window);
    bool ok = true;
    for (int b = 0; b < phax_backend_count(); b++) {
        const phax_backend_ops *be = phax_backend_at(b);
        float *got = decode_all(be, cfg, p, tok, window);
        double base = 0;
        for (int draw = 0; draw < 2 && be != ref; draw++) {
            for (size_t i = 0; i < P; i++) q[i] = nextafterf(p[i], phax_rng_below(r, 2) ? INFINITY : -INFINITY);
            float *rp = decode_all(ref, cfg, q, tok, window), *bp = decode_all(be, cfg, q, tok, window);
            base = fmax(base, fmax(rel_f(rp, want, n), rel_f(bp, got, n)));
            free(rp), free(bp);
        }
        ok &= within(label, phax_backend_name(be), "decoder logits", got, want, n, base);
        free(got);
    }
    free(want);
    cr_assert(ok, "%s: a decoder is outside the bound (lines above)", label);
}

static void check_case(const bcase *k) {
    phax_rng r = tu_rng(k->label);
    phax_model_cfg cfg = small_cfg(k->family);
    const phax_backend_ops *ref = phax_backend_find("ref");
    // The float parameters every backend runs: the cpu initialisation (phax_model_init, rounded).
    phax_bmodel *init = phax_bmodel_new(phax_backend_find("cpu"), &cfg, 11, NULL);
    cr_assert(init, "%s", phax_error());
    size_t P = phax_bmodel_layout(init)->numel;
    float *p = malloc(P * sizeof *p), *q = malloc(P * sizeof *q);
    cr_assert(phax_bmodel_params_get(init, 0, P, PHAX_DT_F32, p) == PHAX_OK);
    phax_bmodel_free(init);
    int32_t tok[B * T], tg[B * T];
    for (int i = 0; i < B * T; i++)
        tok[i] = (int32_t)phax_rng_below(&r, (uint64_t)cfg.vocab_size),
        tg[i] = (int32_t)phax_rng_below(&r, (uint64_t)cfg.vocab_size);
    tg[3] = -1;  // not counted
    outputs want = run_backend(ref, &cfg, p, tok, tg, k->window);
    bool ok = true;
    for (int b = 0; b < phax_backend_count(); b++) {
        const phax_backend_ops *be = phax_backend_at(b);
        outputs got = run_backend(be, &cfg, p, tok, tg, k->window);
        double base_loss = 0, base_rows = 0, base_gn = 0;
        for (int draw = 0; draw < 2 && be != ref; draw++) {
            for (size_t i = 0; i < P; i++) q[i] = nextafterf(p[i], phax_rng_below(&r, 2) ? INFINITY : -INFINITY);
            outputs rp = run_backend(ref, &cfg, q, tok, tg, k->window);
            outputs bp = run_backend(be, &cfg, q, tok, tg, k->window);
            base_loss = fmax(base_loss, fmax(h_relerr(H_D(&rp.loss), &want.loss, H_ZERO, 1),
                                             h_relerr(H_D(&bp.loss), &got.loss, H_ZERO, 1)));
            base_rows = fmax(base_rows, fmax(rel_rows(rp.rows, want.rows), rel_rows(bp.rows, got.rows)));
            base_gn = fmax(base_gn, fmax(h_relerr(H_D(&rp.gnorm), &want.gnorm, H_ZERO, 1),
                                         h_relerr(H_D(&bp.gnorm), &got.gnorm, H_ZERO, 1)));
        }
        const char *name = phax_backend_name(be);
        ok &= within_d(k->label, name, "loss", got.loss, want.loss, base_loss);
        ok &= within(k->label, name, "token losses", got.rows, want.rows, (size_t)B * T, base_rows);
        ok &= within_d(k->label, name, "gradient norm", got.gnorm, want.gnorm, base_gn);
        cr_assert(got.rows[3] == 0, "%s: an uncounted target's loss is %g", name, got.rows[3]);
    }
    check_decoders(k->label, &cfg, p, q, P, tok, k->window, &r);
    free(p), free(q);
    cr_assert(ok, "%s: a backend is outside the bound (lines above)", k->label);
}

Test(backend, every_backend_matches_ref_pha) { check_case(&(bcase){"pha", PHAX_FAMILY_PHA, -1}); }
Test(backend, every_backend_matches_ref_transformer) {
    check_case(&(bcase){"transformer", PHAX_FAMILY_TRANSFORMER, -1});
}
Test(backend, every_backend_matches_ref_serial) { check_case(&(bcase){"serial", PHAX_FAMILY_SERIAL, -1}); }
Test(backend, every_backend_matches_ref_swax) { check_case(&(bcase){"swax w2", PHAX_FAMILY_SWAX, 2}); }
Test(backend, every_backend_matches_ref_swa) { check_case(&(bcase){"swa full", PHAX_FAMILY_SWA, 0}); }
Test(backend, every_backend_matches_ref_mlstm) { check_case(&(bcase){"mlstm", PHAX_FAMILY_MLSTM, -1}); }
Test(backend, every_backend_matches_ref_swa_full) {
    check_case(&(bcase){"swa_full w3", PHAX_FAMILY_SWA_FULL, 3});
}

Test(backend, every_backend_matches_ref_swax_gdn) {
    check_case(&(bcase){"swax_gdn w3", PHAX_FAMILY_SWAX_GDN, 3});
}

// A model over borrowed parameters reads them and refuses to train; parameters read back.
Test(backend, inference_model_over_borrowed_parameters) {
    phax_model_cfg cfg = small_cfg(PHAX_FAMILY_PHA);
    for (int b = 0; b < phax_backend_count(); b++) {
        const phax_backend_ops *be = phax_backend_at(b);
        phax_bmodel *m = phax_bmodel_new(be, &cfg, 3, NULL);
        cr_assert(m);
        size_t P = phax_bmodel_layout(m)->numel;
        float *p = malloc(P * sizeof *p), *back = malloc(P * sizeof *back);
        cr_assert(phax_bmodel_params_get(m, 0, P, PHAX_DT_F32, p) == PHAX_OK);
        cr_assert(phax_bmodel_params_set(m, PHAX_DT_F32, p) == PHAX_OK);  // ref: the same float values
        phax_bmodel *v = phax_bmodel_new(be, &cfg, 0, p);
        cr_assert(v, "%s", phax_error());
        cr_assert(phax_bmodel_params_get(v, 0, P, PHAX_DT_F32, back) == PHAX_OK);
        cr_assert(!memcmp(p, back, P * sizeof *p), "%s: parameters changed on the way in", phax_backend_name(be));
        int32_t tok[B * T] = {0}, tg[B * T] = {0};
        double l1, l2;
        cr_assert(phax_bmodel_forward(m, tok, tg, B, T, -1, NULL, &l1) == PHAX_OK);
        cr_assert(phax_bmodel_forward(v, tok, tg, B, T, -1, NULL, &l2) == PHAX_OK);
        cr_assert(l1 == l2, "%s: %.9g vs %.9g", phax_backend_name(be), l1, l2);
        cr_assert(phax_bmodel_backward(v, tok, tg, B, T, -1, &l2) == PHAX_ERR);
        cr_assert(strstr(phax_error(), "inference only"), "%s", phax_error());
        cr_assert(phax_bmodel_params_get(v, P, 1, PHAX_DT_F32, back) == PHAX_ERR);
        phax_bdecoder *d = phax_bdecoder_new(v, 4, -1);
        cr_assert(d, "%s", phax_error());
        int32_t bad = cfg.vocab_size;
        cr_assert(phax_bdecoder_step(d, bad, NULL) == PHAX_ERR, "%s: token %d taken", phax_backend_name(be), bad);
        cr_assert(phax_bdecoder_step(d, 1, NULL) == PHAX_OK);
        cr_assert(phax_bdecoder_state_bytes(d) > 0);
        phax_bdecoder_free(d);
        phax_bmodel_free(v), phax_bmodel_free(m);
        free(p), free(back);
    }
}

// ---------------------------------------------------------------------------
// --backend in the commands.

typedef struct {
    char *dir, *data, *out, *err, *run, *recall, *swa;
} sandbox;

#define phax_run(s, ...) tu_phax((s)->out, (s)->err, NULL, NULL, __VA_ARGS__)

static void expect_ok(const sandbox *s, int rc, const char *what) {
    char *e = tu_slurp(s->err, NULL);
    cr_assert(rc == 0, "%s: exit %d: %s", what, rc, e);
    free(e);
}

static void expect_fail(const sandbox *s, int rc, const char *prefix, const char *frag) {
    char *why = tu_cli_error_check(s->err, rc, prefix, frag);
    cr_assert(!why, "%s", why);
}

#define TINY(s, out, backend, ...)                                                                  \
    phax_run(s, "train", "--set", "d_model=16", "--set", "n_layers=1", "--set", "n_heads=2", "--set", \
             "n_kv_heads=1", "--seq", "16", "--batch", "2", "--steps", "2", "--warmup", "1",         \
             "--eval-every", "0", "--eval-tokens", "64", "--backend", backend, "--out", out,        \
             ##__VA_ARGS__, NULL)

// A corpus, tiny lm runs (cpu; bytes, so that phax niah's prompts can be written): pha and
// swa with a window of 5 (eval --carry), and a tiny recall run (cpu).
static sandbox sandbox_new(void) {
    sandbox s;
    s.dir = tu_tmpdir("phax_backend");
    s.data = tu_join(s.dir, "train.txt");
    s.out = tu_join(s.dir, "out.txt");
    s.err = tu_join(s.dir, "err.txt");
    s.run = tu_join(s.dir, "run");
    s.recall = tu_join(s.dir, "recall");
    s.swa = tu_join(s.dir, "swa");
    FILE *f = fopen(s.data, "w");
    cr_assert(f);
    for (int i = 0; i < 40; i++) fprintf(f, "0 1 2 3 4 5 6 7 8 9 the cat 9 8 7 6 5 4 3 2 1 0 sat on the mat .\n");
    fclose(f);
    expect_ok(&s, TINY(&s, s.run, "cpu", "--family", "pha", "--train", s.data, "--tokenizer", "byte"), "train (lm)");
    expect_ok(&s, TINY(&s, s.swa, "cpu", "--family", "swa", "--set", "w_long=5", "--train", s.data,
                       "--tokenizer", "byte"), "train (swa)");
    expect_ok(&s, TINY(&s, s.recall, "cpu", "--family", "transformer", "--task", "recall",
                       "--recall-pairs", "1"), "train (recall)");
    return s;
}

static void sandbox_free(sandbox *s) {
    tu_rm_rf(s->dir);
    free(s->dir), free(s->data), free(s->out), free(s->err), free(s->run), free(s->recall), free(s->swa);
}

Test(backend, train_takes_ref_cpu_and_fast) {
    sandbox s = sandbox_new();
    // cuda_emu: the cuda backend's code (fast/cuda under the shared runner, host↔device copies,
    // AdamW on the device, checkpoint and resume) on the CPU emulation of the CUDA model.
    // cpu_bf16: the same with bf16 matmul operands (when this build has oneDNN).
    const char *names[] = {"ref", "cpu", "fast", "cuda_emu", "cpu_bf16"};
    for (int i = 0; i < 4 + fcpu_bf16_available(); i++) {
        char *out = tu_join(s.dir, names[i]);
        expect_ok(&s, TINY(&s, out, names[i], "--family", "pha", "--train", s.data, "--stop-after", "1"), names[i]);
        char *o = tu_slurp(s.out, NULL);
        char *want = tu_xprintf("%s backend", names[i]);
        cr_assert(strstr(o, want), "%s", o);
        free(want);
        free(o);
        // The run resumes on the backend its state names (fast: the runs of earlier phax).
        expect_ok(&s, phax_run(&s, "train", "--resume", "--out", out, NULL), "resume");
        o = tu_slurp(s.out, NULL);
        cr_assert(strstr(o, "done at step 2/2"), "%s", o);
        free(o);
        free(out);
    }
    expect_fail(&s, TINY(&s, "x", "nope", "--family", "pha", "--train", s.data), "phax train: ",
                "--backend: 'nope' is not a backend (ref, cpu, cpu_bf16, cuda, cuda_emu)");
    expect_fail(&s, TINY(&s, "x", "cuda", "--family", "pha", "--train", s.data), "phax train: ",
                cuda_frag());
    // Without oneDNN, or on a CPU where oneDNN has no bf16 matmul (AVX2 only), cpu_bf16 is refused
    // in one line that says why, before any step (it crashed inside oneDNN on such a CPU once).
    if (!fcpu_bf16_available())
        expect_fail(&s, TINY(&s, "x", "cpu_bf16", "--family", "pha", "--train", s.data), "phax train: ",
                    fcpu_bf16_unavailable());
    sandbox_free(&s);
}

// A SWAX-family run through the commands (family fam, 2 blocks, w_long 5, at out): trains on cpu
// with the stochastic window (the log names each step's), stops and resumes, evaluates on cpu and
// ref to the same loss within float32's error, and generates on cpu.
static void windowed_family_commands(sandbox *s, const char *fam, const char *out) {
    expect_ok(s, TINY(s, out, "cpu", "--family", fam, "--set", "n_layers=2", "--set", "w_long=5", "--train", s->data,
                      "--tokenizer", "byte", "--stop-after", "1"),
              fam);
    expect_ok(s, phax_run(s, "train", "--resume", "--out", out, NULL), "resume");
    char *o = tu_slurp(s->out, NULL), want[64];
    snprintf(want, sizeof want, "resuming %s", fam);
    cr_assert(strstr(o, want) && strstr(o, "done at step 2/2"), "%s", o);
    free(o);
    char *log = tu_join(out, "log.jsonl");
    o = tu_slurp(log, NULL);
    cr_assert(o && strstr(o, "\"window\": "), "the log names no step's window: %s", o ? o : "(none)");
    free(o), free(log);
    double loss[2];
    const char *bes[] = {"cpu", "ref"};
    for (int i = 0; i < 2; i++) {
        expect_ok(s, phax_run(s, "eval", out, "--file", s->data, "--max-tokens", "200", "--backend", bes[i], NULL),
                  bes[i]);
        o = tu_slurp(s->out, NULL);
        const char *at = strstr(o, "loss ");
        cr_assert(strstr(o, "SWA window 5") && at && sscanf(at, "loss %lf", &loss[i]) == 1, "%s", o);
        free(o);
    }
    // the loss is a mean of float32 log-probabilities over ~200 tokens: 1e-4 relative is far above
    // float32's rounding there and far below any change of the model
    cr_assert(fabs(loss[0] - loss[1]) <= 1e-4 * fabs(loss[1]), "%s: eval cpu %.9g vs ref %.9g", fam, loss[0],
              loss[1]);
    expect_ok(s, phax_run(s, "generate", out, "--prompt", "the cat", "--tokens", "3", "--backend", "cpu", NULL),
              "generate on cpu");
}

// swa_full through the commands (windowed_family_commands), and eval --carry refused (its full
// layers keep every key).
Test(backend, swa_full_commands) {
    sandbox s = sandbox_new();
    char *out = tu_join(s.dir, "swa_full");
    windowed_family_commands(&s, "swa_full", out);
    expect_fail(&s, phax_run(&s, "eval", out, "--file", s.data, "--carry", "--backend", "cpu", NULL), "phax eval: ",
                "--carry needs windowed attention");
    free(out);
    sandbox_free(&s);
}

// swax_gdn through the commands (windowed_family_commands), and generation on ref too (its naive
// decoder over the float64 model).
Test(backend, swax_gdn_commands) {
    sandbox s = sandbox_new();
    char *out = tu_join(s.dir, "swax_gdn");
    windowed_family_commands(&s, "swax_gdn", out);
    expect_ok(&s, phax_run(&s, "generate", out, "--prompt", "the cat", "--tokens", "3", "--backend", "ref", NULL),
              "generate swax_gdn on ref");
    free(out);
    sandbox_free(&s);
}

Test(backend, eval_takes_ref_and_cpu) {
    sandbox s = sandbox_new();
    expect_ok(&s, phax_run(&s, "eval", s.run, "--file", s.data, "--backend", "cpu", NULL), "eval cpu");
    char *cpu = tu_slurp(s.out, NULL);
    expect_ok(&s, phax_run(&s, "eval", s.run, "--file", s.data, "--backend", "ref", NULL), "eval ref");
    char *ref = tu_slurp(s.out, NULL);
    // The same tokens scored, the loss to the printed 4 decimals (a float32 model of 16 wide).
    const char *a = strstr(cpu, "tokens scored, loss "), *b = strstr(ref, "tokens scored, loss ");
    cr_assert(a && b, "%s\n%s", cpu, ref);
    cr_assert(!strncmp(a, b, 32), "cpu: %s\nref: %s", cpu, ref);
    expect_ok(&s, phax_run(&s, "eval", s.swa, "--file", s.data, "--carry", "--max-tokens", "200", "--backend", "cpu", NULL),
              "eval --carry cpu");
    char *ccpu = tu_slurp(s.out, NULL);
    expect_ok(&s, phax_run(&s, "eval", s.swa, "--file", s.data, "--carry", "--max-tokens", "200", "--backend", "ref", NULL),
              "eval --carry ref");
    char *cref = tu_slurp(s.out, NULL);
    a = strstr(ccpu, "tokens scored, loss "), b = strstr(cref, "tokens scored, loss ");
    cr_assert(a && b && !strncmp(a, b, 32), "cpu: %s\nref: %s", ccpu, cref);
    free(ccpu), free(cref);
    expect_fail(&s, phax_run(&s, "eval", s.run, "--file", s.data, "--backend", "nope", NULL), "phax eval: ",
                "'nope' is not a backend");
    free(cpu), free(ref);
    sandbox_free(&s);
}

Test(backend, decoding_commands_take_ref_and_cpu) {
    sandbox s = sandbox_new();
    const char *names[] = {"cpu", "ref"};
    for (int i = 0; i < 2; i++) {
        const char *be = names[i];
        expect_ok(&s, phax_run(&s, "generate", s.run, "--prompt", "the cat", "--tokens", "3", "--backend", be, NULL),
                  be);
        expect_ok(&s, phax_run(&s, "niah", s.run, "--lengths", "400", "--samples", "1", "--n-depths", "2",
                               "--variants", "single", "--haystacks", "noise", "--backend", be, NULL), be);
        expect_ok(&s, phax_run(&s, "recall", s.recall, "--pairs", "1", "--samples", "2", "--lengths", "16",
                               "--backend", be, NULL), be);
    }
    expect_fail(&s, phax_run(&s, "generate", s.run, "--prompt", "the cat", "--backend", "nope", NULL),
                "phax generate: ", "'nope' is not a backend");
    expect_fail(&s, phax_run(&s, "niah", s.run, "--backend", "nope", NULL), "phax niah: ", "'nope' is not a backend");
    expect_fail(&s, phax_run(&s, "recall", s.recall, "--backend", "cuda", NULL), "phax recall: ",
                cuda_frag());
    sandbox_free(&s);
}
