/* Megatron-core's get_gpt_layer_local_spec: the norm is LayerNorm or RMSNorm (--normalization,
 * the same for input_layernorm, pre_mlp_layernorm, and the final norm), the attention
 * SelfAttention (its q/k_layernorm, rotary embeddings and grouped queries set by the config), the
 * MLP a dense one (its activation and gating set by the config), or, in the layers
 * --moe-layer-freq names, the MoE layer (get_gpt_decoder_block_spec's moe spec: the same norms,
 * its own pre_mlp_layernorm). */
#include "model/layer_spec.h"

#include "base/error.h"

static const mc_layer_spec_t k_layernorm = {
    .name = "layernorm + self-attention + mlp",
    .input_norm = &mc_norm_layernorm,
    .attention = &mc_self_attention,
    .pre_mlp_norm = &mc_norm_layernorm,
    .mlp = &mc_mlp,
};

static const mc_layer_spec_t k_rmsnorm = {
    .name = "rmsnorm + self-attention + mlp",
    .input_norm = &mc_norm_rmsnorm,
    .attention = &mc_self_attention,
    .pre_mlp_norm = &mc_norm_rmsnorm,
    .mlp = &mc_mlp,
};

static const mc_layer_spec_t k_layernorm_moe = {
    .name = "layernorm + self-attention + moe",
    .input_norm = &mc_norm_layernorm,
    .attention = &mc_self_attention,
    .pre_mlp_norm = &mc_norm_layernorm,
    .mlp = &mc_moe,
};

static const mc_layer_spec_t k_rmsnorm_moe = {
    .name = "rmsnorm + self-attention + moe",
    .input_norm = &mc_norm_rmsnorm,
    .attention = &mc_self_attention,
    .pre_mlp_norm = &mc_norm_rmsnorm,
    .mlp = &mc_moe,
};

const mc_layer_spec_t *mc_layer_spec_of(const mc_gpt_config_t *c, int layer)
{
    if (c->moe.num_experts && layer >= 0 && layer < MC_MOE_MAX_LAYERS && c->moe.layer[layer])
        return c->rms ? &k_rmsnorm_moe : &k_layernorm_moe;
    return c->rms ? &k_rmsnorm : &k_layernorm;
}

const mc_norm_ops_t *mc_final_norm_of(const mc_gpt_config_t *c)
{
    return c->rms ? &mc_norm_rmsnorm : &mc_norm_layernorm;
}

void mc_layer_spec_each_block(const mc_gpt_config_t *c, void (*fn)(const mc_block_ops_t *, void *),
                              void *ctx)
{
    /* the kinds in the order the layers first use them, each once */
    const mc_block_ops_t *seen[2 * 64];
    int n = 0;
    for (int l = 0; l < c->num_layers; l++) {
        const mc_layer_spec_t *s = mc_layer_spec_of(c, l);
        const mc_block_ops_t *both[2] = {s->attention, s->mlp};
        for (int k = 0; k < 2; k++) {
            bool known = false;
            for (int i = 0; i < n && !known; i++) known = seen[i] == both[k];
            if (known) continue;
            if (n == (int)(sizeof(seen) / sizeof(seen[0])))
                mc_fatal("internal error: more than %d kinds of blocks", n);
            seen[n++] = both[k];
            fn(both[k], ctx);
        }
    }
}
