// `phax demo`: a smoke run of the ref oracle at a size a person can watch.
// For each op family it draws seeded random inputs, runs the forward, checks
// the backward against a central difference along one random direction over
// all inputs at once, and, where two forms exist, checks that they agree.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_args.h"
#include "phax/ref.h"

#define MAXIN 8

typedef struct {
    const char *name;
    int nin;
    double *in[MAXIN], *grad[MAXIN];
    size_t len[MAXIN];
    double *out, *dout;
    size_t nout;
    void (*fwd)(void *self);  // out = f(in)
    void (*bwd)(void *self);  // grad += J(in)ᵀ dout
    int B, T, H, dh, N;       // sizes the callbacks read
    phax_attn_cfg att;
} demo_op;

static double *vec(size_t n, phax_rng *r, double lo, double hi) {
    double *x = phax_alloc(n * sizeof *x);
    if (!x) phax_die("%s", phax_error());
    for (size_t i = 0; i < n; i++) x[i] = r ? phax_rng_uniform_range(r, lo, hi) : 0.0;
    return x;
}

static double loss(demo_op *op) {
    op->fwd(op);
    double s = 0;
    for (size_t i = 0; i < op->nout; i++) s += op->out[i] * op->dout[i];
    return s;
}

// Central difference of L = ⟨dout, f(x)⟩ along a random unit-scale direction e,
// against ⟨∇L, e⟩ from the backward. Returns the relative difference.
static double directional_check(demo_op *op, phax_rng *r) {
    double *e[MAXIN];
    double an = 0;
    for (int j = 0; j < op->nin; j++) memset(op->grad[j], 0, op->len[j] * sizeof(double));
    op->bwd(op);
    for (int j = 0; j < op->nin; j++) {
        e[j] = vec(op->len[j], r, -1, 1);
        for (size_t i = 0; i < op->len[j]; i++) an += op->grad[j][i] * e[j][i];
    }
    const double h = 1e-6;
    double L[2];
    for (int sgn = 0; sgn < 2; sgn++) {
        for (int j = 0; j < op->nin; j++)
            for (size_t i = 0; i < op->len[j]; i++) op->in[j][i] += (sgn ? -2 : 1) * h * e[j][i];
        L[sgn] = loss(op);
    }
    for (int j = 0; j < op->nin; j++) {
        for (size_t i = 0; i < op->len[j]; i++) op->in[j][i] += h * e[j][i];
        phax_free(e[j]);
    }
    double fd = (L[0] - L[1]) / (2 * h);
    return fabs(fd - an) / fmax(fabs(an), 1e-300);
}

static void att_f(void *p) {
    demo_op *o = p;
    if (ref_attention_fwd(o->out, o->in[0], o->in[1], o->in[2], o->in[3], o->B, o->T, &o->att))
        phax_die("%s", phax_error());
}
static void att_b(void *p) {
    demo_op *o = p;
    if (ref_attention_bwd(o->grad[0], o->grad[1], o->grad[2], o->grad[3], o->dout, o->in[0],
                          o->in[1], o->in[2], o->in[3], o->B, o->T, &o->att))
        phax_die("%s", phax_error());
}
static void ssm_f(void *p) {
    demo_op *o = p;
    ref_ssm_recurrent_fwd(o->out, o->in[0], o->in[1], o->in[2], o->in[3], o->in[4], o->in[5],
                          o->B, o->T, o->H, o->N);
}
static void ssm_b(void *p) {
    demo_op *o = p;
    ref_ssm_recurrent_bwd(o->grad[0], o->grad[1], o->grad[2], o->grad[3], o->grad[4], o->grad[5],
                          o->dout, o->in[0], o->in[1], o->in[2], o->in[3], o->in[4], o->in[5],
                          o->B, o->T, o->H, o->N);
}
static void ml_f(void *p) {
    demo_op *o = p;
    ref_mlstm_parallel_fwd(o->out, o->in[0], o->in[1], o->in[2], o->in[3], o->in[4], o->B, o->T,
                           o->H, o->dh, o->dh, PHAX_MLSTM_EPS);
}
static void ml_b(void *p) {
    demo_op *o = p;
    ref_mlstm_parallel_bwd(o->grad[0], o->grad[1], o->grad[2], o->grad[3], o->grad[4], o->dout,
                           o->in[0], o->in[1], o->in[2], o->in[3], o->in[4], o->B, o->T, o->H,
                           o->dh, o->dh, PHAX_MLSTM_EPS);
}

static double max_rel_diff(const double *a, const double *b, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs(a[i] - b[i]));
        m = fmax(m, fabs(b[i]));
    }
    return d / fmax(m, 1e-300);
}

static void add_in(demo_op *o, double *x, size_t n) {
    o->in[o->nin] = x;
    o->grad[o->nin] = vec(n, NULL, 0, 0);
    o->len[o->nin++] = n;
}

