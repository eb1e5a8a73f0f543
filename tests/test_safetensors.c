// safetensors: exact bytes against the reference implementation's own test
// vectors and a hand-written file, decoding of hand-built F16/BF16/F8 and integer
// data, round trips, one test per malformed input, and atomic writing.
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "phax/safetensors.h"
#include "testutil.h"

// --- helpers ------------------------------------------------------------------------

// Write bytes to a fresh file under /tmp; returns its (malloc'd) path.
static char *tmp_file(const void *bytes, size_t len) {
    char *path = strdup("/tmp/phax_st_XXXXXX");
    cr_assert(path);
    int fd = mkstemp(path);
    cr_assert(fd >= 0, "mkstemp: %s", strerror(errno));
    cr_assert(len == 0 || write(fd, bytes, len) == (ssize_t)len);
    close(fd);
    return path;
}

// A file: 8-byte little-endian header length hlen, header text, data bytes.
static size_t build_n(unsigned char *out, size_t cap, uint64_t hlen, const char *json, const void *data,
                      size_t dlen) {
    size_t jl = strlen(json);
    cr_assert(8 + jl + dlen <= cap);
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)(hlen >> (8 * i));
    memcpy(out + 8, json, jl);
    if (dlen) memcpy(out + 8 + jl, data, dlen);
    return 8 + jl + dlen;
}

// The same with the true header length.
static size_t build(unsigned char *out, size_t cap, const char *json, const void *data, size_t dlen) {
    return build_n(out, cap, strlen(json), json, data, dlen);
}

static unsigned char *read_all(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    cr_assert(fp, "%s: %s", path, strerror(errno));
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc(n ? (size_t)n : 1);
    cr_assert(b && fread(b, 1, (size_t)n, fp) == (size_t)n);
    fclose(fp);
    *len = (size_t)n;
    return b;
}

// Expect phax_st_read to refuse these bytes with a one-line error that starts
// with the path and contains `needle`; the file struct must come back empty.
static void expect_fail_bytes(const void *bytes, size_t len, const char *needle) {
    char *path = tmp_file(bytes, len);
    phax_st_file f;
    memset(&f, 0x5A, sizeof f);  // garbage in: the reader must clear it
    phax_clear_error();
    int rc = phax_st_read(&f, path);
    const char *e = phax_error();
    cr_assert(rc == PHAX_ERR, "accepted a malformed file (expected an error with '%s')", needle);
    cr_assert(strncmp(e, path, strlen(path)) == 0 && strncmp(e + strlen(path), ": ", 2) == 0,
              "error does not start with the path: '%s'", e);
    cr_assert(strstr(e, needle), "error '%s' does not say '%s'", e, needle);
    cr_assert(!strchr(e, '\n'), "error is not one line: '%s'", e);
    cr_assert(f.n == 0 && f.t == NULL && f.buffer == NULL && f.path == NULL && f.nmeta == 0);
    phax_st_free(&f);
    unlink(path);
    // The same bytes from memory: the same refusal, the label for the path ("file" reads "image").
    char want[1024];
    const char *rest = e + strlen(path), *file = strstr(rest, "the file");
    if (file) snprintf(want, sizeof want, "img%.*sthe image%s", (int)(file - rest), rest, file + 8);
    else snprintf(want, sizeof want, "img%s", rest);
    memset(&f, 0x5A, sizeof f);
    rc = phax_st_read_mem(&f, bytes, len, "img");
    cr_assert(rc == PHAX_ERR, "accepted a malformed image (expected an error with '%s')", needle);
    if (strncmp(want, "img: file is", 12))  // a file's length is said of the image in its own words
        cr_assert_str_eq(phax_error(), want);
    cr_assert(f.n == 0 && f.t == NULL && f.buffer == NULL && f.path == NULL && f.nmeta == 0);
    phax_st_free(&f);
    free(path);
}

static void expect_fail(const char *json, const void *data, size_t dlen, const char *needle) {
    unsigned char b[4096];
    size_t n = build(b, sizeof b, json, data, dlen);
    expect_fail_bytes(b, n, needle);
}

// Read a file built from json + data, expecting success; the caller frees f.
static void read_ok(phax_st_file *f, const char *json, const void *data, size_t dlen) {
    unsigned char b[4096];
    size_t n = build(b, sizeof b, json, data, dlen);
    char *path = tmp_file(b, n);
    int rc = phax_st_read(f, path);
    cr_assert(rc == PHAX_OK, "refused a valid file: %s", phax_error());
    cr_assert_str_eq(f->path, path);
    unlink(path);
    free(path);
}

static char *tmp_dir(void) {
    char *d = strdup("/tmp/phax_st_dir_XXXXXX");
    cr_assert(d && mkdtemp(d), "mkdtemp: %s", strerror(errno));
    return d;
}

// Number of entries in dir (without . and ..); the first one's name in first.
static int dir_entries(const char *dir, char *first, size_t cap) {
    DIR *d = opendir(dir);
    cr_assert(d, "%s: %s", dir, strerror(errno));
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (n++ == 0 && first) snprintf(first, cap, "%s", e->d_name);
    }
    closedir(d);
    return n;
}

