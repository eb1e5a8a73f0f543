// Harness: phax train's log truncation on --resume (train_log_truncate, src/train_log.c,
// compiled in unchanged; a refusal returns through cli_die_hook). Input: 1 byte (keep_step,
// 0..255), then the log's bytes. Property: the log afterwards holds exactly the input's lines
// (split at '\n', a last line without one included) that parse as a JSON object with an integer
// "step" ≤ keep_step and are at most 1 MiB, in order, each ending in '\n' — computed here from
// the input independently of the code under test.
#include <jansson.h>
#include <sanitizer/lsan_interface.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fuzz.h"
#include "phax/backend.h"
#include "train.h"

// src/cli.c (cli_die) is linked in and names phax_backend_find; no backend is needed here.
const phax_backend_ops *phax_backend_find(const char *name) {
    phax_fail("'%s' is not a backend", name);
    return NULL;
}

static jmp_buf refused;
static void on_die(const char *line) {
    if (getenv("PHAX_FUZZ_VERBOSE")) fprintf(stderr, "refused: %s\n", line);
    longjmp(refused, 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    long keep = data[0];
    const uint8_t *log = data + 1;
    size_t n = size - 1;
    // The expected log.
    char *want = malloc(n + 2);
    if (!want) abort();
    size_t wn = 0;
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && log[e] != '\n') e++;
        if (e - i <= (1u << 20)) {
            json_t *j = json_loadb((const char *)log + i, e - i, 0, NULL);
            json_t *st = j ? json_object_get(j, "step") : NULL;
            if (st && json_is_integer(st) && json_integer_value(st) <= keep) {
                memcpy(want + wn, log + i, e - i), wn += e - i;
                want[wn++] = '\n';
            }
            json_decref(j);
        }
        i = e + 1;
    }
    const char *path = fz_path(0, "log.jsonl");
    fz_write(path, log, n);
    cli_die_hook = on_die;
    __lsan_disable();  // a refusal abandons the refused call's allocations (phax train exits there)
    int ok = !setjmp(refused);
    if (ok) train_log_truncate(path, keep);
    __lsan_enable();
    cli_die_hook = NULL;
    if (!ok) fz_fail("a regular log file was refused", NULL);
    fz_accepted("log");
    FILE *f = fopen(path, "rb");
    if (!f) fz_fail("the log is gone after truncation", path);
    char *got = malloc(n + 2);
    if (!got) abort();
    size_t gn = fread(got, 1, n + 2, f);
    fclose(f);
    if (gn != wn || memcmp(got, want, wn)) fz_fail("the truncated log is not the input's kept lines", NULL);
    free(got), free(want);
    fz_clean();
    return 0;
}
