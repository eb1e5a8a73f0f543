// tokenizer: word and byte tokenizers on a hand fixture, vocabulary files and
// their errors, the token cache, and (when the shared data is present) the
// published WikiText-2 and PTB token and vocabulary counts.
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <lzma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "phax/data.h"
#include "phax/tokenizer.h"
#include "testutil.h"

// --- helpers ---------------------------------------------------------------------------------

static void write_str(const char *path, const char *s) { tu_write_file(path, s, strlen(s)); }

static uint8_t *read_all(const char *path, size_t *n) {
    uint8_t *b;
    cr_assert(phax_data_read_raw(path, &b, n, NULL) == PHAX_OK, "%s", phax_error());
    return b;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void assert_ids(const int32_t *got, size_t n, const int32_t *want, size_t wn) {
    cr_assert(n == wn, "%zu tokens, expected %zu", n, wn);
    for (size_t i = 0; i < n; i++)
        cr_assert(got[i] == want[i], "token %zu: id %d, expected %d", i, (int)got[i], (int)want[i]);
}

// --- the hand fixture --------------------------------------------------------------------------
// Runs of spaces and tabs, an empty line, a blank line, UTF-8 words, \r\v\f as
// whitespace, a literal <unk>, and no final newline (so no final <eos>).
static const char FIXTURE[] = "the cat  sat\n"        // the cat sat <eos>
                              "\n"                    // <eos>
                              "\t the\tdog \n"        // the dog <eos>
                              "   \n"                 // <eos>
                              "naïve café cat\r\n"    // naïve café cat <eos>
                              "<unk> dog\v\fthe";      // <unk> dog the
// First-occurrence order: the 0, cat 1, sat 2, <eos> 3, dog 4, naïve 5, café 6, <unk> 7.
static const char *FIXTURE_VOCAB[] = {"the", "cat", "sat", "<eos>", "dog", "naïve", "café", "<unk>"};
static const int32_t FIXTURE_IDS[] = {0, 1, 2, 3, 3, 0, 4, 3, 3, 5, 6, 1, 3, 7, 4, 0};
static const char FIXTURE_VOCAB_FILE[] =
    "phax-vocab word 8\nthe\ncat\nsat\n<eos>\ndog\nnaïve\ncafé\n<unk>\n";

static phax_vocab *fixture_vocab(void) {
    phax_vocab *v;
    cr_assert(phax_vocab_build_text((const uint8_t *)FIXTURE, strlen(FIXTURE), "fixture", &v) ==
                  PHAX_OK,
              "%s", phax_error());
    return v;
}

Test(tokenizer, fixture_vocab_and_ids) {
    phax_vocab *v = fixture_vocab();
    cr_assert(phax_vocab_kind(v) == PHAX_TOK_WORD);
    cr_assert(phax_vocab_size(v) == 8, "vocab %zu", phax_vocab_size(v));
    for (int32_t i = 0; i < 8; i++) {
        size_t len;
        const char *t = phax_vocab_token(v, i, &len);
        cr_assert(t && len == strlen(FIXTURE_VOCAB[i]) && strcmp(t, FIXTURE_VOCAB[i]) == 0,
                  "id %d is '%s'", (int)i, t ? t : "(null)");
        cr_assert(phax_vocab_id(v, FIXTURE_VOCAB[i], strlen(FIXTURE_VOCAB[i])) == i);
    }
    cr_assert(phax_vocab_token(v, 8, NULL) == NULL && phax_vocab_token(v, -1, NULL) == NULL);
    cr_assert(phax_vocab_id(v, "bird", 4) == -1);
    cr_assert(phax_vocab_id(v, "th", 2) == -1, "a prefix is not a match");
    cr_assert(phax_vocab_eos(v) == 3 && phax_vocab_unk(v) == 7);
    int32_t *ids;
    size_t n;
    cr_assert(phax_encode(v, (const uint8_t *)FIXTURE, strlen(FIXTURE), "fixture", &ids, &n) ==
              PHAX_OK);
    assert_ids(ids, n, FIXTURE_IDS, 16);
    free(ids);
    // A text with a final newline gets the final <eos>; only whitespace gives no tokens.
    cr_assert(phax_encode(v, (const uint8_t *)"dog\n", 4, "t", &ids, &n) == PHAX_OK);
    assert_ids(ids, n, (const int32_t[]){4, 3}, 2);
    free(ids);
    cr_assert(phax_encode(v, (const uint8_t *)" \t \r", 4, "t", &ids, &n) == PHAX_OK);
    cr_assert(n == 0 && ids != NULL);
    free(ids);
    phax_vocab_free(v);
}

// Words outside the vocabulary become <unk> when the vocabulary has it.
Test(tokenizer, unk_mapping) {
    phax_vocab *v = fixture_vocab();
    const char *text = "the bird\nzebra cat\n<unk>";
    int32_t *ids;
    size_t n;
    cr_assert(phax_encode(v, (const uint8_t *)text, strlen(text), "valid", &ids, &n) == PHAX_OK);
    assert_ids(ids, n, (const int32_t[]){0, 7, 3, 7, 1, 3, 7}, 7);
    free(ids);
    phax_vocab_free(v);
}

Test(tokenizer, unknown_word_error) {
    char *d = tu_tmpdir("phax_tok"), *p = tu_join(d, "valid.txt"), msg[700];
    phax_vocab *v;  // a 0, b 1, <eos> 2, c 3; no <unk>
    cr_assert(phax_vocab_build_text((const uint8_t *)"a b\nc\n", 6, "train", &v) == PHAX_OK);
    cr_assert(phax_vocab_unk(v) == -1 && phax_vocab_size(v) == 4);
    write_str(p, "a b\nc d\n");
    int32_t *ids = (int32_t *)1;
    size_t n;
    cr_assert(phax_encode_file(v, p, &ids, &n) == PHAX_ERR);
    snprintf(msg, sizeof msg, "%s:2: word 'd' is not in the vocabulary (no <unk>)", p);
    cr_assert_str_eq(phax_error(), msg);
    write_str(p, "a\n\nc ünknown b\n");
    cr_assert(phax_encode_file(v, p, &ids, &n) == PHAX_ERR);
    snprintf(msg, sizeof msg, "%s:3: word 'ünknown' is not in the vocabulary (no <unk>)", p);
    cr_assert_str_eq(phax_error(), msg);
    // A very long word is shortened in the message (64 bytes and "...").
    char longw[101];
    memset(longw, 'x', 100);
    longw[100] = 0;
    cr_assert(phax_encode(v, (const uint8_t *)longw, 100, "long", &ids, &n) == PHAX_ERR);
    snprintf(msg, sizeof msg, "long:1: word '%.64s...' is not in the vocabulary (no <unk>)", longw);
    cr_assert_str_eq(phax_error(), msg);
    phax_vocab_free(v);
    // A training text without a newline has no <eos>: a newline later is an unknown token.
    cr_assert(phax_vocab_build_text((const uint8_t *)"x y", 3, "train", &v) == PHAX_OK);
    cr_assert(phax_vocab_eos(v) == -1);
    cr_assert(phax_encode(v, (const uint8_t *)"x\ny", 3, "t", &ids, &n) == PHAX_ERR);
    cr_assert_str_eq(phax_error(), "t:1: word '<eos>' is not in the vocabulary (no <unk>)");
    phax_vocab_free(v);
    // Nothing but whitespace: no vocabulary.
    cr_assert(phax_vocab_build_text((const uint8_t *)"  \t", 3, "blank", &v) == PHAX_ERR);
    cr_assert_str_eq(phax_error(), "blank: no words: the vocabulary would be empty");
    tu_rm_rf(d);
    free(p), free(d);
}

Test(tokenizer, prompt_encode) {
    phax_vocab *v = fixture_vocab();
    int32_t *ids;
    size_t n;
    cr_assert(phax_encode_prompt(v, "the dog\nsat", &ids, &n) == PHAX_OK);
    assert_ids(ids, n, (const int32_t[]){0, 4, 3, 2}, 4);
    free(ids);
    cr_assert(phax_encode_prompt(v, " the zebra ", &ids, &n) == PHAX_OK);
    assert_ids(ids, n, (const int32_t[]){0, 7}, 2);
    free(ids);
    phax_vocab_free(v);
    cr_assert(phax_vocab_build_text((const uint8_t *)"a b\n", 4, "train", &v) == PHAX_OK);
    cr_assert(phax_encode_prompt(v, "a zebra", &ids, &n) == PHAX_ERR);
    cr_assert_str_eq(phax_error(), "prompt:1: word 'zebra' is not in the vocabulary (no <unk>)");
    phax_vocab_free(v);
    // Byte level: the prompt's bytes.
    cr_assert(phax_vocab_byte(&v) == PHAX_OK);
    cr_assert(phax_encode_prompt(v, "Hé\n", &ids, &n) == PHAX_OK);
    assert_ids(ids, n, (const int32_t[]){0x48, 0xC3, 0xA9, 0x0A}, 4);
    free(ids);
    phax_vocab_free(v);
}

Test(tokenizer, decode_words) {
    phax_vocab *v = fixture_vocab();
    char *s;
    size_t len;
    cr_assert(phax_decode(v, FIXTURE_IDS, 16, &s, &len) == PHAX_OK);
    const char *want = "the cat sat\n\nthe dog\n\nnaïve café cat\n<unk> dog the";
    cr_assert_str_eq(s, want);
    cr_assert(len == strlen(want));
    // Decoding then encoding again gives the same ids (the spacing is normalised).
    int32_t *ids;
    size_t n;
    cr_assert(phax_encode(v, (const uint8_t *)s, len, "again", &ids, &n) == PHAX_OK);
    assert_ids(ids, n, FIXTURE_IDS, 16);
    free(ids);
    free(s);
    cr_assert(phax_decode(v, NULL, 0, &s, &len) == PHAX_OK && len == 0 && s[0] == 0);
    free(s);
    cr_assert(phax_decode(v, (const int32_t[]){0, 8}, 2, &s, &len) == PHAX_ERR);
    cr_assert_str_eq(phax_error(), "decode: id 8 at position 1 is outside the vocabulary [0, 8)");
    cr_assert(phax_decode(v, (const int32_t[]){-1}, 1, &s, &len) == PHAX_ERR);
    phax_vocab_free(v);
}

Test(tokenizer, byte_round_trip) {
    phax_rng r = tu_rng("tokenizer/byte_round_trip");
    phax_vocab *v;
    cr_assert(phax_vocab_byte(&v) == PHAX_OK);
    cr_assert(phax_vocab_kind(v) == PHAX_TOK_BYTE && phax_vocab_size(v) == 256);
    cr_assert(phax_vocab_eos(v) == -1 && phax_vocab_unk(v) == -1);
    cr_assert_str_eq(phax_vocab_token(v, 10, NULL), "0a");
    size_t n = 1000 + phax_rng_below(&r, 4000);
    uint8_t *b = malloc(n);
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)phax_rng_below(&r, 256);
    b[0] = 0, b[1] = 255, b[2] = '\n';  // the extremes and a newline (no <eos> at byte level)
    int32_t *ids;
    size_t m;
    cr_assert(phax_encode(v, b, n, "bytes", &ids, &m) == PHAX_OK);
    cr_assert(m == n, "%zu tokens for %zu bytes", m, n);
    for (size_t i = 0; i < n; i++) cr_assert(ids[i] == b[i], "byte %zu", i);
    char *s;
    size_t len;
    cr_assert(phax_decode(v, ids, m, &s, &len) == PHAX_OK);
    cr_assert(len == n && memcmp(s, b, n) == 0);
    free(s);
    cr_assert(phax_decode(v, (const int32_t[]){256}, 1, &s, &len) == PHAX_ERR);
    free(ids), free(b);
    phax_vocab_free(v);
}

