/* Megatron's distributed optimizer (ZeRO-1, MEGATRON.md section 7): dp rank r owns the slice
 * [r*B/dp, (r+1)*B/dp) of every bucket of the gradient buffer (parallel/grads.h); the Adam state
 * and the update exist only for the parameter elements in those slices. */
#ifndef MC_OPTIM_DISTOPT_H
#define MC_OPTIM_DISTOPT_H

#include "optim/adam.h"
#include "parallel/grads.h"

/* The segments of this rank's shards, state packed bucket after bucket. Caller frees *segs. */
void mc_distopt_segments(const mc_gpt_t *m, const mc_grad_layout_t *l, int dp, int dp_rank,
                         mc_opt_seg_t **segs, int *n, long *state_len);
/* The same for a data-parallel state: with expert parallelism, expert buckets are sharded over
 * the expert-data-parallel group. */
void mc_distopt_segments_ddp(const mc_gpt_t *m, const mc_ddp_t *d, mc_opt_seg_t **segs, int *n,
                             long *state_len);

#endif
