// `phax train`: train a model of any family on a text corpus, with AdamW, a
// warmup + cosine learning rate, periodic validation and checkpoints, and an
// exact resume. docs/train.md describes the command and the files it writes.
// This file is the loop (steps, evaluation, checkpoints, resume); the options,
// the corpus and the model on its backend are in train_opts.c, train_data.c and
// trainer.c (src/train.h).
//
// Determinism: everything a step computes is a function of (options, seed,
// step) and the state at the step's start — the batch (phax_sampler_batch),
// the SWA window (phax_swax_window_at), the learning rate (phax_lr_at) — so a
// run stopped at a checkpoint and resumed ends bit-identical to one never
// stopped (same thread count; fcpu kernels are deterministic for it).
//
// Several MPI ranks (mpirun -np N phax train ..., src/dist.h, docs/distributed.md): every rank
// draws the same global batch and computes the gradient of its share of the rows
// (trainer_grad); the gradients are summed over the ranks and every rank takes the same AdamW
// step on the same bits. The loss and gradient norm that stop a diverging run are the reduced
// ones, the same on every rank, so every rank stops at the same step. Rank 0 alone writes (the
// run folder, its lock, log, caches, checkpoints) and evaluates; the others wait at a barrier.
#define _GNU_SOURCE  // sigaction
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "phax/data.h"
#include "phax/model_plan.h"
#include "phax/niah.h"
#include "phax/recall.h"
#include "dist.h"
#include "train.h"

#define now_s phax_clock

// ---------------------------------------------------------------------------
// Evaluation: the first eval_tokens of the valid split in windows of T, B
// windows per forward (rows past the end padded with target −1); the mean
// token cross-entropy over the n − 1 predicted tokens.

static int count_targets(const int32_t *y, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += y[i] >= 0;
    return k;
}

// SIGINT (Ctrl-C) and SIGTERM (kill, systemd, Docker, Slurm): finish the step (and an
// evaluation under way), checkpoint, exit 128 + the signal. A second signal cuts an
// evaluation short (it is then not logged); the step still finishes and checkpoints.
static volatile sig_atomic_t interrupted = 0, signals = 0;
static void on_sigint(int sig) {
    interrupted = sig;
    if (signals < 2) signals++;
}
static int eval_cut;  // the last evaluation stopped at a second signal

static double evaluate(trainer *t, const int32_t *tok, size_t n, int window) {
    phax_eval_iter it;
    if (phax_eval_iter_init(&it, tok, n, t->T)) die_lib();
    size_t BT = (size_t)t->B * t->T;
    double sum = 0;
    long count = 0;
    for (;;) {
        int rows = 0;
        for (; rows < t->B; rows++)
            if (!phax_eval_iter_next(&it, t->x + (size_t)rows * t->T, t->y + (size_t)rows * t->T)) break;
        if (rows == 0) break;
        for (size_t i = (size_t)rows * t->T; i < BT; i++) t->x[i] = 0, t->y[i] = -1;
        int k = count_targets(t->y, BT);
        double loss;
        if (k > 0) {
            if (trainer_loss(t, window, &loss)) die_lib();
            sum += loss * k, count += k;
        }
        if (rows < t->B) break;
        if (signals >= 2) {
            eval_cut = 1;
            break;
        }
    }
    return count ? sum / (double)count : NAN;
}

// ---------------------------------------------------------------------------
// Recall: rows and validation.

// Row b of a batch: recall row (seed, first + b), for rows past n padding (x 0, y −1).
// vary: the mqar curriculum (training rows only; validation keeps P and Q).
static void recall_rows(const train_opts *o, trainer *t, uint64_t seed, uint64_t first, size_t n, int vary) {
    for (int b = 0; b < t->B; b++) {
        size_t off = (size_t)b * t->T;
        if ((size_t)b >= n) {
            for (int i = 0; i < t->T; i++) t->x[off + i] = 0, t->y[off + i] = -1;
            continue;
        }
        int rc = train_is_mqar(o) ? phax_mqar_train_sample(seed, first + (uint64_t)b, o->recall_pairs,
                                                           o->recall_queries, vary, t->T, t->x + off, t->y + off, NULL)
                                  : phax_recall_train_sample(seed, first + (uint64_t)b, o->recall_pairs,
                                                             o->recall_queries, t->T, t->x + off, t->y + off, NULL);
        if (rc) die_lib();
    }
}

// ---------------------------------------------------------------------------
// Run state, log and checkpoints

