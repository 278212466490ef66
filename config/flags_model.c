/* Flag table, part 1: the model (network size, regularization, initialization, mixed precision,
 * moe, Transformer-Engine, experimental). Defaults and help are Megatron-LM's (main, and the
 * explicit definitions of core_v0.15.0 where main generates them); see MEGATRON.md section 3. */
#include "config/flags_table.h"

#define NET .group = "network size"
#define REG .group = "regularization"
#define INIT .group = "initialization"
#define MIXED .group = "mixed precision"
#define MOE .group = "moe"
#define TE .group = "Transformer-Engine"
#define EXP .group = "experimental"

#define FP16_ONLY                                                                                  \
    "used with --fp16 (dynamic loss scaling); fp32 and bf16 training ignore it, "                  \
    "as in Megatron"

/* One flag per entry, its fields packed as written. */
/* clang-format off */
const mc_flag_t mc_flags_model[] = {
    /* ---- network size ---- */
    {.name = "--num-layers", NET, INT, FIELD(num_layers), GE(1), IMPLEMENTED,
     .help = "Number of transformer layers."},
    {.name = "--encoder-num-layers", NET, INT, GE(1), TODO("use --num-layers"),
     .help = "Number of encoder transformer layers."},
    {.name = "--hidden-size", NET, INT, FIELD(hidden_size), GE(1), IMPLEMENTED,
     .help = "Transformer hidden size."},
    {.name = "--ffn-hidden-size", NET, INT, FIELD(ffn_hidden_size), GE(1), IMPLEMENTED,
     .help = "Transformer Feed-Forward Network hidden size. This is set to 4*hidden-size if not "
             "provided"},
    {.name = "--num-attention-heads", NET, INT, FIELD(num_attention_heads), GE(1), IMPLEMENTED,
     .help = "Number of transformer attention heads."},
    {.name = "--attention-backend", NET, CHOICE("flash", "fused", "unfused", "local", "auto"),
     FIELD(attention_backend), .def = "auto",
     IMPLEMENTED_NOTE("auto, flash and fused run cuDNN's fused flash attention on the cuda backend "
                      "where cuDNN supports the case (bf16/fp16, head dims multiples of 8 up to "
                      "256, no --reset-attention-mask), the project's kernels otherwise; unfused "
                      "and local run the project's kernels; the start-up log names the choice. "
                      "Megatron needs --spec local with local; megatron-c does not"),
     .help = "Attention backend to use (flash,fused,unfused,local,auto). Defaults to auto"},
    {.name = "--kv-channels", NET, INT, FIELD(kv_channels), GE(1), IMPLEMENTED,
     .help = "Projection weights dimension in multi-head attention. This is set to "
             "args.hidden_size // args.num_attention_heads if not provided."},
    {.name = "--group-query-attention", NET, TRUE_IF_GIVEN, FIELD(group_query_attention),
     IMPLEMENTED, .help = "Use group-query attention."},
    {.name = "--num-query-groups", NET, INT, FIELD(num_query_groups), .def = "1", GE(1),
     IMPLEMENTED_NOTE("used with --group-query-attention; ignored otherwise, as in Megatron"),
     .help = "Number of query groups for group-query attention."},
    {.name = "--softmax-type", NET, CHOICE("learnable", "vanilla", "off-by-one"), .def = "vanilla",
     ONLY("the other softmax variants are not implemented yet", "vanilla"),
     .help = "Type of softmax to use for the attention. Supports both a fixed offset and "
             "learnable offset."},
    {.name = "--window-size", NET, STRING, TODO("sliding-window attention"),
     .help = "Window size for window attention. If not provided, window attention will be "
             "disabled."},
    {.name = "--max-position-embeddings", NET, INT, FIELD(max_position_embeddings), GE(1),
     IMPLEMENTED,
     .help = "Maximum number of position embeddings to use. This is the size of position "
             "embedding."},
    {.name = "--position-embedding-type", NET,
     CHOICE("learned_absolute", "rope", "yarn", "mrope", "relative", "none"),
     FIELD(position_embedding_type), .def = "learned_absolute",
     ONLY("yarn, mrope and relative are not implemented yet", "learned_absolute", "rope", "none"),
     .help = "Position embedding type."},
    {.name = "--use-rotary-position-embeddings", NET, TRUE_IF_GIVEN,
     FIELD(use_rotary_position_embeddings), IMPLEMENTED,
     .help = "Use rotary positional embeddings or not. Deprecated: use "
             "--position-embedding-type"},
    {.name = "--rotary-base", NET, INT, FIELD(rotary_base), .def = "10000", GE(1), IMPLEMENTED,
     .help = "Base to use for rotary positional embeddings, default 10000"},
    {.name = "--rotary-percent", NET, FLOAT, FIELD(rotary_percent), .def = "1.0", BETWEEN(0, 1),
     IMPLEMENTED,
     .help = "Percent of rotary dimension to use, default 100%"},
    {.name = "--rotary-interleaved", NET, TRUE_IF_GIVEN, FIELD(rotary_interleaved), IMPLEMENTED,
     .help = "Use interleaved rotary embedding."},
    {.name = "--rotary-seq-len-interpolation-factor", NET, INT,
     FIELD(rotary_seq_len_interpolation_factor), GE(1), IMPLEMENTED,
     .help = "Sequence length interpolation factor for rotary embeddings."},
    {.name = "--use-rope-scaling", NET, TRUE_IF_GIVEN, FIELD(use_rope_scaling), IMPLEMENTED,
     .help = "Apply rope scaling as used in llama3.x"},
    {.name = "--rope-scaling-factor", NET, FLOAT, FIELD(rope_scaling_factor), .def = "8.0", GT(0),
     IMPLEMENTED, .help = "Rope scaling factor in llama3.x models"},
    {.name = "--no-position-embedding", NET, FALSE_IF_GIVEN,
     FIELD_NAMED(add_position_embedding, "add_position_embedding"),
     IMPLEMENTED_NOTE("only with rope, as in Megatron (which refuses it otherwise)"),
     .help = "Disable position embedding. Deprecated: use --position-embedding-type"},
    {.name = "--make-vocab-size-divisible-by", NET, INT, FIELD(make_vocab_size_divisible_by),
     .def = "128", GE(1), IMPLEMENTED,
     .help = "Pad the vocab size to be divisible by this value. This is added for computational "
             "efficiency reasons."},
    {.name = "--normalization", NET, CHOICE("LayerNorm", "RMSNorm"), FIELD(normalization),
     .def = "LayerNorm", IMPLEMENTED,
     .help = "Which normalization technique to use."},
    {.name = "--norm-epsilon", NET, FLOAT, FIELD(norm_epsilon), .def = "1e-05", GT(0), IMPLEMENTED,
     .help = "Epsilon for layer norm and RMS norm."},
    {.name = "--apply-layernorm-1p", NET, TRUE_IF_GIVEN, FIELD(apply_layernorm_1p),
     IMPLEMENTED_NOTE("Transformer Engine's zero_centered_gamma, which Megatron's default "
                      "--transformer-impl gives every norm (input_layernorm, pre_mlp_layernorm, "
                      "q/k_layernorm, final_layernorm; LayerNorm and RMSNorm): the norm computes "
                      "with 1 + w, w starts at zero and is what checkpoints hold; 1 + w is "
                      "rounded to the parameter type with 16-bit parameters (TE adds the 1 in "
                      "fp32)"),
     .help = "Adjust LayerNorm weights such that they are centered around zero. This improves "
             "numerical stability."},
    {.name = "--apply-residual-connection-post-layernorm", NET, TRUE_IF_GIVEN,
     FIELD(apply_residual_connection_post_layernorm), IMPLEMENTED,
     .help = "If set, use original BERT residual connection ordering."},
    {.name = "--openai-gelu", NET, TRUE_IF_GIVEN,
     NOOP("ignored by Megatron-Core models (MEGATRON.md section 3)"),
     .help = "Use OpenAIs GeLU implementation. This option should not be used unless for "
             "backward compatibility reasons."},
    {.name = "--squared-relu", NET, TRUE_IF_GIVEN, FIELD(squared_relu), IMPLEMENTED,
     .help = "Use squared relu activation instead of default gelu"},
    {.name = "--swiglu", NET, TRUE_IF_GIVEN, FIELD(swiglu), IMPLEMENTED,
     .help = "Use gated linear units and SiLU activation instead of default gelu"},
    {.name = "--quick-geglu", NET, TRUE_IF_GIVEN, TODO("quick GeGLU activation"),
     .help = "Use quick geglu activation instead of default gelu"},
    {.name = "--untie-embeddings-and-output-weights", NET, TRUE_IF_GIVEN,
     FIELD(untie_embeddings_and_output_weights), IMPLEMENTED,
     .help = "Untie embeddings and output weights."},
    {.name = "--multi-latent-attention", NET, TRUE_IF_GIVEN, TODO("multi-latent attention"),
     .help = "Use multi-latent attention for model."},
    {.name = "--mtp-num-layers", NET, INT, GE(1), TODO("multi-token prediction"),
     .help = "Number of Multi-Token Prediction (MTP) Layers."},

    /* ---- regularization (Megatron keeps the optimizer constants here) ---- */
    {.name = "--attention-dropout", REG, FLOAT, FIELD(attention_dropout), .def = "0.1", PROBABILITY,
     IMPLEMENTED, .help = "Post attention dropout probability."},
    {.name = "--hidden-dropout", REG, FLOAT, FIELD(hidden_dropout), .def = "0.1", PROBABILITY,
     IMPLEMENTED, .help = "Dropout probability for hidden state transformer."},
    {.name = "--weight-decay", REG, FLOAT, FIELD(weight_decay), .def = "0.01", GE(0), IMPLEMENTED,
     .help = "Weight decay coefficient for L2 regularization."},
    {.name = "--start-weight-decay", REG, FLOAT, FIELD(start_weight_decay),
     SET_FLAG(start_weight_decay_set), GE(0), IMPLEMENTED,
     .help = "Initial weight decay coefficient for L2 regularization."},
    {.name = "--end-weight-decay", REG, FLOAT, FIELD(end_weight_decay),
     SET_FLAG(end_weight_decay_set), GE(0), IMPLEMENTED,
     .help = "End of run weight decay coefficient for L2 regularization."},
    {.name = "--weight-decay-incr-style", REG, CHOICE("constant", "linear", "cosine"),
     FIELD(weight_decay_incr_style), .def = "constant", IMPLEMENTED,
     .help = "Weight decay increment function."},
    {.name = "--clip-grad", REG, FLOAT, FIELD(clip_grad), .def = "1.0", GE(0), IMPLEMENTED,
     .help = "Gradient clipping based on global L2 norm."},
    {.name = "--adam-beta1", REG, FLOAT, FIELD(adam_beta1), .def = "0.9", PROBABILITY, IMPLEMENTED,
     .help = "First coefficient for computing running averages of gradient and its square"},
    {.name = "--adam-beta2", REG, FLOAT, FIELD(adam_beta2), .def = "0.999", PROBABILITY,
     IMPLEMENTED,
     .help = "Second coefficient for computing running averages of gradient and its square"},
    {.name = "--adam-eps", REG, FLOAT, FIELD(adam_eps), .def = "1e-08", GT(0), IMPLEMENTED,
     .help = "Term added to the denominator to improve numerical stability"},
    {.name = "--sgd-momentum", REG, FLOAT, FIELD(sgd_momentum), .def = "0.9", GE(0),
     NOOP("only used with --optimizer sgd (not implemented yet); Adam ignores it, as in "
          "Megatron"),
     .help = "Momentum factor for sgd"},

    {.name = "--apply-wd-to-qk-layernorm", REG, TRUE_IF_GIVEN, FIELD(apply_wd_to_qk_layernorm),
     IMPLEMENTED,
     .help = "Apply weight decay to the query and key layernorm weights."},

    /* ---- initialization ---- */
    {.name = "--seed", INIT, INT64, FIELD(seed), .def = "1234", BETWEEN(0, 4294967295.0),
     IMPLEMENTED_NOTE("keys megatron-c's layout-invariant Philox init and dropout, not PyTorch's "
                      "RNG (MEGATRON.md section 11)"),
     .help = "Random seed used for python, numpy, pytorch, and cuda."},
    {.name = "--data-parallel-random-init", INIT, TRUE_IF_GIVEN,
     TODO("different initial weights per data-parallel rank"),
     .help = "Enable random initialization of params across data parallel ranks"},
    {.name = "--init-method-std", INIT, FLOAT, FIELD(init_method_std), .def = "0.02", GT(0),
     IMPLEMENTED,
     .help = "Standard deviation of the zero mean normal distribution used for weight "
             "initialization."},
    {.name = "--embedding-init-method-std", INIT, FLOAT, FIELD(embedding_init_method_std), GT(0),
     IMPLEMENTED,
     .help = "Standard deviation of the zero mean normal distribution used for embedding weight "
             "initialization. If unset, embeddings will be initialized the same way as other "
             "weights."},
    {.name = "--init-method-xavier-uniform", INIT, TRUE_IF_GIVEN, TODO("Xavier uniform init"),
     .help = "Enable Xavier uniform parameter initialization"},

    /* ---- mixed precision ---- */
    {.name = "--fp16", MIXED, TRUE_IF_GIVEN, FIELD(fp16),
     IMPLEMENTED_NOTE("fp16 params and activations, fp32 master params, dynamic loss scaling"),
     .help = "Run model in fp16 mode."},
    {.name = "--bf16", MIXED, TRUE_IF_GIVEN, FIELD(bf16),
     IMPLEMENTED_NOTE("bf16 params and activations, fp32 master params and gradients"),
     .help = "Run model in bfloat16 mode."},
    {.name = "--grad-reduce-in-bf16", MIXED, TRUE_IF_GIVEN, FIELD(grad_reduce_in_bf16),
     IMPLEMENTED_NOTE("with --bf16: a bf16 gradient buffer (accumulated and reduced in bf16, "
                      "Megatron's grad_reduce_in_fp32 off); no effect without --bf16, as in "
                      "Megatron"),
     .help = "Reduce gradients in bfloat16."},
    {.name = "--loss-scale", MIXED, FLOAT, FIELD(loss_scale), GT(0),
     IMPLEMENTED_NOTE("a constant scaler with --fp16 or --bf16; fp32 training ignores it, as in Megatron"),
     .help = "Static loss scaling, positive power of 2 values can improve fp16 convergence. If "
             "None, dynamic loss scaling is used."},
    {.name = "--initial-loss-scale", MIXED, FLOAT, FIELD(initial_loss_scale), .def = "4294967296",
     GT(0), IMPLEMENTED_NOTE(FP16_ONLY), .help = "Initial loss-scale for dynamic loss scaling."},
    {.name = "--min-loss-scale", MIXED, FLOAT, FIELD(min_loss_scale), .def = "1.0", GT(0),
     IMPLEMENTED_NOTE(FP16_ONLY), .help = "Minimum loss scale for dynamic loss scaling."},
    {.name = "--loss-scale-window", MIXED, INT, FIELD(loss_scale_window), .def = "1000", GE(1),
     IMPLEMENTED_NOTE(FP16_ONLY), .help = "Window over which to raise/lower dynamic scale."},
    {.name = "--hysteresis", MIXED, INT, FIELD(hysteresis), .def = "2", GE(1), IMPLEMENTED_NOTE(FP16_ONLY),
     .help = "hysteresis for dynamic loss scaling"},
    {.name = "--fp32-residual-connection", MIXED, TRUE_IF_GIVEN, TODO("an fp32 residual stream in 16-bit training"),
     .help = "Move residual connections to fp32."},
    {.name = "--apply-query-key-layer-scaling", MIXED, TRUE_IF_GIVEN,
     NOOP("the 1/layer scale is undone inside the softmax; it only changes fp16 rounding of "
          "scores megatron-c keeps in fp32, and Transformer Engine's fused and flash attention "
          "ignore it: every backend's softmax scale is 1/sqrt(kv_channels)"),
     .help = "Scale Q * K^T by 1 / layer-number. Useful for fp16 training. Also sets "
             "`attention_softmax_in_fp32` to True."},
    {.name = "--attention-softmax-in-fp32", MIXED, TRUE_IF_GIVEN,
     NOOP("megatron-c computes the softmax in fp32 always"),
     .help = "Run attention masking and softmax in fp32."},
    {.name = "--accumulate-allreduce-grads-in-fp32", MIXED, TRUE_IF_GIVEN,
     FIELD(accumulate_allreduce_grads_in_fp32),
     IMPLEMENTED_NOTE("an fp32 gradient buffer with --fp16 (bf16 always has one, fp32 training too)"),
     .help = "Gradient accumulation and all-reduce in fp32."},
    {.name = "--fp16-lm-cross-entropy", MIXED, TRUE_IF_GIVEN, TODO("the cross-entropy in fp16 (megatron-c computes it in fp32)"),
     .help = "Move the cross entropy unreduced loss calculation for lm head to fp16."},

    /* ---- moe ---- */
    {.name = "--num-experts", MOE, INT, PENDING_FIELD(num_experts), GE(0),
     IMPLEMENTED_NOTE("the MoE layer: SwiGLU experts in fp32 or bf16, E/ep per rank, each split over etp, so far, the rest refused by name (cli/validate_moe.c)"), .help = "Number of Experts in MoE (None means no MoE)"},
    {.name = "--expert-model-parallel-size", MOE, INT, PENDING_FIELD(expert_model_parallel_size),
     .def = "1", GE(1),
     IMPLEMENTED_NOTE("expert parallelism: the alltoall and allgather dispatchers, with tp (and sequence parallelism) and parallel folding; checkpoints with the distributed optimizer (Megatron's chained optimizer): legacy and torch_dist at tp 1, torch_dist at tp > 1; the rest refused by name (cli/validate_moe.c)"),
     .help = "Degree of expert model parallelism."},
    {.name = "--expert-tensor-parallel-size", MOE, INT, PENDING_FIELD(expert_tensor_parallel_size),
     GE(1),
     IMPLEMENTED_NOTE("expert tensor parallelism (parallel folding): tp (the default) or 1 with the alltoall and allgather dispatchers, the rest refused by name (cli/validate_moe.c)"),
     .help = "Degree of expert model parallelism. Default is None, which will be set to the "
             "value of --tensor-model-parallel-size."},

    /* ---- Transformer-Engine ---- */
    {.name = "--transformer-impl", TE, CHOICE("local", "transformer_engine"),
     FIELD(transformer_impl), .def = "transformer_engine",
     IMPLEMENTED_NOTE("local and transformer_engine compute the same math in megatron-c "
                      "(MEGATRON.md section 11)"),
     .help = "Which Transformer implementation to use."},
    {.name = "--fp8-format", TE, CHOICE("e4m3", "hybrid"), TODO("fp8 training"),
     .help = "Which fp8 format scheme to use for FP8 tensors in the forward and backward pass"},
    {.name = "--fp8-recipe", TE, CHOICE("tensorwise", "delayed", "mxfp8", "blockwise"),
     .def = "delayed", NOOP("only used with --fp8-format (not implemented yet)"),
     .help = "Which fp8 recipe to use for FP8 tensors in the forward and backward pass"},
    {.name = "--fp8-param-gather", TE, TRUE_IF_GIVEN, TODO("fp8 training"),
     .help = "Keep the compute param in fp8 (do not use any other intermediate dtype) and "
             "perform the param all-gather in fp8."},

    /* ---- experimental ---- */
    {.name = "--spec", EXP, LIST(0), TODO("custom layer specs"),
     .help = "Specify the <module_location function_name> pair that returns a spec to customize "
             "a model, transformer block, or transformer layer, depending on the use case."},
    {.name = "--qk-layernorm", EXP, TRUE_IF_GIVEN, FIELD(qk_layernorm), IMPLEMENTED,
     .help = "Whether to layer normalize the q and k attention embeddings."},
    {.name = "--use-precision-aware-optimizer", EXP, TRUE_IF_GIVEN,
     TODO("precision-aware optimizer"),
     .help = "Use the precision-aware optimizer in TransformerEngine, which allows setting the "
             "main params and optimizer states to lower precision."},
    {.name = "--main-grads-dtype", EXP, CHOICE("fp32", "bf16"), .def = "fp32",
     ONLY("needs --use-precision-aware-optimizer (not implemented yet)", "fp32"),
     .help = "Dtype of main grads when enabling precision-aware-optimizer"},
    {.name = "--main-params-dtype", EXP, CHOICE("fp32", "fp16"), .def = "fp32",
     ONLY("needs --use-precision-aware-optimizer (not implemented yet)", "fp32"),
     .help = "Dtype of main params when enabling precision-aware-optimizer"},
};
/* clang-format on */

const size_t mc_flags_model_count = sizeof(mc_flags_model) / sizeof(mc_flags_model[0]);
