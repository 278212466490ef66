/* The command line: Megatron's defaults, the issue's command line and its derived values,
 * Megatron's validate_args rules, one-line user errors (exit 2) and the flag table itself. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/args.h"
#include "base/error.h"
#include "cli/cli.h"
#include "config/env.h"
#include "config/flags.h"
#include "test/unit/cli_run.h"

/* The issue's example (README "Using it"), with the data and device flags of the demo. */
#define ISSUE_LINE                                                                                  \
    "--device cpu --mock-data --num-layers 2 --hidden-size 64 --num-attention-heads 4 "            \
    "--seq-length 64 --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 8 "     \
    "--train-iters 50 --lr 1e-3 --lr-decay-style cosine --lr-warmup-iters 5 --min-lr 1e-4 "        \
    "--weight-decay 0.1 --clip-grad 1.0 --vocab-size 512 --log-interval 10 --eval-interval 25 "    \
    "--eval-iters 2 --seed 1234"

/* The smallest valid line: required flags only. */
#define MINIMAL                                                                                     \
    "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 "                     \
    "--max-position-embeddings 64 --micro-batch-size 2 --lr 1e-3 --train-iters 10 --vocab-size 512"

/* ---- defaults ---- */

static void test_defaults_are_megatrons(void **state)
{
    (void)state;
    static mc_args_t a;
    mc_args_defaults(&a);
    assert_int_equal(a.num_layers, 0); /* None: required */
    assert_int_equal(a.make_vocab_size_divisible_by, 128);
    assert_string_equal(a.position_embedding_type, "learned_absolute");
    assert_string_equal(a.normalization, "LayerNorm");
    assert_true(a.norm_epsilon == 1e-5);
    assert_true(a.add_bias_linear);
    assert_false(a.add_qkv_bias);
    assert_true(a.bias_gelu_fusion);
    assert_false(a.untie_embeddings_and_output_weights);
    assert_string_equal(a.transformer_impl, "transformer_engine");
    assert_true(a.hidden_dropout == 0.1 && a.attention_dropout == 0.1);
    assert_int_equal(a.seed, 1234);
    assert_true(a.init_method_std == 0.02);
    assert_int_equal(a.tensor_model_parallel_size, 1);
    assert_int_equal(a.pipeline_model_parallel_size, 1);
    assert_int_equal(a.virtual_pipeline_model_parallel_size, 1); /* None */
    assert_int_equal(a.num_layers_per_virtual_pipeline_stage, 0);
    assert_int_equal(a.num_virtual_stages_per_pipeline_rank, 0);
    assert_int_equal(a.decoder_first_pipeline_num_layers, 0);
    assert_int_equal(a.decoder_last_pipeline_num_layers, 0);
    assert_int_equal(a.microbatch_group_size_per_vp_stage, 0);
    assert_true(a.overlap_p2p_comm); /* Megatron's default; validation turns it off without VPP */
    assert_string_equal(a.timing_log_option, "minmax");
    assert_int_equal(a.context_parallel_size, 1);
    assert_string_equal(a.distributed_backend, "nccl");
    assert_string_equal(a.optimizer, "adam");
    assert_true(a.adam_beta1 == 0.9 && a.adam_beta2 == 0.999 && a.adam_eps == 1e-8);
    assert_true(a.sgd_momentum == 0.9);
    assert_true(a.weight_decay == 0.01);
    assert_string_equal(a.weight_decay_incr_style, "constant");
    assert_true(a.clip_grad == 1.0);
    assert_false(a.lr_set);
    assert_true(a.min_lr == 0.0);
    assert_string_equal(a.lr_decay_style, "linear");
    assert_int_equal(a.lr_warmup_iters, 0);
    assert_true(a.lr_warmup_fraction < 0); /* None */
    assert_true(a.lr_warmup_init == 0.0);
    assert_true(a.initial_loss_scale == 4294967296.0);
    assert_true(a.min_loss_scale == 1.0);
    assert_int_equal(a.loss_scale_window, 1000);
    assert_int_equal(a.hysteresis, 2);
    assert_true(a.check_for_nan_in_loss_and_grad);
    assert_string_equal(a.tokenizer_type, "GPT2BPETokenizer");
    assert_int_equal(a.log_interval, 100);
    assert_int_equal(a.timing_log_level, 0);
    assert_int_equal(a.eval_iters, 100);
    assert_int_equal(a.eval_interval, 1000); /* MEGATRON.md section 11 */
    assert_string_equal(a.device, "auto");
    assert_int_equal(a.cpu_threads, 0);
    assert_int_equal(a.world_size, 1);
}

/* ---- good command lines ---- */

static void test_issue_command_line(void **state)
{
    (void)state;
    static mc_args_t a;
    mc_run_parse_here(&a, ISSUE_LINE, 1);
    assert_true(a.mock_data);
    assert_string_equal(a.device, "cpu");
    assert_int_equal(a.num_layers, 2);
    assert_int_equal(a.hidden_size, 64);
    assert_int_equal(a.num_attention_heads, 4);
    assert_int_equal(a.seq_length, 64);
    assert_int_equal(a.max_position_embeddings, 64);
    assert_int_equal(a.micro_batch_size, 2);
    assert_int_equal(a.global_batch_size, 8);
    assert_int_equal(a.train_iters, 50);
    assert_true(a.lr == 1e-3 && a.lr_set);
    assert_string_equal(a.lr_decay_style, "cosine");
    assert_int_equal(a.lr_warmup_iters, 5);
    assert_true(a.min_lr == 1e-4);
    assert_true(a.weight_decay == 0.1);
    assert_true(a.clip_grad == 1.0);
    assert_int_equal(a.vocab_size, 512);
    assert_int_equal(a.log_interval, 10);
    assert_int_equal(a.eval_interval, 25);
    assert_int_equal(a.eval_iters, 2);
    assert_int_equal(a.seed, 1234);
    /* derived */
    assert_int_equal(a.world_size, 1);
    assert_int_equal(a.data_parallel_size, 1);
    assert_int_equal(a.num_microbatches, 4); /* gbs / (mbs * dp) */
    assert_int_equal(a.ffn_hidden_size, 256); /* 4h */
    assert_int_equal(a.kv_channels, 16);      /* h / heads */
    assert_int_equal(a.num_query_groups, 4);
    assert_int_equal(a.padded_vocab_size, 512);
    assert_int_equal(a.eval_micro_batch_size, 2);
    assert_int_equal(a.eval_global_batch_size, 8);
    assert_true(a.start_weight_decay == 0.1 && a.end_weight_decay == 0.1);
    assert_true(a.embedding_init_method_std == 0.02);
    assert_true(a.add_qkv_bias); /* follows add_bias_linear */
    assert_string_equal(a.dataloader_type, "single");
    mc_args_free(&a);
}

static void test_data_parallel_derivations(void **state)
{
    (void)state;
    static mc_args_t a;
    mc_run_parse_here(&a, MINIMAL " --global-batch-size 16", 4);
    assert_int_equal(a.data_parallel_size, 4);
    assert_int_equal(a.num_microbatches, 2);
    mc_run_parse_here(&a, MINIMAL, 4); /* gbs defaults to mbs * dp */
    assert_int_equal(a.global_batch_size, 8);
    assert_int_equal(a.num_microbatches, 1);
    assert_int_equal(a.eval_global_batch_size, 8);
    mc_run_parse_here(&a, MINIMAL " --global-batch-size 16 --eval-micro-batch-size 1 --eval-global-batch-size 4", 4);
    assert_int_equal(a.eval_micro_batch_size, 1);
    assert_int_equal(a.eval_global_batch_size, 4);
}

static void test_padded_vocab(void **state)
{
    (void)state;
    assert_int_equal(mc_padded_vocab_size(512, 128, 1), 512);
    assert_int_equal(mc_padded_vocab_size(50257, 128, 1), 50304);
    assert_int_equal(mc_padded_vocab_size(50257, 128, 2), 50432);
    assert_int_equal(mc_padded_vocab_size(50257, 128, 4), 50688);
    assert_int_equal(mc_padded_vocab_size(50257, 128, 8), 51200);
    assert_int_equal(mc_padded_vocab_size(1, 1, 1), 1);

    static mc_args_t a;
    /* NullTokenizer's vocabulary is vocab_size ids plus its eod. */
    mc_run_parse_here(&a, MINIMAL " --tokenizer-type NullTokenizer --vocab-size 50256", 1);
    assert_int_equal(a.padded_vocab_size, 50304);
    mc_run_parse_here(&a, MINIMAL " --tokenizer-type NullTokenizer --vocab-size 512", 1);
    assert_int_equal(a.padded_vocab_size, 640);
    mc_run_parse_here(&a, MINIMAL " --vocab-size 500 --make-vocab-size-divisible-by 64", 1);
    assert_int_equal(a.padded_vocab_size, 512);
    mc_run_parse_here(&a, MINIMAL " --padded-vocab-size 600", 1);
    assert_int_equal(a.padded_vocab_size, 600);
}

