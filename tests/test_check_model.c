// `phax check model`: the model's precision baseline (check/model.c) and the verdicts of the
// real binary (PHAX_BIN) on it, for every family and PHA's switches, at small awkward sizes
// (odd T, GQA groups 1 and 2, windows shorter than T, head dims not powers of two).
//
//   (a) the baseline computes ref's function: at 53 bits (float64's significand: every
//       rounding exact) it agrees with ref to summation order; at f32 within a bound derived
//       below; its scratch stays within the memory plan's count of it.
//   (b) "their" correct outputs PASS: phax's own float32 fast tier (fast/cpu, fmodel_*) at
//       f32 and at bf16; its bf16-matmul mode (the cpu_bf16 backend, when built with oneDNN)
//       at bf16; a bf16 implementation (bf16 weights, float32 arithmetic, bf16
//       outputs) at bf16; the baseline itself at bf16 on stochastically rounded weights.
//   (c) plausible bugs FAIL with the ratio printed: each is the fast tier computing a wrong
//       function, made exactly by transforming its inputs or outputs (below, `bug`).
//
// Inputs are fresh each run from a seed printed on stderr (PHAX_CHECK_SEED=N repeats a run).
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "phax/check.h"
#include "phax/fcpu_gemm.h"
#include "phax/fmodel.h"
#include "phax/model_plan.h"
#include "phax/ref_model.h"
#include "phax/safetensors.h"
#include "testutil.h"

#define BOUND_C 4.0  // src/check.c's C: a correct run stays under it, a bug must exceed it

static char *g_dir;
static uint64_t g_seed;

static void setup(void) {
    g_dir = tu_tmpdir("phax_check_model");
    const char *s = getenv("PHAX_CHECK_SEED");
    g_seed = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
    fprintf(stderr, "test_check_model: seed %llu (PHAX_CHECK_SEED=%llu repeats it)\n", (unsigned long long)g_seed,
            (unsigned long long)g_seed);
}
static void teardown(void) {
    tu_rm_rf(g_dir);
    free(g_dir);
}
TestSuite(check, .init = setup, .fini = teardown);

// --- the cases -----------------------------------------------------------------------------------
typedef struct {
    phax_model_cfg cfg;  // resolved
    int B, T, window;    // window: the call's (the SWAX family's attribute; −1 otherwise)
} mcase;

// d = 12, V = 13, 2 layers, T = 7, B = 2; per family the attention is GQA 2 → 1 (group 2) or
// 2 → 2 (group 1), head_dim 6, and a window of 3 or 4 (< T) where the family has one.
static mcase make_case(phax_family f) {
    mcase m = {.cfg = phax_model_cfg_default(f), .B = 2, .T = 7, .window = -1};
    phax_model_cfg *c = &m.cfg;
    c->vocab_size = 13, c->d_model = 12, c->n_layers = 2, c->n_heads = 2, c->n_kv_heads = 1, c->head_dim = 0;
    c->ffn_hidden = 16, c->ffn_aux_hidden = 5, c->gss_expand = 10, c->gss_hidden = 3, c->gss_state = 5;
    c->train_len = 32, c->w_short = 2, c->w_long = 4;
    if (f == PHAX_FAMILY_PHA || f == PHAX_FAMILY_SERIAL) c->attn_window = 3;
    if (f == PHAX_FAMILY_TRANSFORMER) c->n_kv_heads = 2, c->score_cosine = 0;  // group 1, dot scores
    if (f == PHAX_FAMILY_SWAX) m.window = 3, c->mlstm_heads = 3;                 // dqk 2, dv 4
    if (f == PHAX_FAMILY_SWA) c->n_kv_heads = 2;                                 // group 1, window w_long
    if (f == PHAX_FAMILY_MLSTM) c->mlstm_heads = 2;
    if (f == PHAX_FAMILY_SWA_FULL) m.window = 3;  // layer 0 full, layer 1 window 3
    if (f == PHAX_FAMILY_SWAX_GDN) m.window = 3, c->gdn_heads = 2, c->gdn_conv = 3;  // GDN dk 3, dv 6; SWA w 3
    cr_assert(phax_model_cfg_resolve(c) == PHAX_OK, "%s", phax_error());
    return m;
}

// PHA with one switch: which = "no_attn", "no_gss", "no_ffn", "frozen_mix", "separate_ffn".
static mcase pha_switch(const char *which) {
    mcase m = make_case(PHAX_FAMILY_PHA);
    phax_model_cfg *c = &m.cfg;
    if (!strcmp(which, "no_attn")) c->use_attn = 0;
    if (!strcmp(which, "no_gss")) c->use_gss = 0;
    if (!strcmp(which, "no_ffn")) c->use_ffn = 0;
    if (!strcmp(which, "frozen_mix")) c->freeze_mix = 1;
    if (!strcmp(which, "separate_ffn")) c->ffn_separate_mix = 1, c->score_cosine = 0;
    cr_assert(phax_model_cfg_resolve(c) == PHAX_OK, "%s", phax_error());
    return m;
}

// The inputs of one run: parameters (the family's init plus N(0, 0.1²) noise, so no
// tensor sits at a special value such as a zero mix or a unit norm weight), float32-exact so
// the fast tier sees them exactly; tokens; targets with one ignored (−1).
typedef struct {
    mcase mc;
    phax_layout L;
    double *params;
    int32_t *tok, *tg;
    size_t nV;
} inputs;

static inputs make_inputs(const mcase *mc, uint64_t salt) {
    inputs in = {.mc = *mc};
    ref_model m;
    cr_assert(ref_model_new(&m, &mc->cfg, g_seed ^ salt) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_layout_build(&in.L, &mc->cfg) == PHAX_OK);
    phax_rng r = phax_rng_new(g_seed * 31 + salt);
    in.params = malloc(in.L.numel * sizeof *in.params);
    for (size_t i = 0; i < in.L.numel; i++) in.params[i] = (double)(float)(m.params[i] + 0.1 * phax_rng_normal(&r));
    ref_model_free(&m);
    size_t n = (size_t)mc->B * mc->T;
    in.tok = malloc(n * sizeof *in.tok), in.tg = malloc(n * sizeof *in.tg);
    for (size_t i = 0; i < n; i++)
        in.tok[i] = (int32_t)phax_rng_below(&r, (uint64_t)mc->cfg.vocab_size),
        in.tg[i] = (int32_t)phax_rng_below(&r, (uint64_t)mc->cfg.vocab_size);
    in.tg[n / 2] = -1;
    in.nV = n * (size_t)mc->cfg.vocab_size;
    return in;
}

// A neighbouring draw: every parameter times (1 + 1e−6·N(0, 1)), rounded to float32 again (1e−6
// is ~17 float32 ulps: a fresh pattern of rounding errors at practically the same point).
static void nudge(inputs *in, uint64_t salt) {
    phax_rng r = phax_rng_new(g_seed * 37 + salt);
    for (size_t i = 0; i < in->L.numel; i++) in->params[i] = (double)(float)(in->params[i] * (1 + 1e-6 * phax_rng_normal(&r)));
}

static void inputs_free(inputs *in) {
    phax_layout_free(&in->L);
    free(in->params), free(in->tok), free(in->tg);
}

static void write_in(const inputs *in, const char *path) {
    phax_st_writer *w = phax_st_writer_new();
    char *json = phax_model_cfg_to_json(&in->mc.cfg);
    cr_assert(w && json);
    cr_assert(phax_st_add_meta(w, "config", json) == PHAX_OK);
    free(json);
    if (phax_plan_takes_window(&in->mc.cfg) && in->mc.window >= 0) {
        char s[32];
        snprintf(s, sizeof s, "%d", in->mc.window);
        cr_assert(phax_st_add_meta(w, "window", s) == PHAX_OK);
    }
    for (int i = 0; i < in->L.n; i++) {
        const phax_param_info *p = &in->L.p[i];
        cr_assert(phax_st_add_f32_from_f64(w, p->name, in->params + p->offset, p->ndim, p->shape) == PHAX_OK);
    }
    int64_t ts[2] = {in->mc.B, in->mc.T};
    cr_assert(phax_st_add_i32(w, "tokens", in->tok, 2, ts) == PHAX_OK);
    cr_assert(phax_st_add_i32(w, "targets", in->tg, 2, ts) == PHAX_OK);
    cr_assert(phax_st_write(w, path) == PHAX_OK, "%s", phax_error());
    phax_st_writer_free(w);
}

