// phax associative recall: a synthetic task for the SWAX window study
// (docs/recall.md). A haystack of filler tokens holds P needles "key value";
// queries "key value" follow it, and the model is scored on the value after
// each query key. Pure functions of their arguments (no I/O, no global state);
// the only memory they touch is the caller's buffers.
//
// Vocabulary (a phax word vocabulary of 64 tokens, no <eos> or <unk>):
//     ids  0..15  keys    "k0".."k15"
//     ids 16..31  values  "v0".."v15"
//     ids 32..63  fillers "f0".."f31"
//
// A sample of n tokens with P pairs (1 ≤ P ≤ 16) and Q queries (1 ≤ Q ≤ P):
//     haystack: H = n − 2Q tokens = P needles (2 tokens each) and H − 2P fillers
//     queries:  2Q tokens "key value", the keys of Q distinct needles, in random order
// Keys are P distinct keys, values P distinct values (drawn without replacement),
// fillers uniform over the 32 fillers. The haystack is a sequence of N = H − P
// items (H − 2P fillers and P needles); the needles' item indices are a uniform
// random P-subset of 0..N−1, so needles never overlap and every arrangement is
// equally likely.
//
// Every function returns PHAX_OK, or PHAX_ERR with a one-line message in
// phax_error(); nothing here exits or allocates.
#ifndef PHAX_RECALL_H
#define PHAX_RECALL_H

#include <stddef.h>
#include <stdint.h>

#include "phax/core.h"
#include "phax/tokenizer.h"

#define PHAX_RECALL_N_KEYS 16
#define PHAX_RECALL_N_VALUES 16
#define PHAX_RECALL_N_FILLERS 32
#define PHAX_RECALL_VOCAB 64       // tokens of the vocabulary
#define PHAX_RECALL_KEY0 0         // id of "k0"
#define PHAX_RECALL_VALUE0 16      // id of "v0"
#define PHAX_RECALL_FILLER0 32     // id of "f0"
#define PHAX_RECALL_MAX_PAIRS 16   // at most one needle per key (and per value)
#define PHAX_RECALL_MAX_LEN (1 << 26)  // the longest row or prompt, in tokens

// The recall vocabulary (phax_vocab_build_text of "k0 … k15 v0 … v15 f0 … f31";
// free with phax_vocab_free).
int phax_recall_vocab(phax_vocab **out);
// PHAX_OK when v is the recall vocabulary (word kind, the 64 spellings in id
// order), else PHAX_ERR with a message saying what differs.
int phax_recall_vocab_check(const phax_vocab *v);

// The shortest training row (T ≥ 2P + 2Q − 1: the sample of T + 1 tokens
// needs a haystack of 2P) and the shortest evaluation prompt (L ≥ 2P + 1).
// Errors for P or Q out of range.
int phax_recall_min_row(int pairs, int queries, int *out);
int phax_recall_min_prompt(int pairs, int *out);

// Where the needles and queries of a sample went. Needle i: key[i], value[i]
// (token ids), the key at token pos[i] and the value at pos[i] + 1; needles are
// listed in text order (pos increasing). Query j asks needle query[j]: its key
// is at token H + 2j.
typedef struct {
    int n_pairs, n_queries;
    int haystack_len;  // H
    int32_t key[PHAX_RECALL_MAX_PAIRS], value[PHAX_RECALL_MAX_PAIRS];
    int pos[PHAX_RECALL_MAX_PAIRS];
    int query[PHAX_RECALL_MAX_PAIRS];
} phax_recall_layout;

// --- training rows -----------------------------------------------------------------------
// The sample of T + 1 tokens drawn from phax_rng_stream(seed, index) alone, as
// a row: x[t] = s[t] for t < T (the last query's value is left out), y[t] =
// s[t + 1] where s[t] is a query key (the queried value), −1 elsewhere: only
// the answers are trained. x, y: (T). lay may be NULL. Errors: P or Q out of
// range, T < phax_recall_min_row or T > PHAX_RECALL_MAX_LEN.
int phax_recall_train_sample(uint64_t seed, uint64_t index, int pairs, int queries, int T,
                             int32_t *x, int32_t *y, phax_recall_layout *lay);

// --- evaluation prompts ------------------------------------------------------------------
typedef struct {
    int length;      // L: prompt tokens, the query key last
    int pairs;       // P
    double depth;    // [0, 1]: where the queried needle goes in the haystack
    uint64_t seed;   // everything else
} phax_recall_spec;