typedef struct {
    train_opts o;
    phax_model_cfg cfg;
    corpus data;
    trainer tr;
    phax_sampler sampler;
    uint64_t batch_seed, window_seed;
    int stochastic_window;  // the §3.4 draw per step (phax_plan_draws_window: swax, swa)
    phax_niah *niah;        // --niah-frac > 0: the task that makes the retrieval rows
    uint64_t niah_seed, niah_mix_seed;
    int recall;             // --task recall: every row from phax_recall_train_sample
    uint64_t recall_seed, recall_valid_seed;
    void *logits;           // recall validation: (B, T, V) logits in the backend's dtype
    long start, total;      // first step to run, total steps
    size_t eval_n;          // valid tokens scored per evaluation (recall: rows)
    char *model_path;       // OUT/checkpoint.safetensors: the link to the current generation
    char *state_path;       // --resume: the state of the generation resumed
    char *log_path;
    char *options_json, *rng_json, *data_json;
    FILE *log;
    int tty;
} run;

typedef struct {
    double loss, acc;
    long answers;
} recall_eval;

// Rows 0..n−1 of the validation seed, B per forward: the mean cross-entropy of
// the answers (the only targets) and the fraction whose argmax is the answer
// (ties: the lower id).
static recall_eval evaluate_recall(run *r, int window) {
    trainer *t = &r->tr;
    int V = t->cfg.vocab_size;
    double sum = 0;
    long count = 0, right = 0;
    for (size_t first = 0; first < r->eval_n; first += (size_t)t->B) {
        if (signals >= 2) {
            eval_cut = 1;
            break;
        }
        size_t n = r->eval_n - first < (size_t)t->B ? r->eval_n - first : (size_t)t->B;
        recall_rows(&r->o, t, r->recall_valid_seed, first, n, 0);
        size_t BT = (size_t)t->B * t->T;
        int k = count_targets(t->y, BT);
        double loss;
        if (trainer_logits(t, window, r->logits, &loss)) die_lib();
        sum += loss * k, count += k;
        for (size_t i = 0; i < BT; i++) {
            if (t->y[i] < 0) continue;
            int best = 0;
            for (int v = 1; v < V; v++) {
                double a = trainer_logit(t, r->logits, i * V + v);
                double b = trainer_logit(t, r->logits, i * V + best);
                if (a > b) best = v;
            }
            right += best == t->y[i];
        }
    }
    return (recall_eval){count ? sum / (double)count : NAN, count ? (double)right / count : NAN, count};
}


static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

// Several ranks: every rank's parameters are the same bits (each took the same steps on the
// same reduced gradients; a rank whose OpenMP thread count or library differs could round
// differently) before rank 0 writes them; the others wait.
static void params_agree(run *r, long steps_done) {
    if (dist_size() < 2) return;
    size_t n = r->tr.L->numel;
    float *p = phax_alloc(n * sizeof(float));
    if (!p) die("out of memory");
    if (phax_bmodel_params_get(r->tr.m, 0, n, PHAX_DT_F32, p)) die_lib();
    uint64_t h = fnv(0xcbf29ce484222325ULL, p, n * sizeof(float));
    phax_free(p);
    if (!dist_agree_u64(h))
        die("step %ld: the ranks' parameters differ (give every rank the same OMP_NUM_THREADS, phax build "
            "and libraries)", steps_done);
}

static void save_checkpoint(run *r, long steps_done) {
    params_agree(r, steps_done);
    if (dist_rank() != 0) {
        dist_barrier();
        return;
    }
    trainer *t = &r->tr;
    phax_ckpt_state s = {.step = steps_done, .options_json = r->options_json,
                         .rng_json = r->rng_json, .data_json = r->data_json};
    float *params;
    trainer_snapshot(t, &params, &s);
    phax_ckpt ck = {.cfg = t->cfg, .layout = *t->L, .params = params,
                    .vocab = r->data.vocab, .step = steps_done,
                    .tokens_seen = (int64_t)steps_done * r->o.B * r->o.T, .train_batch = r->o.B,
                    .train_seq = r->o.T};
    // The log lines up to this step are durable before the generation that they lead to
    // (a resumed run truncates the log to its checkpoint; it cannot restore lost lines).
    if (fflush(r->log) || fsync(fileno(r->log))) die("%s: write failed: %s", r->log_path, strerror(errno));
    // A whole generation (state, vocabulary, model) becomes current in one step;
    // the previous one stays until then (phax_ckpt_save_generation).
    if (phax_ckpt_save_generation(r->o.out, &ck, t->L, &s)) die_lib();
    trainer_snapshot_free(params, &s);
    dist_barrier();
}

static void log_line(run *r, const char *line) {
    if (!r->log) return;  // ranks > 0
    fputs(line, r->log);
    fputc('\n', r->log);
    if (fflush(r->log)) die("%s: write failed: %s", r->log_path, strerror(errno));
}

