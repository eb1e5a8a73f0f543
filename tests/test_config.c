// Model configs as JSON: defaults round-trip for every family, a config with
// every key, each kind of error (naming the key and the source), impossible
// combinations refused by resolve, and atomic file I/O.
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "phax/checkpoint.h"
#include "phax/model.h"
#include "phax/safetensors.h"
#include "phax/tokenizer.h"
#include "testutil.h"

// Field by field (the struct has padding, so no memcmp). Doubles compare by
// bits: -0.0 must stay -0.0.
static void expect_same(const phax_model_cfg *a, const phax_model_cfg *b, const char *label) {
#define SAME_I(f) cr_assert(a->f == b->f, "%s: " #f " %d != %d", label, (int)a->f, (int)b->f)
#define SAME_D(f) cr_assert(memcmp(&a->f, &b->f, sizeof(double)) == 0, "%s: " #f " %.17g != %.17g", label, a->f, b->f)
    SAME_I(family); SAME_I(vocab_size); SAME_I(d_model); SAME_I(n_layers);
    SAME_I(n_heads); SAME_I(n_kv_heads); SAME_I(head_dim); SAME_I(score_cosine);
    SAME_D(rope_base); SAME_I(attn_window); SAME_I(tie_embeddings);
    SAME_I(ffn_hidden); SAME_I(ffn_aux_hidden);
    SAME_I(gss_expand); SAME_I(gss_hidden); SAME_I(gss_state); SAME_I(gss_long_memory_init);
    SAME_I(use_gss); SAME_I(use_attn); SAME_I(use_ffn); SAME_I(ffn_separate_mix); SAME_I(freeze_mix);
    SAME_I(mlstm_heads); SAME_I(mlstm_first); SAME_D(igate_bias_init); SAME_D(fgate_init);
    SAME_D(mlstm_norm_eps); SAME_I(gdn_heads); SAME_I(gdn_conv); SAME_D(gdn_norm_eps);
    SAME_I(train_len); SAME_I(w_short); SAME_I(w_long); SAME_D(p_short); SAME_D(anneal);
#undef SAME_I
#undef SAME_D
}

// to_json → from_json gives the same struct, and serialising again gives the same text.
static void expect_round_trip(const phax_model_cfg *c, const char *label) {
    char *s = phax_model_cfg_to_json(c);
    cr_assert(s != NULL, "%s: %s", label, phax_error());
    phax_model_cfg d;
    memset(&d, 0xA5, sizeof d);
    cr_assert(phax_model_cfg_from_json_str(&d, s, "<string>") == PHAX_OK, "%s: %s\n%s", label, phax_error(), s);
    expect_same(c, &d, label);
    char *s2 = phax_model_cfg_to_json(&d);
    cr_assert(s2 != NULL && strcmp(s, s2) == 0, "%s: second serialisation differs:\n%s\n%s", label, s, s2);
    free(s);
    free(s2);
}

// Parse a JSON that must fail; its message must contain `where` and every needle.
static void expect_err(const char *json, const char *n1, const char *n2) {
    phax_model_cfg c = phax_model_cfg_default(PHAX_FAMILY_PHA);
    cr_assert(phax_model_cfg_resolve(&c) == PHAX_OK);
    phax_model_cfg before = c;
    phax_clear_error();
    cr_assert(phax_model_cfg_from_json_str(&c, json, "config.json") == PHAX_ERR, "accepted: %s", json);
    const char *m = phax_error();
    cr_assert(strncmp(m, "config.json", 11) == 0, "no where prefix: %s", m);
    cr_assert(n1 == NULL || strstr(m, n1), "'%s' not in: %s", n1, m);
    cr_assert(n2 == NULL || strstr(m, n2), "'%s' not in: %s", n2, m);
    cr_assert(strchr(m, '\n') == NULL, "message is not one line: %s", m);
    expect_same(&c, &before, "config changed by a failed parse");
}

// ---------------------------------------------------------------------------
Test(config, defaults_round_trip_every_family) {
    for (int f = 0; f < PHAX_FAMILY_COUNT; f++) {
        phax_model_cfg c = phax_model_cfg_default((phax_family)f);
        cr_assert(phax_model_cfg_resolve(&c) == PHAX_OK, "%s: %s", phax_family_name((phax_family)f), phax_error());
        expect_round_trip(&c, phax_family_name((phax_family)f));
        // The minimal JSON ({"family": ...}) gives exactly the resolved defaults.
        char json[64];
        snprintf(json, sizeof json, "{\"family\": \"%s\"}", phax_family_name((phax_family)f));
        phax_model_cfg d;
        cr_assert(phax_model_cfg_from_json_str(&d, json, NULL) == PHAX_OK, "%s", phax_error());
        expect_same(&c, &d, json);
    }
}