static int bits_eq(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

// A common valid entry for the tiling tests.
#define F32_2(name, b, e) "\"" name "\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[" #b "," #e "]}"

static const unsigned char ZEROS[64];

// --- exact bytes ----------------------------------------------------------------------

// The reference's own vector (huggingface/safetensors, safetensors/src/tensor.rs,
// test_serialization_forced_alignement): F32 "attn0" of shape [1,1,2,3] holding
// 0..5. The 65-byte JSON is padded with 7 spaces to 72 so the data starts at 80.
Test(safetensors, known_bytes_reference_vector) {
    static const unsigned char want[] = {
        72, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 48, 34, 58, 123, 34, 100, 116,
        121, 112, 101, 34, 58, 34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34, 58,
        91, 49, 44, 49, 44, 50, 44, 51, 93, 44, 34, 100, 97, 116, 97, 95, 111, 102, 102,
        115, 101, 116, 115, 34, 58, 91, 48, 44, 50, 52, 93, 125, 125, 32, 32, 32, 32, 32,
        32, 32, 0, 0, 0, 0, 0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0,
        160, 64};
    char *dir = tmp_dir(), path[512];
    snprintf(path, sizeof path, "%s/attn.safetensors", dir);
    phax_st_writer *w = phax_st_writer_new();
    const double x[6] = {0, 1, 2, 3, 4, 5};
    const int64_t shape[4] = {1, 1, 2, 3};
    cr_assert(phax_st_add_f32_from_f64(w, "attn0", x, 4, shape) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_st_write(w, path) == PHAX_OK, "%s", phax_error());
    size_t n;
    unsigned char *got = read_all(path, &n);
    cr_assert(n == sizeof want, "file is %zu bytes, want %zu", n, sizeof want);
    for (size_t i = 0; i < n; i++) cr_assert(got[i] == want[i], "byte %zu is %u, want %u", i, got[i], want[i]);
    free(got);
    phax_st_writer_free(w);
    unlink(path);
    rmdir(dir);
    free(dir);
}

// The reference's test_empty vectors: no tensors, without and with metadata.
Test(safetensors, known_bytes_reference_empty) {
    static const unsigned char want0[] = {8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32};
    static const unsigned char want1[] = {40, 0, 0, 0, 0, 0, 0, 0, 123, 34, 95, 95, 109, 101, 116, 97, 100, 97,
                                          116, 97, 95, 95, 34, 58, 123, 34, 102, 114, 97, 109, 101, 119, 111, 114,
                                          107, 34, 58, 34, 112, 116, 34, 125, 125, 32, 32, 32, 32, 32};
    char *dir = tmp_dir(), path[512];
    snprintf(path, sizeof path, "%s/empty.safetensors", dir);
    for (int k = 0; k < 2; k++) {
        phax_st_writer *w = phax_st_writer_new();
        if (k) cr_assert(phax_st_add_meta(w, "framework", "pt") == PHAX_OK);
        cr_assert(phax_st_write(w, path) == PHAX_OK, "%s", phax_error());
        size_t n;
        unsigned char *got = read_all(path, &n);
        const unsigned char *want = k ? want1 : want0;
        size_t wn = k ? sizeof want1 : sizeof want0;
        cr_assert(n == wn && memcmp(got, want, n) == 0, "case %d: %zu bytes, want %zu", k, n, wn);
        free(got);
        phax_st_file f;
        cr_assert(phax_st_read(&f, path) == PHAX_OK, "%s", phax_error());
        cr_assert(f.n == 0 && f.nmeta == k && f.buffer_len == 0);
        if (k) cr_assert_str_eq(phax_st_meta(&f, "framework"), "pt");
        phax_st_free(&f);
        phax_st_writer_free(w);
    }
    unlink(path);
    rmdir(dir);
    free(dir);
}

// Hand-written: tensors added as i, w, a, n with metadata step, arch. The file
// holds "__metadata__" first with sorted keys, then the tensors by descending
// dtype alignment (I64, F64, I32) and then name, each at a multiple of its size.
// JSON is 259 bytes, padded with 5 spaces to 264 = 0x108.
Test(safetensors, known_bytes_hand_written) {
    static const unsigned char len[8] = {0x08, 0x01, 0, 0, 0, 0, 0, 0};
    static const char json[] =
        "{\"__metadata__\":{\"arch\":\"pha\",\"step\":\"12\"},"
        "\"n\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]},"
        "\"w\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[8,24]},"
        "\"a\":{\"dtype\":\"I32\",\"shape\":[0],\"data_offsets\":[24,24]},"
        "\"i\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[24,28]}}"
        "     ";
    static const unsigned char data[28] = {
        0x02, 0x01, 0, 0, 0, 0, 0, 0,                    // n: I64 258
        0, 0, 0, 0, 0, 0, 0xF0, 0x3F,                    // w[0]: 1.0  = 0x3FF0000000000000
        0, 0, 0, 0, 0, 0, 0xE0, 0xBF,                    // w[1]: -0.5 = 0xBFE0000000000000
        0xFE, 0xFF, 0xFF, 0xFF};                         // i: I32 -2 (a: no bytes)
    cr_assert(sizeof json - 1 == 264);
    unsigned char want[8 + 264 + 28];
    memcpy(want, len, 8);
    memcpy(want + 8, json, 264);
    memcpy(want + 272, data, 28);

    char *dir = tmp_dir(), path[512];
    snprintf(path, sizeof path, "%s/mixed.safetensors", dir);
    phax_st_writer *w = phax_st_writer_new();
    const int32_t i = -2;
    const double wv[2] = {1.0, -0.5};
    const int64_t nv = 258, s1[1] = {1}, s2[1] = {2}, s0[1] = {0};
    cr_assert(phax_st_add_i32(w, "i", &i, 0, NULL) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_st_add_f64(w, "w", wv, 1, s2) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_st_add_i32(w, "a", NULL, 1, s0) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_st_add_i64(w, "n", &nv, 1, s1) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_st_add_meta(w, "step", "12") == PHAX_OK);
    cr_assert(phax_st_add_meta(w, "arch", "pha") == PHAX_OK);
    cr_assert(phax_st_write(w, path) == PHAX_OK, "%s", phax_error());
    size_t n;
    unsigned char *got = read_all(path, &n);
    cr_assert(n == sizeof want, "file is %zu bytes, want %zu", n, sizeof want);
    for (size_t k = 0; k < n; k++) cr_assert(got[k] == want[k], "byte %zu is %u, want %u", k, got[k], want[k]);
    free(got);
    phax_st_writer_free(w);
    unlink(path);
    rmdir(dir);
    free(dir);
}

// --- decoding hand-built bytes -------------------------------------------------------------

Test(safetensors, decode_f16_bf16_f8_f32) {
    static const unsigned char data[] = {
        // F16 [10]: 1, -2.5, 65504, 2^-24, 1023·2^-24, 2^-14, inf, -inf, NaN, -0
        0x00, 0x3C, 0x00, 0xC1, 0xFF, 0x7B, 0x01, 0x00, 0xFF, 0x03, 0x00, 0x04, 0x00, 0x7C, 0x00, 0xFC,
        0x00, 0x7E, 0x00, 0x80,
        // BF16 [7]: 1, -2.5, (2 − 2^-7)·2^127, 2^-133, inf, NaN, 0x3EAB = 0.333984375
        0x80, 0x3F, 0x20, 0xC0, 0x7F, 0x7F, 0x01, 0x00, 0x80, 0x7F, 0xC0, 0x7F, 0xAB, 0x3E,
        // F8_E4M3 [6]: 1, 448, NaN, 2^-9, -3, -0
        0x38, 0x7E, 0x7F, 0x01, 0xC4, 0x80,
        // F8_E5M2 [6]: 1, 57344, inf, 2^-16, NaN, -2.5
        0x3C, 0x7B, 0x7C, 0x01, 0x7E, 0xC1,
        // F32 [2]: 1, 2^-149
        0x00, 0x00, 0x80, 0x3F, 0x01, 0x00, 0x00, 0x00};
    const char *json = "{\"h\":{\"dtype\":\"F16\",\"shape\":[10],\"data_offsets\":[0,20]},"
                       "\"b\":{\"dtype\":\"BF16\",\"shape\":[7],\"data_offsets\":[20,34]},"
                       "\"e4\":{\"dtype\":\"F8_E4M3\",\"shape\":[2,3],\"data_offsets\":[34,40]},"
                       "\"e5\":{\"dtype\":\"F8_E5M2\",\"shape\":[6],\"data_offsets\":[40,46]},"
                       "\"s\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[46,54]}}";
    phax_st_file f;
    read_ok(&f, json, data, sizeof data);
    cr_assert(f.n == 5);
    double v[10];

    const phax_st_tensor *t = phax_st_find(&f, "h");
    cr_assert(t && t->dtype == PHAX_DT_F16 && t->numel == 10 && t->nbytes == 20);
    cr_assert(phax_st_to_f64(t, v) == PHAX_OK);
    const double h[8] = {1.0, -2.5, 65504.0, 0x1p-24, 1023 * 0x1p-24, 0x1p-14, INFINITY, -INFINITY};
    for (int i = 0; i < 8; i++) cr_assert(v[i] == h[i], "F16[%d] = %a, want %a", i, v[i], h[i]);
    cr_assert(isnan(v[8]));
    cr_assert(v[9] == 0 && signbit(v[9]), "F16 -0 decoded as %a", v[9]);

    t = phax_st_find(&f, "b");
    cr_assert(t && t->dtype == PHAX_DT_BF16 && t->numel == 7);
    cr_assert(phax_st_to_f64(t, v) == PHAX_OK);
    const double b[5] = {1.0, -2.5, 0x1.fep127, 0x1p-133, INFINITY};
    for (int i = 0; i < 5; i++) cr_assert(v[i] == b[i], "BF16[%d] = %a, want %a", i, v[i], b[i]);
    cr_assert(isnan(v[5]));
    cr_assert(v[6] == 0.333984375, "BF16[6] = %a", v[6]);

    t = phax_st_find(&f, "e4");
    cr_assert(t && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3 && t->numel == 6);
    cr_assert(phax_st_to_f64(t, v) == PHAX_OK);
    cr_assert(v[0] == 1.0 && v[1] == 448.0 && isnan(v[2]) && v[3] == 0x1p-9 && v[4] == -3.0);
    cr_assert(v[5] == 0 && signbit(v[5]));

    t = phax_st_find(&f, "e5");
    cr_assert(phax_st_to_f64(t, v) == PHAX_OK);
    cr_assert(v[0] == 1.0 && v[1] == 57344.0 && v[2] == INFINITY && v[3] == 0x1p-16 && isnan(v[4]) &&
              v[5] == -2.5);

    t = phax_st_find(&f, "s");
    cr_assert(phax_st_to_f64(t, v) == PHAX_OK);
    cr_assert(v[0] == 1.0 && v[1] == 0x1p-149);
    phax_st_free(&f);
}

Test(safetensors, decode_integers_and_ranges) {
    static const unsigned char data[] = {
        0x80, 0x7F, 0xFF,                      // I8 [3]: -128, 127, -1
        0x00, 0x80, 0x01, 0x00,                // I16 [2]: -32768, 1
        0xFF, 0xFF,                            // U16 [1]: 65535
        0xFF, 0xFF, 0xFF, 0xFF,                // U32 [1]: 4294967295
        0, 0, 0, 0, 0, 0, 0, 0x80,             // I64 [2]: INT64_MIN,
        0x00, 0x00, 0x00, 0x80, 0, 0, 0, 0,    //          2^31
        0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,  // U64 [1]: 2^64 − 1
        0x01, 0x00};                           // BOOL [2]: true, false
    const char *json = "{\"i8\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[0,3]},"
                       "\"i16\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[3,7]},"
                       "\"u16\":{\"dtype\":\"U16\",\"shape\":[1],\"data_offsets\":[7,9]},"
                       "\"u32\":{\"dtype\":\"U32\",\"shape\":[1],\"data_offsets\":[9,13]},"
                       "\"i64\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[13,29]},"
                       "\"u64\":{\"dtype\":\"U64\",\"shape\":[1],\"data_offsets\":[29,37]},"
                       "\"ok\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[37,39]}}";
    phax_st_file f;
    read_ok(&f, json, data, sizeof data);
    int32_t a[3];
    int64_t b[3];
    double d[3];
    cr_assert(phax_st_to_i32(phax_st_find(&f, "i8"), a) == PHAX_OK);
    cr_assert(a[0] == -128 && a[1] == 127 && a[2] == -1);
    cr_assert(phax_st_to_i32(phax_st_find(&f, "i16"), a) == PHAX_OK);
    cr_assert(a[0] == -32768 && a[1] == 1);
    cr_assert(phax_st_to_i32(phax_st_find(&f, "u16"), a) == PHAX_OK && a[0] == 65535);
    cr_assert(phax_st_to_i64(phax_st_find(&f, "u32"), b) == PHAX_OK && b[0] == 4294967295LL);
    cr_assert(phax_st_to_i32(phax_st_find(&f, "u32"), a) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "'u32'") && strstr(phax_error(), "4294967295") &&
              strstr(phax_error(), "int32 range"), "%s", phax_error());
    cr_assert(phax_st_to_i64(phax_st_find(&f, "i64"), b) == PHAX_OK);
    cr_assert(b[0] == INT64_MIN && b[1] == 2147483648LL);
    cr_assert(phax_st_to_i32(phax_st_find(&f, "i64"), a) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "element 0") && strstr(phax_error(), "int32 range"), "%s", phax_error());
    cr_assert(phax_st_to_i64(phax_st_find(&f, "u64"), b) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "18446744073709551615") && strstr(phax_error(), "int64 range"), "%s",
              phax_error());
    // Integers are not floats and the other way round; BOOL is neither.
    cr_assert(phax_st_to_f64(phax_st_find(&f, "i16"), d) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "'i16' has dtype I16, not a floating-point type"), "%s", phax_error());
    cr_assert(phax_st_to_i32(phax_st_find(&f, "ok"), a) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "BOOL, not an integer type"), "%s", phax_error());
    cr_assert(phax_st_to_f64(phax_st_find(&f, "ok"), d) == PHAX_ERR);
    phax_st_free(&f);

    // Integers stored in floats are refused by the integer readers.
    const unsigned char one[4] = {0x00, 0x00, 0x80, 0x3F};
    read_ok(&f, "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", one, 4);
    cr_assert(phax_st_to_i32(&f.t[0], a) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "F32, not an integer type"), "%s", phax_error());
    cr_assert(phax_st_get_i64(&f, "x", 1, (int64_t[]){1}, b) == PHAX_ERR);
    cr_assert(strstr(phax_error(), f.path) == phax_error() && strstr(phax_error(), "not an integer type"), "%s",
              phax_error());
    phax_st_free(&f);
}