static void test_shape_flags_given(void **state)
{
    (void)state;
    static mc_args_t a;
    mc_run_parse_here(&a, MINIMAL " --ffn-hidden-size 100 --kv-channels 8 --num-attention-heads 3", 1);
    assert_int_equal(a.ffn_hidden_size, 100);
    assert_int_equal(a.kv_channels, 8); /* given: 64 % 3 need not hold */
    assert_int_equal(a.num_attention_heads, 3);
    mc_run_parse_here(&a, MINIMAL " --embedding-init-method-std 1.0 --init-method-std 0.01", 1);
    assert_true(a.embedding_init_method_std == 1.0 && a.init_method_std == 0.01);
}

static void test_equals_form_last_wins_and_bools(void **state)
{
    (void)state;
    static mc_args_t a;
    mc_run_parse_here(&a, MINIMAL " --num-layers=3 --num-layers 5 --hidden-size=32 --norm-epsilon=1e-6", 1);
    assert_int_equal(a.num_layers, 5);
    assert_int_equal(a.hidden_size, 32);
    assert_true(a.norm_epsilon == 1e-6);
    mc_run_parse_here(&a, MINIMAL " --disable-bias-linear --untie-embeddings-and-output-weights", 1);
    assert_false(a.add_bias_linear);
    assert_false(a.bias_gelu_fusion); /* no bias: no bias-gelu fusion */
    assert_false(a.add_qkv_bias);
    assert_true(a.untie_embeddings_and_output_weights);
    mc_run_parse_here(&a, MINIMAL " --no-bias-gelu-fusion --no-check-for-nan-in-loss-and-grad", 1);
    assert_true(a.add_bias_linear);
    assert_false(a.bias_gelu_fusion);
    assert_false(a.check_for_nan_in_loss_and_grad);
    assert_string_equal(a.rerun_mode, "disabled"); /* megatron-c's default (Megatron's:
                                                      validate_results) */
    mc_run_parse_here(&a, MINIMAL " --rerun-mode validate_results --error-injection-rate 3 "
                                  "--error-injection-type persistent_error --check-for-spiky-loss",
                      1);
    assert_string_equal(a.rerun_mode, "validate_results");
    assert_int_equal(a.error_injection_rate, 3);
    assert_string_equal(a.error_injection_type, "persistent_error");
    assert_true(a.check_for_spiky_loss);
    mc_run_parse_here(&a, MINIMAL " --rerun-mode report_stats", 1);
    assert_string_equal(a.rerun_mode, "report_stats");
    assert_string_equal(a.error_injection_type, "transient_error");
    mc_run_parse_here(&a, MINIMAL " --add-qkv-bias --apply-residual-connection-post-layernorm --eod-mask-loss "
                   "--calculate-per-token-loss --log-throughput --log-params-norm --log-num-zeros-in-grad",
               1);
    assert_true(a.add_qkv_bias && a.apply_residual_connection_post_layernorm && a.eod_mask_loss);
    assert_true(a.calculate_per_token_loss && a.log_throughput && a.log_params_norm && a.log_num_zeros_in_grad);
    /* A refused value undone later on the line is fine: the last occurrence wins. */
    mc_run_parse_here(&a, MINIMAL " --tensor-model-parallel-size 2 --tensor-model-parallel-size 1", 1);
    assert_int_equal(a.tensor_model_parallel_size, 1);
}

/* Recognised flags given their Megatron default, and no-op flags, must not stop a run. */
static void test_noops_and_sequence_parallel(void **state)
{
    (void)state;
    static mc_args_t a;
    mc_run_parse_here(&a, MINIMAL " --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 "
                   "--context-parallel-size 1 --ckpt-format torch --vocab-extra-ids 0 "
                   "--mid-level-dataset-surplus 0.0050 --expert-model-parallel-size 1 "
                   "--transformer-impl local --distributed-backend mpi --timing-log-level 0 "
                   "--use-mcore-models --no-masked-softmax-fusion --no-persist-layer-norm "
                   "--no-gradient-accumulation-fusion --attention-softmax-in-fp32 --num-workers 8 "
                   "--distributed-timeout-minutes 30 --local-rank 3 --sequence-parallel "
                   "--dataloader-type single --tokenizer-type GPT2BPETokenizer --cpu-threads 4 "
                   "--rerun-mode disabled",
               1);
    assert_false(a.sequence_parallel); /* Megatron turns it off at tp 1 */
    assert_string_equal(a.transformer_impl, "local");
    assert_string_equal(a.distributed_backend, "mpi");
    assert_int_equal(a.timing_log_level, 0);
    assert_int_equal(a.cpu_threads, 4);
    mc_run_parse_here(&a, MINIMAL " --timing-log-option all --timing-log-level 2", 1);
    assert_string_equal(a.timing_log_option, "all");
}

/* nargs lists stop at the next flag; --data-path without --split gets the legacy split. */
static void test_data_path_list(void **state)
{
    (void)state;
    static mc_args_t a;
    mc_run_parse_here(&a, "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 "
                   "--max-position-embeddings 64 --micro-batch-size 2 --lr 1e-3 --train-iters 5 "
                   "--data-path 0.3 a 0.7 b --vocab-file v.json --merge-file m.txt",
               1);
    assert_int_equal(a.n_data_path, 4);
    assert_string_equal(a.data_path[0], "0.3");
    assert_string_equal(a.data_path[3], "b");
    assert_string_equal(a.split, "969, 30, 1");
    assert_string_equal(a.vocab_file, "v.json");
    assert_true(a.mid_level_dataset_surplus == 0.005);
    mc_args_free(&a);
}

static void test_sample_based_training(void **state)
{
    (void)state;
    static mc_args_t a;
    mc_run_parse_here(&a, "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 "
                   "--max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 8 --lr 1e-3 "
                   "--vocab-size 512 --train-samples 50 --lr-warmup-samples 5 --lr-decay-samples 40",
               1);
    assert_int_equal(a.train_samples, 50);
    assert_int_equal(a.train_iters, 6); /* update_train_iters: 50 // 8 */
    assert_int_equal(a.lr_warmup_samples, 5);
    assert_int_equal(a.lr_decay_samples, 40);
}

static void test_skip_train_needs_no_length(void **state)
{
    (void)state;
    static mc_args_t a;
    mc_run_parse_here(&a, "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 "
                   "--max-position-embeddings 64 --micro-batch-size 2 --lr 1e-3 --vocab-size 512 "
                   "--skip-train",
               1);
    assert_true(a.skip_train);
    assert_int_equal(a.train_iters, 0);
}

static void test_weight_decay_increment(void **state)
{
    (void)state;
    static mc_args_t a;
    mc_run_parse_here(&a, MINIMAL " --weight-decay-incr-style linear --start-weight-decay 0.0 --end-weight-decay 0.1", 1);
    assert_true(a.start_weight_decay == 0.0 && a.end_weight_decay == 0.1);
    assert_true(a.start_weight_decay_set && a.end_weight_decay_set);
}

/* --disable-gloo-process-groups: accepted (no Gloo groups exist here), with Megatron's rule for the
 * distributed optimizer's checkpoint format */
static void test_no_gloo_groups(void **state)
{
    (void)state;
    static mc_args_t a;
    mc_run_parse_here(&a, MINIMAL, 1);
    assert_true(a.use_gloo_process_groups);
    mc_run_parse_here(&a, MINIMAL " --disable-gloo-process-groups --use-distributed-optimizer "
                              "--ckpt-format torch_dist", 1);
    assert_false(a.use_gloo_process_groups);
    mc_expect_error(MINIMAL " --disable-gloo-process-groups --use-distributed-optimizer "
                            "--ckpt-format torch",
                    "--disable-gloo-process-groups with --use-distributed-optimizer needs a "
                    "distributed checkpoint format (--ckpt-format torch_dist;");
    mc_run_parse_here(&a, MINIMAL " --disable-gloo-process-groups --ckpt-format torch", 1);
    assert_false(a.use_gloo_process_groups);
}

static void test_finalize_by_hand(void **state)
{
    (void)state;
    static mc_args_t a;
    mc_args_defaults(&a);
    a.num_layers = 4, a.hidden_size = 128, a.num_attention_heads = 8, a.seq_length = 32;
    a.max_position_embeddings = 32, a.micro_batch_size = 1, a.lr = 1e-4, a.lr_set = true;
    a.train_iters = 10, a.vocab_size = 50257, a.tensor_model_parallel_size = 2;
    mc_args_finalize(&a, 4);
    assert_int_equal(a.data_parallel_size, 2);
    assert_int_equal(a.padded_vocab_size, 50432);
    assert_int_equal(a.global_batch_size, 2);
    assert_int_equal(a.kv_channels, 16);
    assert_int_equal(a.ffn_hidden_size, 512);
}

/* ---- bad command lines ---- */

static void test_unknown_flag_suggests(void **state)
{
    (void)state;
    mc_expect_error(ISSUE_LINE " --hiden-size 64", "unrecognized argument --hiden-size (did you mean --hidden-size?)");
    mc_expect_error(ISSUE_LINE " --num-layer=3", "did you mean --num-layers?");
    mc_expect_error(ISSUE_LINE " --zzzzzzzz", "unrecognized argument --zzzzzzzz");
    mc_expect_error(ISSUE_LINE " --num-lay 2", "did you mean --num-layers?"); /* no abbreviations */
}

