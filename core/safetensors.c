// safetensors reading (validated) and atomic writing; see include/phax/safetensors.h.
// JSON is parsed and printed by jansson. All multi-byte values are assembled and
// split byte by byte with shifts, so the code is independent of host byte order.
#include "phax/safetensors.h"

#include "phax/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

// Floats are moved through their IEEE-754 bit patterns (memcpy to/from uint32/64).
_Static_assert(sizeof(float) == 4 && FLT_MANT_DIG == 24 && FLT_MAX_EXP == 128,
               "float must be IEEE-754 binary32");
_Static_assert(sizeof(double) == 8 && DBL_MANT_DIG == 53 && DBL_MAX_EXP == 1024,
               "double must be IEEE-754 binary64");

// ---------------------------------------------------------------------------
// dtypes

static const struct {
    const char *name;
    size_t size;
} DT[PHAX_DT_COUNT] = {
    [PHAX_DT_BOOL] = {"BOOL", 1},       [PHAX_DT_U8] = {"U8", 1},
    [PHAX_DT_I8] = {"I8", 1},           [PHAX_DT_F8_E5M2] = {"F8_E5M2", 1},
    [PHAX_DT_F8_E4M3] = {"F8_E4M3", 1}, [PHAX_DT_I16] = {"I16", 2},
    [PHAX_DT_U16] = {"U16", 2},         [PHAX_DT_F16] = {"F16", 2},
    [PHAX_DT_BF16] = {"BF16", 2},       [PHAX_DT_I32] = {"I32", 4},
    [PHAX_DT_U32] = {"U32", 4},         [PHAX_DT_F32] = {"F32", 4},
    [PHAX_DT_F64] = {"F64", 8},         [PHAX_DT_I64] = {"I64", 8},
    [PHAX_DT_U64] = {"U64", 8},
};

// Known to the reference implementation, not read by phax.
static const char *const UNSUPPORTED[] = {"F4", "F6_E2M3", "F6_E3M2", "F8_E8M0",
                                          "F8_E4M3FNUZ", "F8_E5M2FNUZ", "C64"};

static int valid_dtype(phax_dtype dt) { return (int)dt >= 0 && dt < PHAX_DT_COUNT; }

const char *phax_dtype_name(phax_dtype dt) { return valid_dtype(dt) ? DT[dt].name : "?"; }

size_t phax_dtype_size(phax_dtype dt) { return valid_dtype(dt) ? DT[dt].size : 0; }

// 0: found; 1: known to the reference but unsupported; 2: unknown.
static int lookup_dtype(const char *s, phax_dtype *out) {
    for (int i = 0; i < PHAX_DT_COUNT; i++)
        if (strcmp(s, DT[i].name) == 0) {
            *out = (phax_dtype)i;
            return 0;
        }
    for (size_t i = 0; i < sizeof UNSUPPORTED / sizeof UNSUPPORTED[0]; i++)
        if (strcmp(s, UNSUPPORTED[i]) == 0) return 1;
    return 2;
}

int phax_dtype_parse(const char *name, phax_dtype *out) {
    if (!name || !out) return phax_fail("phax_dtype_parse: NULL argument");
    int r = lookup_dtype(name, out);
    if (r == 1) return phax_fail("dtype \"%s\" is not supported by phax", name);
    if (r == 2) return phax_fail("unknown dtype \"%s\"", name);
    return PHAX_OK;
}

static int is_float_dtype(phax_dtype dt) {
    return dt == PHAX_DT_F64 || dt == PHAX_DT_F32 || dt == PHAX_DT_BF16 || dt == PHAX_DT_F16 ||
           dt == PHAX_DT_F8_E4M3 || dt == PHAX_DT_F8_E5M2;
}

static int is_int_dtype(phax_dtype dt) {
    return dt == PHAX_DT_U8 || dt == PHAX_DT_I8 || dt == PHAX_DT_I16 || dt == PHAX_DT_U16 ||
           dt == PHAX_DT_I32 || dt == PHAX_DT_U32 || dt == PHAX_DT_I64 || dt == PHAX_DT_U64;
}

// ---------------------------------------------------------------------------
// little-endian bytes

static uint64_t ld_le(const unsigned char *p, size_t nbytes) {
    uint64_t v = 0;
    for (size_t i = nbytes; i > 0; i--) v = v << 8 | p[i - 1];
    return v;
}

