// Harness: what `phax train --resume` reads from a training state before it trusts it: the
// options JSON (train_opts_from_json, then train_check_numbers: src/train_opts.c) and the data
// identity JSON (corpus_has_identities, corpus_same_tokens, corpus_check_files: src/train_data.c),
// compiled in unchanged; a refusal (cli_die) comes back here through cli_die_hook and longjmp.
// Input: fz_split into (options JSON, data identity JSON, a second data identity JSON).
// Properties: accepted options are within the command line's ranges (what --resume then
// allocates from: batch, seq, steps); an accepted options JSON serialises and parses back to
// the same options; corpus_same_tokens is symmetric; corpus_check_files never reads a file
// outside the harness's folder (the identities name files of its own: none exist, so a state
// naming files is refused, one naming none passes). A refusal leaves what the refused call had
// allocated (phax train exits there): allocations inside those calls are not leak-checked
// (__lsan_disable), the harness's own are.
#include <sanitizer/lsan_interface.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fuzz.h"
#include "phax/backend.h"
#include "train.h"

static jmp_buf refused;
static void on_die(const char *line) {
    if (getenv("PHAX_FUZZ_VERBOSE")) fprintf(stderr, "refused: %s\n", line);
    longjmp(refused, 1);
}

static char *zstr(const uint8_t *p, size_t n) {
    char *s = malloc(n + 1);
    if (!s) abort();
    memcpy(s, p, n), s[n] = 0;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *part[3];
    size_t len[3];
    fz_split(data, size, 3, part, len);
    char *oj = zstr(part[0], len[0]), *dj = zstr(part[1], len[1]), *dj2 = zstr(part[2], len[2]);
    cli_die_hook = on_die;
    __lsan_disable();  // until the end: a refusal abandons the refused call's allocations
    volatile int stage = 0;
    json_t *keep = NULL;
    train_opts o = train_opts_default();
    if (!setjmp(refused)) {
        int split = 0;
        train_opts_from_json(&o, oj, "state", &keep, &split);
        train_check_numbers(&o);
        stage = 1;
        fz_accepted("training options");
        if (o.B < 1 || o.B > (1 << 20) || o.T < 1 || o.steps < 0) fz_fail("accepted options out of range", NULL);
        char *back = train_opts_to_json(&o, o.train_path, o.valid_path, split);
        train_opts p = train_opts_default();
        json_t *keep2 = NULL;
        int split2 = 0;
        train_opts_from_json(&p, back, "state (again)", &keep2, &split2);
        if (p.B != o.B || p.T != o.T || p.steps != o.steps || p.seed != o.seed || p.lr != o.lr || split2 != split)
            fz_fail("options changed on a round trip", back);
        free(back);
        json_decref(keep2);
    } else if (stage == 1) {
        fz_fail("accepted options refused after a round trip", oj);
    }
    json_decref(keep);
    if (corpus_same_tokens(dj, dj2) != corpus_same_tokens(dj2, dj)) fz_fail("corpus_same_tokens is not symmetric", NULL);
    (void)corpus_has_identities(dj);
    corpus c = {0};
    c.train = (char *)fz_path(0, "train.txt");  // never written: no identity can match it
    if (!setjmp(refused)) {
        corpus_check_files(&c, dj, "state");
        // Accepted only when the state names no train file identity it could check.
        json_t *j = json_loads(dj, 0, NULL), *f = j ? json_object_get(json_object_get(j, "files"), "train") : NULL;
        if (f && json_is_integer(json_object_get(f, "bytes"))) fz_fail("a missing file matched an identity", dj);
        json_decref(j);
    }
    cli_die_hook = NULL;
    __lsan_enable();
    free(oj), free(dj), free(dj2);
    fz_clean();
    return 0;
}
