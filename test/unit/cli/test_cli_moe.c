/* The mixture-of-experts command line (issue 31, first phase): Megatron's MoE flags parse into
 * their fields, Megatron's rules for them are one-line errors (exit 2) each, a valid MoE line is
 * refused by name where the MoE layer lacks a part (every part at once), and --moe-layer-freq's
 * patterns evaluate as Python's eval does (config/moe_pattern.h). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "config/args.h"
#include "config/flags.h"
#include "config/moe_pattern.h"
#include "test/unit/cli_run.h"

#define LINE_BIAS                                                                                   \
    "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 64 "                     \
    "--max-position-embeddings 64 --micro-batch-size 2 --lr 1e-3 --train-iters 10 "                \
    "--vocab-size 512 --mock-data"
#define LINE LINE_BIAS " --disable-bias-linear"
#define MOE LINE " --num-experts 4"
#define TP2                                                                                        \
    MOE " --swiglu --tensor-model-parallel-size 2 --sequence-parallel --moe-token-dispatcher-type " \
        "alltoall"

/* The flags take their values into the fields phase 2 reads (parsed, before validation). */
static void test_flags_parse_into_fields(void **state)
{
    (void)state;
    static mc_args_t a;
    mc_args_defaults(&a);
    assert_int_equal(a.expert_model_parallel_size, 1);
    assert_int_equal(a.moe_router_topk, 2);
    assert_string_equal(a.moe_router_score_function, "softmax");
    assert_string_equal(a.moe_token_dispatcher_type, "allgather");
    assert_string_equal(a.moe_token_drop_policy, "probs");
    assert_string_equal(a.moe_layer_freq, "1");
    assert_true(a.moe_router_bias_update_rate == 1e-3);
    assert_false(a.moe_z_loss_coeff_set || a.moe_expert_capacity_factor_set);
    mc_cli_t c = {.prog = "megatron-c"};
    c.nsets = mc_flag_training_sets(c.sets, &a);
    char buf[2048], *argv[MC_RUN_MAX_ARGS];
    int argc = mc_run_split(
        "--num-experts 8 --expert-model-parallel-size 4 --expert-tensor-parallel-size 1 "
        "--moe-ffn-hidden-size 48 --moe-layer-freq ([1]*3+[0])*2 --moe-router-topk 3 "
        "--moe-router-score-function sigmoid --moe-router-pre-softmax "
        "--moe-router-topk-scaling-factor 2.5 --moe-router-dtype fp64 --moe-router-num-groups 4 "
        "--moe-router-group-topk 2 --moe-router-enable-expert-bias --moe-router-bias-update-rate "
        "0.01 --moe-router-load-balancing-type seq_aux_loss global_aux_loss --moe-aux-loss-coeff "
        "1e-2 1e-3 --moe-z-loss-coeff 0 --moe-token-dispatcher-type alltoall "
        "--moe-expert-capacity-factor 1.5 --moe-pad-expert-input-to-capacity "
        "--moe-token-drop-policy position --moe-grouped-gemm --moe-permute-fusion "
        "--moe-shared-expert-intermediate-size 64 --moe-shared-expert-overlap "
        "--moe-shared-expert-gate --moe-per-layer-logging --moe-use-legacy-grouped-gemm",
        buf, sizeof(buf), argv);
    mc_cli_parse(&c, argc, argv);
    assert_int_equal(a.num_experts, 8);
    assert_int_equal(a.expert_model_parallel_size, 4);
    assert_int_equal(a.expert_tensor_parallel_size, 1);
    assert_int_equal(a.moe_ffn_hidden_size, 48);
    assert_string_equal(a.moe_layer_freq, "([1]*3+[0])*2");
    assert_int_equal(a.moe_router_topk, 3);
    assert_string_equal(a.moe_router_score_function, "sigmoid");
    assert_true(a.moe_router_pre_softmax && a.moe_router_enable_expert_bias);
    assert_true(a.moe_router_topk_scaling_factor == 2.5 && a.moe_router_bias_update_rate == 0.01);
    assert_string_equal(a.moe_router_dtype, "fp64");
    assert_int_equal(a.moe_router_num_groups, 4);
    assert_int_equal(a.moe_router_group_topk, 2);
    assert_int_equal(a.n_moe_router_load_balancing_type, 2);
    assert_string_equal(a.moe_router_load_balancing_type[1], "global_aux_loss");
    assert_int_equal(a.n_moe_aux_loss_coeff, 2);
    assert_string_equal(a.moe_aux_loss_coeff[0], "1e-2");
    assert_true(a.moe_z_loss_coeff_set && a.moe_z_loss_coeff == 0); /* 0, not None */
    assert_string_equal(a.moe_token_dispatcher_type, "alltoall");
    assert_true(a.moe_expert_capacity_factor_set && a.moe_expert_capacity_factor == 1.5);
    assert_true(a.moe_pad_expert_input_to_capacity);
    assert_string_equal(a.moe_token_drop_policy, "position");
    assert_true(a.moe_grouped_gemm && a.moe_permute_fusion && a.moe_use_legacy_grouped_gemm);
    assert_int_equal(a.moe_shared_expert_intermediate_size, 64);
    assert_true(a.moe_shared_expert_overlap && a.moe_shared_expert_gate && a.moe_per_layer_logging);
    mc_args_free(&a);
}