// --- vocabulary files ------------------------------------------------------------------------

Test(tokenizer, vocab_save_load_round_trip) {
    char *d = tu_tmpdir("phax_tok"), *p = tu_join(d, "vocab.txt"), *q = tu_join(d, "byte.vocab");
    phax_vocab *v = fixture_vocab(), *w;
    cr_assert(phax_vocab_save(v, p) == PHAX_OK, "%s", phax_error());
    size_t n;
    uint8_t *b = read_all(p, &n);
    cr_assert(n == strlen(FIXTURE_VOCAB_FILE) && memcmp(b, FIXTURE_VOCAB_FILE, n) == 0,
              "file:\n%s", (char *)b);
    // The vocabulary hash is the FNV-1a of exactly this file.
    cr_assert(phax_vocab_hash(v) == phax_fnv1a64(PHAX_FNV_INIT, b, n));
    free(b);
    cr_assert(phax_vocab_load(p, &w) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_vocab_kind(w) == PHAX_TOK_WORD && phax_vocab_size(w) == 8);
    for (int32_t i = 0; i < 8; i++) cr_assert_str_eq(phax_vocab_token(w, i, NULL), FIXTURE_VOCAB[i]);
    cr_assert(phax_vocab_eos(w) == 3 && phax_vocab_unk(w) == 7);
    cr_assert(phax_vocab_hash(w) == phax_vocab_hash(v));
    int32_t *ids;
    cr_assert(phax_encode(w, (const uint8_t *)FIXTURE, strlen(FIXTURE), "f", &ids, &n) == PHAX_OK);
    assert_ids(ids, n, FIXTURE_IDS, 16);
    free(ids);
    phax_vocab_free(w);
    // Saving again replaces the file whole and leaves no temporary file.
    phax_vocab *small;
    cr_assert(phax_vocab_build_text((const uint8_t *)"z\n", 2, "t", &small) == PHAX_OK);
    cr_assert(phax_vocab_save(small, p) == PHAX_OK);
    b = read_all(p, &n);
    const char *small_file = "phax-vocab word 2\nz\n<eos>\n";
    cr_assert(n == strlen(small_file) && memcmp(b, small_file, n) == 0);
    free(b);
    phax_vocab_free(small);
    // Byte vocabulary: header and 256 hex lines.
    phax_vocab *bv;
    cr_assert(phax_vocab_byte(&bv) == PHAX_OK);
    cr_assert(phax_vocab_save(bv, q) == PHAX_OK);
    b = read_all(q, &n);
    cr_assert(n == 20 + 256 * 3 && memcmp(b, "phax-vocab byte 256\n00\n01\n", 26) == 0 &&
              memcmp(b + n - 3, "ff\n", 3) == 0);
    free(b);
    cr_assert(phax_vocab_load(q, &w) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_vocab_kind(w) == PHAX_TOK_BYTE && phax_vocab_size(w) == 256);
    cr_assert(phax_vocab_hash(w) == phax_vocab_hash(bv) && phax_vocab_hash(w) != phax_vocab_hash(v));
    phax_vocab_free(w);
    phax_vocab_free(bv);
    // A save that cannot happen (no such directory) reports the file.
    char *bad = tu_join(d, "no/dir/v.txt"), msg[700];
    cr_assert(phax_vocab_save(v, bad) == PHAX_ERR);
    snprintf(msg, sizeof msg, "%s: cannot create a temporary file beside it: %s", bad,
             strerror(ENOENT));
    cr_assert_str_eq(phax_error(), msg);
    phax_vocab_free(v);
    tu_rm_rf(d);
    free(bad), free(p), free(q), free(d);
}

