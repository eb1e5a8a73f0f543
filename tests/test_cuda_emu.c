// fast/cuda on the CPU, through the emulation of the CUDA model (fast/cuda/emu/; docs/cuda.md).
//
//   * The emulator itself (kernels of tests/cuda_emu_kernels.cu): block reductions with
//     __syncthreads and shared memory, warp shuffles and votes, each at awkward block sizes
//     and in every scheduling order; the deliberate bugs of a reduction (a stride loop that
//     stops one step early, a missing __syncthreads after the stores or inside the loop)
//     give wrong sums; a __syncthreads or a shuffle not reached by every thread it names is
//     reported, not hung and not passed; shared memory a block never wrote reads as the
//     poison; the runtime refuses bad launch configurations and copies; the same through
//     glibc's ucontext switch (x86-64 uses the emulator's own by default).
//   * The kernels (fast/cuda/norm.cu, activation.cu, as fcuda_emu_*) against ref (float64)
//     with the harness's bound (tests/harness.h: ‖fast − ref‖ ≤ C·‖naive32 − ref‖ + floor,
//     naive32 = tests/baseline_f32_{norm,activation}.c), as tests/test_fast_norm.c judges fast/cpu:
//     awkward sizes, outputs poisoned, guard floats after every device buffer, backward
//     adding into nonzero gradients. Every case runs in the three scheduling orders and
//     must give the same bits in each (a race-free kernel does not depend on the order).
//
// Why not a `cuda-emu` row of h_backends[] yet: H_TEST registers every case of every
// family for every backend, and this tier has a few families so far; a partial row would
// need a per-op "not implemented" skip in every test body. The row comes with the ops.
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseline_f32.h"
#include "cuda_emu_kernels.h"
#include "cuda_emu_util.h"
#include "harness.h"
#include "phax/fcuda_emu.h"  // fcuda_emu_<op> beside fcuda_<op>
#include "phax/ref.h"

static const int ORDERS[] = {PHAX_CUDA_EMU_FORWARD, PHAX_CUDA_EMU_REVERSE, PHAX_CUDA_EMU_SHUFFLE};
static const char *ORDER_NAME[] = {"forward", "reverse", "shuffle"};
#define NORDERS 3

static void set_order(int o) { phax_cuda_emu_set_order(ORDERS[o], tu_base_seed()); }

// ============================================================================================
// the emulator
// ============================================================================================

static const unsigned BLOCKS[] = {1, 31, 32, 33, 256, 1024};
static const unsigned GRIDS[] = {1, 3};

// Small integers: every partial sum is exact, so any order of addition gives the same float.
static float *int_draws(size_t n, phax_rng *r) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)((int)(phax_rng_u64(r) % 17) - 8);
    return x;
}

typedef int (*sum_fn)(int bug, unsigned grid, unsigned block, float *out, const float *in);

// Number of blocks whose sum is wrong (or -1 when the launch failed).
static int wrong_sums(sum_fn f, int bug, unsigned grid, unsigned block, phax_rng *r) {
    float *in = int_draws((size_t)grid * block, r), out[8];
    int e = f(bug, grid, block, out, in), wrong = 0;
    for (unsigned b = 0; b < grid && !e; b++) {
        float s = 0;
        for (unsigned t = 0; t < block; t++) s += in[b * block + t];
        wrong += !(out[b] == s);
    }
    free(in);
    return e ? -1 : wrong;
}

static void sums_right(sum_fn f, const char *name, const unsigned *blocks, int nb) {
    phax_rng r = tu_rng(name);
    for (int o = 0; o < NORDERS; o++) {
        set_order(o);
        for (int i = 0; i < nb; i++)
            for (int g = 0; g < 2; g++) {
                int w = wrong_sums(f, EMU_OK, GRIDS[g], blocks[i], &r);
                cr_expect(w == 0, "%s, %s order, grid %u, block %u: %d wrong sums (%s)", name,
                          ORDER_NAME[o], GRIDS[g], blocks[i], w, w < 0 ? emu_error() : "");
            }
    }
    set_order(0);
}

Test(cuda_emu, tree_sum) { sums_right(emu_tree_sum, "tree_sum", BLOCKS, 6); }

// The shuffle reduction names only the lanes that exist in a partial warp.
Test(cuda_emu, shfl_sum) { sums_right(emu_shfl_sum, "shfl_sum", BLOCKS, 6); }