// --- round trip ----------------------------------------------------------------------

Test(safetensors, round_trip_all_kinds) {
    phax_rng r = tu_rng("safetensors/round_trip_all_kinds");
    enum { N = 3 * 5 * 7 };
    double x[N], y[N];
    tu_fill_normal(x, N, &r, 3.0);
    x[0] = -0.0, x[1] = INFINITY, x[2] = 0x1p-1074, x[3] = -DBL_MAX, x[4] = NAN;
    int32_t iv[6] = {INT32_MIN, INT32_MAX, 0, -1, 1, 123456789};
    int64_t lv[4] = {INT64_MIN, INT64_MAX, -1, 1LL << 40};
    const int64_t s3[3] = {3, 5, 7}, s23[2] = {2, 3}, s4[1] = {4}, sz[3] = {3, 0, 2};
    double scalar = -7.25;

    char *dir = tmp_dir(), path[512];
    snprintf(path, sizeof path, "%s/rt.safetensors", dir);
    phax_st_writer *w = phax_st_writer_new();
    cr_assert(phax_st_add_f64(w, "layers.0.w", x, 3, s3) == PHAX_OK, "%s", phax_error());
    double x32[N];  // F32 copy: -DBL_MAX does not fit, -FLT_MAX does
    memcpy(x32, x, sizeof x);
    x32[3] = -FLT_MAX;
    cr_assert(phax_st_add_f32_from_f64(w, "layers.0.w32", x32, 3, s3) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_st_add_i32(w, "ids", iv, 2, s23) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_st_add_i64(w, "big", lv, 1, s4) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_st_add_f64(w, "scalar", &scalar, 0, NULL) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_st_add_f64(w, "empty", NULL, 3, sz) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_st_add_meta(w, "config", "{\"d_model\": 64,\n \"name\": \"pha\"}") == PHAX_OK);
    cr_assert(phax_st_add_meta(w, "note", "") == PHAX_OK);
    cr_assert(phax_st_add_meta(w, "ünïcode ✓", "värde") == PHAX_OK);
    cr_assert(phax_st_write(w, path) == PHAX_OK, "%s", phax_error());
    phax_st_writer_free(w);

    phax_st_file f;
    cr_assert(phax_st_read(&f, path) == PHAX_OK, "%s", phax_error());
    cr_assert(f.n == 6 && f.nmeta == 3);
    cr_assert_str_eq(phax_st_meta(&f, "config"), "{\"d_model\": 64,\n \"name\": \"pha\"}");
    cr_assert_str_eq(phax_st_meta(&f, "note"), "");
    cr_assert_str_eq(phax_st_meta(&f, "ünïcode ✓"), "värde");
    cr_assert(phax_st_meta(&f, "absent") == NULL && phax_st_find(&f, "absent") == NULL);

    cr_assert(phax_st_get_f64(&f, "layers.0.w", 3, s3, y) == PHAX_OK, "%s", phax_error());
    for (int i = 0; i < N; i++) cr_assert(bits_eq(x[i], y[i]), "F64[%d]: %a != %a", i, y[i], x[i]);
    cr_assert(phax_st_get_f64(&f, "layers.0.w32", 3, s3, y) == PHAX_OK, "%s", phax_error());
    for (int i = 0; i < N; i++) {
        double want = (double)(float)x32[i];
        cr_assert(bits_eq(want, y[i]) || (isnan(want) && isnan(y[i])), "F32[%d]: %a != %a", i, y[i], want);
    }
    const phax_st_tensor *t = phax_st_find(&f, "layers.0.w32");
    cr_assert(t->dtype == PHAX_DT_F32 && t->nbytes == 4 * N);

    int32_t ib[6];
    cr_assert(phax_st_get_i32(&f, "ids", 2, s23, ib) == PHAX_OK, "%s", phax_error());
    cr_assert(memcmp(ib, iv, sizeof iv) == 0);
    int64_t lb[4];
    cr_assert(phax_st_get_i64(&f, "big", 1, s4, lb) == PHAX_OK, "%s", phax_error());
    cr_assert(memcmp(lb, lv, sizeof lv) == 0);
    double sc = NAN;
    cr_assert(phax_st_get_f64(&f, "scalar", 0, NULL, &sc) == PHAX_OK, "%s", phax_error());
    cr_assert(sc == -7.25);
    t = phax_st_find(&f, "scalar");
    cr_assert(t->ndim == 0 && t->numel == 1 && t->nbytes == 8);
    t = phax_st_find(&f, "empty");
    cr_assert(t->ndim == 3 && t->shape[1] == 0 && t->numel == 0 && t->nbytes == 0);
    cr_assert(phax_st_get_f64(&f, "empty", 3, sz, NULL) == PHAX_OK, "%s", phax_error());

    // Shape and name checks of the get functions.
    cr_assert(phax_st_get_f64(&f, "layers.0.w", 2, s23, y) == PHAX_ERR);
    cr_assert(strstr(phax_error(), path) == phax_error() &&
              strstr(phax_error(), "'layers.0.w' has shape [3, 5, 7], expected [2, 3]"), "%s", phax_error());
    cr_assert(phax_st_get_f64(&f, "nope", 1, s4, y) == PHAX_ERR);
    cr_assert(strstr(phax_error(), path) == phax_error() && strstr(phax_error(), "no tensor 'nope'"), "%s",
              phax_error());

    // Every tensor starts at a multiple of its element size, the buffer at a multiple of 8.
    size_t fl;
    unsigned char *raw = read_all(path, &fl);
    uint64_t hn = 0;
    for (int i = 7; i >= 0; i--) hn = hn << 8 | raw[i];
    cr_assert(hn % 8 == 0 && fl == 8 + hn + f.buffer_len);
    free(raw);
    for (int i = 0; i < f.n; i++)
        cr_assert(f.t[i].offset % phax_dtype_size(f.t[i].dtype) == 0, "'%s' at %llu", f.t[i].name,
                  (unsigned long long)f.t[i].offset);
    phax_st_free(&f);
    phax_st_free(&f);  // freeing twice is harmless (the struct is cleared)
    unlink(path);
    rmdir(dir);
    free(dir);
}

