// `phax oracle OP IN.safetensors OUT.safetensors`: run one op (or a whole
// model) of the float64 ref tier on the tensors in IN and write every output
// and every gradient to OUT. Inputs may be F64, F32, BF16 or F16 (promoted to
// float64); token ids and targets any integer type. See docs/oracle.md.
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "phax/model.h"
#include "phax/model_plan.h"
#include "phax/names.h"
#include "phax/ref.h"
#include "phax/ref_model.h"
#include "phax/safetensors.h"
#include "cmd_args.h"
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

// An attribute: the variant's value where it sets this key, else IN's metadata (NULL: absent).
static const char *meta(octx *c, const char *key) {
    if (c->var)
        for (int i = 0; i < c->var->n; i++)
            if (!strcmp(c->var->key[i], key)) return c->var->value[i];
    return phax_st_meta(&c->in, key);
}

// --- sizes: saturating, so an absurd shape or attribute reads as "too large", never wraps ----
static size_t smul(size_t a, size_t b) { return b && a > SIZE_MAX / b ? SIZE_MAX : a * b; }
static size_t sadd(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

// A user-supplied name or key as it may appear in a one-line message: printable
// ASCII kept, anything else as \xNN, at most ~60 characters shown.
static const char *shown(const char *s, char *buf, size_t n) {
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && o + 8 < n; p++) {
        if (o >= 60) {
            memcpy(buf + o, "...", 3), o += 3;
            break;
        }
        if (*p >= 0x20 && *p < 0x7f) buf[o++] = (char)*p;
        else o += (size_t)snprintf(buf + o, n - o, "\\x%02x", *p);
    }
    buf[o] = 0;
    return buf;
}

// Every op plans its memory before it allocates anything: the float64 elements
// of every array it will hold at once (inputs converted to float64, outputs,
// gradients, upstream gradients, the ref kernels' scratch) plus the copy the
// output writer keeps of each array written. An input whose plan exceeds the
// limit is refused here, in one line, before any allocation or computation.
// phax check adds what the baseline holds (check_doubles); most ops' baselines hold as much
// again as the truth (budget), the model's its own count (op_model); and it holds 1 + SR_RUNS
// such runs at once (the baseline rounded to nearest and stochastically: eval_new), each with
// another sound algorithm's baseline where the op has one (alt_doubles).
#define SR_RUNS 4
static int budget_check_alt(octx *c, size_t doubles, size_t check_doubles, size_t alt_doubles) {
    if (c->prec) doubles = smul(sadd(sadd(doubles, check_doubles), alt_doubles), 1 + SR_RUNS);
    size_t bytes = smul(doubles, sizeof(double));
    if (bytes <= c->limit) return PHAX_OK;
    if (bytes == SIZE_MAX)
        return phax_fail("%s: op '%s' on these shapes and attributes would need more memory than can be counted; "
                         "check the sizes", c->path, c->op);
    return phax_fail("%s: op '%s' on these shapes and attributes would need %.1f MiB, more than the limit of %.1f MiB "
                     "(see docs/oracle.md; --max-memory MIB raises it)", c->path, c->op, (double)bytes / (1 << 20),
                     (double)c->limit / (1 << 20));
}

static int budget_check(octx *c, size_t doubles, size_t check_doubles) {
    return budget_check_alt(c, doubles, check_doubles, 0);
}
static int budget(octx *c, size_t doubles) { return budget_check(c, doubles, doubles); }

static void *keep(octx *c, void *p) {
    if (!p) return NULL;
    if (c->nallocs == c->capallocs) {
        int cap = c->capallocs ? 2 * c->capallocs : 64;
        void **a = realloc(c->allocs, (size_t)cap * sizeof *a);
        if (!a) {
            free(p);
            return NULL;
        }
        c->allocs = a, c->capallocs = cap;
    }
    return c->allocs[c->nallocs++] = p;
}

static double *dalloc(octx *c, size_t n) {
    double *p = keep(c, calloc(n ? n : 1, sizeof(double)));
    if (!p) phax_fail("oracle: out of memory (%zu doubles)", n);
    return p;
}

static size_t numel(int ndim, const int64_t *s) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n = smul(n, (size_t)s[i]);
    return n;
}

// --- attributes (strings in __metadata__) ------------------------------------------------
// Every attr_* sets *v to the default first, so *v is defined on every path
// (and gcc -O2 has no maybe-uninitialized to report at the callers).
static int attr_long(octx *c, const char *key, long def, long lo, long hi, long *v) {
    const char *s = meta(c, key);
    *v = def;
    if (!s) return PHAX_OK;
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    char b[256];
    if (errno || end == s || *end)
        return phax_fail("%s: attribute '%s' must be an integer, got '%s'", c->path, key, shown(s, b, sizeof b));
    if (x < lo || x > hi) return phax_fail("%s: attribute '%s' = %ld is outside [%ld, %ld]", c->path, key, x, lo, hi);
    *v = x;
    return PHAX_OK;
}

static int attr_int(octx *c, const char *key, int def, int lo, int hi, int *v) {
    long x;
    *v = def;
    if (attr_long(c, key, def, lo, hi, &x)) return PHAX_ERR;
    *v = (int)x;
    return PHAX_OK;
}

static int attr_double(octx *c, const char *key, double def, double *v) {
    const char *s = meta(c, key);
    *v = def;
    if (!s) return PHAX_OK;
    char *end;
    double x = strtod(s, &end);
    char b[256];
    if (end == s || *end || !isfinite(x))
        return phax_fail("%s: attribute '%s' must be a finite number, got '%s'", c->path, key, shown(s, b, sizeof b));
    *v = x;
    return PHAX_OK;
}

// Index of the attribute's value in `choices` (NULL-terminated); def if absent.
static int attr_choice(octx *c, const char *key, const char *const *choices, int def, int *v) {
    const char *s = meta(c, key);
    *v = def;
    if (!s) return PHAX_OK;
    for (int i = 0; choices[i]; i++)
        if (!strcmp(s, choices[i])) {
            *v = i;
            return PHAX_OK;
        }
    char b[256];
    return phax_fail("%s: attribute '%s' = '%s' is not one of the allowed values", c->path, key, shown(s, b, sizeof b));
}

// --- tensors -------------------------------------------------------------------------------
// Shape of a tensor that must exist with ndim in [lo, hi].
static int shape_of(octx *c, const char *name, int lo, int hi, int *ndim, int64_t *shape) {
    const phax_st_tensor *t = phax_st_find(&c->in, name);
    if (!t) return phax_fail("%s: no tensor '%s' (see phax oracle --list)", c->path, name);
    if (t->ndim < lo || t->ndim > hi)
        return phax_fail("%s: tensor '%s' has %d dims, expected %d..%d", c->path, name, t->ndim, lo, hi);
    *ndim = t->ndim;
    memcpy(shape, t->shape, (size_t)t->ndim * sizeof *shape);
    for (int i = 0; i < t->ndim; i++) {
        if (shape[i] < 1) return phax_fail("%s: tensor '%s' has an empty dimension", c->path, name);
        if (shape[i] > INT_MAX)
            return phax_fail("%s: tensor '%s' has a dimension of %lld, above %d", c->path, name, (long long)shape[i],
                             INT_MAX);
    }
    return PHAX_OK;
}

static double *getf(octx *c, const char *name, int ndim, const int64_t *shape) {
    double *x = dalloc(c, numel(ndim, shape));
    if (!x || phax_st_get_f64(&c->in, name, ndim, shape, x)) return NULL;
    return x;
}

static int32_t *geti(octx *c, const char *name, int ndim, const int64_t *shape) {
    int32_t *x = keep(c, calloc(numel(ndim, shape) ? numel(ndim, shape) : 1, sizeof(int32_t)));
    if (!x) {
        phax_fail("oracle: out of memory");
        return NULL;
    }
    if (phax_st_get_i32(&c->in, name, ndim, shape, x)) return NULL;
    return x;
}

static int put(octx *c, const char *name, const double *x, int ndim, const int64_t *shape) {
    if (c->out) {
        char theirs[PHAX_NAMES_MAX_LEN + 8];
        if (c->names && phax_names_to_theirs(c->names, name, theirs, sizeof theirs) < 0) return PHAX_ERR;
        return phax_st_add_f64(c->out, c->names ? theirs : name, x, ndim, shape);
    }
    if (c->ncol == c->capcol) {
        int cap = c->capcol ? 2 * c->capcol : 16;
        phax_oracle_tensor *a = realloc(c->col, (size_t)cap * sizeof *a);
        if (!a) return phax_fail("check: out of memory");
        c->col = a, c->capcol = cap;
    }
    size_t n = numel(ndim, shape);
    double *t = dalloc(c, n);
    char *nm = keep(c, strdup(name));
    if (!t || !nm) return phax_fail("check: out of memory");
    memcpy(t, x, n * sizeof *t);
    phax_oracle_tensor *o = &c->col[c->ncol++];
    *o = (phax_oracle_tensor){.name = nm, .ndim = ndim, .n = n, .truth = t};
    memcpy(o->shape, shape, (size_t)ndim * sizeof *shape);
    return PHAX_OK;
}

// The column of an output put before (phax check's baselines attach to it).
static phax_oracle_tensor *col_of(octx *c, const char *name) {
    for (int i = 0; i < c->ncol; i++)
        if (!strcmp(c->col[i].name, name)) return &c->col[i];
    phax_fail("check: no output '%s' for the baseline (internal)", name);
    return NULL;
}

// The baseline of an output put before (phax check only; the array is kept, not copied).
static int put_base(octx *c, const char *name, double *x) {
    phax_oracle_tensor *o = col_of(c, name);
    return o ? (o->base = x, PHAX_OK) : PHAX_ERR;
}

// Another sound algorithm's baseline of an output put before (kept, not copied).
static int put_alt(octx *c, const char *name, double *x) {
    phax_oracle_tensor *o = col_of(c, name);
    return o ? (o->base_alt = x, PHAX_OK) : PHAX_ERR;
}

// The upstream gradient of output `out`: tensor "grad.<out>" from IN when
// present (its shape must match), else N(0,1) draws from the seeded stream;
// either way it is written to OUT under the same name.
static double *upstream(octx *c, const char *out, int ndim, const int64_t *shape) {
    char name[128];
    snprintf(name, sizeof name, "grad.%s", out);
    double *g;
    if (phax_st_find(&c->in, name)) {
        g = getf(c, name, ndim, shape);
    } else if (c->var && c->var->unit_upstream) {  // the variant "every upstream gradient 1"
        g = dalloc(c, numel(ndim, shape));
        if (g)
            for (size_t i = 0; i < numel(ndim, shape); i++) g[i] = 1.0;
    } else {
        g = dalloc(c, numel(ndim, shape));
        if (g)
            for (size_t i = 0; i < numel(ndim, shape); i++) g[i] = phax_rng_normal(&c->rng);
    }
    if (!g || put(c, name, g, ndim, shape)) return NULL;
    if (!c->out) c->col[c->ncol - 1].upstream = 1;
    return g;
}

#define TRY(x)                        \
    do {                              \
        if ((x)) return PHAX_ERR;     \
    } while (0)
#define TRYP(p)                       \
    do {                              \
        if (!(p)) return PHAX_ERR;    \
    } while (0)

