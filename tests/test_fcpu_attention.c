// fast/cpu attention (float32) against ref attention (float64).
//
// Every case feeds the same float inputs to fcpu_attention_* and (widened) to
// ref_attention_*, and also to `naive`, a plain-loop transcription of ref's
// algorithm written here that rounds every operation to float32 (f32 = 1) or
// not (f32 = 0). The float32 run measures how far an honest float32 evaluation
// of the same formula lands from ref; the fast kernel must land no farther than
// a small multiple of that (flash-attention's test habit), plus a noise floor:
//     ‖fast − ref‖ ≤ C · ‖naive32 − ref‖ + FLOOR · ‖mag‖   (2-norms over the tensor,
//                                                          pooled over `draws`)
// C = 2 for the forward outputs (o, lse) and 3 for the gradients (their
// computation chains more rounded products). FLOOR = 4·2⁻²⁴, a few float32 ulps of
// mag, the same computation on absolute values (every later subtraction an
// addition of magnitudes, so mag ≥ |ref| elementwise and |fl(x) − x| ≲ n·u·mag):
// where the result has no cancellation mag ≈ |ref| and the floor is 4 ulps of the
// result; it grows only where the result is a cancelling sum, as dlogscale is (a
// sum over all (t, s) of dz·cos with Σ_s dz = 0: a few scalars whose relative
// error, for the naive evaluation too, swings over orders of magnitude from draw to
// draw). Where the reference is exactly 0 (one visible key: dq = dk = 0) mag also
// expands dz = p(dp − Σp·dp) to p(|dp| + |Σp·dp|), the size of what cancelled.
// The f32 = 0 run reproduces ref to ~1e-15 (checked) and supplies the reference
// lse, which ref does not output. Comparisons are written `err <= tol` so NaN fails.
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "phax/fcpu.h"
#include "phax/ref.h"
#include "testutil.h"

#define C_FWD 2.0
#define C_BWD 3.0
#define FLOOR (4.0 * 0x1p-24)

// --- guarded float buffers --------------------------------------------------------------
// [n (size_t, 16 bytes)] [FG guard floats] [n payload floats, NaN] [FG guard floats]
#define FG 16
static const uint32_t FG_BITS = 0x7FA5C0DEu;  // a signalling-NaN pattern

