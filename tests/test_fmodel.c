// Whole models of the fast tiers (fast/model/model*.c on backend cpu, through the
// backend list of harness.h; mcase tables) against ref: every family, forward (logits, loss) and every
// parameter gradient, at awkward sizes (odd T, T past the mLSTM chunk and the
// SSM FFT threshold, head dims 6/10, GQA groups 1/2/3, windows 1, small, ≥ T),
// plus accumulation, determinism, workspace size and bad input.
//
// The bound. There is no naive float32 model to compare with (the op tests do
// that per kernel), so the baseline is measured: every parameter is moved by one
// float ulp in a random direction and both ref and fast are re-run. ref's change
// is the sensitivity to rounding the parameters; fast's change adds the
// re-rounding of every intermediate, including reductions that cancel (the
// mix logits' gradient is a small difference of two sums over n·d terms; near
// ĩ ≈ 0 the mLSTM output is almost invariant to a common shift of all ĩ, so the
// igate bias gradient nearly cancels) — the noise a float32 evaluation of this
// computation carries. Baseline = the larger change, max of two draws. Per
// output (logits, loss, token losses, every gradient tensor), judged by h_bound_rel:
//   ‖fast − ref‖ / ‖ref‖  ≤  C · baseline + FLOOR,
// C = 16 (the kernels' own bounds are 2–4× a naive float32 evaluation, and a
// model chains ~10–20 of them per block), FLOOR = 16 u, u = 2^-24 (the loss is
// returned as a float). Fast and ref run the same float parameters. A wrong
// formula is off by far more: broken backwards (gate-cap derivative, GSS gate
// product, DeepNorm α, a dropped dk→dx path, f̃ scaled by 1 + 1e-4) each failed
// 45–270 checks.
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include <stddef.h>

#include "phax/fcpu_f32_ops.h"  // the op table the runner calls through (op_table_complete)
#include "phax/fmodel.h"
#include "phax/model_plan.h"  // the fast/cpu-only tests at the end (workspace size, profile)
#include "phax/ref_model.h"

#define U32 0x1p-24
#define C_MODEL 16.0
#define FLOOR (16.0 * U32)

// ---------------------------------------------------------------------------
typedef struct {
    const char *label;
    phax_model_cfg cfg;
    int B, T, window;
} mcase;

// Small awkward base config of a family: vocab 37, d 24, 2 layers, 3 query heads
// of width 6 over 1 kv head (GQA group 3), SwiGLU hidden 40, GSS F 36, Hs 5, N 7,
// mLSTM 2 heads (dqk 6, dv 12).
static phax_model_cfg base_cfg(phax_family f) {
    phax_model_cfg c = phax_model_cfg_default(f);
    c.vocab_size = 37, c.d_model = 24, c.n_layers = 2;
    c.n_heads = 3, c.n_kv_heads = 1, c.head_dim = 6;
    c.ffn_hidden = 40, c.ffn_aux_hidden = 11;
    c.gss_expand = 36, c.gss_hidden = 5, c.gss_state = 7;
    c.mlstm_heads = 2;
    return c;
}

// Spreads the init so no gradient is trivially zero or symmetric: norm gains and
// the mix logits get N(0, 0.3²) offsets, gate biases N(0, 1), the embedding and
// head ×8 (logits O(1)).
static void spread_params(double *p, const phax_layout *L, phax_rng *r) {
    for (int j = 0; j < L->n; j++) {
        const phax_param_info *t = &L->p[j];
        int is_norm = strstr(t->name, "norm") != NULL && strstr(t->name, ".weight") != NULL;
        int is_mix = strstr(t->name, "mix.p") != NULL, is_bias = strstr(t->name, ".bias") != NULL;
        int is_emb = !strcmp(t->name, "embed.weight") || !strcmp(t->name, "lm_head.weight");
        for (size_t i = 0; i < t->numel; i++) {
            double *v = &p[t->offset + i];
            if (is_norm || is_mix) *v += 0.3 * phax_rng_normal(r);
            else if (is_bias) *v += phax_rng_normal(r);
            else if (is_emb) *v *= 8.0;
            *v = (double)(float)*v;  // fast and ref run the same float parameters
        }
    }
}

// fast within C·baseline + FLOOR of ref, relative (the judge, h_bound_rel).
static bool within(const char *label, const char *what, h_vec fast, const double *ref, size_t n,
                   double base) {
    return h_bound_rel(label, what, fast, ref, n, C_MODEL, base, FLOOR, 0.0);
}

// Per-row cross-entropy from float64 logits (0 for target −1).
static void row_ce(double *out, const double *lg, const int32_t *tg, size_t n, int V) {
    for (size_t r = 0; r < n; r++) {
        if (tg[r] < 0) {
            out[r] = 0;
            continue;
        }
        const double *z = lg + r * V;
        double mx = z[0], se = 0;
        for (int j = 1; j < V; j++) mx = fmax(mx, z[j]);
        for (int j = 0; j < V; j++) se += exp(z[j] - mx);
        out[r] = mx + log(se) - z[tg[r]];
    }
}

static void fill_batch(int32_t *tok, int32_t *tg, size_t n, int V, phax_rng *r) {
    for (size_t i = 0; i < n; i++) {
        tok[i] = (int32_t)phax_rng_below(r, (uint64_t)V);
        tg[i] = (int32_t)phax_rng_below(r, (uint64_t)V);
    }
    tg[phax_rng_below(r, n)] = -1;  // ignored by the loss
}