// to_json writes every key exactly once, "family" first, values already resolved.
Test(config, to_json_every_key_resolved) {
    phax_model_cfg c = phax_model_cfg_default(PHAX_FAMILY_SWAX);  // unresolved: zeros are "derived"
    char *s = phax_model_cfg_to_json(&c);
    cr_assert(s != NULL, "%s", phax_error());
    cr_assert(strncmp(s, "{\n  \"family\": \"swax\",", 21) == 0, "%s", s);
    cr_assert(s[strlen(s) - 1] == '\n');
    json_error_t e;
    json_t *o = json_loads(s, JSON_REJECT_DUPLICATES, &e);
    cr_assert(o && json_is_object(o), "%s", e.text);
    cr_assert(json_object_size(o) == 35, "%zu keys", json_object_size(o));
    const char *keys[] = {"family", "vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim",
                          "score", "rope_base", "attn_window", "tie_embeddings", "ffn_hidden", "ffn_aux_hidden",
                          "gss_expand", "gss_hidden", "gss_state", "gss_long_memory_init", "use_gss", "use_attn",
                          "use_ffn", "ffn_separate_mix", "freeze_mix", "mlstm_heads", "mixer_order",
                          "igate_bias_init", "fgate_init", "mlstm_norm_eps", "gdn_heads", "gdn_conv", "gdn_norm_eps",
                          "train_len", "w_short", "w_long", "p_short", "anneal"};
    // Same keys in the struct's order.
    const char *key;
    json_t *v;
    int i = 0;
    json_object_foreach(o, key, v) {
        cr_assert(i < 35 && strcmp(key, keys[i]) == 0, "key %d is %s, want %s", i, key, i < 35 ? keys[i] : "-");
        i++;
    }
    cr_assert(json_integer_value(json_object_get(o, "n_kv_heads")) == 4);
    cr_assert(json_integer_value(json_object_get(o, "head_dim")) == 16);
    cr_assert(json_integer_value(json_object_get(o, "ffn_hidden")) == 192);
    cr_assert(json_integer_value(json_object_get(o, "train_len")) == 256);
    cr_assert(json_integer_value(json_object_get(o, "w_short")) == 2);
    cr_assert(json_integer_value(json_object_get(o, "w_long")) == 32);
    cr_assert(json_real_value(json_object_get(o, "rope_base")) == 10000.0);
    cr_assert(strcmp(json_string_value(json_object_get(o, "score")), "dot") == 0);
    cr_assert(strcmp(json_string_value(json_object_get(o, "mixer_order")), "mlstm_first") == 0);
    cr_assert(json_is_true(json_object_get(o, "tie_embeddings")));
    cr_assert(json_is_false(json_object_get(o, "freeze_mix")));
    // Short decimals stay short.
    cr_assert(strstr(s, "\"fgate_init\": 0.95,") && strstr(s, "\"rope_base\": 10000.0,"), "%s", s);
    json_decref(o);
    free(s);
}

static const char *FULL =
    "{\n"
    "  \"family\": \"swax\", \"vocab_size\": 1000, \"d_model\": 96, \"n_layers\": 3,\n"
    "  \"n_heads\": 6, \"n_kv_heads\": 2, \"head_dim\": 20, \"score\": \"cosine\",\n"
    "  \"rope_base\": 500000, \"attn_window\": 32, \"tie_embeddings\": false,\n"
    "  \"ffn_hidden\": 200, \"ffn_aux_hidden\": 40, \"gss_expand\": 150, \"gss_hidden\": 20,\n"
    "  \"gss_state\": 16, \"gss_long_memory_init\": true, \"use_gss\": false, \"use_attn\": true,\n"
    "  \"use_ffn\": false, \"ffn_separate_mix\": true, \"freeze_mix\": true, \"mlstm_heads\": 4,\n"
    "  \"mixer_order\": \"swa_first\", \"igate_bias_init\": -6.5, \"fgate_init\": 0.9,\n"
    "  \"train_len\": 1024, \"w_short\": 16, \"w_long\": 256, \"p_short\": 0.25, \"anneal\": 0.2\n"
    "}\n";

Test(config, full_json_every_key) {
    phax_model_cfg c;
    cr_assert(phax_model_cfg_from_json_str(&c, FULL, "full.json") == PHAX_OK, "%s", phax_error());
    cr_assert(c.family == PHAX_FAMILY_SWAX);
    cr_assert(c.vocab_size == 1000 && c.d_model == 96 && c.n_layers == 3);
    cr_assert(c.n_heads == 6 && c.n_kv_heads == 2 && c.head_dim == 20 && c.score_cosine == 1);
    cr_assert(c.rope_base == 500000.0 && c.attn_window == 32 && c.tie_embeddings == 0);
    cr_assert(c.ffn_hidden == 200 && c.ffn_aux_hidden == 40);
    cr_assert(c.gss_expand == 150 && c.gss_hidden == 20 && c.gss_state == 16 && c.gss_long_memory_init == 1);
    cr_assert(c.use_gss == 0 && c.use_attn == 1 && c.use_ffn == 0 && c.ffn_separate_mix == 1 && c.freeze_mix == 1);
    cr_assert(c.mlstm_heads == 4 && c.mlstm_first == 0);
    cr_assert(c.igate_bias_init == -6.5 && c.fgate_init == 0.9);
    cr_assert(c.train_len == 1024 && c.w_short == 16 && c.w_long == 256);
    cr_assert(c.p_short == 0.25 && c.anneal == 0.2);
    expect_round_trip(&c, "full");
}

