// Checkpoints and training schedules: a model checkpoint and a training state
// round-trip bit for bit; every malformed checkpoint is refused with one line
// naming the file and the problem; the learning-rate schedule at hand-computed
// points; the SWAX window schedule (anneal tail, short fraction, reproducible).
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "phax/checkpoint.h"
#include "phax/schedule.h"
#include "phax/data.h"
#include "testutil.h"

// --- helpers ---------------------------------------------------------------------------------

static const char corpus[] = "the cat sat on the mat\nthe dog sat on the log\n\na cat and a dog\n";

// A checkpoint of a small pha model over a word vocabulary, with seeded random
// float parameters (not the init, so a reader that re-initialised would fail).
typedef struct {
    char *dir, *path;
    phax_ckpt ck;  // borrowed pointers: freed by fixture_free
} fixture;

static fixture fixture_new(phax_family fam, const char *name) {
    fixture fx = {0};
    fx.dir = tu_tmpdir("phax_train");
    fx.path = tu_join(fx.dir, name);
    cr_assert(phax_vocab_build_text((const uint8_t *)corpus, sizeof corpus - 1, "corpus",
                                    &fx.ck.vocab) == PHAX_OK, "%s", phax_error());
    fx.ck.cfg = phax_model_cfg_default(fam);
    fx.ck.cfg.vocab_size = (int)phax_vocab_size(fx.ck.vocab);
    fx.ck.cfg.d_model = 16;
    fx.ck.cfg.n_heads = 2;
    cr_assert(phax_model_cfg_resolve(&fx.ck.cfg) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_layout_build(&fx.ck.layout, &fx.ck.cfg) == PHAX_OK, "%s", phax_error());
    fx.ck.params = malloc(fx.ck.layout.numel * sizeof(float));
    cr_assert(fx.ck.params);
    phax_rng r = tu_rng("fixture");
    for (size_t i = 0; i < fx.ck.layout.numel; i++) fx.ck.params[i] = (float)phax_rng_normal(&r);
    fx.ck.step = 123;
    fx.ck.tokens_seen = 123 * 4 * 16;
    fx.ck.train_batch = 4, fx.ck.train_seq = 16;
    cr_assert(phax_ckpt_save(fx.path, &fx.ck) == PHAX_OK, "%s", phax_error());
    return fx;
}

static void fixture_free(fixture *fx) {
    tu_rm_rf(fx->dir);
    free(fx->dir), free(fx->path);
    free(fx->ck.params);
    phax_layout_free(&fx->ck.layout);
    phax_vocab_free(fx->ck.vocab);
}

// The load must fail with a message that starts with `file` and contains `what`.
static void expect_refused(const char *path, int family, const char *file, const char *what) {
    phax_ckpt ck;
    phax_clear_error();
    cr_assert(phax_ckpt_load(path, family, &ck) == PHAX_ERR, "loaded %s (expected: %s)", path, what);
    const char *e = phax_error();
    cr_assert(!strncmp(e, file, strlen(file)), "message does not start with the file: %s", e);
    cr_assert(strstr(e, what), "message lacks \"%s\": %s", what, e);
    cr_assert(!strchr(e, '\n'), "message is not one line: %s", e);
    cr_assert(ck.params == NULL && ck.vocab == NULL);
    phax_ckpt_free(&ck);
}

// Rewrite a good checkpoint with one thing changed.
typedef enum {
    V_NO_FORMAT,
    V_BAD_CONFIG,
    V_DROP_TENSOR,
    V_EXTRA_TENSOR,
    V_RESHAPE,
    V_F64,
    V_BAD_STEP
} variant;

static const char *victim = "blocks.0.attn.wq.weight";

