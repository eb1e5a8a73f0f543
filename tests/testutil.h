// Shared test machinery: seeds, guarded buffers, comparisons that NaN fails,
// and a finite-difference gradient checker.
#ifndef PHAX_TESTUTIL_H
#define PHAX_TESTUTIL_H

#include <stdbool.h>
#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>

#include "phax/core.h"

// --- seeds -----------------------------------------------------------------------
// Each test draws its inputs from tu_rng(name): a stream of the run's base seed
// (fresh each run, or PHAX_TEST_SEED=<n> to repeat one) and the test's name.
// The seed is printed so any failure can be replayed.
uint64_t tu_base_seed(void);
phax_rng tu_rng(const char *test_name);

// --- guarded buffers ---------------------------------------------------------------------
// tu_buf(n) returns n doubles with guard zones of a fixed bit pattern on both
// sides; tu_intact() says whether the guards are untouched. Contents start as
// NaN (poison), so an output that a kernel forgets to write shows up as NaN.
double *tu_buf(size_t n);
bool tu_intact(const double *p);
void tu_free(double *p);
size_t tu_len(const double *p);
// Fill helpers.
void tu_fill_normal(double *x, size_t n, phax_rng *r, double scale);
void tu_fill_uniform(double *x, size_t n, phax_rng *r, double lo, double hi);
void tu_fill(double *x, size_t n, double v);
void tu_poison(double *x, size_t n);  // NaN
double *tu_copy(const double *x, size_t n);  // guarded copy

// Float versions for the fast tiers (same layout and guard idea, float payload, NaN).
// Payload 16-byte aligned; tu_fintact(NULL) is true (an optional buffer not given).
float *tu_fbuf(size_t n);
bool tu_fintact(const float *p);
void tu_ffree(float *p);
size_t tu_flen(const float *p);

// --- files (tests that write to disk; abort with a message on failure) ----------------------
char *tu_tmpdir(const char *tag);                  // a fresh folder $TMPDIR (or /tmp)/<tag>_XXXXXX
char *tu_join(const char *dir, const char *name);  // malloc'd "dir/name"
void tu_write_file(const char *path, const void *p, size_t n);
void tu_rm_rf(const char *path);                   // a file, or a folder and everything in it
char *tu_slurp(const char *path, size_t *n);
int tu_dir_count(const char *dir);  // entries of a folder not starting with '.' (−1: cannot open it)       // the whole file, NUL-terminated; *n its length (n may be NULL)
int tu_exists(const char *path);                   // anything at path (links followed)
char *tu_xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));  // malloc'd
// NULL when a phax command failed as it must on bad input (exit status 1, and one stderr line,
// in err_path, that starts with prefix and holds frag); else what is wrong, malloc'd.
char *tu_cli_error_check(const char *err_path, int rc, const char *prefix, const char *frag);
// A run's log.jsonl without its timing field ("tokens_per_s"), malloc'd: what two runs that
// computed the same must share byte for byte.
char *tu_log_without_timing(const char *path);
// The report of THEIRS k of n (1-based) in the output of `phax check` with several THEIRS: the
// text after its heading "== THEIRS k of n: FILE ==" up to the next heading (n 1: all of out);
// "" when the heading is missing. Malloc'd.
char *tu_check_report(const char *out, int k, int n);
// A sweep's unexpected verdict kept for a replay by hand (`phax check OP IN THEIRS`): copies in
// and theirs to DIR/STEM-K.in.safetensors and DIR/STEM-K.theirs.safetensors, K counting up from 0
// per process; prints where.
void tu_check_keep(const char *dir, const char *stem, const char *in, const char *theirs);

// 1 when built with AddressSanitizer, which reserves terabytes of address space and keeps
// freed blocks in quarantine: address-space limits and peak-memory bounds do not apply there
// (the sanitizer pass checks memory safety; the plain build checks the bounds).
#if defined(__SANITIZE_ADDRESS__)
#define TU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_ASAN 1
#endif
#endif
#ifndef TU_ASAN
#define TU_ASAN 0
#endif

// --- child processes (the tests that run the phax command) ---------------------------------
// Limits a child runs under (0: none). Address-space limits are skipped under
// AddressSanitizer, which reserves terabytes of address space at start.
typedef struct {
    long as_mb;     // RLIMIT_AS
    long cpu_s;     // RLIMIT_CPU
} tu_limits;
// Start argv[0] (a path) with argv; stdout to `out`, stderr to `err` (NULL: the same file as
// out), OMP_NUM_THREADS=1 (the tests' models are tiny: threads only cost), under lim (may be NULL).
pid_t tu_spawn(const char *const *argv, const char *out, const char *err, const tu_limits *lim);
// Wait for a child: its exit status, or 1000 + the signal that ended it (never an exit
// status); *peak_kb (may be NULL) gets the child's peak resident memory.
int tu_wait(pid_t pid, long *peak_kb);
// $PHAX_BIN (the phax command under test, set by meson) with the NULL-terminated arguments:
// tu_spawn + tu_wait. At most 62 arguments.
int tu_phax(const char *out, const char *err, const tu_limits *lim, long *peak_kb, const char *arg0, ...);
pid_t tu_phax_spawn(const char *out, const char *err, const tu_limits *lim, const char *const *args);  // not waited for
int tu_phax_v(const char *out, const char *err, const tu_limits *lim, long *peak_kb, const char *const *args);

// --- comparisons ---------------------------------------------------------------------------
// Max over i of |a_i − b_i| / (atol + rtol·|b_i|); NaN or inf anywhere gives +inf.
// Pass when the result is <= 1 — always test as !(r <= 1) so NaN fails.
double tu_err_ratio(const double *a, const double *b, size_t n, double atol, double rtol);
// Max abs difference (NaN-propagating: returns NaN if any element is NaN).
double tu_max_abs_diff(const double *a, const double *b, size_t n);
double tu_max_abs(const double *a, size_t n);
bool tu_all_finite(const double *a, size_t n);
// ⟨a, b⟩
double tu_dot(const double *a, const double *b, size_t n);

// --- finite-difference gradient check ----------------------------------------------------
// The op under test is wrapped as L(inputs) = Σ dy ⊙ y with a random upstream
// gradient dy fixed by the test. The checker perturbs sampled elements of each
// input tensor by ±h (central differences, float64) and compares with the
// gradient the op's backward ADDED into `grad` (the buffer is pre-filled with a
// random prior which is subtracted again, so a backward that overwrites
// instead of accumulating fails).
typedef struct {
    const char *name;
    double *x;     // the input (perturbed in place, restored after)
    double *grad;  // where backward adds dL/dx; a tu_buf of the same length
    size_t n;
} tu_tensor;

typedef struct {
    double (*loss)(void *ctx);  // forward, returns Σ dy ⊙ y
    void (*backward)(void *ctx);  // adds dL/dx into every tensor's grad
    double (*loss_mag)(void *ctx);  // Σ |dy ⊙ y|: the rounding scale of loss (NULL: |loss|)
    void *ctx;
} tu_op;

typedef struct {
    double h;         // step (relative to max(1, |x|)); default 1e-6
    double rtol;      // per-element tolerance relative to the tensor's gradient scale; default 1e-6
    size_t max_elems; // elements sampled per tensor; default 48 (all if fewer)
} tu_gc_opts;

tu_gc_opts tu_gc_default(void);
// Returns true when every sampled element of every tensor agrees; prints one
// line per tensor (name, worst error ratio) and details of the worst failure.
bool tu_gradcheck(const char *label, tu_op op, tu_tensor *ts, int nt, phax_rng *r,
                  const tu_gc_opts *o);

#endif
