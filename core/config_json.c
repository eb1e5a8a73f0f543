// Model configs as JSON (jansson): strict reading — unknown keys, wrong types,
// duplicate keys and impossible values are errors that name the key — and
// writing every field in a stable order, atomically for files.
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "phax/atomic_file.h"
#include "phax/model.h"

// ---------------------------------------------------------------------------
// The keys, in the order they are written (the order of the struct).
typedef enum { K_FAMILY, K_INT, K_DBL, K_BOOL, K_SCORE, K_ORDER } key_kind;

typedef struct {
    const char *key;
    key_kind kind;
    size_t off;  // of an int (K_INT, K_BOOL, K_SCORE, K_ORDER) or a double (K_DBL); unused for K_FAMILY
} key_info;

#define KEY(name, kind) {#name, kind, offsetof(phax_model_cfg, name)}
static const key_info KEYS[] = {
    {"family", K_FAMILY, 0},
    KEY(vocab_size, K_INT),
    KEY(d_model, K_INT),
    KEY(n_layers, K_INT),
    KEY(n_heads, K_INT),
    KEY(n_kv_heads, K_INT),
    KEY(head_dim, K_INT),
    {"score", K_SCORE, offsetof(phax_model_cfg, score_cosine)},
    KEY(rope_base, K_DBL),
    KEY(attn_window, K_INT),
    KEY(tie_embeddings, K_BOOL),
    KEY(ffn_hidden, K_INT),
    KEY(ffn_aux_hidden, K_INT),
    KEY(gss_expand, K_INT),
    KEY(gss_hidden, K_INT),
    KEY(gss_state, K_INT),
    KEY(gss_long_memory_init, K_BOOL),
    KEY(use_gss, K_BOOL),
    KEY(use_attn, K_BOOL),
    KEY(use_ffn, K_BOOL),
    KEY(ffn_separate_mix, K_BOOL),
    KEY(freeze_mix, K_BOOL),
    KEY(mlstm_heads, K_INT),
    {"mixer_order", K_ORDER, offsetof(phax_model_cfg, mlstm_first)},
    KEY(igate_bias_init, K_DBL),
    KEY(fgate_init, K_DBL),
    KEY(mlstm_norm_eps, K_DBL),
    KEY(gdn_heads, K_INT),
    KEY(gdn_conv, K_INT),
    KEY(gdn_norm_eps, K_DBL),
    KEY(train_len, K_INT),
    KEY(w_short, K_INT),
    KEY(w_long, K_INT),
    KEY(p_short, K_DBL),
    KEY(anneal, K_DBL),
};
#undef KEY
enum { N_KEYS = sizeof KEYS / sizeof KEYS[0] };

static const char FAMILY_LIST[] = "pha, transformer, serial, swax, swa, mlstm, swa_full, swax_gdn";

// Integers are decoded as reals so that a huge integer is reported against its
// key instead of failing the whole parse; int fields then check integrality.
enum { LOAD_FLAGS = JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL };

// Largest config file read (a config is a few hundred bytes).
enum { MAX_FILE_BYTES = 16 << 20 };

static int *int_at(phax_model_cfg *c, const key_info *k) { return (int *)((char *)c + k->off); }
static double *dbl_at(phax_model_cfg *c, const key_info *k) { return (double *)((char *)c + k->off); }
static int int_of(const phax_model_cfg *c, const key_info *k) { return *(const int *)((const char *)c + k->off); }
static double dbl_of(const phax_model_cfg *c, const key_info *k) {
    return *(const double *)((const char *)c + k->off);
}

// ---------------------------------------------------------------------------
// Message helpers: user text (keys, string values, jansson's excerpts) is
// quoted, escaped and shortened so that a message stays one printable line.
static void quote(char *out, size_t n, const char *s) {
    enum { MAX_SHOWN = 48 };
    size_t o = 0, shown = 0;
    out[o++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++, shown++) {
        // Cut only at a character boundary (not inside a UTF-8 sequence).
        if ((shown >= MAX_SHOWN && (*p & 0xC0) != 0x80) || o + 8 >= n) {
            if (o + 5 < n) memcpy(out + o, "\"...", 4), o += 4;
            out[o] = '\0';
            return;
        }
        if (*p == '"' || *p == '\\') {
            out[o++] = '\\';
            out[o++] = (char)*p;
        } else if (*p < 0x20 || *p == 0x7f) {
            o += (size_t)snprintf(out + o, n - o, "\\x%02x", *p);
        } else {
            out[o++] = (char)*p;  // bytes >= 0x80: jansson has checked the UTF-8
        }
    }
    out[o++] = '"';
    out[o] = '\0';
}

// Control characters of jansson's own text replaced, length capped.
static void clean(char *out, size_t n, const char *s) {
    size_t o = 0;
    for (; *s && o + 1 < n; s++) out[o++] = ((unsigned char)*s < 0x20 || *s == 0x7f) ? '?' : *s;
    out[o] = '\0';
}

