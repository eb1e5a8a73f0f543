// The oracle's ops: each reads its tensors and attributes from IN, plans its memory, runs ref/
// (the float64 truth, forward and backward) and, under phax check, check/'s baselines at the
// precision asked for (src/oracle_ctx.h). docs/oracle.md lists what each takes.
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "phax/model.h"
#include "phax/model_plan.h"
#include "phax/names.h"
#include "phax/ref.h"
#include "phax/ref_model.h"
#include "phax/safetensors.h"
#include "cmd_args.h"
#include "oracle.h"
#include "oracle_ctx.h"


// --- ops -------------------------------------------------------------------------------------
int op_embedding(octx *c) {
    int nt, nw;
    int64_t ts[8], ws[8];
    TRY(ox_shape_of(c, "tokens", 1, 7, &nt, ts));
    TRY(ox_shape_of(c, "weight", 2, 2, &nw, ws));
    // tokens (int32: half a double each), E; written twice (array + writer copy): y, dE, grad.y.
    size_t n_ = ox_numel(nt, ts), Vd = ox_numel(2, ws), nd = ox_smul(n_, (size_t)ws[1]);
    TRY(ox_budget(c, ox_sadd(ox_sadd(n_ / 2 + 1, ox_smul(3, Vd)), ox_smul(4, nd))));
    int32_t *tok = ox_geti(c, "tokens", nt, ts);
    double *E = ox_getf(c, "weight", 2, ws);
    TRYP(tok && E);
    size_t n = ox_numel(nt, ts);
    int V = (int)ws[0], d = (int)ws[1];
    int64_t ys[8];
    memcpy(ys, ts, (size_t)nt * sizeof *ys);
    ys[nt] = d;
    double *y = ox_dalloc(c, n * d), *dE = ox_dalloc(c, (size_t)V * d);
    TRYP(y && dE);
    if (ref_embedding_fwd(y, E, tok, n, V, d)) return phax_fail("%s: %s", c->path, phax_error());
    double *gy = ox_upstream(c, "y", nt + 1, ys);
    TRYP(gy);
    ref_embedding_bwd(dE, gy, tok, n, d);
    TRY(ox_put(c, "y", y, nt + 1, ys));
    TRY(ox_put(c, "grad.weight", dE, 2, ws));
    if (!c->prec) return PHAX_OK;
    double *by = ox_dalloc(c, n * d), *bE = ox_dalloc(c, (size_t)V * d);
    TRYP(by && bE);
    TRY(phax_naive_embedding(c->prec, by, bE, gy, E, tok, n, V, d));
    TRY(ox_put_base(c, "y", by));
    return ox_put_base(c, "grad.weight", bE);
}

int op_linear(octx *c) {
    int nx, nw, nb;
    int64_t xs[8], ws[8], bs[8];
    TRY(ox_shape_of(c, "x", 1, 7, &nx, xs));
    TRY(ox_shape_of(c, "weight", 2, 2, &nw, ws));
    size_t n;
    int in;
    ox_rows_cols(nx, xs, &n, &in);
    int out = (int)ws[0];
    if (ws[1] != in) return phax_fail("%s: weight has %lld input columns, x has %d", c->path, (long long)ws[1], in);
    int has_b = phax_st_find(&c->in, "bias") != NULL;
    if (has_b) TRY(ox_shape_of(c, "bias", 1, 1, &nb, bs));
    // x, W, b; written twice: y, dx, dW, db, grad.y.
    size_t nx_ = ox_numel(nx, xs), nw_ = ox_numel(2, ws), ny = ox_smul(n, (size_t)out);
    TRY(ox_budget(c, ox_sadd(ox_sadd(ox_smul(3, nx_), ox_smul(3, nw_)), ox_sadd(ox_smul(4, ny), 3 * (size_t)out))));
    double *x = ox_getf(c, "x", nx, xs), *W = ox_getf(c, "weight", 2, ws);
    int64_t ob[1] = {out};
    double *b = has_b ? ox_getf(c, "bias", 1, ob) : NULL;
    TRYP(x && W && (b || !has_b));
    int64_t ys[8];
    memcpy(ys, xs, sizeof ys);
    ys[nx - 1] = out;
    double *y = ox_dalloc(c, n * out), *dx = ox_dalloc(c, n * in), *dW = ox_dalloc(c, (size_t)out * in), *db = ox_dalloc(c, out);
    TRYP(y && dx && dW && db);
    ref_linear_fwd(y, x, W, b, n, in, out);
    double *gy = ox_upstream(c, "y", nx, ys);
    TRYP(gy);
    ref_linear_bwd(dx, dW, has_b ? db : NULL, gy, x, W, n, in, out);
    TRY(ox_put(c, "y", y, nx, ys));
    TRY(ox_put(c, "grad.x", dx, nx, xs));
    TRY(ox_put(c, "grad.weight", dW, 2, ws));
    if (has_b) TRY(ox_put(c, "grad.bias", db, 1, ob));
    if (!c->prec) return PHAX_OK;
    double *by = ox_dalloc(c, n * out), *bx = ox_dalloc(c, n * in), *bW = ox_dalloc(c, (size_t)out * in), *bb = ox_dalloc(c, out);
    TRYP(by && bx && bW && bb);
    TRY(phax_naive_linear(c->prec, by, bx, bW, has_b ? bb : NULL, gy, x, W, b, n, in, out));
    TRY(ox_put_base(c, "y", by));
    TRY(ox_put_base(c, "grad.x", bx));
    TRY(ox_put_base(c, "grad.weight", bW));
    return has_b ? ox_put_base(c, "grad.bias", bb) : PHAX_OK;
}

// rmsnorm, layernorm, headnorm share their I/O.
static int op_norm(octx *c, int kind) {  // 0 rms, 1 layer, 2 head
    int nx;
    int64_t xs[8];
    TRY(ox_shape_of(c, "x", 1, 7, &nx, xs));
    size_t n;
    int d;
    ox_rows_cols(nx, xs, &n, &d);
    double eps;
    TRY(ox_attr_double(c, "eps", kind == 0 ? PHAX_RMSNORM_EPS : kind == 1 ? PHAX_LAYERNORM_EPS : PHAX_HEADNORM_EPS, &eps));
    if (!(eps >= 0)) return phax_fail("%s: attribute 'eps' must be >= 0", c->path);
    int heads = 1;
    if (kind == 2) {
        TRY(ox_attr_int(c, "heads", 0, 1, INT_MAX, &heads));
        if (heads < 1 || d % heads) return phax_fail("%s: attribute 'heads' (%d) must be given and divide the last dim %d", c->path, heads, d);
    }
    int64_t gs[1] = {d};
    // x, weight, bias; written twice: y, dx, dweight, dbias, grad.y; phax check: two baselines
    // for LayerNorm and headnorm (the variance in two passes and in one)
    size_t xn = ox_sadd(ox_smul(7, ox_numel(nx, xs)), ox_smul(6, (size_t)d));
    TRY(ox_budget_check_alt(c, xn, xn, kind ? xn : 0));
    double *x = ox_getf(c, "x", nx, xs), *g = ox_getf(c, "weight", 1, gs);
    int has_b = kind == 1 && phax_st_find(&c->in, "bias");
    double *b = has_b ? ox_getf(c, "bias", 1, gs) : NULL;
    TRYP(x && g && (b || !has_b));
    double *y = ox_dalloc(c, n * d), *dx = ox_dalloc(c, n * d), *dg = ox_dalloc(c, d), *db = ox_dalloc(c, d);
    TRYP(y && dx && dg && db);
    if (kind == 0) ref_rmsnorm_fwd(y, x, g, n, d, eps);
    if (kind == 1) ref_layernorm_fwd(y, x, g, b, n, d, eps);
    if (kind == 2) ref_headnorm_fwd(y, x, g, n, heads, d / heads, eps);
    double *gy = ox_upstream(c, "y", nx, xs);
    TRYP(gy);
    if (kind == 0) ref_rmsnorm_bwd(dx, dg, gy, x, g, n, d, eps);
    if (kind == 1) ref_layernorm_bwd(dx, dg, has_b ? db : NULL, gy, x, g, n, d, eps);
    if (kind == 2) ref_headnorm_bwd(dx, dg, gy, x, g, n, heads, d / heads, eps);
    TRY(ox_put(c, "y", y, nx, xs));
    TRY(ox_put(c, "grad.x", dx, nx, xs));
    TRY(ox_put(c, "grad.weight", dg, 1, gs));
    if (has_b) TRY(ox_put(c, "grad.bias", db, 1, gs));
    if (!c->prec) return PHAX_OK;
    double *by = ox_dalloc(c, n * d), *bx = ox_dalloc(c, n * d), *bg = ox_dalloc(c, d), *bb = ox_dalloc(c, d);
    TRYP(by && bx && bg && bb);
    TRY(phax_naive_norm(c->prec, kind != 0, by, bx, bg, has_b ? bb : NULL, gy, x, g, b, n, d, d / heads, eps));
    TRY(ox_put_base(c, "y", by));
    TRY(ox_put_base(c, "grad.x", bx));
    TRY(ox_put_base(c, "grad.weight", bg));
    if (has_b) TRY(ox_put_base(c, "grad.bias", bb));
    if (!kind) return PHAX_OK;  // RMSNorm has no variance
    // LayerNorm's variance is as often E[x²] − E[x]² in one pass as Σ(x − mean)² in two; the
    // first cancels where |mean| ≫ spread (check/norm.c): its baseline too, the bound the larger.
    double *ay = ox_dalloc(c, n * d), *ax = ox_dalloc(c, n * d), *ag = ox_dalloc(c, d), *ab = ox_dalloc(c, d);
    TRYP(ay && ax && ag && ab);
    TRY(phax_naive_norm_alg(c->prec, 1, ay, ax, ag, has_b ? ab : NULL, gy, x, g, b, n, d, d / heads, eps, 1));
    TRY(ox_put_alt(c, "y", ay));
    TRY(ox_put_alt(c, "grad.x", ax));
    return ox_put_alt(c, "grad.weight", ag);
}
int op_rmsnorm(octx *c) { return op_norm(c, 0); }
int op_layernorm(octx *c) { return op_norm(c, 1); }
int op_headnorm(octx *c) { return op_norm(c, 2); }

