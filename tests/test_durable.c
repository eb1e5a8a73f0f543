// Durable outputs (issue 11, items 3-8 and the time budget): the atomic writer
// cannot be redirected through a planted symlink and respects the umask;
// checkpoints are generations made current in one step, so kill -9 or SIGTERM
// at any moment leaves a run that resumes bit-identical (tests/kill_resume.sh,
// a few trials here); a run without validation data resumes; one trainer per
// run folder; --resume checks the data files before reading or caching them;
// a folder with a log but no checkpoint is started over; an absurd
// --time-budget is refused.
#define _GNU_SOURCE  // vasprintf
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "phax/checkpoint.h"
#include "phax/data.h"
#include "phax/model.h"
#include "phax/safetensors.h"
#include "testutil.h"

static int exists(const char *p) {
    struct stat sb;
    return lstat(p, &sb) == 0;
}

// --- the atomic writer (item 3) -----------------------------------------------------------------

// The old writer opened "<out>.tmp.<pid>" with O_TRUNC and no O_EXCL: a symlink
// planted under that name made it overwrite whatever the link pointed to.
Test(durable, atomic_write_ignores_planted_symlink) {
    char *d = tu_tmpdir("phax_durable"), *victim = tu_join(d, "victim"), *out = tu_join(d, "m.safetensors");
    tu_write_file(victim, "precious", 8);
    char *planted = tu_xprintf("%s.tmp.%ld", out, (long)getpid());
    cr_assert(symlink(victim, planted) == 0);
    phax_st_writer *w = phax_st_writer_new();
    const double x[4] = {1, 2, 3, 4};
    const int64_t sh[1] = {4};
    cr_assert(phax_st_add_f64(w, "x", x, 1, sh) == PHAX_OK);
    cr_assert(phax_st_write(w, out) == PHAX_OK, "%s", phax_error());
    phax_st_writer_free(w);
    char *v = tu_slurp(victim, NULL);
    cr_assert_str_eq(v, "precious", "the planted link's target was overwritten");
    struct stat sb;
    cr_assert(lstat(out, &sb) == 0 && S_ISREG(sb.st_mode), "the output is not a regular file");
    cr_assert(lstat(planted, &sb) == 0 && S_ISLNK(sb.st_mode), "the planted link was used");
    free(v), free(planted), free(victim), free(out);
    tu_rm_rf(d);
    free(d);
}

// Outputs get 0666 minus the umask (they were forced to 0644).
Test(durable, atomic_writes_respect_umask) {
    char *d = tu_tmpdir("phax_durable");
    char *a = tu_join(d, "a.bin"), *b = tu_join(d, "b.safetensors"), *c = tu_join(d, "c.json");
    phax_model_cfg cfg;
    cr_assert(phax_model_cfg_from_json_str(&cfg, "{\"family\": \"pha\", \"d_model\": 32}", "cfg") == PHAX_OK,
              "%s", phax_error());
    const mode_t masks[2] = {077, 002};
    for (int i = 0; i < 2; i++) {
        mode_t old = umask(masks[i]);
        phax_st_writer *w = phax_st_writer_new();
        const double x = 1;
        cr_assert(phax_st_add_f64(w, "x", &x, 0, NULL) == PHAX_OK);
        int ra = phax_write_file_atomic(a, "data", 4), rb = phax_st_write(w, b),
            rc = phax_model_cfg_write_json_file(&cfg, c);
        umask(old);
        phax_st_writer_free(w);
        cr_assert(ra == PHAX_OK && rb == PHAX_OK && rc == PHAX_OK, "%s", phax_error());
        const char *paths[3] = {a, b, c};
        for (int k = 0; k < 3; k++) {
            struct stat sb;
            cr_assert(stat(paths[k], &sb) == 0);
            cr_assert((sb.st_mode & 0777) == (0666 & ~masks[i]), "%s: mode %o under umask %03o",
                      paths[k], sb.st_mode & 0777, masks[i]);
        }
    }
    free(a), free(b), free(c);
    tu_rm_rf(d);
    free(d);
}

// --- the phax binary ---------------------------------------------------------------------------

typedef struct {
    char *dir, *train, *valid, *run, *out, *err;
} sandbox;

static void write_text(const char *path, int lines) {
    static const char *w[] = {"the cat sat on the mat", "a dog ran to the red house",
                              "my friend drank tea", "a bird flew over the old tree"};
    FILE *f = fopen(path, "w");
    cr_assert(f);
    for (int i = 0; i < lines; i++) fprintf(f, "%s\n", w[(i * 3) % 4]);
    fclose(f);
}

