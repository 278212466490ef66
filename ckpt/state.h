/* The trainer's state as the entries of Megatron's checkpoint files, both ways (MEGATRON.md
 * section 9): the model chunks' state dicts (ckpt/model.c), the optimizer and the
 * learning-rate scheduler (ckpt/optim.c), the distributed optimizer's distrib_optim.pt
 * (ckpt/distrib_optim.c), and one rank's whole model_optim_rng.pt (ckpt/rank.c).
 * Files Megatron-LM wrote load too: its local or Transformer Engine names, its fp32, 16-bit
 * (fp32 master params) and distributed optimizer forms, its RNG state (not used). Loading
 * checks every name, shape and count against this run's layout and fails with one line (err)
 * saying what differs; it never leaves a half-applied state that training would continue from
 * (the caller ends the job on error). */
#ifndef MC_CKPT_STATE_H
#define MC_CKPT_STATE_H

#include <stdbool.h>
#include <stddef.h>

#include "torchfmt/pyobj.h"
#include "trainer/trainer.h"

/* ---- tensors ---- */

/* A tensor of type dt (float32, bfloat16 or float16) and the given shape holding the backend
 * buffer dev: the buffer itself on the CPU backend (no copy; it must not change until the tensor
 * is released), a host copy otherwise. */
mc_pyobj_t *mc_ckpt_host_tensor(const mc_backend_t *be, const void *dev, mc_dtype_t dt, int ndim,
                                const int64_t *shape);
/* The fp32 buffer dev as a tensor of dt (float32, bfloat16 or float16, rounded to nearest even):
 * fp32 weights written as a 16-bit model's. */
mc_pyobj_t *mc_ckpt_host_tensor_as(const mc_backend_t *be, const float *dev, int ndim,
                                   const int64_t *shape, mc_torch_dtype_t dt);
/* Copies tensor t (float32, float64, float16 or bfloat16, contiguous, of exactly this shape) into
 * the backend buffer dev of type dt, converting (rounding to nearest even) when the types differ.
 * Errors name `what`. */
int mc_ckpt_tensor_into(const mc_backend_t *be, void *dev, mc_dtype_t dt, const mc_pyobj_t *t,
                        int ndim, const int64_t *shape, const char *what, char *err, size_t n);

/* ---- parameter names and order in a file ---- */

/* Megatron names a layer's LayerNorms after the module that holds them: the local spec has
 * input_layernorm / pre_mlp_layernorm; Transformer Engine's spec fuses them into the linear that
 * follows (self_attention.linear_qkv.layer_norm_weight, mlp.linear_fc1.layer_norm_bias) and so
 * lists a layer's parameters as linear_proj, then linear_qkv's LayerNorm and weights, ... */
typedef enum { MC_CKPT_NAMES_LOCAL, MC_CKPT_NAMES_TE } mc_ckpt_names_t;

/* This rank's parameters in a file's order: chunk after chunk, each in Megatron's
 * named_parameters() order. It fixes the optimizer's state indices (torch numbers parameters
 * through the groups in that order) and the distributed optimizer's buffers (laid out in
 * reverse of it). */
typedef struct {
    int n;
    int *param;                   /* table indices */
    int chunk_end[MC_MAX_CHUNKS]; /* chunk c's are param[chunk_end[c-1] .. chunk_end[c]) */
    mc_ckpt_names_t names;
} mc_ckpt_order_t;

/* What a save writes: names from --transformer-impl (transformer_engine: TE's). */
mc_ckpt_names_t mc_ckpt_names_of(const mc_args_t *a);
int mc_ckpt_order_spec(const mc_gpt_t *m, mc_ckpt_names_t names, mc_ckpt_order_t *o);
/* What a file holds: the order of the model entries of ck (model, or model0, model1, ...),
 * which must name exactly this rank's parameters (in either spec's names; _extra_state entries
 * are skipped). Errors name the entry and the tensor. */
int mc_ckpt_order_file(const mc_gpt_t *m, const mc_pyobj_t *ck, mc_ckpt_order_t *o, char *err,
                       size_t n);
void mc_ckpt_order_free(mc_ckpt_order_t *o);
/* Megatron's key of parameter p in chunk c's state dict: its layer number made chunk-local, in
 * the spec's names (the names table, model/param_names.h). */
void mc_ckpt_param_key(const mc_gpt_t *m, int c, const mc_param_t *p, mc_ckpt_names_t names,
                       char *buf, size_t n);
/* The type of a run's model weights in its checkpoints: bfloat16, float16 or float32. */
mc_torch_dtype_t mc_ckpt_model_dtype(const mc_args_t *a);
/* Model weights at w (the model's buffer) as a checkpoint tensor of dt: a 16-bit model's own
 * weights, fp32 ones (training, or the converter's masters) rounded to dt, which is then what a
 * 16-bit run holds. */
