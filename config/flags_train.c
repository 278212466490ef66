/* Flag table, part 2: running the training (training, learning rate, checkpointing,
 * distributed, validation, data and dataloader, tokenizer, logging) and megatron-c's own flags.
 * Defaults and help are Megatron-LM's; see MEGATRON.md sections 3 and 11. */
#include "config/flags_table.h"

#define TRAIN .group = "training"
#define LR .group = "learning rate"
#define CKPT .group = "checkpointing"
#define DIST .group = "distributed"
#define VALID .group = "validation"
#define DATA .group = "data and dataloader"
#define TOK .group = "tokenizer"
#define LOG .group = "logging"
#define EXT .group = "megatron-c"

#define DATASETS "reading the data arguments from a file is not implemented yet; use --data-path"

/* One flag per entry, its fields packed as written. */
/* clang-format off */
const mc_flag_t mc_flags_train[] = {
    /* ---- training ---- */
    {.name = "--micro-batch-size", TRAIN, INT, FIELD(micro_batch_size), GE(1), IMPLEMENTED,
     .help = "Batch size per model instance (local batch size). Global batch size is local batch "
             "size times data parallel size times number of micro batches."},
    {.name = "--batch-size", TRAIN, INT,
     DEPRECATED("--batch-size argument is no longer valid, use --micro-batch-size instead"),
     .help = "Old batch size parameter, do not use. Use --micro-batch-size instead"},
    {.name = "--global-batch-size", TRAIN, INT, FIELD(global_batch_size), GE(1), IMPLEMENTED,
     .help = "Training batch size. If set, it should be a multiple of micro-batch-size times "
             "data-parallel-size. If this value is None, then use micro-batch-size * "
             "data-parallel-size as the global batch size. This choice will result in 1 for "
             "number of micro-batches."},
    {.name = "--rampup-batch-size", TRAIN, INT_LIST(3),
     LIST_FIELD(rampup_batch_size, n_rampup_batch_size),
     IMPLEMENTED_NOTE("core_v0.15.0's ramp (Megatron main ignores the flag); needs "
                      "--train-samples; ignored with --step-batch-size-schedule, as in main"),
     .help = "Batch size ramp up with the following values: --rampup-batch-size <start batch "
             "size> <batch size increment> <ramp-up samples>"},
    {.name = "--step-batch-size-schedule", TRAIN, STRING, PENDING_FIELD(step_batch_size_schedule),
     IMPLEMENTED_NOTE("Megatron main's: one word (quote it), thresholds in tokens; not with "
                      "--global-batch-size; --rampup-batch-size is then ignored, as in main"),
     .help = "Step-wise batch size schedule in format \"THRESHOLD:BS THRESHOLD:BS ...\"."},
    {.name = "--decrease-batch-size-if-needed", TRAIN, TRUE_IF_GIVEN,
     TODO("shrinking the batch when ranks are lost"),
     .help = "If set, decrease batch size if microbatch_size * dp_size does not divide "
             "batch_size."},
    {.name = "--recompute-activations", TRAIN, TRUE_IF_GIVEN, FIELD(recompute_activations),
     IMPLEMENTED_NOTE("means --recompute-granularity selective"),
     .help = "recompute activation to allow for training with larger models, sequences, and "
             "batch sizes."},
    {.name = "--recompute-granularity", TRAIN, CHOICE("full", "selective"),
     FIELD(recompute_granularity), IMPLEMENTED,
     .help = "Checkpoint activations to allow for training with larger models, sequences, and "
             "batch sizes. It is supported at two granularities 1) full: whole transformer layer "
             "is recomputed, 2) selective: submodules set in --recompute-modules are recomputed, "
             "default is core_attn."},
    {.name = "--recompute-method", TRAIN, CHOICE("uniform", "block"), FIELD(recompute_method),
     IMPLEMENTED,
     .help = "1) uniform: uniformly divide the total number of Transformer layers and recompute "
             "the input activation of each divided chunk at specified granularity, 2) recompute "
             "the input activations of only a set number of individual Transformer layers per "
             "pipeline stage and do the rest without any recomputing at specified granularity"},
    {.name = "--recompute-num-layers", TRAIN, INT, GE(1), FIELD(recompute_num_layers), IMPLEMENTED,
     .help = "1) uniform: the number of Transformer layers in each uniformly divided recompute "
             "unit, 2) block: the number of individual Transformer layers to recompute within "
             "each pipeline stage."},
    {.name = "--recompute-modules", TRAIN, LIST(0), LIST_FIELD(recompute_modules, n_recompute_modules),
     IMPLEMENTED_NOTE("core_attn; the other modules are not implemented yet (an error)"),
     .help = "The submodules to recompute. choices: \"core_attn\", \"moe_act\", \"layernorm\", "
             "\"mla_up_proj\", \"mlp\", \"moe\", \"shared_experts\". default: [\"core_attn\"]."},
    {.name = "--distribute-saved-activations", TRAIN, TRUE_IF_GIVEN,
     TODO("activation recomputation"),
     .help = "If set, distribute recomputed activations across model parallel group."},
    {.name = "--no-check-for-nan-in-loss-and-grad", TRAIN, FALSE_IF_GIVEN,
     FIELD(check_for_nan_in_loss_and_grad), IMPLEMENTED,
     .help = "Check for NaNs in loss and grad"},
    {.name = "--check-for-nan-in-loss-and-grad", TRAIN, TRUE_IF_GIVEN,
     FIELD(check_for_nan_in_loss_and_grad), .def = "True",
     IMPLEMENTED_NOTE("already the default; Megatron has only the --no- form, megatron-c takes "
                      "both"),
     .help = "Check for NaNs in loss and grad (the default)."},
    {.name = "--rerun-mode", TRAIN, CHOICE("disabled", "validate_results", "report_stats"),
     .def = "disabled", FIELD(rerun_mode),
     IMPLEMENTED_NOTE("Megatron's rerun state machine (train/rerun.h); megatron-c's default is "
                      "disabled (Megatron's is validate_results, which does not check the first "
                      "iteration's loss); report_stats is Megatron's report_determinism_stats "
                      "mode, which Megatron main itself cannot start (RerunMode('report_stats') "
                      "raises)"),
     .help = "Use re-run engine to validate results (default) or to emit stats on variability of "
             "computations due to non-deterministic algorithms."},
    {.name = "--check-for-spiky-loss", TRAIN, TRUE_IF_GIVEN, FIELD(check_for_spiky_loss),
     IMPLEMENTED_NOTE("a microbatch loss 10x the largest of the first 100 (train/rerun.h): "
                      "re-run with --rerun-mode validate_results, a warning when disabled"),
     .help = "Check for spiky loss"},
    {.name = "--check-for-large-grads", TRAIN, TRUE_IF_GIVEN, TODO("the rerun state machine"),
     .help = "Check for unexpectedly large grads"},
    {.name = "--train-iters", TRAIN, INT64, FIELD(train_iters), GE(1), IMPLEMENTED,
     .help = "Total number of iterations to train over all training runs. Note that either "
             "train-iters or train-samples should be provided."},
    {.name = "--train-samples", TRAIN, INT64, FIELD(train_samples), GE(1), IMPLEMENTED,
     .help = "Total number of samples to train over all training runs. Note that either "
             "train-iters or train-samples should be provided."},
    {.name = "--exit-interval", TRAIN, INT64, FIELD(exit_interval), GE(0), IMPLEMENTED,
     .help = "Exit the program after the iteration is divisible by this value."},
    {.name = "--exit-duration-in-mins", TRAIN, FLOAT, FIELD(exit_duration_in_mins), GE(0),
     IMPLEMENTED_NOTE("megatron-c also accepts fractions of a minute"),
     .help = "Exit the program after this many minutes."},
    {.name = "--exit-signal-handler", TRAIN, TRUE_IF_GIVEN, FIELD(exit_signal_handler),
     IMPLEMENTED,
     .help = "Dynamically save the checkpoint and shutdown the training if SIGTERM is received"},
    {.name = "--exit-signal", TRAIN,
     CHOICE("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGXCPU",
            "SIGPWR"),
     .def = "SIGTERM", FIELD(exit_signal),
     IMPLEMENTED_NOTE("the signals that ask a job to stop; Megatron lists every signal, but "
                      "catching SIGKILL or SIGSTOP fails"),
     .help = "Signal for the signal handler to detect."},
    {.name = "--exit-signal-handler-for-dataloader", TRAIN, TRUE_IF_GIVEN,
     NOOP("megatron-c has no data-loader worker processes"),
     .help = "Use signal handler for dataloader workers"},
    {.name = "--no-masked-softmax-fusion", TRAIN, FALSE_IF_GIVEN,
     NOOP("chooses a PyTorch kernel; the math is the same"),
     .help = "Disable fusion of query_key_value scaling, masking, and softmax."},
    {.name = "--no-bias-gelu-fusion", TRAIN, FALSE_IF_GIVEN, FIELD(bias_gelu_fusion),
     IMPLEMENTED_NOTE("changes the math as in Megatron-Core: the fused kernel is the tanh GeLU, "
                      "the unfused path the exact erf GeLU"),
     .help = "Disable bias and gelu fusion."},
    {.name = "--no-bias-swiglu-fusion", TRAIN, FALSE_IF_GIVEN,
     NOOP("chooses a PyTorch kernel; the math is the same"),
     .help = "Disable bias and swiglu fusion, the fusion is available only when using "
             "megatron-core."},
    {.name = "--no-bias-dropout-fusion", TRAIN, FALSE_IF_GIVEN,
     NOOP("chooses a PyTorch kernel; the math is the same"),
     .help = "Disable bias and dropout fusion."},
    {.name = "--no-rope-fusion", TRAIN, FALSE_IF_GIVEN,
     NOOP("chooses a PyTorch kernel; the math is the same"),
     .help = "Disable rope fusion, the fusion is available only when using megatron-core."},
    {.name = "--cross-entropy-loss-fusion", TRAIN, TRUE_IF_GIVEN,
     NOOP("chooses a PyTorch kernel; the math is the same"),
     .help = "Enabled fusion of cross entropy loss calculation."},
    {.name = "--cross-entropy-fusion-impl", TRAIN, CHOICE("native", "te"), .def = "native",
     NOOP("chooses a PyTorch kernel; the math is the same"),
     .help = "Implementation of cross entropy loss calculation."},
    {.name = "--use-flash-attn", TRAIN, TRUE_IF_GIVEN,
     NOOP("chooses a PyTorch kernel; the math is the same"),
     .help = "use FlashAttention implementation of attention. https://arxiv.org/abs/2205.14135"},
    {.name = "--disable-bias-linear", TRAIN, FALSE_IF_GIVEN, FIELD(add_bias_linear), IMPLEMENTED,
     .help = "Disable bias in the linear layers"},
    {.name = "--add-qkv-bias", TRAIN, TRUE_IF_GIVEN, FIELD(add_qkv_bias),
     IMPLEMENTED,
     .help = "Enable bias only in the QKV linear layers"},
    {.name = "--optimizer", TRAIN,
     CHOICE("adam", "sgd", "muon", "dist_muon", "lion", "soap", "adaptive_muon"), FIELD(optimizer),
     .def = "adam", ONLY("sgd, dist_muon, lion, soap and adaptive_muon are not implemented yet", "adam", "muon"),
     .help = "Optimizer function. Note: dist_muon is deprecated; use --optimizer muon with "
             "--use-distributed-optimizer instead."},
    {.name = "--no-async-tensor-model-parallel-allreduce", TRAIN, FALSE_IF_GIVEN,
     NOOP("deprecated; Megatron ignores it too"), .help = "DEPRECATED. This flag is ignored."},
    {.name = "--no-persist-layer-norm", TRAIN, TRUE_IF_GIVEN,
     NOOP("chooses a LayerNorm kernel; the math is the same"),
     .help = "Disable using persistent fused layer norm kernel. This kernel supports only a set "
             "of hidden sizes. Please check persist_ln_hidden_sizes if your hidden size is "
             "supported."},
    {.name = "--sequence-parallel", TRAIN, TRUE_IF_GIVEN, FIELD(sequence_parallel),
     IMPLEMENTED_NOTE("off at tensor-model-parallel size 1, as in Megatron"),
     .help = "Enable sequence parallel optimization."},
    {.name = "--no-gradient-accumulation-fusion", TRAIN, FALSE_IF_GIVEN,
     FIELD(gradient_accumulation_fusion),
     NOOP("chooses a weight-gradient kernel; the math is the same (--defer-embedding-wgrad-"
          "compute needs the fusion, as in Megatron)"),
     .help = "Disable fusing gradient accumulation to weight gradient computation of linear "
             "layers"},
    {.name = "--use-mcore-models", TRAIN, TRUE_IF_GIVEN,
     NOOP("deprecated; Megatron-Core models are the default and megatron-c's model"),
     .help = "DEPRECATED. Use the implementation from megatron core. Now ignored and mcore models "
             "are the default, use --use-legacy-models to not use core models."},
    {.name = "--use-legacy-models", TRAIN, TRUE_IF_GIVEN, TODO("the legacy (non-MCore) models"),
     .help = "Use the legacy Megatron models, not Megatron-Core models."},
    {.name = "--manual-gc", TRAIN, TRUE_IF_GIVEN, NOOP("Python garbage collection"),
     .help = "Disable the threshold-based default garbage collector and trigger the garbage "
             "collection manually."},
    {.name = "--manual-gc-interval", TRAIN, INT, .def = "0", GE(0),
     NOOP("Python garbage collection"),
     .help = "Training step interval to trigger manual garbage collection."},
    {.name = "--no-manual-gc-eval", TRAIN, FALSE_IF_GIVEN, NOOP("Python garbage collection"),
     .help = "When using manual garbage collection, disable garbage collection at the start and "
             "the end of each evaluation run."},
    {.name = "--tp-comm-overlap", TRAIN, TRUE_IF_GIVEN, FIELD(tp_comm_overlap),
     IMPLEMENTED_NOTE("needs --sequence-parallel (and tp > 1), as in Megatron: the all-gather "
                      "before linear_qkv/linear_fc1 and the reduce-scatter after "
                      "linear_proj/linear_fc2 in 4 chunks beside their GEMMs (Transformer "
                      "Engine's default num_splits), the backward's bulk overlaps beside the "
                      "input- and weight-gradient GEMMs, through the comm interface; the "
                      "same numbers up to the GEMMs' rounding"),
     .help = "Enables the overlap of Tensor parallel communication and GEMM kernels."},
    {.name = "--use-cpu-initialization", TRAIN, TRUE_IF_GIVEN,
     NOOP("megatron-c's initialisation is the same wherever it runs (DESIGN decision 6)"),
     .help = "If set, initialize weights on the CPU. This eliminates init differences based on "
             "tensor parallelism."},
    {.name = "--empty-unused-memory-level", TRAIN, INT, .def = "0", BETWEEN(0, 2),
     NOOP("PyTorch's caching allocator; megatron-c allocates once at start-up"),
     .help = "Call torch.cuda.empty_cache() each iteration (training and eval), to reduce "
             "fragmentation. 0=off, 1=moderate, 2=aggressive."},
    {.name = "--deterministic-mode", TRAIN, TRUE_IF_GIVEN, NOOP("megatron-c is always deterministic"),
     .help = "Choose code that has deterministic execution. This usually means slower execution, "
             "but is good for debugging and testing."},
    {.name = "--check-weight-hash-across-dp-replicas-interval", TRAIN, INT, GE(1),
     FIELD(check_weight_hash_across_dp_replicas_interval),
     IMPLEMENTED_NOTE("before training and after every N iterations each rank hashes its "
                      "parameters (SHA-256 per tensor; Megatron SHA-1) and compares them with "
                      "every replica of its data-parallel group; a mismatch names the tensor and "
                      "stops the job with Megatron's message"),
     .help = "Interval to check weight hashes are same across DP replicas. If not specified, "
             "weight hashes not checked."},
    {.name = "--calculate-per-token-loss", TRAIN, TRUE_IF_GIVEN, FIELD(calculate_per_token_loss),
     IMPLEMENTED,
     .help = "Scale cross entropy loss by the number of non-padded tokens in the global batch, "
             "versus the default behavior of assuming all tokens are non-padded."},
    {.name = "--train-sync-interval", TRAIN, INT, GE(1),
     NOOP("PyTorch's asynchronous CPU/GPU execution"),
     .help = "Training CPU-GPU synchronization interval, to ensure that CPU is not running too far "
             "ahead of GPU."},
    {.name = "--profile", TRAIN, TRUE_IF_GIVEN, FIELD(profile),
     IMPLEMENTED_NOTE("the CUDA backend calls cudaProfilerStart before iteration "
                      "--profile-step-start + 1 and cudaProfilerStop after iteration "
                      "--profile-step-end on the ranks of --profile-ranks, with NVTX ranges around "
                      "forward-backward and the optimizer (nsys --capture-range=cudaProfilerApi); "
                      "the CPU backend has no CUDA profiler and says so in one line"),
     .help = "Enable nsys profiling. When using this option, nsys options should be specified in "
             "commandline. An example nsys commandline is `nsys profile -s none -t nvtx,cuda -o "
             "<path/to/output_file> --force-overwrite true --capture-range=cudaProfilerApi "
             "--capture-range-end=stop`."},
    {.name = "--profile-step-start", TRAIN, INT, .def = "10", FIELD(profile_step_start),
     IMPLEMENTED, .help = "Global step to start profiling."},
    {.name = "--profile-step-end", TRAIN, INT, .def = "12", FIELD(profile_step_end), IMPLEMENTED,
     .help = "Global step to stop profiling."},
    {.name = "--profile-ranks", TRAIN, INT_LIST(-1), LIST_FIELD(profile_ranks, n_profile_ranks),
     .def = "0", IMPLEMENTED, .help = "Global ranks to profile."},
    {.name = "--use-pytorch-profiler", TRAIN, TRUE_IF_GIVEN,
     TODO("torch.profiler's TensorBoard traces are PyTorch's; megatron-c has no PyTorch: use "
          "--profile under nsys"),
     .help = "Use the built-in pytorch profiler. Useful if you wish to view profiles in "
             "tensorboard."},
    {.name = "--iterations-to-skip", TRAIN, INT_LIST(-1), TODO("skipping iterations"),
     .help = "List of iterations to skip, empty by default."},

    /* ---- learning rate ---- */
    {.name = "--lr", LR, FLOAT, FIELD(lr), SET_FLAG(lr_set), GE(0), IMPLEMENTED,
     .help = "Initial learning rate. Depending on decay style and initial warmup, the learning "
             "rate at each iteration would be different."},
    {.name = "--lr-decay-style", LR,
     CHOICE("constant", "linear", "cosine", "inverse-square-root", "WSD"), FIELD(lr_decay_style),
     .def = "linear",
     ONLY("WSD is not implemented yet", "constant", "linear", "cosine", "inverse-square-root"),
     .help = "Learning rate decay function."},
    {.name = "--lr-wsd-decay-style", LR, CHOICE("exponential", "linear", "cosine", "minus_sqrt"),
     .def = "exponential", NOOP("only used with --lr-decay-style WSD (not implemented yet)"),
     .help = "Decay style for the annealing phase of WSD"},
    {.name = "--lr-decay-iters", LR, INT64, FIELD(lr_decay_iters), GE(1), IMPLEMENTED,
     .help = "number of iterations to decay learning rate over, If None defaults to "
             "`--train-iters`"},
    {.name = "--lr-decay-samples", LR, INT64, FIELD(lr_decay_samples), GE(1), IMPLEMENTED,
     .help = "number of samples to decay learning rate over, If None defaults to "
             "`--train-samples`"},
    {.name = "--lr-wsd-decay-samples", LR, INT64, GE(1),
     NOOP("only used with --lr-decay-style WSD (not implemented yet)"),
     .help = "number of samples for the annealing phase in the wsd schedule"},
    {.name = "--lr-wsd-decay-iters", LR, INT64, GE(1),
     NOOP("only used with --lr-decay-style WSD (not implemented yet)"),
     .help = "number of iterations for the annealing phase in the wsd schedule"},
    {.name = "--lr-warmup-fraction", LR, FLOAT, FIELD(lr_warmup_fraction), .none = "-1",
     BETWEEN(0, 1), IMPLEMENTED,
     .help = "fraction of lr-warmup-(iters/samples) to use for warmup (as a float)"},
    {.name = "--lr-warmup-iters", LR, INT64, FIELD(lr_warmup_iters), .def = "0", GE(0),
     IMPLEMENTED, .help = "number of iterations to linearly warmup learning rate over."},
    {.name = "--lr-warmup-samples", LR, INT64, FIELD(lr_warmup_samples), .def = "0", GE(0),
     IMPLEMENTED, .help = "number of samples to linearly warmup learning rate over."},
    {.name = "--lr-warmup-init", LR, FLOAT, FIELD(lr_warmup_init), .def = "0.0", GE(0), IMPLEMENTED,
     .help = "Initial value for learning rate warmup. The scheduler starts warmup from this "
             "value."},
    {.name = "--warmup", LR, INT,
     DEPRECATED("--warmup argument is no longer valid, use --lr-warmup-fraction instead"),
     .help = "Old lr warmup argument, do not use. Use one of the --lr-warmup-* arguments above"},
    {.name = "--min-lr", LR, FLOAT, FIELD(min_lr), .def = "0.0", GE(0), IMPLEMENTED,
     .help = "Minimum value for learning rate. The scheduler clip values below this threshold."},
    {.name = "--override-opt-param-scheduler", .alias = "--override-opt_param-scheduler", LR,
     TRUE_IF_GIVEN, FIELD(override_opt_param_scheduler), IMPLEMENTED,
     .help = "Reset the values of the scheduler (learning rate, warmup iterations, minimum "
             "learning rate, maximum number of iterations, and decay style from input arguments "
             "and ignore values from checkpoints."},
    {.name = "--use-checkpoint-opt-param-scheduler", .alias = "--use-checkpoint-opt_param-scheduler",
     LR, TRUE_IF_GIVEN, FIELD(use_checkpoint_opt_param_scheduler), IMPLEMENTED,
     .help = "Use checkpoint to set the values of the scheduler (learning rate, warmup "
             "iterations, minimum learning rate, maximum number of iterations, and decay style "
             "from checkpoint and ignore input arguments."},
    {.name = "--decoupled-lr", LR, FLOAT, FIELD(decoupled_lr), .none = "-1", GE(0),
     IMPLEMENTED_NOTE("word embeddings and output layer"),
     .help = "Separate learning rate for the input and output layer"},
    {.name = "--decoupled-min-lr", LR, FLOAT, FIELD(decoupled_min_lr), .none = "-1",
     GE(0), IMPLEMENTED,
     .help = "Minimum value for learning rate for the input and output layer. The scheduler clip "
             "values below this threshold"},

    /* ---- checkpointing ---- */
    {.name = "--save", CKPT, STRING, FIELD(save), IMPLEMENTED_NOTE("the legacy torch layout, "
     "written under a temporary name and renamed into place when every rank is done"),
     .help = "Output directory to save checkpoints to."},
    {.name = "--save-interval", .alias = "--persistent-save-interval", CKPT, INT, GE(1),
     FIELD(save_interval), IMPLEMENTED,
     .help = "Number of iterations between persistent checkpoint saves."},
    {.name = "--save-retain-interval", CKPT, INT, GE(1), FIELD(save_retain_interval),
     IMPLEMENTED_NOTE("after each save, rank 0 deletes the previous checkpoint the tracker named "
                      "unless its iteration is a multiple of the interval (or a symbolic link), "
                      "as Megatron's save_checkpoint (synchronously; Megatron in a thread)"),
     .help = "Number of iterations between retained checkpoints (other checkpoints _except the "
             "last checkpoint_ are automatically deleted)."},
    {.name = "--no-save-optim", CKPT, TRUE_IF_GIVEN, FIELD(no_save_optim), IMPLEMENTED,
     .help = "Do not save current optimizer."},
    {.name = "--no-save-rng", CKPT, TRUE_IF_GIVEN, FIELD(no_save_rng), IMPLEMENTED,
     .help = "Do not save current rng state."},
    {.name = "--load", CKPT, STRING, FIELD(load), IMPLEMENTED_NOTE("the legacy torch layout, "
     "megatron-c's or Megatron-LM's (local or Transformer Engine names; fp32, 16-bit with fp32 "
     "master params, or distributed optimizer), saved with the same tensor and pipeline (and "
     "virtual pipeline) layout; the data-parallel size may differ; other layouts: megatron-c "
     "convert-checkpoint"),
     .help = "Directory containing a model checkpoint."},
    {.name = "--no-load-optim", CKPT, TRUE_IF_GIVEN, FIELD(no_load_optim), IMPLEMENTED,
     .help = "Do not load optimizer when loading checkpoint."},
    {.name = "--no-load-rng", CKPT, TRUE_IF_GIVEN, FIELD(no_load_rng),
     IMPLEMENTED_NOTE("megatron-c's only random state is the dropout seed, which it then "
                      "takes from --seed instead of the checkpoint; Megatron-LM's generator "
                      "states are never used (a warning says so)"),
     .help = "Do not load rng state when loading checkpoint."},
    {.name = "--non-persistent-save-interval", CKPT, INT, GE(1),
     TODO("non-persistent checkpoints: Megatron's global type is a second tree under "
          "<save>/non_persistent keeping only the latest, its local type needs "
          "nvidia_resiliency_ext; megatron-c writes persistent checkpoints only"),
     .help = "Number of iterations between non-persistent saves."},
    {.name = "--non-persistent-ckpt-type", CKPT, CHOICE("global", "local", "in_memory"),
     TODO("non-persistent checkpoints (see --non-persistent-save-interval)"),
     .help = "Type of non-persistent model checkpoints. \"global\" - Saved as a standard "
             "checkpoint (e.g., on Lustre) with old checkpoints being removed. \"local\" - Each "
             "rank saves a portion of the checkpoint locally (e.g., on SSD/ramdisk). None - No "
             "non-persistent checkpointing (default option)."},
    {.name = "--non-persistent-global-ckpt-dir", CKPT, STRING,
     TODO("non-persistent checkpoints (see --non-persistent-save-interval)"),
     .help = "Directory containing global non-persistent model checkpoints."},
    {.name = "--non-persistent-local-ckpt-dir", CKPT, STRING,
     TODO("non-persistent checkpoints (see --non-persistent-save-interval)"),
     .help = "Directory containing local non-persistent model checkpoints."},
    {.name = "--non-persistent-local-ckpt-algo", CKPT, CHOICE("fully_parallel", "atomic"),
     .def = "fully_parallel",
     TODO("non-persistent checkpoints (see --non-persistent-save-interval)"),
     .help = "Algorithm for local non-persistent checkpointing."},
    {.name = "--finetune", CKPT, TRUE_IF_GIVEN, FIELD(finetune), IMPLEMENTED,
     .help = "Load model for finetuning. Do not load optimizer or rng state from checkpoint and "
             "set iteration to 0. Assumed when loading a release checkpoint."},
    {.name = "--pretrained-checkpoint", CKPT, STRING, TODO("a separate pretrained checkpoint"),
     .help = "Directory containing a pretrained model checkpoint for finetuning."},
    {.name = "--ckpt-step", CKPT, INT, GE(0), FIELD(ckpt_step), IMPLEMENTED,
     .help = "Checkpoint step to load model from."},
    {.name = "--no-initialization", CKPT, FALSE_IF_GIVEN,
     NOOP("megatron-c's initialisation is cheap and a loaded checkpoint overwrites it"),
     .help = "Do not perform initialization when building model, can reduce startup time when "
             "definitely loading from a checkpoint"},
    {.name = "--use-checkpoint-args", CKPT, TRUE_IF_GIVEN, FIELD(use_checkpoint_args),
     IMPLEMENTED_NOTE("the model arguments of Megatron's load_args_from_checkpoint, read from "
                      "--load's tracker iteration (or --ckpt-step) before validation"),
     .help = "Override model-related command-line arguments with arguments from checkpoint"},
    {.name = "--use-mp-args-from-checkpoint-args", CKPT, TRUE_IF_GIVEN,
     FIELD(use_mp_args_from_checkpoint_args), IMPLEMENTED,
     .help = "Copy model parallelism command-line arguments from checkpoint"},
    {.name = "--no-use-tokenizer-model-from-checkpoint-args", CKPT, FALSE_IF_GIVEN,
     FIELD(use_tokenizer_model_from_checkpoint_args), IMPLEMENTED,
     .help = "If set, do not use tokenizer model path from checkpoint"},
    {.name = "--exit-on-missing-checkpoint", CKPT, TRUE_IF_GIVEN, FIELD(exit_on_missing_checkpoint),
     IMPLEMENTED,
     .help = "If '--load' is set, but checkpoint is not found (e.g., path typo), then exit "
             "instead of random initialization."},
    {.name = "--use-dist-ckpt", CKPT, TRUE_IF_GIVEN,
     NOOP("deprecated; Megatron ignores it too (see --ckpt-format)"),
     .help = "Deprecated: see --ckpt-format."},
    {.name = "--auto-detect-ckpt-format", CKPT, TRUE_IF_GIVEN,
     NOOP("megatron-c detects the format of every --load checkpoint (legacy torch or torch_dist), "
          "as Megatron-LM's load_checkpoint does; saves follow --ckpt-format"),
     .help = "Determine if the checkpoint format is in legacy or distributed format."},
    {.name = "--dist-ckpt-format", CKPT, STRING,
     NOOP("deprecated; Megatron ignores it too (see --ckpt-format)"),
     .help = "Deprecated: see --ckpt-format."},
    {.name = "--ckpt-format", CKPT, CHOICE("torch", "torch_dist", "torch_dcp", "fsdp_dtensor"),
     .def = "torch", FIELD(ckpt_format),
     ONLY("megatron-c writes Megatron's legacy layout (torch: iter_N/mp_rank_TT[_PPP]/"
          "model_optim_rng.pt) and its distributed one (torch_dist: PyTorch Distributed "
          "Checkpoint files, loadable at any parallel layout; ckpt/torchdist.h), and reads both",
          "torch", "torch_dist"),
     .help = "Checkpoint format to use. torch is the format used by torch.save/load. torch_dist "
             "is a megatron built-in distributed checkpointing format."},
    {.name = "--ckpt-fully-parallel-save", CKPT, TRUE_IF_GIVEN,
     NOOP("deprecated; Megatron ignores it too"),
     .help = "Deprecated: see --no-ckpt-fully-parallel-save."},
    {.name = "--no-ckpt-fully-parallel-save", CKPT, FALSE_IF_GIVEN,
     NOOP("Megatron spreads the writing of replicated torch_dist chunks over the dp ranks; "
          "megatron-c's dp rank 0 of each (tp, pp) domain writes them, the same bytes either way"),
     .help = "Disable applying full save parallelization across DP for distributed checkpoints."},
    {.name = "--dist-ckpt-workers", CKPT, INT, .def = "1", GE(1),
     NOOP("Megatron splits an asynchronous torch_dist save over this many writer processes; "
          "megatron-c writes with one writer thread per rank and the same bytes whatever the "
          "value"),
     .help = "Number of workers for distributed checkpointing. Only used for async save. If set "
             "to 1, the checkpointing is performed in a single process."},
    {.name = "--async-save", CKPT, TRUE_IF_GIVEN, FIELD(async_save),
     IMPLEMENTED_NOTE("for torch_dist and for the legacy torch layout (which Megatron refuses "
                      "to save asynchronously): a host snapshot, then a background writer; the "
                      "tree is published once every rank's files are durable (ckpt/async.h)"),
     .help = "Apply async checkpointing save. Currently works only with `torch_dist` distributed "
             "checkpoint format."},
    {.name = "--use-persistent-ckpt-worker", CKPT, TRUE_IF_GIVEN,
     NOOP("Megatron's persistent worker saves forking a process for each asynchronous save; "
          "megatron-c's --async-save writer is a thread started per save, which costs "
          "microseconds, so there is nothing to keep alive"),
     .help = "Enables a persitent checkpoint worker for async save"},
    {.name = "--ckpt-assume-constant-structure", CKPT, TRUE_IF_GIVEN,
     NOOP("Megatron uses it only for the distributed formats (cached save plans, no sharding "
          "re-validation) and local non-persistent checkpoints; the legacy torch writer has "
          "neither, in Megatron and in megatron-c"),
     .help = "If the model and optimizer state dict structure isconstant throughout a *single "
             "training job*, it allows fordifferent checkpointing performance optimizations."},
    {.name = "--ckpt-fully-parallel-load", CKPT, TRUE_IF_GIVEN,
     NOOP("Megatron reads each torch_dist chunk once per dp group and exchanges it; megatron-c's "
          "ranks each read the boxes they need straight from the files, the same state either "
          "way"),
     .help = "Apply full load parallelization across DP for distributed checkpoints."},

    /* ---- distributed ---- */
    {.name = "--tensor-model-parallel-size", DIST, INT, FIELD(tensor_model_parallel_size),
     .def = "1", GE(1), IMPLEMENTED,
     .help = "Degree of tensor model parallelism."},
    {.name = "--pipeline-model-parallel-size", DIST, INT, FIELD(pipeline_model_parallel_size),
     .def = "1", GE(1), IMPLEMENTED,
     .help = "Degree of pipeline model parallelism."},
    {.name = "--decoder-first-pipeline-num-layers", DIST, INT, GE(1),
     FIELD(decoder_first_pipeline_num_layers), IMPLEMENTED,
     .help = "The number of transformer layers on the first pipeline stage of the decoder. "
             "Default None is even split of transformer layers across all pipeline stages"},
    {.name = "--decoder-last-pipeline-num-layers", DIST, INT, GE(1),
     FIELD(decoder_last_pipeline_num_layers), IMPLEMENTED,
     .help = "The number of transformer layers on the last pipeline stage of the decoder. Default "
             "None is even split of transformer layers across all pipeline stages"},
    {.name = "--pipeline-model-parallel-layout", DIST, STRING, TODO("custom pipeline layouts"),
     .help = "A string that describes a custom pipeline model parallel layout. e.g., "
             "\"E|(t|)*3,m|m||L\". E, L, t, m denotes embedding, loss, transformer decoder layer, "
             "and mtp layer, respectively. Stages are split by \"|\". Replicated stages or layers "
             "can be described with multiplication. Commas can be used cosmetically. Default None "
             "is not using this argument to set the layout."},
    {.name = "--model-parallel-size", DIST, INT,
     DEPRECATED("--model-parallel-size is no longer valid, use --tensor-model-parallel-size "
                "instead"),
     .help = "Old model parallel argument, do not use. Use --tensor-model-parallel-size instead."},
    {.name = "--num-layers-per-virtual-pipeline-stage", DIST, INT, GE(1),
     FIELD(num_layers_per_virtual_pipeline_stage),
     IMPLEMENTED_NOTE("virtual pipeline size = (--num-layers / pipeline size) / this; not with "
                      "uneven first/last stages"),
     .help = "Number of layers per virtual pipeline stage"},
    {.name = "--num-virtual-stages-per-pipeline-rank", DIST, INT, GE(1),
     FIELD(num_virtual_stages_per_pipeline_rank), IMPLEMENTED,
     .help = "Number of virtual pipeline stages per pipeline parallelism rank"},
    {.name = "--microbatch-group-size-per-virtual-pipeline-stage", DIST, INT, GE(1),
     FIELD(microbatch_group_size_per_vp_stage),
     IMPLEMENTED_NOTE("None means the pipeline size; only the interleaved schedule uses it"),
     .help = "Number of contiguous microbatches per virtual pipeline stage"},
    {.name = "--no-overlap-p2p-communication", DIST, FALSE_IF_GIVEN, FIELD(overlap_p2p_comm),
     IMPLEMENTED_NOTE("overlap is on by default with virtual pipeline stages and always off "
                      "without them, as in Megatron"),
     .help = "overlap pipeline parallel communication with forward and backward chunks in 1F1B"},
    {.name = "--overlap-p2p-communication-warmup-flush", DIST, TRUE_IF_GIVEN,
     FIELD(overlap_p2p_comm_warmup_flush),
     IMPLEMENTED_NOTE("the interleaved schedule's warmup and flush p2p batches are asynchronous "
                      "too; needs overlapped p2p (virtual pipeline stages without "
                      "--no-overlap-p2p-communication)"),
     .help = "if set, overlap pipeline parallel communication in warmup and flush"},
    {.name = "--defer-embedding-wgrad-compute", DIST, TRUE_IF_GIVEN,
     FIELD(defer_embedding_wgrad_compute),
     IMPLEMENTED_NOTE("the output layer's weight-gradient GEMMs of the last stage wait for the "
                      "pipeline flush (their inputs and output gradients are kept until then); "
                      "needs pipeline parallelism and gradient accumulation fusion"),
     .help = "If set, defers the vocabulary projection linear layer weight gradient compute to "
             "pipeline flush."},
    {.name = "--wgrad-deferral-limit", DIST, INT, .def = "0",
     FIELD(wgrad_deferral_limit),
     IMPLEMENTED_NOTE("the first N microbatches' output-layer weight gradients are deferred (0: "
                      "all); ignored without --defer-embedding-wgrad-compute, as in Megatron"),
     .help = "Number of micro-batches for which weight gradient computation of vocabulary "
             "projection is deferred, defaults to 0 which means all the micro-batches are "
             "deferred. Invalid if `defer-embedding-wgrad-compute` is not set"},
    {.name = "--use-ring-exchange-p2p", DIST, TRUE_IF_GIVEN,
     NOOP("chooses the p2p transport (a custom PyTorch build); the tensors exchanged are the "
          "same"),
     .help = "If set, use custom-built ring exchange for p2p communications. Note that this "
             "option will require a custom built image that support ring-exchange p2p."},
    {.name = "--no-scatter-gather-tensors-in-pipeline", DIST, FALSE_IF_GIVEN,
     NOOP("Megatron-Core ignores it too (removed on main)"),
     .help = "If not set, use scatter/gather to optimize communication of tensors in pipeline."},
    {.name = "--distributed-backend", DIST, CHOICE("nccl", "mpi", "gloo"),
     FIELD(distributed_backend), .def = "nccl",
     ONLY("nccl: NCCL on the cuda backend, MPI on the cpu backend (its tensors are in host memory); "
          "mpi: MPI, with the cuda backend's device buffers staged through pinned host memory (ranks "
          "may then share a GPU); gloo is not implemented", "nccl", "mpi"),
     .help = "Which backend to use for distributed training."},
    {.name = "--distributed-timeout-minutes", DIST, INT, .def = "10", GE(1),
     FIELD(distributed_timeout_minutes),
     IMPLEMENTED_NOTE("bounds the start-up exchange and every wait for a collective; a rank that "
                      "dies on the node is noticed "
                      "within about a second"),
     .help = "Default timeout minutes for torch.distributed."},
    {.name = "--overlap-grad-reduce", DIST, TRUE_IF_GIVEN, FIELD(overlap_grad_reduce), IMPLEMENTED,
     .help = "If set, overlap DDP grad reduce."},
    {.name = "--no-align-grad-reduce", DIST, FALSE_IF_GIVEN,
     NOOP("when each pipeline stage starts its gradient reduction; the gradients are the same"),
     .help = "If not set, all PP stages will launch gradient reduces simultaneously. Otherwise, "
             "each PP stage will independently launch as needed."},
    {.name = "--ddp-num-buckets", DIST, INT, GE(1), FIELD(ddp_num_buckets), IMPLEMENTED,
     .help = "Number of buckets for data-parallel communication"},
    {.name = "--ddp-bucket-size", DIST, INT64, GE(1), FIELD(ddp_bucket_size), IMPLEMENTED,
     .help = "Bucket size for data-parallel communication"},
    {.name = "--ddp-pad-buckets-for-high-nccl-busbw", DIST, TRUE_IF_GIVEN,
     FIELD(ddp_pad_buckets_for_high_nccl_busbw), IMPLEMENTED,
     .help = "If set, make sure the bucket size is divisible by a large power of 2 (2^16) to "
             "ensure NCCL collectives have high bus bandwidth at large DP counts."},
    {.name = "--ddp-average-in-collective", DIST, TRUE_IF_GIVEN, FIELD(ddp_average_in_collective),
     IMPLEMENTED_NOTE("NCCL averages in the collective (ncclAvg); MPI has no average: there the "
                      "summed gradients are divided by dp after the collective"),
     .help = "If set, average directly in data-parallel communication collective."},
    {.name = "--overlap-param-gather", DIST, TRUE_IF_GIVEN, FIELD(overlap_param_gather), IMPLEMENTED,
     .help = "If set, overlap param all-gather in distributed optimizer."},
    {.name = "--overlap-param-gather-with-optimizer-step", DIST, TRUE_IF_GIVEN,
     FIELD(overlap_param_gather_with_optimizer_step),
     IMPLEMENTED_NOTE("the first model chunk's parameter all-gather starts between its Adam step "
                      "and the other chunks' (one bucket per chunk, as Megatron's buffers); "
                      "needs the distributed optimizer, --overlap-param-gather, the interleaved "
                      "schedule and --ckpt-format torch"),
     .help = "If set, overlap param all-gather of first bucket with optimizer step."},
    {.name = "--no-align-param-gather", DIST, FALSE_IF_GIVEN,
     NOOP("when each pipeline stage starts its parameter all-gather; the parameters are the "
          "same (Megatron turns it off without virtual pipeline stages)"),
     .help = "If not set, all PP stages will launch param all-gathers simultaneously. Otherwise, "
             "each PP stage will independently launch as needed."},
    {.name = "--local-rank", DIST, INT, .def = "0", GE(0),
     NOOP("megatron-c takes the local rank from the launcher (PMIx); Megatron's default is "
          "$LOCAL_RANK"),
     .help = "local rank passed from distributed launcher."},
    {.name = "--account-for-embedding-in-pipeline-split", DIST, TRUE_IF_GIVEN,
     FIELD(account_for_embedding_in_pipeline_split), IMPLEMENTED,
     .help = "If set, *input* embedding layer will be treated as a standard transformer layer in "
             "the context of partition and placement for pipeline parallelism."},
    {.name = "--account-for-loss-in-pipeline-split", DIST, TRUE_IF_GIVEN,
     FIELD(account_for_loss_in_pipeline_split), IMPLEMENTED,
     .help = "If set, loss layer will be treated as a standard transformer layer in the context "
             "of partition and placement for pipeline parallelism."},
    {.name = "--use-distributed-optimizer", DIST, TRUE_IF_GIVEN, FIELD(use_distributed_optimizer),
     IMPLEMENTED, .help = "Use distributed optimizer."},
    {.name = "--num-distributed-optimizer-instances", DIST, INT,
     FIELD(num_distributed_optimizer_instances), .def = "1", GE(1),
     IMPLEMENTED_NOTE("sharded over dp x cp / N ranks (expert buckets over edp / N), "
                      "gradients reduce-scattered within an instance and all-reduced across "
                      "instances"),
     .help = "Number of Distributed Optimizer copies across Data Parallel domain."},
    {.name = "--use-torch-fsdp2", DIST, TRUE_IF_GIVEN, TODO("FSDP"),
     .help = "Use the torch FSDP2 implementation."},
    {.name = "--use-megatron-fsdp", DIST, TRUE_IF_GIVEN, TODO("FSDP"),
     .help = "Use the Megatron FSDP code path in DDP."},
    {.name = "--context-parallel-size", DIST, INT, FIELD(context_parallel_size), .def = "1", GE(1),
     IMPLEMENTED, .help = "Degree of context parallelism."},
    {.name = "--cp-comm-type", DIST, LIST(-1), LIST_FIELD(cp_comm_type, n_cp_comm_type),
     .def = "p2p",
     IMPLEMENTED_NOTE("p2p, a2a, all_gather (also spelled allgather, as Megatron's help does; "
                      "Transformer Engine takes only all_gather) and a2a+p2p, one for every layer "
                      "or one per layer (layer i takes the i-th, as Megatron main reads the list)"),
     .help = "Inter-gpu communication type for context parallelism: p2p, a2a, allgather or "
             "a2a+p2p."},
    {.name = "--hierarchical-context-parallel-sizes", DIST, INT_LIST(-1),
     LIST_FIELD(hierarchical_context_parallel_sizes, n_hierarchical_context_parallel_sizes),
     IMPLEMENTED_NOTE("two levels, as Transformer Engine's a2a+p2p takes them"),
     .help = "Degrees of the hierarchical context parallelism."},
    {.name = "--nccl-communicator-config-path", DIST, STRING,
     NOOP("tunes NCCL's thread blocks; results are the same"),
     .help = "Path to the yaml file with NCCL communicator configurations."},
    {.name = "--use-tp-pp-dp-mapping", DIST, TRUE_IF_GIVEN, FIELD(use_tp_pp_dp_mapping), IMPLEMENTED,
     .help = "If set, distributed ranks initialize order is changed from tp-cp-ep-dp-pp to "
             "tp-cp-ep-pp-dp."},

    /* ---- validation ---- */
    {.name = "--full-validation", VALID, TRUE_IF_GIVEN, TODO("validation on the whole split"),
     .help = "If set, each time validation occurs it uses the full validation dataset(s)."},
    {.name = "--multiple-validation-sets", VALID, TRUE_IF_GIVEN, TODO("several validation sets"),
     .help = "If set, multiple datasets listed in the validation split are evaluated "
             "independently with a separate loss for each dataset in the list."},
    {.name = "--eval-iters", VALID, INT, FIELD(eval_iters), .def = "100", GE(0), IMPLEMENTED,
     .help = "Number of iterations to run for evaluation validation/test for."},
    {.name = "--eval-interval", VALID, INT, FIELD(eval_interval), .def = "1000", GE(1),
     IMPLEMENTED_NOTE("default 1000 as in core_v0.15 (main's None breaks the sample counts; "
                      "MEGATRON.md section 11)"),
     .help = "Interval between running evaluation on validation set."},
    {.name = "--eval-micro-batch-size", VALID, INT, FIELD(eval_micro_batch_size), GE(1),
     IMPLEMENTED,
     .help = "Micro batch size to use during evaluation. If not set, defaults to "
             "micro_batch_size."},
    {.name = "--eval-global-batch-size", VALID, INT, FIELD(eval_global_batch_size), GE(1),
     IMPLEMENTED,
     .help = "Global batch size to use during evaluation. If not set, defaults to "
             "global_batch_size. Must be divisible by (eval_micro_batch_size * "
             "data_parallel_size)."},
    {.name = "--start-eval-at-iter", VALID, INT64, GE(0), TODO("delayed evaluation"),
     .help = "If set, evaluation will only start after this iteration number."},
    {.name = "--skip-train", VALID, TRUE_IF_GIVEN, FIELD(skip_train), IMPLEMENTED,
     .help = "If set, bypass the training loop, optionally do evaluation for validation/test, and "
             "exit."},

    /* ---- data and dataloader ---- */
    {.name = "--data-path", DATA, LIST(0), LIST_FIELD(data_path, n_data_path), IMPLEMENTED,
     .help = "The weight and prefix list for a set of train, validation, and test datasets which "
             "split according to --split. The accepted formats are: (1) a single prefix, (2) a "
             "list of weight prefix pairs e.g. weight1 prefix1 weight2 prefix2, (3) a list of "
             "prefixes e.g. prefix1 prefix2."},
    {.name = "--split", DATA, STRING, FIELD(split), IMPLEMENTED,
     .help = "Comma-separated list of proportions for training, validation, and test split. For "
             "example the split `90,5,5` will use 90% of data for training, 5% for validation and "
             "5% for test."},
    {.name = "--train-data-path", DATA, LIST(0), LIST_FIELD(train_data_path, n_train_data_path), IMPLEMENTED,
     .help = "The weight and prefix list for an independent train dataset."},
    {.name = "--valid-data-path", DATA, LIST(0), LIST_FIELD(valid_data_path, n_valid_data_path), IMPLEMENTED,
     .help = "The weight and prefix list for an independent validation dataset."},
    {.name = "--test-data-path", DATA, LIST(0), LIST_FIELD(test_data_path, n_test_data_path), IMPLEMENTED,
     .help = "The weight and prefix list for an independent test dataset."},
    {.name = "--data-args-path", DATA, STRING, TODO(DATASETS),
     .help = "Path to data-args. Instead of feeding `--data-path` with weighted dataset, we pass "
             "in a file path from which we read that argument."},
    {.name = "--per-split-data-args-path", DATA, STRING, TODO(DATASETS),
     .help = "Path to per-split-data-args. Format is a json file with `train`, `valid, `test` "
             "keys"},
    {.name = "--data-cache-path", DATA, STRING, FIELD(data_cache_path), IMPLEMENTED,
     .help = "Path to a directory to hold cached index files."},
    {.name = "--no-mmap-bin-files", DATA, FALSE_IF_GIVEN,
     NOOP("megatron-c always maps .bin files; the samples are the same"),
     .help = "Disable mmap-ing of .bin files."},
    {.name = "--mock-data", DATA, TRUE_IF_GIVEN, FIELD(mock_data),
     IMPLEMENTED_NOTE("Megatron's MockGPTDataset: 100000 documents split 1,1,1 (--split is "
                      "ignored, as by Megatron), the tokenizer's vocabulary"),
     .help = "Skip data loading and validation and opt for artificial generation of mock data "
             "when an implementation is available."},
    {.name = "--seq-length", DATA, INT, FIELD(seq_length), GE(1), IMPLEMENTED,
     .help = "Maximum sequence length to process."},
    {.name = "--encoder-seq-length", DATA, INT, GE(1), TODO("use --seq-length"),
     .help = "Maximum encoder sequence length to process. This should be exclusive of "
             "--seq-length"},
    {.name = "--num-workers", DATA, INT, .def = "2", GE(0), FIELD(num_workers),
     IMPLEMENTED_NOTE("megatron-c reads samples in the training process; the count decides "
                      "--fim-data's random streams (one per worker, as Megatron's DataLoader)"),
     .help = "Dataloader number of workers."},
    {.name = "--dataloader-type", DATA, CHOICE("single", "cyclic", "external"),
     FIELD(dataloader_type), ONLY("the cyclic and external loaders are not implemented yet", "single"),
     .help = "Single pass vs multiple pass data loader"},
    {.name = "--reset-position-ids", DATA, TRUE_IF_GIVEN, FIELD(reset_position_ids), IMPLEMENTED,
     .help = "Reset posistion ids after end-of-document token."},
    {.name = "--reset-attention-mask", DATA, TRUE_IF_GIVEN, FIELD(reset_attention_mask), IMPLEMENTED,
     .help = "Reset self attention mask after end-of-document token."},
    {.name = "--eod-mask-loss", DATA, TRUE_IF_GIVEN, FIELD(eod_mask_loss), IMPLEMENTED,
     .help = "Mask loss for the end of document tokens."},
    {.name = "--no-create-attention-mask-in-dataloader", DATA, FALSE_IF_GIVEN,
     NOOP("megatron-c applies the causal mask inside attention"),
     .help = "If set, do not create attention_masks in dataloader."},
    {.name = "--num-dataset-builder-threads", DATA, INT, .def = "1", GE(1),
     NOOP("threads for building dataset indices; results are the same"),
     .help = "Number of parallel threads per rank for dataset builder"},
    {.name = "--mid-level-dataset-surplus", DATA, FLOAT, FIELD(mid_level_dataset_surplus),
     .def = "0.005", GE(0), IMPLEMENTED,
     .help = "The sample surplus to build for the mid-level datasets(s)"},

    /* ---- tokenizer ---- */
    {.name = "--vocab-size", TOK, INT, FIELD(vocab_size), GE(1),
     IMPLEMENTED_NOTE("the vocabulary of NullTokenizer (which adds one id for eod), and of "
                      "--mock-data without tokenizer files; GPT2BPETokenizer's files size their "
                      "own, as in Megatron"),
     .help = "Size of vocab before EOD or padding."},
    {.name = "--padded-vocab-size", TOK, INT, FIELD(padded_vocab_size), GE(1), IMPLEMENTED,
     .help = "Vocabulary size of the model (padded to be divisible by tensor model parallel "
             "size). If not provided, it will be automatically calculated from vocab-size."},
    {.name = "--vocab-file", TOK, STRING, FIELD(vocab_file), IMPLEMENTED,
     .help = "Path to the vocab file."},
    {.name = "--merge-file", TOK, STRING, FIELD(merge_file), IMPLEMENTED,
     .help = "Path to the BPE merge file."},
    {.name = "--vocab-extra-ids", TOK, INT64, .def = "0", GE(0), FIELD(vocab_extra_ids),
     IMPLEMENTED_NOTE("<extra_id_N> tokens of the legacy SentencePieceTokenizer (the vocabulary "
                      "training pads; its ids with --legacy-tokenizer); no other tokenizer "
                      "megatron-c has reads it, as in Megatron"),
     .help = "Number of additional vocabulary tokens. They are used for span masking in the T5 "
             "model"},
    {.name = "--tokenizer-type", TOK,
     CHOICE("BertWordPieceLowerCase", "BertWordPieceCase", "GPT2BPETokenizer",
            "SentencePieceTokenizer", "GPTSentencePieceTokenizer", "HuggingFaceTokenizer",
            "Llama2Tokenizer", "TikTokenizer", "MultimodalTokenizer", "NullTokenizer",
            "NullMultimodalTokenizer", "SFTTokenizer"),
     FIELD(tokenizer_type), .def = "GPT2BPETokenizer",
     ONLY("GPT2BPETokenizer is pretrain_gpt.py's default; the others are not implemented yet",
          "GPT2BPETokenizer", "NullTokenizer", "HuggingFaceTokenizer", "TikTokenizer",
          "SentencePieceTokenizer", "GPTSentencePieceTokenizer", "Llama2Tokenizer"),
     .help = "What type of tokenizer to use."},
    {.name = "--tokenizer-model", TOK, STRING, FIELD(tokenizer_model),
     IMPLEMENTED_NOTE("HuggingFaceTokenizer's directory (tokenizer.json), TikTokenizer's JSON "
                      "vocabulary, the .model file of SentencePieceTokenizer, "
                      "GPTSentencePieceTokenizer and Llama2Tokenizer (through libsentencepiece)"),
     .help = "Sentencepiece tokenizer model."},
    {.name = "--legacy-tokenizer", TOK, TRUE_IF_GIVEN, FIELD(legacy_tokenizer),
     IMPLEMENTED_NOTE("Megatron's legacy tokenizer classes: HuggingFaceTokenizer adds its "
                      "post-processor's special tokens (BOS); the SentencePiece types' ids, eod "
                      "and pad differ (data/tokenizer_sp.h); the GPT-2 and Null tokenizers give "
                      "the same ids either way"),
     .help = "To use legacy tokenizer system."},

    /* ---- logging ---- */
    {.name = "--log-params-norm", LOG, TRUE_IF_GIVEN, FIELD(log_params_norm), IMPLEMENTED,
     .help = "If set, calculate and log parameters norm."},
    {.name = "--log-num-zeros-in-grad", LOG, TRUE_IF_GIVEN, FIELD(log_num_zeros_in_grad),
     IMPLEMENTED, .help = "If set, calculate and log the number of zeros in gradient."},
    {.name = "--log-throughput", LOG, TRUE_IF_GIVEN, FIELD(log_throughput), IMPLEMENTED,
     .help = "If set, calculate and log throughput per GPU."},
    {.name = "--log-progress", LOG, TRUE_IF_GIVEN, FIELD(log_progress),
     IMPLEMENTED_NOTE("rank 0 appends Megatron's lines to <save>/progress.txt: 'Starting job', and "
                      "after each save the iteration, job and cumulative TFLOP/s/GPU, "
                      "floating-point operations and tokens; nothing without --save, as in "
                      "Megatron"),
     .help = "If set, log progress (in terms of number of processed tokens and number of "
             "floating-point operations) to progress.txt file in checkpoint directory."},
    {.name = "--timing-log-level", LOG, INT, FIELD(timing_log_level), .def = "0", BETWEEN(0, 2),
     IMPLEMENTED_NOTE("level 1: forward-backward, all-grads-sync, params-all-gather, optimizer "
                      "and its parts; level 2 adds forward-compute, backward-compute, "
                      "batch-generator"),
     .help = "Granularity level to measure and report timing. 0: report only iteration time and "
             "make sure timing does not introduce extra overhead. 1: report timing for "
             "operations that are executed very limited times (basically once) during each "
             "iteration (such as gradient all-reduce) 2: report timing for operations that "
             "might be executed numerous times during each iteration. Note that setting the "
             "level to 1 or 2 might cause increase in iteration time."},
    {.name = "--log-energy", LOG, TRUE_IF_GIVEN, TODO("energy readings"),
     .help = "If set, log energy consumption (in Joules)"},
    {.name = "--no-barrier-with-level-1-timing", LOG, FALSE_IF_GIVEN,
     FIELD_NAMED(barrier_with_l1_time, "barrier_with_L1_time"), IMPLEMENTED,
     .help = "If not set, use barrier with level 1 time measurements."},
    {.name = "--timing-log-option", LOG, CHOICE("max", "minmax", "all"), .def = "minmax",
     FIELD(timing_log_option), IMPLEMENTED,
     .help = "Options for logging timing: max: report the max timing across all ranks minmax: "
             "report min and max timings across all ranks all: report timings of all ranks."},
    {.name = "--log-interval", LOG, INT, FIELD(log_interval), .def = "100", GE(1), IMPLEMENTED,
     .help = "Report loss and timing interval."},
    {.name = "--tensorboard-dir", LOG, STRING, FIELD(tensorboard_dir),
     IMPLEMENTED_NOTE("event files written by the last rank, as Megatron's"),
     .help = "Write TensorBoard logs to this directory."},
    {.name = "--tensorboard-log-interval", LOG, INT, FIELD(tensorboard_log_interval), .def = "1",
     GE(1), IMPLEMENTED, .help = "Report to tensorboard interval."},
    {.name = "--tensorboard-queue-size", LOG, INT, FIELD(tensorboard_queue_size), .def = "1000",
     GE(1), IMPLEMENTED,
     .help = "Size of the tensorboard queue for pending events and summaries before one of the "
             "\"add\" calls forces a flush to disk."},
    {.name = "--log-timers-to-tensorboard", LOG, TRUE_IF_GIVEN, FIELD(log_timers_to_tensorboard),
     IMPLEMENTED, .help = "If set, write timers to tensorboard."},
    {.name = "--no-log-loss-scale-to-tensorboard", .alias = "--disable-log-loss-scale-to-tensorboard",
     LOG, FALSE_IF_GIVEN, FIELD(log_loss_scale_to_tensorboard), IMPLEMENTED,
     .help = "Disable loss-scale logging to tensorboard."},
    {.name = "--log-validation-ppl-to-tensorboard", LOG, TRUE_IF_GIVEN,
     FIELD(log_validation_ppl_to_tensorboard), IMPLEMENTED,
     .help = "If set, write validation perplexity to tensorboard."},
    {.name = "--log-memory-to-tensorboard", LOG, TRUE_IF_GIVEN, FIELD(log_memory_to_tensorboard),
     IMPLEMENTED_NOTE("the backend's allocations; reserved equals allocated (no caching "
                      "allocator: every buffer is allocated once, at start-up)"),
     .help = "Enable memory logging to tensorboard."},
    {.name = "--log-world-size-to-tensorboard", LOG, TRUE_IF_GIVEN,
     FIELD(log_world_size_to_tensorboard), IMPLEMENTED,
     .help = "Enable world size logging to tensorboard."},
    {.name = "--wandb-project", LOG, STRING, .def = "", PENDING_FIELD(wandb_project),
     NOOP("Weights & Biases is a Python service: a note at start-up says the metrics are in "
          "--tensorboard-dir and the log"),
     .help = "The wandb project name. Ignore wandb by default."},
    {.name = "--wandb-entity", LOG, STRING, .def = "",
     NOOP("only used with --wandb-project (Weights & Biases is a Python service)"),
     .help = "The wandb entity name. It is useful when there are multiple sub-projects in a "
             "project. Ignore wandb by default."},
    {.name = "--wandb-exp-name", LOG, STRING, .def = "",
     NOOP("only used with --wandb-project (Weights & Biases is a Python service)"),
     .help = "The wandb experiment name."},
    {.name = "--wandb-save-dir", LOG, STRING, .def = "",
     NOOP("only used with --wandb-project (Weights & Biases is a Python service)"),
     .help = "Path to save the wandb results locally."},
    {.name = "--logging-level", LOG, INT, GE(0), NOOP("Python's logging module"),
     .help = "Set default logging level"},

    /* ---- megatron-c extensions ---- */
    {.name = "--device", EXT, CHOICE("auto", "cpu", "cuda"), FIELD(device), .def = "auto",
     IMPLEMENTED_NOTE("auto picks CUDA when built with it and a GPU is present, else the CPU"),
     .help = "Backend to run on (DESIGN decision 2)."},
    {.name = "--cpu-threads", EXT, INT, FIELD(cpu_threads), .def = "0", GE(0), IMPLEMENTED,
     .help = "OpenBLAS threads on the CPU backend; 0 keeps the library's default."},
    {.name = "--heartbeat-timeout-seconds", EXT, INT, FIELD(heartbeat_timeout_seconds), .def = "30",
     GE(0),
     IMPLEMENTED_NOTE("a rank on the same node stopped (SIGSTOP, a debugger) this long while others wait "
                      "for it ends the job, naming it; ranks on other nodes are bounded by "
                      "--distributed-timeout-minutes; 0 turns the check off"),
     .help = "Seconds a rank may be stopped while its peers wait for it."},
    {.name = "--help", .alias = "-h", EXT, .type = MC_FLAG_ACTION, .action = MC_ACTION_HELP,
     IMPLEMENTED, .help = "Show this help message and exit."},
    {.name = "--flags-markdown", EXT, .type = MC_FLAG_ACTION, .action = MC_ACTION_MARKDOWN,
     IMPLEMENTED, .help = "Print the flag support table (docs/FLAGS.md) and exit."},
    {.name = "--version", EXT, .type = MC_FLAG_ACTION, .action = MC_ACTION_VERSION,
     IMPLEMENTED_NOTE("must be the first argument"),
     .help = "Print the version and how megatron-c was built, and exit."},
};
/* clang-format on */

const size_t mc_flags_train_count = sizeof(mc_flags_train) / sizeof(mc_flags_train[0]);