static int op_act(octx *c, int silu) {
    int nx;
    int64_t xs[8];
    TRY(ox_shape_of(c, "x", 0, 8, &nx, xs));
    size_t n = ox_numel(nx, xs);
    TRY(ox_budget(c, ox_smul(7, n)));  // x; written twice: y, dx, grad.y
    double *x = ox_getf(c, "x", nx, xs), *y = ox_dalloc(c, n), *dx = ox_dalloc(c, n);
    TRYP(x && y && dx);
    (silu ? ref_silu_fwd : ref_gelu_fwd)(y, x, n);
    double *gy = ox_upstream(c, "y", nx, xs);
    TRYP(gy);
    (silu ? ref_silu_bwd : ref_gelu_bwd)(dx, gy, x, n);
    TRY(ox_put(c, "y", y, nx, xs));
    TRY(ox_put(c, "grad.x", dx, nx, xs));
    if (!c->prec) return PHAX_OK;
    double *by = ox_dalloc(c, n), *bx = ox_dalloc(c, n);
    TRYP(by && bx);
    TRY(phax_naive_act(c->prec, silu, by, bx, gy, x, n));
    TRY(ox_put_base(c, "y", by));
    return ox_put_base(c, "grad.x", bx);
}
int op_gelu(octx *c) { return op_act(c, 0); }
int op_silu(octx *c) { return op_act(c, 1); }

int op_swiglu(octx *c) {
    int nx, nw;
    int64_t xs[8], gs[8];
    TRY(ox_shape_of(c, "x", 1, 7, &nx, xs));
    TRY(ox_shape_of(c, "w_gate", 2, 2, &nw, gs));
    size_t n;
    int d;
    ox_rows_cols(nx, xs, &n, &d);
    int hid = (int)gs[0];
    int64_t hs[2] = {hid, d}, ds[2] = {d, hid};
    // x, three weights; written twice: y, dx, three weight gradients, grad.y; the ref
    // backward's scratch of 7 (n, hid) matrices.
    size_t nd = ox_smul(n, (size_t)d), hd = ox_smul((size_t)hid, (size_t)d);
    TRY(ox_budget(c, ox_sadd(ox_sadd(ox_smul(7, nd), ox_smul(9, hd)), ox_smul(7, ox_smul(n, (size_t)hid)))));
    double *x = ox_getf(c, "x", nx, xs), *Wg = ox_getf(c, "w_gate", 2, hs), *Wu = ox_getf(c, "w_up", 2, hs),
           *Wd = ox_getf(c, "w_down", 2, ds);
    TRYP(x && Wg && Wu && Wd);
    double *y = ox_dalloc(c, n * d), *dx = ox_dalloc(c, n * d), *dWg = ox_dalloc(c, (size_t)hid * d),
           *dWu = ox_dalloc(c, (size_t)hid * d), *dWd = ox_dalloc(c, (size_t)hid * d);
    TRYP(y && dx && dWg && dWu && dWd);
    TRY(ref_swiglu_fwd(y, x, Wg, Wu, Wd, n, d, hid));
    double *gy = ox_upstream(c, "y", nx, xs);
    TRYP(gy);
    TRY(ref_swiglu_bwd(dx, dWg, dWu, dWd, gy, x, Wg, Wu, Wd, n, d, hid));
    TRY(ox_put(c, "y", y, nx, xs));
    TRY(ox_put(c, "grad.x", dx, nx, xs));
    TRY(ox_put(c, "grad.w_gate", dWg, 2, hs));
    TRY(ox_put(c, "grad.w_up", dWu, 2, hs));
    TRY(ox_put(c, "grad.w_down", dWd, 2, ds));
    if (!c->prec) return PHAX_OK;
    double *by = ox_dalloc(c, n * d), *bx = ox_dalloc(c, n * d), *bg = ox_dalloc(c, (size_t)hid * d),
           *bu = ox_dalloc(c, (size_t)hid * d), *bd = ox_dalloc(c, (size_t)hid * d);
    TRYP(by && bx && bg && bu && bd);
    TRY(phax_naive_swiglu(c->prec, by, bx, bg, bu, bd, gy, x, Wg, Wu, Wd, n, d, hid));
    TRY(ox_put_base(c, "y", by));
    TRY(ox_put_base(c, "grad.x", bx));
    TRY(ox_put_base(c, "grad.w_gate", bg));
    TRY(ox_put_base(c, "grad.w_up", bu));
    return ox_put_base(c, "grad.w_down", bd);
}

int op_rope(octx *c) {
    int nx;
    int64_t xs[8];
    TRY(ox_shape_of(c, "x", 4, 4, &nx, xs));
    double base;
    long pos0;
    TRY(ox_attr_double(c, "rope_base", PHAX_ROPE_BASE, &base));
    TRY(ox_attr_long(c, "pos0", 0, 0, LONG_MAX / 2, &pos0));
    size_t n = ox_numel(4, xs);
    TRY(ox_budget(c, ox_smul(7, n)));  // x; written twice: y, dx, grad.y
    double *x = ox_getf(c, "x", 4, xs), *y = ox_dalloc(c, n), *dx = ox_dalloc(c, n);
    TRYP(x && y && dx);
    int B = (int)xs[0], T = (int)xs[1], H = (int)xs[2], dh = (int)xs[3];
    if (ref_rope_fwd(y, x, B, T, H, dh, base, pos0)) return phax_fail("%s: %s", c->path, phax_error());
    double *gy = ox_upstream(c, "y", 4, xs);
    TRYP(gy);
    TRY(ref_rope_bwd(dx, gy, B, T, H, dh, base, pos0));
    TRY(ox_put(c, "y", y, 4, xs));
    TRY(ox_put(c, "grad.x", dx, 4, xs));
    if (!c->prec) return PHAX_OK;
    double *by = ox_dalloc(c, n), *bx = ox_dalloc(c, n);
    TRYP(by && bx);
    TRY(phax_naive_rope(c->prec, by, bx, gy, x, B, T, H, dh, base, pos0));
    TRY(ox_put_base(c, "y", by));
    return ox_put_base(c, "grad.x", bx);
}