// One case: fast vs ref for logits, loss and every gradient tensor.
static bool check_case(const h_backend *be, const mcase *k, phax_rng *r) {
    ref_model rm, rp;
    uint64_t seed = phax_rng_u64(r);
    cr_assert(ref_model_new(&rm, &k->cfg, seed) == PHAX_OK, "%s: %s", k->label, phax_error());
    cr_assert(ref_model_new(&rp, &k->cfg, seed) == PHAX_OK);
    void *fm = be->model.new_model(&k->cfg, seed);
    cr_assert(fm, "%s: %s", k->label, phax_error());
    spread_params(rm.params, &rm.layout, r);
    be->model.set_params_f64(fm, rm.params);
    const phax_model_cfg *c = &rm.cfg;
    int B = k->B, T = k->T, V = c->vocab_size;
    size_t n = (size_t)B * T, P = rm.layout.numel;
    cr_assert(be->model.numel(fm) == P, "%s: layouts differ", k->label);
    float *fm_params = malloc(P * sizeof *fm_params), *fm_grads = malloc(P * sizeof *fm_grads);
    float *fp_params = malloc(P * sizeof *fp_params), *fp_grads = malloc(P * sizeof *fp_grads);
    be->model.get_params(fm, fm_params);
    int32_t *tok = malloc(n * sizeof *tok), *tg = malloc(n * sizeof *tg);
    fill_batch(tok, tg, n, V, r);

    // fast: forward with logits (poisoned), forward with the fused head, backward from
    // zero grads, per-token losses.
    void *ws = be->model.ws_new(fm, B, T);
    cr_assert(ws, "%s: %s", k->label, phax_error());
    float *lf = tu_fbuf(n * V), *rows = tu_fbuf(n), *lf2 = tu_fbuf(n * V), *rows2 = tu_fbuf(n);
    double loss_f = NAN, loss_fb = NAN, loss_fused = NAN;
    cr_assert(be->model.forward(fm, ws, tok, tg, k->window, lf, &loss_f) == PHAX_OK, "%s: %s",
              k->label, phax_error());
    cr_assert(be->model.forward(fm, ws, tok, tg, k->window, NULL, &loss_fused) == PHAX_OK);
    be->model.zero_grad(fm);
    cr_assert(be->model.backward(fm, ws, tok, tg, k->window, &loss_fb) == PHAX_OK, "%s: %s",
              k->label, phax_error());
    be->model.get_grads(fm, fm_grads);
    cr_assert(be->model.token_losses(fm, ws, tok, tg, k->window, rows) == PHAX_OK);

    // ref at the same parameters.
    double *lr = tu_buf(n * V), *lp = tu_buf(n * V), loss_r, loss_p;
    double *cer = tu_buf(n), *cep = tu_buf(n), *gpert = tu_buf(P);
    cr_assert(ref_model_forward(&rm, tok, tg, B, T, k->window, lr, &loss_r) == PHAX_OK);
    ref_model_zero_grad(&rm);
    cr_assert(ref_model_backward(&rm, tok, tg, B, T, k->window, NULL) == PHAX_OK);
    row_ce(cer, lr, tg, n, V);

    // Baselines: every parameter moved by one float ulp in a random direction, then
    // ref and fast both re-run. ref's change is the sensitivity to the rounding of
    // the parameters; fast's change adds the re-rounding of every intermediate —
    // including where a reduction cancels (the mix logits' gradient is a small
    // difference of two sums over n·d terms) — the noise a float32 evaluation of
    // this very computation carries. Baseline = the larger of the two, max of 2 draws,
    // relative to ‖ref‖.
    void *fp = be->model.new_model(&k->cfg, seed);
    cr_assert(fp);
    double base_logits = 0, base_loss = 0, base_rows = 0;
    for (int draw = 0; draw < 2; draw++) {
        for (size_t i = 0; i < P; i++) {
            float v = fm_params[i];
            fp_params[i] = nextafterf(v, phax_rng_below(r, 2) ? INFINITY : -INFINITY);
            rp.params[i] = fp_params[i];
        }
        be->model.set_params(fp, fp_params);
        double lpf, lpf_fused;
        cr_assert(ref_model_forward(&rp, tok, tg, B, T, k->window, lp, &loss_p) == PHAX_OK);
        ref_model_zero_grad(&rp);
        cr_assert(ref_model_backward(&rp, tok, tg, B, T, k->window, NULL) == PHAX_OK);
        cr_assert(be->model.forward(fp, ws, tok, tg, k->window, lf2, &lpf) == PHAX_OK);
        cr_assert(be->model.forward(fp, ws, tok, tg, k->window, NULL, &lpf_fused) == PHAX_OK);
        be->model.zero_grad(fp);
        cr_assert(be->model.backward(fp, ws, tok, tg, k->window, NULL) == PHAX_OK);
        be->model.get_grads(fp, fp_grads);
        cr_assert(be->model.token_losses(fp, ws, tok, tg, k->window, rows2) == PHAX_OK);
        row_ce(cep, lp, tg, n, V);
        double nl = 0, nr = 0;  // ‖fast(θ') − fast(θ)‖ for logits and token losses
        for (size_t i = 0; i < n * V; i++) nl += ((double)lf2[i] - lf[i]) * ((double)lf2[i] - lf[i]);
        for (size_t i = 0; i < n; i++) nr += ((double)rows2[i] - rows[i]) * ((double)rows2[i] - rows[i]);
        double nlr = 0, nrr = 0;
        for (size_t i = 0; i < n * V; i++) nlr += lr[i] * lr[i];
        for (size_t i = 0; i < n; i++) nrr += cer[i] * cer[i];
        base_logits = fmax(base_logits, fmax(h_relerr(H_D(lp), lr, H_ZERO, n * V), sqrt(nl / nlr)));
        base_rows = fmax(base_rows, fmax(h_relerr(H_D(cep), cer, H_ZERO, n), sqrt(nr / nrr)));
        base_loss = fmax(base_loss, fmax(fabs(loss_p - loss_r), fmax(fabs(lpf - loss_f),
                                          fabs(lpf_fused - loss_fused))) / fabs(loss_r));
        for (int j = 0; j < rm.layout.n; j++) {
            const phax_param_info *t = &rm.layout.p[j];
            double num = 0, den = 0;
            for (size_t i = t->offset; i < t->offset + t->numel; i++) {
                double e = (double)fp_grads[i] - fm_grads[i];
                num += e * e, den += rm.grads[i] * rm.grads[i];
            }
            double e = fmax(h_relerr(H_D(rp.grads + t->offset), rm.grads + t->offset, H_ZERO, t->numel),
                            den > 0 ? sqrt(num / den) : sqrt(num));
            gpert[j] = draw ? fmax(gpert[j], e) : e;
        }
    }
    be->model.free_model(fp);

    double mean = 0;
    size_t counted = 0;
    for (size_t i = 0; i < n; i++) mean += rows[i], counted += tg[i] >= 0;
    mean /= (double)counted;
    bool ok = tu_fintact(lf) && tu_fintact(rows) && tu_fintact(lf2) && tu_fintact(rows2);
    ok &= within(k->label, "token losses", H_F(rows), cer, n, base_rows);
    // Same tile logits and row sums as the fused loss; the rows are stored as float
    // (u/2 each, all positive) and the loss once more: ≤ 2u relative.
    if (!(fabs(mean - loss_fused) <= 2 * U32 * loss_fused)) {
        printf("[%s] mean token loss %.9g vs loss %.9g\n", k->label, mean, loss_fused);
        ok = false;
    }
    tu_ffree(rows), tu_ffree(rows2), tu_ffree(lf2);
    ok &= within(k->label, "logits", H_F(lf), lr, n * V, base_logits);
    ok &= within(k->label, "loss", H_D(&loss_f), &loss_r, 1, base_loss);
    // The fused head (no logits) and the backward's loss are the same computation.
    if (!(loss_fused == loss_fb)) {
        printf("[%s] fused loss %.9g != backward loss %.9g\n", k->label, loss_fused, loss_fb);
        ok = false;
    }
    ok &= within(k->label, "loss (fused head)", H_D(&loss_fused), &loss_r, 1, base_loss);
    for (int j = 0; j < rm.layout.n; j++) {
        const phax_param_info *t = &rm.layout.p[j];
        ok &= within(k->label, t->name, H_F(fm_grads + t->offset), rm.grads + t->offset, t->numel,
                     gpert[j]);
    }
    printf("[%s] B %d T %d window %d: loss ref %.6f fast %.6f, logits err %.2e (baseline %.2e)\n",
           k->label, B, T, k->window, loss_r, loss_f, h_relerr(H_F(lf), lr, H_ZERO, n * V),
           base_logits);

    be->model.ws_free(ws);
    free(fm_params), free(fm_grads), free(fp_params), free(fp_grads);
    tu_ffree(lf);
    tu_free(lr), tu_free(lp), tu_free(gpert), tu_free(cer), tu_free(cep);
    free(tok), free(tg);
    ref_model_free(&rm), ref_model_free(&rp);
    be->model.free_model(fm);
    return ok;
}

