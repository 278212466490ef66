/* Maximal Update Parametrization (--use-mup), as Megatron-LM main has it (not core_v0.15.0):
 * the numbers TransformerConfig.__post_init__ derives (config/mup.c), the model's init
 * standard deviations and softmax scale from the arguments (trainer/config.c), and which
 * parameter Adam steps with which lr and eps (get_mup_config_overrides: a table of parameter
 * names against Megatron's predicates), on the CPU backend. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "config/args.h"
#include "config/mup.h"
#include "optim/adam.h"
#include "optim/lr.h"
#include "trainer/config.h"

#define close_to(a, b) assert_true(fabs((a) - (b)) <= 1e-15 * fabs(b))

static mc_args_t g_a;

/* A tiny model's arguments: 2 layers, hidden 32, 4 heads (kv_channels 8), untied, biases. */
static mc_args_t *tiny(bool mup, int64_t base)
{
    mc_args_t *a = &g_a;
    mc_args_free(a); /* the previous call's lists (static zeros the first time) */
    mc_args_defaults(a);
    a->num_layers = 2;
    a->hidden_size = 32;
    a->num_attention_heads = 4;
    a->seq_length = 8;
    a->max_position_embeddings = 8;
    a->micro_batch_size = 1;
    a->global_batch_size = 1;
    a->vocab_size = 64;
    a->make_vocab_size_divisible_by = 64;
    a->untie_embeddings_and_output_weights = true;
    a->mock_data = true;
    a->lr = 1e-3;
    a->lr_set = true;
    a->min_lr = 1e-4;
    a->train_iters = 10;
    a->use_mup = mup;
    a->mup_base_hidden_size = base;
    mc_args_finalize(a, 1);
    return a;
}

/* The derivation (__post_init__'s MuP block), on its own numbers. */
static void test_derive(void **state)
{
    (void)state;
    mc_args_t a;
    mc_args_defaults(&a);
    a.hidden_size = 256, a.kv_channels = 64, a.num_layers = 8, a.init_method_std = 0.02;
    mc_mup_t u = mc_mup_derive(&a); /* off: Megatron's usual numbers */
    assert_false(u.on);
    assert_true(u.width_mult == 1.0 && u.output_mult == 1.0 && u.embedding_mult == 1.0);
    close_to(u.softmax_scale, 1.0 / 8.0);
    a.use_mup = true; /* base defaults to the hidden size: width 1, only the attention changes */
    u = mc_mup_derive(&a);
    assert_true(u.width_mult == 1.0 && u.output_mult == 1.0 && u.hidden_lr_mult == 1.0);
    assert_true(u.init_std == 0.02);
    close_to(u.softmax_scale, 1.0 / 64.0); /* 1 / kv_channels^1 */
    a.mup_base_hidden_size = 64;           /* width 4 */
    u = mc_mup_derive(&a);
    assert_true(u.width_mult == 4.0);
    close_to(u.output_mult, 0.25);                   /* auto-set: left at 1.0 */
    close_to(u.init_std, 0.01);                      /* 0.02 / sqrt(4) */
    close_to(u.output_init_std, 0.02 / (4.0 * 2.0)); /* sigma / (sqrt(2*8) * sqrt(4)) */
    close_to(u.hidden_lr_mult, 0.25);
    a.mup_output_mult = 3.0; /* given: kept */
    a.mup_embedding_mult = 10.0;
    u = mc_mup_derive(&a);
    assert_true(u.output_mult == 3.0 && u.embedding_mult == 10.0);
    a.mup_base_head_dim = 64, a.kv_channels = 128; /* sqrt(64) / 128^1 */
    close_to(mc_mup_derive(&a).softmax_scale, 1.0 / 16.0);
    a.mup_attn_scale_power = 0.5, a.mup_base_head_dim = -1; /* 1 / sqrt(128) */
    close_to(mc_mup_derive(&a).softmax_scale, 1.0 / sqrt(128.0));
    a.mup_base_hidden_size = 512; /* narrower than the base: width 0.5 */
    u = mc_mup_derive(&a);
    assert_true(u.width_mult == 0.5 && u.hidden_lr_mult == 2.0);
}