static const char *const SCORES[] = {"dot", "cosine", NULL};

int op_attention(octx *c) {
    int nq, nk, nv;
    int64_t qs[8], ks[8], vs[8];
    TRY(ox_shape_of(c, "q", 4, 4, &nq, qs));
    TRY(ox_shape_of(c, "k", 4, 4, &nk, ks));
    TRY(ox_shape_of(c, "v", 4, 4, &nv, vs));
    int B = (int)qs[0], T = (int)qs[1];
    if (ks[0] != B || ks[1] != T || vs[0] != B || vs[1] != T || ks[2] != vs[2] || ks[3] != qs[3])
        return phax_fail("%s: q (B,T,Hq,dh), k (B,T,Hkv,dh), v (B,T,Hkv,dv) do not agree", c->path);
    phax_attn_cfg a = phax_attn_cfg_default((int)qs[2], (int)ks[2], (int)qs[3]);
    a.dv = (int)vs[3];
    int score;
    TRY(ox_attr_choice(c, "score", SCORES, 0, &score));
    a.score = score ? PHAX_SCORE_COSINE : PHAX_SCORE_DOT;
    TRY(ox_attr_int(c, "window", 0, 0, INT_MAX, &a.window));
    TRY(ox_attr_int(c, "rope", 1, 0, 1, &a.rope));
    TRY(ox_attr_double(c, "rope_base", PHAX_ROPE_BASE, &a.rope_base));
    TRY(ox_attr_long(c, "pos0", 0, 0, LONG_MAX / 2, &a.pos0));
    if (phax_attn_cfg_check(&a)) return phax_fail("%s: %s", c->path, phax_error());
    if (!a.rope && (ox_meta(c, "rope_base") || ox_meta(c, "pos0")))
        return phax_fail("%s: attribute '%s' is given but rope is 0 (it is used only with rope=1)", c->path,
                         ox_meta(c, "rope_base") ? "rope_base" : "pos0");
    if (!score && phax_st_find(&c->in, "logscale"))
        return phax_fail("%s: tensor 'logscale' is given but score is 'dot' (it is used only with score=cosine)",
                         c->path);
    int64_t ls[1] = {a.Hq}, ys[4] = {B, T, a.Hq, a.dv};
    {  // q, k, v, logscale; written twice: y, dq, dk, dv, dlogscale, grad.y; the ref kernels'
       // scratch: normalised/rotated q and k and their gradients, and rows of T
        size_t nq = ox_numel(4, qs), nk = ox_numel(4, ks), nv = ox_numel(4, vs), ny = ox_numel(4, ys);
        size_t in = ox_sadd(ox_sadd(nq, nk), ox_sadd(nv, (size_t)a.Hq));
        size_t x = ox_sadd(ox_sadd(ox_smul(3, in), ox_smul(4, ny)), ox_sadd(ox_smul(2, ox_sadd(nq, nk)), ox_smul(3, (size_t)T)));
        TRY(ox_budget_check_alt(c, x, x, x));  // phax check: a second baseline (D as Σ p dp and as y·g)
    }
    double *q = ox_getf(c, "q", 4, qs), *k = ox_getf(c, "k", 4, ks), *v = ox_getf(c, "v", 4, vs);
    double *l = score ? ox_getf(c, "logscale", 1, ls) : NULL;
    TRYP(q && k && v && (l || !score));
    double *y = ox_dalloc(c, ox_numel(4, ys)), *dq = ox_dalloc(c, ox_numel(4, qs)), *dk = ox_dalloc(c, ox_numel(4, ks)),
           *dv = ox_dalloc(c, ox_numel(4, vs)), *dl = ox_dalloc(c, a.Hq);
    TRYP(y && dq && dk && dv && dl);
    // Diagnosis variants (phax check): the interleaved RoPE pairing is phax's on q and k with each
    // head's coordinates permuted (2i → i, 2i+1 → i + dh/2: the dot products do not change), and
    // scores scaled by s are dot scores on s·q (cosine: logscale + ln s).
    int il = c->var && c->var->rope_interleaved && a.rope && a.dh % 2 == 0;
    double sc = c->var && c->var->score_scale > 0 ? c->var->score_scale : 1.0;
    if (il || sc != 1.0) {
        double *q2 = ox_dalloc(c, ox_numel(4, qs)), *k2 = ox_dalloc(c, ox_numel(4, ks)), *l2 = score ? ox_dalloc(c, a.Hq) : NULL;
        TRYP(q2 && k2 && (l2 || !score));
        int dh = a.dh, h2 = dh / 2;
        for (size_t r = 0; r < ox_numel(4, qs) / (size_t)dh; r++)
            for (int i = 0; i < dh; i++) q2[r * dh + (il ? (i % 2 ? h2 + i / 2 : i / 2) : i)] = q[r * dh + i] * (score ? 1 : sc);
        for (size_t r = 0; r < ox_numel(4, ks) / (size_t)dh; r++)
            for (int i = 0; i < dh; i++) k2[r * dh + (il ? (i % 2 ? h2 + i / 2 : i / 2) : i)] = k[r * dh + i];
        for (int h = 0; score && h < a.Hq; h++) l2[h] = l[h] + log(sc);
        TRY(ref_attention_fwd(y, q2, k2, v, l2, B, T, &a));
        double *gy = ox_upstream(c, "y", 4, ys);
        TRYP(gy);
        double *dq2 = ox_dalloc(c, ox_numel(4, qs)), *dk2 = ox_dalloc(c, ox_numel(4, ks));
        TRYP(dq2 && dk2);
        TRY(ref_attention_bwd(dq2, dk2, dv, score ? dl : NULL, gy, q2, k2, v, l2, B, T, &a));
        for (size_t r = 0; r < ox_numel(4, qs) / (size_t)dh; r++)  // back through the permutation and scale
            for (int i = 0; i < dh; i++) dq[r * dh + i] = dq2[r * dh + (il ? (i % 2 ? h2 + i / 2 : i / 2) : i)] * (score ? 1 : sc);
        for (size_t r = 0; r < ox_numel(4, ks) / (size_t)dh; r++)
            for (int i = 0; i < dh; i++) dk[r * dh + i] = dk2[r * dh + (il ? (i % 2 ? h2 + i / 2 : i / 2) : i)];
        TRY(ox_put(c, "y", y, 4, ys));
        TRY(ox_put(c, "grad.q", dq, 4, qs));
        TRY(ox_put(c, "grad.k", dk, 4, ks));
        TRY(ox_put(c, "grad.v", dv, 4, vs));
        return score ? ox_put(c, "grad.logscale", dl, 1, ls) : PHAX_OK;
    }
    TRY(ref_attention_fwd(y, q, k, v, l, B, T, &a));
    double *gy = ox_upstream(c, "y", 4, ys);
    TRYP(gy);
    TRY(ref_attention_bwd(dq, dk, dv, score ? dl : NULL, gy, q, k, v, l, B, T, &a));
    TRY(ox_put(c, "y", y, 4, ys));
    TRY(ox_put(c, "grad.q", dq, 4, qs));
    TRY(ox_put(c, "grad.k", dk, 4, ks));
    TRY(ox_put(c, "grad.v", dv, 4, vs));
    if (score) TRY(ox_put(c, "grad.logscale", dl, 1, ls));
    if (!c->prec) return PHAX_OK;
    double *by = ox_dalloc(c, ox_numel(4, ys)), *bq = ox_dalloc(c, ox_numel(4, qs)), *bk = ox_dalloc(c, ox_numel(4, ks)),
           *bv = ox_dalloc(c, ox_numel(4, vs)), *bl = ox_dalloc(c, a.Hq);
    TRYP(by && bq && bk && bv && bl);
    TRY(phax_naive_attention(c->prec, by, bq, bk, bv, score ? bl : NULL, gy, q, k, v, l, B, T, &a));
    TRY(ox_put_base(c, "y", by));
    TRY(ox_put_base(c, "grad.q", bq));
    TRY(ox_put_base(c, "grad.k", bk));
    TRY(ox_put_base(c, "grad.v", bv));
    if (score) TRY(ox_put_base(c, "grad.logscale", bl));
    // FlashAttention's backward forms D = rowsum(y ⊙ g) where the naive one forms Σ p dp: at
    // TF32 the two differ by dp's operand rounding, which only the second cancels (check/
    // attention.c); its baseline too, the bound the larger.
    double *ay = ox_dalloc(c, ox_numel(4, ys)), *aq = ox_dalloc(c, ox_numel(4, qs)), *ak = ox_dalloc(c, ox_numel(4, ks)),
           *av = ox_dalloc(c, ox_numel(4, vs)), *al = ox_dalloc(c, a.Hq);
    TRYP(ay && aq && ak && av && al);
    TRY(phax_naive_attention_alg(c->prec, ay, aq, ak, av, score ? al : NULL, gy, q, k, v, l, B, T, &a, 1));
    TRY(ox_put_alt(c, "grad.q", aq));  // y and grad.v do not depend on D: the same as the first's
    TRY(ox_put_alt(c, "grad.k", ak));
    return score ? ox_put_alt(c, "grad.logscale", al) : PHAX_OK;
}

