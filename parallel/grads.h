/* Data-parallel gradient and parameter buffers (Megatron's DistributedDataParallel and
 * param_and_grad_buffer, MEGATRON.md sections 5.3 and 7).
 *
 * Layout: the model's flat parameter and gradient buffers are laid out as Megatron's
 * contiguous buffer: parameters in reverse model.parameters() order, split into buckets of
 * about bucket_size elements; with the distributed optimizer every parameter starts at a
 * multiple of 64 elements and every bucket ends at a multiple of lcm(dp, 128) (or
 * lcm(dp, 128, 2^16) with --ddp-pad-buckets-for-high-nccl-busbw).
 *
 * Gradient sync: gradients are pre-scaled by 1/dp (1 with --calculate-per-token-loss) and summed
 * over the data-parallel group, bucket by bucket: all-reduce, or reduce-scatter into each rank's
 * shard with the distributed optimizer (with --num-distributed-optimizer-instances N, within this
 * rank's instance of dp / N ranks, then the shard all-reduced across the N instances). With --overlap-grad-reduce a bucket's collective starts
 * during the last microbatch's backward as soon as all its gradients are final (the model's
 * grads-final hook), otherwise all buckets start after the backward.
 *
 * Parameter gather (distributed optimizer): after the step each rank's updated shard is
 * all-gathered; with --overlap-param-gather the gathers run during the next forward, which waits
 * for a bucket just before it first reads one of its parameters (the model's params-needed hook). */
#ifndef MC_PARALLEL_GRADS_H
#define MC_PARALLEL_GRADS_H

#include <stdbool.h>

#include "model/gpt.h"
#include "comm/comm.h"

/* Megatron's DistributedDataParallelConfig as megatron-c uses it, made once from the arguments
 * (trainer/config.c). */
typedef struct {
    bool use_distributed_optimizer;
    bool overlap_grad_reduce, overlap_param_gather;
    /* --overlap-param-gather-with-optimizer-step: a bucket per model chunk (Megatron turns
     * bucketing off), so that the first chunk's parameters can be gathered on their own */
    bool overlap_param_gather_with_optimizer_step;
    long bucket_size; /* --ddp-bucket-size (elements); 0: not given */
    int num_buckets;  /* --ddp-num-buckets; 0: not given */
    int dp_cp_size;   /* the run's data- x context-parallel size (the default bucket size) */
    /* --num-distributed-optimizer-instances: the buffers are sharded over dp_cp_size /
     * num_instances ranks (Megatron's intra_dp_cp group), 1 without */
    int num_instances;
    bool pad_buckets_for_high_nccl_busbw;
    bool average_in_collective;
    bool calculate_per_token_loss; /* gradients are summed, not averaged over dp */
} mc_ddp_config_t;

typedef struct {
    long start, end;        /* [start, end) in the flat buffers; end includes the padding */
    long numel_unpadded;    /* Megatron's per_bucket_numel_unpadded */
    int param_lo, param_hi; /* parameter table indices [lo, hi), held in reverse order */
    bool expert; /* expert parallelism: the bucket of expert parameters, reduced over edp */
} mc_bucket_t;

typedef struct {
    int n_buckets;
    mc_bucket_t *buckets;
    int *param_bucket; /* bucket of each parameter (table index) */
    long n_elems;      /* buffer length, padding included */
} mc_grad_layout_t;

/* Megatron's resolve_ddp_bucket_size: --ddp-num-buckets gives num_params / n, else
 * --ddp-bucket-size, else max(40M, 1M*dp); and no buckets (0: one bucket) without
 * --overlap-grad-reduce. */
long mc_ddp_bucket_size(const mc_ddp_config_t *c, long num_params);

/* Assigns every parameter its offset in Megatron's buffer order and fills out (call after
 * mc_gpt_build_params, before mc_gpt_alloc; it sets m->params[i].offset and m->n_elems).
 * A shared_embedding parameter (tied embeddings with pp > 1) gets a bucket of its own with the
 * distributed optimizer, as in Megatron, so the first and last stages shard it identically and
 * the embedding-group all-reduce of their shards adds matching elements. With expert parallelism
 * (the model's moe.ep > 1) expert and dense parameters never share a bucket (Megatron's separate
 * expert_parallel_buffers): an expert bucket is reduced over the expert-data-parallel group. */
void mc_grad_layout(mc_gpt_t *m, long bucket_size, int dp, bool dist_opt, bool pad_for_busbw,
                    mc_grad_layout_t *out);
/* The same with a bucket per model chunk and no size limit (Megatron's buffers with bucketing off,
 * --overlap-param-gather-with-optimizer-step). */
void mc_grad_layout_per_chunk(mc_gpt_t *m, int dp, bool dist_opt, bool pad_for_busbw,
                              mc_grad_layout_t *out);
void mc_grad_layout_free(mc_grad_layout_t *l);

