/* --log-progress: Megatron's progress.txt in the --save directory (training/utils.py
 * append_to_progress_log, training.py compute_throughputs_and_append_to_progress_log). */
#ifndef MC_TRAIN_PROGRESS_H
#define MC_TRAIN_PROGRESS_H

#include "trainer/trainer.h"

/* Every rank calls it (a barrier over the world first, as Megatron's); global rank 0 appends
 * "<%Y-%m-%d %H:%M:%S>\tJob ID: $SLURM_JOB_ID\t# GPUs: <world size>\t<text>" to
 * <save>/progress.txt. Nothing without --save, as in Megatron. */
void mc_progress_append(const mc_trainer_t *t, const char *text);

/* After a (persistent) save at t->iteration: the "Saved checkpoint" line ("Saving async
 * checkpoint" with --async-save) with the job's and the cumulative throughput since the first
 * "Starting job" of this world size, the floating-point operations and tokens so far.
 * job_start: the wall-clock (epoch) seconds the process started; flops_at_start: the operations
 * done before this job (those of the loaded checkpoint). */
void mc_progress_saved(const mc_trainer_t *t, double job_start, double flops_at_start);

#endif
