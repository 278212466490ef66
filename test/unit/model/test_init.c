/* Layout-invariant init (DESIGN decision 6): values depend only on (seed, name, element). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt.h"

static mc_gpt_config_t small_cfg(int layers)
{
    mc_gpt_config_t c = {.num_layers = layers, .hidden = 16, .heads = 2, .head_dim = 8, .ffn = 64,
                         .seq = 8, .max_batch = 2, .vocab = 64, .max_pos = 8, .eps = 1e-5f,
                         .bias = true, .tied = true, .act = MC_ACT_GELU_TANH, .init_std = 0.02f,
                         .embedding_init_std = 0.02f, .seed = 1234};
    return c;
}

static float *init_host(mc_gpt_t *m, const mc_gpt_config_t *c)
{
    mc_gpt_build_params(m, c);
    assert_int_equal(mc_gpt_alloc(m, mc_backend_cpu()), 0);
    mc_gpt_init_params(m);
    return m->param_buf; /* CPU backend: device memory is host memory */
}

/* A shard filled on its own equals the same slice of the whole tensor. */
static void test_shard_equals_slice(void **state)
{
    (void)state;
    enum { N = 1001 };
    float whole[N], part[N];
    mc_init_normal(whole, 7, "decoder.layers.0.mlp.linear_fc1.weight", 0, N, 0.02f);
    for (long start = 0; start < N; start += 97) {
        long cnt = start + 131 <= N ? 131 : N - start;
        mc_init_normal(part, 7, "decoder.layers.0.mlp.linear_fc1.weight", start, cnt, 0.02f);
        assert_memory_equal(part, whole + start, (size_t)cnt * sizeof(float));
    }
}

/* A layer's weights do not depend on how many layers the model has or where the tensor lives
 * in the flat buffer. */
static void test_independent_of_model_layout(void **state)
{
    (void)state;
    mc_gpt_t a, b;
    mc_gpt_config_t ca = small_cfg(2), cb = small_cfg(4);
    cb.init_std = ca.init_std; /* same std; only the layer count differs */
    float *pa = init_host(&a, &ca), *pb = init_host(&b, &cb);
    const char *name = "decoder.layers.1.self_attention.linear_qkv.weight";
    const mc_param_t *xa = mc_gpt_find_param(&a, name), *xb = mc_gpt_find_param(&b, name);
    assert_non_null(xa);
    assert_non_null(xb);
    assert_memory_equal(pa + xa->offset, pb + xb->offset, (size_t)xa->numel * sizeof(float));
    /* Distinct tensors of the same shape get distinct values. */
    const mc_param_t *ya = mc_gpt_find_param(&a, "decoder.layers.0.self_attention.linear_qkv.weight");
    assert_memory_not_equal(pa + xa->offset, pa + ya->offset, (size_t)xa->numel * sizeof(float));
    mc_gpt_free(&a);
    mc_gpt_free(&b);
}

static void test_seed_changes_values_and_std_rules(void **state)
{
    (void)state;
    mc_gpt_t a, b;
    mc_gpt_config_t ca = small_cfg(2), cb = small_cfg(2);
    cb.seed = 1235;
    float *pa = init_host(&a, &ca), *pb = init_host(&b, &cb);
    const mc_param_t *w = mc_gpt_find_param(&a, "embedding.word_embeddings.weight");
    assert_memory_not_equal(pa + w->offset, pb + w->offset, (size_t)w->numel * sizeof(float));
    /* std rules: 0.02 for fc1, 0.02/sqrt(2L) for fc2 and proj, ones/zeros for LN, zero biases */
    const mc_param_t *fc1 = mc_gpt_find_param(&a, "decoder.layers.0.mlp.linear_fc1.weight");
    const mc_param_t *fc2 = mc_gpt_find_param(&a, "decoder.layers.0.mlp.linear_fc2.weight");
    assert_float_equal(fc1->init_std, 0.02f, 1e-7);
    assert_float_equal(fc2->init_std, 0.02f / 2.0f, 1e-7);
    double s = 0, s2 = 0;
    for (long i = 0; i < fc1->numel; i++) {
        s += pa[fc1->offset + i];
        s2 += (double)pa[fc1->offset + i] * pa[fc1->offset + i];
    }
    double mean = s / fc1->numel, sd = sqrt(s2 / fc1->numel - mean * mean);
    assert_true(fabs(mean) < 0.003);
    assert_true(fabs(sd - 0.02) < 0.002);
    const mc_param_t *lnw = mc_gpt_find_param(&a, "decoder.layers.1.input_layernorm.weight");
    const mc_param_t *qb = mc_gpt_find_param(&a, "decoder.layers.1.self_attention.linear_qkv.bias");
    for (long i = 0; i < lnw->numel; i++) assert_true(pa[lnw->offset + i] == 1.0f);
    for (long i = 0; i < qb->numel; i++) assert_true(pa[qb->offset + i] == 0.0f);
    assert_true(qb->no_wd && lnw->no_wd && !fc1->no_wd && !w->no_wd);
    mc_gpt_free(&a);
    mc_gpt_free(&b);
}

/* Tensor parallelism: every tp rank's slice of every parameter (rows for column-parallel and
 * vocab-parallel tensors, columns for row-parallel ones, whole for duplicates) equals that slice
 * of the tp = 1 tensor. */
static void test_tp_shards_are_slices(void **state)
{
    (void)state;
    mc_gpt_t full, part;
    mc_gpt_config_t c = small_cfg(2);
    c.tied = false;
    float *pf = init_host(&full, &c);
    const int tp = 2; /* the small model has 2 heads */
    for (int r = 0; r < tp; r++) {
            mc_gpt_config_t ct = c;
            ct.tp = tp;
            ct.tp_rank = r;
            float *pp = init_host(&part, &ct);
            int split[3] = {0, 0, 0};
            for (int i = 0; i < part.n_params; i++) {
                const mc_param_t *q = &part.params[i], *f = mc_gpt_find_param(&full, q->name);
                assert_non_null(f);
                const long cols = q->ndim == 2 ? (long)q->shape[1] : 1;
                split[q->split + 1]++;
                for (long a = 0; a < q->local[0]; a++)
                    for (long b = 0; b < (q->ndim == 2 ? q->local[1] : 1); b++) {
                        long fa = q->split == MC_SPLIT_ROWS ? r * q->local[0] + a : a;
                        long fb = q->split == MC_SPLIT_COLS ? r * q->local[1] + b : b;
                        long li = a * (q->ndim == 2 ? q->local[1] : 1) + b;
                        assert_true(pp[q->offset + li] == pf[f->offset + fa * cols + fb]);
                    }
            }
            /* per layer: qkv w/b, fc1 w/b rows; proj, fc2 columns; LNs, row-parallel biases whole;
             * plus word embeddings and output layer (rows) and wpe, final LN (whole) */
            assert_int_equal(split[MC_SPLIT_ROWS + 1], 2 * 4 + 2);
            assert_int_equal(split[MC_SPLIT_COLS + 1], 2 * 2);
            assert_int_equal(split[MC_SPLIT_NONE + 1], 2 * 6 + 3);
            mc_gpt_free(&part);
        }
    mc_gpt_free(&full);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shard_equals_slice),
        cmocka_unit_test(test_independent_of_model_layout),
        cmocka_unit_test(test_seed_changes_values_and_std_rules),
        cmocka_unit_test(test_tp_shards_are_slices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
