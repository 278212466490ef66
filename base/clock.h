/* Monotonic wall-clock seconds, for timers, timeouts and throughput. (cli/ holds the helpers
 * every layer uses, with error.h.) */
#ifndef MC_BASE_CLOCK_H
#define MC_BASE_CLOCK_H

#include <time.h>

static inline double mc_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
