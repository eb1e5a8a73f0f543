// Untrusted inputs (issue 11): bounded text reads (.xz bombs, /dev/zero as a
// prompt or haystack), token caches that cannot make phax allocate more than
// their file holds and are written without a second copy of the stream, the
// SHA256SUMS check of the shipped corpora, and the CLI cases of eval, generate
// and niah (NaN results, empty position buckets, --window for pha, a checkpoint
// in a folder where no cache can be made, the input.txt layout).
#define _GNU_SOURCE  // vasprintf
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <lzma.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "phax/data.h"
#include "phax/safetensors.h"
#include "phax/tokenizer.h"
#include "testutil.h"

// --- helpers ---------------------------------------------------------------------------------

static void write_text(const char *path, const char *s) { tu_write_file(path, s, strlen(s)); }

// Peak resident memory of this process so far, in MB (each Criterion test runs in its own).
static double peak_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

// An .xz file: `head`, then `mib` MiB of the byte c (compresses to almost nothing).
static void write_xz_fill(const char *path, const char *head, size_t mib, char c) {
    lzma_stream s = LZMA_STREAM_INIT;
    cr_assert(lzma_easy_encoder(&s, 0, LZMA_CHECK_CRC64) == LZMA_OK);
    static uint8_t in[1 << 20], out[1 << 16];
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    for (size_t k = 0; k <= mib + 1; k++) {
        size_t len = 0;
        if (k == 0) len = strlen(head), memcpy(in, head, len);
        else if (k <= mib) len = sizeof in, memset(in, c, len);
        s.next_in = in, s.avail_in = len;
        lzma_action a = k <= mib ? LZMA_RUN : LZMA_FINISH;
        for (;;) {
            s.next_out = out, s.avail_out = sizeof out;
            lzma_ret r = lzma_code(&s, a);
            cr_assert(r == LZMA_OK || r == LZMA_STREAM_END, "lzma_code %d", (int)r);
            fwrite(out, 1, sizeof out - s.avail_out, f);
            if (r == LZMA_STREAM_END || (a == LZMA_RUN && s.avail_in == 0)) break;
        }
    }
    lzma_end(&s);
    fclose(f);
}

// An .xz file holding `mib` MiB of zero bytes, streamed through liblzma in 1 MiB pieces
// (a few hundred bytes per MiB on disk: a decompression bomb).
static void write_xz_zeros(const char *path, size_t mib) { write_xz_fill(path, "", mib, 0); }



// Hardening round 2, item 6: a small checkpoint naming a large .xz vocabulary cost 545 MB and
// 2 s before its refusal. A checkpoint's vocabulary is read through phax_vocab_load_expect:
// the header's count is compared first, and at most ~1 KiB per expected token is decompressed.
Test(inputs, checkpoint_vocabulary_costs_what_its_size_allows) {
    char *d = tu_tmpdir("phax_in"), *big = tu_join(d, "big.vocab.xz"), *small = tu_join(d, "small.vocab");
    write_xz_fill(big, "phax-vocab word 300\n", 60, 'a');
    phax_vocab *v = NULL;
    double m0 = peak_mb();
    cr_assert(phax_vocab_load_expect(big, 300, &v) == PHAX_ERR && !v, "a 60 MiB vocabulary was loaded");
    cr_assert(strstr(phax_error(), big), "%s", phax_error());
    double used = peak_mb() - m0;
    cr_assert(TU_ASAN || used < 16, "peak grew by %.0f MB for a vocabulary of 300 tokens", used);
    write_text(small, "phax-vocab word 5\na\nb\nc\nd\ne\n");
    cr_assert(phax_vocab_load_expect(small, 300, &v) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "announces 5 tokens, 300 expected"), "%s", phax_error());
    cr_assert(phax_vocab_load_expect(small, 5, &v) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_vocab_size(v) == 5);
    phax_vocab_free(v);
    cr_assert(phax_data_max_bytes() == PHAX_DATA_MAX_BYTES_DEFAULT, "the text-file limit was not restored");
    tu_rm_rf(d);
    free(d), free(big), free(small);
}