static void test_bad_values(void **state)
{
    (void)state;
    mc_expect_error(ISSUE_LINE " --num-layers two", "argument --num-layers: invalid int value: 'two'");
    mc_expect_error(ISSUE_LINE " --num-layers 2x", "invalid int value: '2x'");
    mc_expect_error(ISSUE_LINE " --num-layers 99999999999", "--num-layers");
    mc_expect_error(ISSUE_LINE " --lr fast", "argument --lr: invalid float value: 'fast'");
    mc_expect_error(ISSUE_LINE " --lr inf", "invalid float value");
    mc_expect_error(ISSUE_LINE " --num-layers -1", "argument --num-layers: invalid value '-1' (must be >= 1)");
    mc_expect_error(ISSUE_LINE " --hidden-size 0", "argument --hidden-size: invalid value '0'");
    mc_expect_error(ISSUE_LINE " --hidden-dropout 1", "must be in [0, 1)");
    mc_expect_error(ISSUE_LINE " --timing-log-level 3", "must be in [0, 2]");
    mc_expect_error(ISSUE_LINE " --overlap-param-gather --overlap-grad-reduce",
                 "--overlap-param-gather only supported with distributed optimizer");
    mc_expect_error(ISSUE_LINE " --overlap-param-gather --use-distributed-optimizer",
                 "must use --overlap-param-gather with --overlap-grad-reduce");
    mc_expect_error(ISSUE_LINE " --ddp-num-buckets 2 --ddp-bucket-size 100",
                 "cannot specify both --ddp-num-buckets and --ddp-bucket-size");
    mc_expect_error(ISSUE_LINE " --ddp-average-in-collective --calculate-per-token-loss",
                 "cannot average in collective when calculating per-token loss");
    mc_expect_error(ISSUE_LINE " --lr-decay-style cosin",
                 "argument --lr-decay-style: invalid choice: 'cosin' (choose from constant, linear, "
                 "cosine, inverse-square-root, WSD)");
    mc_expect_error(ISSUE_LINE " --seq-length", "argument --seq-length: expected one argument");
    mc_expect_error(ISSUE_LINE " --seq-length --lr 1", "argument --seq-length: expected one argument");
    mc_expect_error(ISSUE_LINE " --mock-data=yes", "argument --mock-data: ignored explicit argument 'yes'");
    mc_expect_error(ISSUE_LINE " extra", "unrecognized argument 'extra'");
    mc_expect_error("12 " ISSUE_LINE, "unrecognized argument '12'");
    mc_expect_error(ISSUE_LINE " --rampup-batch-size 16 8", "argument --rampup-batch-size: expected 3 arguments");
    mc_expect_error(ISSUE_LINE " --rampup-batch-size 16 x 8", "invalid int value: 'x'");
}

static void test_missing_required(void **state)
{
    (void)state;
    mc_expect_error("--mock-data", "the following arguments are required: --num-layers, --hidden-size");
    mc_expect_error(MINIMAL " --num-layers 0", "--num-layers");
    mc_expect_error("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 "
                 "--max-position-embeddings 64 --micro-batch-size 2 --lr 1e-3 --vocab-size 512",
                 "required: --train-iters or --train-samples");
    mc_expect_error("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 "
                 "--max-position-embeddings 64 --micro-batch-size 2 --train-iters 5 --vocab-size 512",
                 "required: --lr");
    mc_expect_error("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 "
                 "--max-position-embeddings 64 --micro-batch-size 2 --train-iters 5 --lr 1",
                 "required: --vocab-size");
}

/* --num-distributed-optimizer-instances: Megatron's asserts as one line each; what megatron-c
 * lacks with it; and --grad-reduce-in-bf16 turning Megatron's fp32 gradient buffer off. */
static void test_distopt_instances_and_bf16_reduce(void **state)
{
    (void)state;
    static mc_args_t a;
    mc_run_parse_here(&a, ISSUE_LINE " --use-distributed-optimizer "
                                     "--num-distributed-optimizer-instances 2", 4);
    assert_int_equal(a.num_distributed_optimizer_instances, 2);
    mc_run_parse_here(&a, ISSUE_LINE, 1);
    assert_int_equal(a.num_distributed_optimizer_instances, 1);
    mc_expect_error_world(ISSUE_LINE " --num-distributed-optimizer-instances 2", 4,
                          "--num-distributed-optimizer-instances 2 needs "
                          "--use-distributed-optimizer");
    mc_expect_error_world(ISSUE_LINE " --use-distributed-optimizer "
                          "--num-distributed-optimizer-instances 3", 4,
                          "--num-distributed-optimizer-instances (3) must divide the "
                          "data-parallel size times the context-parallel size (4)");
    /* dp 1 x cp 2: the instances divide dp x cp, as Megatron's intra_partial groups */
    mc_expect_error_world(ISSUE_LINE " --use-distributed-optimizer --context-parallel-size 2 "
                          "--num-distributed-optimizer-instances 4", 2,
                          "must divide the data-parallel size times the context-parallel size (2)");
    mc_expect_error_world(ISSUE_LINE " --num-distributed-optimizer-instances 0", 4,
                          "argument --num-distributed-optimizer-instances: invalid value '0'");
    /* expert parallelism: the instances divide the expert data-parallel size too (world 4, ep 2:
     * edp 2) */
    mc_run_parse_here(&a, ISSUE_LINE " --use-distributed-optimizer --num-experts 4 --swiglu "
                                     "--disable-bias-linear --moe-token-dispatcher-type alltoall "
                                     "--expert-model-parallel-size 2 "
                                     "--num-distributed-optimizer-instances 2", 4);
    mc_expect_error_world(ISSUE_LINE " --use-distributed-optimizer --num-experts 4 --swiglu "
                          "--disable-bias-linear --moe-token-dispatcher-type alltoall "
                          "--expert-model-parallel-size 2 --num-distributed-optimizer-instances 4",
                          4, "--num-distributed-optimizer-instances (4) must divide the expert "
                             "data-parallel size (2)");
    /* --grad-reduce-in-bf16: Megatron's accumulate_allreduce_grads_in_fp32 off with --bf16, even
     * when asked for; without --bf16 nothing changes */
    mc_run_parse_here(&a, ISSUE_LINE " --bf16", 1);
    assert_true(a.accumulate_allreduce_grads_in_fp32);
    mc_run_parse_here(&a, ISSUE_LINE " --bf16 --grad-reduce-in-bf16", 1);
    assert_true(a.grad_reduce_in_bf16);
    assert_false(a.accumulate_allreduce_grads_in_fp32);
    mc_run_parse_here(&a, ISSUE_LINE " --bf16 --grad-reduce-in-bf16 "
                                     "--accumulate-allreduce-grads-in-fp32", 1);
    assert_false(a.accumulate_allreduce_grads_in_fp32);
    mc_run_parse_here(&a, ISSUE_LINE " --fp16 --grad-reduce-in-bf16 "
                                     "--accumulate-allreduce-grads-in-fp32", 1);
    assert_true(a.accumulate_allreduce_grads_in_fp32);
}

static void test_validate_args_rules(void **state)
{
    (void)state;
    mc_expect_error(ISSUE_LINE " --global-batch-size 9",
                 "global batch size (9) is not divisible by micro batch size (2) times data parallel size (1)");
    mc_expect_error_world(MINIMAL " --global-batch-size 6", 4,
                       "global batch size (6) is not divisible by micro batch size (2) times data parallel size (4)");
    /* tensor parallelism against heads and sequence (world 8: tp 8 and tp 2 x dp 4) */
    mc_expect_error_world(ISSUE_LINE " --global-batch-size 16 --tensor-model-parallel-size 8", 8,
                       "--num-attention-heads (4) must be divisible by --tensor-model-parallel-size (8)");
    mc_expect_error_world(ISSUE_LINE " --tensor-model-parallel-size 2 --sequence-parallel --seq-length 63 "
                       "--max-position-embeddings 64", 8,
                       "--seq-length (63) must be divisible by --tensor-model-parallel-size (2) with "
                       "--sequence-parallel");
    /* two rules broken: both reported, in Megatron's order */
    mc_expect_errors_world(ISSUE_LINE " --tensor-model-parallel-size 3", 8, 2,
                           (const char *const[]){
                               "world size (8) is not divisible by tensor x pipeline x context "
                               "parallel size",
                               "--num-attention-heads (4) must be divisible by "
                               "--tensor-model-parallel-size (3)"});
    mc_expect_error(ISSUE_LINE " --eval-global-batch-size 5",
                 "eval global batch size (5) is not divisible by eval micro batch size (2)");
    mc_expect_error(ISSUE_LINE " --num-attention-heads 5",
                 "--hidden-size (64) must be divisible by --num-attention-heads (5)");
    mc_expect_error(ISSUE_LINE " --max-position-embeddings 32",
                 "--max-position-embeddings (32) must be greater than or equal to --seq-length (64)");
    mc_expect_error(ISSUE_LINE " --min-lr 1e-2", "--min-lr (0.01) must not exceed --lr (0.001)");
    mc_expect_error(ISSUE_LINE " --swiglu --hidden-size 16",
                    "--swiglu with --hidden-size 16 gives an --ffn-hidden-size of 0");
    mc_expect_error(ISSUE_LINE " --train-samples 100", "--train-iters and --train-samples are mutually exclusive");
    mc_expect_error(ISSUE_LINE " --lr-warmup-fraction 0.1",
                 "can only specify one of --lr-warmup-fraction and --lr-warmup-iters");
    mc_expect_error(ISSUE_LINE " --lr-decay-samples 100", "--lr-decay-samples needs sample-based training");
    mc_expect_error(ISSUE_LINE " --lr-warmup-iters 60", "learning-rate warmup");
    mc_expect_error(ISSUE_LINE " --weight-decay-incr-style linear", "needs both --start-weight-decay and --end-weight-decay");
    mc_expect_error(ISSUE_LINE " --start-weight-decay 0.1", "need --weight-decay-incr-style linear or cosine");
    mc_expect_error(ISSUE_LINE " --padded-vocab-size 100", "--padded-vocab-size (100) is smaller than the vocabulary (512)");
    mc_expect_error(ISSUE_LINE " --batch-size 4", "--batch-size argument is no longer valid, use --micro-batch-size instead");
    mc_expect_error(ISSUE_LINE " --no-position-embedding", "--no-position-embedding is deprecated");
    mc_expect_error(ISSUE_LINE " --save /tmp/ckpt", "--save needs --save-interval");
    mc_expect_error(ISSUE_LINE " --override-opt_param-scheduler --use-checkpoint-opt-param-scheduler",
                 "are mutually exclusive");
}

