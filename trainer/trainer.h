/* The rank's training state and its initialisation: Megatron's model, DDP (gradient buffers and
 * buckets), optimizer, scheduler and loss scaler with the counters of training, on one backend and
 * communicator, with the pipeline executor a step runs them in. What a training step runs on
 * (train/), what checkpoints save and load (ckpt/), what `megatron-c plan` sizes (plan/). */
#ifndef MC_TRAINER_TRAINER_H
#define MC_TRAINER_TRAINER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "comm/comm.h"
#include "comm/state.h"
#include "comm/timers.h"
#include "config/args.h"
#include "model/gpt.h"
#include "trainer/config.h"
#include "optim/adam.h"
#include "optim/lr.h"
#include "optim/scaler.h"
#include "parallel/grads.h"
#include "parallel/pipeline.h"

typedef struct {
    const mc_args_t *args; /* validated; checkpoints write and check them (Megatron's args) */
    mc_run_config_t cfg;   /* the components' configs, made from args (trainer/config.h) */
    const mc_backend_t *be;
    mc_comm_t *comm;
    mc_parallel_t par; /* groups and this rank's coordinates */
    mc_gpt_t model;
    mc_ddp_t ddp;       /* gradient buckets, reduction and parameter gather */
    mc_pipeline_t pipe; /* the schedule executor (every layout, pp = 1 included) */
    mc_adam_t opt;
    mc_scaler_t scaler; /* loss scaling (fp16, or --loss-scale) */
    mc_lr_sched_t sched;
    mc_timers_t timers; /* --timing-log-level */

    int64_t iteration;
    int64_t consumed_train_samples, consumed_valid_samples;
} mc_trainer_t;

/* Builds the parallel state (collective), the model with Megatron's buffer layout, optimizer
 * and schedule of cfg (args' configs: mc_run_config) on the backend, with layout-invariant init.
 * Returns 0, or -1 when memory does not fit. */
int mc_trainer_init(mc_trainer_t *t, const mc_args_t *args, const mc_run_config_t *cfg,
                    const mc_backend_t *be, mc_comm_t *comm);
void mc_trainer_free(mc_trainer_t *t);

/* What a checkpoint holds for rank (tp_rank, pp_rank) of args' layout, on the backend: the model's
 * parameter table and buffer, the optimizer's state (every parameter of the rank: one
 * data-parallel rank) and the scheduler; no activations, communication or data (checkpoint
 * conversion). Free with mc_trainer_free. Returns 0, or -1 with one line in err. */
int mc_trainer_init_state(mc_trainer_t *t, const mc_args_t *args, const mc_backend_t *be,
                          int tp_rank, int pp_rank, char *err, size_t n);
/* The same for expert-parallel rank ep_rank of args' layout (its experts only; -1, as
 * mc_trainer_init_state: every expert). */
int mc_trainer_init_state_ep(mc_trainer_t *t, const mc_args_t *args, const mc_backend_t *be,
                             int tp_rank, int pp_rank, int ep_rank, char *err, size_t n);

/* Sums the shared_embedding parameters' elements of buf (params or grads, of type dt) over the
 * embedding group: the first stage's word embeddings and the last stage's output copy (tied
 * embeddings with pp > 1). No-op on other ranks and layouts. */
void mc_trainer_embedding_all_reduce(mc_trainer_t *t, void *buf, mc_dtype_t dt);

/* Megatron's num_floating_point_operations_so_far after t's iterations and consumed samples:
 * iterations x one batch's operations (model/flops.h), or with --rampup-batch-size those of the
 * consumed samples (the operations are linear in the batch). What checkpoints store and
 * progress.txt reports. */
double mc_trainer_flops_so_far(const mc_trainer_t *t);

/* ---- the memory plan (trainer/memory.c) ---- */

/* Bytes per rank of what mc_trainer_init allocates on backend be with args and their configs. */
typedef struct {
    double params, grads, optimizer, activations, workspace;
    double snapshot;    /* --async-save with --save: the host copy of what a save writes */
    int stage;          /* the pipeline stage planned: the one that needs the most */
    int inflight;       /* its activation slots (microbatch x model chunk) */
    mc_dtype_t dt, gdt; /* types of the parameters and the gradient buffer */
} mc_memory_plan_t;
void mc_trainer_memory(const mc_args_t *args, const mc_run_config_t *cfg, const mc_backend_t *be,
                       mc_memory_plan_t *out);
/* The plan's lines ("> memory plan (per rank, device...):", one per part, the total), as the
 * start-up prints them (DESIGN decision 1); returns the total in bytes. */
double mc_memory_plan_print(FILE *out, const mc_args_t *a, const mc_memory_plan_t *plan,
                            const char *device);
/* "1.50 GiB", or "12.00 MiB" below a GiB. */
void mc_memory_format_bytes(char *buf, size_t n, double bytes);

#endif
