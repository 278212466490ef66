/* Command line of `megatron-c convert-checkpoint` (ckpt/convert.h): the flags of
 * Megatron-LM's tools/checkpoint/convert.py that apply (--model-type, --load-dir, --save-dir,
 * the saver's --target-tensor-parallel-size, --target-pipeline-parallel-size and
 * --saver-transformer-impl, the loader's --true-vocab-size), plus what the virtual pipeline
 * stages and the distributed optimizer's file need. `--flag value` and `--flag=value`, the last
 * occurrence wins; every problem is one line through mc_user_error (exit 2). */
#ifndef MC_CLI_CONVERT_ARGS_H
#define MC_CLI_CONVERT_ARGS_H

#include <stdint.h>
#include <stdio.h>

/* -1 in an int field: not given (keep the source's). */
typedef struct {
    const char *load_dir, *save_dir; /* required */
    int64_t ckpt_step;               /* 0: the tracker's iteration */
    int tp, pp;                      /* --target-tensor/pipeline-parallel-size */
    int layers_per_virtual_stage;    /* --target-num-layers-per-virtual-pipeline-stage */
    int virtual_stages;              /* --target-num-virtual-stages-per-pipeline-rank */
    int first_stage_layers, last_stage_layers; /* --target-decoder-first/last-pipeline-num-layers */
    int dp;                          /* --target-data-parallel-size */
    int dist_opt;                    /* 1: --target-use-distributed-optimizer, 0: --target-no-... */
    int overlap_grad_reduce;         /* 1 / 0: --target-[no-]overlap-grad-reduce */
    int64_t ddp_bucket_size;         /* --target-ddp-bucket-size */
    const char *transformer_impl;    /* --saver-transformer-impl; NULL: the source's names */
    int64_t true_vocab_size;         /* --true-vocab-size */
} mc_convert_args_t;

/* Parses argv[0..argc) (after "convert-checkpoint"). Exits 0 after --help, 2 on an error. */
void mc_convert_args_parse(mc_convert_args_t *a, int argc, char **argv);
void mc_convert_args_help(FILE *f);

#endif
