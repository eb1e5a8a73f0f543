// phax check: the precisions and the one rounding function every baseline uses.
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "phax/check.h"
#include "round.h"

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

// Stochastic rounding (phax_round_stochastic): the state of this thread's draws, 0 = off.
_Thread_local uint64_t phax_check_sr_state;

void phax_round_stochastic(uint64_t seed) { phax_check_sr_state = seed; }

// The plain formulation (frexp, ldexp, rint, floor), for what check/round.h's fast path leaves
// out: a subnormal double, or a spacing near double's ends.
double phax_check_round_slow(double x, int p, int emin, int emax) {
    int e;
    frexp(x, &e);
    int q = (e > emin ? e : emin) - p;
    double y = ldexp(x, -q);  // |y| < 2^p: check/round.h's stochastic rint applies (p < 53)
    double r = ldexp(phax_check_sr_state && p < 53 ? phax_check_sr_rint(y) : rint(y), q);
    if (fabs(r) >= ldexp(1.0, emax)) return copysign(INFINITY, x);
    return r;
}

double phax_round_bits(double x, int p, int emin, int emax) { return phax_check_round(x, p, emin, emax); }

double phax_round(const phax_precision *pr, double x) { return PHAX_CHECK_R(pr, x); }

double phax_round_mm(const phax_precision *pr, double x) { return PHAX_CHECK_RM(pr, x); }