static void write_variant(const char *good, const char *out, variant v) {
    phax_st_file f;
    cr_assert(phax_st_read(&f, good) == PHAX_OK, "%s", phax_error());
    phax_st_writer *w = phax_st_writer_new();
    for (int i = 0; i < f.n; i++) {
        const phax_st_tensor *t = &f.t[i];
        int is_victim = !strcmp(t->name, victim);
        if (is_victim && v == V_DROP_TENSOR) continue;
        if (is_victim && v == V_RESHAPE) {
            int64_t shape[1] = {(int64_t)t->numel};
            cr_assert(phax_st_add_raw(w, t->name, t->dtype, 1, shape, t->data) == PHAX_OK);
        } else if (is_victim && v == V_F64) {
            double *x = malloc(t->numel * sizeof *x);
            cr_assert(phax_st_to_f64(t, x) == PHAX_OK);
            cr_assert(phax_st_add_f64(w, t->name, x, t->ndim, t->shape) == PHAX_OK);
            free(x);
        } else {
            cr_assert(phax_st_add_raw(w, t->name, t->dtype, t->ndim, t->shape, t->data) == PHAX_OK);
        }
    }
    if (v == V_EXTRA_TENSOR) {
        float z[2] = {0, 0};
        int64_t shape[1] = {2};
        cr_assert(phax_st_add_raw(w, "blocks.9.bogus", PHAX_DT_F32, 1, shape, z) == PHAX_OK);
    }
    for (int i = 0; i < f.nmeta; i++) {
        const char *k = f.meta_key[i], *val = f.meta_val[i];
        if (v == V_NO_FORMAT && !strcmp(k, "format")) continue;
        if (v == V_BAD_CONFIG && !strcmp(k, "config")) val = "{\"family\": \"pha\", \"n_heads\": 3, \"d_model\": 16}";
        if (v == V_BAD_STEP && !strcmp(k, "step")) val = "-4";
        cr_assert(phax_st_add_meta(w, k, val) == PHAX_OK);
    }
    cr_assert(phax_st_write(w, out) == PHAX_OK, "%s", phax_error());
    phax_st_writer_free(w);
    phax_st_free(&f);
}

// --- model checkpoint ------------------------------------------------------------------------

Test(train, ckpt_round_trip_bit_identical) {
    fixture fx = fixture_new(PHAX_FAMILY_PHA, "m.safetensors");
    phax_ckpt ck;
    cr_assert(phax_ckpt_load(fx.path, PHAX_FAMILY_PHA, &ck) == PHAX_OK, "%s", phax_error());
    cr_assert(ck.layout.numel == fx.ck.layout.numel && ck.layout.n == fx.ck.layout.n);
    cr_assert(!memcmp(ck.params, fx.ck.params, ck.layout.numel * sizeof(float)), "params differ");
    cr_assert(ck.step == 123 && ck.tokens_seen == 123 * 64);
    cr_assert(ck.train_batch == 4 && ck.train_seq == 16);
    cr_assert(phax_vocab_hash(ck.vocab) == phax_vocab_hash(fx.ck.vocab));
    cr_assert(!strcmp(ck.cfg.family == PHAX_FAMILY_PHA ? "pha" : "?", "pha"));
    char *a = phax_model_cfg_to_json(&ck.cfg), *b = phax_model_cfg_to_json(&fx.ck.cfg);
    cr_assert_str_eq(a, b);
    free(a), free(b);
    char *vp = tu_join(fx.dir, "m.vocab");
    cr_assert_str_eq(ck.vocab_path, vp);
    free(vp);
    phax_ckpt_free(&ck);
    // Any family accepted with −1; a directory means <dir>/checkpoint.safetensors.
    cr_assert(phax_ckpt_load(fx.path, -1, &ck) == PHAX_OK, "%s", phax_error());
    phax_ckpt_free(&ck);
    fixture_free(&fx);
}

Test(train, ckpt_directory_means_checkpoint_file) {
    fixture fx = fixture_new(PHAX_FAMILY_SWAX, "checkpoint.safetensors");
    phax_ckpt ck;
    cr_assert(phax_ckpt_load(fx.dir, PHAX_FAMILY_SWAX, &ck) == PHAX_OK, "%s", phax_error());
    cr_assert(!memcmp(ck.params, fx.ck.params, ck.layout.numel * sizeof(float)));
    phax_ckpt_free(&ck);
    fixture_free(&fx);
}

Test(train, ckpt_missing_and_truncated) {
    fixture fx = fixture_new(PHAX_FAMILY_PHA, "m.safetensors");
    char *missing = tu_join(fx.dir, "nope.safetensors");
    expect_refused(missing, -1, missing, "");
    // Truncated: cut the file in the middle of the data.
    struct stat sb;
    cr_assert(stat(fx.path, &sb) == 0);
    cr_assert(truncate(fx.path, sb.st_size / 2) == 0);
    expect_refused(fx.path, -1, fx.path, "");
    cr_assert(truncate(fx.path, 5) == 0);
    expect_refused(fx.path, -1, fx.path, "");
    free(missing);
    fixture_free(&fx);
}

