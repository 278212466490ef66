/* Who am I: PMIx bootstrap (DESIGN decision 4). Rank, world size, local rank/size, key-value
 * exchange and abort, from the launcher's PMIx server (srun --mpi=pmix, mpirun, prterun).
 * With no PMIx server in the environment (neither PMIX_RANK nor PMIX_NAMESPACE set) the
 * program is one rank and nothing is initialised; PMIx_Init is never tried then, because it
 * fails slowly outside a launcher and a later MPI_Init after a failed PMIx_Init can hang. */
#ifndef MC_DIST_RUNTIME_H
#define MC_DIST_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define MC_HOST_MAX 64

typedef struct mc_runtime {
    int rank, size, local_rank, local_size;
    bool launched; /* under a PMIx launcher */
    char host[MC_HOST_MAX];
    /* every rank's pid and host (exchanged by mc_runtime_connect), for naming ranks in messages and for
     * noticing dead peers on this node */
    pid_t *pids;
    char (*hosts)[MC_HOST_MAX];
    /* the heartbeat ring (comm/heartbeat.h), linked by mc_runtime_connect; NULL with one rank. The comm
     * backend's checking thread ticks it. */
    struct mc_heartbeat *heartbeat;
    void *impl;
} mc_runtime_t;

/* Who this rank is (rank, size, local rank and size). Returns 0, or -1 with one line in err (a
 * launcher was detected but PMIx failed). */
int mc_runtime_init(mc_runtime_t *rt, char *err, size_t n);

/* Every rank's pid, host and heartbeat address (pids, hosts, heartbeat above), exchanged in one
 * fence that waits at most timeout_s (0: no bound) for every rank to arrive: a rank stopped or
 * hung at start-up ends the job with a timeout instead of holding it forever. Needed before a
 * communicator (comm.h); nothing to do with one rank or when connected already. Returns 0, or -1
 * with one line in err. */
int mc_runtime_connect(mc_runtime_t *rt, double timeout_s, char *err, size_t n);

/* Key-value exchange: put then commit; after mc_runtime_fence every rank can get every other
 * rank's values. get returns the value's length (copying at most cap bytes), or -1. */
int mc_runtime_put(mc_runtime_t *rt, const char *key, const void *val, size_t len);
int mc_runtime_commit(mc_runtime_t *rt);
int mc_runtime_fence(mc_runtime_t *rt, double timeout_s);
long mc_runtime_get(mc_runtime_t *rt, int rank, const char *key, void *out, size_t cap);

/* Ends the whole job with `code` (PMIx_Abort when launched, else exit). Does not return. */
__attribute__((noreturn)) void mc_runtime_abort(mc_runtime_t *rt, int code, const char *msg);
void mc_runtime_finalize(mc_runtime_t *rt);

/* The process-wide runtime set by mc_runtime_init (the error path's abort uses it). */
mc_runtime_t *mc_runtime(void);

#endif
