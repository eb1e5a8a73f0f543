// Writes the fuzz seed corpora and the crafted regression inputs with phax's
// own writers (safetensors writer, phax_ckpt_save, phax_vocab_save, the token
// cache, `phax oracle OP --example`, liblzma for .xz):
//   fuzz_gen_seeds DIR        → DIR/seeds/<harness>/*, DIR/regress/<harness>/*
// (DIR is tests/fuzz; see README.md there). Regression inputs named *.refuse.*
// must be refused by the code under test (the replay checks it). Existing
// files of other names are left alone (fuzz-found reproducers live beside these).
#include <errno.h>
#include <lzma.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "phax/checkpoint.h"
#include "phax/data.h"
#include "phax/model.h"
#include "phax/safetensors.h"
#include "phax/tokenizer.h"

int phax_oracle_main(int argc, char **argv);

static const char *root;
static char tmp[4096];

static void die(const char *what) {
    fprintf(stderr, "fuzz_gen_seeds: %s: %s\n", what, phax_error()[0] ? phax_error() : strerror(errno));
    exit(1);
}

static char *path_of(const char *kind, const char *harness, const char *name) {
    static char p[4][4400];
    static int k;
    char *s = p[k++ & 3];
    snprintf(s, sizeof p[0], "%s/%s/%s", root, kind, harness);
    if (phax_mkdir_p(s)) die(s);
    snprintf(s, sizeof p[0], "%s/%s/%s/%s", root, kind, harness, name);
    return s;
}

static char *tmp_path(const char *name) {
    static char p[16][4400];
    static int k;
    char *s = p[k++ & 15];
    snprintf(s, sizeof p[0], "%s/%s", tmp, name);
    return s;
}

static void write_bytes(const char *path, const void *d, size_t n) {
    if (phax_write_file_atomic(path, d, n)) die(path);
}

static uint8_t *slurp(const char *path, size_t *n) {
    uint8_t *b;
    if (phax_data_read_raw(path, &b, n, NULL)) die(path);
    return b;
}

// Parts joined as fz_split reads them: (k − 1) u32 lengths, then the parts.
static void write_parts(const char *path, int k, const char *const *files) {
    uint8_t *buf = NULL;
    size_t n = 4 * (size_t)(k - 1);
    buf = calloc(n, 1);
    for (int i = 0; i < k; i++) {
        size_t m = 0;
        uint8_t *b = files[i] ? slurp(files[i], &m) : NULL;
        if (i < k - 1)
            for (int j = 0; j < 4; j++) buf[4 * i + j] = (uint8_t)(m >> (8 * j));
        buf = realloc(buf, n + m + 1);
        if (m) memcpy(buf + n, b, m);
        n += m;
        free(b);
    }
    write_bytes(path, buf, n);
    free(buf);
}

// --- safetensors ------------------------------------------------------------------------------
static void seeds_safetensors(void) {
    phax_st_writer *w = phax_st_writer_new();
    double x[6] = {1, -2.5, 3e-3, 0, -0.0, 1e30};
    int32_t i32[4] = {1, -2, 3, 2147483647};
    int64_t i64[3] = {-1, 0, (int64_t)1 << 40};
    uint8_t raw[8] = {0x00, 0x3c, 0x00, 0xc0, 0x80, 0x3f, 0xff, 0x7f};
    int64_t s23[2] = {2, 3}, s4[1] = {4}, s3[1] = {3}, s0[1] = {0}, s22[2] = {2, 2};
    if (phax_st_add_f64(w, "x64", x, 2, s23) || phax_st_add_f32_from_f64(w, "x32", x, 2, s23) ||
        phax_st_add_i32(w, "i32", i32, 1, s4) || phax_st_add_i64(w, "i64", i64, 1, s3) ||
        phax_st_add_raw(w, "f16", PHAX_DT_F16, 2, s22, raw) || phax_st_add_raw(w, "bf16", PHAX_DT_BF16, 1, s4, raw) ||
        phax_st_add_raw(w, "u8", PHAX_DT_U8, 1, s4, raw) || phax_st_add_raw(w, "f8", PHAX_DT_F8_E4M3, 1, s4, raw) ||
        phax_st_add_raw(w, "bool", PHAX_DT_BOOL, 1, s3, (const uint8_t[]){0, 1, 1}) ||
        phax_st_add_raw(w, "empty", PHAX_DT_F32, 1, s0, NULL) || phax_st_add_f64(w, "scalar", x + 1, 0, NULL) ||
        phax_st_add_meta(w, "format", "pt") || phax_st_add_meta(w, "note", "seed \"quoted\" \xc3\xa9"))
        die("safetensors seed");
    if (phax_st_write(w, path_of("seeds", "safetensors", "dtypes.safetensors"))) die("write");
    phax_st_writer_free(w);
    w = phax_st_writer_new();
    if (phax_st_write(w, path_of("seeds", "safetensors", "empty.safetensors"))) die("write");
    phax_st_writer_free(w);
}

