/* The optimizer's configuration: Megatron's OptimizerConfig as megatron-c uses it (Adam, the
 * distributed optimizer, gradient clipping and the loss scaler), made once from the validated
 * arguments (trainer/config.c). The learning rate and weight decay come from the scheduler
 * (optim/lr.h). */
#ifndef MC_OPTIM_CONFIG_H
#define MC_OPTIM_CONFIG_H

#include <stdbool.h>

typedef struct {
    double adam_beta1, adam_beta2, adam_eps;
    double clip_grad; /* the gradient norm is clipped to it; 0: no clipping */
    bool use_distributed_optimizer;
    /* the loss scaler (optim/scaler.h) */
    bool fp16, bf16;
    double loss_scale; /* > 0: a constant scale (--loss-scale); 0: not given */
    double initial_loss_scale, min_loss_scale;
    int loss_scale_window, hysteresis;
    /* --use-mup with width_mult != 1: Adam's eps of the hidden (matrix-like) parameters is
     * adam_eps x mup_hidden_mult (1/width_mult); 0: no MuP groups */
    double mup_hidden_mult;
} mc_optim_config_t;

#endif
