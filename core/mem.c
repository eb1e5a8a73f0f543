// Aligned, zeroed allocation with a recorded error instead of a crash.
#include "phax/core.h"

#include <stdlib.h>
#include <string.h>

void *phax_alloc(size_t bytes) {
    size_t n = (bytes + 63) / 64 * 64;
    if (n == 0) n = 64;
    void *p = aligned_alloc(64, n);
    if (!p) {
        phax_fail("out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    memset(p, 0, n);
    return p;
}

void phax_free(void *p) { free(p); }
