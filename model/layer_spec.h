/* The layer spec (Megatron-core's ModuleSpec of a TransformerLayer, gpt_layer_specs.py): which
 * norm, attention and MLP blocks a layer is made of, chosen per layer from the model's config.
 * A new kind of attention (ring attention, MLA) or MLP (experts) is a block file (model/block.h's
 * mc_block_ops_t, its parameters in the names table) and a spec here; the driver (model/gpt.c)
 * runs whatever the spec names. */
#ifndef MC_MODEL_LAYER_SPEC_H
#define MC_MODEL_LAYER_SPEC_H

#include "model/block.h"

typedef struct mc_layer_spec {
    const char *name;
    const mc_norm_ops_t *input_norm;   /* input_layernorm */
    const mc_block_ops_t *attention;   /* self_attention, then self_attn_bda */
    const mc_norm_ops_t *pre_mlp_norm; /* pre_mlp_layernorm */
    const mc_block_ops_t *mlp;         /* mlp, then mlp_bda */
} mc_layer_spec_t;

/* The spec of global layer `layer`, and the final norm (the block's final_layernorm). */
const mc_layer_spec_t *mc_layer_spec_of(const mc_gpt_config_t *c, int layer);
const mc_norm_ops_t *mc_final_norm_of(const mc_gpt_config_t *c);

/* Calls fn once for each kind of attention and MLP block any layer of the model uses (their
 * shared buffers and set-up). */
void mc_layer_spec_each_block(const mc_gpt_config_t *c, void (*fn)(const mc_block_ops_t *, void *),
                              void *ctx);

#endif
