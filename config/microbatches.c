/* The num microbatches calculator; see microbatches.h. */
#include "config/microbatches.h"

#include <stdio.h>

#include "base/error.h"

int mc_microbatches_init(mc_microbatches_t *c, const mc_args_t *a, char *err, size_t n)
{
    *c = (mc_microbatches_t){
        .global_batch_size = a->global_batch_size,
        .micro_batch_times_dp = a->micro_batch_size * a->data_parallel_size,
        .start = a->rampup_start,
        .increment = a->rampup_increment,
        .rampup_samples = a->rampup_samples,
    };
    if (!c->start) {
        c->current_global_batch_size = c->global_batch_size;
        c->num_microbatches = c->global_batch_size / c->micro_batch_times_dp;
        return 0;
    }
    const int diff = c->global_batch_size - c->start;
    if (diff < 0)
        return mc_errf(err, n,
                       "expected global batch size to be greater than or equal to start batch "
                       "size, got %d and %d (--global-batch-size, --rampup-batch-size)",
                       c->global_batch_size, c->start);
    if (diff % c->increment != 0)
        return mc_errf(err, n,
                       "expected global batch size interval (%d) to be divisible by global batch "
                       "size increment (%d) (--global-batch-size, --rampup-batch-size)",
                       diff, c->increment);
    /* Megatron divides by the number of increments: a ramp from gbs to gbs raises
     * ZeroDivisionError there */
    if (diff == 0)
        return mc_errf(err, n,
                       "--rampup-batch-size starts at the global batch size (%d): there is no "
                       "increment to ramp up over (drop --rampup-batch-size)",
                       c->start);
    c->samples_per_increment = (double)c->rampup_samples / (double)(diff / c->increment);
    mc_microbatches_update(c, 0);
    return 0;
}

bool mc_microbatches_update(mc_microbatches_t *c, int64_t consumed_samples)
{
    const int old = c->current_global_batch_size;
    if (!c->start || consumed_samples > c->rampup_samples) {
        c->current_global_batch_size = c->global_batch_size;
    } else {
        /* int(consumed_samples / rampup_samples_per_increment): a float division, truncated */
        const int64_t steps = (int64_t)((double)consumed_samples / c->samples_per_increment);
        c->current_global_batch_size = c->start + (int)steps * c->increment;
    }
    c->num_microbatches = c->current_global_batch_size / c->micro_batch_times_dp;
    return old != c->current_global_batch_size;
}

int mc_microbatches_check(const mc_microbatches_t *c, const mc_args_t *a, char *err, size_t n)
{
    if (c->current_global_batch_size % c->micro_batch_times_dp == 0) return 0;
    return mc_errf(err, n,
                   "current global batch size (%d) is not divisible by micro-batch-size (%d) "
                   "times data parallel size (%d) (--rampup-batch-size %d %d %lld reaches it; "
                   "choose a start and increment divisible by it)",
                   c->current_global_batch_size, a->micro_batch_size, a->data_parallel_size,
                   c->start, c->increment, (long long)c->rampup_samples);
}

int64_t mc_microbatches_seek(mc_microbatches_t *c, int64_t iteration)
{
    int64_t consumed = c->start ? 0 : iteration * c->global_batch_size;
    for (int64_t it = 0; c->start && it < iteration; it++) {
        mc_microbatches_update(c, consumed);
        consumed += c->current_global_batch_size;
    }
    mc_microbatches_update(c, consumed);
    return consumed;
}

int64_t mc_microbatches_train_iters(const mc_microbatches_t *c, int64_t train_samples)
{
    if (!c->start) return train_samples / c->global_batch_size;
    mc_microbatches_t r = *c;
    int64_t iterations = 0, consumed = 0;
    while (consumed <= r.rampup_samples && consumed <= train_samples) {
        mc_microbatches_update(&r, consumed);
        consumed += r.current_global_batch_size;
        iterations++;
    }
    if (train_samples > consumed) iterations += (train_samples - consumed) / r.global_batch_size;
    return iterations;
}