static void run_cases(const h_backend *be, const char *name, const mcase *ks, int nk) {
    phax_rng r = tu_rng(name);
    bool ok = true;
    for (int i = 0; i < nk; i++) ok &= check_case(be, &ks[i], &r);
    h_report_worst(name);
    cr_expect(ok, "%s: fast/cpu model differs from ref beyond the bound (see log)", name);
}

// ---------------------------------------------------------------------------
H_TEST(model, pha) {
    phax_model_cfg a = base_cfg(PHAX_FAMILY_PHA);
    phax_model_cfg b = a;  // separate FFN branches, frozen mix, window 3, dot, untied, GQA 1
    b.ffn_separate_mix = 1, b.freeze_mix = 1, b.attn_window = 3, b.score_cosine = 0;
    b.tie_embeddings = 0, b.n_kv_heads = 3, b.n_layers = 3;
    phax_model_cfg g = a;  // no attention; head dim 10, 2 heads over 1
    g.use_attn = 0;
    phax_model_cfg h = a;
    h.use_gss = 0, h.n_heads = 2, h.n_kv_heads = 1, h.head_dim = 10;
    phax_model_cfg f = a;
    f.use_ffn = 0;
    mcase ks[] = {
        {"pha", a, 2, 13, -1},
        {"pha sep/frozen/w3/dot/untied", b, 1, 37, -1},
        {"pha no-attn T130 (FFT conv)", g, 1, 130, -1},
        {"pha no-gss dh10", h, 2, 9, -1},
        {"pha no-ffn T1", f, 3, 1, -1},
    };
    run_cases(be, "fmodel/pha", ks, sizeof ks / sizeof *ks);
}

