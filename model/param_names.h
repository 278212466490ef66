/* The one table of the GPT parameters' names (model/param_names.c): per kind of parameter,
 * Megatron's local-spec name, Transformer Engine's (which torch_dist's sharded keys use too),
 * the tp linear module whose _extra_state follows it, how tp splits it (torch_dist's sharding
 * axis), and the Hugging Face tensors it becomes. The parameter table (model/params.c), the
 * legacy checkpoints (ckpt/model.c), torch_dist (ckpt/torchdist_shard.c, torchdist_save.c) and
 * the HF bridge (ckpt/hf_map.c) all read it; a new block's parameters are new rows. */
#ifndef MC_MODEL_PARAM_NAMES_H
#define MC_MODEL_PARAM_NAMES_H

#include <stdbool.h>
#include <stddef.h>

/* How a parameter is split over the tp ranks (Megatron's tensor_model_parallel attribute); the
 * value is the sharding axis of torch_dist. */
typedef enum {
    MC_SPLIT_NONE = -1,    /* duplicated on every tp rank (LayerNorms, row-parallel biases, wpe) */
    MC_SPLIT_ROWS = 0,     /* column-parallel weights and biases, vocab-parallel embeddings */
    MC_SPLIT_COLS = 1,     /* row-parallel weights */
    MC_SPLIT_ROWS_GLU = 2, /* SwiGLU's linear_fc1 [gate; up]: each half split by rows, a rank
                              holding [its gate rows; its up rows] (Megatron's layout) */
} mc_split_t;

/* Kinds of parameters, in Megatron's model.parameters() order (a layer's as its local spec
 * builds them: input_layernorm, linear_proj, linear_qkv, q/k_layernorm, pre_mlp_layernorm,
 * linear_fc1, linear_fc2; an MoE layer's router, experts and shared expert instead of the
 * MLP's). */
typedef enum {
    MC_PK_WORD_EMBEDDINGS,
    MC_PK_POSITION_EMBEDDINGS,
    MC_PK_INPUT_NORM_W, /* the first of a layer's */
    MC_PK_INPUT_NORM_B,
    MC_PK_PROJ_W,
    MC_PK_PROJ_B,
    MC_PK_QKV_W,
    MC_PK_QKV_B,
    MC_PK_Q_NORM_W,
    MC_PK_Q_NORM_B,
    MC_PK_K_NORM_W,
    MC_PK_K_NORM_B,
    MC_PK_PRE_MLP_NORM_W,
    MC_PK_PRE_MLP_NORM_B,
    MC_PK_FC1_W,
    MC_PK_FC1_B,
    MC_PK_FC2_W,
    MC_PK_FC2_B,
    MC_PK_ROUTER_W,     /* an MoE layer's (model/moe.c): mlp.router.weight [E, H] */
    MC_PK_EXPERT_FC1_W, /* each expert's linear_fc1 [FFN1, H] and linear_fc2 [H, FFN], expert */
    MC_PK_EXPERT_FC2_W, /* after expert */
    /* the shared expert's (model/moe_shared.c, SharedExpertMLP): its gate_weight [1, H] (its
     * own parameter, listed before its linears' as torch lists a module's own first), then
     * linear_fc1 [FFN1, H] and linear_fc2 [H, FFN] of the dense MLP's layout (the last of a
     * layer's) */
    MC_PK_SHARED_GATE_W,
    MC_PK_SHARED_FC1_W,
    MC_PK_SHARED_FC2_W,
    MC_PK_FINAL_NORM_W,
    MC_PK_FINAL_NORM_B,
    MC_PK_OUTPUT_W,
    MC_PK_COUNT
} mc_pkind_t;

/* The Hugging Face classes of the bridge (ckpt/hf.h). The MoE classes are Llama's layers with
 * their own names for the router and experts (and Qwen3's q/k norms): a kind without a name of
 * theirs takes Llama's (mc_hf_names_of). */
typedef enum {
    MC_HF_GPT2,
    MC_HF_LLAMA,
    MC_HF_MIXTRAL,   /* MixtralForCausalLM */
    MC_HF_QWEN3_MOE, /* Qwen3MoeForCausalLM */
    MC_HF_CLASSES
} mc_hf_class_t;