// Append `"mix": [[w, ...], ...]` (softplus-normalised, per block) when the blocks have a
// mix (pha unless freeze_mix; trainer_init finds blocks.{l}.mix.p from the plan).
static size_t fmt_mix(const run *r, char *buf, size_t cap) {
    const trainer *t = &r->tr;
    if (!t->mix_nb[0]) return 0;
    size_t k = (size_t)snprintf(buf, cap, ", \"mix\": [");
    for (int l = 0; l < t->cfg.n_layers && k < cap; l++) {
        double sp[8], S = 0;
        int nb = t->mix_nb[l];
        for (int i = 0; i < nb && i < 8; i++) {
            double z = trainer_param_at(t, (size_t)t->mix_off[l] + i);
            sp[i] = fmax(z, 0) + log1p(exp(-fabs(z))), S += sp[i];
        }
        k += (size_t)snprintf(buf + k, cap - k, "%s[", l ? ", " : "");
        for (int i = 0; i < nb && i < 8 && k < cap; i++)
            k += (size_t)snprintf(buf + k, cap - k, "%s%.6g", i ? ", " : "", sp[i] / S);
        if (k < cap) k += (size_t)snprintf(buf + k, cap - k, "]");
    }
    if (k < cap) k += (size_t)snprintf(buf + k, cap - k, "]");
    return k;
}

static void fmt_eta(char *buf, size_t cap, double s) {
    if (!(s >= 0 && s < 1e9)) {  // no float->long overflow on an absurd estimate
        snprintf(buf, cap, "--");
        return;
    }
    long v = (long)(s + 0.5);
    if (v >= 3600) snprintf(buf, cap, "%ld:%02ld:%02ld", v / 3600, v / 60 % 60, v % 60);
    else snprintf(buf, cap, "%ld:%02ld", v / 60, v % 60);
}

static void progress(run *r, long done, double loss, double tps, double eta, int window) {
    char e[32], w[32] = "";
    fmt_eta(e, sizeof e, eta);
    if (r->stochastic_window) snprintf(w, sizeof w, " | w %d", window);
    if (r->tty) {
        int width = 24, fill = (int)(width * done / r->total);
        char bar[32];
        for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
        bar[width] = '\0';
        printf("\r%ld/%ld [%s] loss %.4f | %.0f tok/s | ETA %s%s\033[K", done, r->total, bar, loss,
               tps, e, w);
        fflush(stdout);
    } else if (done % r->o.log_every == 0 || done == r->total) {
        printf("step %ld/%ld loss %.4f tok/s %.0f eta %s%s\n", done, r->total, loss, tps, e, w);
        fflush(stdout);
    }
}

static void run_eval_rank0(run *r, long done);

// Rank 0 evaluates; the other ranks wait for it.
static void run_eval(run *r, long done) {
    if (dist_rank() == 0) run_eval_rank0(r, done);
    dist_barrier();
}

// An evaluation cut short by a second signal is said so, and not logged (a partial mean is no
// validation figure).
static int eval_was_cut(long done, double t0) {
    if (!eval_cut) return 0;
    printf("\neval step %ld: cut short by a second signal after %.1fs (not logged)\n", done, now_s() - t0);
    fflush(stdout);
    return 1;
}

static void run_eval_rank0(run *r, long done) {
    eval_cut = 0;
    if (r->recall) {
        double t0 = now_s();
        recall_eval e = evaluate_recall(r, -1);
        if (eval_was_cut(done, t0)) return;
        char line[256];
        snprintf(line, sizeof line,
                 "{\"step\": %ld, \"val_loss\": %.9g, \"val_acc\": %.9g, \"val_rows\": %zu, "
                 "\"val_answers\": %ld}", done, e.loss, e.acc, r->eval_n, e.answers);
        log_line(r, line);
        if (r->tty) printf("\r\033[K");
        printf("eval step %ld: val_loss %.4f val_acc %.4f (%ld answers in %zu rows, %.1fs)\n", done,
               e.loss, e.acc, e.answers, r->eval_n, now_s() - t0);
        fflush(stdout);
        return;
    }
    if (!r->data.va) return;
    double t0 = now_s();
    double vl = evaluate(&r->tr, r->data.va, r->eval_n, -1);
    if (eval_was_cut(done, t0)) return;
    char line[256];
    snprintf(line, sizeof line, "{\"step\": %ld, \"val_loss\": %.9g, \"val_ppl\": %.9g, \"val_tokens\": %zu}",
             done, vl, exp(vl), r->eval_n);
    log_line(r, line);
    if (r->tty) printf("\r\033[K");
    printf("eval step %ld: val_loss %.4f val_ppl %.2f (%zu tokens, %.1fs)\n", done, vl, exp(vl),
           r->eval_n, now_s() - t0);
    fflush(stdout);
}