// Outputs of one implementation, in float64 whatever it computed in: logits (B, T, V), loss,
// grads (layout order).
typedef struct {
    double *logits, loss, *grads;
} outs;

static outs outs_new(const inputs *in) {
    return (outs){.logits = calloc(in->nV, sizeof(double)), .grads = calloc(in->L.numel, sizeof(double))};
}
static void outs_free(outs *o) { free(o->logits), free(o->grads); }

// THEIRS at path: every output as float32 (bf16: rounded to bf16 first, as a bf16 kernel stores it).
static double to_bf16(double x) { return phax_round(phax_precision_find("bf16"), (double)(float)x); }
static void write_theirs(const inputs *in, const outs *o, int bf16, const char *path) {
    phax_st_writer *w = phax_st_writer_new();
    cr_assert(w);
    double *lg = malloc(in->nV * sizeof *lg), *g = malloc(in->L.numel * sizeof *g), loss = o->loss;
    for (size_t i = 0; i < in->nV; i++) lg[i] = bf16 ? to_bf16(o->logits[i]) : o->logits[i];
    for (size_t i = 0; i < in->L.numel; i++) g[i] = bf16 ? to_bf16(o->grads[i]) : o->grads[i];
    if (bf16) loss = to_bf16(loss);
    int64_t ls[3] = {in->mc.B, in->mc.T, in->mc.cfg.vocab_size};
    cr_assert(phax_st_add_f32_from_f64(w, "logits", lg, 3, ls) == PHAX_OK);
    cr_assert(phax_st_add_f32_from_f64(w, "loss", &loss, 0, NULL) == PHAX_OK);
    for (int i = 0; i < in->L.n; i++) {
        const phax_param_info *p = &in->L.p[i];
        char name[128];
        snprintf(name, sizeof name, "grad.%s", p->name);
        cr_assert(phax_st_add_f32_from_f64(w, name, g + p->offset, p->ndim, p->shape) == PHAX_OK);
    }
    cr_assert(phax_st_write(w, path) == PHAX_OK, "%s", phax_error());
    phax_st_writer_free(w);
    free(lg), free(g);
}

// The fast tier (float32) on config cfg (in's, or a variant with the same parameters by name
// and, where cfg has a parameter in's lacks, `extra`), parameters params, call window `window`.
// 1: fast_run's forward and backward run with bf16 matmul operands (the cpu_bf16 backend's mode).
static int g_mm_bf16;

static outs fast_run(const inputs *in, const phax_model_cfg *cfg, const double *params, int window,
                     const char *extra_name, const double *extra) {
    if (g_mm_bf16) cr_assert(fcpu_mm_precision_set(FCPU_MM_BF16) == PHAX_OK, "%s", phax_error());
    fmodel m;
    cr_assert(fmodel_new(&m, cfg, 1) == PHAX_OK, "%s", phax_error());
    double *p = calloc(m.layout.numel, sizeof *p);
    for (int i = 0; i < m.layout.n; i++) {
        const phax_param_info *q = &m.layout.p[i];
        int j = phax_layout_find(&in->L, q->name);
        const double *src = j >= 0 ? params + in->L.p[j].offset : !strcmp(q->name, extra_name) ? extra : NULL;
        cr_assert(src, "no parameter %s", q->name);
        memcpy(p + q->offset, src, q->numel * sizeof *p);
    }
    fmodel_set_params_f64(&m, p);
    fmodel_ws *ws = fmodel_ws_new(&m, in->mc.B, in->mc.T);
    cr_assert(ws, "%s", phax_error());
    float *lg = malloc(in->nV * sizeof *lg);
    outs o = outs_new(in);
    double loss;
    cr_assert(fmodel_forward(&m, ws, in->tok, in->tg, window, lg, &loss) == PHAX_OK, "%s", phax_error());
    fmodel_zero_grad(&m);
    cr_assert(fmodel_backward(&m, ws, in->tok, in->tg, window, &o.loss) == PHAX_OK, "%s", phax_error());
    fcpu_mm_precision_set(FCPU_MM_F32);
    for (size_t i = 0; i < in->nV; i++) o.logits[i] = lg[i];
    // Gradients by name into in's layout (a variant's extra parameter has no place there).
    for (int i = 0; i < in->L.n; i++) {
        const float *g = m.grads + m.layout.p[phax_layout_find(&m.layout, in->L.p[i].name)].offset;
        for (size_t e = 0; e < in->L.p[i].numel; e++) o.grads[in->L.p[i].offset + e] = g[e];
    }
    // The variant's extra parameter's gradient, for a bug that needs it (after the layout's).
    int x = extra_name ? phax_layout_find(&m.layout, extra_name) : -1;
    if (x >= 0) {
        o.grads = realloc(o.grads, (in->L.numel + m.layout.p[x].numel) * sizeof *o.grads);
        for (size_t e = 0; e < m.layout.p[x].numel; e++) o.grads[in->L.numel + e] = m.grads[m.layout.p[x].offset + e];
    }
    free(lg), free(p);
    fmodel_ws_free(ws);
    fmodel_free(&m);
    return o;
}


// --- running phax check ----------------------------------------------------------------------------
typedef struct {
    int rc;
    char *out, *err;
} run;

static run check(const char *in, const char *theirs, const char *prec) {
    char *o = tu_join(g_dir, "stdout"), *e = tu_join(g_dir, "stderr");
    run r;
    r.rc = tu_phax(o, e, NULL, NULL, "check", "model", in, theirs, "--precision", prec, NULL);
    r.out = tu_slurp(o, NULL), r.err = tu_slurp(e, NULL);
    free(o), free(e);
    return r;
}

static double verdict_ratio(const char *out) {
    const char *v = strstr(out, "\nFAIL: ");
    if (!v) v = strstr(out, "\nPASS: ");
    const char *r = v ? strstr(v, "ratio ") : NULL;
    return r ? strtod(r + 6, NULL) : NAN;
}

// The verdict line (for the log).
static const char *verdict_line(const char *out, char *buf, size_t n) {
    const char *v = strstr(out, "\nFAIL: ");
    if (!v) v = strstr(out, "\nPASS: ");
    snprintf(buf, n, "%.*s", v ? (int)strcspn(v + 1, "\n") : 0, v ? v + 1 : "");
    return buf;
}

// The verdict of one tensor's row ("name rel base ratio bound PASS|FAIL"): 1 PASS, 0 FAIL, −1 absent.
static int row_pass(const char *out, const char *name, double *ratio) {
    char nm[128], v[8];
    double a, b, c, d;
    for (const char *ln = out; (ln = strchr(ln, '\n')); ln++)
        if (sscanf(ln + 1, "%127s %lf %lf %lf %lf %7s", nm, &a, &b, &c, &d, v) == 6 && !strcmp(nm, name)) {
            *ratio = c;
            return !strcmp(v, "PASS");
        }
    return -1;
}

