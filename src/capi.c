// libphax's entry points (include/phax/capi.h): thin wrappers over what the commands run,
// so the library and `phax oracle` / `phax check` give the same bytes and the same verdicts.
#include "phax/capi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "judge.h"
#include "oracle.h"
#include "phax/checkpoint.h"
#include "phax/safetensors.h"

#define IN_LABEL "inputs"
#define THEIRS_LABEL "theirs"

const char *phax_capi_version(void) { return PHAX_VERSION; }
const char *phax_capi_error(void) { return phax_error(); }
void phax_capi_free(void *p) { free(p); }

int phax_capi_oracle(const char *op, const void *in, size_t n, double max_mib, unsigned char **out,
                     size_t *out_len) {
    if (!op || !out || !out_len) return phax_fail("phax_capi_oracle: NULL argument");
    return phax_oracle_run_mem(op, in, n, IN_LABEL, max_mib, out, out_len);
}

int phax_capi_check(const char *op, const void *in, size_t n, const void *theirs, size_t tn, const char *precision,
                    double max_mib, phax_check_report **out) {
    if (!op || !in || !theirs || !precision || !out) return phax_fail("phax_capi_check: NULL argument");
    *out = NULL;
    const phax_precision *pr = phax_precision_find(precision);
    if (!pr) return phax_fail("check: precision must be one of f32, tf32, bf16, f16");
    // The command's order: THEIRS read first, then the truth and baseline made.
    phax_st_file th = {0};
    if (phax_st_read_mem(&th, theirs, tn, THEIRS_LABEL)) return PHAX_ERR;
    phax_oracle_eval *ev = phax_oracle_eval_new_mem(op, in, n, IN_LABEL, pr, max_mib);
    phax_check_report *r = ev ? phax_check_judge(ev, &th, op, IN_LABEL, THEIRS_LABEL, pr) : NULL;
    if (!r) {
        phax_oracle_eval_free(ev);  // keeps the error
        phax_st_free(&th);
        return PHAX_ERR;
    }
    phax_check_diagnose(r, ev, &th, op, IN_LABEL, in, n, max_mib, NULL);
    phax_oracle_eval_free(ev);
    phax_st_free(&th);
    *out = r;
    return PHAX_OK;
}

int phax_capi_report_verdict(const phax_check_report *r) { return (int)r->verdict; }
int phax_capi_report_rows(const phax_check_report *r) { return r->nrow; }
int phax_capi_report_problems(const phax_check_report *r) { return r->nprob; }

const char *phax_capi_report_row(const phax_check_report *r, int i, double v[4], int *pass) {
    if (i < 0 || i >= r->nrow) return NULL;
    const phax_check_row *w = &r->row[i];
    v[0] = w->rel, v[1] = w->base_rel, v[2] = w->ratio, v[3] = w->bound;
    *pass = w->pass;
    return w->name;
}

const char *phax_capi_report_problem(const phax_check_report *r, int i) {
    return i >= 0 && i < r->nprob ? r->prob[i] : NULL;
}

char *phax_capi_report_text(const phax_check_report *r, int json) {
    char *s = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&s, &len);
    if (!fp) return NULL;
    phax_check_print(fp, r, json);
    if (fclose(fp)) {
        free(s);
        return NULL;
    }
    return s;
}

void phax_capi_report_free(phax_check_report *r) { phax_check_report_free(r); }

int phax_capi_checkpoint(const char *path, unsigned char **out, size_t *out_len) {
    if (!path || !out || !out_len) return phax_fail("phax_capi_checkpoint: NULL argument");
    *out = NULL, *out_len = 0;
    phax_ckpt ck;
    if (phax_ckpt_load(path, -1, &ck)) return PHAX_ERR;
    phax_st_writer *w = phax_st_writer_new();
    char *cfg = phax_model_cfg_to_json(&ck.cfg), num[32];
    double *x = NULL;  // one parameter at a time, widened exactly (the writer stores F32 from double)
    int rc = w && cfg ? PHAX_OK : phax_fail("%s: out of memory", ck.path);
    for (int i = 0; !rc && i < ck.layout.n; i++) {
        const phax_param_info *p = &ck.layout.p[i];
        double *y = realloc(x, (p->numel ? p->numel : 1) * sizeof *y);
        if (!y) {
            rc = phax_fail("%s: out of memory", ck.path);
            break;
        }
        x = y;
        for (size_t j = 0; j < p->numel; j++) x[j] = ck.params[p->offset + j];
        rc = phax_st_add_f32_from_f64(w, p->name, x, p->ndim, p->shape);
    }
    if (!rc) rc = phax_st_add_meta(w, "format", PHAX_CKPT_FORMAT);
    if (!rc) rc = phax_st_add_meta(w, "config", cfg);
    snprintf(num, sizeof num, "%lld", (long long)ck.step);
    if (!rc) rc = phax_st_add_meta(w, "step", num);
    snprintf(num, sizeof num, "%lld", (long long)ck.tokens_seen);
    if (!rc) rc = phax_st_add_meta(w, "tokens_seen", num);
    if (!rc) rc = phax_st_write_mem(w, out, out_len);
    free(x);
    free(cfg);
    phax_st_writer_free(w);
    phax_ckpt_free(&ck);
    return rc;
}