// The same content added in any order gives the same bytes; read → add_raw →
// write reproduces a file byte for byte.
Test(safetensors, reproducible_bytes) {
    const double a[3] = {1, 2, 3};
    const int32_t b[2] = {4, 5};
    const unsigned char c[3] = {0x00, 0x3C, 0x01};  // odd-sized U8 tensor
    const int64_t s3[1] = {3}, s2[1] = {2};
    char *dir = tmp_dir(), p[3][256];
    for (int k = 0; k < 3; k++) snprintf(p[k], sizeof p[k], "%s/r%d.safetensors", dir, k);
    for (int k = 0; k < 2; k++) {
        phax_st_writer *w = phax_st_writer_new();
        if (k == 0) {
            cr_assert(phax_st_add_f64(w, "z", a, 1, s3) == PHAX_OK);
            cr_assert(phax_st_add_i32(w, "y", b, 1, s2) == PHAX_OK);
            cr_assert(phax_st_add_raw(w, "x", PHAX_DT_U8, 1, s3, c) == PHAX_OK);
            cr_assert(phax_st_add_meta(w, "b", "2") == PHAX_OK && phax_st_add_meta(w, "a", "1") == PHAX_OK);
        } else {
            cr_assert(phax_st_add_meta(w, "a", "1") == PHAX_OK && phax_st_add_meta(w, "b", "2") == PHAX_OK);
            cr_assert(phax_st_add_raw(w, "x", PHAX_DT_U8, 1, s3, c) == PHAX_OK);
            cr_assert(phax_st_add_i32(w, "y", b, 1, s2) == PHAX_OK);
            cr_assert(phax_st_add_f64(w, "z", a, 1, s3) == PHAX_OK);
        }
        cr_assert(phax_st_write(w, p[k]) == PHAX_OK, "%s", phax_error());
        phax_st_writer_free(w);
    }
    phax_st_file f;
    cr_assert(phax_st_read(&f, p[0]) == PHAX_OK, "%s", phax_error());
    phax_st_writer *w = phax_st_writer_new();
    for (int i = 0; i < f.n; i++)
        cr_assert(phax_st_add_raw(w, f.t[i].name, f.t[i].dtype, f.t[i].ndim, f.t[i].shape, f.t[i].data) == PHAX_OK);
    for (int i = 0; i < f.nmeta; i++) cr_assert(phax_st_add_meta(w, f.meta_key[i], f.meta_val[i]) == PHAX_OK);
    cr_assert(phax_st_write(w, p[2]) == PHAX_OK, "%s", phax_error());
    phax_st_writer_free(w);
    phax_st_free(&f);
    size_t n0, n;
    unsigned char *b0 = read_all(p[0], &n0);
    for (int k = 1; k < 3; k++) {
        unsigned char *bk = read_all(p[k], &n);
        cr_assert(n == n0 && memcmp(b0, bk, n) == 0, "file %d differs from file 0", k);
        free(bk);
    }
    free(b0);
    for (int k = 0; k < 3; k++) unlink(p[k]);
    rmdir(dir);
    free(dir);
}

