// Data-parallel phax train over MPI (issue 16; src/dist.c, docs/distributed.md), run as
// `mpirun -q --oversubscribe -np 2 phax train` on a tiny pha model of the recall task (a few
// answer targets per row, so the two ranks' shares of the targets differ and the k/K weights
// are exercised). Skipped with the reason when phax was built without MPI or mpirun is absent.
//
// What is compared, and the bounds:
//
//  1. 2 ranks, k = 3 steps, against this file's own replay of the sharded step with the
//     library (the same cpu backend, 1 OpenMP thread like the children): rank r of 2 computes
//     rows [r·B/2, (r+1)·B/2), its gradient (the mean over its k_r targets) times k_r/K rounded
//     to float once, and the two are added. MPI_SUM of two float32 buffers is one IEEE addition
//     per element, which is commutative, so there is no reduction order left: the bound is 0
//     (bit-identical parameters). This catches a skipped all-reduce, a double-counted mean,
//     wrong rows or weights, and ranks that step differently.
//
//  2. 2 ranks against 1 process after k = 1 step (the single-process run with the same global
//     batch): they differ only in the float32 summation order of the gradient over the batch's
//     positions (one flat sum over B·T positions, against two sums over B·T/2 and one add).
//     With the test's AdamW settings (eps = 1, no weight decay, no clipping) the step-1 update
//     is u(g) = g/(|g| + 1) (m̂ = g, v̂ = g²), whose derivative is at most 1 in magnitude, so
//       |θ₂ − θ₁|_j ≤ lr·(|Δg_j| + 12u) + ulp(θ_j),   u = 2^-24,
//     Δg = g_flat − g_sharded measured here with the library on the same batch and
//     parameters (the reduction-order difference itself), 12u = the two runs' float32
//     roundings of u(g) (≤ 6 operations each, |u| < 1), and ulp(θ_j) = the two final roundings of
//     θ − lr·u (half an ulp each). The measured Δg is itself checked to be rounding-sized:
//     ‖Δg‖∞ ≤ 2γ_n·6·‖g‖∞ with n = B·T and γ_n = n·u/(1 − n·u) (Higham's bound 2γ_n·Σ|terms| for
//     two summation orders, with the stated assumption that the positions' terms cancel at most
//     6-fold: Σ|terms| ≤ 6·max|g|), so a replay that shared a bug with phax would still fail.
//
//  3. A checkpoint written by the 2-rank run after 1 step, resumed by 1 process to step 3:
//     bit-identical to this file's replay (sharded step 1, then whole-batch steps 2 and 3;
//     bound 0 as in 1), and within the bound of 2 summed over the steps (3 × step-1 bound) of
//     the uninterrupted 1-process run.
//
//  4. Rank 1 given an unreadable training file (MPMD launch): both ranks end, non-zero, with
//     one line on stderr that names the file; no rank hangs (60 s limit).
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "phax/backend.h"
#include "phax/checkpoint.h"
#include "phax/schedule.h"
#include "phax/core.h"
#include "phax/recall.h"
#include "testutil.h"

#define U32 0x1p-24
#define B_ROWS 4
#define T_LEN 32
#define PAIRS 4
#define QUERIES 2
#define LR 1e-2
#define MIN_LR 1e-3
#define STEPS 3

static const char *mpirun_or_skip(void) {
    const char *mpi = getenv("PHAX_MPI");
    if (!mpi || strcmp(mpi, "1")) cr_skip_test("phax was built without MPI (meson feature mpi: Open MPI's libopenmpi-dev not found)");
    const char *m = getenv("PHAX_MPIRUN");
    if (!m || !*m || access(m, X_OK)) cr_skip_test("no mpirun found (Debian: openmpi-bin)");
    return m;
}

// Wait for a child at most `limit` seconds (then kill it: a hang fails the test).
static int wait_limit(pid_t pid, double limit) {
    struct timespec t0, now, nap = {0, 20 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int st;
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec) > limit) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        nanosleep(&nap, NULL);
    }
}

typedef struct {
    char *dir, *out, *err;
    uint64_t seed;
    char seed_s[24];
} box;

