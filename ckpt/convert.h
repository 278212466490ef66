/* `megatron-c convert-checkpoint`: reshards a checkpoint in the legacy torch layout or in
 * torch_dist's (megatron-c's or Megatron-LM's, MEGATRON.md section 9) to another tensor /
 * pipeline parallel size, virtual pipeline layout, distributed-optimizer setting and format
 * (flags: cli/convert_args.c; the target's format is the source's unless
 * --target-ckpt-format says otherwise).
 *
 * A torch_dist source is loaded into each target rank's host state as a training run at that
 * layout loads it (ckpt/torchdist.h); a torch_dist target is saved rank by rank as a save writes it,
 * its index from the records collected in-process (ckpt/convert_torchdist.c). For a legacy source:
 *
 * Every source rank's files are loaded as training would load them (ckpt/state.h, into a
 * rank's state on the host: mc_trainer_init_state), gathered into full tensors per parameter
 * (weights as fp32 master values, Adam moments), then every target rank's state is cut from them
 * and saved as a save would (same writers, atomic publish of ckpt/files.h). The optimizer
 * step, the scheduler, the iteration and the consumed samples carry over, so training continues
 * with the same losses; the source's args Namespace is kept with the layout amended, and for
 * Megatron-LM's files its optimizer group fields and grad scaler too. The vocabulary is re-padded
 * for the target tensor-parallel size (--true-vocab-size), new rows as Megatron's converter pads
 * them (copies of the last row; zero Adam moments). */
#ifndef MC_CKPT_CONVERT_H
#define MC_CKPT_CONVERT_H

#include <stdbool.h>
#include <stdint.h>

/* The options of `megatron-c convert-checkpoint` (filled by cli/convert_args.c). */
/* -1 in an int field: not given (keep the source's). */
typedef struct {
    const char *load_dir, *save_dir;           /* required */
    int64_t ckpt_step;                         /* 0: the tracker's iteration */
    int tp, pp;                                /* --target-tensor/pipeline-parallel-size */
    int layers_per_virtual_stage;              /* --target-num-layers-per-virtual-pipeline-stage */
    int virtual_stages;                        /* --target-num-virtual-stages-per-pipeline-rank */
    int first_stage_layers, last_stage_layers; /* --target-decoder-first/last-pipeline-num-layers */
    int account_embedding, account_loss;       /* 1: --target-account-for-embedding/loss-in-
                                                * pipeline-split given */
    int dp;                                    /* --target-data-parallel-size */
    int dist_opt;                 /* 1: --target-use-distributed-optimizer, 0: --target-no-... */
    int overlap_grad_reduce;      /* 1 / 0: --target-[no-]overlap-grad-reduce */
    int64_t ddp_bucket_size;      /* --target-ddp-bucket-size */
    const char *transformer_impl; /* --saver-transformer-impl; NULL: the source's names */
    int64_t true_vocab_size;      /* --true-vocab-size */
    const char *target_format;    /* --target-ckpt-format torch|torch_dist; NULL: the source's */
    bool overwrite;               /* --overwrite: --save-dir may be --load-dir's directory or
                                   * hold a later checkpoint */
} mc_convert_args_t;

/* Converts o->load_dir's checkpoint into o->save_dir. Returns 0; errors are one line (exit 2).
 * Refuses a --save-dir that is --load-dir's directory (also through a symbolic link) or that
 * holds a later iteration than the one converted, unless o->overwrite. */
int mc_convert_run(const mc_convert_args_t *o);

#endif