// Item 6: a header of many small JSON values (each costs the parser ~100 bytes) is refused
// by its count before it is parsed: 20 MB of "0," cost ~1 GB to parse.
Test(inputs, safetensors_header_of_many_values_refused_before_parsing) {
    size_t hn = (20u << 20) + 1, k = (hn - 1) / 2;  // "[0,0,...,0]": k zeros
    unsigned char *b = malloc(8 + hn);
    cr_assert(b);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(hn >> (8 * i));
    b[8] = '[';
    for (size_t j = 0; j + 1 < k; j++) b[9 + 2 * j] = '0', b[10 + 2 * j] = ',';
    b[8 + hn - 2] = '0', b[8 + hn - 1] = ']';
    phax_st_file f;
    double m0 = peak_mb();
    cr_assert(phax_st_read_mem(&f, b, 8 + hn, "many.safetensors") == PHAX_ERR);
    cr_assert(strstr(phax_error(), "JSON values") && strstr(phax_error(), "before parsing"), "%s", phax_error());
    double used = peak_mb() - m0;
    cr_assert(TU_ASAN || used < 64, "peak grew by %.0f MB", used);
    free(b);
}

// --- text files are bounded ------------------------------------------------------------------

// 80 MiB of zeros in about 15 KB: refused at the default limit (64 MiB) with one line
// naming the file, by the reader and by the token cache, from the size its index declares;
// cut short (no index), refused holding at most the limit.
Test(inputs, xz_bomb_refused_at_the_limit) {
    char *d = tu_tmpdir("phax_in"), *bomb = tu_join(d, "bomb.txt.xz"), *cache = tu_join(d, "cache");
    write_xz_zeros(bomb, 80);
    uint8_t *text = NULL;
    size_t n = 0;
    double m0 = peak_mb();
    cr_assert(phax_data_read(bomb, &text, &n) == PHAX_ERR, "an 80 MiB text was read (%zu bytes)", n);
    cr_assert(strstr(phax_error(), bomb) && strstr(phax_error(), "limit") &&
                  strstr(phax_error(), "--max-corpus-bytes"), "%s", phax_error());
    phax_vocab *v;
    cr_assert(phax_vocab_byte(&v) == PHAX_OK);
    int32_t *ids = NULL;
    cr_assert(phax_tokens_load_cached(v, bomb, cache, &ids, &n) == PHAX_ERR);
    cr_assert(strstr(phax_error(), bomb) && strstr(phax_error(), "limit"), "%s", phax_error());
    // Refused from the size the file's index declares, before a byte is decoded: no text
    // buffer at all (the decoder state of this preset is ~1 MB).
    double used = peak_mb() - m0;
    cr_assert(TU_ASAN || used < 16, "peak grew by %.0f MB", used);  // TU_ASAN: testutil.h
    // Without its index (the file cut short) the size is unknown: the decoder's buffer
    // grows but stops one byte past the limit, 64 MiB, not 80 (or 1 GB).
    size_t bn;
    char *bytes = tu_slurp(bomb, &bn);
    tu_write_file(bomb, bytes, bn - 64);
    free(bytes);
    cr_assert(phax_data_read(bomb, &text, &n) == PHAX_ERR, "a truncated bomb was read (%zu bytes)", n);
    cr_assert(strstr(phax_error(), bomb) && (strstr(phax_error(), "limit") || strstr(phax_error(), "truncated")),
              "%s", phax_error());
    used = peak_mb() - m0;
    cr_assert(TU_ASAN || used < 64 + 30, "peak grew by %.0f MB", used);
    // A smaller limit set by --max-corpus-bytes refuses sooner; 0 restores the default.
    phax_data_set_max_bytes(1 << 20);
    cr_assert(phax_data_read(bomb, &text, &n) == PHAX_ERR && strstr(phax_error(), "1048576"), "%s",
              phax_error());
    phax_data_set_max_bytes(0);
    cr_assert(phax_data_max_bytes() == PHAX_DATA_MAX_BYTES_DEFAULT);
    phax_vocab_free(v);
    tu_rm_rf(d);
    free(d), free(bomb), free(cache);
}

// A plain file over the limit is refused from its size, before it is read.
Test(inputs, plain_file_over_the_limit_refused) {
    char *d = tu_tmpdir("phax_in"), *p = tu_join(d, "big.txt");
    write_text(p, "one two three four five six seven eight nine ten\n");
    phax_data_set_max_bytes(16);
    uint8_t *t;
    size_t n;
    cr_assert(phax_data_read(p, &t, &n) == PHAX_ERR && strstr(phax_error(), p), "%s", phax_error());
    phax_data_set_max_bytes(0);
    cr_assert(phax_data_read(p, &t, &n) == PHAX_OK && n == 49, "%s", phax_error());
    free(t);
    tu_rm_rf(d);
    free(d), free(p);
}

