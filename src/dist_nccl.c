// The device half of data-parallel `phax train` (src/dist.h): the cuda backend's gradients are
// summed over the ranks by NCCL on the device, one process per GPU, NCCL's communicator made
// through MPI (rank 0's ncclUniqueId broadcast). Linked into phax-cuda only, when meson found
// MPI and the CUDA toolkit's NCCL; src/dist.c reaches it through weak references.
//
// Each rank's contribution is weighted on the device by ncclRedOpCreatePreMulSum (the sum of
// weight_r · g_r in one pass: no scaling kernel, no host copy). The backend's kernels run on
// CUDA's default stream (fast/cuda); the reduction waits for them (cudaDeviceSynchronize) and
// runs on its own stream, which the step waits for before AdamW reads the gradients.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <stddef.h>

#include "phax/core.h"

int phax_dist_nccl_select_device(int local_rank);
int phax_dist_nccl_allreduce(float *dev_grads, size_t n, double weight);

static ncclComm_t comm;
static cudaStream_t stream;
static int ready;

static int cuda_fail(cudaError_t e, const char *what) {
    return phax_fail("NCCL all-reduce: %s: %s", what, cudaGetErrorString(e));
}
static int nccl_fail(ncclResult_t e, const char *what) {
    return phax_fail("NCCL all-reduce: %s: %s", what, ncclGetErrorString(e));
}

// Rank r of a machine takes its GPU r mod (the machine's GPUs): one rank per GPU.
int phax_dist_nccl_select_device(int local_rank) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) return PHAX_OK;  // no device: the cuda backend says so itself
    e = cudaSetDevice(local_rank % n);
    return e == cudaSuccess ? PHAX_OK : cuda_fail(e, "cudaSetDevice");
}

static int setup(void) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ncclUniqueId id;
    if (rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess) return nccl_fail(r, "ncclGetUniqueId");
    }
    MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclResult_t r = ncclCommInitRank(&comm, size, id, rank);
    if (r != ncclSuccess) return nccl_fail(r, "ncclCommInitRank");
    cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) return cuda_fail(e, "cudaStreamCreate");
    ready = 1;
    return PHAX_OK;
}

int phax_dist_nccl_allreduce(float *dev_grads, size_t n, double weight) {
    if (!ready && setup()) return PHAX_ERR;
    cudaError_t e = cudaDeviceSynchronize();  // the backward's kernels have written the gradients
    if (e != cudaSuccess) return cuda_fail(e, "before the reduction");
    float w = (float)weight;
    ncclRedOp_t op;
    ncclResult_t r = ncclRedOpCreatePreMulSum(&op, &w, ncclFloat32, ncclScalarHostImmediate, comm);
    if (r != ncclSuccess) return nccl_fail(r, "ncclRedOpCreatePreMulSum");
    r = ncclAllReduce(dev_grads, dev_grads, n, ncclFloat32, op, comm, stream);
    ncclResult_t r2 = ncclRedOpDestroy(op, comm);
    if (r != ncclSuccess) return nccl_fail(r, "ncclAllReduce");
    if (r2 != ncclSuccess) return nccl_fail(r2, "ncclRedOpDestroy");
    e = cudaStreamSynchronize(stream);
    return e == cudaSuccess ? PHAX_OK : cuda_fail(e, "the reduction");
}
