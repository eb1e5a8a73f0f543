// Per-token decoding and prefill of the fast tiers (fast/cpu/decode.c on backend cpu,
// through the backend list of harness.h) against the float64 ref
// models: for every family and every PHA switch, T tokens decoded one at a
// time must give, at every step t, the logits ref_model_forward computes at
// position t over the same T tokens on the same parameters. Then: reset ≡ a
// fresh decoder, the max_len limit, window ≥ T ≡ full, the ring buffer wrapping
// many times, skipping the head, bad input, and that the tolerance does reject
// a genuinely different function (an off-by-one window).
//
// Parameters: ref's seeded init, moved off its symmetric points (norm gains,
// biases, mix logits, cosine log-scales drawn), then rounded to float32 and
// written back into the ref model, so both sides evaluate the same function of
// the same numbers and the error measured is the float32 evaluation alone.
//
// Error per step: ‖decode − ref‖₂ / ‖ref‖₂ over the V logits, in double.
//
// Tolerance per step (judged by h_bound_rel, step_ok below):
// tol_t = 8·u·n_chain + 16·δ_t, u = 2^-24 — a first-order
// float32 rounding bound for the widths and depth, plus the reference's measured
// conditioning; 8 and 16 are safety margins on the two (reasons below).
//  * n_chain is the sum of the lengths of every float32 reduction one step's
//    logits depend on (chain_len below: each matrix-vector product counts its
//    input width, each norm its width, attention its softmax/output sums over the
//    visible keys plus its score error, the head d). A float32 sum of n terms has
//    relative error at most ~n·u (γ_n, first order); errors entering at different
//    points of the chain add to first order when every map on the way — norms,
//    GELU/SiLU, the mix, the residual adds — has O(1) relative condition; the
//    factor 8 covers the few-ulp elementwise functions (exp, erf, tanh, the RoPE
//    cos/sin table, rsqrt) between the reductions. Attention scores are logits of
//    a softmax, so an absolute score error δ is a relative error δ of the weights;
//    the score error is ≤ dh·u·scale·|q||k|: in cosine mode |q̂||k̂| = 1 and scale =
//    exp(min(ℓ, log 100)) ≤ 100 (the model's largest ℓ is used); in dot mode
//    scale = 1/√dh and |q|, |k| ≈ √dh for unit-RMS inputs and N(0, 1/d) weights,
//    so the term is dh·√dh.
//  * δ_t is the MEASURED conditioning of the reference at step t: the relative
//    change of ref's logits when every parameter is multiplied by (1 + u·ξ),
//    ξ ~ N(0, 1) (the larger of two draws) — what rounding the inputs of the
//    step to float32 alone does to the exact function. Where the function is
//    well conditioned it is ~1e-7–1e-6 and the first term dominates; where a
//    near-constant head row meets the mLSTM headnorm (dv = 4, ĩ ≈ 0) it reached
//    4e-5 at one step of one seed, and any float32 evaluation errs by as much
//    there. A float32 evaluation also rounds every intermediate (each a relative
//    u of the same kind); 16 covers those few more rounding events per reduction
//    than the parameter draw injects (measured: err_t ≤ 5.8·δ_t over 40 seeds).
// mLSTM: the decoder runs the recurrent form from m = −∞, whose stabiliser
// equals the parallel form's (m_t = max(m_{t−1} + logσ(f̃_t), ĩ_t) is exactly
// max_s D̃_ts), so the models' parallel cell is reproduced for any eps and the
// stabiliser bound of docs/spec.md §2.9 (|h|·eps·|e^{m} − e^{m′}|, relative
// ≤ eps = 1e-6 for the m0 = 0 start) does not enter: no extra term.
// Measured over 40 seeds: err/tol ≤ 0.06 (mLSTM, dv = 4, ĩ ≈ 0), ≤ 0.034 elsewhere;
// a wrong formula (window off by one, a head mixed up, the SSM sign) is off by
// 1e-3–1 (err/tol ≫ 1).
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "phax/fcpu_decode.h"  // the fast/cpu-only checks of memory (state_bytes*, scratch_bytes)
#include "phax/ref_model.h"

static const double U32 = 1.0 / 16777216.0;  // 2^-24
static const double TOL_FACTOR = 8.0;    // × u·n_chain
static const double SENS_FACTOR = 16.0;  // × δ_t

// ---------------------------------------------------------------------------
// Models.