static float *fbuf(size_t n) {
    char *base = malloc(16 + (2 * FG + n) * sizeof(float));
    if (!base) abort();
    memcpy(base, &n, sizeof n);
    float *g0 = (float *)(base + 16), *p = g0 + FG, *g1 = p + n;
    for (int i = 0; i < FG; i++) memcpy(&g0[i], &FG_BITS, 4), memcpy(&g1[i], &FG_BITS, 4);
    for (size_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}
static size_t flen(const float *p) {
    size_t n;
    memcpy(&n, (const char *)(p - FG) - 16, sizeof n);
    return n;
}
static int fintact(const float *p) {
    size_t n = flen(p);
    for (int i = 0; i < FG; i++)
        if (memcmp(&p[-FG + i], &FG_BITS, 4) || memcmp(&p[n + i], &FG_BITS, 4)) return 0;
    return 1;
}
static void ffree(float *p) {
    if (p) free((char *)(p - FG) - 16);
}
static void fpoison(float *p) {
    for (size_t i = 0; i < flen(p); i++) p[i] = NAN;
}

// --- the cases ------------------------------------------------------------------------------
typedef struct {
    const char *why;
    int B, T, Hq, Hkv, dh, dv, window, score, rope;
    long pos0;
    double xscale;   // q, k standard deviation (sharper softmax when larger)
    int zero_rows;   // cosine: one q row and one k row set to 0 (the norm clamp)
    int draws;       // independent input draws pooled into one error ratio (0 = 1)
} acase;

static ref_attn_cfg cfg_of(const acase *a) {
    ref_attn_cfg c = ref_attn_cfg_default(a->Hq, a->Hkv, a->dh);
    c.dv = a->dv, c.window = a->window, c.score = a->score, c.rope = a->rope, c.pos0 = a->pos0;
    return c;
}

// --- naive: ref's algorithm, every operation optionally rounded to float32 ------------------
static inline double rd(double x, int f) { return f ? (double)(float)x : x; }

typedef struct {
    double *o, *lse, *dq, *dk, *dv, *dls;
} nout;

static int first_key(int t, int w) { return w > 0 && t - w + 1 > 0 ? t - w + 1 : 0; }

// Scored vectors xs (rows of dh) and clamped norms of x: (B, T, H, dh).
static void naive_scored(int f, const acase *a, const double *x, int H, double *xs, double *nrm) {
    int dh = a->dh, half = dh / 2;
    for (int b = 0; b < a->B; b++)
        for (int t = 0; t < a->T; t++)
            for (int h = 0; h < H; h++) {
                size_t off = (((size_t)b * a->T + t) * H + h) * dh;
                const double *xr = x + off;
                double *y = xs + off;
                if (a->rope) {
                    double p = (double)(a->pos0 + t);
                    for (int i = 0; i < half; i++) {
                        double th = pow(PHAX_ROPE_BASE, -2.0 * i / dh);
                        double c = rd(cos(p * th), f), s = rd(sin(p * th), f);
                        y[i] = rd(rd(xr[i] * c, f) - rd(xr[i + half] * s, f), f);
                        y[i + half] = rd(rd(xr[i + half] * c, f) + rd(xr[i] * s, f), f);
                    }
                } else {
                    memcpy(y, xr, dh * sizeof *y);
                }
                nrm[off / dh] = 1;
                if (a->score == PHAX_SCORE_COSINE) {
                    double ss = 0;
                    for (int i = 0; i < dh; i++) ss = rd(ss + rd(y[i] * y[i], f), f);
                    double n = fmax(rd(sqrt(ss), f), rd(PHAX_COSINE_NORM_EPS, f));
                    nrm[off / dh] = n;
                    for (int i = 0; i < dh; i++) y[i] = rd(y[i] / n, f);
                }
            }
}

static double naive_scale(int f, const acase *a, const double *ls, int h) {
    if (a->score != PHAX_SCORE_COSINE) return rd(1.0 / rd(sqrt((double)a->dh), f), f);
    return rd(exp(fmin(ls[h], rd(PHAX_COSINE_MAX_LOGSCALE, f))), f);
}

// Softmax row p[s − s0]; returns lse, or with mag its rounding scale: the largest
// logit magnitude |scale|·Σ_i |q_i k_i| plus log Σ.
static double naive_row(int f, int mag, const acase *a, double *p, const double *qs, const double *ks,
                        double scale, int b, int t, int h) {
    int g = a->Hq / a->Hkv, j = h / g, s0 = first_key(t, a->window), dh = a->dh;
    const double *qv = qs + (((size_t)b * a->T + t) * a->Hq + h) * dh;
    double mx = -INFINITY, zmag = 0;
    for (int s = s0; s <= t; s++) {
        const double *kv = ks + (((size_t)b * a->T + s) * a->Hkv + j) * dh;
        double d = 0, dm = 0;
        for (int i = 0; i < dh; i++) d = rd(d + rd(qv[i] * kv[i], f), f), dm += fabs(qv[i] * kv[i]);
        p[s - s0] = rd(scale * d, f);
        if (p[s - s0] > mx) mx = p[s - s0];
        if (fabs(scale) * dm > zmag) zmag = fabs(scale) * dm;
    }
    double z = 0;
    for (int s = s0; s <= t; s++) z = rd(z + (p[s - s0] = rd(exp(rd(p[s - s0] - mx, f)), f)), f);
    for (int s = s0; s <= t; s++) p[s - s0] = rd(p[s - s0] / z, f);
    return mag ? zmag + fabs(log(z)) : rd(mx + rd(log(z), f), f);
}

// mag (with f = 0): magnitudes for the noise floor, the same loops on absolute values
// (every later subtraction an addition of magnitudes), so |fl(x) − x| ≲ n·u·mag.
//   mag = 2: with the true softmax gradient dz = p(dp − Σp·dp) — the size of the terms
//            whose sums the result is (for dlogscale, a sum over all (t, s) that
//            cancels heavily, this is what its rounding error scales with);
//   mag = 1: also dz expanded to p(|dp| + |Σp·dp|): needed where dz is exactly 0 (one
//            visible key: dq = dk = 0 while float rounding of P(dP − D) leaves ~u·mag).
#define MG(x) (mag ? fabs(x) : (x))
#define SUB(a, b) (mag ? (a) + (b) : (a) - (b))
#define MGX(x) (mag == 1 ? fabs(x) : (x))
#define SUBX(a, b) (mag == 1 ? (a) + (b) : (a) - (b))
static void naive(int f, int mag, const acase *a, const double *q, const double *k, const double *v,
                  const double *ls, const double *dout, nout *out) {
    int B = a->B, T = a->T, Hq = a->Hq, Hkv = a->Hkv, dh = a->dh, dv = a->dv, g = Hq / Hkv;
    size_t nq = (size_t)B * T * Hq, nk = (size_t)B * T * Hkv;
    double *qs = calloc(nq * dh, 8), *ks = calloc(nk * dh, 8), *qn = calloc(nq, 8), *kn = calloc(nk, 8);
    double *dqs = calloc(nq * dh, 8), *dks = calloc(nk * dh, 8);
    double *p = calloc(T, 8), *dp = calloc(T, 8);
    naive_scored(f, a, q, Hq, qs, qn);
    naive_scored(f, a, k, Hkv, ks, kn);
    for (size_t i = 0; i < nk * dv; i++) out->dv[i] = 0;
    for (int h = 0; h < Hq; h++) out->dls[h] = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < Hq; h++) {
            int j = h / g;
            double scale = naive_scale(f, a, ls, h), dscale = 0;
            for (int t = 0; t < T; t++) {
                int s0 = first_key(t, a->window);
                out->lse[((size_t)b * Hq + h) * T + t] = naive_row(f, mag, a, p, qs, ks, scale, b, t, h);
                size_t ro = (((size_t)b * T + t) * Hq + h);
                double *ov = out->o + ro * dv;
                const double *go = dout + ro * dv;
                for (int i = 0; i < dv; i++) ov[i] = 0;
                double pdp = 0;
                for (int s = s0; s <= t; s++) {
                    size_t vo = (((size_t)b * T + s) * Hkv + j) * dv;
                    double d = 0;
                    for (int i = 0; i < dv; i++) {
                        ov[i] = rd(ov[i] + rd(p[s - s0] * MG(v[vo + i]), f), f);
                        d = rd(d + rd(MGX(go[i]) * MGX(v[vo + i]), f), f);
                        out->dv[vo + i] = rd(out->dv[vo + i] + rd(p[s - s0] * MG(go[i]), f), f);
                    }
                    dp[s - s0] = d;
                    pdp = rd(pdp + rd(p[s - s0] * d, f), f);
                }
                double *dqv = dqs + ro * dh;
                const double *qv = qs + ro * dh;
                for (int s = s0; s <= t; s++) {
                    size_t ko = (((size_t)b * T + s) * Hkv + j) * dh;
                    double dz = MG(rd(p[s - s0] * rd(SUBX(dp[s - s0], pdp), f), f)), dzs = rd(dz * scale, f);
                    double d = 0;
                    for (int i = 0; i < dh; i++) {
                        dqv[i] = rd(dqv[i] + rd(dzs * MG(ks[ko + i]), f), f);
                        dks[ko + i] = rd(dks[ko + i] + rd(dzs * MG(qv[i]), f), f);
                        d = rd(d + rd(MG(qv[i]) * MG(ks[ko + i]), f), f);
                    }
                    dscale = rd(dscale + rd(dz * d, f), f);
                }
            }
            if (a->score == PHAX_SCORE_COSINE && ls[h] < PHAX_COSINE_MAX_LOGSCALE)
                out->dls[h] = rd(out->dls[h] + rd(dscale * scale, f), f);
        }
    // Back through the normalisation and the rotation.
    double *dsv[2] = {dqs, dks}, *xsv[2] = {qs, ks}, *nv[2] = {qn, kn}, *dst[2] = {out->dq, out->dk};
    size_t rows[2] = {nq, nk};
    int Hs[2] = {Hq, Hkv}, half = dh / 2;
    double *tmp = calloc(dh, 8);
    for (int w = 0; w < 2; w++)
        for (size_t r = 0; r < rows[w]; r++) {
            double *dx = dsv[w] + r * dh, *xh = xsv[w] + r * dh, n = nv[w][r];
            if (a->score == PHAX_SCORE_COSINE) {
                if (n > rd(PHAX_COSINE_NORM_EPS, f)) {
                    double d = 0;
                    for (int i = 0; i < dh; i++) d = rd(d + rd(MG(xh[i]) * MG(dx[i]), f), f);
                    for (int i = 0; i < dh; i++) dx[i] = rd(rd(SUB(MG(dx[i]), rd(MG(xh[i]) * d, f)), f) / n, f);
                } else {
                    for (int i = 0; i < dh; i++) dx[i] = rd(MG(dx[i]) / n, f);
                }
            }
            double *y = dst[w] + r * dh;
            if (a->rope) {
                int t = (int)((r / Hs[w]) % T);
                double p = (double)(a->pos0 + t);
                for (int i = 0; i < half; i++) {
                    double th = pow(PHAX_ROPE_BASE, -2.0 * i / dh);
                    double c = rd(cos(p * th), f), s = rd(sin(p * th), f);
                    tmp[i] = rd(rd(MG(dx[i]) * MG(c), f) + rd(MG(dx[i + half]) * MG(s), f), f);
                    tmp[i + half] = rd(SUB(rd(MG(dx[i + half]) * MG(c), f), rd(MG(dx[i]) * MG(s), f)), f);
                }
                memcpy(y, tmp, dh * sizeof *y);
            } else {
                for (int i = 0; i < dh; i++) y[i] = MG(dx[i]);
            }
        }
    free(qs), free(ks), free(qn), free(kn), free(dqs), free(dks), free(p), free(dp), free(tmp);
}