// Values that need all 17 digits, and -0.0, survive the round trip.
Test(config, awkward_doubles_round_trip) {
    phax_model_cfg c = phax_model_cfg_default(PHAX_FAMILY_MLSTM);
    c.igate_bias_init = -0.0;
    c.fgate_init = 0.1 + 0.2;  // 0.30000000000000004
    c.p_short = 1.0 / 3.0;
    c.anneal = 5e-324;  // smallest subnormal
    c.rope_base = 1e300;
    cr_assert(phax_model_cfg_resolve(&c) == PHAX_OK, "%s", phax_error());
    expect_round_trip(&c, "awkward");
}

// Integral reals are integers; integers are numbers.
Test(config, number_forms) {
    phax_model_cfg c;
    cr_assert(phax_model_cfg_from_json_str(&c, "{\"family\": \"pha\", \"n_heads\": 8.0, \"d_model\": 1.28e2,"
                                               " \"rope_base\": 500, \"fgate_init\": 5e-1}", "x") == PHAX_OK,
              "%s", phax_error());
    cr_assert(c.n_heads == 8 && c.d_model == 128 && c.head_dim == 16 && c.rope_base == 500.0 && c.fgate_init == 0.5);
    // Keys in any order, family last.
    cr_assert(phax_model_cfg_from_json_str(&c, "{\"score\": \"dot\", \"family\": \"transformer\"}", "x") == PHAX_OK);
    cr_assert(c.family == PHAX_FAMILY_TRANSFORMER && c.score_cosine == 0);
}

// ---------------------------------------------------------------------------
// Errors: each names the key (where there is one) and starts with `where`.

Test(config, error_unknown_key) {
    expect_err("{\"family\": \"pha\", \"n_head\": 4}", "unknown key \"n_head\"", NULL);
    expect_err("{\"family\": \"pha\", \"Family\": \"pha\"}", "\"Family\"", NULL);
    expect_err("{\"family\": \"pha\", \"bad\\nkey\": 1}", "unknown key \"bad\\x0akey\"", NULL);  // one line
}

Test(config, error_wrong_type) {
    expect_err("{\"family\": \"pha\", \"n_heads\": \"4\"}", "config.json: key \"n_heads\" must be an integer, got string",
               NULL);
    expect_err("{\"family\": \"pha\", \"vocab_size\": true}", "\"vocab_size\"", "got boolean");
    expect_err("{\"family\": \"pha\", \"d_model\": null}", "\"d_model\"", "got null");
    expect_err("{\"family\": \"pha\", \"n_layers\": [2]}", "\"n_layers\"", "got array");
    expect_err("{\"family\": \"pha\", \"rope_base\": \"1e4\"}", "\"rope_base\" must be a number", "got string");
    expect_err("{\"family\": \"pha\", \"fgate_init\": {}}", "\"fgate_init\"", "got object");
    expect_err("{\"family\": \"pha\", \"use_gss\": 1}", "\"use_gss\" must be a boolean", "got number");
    expect_err("{\"family\": \"pha\", \"tie_embeddings\": \"true\"}", "\"tie_embeddings\"", "got string");
    expect_err("{\"family\": \"pha\", \"score\": 1}", "\"score\" must be \"cosine\" or \"dot\"", "got number");
    expect_err("{\"family\": \"pha\", \"score\": \"euclid\"}", "\"score\"", "got \"euclid\"");
    expect_err("{\"family\": \"swax\", \"mixer_order\": \"mlstm\"}", "\"mixer_order\"", "got \"mlstm\"");
    expect_err("{\"family\": \"swax\", \"mixer_order\": false}", "\"mixer_order\"", "got boolean");
    expect_err("{\"family\": 0}", "\"family\" must be a string", "got number");
    expect_err("{\"family\": \"gpt\"}", "\"family\" must be one of", "got \"gpt\"");
    expect_err("{\"family\": \"PHA\"}", "\"family\"", "\"PHA\"");
    expect_err("{\"n_heads\": 4}", "\"family\" is required", NULL);
    expect_err("{}", "\"family\" is required", NULL);
}

