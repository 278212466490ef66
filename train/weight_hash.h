/* --check-weight-hash-across-dp-replicas-interval: Megatron's check_param_hashes_across_dp_replicas
 * (core/utils.py) with cross_check=True, as train() and post_training_step_callbacks call it. */
#ifndef MC_TRAIN_WEIGHT_HASH_H
#define MC_TRAIN_WEIGHT_HASH_H

#include "trainer/trainer.h"

/* Collective over the world. Each rank hashes every parameter tensor it holds (SHA-256 of the
 * stored values), all-gathers the digests over its data-parallel group and compares them with
 * every replica's. Equal everywhere: the printing rank says ">>> Weight hashes match after N
 * iterations..." (Megatron's print_rank_0). Otherwise each rank that differs from its group's dp
 * rank 0 names the tensors, and the job stops with Megatron's assertion message. */
void mc_check_weight_hashes(mc_trainer_t *t);

#endif
