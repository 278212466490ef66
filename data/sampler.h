/* Megatron's MegatronPretrainingSampler (--dataloader-type single; MEGATRON.md 2.9): the global
 * sample stream consumed_samples, consumed_samples + 1, ... is cut into blocks of
 * micro_batch_size * dp_size; DP rank r takes block[r*mbs : (r+1)*mbs] as its next micro-batch;
 * an incomplete last block is dropped. */
#ifndef MC_DATA_SAMPLER_H
#define MC_DATA_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int64_t total_samples; /* len(dataset) */
    int64_t next;          /* first global index of the next block */
    int micro_batch_size, dp_size, dp_rank;
} mc_sampler_t;

/* Megatron's sanity checks: total > 0, consumed < total, mbs > 0, dp > 0, 0 <= rank < dp.
 * 0, or -1 with one line in err. */
int mc_sampler_init(mc_sampler_t *s, int64_t total_samples, int64_t consumed_samples,
                    int micro_batch_size, int dp_size, int dp_rank, char *err, size_t n);
/* This rank's next micro-batch: idx[micro_batch_size] global sample indices. Returns 1, or 0
 * when no complete block is left (the iterator is exhausted). */
int mc_sampler_next(mc_sampler_t *s, int64_t *idx);

/* Global index of element j of micro-batch m of DP rank r, for a stream starting at
 * consumed_samples with fixed blocks: consumed + m*mbs*dp + r*mbs + j. Iteration t of training
 * with a fixed global batch starts at consumed_samples = t * gbs. */
static inline int64_t mc_sampler_index(int64_t consumed_samples, int micro_batch_size, int dp_size,
                                       int dp_rank, int64_t microbatch, int j)
{
    return consumed_samples + microbatch * (int64_t)micro_batch_size * dp_size +
           (int64_t)dp_rank * micro_batch_size + j;
}

#endif
