// fast/cpu AdamW with global-norm clipping (phax/fcpu_adamw.h; semantics: ref/adamw.c).
#include "ops_internal.h"

typedef struct {
    double coef, b1, b2, lr, eps, ibc1, ibc2;
} adamw_k;

// Elements [i0, i1) of one tensor, in double, each stored value rounded once:
//   g ← coef·g;  m ← β1 m + (1−β1) g;  v ← β2 v + (1−β2) g²;
//   p ← (1 − lr·wd) p − lr (m/bc1) / (sqrt(v/bc2) + eps)        (keep = 1 − lr·wd or 1)
// AVX-512 by hand: GCC will not vectorise sqrt under -fmath-errno.
static void adamw_span(float *restrict p, float *restrict m, float *restrict v,
                       const float *restrict g, size_t i0, size_t i1, const adamw_k *k,
                       double keep) {
    size_t i = i0;
#ifdef __AVX512F__
    const __m512d coef = _mm512_set1_pd(k->coef), b1 = _mm512_set1_pd(k->b1),
                  c1 = _mm512_set1_pd(1 - k->b1), b2 = _mm512_set1_pd(k->b2),
                  c2 = _mm512_set1_pd(1 - k->b2), lr = _mm512_set1_pd(k->lr),
                  eps = _mm512_set1_pd(k->eps), ibc1 = _mm512_set1_pd(k->ibc1),
                  ibc2 = _mm512_set1_pd(k->ibc2), kp = _mm512_set1_pd(keep);
    for (; i + 8 <= i1; i += 8) {
        __m512d gd = _mm512_mul_pd(coef, _mm512_cvtps_pd(_mm256_loadu_ps(&g[i])));
        __m512d md = _mm512_cvtps_pd(_mm256_loadu_ps(&m[i]));
        __m512d vd = _mm512_cvtps_pd(_mm256_loadu_ps(&v[i]));
        __m512d pd = _mm512_cvtps_pd(_mm256_loadu_ps(&p[i]));
        md = _mm512_add_pd(_mm512_mul_pd(b1, md), _mm512_mul_pd(c1, gd));
        vd = _mm512_add_pd(_mm512_mul_pd(b2, vd), _mm512_mul_pd(_mm512_mul_pd(c2, gd), gd));
        __m512d den = _mm512_add_pd(_mm512_sqrt_pd(_mm512_mul_pd(vd, ibc2)), eps);
        __m512d upd = _mm512_div_pd(_mm512_mul_pd(lr, _mm512_mul_pd(md, ibc1)), den);
        pd = _mm512_sub_pd(_mm512_mul_pd(kp, pd), upd);
        _mm256_storeu_ps(&m[i], _mm512_cvtpd_ps(md));
        _mm256_storeu_ps(&v[i], _mm512_cvtpd_ps(vd));
        _mm256_storeu_ps(&p[i], _mm512_cvtpd_ps(pd));
    }
#endif
    for (; i < i1; i++) {
        double gd = k->coef * g[i];
        double md = k->b1 * m[i] + (1 - k->b1) * gd;
        double vd = k->b2 * v[i] + (1 - k->b2) * gd * gd;
        m[i] = (float)md;
        v[i] = (float)vd;
        p[i] = (float)(keep * p[i] - k->lr * (md * k->ibc1) / (sqrt(vd * k->ibc2) + k->eps));
    }
}

int fcpu_adamw_step(fcpu_adamw_param *ps, int nparams, const phax_adamw_cfg *c, long step,
                    double *gnorm) {
    if (phax_adamw_cfg_check(c, step)) return PHAX_ERR;
    size_t total = 0;
    for (int j = 0; j < nparams; j++) total += ps[j].n;
    // Global norm: each thread sums its slice of every tensor in double.
    int maxt = omp_get_max_threads(), nt_used = 1;
    double part[maxt];
#pragma omp parallel num_threads(maxt) if (total >= PAR_MIN)
    {
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
#pragma omp single
        nt_used = nt;
        double s = 0;
        for (int j = 0; j < nparams; j++) {
            const float *restrict g = ps[j].g;
            size_t i0 = part_lo(ps[j].n, nt, id), i1 = part_lo(ps[j].n, nt, id + 1);
#pragma omp simd reduction(+ : s)
            for (size_t i = i0; i < i1; i++) s += (double)g[i] * g[i];
        }
        part[id] = s;
    }
    double ss = 0;
    for (int t = 0; t < nt_used; t++) ss += part[t];
    double norm = sqrt(ss);
    if (gnorm) *gnorm = norm;
    if (!isfinite(norm)) return phax_fail("adamw: gradient norm is %g (step %ld)", norm, step);
    double coef = 1.0;
    if (c->clip > 0 && c->clip / (norm + 1e-6) < 1.0) coef = c->clip / (norm + 1e-6);
    adamw_k k = {.coef = coef,
                 .b1 = c->beta1,
                 .b2 = c->beta2,
                 .lr = c->lr,
                 .eps = c->eps,
                 .ibc1 = 1.0 / (1.0 - pow(c->beta1, (double)step)),
                 .ibc2 = 1.0 / (1.0 - pow(c->beta2, (double)step))};
#pragma omp parallel if (total >= PAR_MIN)
    {
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
        for (int j = 0; j < nparams; j++) {
            fcpu_adamw_param *q = &ps[j];
            double keep = 1.0 - (q->decay ? c->lr * c->weight_decay : 0.0);
            adamw_span(q->p, q->m, q->v, q->g, part_lo(q->n, nt, id), part_lo(q->n, nt, id + 1), &k,
                       keep);
        }
    }
    return PHAX_OK;
}