// Λ and C of the DSS kernel: lambda_re, lambda_im (N); c_re, c_im (H, N).
static int get_dss(octx *c, double **Lre, double **Lim, double **Cre, double **Cim, int *H, int *N) {
    int nd;
    int64_t cs[8];
    TRY(ox_shape_of(c, "c_re", 2, 2, &nd, cs));
    *H = (int)cs[0], *N = (int)cs[1];
    int64_t ns[1] = {*N};
    *Lre = ox_getf(c, "lambda_re", 1, ns), *Lim = ox_getf(c, "lambda_im", 1, ns);
    *Cre = ox_getf(c, "c_re", 2, cs), *Cim = ox_getf(c, "c_im", 2, cs);
    return *Lre && *Lim && *Cre && *Cim ? PHAX_OK : PHAX_ERR;
}

static int put_dss_grads(octx *c, const double *dLre, const double *dLim, const double *dCre,
                         const double *dCim, int H, int N) {
    int64_t ns[1] = {N}, cs[2] = {H, N};
    TRY(ox_put(c, "grad.lambda_re", dLre, 1, ns));
    TRY(ox_put(c, "grad.lambda_im", dLim, 1, ns));
    TRY(ox_put(c, "grad.c_re", dCre, 2, cs));
    return ox_put(c, "grad.c_im", dCim, 2, cs);
}

int op_dss_kernel(octx *c) {
    double *Lre, *Lim, *Cre, *Cim;
    int H, N, T, nd;
    int64_t cs[8];
    TRY(ox_attr_int(c, "T", 0, 0, ORACLE_MAX_T, &T));
    if (T < 1) return phax_fail("%s: attribute 'T' (kernel length) must be given and >= 1", c->path);
    TRY(ox_shape_of(c, "c_re", 2, 2, &nd, cs));
    {  // Λ, C; written twice: k, the gradients of Λ and C, grad.k
        size_t hn = ox_numel(2, cs), hk = ox_smul((size_t)cs[0], (size_t)T);
        TRY(ox_budget(c, ox_sadd(ox_sadd(ox_smul(6, hn), ox_smul(4, hk)), ox_smul(6, (size_t)cs[1]))));
    }
    TRY(get_dss(c, &Lre, &Lim, &Cre, &Cim, &H, &N));
    int64_t ks[2] = {H, T};
    double *K = ox_dalloc(c, (size_t)H * T), *dLre = ox_dalloc(c, N), *dLim = ox_dalloc(c, N),
           *dCre = ox_dalloc(c, (size_t)H * N), *dCim = ox_dalloc(c, (size_t)H * N);
    TRYP(K && dLre && dLim && dCre && dCim);
    ref_dss_kernel_fwd(K, Lre, Lim, Cre, Cim, H, N, T);
    double *gk = ox_upstream(c, "k", 2, ks);
    TRYP(gk);
    ref_dss_kernel_bwd(dLre, dLim, dCre, dCim, gk, Lre, Lim, Cre, Cim, H, N, T);
    TRY(ox_put(c, "k", K, 2, ks));
    TRY(put_dss_grads(c, dLre, dLim, dCre, dCim, H, N));
    if (!c->prec) return PHAX_OK;
    double *bk = ox_dalloc(c, (size_t)H * T), *bLr = ox_dalloc(c, N), *bLi = ox_dalloc(c, N), *bCr = ox_dalloc(c, (size_t)H * N),
           *bCi = ox_dalloc(c, (size_t)H * N);
    TRYP(bk && bLr && bLi && bCr && bCi);
    TRY(phax_naive_dss_kernel(c->prec, bk, bLr, bLi, bCr, bCi, gk, Lre, Lim, Cre, Cim, H, N, T));
    TRY(ox_put_base(c, "k", bk));
    TRY(ox_put_base(c, "grad.lambda_re", bLr));
    TRY(ox_put_base(c, "grad.lambda_im", bLi));
    TRY(ox_put_base(c, "grad.c_re", bCr));
    return ox_put_base(c, "grad.c_im", bCi);
}

static int op_ssm(octx *c, int recurrent) {
    int nu;
    int64_t us[8];
    TRY(ox_shape_of(c, "u", 3, 3, &nu, us));
    int B = (int)us[0], T = (int)us[1], H = (int)us[2], N = 0;
    int64_t hs[1] = {H}, ks[2] = {H, T};
    {  // u, d and (conv) k or (recurrent) Λ, C; written twice: y, du, dd, the other gradients, grad.y;
       // the recurrent backward's scratch of T complex numbers
        size_t nu = ox_numel(3, us), other = ox_smul((size_t)H, (size_t)T);
        if (recurrent) {
            int nd;
            int64_t cs[8];
            TRY(ox_shape_of(c, "c_re", 2, 2, &nd, cs));
            other = ox_sadd(ox_smul(2, ox_numel(2, cs)), ox_smul(2, (size_t)cs[1]));
        }
        TRY(ox_budget(c, ox_sadd(ox_sadd(ox_smul(7, nu), ox_smul(3, other)), ox_sadd(ox_smul(3, (size_t)H), ox_smul(2, (size_t)T)))));
    }
    double *u = ox_getf(c, "u", 3, us), *D = ox_getf(c, "d", 1, hs);
    TRYP(u && D);
    double *y = ox_dalloc(c, ox_numel(3, us)), *du = ox_dalloc(c, ox_numel(3, us)), *dD = ox_dalloc(c, H);
    TRYP(y && du && dD);
    if (!recurrent) {
        double *K = ox_getf(c, "k", 2, ks), *dK = ox_dalloc(c, (size_t)H * T);
        TRYP(K && dK);
        ref_ssm_conv_fwd(y, u, K, D, B, T, H);
        double *gy = ox_upstream(c, "y", 3, us);
        TRYP(gy);
        ref_ssm_conv_bwd(du, dK, dD, gy, u, K, D, B, T, H);
        TRY(ox_put(c, "grad.k", dK, 2, ks));
        if (c->prec) {
            double *by = ox_dalloc(c, ox_numel(3, us)), *bu = ox_dalloc(c, ox_numel(3, us)), *bk = ox_dalloc(c, (size_t)H * T),
                   *bd = ox_dalloc(c, H);
            TRYP(by && bu && bk && bd);
            TRY(phax_naive_ssm_conv(c->prec, by, bu, bk, bd, gy, u, K, D, B, T, H));
            TRY(ox_put(c, "y", y, 3, us));
            TRY(ox_put(c, "grad.u", du, 3, us));
            TRY(ox_put(c, "grad.d", dD, 1, hs));
            TRY(ox_put_base(c, "y", by));
            TRY(ox_put_base(c, "grad.u", bu));
            TRY(ox_put_base(c, "grad.k", bk));
            return ox_put_base(c, "grad.d", bd);
        }
    } else {
        double *Lre, *Lim, *Cre, *Cim;
        int H2;
        TRY(get_dss(c, &Lre, &Lim, &Cre, &Cim, &H2, &N));
        if (H2 != H) return phax_fail("%s: c_re has %d channels, u has %d", c->path, H2, H);
        double *dLre = ox_dalloc(c, N), *dLim = ox_dalloc(c, N), *dCre = ox_dalloc(c, (size_t)H * N),
               *dCim = ox_dalloc(c, (size_t)H * N);
        TRYP(dLre && dLim && dCre && dCim);
        ref_ssm_recurrent_fwd(y, u, Lre, Lim, Cre, Cim, D, B, T, H, N);
        double *gy = ox_upstream(c, "y", 3, us);
        TRYP(gy);
        TRY(ref_ssm_recurrent_bwd(du, dLre, dLim, dCre, dCim, dD, gy, u, Lre, Lim, Cre, Cim, D, B, T, H, N));
        TRY(put_dss_grads(c, dLre, dLim, dCre, dCim, H, N));
        if (c->prec) {  // the baseline: the same function in its convolution form (kernel, then conv)
            size_t nk = (size_t)H * T, nc = (size_t)H * N;
            double *bk = ox_dalloc(c, nk), *bgk = ox_dalloc(c, nk), *by = ox_dalloc(c, ox_numel(3, us)),
                   *bu = ox_dalloc(c, ox_numel(3, us)), *bd = ox_dalloc(c, H), *bLr = ox_dalloc(c, N), *bLi = ox_dalloc(c, N),
                   *bCr = ox_dalloc(c, nc), *bCi = ox_dalloc(c, nc);
            TRYP(bk && bgk && by && bu && bd && bLr && bLi && bCr && bCi);
            TRY(phax_naive_dss_kernel(c->prec, bk, bLr, bLi, bCr, bCi, bgk, Lre, Lim, Cre, Cim, H, N, T));
            TRY(phax_naive_ssm_conv(c->prec, by, bu, bgk, bd, gy, u, bk, D, B, T, H));
            double *k2 = ox_dalloc(c, nk);
            TRYP(k2);
            TRY(phax_naive_dss_kernel(c->prec, k2, bLr, bLi, bCr, bCi, bgk, Lre, Lim, Cre, Cim, H, N, T));
            TRY(ox_put(c, "y", y, 3, us));
            TRY(ox_put(c, "grad.u", du, 3, us));
            TRY(ox_put(c, "grad.d", dD, 1, hs));
            TRY(ox_put_base(c, "y", by));
            TRY(ox_put_base(c, "grad.u", bu));
            TRY(ox_put_base(c, "grad.d", bd));
            TRY(ox_put_base(c, "grad.lambda_re", bLr));
            TRY(ox_put_base(c, "grad.lambda_im", bLi));
            TRY(ox_put_base(c, "grad.c_re", bCr));
            return ox_put_base(c, "grad.c_im", bCi);
        }
    }
    TRY(ox_put(c, "y", y, 3, us));
    TRY(ox_put(c, "grad.u", du, 3, us));
    return ox_put(c, "grad.d", dD, 1, hs);
}
int op_ssm_conv(octx *c) { return op_ssm(c, 0); }
int op_ssm_recurrent(octx *c) { return op_ssm(c, 1); }

