// Corpus reading (plain or .xz via liblzma), atomic writes, and the training
// sampler / evaluation iterator; see include/phax/data.h.
#include "phax/data.h"

#include <errno.h>
#include <fcntl.h>
#include <lzma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// Reading

static size_t g_max_bytes = PHAX_DATA_MAX_BYTES_DEFAULT;

void phax_data_set_max_bytes(size_t max) { g_max_bytes = max ? max : PHAX_DATA_MAX_BYTES_DEFAULT; }
size_t phax_data_max_bytes(void) { return g_max_bytes; }

static int over_limit(const char *path, const char *what) {
    return phax_fail("%s: %s more than %zu bytes, the limit on a text file (raise it with "
                     "--max-corpus-bytes)", path, what, g_max_bytes);
}

int phax_data_read_raw(const char *path, uint8_t **out, size_t *n, phax_file_stat *st) {
    if (!path || !out || !n) return phax_fail("phax_data_read_raw: NULL argument");
    *out = NULL;
    *n = 0;
    // O_NONBLOCK: opening a FIFO would otherwise wait for a writer, for ever, before the
    // regular-file check below could refuse it (reads of a regular file ignore the flag).
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return phax_fail("%s: no such file", path);
        return phax_fail("%s: cannot open: %s", path, strerror(errno));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return phax_fail("%s: cannot stat: %s", path, strerror(e));
    }
    if (S_ISDIR(sb.st_mode)) {
        close(fd);
        return phax_fail("%s: is a directory, not a file", path);
    }
    // /dev/zero, a FIFO or a terminal never end (or end anywhere): only regular files.
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return phax_fail("%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > (uint64_t)g_max_bytes) {
        close(fd);
        return over_limit(path, "holds");
    }
    // st_size is only a hint (the file may grow while read): read until EOF, growing the
    // buffer, never past the limit.
    size_t cap = sb.st_size > 0 ? (size_t)sb.st_size + 1 : 65536, len = 0;
    uint8_t *buf = malloc(cap + 1);
    if (!buf) {
        close(fd);
        return phax_fail("%s: out of memory reading %zu bytes", path, cap);
    }
    for (;;) {
        if (len == cap) {
            if (len > g_max_bytes) {
                free(buf);
                close(fd);
                return over_limit(path, "holds");
            }
            size_t ncap = cap * 2, limit1 = g_max_bytes + 1;  // one byte past the limit tells "over"
            if (ncap > limit1 && limit1 > cap) ncap = limit1;
            uint8_t *nb = ncap > cap ? realloc(buf, ncap + 1) : NULL;
            if (!nb) {
                free(buf);
                close(fd);
                return phax_fail("%s: out of memory after %zu bytes", path, len);
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            free(buf);
            close(fd);
            return phax_fail("%s: read error after %zu bytes: %s", path, len, strerror(e));
        }
        if (r == 0) break;
        len += (size_t)r;
    }
    close(fd);
    if (len > g_max_bytes) {  // grew while read (st_size was only a hint)
        free(buf);
        return over_limit(path, "holds");
    }
    if (len == 0) {
        free(buf);
        return phax_fail("%s: empty file", path);
    }
    buf[len] = 0;
    if (st) {
        st->size = (uint64_t)len;
        st->mtime_sec = (int64_t)sb.st_mtim.tv_sec;
        st->mtime_nsec = (int64_t)sb.st_mtim.tv_nsec;
    }
    *out = buf;
    *n = len;
    return PHAX_OK;
}

// The uncompressed size that an in-memory .xz file's index declares (all concatenated
// streams). PHAX_ERR (no message kept) when the index cannot be read: the decoder that
// runs next then says what is wrong with the file.
static int xz_declared_size(const uint8_t *in, size_t in_n, uint64_t *size) {
    lzma_stream strm = LZMA_STREAM_INIT;
    lzma_index *idx = NULL;
    if (lzma_file_info_decoder(&strm, &idx, PHAX_XZ_MEMLIMIT, (uint64_t)in_n) != LZMA_OK) return PHAX_ERR;
    strm.next_in = in;
    strm.avail_in = in_n;
    lzma_ret ret = LZMA_OK;
    // The file-info decoder reads the footers and indexes from the end, asking for seeks.
    for (int steps = 0; steps < 1 << 20; steps++) {
        ret = lzma_code(&strm, LZMA_RUN);
        if (ret == LZMA_SEEK_NEEDED) {
            if (strm.seek_pos > in_n) break;
            strm.next_in = in + strm.seek_pos;
            strm.avail_in = in_n - (size_t)strm.seek_pos;
            continue;
        }
        if (ret != LZMA_OK || strm.avail_in == 0) break;
    }
    if (ret == LZMA_OK && strm.avail_in == 0) ret = lzma_code(&strm, LZMA_FINISH);
    int rc = PHAX_ERR;
    if (ret == LZMA_STREAM_END && idx) {
        *size = lzma_index_uncompressed_size(idx);
        rc = PHAX_OK;
    }
    if (idx) lzma_index_end(idx, NULL);
    lzma_end(&strm);
    return rc;
}