// Each malformed vocabulary file gives its own one-line message with FILE:LINE.
Test(tokenizer, vocab_load_errors) {
    char *d = tu_tmpdir("phax_tok"), *p = tu_join(d, "v.txt"), want[800];
    struct {
        const char *content, *msg;  // msg follows "<path>"
    } cases[] = {
        {"phax-vocab wrd 2\na\nb\n",
         ":1: bad header 'phax-vocab wrd 2' (expected 'phax-vocab word COUNT' or 'phax-vocab byte 256')"},
        {"a\nb\n", ":1: bad header 'a' (expected 'phax-vocab word COUNT' or 'phax-vocab byte 256')"},
        {"phax-vocab word 12a\na\n",
         ":1: bad header 'phax-vocab word 12a' (expected 'phax-vocab word COUNT' or 'phax-vocab byte 256')"},
        {"phax-vocab word 3\na\nb\n", ": the header announces 3 tokens but the file has 2"},
        {"phax-vocab word 1\na\nb\n", ":3: more tokens than the 1 the header announces"},
        {"phax-vocab word 3\na\nb\na\n", ":4: duplicate token 'a' (also on line 2)"},
        {"phax-vocab word 3\na\n\nb\n", ":3: empty token"},
        {"phax-vocab word 2\na\r\nb\n", ":2: token holds whitespace (byte 0x0d at column 2)"},
        {"phax-vocab word 2\na b\nc\n", ":2: token holds whitespace (byte 0x20 at column 2)"},
        {"phax-vocab word 0\n", ":1: bad token count 0 for a word vocabulary"},
        {"phax-vocab byte 255\n", ":1: bad token count 255 for a byte vocabulary"},
        {"phax-vocab byte 256\n00\n01\n03\n", ":4: expected byte token '02', found '03'"},
        {"", ": empty file"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        write_str(p, cases[k].content);
        phax_vocab *v = (phax_vocab *)1;
        cr_assert(phax_vocab_load(p, &v) == PHAX_ERR, "case %zu accepted", k);
        snprintf(want, sizeof want, "%s%s", p, cases[k].msg);
        cr_assert_str_eq(phax_error(), want, "case %zu", k);
    }
    // A missing final newline is fine.
    phax_vocab *v;
    write_str(p, "phax-vocab word 2\na\nb");
    cr_assert(phax_vocab_load(p, &v) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_vocab_size(v) == 2);
    phax_vocab_free(v);
    unlink(p);
    cr_assert(phax_vocab_load(p, &v) == PHAX_ERR);
    snprintf(want, sizeof want, "%s: no such file", p);
    cr_assert_str_eq(phax_error(), want);
    tu_rm_rf(d);
    free(p), free(d);
}

// --- token cache ------------------------------------------------------------------------------

static const char *RESULT[] = {"hit", "missing", "stale", "corrupt"};

static void load_expect(const phax_vocab *v, const char *src, const char *cache_dir,
                        phax_cache_result want, const int32_t *ids, size_t n, char **cpath) {
    int32_t *got;
    size_t m;
    phax_cache_result res;
    cr_assert(phax_tokens_load_cached_ex(v, src, cache_dir, &got, &m, &res, cpath) == PHAX_OK, "%s",
              phax_error());
    cr_assert(res == want, "cache %s, expected %s", RESULT[res], RESULT[want]);
    assert_ids(got, m, ids, n);
    free(got);
}

// Patch bytes of a file in place (not atomically: we are the corruption).
static void patch(const char *path, long off, const void *b, size_t n) {
    int fd = open(path, O_WRONLY);
    cr_assert(fd >= 0);
    cr_assert(pwrite(fd, b, n, off) == (ssize_t)n);
    close(fd);
}

Test(tokenizer, cache_hit_rebuild_corrupt) {
    char *d = tu_tmpdir("phax_tok"), *src = tu_join(d, "src.txt"), *cdir = tu_join(d, "cache/tok"), *cpath;
    phax_vocab *v = fixture_vocab();
    write_str(src, FIXTURE);
    load_expect(v, src, cdir, PHAX_CACHE_MISSING, FIXTURE_IDS, 16, &cpath);
    // Name: basename . 8 hex . 16 hex vocab hash .tok, inside the (created) cache folder.
    char prefix[4200];
    snprintf(prefix, sizeof prefix, "%s/src.txt.", cdir);
    cr_assert(strncmp(cpath, prefix, strlen(prefix)) == 0, "%s", cpath);
    char vh[32];
    snprintf(vh, sizeof vh, ".%016llx.tok", (unsigned long long)phax_vocab_hash(v));
    cr_assert(strlen(cpath) == strlen(prefix) + 8 + strlen(vh) && strcmp(cpath + strlen(prefix) + 8, vh) == 0,
              "%s", cpath);
    // The header, field by field (little-endian).
    size_t cn;
    uint8_t *c = read_all(cpath, &cn);
    cr_assert(cn == 80 + 4 * 16, "cache is %zu bytes", cn);
    cr_assert(memcmp(c, "PHAXTOK", 8) == 0);
    uint64_t f[10];
    for (int i = 0; i < 10; i++) {
        f[i] = 0;
        int w = i < 2 ? 4 : 8, off = i < 2 ? 8 + 4 * i : 16 + 8 * (i - 2);
        for (int k = 0; k < w; k++) f[i] |= (uint64_t)c[off + k] << (8 * k);
    }
    cr_assert(f[0] == 1 && f[1] == PHAX_TOK_WORD && f[2] == phax_vocab_hash(v) && f[3] == 8);
    cr_assert(f[4] == strlen(FIXTURE) && f[5] > 0);
    cr_assert(f[7] == phax_fnv1a64(PHAX_FNV_INIT, FIXTURE, strlen(FIXTURE)));
    cr_assert(f[8] == 16);
    for (int i = 0; i < 16; i++) cr_assert(c[80 + 4 * i] == FIXTURE_IDS[i] && c[81 + 4 * i] == 0);
    free(c);

    load_expect(v, src, cdir, PHAX_CACHE_HIT, FIXTURE_IDS, 16, NULL);
    // Only the time changes: still a hit.
    struct timespec ts[2] = {{1000000000, 0}, {1000000000, 0}};
    cr_assert(utimensat(AT_FDCWD, src, ts, 0) == 0);
    load_expect(v, src, cdir, PHAX_CACHE_HIT, FIXTURE_IDS, 16, NULL);
    // Same length, other words, same time stamp: the content hash notices.
    char changed[sizeof FIXTURE];
    memcpy(changed, FIXTURE, sizeof FIXTURE);
    memcpy(changed, "dog", 3);  // "the cat" -> "dog cat"
    write_str(src, changed);
    cr_assert(utimensat(AT_FDCWD, src, ts, 0) == 0);
    int32_t ids2[16];
    memcpy(ids2, FIXTURE_IDS, sizeof ids2);
    ids2[0] = 4;
    load_expect(v, src, cdir, PHAX_CACHE_STALE, ids2, 16, NULL);
    load_expect(v, src, cdir, PHAX_CACHE_HIT, ids2, 16, NULL);
    // A token changed to another valid id: the payload hash notices.
    patch(cpath, 80, "\x01", 1);
    load_expect(v, src, cdir, PHAX_CACHE_CORRUPT, ids2, 16, NULL);
    load_expect(v, src, cdir, PHAX_CACHE_HIT, ids2, 16, NULL);
    // Damaged magic, a truncated payload, an empty file, a token out of range.
    patch(cpath, 0, "X", 1);
    load_expect(v, src, cdir, PHAX_CACHE_CORRUPT, ids2, 16, NULL);
    cr_assert(truncate(cpath, 80 + 4 * 15) == 0);
    load_expect(v, src, cdir, PHAX_CACHE_CORRUPT, ids2, 16, NULL);
    cr_assert(truncate(cpath, 0) == 0);
    load_expect(v, src, cdir, PHAX_CACHE_CORRUPT, ids2, 16, NULL);
    patch(cpath, 80 + 4 * 3, "\xff\xff\xff\xff", 4);
    load_expect(v, src, cdir, PHAX_CACHE_CORRUPT, ids2, 16, NULL);
    load_expect(v, src, cdir, PHAX_CACHE_HIT, ids2, 16, NULL);
    free(cpath);

    // Another vocabulary: another cache file, built once.
    phax_vocab *bv;
    cr_assert(phax_vocab_byte(&bv) == PHAX_OK);
    size_t n = strlen(changed);
    int32_t *bytes = malloc(n * sizeof *bytes);
    for (size_t i = 0; i < n; i++) bytes[i] = (uint8_t)changed[i];
    load_expect(bv, src, cdir, PHAX_CACHE_MISSING, bytes, n, NULL);
    load_expect(bv, src, cdir, PHAX_CACHE_HIT, bytes, n, NULL);
    load_expect(v, src, cdir, PHAX_CACHE_HIT, ids2, 16, NULL);
    free(bytes);
    phax_vocab_free(bv);
    phax_vocab_free(v);
    tu_rm_rf(d);
    free(src), free(cdir), free(d);
}

Test(tokenizer, cache_xz_source_and_errors) {
    char *d = tu_tmpdir("phax_tok"), *src = tu_join(d, "train.txt.xz"), *cdir = tu_join(d, "c"), msg[700];
    size_t cap = lzma_stream_buffer_bound(sizeof FIXTURE), xn = 0;
    uint8_t *x = malloc(cap);
    cr_assert(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, NULL, (const uint8_t *)FIXTURE,
                                      strlen(FIXTURE), x, &xn, cap) == LZMA_OK);
    tu_write_file(src, x, xn);
    phax_vocab *v;
    cr_assert(phax_vocab_build_file(src, &v) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_vocab_size(v) == 8);
    load_expect(v, src, cdir, PHAX_CACHE_MISSING, FIXTURE_IDS, 16, NULL);
    load_expect(v, src, cdir, PHAX_CACHE_HIT, FIXTURE_IDS, 16, NULL);
    int32_t *ids;
    size_t n;
    cr_assert(phax_tokens_load_cached(v, src, cdir, &ids, &n) == PHAX_OK);
    assert_ids(ids, n, FIXTURE_IDS, 16);
    free(ids);
    // A truncated source is an error, not a short token stream.
    tu_write_file(src, x, xn / 2);
    cr_assert(phax_tokens_load_cached(v, src, cdir, &ids, &n) == PHAX_ERR);
    cr_assert(strncmp(phax_error(), src, strlen(src)) == 0 && strstr(phax_error(), "truncated xz"),
              "%s", phax_error());
    // Missing source.
    unlink(src);
    cr_assert(phax_tokens_load_cached(v, src, cdir, &ids, &n) == PHAX_ERR);
    snprintf(msg, sizeof msg, "%s: no such file", src);
    cr_assert_str_eq(phax_error(), msg);
    phax_vocab_free(v);
    // An unknown word without <unk>: the error, and no cache file written.
    char *plain = tu_join(d, "p.txt"), *c2 = tu_join(d, "c2");
    cr_assert(phax_vocab_build_text((const uint8_t *)"a b\n", 4, "t", &v) == PHAX_OK);
    write_str(plain, "a b\nb q a\n");
    cr_assert(phax_tokens_load_cached(v, plain, c2, &ids, &n) == PHAX_ERR);
    snprintf(msg, sizeof msg, "%s:2: word 'q' is not in the vocabulary (no <unk>)", plain);
    cr_assert_str_eq(phax_error(), msg);
    DIR *dir = opendir(c2);
    cr_assert(dir);
    struct dirent *e;
    int k = 0;
    while ((e = readdir(dir))) k += e->d_name[0] != '.';
    closedir(dir);
    cr_assert(k == 0, "%d files in the cache folder after an error", k);
    phax_vocab_free(v);
    tu_rm_rf(d);
    free(x), free(src), free(cdir), free(plain), free(c2), free(d);
}

