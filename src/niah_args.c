// phax niah's command line (src/cmd_args.h): parsed and checked, no file touched.
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_args.h"

#define MAX_LIST PHAX_CMD_MAX_LIST
#define die(...) cli_die("phax niah", __VA_ARGS__)

static void usage(FILE *f) {
    fputs("usage: phax niah CHECKPOINT (--data DIR | --text FILE) [options]\n"
          "Needle-in-a-haystack accuracy of a checkpoint (docs/niah.md). CHECKPOINT: a model\n"
          "file or a `phax train` run folder.\n"
          "  --data DIR          haystack text: DIR's validation split (valid.txt[.xz],\n"
          "                      ptb.valid.txt, ...; input.txt: its last 10%)\n"
          "  --text FILE         haystack text: this file\n"
          "  --lengths L,...     prompt lengths in tokens (default train_len × 1/2, 1, 2, 4, 8)\n"
          "  --depths D,...      needle depths in [0, 1]\n"
          "  --n-depths K        K evenly spaced depths i/(K−1), K ≥ 2 (default 5)\n"
          "  --variants V,...    single, multikey, multivalue, multiquery (default: these four),\n"
          "                      passkey (\"The pass key is D D .\", exact match; no needles haystack)\n"
          "  --haystacks H,...   noise, text, needles (default noise, and text when given)\n"
          "  --samples N         prompts per cell (default 4)\n"
          "  --seed S            prompt seed (default 0)\n"
          "  --window W          SWA window of the SWAX family (−1 = w_long, default; 0 = full);\n"
          "                      refused for the pha family (its window is attn_window)\n"
          "  --max-corpus-bytes N  the most bytes the haystack text may hold (phax --help)\n"
          "  --n-multi M         needles of the multi-variants (default 4)\n"
          "  --passkey-digits D  digits of a passkey value, 1..7 (default 2)\n"
          "  --no-header         leave out the instruction line\n"
          "  --csv FILE          write variant,haystack,length,depth,samples,accuracy,mean_logp,\n"
          "                      mean_distance (atomically)\n"
          "  --verbose           print every continuation\n"
          "  --backend B         cpu (float32, default) or ref (float64 oracle, naive decoder: slow)\n",
          f);
}

static long parse_long(const char *flag, const char *s, long lo, long hi) {
    return cli_parse_long("phax niah", flag, s, lo, hi);
}

static void parse_list_option(niah_opts *o, const char *flag, const char *val) {
    char buf[CLI_LIST_BYTES], *items[MAX_LIST];
    int n = cli_split_list("phax niah", flag, val, buf, items, MAX_LIST);
    for (int i = 0; i < n; i++) {
        if (!strcmp(flag, "--lengths")) {
            o->lengths[i] = (int)parse_long(flag, items[i], 1, 1 << 24);
        } else if (!strcmp(flag, "--depths")) {
            o->depths[i] = cli_parse_depth("phax niah", flag, items[i]);
        } else if (!strcmp(flag, "--variants")) {
            if (n > PHAX_NIAH_N_ALL_VARIANTS || phax_niah_variant_parse(items[i], &o->variants[i]))
                die("--variants: %s", n > PHAX_NIAH_N_ALL_VARIANTS ? "too many" : phax_error());
        } else if (n > PHAX_NIAH_N_HAYSTACKS ||
                   phax_niah_haystack_parse(items[i], &o->haystacks[i])) {
            die("--haystacks: %s", n > PHAX_NIAH_N_HAYSTACKS ? "too many" : phax_error());
        }
    }
    if (!strcmp(flag, "--lengths")) o->n_lengths = n;
    else if (!strcmp(flag, "--depths")) o->n_depths = n;
    else if (!strcmp(flag, "--variants")) o->n_variants = n;
    else o->n_haystacks = n;
}

void niah_parse_args(int argc, char **argv, niah_opts *o) {
    *o = (niah_opts){.samples = 4, .window = -1};
    int n_even = 0;
    const char *backend = "cpu";
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        if (!strcmp(flag, "-h") || !strcmp(flag, "--help")) {
            usage(stdout);
            cli_exit(0);
        }
        if (flag[0] != '-') {
            if (o->checkpoint) die("%s: a second checkpoint (one is enough)", flag);
            o->checkpoint = flag;
            continue;
        }
        if (!strcmp(flag, "--no-header")) {
            o->no_header = 1;
            continue;
        }
        if (!strcmp(flag, "--verbose")) {
            o->verbose = 1;
            continue;
        }
        if (i + 1 >= argc) die("%s: missing value", flag);
        const char *val = argv[++i];
        if (!strcmp(flag, "--data")) o->data_dir = val;
        else if (!strcmp(flag, "--text")) o->text_path = val;
        else if (!strcmp(flag, "--csv")) o->csv_path = val;
        else if (!strcmp(flag, "--lengths") || !strcmp(flag, "--depths") ||
                 !strcmp(flag, "--variants") || !strcmp(flag, "--haystacks"))
            parse_list_option(o, flag, val);
        else if (!strcmp(flag, "--n-depths")) n_even = (int)parse_long(flag, val, 2, MAX_LIST);
        else if (!strcmp(flag, "--samples")) o->samples = (int)parse_long(flag, val, 1, 1 << 20);
        else if (!strcmp(flag, "--seed")) o->seed = (uint64_t)parse_long(flag, val, 0, LONG_MAX);
        else if (!strcmp(flag, "--window")) o->window = (int)parse_long(flag, val, -1, 1 << 30);
        else if (!strcmp(flag, "--n-multi"))
            o->n_multi = (int)parse_long(flag, val, 2, PHAX_NIAH_MAX_MULTI);
        else if (!strcmp(flag, "--passkey-digits")) {
            if (phax_niah_digits_parse(val, &o->passkey_digits)) die("%s: %s", flag, phax_error());
        } else if (!strcmp(flag, "--backend")) backend = val;
        else die("%s: unknown option (phax niah --help)", flag);
    }
    if (!o->checkpoint) die("no checkpoint given (phax niah --help)");
    o->backend = backend;
    if (o->data_dir && o->text_path) die("--data and --text: give one haystack text, not both");
    if (n_even && o->n_depths) die("--depths and --n-depths: give one of them");
    if (!o->n_depths) {
        o->n_depths = n_even ? n_even : 5;
        for (int i = 0; i < o->n_depths; i++) o->depths[i] = (double)i / (o->n_depths - 1);
    }
    if (!o->n_variants)
        for (int v = 0; v < PHAX_NIAH_N_VARIANTS; v++) o->variants[o->n_variants++] = v;
}
