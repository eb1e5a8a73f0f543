// Data-parallel `phax train` over MPI: src/dist.h. Compiled in every build; the MPI half only
// with PHAX_HAVE_MPI (meson's `mpi` feature).
#define _GNU_SOURCE  // nanosleep under -std=c11
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "phax/core.h"

#ifdef PHAX_HAVE_MPI
#include <mpi.h>
#endif

#define MPI_DESC_MAX 300
static int g_rank = 0, g_size = 1;
static double g_ar_s = 0, g_ar_bytes = 0;
static char g_desc[MPI_DESC_MAX] = "one process";

int dist_rank(void) { return g_rank; }
int dist_size(void) { return g_size; }
const char *dist_describe(void) { return g_desc; }
double dist_allreduce_seconds(void) { return g_ar_s; }
double dist_allreduce_bytes(void) { return g_ar_bytes; }

void dist_rows(int B, int *row0, int *rows) {
    long a = (long)g_rank * B / g_size, b = (long)(g_rank + 1) * B / g_size;
    *row0 = (int)a, *rows = (int)(b - a);
}

// The number of ranks a launcher says this process is one of (0: not started by one).
static long launcher_size(void) {
    const char *v = getenv("OMPI_COMM_WORLD_SIZE");  // Open MPI's mpirun
    if (!v) v = getenv("PMI_SIZE");                  // MPICH's hydra, Slurm's PMI
    if (v) return strtol(v, NULL, 10);
    return getenv("PMIX_RANK") ? 1 : 0;  // PMIx (srun --mpi=pmix): a size MPI_Init will tell
}

#ifndef PHAX_HAVE_MPI

int dist_init(int *argc, char ***argv) {
    (void)argc, (void)argv;
    long n = launcher_size();
    if (n > 1)
        cli_die("phax train", "started as one of %ld MPI ranks, but this phax was built without MPI (each rank "
                "would train alone); rebuild with Open MPI's libopenmpi-dev installed (meson -Dmpi=enabled)", n);
    return 1;
}
int dist_allreduce_grads(void *grads, size_t n, phax_dtype dt, int on_device, double weight) {
    (void)grads, (void)n, (void)dt, (void)on_device, (void)weight;
    return PHAX_OK;
}
void dist_sum(double *v, int n) { (void)v, (void)n; }
int dist_agree_u64(uint64_t x) {
    (void)x;
    return 1;
}
void dist_bcast_long(long *x) { (void)x; }
void dist_barrier(void) {}

#else

// An error on any rank: that rank's line, then MPI_Abort, which ends every rank (mpirun -q keeps
// Open MPI's own notice off stderr). When every rank fails alike (bad options, a file missing on
// every machine), rank 0's line should be the one: the other ranks wait a moment first, and rank
// 0's abort ends them before they print.
static void die_everywhere(const char *line) {
    if (g_rank != 0) {
        struct timespec ts = {0, 300 * 1000 * 1000};
        nanosleep(&ts, NULL);
        fprintf(stderr, "%s (rank %d of %d)\n", line, g_rank, g_size);
    } else {
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

static void finalize(void) {
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
}

int dist_init(int *argc, char ***argv) {
    if (launcher_size() == 0) return 1;  // one process: no MPI at all
    int provided;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        cli_die("phax train", "MPI_Init failed (started by mpirun, but MPI could not start)");
    atexit(finalize);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, ",\n")] = '\0';
    snprintf(g_desc, sizeof g_desc, "%.200s, %d rank%s", lib, g_size, g_size == 1 ? "" : "s");
    if (g_size == 1) return 1;
    cli_die_hook = die_everywhere;
    if (g_rank != 0 && !freopen("/dev/null", "w", stdout))
        cli_die("phax train", "/dev/null: cannot open for rank %d's stdout", g_rank);
    if (phax_dist_nccl_select_device) {
        // The GPU of this rank among those of its machine (phax-cuda), before any device memory.
        MPI_Comm local;
        int lr = 0;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
        MPI_Comm_rank(local, &lr);
        MPI_Comm_free(&local);
        if (phax_dist_nccl_select_device(lr)) cli_die("phax train", "%s", phax_error());
    }
    return g_size;
}

// The gradient buckets: at most this many bytes per MPI_Iallreduce (PHAX_ALLREDUCE_BUCKET_MB).
static size_t bucket_bytes(void) {
    static size_t b;
    if (!b) {
        const char *v = getenv("PHAX_ALLREDUCE_BUCKET_MB");
        double mb = v ? strtod(v, NULL) : 0;
        b = mb > 0 && mb < 1024 ? (size_t)(mb * (1 << 20)) : (size_t)8 << 20;
        if (b < 1024) b = 1024;
    }
    return b;
}

int dist_allreduce_grads(void *grads, size_t n, phax_dtype dt, int on_device, double weight) {
    if (g_size < 2) return PHAX_OK;
    double t0 = phax_clock();
    if (on_device) {
        if (dt != PHAX_DT_F32 || !phax_dist_nccl_allreduce)
            return phax_fail("the backend's gradients are in device memory and this phax has no NCCL to "
                             "all-reduce them (phax-cuda built with MPI and NCCL has)");
        if (phax_dist_nccl_allreduce(grads, n, weight)) return PHAX_ERR;
    } else {
        size_t es = dt == PHAX_DT_F64 ? sizeof(double) : sizeof(float);
        if (weight != 1.0) {
            if (dt == PHAX_DT_F64)
                for (size_t i = 0; i < n; i++) ((double *)grads)[i] *= weight;
            else
                for (size_t i = 0; i < n; i++) ((float *)grads)[i] = (float)((double)((float *)grads)[i] * weight);
        }
        size_t per = bucket_bytes() / es, nb = (n + per - 1) / per;
        MPI_Request *rq = malloc((nb ? nb : 1) * sizeof *rq);
        if (!rq) return phax_fail("out of memory");
        for (size_t b = 0; b < nb; b++) {
            size_t off = b * per, k = n - off < per ? n - off : per;
            MPI_Iallreduce(MPI_IN_PLACE, (char *)grads + off * es, (int)k,
                           dt == PHAX_DT_F64 ? MPI_DOUBLE : MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq[b]);
        }
        MPI_Waitall((int)nb, rq, MPI_STATUSES_IGNORE);
        free(rq);
        g_ar_bytes += (double)n * (double)es;
    }
    g_ar_s += phax_clock() - t0;
    return PHAX_OK;
}

void dist_sum(double *v, int n) {
    if (g_size > 1) MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

int dist_agree_u64(uint64_t x) {
    if (g_size < 2) return 1;
    uint64_t lo = x, hi = x;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

void dist_bcast_long(long *x) {
    if (g_size > 1) MPI_Bcast(x, 1, MPI_LONG, 0, MPI_COMM_WORLD);
}

void dist_barrier(void) {
    if (g_size < 2) return;
    MPI_Request rq;
    MPI_Ibarrier(MPI_COMM_WORLD, &rq);
    for (int done = 0;;) {
        MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
        if (done) return;
        struct timespec ts = {0, 200 * 1000};  // 0.2 ms: the waiting ranks leave the cores alone
        nanosleep(&ts, NULL);
    }
}

#endif
