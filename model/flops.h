/* The model's floating-point operations per iteration, as Megatron counts them for the log's
 * throughput, checkpoints' num_floating_point_operations_so_far and `megatron-c plan`. */
#ifndef MC_MODEL_FLOPS_H
#define MC_MODEL_FLOPS_H

#include <stdint.h>

#include "model/gpt.h"

/* Megatron main's num_floating_point_operations (training.py transformer_flops, as of
 * core_v0.16/0.17: the core attention inside the per-token bracket) for a GPT of config c (the
 * whole model: c->num_layers, the padded vocabulary), evaluated in Python's order:
 * B*s*[6*h*W + L*6*(h*(q+2kv) + q*s/2*2 + q*h) + 6*h*V_pad], q = head_dim*heads,
 * kv = head_dim*groups, e = 3 with swiglu else 2, and the MLP widths
 * W = ffn*e*L_dense + moe_ffn*topk*e*L_moe + shared*e*L_moe (L_moe: the MoE layers of
 * --moe-layer-freq; a dense model's W = ffn*e*L). For MHA with ffn = 4h this is
 * 72BsLh^2 + 6Bs^2Lh + 6BshV. (core_v0.15.0's count, without the causal halving, weighs the
 * layer kinds by float fractions num_moe/num_layers: megatron-c prints main's.) */
double mc_gpt_flops(const mc_gpt_config_t *c, int64_t batch_size);

#endif