// Small awkward widths: d 20, 2 layers, head_dim 6 (not a power of two), GQA
// group 2, odd hidden widths, 9 SSM modes on 5 channels, vocabulary 23.
static phax_model_cfg small_cfg(phax_family f) {
    phax_model_cfg c = phax_model_cfg_default(f);
    c.vocab_size = 23, c.d_model = 20, c.n_layers = 2;
    c.n_heads = 2, c.n_kv_heads = 1, c.head_dim = 6;
    c.ffn_hidden = 24, c.ffn_aux_hidden = 7;
    c.gss_expand = 30, c.gss_hidden = 5, c.gss_state = 9;
    c.mlstm_heads = 2;  // d/2 = 10 → dqk 5, dv 10
    return c;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

typedef struct {
    ref_model r;
    void *f;  // the backend's model
    const h_backend *be;
} pair;

// Both models on the same float32-representable parameters (see the top).
static void pair_new(const h_backend *be, pair *p, const phax_model_cfg *cfg, phax_rng *rng) {
    p->be = be;
    uint64_t seed = phax_rng_u64(rng);
    cr_assert(ref_model_new(&p->r, cfg, seed) == PHAX_OK, "%s", phax_error());
    for (int j = 0; j < p->r.layout.n; j++) {
        const phax_param_info *t = &p->r.layout.p[j];
        double *x = p->r.params + t->offset;
        for (size_t i = 0; i < t->numel; i++) {
            if (strstr(t->name, "norm") && ends_with(t->name, ".weight")) x[i] = 1.0 + 0.3 * phax_rng_normal(rng);
            else if (ends_with(t->name, ".bias")) x[i] += phax_rng_normal(rng);
            else if (ends_with(t->name, "mix.p")) x[i] = phax_rng_normal(rng);
            else if (ends_with(t->name, "attn.logscale")) x[i] += 0.5 * phax_rng_normal(rng);
        }
    }
    for (size_t i = 0; i < p->r.layout.numel; i++) p->r.params[i] = (float)p->r.params[i];
    p->f = be->model.new_model(cfg, seed);
    cr_assert(p->f, "%s", phax_error());
    be->model.set_params_f64(p->f, p->r.params);
}

static void pair_free(pair *p) {
    ref_model_free(&p->r);
    p->be->model.free_model(p->f);
}

// The largest cosine scale exp(min(ℓ_h, log 100)) over the model (1 in dot mode).
static double max_cos_scale(const ref_model *m) {
    double s = 1.0;
    if (!m->cfg.score_cosine) return s;
    for (int j = 0; j < m->layout.n; j++) {
        const phax_param_info *t = &m->layout.p[j];
        if (!ends_with(t->name, "attn.logscale")) continue;
        for (size_t i = 0; i < t->numel; i++)
            s = fmax(s, exp(fmin(m->params[t->offset + i], PHAX_COSINE_MAX_LOGSCALE)));
    }
    return s;
}

// ---------------------------------------------------------------------------
// Tolerance: n_chain (see the top) for T visible keys at most.
static double chain_len(const phax_model_cfg *c, int T, double cmax) {
    const double d = c->d_model, dh = c->head_dim, qd = (double)c->n_heads * c->head_dim;
    const double score = c->score_cosine ? dh + cmax * dh : dh * sqrt(dh);  // cosine adds the norms
    const double attn = 3 * d + score + 2.0 * T + qd;                     // q,k,v; scores; P, P·v; W_o
    const double gss = 2 * d + 2.0 * c->gss_hidden + c->gss_expand;       // W_v,W_u; LN, W_c; W_o
    const double swiglu = 2 * d + c->ffn_hidden;
    const double aux = d + c->ffn_aux_hidden;
    const double NH = c->mlstm_heads, dqk = d / 2 / NH, dv = d / NH;
    const double mlstm = 6 * d + dqk + dv + d;  // q,k,v,o,ĩ,f̃; nᵀq̂, Cᵀq̂; headnorm; W_out
    double per_layer = 0, n = 0;
    switch (c->family) {
    case PHAX_FAMILY_PHA:  // each branch + its norm; the mix (nb terms) and the post-norm
        if (c->use_gss) per_layer += gss + d, n++;
        if (c->use_attn) per_layer += attn + d, n++;
        if (c->use_ffn) per_layer += swiglu + aux + 2 * d, n += 2;
        per_layer += n + d;
        break;
    case PHAX_FAMILY_TRANSFORMER: per_layer = attn + swiglu + 2 * d; break;
    case PHAX_FAMILY_SERIAL: per_layer = gss + attn + swiglu + aux + 3 * d; break;
    case PHAX_FAMILY_SWA: per_layer = attn + swiglu + 2 * d; break;
    case PHAX_FAMILY_MLSTM: per_layer = mlstm + swiglu + 2 * d; break;
    default: per_layer = fmax(attn, mlstm) + swiglu + 2 * d; break;  // swax: the costlier mixer
    }
    return c->n_layers * per_layer + 2 * d;  // embedding norm or final norm; the head
}

// ---------------------------------------------------------------------------
// Guarded float logits: [GUARD][V][GUARD], the guards a fixed NaN pattern.
#define GUARD 16
static const uint32_t GUARD_BITS = 0x7FA5C0DEu;

static float *lbuf(int V) {
    float *b = malloc((size_t)(V + 2 * GUARD) * sizeof(float));
    cr_assert(b);
    for (int i = 0; i < V + 2 * GUARD; i++) memcpy(&b[i], &GUARD_BITS, 4);
    return b + GUARD;
}
static int lintact(const float *p, int V) {
    for (int i = 0; i < GUARD; i++)
        if (memcmp(&p[-GUARD + i], &GUARD_BITS, 4) || memcmp(&p[V + i], &GUARD_BITS, 4)) return 0;
    return 1;
}
static void lfree(float *p) { free(p - GUARD); }
static void lpoison(float *p, int V) {
    for (int i = 0; i < V; i++) p[i] = NAN;
}

// The judge (h_bound_rel) of one step's logits against ref's row:
//   ‖decode − ref‖/‖ref‖ ≤ SENS_FACTOR·δ_t + TOL_FACTOR·u·n_chain  (= tol_chain).
static bool step_ok(const char *label, const char *what, const float *lg, const double *ref, int V,
                    double tol_chain, double sens) {
    return h_bound_rel(label, what, H_F(lg), ref, (size_t)V, SENS_FACTOR, sens, tol_chain, 0.0);
}

static void random_tokens(int32_t *tok, int T, int V, phax_rng *r) {
    for (int t = 0; t < T; t++) tok[t] = (int32_t)phax_rng_below(r, (uint64_t)V);
}

// δ_t (see the top): per step, the larger over two draws of the relative change of
// ref's logits (T, V) when every parameter p becomes p·(1 + u·ξ), ξ ~ N(0, 1).
static double *ref_sensitivity(ref_model *r, const int32_t *tok, int T, int window,
                               const double *logits, phax_rng *rng) {
    const int V = r->cfg.vocab_size;
    const size_t np = r->layout.numel;
    double *sens = calloc((size_t)T, sizeof *sens), *p0 = malloc(np * sizeof *p0);
    double *other = malloc((size_t)T * V * sizeof *other);
    cr_assert(sens && p0 && other);
    memcpy(p0, r->params, np * sizeof *p0);
    for (int draw = 0; draw < 2; draw++) {
        for (size_t i = 0; i < np; i++) r->params[i] = p0[i] * (1.0 + U32 * phax_rng_normal(rng));
        cr_assert(ref_model_forward(r, tok, NULL, 1, T, window, other, NULL) == PHAX_OK);
        for (int t = 0; t < T; t++) {
            double num = 0, den = 0;
            for (int v = 0; v < V; v++) {
                double e = other[(size_t)t * V + v] - logits[(size_t)t * V + v];
                num += e * e, den += logits[(size_t)t * V + v] * logits[(size_t)t * V + v];
            }
            sens[t] = fmax(sens[t], sqrt(num / den));
        }
    }
    memcpy(r->params, p0, np * sizeof *p0);
    free(p0), free(other);
    return sens;
}

// ---------------------------------------------------------------------------
// The main check: decode T random tokens with the decoder's window dec_window
// and compare every step with ref over the same tokens at ref_window (the same
// window unless a test wants a mismatch). max_len: the decoder's. Returns the
// worst err/tol; with expect_pass, fails the test on any step over tol.
// When > 0, the ref model alone runs with this mLSTM head-norm eps (a decoder that
// ignored its config's eps would pass every test where both sides use the default).
static double g_ref_norm_eps;

static double decode_vs_ref(const h_backend *be, const char *label, const phax_model_cfg *cfg, int T, int ref_window,
                            int dec_window, int max_len, int expect_pass) {
    phax_rng rng = tu_rng(label);
    h_verbose(0);  // T judged steps per case: failures only (the summary line below)
    pair p;
    pair_new(be, &p, cfg, &rng);
    if (g_ref_norm_eps > 0) p.r.cfg.mlstm_norm_eps = g_ref_norm_eps;
    const int V = p.r.cfg.vocab_size;
    int32_t *tok = malloc((size_t)T * sizeof *tok);
    double *ref = malloc((size_t)T * V * sizeof *ref);
    cr_assert(tok && ref);
    random_tokens(tok, T, V, &rng);
    cr_assert(ref_model_forward(&p.r, tok, NULL, 1, T, ref_window, ref, NULL) == PHAX_OK, "%s",
              phax_error());

    const double tol_chain = TOL_FACTOR * U32 * chain_len(&p.r.cfg, T, max_cos_scale(&p.r));
    double *sens = ref_sensitivity(&p.r, tok, T, ref_window, ref, &rng);
    void *dc = be->decode.new_decoder(p.f, max_len, dec_window);
    cr_assert(dc, "%s", phax_error());
    float *lg = lbuf(V);
    double worst = 0, worst_err = 0, worst_tol = 0, err_per_sens = 0;
    int worst_t = 0;
    for (int t = 0; t < T; t++) {
        lpoison(lg, V);
        cr_assert(be->decode.step(dc, tok[t], lg) == PHAX_OK, "[%s] step %d: %s", label, t,
                  phax_error());
        cr_assert(lintact(lg, V), "[%s] step %d: guard zone overwritten", label, t);
        cr_assert(be->decode.pos(dc) == t + 1);
        const double err = h_relerr(H_F(lg), ref + (size_t)t * V, H_ZERO, V);
        const double tol = tol_chain + SENS_FACTOR * sens[t];
        if (expect_pass) {
            char what[32];
            snprintf(what, sizeof what, "step %d", t);
            cr_assert(step_ok(label, what, lg, ref + (size_t)t * V, V, tol_chain, sens[t]),
                      "[%s] step %d: err %.3e > tol %.3e (or NaN)", label, t, err, tol);
        }
        const double ratio = err / tol;
        err_per_sens = fmax(err_per_sens, err / sens[t]);
        if (!(ratio <= worst)) worst = ratio, worst_err = err, worst_tol = tol, worst_t = t;
    }
    printf("[%s] T=%d window=%d: worst err %.3e at step %d, tol %.3e (8u·n_chain %.3e, "
           "δ %.3e), worst err/tol %.3e, max err/δ %.2f\n",
           label, T, dec_window, worst_err, worst_t, worst_tol, tol_chain, sens[worst_t], worst,
           err_per_sens);
    be->decode.free_decoder(dc);
    lfree(lg);
    free(tok), free(ref), free(sens);
    pair_free(&p);
    return worst;
}

static void check(const h_backend *be, const char *label, const phax_model_cfg *cfg, int T, int window) {
    decode_vs_ref(be, label, cfg, T, window, window, T, 1);
}

// ---------------------------------------------------------------------------
// PHA and its switches (cosine scores, GQA group 2, head_dim 6).

H_TEST(decode, pha) {
    phax_model_cfg c = small_cfg(PHAX_FAMILY_PHA);
    check(be, "fcpu_decode.pha", &c, 37, -1);
}

H_TEST(decode, pha_no_gss) {
    phax_model_cfg c = small_cfg(PHAX_FAMILY_PHA);
    c.use_gss = 0;
    check(be, "fcpu_decode.pha_no_gss", &c, 13, -1);
}

H_TEST(decode, pha_no_attn) {
    phax_model_cfg c = small_cfg(PHAX_FAMILY_PHA);
    c.use_attn = 0;
    check(be, "fcpu_decode.pha_no_attn", &c, 37, -1);
}

H_TEST(decode, pha_no_ffn) {
    phax_model_cfg c = small_cfg(PHAX_FAMILY_PHA);
    c.use_ffn = 0;
    check(be, "fcpu_decode.pha_no_ffn", &c, 13, -1);
}

H_TEST(decode, pha_separate_mix) {
    phax_model_cfg c = small_cfg(PHAX_FAMILY_PHA);
    c.ffn_separate_mix = 1;
    check(be, "fcpu_decode.pha_separate_mix", &c, 37, -1);
}

H_TEST(decode, pha_freeze_mix) {
    phax_model_cfg c = small_cfg(PHAX_FAMILY_PHA);
    c.freeze_mix = 1, c.ffn_separate_mix = 1;
    check(be, "fcpu_decode.pha_freeze_mix", &c, 13, -1);
}

H_TEST(decode, pha_window_3) {
    phax_model_cfg c = small_cfg(PHAX_FAMILY_PHA);
    c.attn_window = 3;
    check(be, "fcpu_decode.pha_window_3", &c, 37, -1);
}

H_TEST(decode, pha_window_1) {
    phax_model_cfg c = small_cfg(PHAX_FAMILY_PHA);
    c.attn_window = 1;
    check(be, "fcpu_decode.pha_window_1", &c, 13, -1);
}

H_TEST(decode, pha_untied_gqa1_dh10) {
    phax_model_cfg c = small_cfg(PHAX_FAMILY_PHA);
    c.tie_embeddings = 0, c.n_kv_heads = 2, c.head_dim = 10, c.n_layers = 3;
    check(be, "fcpu_decode.pha_untied_gqa1_dh10", &c, 37, -1);
}

// Long-memory modes (|e^{λ}| close to 1): the recurrence carries state across all T.
H_TEST(decode, pha_long_memory) {
    phax_model_cfg c = small_cfg(PHAX_FAMILY_PHA);
    c.gss_long_memory_init = 1, c.gss_state = 16;
    check(be, "fcpu_decode.pha_long_memory", &c, 37, -1);
}

// ---------------------------------------------------------------------------
// Baselines.

// 4 query heads on 2 kv heads of width 10 (Hq·dh = 40 ≠ d), 3 layers.
H_TEST(decode, transformer) {
    phax_model_cfg c = small_cfg(PHAX_FAMILY_TRANSFORMER);
    c.n_layers = 3, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 10;
    check(be, "fcpu_decode.transformer", &c, 37, -1);
}

H_TEST(decode, transformer_dot_window_5) {
    phax_model_cfg c = small_cfg(PHAX_FAMILY_TRANSFORMER);
    c.score_cosine = 0, c.attn_window = 5, c.tie_embeddings = 0;
    check(be, "fcpu_decode.transformer_dot_window_5", &c, 37, -1);
}

H_TEST(decode, serial) {
    phax_model_cfg c = small_cfg(PHAX_FAMILY_SERIAL);
    c.n_kv_heads = 2;
    check(be, "fcpu_decode.serial", &c, 13, -1);
}

H_TEST(decode, serial_window_3_gqa2) {
    phax_model_cfg c = small_cfg(PHAX_FAMILY_SERIAL);
    c.attn_window = 3;
    check(be, "fcpu_decode.serial_window_3_gqa2", &c, 37, -1);
}

// ---------------------------------------------------------------------------
// SWAX family (dot scores by default; head_dim 10, mLSTM dqk 5, dv 10).

static phax_model_cfg swax_cfg(phax_family f) {
    phax_model_cfg c = small_cfg(f);
    c.head_dim = 10;
    return c;
}

H_TEST(decode, swax_mlstm_first) {
    phax_model_cfg c = swax_cfg(PHAX_FAMILY_SWAX);
    c.n_layers = 3, c.mlstm_first = 1;
    check(be, "fcpu_decode.swax_mlstm_first", &c, 37, 3);
}

H_TEST(decode, swax_swa_first) {
    phax_model_cfg c = swax_cfg(PHAX_FAMILY_SWAX);
    c.n_layers = 3, c.mlstm_first = 0, c.n_kv_heads = 2, c.tie_embeddings = 0;
    check(be, "fcpu_decode.swax_swa_first", &c, 37, 5);
}

H_TEST(decode, swax_w_long) {  // window −1 → cfg.w_long (2 at train_len 16)
    phax_model_cfg c = swax_cfg(PHAX_FAMILY_SWAX);
    c.mlstm_first = 0, c.train_len = 16;
    check(be, "fcpu_decode.swax_w_long", &c, 13, -1);
}

H_TEST(decode, swa_windows) {
    phax_model_cfg c = swax_cfg(PHAX_FAMILY_SWA);
    const int T = 37, windows[] = {1, 3, T, T + 4, 0};
    for (int i = 0; i < 5; i++) {
        char label[64];
        snprintf(label, sizeof label, "fcpu_decode.swa_windows.w%d", windows[i]);
        check(be, label, &c, T, windows[i]);
    }
}

H_TEST(decode, swa_cosine_gqa1) {
    phax_model_cfg c = swax_cfg(PHAX_FAMILY_SWA);
    c.score_cosine = 1, c.n_kv_heads = 2, c.head_dim = 6;
    check(be, "fcpu_decode.swa_cosine_gqa1", &c, 13, 3);
}

// swa_full: full attention at the even layers (mixer_order mlstm_first), the call's window at the
// odd; swa_first the other way, GQA group 2, cosine scores. Each layer's ring has its own size.
H_TEST(decode, swa_full) {
    phax_model_cfg c = swax_cfg(PHAX_FAMILY_SWA_FULL);
    c.n_layers = 3, c.mlstm_first = 1;
    check(be, "fcpu_decode.swa_full_mlstm_first", &c, 37, 3);
    c.mlstm_first = 0, c.n_kv_heads = 2, c.score_cosine = 1;
    check(be, "fcpu_decode.swa_full_swa_first", &c, 37, 5);
    // the full layers' caches grow to max_len; the windowed layer's ring wraps 12 times
    c.mlstm_first = 1, c.n_layers = 2, c.score_cosine = 0;
    decode_vs_ref(be, "fcpu_decode.swa_full_ring_wraps", &c, 61, 5, 5, 64, 1);
}

// swax_gdn: Gated DeltaNet at the even layers (2 heads of dk 5, dv 10, kernel 4), SWA at the odd;
// then SWA first with one GDN head, kernel 1 (no convolution history) and kernel 3 past its ring
// many times. On every backend (fast/cuda's gdn_scan_k on the emulator).
H_TEST(decode, swax_gdn) {
    phax_model_cfg c = swax_cfg(PHAX_FAMILY_SWAX_GDN);
    c.n_layers = 3, c.mlstm_first = 1;
    check(be, "fcpu_decode.swax_gdn_gdn_first", &c, 37, 3);
    c.mlstm_first = 0, c.gdn_heads = 1, c.gdn_conv = 1;
    check(be, "fcpu_decode.swax_gdn_swa_first_K1", &c, 19, 5);
    c.gdn_conv = 3, c.n_layers = 2;
    check(be, "fcpu_decode.swax_gdn_K3", &c, 61, 4);
}

H_TEST(decode, mlstm) {
    phax_model_cfg c = swax_cfg(PHAX_FAMILY_MLSTM);
    c.n_layers = 3;
    check(be, "fcpu_decode.mlstm", &c, 37, -1);
}

// 5 heads: dqk 2, dv 4; input gates near 0, so the stabiliser follows the
// forget branch as often as the input gate.
H_TEST(decode, mlstm_5_heads_igate_0) {
    phax_model_cfg c = swax_cfg(PHAX_FAMILY_MLSTM);
    c.mlstm_heads = 5, c.igate_bias_init = 0.0, c.fgate_init = 0.7;
    check(be, "fcpu_decode.mlstm_5_heads_igate_0", &c, 37, -1);
}

// mlstm_norm_eps (issue 11, item 12): the decoder follows its config's head-norm eps.
// At eps 1e-5 it matches ref at 1e-5 within the usual bound; against ref at the default
// 1e-6 it is rejected (at the default igate bias −10 a head's variance is ~1e-6, so the
// two eps give visibly different functions, not a rounding difference).
H_TEST(decode, mlstm_norm_eps) {
    phax_model_cfg c = swax_cfg(PHAX_FAMILY_SWAX);
    c.n_layers = 3, c.mlstm_norm_eps = 1e-5;
    check(be, "fcpu_decode.mlstm_norm_eps_1e-5", &c, 37, 3);
    g_ref_norm_eps = 1e-6;
    double r = decode_vs_ref(be, "fcpu_decode.mlstm_norm_eps_vs_default", &c, 37, 3, 3, 37, 0);
    g_ref_norm_eps = 0;
    cr_assert(r > 10.0, "a decoder at eps 1e-5 against ref at 1e-6 reached only err/tol %.3e", r);
}

// ---------------------------------------------------------------------------
// The tolerance rejects a different function: a decoder with window 4 against ref
// at window 3 (every step from t = 3 on sees one key too many).
H_TEST(decode, tolerance_rejects_window_off_by_one) {
    phax_model_cfg c = swax_cfg(PHAX_FAMILY_SWA);
    double r = decode_vs_ref(be, "fcpu_decode.tolerance_rejects_window_off_by_one", &c, 13, 3, 4, 13, 0);
    cr_assert(r > 10.0, "an off-by-one window reached only err/tol %.3e", r);
}

// ---------------------------------------------------------------------------
// Properties of the decoder itself (bit-for-bit: same operations in the same order).

// Steps T tokens, writing (T, V) logits.
static void run_tokens(const h_backend *be, void *dc, const int32_t *tok, int T, float *out, int V) {
    for (int t = 0; t < T; t++)
        cr_assert(be->decode.step(dc, tok[t], out + (size_t)t * V) == PHAX_OK, "%s", phax_error());
}

static void reset_check(const h_backend *be, const char *label, phax_model_cfg c, int window) {
    phax_rng rng = tu_rng(label);
    pair p;
    pair_new(be, &p, &c, &rng);
    const int T = 19, V = c.vocab_size;
    int32_t tok[19], other[19];
    random_tokens(tok, T, V, &rng);
    random_tokens(other, T, V, &rng);
    float *a = malloc((size_t)T * V * sizeof(float)), *b = malloc((size_t)T * V * sizeof(float));
    float *junk = malloc((size_t)T * V * sizeof(float));
    void *fresh = be->decode.new_decoder(p.f, T, window), *used = be->decode.new_decoder(p.f, T, window);
    cr_assert(fresh && used && a && b && junk, "%s", phax_error());
    run_tokens(be, fresh, tok, T, a, V);
    run_tokens(be, used, other, T, junk, V);  // fill every kind of state with something else
    be->decode.reset(used);
    cr_assert(be->decode.pos(used) == 0);
    run_tokens(be, used, tok, T, b, V);
    cr_assert(!memcmp(a, b, (size_t)T * V * sizeof(float)), "[%s] reset differs from fresh", label);
    be->decode.free_decoder(fresh), be->decode.free_decoder(used);
    free(a), free(b), free(junk);
    pair_free(&p);
}

H_TEST(decode, reset_equals_fresh) {
    reset_check(be, "fcpu_decode.reset_equals_fresh.pha", small_cfg(PHAX_FAMILY_PHA), -1);
    phax_model_cfg s = swax_cfg(PHAX_FAMILY_SWAX);
    s.n_layers = 2;
    reset_check(be, "fcpu_decode.reset_equals_fresh.swax", s, 3);
}

H_TEST(decode, max_len_is_enforced) {
    phax_rng rng = tu_rng("fcpu_decode.max_len_is_enforced");
    phax_model_cfg c = small_cfg(PHAX_FAMILY_TRANSFORMER);
    pair p;
    pair_new(be, &p, &c, &rng);
    const int V = c.vocab_size;
    void *dc = be->decode.new_decoder(p.f, 5, -1);
    cr_assert(dc, "%s", phax_error());
    float *lg = lbuf(V);
    for (int t = 0; t < 5; t++) cr_assert(be->decode.step(dc, t, lg) == PHAX_OK, "%s", phax_error());
    for (int i = 0; i < V; i++) lg[i] = 7.0f;
    cr_assert(be->decode.step(dc, 1, lg) == PHAX_ERR, "a 6th token fitted in max_len 5");
    printf("[fcpu_decode.max_len_is_enforced] message: %s\n", phax_error());
    cr_assert(strstr(phax_error(), "max_len = 5"), "unclear message: %s", phax_error());
    for (int i = 0; i < V; i++) cr_assert(lg[i] == 7.0f, "logits written on error");
    cr_assert(lintact(lg, V) && be->decode.pos(dc) == 5);
    be->decode.reset(dc);
    cr_assert(be->decode.step(dc, 1, lg) == PHAX_OK, "%s", phax_error());
    be->decode.free_decoder(dc);
    pair_free(&p);
    // swa_full at a finite window still has full layers: the limit holds (and only then).
    c = swax_cfg(PHAX_FAMILY_SWA_FULL);
    pair_new(be, &p, &c, &rng);
    dc = be->decode.new_decoder(p.f, 5, 2);
    cr_assert(dc, "%s", phax_error());
    for (int t = 0; t < 5; t++) cr_assert(be->decode.step(dc, t, lg) == PHAX_OK, "%s", phax_error());
    cr_assert(be->decode.step(dc, 1, lg) == PHAX_ERR && strstr(phax_error(), "max_len = 5"),
              "swa_full: a 6th token fitted in max_len 5");
    be->decode.free_decoder(dc);
    c.mlstm_first = 0, c.n_layers = 1;  // one block, SWA: no limit
    pair_free(&p);
    pair_new(be, &p, &c, &rng);
    dc = be->decode.new_decoder(p.f, 5, 2);
    cr_assert(dc, "%s", phax_error());
    for (int t = 0; t < 9; t++) cr_assert(be->decode.step(dc, t % V, lg) == PHAX_OK, "%s", phax_error());
    be->decode.free_decoder(dc);
    lfree(lg);
    pair_free(&p);
}

// Window ≥ T: the same logits as full attention, bit for bit (SWA via the window
// argument; PHA via attn_window on the same parameters).
H_TEST(decode, window_ge_T_equals_full) {
    phax_rng rng = tu_rng("fcpu_decode.window_ge_T_equals_full");
    const int T = 17;
    for (int fam = 0; fam < 2; fam++) {
        phax_model_cfg c = fam ? small_cfg(PHAX_FAMILY_PHA) : swax_cfg(PHAX_FAMILY_SWA);
        const int V = c.vocab_size;
        pair p;
        pair_new(be, &p, &c, &rng);
        phax_model_cfg cw = c;
        cw.attn_window = T;
        void *wide = be->model.new_model(&cw, 1);
        cr_assert(wide, "%s", phax_error());
        be->model.set_params_f64(wide, p.r.params);
        int32_t tok[17];
        random_tokens(tok, T, V, &rng);
        float *a = malloc((size_t)T * V * sizeof(float)), *b = malloc((size_t)T * V * sizeof(float));
        void *full = be->decode.new_decoder(p.f, T, 0);
        void *win = fam ? be->decode.new_decoder(wide, T, 0) : be->decode.new_decoder(p.f, T, T);
        cr_assert(full && win && a && b, "%s", phax_error());
        run_tokens(be, full, tok, T, a, V);
        run_tokens(be, win, tok, T, b, V);
        cr_assert(!memcmp(a, b, (size_t)T * V * sizeof(float)), "window T differs from full (%s)",
                  phax_family_name(c.family));
        be->decode.free_decoder(full), be->decode.free_decoder(win);
        free(a), free(b);
        be->model.free_model(wide);
        pair_free(&p);
    }
}

// The ring buffer of a sliding window wraps many times (T = 61 = 20·3 + 1 with
// w = 3; 12 times with w = 5) and there is no length limit: max_len 2 < T.
H_TEST(decode, ring_buffer_wraps) {
    phax_model_cfg c = swax_cfg(PHAX_FAMILY_SWA);
    decode_vs_ref(be, "fcpu_decode.ring_buffer_wraps.swa_w3", &c, 61, 3, 3, 2, 1);
    phax_model_cfg s = swax_cfg(PHAX_FAMILY_SWAX);
    s.mlstm_first = 0;
    decode_vs_ref(be, "fcpu_decode.ring_buffer_wraps.swax_w5", &s, 61, 5, 5, 2, 1);
    phax_model_cfg q = small_cfg(PHAX_FAMILY_PHA);
    q.attn_window = 4;
    decode_vs_ref(be, "fcpu_decode.ring_buffer_wraps.pha_w4", &q, 41, -1, -1, 1, 1);
}

// State size: the KV cache follows max_len for full attention and the window
// for a sliding one; recurrent state does not grow.
Test(cpu_decode, state_bytes) {
    const h_backend *be = h_backend_named("cpu");
    phax_rng rng = tu_rng("fcpu_decode.state_bytes");
    phax_model_cfg c = swax_cfg(PHAX_FAMILY_SWA);
    pair p;
    pair_new(be, &p, &c, &rng);
    const size_t kv = (size_t)2 * c.n_kv_heads * c.head_dim * sizeof(float) * c.n_layers;  // k and v
    fcpu_decoder *a = fcpu_decoder_new((const fmodel *)p.f, 100, 0), *b = fcpu_decoder_new((const fmodel *)p.f, 100, 7);
    fcpu_decoder *b2 = fcpu_decoder_new((const fmodel *)p.f, 3, 7);
    cr_assert(a && b && b2, "%s", phax_error());
    cr_assert(fcpu_decoder_state_bytes(a) == 100 * kv, "%zu", fcpu_decoder_state_bytes(a));
    cr_assert(fcpu_decoder_state_bytes(b) == 7 * kv && fcpu_decoder_state_bytes(b2) == 7 * kv);
    fcpu_decoder_free(a), fcpu_decoder_free(b), fcpu_decoder_free(b2);
    pair_free(&p);

    phax_model_cfg m = swax_cfg(PHAX_FAMILY_MLSTM);
    pair_new(be, &p, &m, &rng);
    const size_t NH = m.mlstm_heads, dqk = m.d_model / 2 / NH, dv = m.d_model / NH;
    fcpu_decoder *r = fcpu_decoder_new((const fmodel *)p.f, 1000, -1);
    cr_assert(r, "%s", phax_error());
    cr_assert(fcpu_decoder_state_bytes(r) == m.n_layers * NH * (dqk * dv + dqk + 1) * sizeof(double));
    fcpu_decoder_free(r);
    pair_free(&p);
}

// fcpu_decoder_state_bytes_at against the state written out by hand from the
// config: awkward sizes (3 layers, GQA 6 query / 2 kv heads, head_dim 6, GSS H_s 5
// × N 9, mLSTM 2 heads of dqk 5 × dv 10), windows below and above the context.
// Counting the KV cache with n_heads instead of n_kv_heads, or a ring buffer by
// the context instead of its window, fails here.
static phax_model_cfg mem_cfg(phax_family f, int attn_window) {
    phax_model_cfg c = small_cfg(f);
    c.n_layers = 3, c.n_heads = 6, c.n_kv_heads = 2, c.head_dim = 6, c.mlstm_heads = 2;
    c.attn_window = attn_window;
    cr_assert(phax_model_cfg_resolve(&c) == PHAX_OK, "%s", phax_error());
    return c;
}

// Bytes by hand: n_attn layers of KV with `entries` keys and values each (2 · 2 kv
// heads · 6 · 4 bytes per entry), n_gss GSS states (2 · 5 · 9 doubles), n_mlstm
// mLSTM states (2 heads · (5·10 + 5 + 1) doubles).
static size_t hand_state(int n_attn, int n_gss, int n_mlstm, long entries) {
    return (size_t)n_attn * 2 * 2 * 6 * 4 * (size_t)entries + (size_t)n_gss * 2 * 5 * 9 * 8 +
           (size_t)n_mlstm * 2 * (5 * 10 + 5 + 1) * 8;
}

static long lmin(long a, long b) { return a < b ? a : b; }

// One model; a decoder of max_len (window as fcpu_decoder_new's); state_bytes_at
// at contexts 0, 1, 17, 40, max_len, max_len + 1, 10^6 against the hand count,
// where full attention holds min(context, max_len) entries and a ring `ring` (> 0).
static void state_at_check(const char *label, phax_model_cfg c, int max_len, int window,
                           int n_attn, int n_gss, int n_mlstm, int ring) {
    fmodel m;
    cr_assert(fmodel_new(&m, &c, 7) == PHAX_OK, "%s: %s", label, phax_error());
    fcpu_decoder *d = fcpu_decoder_new(&m, max_len, window);
    cr_assert(d, "%s: %s", label, phax_error());
    const long cap = ring > 0 ? ring : max_len;
    cr_assert(fcpu_decoder_state_bytes(d) == hand_state(n_attn, n_gss, n_mlstm, cap),
              "%s: state_bytes %zu, by hand %zu", label, fcpu_decoder_state_bytes(d),
              hand_state(n_attn, n_gss, n_mlstm, cap));
    const int ctx[] = {0, 1, 17, 40, max_len, max_len + 1, 1000000};
    for (int i = 0; i < 7; i++) {
        const long held = ring > 0 ? ring : lmin(ctx[i], max_len);
        const size_t want = hand_state(n_attn, n_gss, n_mlstm, held);
        const size_t got = fcpu_decoder_state_bytes_at(d, ctx[i]);
        cr_assert(got == want, "%s: context %d: state_bytes_at %zu, by hand %zu", label, ctx[i],
                  got, want);
        if (ctx[i] >= 1 && ctx[i] <= max_len) {  // = the state of a decoder made for that context
            fcpu_decoder *e = fcpu_decoder_new(&m, ctx[i], window);
            cr_assert(e && fcpu_decoder_state_bytes(e) == got, "%s: context %d", label, ctx[i]);
            fcpu_decoder_free(e);
        }
    }
    // Stepping does not change what is allocated.
    cr_assert(fcpu_decoder_step(d, 1, NULL) == PHAX_OK, "%s", phax_error());
    cr_assert(fcpu_decoder_state_bytes_at(d, 17) == hand_state(n_attn, n_gss, n_mlstm, ring > 0 ? ring : 17));
    fcpu_decoder_free(d);
    fmodel_free(&m);
}

Test(cpu_decode, state_bytes_at) {
    // full attention: grows with the context up to max_len
    state_at_check("transformer", mem_cfg(PHAX_FAMILY_TRANSFORMER, 0), 40, 0, 3, 0, 0, 0);
    state_at_check("pha", mem_cfg(PHAX_FAMILY_PHA, 0), 64, -1, 3, 3, 0, 0);
    state_at_check("serial", mem_cfg(PHAX_FAMILY_SERIAL, 0), 33, -1, 3, 3, 0, 0);
    // PHA-family windows (cfg.attn_window): a ring of w entries below and above the context
    state_at_check("transformer w 7", mem_cfg(PHAX_FAMILY_TRANSFORMER, 7), 40, 0, 3, 0, 0, 7);
    state_at_check("pha w 5", mem_cfg(PHAX_FAMILY_PHA, 5), 64, -1, 3, 3, 0, 5);
    state_at_check("pha w 50", mem_cfg(PHAX_FAMILY_PHA, 50), 64, -1, 3, 3, 0, 50);
    // SWAX: layers 0 and 2 mLSTM, layer 1 SWA (mlstm_first); swa_first the other way
    phax_model_cfg sx = mem_cfg(PHAX_FAMILY_SWAX, 0);
    state_at_check("swax w 7", sx, 40, 7, 1, 0, 2, 7);
    state_at_check("swax w 64", sx, 40, 64, 1, 0, 2, 64);
    state_at_check("swax full", sx, 40, 0, 1, 0, 2, 0);
    state_at_check("swax w_long", sx, 40, -1, 1, 0, 2, sx.w_long);
    phax_model_cfg sf = sx;
    sf.mlstm_first = 0;
    state_at_check("swax swa_first w 7", sf, 40, 7, 2, 0, 1, 7);
    state_at_check("swa w 9", mem_cfg(PHAX_FAMILY_SWA, 0), 40, 9, 3, 0, 0, 9);
    // mLSTM only: constant
    state_at_check("mlstm", mem_cfg(PHAX_FAMILY_MLSTM, 0), 40, -1, 0, 0, 3, 0);
    // swax_gdn, 3 layers (GDN, SWA, GDN): each GDN layer carries Sᵀ (5 heads of dk 2, dv 4) in
    // double and its convolution's last K − 1 = 3 inputs of 2d floats, the same at any context;
    // the SWA layer a ring of the window.
    {
        phax_model_cfg c = small_cfg(PHAX_FAMILY_SWAX_GDN);
        c.n_layers = 3, c.n_heads = 6, c.n_kv_heads = 2, c.head_dim = 6, c.gdn_heads = 5;
        cr_assert(phax_model_cfg_resolve(&c) == PHAX_OK, "%s", phax_error());
        fmodel m;
        cr_assert(fmodel_new(&m, &c, 7) == PHAX_OK, "%s", phax_error());
        const int max_len = 40, w = 9;
        fcpu_decoder *d = fcpu_decoder_new(&m, max_len, w);
        cr_assert(d, "%s", phax_error());
        const size_t gdn = 5 * 2 * 4 * sizeof(double) + 3 * 2 * 20 * sizeof(float);  // one GDN layer, by hand
        for (int ctx = 0; ctx <= 1000; ctx += 500)
            cr_assert(fcpu_decoder_state_bytes_at(d, ctx) == 2 * gdn + hand_state(1, 0, 0, w),
                      "swax_gdn: context %d: %zu, by hand %zu", ctx, fcpu_decoder_state_bytes_at(d, ctx),
                      2 * gdn + hand_state(1, 0, 0, w));
        fcpu_decoder_free(d);
        fmodel_free(&m);
    }
    // swa_full, 3 layers (mlstm_first: full, SWA, full): two caches grow with the context, one
    // ring of the window; swa_first (SWA, full, SWA): one grows, two rings. Sizing every layer by
    // one cap fails here.
    for (int first = 1; first >= 0; first--) {
        phax_model_cfg c = mem_cfg(PHAX_FAMILY_SWA_FULL, 0);
        c.mlstm_first = first;
        fmodel m;
        cr_assert(fmodel_new(&m, &c, 7) == PHAX_OK, "%s", phax_error());
        const int max_len = 40, w = 9, nfull = first ? 2 : 1, nring = 3 - nfull;
        fcpu_decoder *d = fcpu_decoder_new(&m, max_len, w);
        cr_assert(d, "%s", phax_error());
        cr_assert(fcpu_decoder_state_bytes(d) == hand_state(nfull, 0, 0, max_len) + hand_state(nring, 0, 0, w),
                  "swa_full %d: state_bytes %zu", first, fcpu_decoder_state_bytes(d));
        const int ctx[] = {0, 1, 17, 40, 41, 1000000};
        for (int i = 0; i < 6; i++) {
            const size_t want = hand_state(nfull, 0, 0, lmin(ctx[i], max_len)) + hand_state(nring, 0, 0, w);
            cr_assert(fcpu_decoder_state_bytes_at(d, ctx[i]) == want, "swa_full %d: context %d: %zu, by hand %zu",
                      first, ctx[i], fcpu_decoder_state_bytes_at(d, ctx[i]), want);
        }
        fcpu_decoder_free(d);
        fmodel_free(&m);
    }
}

// The working memory: full attention's score rows grow with max_len by
// chunk · 4 + 8 bytes per entry (the pass's scores and a step's double row); a
// ring's do not; neither the state nor its count depends on the chunk.
Test(cpu_decode, scratch_bytes) {
    phax_model_cfg c = mem_cfg(PHAX_FAMILY_TRANSFORMER, 0);
    fmodel m;
    cr_assert(fmodel_new(&m, &c, 7) == PHAX_OK, "%s", phax_error());
    const int R = 16;
    fcpu_decoder *a = fcpu_decoder_new_chunked(&m, 128, 0, R);
    fcpu_decoder *b = fcpu_decoder_new_chunked(&m, 1152, 0, R);
    fcpu_decoder *one = fcpu_decoder_new_chunked(&m, 128, 0, 1);
    cr_assert(a && b && one, "%s", phax_error());
    const size_t sa = fcpu_decoder_scratch_bytes(a), sb = fcpu_decoder_scratch_bytes(b);
    cr_assert(sb - sa == (size_t)(1152 - 128) * (R * 4 + 8), "%zu - %zu", sb, sa);
    cr_assert(fcpu_decoder_scratch_bytes(one) < sa);
    cr_assert(fcpu_decoder_state_bytes(one) == fcpu_decoder_state_bytes(a));
    // every scratch row: at least the R · (max_len + R) floats of a pass's scores
    cr_assert(sa > (size_t)R * (128 + R) * 4);
    fcpu_decoder_free(a), fcpu_decoder_free(b), fcpu_decoder_free(one);
    fmodel_free(&m);

    phax_model_cfg s = mem_cfg(PHAX_FAMILY_SWA, 0);
    cr_assert(fmodel_new(&m, &s, 7) == PHAX_OK, "%s", phax_error());
    a = fcpu_decoder_new_chunked(&m, 128, 9, R), b = fcpu_decoder_new_chunked(&m, 1152, 9, R);
    cr_assert(a && b, "%s", phax_error());
    cr_assert(fcpu_decoder_scratch_bytes(a) == fcpu_decoder_scratch_bytes(b));
    fcpu_decoder_free(a), fcpu_decoder_free(b);
    fmodel_free(&m);
}

// logits = NULL skips the head but not the state: later logits are unchanged.
H_TEST(decode, null_logits_skip_head) {
    phax_rng rng = tu_rng("fcpu_decode.null_logits_skip_head");
    phax_model_cfg c = small_cfg(PHAX_FAMILY_SERIAL);
    pair p;
    pair_new(be, &p, &c, &rng);
    const int T = 11, V = c.vocab_size;
    int32_t tok[11];
    random_tokens(tok, T, V, &rng);
    float *a = malloc((size_t)T * V * sizeof(float)), *b = lbuf(V);
    void *x = be->decode.new_decoder(p.f, T, -1), *y = be->decode.new_decoder(p.f, T, -1);
    cr_assert(a && x && y, "%s", phax_error());
    run_tokens(be, x, tok, T, a, V);
    for (int t = 0; t < T; t++) {
        lpoison(b, V);
        cr_assert(be->decode.step(y, tok[t], t < T - 3 ? NULL : b) == PHAX_OK);
        if (t >= T - 3) cr_assert(!memcmp(b, a + (size_t)t * V, V * sizeof(float)), "step %d", t);
    }
    cr_assert(lintact(b, V));
    be->decode.free_decoder(x), be->decode.free_decoder(y);
    free(a), lfree(b);
    pair_free(&p);
}

// ---------------------------------------------------------------------------
// Bad input.

// A token outside [0, V) fails before anything is written; the sequence then
// continues exactly as if it had never been offered.
H_TEST(decode, bad_token) {
    phax_rng rng = tu_rng("fcpu_decode.bad_token");
    phax_model_cfg c = swax_cfg(PHAX_FAMILY_SWAX);
    pair p;
    pair_new(be, &p, &c, &rng);
    const int T = 7, V = c.vocab_size;
    int32_t tok[7];
    random_tokens(tok, T, V, &rng);
    float *a = malloc((size_t)T * V * sizeof(float)), *b = lbuf(V);
    void *x = be->decode.new_decoder(p.f, T, 3), *y = be->decode.new_decoder(p.f, T, 3);
    cr_assert(a && x && y, "%s", phax_error());
    run_tokens(be, x, tok, T, a, V);
    const int32_t bad[] = {-1, V, V + 1000, INT32_MIN};
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < 4; i++) {
            for (int j = 0; j < V; j++) b[j] = 7.0f;
            cr_assert(be->decode.step(y, bad[i], b) == PHAX_ERR, "token %d accepted", (int)bad[i]);
            cr_assert(strstr(phax_error(), "outside"), "message: %s", phax_error());
            for (int j = 0; j < V; j++) cr_assert(b[j] == 7.0f, "logits written for a bad token");
            cr_assert(be->decode.pos(y) == t);
        }
        cr_assert(be->decode.step(y, tok[t], b) == PHAX_OK);
        cr_assert(!memcmp(b, a + (size_t)t * V, V * sizeof(float)), "step %d", t);
    }
    cr_assert(lintact(b, V));
    be->decode.free_decoder(x), be->decode.free_decoder(y);
    free(a), lfree(b);
    pair_free(&p);
}

