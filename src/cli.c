// Shared by the phax subcommands (src/cli.h).
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "phax/data.h"
#include "phax/model_plan.h"

void (*cli_die_hook)(const char *line);

void (*cli_exit_hook)(int code);

_Noreturn void cli_exit(int code) {
    if (cli_exit_hook) cli_exit_hook(code);
    exit(code);
}

static _Noreturn void die_v(int code, const char *cmd, const char *fmt, va_list ap) {
    if (cli_die_hook) {
        char line[4096];
        int k = snprintf(line, sizeof line, "%s: ", cmd);
        if (k > 0 && (size_t)k < sizeof line) vsnprintf(line + k, sizeof line - (size_t)k, fmt, ap);
        cli_die_hook(line);
        exit(code);  // not reached: the hook ends the process
    }
    fprintf(stderr, "%s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    exit(code);
}

_Noreturn void cli_die(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    die_v(1, cmd, fmt, ap);
}

_Noreturn void cli_die_code(int code, const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    die_v(code, cmd, fmt, ap);
}

long cli_parse_long(const char *cmd, const char *flag, const char *s, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi)
        cli_die(cmd, "%s: '%s' is not an integer in [%ld, %ld]", flag, s, lo, hi);
    return v;
}

double cli_parse_depth(const char *cmd, const char *flag, const char *s) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= 0.0 && v <= 1.0)) cli_die(cmd, "%s: '%s' is not a depth in [0, 1]", flag, s);
    return v;
}

int cli_split_list(const char *cmd, const char *flag, const char *s, char buf[CLI_LIST_BYTES], char **items, int max) {
    if (strlen(s) >= CLI_LIST_BYTES) cli_die(cmd, "%s: the list is too long", flag);
    strcpy(buf, s);
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == max) cli_die(cmd, "%s: more than %d items", flag, max);
        items[n++] = t;
    }
    if (n == 0) cli_die(cmd, "%s: empty list", flag);
    return n;
}

uint64_t cli_parse_u64(const char *cmd, const char *flag, const char *s) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || errno || *s == '-') cli_die(cmd, "%s: '%s' is not a non-negative integer", flag, s);
    return v;
}

void cli_check_window(const char *cmd, const phax_model_cfg *c, long window) {
    if (window >= 0 && !phax_plan_takes_window(c))
        cli_die(cmd,
                "--window applies to the swax, swa, mlstm, swa_full and swax_gdn families; %s uses attn_window (%d)",
                phax_family_name(c->family), c->attn_window);
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

int cli_take_max_corpus_bytes(const char *cmd, int argc, char **argv) {
    int k = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "--max-corpus-bytes")) {
            if (i + 1 >= argc) cli_die(cmd, "--max-corpus-bytes needs a value");
            v = argv[++i];
        } else if (!strncmp(a, "--max-corpus-bytes=", 19)) {
            v = a + 19;
        } else {
            argv[k++] = argv[i];
            continue;
        }
        char *end;
        errno = 0;
        unsigned long long x = strtoull(v, &end, 10);
        int shift = 0;
        if (*end == 'K' || *end == 'k') shift = 10, end++;
        else if (*end == 'M' || *end == 'm') shift = 20, end++;
        else if (*end == 'G' || *end == 'g') shift = 30, end++;
        if (errno || end == v || *end || v[0] == '-' || x == 0 || x > (1ull << 40) >> shift)
            cli_die(cmd, "--max-corpus-bytes: '%s' is not a size in [1, 1T] (bytes, or with K, M, G)", v);
        phax_data_set_max_bytes((size_t)(x << shift));
    }
    argv[k] = NULL;
    return k;
}