// The shortest of %.15g, %.16g, %.17g that reads back as exactly v.
static int round_trip_digits(double v) {
    char buf[40];
    for (int p = 15; p < 17; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, v);
        if (strtod(buf, NULL) == v) return p;
    }
    return 17;
}

static void fmt_double(char *buf, size_t n, double v) { snprintf(buf, n, "%.*g", round_trip_digits(v), v); }

static const char *type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER:
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

static int wrong_type(const char *where, const char *key, const char *expected, const json_t *v) {
    return phax_fail("%s: key \"%s\" must be %s, got %s", where, key, expected, type_name(v));
}

// ---------------------------------------------------------------------------
// Reading.

static int read_int(const char *where, const char *key, const json_t *v, int *out) {
    if (!json_is_number(v)) return wrong_type(where, key, "an integer", v);
    double x = json_number_value(v);
    char num[40];
    fmt_double(num, sizeof num, x);
    if (x != floor(x)) return phax_fail("%s: key \"%s\" must be an integer, got %s", where, key, num);
    if (x < INT_MIN || x > INT_MAX)
        return phax_fail("%s: key \"%s\" is out of range: %s is not in [%d, %d]", where, key, num, INT_MIN, INT_MAX);
    *out = (int)x;
    return PHAX_OK;
}

static int read_choice(const char *where, const char *key, const json_t *v, const char *one, const char *zero,
                       int *out) {
    char q[256];
    if (!json_is_string(v)) {
        snprintf(q, sizeof q, "\"%s\" or \"%s\"", one, zero);
        return wrong_type(where, key, q, v);
    }
    const char *s = json_string_value(v);
    if (!strcmp(s, one)) *out = 1;
    else if (!strcmp(s, zero)) *out = 0;
    else {
        quote(q, sizeof q, s);
        return phax_fail("%s: key \"%s\" must be \"%s\" or \"%s\", got %s", where, key, one, zero, q);
    }
    return PHAX_OK;
}

static int read_value(const char *where, const key_info *k, const json_t *v, phax_model_cfg *c) {
    switch (k->kind) {
    case K_FAMILY: return PHAX_OK;  // read first, before the defaults
    case K_INT: return read_int(where, k->key, v, int_at(c, k));
    case K_DBL:
        if (!json_is_number(v)) return wrong_type(where, k->key, "a number", v);
        *dbl_at(c, k) = json_number_value(v);
        return PHAX_OK;
    case K_BOOL:
        if (!json_is_boolean(v)) return wrong_type(where, k->key, "a boolean (true or false)", v);
        *int_at(c, k) = json_is_true(v);
        return PHAX_OK;
    case K_SCORE: return read_choice(where, k->key, v, "cosine", "dot", int_at(c, k));
    case K_ORDER: return read_choice(where, k->key, v, "mlstm_first", "swa_first", int_at(c, k));
    }
    return phax_fail("%s: internal error: key \"%s\" has no kind", where, k->key);
}

static const key_info *find_key(const char *key) {
    for (int i = 0; i < N_KEYS; i++)
        if (!strcmp(KEYS[i].key, key)) return &KEYS[i];
    return NULL;
}

static int from_object(phax_model_cfg *out, const json_t *root, const char *where) {
    if (!json_is_object(root)) return phax_fail("%s: the top level must be an object, got %s", where, type_name(root));

    const json_t *fv = json_object_get(root, "family");
    if (!fv) return phax_fail("%s: key \"family\" is required (one of %s)", where, FAMILY_LIST);
    if (!json_is_string(fv)) return wrong_type(where, "family", "a string", fv);
    phax_family fam;
    if (phax_family_parse(json_string_value(fv), &fam) != PHAX_OK) {
        char q[256];
        quote(q, sizeof q, json_string_value(fv));
        return phax_fail("%s: key \"family\" must be one of %s, got %s", where, FAMILY_LIST, q);
    }
    phax_model_cfg c = phax_model_cfg_default(fam);

    const char *key;
    json_t *v;
    json_object_foreach((json_t *)root, key, v) {
        const key_info *k = find_key(key);
        if (!k) {
            char q[256];
            quote(q, sizeof q, key);
            return phax_fail("%s: unknown key %s", where, q);
        }
        if (read_value(where, k, v, &c) != PHAX_OK) return PHAX_ERR;
    }

    if (phax_model_cfg_resolve(&c) != PHAX_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", phax_error());
        // resolve's messages start "config: "; a `where` that already ends in "config"
        // (a checkpoint's or an oracle input's metadata) would say it twice.
        size_t wl = strlen(where);
        const char *m = msg;
        if (wl >= 6 && !strcmp(where + wl - 6, "config") && !strncmp(m, "config: ", 8)) m += 8;
        return phax_fail("%s: %s", where, m);
    }
    *out = c;
    return PHAX_OK;
}

static int from_buffer(phax_model_cfg *c, const char *buf, size_t len, const char *where) {
    json_error_t e;
    json_t *root = json_loadb(buf, len, LOAD_FLAGS, &e);
    if (!root) {
        char text[sizeof e.text];
        clean(text, sizeof text, e.text);
        if (e.line >= 1) return phax_fail("%s:%d:%d: invalid JSON: %s", where, e.line, e.column, text);
        return phax_fail("%s: invalid JSON: %s", where, text);
    }
    int rc = from_object(c, root, where);
    json_decref(root);
    return rc;
}