/* Every broken rule is reported in one run, in Megatron's order; a rule that reads a value
 * an earlier failed rule should have derived (here the microbatch count) is not judged. */
static void test_validate_every_problem(void **state)
{
    (void)state;
    mc_expect_errors(ISSUE_LINE " --global-batch-size 9 --num-attention-heads 5 --min-lr 1e-2 "
                                "--fp16 --bf16 --save /tmp/x",
                     5,
                     (const char *const[]){
                         "global batch size (9) is not divisible by micro batch size (2)",
                         "--hidden-size (64) must be divisible by --num-attention-heads (5)",
                         "--min-lr (0.01) must not exceed --lr (0.001)",
                         "--fp16 and --bf16 are mutually exclusive",
                         "--save needs --save-interval",
                     });
    /* missing required arguments: nothing else is judged on zeros */
    mc_expect_errors("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --micro-batch-size 2 "
                     "--lr 1e-3 --min-lr 1 --fp16 --bf16",
                     1, (const char *const[]){"the following arguments are required"});
}

static void test_not_implemented_flags(void **state)
{
    (void)state;
    mc_expect_error(ISSUE_LINE " --fp16 --bf16", "--fp16 and --bf16 are mutually exclusive");
    mc_expect_error(ISSUE_LINE " --fp32-residual-connection",
                 "--fp32-residual-connection is recognised but not implemented yet in megatron-c (an fp32 "
                 "residual stream in 16-bit training; see docs/FLAGS.md)");
    mc_expect_error(ISSUE_LINE " --save /tmp/ckpt --save-interval 2 --save-retain-interval 3",
                    "--save-retain-interval (3) must be a multiple of --save-interval (2)");
    /* the rerun state machine (train/rerun.h): its error injector validates results */
    mc_expect_error(ISSUE_LINE " --error-injection-rate 10",
                    "--error-injection-rate injects errors only with --rerun-mode validate_results");
    mc_expect_error(ISSUE_LINE " --rerun-mode report_stats --error-injection-rate 10",
                    "--error-injection-rate injects errors only with --rerun-mode validate_results");
    mc_expect_error(ISSUE_LINE " --rerun-mode validate_results --error-injection-rate 10 "
                               "--no-check-for-nan-in-loss-and-grad",
                    "--error-injection-rate needs a result to validate");
    mc_expect_error(ISSUE_LINE " --rerun-mode validate_results --error-injection-rate -1",
                    "argument --error-injection-rate: invalid value '-1' (must be >= 0)");
    mc_expect_error(ISSUE_LINE " --error-injection-type flaky",
                    "argument --error-injection-type: invalid choice: 'flaky'");
    mc_expect_error(ISSUE_LINE " --rerun-mode fast", "argument --rerun-mode: invalid choice: 'fast'");
    mc_expect_error(ISSUE_LINE " --distribute-saved-activations", "--distribute-saved-activations is recognised");
    mc_expect_error(ISSUE_LINE " --pipeline-model-parallel-size 2",
                 "world size (1) is not divisible by tensor x pipeline x context parallel size");
    mc_expect_error(ISSUE_LINE " --pipeline-model-parallel-layout E|t|t|L",
                 "--pipeline-model-parallel-layout is recognised but not implemented yet");
    mc_expect_error(ISSUE_LINE " --tensor-model-parallel-size 2",
                 "world size (1) is not divisible by tensor x pipeline x context parallel size");
    mc_expect_error(ISSUE_LINE " --lr-decay-style WSD", "--lr-decay-style WSD is recognised but not implemented yet");
    mc_expect_error(ISSUE_LINE " --optimizer sgd", "--optimizer sgd is recognised but not implemented yet");
    mc_expect_error(ISSUE_LINE " --quick-geglu", "--quick-geglu is recognised but not implemented yet");
    mc_expect_error(ISSUE_LINE " --ckpt-format torch_dcp", "--ckpt-format torch_dcp is recognised");
    /* nargs: values are consumed up to the next flag, then the flag is refused. */
    mc_expect_error(ISSUE_LINE " --data-path 0.3 a 0.7 b --split 99,1,0",
                 "--mock-data and --data-path are mutually exclusive");
    mc_expect_error(ISSUE_LINE " --data-args-path args.txt", "--data-args-path is recognised but not implemented yet");
    mc_expect_error(ISSUE_LINE " --rampup-batch-size 4 4 300000",
                 "expected no batch-size rampup for iteration-based training");
    mc_expect_error(ISSUE_LINE " --version", "--version must be the first argument");
}

/* --use-checkpoint-args' hook runs between the command line and validation, and values taken
 * from elsewhere pass the same support checks as given ones. */
static void take_hook(mc_args_t *a, void *ctx)
{
    (void)ctx;
    char err[512];
    if (mc_args_take(a, mc_flag_find("--num-layers"), "3", err, sizeof(err)) != 0) mc_fatal("%s", err);
}

static void test_args_hook_and_take(void **state)
{
    (void)state;
    static mc_args_t a;
    mc_args_set_hook(take_hook, NULL);
    mc_run_parse_here(&a, "--device cpu --mock-data --hidden-size 64 --num-attention-heads 4 --seq-length 64 "
                    "--max-position-embeddings 64 --micro-batch-size 2 --train-iters 5 --lr 1e-3 --vocab-size 512", 1);
    mc_args_set_hook(NULL, NULL);
    assert_int_equal(a.num_layers, 3); /* validation saw it: required arguments were complete */
    assert_int_equal(a.ffn_hidden_size, 256);
    char err[512];
    assert_int_equal(mc_args_take(&a, mc_flag_find("--hidden-dropout"), "0.25", err, sizeof(err)), 0);
    assert_true(a.hidden_dropout == 0.25);
    assert_int_equal(mc_args_take(&a, mc_flag_find("--disable-bias-linear"), "False", err, sizeof(err)), 0);
    assert_false(a.add_bias_linear); /* a store_false flag's dest value */
    assert_int_equal(mc_args_take(&a, mc_flag_find("--quick-geglu"), "False", err, sizeof(err)), 0);
    assert_int_equal(mc_args_take(&a, mc_flag_find("--quick-geglu"), "True", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "--quick-geglu is recognised but not implemented yet"));
    assert_int_equal(mc_args_take(&a, mc_flag_find("--optimizer"), "sgd", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "--optimizer sgd is recognised but not implemented yet"));
    assert_int_equal(mc_args_take(&a, mc_flag_find("--rotary-base"), "500000", err, sizeof(err)), 0); /* no-op */
    mc_args_free(&a);
}

static void test_help_and_markdown(void **state)
{
    (void)state;
    static mc_run_t r;
    mc_run_parse(&r, "--help", 1);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.err, "");
    assert_non_null(strstr(r.out, "network size:\n"));
    assert_non_null(strstr(r.out, "  --num-layers NUM_LAYERS"));
    assert_non_null(strstr(r.out, "(default: 128)"));
    assert_non_null(strstr(r.out, "[not implemented yet]"));
    for (size_t i = 0; i < mc_flag_count(); i++) assert_non_null(strstr(r.out, mc_flag_at(i)->name));
    mc_run_parse(&r, ISSUE_LINE " -h", 1);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "megatron-c:\n"));

    mc_run_parse(&r, "--flags-markdown", 1);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.err, "");
    assert_non_null(strstr(r.out, "# megatron-c flags\n"));
    assert_non_null(strstr(r.out, "\n## network size\n\n| flag | default | status | note |\n"));
    assert_non_null(strstr(r.out, "| `--num-layers` | `None` | implemented |"));
    assert_non_null(strstr(r.out, "| `--fp32-residual-connection` | `False` | not implemented yet |"));
    assert_non_null(strstr(r.out, "| `--bf16` | `False` | implemented |"));
    assert_non_null(strstr(r.out, "| `--eval-interval` | `1000` | implemented |"));
}