/* Checkpoints with their optimizer state at ep 1; at ep > 1 with the distributed optimizer
 * (Megatron's chained optimizer: legacy, or torch_dist's dp_reshardable state), the rest refused
 * by name. */
static void test_expert_parallel_checkpoints(void **state)
{
    (void)state;
    static const char *const ep_save_todo[] = {
        "--ckpt-format torch_dist", "--ckpt-format torch",
        "--use-distributed-optimizer --ckpt-format torch_dist --dist-ckpt-optim-fully-reshardable"};
    for (size_t i = 0; i < sizeof(ep_save_todo) / sizeof(ep_save_todo[0]); i++) {
        char cmd[1024];
        snprintf(cmd, sizeof(cmd), MOE " --swiglu --expert-model-parallel-size 2 "
                 "--moe-token-dispatcher-type alltoall --save /tmp/x --save-interval 5 %s",
                 ep_save_todo[i]);
        mc_expect_error_world(cmd, 2, "MoE layers with --save and --expert-model-parallel-size > 1 "
                              "other than with --use-distributed-optimizer");
    }
    for (int legacy = 0; legacy < 2; legacy++) {
        char cmd[1024];
        snprintf(cmd, sizeof(cmd), MOE " --swiglu --expert-model-parallel-size 2 "
                 "--moe-token-dispatcher-type alltoall --use-distributed-optimizer --ckpt-format "
                 "%s --save /tmp/x --save-interval 5 --load /tmp/x", legacy ? "torch" : "torch_dist");
        mc_run_t rs;
        mc_run_parse(&rs, cmd, 2);
        assert_int_equal(rs.status, 0);
    }
}

/* Issue 31's options once refused, now implemented: fp16 (the loss scaler), per-token loss, the
 * z-loss at tp > 1, full recomputation (the first forward takes no losses or counts). */
