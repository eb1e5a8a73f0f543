// The phax command end to end ($PHAX_BIN): tiny training runs on a corpus the
// test writes (loss goes down for pha, swax and transformer), an interrupted
// run resumed ends bit-identical to one never stopped, bad input and bad
// checkpoints are refused with one line and exit 1 without writing, a
// diverging run stops with its last checkpoint intact, and `phax info`.
#define _GNU_SOURCE  // vasprintf
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "phax/checkpoint.h"
#include "testutil.h"

// --- helpers ---------------------------------------------------------------------------------

static void same_bytes(const char *a, const char *b) {
    size_t na, nb;
    char *x = tu_slurp(a, &na), *y = tu_slurp(b, &nb);
    cr_assert(na == nb && !memcmp(x, y, na), "%s and %s differ", a, b);
    free(x), free(y);
}

// A test's temporary folder with a small corpus: four sentences repeated
// (a few hundred words), so a tiny model can learn the bigrams in 20 steps.
typedef struct {
    char *dir, *data, *out, *err;
} sandbox;

static sandbox sandbox_new(void) {
    const char *t = getenv("TMPDIR");
    sandbox s;
    s.dir = tu_xprintf("%s/phax_cli_XXXXXX", t && *t ? t : "/tmp");
    cr_assert(mkdtemp(s.dir), "mkdtemp: %s", strerror(errno));
    s.data = tu_xprintf("%s/data", s.dir);
    s.out = tu_xprintf("%s/out.txt", s.dir);
    s.err = tu_xprintf("%s/err.txt", s.dir);
    cr_assert(mkdir(s.data, 0777) == 0);
    static const char *lines[] = {"the cat sat on the mat", "the dog ran to the red house",
                                  "a small bird flew over the old tree",
                                  "my friend drank warm tea at noon"};
    const char *names[2] = {"train.txt", "valid.txt"};
    for (int k = 0; k < 2; k++) {
        char *p = tu_xprintf("%s/%s", s.data, names[k]);
        FILE *f = fopen(p, "w");
        cr_assert(f);
        for (int i = 0; i < (k ? 8 : 60); i++) fprintf(f, "%s\n", lines[(i * 3 + k) % 4]);
        fclose(f);
        free(p);
    }
    return s;
}

static void sandbox_free(sandbox *s) {
    tu_rm_rf(s->dir);
    free(s->dir), free(s->data), free(s->out), free(s->err);
}

// Run phax with the NULL-terminated arguments, stdout and stderr to the sandbox's files;
// the exit status (1000 + a signal that ended it).
#define phax_run(s, ...) tu_phax((s)->out, (s)->err, NULL, NULL, __VA_ARGS__)

// stderr of the last run must be one line holding every fragment.
static void expect_error(const sandbox *s, int rc, const char *frag1, const char *frag2) {
    char *e = tu_slurp(s->err, NULL);
    cr_assert(rc == 1, "exit %d, stderr: %s", rc, e);
    cr_assert(!strncmp(e, "phax train: ", 12), "stderr: %s", e);
    char *nl = strchr(e, '\n');
    cr_assert(nl && nl[1] == '\0', "not one line: %s", e);
    cr_assert(strstr(e, frag1), "stderr lacks \"%s\": %s", frag1, e);
    cr_assert(!frag2 || strstr(e, frag2), "stderr lacks \"%s\": %s", frag2, e);
    free(e);
}