Test(train, ckpt_malformed_each_named) {
    fixture fx = fixture_new(PHAX_FAMILY_PHA, "m.safetensors");
    char *bad = tu_join(fx.dir, "m2.safetensors");
    // The variants refer to the vocabulary "m2.vocab" only by the copied metadata
    // ("m.vocab"), which still lies beside them.
    struct {
        variant v;
        const char *what;
    } cases[] = {
        {V_NO_FORMAT, "not a phax checkpoint"},
        {V_BAD_CONFIG, "n_heads"},
        {V_DROP_TENSOR, "tensor 'blocks.0.attn.wq.weight' is missing"},
        {V_EXTRA_TENSOR, "unexpected tensor 'blocks.9.bogus'"},
        {V_RESHAPE, "tensor 'blocks.0.attn.wq.weight' has shape [256], expected [16, 16]"},
        {V_F64, "tensor 'blocks.0.attn.wq.weight' is F64, expected F32"},
        {V_BAD_STEP, "\"step\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        write_variant(fx.path, bad, cases[i].v);
        expect_refused(bad, -1, bad, cases[i].what);
    }
    free(bad);
    fixture_free(&fx);
}

Test(train, ckpt_wrong_family) {
    fixture fx = fixture_new(PHAX_FAMILY_PHA, "m.safetensors");
    expect_refused(fx.path, PHAX_FAMILY_SWAX, fx.path, "a pha checkpoint, expected swax");
    fixture_free(&fx);
}

Test(train, ckpt_vocab_missing_or_changed) {
    fixture fx = fixture_new(PHAX_FAMILY_PHA, "m.safetensors");
    char *vp = tu_join(fx.dir, "m.vocab");
    // The same number of tokens, one of them another: hash mismatch.
    size_t n;
    char *orig = tu_slurp(vp, &n);
    char *last = orig + n - 1;  // the last token's line, replaced by a token no text here has
    while (last > orig && last[-1] != '\n') last--;
    char *changed = tu_xprintf("%.*szzz_other_token\n", (int)(last - orig), orig);
    tu_write_file(vp, changed, strlen(changed));
    expect_refused(fx.path, -1, fx.path, "has hash");
    // A vocabulary of another text and size: refused on its header's count, before its tokens.
    static const char other[] = "one two three\n";
    phax_vocab *v2;
    cr_assert(phax_vocab_build_text((const uint8_t *)other, sizeof other - 1, "other", &v2) == PHAX_OK);
    cr_assert(phax_vocab_save(v2, vp) == PHAX_OK);
    phax_vocab_free(v2);
    expect_refused(fx.path, -1, fx.path, "expected");
    tu_write_file(vp, orig, n);
    free(orig), free(changed);
    cr_assert(unlink(vp) == 0);
    expect_refused(fx.path, -1, fx.path, "vocabulary file");
    expect_refused(fx.path, -1, fx.path, "is missing");
    free(vp);
    fixture_free(&fx);
}

Test(train, ckpt_save_refuses_vocab_size_mismatch) {
    fixture fx = fixture_new(PHAX_FAMILY_PHA, "m.safetensors");
    phax_ckpt bad = fx.ck;
    bad.cfg.vocab_size += 1;
    cr_assert(phax_ckpt_save(fx.path, &bad) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "vocab_size"), "%s", phax_error());
    // The good file is untouched.
    phax_ckpt ck;
    cr_assert(phax_ckpt_load(fx.path, -1, &ck) == PHAX_OK, "%s", phax_error());
    phax_ckpt_free(&ck);
    fixture_free(&fx);
}

// --- training state ----------------------------------------------------------------------------

