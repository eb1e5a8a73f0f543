// SplitMix64 random stream, identical on every platform (integer arithmetic only).
#include "phax/core.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

phax_rng phax_rng_new(uint64_t seed) {
    phax_rng r = {seed};
    return r;
}

phax_rng phax_rng_stream(uint64_t seed, uint64_t stream) {
    // Mix the stream id through one SplitMix64 step so nearby ids give unrelated streams.
    uint64_t s = stream ^ 0xD1B54A32D192ED03ull;
    phax_rng r = {seed ^ splitmix64(&s)};
    return r;
}

uint64_t phax_rng_u64(phax_rng *r) { return splitmix64(&r->state); }

double phax_rng_uniform(phax_rng *r) { return (double)(phax_rng_u64(r) >> 11) * 0x1.0p-53; }

double phax_rng_uniform_range(phax_rng *r, double lo, double hi) {
    return lo + (hi - lo) * phax_rng_uniform(r);
}

double phax_rng_normal(phax_rng *r) {
    // Box–Muller, one value per call (the second is discarded so the stream
    // position depends only on the number of calls).
    double u1 = 1.0 - phax_rng_uniform(r);  // (0, 1]: log is finite
    double u2 = phax_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
}

uint64_t phax_rng_below(phax_rng *r, uint64_t n) {
    if (n == 0) return 0;
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;  // reject the biased tail
    uint64_t x;
    do x = phax_rng_u64(r);
    while (x >= lim);
    return x % n;
}

uint64_t phax_hash_str(const char *s) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001B3ull;
    return h;
}