static box box_new(const char *name) {
    box b;
    b.dir = tu_tmpdir("phax_mpi");
    b.out = tu_join(b.dir, "stdout"), b.err = tu_join(b.dir, "stderr");
    phax_rng r = tu_rng(name);
    b.seed = phax_rng_u64(&r) % 1000000;
    snprintf(b.seed_s, sizeof b.seed_s, "%llu", (unsigned long long)b.seed);
    printf("%s: phax train --seed %s\n", name, b.seed_s);
    return b;
}

static void box_free(box *b) {
    tu_rm_rf(b->dir);
    free(b->dir), free(b->out), free(b->err);
}

// phax train's arguments for run folder `run` (NULL-terminated into a[], from index i).
static int train_args(const char **a, int i, const box *b, const char *run, const char *steps) {
    static const char *fixed[] = {"train", "--task", "recall", "--recall-pairs", "4", "--recall-queries", "2",
                                  "--family", "pha", "--set", "d_model=16", "--set", "n_layers=1", "--set",
                                  "n_heads=2", "--batch", "4", "--seq", "32", "--eps", "1", "--wd", "0",
                                  "--clip", "0", "--warmup", "0", "--lr", "1e-2", "--min-lr", "1e-3",
                                  "--eval-every", "0", "--eval-tokens", "64", "--ckpt-every", "0"};
    for (size_t k = 0; k < sizeof fixed / sizeof *fixed; k++) a[i++] = fixed[k];
    a[i++] = "--seed", a[i++] = b->seed_s, a[i++] = "--steps", a[i++] = steps, a[i++] = "--out", a[i++] = run;
    return i;
}

// `phax train ...` on one process (stop_after NULL: to the end).
static void train1(const box *b, const char *run, const char *steps, const char *stop_after, int resume) {
    const char *a[80];
    int i = 0;
    a[i++] = getenv("PHAX_BIN");
    if (resume) a[i++] = "train", a[i++] = "--resume", a[i++] = "--out", a[i++] = run;
    else i = train_args(a, i, b, run, steps);
    if (stop_after) a[i++] = "--stop-after", a[i++] = stop_after;
    a[i] = NULL;
    int rc = wait_limit(tu_spawn(a, b->out, b->err, NULL), 120);
    cr_assert(rc == 0, "phax train (1 process) exit %d: %s", rc, tu_slurp(b->err, NULL));
}

// The same on 2 ranks.
static void train2(const char *mpirun, const box *b, const char *run, const char *steps, const char *stop_after) {
    const char *a[90];
    int i = 0;
    a[i++] = mpirun, a[i++] = "-q", a[i++] = "--oversubscribe", a[i++] = "-np", a[i++] = "2";
    if (getuid() == 0) a[i++] = "--allow-run-as-root";
    a[i++] = getenv("PHAX_BIN");
    i = train_args(a, i, b, run, steps);
    if (stop_after) a[i++] = "--stop-after", a[i++] = stop_after;
    a[i] = NULL;
    int rc = wait_limit(tu_spawn(a, b->out, b->err, NULL), 120);
    cr_assert(rc == 0, "mpirun -np 2 phax train exit %d: %s", rc, tu_slurp(b->err, NULL));
}

static phax_ckpt load_ckpt(const char *run) {
    phax_ckpt ck;
    cr_assert(phax_ckpt_load(run, -1, &ck) == PHAX_OK, "%s", phax_error());
    return ck;
}

// --- the replay: phax train's steps with the library ---------------------------------------

static int decays(const phax_param_info *p) {
    size_t n = strlen(p->name);
    return p->ndim == 2 && n > 7 && !strcmp(p->name + n - 7, ".weight");
}

static long count_targets(const int32_t *y, size_t n) {
    long k = 0;
    for (size_t i = 0; i < n; i++) k += y[i] >= 0;
    return k;
}

typedef struct {
    phax_bmodel *m;
    size_t n;
    float *g;  // the model's gradient span
    int32_t x[B_ROWS * T_LEN], y[B_ROWS * T_LEN];
    uint64_t seed, rseed;
} replay;

static replay replay_new(const phax_model_cfg *cfg, uint64_t seed) {
    omp_set_num_threads(1);  // as the children (tu_spawn: OMP_NUM_THREADS=1)
    replay r = {.seed = seed, .rseed = phax_seed_derive(seed, "train.recall")};
    cr_assert((r.m = phax_bmodel_new(&phax_backend_cpu, cfg, seed, NULL)), "%s", phax_error());
    const phax_layout *L = phax_bmodel_layout(r.m);
    unsigned char dec[256];
    cr_assert(L->n <= 256);
    for (int i = 0; i < L->n; i++) dec[i] = (unsigned char)decays(&L->p[i]);
    cr_assert(phax_bmodel_adamw_init(r.m, dec) == PHAX_OK, "%s", phax_error());
    int dev = 1;
    r.g = phax_bmodel_grads(r.m, &dev);
    cr_assert(r.g && !dev);
    r.n = L->numel;
    return r;
}