// Runs phax check on (in, theirs) at prec and expects PASS (want 1) or FAIL (0); want SOFT
// expects PASS but only reports (in *passed) whether it came. Returns the logits' ratio.
#define SOFT 2
static double judge_(const inputs *in, const outs *o, int bf16_out, const char *prec, int want, const char *what,
                     int *passed) {
    char *pin = tu_join(g_dir, "in.safetensors"), *pth = tu_join(g_dir, "theirs.safetensors"), line[512];
    write_in(in, pin);
    write_theirs(in, o, bf16_out, pth);
    run r = check(pin, pth, prec);
    double q = verdict_ratio(r.out), lq = NAN;
    row_pass(r.out, "logits", &lq);
    fprintf(stderr, "check model %s %s at %s: %s\n", phax_family_name(in->mc.cfg.family), what, prec,
            verdict_line(r.out, line, sizeof line));
    cr_log_info("%s:\n%s", what, r.out);
    // A correct run's tensors within a factor 2 of the bound, for the record.
    for (const char *ln = r.out; want && (ln = strchr(ln, '\n')); ln++) {
        char nm[128];
        double re, be, ra;
        if (sscanf(ln + 1, "%127s %lf %lf %lf", nm, &re, &be, &ra) == 4 && ra > BOUND_C / 2)
            fprintf(stderr, "  near the bound: %s ratio %.2f (rel. err. %.2e, baseline %.2e)\n", nm, ra, re, be);
    }
    int ok = r.rc == 0 && strstr(r.out, "\nPASS: all") && !r.err[0] && q <= BOUND_C;
    if (passed) *passed = ok;
    if (want == SOFT) {
        if (!ok) cr_log_info("%s at %s: exit %d (judged again on a neighbouring draw):\n%s%s", what, prec, r.rc, r.out,
                             r.err);
    } else if (want) {
        cr_expect(r.rc == 0 && strstr(r.out, "\nPASS: all") && !r.err[0], "%s at %s: exit %d, expected PASS:\n%s%s",
                  what, prec, r.rc, r.out, r.err);
        cr_expect(q <= BOUND_C, "%s: worst ratio %g", what, q);
    } else {
        cr_expect(r.rc == 1 && strstr(r.out, "\nFAIL: ") && !r.err[0], "%s at %s: exit %d, expected FAIL:\n%s%s",
                  what, prec, r.rc, r.out, r.err);
        cr_expect(q > BOUND_C, "%s: ratio %g is not above C = %g", what, q, BOUND_C);
    }
    free(r.out), free(r.err), free(pin), free(pth);
    return lq;
}
static double judge(const inputs *in, const outs *o, int bf16_out, const char *prec, int want, const char *what) {
    return judge_(in, o, bf16_out, prec, want, what, NULL);
}

// --- (a) the baseline computes ref's function --------------------------------------------------------
// ‖a − b‖/‖b‖ (‖b‖ read as 1 when 0); NaN anywhere gives NaN, which fails every ≤.
static double rel(const double *a, const double *b, size_t n) {
    double e = 0, t = 0;
    for (size_t i = 0; i < n; i++) e += (a[i] - b[i]) * (a[i] - b[i]), t += b[i] * b[i];
    return sqrt(e) / (t > 0 ? sqrt(t) : 1);
}

// Float64 truth from ref on in.
static outs truth(const inputs *in) {
    ref_model m;
    cr_assert(ref_model_new(&m, &in->mc.cfg, 0) == PHAX_OK, "%s", phax_error());
    memcpy(m.params, in->params, in->L.numel * sizeof *m.params);
    outs o = outs_new(in);
    cr_assert(ref_model_forward(&m, in->tok, in->tg, in->mc.B, in->mc.T, in->mc.window, o.logits, &o.loss) == PHAX_OK);
    ref_model_zero_grad(&m);
    cr_assert(ref_model_backward(&m, in->tok, in->tg, in->mc.B, in->mc.T, in->mc.window, NULL) == PHAX_OK);
    memcpy(o.grads, m.grads, in->L.numel * sizeof *o.grads);
    ref_model_free(&m);
    return o;
}

static outs baseline(const inputs *in, const phax_precision *pr, const double *params, size_t *peak) {
    outs o = outs_new(in);
    cr_assert(phax_naive_model(pr, o.logits, &o.loss, o.grads, &in->mc.cfg, &in->L, params, in->tok, in->tg, in->mc.B,
                               in->mc.T, in->mc.window, peak) == PHAX_OK,
              "%s", phax_error());
    return o;
}

// The worst relative error over logits, loss and every gradient tensor of a against t;
// *which names the tensor.
static double worst_rel(const inputs *in, const outs *a, const outs *t, const char **which) {
    double w = rel(a->logits, t->logits, in->nV), e = rel(&a->loss, &t->loss, 1);
    *which = "logits";
    if (!(e <= w)) w = e, *which = "loss";
    for (int i = 0; i < in->L.n; i++) {
        const phax_param_info *p = &in->L.p[i];
        e = rel(a->grads + p->offset, t->grads + p->offset, p->numel);
        if (!(e <= w)) w = e, *which = p->name;
    }
    return w;
}

// Float64's significand (53 bits) and exponent range: every rounding of the baseline is then
// exact, and it differs from ref by the order of operations alone.
static const phax_precision F64 = {"f64", 53, 53, -1021, 1024, 0x1p-53};

// The bound on the baseline's error, in units u of its precision. Rounding errors of a
// naive evaluation: each dot product or sum of k terms is off by at most γ_k ≈ k·u relative
// to the sum of its terms' magnitudes (Higham, Accuracy and Stability §3.1), each other
// operation by u. Here the longest reduction is k = 16 (ffn_hidden; d = 12, V = 13, B·T = 14
// rows of a weight gradient, T = 7 keys), and the longest chain of such reductions from an
// input to an output is the forward and backward of 2 blocks of at most 4 sub-layers of about
// 8 reductions each, through the head and the embedding: 2·(2·4·8 + 4) ≈ 136. Summing worst
// cases along it: 16 · 136 ≈ 2^11 u relative to the magnitudes involved. A tensor whose
// entries are sums of terms of both signs is that much further off relative to its own size:
// the gate biases, mix.p, a LayerNorm bias, logscale cancel by up to ~2^4 here (the worst
// measured, mlstm.fgate.bias of SWAX, is 3865 u ≈ 2^12 at f32 and 3199 u at 53 bits over 8
// draws). So 2^15 u: 2e-3 at f32. At 53 bits both the baseline and ref carry such errors in
// different orders: 2^16 u in all, 7e-12. A baseline that computes another function — an α, a
// lost gradient term (the tests' deliberate bugs in check/model.c: 0.77 and more), a wrong
// window — is off by far more than 7e-12; the f32 bound shows its rounding is in place.
#define TOL_UNITS 32768.0

static void baseline_matches_ref(const mcase *mc, const char *what) {
    inputs in = make_inputs(mc, 101);
    outs t = truth(&in);
    const phax_precision *f32 = phax_precision_find("f32");
    size_t peak = 0, bound = phax_naive_model_doubles(&mc->cfg, mc->B, mc->T);
    outs b64 = baseline(&in, &F64, in.params, NULL), b32 = baseline(&in, f32, in.params, &peak);
    const char *w64, *w32;
    double e64 = worst_rel(&in, &b64, &t, &w64), e32 = worst_rel(&in, &b32, &t, &w32);
    fprintf(stderr, "baseline %s (%s): vs ref worst rel. err. at 53 bits %.2e (%s, %.0f u), at f32 %.2e (%s, %.0f u); "
            "scratch %zu of the %zu doubles planned\n", phax_family_name(mc->cfg.family), what, e64, w64, e64 / F64.u,
            e32, w32, e32 / f32->u, peak, bound);
    cr_expect(e64 <= 2 * TOL_UNITS * F64.u, "%s: at 53 bits the baseline is off ref by %g (%s)", what, e64, w64);
    cr_expect(e32 <= TOL_UNITS * f32->u, "%s: at f32 the baseline is off ref by %g (%s)", what, e32, w32);
    cr_expect(e32 > 0, "%s: at f32 the baseline shows no rounding error at all", what);
    cr_expect(peak > 0 && peak <= bound, "%s: scratch %zu doubles, planned %zu", what, peak, bound);
    outs_free(&t), outs_free(&b64), outs_free(&b32);
    inputs_free(&in);
}