H_TEST(model, transformer_serial) {
    phax_model_cfg t = base_cfg(PHAX_FAMILY_TRANSFORMER);
    t.n_heads = 4, t.n_kv_heads = 2, t.head_dim = 10, t.d_model = 20, t.ffn_hidden = 64;
    phax_model_cfg tw = t;
    tw.attn_window = 5, tw.tie_embeddings = 0;
    phax_model_cfg s = base_cfg(PHAX_FAMILY_SERIAL);
    phax_model_cfg s2 = s;
    s2.gss_state = 3, s2.attn_window = 40;  // window ≥ T
    mcase ks[] = {
        {"transformer GQA2 dh10", t, 2, 21, -1},
        {"transformer w5 untied", tw, 1, 37, -1},
        {"serial", s, 2, 11, -1},
        {"serial T150 (FFT) w40", s2, 1, 150, -1},
    };
    run_cases(be, "fmodel/transformer_serial", ks, sizeof ks / sizeof *ks);
}

H_TEST(model, swax_family) {
    phax_model_cfg x = base_cfg(PHAX_FAMILY_SWAX);
    x.train_len = 64;  // w_short 1, w_long 8
    phax_model_cfg xs = x;  // igate bias 0: ĩ ≈ 0, the cancelling regime (see the bound)
    xs.mlstm_first = 0, xs.n_layers = 3, xs.n_kv_heads = 3, xs.igate_bias_init = 0.0;
    phax_model_cfg sw = base_cfg(PHAX_FAMILY_SWA);
    phax_model_cfg ml = base_cfg(PHAX_FAMILY_MLSTM);
    ml.mlstm_heads = 3;  // dqk 4, dv 8
    phax_model_cfg sf = base_cfg(PHAX_FAMILY_SWA_FULL);  // full, SWA, full
    sf.n_layers = 3;
    phax_model_cfg sfs = sf;  // SWA, full, SWA; GQA group 1
    sfs.mlstm_first = 0, sfs.n_kv_heads = sfs.n_heads;
    phax_model_cfg gd = base_cfg(PHAX_FAMILY_SWAX_GDN);  // GDN (3 heads: dk 4, dv 8), SWA
    phax_model_cfg gds = gd;  // SWA, GDN (2 heads: dk 6, dv 12), kernel 2
    gds.mlstm_first = 0, gds.gdn_heads = 2, gds.gdn_conv = 2;
    mcase ks[] = {
        {"swax w_long T70 (partial chunk)", x, 1, 70, -1},
        {"swax w1", x, 2, 17, 1},
        {"swax full", x, 1, 33, 0},
        {"swax swa_first w>T", xs, 2, 13, 50},
        {"swa w3", sw, 2, 19, 3},
        {"mlstm 3 heads T129", ml, 1, 129, -1},
        {"swa_full w3", sf, 2, 19, 3},
        {"swa_full swa_first w5", sfs, 1, 23, 5},
        {"swax_gdn T70 (chunk 64 + 6)", gd, 1, 70, -1},
        {"swax_gdn swa_first 2 heads K2 w3", gds, 2, 19, 3},
    };
    run_cases(be, "fmodel/swax_family", ks, sizeof ks / sizeof *ks);
}

// mlstm_norm_eps (issue 11, item 12): fast follows the config's head-norm eps as ref does,
// at 1e-5 (SPEC's LayerNorm eps) and 1e-6 (the default); and the eps matters: ref's logits at
// the two differ by far more than fast's distance from ref (at igate bias −10 a head's
// variance is ~1e-6, comparable to eps), so a tier that ignored the key could not pass.
H_TEST(model, mlstm_norm_eps) {
    phax_model_cfg a = base_cfg(PHAX_FAMILY_SWAX), b;
    a.train_len = 64, a.mlstm_norm_eps = 1e-5;
    b = a, b.mlstm_norm_eps = 1e-6;
    phax_model_cfg m = base_cfg(PHAX_FAMILY_MLSTM);
    m.mlstm_norm_eps = 1e-5;
    mcase ks[] = {
        {"swax eps 1e-5", a, 2, 17, -1},
        {"swax eps 1e-6", b, 2, 17, -1},
        {"mlstm eps 1e-5 T70", m, 1, 70, -1},
    };
    run_cases(be, "fmodel/mlstm_norm_eps", ks, sizeof ks / sizeof *ks);

    // The same parameters and tokens at the two eps, in ref.
    phax_rng r = tu_rng("fmodel/mlstm_norm_eps.differs");
    ref_model r5, r6;
    uint64_t seed = phax_rng_u64(&r);
    cr_assert(ref_model_new(&r5, &a, seed) == PHAX_OK && ref_model_new(&r6, &b, seed) == PHAX_OK, "%s", phax_error());
    const int B = 2, T = 17, V = r5.cfg.vocab_size;
    size_t n = (size_t)B * T;
    int32_t *tok = malloc(n * sizeof *tok), *tg = malloc(n * sizeof *tg);
    double *l5 = tu_buf(n * V), *l6 = tu_buf(n * V);
    cr_assert(tok && tg);
    fill_batch(tok, tg, n, V, &r);
    cr_assert(ref_model_forward(&r5, tok, tg, B, T, -1, l5, NULL) == PHAX_OK);
    cr_assert(ref_model_forward(&r6, tok, tg, B, T, -1, l6, NULL) == PHAX_OK);
    double d = h_relerr(H_D(l5), l6, H_ZERO, n * V);
    printf("[fmodel/mlstm_norm_eps] ref logits at eps 1e-5 vs 1e-6: rel diff %.3e\n", d);
    // 1e-3 is ~1000x the fast-vs-ref distances logged above (~1e-6 relative).
    cr_assert(d > 1e-3, "eps 1e-5 and 1e-6 give logits only %.3e apart: is the key honoured?", d);
    tu_free(l5), tu_free(l6);
    free(tok), free(tg);
    ref_model_free(&r5), ref_model_free(&r6);
}

