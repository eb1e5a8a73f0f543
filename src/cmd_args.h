// The command line of every phax command, parsed and checked without touching a file: each
// command's options as a struct and its parser (src/<command>_args.c; phax train's in
// src/train_opts.c). A parser ends the process on bad input through cli_die / cli_exit
// (cli.h), which a fuzz harness hooks (tests/fuzz/fuzz_cli.c); a backend is kept by name and
// resolved by the command (cli_backend), so the parsers need no backend.
#ifndef PHAX_CMD_ARGS_H
#define PHAX_CMD_ARGS_H

#include <stdint.h>

#include "cli.h"
#include "phax/backend.h"
#include "phax/check.h"
#include "phax/niah.h"

#define PHAX_CMD_MAX_LIST 64  // items of a comma list (--lengths, --depths, --bins)
#define PHAX_EVAL_MAX_BUCKETS 40

// phax eval (src/eval.c)
typedef struct {
    const char *ckpt, *data_dir, *file, *split, *json_out, *csv_out, *cache_dir;
    const char *backend;         // --backend, by name
    const phax_backend_ops *be;  // ... resolved by the command
    int T, B, window, carry;
    int part;  // input.txt layout: 0 the whole file, 1 its first 90% (train), 2 its last 10%
    long max_tokens;
    int nb;
    long edges[PHAX_EVAL_MAX_BUCKETS + 1];  // bucket b: positions [edges[b], edges[b+1])
} eval_opts;
void eval_parse_args(int argc, char **argv, eval_opts *o);

// phax niah (src/niah.c)
typedef struct {
    const char *checkpoint, *data_dir, *text_path, *csv_path;
    int lengths[PHAX_CMD_MAX_LIST], n_lengths;
    double depths[PHAX_CMD_MAX_LIST];
    int n_depths;
    phax_niah_variant variants[PHAX_NIAH_N_ALL_VARIANTS];
    int n_variants;
    phax_niah_haystack haystacks[PHAX_NIAH_N_HAYSTACKS];
    int n_haystacks;
    int samples, window, no_header, n_multi, passkey_digits, verbose;
    uint64_t seed;
    const char *backend;         // --backend, by name
    const phax_backend_ops *be;  // ... resolved by the command
} niah_opts;
void niah_parse_args(int argc, char **argv, niah_opts *o);

// phax recall (src/recall.c)
typedef struct {
    const char *ckpt, *json_path, *csv_path;
    int lengths[PHAX_CMD_MAX_LIST], n_lengths;
    double depths[PHAX_CMD_MAX_LIST];
    int n_depths;
    int samples, pairs, queries, window;
    int mqar;                              // --task mqar: every query of a multi-query prompt, by distance bin
    int bins[PHAX_CMD_MAX_LIST], n_bins;  // --bins: distance bin edges (mqar)
    uint64_t seed;
    const char *backend;         // --backend, by name
    const phax_backend_ops *be;  // ... resolved by the command
} recall_opts;
void recall_parse_args(int argc, char **argv, recall_opts *o);

// phax generate (src/generate.c)
typedef struct {
    const char *ckpt, *prompt, *prompt_file, *backend;
    long ntok, top_k, window;
    double temp;
    uint64_t seed;
    int stats;
} gen_opts;
void generate_parse_args(int argc, char **argv, gen_opts *o);

// phax info (src/model_info.c): B, T 0 = not given.
typedef struct {
    const char *path;
    int B, T;
} info_opts;
void info_parse_args(int argc, char **argv, info_opts *o);

// phax demo (src/demo.c)
typedef struct {
    uint64_t seed;
    int T;
} demo_opts;
void demo_parse_args(int argc, char **argv, demo_opts *o);

// phax oracle (src/oracle.c): --list, OP --example OUT, or OP IN OUT with its options.
typedef struct {
    int list;
    const char *op, *in, *out, *example_out, *names;
    double max_mib;  // -1: the default limit
} oracle_opts;
void oracle_parse_args(int argc, char **argv, oracle_opts *o);

// phax check (src/check.c); its refusals exit 2. THEIRS may be given several times: one
// truth and one bound (the costly part) judge each in turn.
enum { CHECK_MAX_THEIRS = 16 };
typedef struct {
    const char *op, *in, *theirs[CHECK_MAX_THEIRS], *names;
    int ntheirs;
    const phax_precision *pr;  // --precision (check/round.c); f32 when not given
    int json;
    double max_mib;  // -1: the default limit
} check_opts;
void check_parse_args(int argc, char **argv, check_opts *o);

#endif
