// `phax check OP IN.safetensors THEIRS.safetensors [--precision f32|tf32|bf16|f16] [--json]
// [--max-memory MIB]`:
// judge a user's outputs and gradients of one op against the float64 truth, with the bound
// flash-attention's tests use — ‖theirs − truth‖ ≤ C·‖baseline − truth‖ + floor·‖truth‖,
// the baseline being a straightforward evaluation at that precision (check/). Writes
// nothing but stdout. Exit 0: PASS; 1: FAIL; 2: cannot judge (usage, files, names, shapes).
// See docs/oracle.md, "phax check".
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oracle.h"
#include "phax/check.h"
#include "phax/safetensors.h"

// The bound's constants (docs/oracle.md, "The bound"): C times the baseline's error, plus
// PHAX_CHECK_FLOOR units of the precision's roundoff relative to ‖truth‖.
#define PHAX_CHECK_C 4.0
#define PHAX_CHECK_FLOOR 1.0

static _Noreturn void cannot(const char *msg) {
    fprintf(stderr, "phax: %s\n", msg);
    exit(2);
}

// ‖a − b‖ over n (b NULL: ‖a‖); +inf when anything is NaN or inf.
static double dist(const double *a, const double *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = b ? a[i] - b[i] : a[i];
        if (!isfinite(d) || !isfinite(a[i])) return INFINITY;
        s += d * d;
    }
    return sqrt(s);
}

static void json_num(double x) {
    if (isfinite(x)) printf("%.6g", x);
    else printf("null");
}

// A user's string as printed (and safe inside JSON quotes): printable ASCII, others as '?'.
static const char *clean(const char *s, char *buf, size_t n) {
    size_t o = 0;
    for (; *s && o + 1 < n; s++) buf[o++] = (*s >= 0x20 && *s < 0x7f && *s != '"' && *s != '\\') ? *s : '?';
    buf[o] = 0;
    return buf;
}

static void shape_str(char *buf, size_t n, int ndim, const int64_t *s) {
    size_t o = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < ndim && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%lld", i ? ", " : "", (long long)s[i]);
    if (o < n) snprintf(buf + o, n - o, ")");
}

typedef struct {
    const char *name;
    double rel, base_rel, ratio, bound_rel;
    int pass;
} row;