// ---------------------------------------------------------------------------
// Backward adds; results are the same bits from run to run; the fused-head loss
// of a forward equals the backward's.
H_TEST(model, accumulate_deterministic) {
    phax_rng r = tu_rng("fmodel/accumulate_deterministic");
    phax_family fams[] = {PHAX_FAMILY_PHA, PHAX_FAMILY_SWAX};
    for (int fi = 0; fi < 2; fi++) {
        cr_assert(be->model.new_model(&(phax_model_cfg){0}, 0) == NULL);  // family pha, all zero: invalid
        phax_model_cfg c = base_cfg(fams[fi]);
        void *m = be->model.new_model(&c, phax_rng_u64(&r));
        cr_assert(m);
        int B = 2, T = 23;
        size_t n = (size_t)B * T, P = be->model.numel(m);
        int32_t tok[46], tg[46];
        fill_batch(tok, tg, n, c.vocab_size, &r);
        void *ws = be->model.ws_new(m, B, T);
        cr_assert(ws);
        double l1, l2;
        be->model.zero_grad(m);
        cr_assert(be->model.backward(m, ws, tok, tg, -1, &l1) == PHAX_OK);
        float *g1 = malloc(P * sizeof *g1), *g = malloc(P * sizeof *g);
        be->model.get_grads(m, g1);
        cr_assert(be->model.backward(m, ws, tok, tg, -1, &l2) == PHAX_OK);
        be->model.get_grads(m, g);
        cr_expect(l1 == l2, "loss differs between identical calls");
        // g2 = g1 + g1' with g1' the same bits as g1: one float add per element, plus
        // the order in which sgemm (beta 1) and the embedding scatter add — a few u.
        double num = 0, den = 0;
        for (size_t i = 0; i < P; i++) {
            double e = g[i] - 2.0 * g1[i];
            num += e * e, den += 4.0 * g1[i] * g1[i];
        }
        cr_expect(sqrt(num / den) <= 8 * U32, "%s: second backward does not add (%.3e)",
                  phax_family_name(c.family), sqrt(num / den));
        // Determinism: a fresh zero_grad + backward gives g1's bits.
        be->model.zero_grad(m);
        cr_assert(be->model.backward(m, ws, tok, tg, -1, NULL) == PHAX_OK);
        be->model.get_grads(m, g);
        cr_expect(!memcmp(g, g1, P * sizeof *g1), "%s: backward not deterministic",
                  phax_family_name(c.family));
        free(g1), free(g);
        be->model.ws_free(ws);
        be->model.free_model(m);
    }
}

// The workspace is linear in T (no T×T buffer), for full attention too.
Test(cpu_model, workspace_linear_in_T) {
    phax_family fams[] = {PHAX_FAMILY_TRANSFORMER, PHAX_FAMILY_PHA, PHAX_FAMILY_SWAX};
    for (int fi = 0; fi < 3; fi++) {
        phax_model_cfg c = base_cfg(fams[fi]);
        fmodel m;
        cr_assert(fmodel_new(&m, &c, 1) == PHAX_OK);
        fmodel_ws *w1 = fmodel_ws_new(&m, 1, 2048), *w2 = fmodel_ws_new(&m, 1, 8192);
        cr_assert(w1 && w2, "%s", phax_error());
        double ratio = (double)fmodel_ws_bytes(w2) / (double)fmodel_ws_bytes(w1);
        printf("[workspace] %s: %.1f MB at T 2048, %.1f MB at T 8192 (ratio %.2f)\n",
               phax_family_name(c.family), fmodel_ws_bytes(w1) / 1e6,
               fmodel_ws_bytes(w2) / 1e6, ratio);
        // 4× the tokens: linear is 4 (plus the fixed parts, which only lower it).
        cr_expect(ratio <= 4.2, "%s: workspace grows faster than T (%.2f for 4x T)",
                  phax_family_name(c.family), ratio);
        fmodel_ws_free(w1), fmodel_ws_free(w2);
        fmodel_free(&m);
    }
}

// The workspace by part (phax info) adds up to the arena the workspace allocates, for every
// family, and each family has exactly the parts its blocks use.
Test(cpu_model, workspace_breakdown_adds_up) {
    for (int f = 0; f < PHAX_FAMILY_COUNT; f++) {
        phax_model_cfg c = base_cfg((phax_family)f);
        fmodel m;
        cr_assert(fmodel_new(&m, &c, 1) == PHAX_OK);
        fmodel_ws *w = fmodel_ws_new(&m, 2, 37);
        size_t part[FMODEL_WS_NPARTS], sum = 0;
        cr_assert(w && fmodel_ws_breakdown(&m.cfg, 2, 37, part) == PHAX_OK, "%s", phax_error());
        for (int i = 0; i < FMODEL_WS_NPARTS; i++) sum += part[i];
        cr_expect(sum == fmodel_ws_bytes(w), "%s: parts add to %zu, the arena is %zu",
                  phax_family_name(c.family), sum, fmodel_ws_bytes(w));
        int pha = c.family == PHAX_FAMILY_PHA;
        cr_expect(!part[FMODEL_WS_MIX] == !pha, "%s: mix buffers %zu", phax_family_name(c.family), part[FMODEL_WS_MIX]);
        cr_expect(!part[FMODEL_WS_BRANCH + PHAX_SUB_ATTN] == (c.family == PHAX_FAMILY_MLSTM),
                  "%s: attention part %zu", phax_family_name(c.family), part[FMODEL_WS_BRANCH + PHAX_SUB_ATTN]);
        fmodel_ws_free(w);
        fmodel_free(&m);
    }
}