static void st_le(unsigned char *p, uint64_t v, size_t nbytes) {
    for (size_t i = 0; i < nbytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static double f16_bits_to_f64(unsigned h) {
    unsigned e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 0)
        v = ldexp((double)m, -24);  // zero and subnormals: m · 2^-24
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = ldexp((double)(m + 1024), (int)e - 25);  // (1 + m/1024) · 2^(e-15)
    return (h & 0x8000) ? -v : v;
}

static double e4m3fn_bits_to_f64(unsigned b) {
    unsigned e = (b >> 3) & 15, m = b & 7;
    double v;
    if (e == 15 && m == 7)
        v = NAN;  // the fn variant has no infinities
    else if (e == 0)
        v = ldexp((double)m, -9);  // m/8 · 2^-6
    else
        v = ldexp((double)(m + 8), (int)e - 10);  // (1 + m/8) · 2^(e-7)
    return (b & 0x80) ? -v : v;
}

static double float_at(phax_dtype dt, const unsigned char *p) {
    switch (dt) {
    case PHAX_DT_F64: {
        uint64_t b = ld_le(p, 8);
        double d;
        memcpy(&d, &b, 8);
        return d;
    }
    case PHAX_DT_F32: {
        uint32_t b = (uint32_t)ld_le(p, 4);
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    case PHAX_DT_BF16: {
        uint32_t b = (uint32_t)ld_le(p, 2) << 16;
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    case PHAX_DT_F16: return f16_bits_to_f64((unsigned)ld_le(p, 2));
    case PHAX_DT_F8_E5M2: return f16_bits_to_f64((unsigned)p[0] << 8);  // the top byte of an F16
    case PHAX_DT_F8_E4M3: return e4m3fn_bits_to_f64(p[0]);
    default: return NAN;  // not reached: callers check is_float_dtype
    }
}

// An integer element: returned as int64 (is_u = 0), or, for an unsigned value
// above INT64_MAX, reported in *u with is_u = 1.
static int64_t int_at(phax_dtype dt, const unsigned char *p, int *is_u, uint64_t *u) {
    size_t sz = DT[dt].size;
    uint64_t v = ld_le(p, sz);
    *is_u = 0;
    int is_signed = dt == PHAX_DT_I8 || dt == PHAX_DT_I16 || dt == PHAX_DT_I32 || dt == PHAX_DT_I64;
    if (is_signed) {
        uint64_t sign = (uint64_t)1 << (8 * sz - 1);
        if (v & sign) {
            // two's complement negative: value = v − 2^(8·sz) = −(mask − v) − 1, with
            // mask − v in [0, 2^(8·sz−1) − 1], so nothing wraps or overflows
            uint64_t mask = sz == 8 ? UINT64_MAX : ((uint64_t)1 << (8 * sz)) - 1;
            return -(int64_t)(mask - v) - 1;
        }
        return (int64_t)v;
    }
    if (v > (uint64_t)INT64_MAX) {
        *is_u = 1;
        *u = v;
        return 0;
    }
    return (int64_t)v;
}

// ---------------------------------------------------------------------------
// message helpers

// A name for an error message: control bytes replaced by '?', at most ~60 bytes
// (cut on a UTF-8 boundary), so the message stays one line.
typedef struct {
    char s[80];
} shown;

static shown show(const char *name) {
    shown r;
    size_t n = strlen(name), lim = 60, k = n < lim ? n : lim;
    if (n > lim)
        while (k > 0 && ((unsigned char)name[k] & 0xC0) == 0x80) k--;
    for (size_t i = 0; i < k; i++) {
        unsigned char c = (unsigned char)name[i];
        r.s[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    if (n > k) {
        memcpy(r.s + k, "...", 3);
        k += 3;
    }
    r.s[k] = '\0';
    return r;
}

typedef struct {
    char s[8 * 24 + 4];
} shape_str;

static shape_str fmt_shape(int ndim, const int64_t *shape) {
    shape_str r;
    size_t k = 0;
    r.s[k++] = '[';
    for (int i = 0; i < ndim; i++)
        k += (size_t)snprintf(r.s + k, sizeof r.s - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    snprintf(r.s + k, sizeof r.s - k, "]");
    return r;
}

// Product of dims into *numel and numel·size into *nbytes; 0 on overflow.
// Checked step by step like the reference (an overflowing prefix is refused even
// if a later dim is 0).
static int count(int ndim, const int64_t *shape, size_t size, size_t *numel, size_t *nbytes) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        uint64_t d = (uint64_t)shape[i];
        if (d > SIZE_MAX || (d != 0 && n > SIZE_MAX / d)) return 0;
        n *= (size_t)d;
    }
    if (size != 0 && n > SIZE_MAX / size) return 0;
    *numel = n;
    *nbytes = n * size;
    return 1;
}

// ---------------------------------------------------------------------------
// reading

static int read_exact(FILE *fp, void *p, size_t len, const char *path, const char *what) {
    if (len == 0) return PHAX_OK;
    size_t got = fread(p, 1, len, fp);
    if (got != len) {
        if (ferror(fp)) return phax_fail("%s: error reading the %s: %s", path, what, strerror(errno));
        return phax_fail("%s: file ended while reading the %s (did it change?)", path, what);
    }
    return PHAX_OK;
}

typedef struct {
    uint64_t begin, end;
    int idx;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int parse_entry(phax_st_tensor *t, const char *path, const char *name, json_t *v,
                       size_t buflen) {
    shown sn = show(name);
    const char *nm = sn.s;
    if (!json_is_object(v)) return phax_fail("%s: tensor '%s': entry is not an object", path, nm);

    json_t *jd = json_object_get(v, "dtype");
    if (!jd) return phax_fail("%s: tensor '%s': missing \"dtype\"", path, nm);
    if (!json_is_string(jd)) return phax_fail("%s: tensor '%s': \"dtype\" is not a string", path, nm);
    const char *ds = json_string_value(jd);
    int r = lookup_dtype(ds, &t->dtype);
    if (r == 1) return phax_fail("%s: tensor '%s': dtype \"%s\" is not supported by phax", path, nm, show(ds).s);
    if (r == 2) return phax_fail("%s: tensor '%s': unknown dtype \"%s\"", path, nm, show(ds).s);

    json_t *js = json_object_get(v, "shape");
    if (!js) return phax_fail("%s: tensor '%s': missing \"shape\"", path, nm);
    if (!json_is_array(js)) return phax_fail("%s: tensor '%s': \"shape\" is not an array", path, nm);
    size_t nd = json_array_size(js);
    if (nd > PHAX_ST_MAX_NDIM)
        return phax_fail("%s: tensor '%s': shape has %zu dims, more than the %d phax supports", path, nm,
                         nd, PHAX_ST_MAX_NDIM);
    t->ndim = (int)nd;
    for (size_t i = 0; i < nd; i++) {
        json_t *e = json_array_get(js, i);
        if (!json_is_integer(e))
            return phax_fail("%s: tensor '%s': shape[%zu] is not an integer", path, nm, i);
        json_int_t d = json_integer_value(e);
        if (d < 0) return phax_fail("%s: tensor '%s': shape[%zu] is negative (%lld)", path, nm, i, (long long)d);
        t->shape[i] = (int64_t)d;
    }
    if (!count(t->ndim, t->shape, DT[t->dtype].size, &t->numel, &t->nbytes))
        return phax_fail("%s: tensor '%s': shape %s overflows the element count", path, nm,
                         fmt_shape(t->ndim, t->shape).s);

    json_t *jo = json_object_get(v, "data_offsets");
    if (!jo) return phax_fail("%s: tensor '%s': missing \"data_offsets\"", path, nm);
    json_t *jb = json_array_get(jo, 0), *je = json_array_get(jo, 1);
    if (!json_is_array(jo) || json_array_size(jo) != 2 || !json_is_integer(jb) || !json_is_integer(je) ||
        json_integer_value(jb) < 0 || json_integer_value(je) < 0)
        return phax_fail("%s: tensor '%s': \"data_offsets\" is not [begin, end] with integers >= 0", path, nm);
    uint64_t b = (uint64_t)json_integer_value(jb), en = (uint64_t)json_integer_value(je);
    if (b > en)
        return phax_fail("%s: tensor '%s': data_offsets begin %llu is after end %llu", path, nm,
                         (unsigned long long)b, (unsigned long long)en);
    if (en > buflen)
        return phax_fail("%s: tensor '%s': data_offsets end %llu is beyond the data buffer (%zu bytes)", path,
                         nm, (unsigned long long)en, buflen);
    if (en - b != t->nbytes)
        return phax_fail("%s: tensor '%s': data_offsets span %llu bytes but %s %s needs %zu", path, nm,
                         (unsigned long long)(en - b), DT[t->dtype].name, fmt_shape(t->ndim, t->shape).s,
                         t->nbytes);
    t->offset = b;
    return PHAX_OK;
}

static int parse_metadata(phax_st_file *f, const char *path, json_t *m) {
    if (!json_is_object(m)) return phax_fail("%s: \"__metadata__\" is not an object", path);
    size_t cnt = json_object_size(m);
    f->meta_key = calloc(cnt ? cnt : 1, sizeof(char *));
    f->meta_val = calloc(cnt ? cnt : 1, sizeof(char *));
    if (!f->meta_key || !f->meta_val) return phax_fail("%s: out of memory", path);
    const char *k;
    json_t *v;
    json_object_foreach(m, k, v) {
        if (!json_is_string(v))
            return phax_fail("%s: \"__metadata__\" value of '%s' is not a string", path, show(k).s);
        f->meta_key[f->nmeta] = strdup(k);
        f->meta_val[f->nmeta] = strdup(json_string_value(v));
        f->nmeta++;
        if (!f->meta_key[f->nmeta - 1] || !f->meta_val[f->nmeta - 1]) return phax_fail("%s: out of memory", path);
    }
    return PHAX_OK;
}

// JSON values of a header, counted without parsing it: separators and openers outside
// strings. jansson spends ~100 bytes per value, so a header of many small values (a 100 MB
// array of zeros) cost 2.1 GB to parse; a real header has ~8 values per tensor.
static size_t header_values(const char *h, size_t n) {
    size_t v = 1;
    int in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char c = h[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == ',' || c == ':' || c == '[' || c == '{') {
            v++;
        }
    }
    return v;
}

static int parse_header(phax_st_file *f, const char *path, const char *hdr, size_t n) {
    size_t nv = header_values(hdr, n);
    if (nv > PHAX_ST_MAX_HEADER_VALUES)
        return phax_fail("%s: header holds about %zu JSON values, more than the %d a header of %d tensors "
                         "needs (refused before parsing it)", path, nv, PHAX_ST_MAX_HEADER_VALUES, PHAX_ST_MAX_TENSORS);
    json_error_t je;
    // DECODE_ANY: a scalar or array header parses, and is refused below as "not a JSON object".
    json_t *root = json_loadb(hdr, n, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (!root) {
        enum json_error_code code = json_error_code(&je);
        // jansson quotes the offending text; keep the message on one line.
        for (char *c = je.text; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
        switch (code) {
        case json_error_invalid_utf8:
            return phax_fail("%s: header is not valid UTF-8 (%s, at byte %d)", path, je.text, je.position);
        case json_error_duplicate_key:
            return phax_fail("%s: header has a duplicate key (%s, line %d column %d)", path, je.text, je.line,
                             je.column);
        default:
            return phax_fail("%s: header is not valid JSON: %s (line %d, column %d)", path, je.text, je.line,
                             je.column);
        }
    }
    int rc = PHAX_OK;
    span *sp = NULL;
    if (!json_is_object(root)) {
        rc = phax_fail("%s: header is not a JSON object", path);
        goto done;
    }
    size_t cnt = json_object_size(root);
    if (cnt > INT32_MAX) {
        rc = phax_fail("%s: header has too many entries", path);
        goto done;
    }
    f->t = calloc(cnt ? cnt : 1, sizeof *f->t);
    sp = calloc(cnt ? cnt : 1, sizeof *sp);
    if (!f->t || !sp) {
        rc = phax_fail("%s: out of memory", path);
        goto done;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (strcmp(key, "__metadata__") == 0) {
            if ((rc = parse_metadata(f, path, v)) != PHAX_OK) goto done;
            continue;
        }
        phax_st_tensor *t = &f->t[f->n];
        if ((rc = parse_entry(t, path, key, v, f->buffer_len)) != PHAX_OK) goto done;
        if (!(t->name = strdup(key))) {
            rc = phax_fail("%s: out of memory", path);
            goto done;
        }
        t->data = f->buffer + t->offset;
        sp[f->n] = (span){t->offset, t->offset + t->nbytes, f->n};
        f->n++;
    }

    // The byte ranges must tile [0, buffer_len) exactly (as the reference checks:
    // sorted by (begin, end), each begins where the previous ended).
    qsort(sp, (size_t)f->n, sizeof *sp, cmp_span);
    uint64_t cursor = 0;
    int prev = -1;
    for (int i = 0; i < f->n; i++) {
        if (sp[i].begin < cursor) {
            const phax_st_tensor *a = &f->t[prev], *b = &f->t[sp[i].idx];
            rc = phax_fail("%s: tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap", path, show(a->name).s,
                           (unsigned long long)a->offset, (unsigned long long)(a->offset + a->nbytes),
                           show(b->name).s, (unsigned long long)sp[i].begin, (unsigned long long)sp[i].end);
            goto done;
        }
        if (sp[i].begin > cursor) {
            rc = phax_fail("%s: data buffer has a hole: bytes [%llu, %llu) belong to no tensor", path,
                           (unsigned long long)cursor, (unsigned long long)sp[i].begin);
            goto done;
        }
        cursor = sp[i].end;
        prev = sp[i].idx;
    }
    if (cursor != f->buffer_len)
        rc = phax_fail("%s: data buffer has %llu trailing bytes after the last tensor (tensors end at %llu, "
                       "buffer is %zu bytes)",
                       path, (unsigned long long)(f->buffer_len - cursor), (unsigned long long)cursor,
                       f->buffer_len);
done:
    free(sp);
    json_decref(root);
    return rc;
}

// The header length n of an image of `total` bytes (a file's or a buffer's, `what`):
// within the reference's limit and the image, with a data buffer this machine can hold.
static int check_header_len(const char *path, uint64_t n, uint64_t total, const char *what) {
    if (n > PHAX_ST_MAX_HEADER)
        return phax_fail("%s: header length %llu exceeds the limit of %llu bytes", path, (unsigned long long)n,
                         PHAX_ST_MAX_HEADER);
    if (n > total - 8)
        return phax_fail("%s: header length %llu is beyond the %s (%llu bytes)", path, (unsigned long long)n, what,
                         (unsigned long long)total);
    if (total - 8 - n > SIZE_MAX - 1) return phax_fail("%s: data buffer too large for this machine", path);
    return PHAX_OK;
}

int phax_st_read(phax_st_file *f, const char *path) {
    if (!f) return phax_fail("phax_st_read: NULL file");
    memset(f, 0, sizeof *f);
    if (!path) return phax_fail("phax_st_read: NULL path");
    FILE *fp = fopen(path, "rb");
    if (!fp) return phax_fail("%s: cannot open: %s", path, strerror(errno));
    int rc = PHAX_ERR;
    char *hdr = NULL;
    struct stat st;
    if (fstat(fileno(fp), &st) != 0) {
        phax_fail("%s: cannot stat: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        phax_fail("%s: not a regular file", path);
        goto done;
    }
    uint64_t fsize = (uint64_t)st.st_size;
    if (fsize < 8) {
        phax_fail("%s: file is %llu bytes, too short for the 8-byte header length", path,
                  (unsigned long long)fsize);
        goto done;
    }
    unsigned char lenb[8];
    if (read_exact(fp, lenb, 8, path, "header length") != PHAX_OK) goto done;
    uint64_t n = ld_le(lenb, 8);
    if (check_header_len(path, n, fsize, "file") != PHAX_OK) goto done;
    f->buffer_len = (size_t)(fsize - 8 - n);
    hdr = malloc(n ? (size_t)n : 1);
    f->buffer = malloc(f->buffer_len ? f->buffer_len : 1);
    f->path = strdup(path);
    if (!hdr || !f->buffer || !f->path) {
        phax_fail("%s: out of memory (%llu-byte header, %zu-byte data buffer)", path, (unsigned long long)n,
                  f->buffer_len);
        goto done;
    }
    if (read_exact(fp, hdr, (size_t)n, path, "header") != PHAX_OK) goto done;
    if (read_exact(fp, f->buffer, f->buffer_len, path, "data buffer") != PHAX_OK) goto done;
    rc = parse_header(f, path, hdr, (size_t)n);
done:
    free(hdr);
    fclose(fp);
    if (rc != PHAX_OK) phax_st_free(f);
    return rc;
}

int phax_st_read_mem(phax_st_file *f, const void *buf, size_t len, const char *label) {
    if (!f) return phax_fail("phax_st_read_mem: NULL file");
    memset(f, 0, sizeof *f);
    if (!label) label = "(safetensors image)";
    if (!buf && len) return phax_fail("%s: NULL buffer", label);
    const unsigned char *b = buf;
    if (len < 8)
        return phax_fail("%s: image is %zu bytes, too short for the 8-byte header length", label, len);
    uint64_t n = ld_le(b, 8);
    if (check_header_len(label, n, (uint64_t)len, "image") != PHAX_OK) return PHAX_ERR;
    // Copied: the file owns its buffer as phax_st_read's does, whatever the caller does with buf.
    f->buffer_len = len - 8 - (size_t)n;
    f->buffer = malloc(f->buffer_len ? f->buffer_len : 1);
    f->path = strdup(label);
    if (!f->buffer || !f->path) {
        phax_st_free(f);
        return phax_fail("%s: out of memory (%zu-byte data buffer)", label, len - 8 - (size_t)n);
    }
    if (f->buffer_len) memcpy(f->buffer, b + 8 + n, f->buffer_len);
    int rc = parse_header(f, label, (const char *)b + 8, (size_t)n);
    if (rc != PHAX_OK) phax_st_free(f);
    return rc;
}

void phax_st_free(phax_st_file *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) free(f->t[i].name);
    free(f->t);
    for (int i = 0; i < f->nmeta; i++) {
        free(f->meta_key[i]);
        free(f->meta_val[i]);
    }
    free(f->meta_key);
    free(f->meta_val);
    free(f->buffer);
    free(f->path);
    memset(f, 0, sizeof *f);
}

const phax_st_tensor *phax_st_find(const phax_st_file *f, const char *name) {
    if (!f || !name) return NULL;
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    return NULL;
}

const char *phax_st_meta(const phax_st_file *f, const char *key) {
    if (!f || !key) return NULL;
    for (int i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta_key[i], key) == 0) return f->meta_val[i];
    return NULL;
}

// ---------------------------------------------------------------------------
// conversions

int phax_st_to_f64(const phax_st_tensor *t, double *out) {
    if (!t || (!out && t->numel)) return phax_fail("phax_st_to_f64: NULL argument");
    if (!valid_dtype(t->dtype) || !is_float_dtype(t->dtype))
        return phax_fail("tensor '%s' has dtype %s, not a floating-point type", show(t->name).s,
                         phax_dtype_name(t->dtype));
    size_t sz = DT[t->dtype].size;
    for (size_t i = 0; i < t->numel; i++) out[i] = float_at(t->dtype, t->data + i * sz);
    return PHAX_OK;
}

static int to_int(const phax_st_tensor *t, int64_t lo, int64_t hi, const char *want, int32_t *o32, int64_t *o64) {
    if (!t || (!o32 && !o64 && t->numel)) return phax_fail("phax_st_to_%s: NULL argument", want);
    if (!valid_dtype(t->dtype) || !is_int_dtype(t->dtype))
        return phax_fail("tensor '%s' has dtype %s, not an integer type", show(t->name).s,
                         phax_dtype_name(t->dtype));
    size_t sz = DT[t->dtype].size;
    for (size_t i = 0; i < t->numel; i++) {
        int is_u;
        uint64_t u = 0;
        int64_t v = int_at(t->dtype, t->data + i * sz, &is_u, &u);
        if (is_u)
            return phax_fail("tensor '%s': element %zu is %llu, outside the %s range", show(t->name).s, i,
                             (unsigned long long)u, want);
        if (v < lo || v > hi)
            return phax_fail("tensor '%s': element %zu is %lld, outside the %s range", show(t->name).s, i,
                             (long long)v, want);
        if (o32) o32[i] = (int32_t)v;
        else o64[i] = v;
    }
    return PHAX_OK;
}

int phax_st_to_i32(const phax_st_tensor *t, int32_t *out) {
    return to_int(t, INT32_MIN, INT32_MAX, "int32", out, NULL);
}

int phax_st_to_i64(const phax_st_tensor *t, int64_t *out) { return to_int(t, INT64_MIN, INT64_MAX, "int64", NULL, out); }

// Find + shape check; NULL with the error recorded.
static const phax_st_tensor *get_checked(const phax_st_file *f, const char *name, int ndim, const int64_t *shape) {
    if (!f || !name || ndim < 0 || (ndim > 0 && !shape)) {
        phax_fail("phax_st_get: bad argument");
        return NULL;
    }
    const phax_st_tensor *t = phax_st_find(f, name);
    if (!t) {
        phax_fail("%s: no tensor '%s'", f->path ? f->path : "(safetensors)", show(name).s);
        return NULL;
    }
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same) {
        phax_fail("%s: tensor '%s' has shape %s, expected %s", f->path ? f->path : "(safetensors)",
                  show(name).s, fmt_shape(t->ndim, t->shape).s,
                  fmt_shape(ndim > PHAX_ST_MAX_NDIM ? PHAX_ST_MAX_NDIM : ndim, shape).s);
        return NULL;
    }
    return t;
}

// Prefix the current error with the file's path.
static int with_path(const phax_st_file *f) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", phax_error());
    return phax_fail("%s: %s", f->path ? f->path : "(safetensors)", msg);
}

int phax_st_get_f64(const phax_st_file *f, const char *name, int ndim, const int64_t *shape, double *out) {
    const phax_st_tensor *t = get_checked(f, name, ndim, shape);
    if (!t) return PHAX_ERR;
    return phax_st_to_f64(t, out) == PHAX_OK ? PHAX_OK : with_path(f);
}

int phax_st_get_i32(const phax_st_file *f, const char *name, int ndim, const int64_t *shape, int32_t *out) {
    const phax_st_tensor *t = get_checked(f, name, ndim, shape);
    if (!t) return PHAX_ERR;
    return phax_st_to_i32(t, out) == PHAX_OK ? PHAX_OK : with_path(f);
}

int phax_st_get_i64(const phax_st_file *f, const char *name, int ndim, const int64_t *shape, int64_t *out) {
    const phax_st_tensor *t = get_checked(f, name, ndim, shape);
    if (!t) return PHAX_ERR;
    return phax_st_to_i64(t, out) == PHAX_OK ? PHAX_OK : with_path(f);
}

// ---------------------------------------------------------------------------
// writing

typedef struct {
    char *name;
    phax_dtype dtype;
    int ndim;
    int64_t shape[PHAX_ST_MAX_NDIM];
    size_t numel, nbytes;
    unsigned char *bytes;  // little-endian, as in the file
} wtensor;

struct phax_st_writer {
    int n, cap;
    wtensor *t;
    int nmeta, capm;
    char **mk, **mv;
    char *err;  // the first failed add (sticky)
};

phax_st_writer *phax_st_writer_new(void) {
    phax_st_writer *w = calloc(1, sizeof *w);
    if (!w) phax_fail("safetensors writer: out of memory");
    return w;
}

void phax_st_writer_free(phax_st_writer *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) {
        free(w->t[i].name);
        free(w->t[i].bytes);
    }
    free(w->t);
    for (int i = 0; i < w->nmeta; i++) {
        free(w->mk[i]);
        free(w->mv[i]);
    }
    free(w->mk);
    free(w->mv);
    free(w->err);
    free(w);
}

static int wfail(phax_st_writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int wfail(phax_st_writer *w, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (w && !w->err) w->err = strdup(msg);  // if this fails, err stays NULL: best effort
    return phax_fail("safetensors writer: %s", msg);
}

static int valid_utf8(const char *s) {
    json_t *j = json_string(s);  // jansson refuses invalid UTF-8
    if (!j) return 0;
    json_decref(j);
    return 1;
}

// Validate and append an entry with room for its bytes; *out points at it.
static int add_entry(phax_st_writer *w, const char *name, phax_dtype dt, int ndim, const int64_t *shape,
                     const void *x, wtensor **out) {
    if (!w) return phax_fail("safetensors writer: NULL writer");
    if (!name) return wfail(w, "NULL tensor name");
    shown sn = show(name);
    if (!valid_utf8(name)) return wfail(w, "tensor '%s': name is not valid UTF-8", sn.s);
    if (strcmp(name, "__metadata__") == 0) return wfail(w, "tensor name \"__metadata__\" is reserved");
    if (!valid_dtype(dt)) return wfail(w, "tensor '%s': invalid dtype %d", sn.s, (int)dt);
    if (ndim < 0 || ndim > PHAX_ST_MAX_NDIM)
        return wfail(w, "tensor '%s': ndim %d is outside [0, %d]", sn.s, ndim, PHAX_ST_MAX_NDIM);
    if (ndim > 0 && !shape) return wfail(w, "tensor '%s': NULL shape", sn.s);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) return wfail(w, "tensor '%s': shape[%d] is negative (%lld)", sn.s, i, (long long)shape[i]);
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->t[i].name, name) == 0) return wfail(w, "tensor '%s': duplicate name", sn.s);
    wtensor e = {.dtype = dt, .ndim = ndim};
    for (int i = 0; i < ndim; i++) e.shape[i] = shape[i];
    if (!count(ndim, e.shape, DT[dt].size, &e.numel, &e.nbytes) || e.nbytes > (uint64_t)INT64_MAX)
        return wfail(w, "tensor '%s': shape %s overflows the element count", sn.s, fmt_shape(ndim, e.shape).s);
    if (e.numel > 0 && !x) return wfail(w, "tensor '%s': NULL data for %zu elements", sn.s, e.numel);
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 8;
        wtensor *t = realloc(w->t, (size_t)cap * sizeof *t);
        if (!t) return wfail(w, "out of memory");
        w->t = t, w->cap = cap;
    }
    e.name = strdup(name);
    e.bytes = malloc(e.nbytes ? e.nbytes : 1);
    if (!e.name || !e.bytes) {
        free(e.name);
        free(e.bytes);
        return wfail(w, "tensor '%s': out of memory (%zu bytes)", sn.s, e.nbytes);
    }
    w->t[w->n] = e;
    *out = &w->t[w->n];
    return PHAX_OK;  // the caller fills bytes, then commits with w->n++
}