Test(cuda_emu, xor_vote) {
    phax_rng r = tu_rng("xor_vote");
    const unsigned blocks[] = {32, 64, 1024};
    for (int o = 0; o < NORDERS; o++) {
        set_order(o);
        for (int i = 0; i < 3; i++) {
            unsigned grid = 2, block = blocks[i];
            float *in = int_draws(grid * block, &r), out[2];
            int ok[2], votes[2], anyall[2];
            cr_assert_eq(emu_xor_vote(grid, block, out, ok, votes, anyall, in), 0, "%s", emu_error());
            for (unsigned b = 0; b < grid; b++) {
                float s = 0;
                int pos = 0, big = 0;
                for (unsigned t = 0; t < block; t++) {
                    float x = in[b * block + t];
                    s += x, pos += x > 0, big |= x > 2.5f;
                }
                cr_expect(out[b] == s && ok[b] == 1 && votes[b] == pos && anyall[b] == big * 2 + 1,
                          "%s order, block %u: sum %g (want %g), lanes agree %d, ballot %d (want %d), any/all %d",
                          ORDER_NAME[o], block, out[b], s, ok[b], votes[b], pos, anyall[b]);
            }
            free(in);
        }
    }
    set_order(0);
}

// Each deliberate bug gives a wrong sum in the default (forward) order, for every block size
// of more than one warp; what the other orders see is printed (reverse order hides the
// missing barrier inside the tree loop: docs/cuda.md).
Test(cuda_emu, reduction_bugs_caught) {
    phax_rng r = tu_rng("reduction_bugs");
    struct {
        sum_fn f;
        const char *name;
        int bug;
        const char *what;
    } bugs[] = {
        {emu_tree_sum, "tree", EMU_BUG_STRIDE_GT1, "stride loop s > 1"},
        {emu_tree_sum, "tree", EMU_BUG_NO_SYNC_STORE, "no __syncthreads after the stores"},
        {emu_tree_sum, "tree", EMU_BUG_NO_SYNC_LOOP, "no __syncthreads in the loop"},
        {emu_shfl_sum, "shuffle", EMU_BUG_STRIDE_GT1, "shuffle loop o > 1"},
        {emu_shfl_sum, "shuffle", EMU_BUG_NO_SYNC_STORE, "no __syncthreads after the warp partials"},
    };
    const unsigned blocks[] = {33, 64, 256, 1024};
    for (size_t k = 0; k < sizeof bugs / sizeof bugs[0]; k++)
        for (int o = 0; o < NORDERS; o++) {
            set_order(o);
            int caught = 0;
            for (int i = 0; i < 4; i++) {
                int w = wrong_sums(bugs[k].f, bugs[k].bug, 3, blocks[i], &r);
                caught += w != 0;
                if (o == 0)
                    cr_expect(w != 0, "%s reduction with %s, block %u: not caught", bugs[k].name,
                              bugs[k].what, blocks[i]);
            }
            printf("bug: %s reduction, %s: caught at %d of 4 block sizes in %s order\n", bugs[k].name,
                   bugs[k].what, caught, ORDER_NAME[o]);
        }
    set_order(0);
}

Test(cuda_emu, divergent_barriers_reported) {
    const char *what[] = {"only even threads reach __syncthreads",
                          "even and odd threads wait at different __syncthreads",
                          "a lane named in a shuffle's mask has exited",
                          "lanes shuffle with different masks"};
    for (int o = 0; o < NORDERS; o++) {
        set_order(o);
        for (int k = 0; k < 4; k++) {
            int e = emu_broken(k, 64);
            cr_expect(e != 0, "%s (%s order): not reported", what[k], ORDER_NAME[o]);
            cr_expect(strstr(emu_error(), "kernel broken_k") != NULL,
                      "%s: the message does not name the kernel: %s", what[k], emu_error());
            printf("%s, %s order: %s\n", what[k], ORDER_NAME[o], emu_error());
        }
    }
    set_order(0);
    // and a correct launch right after one that failed
    float out[64];
    cr_expect_eq(emu_config(64, out), 0, "%s", emu_error());
}

