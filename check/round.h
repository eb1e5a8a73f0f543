// phax check's rounding, inline for the baselines in check/ (private: the public entry points
// are phax_round/phax_round_mm/phax_round_bits in phax/check.h, which call these). A T 1024
// mLSTM check rounds ~2.5e9 times (five roundings of two baselines), so the call and libm's
// frexp/ldexp/rint/floor were 90 % of its time; this form gives the same bits (check/round.c's
// test compares it with the frexp/ldexp formulation, stochastic streams included).
#ifndef PHAX_CHECK_ROUND_H
#define PHAX_CHECK_ROUND_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "phax/check.h"

// The state of this thread's stochastic draws (phax_round_stochastic), 0 = round to nearest.
extern _Thread_local uint64_t phax_check_sr_state;

// The rounding of a subnormal double, or at a spacing near double's ends (check/round.c).
double phax_check_round_slow(double x, int p, int emin, int emax);

// 2^n for a normal exponent n (|n| < 1022), from its bits.
static inline double phax_check_pow2i(int n) {
    uint64_t b = (uint64_t)(n + 1023) << 52;
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

// rint for |y| < 2^52 without libm (check/ is built for baseline x86-64, where rint and floor
// are calls): adding and subtracting 2^52 leaves y's integer part, rounded to nearest even
// in the default rounding mode (-fno-fast-math keeps the two operations).
static inline double phax_check_rint52(double y) {
    double c = copysign(0x1p52, y);
    return copysign((y + c) - c, y);  // the sign of a zero as rint gives it
}

// y = f + frac (f an integer, frac in [0, 1), both exact): up with probability frac.
static inline double phax_check_sr_rint(double y) {
    uint64_t s = phax_check_sr_state;
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;  // xorshift64
    phax_check_sr_state = s;
    double f = phax_check_rint52(y);
    if (f > y) f -= 1;  // floor(y)
    double frac = y - f, u = (double)(s >> 11) * 0x1p-53;
    return u < frac ? f + 1 : f;
}

// x = m·2^e with m in [0.5, 1); the spacing there is 2^(e − p), but never finer than the
// subnormal spacing 2^(emin − p). y = x/spacing and r = rint(y)·spacing are exact (power-of-two
// scalings that stay in double's normal range: |y| < 2^p, |r| < 2^1024); rint rounds to
// nearest even, or stochastically; a result of 2^emax or more overflows. At p 53, y is an integer.
static inline __attribute__((always_inline)) double phax_check_round(double x, int p, int emin, int emax) {
    if (x == 0 || !isfinite(x)) return x;
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    int be = (int)(b >> 52 & 0x7ff), e = be - 1022;  // frexp's exponent of a normal double
    int q = (e > emin ? e : emin) - p;
    if (__builtin_expect(be == 0 || q <= -1000 || q >= 1000, 0)) return phax_check_round_slow(x, p, emin, emax);
    double y = x * phax_check_pow2i(-q);
    double r = (p >= 53 ? y : phax_check_sr_state ? phax_check_sr_rint(y) : phax_check_rint52(y)) * phax_check_pow2i(q);
    if (emax < 1024 && fabs(r) >= phax_check_pow2i(emax)) return copysign(INFINITY, x);
    return r;
}

#define PHAX_CHECK_R(pr, x) phax_check_round((x), (pr)->p, (pr)->emin, (pr)->emax)
#define PHAX_CHECK_RM(pr, x) phax_check_round((x), (pr)->p_mm, (pr)->emin, (pr)->emax)

#endif