/* ---- pipeline parallelism (MEGATRON.md 3.1 "Virtual pipeline", 3.2, 5.2) ---- */

/* 8 layers, 8 sequences of 2 per step: 8 microbatches at dp 1. */
#define PP_LINE MINIMAL " --num-layers 8 --global-batch-size 16"

static void test_pipeline_without_vpp(void **state)
{
    (void)state;
    static mc_args_t a;
    mc_run_parse_here(&a, PP_LINE " --pipeline-model-parallel-size 2", 2);
    assert_int_equal(a.pipeline_model_parallel_size, 2);
    assert_int_equal(a.data_parallel_size, 1);
    assert_int_equal(a.num_microbatches, 8);
    assert_int_equal(a.virtual_pipeline_model_parallel_size, 1);
    assert_false(a.overlap_p2p_comm); /* forced off without VPP */
    /* pp x dp; 1F1B has no rule on the microbatch count (one microbatch, four stages) */
    mc_run_parse_here(&a, PP_LINE " --pipeline-model-parallel-size 4 --global-batch-size 4", 8);
    assert_int_equal(a.data_parallel_size, 2);
    assert_int_equal(a.num_microbatches, 1);
    assert_int_equal(a.virtual_pipeline_model_parallel_size, 1);
    /* the group size means nothing without VPP, as in Megatron */
    mc_run_parse_here(&a, PP_LINE " --pipeline-model-parallel-size 2 "
                   "--microbatch-group-size-per-virtual-pipeline-stage 3", 2);
    assert_int_equal(a.microbatch_group_size_per_vp_stage, 3);
    assert_int_equal(a.virtual_pipeline_model_parallel_size, 1);
    mc_run_parse_here(&a, PP_LINE " --no-overlap-p2p-communication", 1);
    assert_false(a.overlap_p2p_comm);
    /* flags that change nothing megatron-c computes */
    mc_run_parse_here(&a, PP_LINE " --pipeline-model-parallel-size 2 --use-ring-exchange-p2p "
                   "--no-scatter-gather-tensors-in-pipeline --wgrad-deferral-limit 0 "
                   "--no-align-grad-reduce --no-align-param-gather", 2);
    assert_int_equal(a.pipeline_model_parallel_size, 2);
}

/* The pipeline's optional overlaps: Megatron's refusals (arguments.validate_args,
 * ModelParallelConfig.__post_init__), one line naming the flag. */
static void test_pipeline_overlap_flags(void **state)
{
    (void)state;
    static mc_args_t a;
    mc_expect_error(ISSUE_LINE " --defer-embedding-wgrad-compute",
                    "--defer-embedding-wgrad-compute: Cannot defer embedding wgrad compute when "
                    "pipeline model parallel is not used");
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 2 "
                          "--defer-embedding-wgrad-compute --no-gradient-accumulation-fusion",
                          2,
                          "--defer-embedding-wgrad-compute: Cannot defer embedding wgrad compute "
                          "when gradient accumulation fusion is not used");
    mc_run_parse_here(&a, PP_LINE " --pipeline-model-parallel-size 2 "
                      "--defer-embedding-wgrad-compute --wgrad-deferral-limit 2", 2);
    assert_true(a.defer_embedding_wgrad_compute);
    assert_int_equal(a.wgrad_deferral_limit, 2);
    assert_true(a.gradient_accumulation_fusion);
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 2 --wgrad-deferral-limit -1 "
                          "--defer-embedding-wgrad-compute", 2,
                          "--wgrad-deferral-limit: Wgrad deferral limit should be greater than or "
                          "equal to 0 when it is enabled!");
    /* ignored without the deferral, as in Megatron */
    mc_run_parse_here(&a, PP_LINE " --pipeline-model-parallel-size 2 --wgrad-deferral-limit -1", 2);
    assert_int_equal(a.wgrad_deferral_limit, -1);
    /* the warmup/flush overlap needs overlapped p2p: the interleaved schedule without
     * --no-overlap-p2p-communication */
    const char *flush = "--overlap-p2p-communication-warmup-flush: Pipeline parallel "
                        "communication overlapping in warmup and flush is only compatible with "
                        "overlap_p2p_comm but not batch_p2p_comm";
    mc_expect_error(ISSUE_LINE " --overlap-p2p-communication-warmup-flush", flush);
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 2 "
                          "--overlap-p2p-communication-warmup-flush", 2, flush);
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 4 "
                          "--num-virtual-stages-per-pipeline-rank 2 --no-overlap-p2p-communication "
                          "--overlap-p2p-communication-warmup-flush", 4, flush);
    mc_run_parse_here(&a, PP_LINE " --pipeline-model-parallel-size 2 "
                      "--num-virtual-stages-per-pipeline-rank 2 "
                      "--overlap-p2p-communication-warmup-flush", 2);
    assert_true(a.overlap_p2p_comm_warmup_flush);
    /* the first chunk's gather inside the optimizer step: validate_args' four asserts in order */
#define OPG PP_LINE " --pipeline-model-parallel-size 2 --overlap-param-gather-with-optimizer-step"
#define DOPT " --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather"
    mc_expect_error_world(OPG, 2, "--overlap-param-gather-with-optimizer-step only supported with "
                                  "distributed optimizer");
    mc_expect_error_world(OPG " --use-distributed-optimizer", 2,
                          "Must use --overlap-param-gather-with-optimizer-step with "
                          "--overlap-param-gather");
    mc_expect_error_world(OPG DOPT, 2, "--overlap-param-gather-with-optimizer-step only supported "
                                       "with interleaved pipeline parallelism");
    mc_expect_error_world(OPG DOPT " --num-virtual-stages-per-pipeline-rank 2 --ckpt-format "
                                   "torch_dist", 2,
                          "--overlap-param-gather-with-optimizer-step not supported with "
                          "distributed checkpointing yet");
    mc_run_parse_here(&a, OPG DOPT " --num-virtual-stages-per-pipeline-rank 2", 2);
    assert_true(a.overlap_param_gather_with_optimizer_step);
#undef OPG
#undef DOPT
}

static void test_pipeline_vpp_derived(void **state)
{
    (void)state;
    static mc_args_t a;
    /* K: vpp = (num_layers / pp) / K */
    mc_run_parse_here(&a, PP_LINE " --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 2", 2);
    assert_int_equal(a.num_layers_per_virtual_pipeline_stage, 2);
    assert_int_equal(a.virtual_pipeline_model_parallel_size, 2);
    assert_true(a.overlap_p2p_comm); /* the default with VPP */
    mc_run_parse_here(&a, PP_LINE " --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1", 2);
    assert_int_equal(a.virtual_pipeline_model_parallel_size, 4);
    /* a vpp of 1 is None: no interleaving, no overlap */
    mc_run_parse_here(&a, PP_LINE " --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 4", 2);
    assert_int_equal(a.virtual_pipeline_model_parallel_size, 1);
    assert_false(a.overlap_p2p_comm);
    /* V: vpp = V */
    mc_run_parse_here(&a, PP_LINE " --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2", 2);
    assert_int_equal(a.num_virtual_stages_per_pipeline_rank, 2);
    assert_int_equal(a.virtual_pipeline_model_parallel_size, 2);
    assert_true(a.overlap_p2p_comm);
    mc_run_parse_here(&a, PP_LINE " --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 1", 2);
    assert_int_equal(a.virtual_pipeline_model_parallel_size, 1);
    assert_false(a.overlap_p2p_comm);
    /* without overlap the interleaved schedule needs pp > 2 */
    mc_run_parse_here(&a, PP_LINE " --pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2 "
                   "--no-overlap-p2p-communication", 4);
    assert_int_equal(a.virtual_pipeline_model_parallel_size, 2);
    assert_false(a.overlap_p2p_comm);
    /* the group size G: pp <= G <= M and M % G in {0} or >= pp (8 microbatches, pp 2) */
    mc_run_parse_here(&a, PP_LINE " --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
                   "--microbatch-group-size-per-virtual-pipeline-stage 3", 2);
    assert_int_equal(a.microbatch_group_size_per_vp_stage, 3);
    mc_run_parse_here(&a, PP_LINE " --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
                   "--microbatch-group-size-per-virtual-pipeline-stage 8", 2);
    assert_int_equal(a.microbatch_group_size_per_vp_stage, 8);
    /* tp x pp x dp */
    mc_run_parse_here(&a, PP_LINE " --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
                   "--num-layers-per-virtual-pipeline-stage 2 --global-batch-size 8", 8);
    assert_int_equal(a.data_parallel_size, 2);
    assert_int_equal(a.num_microbatches, 2);
    assert_int_equal(a.virtual_pipeline_model_parallel_size, 2);
}

/* --rampup-batch-size: update_train_iters' count, the final batch's microbatches (the most any
 * iteration runs), and each ramp batch training reaches checked against the interleaved
 * schedule, which takes pp <= M (Megatron raises at that iteration). */
