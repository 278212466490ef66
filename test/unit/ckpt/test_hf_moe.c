/* The Hugging Face bridge's MoE classes (ckpt/hf_moe.c, ckpt/hf_map.c): which class a model is,
 * the refusals naming each option neither class holds, and the router's, experts' and q/k norms'
 * tensor names and rows. test/integration/test_hf.sh exports, imports and checks the logits. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/hf.h"
#include "cli/cli.h"

static mc_args_t g_a;

/* 2 layers, hidden 32, 4 heads, 4 experts of ffn 24, top-2: a Mixtral unless told otherwise. */
static mc_args_t *tiny(bool qk_norm, bool pre_softmax)
{
    mc_args_t *a = &g_a;
    mc_args_free(a);
    mc_args_defaults(a);
    a->num_layers = 2;
    a->hidden_size = 32;
    a->num_attention_heads = 4;
    a->ffn_hidden_size = 48;
    a->seq_length = a->max_position_embeddings = 8;
    a->micro_batch_size = a->global_batch_size = 1;
    a->vocab_size = 64;
    a->make_vocab_size_divisible_by = 64;
    a->mock_data = true;
    a->lr_set = true;
    a->train_iters = 1;
    snprintf(a->normalization, sizeof(a->normalization), "RMSNorm");
    snprintf(a->position_embedding_type, sizeof(a->position_embedding_type), "rope");
    a->swiglu = true;
    a->add_bias_linear = false;
    a->num_experts = 4;
    a->moe_router_topk = 2;
    a->moe_ffn_hidden_size = 24;
    a->qk_layernorm = qk_norm;
    a->moe_router_pre_softmax = pre_softmax;
    mc_args_finalize(a, 1);
    return a;
}

/* The class of a, or -1 with err holding the refusal. */
static int class_of(const mc_args_t *a, char *err, size_t n)
{
    mc_hf_class_t c;
    err[0] = 0;
    return mc_hf_class_of(a, &c, err, n) != 0 ? -1 : (int)c;
}

static void test_classes(void **state)
{
    (void)state;
    char err[512];
    assert_int_equal(class_of(tiny(false, false), err, sizeof(err)), MC_HF_MIXTRAL);
    assert_int_equal(class_of(tiny(true, false), err, sizeof(err)), MC_HF_QWEN3_MOE);
    assert_int_equal(class_of(tiny(true, true), err, sizeof(err)), MC_HF_QWEN3_MOE);
    /* Mixtral always renormalises the top-k: pre-softmax routing is Qwen3's only */
    assert_int_equal(class_of(tiny(false, true), err, sizeof(err)), -1);
    assert_non_null(strstr(err, "--moe-router-pre-softmax"));
    mc_args_t *a = tiny(false, false); /* q/k norms without experts: no class */
    a->num_experts = 0;
    a->qk_layernorm = true;
    assert_int_equal(class_of(a, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "--qk-layernorm"));
}

/* Each option neither MoE class holds is refused naming it (set after validation: some need
 * settings the validator asks for that do not matter here). */
static void test_refusals(void **state)
{
    (void)state;
    static const char *const want[] = {"--moe-shared-expert-intermediate-size",
                                       "--moe-router-score-function sigmoid",
                                       "--moe-router-group-topk",
                                       "--moe-router-topk-scaling-factor",
                                       "--moe-expert-capacity-factor",
                                       "--add-bias-linear",
                                       "--moe-layer-freq"};
    char err[512];
    for (int i = 0; i < 7; i++) {
        mc_args_t *a = tiny(false, false);
        switch (i) {
        case 0: a->moe_shared_expert_intermediate_size = 32; break;
        case 1: snprintf(a->moe_router_score_function, 16, "sigmoid"); break;
        case 2: a->moe_router_num_groups = 2, a->moe_router_group_topk = 1; break;
        case 3: a->moe_router_topk_scaling_factor = 2.5; break;
        case 4: a->moe_expert_capacity_factor_set = true; break;
        case 5: a->add_bias_linear = true; break;
        case 6: snprintf(a->moe_layer_freq, sizeof(a->moe_layer_freq), "[1,0]"); break;
        }
        assert_int_equal(class_of(a, err, sizeof(err)), -1);
        if (!strstr(err, want[i])) fail_msg("case %d: '%s' does not name %s", i, err, want[i]);
    }
    mc_args_t *a = tiny(true, false); /* Qwen3 holds dense layers (mlp_only_layers) */
    snprintf(a->moe_layer_freq, sizeof(a->moe_layer_freq), "[1,0]");
    assert_int_equal(class_of(a, err, sizeof(err)), MC_HF_QWEN3_MOE);
}

/* The HF tensor named `name` of the list, or NULL. */
static const mc_hf_tensor_t *find(const mc_hf_tensor_t *t, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0) return &t[i];
    return NULL;
}

static void test_tensor_names(void **state)
{
    (void)state;
    mc_hf_tensor_t *t;
    int n = mc_hf_tensors(tiny(false, false), MC_HF_MIXTRAL, 64, &t);
    /* the embedding (tied: no lm_head), per layer 2 norms, q, k, v, o, the router, 4 experts' 3, the
     * final norm */
    assert_int_equal(n, 1 + 2 * (6 + 1 + 4 * 3) + 1);
    const mc_hf_tensor_t *x = find(t, n, "model.layers.1.block_sparse_moe.experts.3.w3.weight");
    assert_non_null(x);
    assert_string_equal(x->mc, "decoder.layers.1.mlp.experts.local_experts.3.linear_fc1.weight");
    assert_true(x->part == MC_HF_UP && x->rows == 24 && x->cols == 32);
    x = find(t, n, "model.layers.0.block_sparse_moe.experts.2.w2.weight");
    assert_true(x && x->rows == 32 && x->cols == 24);
    x = find(t, n, "model.layers.0.block_sparse_moe.gate.weight");
    assert_true(x && x->rows == 4 && x->cols == 32);
    free(t);
    n = mc_hf_tensors(tiny(true, true), MC_HF_QWEN3_MOE, 64, &t);
    assert_int_equal(n, 1 + 2 * (6 + 2 + 1 + 4 * 3) + 1); /* and q_norm, k_norm */
    assert_non_null(find(t, n, "model.layers.1.mlp.gate.weight"));
    assert_non_null(find(t, n, "model.layers.0.mlp.experts.0.gate_proj.weight"));
    x = find(t, n, "model.layers.1.self_attn.k_norm.weight");
    assert_true(x && x->rows == 8 && x->cols == 0);
    assert_string_equal(x->mc, "decoder.layers.1.self_attention.k_layernorm.weight");
    free(t);
}

/* The up half of an expert's linear_fc1: the rows after its own gate rows (not the dense ffn). */
static void test_up_rows(void **state)
{
    (void)state;
    const mc_args_t *a = tiny(false, false);
    mc_hf_tensor_t *t;
    const int n = mc_hf_tensors(a, MC_HF_MIXTRAL, 64, &t);
    const mc_hf_tensor_t *x = find(t, n, "model.layers.0.block_sparse_moe.experts.1.w3.weight");
    assert_non_null(x);
    mc_param_t p = {.ndim = 2, .shape = {48, 32}};
    float w[48 * 32], hf[24 * 32];
    for (int i = 0; i < 48 * 32; i++) w[i] = (float)i;
    mc_hf_copy(a, x, &p, w, hf, true);
    assert_true(hf[0] == 24 * 32 && hf[24 * 32 - 1] == 48 * 32 - 1);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classes),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_tensor_names),
        cmocka_unit_test(test_up_rows),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mc_args_free(&g_a);
    return rc;
}
