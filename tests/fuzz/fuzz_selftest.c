// Harness with deliberate bugs, to show that the replay catches each kind:
// the input's first word picks one. Only the tests of the replay itself use it
// (meson.build: fuzz_replay/selftest_*, expected to fail except "ok").
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

volatile unsigned char fz_sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char w[16] = "";
    memcpy(w, data, size < 15 ? size : 15);
    w[strcspn(w, " \n")] = '\0';
    if (!strcmp(w, "overflow")) {  // one byte past a heap block
        unsigned char *p = malloc(size);
        p[size] = 1;
        fz_sink = p[0];
        free(p);
    } else if (!strcmp(w, "hang")) {
        for (volatile unsigned long i = 0;; i++) fz_sink = (unsigned char)i;
    } else if (!strcmp(w, "memory")) {  // 1 GB from a tiny input
        unsigned char *p = malloc(1u << 30);
        if (p) p[12345] = 1, fz_sink = p[12345];
        free(p);
    } else if (!strcmp(w, "leak")) {
        fz_sink = *(unsigned char *)strdup("leaked");
    } else if (!strcmp(w, "ub")) {  // signed overflow (UBSan)
        volatile int x = 2147483647, y = (int)size;
        volatile int z = x + y;
        fz_sink = (unsigned char)z;
    }
    return 0;
}
