// Word- and byte-level tokenizers, vocabulary files and the token cache; see
// include/phax/tokenizer.h for the conventions and the file formats.
#include "phax/tokenizer.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "phax/data.h"

// ---------------------------------------------------------------------------
// The vocabulary: spellings in one arena, and an open-addressing hash table
// (linear probing, power-of-two size, at most half full) from spelling to id.

typedef struct {
    uint64_t hash;
    int32_t id;  // −1: empty slot
} slot;

struct phax_vocab {
    phax_tok_kind kind;
    int32_t n;                     // tokens
    char *arena;                   // spellings, each followed by a NUL
    size_t arena_len, arena_cap;
    size_t *off;                   // (n) arena offset of each spelling
    uint32_t *len;                 // (n) its length in bytes
    size_t cap;                    // capacity of off / len
    slot *table;                   // (mask + 1) slots
    size_t mask;
    int32_t unk, eos;              // ids of "<unk>" / "<eos>", or −1
};

static const char EOS[] = "<eos>", UNK[] = "<unk>";

// Longest spelling shown in a message, so a huge "word" cannot flood the line.
#define SHOW 64

static int is_ws(uint8_t c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static phax_vocab *vocab_new(phax_tok_kind kind) {
    phax_vocab *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->kind = kind;
    v->unk = v->eos = -1;
    v->mask = 1023;
    v->table = malloc((v->mask + 1) * sizeof *v->table);
    if (!v->table) {
        free(v);
        return NULL;
    }
    for (size_t i = 0; i <= v->mask; i++) v->table[i].id = -1;
    return v;
}

void phax_vocab_free(phax_vocab *v) {
    if (!v) return;
    free(v->arena);
    free(v->off);
    free(v->len);
    free(v->table);
    free(v);
}

static uint64_t word_hash(const void *w, size_t len) { return phax_fnv1a64(PHAX_FNV_INIT, w, len); }

// Slot index holding w, or the empty slot where it would go.
static size_t find_slot(const phax_vocab *v, const void *w, size_t len, uint64_t h) {
    size_t i = (size_t)h & v->mask;
    for (;;) {
        const slot *s = &v->table[i];
        if (s->id < 0) return i;
        if (s->hash == h && v->len[s->id] == len && memcmp(v->arena + v->off[s->id], w, len) == 0)
            return i;
        i = (i + 1) & v->mask;
    }
}

static int32_t lookup(const phax_vocab *v, const void *w, size_t len, uint64_t h) {
    return v->table[find_slot(v, w, len, h)].id;
}

static int grow_table(phax_vocab *v) {
    size_t ncap = (v->mask + 1) * 2;
    slot *t = malloc(ncap * sizeof *t);
    if (!t) return PHAX_ERR;
    for (size_t i = 0; i < ncap; i++) t[i].id = -1;
    for (size_t i = 0; i <= v->mask; i++) {
        if (v->table[i].id < 0) continue;
        size_t j = (size_t)v->table[i].hash & (ncap - 1);
        while (t[j].id >= 0) j = (j + 1) & (ncap - 1);
        t[j] = v->table[i];
    }
    free(v->table);
    v->table = t;
    v->mask = ncap - 1;
    return PHAX_OK;
}

// Append a new token (the caller has checked it is absent); returns its id or −1.
static int32_t vocab_add(phax_vocab *v, const void *w, size_t len, uint64_t h) {
    if (v->n == INT32_MAX || len > UINT32_MAX) return -1;
    if ((size_t)v->n + 1 > v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 1024;
        size_t *no = realloc(v->off, nc * sizeof *no);
        if (!no) return -1;
        v->off = no;
        uint32_t *nl = realloc(v->len, nc * sizeof *nl);
        if (!nl) return -1;
        v->len = nl;
        v->cap = nc;
    }
    if (v->arena_len + len + 1 > v->arena_cap) {
        size_t nc = v->arena_cap ? v->arena_cap * 2 : 65536;
        while (nc < v->arena_len + len + 1) nc *= 2;
        char *na = realloc(v->arena, nc);
        if (!na) return -1;
        v->arena = na;
        v->arena_cap = nc;
    }
    if (2 * ((size_t)v->n + 1) > v->mask + 1 && grow_table(v) != PHAX_OK) return -1;
    int32_t id = v->n++;
    v->off[id] = v->arena_len;
    v->len[id] = (uint32_t)len;
    memcpy(v->arena + v->arena_len, w, len);
    v->arena[v->arena_len + len] = 0;
    v->arena_len += len + 1;
    v->table[find_slot(v, w, len, h)] = (slot){h, id};
    if (len == 5 && memcmp(w, EOS, 5) == 0) v->eos = id;
    if (len == 5 && memcmp(w, UNK, 5) == 0) v->unk = id;
    return id;
}

phax_tok_kind phax_vocab_kind(const phax_vocab *v) { return v ? v->kind : (phax_tok_kind)0; }
size_t phax_vocab_size(const phax_vocab *v) { return v ? (size_t)v->n : 0; }
int32_t phax_vocab_unk(const phax_vocab *v) { return v ? v->unk : -1; }
int32_t phax_vocab_eos(const phax_vocab *v) { return v ? v->eos : -1; }

const char *phax_vocab_token(const phax_vocab *v, int32_t id, size_t *len) {
    if (!v || id < 0 || id >= v->n) return NULL;
    if (len) *len = v->len[id];
    return v->arena + v->off[id];
}

int32_t phax_vocab_id(const phax_vocab *v, const char *word, size_t len) {
    if (!v || !word || v->kind != PHAX_TOK_WORD) return -1;
    return lookup(v, word, len, word_hash(word, len));
}

int phax_vocab_byte(phax_vocab **out) {
    if (!out) return phax_fail("phax_vocab_byte: NULL argument");
    phax_vocab *v = vocab_new(PHAX_TOK_BYTE);
    if (!v) return phax_fail("byte vocabulary: out of memory");
    for (int b = 0; b < 256; b++) {
        char hex[3];
        snprintf(hex, sizeof hex, "%02x", b);
        if (vocab_add(v, hex, 2, word_hash(hex, 2)) != b) {
            phax_vocab_free(v);
            return phax_fail("byte vocabulary: out of memory");
        }
    }
    *out = v;
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// Scanning text. One pass serves both building (unknown words are added) and
// encoding (unknown words become <unk> or an error).

typedef struct {
    int32_t *ids;
    size_t n, cap;
} ibuf;

static int ibuf_push(ibuf *b, int32_t id) {
    if (b->n == b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 4096;
        int32_t *ni = realloc(b->ids, nc * sizeof *ni);
        if (!ni) return PHAX_ERR;
        b->ids = ni;
        b->cap = nc;
    }
    b->ids[b->n++] = id;
    return PHAX_OK;
}

// The id of one word (or of <eos>) at line `line`; builds when `build`.
static int word_id(phax_vocab *v, int build, const uint8_t *w, size_t len, const char *name,
                   size_t line, int32_t *id) {
    uint64_t h = word_hash(w, len);
    int32_t i = lookup(v, w, len, h);
    if (i < 0 && build) {
        i = vocab_add(v, w, len, h);
        if (i < 0)
            return phax_fail("%s:%zu: vocabulary full or out of memory at %d tokens", name, line, v->n);
    }
    if (i < 0) i = v->unk;
    if (i < 0) {
        int shown = len > SHOW ? SHOW : (int)len;
        return phax_fail("%s:%zu: word '%.*s%s' is not in the vocabulary (no <unk>)", name, line,
                         shown, (const char *)w, len > SHOW ? "..." : "");
    }
    *id = i;
    return PHAX_OK;
}

// Word-level scan of text[0, n). out may be NULL (building only).
static int scan_words(phax_vocab *v, int build, const uint8_t *text, size_t n, const char *name,
                      ibuf *out) {
    size_t line = 1, i = 0;
    int32_t eos = v->eos;  // cached: looked up once
    while (i < n) {
        uint8_t c = text[i];
        if (c == '\n') {
            if (eos < 0 && word_id(v, build, (const uint8_t *)EOS, 5, name, line, &eos) != PHAX_OK)
                return PHAX_ERR;
            if (out && ibuf_push(out, eos) != PHAX_OK) return phax_fail("%s: out of memory", name);
            line++, i++;
            continue;
        }
        if (is_ws(c)) {
            i++;
            continue;
        }
        size_t s = i;
        while (i < n && !is_ws(text[i])) i++;
        int32_t id;
        if (word_id(v, build, text + s, i - s, name, line, &id) != PHAX_OK) return PHAX_ERR;
        if (out && ibuf_push(out, id) != PHAX_OK) return phax_fail("%s: out of memory", name);
        // A literal "<eos>" word may have just been added: keep the cached id in step.
        if (eos < 0) eos = v->eos;
    }
    return PHAX_OK;
}

int phax_vocab_build_text(const uint8_t *text, size_t n, const char *name, phax_vocab **out) {
    if (!text || !name || !out) return phax_fail("phax_vocab_build_text: NULL argument");
    phax_vocab *v = vocab_new(PHAX_TOK_WORD);
    if (!v) return phax_fail("%s: out of memory", name);
    if (scan_words(v, 1, text, n, name, NULL) != PHAX_OK) {
        phax_vocab_free(v);
        return PHAX_ERR;
    }
    if (v->n == 0) {
        phax_vocab_free(v);
        return phax_fail("%s: no words: the vocabulary would be empty", name);
    }
    *out = v;
    return PHAX_OK;
}

// Ranks for the capped vocabulary: more frequent first, then earlier first seen.
typedef struct {
    uint64_t count;
    int32_t id;
} word_rank;
static int by_count(const void *a, const void *b) {
    const word_rank *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}
static int by_id(const void *a, const void *b) {
    const word_rank *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

int phax_vocab_build_text_max(const uint8_t *text, size_t n, const char *name, size_t max_words,
                              phax_vocab **out) {
    if (!text || !name || !out) return phax_fail("phax_vocab_build_text_max: NULL argument");
    if (max_words != 0 && max_words < 3)
        return phax_fail("%s: a vocabulary capped at %zu words cannot hold <unk>, <eos> and a word", name,
                         max_words);
    phax_vocab *full;
    if (phax_vocab_build_text(text, n, name, &full) != PHAX_OK) return PHAX_ERR;
    if (max_words == 0 || (size_t)full->n <= max_words) {
        *out = full;
        return PHAX_OK;
    }
    // Count every word, keep <eos> and the most frequent others, leave room for <unk>.
    int rc = PHAX_ERR;
    int32_t *ids = NULL;
    word_rank *order = calloc((size_t)full->n, sizeof *order);
    phax_vocab *v = NULL;
    size_t nid = 0;
    if (!order) {
        phax_fail("%s: out of memory", name);
        goto done;
    }
    if (phax_encode(full, text, n, name, &ids, &nid) != PHAX_OK) goto done;
    for (int32_t i = 0; i < full->n; i++) order[i].id = i;
    for (size_t i = 0; i < nid; i++) order[ids[i]].count++;
    if (full->eos >= 0) order[full->eos].count = UINT64_MAX;  // the line structure is always kept
    if (full->unk >= 0) order[full->unk].count = UINT64_MAX;
    qsort(order, (size_t)full->n, sizeof *order, by_count);
    size_t keep = full->unk >= 0 ? max_words : max_words - 1;
    qsort(order, keep, sizeof *order, by_id);  // the kept words in first-seen order
    if (!(v = vocab_new(PHAX_TOK_WORD))) {
        phax_fail("%s: out of memory", name);
        goto done;
    }
    for (size_t k = 0; k < keep; k++) {
        int32_t i = order[k].id;
        const char *w = full->arena + full->off[i];
        if (vocab_add(v, w, full->len[i], word_hash(w, full->len[i])) < 0) {
            phax_fail("%s: out of memory", name);
            goto done;
        }
    }
    if (v->unk < 0 && vocab_add(v, UNK, 5, word_hash(UNK, 5)) < 0) {
        phax_fail("%s: out of memory", name);
        goto done;
    }
    *out = v, v = NULL;
    rc = PHAX_OK;
done:
    phax_vocab_free(v);
    phax_vocab_free(full);
    free(order), free(ids);
    return rc;
}

int phax_vocab_build_file_max(const char *train_path, size_t max_words, phax_vocab **out) {
    if (!train_path || !out) return phax_fail("phax_vocab_build_file: NULL argument");
    uint8_t *text;
    size_t n;
    if (phax_data_read(train_path, &text, &n) != PHAX_OK) return PHAX_ERR;
    int rc = phax_vocab_build_text_max(text, n, train_path, max_words, out);
    free(text);
    return rc;
}

int phax_vocab_build_file(const char *train_path, phax_vocab **out) {
    return phax_vocab_build_file_max(train_path, 0, out);
}

int phax_encode(const phax_vocab *v, const uint8_t *text, size_t n, const char *name,
                int32_t **out, size_t *n_out) {
    if (!v || (!text && n) || !name || !out || !n_out) return phax_fail("phax_encode: NULL argument");
    ibuf b = {0};
    if (v->kind == PHAX_TOK_BYTE) {
        b.ids = malloc((n ? n : 1) * sizeof *b.ids);
        if (!b.ids) return phax_fail("%s: out of memory for %zu tokens", name, n);
        for (size_t i = 0; i < n; i++) b.ids[i] = text[i];
        b.n = n;
    } else {
        // Build mode is off, so the vocabulary is only read (the cast drops nothing).
        if (scan_words((phax_vocab *)v, 0, text, n, name, &b) != PHAX_OK) {
            free(b.ids);
            return PHAX_ERR;
        }
        if (!b.ids && !(b.ids = malloc(sizeof *b.ids))) return phax_fail("%s: out of memory", name);
    }
    *out = b.ids;
    *n_out = b.n;
    return PHAX_OK;
}

int phax_encode_file(const phax_vocab *v, const char *path, int32_t **out, size_t *n_out) {
    if (!v || !path || !out || !n_out) return phax_fail("phax_encode_file: NULL argument");
    uint8_t *text;
    size_t n;
    if (phax_data_read(path, &text, &n) != PHAX_OK) return PHAX_ERR;
    int rc = phax_encode(v, text, n, path, out, n_out);
    free(text);
    return rc;
}

int phax_encode_prompt(const phax_vocab *v, const char *prompt, int32_t **out, size_t *n_out) {
    if (!prompt) return phax_fail("phax_encode_prompt: NULL prompt");
    return phax_encode(v, (const uint8_t *)prompt, strlen(prompt), "prompt", out, n_out);
}

int phax_decode(const phax_vocab *v, const int32_t *ids, size_t n, char **out, size_t *len) {
    if (!v || (!ids && n) || !out) return phax_fail("phax_decode: NULL argument");
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= v->n)
            return phax_fail("decode: id %d at position %zu is outside the vocabulary [0, %d)",
                             (int)ids[i], i, (int)v->n);
    // Word: every token is followed by at most one separator, so this bounds the length.
    size_t total = 1;
    for (size_t i = 0; i < n; i++) total += v->kind == PHAX_TOK_BYTE ? 1 : (size_t)v->len[ids[i]] + 1;
    char *s = malloc(total);
    if (!s) return phax_fail("decode: out of memory for %zu bytes", total);
    size_t k = 0;
    int need_space = 0;  // a word was written since the start or the last newline
    for (size_t i = 0; i < n; i++) {
        if (v->kind == PHAX_TOK_BYTE) {
            s[k++] = (char)(uint8_t)ids[i];
        } else if (ids[i] == v->eos) {
            s[k++] = '\n';
            need_space = 0;
        } else {
            if (need_space) s[k++] = ' ';
            memcpy(s + k, v->arena + v->off[ids[i]], v->len[ids[i]]);
            k += v->len[ids[i]];
            need_space = 1;
        }
    }
    s[k] = 0;
    *out = s;
    if (len) *len = k;
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// Vocabulary files

static const char *kind_name(phax_tok_kind k) { return k == PHAX_TOK_BYTE ? "byte" : "word"; }

// The file form: header line, then one spelling per line.
static int vocab_text(const phax_vocab *v, char **out, size_t *len) {
    char hdr[64];
    int h = snprintf(hdr, sizeof hdr, "phax-vocab %s %d\n", kind_name(v->kind), (int)v->n);
    size_t total = (size_t)h + v->arena_len;  // arena: every spelling + one NUL → '\n'
    char *s = malloc(total + 1);
    if (!s) return phax_fail("vocabulary: out of memory");
    memcpy(s, hdr, (size_t)h);
    size_t k = (size_t)h;
    for (int32_t i = 0; i < v->n; i++) {
        memcpy(s + k, v->arena + v->off[i], v->len[i]);
        k += v->len[i];
        s[k++] = '\n';
    }
    s[k] = 0;
    *out = s;
    *len = k;
    return PHAX_OK;
}

uint64_t phax_vocab_hash(const phax_vocab *v) {
    char *s;
    size_t n;
    if (!v || vocab_text(v, &s, &n) != PHAX_OK) return 0;
    uint64_t h = phax_fnv1a64(PHAX_FNV_INIT, s, n);
    free(s);
    return h;
}

int phax_vocab_save(const phax_vocab *v, const char *path) {
    if (!v || !path) return phax_fail("phax_vocab_save: NULL argument");
    char *s;
    size_t n;
    if (vocab_text(v, &s, &n) != PHAX_OK) return phax_fail("%s: %s", path, phax_error());
    int rc = phax_write_file_atomic(path, s, n);
    free(s);
    return rc;
}

// Parse "phax-vocab KIND COUNT" (the whole line, single spaces).
static int parse_header(const char *line, size_t len, phax_tok_kind *kind, long long *count) {
    static const char P[] = "phax-vocab ";
    size_t p = sizeof P - 1;
    if (len < p || memcmp(line, P, p) != 0) return 0;
    if (len >= p + 5 && memcmp(line + p, "word ", 5) == 0) *kind = PHAX_TOK_WORD;
    else if (len >= p + 5 && memcmp(line + p, "byte ", 5) == 0) *kind = PHAX_TOK_BYTE;
    else return 0;
    p += 5;
    if (p == len || len - p > 10) return 0;
    long long c = 0;
    for (; p < len; p++) {
        if (line[p] < '0' || line[p] > '9') return 0;
        c = c * 10 + (line[p] - '0');
    }
    *count = c;
    return 1;
}

static int vocab_load(const char *path, long long expect, phax_vocab **out) {
    if (!path || !out) return phax_fail("phax_vocab_load: NULL argument");
    uint8_t *buf;
    size_t n;
    // Expecting `expect` tokens, the file can hold at most ~1 KiB per token (1 MiB at least):
    // read no more than that, so a small checkpoint naming a large (or .xz) vocabulary costs
    // what its vocab_size allows, not the corpus-file limit.
    size_t limit = phax_data_max_bytes();
    if (expect > 0) {
        size_t bound = (size_t)expect < ((size_t)1 << 30) ? ((size_t)expect << 10) + 64 : SIZE_MAX;
        if (bound < ((size_t)1 << 20)) bound = (size_t)1 << 20;
        if (bound < limit) phax_data_set_max_bytes(bound);
    }
    int rd = phax_data_read(path, &buf, &n);
    if (expect > 0) phax_data_set_max_bytes(limit);
    if (rd != PHAX_OK) return PHAX_ERR;
    const char *s = (const char *)buf;
    const char *nl = memchr(s, '\n', n);
    size_t hlen = nl ? (size_t)(nl - s) : n;
    phax_tok_kind kind;
    long long count;
    phax_vocab *v = NULL;
    if (!parse_header(s, hlen, &kind, &count)) {
        int shown = hlen > SHOW ? SHOW : (int)hlen;
        phax_fail("%s:1: bad header '%.*s' (expected 'phax-vocab word COUNT' or 'phax-vocab byte 256')",
                  path, shown, s);
        goto fail;
    }
    if (count < 1 || count > INT32_MAX || (kind == PHAX_TOK_BYTE && count != 256)) {
        phax_fail("%s:1: bad token count %lld for a %s vocabulary", path, count, kind_name(kind));
        goto fail;
    }
    if (expect > 0 && count != expect) {  // before any token is read
        phax_fail("%s:1: the header announces %lld tokens, %lld expected", path, count, expect);
        goto fail;
    }
    v = vocab_new(kind);
    if (!v) {
        phax_fail("%s: out of memory", path);
        goto fail;
    }
    size_t p = nl ? hlen + 1 : n, line = 1;
    while (p < n) {  // one token per line; a missing final '\n' is accepted
        line++;
        const char *t = s + p;
        const char *e = memchr(t, '\n', n - p);
        size_t len = e ? (size_t)(e - t) : n - p;
        p += len + 1;
        int shown = len > SHOW ? SHOW : (int)len;
        if (v->n == count) {
            phax_fail("%s:%zu: more tokens than the %lld the header announces", path, line, count);
            goto fail;
        }
        if (len == 0) {
            phax_fail("%s:%zu: empty token", path, line);
            goto fail;
        }
        for (size_t k = 0; k < len; k++)
            if (is_ws((uint8_t)t[k])) {
                phax_fail("%s:%zu: token holds whitespace (byte 0x%02x at column %zu)", path, line,
                          (unsigned)(uint8_t)t[k], k + 1);
                goto fail;
            }
        if (kind == PHAX_TOK_BYTE) {
            char hex[3];
            snprintf(hex, sizeof hex, "%02x", (unsigned)v->n);
            if (len != 2 || memcmp(t, hex, 2) != 0) {
                phax_fail("%s:%zu: expected byte token '%s', found '%.*s'", path, line, hex, shown, t);
                goto fail;
            }
        }
        uint64_t h = word_hash(t, len);
        int32_t prev = lookup(v, t, len, h);
        if (prev >= 0) {
            phax_fail("%s:%zu: duplicate token '%.*s' (also on line %d)", path, line, shown, t,
                      (int)prev + 2);
            goto fail;
        }
        if (vocab_add(v, t, len, h) < 0) {
            phax_fail("%s:%zu: out of memory", path, line);
            goto fail;
        }
    }
    if (v->n != count) {
        phax_fail("%s: the header announces %lld tokens but the file has %d", path, count, (int)v->n);
        goto fail;
    }
    free(buf);
    *out = v;
    return PHAX_OK;
fail:
    phax_vocab_free(v);
    free(buf);
    return PHAX_ERR;
}

int phax_vocab_load(const char *path, phax_vocab **out) { return vocab_load(path, 0, out); }

int phax_vocab_load_expect(const char *path, long long count, phax_vocab **out) {
    if (count < 1) return phax_fail("phax_vocab_load_expect: count %lld < 1", count);
    return vocab_load(path, count, out);
}

// ---------------------------------------------------------------------------
// Token cache

#define CACHE_MAGIC "PHAXTOK"  // 7 characters + the NUL: 8 bytes
#define CACHE_VERSION 1u
#define CACHE_HDR 80

static void put_le(uint8_t *p, uint64_t x, int bytes) {
    for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(x >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int bytes) {
    uint64_t x = 0;
    for (int i = 0; i < bytes; i++) x |= (uint64_t)p[i] << (8 * i);
    return x;
}

static int ends_with_xz(const char *s) {
    size_t n = strlen(s);
    return n >= 3 && strcmp(s + n - 3, ".xz") == 0;
}

// source_path made absolute with the working directory. Not canonicalised
// (glibc hides realpath under plain _POSIX_C_SOURCE); a differently spelled
// path to the same file only costs a second cache file.
static char *absolute_path(const char *p) {
    if (p[0] == '/') return strdup(p);
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) return strdup(p);
    size_t n = strlen(cwd) + strlen(p) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s/%s", cwd, p);
    return s;
}

// Payload hash over the little-endian bytes, the same on every host.
static uint64_t tokens_hash(const int32_t *ids, size_t n) {
    uint64_t h = PHAX_FNV_INIT;
    for (size_t i = 0; i < n; i++) {
        uint8_t b[4];
        put_le(b, (uint32_t)ids[i], 4);
        h = phax_fnv1a64(h, b, 4);
    }
    return h;
}

static int read_full(int fd, void *buf, size_t n, uint64_t off) {
    uint8_t *p = buf;
    while (n) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return PHAX_ERR;
        p += r, n -= (size_t)r, off += (uint64_t)r;
    }
    return PHAX_OK;
}

// Read and check a cache file; on a hit *ids holds its tokens. The header is read
// and checked against the file's size before anything is allocated, and the
// payload is read straight into the token array (no copy of the whole file).
static phax_cache_result cache_read(const char *cpath, const phax_vocab *v, uint64_t vhash,
                                    uint64_t src_size, uint64_t src_hash, int src_xz,
                                    int32_t **ids, size_t *n) {
    int fd = open(cpath, O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // a FIFO would block the open
    if (fd < 0) return errno == ENOENT ? PHAX_CACHE_MISSING : PHAX_CACHE_CORRUPT;
    struct stat sb;
    uint8_t c[CACHE_HDR];
    phax_cache_result res = PHAX_CACHE_CORRUPT;
    int32_t *t = NULL;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size < CACHE_HDR ||
        read_full(fd, c, CACHE_HDR, 0) != PHAX_OK)
        goto done;
    if (memcmp(c, CACHE_MAGIC, 8) != 0 || get_le(c + 8, 4) != CACHE_VERSION) goto done;
    if (get_le(c + 12, 4) != (uint64_t)v->kind || get_le(c + 16, 8) != vhash ||
        get_le(c + 24, 8) != (uint64_t)v->n || get_le(c + 32, 8) != src_size ||
        get_le(c + 56, 8) != src_hash) {
        res = PHAX_CACHE_STALE;
        goto done;
    }
    // A token needs at least one byte of text, so the count is bounded like a text:
    // by the source's size when it is plain text (exactly its size for bytes).
    uint64_t count = get_le(c + 64, 8), fsize = (uint64_t)sb.st_size;
    if (count > phax_data_max_bytes() || fsize != CACHE_HDR + 4 * count) goto done;
    if (!src_xz && (count > src_size || (v->kind == PHAX_TOK_BYTE && count != src_size))) goto done;
    if (!(t = malloc((count ? count : 1) * sizeof *t))) goto done;  // rebuilding reports it
    if (read_full(fd, t, 4 * count, CACHE_HDR) != PHAX_OK) goto done;
    const uint8_t *b = (const uint8_t *)t;
    for (size_t i = 0; i < count; i++) {
        t[i] = (int32_t)(uint32_t)get_le(b + 4 * i, 4);  // in place: reads 4 bytes, writes them
        if (t[i] < 0 || t[i] >= v->n) goto done;
    }
    if (tokens_hash(t, count) != get_le(c + 72, 8)) goto done;
    *ids = t, t = NULL;
    *n = (size_t)count;
    res = PHAX_CACHE_HIT;
done:
    free(t);
    close(fd);
    return res;
}

// Write the cache of *ids (n tokens). The file is built inside the token array
// itself (grown by the header, tokens moved up, written, moved back), so writing
// a cache never holds a second full copy of the stream. *ids may move.
static int cache_write(const char *path, const phax_vocab *v, uint64_t vhash,
                       const phax_file_stat *st, uint64_t src_hash, int32_t **ids, size_t n) {
    if (n > (SIZE_MAX - CACHE_HDR) / 4) return phax_fail("%s: too many tokens (%zu)", path, n);
    size_t bytes = CACHE_HDR + 4 * n;
    uint64_t thash = tokens_hash(*ids, n);
    uint8_t *c = realloc(*ids, bytes);  // large blocks grow in place (mremap)
    if (!c) return phax_fail("%s: out of memory for %zu bytes", path, bytes);
    *ids = (int32_t *)c;
    memmove(c + CACHE_HDR, c, 4 * n);
    int32_t *payload = (int32_t *)(c + CACHE_HDR);  // CACHE_HDR is a multiple of 4
    for (size_t i = 0; i < n; i++) {  // little-endian on every host (a no-op on x86)
        uint32_t x = (uint32_t)payload[i];
        put_le((uint8_t *)&payload[i], x, 4);
    }
    memcpy(c, CACHE_MAGIC, 8);
    put_le(c + 8, CACHE_VERSION, 4);
    put_le(c + 12, (uint64_t)v->kind, 4);
    put_le(c + 16, vhash, 8);
    put_le(c + 24, (uint64_t)v->n, 8);
    put_le(c + 32, st->size, 8);
    put_le(c + 40, (uint64_t)st->mtime_sec, 8);
    put_le(c + 48, (uint64_t)st->mtime_nsec, 8);
    put_le(c + 56, src_hash, 8);
    put_le(c + 64, (uint64_t)n, 8);
    put_le(c + 72, thash, 8);
    int rc = phax_write_file_atomic(path, c, bytes);
    // Back to a plain token array, whatever the write did.
    for (size_t i = 0; i < n; i++) payload[i] = (int32_t)(uint32_t)get_le((uint8_t *)&payload[i], 4);
    memmove(c, c + CACHE_HDR, 4 * n);
    int32_t *shrunk = realloc(c, (n ? n : 1) * sizeof *shrunk);
    if (shrunk) *ids = shrunk;
    return rc;
}

static int load_cached(const phax_vocab *v, const char *source_path, const char *cache_dir,
                       const phax_source_identity *want, int32_t **out, size_t *n, phax_cache_result *result,
                       char **cache_path) {
    if (!v || !source_path || !cache_dir || !out || !n)
        return phax_fail("phax_tokens_load_cached: NULL argument");
    if (cache_path) *cache_path = NULL;
    uint8_t *raw = NULL, *text = NULL;
    char *cpath = NULL, *real = NULL;
    int32_t *ids = NULL;
    size_t raw_n;
    phax_file_stat st;
    phax_cache_result res = PHAX_CACHE_MISSING;
    int rc = PHAX_ERR;
    if (phax_data_read_raw(source_path, &raw, &raw_n, &st) != PHAX_OK) return PHAX_ERR;
    uint64_t src_hash = phax_fnv1a64(PHAX_FNV_INIT, raw, raw_n);
    // The bytes actually read, before any cache is read or written: a file swapped after
    // the caller's own check (a link changed between two opens) is refused here.
    if (want && ((uint64_t)raw_n != want->bytes || src_hash != want->fnv1a)) {
        free(raw);
        return phax_fail("%s: not the file this run was trained on (the bytes read differ in size or hash from "
                         "the training state's); nothing was written", source_path);
    }
    uint64_t vhash = phax_vocab_hash(v);
    if (phax_mkdir_p(cache_dir) != PHAX_OK) goto done;

    // The cache name: the source's basename for people, a hash of its absolute
    // path so two "train.txt" in different folders do not collide.
    if (!(real = absolute_path(source_path))) {
        phax_fail("%s: out of memory", source_path);
        goto done;
    }
    const char *base = strrchr(source_path, '/');
    base = base ? base + 1 : source_path;
    uint32_t phash = (uint32_t)phax_hash_str(real);
    size_t plen = strlen(cache_dir) + strlen(base) + 48;
    if (!(cpath = malloc(plen))) {
        phax_fail("%s: out of memory", source_path);
        goto done;
    }
    snprintf(cpath, plen, "%s/%s.%08x.%016llx.tok", cache_dir, base, (unsigned)phash,
             (unsigned long long)vhash);

    res = cache_read(cpath, v, vhash, st.size, src_hash, ends_with_xz(source_path), out, n);
    if (res == PHAX_CACHE_HIT) {
        rc = PHAX_OK;
        goto done;
    }

    // Build: decode the source bytes already in memory, check them, tokenize, write the
    // cache. Each buffer is freed as soon as the next one exists.
    size_t tn = raw_n;
    if (ends_with_xz(source_path)) {
        if (phax_xz_decode(raw, raw_n, source_path, &text, &tn) != PHAX_OK) goto done;
        free(raw), raw = NULL;
        if (tn == 0) {
            phax_fail("%s: the xz file decodes to an empty text", source_path);
            goto done;
        }
    } else {
        text = raw, raw = NULL;
    }
    if (phax_data_verify(source_path, text, tn) != PHAX_OK) goto done;
    size_t nid;
    if (phax_encode(v, text, tn, source_path, &ids, &nid) != PHAX_OK) goto done;
    free(text), text = NULL;
    if (cache_write(cpath, v, vhash, &st, src_hash, &ids, nid) != PHAX_OK) goto done;
    *out = ids, ids = NULL;
    *n = nid;
    rc = PHAX_OK;
done:
    if (rc == PHAX_OK) {
        if (result) *result = res;
        if (cache_path) *cache_path = cpath, cpath = NULL;
    }
    free(raw);
    free(text);
    free(ids);
    free(cpath);
    free(real);
    return rc;
}

int phax_tokens_load_cached_ex(const phax_vocab *v, const char *source_path, const char *cache_dir, int32_t **out,
                               size_t *n, phax_cache_result *result, char **cache_path) {
    return load_cached(v, source_path, cache_dir, NULL, out, n, result, cache_path);
}

int phax_tokens_load_cached(const phax_vocab *v, const char *source_path, const char *cache_dir,
                            int32_t **out, size_t *n) {
    return load_cached(v, source_path, cache_dir, NULL, out, n, NULL, NULL);
}

int phax_tokens_load_expected(const phax_vocab *v, const char *source_path, const char *cache_dir,
                              const phax_source_identity *want, int32_t **out, size_t *n) {
    if (!want) return phax_fail("phax_tokens_load_expected: NULL identity");
    return load_cached(v, source_path, cache_dir, want, out, n, NULL, NULL);
}
