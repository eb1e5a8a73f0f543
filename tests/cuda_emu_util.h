// Device buffers of the emulated fast/cuda tier for the tests (tests/test_cuda_*.c): NaN or
// given payloads with guard floats after them, checked on every download.
#ifndef PHAX_TESTS_CUDA_EMU_UTIL_H
#define PHAX_TESTS_CUDA_EMU_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "phax/core.h"
#include "phax/fcuda_emu.h"  // fcuda_emu_<op> beside fcuda_<op>

#define GUARD 16  // floats after each device buffer, checked after every call
#define GUARD_BITS 0x7fa5a5a5u

// A device buffer of n floats (+ guard) holding h (or, h NULL, NaN).
static float *dnew(const float *h, size_t n) {
    void *p = NULL;
    cr_assert_eq(fcuda_emu_malloc(&p, (n + GUARD) * sizeof(float)), PHAX_OK, "%s", phax_error());
    float *t = malloc((n + GUARD) * sizeof *t);
    for (size_t i = 0; i < n; i++) t[i] = h ? h[i] : NAN;
    uint32_t gb = GUARD_BITS;
    for (size_t i = n; i < n + GUARD; i++) memcpy(&t[i], &gb, sizeof gb);
    cr_assert_eq(fcuda_emu_upload(p, t, (n + GUARD) * sizeof(float), NULL), PHAX_OK, "%s", phax_error());
    free(t);
    return p;
}

// Downloads n floats into h and checks the guard.
static void dget(float *h, const float *d, size_t n, const char *what) {
    float *t = malloc((n + GUARD) * sizeof *t);
    cr_assert_eq(fcuda_emu_download(t, d, (n + GUARD) * sizeof(float), NULL), PHAX_OK, "%s", phax_error());
    memcpy(h, t, n * sizeof *h);
    for (size_t i = n; i < n + GUARD; i++) {
        uint32_t b;
        memcpy(&b, &t[i], sizeof b);
        cr_expect(b == GUARD_BITS, "%s: guard float %zu after the buffer overwritten", what, i - n);
    }
    free(t);
}

static void dfree(void *d) { cr_expect_eq(fcuda_emu_free(d), PHAX_OK, "%s", phax_error()); }

#endif