Test(train, state_round_trip_f32_and_f64) {
    fixture fx = fixture_new(PHAX_FAMILY_SWAX, "m.safetensors");
    const phax_layout *L = &fx.ck.layout;
    size_t n = L->numel;
    char *sp = phax_ckpt_state_path(fx.path);
    char *want = tu_join(fx.dir, "m.state.safetensors");
    cr_assert_str_eq(sp, want);
    phax_rng r = tu_rng("state");
    float *m = malloc(n * sizeof *m), *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) m[i] = (float)phax_rng_normal(&r), v[i] = (float)phax_rng_uniform(&r);
    phax_ckpt_state s = {.step = 123, .dtype = PHAX_DT_F32, .m = m, .v = v,
                         .options_json = "{\"lr\": 0.001}", .rng_json = "{\"seed\": 7}", .data_json = NULL};
    cr_assert(phax_ckpt_state_save(sp, L, &s) == PHAX_OK, "%s", phax_error());
    phax_ckpt_state g;
    cr_assert(phax_ckpt_state_load(sp, L, &g) == PHAX_OK, "%s", phax_error());
    cr_assert(g.step == 123 && g.dtype == PHAX_DT_F32 && g.master == NULL);
    cr_assert(!memcmp(g.m, m, n * sizeof *m) && !memcmp(g.v, v, n * sizeof *v));
    cr_assert_str_eq(g.options_json, "{\"lr\": 0.001}");
    cr_assert_str_eq(g.rng_json, "{\"seed\": 7}");
    cr_assert_str_eq(g.data_json, "{}");
    cr_assert(phax_ckpt_state_check(sp, &g, 123) == PHAX_OK);
    cr_assert(phax_ckpt_state_check(sp, &g, 100) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "torn checkpoint") && !strncmp(phax_error(), sp, strlen(sp)));
    phax_ckpt_state_free(&g);

    // float64 moments and master parameters (the ref backend).
    double *m64 = malloc(n * sizeof *m64), *v64 = malloc(n * sizeof *v64), *p64 = malloc(n * sizeof *p64);
    for (size_t i = 0; i < n; i++)
        m64[i] = phax_rng_normal(&r), v64[i] = phax_rng_uniform(&r), p64[i] = phax_rng_normal(&r);
    phax_ckpt_state s64 = {.step = 5, .dtype = PHAX_DT_F64, .m = m64, .v = v64, .master = p64};
    cr_assert(phax_ckpt_state_save(sp, L, &s64) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_ckpt_state_load(sp, L, &g) == PHAX_OK, "%s", phax_error());
    cr_assert(g.dtype == PHAX_DT_F64 && g.master);
    cr_assert(!memcmp(g.m, m64, n * 8) && !memcmp(g.v, v64, n * 8) && !memcmp(g.master, p64, n * 8));
    phax_ckpt_state_free(&g);

    // A state of another config (the pha layout) is refused, naming a tensor.
    phax_model_cfg c2 = phax_model_cfg_default(PHAX_FAMILY_PHA);
    c2.vocab_size = fx.ck.cfg.vocab_size, c2.d_model = 16, c2.n_heads = 2;
    cr_assert(phax_model_cfg_resolve(&c2) == PHAX_OK);
    phax_layout L2;
    cr_assert(phax_layout_build(&L2, &c2) == PHAX_OK);
    cr_assert(phax_ckpt_state_load(sp, &L2, &g) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "tensor '"), "%s", phax_error());
    phax_layout_free(&L2);
    // A model file is not a training state.
    cr_assert(phax_ckpt_state_load(fx.path, L, &g) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "not a phax training state"), "%s", phax_error());
    // Truncated.
    cr_assert(truncate(sp, 100) == 0);
    cr_assert(phax_ckpt_state_load(sp, L, &g) == PHAX_ERR);
    cr_assert(!strncmp(phax_error(), sp, strlen(sp)), "%s", phax_error());
    free(m), free(v), free(m64), free(v64), free(p64), free(sp), free(want);
    fixture_free(&fx);
}

// --- schedules ---------------------------------------------------------------------------------

