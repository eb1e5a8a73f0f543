// phax needle-in-a-haystack (after RULER, Hsieh et al. 2024): prompts built
// directly in token space for a word or byte vocabulary, the RULER
// string_match_all score, and training rows of the same task. docs/niah.md
// gives the exact texts, layout and scoring rules; this header the API.
//
// A prompt of exactly `length` tokens is
//     [header NL] haystack-with-needles NL question answer-prefix
// and the model continues after the answer prefix ("... mentioned in the
// provided text is"). Needle: "One of the special magic numbers for KEY is:
// VALUE." with a 7-digit VALUE (first digit 1-9).
//
// Word vocabularies (WikiText style): every text is written in the tokenized
// form ("is : 4 0 1 9 2 7 3 .": punctuation split off, the value as seven
// single-digit words), so the ten digit words "0".."9" must be in the
// vocabulary. Keys are drawn from a fixed list of common English nouns, keeping
// those the vocabulary holds. Other template words that the vocabulary lacks
// become "<unk>" (phax_niah_unknown_words lists them), or are an error when it
// has no "<unk>". NL is "<eos>" (left out when the vocabulary has none).
// Byte vocabularies: the plain English text, "is: 4019273.", NL = '\n'.
//
// The passkey variant (not RULER's suite; docs/niah.md) is a short retrieval task
// that small word-level models can learn: one needle "The pass key is D D ." with a
// value of passkey_digits digits (default 2, leading zeros allowed), asked as
// "What is the pass key ? The pass key is". It is scored by exact match of the
// digits, and every variant gets a graded score too: the mean log-probability of
// the canonical answer's digit tokens under teacher forcing (phax_niah_graded).
//
// Every function returns PHAX_OK, or PHAX_ERR with a one-line message in
// phax_error(); nothing here exits. A task is only read after phax_niah_new, so
// several threads may build prompts and training rows from one task at once.
#ifndef PHAX_NIAH_H
#define PHAX_NIAH_H

#include <stddef.h>
#include <stdint.h>

#include "phax/core.h"
#include "phax/tokenizer.h"

typedef enum {
    PHAX_NIAH_SINGLE = 0,      // one needle, its key queried
    PHAX_NIAH_MULTIKEY = 1,    // the queried needle + n_multi−1 needles with other keys
    PHAX_NIAH_MULTIVALUE = 2,  // n_multi needles with the same key: all values expected
    PHAX_NIAH_MULTIQUERY = 3,  // n_multi needles with different keys, all queried
    PHAX_NIAH_PASSKEY = 4,     // one "The pass key is D D ." needle, no key; exact match
} phax_niah_variant;
#define PHAX_NIAH_N_VARIANTS 4      // RULER's four: the default suite and training mix
#define PHAX_NIAH_N_ALL_VARIANTS 5  // and passkey

typedef enum {
    PHAX_NIAH_NOISE = 0,    // RULER's noise sentences, repeated
    PHAX_NIAH_TEXT = 1,     // consecutive tokens of the text given to phax_niah_new
    PHAX_NIAH_NEEDLES = 2,  // distractor needles (keys that are never queried)
} phax_niah_haystack;
#define PHAX_NIAH_N_HAYSTACKS 3

#define PHAX_NIAH_DIGITS 7      // digits of a value (the most a passkey may have)
#define PHAX_NIAH_PASSKEY_DIGITS 2  // digits of a passkey value by default
#define PHAX_NIAH_MAX_MULTI 16  // largest n_multi
#define PHAX_NIAH_GEN_SLACK 4   // tokens generated beyond the canonical answer

// "single", "multikey", "multivalue", "multiquery", "passkey" / "noise", "text", "needles".
const char *phax_niah_variant_name(phax_niah_variant v);
const char *phax_niah_haystack_name(phax_niah_haystack h);
int phax_niah_variant_parse(const char *s, phax_niah_variant *out);
int phax_niah_haystack_parse(const char *s, phax_niah_haystack *out);
// A comma list of variant names as a mask of bits (1u << variant), e.g. for
// phax_niah_opts.train_variants. Error on an unknown or repeated name or an empty list.
int phax_niah_variant_list_parse(const char *s, unsigned *mask);
// A passkey digit count as the commands take it: a whole number in [1, PHAX_NIAH_DIGITS].
int phax_niah_digits_parse(const char *s, int *out);

// Options; all zero = the defaults.
typedef struct {
    int no_header;  // 1: leave out RULER's instruction line (saves ~30 words / ~140 bytes)
    int n_multi;    // needles of the multi-variants, 2..PHAX_NIAH_MAX_MULTI (0 = 4, RULER's)
    int passkey_digits;       // digits of a passkey value, 1..PHAX_NIAH_DIGITS (0 = 2)
    unsigned train_variants;  // bits (1u << variant): the variants training rows draw from,
                              // uniformly (0 = RULER's four)
} phax_niah_opts;

typedef struct phax_niah phax_niah;  // a task: vocabulary, encoded templates, keys

// v and text are borrowed and must outlive the task. text: (n_text) token ids of
// the haystack text (e.g. the validation split encoded with v), or NULL / 0 when
// the text haystack will not be used. opts may be NULL. Errors: a word vocabulary
// without the digit words, template words missing with no "<unk>", fewer than
// n_multi + 1 key words in the vocabulary, an id in text outside the vocabulary,
// passkey_digits outside [1, 7] (0: the default, 2), train_variants naming no variant, or naming passkey
// with a word vocabulary that lacks a passkey word ("pass", "key", ...). Passkey
// prompts of a task whose vocabulary lacks those words fail at phax_niah_build.
int phax_niah_new(const phax_vocab *v, const int32_t *text, size_t n_text,
                  const phax_niah_opts *opts, phax_niah **out);
