// Shared by the phax subcommands (src/cli.h).
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

_Noreturn void cli_die(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

long cli_parse_long(const char *cmd, const char *flag, const char *s, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi)
        cli_die(cmd, "%s: '%s' is not an integer in [%ld, %ld]", flag, s, lo, hi);
    return v;
}

char *cli_path_join(const char *cmd, const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (!p) cli_die(cmd, "out of memory");
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

int cli_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

int cli_is_file(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}