Test(train, lr_schedule_hand_computed) {
    phax_lr_schedule s = {.lr = 1e-3, .min_lr = 1e-4, .warmup = 10, .total = 110};
    // Warmup: lr·(s+1)/10.
    cr_assert(fabs(phax_lr_at(&s, 0) - 1e-4) < 1e-18);
    cr_assert(fabs(phax_lr_at(&s, 4) - 5e-4) < 1e-18);
    cr_assert(fabs(phax_lr_at(&s, 9) - 1e-3) < 1e-18);
    // Cosine over the 100 steps after warmup: q = 0, 0.25, 0.5, 0.99.
    cr_assert(fabs(phax_lr_at(&s, 10) - 1e-3) < 1e-18);
    cr_assert(fabs(phax_lr_at(&s, 35) - (1e-4 + 0.45e-3 * (1 + sqrt(0.5)))) < 1e-15);
    cr_assert(fabs(phax_lr_at(&s, 60) - 5.5e-4) < 1e-15);
    cr_assert(fabs(phax_lr_at(&s, 109) - (1e-4 + 0.45e-3 * (1 + cos(0.99 * 3.14159265358979323846)))) < 1e-15);
    cr_assert(phax_lr_at(&s, 110) == 1e-4 && phax_lr_at(&s, 1000) == 1e-4);
    // No warmup: the first step gets the full rate; a 1-step run too.
    phax_lr_schedule s0 = {.lr = 2e-3, .min_lr = 0, .warmup = 0, .total = 1};
    cr_assert(phax_lr_at(&s0, 0) == 2e-3);
}

static phax_model_cfg swax_cfg(double p_short, double anneal) {
    phax_model_cfg c = phax_model_cfg_default(PHAX_FAMILY_SWAX);
    c.train_len = 1024, c.p_short = p_short, c.anneal = anneal;
    cr_assert(phax_model_cfg_resolve(&c) == PHAX_OK, "%s", phax_error());
    cr_assert(c.w_short == 8 && c.w_long == 128);
    return c;
}

Test(train, swax_window_anneal_tail_always_long) {
    phax_model_cfg c = swax_cfg(1.0, 0.1);  // p_short 1: every draw short before the tail
    uint64_t ws = phax_seed_derive(42, "swax.window");
    cr_assert(phax_swax_anneal_start(&c, 20) == 18);  // ⌈0.9·20⌉ despite 1 − 0.1 rounding
    cr_assert(phax_swax_anneal_start(&c, 1000) == 900);
    cr_assert(phax_swax_anneal_start(&c, 7) == 7);  // ⌈6.3⌉
    for (long s = 0; s < 1000; s++)
        cr_assert(phax_swax_window_at(&c, ws, s, 1000) == (s < 900 ? 8 : 128), "step %ld", s);
    phax_model_cfg a1 = swax_cfg(1.0, 1.0);  // anneal 1: always long
    for (long s = 0; s < 50; s++) cr_assert(phax_swax_window_at(&a1, ws, s, 50) == 128);
}

Test(train, swax_window_short_fraction_near_p_short) {
    for (int k = 0; k < 2; k++) {
        double p = k ? 0.75 : 0.5;
        phax_model_cfg c = swax_cfg(p, 0.1);
        uint64_t ws = phax_seed_derive(tu_base_seed(), "swax.window");
        long S = 20000, start = phax_swax_anneal_start(&c, S), nshort = 0;
        for (long s = 0; s < start; s++) nshort += phax_swax_window_at(&c, ws, s, S) == c.w_short;
        // Binomial(18000, p): sd ≤ 68; 6 sd is a false alarm once in 10^9 runs.
        double sd = sqrt(start * p * (1 - p));
        cr_assert(fabs(nshort - p * start) < 6 * sd, "p %g: %ld short of %ld", p, nshort, start);
    }
}

Test(train, swax_window_reproducible_from_seed_and_step) {
    phax_model_cfg c = swax_cfg(0.5, 0.1);
    uint64_t a = phax_seed_derive(7, "swax.window"), b = phax_seed_derive(8, "swax.window");
    cr_assert(a == phax_seed_derive(7, "swax.window"));
    cr_assert(a != phax_seed_derive(7, "train.batches"));
    int differ = 0;
    // Step s's window does not depend on which steps were drawn before (resume).
    for (long s = 899; s >= 0; s--) {
        int w = phax_swax_window_at(&c, a, s, 1000);
        cr_assert(w == phax_swax_window_at(&c, a, s, 1000));
        differ |= w != phax_swax_window_at(&c, b, s, 1000);
    }
    cr_assert(differ, "two seeds gave the same 900 windows");
}