int phax_st_add_f64(phax_st_writer *w, const char *name, const double *x, int ndim, const int64_t *shape) {
    wtensor *e;
    if (add_entry(w, name, PHAX_DT_F64, ndim, shape, x, &e) != PHAX_OK) return PHAX_ERR;
    for (size_t i = 0; i < e->numel; i++) {
        uint64_t b;
        memcpy(&b, &x[i], 8);
        st_le(e->bytes + 8 * i, b, 8);
    }
    w->n++;
    return PHAX_OK;
}

int phax_st_add_f32_from_f64(phax_st_writer *w, const char *name, const double *x, int ndim,
                             const int64_t *shape) {
    wtensor *e;
    if (add_entry(w, name, PHAX_DT_F32, ndim, shape, x, &e) != PHAX_OK) return PHAX_ERR;
    for (size_t i = 0; i < e->numel; i++) {
        // FLT_MAX + half an ulp: the smallest magnitude that rounds to infinity.
        if (isfinite(x[i]) && fabs(x[i]) >= 0x1.ffffffp127) {
            int rc = wfail(w, "tensor '%s': element %zu (%g) is beyond the float32 range", show(name).s, i, x[i]);
            free(e->name);
            free(e->bytes);
            return rc;
        }
        float f = (float)x[i];
        uint32_t b;
        memcpy(&b, &f, 4);
        st_le(e->bytes + 4 * i, b, 4);
    }
    w->n++;
    return PHAX_OK;
}

