// The one monotonic clock of phax (timing in the commands and the model profile).
#include <time.h>

#include "phax/core.h"

double phax_clock(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
