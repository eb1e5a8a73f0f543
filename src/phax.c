// The phax command: one entry point, subcommands.
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "phax/core.h"
#include "phax/data.h"
#include "phax/fast.h"
#include "phax/fcpu_gemm.h"  // fcpu_bf16_available: the cpu_bf16 tier

int phax_demo_main(int argc, char **argv);
int phax_oracle_main(int argc, char **argv);
int phax_check_main(int argc, char **argv);
// Subcommands in their own files (src/<name>.c), compiled when present (meson.build).
int phax_train_main(int argc, char **argv);
int phax_eval_main(int argc, char **argv);
int phax_generate_main(int argc, char **argv);
int phax_niah_main(int argc, char **argv);
int phax_recall_main(int argc, char **argv);
int phax_model_info_main(int argc, char **argv);

typedef struct {
    const char *name;
    int (*main)(int argc, char **argv);
    const char *help;
} subcommand;

static const subcommand subcommands[] = {
    {"train", phax_train_main, "train a model on a text corpus (phax train --help)"},
    {"eval", phax_eval_main, "perplexity of a checkpoint on a split (phax eval --help)"},
    {"generate", phax_generate_main, "continue a prompt with a checkpoint (phax generate --help)"},
    {"niah", phax_niah_main, "needle-in-a-haystack suite on a checkpoint (phax niah --help)"},
    {"recall", phax_recall_main, "associative-recall accuracy by length and depth (phax recall --help)"},
    {NULL, NULL, NULL},
};

static void usage(FILE *f) {
    fputs("usage: phax <command> [args]\n"
          "  info      print the version and the backends this build has\n"
          "  oracle    phax oracle OP IN.safetensors OUT.safetensors: outputs and gradients of a\n"
          "            ref op or whole model in float64 (--list: the ops; OP --example IN: a sample input)\n"
          "  check     phax check OP IN.safetensors THEIRS.safetensors [THEIRS2 ...] [--precision\n"
          "            f32|tf32|bf16|f16] [--json]: PASS/FAIL of your outputs and gradients of OP against\n"
          "            the float64 truth, bounded by a naive evaluation's error at that precision\n"
          "  demo      run every ref op once on seeded random input, check its gradient\n"
          "            by finite differences, and print a table (--seed N)\n"
          "  version   print the version\n",
          f);
    for (const subcommand *c = subcommands; c->name; c++) fprintf(f, "  %-9s %s\n", c->name, c->help);
    fprintf(f, "Every command that reads text (corpora, prompts, haystacks) takes\n"
               "  --max-corpus-bytes N  the most bytes one text file may hold, as stored and .xz-decoded\n"
               "                        (K, M, G suffixes; default %zuM); bigger is refused\n",
            PHAX_DATA_MAX_BYTES_DEFAULT >> 20);
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
    // The limit on a text file is common to every command that reads text (cli.h).
    if (strcmp(cmd, "oracle") && strcmp(cmd, "demo") && strcmp(cmd, "check")) {
        char name[64];
        snprintf(name, sizeof name, "phax %s", cmd);
        argc = 1 + cli_take_max_corpus_bytes(name, argc - 1, argv + 1);
    }
    for (const subcommand *c = subcommands; c->name; c++)
        if (!strcmp(cmd, c->name)) return c->main(argc - 1, argv + 1);
    // `phax info CHECKPOINT|CONFIG`: the model's config, parameters and memory.
    if (!strcmp(cmd, "info") && argc > 2) return phax_model_info_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "info")) {
        char buf[512];
        printf("phax %s\n", PHAX_VERSION);
        printf("ref: float64 scalar oracle\n");
        phax_cpu_info(buf, sizeof buf);
        printf("%s\n", buf);
        // the cpu_bf16 tier: whether this build and this CPU have its bf16 matmuls
        printf("cpu_bf16: %s\n", fcpu_bf16_available() ? "available (oneDNN)" : fcpu_bf16_unavailable());
        phax_cuda_info(buf, sizeof buf);
        printf("%s\n", buf);
        return 0;
    }
    if (!strcmp(cmd, "demo")) return phax_demo_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "oracle")) return phax_oracle_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "check")) return phax_check_main(argc - 1, argv + 1);
    phax_die("unknown command '%s' (try 'phax --help')", cmd);
}