static void replay_batch(replay *r, long s) {
    for (int b = 0; b < B_ROWS; b++)
        cr_assert(phax_recall_train_sample(r->rseed, (uint64_t)s * B_ROWS + (uint64_t)b, PAIRS, QUERIES, T_LEN,
                                           r->x + b * T_LEN, r->y + b * T_LEN, NULL) == PHAX_OK, "%s", phax_error());
}

// The gradient of batch s into the model's span: whole (one process) or as 2 ranks make it.
static void replay_grad(replay *r, int sharded) {
    double loss;
    phax_bmodel_zero_grad(r->m);
    if (!sharded) {
        cr_assert(phax_bmodel_backward(r->m, r->x, r->y, B_ROWS, T_LEN, -1, &loss) == PHAX_OK, "%s", phax_error());
        return;
    }
    long K = count_targets(r->y, B_ROWS * T_LEN);
    float *acc = calloc(r->n, sizeof *acc);
    cr_assert(acc && K > 0);
    for (int rank = 0; rank < 2; rank++) {
        int row0 = rank * B_ROWS / 2, rows = (rank + 1) * B_ROWS / 2 - row0;
        long k = count_targets(r->y + row0 * T_LEN, (size_t)rows * T_LEN);
        phax_bmodel_zero_grad(r->m);
        if (k)
            cr_assert(phax_bmodel_backward(r->m, r->x + row0 * T_LEN, r->y + row0 * T_LEN, rows, T_LEN, -1, &loss) ==
                      PHAX_OK, "%s", phax_error());
        double w = (double)k / (double)K;
        for (size_t i = 0; i < r->n; i++) {
            float part = (float)((double)r->g[i] * w);
            acc[i] = rank ? acc[i] + part : part;
        }
    }
    memcpy(r->g, acc, r->n * sizeof *acc);
    free(acc);
}

static void replay_update(replay *r, long s) {
    phax_lr_schedule ls = {LR, MIN_LR, 0, STEPS};
    phax_adamw_cfg a = {.lr = phax_lr_at(&ls, s), .beta1 = 0.9, .beta2 = 0.95, .eps = 1, .weight_decay = 0, .clip = 0};
    double gn;
    cr_assert(phax_bmodel_adamw_step(r->m, &a, s + 1, &gn) == PHAX_OK, "%s", phax_error());
}

// Steps 0 .. steps−1, the first `sharded` of them as 2 ranks; the parameters into out.
static void replay_run(const phax_model_cfg *cfg, uint64_t seed, long steps, long sharded, float *out) {
    replay r = replay_new(cfg, seed);
    for (long s = 0; s < steps; s++) {
        replay_batch(&r, s);
        replay_grad(&r, s < sharded);
        replay_update(&r, s);
    }
    cr_assert(phax_bmodel_params_get(r.m, 0, r.n, PHAX_DT_F32, out) == PHAX_OK);
    phax_bmodel_free(r.m);
}

// Parameters bit for bit (bound 0); the first difference is reported.
static void expect_same_bits(const float *got, const float *want, size_t n, const char *what) {
    size_t diff = 0, first = n;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float))) diff++, first = first < n ? first : i;
    cr_expect(diff == 0, "%s: %zu of %zu parameters differ (first: [%zu] %.9g, want %.9g)", what, diff, n, first,
              first < n ? got[first] : 0.0, first < n ? want[first] : 0.0);
    printf("%s: %zu of %zu parameters differ (bound: 0)\n", what, diff, n);
}

static double ulp_of(float v) {
    float a = fabsf(v);
    return (double)nextafterf(a, INFINITY) - (double)a;
}

