/* Megatron's training loop for one rank: train steps over microbatches, logging, evaluation,
 * exit conditions, on the rank's state (trainer/trainer.h). Step and evaluation are exposed so
 * tests can drive them with their own microbatches. */
#ifndef MC_TRAIN_TRAIN_H
#define MC_TRAIN_TRAIN_H

#include <stdbool.h>

#include "config/args.h"
#include "data/source.h"
#include "trainer/trainer.h"

typedef struct {
    double loss_sum, num_tokens; /* over the global batch */
    float lm_loss;               /* Megatron's loss_reduced['lm loss'] (mc_log_loss_ratio) */
    bool skipped;                /* the loss scaler found inf/nan gradients: no update */
    double grad_norm;            /* pre-clip (not computed when skipped) */
    double num_zeros;            /* zeros in the gradients (--log-num-zeros-in-grad) */
    double lr;                   /* the learning rate this step used */
} mc_step_result_t;

/* Forward and backward over M microbatches in the pipeline schedule into the model's gradient
 * buffer (zeroed first), with Megatron's loss normalisation (section 5.3) and the loss nan
 * check, then finalize_model_grads (data-parallel reduction, sequence-parallel LayerNorm and
 * tied-embedding all-reduces); r gets the loss over the global batch on every rank. */
void mc_forward_backward(mc_trainer_t *t, const mc_microbatch_t *mbs, int M, mc_step_result_t *r);

/* Forward only over M microbatches in the pipeline schedule (evaluation, no dropout): the masked
 * loss sum and token count over the global batch, on every rank, as Megatron's float32 report
 * pair (mc_log_loss_report, summed over dp-cp). */
void mc_forward_only(mc_trainer_t *t, const mc_microbatch_t *mbs, int M, float report[2]);

/* One optimizer step over M microbatches (M = args->num_microbatches): forward/backward with
 * Megatron's loss normalisation and loss scaling, nan checks, unscale and overflow check (a step
 * with inf/nan gradients is skipped: r->skipped), clip, Adam, scheduler advance by the global
 * batch when the step was applied. */
void mc_train_step(mc_trainer_t *t, const mc_microbatch_t *mbs, int M, mc_step_result_t *r);

/* mc_train_step under Megatron's rerun state machine (train/rerun.h; NULL: none): the
 * forward-backward as often as the machine asks, then its decision: 0 and the optimizer step, or
 * the exit code (16, 17) without it, *checkpoint saying whether to save first. */
struct mc_rerun;
int mc_train_step_rerun(mc_trainer_t *t, struct mc_rerun *rerun, const mc_microbatch_t *mbs, int M,
                        mc_step_result_t *r, bool *checkpoint);

/* The run's machine, for the trainer's rank and device, reducing over its world. */
void mc_rerun_start(struct mc_rerun *rerun, mc_trainer_t *t);

/* The whole pretrain job on the validated arguments and this rank's data source (both from
 * cli/: mc_args_parse, mc_args_open_data), which it takes over; job_start: the wall-clock
 * (epoch) seconds the job started (--log-progress). Returns the process exit code. */
int mc_pretrain(const mc_args_t *args, mc_data_source_t *data, double job_start);

#endif
