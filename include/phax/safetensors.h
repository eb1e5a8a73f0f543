// phax safetensors: read and write the huggingface/safetensors format.
//
// File layout (the format's own specification):
//   8 bytes   N, unsigned 64-bit little-endian: the header length
//   N bytes   UTF-8 JSON object: tensor name -> {"dtype": "F32", "shape": [2, 3],
//             "data_offsets": [begin, end]}, plus an optional "__metadata__"
//             object whose values are all strings; may end in spaces (0x20)
//   the rest  the data buffer; offsets are relative to its start; each tensor is
//             row-major, little-endian, (end − begin) = numel × dtype size.
// The tensors' byte ranges must tile the buffer exactly: no overlap, no hole,
// nothing after the last one.
//
// Reading validates all of that (and every malformed header) and refuses with
// a one-line error that starts with the path; it never aborts. Writing is
// atomic (phax/atomic_file.h): an exclusive temporary file with an unpredictable
// name, fsync, rename; on failure nothing is left behind.
//
// Output bytes follow the reference serializer (safetensors.torch.save_file):
// compact JSON with "__metadata__" first, then the tensors in the order of their
// data: dtype by descending alignment (the reference's Dtype order, which is
// this file's phax_dtype order), then name (bytewise); the JSON is padded with
// spaces so the data buffer starts at a multiple of 8, and with that order every
// tensor starts at a multiple of its element size. Metadata keys are written
// sorted (the reference's order there is a hash map's, i.e. unspecified). One
// known byte-level difference: a control character other than \b \f \n \r \t
// in a name or metadata string is escaped by jansson as \u001F, by the
// reference as \u001f (the same JSON).
#ifndef PHAX_SAFETENSORS_H
#define PHAX_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "phax/core.h"

// Element types, in the reference implementation's order (increasing alignment).
// F8_E4M3 is the "fn" variant (no infinities; S.1111.111 is NaN). Dtypes the
// reference knows but phax does not read (F4, F6_*, F8_E8M0, F8_*FNUZ, C64) are
// refused as unsupported.
typedef enum {
    PHAX_DT_BOOL,
    PHAX_DT_U8,
    PHAX_DT_I8,
    PHAX_DT_F8_E5M2,
    PHAX_DT_F8_E4M3,
    PHAX_DT_I16,
    PHAX_DT_U16,
    PHAX_DT_F16,
    PHAX_DT_BF16,
    PHAX_DT_I32,
    PHAX_DT_U32,
    PHAX_DT_F32,
    PHAX_DT_F64,
    PHAX_DT_I64,
    PHAX_DT_U64,
    PHAX_DT_COUNT
} phax_dtype;

const char *phax_dtype_name(phax_dtype dt);  // "F32"; "?" if out of range
size_t phax_dtype_size(phax_dtype dt);       // bytes per element; 0 if out of range
// Parse a dtype name ("BF16"); returns PHAX_ERR (and records an error) if unknown.
int phax_dtype_parse(const char *name, phax_dtype *out);

#define PHAX_ST_MAX_NDIM 8
#define PHAX_ST_MAX_HEADER 100000000ull  // the reference's limit on N
// A header's JSON values, counted before it is parsed (each costs jansson ~100 bytes): a tensor
// entry is ~8 values (dtype, up to 8 dims, two offsets), so this admits 2^18 tensors and
// bounds the parse at ~200 MB whatever the header's length.
#define PHAX_ST_MAX_TENSORS (1 << 18)
#define PHAX_ST_MAX_HEADER_VALUES (1 << 21)

typedef struct {
    char *name;
    phax_dtype dtype;
    int ndim;                          // 0 for a scalar
    int64_t shape[PHAX_ST_MAX_NDIM];
    size_t numel;                      // product of shape (1 for a scalar)
    size_t nbytes;                     // numel × phax_dtype_size(dtype)
    uint64_t offset;                   // begin offset within the data buffer
    const unsigned char *data;         // raw little-endian bytes (nbytes), not aligned
} phax_st_tensor;