// --- configs ------------------------------------------------------------------------------------
static void seeds_config(void) {
    for (int f = 0; f < PHAX_FAMILY_COUNT; f++) {
        phax_model_cfg c = phax_model_cfg_default((phax_family)f);
        if (phax_model_cfg_resolve(&c)) die("config");
        char name[64];
        snprintf(name, sizeof name, "%s.json", phax_family_name((phax_family)f));
        if (phax_model_cfg_write_json_file(&c, path_of("seeds", "config", name))) die(name);
    }
    // Short hand-written forms (defaults filled by the reader).
    const char *shortc[] = {"{\"family\": \"swax\", \"mixer_order\": \"swa_first\", \"score\": \"dot\", \"w_short\": 4}",
                            "{\"family\": \"pha\", \"use_gss\": false, \"ffn_separate_mix\": true, \"d_model\": 48.0}",
                            NULL};
    for (int i = 0; shortc[i]; i++) {
        char name[32];
        snprintf(name, sizeof name, "short%d.json", i);
        write_bytes(path_of("seeds", "config", name), shortc[i], strlen(shortc[i]));
    }
}

// --- checkpoints --------------------------------------------------------------------------------
static phax_model_cfg tiny_cfg(phax_family f, int vocab) {
    phax_model_cfg c = phax_model_cfg_default(f);
    c.vocab_size = vocab, c.d_model = 8, c.n_layers = 2, c.n_heads = 2, c.n_kv_heads = 1, c.ffn_hidden = 8;
    c.gss_state = 4, c.gss_expand = 8, c.gss_hidden = 2, c.mlstm_heads = 2;
    if (phax_model_cfg_resolve(&c)) die("tiny config");
    return c;
}

// A checkpoint (model, vocab, state) in tmp; returns the model path.
static const char *make_ckpt(phax_family fam, phax_vocab *v, phax_dtype state_dt, int nan_at) {
    phax_ckpt ck = {0};
    ck.cfg = tiny_cfg(fam, (int)phax_vocab_size(v));
    if (phax_layout_build(&ck.layout, &ck.cfg)) die("layout");
    size_t n = ck.layout.numel;
    double *p = calloc(n, sizeof *p);
    ck.params = calloc(n, sizeof *ck.params);
    if (phax_model_init(p, &ck.layout, &ck.cfg, 7)) die("init");
    for (size_t i = 0; i < n; i++) ck.params[i] = (float)p[i];
    if (nan_at >= 0) ck.params[nan_at] = NAN;
    ck.vocab = v, ck.step = 3, ck.tokens_seen = 3 * 2 * 16, ck.train_batch = 2, ck.train_seq = 16;
    const char *model = tmp_path("checkpoint.safetensors");
    if (phax_ckpt_save(model, &ck)) die("ckpt save");
    phax_ckpt_state s = {.step = 3, .dtype = state_dt};
    size_t es = phax_dtype_size(state_dt);
    s.m = calloc(n, es), s.v = calloc(n, es);
    if (state_dt == PHAX_DT_F64) s.master = p;
    s.options_json = (char *)"{\"lr\": 0.001}", s.rng_json = (char *)"{\"seed\": 1}";
    s.data_json = (char *)"{\"valid\": null}";
    if (phax_ckpt_state_save(tmp_path("checkpoint.state.safetensors"), &ck.layout, &s)) die("state save");
    free(s.m), free(s.v), free(p), free(ck.params);
    phax_layout_free(&ck.layout);
    return model;
}

static void ckpt_parts(const char *out) {
    const char *files[3] = {tmp_path("checkpoint.safetensors"), tmp_path("checkpoint.vocab"),
                            tmp_path("checkpoint.state.safetensors")};
    write_parts(out, 3, files);
}

static const char TEXT[] = "the cat sat on the mat\n = heading = \nthe dog <unk> ran\n\n";