Test(check, model_baseline_is_ref_pha) {
    mcase m = make_case(PHAX_FAMILY_PHA);
    baseline_matches_ref(&m, "all branches");
    const char *sw[] = {"no_attn", "no_gss", "no_ffn", "frozen_mix", "separate_ffn"};
    for (int i = 0; i < 5; i++) {
        m = pha_switch(sw[i]);
        baseline_matches_ref(&m, sw[i]);
    }
}
Test(check, model_baseline_is_ref_transformer) {
    mcase m = make_case(PHAX_FAMILY_TRANSFORMER);
    baseline_matches_ref(&m, "GQA group 1, dot");
}
Test(check, model_baseline_is_ref_serial) {
    mcase m = make_case(PHAX_FAMILY_SERIAL);
    baseline_matches_ref(&m, "GQA group 2");
}
Test(check, model_baseline_is_ref_swax) {
    mcase m = make_case(PHAX_FAMILY_SWAX);
    baseline_matches_ref(&m, "window 3");
    m.window = 0;
    baseline_matches_ref(&m, "full attention");
}
Test(check, model_baseline_is_ref_swa) {
    mcase m = make_case(PHAX_FAMILY_SWA);
    baseline_matches_ref(&m, "window w_long");
}
Test(check, model_baseline_is_ref_swa_full) {
    mcase m = make_case(PHAX_FAMILY_SWA_FULL);
    baseline_matches_ref(&m, "full, then window 3");
    m.cfg.mlstm_first = 0;
    baseline_matches_ref(&m, "window 3, then full");
}
Test(check, model_baseline_is_ref_swax_gdn) {
    mcase m = make_case(PHAX_FAMILY_SWAX_GDN);
    baseline_matches_ref(&m, "GDN, then window 3");
    m.cfg.mlstm_first = 0;
    baseline_matches_ref(&m, "window 3, then GDN");
}
Test(check, model_baseline_is_ref_mlstm) {
    mcase m = make_case(PHAX_FAMILY_MLSTM);
    baseline_matches_ref(&m, "mLSTM only");
}

// --- (b) correct implementations PASS, (c) bugs FAIL ---------------------------------------------------
// Their implementation is the fast tier (float32). A bug is the fast tier computing a wrong
// function, made exactly (up to float32 rounding) by what it is given or what it returns:
typedef enum {
    OK,
    BUG_LAYER_GRAD,   // every gradient of block 1 lost (zeroed): a missed accumulation
    BUG_LOSS_SUM,     // the loss summed over the targets, not averaged (loss and grads × count)
    BUG_WINDOW,       // the attention window's edge off by one: w + 1 keys visible
    BUG_SWAX_RULE,    // SWAX: the call's window ignored (w_long used, the pha/transformer rule)
    BUG_TIED,         // tied embeddings: the head's gradient overwritten by the embedding's
    BUG_ALPHA,        // pha: DeepNorm α left out (z = x + mix instead of α·x + mix)
    BUG_MIX_SOFTMAX,  // pha: mix weights softmax(p) instead of softplus(p)/Σ softplus(p)
    BUG_FULL_WINDOWED,  // swa_full: its full-attention layers given the call's window (run as swa)
} bug;

static const char *bug_name(bug b) {
    static const char *n[] = {"correct", "block 1's gradients lost", "loss summed, not averaged",
                              "window edge off by one", "SWAX call window ignored",
                              "tied head gradient overwritten", "DeepNorm alpha left out",
                              "mix softmax, not softplus", "swa_full's full layers windowed"};
    return n[b];
}

static double softplus(double z) { return z > 0 ? z + log1p(exp(-z)) : log1p(exp(z)); }

// Their outputs with bug bg; bf16w: the weights rounded to bf16 first (their weights are
// bf16, their arithmetic float32).
static outs their(const inputs *in, bug bg, int bf16w) {
    const phax_model_cfg *c = &in->mc.cfg;
    double *p = malloc(in->L.numel * sizeof *p), alpha = phax_plan_alpha(c);
    for (size_t i = 0; i < in->L.numel; i++) p[i] = bf16w ? to_bf16(in->params[i]) : in->params[i];
    phax_model_cfg cfg = *c;
    int window = in->mc.window;
    const char *extra_name = NULL;
    const double *extra = NULL;
    char name[128];
    if (bg == BUG_WINDOW) {
        if (phax_plan_takes_window(c)) window = phax_plan_window(c, window) + 1;
        else cfg.attn_window += 1;
        cr_assert(phax_plan_window(&cfg, window) > 0, "the window bug needs a window");
    }
    if (bg == BUG_SWAX_RULE) window = -1;
    if (bg == BUG_FULL_WINDOWED) cfg.family = PHAX_FAMILY_SWA;  // the same tensors, every layer windowed
    if (bg == BUG_TIED) {  // untied, lm_head = E: grad.embed.weight is then the embedding's part alone
        cr_assert(c->tie_embeddings);
        cfg.tie_embeddings = 0;
        extra_name = "lm_head.weight", extra = p + in->L.p[phax_layout_find(&in->L, "embed.weight")].offset;
    }
    for (int l = 0; l < c->n_layers; l++) {
        phax_block_plan bp;
        phax_plan_block(c, l, &bp);
        // α·x + mix(α·b) = α·(x + mix(b)), and the residual norm is scale-free: the correct model
        // with every branch norm weight ×α is the one without α.
        for (int s = 0; s < bp.nsub && bg == BUG_ALPHA; s++) {
            snprintf(name, sizeof name, "blocks.%d.%s", l, bp.sub[s].norm);
            const phax_param_info *q = &in->L.p[phax_layout_find(&in->L, name)];
            for (size_t e = 0; e < q->numel; e++) p[q->offset + e] *= alpha;
        }
        // softplus(p') = e^p, p' = log(e^{e^p} − 1): softplus-normalised p' is softmax(p).
        if (bg == BUG_MIX_SOFTMAX) {
            snprintf(name, sizeof name, "blocks.%d.mix.p", l);
            const phax_param_info *q = &in->L.p[phax_layout_find(&in->L, name)];
            for (size_t e = 0; e < q->numel; e++) p[q->offset + e] = log(expm1(exp(p[q->offset + e])));
        }
    }
    outs o = fast_run(in, &cfg, p, window, extra_name, extra);
    int count = 0;
    for (int i = 0; i < in->mc.B * in->mc.T; i++) count += in->tg[i] >= 0;
    if (bg == BUG_LOSS_SUM) {
        o.loss *= count;
        for (size_t i = 0; i < in->L.numel; i++) o.grads[i] *= count;
    }
    for (int i = 0; i < in->L.n; i++) {
        const phax_param_info *q = &in->L.p[i];
        double *g = o.grads + q->offset;
        if (bg == BUG_LAYER_GRAD && !strncmp(q->name, "blocks.1.", 9)) memset(g, 0, q->numel * sizeof *g);
        // Back to their parameters by the chain rule: g' = α·g; p' as above (dp'/dp = e^p/σ(p')).
        if (bg == BUG_ALPHA && strstr(q->name, ".norm_") && !strstr(q->name, "norm_res"))
            for (size_t e = 0; e < q->numel; e++) g[e] *= alpha;
        if (bg == BUG_MIX_SOFTMAX && strstr(q->name, ".mix.p"))
            for (size_t e = 0; e < q->numel; e++) {  // e^p = softplus(p')
                double pp = p[q->offset + e];
                g[e] *= softplus(pp) * (1 + exp(-pp));
            }
    }
    free(p);
    return o;
}

