// Shared by the fuzz harnesses (libFuzzer's LLVMFuzzerTestOneInput, also run by
// replay.c): the parsers under test read files, so each input is written to a
// private temporary directory first. Nothing here exits on bad input; a harness
// aborts only when a property that must hold for any input is violated.
#ifndef PHAX_FUZZ_H
#define PHAX_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

// A directory private to this process (created on first use, removed at exit).
const char *fz_dir(void);
// "<fz_dir()>/<name>" in a static buffer per slot (slot 0..7).
const char *fz_path(int slot, const char *name);
// Write n bytes to path (truncating); aborts if the temporary directory cannot
// be written (a broken test setup, not a finding).
void fz_write(const char *path, const void *data, size_t n);
// Remove every file in fz_dir() (between inputs, so no input sees another's files).
void fz_clean(void);
// A property of the code under test failed: print it and abort (a finding).
_Noreturn void fz_fail(const char *what, const char *detail);

// Set by the replay for an input whose file name contains ".refuse": the code
// under test must refuse it (issue 11: inputs that used to pass silently).
extern int fz_must_refuse;
// Call where the code under test has accepted the input.
void fz_accepted(const char *what);

// Property of any layout the code builds: every shape dim >= 1, numel the
// product of the shape, offsets contiguous, the total their sum, no overflow.
void fz_check_layout(const void *layout);

// Little-endian u32 at p.
static inline uint32_t fz_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// Split an input into parts: a header of (nparts − 1) little-endian u32 lengths,
// then the parts back to back; the last part takes the rest. Lengths past the
// end are clamped, so every input splits somehow (the seeds split exactly).
void fz_split(const uint8_t *data, size_t size, int nparts, const uint8_t **part, size_t *len);

#endif