// Bad input: a clear error, no gradient written, no logits left that pass for a result.
Test(cpu_model, bad_input) {
    phax_model_cfg c = base_cfg(PHAX_FAMILY_PHA);
    fmodel m, o;
    cr_assert(fmodel_new(&m, &c, 3) == PHAX_OK);
    phax_model_cfg cs = base_cfg(PHAX_FAMILY_SWAX);
    cr_assert(fmodel_new(&o, &cs, 3) == PHAX_OK);
    int32_t tok[6] = {1, 2, 3, 4, 5, 6}, tg[6] = {2, 3, 4, 5, 6, 7};
    fmodel_ws *ws = fmodel_ws_new(&m, 2, 3), *wo = fmodel_ws_new(&o, 2, 3);
    cr_assert(ws && wo);
    cr_expect(fmodel_ws_new(&m, 0, 3) == NULL && strstr(phax_error(), "at least"));
    fmodel_zero_grad(&m);
    double loss = 0;
    tok[4] = c.vocab_size;  // out of range
    cr_expect(fmodel_backward(&m, ws, tok, tg, -1, &loss) == PHAX_ERR);
    cr_expect(strstr(phax_error(), "token") != NULL, "message: %s", phax_error());
    cr_expect(isnan(loss));
    tok[4] = 5, tg[1] = -7;  // bad target
    cr_expect(fmodel_backward(&m, ws, tok, tg, -1, &loss) == PHAX_ERR);
    printf("[bad_input] %s\n", phax_error());
    size_t written = 0;
    for (size_t i = 0; i < m.layout.numel; i++) written += m.grads[i] != 0;
    cr_expect(written == 0, "%zu gradient elements written by a failed backward", written);
    tg[1] = 3;
    cr_expect(fmodel_forward(&m, wo, tok, tg, -1, NULL, &loss) == PHAX_ERR);
    cr_expect(strstr(phax_error(), "another model") != NULL, "message: %s", phax_error());
    cr_expect(fmodel_forward(&m, ws, tok, NULL, -1, NULL, &loss) == PHAX_ERR);
    cr_expect(fmodel_forward(&m, ws, tok, tg, -1, NULL, &loss) == PHAX_OK && isfinite(loss));
    fmodel_ws_free(ws), fmodel_ws_free(wo);
    fmodel_free(&m), fmodel_free(&o);
}

// Profiling (fmodel_ws_profile) changes no result bit; its table is consistent:
// every part ≥ 0, each kernel within its sub-layer, the sub-layers and the head within
// the call's half, the head in bwd for a backward call and in fwd for a forward one,
// and nothing is added while it is off.
Test(cpu_model, profile) {
    phax_rng r = tu_rng("fmodel/profile");
    phax_family fams[] = {PHAX_FAMILY_PHA, PHAX_FAMILY_SWAX, PHAX_FAMILY_SERIAL};
    for (int fi = 0; fi < 3; fi++) {
        phax_model_cfg c = base_cfg(fams[fi]);
        fmodel m;
        cr_assert(fmodel_new(&m, &c, phax_rng_u64(&r)) == PHAX_OK);
        int B = 1, T = 37;
        size_t P = m.layout.numel;
        int32_t tok[37], tg[37];
        fill_batch(tok, tg, (size_t)B * T, c.vocab_size, &r);
        fmodel_ws *ws = fmodel_ws_new(&m, B, T);
        cr_assert(ws);
        double l0, l1, f[FCPU_NPARTS], b[FCPU_NPARTS];
        fmodel_zero_grad(&m);
        cr_assert(fmodel_backward(&m, ws, tok, tg, -1, &l0) == PHAX_OK);
        float *g0 = malloc(P * sizeof *g0);
        memcpy(g0, m.grads, P * sizeof *g0);
        fmodel_ws_profile_get(ws, f, b);
        for (int i = 0; i < FCPU_NPARTS; i++)
            cr_expect(f[i] == 0 && b[i] == 0, "profile off but %s timed", fmodel_part_name(i));
        fmodel_ws_profile(ws, 1);
        fmodel_zero_grad(&m);
        cr_assert(fmodel_backward(&m, ws, tok, tg, -1, &l1) == PHAX_OK);
        cr_expect(l0 == l1 && !memcmp(g0, m.grads, P * sizeof *g0),
                  "%s: profiling changed the result", phax_family_name(c.family));
        fmodel_ws_profile_get(ws, f, b);
        const char *fam = phax_family_name(c.family);
        double sf = 0, sb = 0;
        for (int i = 0; i < FCPU_NPARTS; i++)
            cr_expect(f[i] >= 0 && b[i] >= 0, "%s: %s < 0", fam, fmodel_part_name(i));
        for (int i = FMODEL_PART_GSS; i <= FMODEL_PART_GDN; i++) sf += f[i], sb += b[i];
        cr_expect(f[FMODEL_PART_TOTAL] > 0 && b[FMODEL_PART_TOTAL] > 0, "%s: halves not timed", fam);
        cr_expect(sf + f[FMODEL_PART_HEAD] <= f[FMODEL_PART_TOTAL], "%s: forward parts exceed the half",
                  fam);
        cr_expect(sb + b[FMODEL_PART_HEAD] <= b[FMODEL_PART_TOTAL],
                  "%s: backward parts exceed the half", fam);
        cr_expect(f[FMODEL_PART_HEAD] == 0 && b[FMODEL_PART_HEAD] > 0,
                  "%s: the fused head belongs to bwd", fam);
        cr_expect(f[FMODEL_PART_ATTN] > 0 && b[FMODEL_PART_ATTN] > 0, "%s: attention not timed", fam);
        cr_expect(f[FMODEL_PART_ATTN_KERNEL] <= f[FMODEL_PART_ATTN] &&
                      b[FMODEL_PART_ATTN_KERNEL] <= b[FMODEL_PART_ATTN] && f[FMODEL_PART_ATTN_KERNEL] > 0,
                  "%s: attention kernel outside its sub-layer", fam);
        cr_expect(f[FMODEL_PART_MLSTM_KERNEL] <= f[FMODEL_PART_MLSTM] &&
                      b[FMODEL_PART_MLSTM_KERNEL] <= b[FMODEL_PART_MLSTM],
                  "%s: mLSTM kernel outside its sub-layer", fam);
        int has_mlstm = c.family == PHAX_FAMILY_SWAX, has_gss = !has_mlstm;
        cr_expect((f[FMODEL_PART_MLSTM] > 0) == has_mlstm && (f[FMODEL_PART_GSS] > 0) == has_gss &&
                      (f[FMODEL_PART_DUAL] > 0) == has_gss && (f[FMODEL_PART_SWIGLU] > 0) == has_mlstm,
                  "%s: wrong sub-layers timed", fam);
        // A forward-only call times its head in fwd; turned off, nothing more is added.
        double hb = b[FMODEL_PART_HEAD], tb = b[FMODEL_PART_TOTAL];
        cr_assert(fmodel_forward(&m, ws, tok, tg, -1, NULL, &l1) == PHAX_OK);
        fmodel_ws_profile_get(ws, f, b);
        cr_expect(f[FMODEL_PART_HEAD] > 0 && b[FMODEL_PART_HEAD] == hb && b[FMODEL_PART_TOTAL] == tb,
                  "%s: forward call", fam);
        fmodel_ws_profile(ws, 0);
        double f2[FCPU_NPARTS], b2[FCPU_NPARTS];
        cr_assert(fmodel_backward(&m, ws, tok, tg, -1, NULL) == PHAX_OK);
        fmodel_ws_profile_get(ws, f2, b2);
        cr_expect(!memcmp(f, f2, sizeof f) && !memcmp(b, b2, sizeof b), "%s: timed while off", fam);
        free(g0);
        fmodel_ws_free(ws);
        fmodel_free(&m);
    }
}