// The same scheduling through glibc's ucontext (the portable switch; x86-64 uses its own).
Test(cuda_emu, ucontext_switch) {
    cr_assert_eq(phax_cuda_emu_use_ucontext(1), 1);
    phax_rng r = tu_rng("ucontext_switch");
    const unsigned blocks[] = {1, 33, 256};
    for (int o = 0; o < NORDERS; o++) {
        set_order(o);
        for (int i = 0; i < 3; i++) {
            int w1 = wrong_sums(emu_tree_sum, EMU_OK, 3, blocks[i], &r);
            int w2 = wrong_sums(emu_shfl_sum, EMU_OK, 3, blocks[i], &r);
            cr_expect(w1 == 0 && w2 == 0, "ucontext, %s order, block %u: %d, %d wrong sums", ORDER_NAME[o],
                      blocks[i], w1, w2);
        }
        cr_expect(wrong_sums(emu_tree_sum, EMU_BUG_NO_SYNC_STORE, 3, 256, &r) != 0 || o == 1,
                  "ucontext, %s order: missing barrier not caught", ORDER_NAME[o]);
        cr_expect(emu_broken(0, 64) != 0, "ucontext: divergent __syncthreads not reported");
    }
    set_order(0);
    phax_cuda_emu_use_ucontext(0);
}

Test(cuda_emu, smem_poison) {
    unsigned grid = 3, block = 64;
    float out[3 * 64 * 2];
    cr_assert_eq(emu_smem_poison(grid, block, out), 0, "%s", emu_error());
    for (unsigned b = 0; b < grid; b++)
        for (unsigned t = 0; t < block; t++) {
            float s = out[(b * block + t) * 2], d = out[(b * block + t) * 2 + 1];
            if (b == 0)
                cr_expect(s == 1.0f && d == 2.0f, "block 0 thread %u: %g %g", t, s, d);
            else
                cr_expect(isnan(s) && isnan(d),
                          "block %u thread %u reads %g (static), %g (dynamic) written by block 0", b, t, s, d);
        }
}

Test(cuda_emu, runtime_checks) {
    float out[1024];
    cr_expect_eq(emu_config(1024, out), 0, "%s", emu_error());
    for (int t = 0; t < 1024; t++) cr_expect(out[t] == (float)t);
    cr_expect_eq(emu_config(1025, out), 9, "1025 threads: want cudaErrorInvalidConfiguration");
    cr_expect_eq(emu_bad_copy(), 1, "a device-to-host copy named host-to-device: want cudaErrorInvalidValue");
    printf("bad copy: %s\n", emu_error());
    cr_expect(emu_malloc_poisoned(1000), "cudaMalloc'd memory does not read as NaN");
}

// ============================================================================================
// the kernels against ref
// ============================================================================================

// --- rmsnorm -------------------------------------------------------------------------------------

