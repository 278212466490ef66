/* Flag table, part serving: inference, reinforcement learning, distillation, fine-tuning and
 * Model Optimizer. Megatron-LM's flags that megatron-c recognises and refuses by name (or, the
 * no-ops, accepts and ignores), written first by scripts/megatron-flags-table.py from
 * Megatron's parsers at core_v0.15.0 and main (test/fixtures/megatron-flags-*.tsv); type,
 * default, group and help are Megatron's. */
#include "config/flags_table.h"

#define G_DAD .group = "data and dataloader"
#define G_INFERENCE .group = "inference"
#define G_LD .group = "Logits Distillation"
#define G_MG .group = "modelopt-generic"
#define G_NS .group = "network size"
#define G_RL .group = "rl"
#define G_SFT .group = "sft"
#define G_TC .group = "transformer configuration"
#define G_TE .group = "Transformer-Engine"
#define G_VISION .group = "vision"

/* One flag per entry, its fields packed as written. */
/* clang-format off */
const mc_flag_t mc_flags_serving[] = {
    {.name = "--bert-embedder-type", G_INFERENCE, CHOICE("megatron", "huggingface"),
     .def = "megatron", TODO("inference"),
     .help = "Select either Megatron or Huggingface as the Bert embedder."},
    {.name = "--decoder-num-layers", G_NS, INT64, TODO("inference"),
     .help = "Number of decoder transformer layers."},
    {.name = "--decoder-seq-length", G_DAD, INT64, TODO("inference"),
     .help = "Maximum decoder sequence length to process."},
    {.name = "--dino-teacher-temp", G_VISION, FLOAT, .def = "0.07", TODO("knowledge distillation"),
     .help = "teacher temperature"},
    {.name = "--dino-warmup-teacher-temp", G_VISION, FLOAT, .def = "0.04",
     TODO("knowledge distillation"),
     .help = "warump teacher temperature"},
    {.name = "--dino-warmup-teacher-temp-epochs", G_VISION, INT64, .def = "30",
     TODO("knowledge distillation"),
     .help = "warmup teacher temperaure epochs"},
    {.name = "--disable-chunked-prefill", G_INFERENCE, TRUE_IF_GIVEN, TODO("inference"),
     .help = "Disable chunked prefill (chunked prefill is enabled by default)."},
    {.name = "--enable-chunked-prefill", G_INFERENCE, TRUE_IF_GIVEN, TODO("inference"),
     .help = "Enable chunked prefill (disabled by default)"},
    {.name = "--enable-gpt-oss", G_MG, TRUE_IF_GIVEN, TODO("Model Optimizer (nvidia-modelopt)"),
     .help = "Enable GPT-OSS mode with YaRN RoPE configuration. When enabled, automatically "
             "configures all YaRN parameters with GPT-OSS defaults."},
    {.name = "--export-default-te-spec", G_MG, TRUE_IF_GIVEN,
     TODO("Model Optimizer (nvidia-modelopt)"),
     .help = "Use the full Transformer-Engine layer spec for model building. This builds the "
             "model with TELayerNormColumnParallelLinear, TERowParallelLinear, TEGroupedMLP, "
             "TEDotProductAttention, etc., matching the canonical TE specs."},
    {.name = "--export-force-local-attention", G_MG, TRUE_IF_GIVEN,
     TODO("Model Optimizer (nvidia-modelopt)"),
     .help = "Forcing local DotProductAttention; otherwise TEDotProductAttention is used."},
    {.name = "--export-kd-cfg", G_MG, STRING, TODO("Model Optimizer (nvidia-modelopt)"),
     .help = "Path to distillation configuration yaml file, in order to use non-default settings."},
    {.name = "--export-kd-teacher-ckpt-format", G_MG,
     CHOICE("torch", "torch_dist", "torch_dcp", "zarr"), TODO("Model Optimizer (nvidia-modelopt)"),
     .help = "Checkpoint format of teacher model, if different from student's."},
    {.name = "--export-kd-teacher-load", G_MG, STRING, TODO("Model Optimizer (nvidia-modelopt)"),
     .help = "Path to checkpoint to load as distillation teacher. (Enables distillation mode "
             "automatically)"},
    {.name = "--export-kd-teacher-model-config", G_MG, STRING,
     TODO("Model Optimizer (nvidia-modelopt)"),
     .help = "Path to teacher model config for distillation. If not provided, defaults to "
             "${export_kd_teacher_load}/model_config.yaml."},
    {.name = "--export-kv-cache-quant", G_MG,
     CHOICE("none", "fp8", "fp8_affine", "nvfp4", "nvfp4_affine", "nvfp4_rotate"), .def = "none",
     TODO("Model Optimizer (nvidia-modelopt)"),
     .help = "Type of KV cache quantization to perform."},
    {.name = "--export-legacy-megatron", G_MG, TRUE_IF_GIVEN,
     TODO("Model Optimizer (nvidia-modelopt)"),
     .help = "Export a legacy megatron-lm checkpoint."},
    {.name = "--export-model-type", G_MG, CHOICE("GPTModel", "HybridModel", "MambaModel"),
     .def = "GPTModel", TODO("Model Optimizer (nvidia-modelopt)"),
     .help = "Model type to use in model_provider. Use \"HybridModel\" for hybrid models "
             "(formerly MambaModel). \"MambaModel\" is accepted for backward compatibility but "
             "deprecated."},
    {.name = "--export-moe-apply-probs-on-input", G_MG, TRUE_IF_GIVEN,
     TODO("Model Optimizer (nvidia-modelopt)"),
     .help = "Use Llama-4 expert scaling on input instead of output."},
    {.name = "--export-offline-model", G_MG, TRUE_IF_GIVEN,
     TODO("Model Optimizer (nvidia-modelopt)"),
     .help = "If set, the base model will have no decoder layer. Only the embedding layer and "
             "output layer are initialized."},
    {.name = "--export-qk-l2-norm", G_MG, TRUE_IF_GIVEN, TODO("Model Optimizer (nvidia-modelopt)"),
     .help = "Use Llama-4 L2Norm instead of normal LayerNorm/RMSNorm for QK normalization."},
    {.name = "--export-quant-cfg", G_MG, STRING, TODO("Model Optimizer (nvidia-modelopt)"),
     .help = "Specify a quantization config from mtq.config.choices."},
    {.name = "--export-real-quant-cfg", G_MG,
     CHOICE("fp8_real_quant", "fp8_blockwise_real_quant", "None"), .def = "None",
     TODO("Model Optimizer (nvidia-modelopt)"),
     .help = "Specify a real quantization config from the supported choices."},
    {.name = "--export-te-mcore-model", G_MG, TRUE_IF_GIVEN,
     TODO("Model Optimizer (nvidia-modelopt)"),
     .help = "Indicate the source checkpoint uses the fused Transformer-Engine mcore layer spec "
             "(where layernorms are fused into linear layers). Enables state_dict key remapping "
             "so the TE checkpoint can be loaded into the local ModelOpt spec for PTQ/export, and "
             "saved back in TE-compatible format. Mutually exclusive with "
             "--export-default-te-spec."},
    {.name = "--finetune-data-files", G_MG, LIST(-1), TODO("Model Optimizer (nvidia-modelopt)"),
     .help = "Optional explicit files from an HF dataset repository used for finetuning. Listing "
             "files avoids preparing unrelated splits of large datasets."},
    {.name = "--finetune-data-split", G_MG, STRING, .def = "train",
     TODO("Model Optimizer (nvidia-modelopt)"),
     .help = "HF dataset split used for finetuning."},
    {.name = "--finetune-hf-dataset", G_MG, STRING, TODO("Model Optimizer (nvidia-modelopt)"),
     .help = "HF dataset used for finetuning."},
    {.name = "--flash-decode", G_INFERENCE, TRUE_IF_GIVEN, TODO("inference"),
     .help = "Use the optimized flash decoding kernel during inference."},
    {.name = "--freeze-base-for-mtp", G_MG, TRUE_IF_GIVEN,
     TODO("Model Optimizer (nvidia-modelopt)"),
     .help = "Deprecated alias for --qad-train-target mtp: freeze all base model parameters and "
             "only train MTP heads."},
    {.name = "--grpo-clamp-eps-lower", G_RL, FLOAT, .def = "0.01", TODO("reinforcement learning"),
     .help = "Lower GRPO clipping bound."},
    {.name = "--grpo-clamp-eps-upper", G_RL, FLOAT, .def = "0.01", TODO("reinforcement learning"),
     .help = "Upper GRPO clipping bound. In vanilla implementation, equals to the lower one."},
    {.name = "--grpo-default-temperature", G_RL, FLOAT, .def = "1.0",
     TODO("reinforcement learning"),
     .help = "Default temperature for model inference."},
    {.name = "--grpo-default-top-p", G_RL, FLOAT, .def = "0", TODO("reinforcement learning"),
     .help = "Default top-p for model inference."},
    {.name = "--grpo-entropy-term-weight", G_RL, FLOAT, .def = "0.0",
     TODO("reinforcement learning"),
     .help = "Entropy term weight in GRPO loss."},
    {.name = "--grpo-filter-groups-with-same-reward", G_RL, TRUE_IF_GIVEN,
     TODO("reinforcement learning"),
     .help = "Filter groups with same reward."},
    {.name = "--grpo-group-size", G_RL, INT64, .def = "2", TODO("reinforcement learning"),
     .help = "Number of samples per a GRPO group."},
    {.name = "--grpo-iterations", G_RL, INT64, .def = "2", TODO("reinforcement learning"),
     .help = "Number of iterations per a GRPO implementation."},
    {.name = "--grpo-kl-beta", G_RL, FLOAT, .def = "0.001", TODO("reinforcement learning"),
     .help = "KL term weight in the GRPO loss."},
    {.name = "--grpo-prompts-per-step", G_RL, INT64, .def = "32", TODO("reinforcement learning"),
     .help = "Number of GRPO groups (G in the paper)."},
    {.name = "--inference-batch-times-seqlen-threshold", G_INFERENCE, INT64, .def = "-1",
     TODO("inference"),
     .help = "If (batch-size * sequence-length) is smaller than this thresholdthen batches will "
             "not be split up for pipelining.Requires setting --pipeline-model-parallel-size > "
             "1.Setting this to -1 indicates that batch pipelining is not used."},
    {.name = "--inference-coordinator-port", G_INFERENCE, INT64, TODO("inference"),
     .help = "This port will be used to setup the inference coordinator on node-0"},
    {.name = "--inference-wandb-logging", G_INFERENCE, TRUE_IF_GIVEN, TODO("inference"),
     .help = "Enable inference wandb logging."},
    {.name = "--inference-disable-ep-consensus", G_INFERENCE, TRUE_IF_GIVEN, TODO("inference"),
     .help = "Skip the EP-group consensus all-reduce in the inference engine control loop and "
             "step on local state only. Pause/unpause take effect as soon as the signal is "
             "delivered to a rank. Only safe when EP coordination is not required (e.g. "
             "ep_world_size == 1)."},
    {.name = "--inference-disable-triton-nvls-kernels", G_TC, TRUE_IF_GIVEN, TODO("inference"),
     .help = "If true, disables the use of Triton NVLS kernels during inference."},
    {.name = "--inference-dynamic-batching", G_INFERENCE, TRUE_IF_GIVEN, TODO("inference"),
     .help = "Enable dynamic batching mode."},
    {.name = "--inference-dynamic-batching-async-sched-mode", G_INFERENCE,
     CHOICE("legacy", "async"), .def = "legacy", TODO("inference"),
     .help = "Async scheduling mode for dynamic batching. \"legacy\" (default) preserves the "
             "existing resolve-before-prepare path. \"async\" overlaps asynchronous scheduling "
             "phases by reordering them to prepare-before-resolve."},
    {.name = "--inference-dynamic-batching-block-size", G_INFERENCE, INT64, .def = "256",
     TODO("inference"),
     .help = "KV cache block size. It should be a multiple of 256"},
    {.name = "--inference-dynamic-batching-buffer-guaranteed-fraction", G_INFERENCE, FLOAT,
     .def = "0.2", TODO("inference"),
     .help = "Space is reserved within the inference context memory buffer to guarantee that a "
             "minimum number of active requests will always be able to run to completion. This is "
             "to avoid the context being deadlocked by paused requests."},
    {.name = "--inference-dynamic-batching-buffer-overflow-factor", G_INFERENCE, FLOAT,
     TODO("inference"),
     .help = "Scaling factor over the memory buffer size for auto computing `max_requests` and "
             "`max_tokens`. This scaling factor is used for fitting more requests and tokens in "
             "the memory buffer than it can safely hold, which in turn increases throughput."},
    {.name = "--inference-dynamic-batching-buffer-size-gb", G_INFERENCE, FLOAT, .def = "40.0",
     TODO("inference"),
     .help = "On-GPU portion of the shared KV cache block pool. The total amount of memory "
             "allocated for the KV cache (CPU + GPU memory) depends on the value set for the "
             "unified virtual memory (UVM) level (via "
             "`--inference-dynamic-batching-unified-memory-level`).If the UVM level is 0, then "
             "only GPU memory is used and the total memory equals `buffer_size_gb`. If the UVM "
             "level is 1, then additional memory is utilized on the CPU and the total memory "
             "equals `buffer_size_gb + paused_buffer_size_gb`."},
    {.name = "--inference-dynamic-batching-logprobs-mode", G_INFERENCE,
     CHOICE("raw_logprobs", "processed_logprobs"), .def = "raw_logprobs", TODO("inference"),
     .help = "How returned inference log-probs are computed engine-wide. \"raw_logprobs\" "
             "(default) uses the unmodified model logits; \"processed_logprobs\" uses temperature "
             "and filters by top-k/top-p."},
    {.name = "--inference-dynamic-batching-max-requests", G_INFERENCE, INT64, TODO("inference"),
     .help = "Override the inference context's `max_requests`. By default, `max_requests` is set "
             "to the number of blocks in the context's memory buffer."},
    {.name = "--inference-dynamic-batching-max-requests-override", G_INFERENCE, INT64,
     TODO("inference"),
     .help = "If set, this overrides the max requests as computed from "
             "`--inference-dynamic-batching-buffer-overflow-factor`."},
    {.name = "--inference-dynamic-batching-max-tokens", G_INFERENCE, INT64, TODO("inference"),
     .help = "Override the inference context's default `max_tokens`."},
    {.name = "--inference-dynamic-batching-max-tokens-override", G_INFERENCE, INT64,
     TODO("inference"),
     .help = "If set, this overrides the max tokens as computed from "
             "`--inference-dynamic-batching-buffer-overflow-factor`."},
    {.name = "--inference-dynamic-batching-paused-buffer-size-gb", G_INFERENCE, FLOAT,
     TODO("inference"),
     .help = "Memory used to derive the paused-request block retention budget. This does not "
             "reserve blocks from active requests: active requests may use the entire shared pool "
             "of usable KV cache blocks. Under allocation pressure, paused requests retain blocks "
             "only within this budget and excess paused requests may be evicted."},
    {.name = "--inference-dynamic-batching-prefix-caching", G_INFERENCE, TRUE_IF_GIVEN,
     TODO("inference"),
     .help = "Enable/disable prefix caching for dynamic batching inference. When disabled, KV "
             "cache blocks cannot be shared between requests with identical prompt prefixes."},
    {.name = "--inference-dynamic-batching-prefix-caching-coordinator-policy", G_INFERENCE,
     CHOICE("longest_prefix", "first_prefix_block", "load_balanced"), .def = "load_balanced",
     TODO("inference"),
     .help = "Coordinator routing policy for prefix caching. \"load_balanced\" (default) routes "
             "to the rank with the fewest in-flight requests, ignoring prefix affinity. "
             "\"first_prefix_block\" routes based on the first block hash only. "
             "\"longest_prefix\" routes to the rank with the longest matching prefix. "
             "\"first_prefix_block\" and \"longest_prefix\" both combine prefix affinity with "
             "load balancing and fall back to load-balanced routing when prefix caching is "
             "disabled or no prefix match exists."},
    {.name = "--inference-dynamic-batching-prefix-caching-eviction-policy", G_INFERENCE,
     CHOICE("ref_zero", "lru"), .def = "ref_zero", TODO("inference"),
     .help = "Eviction policy for prefix caching blocks. \"ref_zero\" (default) immediately "
             "returns blocks to the free pool when ref_count hits 0. \"lru\" keeps blocks cached "
             "and evicts via LRU only when space is needed."},
    {.name = "--inference-dynamic-batching-prefix-caching-routing-alpha", G_INFERENCE, FLOAT,
     .def = "0.5", TODO("inference"),
     .help = "Weight for prefix-aware routing score: score = alpha * match + (1 - alpha) * "
             "normalized_load. Higher alpha favors prefix cache hits; lower alpha favors load "
             "balance. Default: 0.5."},
    {.name = "--inference-dynamic-batching-sampling-backend", G_INFERENCE,
     CHOICE("torch", "flashinfer"), .def = "torch", TODO("inference"),
     .help = "Which sampling kernels to use during inference. Falls back to \"torch\" with a "
             "warning if \"flashinfer\" is requested but the package is not installed."},
    {.name = "--inference-dynamic-batching-track-generated-token-events", G_INFERENCE,
     TRUE_IF_GIVEN, TODO("inference"),
     .help = "Track per-token events with timestamps for each generated token. When enabled, each "
             "generated token creates a GENERATED_TOKEN event with a timestamp, useful for "
             "per-token latency analysis."},
    {.name = "--inference-dynamic-batching-track-paused-request-events", G_INFERENCE,
     TRUE_IF_GIVEN, TODO("inference"),
     .help = "Track paused request ids by adding 'paused' events to each request's event history. "
             "This has a very minor impact on latency."},
    {.name = "--inference-dynamic-batching-unified-memory-level", G_INFERENCE, CHOICE("0", "1"),
     .def = "0", TODO("inference"),
     .help = "Set unified memory usage within the dynamic inference context. The levels are: 0) "
             "no unified memory, 1) allocate `memory_buffer` in unified memory. Eventually, "
             "additional levels will be included to control other tensors within the context."},
    {.name = "--inference-grouped-gemm-backend", G_TC, CHOICE("flashinfer", "torch", "vllm"),
     .def = "vllm", TODO("inference"),
     .help = "Specifies the backend to use for grouped GEMM operations during inference. Options: "
             "- 'flashinfer': Uses FlashInfer cutlass_fused_moe. Not compatible with MXFP8. - "
             "'torch': Uses torch.nn.functional.grouped_mm (mcore_fused_moe with Triton kernels). "
             "Supports both BF16 and MXFP8. - 'vllm': Uses vLLM's Triton fused MoE kernel (BF16). "
             "Avoids physical token permutation via indirect addressing."},
    {.name = "--inference-logging-step-interval", G_INFERENCE, INT64, .def = "0",
     TODO("inference"),
     .help = "Step interval for logging inference metrics. Default to 0 to disable inference "
             "logging."},
    {.name = "--inference-max-batch-size", G_INFERENCE, INT64, TODO("inference"),
     .help = "Maximum batch size for inference."},
    {.name = "--inference-max-requests", G_INFERENCE, INT64, .def = "8", TODO("inference"),
     .help = "Maximum number of requests for inference."},
    {.name = "--inference-max-seq-length", G_INFERENCE, INT64, .def = "2560", TODO("inference"),
     .help = "Maximum sequence length expected for inference (prefill + decode)."},
    {.name = "--inference-rng-tracker", G_TE, TRUE_IF_GIVEN, TODO("inference"),
     .help = "Use a random number generator configured for inference."},
    {.name = "--inference-shards", G_INFERENCE, STRING, TODO("inference"),
     .help = "Partition the world into independent inference models, each with its own "
             "parallelism, e.g. \"tp=2,role=prefill+tp=1,dp=2,role=decode\". Shards are separated "
             "by \"+\" or \";\"; per-shard keys are tp,pp,ep,expt_tp,dp (each defaults to 1) and "
             "must partition the full world. Tagging shards role=prefill|decode enables "
             "disaggregated inference (prefill hands KV to the decode pool); a dp>1 decode shard "
             "is several independent decode instances."},
    {.name = "--inference-text-gen-server-logging", G_INFERENCE, TRUE_IF_GIVEN, TODO("inference"),
     .help = "Enable per-request logging in the inference text generation server."},
    {.name = "--inference-use-synchronous-zmq-collectives", G_INFERENCE, TRUE_IF_GIVEN,
     TODO("inference"),
     .help = "Use synchronous ZMQ collectives for inference. Helps in reducing performance "
             "variability for MoEs."},
    {.name = "--langrl-env-config", G_RL, STRING, TODO("reinforcement learning"),
     .help = "Path to YAML config file for RL environment configuration."},
    {.name = "--langrl-external-server", G_RL, TRUE_IF_GIVEN, TODO("reinforcement learning"),
     .help = "(no help in Megatron)"},
    {.name = "--langrl-inference-server-conversation-template", G_RL, STRING,
     TODO("reinforcement learning"),
     .help = "Conversation template, if using a chat server."},
    {.name = "--langrl-inference-server-type", G_RL,
     CHOICE("inplace_megatron", "inplace_megatron_chat"), .def = "inplace_megatron",
     TODO("reinforcement learning"),
     .help = "Type of inference server to use."},
    {.name = "--logits-load-decode-threads", G_LD, INT64, .def = "4",
     TODO("knowledge distillation"),
     .help = "Number of decode threads for cached-logits zstd decompression and torch.load "
             "processing."},
    {.name = "--logits-load-dir", G_LD, STRING, TODO("knowledge distillation"),
     .help = "Directory to load logits."},
    {.name = "--logits-load-ignore-errors", G_LD, TRUE_IF_GIVEN, TODO("knowledge distillation"),
     .help = "When set, KD loss errors are logged as warnings and training falls back to LM-only "
             "loss instead of crashing."},
    {.name = "--logits-load-kd-loss-alpha", G_LD, FLOAT, .def = "1.0",
     TODO("knowledge distillation"),
     .help = "KD loss alpha for loading logits. Total loss is calculated as alpha * kd_loss + (1 "
             "- alpha) * lm_loss."},
    {.name = "--logits-load-msc-prefetch-depth", G_LD, INT64, .def = "2",
     TODO("knowledge distillation"),
     .help = "For MSC/object-storage logits tar shards, number of whole tar shards to prefetch "
             "into the MSC cache ahead of sequential tar consumption."},
    {.name = "--logits-load-prefetch-factor", G_LD, INT64, .def = "3",
     TODO("knowledge distillation"),
     .help = "PyTorch DataLoader prefetch factor for decoded cached-logits iterations. (Non-MSC "
             "only)"},
    {.name = "--logits-save-dir", G_LD, STRING, TODO("knowledge distillation"),
     .help = "Directory to save logits."},
    {.name = "--logits-save-dtype", G_LD, CHOICE("fp16", "bf16", "fp32"), .def = "fp16",
     TODO("knowledge distillation"),
     .help = "Dtype for on-disk top-K log-probabilities."},
    {.name = "--logits-save-top-k", G_LD, INT64, TODO("knowledge distillation"),
     .help = "Number of top logits to save."},
    {.name = "--logits-save-top-p", G_LD, FLOAT, TODO("knowledge distillation"),
     .help = "Top-P (nucleus) threshold applied after top-K selection when saving logits. Only "
             "the smallest set of entries whose cumulative probability mass reaches this "
             "threshold is kept. Must be in (0, 1]."},
    {.name = "--logits-save-top-p-min-k", G_LD, INT64, .def = "1", TODO("knowledge distillation"),
     .help = "Minimum number of entries kept per token when top-P masking is active, regardless "
             "of cumulative mass. Default: 1."},
    {.name = "--max-tokens-to-oom", G_INFERENCE, INT64, .def = "12000", TODO("inference"),
     .help = "Maximum number of tokens during inferencetokens here is # in prompt + # to "
             "generateAllows us to throw an error before OOM crashes server"},
    {.name = "--mlp-chunks-for-prefill", G_INFERENCE, INT64, .def = "1", TODO("inference"),
     .help = "The number of chunks along the sequence dimension to use for MLP computation during "
             "prefill."},
    {.name = "--modelopt-enabled", G_MG, TRUE_IF_GIVEN, TODO("Model Optimizer (nvidia-modelopt)"),
     .help = "Will be set automatically when loading a ModelOpt checkpoint."},
    {.name = "--nccl-all-reduce-for-prefill", G_INFERENCE, TRUE_IF_GIVEN, TODO("inference"),
     .help = "If True, use NCCL all-reduce kernels when symmetric all-reduce is enabled."},
    {.name = "--no-inference-wandb-logging", G_INFERENCE, FALSE_IF_GIVEN, .def = "False",
     TODO("inference"), .help = "Enable inference wandb logging."},
    {.name = "--no-inference-disable-ep-consensus", G_INFERENCE, FALSE_IF_GIVEN, .def = "False",
     TODO("inference"),
     .help = "Skip the EP-group consensus all-reduce in the inference engine control loop and "
             "step on local state only. Pause/unpause take effect as soon as the signal is "
             "delivered to a rank. Only safe when EP coordination is not required (e.g. "
             "ep_world_size == 1)."},
    {.name = "--no-inference-dynamic-batching-prefix-caching", G_INFERENCE, FALSE_IF_GIVEN,
     .def = "False", TODO("inference"),
     .help = "Enable/disable prefix caching for dynamic batching inference. When disabled, KV "
             "cache blocks cannot be shared between requests with identical prompt prefixes."},
    {.name = "--no-inference-text-gen-server-logging", G_INFERENCE, FALSE_IF_GIVEN, .def = "False",
     TODO("inference"),
     .help = "Enable per-request logging in the inference text generation server."},
    {.name = "--no-inference-use-synchronous-zmq-collectives", G_INFERENCE, FALSE_IF_GIVEN,
     .def = "False", TODO("inference"),
     .help = "Use synchronous ZMQ collectives for inference. Helps in reducing performance "
             "variability for MoEs."},
    {.name = "--no-langrl-external-server", G_RL, FALSE_IF_GIVEN, .def = "False",
     TODO("reinforcement learning"),
     .help = "(no help in Megatron)"},
    {.name = "--no-rl-calculate-intra-group-similarity", G_RL, FALSE_IF_GIVEN, .def = "False",
     TODO("reinforcement learning"),
     .help = "If set, calculate the intra-group similarity of rollouts."},
    {.name = "--no-rl-inference-logprobs-is-correction", G_RL, FALSE_IF_GIVEN, .def = "False",
     TODO("reinforcement learning"),
     .help = "If set, use inference logprobs in importance sampling correction of the loss."},
    {.name = "--no-rl-offload-inference-model-weights-when-idle", G_RL, FALSE_IF_GIVEN,
     .def = "False", TODO("reinforcement learning"),
     .help = "When using a separate RL inference model, offload its weights to CPU when not doing "
             "rollout inference, and restore to GPU right before inference. Works with two "
             "backends: 1) UVM (when --rl-inference-model-unified-memory-level=1), or 2) "
             "torch_memory_saver (when UVM is not enabled; requires torch_memory_saver to be "
             "installed)."},
    {.name = "--no-rl-offload-kv-cache-during-training", G_RL, FALSE_IF_GIVEN, .def = "False",
     TODO("reinforcement learning"),
     .help = "Offload KV cache to CPU during training to save GPU memory"},
    {.name = "--no-rl-partial-rollouts", G_RL, FALSE_IF_GIVEN, .def = "False",
     TODO("reinforcement learning"),
     .help = "Allow inference to continue generating rollouts while training updates the policy "
             "weights. This enables off-policy training where rollouts may be generated with a "
             "stale version of the policy. Use --rl-generation-lag to control the degree of "
             "staleness."},
    {.name = "--no-rl-persist-cuda-graphs", G_RL, FALSE_IF_GIVEN, .def = "False",
     TODO("reinforcement learning"),
     .help = "Persist CUDA graphs when the inference engine is suspended. If False, CUDA graphs "
             "are deleted on suspend and re-captured on resume."},
    {.name = "--no-rl-remove-kv-cache-during-training", G_RL, FALSE_IF_GIVEN, .def = "False",
     TODO("reinforcement learning"),
     .help = "Remove KV cache during training to save GPU memory"},
    {.name = "--no-rl-reset-cuda-graphs", G_RL, FALSE_IF_GIVEN, .def = "False",
     TODO("reinforcement learning"),
     .help = "Reset CUDA graphs between inference/training to save GPU memory"},
    {.name = "--no-rl-skip-bos-token", G_RL, FALSE_IF_GIVEN, .def = "False",
     TODO("reinforcement learning"),
     .help = "Skip BOS token at the beginning of the sequences. Default is False."},
    {.name = "--no-rl-training-cuda-graphs", G_RL, FALSE_IF_GIVEN, .def = "False",
     TODO("reinforcement learning"),
     .help = "If set, do not toggle CUDA graphs on/off between inference and training phases."},
    {.name = "--no-rl-use-sequence-packing", G_RL, FALSE_IF_GIVEN, .def = "False",
     TODO("reinforcement learning"),
     .help = "Enable sequence packing"},
    {.name = "--no-rl-verify-model-weights-swap", G_RL, FALSE_IF_GIVEN, .def = "False",
     TODO("reinforcement learning"),
     .help = "If set, verify that the model weights were correctly transferred by comparing "
             "forward pass outputs onthe first swap of model weights."},
    {.name = "--num-speculative-tokens", G_INFERENCE, INT64, .def = "0", TODO("inference"),
     .help = "Number of speculative tokens generated during decode"},
    {.name = "--output-bert-embeddings", G_INFERENCE, TRUE_IF_GIVEN, TODO("inference"),
     .help = "Output Bert embeddings (via mean pooling) from model, rather than its binary head "
             "output or entire hidden batch."},
    {.name = "--perform-rl-step", G_RL, TRUE_IF_GIVEN, TODO("reinforcement learning"),
     .help = "Use the RL training step."},
    {.name = "--qad-train-target", G_MG, CHOICE("base", "mtp", "both"),
     TODO("Model Optimizer (nvidia-modelopt)"),
     .help = "Which side of an MTP model to train during QAD / MTP QAT. \"mtp\": train MTP heads "
             "only, freeze the base (post-QAD two-phase recipe); \"base\": train the base only, "
             "freeze the MTP heads; \"both\": co-train the base and MTP heads together. Routers "
             "on the frozen side also have their expert_bias update skipped."},
    {.name = "--refit-method", G_RL, CHOICE("nccl", "gloo", "nvshmem"), .def = "gloo",
     TODO("reinforcement learning"),
     .help = "Method to refit the model weights between training and inference models during RL. "
             "nccl: use NCCLCopyService to refit using NCCL; gloo: use GlooCopyService over CPU; "
             "nvshmem: use NVSHMEMCopyService to refit using the NVSHMEM."},
    {.name = "--rl-calculate-intra-group-similarity", G_RL, TRUE_IF_GIVEN,
     TODO("reinforcement learning"),
     .help = "If set, calculate the intra-group similarity of rollouts."},
    {.name = "--rl-consumption-granularity", G_RL, CHOICE("R", "G", "B"), .def = "B",
     TODO("reinforcement learning"),
     .help = "Granularity for consuming generated rollout groups. G consumes groups as they "
             "complete. B consumes complete trainer batches in submission order. R is not "
             "currently supported."},
    {.name = "--rl-default-temperature", G_RL, FLOAT, .def = "1.0", TODO("reinforcement learning"),
     .help = "Default temperature for model inference."},
    {.name = "--rl-default-top-k", G_RL, INT64, .def = "-1", TODO("reinforcement learning"),
     .help = "Default top-k for model inference."},
    {.name = "--rl-default-top-p", G_RL, FLOAT, .def = "0", TODO("reinforcement learning"),
     .help = "Default top-p for model inference."},
    {.name = "--rl-durable-rollout-bank", G_RL, TRUE_IF_GIVEN, TODO("reinforcement learning"),
     .help = "Persist completed rollout groups to a durable, write-through ledger so they survive "
             "a SIGKILL (the SLURM time limit) and are restored at restart instead of "
             "regenerated. No-op when unset."},
    {.name = "--rl-generation-lag", G_RL, FLOAT, TODO("reinforcement learning"),
     .help = "Number of trainer batches of rollout generation lag to allow The number of "
             "in-flight trainer batches is this value plus one. May be fractional or negative; "
             "the minimum of -1 keeps a single unit of generation work in flight. If omitted, the "
             "lag is autotuned to the inference engine's request capacity when "
             "--rl-partial-rollouts is set, and is 0 otherwise. Requires --rl-partial-rollouts "
             "when greater than 0. Mutually exclusive with --rl-max-inflight-requests."},
    {.name = "--rl-importance-sampling-truncation-coef", G_RL, FLOAT,
     TODO("reinforcement learning"),
     .help = "If --inference-logprobs-is-correction is on and this coefficient is set, apply "
             "truncation for the IS correction at GRPO loss."},
    {.name = "--rl-inference-expert-model-parallel-size", G_RL, INT64,
     TODO("reinforcement learning"),
     .help = "Degree of expert model parallelism for inference for RL."},
    {.name = "--rl-inference-expert-tensor-model-parallel-size", G_RL, INT64,
     TODO("reinforcement learning"),
     .help = "Degree of expert tensor model parallelism for inference for RL. For MoE models, "
             "this controls the TP size for expert layers specifically. Defaults to training "
             "expert_tensor_parallel_size if not specified."},
    {.name = "--rl-inference-logprobs-is-correction", G_RL, TRUE_IF_GIVEN,
     TODO("reinforcement learning"),
     .help = "If set, use inference logprobs in importance sampling correction of the loss."},
    {.name = "--rl-inference-model-unified-memory-level", G_RL, CHOICE("0", "1"), .def = "0",
     TODO("reinforcement learning"),
     .help = "Allocate the separate RL inference model parameters from a unified virtual memory "
             "(UVM) CUDA mempool. Level 0 disables UVM (default). Level 1 enables UVM allocation "
             "so the inference model weights can be prefetched to CPU when idle while keeping "
             "CUDA-graph-safe device pointers."},
    {.name = "--rl-inference-parsers", G_RL, LIST(0), .def = "", TODO("reinforcement learning"),
     .help = "List of response parsers to enable for RL inference (e.g. --rl-inference-parsers "
             "deepseek-r1-reasoning qwen3-coder-tool)."},
    {.name = "--rl-inference-pipeline-model-parallel-size", G_RL, INT64,
     TODO("reinforcement learning"),
     .help = "Degree of pipeline model parallelism for inference for RL."},
    {.name = "--rl-inference-tensor-model-parallel-size", G_RL, INT64,
     TODO("reinforcement learning"),
     .help = "Degree of tensor model parallelism for inference for RL."},
    {.name = "--rl-kv-cache-management-mode", G_RL, CHOICE("persist", "offload", "recompute"),
     .def = "persist", TODO("reinforcement learning"),
     .help = "KV cache management mode during RL training: persist: leave KV cache in GPU memory "
             "(default), offload: offload KV cache to CPU during training, recompute: deallocate "
             "KV cache and recompute from scratch each cycle"},
    {.name = "--rl-max-inflight-requests", G_RL, INT64, TODO("reinforcement learning"),
     .help = "Maximum number of inference requests RL generation may keep inflight: equivalent to "
             "(--rl-generation-lag + 1) training batches of grpo_prompts_per_step * "
             "grpo_group_size requests each. Requires --rl-partial-rollouts when above one "
             "training batch; mutually exclusive with --rl-generation-lag."},
    {.name = "--rl-offload-inference-model-weights-when-idle", G_RL, TRUE_IF_GIVEN,
     TODO("reinforcement learning"),
     .help = "When using a separate RL inference model, offload its weights to CPU when not doing "
             "rollout inference, and restore to GPU right before inference. Works with two "
             "backends: 1) UVM (when --rl-inference-model-unified-memory-level=1), or 2) "
             "torch_memory_saver (when UVM is not enabled; requires torch_memory_saver to be "
             "installed)."},
    {.name = "--rl-offload-kv-cache-during-training", G_RL, TRUE_IF_GIVEN,
     TODO("reinforcement learning"),
     .help = "Offload KV cache to CPU during training to save GPU memory"},
    {.name = "--rl-offload-optimizer-during-inference", G_RL, TRUE_IF_GIVEN,
     TODO("reinforcement learning"),
     .help = "Offload optimizer state to CPU during inference/rollout to save GPU memory"},
    {.name = "--rl-partial-rollouts", G_RL, TRUE_IF_GIVEN, TODO("reinforcement learning"),
     .help = "Allow inference to continue generating rollouts while training updates the policy "
             "weights. This enables off-policy training where rollouts may be generated with a "
             "stale version of the policy. Use --rl-generation-lag to control the degree of "
             "staleness."},
    {.name = "--rl-persist-cuda-graphs", G_RL, TRUE_IF_GIVEN, TODO("reinforcement learning"),
     .help = "Persist CUDA graphs when the inference engine is suspended. If False, CUDA graphs "
             "are deleted on suspend and re-captured on resume."},
    {.name = "--rl-profile", G_RL, TRUE_IF_GIVEN, TODO("reinforcement learning"),
     .help = "Enable RL profiling to collect detailed timer data (JSONL + CSV)."},
    {.name = "--rl-profile-dir", G_RL, STRING, TODO("reinforcement learning"),
     .help = "Directory to write RL profiling data. Defaults to {save}/profiles."},
    {.name = "--rl-prompts-per-eval", G_RL, INT64, .def = "32", TODO("reinforcement learning"),
     .help = "Number of prompts to evaluate for for each RL task.This evaluation can be very "
             "expensive when using environmentsthat evaluate pass@k so we default to a lower "
             "number."},
    {.name = "--rl-remove-kv-cache-during-training", G_RL, TRUE_IF_GIVEN,
     TODO("reinforcement learning"),
     .help = "Remove KV cache during training to save GPU memory"},
    {.name = "--rl-reset-cuda-graphs", G_RL, TRUE_IF_GIVEN, TODO("reinforcement learning"),
     .help = "Reset CUDA graphs between inference/training to save GPU memory"},
    {.name = "--rl-rollout-bank-dir", G_RL, STRING, TODO("reinforcement learning"),
     .help = "Directory for the durable rollout bank (on Lustre). Defaults to <save>/rollout_bank "
             "so the bank stays coupled to the checkpoint."},
    {.name = "--rl-rollout-bank-max-bytes", G_RL, INT64, .def = "0",
     TODO("reinforcement learning"),
     .help = "Soft cap (bytes) on the rollout bank size; 0 = unbounded. On exceed, a warning is "
             "logged. Compaction occurs at the next checkpoint regardless of the cap and never "
             "blocks generation."},
    {.name = "--rl-sequence-packing-algo", G_RL, CHOICE("fifo", "round-robin"), .def = "fifo",
     TODO("reinforcement learning"),
     .help = "Algorithm for distributing packed bins across ranks. fifo: first-in-first-out "
             "sequential distribution, round-robin: distribute bins cyclically across ranks for "
             "better load balancing"},
    {.name = "--rl-sequence-packing-bin-size", G_RL, INT64, .def = "8192",
     TODO("reinforcement learning"),
     .help = "Override bin size for sequence packing."},
    {.name = "--rl-sequence-packing-max-sequences-per-bin", G_RL, INT64, .def = "50",
     TODO("reinforcement learning"),
     .help = "Maximum number of sequences that can be packed into a single bin. "},
    {.name = "--rl-skip-bos-token", G_RL, TRUE_IF_GIVEN, TODO("reinforcement learning"),
     .help = "Skip BOS token at the beginning of the sequences. Default is False."},
    {.name = "--rl-submission-granularity", G_RL, CHOICE("R", "G", "B"), .def = "B",
     TODO("reinforcement learning"),
     .help = "Granularity for submitting rollout generation work. R submits individual rollouts "
             "independently while still yielding complete rollout groups to training. G submits "
             "one rollout group at a time. B submits grpo_prompts_per_step rollout groups "
             "together."},
    {.name = "--rl-training-cuda-graphs", G_RL, TRUE_IF_GIVEN, TODO("reinforcement learning"),
     .help = "If set, do not toggle CUDA graphs on/off between inference and training phases."},
    {.name = "--rl-use-sequence-packing", G_RL, TRUE_IF_GIVEN, TODO("reinforcement learning"),
     .help = "Enable sequence packing"},
    {.name = "--rl-verify-model-weights-swap", G_RL, TRUE_IF_GIVEN, TODO("reinforcement learning"),
     .help = "If set, verify that the model weights were correctly transferred by comparing "
             "forward pass outputs onthe first swap of model weights."},
    {.name = "--sft", G_SFT, TRUE_IF_GIVEN, TODO("supervised fine-tuning"),
     .help = "Megatron SFT training"},
    {.name = "--sft-tokenizer-prompt-format", G_SFT, STRING, .def = "nemotron-h-aligned",
     TODO("supervised fine-tuning"),
     .help = "SFT prompt format."},
    {.name = "--teacher-model-config", G_MG, STRING, TODO("Model Optimizer (nvidia-modelopt)"),
     .help = "Path to teacher model config for distillation. If not provided, defaults to "
             "${export_kd_teacher_load}/model_config.yaml."},
    {.name = "--use-legacy-static-engine", G_INFERENCE, TRUE_IF_GIVEN, TODO("inference"),
     .help = "Use legacy static engine. (Current static engine uses dynamic engine under the hood)"},
    {.name = "--use-same-sampling-seed-across-dp-ranks", G_INFERENCE, FALSE_IF_GIVEN,
     TODO("inference"),
     .help = "Use the same inference sampling seed on every data-parallel rank. "
             "--deterministic-mode also uses the same seed on every DP rank."},
};
/* clang-format on */

const size_t mc_flags_serving_count = sizeof(mc_flags_serving) / sizeof(mc_flags_serving[0]);