typedef struct {
    char *path;                        // the path it was read from
    int n;                             // tensors, in header order
    phax_st_tensor *t;
    int nmeta;                         // "__metadata__" entries, in header order
    char **meta_key, **meta_val;
    unsigned char *buffer;             // owns the data buffer the tensors point into
    size_t buffer_len;
} phax_st_file;

// Read and validate a whole file. On failure *f is left empty (safe to free) and
// the error reads "<path>: <what is wrong>".
int phax_st_read(phax_st_file *f, const char *path);
// The same from an image in memory (len bytes, as a file would hold them; copied, so buf
// may go once this returns), with every check phax_st_read makes; label stands for the
// path in f->path and in errors ("<label>: <what is wrong>").
int phax_st_read_mem(phax_st_file *f, const void *buf, size_t len, const char *label);
void phax_st_free(phax_st_file *f);  // also fine on an empty or zeroed file
const phax_st_tensor *phax_st_find(const phax_st_file *f, const char *name);  // NULL if absent
const char *phax_st_meta(const phax_st_file *f, const char *key);            // NULL if absent

// Conversions of one tensor (out: numel elements). Errors name the tensor.
// to_f64: F64, F32, BF16, F16, F8_E4M3, F8_E5M2 (exact: every one is a double);
//         integer and bool tensors are refused.
// to_i32 / to_i64: any integer dtype (I8..U64), with a range check; float and
//         bool tensors are refused.
int phax_st_to_f64(const phax_st_tensor *t, double *out);
int phax_st_to_i32(const phax_st_tensor *t, int32_t *out);
int phax_st_to_i64(const phax_st_tensor *t, int64_t *out);

// Find a tensor, check that its shape is exactly (ndim, shape), convert it.
// Errors read "<path>: no tensor 'x'" / "<path>: tensor 'x' has shape [2, 3],
// expected [3, 2]" / "<path>: tensor 'x' ..." (conversion).
int phax_st_get_f64(const phax_st_file *f, const char *name, int ndim, const int64_t *shape,
                    double *out);
int phax_st_get_i32(const phax_st_file *f, const char *name, int ndim, const int64_t *shape,
                    int32_t *out);
int phax_st_get_i64(const phax_st_file *f, const char *name, int ndim, const int64_t *shape,
                    int64_t *out);

// ---------------------------------------------------------------------------
// Writing. A writer collects tensors (the data is copied at add time) and
// metadata, then writes them. Names and metadata must be valid UTF-8; tensor
// names must be unique and not "__metadata__"; shape dims ≥ 0, ndim ≤ 8; data
// may be NULL only when numel is 0. A failed add returns PHAX_ERR and is sticky:
// phax_st_write then refuses, so an unchecked add cannot produce a file that
// silently lacks a tensor.
typedef struct phax_st_writer phax_st_writer;

phax_st_writer *phax_st_writer_new(void);  // NULL (error recorded) if out of memory
void phax_st_writer_free(phax_st_writer *w);

int phax_st_add_f64(phax_st_writer *w, const char *name, const double *x, int ndim,
                    const int64_t *shape);  // stored as F64, bit-exact
// Stored as F32, rounded to nearest; a finite value that would round to ±inf is
// refused (inf and NaN are stored as such).
int phax_st_add_f32_from_f64(phax_st_writer *w, const char *name, const double *x, int ndim,
                             const int64_t *shape);
int phax_st_add_i32(phax_st_writer *w, const char *name, const int32_t *x, int ndim,
                    const int64_t *shape);
int phax_st_add_i64(phax_st_writer *w, const char *name, const int64_t *x, int ndim,
                    const int64_t *shape);
// Any dtype, from bytes already in the file's layout (little-endian, row-major,
// numel × size bytes), copied verbatim.
int phax_st_add_raw(phax_st_writer *w, const char *name, phax_dtype dtype, int ndim,
                    const int64_t *shape, const void *le_bytes);
int phax_st_add_meta(phax_st_writer *w, const char *key, const char *value);

// Write everything to path atomically (see the top of this file). The writer
// is unchanged and may be written again.
int phax_st_write(const phax_st_writer *w, const char *path);
// The bytes phax_st_write would write, in *out (malloc'd, the caller frees; *out_len bytes).
int phax_st_write_mem(const phax_st_writer *w, unsigned char **out, size_t *out_len);

#endif