int phax_check_main(int argc, char **argv) {
    const char *pos[3], *pname = "f32";
    int npos = 0, json = 0;
    double max_mib = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--precision") && i + 1 < argc) pname = argv[++i];
        else if (!strcmp(argv[i], "--max-memory") && i + 1 < argc) {
            char *end;
            max_mib = strtod(argv[++i], &end);
            if (end == argv[i] || *end || !(max_mib >= 1 && max_mib <= 1 << 30))
                cannot("check: --max-memory takes a size in MiB, from 1 to 2^30");
        }
        else if (npos < 3 && argv[i][0] != '-') pos[npos++] = argv[i];
        else npos = 4;
    }
    if (npos != 3)
        cannot("usage: phax check OP IN.safetensors THEIRS.safetensors [--precision f32|tf32|bf16|f16] [--json] "
               "[--max-memory MIB]");
    const phax_precision *pr = phax_precision_find(pname);
    if (!pr) cannot("check: --precision must be one of f32, tf32, bf16, f16");
    phax_st_file th = {0};
    if (phax_st_read(&th, pos[2])) cannot(phax_error());
    phax_oracle_eval *ev = phax_oracle_eval_new(pos[0], pos[1], pr, max_mib);
    if (!ev) {
        phax_st_free(&th);
        cannot(phax_error());
    }
    int n = phax_oracle_eval_count(ev), nprob = 0, nrow = 0, nfail = 0;
    // One problem line per tensor of either file at most; one row per judged tensor (a model
    // has a gradient per parameter: hundreds of tensors).
    int maxprob = n + th.n + 1;
    char (*prob)[512] = malloc((size_t)maxprob * sizeof *prob), b[128], s1[128], s2[128], pb[512];
    row *rows = malloc((size_t)(n + 1) * sizeof *rows);
    if (!prob || !rows) cannot("check: out of memory");
    // Names, dtypes and shapes first: every problem one line, by name.
    for (int i = 0; i < n; i++) {
        const phax_oracle_tensor *o = phax_oracle_eval_tensor(ev, i);
        if (o->upstream) continue;
        const phax_st_tensor *t = phax_st_find(&th, o->name);
        shape_str(s1, sizeof s1, o->ndim, o->shape);
        if (!t) {
            snprintf(prob[nprob++], 512, "missing: tensor '%s' %s is not in %s", o->name, s1, pos[2]);
            continue;
        }
        if (t->dtype != PHAX_DT_F64 && t->dtype != PHAX_DT_F32 && t->dtype != PHAX_DT_BF16 && t->dtype != PHAX_DT_F16) {
            snprintf(prob[nprob++], 512, "dtype: tensor '%s' is %s in %s, expected F64, F32, BF16 or F16", o->name,
                     phax_dtype_name(t->dtype), pos[2]);
            continue;
        }
        if (t->ndim != o->ndim || memcmp(t->shape, o->shape, (size_t)o->ndim * sizeof *o->shape)) {
            shape_str(s2, sizeof s2, t->ndim, t->shape);
            snprintf(prob[nprob++], 512, "shape: tensor '%s' is %s in %s, expected %s", o->name, s2, pos[2], s1);
        }
    }
    for (int i = 0; i < th.n && nprob < maxprob; i++) {
        int known = 0;
        for (int j = 0; j < n; j++) known |= !strcmp(phax_oracle_eval_tensor(ev, j)->name, th.t[i].name);
        if (!known)
            snprintf(prob[nprob++], 512, "extra: tensor '%.100s' in %s is not an output of op '%s'",
                     clean(th.t[i].name, b, sizeof b), pos[2], pos[0]);
    }
    if (!nprob)
        for (int i = 0; i < n; i++) {
            const phax_oracle_tensor *o = phax_oracle_eval_tensor(ev, i);
            if (o->upstream) continue;
            double *x = malloc((o->n ? o->n : 1) * sizeof *x);
            if (!x || phax_st_to_f64(phax_st_find(&th, o->name), x)) {
                free(x);
                snprintf(prob[nprob++], 512, "%s: tensor '%s' cannot be read", pos[2], o->name);
                break;
            }
            double nt = dist(o->truth, NULL, o->n), et = dist(x, o->truth, o->n), eb = dist(o->base, o->truth, o->n);
            free(x);
            double scale = nt > 0 && isfinite(nt) ? nt : 1;
            row *r = &rows[nrow++];
            r->name = o->name;
            r->rel = et / scale;
            r->base_rel = eb / scale;
            // A baseline that is not finite (the precision overflowed) explains nothing: floor only.
            r->bound_rel = (isfinite(eb) ? PHAX_CHECK_C * r->base_rel : 0) + PHAX_CHECK_FLOOR * pr->u;
            r->ratio = eb > 0 ? et / eb : (et > 0 ? INFINITY : 0);
            r->pass = r->rel <= r->bound_rel;  // NaN or inf in theirs: rel is inf, fails
            nfail += !r->pass;
        }
    int rc = nprob ? 2 : nfail || !nrow ? 1 : 0;
    if (json) {
        printf("{\"op\": \"%s\", \"precision\": \"%s\", \"C\": %g, \"floor\": %.6g, \"verdict\": \"%s\", "
               "\"tensors\": [",
               pos[0], pr->name, PHAX_CHECK_C, PHAX_CHECK_FLOOR * pr->u, rc == 2 ? "MISMATCH" : rc ? "FAIL" : "PASS");
        for (int i = 0; i < nrow; i++) {
            printf("%s{\"name\": \"%s\", \"rel_err\": ", i ? ", " : "", rows[i].name);
            json_num(rows[i].rel);
            printf(", \"baseline_rel_err\": ");
            json_num(rows[i].base_rel);
            printf(", \"ratio\": ");
            json_num(rows[i].ratio);
            printf(", \"bound\": ");
            json_num(rows[i].bound_rel);
            printf(", \"pass\": %s}", rows[i].pass ? "true" : "false");
        }
        printf("], \"problems\": [");
        for (int i = 0; i < nprob; i++) printf("%s\"%s\"", i ? ", " : "", clean(prob[i], pb, sizeof pb));
        printf("]}\n");
    } else if (nprob) {
        for (int i = 0; i < nprob; i++) printf("%s\n", prob[i]);
        printf("MISMATCH: %s does not hold op '%s''s outputs for %s (%d problem%s above); nothing judged\n", pos[2],
               pos[0], pos[1], nprob, nprob == 1 ? "" : "s");
    } else {
        printf("phax check %s at %s: PASS iff ||theirs - truth|| <= C*||baseline - truth|| + floor*||truth||, "
               "C = %g, floor = %.3g (errors relative to ||truth||)\n",
               pos[0], pr->name, PHAX_CHECK_C, PHAX_CHECK_FLOOR * pr->u);
        int wn = 16;  // the name column: as wide as the longest name (a model's are ~30)
        for (int i = 0; i < nrow; i++)
            if ((int)strlen(rows[i].name) > wn) wn = (int)strlen(rows[i].name);
        printf("%-*s %11s %11s %11s %11s  %s\n", wn, "tensor", "rel.err", "baseline", "ratio", "bound", "verdict");
        int worst = 0;
        for (int i = 0; i < nrow; i++) {
            printf("%-*s %11.3e %11.3e %11.3g %11.3e  %s\n", wn, rows[i].name, rows[i].rel, rows[i].base_rel,
                   rows[i].ratio, rows[i].bound_rel, rows[i].pass ? "PASS" : "FAIL");
            if (!(rows[i].ratio <= rows[worst].ratio)) worst = i;
        }
        if (!nrow)
            printf("FAIL: nothing to judge\n");
        else if (rc)
            printf("FAIL: %d of %d tensors of %s exceed the %s bound (worst: %s, ratio %.3g)\n", nfail, nrow, pos[0],
                   pr->name, rows[worst].name, rows[worst].ratio);
        else
            printf("PASS: all %d tensors of %s within the %s bound (worst ratio %.3g, %s)\n", nrow, pos[0], pr->name,
                   rows[worst].ratio, rows[worst].name);
    }
    phax_oracle_eval_free(ev);
    phax_st_free(&th);
    free(prob), free(rows);
    return rc;
}