// Rows × last dim of a tensor of any rank ≥ 1.
static void rows_cols(int ndim, const int64_t *s, size_t *rows, int *cols) {
    *cols = (int)s[ndim - 1];
    *rows = numel(ndim - 1, s);
}

// --- ops -------------------------------------------------------------------------------------
static int op_embedding(octx *c) {
    int nt, nw;
    int64_t ts[8], ws[8];
    TRY(shape_of(c, "tokens", 1, 7, &nt, ts));
    TRY(shape_of(c, "weight", 2, 2, &nw, ws));
    // tokens (int32: half a double each), E; written twice (array + writer copy): y, dE, grad.y.
    size_t n_ = numel(nt, ts), Vd = numel(2, ws), nd = smul(n_, (size_t)ws[1]);
    TRY(budget(c, sadd(sadd(n_ / 2 + 1, smul(3, Vd)), smul(4, nd))));
    int32_t *tok = geti(c, "tokens", nt, ts);
    double *E = getf(c, "weight", 2, ws);
    TRYP(tok && E);
    size_t n = numel(nt, ts);
    int V = (int)ws[0], d = (int)ws[1];
    int64_t ys[8];
    memcpy(ys, ts, (size_t)nt * sizeof *ys);
    ys[nt] = d;
    double *y = dalloc(c, n * d), *dE = dalloc(c, (size_t)V * d);
    TRYP(y && dE);
    if (ref_embedding_fwd(y, E, tok, n, V, d)) return phax_fail("%s: %s", c->path, phax_error());
    double *gy = upstream(c, "y", nt + 1, ys);
    TRYP(gy);
    ref_embedding_bwd(dE, gy, tok, n, d);
    TRY(put(c, "y", y, nt + 1, ys));
    TRY(put(c, "grad.weight", dE, 2, ws));
    if (!c->prec) return PHAX_OK;
    double *by = dalloc(c, n * d), *bE = dalloc(c, (size_t)V * d);
    TRYP(by && bE);
    TRY(phax_naive_embedding(c->prec, by, bE, gy, E, tok, n, V, d));
    TRY(put_base(c, "y", by));
    return put_base(c, "grad.weight", bE);
}

static int op_linear(octx *c) {
    int nx, nw, nb;
    int64_t xs[8], ws[8], bs[8];
    TRY(shape_of(c, "x", 1, 7, &nx, xs));
    TRY(shape_of(c, "weight", 2, 2, &nw, ws));
    size_t n;
    int in;
    rows_cols(nx, xs, &n, &in);
    int out = (int)ws[0];
    if (ws[1] != in) return phax_fail("%s: weight has %lld input columns, x has %d", c->path, (long long)ws[1], in);
    int has_b = phax_st_find(&c->in, "bias") != NULL;
    if (has_b) TRY(shape_of(c, "bias", 1, 1, &nb, bs));
    // x, W, b; written twice: y, dx, dW, db, grad.y.
    size_t nx_ = numel(nx, xs), nw_ = numel(2, ws), ny = smul(n, (size_t)out);
    TRY(budget(c, sadd(sadd(smul(3, nx_), smul(3, nw_)), sadd(smul(4, ny), 3 * (size_t)out))));
    double *x = getf(c, "x", nx, xs), *W = getf(c, "weight", 2, ws);
    int64_t ob[1] = {out};
    double *b = has_b ? getf(c, "bias", 1, ob) : NULL;
    TRYP(x && W && (b || !has_b));
    int64_t ys[8];
    memcpy(ys, xs, sizeof ys);
    ys[nx - 1] = out;
    double *y = dalloc(c, n * out), *dx = dalloc(c, n * in), *dW = dalloc(c, (size_t)out * in), *db = dalloc(c, out);
    TRYP(y && dx && dW && db);
    ref_linear_fwd(y, x, W, b, n, in, out);
    double *gy = upstream(c, "y", nx, ys);
    TRYP(gy);
    ref_linear_bwd(dx, dW, has_b ? db : NULL, gy, x, W, n, in, out);
    TRY(put(c, "y", y, nx, ys));
    TRY(put(c, "grad.x", dx, nx, xs));
    TRY(put(c, "grad.weight", dW, 2, ws));
    if (has_b) TRY(put(c, "grad.bias", db, 1, ob));
    if (!c->prec) return PHAX_OK;
    double *by = dalloc(c, n * out), *bx = dalloc(c, n * in), *bW = dalloc(c, (size_t)out * in), *bb = dalloc(c, out);
    TRYP(by && bx && bW && bb);
    TRY(phax_naive_linear(c->prec, by, bx, bW, has_b ? bb : NULL, gy, x, W, b, n, in, out));
    TRY(put_base(c, "y", by));
    TRY(put_base(c, "grad.x", bx));
    TRY(put_base(c, "grad.weight", bW));
    return has_b ? put_base(c, "grad.bias", bb) : PHAX_OK;
}

// rmsnorm, layernorm, headnorm share their I/O.
static int op_norm(octx *c, int kind) {  // 0 rms, 1 layer, 2 head
    int nx;
    int64_t xs[8];
    TRY(shape_of(c, "x", 1, 7, &nx, xs));
    size_t n;
    int d;
    rows_cols(nx, xs, &n, &d);
    double eps;
    TRY(attr_double(c, "eps", kind == 0 ? PHAX_RMSNORM_EPS : kind == 1 ? PHAX_LAYERNORM_EPS : PHAX_HEADNORM_EPS, &eps));
    if (!(eps >= 0)) return phax_fail("%s: attribute 'eps' must be >= 0", c->path);
    int heads = 1;
    if (kind == 2) {
        TRY(attr_int(c, "heads", 0, 1, INT_MAX, &heads));
        if (heads < 1 || d % heads) return phax_fail("%s: attribute 'heads' (%d) must be given and divide the last dim %d", c->path, heads, d);
    }
    int64_t gs[1] = {d};
    // x, weight, bias; written twice: y, dx, dweight, dbias, grad.y; phax check: two baselines
    // for LayerNorm and headnorm (the variance in two passes and in one)
    size_t xn = sadd(smul(7, numel(nx, xs)), smul(6, (size_t)d));
    TRY(budget_check_alt(c, xn, xn, kind ? xn : 0));
    double *x = getf(c, "x", nx, xs), *g = getf(c, "weight", 1, gs);
    int has_b = kind == 1 && phax_st_find(&c->in, "bias");
    double *b = has_b ? getf(c, "bias", 1, gs) : NULL;
    TRYP(x && g && (b || !has_b));
    double *y = dalloc(c, n * d), *dx = dalloc(c, n * d), *dg = dalloc(c, d), *db = dalloc(c, d);
    TRYP(y && dx && dg && db);
    if (kind == 0) ref_rmsnorm_fwd(y, x, g, n, d, eps);
    if (kind == 1) ref_layernorm_fwd(y, x, g, b, n, d, eps);
    if (kind == 2) ref_headnorm_fwd(y, x, g, n, heads, d / heads, eps);
    double *gy = upstream(c, "y", nx, xs);
    TRYP(gy);
    if (kind == 0) ref_rmsnorm_bwd(dx, dg, gy, x, g, n, d, eps);
    if (kind == 1) ref_layernorm_bwd(dx, dg, has_b ? db : NULL, gy, x, g, n, d, eps);
    if (kind == 2) ref_headnorm_bwd(dx, dg, gy, x, g, n, heads, d / heads, eps);
    TRY(put(c, "y", y, nx, xs));
    TRY(put(c, "grad.x", dx, nx, xs));
    TRY(put(c, "grad.weight", dg, 1, gs));
    if (has_b) TRY(put(c, "grad.bias", db, 1, gs));
    if (!c->prec) return PHAX_OK;
    double *by = dalloc(c, n * d), *bx = dalloc(c, n * d), *bg = dalloc(c, d), *bb = dalloc(c, d);
    TRYP(by && bx && bg && bb);
    TRY(phax_naive_norm(c->prec, kind != 0, by, bx, bg, has_b ? bb : NULL, gy, x, g, b, n, d, d / heads, eps));
    TRY(put_base(c, "y", by));
    TRY(put_base(c, "grad.x", bx));
    TRY(put_base(c, "grad.weight", bg));
    if (has_b) TRY(put_base(c, "grad.bias", bb));
    if (!kind) return PHAX_OK;  // RMSNorm has no variance
    // LayerNorm's variance is as often E[x²] − E[x]² in one pass as Σ(x − mean)² in two; the
    // first cancels where |mean| ≫ spread (check/basic.c): its baseline too, the bound the larger.
    double *ay = dalloc(c, n * d), *ax = dalloc(c, n * d), *ag = dalloc(c, d), *ab = dalloc(c, d);
    TRYP(ay && ax && ag && ab);
    TRY(phax_naive_norm_alg(c->prec, 1, ay, ax, ag, has_b ? ab : NULL, gy, x, g, b, n, d, d / heads, eps, 1));
    TRY(put_alt(c, "y", ay));
    TRY(put_alt(c, "grad.x", ax));
    return put_alt(c, "grad.weight", ag);
}
static int op_rmsnorm(octx *c) { return op_norm(c, 0); }
static int op_layernorm(octx *c) { return op_norm(c, 1); }
static int op_headnorm(octx *c) { return op_norm(c, 2); }

static int op_act(octx *c, int silu) {
    int nx;
    int64_t xs[8];
    TRY(shape_of(c, "x", 0, 8, &nx, xs));
    size_t n = numel(nx, xs);
    TRY(budget(c, smul(7, n)));  // x; written twice: y, dx, grad.y
    double *x = getf(c, "x", nx, xs), *y = dalloc(c, n), *dx = dalloc(c, n);
    TRYP(x && y && dx);
    (silu ? ref_silu_fwd : ref_gelu_fwd)(y, x, n);
    double *gy = upstream(c, "y", nx, xs);
    TRYP(gy);
    (silu ? ref_silu_bwd : ref_gelu_bwd)(dx, gy, x, n);
    TRY(put(c, "y", y, nx, xs));
    TRY(put(c, "grad.x", dx, nx, xs));
    if (!c->prec) return PHAX_OK;
    double *by = dalloc(c, n), *bx = dalloc(c, n);
    TRYP(by && bx);
    TRY(phax_naive_act(c->prec, silu, by, bx, gy, x, n));
    TRY(put_base(c, "y", by));
    return put_base(c, "grad.x", bx);
}
static int op_gelu(octx *c) { return op_act(c, 0); }
static int op_silu(octx *c) { return op_act(c, 1); }

