// data: reading plain and .xz corpora with one-line errors, atomic writes, the
// seeded training sampler and the in-order evaluation iterator.
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <lzma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "phax/data.h"
#include "testutil.h"

// --- helpers ---------------------------------------------------------------------------------

// Number of entries in a directory other than . and ..
static int dir_entries(const char *path) {
    DIR *d = opendir(path);
    cr_assert(d);
    int k = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) k++;
    closedir(d);
    return k;
}

// An .xz image of data made with liblzma's one-call encoder (preset 6, CRC64).
static uint8_t *xz_encode(const void *data, size_t n, size_t *out_n) {
    size_t cap = lzma_stream_buffer_bound(n);
    uint8_t *out = malloc(cap);
    cr_assert(out);
    size_t pos = 0;
    lzma_ret r = lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, NULL, data, n, out, &pos, cap);
    cr_assert(r == LZMA_OK, "lzma_easy_buffer_encode: %d", (int)r);
    *out_n = pos;
    return out;
}

// Text of about n bytes drawn from a small word list (compressible like a corpus).
static char *random_text(phax_rng *r, size_t n) {
    static const char *W[] = {"the", "of", "and", "naïve", "<unk>", "1", ",", "Zürich", "a\tb"};
    char *s = malloc(n + 16);
    cr_assert(s);
    size_t k = 0;
    while (k < n) {
        const char *w = W[phax_rng_below(r, sizeof W / sizeof W[0])];
        size_t l = strlen(w);
        memcpy(s + k, w, l);
        k += l;
        s[k++] = phax_rng_below(r, 10) == 0 ? '\n' : ' ';
    }
    s[k] = 0;
    return s;
}

// --- reading -----------------------------------------------------------------------------------

// Bytes come back exactly, NUL and invalid UTF-8 included, with a NUL after them.
Test(data, read_plain_bytes) {
    char *d = tu_tmpdir("phax_data"), *p = tu_join(d, "a.txt");
    const uint8_t src[] = {'h', 'i', 0, 0xff, 0xfe, '\n', 'x'};
    tu_write_file(p, src, sizeof src);
    uint8_t *b;
    size_t n;
    cr_assert(phax_data_read(p, &b, &n) == PHAX_OK, "%s", phax_error());
    cr_assert(n == sizeof src, "n = %zu", n);
    cr_assert(memcmp(b, src, n) == 0);
    cr_assert(b[n] == 0);
    phax_file_stat st;
    uint8_t *r;
    size_t rn;
    cr_assert(phax_data_read_raw(p, &r, &rn, &st) == PHAX_OK, "%s", phax_error());
    cr_assert(rn == sizeof src && st.size == sizeof src && st.mtime_sec > 0);
    free(r);
    free(b);
    tu_rm_rf(d);
    free(p);
    free(d);
}

Test(data, read_errors) {
    char *d = tu_tmpdir("phax_data"), *p = tu_join(d, "missing.txt"), *e = tu_join(d, "empty.txt"),
         *ex = tu_join(d, "empty.txt.xz"), msg[600];
    uint8_t *b = (uint8_t *)"sentinel";
    size_t n = 7;
    cr_assert(phax_data_read(p, &b, &n) == PHAX_ERR);
    snprintf(msg, sizeof msg, "%s: no such file", p);
    cr_assert_str_eq(phax_error(), msg);
    cr_assert(b == NULL && n == 0, "outputs cleared on error");

    tu_write_file(e, "", 0);
    cr_assert(phax_data_read(e, &b, &n) == PHAX_ERR);
    snprintf(msg, sizeof msg, "%s: empty file", e);
    cr_assert_str_eq(phax_error(), msg);
    tu_write_file(ex, "", 0);
    cr_assert(phax_data_read(ex, &b, &n) == PHAX_ERR);
    snprintf(msg, sizeof msg, "%s: empty file", ex);
    cr_assert_str_eq(phax_error(), msg);

    cr_assert(phax_data_read(d, &b, &n) == PHAX_ERR);
    snprintf(msg, sizeof msg, "%s: is a directory, not a file", d);
    cr_assert_str_eq(phax_error(), msg);
    tu_rm_rf(d);
    free(p), free(e), free(ex), free(d);
}