// --niah-frac: row b of step s becomes a needle-in-a-haystack example when the
// first uniform of its own stream (mix seed, s·B + b) is below the fraction; the
// example itself is drawn from (niah seed, s·B + b). Both are functions of the
// step, so a resumed run makes the same batches. Returns the rows replaced.
static int mix_niah_rows(run *r, long s) {
    if (!r->niah) return 0;
    trainer *t = &r->tr;
    int k = 0;
    for (int b = 0; b < r->o.B; b++) {
        uint64_t idx = (uint64_t)s * (uint64_t)r->o.B + (uint64_t)b;
        phax_rng u = phax_rng_stream(r->niah_mix_seed, idx);
        if (!(phax_rng_uniform(&u) < r->o.niah_frac)) continue;
        size_t off = (size_t)b * r->o.T;
        if (phax_niah_train_sample(r->niah, r->niah_seed, idx, r->o.T, t->x + off, t->y + off, NULL))
            die_lib();
        k++;
    }
    return k;
}

// One optimizer step s (0-based), logged; exits on a non-finite loss or gradient norm.
static void train_step(run *r, long s, double *loss_out, int *win_out, double *dt) {
    trainer *t = &r->tr;
    double t0 = now_s();
    int niah_rows = 0;
    if (r->recall) {
        recall_rows(&r->o, t, r->recall_seed, (uint64_t)s * (uint64_t)r->o.B, (size_t)r->o.B, r->o.recall_vary);
    } else {
        if (phax_sampler_batch(&r->sampler, (uint64_t)s, t->x, t->y, NULL)) die_lib();
        niah_rows = mix_niah_rows(r, s);
    }
    int window = r->stochastic_window ? phax_swax_window_at(&t->cfg, r->window_seed, s, r->total) : -1;
    phax_lr_schedule ls = {r->o.lr, r->o.min_lr, r->o.warmup, r->total};
    double lr = phax_lr_at(&ls, s), loss = NAN, gnorm = NAN;
    if (trainer_grad(t, window, &loss)) die_lib();
    const char *bad = !isfinite(loss) ? "loss" : NULL;
    if (!bad && trainer_update(t, &r->o, lr, s + 1, &gnorm)) {
        if (isfinite(gnorm)) die_lib();
        bad = "gradient norm";
    }
    if (bad) {
        double v = !strcmp(bad, "loss") ? loss : gnorm;
        die("step %ld: %s is %s; stopped (the last checkpoint, %s, is untouched)", s + 1, bad,
            isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf",
            file_exists(r->model_path) ? r->model_path : "none yet");
    }
    *dt = now_s() - t0;
    char line[8192];
    size_t k = (size_t)snprintf(line, sizeof line,
                                "{\"step\": %ld, \"loss\": %.9g, \"lr\": %.9g, \"gnorm\": %.9g", s + 1,
                                loss, lr, gnorm);
    if (r->stochastic_window) k += (size_t)snprintf(line + k, sizeof line - k, ", \"window\": %d", window);
    if (r->niah) k += (size_t)snprintf(line + k, sizeof line - k, ", \"niah_rows\": %d", niah_rows);
    k += fmt_mix(r, line + k, sizeof line - k);
    if (k < sizeof line)
        snprintf(line + k, sizeof line - k, ", \"tokens_per_s\": %.1f}", (double)r->o.B * r->o.T / *dt);
    log_line(r, line);
    *loss_out = loss, *win_out = window;
}

// --time-budget: time one warm-up and two measured steps and one forward on
// step 0's batch, all discarded (gradients only, no update), then fix the
// steps so that steps and evaluations fit.
static long steps_for_budget(run *r) {
    trainer *t = &r->tr;
    double loss, t0 = now_s();
    if (r->recall) recall_rows(&r->o, t, r->recall_seed, 0, (size_t)r->o.B, r->o.recall_vary);
    else if (phax_sampler_batch(&r->sampler, 0, t->x, t->y, NULL)) die_lib();
    int window = r->stochastic_window ? r->tr.cfg.w_long : -1;
    if (trainer_grad(t, window, &loss)) die_lib();
    double t1 = now_s();
    for (int i = 0; i < 2; i++)
        if (trainer_grad(t, window, &loss)) die_lib();
    double step_s = (now_s() - t1) / 2, t2 = now_s();
    if (trainer_loss(t, window, &loss)) die_lib();
    double fwd_s = now_s() - t2;
    double left = r->o.time_budget - (now_s() - t0);
    // Cost of one evaluation: its forwards.
    double windows = r->recall ? (double)r->eval_n : r->data.va ? ceil((double)r->eval_n / r->o.T) : 0;
    double eval_s = ceil(windows / r->o.B) * fwd_s;
    double per_step = step_s + (r->o.eval_every ? eval_s / (double)r->o.eval_every : 0);
    // In double first: a step count beyond --steps' range is refused, not wrapped.
    double Sd = floor((left - eval_s) / per_step);
    if (!(Sd <= (double)(1L << 40)))
        die("--time-budget: %g s at %.3g s per step is more than %ld steps", r->o.time_budget,
            per_step, 1L << 40);
    long S = Sd < 1 ? 1 : (long)Sd;
    printf("time budget %.0fs: %.3fs per step, %.2fs per evaluation -> %ld steps\n",
           r->o.time_budget, step_s, eval_s, S);
    return S;
}