static int op_swiglu(octx *c) {
    int nx, nw;
    int64_t xs[8], gs[8];
    TRY(shape_of(c, "x", 1, 7, &nx, xs));
    TRY(shape_of(c, "w_gate", 2, 2, &nw, gs));
    size_t n;
    int d;
    rows_cols(nx, xs, &n, &d);
    int hid = (int)gs[0];
    int64_t hs[2] = {hid, d}, ds[2] = {d, hid};
    // x, three weights; written twice: y, dx, three weight gradients, grad.y; the ref
    // backward's scratch of 7 (n, hid) matrices.
    size_t nd = smul(n, (size_t)d), hd = smul((size_t)hid, (size_t)d);
    TRY(budget(c, sadd(sadd(smul(7, nd), smul(9, hd)), smul(7, smul(n, (size_t)hid)))));
    double *x = getf(c, "x", nx, xs), *Wg = getf(c, "w_gate", 2, hs), *Wu = getf(c, "w_up", 2, hs),
           *Wd = getf(c, "w_down", 2, ds);
    TRYP(x && Wg && Wu && Wd);
    double *y = dalloc(c, n * d), *dx = dalloc(c, n * d), *dWg = dalloc(c, (size_t)hid * d),
           *dWu = dalloc(c, (size_t)hid * d), *dWd = dalloc(c, (size_t)hid * d);
    TRYP(y && dx && dWg && dWu && dWd);
    TRY(ref_swiglu_fwd(y, x, Wg, Wu, Wd, n, d, hid));
    double *gy = upstream(c, "y", nx, xs);
    TRYP(gy);
    TRY(ref_swiglu_bwd(dx, dWg, dWu, dWd, gy, x, Wg, Wu, Wd, n, d, hid));
    TRY(put(c, "y", y, nx, xs));
    TRY(put(c, "grad.x", dx, nx, xs));
    TRY(put(c, "grad.w_gate", dWg, 2, hs));
    TRY(put(c, "grad.w_up", dWu, 2, hs));
    TRY(put(c, "grad.w_down", dWd, 2, ds));
    if (!c->prec) return PHAX_OK;
    double *by = dalloc(c, n * d), *bx = dalloc(c, n * d), *bg = dalloc(c, (size_t)hid * d),
           *bu = dalloc(c, (size_t)hid * d), *bd = dalloc(c, (size_t)hid * d);
    TRYP(by && bx && bg && bu && bd);
    TRY(phax_naive_swiglu(c->prec, by, bx, bg, bu, bd, gy, x, Wg, Wu, Wd, n, d, hid));
    TRY(put_base(c, "y", by));
    TRY(put_base(c, "grad.x", bx));
    TRY(put_base(c, "grad.w_gate", bg));
    TRY(put_base(c, "grad.w_up", bu));
    return put_base(c, "grad.w_down", bd);
}

static int op_rope(octx *c) {
    int nx;
    int64_t xs[8];
    TRY(shape_of(c, "x", 4, 4, &nx, xs));
    double base;
    long pos0;
    TRY(attr_double(c, "rope_base", PHAX_ROPE_BASE, &base));
    TRY(attr_long(c, "pos0", 0, 0, LONG_MAX / 2, &pos0));
    size_t n = numel(4, xs);
    TRY(budget(c, smul(7, n)));  // x; written twice: y, dx, grad.y
    double *x = getf(c, "x", 4, xs), *y = dalloc(c, n), *dx = dalloc(c, n);
    TRYP(x && y && dx);
    int B = (int)xs[0], T = (int)xs[1], H = (int)xs[2], dh = (int)xs[3];
    if (ref_rope_fwd(y, x, B, T, H, dh, base, pos0)) return phax_fail("%s: %s", c->path, phax_error());
    double *gy = upstream(c, "y", 4, xs);
    TRYP(gy);
    TRY(ref_rope_bwd(dx, gy, B, T, H, dh, base, pos0));
    TRY(put(c, "y", y, 4, xs));
    TRY(put(c, "grad.x", dx, 4, xs));
    if (!c->prec) return PHAX_OK;
    double *by = dalloc(c, n), *bx = dalloc(c, n);
    TRYP(by && bx);
    TRY(phax_naive_rope(c->prec, by, bx, gy, x, B, T, H, dh, base, pos0));
    TRY(put_base(c, "y", by));
    return put_base(c, "grad.x", bx);
}

static const char *const SCORES[] = {"dot", "cosine", NULL};

static int op_attention(octx *c) {
    int nq, nk, nv;
    int64_t qs[8], ks[8], vs[8];
    TRY(shape_of(c, "q", 4, 4, &nq, qs));
    TRY(shape_of(c, "k", 4, 4, &nk, ks));
    TRY(shape_of(c, "v", 4, 4, &nv, vs));
    int B = (int)qs[0], T = (int)qs[1];
    if (ks[0] != B || ks[1] != T || vs[0] != B || vs[1] != T || ks[2] != vs[2] || ks[3] != qs[3])
        return phax_fail("%s: q (B,T,Hq,dh), k (B,T,Hkv,dh), v (B,T,Hkv,dv) do not agree", c->path);
    phax_attn_cfg a = phax_attn_cfg_default((int)qs[2], (int)ks[2], (int)qs[3]);
    a.dv = (int)vs[3];
    int score;
    TRY(attr_choice(c, "score", SCORES, 0, &score));
    a.score = score ? PHAX_SCORE_COSINE : PHAX_SCORE_DOT;
    TRY(attr_int(c, "window", 0, 0, INT_MAX, &a.window));
    TRY(attr_int(c, "rope", 1, 0, 1, &a.rope));
    TRY(attr_double(c, "rope_base", PHAX_ROPE_BASE, &a.rope_base));
    TRY(attr_long(c, "pos0", 0, 0, LONG_MAX / 2, &a.pos0));
    if (phax_attn_cfg_check(&a)) return phax_fail("%s: %s", c->path, phax_error());
    if (!a.rope && (meta(c, "rope_base") || meta(c, "pos0")))
        return phax_fail("%s: attribute '%s' is given but rope is 0 (it is used only with rope=1)", c->path,
                         meta(c, "rope_base") ? "rope_base" : "pos0");
    if (!score && phax_st_find(&c->in, "logscale"))
        return phax_fail("%s: tensor 'logscale' is given but score is 'dot' (it is used only with score=cosine)",
                         c->path);
    int64_t ls[1] = {a.Hq}, ys[4] = {B, T, a.Hq, a.dv};
    {  // q, k, v, logscale; written twice: y, dq, dk, dv, dlogscale, grad.y; the ref kernels'
       // scratch: normalised/rotated q and k and their gradients, and rows of T
        size_t nq = numel(4, qs), nk = numel(4, ks), nv = numel(4, vs), ny = numel(4, ys);
        size_t in = sadd(sadd(nq, nk), sadd(nv, (size_t)a.Hq));
        size_t x = sadd(sadd(smul(3, in), smul(4, ny)), sadd(smul(2, sadd(nq, nk)), smul(3, (size_t)T)));
        TRY(budget_check_alt(c, x, x, x));  // phax check: a second baseline (D as Σ p dp and as y·g)
    }
    double *q = getf(c, "q", 4, qs), *k = getf(c, "k", 4, ks), *v = getf(c, "v", 4, vs);
    double *l = score ? getf(c, "logscale", 1, ls) : NULL;
    TRYP(q && k && v && (l || !score));
    double *y = dalloc(c, numel(4, ys)), *dq = dalloc(c, numel(4, qs)), *dk = dalloc(c, numel(4, ks)),
           *dv = dalloc(c, numel(4, vs)), *dl = dalloc(c, a.Hq);
    TRYP(y && dq && dk && dv && dl);
    // Diagnosis variants (phax check): the interleaved RoPE pairing is phax's on q and k with each
    // head's coordinates permuted (2i → i, 2i+1 → i + dh/2: the dot products do not change), and
    // scores scaled by s are dot scores on s·q (cosine: logscale + ln s).
    int il = c->var && c->var->rope_interleaved && a.rope && a.dh % 2 == 0;
    double sc = c->var && c->var->score_scale > 0 ? c->var->score_scale : 1.0;
    if (il || sc != 1.0) {
        double *q2 = dalloc(c, numel(4, qs)), *k2 = dalloc(c, numel(4, ks)), *l2 = score ? dalloc(c, a.Hq) : NULL;
        TRYP(q2 && k2 && (l2 || !score));
        int dh = a.dh, h2 = dh / 2;
        for (size_t r = 0; r < numel(4, qs) / (size_t)dh; r++)
            for (int i = 0; i < dh; i++) q2[r * dh + (il ? (i % 2 ? h2 + i / 2 : i / 2) : i)] = q[r * dh + i] * (score ? 1 : sc);
        for (size_t r = 0; r < numel(4, ks) / (size_t)dh; r++)
            for (int i = 0; i < dh; i++) k2[r * dh + (il ? (i % 2 ? h2 + i / 2 : i / 2) : i)] = k[r * dh + i];
        for (int h = 0; score && h < a.Hq; h++) l2[h] = l[h] + log(sc);
        TRY(ref_attention_fwd(y, q2, k2, v, l2, B, T, &a));
        double *gy = upstream(c, "y", 4, ys);
        TRYP(gy);
        double *dq2 = dalloc(c, numel(4, qs)), *dk2 = dalloc(c, numel(4, ks));
        TRYP(dq2 && dk2);
        TRY(ref_attention_bwd(dq2, dk2, dv, score ? dl : NULL, gy, q2, k2, v, l2, B, T, &a));
        for (size_t r = 0; r < numel(4, qs) / (size_t)dh; r++)  // back through the permutation and scale
            for (int i = 0; i < dh; i++) dq[r * dh + i] = dq2[r * dh + (il ? (i % 2 ? h2 + i / 2 : i / 2) : i)] * (score ? 1 : sc);
        for (size_t r = 0; r < numel(4, ks) / (size_t)dh; r++)
            for (int i = 0; i < dh; i++) dk[r * dh + i] = dk2[r * dh + (il ? (i % 2 ? h2 + i / 2 : i / 2) : i)];
        TRY(put(c, "y", y, 4, ys));
        TRY(put(c, "grad.q", dq, 4, qs));
        TRY(put(c, "grad.k", dk, 4, ks));
        TRY(put(c, "grad.v", dv, 4, vs));
        return score ? put(c, "grad.logscale", dl, 1, ls) : PHAX_OK;
    }
    TRY(ref_attention_fwd(y, q, k, v, l, B, T, &a));
    double *gy = upstream(c, "y", 4, ys);
    TRYP(gy);
    TRY(ref_attention_bwd(dq, dk, dv, score ? dl : NULL, gy, q, k, v, l, B, T, &a));
    TRY(put(c, "y", y, 4, ys));
    TRY(put(c, "grad.q", dq, 4, qs));
    TRY(put(c, "grad.k", dk, 4, ks));
    TRY(put(c, "grad.v", dv, 4, vs));
    if (score) TRY(put(c, "grad.logscale", dl, 1, ls));
    if (!c->prec) return PHAX_OK;
    double *by = dalloc(c, numel(4, ys)), *bq = dalloc(c, numel(4, qs)), *bk = dalloc(c, numel(4, ks)),
           *bv = dalloc(c, numel(4, vs)), *bl = dalloc(c, a.Hq);
    TRYP(by && bq && bk && bv && bl);
    TRY(phax_naive_attention(c->prec, by, bq, bk, bv, score ? bl : NULL, gy, q, k, v, l, B, T, &a));
    TRY(put_base(c, "y", by));
    TRY(put_base(c, "grad.q", bq));
    TRY(put_base(c, "grad.k", bk));
    TRY(put_base(c, "grad.v", bv));
    if (score) TRY(put_base(c, "grad.logscale", bl));
    // FlashAttention's backward forms D = rowsum(y ⊙ g) where the naive one forms Σ p dp: at
    // TF32 the two differ by dp's operand rounding, which only the second cancels (check/
    // attention.c); its baseline too, the bound the larger.
    double *ay = dalloc(c, numel(4, ys)), *aq = dalloc(c, numel(4, qs)), *ak = dalloc(c, numel(4, ks)),
           *av = dalloc(c, numel(4, vs)), *al = dalloc(c, a.Hq);
    TRYP(ay && aq && ak && av && al);
    TRY(phax_naive_attention_alg(c->prec, ay, aq, ak, av, score ? al : NULL, gy, q, k, v, l, B, T, &a, 1));
    TRY(put_alt(c, "grad.q", aq));  // y and grad.v do not depend on D: the same as the first's
    TRY(put_alt(c, "grad.k", ak));
    return score ? put_alt(c, "grad.logscale", al) : PHAX_OK;
}