#define TINY(family, out, ...)                                                                \
    phax_run(&s, "train", "--family", family, "--data", s.data, "--set", "d_model=32", "--set", \
             "n_layers=2", "--seq", "16", "--batch", "4", "--steps", "20", "--warmup", "2",     \
             "--lr", "1e-2", "--eval-every", "10", "--backend", "fast", "--out", out,           \
             ##__VA_ARGS__, NULL)

// Losses of the "loss" lines of a log.jsonl, in order.
static int read_losses(const char *log, double *loss, int cap) {
    char *t = tu_slurp(log, NULL);
    int n = 0;
    for (char *p = t; (p = strstr(p, "\"loss\": ")) && n < cap; p++) loss[n++] = strtod(p + 8, NULL);
    free(t);
    return n;
}

// A file of a run folder's current checkpoint generation (the folder the link
// checkpoint.safetensors points into).
static char *gen_file(const char *run, const char *name) {
    char *m = phax_ckpt_model_path(run);
    cr_assert(m);
    *strrchr(m, '/') = '\0';
    char *p = tu_xprintf("%s/%s", m, name);
    free(m);
    return p;
}

// --- training ----------------------------------------------------------------------------------

static void loss_decreases(const char *family) {
    sandbox s = sandbox_new();
    char *run = tu_xprintf("%s/run", s.dir), *log = tu_xprintf("%s/log.jsonl", run);
    int rc = TINY(family, run);
    char *e = tu_slurp(s.err, NULL);
    cr_assert(rc == 0, "%s: exit %d: %s", family, rc, e);
    free(e);
    double l[32];
    cr_assert(read_losses(log, l, 32) == 20);
    double first = (l[0] + l[1] + l[2]) / 3, last = (l[17] + l[18] + l[19]) / 3;
    // ln 25 = 3.2 at start; the four sentences' bigrams are learnable to ~1.5.
    cr_assert(last < first - 0.5, "%s: loss %.3f -> %.3f", family, first, last);
    char *t = tu_slurp(log, NULL);
    cr_assert(strstr(t, "\"val_ppl\""), "no evaluation line");
    if (!strcmp(family, "swax")) cr_assert(strstr(t, "\"window\": "), "no window logged");
    if (!strcmp(family, "pha")) cr_assert(strstr(t, "\"mix\": [["), "no mix weights logged");
    free(t);
    phax_ckpt ck;
    cr_assert(phax_ckpt_load(run, -1, &ck) == PHAX_OK, "%s", phax_error());
    cr_assert(ck.step == 20 && ck.tokens_seen == 20 * 4 * 16 && ck.train_seq == 16);
    phax_ckpt_free(&ck);
    free(run), free(log);
    sandbox_free(&s);
}

Test(cli, train_pha_loss_decreases) { loss_decreases("pha"); }
Test(cli, train_swax_loss_decreases) { loss_decreases("swax"); }
Test(cli, train_transformer_loss_decreases) { loss_decreases("transformer"); }

// 20 steps straight vs 10 (--stop-after) + --resume: the same bytes.
static void resume_identical(const char *family) {
    sandbox s = sandbox_new();
    char *a = tu_xprintf("%s/a", s.dir), *b = tu_xprintf("%s/b", s.dir);
    cr_assert(TINY(family, a, "--ckpt-every", "7") == 0);
    cr_assert(TINY(family, b, "--ckpt-every", "7", "--stop-after", "10") == 0);
    phax_ckpt ck;
    cr_assert(phax_ckpt_load(b, -1, &ck) == PHAX_OK && ck.step == 10, "%s", phax_error());
    phax_ckpt_free(&ck);
    int rc = phax_run(&s, "train", "--resume", "--out", b, NULL);
    cr_assert(rc == 0, "resume: exit %d", rc);
    const char *files[] = {"checkpoint.safetensors", "checkpoint.state.safetensors", "checkpoint.vocab"};
    for (int i = 0; i < 3; i++) {
        char *fa = gen_file(a, files[i]), *fb = gen_file(b, files[i]);
        same_bytes(fa, fb);
        free(fa), free(fb);
    }
    char *la = tu_xprintf("%s/log.jsonl", a), *lb = tu_xprintf("%s/log.jsonl", b);
    char *ta = tu_log_without_timing(la), *tb = tu_log_without_timing(lb);
    cr_assert_str_eq(ta, tb, "logs differ beyond timing");
    // Resuming a finished run does nothing.
    cr_assert(phax_run(&s, "train", "--resume", "--out", b, NULL) == 0);
    char *tb2 = tu_log_without_timing(lb);
    cr_assert_str_eq(tb, tb2);
    free(ta), free(tb), free(tb2), free(la), free(lb), free(a), free(b);
    sandbox_free(&s);
}

Test(cli, resume_bit_identical_pha) { resume_identical("pha"); }
Test(cli, resume_bit_identical_swax) { resume_identical("swax"); }

// --- bad input ---------------------------------------------------------------------------------

Test(cli, nan_lr_refused_nothing_written) {
    sandbox s = sandbox_new();
    char *run = tu_xprintf("%s/run", s.dir);
    expect_error(&s, TINY("pha", run, "--lr", "nan"), "--lr", "nan");
    cr_assert(!tu_exists(run));
    expect_error(&s, TINY("pha", run, "--lr", "-1e-3"), "--lr", NULL);
    expect_error(&s, TINY("pha", run, "--seq", "65537"), "--seq", "65537");
    expect_error(&s, TINY("pha", run, "--frobnicate", "1"), "unknown option '--frobnicate'", NULL);
    expect_error(&s, TINY("pha", run, "--set", "n_heads=3"), "n_heads", NULL);
    cr_assert(!tu_exists(run));
    free(run);
    sandbox_free(&s);
}

Test(cli, missing_or_empty_data_refused_nothing_written) {
    sandbox s = sandbox_new();
    char *run = tu_xprintf("%s/run", s.dir), *nope = tu_xprintf("%s/nope.txt", s.dir),
         *empty = tu_xprintf("%s/empty.txt", s.dir);
    int rc = phax_run(&s, "train", "--family", "pha", "--train", nope, "--out", run, NULL);
    expect_error(&s, rc, nope, "no such file");
    cr_assert(!tu_exists(run), "the run folder was created");
    fclose(fopen(empty, "w"));
    rc = phax_run(&s, "train", "--family", "pha", "--train", empty, "--out", run, NULL);
    expect_error(&s, rc, empty, "empty");
    rc = phax_run(&s, "train", "--family", "pha", "--data", s.dir, "--out", run, NULL);
    expect_error(&s, rc, s.dir, "no training file");
    cr_assert(!tu_exists(run), "the run folder was created");
    free(run), free(nope), free(empty);
    sandbox_free(&s);
}

// A second run into a folder that holds one, and --resume of broken or foreign
// checkpoints, are refused without touching the files.
Test(cli, bad_resume_refused_files_untouched) {
    sandbox s = sandbox_new();
    char *run = tu_xprintf("%s/run", s.dir);
    cr_assert(TINY("pha", run, "--steps", "3", "--eval-every", "0") == 0);
    char *ck = gen_file(run, "checkpoint.safetensors"), *st = gen_file(run, "checkpoint.state.safetensors");
    size_t n0;
    char *orig = tu_slurp(ck, &n0);
    expect_error(&s, TINY("pha", run), "holds a run already", NULL);
    // Another family than the checkpoint's.
    expect_error(&s, phax_run(&s, "train", "--resume", "--out", run, "--family", "swax", NULL), ck,
                 "a pha checkpoint, expected swax");
    // A training option with --resume.
    expect_error(&s, phax_run(&s, "train", "--resume", "--out", run, "--lr", "1", NULL), "--lr",
                 "cannot be changed on --resume");
    // A torn pair: the state of another step.
    char *st2 = tu_xprintf("%s/other", s.dir);
    cr_assert(TINY("pha", st2, "--steps", "3", "--stop-after", "2", "--eval-every", "0") == 0);
    char *st2f = gen_file(st2, "checkpoint.state.safetensors");
    char *keep = tu_slurp(st, NULL);
    cr_assert(rename(st2f, st) == 0);
    expect_error(&s, phax_run(&s, "train", "--resume", "--out", run, NULL), st, "torn checkpoint");
    // Truncated model file.
    cr_assert(truncate(ck, (off_t)n0 / 2) == 0);
    expect_error(&s, phax_run(&s, "train", "--resume", "--out", run, NULL), ck, NULL);
    struct stat sb;
    cr_assert(stat(ck, &sb) == 0 && (size_t)sb.st_size == n0 / 2, "the checkpoint was rewritten");
    // Nothing to resume.
    char *none = tu_xprintf("%s/none", s.dir);
    expect_error(&s, phax_run(&s, "train", "--resume", "--out", none, NULL), "no checkpoint", NULL);
    free(orig), free(keep), free(run), free(ck), free(st), free(st2), free(st2f), free(none);
    sandbox_free(&s);
}

// A diverging run (absurd learning rate) stops at the first non-finite loss,
// exit 1, naming the step; the checkpoint of the step before stays as it was.
Test(cli, divergence_stops_checkpoint_intact) {
    sandbox s = sandbox_new();
    char *run = tu_xprintf("%s/run", s.dir);
    int rc = TINY("transformer", run, "--lr", "1e30", "--min-lr", "0", "--warmup", "0",
                  "--ckpt-every", "1", "--eval-every", "0");
    expect_error(&s, rc, "step ", "is NaN");
    phax_ckpt ck;
    cr_assert(phax_ckpt_load(run, PHAX_FAMILY_TRANSFORMER, &ck) == PHAX_OK, "%s", phax_error());
    char *e = tu_slurp(s.err, NULL);
    long bad = strtol(strstr(e, "step ") + 5, NULL, 10);
    cr_assert(ck.step == bad - 1, "checkpoint at step %ld, failure at %ld", (long)ck.step, bad);
    for (size_t i = 0; i < ck.layout.numel; i++) cr_assert(isfinite(ck.params[i]));
    phax_ckpt_free(&ck);
    free(e), free(run);
    sandbox_free(&s);
}

Test(cli, help_documents_every_flag) {
    sandbox s = sandbox_new();
    cr_assert(phax_run(&s, "train", "--help", NULL) == 0);
    char *h = tu_slurp(s.out, NULL);
    const char *flags[] = {"--family", "--config", "--set", "--data", "--train", "--valid",
                           "--tokenizer", "--steps", "--time-budget", "--batch", "--seq", "--lr",
                           "--min-lr", "--warmup", "--beta1", "--beta2", "--eps", "--wd", "--clip",
                           "--seed", "--backend", "--eval-every", "--eval-tokens", "--ckpt-every",
                           "--out", "--resume", "--cache-dir", "--stop-after", "--task",
                           "--recall-pairs", "--recall-queries", "default"};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
        cr_assert(strstr(h, flags[i]), "--help lacks %s", flags[i]);
    free(h);
    sandbox_free(&s);
}

// --- phax info ---------------------------------------------------------------------------------

Test(cli, info_checkpoint_and_config) {
    sandbox s = sandbox_new();
    char *run = tu_xprintf("%s/run", s.dir), *ck = tu_xprintf("%s/checkpoint.safetensors", run);
    cr_assert(TINY("pha", run, "--steps", "2", "--eval-every", "0") == 0);
    int rc = phax_run(&s, "info", ck, NULL);
    char *o = tu_slurp(s.out, NULL), *e = tu_slurp(s.err, NULL);
    cr_assert(rc == 0, "exit %d: %s", rc, e);
    const char *want[] = {"\"family\": \"pha\"", "embedding", "block 0", "attn", "gss", "ffn_aux",
                          "total", "AdamW", "workspace", "batch 4 x 16"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        cr_assert(strstr(o, want[i]), "phax info lacks \"%s\":\n%s", want[i], o);
    free(o), free(e);
    // A config file, with another batch.
    char *cfg = tu_xprintf("%s/c.json", s.dir);
    FILE *f = fopen(cfg, "w");
    fputs("{\"family\": \"swax\", \"d_model\": 32}\n", f);
    fclose(f);
    rc = phax_run(&s, "info", cfg, "--batch", "2", "--seq", "64", NULL);
    o = tu_slurp(s.out, NULL);
    cr_assert(rc == 0 && strstr(o, "mlstm") && strstr(o, "batch 2 x 64"), "%s", o);
    free(o);
    // swax_gdn: its GDN layer's 13 tensors counted as their own component (d 32, 4 heads, kernel 4:
    // 512 + 512 + 1,024 + 64 + 64 + 128 + 128 + 128 + 4 + 4 + 8 + 1,024 + 1,024 = 4,624), and the
    // workspace of its branch
    f = fopen(cfg, "w");
    fputs("{\"family\": \"swax_gdn\", \"d_model\": 32}\n", f);
    fclose(f);
    rc = phax_run(&s, "info", cfg, "--batch", "2", "--seq", "64", NULL);
    o = tu_slurp(s.out, NULL);
    cr_assert(rc == 0 && strstr(o, "gdn 4,624") && strstr(o, "gdn branch"), "%s", o);
    free(o);
    free(run), free(ck), free(cfg);
    sandbox_free(&s);
}

// --- eval and generate -------------------------------------------------------------------------

// stderr of the last run: one line starting with `prefix` and holding frag; stdout empty.
static void expect_cmd_error(const sandbox *s, int rc, const char *prefix, const char *frag) {
    char *e = tu_slurp(s->err, NULL), *o = tu_slurp(s->out, NULL);
    cr_assert(rc == 1, "exit %d, stderr: %s", rc, e);
    cr_assert(!strncmp(e, prefix, strlen(prefix)), "stderr: %s", e);
    char *nl = strchr(e, '\n');
    cr_assert(nl && nl[1] == '\0', "not one line: %s", e);
    cr_assert(strstr(e, frag), "stderr lacks \"%s\": %s", frag, e);
    cr_assert(o[0] == '\0', "stdout not empty: %s", o);
    free(e), free(o);
}

static double json_number(const char *text, const char *key) {
    char *k = tu_xprintf("\"%s\": ", key);
    const char *p = strstr(text, k);
    cr_assert(p, "no %s in %s", key, text);
    double v = strtod(p + strlen(k), NULL);
    free(k);
    return v;
}

// The run's last validation loss, its checkpoint and `phax eval` on the same
// split, windows and batch agree: the same forwards, one as a mean per batch
// (float) and one as per-token float losses averaged in double — a few float
// roundings of a loss of ~2 apart, far below 1e-5.
Test(cli, eval_agrees_with_training_log) {
    sandbox s = sandbox_new();
    char *run = tu_xprintf("%s/run", s.dir), *log = tu_xprintf("%s/log.jsonl", run);
    char *js = tu_xprintf("%s/e.json", s.dir), *csv = tu_xprintf("%s/e.csv", s.dir);
    cr_assert(TINY("swax", run) == 0);
    char *t = tu_slurp(log, NULL), *last = t, *p;
    while ((p = strstr(last + 1, "\"val_loss\""))) last = p;
    double logged = json_number(last, "val_loss");
    free(t);
    int rc = phax_run(&s, "eval", run, "--data", s.data, "--split", "valid", "--seq", "16", "--batch",
                      "4", "--json", js, "--csv", csv, NULL);
    char *e = tu_slurp(s.err, NULL);
    cr_assert(rc == 0, "exit %d: %s", rc, e);
    free(e);
    char *j = tu_slurp(js, NULL);
    double ev = json_number(j, "loss");
    cr_assert(fabs(ev - logged) <= 1e-5 * fabs(logged), "eval %.9f vs log %.9f", ev, logged);
    cr_assert(strstr(j, "\"mode\": \"windows\""));
    free(j);
    char *c = tu_slurp(csv, NULL);
    cr_assert(!strncmp(c, "lo,hi,tokens,loss,ppl\n0,16,", 26), "csv: %s", c);
    free(c);
    // Carried state reads the same tokens: same count, a loss of the same size.
    rc = phax_run(&s, "eval", run, "--data", s.data, "--split", "valid", "--seq", "16", "--carry",
                  "--json", js, NULL);
    cr_assert(rc == 0);
    j = tu_slurp(js, NULL);
    cr_assert(strstr(j, "\"mode\": \"carry\"") && fabs(json_number(j, "loss") - logged) < 1.0, "%s", j);
    free(j);
    free(run), free(log), free(js), free(csv);
    sandbox_free(&s);
}

Test(cli, eval_and_generate_bad_input) {
    sandbox s = sandbox_new();
    char *run = tu_xprintf("%s/run", s.dir), *ck = tu_xprintf("%s/checkpoint.safetensors", run);
    cr_assert(TINY("pha", run, "--steps", "2", "--eval-every", "0") == 0);
    expect_cmd_error(&s, phax_run(&s, "eval", run, "--data", s.data, "--seq", "70000", NULL),
                     "phax eval: ", "--seq");
    expect_cmd_error(&s, phax_run(&s, "eval", run, "--data", s.data, NULL), "phax eval: ", "no test split");
    char *missing = tu_xprintf("%s/nope", s.dir);
    expect_cmd_error(&s, phax_run(&s, "eval", missing, "--data", s.data, "--split", "valid", NULL),
                     "phax eval: ", "nope");
    // --carry over full attention would attend to the whole split.
    expect_cmd_error(&s, phax_run(&s, "eval", run, "--data", s.data, "--split", "valid", "--carry", NULL),
                     "phax eval: ", "windowed attention");
    // The corpus has no <unk>: an unknown word in a prompt is refused, naming it.
    expect_cmd_error(&s, phax_run(&s, "generate", run, "--prompt", "the zebra sat", NULL),
                     "phax generate: ", "'zebra'");
    // A truncated checkpoint.
    size_t n;
    char *bytes = tu_slurp(ck, &n);
    FILE *f = fopen(ck, "wb");
    fwrite(bytes, 1, n / 2, f);
    fclose(f);
    free(bytes);
    expect_cmd_error(&s, phax_run(&s, "generate", run, "--prompt", "the cat", NULL), "phax generate: ",
                     "checkpoint.safetensors");
    free(run), free(ck), free(missing);
    sandbox_free(&s);
}

// Greedy continuation is deterministic; sampling repeats with its seed.
Test(cli, generate_deterministic) {
    sandbox s = sandbox_new();
    char *run = tu_xprintf("%s/run", s.dir);
    cr_assert(TINY("swax", run) == 0);
    char *outs[4];
    const char *temps[4] = {"0", "0", "1.0", "1.0"};
    for (int i = 0; i < 4; i++) {
        int rc = phax_run(&s, "generate", run, "--prompt", "the cat sat", "--tokens", "12",
                          "--temperature", temps[i], "--top-k", "5", "--seed", "7", NULL);
        char *e = tu_slurp(s.err, NULL);
        cr_assert(rc == 0, "exit %d: %s", rc, e);
        free(e);
        outs[i] = tu_slurp(s.out, NULL);
        cr_assert(!strncmp(outs[i], "the cat sat ", 12), "%s", outs[i]);
    }
    cr_assert_str_eq(outs[0], outs[1]);
    cr_assert_str_eq(outs[2], outs[3]);
    for (int i = 0; i < 4; i++) free(outs[i]);
    free(run);
    sandbox_free(&s);
}