int phax_model_cfg_from_json_str(phax_model_cfg *c, const char *json, const char *where) {
    if (!where) where = "<string>";
    if (!c || !json) return phax_fail("%s: no config or no JSON text (NULL)", where);
    return from_buffer(c, json, strlen(json), where);
}

int phax_model_cfg_from_json_file(phax_model_cfg *c, const char *path) {
    if (!c || !path) return phax_fail("config: no config or no path (NULL)");
    FILE *f = fopen(path, "rb");
    if (!f) return phax_fail("%s: cannot open: %s", path, strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    int rc = PHAX_OK;
    while (buf) {
        if (len == cap) {
            if (cap >= MAX_FILE_BYTES) {
                rc = phax_fail("%s: file is larger than %d bytes; not a config", path, (int)MAX_FILE_BYTES);
                break;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) break;
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f)) rc = phax_fail("%s: cannot read: %s", path, strerror(errno));
            break;
        }
    }
    fclose(f);
    if (!buf) return phax_fail("%s: out of memory reading the file", path);
    if (rc == PHAX_OK) rc = from_buffer(c, buf, len, path);
    free(buf);
    return rc;
}

// ---------------------------------------------------------------------------
// Writing.

static json_t *value_of(const phax_model_cfg *c, const key_info *k) {
    switch (k->kind) {
    case K_FAMILY: return json_string(phax_family_name(c->family));
    case K_INT: return json_integer(int_of(c, k));
    case K_DBL: return json_real(dbl_of(c, k));  // NULL for NaN/inf; resolve refuses those
    case K_BOOL: return json_boolean(int_of(c, k));
    case K_SCORE: return json_string(int_of(c, k) ? "cosine" : "dot");
    case K_ORDER: return json_string(int_of(c, k) ? "mlstm_first" : "swa_first");
    }
    return NULL;
}

char *phax_model_cfg_to_json(const phax_model_cfg *c) {
    if (!c) {
        phax_fail("config: no config (NULL)");
        return NULL;
    }
    phax_model_cfg r = *c;
    if (phax_model_cfg_resolve(&r) != PHAX_OK) return NULL;

    json_t *o = json_object();
    if (!o) goto oom;
    int digits = 15;  // one precision for every real: the least that round-trips them all
    for (int i = 0; i < N_KEYS; i++) {
        json_t *v = value_of(&r, &KEYS[i]);
        if (!v || json_object_set_new(o, KEYS[i].key, v) != 0) {
            json_decref(o);
            goto oom;
        }
        if (KEYS[i].kind == K_DBL) {
            int d = round_trip_digits(dbl_of(&r, &KEYS[i]));
            if (d > digits) digits = d;
        }
    }
    char *s = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(digits));
    json_decref(o);
    if (!s) goto oom;
    // Copy into malloc memory (the caller uses free()) with a final newline.
    size_t n = strlen(s);
    char *out = malloc(n + 2);
    if (out) {
        memcpy(out, s, n);
        out[n] = '\n';
        out[n + 1] = '\0';
    }
    json_malloc_t jm;
    json_free_t jf;
    json_get_alloc_funcs(&jm, &jf);
    jf(s);
    if (!out) goto oom;
    return out;
oom:
    phax_fail("config: out of memory serialising the config");
    return NULL;
}

int phax_model_cfg_write_json_file(const phax_model_cfg *c, const char *path) {
    if (!path) return phax_fail("config: no path (NULL)");
    char *s = phax_model_cfg_to_json(c);
    if (!s) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", phax_error());
        return phax_fail("%s: %s", path, msg);
    }
    int rc = phax_write_file_atomic(path, s, strlen(s));
    free(s);
    return rc;
}

int phax_model_cfg_json_set(char **json, const char *const *sets, int n) {
    if (!json || !*json || (n && !sets)) return phax_fail("phax_model_cfg_json_set: NULL argument");
    json_error_t e;
    json_t *j = json_loads(*json, 0, &e);
    if (!j || !json_is_object(j)) {
        json_decref(j);
        return phax_fail("--set: the config is not a JSON object");
    }
    for (int i = 0; i < n; i++) {
        const char *eq = strchr(sets[i], '=');
        char key[64];
        size_t kl = eq ? (size_t)(eq - sets[i]) : 0;
        if (kl == 0 || kl >= sizeof key) {
            json_decref(j);
            return phax_fail("--set: bad key in '%s'", sets[i]);
        }
        memcpy(key, sets[i], kl);
        key[kl] = '\0';
        json_t *v = json_loads(eq + 1, JSON_DECODE_ANY, NULL);
        json_object_set_new(j, key, v ? v : json_string(eq + 1));  // a bare word: score=dot
    }
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!s) return phax_fail("--set: out of memory");
    free(*json);
    *json = s;
    return PHAX_OK;
}