static sandbox sandbox_new(void) {
    sandbox s;
    s.dir = tu_tmpdir("phax_durable");
    s.train = tu_join(s.dir, "train.txt"), s.valid = tu_join(s.dir, "valid.txt");
    s.run = tu_join(s.dir, "run"), s.out = tu_join(s.dir, "out.txt"), s.err = tu_join(s.dir, "err.txt");
    write_text(s.train, 80);
    write_text(s.valid, 10);
    return s;
}

static void sandbox_free(sandbox *s) {
    tu_rm_rf(s->dir);
    free(s->dir), free(s->train), free(s->valid), free(s->run), free(s->out), free(s->err);
}

// Start phax with the NULL-terminated arguments (stdout, stderr to the sandbox's files), and
// wait for it: the exit status, or 1000 + the signal that ended it (not an exit status).
static pid_t phax_start(const sandbox *s, const char *const *args) { return tu_phax_spawn(s->out, s->err, NULL, args); }
static int phax_wait(pid_t pid) { return tu_wait(pid, NULL); }
#define RUN(...) phax_wait(phax_start(&s, (const char *[]){__VA_ARGS__, NULL}))
#define TRAIN_ARGS(run, steps)                                                                    \
    "train", "--family", "pha", "--train", s.train, "--tokenizer", "byte", "--set", "d_model=16", \
        "--set", "n_layers=1", "--seq", "16", "--batch", "2", "--steps", steps, "--eval-every",   \
        "0", "--out", run

// The last run failed with one line on stderr holding frag.
static void expect_error(const sandbox *s, int rc, const char *frag) {
    char *e = tu_slurp(s->err, NULL);
    cr_assert(rc == 1, "exit %d, stderr: %s", rc, e);
    char *nl = strchr(e, '\n');
    cr_assert(nl && nl[1] == '\0', "not one line: %s", e);
    cr_assert(strstr(e, frag), "stderr lacks \"%s\": %s", frag, e);
    free(e);
}

static void expect_ok(const sandbox *s, int rc) {
    char *e = tu_slurp(s->err, NULL);
    cr_assert(rc == 0, "exit %d: %s", rc, e);
    free(e);
}

static int64_t ckpt_step(const char *run) {
    phax_ckpt ck;
    cr_assert(phax_ckpt_load(run, -1, &ck) == PHAX_OK, "%s", phax_error());
    int64_t step = ck.step;
    phax_ckpt_free(&ck);
    return step;
}

// Item 5: the state stored "valid": null and the reader refused null.
Test(durable, resume_without_validation_file) {
    sandbox s = sandbox_new();
    expect_ok(&s, RUN(TRAIN_ARGS(s.run, "6"), "--stop-after", "3"));
    expect_ok(&s, RUN("train", "--resume", "--out", s.run));
    cr_assert(ckpt_step(s.run) == 6);
    sandbox_free(&s);
}

// Item 6: a folder held by another trainer is refused, nothing written.
Test(durable, run_folder_locked) {
    sandbox s = sandbox_new();
    cr_assert(mkdir(s.run, 0777) == 0);
    int fd = open(s.run, O_RDONLY | O_DIRECTORY);
    cr_assert(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0);
    expect_error(&s, RUN(TRAIN_ARGS(s.run, "4")), "another phax train");
    char *log = tu_join(s.run, "log.jsonl");
    cr_assert(!exists(log), "the refused run wrote its log");
    close(fd);  // the first trainer ends
    expect_ok(&s, RUN(TRAIN_ARGS(s.run, "4")));
    fd = open(s.run, O_RDONLY | O_DIRECTORY);
    cr_assert(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0);
    expect_error(&s, RUN("train", "--resume", "--out", s.run), "another phax train");
    close(fd);
    free(log);
    sandbox_free(&s);
}

