/* Adam with decoupled weight decay (MEGATRON.md section 7) over the parameter elements this rank
 * updates, plus the gradient statistics of those elements (norm, zeros) and clipping.
 * Without the distributed optimizer a rank updates every parameter; with it, only its shard of
 * every bucket (optim/distopt.c), and the state exists only for that shard.
 *
 * Precision (Megatron's Float16OptimizerWithFloat16Params / DistributedOptimizer): with a 16-bit
 * model the optimizer keeps fp32 master copies of its elements (`master`, laid out like the Adam
 * state), updates them, and writes them back rounded into the model's parameters; with a 16-bit
 * gradient buffer (fp16 without --accumulate-allreduce-grads-in-fp32) the gradients are first
 * copied to fp32 main grads (`main_grad`). In fp32 training both are the model's own buffers. */
#ifndef MC_OPTIM_ADAM_H
#define MC_OPTIM_ADAM_H

#include <stdbool.h>

#include "model/gpt.h"
#include "optim/config.h"

struct mc_muon;

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
    float *exp_avg, *exp_avg_sq; /* [state_len] */
    float *master;               /* [state_len] fp32 master params of a 16-bit model, else NULL */
    float *main_grad;            /* [state_len] fp32 copies of a 16-bit grad buffer, else NULL */
    mc_adam_tensor_t *step_list; /* [n_segs]: the segments as one multi-tensor Adam step */
    int step;                    /* applied steps (Megatron's per-group step) */
    double beta1, beta2, eps, clip_grad;
    /* MuP's hidden group (get_mup_config_overrides): with mup_eps > 0 the mup_hidden params step
     * with eps mup_eps and lr mup_lr (the caller sets it before each step) */
    double mup_eps, mup_lr;
    /* --optimizer muon (optim/muon.h): the parameters it steps are left out of Adam's steps */
    struct mc_muon *muon;
} mc_adam_t;

/* Every parameter whole, state laid out like the parameter buffer. Caller frees *segs. */
void mc_opt_segments_full(const mc_gpt_t *m, mc_opt_seg_t **segs, int *n, long *state_len);

/* Bytes of optimizer state (the memory plan): Adam's moments, and the fp32 master params and main
 * grads when the model's params or grads are 16-bit. */
long mc_adam_state_bytes(long state_len, mc_dtype_t dt, mc_dtype_t gdt);
/* Takes ownership of segs. Returns 0, or -1 when the state does not fit. */
int mc_adam_init(mc_adam_t *opt, mc_gpt_t *model, const mc_optim_config_t *c, mc_opt_seg_t *segs,
                 int n_segs, long state_len);
void mc_adam_free(mc_adam_t *opt);

/* The fp32 master params and main grads of segment s (the model's buffers in fp32 training). */
float *mc_opt_param(const mc_adam_t *opt, const mc_opt_seg_t *s);
float *mc_opt_grad(const mc_adam_t *opt, const mc_opt_seg_t *s);

/* Master params from the model's (16-bit) params: at start-up, and after loading weights without
 * optimizer state. No-op in fp32 training. */
void mc_opt_master_from_model(mc_adam_t *opt);
/* Megatron's _copy_model_grads_to_main_grads: fp32 main grads from a 16-bit grad buffer. No-op
 * when the grad buffer is fp32. */
void mc_opt_prepare_grads(mc_adam_t *opt);
/* Multiplies this rank's main grads by inv_scale and reports whether any is inf or nan
 * (Megatron's _unscale_main_grads_and_check_for_nan, before the found-inf reduction). */
bool mc_opt_unscale_and_check(mc_adam_t *opt, float inv_scale);

/* Sums over this rank's elements (tp duplicates on tp rank 0 only), in double; callers reduce
 * them over the right group. */
double mc_opt_grad_sumsq(const mc_adam_t *opt);
double mc_opt_grad_zeros(const mc_adam_t *opt);
/* Megatron's clip_grad_norm: scale this rank's gradients by clip/(norm+1e-6) when that is < 1.
 * No-op for clip <= 0. */
void mc_clip_grads(mc_adam_t *opt, double total_norm, double clip_grad);
/* Scales this rank's main gradients (clipping). */
void mc_opt_scale_grads(mc_adam_t *opt, float s);
/* Scales this rank's elements of the model's gradient buffer (the per-token loss normalisation,
 * before the main grads are prepared). */
void mc_opt_scale_model_grads(mc_adam_t *opt, float s);
/* Sum of squared parameters held here (every parameter is present on every dp rank; a tp
 * duplicate counts on tp rank 0 only); reduced over the model-parallel group it gives the
 * square of --log-params-norm. */
double mc_params_sumsq(const mc_gpt_t *model);
/* The same over this rank's fp32 master params (Megatron's params norm of a bf16 model, which
 * reads the main params): reduced like the gradient statistics. */
double mc_opt_master_sumsq(const mc_adam_t *opt);
/* Expert parallelism (Megatron's chained dense and expert optimizers): mc_opt_grad_sumsq and
 * mc_params_sumsq (mc_opt_master_sumsq) over the expert parameters only (experts) or the others only (!experts). */
double mc_opt_grad_sumsq_of(const mc_adam_t *opt, bool experts);
double mc_opt_master_sumsq_of(const mc_adam_t *opt, bool experts);
double mc_params_sumsq_of(const mc_gpt_t *model, bool experts);

/* One Adam step with learning rate lr and weight decay wd (times each param's wd_mult) on the
 * master params, which are then copied (rounded) into a 16-bit model's params. decoupled_lr >= 0
 * is the learning rate of the embedding and output layer (--decoupled-lr: Megatron's
 * is_decoupled_lr parameter group, a second optimizer group stepped with its own lr). */
void mc_adam_step(mc_adam_t *opt, double lr, double decoupled_lr, double wd);
/* The same step in two parts (Megatron's ChainedOptimizer of the first model chunk's optimizer
 * and the others' with --overlap-param-gather-with-optimizer-step): the segments of parameters
 * [first, first + n), then between(ctx, first, n) (their parameter all-gather starts), then the
 * rest. The updates are the same elementwise arithmetic as mc_adam_step's. */
void mc_adam_step_first(mc_adam_t *opt, double lr, double decoupled_lr, double wd, int first, int n,
                        void (*between)(void *ctx, int first, int n), void *ctx);

#endif
