// Harness: `phax oracle OP IN OUT` on any IN. The op is IN's own "op" metadata
// (what `phax oracle OP --example` writes), so seeds are the tool's examples.
// src/oracle*.c are compiled into this harness unchanged except that phax_die is
// renamed (-Dphax_die=fz_oracle_die, see meson.build and build.sh): the CLI's
// one-line refusal returns here through longjmp instead of exiting.
// Property: an input the oracle accepts gives an OUT that reads back.
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "phax/safetensors.h"

int phax_oracle_main(int argc, char **argv);

static jmp_buf refused;
static int verbose = -1;

_Noreturn void fz_oracle_die(const char *fmt, ...);
_Noreturn void fz_oracle_die(const char *fmt, ...) {
    if (verbose < 0) verbose = getenv("PHAX_FUZZ_VERBOSE") != NULL;
    if (verbose) {
        va_list ap;
        va_start(ap, fmt);
        fputs("oracle refused: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
    longjmp(refused, 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *in = fz_path(0, "in.safetensors"), *out = fz_path(1, "out.safetensors");
    fz_write(in, data, size);
    phax_st_file f = {0};
    char op[64] = "";
    if (phax_st_read(&f, in) == PHAX_OK) {
        const char *s = phax_st_meta(&f, "op");
        if (s && s[0] != '-' && strlen(s) < sizeof op) strcpy(op, s);
    }
    phax_st_free(&f);
    if (op[0]) {
        char *argv[] = {"oracle", op, (char *)in, (char *)out, NULL};
        if (!setjmp(refused)) {
            phax_oracle_main(4, argv);
            fz_accepted("oracle input");
            phax_st_file g = {0};
            if (phax_st_read(&g, out)) fz_fail("the oracle wrote an unreadable output", phax_error());
            phax_st_free(&g);
        }
    }
    fz_clean();
    return 0;
}