// --- the real corpora ------------------------------------------------------------------------

// PHAX_DATA_DIR, else <source>/../shared/data; NULL (and a skip) when absent.
static char *data_dir(void) {
    static char buf[4096];
    const char *e = getenv("PHAX_DATA_DIR"), *root = getenv("PHAX_SOURCE_ROOT");
    if (e && *e) snprintf(buf, sizeof buf, "%s", e);
    else if (root && *root) snprintf(buf, sizeof buf, "%s/../shared/data", root);
    else snprintf(buf, sizeof buf, "../shared/data");
    return buf;
}

static int has_file(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

// dir/rel, or else the repository's own copy (data/rel, or data/rel.xz: WikiText-2 ships
// xz-compressed), so that a fresh clone without ../shared still runs the WikiText-2 checks.
static char *corpus_path(const char *dir, const char *rel) {
    char *p = tu_join(dir, rel);
    const char *root = getenv("PHAX_SOURCE_ROOT");
    if (has_file(p) || getenv("PHAX_DATA_DIR") || !root || !*root) return p;
    char alt[4096];
    for (int xz = 0; xz < 2; xz++) {
        int k = snprintf(alt, sizeof alt, "%s/data/%s%s", root, rel, xz && !strstr(rel, ".xz") ? ".xz" : "");
        if (k > 0 && (size_t)k < sizeof alt && has_file(alt)) {
            free(p);
            return strdup(alt);
        }
    }
    return p;
}

static size_t count_id(const int32_t *ids, size_t n, int32_t id) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ids[i] == id;
    return k;
}