// Λ and C of the DSS kernel: lambda_re, lambda_im (N); c_re, c_im (H, N).
static int get_dss(octx *c, double **Lre, double **Lim, double **Cre, double **Cim, int *H, int *N) {
    int nd;
    int64_t cs[8];
    TRY(shape_of(c, "c_re", 2, 2, &nd, cs));
    *H = (int)cs[0], *N = (int)cs[1];
    int64_t ns[1] = {*N};
    *Lre = getf(c, "lambda_re", 1, ns), *Lim = getf(c, "lambda_im", 1, ns);
    *Cre = getf(c, "c_re", 2, cs), *Cim = getf(c, "c_im", 2, cs);
    return *Lre && *Lim && *Cre && *Cim ? PHAX_OK : PHAX_ERR;
}

static int put_dss_grads(octx *c, const double *dLre, const double *dLim, const double *dCre,
                         const double *dCim, int H, int N) {
    int64_t ns[1] = {N}, cs[2] = {H, N};
    TRY(put(c, "grad.lambda_re", dLre, 1, ns));
    TRY(put(c, "grad.lambda_im", dLim, 1, ns));
    TRY(put(c, "grad.c_re", dCre, 2, cs));
    return put(c, "grad.c_im", dCim, 2, cs);
}

static int op_dss_kernel(octx *c) {
    double *Lre, *Lim, *Cre, *Cim;
    int H, N, T, nd;
    int64_t cs[8];
    TRY(attr_int(c, "T", 0, 0, ORACLE_MAX_T, &T));
    if (T < 1) return phax_fail("%s: attribute 'T' (kernel length) must be given and >= 1", c->path);
    TRY(shape_of(c, "c_re", 2, 2, &nd, cs));
    {  // Λ, C; written twice: k, the gradients of Λ and C, grad.k
        size_t hn = numel(2, cs), hk = smul((size_t)cs[0], (size_t)T);
        TRY(budget(c, sadd(sadd(smul(6, hn), smul(4, hk)), smul(6, (size_t)cs[1]))));
    }
    TRY(get_dss(c, &Lre, &Lim, &Cre, &Cim, &H, &N));
    int64_t ks[2] = {H, T};
    double *K = dalloc(c, (size_t)H * T), *dLre = dalloc(c, N), *dLim = dalloc(c, N),
           *dCre = dalloc(c, (size_t)H * N), *dCim = dalloc(c, (size_t)H * N);
    TRYP(K && dLre && dLim && dCre && dCim);
    ref_dss_kernel_fwd(K, Lre, Lim, Cre, Cim, H, N, T);
    double *gk = upstream(c, "k", 2, ks);
    TRYP(gk);
    ref_dss_kernel_bwd(dLre, dLim, dCre, dCim, gk, Lre, Lim, Cre, Cim, H, N, T);
    TRY(put(c, "k", K, 2, ks));
    TRY(put_dss_grads(c, dLre, dLim, dCre, dCim, H, N));
    if (!c->prec) return PHAX_OK;
    double *bk = dalloc(c, (size_t)H * T), *bLr = dalloc(c, N), *bLi = dalloc(c, N), *bCr = dalloc(c, (size_t)H * N),
           *bCi = dalloc(c, (size_t)H * N);
    TRYP(bk && bLr && bLi && bCr && bCi);
    TRY(phax_naive_dss_kernel(c->prec, bk, bLr, bLi, bCr, bCi, gk, Lre, Lim, Cre, Cim, H, N, T));
    TRY(put_base(c, "k", bk));
    TRY(put_base(c, "grad.lambda_re", bLr));
    TRY(put_base(c, "grad.lambda_im", bLi));
    TRY(put_base(c, "grad.c_re", bCr));
    return put_base(c, "grad.c_im", bCi);
}

static int op_ssm(octx *c, int recurrent) {
    int nu;
    int64_t us[8];
    TRY(shape_of(c, "u", 3, 3, &nu, us));
    int B = (int)us[0], T = (int)us[1], H = (int)us[2], N = 0;
    int64_t hs[1] = {H}, ks[2] = {H, T};
    {  // u, d and (conv) k or (recurrent) Λ, C; written twice: y, du, dd, the other gradients, grad.y;
       // the recurrent backward's scratch of T complex numbers
        size_t nu = numel(3, us), other = smul((size_t)H, (size_t)T);
        if (recurrent) {
            int nd;
            int64_t cs[8];
            TRY(shape_of(c, "c_re", 2, 2, &nd, cs));
            other = sadd(smul(2, numel(2, cs)), smul(2, (size_t)cs[1]));
        }
        TRY(budget(c, sadd(sadd(smul(7, nu), smul(3, other)), sadd(smul(3, (size_t)H), smul(2, (size_t)T)))));
    }
    double *u = getf(c, "u", 3, us), *D = getf(c, "d", 1, hs);
    TRYP(u && D);
    double *y = dalloc(c, numel(3, us)), *du = dalloc(c, numel(3, us)), *dD = dalloc(c, H);
    TRYP(y && du && dD);
    if (!recurrent) {
        double *K = getf(c, "k", 2, ks), *dK = dalloc(c, (size_t)H * T);
        TRYP(K && dK);
        ref_ssm_conv_fwd(y, u, K, D, B, T, H);
        double *gy = upstream(c, "y", 3, us);
        TRYP(gy);
        ref_ssm_conv_bwd(du, dK, dD, gy, u, K, D, B, T, H);
        TRY(put(c, "grad.k", dK, 2, ks));
        if (c->prec) {
            double *by = dalloc(c, numel(3, us)), *bu = dalloc(c, numel(3, us)), *bk = dalloc(c, (size_t)H * T),
                   *bd = dalloc(c, H);
            TRYP(by && bu && bk && bd);
            TRY(phax_naive_ssm_conv(c->prec, by, bu, bk, bd, gy, u, K, D, B, T, H));
            TRY(put(c, "y", y, 3, us));
            TRY(put(c, "grad.u", du, 3, us));
            TRY(put(c, "grad.d", dD, 1, hs));
            TRY(put_base(c, "y", by));
            TRY(put_base(c, "grad.u", bu));
            TRY(put_base(c, "grad.k", bk));
            return put_base(c, "grad.d", bd);
        }
    } else {
        double *Lre, *Lim, *Cre, *Cim;
        int H2;
        TRY(get_dss(c, &Lre, &Lim, &Cre, &Cim, &H2, &N));
        if (H2 != H) return phax_fail("%s: c_re has %d channels, u has %d", c->path, H2, H);
        double *dLre = dalloc(c, N), *dLim = dalloc(c, N), *dCre = dalloc(c, (size_t)H * N),
               *dCim = dalloc(c, (size_t)H * N);
        TRYP(dLre && dLim && dCre && dCim);
        ref_ssm_recurrent_fwd(y, u, Lre, Lim, Cre, Cim, D, B, T, H, N);
        double *gy = upstream(c, "y", 3, us);
        TRYP(gy);
        TRY(ref_ssm_recurrent_bwd(du, dLre, dLim, dCre, dCim, dD, gy, u, Lre, Lim, Cre, Cim, D, B, T, H, N));
        TRY(put_dss_grads(c, dLre, dLim, dCre, dCim, H, N));
        if (c->prec) {  // the baseline: the same function in its convolution form (kernel, then conv)
            size_t nk = (size_t)H * T, nc = (size_t)H * N;
            double *bk = dalloc(c, nk), *bgk = dalloc(c, nk), *by = dalloc(c, numel(3, us)),
                   *bu = dalloc(c, numel(3, us)), *bd = dalloc(c, H), *bLr = dalloc(c, N), *bLi = dalloc(c, N),
                   *bCr = dalloc(c, nc), *bCi = dalloc(c, nc);
            TRYP(bk && bgk && by && bu && bd && bLr && bLi && bCr && bCi);
            TRY(phax_naive_dss_kernel(c->prec, bk, bLr, bLi, bCr, bCi, bgk, Lre, Lim, Cre, Cim, H, N, T));
            TRY(phax_naive_ssm_conv(c->prec, by, bu, bgk, bd, gy, u, bk, D, B, T, H));
            double *k2 = dalloc(c, nk);
            TRYP(k2);
            TRY(phax_naive_dss_kernel(c->prec, k2, bLr, bLi, bCr, bCi, bgk, Lre, Lim, Cre, Cim, H, N, T));
            TRY(put(c, "y", y, 3, us));
            TRY(put(c, "grad.u", du, 3, us));
            TRY(put(c, "grad.d", dD, 1, hs));
            TRY(put_base(c, "y", by));
            TRY(put_base(c, "grad.u", bu));
            TRY(put_base(c, "grad.d", bd));
            TRY(put_base(c, "grad.lambda_re", bLr));
            TRY(put_base(c, "grad.lambda_im", bLi));
            TRY(put_base(c, "grad.c_re", bCr));
            return put_base(c, "grad.c_im", bCi);
        }
    }
    TRY(put(c, "y", y, 3, us));
    TRY(put(c, "grad.u", du, 3, us));
    return put(c, "grad.d", dD, 1, hs);
}
static int op_ssm_conv(octx *c) { return op_ssm(c, 0); }
static int op_ssm_recurrent(octx *c) { return op_ssm(c, 1); }

static const char *const FORMS[] = {"parallel", "recurrent", NULL};
static const char *const GRADS[] = {"exact", "stopgrad-normalizer", NULL};  // PHAX_MLSTM_GRAD_* order

// The six outputs of the mLSTM op given to a baseline setter (put_base, put_alt) in one go.
static int put_mlstm(octx *c, int (*set)(octx *, const char *, double *), double *x[6]) {
    static const char *const names[6] = {"h", "grad.q", "grad.k", "grad.v", "grad.igate", "grad.fgate"};
    for (int i = 0; i < 6; i++) TRY(set(c, names[i], x[i]));
    return PHAX_OK;
}

