/* MegatronPretrainingSampler; see sampler.h. */
#include "data/sampler.h"

#include <stdio.h>

int mc_sampler_init(mc_sampler_t *s, int64_t total_samples, int64_t consumed_samples,
                    int micro_batch_size, int dp_size, int dp_rank, char *err, size_t n)
{
    const char *why = NULL;
    if (total_samples <= 0) why = "no sample to consume";
    else if (consumed_samples < 0 || consumed_samples >= total_samples)
        why = "no samples left to consume";
    else if (micro_batch_size <= 0) why = "micro batch size must be positive";
    else if (dp_size <= 0) why = "data parallel size must be positive";
    else if (dp_rank < 0 || dp_rank >= dp_size)
        why = "data parallel rank should be smaller than data parallel size";
    if (why) {
        if (err && n)
            snprintf(err, n, "sampler: %s (total %lld, consumed %lld, mbs %d, dp %d, rank %d)", why,
                     (long long)total_samples, (long long)consumed_samples, micro_batch_size,
                     dp_size, dp_rank);
        return -1;
    }
    s->total_samples = total_samples;
    s->next = consumed_samples;
    s->micro_batch_size = micro_batch_size;
    s->dp_size = dp_size;
    s->dp_rank = dp_rank;
    return 0;
}

int mc_sampler_next(mc_sampler_t *s, int64_t *idx)
{
    int64_t block = (int64_t)s->micro_batch_size * s->dp_size;
    if (s->next > s->total_samples - block) return 0;
    for (int j = 0; j < s->micro_batch_size; j++)
        idx[j] = s->next + (int64_t)s->dp_rank * s->micro_batch_size + j;
    s->next += block;
    return 1;
}