Test(config, error_int_range_and_integrality) {
    expect_err("{\"family\": \"pha\", \"d_model\": 2147483648}", "\"d_model\"", "out of range");
    expect_err("{\"family\": \"pha\", \"attn_window\": -2147483649}", "\"attn_window\"", "out of range");
    expect_err("{\"family\": \"pha\", \"vocab_size\": 99999999999999999999999}", "\"vocab_size\"", "out of range");
    expect_err("{\"family\": \"pha\", \"n_layers\": 1e20}", "\"n_layers\"", "out of range");
    expect_err("{\"family\": \"pha\", \"n_heads\": 2.5}", "\"n_heads\" must be an integer, got 2.5", NULL);
    expect_err("{\"family\": \"pha\", \"train_len\": 256.000001}", "\"train_len\"", "integer");
    // INT_MAX itself is a valid int (then refused by resolve as too large: no overflow on the way).
    expect_err("{\"family\": \"pha\", \"d_model\": 2147483646, \"n_heads\": 1}", "d_model", "too large");
    expect_err("{\"family\": \"pha\", \"n_heads\": 2147483647}", "d_model", "n_heads (2147483647)");
    // A number too large for a double is a JSON error.
    expect_err("{\"family\": \"pha\", \"rope_base\": 1e999}", "invalid JSON", "1e999");
}

Test(config, error_duplicate_key) {
    expect_err("{\"family\": \"pha\", \"n_heads\": 4, \"n_heads\": 2}", "duplicate", "\"n_heads\"");
    expect_err("{\"family\": \"pha\", \"family\": \"swa\"}", "duplicate", "\"family\"");
}

Test(config, error_top_level_not_object) {
    expect_err("[{\"family\": \"pha\"}]", "top level must be an object, got array", NULL);
    expect_err("\"pha\"", "top level", "got string");
    expect_err("3", "top level", "got number");
    expect_err("null", "top level", "got null");
}

Test(config, error_invalid_json) {
    // jansson's line:column and text.
    expect_err("{\"family\": \"pha\",\n  \"n_heads\": }", "config.json:2:", "invalid JSON");
    expect_err("{\"family\": \"pha\",}", "config.json:1:", "invalid JSON");
    expect_err("{\"family\": \"pha\"} {}", "invalid JSON", "end of file expected");
    expect_err("", "invalid JSON", NULL);
    expect_err("{\"family\": 'pha'}", "invalid JSON", NULL);
    expect_err("{\"family\": \"pha\", \"n_heads\": NaN}", "invalid JSON", NULL);
    expect_err("{\"family\": \"pha\", \"s\": \"a\nb\"}", "invalid JSON", NULL);  // raw newline in a string
    expect_err("{\"family\": \"pha\\u0000\"}", "invalid JSON", NULL);  // NUL
    phax_model_cfg c;
    cr_assert(phax_model_cfg_from_json_str(&c, NULL, "config.json") == PHAX_ERR);
    cr_assert(strstr(phax_error(), "config.json"));
    cr_assert(phax_model_cfg_from_json_str(&c, "[", NULL) == PHAX_ERR);
    cr_assert(strncmp(phax_error(), "<string>:", 9) == 0, "%s", phax_error());
}

Test(config, error_not_utf8) {
    expect_err("{\"family\": \"pha\xff\"}", "invalid JSON", "0xff");
    expect_err("{\"family\": \"pha\", \"n_he\xc3\": 4}", "invalid JSON", NULL);  // truncated sequence in a key
    expect_err("{\"family\": \"pha\xc0\xaf\"}", "invalid JSON", NULL);           // overlong encoding
    // Valid UTF-8 in an unknown key is shown as is.
    expect_err("{\"family\": \"pha\", \"n_h\xc3\xa9\": 4}", "unknown key \"n_h\xc3\xa9\"", NULL);
}

// ---------------------------------------------------------------------------
// Impossible combinations: refused by resolve, the message prefixed by `where`
// and naming the field.