static int op_mlstm(octx *c) {
    int nq, nv;
    int64_t qs[8], vs[8];
    TRY(shape_of(c, "q", 4, 4, &nq, qs));
    TRY(shape_of(c, "v", 4, 4, &nv, vs));
    int B = (int)qs[0], T = (int)qs[1], H = (int)qs[2], dqk = (int)qs[3], dv = (int)vs[3];
    if (vs[0] != B || vs[1] != T || vs[2] != H) return phax_fail("%s: v must be (B, T, H, dv) with q's B, T, H", c->path);
    int form;
    double eps, m0;
    TRY(attr_choice(c, "form", FORMS, 0, &form));
    TRY(attr_double(c, "eps", PHAX_MLSTM_EPS, &eps));
    TRY(attr_double(c, "m0", 0.0, &m0));
    if (!(eps >= 0)) return phax_fail("%s: attribute 'eps' must be >= 0", c->path);
    if (form == 0 && meta(c, "m0"))
        return phax_fail("%s: attribute 'm0' is given but form is 'parallel' (m0 is the recurrent form's initial "
                         "stabiliser)", c->path);
    int grad;  // the gradient convention (phax/ref.h): the parallel form's only
    TRY(attr_choice(c, "grad", GRADS, 0, &grad));
    if (form != 0 && grad != PHAX_MLSTM_GRAD_EXACT)
        return phax_fail("%s: attribute 'grad' = 'stopgrad-normalizer' is for form 'parallel' (the recurrent form's "
                         "gradient is the exact one)", c->path);
    int64_t gs[3] = {B, T, H};
    {  // q, k, v, gates; written twice: h, their gradients, grad.h; scratch: the recurrent
       // form's tape of T+1 states (dqk x dv) per sequence, or the parallel form's rows of T
        size_t nqk = numel(4, qs), nvv = numel(4, vs), ng = numel(3, gs);
        size_t in = sadd(sadd(smul(2, nqk), nvv), smul(2, ng)), T1 = (size_t)T + 1;
        size_t tape = form ? smul(T1, sadd(smul((size_t)dqk, (size_t)dv), sadd((size_t)dqk, 6)))
                           : smul(8, (size_t)T);
        size_t x = sadd(sadd(smul(3, in), smul(4, nvv)), sadd(tape, smul(3, smul((size_t)dqk, (size_t)dv))));
        // phax check holds two baselines (the parallel form: direct and cumulative-sum decays;
        // the recurrent form: its own and h the chunkwise way, rows of T)
        TRY(budget_check_alt(c, x, x, form ? sadd(nvv, smul(3, (size_t)T)) : x));
    }
    double *q = getf(c, "q", 4, qs), *k = getf(c, "k", 4, qs), *v = getf(c, "v", 4, vs),
           *ig = getf(c, "igate", 3, gs), *fg = getf(c, "fgate", 3, gs);
    TRYP(q && k && v && ig && fg);
    size_t nqk = numel(4, qs), nvv = numel(4, vs), ng = numel(3, gs);
    double *h = dalloc(c, nvv), *dq = dalloc(c, nqk), *dk = dalloc(c, nqk), *dvv = dalloc(c, nvv),
           *di = dalloc(c, ng), *df = dalloc(c, ng);
    TRYP(h && dq && dk && dvv && di && df);
    if (form == 0) TRY(ref_mlstm_parallel_fwd(h, q, k, v, ig, fg, B, T, H, dqk, dv, eps));
    else TRY(ref_mlstm_recurrent_fwd(h, q, k, v, ig, fg, B, T, H, dqk, dv, eps, m0));
    double *gh = upstream(c, "h", 4, vs);
    TRYP(gh);
    if (form == 0) TRY(ref_mlstm_parallel_bwd_grad(dq, dk, dvv, di, df, gh, q, k, v, ig, fg, B, T, H, dqk, dv, eps, grad));
    else TRY(ref_mlstm_recurrent_bwd(dq, dk, dvv, di, df, gh, q, k, v, ig, fg, B, T, H, dqk, dv, eps, m0));
    TRY(put(c, "h", h, 4, vs));
    TRY(put(c, "grad.q", dq, 4, qs));
    TRY(put(c, "grad.k", dk, 4, qs));
    TRY(put(c, "grad.v", dvv, 4, vs));
    TRY(put(c, "grad.igate", di, 3, gs));
    TRY(put(c, "grad.fgate", df, 3, gs));
    if (!c->prec) return PHAX_OK;
    double *bh = dalloc(c, nvv), *bq = dalloc(c, nqk), *bk = dalloc(c, nqk), *bv = dalloc(c, nvv),
           *bi = dalloc(c, ng), *bf = dalloc(c, ng);
    TRYP(bh && bq && bk && bv && bi && bf);
    if (form == 0) TRY(phax_naive_mlstm_grad(c->prec, bh, bq, bk, bv, bi, bf, gh, q, k, v, ig, fg, B, T, H, dqk, dv, eps, 0, grad));
    else TRY(phax_naive_mlstm_recurrent(c->prec, bh, bq, bk, bv, bi, bf, gh, q, k, v, ig, fg, B, T, H, dqk, dv, eps, m0));
    TRY(put_mlstm(c, put_base, (double *[6]){bh, bq, bk, bv, bi, bf}));
    if (form != 0) {  // a chunkwise kernel sums over a chunk where the recurrent form sums over dqk:
                      // its h's baseline too (one chunk of T), the bound the larger (check/mlstm.c)
        double *ch = dalloc(c, nvv);
        TRYP(ch);
        TRY(phax_naive_mlstm_chunkwise_h(c->prec, ch, q, k, v, ig, fg, B, T, H, dqk, dv, eps, m0));
        return put_alt(c, "h", ch);
    }
    // The parallel form is also written with the decays as differences of cumulative sums,
    // whose rounding grows with T (check/mlstm.c): its baseline too, the bound the larger.
    double *ah = dalloc(c, nvv), *aq = dalloc(c, nqk), *ak = dalloc(c, nqk), *av = dalloc(c, nvv),
           *ai = dalloc(c, ng), *af = dalloc(c, ng);
    TRYP(ah && aq && ak && av && ai && af);
    TRY(phax_naive_mlstm_grad(c->prec, ah, aq, ak, av, ai, af, gh, q, k, v, ig, fg, B, T, H, dqk, dv, eps, 1, grad));
    return put_mlstm(c, put_alt, (double *[6]){ah, aq, ak, av, ai, af});
}

static int op_mix(octx *c) {
    int nb_;
    int64_t bs[8];
    TRY(shape_of(c, "branches", 2, 8, &nb_, bs));
    int nb = (int)bs[0];
    size_t n = numel(nb_ - 1, bs + 1);
    int64_t ps[1] = {nb};
    // branches, p; written twice: y, dbranches, dp, grad.y
    TRY(budget(c, sadd(smul(3, numel(nb_, bs)), sadd(smul(4, n), 3 * (size_t)nb))));
    double *b = getf(c, "branches", nb_, bs), *p = getf(c, "p", 1, ps);
    TRYP(b && p);
    double *y = dalloc(c, n), *db = dalloc(c, numel(nb_, bs)), *dp = dalloc(c, nb);
    TRYP(y && db && dp);
    ref_mix_fwd(y, b, p, nb, n);
    double *gy = upstream(c, "y", nb_ - 1, bs + 1);
    TRYP(gy);
    ref_mix_bwd(db, dp, gy, b, p, nb, n);
    TRY(put(c, "y", y, nb_ - 1, bs + 1));
    TRY(put(c, "grad.branches", db, nb_, bs));
    TRY(put(c, "grad.p", dp, 1, ps));
    if (!c->prec) return PHAX_OK;
    double *by = dalloc(c, n), *bb = dalloc(c, numel(nb_, bs)), *bp = dalloc(c, nb);
    TRYP(by && bb && bp);
    TRY(phax_naive_mix(c->prec, by, bb, bp, gy, b, p, nb, n));
    TRY(put_base(c, "y", by));
    TRY(put_base(c, "grad.branches", bb));
    return put_base(c, "grad.p", bp);
}

static int op_cross_entropy(octx *c) {
    int nl, nt;
    int64_t ls[8], ts[8];
    TRY(shape_of(c, "logits", 1, 8, &nl, ls));
    TRY(shape_of(c, "targets", 0, 7, &nt, ts));
    size_t n;
    int V;
    rows_cols(nl, ls, &n, &V);
    if (nt != nl - 1 || memcmp(ts, ls, (size_t)nt * sizeof *ts))
        return phax_fail("%s: targets must have the shape of logits without its last dim", c->path);
    TRY(budget(c, sadd(smul(3, numel(nl, ls)), n / 2 + 8)));  // logits, targets; written twice: dlogits
    double *x = getf(c, "logits", nl, ls);
    int32_t *tg = geti(c, "targets", nt, ts);
    TRYP(x && tg);
    double loss, *dx = dalloc(c, numel(nl, ls));
    TRYP(dx);
    if (ref_cross_entropy_fwd(&loss, x, tg, n, V)) return phax_fail("%s: %s", c->path, phax_error());
    double *gl = upstream(c, "loss", 0, NULL);
    TRYP(gl);
    TRY(ref_cross_entropy_bwd(dx, *gl, x, tg, n, V));
    TRY(put(c, "loss", &loss, 0, NULL));
    TRY(put(c, "grad.logits", dx, nl, ls));
    if (!c->prec) return PHAX_OK;
    double *bl = dalloc(c, 1), *bx = dalloc(c, numel(nl, ls));
    TRYP(bl && bx);
    TRY(phax_naive_cross_entropy(c->prec, bl, bx, *gl, x, tg, n, V));
    TRY(put_base(c, "loss", bl));
    return put_base(c, "grad.logits", bx);
}

static int op_adamw(octx *c) {
    int np;
    int64_t ps[8];
    TRY(shape_of(c, "param", 0, 8, &np, ps));
    phax_adamw_cfg a = phax_adamw_cfg_default();
    long step;
    int decay;
    TRY(attr_double(c, "lr", a.lr, &a.lr));
    TRY(attr_double(c, "beta1", a.beta1, &a.beta1));
    TRY(attr_double(c, "beta2", a.beta2, &a.beta2));
    TRY(attr_double(c, "eps", a.eps, &a.eps));
    TRY(attr_double(c, "weight_decay", a.weight_decay, &a.weight_decay));
    TRY(attr_double(c, "clip", a.clip, &a.clip));
    TRY(attr_long(c, "step", 1, 1, LONG_MAX, &step));
    TRY(attr_int(c, "decay", 1, 0, 1, &decay));
    size_t n = numel(np, ps);
    TRY(budget(c, smul(7, n)));  // param, gradient, m, v; written again: param, m, v
    double *p = getf(c, "param", np, ps), *g = getf(c, "gradient", np, ps);
    double *m = phax_st_find(&c->in, "exp_avg") ? getf(c, "exp_avg", np, ps) : dalloc(c, n);
    double *v = phax_st_find(&c->in, "exp_avg_sq") ? getf(c, "exp_avg_sq", np, ps) : dalloc(c, n);
    TRYP(p && g && m && v);
    double *bp = NULL, *bm = NULL, *bv = NULL;
    if (c->prec) {  // the step updates p, m, v in place: the baseline starts from copies
        bp = dalloc(c, n), bm = dalloc(c, n), bv = dalloc(c, n);
        TRYP(bp && bm && bv);
        memcpy(bp, p, n * sizeof *p), memcpy(bm, m, n * sizeof *m), memcpy(bv, v, n * sizeof *v);
    }
    ref_adamw_param t = {.p = p, .g = g, .m = m, .v = v, .n = n, .decay = decay};
    double gn;
    if (ref_adamw_step(&t, 1, &a, step, &gn)) return phax_fail("%s: %s", c->path, phax_error());
    TRY(put(c, "param", p, np, ps));
    TRY(put(c, "exp_avg", m, np, ps));
    TRY(put(c, "exp_avg_sq", v, np, ps));
    TRY(put(c, "grad_norm", &gn, 0, NULL));
    if (!c->prec) return PHAX_OK;
    double *bg = dalloc(c, 1);
    TRYP(bg);
    TRY(phax_naive_adamw(c->prec, bp, bm, bv, bg, g, n, &a, step, decay));
    TRY(put_base(c, "param", bp));
    TRY(put_base(c, "exp_avg", bm));
    TRY(put_base(c, "exp_avg_sq", bv));
    return put_base(c, "grad_norm", bg);
}

