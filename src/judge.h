// phax check's judgement (src/check.c), one function for `phax check` and for libphax
// (src/capi.c, python/phax): the names, shapes and dtypes of THEIRS against the op's
// outputs, then each tensor's error against the bound (docs/oracle.md, "The bound").
#ifndef PHAX_SRC_JUDGE_H
#define PHAX_SRC_JUDGE_H

#include <stdio.h>

#include "oracle.h"

typedef enum { PHAX_VERDICT_PASS = 0, PHAX_VERDICT_FAIL = 1, PHAX_VERDICT_MISMATCH = 2 } phax_verdict;

typedef struct {
    char name[128];
    double rel, base_rel, ratio, bound;  // errors relative to ||truth||; ratio = error / baseline's error
    int pass;
    // The precision cannot resolve this tensor: its baseline is 1/C or more off (the bound admits
    // an all-zero output), so no error of theirs there tells a bug; it passes if finite.
    int unresolved;
    int draws;  // the baseline's roundings behind the bound, per algorithm (5; up to 65 for few elements)
} phax_check_row;

typedef struct phax_check_report {
    char op[64], in_label[512], theirs_label[512];  // as printed (IN's and THEIRS's paths in the command)
    const phax_precision *pr;
    double C, floor;  // the bound's constants; floor in units of ||truth|| (floor·u)
    phax_verdict verdict;  // also `phax check`'s exit status
    int nrow, nfail, nprob, nunresolved;
    phax_check_row *row;  // one per judged tensor (a model has one per parameter: hundreds)
    char (*prob)[512];    // MISMATCH: one line per problem, by name (at most one per tensor of either file)
    char hint[512];       // FAIL: the convention THEIRS matches instead (phax_check_diagnose), or ""
} phax_check_report;

// Judges theirs against the truth and baseline in ev (made at precision pr for op on IN).
// A new report (free with phax_check_report_free), or NULL when out of memory.
phax_check_report *phax_check_judge(const phax_oracle_eval *ev, const phax_st_file *theirs, const char *op,
                                    const char *in_label, const char *theirs_label, const phax_precision *pr);
void phax_check_report_free(phax_check_report *r);
// On a FAIL: judges THEIRS again against the truth under each known convention mismatch of the
// op (attention: window w+1 or w−1, the interleaved RoPE pairing, RoPE off, scores without or
// with an extra 1/√dh; any op: upstream gradients IN does not give set to 1 instead of drawn),
// each tensor held to its row's bound; the first that every tensor meets is named in r->hint.
// IN is in_path (buf NULL) or the image buf of n bytes labelled in_path. Nothing on failure.
// ev: the evaluation r was judged on (its upstream gradients are read).
void phax_check_diagnose(phax_check_report *r, const phax_oracle_eval *ev, const phax_st_file *theirs, const char *op,
                         const char *in_path,
                         const void *buf, size_t n, double max_mib, const phax_names *names);
// The report as `phax check` prints it (json: as with --json).
void phax_check_print(FILE *fp, const phax_check_report *r, int json);

#endif