Test(config, impossible_combinations) {
    expect_err("{\"family\": \"pha\", \"n_heads\": 6, \"n_kv_heads\": 4, \"head_dim\": 8}",
               "config.json: config: n_heads (6) is not divisible by n_kv_heads (4)", NULL);
    expect_err("{\"family\": \"transformer\", \"n_kv_heads\": 8}", "n_kv_heads (8)", NULL);
    expect_err("{\"family\": \"pha\", \"head_dim\": 7}", "config.json: config: head_dim (7)", "even");
    expect_err("{\"family\": \"pha\", \"n_heads\": 5}", "config.json: config: d_model (64)", "n_heads (5)");
    expect_err("{\"family\": \"pha\", \"use_gss\": false, \"use_attn\": false, \"use_ffn\": false}",
               "config.json: config: use_gss", "use_ffn");
    expect_err("{\"family\": \"swax\", \"mlstm_heads\": 5}", "config.json: config: mlstm_heads (5)", "d_model/2 (32)");
    expect_err("{\"family\": \"mlstm\", \"mlstm_heads\": 64}", "mlstm_heads (64)", NULL);
    expect_err("{\"family\": \"mlstm\", \"d_model\": 63, \"head_dim\": 16, \"mlstm_heads\": 1}", "d_model (63)", "even");
    expect_err("{\"family\": \"pha\", \"mlstm_heads\": -1}", "mlstm_heads (-1)", NULL);
    expect_err("{\"family\": \"swax\", \"w_short\": 8, \"w_long\": 4}", "config.json: config: w_long (4)", "w_short (8)");
    expect_err("{\"family\": \"swax\", \"p_short\": 1.5}", "config.json: config: p_short (1.5)", NULL);
    expect_err("{\"family\": \"swax\", \"p_short\": -0.1}", "p_short", NULL);
    expect_err("{\"family\": \"swax\", \"fgate_init\": 1.0}", "config.json: config: fgate_init (1)", NULL);
    expect_err("{\"family\": \"swax\", \"fgate_init\": 0}", "fgate_init (0)", NULL);
    expect_err("{\"family\": \"pha\", \"vocab_size\": 1}", "config.json: config: vocab_size (1)", NULL);
    expect_err("{\"family\": \"pha\", \"n_layers\": 0}", "n_layers (0)", NULL);
    expect_err("{\"family\": \"pha\", \"rope_base\": -1}", "rope_base", NULL);
    expect_err("{\"family\": \"pha\", \"anneal\": 2}", "anneal", NULL);
    expect_err("{\"family\": \"pha\", \"attn_window\": -1}", "attn_window", NULL);
    expect_err("{\"family\": \"pha\", \"gss_state\": -3}", "gss_state", NULL);

    // The same combinations that are fine: head_dim set explicitly, SWA ignores mlstm_heads,
    // all branches off is a PHA-only rule.
    phax_model_cfg c;
    cr_assert(phax_model_cfg_from_json_str(&c, "{\"family\": \"pha\", \"n_heads\": 5, \"head_dim\": 12}", "x") == PHAX_OK,
              "%s", phax_error());
    cr_assert(c.head_dim == 12 && c.n_kv_heads == 5);
    cr_assert(phax_model_cfg_from_json_str(&c, "{\"family\": \"swa\", \"mlstm_heads\": 5}", "x") == PHAX_OK, "%s",
              phax_error());
    cr_assert(phax_model_cfg_from_json_str(&c, "{\"family\": \"swax\", \"w_short\": 8, \"w_long\": 8}", "x") == PHAX_OK,
              "%s", phax_error());
}

// to_json refuses a config that does not resolve, and says why.
Test(config, to_json_refuses_bad_config) {
    phax_model_cfg c = phax_model_cfg_default(PHAX_FAMILY_PHA);
    c.n_kv_heads = 3;
    cr_assert(phax_model_cfg_to_json(&c) == NULL);
    cr_assert(strstr(phax_error(), "n_kv_heads (3)"), "%s", phax_error());
    c = phax_model_cfg_default(PHAX_FAMILY_PHA);
    c.use_ffn = 2;  // not a boolean
    cr_assert(phax_model_cfg_to_json(&c) == NULL);
    cr_assert(strstr(phax_error(), "use_ffn"), "%s", phax_error());
}

// ---------------------------------------------------------------------------
// Files.

static char *make_tmpdir(void) {
    const char *base = getenv("TMPDIR");
    char *d = malloc(4096);
    snprintf(d, 4096, "%s/phax_test_config_XXXXXX", base && *base ? base : "/tmp");
    cr_assert(mkdtemp(d) != NULL, "mkdtemp: %s", strerror(errno));
    return d;
}

// Names in a directory (not . and ..), joined by spaces.
static int list_dir(const char *dir, char *names, size_t n) {
    DIR *D = opendir(dir);
    cr_assert(D != NULL);
    int count = 0;
    names[0] = '\0';
    struct dirent *e;
    while ((e = readdir(D))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        count++;
        strncat(names, e->d_name, n - strlen(names) - 2);
        strcat(names, " ");
    }
    closedir(D);
    return count;
}

static void remove_tree(const char *dir) {
    DIR *D = opendir(dir);
    if (!D) return;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(D))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(D);
    rmdir(dir);
}

static void write_text(const char *path, const char *s, size_t n) {
    FILE *f = fopen(path, "wb");
    cr_assert(f != NULL);
    cr_assert(fwrite(s, 1, n, f) == n);
    fclose(f);
}

Test(config, file_missing_names_path) {
    char *d = make_tmpdir();
    char p[4200];
    snprintf(p, sizeof p, "%s/no_such_config.json", d);
    phax_model_cfg c;
    cr_assert(phax_model_cfg_from_json_file(&c, p) == PHAX_ERR);
    cr_assert(strstr(phax_error(), p), "%s", phax_error());
    cr_assert(strstr(phax_error(), "No such file"), "%s", phax_error());
    // A directory is not a config file either.
    cr_assert(phax_model_cfg_from_json_file(&c, d) == PHAX_ERR);
    cr_assert(strstr(phax_error(), d), "%s", phax_error());
    remove_tree(d);
    free(d);
}

