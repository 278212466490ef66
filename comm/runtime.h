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
    /* every rank's pid and host (exchanged at init), for naming ranks in messages and for
     * noticing dead peers on this node */
    pid_t *pids;
    char (*hosts)[MC_HOST_MAX];
    /* the heartbeat ring (comm/heartbeat.h), linked at init; NULL with one rank. The comm
     * backend's checking thread ticks it. */
    struct mc_heartbeat *heartbeat;
    void *impl;
} mc_runtime_t;

/* Returns 0, or -1 with one line in err (a launcher was detected but PMIx failed). */
int mc_runtime_init(mc_runtime_t *rt, char *err, size_t n);

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
