// Data-parallel `phax train` over MPI (docs/distributed.md): one process per rank, launched by
// mpirun; every rank draws the same global batch, computes the gradient of its rows, the
// gradients are all-reduced (MPI_Allreduce on host buffers; NCCL on device buffers in
// phax-cuda, src/dist_nccl.c) and every rank takes the same AdamW step. Rank 0 alone writes.
//
// In a build without MPI (meson -Dmpi=disabled, or no Open MPI found) every call here is the
// single process's: rank 0 of 1, the reductions copy, and nothing else changes. The same holds
// in an MPI build started without a launcher (no MPI_Init is made at all).
#ifndef PHAX_SRC_DIST_H
#define PHAX_SRC_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "phax/safetensors.h"  // phax_dtype

// Start MPI when this process was started by mpirun (or another PMI/PMIx launcher) in an MPI
// build; without a launcher, rank 0 of 1 and no MPI at all. A build without MPI started as one
// of several ranks refuses (each rank would train alone). With more than one rank: stdout of
// ranks > 0 goes to /dev/null, and an error on any rank (cli_die) ends every rank with that
// rank's one line (MPI_Abort). Returns the number of ranks.
int dist_init(int *argc, char ***argv);
int dist_rank(void);
int dist_size(void);
// "Open MPI 4.1.4, 2 ranks" or "one process": for the start line.
const char *dist_describe(void);

// The rows [*row0, *row0 + *rows) of a global batch of B rows that this rank computes: rank r
// of N takes rows floor(r·B/N) .. floor((r+1)·B/N) (shares differ by at most one row).
void dist_rows(int B, int *row0, int *rows);

// Sum over ranks of weight · grads (n values of dt, F32 or F64, in place; every rank gets the
// same bits). Host spans: scaled here, then MPI_Iallreduce in buckets. Device spans: NCCL
// (phax-cuda). PHAX_ERR with a message (phax_error) when a span cannot be reduced here.
int dist_allreduce_grads(void *grads, size_t n, phax_dtype dt, int on_device, double weight);
// Sum over ranks of v[0..n) (doubles, in place).
void dist_sum(double *v, int n);
// Every rank's value of x agrees (the same on all ranks: 1 or 0).
int dist_agree_u64(uint64_t x);
// Rank 0's value of *x on every rank.
void dist_bcast_long(long *x);
// Wait for every rank without spinning on the cores (the others wait while rank 0 writes or
// evaluates).
void dist_barrier(void);

// Seconds spent in dist_allreduce_grads since the start, and the bytes it reduced.
double dist_allreduce_seconds(void);
double dist_allreduce_bytes(void);

// The NCCL half, in phax-cuda only (src/dist_nccl.c; weak references elsewhere): pick the GPU
// of this rank before any device memory is made, and sum weight · grads over the ranks on the
// device.
int phax_dist_nccl_select_device(int local_rank) __attribute__((weak));
int phax_dist_nccl_allreduce(float *dev_grads, size_t n, double weight) __attribute__((weak));

#endif
