// phax check's judgement (src/check.c), one function for `phax check` and for libphax
// (src/capi.c, python/phax): the names, shapes and dtypes of THEIRS against the op's
// outputs, then each tensor's error against the bound (docs/oracle.md, "The bound").
#ifndef PHAX_SRC_JUDGE_H
#define PHAX_SRC_JUDGE_H

#include <stdio.h>

#include "oracle.h"

#define PHAX_CHECK_MAX 64  // rows and problems: the oracle's outputs are at most MAXCOL (64)

typedef enum { PHAX_VERDICT_PASS = 0, PHAX_VERDICT_FAIL = 1, PHAX_VERDICT_MISMATCH = 2 } phax_verdict;

typedef struct {
    char name[128];
    double rel, base_rel, ratio, bound;  // errors relative to ||truth||; ratio = error / baseline's error
    int pass;
} phax_check_row;

typedef struct phax_check_report {
    char op[64], in_label[512], theirs_label[512];  // as printed (IN's and THEIRS's paths in the command)
    const phax_precision *pr;
    double C, floor;  // the bound's constants; floor in units of ||truth|| (floor·u)
    phax_verdict verdict;  // also `phax check`'s exit status
    int nrow, nfail, nprob;
    phax_check_row row[PHAX_CHECK_MAX];
    char prob[PHAX_CHECK_MAX][512];  // MISMATCH: one line per problem, by name
} phax_check_report;

// Judges theirs against the truth and baseline in ev (made at precision pr for op on IN).
void phax_check_judge(const phax_oracle_eval *ev, const phax_st_file *theirs, const char *op, const char *in_label,
                      const char *theirs_label, const phax_precision *pr, phax_check_report *r);
// The report as `phax check` prints it (json: as with --json).
void phax_check_print(FILE *fp, const phax_check_report *r, int json);

#endif
