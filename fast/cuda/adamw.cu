// fast/cuda AdamW with global-norm clipping, float32 parameters and moments (phax/fcuda.h;
// semantics: ref/adamw.c; contract: phax/fcpu_adamw.h).
//   1. ‖g‖² over every tensor in double: per tensor at most ADAM_CHUNKS fixed chunks, a block
//      each, partials in the workspace; one thread adds them in order (the same bits on any
//      device). The norm comes back to the host (8 bytes, a stream sync): the caller gets it,
//      a NaN or infinite norm is an error before anything is written, and the clip factor
//      is a launch argument.
//   2. A grid-stride update per tensor, in double, each stored value rounded once:
//      g ← coef·g; m ← β1 m + (1−β1) g; v ← β2 v + (1−β2) g²;
//      p ← (1 − lr·wd) p − lr (m/bc1) / (sqrt(v/bc2) + eps).
// A launch per tensor and phase: a model's hundred-odd tensors cost a few hundred launches a
// step (a multi-tensor launch is the known next step when a profile says it matters).
#include <cmath>

#include "cuda_common.cuh"

#define ADAM_CHUNKS 32
#define ADAM_THREADS 256u

static int adam_chunks(size_t n) { return n < ADAM_CHUNKS ? (int)n : ADAM_CHUNKS; }

// part[c] = Σ g² over chunk c of nch (a block per chunk).
static __global__ void adam_sq_part_k(double *__restrict__ part, const float *__restrict__ g, size_t n) {
    __shared__ double red[32];
    size_t c = blockIdx.x, nch = gridDim.x, i0 = n * c / nch, i1 = n * (c + 1) / nch;
    double s = 0;
    for (size_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) s += (double)g[i] * g[i];
    s = fcuda_block_sum_d(s, red);
    if (threadIdx.x == 0) part[c] = s;
}

static __global__ void adam_sum_k(double *__restrict__ out, const double *__restrict__ part, int total) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    double s = 0;
    for (int k = 0; k < total; k++) s += part[k];
    *out = s;
}

static __global__ void adam_update_k(float *__restrict__ p, float *__restrict__ m, float *__restrict__ v,
                                     const float *__restrict__ g, size_t n, double coef, double b1, double b2,
                                     double lr, double eps, double ibc1, double ibc2, double keep) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        double gd = coef * g[i];
        double md = b1 * m[i] + (1 - b1) * gd;
        double vd = b2 * v[i] + (1 - b2) * gd * gd;
        m[i] = (float)md;
        v[i] = (float)vd;
        p[i] = (float)(keep * p[i] - lr * (md * ibc1) / (sqrt(vd * ibc2) + eps));
    }
}

extern "C" size_t fcuda_adamw_ws(int nparams) {
    return ((size_t)(nparams > 0 ? nparams : 0) * ADAM_CHUNKS + 1) * sizeof(double);
}

extern "C" int fcuda_adamw_step(const fcuda_adamw_param *ps, int nparams, const phax_adamw_cfg *c, long step,
                                 double *gnorm, void *ws, void *stream) {
    if (phax_adamw_cfg_check(c, step)) return PHAX_ERR;
    if (nparams < 0) return phax_fail("cuda adamw: %d parameter tensors", nparams);
    if (!ws) return phax_fail("cuda adamw: no workspace (fcuda_adamw_ws bytes)");
    cudaStream_t s = fcuda_stream(stream);
    double *part = static_cast<double *>(ws);
    int total = 0;
    for (int j = 0; j < nparams; j++) {
        int nch = adam_chunks(ps[j].n);
        if (nch == 0) continue;
        PHAX_LAUNCH(adam_sq_part_k, (unsigned)nch, ADAM_THREADS, 0, s, part + total, ps[j].g, ps[j].n);
        if (fcuda_check("adamw (norm)")) return PHAX_ERR;
        total += nch;
    }
    double *sum = part + (size_t)nparams * ADAM_CHUNKS, ss = 0;
    PHAX_LAUNCH(adam_sum_k, 1u, 32u, 0, s, sum, (const double *)part, total);
    if (fcuda_check("adamw (norm)")) return PHAX_ERR;
    if (fcuda_download(&ss, sum, sizeof ss, stream)) return PHAX_ERR;
    double norm = sqrt(ss);
    if (gnorm) *gnorm = norm;
    if (!std::isfinite(norm)) return phax_fail("adamw: gradient norm is %g (step %ld)", norm, step);
    double coef = 1.0;
    if (c->clip > 0 && c->clip / (norm + 1e-6) < 1.0) coef = c->clip / (norm + 1e-6);
    double ibc1 = 1.0 / (1.0 - pow(c->beta1, (double)step)), ibc2 = 1.0 / (1.0 - pow(c->beta2, (double)step));
    for (int j = 0; j < nparams; j++) {
        if (ps[j].n == 0) continue;
        double keep = 1.0 - (ps[j].decay ? c->lr * c->weight_decay : 0.0);
        PHAX_LAUNCH(adam_update_k, fcuda_ew_blocks(ps[j].n, ADAM_THREADS), ADAM_THREADS, 0, s, ps[j].p, ps[j].m,
                    ps[j].v, ps[j].g, ps[j].n, coef, c->beta1, c->beta2, c->lr, c->eps, ibc1, ibc2, keep);
        if (fcuda_check("adamw (update)")) return PHAX_ERR;
    }
    return PHAX_OK;
}
