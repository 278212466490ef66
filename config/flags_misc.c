/* Flag table, part misc: the rest: model, parallelism, training, checkpointing, data and
 * logging options megatron-c lacks. Megatron-LM's flags that megatron-c recognises and refuses
 * by name (or, the no-ops, accepts and ignores), written first by
 * scripts/megatron-flags-table.py from Megatron's parsers at core_v0.15.0 and main
 * (test/fixtures/megatron-flags-*.tsv); type, default, group and help are Megatron's. */
#include "config/flags_table.h"

#define G_BIENCODER .group = "biencoder"
#define G_CHECKPOINTING .group = "checkpointing"
#define G_CL .group = "config logger"
#define G_DAD .group = "data and dataloader"
#define G_DI .group = "distributed init"
#define G_DISTRIBUTED .group = "distributed"
#define G_EXPERIMENTAL .group = "experimental"
#define G_HA .group = "heterogeneous architecture"
#define G_INFERENCE .group = "inference"
#define G_LOGGING .group = "logging"
#define G_LRAWD .group = "learning rate and weight decay"
#define G_MOE .group = "moe"
#define G_MP .group = "mixed precision"
#define G_NS .group = "network size"
#define G_PROFILING .group = "profiling"
#define G_REGULARIZATION .group = "regularization"
#define G_RETRO .group = "retro"
#define G_TC .group = "transformer configuration"
#define G_TE .group = "Transformer-Engine"
#define G_TOKENIZER .group = "tokenizer"
#define G_TRAINING .group = "training"
#define G_VALIDATION .group = "validation"
#define G_VISION .group = "vision"

