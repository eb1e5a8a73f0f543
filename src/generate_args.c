// phax generate's command line (src/cmd_args.h): parsed and checked, no file touched.
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_args.h"

#define die(...) cli_die("phax generate", __VA_ARGS__)

static void usage(FILE *f) {
    fputs("usage: phax generate CHECKPOINT (--prompt TEXT | --prompt-file FILE) [options]\n"
          "  --tokens N       tokens to generate (default 100)\n"
          "  --temperature T  0 = greedy (default 0); > 0 samples from softmax(logits / T)\n"
          "  --top-k K        sample among the K most likely tokens only (default 0 = all)\n"
          "  --seed S         sampling seed (default 1)\n"
          "  --window W       SWA window of the swax/swa/mlstm/swa_full/swax_gdn families (default w_long); the pha\n"
          "                   family's window is its attn_window, so --window is refused there\n"
          "  --max-corpus-bytes N  the most bytes --prompt-file may hold (phax --help)\n"
          "  --stats          print prefill and decode tokens/s and the state size to stderr\n"
          "  --backend B      cpu (float32, default) or ref (float64 oracle, naive decoder: slow)\n"
          "The prompt is encoded with the checkpoint's vocabulary (word: split on whitespace,\n"
          "each newline an <eos>; a word not in the vocabulary is an error unless it has <unk>).\n",
          f);
}

#define parse_long(flag, s, lo, hi) cli_parse_long("phax generate", flag, s, lo, hi)

static double parse_f64(const char *flag, const char *s) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !isfinite(v) || v < 0)
        die("%s: '%s' is not a finite non-negative number", flag, s);
    return v;
}

void generate_parse_args(int argc, char **argv, gen_opts *out) {
    const char *ckpt_path = NULL, *prompt = NULL, *prompt_file = NULL;
    long ntok = 100, top_k = 0, window = -1;
    double temp = 0;
    uint64_t seed = 1;
    int stats = 0;
    const char *backend = "cpu";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define TAKE() (v ? (i++, v) : (die("%s needs a value", a), v))
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) usage(stdout), cli_exit(0);
        else if (!strcmp(a, "--prompt")) prompt = TAKE();
        else if (!strcmp(a, "--prompt-file")) prompt_file = TAKE();
        else if (!strcmp(a, "--tokens")) ntok = parse_long(a, TAKE(), 0, PHAX_MAX_SEQ);
        else if (!strcmp(a, "--temperature")) temp = parse_f64(a, TAKE());
        else if (!strcmp(a, "--top-k")) top_k = parse_long(a, TAKE(), 0, 1L << 30);
        else if (!strcmp(a, "--seed")) seed = (uint64_t)parse_long(a, TAKE(), 0, (1L << 62));
        else if (!strcmp(a, "--window")) window = parse_long(a, TAKE(), 0, PHAX_MAX_SEQ);
        else if (!strcmp(a, "--stats")) stats = 1;
        else if (!strcmp(a, "--backend")) backend = TAKE();
        else if (a[0] == '-' && a[1]) die("unknown option '%s' (see phax generate --help)", a);
        else if (!ckpt_path) ckpt_path = a;
        else die("unexpected argument '%s'", a);
#undef TAKE
    }
    if (!ckpt_path) usage(stderr), cli_exit(2);
    if (!prompt == !prompt_file) die("give exactly one of --prompt and --prompt-file");
    *out = (gen_opts){.ckpt = ckpt_path, .prompt = prompt, .prompt_file = prompt_file, .ntok = ntok, .top_k = top_k,
                      .window = window, .temp = temp, .seed = seed, .stats = stats, .backend = backend};
}
