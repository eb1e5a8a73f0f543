// The context an oracle op runs in (src/oracle_ctx.h): saturating sizes, the memory budget
// planned before anything is allocated, attributes, tensors read from IN and written to OUT (or
// kept for phax check), upstream gradients.
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
#include "oracle_ctx.h"


// An attribute: the variant's value where it sets this key, else IN's metadata (NULL: absent).
const char *ox_meta(octx *c, const char *key) {
    if (c->var)
        for (int i = 0; i < c->var->n; i++)
            if (!strcmp(c->var->key[i], key)) return c->var->value[i];
    return phax_st_meta(&c->in, key);
}

// --- sizes: saturating, so an absurd shape or attribute reads as "too large", never wraps ----
size_t ox_smul(size_t a, size_t b) { return b && a > SIZE_MAX / b ? SIZE_MAX : a * b; }
size_t ox_sadd(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

// A user-supplied name or key as it may appear in a one-line message: printable
// ASCII kept, anything else as \xNN, at most ~60 characters shown.
const char *ox_shown(const char *s, char *buf, size_t n) {
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
// again as the truth (budget), the model's its own count (op_model); and it holds 2 + SR_RUNS
// such runs at once (the baseline rounded to nearest and stochastically, and one of the further
// roundings a tensor of few elements gets: eval_new), each with another sound algorithm's
// baseline where the op has one (alt_doubles).
int ox_budget_check_alt(octx *c, size_t doubles, size_t check_doubles, size_t alt_doubles) {
    if (c->prec) doubles = ox_smul(ox_sadd(ox_sadd(doubles, check_doubles), alt_doubles), 2 + SR_RUNS);
    size_t bytes = ox_smul(doubles, sizeof(double));
    if (bytes <= c->limit) return PHAX_OK;
    if (bytes == SIZE_MAX)
        return phax_fail("%s: op '%s' on these shapes and attributes would need more memory than can be counted; "
                         "check the sizes", c->path, c->op);
    return phax_fail("%s: op '%s' on these shapes and attributes would need %.1f MiB, more than the limit of %.1f MiB "
                     "(see docs/oracle.md; --max-memory MIB raises it)", c->path, c->op, (double)bytes / (1 << 20),
                     (double)c->limit / (1 << 20));
}

int ox_budget_check(octx *c, size_t doubles, size_t check_doubles) {
    return ox_budget_check_alt(c, doubles, check_doubles, 0);
}
int ox_budget(octx *c, size_t doubles) { return ox_budget_check(c, doubles, doubles); }

void *ox_keep(octx *c, void *p) {
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

double *ox_dalloc(octx *c, size_t n) {
    double *p = ox_keep(c, calloc(n ? n : 1, sizeof(double)));
    if (!p) phax_fail("oracle: out of memory (%zu doubles)", n);
    return p;
}

size_t ox_numel(int ndim, const int64_t *s) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n = ox_smul(n, (size_t)s[i]);
    return n;
}

// --- attributes (strings in __metadata__) ------------------------------------------------
// Every attr_* sets *v to the default first, so *v is defined on every path
// (and gcc -O2 has no maybe-uninitialized to report at the callers).
int ox_attr_long(octx *c, const char *key, long def, long lo, long hi, long *v) {
    const char *s = ox_meta(c, key);
    *v = def;
    if (!s) return PHAX_OK;
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    char b[256];
    if (errno || end == s || *end)
        return phax_fail("%s: attribute '%s' must be an integer, got '%s'", c->path, key, ox_shown(s, b, sizeof b));
    if (x < lo || x > hi) return phax_fail("%s: attribute '%s' = %ld is outside [%ld, %ld]", c->path, key, x, lo, hi);
    *v = x;
    return PHAX_OK;
}

int ox_attr_int(octx *c, const char *key, int def, int lo, int hi, int *v) {
    long x;
    *v = def;
    if (ox_attr_long(c, key, def, lo, hi, &x)) return PHAX_ERR;
    *v = (int)x;
    return PHAX_OK;
}

int ox_attr_double(octx *c, const char *key, double def, double *v) {
    const char *s = ox_meta(c, key);
    *v = def;
    if (!s) return PHAX_OK;
    char *end;
    double x = strtod(s, &end);
    char b[256];
    if (end == s || *end || !isfinite(x))
        return phax_fail("%s: attribute '%s' must be a finite number, got '%s'", c->path, key, ox_shown(s, b, sizeof b));
    *v = x;
    return PHAX_OK;
}

// Index of the attribute's value in `choices` (NULL-terminated); def if absent.
int ox_attr_choice(octx *c, const char *key, const char *const *choices, int def, int *v) {
    const char *s = ox_meta(c, key);
    *v = def;
    if (!s) return PHAX_OK;
    for (int i = 0; choices[i]; i++)
        if (!strcmp(s, choices[i])) {
            *v = i;
            return PHAX_OK;
        }
    char b[256];
    return phax_fail("%s: attribute '%s' = '%s' is not one of the allowed values", c->path, key, ox_shown(s, b, sizeof b));
}

// --- tensors -------------------------------------------------------------------------------
// Shape of a tensor that must exist with ndim in [lo, hi].
int ox_shape_of(octx *c, const char *name, int lo, int hi, int *ndim, int64_t *shape) {
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

double *ox_getf(octx *c, const char *name, int ndim, const int64_t *shape) {
    double *x = ox_dalloc(c, ox_numel(ndim, shape));
    if (!x || phax_st_get_f64(&c->in, name, ndim, shape, x)) return NULL;
    return x;
}

int32_t *ox_geti(octx *c, const char *name, int ndim, const int64_t *shape) {
    int32_t *x = ox_keep(c, calloc(ox_numel(ndim, shape) ? ox_numel(ndim, shape) : 1, sizeof(int32_t)));
    if (!x) {
        phax_fail("oracle: out of memory");
        return NULL;
    }
    if (phax_st_get_i32(&c->in, name, ndim, shape, x)) return NULL;
    return x;
}

int ox_put(octx *c, const char *name, const double *x, int ndim, const int64_t *shape) {
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
    size_t n = ox_numel(ndim, shape);
    double *t = ox_dalloc(c, n);
    char *nm = ox_keep(c, strdup(name));
    if (!t || !nm) return phax_fail("check: out of memory");
    memcpy(t, x, n * sizeof *t);
    phax_oracle_tensor *o = &c->col[c->ncol++];
    *o = (phax_oracle_tensor){.name = nm, .ndim = ndim, .n = n, .truth = t};
    memcpy(o->shape, shape, (size_t)ndim * sizeof *shape);
    return PHAX_OK;
}

// The column of an output put before (phax check's baselines attach to it).
phax_oracle_tensor *ox_col_of(octx *c, const char *name) {
    for (int i = 0; i < c->ncol; i++)
        if (!strcmp(c->col[i].name, name)) return &c->col[i];
    phax_fail("check: no output '%s' for the baseline (internal)", name);
    return NULL;
}

// The baseline of an output put before (phax check only; the array is kept, not copied).
int ox_put_base(octx *c, const char *name, double *x) {
    phax_oracle_tensor *o = ox_col_of(c, name);
    return o ? (o->base = x, PHAX_OK) : PHAX_ERR;
}

// Another sound algorithm's baseline of an output put before (kept, not copied).
int ox_put_alt(octx *c, const char *name, double *x) {
    phax_oracle_tensor *o = ox_col_of(c, name);
    return o ? (o->base_alt = x, PHAX_OK) : PHAX_ERR;
}

// The upstream gradient of output `out`: tensor "grad.<out>" from IN when
// present (its shape must match), else N(0,1) draws from the seeded stream;
// either way it is written to OUT under the same name.
double *ox_upstream(octx *c, const char *out, int ndim, const int64_t *shape) {
    char name[128];
    snprintf(name, sizeof name, "grad.%s", out);
    double *g;
    if (phax_st_find(&c->in, name)) {
        g = ox_getf(c, name, ndim, shape);
    } else if (c->var && c->var->unit_upstream) {  // the variant "every upstream gradient 1"
        g = ox_dalloc(c, ox_numel(ndim, shape));
        if (g)
            for (size_t i = 0; i < ox_numel(ndim, shape); i++) g[i] = 1.0;
    } else {
        g = ox_dalloc(c, ox_numel(ndim, shape));
        if (g)
            for (size_t i = 0; i < ox_numel(ndim, shape); i++) g[i] = phax_rng_normal(&c->rng);
    }
    if (!g || ox_put(c, name, g, ndim, shape)) return NULL;
    if (!c->out) c->col[c->ncol - 1].upstream = 1;
    return g;
}


// Rows × last dim of a tensor of any rank ≥ 1.
void ox_rows_cols(int ndim, const int64_t *s, size_t *rows, int *cols) {
    *cols = (int)s[ndim - 1];
    *rows = ox_numel(ndim - 1, s);
}