// Float64 elements the ref model holds at once beyond its parameters, gradients and
// logits, for B x T tokens: the input of every layer kept for the backward, and one
// layer's activations and their gradients (a layer is recomputed in the backward).
// An estimate from above (measured peaks were 0.5-0.8 of it): 8 arrays of every
// per-token width a block has.
static size_t model_act_doubles(const phax_model_cfg *m, int B, int T) {
    size_t n = smul((size_t)B, (size_t)T), d = (size_t)m->d_model;
    size_t hd = (size_t)m->head_dim, w = d;
    w = sadd(w, sadd((size_t)m->gss_expand, (size_t)m->gss_hidden));
    w = sadd(w, sadd((size_t)m->ffn_hidden, (size_t)m->ffn_aux_hidden));
    w = sadd(w, smul(hd, sadd((size_t)m->n_heads, smul(2, (size_t)m->n_kv_heads))));
    size_t per_token = sadd(smul(sadd((size_t)m->n_layers, 4), d), smul(8, w));
    return sadd(smul(n, per_token), smul(4, smul((size_t)m->gss_hidden, (size_t)T)));
}

static int op_model(octx *c) {
    char b[256];
    const char *json = phax_st_meta(&c->in, "config");
    if (!json) return phax_fail("%s: metadata 'config' (the model's JSON config) is missing", c->path);
    phax_model_cfg cfg;
    char where[1100];
    snprintf(where, sizeof where, "%s: config", c->path);
    if (phax_model_cfg_from_json_str(&cfg, json, where)) return PHAX_ERR;
    int window;
    TRY(attr_int(c, "window", -1, -1, INT_MAX, &window));
    if (phax_st_meta(&c->in, "window") && !phax_plan_takes_window(&cfg))
        return phax_fail("%s: attribute 'window' is given but the family is %s (it sets the SWAX family's SWA "
                         "window; %s uses the config's attn_window)", c->path, phax_family_name(cfg.family),
                         phax_family_name(cfg.family));
    int nt, ng;
    int64_t ts[8], gs[8];
    TRY(shape_of(c, "tokens", 2, 2, &nt, ts));
    TRY(shape_of(c, "targets", 2, 2, &ng, gs));
    if (gs[0] != ts[0] || gs[1] != ts[1]) return phax_fail("%s: targets must have the shape of tokens (B, T)", c->path);
    int B = (int)ts[0], T = (int)ts[1];
    // Every layer has parameters, so a config with more layers than IN has tensors
    // cannot match it: refuse before building a layout of that size.
    if (cfg.n_layers > c->in.n)
        return phax_fail("%s: config: n_layers (%d) is more than the file has tensors (%d)", c->path, cfg.n_layers,
                         c->in.n);
    // The file must hold exactly the config's parameters (each of its shape), tokens and
    // targets: checked on the header alone, before anything is allocated for the model.
    phax_layout L;
    if (phax_layout_build(&L, &cfg)) return phax_fail("%s: config: %s", c->path, phax_error());
    int rc = PHAX_OK;
    for (int i = 0; i < L.n && !rc; i++) {
        const phax_param_info *p = &L.p[i];
        const phax_st_tensor *t = phax_st_find(&c->in, p->name);
        if (!t) {
            rc = phax_fail("%s: no tensor '%s' (a parameter of this config; phax oracle model --example writes a "
                           "complete set)", c->path, p->name);
        } else if (t->ndim != p->ndim || memcmp(t->shape, p->shape, (size_t)p->ndim * sizeof *p->shape)) {
            char want[96];
            int o = 0;
            for (int j = 0; j < p->ndim; j++)
                o += snprintf(want + o, sizeof want - (size_t)o, "%s%lld", j ? ", " : "", (long long)p->shape[j]);
            rc = phax_fail("%s: tensor '%s' does not have the shape this config gives it (%s)", c->path, p->name, want);
        }
    }
    for (int i = 0; i < c->in.n && !rc; i++) {
        const char *name = c->in.t[i].name;
        if (!strcmp(name, "tokens") || !strcmp(name, "targets") || phax_layout_find(&L, name) >= 0) continue;
        if (!strcmp(name, "lm_head.weight") && cfg.tie_embeddings)
            rc = phax_fail("%s: tensor 'lm_head.weight' is given but the config ties the embeddings "
                           "(tie_embeddings true: the head is embed.weight)", c->path);
        else
            rc = phax_fail("%s: tensor '%s' is not a parameter of this config, nor tokens or targets (phax oracle "
                           "model --example lists a complete set)", c->path, shown(name, b, sizeof b));
    }
    // Parameters and their gradients, the gradients' writer copy; logits (kept, written,
    // and the backward's own logits and their gradient); the activations; tokens, targets.
    size_t P = L.numel, nV = smul(smul((size_t)B, (size_t)T), (size_t)cfg.vocab_size);
    phax_layout_free(&L);
    if (rc) return rc;
    // phax check: the baseline's gradients, logits and loss, and what it holds meanwhile.
    TRY(budget_check(c, sadd(sadd(smul(3, P), smul(4, nV)), sadd(model_act_doubles(&cfg, B, T), (size_t)B * T)),
                     sadd(sadd(P, nV), sadd(phax_naive_model_doubles(&cfg, B, T), 1))));
    int32_t *tok = geti(c, "tokens", 2, ts), *tg = geti(c, "targets", 2, ts);
    TRYP(tok && tg);
    ref_model m;
    if (ref_model_new(&m, &cfg, 0)) return phax_fail("%s: %s", c->path, phax_error());
    for (int i = 0; i < m.layout.n && !rc; i++) {
        const phax_param_info *p = &m.layout.p[i];
        rc = phax_st_get_f64(&c->in, p->name, p->ndim, p->shape, m.params + p->offset);
    }
    size_t V = (size_t)m.cfg.vocab_size;
    double loss = NAN, *logits = dalloc(c, nV);
    if (!rc && !logits) rc = PHAX_ERR;
    if (!rc) rc = ref_model_forward(&m, tok, tg, B, T, window, logits, &loss);
    if (!rc) rc = ref_model_backward(&m, tok, tg, B, T, window, &loss);
    int64_t lsh[3] = {B, T, (int64_t)V};
    if (!rc) rc = put(c, "logits", logits, 3, lsh);
    if (!rc) rc = put(c, "loss", &loss, 0, NULL);
    for (int i = 0; i < m.layout.n && !rc; i++) {
        const phax_param_info *p = &m.layout.p[i];
        char name[128];
        snprintf(name, sizeof name, "grad.%s", p->name);
        rc = put(c, name, m.grads + p->offset, p->ndim, p->shape);
    }
    if (!rc && c->prec) {  // phax check: the baseline on the same parameters, tokens and window
        double *bl = dalloc(c, nV), *bloss = dalloc(c, 1), *bg = dalloc(c, m.layout.numel);
        rc = bl && bloss && bg ? PHAX_OK : PHAX_ERR;
        if (!rc)
            rc = phax_naive_model(c->prec, bl, bloss, bg, &m.cfg, &m.layout, m.params, tok, tg, B, T, window, NULL);
        if (!rc) rc = put_base(c, "logits", bl);
        if (!rc) rc = put_base(c, "loss", bloss);
        for (int i = 0; i < m.layout.n && !rc; i++) {
            char name[128];
            snprintf(name, sizeof name, "grad.%s", m.layout.p[i].name);
            rc = put_base(c, name, bg + m.layout.p[i].offset);
        }
    }
    if (rc && !strstr(phax_error(), c->path)) phax_fail("%s: %s", c->path, phax_error());
    ref_model_free(&m);
    return rc;
}

// --- examples: a random valid input for each op -------------------------------------------------
typedef struct {
    phax_st_writer *w;
    phax_rng *r;
    int err;
} exw;