// Permission bits do not stop root, so this check needs an ordinary user.
Test(data, read_unreadable) {
    if (geteuid() == 0) cr_skip_test("running as root: file permissions are not enforced");
    char *d = tu_tmpdir("phax_data"), *p = tu_join(d, "secret.txt"), msg[600];
    tu_write_file(p, "x\n", 2);
    cr_assert(chmod(p, 0) == 0);
    uint8_t *b;
    size_t n;
    cr_assert(phax_data_read(p, &b, &n) == PHAX_ERR);
    snprintf(msg, sizeof msg, "%s: cannot open: %s", p, strerror(EACCES));
    cr_assert_str_eq(phax_error(), msg);
    tu_rm_rf(d);
    free(p), free(d);
}

// A .xz made by liblzma's encoder decodes to the original bytes; so do two
// streams concatenated (what `cat a.xz b.xz` gives).
Test(data, xz_round_trip) {
    phax_rng r = tu_rng("data/xz_round_trip");
    char *d = tu_tmpdir("phax_data"), *p = tu_join(d, "c.txt.xz"), *q = tu_join(d, "cat.txt.xz");
    size_t n1 = 50000 + phax_rng_below(&r, 50000), n2 = 1 + phax_rng_below(&r, 3000);
    char *t1 = random_text(&r, n1), *t2 = random_text(&r, n2);
    n1 = strlen(t1), n2 = strlen(t2);
    size_t x1n, x2n;
    uint8_t *x1 = xz_encode(t1, n1, &x1n), *x2 = xz_encode(t2, n2, &x2n);
    tu_write_file(p, x1, x1n);
    uint8_t *b;
    size_t n;
    cr_assert(phax_data_read(p, &b, &n) == PHAX_OK, "%s", phax_error());
    cr_assert(n == n1 && memcmp(b, t1, n1) == 0, "decoded %zu bytes, expected %zu", n, n1);
    free(b);

    uint8_t *both = malloc(x1n + x2n);
    memcpy(both, x1, x1n);
    memcpy(both + x1n, x2, x2n);
    tu_write_file(q, both, x1n + x2n);
    cr_assert(phax_data_read(q, &b, &n) == PHAX_OK, "%s", phax_error());
    cr_assert(n == n1 + n2 && memcmp(b, t1, n1) == 0 && memcmp(b + n1, t2, n2) == 0);
    free(b);
    // The raw reader does not decode.
    cr_assert(phax_data_read_raw(p, &b, &n, NULL) == PHAX_OK && n == x1n && memcmp(b, x1, n) == 0);
    free(b);
    tu_rm_rf(d);
    free(both), free(x1), free(x2), free(t1), free(t2), free(p), free(q), free(d);
}

// Every proper prefix of an .xz file is an error naming the file, never a
// silently short text.
Test(data, xz_truncated) {
    phax_rng r = tu_rng("data/xz_truncated");
    char *t = random_text(&r, 20000);
    size_t xn;
    uint8_t *x = xz_encode(t, strlen(t), &xn);
    char *d = tu_tmpdir("phax_data"), *p = tu_join(d, "t.txt.xz");
    const size_t cuts[] = {xn / 2, xn - 1, xn - 12, 40};
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        tu_write_file(p, x, cuts[k]);
        uint8_t *b;
        size_t n;
        cr_assert(phax_data_read(p, &b, &n) == PHAX_ERR, "cut at %zu of %zu accepted", cuts[k], xn);
        cr_assert(strncmp(phax_error(), p, strlen(p)) == 0, "message names the file: %s", phax_error());
        cr_assert(strstr(phax_error(), "truncated xz file"), "cut %zu: %s", cuts[k], phax_error());
    }
    // Every prefix, byte by byte over the tail (stream footer, index), is refused.
    for (size_t c = xn - 80; c < xn; c++) {
        tu_write_file(p, x, c);
        uint8_t *b;
        size_t n;
        cr_assert(phax_data_read(p, &b, &n) == PHAX_ERR, "cut at %zu of %zu accepted", c, xn);
    }
    tu_rm_rf(d);
    free(x), free(t), free(p), free(d);
}

