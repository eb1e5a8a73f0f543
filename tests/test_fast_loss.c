// fast tiers vs ref: cross-entropy (alone, fused with its gradient, and fused with the output
// projection), on every backend
// (tests/fast_ops.h: the bound, C and the floor; ref/loss.c: the truth).
#include <stdio.h>
#include <string.h>

#include "fast_ops.h"
#include "phax/ref.h"

// The floor's magnitude of a mean loss: Σ over the counted rows of |lse(x_r)| + |x_r[t_r]|,
// averaged like the loss; logits in double.
static double loss_mag(const double *L, const int32_t *t, size_t n, int V) {
    double s = 0;
    size_t cnt = 0;
    for (size_t r = 0; r < n; r++) {
        if (t[r] < 0) continue;
        const double *x = &L[r * V];
        double mx = -INFINITY, se = 0;
        for (int j = 0; j < V; j++) mx = x[j] > mx ? x[j] : mx;
        for (int j = 0; j < V; j++) se += exp(x[j] - mx);
        s += fabs(mx + log(se)) + fabs(x[t[r]]);
        cnt++;
    }
    return s / (double)cnt;
}

// --- cross-entropy -------------------------------------------------------------------------------

static int32_t *ce_targets(size_t n, int V, phax_rng *r) {
    int32_t *t = malloc(n * sizeof *t);
    for (size_t i = 0; i < n; i++)
        t[i] = phax_rng_uniform(r) < 0.2 ? -1 : (int32_t)phax_rng_below(r, V);
    t[0] = (int32_t)phax_rng_below(r, V);  // at least one counted row
    if (n > 2) t[n - 1] = -1;              // at least one ignored row
    return t;
}

typedef struct {
    size_t n;
    int V;
    double scale;  // logit scale: soft (1) and peaked (10) softmax
} ce_case;

// ROWS × V 11, 1000 × logit scale 1, 10.
static int ce_cases(ce_case *cs) {
    const int Vs[] = {11, 1000};
    const double SC[] = {1.0, 10.0};
    int k = 0;
    for (int ri = 0; ri < 3; ri++)
        for (int vi = 0; vi < 2; vi++)
            for (int si = 0; si < 2; si++) cs[k++] = (ce_case){ROWS[ri], Vs[vi], SC[si]};
    return k;
}

H_TEST(loss, cross_entropy) {
    phax_rng r = tu_rng("loss/cross_entropy");
    ce_case cs[MAXCASES];
    int nc = ce_cases(cs);
    for (int c = 0; c < nc; c++) {
                size_t n = cs[c].n;
                int V = cs[c].V;
                size_t nv = n * V;
                char label[80];
                snprintf(label, sizeof label, "ce n=%zu V=%d scale=%g", n, V, cs[c].scale);
                int32_t *t = ce_targets(n, V, &r);
                float *L = h_frand(nv, &r, cs[c].scale);
                double *Ld = h_todbl(L, nv);
                float *loss = tu_fbuf(1), lossn = b32_ce_fwd(L, t, n, V);
                double lossr;
                cr_assert(be->loss.cross_entropy_fwd(loss, L, t, n, V) == PHAX_OK);
                cr_assert(ref_cross_entropy_fwd(&lossr, Ld, t, n, V) == PHAX_OK);
                double lmag = loss_mag(Ld, t, n, V);
                cr_expect(bound_m(label, "loss", loss, &lossn, &lossr, NULL, &lmag, 1, H_C_FWD));
                float dloss = (float)(0.5 + phax_rng_uniform(&r));
                grad3 dl = g3_new(nv, &r, 1.0 / V);
                cr_assert(be->loss.cross_entropy_bwd(dl.f, dloss, L, t, n, V) == PHAX_OK);
                b32_ce_bwd(dl.nv, dloss, L, t, n, V);
                cr_assert(ref_cross_entropy_bwd(dl.r, dloss, Ld, t, n, V) == PHAX_OK);
                cr_expect(g3_check(label, "dlogit", &dl));
                // The fused call = the two separate calls, bit for bit.
                float *loss2 = tu_fbuf(1), *dl2 = h_fcopy(dl.p, nv);
                cr_assert(be->loss.cross_entropy_fwd_bwd(loss2, dl2, dloss, L, t, n, V) == PHAX_OK);
                cr_expect(h_fsame(loss2, loss, 1) && h_fsame(dl2, dl.f, nv), "%s: fused differs",
                          label);
                cr_expect(tu_fintact(L) && tu_fintact(loss) && tu_fintact(loss2) && tu_fintact(dl2));
                g3_free(&dl), tu_ffree(L), tu_ffree(loss), tu_ffree(loss2), tu_ffree(dl2), tu_free(Ld), free(t);
            }
    h_report_worst("cross_entropy");
}

