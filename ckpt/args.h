/* The `args` entry of a checkpoint: Megatron saves its whole argparse Namespace; megatron-c saves
 * the arguments it has, under Megatron's attribute names (mc_args_t's fields are Megatron's
 * dests), with Python's None where Megatron's default None was kept, plus the training progress
 * Megatron keeps in args (consumed_train_samples, consumed_valid_samples). Loading compares the
 * arguments that fix the checkpoint's layout, as Megatron's check_checkpoint_args does. */
#ifndef MC_CKPT_ARGS_H
#define MC_CKPT_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "torchfmt/pyobj.h"
#include "config/args.h"

/* argparse.Namespace of a (new reference, NULL when out of memory). */
mc_pyobj_t *mc_ckpt_args_namespace(const mc_args_t *a, int64_t consumed_train_samples,
                                   int64_t consumed_valid_samples);

/* The model shape and tensor/pipeline/virtual-pipeline layout in ns against a (any_layout: the
 * model shape only, for torch_dist checkpoints). Returns 0, or -1 with one line naming the first
 * difference. Attributes the Namespace lacks are not compared (older checkpoints, as Megatron's
 * getattr defaults). */
int mc_ckpt_args_check(const mc_pyobj_t *ns, const mc_args_t *a, bool any_layout, char *err,
                       size_t n);

/* An integer attribute of ns (*out unchanged when absent or None). */
void mc_ckpt_args_int(const mc_pyobj_t *ns, const char *name, int64_t *out);

/* The arguments a checkpoint was saved with, as mc_args_t: Megatron's defaults, then every
 * attribute of ns that megatron-c has a field for (derived values included, as saved; None as
 * "not given"). Returns 0, or -1 with one line naming an attribute of an unusable type. */
int mc_ckpt_args_from_namespace(const mc_pyobj_t *ns, mc_args_t *a, char *err, size_t n);

/* Whether megatron-c implements the model a checkpoint's args describe (the arguments
 * --use-checkpoint-args takes: swiglu, normalization, position_embedding_type, ...). Returns 0,
 * or -1 with one line naming the argument. */
int mc_ckpt_args_supported(const mc_pyobj_t *ns, char *err, size_t n);

/* A new Namespace holding ns's attributes (shared values): a checkpoint's args to amend. */
mc_pyobj_t *mc_ckpt_args_copy(const mc_pyobj_t *ns);

/* --use-checkpoint-args, the hook cli/ runs between parsing and validation (main.c installs it
 * with mc_args_set_hook, cli/cli.h): Megatron's
 * load_args_from_checkpoint, which reads the args of --load's first rank's file (the tracker's
 * iteration, or --ckpt-step) before validation and takes the model's arguments from it
 * (num_layers, hidden_size, ... as Megatron lists them; the tokenizer unless
 * --no-use-tokenizer-model-from-checkpoint-args; tp, pp and virtual stages with
 * --use-mp-args-from-checkpoint-args), printing "Setting X to V from checkpoint" on the
 * printing rank (set by mc_ckpt_args_install). A value megatron-c does not implement is one error
 * line. */
void mc_ckpt_args_use(mc_args_t *args, void *ctx);
void mc_ckpt_args_install(bool printer);

#endif
