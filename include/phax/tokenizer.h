// phax tokenizers: word level (the WikiText / PTB convention of pytorch's
// word_language_model) and byte level; vocabulary files; and a binary token
// cache keyed by the source file and the vocabulary.
//
// Word level. Text is split on ASCII whitespace (' ' \t \n \r \v \f); every
// '\n' adds one "<eos>" token after the words of its line. A final line without
// '\n' gives its words but no "<eos>" (pytorch's data.py would add one; the
// standard corpora all end in '\n', where the two agree). The bytes of a word
// are kept as they are (UTF-8 or not). A vocabulary built from a training
// text numbers the tokens in order of first occurrence, scanning the text
// from the start: the words of a line left to right, then "<eos>" when its
// '\n' is reached (so for WikiText-2, whose first line is blank, "<eos>" is
// id 0). A word missing from the vocabulary becomes "<unk>" when the
// vocabulary has it, else it is an error "FILE:LINE: word 'w' is not in the
// vocabulary (no <unk>)".
//
// Byte level. 256 tokens, token id = byte value; nothing is added.
//
// Ids are int32. Arrays returned through int32_t ** / char ** are malloc'd:
// release them with free().
#ifndef PHAX_TOKENIZER_H
#define PHAX_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "phax/core.h"

typedef enum { PHAX_TOK_WORD = 1, PHAX_TOK_BYTE = 2 } phax_tok_kind;

typedef struct phax_vocab phax_vocab;  // opaque

// --- vocabularies -----------------------------------------------------------------------
// Word vocabulary of a training corpus file (plain or .xz).
int phax_vocab_build_file(const char *train_path, phax_vocab **out);
// Word vocabulary of a text in memory; name is used in messages.
int phax_vocab_build_text(const uint8_t *text, size_t n, const char *name, phax_vocab **out);
// The same with at most max_words words (0 = no cap): "<eos>", then the most
// frequent words (ties: first seen first) in first-seen order, and "<unk>" (the
// text's own or added last), which every other word becomes. max_words >= 3.
int phax_vocab_build_text_max(const uint8_t *text, size_t n, const char *name, size_t max_words,
                              phax_vocab **out);
int phax_vocab_build_file_max(const char *train_path, size_t max_words, phax_vocab **out);
// The 256-token byte vocabulary.
int phax_vocab_byte(phax_vocab **out);
void phax_vocab_free(phax_vocab *v);

phax_tok_kind phax_vocab_kind(const phax_vocab *v);
size_t phax_vocab_size(const phax_vocab *v);
// The spelling of a token (NUL-terminated; *len, if given, is its length in
// bytes, which matters only for words that hold NUL bytes), or NULL for an id
// out of range. Byte tokens are spelled as two lowercase hex digits ("0a").
const char *phax_vocab_token(const phax_vocab *v, int32_t id, size_t *len);
// Id of a word (word vocabularies), or −1 when absent.
int32_t phax_vocab_id(const phax_vocab *v, const char *word, size_t len);
int32_t phax_vocab_unk(const phax_vocab *v);  // id of "<unk>", or −1
int32_t phax_vocab_eos(const phax_vocab *v);  // id of "<eos>", or −1
// 64-bit FNV-1a of the vocabulary's file form (what phax_vocab_save writes).
uint64_t phax_vocab_hash(const phax_vocab *v);

// Vocabulary file: a header line "phax-vocab word N" or "phax-vocab byte 256",
// then one token per line in id order (byte tokens as two hex digits, "00" ..
// "ff"). Written atomically. Loading rejects a bad header, a count that does
// not match the lines, an empty token, a token holding whitespace, a duplicate
// token, and (byte) any line other than the expected hex digits — each with
// "FILE:LINE: what".
int phax_vocab_save(const phax_vocab *v, const char *path);
int phax_vocab_load(const char *path, phax_vocab **out);
// The same for a vocabulary that must hold `count` tokens (a checkpoint's vocab_size): the
// header's count is compared first, and at most ~1 KiB per token (1 MiB at least) is read
// or decompressed, so the cost is what count allows.
int phax_vocab_load_expect(const char *path, long long count, phax_vocab **out);

