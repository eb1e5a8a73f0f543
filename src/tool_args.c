// The command lines of phax info, demo, oracle and check (src/cmd_args.h): parsed and
// checked, no file touched. Their messages are the ones these commands always printed.
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_args.h"

static long parse_dim(const char *flag, const char *v) { return cli_parse_long("phax info", flag, v, 1, PHAX_MAX_SEQ); }

void info_parse_args(int argc, char **argv, info_opts *o) {
    *o = (info_opts){0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            puts("usage: phax info CHECKPOINT|RUN_DIR|CONFIG.json [--batch B] [--seq T]\n"
                 "The resolved config, parameters per component, and the memory of a fast/cpu\n"
                 "training step at (B, T) (default: the checkpoint's, else 8 x train_len).");
            cli_exit(0);
        }
        if (!strcmp(argv[i], "--batch") && i + 1 < argc) o->B = (int)parse_dim("--batch", argv[++i]);
        else if (!strcmp(argv[i], "--seq") && i + 1 < argc) o->T = (int)parse_dim("--seq", argv[++i]);
        else if (argv[i][0] == '-') cli_die("phax info", "unknown option '%s' (try --help)", argv[i]);
        else if (!o->path) o->path = argv[i];
        else cli_die("phax info", "unexpected argument '%s'", argv[i]);
    }
    if (!o->path) cli_die("phax info", "no checkpoint or config given");
}

// --seed: an unsigned 64-bit integer; --T: 1 .. 4096.
void demo_parse_args(int argc, char **argv, demo_opts *o) {
    *o = (demo_opts){.seed = 1, .T = 64};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            o->seed = cli_parse_u64("phax", "demo: --seed", argv[++i]);
        } else if (!strcmp(argv[i], "--T") && i + 1 < argc) {
            o->T = (int)cli_parse_long("phax", "demo: --T", argv[++i], 1, 4096);
        } else {
            cli_die("phax", "demo: unknown argument '%s' (use --seed N, --T N)", argv[i]);
        }
    }
}

// --max-memory MIB and --names MAP.json anywhere after "oracle".
void oracle_parse_args(int argc, char **argv, oracle_opts *o) {
    *o = (oracle_opts){.max_mib = -1};
    if (argc >= 2 && (!strcmp(argv[1], "--list") || !strcmp(argv[1], "-l"))) {
        o->list = 1;
        return;
    }
    if (argc == 4 && !strcmp(argv[2], "--example")) {
        o->op = argv[1], o->example_out = argv[3];
        return;
    }
    const char *pos[3] = {0};
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--names")) {
            if (i + 1 >= argc) cli_die("phax", "oracle: --names takes a name map (MAP.json; docs/oracle.md)");
            o->names = argv[++i];
        } else if (!strcmp(argv[i], "--max-memory")) {
            char *end;
            errno = 0;
            o->max_mib = i + 1 < argc ? strtod(argv[i + 1], &end) : -1;
            if (i + 1 >= argc || errno || end == argv[i + 1] || *end || !(o->max_mib >= 1 && o->max_mib <= 1 << 30))
                cli_die("phax", "oracle: --max-memory takes a size in MiB, from 1 to 2^30");
            i++;
        } else if (npos < 3) {
            pos[npos++] = argv[i];
        } else {
            npos = 4;
        }
    }
    if (npos != 3)
        cli_die("phax", "usage: phax oracle [--max-memory MIB] [--names MAP.json] OP IN.safetensors OUT.safetensors | "
                        "phax oracle OP --example IN.safetensors | phax oracle --list");
    o->op = pos[0], o->in = pos[1], o->out = pos[2];
}

void check_parse_args(int argc, char **argv, check_opts *o) {
    *o = (check_opts){.max_mib = -1};
    const char *pos[2 + CHECK_MAX_THEIRS] = {0}, *precision = "f32";
    int npos = 0, over = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) o->json = 1;
        else if (!strcmp(argv[i], "--precision") && i + 1 < argc) precision = argv[++i];
        else if (!strcmp(argv[i], "--names") && i + 1 < argc) o->names = argv[++i];
        else if (!strcmp(argv[i], "--max-memory") && i + 1 < argc) {
            char *end;
            o->max_mib = strtod(argv[++i], &end);
            if (end == argv[i] || *end || !(o->max_mib >= 1 && o->max_mib <= 1 << 30))
                cli_die_code(2, "phax", "check: --max-memory takes a size in MiB, from 1 to 2^30");
        }
        else if (argv[i][0] != '-' && npos < 2 + CHECK_MAX_THEIRS) pos[npos++] = argv[i];
        else if (argv[i][0] != '-') over = 1;
        else bad = 1;  // an unknown option, or one without its value
    }
    if (over) cli_die_code(2, "phax", "check: at most %d THEIRS files in one run", CHECK_MAX_THEIRS);
    if (bad || npos < 3)
        cli_die_code(2, "phax", "usage: phax check OP IN.safetensors THEIRS.safetensors [THEIRS2.safetensors ...] "
                                "[--precision f32|tf32|bf16|f16] [--json] [--max-memory MIB] [--names MAP.json]");
    if (!(o->pr = phax_precision_find(precision)))
        cli_die_code(2, "phax", "check: --precision must be one of f32, tf32, bf16, f16");
    o->op = pos[0], o->in = pos[1], o->ntheirs = npos - 2;
    for (int i = 0; i < o->ntheirs; i++) o->theirs[i] = pos[2 + i];
}
