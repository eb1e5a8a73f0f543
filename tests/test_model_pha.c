// ref models of the PHA family (pha, transformer, serial): whole-model
// finite-difference gradients, a forward assembled by hand from the ops, the
// frozen and two-branch mix, the initial loss, determinism and bad input.
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "phax/ref_model.h"
#include "phax/safetensors.h"
#include "testutil.h"

// Tiny sizes: odd T, GQA group 2, head_dim 6 (even, not a power of two), and
// widths d 12, F 10, H_s 3, N 5, SwiGLU 16, aux 6, V 11 mostly distinct, so that
// a transposed shape does not pass unnoticed.
enum { TB = 2, TT = 7 };

static phax_model_cfg tiny_cfg(phax_family f) {
    phax_model_cfg c = phax_model_cfg_default(f);
    c.vocab_size = 11, c.d_model = 12, c.n_layers = 2;
    c.n_heads = 2, c.n_kv_heads = 1, c.head_dim = 6;
    c.gss_expand = 10, c.gss_hidden = 3, c.gss_state = 5;
    c.ffn_hidden = 16, c.ffn_aux_hidden = 6;
    return c;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

// Moves every parameter off its symmetric initial value: mix logits ≠ 0, norm
// gains ≠ 1, LayerNorm bias ≠ 0, cosine log-scales spread in [log 10 − 1, log 10 + 1]
// (below the log 100 clamp, where ℓ has a derivative), an embedding large
// enough (std 0.4) that the tied logits are O(1), weights rescaled by ~30%.
static void perturb(ref_model *m, phax_rng *r) {
    for (int i = 0; i < m->layout.n; i++) {
        const phax_param_info *t = &m->layout.p[i];
        double *x = m->params + t->offset;
        const char *nm = t->name;
        if (!strcmp(nm, "embed.weight") || !strcmp(nm, "lm_head.weight")) {
            tu_fill_normal(x, t->numel, r, 0.4);
        } else if (ends_with(nm, ".mix.p")) {
            tu_fill_normal(x, t->numel, r, 1.0);
        } else if (ends_with(nm, ".attn.logscale")) {
            for (size_t j = 0; j < t->numel; j++) x[j] = log(10.0) + phax_rng_uniform_range(r, -1, 1);
        } else if (ends_with(nm, ".ln.bias")) {
            tu_fill_normal(x, t->numel, r, 0.3);
        } else if (t->ndim == 1 && ends_with(nm, ".weight")) {  // every norm gain
            for (size_t j = 0; j < t->numel; j++) x[j] = 1.0 + phax_rng_uniform_range(r, -0.3, 0.3);
        } else {  // linear weights and the GSS Λ, C, D: add 30% of the tensor's RMS as noise
            double rms = sqrt(tu_dot(x, x, t->numel) / (double)t->numel);
            for (size_t j = 0; j < t->numel; j++) x[j] += 0.3 * rms * phax_rng_normal(r);
        }
    }
}

// Random tokens and random targets, one of them ignored (−1).
static void random_data(int32_t *tok, int32_t *tgt, int n, int V, phax_rng *r) {
    for (int i = 0; i < n; i++) {
        tok[i] = (int32_t)phax_rng_below(r, (uint64_t)V);
        tgt[i] = (int32_t)phax_rng_below(r, (uint64_t)V);
    }
    tgt[phax_rng_below(r, (uint64_t)n)] = -1;
}

static ref_model new_model(const phax_model_cfg *c, uint64_t seed) {
    ref_model m;
    cr_assert(ref_model_new(&m, c, seed) == PHAX_OK, "%s", phax_error());
    return m;
}

// ---------------------------------------------------------------------------------
// Whole-model gradient checks (float64).
//
// Derivative estimate: the five-point stencil
//   D(h) = [8·(L(θ + h e) − L(θ − h e)) − (L(θ + 2h e) − L(θ − 2h e))] / 12h,
// whose truncation error is h⁴/30 · L⁽⁵⁾ instead of the central difference's
// h²/6 · L‴. Why not central differences (tu_gradcheck): these tiny models can
// be sharply curved — the GSS LayerNorm normalises only H_s = 3 channels, and when
// they nearly coincide its scale 1/√(var + 1e-5) approaches ~300. On one serial
// seed (PHAX_TEST_SEED=1016455) the directional central difference was off by
// exactly an h² law (fd − ⟨g,e⟩ = −1.72e-3, −1.72e-5, −2e-7 at h = 1e-5, 1e-6, 1e-7:
// L‴ ≈ 1e8), with gss.wu at err/tol 0.8 — a truncation error the size of the
// tolerance's formula term, so the check would fail on some seeds for no bug.
// With the stencil the truncation is O(h⁴) (that seed: 0.8 → 1e-4).
//
// Tolerance, the rule of docs/spec.md §7 for the stencil:
//   tol = 1e-6·(gradient scale) + 1.5e-15·|L| / h
//   * 1e-6·scale: a wrong formula is off by O(1) of the gradient's scale; float64
//     rounding and truncation are many orders below 1e-6 of it.
//   * 1.5e-15·|L|/h: rounding noise of the quotient. Each loss evaluation carries
//     ~10 ε·|L| of rounding (ε = 2.2e-16; the mean cross-entropy is a sum of positive
//     terms, so Σ|loss terms| = |L|); the stencil weighs four evaluations by
//     (8 + 8 + 1 + 1)/12 = 1.5 times the central difference's 2/2.
// NaN anywhere fails (comparisons are written err <= tol).
//
// (a) Directional: e ~ N(0, 1) over ALL parameters at once, h = 1e-6, against ⟨g, e⟩;
//     scale = Σ_i |g_i e_i| (⟨g, e⟩ is a sum of terms of that total size).
// (b) Per element: up to 48 sampled elements of every tensor (all if fewer),
//     e = the unit vector, h = 1e-6·max(1, |θ_i|), scale = max |grad| of the tensor.
// Both prefill the gradient buffer with a random prior and subtract it after the
// backward, so a backward that overwrites instead of adding fails.

static double model_loss(const ref_model *m, const int32_t *tok, const int32_t *tgt, int B, int T) {
    double L = NAN;
    if (ref_model_forward(m, tok, tgt, B, T, -1, NULL, &L)) return NAN;
    return L;
}

// g: (numel) = ∂L/∂θ as ADDED by the backward on top of a random prior; returns L.
static double model_grad(double *g, ref_model *m, const int32_t *tok, const int32_t *tgt, int B,
                         int T, phax_rng *r) {
    size_t N = m->layout.numel;
    double *prior = tu_buf(N), L = NAN;
    tu_fill_normal(prior, N, r, 1.0);
    memcpy(m->grads, prior, N * sizeof(double));
    cr_assert(ref_model_backward(m, tok, tgt, B, T, -1, &L) == PHAX_OK, "%s", phax_error());
    for (size_t i = 0; i < N; i++) g[i] = m->grads[i] - prior[i];
    cr_assert(tu_intact(prior));
    tu_free(prior);
    return L;
}

// Five-point derivative of the loss along e at step h (θ restored exactly after).
static double stencil(ref_model *m, const double *e, double h, const int32_t *tok,
                      const int32_t *tgt, int B, int T) {
    size_t N = m->layout.numel;
    double *theta = tu_copy(m->params, N), Lv[4];
    const double steps[4] = {h, -h, 2 * h, -2 * h};
    for (int k = 0; k < 4; k++) {
        for (size_t i = 0; i < N; i++) m->params[i] = theta[i] + steps[k] * e[i];
        Lv[k] = model_loss(m, tok, tgt, B, T);
    }
    memcpy(m->params, theta, N * sizeof(double));
    tu_free(theta);
    return (8 * (Lv[0] - Lv[1]) - (Lv[2] - Lv[3])) / (12 * h);
}

// The same for one element i (step h): only that entry is perturbed.
static double stencil1(ref_model *m, size_t i, double h, const int32_t *tok, const int32_t *tgt,
                       int B, int T) {
    double x0 = m->params[i], Lv[4];
    const double steps[4] = {h, -h, 2 * h, -2 * h};
    for (int k = 0; k < 4; k++) {
        m->params[i] = x0 + steps[k];
        Lv[k] = model_loss(m, tok, tgt, B, T);
    }
    m->params[i] = x0;
    return (8 * (Lv[0] - Lv[1]) - (Lv[2] - Lv[3])) / (12 * h);
}

// (a) Returns err/tol.
static double directional_check(const char *label, ref_model *m, const int32_t *tok,
                                const int32_t *tgt, int B, int T, phax_rng *r) {
    size_t N = m->layout.numel;
    double *e = tu_buf(N), *g = tu_buf(N);
    tu_fill_normal(e, N, r, 1.0);
    double L0 = model_grad(g, m, tok, tgt, B, T, r);
    // The forward alone gives the backward's loss, bit for bit.
    double Lf = model_loss(m, tok, tgt, B, T);
    cr_assert(Lf == L0, "[%s] forward loss %.17g vs backward's %.17g", label, Lf, L0);
    double an = 0, scale = 0;
    for (size_t i = 0; i < N; i++) an += g[i] * e[i], scale += fabs(g[i] * e[i]);
    const double h = 1e-6;
    double fd = stencil(m, e, h, tok, tgt, B, T);
    double tol = 1e-6 * scale + 1.5e-15 * fabs(L0) / h;
    double ratio = fabs(fd - an) / tol;
    printf("[%s] directional: loss %.6f  fd %.12e  <g,e> %.12e  sum|g e| %.3e  err/tol %.3e\n",
           label, L0, fd, an, scale, ratio);
    cr_assert(tu_intact(e) && tu_intact(g));
    tu_free(e), tu_free(g);
    return ratio;
}

// (b) Returns the worst err/tol over all checked elements (prints one line per tensor).
static double elementwise_check(const char *label, ref_model *m, const int32_t *tok,
                                const int32_t *tgt, int B, int T, phax_rng *r) {
    size_t N = m->layout.numel;
    double *g = tu_buf(N);
    double L0 = model_grad(g, m, tok, tgt, B, T, r), worst_all = 0;
    for (int j = 0; j < m->layout.n; j++) {
        const phax_param_info *t = &m->layout.p[j];
        double gscale = tu_max_abs(g + t->offset, t->numel);
        size_t count = t->numel < 48 ? t->numel : 48;
        double worst = 0, wfd = 0, wan = 0, wtol = 0;
        size_t wi = 0;
        for (size_t s = 0; s < count; s++) {
            size_t i = t->offset + (t->numel <= 48 ? s : (size_t)phax_rng_below(r, t->numel));
            double h = 1e-6 * fmax(1.0, fabs(m->params[i]));
            double fd = stencil1(m, i, h, tok, tgt, B, T);
            double tol = fmax(1e-6 * gscale + 1.5e-15 * fabs(L0) / h, 1e-300);
            double ratio = fabs(fd - g[i]) / tol;
            if (!(ratio <= worst)) worst = ratio, wi = i - t->offset, wfd = fd, wan = g[i], wtol = tol;
        }
        printf("[%s] %-28s n=%-4zu checked=%-3zu |grad|max=%.3e worst err/tol=%.3e\n", label, t->name,
               t->numel, count, gscale, worst);
        if (!(worst <= 1.0))
            printf("[%s] %s[%zu]: finite difference %.12e vs backward %.12e (tol %.3e)\n", label, t->name,
                   wi, wfd, wan, wtol);
        if (!(worst <= worst_all)) worst_all = worst;
    }
    cr_assert(tu_intact(g));
    tu_free(g);
    return worst_all;
}

static void grad_case(const char *label, phax_model_cfg c) {
    phax_rng r = tu_rng(label);
    ref_model m = new_model(&c, phax_rng_u64(&r));
    perturb(&m, &r);
    int32_t tok[TB * TT], tgt[TB * TT];
    random_data(tok, tgt, TB * TT, m.cfg.vocab_size, &r);
    double ra = directional_check(label, &m, tok, tgt, TB, TT, &r);
    double rb = elementwise_check(label, &m, tok, tgt, TB, TT, &r);
    printf("[%s] worst err/tol: directional %.3e, elementwise %.3e\n", label, ra, rb);
    fflush(stdout);
    cr_assert(ra <= 1.0, "[%s] directional derivative err/tol = %g", label, ra);
    cr_assert(rb <= 1.0, "[%s] elementwise err/tol = %g", label, rb);
    ref_model_free(&m);
}

// PHA, default switches: cosine scores, three branches (GSS, attention, joined FFN).
Test(model_pha, grad_pha) { grad_case("model_pha/grad_pha", tiny_cfg(PHAX_FAMILY_PHA)); }

// PHA with main and aux FFN as two separately normalised branches (nb = 4), MHA (group 1).
Test(model_pha, grad_pha_separate_mix) {
    phax_model_cfg c = tiny_cfg(PHAX_FAMILY_PHA);
    c.ffn_separate_mix = 1, c.n_kv_heads = 2;
    grad_case("model_pha/grad_pha_separate_mix", c);
}

// PHA with the mix frozen at equal weights (no mix.p).
Test(model_pha, grad_pha_freeze_mix) {
    phax_model_cfg c = tiny_cfg(PHAX_FAMILY_PHA);
    c.freeze_mix = 1;
    grad_case("model_pha/grad_pha_freeze_mix", c);
}

// Ablation: no GSS branch (mix over attention and FFN), three layers (α = 6^{1/4}).
Test(model_pha, grad_pha_no_gss) {
    phax_model_cfg c = tiny_cfg(PHAX_FAMILY_PHA);
    c.use_gss = 0, c.n_layers = 3;
    grad_case("model_pha/grad_pha_no_gss", c);
}

// Dot scores and a sliding window 3 < T, untied output head.
Test(model_pha, grad_pha_dot_window_untied) {
    phax_model_cfg c = tiny_cfg(PHAX_FAMILY_PHA);
    c.score_cosine = 0, c.attn_window = 3, c.tie_embeddings = 0;
    grad_case("model_pha/grad_pha_dot_window_untied", c);
}

Test(model_pha, grad_transformer) {
    grad_case("model_pha/grad_transformer", tiny_cfg(PHAX_FAMILY_TRANSFORMER));
}

// Transformer with MHA (group 1), untied head, dot scores in a window of 3.
Test(model_pha, grad_transformer_untied_window) {
    phax_model_cfg c = tiny_cfg(PHAX_FAMILY_TRANSFORMER);
    c.n_kv_heads = 2, c.tie_embeddings = 0, c.score_cosine = 0, c.attn_window = 3;
    grad_case("model_pha/grad_transformer_untied_window", c);
}

Test(model_pha, grad_serial) { grad_case("model_pha/grad_serial", tiny_cfg(PHAX_FAMILY_SERIAL)); }

// ---------------------------------------------------------------------------------
// The forward assembled by hand from the ops, following docs/spec.md §3.1–3.2
// directly (names from the layout). It runs the same ops on the same inputs in
// the same order as the model, so the logits must agree bit for bit: any
// difference is a wiring error (a branch, norm or weight swapped, a wrong α).
static const double *P(const ref_model *m, const char *fmt, int l) {
    char name[96];
    snprintf(name, sizeof name, fmt, l);
    const double *p = ref_model_param(m, name);
    cr_assert(p, "no parameter %s", name);
    return p;
}

// y = Wo · attention(x Wqᵀ, x Wkᵀ, x Wvᵀ), RoPE on, the config's score and window.
static void h_attn(double *y, const double *x, const ref_model *m, int l, int B, int T) {
    const phax_model_cfg *c = &m->cfg;
    size_t n = (size_t)B * T;
    int d = c->d_model, qd = c->n_heads * c->head_dim, kd = c->n_kv_heads * c->head_dim;
    double *q = tu_buf(n * qd), *k = tu_buf(n * kd), *v = tu_buf(n * kd), *o = tu_buf(n * qd);
    ref_linear_fwd(q, x, P(m, "blocks.%d.attn.wq.weight", l), NULL, n, d, qd);
    ref_linear_fwd(k, x, P(m, "blocks.%d.attn.wk.weight", l), NULL, n, d, kd);
    ref_linear_fwd(v, x, P(m, "blocks.%d.attn.wv.weight", l), NULL, n, d, kd);
    phax_attn_cfg a = phax_attn_cfg_default(c->n_heads, c->n_kv_heads, c->head_dim);
    a.score = c->score_cosine ? PHAX_SCORE_COSINE : PHAX_SCORE_DOT;
    a.window = c->attn_window, a.rope = 1, a.rope_base = c->rope_base;
    const double *ls = c->score_cosine ? P(m, "blocks.%d.attn.logscale", l) : NULL;
    cr_assert(ref_attention_fwd(o, q, k, v, ls, B, T, &a) == PHAX_OK);
    ref_linear_fwd(y, o, P(m, "blocks.%d.attn.wo.weight", l), NULL, n, qd, d);
    tu_free(q), tu_free(k), tu_free(v), tu_free(o);
}

// o = Wo((Wc ssm_conv(LN(GELU(Wu x)), K(Λ, C), D)) ⊙ GELU(Wv x)).
static void h_gss(double *y, const double *x, const ref_model *m, int l, int B, int T) {
    const phax_model_cfg *c = &m->cfg;
    size_t n = (size_t)B * T;
    int d = c->d_model, F = c->gss_expand, H = c->gss_hidden, N = c->gss_state;
    double *xv = tu_buf(n * F), *v = tu_buf(n * F), *xu = tu_buf(n * H), *u = tu_buf(n * H);
    double *ub = tu_buf(n * H), *K = tu_buf((size_t)H * T), *ys = tu_buf(n * H);
    double *yc = tu_buf(n * F), *gt = tu_buf(n * F);
    ref_linear_fwd(xv, x, P(m, "blocks.%d.gss.wv.weight", l), NULL, n, d, F);
    ref_gelu_fwd(v, xv, n * F);
    ref_linear_fwd(xu, x, P(m, "blocks.%d.gss.wu.weight", l), NULL, n, d, H);
    ref_gelu_fwd(u, xu, n * H);
    ref_layernorm_fwd(ub, u, P(m, "blocks.%d.gss.ln.weight", l), P(m, "blocks.%d.gss.ln.bias", l), n,
                      H, PHAX_LAYERNORM_EPS);
    ref_dss_kernel_fwd(K, P(m, "blocks.%d.gss.lambda_re", l), P(m, "blocks.%d.gss.lambda_im", l),
                       P(m, "blocks.%d.gss.c_re", l), P(m, "blocks.%d.gss.c_im", l), H, N, T);
    ref_ssm_conv_fwd(ys, ub, K, P(m, "blocks.%d.gss.d", l), B, T, H);
    ref_linear_fwd(yc, ys, P(m, "blocks.%d.gss.wc.weight", l), NULL, n, H, F);
    for (size_t i = 0; i < n * F; i++) gt[i] = yc[i] * v[i];
    ref_linear_fwd(y, gt, P(m, "blocks.%d.gss.wo.weight", l), NULL, n, F, d);
    double *bufs[] = {xv, v, xu, u, ub, K, ys, yc, gt};
    for (int i = 0; i < 9; i++) tu_free(bufs[i]);
}

static void h_swiglu(double *y, const double *x, const ref_model *m, int l, size_t n) {
    cr_assert(ref_swiglu_fwd(y, x, P(m, "blocks.%d.ffn.w_gate.weight", l), P(m, "blocks.%d.ffn.w_up.weight", l),
                             P(m, "blocks.%d.ffn.w_down.weight", l), n, m->cfg.d_model,
                             m->cfg.ffn_hidden) == PHAX_OK);
}

static void h_aux(double *y, const double *x, const ref_model *m, int l, size_t n) {
    int d = m->cfg.d_model, Ha = m->cfg.ffn_aux_hidden;
    double *a = tu_buf(n * Ha), *g = tu_buf(n * Ha);
    ref_linear_fwd(a, x, P(m, "blocks.%d.ffn_aux.w3.weight", l), NULL, n, d, Ha);
    ref_gelu_fwd(g, a, n * Ha);
    ref_linear_fwd(y, g, P(m, "blocks.%d.ffn_aux.w4.weight", l), NULL, n, Ha, d);
    tu_free(a), tu_free(g);
}

// y = SwiGLU(x) + aux(x)
static void h_dual(double *y, const double *x, const ref_model *m, int l, size_t n) {
    size_t nd = n * (size_t)m->cfg.d_model;
    double *ym = tu_buf(nd), *ya = tu_buf(nd);
    h_swiglu(ym, x, m, l, n);
    h_aux(ya, x, m, l, n);
    for (size_t i = 0; i < nd; i++) y[i] = ym[i] + ya[i];
    tu_free(ym), tu_free(ya);
}

static void h_head(double *logits, const double *x, const ref_model *m, size_t n) {
    const char *w = m->cfg.tie_embeddings ? "embed.weight" : "lm_head.weight";
    ref_linear_fwd(logits, x, ref_model_param(m, w), NULL, n, m->cfg.d_model, m->cfg.vocab_size);
}

// PHA by hand. alpha: the residual factor to use; w_fixed: mix weights to use
// instead of softplus(p)/Σ softplus(p) (NULL: from blocks.l.mix.p).
static void h_pha(double *logits, const ref_model *m, const int32_t *tok, int B, int T, double alpha,
                  const double *w_fixed) {
    const phax_model_cfg *c = &m->cfg;
    size_t n = (size_t)B * T, nd = n * (size_t)c->d_model;
    int d = c->d_model;
    double *e = tu_buf(nd), *x = tu_buf(nd), *z = tu_buf(nd), *br = tu_buf(4 * nd), *bn = tu_buf(4 * nd);
    cr_assert(ref_embedding_fwd(e, ref_model_param(m, "embed.weight"), tok, n, c->vocab_size, d) == PHAX_OK);
    ref_rmsnorm_fwd(x, e, ref_model_param(m, "norm_emb.weight"), n, d, PHAX_RMSNORM_EPS);
    for (int l = 0; l < c->n_layers; l++) {
        int nb = 0;
        const char *norms[4];
        if (c->use_gss) h_gss(br + nb * nd, x, m, l, B, T), norms[nb++] = "blocks.%d.norm_gss.weight";
        if (c->use_attn) h_attn(br + nb * nd, x, m, l, B, T), norms[nb++] = "blocks.%d.norm_attn.weight";
        if (c->use_ffn && c->ffn_separate_mix) {
            h_swiglu(br + nb * nd, x, m, l, n), norms[nb++] = "blocks.%d.norm_ffn.weight";
            h_aux(br + nb * nd, x, m, l, n), norms[nb++] = "blocks.%d.norm_ffn_aux.weight";
        } else if (c->use_ffn) {
            h_dual(br + nb * nd, x, m, l, n), norms[nb++] = "blocks.%d.norm_ffn.weight";
        }
        for (int i = 0; i < nb; i++)
            ref_rmsnorm_fwd(bn + i * nd, br + i * nd, P(m, norms[i], l), n, d, PHAX_RMSNORM_EPS);
        double w[4];
        if (w_fixed) memcpy(w, w_fixed, nb * sizeof(double));
        else ref_mix_weights(w, P(m, "blocks.%d.mix.p", l), nb);
        for (size_t k = 0; k < nd; k++) {
            double s = 0;
            for (int i = 0; i < nb; i++) s += w[i] * bn[i * nd + k];
            z[k] = alpha * x[k] + s;
        }
        ref_rmsnorm_fwd(x, z, P(m, "blocks.%d.norm_res.weight", l), n, d, PHAX_RMSNORM_EPS);
    }
    h_head(logits, x, m, n);
    double *bufs[] = {e, x, z, br, bn};
    for (int i = 0; i < 5; i++) {
        cr_assert(tu_intact(bufs[i]));
        tu_free(bufs[i]);
    }
}

// transformer / serial by hand: x = E[tok]; x += F(RMSNorm x) per sub-layer; final norm.
static void h_baseline(double *logits, const ref_model *m, const int32_t *tok, int B, int T) {
    const phax_model_cfg *c = &m->cfg;
    size_t n = (size_t)B * T, nd = n * (size_t)c->d_model;
    int d = c->d_model, serial = c->family == PHAX_FAMILY_SERIAL;
    double *x = tu_buf(nd), *h = tu_buf(nd), *f = tu_buf(nd);
    cr_assert(ref_embedding_fwd(x, ref_model_param(m, "embed.weight"), tok, n, c->vocab_size, d) == PHAX_OK);
    for (int l = 0; l < c->n_layers; l++) {
        if (serial) {
            ref_rmsnorm_fwd(h, x, P(m, "blocks.%d.norm_gss.weight", l), n, d, PHAX_RMSNORM_EPS);
            h_gss(f, h, m, l, B, T);
            for (size_t i = 0; i < nd; i++) x[i] = x[i] + f[i];
        }
        ref_rmsnorm_fwd(h, x, P(m, "blocks.%d.norm_attn.weight", l), n, d, PHAX_RMSNORM_EPS);
        h_attn(f, h, m, l, B, T);
        for (size_t i = 0; i < nd; i++) x[i] = x[i] + f[i];
        ref_rmsnorm_fwd(h, x, P(m, "blocks.%d.norm_ffn.weight", l), n, d, PHAX_RMSNORM_EPS);
        if (serial) h_dual(f, h, m, l, n);
        else h_swiglu(f, h, m, l, n);
        for (size_t i = 0; i < nd; i++) x[i] = x[i] + f[i];
    }
    ref_rmsnorm_fwd(h, x, ref_model_param(m, "norm_f.weight"), n, d, PHAX_RMSNORM_EPS);
    h_head(logits, h, m, n);
    tu_free(x), tu_free(h), tu_free(f);
}

// Model logits vs the hand assembly; returns the model's logits (tu_buf) for more checks.
static double *model_logits(const ref_model *m, const int32_t *tok, int B, int T) {
    double *lg = tu_buf((size_t)B * T * m->cfg.vocab_size);
    cr_assert(ref_model_forward(m, tok, NULL, B, T, -1, lg, NULL) == PHAX_OK, "%s", phax_error());
    cr_assert(tu_intact(lg) && tu_all_finite(lg, (size_t)B * T * m->cfg.vocab_size));
    return lg;
}

static void hand_case(const char *label, phax_model_cfg c, int B, int T) {
    phax_rng r = tu_rng(label);
    ref_model m = new_model(&c, phax_rng_u64(&r));
    perturb(&m, &r);
    size_t n = (size_t)B * T, nl = n * m.cfg.vocab_size;
    int32_t *tok = calloc(n, sizeof *tok), *tgt = calloc(n, sizeof *tgt);
    random_data(tok, tgt, (int)n, m.cfg.vocab_size, &r);
    double *lg = model_logits(&m, tok, B, T), *want = tu_buf(nl);
    if (c.family == PHAX_FAMILY_PHA) {
        double alpha = pow(2.0 * m.cfg.n_layers, 0.25);  // DeepNorm α = (2L)^{1/4}
        // A frozen mix has equal weights softplus(0)/Σ softplus(0) = 1/nb (to 1 ulp,
        // tests/test_mix.c); the hand version forms them from p = 0 explicitly.
        double w0[4], p0[4] = {0, 0, 0, 0};
        int nb = m.cfg.use_gss + m.cfg.use_attn + (m.cfg.use_ffn ? 1 + m.cfg.ffn_separate_mix : 0);
        ref_mix_weights(w0, p0, nb);
        const double *wf = m.cfg.freeze_mix ? w0 : NULL;
        h_pha(want, &m, tok, B, T, alpha, wf);
        // Same ops, same order: bit-identical.
        cr_assert(memcmp(lg, want, nl * sizeof(double)) == 0, "[%s] max |diff| %.3e", label,
                  tu_max_abs_diff(lg, want, nl));
        // α must matter: with α = 1 the hand assembly differs far beyond rounding.
        double *wrong = tu_buf(nl);
        h_pha(wrong, &m, tok, B, T, 1.0, wf);
        double d1 = tu_max_abs_diff(lg, wrong, nl);
        cr_assert(d1 > 1e-6 * tu_max_abs(lg, nl), "[%s] α = 1 gives the same logits (diff %.3e)", label, d1);
        tu_free(wrong);
    } else {
        h_baseline(want, &m, tok, B, T);
        cr_assert(memcmp(lg, want, nl * sizeof(double)) == 0, "[%s] max |diff| %.3e", label,
                  tu_max_abs_diff(lg, want, nl));
    }
    tu_free(lg), tu_free(want);
    free(tok), free(tgt);
    ref_model_free(&m);
}

// One layer: the single block by hand, α = 2^{1/4}.
Test(model_pha, hand_pha_1layer) {
    phax_model_cfg c = tiny_cfg(PHAX_FAMILY_PHA);
    c.n_layers = 1;
    hand_case("model_pha/hand_pha_1layer", c, 2, 7);
}

// Three layers (α = 6^{1/4}), four branches, dot scores in a window of 3, untied head.
Test(model_pha, hand_pha_3layer_separate) {
    phax_model_cfg c = tiny_cfg(PHAX_FAMILY_PHA);
    c.n_layers = 3, c.ffn_separate_mix = 1, c.score_cosine = 0, c.attn_window = 3, c.tie_embeddings = 0;
    hand_case("model_pha/hand_pha_3layer_separate", c, 2, 9);
}

// Ablations: only attention + FFN (nb = 2); only GSS + FFN; only attention (nb = 1).
Test(model_pha, hand_pha_ablations) {
    phax_model_cfg c = tiny_cfg(PHAX_FAMILY_PHA);
    c.use_gss = 0;
    hand_case("model_pha/hand_pha_ablations/attn_ffn", c, 2, 7);
    c = tiny_cfg(PHAX_FAMILY_PHA);
    c.use_attn = 0;
    hand_case("model_pha/hand_pha_ablations/gss_ffn", c, 1, 5);
    c = tiny_cfg(PHAX_FAMILY_PHA);
    c.use_gss = 0, c.use_ffn = 0;
    hand_case("model_pha/hand_pha_ablations/attn_only", c, 1, 6);
}

// Frozen mix: the hand assembly mixes with explicit equal weights.
Test(model_pha, hand_pha_freeze_mix) {
    phax_model_cfg c = tiny_cfg(PHAX_FAMILY_PHA);
    c.freeze_mix = 1;
    hand_case("model_pha/hand_pha_freeze_mix", c, 2, 7);
}

Test(model_pha, hand_transformer) {
    phax_model_cfg c = tiny_cfg(PHAX_FAMILY_TRANSFORMER);
    c.attn_window = 4;
    hand_case("model_pha/hand_transformer", c, 2, 7);
}

Test(model_pha, hand_serial) {
    phax_model_cfg c = tiny_cfg(PHAX_FAMILY_SERIAL);
    c.tie_embeddings = 0;
    hand_case("model_pha/hand_serial", c, 2, 7);
}

// ---------------------------------------------------------------------------------
// Copies every tensor of `from` into the same-named tensor of `to` (where it exists).
static void copy_by_name(ref_model *to, const ref_model *from) {
    for (int i = 0; i < from->layout.n; i++) {
        double *dst = ref_model_param(to, from->layout.p[i].name);
        if (dst) memcpy(dst, from->params + from->layout.p[i].offset, from->layout.p[i].numel * sizeof(double));
    }
}

// Attention + FFN only: mix.p has 2 entries. With p = (c, c), softplus(c)/(2·softplus(c))
// is exactly 1/2 in binary floating point (2s is exact, s/2s is exact), so the model
// equals the hand assembly with weights (1/2, 1/2) bit for bit, for any c.
// A frozen two-branch model uses the same weights: also bit-identical.
Test(model_pha, two_branch_mix) {
    phax_rng r = tu_rng("model_pha/two_branch_mix");
    phax_model_cfg c = tiny_cfg(PHAX_FAMILY_PHA);
    c.use_gss = 0;
    ref_model m = new_model(&c, phax_rng_u64(&r));
    perturb(&m, &r);
    for (int l = 0; l < c.n_layers; l++) {
        char name[64];
        snprintf(name, sizeof name, "blocks.%d.mix.p", l);
        int i = phax_layout_find(&m.layout, name);
        cr_assert(i >= 0 && m.layout.p[i].numel == 2, "%s must have 2 entries", name);
        double pc = 2.0 * phax_rng_normal(&r);
        m.params[m.layout.p[i].offset] = m.params[m.layout.p[i].offset + 1] = pc;
    }
    int32_t tok[TB * TT], tgt[TB * TT];
    random_data(tok, tgt, TB * TT, c.vocab_size, &r);
    size_t nl = (size_t)TB * TT * c.vocab_size;
    double *lg = model_logits(&m, tok, TB, TT), *want = tu_buf(nl);
    double half[2] = {0.5, 0.5};
    h_pha(want, &m, tok, TB, TT, pow(2.0 * c.n_layers, 0.25), half);
    cr_assert(memcmp(lg, want, nl * sizeof(double)) == 0, "max |diff| %.3e", tu_max_abs_diff(lg, want, nl));

    c.freeze_mix = 1;
    ref_model f = new_model(&c, 1);
    copy_by_name(&f, &m);
    double *lf = model_logits(&f, tok, TB, TT);
    cr_assert(memcmp(lf, want, nl * sizeof(double)) == 0, "frozen: max |diff| %.3e", tu_max_abs_diff(lf, want, nl));
    tu_free(lg), tu_free(want), tu_free(lf);
    ref_model_free(&m), ref_model_free(&f);
}

// freeze_mix is the mix at p = 0 without the parameter: a frozen model equals the
// same weights with mix.p = 0 bit for bit (the model runs the mix op with p = 0),
// loss and every shared gradient too; the frozen model has no mix.p tensor.
Test(model_pha, freeze_mix_equals_zero_p) {
    phax_rng r = tu_rng("model_pha/freeze_mix_equals_zero_p");
    phax_model_cfg c = tiny_cfg(PHAX_FAMILY_PHA);
    c.ffn_separate_mix = 1;  // nb = 4
    ref_model p0 = new_model(&c, phax_rng_u64(&r));
    c.freeze_mix = 1;
    ref_model fz = new_model(&c, 1);
    perturb(&p0, &r);
    for (int l = 0; l < c.n_layers; l++) {
        char name[64];
        snprintf(name, sizeof name, "blocks.%d.mix.p", l);
        cr_assert(ref_model_param(&fz, name) == NULL, "frozen model has %s", name);
        double *p = ref_model_param(&p0, name);
        for (int i = 0; i < 4; i++) p[i] = 0.0;
    }
    copy_by_name(&fz, &p0);
    int32_t tok[TB * TT], tgt[TB * TT];
    random_data(tok, tgt, TB * TT, c.vocab_size, &r);
    double L0, Lf;
    ref_model_zero_grad(&p0), ref_model_zero_grad(&fz);
    cr_assert(ref_model_backward(&p0, tok, tgt, TB, TT, -1, &L0) == PHAX_OK);
    cr_assert(ref_model_backward(&fz, tok, tgt, TB, TT, -1, &Lf) == PHAX_OK);
    cr_assert(L0 == Lf, "loss %.17g vs %.17g", L0, Lf);
    for (int i = 0; i < fz.layout.n; i++) {
        const phax_param_info *t = &fz.layout.p[i];
        const double *g0 = ref_model_grad(&p0, t->name);
        cr_assert(memcmp(g0, fz.grads + t->offset, t->numel * sizeof(double)) == 0, "grad of %s differs", t->name);
    }
    size_t nl = (size_t)TB * TT * c.vocab_size;
    double *a = model_logits(&p0, tok, TB, TT), *b = model_logits(&fz, tok, TB, TT);
    cr_assert(memcmp(a, b, nl * sizeof(double)) == 0);
    tu_free(a), tu_free(b);
    ref_model_free(&p0), ref_model_free(&fz);
}

// ---------------------------------------------------------------------------------
// At the default init (embedding std 0.02, norm gains 1) the final hidden state has
// RMS ≈ 1, so each tied logit x·E_v has std ≈ 0.02·√d = 0.16 at d = 64 (and E_v is
// independent of x up to the token's own row, which adds ~0.02²·d = 0.03): the
// softmax is near uniform and the loss is ln V + O(0.02). A tolerance of 0.5 leaves
// room for the sampling spread over 32 rows, and fails a model that starts
// predicting the current token (loss ≈ 12.7 at std 1/√d, docs/spec.md §4).
// The baselines end in RMSNorm too, so the same argument applies to them.
static void initial_loss_case(phax_family f) {
    char label[64];
    snprintf(label, sizeof label, "model_pha/initial_loss/%s", phax_family_name(f));
    phax_rng r = tu_rng(label);
    phax_model_cfg c = phax_model_cfg_default(f);  // vocab 256, d 64, 2 layers
    ref_model m = new_model(&c, phax_rng_u64(&r));
    enum { B = 2, T = 16 };
    int32_t tok[B * T], tgt[B * T];
    for (int i = 0; i < B * T; i++) {
        tok[i] = (int32_t)phax_rng_below(&r, (uint64_t)c.vocab_size);
        tgt[i] = (int32_t)phax_rng_below(&r, (uint64_t)c.vocab_size);
    }
    double L = NAN, lnV = log((double)c.vocab_size);
    cr_assert(ref_model_forward(&m, tok, tgt, B, T, -1, NULL, &L) == PHAX_OK, "%s", phax_error());
    printf("[%s] initial loss %.4f, ln V = %.4f\n", label, L, lnV);
    cr_assert(fabs(L - lnV) <= 0.5, "[%s] initial loss %.4f vs ln V %.4f", label, L, lnV);
    ref_model_free(&m);
}

Test(model_pha, initial_loss) {
    initial_loss_case(PHAX_FAMILY_PHA);
    initial_loss_case(PHAX_FAMILY_TRANSFORMER);
    initial_loss_case(PHAX_FAMILY_SERIAL);
}

// ---------------------------------------------------------------------------------
// Same seed → bit-identical parameters, loss and gradients; another seed → different.
Test(model_pha, determinism) {
    phax_rng r = tu_rng("model_pha/determinism");
    phax_family fams[] = {PHAX_FAMILY_PHA, PHAX_FAMILY_TRANSFORMER, PHAX_FAMILY_SERIAL};
    for (int k = 0; k < 3; k++) {
        phax_model_cfg c = tiny_cfg(fams[k]);
        uint64_t seed = phax_rng_u64(&r);
        ref_model a = new_model(&c, seed), b = new_model(&c, seed), o = new_model(&c, seed + 1);
        size_t N = a.layout.numel;
        cr_assert(memcmp(a.params, b.params, N * sizeof(double)) == 0);
        cr_assert(memcmp(a.params, o.params, N * sizeof(double)) != 0);
        int32_t tok[TB * TT], tgt[TB * TT];
        random_data(tok, tgt, TB * TT, c.vocab_size, &r);
        double La, Lb, Lo;
        ref_model_zero_grad(&a), ref_model_zero_grad(&b), ref_model_zero_grad(&o);
        cr_assert(ref_model_backward(&a, tok, tgt, TB, TT, -1, &La) == PHAX_OK);
        cr_assert(ref_model_backward(&b, tok, tgt, TB, TT, -1, &Lb) == PHAX_OK);
        cr_assert(ref_model_backward(&o, tok, tgt, TB, TT, -1, &Lo) == PHAX_OK);
        cr_assert(La == Lb && memcmp(a.grads, b.grads, N * sizeof(double)) == 0, "%s: repeat differs",
                  phax_family_name(fams[k]));
        cr_assert(La != Lo, "%s: another seed gives the same loss", phax_family_name(fams[k]));
        ref_model_free(&a), ref_model_free(&b), ref_model_free(&o);
    }
}

// ---------------------------------------------------------------------------------
Test(model_pha, bad_input) {
    phax_family fams[] = {PHAX_FAMILY_PHA, PHAX_FAMILY_TRANSFORMER, PHAX_FAMILY_SERIAL};
    for (int k = 0; k < 3; k++) {
        phax_model_cfg c = tiny_cfg(fams[k]);
        ref_model m = new_model(&c, 7);
        int32_t tok[TB * TT], tgt[TB * TT];
        for (int i = 0; i < TB * TT; i++) tok[i] = tgt[i] = i % c.vocab_size;
        double L;
        const int32_t bad_tokens[] = {c.vocab_size, -1};
        for (int b = 0; b < 2; b++) {
            tok[5] = bad_tokens[b];
            phax_clear_error();
            L = 0;
            cr_assert(ref_model_forward(&m, tok, tgt, TB, TT, -1, NULL, &L) == PHAX_ERR);
            cr_assert(strstr(phax_error(), "token"), "message: %s", phax_error());
            cr_assert(isnan(L), "a failed forward must not leave a plausible loss");
            phax_clear_error();
            ref_model_zero_grad(&m);
            cr_assert(ref_model_backward(&m, tok, tgt, TB, TT, -1, &L) == PHAX_ERR);
            cr_assert(strstr(phax_error(), "token"), "message: %s", phax_error());
            cr_assert(isnan(L) && tu_max_abs(m.grads, m.layout.numel) == 0.0,
                      "a failed backward must leave a NaN loss and no gradients");
        }
        tok[5] = 0;
        tgt[3] = c.vocab_size;  // a target outside [−1, V)
        phax_clear_error();
        cr_assert(ref_model_forward(&m, tok, tgt, TB, TT, -1, NULL, &L) == PHAX_ERR);
        cr_assert(strstr(phax_error(), "target"), "message: %s", phax_error());
        tgt[3] = 0;
        phax_clear_error();
        cr_assert(ref_model_forward(&m, tok, tgt, 0, TT, -1, NULL, &L) == PHAX_ERR);
        cr_assert(phax_error()[0] != 0);
        cr_assert(ref_model_forward(&m, tok, tgt, TB, 0, -1, NULL, &L) == PHAX_ERR);
        cr_assert(ref_model_backward(&m, tok, tgt, 0, TT, -1, &L) == PHAX_ERR);
        cr_assert(ref_model_backward(&m, tok, tgt, TB, 0, -1, &L) == PHAX_ERR);
        // A valid batch still runs after the errors.
        cr_assert(ref_model_forward(&m, tok, tgt, TB, TT, -1, NULL, &L) == PHAX_OK);
        ref_model_free(&m);
    }
}

// A model's loss is unchanged by writing its parameters to safetensors (F64)
// and reading them into a model initialised from another seed: bit-identical,
// since every value travels exactly. Covers a PHA-family and a SWAX-family model.
Test(model_pha, safetensors_roundtrip) {
    phax_rng r = tu_rng("model_pha/safetensors_roundtrip");
    phax_family fams[] = {PHAX_FAMILY_PHA, PHAX_FAMILY_SWAX};
    for (int f = 0; f < 2; f++) {
        phax_model_cfg cfg = phax_model_cfg_default(fams[f]);
        cfg.vocab_size = 11, cfg.d_model = 12, cfg.n_layers = 2, cfg.n_heads = 2, cfg.n_kv_heads = 1;
        cfg.gss_expand = 10, cfg.gss_hidden = 3, cfg.gss_state = 5, cfg.ffn_hidden = 16, cfg.mlstm_heads = 2;
        ref_model a, b;
        cr_assert(ref_model_new(&a, &cfg, phax_rng_u64(&r)) == PHAX_OK, "%s", phax_error());
        cr_assert(ref_model_new(&b, &cfg, phax_rng_u64(&r)) == PHAX_OK, "%s", phax_error());
        const int B = 2, T = 5;
        int32_t tok[10], tg[10];
        for (int i = 0; i < B * T; i++) tok[i] = (int32_t)phax_rng_below(&r, 11), tg[i] = (int32_t)phax_rng_below(&r, 11);
        double la = NAN, lb = NAN, lb0 = NAN;
        cr_assert(ref_model_forward(&a, tok, tg, B, T, -1, NULL, &la) == PHAX_OK, "%s", phax_error());
        cr_assert(ref_model_forward(&b, tok, tg, B, T, -1, NULL, &lb0) == PHAX_OK);
        cr_assert(la != lb0, "two seeds gave the same loss: the test could not tell");
        char path[] = "/tmp/phax_model_rt_XXXXXX";
        int fd = mkstemp(path);
        cr_assert(fd >= 0);
        close(fd);
        phax_st_writer *w = phax_st_writer_new();
        for (int i = 0; i < a.layout.n; i++) {
            const phax_param_info *p = &a.layout.p[i];
            cr_assert(phax_st_add_f64(w, p->name, a.params + p->offset, p->ndim, p->shape) == PHAX_OK);
        }
        cr_assert(phax_st_write(w, path) == PHAX_OK, "%s", phax_error());
        phax_st_writer_free(w);
        phax_st_file sf;
        cr_assert(phax_st_read(&sf, path) == PHAX_OK, "%s", phax_error());
        for (int i = 0; i < b.layout.n; i++) {
            const phax_param_info *p = &b.layout.p[i];
            cr_assert(phax_st_get_f64(&sf, p->name, p->ndim, p->shape, b.params + p->offset) == PHAX_OK, "%s", phax_error());
        }
        cr_assert(sf.n == b.layout.n, "file has %d tensors, layout %d", sf.n, b.layout.n);
        phax_st_free(&sf);
        unlink(path);
        cr_assert(ref_model_forward(&b, tok, tg, B, T, -1, NULL, &lb) == PHAX_OK);
        cr_assert(memcmp(&la, &lb, sizeof la) == 0, "%s: loss %.17g before, %.17g after the round trip",
                  phax_family_name(fams[f]), la, lb);
        ref_model_free(&a), ref_model_free(&b);
    }
}
