// The phax command: one entry point, subcommands.
#include <stdio.h>
#include <string.h>

#include "phax/core.h"
#include "phax/fast.h"

int phax_demo_main(int argc, char **argv);
int phax_oracle_main(int argc, char **argv);

static void usage(FILE *f) {
    fputs("usage: phax <command> [args]\n"
          "  info      print the version and the backends this build has\n"
          "  oracle    phax oracle OP IN.safetensors OUT.safetensors: outputs and gradients of a\n"
          "            ref op or whole model in float64 (--list: the ops; OP --example IN: a sample input)\n"
          "  demo      run every ref op once on seeded random input, check its gradient\n"
          "            by finite differences, and print a table (--seed N)\n"
          "  version   print the version\n",
          f);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("phax %s\n", PHAX_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "info")) {
        char buf[512];
        printf("phax %s\n", PHAX_VERSION);
        printf("ref: float64 scalar oracle\n");
        phax_cpu_info(buf, sizeof buf);
        printf("%s\n", buf);
        phax_cuda_info(buf, sizeof buf);
        printf("%s\n", buf);
        return 0;
    }
    if (!strcmp(cmd, "demo")) return phax_demo_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "oracle")) return phax_oracle_main(argc - 1, argv + 1);
    phax_die("unknown command '%s' (try 'phax --help')", cmd);
}