H_TEST(loss, cross_entropy_bad_targets) {
    tu_rng("loss/cross_entropy_bad_targets");
    int V = 11;
    float *L = tu_fbuf(3 * V), *dl = tu_fbuf(3 * V), *loss = tu_fbuf(1), *x = tu_fbuf(3 * 4), *W = tu_fbuf(V * 4),
          *dx = tu_fbuf(3 * 4), *dW = tu_fbuf(V * 4);
    for (int i = 0; i < 3 * V; i++) L[i] = 0.1f * i;
    for (int i = 0; i < 12; i++) x[i] = 0.1f * i;
    for (int i = 0; i < 4 * V; i++) W[i] = 0.01f * i;
    float *ws = tu_fbuf(be->loss.linear_cross_entropy_ws(3, 4, V) / 4);
    const int32_t bad[][3] = {{0, 11, 1}, {-2, 0, 0}, {-1, -1, -1}};
    for (int k = 0; k < 3; k++) {
        cr_expect(be->loss.cross_entropy_fwd(loss, L, bad[k], 3, V) == PHAX_ERR, "fwd case %d", k);
        cr_expect(be->loss.cross_entropy_bwd(dl, 1.0f, L, bad[k], 3, V) == PHAX_ERR, "bwd case %d", k);
        cr_expect(be->loss.cross_entropy_fwd_bwd(loss, dl, 1.0f, L, bad[k], 3, V) == PHAX_ERR);
        cr_expect(be->loss.linear_cross_entropy(loss, dx, dW, 1.0f, x, W, bad[k], 3, 4, V, ws) ==
                  PHAX_ERR);
        cr_expect(strstr(phax_error(), k < 2 ? "outside" : "ignored") != NULL, "message: %s",
                  phax_error());
    }
    // Nothing written on failure.
    cr_expect(isnan(loss[0]));
    for (int i = 0; i < 3 * V; i++) cr_expect(isnan(dl[i]));
    for (int i = 0; i < 12; i++) cr_expect(isnan(dx[i]));
    for (int i = 0; i < 4 * V; i++) cr_expect(isnan(dW[i]));
    cr_expect(tu_fintact(L) && tu_fintact(dl) && tu_fintact(loss) && tu_fintact(x) && tu_fintact(W) &&
              tu_fintact(dx) && tu_fintact(dW) && tu_fintact(ws));
    tu_ffree(L), tu_ffree(dl), tu_ffree(loss), tu_ffree(x), tu_ffree(W), tu_ffree(dx), tu_ffree(dW), tu_ffree(ws);
}

// Fused projection + loss against ref composed from its parts (linear → CE → linear bwd).
typedef struct {
    size_t n;  // 0: a tile and 87 rows (crosses a tile)
    int d, V;
} lce_case;

// n 1, 7, 129, tile + 87 × d 24, 64 × V 11, 1000, 5000 (1024, 1024 and 838 rows per tile on cpu).
static int lce_cases(lce_case *cs) {
    const size_t Ns[] = {1, 7, 129, 0};
    const int Ds[] = {24, 64}, Vs[] = {11, 1000, 5000};
    int k = 0;
    for (int ni = 0; ni < 4; ni++)
        for (int di = 0; di < 2; di++)
            for (int vi = 0; vi < 3; vi++) cs[k++] = (lce_case){Ns[ni], Ds[di], Vs[vi]};
    return k;
}