// /dev/zero never ends: every text reader refuses anything but a regular file.
Test(inputs, non_regular_file_refused) {
    uint8_t *t = NULL;
    size_t n;
    struct rlimit lim = {(rlim_t)2 << 30, (rlim_t)2 << 30};  // before the fix: out of memory here
    if (!TU_ASAN) setrlimit(RLIMIT_AS, &lim);
    cr_assert(phax_data_read("/dev/zero", &t, &n) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "/dev/zero: not a regular file"), "%s", phax_error());
    phax_vocab *v;
    cr_assert(phax_vocab_byte(&v) == PHAX_OK);
    int32_t *ids;
    cr_assert(phax_encode_file(v, "/dev/zero", &ids, &n) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "not a regular file"), "%s", phax_error());
    phax_vocab_free(v);
}

// A FIFO: open() itself waited for a writer, for ever, before the regular-file check
// could refuse it (`--prompt-file fifo` hung). The child is given 10 s of wall time.
Test(inputs, fifo_refused_without_waiting) {
    char *d = tu_tmpdir("phax_in"), *f = tu_join(d, "fifo.txt");
    cr_assert(mkfifo(f, 0600) == 0, "mkfifo: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        alarm(10);
        uint8_t *t;
        size_t n;
        int rc = phax_data_read(f, &t, &n);
        _exit(rc == PHAX_ERR && strstr(phax_error(), "not a regular file") ? 0 : 1);
    }
    int rc = tu_wait(pid, NULL);
    cr_assert(rc == 0, "reading a FIFO: %s", rc == 1000 + SIGALRM ? "still waiting after 10 s" : "not refused");
    tu_rm_rf(d);
    free(d), free(f);
}

// A SHA256SUMS that is not phax's (a mirror's large list, a folder) is no manifest: the
// texts beside it stay readable (they were all refused).
Test(inputs, foreign_sha256sums_ignored) {
    char *d = tu_tmpdir("phax_in"), *p = tu_join(d, "prompt.txt"), *sums = tu_join(d, "SHA256SUMS");
    write_text(p, "the cat sat on the mat\n");
    uint8_t *t;
    size_t n;
    cr_assert(mkdir(sums, 0777) == 0);
    cr_assert(phax_data_read(p, &t, &n) == PHAX_OK, "a SHA256SUMS folder: %s", phax_error());
    free(t);
    cr_assert(rmdir(sums) == 0);
    size_t big = 100000;
    char *list = malloc(big);
    memset(list, 'a', big);
    for (size_t i = 99; i < big; i += 100) list[i] = '\n';
    tu_write_file(sums, list, big);
    free(list);
    cr_assert(phax_data_read(p, &t, &n) == PHAX_OK, "a 100 KB SHA256SUMS: %s", phax_error());
    free(t);
    tu_rm_rf(d);
    free(d), free(p), free(sums);
}

// --- token caches -----------------------------------------------------------------------------

// A cache is written from the token array itself: building the cache of 16 MiB of text
// (16 M byte tokens, 64 MB) holds the text and one token stream, not a second copy.
Test(inputs, cache_build_holds_one_token_stream) {
    char *d = tu_tmpdir("phax_in"), *src = tu_join(d, "text.txt"), *cache = tu_join(d, "cache");
    const size_t mib = 16;
    FILE *f = fopen(src, "wb");
    cr_assert(f);
    static char chunk[1 << 20];
    for (size_t i = 0; i < sizeof chunk; i++) chunk[i] = "abc \n"[i % 5];
    for (size_t k = 0; k < mib; k++) fwrite(chunk, 1, sizeof chunk, f);
    fclose(f);
    phax_vocab *v;
    cr_assert(phax_vocab_byte(&v) == PHAX_OK);
    int32_t *ids;
    size_t n;
    phax_cache_result res;
    double m0 = peak_mb();
    cr_assert(phax_tokens_load_cached_ex(v, src, cache, &ids, &n, &res, NULL) == PHAX_OK, "%s",
              phax_error());
    double used = peak_mb() - m0;
    cr_assert(res == PHAX_CACHE_MISSING && n == mib << 20);
    // text 16 + tokens 64 = 80 MB; a second copy of the stream makes it 144.
    cr_assert(TU_ASAN || used < 80 + 30, "building the cache grew the peak by %.0f MB (text 16, tokens 64)", used);
    for (size_t i = 0; i < n; i += 4097) cr_assert(ids[i] == "abc \n"[i % sizeof chunk % 5]);
    free(ids);
    // And the cache reads back (into one array again).
    cr_assert(phax_tokens_load_cached_ex(v, src, cache, &ids, &n, &res, NULL) == PHAX_OK);
    cr_assert(res == PHAX_CACHE_HIT && n == mib << 20 && ids[7] == "abc \n"[7 % 5]);
    free(ids);
    phax_vocab_free(v);
    tu_rm_rf(d);
    free(d), free(src), free(cache);
}

