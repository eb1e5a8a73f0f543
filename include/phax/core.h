// phax core: the small pieces every tier shares — error reporting, a
// reproducible RNG, aligned allocation and a monotonic clock. No dependency on ref/ or fast/.
#ifndef PHAX_CORE_H
#define PHAX_CORE_H

#include <stddef.h>
#include <stdint.h>

#define PHAX_VERSION "0.1.0"

// C and C++ (nvcc compiles fast/cuda as C++): C linkage, and the spelling of "noreturn".
#ifdef __cplusplus
#define PHAX_NORETURN [[noreturn]]
extern "C" {
#else
#define PHAX_NORETURN _Noreturn
#endif

// ---------------------------------------------------------------------------
// Errors. Library code never aborts or exits: a failing function records a
// one-line message (thread-local) and returns PHAX_ERR (-1). Programs print it
// with phax_die(), which is the only place that exits.

enum { PHAX_OK = 0, PHAX_ERR = -1 };

// Record a printf-style message as the current error; returns PHAX_ERR.
int phax_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// The last recorded message ("" if none).
const char *phax_error(void);
void phax_clear_error(void);
// Print "phax: <msg>" to stderr and exit(1). Programs only, never libraries.
PHAX_NORETURN void phax_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// ---------------------------------------------------------------------------
// RNG: SplitMix64 stream (Steele, Lea, Flood 2014). Pure 64-bit integer
// arithmetic, so the same seed gives the same bits on every platform and
// compiler. phax_rng_normal uses Box–Muller with libm log/cos/sin; libm may
// differ in the last ulp between C libraries, nothing more.

typedef struct {
    uint64_t state;
} phax_rng;

phax_rng phax_rng_new(uint64_t seed);
// An independent stream derived from (seed, stream id): used to give every
// tensor of an initialisation its own stream so adding one does not shift others.
phax_rng phax_rng_stream(uint64_t seed, uint64_t stream);
uint64_t phax_rng_u64(phax_rng *r);
double phax_rng_uniform(phax_rng *r);                      // [0, 1), 53 bits
double phax_rng_uniform_range(phax_rng *r, double lo, double hi);
double phax_rng_normal(phax_rng *r);                       // N(0, 1)
uint64_t phax_rng_below(phax_rng *r, uint64_t n);          // uniform in [0, n), unbiased
// 64-bit FNV-1a of a string: stable name -> stream id.
uint64_t phax_hash_str(const char *s);

// ---------------------------------------------------------------------------
// Memory: 64-byte aligned, zeroed. Returns NULL and records an error on failure.
void *phax_alloc(size_t bytes);
void phax_free(void *p);

// ---------------------------------------------------------------------------
// Seconds on the monotonic clock (an arbitrary origin; differences only).
double phax_clock(void);

#ifdef __cplusplus
}
#endif

#endif
