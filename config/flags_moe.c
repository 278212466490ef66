/* Flag table, part moe: mixture of experts and multi-token prediction. Megatron-LM's flags
 * that megatron-c recognises and refuses by name (or, the no-ops, accepts and ignores),
 * written first by scripts/megatron-flags-table.py from Megatron's parsers at core_v0.15.0 and
 * main (test/fixtures/megatron-flags-*.tsv); type, default, group and help are Megatron's. */
#include "config/flags_table.h"

#define G_CHECKPOINTING .group = "checkpointing"
#define G_DI .group = "distributed init"
#define G_LOGGING .group = "logging"
#define G_MOE .group = "moe"
#define G_NS .group = "network size"
#define G_TC .group = "transformer configuration"

/* One flag per entry, its fields packed as written. */
/* clang-format off */
const mc_flag_t mc_flags_moe[] = {
    {.name = "--expert-tensor-parallel-num-weight-shards", G_TC, INT64,
     TODO("mixture of experts (MoE)"),
     .help = "Total number of shards each expert weight is split into across the "
             "expert-tensor-parallel + expert-GTP axes (i.e. ``expert_tensor_parallel_size * "
             "expert_gtp_weight_remat_size``). This is the user-facing knob for expert layers: it "
             "must be ``>= expert_tensor_parallel_size`` and divisible by it. When None it "
             "defaults to ``expert_tensor_parallel_size`` (no expert GTP sharding). It is the "
             "source of truth and implies ``expert_gtp_weight_remat_size = "
             "expert_tensor_parallel_num_weight_shards // expert_tensor_parallel_size`` (resolved "
             "in ``__post_init__``)."},
    {.name = "--gtp-expert-remat-nccl-ub", G_DI, TRUE_IF_GIVEN, TODO("mixture of experts (MoE)"),
     .help = "Like --gtp-remat-nccl-ub but for routed-expert (EGTP) groups."},
    {.name = "--inference-moe-disable-fused-quant-kernels", G_TC, TRUE_IF_GIVEN,
     TODO("mixture of experts (MoE)"),
     .help = "When False (default), use fused kernels that combine permute/activation with MXFP8 "
             "quantization + swizzle into a single kernel launch. Only applies when "
             "fp8_recipe='mxfp8'. Set to True to disable fusion and use separate kernel launches "
             "(useful for debugging)."},
    {.name = "--inference-moe-token-dispatcher-type", G_TC, CHOICE("nccl", "nvls"), .def = "nvls",
     TODO("mixture of experts (MoE)"),
     .help = "Token dispatcher to use for MoE expert parallelism during inference. - 'nccl': "
             "AllGather/ReduceScatter via NCCL. Fixed token counts per rank; requires decode-only "
             "CUDA graphs (forced automatically). - 'nvls': Variable-count "
             "AllGather-V/ReduceScatter-V via NVLS multimem kernels. Requires Hopper+ GPUs with "
             "NVLink and symmetric memory. Default. Only applies when "
             "transformer_impl='inference_optimized' and EP > 1."},
    {.name = "--moe-apply-probs-on-input", G_MOE, TRUE_IF_GIVEN, TODO("mixture of experts (MoE)"),
     .help = "Apply probs on input of experts instead of applying after activation and glu."},
    {.name = "--moe-aux-loss-coeff", G_MOE, LIST(-1), .def = "0.0",
     PENDING_LIST_FIELD(moe_aux_loss_coeff, n_moe_aux_loss_coeff),
     
     IMPLEMENTED_NOTE("the MoE layer: SwiGLU experts in fp32, bf16 or fp16, E/ep per rank, each split over etp, so far, the rest refused by name (cli/validate_moe.c)"), .help = "Scaling coefficient for the aux loss: a starting value of 1e-2 is recommended."},
    {.name = "--moe-combine-bwd-dtype", G_TC, CHOICE("bf16", "mxfp8"), .def = "bf16",
     TODO("mixture of experts (MoE)"),
     .help = "Wire dtype of the MoE combine backward gradient ('ncclep' flex dispatcher only). "
             "With 'mxfp8', TransformerEngine quantizes the gradient before the all-to-all and "
             "the expert-output gradient comes back as a per-expert MXFP8 GroupedTensor that the "
             "grouped GEMM backward consumes directly. Same requirements as "
             "moe_dispatch_fwd_dtype. Defaults to 'bf16' (no quantization on the wire)."},
    {.name = "--moe-deepep-num-sms", G_MOE, INT64, TODO("mixture of experts (MoE)"),
     .help = "DEPRECATED: use moe_flex_dispatcher_num_sms. Number of SMs to use for DeepEP "
             "(historical default 20). If set, routed to moe_flex_dispatcher_num_sms in "
             "__post_init__."},
    {.name = "--moe-dispatch-fwd-dtype", G_TC, CHOICE("bf16", "mxfp8"), .def = "bf16",
     TODO("mixture of experts (MoE)"),
     .help = "Wire dtype of the MoE dispatch forward payload ('ncclep' flex dispatcher only). "
             "With 'mxfp8', TransformerEngine quantizes the payload before the all-to-all and the "
             "receive buffer comes back as a per-expert MXFP8 GroupedTensor that the grouped GEMM "
             "consumes directly. Requires moe_grouped_gemm and use_transformer_engine_op_fuser. "
             "Defaults to 'bf16' (no quantization on the wire)."},
    {.name = "--moe-enable-deepep", G_MOE, TRUE_IF_GIVEN, TODO("mixture of experts (MoE)"),
     .help = "[Experimental] Enable DeepEP for efficient token dispatching and combine in MoE "
             "models."},
    {.name = "--moe-enable-routing-replay", G_TC, TRUE_IF_GIVEN, TODO("mixture of experts (MoE)"),
     .help = "If True, enable the routing replay feature for MoE layers."},
    {.name = "--moe-expert-capacity-factor", G_MOE, FLOAT,
     PENDING_FIELD(moe_expert_capacity_factor), SET_FLAG(moe_expert_capacity_factor_set),
     IMPLEMENTED_NOTE("token dropping: each expert keeps at most its capacity of a rank's tokens "
                      "per microbatch (model/moe_capacity.c), the dropped (token, expert) "
                      "assignments counted in a line after each log line; a capacity above those "
                      "tokens, where Megatron's torch.topk fails, keeps them all"),
     .help = "moe_expert_capacity_factor (float): The capacity factor for each expert, None means "
             "no token will be dropped. The default is None."},
    {.name = "--moe-expert-rank-capacity-factor", G_TC, FLOAT, TODO("mixture of experts (MoE)"),
     .help = "moe_expert_rank_capacity_factor (float): The capacity factor for each expert rank, "
             "i.e. the per-rank token budget. None means no token will be dropped. The default is "
             "None. With the 'hybridep' backend, tokens exceeding this budget are dropped. With "
             "the 'ncclep' backend, setting it selects static shapes (fixed receive buffer, "
             "CUDA-graph capturable) and leaving it None selects eager mode (receive buffer sized "
             "per step from the received-token count)."},
    {.name = "--moe-extended-tp", G_MOE, TRUE_IF_GIVEN, TODO("mixture of experts (MoE)"),
     .help = "Deprecated. Use --expert-tensor-parallel-size instead."},
    {.name = "--moe-ffn-hidden-size", G_MOE, INT, PENDING_FIELD(moe_ffn_hidden_size), GE(1),
     
     IMPLEMENTED_NOTE("the MoE layer: SwiGLU experts in fp32, bf16 or fp16, E/ep per rank, each split over etp, so far, the rest refused by name (cli/validate_moe.c)"), .help = "MoE Feed-Forward Network hidden size. If not specified, defaults to the "
             "ffn_hidden_size."},
    {.name = "--moe-flex-dispatcher-backend", G_TC, CHOICE("deepep", "hybridep", "ncclep"),
     .def = "deepep", TODO("mixture of experts (MoE)"),
     .help = "[Experimental] The backend to use for flex token dispatcher. The default is "
             "\"deepep\". Options are \"deepep\", \"hybridep\", and \"ncclep\". Currently only "
             "\"hybridep\" backend supports the MNNVL case. \"ncclep\" uses NVIDIA NCCL Expert "
             "Parallelism via TransformerEngine's transformer_engine.pytorch.ep API."},
    {.name = "--moe-flex-dispatcher-num-sms", G_TC, INT64, TODO("mixture of experts (MoE)"),
     .help = "Number of SMs for the flex token dispatcher's dispatch/combine communication, for "
             "all backends (deepep, hybridep, ncclep). None lets each backend use its own "
             "default. Unifies the deprecated per-backend moe_{deepep,hybridep}_num_sms knobs "
             "(routed in __post_init__)."},
    {.name = "--moe-grouped-gemm", G_MOE, TRUE_IF_GIVEN, PENDING_FIELD(moe_grouped_gemm),
     IMPLEMENTED_NOTE("an implementation choice: the MoE layer's expert GEMMs are grouped "
                      "already; the same numbers"),
     .help = "Use grouped GEMM to execute multiple local MoE experts together. The concrete "
             "implementation is selected by Transformer Engine. Set "
             "``moe_use_grouped_tensor=True`` to use its CUDA-graph-safe GroupedTensor path."},
    {.name = "--moe-hybridep-num-blocks-permute", G_TC, INT64, TODO("mixture of experts (MoE)"),
     .help = "Number of CUDA thread blocks for the permute part in HybridEP. When "
             "permute_fusion_into_hybridep is True, this sets the number of SMs for the permute "
             "part (only 1 block per SM)."},
    {.name = "--moe-hybridep-num-blocks-unpermute", G_TC, INT64, TODO("mixture of experts (MoE)"),
     .help = "Number of CUDA thread blocks for the unpermute part in HybridEP. When "
             "permute_fusion_into_hybridep is True, this sets the number of SMs for the unpermute "
             "part (only 1 block per SM)."},
    {.name = "--moe-hybridep-num-sms", G_TC, INT64, TODO("mixture of experts (MoE)"),
     .help = "DEPRECATED: use moe_flex_dispatcher_num_sms. Number of SMs to use for HybridEP "
             "(None uses the default from DeepEP). If set, routed to moe_flex_dispatcher_num_sms "
             "in __post_init__."},
    {.name = "--moe-hybridep-num-sms-preprocessing", G_TC, INT64, .def = "108",
     TODO("mixture of experts (MoE)"),
     .help = "Number of SMs to use for HybridEP preprocessing (metadata scan kernel)."},
    {.name = "--moe-hybridep-pad-uneven-dispatch-inputs", G_TC, TRUE_IF_GIVEN,
     TODO("mixture of experts (MoE)"),
     .help = "Pad uneven HybridEP dispatch inputs to the group maximum before dispatch. Enable "
             "when local HybridEP input token counts can differ across ranks, for example with "
             "dynamically packed THD inputs. Leave disabled when dispatcher inputs are already "
             "padded to equal token counts."},
    {.name = "--moe-input-jitter-eps", G_MOE, FLOAT, TODO("mixture of experts (MoE)"),
     .help = "Add noise to the input tensor by applying jitter with a specified epsilon value."},
    {.name = "--moe-latent-size", G_TC, INT64, TODO("mixture of experts (MoE)"),
     .help = "Latent projection dimension for MoE. If None, MoE latent projections are not used."},
    {.name = "--moe-layer-freq", G_MOE, STRING, .def = "1", PENDING_FIELD(moe_layer_freq),
     
     IMPLEMENTED_NOTE("the MoE layer: SwiGLU experts in fp32, bf16 or fp16, E/ep per rank, each split over etp, so far, the rest refused by name (cli/validate_moe.c)"), .help = "Frequency between MoE layers and Dense layers. Accepts either: - An integer N: "
             "Represents a 1:N ratio, meaning one expert layer for every N-1 dense layers - A "
             "string containing a Python list expression that defines a custom pattern, e.g.: "
             "\"([1]*3+[0]*1)*3\" evaluates to [1,1,1,0,1,1,1,0,1,1,1,0] where 1 indicates an "
             "expert layer and 0 indicates a dense layer. Examples: \"([0]+[1]*23)\": 1 dense "
             "layer followed by 23 expert layers, \"([1]*3+[0]*2)*2\": Three expert layers "
             "followed by two dense layers, repeated twice."},
    {.name = "--moe-layer-recompute", G_MOE, TRUE_IF_GIVEN, TODO("mixture of experts (MoE)"),
     .help = "Memory optimization: checkpointing moe_layer to save actiavtion memory."},
    {.name = "--moe-mlp-glu-interleave-size", G_TC, INT64, TODO("mixture of experts (MoE)"),
     .help = "When set, GLU activations in the MoE grouped MLP layer will use a block interleaved "
             "format. Instead of interpreting the input tensor as a concatenation of gates and "
             "linear units, it will be interpreted as alternating blocks of gates and linear "
             "units. This data format is experimental and primarily intended to enable advanced "
             "fused kernels."},
    {.name = "--moe-ncclep-zero-copy", G_TC, TRUE_IF_GIVEN, TODO("mixture of experts (MoE)"),
     .help = "For the 'ncclep' flex dispatcher: use the NCCL symmetric-memory zero-copy IO path "
             "(ep_bootstrap zero_copy + symm-mem-backed receive/combine buffers) instead of the "
             "default HBM staged-copy path, saving one copy on the wire. Requires "
             "moe_expert_rank_capacity_factor (the symm-mem buffers are a fixed [recv_capacity, "
             "hidden] and cannot be resized per step) and the fused op "
             "(use_transformer_engine_op_fuser). Defaults to False."},
    {.name = "--moe-pad-expert-input-to-capacity", G_MOE, TRUE_IF_GIVEN,
     PENDING_FIELD(moe_pad_expert_input_to_capacity),
     IMPLEMENTED_NOTE("every expert takes exactly its capacity of rows, filled with tokens of "
                      "probability 0"),
     .help = "moe_pad_expert_input_to_capacity (bool): If True, pads the input for each expert to "
             "match the expert capacity length, effective only after the "
             "moe_expert_capacity_factor is set. The default setting is False."},
    {.name = "--moe-pad-experts-for-cuda-graph-inference", G_MOE, TRUE_IF_GIVEN,
     TODO("mixture of experts (MoE)"),
     .help = "moe_pad_experts_for_cuda_graph_inference (bool): If True, the router will switch to "
             "dropping and padding during decode time which does not have a D2H sync. The "
             "capacity factor is set to the max that an expert could see during inference so no "
             "tokens are actually dropped. The default setting is False."},
    {.name = "--moe-paged-stash", G_TC, TRUE_IF_GIVEN, TODO("mixture of experts (MoE)"),
     .help = "If True, enable paged stash for all routed-expert activations needed for backward"},
    {.name = "--moe-paged-stash-buffer-size-factor-cpu", G_TC, FLOAT, .def = "0.0",
     TODO("mixture of experts (MoE)"),
     .help = "Scale factor for paged stash host buffer. 0 disables host buffer. Same sign "
             "convention as moe_paged_stash_buffer_size_factor_cuda: positive = avg-based, "
             "negative = actual-max; scale = abs(factor)."},
    {.name = "--moe-paged-stash-buffer-size-factor-cuda", G_TC, FLOAT, .def = "1.1",
     TODO("mixture of experts (MoE)"),
     .help = "Scale factor for paged stash CUDA buffer allocation. Sign selects sizing: positive "
             "= avg-based, negative = actual-max. Magnitude is headroom (e.g. 1.10 = 10%%)."},
    {.name = "--moe-paged-stash-page-size", G_TC, INT64, .def = "64",
     TODO("mixture of experts (MoE)"),
     .help = "Number of tokens per page for paged stash memory management."},
    {.name = "--moe-per-layer-logging", G_MOE, TRUE_IF_GIVEN, PENDING_FIELD(moe_per_layer_logging),
     IMPLEMENTED_NOTE("TensorBoard's moe/<loss>_layer_<i> scalars of the MoE losses"),
     .help = "Enable per-layer logging for MoE, currently supports auxiliary loss and z loss."},
    {.name = "--moe-permute-fusion", G_MOE, TRUE_IF_GIVEN, PENDING_FIELD(moe_permute_fusion),
     IMPLEMENTED_NOTE("an implementation choice: the MoE layer permutes tokens in one pass "
                      "already; the same numbers"),
     .help = "Fuse token rearrangement ops during token dispatching."},
    {.name = "--moe-permute-fusion-into-hybridep", G_TC, TRUE_IF_GIVEN,
     TODO("mixture of experts (MoE)"),
     .help = "Fuse token rearrangement ops during token dispatching for HybridEP."},
    {.name = "--moe-router-bias-update-rate", G_MOE, FLOAT, .def = "0.001",
     PENDING_FIELD(moe_router_bias_update_rate),
     IMPLEMENTED_NOTE("the expert bias step per global batch"),
     .help = "The expert bias is updated based on the number of assigned tokens to each expert in "
             "a global batch, where the bias is increased for the experts with less assigned "
             "tokens and decreased for the experts with more assigned tokens. The default value "
             "1e-3 is same as that used in DeepSeekV3."},
    {.name = "--moe-router-dtype", G_MOE, CHOICE("fp32", "fp64"), PENDING_FIELD(moe_router_dtype),
     ONLY("fp64 is not implemented yet; fp32: the router's input and weight cast to float32, its logits, scores, top-k, probabilities and losses in float32 beside --bf16 or --fp16 activations (RouterGatingLinearFunction)", "fp32"),
     .help = "Data type for routing and expert output weighted averaging. Using fp32 or fp64 can "
             "improve stability especially when the number of experts is large (e.g. "
             "finegrained-moe). None means no changes for dtype."},
    {.name = "--moe-router-enable-expert-bias", G_MOE, TRUE_IF_GIVEN,
     PENDING_FIELD(moe_router_enable_expert_bias),
     IMPLEMENTED_NOTE("aux-loss-free balancing: the expert bias chooses the experts (sigmoid scores), updated once per global batch from the token counts over tp x dp x cp; the bias (Megatron's persistent expert_bias buffer) is saved and loaded in both checkpoint formats"),
     .help = "TopK routing with dynamic per-expert bias in the aux-loss-free load balancing "
             "strategy. The routing decision is based on the sum of the routing scores and the "
             "expert bias. See https://arxiv.org/abs/2408.15664 for details."},
    {.name = "--moe-router-force-biased", G_TC, FLOAT, TODO("mixture of experts (MoE)"),
     .help = "Apply random expert bias in normal distribution with specified std to router "
             "logits. Shared seed across all ranks ensures identical bias. If positive, generates "
             "new random bias each forward pass. If negative, generates bias once per layer and "
             "reuses it (abs value is std). This is an experimental feature for benchmarking "
             "purposes."},
    {.name = "--moe-router-force-load-balancing", G_MOE, TRUE_IF_GIVEN,
     TODO("mixture of experts (MoE)"),
     .help = "[Experimental] Force load balancing with random logits for MoE router, supports "
             "naive topk and group-limited topk. This is an experimental feature and only for "
             "benchmark."},
    {.name = "--moe-router-fusion", G_MOE, TRUE_IF_GIVEN, TODO("mixture of experts (MoE)"),
     .help = "Enable fusion for MoE TopK routing and aux-loss computation. This is only supported "
             "in TransformerEngine 2.7.0 and above."},
    {.name = "--moe-router-group-topk", G_MOE, INT, PENDING_FIELD(moe_router_group_topk), GE(1),
     IMPLEMENTED_NOTE("group-limited routing: each group scored by the sum of its top (topk / group-topk) scores, the best groups kept, the rest masked"),
     .help = "Number of selected groups for group-limited routing."},
    {.name = "--moe-router-load-balancing-type", G_MOE, LIST(-1), .def = "aux_loss",
     PENDING_LIST_FIELD(moe_router_load_balancing_type, n_moe_router_load_balancing_type),
     
     IMPLEMENTED_NOTE("the MoE layer: SwiGLU experts in fp32, bf16 or fp16, E/ep per rank, each split over etp, so far, the rest refused by name (cli/validate_moe.c)"), .help = "Determines the load balancing strategy for the router. \"aux_loss\" corresponds to "
             "the load balancing loss used in GShard and SwitchTransformer; \"seq_aux_loss\" "
             "corresponds to the load balancing loss used in DeepSeekV2, which computes the loss "
             "for each individual sample; \"sinkhorn\" corresponds to the balancing algorithm "
             "used in S-BASE; \"quantile_balancing\" (QB) uses dual coordinate descent on a "
             "per-expert bias to handle load balance internally; \"none\" implies no load "
             "balancing. The default is \"aux_loss\"."},
    {.name = "--moe-router-num-groups", G_MOE, INT, PENDING_FIELD(moe_router_num_groups), GE(1),
     IMPLEMENTED_NOTE("group-limited routing, with --moe-router-group-topk"),
     .help = "Number of groups to divide experts into for group-limited routing. When using "
             "group-limited routing: 1. Experts are divided into 'moe_router_num_groups' "
             "equal-sized groups 2. For each token, 'moe_router_group_topk' groups are selected "
             "based on sum of top-('moe_router_topk'/'moe_router_group_topk') routing scores "
             "within each group 3. From these selected groups, 'moe_router_topk' individual "
             "experts are chosen Two common use cases: - Device-limited routing: Set "
             "'moe_router_num_groups' equal to expert parallel size (EP) to limit each token to "
             "experts on a subset of devices (See DeepSeek-V2: https://arxiv.org/pdf/2405.04434) "
             "- Node-limited routing: Set 'moe_router_num_groups' equal to number of nodes in EP "
             "group to limit each token to experts on a subset of nodes (See DeepSeek-V3: "
             "https://arxiv.org/pdf/2412.19437)"},
    {.name = "--moe-router-padding-for-fp8", G_MOE, TRUE_IF_GIVEN,
     TODO("mixture of experts (MoE)"),
     .help = "[Compatibility alias for moe_router_padding_for_quantization] Enabling this will "
             "also enable moe_router_padding_for_quantization."},
    {.name = "--moe-router-padding-for-quantization", G_TC, TRUE_IF_GIVEN,
     TODO("mixture of experts (MoE)"),
     .help = "Whether to pad the routing_map to make sure the number of tokens each expert "
             "receives is a multiple of 16/32 for quantized precision (e.g., FP8, FP4). This can "
             "remove the explicit padding in the GroupedMLP layer."},
    {.name = "--moe-router-pre-softmax", G_MOE, TRUE_IF_GIVEN,
     PENDING_FIELD(moe_router_pre_softmax),
     IMPLEMENTED_NOTE("softmax over all experts before the top-k, as Megatron's topk_routing_with_score_function"),
     .help = "Enable pre-softmax(pre-sigmoid) routing for MoE, which means softmax is before the "
             "top-k selection. By default, softmax is done after top-k."},
    {.name = "--moe-router-quantile-balancing-ema", G_TC, FLOAT, .def = "0.0",
     TODO("mixture of experts (MoE)"),
     .help = "EMA coefficient for the quantile-balancing per-expert bias (`qb_beta`), used only "
             "when `moe_router_load_balancing_type` is \"quantile_balancing\". At each global "
             "batch the bias is updated as `qb_beta = ema * qb_beta + (1 - ema) * "
             "local_quantile`. The default 0.0 means no memory: the bias is replaced by the "
             "latest global-batch quantile estimate each step."},
    {.name = "--moe-router-score-function", G_MOE, CHOICE("softmax", "sigmoid", "sqrtsoftplus"),
     .def = "softmax", PENDING_FIELD(moe_router_score_function),
     ONLY("sqrtsoftplus is not implemented yet; sigmoid: top-k of the sigmoid scores, normalised by their sum when top-k > 1", "softmax", "sigmoid"),
     .help = "Score function for MoE routing. Can be \"softmax\", \"sigmoid\" or \"sqrtsoftplus\"."},
    {.name = "--moe-router-topk", G_MOE, INT, .def = "2", GE(1), PENDING_FIELD(moe_router_topk),
     
     IMPLEMENTED_NOTE("the MoE layer: SwiGLU experts in fp32, bf16 or fp16, E/ep per rank, each split over etp, so far, the rest refused by name (cli/validate_moe.c)"), .help = "Number of experts to route to for each token."},
    {.name = "--moe-router-topk-scaling-factor", G_MOE, FLOAT,
     PENDING_FIELD(moe_router_topk_scaling_factor),
     IMPLEMENTED_NOTE("the chosen experts' probabilities times the factor"),
     .help = "Scaling factor for routing score in top-k selection. Defaults to None, which means "
             "no scaling."},
    {.name = "--moe-routing-trace-capture-hidden-states", G_LOGGING, TRUE_IF_GIVEN,
     TODO("mixture of experts (MoE)"),
     .help = "Capture input hidden-state tensors for each router call."},
    {.name = "--moe-routing-trace-capture-logits", G_LOGGING, TRUE_IF_GIVEN,
     TODO("mixture of experts (MoE)"),
     .help = "Capture pre-topk routing logits for each router call."},
    {.name = "--moe-routing-trace-dump-weights", G_LOGGING, TRUE_IF_GIVEN,
     TODO("mixture of experts (MoE)"),
     .help = "Save router weight tensors to a .pt sidecar file."},
    {.name = "--moe-routing-trace-max-training-iters", G_LOGGING, INT64,
     TODO("mixture of experts (MoE)"),
     .help = "Maximum number of training iterations to trace. Tracing stops automatically after "
             "this many calls to advance_step(). Defaults to tracing all iterations when "
             "moe_routing_trace_path is set. (Inference uses "
             "--moe-routing-trace-max-inference-steps instead.)"},
    {.name = "--moe-routing-trace-path", G_LOGGING, STRING, TODO("mixture of experts (MoE)"),
     .help = "Directory for MoE router decision traces (JSONL). When set, a RouterTracer is "
             "initialized at training start and hooks are registered on all TopKRouter modules. "
             "Traces are written in the same format as inference traces so the analysis scripts "
             "under tools/moe_routing work on both."},
    {.name = "--moe-shared-expert-gate", G_TC, TRUE_IF_GIVEN, PENDING_FIELD(moe_shared_expert_gate),
     IMPLEMENTED_NOTE("the shared expert's output times sigmoid(x @ gate_weight) (model/moe_shared.c)"),
     .help = "Enable gate for shared expert. Only effective when "
             "moe-shared-expert-intermediate-size is set."},
    {.name = "--moe-shared-expert-glu-interleave-size", G_TC, INT64,
     TODO("mixture of experts (MoE)"),
     .help = "When set, GLU activations in the shared expert MLP will use a block interleaved "
             "format. This is only effective when use_grouped_gemm_for_shared_expert is set."},
    {.name = "--moe-shared-expert-intermediate-size", G_MOE, INT, GE(1),
     PENDING_FIELD(moe_shared_expert_intermediate_size),
     IMPLEMENTED_NOTE("the MoE layer's shared expert: a dense tp MLP added to the routed output (model/moe_shared.c)"),
     .help = "Shared expert total ffn hidden size. It should be equal to 'num_shared_experts * "
             "ffn_size_of_each_shared_expert' if there are multiple shared experts. None means no "
             "shared expert. By default, the shared experts execute before the router. However, "
             "when moe_shared_expert_overlap or overlap_moe_expert_parallel_comm is set, the "
             "shared experts execute after the router, before the routed experts. This makes the "
             "gradients from the router and the shared experts added in different orders to the "
             "hidden_states, causing minor numerical differences in the hidden_states gradient."},
    {.name = "--moe-shared-expert-overlap", G_MOE, TRUE_IF_GIVEN,
     PENDING_FIELD(moe_shared_expert_overlap),
     IMPLEMENTED_NOTE("the shared expert runs after the router (same numbers; nothing overlaps on the CPU or one stream)"),
     .help = "Enable overlapping between shared expert computations and dispatcher "
             "communications. Without this, the shared experts execute before the router. Only "
             "effective when moe-shared-expert-intermediate-size is set."},
    {.name = "--moe-single-grouped-bias", G_TC, TRUE_IF_GIVEN, TODO("mixture of experts (MoE)"),
     .help = "When using TE GroupedLinear for MoE experts, store expert biases as a single "
             "grouped parameter via Transformer Engine's `GroupedTensor`. Requires "
             "``moe_grouped_gemm=True``, ``moe_use_grouped_tensor=True``, and "
             "``add_bias_linear=True``."},
    {.name = "--moe-single-grouped-weight", G_TC, TRUE_IF_GIVEN, TODO("mixture of experts (MoE)"),
     .help = "When using TE GroupedLinear for MoE experts, store expert weights as a single "
             "grouped parameter via Transformer Engine's `GroupedTensor`. Requires "
             "``moe_grouped_gemm=True`` and ``moe_use_grouped_tensor=True``."},
    {.name = "--moe-token-dispatcher-type", G_MOE, CHOICE("allgather", "alltoall", "flex"),
     .def = "allgather", PENDING_FIELD(moe_token_dispatcher_type),
     IMPLEMENTED_NOTE("allgather (over tp_ep: model/moe_allgather.c) and alltoall (model/moe.c); flex (DeepEP) refused by name (cli/validate_moe.c)"), .help = "The type of token dispatcher to use. The default is 'allgather'. Options are "
             "'allgather','alltoall' and 'flex'."},
    {.name = "--moe-token-drop-policy", G_MOE, CHOICE("probs", "position"), .def = "probs",
     PENDING_FIELD(moe_token_drop_policy),
     IMPLEMENTED_NOTE("probs or position, ties to the lower token index as torch.topk"),
     .help = "The policy to drop tokens. Can be either \"probs\" or \"position\". If \"probs\", "
             "the tokens with the lowest probabilities will be dropped. If \"position\", tokens "
             "at the end of each batch will be dropped."},
    {.name = "--moe-upcycling-granularity", G_MOE, INT64, .def = "1",
     TODO("mixture of experts (MoE)"),
     .help = "This param sepecifics how many times smaller is the expert hidden size compared "
             "with the original dense FFN hidden size. For using granular upcycling strategy, "
             "please set this param as a positive integer. If this param is set to 1, it means "
             "using the default upcycling strategy."},
    {.name = "--moe-use-grouped-tensor", G_TC, TRUE_IF_GIVEN, TODO("mixture of experts (MoE)"),
     .help = "Use Transformer Engine's native GroupedTensor path for grouped MoE GEMMs. This path "
             "uses padded expert segments and CUDA split metadata so it can be captured in CUDA "
             "graphs. Enabling the Transformer Engine operation fuser also enables this option."},
    {.name = "--moe-use-legacy-grouped-gemm", G_MOE, TRUE_IF_GIVEN,
     PENDING_FIELD(moe_use_legacy_grouped_gemm),
     TODO_CHECKED("mixture of experts (MoE)"),
     .help = "Use legacy GroupedMLP rather than TEGroupedMLP. Note: The legacy one will be "
             "deprecated soon."},
    {.name = "--moe-use-upcycling", G_MOE, TRUE_IF_GIVEN, TODO("mixture of experts (MoE)"),
     .help = "Load a checkpoint of a dense model, convert it into an MoE model, and save the "
             "converted model to the path specified by --save. Upcycling is implemented on the "
             "top of distributed checkpointing, so it supports parallel modes different from the "
             "dense model."},
    {.name = "--moe-z-loss-coeff", G_MOE, FLOAT,
     PENDING_FIELD(moe_z_loss_coeff), SET_FLAG(moe_z_loss_coeff_set),
     IMPLEMENTED_NOTE("the router's z-loss: its gradient in the router's, logged as z_loss (at tp > 1 the coefficient over tp and the logged value the last rank's own, as Megatron's)"),
     .help = "Scaling coefficient for the z-loss. A starting value of 1e-3 is recommended."},
    {.name = "--mtp-detach-heads", G_TC, TRUE_IF_GIVEN, TODO("multi-token prediction"),
     .help = "If True, detach MTP head inputs from the main model graph. This prevents MTP loss "
             "gradients from flowing back to the main model, only training the MTP heads "
             "themselves."},
    {.name = "--mtp-hsm", G_TC, TRUE_IF_GIVEN, TODO("multi-token prediction"),
     .help = "Enable uniform per-token Hidden State Mixing (HSM) for MTP layers. At every MTP "
             "depth, each token independently draws its input from the main model hidden state "
             "and the outputs of the earlier depths, all aligned on the same target token. Only "
             "takes effect during training and requires at least two MTP layers, since a single "
             "depth has nothing to mix."},
    {.name = "--mtp-hybrid-override-pattern", G_TC, STRING, TODO("multi-token prediction"),
     .help = "DEPRECATED: Use unified hybrid_layer_pattern instead. Legacy argument for loading "
             "old checkpoints. Force a specific hybrid layer pattern for MTP layers."},
    {.name = "--mtp-loss-scaling-factor", G_NS, FLOAT, .def = "0.1",
     TODO("multi-token prediction"),
     .help = "Weighting factor of Multi-Token Prediction (MTP) loss. We compute the average of "
             "the MTP losses across all depths, and multiply it the scaling factor to obtain the "
             "overall MTP loss, which serves as an additional training objective."},
    {.name = "--mtp-standalone", G_TC, TRUE_IF_GIVEN, TODO("multi-token prediction"),
     .help = "This will be set automatically according to the pipeline layout, and will be set to "
             "True if MTP is in a separate vpp stage."},
    {.name = "--mtp-use-repeated-layer", G_TC, TRUE_IF_GIVEN, TODO("multi-token prediction"),
     .help = "Use a single MTP layer repeatedly instead of multiple separate layers."},
    {.name = "--overlap-dispatch-backward-with-experts-wgrad", G_TC, TRUE_IF_GIVEN,
     TODO("mixture of experts (MoE)"),
     .help = "Delay the weight gradient computation for TE Grouped GEMM MoE experts. When enabled "
             "with FSDP, the expert weight gradients are computed on a separate CUDA stream after "
             "the data gradients finish, allowing overlap of wgrad compute with EP A2A "
             "communication. The FSDP gradient reduce-scatter for expert parameters is deferred "
             "until the delayed wgrad computation completes. This requires transformer_engine "
             "with GroupedLinear support (TE >= 2.3.0)."},
    {.name = "--overlap-moe-expert-parallel-comm", G_MOE, TRUE_IF_GIVEN,
     TODO("mixture of experts (MoE)"),
     .help = "Overlap EP A2A communications with independent computations of different "
             "micro-batches in 1f1b phase of pipelining or non-pipelining schedule."},
    {.name = "--save-tokens-per-expert-interval", G_CHECKPOINTING, INT64,
     TODO("mixture of experts (MoE)"),
     .help = "Number of iterations between tokens-per-expert routing metadata saves."},
    {.name = "--use-grouped-gemm-for-shared-expert", G_TC, TRUE_IF_GIVEN,
     TODO("mixture of experts (MoE)"),
     .help = "Use GroupedLinear(num_groups=1) for the shared expert MLP to trigger the "
             "Transformer Engine grouped SwiGLU fusion path. Only effective when "
             "moe-shared-expert-intermediate-size is set."},
};
/* clang-format on */

const size_t mc_flags_moe_count = sizeof(mc_flags_moe) / sizeof(mc_flags_moe[0]);