// (b) The fast tier's outputs at f32 and at bf16, and a bf16 implementation's (bf16 weights and
// outputs, float32 arithmetic) at bf16, on three fresh draws of the inputs: each must PASS.
// With the baseline rounded once to nearest, the fast tier FAILed at f32 in 1–6 of 12 draws per
// family — a tensor of 1 to 4 elements (the loss, logscale, gss.d, a gate bias) or a gradient
// summed with cancellation has a baseline error that is one random draw and can be
// arbitrarily small (worst ratios 8–25). phax check now takes the largest error of five
// roundings of the baseline (nearest, four stochastic: docs/oracle.md, "The bound"); measured
// after that change the fast tier's worst ratio over all families and draws was 2.4 at f32.
// The logits' median ratio over the draws is also printed.
//
// That is a rate, not a certainty: seed 7783677120 (swax, third draw) put the fast tier at
// 4.27 on grad.blocks.0.mlstm.fgate.bias, every block-0 gradient at ~2.5, while 123 other
// swax draws stayed ≤ 2.19 and the same draw with its parameters moved by 1e−7..1e−4
// (relative) fell back to 0.6–2.5 in 11 of 12 nudges: one unlucky pattern of rounding errors,
// not a region where the fast tier is worse (a bug fails at every neighbouring point: the
// gallery in (c) FAILs at ratios of 56 and more). So a draw that FAILs is judged again on a
// neighbouring draw (nudge), which must PASS; the FAIL is printed with its ratio. Rate of a
// FAIL per draw here: about 1 in several hundred; of two in a row, the square of that.
#define DRAWS 3
static double fast_draw(const inputs *in, const char *what, int want) {
    outs f = their(in, OK, 0), h = their(in, OK, 1);
    char w[160];
    int ok[5] = {1, 1, 1, 1, 1};
    snprintf(w, sizeof w, "%s: fast tier (float32)", what);
    double lq = judge_(in, &f, 0, "f32", want, w, &ok[0]);
    judge_(in, &f, 0, "bf16", want, w, &ok[1]);
    judge_(in, &f, 0, "tf32", want, w, &ok[4]);  // float32 is a sound TF32 result (no rounding coarser)
    snprintf(w, sizeof w, "%s: bf16 weights and outputs, float32 arithmetic", what);
    judge_(in, &h, 1, "bf16", want, w, &ok[2]);
    if (fcpu_bf16_available()) {  // the cpu_bf16 tier: bf16 matmul operands, float32 otherwise
        g_mm_bf16 = 1;
        outs b = their(in, OK, 0);
        g_mm_bf16 = 0;
        snprintf(w, sizeof w, "%s: fast tier with bf16 matmuls (cpu_bf16)", what);
        judge_(in, &b, 0, "bf16", want, w, &ok[3]);
        outs_free(&b);
    }
    outs_free(&f), outs_free(&h);
    return ok[0] && ok[1] && ok[2] && ok[3] && ok[4] ? lq : NAN;
}
static void fast_case(const mcase *mc, const char *what) {
    double lq[DRAWS];
    for (int k = 0; k < DRAWS; k++) {
        inputs in = make_inputs(mc, 202 + (uint64_t)k);
        lq[k] = fast_draw(&in, what, SOFT);
        if (isnan(lq[k])) {
            fprintf(stderr, "  %s: draw %d FAILed (above); judged again on a neighbouring draw, which must PASS\n", what, k);
            nudge(&in, 202 + (uint64_t)k);
            lq[k] = fast_draw(&in, what, 1);
        }
        inputs_free(&in);
    }
    // The median of three: sort them.
    for (int i = 0; i < DRAWS; i++)
        for (int j = i + 1; j < DRAWS; j++)
            if (lq[j] < lq[i]) {
                double t = lq[i];
                lq[i] = lq[j], lq[j] = t;
            }
    fprintf(stderr, "  %s: fast tier's logits at f32, ratios %.2f %.2f %.2f (median %.2f)\n", what, lq[0], lq[1], lq[2],
            lq[DRAWS / 2]);
    cr_expect(lq[DRAWS / 2] <= BOUND_C, "%s: the fast tier's logits at f32: median ratio %g over %d draws", what,
              lq[DRAWS / 2], DRAWS);
}

Test(check, model_fast_pha) {
    mcase m = make_case(PHAX_FAMILY_PHA);
    fast_case(&m, "all branches");
}
Test(check, model_fast_pha_switches) {
    const char *sw[] = {"no_attn", "no_gss", "no_ffn", "frozen_mix", "separate_ffn"};
    for (int i = 0; i < 5; i++) {
        mcase m = pha_switch(sw[i]);
        fast_case(&m, sw[i]);
    }
}
Test(check, model_fast_transformer) {
    mcase m = make_case(PHAX_FAMILY_TRANSFORMER);
    fast_case(&m, "GQA group 1, dot");
}
Test(check, model_fast_serial) {
    mcase m = make_case(PHAX_FAMILY_SERIAL);
    fast_case(&m, "GQA group 2");
}
Test(check, model_fast_swax) {
    mcase m = make_case(PHAX_FAMILY_SWAX);
    fast_case(&m, "window 3");
}
Test(check, model_fast_swa) {
    mcase m = make_case(PHAX_FAMILY_SWA);
    fast_case(&m, "window w_long");
}
Test(check, model_fast_swa_full) {
    mcase m = make_case(PHAX_FAMILY_SWA_FULL);
    fast_case(&m, "full, then window 3");
}
Test(check, model_fast_swax_gdn) {
    mcase m = make_case(PHAX_FAMILY_SWAX_GDN);
    fast_case(&m, "GDN, then window 3");
}
Test(check, model_fast_mlstm) {
    mcase m = make_case(PHAX_FAMILY_MLSTM);
    fast_case(&m, "mLSTM only");
}

// bf16: bf16 weights and outputs, judged at bf16; with g_mm_bf16 set, the cpu_bf16 tier
// (judged at bf16 too).
static int g_judge_tf32;  // bug_case: judge at tf32 (their float32 outputs)
static void bug_case(const mcase *mc, bug bg, int bf16) {
    inputs in = make_inputs(mc, 303 + (uint64_t)bg);
    outs o = their(&in, bg, bf16);
    (void)judge(&in, &o, bf16, bf16 || g_mm_bf16 ? "bf16" : g_judge_tf32 ? "tf32" : "f32", 0, bug_name(bg));
    outs_free(&o);
    inputs_free(&in);
}

Test(check, model_gallery_pha) {
    mcase m = make_case(PHAX_FAMILY_PHA);
    bug bugs[] = {BUG_LAYER_GRAD, BUG_LOSS_SUM, BUG_WINDOW, BUG_TIED, BUG_ALPHA, BUG_MIX_SOFTMAX};
    for (int i = 0; i < 6; i++) bug_case(&m, bugs[i], 0);
    bug_case(&m, BUG_ALPHA, 1);
    bug_case(&m, BUG_WINDOW, 1);
    // Bugs in the cpu_bf16 tier (bf16 matmul operands), judged at bf16: the ones the bf16 bound
    // resolves on every draw (as the bf16 rows above; the mix-softmax bug sits at ratios 1–6 there,
    // below bf16's resolution on some draws: not a case a bf16 judge can be asked to catch).
    if (fcpu_bf16_available()) {
        g_mm_bf16 = 1;
        bug_case(&m, BUG_ALPHA, 0);
        bug_case(&m, BUG_WINDOW, 0);
        bug_case(&m, BUG_LAYER_GRAD, 0);
        g_mm_bf16 = 0;
    }
}
Test(check, model_gallery_transformer) {
    mcase m = make_case(PHAX_FAMILY_TRANSFORMER);
    bug_case(&m, BUG_LAYER_GRAD, 0);
    bug_case(&m, BUG_TIED, 0);
    bug_case(&m, BUG_LOSS_SUM, 1);
}
Test(check, model_gallery_serial) {
    mcase m = make_case(PHAX_FAMILY_SERIAL);
    bug_case(&m, BUG_WINDOW, 0);
    bug_case(&m, BUG_LAYER_GRAD, 0);
    bug_case(&m, BUG_LOSS_SUM, 1);
}
Test(check, model_gallery_swax) {
    mcase m = make_case(PHAX_FAMILY_SWAX);
    bug_case(&m, BUG_SWAX_RULE, 0);
    bug_case(&m, BUG_WINDOW, 0);
    bug_case(&m, BUG_TIED, 0);
    m.window = m.cfg.w_short;  // a step that drew the short window (2), run with w_long (4)
    bug_case(&m, BUG_SWAX_RULE, 0);
    // At bf16 the window bugs sit at ratios 3–15 here (T = 7: one key more or less of 2–4), too
    // close to C to be caught every time: the bf16 case is the loss summed.
    bug_case(&m, BUG_LOSS_SUM, 1);
}
Test(check, model_gallery_swa) {
    mcase m = make_case(PHAX_FAMILY_SWA);
    bug_case(&m, BUG_WINDOW, 0);
    bug_case(&m, BUG_LAYER_GRAD, 0);
}
Test(check, model_gallery_swa_full) {
    mcase m = make_case(PHAX_FAMILY_SWA_FULL);
    bug_case(&m, BUG_FULL_WINDOWED, 0);
    bug_case(&m, BUG_WINDOW, 0);
    m.cfg.mlstm_first = 0;  // window 3, then full
    bug_case(&m, BUG_FULL_WINDOWED, 0);
}
Test(check, model_gallery_swax_gdn) {
    mcase m = make_case(PHAX_FAMILY_SWAX_GDN);
    bug_case(&m, BUG_LAYER_GRAD, 0);
    bug_case(&m, BUG_WINDOW, 0);
}
Test(check, model_gallery_mlstm) {
    mcase m = make_case(PHAX_FAMILY_MLSTM);
    bug_case(&m, BUG_LAYER_GRAD, 0);
    bug_case(&m, BUG_LOSS_SUM, 0);
    bug_case(&m, BUG_LOSS_SUM, 1);
}

