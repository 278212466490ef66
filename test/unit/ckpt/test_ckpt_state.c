/* ckpt/state.h pieces that the integration tests reach only through whole checkpoints:
 * the 16-bit rounding of a 16-bit model's saved weights, and the parameters' order and names in
 * Transformer Engine's spec. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/device.h"
#include "model/gpt.h"
#include "ckpt/state.h"
#include "ckpt/torchdist.h"

static const mc_backend_t *cpu(void)
{
    char why[128];
    return mc_backend_select("cpu", 1, 0, why, sizeof(why));
}

static uint16_t rounded(float v, mc_torch_dtype_t dt)
{
    const int64_t shape[1] = {1};
    mc_pyobj_t *t = mc_ckpt_host_tensor_as(cpu(), &v, 1, shape, dt);
    assert_non_null(t);
    assert_int_equal(t->tensor.dtype, dt);
    uint16_t bits = *(const uint16_t *)mc_py_tensor_data(t);
    mc_py_decref(t);
    return bits;
}

/* torch's .to(torch.float16): round to nearest even, subnormals, overflow to inf */
static void test_float16_rounding(void **state)
{
    (void)state;
    const struct {
        float v;
        uint16_t bits;
    } cases[] = {
        {1.0f, 0x3c00}, {-2.0f, 0xc000}, {0.0f, 0x0000}, {-0.0f, 0x8000},
        {1.0f + 0x1p-11f, 0x3c00},       /* tie: to even */
        {1.0f + 3 * 0x1p-11f, 0x3c02},   /* tie: to even, upwards */
        {1.0f + 0x1.8p-11f, 0x3c01},     /* above the tie */
        {65504.0f, 0x7bff}, {65519.0f, 0x7bff}, {65520.0f, 0x7c00}, {1e6f, 0x7c00},
        {0x1p-14f, 0x0400},              /* smallest normal */
        {0x1p-14f - 0x1p-25f, 0x0400},   /* rounds up into the normals */
        {0x1p-24f, 0x0001},              /* smallest subnormal */
        {0x1p-25f, 0x0000},              /* tie: to even (zero) */
        {3 * 0x1p-25f, 0x0002},          /* tie: to even */
        {INFINITY, 0x7c00}, {-INFINITY, 0xfc00},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (rounded(cases[i].v, MC_TORCH_FLOAT16) != cases[i].bits)
            fail_msg("float16 of %a: 0x%04x, want 0x%04x", cases[i].v, rounded(cases[i].v, MC_TORCH_FLOAT16),
                     cases[i].bits);
    assert_true((rounded(NAN, MC_TORCH_FLOAT16) & 0x7c00) == 0x7c00 && (rounded(NAN, MC_TORCH_FLOAT16) & 0x3ff));
}

static void test_bfloat16_rounding(void **state)
{
    (void)state;
    const struct {
        float v;
        uint16_t bits;
    } cases[] = {
        {1.0f, 0x3f80}, {-1.0f, 0xbf80}, {1.0f + 0x1p-8f, 0x3f80}, {1.0f + 3 * 0x1p-8f, 0x3f82},
        {1.0f + 0x1.8p-8f, 0x3f81}, {3.4028235e38f, 0x7f80}, {INFINITY, 0x7f80}, {0x1p-130f, 0x0008},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (rounded(cases[i].v, MC_TORCH_BFLOAT16) != cases[i].bits)
            fail_msg("bfloat16 of %a: 0x%04x, want 0x%04x", cases[i].v, rounded(cases[i].v, MC_TORCH_BFLOAT16),
                     cases[i].bits);
    const uint16_t nan = rounded(NAN, MC_TORCH_BFLOAT16);
    assert_true((nan & 0x7f80) == 0x7f80 && (nan & 0x7f));
    /* and back: a bfloat16 value read into fp32 and rounded again is itself */
    const float v = 0.123456f;
    const int64_t shape[1] = {1};
    mc_pyobj_t *t = mc_ckpt_host_tensor_as(cpu(), &v, 1, shape, MC_TORCH_BFLOAT16);
    float back;
    char err[256];
    assert_int_equal(mc_ckpt_tensor_into(cpu(), &back, MC_DT_F32, t, 1, shape, "x", err, sizeof(err)), 0);
    assert_int_equal(rounded(back, MC_TORCH_BFLOAT16), *(const uint16_t *)mc_py_tensor_data(t));
    mc_py_decref(t);
}

/* Two layers on one chunk: TE's order moves linear_proj before linear_qkv's LayerNorm and
 * renames the LayerNorms; the local order is the table's. */
static void test_te_order_and_names(void **state)
{
    (void)state;
    mc_gpt_config_t c = {.num_layers = 2, .hidden = 8, .heads = 2, .head_dim = 4, .ffn = 16, .seq = 4,
                         .max_batch = 1, .vocab = 16, .max_pos = 4, .bias = true, .tied = true, .tp = 1};
    mc_gpt_t m;
    mc_gpt_build_params(&m, &c);
    mc_ckpt_order_t local, te;
    assert_int_equal(mc_ckpt_order_spec(&m, MC_CKPT_NAMES_LOCAL, &local), 0);
    assert_int_equal(mc_ckpt_order_spec(&m, MC_CKPT_NAMES_TE, &te), 0);
    assert_int_equal(local.n, m.n_params);
    assert_int_equal(te.n, m.n_params);
    for (int k = 0; k < local.n; k++) assert_int_equal(local.param[k], k);
    const char *want[] = {"embedding.word_embeddings.weight", "embedding.position_embeddings.weight",
                          "decoder.layers.0.self_attention.linear_proj.weight",
                          "decoder.layers.0.self_attention.linear_proj.bias",
                          "decoder.layers.0.input_layernorm.weight", "decoder.layers.0.input_layernorm.bias",
                          "decoder.layers.0.self_attention.linear_qkv.weight"};
    for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++)
        assert_string_equal(m.params[te.param[k]].name, want[k]);
    m.be = cpu();
    m.param_buf = calloc((size_t)m.n_elems, sizeof(float));
    assert_non_null(m.param_buf);
    mc_pyobj_t *sd = mc_ckpt_model_dict(&m, &te, 0, MC_TORCH_FLOAT32);
    assert_non_null(sd);
    const char *keys[] = {"embedding.word_embeddings.weight", "embedding.position_embeddings.weight",
                          "decoder.layers.0.self_attention.linear_proj.weight",
                          "decoder.layers.0.self_attention.linear_proj.bias",
                          "decoder.layers.0.self_attention.linear_proj._extra_state",
                          "decoder.layers.0.self_attention.linear_qkv.layer_norm_weight",
                          "decoder.layers.0.self_attention.linear_qkv.layer_norm_bias",
                          "decoder.layers.0.self_attention.linear_qkv.weight",
                          "decoder.layers.0.self_attention.linear_qkv.bias",
                          "decoder.layers.0.self_attention.linear_qkv._extra_state",
                          "decoder.layers.0.mlp.linear_fc1.layer_norm_weight"};
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
        assert_string_equal(mc_py_get_str(sd->dict.keys[k]), keys[k]);
    /* TE's extra state is an empty uint8 tensor; the output layer's (Megatron's own) None */
    const mc_pyobj_t *x = mc_py_dict_get_str(sd, "decoder.layers.1.mlp.linear_fc2._extra_state");
    assert_true(x && x->kind == MC_PY_TENSOR && x->tensor.dtype == MC_TORCH_UINT8 && mc_py_tensor_numel(x) == 0);
    x = mc_py_dict_get_str(sd, "output_layer._extra_state");
    assert_true(x && x->kind == MC_PY_NONE);
    /* the file's order read back from the dict is TE's, in either spec's names */
    mc_pyobj_t *ck = mc_py_dict();
    assert_int_equal(mc_py_dict_set_str(ck, "model", sd), 0);
    mc_ckpt_order_t back;
    char err[256];
    assert_int_equal(mc_ckpt_order_file(&m, ck, &back, err, sizeof(err)), 0);
    assert_int_equal(back.names, MC_CKPT_NAMES_TE);
    assert_int_equal(back.n, te.n);
    assert_memory_equal(back.param, te.param, (size_t)te.n * sizeof(int));
    /* a tensor the model lacks is named */
    assert_int_equal(mc_py_dict_set_str(mc_py_dict_get_str(ck, "model"), "decoder.layers.0.extra.weight",
                                        mc_py_none()),
                     0);
    mc_ckpt_order_free(&back);
    assert_int_equal(mc_ckpt_order_file(&m, ck, &back, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "unexpected tensor 'decoder.layers.0.extra.weight'"));
    mc_py_decref(ck);
    mc_ckpt_order_free(&local);
    mc_ckpt_order_free(&te);
    free(m.param_buf);
    m.param_buf = NULL;
    m.be = NULL;
    mc_gpt_free(&m);
}

/* An MoE model's experts as expert-parallel rank 1 of 2 holds them (experts 4..7 of 8): the
 * legacy keys number them from 0 on the rank (SequentialMLP's local_experts.<j>, each linear's
 * _extra_state after it), torch_dist places them at their global expert in [L, E, rows, cols],
 * SwiGLU's fc1 as its gate rows and its up rows. */
static void test_expert_keys(void **state)
{
    (void)state;
    mc_gpt_config_t c = {.num_layers = 2, .hidden = 8, .heads = 2, .head_dim = 4, .ffn = 16, .seq = 4,
                         .max_batch = 1, .vocab = 16, .max_pos = 4, .tied = true, .tp = 1, .rms = true,
                         .swiglu = true};
    c.moe.num_experts = 4;
    c.moe.ffn = 6;
    c.moe.router.topk = 2;
    c.moe.layer[0] = c.moe.layer[1] = true;
    mc_gpt_t m;
    mc_gpt_build_params(&m, &c);
    m.cfg.moe.num_experts = 8; /* this rank's 4 are experts 4..7 of 8 */
    int experts = 0;
    for (int i = 0; i < m.n_params; i++)
        if (m.params[i].expert >= 0) m.params[i].expert += 4, experts++;
    assert_int_equal(experts, 2 * 2 * 4);
    const mc_param_t *p = mc_gpt_find_param(&m, "decoder.layers.1.mlp.router.weight");
    assert_non_null(p);
    p += 5; /* router, expert 4's fc1 and fc2, expert 5's fc1 and fc2: expert 6's fc1 */
    assert_int_equal(p->expert, 6);
    assert_int_equal(mc_ckpt_local_expert(&m, p), 2);
    char key[160];
    mc_ckpt_param_key(&m, 0, p, MC_CKPT_NAMES_LOCAL, key, sizeof(key));
    assert_string_equal(key, "decoder.layers.1.mlp.experts.local_experts.2.linear_fc1.weight");
    m.be = cpu();
    m.param_buf = calloc((size_t)m.n_elems, sizeof(float));
    assert_non_null(m.param_buf);
    mc_ckpt_order_t o;
    assert_int_equal(mc_ckpt_order_spec(&m, MC_CKPT_NAMES_LOCAL, &o), 0);
    mc_pyobj_t *sd = mc_ckpt_model_dict(&m, &o, 0, MC_TORCH_FLOAT32);
    assert_non_null(sd);
    const char *keys[] = {"decoder.layers.0.mlp.router.weight",
                          "decoder.layers.0.mlp.experts.local_experts.0.linear_fc1.weight",
                          "decoder.layers.0.mlp.experts.local_experts.0.linear_fc1._extra_state",
                          "decoder.layers.0.mlp.experts.local_experts.0.linear_fc2.weight",
                          "decoder.layers.0.mlp.experts.local_experts.0.linear_fc2._extra_state",
                          "decoder.layers.0.mlp.experts.local_experts.1.linear_fc1.weight"};
    size_t at = 0;
    while (at < sd->dict.len && strcmp(mc_py_get_str(sd->dict.keys[at]), keys[0]) != 0) at++;
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
        assert_string_equal(mc_py_get_str(sd->dict.keys[at + k]), keys[k]);
    /* read back: the same order */
    mc_pyobj_t *ck = mc_py_dict();
    assert_int_equal(mc_py_dict_set_str(ck, "model", sd), 0);
    mc_ckpt_order_t back;
    char err[256];
    assert_int_equal(mc_ckpt_order_file(&m, ck, &back, err, sizeof(err)), 0);
    assert_memory_equal(back.param, o.param, (size_t)o.n * sizeof(int));
    mc_ckpt_order_free(&back);
    mc_py_decref(ck);
    mc_ckpt_order_free(&o);
    /* torch_dist: expert 6 of layer 1 at [1, 6], fc1's two halves at rows 0 and 6 of 12 */
    mc_shard_t *sh;
    int n;
    assert_int_equal(mc_torchdist_shards(&m, &sh, &n), 0);
    int found = 0;
    for (int k = 0; k < n; k++) {
        if (&m.params[sh[k].param] != p) continue;
        assert_string_equal(sh[k].key, "decoder.layers.mlp.experts.experts.linear_fc1.weight");
        assert_int_equal(sh[k].ndim, 4);
        const int64_t global[4] = {2, 8, 12, 8};
        assert_memory_equal(sh[k].global, global, sizeof(global));
        const int64_t offsets[4] = {1, 6, found ? 6 : 0, 0}, sizes[4] = {1, 1, 6, 8};
        assert_memory_equal(sh[k].offsets, offsets, sizeof(offsets));
        assert_memory_equal(sh[k].sizes, sizes, sizeof(sizes));
        assert_int_equal(sh[k].start, found ? 48 : 0);
        assert_int_equal(sh[k].numel, 48);
        found++;
    }
    assert_int_equal(found, 2);
    free(sh);
    /* the router's expert_bias: [L, E] stacked as its weight, replicated over tp */
    mc_shard_t b;
    mc_torchdist_expert_bias_shard(&m, 1, &b);
    assert_string_equal(b.key, "decoder.layers.mlp.router.expert_bias");
    assert_int_equal(b.ndim, 2);
    const int64_t bglobal[2] = {2, 8}, boffsets[2] = {1, 0}, bsizes[2] = {1, 8};
    assert_memory_equal(b.global, bglobal, sizeof(bglobal));
    assert_memory_equal(b.offsets, boffsets, sizeof(boffsets));
    assert_memory_equal(b.sizes, bsizes, sizeof(bsizes));
    assert_true(b.main && b.param < 0);
    /* per-layer keys (non_homogeneous_layers): no layer axis, the layer in the key */
    m.cfg.dist_per_layer = true;
    assert_int_equal(mc_torchdist_shards(&m, &sh, &n), 0);
    found = 0;
    for (int k = 0; k < n; k++) {
        if (&m.params[sh[k].param] == p - 5) {
            assert_string_equal(sh[k].key, "decoder.layers.1.mlp.router.weight");
            assert_int_equal(sh[k].ndim, 2);
        }
        if (&m.params[sh[k].param] != p) continue;
        assert_string_equal(sh[k].key, "decoder.layers.1.mlp.experts.experts.linear_fc1.weight");
        assert_int_equal(sh[k].ndim, 3);
        const int64_t global[3] = {8, 12, 8};
        assert_memory_equal(sh[k].global, global, sizeof(global));
        const int64_t offsets[3] = {6, found ? 6 : 0, 0}, sizes[3] = {1, 6, 8};
        assert_memory_equal(sh[k].offsets, offsets, sizeof(offsets));
        assert_memory_equal(sh[k].sizes, sizes, sizeof(sizes));
        found++;
    }
    assert_int_equal(found, 2);
    free(sh);
    mc_torchdist_expert_bias_shard(&m, 1, &b);
    assert_string_equal(b.key, "decoder.layers.1.mlp.router.expert_bias");
    assert_int_equal(b.ndim, 1);
    assert_int_equal(b.global[0], 8);
    assert_int_equal(b.offsets[0], 0);
    free(m.param_buf);
    m.param_buf = NULL;
    m.be = NULL;
    mc_gpt_free(&m);
}

/* Megatron's chained optimizer at ep > 1 (core/optimizer/__init__.py): the dense optimizer's
 * dp_group_idx is the rank in the tp x pp group, the experts' the rank in the expert tp x ep x pp
 * group; ChainedOptimizer prefixes its optimizers' keys with "chained_<index>.". */
static void test_chained_optimizer_keys(void **state)
{
    (void)state;
    mc_args_t a;
    memset(&a, 0, sizeof(a));
    a.tensor_model_parallel_size = 1;
    a.pipeline_model_parallel_size = 2;
    a.expert_model_parallel_size = 2;
    assert_int_equal(mc_torchdist_expert_domain(&a, 0, 1, 0), 1);
    assert_int_equal(mc_torchdist_expert_domain(&a, 0, 1, 1), 3);
    a.expert_tensor_parallel_size = 2; /* etp fastest, then ep, then pp */
    assert_int_equal(mc_torchdist_expert_domain(&a, 1, 1, 1), 7);
    char key[256];
    mc_torchdist_optim_key(key, sizeof(key), 1, 3, "optimizer", true);
    assert_string_equal(key, "chained_1.optimizer.distributed.dp_group_idx_3.optimizer/shard_0_1");
    mc_torchdist_optim_key(key, sizeof(key), -1, 0, "per_bucket_numel", true);
    assert_string_equal(key, "optimizer.distributed.dp_group_idx_0.per_bucket_numel/shard_0_1");
    mc_torchdist_bucket_key(&a, 0, 1, 0, 0, key, sizeof(key));
    assert_string_equal(key, "chained_0.optimizer.distributed.dp_group_idx_1.gbuf_idx_0.dtype_"
                             "(torch.float32, torch.float32).bucket_idx_0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float16_rounding),
        cmocka_unit_test(test_bfloat16_rounding),
        cmocka_unit_test(test_te_order_and_names),
        cmocka_unit_test(test_expert_keys),
        cmocka_unit_test(test_chained_optimizer_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