Test(data, xz_corrupt_and_not_xz) {
    phax_rng r = tu_rng("data/xz_corrupt_and_not_xz");
    char *t = random_text(&r, 20000);
    size_t xn;
    uint8_t *x = xz_encode(t, strlen(t), &xn);
    char *d = tu_tmpdir("phax_data"), *p = tu_join(d, "bad.txt.xz"), msg[600];
    x[xn / 2] ^= 0x20;  // inside the LZMA2 data: the decoder or the CRC64 catches it
    tu_write_file(p, x, xn);
    uint8_t *b;
    size_t n;
    cr_assert(phax_data_read(p, &b, &n) == PHAX_ERR);
    cr_assert(strncmp(phax_error(), p, strlen(p)) == 0 && strstr(phax_error(), ": corrupt xz data"),
              "%s", phax_error());
    tu_write_file(p, "plain text\n", 11);
    cr_assert(phax_data_read(p, &b, &n) == PHAX_ERR);
    snprintf(msg, sizeof msg, "%s: not an xz file (bad magic bytes)", p);
    cr_assert_str_eq(phax_error(), msg);
    // A well-formed .xz of nothing is an empty corpus.
    size_t en;
    uint8_t *e = xz_encode("", 0, &en);
    tu_write_file(p, e, en);
    cr_assert(phax_data_read(p, &b, &n) == PHAX_ERR);
    snprintf(msg, sizeof msg, "%s: the xz file decodes to an empty text", p);
    cr_assert_str_eq(phax_error(), msg);
    tu_rm_rf(d);
    free(e), free(x), free(t), free(p), free(d);
}

// --- writing ---------------------------------------------------------------------------------

Test(data, atomic_write) {
    char *d = tu_tmpdir("phax_data"), *p = tu_join(d, "out.bin"), *sub = tu_join(d, "no/such/dir"),
         *q = tu_join(sub, "x.bin");
    cr_assert(phax_write_file_atomic(p, "first version", 13) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_write_file_atomic(p, "second", 6) == PHAX_OK, "%s", phax_error());
    uint8_t *b;
    size_t n;
    cr_assert(phax_data_read(p, &b, &n) == PHAX_OK);
    cr_assert(n == 6 && memcmp(b, "second", 6) == 0, "replaced whole, not overwritten in place");
    free(b);
    cr_assert(dir_entries(d) == 1, "no temporary file left behind");
    struct stat sb;
    mode_t mask = umask(022);  // outputs get 0666 minus the umask (tests/test_durable.c)
    umask(mask);
    cr_assert(stat(p, &sb) == 0 && (sb.st_mode & 0777) == (0666 & ~mask), "mode %o", sb.st_mode & 0777);
    // Into a directory that does not exist: an error naming the file, nothing created.
    cr_assert(phax_write_file_atomic(q, "x", 1) == PHAX_ERR);
    cr_assert(strncmp(phax_error(), q, strlen(q)) == 0, "%s", phax_error());
    cr_assert(dir_entries(d) == 1);
    // mkdir -p makes it; a second call is fine; a file in the way is an error.
    cr_assert(phax_mkdir_p(sub) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_mkdir_p(sub) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_write_file_atomic(q, "x", 1) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_mkdir_p(q) == PHAX_ERR);
    tu_rm_rf(d);
    free(p), free(q), free(sub), free(d);
}

Test(data, fnv1a_known_values) {
    // Published FNV-1a 64 test vectors: "" and "a".
    cr_assert(phax_fnv1a64(PHAX_FNV_INIT, "", 0) == 0xCBF29CE484222325ull);
    cr_assert(phax_fnv1a64(PHAX_FNV_INIT, "a", 1) == 0xAF63DC4C8601EC8Cull);
    cr_assert(phax_fnv1a64(PHAX_FNV_INIT, "foobar", 6) == 0x85944171F73967E8ull);
    // Continuing a hash equals hashing the concatenation; agrees with phax_hash_str.
    cr_assert(phax_fnv1a64(phax_fnv1a64(PHAX_FNV_INIT, "foo", 3), "bar", 3) == 0x85944171F73967E8ull);
    cr_assert(phax_hash_str("foobar") == 0x85944171F73967E8ull);
}

// --- sampler ---------------------------------------------------------------------------------

// tokens[i] = a distinct value per position, so a row's values reveal its offset.
static int32_t *ramp(size_t n, int32_t base) {
    int32_t *t = malloc(n * sizeof *t);
    cr_assert(t);
    for (size_t i = 0; i < n; i++) t[i] = base + (int32_t)i;
    return t;
}

