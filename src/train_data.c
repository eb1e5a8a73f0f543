// `phax train` data: where the corpus files are, their vocabulary and tokens
// (cached), and the identity of both that the training state stores and
// --resume checks (src/train.h).
#define _GNU_SOURCE  // realpath
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "phax/data.h"
#include "train.h"

void corpus_check_file(const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) die("%s: no such file", path);
    if (!S_ISREG(sb.st_mode)) die("%s: not a regular file", path);
    if (sb.st_size == 0) die("%s: empty file", path);
}

// Absolute paths in the stored options, so --resume works from any directory.
static void absolutise(char **path) {
    char *abs = realpath(*path, NULL);
    if (!abs) die("%s: %s", *path, strerror(errno));
    free(*path);
    *path = abs;
}

void corpus_locate(corpus *c, const train_opts *o) {
    if (o->data_dir) {
        struct stat sb;
        if (stat(o->data_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) die("%s: no such directory", o->data_dir);
        c->train = phax_data_find_split(o->data_dir, "train");
        c->valid = c->train ? phax_data_find_split(o->data_dir, "valid") : NULL;
        if (!c->train) {
            char *in = path_join(o->data_dir, "input.txt");
            if (!file_exists(in))
                die("%s: no training file (train.txt[.xz], ptb.train.txt[.xz], ptb.char.train.txt[.xz] or input.txt)",
                    o->data_dir);
            c->train = in, c->split = 1;
        }
    } else {
        c->train = strdup(o->train_path);
        c->valid = o->valid_path ? strdup(o->valid_path) : NULL;
        c->split = 0;
    }
    corpus_check_file(c->train);
    if (c->valid) corpus_check_file(c->valid);
    absolutise(&c->train);
    if (c->valid) absolutise(&c->valid);
}

void corpus_vocab(corpus *c, const train_opts *o) {
    int rc = strcmp(o->tokenizer, "byte") ? phax_vocab_build_file_max(c->train, (size_t)o->vocab_max, &c->vocab)
                                          : phax_vocab_byte(&c->vocab);
    if (rc) die_lib();
}

// cache_dir NULL: tokenize in memory and write no cache (a resumed run whose
// data are not verified yet).
// want (resume): the bytes read must be the state's (checked on what was read, before any
// cache is written).
static int load_tokens(const phax_vocab *v, const char *path, const char *cache_dir, const phax_source_identity *want,
                       int32_t **out, size_t *n) {
    if (cache_dir && want) return phax_tokens_load_expected(v, path, cache_dir, want, out, n);
    return cache_dir ? phax_tokens_load_cached(v, path, cache_dir, out, n)
                     : phax_encode_file(v, path, out, n);
}

void corpus_tokens(corpus *c, const char *cache_dir) {
    size_t n;
    if (load_tokens(c->vocab, c->train, cache_dir, c->expect ? &c->want[0] : NULL, &c->all, &n)) die_lib();
    if (c->split) {
        size_t ntr = n - n / 10;
        c->tr = c->all, c->ntr = ntr;
        c->va = c->all + ntr, c->nva = n - ntr;
    } else {
        c->tr = c->all, c->ntr = n;
        if (c->valid) {
            if (load_tokens(c->vocab, c->valid, cache_dir, c->expect ? &c->want[1] : NULL, &c->valid_tok, &c->nva))
                die_lib();
            c->va = c->valid_tok;
        }
    }
    if (c->va && c->nva < 2) c->va = NULL, c->nva = 0;  // nothing to predict
}

void corpus_free(corpus *c) {
    free(c->train), free(c->valid), free(c->all), free(c->valid_tok);
    phax_vocab_free(c->vocab);
}

// Identity of a data file's bytes: its size and FNV-1a, read in pieces. The
// state stores it so that --resume checks a file before tokenizing it or
// writing a cache of it (a crafted run folder cannot name any readable file).
// want_bytes >= 0: stop early (NULL) when the size differs.
static json_t *file_identity(const char *path, json_int_t want_bytes) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) die("%s: cannot read: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) die("%s: not a regular file", path);
    if (want_bytes >= 0 && (json_int_t)sb.st_size != want_bytes) {
        close(fd);
        return NULL;
    }
    static uint8_t buf[1 << 16];
    uint64_t h = PHAX_FNV_INIT;
    json_int_t total = 0;
    for (;;) {
        ssize_t k = read(fd, buf, sizeof buf);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) die("%s: read error: %s", path, strerror(errno));
        if (k == 0) break;
        h = phax_fnv1a64(h, buf, (size_t)k), total += k;
    }
    close(fd);
    char hx[24];
    snprintf(hx, sizeof hx, "%016" PRIx64, h);
    return json_pack("{s:I, s:s}", "bytes", total, "fnv1a", hx);
}

