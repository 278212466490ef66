/* Megatron's save_checkpoint / load_checkpoint for the legacy `--ckpt-format torch` layout
 * (MEGATRON.md section 9), collective over the world:
 *
 *   DIR/latest_checkpointed_iteration.txt
 *   DIR/iter_{:07d}/mp_rank_{tp:02d}[_{pp:03d}]/model_optim_rng.pt   (dp rank 0 of each tp, pp)
 *                                             /distrib_optim.pt     (--use-distributed-optimizer)
 *
 * model_optim_rng.pt holds Megatron's generate_state_dict keys: args, checkpoint_version (3.0),
 * iteration, model (model0, model1, ... with virtual pipeline stages), optimizer,
 * opt_param_scheduler, rng_state, num_floating_point_operations_so_far (ckpt/state.h,
 * ckpt/args.h). megatron-c's only random state is the dropout seed (DESIGN decision 6), so
 * rng_state is [{"generator": "philox4x32-10", "seed": seed}]; Megatron needs --no-load-rng to
 * load it. Training resumes exactly: dropout masks are keyed by (seed, iteration, sample), and
 * the data position is the iteration and the consumed samples kept in args. Megatron-LM's files
 * load too (ckpt/state.h); their RNG state is ignored with a warning.
 *
 * Saves are atomic (ckpt/files.h): files go to iter_N.tmp-<token>/, renamed to iter_N/
 * after every rank finished, and the tracker is replaced last, so a job killed at any moment
 * leaves the previous checkpoint loadable, with --async-save too (ckpt/async.h). Errors
 * (unwritable directory, missing or corrupted file, another layout) end the job with one line
 * naming the file, from whichever rank met it. */
#ifndef MC_CKPT_CHECKPOINT_H
#define MC_CKPT_CHECKPOINT_H

#include <stdbool.h>

#include "ckpt/async.h"
#include "trainer/trainer.h"

/* With --async-save and --save: the writer of asynchronous saves and its snapshot buffer
 * (ckpt/async.h), sized for t; NULL otherwise (saves are synchronous). Call once after
 * mc_trainer_init; mc_ckpt_free releases it. */
mc_ckpt_async_t *mc_ckpt_init(const mc_trainer_t *t);
void mc_ckpt_free(mc_ckpt_async_t *async);

/* Saves the trainer at t->iteration into --save. Waits for parameter gathers in flight. With an
 * asynchronous writer it first waits for a save still in flight, then returns once this save's
 * state is copied and the writer started; mc_ckpt_finalize publishes it later. */
void mc_ckpt_save(mc_trainer_t *t, mc_ckpt_async_t *async);

/* With an asynchronous save in flight (collective): publishes it when every rank's writer has
 * finished (blocking: after waiting for this rank's writer). A no-op otherwise (async NULL
 * included). The loop calls it at the start of each iteration, and blocking at the end of
 * training. Write errors end the job here with one line naming the file. */
void mc_ckpt_finalize(mc_trainer_t *t, mc_ckpt_async_t *async, bool blocking);

/* With --load: restores what Megatron's load_checkpoint restores (model; optimizer and scheduler
 * unless --no-load-optim or --finetune; the dropout seed unless --no-load-rng or --finetune;
 * iteration and consumed samples unless --finetune). Without a checkpoint there it warns and
 * returns false, or ends the job with --exit-on-missing-checkpoint. */
bool mc_ckpt_load(mc_trainer_t *t);

#endif
