/* The `args` entry of a checkpoint: Megatron saves its whole argparse Namespace; megatron-c saves
 * the arguments it has, under Megatron's attribute names (mc_args_t's fields are Megatron's
 * dests), with Python's None where Megatron's default None was kept, plus the training progress
 * Megatron keeps in args (consumed_train_samples, consumed_valid_samples). Loading compares the
 * arguments that fix the checkpoint's layout, as Megatron's check_checkpoint_args does. */
#ifndef MC_TRAIN_CKPT_ARGS_H
#define MC_TRAIN_CKPT_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt/pyobj.h"
#include "cli/args.h"

/* argparse.Namespace of a (new reference, NULL when out of memory). */
mc_pyobj_t *mc_ckpt_args_namespace(const mc_args_t *a, int64_t consumed_train_samples,
                                   int64_t consumed_valid_samples);

/* The model shape and tensor/pipeline/virtual-pipeline layout in ns against a. Returns 0, or -1
 * with one line naming the first difference. Attributes the Namespace lacks are not compared
 * (older checkpoints, as Megatron's getattr defaults). */
int mc_ckpt_args_check(const mc_pyobj_t *ns, const mc_args_t *a, char *err, size_t n);

/* An integer attribute of ns (*out unchanged when absent or None). */
void mc_ckpt_args_int(const mc_pyobj_t *ns, const char *name, int64_t *out);

#endif