// --- valid edge cases --------------------------------------------------------------------

Test(safetensors, accepts_empty_header_and_padding) {
    phax_st_file f;
    read_ok(&f, "{}", NULL, 0);  // N = 2, no padding, no data
    cr_assert(f.n == 0 && f.nmeta == 0 && f.buffer_len == 0);
    phax_st_free(&f);
    read_ok(&f, "{}      ", NULL, 0);  // padded with spaces
    cr_assert(f.n == 0);
    phax_st_free(&f);
    // Trailing padding after a tensor entry; zero-sized tensors at both ends of the buffer.
    read_ok(&f,
            "{\"z0\":{\"dtype\":\"F64\",\"shape\":[0,4],\"data_offsets\":[0,0]}," F32_2("a", 0, 8)
            ",\"z1\":{\"dtype\":\"I32\",\"shape\":[5,0],\"data_offsets\":[8,8]}}   ",
            ZEROS, 8);
    cr_assert(f.n == 3 && phax_st_find(&f, "z1")->numel == 0 && phax_st_find(&f, "a")->numel == 2);
    phax_st_free(&f);
    // Unknown extra keys in an entry are ignored, as the reference does.
    read_ok(&f, "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"extra\":[1,2]}}", ZEROS, 1);
    phax_st_free(&f);
}

// --- malformed input: one test per case ------------------------------------------------

Test(safetensors, bad_file_too_short) {
    expect_fail_bytes("", 0, "too short");
    expect_fail_bytes("\x02\0\0\0\0", 5, "too short");
    expect_fail_bytes("\x02\0\0\0\0\0\0", 7, "too short");
}

Test(safetensors, bad_header_length_beyond_file) {
    unsigned char b[64];
    size_t n = build_n(b, sizeof b, 99999, "{}", NULL, 0);
    expect_fail_bytes(b, n, "header length 99999 is beyond the file (10 bytes)");
    n = build_n(b, sizeof b, 3, "{}", NULL, 0);  // one byte too many
    expect_fail_bytes(b, n, "beyond the file");
    n = build_n(b, sizeof b, 100000000, "{}", NULL, 0);  // exactly the limit: not absurd, just beyond
    expect_fail_bytes(b, n, "beyond the file");
}

Test(safetensors, bad_header_length_absurd) {
    unsigned char b[64];
    size_t n = build_n(b, sizeof b, 100000001, "{}", NULL, 0);
    expect_fail_bytes(b, n, "header length 100000001 exceeds the limit");
    n = build_n(b, sizeof b, UINT64_MAX, "{}", NULL, 0);
    expect_fail_bytes(b, n, "header length 18446744073709551615 exceeds the limit");
}

