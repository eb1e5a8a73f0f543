// One-line error messages, thread-local, never aborting library code.
#include "phax/core.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static _Thread_local char err_buf[1024];

int phax_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_buf, sizeof err_buf, fmt, ap);
    va_end(ap);
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
