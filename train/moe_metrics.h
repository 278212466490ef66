/* Megatron's track_moe_metrics (moe_utils.py, core_v0.15.0; training_log's call): the MoE losses
 * of one training iteration as the log line and TensorBoard show them. */
#ifndef MC_TRAIN_MOE_METRICS_H
#define MC_TRAIN_MOE_METRICS_H

#include "trainer/trainer.h"

/* The tracked losses of the model (training_log's track_names, in its order): their kinds into
 * kinds[0..n), n returned (0 for a dense model). */
int mc_moe_tracked(const mc_gpt_config_t *c, mc_moe_loss_t kinds[MC_MOE_LOSSES]);

/* Every rank calls it once per training iteration of M microbatches (collectives): the model's
 * tracker (each layer's loss / coeff summed over the microbatches, float32) summed over the
 * pipeline stages, global_load_balancing_loss's over tp x dp x cp too, averaged over dp x cp,
 * times 1 / M; value[k] = the sum over the layers / the MoE layers, for each kind k (indexed by
 * mc_moe_loss_t); layers (NULL: not wanted) gets each layer's scaled value [MC_MOE_LOSSES]
 * [num_layers]. Nothing (zeros) for a dense model. */
void mc_moe_metrics(mc_trainer_t *t, int M, float value[MC_MOE_LOSSES], float *layers);

/* Token dropping's count, not in Megatron's log (which has none): with
 * --moe-expert-capacity-factor, every rank calls it at each log line (a collective); buf gets
 * the line printed after it, the (token, expert) assignments of the training forwards since the
 * last one summed over all ranks and layers, and how many were dropped. false (nothing) without
 * token dropping. */
bool mc_moe_dropped_line(mc_trainer_t *t, char *buf, size_t n);

#endif
