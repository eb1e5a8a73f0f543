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

int phax_data_read_raw(const char *path, uint8_t **out, size_t *n, phax_file_stat *st) {
    if (!path || !out || !n) return phax_fail("phax_data_read_raw: NULL argument");
    *out = NULL;
    *n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
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
    // st_size is only a hint (it is 0 for pipes): read until EOF, growing the buffer.
    size_t cap = sb.st_size > 0 ? (size_t)sb.st_size + 1 : 65536, len = 0;
    uint8_t *buf = malloc(cap + 1);
    if (!buf) {
        close(fd);
        return phax_fail("%s: out of memory reading %zu bytes", path, cap);
    }
    for (;;) {
        if (len == cap) {
            size_t ncap = cap * 2;
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

int phax_xz_decode(const uint8_t *in, size_t in_n, const char *name, uint8_t **out, size_t *n) {
    if (!in || !name || !out || !n) return phax_fail("phax_xz_decode: NULL argument");
    *out = NULL;
    *n = 0;
    // Checked here too: liblzma calls a file shorter than its 12-byte header "truncated".
    static const uint8_t MAGIC[6] = {0xFD, '7', 'z', 'X', 'Z', 0x00};
    if (in_n < sizeof MAGIC || memcmp(in, MAGIC, sizeof MAGIC) != 0)
        return phax_fail("%s: not an xz file (bad magic bytes)", name);
    lzma_stream strm = LZMA_STREAM_INIT;
    // No memory limit: the corpora are ours; CONCATENATED accepts `cat a.xz b.xz`.
    lzma_ret ret = lzma_stream_decoder(&strm, UINT64_MAX, LZMA_CONCATENATED);
    if (ret != LZMA_OK) return phax_fail("%s: cannot start the xz decoder (liblzma error %d)", name, (int)ret);
    // Text compresses about 4x; start there and double as needed.
    size_t cap = in_n < SIZE_MAX / 8 ? in_n * 4 + 4096 : in_n;
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
        default: why = "xz decoder error"; break;
        }
        size_t got = (size_t)strm.total_out;
        free(buf);
        lzma_end(&strm);
        return phax_fail("%s: %s (after %zu decoded bytes)", name, why, got);
    }
    size_t len = (size_t)strm.total_out;
    lzma_end(&strm);
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
    return PHAX_OK;
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