// --- one case ----------------------------------------------------------------------------------
static double norm2(const double *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += x[i] * x[i];
    return sqrt(s);
}
static double dist_d(const double *x, const double *ref, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = x[i] - ref[i];
        s += d * d;
    }
    return sqrt(s);
}

typedef struct {
    size_t nq, nk, nv, no, nl;
    float *q, *k, *v, *ls, *dout;                 // inputs
    double *qd, *kd, *vd, *lsd, *doutd;           // the same values, widened
    double *o_ref, *dq_ref, *dk_ref, *dv_ref, *dls_ref;
    nout n64, n32, mag, magx;  // f = 0 (≈ ref, and the reference lse), f = 1, magnitudes
} inputs;

static double *dmalloc(size_t n) { return calloc(n ? n : 1, sizeof(double)); }
static void nout_alloc(nout *o, const inputs *in, int Hq) {
    o->o = dmalloc(in->no), o->lse = dmalloc(in->nl), o->dq = dmalloc(in->nq);
    o->dk = dmalloc(in->nk), o->dv = dmalloc(in->nv), o->dls = dmalloc(Hq);
}
static void nout_free(nout *o) { free(o->o), free(o->lse), free(o->dq), free(o->dk), free(o->dv), free(o->dls); }

static float *draw(size_t n, phax_rng *r, double scale, double **wide) {
    float *x = fbuf(n);
    *wide = dmalloc(n);
    for (size_t i = 0; i < n; i++) x[i] = (float)(scale * phax_rng_normal(r)), (*wide)[i] = x[i];
    return x;
}