static const char *const FORMS[] = {"parallel", "recurrent", NULL};
static const char *const GRADS[] = {"exact", "stopgrad-normalizer", NULL};  // PHAX_MLSTM_GRAD_* order

// The six outputs of the mLSTM op given to a baseline setter (put_base, put_alt) in one go.
static int put_mlstm(octx *c, int (*set)(octx *, const char *, double *), double *x[6]) {
    static const char *const names[6] = {"h", "grad.q", "grad.k", "grad.v", "grad.igate", "grad.fgate"};
    for (int i = 0; i < 6; i++) TRY(set(c, names[i], x[i]));
    return PHAX_OK;
}

int op_mlstm(octx *c) {
    int nq, nv;
    int64_t qs[8], vs[8];
    TRY(ox_shape_of(c, "q", 4, 4, &nq, qs));
    TRY(ox_shape_of(c, "v", 4, 4, &nv, vs));
    int B = (int)qs[0], T = (int)qs[1], H = (int)qs[2], dqk = (int)qs[3], dv = (int)vs[3];
    if (vs[0] != B || vs[1] != T || vs[2] != H) return phax_fail("%s: v must be (B, T, H, dv) with q's B, T, H", c->path);
    int form;
    double eps, m0;
    TRY(ox_attr_choice(c, "form", FORMS, 0, &form));
    TRY(ox_attr_double(c, "eps", PHAX_MLSTM_EPS, &eps));
    TRY(ox_attr_double(c, "m0", 0.0, &m0));
    if (!(eps >= 0)) return phax_fail("%s: attribute 'eps' must be >= 0", c->path);
    if (form == 0 && ox_meta(c, "m0"))
        return phax_fail("%s: attribute 'm0' is given but form is 'parallel' (m0 is the recurrent form's initial "
                         "stabiliser)", c->path);
    int grad;  // the gradient convention (phax/ref.h): the parallel form's only
    TRY(ox_attr_choice(c, "grad", GRADS, 0, &grad));
    if (form != 0 && grad != PHAX_MLSTM_GRAD_EXACT)
        return phax_fail("%s: attribute 'grad' = 'stopgrad-normalizer' is for form 'parallel' (the recurrent form's "
                         "gradient is the exact one)", c->path);
    int64_t gs[3] = {B, T, H};
    {  // q, k, v, gates; written twice: h, their gradients, grad.h; scratch: the recurrent
       // form's tape of T+1 states (dqk x dv) per sequence, or the parallel form's rows of T
        size_t nqk = ox_numel(4, qs), nvv = ox_numel(4, vs), ng = ox_numel(3, gs);
        size_t in = ox_sadd(ox_sadd(ox_smul(2, nqk), nvv), ox_smul(2, ng)), T1 = (size_t)T + 1;
        size_t tape = form ? ox_smul(T1, ox_sadd(ox_smul((size_t)dqk, (size_t)dv), ox_sadd((size_t)dqk, 6)))
                           : ox_smul(8, (size_t)T);
        size_t x = ox_sadd(ox_sadd(ox_smul(3, in), ox_smul(4, nvv)), ox_sadd(tape, ox_smul(3, ox_smul((size_t)dqk, (size_t)dv))));
        // phax check holds two baselines (the parallel form: direct and cumulative-sum decays;
        // the recurrent form: its own and the chunkwise way, rows of T)
        TRY(ox_budget_check_alt(c, x, x, x));
    }
    double *q = ox_getf(c, "q", 4, qs), *k = ox_getf(c, "k", 4, qs), *v = ox_getf(c, "v", 4, vs),
           *ig = ox_getf(c, "igate", 3, gs), *fg = ox_getf(c, "fgate", 3, gs);
    TRYP(q && k && v && ig && fg);
    size_t nqk = ox_numel(4, qs), nvv = ox_numel(4, vs), ng = ox_numel(3, gs);
    double *h = ox_dalloc(c, nvv), *dq = ox_dalloc(c, nqk), *dk = ox_dalloc(c, nqk), *dvv = ox_dalloc(c, nvv),
           *di = ox_dalloc(c, ng), *df = ox_dalloc(c, ng);
    TRYP(h && dq && dk && dvv && di && df);
    if (form == 0) TRY(ref_mlstm_parallel_fwd(h, q, k, v, ig, fg, B, T, H, dqk, dv, eps));
    else TRY(ref_mlstm_recurrent_fwd(h, q, k, v, ig, fg, B, T, H, dqk, dv, eps, m0));
    double *gh = ox_upstream(c, "h", 4, vs);
    TRYP(gh);
    if (form == 0) TRY(ref_mlstm_parallel_bwd_grad(dq, dk, dvv, di, df, gh, q, k, v, ig, fg, B, T, H, dqk, dv, eps, grad));
    else TRY(ref_mlstm_recurrent_bwd(dq, dk, dvv, di, df, gh, q, k, v, ig, fg, B, T, H, dqk, dv, eps, m0));
    TRY(ox_put(c, "h", h, 4, vs));
    TRY(ox_put(c, "grad.q", dq, 4, qs));
    TRY(ox_put(c, "grad.k", dk, 4, qs));
    TRY(ox_put(c, "grad.v", dvv, 4, vs));
    TRY(ox_put(c, "grad.igate", di, 3, gs));
    TRY(ox_put(c, "grad.fgate", df, 3, gs));
    if (!c->prec) return PHAX_OK;
    double *bh = ox_dalloc(c, nvv), *bq = ox_dalloc(c, nqk), *bk = ox_dalloc(c, nqk), *bv = ox_dalloc(c, nvv),
           *bi = ox_dalloc(c, ng), *bf = ox_dalloc(c, ng);
    TRYP(bh && bq && bk && bv && bi && bf);
    if (form == 0) TRY(phax_naive_mlstm_grad(c->prec, bh, bq, bk, bv, bi, bf, gh, q, k, v, ig, fg, B, T, H, dqk, dv, eps, 0, grad));
    else TRY(phax_naive_mlstm_recurrent(c->prec, bh, bq, bk, bv, bi, bf, gh, q, k, v, ig, fg, B, T, H, dqk, dv, eps, m0));
    TRY(put_mlstm(c, ox_put_base, (double *[6]){bh, bq, bk, bv, bi, bf}));
    // The second baseline, the bound the larger (check/mlstm.c): the parallel form is also
    // written with the decays as differences of cumulative sums, whose rounding grows with T;
    // the recurrent form as a chunkwise kernel computes it (one chunk of T), whose sums run over
    // the chunk where the recurrent form's run over dqk.
    double *ah = ox_dalloc(c, nvv), *aq = ox_dalloc(c, nqk), *ak = ox_dalloc(c, nqk), *av = ox_dalloc(c, nvv),
           *ai = ox_dalloc(c, ng), *af = ox_dalloc(c, ng);
    TRYP(ah && aq && ak && av && ai && af);
    if (form != 0) TRY(phax_naive_mlstm_chunkwise(c->prec, ah, aq, ak, av, ai, af, gh, q, k, v, ig, fg, B, T, H, dqk, dv, eps, m0));
    else TRY(phax_naive_mlstm_grad(c->prec, ah, aq, ak, av, ai, af, gh, q, k, v, ig, fg, B, T, H, dqk, dv, eps, 1, grad));
    return put_mlstm(c, ox_put_alt, (double *[6]){ah, aq, ak, av, ai, af});
}