/* The model from the arguments: each parameter's init std, the softmax scale, multipliers. */
static void test_model_config(void **state)
{
    (void)state;
    mc_gpt_config_t c;
    mc_gpt_config_from_args(&c, tiny(false, -1));
    assert_true(mc_gpt_softmax_scale(&c) == 1.0f / sqrtf(8.0f));
    assert_true(c.output_mult == 0 && c.embedding_mult == 0);
    mc_gpt_config_from_args(&c, tiny(true, 8)); /* width 4 */
    assert_true(mc_gpt_softmax_scale(&c) == 0.125f);
    assert_true(c.output_mult == 0.25f && c.embedding_mult == 1.0f);
    assert_true(c.init_std == (float)(0.02 / 2.0) && c.embedding_init_std == 0.02f);
    assert_true(c.output_layer_init_std == 0.02f); /* the untied output layer: embedding's */
    c.max_batch = 1;
    mc_gpt_t m;
    memset(&m, 0, sizeof(m));
    mc_gpt_build_params(&m, &c);
    static const struct {
        const char *name;
        double std; /* 0: a constant init */
    } want[] = {
        {"embedding.word_embeddings.weight", 0.02},
        {"embedding.position_embeddings.weight", 0.02},
        {"decoder.layers.0.self_attention.linear_qkv.weight", 0.01},
        {"decoder.layers.0.self_attention.linear_proj.weight", 0.02 / (2.0 * 2.0)},
        {"decoder.layers.1.mlp.linear_fc1.weight", 0.01},
        {"decoder.layers.1.mlp.linear_fc2.weight", 0.02 / (2.0 * 2.0)},
        {"decoder.layers.1.mlp.linear_fc2.bias", 0},
        {"output_layer.weight", 0.02},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const mc_param_t *p = mc_gpt_find_param(&m, want[i].name);
        if (!p) fail_msg("no parameter %s", want[i].name);
        if (fabs(p->init_std - want[i].std) > 1e-7 * want[i].std)
            fail_msg("%s: init std %g, want %g", p->name, (double)p->init_std, want[i].std);
    }
    mc_gpt_free(&m);
}

/* ---- the optimizer's groups: every Adam call's lr and eps, per parameter ---- */

static const mc_gpt_t *g_m;
static struct {
    float lr, eps;
} g_seen[64];

static void rec_adam(const mc_backend_t *be, const mc_adam_tensor_t *t, int count, mc_dtype_t dt,
                     float lr, float b1, float b2, float eps, int step)
{
    for (int k = 0; k < count; k++)
        for (int i = 0; i < g_m->n_params; i++)
            if (t[k].p == mc_gpt_param_at(g_m, g_m->params[i].offset))
                g_seen[i].lr = lr, g_seen[i].eps = eps;
    mc_backend_cpu()->adam_step(be, t, count, dt, lr, b1, b2, eps, step);
}

/* Megatron's predicates on the parameter's name and dimension: is_embedding_parameter (the
 * embedding's parameters and output_layer.weight) or dim <= 1 is vector-like; the rest hidden */
static bool megatron_hidden(const char *name, int ndim)
{
    return ndim > 1 && strstr(name, "embedding") == NULL && strcmp(name, "output_layer.weight");
}