// At tf32 (the baseline's matrix-product operands rounded to 11 bits, so a bound ~2^13 wider
// than f32's): the gallery's bugs in their float32 code still FAIL, every family.
Test(check, model_gallery_tf32) {
    g_judge_tf32 = 1;
    mcase m = make_case(PHAX_FAMILY_PHA);
    bug_case(&m, BUG_ALPHA, 0);
    bug_case(&m, BUG_WINDOW, 0);
    bug_case(&m, BUG_MIX_SOFTMAX, 0);
    m = make_case(PHAX_FAMILY_TRANSFORMER);
    bug_case(&m, BUG_LAYER_GRAD, 0);
    bug_case(&m, BUG_TIED, 0);
    m = make_case(PHAX_FAMILY_SERIAL);
    bug_case(&m, BUG_LOSS_SUM, 0);
    m = make_case(PHAX_FAMILY_SWAX);
    bug_case(&m, BUG_SWAX_RULE, 0);
    bug_case(&m, BUG_WINDOW, 0);
    m = make_case(PHAX_FAMILY_SWA);
    bug_case(&m, BUG_WINDOW, 0);
    m = make_case(PHAX_FAMILY_MLSTM);
    bug_case(&m, BUG_LAYER_GRAD, 0);
    g_judge_tf32 = 0;
}

// A query that sees one key (T 1, or a window of 1): softmax over one logit has no gradient, so
// grad of wq/wk is exactly 0 in the truth and in the baseline (p = 1, dp − D = 0 exactly), while
// a flash-style backward (the fast tier: D = rowsum(o ⊙ dO)) leaves u-sized noise of the terms
// that cancel: the model sweep's first false FAILs (ratio ∞ on grad.blocks.0.attn.wq/wk, 1.2-1.5e-7
// against the floor's 1.19e-7; serial and transformer at T 1, pha no_gss at T 2 with window 1).
// The model's second baseline takes FlashAttention's D (phax_naive_model_alg).
Test(check, model_one_key_per_query) {
    static const struct {
        phax_family f;
        int T, window, cosine;
    } C[] = {{PHAX_FAMILY_SERIAL, 1, 0, 1}, {PHAX_FAMILY_TRANSFORMER, 1, 0, 1}, {PHAX_FAMILY_TRANSFORMER, 1, 0, 0},
             {PHAX_FAMILY_PHA, 2, 1, 1}};
    for (int i = 0; i < 4; i++) {
        mcase m = make_case(C[i].f);
        m.T = C[i].T;
        m.cfg.attn_window = C[i].window, m.cfg.score_cosine = C[i].cosine, m.cfg.n_layers = 3, m.cfg.d_model = 20;
        m.cfg.n_heads = 3, m.cfg.n_kv_heads = 3, m.cfg.head_dim = 6;
        cr_assert(phax_model_cfg_resolve(&m.cfg) == PHAX_OK, "%s", phax_error());
        inputs in = make_inputs(&m, 404 + (uint64_t)i);
        outs f = their(&in, OK, 0);
        judge(&in, &f, 0, "f32", 1, "one key per query");
        judge(&in, &f, 0, "tf32", 1, "one key per query");
        outs_free(&f);
        inputs_free(&in);
    }
}

// --- the no-false-FAIL sweep of the model (issue 26) ---------------------------------------------
// As tests/test_check.c's sweep for the ops: random draws of every family (and PHA's five
// switches), each at drawn sizes — d 12 or 20, 1-3 layers, 1-3 heads of 4-10 dims with GQA
// groups 1 and >1, T 1-33, batch 1-2, vocabulary 7-40, windows shorter and longer than T, SWAX
// called with its short or long window, mLSTM heads 1-2 — with no nudge: every verdict counts.
// Their correct outputs: the fast tier at f32, tf32 and bf16, a bf16 implementation (bf16
// weights and outputs) at bf16, and the cpu_bf16 tier at bf16 where built; their bug: one of
// the gallery's that the draw has (block 1's gradients lost, the loss summed, a window edge,
// the SWAX call window ignored, a tied head, DeepNorm's α, the mix's softmax), judged at f32
// in the same `phax check` run as the correct outputs (several THEIRS: one bound). A bug the
// draw hides (no tensor twice its bound from the truth, the table's own numbers) is counted
// apart. PHAX_CHECK_DRAWS draws per stream (default 1); the run's seed (printed; PHAX_CHECK_SEED
// sets it) draws the sizes and the inputs; PHAX_CHECK_FIRST=k starts at draw k; PHAX_CHECK_ONLY=name
// runs one stream; PHAX_CHECK_KEEP=DIR copies a false FAIL's files there:
//   PHAX_CHECK_DRAWS=100 build/test_check_model --filter 'check/sweep_model' --verbose
typedef struct {
    char name[48];
    double worst_pass, worst_use, weakest_fail;  // worst_use: the largest rel.err/bound of a PASS
    int passes, fails, bug_fails, bug_passes, hidden;
} mstat;

static int mpick(phax_rng *r, int n) { return (int)(phax_rng_u64(r) % (uint64_t)n); }