static void test_rampup_batch_size(void **state)
{
    (void)state;
    static mc_args_t a;
#define RAMP_LINE                                                                                   \
    "--num-layers 8 --hidden-size 64 --num-attention-heads 4 --seq-length 64 "                     \
    "--max-position-embeddings 64 --micro-batch-size 2 --lr 1e-3 --vocab-size 512 "                \
    "--global-batch-size 16 --train-samples 160"
    mc_run_parse_here(&a, RAMP_LINE " --rampup-batch-size 4 4 48", 1);
    assert_int_equal(a.train_iters, 14); /* 8 ramp iterations to 56 samples, 104 // 16 */
    assert_int_equal(a.num_microbatches, 8);
    assert_int_equal(a.rampup_start, 4);
    assert_int_equal(a.rampup_samples, 48);
    mc_args_free(&a); /* the list's strings: the next parse starts from the defaults */
    mc_run_parse_here(&a, RAMP_LINE " --rampup-batch-size 8 8 48 --pipeline-model-parallel-size 2 "
                   "--num-virtual-stages-per-pipeline-rank 2", 2);
    mc_args_free(&a);
    mc_expect_error_world(RAMP_LINE " --rampup-batch-size 4 4 48 --pipeline-model-parallel-size 2 "
                          "--num-virtual-stages-per-pipeline-rank 2 --micro-batch-size 4", 2,
                          "(training, batch size ramp-up: 1 microbatches = global batch size 4");
    mc_expect_error_world(RAMP_LINE " --rampup-batch-size 2 2 48 --micro-batch-size 2", 2,
                          "current global batch size (2) is not divisible by micro-batch-size (2) "
                          "times data parallel size (2)");
    mc_expect_error(RAMP_LINE " --rampup-batch-size 0 4 48",
                 "--rampup-batch-size 0 4 48: the start batch size and increment must be positive");
#undef RAMP_LINE
}

static void test_pipeline_uneven(void **state)
{
    (void)state;
    static mc_args_t a;
    /* num_layers % pp is not required with uneven stages: 3 + 4 */
    mc_run_parse_here(&a, PP_LINE " --num-layers 7 --pipeline-model-parallel-size 2 "
                   "--decoder-first-pipeline-num-layers 3", 2);
    assert_int_equal(a.decoder_first_pipeline_num_layers, 3);
    assert_int_equal(a.decoder_last_pipeline_num_layers, 0);
    assert_int_equal(a.virtual_pipeline_model_parallel_size, 1);
    mc_run_parse_here(&a, PP_LINE " --pipeline-model-parallel-size 3 --decoder-first-pipeline-num-layers 2 "
                   "--decoder-last-pipeline-num-layers 2", 3);
    assert_int_equal(a.decoder_last_pipeline_num_layers, 2);
    /* with VPP through V: every stage's layers split over the chunks */
    mc_run_parse_here(&a, PP_LINE " --num-layers 12 --pipeline-model-parallel-size 3 "
                   "--num-virtual-stages-per-pipeline-rank 2 --decoder-first-pipeline-num-layers 2 "
                   "--decoder-last-pipeline-num-layers 2 --global-batch-size 12", 3);
    assert_int_equal(a.virtual_pipeline_model_parallel_size, 2);
}

/* --account-for-embedding/loss-in-pipeline-split: the embedding (loss) counts as a layer of the
 * split (test_pp_split checks the split itself against Megatron's). */
static void test_pipeline_account_for(void **state)
{
    (void)state;
    static mc_args_t a;
    /* 7 layers + the embedding over 2 stages: 3 + 4 */
    mc_run_parse_here(&a, PP_LINE " --num-layers 7 --pipeline-model-parallel-size 2 "
                   "--account-for-embedding-in-pipeline-split", 2);
    assert_true(a.account_for_embedding_in_pipeline_split);
    assert_false(a.account_for_loss_in_pipeline_split);
    /* K divides the stage's layers counting the embedding and the loss: (6 + 2) / 2 / 2 */
    mc_run_parse_here(&a, PP_LINE " --num-layers 6 --pipeline-model-parallel-size 2 "
                   "--num-layers-per-virtual-pipeline-stage 2 --account-for-embedding-in-pipeline-split "
                   "--account-for-loss-in-pipeline-split", 2);
    assert_int_equal(a.virtual_pipeline_model_parallel_size, 2);
    assert_true(a.account_for_loss_in_pipeline_split);
    /* without pipelining the flags change nothing (Megatron builds every layer) */
    mc_run_parse_here(&a, PP_LINE " --account-for-embedding-in-pipeline-split "
                   "--account-for-loss-in-pipeline-split", 1);

    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 2 "
                       "--account-for-embedding-in-pipeline-split", 2,
                       "number of layers (9, the embedding or loss counted as a layer by "
                       "--account-for-embedding-in-pipeline-split) must be divisible by the "
                       "pipeline-model-parallel size (--num-layers 8, --pipeline-model-parallel-size 2)");
    mc_expect_error_world(PP_LINE " --num-layers 6 --pipeline-model-parallel-size 2 "
                       "--num-virtual-stages-per-pipeline-rank 3 --account-for-embedding-in-pipeline-split "
                       "--account-for-loss-in-pipeline-split", 2,
                       "number of layers on each pipeline rank (4, after "
                       "--account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split) "
                       "must be divisible by the virtual pipeline size (3)");
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 2 "
                       "--account-for-loss-in-pipeline-split", 2,
                       "number of layers of the model (--num-layers 8 + 1 for "
                       "--account-for-loss-in-pipeline-split) must be divisible by the "
                       "pipeline-model-parallel size (2)");
    mc_expect_error_world(PP_LINE " --num-layers 6 --pipeline-model-parallel-size 2 "
                       "--num-layers-per-virtual-pipeline-stage 3 --account-for-embedding-in-pipeline-split "
                       "--account-for-loss-in-pipeline-split", 2,
                       "number of layers per pipeline stage (4 = (--num-layers 6 + 1 for "
                       "--account-for-embedding-in-pipeline-split + 1 for "
                       "--account-for-loss-in-pipeline-split) / --pipeline-model-parallel-size 2) must "
                       "be divisible by the number of layers per virtual pipeline stage");
    /* TransformerConfig refuses them with uneven first/last stages */
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 4 "
                       "--account-for-embedding-in-pipeline-split", 2,
                       "--decoder-first/last-pipeline-num-layers cannot be set at the same time with "
                       "--account-for-embedding-in-pipeline-split (--num-layers 8");
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 2 --decoder-last-pipeline-num-layers 4 "
                       "--account-for-loss-in-pipeline-split", 2,
                       "--decoder-first/last-pipeline-num-layers cannot be set at the same time with "
                       "--account-for-loss-in-pipeline-split");
}

