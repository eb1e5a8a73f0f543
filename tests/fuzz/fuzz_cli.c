// Harness: the command line of every phax command (src/cmd_args.h, src/train_opts.c), parsed
// by the commands' own parsers compiled in unchanged; a refusal (cli_die) or a usage/--help exit
// (cli_exit) comes back here through cli_die_hook / cli_exit_hook and longjmp.
// Input: byte 0 picks the command (train, eval, generate, niah, recall, info, demo, oracle,
// check), the rest is its arguments separated by NUL bytes (at most 64, each cut at 512 bytes).
// As phax's main does, every command but oracle, demo and check first gives its
// --max-corpus-bytes to cli_take_max_corpus_bytes.
// Properties of an accepted command line: every number lies in the range its option promises
// (what the command then allocates from), the required operands are there, lists are within
// their bounds and in order; phax train's accepted options serialise to the training state's
// JSON and parse back to the same JSON; and no parser touches a file: the harness runs in its
// own empty folder and finds it empty after every input. A refusal abandons what the parser had
// allocated (the command exits there): allocations are not leak-checked (__lsan_disable).
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <sanitizer/lsan_interface.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_args.h"
#include "fuzz.h"
#include "phax/data.h"
#include "phax/recall.h"
#include "train.h"

static jmp_buf out;
static volatile int in_round_trip;
static void on_die(const char *line) {
    if (in_round_trip) fz_fail("phax train refuses the state of options it accepted", line);
    if (getenv("PHAX_FUZZ_VERBOSE")) fprintf(stderr, "refused: %s\n", line);
    longjmp(out, 1);
}
static void on_exit_(int code) { longjmp(out, 2 + code); }

#define REQUIRE(c) \
    do { \
        if (!(c)) fz_fail("an accepted command line breaks its promise", #c); \
    } while (0)

static void folder_untouched(void) {
    DIR *d = opendir(".");
    if (!d) fz_fail("cannot list the harness's folder", fz_dir());
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) fz_fail("a parser wrote a file", e->d_name);
    closedir(d);
}

static const char *const CMDS[] = {"train", "eval", "generate", "niah", "recall", "info", "demo", "oracle", "check"};
enum { NCMD = sizeof CMDS / sizeof *CMDS, MAXARG = 64, MAXLEN = 512 };

static void accepted_train(int argc, char **argv) {
    train_opts o = train_opts_default();
    const char *changing;
    train_parse_args(argc, argv, &o, &changing);
    if (o.resume) return;  // --resume: the rest comes from the run's state (fuzz_trainstate)
    train_check_opts(&o);
    fz_accepted("train");
    REQUIRE(o.B >= 1 && o.T >= 1 && o.T <= PHAX_MAX_SEQ && o.steps >= 0);
    // phax train fixes the step count before it writes the state (src/train.c: --steps, else
    // one from --time-budget, which needs timings, else 1000): the same here.
    if (!o.steps) {
        if (o.time_budget > 0) return;
        o.steps = 1000;
    }
    // The training state's JSON (a recall task names no data files), read back as --resume does.
    const char *tr = train_is_recall(&o) ? NULL : "train.txt", *va = train_is_recall(&o) ? NULL : "valid.txt";
    char *j = train_opts_to_json(&o, tr, va, 0);
    REQUIRE(j);
    train_opts back = train_opts_default();
    json_t *keep = NULL;
    int split = 0;
    in_round_trip = 1;  // a refusal from here on is a finding
    train_opts_from_json(&back, j, "state", &keep, &split);
    train_check_numbers(&back);
    in_round_trip = 0;
    char *j2 = train_opts_to_json(&back, tr, va, 0);
    REQUIRE(j2 && !strcmp(j, j2));
    free(j), free(j2);
    json_decref(keep);
}