H_TEST(decode, bad_arguments) {
    phax_rng rng = tu_rng("fcpu_decode.bad_arguments");
    phax_model_cfg c = small_cfg(PHAX_FAMILY_PHA);
    pair p;
    pair_new(be, &p, &c, &rng);
    cr_assert(!be->decode.new_decoder(p.f, 0, -1));
    cr_assert(strstr(phax_error(), "max_len"), "%s", phax_error());
    cr_assert(!be->decode.new_decoder(p.f, 8, -2));
    cr_assert(strstr(phax_error(), "window"), "%s", phax_error());
    cr_assert(!be->decode.new_decoder(NULL, 8, -1));
    be->decode.free_decoder(NULL);  // no-op
    pair_free(&p);
}

// ---------------------------------------------------------------------------
// Prefill (fcpu_decoder_prefill): a prompt of n tokens fed in passes of `chunk`
// tokens, then the rest of the sequence stepped one token at a time. The prefill's
// logits (of token n − 1) and every later step's must match ref at those positions
// within the same tol_t as a step (the passes round differently — sgemm instead of
// sgemv — but evaluate the same function in float32 with the same reduction
// lengths, so the same bound holds), and the prefill's logits must match the
// per-token decoder's at the same position within tol_t. The later steps check the
// handed-over state: a KV cache / ring slot, GSS z or mLSTM (C, n, m) left wrong by
// a pass shows up there; fcpu_decoder_prefill_all's rows are checked the same
// way. n covers one token, chunk boundaries inside the prompt
// and at its end, and the whole sequence.

