// phax eval's command line (src/cmd_args.h): parsed and checked, no file touched.
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_args.h"

#define die(...) cli_die("phax eval", __VA_ARGS__)

static void usage(FILE *f) {
    fputs("usage: phax eval CHECKPOINT (--data DIR [--split test|valid|train] | --file FILE) [options]\n"
          "  CHECKPOINT     a model file or a phax train run folder\n"
          "  --data DIR     corpus folder (train/valid/test as for phax train); --split picks the\n"
          "                 split (default test). A folder with only input.txt (tiny-shakespeare)\n"
          "                 is split as phax train splits it: train = the first 90% of its tokens,\n"
          "                 valid and test = the held-out last 10%\n"
          "  --file FILE    score this text file (.txt or .xz) instead\n"
          "  --seq T        window length (default: the checkpoint's training length)\n"
          "  --batch B      windows per forward (default 4)\n"
          "  --window W     SWA window of the swax/swa/mlstm/swa_full/swax_gdn families (default: w_long; 0 = full)\n"
          "  --carry        read the split token by token carrying recurrent state and the\n"
          "                 sliding-window cache across windows (needs windowed attention;\n"
          "                 slow: one decoder step per token)\n"
          "  --max-tokens N score only the first N tokens of the split (default: all)\n"
          "  --buckets E1,E2,...  position bucket edges inside a window (default 0,16,32,64,...,T)\n"
          "  --cache-dir D  token cache folder (default: RUN/cache for a run folder, as phax train,\n"
          "                 else cache/ beside the model file; when that\n"
          "                 cannot be written, e.g. a read-only folder, no cache, with a note)\n"
          "  --max-corpus-bytes N  the most bytes a text file may hold (phax --help)\n"
          "  --json FILE    write the result as JSON (atomically)\n"
          "  --csv FILE     write the loss by position bucket as CSV (atomically)\n"
          "  --backend B    cpu (float32, default) or ref (float64 oracle: slow; its --carry\n"
          "                 re-reads the whole split so far for every pass)\n",
          f);
}

#define parse_long(flag, s, lo, hi) cli_parse_long("phax eval", flag, s, lo, hi)

static void parse_buckets(eval_opts *o, const char *s) {
    o->nb = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || (o->nb && v <= o->edges[o->nb - 1]))
            die("--buckets: '%s' must be increasing non-negative integers", s);
        if (o->nb > PHAX_EVAL_MAX_BUCKETS) die("--buckets: at most %d edges", PHAX_EVAL_MAX_BUCKETS + 1);
        o->edges[o->nb++] = v;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') die("--buckets: '%s' must be comma-separated integers", s);
    }
    if (o->nb < 2) die("--buckets: need at least two edges");
    o->nb--;  // edges → buckets
}

void eval_parse_args(int argc, char **argv, eval_opts *o) {
    memset(o, 0, sizeof *o);
    o->B = 4, o->window = -1, o->split = "test", o->max_tokens = -1, o->nb = -1;
    const char *buckets = NULL, *backend = "cpu";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define TAKE() (v ? (i++, v) : (die("%s needs a value", a), v))
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) usage(stdout), cli_exit(0);
        else if (!strcmp(a, "--data")) o->data_dir = TAKE();
        else if (!strcmp(a, "--split")) o->split = TAKE();
        else if (!strcmp(a, "--file")) o->file = TAKE();
        else if (!strcmp(a, "--seq")) o->T = (int)parse_long(a, TAKE(), 1, PHAX_MAX_SEQ);
        else if (!strcmp(a, "--batch")) o->B = (int)parse_long(a, TAKE(), 1, 4096);
        else if (!strcmp(a, "--window")) o->window = (int)parse_long(a, TAKE(), 0, PHAX_MAX_SEQ);
        else if (!strcmp(a, "--carry")) o->carry = 1;
        else if (!strcmp(a, "--max-tokens")) o->max_tokens = parse_long(a, TAKE(), 2, 1L << 40);
        else if (!strcmp(a, "--buckets")) buckets = TAKE();
        else if (!strcmp(a, "--cache-dir")) o->cache_dir = TAKE();
        else if (!strcmp(a, "--json")) o->json_out = TAKE();
        else if (!strcmp(a, "--csv")) o->csv_out = TAKE();
        else if (!strcmp(a, "--backend")) backend = TAKE();
        else if (a[0] == '-' && a[1]) die("unknown option '%s' (see phax eval --help)", a);
        else if (!o->ckpt) o->ckpt = a;
        else die("unexpected argument '%s'", a);
#undef TAKE
    }
    if (!o->ckpt) usage(stderr), cli_exit(2);
    if (!o->data_dir == !o->file) die("give exactly one of --data DIR and --file FILE");
    if (strcmp(o->split, "test") && strcmp(o->split, "valid") && strcmp(o->split, "train"))
        die("--split: '%s' is not one of test, valid, train", o->split);
    if (buckets) parse_buckets(o, buckets);
    o->backend = backend;
}