int phax_st_add_i32(phax_st_writer *w, const char *name, const int32_t *x, int ndim, const int64_t *shape) {
    wtensor *e;
    if (add_entry(w, name, PHAX_DT_I32, ndim, shape, x, &e) != PHAX_OK) return PHAX_ERR;
    for (size_t i = 0; i < e->numel; i++) st_le(e->bytes + 4 * i, (uint32_t)x[i], 4);
    w->n++;
    return PHAX_OK;
}

int phax_st_add_i64(phax_st_writer *w, const char *name, const int64_t *x, int ndim, const int64_t *shape) {
    wtensor *e;
    if (add_entry(w, name, PHAX_DT_I64, ndim, shape, x, &e) != PHAX_OK) return PHAX_ERR;
    for (size_t i = 0; i < e->numel; i++) st_le(e->bytes + 8 * i, (uint64_t)x[i], 8);
    w->n++;
    return PHAX_OK;
}

int phax_st_add_raw(phax_st_writer *w, const char *name, phax_dtype dtype, int ndim, const int64_t *shape,
                    const void *le_bytes) {
    wtensor *e;
    if (add_entry(w, name, dtype, ndim, shape, le_bytes, &e) != PHAX_OK) return PHAX_ERR;
    if (e->nbytes) memcpy(e->bytes, le_bytes, e->nbytes);
    w->n++;
    return PHAX_OK;
}