static void prefill_vs_ref(const h_backend *be, const char *label, const phax_model_cfg *cfg, int T, int window, int chunk) {
    phax_rng rng = tu_rng(label);
    h_verbose(0);  // hundreds of judged rows per case: failures only (the summary line below)
    pair p;
    pair_new(be, &p, cfg, &rng);
    const int V = p.r.cfg.vocab_size;
    int32_t *tok = malloc((size_t)T * sizeof *tok);
    double *ref = malloc((size_t)T * V * sizeof *ref);
    float *stepped = malloc((size_t)T * V * sizeof *stepped);
    cr_assert(tok && ref && stepped);
    random_tokens(tok, T, V, &rng);
    cr_assert(ref_model_forward(&p.r, tok, NULL, 1, T, window, ref, NULL) == PHAX_OK, "%s",
              phax_error());
    const double tol_chain = TOL_FACTOR * U32 * chain_len(&p.r.cfg, T, max_cos_scale(&p.r));
    double *sens = ref_sensitivity(&p.r, tok, T, window, ref, &rng);
    void *one = be->decode.new_decoder(p.f, T, window);
    cr_assert(one, "%s", phax_error());
    for (int t = 0; t < T; t++)
        cr_assert(be->decode.step(one, tok[t], stepped + (size_t)t * V) == PHAX_OK);
    void *dc = be->decode.new_chunked(p.f, T, window, chunk);
    cr_assert(dc, "%s", phax_error());
    float *lg = lbuf(V);
    const int ns[] = {1, chunk, chunk + 1, 2 * chunk, 2 * chunk + 1, T - 1, T};
    double worst = 0;
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
        const int n = ns[k];
        if (n < 1 || n > T) continue;
        be->decode.reset(dc);
        lpoison(lg, V);
        cr_assert(be->decode.prefill(dc, tok, n, lg) == PHAX_OK, "[%s] n %d: %s", label, n,
                  phax_error());
        cr_assert(lintact(lg, V) && be->decode.pos(dc) == n, "[%s] n %d", label, n);
        double tol = tol_chain + SENS_FACTOR * sens[n - 1];
        double err = h_relerr(H_F(lg), ref + (size_t)(n - 1) * V, H_ZERO, V);
        double e1 = 0, n1 = 0;  // against the per-token decoder, relative to ref's norm
        for (int v = 0; v < V; v++) {
            const double a = (double)lg[v] - stepped[(size_t)(n - 1) * V + v];
            e1 += a * a, n1 += ref[(size_t)(n - 1) * V + v] * ref[(size_t)(n - 1) * V + v];
        }
        e1 = sqrt(e1 / n1);
        char what[64];
        snprintf(what, sizeof what, "chunk %d prefill %d", chunk, n);
        cr_assert(step_ok(label, what, lg, ref + (size_t)(n - 1) * V, V, tol_chain, sens[n - 1]),
                  "[%s] chunk %d, prefill of %d: err %.3e > tol %.3e", label, chunk, n,
                  err, tol);
        cr_assert(e1 <= tol, "[%s] chunk %d, prefill of %d: %.3e from the stepped logits > tol %.3e",
                  label, chunk, n, e1, tol);
        worst = fmax(worst, fmax(err, e1) / tol);
        for (int t = n; t < T; t++) {  // the handed-over state, step by step
            cr_assert(be->decode.step(dc, tok[t], lg) == PHAX_OK);
            tol = tol_chain + SENS_FACTOR * sens[t];
            err = h_relerr(H_F(lg), ref + (size_t)t * V, H_ZERO, V);
            snprintf(what, sizeof what, "chunk %d prefill %d step %d", chunk, n, t);
            cr_assert(step_ok(label, what, lg, ref + (size_t)t * V, V, tol_chain, sens[t]),
                      "[%s] chunk %d, step %d after a prefill of %d: err %.3e > tol %.3e",
                      label, chunk, t, n, err, tol);
            worst = fmax(worst, err / tol);
        }
    }
    // Every token's logits in one call (fcpu_decoder_prefill_all): each row against ref.
    be->decode.reset(dc);
    float *all = malloc((size_t)T * V * sizeof *all);
    cr_assert(all && be->decode.prefill_all(dc, tok, T, all) == PHAX_OK, "%s", phax_error());
    for (int t = 0; t < T; t++) {
        const double tol = tol_chain + SENS_FACTOR * sens[t];
        const double err = h_relerr(H_F(all + (size_t)t * V), ref + (size_t)t * V, H_ZERO, V);
        char what[64];
        snprintf(what, sizeof what, "chunk %d prefill_all row %d", chunk, t);
        cr_assert(step_ok(label, what, all + (size_t)t * V, ref + (size_t)t * V, V, tol_chain, sens[t]),
                  "[%s] chunk %d, prefill_all row %d: err %.3e > tol %.3e", label, chunk,
                  t, err, tol);
        worst = fmax(worst, err / tol);
    }
    free(all);
    printf("[%s] T=%d window=%d chunk=%d: worst err/tol %.3e\n", label, T, window, chunk, worst);
    be->decode.free_decoder(dc), be->decode.free_decoder(one);
    lfree(lg);
    free(tok), free(ref), free(stepped), free(sens);
    pair_free(&p);
}

