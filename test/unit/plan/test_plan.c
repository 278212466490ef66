/* The pieces of `megatron-c plan`'s time model (plan/time.c) with hand-computed values: the GEMM
 * roofline with wave quantisation, the GPU table, the sizing backend the memory plan uses for a
 * GPU it does not have, and an MoE model's parameters and dispatcher volume (plan/moe.c). The
 * whole plan is checked against runs and the paper in test/integration/test_plan.sh. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/device.h"
#include "plan/plan.h"

/* A large GEMM whose tiles fill whole waves reaches the cuBLAS ceiling. */
static void test_gemm_ceiling(void **state)
{
    (void)state;
    const mc_gpu_t *g = mc_gpu_find("a100");
    assert_non_null(g);
    /* 256*108 x 128*16 tiles: 16 full waves on 108 SMs */
    const double M = 256 * 108, N = 128 * 16, K = 8192;
    double eff;
    const double s = mc_plan_gemm_seconds(g, 1, M, N, K, 2, &eff);
    assert_true(fabs(eff - g->gemm_ceiling) < 1e-12);
    assert_true(fabs(s - 2 * M * N * K / (312e12 * 0.80)) < 1e-12);
}

/* One tile more than the SMs takes two waves: the second is nearly empty. */
static void test_wave_quantisation(void **state)
{
    (void)state;
    const mc_gpu_t *g = mc_gpu_find("h100");
    double eff;
    mc_plan_gemm_seconds(g, 1, 256 * 7, 128 * 19, 16384, 2, &eff); /* 133 tiles */
    assert_true(fabs(eff - g->gemm_ceiling * 133.0 / (2 * 132)) < 1e-12);
}

/* A GEMM with K = 1 is memory-bound: its time is its bytes at the HBM fraction. */
static void test_memory_bound(void **state)
{
    (void)state;
    const mc_gpu_t *g = mc_gpu_find("h200");
    const double M = 8192, N = 8192, K = 1;
    const double s = mc_plan_gemm_seconds(g, 1, M, N, K, 2, NULL);
    const double bytes = (M * K + K * N + M * N) * 2;
    assert_true(fabs(s - bytes / (4800e9 * MC_PLAN_HBM_FRACTION)) < 1e-15);
    assert_true(mc_plan_gemm_seconds(g, 1, 0, N, K, 2, NULL) == 0);
}

static void test_gpu_table(void **state)
{
    (void)state;
    assert_null(mc_gpu_find("v100"));
    const mc_gpu_t *a = mc_gpu_find("a100"), *h = mc_gpu_find("h200");
    assert_int_equal((int)a->peak_tflops, 312);
    assert_int_equal((int)a->memory_gb, 80);
    assert_int_equal((int)h->memory_gb, 141);
    assert_int_equal(h->sms, 132);
}

/* The sizing backend has the CUDA attention's sizes (row statistics only) and no compute op;
 * the CPU one keeps the probabilities. */
static void test_sizing_backend(void **state)
{
    (void)state;
    const mc_backend_t *cuda = mc_backend_sizing("cuda"), *cpu = mc_backend_sizing("cpu");
    assert_non_null(cuda);
    assert_non_null(cpu);
    assert_null(mc_backend_sizing("tpu"));
    assert_string_equal(cuda->name, "cuda");
    assert_null(cuda->linear_forward);
    size_t st, sc;
    cuda->attention_sizes(cuda, MC_DT_BF16, 2048, 2, 16, 128, &st, &sc);
    assert_int_equal(st, 2 * 2048 * 2 * 16 * sizeof(float));
    assert_int_equal(sc, 2048 * 2 * 16 * sizeof(float));
    cpu->attention_sizes(cpu, MC_DT_BF16, 64, 2, 4, 16, &st, &sc);
    assert_int_equal(st, 2 * 4 * 64 * 64 * 2);
}

/* A dense layer and an MoE layer with a shared expert and its gate (h 64, 4 heads of 16, swiglu,
 * RMSNorm, untied, V 256, 4 experts of 32, top-2, shared 48), by hand:
 *   embedding, output 2 * 256*64 = 32768, final norm 64; each layer's norms and attention
 *   2*64 + 64*192 + 64*64 = 16512; dense MLP 64*256 + 128*64 = 24576; MoE layer: router 4*64 =
 *   256, shared expert 64*96 + 48*64 + gate 64 = 9280, experts 4 * (64*64 + 32*64) = 24576
 *   -> 124544, of which experts 24576; a token's: 124544 - 24576 * 2/4 = 112256.
 * At ep 2 with micro batch 1 and seq 32 in fp32: T = 32 tokens, R = 64 rows; each way 4
 * all-to-alls of 2*64*64*4 (rows) + 64*4 (probabilities) + 4*4 (counts) = 33040 bytes; over
 * dp 4 the experts reduce over edp 2. */