// Rewrite the state of run so that its options name `train` as the training
// file (NULL: keep it) and set `key` to the JSON `value` (when key is not NULL);
// drop_files: also remove the data files' identity (a state of an older phax).
static void craft_state_ex(const char *run, const char *train, int drop_files, const char *key,
                           const char *value) {
    phax_ckpt ck;
    phax_ckpt_state st;
    cr_assert(phax_ckpt_load(run, -1, &ck) == PHAX_OK, "%s", phax_error());
    char *sp = phax_ckpt_state_path(ck.path);
    cr_assert(phax_ckpt_state_load(sp, &ck.layout, &st) == PHAX_OK, "%s", phax_error());
    json_t *o = json_loads(st.options_json, 0, NULL), *d = json_loads(st.data_json, 0, NULL);
    cr_assert(o && d);
    if (train) json_object_set_new(o, "train", json_string(train));
    if (key) json_object_set_new(o, key, json_loads(value, JSON_DECODE_ANY, NULL));
    if (drop_files) json_object_del(d, "files");
    free(st.options_json), free(st.data_json);
    st.options_json = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    st.data_json = json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o), json_decref(d);
    cr_assert(phax_ckpt_state_save(sp, &ck.layout, &st) == PHAX_OK, "%s", phax_error());
    phax_ckpt_state_free(&st);
    phax_ckpt_free(&ck);
    free(sp);
}

static void craft_state(const char *run, const char *train, int drop_files) {
    craft_state_ex(run, train, drop_files, NULL, NULL);
}

static int cache_has(const char *cache, const char *prefix) {
    DIR *d = opendir(cache);
    if (!d) return 0;
    struct dirent *e;
    int found = 0;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, prefix, strlen(prefix))) found = 1;
    closedir(d);
    return found;
}

// Item 7: a state naming another file is refused before that file is
// tokenized into a cache. With the files' identity, from its size and hash;
// without it, inside a generation (which only this phax writes), before the
// file is read at all. (A state of an older phax, files beside no link, is
// checked on its tokens in memory before any cache is written.)
Test(durable, resume_checks_data_before_reading) {
    sandbox s = sandbox_new();
    char *secret = tu_join(s.dir, "secret.txt"), *cache = tu_join(s.run, "cache");
    write_text(secret, 30);
    expect_ok(&s, RUN(TRAIN_ARGS(s.run, "4"), "--valid", s.valid, "--stop-after", "2"));
    for (int drop = 0; drop < 2; drop++) {
        craft_state(s.run, secret, drop);
        int rc = RUN("train", "--resume", "--out", s.run);
        expect_error(&s, rc, drop ? "names no data file identities; nothing was read" : secret);
        cr_assert(!cache_has(cache, "secret"), "a cache of the crafted file was written (drop %d)", drop);
    }
    free(secret), free(cache);
    sandbox_free(&s);
}

// Hardening round 2, item 3: a run folder in the pre-generation layout (a plain
// checkpoint.safetensors, a state without file identities) made --resume tokenize whatever
// file the state named and print its hash in the refusal. Now refused before the named file is
// touched: it is a FIFO here, which any open or read would block on (or a stat refuse as "not
// a regular file"), and the refusal names the identities, no digest.
Test(durable, old_layout_refused_without_touching_named_files) {
    sandbox s = sandbox_new();
    char *fifo = tu_join(s.dir, "secret.fifo"), *model = tu_join(s.run, "checkpoint.safetensors");
    cr_assert(mkfifo(fifo, 0600) == 0);
    expect_ok(&s, RUN(TRAIN_ARGS(s.run, "4"), "--stop-after", "2"));
    craft_state(s.run, fifo, 1);
    // The generation's files copied beside a plain checkpoint.safetensors: the older layout.
    char target[512];
    ssize_t k = readlink(model, target, sizeof target - 1);
    cr_assert(k > 0);
    target[k] = 0;
    const char *sfx[] = {".safetensors", ".state.safetensors", ".vocab"};
    for (int i = 0; i < 3; i++) {
        char *gen = tu_xprintf("%s/%s", s.run, target);
        char *from = tu_xprintf("%.*s%s", (int)(strlen(gen) - strlen(".safetensors")), gen, sfx[i]);
        char *to = tu_xprintf("%.*s%s", (int)(strlen(model) - strlen(".safetensors")), model, sfx[i]);
        free(gen);
        size_t n;
        char *b = tu_slurp(from, &n);
        unlink(to);
        tu_write_file(to, b, n);
        free(b), free(from), free(to);
    }
    expect_error(&s, RUN("train", "--resume", "--out", s.run), "names no data file identities; nothing was read");
    char *e = tu_slurp(s.err, NULL);
    cr_assert(!strstr(e, "fnv") && !strstr(e, "hash\""), "a digest in the refusal: %s", e);
    free(e), free(fifo), free(model);
    sandbox_free(&s);
}