static void inputs_make(inputs *in, const acase *a, phax_rng *r) {
    ref_attn_cfg c = cfg_of(a);
    in->nq = (size_t)a->B * a->T * a->Hq * a->dh, in->nk = (size_t)a->B * a->T * a->Hkv * a->dh;
    in->nv = (size_t)a->B * a->T * a->Hkv * a->dv, in->no = (size_t)a->B * a->T * a->Hq * a->dv;
    in->nl = (size_t)a->B * a->Hq * a->T;
    double xs = a->xscale > 0 ? a->xscale : 1.0;
    in->q = draw(in->nq, r, xs, &in->qd);
    in->k = draw(in->nk, r, xs, &in->kd);
    in->v = draw(in->nv, r, 1.0, &in->vd);
    in->dout = draw(in->no, r, 1.0, &in->doutd);
    // logscale around log 10 (the init) with spread; head 0 above the clamp (gradient 0),
    // except in the zero-rows case (see there).
    in->ls = fbuf(a->Hq), in->lsd = dmalloc(a->Hq);
    for (int h = 0; h < a->Hq; h++) {
        double l = h == 0 && a->Hq > 1 && !a->zero_rows ? 5.0 : phax_rng_uniform_range(r, 0.5, 4.0);
        in->ls[h] = (float)l, in->lsd[h] = in->ls[h];
    }
    if (a->zero_rows && a->T > 3) {  // row t = 2 of q head 0 and of k head 0 (batch 0)
        for (int i = 0; i < a->dh; i++) {
            size_t qi = ((size_t)2 * a->Hq) * a->dh + i, ki = ((size_t)2 * a->Hkv) * a->dh + i;
            in->q[qi] = 0, in->qd[qi] = 0, in->k[ki] = 0, in->kd[ki] = 0;
        }
    }
    in->o_ref = dmalloc(in->no), in->dq_ref = dmalloc(in->nq), in->dk_ref = dmalloc(in->nk);
    in->dv_ref = dmalloc(in->nv), in->dls_ref = dmalloc(a->Hq);
    cr_assert(ref_attention_fwd(in->o_ref, in->qd, in->kd, in->vd, in->lsd, a->B, a->T, &c) == PHAX_OK);
    cr_assert(ref_attention_bwd(in->dq_ref, in->dk_ref, in->dv_ref, in->dls_ref, in->doutd, in->qd,
                                in->kd, in->vd, in->lsd, a->B, a->T, &c) == PHAX_OK);
    nout_alloc(&in->n64, in, a->Hq), nout_alloc(&in->n32, in, a->Hq), nout_alloc(&in->mag, in, a->Hq);
    nout_alloc(&in->magx, in, a->Hq);
    naive(0, 0, a, in->qd, in->kd, in->vd, in->lsd, in->doutd, &in->n64);
    naive(1, 0, a, in->qd, in->kd, in->vd, in->lsd, in->doutd, &in->n32);
    naive(0, 2, a, in->qd, in->kd, in->vd, in->lsd, in->doutd, &in->mag);
    naive(0, 1, a, in->qd, in->kd, in->vd, in->lsd, in->doutd, &in->magx);
}

static void inputs_free(inputs *in) {
    ffree(in->q), ffree(in->k), ffree(in->v), ffree(in->ls), ffree(in->dout);
    free(in->qd), free(in->kd), free(in->vd), free(in->lsd), free(in->doutd);
    free(in->o_ref), free(in->dq_ref), free(in->dk_ref), free(in->dv_ref), free(in->dls_ref);
    nout_free(&in->n64), nout_free(&in->n32), nout_free(&in->mag), nout_free(&in->magx);
}

// Fast outputs of one run.
typedef struct {
    float *o, *lse, *st, *dq, *dk, *dv, *dls;
} fout;

