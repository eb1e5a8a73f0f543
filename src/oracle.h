// The oracle's ops as functions, shared by `phax oracle` (src/oracle.c) and `phax check`
// (src/check.c): one op table, one parser of IN, one place the float64 truth is made.
#ifndef PHAX_SRC_ORACLE_H
#define PHAX_SRC_ORACLE_H

#include <stddef.h>
#include <stdint.h>

#include "phax/check.h"
#include "phax/names.h"
#include "phax/safetensors.h"

typedef struct {
    const char *name;
    int ndim;
    int64_t shape[PHAX_ST_MAX_NDIM];
    size_t n;
    const double *truth;  // float64, as `phax oracle` writes it
    const double *base;   // the precision baseline (NULL for an upstream gradient), rounded to nearest
    const double *base_sr[4];  // the same with stochastic rounding, four seeds (NULL: not made)
    const double *base_alt_sr[4];  // the same with stochastic rounding (NULL: not made)
    const double *base_alt;    // another sound algorithm's baseline, rounded to nearest (NULL: none):
                               // the bound takes the largest error of all of them
    double extra_err;  // the largest ||baseline - truth|| of the further stochastic roundings a tensor
                       // of few elements gets (oracle.c, sr_draws; 0: none)
    int draws;         // the baseline's roundings behind the bound (nearest and stochastic), per algorithm
    int upstream;         // 1: grad.<output>, the upstream gradient (an input, not judged)
} phax_oracle_tensor;

typedef struct phax_oracle_eval phax_oracle_eval;

// Another convention than IN's (phax check's diagnosis of a FAIL): attributes replaced (key[i] =
// value[i], as strings in IN's metadata would be), every upstream gradient IN does not give set
// to 1 instead of drawn, attention's RoPE with the interleaved pairing (2i, 2i+1), attention's
// scores times score_scale (> 0; 0 or 1: unchanged).
typedef struct {
    int n;
    const char *key[4], *value[4];
    int unit_upstream, rope_interleaved;
    double score_scale;
} phax_oracle_variant;

// Runs op on the tensors of IN (exactly as `phax oracle OP IN OUT` would) and, at precision
// pr, the op's straightforward baseline on the same inputs and upstream gradients. NULL with
// the reason in phax_error() (one line) on any failure, including an op without a baseline.
// max_mib > 0: the memory limit in MiB (`--max-memory`); otherwise the oracle's default.
// names (NULL: none): `--names`, IN's tensors renamed to phax's before anything reads them.
phax_oracle_eval *phax_oracle_eval_new(const char *op, const char *in_path, const phax_precision *pr,
                                       double max_mib, const phax_names *names);
// The same on an image in memory (n bytes, as IN's file would hold them); label stands for
// IN's path in messages.
phax_oracle_eval *phax_oracle_eval_new_mem(const char *op, const void *in, size_t n, const char *label,
                                           const phax_precision *pr, double max_mib);
// The truth alone (no baselines) of op on IN (in_path, or the image buf of n bytes labelled
// in_path) under the variant var (NULL: IN's own conventions).
phax_oracle_eval *phax_oracle_truth_new(const char *op, const char *in_path, const void *buf, size_t n,
                                        const phax_oracle_variant *var, double max_mib, const phax_names *names);
int phax_oracle_eval_count(const phax_oracle_eval *e);
const phax_oracle_tensor *phax_oracle_eval_tensor(const phax_oracle_eval *e, int i);
void phax_oracle_eval_free(phax_oracle_eval *e);
// `phax oracle OP IN OUT` in memory: runs op on the image in (n bytes; label stands for IN's
// path in messages) and returns in *out (malloc'd, the caller frees; *out_len bytes) exactly
// the bytes `phax oracle` writes to OUT. max_mib as above.
int phax_oracle_run_mem(const char *op, const void *in, size_t n, const char *label, double max_mib,
                        unsigned char **out, size_t *out_len);
// The ops `phax check` has a baseline for, space-separated.
const char *phax_oracle_checked_ops(void);

#endif