// Gated DeltaNet cell (docs/spec.md §2.13): the recurrent form. The state tensors are
// flash-linear-attention's transposed layout (B, H, dk, dv).
int op_gdn(octx *c) {
    int nq, nv;
    int64_t qs[8], vs[8];
    TRY(ox_shape_of(c, "q", 4, 4, &nq, qs));
    TRY(ox_shape_of(c, "v", 4, 4, &nv, vs));
    int B = (int)qs[0], T = (int)qs[1], H = (int)qs[2], dk = (int)qs[3], dv = (int)vs[3];
    if (vs[0] != B || vs[1] != T || vs[2] != H) return phax_fail("%s: v must be (B, T, H, dv) with q's B, T, H", c->path);
    phax_gdn_cfg cfg = {dk > 0 ? 1 / sqrt((double)dk) : 1, 1};
    TRY(ox_attr_double(c, "scale", cfg.scale, &cfg.scale));
    TRY(ox_attr_int(c, "qk_l2norm", 1, 0, 1, &cfg.qk_l2norm));
    int64_t gs[3] = {B, T, H}, ss[4] = {B, H, dk, dv};
    int has_s0 = phax_st_find(&c->in, "initial_state") != NULL;
    {  // q, k, v, g, beta (and s0); written twice: o, the final state, every gradient, the
       // upstream ones; scratch: the tape of T+1 states (dk x dv) per sequence, five vectors
        size_t nqk = ox_numel(4, qs), nvv = ox_numel(4, vs), ng = ox_numel(3, gs), ns = ox_numel(4, ss);
        size_t in = ox_sadd(ox_sadd(ox_smul(2, nqk), nvv), ox_sadd(ox_smul(2, ng), ns));
        size_t tape = ox_sadd(ox_smul((size_t)T + 1, ox_smul((size_t)dk, (size_t)dv)),
                              ox_sadd(ox_smul(2, ox_smul((size_t)dk, (size_t)dv)), ox_smul(5, (size_t)dk + (size_t)dv)));
        size_t x = ox_sadd(ox_sadd(ox_smul(3, in), ox_smul(4, ox_sadd(nvv, ns))), tape);
        // phax check: the recurrent baseline as much again; the chunkwise one its chunks' start
        // states, the chunk's q̂, k̂, u, r and its four C × C tables
        size_t C = (size_t)(T < PHAX_GDN_CHECK_CHUNK ? (T > 0 ? T : 1) : PHAX_GDN_CHECK_CHUNK);
        size_t alt = ox_sadd(ox_sadd(ox_smul(4, ox_sadd(nvv, ns)), ox_smul(2, in)),
                             ox_sadd(ox_smul((size_t)T / C + 2, ox_smul((size_t)dk, (size_t)dv)),
                                     ox_smul(C, ox_sadd(ox_smul(4, C), ox_smul(4, (size_t)dk + (size_t)dv)))));
        TRY(ox_budget_check_alt(c, x, x, alt));
    }
    double *q = ox_getf(c, "q", 4, qs), *k = ox_getf(c, "k", 4, qs), *v = ox_getf(c, "v", 4, vs),
           *g = ox_getf(c, "g", 3, gs), *beta = ox_getf(c, "beta", 3, gs);
    double *s0 = has_s0 ? ox_getf(c, "initial_state", 4, ss) : NULL;
    TRYP(q && k && v && g && beta && (s0 || !has_s0));
    size_t nqk = ox_numel(4, qs), nvv = ox_numel(4, vs), ng = ox_numel(3, gs), ns = ox_numel(4, ss);
    double *o = ox_dalloc(c, nvv), *sT = ox_dalloc(c, ns), *dq = ox_dalloc(c, nqk), *dk_ = ox_dalloc(c, nqk),
           *dvv = ox_dalloc(c, nvv), *dg = ox_dalloc(c, ng), *db = ox_dalloc(c, ng), *ds0 = ox_dalloc(c, ns);
    TRYP(o && sT && dq && dk_ && dvv && dg && db && ds0);
    TRY(ref_gdn_recurrent_fwd(o, sT, q, k, v, g, beta, s0, B, T, H, dk, dv, &cfg));
    double *go = ox_upstream(c, "o", 4, vs);
    TRYP(go);
    double *gs_T = ox_upstream(c, "final_state", 4, ss);
    TRYP(gs_T);
    TRY(ref_gdn_recurrent_bwd(dq, dk_, dvv, dg, db, has_s0 ? ds0 : NULL, go, gs_T, q, k, v, g, beta, s0, B, T, H, dk, dv,
                              &cfg));
    TRY(ox_put(c, "o", o, 4, vs));
    TRY(ox_put(c, "final_state", sT, 4, ss));
    TRY(ox_put(c, "grad.q", dq, 4, qs));
    TRY(ox_put(c, "grad.k", dk_, 4, qs));
    TRY(ox_put(c, "grad.v", dvv, 4, vs));
    TRY(ox_put(c, "grad.g", dg, 3, gs));
    TRY(ox_put(c, "grad.beta", db, 3, gs));
    if (has_s0) TRY(ox_put(c, "grad.initial_state", ds0, 4, ss));
    if (!c->prec) return PHAX_OK;
    // The baselines (check/gdn.c): the recurrent form, and the chunkwise form at fla's chunk of 64
    // (sums over the chunk where the recurrent form's run over dk), the bound the larger.
    static const char *const names[8] = {"o", "final_state", "grad.q", "grad.k", "grad.v", "grad.g", "grad.beta",
                                         "grad.initial_state"};
    for (int alg = 0; alg < 2; alg++) {
        double *x[8] = {ox_dalloc(c, nvv), ox_dalloc(c, ns), ox_dalloc(c, nqk), ox_dalloc(c, nqk),
                        ox_dalloc(c, nvv), ox_dalloc(c, ng), ox_dalloc(c, ng), ox_dalloc(c, ns)};
        for (int i = 0; i < 8; i++) TRYP(x[i]);
        TRY(phax_naive_gdn(c->prec, x[0], x[1], x[2], x[3], x[4], x[5], x[6], has_s0 ? x[7] : NULL, go, gs_T, q, k, v,
                           g, beta, s0, B, T, H, dk, dv, &cfg, alg ? PHAX_GDN_CHECK_CHUNK : 0));
        for (int i = 0; i < 7 + has_s0; i++) TRY((alg ? ox_put_alt : ox_put_base)(c, names[i], x[i]));
    }
    return PHAX_OK;
}