void phax_niah_free(phax_niah *t);
// Template words the word vocabulary lacks (they are encoded as "<unk>"), as
// "'w1', 'w2'", or "" when there are none.
const char *phax_niah_unknown_words(const phax_niah *t);
int phax_niah_n_keys(const phax_niah *t);          // key words available
const char *phax_niah_key(const phax_niah *t, int i);
// The shortest prompt length every prompt of this variant fits in (an empty haystack
// with the longest keys); a shorter length is the error "too short".
int phax_niah_min_length(const phax_niah *t, phax_niah_variant v, int *out);

// One evaluation prompt.
typedef struct {
    phax_niah_variant variant;
    phax_niah_haystack haystack;
    int length;    // prompt tokens, exactly
    double depth;  // [0, 1]: where the first needle goes, as a fraction of the haystack
    uint64_t seed; // keys, values, other needles' depths, text offset
} phax_niah_spec;

typedef struct {
    phax_niah_variant variant;
    int32_t *tokens;  // (n_tokens) the prompt, n_tokens == spec.length
    size_t n_tokens;
    int n_values;     // expected values, as digit strings (7 digits; passkey: passkey_digits)
    char **values;    // (n_values), in the order of the canonical answer
    int n_keys;       // queried keys (1, n_multi for multiquery, 0 for passkey)
    const char **keys;  // (n_keys), borrowed from the task
    int32_t *answer;  // (n_answer) the canonical continuation, e.g. " 4019273." (byte)
    size_t n_answer;
    int n_gen;        // tokens to generate: n_answer + PHAX_NIAH_GEN_SLACK
    size_t needle_at; // index in tokens of the first token of the needle placed at depth
    size_t haystack_at, haystack_len;  // the haystack span (filler + needles) in tokens
    size_t distance;  // (n_tokens − 1) − needle_at: from the needle to the last prompt token
    unsigned char *answer_digit;  // (n_answer) 1 where answer[i] is a digit of a value
    int n_answer_digits;          // the ones set (what the graded score averages over)
} phax_niah_prompt;

int phax_niah_build(const phax_niah *t, const phax_niah_spec *spec, phax_niah_prompt *out);
void phax_niah_prompt_free(phax_niah_prompt *p);

// --- scoring: RULER string_match_all -------------------------------------------------------
// Fraction of the values that occur as substrings of the continuation text,
// compared case-insensitively. Word vocabularies: all ASCII whitespace is first
// removed from the text (decoding joins words by spaces, so "4 0 1 9 2 7 3"
// reads "4019273"). Byte vocabularies: the text is used as it is, so a value is
// found only with its digits adjacent. 0 when n_values < 1.
double phax_niah_match(phax_tok_kind kind, const char *text, size_t len,
                       const char *const *values, int n_values);
// Exact match of one value (passkey): after the leading whitespace (word
// vocabularies: all whitespace) the text starts with the value's digits and no
// further digit follows. 1 or 0.
double phax_niah_match_exact(phax_tok_kind kind, const char *text, size_t len, const char *value);
// Decode ids with v and score them against the prompt's values: string_match_all,
// or phax_niah_match_exact for a passkey prompt.
int phax_niah_score(const phax_vocab *v, const int32_t *ids, size_t n,
                    const phax_niah_prompt *p, double *score);

// --- graded score: log-probability of the answer under teacher forcing -------------------
// log softmax(logits)[id], computed in double (max-shifted). −inf when the softmax
// underflows; NaN when a logit is NaN.
double phax_niah_logprob(const float *logits, int V, int32_t id);
// The mean, over the canonical answer's digit tokens (p->answer_digit), of
// log p(answer[i] | prompt, answer[0..i−1]). logits: (p->n_answer, V), row i the
// model's logits after the prompt and answer[0..i−1] (row 0: after the last
// prompt token). Error when the answer has no digit token.
int phax_niah_graded(const phax_niah_prompt *p, const float *logits, int V, double *out);

// --- training rows ---------------------------------------------------------------------------
// A NIAH example drawn from (seed, index) alone: variant (uniform over the task's
// train_variants), haystack (noise, needles unless passkey, and text when the task
// has text; uniform), depth in [0, 1], keys,
// values, and a total length uniform in [max(shortest, ⌈T/2⌉), T]. The sequence
// s = prompt + canonical answer + NL (n tokens, n ≤ T) fills the row:
// x[t] = s[t], y[t] = s[t+1] for t < n−1; y[n−1] = −1; positions t ≥ n are
// padding, x = 0 and y = −1. Every position with a target is trained (haystack
// included), so the model learns to copy the values after the answer prefix.
typedef struct {
    int n;           // tokens of the example
    int prompt_len;  // tokens before the answer
    phax_niah_variant variant;
    phax_niah_haystack haystack;
    double depth;
    int needle_at;   // token index of the needle placed at depth
} phax_niah_sample_info;

// x, y: (T). info may be NULL. Error when T cannot hold the shortest example.
int phax_niah_train_sample(const phax_niah *t, uint64_t seed, uint64_t index, int T,
                           int32_t *x, int32_t *y, phax_niah_sample_info *info);

#endif