// Hardening round 2, item 7: temporary files a kill left (the log's, a generation's, the token
// cache's) were never cleaned. A training that takes the folder's lock sweeps them: in the run
// folder and its generations all of them, in the cache those of a writer that is gone or over a
// minute old (phax eval may be writing there); other names and links are left alone.
Test(durable, leftover_temporary_files_swept_on_resume) {
    sandbox s = sandbox_new();
    expect_ok(&s, RUN(TRAIN_ARGS(s.run, "6"), "--stop-after", "3"));
    char target[512], *model = tu_join(s.run, "checkpoint.safetensors");
    ssize_t k = readlink(model, target, sizeof target - 1);
    cr_assert(k > 0);
    target[k] = 0;
    char *gen = tu_xprintf("%s/%.*s", s.run, (int)(strrchr(target, '/') - target), target);
    // A writer that is gone: a child that has exited (its pid, reaped, names no process).
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, NULL, 0);
    char *dead_name = tu_xprintf("cache/valid.txt.tok.tmp-%ld-deadwriter00", (long)dead);
    char *live_name = tu_xprintf("cache/other.txt.tok.tmp-%ld-livewriter00", (long)getpid());
    char *swept[] = {tu_join(s.run, "log.jsonl.tmp-abcdefghijkl"), tu_join(gen, "checkpoint.safetensors.tmp-0123456789ab"),
                     tu_join(s.run, "cache/train.txt.tok.tmp-zzzzzzzzzzzz"), tu_join(s.run, dead_name)};
    char *kept[] = {tu_join(s.run, "cache/valid.txt.tok.tmp-yyyyyyyyyyyy"), tu_join(s.run, "notes.tmp-short"),
                    tu_join(s.run, "link.tmp-aaaaaaaaaaaa"), tu_join(s.run, live_name)};
    char *outside = tu_join(s.dir, "outside.txt");
    tu_write_file(outside, "KEEP\n", 5);
    for (int i = 0; i < 4; i++) tu_write_file(swept[i], "x", 1);  // the dead writer's: fresh
    tu_write_file(kept[0], "x", 1), tu_write_file(kept[1], "x", 1), tu_write_file(kept[3], "x", 1);
    cr_assert(symlink(outside, kept[2]) == 0);
    struct timespec old[2] = {{time(NULL) - 120, 0}, {time(NULL) - 120, 0}};
    cr_assert(utimensat(AT_FDCWD, swept[2], old, 0) == 0);  // the cache's: two minutes old
    expect_ok(&s, RUN("train", "--resume", "--out", s.run));
    struct stat sb;
    for (int i = 0; i < 4; i++) cr_expect(lstat(swept[i], &sb) != 0, "%s was left", swept[i]);
    for (int i = 0; i < 4; i++) cr_expect(lstat(kept[i], &sb) == 0, "%s was removed", kept[i]);
    char *o = tu_slurp(outside, NULL);
    cr_assert_str_eq(o, "KEEP\n");
    free(o);
    for (int i = 0; i < 4; i++) free(swept[i]), free(kept[i]);
    free(outside), free(gen), free(model), free(dead_name), free(live_name);
    sandbox_free(&s);
}

// Hardening round 2, item 7: a reader (phax info, eval) running while a training checkpoints
// every step sometimes failed: the generation it resolved was pruned under it. phax_ckpt_load
// now loads the generation the link names after such a failure. Readers in a loop against a
// training that checkpoints every step: every load succeeds (timing decides how often the
// race is hit; the count of loads that needed it is not observable, the failures are).
Test(durable, readers_survive_generations_pruned_under_them) {
    sandbox s = sandbox_new();
    expect_ok(&s, RUN(TRAIN_ARGS(s.run, "2")));  // a first generation to read
    char *run2 = tu_join(s.dir, "run2"), *link = tu_join(run2, "checkpoint.safetensors");
    pid_t pid = phax_start(&s, (const char *[]){"train", "--family", "pha", "--train", s.train, "--tokenizer", "byte",
                                                 "--set", "d_model=16", "--set", "n_layers=1", "--seq", "16", "--batch",
                                                 "2", "--steps", "400", "--eval-every", "0", "--ckpt-every", "1",
                                                 "--out", run2, NULL});
    int loads = 0, failed = 0, status;
    char first_error[1024] = "";
    while (waitpid(pid, &status, WNOHANG) == 0) {
        phax_ckpt ck;
        struct stat sb;
        if (lstat(link, &sb) != 0) continue;  // not yet
        if (phax_ckpt_load(run2, -1, &ck) == PHAX_OK) {
            loads++;
            phax_ckpt_free(&ck);
        } else {
            if (!failed++) snprintf(first_error, sizeof first_error, "%s", phax_error());
        }
    }
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the training failed");
    fprintf(stderr, "readers: %d loads during 400 checkpoints, %d failed\n", loads, failed);
    cr_assert(loads > 20, "only %d loads overlapped the training", loads);
    cr_assert(failed == 0, "%d of %d loads failed; the first: %s", failed, loads + failed, first_error);
    free(run2), free(link);
    sandbox_free(&s);
}

