/* Checks of pipeline schedules for the tests (parallel/schedule.h): the whole pipeline's action
 * lists run together, and their text form. */
#ifndef MC_TEST_SCHEDULE_CHECK_H
#define MC_TEST_SCHEDULE_CHECK_H

#include <stddef.h>

#include "parallel/schedule.h"

/* Most forwards whose backward has not run yet that cfg->pp_rank holds at once, counted in
 * chunk activations (one microbatch through one model chunk): min(warmup + 1, M*vpp), which for
 * 1F1B is min(pp - rank, M); 0 with forward_only (nothing is kept for a backward). */
int mc_pp_max_inflight(const mc_pp_config_t *cfg);

/* Runs the action lists of all pp ranks together (cfg's pp_rank is ignored): synchronous batches
 * block until every op in them is matched, asynchronous ones do not, a compute waits for the
 * receive of its input; sends and receives match per ordered rank pair in issue order and must
 * name the same tensor. Checks: no deadlock; every sent tensor is received; each rank runs F
 * then B exactly once for every (microbatch, chunk), per chunk in microbatch order (so the loss
 * of the last virtual stage is taken in microbatch order) and B on the oldest outstanding
 * forward; a tensor is sent only after it was computed; and max_inflight matches
 * mc_pp_max_inflight. Fills max_inflight[pp] when not NULL. Returns 0, or -1 with one line. */
int mc_pp_simulate(const mc_pp_config_t *cfg, int *max_inflight, char *err, size_t errn);

/* The same checks on given lists (lists[r] with n[r] actions for pp rank r); for tests. */
int mc_pp_simulate_lists(const mc_pp_config_t *cfg, mc_pp_action_t *const *lists, const int *n,
                         int *max_inflight, char *err, size_t errn);

/* Text form, for tests and logs: computes "F<mb>c<chunk>" / "B<mb>c<chunk>", batches
 * "[SP0c1 RP1c1]" (synchronous) or "<RP1c1 SN0c1>" (asynchronous) with SP/RP/SN/RN for
 * send_prev/recv_prev/send_next/recv_next, separated by spaces. Returns the length it needed
 * (like snprintf). */
int mc_pp_format(const mc_pp_action_t *a, int n, char *buf, size_t bufn);

#endif