typedef struct {
    const char *name, *train, *valid, *test;
    size_t tokens[3], vocab, unks[3];
} corpus;

// Builds the vocabulary from train, encodes the three splits, and checks the
// published counts; every word type of valid and test must already be in the
// training vocabulary (closed vocabulary: <unk> ids only for literal "<unk>").
static void check_corpus(const corpus *c) {
    char *dir = data_dir(), *paths[3] = {corpus_path(dir, c->train), corpus_path(dir, c->valid),
                                       corpus_path(dir, c->test)};
    for (int s = 0; s < 3; s++)
        if (!has_file(paths[s]))
            cr_skip_test("shared data not found (%s); set PHAX_DATA_DIR to the folder of "
                         "shared/data/README.md", paths[s]);
    double t0 = now_s();
    uint8_t *text;
    size_t tn;
    cr_assert(phax_data_read(paths[0], &text, &tn) == PHAX_OK, "%s", phax_error());
    double t1 = now_s();
    phax_vocab *v;
    cr_assert(phax_vocab_build_text(text, tn, paths[0], &v) == PHAX_OK, "%s", phax_error());
    double t2 = now_s();
    int32_t *ids[3];
    size_t n[3];
    cr_assert(phax_encode(v, text, tn, paths[0], &ids[0], &n[0]) == PHAX_OK, "%s", phax_error());
    double t3 = now_s();
    printf("%s train: %zu bytes; xz read %.3f s, vocabulary %.3f s, encode %.3f s\n", c->name, tn,
           t1 - t0, t2 - t1, t3 - t2);
    free(text);
    for (int s = 1; s < 3; s++) {
        double a = now_s();
        cr_assert(phax_encode_file(v, paths[s], &ids[s], &n[s]) == PHAX_OK, "%s", phax_error());
        printf("%s %s: read + encode %.3f s\n", c->name, s == 1 ? "valid" : "test", now_s() - a);
    }
    printf("%s: vocab %zu; tokens %zu / %zu / %zu; <unk> %zu / %zu / %zu\n", c->name,
           phax_vocab_size(v), n[0], n[1], n[2], count_id(ids[0], n[0], phax_vocab_unk(v)),
           count_id(ids[1], n[1], phax_vocab_unk(v)), count_id(ids[2], n[2], phax_vocab_unk(v)));
    cr_assert(phax_vocab_size(v) == c->vocab, "%s vocab %zu, expected %zu", c->name,
              phax_vocab_size(v), c->vocab);
    const char *split[3] = {"train", "valid", "test"};
    for (int s = 0; s < 3; s++) {
        cr_assert(n[s] == c->tokens[s], "%s %s: %zu tokens, expected %zu", c->name, split[s], n[s],
                  c->tokens[s]);
        size_t u = count_id(ids[s], n[s], phax_vocab_unk(v));
        cr_assert(u == c->unks[s], "%s %s: %zu <unk>, expected %zu", c->name, split[s], u, c->unks[s]);
    }
    // Closed vocabulary: a vocabulary of valid (test) alone has only training words.
    for (int s = 1; s < 3; s++) {
        uint8_t *t;
        size_t m;
        phax_vocab *sv;
        cr_assert(phax_data_read(paths[s], &t, &m) == PHAX_OK);
        cr_assert(phax_vocab_build_text(t, m, paths[s], &sv) == PHAX_OK);
        for (int32_t i = 0; i < (int32_t)phax_vocab_size(sv); i++) {
            size_t len;
            const char *w = phax_vocab_token(sv, i, &len);
            cr_assert(phax_vocab_id(v, w, len) >= 0, "%s: '%s' not in train", split[s], w);
        }
        phax_vocab_free(sv);
        free(t);
    }
    // Tokenizing from memory is the hot path of a run: far below a second
    // (about 0.05 s here); 1 s leaves room for a loaded machine.
    cr_assert(t3 - t2 < 1.0, "%s train encode took %.3f s", c->name, t3 - t2);
    for (int s = 0; s < 3; s++) free(ids[s]), free(paths[s]);
    phax_vocab_free(v);
}