// Hardening round 2, item 7: a second Ctrl-C no longer cut a long final evaluation short. The
// first signal lets the step and its evaluation finish; a second one now cuts the evaluation
// (not logged), and the run still checkpoints and exits 130. Made deterministic by waiting for
// the last step's log line (the final evaluation of a 1 MB validation split starts right after
// it and takes seconds) before the two signals.
Test(durable, second_sigint_cuts_the_final_evaluation_short) {
    sandbox s = sandbox_new();
    write_text(s.valid, 40000);  // ~1 MB: the final evaluation takes seconds
    char *log = tu_join(s.run, "log.jsonl");
    pid_t pid = phax_start(&s, (const char *[]){TRAIN_ARGS(s.run, "2"), "--valid", s.valid, "--eval-tokens", "0",
                                                 "--log-every", "1", NULL});
    double t0 = phax_clock();
    for (;;) {
        struct stat lsb;
        char *l = stat(log, &lsb) == 0 ? tu_slurp(log, NULL) : NULL;
        int at2 = l && strstr(l, "{\"step\": 2, \"loss\"");
        free(l);
        if (at2) break;
        cr_assert(phax_clock() - t0 < 60, "no step 2 in the log after 60 s");
        usleep(2000);
    }
    kill(pid, SIGINT);
    usleep(50000);
    kill(pid, SIGINT);
    double t1 = phax_clock();
    int rc = phax_wait(pid);
    double waited = phax_clock() - t1;
    char *o = tu_slurp(s.out, NULL), *l = tu_slurp(log, NULL);
    cr_assert(rc == 130, "exit %d: %s", rc, o);
    cr_assert(strstr(o, "cut short by a second signal"), "%s", o);
    cr_assert(!strstr(l, "val_loss"), "the cut evaluation was logged: %s", l);
    cr_assert(ckpt_step(s.run) == 2, "no checkpoint at step 2");
    fprintf(stderr, "second SIGINT: exited %.2f s after it\n", waited);
    free(o), free(l), free(log);
    sandbox_free(&s);
}

// Hardening round 2: targeted kills at each commit point (PHAX_FAULT_KILL=NAME:N makes the
// N-th arrival at a named point kill the process; include/phax/atomic_file.h): in every atomic
// file write (before and after its rename: logs, caches, checkpoint files) and at each step of
// making a checkpoint generation current. Each run is then finished by resuming (or starting
// over before a first checkpoint): it must end bit-identical to a run never killed, and leave
// no temporary file or folder behind.
static int has_litter(const char *dir, char *what, size_t n) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d));) {
        const char *nm = e->d_name;
        if (!strcmp(nm, ".") || !strcmp(nm, "..")) continue;
        char *p = tu_join(dir, nm);
        struct stat sb;
        if (strstr(nm, ".tmp-") || !strncmp(nm, ".ckpt-tmp-", 10) || !strncmp(nm, ".checkpoint.safetensors.link-", 29)) {
            snprintf(what, n, "%s", p);
            found = 1;
        } else if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            found = has_litter(p, what, n);
        }
        free(p);
    }
    closedir(d);
    return found;
}