static void test_accepted_options(void **state)
{
    (void)state;
    static const char *const done[][2] = {
        {MOE " --swiglu --fp16", "1"},
        {MOE " --swiglu --calculate-per-token-loss --moe-aux-loss-coeff 1e-2", "1"},
        {TP2 " --bf16 --moe-z-loss-coeff 1e-3", "2"},
        {MOE " --swiglu --recompute-granularity full --recompute-method uniform "
             "--recompute-num-layers 1",
         "1"}};
    for (size_t i = 0; i < sizeof(done) / sizeof(done[0]); i++) {
        mc_run_t rk;
        mc_run_parse(&rk, done[i][0], atoi(done[i][1]));
        assert_int_equal(rk.status, 0);
    }
    /* checkpoints at tp > 1 and ep > 1 other than torch_dist with the distributed optimizer */
    mc_expect_error_world(TP2 " --bf16 --save /tmp/x --save-interval 5 --ckpt-format torch "
                              "--expert-model-parallel-size 2 --use-distributed-optimizer",
                          4, "--load or --save with an --expert-tensor-parallel-size other than tp, or at "
                             "--expert-model-parallel-size > 1 other than torch_dist");
    /* the allgather dispatcher (Megatron's default, model/moe_allgather.c) at tp 2 + SP, at
     * tp 2 x ep 2 and at ep 2 */
    static const char *const ag_ok[][2] = {
        {MOE " --swiglu --tensor-model-parallel-size 2 --sequence-parallel", "2"},
        {MOE " --swiglu --tensor-model-parallel-size 2 --sequence-parallel "
             "--expert-model-parallel-size 2",
         "4"},
        {MOE " --swiglu --expert-model-parallel-size 2 --moe-token-dispatcher-type allgather", "2"}};
    for (size_t i = 0; i < sizeof(ag_ok) / sizeof(ag_ok[0]); i++) {
        mc_run_t ra;
        mc_run_parse(&ra, ag_ok[i][0], atoi(ag_ok[i][1]));
        assert_int_equal(ra.status, 0);
    }
}

/* Once refused, now accepted: checkpoints of MoE models (with dense layers among the MoE layers:
 * per-layer torch_dist keys), --log-throughput (Megatron's FLOPs count of MoE layers). */
static void test_checkpoints_and_throughput_accepted(void **state)
{
    (void)state;
    mc_run_t rf;
    mc_run_parse(&rf, MOE " --swiglu --moe-layer-freq 2 --load /tmp/x --no-load-optim", 1);
    assert_int_equal(rf.status, 0);
    mc_run_parse(&rf, MOE " --swiglu --moe-layer-freq [1,0,1,1] --save /tmp/x --save-interval 5",
                 1);
    assert_int_equal(rf.status, 0);
    mc_run_t rs;
    mc_run_parse(&rs, MOE " --swiglu --save /tmp/x --save-interval 5 --load /tmp/x", 1);
    assert_int_equal(rs.status, 0);
    mc_run_t rl;
    mc_run_parse(&rl, MOE " --swiglu --log-throughput", 1);
    assert_int_equal(rl.status, 0);
}

/* A line Megatron accepts is refused by name until the MoE layer exists; the flags alone too,
 * and a dense line is untouched (expert tensor size derived as tp). */