Test(config, file_round_trip) {
    char *d = make_tmpdir();
    char p[4200], names[512];
    snprintf(p, sizeof p, "%s/config.json", d);
    phax_model_cfg c;
    cr_assert(phax_model_cfg_from_json_str(&c, FULL, "full") == PHAX_OK, "%s", phax_error());
    cr_assert(phax_model_cfg_write_json_file(&c, p) == PHAX_OK, "%s", phax_error());
    phax_model_cfg r;
    cr_assert(phax_model_cfg_from_json_file(&r, p) == PHAX_OK, "%s", phax_error());
    expect_same(&c, &r, "file");
    // The file is exactly to_json's text.
    char *s = phax_model_cfg_to_json(&c), buf[4096];
    FILE *f = fopen(p, "rb");
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    cr_assert(strcmp(s, buf) == 0);
    free(s);
    // Overwriting an existing file works and leaves only the file behind.
    phax_model_cfg t = phax_model_cfg_default(PHAX_FAMILY_TRANSFORMER);
    cr_assert(phax_model_cfg_write_json_file(&t, p) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_model_cfg_from_json_file(&r, p) == PHAX_OK, "%s", phax_error());
    cr_assert(r.family == PHAX_FAMILY_TRANSFORMER);
    cr_assert(list_dir(d, names, sizeof names) == 1, "left behind: %s", names);
    remove_tree(d);
    free(d);
}

Test(config, file_errors_name_path_and_line) {
    char *d = make_tmpdir();
    char p[4200];
    snprintf(p, sizeof p, "%s/bad.json", d);
    phax_model_cfg c;
    const char *t1 = "{\"family\": \"pha\",\n\"n_heads\": \"4\"}\n";
    write_text(p, t1, strlen(t1));
    cr_assert(phax_model_cfg_from_json_file(&c, p) == PHAX_ERR);
    cr_assert(strncmp(phax_error(), p, strlen(p)) == 0 && strstr(phax_error(), "\"n_heads\""), "%s", phax_error());
    const char *t2 = "{\"family\": \"pha\",\n\n  \"n_heads\" 4}\n";
    write_text(p, t2, strlen(t2));
    cr_assert(phax_model_cfg_from_json_file(&c, p) == PHAX_ERR);
    char want[4300];
    snprintf(want, sizeof want, "%s:3:", p);
    cr_assert(strncmp(phax_error(), want, strlen(want)) == 0, "%s", phax_error());
    // A NUL byte inside the file is refused, not taken as the end of the text.
    const char t3[] = "{\"family\": \"pha\"}\0garbage";
    write_text(p, t3, sizeof t3 - 1);
    cr_assert(phax_model_cfg_from_json_file(&c, p) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "invalid JSON"), "%s", phax_error());
    // Non-UTF-8 bytes in a file.
    const char t4[] = "{\"family\": \"swa\", \"x\xfe\": 1}";
    write_text(p, t4, sizeof t4 - 1);
    cr_assert(phax_model_cfg_from_json_file(&c, p) == PHAX_ERR);
    cr_assert(strstr(phax_error(), p) && strstr(phax_error(), "invalid JSON"), "%s", phax_error());
    remove_tree(d);
    free(d);
}

Test(config, write_into_missing_dir_leaves_nothing) {
    char *d = make_tmpdir();
    char p[4200], names[512];
    snprintf(p, sizeof p, "%s/missing/config.json", d);
    phax_model_cfg c = phax_model_cfg_default(PHAX_FAMILY_PHA);
    cr_assert(phax_model_cfg_write_json_file(&c, p) == PHAX_ERR);
    cr_assert(strstr(phax_error(), p), "%s", phax_error());
    cr_assert(list_dir(d, names, sizeof names) == 0, "left behind: %s", names);
    struct stat st;
    cr_assert(stat(p, &st) != 0);
    // A config that does not resolve: no file, no temporary, and the reason.
    snprintf(p, sizeof p, "%s/config.json", d);
    c.n_heads = 3;
    cr_assert(phax_model_cfg_write_json_file(&c, p) == PHAX_ERR);
    cr_assert(strstr(phax_error(), p) && strstr(phax_error(), "d_model (64)"), "%s", phax_error());
    cr_assert(list_dir(d, names, sizeof names) == 0, "left behind: %s", names);
    // The target is a directory: rename fails, the temporary is removed.
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/adir", d);
    cr_assert(mkdir(sub, 0755) == 0);
    c = phax_model_cfg_default(PHAX_FAMILY_PHA);
    cr_assert(phax_model_cfg_write_json_file(&c, sub) == PHAX_ERR);
    cr_assert(list_dir(d, names, sizeof names) == 1, "left behind: %s", names);
    rmdir(sub);
    remove_tree(d);
    free(d);
}