// ---------------------------------------------------------------------------
// Setup: a new run, or a resumed one.

// --resume: the options, config, vocabulary, parameters and moments of DIR's
// checkpoint; the log cut back to the checkpoint's step.
// The temporary files a killed training left (phax_atomic_sweep): in the run folder and its
// generations, which only the lock's holder writes, all of them; in the default cache, which
// phax eval writes too, those over a minute old (a cache is written in well under that).
static void sweep_run_dir(const char *dir) {
    phax_atomic_sweep(dir, 0);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strncmp(e->d_name, "ckpt-", 5)) continue;
        char *sub = path_join(dir, e->d_name);
        phax_atomic_sweep(sub, 0);
        free(sub);
    }
    if (d) closedir(d);
    char *cache = path_join(dir, "cache");
    phax_atomic_sweep(cache, 60);
    free(cache);
}

// One training per run folder: an exclusive lock on the folder, held (the
// descriptor stays open) until the process exits, when the kernel drops it.
static void lock_run_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) die("%s: cannot open the run folder: %s", dir, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK)
            die("%s: another phax train is using this run folder (wait for it, or use another --out)", dir);
        die("%s: cannot lock the run folder: %s", dir, strerror(errno));
    }
    sweep_run_dir(dir);
}

// The run folder has a current checkpoint (the link, even a dangling one).
static int holds_checkpoint(const run *r) {
    struct stat sb;
    return lstat(r->model_path, &sb) == 0;
}

static void resume_setup(run *r, const char *changing, phax_ckpt *ck, phax_ckpt_state *st, json_t **keep) {
    if (changing) die("%s: cannot be changed on --resume (the run's options come from its checkpoint)", changing);
    struct stat sb;
    if (stat(r->o.out, &sb) != 0) die("%s: no checkpoint to resume (no such folder)", r->model_path);
    if (dist_rank() == 0) lock_run_dir(r->o.out);
    if (!holds_checkpoint(r)) {
        if (file_exists(r->log_path))
            die("%s: no checkpoint to resume: the run stopped before its first one; start it over with "
                "the same phax train command without --resume (it reuses the folder)", r->model_path);
        die("%s: no checkpoint to resume", r->model_path);
    }
    int fam = -1;
    if (r->o.family) {
        phax_family f;
        if (phax_family_parse(r->o.family, &f)) die("--family: '%s' is not a model family", r->o.family);
        fam = (int)f;
    }
    if (phax_ckpt_load(r->o.out, fam, ck)) die_lib();  // the current generation
    if (!(r->state_path = phax_ckpt_state_path(ck->path))) die_lib();
    if (phax_ckpt_state_load(r->state_path, &ck->layout, st)) die_lib();
    if (phax_ckpt_state_check(r->state_path, st, ck->step)) die_lib();
    int split = 0;
    train_opts_from_json(&r->o, st->options_json, r->state_path, keep, &split);
    train_check_numbers(&r->o);
    r->cfg = ck->cfg;
    r->start = ck->step;
    r->total = r->o.steps;
    if (train_is_recall(&r->o)) {
        // No data files: the rows come from the seed; the vocabulary must be the task's.
        if (phax_recall_vocab_check(ck->vocab)) die("%s: %s", ck->path, phax_error());
        r->data.vocab = ck->vocab;
        ck->vocab = NULL;
        return;
    }
    r->data.train = strdup(r->o.train_path);
    r->data.valid = r->o.valid_path ? strdup(r->o.valid_path) : NULL;
    r->data.split = split;
    // The state must name its files' identities before any file it names is touched: a state
    // without them (an older phax's layout, or a crafted one) is refused, not tokenized and
    // compared (that read any file a crafted state named and printed its hash).
    if (!corpus_has_identities(st->data_json))
        die("%s: the training state names no data file identities; nothing was read (a run folder of an "
            "older phax: train it again with this one)", r->state_path);
    corpus_check_file(r->data.train);
    if (r->data.valid) corpus_check_file(r->data.valid);
    corpus_check_files(&r->data, st->data_json, r->state_path);
    r->data.vocab = ck->vocab;  // the checkpoint's vocabulary, not a rebuilt one
    ck->vocab = NULL;
}