static void one_step(double decoupled_lr)
{
    const mc_args_t *a = tiny(true, 8); /* width 4 */
    mc_gpt_config_t c;
    mc_gpt_config_from_args(&c, a);
    c.max_batch = 1;
    mc_optim_config_t oc = {.adam_beta1 = 0.9, .adam_beta2 = 0.95, .adam_eps = 1e-8};
    oc.mup_hidden_mult = mc_mup_derive(a).hidden_lr_mult;
    mc_lr_config_t lc;
    mc_lr_config_from_args(&lc, a);
    mc_lr_sched_t s;
    mc_lr_sched_init(&s, &lc);
    static mc_backend_t be;
    be = *mc_backend_cpu();
    be.adam_step = rec_adam;
    mc_gpt_t m;
    memset(&m, 0, sizeof(m));
    mc_gpt_build_params(&m, &c);
    assert_int_equal(mc_gpt_alloc(&m, &be), 0);
    mc_gpt_init_params(&m);
    g_m = &m;
    mc_opt_seg_t *segs;
    int n;
    long len;
    mc_opt_segments_full(&m, &segs, &n, &len);
    mc_adam_t opt;
    assert_int_equal(mc_adam_init(&opt, &m, &oc, segs, n, len), 0);
    const double lr_main = mc_lr_at(&s, 5);
    opt.mup_lr = mc_mup_lr_at(&s, 5);
    assert_true(fabs(opt.mup_lr - 0.25 * lr_main) < 1e-12 * lr_main); /* lr / width_mult */
    memset(g_seen, 0, sizeof(g_seen));
    mc_adam_step(&opt, lr_main, decoupled_lr, 0.0);
    int hidden = 0;
    for (int i = 0; i < m.n_params; i++) {
        const mc_param_t *p = &m.params[i];
        const bool h = megatron_hidden(p->name, p->ndim);
        hidden += h;
        const bool dec = decoupled_lr >= 0 && p->embedding_or_output;
        const float lr = (float)(dec ? decoupled_lr : h ? opt.mup_lr : lr_main);
        const float eps = (float)(h ? 1e-8 * 0.25 : 1e-8);
        if (g_seen[i].lr != lr || g_seen[i].eps != eps)
            fail_msg("%s: lr %g eps %g, want %g %g", p->name, (double)g_seen[i].lr,
                     (double)g_seen[i].eps, (double)lr, (double)eps);
    }
    assert_int_equal(hidden, 8); /* qkv, proj, fc1, fc2 of 2 layers */
    mc_adam_free(&opt);
    mc_gpt_free(&m);
}

static void test_groups(void **state)
{
    (void)state;
    one_step(-1);
}

/* --decoupled-lr keeps the embedding and output layer's own lr; the hidden group is MuP's */
static void test_groups_decoupled(void **state)
{
    (void)state;
    one_step(5e-3);
}

/* MuP's hidden group follows the schedule with max_lr and min_lr x 1/width_mult */
static void test_schedule(void **state)
{
    (void)state;
    mc_lr_sched_t s;
    const mc_lr_config_t c = {.init_lr = 0,
                              .max_lr = 1e-3,
                              .min_lr = 1e-4,
                              .warmup_steps = 10,
                              .decay_steps = 100,
                              .decay_style = MC_LR_COSINE,
                              .start_wd = 0.1,
                              .end_wd = 0.1,
                              .mup_max_lr = 1e-3 * 0.5,
                              .mup_min_lr = 1e-4 * 0.5};
    mc_lr_sched_init(&s, &c);
    close_to(mc_mup_lr_at(&s, 5), 0.5e-3 * 0.5); /* warmup from init_lr 0 */
    close_to(mc_mup_lr_at(&s, 1000), 0.5e-4);    /* min_lr x 1/width_mult */
    close_to(mc_mup_lr_at(&s, 55), 0.5e-4 + 0.5 * (0.5e-3 - 0.5e-4));
    mc_lr_sched_t none = s;
    none.mup_max_lr = 0;
    assert_true(mc_mup_lr_at(&none, 5) == -1); /* no group: the main lr */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_derive),   cmocka_unit_test(test_model_config),
        cmocka_unit_test(test_groups),   cmocka_unit_test(test_groups_decoupled),
        cmocka_unit_test(test_schedule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
