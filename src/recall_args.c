// phax recall's command line (src/cmd_args.h): parsed and checked, no file touched.
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_args.h"
#include "phax/recall.h"

#define MAX_LIST PHAX_CMD_MAX_LIST
#define MAX_LEN PHAX_MAX_SEQ  // the longest prompt
#define die(...) cli_die("phax recall", __VA_ARGS__)

static void usage(FILE *f) {
    fputs("usage: phax recall CHECKPOINT [options]   (or --ckpt CHECKPOINT)\n"
          "Associative-recall accuracy of a checkpoint trained with phax train --task recall\n"
          "(docs/recall.md). CHECKPOINT: a model file or a run folder. Each prompt is a haystack of\n"
          "fillers holding --pairs needles \"key value\", then one needle's key; it is right when the\n"
          "argmax of the next-token logits is that needle's value (chance: 1/16; copying a random\n"
          "value of the prompt: 1/P).\n"
          "  --ckpt PATH         the checkpoint (instead of the first argument)\n"
          "  --lengths L,...     prompt lengths in tokens (default the training length x 1, 2, 4, 8)\n"
          "  --depths D,...      where the queried needle goes, in [0, 1]: 0 = the first token,\n"
          "                      1 = just before the query (default 0,0.25,0.5,0.75,1)\n"
          "  --samples N         prompts per (length, depth) cell (default 100)\n"
          "  --pairs P           needles per prompt, 1..16 (default 4)\n"
          "  --window W          SWA window of the swax, swa, mlstm, swa_full and swax_gdn families (default -1 = the\n"
          "                      config's w_long, as evaluation uses; 0 = full attention); refused\n"
          "                      for pha, transformer and serial (their window is attn_window)\n"
          "  --seed S            prompt seed (default 0)\n"
          "  --task mqar         multi-query prompts instead (docs/recall.md): P pairs open the\n"
          "                      prompt, Q queries of distinct pairs follow at random places among\n"
          "                      fillers; every query is scored (argmax and the log-probability of\n"
          "                      its value) and counted in the bin of its key-to-query distance;\n"
          "                      --depths does not apply. Floor: the elimination floor per query\n"
          "  --queries Q         mqar: queries per prompt, 1..P (default 8; --pairs default 16)\n"
          "  --bins E,...        mqar: increasing distance bin edges (default 1,2,4,...,2^k): bin i\n"
          "                      holds distances in [E_i, E_i+1), the last [E_last, inf)\n"
          "  --json FILE         write every cell as JSON (atomically)\n"
          "  --csv FILE          write length,depth,samples,correct,accuracy,mean_distance (atomically)\n"
          "  --backend B         cpu (float32, default) or ref (float64 oracle, naive decoder: slow)\n",
          f);
}

static long parse_long(const char *flag, const char *s, long lo, long hi) {
    return cli_parse_long("phax recall", flag, s, lo, hi);
}

static uint64_t parse_u64(const char *flag, const char *s) { return cli_parse_u64("phax recall", flag, s); }

// A comma list of at most MAX_LIST items; each is handed to `item`.
static int parse_list(const char *flag, const char *s, void (*item)(recall_opts *, int, const char *),
                      recall_opts *o) {
    char buf[CLI_LIST_BYTES], *items[MAX_LIST];
    int n = cli_split_list("phax recall", flag, s, buf, items, MAX_LIST);
    for (int i = 0; i < n; i++) item(o, i, items[i]);
    return n;
}

static void length_item(recall_opts *o, int i, const char *s) {
    o->lengths[i] = (int)parse_long("--lengths", s, 1, MAX_LEN);
}

static void depth_item(recall_opts *o, int i, const char *s) {
    o->depths[i] = cli_parse_depth("phax recall", "--depths", s);
}

static void bin_item(recall_opts *o, int i, const char *s) {
    o->bins[i] = (int)parse_long("--bins", s, 0, MAX_LEN);
}

void recall_parse_args(int argc, char **argv, recall_opts *o) {
    *o = (recall_opts){.samples = 100, .pairs = -1, .queries = -1, .window = -1};
    const char *backend = "cpu";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            cli_exit(0);
        }
        if (a[0] != '-') {
            if (o->ckpt) die("%s: a second checkpoint (one is enough)", a);
            o->ckpt = a;
            continue;
        }
        if (i + 1 >= argc) die("%s: missing value", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--ckpt")) {
            if (o->ckpt) die("%s: a second checkpoint (one is enough)", v);
            o->ckpt = v;
        } else if (!strcmp(a, "--lengths")) o->n_lengths = parse_list(a, v, length_item, o);
        else if (!strcmp(a, "--depths")) o->n_depths = parse_list(a, v, depth_item, o);
        else if (!strcmp(a, "--samples")) o->samples = (int)parse_long(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--pairs")) o->pairs = (int)parse_long(a, v, 1, PHAX_RECALL_MAX_PAIRS);
        else if (!strcmp(a, "--window")) o->window = (int)parse_long(a, v, -1, MAX_LEN);
        else if (!strcmp(a, "--seed")) o->seed = parse_u64(a, v);
        else if (!strcmp(a, "--task")) {
            if (strcmp(v, "mqar") && strcmp(v, "recall")) die("--task: '%s' is not recall or mqar", v);
            o->mqar = !strcmp(v, "mqar");
        } else if (!strcmp(a, "--queries")) o->queries = (int)parse_long(a, v, 1, PHAX_RECALL_MAX_PAIRS);
        else if (!strcmp(a, "--bins")) o->n_bins = parse_list(a, v, bin_item, o);
        else if (!strcmp(a, "--json")) o->json_path = v;
        else if (!strcmp(a, "--csv")) o->csv_path = v;
        else if (!strcmp(a, "--backend")) backend = v;
        else die("%s: unknown option (phax recall --help)", a);
    }
    if (!o->ckpt) die("no checkpoint given (phax recall --help)");
    if (o->pairs < 0) o->pairs = o->mqar ? 16 : 4;
    if (o->queries < 0) o->queries = o->mqar ? (o->pairs < 8 ? o->pairs : 8) : 1;
    if (!o->mqar && o->queries != 1) die("--queries: only with --task mqar");
    if (!o->mqar && o->n_bins) die("--bins: only with --task mqar");
    if (o->mqar && o->n_depths) die("--depths: not with --task mqar (queries are binned by distance)");
    if (o->queries > o->pairs) die("--queries %d: more than --pairs %d", o->queries, o->pairs);
    for (int i = 1; i < o->n_bins; i++)
        if (o->bins[i] <= o->bins[i - 1]) die("--bins: edges must increase (%d after %d)", o->bins[i], o->bins[i - 1]);
    if (!o->n_bins)
        for (long e = 1; e <= MAX_LEN && o->n_bins < MAX_LIST; e *= 2) o->bins[o->n_bins++] = (int)e;
    o->backend = backend;
    if (!o->n_depths && !o->mqar) {
        o->n_depths = 5;
        for (int i = 0; i < 5; i++) o->depths[i] = 0.25 * i;
    }
}