H_TEST(loss, linear_cross_entropy) {
    phax_rng r = tu_rng("loss/linear_cross_entropy");
    lce_case cs[MAXCASES];
    int nc = lce_cases(cs);
    for (int c = 0; c < nc; c++) {
                size_t n = cs[c].n ? cs[c].n : be->loss.lce_tile_rows(cs[c].V) + 87;
                int d = cs[c].d, V = cs[c].V;
                size_t nw = (size_t)V * d, nv = n * V;
                char label[80];
                snprintf(label, sizeof label, "lin_ce n=%zu d=%d V=%d", n, d, V);
                int32_t *t = ce_targets(n, V, &r);
                float *x = h_frand(n * d, &r, 1.0), *W = h_frand(nw, &r, 3.0 / sqrt(d));
                double *xd = h_todbl(x, n * d), *Wd = h_todbl(W, nw);
                float dloss = 0.75f;
                grad3 dx = g3_new(n * d, &r, 0.1), dW = g3_new(nw, &r, 0.1);
                float *ws = tu_fbuf(be->loss.linear_cross_entropy_ws(n, d, V) / sizeof(float));
                float *loss = tu_fbuf(1);
                cr_assert(be->loss.linear_cross_entropy(loss, dx.f, dW.f, dloss, x, W, t, n, d, V,
                                                    ws) == PHAX_OK);
                // naive32
                float *Ln = malloc(nv * 4), *dLn = calloc(nv, 4);
                b32_linear_fwd(Ln, x, W, NULL, n, d, V);
                float lossn = b32_ce_fwd(Ln, t, n, V);
                b32_ce_bwd(dLn, dloss, Ln, t, n, V);
                b32_linear_bwd(dx.nv, dW.nv, NULL, dLn, x, W, n, d, V);
                // ref
                double *Lr = tu_buf(nv), *dLr = tu_buf(nv), lossr;
                ref_linear_fwd(Lr, xd, Wd, NULL, n, d, V);
                cr_assert(ref_cross_entropy_fwd(&lossr, Lr, t, n, V) == PHAX_OK);
                tu_fill(dLr, nv, 0.0);
                cr_assert(ref_cross_entropy_bwd(dLr, dloss, Lr, t, n, V) == PHAX_OK);
                ref_linear_bwd(dx.r, dW.r, NULL, dLr, xd, Wd, n, d, V);
                double lmag = loss_mag(Lr, t, n, V);
                cr_expect(bound_m(label, "loss", loss, &lossn, &lossr, NULL, &lmag, 1, H_C_FWD));
                // dx = G W, dW = Gᵀ x: magnitudes from |G|, |W|, |x| (the logits'
                // own rounding reaches G as ~|G|·|logit| relative, covered by C·naive32).
                double *aG = h_dabs(dLr, nv), *aW = h_dabs(Wd, nw), *ax = h_dabs(xd, n * d);
                dx.mag = h_dzeros(dx.n), dW.mag = h_dzeros(dW.n);
                ref_linear_bwd(dx.mag, dW.mag, NULL, aG, ax, aW, n, d, V);
                free(aG), free(aW), free(ax);
                cr_expect(g3_check(label, "dx", &dx));
                cr_expect(g3_check(label, "dW", &dW));
                // Loss only (no gradients) gives the same loss.
                float *loss2 = tu_fbuf(1);
                cr_assert(be->loss.linear_cross_entropy(loss2, NULL, NULL, dloss, x, W, t, n, d, V,
                                                    ws) == PHAX_OK);
                cr_expect(h_fsame(loss, loss2, 1), "%s: loss-only call differs", label);
                cr_expect(tu_fintact(x) && tu_fintact(W) && tu_fintact(ws) && tu_fintact(loss) &&
                          tu_fintact(loss2));
                g3_free(&dx), g3_free(&dW);
                tu_ffree(x), tu_ffree(W), tu_ffree(ws), tu_ffree(loss), tu_ffree(loss2), free(Ln), free(dLn),
                    free(t);
                tu_free(xd), tu_free(Wd), tu_free(Lr), tu_free(dLr);
            }
    h_report_worst("linear_cross_entropy");
}

// --- determinism ---------------------------------------------------------------------------------
// The fused projection + loss gives the same bits (loss and dx) when run twice on the same inputs.
H_TEST(loss, deterministic) {
    phax_rng r = tu_rng("loss/deterministic");
    size_t n = 1000;
    int d = 256, V = 300;
    float *x = h_frand(n * d, &r, 1.0), *W = h_frand((size_t)V * d, &r, 0.1);
    int32_t *t = ce_targets(n, V, &r);
    float *ws = tu_fbuf(be->loss.linear_cross_entropy_ws(n, d, V) / 4 + 1);
    float *dx[2], *loss[2];
    for (int rep = 0; rep < 2; rep++) {
        dx[rep] = tu_fbuf(n * d), loss[rep] = tu_fbuf(1);
        memset(dx[rep], 0, n * d * 4);
        cr_expect(be->loss.linear_cross_entropy(loss[rep], dx[rep], NULL, 1.0f, x, W, t, n, d, V, ws) == PHAX_OK);
    }
    cr_expect(h_fsame(loss[0], loss[1], 1), "lin_ce loss differs between runs");
    cr_expect(h_fsame(dx[0], dx[1], n * d), "lin_ce dx differs between runs");
    for (int k = 0; k < 2; k++) {
        cr_expect(tu_fintact(dx[k]) && tu_fintact(loss[k]));
        tu_ffree(dx[k]), tu_ffree(loss[k]);
    }
    tu_ffree(x), tu_ffree(W), tu_ffree(ws), free(t);
}