static void accepted(int cmd, int argc, char **argv) {
    switch (cmd) {
    case 0: accepted_train(argc, argv); break;
    case 1: {
        eval_opts o;
        eval_parse_args(argc, argv, &o);
        fz_accepted("eval");
        REQUIRE(o.ckpt && !o.data_dir != !o.file && o.backend && o.B >= 1 && o.T >= 0 && o.T <= PHAX_MAX_SEQ);
        REQUIRE(o.nb == -1 || (o.nb >= 1 && o.nb <= PHAX_EVAL_MAX_BUCKETS));
        for (int b = 0; o.nb > 0 && b < o.nb; b++) REQUIRE(o.edges[b] >= 0 && o.edges[b] < o.edges[b + 1]);
        break;
    }
    case 2: {
        gen_opts o;
        generate_parse_args(argc, argv, &o);
        fz_accepted("generate");
        REQUIRE(o.ckpt && !o.prompt != !o.prompt_file && o.ntok >= 0 && o.ntok <= PHAX_MAX_SEQ && o.top_k >= 0);
        REQUIRE(o.temp >= 0 && isfinite(o.temp) && o.window >= -1 && o.window <= PHAX_MAX_SEQ);
        break;
    }
    case 3: {
        niah_opts o;
        niah_parse_args(argc, argv, &o);
        fz_accepted("niah");
        REQUIRE(o.checkpoint && !(o.data_dir && o.text_path) && o.samples >= 1);
        REQUIRE(o.n_depths >= 1 && o.n_depths <= PHAX_CMD_MAX_LIST && o.n_lengths <= PHAX_CMD_MAX_LIST);
        REQUIRE(o.n_variants >= 1 && o.n_variants <= PHAX_NIAH_N_ALL_VARIANTS);
        REQUIRE(o.n_haystacks >= 0 && o.n_haystacks <= PHAX_NIAH_N_HAYSTACKS);
        for (int i = 0; i < o.n_depths; i++) REQUIRE(o.depths[i] >= 0 && o.depths[i] <= 1);
        for (int i = 0; i < o.n_lengths; i++) REQUIRE(o.lengths[i] >= 1);
        break;
    }
    case 4: {
        recall_opts o;
        recall_parse_args(argc, argv, &o);
        fz_accepted("recall");
        REQUIRE(o.ckpt && o.pairs >= 1 && o.pairs <= PHAX_RECALL_MAX_PAIRS && o.queries >= 1 && o.queries <= o.pairs);
        REQUIRE(o.n_bins >= 1 && o.n_bins <= PHAX_CMD_MAX_LIST && o.n_lengths <= PHAX_CMD_MAX_LIST);
        for (int i = 1; i < o.n_bins; i++) REQUIRE(o.bins[i] > o.bins[i - 1]);
        for (int i = 0; i < o.n_depths; i++) REQUIRE(o.depths[i] >= 0 && o.depths[i] <= 1);
        break;
    }
    case 5: {
        info_opts o;
        info_parse_args(argc, argv, &o);
        fz_accepted("info");
        REQUIRE(o.path && o.B >= 0 && o.B <= PHAX_MAX_SEQ && o.T >= 0 && o.T <= PHAX_MAX_SEQ);
        break;
    }
    case 6: {
        demo_opts o;
        demo_parse_args(argc, argv, &o);
        fz_accepted("demo");
        REQUIRE(o.T >= 1 && o.T <= 4096);
        break;
    }
    case 7: {
        oracle_opts o;
        oracle_parse_args(argc, argv, &o);
        fz_accepted("oracle");
        REQUIRE(o.list || (o.op && o.example_out) || (o.op && o.in && o.out));
        REQUIRE(o.max_mib == -1 || (o.max_mib >= 1 && o.max_mib <= 1 << 30));
        break;
    }
    default: {
        check_opts o;
        check_parse_args(argc, argv, &o);
        fz_accepted("check");
        REQUIRE(o.op && o.in && o.pr && o.ntheirs >= 1 && o.ntheirs <= CHECK_MAX_THEIRS);
        for (int i = 0; i < o.ntheirs; i++) REQUIRE(o.theirs[i] && o.theirs[i][0] != '-');
        REQUIRE(o.max_mib == -1 || (o.max_mib >= 1 && o.max_mib <= 1 << 30));
        break;
    }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int init, here = -1;
    if (!init) {
        init = 1;
        here = open(".", O_RDONLY | O_DIRECTORY);
        if (here < 0) fz_fail("cannot open the working folder", ".");
        if (!getenv("PHAX_FUZZ_VERBOSE") && !freopen("/dev/null", "w", stdout)) abort();  // --help text
    }
    if (size < 1) return 0;
    // The parse runs in the harness's own empty folder (a file a parser made would land there);
    // the working folder is restored after it (libFuzzer writes its findings there).
    if (chdir(fz_dir())) fz_fail("cannot enter the harness's folder", fz_dir());
    int cmd = data[0] % NCMD;
    // argv: "<cmd>", then the NUL-separated arguments (copies: a parser may keep pointers).
    static char store[MAXARG][MAXLEN + 1];
    char *argv[MAXARG + 2];
    int argc = 0;
    argv[argc++] = (char *)CMDS[cmd];
    for (size_t p = 1; p < size && argc < MAXARG + 1;) {
        size_t e = p;
        while (e < size && data[e]) e++;
        size_t n = e - p < MAXLEN ? e - p : MAXLEN;
        memcpy(store[argc - 1], data + p, n);
        store[argc - 1][n] = 0;
        argv[argc] = store[argc - 1];
        argc++;
        p = e + 1;
    }
    argv[argc] = NULL;
    cli_die_hook = on_die;
    cli_exit_hook = on_exit_;
    __lsan_disable();
    size_t limit = phax_data_max_bytes();
    if (!setjmp(out)) {
        volatile int n = argc;
        if (cmd != 6 && cmd != 7 && cmd != 8) {
            char name[64];
            snprintf(name, sizeof name, "phax %s", CMDS[cmd]);
            n = cli_take_max_corpus_bytes(name, argc, argv);  // argv[0]: the command, as phax main passes it
        }
        accepted(cmd, n, argv);
    }
    __lsan_enable();
    phax_data_set_max_bytes(limit);
    cli_die_hook = NULL;
    cli_exit_hook = NULL;
    folder_untouched();
    if (fchdir(here)) fz_fail("cannot return to the working folder", ".");
    return 0;
}