int phax_xz_decode(const uint8_t *in, size_t in_n, const char *name, uint8_t **out, size_t *n) {
    if (!in || !name || !out || !n) return phax_fail("phax_xz_decode: NULL argument");
    *out = NULL;
    *n = 0;
    // Checked here too: liblzma calls a file shorter than its 12-byte header "truncated".
    static const uint8_t MAGIC[6] = {0xFD, '7', 'z', 'X', 'Z', 0x00};
    if (in_n < sizeof MAGIC || memcmp(in, MAGIC, sizeof MAGIC) != 0)
        return phax_fail("%s: not an xz file (bad magic bytes)", name);
    // The size the file's index declares (every stream's, summed), read before decoding a
    // byte: a bomb is refused from it without decoding, and a valid file gets one buffer
    // of exactly its size (no growth by doubling, whose realloc briefly holds 1.5 copies).
    uint64_t declared = 0;
    int have_declared = xz_declared_size(in, in_n, &declared) == PHAX_OK;
    if (have_declared && declared > (uint64_t)g_max_bytes) return over_limit(name, "decodes to");
    lzma_stream strm = LZMA_STREAM_INIT;
    // The decoder's memory is capped (a crafted header can ask for a 1.5 GiB dictionary);
    // CONCATENATED accepts `cat a.xz b.xz`.
    lzma_ret ret = lzma_stream_decoder(&strm, PHAX_XZ_MEMLIMIT, LZMA_CONCATENATED);
    if (ret != LZMA_OK) return phax_fail("%s: cannot start the xz decoder (liblzma error %d)", name, (int)ret);
    // Text compresses about 4x; start there and double as needed, up to one byte past the
    // limit (reaching it means the text is too long: a 146 KB file can decode to 1 GB).
    size_t limit1 = g_max_bytes < SIZE_MAX - 1 ? g_max_bytes + 1 : g_max_bytes;
    size_t cap = in_n < SIZE_MAX / 8 ? in_n * 4 + 4096 : in_n;
    // The index is only a claim until the data is decoded (the decoder checks the two
    // agree): one byte more than it declares, so a file that lies still meets the limit.
    if (have_declared) cap = (size_t)declared + 1;
    if (cap > limit1) cap = limit1;
    uint8_t *buf = malloc(cap + 1);
    if (!buf) {
        lzma_end(&strm);
        return phax_fail("%s: out of memory decoding", name);
    }
    strm.next_in = in;
    strm.avail_in = in_n;
    strm.next_out = buf;
    strm.avail_out = cap;
    for (;;) {
        if (strm.avail_out == 0) {
            size_t used = cap, ncap = cap * 2;
            if (cap >= limit1) {
                free(buf);
                lzma_end(&strm);
                return over_limit(name, "decodes to");
            }
            if (ncap > limit1 || ncap < cap) ncap = limit1;
            uint8_t *nb = ncap > cap ? realloc(buf, ncap + 1) : NULL;
            if (!nb) {
                free(buf);
                lzma_end(&strm);
                return phax_fail("%s: out of memory after decoding %zu bytes", name, used);
            }
            buf = nb;
            cap = ncap;
            strm.next_out = buf + used;
            strm.avail_out = cap - used;
        }
        // All input is present, so FINISH: the decoder reports truncation as BUF_ERROR.
        ret = lzma_code(&strm, LZMA_FINISH);
        if (ret == LZMA_STREAM_END) break;
        if (ret == LZMA_OK) continue;
        const char *why;
        switch (ret) {
        case LZMA_FORMAT_ERROR: why = "not an xz file (bad magic bytes)"; break;
        case LZMA_OPTIONS_ERROR: why = "unsupported xz options"; break;
        case LZMA_DATA_ERROR: why = "corrupt xz data"; break;
        case LZMA_BUF_ERROR: why = "truncated xz file (the compressed data ends early)"; break;
        case LZMA_MEM_ERROR: why = "out of memory in the xz decoder"; break;
        case LZMA_MEMLIMIT_ERROR: why = "the xz decoder would need more than 96 MiB (dictionary too large)"; break;
        default: why = "xz decoder error"; break;
        }
        size_t got = (size_t)strm.total_out;
        free(buf);
        lzma_end(&strm);
        return phax_fail("%s: %s (after %zu decoded bytes)", name, why, got);
    }
    size_t len = (size_t)strm.total_out;
    lzma_end(&strm);
    if (len > g_max_bytes) {  // the buffer holds one byte past the limit: a stream may end there
        free(buf);
        return over_limit(name, "decodes to");
    }
    buf[len] = 0;
    *out = buf;
    *n = len;
    return PHAX_OK;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

int phax_data_read(const char *path, uint8_t **out, size_t *n) {
    if (!path || !out || !n) return phax_fail("phax_data_read: NULL argument");
    *out = NULL;
    *n = 0;
    uint8_t *raw;
    size_t raw_n;
    if (phax_data_read_raw(path, &raw, &raw_n, NULL) != PHAX_OK) return PHAX_ERR;
    if (!ends_with(path, ".xz")) {
        if (phax_data_verify(path, raw, raw_n) != PHAX_OK) {
            free(raw);
            return PHAX_ERR;
        }
        *out = raw;
        *n = raw_n;
        return PHAX_OK;
    }
    int rc = phax_xz_decode(raw, raw_n, path, out, n);
    free(raw);
    if (rc != PHAX_OK) return PHAX_ERR;
    if (*n == 0) {
        free(*out);
        *out = NULL;
        return phax_fail("%s: the xz file decodes to an empty text", path);
    }
    if (phax_data_verify(path, *out, *n) != PHAX_OK) {
        free(*out);
        *out = NULL, *n = 0;
        return PHAX_ERR;
    }
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// SHA-256 (FIPS 180-4) and the SHA256SUMS check of the shipped corpora.

static const uint32_t SHA_K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, r) (((x) >> (r)) | ((x) << (32 - (r))))

static void sha_block(uint32_t h[8], const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + SHA_K[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

void phax_sha256_hex(const void *data, size_t n, char hex[65]) {
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const uint8_t *p = data;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) sha_block(h, p + i);
    uint8_t tail[128] = {0};
    size_t r = n - i, tn = r + 9 <= 64 ? 64 : 128;
    if (r) memcpy(tail, p + i, r);
    tail[r] = 0x80;
    uint64_t bits = (uint64_t)n * 8;
    for (int k = 0; k < 8; k++) tail[tn - 1 - k] = (uint8_t)(bits >> (8 * k));
    for (size_t k = 0; k < tn; k += 64) sha_block(h, tail + k);
    for (int k = 0; k < 8; k++) snprintf(hex + 8 * k, 9, "%08x", (unsigned)h[k]);
}

int phax_data_verify(const char *path, const uint8_t *text, size_t n) {
    if (!path || (!text && n)) return phax_fail("phax_data_verify: NULL argument");
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t dlen = slash ? (size_t)(slash - path) + 1 : 0, blen = strlen(base);
    if (blen > 3 && !strcmp(base + blen - 3, ".xz")) blen -= 3;  // listed by its decoded name
    char *sums = malloc(dlen + 16);
    if (!sums) return phax_fail("%s: out of memory", path);
    memcpy(sums, path, dlen);
    strcpy(sums + dlen, "SHA256SUMS");
    struct stat sb;
    if (stat(sums, &sb) != 0) {  // no manifest: nothing to check
        free(sums);
        return PHAX_OK;
    }
    // A manifest of phax's kind (the shipped data/ has one of three lines) is a small regular
    // file; anything else with that name (a mirror's large list, a folder, a FIFO: O_NONBLOCK)
    // is not phax's, and must not make the texts beside it unreadable.
    int fd = open(sums, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size > 65536) {
        if (fd >= 0) close(fd);
        free(sums);
        return PHAX_OK;
    }
    char buf[65537];
    ssize_t got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got < 0) got = 0;
    buf[got] = 0;
    // Lines "<64 hex> <space or *><name>": find this file's.
    const char *want = NULL;
    for (char *line = buf; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        size_t ll = strlen(line);
        if (ll >= 66 && line[64] == ' ') {
            const char *name = line + 65 + (line[65] == ' ' || line[65] == '*');
            if (strlen(name) == blen && !memcmp(name, base, blen)) {
                line[64] = 0;
                want = line;
                break;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    int rc = PHAX_OK;
    if (want) {
        char got_hex[65];
        phax_sha256_hex(text, n, got_hex);
        if (strcmp(got_hex, want) != 0)
            rc = phax_fail("%s: the sha256 of its text is %.16s..., not %.16s... as %s says: the file "
                           "is damaged or changed (restore it, e.g. git checkout -- %s)",
                           path, got_hex, want, sums, path);
    }
    free(sums);
    return rc;
}

uint64_t phax_fnv1a64(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001B3ull;
    return h;
}

// ---------------------------------------------------------------------------
// Writing

// phax_write_file_atomic: core/atomic_file.c.

int phax_mkdir_p(const char *dir) {
    if (!dir || !*dir) return phax_fail("phax_mkdir_p: empty path");
    char *p = strdup(dir);
    if (!p) return phax_fail("%s: out of memory", dir);
    // Create each prefix ending before a '/', then the whole path.
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != 0) continue;
        char c = *s;
        *s = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            int e = errno;
            phax_fail("%s: cannot create directory %s: %s", dir, p, strerror(e));
            free(p);
            return PHAX_ERR;
        }
        *s = c;
        if (c == 0) break;
    }
    free(p);
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return phax_fail("%s: exists and is not a directory", dir);
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// Training sampler

int phax_sampler_init(phax_sampler *s, const int32_t *tokens, size_t n, int B, int T,
                      uint64_t seed) {
    if (!s || !tokens) return phax_fail("phax_sampler_init: NULL argument");
    if (B < 1 || T < 1) return phax_fail("sampler: B = %d and T = %d must both be >= 1", B, T);
    if (n < (size_t)T + 1)
        return phax_fail("sampler: %zu tokens are too few for windows of T = %d (need T + 1 = %d)",
                         n, T, T + 1);
    s->tokens = tokens;
    s->n = n;
    s->B = B;
    s->T = T;
    s->seed = seed;
    return PHAX_OK;
}

int phax_sampler_batch(const phax_sampler *s, uint64_t step, int32_t *x, int32_t *y,
                       size_t *offsets) {
    if (!s || !s->tokens || !x || !y) return phax_fail("phax_sampler_batch: NULL argument");
    phax_rng r = phax_rng_stream(s->seed, step);
    size_t T = (size_t)s->T;
    for (int b = 0; b < s->B; b++) {
        size_t o = (size_t)phax_rng_below(&r, (uint64_t)(s->n - T));  // in [0, n−T−1]
        if (offsets) offsets[b] = o;
        memcpy(x + (size_t)b * T, s->tokens + o, T * sizeof *x);
        memcpy(y + (size_t)b * T, s->tokens + o + 1, T * sizeof *y);
    }
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// Evaluation iterator

int phax_eval_iter_init(phax_eval_iter *it, const int32_t *tokens, size_t n, int T) {
    if (!it || !tokens) return phax_fail("phax_eval_iter_init: NULL argument");
    if (n < 1 || T < 1) return phax_fail("eval iterator: n = %zu and T = %d must both be >= 1", n, T);
    it->tokens = tokens;
    it->n = n;
    it->T = T;
    it->pos = 0;
    return PHAX_OK;
}

int phax_eval_iter_next(phax_eval_iter *it, int32_t *x, int32_t *y) {
    if (!it || it->pos >= it->n) return 0;
    size_t T = (size_t)it->T, s = it->pos, len = it->n - s < T ? it->n - s : T;
    for (size_t t = 0; t < len; t++) {
        x[t] = it->tokens[s + t];
        y[t] = s + t + 1 < it->n ? it->tokens[s + t + 1] : -1;  // last token: nothing to predict
    }
    for (size_t t = len; t < T; t++) x[t] = 0, y[t] = -1;  // padding of a partial last window
    it->pos = s + len;
    return (int)len;
}

size_t phax_eval_iter_count(const phax_eval_iter *it) {
    return it ? (it->n + (size_t)it->T - 1) / (size_t)it->T : 0;
}

// ---------------------------------------------------------------------------
char *phax_data_find_split(const char *dir, const char *name) {
    static const char *prefix[] = {"", "ptb.", "ptb.char."};
    for (int i = 0; i < 3; i++)
        for (int xz = 0; xz < 2; xz++) {
            size_t len = strlen(dir) + strlen(prefix[i]) + strlen(name) + 16;
            char *p = malloc(len);
            if (!p) return NULL;
            snprintf(p, len, "%s/%s%s.txt%s", dir, prefix[i], name, xz ? ".xz" : "");
            struct stat sb;
            if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) return p;
            free(p);
        }
    return NULL;
}
