/* `megatron-c convert-checkpoint`: reshards a checkpoint in the legacy torch layout (megatron-c's
 * or Megatron-LM's, MEGATRON.md section 9) to another tensor / pipeline parallel size, virtual
 * pipeline layout and distributed-optimizer setting (flags: cli/convert_args.h).
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
#ifndef MC_TRAIN_CKPT_CONVERT_H
#define MC_TRAIN_CKPT_CONVERT_H

/* The subcommand: argv[0] is "convert-checkpoint". Returns the exit code; errors are one line
 * (exit 2). */
int mc_convert_main(int argc, char **argv);

#endif