static void test_moe(void **state)
{
    (void)state;
    static mc_args_t a;
    mc_args_defaults(&a);
    a.num_layers = 2, a.hidden_size = 64, a.num_attention_heads = 4, a.kv_channels = 16;
    a.num_query_groups = 4, a.ffn_hidden_size = 128, a.swiglu = true, a.add_bias_linear = false;
    snprintf(a.normalization, sizeof(a.normalization), "RMSNorm");
    snprintf(a.position_embedding_type, sizeof(a.position_embedding_type), "rope");
    a.untie_embeddings_and_output_weights = true, a.padded_vocab_size = 256;
    a.num_experts = 4, a.moe_ffn_hidden_size = 32, a.moe_router_topk = 2;
    a.moe_shared_expert_intermediate_size = 48, a.moe_shared_expert_gate = true;
    snprintf(a.moe_layer_freq, sizeof(a.moe_layer_freq), "[0,1]");
    mc_plan_params_t p;
    mc_plan_params(&a, &p);
    assert_true(p.total == 124544 && p.experts == 24576 && p.active == 112256);
    assert_int_equal(p.moe_layers, 1);

    a.seq_length = 32, a.micro_batch_size = 1, a.expert_model_parallel_size = 2;
    a.moe_shared_expert_intermediate_size = 0;
    a.tensor_model_parallel_size = 1, a.context_parallel_size = 1, a.data_parallel_size = 4;
    mc_cluster_t cl = {.gpu = *mc_gpu_find("h100"), .num_gpus = 4, .gpus_per_node = 8};
    mc_plan_moe_t m;
    snprintf(a.moe_token_dispatcher_type, sizeof(a.moe_token_dispatcher_type), "alltoall");
    mc_plan_moe_layer(&a, &cl, &m);
    assert_true(m.a2a_bytes == 33040 && m.a2a_calls == 4 && m.etp_calls == 0 && m.map_bytes == 0);
    /* the allgather dispatcher over ep 2: the map (2*32*4), probabilities (2*32*4*4) and rows
     * (2*32*64*4) gathered, the output reduce-scattered (2*32*64*4): 34048 bytes in 4 calls */
    snprintf(a.moe_token_dispatcher_type, sizeof(a.moe_token_dispatcher_type), "allgather");
    mc_plan_moe_layer(&a, &cl, &m);
    assert_true(m.a2a_bytes == 34048 && m.a2a_calls == 4 && m.etp_calls == 0 && m.map_bytes == 256);
    assert_int_equal(mc_plan_edp(&a), 2);
}

/* --tp-comm-overlap (plan/tp_overlap.c) on the 32B row of Megatron-Core's H100 table (tp 8, h
 * 7168, 56 heads, ffn 4h, seq 4096, micro batch 1, bf16): the GEMMs hide most of the layer's ten
 * collectives; what stays is at least the last pipelined split of each reduce-scatter and at
 * most the collectives themselves; on a link 1000 times slower nothing is hidden but the GEMMs'
 * length. */
static void test_tp_overlap(void **state)
{
    (void)state;
    static mc_args_t a;
    mc_args_defaults(&a);
    a.num_layers = 48, a.hidden_size = 7168, a.num_attention_heads = 56, a.kv_channels = 128;
    a.num_query_groups = 56, a.ffn_hidden_size = 4 * 7168, a.seq_length = 4096;
    a.micro_batch_size = 1, a.tensor_model_parallel_size = 8, a.context_parallel_size = 1;
    const mc_gpu_t *g = mc_gpu_find("h100");
    const double X = 4096.0 * 7168 * 2, t = 8;
    const double one = mc_plan_ring_seconds((t - 1) / t * X, 7, g->intra_gbps);
    const double s = mc_plan_tp_overlap_layer(&a, g, g->intra_gbps, 2, 1, false);
    const double split = mc_plan_ring_seconds((t - 1) / t * X / 4, 7, g->intra_gbps);
    assert_true(s >= 2 * split && s < 0.5 * 10 * one);
    /* recomputation adds the forward's again; an MoE layer keeps the attention pair's alone */
    assert_true(mc_plan_tp_overlap_layer(&a, g, g->intra_gbps, 2, 1, true) > s);
    assert_true(mc_plan_tp_overlap_layer(&a, g, g->intra_gbps, 2, 0.5, false) < s);
    double sh[MC_PLAN_LAYER_GEMMS][3], gemms = 0;
    mc_plan_layer_gemms(&a, sh);
    for (int i = 0; i < MC_PLAN_LAYER_GEMMS; i++)
        gemms += mc_plan_gemm_seconds(g, 1, sh[i][0], sh[i][1], sh[i][2], 2, NULL);
    const double slow = g->intra_gbps / 1000;
    const double all = 10 * mc_plan_ring_seconds((t - 1) / t * X, 7, slow);
    const double x = mc_plan_tp_overlap_layer(&a, g, slow, 2, 1, false);
    assert_true(x > 0.9 * all - 3 * gemms && x < all);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_ceiling),   cmocka_unit_test(test_wave_quantisation),
        cmocka_unit_test(test_memory_bound),   cmocka_unit_test(test_gpu_table),
        cmocka_unit_test(test_sizing_backend), cmocka_unit_test(test_moe),
        cmocka_unit_test(test_tp_overlap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