// Keep the log lines of steps <= keep_step (a resumed run rewrites the rest).
static void new_run_setup(run *r) {
    train_check_opts(&r->o);
    if (holds_checkpoint(r)) die("%s: holds a run already (use --resume, or another --out)", r->o.out);
    if (train_is_recall(&r->o)) {
        if (phax_recall_vocab(&r->data.vocab)) die_lib();
    } else {
        corpus_locate(&r->data, &r->o);
        corpus_vocab(&r->data, &r->o);
    }
    r->cfg = train_build_config(&r->o, (int)phax_vocab_size(r->data.vocab));
    r->start = 0;
}

static char *rng_identity(const run *r) {
    char a[24], b[24], c[24];
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s}", "seed", train_u64_str(r->o.seed, a), "batch_seed",
                          train_u64_str(r->batch_seed, b), "window_seed", train_u64_str(r->window_seed, c),
                          "batches", "phax_sampler_batch(batch_seed, step)", "window",
                          "phax_swax_window_at(cfg, window_seed, step, steps)");
    if (r->recall) {
        char d[24], e[24];
        json_object_set_new(j, "recall_seed", json_string(train_u64_str(r->recall_seed, d)));
        json_object_set_new(j, "recall_valid_seed", json_string(train_u64_str(r->recall_valid_seed, e)));
        int mq = train_is_mqar(&r->o);
        json_object_set_new(j, "batches", json_string(mq ? "phax_mqar_train_sample(recall_seed, step*B + b)"
                                                         : "phax_recall_train_sample(recall_seed, step*B + b)"));
        json_object_set_new(j, "valid", json_string(mq ? "phax_mqar_train_sample(recall_valid_seed, row)"
                                                       : "phax_recall_train_sample(recall_valid_seed, row)"));
    }
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    if (!s) die("out of memory");
    return s;
}

// --task recall: what the state's "data" holds in place of the corpus identity
// (compared on resume).
static char *recall_identity(const run *r) {
    char hv[24];
    snprintf(hv, sizeof hv, "%016" PRIx64, phax_vocab_hash(r->data.vocab));
    json_t *j = json_pack("{s:s, s:i, s:i, s:s}", "task", r->o.task, "recall_pairs", r->o.recall_pairs,
                          "recall_queries", r->o.recall_queries, "vocab_hash", hv);
    if (j && r->o.recall_vary) json_object_set_new(j, "recall_vary", json_true());
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    if (!s) die("out of memory");
    return s;
}