int phax_demo_main(int argc, char **argv) {
    demo_opts o;
    demo_parse_args(argc, argv, &o);
    uint64_t seed = o.seed;
    int T = o.T;
    phax_rng r = phax_rng_new(seed);
    printf("phax demo: ref (float64) ops on random input, seed %llu, T = %d\n",
           (unsigned long long)seed, T);
    printf("%-44s %10s %14s %16s\n", "op", "fwd ms", "grad rel.err", "cross-form diff");
    int fails = 0;

    // Attention: cosine scores, GQA group 2, window T/4, RoPE.
    {
        demo_op o = {.name = "attention (cosine, GQA 4:2, window T/4, RoPE)", .B = 2, .T = T};
        o.att = phax_attn_cfg_default(4, 2, 16);
        o.att.score = PHAX_SCORE_COSINE, o.att.window = T / 4 > 0 ? T / 4 : 1;
        size_t nq = (size_t)2 * T * 4 * 16, nk = (size_t)2 * T * 2 * 16;
        add_in(&o, vec(nq, &r, -1, 1), nq);
        add_in(&o, vec(nk, &r, -1, 1), nk);
        add_in(&o, vec(nk, &r, -1, 1), nk);
        add_in(&o, vec(4, &r, log(5.0), log(20.0)), 4);
        o.nout = nq, o.out = vec(nq, NULL, 0, 0), o.dout = vec(nq, &r, -1, 1);
        o.fwd = att_f, o.bwd = att_b;
        double t0 = phax_clock();
        o.fwd(&o);
        double ms = 1e3 * (phax_clock() - t0), err = directional_check(&o, &r);
        // Cross-form: a window ≥ T equals full causal attention.
        double *full = vec(nq, NULL, 0, 0);
        phax_attn_cfg c = o.att;
        c.window = 0;
        o.att.window = T;
        o.fwd(&o);
        if (ref_attention_fwd(full, o.in[0], o.in[1], o.in[2], o.in[3], 2, T, &c)) phax_die("%s", phax_error());
        double cf = max_rel_diff(o.out, full, nq);
        printf("%-44s %10.2f %14.2e %16.2e  (window T vs full)\n", o.name, ms, err, cf);
        fails += !(err <= 1e-6) + !(cf == 0);
    }
    // SSM: recurrent form vs kernel + direct convolution.
    {
        int H = 8, N = 16;
        demo_op o = {.name = "ssm (GSS DSS kernel, H 8, N 16)", .B = 2, .T = T, .H = H, .N = N};
        size_t nu = (size_t)2 * T * H;
        add_in(&o, vec(nu, &r, -1, 1), nu);
        add_in(&o, vec(N, &r, -3, 0), N);
        add_in(&o, vec(N, &r, -1, 1), N);
        add_in(&o, vec((size_t)H * N, &r, -1, 1), (size_t)H * N);
        add_in(&o, vec((size_t)H * N, &r, -1, 1), (size_t)H * N);
        add_in(&o, vec(H, &r, -1, 1), H);
        o.nout = nu, o.out = vec(nu, NULL, 0, 0), o.dout = vec(nu, &r, -1, 1);
        o.fwd = ssm_f, o.bwd = ssm_b;
        double t0 = phax_clock();
        o.fwd(&o);
        double ms = 1e3 * (phax_clock() - t0), err = directional_check(&o, &r);
        double *K = vec((size_t)H * T, NULL, 0, 0), *y = vec(nu, NULL, 0, 0);
        o.fwd(&o);
        ref_dss_kernel_fwd(K, o.in[1], o.in[2], o.in[3], o.in[4], H, N, T);
        ref_ssm_conv_fwd(y, o.in[0], K, o.in[5], 2, T, H);
        double cf = max_rel_diff(y, o.out, nu);
        printf("%-44s %10.2f %14.2e %16.2e  (recurrence vs kernel+conv)\n", o.name, ms, err, cf);
        fails += !(err <= 1e-6) + !(cf <= 1e-10);
    }
    // mLSTM: parallel form vs recurrent form.
    {
        int H = 2, d = 12;
        demo_op o = {.name = "mlstm cell (H 2, d 12)", .B = 2, .T = T, .H = H, .dh = d};
        size_t nx = (size_t)2 * T * H * d, ng = (size_t)2 * T * H;
        for (int j = 0; j < 3; j++) add_in(&o, vec(nx, &r, -1, 1), nx);
        add_in(&o, vec(ng, &r, -3, 3), ng);
        add_in(&o, vec(ng, &r, 1, 5), ng);
        o.nout = nx, o.out = vec(nx, NULL, 0, 0), o.dout = vec(nx, &r, -1, 1);
        o.fwd = ml_f, o.bwd = ml_b;
        double t0 = phax_clock();
        o.fwd(&o);
        double ms = 1e3 * (phax_clock() - t0), err = directional_check(&o, &r);
        double *hr = vec(nx, NULL, 0, 0);
        o.fwd(&o);
        ref_mlstm_recurrent_fwd(hr, o.in[0], o.in[1], o.in[2], o.in[3], o.in[4], 2, T, H, d, d,
                                PHAX_MLSTM_EPS, 0.0);
        double cf = max_rel_diff(hr, o.out, nx);
        printf("%-44s %10.2f %14.2e %16.2e  (recurrent vs parallel)\n", o.name, ms, err, cf);
        // The forms use different stabilisers; with eps = 1e-6 they differ ~1e-8 (docs/spec.md).
        fails += !(err <= 1e-6) + !(cf <= 1e-6);
    }
    printf("%s\n", fails ? "demo: MISMATCH (see above)" : "demo: all checks agree");
    return fails ? 1 : 0;
}