int op_mix(octx *c) {
    int nb_;
    int64_t bs[8];
    TRY(ox_shape_of(c, "branches", 2, 8, &nb_, bs));
    int nb = (int)bs[0];
    size_t n = ox_numel(nb_ - 1, bs + 1);
    int64_t ps[1] = {nb};
    // branches, p; written twice: y, dbranches, dp, grad.y
    TRY(ox_budget(c, ox_sadd(ox_smul(3, ox_numel(nb_, bs)), ox_sadd(ox_smul(4, n), 3 * (size_t)nb))));
    double *b = ox_getf(c, "branches", nb_, bs), *p = ox_getf(c, "p", 1, ps);
    TRYP(b && p);
    double *y = ox_dalloc(c, n), *db = ox_dalloc(c, ox_numel(nb_, bs)), *dp = ox_dalloc(c, nb);
    TRYP(y && db && dp);
    ref_mix_fwd(y, b, p, nb, n);
    double *gy = ox_upstream(c, "y", nb_ - 1, bs + 1);
    TRYP(gy);
    ref_mix_bwd(db, dp, gy, b, p, nb, n);
    TRY(ox_put(c, "y", y, nb_ - 1, bs + 1));
    TRY(ox_put(c, "grad.branches", db, nb_, bs));
    TRY(ox_put(c, "grad.p", dp, 1, ps));
    if (!c->prec) return PHAX_OK;
    double *by = ox_dalloc(c, n), *bb = ox_dalloc(c, ox_numel(nb_, bs)), *bp = ox_dalloc(c, nb);
    TRYP(by && bb && bp);
    TRY(phax_naive_mix(c->prec, by, bb, bp, gy, b, p, nb, n));
    TRY(ox_put_base(c, "y", by));
    TRY(ox_put_base(c, "grad.branches", bb));
    return ox_put_base(c, "grad.p", bp);
}

int op_cross_entropy(octx *c) {
    int nl, nt;
    int64_t ls[8], ts[8];
    TRY(ox_shape_of(c, "logits", 1, 8, &nl, ls));
    TRY(ox_shape_of(c, "targets", 0, 7, &nt, ts));
    size_t n;
    int V;
    ox_rows_cols(nl, ls, &n, &V);
    if (nt != nl - 1 || memcmp(ts, ls, (size_t)nt * sizeof *ts))
        return phax_fail("%s: targets must have the shape of logits without its last dim", c->path);
    TRY(ox_budget(c, ox_sadd(ox_smul(3, ox_numel(nl, ls)), n / 2 + 8)));  // logits, targets; written twice: dlogits
    double *x = ox_getf(c, "logits", nl, ls);
    int32_t *tg = ox_geti(c, "targets", nt, ts);
    TRYP(x && tg);
    double loss, *dx = ox_dalloc(c, ox_numel(nl, ls));
    TRYP(dx);
    if (ref_cross_entropy_fwd(&loss, x, tg, n, V)) return phax_fail("%s: %s", c->path, phax_error());
    double *gl = ox_upstream(c, "loss", 0, NULL);
    TRYP(gl);
    TRY(ref_cross_entropy_bwd(dx, *gl, x, tg, n, V));
    TRY(ox_put(c, "loss", &loss, 0, NULL));
    TRY(ox_put(c, "grad.logits", dx, nl, ls));
    if (!c->prec) return PHAX_OK;
    double *bl = ox_dalloc(c, 1), *bx = ox_dalloc(c, ox_numel(nl, ls));
    TRYP(bl && bx);
    TRY(phax_naive_cross_entropy(c->prec, bl, bx, *gl, x, tg, n, V));
    TRY(ox_put_base(c, "loss", bl));
    return ox_put_base(c, "grad.logits", bx);
}

int op_adamw(octx *c) {
    int np;
    int64_t ps[8];
    TRY(ox_shape_of(c, "param", 0, 8, &np, ps));
    phax_adamw_cfg a = phax_adamw_cfg_default();
    long step;
    int decay;
    TRY(ox_attr_double(c, "lr", a.lr, &a.lr));
    TRY(ox_attr_double(c, "beta1", a.beta1, &a.beta1));
    TRY(ox_attr_double(c, "beta2", a.beta2, &a.beta2));
    TRY(ox_attr_double(c, "eps", a.eps, &a.eps));
    TRY(ox_attr_double(c, "weight_decay", a.weight_decay, &a.weight_decay));
    TRY(ox_attr_double(c, "clip", a.clip, &a.clip));
    TRY(ox_attr_long(c, "step", 1, 1, LONG_MAX, &step));
    TRY(ox_attr_int(c, "decay", 1, 0, 1, &decay));
    size_t n = ox_numel(np, ps);
    TRY(ox_budget(c, ox_smul(7, n)));  // param, gradient, m, v; written again: param, m, v
    double *p = ox_getf(c, "param", np, ps), *g = ox_getf(c, "gradient", np, ps);
    double *m = phax_st_find(&c->in, "exp_avg") ? ox_getf(c, "exp_avg", np, ps) : ox_dalloc(c, n);
    double *v = phax_st_find(&c->in, "exp_avg_sq") ? ox_getf(c, "exp_avg_sq", np, ps) : ox_dalloc(c, n);
    TRYP(p && g && m && v);
    double *bp = NULL, *bm = NULL, *bv = NULL;
    if (c->prec) {  // the step updates p, m, v in place: the baseline starts from copies
        bp = ox_dalloc(c, n), bm = ox_dalloc(c, n), bv = ox_dalloc(c, n);
        TRYP(bp && bm && bv);
        memcpy(bp, p, n * sizeof *p), memcpy(bm, m, n * sizeof *m), memcpy(bv, v, n * sizeof *v);
    }
    ref_adamw_param t = {.p = p, .g = g, .m = m, .v = v, .n = n, .decay = decay};
    double gn;
    if (ref_adamw_step(&t, 1, &a, step, &gn)) return phax_fail("%s: %s", c->path, phax_error());
    TRY(ox_put(c, "param", p, np, ps));
    TRY(ox_put(c, "exp_avg", m, np, ps));
    TRY(ox_put(c, "exp_avg_sq", v, np, ps));
    TRY(ox_put(c, "grad_norm", &gn, 0, NULL));
    if (!c->prec) return PHAX_OK;
    double *bg = ox_dalloc(c, 1);
    TRYP(bg);
    TRY(phax_naive_adamw(c->prec, bp, bm, bv, bg, g, n, &a, step, decay));
    TRY(ox_put_base(c, "param", bp));
    TRY(ox_put_base(c, "exp_avg", bm));
    TRY(ox_put_base(c, "exp_avg_sq", bv));
    return ox_put_base(c, "grad_norm", bg);
}

// Float64 elements the ref model holds at once beyond its parameters, gradients and
// logits, for B x T tokens: the input of every layer kept for the backward, and one
// layer's activations and their gradients (a layer is recomputed in the backward).
// An estimate from above (measured peaks were 0.5-0.8 of it): 8 arrays of every
// per-token width a block has.
static size_t model_act_doubles(const phax_model_cfg *m, int B, int T) {
    size_t n = ox_smul((size_t)B, (size_t)T), d = (size_t)m->d_model;
    size_t hd = (size_t)m->head_dim, w = d;
    w = ox_sadd(w, ox_sadd((size_t)m->gss_expand, (size_t)m->gss_hidden));
    w = ox_sadd(w, ox_sadd((size_t)m->ffn_hidden, (size_t)m->ffn_aux_hidden));
    w = ox_sadd(w, ox_smul(hd, ox_sadd((size_t)m->n_heads, ox_smul(2, (size_t)m->n_kv_heads))));
    size_t per_token = ox_sadd(ox_smul(ox_sadd((size_t)m->n_layers, 4), d), ox_smul(8, w));
    return ox_sadd(ox_smul(n, per_token), ox_smul(4, ox_smul((size_t)m->gss_hidden, (size_t)T)));
}