static void seeds_checkpoint(void) {
    phax_vocab *word, *byte;
    if (phax_vocab_build_text((const uint8_t *)TEXT, sizeof TEXT - 1, "text", &word) || phax_vocab_byte(&byte))
        die("vocab");
    make_ckpt(PHAX_FAMILY_PHA, word, PHAX_DT_F32, -1);
    ckpt_parts(path_of("seeds", "checkpoint", "pha_word_f32.bin"));
    make_ckpt(PHAX_FAMILY_SWAX, word, PHAX_DT_F64, -1);
    ckpt_parts(path_of("seeds", "checkpoint", "swax_word_f64.bin"));
    make_ckpt(PHAX_FAMILY_TRANSFORMER, byte, PHAX_DT_F32, -1);
    // Byte vocab: 256 × d parameters; keep the seed small by leaving the state out.
    const char *files[3] = {tmp_path("checkpoint.safetensors"), tmp_path("checkpoint.vocab"), NULL};
    write_parts(path_of("seeds", "checkpoint", "transformer_byte.bin"), 3, files);

    // Regression (issue 11 item 9): a NaN weight must be refused at load.
    make_ckpt(PHAX_FAMILY_PHA, word, PHAX_DT_F32, 5);
    ckpt_parts(path_of("regress", "checkpoint", "nan_weight.refuse.bin"));
    phax_vocab_free(word);
    phax_vocab_free(byte);
}

// A model file whose config metadata is `cfg_json` and whose tensors are the
// given (name, F32 rows × cols, all 0.5), with the counters a checkpoint has.
static void crafted_ckpt(const char *out, const char *cfg_json, const char *tensor, int64_t rows, int64_t cols) {
    phax_st_writer *w = phax_st_writer_new();
    if (tensor) {
        size_t n = (size_t)(rows * cols);
        double *x = malloc(n * sizeof *x);
        for (size_t i = 0; i < n; i++) x[i] = 0.5;
        int64_t s[2] = {rows, cols};
        if (phax_st_add_f32_from_f64(w, tensor, x, 2, s)) die("crafted tensor");
        free(x);
    }
    if (phax_st_add_meta(w, "format", PHAX_CKPT_FORMAT) || phax_st_add_meta(w, "config", cfg_json) ||
        phax_st_add_meta(w, "vocab", "checkpoint.vocab") || phax_st_add_meta(w, "vocab_hash", "0000000000000000") ||
        phax_st_add_meta(w, "step", "1") || phax_st_add_meta(w, "tokens_seen", "1"))
        die("crafted meta");
    if (phax_st_write(w, tmp_path("checkpoint.safetensors"))) die("crafted write");
    phax_st_writer_free(w);
    const char *files[3] = {tmp_path("checkpoint.safetensors"), NULL, NULL};
    write_parts(out, 3, files);
}

static void regress_checkpoint(void) {
    // Item 1: n_heads 65537 × head_dim 32768 wraps int to q = −2147450880. Transformer,
    // d 2, tied, dot score, 1 layer, n_kv_heads 1: the layout total is
    // d (V + 3 + 2q + 2·32768 + 3F) mod 2^64 = 2 (200 + 65539 − 4294901760 + 3·1431612008) = 6
    // elements, while embed.weight (200 × 2) is copied in first: a heap overflow.
    crafted_ckpt(path_of("regress", "checkpoint", "heads65537_heap_overflow.bin"),
                 "{\"family\":\"transformer\",\"vocab_size\":200,\"d_model\":2,\"n_layers\":1,\"n_heads\":65537,"
                 "\"n_kv_heads\":1,\"head_dim\":32768,\"score\":\"dot\",\"ffn_hidden\":1431612008}",
                 "embed.weight", 200, 2);
    // Item 2: a small file whose config needs GBs of parameters (allocated before any tensor is
    // checked; here ~3.2 GB of float) and n_layers 2e8 (the layout itself grows without bound).
    crafted_ckpt(path_of("regress", "checkpoint", "d8192_params_3GB.bin"),
                 "{\"family\":\"transformer\",\"vocab_size\":256,\"d_model\":8192,\"n_layers\":1,\"n_heads\":64}",
                 "embed.weight", 4, 2);
    crafted_ckpt(path_of("regress", "checkpoint", "n_layers_2e8.bin"),
                 "{\"family\":\"transformer\",\"vocab_size\":256,\"d_model\":8,\"n_layers\":200000000,\"n_heads\":2}",
                 NULL, 0, 0);
}