// Chunks of 1 (a pass is a step), 4 (wraps a window 3 inside a pass), 7 and T.
static void prefill_chunks(const h_backend *be, const char *label, const phax_model_cfg *cfg, int T, int window) {
    const int chunks[] = {1, 4, 7, T};
    char name[128];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s.c%d", label, chunks[i]);
        prefill_vs_ref(be, name, cfg, T, window, chunks[i]);
    }
}

H_TEST(prefill, pha_switches) {
    const char *names[] = {"pha", "no_gss", "no_attn", "no_ffn", "separate_mix", "freeze_mix",
                           "window_3", "window_1", "untied_gqa1_dh10"};
    for (int i = 0; i < 9; i++) {
        phax_model_cfg c = small_cfg(PHAX_FAMILY_PHA);
        if (i == 1) c.use_gss = 0;
        if (i == 2) c.use_attn = 0;
        if (i == 3) c.use_ffn = 0;
        if (i == 4) c.ffn_separate_mix = 1;
        if (i == 5) c.freeze_mix = 1, c.ffn_separate_mix = 1;
        if (i == 6) c.attn_window = 3;
        if (i == 7) c.attn_window = 1;
        if (i == 8) c.tie_embeddings = 0, c.n_kv_heads = 2, c.head_dim = 10, c.n_layers = 3;
        char label[96];
        snprintf(label, sizeof label, "fcpu_prefill.%s", names[i]);
        prefill_chunks(be, label, &c, 23, -1);
    }
}