// The step-1 bound of (2) per element: lr·(|Δg_j| + 12u) + ulp(θ_j); *dg_max: max |Δg|.
static double *step1_bound(const phax_model_cfg *cfg, uint64_t seed, const float *theta1, size_t n) {
    replay r = replay_new(cfg, seed);
    cr_assert(r.n == n);
    replay_batch(&r, 0);
    float *whole = malloc(n * sizeof *whole);
    cr_assert(whole);
    replay_grad(&r, 0);
    memcpy(whole, r.g, n * sizeof *whole);
    replay_grad(&r, 1);
    double *bound = malloc(n * sizeof *bound), gmax = 0, dmax = 0;
    cr_assert(bound);
    phax_lr_schedule ls = {LR, MIN_LR, 0, STEPS};
    double lr = phax_lr_at(&ls, 0);
    for (size_t i = 0; i < n; i++) {
        double dg = fabs((double)whole[i] - (double)r.g[i]);
        gmax = fmax(gmax, fabs((double)whole[i])), dmax = fmax(dmax, dg);
        bound[i] = lr * (dg + 12 * U32) + ulp_of(theta1[i]);
    }
    // The measured Δg is a rounding difference (see the top of the file).
    double nn = (double)B_ROWS * T_LEN, gam = nn * U32 / (1 - nn * U32), cap = 2 * gam * 6 * gmax;
    printf("step-1 gradient: max |g| %.3g, max |g_flat - g_2ranks| %.3g (rounding cap 2*gamma_%g*6*max|g| = %.3g)\n",
           gmax, dmax, nn, cap);
    cr_expect(dmax <= cap, "the sharded gradient differs from the whole batch's by %.3g > %.3g: more than rounding",
              dmax, cap);
    free(whole);
    phax_bmodel_free(r.m);
    return bound;
}

// max_j |a_j − b_j| / bound_j (NaN or inf anywhere: inf); passes when <= 1.
static double worst_ratio(const float *a, const float *b, const double *bound, size_t n, double scale, double *maxd) {
    double w = 0;
    *maxd = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!isfinite(d)) return INFINITY;
        *maxd = fmax(*maxd, d);
        w = fmax(w, d / (scale * bound[i]));
    }
    return w;
}

Test(mpi, two_ranks_equal_one_process) {
    const char *mpirun = mpirun_or_skip();
    box b = box_new("mpi/two_ranks_equal_one_process");
    char *r1 = tu_join(b.dir, "one"), *r2 = tu_join(b.dir, "two"), *r1k = tu_join(b.dir, "one_k1"),
         *r2k = tu_join(b.dir, "two_k1");
    train1(&b, r1k, "3", "1", 0);   // 1 process, 1 step of the 3-step schedule
    train2(mpirun, &b, r2k, "3", "1");
    train2(mpirun, &b, r2, "3", NULL);
    phax_ckpt c1 = load_ckpt(r1k), c2 = load_ckpt(r2k), c3 = load_ckpt(r2);
    size_t n = c1.layout.numel;
    cr_assert(c2.layout.numel == n && c3.layout.numel == n && c1.step == 1 && c2.step == 1 && c3.step == 3);
    float *want = malloc(n * sizeof *want);
    cr_assert(want);
    // (1) 2 ranks, 3 steps = the replayed sharded steps, bit for bit.
    replay_run(&c1.cfg, b.seed, STEPS, STEPS, want);
    expect_same_bits(c3.params, want, n, "2 ranks, 3 steps vs the replayed sharded steps");
    // (1, the replay's own check) 1 process, 1 step = the replayed whole-batch step, bit for bit.
    replay_run(&c1.cfg, b.seed, 1, 0, want);
    expect_same_bits(c1.params, want, n, "1 process, 1 step vs the replayed whole-batch step");
    // (2) 2 ranks vs 1 process after one step, under the derived bound.
    double *bound = step1_bound(&c1.cfg, b.seed, c1.params, n), maxd;
    double w = worst_ratio(c2.params, c1.params, bound, n, 1.0, &maxd);
    printf("2 ranks vs 1 process, step 1: max |diff| %.3g, worst diff/bound %.3g\n", maxd, w);
    cr_expect(w <= 1, "2 ranks vs 1 process after 1 step: diff/bound %.3g > 1 (max |diff| %.3g)", w, maxd);
    free(bound), free(want);
    phax_ckpt_free(&c1), phax_ckpt_free(&c2), phax_ckpt_free(&c3);
    free(r1), free(r2), free(r1k), free(r2k);
    box_free(&b);
}