Test(data, sampler_targets_are_next_tokens) {
    phax_rng r = tu_rng("data/sampler_targets_are_next_tokens");
    uint64_t seed = phax_rng_u64(&r);
    size_t n = 500 + phax_rng_below(&r, 500);
    int B = 3 + (int)phax_rng_below(&r, 5), T = 1 + (int)phax_rng_below(&r, 40);
    int32_t *tok = malloc(n * sizeof *tok);
    for (size_t i = 0; i < n; i++) tok[i] = (int32_t)phax_rng_below(&r, 1000);
    phax_sampler s;
    cr_assert(phax_sampler_init(&s, tok, n, B, T, seed) == PHAX_OK, "%s", phax_error());
    int32_t *x = malloc((size_t)B * T * sizeof *x), *y = malloc((size_t)B * T * sizeof *y);
    size_t *off = malloc((size_t)B * sizeof *off);
    for (uint64_t step = 0; step < 50; step++) {
        cr_assert(phax_sampler_batch(&s, step, x, y, off) == PHAX_OK);
        for (int b = 0; b < B; b++) {
            cr_assert(off[b] <= n - (size_t)T - 1, "offset %zu past n-T-1 = %zu", off[b], n - T - 1);
            for (int t = 0; t < T; t++) {
                cr_assert(x[b * T + t] == tok[off[b] + t]);
                cr_assert(y[b * T + t] == tok[off[b] + t + 1], "step %llu row %d t %d",
                          (unsigned long long)step, b, t);
            }
        }
    }
    free(x), free(y), free(off), free(tok);
}

// A batch is a function of (seed, step) alone: a fresh sampler, as after a
// resume, draws the same batch for the same step, in any order of steps.
Test(data, sampler_reproducible) {
    phax_rng r = tu_rng("data/sampler_reproducible");
    uint64_t seed = phax_rng_u64(&r);
    printf("sampler seed %llu\n", (unsigned long long)seed);
    const size_t n = 10000;
    const int B = 4, T = 16;
    int32_t *tok = ramp(n, 0);
    phax_sampler a, b, c;
    cr_assert(phax_sampler_init(&a, tok, n, B, T, seed) == PHAX_OK);
    cr_assert(phax_sampler_init(&b, tok, n, B, T, seed) == PHAX_OK);
    cr_assert(phax_sampler_init(&c, tok, n, B, T, seed + 1) == PHAX_OK);
    int32_t xa[64], ya[64], xb[64], yb[64], xc[64], yc[64];
    for (uint64_t step = 0; step < 20; step++) {
        cr_assert(phax_sampler_batch(&a, step, xa, ya, NULL) == PHAX_OK);
        cr_assert(phax_sampler_batch(&b, 19 - step, xb, yb, NULL) == PHAX_OK);  // other order
        cr_assert(phax_sampler_batch(&b, step, xb, yb, NULL) == PHAX_OK);
        cr_assert(memcmp(xa, xb, sizeof xa) == 0 && memcmp(ya, yb, sizeof ya) == 0, "step %llu",
                  (unsigned long long)step);
        cr_assert(phax_sampler_batch(&c, step, xc, yc, NULL) == PHAX_OK);
        cr_assert(memcmp(xa, xc, sizeof xa) != 0, "another seed gives another batch");
    }
    cr_assert(phax_sampler_batch(&a, 3, xa, ya, NULL) == PHAX_OK);
    cr_assert(phax_sampler_batch(&a, 4, xb, yb, NULL) == PHAX_OK);
    cr_assert(memcmp(xa, xb, sizeof xa) != 0, "steps differ");
    free(tok);
}

// The offsets of (seed 1, step 0) are pinned: changing how they are drawn
// would silently change the batches a resumed run sees.
Test(data, sampler_pinned_offsets) {
    int32_t *tok = ramp(1000, 0);
    phax_sampler s;
    cr_assert(phax_sampler_init(&s, tok, 1000, 4, 10, 1) == PHAX_OK);
    int32_t x[40], y[40];
    size_t off[4];
    cr_assert(phax_sampler_batch(&s, 0, x, y, off) == PHAX_OK);
    // phax_rng_below(phax_rng_stream(1, 0), 990), four draws.
    phax_rng r = phax_rng_stream(1, 0);
    for (int b = 0; b < 4; b++) cr_assert(off[b] == phax_rng_below(&r, 990));
    printf("offsets: %zu %zu %zu %zu\n", off[0], off[1], off[2], off[3]);
    const size_t pinned[4] = {415, 962, 783, 874};
    for (int b = 0; b < 4; b++) cr_assert(off[b] == pinned[b], "row %d: %zu", b, off[b]);
    free(tok);
}

