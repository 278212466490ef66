/* Parsed and validated configuration: Megatron's `args` namespace.
 *
 * Field names are Megatron's argparse dests. The flag table (config/flags.c) is the single source
 * of truth for which flag fills which field, its default, group and help. Derived fields (marked
 * "derived") are computed by mc_args_finalize() exactly as Megatron's validate_args does.
 * Optional numeric flags whose Megatron default is None use the *_set companion or a sentinel
 * noted next to the field. */
#ifndef MC_CONFIG_ARGS_H
#define MC_CONFIG_ARGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>

#include "config/cp_layout.h" /* MC_MAX_LAYER_LIST */

#define MC_MAX_PATHS 64
#define MC_MAX_BATCH_SCHEDULE 64 /* entries of --step-batch-size-schedule */

typedef struct {
    /* ---- model shape ---- */
    int num_layers;
    int hidden_size;
    int ffn_hidden_size; /* derived: 4h when not given */
    int num_attention_heads;
    int kv_channels; /* derived: h / heads when not given */
    bool group_query_attention;
    int num_query_groups; /* derived: heads unless --group-query-attention */
    int seq_length;
    int max_position_embeddings;
    char position_embedding_type[32];    /* learned_absolute | rope | none */
    bool use_rotary_position_embeddings; /* deprecated spelling of rope */
    bool add_position_embedding;         /* false with --no-position-embedding */
    int rotary_base;
    double rotary_percent;
    bool rotary_interleaved;
    int rotary_seq_len_interpolation_factor; /* 0 = not given */
    bool use_rope_scaling;
    double rope_scaling_factor;
    int make_vocab_size_divisible_by;
    int vocab_size;         /* 0 = not given */
    int padded_vocab_size;  /* derived: padded --vocab-size or tokenizer (mc_args_open_data) */
    char normalization[16]; /* "LayerNorm" | "RMSNorm" */
    double norm_epsilon;
    bool apply_residual_connection_post_layernorm;
    bool apply_layernorm_1p; /* every norm computes with (1 + weight), weights start at 0 */
    bool add_bias_linear;    /* false with --disable-bias-linear */
    bool add_qkv_bias;
    bool bias_gelu_fusion; /* false with --no-bias-gelu-fusion (and without biases) */
    bool swiglu;
    bool squared_relu;
    bool qk_layernorm;
    bool apply_wd_to_qk_layernorm;
    bool untie_embeddings_and_output_weights;
    char transformer_impl[32];
    char attention_backend
        [16]; /* auto | flash | fused | unfused | local (kernels/attention_choice.h) */

    /* ---- activation recomputation ---- */
    bool recompute_activations;     /* sets recompute_granularity "selective" */
    char recompute_granularity[16]; /* "" | full | selective */
    char recompute_method[16];      /* "" | uniform | block */
    int recompute_num_layers;       /* 0 = not given */
    int n_recompute_modules;
    char *recompute_modules[MC_MAX_PATHS];

    /* ---- regularisation and init ---- */
    double hidden_dropout;
    double attention_dropout;
    int64_t seed;
    double init_method_std;
    double embedding_init_method_std; /* derived: init_method_std when not given */

    /* ---- parallelism ---- */
    int tensor_model_parallel_size;
    int pipeline_model_parallel_size;
    int virtual_pipeline_model_parallel_size;  /* derived: vpp, model chunks per pp rank, 1 = no
                                                * VPP (Megatron's None): (num_layers/pp)/K, or V */
    int num_layers_per_virtual_pipeline_stage; /* K; 0 = unset */
    int num_virtual_stages_per_pipeline_rank;  /* V; 0 = unset */
    int decoder_first_pipeline_num_layers, decoder_last_pipeline_num_layers; /* 0 = unset (even) */
    /* the embedding / the loss counts as one layer of the split (first / last stage) */
    bool account_for_embedding_in_pipeline_split, account_for_loss_in_pipeline_split;
    int microbatch_group_size_per_vp_stage; /* 0 = unset, means pp */
    bool overlap_p2p_comm; /* derived: true with VPP unless --no-overlap-p2p-communication; false
                            * without VPP */
    bool overlap_p2p_comm_warmup_flush; /* asynchronous warmup and flush batches too */
    /* --defer-embedding-wgrad-compute: the output layer's weight-gradient GEMMs of the first
     * wgrad_deferral_limit microbatches (0: all) wait for the pipeline flush */
    bool defer_embedding_wgrad_compute;
    bool gradient_accumulation_fusion; /* true unless --no-gradient-accumulation-fusion */
    int wgrad_deferral_limit;
    int context_parallel_size;
    /* --cp-comm-type: one type, or one per layer (config/context_parallel.h); none given: p2p */
    int n_cp_comm_type;
    char *cp_comm_type[MC_MAX_LAYER_LIST];
    int n_hierarchical_context_parallel_sizes;
    char *hierarchical_context_parallel_sizes[8];
    bool sequence_parallel;
    /* --tp-comm-overlap and which of its overlaps run (Megatron's TransformerConfig fields) */
    bool tp_comm_overlap, tp_comm_overlap_ag, tp_comm_overlap_rs, tp_comm_bulk_dgrad,
        tp_comm_bulk_wgrad;
    char tp_comm_overlap_cfg[4096]; /* --tp-comm-overlap-cfg; empty = not given */
    int world_size;                 /* derived: from the runtime (1 without a launcher) */
    int data_parallel_size;         /* derived */
    char distributed_backend[16];
    int distributed_timeout_minutes;
    int heartbeat_timeout_seconds; /* 0: off */
    bool use_tp_pp_dp_mapping;     /* rank order tp-cp-ep-pp-dp */
    /* data-parallel gradient reduction (parallel/grads.h) */
    bool overlap_grad_reduce;
    bool overlap_param_gather;
    bool overlap_param_gather_with_optimizer_step; /* the first chunk's gather inside the step */
    int64_t ddp_bucket_size;                       /* 0 = not given */
    int ddp_num_buckets;                           /* 0 = not given */
    bool ddp_pad_buckets_for_high_nccl_busbw;
    bool ddp_average_in_collective;

    /* ---- mixture of experts (issue 31): parsed and checked by Megatron's rules
     * (cli/validate_moe.c), then refused until the MoE layer exists ---- */
    int num_experts;                 /* 0 = None (no MoE) */
    int expert_model_parallel_size;  /* 1 */
    int expert_tensor_parallel_size; /* derived: tp when not given (0 = None) */
    int moe_ffn_hidden_size;         /* 0 = None: ffn_hidden_size with experts */
    char moe_layer_freq[1024];       /* "1": an int N (layer i is MoE iff i % N == 0) or a Python
                                      * list expression ("([1]*3+[0])*2"): config/moe_pattern.h */
    int moe_shared_expert_intermediate_size; /* 0 = None: no shared expert */
    bool moe_shared_expert_overlap, moe_shared_expert_gate;
    bool moe_grouped_gemm, moe_use_legacy_grouped_gemm, moe_permute_fusion;
    int n_moe_router_load_balancing_type; /* 0: Megatron's default, aux_loss */
    char *moe_router_load_balancing_type[8];
    int n_moe_aux_loss_coeff; /* 0: Megatron's default, 0.0 */
    char *moe_aux_loss_coeff[8];
    double moe_z_loss_coeff; /* None unless moe_z_loss_coeff_set */
    bool moe_z_loss_coeff_set;
    int moe_router_topk;                              /* 2 */
    char moe_router_score_function[16];               /* softmax | sigmoid */
    bool moe_router_pre_softmax;                      /* softmax before the top-k */
    double moe_router_topk_scaling_factor;            /* 0 = None */
    char moe_router_dtype[8];                         /* "" = None (the input's) | fp32 | fp64 */
    int moe_router_num_groups, moe_router_group_topk; /* 0 = None */
    bool moe_router_enable_expert_bias;
    double moe_router_bias_update_rate;
    char moe_token_dispatcher_type[16]; /* allgather | alltoall (| flex, refused) */
    double moe_expert_capacity_factor;  /* None unless moe_expert_capacity_factor_set */
    bool moe_expert_capacity_factor_set;
    bool moe_pad_expert_input_to_capacity;
    char moe_token_drop_policy[16]; /* probs | position */
    bool moe_per_layer_logging;

    /* ---- batch ---- */
    int micro_batch_size;
    int global_batch_size;      /* derived: mbs*dp when not given */
    int num_microbatches;       /* derived */
    int eval_micro_batch_size;  /* derived: mbs when not given */
    int eval_global_batch_size; /* derived: gbs when not given */
    /* --rampup-batch-size as Megatron stores it (nargs='*' strings), and its parsed values:
     * rampup_start 0 = no ramp-up (config/microbatches.h) */
    int n_rampup_batch_size;
    char *rampup_batch_size[3];
    int rampup_start, rampup_increment;
    int64_t rampup_samples;
    /* --step-batch-size-schedule as given (one word: "THRESHOLD:BS THRESHOLD:BS ...", tokens),
     * and its entries in samples, sorted (config/microbatches.h); n_batch_schedule 0 = none */
    char step_batch_size_schedule[4096];
    int n_batch_schedule;
    int64_t batch_schedule_samples[MC_MAX_BATCH_SCHEDULE];
    int batch_schedule_size[MC_MAX_BATCH_SCHEDULE];

    /* ---- training length ---- */
    int64_t train_iters;          /* 0 = not given; derived as train_samples // gbs when
                                   * --train-samples is given (training.update_train_iters) */
    int64_t train_samples;        /* 0 = not given; > 0 marks sample-based training (lr schedule) */
    int64_t exit_interval;        /* 0 = not given */
    double exit_duration_in_mins; /* 0 = not given */
    int check_weight_hash_across_dp_replicas_interval; /* 0 = not given (None) */
    /* --profile: the CUDA profiler from iteration profile_step_start to profile_step_end on the
     * global ranks profile_ranks (train/profile.h) */
    bool profile;
    int profile_step_start, profile_step_end;
    int n_profile_ranks;
    char *profile_ranks[64];  /* none given: [0], Megatron's default */
    bool exit_signal_handler; /* save and exit on exit_signal (train/signals.h) */
    char exit_signal[16];     /* "SIGTERM": Python's signal.Signals name */
    bool skip_train;

    /* ---- optimizer ---- */
    char optimizer[16]; /* "adam" | "muon" (others refused) */
    /* --optimizer muon (optim/muon.h): Megatron's TensorParallelMuon over emerging_optimizers */
    double muon_momentum, muon_extra_scale_factor;
    bool muon_nesterov, muon_split_qkv, muon_use_syrk;
    int64_t muon_num_ns_steps;
    char muon_coefficient_type[24];
    char muon_scale_mode[16];      /* spectral | unit_rms_norm | shape_scaling */
    char muon_fp32_matmul_prec[8]; /* low | medium | high */
    char muon_tp_mode[16];         /* blockwise | duplicated | distributed */
    char muon_scalar_optimizer[8]; /* adam (lion refused) */
    double adam_beta1, adam_beta2, adam_eps;
    double sgd_momentum;
    double weight_decay;
    double start_weight_decay; /* derived for constant style */
    double end_weight_decay;
    bool start_weight_decay_set, end_weight_decay_set;
    char weight_decay_incr_style[16]; /* constant | linear | cosine */
    double clip_grad;
    bool use_distributed_optimizer;
    bool use_gloo_process_groups; /* false: --disable-gloo-process-groups (Megatron main's dest) */
    /* --num-distributed-optimizer-instances: the distributed optimizer sharded within each of
     * these instances of dp x cp / N ranks and replicated across them */
    int num_distributed_optimizer_instances;

    /* ---- learning rate ---- */
    double lr;
    bool lr_set;
    double min_lr;
    char lr_decay_style[32];  /* constant | linear | cosine | inverse-square-root | WSD */
    int64_t lr_decay_iters;   /* 0 = not given */
    int64_t lr_decay_samples; /* 0 = not given */
    int64_t lr_warmup_iters;
    int64_t lr_warmup_samples;
    double lr_warmup_fraction; /* < 0 = not given */
    double lr_warmup_init;
    /* --decoupled-lr / --decoupled-min-lr: the embedding and output layer's max and min lr
     * (Megatron's is_decoupled_lr parameter groups); < 0 = not given (None) */
    double decoupled_lr, decoupled_min_lr;

    /* ---- Maximal Update Parametrization (config/mup.h) ---- */
    bool use_mup;
    int64_t mup_base_hidden_size; /* <= 0: not given (None): the hidden size */
    double mup_width_mult;        /* stored as given; the model's is derived (config/mup.h) */
    double mup_embedding_mult, mup_output_mult, mup_attn_scale_power;
    double mup_base_head_dim; /* <= 0: not given (None) */

    /* ---- mixed precision ---- */
    bool fp16, bf16;
    double loss_scale; /* 0 = not given (dynamic for fp16) */
    double initial_loss_scale;
    double min_loss_scale;
    int loss_scale_window;
    int hysteresis;
    bool accumulate_allreduce_grads_in_fp32;
    bool grad_reduce_in_bf16; /* with --bf16: a bf16 gradient buffer, reduced in bf16 */
    bool check_for_nan_in_loss_and_grad;
    bool calculate_per_token_loss;
    /* Megatron's rerun state machine (train/rerun.h): "disabled", "validate_results" or
     * "report_stats"; its error injector; the spiky-loss validation */
    char rerun_mode[24];
    int64_t error_injection_rate;
    char error_injection_type[24]; /* "correct_result", "transient_error", "persistent_error" */
    bool check_for_spiky_loss;

    /* ---- data ---- */
    bool mock_data;
    int n_data_path;
    char *data_path[MC_MAX_PATHS];
    char split[128];            /* empty = not given */
    char data_cache_path[4096]; /* --data-cache-path; empty = Megatron's default */
    /* --train-data-path / --valid-data-path / --test-data-path (weights and prefixes) */
    int n_train_data_path, n_valid_data_path, n_test_data_path;
    char *train_data_path[MC_MAX_PATHS], *valid_data_path[MC_MAX_PATHS],
        *test_data_path[MC_MAX_PATHS];
    double mid_level_dataset_surplus;
    int num_workers; /* --num-workers: FIM's RandomStates are per DataLoader worker */
    /* --fim-data and its flags (data/fim_stream.h); the strings empty = None */
    bool fim_data;
    double fim_rate, fim_spm_rate, fim_fragment_rate;
    bool fim_fragment_rate_set;
    char fim_split_sample[256], fim_no_prefix[256];
    char fim_prefix_token[128], fim_middle_token[128], fim_suffix_token[128], fim_pad_token[128],
        fim_eod_token[128];
    char tokenizer_type[64];
    char vocab_file[4096];
    char merge_file[4096];
    char tokenizer_model[4096]; /* --tokenizer-model */
    int64_t vocab_extra_ids;    /* --vocab-extra-ids (legacy SentencePieceTokenizer) */
    /* TikTokenizer */
    char tiktoken_pattern[8]; /* empty = not given */
    int64_t tiktoken_num_special_tokens;
    int n_tiktoken_special_tokens;
    char *tiktoken_special_tokens[MC_MAX_PATHS];
    bool legacy_tokenizer; /* --legacy-tokenizer */
    bool eod_mask_loss;
    bool reset_position_ids;
    bool reset_attention_mask;
    char dataloader_type[16]; /* derived: "single" */

    /* ---- logging ---- */
    int log_interval;
    bool log_throughput;
    bool log_params_norm;
    bool log_num_zeros_in_grad;
    bool log_progress; /* <save>/progress.txt (train/progress.h) */
    int timing_log_level;
    char timing_log_option[16]; /* max | minmax | all */
    bool barrier_with_l1_time;
    /* TensorBoard (train/tensorboard.h): the last rank writes event files into the directory */
    char tensorboard_dir[4096]; /* --tensorboard-dir; empty = no TensorBoard */
    char wandb_project[256];    /* --wandb-project: only noted (Weights & Biases is Python's) */
    /* --test-mode: the q/k layernorm parameters compared across dp and tp every step (Megatron's
     * Attention.run_realtime_tests) */
    bool test_mode;
    int tensorboard_log_interval;       /* iterations between training scalars */
    int tensorboard_queue_size;         /* SummaryWriter's max_queue: events per flush */
    bool log_timers_to_tensorboard;     /* iteration-time, throughput, <timer>-time */
    bool log_loss_scale_to_tensorboard; /* default true: --no-log-loss-scale-to-tensorboard */
    bool log_validation_ppl_to_tensorboard;
    bool log_memory_to_tensorboard; /* mem-* scalars */
    bool log_world_size_to_tensorboard;

    /* ---- evaluation ---- */
    int eval_iters;
    int eval_interval;

    /* ---- checkpointing (ckpt/checkpoint.h) ---- */
    char save[4096];          /* --save; empty = not given */
    int save_interval;        /* 0 = not given */
    int save_retain_interval; /* 0 = not given: every checkpoint is kept */
    bool no_save_optim, no_save_rng;
    char load[4096]; /* --load; empty = not given */
    bool no_load_optim, no_load_rng;
    bool finetune;
    bool exit_on_missing_checkpoint;
    int ckpt_step;        /* 0 = not given (Megatron treats 0 as unset too) */
    char ckpt_format[16]; /* what saves write: "torch" (legacy) or "torch_dist"; loads detect */
    bool
        dist_ckpt_optim_fully_reshardable; /* torch_dist: the distributed optimizer in model space */
    char dist_ckpt_strictness[24];         /* torch_dist: what to do with keys that do not match */
    bool override_opt_param_scheduler, use_checkpoint_opt_param_scheduler;
    bool use_checkpoint_args;              /* take the model's arguments from --load's checkpoint */
    bool use_mp_args_from_checkpoint_args; /* ... and its tp / pp / vpp */
    bool use_tokenizer_model_from_checkpoint_args; /* ... and its tokenizer (default True) */
    bool async_save;                               /* write in the background (ckpt/async.h) */

    /* ---- megatron-c extensions ---- */
    char device[16]; /* "auto" | "cpu" | "cuda"; resolved at start-up */
    int cpu_threads; /* OpenBLAS threads on the CPU backend; 0 = library default */
} mc_args_t;