mc_pyobj_t *mc_ckpt_weight_tensor(const mc_gpt_t *m, const void *w, int ndim, const int64_t *shape,
                                  mc_torch_dtype_t dt);
/* With --moe-router-enable-expert-bias and p a router's weight: the key of its layer's
 * expert_bias buffer in chunk c's state dict (after the weight) and the buffer ([E] fp32 on the
 * device); false otherwise. */
bool mc_ckpt_expert_bias_of(mc_gpt_t *m, int c, const mc_param_t *p, char *key, size_t n,
                            float **bias);
/* An MoE layer's expert's tensor p: its number among this rank's experts of the layer (the rank
 * holds experts ep_rank*E/ep .. (ep_rank+1)*E/ep - 1; p->expert is the global number), which
 * names it in the legacy files (local_experts.<j>). */
int mc_ckpt_local_expert(const mc_gpt_t *m, const mc_param_t *p);
/* "model" with one chunk, "model<c>" with several. */
void mc_ckpt_model_key(const mc_gpt_t *m, int c, char *buf, size_t n);

/* ---- model (Megatron's module state_dict, stage-local layer numbers) ---- */

/* Model chunk c's state dict in o's order and names: an OrderedDict with the layers numbered
 * from 0 within the chunk, this rank's tp slice of each tensor as dt (float32 or the 16-bit
 * type of a 16-bit model), and each linear's _extra_state after its parameters (None; an empty
 * uint8 tensor for Transformer Engine's modules). NULL when out of memory. */
mc_pyobj_t *mc_ckpt_model_dict(const mc_gpt_t *m, const mc_ckpt_order_t *o, int c,
                               mc_torch_dtype_t dt);
/* Loads chunk c's weights from its state dict (checked by mc_ckpt_order_file). */
int mc_ckpt_model_load(mc_gpt_t *m, int c, const mc_pyobj_t *sd, char *err, size_t n);

/* ---- optimizer and scheduler ---- */

/* The `optimizer` entry, Megatron's form for this run: FP32Optimizer's state_dict (the inner
 * torch optimizer's {state: {i: {step, exp_avg, exp_avg_sq}}, param_groups: [...]}) for fp32;
 * Float16OptimizerWithFloat16Params' {optimizer: {state, param_groups}, fp32_from_fp16_params}
 * for --bf16/--fp16; DistributedOptimizer's {optimizer: {param_groups}} (the state going to
 * distrib_optim.pt) with --use-distributed-optimizer. */
mc_pyobj_t *mc_ckpt_optimizer_dict(const mc_trainer_t *t, const mc_ckpt_order_t *o);
/* The same without any tensor: torch_dist's common.pt entry, whose tensors are sharded (the
 * per-parameter state becomes {common_step: step}; no fp32_from_fp16_params). */
mc_pyobj_t *mc_ckpt_optimizer_common(const mc_trainer_t *t, const mc_ckpt_order_t *o);
/* Expert parallelism: the experts' optimizer's part of it (Megatron's chained_1). */
mc_pyobj_t *mc_ckpt_optimizer_common_experts(const mc_trainer_t *t, const mc_ckpt_order_t *o);
/* Loads any of those forms (Megatron's with Apex/TE FusedAdam or torch's Adam). The fp32 master
 * parameters of a 16-bit checkpoint are the true weights: they replace what the model entries
 * gave. */
int mc_ckpt_optimizer_load(mc_trainer_t *t, const mc_pyobj_t *opt, const mc_ckpt_order_t *o,
                           char *err, size_t n);

/* Only the scalars of any of those forms (the grad scaler, the groups and the step; the step
 * may also be state's common_step): a torch_dist checkpoint's common.pt, whose tensors are
 * loaded separately. */
int mc_ckpt_optimizer_load_scalars(mc_trainer_t *t, const mc_pyobj_t *opt, char *err, size_t n);

/* `opt_param_scheduler`: OptimizerParamScheduler.state_dict(). Loading follows its
 * load_state_dict: values must equal this run's unless --override-opt-param-scheduler (keep
 * this run's) or --use-checkpoint-opt-param-scheduler (take the checkpoint's); num_steps is
 * always taken. */
mc_pyobj_t *mc_ckpt_scheduler_dict(const mc_lr_sched_t *s, const mc_args_t *a);
int mc_ckpt_scheduler_load(mc_lr_sched_t *s, const mc_args_t *a, const mc_pyobj_t *sd, char *err,
                           size_t n);

/* ---- distributed optimizer (distrib_optim.pt) ---- */

