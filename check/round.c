// phax check: the precisions and the one rounding function every baseline uses.
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "phax/check.h"

// f32: binary32. tf32: binary32 storage and accumulation, a dot product's operands rounded
// to 11 bits first (the tensor-core input format). bf16: 8 bits, binary32's range.
// f16: binary16 (11 bits, normal range 2^-14 .. 65504).
static const phax_precision PRECS[PHAX_PREC_N] = {
    {"f32", 24, 24, -125, 128, 0x1p-24},
    {"tf32", 24, 11, -125, 128, 0x1p-24},
    {"bf16", 8, 8, -125, 128, 0x1p-8},
    {"f16", 11, 11, -13, 16, 0x1p-11},
};

const phax_precision *phax_precision_find(const char *name) {
    for (int i = 0; i < PHAX_PREC_N; i++)
        if (!strcmp(PRECS[i].name, name)) return &PRECS[i];
    return NULL;
}

const phax_precision *phax_precision_get(phax_prec_id id) {
    return id >= 0 && id < PHAX_PREC_N ? &PRECS[id] : NULL;
}

// x = m·2^e with m in [0.5, 1); the spacing there is 2^(e − p), but never finer than the
// subnormal spacing 2^(emin − p). x/spacing is exact (a power-of-two scaling), rint rounds
// it to nearest even (the default rounding mode), and a result of 2^emax or more overflows.
// Stochastic rounding (phax_round_stochastic): the state of this thread's draws, 0 = off.
static _Thread_local uint64_t sr_state;

void phax_round_stochastic(uint64_t seed) { sr_state = seed; }

// x/spacing = f + frac (f an integer, frac in [0, 1), both exact): up with probability frac.
static double sr_rint(double y) {
    sr_state ^= sr_state << 13, sr_state ^= sr_state >> 7, sr_state ^= sr_state << 17;  // xorshift64
    double f = floor(y), frac = y - f, u = (double)(sr_state >> 11) * 0x1p-53;
    return u < frac ? f + 1 : f;
}

double phax_round_bits(double x, int p, int emin, int emax) {
    if (x == 0 || !isfinite(x)) return x;
    int e;
    frexp(x, &e);
    int q = (e > emin ? e : emin) - p;
    double y = ldexp(x, -q), r = ldexp(sr_state && p < 53 ? sr_rint(y) : rint(y), q);
    if (fabs(r) >= ldexp(1.0, emax)) return copysign(INFINITY, x);
    return r;
}

double phax_round(const phax_precision *pr, double x) { return phax_round_bits(x, pr->p, pr->emin, pr->emax); }

double phax_round_mm(const phax_precision *pr, double x) {
    return phax_round_bits(x, pr->p_mm, pr->emin, pr->emax);
}