Test(tokenizer, wikitext2_counts) {
    corpus c = {"WikiText-2", "wikitext-2/train.txt.xz", "wikitext-2/valid.txt",
                "wikitext-2/test.txt", {2088628, 217646, 245569}, 33278, {54625, 11718, 15218}};
    check_corpus(&c);
}

Test(tokenizer, ptb_counts) {
    corpus c = {"PTB", "ptb/ptb.train.txt.xz", "ptb/ptb.valid.txt", "ptb/ptb.test.txt",
                {929589, 73760, 82430}, 10000, {45020, 3485, 4794}};
    check_corpus(&c);
}

// The cache on a real corpus: the first load builds, the second reads; both agree.
Test(tokenizer, wikitext2_cache_timing) {
    char *dir = data_dir(), *train = corpus_path(dir, "wikitext-2/train.txt.xz");
    if (!has_file(train))
        cr_skip_test("shared data not found (%s); set PHAX_DATA_DIR to the folder of "
                     "shared/data/README.md", train);
    phax_vocab *v;
    double t0 = now_s();
    cr_assert(phax_vocab_build_file(train, &v) == PHAX_OK, "%s", phax_error());
    double t1 = now_s();
    char *d = tu_tmpdir("phax_tok");
    int32_t *a, *b;
    size_t na, nb;
    phax_cache_result ra, rb;
    cr_assert(phax_tokens_load_cached_ex(v, train, d, &a, &na, &ra, NULL) == PHAX_OK, "%s",
              phax_error());
    double t2 = now_s();
    cr_assert(phax_tokens_load_cached_ex(v, train, d, &b, &nb, &rb, NULL) == PHAX_OK, "%s",
              phax_error());
    double t3 = now_s();
    printf("WikiText-2 train: vocabulary from .xz %.3f s; cache build %.3f s; cache hit %.3f s\n",
           t1 - t0, t2 - t1, t3 - t2);
    cr_assert(ra == PHAX_CACHE_MISSING && rb == PHAX_CACHE_HIT, "%s then %s", RESULT[ra], RESULT[rb]);
    cr_assert(na == 2088628 && nb == na && memcmp(a, b, na * sizeof *a) == 0);
    cr_assert(phax_vocab_eos(v) == 0 && a[0] == 0, "first line is blank: <eos> is id 0");
    free(a), free(b);
    phax_vocab_free(v);
    tu_rm_rf(d);
    free(train), free(d);
}

