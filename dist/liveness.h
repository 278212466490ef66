/* Noticing that a peer process on this node died (comm_mpi.c, comm_nccl.c): a rank blocked in a
 * collective with a dead peer would otherwise wait for the whole timeout. A peer's pid is
 * checked only where it means the same process here: same host and same kernel pid namespace
 * (containers on one host may have their own). */
#ifndef MC_PARALLEL_LIVENESS_H
#define MC_PARALLEL_LIVENESS_H

#include <stdbool.h>
#include <sys/types.h>

#include "dist/runtime.h"

#define MC_PID_SPACE_LEN 64

/* Gone (ESRCH) or a zombie not yet reaped by its launcher. A pid we may not signal is alive. */
bool mc_pid_dead(pid_t pid);

/* "<boot id>/<pid namespace inode>": equal strings mean pids are comparable. Starts with '/'
 * when the boot id is unreadable (then nothing is watched). */
void mc_pid_space(char out[MC_PID_SPACE_LEN]);

/* watch[r] for every world rank r: its death is visible from this rank (same host and pid space,
 * not this rank). spaces holds every rank's mc_pid_space, MC_PID_SPACE_LEN bytes each. */
void mc_liveness_watch(const mc_runtime_t *rt, const char *spaces, bool *watch);

#endif
