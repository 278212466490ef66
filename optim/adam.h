/* Adam with decoupled weight decay (MEGATRON.md section 7) over the parameter elements this rank
 * updates, plus the gradient statistics of those elements (norm, zeros) and clipping.
 * fp32 master params = the model's params (fp32 training); the 16-bit path adds separate master
 * copies. Without the distributed optimizer a rank updates every parameter; with it, only its
 * shard of every bucket (optim/distopt.c), and the state exists only for that shard. */
#ifndef MC_OPTIM_ADAM_H
#define MC_OPTIM_ADAM_H

#include <stdbool.h>

#include "cli/args.h"
#include "model/gpt.h"

/* A run of elements of one parameter: buffer offset, offset in the optimizer state, length. */
typedef struct {
    long off, state_off, len;
    int param;
} mc_opt_seg_t;

typedef struct {
    mc_gpt_t *model;
    mc_opt_seg_t *segs;
    int n_segs;
    long state_len;
    float *exp_avg, *exp_avg_sq;   /* [state_len] */
    int step;                      /* applied steps (Megatron's per-group step) */
    double beta1, beta2, eps, clip_grad;
} mc_adam_t;

/* Every parameter whole, state laid out like the parameter buffer. Caller frees *segs. */
void mc_opt_segments_full(const mc_gpt_t *m, mc_opt_seg_t **segs, int *n, long *state_len);

/* Bytes of optimizer state (the memory plan). */
long mc_adam_state_bytes(long state_len);
/* Takes ownership of segs. Returns 0, or -1 when the state does not fit. */
int mc_adam_init(mc_adam_t *opt, mc_gpt_t *model, const mc_args_t *args, mc_opt_seg_t *segs,
                 int n_segs, long state_len);
void mc_adam_free(mc_adam_t *opt);

/* Sums over this rank's elements (tp duplicates on tp rank 0 only), in double; callers reduce
 * them over the right group. */
double mc_opt_grad_sumsq(const mc_adam_t *opt);
double mc_opt_grad_zeros(const mc_adam_t *opt);
/* Megatron's clip_grad_norm: scale this rank's gradients by clip/(norm+1e-6) when that is < 1.
 * No-op for clip <= 0. */
void mc_clip_grads(mc_adam_t *opt, double total_norm, double clip_grad);
/* Scales this rank's gradients (the per-token loss normalisation). */
void mc_opt_scale_grads(mc_adam_t *opt, float s);
/* Sum of squared parameters held here (every parameter is present on every dp rank; a tp
 * duplicate counts on tp rank 0 only); reduced over the model-parallel group it gives the
 * square of --log-params-norm. */
double mc_params_sumsq(const mc_gpt_t *model);

/* One Adam step with learning rate lr and weight decay wd (times each param's wd_mult). */
void mc_adam_step(mc_adam_t *opt, double lr, double wd);

#endif