// --- mlstm_norm_eps (issue 11, item 12): the mLSTM head norm's eps is a config key ------------
// Default 1e-6 (xLSTM-7B's), also for a config that predates the key; a value given is kept
// through the JSON round trip; 0 reads as "derived" (the default); bad values are refused.
Test(config, mlstm_norm_eps_key) {
    phax_model_cfg c;
    cr_assert(phax_model_cfg_from_json_str(&c, "{\"family\": \"swax\"}", "old.json") == PHAX_OK, "%s", phax_error());
    cr_assert(c.mlstm_norm_eps == 1e-6, "default %.17g", c.mlstm_norm_eps);
    cr_assert(phax_model_cfg_from_json_str(&c, "{\"family\": \"swax\", \"mlstm_norm_eps\": 1e-5}", "x") == PHAX_OK,
              "%s", phax_error());
    cr_assert(c.mlstm_norm_eps == 1e-5);
    expect_round_trip(&c, "eps 1e-5");
    char *s = phax_model_cfg_to_json(&c);
    cr_assert(s && strstr(s, "\"mlstm_norm_eps\": 1e-5,"),
              "%s", s ? s : phax_error());
    free(s);
    cr_assert(phax_model_cfg_from_json_str(&c, "{\"family\": \"mlstm\", \"mlstm_norm_eps\": 0}", "x") == PHAX_OK);
    cr_assert(c.mlstm_norm_eps == 1e-6);
    expect_err("{\"family\": \"swax\", \"mlstm_norm_eps\": -1e-6}", "mlstm_norm_eps (-1e-06)", "(0, 1]");
    expect_err("{\"family\": \"swax\", \"mlstm_norm_eps\": 2}", "mlstm_norm_eps (2)", NULL);
    expect_err("{\"family\": \"swax\", \"mlstm_norm_eps\": \"1e-5\"}", "\"mlstm_norm_eps\"", "number");
    phax_model_cfg d = phax_model_cfg_default(PHAX_FAMILY_SWAX);
    d.mlstm_norm_eps = NAN;
    cr_assert(phax_model_cfg_resolve(&d) == PHAX_ERR && strstr(phax_error(), "mlstm_norm_eps"), "%s", phax_error());
    d.mlstm_norm_eps = INFINITY;
    cr_assert(phax_model_cfg_resolve(&d) == PHAX_ERR && strstr(phax_error(), "mlstm_norm_eps"), "%s", phax_error());
}

// --- the Gated DeltaNet keys (swax_gdn): heads, the short convolution's kernel, the norm's eps ------
// Defaults n_heads, 4 and 1e-5 (flash-linear-attention's GatedDeltaNet), also for a config written
// before the keys existed; values round-trip; gdn_heads must divide d_model/2 in swax_gdn only.
Test(config, gdn_keys) {
    phax_model_cfg c;
    cr_assert(phax_model_cfg_from_json_str(&c, "{\"family\": \"swax_gdn\"}", "old.json") == PHAX_OK, "%s", phax_error());
    cr_assert(c.gdn_heads == c.n_heads && c.gdn_conv == 4 && c.gdn_norm_eps == 1e-5, "%d %d %g", c.gdn_heads,
              c.gdn_conv, c.gdn_norm_eps);
    cr_assert(phax_model_cfg_from_json_str(&c, "{\"family\": \"swax_gdn\", \"gdn_heads\": 2, \"gdn_conv\": 3, "
                                               "\"gdn_norm_eps\": 1e-6}", "x") == PHAX_OK, "%s", phax_error());
    cr_assert(c.gdn_heads == 2 && c.gdn_conv == 3 && c.gdn_norm_eps == 1e-6);
    expect_round_trip(&c, "gdn keys");
    expect_err("{\"family\": \"swax_gdn\", \"gdn_heads\": 5}", "gdn_heads (5)", "d_model/2 (32)");
    expect_err("{\"family\": \"swax_gdn\", \"d_model\": 63, \"head_dim\": 16}", "d_model (63)", "even");
    expect_err("{\"family\": \"swax_gdn\", \"gdn_conv\": -1}", "gdn_conv (-1)", NULL);
    expect_err("{\"family\": \"swax_gdn\", \"gdn_conv\": 257}", "gdn_conv (257)", "maximum 256");
    expect_err("{\"family\": \"swax_gdn\", \"gdn_norm_eps\": 2}", "gdn_norm_eps (2)", "(0, 1]");
    expect_err("{\"family\": \"pha\", \"gdn_heads\": -1}", "gdn_heads (-1)", NULL);
    // another family keeps the key and ignores it (as mlstm_heads in swa)
    cr_assert(phax_model_cfg_from_json_str(&c, "{\"family\": \"swax\", \"gdn_heads\": 5}", "x") == PHAX_OK, "%s",
              phax_error());
}