static void ex_f(exw *e, const char *name, double lo, double hi, int ndim, ...) {
    int64_t s[8];
    va_list ap;
    va_start(ap, ndim);
    for (int i = 0; i < ndim; i++) s[i] = va_arg(ap, int);
    va_end(ap);
    size_t n = numel(ndim, s);
    double *x = n < (size_t)1 << 32 ? malloc((n ? n : 1) * sizeof *x) : NULL;
    if (!x) {
        e->err = phax_fail("out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) x[i] = phax_rng_uniform_range(e->r, lo, hi);
    if (phax_st_add_f64(e->w, name, x, ndim, s)) e->err = PHAX_ERR;
    free(x);
}

static void ex_i(exw *e, const char *name, int hi, int ndim, ...) {
    int64_t s[8];
    va_list ap;
    va_start(ap, ndim);
    for (int i = 0; i < ndim; i++) s[i] = va_arg(ap, int);
    va_end(ap);
    size_t n = numel(ndim, s);
    int32_t *x = n < (size_t)1 << 32 ? malloc((n ? n : 1) * sizeof *x) : NULL;
    if (!x) {
        e->err = phax_fail("out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) x[i] = (int32_t)phax_rng_below(e->r, (uint64_t)hi);
    if (phax_st_add_i32(e->w, name, x, ndim, s)) e->err = PHAX_ERR;
    free(x);
}

static void ex_meta(exw *e, const char *k, const char *v) {
    if (phax_st_add_meta(e->w, k, v)) e->err = PHAX_ERR;
}

// Sizes are small and awkward on purpose (odd T, GQA group 2, head dims not powers of two).
static void ex_embedding(exw *e) { ex_i(e, "tokens", 11, 2, 2, 5), ex_f(e, "weight", -1, 1, 2, 11, 6); }
static void ex_linear(exw *e) {
    ex_f(e, "x", -1, 1, 3, 2, 5, 6), ex_f(e, "weight", -0.5, 0.5, 2, 7, 6), ex_f(e, "bias", -1, 1, 1, 7);
}
static void ex_rmsnorm(exw *e) { ex_f(e, "x", -2, 2, 3, 2, 5, 6), ex_f(e, "weight", 0.5, 1.5, 1, 6); }
static void ex_layernorm(exw *e) { ex_rmsnorm(e), ex_f(e, "bias", -1, 1, 1, 6); }
static void ex_headnorm(exw *e) {
    ex_f(e, "x", -2, 2, 3, 2, 5, 6), ex_f(e, "weight", 0.5, 1.5, 1, 6), ex_meta(e, "heads", "2");
}
static void ex_act(exw *e) { ex_f(e, "x", -3, 3, 2, 3, 7); }
static void ex_swiglu(exw *e) {
    ex_f(e, "x", -1, 1, 3, 2, 5, 6), ex_f(e, "w_gate", -0.4, 0.4, 2, 10, 6),
        ex_f(e, "w_up", -0.4, 0.4, 2, 10, 6), ex_f(e, "w_down", -0.3, 0.3, 2, 6, 10);
}
static void ex_rope(exw *e) { ex_f(e, "x", -1, 1, 4, 2, 5, 3, 6), ex_meta(e, "pos0", "3"); }
static void ex_attention(exw *e) {
    ex_f(e, "q", -1, 1, 4, 2, 7, 4, 6), ex_f(e, "k", -1, 1, 4, 2, 7, 2, 6), ex_f(e, "v", -1, 1, 4, 2, 7, 2, 5);
    ex_f(e, "logscale", log(5.0), log(20.0), 1, 4);
    ex_meta(e, "score", "cosine"), ex_meta(e, "window", "3"), ex_meta(e, "rope", "1");
}
static void ex_dss_kernel(exw *e) {
    ex_f(e, "lambda_re", -2, 0.5, 1, 5), ex_f(e, "lambda_im", -2, 1, 1, 5), ex_f(e, "c_re", -1, 1, 2, 3, 5),
        ex_f(e, "c_im", -1, 1, 2, 3, 5), ex_meta(e, "T", "9");
}
static void ex_ssm_conv(exw *e) {
    ex_f(e, "u", -1, 1, 3, 2, 9, 3), ex_f(e, "k", -1, 1, 2, 3, 9), ex_f(e, "d", -1, 1, 1, 3);
}
static void ex_ssm_recurrent(exw *e) {
    ex_f(e, "u", -1, 1, 3, 2, 9, 3), ex_f(e, "d", -1, 1, 1, 3), ex_f(e, "lambda_re", -2, 0.5, 1, 5),
        ex_f(e, "lambda_im", -2, 1, 1, 5), ex_f(e, "c_re", -1, 1, 2, 3, 5), ex_f(e, "c_im", -1, 1, 2, 3, 5);
}
static void ex_mlstm(exw *e) {
    ex_f(e, "q", -1, 1, 4, 2, 7, 2, 3), ex_f(e, "k", -1, 1, 4, 2, 7, 2, 3), ex_f(e, "v", -1, 1, 4, 2, 7, 2, 5);
    ex_f(e, "igate", -3, 3, 3, 2, 7, 2), ex_f(e, "fgate", 1, 5, 3, 2, 7, 2), ex_meta(e, "form", "parallel");
}
static void ex_mix(exw *e) { ex_f(e, "branches", -1, 1, 3, 3, 5, 6), ex_f(e, "p", -1, 1, 1, 3); }
// The loss is a scalar: training backpropagates 1 into it, so the example gives grad.loss = 1
// (a 0-d tensor) rather than leave the oracle to draw one N(0, 1) (docs/conventions.md).
static void ex_cross_entropy(exw *e) {
    ex_f(e, "logits", -3, 3, 3, 2, 5, 11), ex_i(e, "targets", 11, 2, 2, 5);
    double one = 1.0;
    if (!e->err && phax_st_add_f64(e->w, "grad.loss", &one, 0, NULL)) e->err = PHAX_ERR;
}
static void ex_adamw(exw *e) {
    ex_f(e, "param", -1, 1, 2, 3, 4), ex_f(e, "gradient", -1, 1, 2, 3, 4), ex_meta(e, "step", "1"),
        ex_meta(e, "lr", "0.001");
}
static void ex_model(exw *e) {
    phax_model_cfg cfg = phax_model_cfg_default(PHAX_FAMILY_PHA);
    cfg.vocab_size = 11, cfg.d_model = 12, cfg.n_layers = 2, cfg.n_heads = 2, cfg.n_kv_heads = 1;
    cfg.gss_expand = 10, cfg.gss_hidden = 3, cfg.gss_state = 5, cfg.ffn_hidden = 16;
    ref_model m;
    if (ref_model_new(&m, &cfg, phax_rng_u64(e->r))) {
        e->err = PHAX_ERR;
        return;
    }
    char *json = phax_model_cfg_to_json(&m.cfg);
    if (!json) e->err = PHAX_ERR;
    else ex_meta(e, "config", json);
    free(json);
    for (int i = 0; i < m.layout.n && !e->err; i++) {
        const phax_param_info *p = &m.layout.p[i];
        if (phax_st_add_f64(e->w, p->name, m.params + p->offset, p->ndim, p->shape)) e->err = PHAX_ERR;
    }
    ref_model_free(&m);
    ex_i(e, "tokens", 11, 2, 2, 7), ex_i(e, "targets", 11, 2, 2, 7);
}

// --- the table ---------------------------------------------------------------------------------
typedef struct {
    const char *name;
    int (*run)(octx *);
    void (*example)(exw *);
    const char *inputs, *attrs, *outputs;
    // What IN may hold, as space-separated names: tensors (optional ones too),
    // attribute keys, and the outputs whose upstream gradient grad.<output> may be
    // given. Anything else is refused: a misspelt key or name would otherwise be
    // ignored and the comparison silently run on a default.
    const char *tensor_names, *attr_names, *upstream_names;
} oracle_op;

static const oracle_op OPS[] = {
    {"embedding", op_embedding, ex_embedding, "tokens (any shape, int), weight (V, d)", "-",
     "y (tokens.shape + (d)); grad.weight", "tokens weight", "", "y"},
    {"linear", op_linear, ex_linear, "x (..., in), weight (out, in), bias (out) optional", "-",
     "y (..., out); grad.x, grad.weight, grad.bias", "x weight bias", "", "y"},
    {"rmsnorm", op_rmsnorm, ex_rmsnorm, "x (..., d), weight (d)", "eps=1e-6", "y; grad.x, grad.weight", "x weight", "eps",
     "y"},
    {"layernorm", op_layernorm, ex_layernorm, "x (..., d), weight (d), bias (d) optional", "eps=1e-5",
     "y; grad.x, grad.weight, grad.bias", "x weight bias", "eps", "y"},
    {"headnorm", op_headnorm, ex_headnorm, "x (..., H*dh), weight (H*dh)", "heads (required), eps=1e-6",
     "y; grad.x, grad.weight", "x weight", "heads eps", "y"},
    {"gelu", op_gelu, ex_act, "x (any shape)", "-", "y; grad.x", "x", "", "y"},
    {"silu", op_silu, ex_act, "x (any shape)", "-", "y; grad.x", "x", "", "y"},
    {"swiglu", op_swiglu, ex_swiglu, "x (..., d), w_gate (hid, d), w_up (hid, d), w_down (d, hid)", "-",
     "y (..., d); grad.x, grad.w_gate, grad.w_up, grad.w_down", "x w_gate w_up w_down", "", "y"},
    {"rope", op_rope, ex_rope, "x (B, T, H, dh)", "rope_base=10000, pos0=0", "y; grad.x", "x", "rope_base pos0", "y"},
    {"attention", op_attention, ex_attention,
     "q (B, T, Hq, dh), k (B, T, Hkv, dh), v (B, T, Hkv, dv), logscale (Hq) if score=cosine",
     "score=dot|cosine, window=0 (0 = full), rope=1, rope_base=10000, pos0=0",
     "y (B, T, Hq, dv); grad.q, grad.k, grad.v, grad.logscale", "q k v logscale", "score window rope rope_base pos0", "y"},
    {"dss_kernel", op_dss_kernel, ex_dss_kernel, "lambda_re (N), lambda_im (N), c_re (H, N), c_im (H, N)",
     "T (required, <= 65536)", "k (H, T); grad.lambda_re, grad.lambda_im, grad.c_re, grad.c_im",
     "lambda_re lambda_im c_re c_im", "T", "k"},
    {"ssm_conv", op_ssm_conv, ex_ssm_conv, "u (B, T, H), k (H, T), d (H)", "-", "y (B, T, H); grad.u, grad.k, grad.d", "u k d", "", "y"},
    {"ssm_recurrent", op_ssm_recurrent, ex_ssm_recurrent,
     "u (B, T, H), lambda_re (N), lambda_im (N), c_re (H, N), c_im (H, N), d (H)", "-",
     "y (B, T, H); grad.u, grad.lambda_re, grad.lambda_im, grad.c_re, grad.c_im, grad.d",
     "u lambda_re lambda_im c_re c_im d", "", "y"},
    {"mlstm", op_mlstm, ex_mlstm, "q (B, T, H, dqk), k (B, T, H, dqk), v (B, T, H, dv), igate (B, T, H), fgate (B, T, H)",
     "form=parallel|recurrent, eps=1e-6, m0=0 (recurrent), grad=exact|stopgrad-normalizer (parallel: the normaliser "
     "and stabiliser held constant in the backward)", "h (B, T, H, dv); grad.q, grad.k, grad.v, grad.igate, grad.fgate",
     "q k v igate fgate", "form eps m0 grad", "h"},
    {"mix", op_mix, ex_mix, "branches (nb, ...), p (nb)", "-", "y (...); grad.branches, grad.p", "branches p", "", "y"},
    {"cross_entropy", op_cross_entropy, ex_cross_entropy, "logits (..., V), targets (...) int, -1 = ignored", "-",
     "loss (scalar); grad.logits", "logits targets", "", "loss"},
    {"adamw", op_adamw, ex_adamw, "param, gradient, exp_avg (optional, 0), exp_avg_sq (optional, 0): one shape",
     "lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, clip=1, step=1, decay=1",
     "param, exp_avg, exp_avg_sq (after the step), grad_norm (before clipping)",
     "param gradient exp_avg exp_avg_sq", "lr beta1 beta2 eps weight_decay clip step decay", ""},
    {"model", op_model, ex_model, "every parameter by name (phax layout), tokens (B, T), targets (B, T)",
     "config (JSON, required), window=-1 (SWAX family: -1 = w_long, 0 = full)",
     "logits (B, T, V), loss; grad.<param> for every parameter",
     "tokens targets", "config window", ""},  // and the parameters of the config's layout: op_model checks those
};
#define NOPS ((int)(sizeof OPS / sizeof OPS[0]))

static const oracle_op *find_op(const char *name) {
    for (int i = 0; i < NOPS; i++)
        if (!strcmp(OPS[i].name, name)) return &OPS[i];
    return NULL;
}

// Is `name` one of the space-separated words of `list`?
static int in_list(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        while (*p == ' ') p++;
        size_t w = strcspn(p, " ");
        if (w && w == n && !strncmp(p, name, n)) return 1;
        p += w;
    }
    return 0;
}

// Metadata every op accepts: "seed" (the drawn upstream gradients), "op" (the
// examples write it; it must name the op run), "format" (torch's safetensors
// writers add "pt").
#define COMMON_ATTRS "seed op format"

// Every attribute key and tensor name of IN must mean something to the op.
static int check_names(octx *c, const oracle_op *op) {
    char b[256];
    for (int i = 0; i < c->in.nmeta; i++) {
        const char *k = c->in.meta_key[i];
        if (!in_list(op->attr_names, k) && !in_list(COMMON_ATTRS, k))
            return phax_fail("%s: unknown attribute '%s' for op '%s' (attributes: %s%s%s)", c->path,
                             shown(k, b, sizeof b), op->name, op->attr_names, *op->attr_names ? " " : "",
                             COMMON_ATTRS);
    }
    const char *opm = phax_st_meta(&c->in, "op");
    if (opm && strcmp(opm, op->name))
        return phax_fail("%s: metadata 'op' is '%s' but the op run is '%s'", c->path, shown(opm, b, sizeof b),
                         op->name);
    for (int i = 0; i < c->in.n; i++) {
        const char *t = c->in.t[i].name;
        if (in_list(op->tensor_names, t) || (!strncmp(t, "grad.", 5) && in_list(op->upstream_names, t + 5)))
            continue;
        if (op->run == op_model) continue;  // parameters: op_model checks them against the config's layout
        return phax_fail("%s: tensor '%s' is not an input of op '%s' (inputs: %s%s%s)", c->path,
                         shown(t, b, sizeof b), op->name, op->tensor_names, *op->upstream_names ? ", grad." : "",
                         op->upstream_names);
    }
    return PHAX_OK;
}

// The memory limit: --max-memory MIB, or 96 MiB plus 16x the input's tensors in float64.
static void set_limit(octx *c, double max_mib) {
    if (max_mib > 0) {
        c->limit = (size_t)(max_mib * (1 << 20));
    } else {  // the default (docs/oracle.md)
        size_t in = 0;
        for (int i = 0; i < c->in.n; i++) in = sadd(in, smul(c->in.t[i].numel, sizeof(double)));
        c->limit = sadd(ORACLE_BASE_BYTES, smul(ORACLE_INPUT_FACTOR, in));
    }
}

// --- phax check's entry (src/oracle.h) ----------------------------------------------------------
#define CHECKED_OPS \
    "embedding linear rmsnorm layernorm headnorm gelu silu swiglu rope attention ssm_conv mlstm mix cross_entropy adamw " \
    "dss_kernel ssm_recurrent model"

// The baseline (and another algorithm's, where the op has one) is made five times: rounded
// to nearest (c), and with stochastic rounding from four seeds (alt[]), so that a tensor of a
// few elements is not judged against one lucky draw of the rounding errors (docs/oracle.md,
// "The bound").
struct phax_oracle_eval {
    octx c, alt[SR_RUNS];
};

const char *phax_oracle_checked_ops(void) { return CHECKED_OPS; }

static void ctx_free(octx *c) {
    phax_st_free(&c->in);
    for (int i = 0; i < c->nallocs; i++) free(c->allocs[i]);
    free(c->allocs), free(c->col);
    c->allocs = NULL, c->col = NULL;
    c->nallocs = c->capallocs = c->ncol = c->capcol = 0;
}

// IN from the file in_path (buf NULL) or from the image buf (n bytes; in_path its label).
static int read_in(octx *c, const char *in_path, const void *buf, size_t n) {
    int rc = buf ? phax_st_read_mem(&c->in, buf, n, in_path) : phax_st_read(&c->in, in_path);
    return rc ? rc : phax_names_apply(c->names, &c->in);
}

// IN read into c (set up by the caller), its names and the seed of its upstream gradients
// checked, then op run on it. *seed: the seed (0 when absent).
static int run_ctx(octx *c, const oracle_op *op, const char *in_path, const void *buf, size_t n, double max_mib,
                   long *seed) {
    *seed = 0;
    int rc = read_in(c, in_path, buf, n);
    if (!rc) set_limit(c, max_mib);
    if (!rc) rc = check_names(c, op);
    if (!rc) rc = attr_long(c, "seed", 0, 0, LONG_MAX, seed);
    c->rng = phax_rng_new((uint64_t)*seed);
    if (!rc) rc = op->run(c);
    return rc;
}

static phax_oracle_eval *eval_new(const char *opname, const char *in_path, const void *buf, size_t n,
                                  const phax_precision *pr, double max_mib, const phax_names *names) {
    const oracle_op *op = find_op(opname);
    if (!op) {
        phax_fail("%s: unknown op '%s' (see phax oracle --list)", in_path, opname);
        return NULL;
    }
    if (!in_list(CHECKED_OPS, op->name)) {
        phax_fail("check: op '%s' has no precision baseline yet (ops checked: %s)", op->name, CHECKED_OPS);
        return NULL;
    }
    phax_oracle_eval *e = calloc(1, sizeof *e);
    if (!e) {
        phax_fail("check: out of memory");
        return NULL;
    }
    octx *c = &e->c;
    c->path = in_path, c->op = op->name, c->prec = pr, c->names = names;
    long seed;
    int rc = run_ctx(c, op, in_path, buf, n, max_mib, &seed);
    for (int k = 0; k < SR_RUNS && !rc; k++) {
        octx *a = &e->alt[k];
        a->path = in_path, a->op = op->name, a->prec = pr, a->names = names;
        rc = read_in(a, in_path, buf, n);
        if (!rc) set_limit(a, max_mib);
        a->rng = phax_rng_new((uint64_t)seed);  // the same upstream gradients
        phax_round_stochastic(0x9e3779b97f4a7c15ull * (uint64_t)(k + 1));
        if (!rc) rc = op->run(a);
        phax_round_stochastic(0);
        for (int i = 0; i < c->ncol && !rc; i++)
            for (int j = 0; j < a->ncol; j++)
                if (!strcmp(c->col[i].name, a->col[j].name))
                    c->col[i].base_sr[k] = a->col[j].base, c->col[i].base_alt_sr[k] = a->col[j].base_alt;
    }
    if (rc) {
        phax_oracle_eval_free(e);
        return NULL;
    }
    return e;
}

phax_oracle_eval *phax_oracle_eval_new(const char *opname, const char *in_path, const phax_precision *pr,
                                       double max_mib, const phax_names *names) {
    return eval_new(opname, in_path, NULL, 0, pr, max_mib, names);
}

phax_oracle_eval *phax_oracle_truth_new(const char *opname, const char *in_path, const void *buf, size_t n,
                                        const phax_oracle_variant *var, double max_mib, const phax_names *names) {
    const oracle_op *op = find_op(opname);
    if (!op) {
        phax_fail("%s: unknown op '%s' (see phax oracle --list)", in_path, opname);
        return NULL;
    }
    phax_oracle_eval *e = calloc(1, sizeof *e);
    if (!e) {
        phax_fail("check: out of memory");
        return NULL;
    }
    octx *c = &e->c;  // out and prec NULL: every output kept in col, no baseline made
    c->path = in_path, c->op = op->name, c->names = names, c->var = var;
    long seed;  // the same upstream gradients as the judged run
    if (run_ctx(c, op, in_path, buf, n, max_mib, &seed)) {
        phax_oracle_eval_free(e);
        return NULL;
    }
    return e;
}

phax_oracle_eval *phax_oracle_eval_new_mem(const char *opname, const void *in, size_t n, const char *label,
                                           const phax_precision *pr, double max_mib) {
    if (!in) {
        phax_fail("%s: NULL input image", label);
        return NULL;
    }
    return eval_new(opname, label, in, n, pr, max_mib, NULL);
}

int phax_oracle_eval_count(const phax_oracle_eval *e) { return e->c.ncol; }

const phax_oracle_tensor *phax_oracle_eval_tensor(const phax_oracle_eval *e, int i) {
    return i >= 0 && i < e->c.ncol ? &e->c.col[i] : NULL;
}

void phax_oracle_eval_free(phax_oracle_eval *e) {
    if (!e) return;
    char msg[1024];  // keep the error a failed run recorded
    snprintf(msg, sizeof msg, "%s", phax_error());
    ctx_free(&e->c);
    for (int k = 0; k < SR_RUNS; k++) ctx_free(&e->alt[k]);
    free(e);
    phax_fail("%s", msg);
}

static void list_ops(void) {
    printf("phax oracle ops (every input may be F64/F32/BF16/F16; gradients are float64;\n"
           "an upstream gradient grad.<output> is read from IN or drawn N(0,1) from metadata 'seed'):\n");
    for (int i = 0; i < NOPS; i++)
        printf("\n%s\n  inputs:  %s\n  attrs:   %s\n  outputs: %s\n", OPS[i].name, OPS[i].inputs,
               OPS[i].attrs, OPS[i].outputs);
}

// `phax oracle OP IN OUT` up to the writing: IN from in_path or the image buf (n bytes,
// in_path its label); *out: every output and gradient, and the metadata OUT carries.
// On failure *out is NULL and the reason in phax_error().
static int oracle_run(const char *opname, const char *in_path, const void *buf, size_t n, double max_mib,
                      const phax_names *names, phax_st_writer **out) {
    *out = NULL;
    const oracle_op *op = find_op(opname);
    if (!op) return phax_fail("%s: unknown op '%s' (see phax oracle --list)", in_path, opname);
    octx c = {.path = in_path, .op = op->name, .names = names};
    if (read_in(&c, in_path, buf, n)) {
        ctx_free(&c);
        return PHAX_ERR;
    }
    set_limit(&c, max_mib);
    long seed = 0;
    int rc = check_names(&c, op);
    if (!rc) rc = attr_long(&c, "seed", 0, 0, LONG_MAX, &seed);
    c.rng = phax_rng_new((uint64_t)seed);
    c.out = rc ? NULL : phax_st_writer_new();
    if (!rc && !c.out) rc = PHAX_ERR;
    if (!rc) rc = op->run(&c);
    if (!rc) rc = phax_st_add_meta(c.out, "op", op->name);
    if (!rc) rc = phax_st_add_meta(c.out, "phax_version", PHAX_VERSION);
    char msg[1024];  // ctx_free must not lose the reason
    snprintf(msg, sizeof msg, "%s", phax_error());
    ctx_free(&c);
    if (rc) {
        phax_st_writer_free(c.out);
        return phax_fail("%s", msg);
    }
    *out = c.out;
    return PHAX_OK;
}

int phax_oracle_run_mem(const char *opname, const void *in, size_t n, const char *label, double max_mib,
                        unsigned char **out, size_t *out_len) {
    *out = NULL, *out_len = 0;
    if (!in) return phax_fail("%s: NULL input image", label);
    phax_st_writer *w = NULL;
    int rc = oracle_run(opname, label, in, n, max_mib, NULL, &w);
    if (!rc) rc = phax_st_write_mem(w, out, out_len);
    phax_st_writer_free(w);
    return rc;
}

int phax_oracle_main(int argc, char **argv) {
    oracle_opts o;
    oracle_parse_args(argc, argv, &o);
    if (o.list) {
        list_ops();
        return 0;
    }
    if (o.example_out) {
        const oracle_op *op = find_op(o.op);
        if (!op) phax_die("oracle: unknown op '%s' (see phax oracle --list)", o.op);
        phax_rng r = phax_rng_new(phax_hash_str(op->name));
        exw e = {.w = phax_st_writer_new(), .r = &r};
        if (!e.w) phax_die("%s", phax_error());
        op->example(&e);
        if (!e.err) e.err = phax_st_add_meta(e.w, "op", op->name);
        if (!e.err) e.err = phax_st_add_meta(e.w, "seed", "0");
        if (e.err || phax_st_write(e.w, o.example_out)) {
            phax_st_writer_free(e.w);
            phax_die("%s", phax_error());
        }
        phax_st_writer_free(e.w);
        return 0;
    }
    const char *pos[3] = {o.op, o.in, o.out}, *map = o.names;
    double max_mib = o.max_mib;
    phax_names *names = map ? phax_names_load(map) : NULL;
    if (map && !names) phax_die("%s", phax_error());
    phax_st_writer *w = NULL;
    if (oracle_run(pos[0], pos[1], NULL, 0, max_mib, names, &w) || phax_st_write(w, pos[2])) {
        phax_st_writer_free(w);
        phax_names_free(names);
        phax_die("%s", phax_error());
    }
    phax_st_writer_free(w);
    phax_names_free(names);
    return 0;
}
