// The oracle's private parts (src/oracle*.c): the context an op runs in, its helpers, and the
// ops and example writers the table of src/oracle.c names.
//   oracle_ctx.c       sizes and memory budgets, attributes, tensors in and out, upstream gradients
//   oracle_ops.c       one adapter per op: IN's tensors to ref/ (the truth) and check/ (the baselines)
//   oracle_examples.c  a random valid IN for each op (`phax oracle OP --example IN`)
//   oracle.c           the op table, IN's names checked, the evaluations of phax check, `phax oracle`
#ifndef PHAX_SRC_ORACLE_CTX_H
#define PHAX_SRC_ORACLE_CTX_H

#include <stddef.h>
#include <stdint.h>

#include "phax/core.h"
#include "phax/safetensors.h"
#include "oracle.h"

// Limits on what an input may ask for (docs/oracle.md, "Limits").
#define ORACLE_MAX_T 65536                  // dss_kernel's attribute T: the longest sequence phax trains on
#define ORACLE_BASE_BYTES ((size_t)96 << 20)  // default memory limit: 96 MiB ...
#define ORACLE_INPUT_FACTOR 16              // ... plus 16x the input's tensors in float64

typedef struct {
    const char *path;  // IN, for messages
    const char *op;    // the op's name, for messages
    phax_st_file in;
    phax_st_writer *out;
    phax_rng rng;  // random upstream gradients (metadata "seed", default 0)
    size_t limit;  // bytes an op may plan to allocate (see budget())
    void **allocs;  // every allocation of the run, freed together (grows: a model has many tensors)
    int nallocs, capallocs;
    // phax check: out is NULL, and every output, gradient and upstream gradient is kept in
    // col (its truth by put, its baseline at precision prec by put_base).
    const phax_precision *prec;
    phax_oracle_tensor *col;
    int ncol, capcol;
    const phax_names *names;  // --names: IN's tensors renamed to phax's, OUT's named back
    // phax check's diagnosis (phax_oracle_truth_new): the truth under another convention.
    const phax_oracle_variant *var;  // NULL: IN's own conventions
} octx;

// The baseline's stochastic roundings beside the one to nearest (oracle.c's eval_new;
// ox_budget_check_alt counts them).
#define SR_RUNS 4

#define TRY(x)                        \
    do {                              \
        if ((x)) return PHAX_ERR;     \
    } while (0)
#define TRYP(p)                       \
    do {                              \
        if (!(p)) return PHAX_ERR;    \
    } while (0)

const char *ox_meta(octx *c, const char *key);
size_t ox_smul(size_t a, size_t b);
size_t ox_sadd(size_t a, size_t b);
const char *ox_shown(const char *s, char *buf, size_t n);
int ox_budget_check_alt(octx *c, size_t doubles, size_t check_doubles, size_t alt_doubles);
int ox_budget_check(octx *c, size_t doubles, size_t check_doubles);
int ox_budget(octx *c, size_t doubles);
void *ox_keep(octx *c, void *p);
double *ox_dalloc(octx *c, size_t n);
size_t ox_numel(int ndim, const int64_t *s);
int ox_attr_long(octx *c, const char *key, long def, long lo, long hi, long *v);
int ox_attr_int(octx *c, const char *key, int def, int lo, int hi, int *v);
int ox_attr_double(octx *c, const char *key, double def, double *v);
int ox_attr_choice(octx *c, const char *key, const char *const *choices, int def, int *v);
int ox_shape_of(octx *c, const char *name, int lo, int hi, int *ndim, int64_t *shape);
double *ox_getf(octx *c, const char *name, int ndim, const int64_t *shape);
int32_t *ox_geti(octx *c, const char *name, int ndim, const int64_t *shape);
int ox_put(octx *c, const char *name, const double *x, int ndim, const int64_t *shape);
phax_oracle_tensor *ox_col_of(octx *c, const char *name);
int ox_put_base(octx *c, const char *name, double *x);
int ox_put_alt(octx *c, const char *name, double *x);
double *ox_upstream(octx *c, const char *out, int ndim, const int64_t *shape);
void ox_rows_cols(int ndim, const int64_t *s, size_t *rows, int *cols);

// The ops and example writers of the table (oracle_ops.c, oracle_examples.c).
typedef struct {
    phax_st_writer *w;
    phax_rng *r;
    int err;
} exw;
int op_embedding(octx *c);
int op_linear(octx *c);
int op_rmsnorm(octx *c);
int op_layernorm(octx *c);
int op_headnorm(octx *c);
int op_gelu(octx *c);
int op_silu(octx *c);
int op_swiglu(octx *c);
int op_rope(octx *c);
int op_attention(octx *c);
int op_dss_kernel(octx *c);
int op_ssm_conv(octx *c);
int op_ssm_recurrent(octx *c);
int op_mlstm(octx *c);
int op_gdn(octx *c);
int op_mix(octx *c);
int op_cross_entropy(octx *c);
int op_adamw(octx *c);
int op_model(octx *c);
void ex_embedding(exw *e);
void ex_linear(exw *e);
void ex_rmsnorm(exw *e);
void ex_layernorm(exw *e);
void ex_headnorm(exw *e);
void ex_act(exw *e);
void ex_swiglu(exw *e);
void ex_rope(exw *e);
void ex_attention(exw *e);
void ex_dss_kernel(exw *e);
void ex_ssm_conv(exw *e);
void ex_ssm_recurrent(exw *e);
void ex_mlstm(exw *e);
void ex_gdn(exw *e);
void ex_mix(exw *e);
void ex_cross_entropy(exw *e);
void ex_adamw(exw *e);
void ex_model(exw *e);

#endif