static void regress_config(void) {
    const char *c1 = "{\"family\":\"transformer\",\"n_layers\":200000000}";
    write_bytes(path_of("regress", "config", "n_layers_2e8.json"), c1, strlen(c1));
    const char *c2 = "{\"family\":\"transformer\",\"vocab_size\":200,\"d_model\":2,\"n_layers\":1,\"n_heads\":65537,"
                     "\"n_kv_heads\":1,\"head_dim\":32768,\"score\":\"dot\",\"ffn_hidden\":1431612008}";
    write_bytes(path_of("regress", "config", "heads65537_int_overflow.json"), c2, strlen(c2));
}

// --- vocabularies and text ---------------------------------------------------------------------
static void seeds_vocab(void) {
    phax_vocab *word, *byte;
    if (phax_vocab_build_text((const uint8_t *)TEXT, sizeof TEXT - 1, "text", &word) || phax_vocab_byte(&byte))
        die("vocab");
    if (phax_vocab_save(word, tmp_path("w.vocab")) || phax_vocab_save(byte, tmp_path("b.vocab"))) die("vocab save");
    write_bytes(tmp_path("text"), TEXT, sizeof TEXT - 1);
    const char *wf[2] = {tmp_path("w.vocab"), tmp_path("text")}, *bf[2] = {tmp_path("b.vocab"), tmp_path("text")};
    write_parts(path_of("seeds", "vocab", "word.bin"), 2, wf);
    write_parts(path_of("seeds", "vocab", "byte.bin"), 2, bf);
    phax_vocab_free(word);
    phax_vocab_free(byte);
}

// --- corpora and token caches --------------------------------------------------------------------
static void xz_write(const char *path, const uint8_t *text, size_t n, int streams) {
    size_t cap = n + n / 2 + 4096, len = 0;
    uint8_t *out = malloc(cap * (size_t)streams);
    for (int s = 0; s < streams; s++) {
        size_t pos = 0;
        if (lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, NULL, text, n, out + len, &pos, cap) != LZMA_OK)
            die("xz encode");
        len += pos;
    }
    write_bytes(path, out, len);
    free(out);
}

// n zero bytes as one .xz stream, encoded in pieces (no n-byte buffer).
static void xz_zeros(const char *path, uint64_t n) {
    lzma_stream z = LZMA_STREAM_INIT;
    if (lzma_easy_encoder(&z, 6, LZMA_CHECK_CRC64) != LZMA_OK) die("xz encoder");
    static uint8_t in[1 << 20], out[1 << 16];
    uint8_t *all = NULL;
    size_t len = 0;
    uint64_t left = n;
    lzma_ret r = LZMA_OK;
    while (r != LZMA_STREAM_END) {
        if (z.avail_in == 0 && left) {
            z.next_in = in, z.avail_in = left < sizeof in ? (size_t)left : sizeof in;
            left -= z.avail_in;
        }
        z.next_out = out, z.avail_out = sizeof out;
        r = lzma_code(&z, left || z.avail_in ? LZMA_RUN : LZMA_FINISH);
        if (r != LZMA_OK && r != LZMA_STREAM_END) die("xz code");
        size_t got = sizeof out - z.avail_out;
        all = realloc(all, len + got + 1);
        memcpy(all + len, out, got);
        len += got;
    }
    lzma_end(&z);
    write_bytes(path, all, len);
    free(all);
}

static void seeds_corpus(void) {
    write_bytes(path_of("seeds", "corpus", "plain.txt"), TEXT, sizeof TEXT - 1);
    xz_write(path_of("seeds", "corpus", "one_stream.xz"), (const uint8_t *)TEXT, sizeof TEXT - 1, 1);
    xz_write(path_of("seeds", "corpus", "two_streams.xz"), (const uint8_t *)TEXT, sizeof TEXT - 1, 2);
    // Item 2: an .xz bomb, 1 GB of zeros in ~150 kB; reading it must be refused (bounded).
    xz_zeros(path_of("regress", "corpus", "bomb_1GB.refuse.xz"), (uint64_t)1 << 30);
}

static void seeds_tokcache(void) {
    phax_vocab *byte;
    if (phax_vocab_byte(&byte)) die("vocab");
    char src[4400];
    snprintf(src, sizeof src, "%s", tmp_path("src.txt"));
    write_bytes(src, TEXT, sizeof TEXT - 1);
    int32_t *ids;
    size_t n;
    char *cpath;
    if (phax_tokens_load_cached_ex(byte, src, tmp_path("cache"), &ids, &n, NULL, &cpath)) die("cache");
    free(ids);
    size_t cn;
    uint8_t *c = slurp(cpath, &cn);
    for (int flags = 0; flags < 4; flags += 3) {  // 0: as written, 3: header and payload hash fixed up
        uint8_t *img = malloc(cn + 1);
        img[0] = (uint8_t)flags;
        memcpy(img + 1, c, cn);
        write_bytes(tmp_path("img"), img, cn + 1);
        free(img);
        const char *files[2] = {src, tmp_path("img")};
        char name[32];
        snprintf(name, sizeof name, "byte_flags%d.bin", flags);
        write_parts(path_of("seeds", "tokcache", name), 2, files);
    }
    free(c), free(cpath);
    phax_vocab_free(byte);
}