Test(mpi, two_rank_checkpoint_resumes_on_one) {
    const char *mpirun = mpirun_or_skip();
    box b = box_new("mpi/two_rank_checkpoint_resumes_on_one");
    char *r1 = tu_join(b.dir, "one"), *r2 = tu_join(b.dir, "two"), *r1k = tu_join(b.dir, "one_k1");
    train2(mpirun, &b, r2, "3", "1");  // 2 ranks: step 1, checkpoint
    train1(&b, r2, NULL, NULL, 1);     // resumed by 1 process: steps 2, 3
    train1(&b, r1, "3", NULL, 0);      // uninterrupted, 1 process
    train1(&b, r1k, "3", "1", 0);      // 1 process, step 1 (for the bound)
    phax_ckpt cr = load_ckpt(r2), cu = load_ckpt(r1), c1 = load_ckpt(r1k);
    size_t n = cu.layout.numel;
    cr_assert(cr.layout.numel == n && cr.step == 3 && cu.step == 3);
    float *want = malloc(n * sizeof *want);
    cr_assert(want);
    replay_run(&cu.cfg, b.seed, STEPS, 1, want);
    expect_same_bits(cr.params, want, n, "2 ranks to step 1, resumed on 1 to step 3, vs the replay");
    double *bound = step1_bound(&cu.cfg, b.seed, c1.params, n), maxd;
    double w = worst_ratio(cr.params, cu.params, bound, n, (double)STEPS, &maxd);
    printf("resumed vs uninterrupted, step 3: max |diff| %.3g, worst diff/(3 x step-1 bound) %.3g\n", maxd, w);
    cr_expect(w <= 1, "resumed vs uninterrupted 1-process run: diff/bound %.3g > 1 (max |diff| %.3g)", w, maxd);
    free(bound), free(want);
    phax_ckpt_free(&cr), phax_ckpt_free(&cu), phax_ckpt_free(&c1);
    free(r1), free(r2), free(r1k);
    box_free(&b);
}

Test(mpi, failing_rank_ends_all_with_one_line) {
    const char *mpirun = mpirun_or_skip();
    box b = box_new("mpi/failing_rank_ends_all_with_one_line");
    char *good = tu_join(b.dir, "train.txt"), *bad = tu_join(b.dir, "missing.txt"), *run = tu_join(b.dir, "run");
    FILE *f = fopen(good, "w");
    cr_assert(f);
    for (int i = 0; i < 200; i++) fprintf(f, "the cat sat on the mat and a dog ran to the red house\n");
    fclose(f);
    // MPMD: rank 0 reads a good file, rank 1 a missing one.
    const char *rest[] = {"train", "--family", "pha", "--set", "d_model=16", "--set", "n_layers=1", "--set",
                          "n_heads=2", "--batch", "4", "--seq", "16", "--steps", "2", "--seed", b.seed_s, "--out",
                          run, "--train"};
    const char *a[90];
    int i = 0;
    a[i++] = mpirun, a[i++] = "-q", a[i++] = "--oversubscribe";
    if (getuid() == 0) a[i++] = "--allow-run-as-root";
    for (int r = 0; r < 2; r++) {
        if (r) a[i++] = ":";
        a[i++] = "-np", a[i++] = "1", a[i++] = getenv("PHAX_BIN");
        for (size_t k = 0; k < sizeof rest / sizeof *rest; k++) a[i++] = rest[k];
        a[i++] = r ? bad : good;
    }
    a[i] = NULL;
    int rc = wait_limit(tu_spawn(a, b.out, b.err, NULL), 60);
    cr_assert(rc != -1, "a rank hung (killed after 60 s)");
    cr_assert(rc != 0, "exit 0 with an unreadable file on rank 1");
    size_t len;
    char *err = tu_slurp(b.err, &len);
    int lines = 0;
    for (size_t k = 0; k < len; k++) lines += err[k] == '\n';
    printf("failing rank: exit %d, stderr: %s", rc, err);
    cr_expect(lines == 1 && !strncmp(err, "phax train: ", 12) && strstr(err, bad) && strstr(err, "(rank 1 of 2)"),
              "want one line from rank 1 naming %s, got:\n%s", bad, err);
    cr_expect(!tu_exists(tu_join(run, "checkpoint.safetensors")), "a checkpoint was written");
    free(err), free(good), free(bad), free(run);
    box_free(&b);
}
