/* Monotonic wall-clock seconds, for timers, timeouts and throughput, and timed waits on a
 * condition variable by the same clock. */
#ifndef MC_BASE_CLOCK_H
#define MC_BASE_CLOCK_H

#include <pthread.h>
#include <time.h>

static inline double mc_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Seconds since the epoch (time stamps in files: TensorBoard events, progress.txt). */
static inline double mc_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A condition variable whose timed waits (mc_cond_wait_s) follow the monotonic clock. */
static inline void mc_cond_init_monotonic(pthread_cond_t *c)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
}

/* Waits on c (made by mc_cond_init_monotonic, m held) for at most s seconds. */
static inline void mc_cond_wait_s(pthread_cond_t *c, pthread_mutex_t *m, double s)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += (long)(s * 1e9);
    until.tv_sec += until.tv_nsec / 1000000000L, until.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(c, m, &until);
}

#endif