Test(safetensors, bad_header_not_json) {
    expect_fail("{\"a\":", NULL, 0, "not valid JSON");
    expect_fail("", NULL, 0, "not valid JSON");                 // N = 0
    expect_fail("{} x", NULL, 0, "not valid JSON");             // garbage after the object
    expect_fail("{}\t\t  \x01", NULL, 0, "not valid JSON");     // padding that is not whitespace
    expect_fail("{'a':1}", NULL, 0, "not valid JSON");
    expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],}}", ZEROS, 4, "not valid JSON");
    unsigned char b[64];
    size_t n = build(b, sizeof b, "{}  ", NULL, 0);
    b[10] = '\0';  // a NUL byte in the padding
    expect_fail_bytes(b, n, "not valid JSON");
}

// jansson validates UTF-8 everywhere in the text: a stray byte, an overlong
// encoding, a surrogate, a truncated sequence; in a name, a value or the padding.
Test(safetensors, bad_header_not_utf8) {
    expect_fail("{\"\xff\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", ZEROS, 1, "not valid UTF-8");
    expect_fail("{\"\xc0\xaf\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", ZEROS, 1, "UTF-8");
    expect_fail("{\"\xed\xa0\x80\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", ZEROS, 1, "UTF-8");
    expect_fail("{\"__metadata__\":{\"k\":\"\xe2\x82\"}}", NULL, 0, "UTF-8");
    expect_fail("{}  \xe9 ", NULL, 0, "UTF-8");
}

Test(safetensors, bad_header_not_object) {
    expect_fail("[]", NULL, 0, "header is not a JSON object");
    expect_fail("\"x\"", NULL, 0, "header is not a JSON object");
    expect_fail("3", NULL, 0, "header is not a JSON object");
    expect_fail("null", NULL, 0, "header is not a JSON object");
}

Test(safetensors, bad_entry_not_object) {
    expect_fail("{\"a\":[0,4]}", NULL, 0, "tensor 'a': entry is not an object");
    expect_fail("{\"a\":\"F32\"}", NULL, 0, "tensor 'a': entry is not an object");
}

Test(safetensors, bad_dtype_missing) {
    expect_fail("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", ZEROS, 4, "tensor 'a': missing \"dtype\"");
}

Test(safetensors, bad_dtype_wrong_type) {
    expect_fail("{\"a\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", ZEROS, 4, "\"dtype\" is not a string");
    expect_fail("{\"a\":{\"dtype\":null,\"shape\":[1],\"data_offsets\":[0,4]}}", ZEROS, 4, "\"dtype\" is not a string");
}

Test(safetensors, bad_dtype_unknown) {
    expect_fail("{\"a\":{\"dtype\":\"Q8\",\"shape\":[1],\"data_offsets\":[0,1]}}", ZEROS, 1,
                "tensor 'a': unknown dtype \"Q8\"");
    expect_fail("{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", ZEROS, 4, "unknown dtype \"f32\"");
    expect_fail("{\"a\":{\"dtype\":\"F8_E8M0\",\"shape\":[1],\"data_offsets\":[0,1]}}", ZEROS, 1,
                "dtype \"F8_E8M0\" is not supported");
}

Test(safetensors, bad_shape_missing) {
    expect_fail("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", ZEROS, 4, "tensor 'a': missing \"shape\"");
}

Test(safetensors, bad_shape_wrong_type) {
    expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,16]}}", ZEROS, 16, "\"shape\" is not an array");
    expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":\"[4]\",\"data_offsets\":[0,16]}}", ZEROS, 16,
                "\"shape\" is not an array");
}

Test(safetensors, bad_shape_negative_dim) {
    expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,-2],\"data_offsets\":[0,16]}}", ZEROS, 16,
                "shape[1] is negative (-2)");
}

Test(safetensors, bad_shape_non_integer_dim) {
    expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", ZEROS, 8, "shape[0] is not an integer");
    expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,\"2\"],\"data_offsets\":[0,8]}}", ZEROS, 8,
                "shape[1] is not an integer");
    expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[true],\"data_offsets\":[0,4]}}", ZEROS, 4, "shape[0] is not an integer");
    // Beyond 64 bits: jansson refuses the number itself.
    expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,4]}}", ZEROS, 4,
                "not valid JSON");
}

Test(safetensors, bad_shape_too_many_dims) {
    expect_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", ZEROS, 1,
                "shape has 9 dims, more than the 8");
}

Test(safetensors, bad_shape_numel_overflow) {
    expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}", NULL, 0,
                "shape [4294967296, 4294967296] overflows");
    // numel fits, numel × 4 bytes does not.
    expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,0]}}", NULL, 0,
                "overflows");
    // An overflowing prefix is refused even with a zero dim after it (as the reference).
    expect_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,0],\"data_offsets\":[0,0]}}", NULL, 0,
                "overflows");
}

Test(safetensors, bad_data_offsets_missing) {
    expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", ZEROS, 4, "tensor 'a': missing \"data_offsets\"");
}

Test(safetensors, bad_data_offsets_wrong_type) {
    const char *cases[] = {"[0]", "[0,4,8]", "[\"0\",\"4\"]", "[0,-4]", "[-4,0]", "[0.0,4]", "{\"b\":0}", "\"0,4\"",
                           "[]", "[0,null]"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char json[256];
        snprintf(json, sizeof json, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":%s}}", cases[i]);
        expect_fail(json, ZEROS, 4, "\"data_offsets\" is not [begin, end]");
    }
}

Test(safetensors, bad_data_offsets_begin_after_end) {
    expect_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[8,4]}}", ZEROS, 8,
                "data_offsets begin 8 is after end 4");
}

Test(safetensors, bad_data_offsets_end_beyond_buffer) {
    expect_fail("{" F32_2("a", 0, 8) "," F32_2("b", 8, 16) "}", ZEROS, 12,
                "tensor 'b': data_offsets end 16 is beyond the data buffer (12 bytes)");
}

Test(safetensors, bad_data_offsets_size_mismatch) {
    expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", ZEROS, 8,
                "data_offsets span 8 bytes but F32 [3] needs 12");
    expect_fail("{\"a\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,4]}}", ZEROS, 4, "F64 [] needs 8");
}

Test(safetensors, bad_offsets_overlap) {
    expect_fail("{" F32_2("a", 0, 8) "," F32_2("b", 4, 12) "}", ZEROS, 12, "'a' [0, 8) and 'b' [4, 12) overlap");
    expect_fail("{" F32_2("a", 0, 8) "," F32_2("b", 0, 8) "}", ZEROS, 8, "overlap");  // the same range twice
    // A zero-sized tensor inside another one (the reference refuses it too).
    expect_fail("{" F32_2("a", 0, 8) ",\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}", ZEROS, 8,
                "overlap");
}