// --- capped vocabularies (train --vocab-max) ----------------------------------------------------
// Fixture counts: <eos> 6, the 3, cat 2, dog 2, sat/naïve/café/<unk> 1. <eos> and <unk> are
// always kept; then the most frequent words, ties to the first seen; kept words keep their
// first-seen order. A bug in the ranking, the tie rule or the order changes the ids below.
static void assert_vocab(const phax_vocab *v, const char **want, size_t n) {
    cr_assert(phax_vocab_size(v) == n, "%zu words, expected %zu", phax_vocab_size(v), n);
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *w = phax_vocab_token(v, (int32_t)i, &len);
        cr_assert(len == strlen(want[i]) && !memcmp(w, want[i], len), "word %zu: '%.*s', expected '%s'", i,
                  (int)len, w, want[i]);
    }
}

Test(tokenizer, vocab_max_keeps_the_most_frequent) {
    const uint8_t *t = (const uint8_t *)FIXTURE;
    phax_vocab *v;
    cr_assert(phax_vocab_build_text_max(t, strlen(FIXTURE), "fixture", 5, &v) == PHAX_OK, "%s", phax_error());
    const char *want5[] = {"the", "cat", "<eos>", "dog", "<unk>"};
    assert_vocab(v, want5, 5);
    int32_t *ids;
    size_t n;
    cr_assert(phax_encode(v, t, strlen(FIXTURE), "fixture", &ids, &n) == PHAX_OK, "%s", phax_error());
    const int32_t want_ids[] = {0, 1, 4, 2, 2, 0, 3, 2, 2, 4, 4, 1, 2, 4, 3, 0};
    assert_ids(ids, n, want_ids, sizeof want_ids / sizeof *want_ids);
    free(ids);
    phax_vocab_free(v);
    // Tie between cat and dog (2 each): cat was seen first.
    cr_assert(phax_vocab_build_text_max(t, strlen(FIXTURE), "fixture", 4, &v) == PHAX_OK, "%s", phax_error());
    const char *want4[] = {"the", "cat", "<eos>", "<unk>"};
    assert_vocab(v, want4, 4);
    phax_vocab_free(v);
    // A cap at or above the size: the whole vocabulary, as phax_vocab_build_text.
    cr_assert(phax_vocab_build_text_max(t, strlen(FIXTURE), "fixture", 8, &v) == PHAX_OK, "%s", phax_error());
    assert_vocab(v, FIXTURE_VOCAB, 8);
    phax_vocab_free(v);
    // A text without <unk>: it is added last.
    const char *s = "a a a b b c\n";
    cr_assert(phax_vocab_build_text_max((const uint8_t *)s, strlen(s), "s", 3, &v) == PHAX_OK, "%s", phax_error());
    const char *want3[] = {"a", "<eos>", "<unk>"};
    assert_vocab(v, want3, 3);
    phax_vocab_free(v);
    cr_assert(phax_vocab_build_text_max((const uint8_t *)s, strlen(s), "s", 2, &v) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "s: a vocabulary capped at 2 words"), "%s", phax_error());
}