// The op table the runner calls through (phax/f32_ops.h) is complete: a name, a chunk, and
// every entry from the first function pointer to the end set (a NULL entry would crash
// only the first model that reaches it).
Test(cpu_model, op_table_complete) {
    const phax_f32_ops *ops = fcpu_f32_ops();
    cr_assert(ops && ops == fcpu_f32_ops(), "one static table");
    cr_expect(ops->name && !strcmp(ops->name, "cpu"), "name");
    cr_expect(ops->mlstm_chunk > 0, "mlstm_chunk %d", ops->mlstm_chunk);
    typedef void (*fn)(void);
    size_t first = offsetof(phax_f32_ops, PHAX_F32_OPS_FIRST_FN);
    cr_assert((sizeof *ops - first) % sizeof(fn) == 0, "only function pointers after the first");
    size_t n = (sizeof *ops - first) / sizeof(fn), nulls = 0;
    for (size_t i = 0; i < n; i++) {
        fn f;
        memcpy(&f, (const char *)ops + first + i * sizeof(fn), sizeof f);
        if (!f) {
            nulls++;
            cr_expect(f != NULL, "entry %zu of %zu (counting from alloc_ws) is NULL", i, n);
        }
    }
    printf("[op_table_complete] %s: %zu entries, %zu NULL\n", ops->name, n, nulls);
    cr_expect(n >= 50, "only %zu entries: the table shrank?", n);
}

// Another table drives the same runner: a copy of fast/cpu's table whose elementwise ops
// and one kernel count their calls gives bit-identical losses and gradients, every
// wrapped op is reached (so the runner calls them through the model's table, not
// fast/cpu's directly), and a table with one op broken changes the result.
static struct {
    const phax_f32_ops *cpu;
    struct {
        int zero, add, acc, scale, axpy, mul, mul_bwd, sig, sig_bwd, cap, cap_bwd, linear;
    } n;             // calls of each wrapped op
    int break_axpy;  // 1: axpy does nothing
} tc;
static void c_zero(float *p, size_t n) { tc.n.zero++, tc.cpu->zero(p, n); }
static void c_add(float *y, const float *a, const float *b, size_t n) { tc.n.add++, tc.cpu->add(y, a, b, n); }
static void c_acc(float *y, const float *x, size_t n) { tc.n.acc++, tc.cpu->acc(y, x, n); }
static void c_scale(float *y, float a, const float *x, size_t n) { tc.n.scale++, tc.cpu->scale(y, a, x, n); }
static void c_axpy(float *y, float a, const float *x, size_t n) {
    tc.n.axpy++;
    if (!tc.break_axpy) tc.cpu->axpy(y, a, x, n);
}
static void c_mul(float *y, const float *a, const float *b, size_t n) { tc.n.mul++, tc.cpu->mul(y, a, b, n); }
static void c_mul_bwd(float *da, float *db, const float *dy, const float *a, const float *b, size_t n) {
    tc.n.mul_bwd++, tc.cpu->mul_bwd(da, db, dy, a, b, n);
}
static void c_sig(float *x, size_t n) { tc.n.sig++, tc.cpu->sigmoid_inplace(x, n); }
static void c_sig_bwd(float *dz, float *dh, const float *hn, const float *o, size_t n) {
    tc.n.sig_bwd++, tc.cpu->sigmoid_mul_bwd(dz, dh, hn, o, n);
}
static void c_cap(float *y, const float *z, size_t n) { tc.n.cap++, tc.cpu->gate_cap_fwd(y, z, n); }
static void c_cap_bwd(float *dy, const float *z, size_t n) { tc.n.cap_bwd++, tc.cpu->gate_cap_bwd(dy, z, n); }
static void c_linear(float *y, const float *x, const float *W, const float *b, size_t n, int in, int out) {
    tc.n.linear++, tc.cpu->linear_fwd(y, x, W, b, n, in, out);
}

