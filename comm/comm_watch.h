/* What the MPI and NCCL communicators (comm_mpi.c, comm_nccl.c) share to end a job instead of
 * hanging it: the checks of the peers a collective waits on (dead or stopped on this node,
 * comm/liveness.h; silent on the heartbeat ring, comm/heartbeat.h), run about once a second by the
 * thread that already watches the collectives (comm_mpi's comm thread, comm_nccl's watchdog), also
 * while idle; the words of the messages; the abort hooks; and the list of live groups each
 * communicator frees at finalize. */
#ifndef MC_COMM_WATCH_H
#define MC_COMM_WATCH_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "comm/comm.h"
#include "comm/liveness.h"
#include "comm/runtime.h"

#define MC_WATCH_PERIOD_S 1.0 /* how often the peers are looked at while a collective waits */

typedef struct {
    mc_runtime_t *rt;
    bool *watch;             /* per world rank: a peer whose pid we can check */
    mc_stop_seen_t *stopped; /* per world rank, checking thread only: since when it is stopped */
    double next_beat;        /* checking thread only: the heartbeat ring's next tick */
} mc_watch_t;

/* spaces: every rank's mc_pid_space (MC_PID_SPACE_LEN bytes each, exchanged by the caller). 0, or
 * -1 with one line in err when out of memory. mc_watch_free releases it. */
int mc_watch_init(mc_watch_t *w, mc_runtime_t *rt, const char *spaces, char *err, size_t n);
void mc_watch_free(mc_watch_t *w);

/* The peers ranks[0..n) (world ranks; others skipped) of a wait: one that died, or has been seen
 * stopped for heartbeat_s (0: not looked for), writes the job's last line into line and returns
 * true. died_during / stopped_during: what this rank waits in ("all-reduce on the dp group"),
 * said of a dead and of a stopped peer. */
bool mc_watch_peers(mc_watch_t *w, const int *ranks, int n, double heartbeat_s,
                    const char *died_during, const char *stopped_during, char *line, size_t len);

/* The heartbeat ring's tick once it is due (every MC_HEARTBEAT_PERIOD_S). While this rank waits
 * (watch_s > 0) its predecessor is judged: true with the line when it is gone (gone_during: what
 * this rank waits in, said of a dead peer) or silent (during). */
bool mc_watch_ring(mc_watch_t *w, double watch_s, const char *gone_during, const char *during,
                   char *line, size_t len);

/* With mu held: waits on work while idle(ctx), ticking the ring (beats only) every
 * MC_HEARTBEAT_PERIOD_S, so a rank that computes, evaluates or saves a checkpoint keeps beating.
 * work is made by mc_cond_init_monotonic. */
void mc_watch_idle(mc_watch_t *w, pthread_mutex_t *mu, pthread_cond_t *work,
                   bool (*idle)(void *ctx), void *ctx);

/* The words of a collective's timeout ("timed out after T s in WHAT on the G group of N ranks
 * (...)"), of any line this rank ends the job with ("megatron-c: rank R: error: ..."). */
void mc_watch_timeout_line(char *line, size_t len, double timeout_s, const char *what,
                           const mc_group_t *g);
void mc_watch_error_line(char *line, size_t len, int rank, const char *fmt, va_list ap);

/* The live groups of a communicator. */
typedef struct {
    mc_group_t **g;
    int n, cap;
} mc_group_list_t;

/* A group of the n members (copied), this rank at `rank`, with a zeroed impl of impl_bytes,
 * added to l. NULL when out of memory. */
mc_group_t *mc_group_list_add(mc_group_list_t *l, const int *members, int n, int rank,
                              const char *name, size_t impl_bytes);
/* Takes g out of l (false when l does not hold it). */
bool mc_group_list_remove(mc_group_list_t *l, mc_group_t *g);
/* Frees what mc_group_list_add allocated (the communicator releases impl's handles first). */
void mc_group_destroy(mc_group_t *g);

#endif