// Hardening round 2, item 1: resume checked a data file, then the tokenizer opened it again by
// name, and the tokens' hashes were compared only after the cache was written; a link swapped
// in between put another file's tokens into OUT/cache. phax_tokens_load_expected checks the
// bytes it read against the state's identity before any cache is touched: the swap made
// deterministic by handing it the other file under the expected identity of the first.
Test(tokenizer, load_expected_refuses_other_bytes_before_any_cache) {
    char *d = tu_tmpdir("phax_tok"), *real = tu_join(d, "train.txt"), *other = tu_join(d, "secret.txt");
    char *cache = tu_join(d, "cache");
    tu_write_file(real, "the cat sat on the mat\n", 23);
    tu_write_file(other, "HUNTER2 is the password\n", 24);
    phax_vocab *v;
    cr_assert(phax_vocab_byte(&v) == PHAX_OK);
    size_t rn;
    char *rb = tu_slurp(real, &rn);
    phax_source_identity want = {rn, phax_fnv1a64(PHAX_FNV_INIT, rb, rn)};
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = phax_tokens_load_expected(v, other, cache, &want, &ids, &n);
    cr_assert(rc == PHAX_ERR && !ids, "another file's bytes were accepted");
    cr_assert(strstr(phax_error(), "not the file this run was trained on"), "%s", phax_error());
    struct stat sb;
    cr_assert(stat(cache, &sb) != 0, "a cache folder was made for the refused file");
    // The same size, other bytes: the hash decides.
    tu_write_file(other, "the cat sat on the rug\n", 23);
    cr_assert(phax_tokens_load_expected(v, other, cache, &want, &ids, &n) == PHAX_ERR);
    cr_assert(stat(cache, &sb) != 0, "a cache folder was made for the refused file");
    // The real file loads, and its cache is made.
    cr_assert(phax_tokens_load_expected(v, real, cache, &want, &ids, &n) == PHAX_OK, "%s", phax_error());
    cr_assert(n == 23 && stat(cache, &sb) == 0);
    free(ids), free(rb);
    phax_vocab_free(v);
    tu_rm_rf(d);
    free(d), free(real), free(other), free(cache);
}
