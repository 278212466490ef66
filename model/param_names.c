/* The GPT parameters' names in every format megatron-c reads and writes (model/param_names.h):
 * Megatron's local spec (gpt_layer_specs.py get_gpt_layer_local_spec), Transformer Engine's
 * (get_gpt_layer_with_transformer_engine_spec: the norms fused into linear_qkv and linear_fc1 as
 * layer_norm_weight/bias, which the local spec's sharded_state_dict_keys_map also gives
 * torch_dist), and Hugging Face's GPT2LMHeadModel, LlamaForCausalLM, MixtralForCausalLM and
 * Qwen3MoeForCausalLM. */
#include "model/param_names.h"

#include <stdio.h>
#include <string.h>

#define QKV "self_attention.linear_qkv"
#define PROJ "self_attention.linear_proj"
#define FC1 "mlp.linear_fc1"
#define FC2 "mlp.linear_fc2"
#define SHX "mlp.shared_experts"
#define NONE                                                                                       \
    {                                                                                              \
        NULL, MC_HF_ALL, false                                                                     \
    }
#define HF1(name, part, t)                                                                         \
    {                                                                                              \
        {name, part, t}, NONE                                                                      \
    }
#define NO_HF                                                                                      \
    {                                                                                              \
        NONE                                                                                       \
    }