// Family f (sw 1-5: PHA with one switch) at sizes drawn from r; *bg: a gallery bug it can show.
static mcase draw_case(phax_family f, int sw, phax_rng *r, bug *bg) {
    mcase m = {.cfg = phax_model_cfg_default(f), .B = 1 + mpick(r, 2), .window = -1};
    static const int Ts[] = {1, 2, 5, 7, 16, 33}, Vs[] = {7, 13, 40}, hds[] = {4, 6, 10};
    phax_model_cfg *c = &m.cfg;
    m.T = Ts[mpick(r, 6)];
    if (m.T == 1) m.B = 2;  // a target besides the one ignored
    c->vocab_size = Vs[mpick(r, 3)], c->d_model = mpick(r, 2) ? 20 : 12, c->n_layers = 1 + mpick(r, 3);
    c->n_heads = 1 + mpick(r, 3), c->head_dim = hds[mpick(r, 3)];
    c->n_kv_heads = mpick(r, 2) ? c->n_heads : 1;
    c->ffn_hidden = 8 + 4 * mpick(r, 4), c->ffn_aux_hidden = 3 + 2 * mpick(r, 2), c->gss_expand = 6 + 4 * mpick(r, 2);
    c->gss_hidden = 3, c->gss_state = 3 + 2 * mpick(r, 2), c->train_len = 64;
    c->w_short = 1 + mpick(r, 2), c->w_long = 3 + 5 * mpick(r, 2);
    c->mlstm_heads = 1 + mpick(r, 2);
    c->score_cosine = mpick(r, 2);
    if (f == PHAX_FAMILY_PHA || f == PHAX_FAMILY_SERIAL || f == PHAX_FAMILY_TRANSFORMER) {
        static const int ws[] = {0, 1, 3, 40};
        c->attn_window = ws[mpick(r, 4)];
    }
    if (f == PHAX_FAMILY_SWAX || f == PHAX_FAMILY_SWA_FULL || f == PHAX_FAMILY_SWAX_GDN)
        m.window = mpick(r, 2) ? c->w_short : c->w_long;
    if (f == PHAX_FAMILY_SWA_FULL || f == PHAX_FAMILY_SWAX_GDN) c->mlstm_first = mpick(r, 2);
    if (f == PHAX_FAMILY_SWAX_GDN) c->gdn_heads = 1 + mpick(r, 2), c->gdn_conv = 1 + mpick(r, 4);  // d/2 6 or 10
    if (sw == 1) c->use_attn = 0;
    if (sw == 2) c->use_gss = 0;
    if (sw == 3) c->use_ffn = 0;
    if (sw == 4) c->freeze_mix = 1;
    if (sw == 5) c->ffn_separate_mix = 1;
    cr_assert(phax_model_cfg_resolve(c) == PHAX_OK, "%s", phax_error());
    bug cand[8];
    int nc = 0;
    int w = phax_plan_window(c, m.window);
    if (c->n_layers >= 2) cand[nc++] = BUG_LAYER_GRAD;
    if (m.B * m.T >= 3) cand[nc++] = BUG_LOSS_SUM;  // two targets or more (one is ignored)
    if (w > 0 && w < m.T && (f != PHAX_FAMILY_PHA || c->use_attn)) cand[nc++] = BUG_WINDOW;
    if (f == PHAX_FAMILY_SWAX && m.window == c->w_short && c->w_short < m.T) cand[nc++] = BUG_SWAX_RULE;
    if (f == PHAX_FAMILY_SWAX_GDN && m.window == c->w_short && c->w_short < m.T && (c->n_layers > 1 || !c->mlstm_first))
        cand[nc++] = BUG_SWAX_RULE;  // where the model has an SWA layer
    if (c->tie_embeddings) cand[nc++] = BUG_TIED;
    if (f == PHAX_FAMILY_PHA) cand[nc++] = BUG_ALPHA;
    if (f == PHAX_FAMILY_PHA && !c->freeze_mix) cand[nc++] = BUG_MIX_SOFTMAX;
    if (f == PHAX_FAMILY_SWA_FULL && w < m.T && (c->n_layers > 1 || c->mlstm_first)) cand[nc++] = BUG_FULL_WINDOWED;
    *bg = nc ? cand[mpick(r, nc)] : OK;
    return m;
}

// One `phax check model` run at prec on n THEIRS (their outputs o[i], bf16-stored where
// bf16[i]); want[i] 1: a correct one (must PASS), 0: a bug (FAIL where it shows). Reports split
// by the headings; st[i] tallies.
static void sweep_run(const inputs *in, outs *const *o, const int *bf16, const int *want, int n, const char *prec,
                      mstat *const *st, const char *what) {
    char *pin = tu_join(g_dir, "in.safetensors"), *po = tu_join(g_dir, "stdout"), *pe = tu_join(g_dir, "stderr");
    char *pth[4];
    const char *argv[16] = {"check", "model", pin};
    int a = 3;
    write_in(in, pin);
    for (int i = 0; i < n; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "theirs%d.safetensors", i);
        pth[i] = tu_join(g_dir, nm);
        write_theirs(in, o[i], bf16[i], pth[i]);
        argv[a++] = pth[i];
    }
    argv[a++] = "--precision", argv[a++] = prec, argv[a] = NULL;
    int rc = tu_phax_v(po, pe, NULL, NULL, argv);
    char *out = tu_slurp(po, NULL), *err = tu_slurp(pe, NULL);
    cr_expect(rc <= 1 && !err[0], "%s at %s: exit %d\n%s%s", what, prec, rc, out, err);
    for (int i = 0; i < n; i++) {
        char *rep = tu_check_report(out, i + 1, n);
        int pass = strstr(rep, "\nPASS: all") != NULL, fail = strstr(rep, "\nFAIL: ") != NULL;
        double q = verdict_ratio(rep), use = 0, qf = 0;  // qf: the worst finite ratio (a baseline error
        for (const char *ln = rep; (ln = strchr(ln, '\n')); ln++) {  // of 0 makes ∞: such rows PASS by
            char nm[128];                                           // the floor); use: max rel.err/bound
            double re, be, ra, bo;
            if (sscanf(ln + 1, "%127s %lf %lf %lf %lf", nm, &re, &be, &ra, &bo) == 5) {
                if (!(re / bo <= use)) use = re / bo;
                if (isfinite(ra) && !(ra <= qf)) qf = ra;
            }
        }
        mstat *t = st[i];
        // every verdict, so that a sweep stopped early still tells its counts and margins
        fprintf(stderr, "  verdict %s %s ratio %.4g use %.3g\n", t->name, pass ? "PASS" : fail ? "FAIL" : "ERROR", qf, use);
        if (want[i]) {
            cr_expect(pass, "%s at %s (%s): expected PASS, ratio %g:\n%s", what, prec, t->name, q, rep);
            if (pass) t->passes++;
            else {
                t->fails++, fprintf(stderr, "  FAIL of a correct one: %s at %s, ratio %g\n%s", what, prec, q, rep);
                const char *keep = getenv("PHAX_CHECK_KEEP");  // a folder (as tests/test_check.c's)
                if (keep) tu_check_keep(keep, "model", pin, pth[i]);  // replayed at --precision prec
            }
            if (!(qf <= t->worst_pass)) t->worst_pass = qf;
            if (!(use <= t->worst_use)) t->worst_use = use;
            if (pass && use > 0.5) fprintf(stderr, "  near the bound: %s at %s, ratio %.3g\n%s", t->name, prec, qf, rep);
        } else {
            // Does the bug show? Some tensor more than twice its bound from the truth (its row's
            // rel.err and bound: the same truth and bound as the correct one's).
            int shows = 0;
            for (const char *ln = rep; (ln = strchr(ln, '\n')); ln++) {
                char nm[128];
                double re, be, ra, bo;
                if (sscanf(ln + 1, "%127s %lf %lf %lf %lf", nm, &re, &be, &ra, &bo) == 5)
                    shows |= !(re <= 2 * bo) && !(BOUND_C * be >= 1);  // unresolved tensors show nothing
            }
            if (!shows) t->hidden++;
            else {
                cr_expect(fail && q > BOUND_C, "%s at %s (%s): expected FAIL, ratio %g:\n%s", what, prec, t->name, q, rep);
                if (fail) t->bug_fails++;
                else t->bug_passes++;
                if (!(q >= t->weakest_fail)) t->weakest_fail = q;
            }
        }
        free(rep);
    }
    for (int i = 0; i < n; i++) free(pth[i]);
    free(out), free(err), free(pin), free(po), free(pe);
}

// The seed of draw d of sweep stream s in the sweep run `run` (sweep_model's; the replays' too).
static uint64_t sweep_seed(uint64_t run, int s, int d) { return run * 1000003u + (uint64_t)s * 100000u + (uint64_t)d; }

// Draw `d` of sweep stream `stream` (family f, no PHA switch) of the sweep run `run`, fast/cpu
// judged at f32 as the sweep ran it (one thread: another thread count sums otherwise).
static void replay_draw(uint64_t run, int stream, int d, phax_family f, const char *what, int T, int layers, int dh) {
    const uint64_t seed = sweep_seed(run, stream, d), kept = g_seed;
    g_seed = run;  // the inputs are drawn from the run's seed and the draw's
    phax_rng r = phax_rng_new(seed);
    bug bg;
    mcase m = draw_case(f, 0, &r, &bg);
    cr_assert(m.T == T && m.cfg.score_cosine && m.cfg.n_layers == layers && (!dh || m.cfg.head_dim == dh),
              "the draw moved (T %d)", m.T);
    inputs in = make_inputs(&m, seed);
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    outs o = their(&in, OK, 0);
    omp_set_num_threads(nt);
    judge(&in, &o, 0, "f32", 1, what);
    outs_free(&o);
    inputs_free(&in);
    g_seed = kept;
}

