/* Flag table, part mla_fp8: multi-latent attention, FP8/FP4 and quantized training, other
 * attention variants. Megatron-LM's flags that megatron-c recognises and refuses by name (or,
 * the no-ops, accepts and ignores), written first by scripts/megatron-flags-table.py from
 * Megatron's parsers at core_v0.15.0 and main (test/fixtures/megatron-flags-*.tsv); type,
 * default, group and help are Megatron's. */
#include "config/flags_table.h"

#define G_BIENCODER .group = "biencoder"
#define G_DISTRIBUTED .group = "distributed"
#define G_EAV .group = "experimental_attention_variant"
#define G_KITCHEN .group = "kitchen"
#define G_MLA .group = "mla"
#define G_MP .group = "mixed precision"
#define G_NS .group = "network size"
#define G_TC .group = "transformer configuration"
#define G_TE .group = "Transformer-Engine"

/* One flag per entry, its fields packed as written. */
/* clang-format off */
const mc_flag_t mc_flags_mla_fp8[] = {
    {.name = "--cache-mla-latents", G_MLA, TRUE_IF_GIVEN, TODO("multi-latent attention (MLA)"),
     .help = "If set caches the mla down projected latents with mla flash decode."},
    {.name = "--disable-dsa-indexer-rotate-activation", G_TC, FALSE_IF_GIVEN,
     TODO("other attention variants"),
     .help = "Whether DSA indexer should apply Hadamard rotate_activation to q/k before scoring."},
    {.name = "--disable-dsa-indexer-scoring-relu", G_TC, FALSE_IF_GIVEN,
     TODO("other attention variants"),
     .help = "Whether DSA indexer should apply ReLU to q@k^T scores before weighting."},
    {.name = "--disable-fp8-wgrad", G_TC, FALSE_IF_GIVEN, TODO("FP8/FP4 training"),
     .help = "When set to False, override FP8 config options and do the wgrad computation in "
             "higher precision."},
    {.name = "--dsa-indexer-head-dim", G_TC, INT64, TODO("other attention variants"),
     .help = "Dimension per DSA indexer head."},
    {.name = "--dsa-indexer-k-norm-epsilon", G_TC, FLOAT, TODO("other attention variants"),
     .help = "Optional epsilon override for the DSA indexer key LayerNorm."},
    {.name = "--dsa-indexer-k-norm-fp32", G_TC, TRUE_IF_GIVEN, TODO("other attention variants"),
     .help = "Whether DSA indexer key LayerNorm should run on fp32 inputs."},
    {.name = "--dsa-indexer-loss-coeff", G_TC, FLOAT, TODO("other attention variants"),
     .help = "Coefficient for the DSA indexer KL divergence loss. Set to 0 to disable indexer "
             "loss."},
    {.name = "--dsa-indexer-n-heads", G_TC, INT64, TODO("other attention variants"),
     .help = "Number of DSA indexer heads."},
    {.name = "--dsa-indexer-rope-interleaved", G_TC, TRUE_IF_GIVEN,
     TODO("other attention variants"),
     .help = "Whether DSA indexer RoPE should use MLA-style interleaving."},
    {.name = "--dsa-indexer-skip-topk-offset", G_TC, INT64, .def = "0",
     TODO("other attention variants"),
     .help = "Layer offset for DSA cross-layer top-k sharing."},
    {.name = "--dsa-indexer-topk", G_TC, INT64, TODO("other attention variants"),
     .help = "Number of top-k tokens to select in DSA indexer."},
    {.name = "--dsa-indexer-topk-freq", G_TC, INT64, .def = "1", TODO("other attention variants"),
     .help = "Frequency of DSA indexer top-k computation across layers. A value greater than 1 "
             "enables cross-layer top-k sharing."},
    {.name = "--dsa-indexer-use-sparse-loss", G_TC, TRUE_IF_GIVEN,
     TODO("other attention variants"),
     .help = "Whether to use sparse DSA indexer loss. If True, the indexer loss will be computed "
             "using the top-k indices."},
    {.name = "--dsa-kernel-backend", G_TC, CHOICE("none", "tilelang", "cudnn"), .def = "none",
     TODO("other attention variants"),
     .help = "Optional fused DSA kernel backend. ``none`` disables fused DSA kernels. Explicit "
             "``tilelang`` or ``cudnn`` enables only that backend. Unsupported DSA layouts "
             "continue to use the PyTorch fallback."},
    {.name = "--experimental-attention-variant", G_TC,
     CHOICE("gdn", "gdn2", "dsa", "gated_delta_net"), TODO("other attention variants"),
     .help = "Type of attention variant to use. Currently support gdn, gdn2 and dsa. gdn2 selects "
             "the GDN2 (Gated DeltaNet-2) variant of the gated delta net layer, with channel-wise "
             "decay, erase and write gates; it requires flash-linear-attention >= 0.5.1. Both gdn "
             "and gdn2 also select the layer built for the hybrid layer pattern symbol 'G'. "
             "'gated_delta_net' is a deprecated alias of 'gdn': it is normalized to 'gdn' in "
             "__post_init__ and emits a DeprecationWarning."},
    {.name = "--first-last-layers-bf16", G_TE, TRUE_IF_GIVEN, TODO("FP8/FP4 training"),
     .help = "If True, retains first and last N TransformerBlocks in BF16 as opposed to FP8."},
    {.name = "--fp4-format", G_TE, CHOICE("e2m1"), TODO("FP8/FP4 training"),
     .help = "If set, enables the use of FP4 precision through Transformer Engine. Currently only "
             "supports 'nvfp4' which uses NVFP4BlockScaling recipe (requires TE >= 2.7.0.dev0)."},
    {.name = "--fp4-param-gather", G_TE, TRUE_IF_GIVEN, TODO("FP8/FP4 training"),
     .help = "Keep the compute param in fp4 (do not use any other intermediate dtype) and perform "
             "the param all-gather in fp4."},
    {.name = "--fp4-quantizer-factory", G_TC, STRING, TODO("FP8/FP4 training"),
     .help = "Python import path to a callable quantizer factory, e.g., "
             "package.module.quantizer_factory. Required when fp4_recipe is custom."},
    {.name = "--fp4-recipe", G_TE, CHOICE("nvfp4", "custom"), .def = "nvfp4",
     TODO("FP8/FP4 training"),
     .help = "If set, enables the use of FP4 precision through Transformer Engine. Currently only "
             "'nvfp4' is supported which uses NVFP4BlockScaling recipe for Blackwell+ "
             "architecture."},
    {.name = "--fp8-amax-compute-algo", G_TE, CHOICE("most_recent", "max"), .def = "most_recent",
     TODO("FP8/FP4 training"),
     .help = "Algorithm used for choosing the `amax` value for the scaling factor computation. "
             "There are 2 predefined choices: `max` chooses the largest `amax` in the history "
             "window, while `most_recent` always chooses the most recently seen value."},
    {.name = "--fp8-amax-history-len", G_TE, INT64, .def = "1", TODO("FP8/FP4 training"),
     .help = "The length of the amax history window used for scaling factor computation."},
    {.name = "--fp8-interval", G_TE, INT64, .def = "1", TODO("FP8/FP4 training"),
     .help = "DEPRECATED from TransformerEngine v1.8.0. This flag is ignored. Controls how often "
             "the scaling factor is recomputed."},
    {.name = "--fp8-margin", G_TE, INT64, .def = "0", TODO("FP8/FP4 training"),
     .help = "Margin for the scaling factor computation."},
    {.name = "--fp8-output-proj", G_TC, TRUE_IF_GIVEN, TODO("FP8/FP4 training"),
     .help = "If True, run the LM-head output projection with a TE ColumnParallelLinear under the "
             "MXFP8 autocast context. Only active when fp8=True and fp8_recipe='mxfp8'."},
    {.name = "--fp8-quantizer-factory", G_TC, STRING, TODO("FP8/FP4 training"),
     .help = "Python import path to a callable quantizer factory, e.g., "
             "package.module.quantizer_factory. Required when fp8_recipe is custom."},
    {.name = "--indexer-batch-size", G_BIENCODER, INT64, .def = "128",
     TODO("other attention variants"),
     .help = "How large of batches to use when doing indexing jobs"},
    {.name = "--indexer-log-interval", G_BIENCODER, INT64, .def = "1000",
     TODO("other attention variants"),
     .help = "After how many batches should the indexer report progress"},
    {.name = "--keep-fp8-transpose-cache", G_DISTRIBUTED, TRUE_IF_GIVEN, TODO("FP8/FP4 training"),
     .help = "If set, keep the fp8 transpose cache when using Megatron FSDP."},
    {.name = "--kitchen-attention-backend", G_TC, CHOICE("sdpa", "fa"), .def = "sdpa",
     TODO("quantized training"),
     .help = "Which kitchen attention backend to use when use_kitchen_attention=True. \"sdpa\" "
             "for KitchenDotProductAttention, \"fa\" for KitchenFlashAttention."},
    {.name = "--kitchen-config-file", G_KITCHEN, STRING, TODO("quantized training"),
     .help = "Use the config .yaml file at the specified location to configure kitchen "
             "quantization."},
    {.name = "--kitchen-recipe-number", G_KITCHEN, INT64, TODO("quantized training"),
     .help = "Use a default kitchen recipe for all layers as defined by QAT_PARAMS index"},
    {.name = "--kv-lora-rank", G_MLA, INT64, .def = "32", TODO("multi-latent attention (MLA)"),
     .help = "Rank of Key and Value tensors' low rank representation."},
    {.name = "--linear-attention-freq", G_EAV, STRING, TODO("other attention variants"),
     .help = "Frequency between LA (linear attention) layers and SDPA (scaled dot-product "
             "attention) layers. Accepts either: - An integer N: Represents a (N-1):N ratio, "
             "meaning (N-1) LA layers for every 1 SDPA layer - A string containing a Python list "
             "expression that defines a custom pattern, e.g.: \"([1]*3+[0]*1)*3\" evaluates to "
             "[1,1,1,0,1,1,1,0,1,1,1,0] where 1 indicates an LA layer and 0 indicates a SDPA "
             "layer. Examples: \"([0]+[1]*23)\": 1 SDPA layer followed by 23 LA layers, "
             "\"([1]*3+[0]*2)*2\": Three LA layers followed by two SDPA layers, repeated twice."},
    {.name = "--mla-down-proj-fusion", G_MLA, TRUE_IF_GIVEN, TODO("multi-latent attention (MLA)"),
     .help = "Enable fused q/kv down-projection and fused input layernorm when backend supports. "
             "Otherwise fall back to the unfused MLA."},
    {.name = "--mrope-section", G_NS, INT_LIST(-1), TODO("YaRN and mRoPE positions"),
     .help = "Multimodal rope section is for channel dimension of temporal, height and width in "
             "rope calculation."},
    {.name = "--mscale", G_MLA, FLOAT, .def = "1.0", TODO("YaRN and mRoPE positions"),
     .help = "Mscale for YaRN RoPE in multi-latent attention."},
    {.name = "--mscale-all-dim", G_MLA, FLOAT, .def = "0.0", TODO("YaRN and mRoPE positions"),
     .help = "Mscale all dimensions for YaRN RoPE in multi-latent attention."},
    {.name = "--no-dsa-indexer-rotate-activation", G_TC, FALSE_IF_GIVEN,
     TODO("other attention variants"),
     .help = "Whether DSA indexer should apply Hadamard rotate_activation to q/k before scoring."},
    {.name = "--no-dsa-indexer-scoring-relu", G_TC, FALSE_IF_GIVEN,
     TODO("other attention variants"),
     .help = "Whether DSA indexer should apply ReLU to q@k^T scores before weighting."},
    {.name = "--no-fp8-wgrad", G_TE, FALSE_IF_GIVEN, TODO("FP8/FP4 training"),
     .help = "When set to False, override FP8 config options and do the wgrad computation in "
             "higher precision."},
    {.name = "--no-yarn-correction-range-round-to-int", G_NS, FALSE_IF_GIVEN,
     TODO("YaRN and mRoPE positions"),
     .help = "Do not round YaRN correction range endpoints to integers."},
    {.name = "--num-layers-at-end-in-bf16", G_TE, INT64, .def = "1", TODO("FP8/FP4 training"),
     .help = "Number of layers at the end of the model to keep in BF16 precision when "
             "first_last_layers_bf16 is True."},
    {.name = "--num-layers-at-start-in-bf16", G_TE, INT64, .def = "1", TODO("FP8/FP4 training"),
     .help = "Number of layers at the start of the model to keep in BF16 precision when "
             "first_last_layers_bf16 is True."},
    {.name = "--q-lora-rank", G_MLA, INT64, TODO("multi-latent attention (MLA)"),
     .help = "Rank of Query tensor's low rank representation."},
    {.name = "--qk-head-dim", G_MLA, INT64, .def = "128", TODO("multi-latent attention (MLA)"),
     .help = "Dimension of the head in the QK projection. q_head_dim = qk_head_dim + "
             "qk_pos_emb_head_dim"},
    {.name = "--qk-pos-emb-head-dim", G_MLA, INT64, .def = "64",
     TODO("multi-latent attention (MLA)"),
     .help = "Dimension of the position embedding in the QK projection."},
    {.name = "--reuse-grad-buf-for-mxfp8-param-ag", G_MP, TRUE_IF_GIVEN, TODO("FP8/FP4 training"),
     .help = "If True, reuse the grad buffer for MXFP8 parameter all-gather."},
    {.name = "--rotary-scaling-factor", G_MLA, FLOAT, .def = "1.0",
     TODO("multi-latent attention (MLA)"),
     .help = "Rotary scaling factor for the rotary embeddings."},
    {.name = "--use-kitchen-attention", G_TC, TRUE_IF_GIVEN, TODO("quantized training"),
     .help = "Use the kitchen extension for attention (instead of TE's attention)."},
    {.name = "--v-head-dim", G_MLA, INT64, .def = "128", TODO("multi-latent attention (MLA)"),
     .help = "Dimension of the head in the V projection."},
    {.name = "--yarn-beta-fast", G_NS, FLOAT, TODO("YaRN and mRoPE positions"),
     .help = "Beta fast for YaRN RoPE frequency correction."},
    {.name = "--yarn-beta-slow", G_NS, FLOAT, TODO("YaRN and mRoPE positions"),
     .help = "Beta slow for YaRN RoPE frequency correction."},
    {.name = "--yarn-correction-range-round-to-int", G_NS, TRUE_IF_GIVEN,
     TODO("YaRN and mRoPE positions"),
     .help = "Round YaRN correction range endpoints to integers."},
    {.name = "--yarn-original-max-position-embeddings", G_NS, INT64,
     TODO("YaRN and mRoPE positions"),
     .help = "Original maximum position embeddings for YaRN RoPE frequency correction."},
};
/* clang-format on */

const size_t mc_flags_mla_fp8_count = sizeof(mc_flags_mla_fp8) / sizeof(mc_flags_mla_fp8[0]);