// One rmsnorm case: forward and both gradients (plus the single-gradient calls) in every
// order, judged in the first; later orders must give the same bits.
static void rmsnorm_case(size_t n, int d, double offset, phax_rng *r, h_sums *pool) {
    double eps = PHAX_RMSNORM_EPS;
    size_t nd = n * (size_t)d;
    char label[96];
    snprintf(label, sizeof label, "cuda-emu rmsnorm n=%zu d=%d off=%g", n, d, offset);
    float *x = h_frand(nd, r, 1.0), *g = h_frand(d, r, 1.0), *dy = h_frand(nd, r, 1.0);
    for (size_t i = 0; i < nd; i++) x[i] += (float)offset;
    float *px = h_frand(nd, r, 1.0), *pg = h_frand(d, r, 1.0);  // gradient priors: nonzero
    double *xd = h_todbl(x, nd), *gd = h_todbl(g, d), *dyd = h_todbl(dy, nd);
    // ref and naive32
    float *yn = tu_fbuf(nd), *dxn = h_fcopy(px, nd), *dgn = h_fcopy(pg, d);
    double *yr = tu_buf(nd), *dxr = h_todbl(px, nd), *dgr = h_todbl(pg, d);
    b32_rmsnorm_fwd(yn, x, g, n, d, (float)eps);
    ref_rmsnorm_fwd(yr, xd, gd, n, d, eps);
    b32_rmsnorm_bwd(dxn, dgn, dy, x, g, n, d, (float)eps);
    ref_rmsnorm_bwd(dxr, dgr, dyd, xd, gd, n, d, eps);

    float *dX = dnew(x, nd), *dG = dnew(g, d), *dDY = dnew(dy, nd);
    size_t wsn = fcuda_emu_rmsnorm_bwd_ws(n, d) / sizeof(float) + 1;
    float *dWS = dnew(NULL, wsn);
    float *y[NORDERS], *dx[NORDERS], *dg[NORDERS];
    float *dx1 = tu_fbuf(nd), *dg1 = tu_fbuf(d);
    for (int o = 0; o < NORDERS; o++) {
        set_order(o);
        y[o] = tu_fbuf(nd), dx[o] = tu_fbuf(nd), dg[o] = tu_fbuf(d);
        float *dY = dnew(NULL, nd), *dDX = dnew(px, nd), *dDG = dnew(pg, d);
        cr_assert_eq(fcuda_emu_rmsnorm_fwd(dY, dX, dG, n, d, eps, NULL), PHAX_OK, "%s", phax_error());
        cr_assert_eq(fcuda_emu_rmsnorm_bwd(dDX, dDG, dDY, dX, dG, n, d, eps, dWS, NULL), PHAX_OK, "%s",
                     phax_error());
        dget(y[o], dY, nd, "y"), dget(dx[o], dDX, nd, "dx"), dget(dg[o], dDG, d, "dg");
        // one gradient at a time: dx without a workspace, dg alone
        float *dDX1 = dnew(px, nd), *dDG1 = dnew(pg, d);
        cr_assert_eq(fcuda_emu_rmsnorm_bwd(dDX1, NULL, dDY, dX, dG, n, d, eps, NULL, NULL), PHAX_OK, "%s",
                     phax_error());
        cr_assert_eq(fcuda_emu_rmsnorm_bwd(NULL, dDG1, dDY, dX, dG, n, d, eps, dWS, NULL), PHAX_OK, "%s",
                     phax_error());
        dget(dx1, dDX1, nd, "dx alone"), dget(dg1, dDG1, d, "dg alone");
        cr_expect(h_fsame(dx1, dx[o], nd) && h_fsame(dg1, dg[o], d), "%s (%s order): single-gradient calls differ",
                  label, ORDER_NAME[o]);
        dfree(dY), dfree(dDX), dfree(dDG), dfree(dDX1), dfree(dDG1);
        if (o > 0)
            cr_expect(h_fsame(y[o], y[0], nd) && h_fsame(dx[o], dx[0], nd) && h_fsame(dg[o], dg[0], d),
                      "%s: %s order gives other bits than forward order (a race)", label, ORDER_NAME[o]);
    }
    set_order(0);
    // dx's floor scale: the size of the two terms it is the difference of, |g dy|/r and
    // |x|·Σ|g dy x|/(d r³) (plus the result's), not the result alone. At small d the result is an
    // eps-sized cancellation (d = 1: dx = g dy eps/r³) and ANY float32 evaluation errs by ~u times
    // the terms; the naive baseline's error is one draw of that noise (seed 839723372: n 7, d 1,
    // ratio 7.1 against it, 9.5e-7 vs 1.3e-7, terms ~1e-5 at the smallest |x|).
    double *dx_scale = tu_buf(nd);
    for (size_t i = 0; i < n; i++) {
        const double *xi = xd + i * (size_t)d, *dyi = dyd + i * (size_t)d;
        double ms = 0, sa = 0;
        for (int j = 0; j < d; j++) ms += xi[j] * xi[j], sa += fabs(gd[j] * dyi[j] * xi[j]);
        const double rr = sqrt(ms / d + eps);
        for (int j = 0; j < d; j++) {
            const size_t k = i * (size_t)d + j;
            dx_scale[k] = fabs(dxr[k] - px[k]) + fabs(gd[j] * dyi[j]) / rr + fabs(xi[j]) * sa / (d * rr * rr * rr);
        }
    }
    if (pool) {  // pool[0..2]: y, dx, dg over the caller's draws
        h_pool(&pool[0], H_F(y[0]), H_F(yn), yr, H_ZERO, NULL, NULL, nd);
        h_pool(&pool[1], H_F(dx[0]), H_F(dxn), dxr, H_F(px), dx_scale, NULL, nd);
        h_pool(&pool[2], H_F(dg[0]), H_F(dgn), dgr, H_F(pg), NULL, NULL, d);
    } else {
        cr_expect(h_bound(label, "y", H_F(y[0]), H_F(yn), yr, H_ZERO, NULL, nd, H_C_FWD), "%s y", label);
        cr_expect(h_bound(label, "dx", H_F(dx[0]), H_F(dxn), dxr, H_F(px), dx_scale, nd, H_C_BWD), "%s dx", label);
        cr_expect(h_bound(label, "dg", H_F(dg[0]), H_F(dgn), dgr, H_F(pg), NULL, d, H_C_BWD), "%s dg", label);
    }
    dget(x, dX, nd, "x"), dget(g, dG, d, "g"), dget(dy, dDY, nd, "dy");  // inputs: guards intact
    float *wsh = malloc(wsn * sizeof *wsh);
    dget(wsh, dWS, wsn, "workspace");
    free(wsh);
    dfree(dX), dfree(dG), dfree(dDY), dfree(dWS);
    for (int o = 0; o < NORDERS; o++) tu_ffree(y[o]), tu_ffree(dx[o]), tu_ffree(dg[o]);
    cr_expect(tu_fintact(x) && tu_fintact(g) && tu_fintact(dy) && tu_fintact(yn) && tu_fintact(dxn) &&
              tu_fintact(dgn) && tu_fintact(dx1) && tu_fintact(dg1));
    tu_ffree(x), tu_ffree(g), tu_ffree(dy), tu_ffree(px), tu_ffree(pg), tu_ffree(yn), tu_ffree(dxn),
        tu_ffree(dgn), tu_ffree(dx1), tu_ffree(dg1);
    tu_free(xd), tu_free(gd), tu_free(dyd), tu_free(yr), tu_free(dxr), tu_free(dgr), tu_free(dx_scale);
}