// --- encoding and decoding --------------------------------------------------------------
// Encode a text; name (e.g. the file path) is used in the unknown-word error.
int phax_encode(const phax_vocab *v, const uint8_t *text, size_t n, const char *name,
                int32_t **out, size_t *n_out);
// Encode a whole corpus file (plain or .xz).
int phax_encode_file(const phax_vocab *v, const char *path, int32_t **out, size_t *n_out);
// Encode a prompt string (for phax generate); errors name the source "prompt".
int phax_encode_prompt(const phax_vocab *v, const char *prompt, int32_t **out, size_t *n_out);
// Ids back to text. Word: tokens joined by single spaces, "<eos>" written as
// '\n' (no space around it). Byte: the raw bytes. *out is NUL-terminated,
// *len (if given) is its length. An id outside the vocabulary is an error.
int phax_decode(const phax_vocab *v, const int32_t *ids, size_t n, char **out, size_t *len);

// --- token cache ------------------------------------------------------------------------
// Tokens of source_path under v, through a cache file in cache_dir (created if
// missing) named "<source basename>.<8 hex: source path>.<16 hex: vocab hash>.tok".
// Cache file, all integers little-endian:
//   0  "PHAXTOK\0"          8 bytes magic
//   8  u32 version (1), 12 u32 tokenizer kind
//   16 u64 vocab hash, 24 u64 vocab size
//   32 u64 source size on disk, 40 i64 source mtime s, 48 i64 mtime ns
//   56 u64 FNV-1a of the source bytes as stored (for .xz: the compressed bytes)
//   64 u64 token count N, 72 u64 FNV-1a of the token payload
//   80 N × i32 tokens
// A cache is used when the magic, version, kind, vocab hash and size, source
// size and source hash all match, the file length is exactly 80 + 4N, the
// payload hash matches and every id is inside the vocabulary. The mtime is
// recorded but not required to match: a touched but unchanged source keeps
// its cache. Otherwise the source is tokenized again and the cache rewritten
// atomically. The header is checked against the file's size (and N against
// phax_data_max_bytes(): a token needs a byte of text) before anything is
// allocated, the payload is read straight into the token array, and a cache
// is written from the token array itself: neither holds a second copy of the
// stream. A source decoded to build a cache is checked against its SHA256SUMS
// (phax_data_verify).
typedef enum {
    PHAX_CACHE_HIT = 0,      // read from the cache
    PHAX_CACHE_MISSING = 1,  // no cache file: built
    PHAX_CACHE_STALE = 2,    // the source or vocabulary changed: rebuilt
    PHAX_CACHE_CORRUPT = 3,  // unreadable, truncated or damaged cache: rebuilt
} phax_cache_result;

int phax_tokens_load_cached(const phax_vocab *v, const char *source_path, const char *cache_dir,
                            int32_t **out, size_t *n);
// The same, also saying what happened (result may be NULL) and the cache
// file's path (cache_path may be NULL; else a malloc'd string).
int phax_tokens_load_cached_ex(const phax_vocab *v, const char *source_path,
                               const char *cache_dir, int32_t **out, size_t *n,
                               phax_cache_result *result, char **cache_path);

// A source's identity as a training state stores it: its size in bytes and the FNV-1a of
// those bytes as stored (for .xz: the compressed bytes).
typedef struct {
    uint64_t bytes, fnv1a;
} phax_source_identity;
// phax_tokens_load_cached, refusing (before any cache is read or written) when the bytes it
// read are not `want`: the check is on what was read, so a file swapped after the caller's
// own check cannot reach a cache (phax train --resume).
int phax_tokens_load_expected(const phax_vocab *v, const char *source_path, const char *cache_dir,
                              const phax_source_identity *want, int32_t **out, size_t *n);

#endif