// One backward of m on its own table or on tbl: the loss and a copy of the gradients.
static double backward_on(fmodel *m, const phax_f32_ops *tbl, const int32_t *tok,
                          const int32_t *tg, int B, int T, float *grads) {
    const struct phax_f32_ops *own = m->ops;
    if (tbl) m->ops = tbl;
    fmodel_ws *ws = fmodel_ws_new(m, B, T);
    cr_assert(ws, "%s", phax_error());
    double loss = NAN;
    fmodel_zero_grad(m);
    cr_assert(fmodel_backward(m, ws, tok, tg, -1, &loss) == PHAX_OK, "%s", phax_error());
    memcpy(grads, m->grads, m->layout.numel * sizeof *grads);
    fmodel_ws_free(ws);
    m->ops = own;
    return loss;
}

Test(cpu_model, another_table_drives_the_runner) {
    phax_rng r = tu_rng("fmodel/another_table");
    tc.cpu = fcpu_f32_ops();
    phax_f32_ops tbl = *tc.cpu;
    tbl.name = "counting";
    tbl.zero = c_zero, tbl.add = c_add, tbl.acc = c_acc, tbl.scale = c_scale, tbl.axpy = c_axpy;
    tbl.mul = c_mul, tbl.mul_bwd = c_mul_bwd, tbl.sigmoid_inplace = c_sig;
    tbl.sigmoid_mul_bwd = c_sig_bwd, tbl.gate_cap_fwd = c_cap, tbl.gate_cap_bwd = c_cap_bwd;
    tbl.linear_fwd = c_linear;
    // PHA (axpy, scale, mul of GSS, acc of the dual FFN) and SWAX (add, the mLSTM ops).
    phax_family fams[] = {PHAX_FAMILY_PHA, PHAX_FAMILY_SWAX};
    for (int fi = 0; fi < 2; fi++) {
        phax_model_cfg c = base_cfg(fams[fi]);
        const char *fam = phax_family_name(c.family);
        fmodel m;
        cr_assert(fmodel_new(&m, &c, phax_rng_u64(&r)) == PHAX_OK);
        int B = 2, T = 9;
        size_t n = (size_t)B * T, P = m.layout.numel;
        int32_t tok[18], tg[18];
        fill_batch(tok, tg, n, c.vocab_size, &r);
        float *g0 = malloc(P * sizeof *g0), *g1 = malloc(P * sizeof *g1);
        cr_assert(g0 && g1);
        double l0 = backward_on(&m, NULL, tok, tg, B, T, g0);
        memset(&tc.n, 0, sizeof tc.n);
        double l1 = backward_on(&m, &tbl, tok, tg, B, T, g1);
        cr_expect(l0 == l1 && !memcmp(g0, g1, P * sizeof *g0),
                  "%s: the counting table changed the result (loss %.9g vs %.9g)", fam, l0, l1);
        printf("[another_table] %s: zero %d add %d acc %d scale %d axpy %d mul %d mul_bwd %d "
               "sigmoid %d sigmoid_mul_bwd %d gate_cap %d gate_cap_bwd %d linear_fwd %d\n",
               fam, tc.n.zero, tc.n.add, tc.n.acc, tc.n.scale, tc.n.axpy, tc.n.mul, tc.n.mul_bwd, tc.n.sig,
               tc.n.sig_bwd, tc.n.cap, tc.n.cap_bwd, tc.n.linear);
        cr_expect(tc.n.zero > 0 && tc.n.linear > 0, "%s: zero or linear_fwd not reached", fam);
        if (c.family == PHAX_FAMILY_PHA)
            // axpy: z = α x + mix once per block forward, and again in its backward, which
            // recomputes z rather than keeping it (fast/model/model.c, ws_layout).
            cr_expect(tc.n.axpy == 2 * c.n_layers && tc.n.scale == c.n_layers && tc.n.mul > 0 &&
                          tc.n.mul_bwd > 0 && tc.n.acc > 0,
                      "%s: the residual, GSS gate or dual-FFN ops not reached through the table",
                      fam);
        else
            cr_expect(tc.n.add > 0 && tc.n.sig > 0 && tc.n.sig_bwd > 0 && tc.n.cap > 0 && tc.n.cap_bwd > 0 &&
                          tc.n.mul > 0,
                      "%s: the residual or mLSTM ops not reached through the table", fam);
        if (c.family == PHAX_FAMILY_PHA) {  // a broken table op shows in the result
            tc.break_axpy = 1;
            double l2 = backward_on(&m, &tbl, tok, tg, B, T, g1);
            tc.break_axpy = 0;
            cr_expect(l2 != l0, "%s: dropping the DeepNorm α·x term changed nothing", fam);
        }
        free(g0), free(g1);
        fmodel_free(&m);
    }
}