const mc_param_name_t mc_param_names[MC_PK_COUNT] = {
    [MC_PK_WORD_EMBEDDINGS] = {.local = "embedding.word_embeddings.weight",
                               .split = MC_SPLIT_ROWS,
                               .hf = {HF1("transformer.wte.weight", MC_HF_ALL, false),
                                      HF1("model.embed_tokens.weight", MC_HF_ALL, false)}},
    [MC_PK_POSITION_EMBEDDINGS] = {.local = "embedding.position_embeddings.weight",
                                   .split = MC_SPLIT_NONE,
                                   .hf = {HF1("transformer.wpe.weight", MC_HF_ALL, false), NO_HF}},
    [MC_PK_INPUT_NORM_W] = {.local = "input_layernorm.weight",
                            .te = QKV ".layer_norm_weight",
                            .module_te = QKV,
                            .layer = true,
                            .split = MC_SPLIT_NONE,
                            .norm = true,
                            .hf = {HF1("ln_1.weight", MC_HF_ALL, false),
                                   HF1("input_layernorm.weight", MC_HF_ALL, false)}},
    [MC_PK_INPUT_NORM_B] = {.local = "input_layernorm.bias",
                            .te = QKV ".layer_norm_bias",
                            .module_te = QKV,
                            .layer = true,
                            .split = MC_SPLIT_NONE,
                            .norm = true,
                            .bias = true,
                            .hf = {HF1("ln_1.bias", MC_HF_ALL, false), NO_HF}},
    [MC_PK_PROJ_W] = {.local = PROJ ".weight",
                      .module_local = PROJ,
                      .module_te = PROJ,
                      .layer = true,
                      .split = MC_SPLIT_COLS,
                      .hf = {HF1("attn.c_proj.weight", MC_HF_ALL, true),
                             HF1("self_attn.o_proj.weight", MC_HF_ALL, false)}},
    [MC_PK_PROJ_B] = {.local = PROJ ".bias",
                      .module_local = PROJ,
                      .module_te = PROJ,
                      .layer = true,
                      .split = MC_SPLIT_NONE,
                      .bias = true,
                      .hf = {HF1("attn.c_proj.bias", MC_HF_ALL, false),
                             HF1("self_attn.o_proj.bias", MC_HF_ALL, false)}},
    [MC_PK_QKV_W] = {.local = QKV ".weight",
                     .module_local = QKV,
                     .module_te = QKV,
                     .layer = true,
                     .split = MC_SPLIT_ROWS,
                     .hf = {HF1("attn.c_attn.weight", MC_HF_QKV, true),
                            {{"self_attn.q_proj.weight", MC_HF_Q, false},
                             {"self_attn.k_proj.weight", MC_HF_K, false},
                             {"self_attn.v_proj.weight", MC_HF_V, false}}}},
    [MC_PK_QKV_B] = {.local = QKV ".bias",
                     .module_local = QKV,
                     .module_te = QKV,
                     .layer = true,
                     .split = MC_SPLIT_ROWS,
                     .bias = true,
                     .hf = {HF1("attn.c_attn.bias", MC_HF_QKV, false),
                            {{"self_attn.q_proj.bias", MC_HF_Q, false},
                             {"self_attn.k_proj.bias", MC_HF_K, false},
                             {"self_attn.v_proj.bias", MC_HF_V, false}}}},
    /* over one head's channels, whole on every tp rank; Qwen3's q_norm and k_norm */
    [MC_PK_Q_NORM_W] = {.local = "self_attention.q_layernorm.weight",
                        .layer = true,
                        .split = MC_SPLIT_NONE,
                        .norm = true,
                        .qk_norm = true,
                        .hf = {NO_HF, NO_HF, NO_HF,
                               HF1("self_attn.q_norm.weight", MC_HF_ALL, false)}},
    [MC_PK_Q_NORM_B] = {.local = "self_attention.q_layernorm.bias",
                        .layer = true,
                        .split = MC_SPLIT_NONE,
                        .norm = true,
                        .qk_norm = true,
                        .bias = true},
    [MC_PK_K_NORM_W] = {.local = "self_attention.k_layernorm.weight",
                        .layer = true,
                        .split = MC_SPLIT_NONE,
                        .norm = true,
                        .qk_norm = true,
                        .hf = {NO_HF, NO_HF, NO_HF,
                               HF1("self_attn.k_norm.weight", MC_HF_ALL, false)}},
    [MC_PK_K_NORM_B] = {.local = "self_attention.k_layernorm.bias",
                        .layer = true,
                        .split = MC_SPLIT_NONE,
                        .norm = true,
                        .qk_norm = true,
                        .bias = true},
    [MC_PK_PRE_MLP_NORM_W] = {.local = "pre_mlp_layernorm.weight",
                              .te = FC1 ".layer_norm_weight",
                              .module_te = FC1,
                              .layer = true,
                              .split = MC_SPLIT_NONE,
                              .norm = true,
                              .hf = {HF1("ln_2.weight", MC_HF_ALL, false),
                                     HF1("post_attention_layernorm.weight", MC_HF_ALL, false)}},
    [MC_PK_PRE_MLP_NORM_B] = {.local = "pre_mlp_layernorm.bias",
                              .te = FC1 ".layer_norm_bias",
                              .module_te = FC1,
                              .layer = true,
                              .split = MC_SPLIT_NONE,
                              .norm = true,
                              .bias = true,
                              .hf = {HF1("ln_2.bias", MC_HF_ALL, false), NO_HF}},
    [MC_PK_FC1_W] = {.local = FC1 ".weight",
                     .module_local = FC1,
                     .module_te = FC1,
                     .layer = true,
                     .split = MC_SPLIT_ROWS,
                     .glu = true,
                     .hf = {HF1("mlp.c_fc.weight", MC_HF_ALL, true),
                            {{"mlp.gate_proj.weight", MC_HF_GATE, false},
                             {"mlp.up_proj.weight", MC_HF_UP, false},
                             NONE}}},
    [MC_PK_FC1_B] = {.local = FC1 ".bias",
                     .module_local = FC1,
                     .module_te = FC1,
                     .layer = true,
                     .split = MC_SPLIT_ROWS,
                     .glu = true,
                     .bias = true,
                     .hf = {HF1("mlp.c_fc.bias", MC_HF_ALL, false),
                            {{"mlp.gate_proj.bias", MC_HF_GATE, false},
                             {"mlp.up_proj.bias", MC_HF_UP, false},
                             NONE}}},
    [MC_PK_FC2_W] = {.local = FC2 ".weight",
                     .module_local = FC2,
                     .module_te = FC2,
                     .layer = true,
                     .split = MC_SPLIT_COLS,
                     .hf = {HF1("mlp.c_proj.weight", MC_HF_ALL, true),
                            HF1("mlp.down_proj.weight", MC_HF_ALL, false)}},
    [MC_PK_FC2_B] = {.local = FC2 ".bias",
                     .module_local = FC2,
                     .module_te = FC2,
                     .layer = true,
                     .split = MC_SPLIT_NONE,
                     .bias = true,
                     .hf = {HF1("mlp.c_proj.bias", MC_HF_ALL, false),
                            HF1("mlp.down_proj.bias", MC_HF_ALL, false)}},
    /* An MoE layer's (Megatron's MoELayer, SequentialMLP experts): each expert's tensors are
     * parameters named mlp.experts.local_experts.<j>.linear_fc1.weight (model/moe.c writes j);
     * torch_dist's key, every layer's and expert's in one tensor [L, E, rows, cols], is .te. */
    [MC_PK_ROUTER_W] = {.local = "mlp.router.weight",
                        .layer = true,
                        .split = MC_SPLIT_NONE,
                        .hf = {NO_HF, NO_HF, HF1("block_sparse_moe.gate.weight", MC_HF_ALL, false),
                               HF1("mlp.gate.weight", MC_HF_ALL, false)}},
    [MC_PK_EXPERT_FC1_W] = {.local = "mlp.experts.local_experts.<j>.linear_fc1.weight",
                            .te = "mlp.experts.experts.linear_fc1.weight",
                            .layer = true,
                            .experts = true,
                            .split = MC_SPLIT_ROWS, /* over etp */
                            .glu = true,
                            .hf = {NO_HF,
                                   NO_HF,
                                   {{"block_sparse_moe.experts.<j>.w1.weight", MC_HF_GATE, false},
                                    {"block_sparse_moe.experts.<j>.w3.weight", MC_HF_UP, false},
                                    NONE},
                                   {{"mlp.experts.<j>.gate_proj.weight", MC_HF_GATE, false},
                                    {"mlp.experts.<j>.up_proj.weight", MC_HF_UP, false},
                                    NONE}}},
    [MC_PK_EXPERT_FC2_W] = {.local = "mlp.experts.local_experts.<j>.linear_fc2.weight",
                            .te = "mlp.experts.experts.linear_fc2.weight",
                            .layer = true,
                            .experts = true,
                            .split = MC_SPLIT_COLS, /* over etp */
                            .hf = {NO_HF, NO_HF,
                                   HF1("block_sparse_moe.experts.<j>.w2.weight", MC_HF_ALL, false),
                                   HF1("mlp.experts.<j>.down_proj.weight", MC_HF_ALL, false)}},
    /* The shared expert (SharedExpertMLP, a dense tp MLP of the layer's: ColumnParallelLinear
     * and RowParallelLinear, TEColumnParallelLinear and TERowParallelLinear in TE's spec);
     * gate_weight (--moe-shared-expert-gate) is whole on every tp rank, its gradient summed
     * over tp under sequence parallelism (its tokens: the rank's sequence rows). */
    [MC_PK_SHARED_GATE_W] = {.local = SHX ".gate_weight",
                             .layer = true,
                             .split = MC_SPLIT_NONE,
                             .hf = {NO_HF, NO_HF}},
    [MC_PK_SHARED_FC1_W] = {.local = SHX ".linear_fc1.weight",
                            .module_local = SHX ".linear_fc1",
                            .module_te = SHX ".linear_fc1",
                            .layer = true,
                            .split = MC_SPLIT_ROWS,
                            .glu = true,
                            .hf = {NO_HF, NO_HF}},
    [MC_PK_SHARED_FC2_W] = {.local = SHX ".linear_fc2.weight",
                            .module_local = SHX ".linear_fc2",
                            .module_te = SHX ".linear_fc2",
                            .layer = true,
                            .split = MC_SPLIT_COLS,
                            .hf = {NO_HF, NO_HF}},
    [MC_PK_FINAL_NORM_W] = {.local = "decoder.final_layernorm.weight",
                            .split = MC_SPLIT_NONE,
                            .norm = true,
                            .hf = {HF1("transformer.ln_f.weight", MC_HF_ALL, false),
                                   HF1("model.norm.weight", MC_HF_ALL, false)}},
    [MC_PK_FINAL_NORM_B] = {.local = "decoder.final_layernorm.bias",
                            .split = MC_SPLIT_NONE,
                            .norm = true,
                            .bias = true,
                            .hf = {HF1("transformer.ln_f.bias", MC_HF_ALL, false), NO_HF}},
    [MC_PK_OUTPUT_W] = {.local = "output_layer.weight",
                        .module_local = "output_layer",
                        .module_te = "output_layer",
                        .split = MC_SPLIT_ROWS,
                        .hf = {HF1("lm_head.weight", MC_HF_ALL, false),
                               HF1("lm_head.weight", MC_HF_ALL, false)}},
};

