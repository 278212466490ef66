/* Megatron's num microbatches calculator (megatron/core/num_microbatches_calculator.py):
 * ConstantNumMicroBatchesCalculator, RampupBatchsizeNumMicroBatchesCalculator for
 * --rampup-batch-size <start> <increment> <ramp-up samples> (core_v0.15.0's; Megatron main
 * ignores that flag), and main's StepBatchsizeNumMicroBatchesCalculator for
 * --step-batch-size-schedule, without --decrease-batch-size-if-needed.
 *
 * With a step schedule the global batch size is that of the last entry whose threshold (in
 * samples: the tokens // seq_length) the consumed samples have reached; the final batch is the
 * last entry's.
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
    int n_steps;                  /* the step schedule's entries; 0 without one */
    const int64_t *step_samples;
    const int *step_size;
    int current_global_batch_size;
    int num_microbatches;
} mc_microbatches_t;

/* Whether the global batch changes during training (a ramp-up or a step schedule). */
static inline bool mc_microbatches_vary(const mc_microbatches_t *c)
{
    return c->start || c->n_steps;
}

/* StepBatchsizeNumMicroBatchesCalculator._parse_schedule and _validate_schedule: the entries
 * "THRESHOLD:BS" separated by blanks or commas, each number a float with an optional K, M, B or
 * T (any case), truncated; thresholds are tokens, made samples by // seq_length; sorted (stable)
 * by threshold, which must then start at 0 and strictly increase, batch sizes positive. Fills
 * samples[] and size[] (max entries) and *n; 0, or -1 with one line in err. */
int mc_batch_schedule_parse(const char *text, int seq_length, int64_t *samples, int *size, int max,
                            int *n, char *err, size_t errn);

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
 * train_samples), then train_samples' remaining whole global batches. With a step schedule
 * (Megatron main): the iterations while the consumed samples are < train_samples, each taking
 * its own batch (so the last may cross train_samples). */
int64_t mc_microbatches_train_iters(const mc_microbatches_t *c, int64_t train_samples);

#endif