static void fout_alloc(fout *f, const inputs *in, int Hq) {
    f->o = fbuf(in->no), f->lse = fbuf(in->nl), f->st = fbuf(2 * in->nl), f->dq = fbuf(in->nq), f->dk = fbuf(in->nk);
    f->dv = fbuf(in->nv), f->dls = fbuf(Hq);
}
static void fout_free(fout *f) {
    ffree(f->o), ffree(f->lse), ffree(f->st), ffree(f->dq), ffree(f->dk), ffree(f->dv), ffree(f->dls);
}
static int fout_intact(const fout *f) {
    return fintact(f->o) && fintact(f->lse) && fintact(f->st) && fintact(f->dq) && fintact(f->dk) && fintact(f->dv) &&
           fintact(f->dls);
}
static void zero(float *p) { memset(p, 0, flen(p) * sizeof *p); }

// Run forward (o, lse, stats poisoned first) and backward with the forward's stats
// (gradients zeroed: backward adds) with a workspace deliberately misaligned by 4 bytes.
static void run_fast(const acase *a, const inputs *in, fout *f) {
    ref_attn_cfg c = cfg_of(a);
    size_t wf = fcpu_attention_fwd_ws(a->B, a->T, &c, 0), wb = fcpu_attention_bwd_ws(a->B, a->T, &c, 0);
    cr_assert(wf > 0 && wb > 0);
    size_t wn = (wf > wb ? wf : wb) / 4 + 2;
    float *ws = fbuf(wn);
    fpoison(f->o), fpoison(f->lse), fpoison(f->st);
    cr_assert(fcpu_attention_fwd(f->o, f->lse, f->st, in->q, in->k, in->v, in->ls, a->B, a->T, &c,
                                 (char *)ws + 4) == PHAX_OK, "%s", phax_error());
    zero(f->dq), zero(f->dk), zero(f->dv), zero(f->dls);
    cr_assert(fcpu_attention_bwd(f->dq, f->dk, f->dv, f->dls, in->dout, f->o, f->st, in->q, in->k, in->v, in->ls,
                                 a->B, a->T, &c, (char *)ws + 4) == PHAX_OK, "%s", phax_error());
    cr_assert(fintact(ws), "%s: workspace overrun", a->why);
    cr_assert(fout_intact(f), "%s: output guard zone overwritten", a->why);
    ffree(ws);
}

static int bitsame(const float *a, const float *b) { return memcmp(a, b, flen(a) * sizeof *a) == 0; }

// Squared 2-norms pooled over the draws of a case: fast − ref, naive32 − ref, ref, and the
// two magnitudes.
typedef struct {
    double ef, en, rn, mn, mxn;
} errsum;

static void pool(errsum *e, const float *fast, const double *ref, const double *n32,
                 const double *mag, const double *magx, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double d = (double)fast[i] - ref[i], dn = n32[i] - ref[i];
        e->ef += d * d, e->en += dn * dn, e->rn += ref[i] * ref[i];
        e->mn += mag[i] * mag[i], e->mxn += magx[i] * magx[i];
    }
}

// ‖fast − ref‖ ≤ C·‖naive32 − ref‖ + FLOOR·‖mag‖ (magx where ref is exactly 0); errors
// printed relative to ‖ref‖ (to ‖mag‖ when ref is 0). Returns 1 when within the bound.
static int judge(const char *why, const char *what, const errsum *s, double C) {
    double ef = sqrt(s->ef), en = sqrt(s->en), rn = sqrt(s->rn);
    double mn = rn > 0 ? sqrt(s->mn) : sqrt(s->mxn);
    double tol = C * en + FLOOR * mn;
    int ok = ef <= tol;
    double den = rn > 0 ? rn : mn > 0 ? mn : 1;
    printf("  %-44s %-4s fast %.3e  naive32 %.3e  floor %.1e  ratio %.2f%s\n", why, what, ef / den,
           en / den, FLOOR * mn / den, en > 0 ? ef / en : 0.0, ok ? "" : "  FAIL");
    return ok;
}

enum { Q_O, Q_LSE, Q_DQ, Q_DK, Q_DV, Q_DLS, NQTY };