H_TEST(prefill, transformer_serial) {
    phax_model_cfg t = small_cfg(PHAX_FAMILY_TRANSFORMER);
    prefill_chunks(be, "fcpu_prefill.transformer", &t, 23, -1);
    t.score_cosine = 0, t.attn_window = 5;
    prefill_chunks(be, "fcpu_prefill.transformer_dot_window_5", &t, 23, -1);
    phax_model_cfg s = small_cfg(PHAX_FAMILY_SERIAL);
    s.attn_window = 3;
    prefill_chunks(be, "fcpu_prefill.serial_window_3", &s, 23, -1);
}

H_TEST(prefill, swax_family) {
    phax_model_cfg c = swax_cfg(PHAX_FAMILY_SWAX);
    c.n_layers = 3, c.mlstm_first = 1;
    prefill_chunks(be, "fcpu_prefill.swax_mlstm_first", &c, 23, 3);
    c.mlstm_first = 0;
    prefill_chunks(be, "fcpu_prefill.swax_swa_first", &c, 23, 3);
    phax_model_cfg m = swax_cfg(PHAX_FAMILY_MLSTM);
    prefill_chunks(be, "fcpu_prefill.mlstm", &m, 23, -1);
    phax_model_cfg f = swax_cfg(PHAX_FAMILY_SWA_FULL);
    f.n_layers = 3;
    prefill_chunks(be, "fcpu_prefill.swa_full", &f, 23, 3);
    phax_model_cfg s = swax_cfg(PHAX_FAMILY_SWA);
    const int T = 23, windows[] = {1, 3, T, T + 4, 0};
    for (int i = 0; i < 5; i++) {
        char label[96];
        snprintf(label, sizeof label, "fcpu_prefill.swa_w%d", windows[i]);
        prefill_chunks(be, label, &s, T, windows[i]);
    }
}