// A cache file is checked from its 80-byte header and its size before anything is
// read or allocated: a 1.5 GiB (sparse) cache whose header matches the source and
// vocabulary but claims more tokens than a text may hold is rebuilt, not loaded.
Test(inputs, cache_file_cannot_make_phax_allocate) {
    char *d = tu_tmpdir("phax_in"), *src = tu_join(d, "t.txt"), *cache = tu_join(d, "cache");
    write_text(src, "the cat sat on the mat\n");
    phax_vocab *v;
    cr_assert(phax_vocab_byte(&v) == PHAX_OK);
    int32_t *ids;
    size_t n;
    char *cpath;
    phax_cache_result res;
    cr_assert(phax_tokens_load_cached_ex(v, src, cache, &ids, &n, &res, &cpath) == PHAX_OK);
    free(ids);
    size_t len;
    char *img = tu_slurp(cpath, &len);
    cr_assert(len == 80 + 4 * n);
    uint64_t big = ((uint64_t)3 << 29) - 20;  // (1.5 GiB − 80) / 4 tokens: the size agrees
    for (int i = 0; i < 8; i++) img[64 + i] = (char)(big >> (8 * i));
    int fd = open(cpath, O_WRONLY | O_TRUNC);
    cr_assert(fd >= 0 && write(fd, img, 80) == 80);
    cr_assert(ftruncate(fd, (off_t)(80 + 4 * big)) == 0);
    close(fd);
    free(img);
    double m0 = peak_mb();
    cr_assert(phax_tokens_load_cached_ex(v, src, cache, &ids, &n, &res, NULL) == PHAX_OK, "%s",
              phax_error());
    double used = peak_mb() - m0;
    cr_assert(res == PHAX_CACHE_CORRUPT && n == 23, "result %d, %zu tokens", (int)res, n);
    cr_assert(TU_ASAN || used < 50, "a crafted cache grew the peak by %.0f MB", used);
    struct stat sb;
    cr_assert(stat(cpath, &sb) == 0 && sb.st_size == 80 + 4 * 23);  // rewritten
    free(ids), free(cpath);
    phax_vocab_free(v);
    tu_rm_rf(d);
    free(d), free(src), free(cache);
}

// --- SHA256SUMS -------------------------------------------------------------------------------

