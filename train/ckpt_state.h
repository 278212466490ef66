/* The trainer's state as the entries of Megatron's checkpoint files, both ways (MEGATRON.md
 * section 9): the model chunks' state dicts (train/ckpt_model.c), the optimizer and the
 * learning-rate scheduler (train/ckpt_optim.c), the distributed optimizer's distrib_optim.pt
 * (train/ckpt_distopt.c). Loading checks every name, shape and count against this run's layout
 * and fails with one line (err) saying what differs; it never leaves a half-applied state that
 * training would continue from (the caller ends the job on error). */
#ifndef MC_TRAIN_CKPT_STATE_H
#define MC_TRAIN_CKPT_STATE_H

#include <stddef.h>

#include "ckpt/pyobj.h"
#include "train/train.h"

/* ---- tensors ---- */

/* A tensor of type dt (float32, bfloat16 or float16) and the given shape holding the backend
 * buffer dev: the buffer itself on the CPU backend (no copy; it must not change until the tensor
 * is released), a host copy otherwise. */
mc_pyobj_t *mc_ckpt_host_tensor(const mc_backend_t *be, const void *dev, mc_dtype_t dt, int ndim,
                                const int64_t *shape);
/* Copies tensor t (float32, float64, float16 or bfloat16, contiguous, of exactly this shape) into
 * the backend buffer dev of type dt, converting (rounding to nearest even) when the types differ.
 * Errors name `what`. */
int mc_ckpt_tensor_into(const mc_backend_t *be, void *dev, mc_dtype_t dt, const mc_pyobj_t *t, int ndim,
                        const int64_t *shape, const char *what, char *err, size_t n);

/* ---- model (Megatron's module state_dict, stage-local layer numbers) ---- */

/* Model chunk c's state dict: an OrderedDict of Megatron's names with the layers numbered from 0
 * within the chunk, this rank's tp slice of each tensor, and the linear layers' _extra_state
 * (None), in Megatron's module order. NULL when out of memory. */
mc_pyobj_t *mc_ckpt_model_dict(const mc_gpt_t *m, int c);
/* Loads chunk c from a state dict saved that way: exactly the chunk's names (_extra_state
 * entries are ignored), each of the local shape. */
int mc_ckpt_model_load(mc_gpt_t *m, int c, const mc_pyobj_t *sd, char *err, size_t n);

/* ---- optimizer and scheduler ---- */

/* The `optimizer` entry: without the distributed optimizer, FP32Optimizer's state_dict, which is
 * the inner torch optimizer's ({state: {i: {step, exp_avg, exp_avg_sq}}, param_groups: [...]});
 * with it, DistributedOptimizer's ({optimizer: {param_groups}}, the state going to
 * distrib_optim.pt). */
mc_pyobj_t *mc_ckpt_optimizer_dict(const mc_trainer_t *t);
int mc_ckpt_optimizer_load(mc_trainer_t *t, const mc_pyobj_t *opt, char *err, size_t n);

/* `opt_param_scheduler`: OptimizerParamScheduler.state_dict(). Loading follows its
 * load_state_dict: values must equal this run's unless --override-opt-param-scheduler (keep
 * this run's) or --use-checkpoint-opt-param-scheduler (take the checkpoint's); num_steps is
 * always taken. */
mc_pyobj_t *mc_ckpt_scheduler_dict(const mc_lr_sched_t *s, const mc_args_t *a);
int mc_ckpt_scheduler_load(mc_lr_sched_t *s, const mc_args_t *a, const mc_pyobj_t *sd, char *err,
                           size_t n);

/* ---- distributed optimizer (distrib_optim.pt) ---- */

/* Collective over the data-parallel group: every rank's Adam shards gathered into Megatron's
 * get_parameter_state_dp_zero() dict, returned on dp rank 0 (NULL on the others). */
mc_pyobj_t *mc_ckpt_distopt_gather(mc_trainer_t *t);
/* This rank's shards (params and Adam moments) from such a dict; every dp rank reads the file. */
int mc_ckpt_distopt_load(mc_trainer_t *t, const mc_pyobj_t *d, char *err, size_t n);

#endif