static void test_refused_until_implemented(void **state)
{
    (void)state;
    /* what the MoE layer does not do yet, each refused by name */
    mc_expect_error(MOE, "MoE layers with experts without --swiglu");
    /* an etp other than 1 or tp refused with the allgather dispatcher too */
    mc_expect_error_world(MOE " --swiglu --tensor-model-parallel-size 4 --sequence-parallel "
                              "--expert-tensor-parallel-size 2",
                          4, "an --expert-tensor-parallel-size other than 1 or tp are recognised");
    /* at ep 1 both formats in every optimizer form; at ep > 1 torch_dist dp_reshardable only */
    static const char *const tp_ckpt_ok[] = {
        " --ckpt-format torch_dist --use-distributed-optimizer",
        " --ckpt-format torch_dist --use-distributed-optimizer --dist-ckpt-optim-fully-reshardable",
        " --ckpt-format torch_dist", " --ckpt-format torch --use-distributed-optimizer",
        " --ckpt-format torch"};
    for (size_t i = 0; i < sizeof(tp_ckpt_ok) / sizeof(tp_ckpt_ok[0]); i++) {
        char cmd[512];
        snprintf(cmd, sizeof(cmd), TP2 " --load /tmp/x --save /tmp/x --save-interval 5%s",
                 tp_ckpt_ok[i]);
        mc_run_t rd;
        mc_run_parse(&rd, cmd, 2);
        assert_int_equal(rd.status, 0);
    }
    const char *dist_only = "with --load or --save with an --expert-tensor-parallel-size other";
    mc_expect_error_world(TP2 " --load /tmp/x --ckpt-format torch_dist --expert-model-parallel-size 2",
                          4, dist_only);
    mc_expect_error_world(TP2 " --save /tmp/x --save-interval 5 --ckpt-format torch "
                              "--use-distributed-optimizer --expert-model-parallel-size 2",
                          4, dist_only);
    mc_expect_error_world(TP2 " --load /tmp/x --use-distributed-optimizer "
                              "--expert-tensor-parallel-size 1",
                          2, dist_only);
    mc_expect_error_world(MOE " --swiglu --moe-token-dispatcher-type alltoall "
                              "--expert-tensor-parallel-size 2",
                          2,
                          "--tensor-model-parallel-size 1 and --expert-tensor-parallel-size 2 with "
                          "an --expert-tensor-parallel-size other than 1 or tp are recognised");
    mc_run_t rt;
    mc_run_parse(&rt, TP2, 2);
    assert_int_equal(rt.status, 0);
    mc_run_parse(&rt, TP2 " --expert-model-parallel-size 2 --use-distributed-optimizer --load /tmp/x "
                          "--save /tmp/x --save-interval 5 --ckpt-format torch_dist",
                 4);
    assert_int_equal(rt.status, 0);
    mc_run_parse(&rt, TP2 " --expert-tensor-parallel-size 1 --moe-router-load-balancing-type "
                          "seq_aux_loss --moe-aux-loss-coeff 1e-2",
                 2);
    assert_int_equal(rt.status, 0);
    /* expert parallelism: what its dispatcher does not reach yet (model/moe.c) */
    const char *ep2 = MOE " --swiglu --expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall";
    char line[1024];
    static const char *const ep_todo[][2] = {
        {"--log-num-zeros-in-grad", "--log-num-zeros-in-grad"},
        {"--check-weight-hash-across-dp-replicas-interval 5",
         "--check-weight-hash-across-dp-replicas-interval"}};
    for (size_t i = 0; i < sizeof(ep_todo) / sizeof(ep_todo[0]); i++) {
        char want[256];
        snprintf(line, sizeof(line), "%s %s", ep2, ep_todo[i][0]);
        snprintf(want, sizeof(want), "--expert-model-parallel-size 2 with %s is recognised but not "
                 "implemented yet", ep_todo[i][1]);
        mc_expect_error_world(line, 4, want);
    }
    /* every part the layer lacks at once, one line each (a recipe sees its whole list) */
    static const char *const parts[] = {"--moe-use-legacy-grouped-gemm is recognised",
                                        "MoE layers with --save",
                                        "--expert-model-parallel-size 2 with --log-num-zeros-in-grad"};
    mc_expect_errors_world(MOE " --swiglu --expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall "
                               "--log-num-zeros-in-grad --moe-use-legacy-grouped-gemm "
                               "--calculate-per-token-loss --save /tmp/x --save-interval 5 --log-throughput",
                           2, 3, parts);
    mc_run_t rd; /* a dense model has no expert layers to split */
    mc_run_parse(&rd, LINE " --expert-tensor-parallel-size 2", 2);
    assert_int_equal(rd.status, 0);
    mc_run_t r0;
    mc_run_parse(&r0, MOE " --swiglu --moe-aux-loss-coeff 1e-2 --moe-router-topk 2", 1);
    assert_int_equal(r0.status, 0); /* the MoE layer's scope */
    mc_run_parse(&r0, MOE " --swiglu --expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall", 2);
    assert_int_equal(r0.status, 0); /* expert parallelism's */
    mc_run_parse(&r0, MOE " --swiglu --expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall "
                          "--pipeline-model-parallel-size 2", 4);
    assert_int_equal(r0.status, 0);
    mc_run_parse(&r0, MOE " --swiglu --expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall "
                          "--use-distributed-optimizer", 4);
    assert_int_equal(r0.status, 0);
    /* dense layers among MoE layers; every loss, several types at once; per-layer logging */
    mc_run_parse(&r0,
                 MOE " --swiglu --moe-layer-freq [1,0,1,1] --moe-router-load-balancing-type "
                     "aux_loss seq_aux_loss global_aux_loss --moe-aux-loss-coeff 1e-2 1e-3 1e-4 "
                     "--moe-z-loss-coeff 1e-3 --moe-per-layer-logging --tensorboard-dir /tmp/x",
                 1);
    assert_int_equal(r0.status, 0);
    mc_run_parse(&r0, MOE " --swiglu --moe-layer-freq 2 --moe-router-load-balancing-type "
                          "seq_aux_loss --moe-aux-loss-coeff 1e-2 --moe-z-loss-coeff 0", 1);
    assert_int_equal(r0.status, 0);
    static mc_args_t a;
    mc_run_parse_here(&a, LINE " --tensor-model-parallel-size 2 --sequence-parallel", 4);
    assert_int_equal(a.expert_tensor_parallel_size, 2); /* Megatron's default: tp */
    assert_int_equal(a.num_experts, 0);
    mc_args_free(&a);
    /* the same tp given as the expert tp is the default */
    mc_run_parse_here(&a, LINE " --tensor-model-parallel-size 2 --expert-tensor-parallel-size 2", 2);
    mc_args_free(&a);
    mc_run_t r;
    /* implementation choices (issue 31): accepted, the same numbers */
    mc_run_parse(&r, LINE " --moe-grouped-gemm --moe-permute-fusion --bf16", 1);
    assert_int_equal(r.status, 0);
    mc_run_parse(&r, LINE " --moe-expert-capacity-factor -1", 1); /* negative is None */
    assert_int_equal(r.status, 0);
    mc_run_parse(&r, LINE " --moe-layer-freq 1", 1);
    assert_int_equal(r.status, 0);
}