Test(cuda_emu, rmsnorm) {
    phax_rng r = tu_rng("cuda_emu/rmsnorm");
    const size_t rows[] = {1, 7};
    const int widths[] = {1, 6, 10, 33, 1000};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 5; j++) {
            // A case of a few elements (dg: d sums over the rows; dx at d = 1: an eps-sized
            // result of cancellation) has a naive baseline whose error is one draw and can be
            // nearly exact (seed 903513083: n 7, d 1, dg ratio 14.7 on one element; seed 4: n 1,
            // d 1, dx 5.9): below a warp's width every output is judged pooled over 8 draws,
            // as fast/cpu's tests pool theirs (tests/harness.h).
            if (widths[j] >= 32) {
                rmsnorm_case(rows[i], widths[j], 0.0, &r, NULL);
                continue;
            }
            h_sums s[3];
            memset(s, 0, sizeof s);
            for (int k = 0; k < 8; k++) rmsnorm_case(rows[i], widths[j], 0.0, &r, s);
            char label[96];
            snprintf(label, sizeof label, "cuda-emu rmsnorm n=%zu d=%d (8 draws)", rows[i], widths[j]);
            cr_expect(h_judge(label, "y", &s[0], H_C_FWD, H_FLOOR), "%s y", label);
            cr_expect(h_judge(label, "dx", &s[1], H_C_BWD, H_FLOOR), "%s dx", label);
            cr_expect(h_judge(label, "dg", &s[2], H_C_BWD, H_FLOOR), "%s dg", label);
        }
    rmsnorm_case(129, 257, 0.0, &r, NULL);   // more rows than one block's worth; odd width
    rmsnorm_case(3, 2048, 0.0, &r, NULL);    // wider than a block: several elements per thread
    rmsnorm_case(7, 64, 30.0, &r, NULL);     // a large common offset
    h_report_worst("cuda-emu rmsnorm");
}

// --- activations ---------------------------------------------------------------------------------

// x ~ 3·N(0,1), plus fixed points in the tails and at 0 (as test_fast_activation.c).
static float *act_input(size_t n, phax_rng *r) {
    float *x = h_frand(n, r, 3.0);
    const float special[] = {0.0f, -0.0f, 30.0f, -30.0f, 9.5f, -9.5f, 88.0f, -88.0f, 1e-20f};
    for (size_t i = 0; i < 9 && i < n; i++) x[n - 1 - i] = special[i];
    return x;
}