// --resume: the data files must be the bytes the state names (its identities: the caller has
// refused a state without them), checked before anything reads them further or writes; the
// identities are kept for the load itself (c->want).
void corpus_check_files(corpus *c, const char *data_json, const char *where) {
    json_t *j = json_loads(data_json, 0, NULL);
    json_t *files = j ? json_object_get(j, "files") : NULL;
    if (!files) die("%s: the training state names no data file identities; nothing was read", where);
    const char *keys[2] = {"train", "valid"};
    const char *paths[2] = {c->train, c->valid};
    for (int i = 0; i < 2; i++) {
        json_t *want = json_object_get(files, keys[i]), *wb = json_object_get(want, "bytes");
        if (!paths[i] && json_is_null(want)) continue;
        if (!paths[i] || !json_is_integer(wb)) die("%s: data file identity unreadable (\"%s\")", where, keys[i]);
        json_t *got = file_identity(paths[i], json_integer_value(wb));
        if (!got || !json_equal(got, want))
            die("%s: not the file this run was trained on (its size or hash differs from %s's); nothing was read or written",
                paths[i], where);
        json_decref(got);
        // Kept for the load itself, which checks the bytes it reads against them again (the
        // file could be swapped between this open and the tokenizer's).
        const char *hx = json_string_value(json_object_get(want, "fnv1a"));
        char *end = NULL;
        unsigned long long f = hx ? strtoull(hx, &end, 16) : 0;
        if (!hx || !*hx || *end) die("%s: data file identity unreadable (\"%s\")", where, keys[i]);
        c->want[i] = (phax_source_identity){(uint64_t)json_integer_value(wb), (uint64_t)f};
    }
    json_decref(j);
    c->expect = 1;
}

int corpus_has_identities(const char *data_json) {
    json_t *j = json_loads(data_json, 0, NULL);
    int has = j && json_is_object(json_object_get(j, "files"));
    json_decref(j);
    return has;
}

// The token-stream fields of two data identities agree (the file identity is
// checked separately, and states of an older phax lack it).
int corpus_same_tokens(const char *a, const char *b) {
    static const char *keys[] = {"train_tokens", "train_hash", "valid_tokens", "valid_hash", "vocab_hash"};
    json_t *ja = json_loads(a, 0, NULL), *jb = json_loads(b, 0, NULL);
    int same = ja && jb;
    for (size_t i = 0; same && i < sizeof keys / sizeof *keys; i++) {
        json_t *x = json_object_get(ja, keys[i]), *y = json_object_get(jb, keys[i]);
        same = x && y && json_equal(x, y);
    }
    json_decref(ja), json_decref(jb);
    return same;
}

// Identity of the token streams and of the files they come from, stored in
// the state and checked on resume.
char *corpus_identity(const corpus *c) {
    char h1[24], h2[24], hv[24];
    snprintf(h1, sizeof h1, "%016" PRIx64, phax_fnv1a64(PHAX_FNV_INIT, c->tr, c->ntr * 4));
    snprintf(h2, sizeof h2, "%016" PRIx64, phax_fnv1a64(PHAX_FNV_INIT, c->va, c->nva * 4));
    snprintf(hv, sizeof hv, "%016" PRIx64, phax_vocab_hash(c->vocab));
    json_t *files = json_pack("{s:o, s:o}", "train", file_identity(c->train, -1), "valid",
                              c->valid ? file_identity(c->valid, -1) : json_null());
    json_t *j = json_pack("{s:I, s:s, s:I, s:s, s:s, s:o}", "train_tokens", (json_int_t)c->ntr,
                          "train_hash", h1, "valid_tokens", (json_int_t)c->nva, "valid_hash", h2,
                          "vocab_hash", hv, "files", files);
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    if (!s) die("out of memory");
    return s;
}