int op_model(octx *c) {
    char b[256];
    const char *json = phax_st_meta(&c->in, "config");
    if (!json) return phax_fail("%s: metadata 'config' (the model's JSON config) is missing", c->path);
    phax_model_cfg cfg;
    char where[1100];
    snprintf(where, sizeof where, "%s: config", c->path);
    if (phax_model_cfg_from_json_str(&cfg, json, where)) return PHAX_ERR;
    int window;
    TRY(ox_attr_int(c, "window", -1, -1, INT_MAX, &window));
    if (phax_st_meta(&c->in, "window") && !phax_plan_takes_window(&cfg))
        return phax_fail("%s: attribute 'window' is given but the family is %s (it sets the SWAX family's SWA "
                         "window; %s uses the config's attn_window)", c->path, phax_family_name(cfg.family),
                         phax_family_name(cfg.family));
    int nt, ng;
    int64_t ts[8], gs[8];
    TRY(ox_shape_of(c, "tokens", 2, 2, &nt, ts));
    TRY(ox_shape_of(c, "targets", 2, 2, &ng, gs));
    if (gs[0] != ts[0] || gs[1] != ts[1]) return phax_fail("%s: targets must have the shape of tokens (B, T)", c->path);
    int B = (int)ts[0], T = (int)ts[1];
    // Every layer has parameters, so a config with more layers than IN has tensors
    // cannot match it: refuse before building a layout of that size.
    if (cfg.n_layers > c->in.n)
        return phax_fail("%s: config: n_layers (%d) is more than the file has tensors (%d)", c->path, cfg.n_layers,
                         c->in.n);
    // The file must hold exactly the config's parameters (each of its shape), tokens and
    // targets: checked on the header alone, before anything is allocated for the model.
    phax_layout L;
    if (phax_layout_build(&L, &cfg)) return phax_fail("%s: config: %s", c->path, phax_error());
    int rc = PHAX_OK;
    for (int i = 0; i < L.n && !rc; i++) {
        const phax_param_info *p = &L.p[i];
        const phax_st_tensor *t = phax_st_find(&c->in, p->name);
        if (!t) {
            rc = phax_fail("%s: no tensor '%s' (a parameter of this config; phax oracle model --example writes a "
                           "complete set)", c->path, p->name);
        } else if (t->ndim != p->ndim || memcmp(t->shape, p->shape, (size_t)p->ndim * sizeof *p->shape)) {
            char want[96];
            int o = 0;
            for (int j = 0; j < p->ndim; j++)
                o += snprintf(want + o, sizeof want - (size_t)o, "%s%lld", j ? ", " : "", (long long)p->shape[j]);
            rc = phax_fail("%s: tensor '%s' does not have the shape this config gives it (%s)", c->path, p->name, want);
        }
    }
    for (int i = 0; i < c->in.n && !rc; i++) {
        const char *name = c->in.t[i].name;
        if (!strcmp(name, "tokens") || !strcmp(name, "targets") || phax_layout_find(&L, name) >= 0) continue;
        if (!strcmp(name, "lm_head.weight") && cfg.tie_embeddings)
            rc = phax_fail("%s: tensor 'lm_head.weight' is given but the config ties the embeddings "
                           "(tie_embeddings true: the head is embed.weight)", c->path);
        else
            rc = phax_fail("%s: tensor '%s' is not a parameter of this config, nor tokens or targets (phax oracle "
                           "model --example lists a complete set)", c->path, ox_shown(name, b, sizeof b));
    }
    // Parameters and their gradients, the gradients' writer copy; logits (kept, written,
    // and the backward's own logits and their gradient); the activations; tokens, targets.
    size_t P = L.numel, nV = ox_smul(ox_smul((size_t)B, (size_t)T), (size_t)cfg.vocab_size);
    phax_layout_free(&L);
    if (rc) return rc;
    // phax check: the baseline's gradients, logits and loss, and what it holds meanwhile; with
    // attention a second baseline as large (FlashAttention's D: phax_naive_model_alg).
    int alt = phax_plan_has(&cfg, PHAX_SUB_ATTN);
    size_t base_doubles = ox_sadd(ox_sadd(P, nV), ox_sadd(phax_naive_model_doubles(&cfg, B, T), 1));
    TRY(ox_budget_check_alt(c, ox_sadd(ox_sadd(ox_smul(3, P), ox_smul(4, nV)), ox_sadd(model_act_doubles(&cfg, B, T), (size_t)B * T)),
                            base_doubles, alt ? base_doubles : 0));
    int32_t *tok = ox_geti(c, "tokens", 2, ts), *tg = ox_geti(c, "targets", 2, ts);
    TRYP(tok && tg);
    ref_model m;
    if (ref_model_new(&m, &cfg, 0)) return phax_fail("%s: %s", c->path, phax_error());
    for (int i = 0; i < m.layout.n && !rc; i++) {
        const phax_param_info *p = &m.layout.p[i];
        rc = phax_st_get_f64(&c->in, p->name, p->ndim, p->shape, m.params + p->offset);
    }
    size_t V = (size_t)m.cfg.vocab_size;
    double loss = NAN, *logits = ox_dalloc(c, nV);
    if (!rc && !logits) rc = PHAX_ERR;
    if (!rc) rc = ref_model_forward(&m, tok, tg, B, T, window, logits, &loss);
    if (!rc) rc = ref_model_backward(&m, tok, tg, B, T, window, &loss);
    int64_t lsh[3] = {B, T, (int64_t)V};
    if (!rc) rc = ox_put(c, "logits", logits, 3, lsh);
    if (!rc) rc = ox_put(c, "loss", &loss, 0, NULL);
    for (int i = 0; i < m.layout.n && !rc; i++) {
        const phax_param_info *p = &m.layout.p[i];
        char name[128];
        snprintf(name, sizeof name, "grad.%s", p->name);
        rc = ox_put(c, name, m.grads + p->offset, p->ndim, p->shape);
    }
    if (!rc && c->prec) {  // phax check: the baseline on the same parameters, tokens and window
        double *bl = ox_dalloc(c, nV), *bloss = ox_dalloc(c, 1), *bg = ox_dalloc(c, m.layout.numel);
        rc = bl && bloss && bg ? PHAX_OK : PHAX_ERR;
        if (!rc)
            rc = phax_naive_model(c->prec, bl, bloss, bg, &m.cfg, &m.layout, m.params, tok, tg, B, T, window, NULL);
        if (!rc) rc = ox_put_base(c, "logits", bl);
        if (!rc) rc = ox_put_base(c, "loss", bloss);
        for (int i = 0; i < m.layout.n && !rc; i++) {
            char name[128];
            snprintf(name, sizeof name, "grad.%s", m.layout.p[i].name);
            rc = ox_put_base(c, name, bg + m.layout.p[i].offset);
        }
    }
    if (!rc && c->prec && alt) {  // the second baseline: attention's backward with FlashAttention's D
        double *al = ox_dalloc(c, nV), *aloss = ox_dalloc(c, 1), *ag = ox_dalloc(c, m.layout.numel);
        rc = al && aloss && ag ? PHAX_OK : PHAX_ERR;
        if (!rc)
            rc = phax_naive_model_alg(c->prec, al, aloss, ag, &m.cfg, &m.layout, m.params, tok, tg, B, T, window, NULL,
                                      1);
        if (!rc) rc = ox_put_alt(c, "logits", al);
        if (!rc) rc = ox_put_alt(c, "loss", aloss);
        for (int i = 0; i < m.layout.n && !rc; i++) {
            char name[128];
            snprintf(name, sizeof name, "grad.%s", m.layout.p[i].name);
            rc = ox_put_alt(c, name, ag + m.layout.p[i].offset);
        }
    }
    if (rc && !strstr(phax_error(), c->path)) phax_fail("%s: %s", c->path, phax_error());
    ref_model_free(&m);
    return rc;
}