const char *const mc_hf_layer_prefix[MC_HF_CLASSES] = {"transformer.h", "model.layers",
                                                       "model.layers", "model.layers"};

const mc_hf_name_t *mc_hf_names_of(mc_pkind_t k, mc_hf_class_t c)
{
    const mc_hf_name_t *h = mc_param_names[k].hf[c];
    return h[0].name || c < MC_HF_MIXTRAL ? h : mc_param_names[k].hf[MC_HF_LLAMA];
}

const mc_pkind_t mc_hf_kind_order[MC_PK_COUNT] = {
    MC_PK_WORD_EMBEDDINGS, MC_PK_POSITION_EMBEDDINGS,
    MC_PK_INPUT_NORM_W,    MC_PK_INPUT_NORM_B,
    MC_PK_QKV_W,           MC_PK_QKV_B,
    MC_PK_Q_NORM_W,        MC_PK_Q_NORM_B,
    MC_PK_K_NORM_W,        MC_PK_K_NORM_B,
    MC_PK_PROJ_W,          MC_PK_PROJ_B,
    MC_PK_PRE_MLP_NORM_W,  MC_PK_PRE_MLP_NORM_B,
    MC_PK_FC1_W,           MC_PK_FC1_B,
    MC_PK_FC2_W,           MC_PK_FC2_B,
    MC_PK_FINAL_NORM_W,    MC_PK_FINAL_NORM_B,
    MC_PK_OUTPUT_W,        MC_PK_ROUTER_W,
    MC_PK_EXPERT_FC1_W,    MC_PK_EXPERT_FC2_W,
    MC_PK_SHARED_GATE_W,   MC_PK_SHARED_FC1_W,
    MC_PK_SHARED_FC2_W,
};

static void name_of(const mc_param_name_t *p, const char *suffix, int layer, char *buf, size_t n)
{
    if (p->layer) snprintf(buf, n, "decoder.layers.%d.%s", layer, suffix);
    else snprintf(buf, n, "%s", suffix);
}

void mc_param_name_local(mc_pkind_t k, int layer, char *buf, size_t n)
{
    name_of(&mc_param_names[k], mc_param_names[k].local, layer, buf, n);
}

void mc_param_name_expert(mc_pkind_t k, int layer, int expert, char *buf, size_t n)
{
    const char *local = mc_param_names[k].local, *j = strstr(local, "<j>");
    if (!j) {
        name_of(&mc_param_names[k], local, layer, buf, n);
        return;
    }
    snprintf(buf, n, "decoder.layers.%d.%.*s%d%s", layer, (int)(j - local), local, expert, j + 3);
}

void mc_param_name_te(mc_pkind_t k, int layer, char *buf, size_t n)
{
    const mc_param_name_t *p = &mc_param_names[k];
    name_of(p, p->te ? p->te : p->local, layer, buf, n);
}