Test(durable, kill_at_each_commit_point) {
    sandbox s = sandbox_new();
    char *ref = tu_join(s.dir, "ref");
#define KARGS(run) TRAIN_ARGS(run, "6"), "--valid", s.valid, "--eval-every", "2", "--ckpt-every", "1"
    expect_ok(&s, RUN(KARGS(ref)));
    char *want_path = tu_join(ref, "checkpoint.safetensors");
    size_t wn;
    char *want = tu_slurp(want_path, &wn);
    static const char *points[] = {"atomic:before-rename", "atomic:after-rename", "gen:files-written",
                                   "gen:folder-renamed",   "gen:link-made",       "gen:current"};
    int landed = 0, trials = 0;
    for (size_t pi = 0; pi < sizeof points / sizeof *points; pi++)
        for (int nth = 1; nth <= 3; nth += 2) {
            char *run = tu_xprintf("%s/run-%zu-%d", s.dir, pi, nth), *spec = tu_xprintf("%s:%d", points[pi], nth);
            setenv("PHAX_FAULT_KILL", spec, 1);
            int rc = RUN(KARGS(run));
            unsetenv("PHAX_FAULT_KILL");
            trials++;
            cr_assert(rc == 0 || rc == 1000 + SIGKILL, "%s: exit %d", spec, rc);
            landed += rc != 0;
            for (int k = 0; rc != 0 && k < 3; k++) {  // finish it: resume, or start over before a checkpoint
                struct stat sb;
                char *link = tu_join(run, "checkpoint.safetensors");
                int has = lstat(link, &sb) == 0;
                free(link);
                rc = has ? RUN("train", "--resume", "--out", run) : RUN(KARGS(run));
            }
            char *e = tu_slurp(s.err, NULL);
            cr_assert(rc == 0, "%s: not resumable (exit %d): %s", spec, rc, e);
            free(e);
            char *got_path = tu_join(run, "checkpoint.safetensors");
            size_t gn;
            char *got = tu_slurp(got_path, &gn);
            cr_expect(gn == wn && !memcmp(got, want, wn), "%s: the finished model differs from the never-killed run's",
                      spec);
            char what[1024];
            cr_expect(!has_litter(run, what, sizeof what), "%s: litter left: %s", spec, what);
            free(got), free(got_path), free(run), free(spec);
        }
#undef KARGS
    fprintf(stderr, "commit-point kills: %d of %d trials killed at their point, all resumed bit-identical\n", landed,
            trials);
    cr_assert(landed >= trials - 2, "only %d of %d kills landed", landed, trials);
    free(want), free(want_path), free(ref);
    sandbox_free(&s);
}

// The options a state restores are held to the command line's ranges (a
// crafted --seq of 1e9 would allocate without bound).
Test(durable, resume_options_out_of_range_refused) {
    sandbox s = sandbox_new();
    expect_ok(&s, RUN(TRAIN_ARGS(s.run, "4"), "--stop-after", "2"));
    craft_state_ex(s.run, NULL, 0, "seq", "1000000000");
    expect_error(&s, RUN("train", "--resume", "--out", s.run), "out of range");
    craft_state_ex(s.run, NULL, 0, "seq", "16");
    craft_state_ex(s.run, NULL, 0, "lr", "-1");
    expect_error(&s, RUN("train", "--resume", "--out", s.run), "--lr");
    sandbox_free(&s);
}

// Item 8: a folder with a log and no checkpoint (killed before the first one)
// is started over by the same command; --resume says so.
Test(durable, log_without_checkpoint_starts_over) {
    sandbox s = sandbox_new();
    cr_assert(mkdir(s.run, 0777) == 0);
    char *log = tu_join(s.run, "log.jsonl");
    tu_write_file(log, "{\"step\": 1, \"loss\": 9}\n", 23);
    expect_error(&s, RUN("train", "--resume", "--out", s.run), "without --resume");
    int rc = RUN(TRAIN_ARGS(s.run, "3"));
    expect_ok(&s, rc);
    char *o = tu_slurp(s.out, NULL), *l = tu_slurp(log, NULL);
    cr_assert(strstr(o, "starting it over"), "%s", o);
    cr_assert(!strstr(l, "\"loss\": 9}"), "the old log was kept: %s", l);
    cr_assert(ckpt_step(s.run) == 3);
    free(o), free(l), free(log);
    sandbox_free(&s);
}