/* Megatron's gradient buffers of this rank, one per model chunk, in o's parameter order. */
typedef struct {
    int n_chunks;
    long *pos;                         /* [n_params]: start in its chunk's world tensor */
    int *chunk;                        /* [n_params] */
    long unpadded[MC_MAX_CHUNKS];      /* world tensor lengths */
    mc_grad_layout_t l[MC_MAX_CHUNKS]; /* buckets per chunk */
} mc_ckpt_buffers_t;
void mc_ckpt_buffers(const mc_trainer_t *t, const mc_ckpt_order_t *o, mc_ckpt_buffers_t *b);
/* Expert parallelism: Megatron's chained optimizer keeps the dense parameters' buffers (its
 * chained_0) and the experts' (chained_1, sharded over the expert data-parallel group) apart.
 * mc_ckpt_buffers_of lays out sel's parameters only (chunk -1 for the others). */
typedef enum { MC_CKPT_ALL = -1, MC_CKPT_DENSE = 0, MC_CKPT_EXPERTS = 1 } mc_ckpt_sel_t;
void mc_ckpt_buffers_of(const mc_trainer_t *t, const mc_ckpt_order_t *o, mc_ckpt_sel_t sel,
                        mc_ckpt_buffers_t *b);
void mc_ckpt_buffers_free(mc_ckpt_buffers_t *b);
/* The types of a buffer's parameters and gradients, torch's names ("float32", "bfloat16"), and
 * Megatron's key of a buffer: the tuple (param dtype, grad dtype) as torch globals. */
void mc_ckpt_buffer_dtypes(const mc_args_t *a, const char **param, const char **grad);
mc_pyobj_t *mc_ckpt_buffer_dtype_key(const mc_args_t *a);

/* The distributed optimizer's per-parameter states, in Megatron's names and order: the fp32
 * master "param", "exp_avg", "exp_avg_sq". */
extern const char *const mc_ckpt_state_keys[3];
/* World tensor k (an index of mc_ckpt_state_keys) of buffer c in a dp_zero dict, or NULL. */
const mc_pyobj_t *mc_ckpt_distopt_world(const mc_pyobj_t *d, int c, int k);

/* Collective over the data-parallel group: every rank's Adam shards gathered into Megatron's
 * get_parameter_state_dp_zero() dict (one buffer per model chunk, laid out in o's order),
 * returned on dp rank 0 (NULL on the others). */
mc_pyobj_t *mc_ckpt_distopt_gather(mc_trainer_t *t, const mc_ckpt_order_t *o);
/* The same for sel's buffers only, returned on the rank that writes them (the experts': expert-dp
 * rank 0); collective over the dp and expert-dp groups on every rank whatever sel. */
mc_pyobj_t *mc_ckpt_distopt_gather_of(mc_trainer_t *t, const mc_ckpt_order_t *o, mc_ckpt_sel_t sel);
/* This rank's shards from such a dict (every dp rank reads the file), and every parameter's
 * fp32 master value. */
int mc_ckpt_distopt_load(mc_trainer_t *t, const mc_pyobj_t *d, const mc_ckpt_order_t *o, char *err,
                         size_t n);
/* The same for sel's buffers only (expert parallelism: Megatron's chained optimizer's legacy
 * distrib_optim.pt is the list [dense, experts] of such dicts). */
int mc_ckpt_distopt_load_of(mc_trainer_t *t, const mc_pyobj_t *d, const mc_ckpt_order_t *o,
                            mc_ckpt_sel_t sel, char *err, size_t n);

/* ---- one rank's model_optim_rng.pt ---- */

/* rng_state: [{"generator": "philox4x32-10", "seed": seed}], megatron-c's only random state
 * (the dropout seed, DESIGN decision 6). */
mc_pyobj_t *mc_ckpt_rng_state(const mc_trainer_t *t);

/* Megatron's generate_state_dict for this rank, in its key order. NULL when out of memory. */
mc_pyobj_t *mc_ckpt_state_dict(const mc_trainer_t *t);

typedef struct {
    bool dist;       /* a torch_dist checkpoint: any parallel layout loads */
    bool release;    /* a release checkpoint: weights only, from iteration 0 */
    bool load_optim; /* optimizer and scheduler (not with --no-load-optim, --finetune, release) */
} mc_ckpt_apply_opts_t;

/* What loading found that the caller reports. */
typedef struct {
    bool foreign_rng;      /* Megatron-LM's generator states: not usable, ignored */
    bool weights_16bit;    /* the model entries were 16-bit */
    mc_ckpt_order_t order; /* the file's parameter order (for distrib_optim.pt); free it */
} mc_ckpt_applied_t;

/* The warning for a foreign_rng load (on the rank that prints). */
void mc_ckpt_warn_foreign_rng(void);

/* Megatron's load_checkpoint for one rank's model_optim_rng.pt (ck): checks the version and the
 * args, loads the model chunks, the optimizer and scheduler, the dropout seed (unless
 * --no-load-rng, --finetune or release), the iteration and the consumed samples. Returns 0, or
 * -1 with err (no path prefix). */
int mc_ckpt_apply(mc_trainer_t *t, const mc_pyobj_t *ck, const mc_ckpt_apply_opts_t *opts,
                  mc_ckpt_applied_t *out, char *err, size_t n);

#endif