int phax_st_add_meta(phax_st_writer *w, const char *key, const char *value) {
    if (!w) return phax_fail("safetensors writer: NULL writer");
    if (!key || !value) return wfail(w, "NULL metadata key or value");
    if (!valid_utf8(key) || !valid_utf8(value))
        return wfail(w, "metadata '%s': key or value is not valid UTF-8", show(key).s);
    for (int i = 0; i < w->nmeta; i++)
        if (strcmp(w->mk[i], key) == 0) return wfail(w, "metadata '%s': duplicate key", show(key).s);
    if (w->nmeta == w->capm) {
        int cap = w->capm ? 2 * w->capm : 8;
        char **k = realloc(w->mk, (size_t)cap * sizeof *k);
        if (!k) return wfail(w, "out of memory");
        w->mk = k;
        char **v = realloc(w->mv, (size_t)cap * sizeof *v);
        if (!v) return wfail(w, "out of memory");
        w->mv = v;
        w->capm = cap;
    }
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        return wfail(w, "out of memory");
    }
    w->mk[w->nmeta] = k;
    w->mv[w->nmeta] = v;
    w->nmeta++;
    return PHAX_OK;
}

// Reference order: dtype by descending alignment (enum order), then name bytewise.
static int cmp_tensor_order(const void *a, const void *b) {
    const wtensor *x = *(const wtensor *const *)a, *y = *(const wtensor *const *)b;
    if (x->dtype != y->dtype) return x->dtype > y->dtype ? -1 : 1;
    return strcmp(x->name, y->name);
}