// One draw: fresh inputs, ref, naive, fast (twice: bit-identical), pooled into es.
static void run_draw(const acase *a, phax_rng *r, errsum *es) {
    inputs in;
    inputs_make(&in, a, r);
    // The f32 = 0 transcription must reproduce ref: it supplies the reference lse.
    cr_assert(dist_d(in.n64.o, in.o_ref, in.no) <= 1e-12 * norm2(in.magx.o, in.no), "%s: naive64 o differs from ref", a->why);
    cr_assert(dist_d(in.n64.dq, in.dq_ref, in.nq) <= 1e-12 * norm2(in.magx.dq, in.nq), "%s: naive64 dq differs from ref", a->why);
    cr_assert(dist_d(in.n64.dk, in.dk_ref, in.nk) <= 1e-12 * norm2(in.magx.dk, in.nk), "%s: naive64 dk differs from ref", a->why);
    cr_assert(dist_d(in.n64.dv, in.dv_ref, in.nv) <= 1e-12 * norm2(in.magx.dv, in.nv), "%s: naive64 dv differs from ref", a->why);
    cr_assert(dist_d(in.n64.dls, in.dls_ref, a->Hq) <= 1e-12 * norm2(in.magx.dls, a->Hq), "%s: naive64 dls differs from ref", a->why);
    fout f, g;
    fout_alloc(&f, &in, a->Hq), fout_alloc(&g, &in, a->Hq);
    run_fast(a, &in, &f);
    pool(&es[Q_O], f.o, in.o_ref, in.n32.o, in.mag.o, in.magx.o, in.no);
    pool(&es[Q_LSE], f.lse, in.n64.lse, in.n32.lse, in.mag.lse, in.magx.lse, in.nl);
    pool(&es[Q_DQ], f.dq, in.dq_ref, in.n32.dq, in.mag.dq, in.magx.dq, in.nq);
    pool(&es[Q_DK], f.dk, in.dk_ref, in.n32.dk, in.mag.dk, in.magx.dk, in.nk);
    pool(&es[Q_DV], f.dv, in.dv_ref, in.n32.dv, in.mag.dv, in.magx.dv, in.nv);
    pool(&es[Q_DLS], f.dls, in.dls_ref, in.n32.dls, in.mag.dls, in.magx.dls, a->Hq);
    if (a->score == PHAX_SCORE_COSINE) {
        // Above the clamp the gradient is exactly zero.
        for (int h = 0; h < a->Hq; h++)
            if (!(in.ls[h] < PHAX_COSINE_MAX_LOGSCALE))
                cr_assert(f.dls[h] == 0.0f, "%s: dls[%d] = %g above the clamp", a->why, h, f.dls[h]);
    } else {
        for (int h = 0; h < a->Hq; h++) cr_assert(f.dls[h] == 0.0f, "%s: dot mode touched dlogscale", a->why);
    }
    // A second run (fresh workspace, outputs poisoned again) is bit-identical.
    run_fast(a, &in, &g);
    cr_assert(bitsame(f.o, g.o) && bitsame(f.lse, g.lse), "%s: forward not deterministic", a->why);
    cr_assert(bitsame(f.dq, g.dq) && bitsame(f.dk, g.dk) && bitsame(f.dv, g.dv) && bitsame(f.dls, g.dls),
              "%s: backward not deterministic", a->why);
    fout_free(&f), fout_free(&g);
    inputs_free(&in);
}

static int run_case(const acase *a) {
    phax_rng r = tu_rng(a->why);
    errsum es[NQTY];
    memset(es, 0, sizeof es);
    int draws = a->draws > 0 ? a->draws : 1;
    for (int d = 0; d < draws; d++) run_draw(a, &r, es);
    static const char *names[NQTY] = {"o", "lse", "dq", "dk", "dv", "dls"};
    int ok = 1;
    for (int qn = 0; qn < NQTY; qn++) {
        if (qn == Q_DLS && a->score != PHAX_SCORE_COSINE) continue;
        ok &= judge(a->why, names[qn], &es[qn], qn <= Q_LSE ? C_FWD : C_BWD);
    }
    if (!ok) printf("FAIL %s: fast error above C·naive32 + %g·mag (see table)\n", a->why, FLOOR);
    return ok;
}

// Runs every case (so the table is complete), then fails if any was out of bounds.
static void run_cases(const acase *cs, size_t n) {
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad += !run_case(&cs[i]);
    cr_assert(bad == 0, "%d case(s) above the error bound (see the table on stdout)", bad);
}

#define DOT PHAX_SCORE_DOT
#define COS PHAX_SCORE_COSINE

// --- tests -------------------------------------------------------------------------------------
Test(fcpu_attention, dot_lengths) {
    acase cs[] = {
        {"dot T=1 (one row, one key)", 1, 1, 2, 1, 24, 24, 0, DOT, 1, 0, 1, 0, 0},
        {"dot T=7 (less than one tile)", 1, 7, 2, 2, 24, 24, 0, DOT, 1, 0, 1, 0, 0},
        {"dot T=65 (one past a tile)", 1, 65, 4, 2, 40, 40, 0, DOT, 1, 0, 1, 0, 0},
        {"dot T=200 full causal, g=4", 1, 200, 4, 1, 64, 64, 0, DOT, 1, 0, 1, 0, 0},
        {"dot T=200 B=2, g=2, dh=40", 2, 200, 4, 2, 40, 40, 0, DOT, 1, 0, 1, 0, 0},
    };
    run_cases(cs, sizeof cs / sizeof *cs);
}

Test(fcpu_attention, dot_windows) {
    acase cs[] = {
        {"dot window 1 (o_t = v_t)", 1, 65, 2, 1, 24, 24, 1, DOT, 1, 0, 1, 0, 0},
        {"dot window 5, T=200", 1, 200, 2, 2, 24, 24, 5, DOT, 1, 0, 1, 0, 0},
        {"dot window 70 (spans tiles), T=200, g=4", 1, 200, 4, 1, 64, 64, 70, DOT, 1, 0, 1, 0, 0},
        {"dot window >= T (equals full)", 1, 65, 2, 1, 40, 40, 100, DOT, 1, 0, 1, 0, 0},
        {"dot window = T exactly", 1, 65, 2, 2, 24, 24, 65, DOT, 1, 0, 1, 0, 0},
    };
    run_cases(cs, sizeof cs / sizeof *cs);
}