// The model sweep's false FAIL at 8cef435 (run seed 31062393025, draw 69, stream swa: B 2, T 1,
// 3 layers of 1 head of 4 dims, cosine scores): fast/cpu's flash backward sums D = rowsum(y ⊙ dO)
// in another order than dp = dO·v, so at T 1 its grad.blocks.1.attn.wq/wk were 4.0-4.5e-7 off a
// truth of exactly 0, where both baselines — the second summing D in dp's own order — were exactly
// 0 in all ten roundings (their partial sums exact): ratio ∞ against the floor's 1.19e-7. The
// flash baseline now sums D from the last element (check/attention.c); the previous binary FAILs
// this draw.
Test(check, model_flash_D_other_order) {
    replay_draw(31062393025ull, 9, 69, PHAX_FAMILY_SWA, "swa, T 1, cosine: fast/cpu's flash backward", 1, 3, 0);
}

// The model sweep's false FAIL at 09c0d2f (run seed 31062393025, draw 39 of the stream swa_full:
// B 2, T 1, 2 layers of 1 head of 6 dims, cosine scores): in layer 1 the flash baseline's D, summed
// from the last element, equalled dp in all five of its roundings (the 6 terms' partial sums
// round the same in either order), so both baselines had ds = 0 and grad.blocks.1.attn.wq/wk
// exactly 0, while fast/cpu's flash backward, a sound one, was 4.3e-7 off that truth of 0: ratio
// ∞ against the floor's 1.19e-7. A row that sees one key now takes its flash D one ulp away from
// dp where it would equal it (check/attention.c); the previous binary FAILs this draw.
Test(check, model_flash_D_one_ulp) {
    replay_draw(31062393025ull, 11, 39, PHAX_FAMILY_SWA_FULL,
                "swa_full, T 1, cosine: fast/cpu's flash backward, D equal to dp in the baseline", 1, 2, 6);
}

Test(check, sweep_model, .timeout = 7200) {
    const char *e = getenv("PHAX_CHECK_DRAWS");
    int nd = e ? atoi(e) : 1;
    if (nd < 1 || nd > 100000) nd = 1;
    uint64_t base = g_seed;  // the run's seed (printed): PHAX_CHECK_SEED repeats the draws and their inputs
    static const struct {
        phax_family f;
        int sw;
        const char *name;
    } S[] = {{PHAX_FAMILY_PHA, 0, "pha"},
             {PHAX_FAMILY_PHA, 1, "pha no_attn"},
             {PHAX_FAMILY_PHA, 2, "pha no_gss"},
             {PHAX_FAMILY_PHA, 3, "pha no_ffn"},
             {PHAX_FAMILY_PHA, 4, "pha frozen_mix"},
             {PHAX_FAMILY_PHA, 5, "pha separate_ffn"},
             {PHAX_FAMILY_TRANSFORMER, 0, "transformer"},
             {PHAX_FAMILY_SERIAL, 0, "serial"},
             {PHAX_FAMILY_SWAX, 0, "swax"},
             {PHAX_FAMILY_SWA, 0, "swa"},
             {PHAX_FAMILY_MLSTM, 0, "mlstm"},
             {PHAX_FAMILY_SWA_FULL, 0, "swa_full"},
             {PHAX_FAMILY_SWAX_GDN, 0, "swax_gdn"}};  // appended: the streams before keep their seeds
    enum { NS = sizeof S / sizeof *S, NK = 6 };  // kinds: fast f32, tf32, bf16; bf16 impl; cpu_bf16; bug
    static const char *kind[NK] = {"fast f32", "fast tf32", "fast bf16", "bf16 weights bf16", "cpu_bf16 bf16", "bug f32"};
    mstat st[NS][NK];
    for (int s = 0; s < NS; s++)
        for (int k = 0; k < NK; k++) {
            st[s][k] = (mstat){.worst_pass = 0, .weakest_fail = INFINITY};
            snprintf(st[s][k].name, sizeof st[s][k].name, "%s %s", S[s].name, kind[k]);
        }
    const char *ef = getenv("PHAX_CHECK_FIRST");  // the first draw (a sweep resumed, or one draw repeated)
    int first = ef ? atoi(ef) : 0;
    if (first < 0 || first > 100000) first = 0;
    const char *only = getenv("PHAX_CHECK_ONLY");  // one stream by name ("swa", "pha no_attn"): a draw replayed
    for (int d = first; d < first + nd; d++)
        for (int s = 0; s < NS; s++) {
            if (only && strcmp(only, S[s].name)) continue;
            uint64_t seed = sweep_seed(base, s, d);
            phax_rng r = phax_rng_new(seed);
            bug bg;
            mcase m = draw_case(S[s].f, S[s].sw, &r, &bg);
            inputs in = make_inputs(&m, seed);
            const phax_model_cfg *c = &m.cfg;
            char what[300];
            snprintf(what, sizeof what,
                     "%s seed %llu: B %d T %d V %d d %d layers %d heads %d/%d hd %d window %d call %d mlstm heads %d %s bug: %s",
                     S[s].name, (unsigned long long)seed, m.B, m.T, c->vocab_size, c->d_model, c->n_layers, c->n_heads,
                     c->n_kv_heads, c->head_dim, c->attn_window, m.window, c->mlstm_heads,
                     c->score_cosine ? "cosine" : "dot", bug_name(bg));
            fprintf(stderr, "%s\n", what);
            outs f = their(&in, OK, 0), h = their(&in, OK, 1), b = {0}, x = {0};
            int nb = 0;
            if (bg != OK) x = their(&in, bg, 0);
            outs *o1[2] = {&f, &x};
            int bf1[2] = {0, 0}, w1[2] = {1, 0};
            mstat *s1[2] = {&st[s][0], &st[s][5]};
            sweep_run(&in, o1, bf1, w1, bg != OK ? 2 : 1, "f32", s1, what);
            outs *o2[1] = {&f};
            mstat *s2[1] = {&st[s][1]};
            sweep_run(&in, o2, bf1, w1, 1, "tf32", s2, what);
            if (fcpu_bf16_available()) {
                g_mm_bf16 = 1, b = their(&in, OK, 0), g_mm_bf16 = 0, nb = 1;
            }
            outs *o3[3] = {&f, &h, &b};
            int bf3[3] = {0, 1, 0}, w3[3] = {1, 1, 1};
            mstat *s3[3] = {&st[s][2], &st[s][3], &st[s][4]};
            sweep_run(&in, o3, bf3, w3, 2 + nb, "bf16", s3, what);
            outs_free(&f), outs_free(&h);
            if (nb) outs_free(&b);
            if (bg != OK) outs_free(&x);
            inputs_free(&in);
        }
    for (int s = 0; s < NS; s++)
        for (int k = 0; k < NK; k++) {
            const mstat *t = &st[s][k];
            if (k < 5)
                printf("sweep model %-36s %4d PASS (worst ratio %.3g, %.2f of the bound)  %3d FAIL\n", t->name, t->passes,
                       t->passes + t->fails ? t->worst_pass : NAN, t->passes + t->fails ? t->worst_use : NAN, t->fails);
            else
                printf("sweep model %-36s %4d FAIL (weakest ratio %.3g)  %3d PASS  %3d hidden by the draw\n", t->name,
                       t->bug_fails, t->bug_fails ? t->weakest_fail : NAN, t->bug_passes, t->hidden);
        }
    fflush(stdout);
}

// The model sweep's closest call at 47676b6 (run seed 31062393025, draw 154 of the stream
// swax_gdn: B 2, T 33, 1 layer, 3 attention heads, cosine scores): Gated DeltaNet's grad A_log
// (one element per GDN head, a sum over every token that cancels) was 4.28 times the worst of
// its baseline's five roundings, PASSing only on the floor's 1.19e-7 (0.98 of the bound). The
// model's tensors of a handful of elements now get up to 16 roundings (src/oracle.c, sr_draws):
// worst ratio 1.36. The previous binary's worst ratio (4.28 > C) fails this test.
Test(check, model_gdn_few_elements) {
    replay_draw(31062393025ull, 12, 154, PHAX_FAMILY_SWAX_GDN, "swax_gdn, T 33: grad A_log of one element", 33, 1,
                10);
}
