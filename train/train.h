/* Megatron's training loop for one rank: train steps over microbatches, logging, evaluation,
 * exit conditions. Step and evaluation are exposed so tests can drive them with their own
 * microbatches. */
#ifndef MC_TRAIN_TRAIN_H
#define MC_TRAIN_TRAIN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "config/args.h"
#include "config/microbatches.h"
#include "data/source.h"
#include "model/gpt.h"
#include "optim/adam.h"
#include "optim/lr.h"
#include "optim/scaler.h"
#include "comm/comm.h"
#include "parallel/grads.h"
#include "parallel/pipeline.h"
#include "comm/state.h"
#include "comm/timers.h"

typedef struct {
    const mc_args_t *args;
    const mc_backend_t *be;
    mc_comm_t *comm;
    mc_parallel_t par; /* groups and this rank's coordinates */
    mc_gpt_t model;
    mc_ddp_t ddp;       /* gradient buckets, reduction and parameter gather */
    mc_pipeline_t pipe; /* the schedule executor (every layout, pp = 1 included) */
    mc_adam_t opt;
    mc_scaler_t scaler; /* loss scaling (fp16, or --loss-scale) */
    mc_lr_sched_t sched;
    mc_timers_t timers;               /* --timing-log-level */
    struct mc_ckpt_async *ckpt_async; /* --async-save's writer (ckpt/async.h), or NULL */
    struct mc_tensorboard *tb;        /* the last rank's --tensorboard-dir writer, or NULL */

    mc_data_source_t data; /* opened by mc_pretrain; tests feed microbatches directly */
    /* host staging: the microbatches of one training or evaluation step ([max_batch, s] each),
     * the backend's alloc_host memory (copied without waiting), their per-token losses as the
     * forward leaves them, and the sample indices of one */
    int32_t *tokens, *labels, *positions, *segments;
    float *loss_mask, *losses;
    int64_t *sample_idx;

    int64_t iteration;
    int64_t consumed_train_samples, consumed_valid_samples;
    /* the global batch of this iteration (--rampup-batch-size), updated at its start */
    mc_microbatches_t microbatches;
    /* --log-progress: when the process started (epoch seconds, Megatron's _TRAIN_START_TIME)
     * and the floating-point operations of the loaded checkpoint */
    double job_start_wall, flops_at_start;
} mc_trainer_t;

typedef struct {
    double loss_sum, num_tokens; /* over the global batch; the reported lm loss is their ratio */
    bool skipped;                /* the loss scaler found inf/nan gradients: no update */
    double grad_norm;            /* pre-clip (not computed when skipped) */
    double num_zeros;            /* zeros in the gradients (--log-num-zeros-in-grad) */
    double lr;                   /* the learning rate this step used */
} mc_step_result_t;

/* Bytes per rank of what mc_trainer_init allocates (the memory plan) on backend be. */
typedef struct {
    double params, grads, optimizer, activations, workspace;
    double snapshot;    /* --async-save with --save: the host copy of what a save writes */
    int stage;          /* the pipeline stage planned: the one that needs the most */
    int inflight;       /* its activation slots (microbatch x model chunk) */
    mc_dtype_t dt, gdt; /* types of the parameters and the gradient buffer */
} mc_memory_plan_t;
void mc_trainer_memory(const mc_args_t *args, const mc_backend_t *be, mc_memory_plan_t *out);
/* The plan's lines ("> memory plan (per rank, device...):", one per part, the total), as the
 * start-up prints them; returns the total in bytes. */
double mc_memory_plan_print(FILE *out, const mc_args_t *a, const mc_memory_plan_t *plan,
                            const char *device);

/* Builds the parallel state (collective), the model with Megatron's buffer layout, optimizer
 * and schedule on the backend, with layout-invariant init. Returns 0, or -1 when memory does
 * not fit. */
int mc_trainer_init(mc_trainer_t *t, const mc_args_t *args, const mc_backend_t *be,
                    mc_comm_t *comm);
void mc_trainer_free(mc_trainer_t *t);

/* What a checkpoint holds for rank (tp_rank, pp_rank) of args' layout, on the backend: the model's
 * parameter table and buffer, the optimizer's state (every parameter of the rank: one
 * data-parallel rank) and the scheduler; no activations, communication or data (checkpoint
 * conversion). Free with mc_trainer_free. Returns 0, or -1 with one line in err. */
int mc_trainer_init_state(mc_trainer_t *t, const mc_args_t *args, const mc_backend_t *be,
                          int tp_rank, int pp_rank, char *err, size_t n);

/* Forward and backward over M microbatches in the pipeline schedule into the model's gradient
 * buffer (zeroed first), with Megatron's loss normalisation (section 5.3) and the loss nan
 * check, then finalize_model_grads (data-parallel reduction, sequence-parallel LayerNorm and
 * tied-embedding all-reduces); r gets the loss over the global batch on every rank. */
void mc_forward_backward(mc_trainer_t *t, const mc_microbatch_t *mbs, int M, mc_step_result_t *r);

/* Forward only over M microbatches in the pipeline schedule (evaluation, no dropout): the masked
 * loss sum and token count over the global batch, on every rank. */
void mc_forward_only(mc_trainer_t *t, const mc_microbatch_t *mbs, int M, double *loss_sum,
                     double *num_tokens);

/* The staging slots a step needs: the larger of a training and an evaluation step. */
int mc_staging_slots(const mc_args_t *a);

/* One optimizer step over M microbatches (M = args->num_microbatches): forward/backward with
 * Megatron's loss normalisation and loss scaling, nan checks, unscale and overflow check (a step
 * with inf/nan gradients is skipped: r->skipped), clip, Adam, scheduler advance by the global
 * batch when the step was applied. */
void mc_train_step(mc_trainer_t *t, const mc_microbatch_t *mbs, int M, mc_step_result_t *r);

/* The whole pretrain job (mock data): returns the process exit code. */
int mc_pretrain(mc_args_t *args);

#endif