static void test_pipeline_errors(void **state)
{
    (void)state;
    /* at most one way to give VPP */
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 2 "
                       "--num-virtual-stages-per-pipeline-rank 2", 2,
                       "No more than one of the following arguments can be set at the same time: "
                       "--num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank");
    /* K must divide the layers per stage, and the stages the layers */
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 3", 2,
                       "number of layers per pipeline stage (4 = --num-layers 8 / "
                       "--pipeline-model-parallel-size 2) must be divisible by the number of layers "
                       "per virtual pipeline stage (--num-layers-per-virtual-pipeline-stage 3)");
    mc_expect_error_world(PP_LINE " --num-layers 7 --pipeline-model-parallel-size 2 "
                       "--num-layers-per-virtual-pipeline-stage 1", 2,
                       "number of layers of the model (--num-layers 7) must be divisible by the "
                       "pipeline-model-parallel size (2)");
    /* K with uneven stages */
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 2 "
                       "--decoder-first-pipeline-num-layers 2", 2,
                       "please use --num-virtual-stages-per-pipeline-rank to specify virtual pipeline "
                       "parallel degree when enable uneven pipeline parallelism");
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 2 "
                       "--decoder-last-pipeline-num-layers 2", 2, "please use --num-virtual-stages-per-pipeline-rank");
    /* the interleaved schedule's pp rules (validate_args) */
    mc_expect_error(PP_LINE " --num-virtual-stages-per-pipeline-rank 2",
                 "When interleaved schedule is used, pipeline-model-parallel size should be greater than 1");
    mc_expect_error(PP_LINE " --num-layers-per-virtual-pipeline-stage 4",
                 "When interleaved schedule is used, pipeline-model-parallel size should be greater than 1");
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
                       "--no-overlap-p2p-communication", 2,
                       "When interleaved schedule is used and p2p communication overlap is disabled, "
                       "pipeline-model-parallel size should be greater than 2");
    /* its microbatch rules (schedules.py): M % pp with the default group size pp */
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2 "
                       "--global-batch-size 12", 4,
                       "The remainder of M (the total micro-batches) divided by N (number of contiguous "
                       "micro-batches in a virtual pipeline stage) should be 0, or larger than or equal "
                       "to the pipeline-parallel size, but it is 2.");
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2 "
                       "--global-batch-size 12", 4,
                       "(training: 6 microbatches = global batch size 12 / (micro batch size 2 x data "
                       "parallel size 1), pipeline-model-parallel size 4, 2 model chunks per pipeline "
                       "rank, microbatch group size 4)");
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2 "
                       "--global-batch-size 4", 4,
                       "The number of contiguous micro-batches in a virtual pipeline stage should range "
                       "in [PP=4 , M=2]");
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
                       "--microbatch-group-size-per-virtual-pipeline-stage 9", 2, "should range in [PP=2 , M=8]");
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2 "
                       "--microbatch-group-size-per-virtual-pipeline-stage 3", 4, "should range in [PP=4 , M=8]");
    /* G = 5 of M = 8 leaves 3 < pp = 4 */
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2 "
                       "--microbatch-group-size-per-virtual-pipeline-stage 5", 4, "but it is 3.");
    /* and the same for evaluation's microbatches, only when evaluating */
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2 "
                       "--eval-global-batch-size 12", 4,
                       "reduces throughput. (evaluation: 6 microbatches = eval global batch size 12 / (eval "
                       "micro batch size 2 x data parallel size 1)");
    static mc_args_t a;
    mc_run_parse_here(&a, PP_LINE " --pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2 "
                   "--eval-global-batch-size 12 --eval-iters 0", 4);
    assert_int_equal(a.eval_global_batch_size, 12);

    /* even split without VPP */
    mc_expect_error_world(PP_LINE " --num-layers 7 --pipeline-model-parallel-size 2", 2,
                       "Number of layers should be divisible by the pipeline-model-parallel size "
                       "(--num-layers 7, --pipeline-model-parallel-size 2)");
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 3", 2,
                       "number of layers per pipeline rank (4) must be divisible by the virtual pipeline "
                       "size (3) (--num-layers 8, --pipeline-model-parallel-size 2, 3 virtual stages per "
                       "pipeline rank)");
    /* uneven stages: bad counts */
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 0", 2,
                       "argument --decoder-first-pipeline-num-layers: invalid value '0' (must be >= 1)");
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 2 --decoder-last-pipeline-num-layers -1", 2,
                       "argument --decoder-last-pipeline-num-layers: invalid value '-1' (must be >= 1)");
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 9", 2,
                       "decoder first/last pipeline num layers (9, 0) do not add up to num layers 8 "
                       "(--num-layers 8, --pipeline-model-parallel-size 2, "
                       "--decoder-first-pipeline-num-layers 9)");
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 3 "
                       "--decoder-last-pipeline-num-layers 3", 2, "do not add up to num layers 8");
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 3 --decoder-first-pipeline-num-layers 3", 3,
                       "number of layers at middle stage: 5 must be divisible by the middle pipeline "
                       "model parallel size 2");
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 3 --decoder-first-pipeline-num-layers 4 "
                       "--decoder-last-pipeline-num-layers 4", 3,
                       "Mismatch: 0 middle layers remaining but 1 middle PP stages available.");
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
                       "--decoder-first-pipeline-num-layers 3", 2,
                       "number of layers at first stage: 3 must be divisible by virtual pipeline "
                       "parallel degree 2");
    mc_expect_error_world(PP_LINE " --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
                       "--decoder-last-pipeline-num-layers 3", 2,
                       "number of layers at last stage: 3 must be divisible by virtual pipeline "
                       "parallel degree 2");
    mc_expect_error(PP_LINE " --decoder-first-pipeline-num-layers 8",
                 "uneven first/last pipeline stages need pipeline-model-parallel size > 1");
}

/* By hand (mc_args_finalize): the derived fields. */
static void test_pipeline_finalize_by_hand(void **state)
{
    (void)state;
    static mc_args_t a;
    mc_args_defaults(&a);
    a.num_layers = 8, a.hidden_size = 64, a.num_attention_heads = 4, a.seq_length = 32;
    a.max_position_embeddings = 32, a.micro_batch_size = 1, a.global_batch_size = 4, a.lr = 1e-4;
    a.lr_set = true, a.train_iters = 10, a.vocab_size = 128;
    a.pipeline_model_parallel_size = 4, a.num_layers_per_virtual_pipeline_stage = 1;
    mc_args_finalize(&a, 4);
    assert_int_equal(a.virtual_pipeline_model_parallel_size, 2);
    assert_true(a.overlap_p2p_comm);
    assert_int_equal(a.num_microbatches, 4);
}

/* ---- the table itself ---- */

/* Every flag of MEGATRON.md section 3. */
static const char *const spec_flags[] = {
    "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split",
    "--accumulate-allreduce-grads-in-fp32", "--adam-beta1", "--adam-beta2", "--adam-eps",
    "--add-qkv-bias", "--apply-layernorm-1p", "--apply-query-key-layer-scaling",
    "--apply-residual-connection-post-layernorm", "--apply-wd-to-qk-layernorm", "--async-save",
    "--attention-backend", "--attention-dropout", "--attention-softmax-in-fp32",
    "--auto-detect-ckpt-format", "--bf16", "--calculate-per-token-loss",
    "--check-for-nan-in-loss-and-grad", "--ckpt-format", "--clip-grad", "--context-parallel-size",
    "--cross-entropy-loss-fusion", "--data-args-path", "--data-cache-path",
    "--data-parallel-random-init", "--data-path", "--dataloader-type", "--ddp-average-in-collective",
    "--ddp-bucket-size", "--ddp-num-buckets", "--decoder-first-pipeline-num-layers",
    "--decoder-last-pipeline-num-layers", "--decoupled-lr", "--decoupled-min-lr",
    "--decrease-batch-size-if-needed", "--disable-bias-linear", "--distribute-saved-activations",
    "--distributed-backend", "--distributed-timeout-minutes", "--embedding-init-method-std",
    "--empty-unused-memory-level", "--encoder-seq-length", "--end-weight-decay", "--eod-mask-loss",
    "--eval-global-batch-size", "--eval-interval", "--eval-iters", "--eval-micro-batch-size",
    "--exit-duration-in-mins", "--exit-interval", "--exit-on-missing-checkpoint",
    "--exit-signal-handler", "--ffn-hidden-size", "--finetune", "--fp16", "--fp16-lm-cross-entropy",
    "--fp32-residual-connection", "--full-validation", "--global-batch-size", "--grad-reduce-in-bf16",
    "--group-query-attention", "--hidden-dropout", "--hidden-size", "--hysteresis",
    "--init-method-std", "--init-method-xavier-uniform", "--initial-loss-scale", "--kv-channels",
    "--legacy-tokenizer", "--load", "--local-rank", "--log-interval", "--log-memory-to-tensorboard",
    "--log-num-zeros-in-grad", "--log-params-norm", "--log-throughput", "--log-timers-to-tensorboard",
    "--log-validation-ppl-to-tensorboard", "--log-world-size-to-tensorboard", "--loss-scale",
    "--loss-scale-window", "--lr", "--lr-decay-iters", "--lr-decay-samples", "--lr-decay-style",
    "--lr-warmup-fraction", "--lr-warmup-init", "--lr-warmup-iters", "--lr-warmup-samples",
    "--lr-wsd-decay-iters", "--lr-wsd-decay-samples", "--lr-wsd-decay-style", "--main-grads-dtype",
    "--main-params-dtype", "--make-vocab-size-divisible-by", "--max-position-embeddings",
    "--merge-file", "--micro-batch-size", "--microbatch-group-size-per-virtual-pipeline-stage",
    "--mid-level-dataset-surplus", "--min-loss-scale", "--min-lr", "--mock-data",
    "--no-align-grad-reduce", "--no-bias-dropout-fusion", "--no-bias-gelu-fusion",
    "--no-bias-swiglu-fusion", "--no-create-attention-mask-in-dataloader",
    "--no-gradient-accumulation-fusion", "--no-initialization", "--no-load-optim", "--no-load-rng",
    "--no-log-loss-scale-to-tensorboard", "--no-masked-softmax-fusion", "--no-mmap-bin-files",
    "--no-overlap-p2p-communication", "--no-persist-layer-norm", "--no-position-embedding",
    "--no-save-optim", "--no-save-rng", "--non-persistent-save-interval", "--norm-epsilon",
    "--normalization", "--num-attention-heads", "--num-dataset-builder-threads",
    "--num-distributed-optimizer-instances", "--num-layers", "--num-layers-per-virtual-pipeline-stage",
    "--num-query-groups", "--num-virtual-stages-per-pipeline-rank", "--num-workers", "--openai-gelu",
    "--optimizer", "--overlap-grad-reduce", "--overlap-param-gather",
    "--overlap-param-gather-with-optimizer-step", "--override-opt-param-scheduler",
    "--padded-vocab-size", "--per-split-data-args-path", "--pipeline-model-parallel-layout",
    "--pipeline-model-parallel-size", "--position-embedding-type", "--qk-layernorm",
    "--rampup-batch-size", "--recompute-activations", "--recompute-granularity", "--recompute-method",
    "--recompute-modules", "--recompute-num-layers", "--reset-attention-mask", "--reset-position-ids",
    "--rotary-base", "--rotary-interleaved", "--rotary-percent", "--save", "--save-interval",
    "--save-retain-interval", "--seed", "--seq-length", "--sequence-parallel", "--sgd-momentum",
    "--skip-train", "--spec", "--split", "--squared-relu", "--start-eval-at-iter",
    "--start-weight-decay", "--step-batch-size-schedule", "--swiglu", "--tensor-model-parallel-size",
    "--tensorboard-dir", "--tensorboard-log-interval", "--tensorboard-queue-size", "--test-data-path",
    "--timing-log-level", "--timing-log-option", "--tokenizer-model", "--tokenizer-type",
    "--train-data-path", "--train-iters", "--train-samples", "--transformer-impl",
    "--untie-embeddings-and-output-weights", "--use-checkpoint-args",
    "--use-checkpoint-opt-param-scheduler", "--use-cpu-initialization", "--use-distributed-optimizer",
    "--use-legacy-models", "--use-mcore-models", "--use-rotary-position-embeddings",
    "--use-tp-pp-dp-mapping", "--valid-data-path", "--vocab-extra-ids", "--vocab-file", "--vocab-size",
    "--wandb-exp-name", "--wandb-project", "--weight-decay", "--weight-decay-incr-style",
    /* megatron-c's own */
    "--device", "--cpu-threads", "--help", "--flags-markdown", "--version",
};