// A checkpoint written before the key existed (its config has no "mlstm_norm_eps") loads
// with the default 1e-6, so its results do not change; one written now keeps its value.
Test(config, mlstm_norm_eps_checkpoint) {
    static const char text[] = "the cat sat on the mat\nthe dog sat on the log\n";
    char *dir = tu_tmpdir("phax_cfg_eps");
    char *path = tu_join(dir, "m.safetensors"), *old = tu_join(dir, "old.safetensors");
    phax_ckpt ck = {0};
    cr_assert(phax_vocab_build_text((const uint8_t *)text, sizeof text - 1, "text", &ck.vocab) == PHAX_OK, "%s",
              phax_error());
    ck.cfg = phax_model_cfg_default(PHAX_FAMILY_SWAX);
    ck.cfg.vocab_size = (int)phax_vocab_size(ck.vocab), ck.cfg.d_model = 16, ck.cfg.n_heads = 2;
    ck.cfg.mlstm_norm_eps = 1e-5;
    cr_assert(phax_model_cfg_resolve(&ck.cfg) == PHAX_OK && phax_layout_build(&ck.layout, &ck.cfg) == PHAX_OK, "%s",
              phax_error());
    ck.params = calloc(ck.layout.numel, sizeof(float));
    cr_assert(ck.params && phax_ckpt_save(path, &ck) == PHAX_OK, "%s", phax_error());
    phax_ckpt in;
    cr_assert(phax_ckpt_load(path, -1, &in) == PHAX_OK, "%s", phax_error());
    cr_assert(in.cfg.mlstm_norm_eps == 1e-5, "%.17g", in.cfg.mlstm_norm_eps);
    phax_ckpt_free(&in);
    // The same file with the key removed from its config: as written before the key existed.
    phax_st_file f;
    cr_assert(phax_st_read(&f, path) == PHAX_OK, "%s", phax_error());
    json_t *cfg = json_loads(phax_st_meta(&f, "config"), 0, NULL);
    cr_assert(cfg && json_object_del(cfg, "mlstm_norm_eps") == 0);
    char *cfg_old = json_dumps(cfg, JSON_INDENT(2));
    json_decref(cfg);
    phax_st_writer *w = phax_st_writer_new();
    for (int i = 0; i < f.n; i++)
        cr_assert(phax_st_add_raw(w, f.t[i].name, f.t[i].dtype, f.t[i].ndim, f.t[i].shape, f.t[i].data) == PHAX_OK);
    for (int i = 0; i < f.nmeta; i++)
        cr_assert(phax_st_add_meta(w, f.meta_key[i], strcmp(f.meta_key[i], "config") ? f.meta_val[i] : cfg_old) ==
                  PHAX_OK);
    cr_assert(phax_st_write(w, old) == PHAX_OK, "%s", phax_error());
    phax_st_writer_free(w);
    phax_st_free(&f);
    free(cfg_old);
    // Its vocabulary file is the one beside m.safetensors: name it as old.safetensors expects.
    char *v1 = phax_ckpt_vocab_path(path), *v2 = phax_ckpt_vocab_path(old);
    cr_assert(v1 && v2 && link(v1, v2) == 0);
    cr_assert(phax_ckpt_load(old, -1, &in) == PHAX_OK, "%s", phax_error());
    cr_assert(in.cfg.mlstm_norm_eps == 1e-6, "%.17g", in.cfg.mlstm_norm_eps);
    phax_ckpt_free(&in);
    free(v1), free(v2);
    free(ck.params);
    phax_layout_free(&ck.layout);
    phax_vocab_free(ck.vocab);
    tu_rm_rf(dir);
    free(dir), free(path), free(old);
}

// --set KEY=VALUE (phax train, bench_decode): JSON values, bare words as strings, later wins;
// a missing or empty key, or a config that is not an object, is an error naming it.
Test(config, json_set_overrides) {
    char *j = strdup("{\"family\": \"swax\", \"d_model\": 64}");
    const char *sets[] = {"d_model=32", "score=cosine", "tie_embeddings=false", "d_model=48", "p_short=0.25"};
    cr_assert(phax_model_cfg_json_set(&j, sets, 5) == PHAX_OK, "%s", phax_error());
    phax_model_cfg c;
    cr_assert(phax_model_cfg_from_json_str(&c, j, "set") == PHAX_OK, "%s", phax_error());
    cr_assert(c.d_model == 48 && c.score_cosine == 1 && !c.tie_embeddings && c.p_short == 0.25,
              "got %s", j);
    const char *bad[] = {"=3", "novalue", "a_key_that_is_longer_than_sixty_four_characters_for_sure_yes_it_is=1"};
    for (int i = 0; i < 3; i++) {
        cr_assert(phax_model_cfg_json_set(&j, bad + i, 1) == PHAX_ERR, "%s accepted", bad[i]);
        cr_assert(strstr(phax_error(), bad[i]), "%s", phax_error());
    }
    free(j);
    j = strdup("[1, 2]");
    cr_assert(phax_model_cfg_json_set(&j, sets, 1) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "not a JSON object"), "%s", phax_error());
    free(j);
}
