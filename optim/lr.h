/* Megatron's OptimizerParamScheduler (megatron/core/optimizer_param_scheduler.py) over the
 * constructor's arguments, which trainer/config.c makes from the arguments as
 * training.get_optimizer_param_scheduler does (MEGATRON.md section 7).
 *
 * Units are samples. The trainer steps the schedule by the global batch (M*mbs*dp) after every
 * successful update; the constructor's step(0) means the first update uses lr(0). The value logged
 * for iteration i is read after that step, so it is lr(i*gbs) with a fixed batch size. */
#ifndef MC_OPTIM_LR_H
#define MC_OPTIM_LR_H

#include <stdbool.h>
#include <stdint.h>

/* --lr-decay-style and --weight-decay-incr-style, in the order of Megatron's names (the
 * checkpoints' strings: ckpt/optim.c). */
typedef enum { MC_LR_CONSTANT, MC_LR_LINEAR, MC_LR_COSINE, MC_LR_INVERSE_SQRT } mc_lr_decay_style_t;
typedef enum { MC_WD_CONSTANT, MC_WD_LINEAR, MC_WD_COSINE } mc_wd_incr_style_t;

/* The constructor's arguments, in samples. */
typedef struct {
    bool no_length; /* neither --train-iters nor --train-samples: no schedule can be made */
    double init_lr, max_lr, min_lr;
    double warmup_steps; /* fraction * decay_steps with --lr-warmup-fraction: not always whole */
    int64_t decay_steps;
    mc_lr_decay_style_t decay_style;
    double start_wd, end_wd;
    int64_t wd_incr_steps;
    mc_wd_incr_style_t wd_incr_style;
    /* --decoupled-lr's group: its max_lr and min_lr; decoupled_max_lr < 0 without one */
    double decoupled_max_lr, decoupled_min_lr;
    /* --use-mup's hidden group (width_mult != 1): max_lr and min_lr x 1/width_mult;
     * mup_max_lr <= 0 without one */
    double mup_max_lr, mup_min_lr;
} mc_lr_config_t;

typedef struct {
    double max_lr, min_lr, init_lr;
    /* A double, as in Megatron: with --lr-warmup-fraction it is fraction*decay_steps, which
     * need not be a whole number of samples. Otherwise it holds an integer. */
    double warmup_steps;
    int64_t decay_steps;
    int decay_style; /* mc_lr_decay_style_t */
    double start_wd, end_wd;
    int64_t wd_incr_steps;
    int wd_incr_style; /* mc_wd_incr_style_t */
    int64_t num_steps; /* samples consumed by successful updates */
    /* --decoupled-lr's group: its max_lr and min_lr (--decoupled-min-lr, else --min-lr, as
     * _update_min_and_max_lr_in_param_groups); decoupled_max_lr < 0 without one */
    double decoupled_max_lr, decoupled_min_lr;
    double mup_max_lr, mup_min_lr; /* MuP's hidden group; mup_max_lr <= 0 without one */
} mc_lr_sched_t;

/* The schedule of c with num_steps = 0. Megatron's constructor asserts become user errors
 * (exit 2). */
void mc_lr_sched_init(mc_lr_sched_t *s, const mc_lr_config_t *c);

/* get_lr / get_wd at num_steps samples (independent of s->num_steps). */
double mc_lr_at(const mc_lr_sched_t *s, int64_t num_steps);
/* get_lr of the decoupled group (its max_lr and min_lr); -1 without --decoupled-lr. */
double mc_decoupled_lr_at(const mc_lr_sched_t *s, int64_t num_steps);
/* get_lr of MuP's hidden group; -1 without one (then it is the main group's). */
double mc_mup_lr_at(const mc_lr_sched_t *s, int64_t num_steps);
double mc_wd_at(const mc_lr_sched_t *s, int64_t num_steps);

/* step(increment): num_steps += increment. */
void mc_lr_sched_step(mc_lr_sched_t *s, int64_t increment);

#endif