static void act_case(int silu, size_t n, int norders, phax_rng *r) {
    char label[64];
    snprintf(label, sizeof label, "cuda-emu %s n=%zu", silu ? "silu" : "gelu", n);
    float *x = act_input(n, r), *dy = h_frand(n, r, 1.0), *px = h_frand(n, r, 1.0);
    double *xd = h_todbl(x, n), *dyd = h_todbl(dy, n), *yr = tu_buf(n), *dxr = h_todbl(px, n);
    float *yn = tu_fbuf(n), *dxn = h_fcopy(px, n);
    if (silu) {
        b32_silu_fwd(yn, x, n), ref_silu_fwd(yr, xd, n);
        b32_silu_bwd(dxn, dy, x, n), ref_silu_bwd(dxr, dyd, xd, n);
    } else {
        b32_gelu_fwd(yn, x, n), ref_gelu_fwd(yr, xd, n);
        b32_gelu_bwd(dxn, dy, x, n), ref_gelu_bwd(dxr, dyd, xd, n);
    }
    float *dX = dnew(x, n), *dDY = dnew(dy, n);
    float *y[NORDERS], *dx[NORDERS];
    for (int o = 0; o < norders; o++) {
        set_order(o);
        y[o] = tu_fbuf(n), dx[o] = tu_fbuf(n);
        float *dY = dnew(NULL, n), *dDX = dnew(px, n);
        int e1 = silu ? fcuda_emu_silu_fwd(dY, dX, n, NULL) : fcuda_emu_gelu_fwd(dY, dX, n, NULL);
        cr_assert_eq(e1, PHAX_OK, "%s", phax_error());
        int e2 = silu ? fcuda_emu_silu_bwd(dDX, dDY, dX, n, NULL) : fcuda_emu_gelu_bwd(dDX, dDY, dX, n, NULL);
        cr_assert_eq(e2, PHAX_OK, "%s", phax_error());
        dget(y[o], dY, n, "y"), dget(dx[o], dDX, n, "dx");
        dfree(dY), dfree(dDX);
        if (o > 0)
            cr_expect(h_fsame(y[o], y[0], n) && h_fsame(dx[o], dx[0], n), "%s: %s order differs", label,
                      ORDER_NAME[o]);
    }
    set_order(0);
    cr_expect(h_bound(label, "y", H_F(y[0]), H_F(yn), yr, H_ZERO, NULL, n, H_C_FWD), "%s y", label);
    cr_expect(h_bound(label, "dx", H_F(dx[0]), H_F(dxn), dxr, H_F(px), NULL, n, H_C_BWD), "%s dx", label);
    // Elementwise, as test_fast_activation.c: 8·2^-24·(2 + x²)·|ref| + 1e-37.
    double *tol = tu_buf(n);
    for (size_t i = 0; i < n; i++) tol[i] = 8 * H_U32 * (2 + (double)x[i] * x[i]) * fabs(yr[i]) + 1e-37;
    double ew = h_elem_worst(H_F(y[0]), yr, tol, n);
    cr_expect(ew <= 1.0, "%s: elementwise err/tol %.3g (seed %llu)", label, ew, (unsigned long long)tu_base_seed());
    dget(x, dX, n, "x"), dget(dy, dDY, n, "dy");
    dfree(dX), dfree(dDY);
    for (int o = 0; o < norders; o++) tu_ffree(y[o]), tu_ffree(dx[o]);
    cr_expect(tu_fintact(x) && tu_fintact(dy) && tu_fintact(yn) && tu_fintact(dxn));
    tu_ffree(x), tu_ffree(dy), tu_ffree(px), tu_ffree(yn), tu_ffree(dxn);
    tu_free(xd), tu_free(dyd), tu_free(yr), tu_free(dxr), tu_free(tol);
}

Test(cuda_emu, gelu_silu) {
    phax_rng r = tu_rng("cuda_emu/gelu_silu");
    const size_t ns[] = {1, 6, 7, 10, 33, 1000, 129 * 257};
    for (int silu = 0; silu < 2; silu++) {
        for (int i = 0; i < 7; i++) act_case(silu, ns[i], NORDERS, &r);
        // more elements than the grid has threads (1024 blocks of 256): the grid-stride loop
        // goes round; one order (elementwise threads do not interact)
        act_case(silu, 1024 * 256 + 12345, 1, &r);
    }
    h_report_worst("cuda-emu gelu/silu");
}

// --- errors --------------------------------------------------------------------------------------

// A failing CUDA call is the library's one-line error, naming the op; nothing exits.
Test(cuda_emu, errors) {
    float host[8] = {0};
    void *d = NULL;
    cr_assert_eq(fcuda_emu_malloc(&d, sizeof host), PHAX_OK);
    cr_expect_eq(fcuda_emu_upload(host, d, sizeof host, NULL), PHAX_ERR, "upload into host memory accepted");
    cr_expect(strstr(phax_error(), "cuda upload") != NULL, "%s", phax_error());
    printf("error: %s\n", phax_error());
    cr_expect_eq(fcuda_emu_rmsnorm_bwd(NULL, d, d, d, d, 1, 2, 1e-6, NULL, NULL), PHAX_ERR,
                 "dg without a workspace accepted");
    printf("error: %s\n", phax_error());
    cr_expect_eq(fcuda_emu_free(host), PHAX_ERR, "cudaFree of host memory accepted");
    printf("error: %s\n", phax_error());
    cr_expect_eq(fcuda_emu_free(d), PHAX_OK);
}
