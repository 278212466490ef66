/* The Hugging Face bridge's mixture-of-experts classes (ckpt/hf.h): which of
 * MixtralForCausalLM and Qwen3MoeForCausalLM holds an MoE model, and what their config.json adds
 * to Llama's.
 *
 * Routing: both take softmax over all experts, then the top-k. Mixtral (and Qwen3 with
 * norm_topk_prob) divide the k probabilities by their sum, which is the softmax over the k
 * logits: Megatron's default (top-k of the logits, then softmax). Qwen3 without norm_topk_prob
 * keeps them as they are: Megatron's --moe-router-pre-softmax. Neither has token dropping, score
 * functions other than softmax, group-limited routing, a scaling factor, shared experts or
 * biases in the experts. Training-only settings (the load-balancing loss, router_aux_loss_coef,
 * router_jitter_noise) are not model weights and are not carried. */
#include <jansson.h>
#include <stdio.h>

#include "base/error.h"
#include "ckpt/hf.h"

/* What neither MoE class holds. */
static int refuse_moe(const mc_args_t *a, const mc_gpt_config_t *g, char *err, size_t n)
{
    const mc_moe_router_t *r = &g->moe.router;
    if (a->moe_shared_expert_intermediate_size)
        return mc_errf(err, n,
                       "--moe-shared-expert-intermediate-size: shared experts "
                       "(Qwen2MoeForCausalLM) are recognised but not implemented yet in the "
                       "Hugging Face bridge");
    if (r->sigmoid)
        return mc_errf(err, n,
                       "--moe-router-score-function sigmoid: MixtralForCausalLM and "
                       "Qwen3MoeForCausalLM route by softmax");
    if (r->group_topk)
        return mc_errf(err, n,
                       "--moe-router-group-topk: MixtralForCausalLM and Qwen3MoeForCausalLM "
                       "have no group-limited routing");
    if (r->scaling_factor && r->scaling_factor != 1.0)
        return mc_errf(err, n,
                       "--moe-router-topk-scaling-factor %g: MixtralForCausalLM and "
                       "Qwen3MoeForCausalLM do not scale the routing probabilities",
                       r->scaling_factor);
    if (a->moe_expert_capacity_factor_set)
        return mc_errf(err, n,
                       "--moe-expert-capacity-factor: MixtralForCausalLM and "
                       "Qwen3MoeForCausalLM drop no tokens");
    if (g->bias || g->qkv_bias)
        return mc_errf(err, n,
                       "%s: MixtralForCausalLM's and Qwen3MoeForCausalLM's experts have no "
                       "biases (add --disable-bias-linear)",
                       g->bias ? "--add-bias-linear" : "--add-qkv-bias");
    return 0;
}

int mc_hf_moe_class_of(const mc_args_t *a, const mc_gpt_config_t *g, mc_hf_class_t *c, char *err,
                       size_t n)
{
    if (refuse_moe(a, g, err, n) != 0) return -1;
    if (g->qk_norm) { /* Qwen3's q_norm and k_norm */
        *c = MC_HF_QWEN3_MOE;
        return 0;
    }
    if (g->moe.router.pre_softmax)
        return mc_errf(err, n,
                       "--moe-router-pre-softmax: MixtralForCausalLM renormalises the top-k "
                       "probabilities (Qwen3MoeForCausalLM's norm_topk_prob false does not: "
                       "that class has --qk-layernorm)");
    for (int l = 0; l < g->num_layers; l++)
        if (!g->moe.layer[l])
            return mc_errf(err, n,
                           "--moe-layer-freq: MixtralForCausalLM's layers are all MoE layers "
                           "(layer %d is dense; Qwen3MoeForCausalLM's mlp_only_layers holds "
                           "dense layers: that class has --qk-layernorm)",
                           l);
    *c = MC_HF_MIXTRAL;
    return 0;
}

/* The dense layers, Qwen3's mlp_only_layers. */
static json_t *dense_layers(const mc_gpt_config_t *g)
{
    json_t *l = json_array();
    for (int i = 0; i < g->num_layers; i++)
        if (!g->moe.layer[i]) json_array_append_new(l, json_integer(i));
    return l;
}

void mc_hf_moe_config(json_t *cfg, const mc_gpt_config_t *g, mc_hf_class_t c)
{
    const mc_moe_cfg_t *q = &g->moe;
    const bool mixtral = c == MC_HF_MIXTRAL;
    json_object_set_new(cfg, "architectures",
                        json_pack("[s]", mixtral ? "MixtralForCausalLM" : "Qwen3MoeForCausalLM"));
    json_object_set_new(cfg, "model_type", json_string(mixtral ? "mixtral" : "qwen3_moe"));
    json_object_del(cfg, "mlp_bias");
    if (mixtral) {
        json_object_del(cfg, "attention_bias");
        json_object_set_new(cfg, "intermediate_size", json_integer(q->ffn));
        json_object_set_new(cfg, "num_local_experts", json_integer(q->num_experts));
    } else {
        json_object_set_new(cfg, "moe_intermediate_size", json_integer(q->ffn));
        json_object_set_new(cfg, "num_experts", json_integer(q->num_experts));
        json_object_set_new(cfg, "norm_topk_prob", json_boolean(!q->router.pre_softmax));
        json_object_set_new(cfg, "decoder_sparse_step", json_integer(1));
        json_object_set_new(cfg, "mlp_only_layers", dense_layers(g));
        json_object_set_new(cfg, "use_sliding_window", json_false());
    }
    json_object_set_new(cfg, "num_experts_per_tok", json_integer(q->router.topk));
    json_object_set_new(cfg, "sliding_window", json_null());
    json_object_set_new(cfg, "output_router_logits", json_false());
}
