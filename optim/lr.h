/* Megatron's OptimizerParamScheduler (megatron/core/optimizer_param_scheduler.py), built as in
 * training.get_optimizer_param_scheduler (MEGATRON.md section 7).
 *
 * Units are samples. The trainer steps the schedule by the global batch (M*mbs*dp) after every
 * successful update; the constructor's step(0) means the first update uses lr(0). The value logged
 * for iteration i is read after that step, so it is lr(i*gbs) with a fixed batch size. */
#ifndef MC_OPTIM_LR_H
#define MC_OPTIM_LR_H

#include <stdint.h>

#include "config/args.h"

enum { MC_LR_CONSTANT, MC_LR_LINEAR, MC_LR_COSINE, MC_LR_INVERSE_SQRT };
enum { MC_WD_CONSTANT, MC_WD_LINEAR, MC_WD_COSINE };

typedef struct {
    double max_lr, min_lr, init_lr;
    /* A double, as in Megatron: with --lr-warmup-fraction it is fraction*decay_steps, which
     * need not be a whole number of samples. Otherwise it holds an integer. */
    double warmup_steps;
    int64_t decay_steps;
    int decay_style; /* MC_LR_* */
    double start_wd, end_wd;
    int64_t wd_incr_steps;
    int wd_incr_style; /* MC_WD_* */
    int64_t num_steps; /* samples consumed by successful updates */
    /* --decoupled-lr's group: its max_lr and min_lr (--decoupled-min-lr, else --min-lr, as
     * _update_min_and_max_lr_in_param_groups); decoupled_max_lr < 0 without one */
    double decoupled_max_lr, decoupled_min_lr;
} mc_lr_sched_t;

/* Builds the schedule from args (iteration-based: *_iters times the global batch; sample-based:
 * *_samples; --lr-warmup-fraction: fraction*decay_steps) and sets num_steps = 0. Megatron's
 * constructor asserts become user errors (exit 2). */
void mc_lr_sched_init(mc_lr_sched_t *s, const mc_args_t *args);

/* get_lr / get_wd at num_steps samples (independent of s->num_steps). */
double mc_lr_at(const mc_lr_sched_t *s, int64_t num_steps);
/* get_lr of the decoupled group (its max_lr and min_lr); -1 without --decoupled-lr. */
double mc_decoupled_lr_at(const mc_lr_sched_t *s, int64_t num_steps);
double mc_wd_at(const mc_lr_sched_t *s, int64_t num_steps);

/* step(increment): num_steps += increment. */
void mc_lr_sched_step(mc_lr_sched_t *s, int64_t increment);

#endif