/* Which rows of a Megatron parameter an HF tensor holds. */
typedef enum {
    MC_HF_ALL,  /* every row (the first `rows` of the embedding and output layer) */
    MC_HF_Q,    /* linear_qkv's query rows, head after head */
    MC_HF_K,    /* its key rows, group after group */
    MC_HF_V,    /* its value rows */
    MC_HF_QKV,  /* [Q; K; V] (GPT-2's c_attn) */
    MC_HF_GATE, /* linear_fc1's first half (SwiGLU's gate) */
    MC_HF_UP,   /* its second half */
} mc_hf_part_t;

typedef struct {
    const char *name; /* a layer's after the class's "<prefix>.<layer>." (an expert's with
                         <j> for its number); NULL: no more */
    mc_hf_part_t part;
    bool transpose; /* stored [cols, rows] (GPT-2's Conv1D) */
} mc_hf_name_t;

typedef struct {
    const char *local; /* Megatron's local-spec name; a layer's after "decoder.layers.<l>." */
    const char *te;    /* Transformer Engine's: the norms fused into the linear that follows */
    /* the tp linear module (local and TE names) whose _extra_state follows its last parameter;
     * NULL outside one */
    const char *module_local, *module_te;
    bool layer;       /* a transformer layer's: names numbered, torch_dist stacked over layers */
    mc_split_t split; /* over tp */
    bool glu;         /* the GLU rule: MC_SPLIT_ROWS_GLU in a gated MLP (SwiGLU) */
    bool norm;        /* a norm's: its gradient is summed over tp under sequence parallelism */
    bool qk_norm;     /* q/k_layernorm's (norms too): summed over tp always, each rank
                         normalising its own heads; decay with --apply-wd-to-qk-layernorm */
    bool bias;        /* a bias (no weight decay, as every 1-D parameter) */
    bool experts;     /* an MoE layer's expert's: torch_dist stacks the experts' tensors along
                         an axis after the layers' ([L, E, rows, cols]) */
    mc_hf_name_t hf[MC_HF_CLASSES][3]; /* the HF tensors of each class, in order */
} mc_param_name_t;

extern const mc_param_name_t mc_param_names[MC_PK_COUNT];

/* HF's layer prefix of each class ("transformer.h", "model.layers"), and the kinds in the order
 * HF's modules list them (a layer's: norm, qkv, proj, norm, fc1, fc2). */
extern const char *const mc_hf_layer_prefix[MC_HF_CLASSES];
extern const mc_pkind_t mc_hf_kind_order[MC_PK_COUNT];

/* The HF tensors of kind k in class c (an MoE class's own, else Llama's). */
const mc_hf_name_t *mc_hf_names_of(mc_pkind_t k, mc_hf_class_t c);

/* A norm's weight (what --apply-layernorm-1p computes with as 1 + w). */
static inline bool mc_pkind_norm_weight(mc_pkind_t k)
{
    return mc_param_names[k].norm && !mc_param_names[k].bias;
}

/* The name of kind k of global layer `layer` (ignored outside the layers): Megatron's local or
 * Transformer Engine's, with the layer number; into buf[n]. */
void mc_param_name_local(mc_pkind_t k, int layer, char *buf, size_t n);
void mc_param_name_te(mc_pkind_t k, int layer, char *buf, size_t n);
/* An MoE layer's expert's (an experts row): its local name with the expert's number for <j>
 * ("decoder.layers.1.mlp.experts.local_experts.3.linear_fc1.weight"), in every format's
 * per-parameter names (Megatron's SequentialMLP, with the local and the TE spec alike). */
void mc_param_name_expert(mc_pkind_t k, int layer, int expert, char *buf, size_t n);

/* The router's persistent buffer with --moe-router-enable-expert-bias (TopKRouter's
 * expert_bias, fp32 [E]; its local_tokens_per_expert is not persistent): after the router's
 * weight in a layer's state dict, stacked over the layers in torch_dist as the weight is. */
#define MC_EXPERT_BIAS_NAME "mlp.router.expert_bias"

#endif
