// phax data: reading corpora (plain or .xz through liblzma), atomic file
// writing, and batching token streams for training and evaluation.
// Every function returns PHAX_OK, or PHAX_ERR with a one-line message in
// phax_error() that names the file and what is wrong; nothing here exits.
#ifndef PHAX_DATA_H
#define PHAX_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "phax/atomic_file.h"
#include "phax/core.h"

// ---------------------------------------------------------------------------
// Reading files.

// What the cache code needs to know about a source file on disk.
typedef struct {
    uint64_t size;       // bytes on disk (for .xz: the compressed size)
    int64_t mtime_sec;   // modification time, seconds since the epoch
    int64_t mtime_nsec;  // and nanoseconds within that second
} phax_file_stat;

// The whole file as stored, without decoding. *out is malloc'd (free()) and
// has one extra NUL byte after the *n bytes. st may be NULL. A missing,
// unreadable or empty file, anything but a regular file (a directory, a FIFO,
// /dev/zero) and a file over phax_data_max_bytes() are errors.
int phax_data_read_raw(const char *path, uint8_t **out, size_t *n, phax_file_stat *st);

// The whole text of a corpus: a path ending in ".xz" is decoded through
// liblzma (concatenated streams allowed), anything else is read as is. The
// bytes are returned unchanged (no UTF-8 check; NUL bytes are kept). *out is
// malloc'd with one extra NUL byte after the *n bytes. Errors: missing,
// unreadable, empty file; not an xz file, corrupt or truncated .xz; an .xz
// that decodes to nothing or to more than phax_data_max_bytes(); a text that
// does not match its SHA256SUMS (phax_data_verify).
int phax_data_read(const char *path, uint8_t **out, size_t *n);

// Decode a complete .xz image held in memory; name is used in messages.
// *out is malloc'd with one extra NUL byte; *n may be 0.
int phax_xz_decode(const uint8_t *in, size_t in_n, const char *name, uint8_t **out, size_t *n);

// The most bytes one text file may hold, as stored and (.xz) decoded: corpora,
// prompts, haystacks, vocabularies. Bigger is refused with one line naming the
// file before more is allocated (a 146 KB .xz can decode to gigabytes). It also
// bounds a token cache (each token needs at least one byte of text). The .xz
// decoder's own memory is capped at PHAX_XZ_MEMLIMIT (xz -9 needs 65 MiB). The
// default, 64 MiB, is six times WikiText-2's train split (10.8 MB) and keeps what a
// crafted file can make phax hold near 100 MB; enwik8-sized corpora need the option.
// phax_data_set_max_bytes(0) restores the default; the CLI's --max-corpus-bytes sets it.
#define PHAX_DATA_MAX_BYTES_DEFAULT ((size_t)64 << 20)
#define PHAX_XZ_MEMLIMIT ((uint64_t)96 << 20)
void phax_data_set_max_bytes(size_t max);
size_t phax_data_max_bytes(void);

// Check a decoded text against the SHA256SUMS file beside it, when there is one
// (`sha256sum` format; the name without ".xz", as the repository's data/ ships):
// PHAX_OK when there is no SHA256SUMS or it does not list the file, PHAX_ERR with
// "PATH: sha256 ... does not match ..." on a mismatch. phax_data_read and the token
// cache call it whenever they decode a file, so a damaged corpus is caught on use.
int phax_data_verify(const char *path, const uint8_t *text, size_t n);
// SHA-256 of a byte range as 64 lowercase hex digits and a NUL (hex: 65 bytes).
void phax_sha256_hex(const void *data, size_t n, char hex[65]);

// 64-bit FNV-1a of a byte range, continued from h (start with PHAX_FNV_INIT).
#define PHAX_FNV_INIT 0xCBF29CE484222325ull
uint64_t phax_fnv1a64(uint64_t h, const void *p, size_t n);

// Write n bytes to path atomically: phax_write_file_atomic, declared in
// phax/atomic_file.h (included here for its callers).

// Create a directory and any missing parents (like mkdir -p).
int phax_mkdir_p(const char *dir);

// The file of split `name` ("train", "valid", "test") in a corpus folder: the
// first of <dir>/<name>.txt, ptb.<name>.txt, ptb.char.<name>.txt, each also with
// .xz, that exists (WikiText, PTB and PTB-char layouts). malloc'd path, or NULL
// (no error recorded) when none exists.
char *phax_data_find_split(const char *dir, const char *name);

// ---------------------------------------------------------------------------
// Training batches: B random windows of T tokens.
// Row b of a batch starts at an offset o_b drawn uniformly from [0, n−T−1]
// (phax_rng_below(n − T)); x[b, t] = tokens[o_b + t] and y[b, t] =
// tokens[o_b + t + 1], so every target is the next token and exists. The
// offsets of step s come from phax_rng_stream(seed, s), drawn in row order, so
// a batch depends only on (seed, step): a resumed run draws the same batches.

typedef struct {
    const int32_t *tokens;  // (n), borrowed: must outlive the sampler
    size_t n;
    int B, T;
    uint64_t seed;
} phax_sampler;

// Needs n >= T + 1, B >= 1, T >= 1.
int phax_sampler_init(phax_sampler *s, const int32_t *tokens, size_t n, int B, int T,
                      uint64_t seed);
// x, y: (B, T) int32, overwritten. offsets: (B) start of each row, or NULL.
int phax_sampler_batch(const phax_sampler *s, uint64_t step, int32_t *x, int32_t *y,
                       size_t *offsets);

// ---------------------------------------------------------------------------
// Evaluation: consecutive, non-overlapping windows of T tokens, in order.
// Window k covers inputs tokens[kT, kT + len) with len = min(T, n − kT): every
// token is an input exactly once. Targets are the next tokens; the position
// holding the last token of the stream has no next token and gets target −1
// (ignored by ref_cross_entropy), so the targets that are not −1 are
// tokens[1 .. n−1], each exactly once — n − 1 predictions in all, as in the
// usual perplexity evaluation. The last window may be partial: its positions
// from len to T − 1 are padding, x = 0 (a valid id) and y = −1. Each window
// starts with no context from the previous one.

typedef struct {
    const int32_t *tokens;  // (n), borrowed
    size_t n;
    int T;
    size_t pos;  // start of the next window
} phax_eval_iter;

// Needs n >= 1, T >= 1.
int phax_eval_iter_init(phax_eval_iter *it, const int32_t *tokens, size_t n, int T);
// Fill the next window. x, y: (T). Returns len (1..T, the positions that hold
// real inputs), or 0 when the stream is exhausted (x and y untouched).
int phax_eval_iter_next(phax_eval_iter *it, int32_t *x, int32_t *y);
// Number of windows: ceil(n / T).
size_t phax_eval_iter_count(const phax_eval_iter *it);

#endif
