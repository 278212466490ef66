/* Megatron's num microbatches calculator (megatron/core/num_microbatches_calculator.py):
 * ConstantNumMicroBatchesCalculator, and RampupBatchsizeNumMicroBatchesCalculator for
 * --rampup-batch-size <start> <increment> <ramp-up samples>, without
 * --decrease-batch-size-if-needed.
 *
 * With a ramp-up the global batch size is a function of the consumed samples:
 * start + increment * int(consumed / (ramp-up samples / ((gbs - start) / increment))) while
 * consumed <= ramp-up samples, gbs after. The training loop calls update at the start of every
 * iteration with the consumed samples; the iteration uses that batch and the consumed samples
 * advance by it, so every rank computes the same sequence of batch sizes. */
#ifndef MC_CONFIG_MICROBATCHES_H
#define MC_CONFIG_MICROBATCHES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/args.h"

typedef struct {
    int global_batch_size;    /* after the ramp-up */
    int micro_batch_times_dp; /* micro batch size x data parallel size */
    int start, increment;     /* 0, 0 without a ramp-up */
    int64_t rampup_samples;
    double samples_per_increment; /* Megatron's rampup_samples_per_increment (a float) */
    int current_global_batch_size;
    int num_microbatches;
} mc_microbatches_t;

/* Megatron's constructor checks of the ramp-up (after the argument checks), or -1 with one line
 * in err. Without a ramp-up it only fills the constant batch. The initial batch is update(0)'s,
 * unchecked, as Megatron's constructor does. */
int mc_microbatches_init(mc_microbatches_t *c, const mc_args_t *a, char *err, size_t n);

/* update(consumed_samples): sets the current global batch size and number of microbatches.
 * Returns whether the global batch size changed. */
bool mc_microbatches_update(mc_microbatches_t *c, int64_t consumed_samples);

/* Megatron's consistency check of the current batch: 0, or -1 with its message in err. */
int mc_microbatches_check(const mc_microbatches_t *c, const mc_args_t *a, char *err, size_t n);

/* The samples consumed before iteration `iteration` (0-based) of a run from the start, each
 * earlier iteration having taken its own batch; c is left at that iteration's batch. */
int64_t mc_microbatches_seek(mc_microbatches_t *c, int64_t iteration);

/* training.update_train_iters with a ramp-up: the iterations of the ramp (counted while the
 * consumed samples are <= both the ramp-up samples and train_samples, so the last may cross
 * train_samples), then train_samples' remaining whole global batches. */
int64_t mc_microbatches_train_iters(const mc_microbatches_t *c, int64_t train_samples);

#endif
