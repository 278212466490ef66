/* Noticing that a peer process on this node died or stopped (comm_mpi.c, comm_nccl.c): a rank
 * blocked in a collective with a dead or stopped peer would otherwise wait for the whole
 * timeout. A peer's pid is checked only where it means the same process here: same host and same
 * kernel pid namespace (containers on one host may have their own).
 *
 * Stopped (SIGSTOP, SIGTSTP, a debugger): the kernel's own word, /proc/<pid>/stat state 'T' or
 * 't', stands for a heartbeat. It is exact: SIGSTOP stops every thread of a process, while a
 * process busy computing, saving a checkpoint (fsync: state 'D') or evaluating is never 'T', so
 * long saves cannot look silent. Peers on other nodes are not seen here: comm/heartbeat.h's ring
 * watches them. */
#ifndef MC_DIST_LIVENESS_H
#define MC_DIST_LIVENESS_H

#include <stdbool.h>
#include <sys/types.h>

#include "comm/runtime.h"

#define MC_PID_SPACE_LEN 64

/* Gone (ESRCH) or a zombie not yet reaped by its launcher. A pid we may not signal is alive. */
bool mc_pid_dead(pid_t pid);

/* Stopped by a signal or held by a tracer (state 'T' or 't'). */
bool mc_pid_stopped(pid_t pid);

/* One peer's stop as seen by the periodic checks: when it was first and last seen stopped (0:
 * running when last looked). Checks more than MC_STOP_GAP_S apart count the silence anew. */
#define MC_STOP_GAP_S 5.0
typedef struct {
    double since, last;
} mc_stop_seen_t;

/* For how long pid has been seen stopped, as of now (mc_now_s()); 0 when it is running. */
double mc_stopped_for(pid_t pid, mc_stop_seen_t *s, double now);

/* The message for world rank r found silent for for_s seconds while this rank waits in `during`
 * ("all-reduce on the dp group"): names the rank, its host and pid; how: how it was seen
 * (MC_SILENT_STOPPED for the /proc check, comm/heartbeat.c's for the ring). */
#define MC_SILENT_STOPPED "its process is stopped, by SIGSTOP or a debugger"
void mc_silent_line(const mc_runtime_t *rt, int r, double for_s, const char *how,
                    const char *during, char *buf, size_t n);

/* "<boot id>/<pid namespace inode>": equal strings mean pids are comparable. Starts with '/'
 * when the boot id is unreadable (then nothing is watched). */
void mc_pid_space(char out[MC_PID_SPACE_LEN]);

/* watch[r] for every world rank r: its death is visible from this rank (same host and pid space,
 * not this rank). spaces holds every rank's mc_pid_space, MC_PID_SPACE_LEN bytes each. */
void mc_liveness_watch(const mc_runtime_t *rt, const char *spaces, bool *watch);

#endif
