/* Adam with decoupled weight decay over the model's parameters (MEGATRON.md section 7), plus
 * global-norm gradient clipping. fp32 master params = the model's params for now (fp32
 * training); the 16-bit path adds separate master copies. */
#ifndef MC_OPTIM_ADAM_H
#define MC_OPTIM_ADAM_H

#include "cli/args.h"
#include "model/gpt.h"

typedef struct {
    mc_gpt_t *model;
    float *exp_avg, *exp_avg_sq;   /* laid out like the parameter buffer */
    int step;                      /* applied steps (Megatron's per-group step) */
    double beta1, beta2, eps, clip_grad;
} mc_adam_t;

/* Bytes of optimizer state for a model (the memory plan). */
long mc_adam_state_bytes(const mc_gpt_t *model);
/* Returns 0, or -1 when the state does not fit. */
int mc_adam_init(mc_adam_t *opt, mc_gpt_t *model, const mc_args_t *args);
void mc_adam_free(mc_adam_t *opt);

/* sqrt(sum of squared gradients) over all parameters, in double. */
double mc_grad_norm(const mc_gpt_t *model);
/* Megatron's clip_grad_norm: scale by clip/(norm+1e-6) when that is < 1. No-op for clip <= 0. */
void mc_clip_grads(mc_gpt_t *model, double total_norm, double clip_grad);
/* sqrt(sum of squared parameters), for --log-params-norm. */
double mc_params_norm(const mc_gpt_t *model);
long mc_grad_num_zeros(const mc_gpt_t *model);

/* One Adam step with learning rate lr and weight decay wd (times each param's wd_mult). */
void mc_adam_step(mc_adam_t *opt, double lr, double wd);

#endif