/* The router's options (kernels/moe_route.h): accepted; what the router does not do yet, by
 * name. */
static void test_router_options(void **state)
{
    (void)state;
    /* the router's options (kernels/moe_route.h): accepted */
    static const char *const router_ok[] = {
        " --moe-router-pre-softmax", " --moe-router-score-function sigmoid",
        " --moe-router-topk-scaling-factor 2.5 --moe-router-pre-softmax",
        " --moe-router-num-groups 2 --moe-router-group-topk 1",
        " --moe-router-num-groups 2",
        " --moe-router-score-function sigmoid --moe-router-enable-expert-bias "
        "--moe-router-bias-update-rate 0.01",
        " --moe-router-dtype fp32"};
    for (size_t i = 0; i < sizeof(router_ok) / sizeof(router_ok[0]); i++) {
        char cmd[512];
        snprintf(cmd, sizeof(cmd), MOE " --swiglu%s", router_ok[i]);
        mc_run_t rr;
        mc_run_parse(&rr, cmd, 1);
        assert_int_equal(rr.status, 0);
    }
    /* and what the router does not do yet, by name */
    mc_expect_error(MOE " --swiglu --moe-router-dtype fp64",
                    "--moe-router-dtype fp64 is recognised but not implemented yet");
    for (int half = 0; half < 2; half++) { /* the router in float32 beside 16-bit activations */
        mc_run_t rr;
        mc_run_parse(&rr, half ? MOE " --swiglu --bf16 --moe-router-dtype fp32"
                               : MOE " --swiglu --fp16 --moe-router-dtype fp32",
                     1);
        assert_int_equal(rr.status, 0);
    }
    /* the routers' expert_bias buffers are in the checkpoints */
    mc_run_t rb;
    mc_run_parse(&rb, MOE " --swiglu --moe-router-score-function sigmoid "
                          "--moe-router-enable-expert-bias --save /tmp/x --save-interval 5 "
                          "--load /tmp/x",
                 1);
    assert_int_equal(rb.status, 0);
}