typedef struct {
    int32_t key;     // the queried key (tokens[L − 1])
    int32_t answer;  // its value: the expected next token
    int needle_at;   // token index of the queried needle's key
    int distance;    // (L − 1) − needle_at: tokens from the needle's key to the query key
    phax_recall_layout layout;
} phax_recall_prompt;

// The sample of L + 1 tokens with Q = 1 drawn from phax_rng_new(seed), without
// its last token (the answer): tokens: (L). The queried needle is item
// round(depth · (N − 1)) of the haystack's N = (L − 1) − P items, so depth 0
// puts its key at token 0 and depth 1 at token L − 3, just before the query;
// the other needles are a uniform random (P − 1)-subset of the other items.
// Between, the needle's token index is round(depth · (N − 1)) plus the number
// of other needles before it. Errors: P out of range, depth outside [0, 1] or
// NaN, L < phax_recall_min_prompt or L > PHAX_RECALL_MAX_LEN.
int phax_recall_prompt_build(const phax_recall_spec *spec, int32_t *tokens, phax_recall_prompt *out);

// --- multi-query associative recall (MQAR) -----------------------------------------------
// A Zoology-style task (Arora et al. 2023) on the same vocabulary: the P pairs
// "key value" open the sample (pair i at tokens 2i, 2i + 1), then a region of
// fillers holds Q queries "key value" at uniformly random, non-overlapping
// places; every query is scored (the value after its key). The queries ask Q
// distinct pairs (without replacement), so no query can be answered by copying
// an earlier query's answer; with the earlier answers visible, the best a model
// without key→value binding can do on query j is a random pick among the P − j
// values not yet answered: phax_mqar_floor. Distance of query j: tokens from
// its pair's key to the query's key, qpos[j] − 2·qpair[j].
//
// A sample of n tokens (n ≥ 2P + 2Q) drawn from one SplitMix64 stream in this
// order: keys (partial Fisher–Yates of the 16), values (the same), the pairs
// the queries ask (a partial Fisher–Yates of 0..P−1, in query order), the
// query places (a uniform Q-subset of the N = n − 2P − Q region items, Floyd's
// algorithm, sorted), the fillers.
typedef struct {
    int n_pairs, n_queries;
    int32_t key[PHAX_RECALL_MAX_PAIRS], value[PHAX_RECALL_MAX_PAIRS];  // pair i: tokens 2i, 2i + 1
    int qpos[PHAX_RECALL_MAX_PAIRS];      // token index of query j's key (increasing in j)
    int qpair[PHAX_RECALL_MAX_PAIRS];     // the pair query j asks
    int distance[PHAX_RECALL_MAX_PAIRS];  // qpos[j] − 2·qpair[j]
} phax_mqar_layout;

// The shortest MQAR sample, 2P + 2Q tokens, and the shortest training row, one
// less (a row is a sample without its last token). Errors for P, Q out of range.
int phax_mqar_min_len(int pairs, int queries, int *out);
int phax_mqar_min_row(int pairs, int queries, int *out);
// The elimination floor of query j (0-based, in text order): 1 / (P − j), and of a
// prompt: its mean over j < Q (NaN for P, Q or j out of range).
double phax_mqar_query_floor(int pairs, int j);
double phax_mqar_floor(int pairs, int queries);
// The sample of n tokens drawn from phax_rng_new(seed): tokens: (n); lay may be NULL.
// Errors: P, Q out of range, n < phax_mqar_min_len or n > PHAX_RECALL_MAX_LEN.
int phax_mqar_sample(uint64_t seed, int n, int pairs, int queries, int32_t *tokens, phax_mqar_layout *lay);
// A training row: the sample of T + 1 tokens drawn from phax_rng_stream(seed,
// index); x[t] = s[t] (t < T), y[qpos[j]] = the value of query j, −1 elsewhere.
// x, y: (T). vary ≠ 0, a curriculum of easier rows: the row's pair count is
// drawn first from the same stream, uniform in 1..P, its queries are
// min(Q, ⌈that / 2⌉) (at most half the pairs asked, so that answering by
// elimination — the last of all pairs is the value left — stays a weak
// shortcut), and the queries go among the first M region items, M uniform
// in [Q, N] (N = T + 1 − 2P − Q), so that short key-to-query distances (a
// strong gradient for the lookup while the memory still forgets) mix with long
// ones up to T.
// Errors as phax_mqar_sample (T + 1 tokens).
int phax_mqar_train_sample(uint64_t seed, uint64_t index, int pairs, int queries, int vary, int T,
                           int32_t *x, int32_t *y, phax_mqar_layout *lay);

#endif
