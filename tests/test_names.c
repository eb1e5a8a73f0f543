// Name maps (core/names.c): their names onto phax's and back, layer patterns, gradients,
// and the refusals — each one line naming the map.
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "phax/core.h"
#include "phax/names.h"
#include "phax/safetensors.h"
#include "testutil.h"

static phax_names *parse(const char *json) { return phax_names_parse(json, strlen(json), "map.json"); }

#define HF                                                                                                          \
    "{\"model.embed_tokens.weight\": \"embed.weight\", "                                                         \
    "\"model.layers.{i}.self_attn.q_proj.weight\": \"blocks.{i}.attn.wq\", "                                     \
    "\"model.layers.7.self_attn.q_proj.weight\": \"blocks.seven.special\"}"

static void expect_map(const phax_names *m, int dir, const char *in, const char *want, int want_rc) {
    char out[300];
    int rc = dir ? phax_names_to_theirs(m, in, out, sizeof out) : phax_names_to_phax(m, in, out, sizeof out);
    cr_expect(rc == want_rc && !strcmp(out, want), "%s: got '%s' (rc %d), want '%s' (rc %d)", in, out, rc, want,
              want_rc);
}

Test(names, maps_both_ways) {
    phax_names *m = parse(HF);
    cr_assert(m, "%s", phax_error());
    expect_map(m, 0, "model.embed_tokens.weight", "embed.weight", 1);
    expect_map(m, 0, "model.layers.0.self_attn.q_proj.weight", "blocks.0.attn.wq", 1);
    expect_map(m, 0, "model.layers.12.self_attn.q_proj.weight", "blocks.12.attn.wq", 1);
    expect_map(m, 0, "model.layers.7.self_attn.q_proj.weight", "blocks.seven.special", 1);  // exact wins
    expect_map(m, 0, "grad.model.layers.3.self_attn.q_proj.weight", "grad.blocks.3.attn.wq", 1);
    expect_map(m, 0, "tokens", "tokens", 0);  // unmapped: unchanged
    // Not a layer number: sign, letters, leading zero, empty.
    expect_map(m, 0, "model.layers.-1.self_attn.q_proj.weight", "model.layers.-1.self_attn.q_proj.weight", 0);
    expect_map(m, 0, "model.layers.x.self_attn.q_proj.weight", "model.layers.x.self_attn.q_proj.weight", 0);
    expect_map(m, 0, "model.layers.01.self_attn.q_proj.weight", "model.layers.01.self_attn.q_proj.weight", 0);
    expect_map(m, 0, "model.layers..self_attn.q_proj.weight", "model.layers..self_attn.q_proj.weight", 0);
    expect_map(m, 1, "blocks.5.attn.wq", "model.layers.5.self_attn.q_proj.weight", 1);
    expect_map(m, 1, "grad.embed.weight", "grad.model.embed_tokens.weight", 1);
    expect_map(m, 1, "logits", "logits", 0);
    phax_names_free(m);
}