Test(inputs, sha256_known_values) {
    char h[65];
    phax_sha256_hex("", 0, h);
    cr_assert_str_eq(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    phax_sha256_hex("abc", 3, h);
    cr_assert_str_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";  // 56 bytes: two blocks
    phax_sha256_hex(m, strlen(m), h);
    cr_assert_str_eq(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    phax_sha256_hex(a, 1000000, h);
    cr_assert_str_eq(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(a);
}

// A corpus folder with SHA256SUMS: a listed file (plain or .xz, listed by its decoded
// name) must match, on every read and every cache build; a mismatch is one line naming it.
Test(inputs, sha256sums_checked_on_use) {
    char *d = tu_tmpdir("phax_in"), *tr = tu_join(d, "train.txt"), *va = tu_join(d, "valid.txt.xz");
    char *sums = tu_join(d, "SHA256SUMS"), *cache = tu_join(d, "cache");
    const char *text = "the cat sat on the mat\n";
    write_text(tr, text);
    size_t zn;
    uint8_t *z = malloc(4096);
    size_t pos = 0;
    cr_assert(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, NULL, (const uint8_t *)text, strlen(text), z,
                                      &pos, 4096) == LZMA_OK);
    zn = pos;
    tu_write_file(va, z, zn);
    free(z);
    char h[65];
    phax_sha256_hex(text, strlen(text), h);
    char *good = tu_xprintf("%s  train.txt\n%s  valid.txt\n", h, h);
    write_text(sums, good);
    uint8_t *t;
    size_t n;
    cr_assert(phax_data_read(tr, &t, &n) == PHAX_OK, "%s", phax_error());
    free(t);
    cr_assert(phax_data_read(va, &t, &n) == PHAX_OK, "%s", phax_error());
    free(t);
    // One byte changed in the manifest's train line: train is refused, valid still reads.
    good[0] = good[0] == '0' ? '1' : '0';
    write_text(sums, good);
    cr_assert(phax_data_read(tr, &t, &n) == PHAX_ERR);
    cr_assert(strstr(phax_error(), tr) && strstr(phax_error(), "sha256") && !strchr(phax_error(), '\n'),
              "%s", phax_error());
    cr_assert(phax_data_read(va, &t, &n) == PHAX_OK, "%s", phax_error());
    free(t);
    phax_vocab *v;
    cr_assert(phax_vocab_byte(&v) == PHAX_OK);
    int32_t *ids;
    cr_assert(phax_tokens_load_cached(v, tr, cache, &ids, &n) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "sha256"), "%s", phax_error());
    // A file the manifest does not list is not checked.
    char *other = tu_join(d, "test.txt");
    write_text(other, "anything\n");
    cr_assert(phax_data_read(other, &t, &n) == PHAX_OK);
    free(t);
    phax_vocab_free(v);
    tu_rm_rf(d);
    free(d), free(tr), free(va), free(sums), free(cache), free(good), free(other);
}

// The repository's data/wikitext-2 and data/ptb (shipped xz-compressed) match their
// SHA256SUMS (checked as they are decoded) and the published counts, so a fresh clone has
// verified corpora.
static void shipped_corpus_verifies(const char *name, const size_t want[3], size_t want_vocab) {
    const char *root = getenv("PHAX_SOURCE_ROOT");
    char *dir = tu_xprintf("%s/data/%s", root && *root ? root : ".", name);
    char *sums = tu_join(dir, "SHA256SUMS");
    struct stat sb;
    cr_assert(stat(sums, &sb) == 0, "%s is missing", sums);
    const char *split[3] = {"train", "valid", "test"};
    phax_vocab *v = NULL;
    for (int s = 0; s < 3; s++) {
        char *p = phax_data_find_split(dir, split[s]);
        cr_assert(p, "%s: no %s split", dir, split[s]);
        if (s == 0) cr_assert(phax_vocab_build_file(p, &v) == PHAX_OK, "%s", phax_error());
        int32_t *ids;
        size_t n;
        cr_assert(phax_encode_file(v, p, &ids, &n) == PHAX_OK, "%s", phax_error());
        cr_assert(n == want[s], "%s: %zu tokens, expected %zu", p, n, want[s]);
        free(ids), free(p);
    }
    cr_assert(phax_vocab_size(v) == want_vocab, "%s: vocabulary %zu, expected %zu", dir,
              phax_vocab_size(v), want_vocab);
    phax_vocab_free(v);
    free(dir), free(sums);
}

Test(inputs, shipped_wikitext2_verifies) {
    const size_t want[3] = {2088628, 217646, 245569};
    shipped_corpus_verifies("wikitext-2", want, 33278);
}

Test(inputs, shipped_ptb_verifies) {
    const size_t want[3] = {929589, 73760, 82430};
    shipped_corpus_verifies("ptb", want, 10000);
}

// --- the phax command -------------------------------------------------------------------------

typedef struct {
    char *dir, *data, *out, *err, *run;
} sandbox;

// Run phax with the NULL-terminated arguments (stdout, stderr to the sandbox's files) under a
// 2 GiB address-space limit and 60 s of CPU; the exit status (1000 + a signal that ended it).
static const tu_limits run_limits = {.as_mb = 2048, .cpu_s = 60};
#define phax_run(s, ...) tu_phax((s)->out, (s)->err, &run_limits, NULL, __VA_ARGS__)

#define TINY(family, out, ...)                                                                \
    phax_run(&s, "train", "--family", family, "--data", s.data, "--set", "d_model=32", "--set", \
             "n_layers=2", "--seq", "16", "--batch", "4", "--steps", "20", "--warmup", "2",     \
             "--lr", "1e-2", "--eval-every", "10", "--out", out, ##__VA_ARGS__, NULL)

// A folder with a small corpus (train.txt, valid.txt; input_txt: one input.txt instead)
// and, unless run is 0, a tiny trained pha (or `family`) run in dir/run.
static sandbox sandbox_new(const char *family, int input_txt) {
    const char *t = getenv("TMPDIR");
    sandbox s;
    s.dir = tu_xprintf("%s/phax_in_XXXXXX", t && *t ? t : "/tmp");
    cr_assert(mkdtemp(s.dir), "mkdtemp: %s", strerror(errno));
    s.data = tu_xprintf("%s/data", s.dir);
    s.out = tu_xprintf("%s/out.txt", s.dir);
    s.err = tu_xprintf("%s/err.txt", s.dir);
    s.run = tu_xprintf("%s/run", s.dir);
    cr_assert(mkdir(s.data, 0777) == 0);
    static const char *lines[] = {"the cat sat on the mat", "the dog ran to the red house",
                                  "a small bird flew over the old tree 0 1 2 3 4 5 6 7 8 9",
                                  "my friend drank warm tea at noon"};
    for (int k = 0; k < (input_txt ? 1 : 2); k++) {
        char *p = tu_xprintf("%s/%s", s.data, input_txt ? "input.txt" : k ? "valid.txt" : "train.txt");
        FILE *f = fopen(p, "w");
        cr_assert(f);
        for (int i = 0; i < (k ? 8 : 60); i++) fprintf(f, "%s\n", lines[(i * 3 + k) % 4]);
        fclose(f);
        free(p);
    }
    if (family) {
        int rc = TINY(family, s.run);
        char *e = tu_slurp(s.err, NULL);
        cr_assert(rc == 0, "train: exit %d: %s", rc, e);
        free(e);
    }
    return s;
}

static void sandbox_free(sandbox *s) {
    tu_rm_rf(s->dir);
    free(s->dir), free(s->data), free(s->out), free(s->err), free(s->run);
}

// The last run failed with exit 1 and one stderr line starting with prefix, holding frag.
static void expect_error(const sandbox *s, int rc, const char *prefix, const char *frag) {
    char *why = tu_cli_error_check(s->err, rc, prefix, frag);
    cr_assert(!why, "%s", why);
}

// --prompt-file and niah --text: /dev/zero is refused as phax train refuses it.
Test(inputs, prompt_file_and_haystack_must_be_regular_files) {
    sandbox s = sandbox_new(NULL, 0);
    // generate reads the prompt before the checkpoint: none is needed to see the refusal.
    expect_error(&s, phax_run(&s, "generate", s.run, "--prompt-file", "/dev/zero", NULL), "phax generate: ",
                 "/dev/zero: not a regular file");
    sandbox_free(&s);
    s = sandbox_new("pha", 0);
    expect_error(&s, phax_run(&s, "niah", s.run, "--text", "/dev/zero", "--lengths", "64", NULL),
                 "phax niah: ", "/dev/zero: not a regular file");
    sandbox_free(&s);
}

// --max-corpus-bytes: every command that reads text takes it (train --resume too).
Test(inputs, max_corpus_bytes_option) {
    sandbox s = sandbox_new(NULL, 0);
    expect_error(&s, TINY("pha", s.run, "--max-corpus-bytes", "100"), "phax train: ", "train.txt");
    char *e = tu_slurp(s.err, NULL);
    cr_assert(strstr(e, "100 bytes") && strstr(e, "--max-corpus-bytes"), "%s", e);
    free(e);
    expect_error(&s, TINY("pha", s.run, "--max-corpus-bytes", "1x"), "phax train: ", "--max-corpus-bytes");
    cr_assert(TINY("pha", s.run, "--max-corpus-bytes=1M") == 0);
    char *tr = tu_xprintf("%s/train.txt", s.data);  // about 2 KB; the vocabulary about 200 bytes
    expect_error(&s, phax_run(&s, "eval", s.run, "--file", tr, "--max-corpus-bytes", "1K", NULL),
                 "phax eval: ", "train.txt: holds more than 1024 bytes");
    free(tr);
    sandbox_free(&s);
}

// generate and niah refuse --window for pha (whose window is attn_window), as eval does.
Test(inputs, window_refused_for_pha_everywhere) {
    sandbox s = sandbox_new("pha", 0);
    expect_error(&s, phax_run(&s, "eval", s.run, "--data", s.data, "--split", "valid", "--window", "4", NULL),
                 "phax eval: ", "--window applies to the swax");
    expect_error(&s, phax_run(&s, "generate", s.run, "--prompt", "the cat", "--window", "4", NULL),
                 "phax generate: ", "--window applies to the swax");
    expect_error(&s, phax_run(&s, "niah", s.run, "--lengths", "64", "--window", "4", NULL), "phax niah: ",
                 "--window applies to the swax");
    sandbox_free(&s);
}

// A safetensors file's bytes (*n of them) and where tensor `name`'s data lies: [*at, *at + *len).
// f32: the tensor must be F32.
static char *tensor_range(const char *path, const char *name, int f32, size_t *n, size_t *at, size_t *len) {
    char *b = tu_slurp(path, n);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)(uint8_t)b[i] << (8 * i);
    char *key = tu_xprintf("\"%s\"", name);
    char *p = memmem(b + 8, hl, key, strlen(key));
    cr_assert(p, "no %s in %s", name, path);
    free(key);
    char *dt = strstr(p, "\"dtype\"");
    cr_assert(!f32 || (dt && strstr(dt, "\"F32\"") == strchr(dt + 7, '"')), "%s is not F32", name);
    p = strchr(strstr(p, "\"data_offsets\""), '[');
    cr_assert(p);
    unsigned long long lo = strtoull(p + 1, &p, 10), hi = strtoull(p + 1, NULL, 10);
    cr_assert(8 + hl + hi <= *n && lo < hi);
    *at = 8 + hl + lo, *len = hi - lo;
    return b;
}

// Overwrite the bytes of one tensor of a safetensors file with 0xff (NaN in F32 and F64).
static void poison_tensor(const char *path, const char *name) {
    size_t n, at, len;
    char *b = tensor_range(path, name, 0, &n, &at, &len);
    memset(b + at, 0xff, len);
    tu_write_file(path, b, n);
    free(b);
}

// Set every element of one F32 tensor of a safetensors file to v (finite weights that overflow).
static void fill_tensor_f32(const char *path, const char *name, float v) {
    size_t n, at, len;
    char *b = tensor_range(path, name, 1, &n, &at, &len);
    for (size_t o = 0; o + 4 <= len; o += 4) memcpy(b + at + o, &v, 4);
    tu_write_file(path, b, n);
    free(b);
}

// Hardening round 2, item 5: finite weights of 3e38 overflow to non-finite logits; generate
// printed a token and exited 0 where eval refuses. Now one line, nothing printed.
Test(inputs, generate_refuses_non_finite_logits) {
    sandbox s = sandbox_new("pha", 0);
    char *ck = tu_xprintf("%s/checkpoint.safetensors", s.run);
    fill_tensor_f32(ck, "blocks.0.ffn.w_down.weight", 3e38f);  // (embed.weight: RMSNorm scales it back)
    int rc = phax_run(&s, "generate", s.run, "--prompt", "the cat", "--tokens", "3", NULL);
    expect_error(&s, rc, "phax generate: ", "not finite");
    char *o = tu_slurp(s.out, NULL);
    cr_assert(!o[0], "generate printed: %s", o);
    free(o), free(ck);
    sandbox_free(&s);
}

// Hardening round 2, item 4: eval's default token cache (RUN/cache) followed a link planted
// there (train refuses the same); now refused with one line, nothing written through it.
Test(inputs, eval_refuses_a_planted_cache_link) {
    sandbox s = sandbox_new("pha", 0);
    char *cache = tu_xprintf("%s/cache", s.run), *elsewhere = tu_xprintf("%s/elsewhere", s.dir);
    tu_rm_rf(cache);
    cr_assert(mkdir(elsewhere, 0777) == 0 && symlink(elsewhere, cache) == 0);
    int rc = phax_run(&s, "eval", s.run, "--data", s.data, "--split", "valid", NULL);
    expect_error(&s, rc, "phax eval: ", "symbolic link");
    int n = tu_dir_count(elsewhere);
    cr_assert(n == 0, "%d files written through the cache link", n);
    free(cache), free(elsewhere);
    sandbox_free(&s);
}

// NaN weights: eval never exits 0 with a nan perplexity and never fails with an empty
// message; nothing is written. (Loading may refuse them first: the line names the problem.)
Test(inputs, eval_nan_is_an_error_with_a_message) {
    sandbox s = sandbox_new("pha", 0);
    char *ck = tu_xprintf("%s/checkpoint.safetensors", s.run), *js = tu_xprintf("%s/e.json", s.dir);
    poison_tensor(ck, "embed.weight");
    for (int json = 0; json < 2; json++) {
        int rc = json ? phax_run(&s, "eval", s.run, "--data", s.data, "--split", "valid", "--json", js, NULL)
                      : phax_run(&s, "eval", s.run, "--data", s.data, "--split", "valid", NULL);
        char *e = tu_slurp(s.err, NULL);
        cr_assert(rc == 1, "exit %d with NaN weights, stderr: %s", rc, e);
        cr_assert(strlen(e) > strlen("phax eval: ") + 10 && strchr(e, '\n') == e + strlen(e) - 1,
                  "not one informative line: '%s'", e);
        cr_assert(strcasestr(e, "nan") || strcasestr(e, "finite"), "%s", e);  // ours, or the loader's refusal
        free(e);
    }
    struct stat sb;
    cr_assert(stat(js, &sb) != 0, "a JSON was written");
    free(ck), free(js);
    sandbox_free(&s);
}

// JSON and CSV carry the same buckets; an empty one has 0 tokens and null loss/ppl.
Test(inputs, eval_json_keeps_empty_buckets) {
    sandbox s = sandbox_new("pha", 0);
    char *js = tu_xprintf("%s/e.json", s.dir), *csv = tu_xprintf("%s/e.csv", s.dir);
    int rc = phax_run(&s, "eval", s.run, "--data", s.data, "--split", "valid", "--seq", "16", "--buckets",
                      "0,8,16,32", "--json", js, "--csv", csv, NULL);
    char *e = tu_slurp(s.err, NULL);
    cr_assert(rc == 0, "exit %d: %s", rc, e);
    free(e);
    char *j = tu_slurp(js, NULL), *c = tu_slurp(csv, NULL);
    int nj = 0, nc = -1;
    for (char *p = j; (p = strstr(p, "\"lo\"")); p++) nj++;
    for (char *p = c; (p = strchr(p, '\n')); p++) nc++;
    cr_assert(nj == 3 && nc == 3, "JSON %d buckets, CSV %d rows:\n%s\n%s", nj, nc, j, c);
    cr_assert(strstr(j, "\"lo\": 16") && strstr(j, "\"tokens\": 0") && strstr(j, "\"loss\": null"), "%s", j);
    cr_assert(strstr(c, "\n16,32,0,"), "%s", c);
    free(j), free(c), free(js), free(csv);
    sandbox_free(&s);
}

// The default cache beside the checkpoint cannot be made (a read-only folder; here a
// file in the way, which stops root too): eval scores without a cache and says so.
Test(inputs, eval_without_a_writable_cache_folder) {
    sandbox s = sandbox_new("pha", 0);
    char *cache = tu_xprintf("%s/cache", s.run);
    tu_rm_rf(cache);
    write_text(cache, "not a folder\n");
    int rc = phax_run(&s, "eval", s.run, "--data", s.data, "--split", "valid", NULL);
    char *e = tu_slurp(s.err, NULL), *o = tu_slurp(s.out, NULL);
    cr_assert(rc == 0, "exit %d: %s", rc, e);
    cr_assert(strstr(e, "note: no token cache") && strstr(e, "--cache-dir"), "%s", e);
    cr_assert(strstr(o, "perplexity"), "%s", o);
    free(e), free(o);
    // A read-only run folder (only meaningful when not root: root writes anyway).
    tu_rm_rf(cache);
    cr_assert(chmod(s.run, 0555) == 0);
    if (access(s.run, W_OK) != 0) {
        rc = phax_run(&s, "eval", s.run, "--data", s.data, "--split", "valid", NULL);
        e = tu_slurp(s.err, NULL);
        cr_assert(rc == 0 && strstr(e, "note: no token cache"), "exit %d: %s", rc, e);
        free(e);
    }
    chmod(s.run, 0755);
    free(cache);
    sandbox_free(&s);
}

// eval --data on the input.txt layout scores the split phax train held out: the same
// loss as the run's last validation.
Test(inputs, eval_data_input_txt_layout) {
    sandbox s = sandbox_new("pha", 1);
    char *log = tu_xprintf("%s/log.jsonl", s.run), *js = tu_xprintf("%s/e.json", s.dir);
    char *t = tu_slurp(log, NULL), *last = t, *p;
    while ((p = strstr(last + 1, "\"val_loss\""))) last = p;
    cr_assert(last != t, "no val_loss in the log");
    double logged = strtod(strchr(last, ':') + 1, NULL);
    free(t);
    int rc = phax_run(&s, "eval", s.run, "--data", s.data, "--seq", "16", "--batch", "4", "--json", js, NULL);
    char *e = tu_slurp(s.err, NULL);
    cr_assert(rc == 0, "exit %d: %s", rc, e);
    cr_assert(strstr(e, "input.txt") && strstr(e, "last 10%"), "%s", e);
    free(e);
    char *j = tu_slurp(js, NULL);
    double ev = strtod(strstr(j, "\"loss\": ") + 8, NULL);
    double n_valid = strtod(strstr(j, "\"tokens_in_split\": ") + 19, NULL);
    cr_assert(fabs(ev - logged) <= 1e-5 * fabs(logged), "eval %.9f vs the run's validation %.9f", ev, logged);
    free(j);
    // --split train: the other 90% (n − n/10 tokens against n/10).
    rc = phax_run(&s, "eval", s.run, "--data", s.data, "--split", "train", "--json", js, NULL);
    cr_assert(rc == 0);
    j = tu_slurp(js, NULL);
    double n_train = strtod(strstr(j, "\"tokens_in_split\": ") + 19, NULL);
    cr_assert(n_train >= 9 * n_valid && n_train <= 9 * n_valid + 10, "train %g, valid %g", n_train, n_valid);
    free(j), free(log), free(js);
    sandbox_free(&s);
}