typedef struct {
    const char *k, *v;
} kv;

static int cmp_kv(const void *a, const void *b) { return strcmp(((const kv *)a)->k, ((const kv *)b)->k); }

// The padded header JSON (length a multiple of 8) and each tensor's file order.
static int build_header(const phax_st_writer *w, const wtensor **ord, char **out, size_t *out_len) {
    for (int i = 0; i < w->n; i++) ord[i] = &w->t[i];
    qsort(ord, (size_t)w->n, sizeof *ord, cmp_tensor_order);
    kv *meta = malloc((size_t)(w->nmeta ? w->nmeta : 1) * sizeof *meta);
    json_t *root = json_object();
    int ok = meta && root;
    if (ok && w->nmeta > 0) {
        for (int i = 0; i < w->nmeta; i++) meta[i] = (kv){w->mk[i], w->mv[i]};
        qsort(meta, (size_t)w->nmeta, sizeof *meta, cmp_kv);
        json_t *m = json_object();
        ok = m && json_object_set_new(root, "__metadata__", m) == 0;
        for (int i = 0; ok && i < w->nmeta; i++) ok = json_object_set_new(m, meta[i].k, json_string(meta[i].v)) == 0;
    }
    uint64_t off = 0;
    for (int k = 0; ok && k < w->n; k++) {
        const wtensor *e = ord[k];
        json_t *o = json_object(), *sh = json_array(), *dof = json_array();
        ok = o && sh && dof;
        for (int i = 0; ok && i < e->ndim; i++) ok = json_array_append_new(sh, json_integer(e->shape[i])) == 0;
        ok = ok && json_array_append_new(dof, json_integer((json_int_t)off)) == 0 &&
             json_array_append_new(dof, json_integer((json_int_t)(off + e->nbytes))) == 0;
        off += e->nbytes;
        // set_new takes the value's reference even when it fails.
        if (ok) {
            int r1 = json_object_set_new(o, "dtype", json_string(DT[e->dtype].name));
            int r2 = json_object_set_new(o, "shape", sh);
            int r3 = json_object_set_new(o, "data_offsets", dof);
            int r4 = json_object_set_new(root, e->name, o);
            sh = dof = o = NULL;
            ok = !r1 && !r2 && !r3 && !r4;
        }
        json_decref(o);
        json_decref(sh);
        json_decref(dof);
    }
    char *js = ok ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    free(meta);
    if (!js) return phax_fail("safetensors writer: out of memory building the header");
    size_t len = strlen(js), padded = len + (8 - len % 8) % 8;
    char *h = malloc(padded);
    if (!h) {
        free(js);
        return phax_fail("safetensors writer: out of memory building the header");
    }
    memcpy(h, js, len);
    memset(h + len, ' ', padded - len);
    free(js);
    *out = h;
    *out_len = padded;
    return PHAX_OK;
}