/* The acceptance list's bad inputs and Megatron's other MoE rules: one line naming the flag. */
static void test_megatron_rules(void **state)
{
    (void)state;
    mc_expect_error(MOE " --moe-router-topk 5", "--moe-router-topk (5) must not exceed --num-experts (4)");
    mc_expect_error(LINE " --moe-router-topk 0", "--moe-router-topk");
    mc_expect_error(LINE " --num-experts 2048", "is more than megatron-c's router holds");
    mc_expect_error_world(MOE " --expert-model-parallel-size 3", 3,
                          "--num-experts (4) must be a multiple of --expert-model-parallel-size (3)");
    mc_expect_error_world(MOE " --moe-token-dispatcher-type alltoall --expert-model-parallel-size 4", 2,
                          "world_size (2) is not divisible by expert_tensor_parallel_size (1) x "
                          "expert_model_parallel_size (4)");
    mc_expect_error_world(MOE " --tensor-model-parallel-size 2 --sequence-parallel "
                              "--expert-tensor-parallel-size 4",
                          2, "world_size (2) is not divisible by expert_tensor_parallel_size (4)");
    mc_expect_error(MOE " --moe-token-dispatcher-type flex", "--moe-token-dispatcher-type flex (DeepEP)");
    mc_expect_error(MOE " --moe-pad-expert-input-to-capacity",
                    "--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor");
    mc_run_t rc; /* token dropping (model/moe_capacity.c) */
    mc_run_parse(&rc,
                 MOE " --swiglu --moe-expert-capacity-factor 1.5 "
                     "--moe-pad-expert-input-to-capacity --moe-token-drop-policy position",
                 1);
    assert_int_equal(rc.status, 0);
    mc_expect_error(LINE " --expert-model-parallel-size 2", "--expert-model-parallel-size 2 needs --num-experts");
    mc_expect_error(LINE " --moe-ffn-hidden-size 32", "--moe-ffn-hidden-size needs --num-experts");
    mc_expect_error_world(MOE " --expert-model-parallel-size 2 --fp16", 2,
                          "expert parallelism is not supported with --fp16");
    mc_expect_error(MOE " --moe-grouped-gemm", "--moe-grouped-gemm needs --bf16");
    mc_expect_error(MOE " --moe-router-topk 1", "--moe-router-topk 1 with softmax scores needs --moe-router-pre-softmax");
    mc_expect_error(MOE " --moe-router-enable-expert-bias", "works with the sigmoid score function only");
    mc_expect_error(MOE " --moe-router-score-function sqrtsoftplus", "--moe-router-score-function sqrtsoftplus");
    mc_expect_error(MOE " --moe-router-group-topk 2", "--moe-router-group-topk needs --moe-router-num-groups");
    mc_expect_error(MOE " --moe-router-group-topk 2 --moe-router-num-groups 3",
                    "--num-experts (4) must be divisible by --moe-router-num-groups (3)");
    mc_expect_error(MOE " --moe-router-group-topk 3 --moe-router-num-groups 2",
                    "--moe-router-group-topk (3) must not exceed --moe-router-num-groups (2)");
    mc_expect_error(MOE " --moe-router-topk 3 --moe-router-group-topk 1 --moe-router-num-groups 2",
                    "--moe-router-topk (3) is more than the experts of the --moe-router-group-topk (1)");
    mc_expect_error(MOE " --moe-router-load-balancing-type sinkhorn", "sinkhorn is recognised but not implemented");
    mc_expect_error(MOE " --moe-router-load-balancing-type sinkhorn --moe-expert-capacity-factor 1",
                    "sinkhorn");
    mc_expect_error(MOE " --moe-router-load-balancing-type aux_loss z_loss",
                    "argument --moe-router-load-balancing-type: invalid choice: 'z_loss'");
    mc_expect_error(MOE " --moe-router-load-balancing-type aux_loss seq_aux_loss",
                    "--moe-aux-loss-coeff has 1 value(s) for 2 --moe-router-load-balancing-type");
    mc_expect_error(MOE " --moe-aux-loss-coeff 1e-2x", "argument --moe-aux-loss-coeff: invalid float value: '1e-2x'");
    mc_expect_error(MOE " --moe-shared-expert-intermediate-size 64 --moe-shared-expert-overlap",
                    "--moe-shared-expert-overlap works with --moe-token-dispatcher-type alltoall only");
    mc_expect_error(MOE " --moe-shared-expert-intermediate-size 0", "--moe-shared-expert-intermediate-size");
    mc_expect_error(LINE_BIAS " --num-experts 4 --moe-shared-expert-intermediate-size 64",
                    "--moe-shared-expert-intermediate-size needs --disable-bias-linear");
    mc_expect_error_world(MOE " --tensor-model-parallel-size 2", 2,
                          "MoE layers with --tensor-model-parallel-size 2 need --sequence-parallel");
    mc_expect_error_world(LINE_BIAS " --num-experts 4 --tensor-model-parallel-size 2 "
                          "--sequence-parallel", 2, "biases in MoE layers need --expert-tensor-parallel-size 1");
    mc_expect_error_world(MOE " --moe-ffn-hidden-size 30 --expert-tensor-parallel-size 4 "
                              "--expert-model-parallel-size 2",
                          8, "must be divisible by --expert-tensor-parallel-size (4)");
    mc_expect_error_world(MOE " --tensor-model-parallel-size 2 --sequence-parallel "
                              "--pipeline-model-parallel-size 2 --use-tp-pp-dp-mapping "
                              "--expert-model-parallel-size 4 --expert-tensor-parallel-size 1",
                          8, "must equal the data parallel size (2)");
    mc_expect_error(MOE " --moe-layer-freq ([1]*3+[0])*2", "--moe-layer-freq '([1]*3+[0])*2' has 8 layers, expected --num-layers (4)");
    mc_expect_error(LINE " --moe-layer-freq [1,a]", "argument --moe-layer-freq: invalid pattern '[1,a]'");
    mc_expect_error(LINE " --moe-layer-freq 0", "argument --moe-layer-freq: invalid value '0'");
    mc_expect_error(MOE " --moe-layer-freq [1,2,1,0]", "layer 1 is neither 0 (dense) nor 1 (MoE)");
}