// swax_gdn in prefill chunks (its convolution's ring across chunk edges, and within a pass on
// fast/cuda, where gdn_scan_k walks the pass's rows).
H_TEST(prefill, swax_gdn) {
    phax_model_cfg g = swax_cfg(PHAX_FAMILY_SWAX_GDN);
    g.n_layers = 3;
    prefill_chunks(be, "fcpu_prefill.swax_gdn", &g, 23, 3);
}

// A long ring: window 3 wrapping ~15 times inside passes of 16 (T = 47, odd).
H_TEST(prefill, ring_wraps_in_a_pass) {
    phax_model_cfg s = swax_cfg(PHAX_FAMILY_SWAX);
    s.mlstm_first = 0;
    prefill_vs_ref(be, "fcpu_prefill.ring_wraps_in_a_pass", &s, 47, 3, 16);
}

// Prefill in several calls, then steps: the same state as one call (bit for bit —
// the same passes when each call ends on a chunk boundary), and prefill of one
// token with a chunk of 1 is a step, bit for bit.
H_TEST(prefill, calls_compose) {
    phax_rng rng = tu_rng("fcpu_prefill.calls_compose");
    phax_model_cfg c = small_cfg(PHAX_FAMILY_PHA);
    c.attn_window = 3;
    pair p;
    pair_new(be, &p, &c, &rng);
    const int T = 21, V = c.vocab_size;
    int32_t tok[21];
    random_tokens(tok, T, V, &rng);
    void *a = be->decode.new_chunked(p.f, T, -1, 5);
    void *b = be->decode.new_chunked(p.f, T, -1, 5);
    void *s = be->decode.new_chunked(p.f, T, -1, 1), *u = be->decode.new_decoder(p.f, T, -1);
    cr_assert(a && b && s && u, "%s", phax_error());
    float *la = lbuf(V), *lb = lbuf(V);
    cr_assert(be->decode.prefill(a, tok, 15, la) == PHAX_OK);
    cr_assert(be->decode.prefill(b, tok, 5, NULL) == PHAX_OK);
    cr_assert(be->decode.prefill(b, tok + 5, 0, NULL) == PHAX_OK);
    cr_assert(be->decode.prefill(b, tok + 5, 10, lb) == PHAX_OK);
    cr_assert(!memcmp(la, lb, V * sizeof(float)) && be->decode.pos(b) == 15);
    for (int t = 15; t < T; t++) {
        cr_assert(be->decode.step(a, tok[t], la) == PHAX_OK);
        cr_assert(be->decode.step(b, tok[t], lb) == PHAX_OK);
        cr_assert(!memcmp(la, lb, V * sizeof(float)), "step %d", t);
    }
    for (int t = 0; t < T; t++) {
        cr_assert(be->decode.prefill(s, tok + t, 1, la) == PHAX_OK);
        cr_assert(be->decode.step(u, tok[t], lb) == PHAX_OK);
        cr_assert(!memcmp(la, lb, V * sizeof(float)), "prefill of 1 at %d is not a step", t);
    }
    cr_assert(lintact(la, V) && lintact(lb, V));
    be->decode.free_decoder(a), be->decode.free_decoder(b), be->decode.free_decoder(s), be->decode.free_decoder(u);
    lfree(la), lfree(lb);
    pair_free(&p);
}