int phax_st_write(const phax_st_writer *w, const char *path) {
    if (!w || !path) return phax_fail("phax_st_write: NULL argument");
    if (w->err) return phax_fail("%s: not written: an earlier add failed: %s", path, w->err);
    const wtensor **ord = malloc((size_t)(w->n ? w->n : 1) * sizeof *ord);
    if (!ord) return phax_fail("%s: out of memory", path);
    char *hdr = NULL;
    size_t hlen = 0;
    if (build_header(w, ord, &hdr, &hlen) != PHAX_OK) {
        free(ord);
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", phax_error());
        return phax_fail("%s: %s", path, msg);
    }
    // One writer for every output (phax_atomic_*): exclusive, unpredictable temporary name.
    phax_atomic_file af;
    int rc = phax_atomic_begin(&af, path);
    unsigned char lenb[8];
    st_le(lenb, (uint64_t)hlen, 8);
    if (rc == PHAX_OK) rc = phax_atomic_write(&af, lenb, 8);
    if (rc == PHAX_OK) rc = phax_atomic_write(&af, hdr, hlen);
    for (int k = 0; rc == PHAX_OK && k < w->n; k++)
        if (ord[k]->nbytes) rc = phax_atomic_write(&af, ord[k]->bytes, ord[k]->nbytes);
    if (rc == PHAX_OK) rc = phax_atomic_commit(&af);
    free(hdr);
    free(ord);
    return rc;
}