// A crafted run folder cannot make training write outside it: a log.jsonl that is a
// link (a new run's restart truncated its target; --resume appended to a dangling one's)
// and a cache/ that is a link (resume wrote its token caches through it).
Test(durable, run_folder_links_not_followed) {
    sandbox s = sandbox_new();
    char *victim = tu_join(s.dir, "precious.txt"), *log = tu_join(s.run, "log.jsonl");
    char *made = tu_join(s.dir, "made_outside.txt"), *elsewhere = tu_join(s.dir, "elsewhere");
    char *cache = tu_join(s.run, "cache");
    tu_write_file(victim, "PRECIOUS\n", 9);
    cr_assert(mkdir(s.run, 0777) == 0 && symlink(victim, log) == 0);
    expect_ok(&s, RUN(TRAIN_ARGS(s.run, "4"), "--stop-after", "2"));  // starts over: the link replaced
    char *v = tu_slurp(victim, NULL);
    cr_assert_str_eq(v, "PRECIOUS\n", "the link's target was written: %s", v);
    free(v);
    struct stat sb;
    cr_assert(lstat(log, &sb) == 0 && S_ISREG(sb.st_mode), "log.jsonl is not a plain file");
    cr_assert(unlink(log) == 0 && symlink(made, log) == 0);  // dangling
    expect_error(&s, RUN("train", "--resume", "--out", s.run), "symbolic link");
    cr_assert(!exists(made), "--resume created the dangling link's target");
    cr_assert(unlink(log) == 0);
    tu_rm_rf(cache);
    cr_assert(mkdir(elsewhere, 0777) == 0 && symlink(elsewhere, cache) == 0);
    expect_error(&s, RUN("train", "--resume", "--out", s.run), "symbolic link");
    int n = tu_dir_count(elsewhere);
    cr_assert(n == 0, "%d files written through the cache link", n);
    free(victim), free(log), free(made), free(elsewhere), free(cache);
    sandbox_free(&s);
}

// Hardening round 2, item 4: resume read a log.jsonl planted as a link to a readable file and
// copied its lines into the run's (0644) log. It must refuse the link and read nothing.
Test(durable, resume_refuses_a_planted_log_link) {
    sandbox s = sandbox_new();
    char *secret = tu_join(s.dir, "secret.jsonl"), *log = tu_join(s.run, "log.jsonl");
    expect_ok(&s, RUN(TRAIN_ARGS(s.run, "6"), "--stop-after", "3"));
    const char *line = "{\"step\": 1, \"secret\": \"HUNTER2\"}\n";
    tu_write_file(secret, line, strlen(line));
    cr_assert(unlink(log) == 0 && symlink(secret, log) == 0);
    expect_error(&s, RUN("train", "--resume", "--out", s.run), "symbolic link");
    struct stat sb;
    cr_assert(lstat(log, &sb) == 0 && S_ISLNK(sb.st_mode), "the link was replaced by a copy");
    char *e = tu_slurp(s.err, NULL), *o = tu_slurp(s.out, NULL);
    cr_assert(!strstr(e, "HUNTER2") && !strstr(o, "HUNTER2"), "the linked file's content was printed");
    free(e), free(o), free(secret), free(log);
    sandbox_free(&s);
}

// Hardening round 2, item 2: the log was read whole under the 64 MiB text-file limit, so a
// long run (a log past 64 MiB) could not resume. A log of 70 MB (its real lines, then lines
// of later steps that a resume drops) resumes, keeping exactly the real lines.
Test(durable, resume_with_a_log_past_64_mib) {
    sandbox s = sandbox_new();
    char *log = tu_join(s.run, "log.jsonl");
    expect_ok(&s, RUN(TRAIN_ARGS(s.run, "6"), "--stop-after", "3"));
    size_t n0;
    char *before = tu_slurp(log, &n0);
    FILE *f = fopen(log, "a");
    cr_assert(f);
    char pad[1001];
    memset(pad, 'x', 1000), pad[1000] = 0;
    for (int i = 0; i < 70000; i++) fprintf(f, "{\"step\": %d, \"pad\": \"%s\"}\n", 1000 + i, pad);
    fclose(f);
    struct stat sb;
    cr_assert(stat(log, &sb) == 0 && sb.st_size > (64L << 20), "the log is only %lld bytes", (long long)sb.st_size);
    expect_ok(&s, RUN("train", "--resume", "--out", s.run));
    size_t n1;
    char *after = tu_slurp(log, &n1);
    cr_assert(n1 > n0 && !memcmp(after, before, n0), "the log's first %zu bytes changed on resume", n0);
    cr_assert(!strstr(after, "\"pad\""), "lines of later steps were kept");
    free(before), free(after), free(log);
    sandbox_free(&s);
}

// Item 11: 1e300 seconds wrapped to 1 step silently.
Test(durable, time_budget_out_of_range_refused) {
    sandbox s = sandbox_new();
    const char *a[] = {"train", "--family", "pha", "--train", s.train, "--tokenizer", "byte",
                       "--set", "d_model=16", "--set", "n_layers=1", "--seq", "16", "--batch", "2",
                       "--time-budget", "1e300", "--out", s.run, NULL};
    expect_error(&s, phax_wait(phax_start(&s, a)), "--time-budget");
    cr_assert(!exists(s.run));
    sandbox_free(&s);
}

