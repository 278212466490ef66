/* The pipeline plan: the pipeline's layout as pure arithmetic, made once from the arguments
 * (trainer/config.c). The schedule's parameters and Megatron's checks of them (the interleaved
 * schedule's microbatch rules), and which transformer layers each (pp rank, model chunk) holds;
 * the command line's checks (cli/validate.c), the schedules (parallel/schedule.h) and their
 * executor (parallel/pipeline.c) share them. */
#ifndef MC_PARALLEL_PP_PLAN_H
#define MC_PARALLEL_PP_PLAN_H

#include <stdbool.h>
#include <stddef.h>

/* A pipeline schedule's parameters (parallel/schedule.h says which schedule runs). */
typedef struct {
    int pp_rank, pp_size;
    int vpp;               /* model chunks per rank; 1 = no interleaving */
    int num_microbatches;  /* M */
    int group_size;        /* microbatch_group_size_per_vp_stage G; 0 = pp (Megatron's default) */
    bool overlap_p2p_comm; /* interleaved only; Megatron raises without VPP (pass false there) */
    /* --overlap-p2p-communication-warmup-flush: the warmup's and the flush's batches are
     * asynchronous too (only with overlap_p2p_comm) */
    bool overlap_warmup_flush;
    bool forward_only; /* evaluation: forwards only, no gradients */
} mc_pp_config_t;

/* Megatron's checks for the schedule (schedules.py and arguments.py:validate_args). Returns 0,
 * or -1 with one line in err. */
int mc_pp_validate(const mc_pp_config_t *cfg, char *err, size_t errn);

/* G after the default (0 -> pp). */
int mc_pp_group_size(const mc_pp_config_t *cfg);

/* Transformer-layer placement (MEGATRON.md 3.2; Megatron-LM main's
 * transformer_layer.get_transformer_layer_offset and transformer_block.get_num_layers_to_build).
 * first_stage_layers / last_stage_layers are --decoder-first/last-pipeline-num-layers, 0 =
 * unset. Standard split: with account_embedding (account_loss) the embedding (loss) counts as
 * one more layer, L' = L + e + l; chunk v of rank p spans [v*(L'/vpp) + p*(L'/pp/vpp),
 * +L'/pp/vpp) of the counted layers, chunk 0 of rank 0 gives one to the embedding and the last
 * chunk of the last rank one to the loss (so a chunk may hold no transformer layer). Uneven: the
 * first (last) rank holds the given number, the other ranks split the rest evenly; with vpp each
 * rank's layers are split evenly over its chunks and chunk v of every rank comes after chunk v-1
 * of every rank. The two ways exclude each other (Megatron refuses both at once).
 * --pipeline-model-parallel-layout is not handled. */
typedef struct {
    int num_layers, pp_size, vpp;
    int first_stage_layers, last_stage_layers;
    bool account_embedding, account_loss; /* --account-for-embedding/loss-in-pipeline-split */
} mc_pp_layers_cfg_t;

/* Global index of the first layer of (pp_rank, chunk) and how many layers it has. Returns 0, or
 * -1 with one line in err for a placement Megatron rejects. */
int mc_pp_layers(const mc_pp_layers_cfg_t *c, int pp_rank, int chunk, int *first_layer,
                 int *n_layers, char *err, size_t errn);

/* The embedding lives on chunk 0 of pp rank 0; final norm, output layer and loss on the last
 * chunk of the last pp rank. */
static inline bool mc_pp_is_pre_process(int pp_rank, int chunk)
{
    return pp_rank == 0 && chunk == 0;
}
static inline bool mc_pp_is_post_process(int pp_size, int vpp, int pp_rank, int chunk)
{
    return pp_rank == pp_size - 1 && chunk == vpp - 1;
}

/* A run's pipeline plan: its stages and chunks (layers: num_layers, pp_size, vpp and the uneven
 * first and last stages), its schedules' parameters and the steps they run. */
typedef struct {
    mc_pp_layers_cfg_t layers; /* pp_size and vpp are 1 without pipelining or interleaving */
    int group_size;            /* --microbatch-group-size-per-virtual-pipeline-stage; 0: pp */
    bool overlap_p2p_comm;     /* with vpp > 1 only */
    bool overlap_warmup_flush; /* --overlap-p2p-communication-warmup-flush (with the above) */
    int num_microbatches;      /* of a training step (the final global batch's) */
    int eval_microbatches;     /* of an evaluation step; 0: no evaluation */
    /* --rampup-batch-size: the steps of the ramp run the global batches ramp_start,
     * ramp_start + ramp_increment, ... below global_batch_size, batch_per_microbatch samples
     * per microbatch (ramp_start 0: no ramp) */
    int ramp_start, ramp_increment, global_batch_size, batch_per_microbatch;
    /* --step-batch-size-schedule: the global batches of its entries (n_step_sizes 0: none) */
    int n_step_sizes;
    const int *step_sizes;
} mc_pp_plan_t;

/* The schedule of pp rank pp_rank for a step of num_microbatches microbatches. */
mc_pp_config_t mc_pp_plan_schedule(const mc_pp_plan_t *p, int pp_rank, int num_microbatches,
                                   bool forward_only);

#endif