// --- oracle ----------------------------------------------------------------------------------------
static const char *const OPS[] = {"embedding", "linear", "rmsnorm", "layernorm", "headnorm", "gelu", "silu",
                                  "swiglu", "rope", "attention", "dss_kernel", "ssm_conv", "ssm_recurrent",
                                  "mlstm", "gdn", "mix", "cross_entropy", "adamw", "model", NULL};

static const char *example(const char *op) {
    const char *p = tmp_path("example.safetensors");
    char *argv[] = {"oracle", (char *)op, "--example", (char *)p, NULL};
    if (phax_oracle_main(4, argv)) die(op);
    return p;
}

// The example of `op`, with tensor `drop` left out, metadata key `rename` → `to`
// (or `to` set to `value` when rename is NULL), and an extra F64 tensor `extra` of shape `like`'s.
static void variant(const char *op, const char *out, const char *rename, const char *to, const char *value,
                    const char *extra, const char *like) {
    phax_st_file f = {0};
    if (phax_st_read(&f, example(op))) die(op);
    phax_st_writer *w = phax_st_writer_new();
    int rc = 0;
    for (int i = 0; i < f.nmeta; i++) {
        const char *k = f.meta_key[i];
        if (rename && !strcmp(k, rename)) k = to;
        else if (!rename && to && !strcmp(k, to)) continue;
        rc |= phax_st_add_meta(w, k, f.meta_val[i]);
    }
    if (!rename && to) rc |= phax_st_add_meta(w, to, value);
    for (int i = 0; i < f.n; i++) {
        const phax_st_tensor *t = &f.t[i];
        rc |= phax_st_add_raw(w, t->name, t->dtype, t->ndim, t->shape, t->data);
        if (extra && !strcmp(t->name, like)) rc |= phax_st_add_raw(w, extra, t->dtype, t->ndim, t->shape, t->data);
    }
    if (rc || phax_st_write(w, out)) die(out);
    phax_st_writer_free(w);
    phax_st_free(&f);
}

static void seeds_oracle(void) {
    for (int i = 0; OPS[i]; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s.safetensors", OPS[i]);
        size_t n;
        uint8_t *b = slurp(example(OPS[i]), &n);
        write_bytes(path_of("seeds", "oracle", name), b, n);
        // The safetensors reader gets the same files as seeds.
        write_bytes(path_of("seeds", "safetensors", name), b, n);
        free(b);
    }
    // Item 2: dss_kernel with T = 2^24 from a few hundred bytes (GBs of output).
    variant("dss_kernel", path_of("regress", "oracle", "dss_kernel_T2p24.safetensors"), NULL, "T", "16777216",
            NULL, NULL);
    // Item 10: what the oracle must refuse instead of ignoring.
    variant("attention", path_of("regress", "oracle", "attention_windw.refuse.safetensors"), "window", "windw",
            NULL, NULL, NULL);
    variant("attention", path_of("regress", "oracle", "attention_extra_tensor.refuse.safetensors"), NULL, NULL,
            NULL, "logscal", "logscale");
    variant("model", path_of("regress", "oracle", "model_lm_head_tied.refuse.safetensors"), NULL, NULL, NULL,
            "lm_head.weight", "embed.weight");
    variant("mlstm", path_of("regress", "oracle", "mlstm_m0_parallel.refuse.safetensors"), NULL, "m0", "2",
            NULL, NULL);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_gen_seeds DIR (tests/fuzz)\n");
        return 2;
    }
    root = argv[1];
    const char *t = getenv("TMPDIR");
    snprintf(tmp, sizeof tmp, "%s/phax-seeds.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmp)) die("mkdtemp");
    seeds_safetensors();
    seeds_config();
    regress_config();
    seeds_checkpoint();
    regress_checkpoint();
    seeds_vocab();
    seeds_corpus();
    seeds_tokcache();
    seeds_oracle();
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) fprintf(stderr, "fuzz_gen_seeds: could not remove %s\n", tmp);
    printf("fuzz_gen_seeds: wrote the seeds and regression inputs under %s\n", root);
    return 0;
}