// Bad input consumes nothing: a bad token anywhere in the prompt, a prompt longer
// than a full-attention decoder's room, logits of no tokens, a chunk out of range.
H_TEST(prefill, bad_input) {
    phax_rng rng = tu_rng("fcpu_prefill.bad_input");
    phax_model_cfg c = small_cfg(PHAX_FAMILY_TRANSFORMER);
    pair p;
    pair_new(be, &p, &c, &rng);
    const int V = c.vocab_size;
    int32_t tok[12];
    random_tokens(tok, 12, V, &rng);
    void *dc = be->decode.new_chunked(p.f, 10, -1, 4);
    cr_assert(dc, "%s", phax_error());
    float *lg = lbuf(V);
    cr_assert(be->decode.prefill(dc, tok, 3, NULL) == PHAX_OK);
    tok[9] = V;
    cr_assert(be->decode.prefill(dc, tok, 10, lg) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "outside") && be->decode.pos(dc) == 3, "%s", phax_error());
    tok[9] = 0;
    cr_assert(be->decode.prefill(dc, tok, 8, lg) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "max_len") && be->decode.pos(dc) == 3, "%s", phax_error());
    cr_assert(be->decode.prefill(dc, tok, 0, lg) == PHAX_ERR && be->decode.pos(dc) == 3);
    cr_assert(be->decode.prefill(dc, tok, -1, NULL) == PHAX_ERR && be->decode.pos(dc) == 3);
    cr_assert(be->decode.prefill(dc, tok, 7, lg) == PHAX_OK && be->decode.pos(dc) == 10);
    cr_assert(lintact(lg, V));
    cr_assert(!be->decode.new_chunked(p.f, 10, -1, 0));
    cr_assert(strstr(phax_error(), "chunk"), "%s", phax_error());
    cr_assert(!be->decode.new_chunked(p.f, 10, -1, be->decode.chunk_max + 1));
    be->decode.free_decoder(dc);
    lfree(lg);
    pair_free(&p);
}