/* A value for a flag's field from elsewhere than the command line (a checkpoint's args): text
 * as the command line would give it ("True"/"False": the value of a store_true/store_false
 * flag's dest). Checked as if given: 0, or -1 with one line in err when the value is invalid or
 * not implemented (the flag and value named). */
struct mc_flag;
int mc_args_take(mc_args_t *args, const struct mc_flag *f, const char *text, char *err, size_t n);

/* The functions that parse a command line into mc_args_t and validate it are cli/'s
 * (cli/cli.h); those below are config/'s, for every layer. */

/* Defaults for every field (Megatron's defaults, section 11 of the spec for differences). */
void mc_args_defaults(mc_args_t *args);

void mc_args_free(mc_args_t *args);

/* Megatron's start-up "arguments" block (config/report.c). */
void mc_args_print(FILE *out, const mc_args_t *args);
/* Each (name, value) row of that block, in its order (write_args_to_tensorboard's texts too). */
void mc_args_each(const mc_args_t *a, void (*fn)(void *ctx, const char *name, const char *value),
                  void *ctx);

/* The vocabulary when --vocab-size gives it (mock data, NullTokenizer): vocab_size, plus the
 * eod NullTokenizer appends, as Megatron's tokenizers report it. */
int64_t mc_args_vocab_from_size(const mc_args_t *args);
/* Microbatches of one evaluation step: eval global batch / (eval micro batch x dp). */
int mc_args_eval_microbatches(const mc_args_t *a);

#endif