/* One flag per entry, its fields packed as written. */
/* clang-format off */
const mc_flag_t mc_flags_misc[] = {
    {.name = "--activation-func-clamp-value", G_NS, FLOAT,
     TODO("clamp the output of the linear_fc1 in the activation function"),
     .help = "Clamp the output of the linear_fc1 in the activation function. Only used when "
             "activation_func is quick_gelu or SwiGLU (MoE only)."},
    {.name = "--activation-offload-fraction", G_TC, FLOAT, .def = "1.0",
     TODO("offloading to host memory"),
     .help = "Fraction of eligible activation offload groups to offload across configured "
             "modules. For details, see: "
             "https://github.com/NVIDIA/Megatron-LM/blob/main/docs/user-guide/features/fine_grained_activation_offloading.md#activation-offload-fraction."},
    {.name = "--allow-ambiguous-pad-tokens", G_DAD, TRUE_IF_GIVEN,
     TODO("whether to prevent pad tokens already present in the dataset from ..."),
     .help = "Whether to prevent pad tokens already present in the dataset from being masked out "
             "when the pad token incorrectly shares the same id with other special tokens in the "
             "tokenizer. Note that this argument has no effect when the tokenizer correctly "
             "provides a unique id for the pad. Masking out such ambiguous pad tokens results in "
             "training instability. Such a scenario is best resolved by fixing the tokenizer; "
             "leaving this option as False provides a workaround. When left to the default of "
             "False, any token ids that collide with the pad token id - as provided by the "
             "tokenizer - will not be masked out of the loss calculation: it cannot be determined "
             "whether they are truly pad. If instead this argument is set, the training flow will "
             "treat all tokens that share the same id as the pad token as true pad tokens, "
             "potentially causing severe training instability."},
    {.name = "--async-ckpt-cpu-priority", G_CHECKPOINTING, INT64, .def = "10",
     TODO("CPU nice value target (0-19, higher = lower priority) for the async ..."),
     .help = "CPU nice value target (0-19, higher = lower priority) for the async checkpoint "
             "writer process. If it exceeds 19, it will be set to 19. If the current nice value "
             "is greater than the target, it will be left unchanged. Only applies when using "
             "persistent ckpt worker."},
    {.name = "--async-ckpt-io-priority", G_CHECKPOINTING, INT64, .def = "3",
     TODO("I/O scheduling class (0-3, 3=idle) for the async checkpoint writer ..."),
     .help = "I/O scheduling class (0-3, 3=idle) for the async checkpoint writer process."},
    {.name = "--async-ckpt-use-cpu-shm", G_CHECKPOINTING, TRUE_IF_GIVEN,
     TODO("copy GPU tensors to CPU shared-memory in the training process before ..."),
     .help = "Copy GPU tensors to CPU shared-memory in the training process before handing off to "
             "the async checkpoint worker. Avoids CUDA IPC / NVLink fabric handles in the worker "
             "subprocess. Useful on MNNVL systems where fabric resources are exhausted. Only "
             "applies with the nvrx async strategy."},
    {.name = "--async-strategy", G_CHECKPOINTING, CHOICE("nvrx", "mcore"), .def = "nvrx",
     TODO("which async save strategy to use"),
     .help = "Which async save strategy to use. Available strategies: nvrx, mcore."},
    {.name = "--attention-output-gate", G_TC, TRUE_IF_GIVEN,
     TODO("whether to apply output gate to the attention layers"),
     .help = "Whether to apply output gate to the attention layers."},
    {.name = "--batch-invariant-backend", G_TC, CHOICE("te_native", "deepgemm", "triton"),
     .def = "te_native",
     TODO("which batch-invariant GEMM backend to use when batch_invariant_mode ..."),
     .help = "Which batch-invariant GEMM backend to use when batch_invariant_mode is enabled: "
             "\"te_native\" (default: keep the native cuBLASLt kernels and obtain invariance via "
             "workspace starvation — lowest overhead, no extra dependencies, and the "
             "configuration verified bitwise-identical to the TE training forward), \"deepgemm\" "
             "(DeepGEMM bf16 kernels), or \"triton\" (persistent Triton matmul; any dtype)."},
    {.name = "--batch-invariant-mode", G_TC, TRUE_IF_GIVEN,
     TODO("if true, uses batch-invariant kernels that provide deterministic ..."),
     .help = "If true, uses batch-invariant kernels that provide deterministic forward execution "
             "regardless of batch size. This ensures bitwise identical results when the same "
             "inputs are processed in different batch configurations. This will significantly "
             "affect speed of training and inference as the kernels are not full optimized. "
             "Defaults to False."},
    {.name = "--bert-load", G_BIENCODER, STRING, TODO("biencoder (ICT) models"),
     .help = "Directory containing an BertModel checkpoint (needed to start ICT and REALM)"},
    {.name = "--bert-no-binary-head", G_NS, FALSE_IF_GIVEN, TODO("disable BERT binary head"),
     .help = "Disable BERT binary head."},
    {.name = "--biencoder-projection-dim", G_BIENCODER, INT64, .def = "0",
     TODO("biencoder (ICT) models"),
     .help = "Size of projection head used in biencoder (paper default: 128)"},
    {.name = "--biencoder-shared-query-context-model", G_BIENCODER, TRUE_IF_GIVEN,
     TODO("biencoder (ICT) models"),
     .help = "Whether to share the parameters of the query and context models or not"},
    {.name = "--block-data-path", G_BIENCODER, STRING, TODO("biencoder (ICT) models"),
     .help = "Where to save/load BlockData to/from"},
    {.name = "--chat-template", G_TOKENIZER, STRING, TODO("other tokenizers and their options"),
     .help = "Custom chat template in jinja format for conversation formatting."},
    {.name = "--ckpt-convert-format", G_CHECKPOINTING, CHOICE("torch", "torch_dist", "zarr"),
     TODO("checkpoint format for conversion"),
     .help = "Checkpoint format for conversion."},
    {.name = "--ckpt-convert-save", G_CHECKPOINTING, STRING,
     TODO("save directory for converted checkpoint"),
     .help = "Save directory for converted checkpoint."},
    {.name = "--ckpt-convert-update-legacy-dist-opt-format", G_CHECKPOINTING, TRUE_IF_GIVEN,
     TODO("when loading a checkpoint, update the legacy format for the ..."),
     .help = "When loading a checkpoint, update the legacy format for the distributed optimizer, "
             "which previously used a merged param/grad buffer and a different bucket mapping. "
             "The legacy format was deprecated on Feb 13, 2024."},
    {.name = "--ckpt-drop-redundant-extra-state", G_CHECKPOINTING, TRUE_IF_GIVEN,
     TODO("drop TE `_extra_state` artifacts that carry no irreplaceable state ..."),
     .help = "Drop TE `_extra_state` artifacts that carry no irreplaceable state (no FP8, or "
             "block/current FP8 scaling) from the distributed checkpoint, keeping them local "
             "instead of writing them. Only delayed-scaling `_extra_state` (amax history + scale) "
             "is ever needed and it is always persisted regardless of this flag. By default (flag "
             "off) all `_extra_state` are persisted, preserving the previous behavior. Older "
             "checkpoints load unchanged either way."},
    {.name = "--ckpt-fully-parallel-load-exchange-algo", G_CHECKPOINTING,
     CHOICE("broadcast", "gather_rounds", "gather_object"), .def = "broadcast",
     TODO("torch_dist checkpoints"),
     .help = "Algorithm for fully parallel load of distributed checkpoints. "
             "\"broadcast\"(default): Broadcast the checkpoint from rank 0 to all other ranks. "
             "\"gather_rounds\": Gather the checkpoint from all ranks in rounds. "
             "\"gather_object\": Gather the checkpoint from all ranks in a single operation."},
    {.name = "--ckpt-fully-parallel-load-per-rank-objects", G_CHECKPOINTING, TRUE_IF_GIVEN,
     TODO("torch_dist checkpoints"),
     .help = "Load ShardedObjects per-rank during fully parallel load of distributed checkpoints. "
             "When True, every rank reads all of its own ShardedObjects (RNG states, TE "
             "`_extra_state`, ...) directly from storage, which removes the WORLD-wide "
             "`all_gather_object` that otherwise exchanges them. Objects are content-addressable "
             "by `unique_key`, so the loaded values are identical. When False (default), the "
             "legacy gather-based object exchange is used."},
    {.name = "--ckpt-fully-parallel-load-process-group", G_CHECKPOINTING, CHOICE("dp", "ep_dp"),
     .def = "dp", TODO("torch_dist checkpoints"),
     .help = "Process group for fully parallel load of distributed checkpoints. \"dp\"(default): "
             "Data parallel process group. \"ep_dp\": Expert data parallel process group."},
    {.name = "--ckpt-fully-parallel-save-process-group", G_CHECKPOINTING, CHOICE("dp", "ep_dp"),
     .def = "dp", TODO("torch_dist checkpoints"),
     .help = "Process group for fully parallel save of distributed checkpoints. \"dp\"(default): "
             "Data parallel process group. \"ep_dp\": Expert data parallel process group."},
    {.name = "--ckpt-pg-tensors-cache-create", G_CHECKPOINTING, TRUE_IF_GIVEN,
     TODO("create (rather than read) the parallelization-group distribution ..."),
     .help = "Create (rather than read) the parallelization-group distribution cache at "
             "``--ckpt-pg-tensors-cache-path``. Set this for a single run with a matching "
             "config/world size: the collective runs as usual but both the save and load "
             "distributions are derived from that single gather and written to disk, one file per "
             "parallelization group. Subsequent runs set only ``--ckpt-pg-tensors-cache-path`` "
             "(leave this False) to skip the collective. Default: False."},
    {.name = "--ckpt-pg-tensors-cache-path", G_CHECKPOINTING, STRING,
     TODO("directory of the parallelization-group distribution cache for fully ..."),
     .help = "Directory of the parallelization-group distribution cache for fully parallel "
             "save/load of distributed checkpoints. When set, the expensive ``all_gather_object`` "
             "in ``determine_main_replica_uniform_distribution`` is replaced by a single "
             "per-group file read (the load and save distributions are loaded from this "
             "directory). Only safe when the config and world size match the run that created the "
             "cache (see ``--ckpt-pg-tensors-cache-create``); no existence/validity checks are "
             "performed, for the lowest possible latency. Default (None) preserves the original "
             "collective-based behaviour."},
    {.name = "--classes-fraction", G_VISION, FLOAT, .def = "1.0", TODO("vision models"),
     .help = "training with fraction of classes."},
    {.name = "--config-logger-dir", G_CL, STRING, .def = "",
     TODO("when non-empty, dumps entry-point configs to config_logger_dir"),
     .help = "When non-empty, dumps entry-point configs to config_logger_dir"},
    {.name = "--cpu-offloading-num-layers", G_TC, INT64, .def = "0",
     TODO("offloading to host memory"),
     .help = "Tells the number of transformer layers for which activations has to be offloaded."},
    {.name = "--cpu-offloading-retain-pinned-cpu-buffers", G_TC, TRUE_IF_GIVEN,
     TODO("offloading to host memory"),
     .help = "If True, the pinned CPU buffers are retained after offloading and reused for the "
             "next iteration. It is useful for cuda graphs capture."},
    {.name = "--create-all-gather-group", G_DI, TRUE_IF_GIVEN,
     TODO("create a separate process group for all-gather operations to overlap ..."),
     .help = "Create a separate process group for all-gather operations to overlap reduce-scatter "
             "and all-gather operations."},
    {.name = "--cuda-graph-impl", G_INFERENCE,
     CHOICE("none", "local", "transformer_engine", "full_iteration"), .def = "none",
     TODO("CUDA graphs"),
     .help = "Determines the CUDA graph capture implementation. \"none\": no CUDA graph. "
             "\"local\": MCore CUDA graph implementation. During training, graphable modules own "
             "per-layer CUDA graphs controlled by cuda_graph_modules. During inference, graph "
             "ownership is controlled separately by inference_cuda_graph_scope. "
             "\"transformer_engine\": Transformer Engine CUDA graph implementation. During "
             "training, TE make_graphed_callables() creates per-layer CUDA graphs controlled by "
             "cuda_graph_modules. Inference CUDA graphs are not supported; "
             "inference_cuda_graph_scope must be \"none\". \"full_iteration\": full-iteration "
             "CUDA graph implementation for the training iteration (1 CUDA graph for the whole "
             "forward-backward path excluding the optimizer step). Inference CUDA graphs are not "
             "supported; inference_cuda_graph_scope must be \"none\". cuda_graph_modules has no "
             "effect when cuda_graph_impl=\"none\" and must be empty when "
             "cuda_graph_impl=\"full_iteration\"."},
    {.name = "--cuda-graph-modules", G_INFERENCE, LIST(-1), .def = "", TODO("CUDA graphs"),
     .help = "Selects training capture coverage within per-layer CUDA graphs (local and "
             "transformer_engine implementations). Valid values are \"attn\", \"mlp\", \"moe\", "
             "\"moe_router\", \"moe_preprocess\", and \"mamba\": \"attn\": captures operations in "
             "TransformerLayer._forward_attention(). \"mlp\": captures operations in "
             "TransformerLayer._forward_mlp() for a dense layer. \"moe\": captures operations in "
             "TransformerLayer._forward_mlp() for a MoE layer. \"moe_router\": captures "
             "operations in TransformerLayer._forward_mlp() up to MoELayer.router(), including "
             "the shared experts if they are not overlapped with EP comm. \"moe_preprocess\": "
             "captures operations in MoELayer.preprocess(). Must be used together with "
             "\"moe_router\". \"mamba\": captures the mamba layer. An empty list means capturing "
             "the whole Transformer layer. This field is meaningless when "
             "--cuda-graph-impl=full_iteration and must be empty. Backward compatibility: "
             "\"full\" is deprecated but kept for backward compatibility; it is transformed to an "
             "empty list in validate_args. The deprecated values \"full_iteration\" and "
             "\"full_iteration_inference\" are also accepted and migrated to the new API in "
             "validate_args."},
    {.name = "--cuda-graph-scope", G_INFERENCE, LIST(-1), TODO("CUDA graphs"),
     .help = "Determines the CUDA graphs capturing scope. Valid values are \"full\", \"attn\" and "
             "\"full_iteration\". \"Full\" scope captures a whole Transformer layer. \"Attn\" "
             "scope only captures operations in TransformerLayer._forward_attention(). "
             "\"ful_iteration\" scope captures a whole iteration. full_iteration scope is only "
             "supported with --cuda-graph-impl=local, attn scope is only supported with "
             "--cuda-graph-impl=transformer_engine."},
    {.name = "--cuda-graph-warmup-steps", G_INFERENCE, INT64, .def = "3", TODO("CUDA graphs"),
     .help = "Number of warmup steps for CUDA graphs. Note: GTP (``gtp_weight_remat_size > 1``) "
             "forces a minimum of 2 per-graph warmup steps regardless of this value, because the "
             "first warmup builds the weight-prefetch chain and the second exercises the prefetch "
             "path before capture."},
    {.name = "--data-parallel-sharding-strategy", G_DISTRIBUTED,
     CHOICE("no_shard", "optim", "optim_grads", "optim_grads_params"), .def = "optim_grads_params",
     TODO("FSDP"),
     .help = "Sharding strategy of data parallelism."},
    {.name = "--data-per-class-fraction", G_VISION, FLOAT, .def = "1.0", TODO("vision models"),
     .help = "training with fraction of data per class."},
    {.name = "--dataloader-defer-npy-index-mmap", G_DAD, TRUE_IF_GIVEN,
     TODO("defer the mmap of the dataset indexes (.npy files) until the first ..."),
     .help = "Defer the mmap of the dataset indexes (.npy files) until the first access. Requires "
             "all the dataset caches to be built and stored in --data-cache-path."},
    {.name = "--dataloader-fast-cache-load", G_DAD, TRUE_IF_GIVEN,
     TODO("option to use the fast cache loading path when building the datasets"),
     .help = "Option to use the fast cache loading path when building the datasets. Requires all "
             "the dataset caches to be built and stored in --data-cache-path."},
    {.name = "--dataloader-inter-document-masking", G_DAD, TRUE_IF_GIVEN,
     TODO("return cu_seqlens marking document boundaries within each sample so ..."),
     .help = "Return cu_seqlens marking document boundaries within each sample so that attention "
             "is restricted to individual documents."},
    {.name = "--ddp-param-name-patterns-for-fp32-local-accumulation", G_DI, LIST(-1), .def = "",
     TODO("list of param_name patterns (in Python's fnmatch format) to match ..."),
     .help = "List of param_name patterns (in Python's fnmatch format) to match against to do "
             "local gradient accumulation in FP32. The special pattern 'all' matches every "
             "parameter."},
    {.name = "--ddp-reduce-scatter-with-fp32-accumulation", G_DI, TRUE_IF_GIVEN,
     TODO("if set, use a reduce-scatter implementation which sends ..."),
     .help = "If set, use a reduce-scatter implementation which sends lower-precision values over "
             "the wire (using an all-to-all to keep total communication overhead in line with the "
             "standard ring implementation) but performs accumulation locally in FP32."},
    {.name = "--decode-only-cuda-graphs", G_INFERENCE, TRUE_IF_GIVEN, TODO("CUDA graphs"),
     .help = "Only use cuda graphs for decode-only steps, not prefill and mixed steps."},
    {.name = "--delay-offload-until-cuda-graph", G_TC, TRUE_IF_GIVEN, TODO("CUDA graphs"),
     .help = "If True, delay the offload until the CUDA graph is executed for minimal CPU "
             "overhead. For more details, see the documentation: "
             "https://github.com/NVIDIA/Megatron-LM/blob/main/docs/user-guide/features/fine_grained_activation_offloading.md#cuda-graph-integration."},
    {.name = "--delay-wgrad-compute", G_MOE, TRUE_IF_GIVEN,
     TODO("delay the weight gradient computation to improve batch-level ..."),
     .help = "Delay the weight gradient computation to improve batch-level communication "
             "overlapping"},
    {.name = "--delta-offload-bytes-across-pp-ranks", G_TC, INT64, .def = "0",
     TODO("offloading to host memory"),
     .help = "Difference of offload bytes across PP ranks to balance the offload load. For more "
             "details, see the documentation: "
             "https://github.com/NVIDIA/Megatron-LM/blob/main/docs/user-guide/features/fine_grained_activation_offloading.md#tuning-parameters."},
    {.name = "--dino-bottleneck-size", G_VISION, INT64, .def = "256", TODO("vision models"),
     .help = "Bottle neck dimension in dino head "},
    {.name = "--dino-freeze-last-layer", G_VISION, FLOAT, .def = "1", TODO("vision models"),
     .help = "Freezing last layer weights"},
    {.name = "--dino-head-hidden-size", G_VISION, INT64, .def = "2048", TODO("vision models"),
     .help = "Hidden dimension size in dino head"},
    {.name = "--dino-local-crops-number", G_VISION, INT64, .def = "10", TODO("vision models"),
     .help = "Number of local crops"},
    {.name = "--dino-local-img-size", G_VISION, INT64, .def = "96", TODO("vision models"),
     .help = "Image size for vision classification task"},
    {.name = "--dino-norm-last-layer", G_VISION, TRUE_IF_GIVEN, TODO("vision models"),
     .help = "Disable Norm in last layer."},
    {.name = "--disable-align-grad-reduce", G_DI, FALSE_IF_GIVEN,
     TODO("if not set, all PP stages will launch gradient reduces simultaneously"),
     .help = "If not set, all PP stages will launch gradient reduces simultaneously. Otherwise, "
             "each PP stage will independently launch as needed."},
    {.name = "--disable-bf16-reduced-precision-matmul", G_MP, TRUE_IF_GIVEN,
     TODO("if True, sets ..."),
     .help = "If True, sets "
             "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction=False to prevent "
             "matmul from using reduced precision accumulation when using BF16."},
    {.name = "--disable-ckpt-load-validate-sharding-integrity", G_CHECKPOINTING, FALSE_IF_GIVEN,
     TODO("whether to validate sharding access integrity when loading *and ..."),
     .help = "Whether to validate sharding access integrity when loading *and saving* a "
             "distributed checkpoint. When True (default), each tensor shard is checked to be "
             "accessed exactly once as main replica by some rank. Disabling skips this "
             "validation; on save this also skips the world-wide determine_global_metadata "
             "all_gather_object (otherwise run on the first save of a job)."},
    {.name = "--disable-clone-scatter-output-in-embedding", G_TC, FALSE_IF_GIVEN,
     TODO("when set to True, clone the output of ..."),
     .help = "When set to True, clone the output of scatter_to_sequence_parallel_region in "
             "embedding layer to facilitate garbage collection of input."},
    {.name = "--disable-flight-recorder-dump-on-timeout", G_DI, FALSE_IF_GIVEN,
     NOOP("PyTorch's NCCL flight recorder (TORCH_NCCL_*); megatron-c has none"),
     .help = "Dump flight recorder traces on NCCL timeout (TORCH_NCCL_DUMP_ON_TIMEOUT)."},
    {.name = "--disable-flight-recorder-extra-dump-on-exec", G_DI, FALSE_IF_GIVEN,
     NOOP("PyTorch's NCCL flight recorder (TORCH_NCCL_*); megatron-c has none"),
     .help = "Enable extra flight recorder dump on execution (TORCH_NCCL_EXTRA_DUMP_ON_EXEC)."},
    {.name = "--disable-flight-recorder-include-only-active", G_DI, FALSE_IF_GIVEN,
     NOOP("PyTorch's NCCL flight recorder (TORCH_NCCL_*); megatron-c has none"),
     .help = "Include only active operations in flight recorder dumps (TORCH_INCLUDE_ONLY_ACTIVE)."},
    {.name = "--disable-gloo-process-groups", G_TRAINING, FALSE_IF_GIVEN,
     FIELD(use_gloo_process_groups),
     IMPLEMENTED_NOTE("megatron-c makes no Gloo groups (its host-side collectives go over MPI); "
                      "Megatron's rule holds: the distributed optimizer then needs a distributed "
                      "checkpoint format"),
     .help = "If enabled, create Gloo process groups for communications."},
    {.name = "--disable-jit-fuser", G_DI, TRUE_IF_GIVEN,
     NOOP("TorchScript's fuser; megatron-c's kernels are C and CUDA, never TorchScript"),
     .help = "Disable the JIT fuser."},
    {.name = "--disable-mamba-mem-eff-path", G_EXPERIMENTAL, FALSE_IF_GIVEN,
     TODO("hybrid Mamba models"),
     .help = "Controls usage of the memory efficient path for Mamba layers."},
    {.name = "--disable-manual-gc-eval", G_TRAINING, FALSE_IF_GIVEN,
     NOOP("Python's garbage collector; megatron-c has none"),
     .help = "When using manual garbage collection, this controls garbage collection at the start "
             "and the end of each evaluation run."},
    {.name = "--disable-pad-vocab-size", G_TOKENIZER, FALSE_IF_GIVEN,
     TODO("whether to pad vocab size of the model automatically if ..."),
     .help = "Whether to pad vocab size of the model automatically if padded_vocab_size is not "
             "provided."},
    {.name = "--disable-save-tokenizer-assets", G_CHECKPOINTING, FALSE_IF_GIVEN,
     TODO("save tokenizer files to checkpoint directory"),
     .help = "Save tokenizer files to checkpoint directory. When enabled, saves all tokenizer "
             "artifacts (vocab files, special tokens, tokenizer config) to make checkpoints "
             "self-contained and portable. Set to False for performance-sensitive scenarios where "
             "tokenizer files are not needed."},
    {.name = "--disable-strict-fsdp-dtensor-load", G_CHECKPOINTING, FALSE_IF_GIVEN, TODO("FSDP"),
     .help = "Whether to enforce strict loading for FSDP DTensor checkpoints. When False, allows "
             "partial loading."},
    {.name = "--disable-symmetric-registration", G_DISTRIBUTED, TRUE_IF_GIVEN, TODO("NCCL tuning"),
     .help = "Disable symmetric (window) registration for NCCL userbuffer registration.This "
             "option will force to use conventional (local) userbuffer registration when "
             "use-nccl-ub is set. Cannot be combined with "
             "--gtp-remat-nccl-ub/--gtp-expert-remat-nccl-ub, which require symmetric windows."},
    {.name = "--disable-tokenizer-sentencepiece-ignore-extra-whitespaces", G_TOKENIZER,
     FALSE_IF_GIVEN, TODO("Megatron main's SentencePiece wrapper options (not in core_v0.15.0, whose "
          "SentencePiece tokenizers megatron-c implements)"),
     .help = "Whether to ignore extra whitespaces in the input text while encoding."},
    {.name = "--disable-tp-comm-bulk-dgrad", G_TRAINING, FALSE_IF_GIVEN,
     FIELD(tp_comm_bulk_dgrad),
     IMPLEMENTED_NOTE("with --tp-comm-overlap; ignored otherwise, as in Megatron"),
     .help = "Controls Reduce-Scatter overlap with Bprop weight gradient GEMM. Don't care if "
             "tp_comm_overlap is False."},
    {.name = "--disable-tp-comm-bulk-wgrad", G_TRAINING, FALSE_IF_GIVEN,
     FIELD(tp_comm_bulk_wgrad),
     IMPLEMENTED_NOTE("with --tp-comm-overlap; ignored otherwise, as in Megatron"),
     .help = "Controls All-Gather overlap with Bprop activation gradient GEMM. Don't care if "
             "tp_comm_overlap is False."},
    {.name = "--disable-tp-comm-overlap-ag", G_TRAINING, FALSE_IF_GIVEN,
     FIELD(tp_comm_overlap_ag),
     IMPLEMENTED_NOTE("with --tp-comm-overlap; ignored otherwise, as in Megatron"),
     .help = "Controls All-Gather overlap with GEMM by pipelining the GEMM and All-Gather. Don't "
             "care if tp_comm_overlap is False."},
    {.name = "--disable-tp-comm-overlap-rs", G_TRAINING, FALSE_IF_GIVEN,
     FIELD(tp_comm_overlap_rs),
     IMPLEMENTED_NOTE("with --tp-comm-overlap; ignored otherwise, as in Megatron"),
     .help = "Controls Reduce-Scatter overlap with GEMM by pipelining the GEMM and "
             "Reduce-Scatter. Don't care if tp_comm_overlap is False."},
    {.name = "--disable-tp-comm-split-ag", G_TRAINING, FALSE_IF_GIVEN,
     NOOP("deprecated from Transformer Engine v1.6.0, which ignores it (Megatron's help)"),
     .help = "Deprecated from TransformerEngine v1.6.0. Controls All-Gather overlap with Fprop "
             "GEMM by pipelining the GEMM and All-Gather splits. Don't care if tp_comm_overlap is "
             "False."},
    {.name = "--disable-tp-comm-split-rs", G_TRAINING, FALSE_IF_GIVEN,
     NOOP("deprecated from Transformer Engine v1.6.0, which ignores it (Megatron's help)"),
     .help = "Deprecated from TransformerEngine v1.6.0. Controls Reduce-Scatter overlap with "
             "Fprop GEMM by pipelining the GEMM and Reduce-Scatter splits. Don't care if "
             "tp_comm_overlap is False."},
    {.name = "--disable-use-tokenizer-model-from-checkpoint-args", G_CHECKPOINTING, FALSE_IF_GIVEN,
     TODO("if set, do not use tokenizer model path from checkpoint"),
     .help = "If set, do not use tokenizer model path from checkpoint"},
    {.name = "--dist-ckpt-optim-fully-reshardable", G_CHECKPOINTING, TRUE_IF_GIVEN,
     FIELD(dist_ckpt_optim_fully_reshardable),
     IMPLEMENTED_NOTE("torch_dist saves the distributed optimizer's state in model space "
                      "(optimizer.state.{param,exp_avg,exp_avg_sq}.<key>) instead of "
                      "dp_reshardable buckets; loads read either"),
     .help = "Make optimizer distributed checkpoint fully reshardable (TP/PP/EP/DP) as opposed to "
             "plain DP reshardability."},
    {.name = "--dist-ckpt-save-pre-mcore-014", G_CHECKPOINTING, TRUE_IF_GIVEN,
     TODO("torch_dist checkpoints"),
     .help = "Revert checkpointing simplifications introduced in Megatron-Core v0.14. This option "
             "affects only checkpoint saving format and will be removed soon (checkpoint load "
             "format is determined based on checkpoint metadata)."},
    {.name = "--dist-ckpt-strictness", G_CHECKPOINTING,
     CHOICE("assume_ok_unexpected", "log_unexpected", "log_all", "raise_unexpected", "raise_all", "return_unexpected", "return_all", "ignore_all"),
     .def = "assume_ok_unexpected", FIELD(dist_ckpt_strictness),
     IMPLEMENTED_NOTE("torch_dist loads: keys the checkpoint has but this run does not ask for "
                      "(unexpected) are logged or refused as Megatron's StrictHandling says; a "
                      "key this run needs that is missing is always an error (return_* and "
                      "ignore_all behave as the log_* values)"),
     .help = "Determine handling of key mismatch during checkpoint load. Check StrictHandling "
             "docs for flags meaning. NOTE: This flag controls only distributed checkpoint load "
             "from storage, not loading state dict into the model. For fsdp_dtensor checkpoints "
             "it covers model weights a partial load cannot supply, and assume_ok_unexpected "
             "raises like raise_unexpected there because a partial load never raises on its own. "
             "Use ignore_all to opt out."},
    {.name = "--distrib-optim-fully-reshardable-mem-efficient", G_CHECKPOINTING, TRUE_IF_GIVEN,
     TODO("during distributed optimizer checkpoint save and load tries to use ..."),
     .help = "During distributed optimizer checkpoint save and load tries to use as little memory "
             "as possible by using Gloo (instead of NCCL) and only one rank for saving. Turn on "
             "only if experiencing host or device memory issues. Has affect only with "
             "`dist_ckpt_optim_fully_reshardable` flag."},
    {.name = "--distributed-timeout-seconds-after-init", G_DISTRIBUTED, INT64,
     TODO("timeout in seconds for process groups after initialization"),
     .help = "Timeout in seconds for process groups after initialization. This timeout is applied "
             "to all process groups after initialization and the first iteration completes."},
    {.name = "--dump-param-to-param-group-map", G_TRAINING, STRING,
     TODO("path to a file containing parameter-to-parameter-group mapping"),
     .help = "Path to a file containing parameter-to-parameter-group mapping. Provide a JSON file "
             "that specifies which parameters belong to which parameter group for global "
             "coordination."},
    {.name = "--embedding-path", G_BIENCODER, STRING, TODO("biencoder (ICT) models"),
     .help = "Where to save/load Open-Retrieval Embedding data to/from"},
    {.name = "--enable-cuda-graph", G_INFERENCE, TRUE_IF_GIVEN, TODO("CUDA graphs"),
     .help = "DEPRECATED and replaced by cuda_graph_impl. When set to true, either partial CUDA "
             "graph (1/many CUDA graph per layer) or full iteration CUDA graph (1 CUDA graph for "
             "whole iteration excluding optimizer) is enabled. cuda_graph_modules determines the "
             "scope of graph capture."},
    {.name = "--enable-experimental", G_EXPERIMENTAL, TRUE_IF_GIVEN,
     TODO("enable experimental features"),
     .help = "Enable experimental features."},
    {.name = "--enable-full-sharding-in-hsdp", G_DISTRIBUTED, TRUE_IF_GIVEN,
     TODO("if set, enable full sharding in megatron-fsdp Hybrid Sharded Data ..."),
     .help = "If set, enable full sharding in megatron-fsdp Hybrid Sharded Data Parallel (HSDP) "
             "mode."},
    {.name = "--enable-mhc-connections", G_TC, TRUE_IF_GIVEN, TODO("mHC residual connections"),
     .help = "Enable mHC residual connections."},
    {.name = "--ep-overlap-early-attn-memory-release", G_TC, TRUE_IF_GIVEN,
     TODO("enable early memory release of attention activations during EP overlap"),
     .help = "Enable early memory release of attention activations during EP overlap. EP overlap "
             "can increase peak memory usage when the overlapped forward module allocates more "
             "memory than what is freed by the backward module. This flag addresses this by "
             "reordering the attention backward pass to occur earlier in the schedule. "
             "Specifically: - Without this flag: attn_bwd executes after moe_combine_fwd - With "
             "this flag: attn_bwd executes before mlp_fwd The earlier execution releases "
             "attention activations sooner, reducing peak memory. Note: This may impact "
             "performance as moe_combine_fwd and moe_dispatch_bwd become exposed (not overlapped "
             "with other computation)."},
    {.name = "--evidence-data-path", G_BIENCODER, STRING, TODO("biencoder (ICT) models"),
     .help = "Path to Wikipedia Evidence frm DPR paper"},
    {.name = "--exit-signal-handler-for-training", G_TRAINING, TRUE_IF_GIVEN,
     TODO("shutdown the training when SIGINT or SIGTERM received to avoid ..."),
     .help = "Shutdown the training when SIGINT or SIGTERM received to avoid unclear traceback"},
    {.name = "--exp-avg-dtype", G_EXPERIMENTAL, CHOICE("fp32", "fp16", "bf16", "fp8"),
     .def = "fp32", TODO("dtype of exp_avg (1st moment in adam optimizer) when enabling ..."),
     .help = "Dtype of exp_avg (1st moment in adam optimizer) when enabling "
             "precision-aware-optimizer. This dtype is used for storing the optimizer state in "
             "memory during training but does not affect the precision in the kernel computation."},
    {.name = "--exp-avg-sq-dtype", G_EXPERIMENTAL, CHOICE("fp32", "fp16", "bf16", "fp8"),
     .def = "fp32", TODO("dtype of exp_avg_sq (2nd moment in adam optimizer) when enabling ..."),
     .help = "Dtype of exp_avg_sq (2nd moment in adam optimizer) when enabling "
             "precision-aware-optimizer. This dtype is used for storing the optimizer state in "
             "memory during training but does not affect the precision in the kernel computation."},
    {.name = "--external-cuda-graph", G_INFERENCE, TRUE_IF_GIVEN, TODO("CUDA graphs"),
     .help = "DEPRECATED and replaced by cuda_graph_impl. When set to true, TransformerLayer "
             "layers are swapped with user provided CUDA graphs."},
    {.name = "--fake-process-group", G_DI, TRUE_IF_GIVEN,
     TODO("if set, initialize with fake distributed process group and all ..."),
     .help = "If set, initialize with fake distributed process group and all distributed "
             "communication operations will be skipped.                        This is quite "
             "useful for profiling memory usage of distributed training with just one GPU.        "
             "                Setting WORLD_SIZE and RANK to the specific values for target "
             "distribtued scale."},
    {.name = "--fim-data", G_DAD, TRUE_IF_GIVEN, FIELD(fim_data),
     IMPLEMENTED_NOTE("GPTFIMDataset's samples; --tokenizer-type GPT2BPETokenizer with the FIM "
                      "tokens in its vocab.json"),
     .help = "Whether to use the FIM dataset."},
    {.name = "--fim-eod-token", G_DAD, STRING, .def = "<|endoftext|>", FIELD(fim_eod_token),
     IMPLEMENTED, .help = "FIM EOD token"},
    {.name = "--fim-fragment-rate", G_DAD, FLOAT, FIELD(fim_fragment_rate),
     SET_FLAG(fim_fragment_rate_set), IMPLEMENTED,
     .help = "Rate of FIM on each fragment when --fim-split-sample is not None."},
    {.name = "--fim-middle-token", G_DAD, STRING, .def = "<fim_middle>", FIELD(fim_middle_token),
     IMPLEMENTED, .help = "FIM middle token"},
    {.name = "--fim-no-prefix", G_DAD, STRING, FIELD(fim_no_prefix), IMPLEMENTED,
     .help = "Do not apply FIM to fragments that start with this prefix"},
    {.name = "--fim-pad-token", G_DAD, STRING, .def = "<fim_pad>", FIELD(fim_pad_token),
     IMPLEMENTED, .help = "FIM PAD token"},
    {.name = "--fim-prefix-token", G_DAD, STRING, .def = "<fim_prefix>", FIELD(fim_prefix_token),
     IMPLEMENTED, .help = "FIM prefix token"},
    {.name = "--fim-rate", G_DAD, FLOAT, .def = "0.5", FIELD(fim_rate), IMPLEMENTED,
     .help = "Probability to convert a training sample into a FIM format."},
    {.name = "--fim-split-sample", G_DAD, STRING, FIELD(fim_split_sample), IMPLEMENTED,
     .help = "String around which to split the sample for FIM."},
    {.name = "--fim-spm-rate", G_DAD, FLOAT, .def = "0.5", FIELD(fim_spm_rate), IMPLEMENTED,
     .help = "Probability that the a FIM sample uses the SPM format over the PSM format."},
    {.name = "--fim-suffix-token", G_DAD, STRING, .def = "<fim_suffix>", FIELD(fim_suffix_token),
     IMPLEMENTED, .help = "FIM suffix token"},
    {.name = "--fine-grained-activation-offloading", G_TC, TRUE_IF_GIVEN,
     TODO("offloading to host memory"),
     .help = "If True, offload the input of the specified modules to the CPU. Fine-grained "
             "activation offloading is a module-level offloading method instead of a layer-level "
             "offloading method like cpu_offloading."},
    {.name = "--fine-grained-offloading-max-inflight-offloads", G_TC, INT64,
     TODO("offloading to host memory"),
     .help = "Per fine-grained offloading group name, max number of inflight offloads for that "
             "name not yet joined on the main stream (wait_event on D2H). The same cap applies to "
             "every name (e.g., ``moe_act`` and ``qkv_linear`` each have their own pending "
             "queue). 0 = wait after every offload for that name. 1 = at most one not-yet-waited "
             "offload per name, etc. None = do not insert these joins. This feature is "
             "particularly useful when using with full-iteration CUDA graphs"},
    {.name = "--flash-attention-version", G_TC, CHOICE("2", "3", "4"),
     TODO("pin the FlashAttention generation (2, 3, or 4) used by both the ..."),
     .help = "Pin the FlashAttention generation (2, 3, or 4) used by both the training "
             "(TransformerEngine) and inference (mcore dynamic-batching) attention paths. When "
             "None, each path selects a version automatically based on what is installed. Pinning "
             "is required for batch-invariant mode: the training-side logprob recompute and the "
             "inference engine must run the same kernel, since different FlashAttention "
             "generations use different tile sizes and softmax accumulation orders and therefore "
             "differ bitwise. On the training side this is enforced via TransformerEngine's "
             "NVTE_FLASH_ATTN_V2/V3/V4 selection environment variables."},
    {.name = "--flight-recorder-dump-path", G_DI, STRING, TODO("PyTorch's NCCL flight recorder"),
     .help = "Path for NCCL flight recorder trace dumps. Sets TORCH_FR_DUMP_TEMP_FILE and "
             "TORCH_NCCL_DEBUG_INFO_TEMP_FILE env variables before distributed init."},
    {.name = "--flight-recorder-include-stack-trace", G_DI, TRUE_IF_GIVEN,
     TODO("PyTorch's NCCL flight recorder"),
     .help = "Include stack traces in flight recorder dumps (TORCH_INCLUDE_STACK_TRACE)."},
    {.name = "--flight-recorder-trace-buffer-size", G_DI, INT64, .def = "2000",
     TODO("PyTorch's NCCL flight recorder"),
     .help = "Size of the NCCL flight recorder trace buffer (TORCH_NCCL_TRACE_BUFFER_SIZE)."},
    {.name = "--freeze-all-layers", G_LRAWD, TRUE_IF_GIVEN, TODO("freeze all layers of the model"),
     .help = "Freeze all layers of the model."},
    {.name = "--fsdp-db-use-persist-buf-on-alloc-fail", G_EXPERIMENTAL, TRUE_IF_GIVEN,
     TODO("FSDP"),
     .help = "When using Megatron-FSDP double buffering, persist non-unit modules that are not "
             "included in the symmetric buffer pool. May be necessary for NCCL UBR or CUDA Graphs "
             "on hybrid architectures."},
    {.name = "--fsdp-double-buffer", G_DISTRIBUTED, TRUE_IF_GIVEN, TODO("FSDP"),
     .help = "Enable double buffering for temporary memory needed for Megatron FSDP "
             "communications. Double-buffering the communication memory improves memory "
             "management efficiency by reusing previously allocated buffers, rather than creating "
             "new buffers for each FSDP communication. This is required for user buffer "
             "registration and is enabled by default when using NCCL user buffers."},
    {.name = "--fsdp-manual-registration", G_DI, TRUE_IF_GIVEN, TODO("FSDP"),
     .help = "Manually register the FSDP communication buffers to NCCL user buffer.This option is "
             "only effective when use-megatron-fsdp and use-nccl-ub is set."},
    {.name = "--fused-residual-rmsnorm", G_TC, TRUE_IF_GIVEN,
     TODO("if True, fuses residual connection and RMSNorm backward pass when TE ..."),
     .help = "If True, fuses residual connection and RMSNorm backward pass when TE is used."},
    {.name = "--gdp-cutedsl-kernel", G_TC, TRUE_IF_GIVEN, TODO("gated delta net layers"),
     .help = "Whether to use the CuTeDSL kernel for the GatedDeltaProduct mixer."},
    {.name = "--gdp-num-chunk-states-to-recompute", G_TC, INT64, .def = "2",
     TODO("gated delta net layers"),
     .help = "Checkpoint-coarsening ratio N in [0, 64] for the CuTeDSL GatedDeltaProduct kernel. "
             "N=0 checkpoints every chunk state for the backward pass (dense, no recompute). N>=1 "
             "stores one checkpoint per group of N+1 chunks (1/(N+1) the checkpoint memory) and "
             "the backward recomputes each group's N missing chunk states, trading recompute time "
             "for activation memory monotonically in N (sweet spot N=2..3). Only honored by "
             "kernel builds that expose the num_chunk_states_to_recompute argument."},
    {.name = "--gdp-num-householder", G_TC, INT64, .def = "3", TODO("gated delta net layers"),
     .help = "The number of Householder reflections used in Gated Delta Product layers."},
    {.name = "--glu-linear-offset", G_NS, FLOAT, .def = "0.0",
     TODO("offset term in the GLU activation function: activation_func(x[0]) * ..."),
     .help = "Offset term in the GLU activation function: activation_func(x[0]) * (x[1] + "
             "offset). Only used when gated_linear_unit is True"},
    {.name = "--gpu-sniff-test-interval", G_TRAINING, INT64,
     TODO("interval (in iterations) to run GPU performance sniff tests (GEMMs, ..."),
     .help = "Interval (in iterations) to run GPU performance sniff tests (GEMMs, all-to-all, "
             "send/recv). Flags any rank whose throughput differs from the mean by more than one "
             "standard deviation. If not specified, sniff tests are not run."},
    {.name = "--gtp-remat-nccl-ub", G_DI, TRUE_IF_GIVEN, TODO("NCCL tuning"),
     .help = "Register the wgrad reduce-scatter send buffers with NCCL symmetric memory on the "
             "GTP group, independent of --use-nccl-ub (which covers the DP group)."},
    {.name = "--gtp-remat-opt-in-modules", G_TC, LIST(-1), .def = "",
     TODO("extra modules to apply GTP_remat weight sharding to, beyond the ..."),
     .help = "Extra modules to apply GTP_remat weight sharding to, beyond the default set "
             "(attention, Mamba, MLP, expert linears, embeddings). Allowed values: - "
             "``\"moe_latent_proj\"`` — shard ``fc1_latent_proj`` / ``fc2_latent_proj`` (MoE "
             "latent projections, ``parallel_mode=\"duplicated\"``). Only beneficial when "
             "``moe_latent_size`` is large enough for the all-gather to amortize."},
    {.name = "--gtp-remat-reduce-scatter-with-fp32-accumulation", G_DI, TRUE_IF_GIVEN,
     TODO("same trade as --ddp-reduce-scatter-with-fp32-accumulation, but for ..."),
     .help = "Same trade as --ddp-reduce-scatter-with-fp32-accumulation, but for the wgrad "
             "reduce-scatter GTP weight-remat performs over the gtp_remat axis: send "
             "low-precision values over the wire via an all-to-all and accumulate locally in "
             "FP32. Independent of the DDP flag (different collective, different process group). "
             "Costs one extra unsharded-wgrad-sized scratch buffer per in-flight reduce-scatter."},
    {.name = "--head-lr-mult", G_VISION, FLOAT, .def = "1.0", TODO("vision models"),
     .help = "learning rate multiplier for head during finetuning"},
    {.name = "--heterogeneous-layers-config-encoded-json", G_HA, STRING,
     TODO("heterogeneous layer configurations"),
     .help = "This is encoded json string of the heterogeneous model configuration. Used to keep "
             "the content of the heterogeneous model specification in args when the model is "
             "loaded from a checkpoint. Use the format of the HuggingFace config files in llama "
             "nemotron models, e.g. "
             "https://huggingface.co/nvidia/Llama-3_3-Nemotron-Super-49B-v1/resolve/main/config.json."},
    {.name = "--heterogeneous-layers-config-path", G_HA, STRING,
     TODO("heterogeneous layer configurations"),
     .help = "Path to json file containing heterogeneous model configuration. Use the format of "
             "the HuggingFace config files in llama nemotron models, e.g. "
             "https://huggingface.co/nvidia/Llama-3_3-Nemotron-Super-49B-v1/resolve/main/config.json."},
    {.name = "--high-priority-a2a-comm-stream", G_TC, TRUE_IF_GIVEN,
     TODO("if True, the communication stream created by set_streams for ..."),
     .help = "If True, the communication stream created by set_streams for combined 1f1b a2a "
             "overlap is created with CUDA high priority."},
    {.name = "--high-priority-stream-groups", G_TRAINING, LIST(-1), .def = "",
     TODO("specify which communicator groups should use high priority streams ..."),
     .help = "Specify which communicator groups should use high priority streams during creation. "
             "Assigning high priority to communication streams ensures that communication kernels "
             "are scheduled with higher priority, minimizing the exposed communication when it is "
             "overlapped with other computation kernels."},
    {.name = "--hybrid-attention-ratio", G_EXPERIMENTAL, FLOAT, .def = "0.0",
     TODO("hybrid Mamba models"),
     .help = "Ratio of attention layers to total layers, in the range [0.0, 1.0]."},
    {.name = "--hybrid-context-parallel", G_TC, TRUE_IF_GIVEN, TODO("hybrid Mamba models"),
     .help = "If true, enables hybrid context parallel. This is used to balance the workload of "
             "each CP rank when we use packed samples with variable sequence lengths. Please set "
             "max_seqlen_per_dp_cp_rank when using hybrid_context_parallel."},
    {.name = "--hybrid-layer-pattern", G_EXPERIMENTAL, STRING, TODO("hybrid Mamba models"),
     .help = "Specify a hybrid layer pattern using M (mamba), G (gdn), * (attention), D (dsa), - "
             "(mlp), E (moe). Use | to define pipeline stage boundaries for flexible virtual "
             "pipeline parallel (fVPP). Use / to separate MTP patterns. Example: "
             "\"M-M-|M-M*-|M-M-|M-M*-\" or \"M-M-|M-M*-/MM/MM\". When this flag is used, it is "
             "the sole indicator that a hybrid model is being run."},
    {.name = "--hybrid-mlp-ratio", G_EXPERIMENTAL, FLOAT, .def = "0.0",
     TODO("hybrid Mamba models"),
     .help = "Ratio of mlp layers to total layers, in the range [0.0, 1.0]."},
    {.name = "--hybrid-override-pattern", G_EXPERIMENTAL, STRING, TODO("hybrid Mamba models"),
     .help = "Deprecated. Use --hybrid-layer-pattern instead. If specified, its value will be "
             "forwarded to --hybrid-layer-pattern."},
    {.name = "--ict-head-size", G_BIENCODER, INT64, TODO("biencoder (ICT) models"),
     .help = "Size of block embeddings to be used in ICT and REALM (paper default: 128)"},
    {.name = "--ict-load", G_BIENCODER, STRING, TODO("biencoder (ICT) models"),
     .help = "Directory containing an ICTBertModel checkpoint"},
    {.name = "--img-h", G_VISION, INT64, .def = "224", TODO("vision models"),
     .help = "Image height for vision classification task"},
    {.name = "--img-w", G_VISION, INT64, .def = "224", TODO("vision models"),
     .help = "Image height for vision classification task"},
    {.name = "--inference-cuda-graph-all-prefills", G_INFERENCE, TRUE_IF_GIVEN,
     TODO("CUDA graphs"),
     .help = "Extend prefill/mixed CUDA graph capture up to `max_tokens`. By default, all graphs "
             "are limited by the decode limit of `max_requests * (num_speculative_tokens + 1)`."},
    {.name = "--inference-cuda-graph-max-tokens", G_INFERENCE, INT64, .def = "512",
     TODO("CUDA graphs"),
     .help = "Token ceiling for the largest captured prefill/mixed CUDA graph (default: 512). "
             "Clamped to at least the decode limit `max_requests * (num_speculative_tokens + 1)` "
             "and at most `max_tokens`. Ignored when --inference-cuda-graph-all-prefills is set "
             "(which extends capture to the full `max_tokens`)."},
    {.name = "--inference-cuda-graph-scope", G_TC, CHOICE("none", "layer", "block"),
     TODO("CUDA graphs"),
     .help = "Controls the CUDA graph scope during inference. When unset, the effective default "
             "is derived from cuda_graph_impl: \"local\" -> \"layer\", all other impls -> "
             "\"none\". \"none\": inference runs in eager mode (no CUDA graphs). \"layer\": "
             "inference graphs are owned at the module/layer boundary, e.g. TransformerLayer or "
             "MambaLayer. \"block\": inference graphs are owned by the enclosing block, e.g. "
             "TransformerBlock or HybridBlock. Currently supported combinations are: "
             "cuda_graph_impl=\"local\" -> \"layer\" or \"block\"; all other cuda_graph_impl "
             "values -> \"none\"."},
    {.name = "--inference-dynamic-batching-cuda-graph-mixed-prefill-count", G_INFERENCE, INT64,
     .def = "16", TODO("CUDA graphs"),
     .help = "Number of mixed prefill requests to capture in a cuda graph."},
    {.name = "--inference-dynamic-batching-cuda-graph-sizing-distribution", G_INFERENCE,
     CHOICE("exponential", "linear"), .def = "exponential", TODO("CUDA graphs"),
     .help = "Spacing of CUDA graph token counts. \"exponential\" (default) halves from "
             "cuda_graph_max_tokens down to tp_size, giving a log-spaced distribution with "
             "bounded relative padding. \"linear\" uses varying linear strides across the range."},
    {.name = "--inference-dynamic-batching-mamba-memory-ratio", G_INFERENCE, FLOAT,
     TODO("hybrid Mamba models"),
     .help = "Percentage of memory buffer to allocate for Mamba states. If not specified, "
             "allocates Mamba state tensors for each KV cache block. Only used for hybrid models."},
    {.name = "--inference-dynamic-batching-num-cuda-graphs", G_INFERENCE, INT64, .def = "16",
     TODO("CUDA graphs"),
     .help = "Maximum number of cuda graphs to capture, where the cuda graph batch sizes range "
             "from 1 to `max_requests`. (See `dynamic_context.py` for details on how "
             "`max_requests` is computed). Due to rounding, the actual number of cuda graphs may "
             "not equal this argument.The user can also pass -1, in which case we automatically "
             "determine the number of graphs to capture based on the `max_requests`."},
    {.name = "--inference-dynamic-batching-prefix-caching-mamba-gb", G_INFERENCE, FLOAT,
     TODO("hybrid Mamba models"),
     .help = "GPU memory budget (in GB) for the Mamba state cache used by prefix caching on "
             "hybrid models. When set, Mamba states at block boundaries are cached for reuse. "
             "This budget covers both the durable cache (the ssm_states/conv_states slots reused "
             "across requests) and the per-step extraction scratch (the "
             "intermediate_ssm_out/intermediate_conv_out buffers, sized to min(ceil(max_tokens / "
             "block_size), 3 * max_requests) slots); the scratch is reserved first, so a smaller "
             "max_tokens (or max_requests) shrinks the scratch and leaves more durable slots."},
    {.name = "--inference-fuse-tp-communication", G_TC, TRUE_IF_GIVEN,
     TODO("Transformer Engine's tensor-parallel communication overlap"),
     .help = "If true, uses a fused reduce-scatter-residual-norm-allgather kernel during "
             "inference."},
    {.name = "--init-model-with-meta-device", G_DISTRIBUTED, TRUE_IF_GIVEN,
     TODO("if True, initializes the model with the meta device"),
     .help = "If True, initializes the model with the meta device. This is helpful for training "
             "of very large models. This feature is only works when megatron fsdp is turned on."},
    {.name = "--is-hybrid-model", G_EXPERIMENTAL, TRUE_IF_GIVEN, TODO("hybrid Mamba models"),
     .help = "Indicates whether this is a hybrid model."},
    {.name = "--iter-per-epoch", G_VISION, INT64, .def = "1250", TODO("vision models"),
     .help = "iterations per epoch"},
    {.name = "--lazy-mpu-init", G_DISTRIBUTED, TRUE_IF_GIVEN,
     TODO("if set to True, initialize_megatron() skips DDP initialization and ..."),
     .help = "If set to True, initialize_megatron() skips DDP initialization and returns function "
             "to complete it instead. Also turns on --use-cpu-initialization flag. This is for "
             "external DDP manager."},
    {.name = "--linear-conv-kernel-dim", G_TC, INT64, .def = "4", TODO("gated delta net layers"),
     .help = "Conv kernel dimension for the gated delta net."},
    {.name = "--linear-key-head-dim", G_TC, INT64, .def = "128", TODO("gated delta net layers"),
     .help = "Query and key head dimension for the gated delta net."},
    {.name = "--linear-num-key-heads", G_TC, INT64, .def = "16", TODO("gated delta net layers"),
     .help = "Number of query and key heads for the gated delta net."},
    {.name = "--linear-num-value-heads", G_TC, INT64, .def = "32", TODO("gated delta net layers"),
     .help = "Number of value and gate heads for the gated delta net."},
    {.name = "--linear-value-head-dim", G_TC, INT64, .def = "128", TODO("gated delta net layers"),
     .help = "Value and gate head dimension for the gated delta net."},
    {.name = "--lion-beta1", G_REGULARIZATION, FLOAT, .def = "0.95", TODO("other optimizers"),
     .help = "First beta coefficient for Lion optimizer (used in sign update). Default: 0.95."},
    {.name = "--lion-beta2", G_REGULARIZATION, FLOAT, .def = "0.98", TODO("other optimizers"),
     .help = "Second beta coefficient for Lion optimizer (used in momentum EMA update). Default: "
             "0.98."},
    {.name = "--load-main-params-from-ckpt", G_CHECKPOINTING, TRUE_IF_GIVEN,
     TODO("load main parameters from checkpoint"),
     .help = "Load main parameters from checkpoint. When loading a model from a checkpoint "
             "without loading the optimizer, the model parameters are updated but for fp16 "
             "optimizer with main parameters, the main parameters need to also be updated."},
    {.name = "--log-device-memory-used", G_LOGGING, TRUE_IF_GIVEN,
     TODO("log device memory used (as reported by nvidia-smi)"),
     .help = "Log device memory used (as reported by nvidia-smi)."},
    {.name = "--log-max-attention-logit", G_LOGGING, TRUE_IF_GIVEN,
     TODO("enable max attention logit logging to tensorboard"),
     .help = "Enable max attention logit logging to tensorboard."},
    {.name = "--log-memory-interval", G_LOGGING, INT64, TODO("report memory interval"),
     .help = "Report memory interval."},
    {.name = "--mamba-head-dim", G_EXPERIMENTAL, INT64, .def = "64", TODO("hybrid Mamba models"),
     .help = "The dimensionality of the heads in the Mamba layers."},
    {.name = "--mamba-inference-conv-states-dtype", G_INFERENCE, CHOICE("bf16", "fp16", "fp32"),
     .def = "bf16", TODO("hybrid Mamba models"),
     .help = "Dtype for the Mamba inference conv states tensor"},
    {.name = "--mamba-inference-ssm-states-dtype", G_INFERENCE, CHOICE("bf16", "fp16", "fp32"),
     .def = "bf16", TODO("hybrid Mamba models"),
     .help = "Dtype for the Mamba inference SSM states tensor"},
    {.name = "--mamba-num-groups", G_EXPERIMENTAL, INT64, .def = "8", TODO("hybrid Mamba models"),
     .help = "The number of groups used in Mamba layers."},
    {.name = "--mamba-num-heads", G_EXPERIMENTAL, INT64, TODO("hybrid Mamba models"),
     .help = "The number of heads used in Mamba layers. If None, the number of heads will be "
             "hidden_size * expand // mamba_head_dim."},
    {.name = "--mamba-state-dim", G_EXPERIMENTAL, INT64, .def = "128", TODO("hybrid Mamba models"),
     .help = "The dimensionality of the state representation in Mamba layers."},
    {.name = "--mamba-training-ssm-states-dtype", G_MP, CHOICE("fp32", "bf16"),
     TODO("hybrid Mamba models"),
     .help = "Dtype of the materialized inter-chunk SSM states in Mamba training"},
    {.name = "--mask-factor", G_VISION, FLOAT, .def = "1.0", TODO("vision models"),
     .help = "mask size scaling parameter"},
    {.name = "--mask-prob", G_DAD, FLOAT, .def = "0.15",
     TODO("probability of replacing a token with mask"),
     .help = "Probability of replacing a token with mask."},
    {.name = "--mask-type", G_VISION, CHOICE("random", "row"), .def = "random",
     TODO("vision models"),
     .help = "mask types"},
    {.name = "--max-seqlen-per-dp-cp-rank", G_TC, INT64, TODO("context parallelism"),
     .help = "Maximum sequence length per DPxCP rank. This is the maximum sequence length each "
             "rank can handle without overflowing the memory. Typically, a good starting point is "
             "to set this to maximum sequence length / context parallel size. This is used to "
             "calculate the number and length of sub-samples assigned to each rank when using "
             "hybrid_context_parallel."},
    {.name = "--megatron-fsdp-enable-fine-grained-param-gather", G_EXPERIMENTAL, TRUE_IF_GIVEN,
     TODO("FSDP"),
     .help = "If set, enables fine-grained parameter gathering for Megatron-FSDP. This allows "
             "greater overlap between parameter all-gather operations and forward computation, at "
             "the cost of additional communication calls. For MXFP8, this helps save memory "
             "during fine-grained activation recomputation, because MXFP8 forward and backward "
             "passes use different parameter representations (rowwise data for forward, colwise "
             "data for backward). Only the rowwise parameters of modules involved in "
             "recomputation will be unsharded."},
    {.name = "--megatron-fsdp-grad-comm-dtype", G_EXPERIMENTAL,
     CHOICE("fp32", "fp16", "bf16", "auto"), .def = "auto", TODO("FSDP"),
     .help = "When using Megatron-FSDP, this controls the data-type used when communicating model "
             "gradients during FSDP. If 'auto', then the main gradient data-type will be used for "
             "the gradient communication / reduction data-type. When using NCCL v2.27+, reduction "
             "is always computed in FP32 if using NCCL Symmetric kernels."},
    {.name = "--megatron-fsdp-main-grads-dtype", G_EXPERIMENTAL,
     CHOICE("fp32", "bf16", "fp16", "auto"), .def = "auto", TODO("FSDP"),
     .help = "Data type for the main gradient buffer utilized for distributed optimization with "
             "Megatron-FSDP. If 'auto', then the native model gradient data-type will be used for "
             "the main gradient / accumulation data-type. Replaces --main-grads-dtype."},
    {.name = "--megatron-fsdp-main-params-dtype", G_EXPERIMENTAL,
     CHOICE("fp32", "bf16", "fp16", "auto"), .def = "fp32", TODO("FSDP"),
     .help = "Data type for the main weight buffer utilized for distributed optimization and "
             "quantization with Megatron-FSDP. If 'auto', then the native model parameter "
             "data-type will be used for the main weight data-type. Replaces --main-params-dtype."},
    {.name = "--megatron-fsdp-max-pool-double-buffer", G_EXPERIMENTAL, TRUE_IF_GIVEN, TODO("FSDP"),
     .help = "When using Megatron-FSDP double buffering, use the MaxPoolAllocator instead of the "
             "FixedPoolAllocator to support asymmetrical FSDP unit configurations. Will increase "
             "memory overhead to recycle buffers that fit all FSDP units. Enables NCCL user "
             "buffer registration and CUDA graph replay for mixed-arch models."},
    {.name = "--megatron-fsdp-version", G_DI, CHOICE("1", "2"), .def = "1", TODO("FSDP"),
     .help = "Megatron-FSDP implementation version. Defaults to 1."},
    {.name = "--memory-snapshot-path", G_TRAINING, STRING, .def = "snapshot.pickle",
     TODO("profiling"),
     .help = "Specifies where to dump the memory history pickle."},
    {.name = "--mhc-init-gating-factor", G_TC, FLOAT, .def = "0.01",
     TODO("mHC residual connections"),
     .help = "Initial value of Gating Factor (alpha in paper)."},
    {.name = "--mhc-num-residual-streams", G_TC, INT64, .def = "4",
     TODO("mHC residual connections"),
     .help = "Number of residual streams (n in paper)."},
    {.name = "--mhc-recompute-layer-num", G_TC, INT64, TODO("mHC residual connections"),
     .help = "Number of layers per MHC recompute block. When set, every `mhc_recompute_layer_num` "
             "layers form a recompute block. The last layer in each recompute block (i.e., "
             "layer_number % mhc_recompute_layer_num == 0 or the final layer in the transformer "
             "block) will: - NOT checkpoint its final MLP BDA - Register the unified recompute "
             "hook on its MLP BDA output - A new CheckpointWithoutOutputManager is created for "
             "subsequent layers If None, all layers in the transformer block share a single "
             "recompute block. Must be a positive integer when set."},
    {.name = "--mhc-sinkhorn-iterations", G_TC, INT64, .def = "20",
     TODO("mHC residual connections"),
     .help = "Number of Sinkhorn-Knopp iterations for doubly stochastic projection."},
    {.name = "--min-offloaded-tensor-size", G_TC, INT64, .def = "1048576",
     TODO("offloading to host memory"),
     .help = "The minimum size of the tensor to be offloaded."},
    {.name = "--mlp-chunks-for-training", G_TC, INT64, .def = "1",
     TODO("the number of chunks along the sequence dimension to use for MLP ..."),
     .help = "The number of chunks along the sequence dimension to use for MLP computation during "
             "training."},
    {.name = "--muon-coefficient-type", G_REGULARIZATION, STRING, FIELD(muon_coefficient_type),
     .def = "quintic", IMPLEMENTED_NOTE("emerging_optimizers' sets: simple, quintic, polar_express, "
                                        "cans, aol, deepseekv4, cubic5"),
     .help = "Newton-Schulz coefficient type for the Muon optimizer. Valid types are discovered "
             "from the installed emerging_optimizers package (e.g. simple, quintic, "
             "polar_express, aol). Validated at optimizer creation time."},
    {.name = "--muon-extra-scale-factor", G_REGULARIZATION, FLOAT, FIELD(muon_extra_scale_factor),
     .def = "1.0", IMPLEMENTED, .help = "Additional scale factor for the muon update"},
    {.name = "--muon-fp32-matmul-prec", G_REGULARIZATION, CHOICE("low", "medium", "high"),
     FIELD(muon_fp32_matmul_prec), .def = "medium",
     IMPLEMENTED_NOTE("medium: bf16 Newton-Schulz GEMMs (fp32 accumulation), as emerging_optimizers; "
                      "high and low: fp32 GEMMs (a GPU's TF32 under torch's high is not emulated)"),
     .help = "FP32 matmul precision for Newton-Schulz iteration"},
    {.name = "--muon-momentum", G_REGULARIZATION, FLOAT, FIELD(muon_momentum), .def = "0.9",
     IMPLEMENTED, .help = "Momentum factor for Muon optimizer"},
    {.name = "--muon-nesterov", G_REGULARIZATION, TRUE_IF_GIVEN, FIELD(muon_nesterov), IMPLEMENTED,
     .help = "Whether to use Nesterov-style momentum in the internal SGD"},
    {.name = "--muon-no-split-qkv", G_REGULARIZATION, FALSE_IF_GIVEN, FIELD(muon_split_qkv),
     IMPLEMENTED, .help = "Whether to split QKV parameters for Muon optimizer"},
    {.name = "--muon-num-ns-steps", G_REGULARIZATION, INT64, FIELD(muon_num_ns_steps), .def = "5",
     IMPLEMENTED, .help = "Number of Newton-Schulz steps for Muon optimizer"},
    {.name = "--muon-scalar-optimizer", G_REGULARIZATION, CHOICE("adam", "lion"),
     FIELD(muon_scalar_optimizer), .def = "adam", ONLY("Lion is not implemented yet", "adam"),
     .help = "Optimizer for scalar parameters (embeddings, biases, norms) when using muon. "
             "Defaults to adam."},
    {.name = "--muon-scale-mode", G_REGULARIZATION,
     CHOICE("spectral", "unit_rms_norm", "shape_scaling"), FIELD(muon_scale_mode),
     .def = "spectral", IMPLEMENTED,
     .help = "Scale mode for Muon optimizer. With MuP, set --muon-scale-mode unit_rms_norm to use "
             "unit_rms_norm scaling, or set --muon-scale-mode spectral to keep spectral scaling."},
    {.name = "--muon-tp-mode", G_REGULARIZATION, CHOICE("blockwise", "duplicated", "distributed"),
     FIELD(muon_tp_mode), .def = "duplicated",
     IMPLEMENTED_NOTE("muon runs at tensor-parallel size 1, where the modes are the same"),
     .help = "How to perform NS calculation for tensor model parallel weights. blockwise "
             "orthogonalizes each shard on its own, so the update rule depends on the parallelism "
             "config; duplicated and distributed both orthogonalize the whole matrix and give "
             "TP-invariant results."},
    {.name = "--muon-use-syrk", G_REGULARIZATION, TRUE_IF_GIVEN, FIELD(muon_use_syrk),
     NOOP("a Triton kernel choice for the Gram matrix; the math is the same"),
     .help = "Use the Triton SYRK kernel for the Gram matrix in Newton-Schulz iteration."},
    {.name = "--mup-attn-scale-power", G_TC, FLOAT, FIELD(mup_attn_scale_power), .def = "1.0",
     IMPLEMENTED,
     .help = "Power for attention scaling: softmax_scale = 1 / (kv_channels ** "
             "mup_attn_scale_power). 0.5 = standard attention (1/sqrt(d_head)), 1.0 = MuP "
             "attention (1/d_head). Default: 1.0 (MuP scaling when use_mup is True). Set to 0.5 "
             "for standard scaling."},
    {.name = "--mup-base-head-dim", G_TC, FLOAT, FIELD(mup_base_head_dim), .none = "-1",
     IMPLEMENTED,
     .help = "Base head dimension for MuP attention scaling. When set, softmax_scale = "
             "sqrt(mup_base_head_dim) / (kv_channels ** mup_attn_scale_power). Set to base "
             "model's d_head (e.g., 64) to match standard 1/sqrt(d_head) scaling at the base "
             "width, ensuring non-MuP compatibility for that specific value."},
    {.name = "--mup-base-hidden-size", G_TC, INT64, FIELD(mup_base_hidden_size),
     .none = "-1", IMPLEMENTED,
     .help = "Base hidden size for MuP width scaling. This is the reference width from which "
             "scaling factors are computed. Defaults to hidden_size if not specified (base model "
             "case where width_mult=1.0). Set this to your base/proxy model's hidden size when "
             "scaling up."},
    {.name = "--mup-embedding-mult", G_TC, FLOAT, FIELD(mup_embedding_mult), .def = "1.0",
     IMPLEMENTED,
     .help = "Multiplier for embedding layer output. Applied after the embedding lookup. Default: "
             "1.0 (no scaling)."},
    {.name = "--mup-output-mult", G_TC, FLOAT, FIELD(mup_output_mult), .def = "1.0",
     IMPLEMENTED,
     .help = "Multiplier for output logits before softmax. When MuP is enabled and this is left "
             "at 1.0, it is auto-set to 1/mup_width_mult to keep output variance stable across "
             "widths. Override to customize output scaling. Default: 1.0."},
    {.name = "--mup-width-mult", G_TC, FLOAT, FIELD(mup_width_mult), .def = "1.0",
     IMPLEMENTED_NOTE("derived from the hidden sizes with --use-mup, as Megatron; stored as given"),
     .help = "Width multiplier for MuP scaling, computed as hidden_size / mup_base_hidden_size. "
             "This value is automatically computed in __post_init__ when use_mup is enabled."},
    {.name = "--no-ckpt-load-validate-sharding-integrity", G_CHECKPOINTING, FALSE_IF_GIVEN,
     TODO("whether to validate sharding access integrity when loading *and ..."),
     .help = "Whether to validate sharding access integrity when loading *and saving* a "
             "distributed checkpoint. When True (default), each tensor shard is checked to be "
             "accessed exactly once as main replica by some rank. Disabling skips this "
             "validation; on save this also skips the world-wide determine_global_metadata "
             "all_gather_object (otherwise run on the first save of a job)."},
    {.name = "--no-clone-scatter-output-in-embedding", G_TRAINING, FALSE_IF_GIVEN,
     TODO("when set to True, clone the output of ..."),
     .help = "When set to True, clone the output of scatter_to_sequence_parallel_region in "
             "embedding layer to facilitate garbage collection of input."},
    {.name = "--no-data-sharding", G_VISION, FALSE_IF_GIVEN, TODO("vision models"),
     .help = "Disable data sharding."},
    {.name = "--no-flight-recorder-dump-on-timeout", G_DI, FALSE_IF_GIVEN,
     NOOP("PyTorch's NCCL flight recorder (TORCH_NCCL_*); megatron-c has none"),
     .help = "Dump flight recorder traces on NCCL timeout (TORCH_NCCL_DUMP_ON_TIMEOUT)."},
    {.name = "--no-flight-recorder-extra-dump-on-exec", G_DI, FALSE_IF_GIVEN,
     NOOP("PyTorch's NCCL flight recorder (TORCH_NCCL_*); megatron-c has none"),
     .help = "Enable extra flight recorder dump on execution (TORCH_NCCL_EXTRA_DUMP_ON_EXEC)."},
    {.name = "--no-flight-recorder-include-only-active", G_DI, FALSE_IF_GIVEN,
     NOOP("PyTorch's NCCL flight recorder (TORCH_NCCL_*); megatron-c has none"),
     .help = "Include only active operations in flight recorder dumps (TORCH_INCLUDE_ONLY_ACTIVE)."},
    {.name = "--no-gradient-reduce-div-fusion", G_DISTRIBUTED, FALSE_IF_GIVEN,
     TODO("if not set, fuse the division in gradient reduce"),
     .help = "If not set, fuse the division in gradient reduce."},
    {.name = "--no-pad-vocab-size", G_TOKENIZER, FALSE_IF_GIVEN,
     TODO("whether to pad vocab size of the model automatically if ..."),
     .help = "Whether to pad vocab size of the model automatically if padded_vocab_size is not "
             "provided."},
    {.name = "--no-pin-cpu-grads", G_TRAINING, FALSE_IF_GIVEN,
     TODO("disable pinning of CPU memory for gradients"),
     .help = "Disable pinning of CPU memory for gradients."},
    {.name = "--no-pin-cpu-params", G_TRAINING, FALSE_IF_GIVEN,
     TODO("disable pinning of CPU memory for parameters"),
     .help = "Disable pinning of CPU memory for parameters."},
    {.name = "--no-rope-freq", G_NS, STRING,
     TODO("controls which layers to skip performing Rotary Position Embedding"),
     .help = "Controls which layers to skip performing Rotary Position Embedding. Accepts either: "
             "- An integer N: Represents a 1:N ratio, meaning RoPE is skipped every N-1 layers. - "
             "A string containing a Python list expression that defines a custom pattern, e.g.: "
             "\"([0]*3+[1]*1)*3\" evaluates to [0,0,0,1,0,0,0,1,0,0,0,1] where 1 indicates "
             "no-rope layer. This patten is equivalent to --no-rope-freq=4.By default this is "
             "disabled and set to None, indicating RoPE will be performedon every layer."},
    {.name = "--no-save-tokenizer-assets", G_CHECKPOINTING, FALSE_IF_GIVEN,
     TODO("save tokenizer files to checkpoint directory"),
     .help = "Save tokenizer files to checkpoint directory. When enabled, saves all tokenizer "
             "artifacts (vocab files, special tokens, tokenizer config) to make checkpoints "
             "self-contained and portable. Set to False for performance-sensitive scenarios where "
             "tokenizer files are not needed."},
    {.name = "--no-strict-fsdp-dtensor-load", G_CHECKPOINTING, FALSE_IF_GIVEN, TODO("FSDP"),
     .help = "Whether to enforce strict loading for FSDP DTensor checkpoints. When False, allows "
             "partial loading."},
    {.name = "--no-tokenizer-sentencepiece-ignore-extra-whitespaces", G_TOKENIZER, FALSE_IF_GIVEN,
     TODO("Megatron main's SentencePiece wrapper options (not in core_v0.15.0, whose "
          "SentencePiece tokenizers megatron-c implements)"),
     .help = "Whether to ignore extra whitespaces in the input text while encoding."},
    {.name = "--no-tp-comm-bulk-dgrad", G_TC, FALSE_IF_GIVEN,
     FIELD(tp_comm_bulk_dgrad),
     IMPLEMENTED_NOTE("with --tp-comm-overlap; ignored otherwise, as in Megatron"),
     .help = "Controls Reduce-Scatter overlap with Bprop weight gradient GEMM. Don't care if "
             "tp_comm_overlap is False."},
    {.name = "--no-tp-comm-bulk-wgrad", G_TC, FALSE_IF_GIVEN,
     FIELD(tp_comm_bulk_wgrad),
     IMPLEMENTED_NOTE("with --tp-comm-overlap; ignored otherwise, as in Megatron"),
     .help = "Controls All-Gather overlap with Bprop activation gradient GEMM. Don't care if "
             "tp_comm_overlap is False."},
    {.name = "--no-tp-comm-overlap-ag", G_TC, FALSE_IF_GIVEN,
     FIELD(tp_comm_overlap_ag),
     IMPLEMENTED_NOTE("with --tp-comm-overlap; ignored otherwise, as in Megatron"),
     .help = "Controls All-Gather overlap with GEMM by pipelining the GEMM and All-Gather. Don't "
             "care if tp_comm_overlap is False."},
    {.name = "--no-tp-comm-overlap-rs", G_TC, FALSE_IF_GIVEN,
     FIELD(tp_comm_overlap_rs),
     IMPLEMENTED_NOTE("with --tp-comm-overlap; ignored otherwise, as in Megatron"),
     .help = "Controls Reduce-Scatter overlap with GEMM by pipelining the GEMM and "
             "Reduce-Scatter. Don't care if tp_comm_overlap is False."},
    {.name = "--no-tp-comm-split-ag", G_TC, FALSE_IF_GIVEN,
     NOOP("deprecated from Transformer Engine v1.6.0, which ignores it (Megatron's help)"),
     .help = "Deprecated from TransformerEngine v1.6.0. Controls All-Gather overlap with Fprop "
             "GEMM by pipelining the GEMM and All-Gather splits. Don't care if tp_comm_overlap is "
             "False."},
    {.name = "--no-tp-comm-split-rs", G_TC, FALSE_IF_GIVEN,
     NOOP("deprecated from Transformer Engine v1.6.0, which ignores it (Megatron's help)"),
     .help = "Deprecated from TransformerEngine v1.6.0. Controls Reduce-Scatter overlap with "
             "Fprop GEMM by pipelining the GEMM and Reduce-Scatter splits. Don't care if "
             "tp_comm_overlap is False."},
    {.name = "--no-use-layer-wise-param-layout", G_DI, FALSE_IF_GIVEN,
     TODO("opt out of the precomputed LayerWise param layout"),
     .help = "Opt out of the precomputed LayerWise param layout. When set, falls back to the "
             "legacy LayerWise ping-pong path: all params (including non-Muon embeddings, biases, "
             "layernorm) live in a single LayerWise buffer and the optimizer uses the "
             "allgather_params() codepath. The default (precomputed layout) routes non-Muon "
             "params through a separate DistributedOptimizer with byte-level sharding, which is "
             "faster and uses less padding but produces different bf16 reduction ordering and so "
             "will not match legacy-path loss curves bit-for-bit."},
    {.name = "--no-weight-decay-cond-type", G_REGULARIZATION, CHOICE("apply_wd_to_qk_layernorm"),
     TODO("type of no weight decay condition"),
     .help = "Type of no weight decay condition. Choices: None (default): apply weight decay to "
             "1D weights and biases.\"apply_wd_to_qk_layernorm\": additionally apply weight decay "
             "to qk layernorm as a special case.DEPRECATED. Please use --apply-wd-to-qk-layernorm "
             "instead. "},
    {.name = "--null-tokenizer-eod-id", G_TOKENIZER, INT64,
     TODO("other tokenizers and their options"),
     .help = "EOD token id for NullTokenizer. Defaults to `vocab_size - 1`."},
    {.name = "--null-tokenizer-pad-id", G_TOKENIZER, INT64, .def = "-1",
     TODO("other tokenizers and their options"),
     .help = "Pad token id for NullTokenizer. Defaults to -1 (no pad token). Set to a value "
             "outside the dataset to avoid masking real tokens."},
    {.name = "--num-channels", G_VISION, INT64, .def = "3", TODO("vision models"),
     .help = "Number of channels in input image data"},
    {.name = "--num-classes", G_VISION, INT64, .def = "1000", TODO("vision models"),
     .help = "num of classes in vision classificaiton task"},
    {.name = "--nvtx-ranges", G_PROFILING, TRUE_IF_GIVEN, TODO("profiling"),
     .help = "Enable NVTX range annotations for profiling. When enabled, inserts NVTX markers to "
             "categorize execution in profiler output."},
    {.name = "--object-storage-cache-path", G_DAD, STRING,
     TODO("path to cache index files when using s3 or msc dataloader"),
     .help = "Path to cache index files when using s3 or msc dataloader"},
    {.name = "--offload-modules", G_TC, LIST(-1), .def = "", TODO("offloading to host memory"),
     .help = "The submodules to offload its input. choices: \"attn_norm\", \"qkv_linear\", "
             "\"core_attn\", \"attn_proj\", \"mlp_norm\", \"expert_fc1\", \"moe_act\", "
             "\"fused_group_mlp\", \"gdp_qkv\". \"attn_norm\": offload the input of the "
             "normalization in the attention part. \"qkv_linear\": offload the input of the qkv "
             "linear part. \"core_attn\": offload the input of the core attention part. "
             "\"attn_proj\": offload the input of the attn linear projection part. \"mlp_norm\": "
             "offload the input of the normalization in the mlp part. \"expert_fc1\": offload the "
             "input of the expert fc1 part. \"moe_act\": offload the input of the moe act part. "
             "\"fused_group_mlp\": offload the input of the whole fused grouped MLP. \"gdp_qkv\": "
             "offload the input of the causal conv and QKV preparation in the GatedDeltaProduct "
             "mixer."},
    {.name = "--onnx-safe", G_NS, STRING,
     TODO("use workarounds for known problems with Torch ONNX exporter"),
     .help = "Use workarounds for known problems with Torch ONNX exporter"},
    {.name = "--optimizer-cpu-offload", G_TRAINING, TRUE_IF_GIVEN,
     TODO("offloading to host memory"),
     .help = "Offload optimizer state to CPU"},
    {.name = "--optimizer-cuda-graph", G_TRAINING, TRUE_IF_GIVEN, TODO("CUDA graphs"),
     .help = "Enable CUDA graph for optimizer step"},
    {.name = "--optimizer-offload-fraction", G_TRAINING, FLOAT, .def = "1.0",
     TODO("offloading to host memory"),
     .help = "Ratio of optimizer state to offload to CPU"},
    {.name = "--outer-dp-sharding-strategy", G_DI, CHOICE("no_shard", "optim"), .def = "no_shard",
     TODO("sharding strategy for outer data parallel group in Hybrid Sharded ..."),
     .help = "Sharding strategy for outer data parallel group in Hybrid Sharded Data Parallel "
             "(HSDP) mode. Valid values are \"no_shard\" (DP Replication) and \"optim\" "
             "(Optimizer State Hybrid Sharding). The \"optim\" option is only supported when "
             "--data-parallel-sharding-strategy is \"optim_grads_params\". This option is only "
             "effective when Hybrid FSDP is enabled (i.e., when dp_outer_dim is not None). "
             "Default: \"no_shard\"."},
    {.name = "--output-logit-dtype", G_MP, CHOICE("bf16", "fp32"),
     TODO("output dtype for the language-model output-layer GEMM. When the ..."),
     .help = "Output dtype for the language-model output-layer GEMM. When the requested dtype "
             "differs from the input dtype, Transformer Engine general_gemm is used. By default, "
             "logits use the output-layer input dtype."},
    {.name = "--overlap-cpu-optimizer-d2h-h2d", G_TRAINING, TRUE_IF_GIVEN,
     TODO("overlap CPU optimizer step, gradients D2H and updated parameters H2D"),
     .help = "Overlap CPU optimizer step, gradients D2H and updated parameters H2D."},
    {.name = "--override-ckpt-iteration", G_CHECKPOINTING, INT64,
     TODO("override the iteration stored in the loaded checkpoint"),
     .help = "Override the iteration stored in the loaded checkpoint. Also resets "
             "consumed_train_samples accordingly so the data loader replays samples from that "
             "iteration onward."},
    {.name = "--patch-dim", G_VISION, INT64, .def = "16", TODO("vision models"),
     .help = "patch dimension"},
    {.name = "--per-dataset-sequences-path", G_DAD, STRING,
     TODO("path to a json file with the sequences per dataset"),
     .help = "Path to a json file with the sequences per dataset. Check the "
             "tools/build_sequences_per_dataset.py script to build this file."},
    {.name = "--phase-transition-iterations", G_DAD, STRING,
     TODO("comma-separated list of iterations where phase transitions occur"),
     .help = "Comma-separated list of iterations where phase transitions occur. Requires fixed "
             "global batch size across phases."},
    {.name = "--pipeline-model-parallel-comm-backend", G_TRAINING, CHOICE("nccl", "ucc"),
     TODO("configuring backend option of pipeline parallel communication (e.g., ..."),
     .help = "Configuring backend option of pipeline parallel communication (e.g., nccl, ucc) If "
             "None, the default backend will be used."},
    {.name = "--pytorch-profiler-collect-callstack", G_PROFILING, TRUE_IF_GIVEN, TODO("profiling"),
     .help = "Collect callstack in pytorch profiler."},
    {.name = "--pytorch-profiler-collect-chakra", G_PROFILING, TRUE_IF_GIVEN, TODO("profiling"),
     .help = "Collect chakra trace in pytorch profiler."},
    {.name = "--pytorch-profiler-collect-shapes", G_PROFILING, TRUE_IF_GIVEN, TODO("profiling"),
     .help = "Collect tensor shape in pytorch profiler."},
    {.name = "--qk-clip", G_TC, TRUE_IF_GIVEN, TODO("QK-clip"),
     .help = "Whether to clip the query and key weights. Needed for Muon MLA Model training."},
    {.name = "--qk-clip-alpha", G_TC, FLOAT, .def = "0.5", TODO("QK-clip"),
     .help = "The balancing alpha for qk-clip. Q = Q * (eta ** alpha)"},
    {.name = "--qk-clip-threshold", G_TC, FLOAT, .def = "100", TODO("QK-clip"),
     .help = "The balancing threshold for qk-clip. eta = min(threshold / max_attention_logits, "
             "1.0)"},
    {.name = "--qk-l2-norm", G_VISION, TRUE_IF_GIVEN,
     TODO("whether to apply llama 4-style qk L2 norm"),
     .help = "Whether to apply llama 4-style qk L2 norm."},
    {.name = "--query-in-block-prob", G_BIENCODER, FLOAT, .def = "0.1",
     TODO("biencoder (ICT) models"),
     .help = "Probability of keeping query in block for ICT dataset"},
    {.name = "--record-memory-history", G_TRAINING, TRUE_IF_GIVEN, TODO("profiling"),
     .help = "Record memory history in last rank."},
    {.name = "--record-shapes", G_PROFILING, TRUE_IF_GIVEN, TODO("profiling"),
     .help = "Record shapes of tensors in `torch.autograd.profiler.emit_nvtx` for the Nsys "
             "profiler."},
    {.name = "--relative-attention-max-distance", G_NS, INT64, .def = "128",
     TODO("maximum distance for relative position embeddings calculation"),
     .help = "Maximum distance for relative position embeddings calculation."},
    {.name = "--relative-attention-num-buckets", G_NS, INT64, .def = "32",
     TODO("number of buckets for relative position embeddings"),
     .help = "Number of buckets for relative position embeddings."},
    {.name = "--replication", G_DISTRIBUTED, TRUE_IF_GIVEN,
     TODO("if set, replication of local checkpoints is enabled"),
     .help = "If set, replication of local checkpoints is enabled. Needs to be enabled on all "
             "ranks."},
    {.name = "--replication-factor", G_DISTRIBUTED, INT64, .def = "2",
     TODO("number of machines storing the replica of a given rank's data"),
     .help = "Number of machines storing the replica of a given rank's data."},
    {.name = "--replication-jump", G_DISTRIBUTED, INT64,
     TODO("specifies `J`, the spacing between ranks storing replicas of a given ..."),
     .help = "Specifies `J`, the spacing between ranks storing replicas of a given rank's data. "
             "Replicas for rank `n` may be on ranks `n+J`, `n+2J`, ..., or `n-J`, `n-2J`, etc. "
             "This flag has an effect only if --replication is used. and must be consistent "
             "across all ranks."},
    {.name = "--result-rejected-tracker-filename", G_TRAINING, STRING,
     TODO("optional name of file tracking `result_rejected` events"),
     .help = "Optional name of file tracking `result_rejected` events."},
    {.name = "--retriever-report-topk-accuracies", G_BIENCODER, INT_LIST(-1), .def = "",
     TODO("biencoder (ICT) models"),
     .help = "Which top-k accuracies to report (e.g. '1 5 20')"},
    {.name = "--retriever-score-scaling", G_BIENCODER, TRUE_IF_GIVEN,
     TODO("biencoder (ICT) models"),
     .help = "Whether to scale retriever scores by inverse square root of hidden size"},
    {.name = "--retriever-seq-length", G_DAD, INT64, .def = "256",
     TODO("maximum sequence length for the biencoder model for retriever"),
     .help = "Maximum sequence length for the biencoder model for retriever"},
    {.name = "--retro-add-retriever", G_RETRO, TRUE_IF_GIVEN, TODO("Retro"),
     .help = "Add a retriever to the transformer, for use in pretraining a Retro model."},
    {.name = "--retro-attention-gate", G_RETRO, FLOAT, .def = "1", TODO("Retro"),
     .help = "Gated cross attention."},
    {.name = "--retro-cyclic-train-iters", G_RETRO, INT64, TODO("Retro"),
     .help = "Set number of training iterations for cyclic Retro training."},
    {.name = "--retro-encoder-attention-dropout", G_RETRO, FLOAT, .def = "0.1", TODO("Retro"),
     .help = "Attention dropout for retrieval encoder."},
    {.name = "--retro-encoder-hidden-dropout", G_RETRO, FLOAT, .def = "0.1", TODO("Retro"),
     .help = "Hidden dropout for retrieval encoder."},
    {.name = "--retro-encoder-layers", G_RETRO, INT64, .def = "2", TODO("Retro"),
     .help = "Number of layers to use for the retrieval encoder."},
    {.name = "--retro-no-verify-neighbor-count", G_RETRO, FALSE_IF_GIVEN, TODO("Retro"),
     .help = "Skip verifying that len(GPT dataset) == len(saved neighbors)."},
    {.name = "--retro-num-neighbors", G_RETRO, INT64, .def = "2", TODO("Retro"),
     .help = "Number of neighbors to retrieve during pretraining."},
    {.name = "--retro-num-retrieved-chunks", G_RETRO, INT64, .def = "2", TODO("Retro"),
     .help = "Number of chunks to retrieve from the retrieval database."},
    {.name = "--retro-project-dir", G_RETRO, STRING, TODO("Retro"),
     .help = "Retro project directory, which contains the preprocessed data for pretraining. This "
             "directory is built during preprocessing (see tools/retro/README.md), and contains "
             "subdirectories for the chunk database and pretraining neighbors."},
    {.name = "--rope-type", G_TRAINING, CHOICE("rope", "yarn"), TODO("type of rope to use"),
     .help = "Type of rope to use. Note that MLA takes yarn by default, and common attention "
             "takes rope by default."},
    {.name = "--sample-rate", G_DAD, FLOAT, .def = "1.0", TODO("sample rate for training data"),
     .help = "sample rate for training data. Supposed to be 0  < sample_rate < 1"},
    {.name = "--save-activations-interval", G_CHECKPOINTING, INT64,
     TODO("dumping tensors for debugging"),
     .help = "Number of iterations between act.name->act.data mapping saves."},
    {.name = "--save-dgrads-interval", G_CHECKPOINTING, INT64,
     TODO("dumping tensors for debugging"),
     .help = "Number of iterations between dgrad saves."},
    {.name = "--save-params-interval", G_CHECKPOINTING, INT64,
     TODO("dumping tensors for debugging"),
     .help = "Number of iterations between param.name->param.data mapping saves."},
    {.name = "--save-wgrads-interval", G_CHECKPOINTING, INT64,
     TODO("dumping tensors for debugging"),
     .help = "Number of iterations between wgrad (main_grad) saves."},
    {.name = "--sharp-enabled-group", G_DISTRIBUTED, CHOICE("dp", "dp_replica"),
     TODO("IB SHARP can be enabled from only one communication group"),
     .help = "IB SHARP can be enabled from only one communication group. By default, it is "
             "enabled from dp group if not specified and use_sharp=True. Available options: [dp, "
             "dp_replica]"},
    {.name = "--short-seq-prob", G_DAD, FLOAT, .def = "0.1",
     TODO("probability of producing a short sequence"),
     .help = "Probability of producing a short sequence."},
    {.name = "--suggested-communication-unit-size", G_DISTRIBUTED, INT64,
     TODO("specifies the number of elements to communicate at once during FSDP ..."),
     .help = "Specifies the number of elements to communicate at once during FSDP (Fully Sharded "
             "Data Parallel) operations. This flag also affects FSDP all-gather prefetch "
             "behavior. Setting a larger value increases the communication buffer size, while a "
             "smaller value disables prefetching and may degrade performance. Adjust this value "
             "based on your system's memory and performance requirements."},
    {.name = "--swin-backbone-type", G_VISION, CHOICE("tiny", "base", "h3"), .def = "tiny",
     TODO("vision models"),
     .help = "pretraining objectives"},
    {.name = "--symmetric-ar-type", G_INFERENCE,
     CHOICE("two_shot", "one_shot", "multimem_all_reduce", "None"), .def = "None",
     TODO("NCCL tuning"),
     .help = "What type of symmetric all reduce to use. The default is None which is no use of "
             "symmetric memory."},
    {.name = "--te-precision-config-file", G_TE, STRING,
     TODO("configuration file to select per-module precision overrides"),
     .help = "Configuration file to select per-module precision overrides. See "
             "TransformerEngineMixedPrecision.md"},
    {.name = "--te-rng-tracker", G_TE, TRUE_IF_GIVEN,
     TODO("use the Transformer Engine version of the random number generator"),
     .help = "Use the Transformer Engine version of the random number generator. Required for "
             "CUDA graphs support."},
    {.name = "--tensor-parallel-num-weight-shards", G_TC, INT64,
     TODO("total number of shards each weight is split into across the ..."),
     .help = "Total number of shards each weight is split into across the tensor-parallel + GTP "
             "axes (i.e. ``tensor_model_parallel_size * gtp_weight_remat_size``). This is the "
             "user-facing knob: it must be ``>= tensor_model_parallel_size`` and divisible by it. "
             "When None it defaults to ``tensor_model_parallel_size`` (no GTP sharding). It is "
             "the source of truth and implies ``gtp_weight_remat_size = "
             "tensor_parallel_num_weight_shards // tensor_model_parallel_size`` (resolved in "
             "``__post_init__``)."},
    {.name = "--test-mode", G_VALIDATION, TRUE_IF_GIVEN, PENDING_FIELD(test_mode),
     IMPLEMENTED_NOTE("Megatron's real-time test: with --qk-layernorm, the q/k layernorm "
                      "parameters must be equal across dp and tp ranks at every step, or the run "
                      "stops"),
     .help = "Run all real-time test alongside the experiment."},
    {.name = "--tiktoken-num-special-tokens", G_TOKENIZER, INT64, .def = "1000",
     FIELD(tiktoken_num_special_tokens), IMPLEMENTED,
     .help = "Number of special tokens in tiktoken tokenizer."},
    {.name = "--tiktoken-pattern", G_TOKENIZER, CHOICE("v1", "v2"), FIELD(tiktoken_pattern),
     IMPLEMENTED, .help = "Which tiktoken pattern to use. Options: [v1, v2]"},
    {.name = "--tiktoken-special-tokens", G_TOKENIZER, LIST(-1),
     LIST_FIELD(tiktoken_special_tokens, n_tiktoken_special_tokens), IMPLEMENTED,
     .help = "List of tiktoken special tokens, needs to have [\"<unk>\", \"<s>\", \"</s>\", "
             "\"<mask>\", \"<pad>\", \"<cls>\", \"<sep>\"]"},
    {.name = "--titles-data-path", G_BIENCODER, STRING, TODO("biencoder (ICT) models"),
     .help = "Path to titles dataset used for ICT"},
    {.name = "--tokenizer-hf-no-include-special-tokens", G_TOKENIZER, TRUE_IF_GIVEN,
     TODO("other tokenizers and their options"),
     .help = "Converting text to ids will not include special for HuggingFace tokenizer."},
    {.name = "--tokenizer-hf-no-use-fast", G_TOKENIZER, TRUE_IF_GIVEN,
     TODO("other tokenizers and their options"),
     .help = "Whether to use fast HuggingFace tokenizer."},
    {.name = "--tokenizer-metadata", G_TOKENIZER, STRING,
     TODO("other tokenizers and their options"),
     .help = "Path to the tokenizer metadata file in json format."},
    {.name = "--tokenizer-sentencepiece-legacy", G_TOKENIZER, TRUE_IF_GIVEN,
     TODO("Megatron main's SentencePiece wrapper options (not in core_v0.15.0, whose "
          "SentencePiece tokenizers megatron-c implements)"),
     .help = "SentencePiece tokenizer wrapper legacy behavior. Allows special tokens usage."},
    {.name = "--tokenizer-special-tokens", G_TOKENIZER, LIST(-1),
     TODO("other tokenizers and their options"),
     .help = "List of special tokens. For TikTokenizer needs to have [\"<unk>\", \"<s>\", "
             "\"</s>\", \"<mask>\", \"<pad>\", \"<cls>\", \"<sep>\"]"},
    {.name = "--torch-fsdp2-no-reshard-after-forward", G_DISTRIBUTED, FALSE_IF_GIVEN, TODO("FSDP"),
     .help = "Whether to reshard weights after forward pass when using PyTorch FSDP2. Set to "
             "enable FSDP ZeRO-2."},
    {.name = "--tp-comm-bootstrap-backend", G_TRAINING, CHOICE("nccl", "mpi", "gloo"),
     .def = "nccl",
     NOOP("Transformer Engine's userbuffers bootstrap; megatron-c's --tp-comm-overlap runs over the "
          "tp group's communicator"),
     .help = "Set the bootstrapping backend of Tensor parallel communications."},
    {.name = "--tp-comm-overlap-cfg", G_TRAINING, STRING, FIELD(tp_comm_overlap_cfg),
     IMPLEMENTED_NOTE("with --tp-comm-overlap (ignored otherwise, as in Megatron): method and "
                      "num_splits per GEMM where they apply; userbuffers' GPU settings refused "
                      "by name"),
     .help = "Config file when tp_comm_overlap is enabled."},
    {.name = "--tp-comm-overlap-rs-dgrad", G_TRAINING, TRUE_IF_GIVEN,
     TODO("the reduce-scatter pipelined with the input-gradient GEMM; --tp-comm-overlap runs "
          "Megatron's default bulk overlaps there"),
     .help = "If true, allows Reduce-Scatter overlap with DGRAD GEMM by pipelining the GEMM and "
             "Reduce-Scatter splits. Don't care if tp_comm_overlap is False."},
    {.name = "--trust-remote-code", G_TOKENIZER, TRUE_IF_GIVEN,
     TODO("other tokenizers and their options"),
     .help = "Whether or not to allow PreTrainedTokenizer to execute remote code."},
    {.name = "--use-fused-weighted-squared-relu", G_TRAINING, TRUE_IF_GIVEN,
     TODO("if True, uses fused weighted squared relu kernel when using MoE"),
     .help = "If True, uses fused weighted squared relu kernel when using MoE."},
    {.name = "--use-gigatoken", G_TOKENIZER, TRUE_IF_GIVEN,
     TODO("other tokenizers and their options"),
     .help = "Whether to use faster implementation of tokenizers (gigatoken)"},
    {.name = "--use-grouped-gemm-for-dense-mlp", G_TC, TRUE_IF_GIVEN,
     TODO("use GroupedLinear(num_groups=1) for dense MLP to trigger the ..."),
     .help = "Use GroupedLinear(num_groups=1) for dense MLP to trigger the "
             "ForwardGroupedMLP_CuTeGEMMSwiGLU_MXFP8 fusion on SM100+ with MXFP8 recipe. Requires "
             "``use_te_op_fuser=True`` and SwiGLU activation."},
    {.name = "--use-mup", G_TC, TRUE_IF_GIVEN, FIELD(use_mup), IMPLEMENTED,
     .help = "Enable Maximal Update Parameterization (MuP) for hyperparameter transfer across "
             "model widths. When enabled, learning rates and initialization are scaled according "
             "to the width multiplier to ensure consistent training dynamics."},
    {.name = "--use-nccl-ub", G_DISTRIBUTED, TRUE_IF_GIVEN, TODO("NCCL tuning"),
     .help = "Use the userbuffer registration for DP/FSDP communication buffers.This option will "
             "reduce GPU SM usage for the DP/FSDP communication,which is improving the "
             "performance of the overlapped computation."},
    {.name = "--use-one-sent-docs", G_BIENCODER, TRUE_IF_GIVEN, TODO("biencoder (ICT) models"),
     .help = "Whether to use one sentence documents in ICT"},
    {.name = "--use-sharp", G_DISTRIBUTED, TRUE_IF_GIVEN,
     TODO("set the use of SHARP for the collective communications of ..."),
     .help = "Set the use of SHARP for the collective communications of data-parallel process "
             "groups. When `True`, run barrier within each data-parallel process group, which "
             "specifies the SHARP application target groups."},
    {.name = "--use-te-activation-func", G_TRAINING, TRUE_IF_GIVEN,
     TODO("whether to use ffn activation functions implemented by TransformerEngine"),
     .help = "Whether to use ffn activation functions implemented by TransformerEngine"},
    {.name = "--use-torch-optimizer-for-cpu-offload", G_TRAINING, TRUE_IF_GIVEN,
     TODO("offloading to host memory"),
     .help = "Use torch.optim.Optimizer instead of Megatron's optimizer in optimizer cpu offload "
             "mode."},
    {.name = "--use-transformer-engine-op-fuser", G_TC, TRUE_IF_GIVEN,
     TODO("if True, submodules may use Transformer Engine's operation fuser API ..."),
     .help = "If True, submodules may use Transformer Engine's operation fuser API to enable "
             "advanced fusions."},
    {.name = "--validation-set-names", G_VALIDATION, LIST(-1),
     TODO("optional list of names for multiple validation sets"),
     .help = "Optional list of names for multiple validation sets. When provided with "
             "--multiple-validation-sets, these names are used instead of numeric indices (e.g. "
             "'validation-wiki' instead of 'validation-0'). The number of names must match the "
             "number of validation datasets."},
    {.name = "--verify-integrity", G_CHECKPOINTING, TRUE_IF_GIVEN,
     TODO("whether to hash checkpointing files during save and validate their ..."),
     .help = "Whether to hash checkpointing files during save and validate their integrity during "
             "load."},
    {.name = "--vision-backbone-type", G_VISION, CHOICE("vit", "mit", "swin"), .def = "vit",
     TODO("vision models"),
     .help = "backbone types types"},
    {.name = "--vision-pretraining", G_VISION, TRUE_IF_GIVEN, TODO("vision models"),
     .help = "flag to indicate vision pretraining"},
    {.name = "--vision-pretraining-type", G_VISION, CHOICE("classify", "inpaint", "dino"),
     .def = "classify", TODO("vision models"),
     .help = "pretraining objectives"},
    {.name = "--window-attn-skip-freq", G_NS, STRING,
     TODO("frequency of layers to skip window attention"),
     .help = "Frequency of layers to skip window attention. Accepts either: - An integer N: "
             "Represents a (N-1):1 ratio, meaning one full attention layer after (N-1) SWA "
             "layers. - A string containing a Python list expression that defines a custom "
             "pattern, e.g.: \"[1,1,1,0]*3\" evaluates to [1,1,1,0,1,1,1,0,1,1,1,0] where 1 "
             "indicates SWA and 0 indicates full attention. "},
    {.name = "--yaml-cfg", G_EXPERIMENTAL, STRING, TODO("config file to add additional arguments"),
     .help = "Config file to add additional arguments"},
};
/* clang-format on */

const size_t mc_flags_misc_count = sizeof(mc_flags_misc) / sizeof(mc_flags_misc[0]);