/* --moe-layer-freq against values Python's eval gives for the same texts. */
static void test_layer_pattern(void **state)
{
    (void)state;
    static const struct {
        const char *freq;
        int layers;
        const char *want; /* 0/1 per layer, or NULL: refused */
    } cases[] = {
        {"1", 4, "1111"},
        {"2", 5, "10101"},
        {"3", 7, "1001001"},
        {"([1]*3+[0]*1)*3", 12, "111011101110"},
        {"([0]+[1]*23)", 24, "011111111111111111111111"},
        {"([1]*3+[0]*2)*2", 10, "1110011100"},
        {"2*[1,0]+[1]", 5, "10101"},
        {"[1]*(1+2)", 3, "111"},
        {"[1,0,]*2", 4, "1010"},
        {"[0]*0+[1]", 1, "1"},
        {"[1]*2", 3, NULL},  /* wrong length */
        {"[1 ,0]", 2, NULL}, /* a space: Megatron's alphabet check */
        {"[[1],[0]]", 2, NULL},
        {"[1]+1", 2, NULL},
        {"[1]*[2]", 2, NULL},
        {"(1,0)", 2, NULL},
        {"[1,0", 2, NULL},
        {"[1,0])", 2, NULL},
        {"x", 2, NULL},
        {"-1", 2, NULL},
        {"", 2, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        bool is_moe[32];
        char err[256] = "";
        int r = mc_moe_layer_pattern(cases[i].freq, cases[i].layers, is_moe, err, sizeof(err));
        if (!cases[i].want) {
            if (r >= 0) fail_msg("'%s' accepted", cases[i].freq);
            assert_non_null(strstr(err, "--moe-layer-freq"));
            assert_null(strchr(err, '\n'));
            continue;
        }
        if (r < 0) fail_msg("'%s': %s", cases[i].freq, err);
        int ones = 0;
        for (int l = 0; l < cases[i].layers; l++) {
            assert_int_equal(is_moe[l], cases[i].want[l] == '1');
            ones += cases[i].want[l] == '1';
        }
        assert_int_equal(r, ones);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flags_parse_into_fields),
        cmocka_unit_test(test_refused_until_implemented),
        cmocka_unit_test(test_checkpoints_and_throughput_accepted), cmocka_unit_test(test_accepted_options),
        cmocka_unit_test(test_router_options),
        cmocka_unit_test(test_expert_parallel_checkpoints),
        cmocka_unit_test(test_megatron_rules),
        cmocka_unit_test(test_layer_pattern),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
