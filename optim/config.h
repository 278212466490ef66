/* The optimizer's configuration: Megatron's OptimizerConfig as megatron-c uses it (Adam, the
 * distributed optimizer, gradient clipping and the loss scaler), made once from the validated
 * arguments (trainer/config.c). The learning rate and weight decay come from the scheduler
 * (optim/lr.h). */
#ifndef MC_OPTIM_CONFIG_H
#define MC_OPTIM_CONFIG_H

#include <stdbool.h>

/* --optimizer muon (optim/muon.h): Megatron's TensorParallelMuon settings (the --muon-* flags). */
typedef enum { MC_MUON_SPECTRAL, MC_MUON_UNIT_RMS_NORM, MC_MUON_SHAPE_SCALING } mc_muon_scale_t;
typedef struct {
    bool on;
    double momentum, extra_scale;
    bool nesterov, split_qkv;
    bool bf16_matmul; /* --muon-fp32-matmul-prec medium: the Newton-Schulz GEMMs in bf16 */
    int ns_steps;
    char coefficients[24]; /* emerging_optimizers' coefficient type */
    mc_muon_scale_t scale;
} mc_muon_config_t;

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
    mc_muon_config_t muon; /* muon.on: 2-D weights by Muon, the other parameters by Adam */
} mc_optim_config_t;

#endif