Test(safetensors, bad_offsets_hole) {
    expect_fail("{" F32_2("a", 0, 8) "," F32_2("b", 12, 20) "}", ZEROS, 20, "hole: bytes [8, 12) belong to no tensor");
    expect_fail("{" F32_2("a", 4, 12) "}", ZEROS, 12, "hole: bytes [0, 4)");
}

Test(safetensors, bad_trailing_bytes) {
    expect_fail("{" F32_2("a", 0, 8) "}", ZEROS, 9, "1 trailing bytes after the last tensor");
    expect_fail("{}", ZEROS, 3, "3 trailing bytes");
    expect_fail("{\"__metadata__\":{\"a\":\"b\"}}", ZEROS, 8, "8 trailing bytes");
}

Test(safetensors, bad_duplicate_tensor_name) {
    expect_fail("{" F32_2("a", 0, 8) "," F32_2("a", 8, 16) "}", ZEROS, 16, "duplicate key");
    expect_fail("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,8]}}", ZEROS, 8,
                "duplicate key");
    expect_fail("{\"__metadata__\":{},\"__metadata__\":{}}", NULL, 0, "duplicate key");
}

Test(safetensors, bad_metadata_not_object) {
    expect_fail("{\"__metadata__\":\"x\"}", NULL, 0, "\"__metadata__\" is not an object");
    expect_fail("{\"__metadata__\":[\"a\",\"b\"]}", NULL, 0, "\"__metadata__\" is not an object");
}

Test(safetensors, bad_metadata_value_not_string) {
    expect_fail("{\"__metadata__\":{\"a\":\"ok\",\"step\":12}}", NULL, 0, "\"__metadata__\" value of 'step' is not a string");
    expect_fail("{\"__metadata__\":{\"a\":null}}", NULL, 0, "is not a string");
    expect_fail("{\"__metadata__\":{\"a\":{\"b\":\"c\"}}}", NULL, 0, "is not a string");
}

Test(safetensors, bad_path) {
    phax_st_file f;
    cr_assert(phax_st_read(&f, "/tmp/phax_st_no_such_dir/x.safetensors") == PHAX_ERR);
    cr_assert(strstr(phax_error(), "/tmp/phax_st_no_such_dir/x.safetensors: cannot open"), "%s", phax_error());
    cr_assert(phax_st_read(&f, "/tmp") == PHAX_ERR);
    cr_assert(strstr(phax_error(), "/tmp: not a regular file"), "%s", phax_error());
    cr_assert(f.n == 0 && f.t == NULL);
}

// A name with a newline in it still gives a one-line message.
Test(safetensors, error_names_stay_one_line) {
    expect_fail("{\"a\\nb\":{\"dtype\":\"Q\",\"shape\":[],\"data_offsets\":[0,0]}}", NULL, 0, "tensor 'a?b'");
}

// --- writer ------------------------------------------------------------------------------