// Generations: the link names the newest, the previous one stays, older ones
// and temporary folders go, also one where `phax eval` put its token cache.
Test(durable, generations_current_and_previous_kept) {
    sandbox s = sandbox_new();
    expect_ok(&s, RUN(TRAIN_ARGS(s.run, "5"), "--ckpt-every", "1", "--stop-after", "3"));
    expect_ok(&s, RUN("eval", s.run, "--file", s.valid, "--seq", "16"));
    char *evcache = tu_join(s.run, "ckpt-00000003/cache");
    // (Only when eval puts its default cache beside the model file, as it does now.)
    int had_cache = exists(evcache);
    expect_ok(&s, RUN("train", "--resume", "--out", s.run));
    cr_assert(!had_cache || !exists(evcache), "the generation with a cache folder was not pruned");
    free(evcache);
    char *link = tu_join(s.run, "checkpoint.safetensors"), target[256];
    ssize_t n = readlink(link, target, sizeof target - 1);
    cr_assert(n > 0, "checkpoint.safetensors is not a link");
    target[n] = '\0';
    cr_assert_str_eq(target, "ckpt-00000005/checkpoint.safetensors");
    DIR *d = opendir(s.run);
    struct dirent *e;
    int gens = 0;
    while ((e = readdir(d))) {
        cr_assert(strncmp(e->d_name, ".ckpt-tmp-", 10) && strncmp(e->d_name, ".checkpoint.link-", 17),
                  "left over: %s", e->d_name);
        if (!strncmp(e->d_name, "ckpt-", 5)) {
            gens++;
            cr_assert(!strcmp(e->d_name, "ckpt-00000005") || !strcmp(e->d_name, "ckpt-00000004"),
                      "kept %s", e->d_name);
        }
    }
    closedir(d);
    cr_assert(gens == 2, "%d generations", gens);
    free(link);
    sandbox_free(&s);
}

// Item 4: SIGTERM (kill, systemd, Docker, Slurm) stops like Ctrl-C: the step is
// finished, a checkpoint written, exit 143; the run resumes.
Test(durable, sigterm_checkpoints_and_resumes) {
    sandbox s = sandbox_new();
    pid_t pid = phax_start(&s, (const char *[]){TRAIN_ARGS(s.run, "1000000"), "--ckpt-every", "0", NULL});
    char *log = tu_join(s.run, "log.jsonl");
    // Wait for a few steps in the log.
    for (int i = 0; i < 3000; i++) {
        int lines = 0;
        FILE *f = fopen(log, "r");
        if (f) {
            for (int ch; (ch = fgetc(f)) != EOF;) lines += ch == '\n';
            fclose(f);
        }
        if (lines >= 3) break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    cr_assert(kill(pid, SIGTERM) == 0);
    int rc = phax_wait(pid);
    cr_assert(rc == 143, "after SIGTERM: %s %d", rc > 1000 ? "killed by signal" : "exit", rc % 1000);
    int64_t k = ckpt_step(s.run);
    cr_assert(k >= 3, "checkpoint at step %ld", (long)k);
    char *stop = tu_xprintf("%ld", (long)k + 2);
    expect_ok(&s, RUN("train", "--resume", "--out", s.run, "--stop-after", stop));
    cr_assert(ckpt_step(s.run) == k + 2);
    free(stop), free(log);
    sandbox_free(&s);
}

// Item 4: kill -9 (and SIGTERM) at random moments, then resume: bit-identical
// to a run never stopped. A few trials here; tests/kill_resume.sh runs more.
Test(durable, kill_at_random_resumes_bit_identical) {
    const char *root = getenv("PHAX_SOURCE_ROOT"), *bin = getenv("PHAX_BIN");
    cr_assert(root && bin);
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)(tu_base_seed() % 32768));
    const char *sigs[2] = {"KILL", "TERM"}, *trials[2] = {"2", "1"};
    char *d = tu_tmpdir("phax_durable"), *out = tu_join(d, "trials.txt");
    for (int i = 0; i < 2; i++) {
        char *cmd = tu_xprintf("bash '%s/tests/kill_resume.sh' '%s' %s %s %s > '%s' 2>&1", root, bin,
                            trials[i], sigs[i], seed, out);
        int rc = system(cmd);
        char *t = tu_slurp(out, NULL);
        cr_assert(rc == 0, "%s: exit %d:\n%s", cmd, rc, t);
        free(t), free(cmd);
    }
    free(out);
    tu_rm_rf(d);
    free(d);
}