static void test_table_covers_the_spec(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(spec_flags) / sizeof(spec_flags[0]); i++)
        if (!mc_flag_find(spec_flags[i])) fail_msg("%s is missing from the flag table", spec_flags[i]);
}

static void test_table_names_unique(void **state)
{
    (void)state;
    size_t n = mc_flag_count();
    for (size_t i = 0; i < n; i++) {
        const mc_flag_t *f = mc_flag_at(i);
        assert_int_equal(strncmp(f->name, "--", 2), 0);
        assert_true(strlen(f->name) > 2);
        if (f->alias) assert_int_equal(f->alias[0], '-');
        /* find() returns the first match: a later duplicate name or alias would be unreachable. */
        assert_ptr_equal(mc_flag_find(f->name), f);
        if (f->alias) assert_ptr_equal(mc_flag_find(f->alias), f);
    }
}

static bool in_list(const char *const *list, const char *s)
{
    for (; *list; list++)
        if (strcmp(*list, s) == 0) return true;
    return false;
}

static size_t expected_field_size(const mc_flag_t *f)
{
    switch (f->type) {
    case MC_FLAG_INT: return sizeof(int);
    case MC_FLAG_INT64: return sizeof(int64_t);
    case MC_FLAG_FLOAT: return sizeof(double);
    case MC_FLAG_STORE_TRUE:
    case MC_FLAG_STORE_FALSE: return sizeof(bool);
    default: return 0; /* strings and lists: any buffer */
    }
}

/* A valued flag's default must be a valid value for it (it goes through the same parser). */
static void check_default(const mc_flag_t *f)
{
    if (!f->def || f->type == MC_FLAG_LIST) return;
    char *end;
    switch (f->type) {
    case MC_FLAG_INT:
    case MC_FLAG_INT64:
    case MC_FLAG_FLOAT: {
        double v = strtod(f->def, &end);
        if (*end || !mc_flag_within_bounds(f, v)) fail_msg("%s: default '%s' invalid", f->name, f->def);
        break;
    }
    case MC_FLAG_CHOICE:
        if (!in_list(f->choices, f->def)) fail_msg("%s: default '%s' is not a choice", f->name, f->def);
        break;
    case MC_FLAG_STORE_TRUE:
    case MC_FLAG_STORE_FALSE: assert_true(strcmp(f->def, "True") == 0 || strcmp(f->def, "False") == 0); break;
    default: break;
    }
}

static void check_status(const mc_flag_t *f)
{
    if (f->status == MC_FLAG_NOOP || f->status == MC_FLAG_DEPRECATED || f->status == MC_FLAG_PARTIAL ||
        f->status == MC_FLAG_LEGACY)
        if (!f->note || !*f->note) fail_msg("%s: a %s flag needs a note", f->name, mc_flag_status_name(f->status));
    /* Partial flags list the values megatron-c takes; so may old flags, some of whose values it refuses. */
    if (f->status != MC_FLAG_PARTIAL && !(f->status == MC_FLAG_LEGACY && f->supported)) {
        assert_null(f->supported);
        return;
    }
    assert_non_null(f->supported);
    for (const char *const *v = f->supported; *v; v++)
        if (f->type == MC_FLAG_CHOICE && !in_list(f->choices, *v)) fail_msg("%s: supports unknown '%s'", f->name, *v);
    /* Not giving the flag must never be refused. */
    if (f->def && !in_list(f->supported, f->def)) fail_msg("%s: default '%s' unsupported", f->name, f->def);
}

static void test_table_entries_complete(void **state)
{
    (void)state;
    for (size_t i = 0; i < mc_flag_count(); i++) {
        const mc_flag_t *f = mc_flag_at(i);
        if (!f->help || !*f->help) fail_msg("%s has no help", f->name);
        if (!f->group || !in_list(mc_flag_groups(), f->group)) fail_msg("%s has no known group", f->name);
        if (f->type == MC_FLAG_CHOICE) assert_non_null(f->choices);
        if (f->type == MC_FLAG_LIST) assert_true(f->elem == MC_FLAG_STRING || f->elem == MC_FLAG_INT);
        if (f->field_size && expected_field_size(f) && f->field_size != expected_field_size(f))
            fail_msg("%s: field size %zu does not fit its type", f->name, f->field_size);
        if (f->field_size) assert_true(f->field + f->field_size <= sizeof(mc_args_t));
        check_default(f);
        check_status(f);
    }
    /* Every group has flags. */
    for (const char *const *g = mc_flag_groups(); *g; g++) {
        size_t n = 0;
        for (size_t i = 0; i < mc_flag_count(); i++) n += strcmp(mc_flag_at(i)->group, *g) == 0;
        if (!n) fail_msg("group '%s' is empty", *g);
    }
}

static void test_suggestions(void **state)
{
    (void)state;
    static const char *const typos[][2] = {{"--hiden-size", "--hidden-size"},
                                           {"--seq-lenght", "--seq-length"},
                                           {"--micro-batch", "--micro-batch-size"},
                                           {"--use-mcore-model", "--use-mcore-models"}};
    for (size_t i = 0; i < sizeof(typos) / sizeof(typos[0]); i++) {
        const char *s = mc_flag_suggest(typos[i][0]);
        assert_non_null(s);
        assert_string_equal(s, typos[i][1]);
    }
    assert_null(mc_flag_suggest("--completely-unrelated-thing"));
}

/* The environment knobs are read once (config/env.h): a change after start-up is not seen
 * until they are read again. */
static void test_env_read_once(void **state)
{
    (void)state;
    setenv("MC_TEST_GRAD_POISON", "3:nan", 1);
    mc_env_load();
    assert_string_equal(mc_env_text(MC_ENV_TEST_GRAD_POISON), "3:nan");
    setenv("MC_TEST_GRAD_POISON", "4:inf", 1);
    assert_string_equal(mc_env_text(MC_ENV_TEST_GRAD_POISON), "3:nan");
    unsetenv("MC_TEST_GRAD_POISON");
    mc_env_load();
    assert_null(mc_env_text(MC_ENV_TEST_GRAD_POISON));
    for (int k = 0; k < MC_ENV_COUNT; k++) assert_non_null(mc_env_info((mc_env_knob_t)k)->help);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_are_megatrons),
        cmocka_unit_test(test_issue_command_line),
        cmocka_unit_test(test_data_parallel_derivations),
        cmocka_unit_test(test_padded_vocab),
        cmocka_unit_test(test_shape_flags_given),
        cmocka_unit_test(test_equals_form_last_wins_and_bools),
        cmocka_unit_test(test_noops_and_sequence_parallel),
        cmocka_unit_test(test_data_path_list),
        cmocka_unit_test(test_sample_based_training),
        cmocka_unit_test(test_skip_train_needs_no_length),
        cmocka_unit_test(test_weight_decay_increment),
        cmocka_unit_test(test_no_gloo_groups),
        cmocka_unit_test(test_finalize_by_hand),
        cmocka_unit_test(test_unknown_flag_suggests),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_distopt_instances_and_bf16_reduce),
        cmocka_unit_test(test_missing_required),
        cmocka_unit_test(test_validate_args_rules),
        cmocka_unit_test(test_validate_every_problem),
        cmocka_unit_test(test_not_implemented_flags), cmocka_unit_test(test_args_hook_and_take),
        cmocka_unit_test(test_help_and_markdown),
        cmocka_unit_test(test_pipeline_without_vpp),
        cmocka_unit_test(test_rampup_batch_size),
        cmocka_unit_test(test_pipeline_overlap_flags),
        cmocka_unit_test(test_pipeline_vpp_derived),
        cmocka_unit_test(test_pipeline_uneven),
        cmocka_unit_test(test_pipeline_account_for),
        cmocka_unit_test(test_pipeline_errors),
        cmocka_unit_test(test_pipeline_finalize_by_hand),
        cmocka_unit_test(test_table_covers_the_spec),
        cmocka_unit_test(test_table_names_unique),
        cmocka_unit_test(test_table_entries_complete),
        cmocka_unit_test(test_suggestions),
        cmocka_unit_test(test_env_read_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
