/* The configs each component takes, made once from the validated arguments: the model
 * (Megatron's TransformerConfig), the layout (initialize_model_parallel's sizes), the
 * data-parallel buffers and buckets (DistributedDataParallelConfig), the optimizer
 * (OptimizerConfig), the scheduler (OptimizerParamScheduler's arguments), the pipeline plan and
 * the data. The components below this level never read mc_args_t; the arguments stay what
 * checkpoints write (ckpt/args.c) and what the loop reads. */
#ifndef MC_TRAINER_CONFIG_H
#define MC_TRAINER_CONFIG_H

#include <stdint.h>

#include "comm/state.h"
#include "config/args.h"
#include "config/mup.h" /* MuP's derived values and its validation rule */
#include "data/source.h"
#include "model/gpt.h"
#include "optim/config.h"
#include "optim/lr.h"
#include "parallel/grads.h"
#include "parallel/pp_plan.h"

typedef struct {
    /* the whole model in one chunk with one slot; a pipeline stage's chunks and slots come from
     * the pipeline plan (mc_pipeline_configure) */
    mc_gpt_config_t model;
    mc_parallel_config_t parallel;
    int data_parallel_size; /* derived by validation: world / (tp x pp x cp) */
    mc_ddp_config_t ddp;
    mc_optim_config_t optim;
    mc_lr_config_t sched;
    mc_pp_plan_t pipeline;
    mc_data_config_t data; /* its strings point into the arguments */
} mc_run_config_t;

/* Every config of a run (the one function). A style the flag table would not accept is a user
 * error (exit 2); a scheduler without a training length is refused by mc_lr_sched_init. */
void mc_run_config(mc_run_config_t *c, const mc_args_t *a);

/* Its parts, for the tools that need one config (checkpoint conversion, the planner, tests). */
void mc_gpt_config_from_args(mc_gpt_config_t *c, const mc_args_t *a);
void mc_lr_config_from_args(mc_lr_config_t *c, const mc_args_t *a);
void mc_pp_plan_from_args(mc_pp_plan_t *p, const mc_args_t *a);
void mc_data_config_from_args(mc_data_config_t *c, const mc_args_t *a);
/* The tokenizer of training's arguments (pointing into a). */
mc_tokenizer_spec_t mc_tokenizer_spec_of(const mc_args_t *a);
/* Section 2.1: train = train_samples or train_iters * gbs; valid = (train_iters //
 * eval_interval + 1) * eval_iters * eval_gbs; test = eval_iters * eval_gbs. */
void mc_gpt_num_samples(const mc_args_t *a, int64_t out[3]);
/* The datasets' config of a (data_path, split, seq_length, seed, sample counts, flags, the cache
 * path: --data-cache-path, or "" for Megatron's default) with eod and pad from the tokenizer;
 * the per-split paths, mock data and the surplus are mc_data_config_from_args's. The pointers
 * in c point into a. */
void mc_gpt_data_config_from_args(mc_gpt_data_config_t *c, const mc_args_t *a, int32_t eod,
                                  int32_t pad);

#endif
