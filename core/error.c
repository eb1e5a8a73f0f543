// One-line error messages, thread-local, never aborting library code.
#include "phax/core.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char err_buf[1024];

// Formats through a local buffer, so a caller may pass phax_error() itself as
// an argument to add context: phax_fail("%s: %s", path, phax_error()).
int phax_fail(const char *fmt, ...) {
    char tmp[sizeof err_buf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    memcpy(err_buf, tmp, sizeof err_buf);
    return PHAX_ERR;
}

const char *phax_error(void) { return err_buf; }

void phax_clear_error(void) { err_buf[0] = '\0'; }

_Noreturn void phax_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("phax: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}