Test(fcpu_attention, cosine) {
    acase cs[] = {
        // Tiny T with the clamp head (logits up to ±100, each rounded by ~100 u): a
        // handful of scores decides the error of either evaluation, and the ratio of two
        // such errors is heavy-tailed (a 3× ratio in ~3% of single draws, for fast and
        // naive alike: their RMS errors over 200 draws agree within 20%), so 48 draws
        // are pooled.
        {"cos T=1", 1, 1, 2, 2, 24, 24, 0, COS, 1, 0, 1, 0, 48},
        {"cos T=7, g=2", 1, 7, 2, 1, 40, 40, 0, COS, 1, 0, 1, 0, 48},
        {"cos T=65, g=4, dh=64", 1, 65, 4, 1, 64, 64, 0, COS, 1, 0, 1, 0, 0},
        {"cos T=200 full, g=2, B=2", 2, 200, 4, 2, 24, 24, 0, COS, 1, 0, 1, 0, 0},
        {"cos window 5, T=200", 1, 200, 2, 1, 40, 40, 5, COS, 1, 0, 1, 0, 0},
        {"cos window 1", 1, 65, 2, 2, 24, 24, 1, COS, 1, 0, 1, 0, 0},
        // The 1e12-amplified zero rows dominate ‖dk‖, ‖dq‖: a one-row statistic, so draws
        // are pooled, and no head sits at the logit clamp here (every other cosine case
        // has one): with logits of ±100 that one-row statistic is heavy-tailed for any
        // float32 evaluation.
        {"cos zero q and k rows (norm clamp)", 1, 65, 2, 1, 24, 24, 0, COS, 1, 0, 1, 1, 16},
    };
    run_cases(cs, sizeof cs / sizeof *cs);
}

Test(fcpu_attention, shapes_and_positions) {
    acase cs[] = {
        {"dv != dh (dh 40, dv 24)", 1, 65, 4, 2, 40, 24, 0, DOT, 1, 0, 1, 0, 0},
        {"dv != dh cosine (dh 24, dv 64), window 9", 1, 200, 2, 1, 24, 64, 9, COS, 1, 0, 1, 0, 0},
        {"pos0 = 12345 (RoPE offset)", 1, 200, 2, 1, 64, 64, 0, DOT, 1, 12345, 1, 0, 0},
        {"pos0 = -70 (negative offset)", 1, 65, 2, 2, 24, 24, 0, COS, 1, -70, 1, 0, 0},
        {"no RoPE, odd dh 21", 1, 65, 2, 1, 21, 21, 0, DOT, 0, 0, 1, 0, 0},
        {"sharp softmax (q, k std 3)", 1, 200, 2, 1, 24, 24, 0, DOT, 1, 0, 3, 0, 0},
        {"dh 8, dv 100 (more than 64 value columns)", 1, 65, 2, 1, 8, 100, 0, DOT, 1, 0, 1, 0, 0},
    };
    run_cases(cs, sizeof cs / sizeof *cs);
}

// Bit-identical across repeated runs, for 1, 2 and 3 threads (which select the
// per-group and per-head backward schedules when B·Hkv = 1 or 2), each also
// within the bound; NULL gradients skipped; backward adds to what is there.
Test(fcpu_attention, determinism_threads_accumulate) {
    acase a = {"determinism T=130 g=2 window 50", 1, 130, 4, 2, 24, 24, 50, COS, 1, 3, 1, 0, 0};
    int saved = omp_get_max_threads();
    for (int nt = 1; nt <= 3; nt++) {
        omp_set_num_threads(nt);
        char why[96];
        snprintf(why, sizeof why, "%s, %d threads", a.why, nt);
        acase b = a;
        b.why = why;
        cr_assert(run_case(&b), "%s: above the error bound", why);  // two runs compared bit for bit
    }
    omp_set_num_threads(saved);

    phax_rng r = tu_rng("accumulate");
    inputs in;
    inputs_make(&in, &a, &r);
    ref_attn_cfg c = cfg_of(&a);
    fout f, g;
    fout_alloc(&f, &in, a.Hq), fout_alloc(&g, &in, a.Hq);
    run_fast(&a, &in, &f);
    // Prior contents: backward must add, giving fl(prior + g) exactly.
    size_t wb = fcpu_attention_bwd_ws(a.B, a.T, &c, 0), wf = fcpu_attention_fwd_ws(a.B, a.T, &c, 0);
    float *ws = fbuf((wb > wf ? wb : wf) / 4 + 1);
    float *pri[4] = {g.dq, g.dk, g.dv, g.dls}, *got[4] = {f.dq, f.dk, f.dv, f.dls};
    for (int i = 0; i < 4; i++)
        for (size_t e = 0; e < flen(pri[i]); e++) pri[i][e] = (float)phax_rng_normal(&r);
    // lse and stats are optional: without them the forward writes the same o.
    float *o2 = fbuf(in.no);
    cr_assert(fcpu_attention_fwd(o2, NULL, NULL, in.q, in.k, in.v, in.ls, a.B, a.T, &c, ws) == PHAX_OK);
    cr_assert(bitsame(o2, f.o) && fintact(o2), "forward without lse differs");
    ffree(o2);
    float *keep[4];
    for (int i = 0; i < 4; i++) keep[i] = fbuf(flen(pri[i])), memcpy(keep[i], pri[i], flen(pri[i]) * 4);
    cr_assert(fcpu_attention_bwd(g.dq, g.dk, g.dv, g.dls, in.dout, f.o, f.st, in.q, in.k, in.v, in.ls, a.B,
                                 a.T, &c, ws) == PHAX_OK);
    for (int i = 0; i < 4; i++)
        for (size_t e = 0; e < flen(pri[i]); e++)
            cr_assert(pri[i][e] == keep[i][e] + got[i][e], "tensor %d elem %zu: not prior + grad", i, e);
    // NULL gradients: each alone equals its value from the full call.
    for (int i = 0; i < 4; i++) {
        zero(pri[i]);
        cr_assert(fcpu_attention_bwd(i == 0 ? g.dq : NULL, i == 1 ? g.dk : NULL, i == 2 ? g.dv : NULL,
                                     i == 3 ? g.dls : NULL, in.dout, f.o, f.st, in.q, in.k, in.v, in.ls, a.B, a.T,
                                     &c, ws) == PHAX_OK);
        cr_assert(bitsame(pri[i], got[i]), "gradient %d alone differs from the full call", i);
    }
    cr_assert(fintact(ws) && fout_intact(&g));
    for (int i = 0; i < 4; i++) ffree(keep[i]);
    ffree(ws), fout_free(&f), fout_free(&g);
    inputs_free(&in);
}