/* This dp rank's shard of bucket b: [lo, hi) in the flat buffers (distributed optimizer). */
void mc_bucket_shard(const mc_bucket_t *b, int dp, int dp_rank, long *lo, long *hi);

typedef struct {
    mc_comm_t *comm;
    mc_group_t *dp_group; /* the reduction's group; the distributed optimizer's shards' */
    int dp, dp_rank;
    /* --num-distributed-optimizer-instances: dp_group is this rank's instance (dp x cp / N
     * ranks), inter_group the N ranks holding the same shard in each instance (NULL with one
     * instance), inst_rank this rank's instance (Megatron's distributed_optimizer_instance_id) */
    mc_group_t *inter_group;
    int n_inst, inst_rank;
    bool dist_opt, overlap_grad, overlap_param;
    float grad_scale; /* 1/dp, or 1 with --calculate-per-token-loss */
    /* the expert buckets' group (expert parallelism; dp_group otherwise), size, rank and scale
     * (Megatron's expert_gradient_scaling_factor: 1/dp, edp/dp averaging in the collective) */
    mc_group_t *edp_group;
    int edp, edp_rank;
    mc_group_t *inter_edp_group; /* the expert buckets' inter-instance group, or NULL */
    float expert_grad_scale;
    bool expert_scale_edp;      /* averaging in the collective: expert_grad_scale = edp/dp */
    bool average_in_collective; /* --ddp-average-in-collective: divide by dp after the sum */
    mc_gpt_t *model;
    mc_grad_layout_t layout;

    /* per backward with sync */
    bool grad_armed;
    bool *
        param_armed_for_sync; /* per parameter: its grads-final reports count (its last backward) */
    int *pending;             /* per bucket: parameters whose gradients are not final yet */
    mc_req_t *grad_req;       /* per bucket: its collective, or -2 when not started */
    /* param gather in flight */
    bool param_armed;
    mc_req_t *param_req;
    bool *param_early; /* per bucket: started by mc_ddp_start_param_gather_of this step */
} mc_ddp_t;

/* Lays out the model's buffers (call between mc_gpt_build_params and mc_gpt_alloc). */
void mc_ddp_plan(mc_ddp_t *d, mc_gpt_t *m, const mc_ddp_config_t *c, int dp, int dp_rank);
/* After mc_gpt_alloc: binds the communicator and installs the model's hooks. dp_group: the
 * group of the dp ranks mc_ddp_plan was given; inter_group: with several distributed optimizer
 * instances the group across them (NULL with one). */
void mc_ddp_bind(mc_ddp_t *d, mc_comm_t *comm, mc_group_t *dp_group, mc_group_t *inter_group);
/* Whether this rank is the first of the ranks holding the same state (dp rank 0 of the first
 * distributed optimizer instance): the one that writes what they share in checkpoints. */
bool mc_ddp_first_replica(const mc_ddp_t *d);
/* After mc_ddp_bind, with expert parallelism: the expert buckets' group (Megatron's expt_dp,
 * or with several distributed optimizer instances its intra-instance part, inter_edp_group the
 * group across them; NULL: a model without expert buckets). */
void mc_ddp_bind_experts(mc_ddp_t *d, mc_group_t *edp_group, mc_group_t *inter_edp_group);
/* This rank's shard of bucket k: over dp, or over edp for an expert bucket (distributed
 * optimizer). */
void mc_ddp_bucket_shard(const mc_ddp_t *d, int k, long *lo, long *hi);
void mc_ddp_free(mc_ddp_t *d);

/* Grad sync of one step (Megatron enables it only for each model chunk's last backward): begin
 * resets the bucket counters; arming parameters [first, first + n) before their last backward
 * makes their grads-final reports count, and a bucket's collective starts once all its
 * parameters reported (with --overlap-grad-reduce). arm_grad_sync = begin + arm everything. */
void mc_ddp_begin_grad_sync(mc_ddp_t *d);
void mc_ddp_arm_grad_sync_params(mc_ddp_t *d, int first, int n);
void mc_ddp_arm_grad_sync(mc_ddp_t *d);
/* Starts the buckets not started yet and waits for all: afterwards every rank holds the summed
 * gradients (its shard of them with the distributed optimizer). */
void mc_ddp_finish_grad_sync(mc_ddp_t *d);

/* Distributed optimizer: all-gathers the updated shards (started; with --overlap-param-gather
 * the next forward waits per bucket, otherwise this waits). No-op without it. */
void mc_ddp_start_param_gather(mc_ddp_t *d);
/* --overlap-param-gather-with-optimizer-step: starts the gathers of the buckets that hold only
 * parameters [first, first + n) (the first model chunk's, updated already), inside the optimizer
 * step; the step's mc_ddp_start_param_gather then starts the others. */
void mc_ddp_start_param_gather_of(mc_ddp_t *d, int first, int n);
/* Waits for every parameter gather in flight (before evaluation, norms, checkpoints). */
void mc_ddp_finish_param_gather(mc_ddp_t *d);

#endif
