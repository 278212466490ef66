/* What trainer/trainer.c and trainer/memory.c share. Internal to trainer/. */
#ifndef MC_TRAINER_INTERNAL_H
#define MC_TRAINER_INTERNAL_H

#include "trainer/trainer.h"

/* The optimizer's segments: every parameter, or this rank's shards with the distributed
 * optimizer. */
void mc_trainer_optimizer_segments(const mc_gpt_t *m, const mc_ddp_t *d, mc_opt_seg_t **segs,
                                   int *n, long *state_len);

/* The model config of pp rank pp_rank: its chunks, layers and activation slots. */
void mc_trainer_stage_config(mc_gpt_config_t *cfg, const mc_run_config_t *rc, int pp_rank);

#endif
