// bench_allreduce: the all-reduce share of a data-parallel training step (src/dist.c,
// docs/distributed.md), run as `mpirun -np N build/bench_allreduce [--family F] [--T T]
// [--rows R] [--steps S]`. The model is the bench config of bench_model (d_model 256, 4
// layers, vocab 8192 untied, 8 q / 2 kv heads of 32, SwiGLU 683) on the cpu backend; the
// global batch is N·R rows of T uniform random tokens (R per rank, default 1).
//
// Each timed step is phax train's: zero_grad + backward of this rank's rows (compute), a
// barrier (wait: the slower rank's lead, timed apart so the all-reduce is not charged with
// it), dist_allreduce_grads (the float32 gradients, MPI_Iallreduce in buckets), AdamW. Rank
// 0 prints the medians over the steps: gradient bytes, all-reduce time and its fraction of
// the step, the bus bandwidth (a ring all-reduce moves 2(N−1)/N × the bytes per rank), and
// beside it a ceiling measured in the same run: memcpy of the same 2(N−1)/N × bytes on one
// core (what ranks sharing one machine's memory cannot beat by much).
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/dist.h"
#include "bench_util.h"
#include "phax/backend.h"
#include "phax/core.h"

// A failure on one rank ends every rank (exit() would run MPI_Finalize while the others wait in
// a collective).
static void die_if(int bad, const char *what) {
    if (bad) {
        fprintf(stderr, "bench_allreduce: %s: %s\n", what, phax_error());
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

static double med(double *v, int n) { return bench_median(v, n, 1); }

int main(int argc, char **argv) {
    const char *family = "pha";
    int T = 512, R = 1, steps = 7;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--family")) family = argv[i + 1];
        else if (!strcmp(argv[i], "--T")) T = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rows")) R = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "bench_allreduce: unknown option %s (--family --T --rows --steps)\n", argv[i]);
            return 2;
        }
    }
    if (T < 2 || R < 1 || steps < 1 || steps > 1000) {
        fprintf(stderr, "bench_allreduce: --T >= 2, --rows >= 1, --steps in [1, 1000]\n");
        return 2;
    }
    int N = dist_init(&argc, &argv), rank = dist_rank();
    if (N < 2 && !getenv("OMPI_COMM_WORLD_SIZE")) {
        printf("bench_allreduce: run it under mpirun -np N (N >= 2); one process has nothing to reduce\n");
        return 0;
    }
    phax_family f;
    die_if(phax_family_parse(family, &f) != PHAX_OK, "--family");
    phax_model_cfg c = phax_model_cfg_default(f);
    c.vocab_size = 8192, c.d_model = 256, c.n_layers = 4;
    c.n_heads = 8, c.n_kv_heads = 2, c.head_dim = 32, c.ffn_hidden = 683;
    c.tie_embeddings = 0, c.train_len = T;
    die_if(phax_model_cfg_resolve(&c) != PHAX_OK, "config");
    phax_bmodel *m = phax_bmodel_new(&phax_backend_cpu, &c, 1, NULL);
    die_if(!m, "model");
    const phax_layout *L = phax_bmodel_layout(m);
    unsigned char *decay = calloc((size_t)L->n, 1);
    die_if(!decay || phax_bmodel_adamw_init(m, decay) != PHAX_OK, "adamw");
    int B = N * R;
    int32_t *x = malloc((size_t)B * T * sizeof *x), *y = malloc((size_t)B * T * sizeof *y);
    phax_rng rng = phax_rng_new(7);  // the same global batch on every rank
    for (size_t i = 0; i < (size_t)B * T; i++) x[i] = (int32_t)(phax_rng_u64(&rng) % 8192);
    for (size_t i = 0; i < (size_t)B * T; i++) y[i] = i % T == (size_t)T - 1 ? -1 : x[i + 1];
    int row0, rows, dev;
    dist_rows(B, &row0, &rows);
    float *g = phax_bmodel_grads(m, &dev);
    size_t n = L->numel, bytes = n * sizeof(float);
    phax_adamw_cfg a = {.lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .clip = 1.0};
    double *tc = calloc((size_t)steps * 5, sizeof *tc), *tw = tc + steps, *ta = tw + steps, *to = ta + steps,
           *ts = to + steps;
    for (int s = -1; s < steps; s++) {  // step −1: warm-up
        double loss, gn, t0 = bench_now();
        phax_bmodel_zero_grad(m);
        die_if(phax_bmodel_backward(m, x + (size_t)row0 * T, y + (size_t)row0 * T, rows, T, -1, &loss) != PHAX_OK,
               "backward");
        double t1 = bench_now();
        MPI_Barrier(MPI_COMM_WORLD);
        double t2 = bench_now();
        die_if(dist_allreduce_grads(g, n, PHAX_DT_F32, dev, 1.0 / N) != PHAX_OK, "all-reduce");
        double t3 = bench_now();
        die_if(phax_bmodel_adamw_step(m, &a, s + 2, &gn) != PHAX_OK, "adamw");
        double t4 = bench_now();
        if (s >= 0) tc[s] = t1 - t0, tw[s] = t2 - t1, ta[s] = t3 - t2, to[s] = t4 - t3, ts[s] = t4 - t0;
    }
    // The ceiling: one memcpy of 2(N−1)/N × bytes (median of 7).
    size_t cb = (size_t)(2.0 * (N - 1) / N * (double)bytes);
    if (cb == 0) cb = bytes;  // one rank moves nothing: the gradient's own bytes then
    char *src = malloc(cb), *dst = malloc(cb);
    if (!src || !dst) phax_fail("malloc of %zu bytes failed", cb);
    die_if(!src || !dst, "the copy ceiling");
    memset(src, 1, cb), memset(dst, 2, cb);
    double tm[7];
    for (int k = 0; k < 7; k++) {
        double t0 = bench_now();
        memcpy(dst, src, cb);
        tm[k] = bench_now() - t0;
        if (dst[cb / 2] != 1) return 1;
    }
    double mc = med(tm, 7), mcomp = med(tc, steps), mwait = med(tw, steps), mar = med(ta, steps),
           madam = med(to, steps), mstep = med(ts, steps);
    if (rank == 0) {
        bench_print_env(stdout, "bench_allreduce");
        printf("%s\n", dist_describe());
        printf("bench config, %s, T %d, %d row%s per rank (global batch %d); %zu parameters; medians of %d steps\n",
               family, T, R, R == 1 ? "" : "s", B, n, steps);
        printf("gradient bytes per all-reduce   %12.0f  (%.2f MB)\n", (double)bytes, bytes / 1e6);
        printf("step                            %10.2f ms\n", 1e3 * mstep);
        printf("  compute (forward + backward)  %10.2f ms\n", 1e3 * mcomp);
        printf("  wait for the slower rank      %10.2f ms\n", 1e3 * mwait);
        printf("  all-reduce                    %10.2f ms  = %.1f%% of the step\n", 1e3 * mar, 100 * mar / mstep);
        printf("  AdamW                         %10.2f ms\n", 1e3 * madam);
        if (N > 1) printf("all-reduce bus bandwidth        %10.2f GB/s (2(N-1)/N x bytes / time)\n", cb / mar / 1e9);
        else printf("all-reduce bus bandwidth        none: one rank reduces nothing\n");
        printf("ceiling: memcpy of those bytes  %10.2f GB/s (%.2f ms, one core, same run)\n", cb / mc / 1e9,
               1e3 * mc);
    }
    free(src), free(dst), free(tc), free(x), free(y), free(decay);
    phax_bmodel_free(m);
    return 0;
}