int phax_st_write_mem(const phax_st_writer *w, unsigned char **out, size_t *out_len) {
    if (!w || !out || !out_len) return phax_fail("phax_st_write_mem: NULL argument");
    *out = NULL, *out_len = 0;
    if (w->err) return phax_fail("safetensors image: not made: an earlier add failed: %s", w->err);
    const wtensor **ord = malloc((size_t)(w->n ? w->n : 1) * sizeof *ord);
    if (!ord) return phax_fail("safetensors image: out of memory");
    char *hdr = NULL;
    size_t hlen = 0;
    if (build_header(w, ord, &hdr, &hlen) != PHAX_OK) {
        free(ord);
        return PHAX_ERR;
    }
    // The same bytes phax_st_write puts in a file: length, header, tensors in header order.
    size_t total = 8 + hlen;
    for (int k = 0; k < w->n; k++) total += ord[k]->nbytes;
    unsigned char *img = malloc(total);
    if (!img) {
        free(hdr);
        free(ord);
        return phax_fail("safetensors image: out of memory (%zu bytes)", total);
    }
    st_le(img, (uint64_t)hlen, 8);
    memcpy(img + 8, hdr, hlen);
    size_t o = 8 + hlen;
    for (int k = 0; k < w->n; k++) {
        if (ord[k]->nbytes) memcpy(img + o, ord[k]->bytes, ord[k]->nbytes);
        o += ord[k]->nbytes;
    }
    free(hdr);
    free(ord);
    *out = img, *out_len = total;
    return PHAX_OK;
}