Test(safetensors, writer_refuses_bad_input) {
    const double x[2] = {1, 2};
    const int64_t s2[1] = {2}, sneg[1] = {-1}, s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    const int64_t sbig[2] = {INT64_MAX, INT64_MAX};
    int k = 0;
    phax_st_writer *w;
#define TRY(expr, needle)                                                                          \
    do {                                                                                           \
        w = phax_st_writer_new();                                                                  \
        cr_assert(phax_st_add_f64(w, "ok", x, 1, s2) == PHAX_OK);                                  \
        cr_assert((expr) == PHAX_ERR, "accepted: %s", #expr);                                      \
        cr_assert(strstr(phax_error(), needle), "'%s' lacks '%s'", phax_error(), needle);          \
        phax_st_writer_free(w);                                                                    \
        k++;                                                                                       \
    } while (0)
    TRY(phax_st_add_f64(w, "ok", x, 1, s2), "tensor 'ok': duplicate name");
    TRY(phax_st_add_f64(w, "__metadata__", x, 1, s2), "reserved");
    TRY(phax_st_add_f64(w, "bad\xff", x, 1, s2), "not valid UTF-8");
    TRY(phax_st_add_f64(w, "n", x, 1, sneg), "shape[0] is negative");
    TRY(phax_st_add_f64(w, "n", x, 9, s9), "ndim 9");
    TRY(phax_st_add_f64(w, "n", x, -1, s2), "ndim -1");
    TRY(phax_st_add_f64(w, "n", x, 2, sbig), "overflows");
    TRY(phax_st_add_f64(w, "n", NULL, 1, s2), "NULL data");
    TRY(phax_st_add_raw(w, "n", (phax_dtype)99, 1, s2, x), "invalid dtype");
    TRY(phax_st_add_f32_from_f64(w, "n", (const double[]){1, 1e39}, 1, s2), "element 1 (1e+39) is beyond the float32 range");
    TRY(phax_st_add_meta(w, "k", "\xc3"), "not valid UTF-8");
    TRY((phax_st_add_meta(w, "k", "1"), phax_st_add_meta(w, "k", "2")), "metadata 'k': duplicate key");
#undef TRY
    cr_assert(k == 12);
    // Largest finite float32 values and ±inf/NaN are fine in F32.
    w = phax_st_writer_new();
    cr_assert(phax_st_add_f32_from_f64(w, "f", (const double[]){0x1.fffffefffffffp127, -INFINITY}, 1, s2) == PHAX_OK,
              "%s", phax_error());
    phax_st_writer_free(w);
}

// A failed add is sticky: write refuses, and no file appears.
Test(safetensors, writer_failed_add_blocks_write) {
    char *dir = tmp_dir(), path[512];
    snprintf(path, sizeof path, "%s/x.safetensors", dir);
    phax_st_writer *w = phax_st_writer_new();
    const int64_t sneg[1] = {-3};
    const double x = 1;
    cr_assert(phax_st_add_f64(w, "a", &x, 0, NULL) == PHAX_OK);
    cr_assert(phax_st_add_f64(w, "b", &x, 1, sneg) == PHAX_ERR);
    cr_assert(phax_st_add_f64(w, "c", &x, 0, NULL) == PHAX_OK);  // later adds work, the failure stays
    cr_assert(phax_st_write(w, path) == PHAX_ERR);
    cr_assert(strstr(phax_error(), path) == phax_error() && strstr(phax_error(), "an earlier add failed") &&
              strstr(phax_error(), "tensor 'b'"), "%s", phax_error());
    cr_assert(dir_entries(dir, NULL, 0) == 0, "something was written");
    phax_st_writer_free(w);
    rmdir(dir);
    free(dir);
}

// --- atomic writing ------------------------------------------------------------------------

Test(safetensors, atomic_write_missing_directory) {
    char *dir = tmp_dir(), path[512], sub[256];
    snprintf(sub, sizeof sub, "%s/missing", dir);
    snprintf(path, sizeof path, "%s/x.safetensors", sub);
    phax_st_writer *w = phax_st_writer_new();
    const double x = 1;
    cr_assert(phax_st_add_f64(w, "a", &x, 0, NULL) == PHAX_OK);
    cr_assert(phax_st_write(w, path) == PHAX_ERR);
    cr_assert(strstr(phax_error(), path) == phax_error() && strstr(phax_error(), "No such file or directory"), "%s",
              phax_error());
    struct stat st;
    cr_assert(stat(sub, &st) != 0 && errno == ENOENT, "the directory was created");
    cr_assert(dir_entries(dir, NULL, 0) == 0);
    phax_st_writer_free(w);
    rmdir(dir);
    free(dir);
}

// Success leaves exactly the file (no "<path>.tmp.*"), and writing over a longer
// existing file replaces it whole (no stale tail).
Test(safetensors, atomic_write_replaces_and_leaves_no_temp) {
    char *dir = tmp_dir(), path[512], name[256];
    snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
    FILE *fp = fopen(path, "wb");
    cr_assert(fp);
    for (int i = 0; i < 10000; i++) fputc('#', fp);
    fclose(fp);

    phax_st_writer *w = phax_st_writer_new();
    const int32_t v[3] = {7, 8, 9};
    const int64_t s3[1] = {3};
    cr_assert(phax_st_add_i32(w, "v", v, 1, s3) == PHAX_OK);
    cr_assert(phax_st_write(w, path) == PHAX_OK, "%s", phax_error());
    cr_assert(dir_entries(dir, name, sizeof name) == 1 && strcmp(name, "ckpt.safetensors") == 0,
              "directory holds %s", name);
    size_t n;
    unsigned char *b = read_all(path, &n);
    // {"v":{"dtype":"I32","shape":[3],"data_offsets":[0,12]}} is 55 bytes → 56.
    cr_assert(n == 8 + 56 + 12, "file is %zu bytes", n);
    free(b);
    phax_st_file f;
    cr_assert(phax_st_read(&f, path) == PHAX_OK, "%s", phax_error());
    int32_t got[3];
    cr_assert(phax_st_get_i32(&f, "v", 1, s3, got) == PHAX_OK && got[0] == 7 && got[2] == 9);
    phax_st_free(&f);

    // Writing again over our own file also works and leaves one file.
    cr_assert(phax_st_write(w, path) == PHAX_OK, "%s", phax_error());
    cr_assert(dir_entries(dir, NULL, 0) == 1);
    phax_st_writer_free(w);
    unlink(path);
    rmdir(dir);
    free(dir);
}

// When the final rename fails (the path is a non-empty directory) the temporary
// file is removed and the directory is untouched.
Test(safetensors, atomic_write_failed_rename_cleans_up) {
    char *dir = tmp_dir(), path[512], inner[600], name[256];
    snprintf(path, sizeof path, "%s/out.safetensors", dir);
    snprintf(inner, sizeof inner, "%s/keep", path);
    cr_assert(mkdir(path, 0700) == 0);
    FILE *fp = fopen(inner, "wb");
    cr_assert(fp);
    fclose(fp);
    phax_st_writer *w = phax_st_writer_new();
    const double x = 2;
    cr_assert(phax_st_add_f64(w, "a", &x, 0, NULL) == PHAX_OK);
    cr_assert(phax_st_write(w, path) == PHAX_ERR);
    cr_assert(strstr(phax_error(), path) == phax_error() && strstr(phax_error(), "rename"), "%s", phax_error());
    cr_assert(dir_entries(dir, name, sizeof name) == 1 && strcmp(name, "out.safetensors") == 0, "left %s", name);
    cr_assert(dir_entries(path, NULL, 0) == 1);
    phax_st_writer_free(w);
    unlink(inner);
    rmdir(path);
    rmdir(dir);
    free(dir);
}

// In memory: phax_st_write_mem gives the bytes phax_st_write writes, and phax_st_read_mem
// reads them back as phax_st_read reads the file (the buffer copied: the caller's may go).
Test(safetensors, memory_image_equals_file) {
    const double a[3] = {1.5, -2, 3e-300};
    const int32_t b[2] = {4, -5};
    const int64_t s3[1] = {3}, s2[1] = {2};
    phax_st_writer *w = phax_st_writer_new();
    cr_assert(phax_st_add_f64(w, "z", a, 1, s3) == PHAX_OK && phax_st_add_i32(w, "y", b, 1, s2) == PHAX_OK);
    cr_assert(phax_st_add_meta(w, "k", "v") == PHAX_OK);
    char *dir = tmp_dir(), p[256];
    snprintf(p, sizeof p, "%s/m.safetensors", dir);
    cr_assert(phax_st_write(w, p) == PHAX_OK, "%s", phax_error());
    unsigned char *img;
    size_t n, nf;
    cr_assert(phax_st_write_mem(w, &img, &n) == PHAX_OK, "%s", phax_error());
    phax_st_writer_free(w);
    unsigned char *file = read_all(p, &nf);
    cr_assert(n == nf && memcmp(img, file, n) == 0, "the image differs from the file");
    phax_st_file f;
    cr_assert(phax_st_read_mem(&f, img, n, "img") == PHAX_OK, "%s", phax_error());
    memset(img, 0, n);  // f owns its copy
    free(img);
    double z[3];
    int32_t y[2];
    cr_assert(phax_st_get_f64(&f, "z", 1, s3, z) == PHAX_OK && !memcmp(z, a, sizeof a));
    cr_assert(phax_st_get_i32(&f, "y", 1, s2, y) == PHAX_OK && !memcmp(y, b, sizeof b));
    cr_assert_str_eq(phax_st_meta(&f, "k"), "v");
    cr_assert_str_eq(f.path, "img");
    phax_st_free(&f);
    // A failed add makes no image, as it makes no file.
    w = phax_st_writer_new();
    cr_assert(phax_st_add_f64(w, "__metadata__", a, 1, s3) == PHAX_ERR);
    cr_assert(phax_st_write_mem(w, &img, &n) == PHAX_ERR && img == NULL);
    phax_st_writer_free(w);
    free(file);
    unlink(p);
    rmdir(dir);
    free(dir);
}