Test(names, refusals_are_one_line) {
    struct {
        const char *json, *frag;
    } bad[] = {
        {"[1, 2]", "must be a JSON object"},
        {"{\"a\": 3}", "must map to a string"},
        {"{\"a\": \"x\", \"b\": \"x\"}", "two names the phax name 'x'"},
        {"{\"a\": \"x\", \"a\": \"y\"}", "not valid JSON"},
        {"{\"a.{i}\": \"x\"}", "\"{i}\" must appear"},
        {"{\"a.{i}.{i}\": \"x.{i}.{i}\"}", "\"{i}\" must appear"},
        {"{\"\": \"x\"}", "names must be 1 to 255 bytes"},
        {"{\"a\": ", "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        phax_names *m = parse(bad[i].json);
        cr_expect(!m, "accepted %s", bad[i].json);
        const char *e = phax_error();
        cr_expect(strstr(e, "map.json") && strstr(e, bad[i].frag) && !strchr(e, '\n'), "%s: '%s'", bad[i].json, e);
        phax_names_free(m);
    }
    char *big = malloc(400);
    memset(big, 'a', 300);
    big[300] = 0;
    char *json = tu_xprintf("{\"%s\": \"x\"}", big);
    cr_expect(!parse(json) && strstr(phax_error(), "1 to 255 bytes"));
    free(big), free(json);
    // A file over the size limit is refused before it is parsed; a missing file names itself.
    char *dir = tu_tmpdir("phax_names"), *p = tu_join(dir, "big.json");
    size_t n = PHAX_NAMES_MAX_BYTES + 10;
    char *huge = malloc(n);
    memset(huge, ' ', n);
    tu_write_file(p, huge, n);
    cr_expect(!phax_names_load(p) && strstr(phax_error(), "more than the limit"), "%s", phax_error());
    free(huge);
    char *q = tu_join(dir, "none.json");
    cr_expect(!phax_names_load(q) && strstr(phax_error(), "none.json") && strstr(phax_error(), "cannot open"));
    tu_rm_rf(dir), free(dir), free(p), free(q);
}

Test(names, apply_renames_a_file_and_refuses_collisions) {
    char *dir = tu_tmpdir("phax_names"), *p = tu_join(dir, "in.safetensors");
    double x[2] = {1, 2};
    int64_t s[1] = {2};
    phax_st_writer *w = phax_st_writer_new();
    cr_assert(w && !phax_st_add_f64(w, "model.layers.1.self_attn.q_proj.weight", x, 1, s) &&
              !phax_st_add_f64(w, "grad.model.embed_tokens.weight", x, 1, s) && !phax_st_add_f64(w, "tokens", x, 1, s));
    cr_assert(!phax_st_write(w, p), "%s", phax_error());
    phax_st_writer_free(w);
    phax_names *m = parse(HF);
    phax_st_file f = {0};
    cr_assert(!phax_st_read(&f, p), "%s", phax_error());
    cr_assert(!phax_names_apply(m, &f), "%s", phax_error());
    cr_expect(phax_st_find(&f, "blocks.1.attn.wq") && phax_st_find(&f, "grad.embed.weight") &&
              phax_st_find(&f, "tokens"));
    phax_st_free(&f);
    phax_names_free(m);
    // A map that sends a name onto one the file already has: refused, the file unchanged.
    m = parse("{\"tokens\": \"blocks.1.attn.wq\", \"model.layers.{i}.self_attn.q_proj.weight\": \"blocks.{i}.attn.wq\"}");
    cr_assert(m, "%s", phax_error());
    cr_assert(!phax_st_read(&f, p));
    cr_expect(phax_names_apply(m, &f) == PHAX_ERR && strstr(phax_error(), "would both be 'blocks.1.attn.wq'"), "%s",
              phax_error());
    cr_expect(phax_st_find(&f, "tokens") && phax_st_find(&f, "model.layers.1.self_attn.q_proj.weight"));
    phax_st_free(&f);
    phax_names_free(m);
    tu_rm_rf(dir), free(dir), free(p);
}

// `phax oracle --names` and `phax check --names` end to end: a linear layer's IN under a
// user's names gives the same numbers as under phax's, written back under the user's names;
// phax check judges a THEIRS in the user's names and reports rows by them.
static void rename_copy(const char *from, const char *to, const char *const *map2) {
    phax_st_file f = {0};
    cr_assert(!phax_st_read(&f, from), "%s", phax_error());
    phax_st_writer *w = phax_st_writer_new();
    cr_assert(w);
    for (int i = 0; i < f.n; i++) {
        const char *nm = f.t[i].name;
        for (int j = 0; map2[j]; j += 2)
            if (!strcmp(nm, map2[j])) nm = map2[j + 1];
        double *x = malloc((f.t[i].numel ? f.t[i].numel : 1) * sizeof *x);
        cr_assert(x && !phax_st_to_f64(&f.t[i], x));
        cr_assert(!phax_st_add_f64(w, nm, x, f.t[i].ndim, f.t[i].shape), "%s", phax_error());
        free(x);
    }
    for (int i = 0; i < f.nmeta; i++) cr_assert(!phax_st_add_meta(w, f.meta_key[i], f.meta_val[i]));
    cr_assert(!phax_st_write(w, to), "%s", phax_error());
    phax_st_writer_free(w);
    phax_st_free(&f);
}

Test(names, oracle_and_check_take_a_map) {
    char *dir = tu_tmpdir("phax_names");
    char *in = tu_join(dir, "in.st"), *out = tu_join(dir, "out.st"), *in2 = tu_join(dir, "in2.st"),
         *out2 = tu_join(dir, "out2.st"), *map = tu_join(dir, "map.json"), *o = tu_join(dir, "o"), *e = tu_join(dir, "e");
    const char *json = "{\"input\": \"x\", \"proj.weight\": \"weight\", \"proj.bias\": \"bias\", \"output\": \"y\"}";
    tu_write_file(map, json, strlen(json));
    cr_assert(tu_phax(o, e, NULL, NULL, "oracle", "linear", "--example", in, NULL) == 0);
    cr_assert(tu_phax(o, e, NULL, NULL, "oracle", "linear", in, out, NULL) == 0);
    const char *const to_theirs[] = {"x", "input", "weight", "proj.weight", "bias", "proj.bias", "grad.y", "grad.output",
                                     NULL};
    rename_copy(in, in2, to_theirs);
    int rc = tu_phax(o, e, NULL, NULL, "oracle", "--names", map, "linear", in2, out2, NULL);
    cr_assert(rc == 0, "phax oracle --names: %s", tu_slurp(e, NULL));
    phax_st_file a = {0}, b = {0};
    cr_assert(!phax_st_read(&a, out) && !phax_st_read(&b, out2));
    const char *pairs[] = {"y", "output", "grad.x", "grad.input", "grad.weight", "grad.proj.weight", "grad.bias",
                           "grad.proj.bias", NULL};
    for (int i = 0; pairs[i]; i += 2) {
        const phax_st_tensor *ta = phax_st_find(&a, pairs[i]), *tb = phax_st_find(&b, pairs[i + 1]);
        cr_assert(ta && tb, "%s / %s", pairs[i], pairs[i + 1]);
        cr_expect(ta->nbytes == tb->nbytes && !memcmp(ta->data, tb->data, ta->nbytes), "%s differs", pairs[i + 1]);
        cr_expect(!phax_st_find(&b, pairs[i]), "%s written under phax's name", pairs[i]);
    }
    phax_st_free(&a), phax_st_free(&b);
    // phax check on the user's names: the truth itself PASSes, rows carry their names.
    rc = tu_phax(o, e, NULL, NULL, "check", "--names", map, "linear", in2, out2, NULL);
    char *txt = tu_slurp(o, NULL);
    cr_expect(rc == 0 && strstr(txt, "grad.proj.weight") && strstr(txt, "PASS"), "check --names: rc %d\n%s", rc, txt);
    free(txt);
    // Without the map the user's names are refused, in one line naming the tensor.
    rc = tu_phax(o, e, NULL, NULL, "oracle", "linear", in2, out2, NULL);
    txt = tu_slurp(e, NULL);
    cr_expect(rc != 0 && strstr(txt, "'input'") && strchr(txt, '\n') == txt + strlen(txt) - 1, "%s", txt);
    free(txt);
    // A bad map: one line naming it, nothing written.
    tu_write_file(map, "{\"input\": 1}", 12);
    char *out3 = tu_join(dir, "out3.st");
    rc = tu_phax(o, e, NULL, NULL, "oracle", "--names", map, "linear", in2, out3, NULL);
    txt = tu_slurp(e, NULL);
    cr_expect(rc != 0 && strstr(txt, "map.json") && !tu_exists(out3), "%s", txt);
    free(txt);
    rc = tu_phax(o, e, NULL, NULL, "check", "--names", map, "linear", in2, out2, NULL);
    txt = tu_slurp(e, NULL);
    cr_expect(rc == 2 && strstr(txt, "map.json"), "rc %d: %s", rc, txt);
    free(txt);
    tu_rm_rf(dir);
    free(dir), free(in), free(out), free(in2), free(out2), free(map), free(o), free(e), free(out3);
}

// The largest map allowed, every name looked up both ways, and a duplicate target among 65,536
// entries found: all by sorting and binary search (the timeout guards against a quadratic scan,
// ~2·10⁹ comparisons at this size).
Test(names, largest_map, .timeout = 60) {
    size_t cap = (size_t)PHAX_NAMES_MAX_ENTRIES * 48 + 16, o = 0;
    char *json = malloc(cap);
    cr_assert(json);
    o += (size_t)snprintf(json + o, cap - o, "{");
    for (int i = 0; i < PHAX_NAMES_MAX_ENTRIES; i++)
        o += (size_t)snprintf(json + o, cap - o, "%s\"their.%d\": \"phax.%d\"", i ? ", " : "", i, (i * 7919) % 65536);
    o += (size_t)snprintf(json + o, cap - o, "}");
    phax_names *m = phax_names_parse(json, o, "map.json");
    cr_assert(m, "%s", phax_error());
    char name[64], want[64], out[300];
    int bad = 0;
    for (int i = 0; i < PHAX_NAMES_MAX_ENTRIES; i++) {
        snprintf(name, sizeof name, "their.%d", i), snprintf(want, sizeof want, "phax.%d", (i * 7919) % 65536);
        bad += phax_names_to_phax(m, name, out, sizeof out) != 1 || strcmp(out, want);
        bad += phax_names_to_theirs(m, want, out, sizeof out) != 1 || strcmp(out, name);
    }
    cr_expect(bad == 0, "%d lookups wrong", bad);
    phax_names_free(m);
    // The same map with the last target repeated: refused, naming both keys.
    char *last = strrchr(json, ':');
    snprintf(last, cap - (size_t)(last - json), ": \"phax.0\"}");
    cr_expect(!phax_names_parse(json, strlen(json), "map.json") && strstr(phax_error(), "two names the phax name 'phax.0'"),
              "%s", phax_error());
    free(json);
}