int phax_train_main(int argc, char **argv) {
    int ranks = dist_init(&argc, &argv), rank0 = dist_rank() == 0;
    run r;
    memset(&r, 0, sizeof r);
    r.o = train_opts_default();
    const char *changing;
    train_parse_args(argc, argv, &r.o, &changing);
    if (!r.o.out) die("--out DIR is required (try --help)");
    r.model_path = path_join(r.o.out, PHAX_CKPT_DEFAULT_NAME ".safetensors");
    r.log_path = path_join(r.o.out, "log.jsonl");
    phax_ckpt ck = {0};
    phax_ckpt_state st = {0};
    json_t *keep = NULL;
    if (r.o.resume) resume_setup(&r, changing, &ck, &st, &keep);
    else new_run_setup(&r);

    // Nothing has been written so far; from here the run folder is used. Several ranks: a rank
    // that failed before this point (its options, its files) ends them all before rank 0 writes.
    dist_barrier();
    int restart = 0;
    if (ranks > r.o.B) die("--batch %d: fewer rows than the %d ranks (each rank computes rows of the batch)", r.o.B, ranks);
    if (!r.o.resume && rank0) {
        if (phax_mkdir_p(r.o.out)) die_lib();
        if (phax_fsync_parent(r.o.out)) die_lib();  // the new folder's entry itself durable
        lock_run_dir(r.o.out);
        // Again under the lock: a run started at the same time may have checkpointed.
        if (holds_checkpoint(&r)) die("%s: holds a run already (use --resume, or another --out)", r.o.out);
        restart = file_exists(r.log_path);
    }
    r.recall = train_is_recall(&r.o);
    if (r.recall) {
        // No corpus, no cache: the rows are functions of (seed, step) and (seed, row).
        r.data_json = recall_identity(&r);
        if (r.o.resume && strcmp(r.data_json, st.data_json))
            die("%s: the task differs from the checkpoint's (%s, now %s)", r.state_path, st.data_json,
                r.data_json);
        long rows = r.o.eval_tokens / r.o.T;
        r.eval_n = rows > 1 ? (size_t)rows : 1;
        r.recall_seed = phax_seed_derive(r.o.seed, "train.recall");
        r.recall_valid_seed = phax_seed_derive(r.o.seed, "valid.recall");
    } else {
        char *cache = r.o.cache_dir ? strdup(r.o.cache_dir) : path_join(r.o.out, "cache");
        struct stat csb;
        // The default cache lies inside the run folder: a link planted there must not send the
        // caches elsewhere (an explicit --cache-dir may be anything the user names).
        if (!r.o.cache_dir && lstat(cache, &csb) == 0 && S_ISLNK(csb.st_mode))
            die("%s: a symbolic link; the run folder's cache must be a folder (or pass --cache-dir)", cache);
        if (!rank0) {
            corpus_tokens(&r.data, NULL);  // rank 0 alone writes the cache
        } else {
            if (phax_mkdir_p(cache)) die_lib();
            corpus_tokens(&r.data, cache);
        }
        free(cache);
        r.data_json = corpus_identity(&r.data);
        // No digest in the message: it would tell a crafted state's author about a file.
        if (r.o.resume && !corpus_same_tokens(r.data_json, st.data_json))
            die("%s: the training data differ from the checkpoint's (token counts or hashes); nothing was written",
                r.data.train);
        r.eval_n = r.o.eval_tokens && (size_t)r.o.eval_tokens < r.data.nva ? (size_t)r.o.eval_tokens : r.data.nva;
        if (phax_sampler_init(&r.sampler, r.data.tr, r.data.ntr, r.o.B, r.o.T,
                              r.batch_seed = phax_seed_derive(r.o.seed, "train.batches")))
            die("%s: %zu tokens, too few for --seq %d (%s)", r.data.train, r.data.ntr, r.o.T, phax_error());
    }
    r.window_seed = phax_seed_derive(r.o.seed, "swax.window");
    r.stochastic_window = phax_plan_draws_window(&r.cfg);
    if (r.o.niah_frac > 0) {
        // Text haystacks come from the training tokens (never the validation split).
        phax_niah_opts no = {.passkey_digits = r.o.niah_digits, .train_variants = r.o.niah_variants};
        if (phax_niah_new(r.data.vocab, r.data.tr, r.data.ntr, &no, &r.niah))
            die("%s: %s", r.o.niah_variants ? "--niah-variants" : "--niah-frac", phax_error());
        r.niah_seed = phax_seed_derive(r.o.seed, "train.niah");
        r.niah_mix_seed = phax_seed_derive(r.o.seed, "train.niah.mix");
        // Every variant must fit a row (multi-needle ones need ~2x a single needle):
        // probe the first 256 examples of this run's stream before anything is trained.
        int32_t *x = malloc((size_t)r.o.T * sizeof *x), *y = malloc((size_t)r.o.T * sizeof *y);
        if (!x || !y) die("out of memory");
        for (uint64_t i = 0; i < 256; i++)
            if (phax_niah_train_sample(r.niah, r.niah_seed, i, r.o.T, x, y, NULL))
                die("--niah-frac with --seq %d: %s (use a longer --seq)", r.o.T, phax_error());
        free(x), free(y);
    }
    trainer_new(&r.tr, &r.cfg, &r.o);
    if (r.recall) {
        r.logits = trainer_logits_new(&r.tr);
    }
    if (r.o.resume) {
        trainer_restore(&r.tr, &ck, &st, r.state_path);
        if (rank0) train_log_truncate(r.log_path, r.start);
    } else {
        r.total = r.o.steps ? r.o.steps : r.o.time_budget > 0 ? steps_for_budget(&r) : DEFAULT_STEPS;
        dist_bcast_long(&r.total);  // --time-budget: rank 0's timing fixes every rank's steps
        r.o.steps = r.total;
        if (r.o.warmup > r.total / 2) r.o.warmup = r.total / 2;  // leave half the run to decay
    }
    r.options_json = train_opts_to_json(&r.o, r.data.train, r.data.valid, r.data.split);
    r.rng_json = rng_identity(&r);
    if (ranks > 1) {
        // Every rank runs the same training: options, data, seeds, steps and parameters.
        uint64_t h = fnv(0xcbf29ce484222325ULL, r.options_json, strlen(r.options_json));
        h = fnv(h, r.data_json, strlen(r.data_json)), h = fnv(h, r.rng_json, strlen(r.rng_json));
        long pos[2] = {r.start, r.total};
        h = fnv(h, pos, sizeof pos);
        if (!dist_agree_u64(h))
            die("the ranks differ in their options, data or checkpoint (every rank must run the same "
                "phax train command on the same files)");
        params_agree(&r, r.start);
    }
    phax_ckpt_free(&ck);
    phax_ckpt_state_free(&st);
    if (restart)
        printf("%s: a run that stopped before its first checkpoint; starting it over (its log is replaced)\n",
               r.o.out);
    // A new run starts its log (over one without a checkpoint) with an empty file put in place
    // atomically, which replaces a symlink planted there instead of writing through it; a
    // resumed run continues it. Both append without following a link (O_NOFOLLOW).
    if (rank0) {
        if (!r.o.resume && phax_write_file_atomic(r.log_path, "", 0)) die_lib();
        int log_fd = open(r.log_path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (log_fd < 0)
            die("%s: cannot open: %s", r.log_path, errno == ELOOP ? "a symbolic link (refused)" : strerror(errno));
        if (!(r.log = fdopen(log_fd, "a"))) die("%s: cannot open: %s", r.log_path, strerror(errno));
    }
    r.tty = isatty(STDOUT_FILENO);
    struct sigaction sa = {.sa_handler = on_sigint};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    long s = r.start;
    int stop_sig = 0;  // the signal the run stopped for (the agreed decision below; 0: none)
    if (r.start >= r.total) {
        printf("%s: the run finished at step %ld; nothing to do\n", r.o.out, r.start);
        goto done;
    }
    char what[128];
    if (r.recall)
        snprintf(what, sizeof what, "%s task (%d pairs, %d quer%s, %zu validation rows)",
                 r.o.task, r.o.recall_pairs, r.o.recall_queries, r.o.recall_queries == 1 ? "y" : "ies", r.eval_n);
    else
        snprintf(what, sizeof what, "%zu train / %zu valid tokens", r.data.ntr, r.data.nva);
    printf("%s %s: %zu parameters, %s backend, %s, vocab %zu, steps %ld..%ld of %ld, batch %d x %d\n",
           r.o.resume ? "resuming" : "training", phax_family_name(r.cfg.family), r.tr.L->numel,
           r.o.backend, what, phax_vocab_size(r.data.vocab), r.start + 1, r.total, r.total, r.o.B,
           r.o.T);
    if (ranks > 1) {
        int row0, rows;
        dist_rows(r.o.B, &row0, &rows);
        printf("data parallel: %s; rank 0 computes rows 0..%d of each batch of %d; gradients of %zu "
               "bytes all-reduced per step\n", dist_describe(), rows - 1, r.o.B,
               r.tr.L->numel * phax_dtype_size(phax_backend_dtype(r.tr.be)));
    }
    fflush(stdout);
    long stop = r.o.stop_after && r.o.stop_after < r.total ? r.o.stop_after : r.total;
    double t_run = 0, ema = 0;
    for (; s < stop; s++) {
        double loss, dt;
        int window;
        train_step(&r, s, &loss, &window, &dt);
        long done = s + 1;
        // Several ranks: a signal that reached some ranks stops them all after this step, decided
        // once from the agreed sum and never from `interrupted` again in this step: a signal landing
        // later (during rank 0's eval, say) would reach some ranks only, and they would leave for
        // the checkpoint's collectives while the others start the next step. The next step's sum
        // picks it up. One process decides at the checkpoint, as before.
        int agreed = 0;
        if (ranks > 1) {
            double sig = interrupted;
            dist_sum(&sig, 1);
            agreed = sig > 0;
        }
        t_run += dt;
        double tps = (double)r.o.B * r.o.T / dt;
        ema = ema > 0 ? 0.9 * ema + 0.1 * tps : tps;
        progress(&r, done, loss, ema, (double)(r.total - done) * r.o.B * r.o.T / ema, window);
        int last = done == r.total;
        if (last || (r.o.eval_every && done % r.o.eval_every == 0)) run_eval(&r, done);
        int stop_now = ranks > 1 ? agreed : interrupted != 0;
        if (stop_now) stop_sig = interrupted ? interrupted : SIGTERM;
        if (last || done == stop || stop_now || (r.o.ckpt_every && done % r.o.ckpt_every == 0))
            save_checkpoint(&r, done);
        if (stop_now) {
            s++;
            break;
        }
    }
    if (r.tty) printf("\n");
    if (s > r.start)
        printf("%s at step %ld/%ld: %.1f s, %.0f tokens/s; checkpoint %s\n",
               s == r.total ? "done" : "stopped", s, r.total, t_run,
               (double)(s - r.start) * r.o.B * r.o.T / t_run, r.model_path);
    if (ranks > 1 && s > r.start)
        printf("all-reduce: %.3g MB of gradients per step, %.3g ms per step (%.1f%% of the step time)\n",
               dist_allreduce_bytes() / (double)(s - r.start) / 1e6,
               1e3 * dist_allreduce_seconds() / (double)(s - r.start), 100 * dist_allreduce_seconds() / t_run);
    if (s < r.total) printf("resume with: phax train --resume --out %s\n", r.o.out);
done:
    if (r.log) fclose(r.log);
    trainer_free(&r.tr);
    phax_free(r.logits);
    phax_niah_free(r.niah);
    corpus_free(&r.data);
    json_decref(keep);
    free(r.model_path), free(r.state_path), free(r.log_path);
    free(r.options_json), free(r.rng_json), free(r.data_json);
    if (ranks < 2 && interrupted) stop_sig = interrupted;  // one process: as it always did
    return stop_sig ? 128 + stop_sig : 0;
}