// Both ends of [0, n−T−1] are reachable: with n = T + 3 the three offsets all occur.
Test(data, sampler_covers_range) {
    phax_rng r = tu_rng("data/sampler_covers_range");
    uint64_t seed = phax_rng_u64(&r);
    const int T = 7;
    int32_t *tok = ramp(T + 3, 100);
    phax_sampler s;
    cr_assert(phax_sampler_init(&s, tok, T + 3, 1, T, seed) == PHAX_OK);
    int seen[3] = {0};
    int32_t x[7], y[7];
    size_t off;
    for (uint64_t step = 0; step < 300; step++) {
        cr_assert(phax_sampler_batch(&s, step, x, y, &off) == PHAX_OK);
        cr_assert(off <= 2 && x[0] == 100 + (int32_t)off);
        seen[off]++;
    }
    // Each has probability 1/3 per draw; missing one in 300 draws: 3·(2/3)^300 ≈ 1e-52.
    cr_assert(seen[0] && seen[1] && seen[2], "%d %d %d", seen[0], seen[1], seen[2]);
    // n = T + 1: a single possible window.
    cr_assert(phax_sampler_init(&s, tok, T + 1, 2, T, seed) == PHAX_OK);
    int32_t x2[14], y2[14];
    cr_assert(phax_sampler_batch(&s, 5, x2, y2, NULL) == PHAX_OK);
    cr_assert(x2[0] == 100 && x2[7] == 100 && y2[6] == 107);
    free(tok);
}

Test(data, sampler_bad_arguments) {
    int32_t tok[8] = {0};
    phax_sampler s;
    cr_assert(phax_sampler_init(&s, tok, 8, 2, 8, 0) == PHAX_ERR);
    cr_assert_str_eq(phax_error(),
                     "sampler: 8 tokens are too few for windows of T = 8 (need T + 1 = 9)");
    cr_assert(phax_sampler_init(&s, tok, 8, 0, 4, 0) == PHAX_ERR);
    cr_assert_str_eq(phax_error(), "sampler: B = 0 and T = 4 must both be >= 1");
}

// --- evaluation iterator ------------------------------------------------------------------

// Every token is an input exactly once, in order; the non-padding targets are
// tokens[1..n−1] in order, with −1 only at the last token; padding is (0, −1).
static void check_eval(size_t n, int T, phax_rng *r) {
    int32_t *tok = malloc(n * sizeof *tok);
    for (size_t i = 0; i < n; i++) tok[i] = 1 + (int32_t)phax_rng_below(r, 50);
    phax_eval_iter it;
    cr_assert(phax_eval_iter_init(&it, tok, n, T) == PHAX_OK, "%s", phax_error());
    int32_t *x = malloc((size_t)T * sizeof *x), *y = malloc((size_t)T * sizeof *y);
    size_t seen = 0, windows = 0, minus1 = 0;
    int len;
    while ((len = phax_eval_iter_next(&it, x, y)) > 0) {
        cr_assert(len <= T);
        windows++;
        for (int t = 0; t < T; t++) {
            if (t < len) {
                cr_assert(x[t] == tok[seen], "n %zu T %d: window %zu pos %d", n, T, windows, t);
                if (seen + 1 < n) {
                    cr_assert(y[t] == tok[seen + 1]);
                } else {
                    cr_assert(y[t] == -1);
                    minus1++;
                }
                seen++;
            } else {
                cr_assert(x[t] == 0 && y[t] == -1, "padding");
                cr_assert(len < T && seen == n, "padding only in the last window");
            }
        }
        if (len < T) cr_assert(seen == n, "a short window is the last");
    }
    cr_assert(seen == n, "n %zu T %d: %zu tokens covered", n, T, seen);
    cr_assert(minus1 == 1);
    cr_assert(windows == phax_eval_iter_count(&it) && windows == (n + T - 1) / T);
    cr_assert(phax_eval_iter_next(&it, x, y) == 0, "exhausted stays exhausted");
    free(x), free(y), free(tok);
}

Test(data, eval_iter_covers_every_token_once) {
    phax_rng r = tu_rng("data/eval_iter_covers_every_token_once");
    check_eval(1, 1, &r);
    check_eval(1, 8, &r);
    check_eval(5, 8, &r);
    check_eval(16, 8, &r);
    check_eval(17, 8, &r);
    check_eval(23, 1, &r);
    for (int k = 0; k < 5; k++)
        check_eval(1 + phax_rng_below(&r, 3000), 1 + (int)phax_rng_below(&r, 100), &r);
    int32_t tok[1];
    phax_eval_iter it;
    cr_assert(phax_eval_iter_init(&it, tok, 0, 4) == PHAX_ERR);
    cr_assert_str_eq(phax_error(), "eval iterator: n = 0 and T = 4 must both be >= 1");
}