// Bad configs fail before writing anything; workspace is linear in T.
Test(fcpu_attention, errors_and_workspace) {
    float *q = fbuf(64), *o = fbuf(64), *lse = fbuf(16), ws[64];
    for (int i = 0; i < 64; i++) q[i] = 1;
    ref_attn_cfg c = ref_attn_cfg_default(3, 2, 4);  // Hq % Hkv != 0
    cr_assert(fcpu_attention_fwd(o, lse, NULL, q, q, q, NULL, 1, 2, &c, ws) == PHAX_ERR);
    cr_assert(fcpu_attention_fwd_ws(1, 2, &c, 1) == 0 && fcpu_attention_bwd_ws(1, 2, &c, 1) == 0);
    c = ref_attn_cfg_default(2, 1, 4);
    c.window = -1;
    cr_assert(fcpu_attention_fwd(o, lse, NULL, q, q, q, NULL, 1, 2, &c, ws) == PHAX_ERR);
    c.window = 0, c.score = PHAX_SCORE_COSINE;
    cr_assert(fcpu_attention_fwd(o, lse, NULL, q, q, q, NULL, 1, 2, &c, ws) == PHAX_ERR);  // no logscale
    cr_assert(fcpu_attention_bwd(o, o, o, NULL, q, q, lse, q, q, q, NULL, 1, 2, &c, ws) == PHAX_ERR);
    c = ref_attn_cfg_default(2, 1, 5);  // odd dh with RoPE
    cr_assert(fcpu_attention_bwd(o, o, o, NULL, q, q, lse, q, q, q, NULL, 1, 2, &c, ws) == PHAX_ERR);
    c = ref_attn_cfg_default(2, 1, 4);  // a good config, but without the forward's o or stats
    cr_assert(fcpu_attention_bwd(o, o, o, NULL, q, NULL, lse, q, q, q, NULL, 1, 2, &c, ws) == PHAX_ERR);
    cr_assert(fcpu_attention_bwd(o, o, o, NULL, q, q, NULL, q, q, q, NULL, 1, 2, &c, ws) == PHAX_ERR);
    for (int i = 0; i < 64; i++) cr_assert(isnan(o[i]), "output written on error");
    cr_assert(fintact(o) && fintact(lse));
    // Workspace linear in T: doubling T at most doubles it (plus a constant).
    c = ref_attn_cfg_default(8, 2, 64);
    for (int T = 1024; T <= 65536; T *= 2) {
        size_t f1 = fcpu_attention_fwd_ws(1, T, &c, 2), f2 = fcpu_attention_fwd_ws(1, 2 * T, &c, 2);
        size_t b1 = fcpu_attention_bwd_ws(1, T, &c, 2), b2 = fcpu_attention_bwd_ws(1, 2 * T, &c, 2);
        cr_assert(f2 <= 2 * f1 && b2 <= 2 * b1, "T=%d: ws %zu -> %zu, %zu -> %zu", T, f1, f2, b1, b2);
        cr_assert(f1 < (size_t)T * 8 * 64 * 4 * 4, "T=%d: forward workspace %zu not O(T)", T, f1);
    }
    ffree(q), ffree(o), ffree(lse);
}
