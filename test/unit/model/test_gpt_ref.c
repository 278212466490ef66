/* Model math and optimizer against the PyTorch reference (test/ref/gpt_ref.py, fixtures in
 * test/fixtures): forward loss, logits and every parameter gradient (also with
 * --apply-residual-connection-post-layernorm and --calculate-per-token-loss), and 10 training steps
 * (losses, grad norms, learning rates, final parameters), each to 1e-5 relative. */
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
#include "model/gpt.h"
#include "train/train.h"
#include "test/unit/fixture.h"

#define TOL 1e-5

/* max |a - b| / max |b|: error relative to the tensor's scale, so tiny entries of a large
 * gradient do not demand more than fp32 can give. */
static double rel_err_f32_f64(const float *a, const double *b, long n)
{
    double num = 0, den = 1e-30;
    for (long i = 0; i < n; i++) {
        num = fmax(num, fabs((double)a[i] - b[i]));
        den = fmax(den, fabs(b[i]));
    }
    return num / den;
}

static int ival(const mc_fx_t *fx, const char *k) { return (int)mc_fx_scalar(fx, k); }

static mc_fx_t *load(const char *file)
{
    char path[4096];
    mc_fx_path(path, sizeof(path), file);
    mc_fx_t *fx = mc_fx_load(path);
    if (!fx) fail_msg("cannot load fixture %s (run `make fixtures`)", path);
    return fx;
}

/* A config record of the Llama options, or its GPT default when the fixture has none. */
static double opt(const mc_fx_t *fx, const char *k, double def)
{
    return mc_fx_get(fx, k) ? mc_fx_scalar(fx, k) : def;
}

static void llama_args_from_fixture(mc_args_t *a, const mc_fx_t *fx)
{
    static const char *pos[] = {"learned_absolute", "rope", "none"};
    snprintf(a->position_embedding_type, sizeof(a->position_embedding_type), "%s",
             pos[(int)opt(fx, "config.position_embedding_type", 0)]);
    snprintf(a->normalization, sizeof(a->normalization), "%s",
             opt(fx, "config.normalization", 0) ? "RMSNorm" : "LayerNorm");
    a->swiglu = opt(fx, "config.swiglu", 0) != 0;
    a->squared_relu = opt(fx, "config.squared_relu", 0) != 0;
    a->group_query_attention = opt(fx, "config.group_query_attention", 0) != 0;
    a->num_query_groups = (int)opt(fx, "config.num_query_groups", 1);
    a->kv_channels = (int)opt(fx, "config.kv_channels", 0);
    a->rotary_base = (int)opt(fx, "config.rotary_base", 10000);
    a->rotary_percent = opt(fx, "config.rotary_percent", 1.0);
    a->rotary_interleaved = opt(fx, "config.rotary_interleaved", 0) != 0;
    a->rotary_seq_len_interpolation_factor =
        (int)opt(fx, "config.rotary_seq_len_interpolation_factor", 0);
    a->use_rope_scaling = opt(fx, "config.use_rope_scaling", 0) != 0;
    a->rope_scaling_factor = opt(fx, "config.rope_scaling_factor", 8.0);
    a->add_qkv_bias = opt(fx, "config.add_qkv_bias", 0) != 0;
    a->qk_layernorm = opt(fx, "config.qk_layernorm", 0) != 0;
}

/* Megatron-style args for the fixture's model; dropout off (the reference has none). */
static void args_from_fixture(mc_args_t *a, const mc_fx_t *fx)
{
    mc_args_defaults(a);
    a->num_layers = ival(fx, "config.num_layers");
    a->hidden_size = ival(fx, "config.hidden_size");
    a->num_attention_heads = ival(fx, "config.num_attention_heads");
    a->ffn_hidden_size = ival(fx, "config.ffn_hidden_size");
    a->seq_length = ival(fx, "config.seq_length");
    a->max_position_embeddings = ival(fx, "config.max_position_embeddings");
    a->micro_batch_size = ival(fx, "config.micro_batch_size");
    a->global_batch_size = a->micro_batch_size * ival(fx, "config.num_microbatches");
    a->vocab_size = ival(fx, "config.vocab_size");
    a->add_bias_linear = ival(fx, "config.add_bias_linear") != 0;
    a->bias_gelu_fusion = a->add_bias_linear;
    a->untie_embeddings_and_output_weights = ival(fx, "config.untie_embeddings_and_output_weights") != 0;
    a->norm_epsilon = mc_fx_scalar(fx, "config.norm_epsilon");
    a->apply_residual_connection_post_layernorm =
        ival(fx, "config.apply_residual_connection_post_layernorm") != 0;
    llama_args_from_fixture(a, fx);
    a->hidden_dropout = 0;
    a->attention_dropout = 0;
    a->mock_data = true;
    a->lr = 1e-3;
    a->lr_set = true;
    a->train_iters = 10;
    if (mc_fx_get(fx, "config.lr")) {
        static const char *styles[] = {"constant", "linear", "cosine", "inverse-square-root"};
        a->lr = mc_fx_scalar(fx, "config.lr");
        a->min_lr = mc_fx_scalar(fx, "config.min_lr");
        a->lr_warmup_iters = (int64_t)mc_fx_scalar(fx, "config.lr_warmup_iters");
        a->lr_decay_iters = (int64_t)mc_fx_scalar(fx, "config.lr_decay_iters");
        a->train_iters = (int64_t)mc_fx_scalar(fx, "config.train_iters");
        snprintf(a->lr_decay_style, sizeof(a->lr_decay_style), "%s",
                 styles[ival(fx, "config.lr_decay_style")]);
        a->weight_decay = mc_fx_scalar(fx, "config.weight_decay");
        a->clip_grad = mc_fx_scalar(fx, "config.clip_grad");
        a->adam_beta1 = mc_fx_scalar(fx, "config.adam_beta1");
        a->adam_beta2 = mc_fx_scalar(fx, "config.adam_beta2");
        a->adam_eps = mc_fx_scalar(fx, "config.adam_eps");
        a->lr_warmup_init = mc_fx_scalar(fx, "config.lr_warmup_init");
    }
    mc_args_finalize(a, 1);
    assert_int_equal(a->padded_vocab_size, ival(fx, "config.padded_vocab_size"));
}

/* Copies every param.<name> record into the model (after its own init). */
static void load_params(mc_gpt_t *m, const mc_fx_t *fx)
{
    char key[160];
    for (int i = 0; i < m->n_params; i++) {
        const mc_param_t *p = &m->params[i];
        snprintf(key, sizeof(key), "param.%s", p->name);
        const mc_fx_tensor_t *t = mc_fx_get(fx, key);
        if (!t) fail_msg("fixture lacks %s", key);
        assert_int_equal(t->dtype, 0);
        assert_int_equal(t->numel, p->numel);
        memcpy(mc_gpt_param_at(m, p->offset), t->data, (size_t)p->numel * sizeof(float));
    }
    /* and the fixture has no parameter the model lacks */
    for (int i = 0; i < fx->n; i++)
        if (strncmp(fx->t[i].name, "param.", 6) == 0 && !mc_gpt_find_param(m, fx->t[i].name + 6))
            fail_msg("model lacks fixture parameter %s", fx->t[i].name);
}

static mc_microbatch_t batch(const mc_fx_t *fx, const char *prefix, int b, int s)
{
    char k[128];
    mc_microbatch_t mb = {.b = b, .s = s};
    static int32_t positions[4096];
    assert_true(b * s <= 4096);
    for (int i = 0; i < b * s; i++) positions[i] = i % s;
    snprintf(k, sizeof(k), "%s.tokens", prefix);
    mb.tokens = mc_fx_get(fx, k)->data;
    snprintf(k, sizeof(k), "%s.labels", prefix);
    mb.labels = mc_fx_get(fx, k)->data;
    snprintf(k, sizeof(k), "%s.loss_mask", prefix);
    mb.loss_mask = mc_fx_get(fx, k)->data;
    mb.positions = positions;
    return mb;
}

/* Every parameter gradient against the fixture's records named <prefix><param name>. */
static void compare_grads(const mc_gpt_t *m, const mc_fx_t *fx, const char *prefix, const char *file)
{
    double worst = 0;
    for (int i = 0; i < m->n_params; i++) {
        const mc_param_t *p = &m->params[i];
        char key[160];
        snprintf(key, sizeof(key), "%s%s", prefix, p->name);
        const mc_fx_tensor_t *g = mc_fx_get(fx, key);
        if (!g) fail_msg("fixture lacks %s", key);
        assert_int_equal(g->numel, p->numel);
        double e = rel_err_f32_f64(mc_gpt_grad_at(m, p->offset), g->data, p->numel);
        if (e > TOL) fail_msg("%s: gradient rel err %.3g > %g", key, e, TOL);
        worst = fmax(worst, e);
    }
    printf("# %s: %d %s gradients, worst rel err %.3g\n", file, m->n_params, prefix, worst);
}

static void check_forward_backward(const char *file)
{
    mc_fx_t *fx = load(file);
    mc_args_t a;
    args_from_fixture(&a, fx);
    mc_trainer_t t;
    mc_run_config_t cfg;
    mc_run_config(&cfg, &a);
    assert_int_equal(mc_trainer_init(&t, &a, &cfg, mc_backend_cpu(), mc_comm_single()), 0);
    mc_gpt_t *m = &t.model;
    load_params(m, fx);

    const int M = ival(fx, "config.num_microbatches"), B = a.micro_batch_size, S = a.seq_length;
    assert_int_equal(M, a.num_microbatches);
    const mc_fx_tensor_t *mb_loss = mc_fx_get(fx, "out.mb_loss");
    assert_non_null(mb_loss);
    mc_microbatch_t mbs[16];
    assert_true(M <= 16);
    for (int i = 0; i < M; i++) {
        char prefix[32];
        snprintf(prefix, sizeof(prefix), "batch.%d", i);
        mbs[i] = batch(fx, prefix, B, S);
        double sum, cnt;
        mc_gpt_forward(m, &mbs[i], 1, true, &sum, &cnt);
        double want = ((const double *)mb_loss->data)[i];
        assert_true(fabs(sum / cnt - want) <= TOL * fabs(want));
        if (i == 0) {
            const mc_fx_tensor_t *lg = mc_fx_get(fx, "out.logits.0");
            assert_non_null(lg);
            assert_int_equal(lg->numel, (long)S * B * a.padded_vocab_size);
            double e = rel_err_f32_f64(m->slots[1][0].logits, lg->data, lg->numel);
            printf("# %s logits rel err %.3g\n", file, e);
            assert_true(e <= TOL);
        }
    }

    /* Gradients through the trainer's forward/backward: Megatron's loss normalisation. */
    mc_step_result_t r;
    mc_forward_backward(&t, mbs, M, &r);
    double want = mc_fx_scalar(fx, "out.loss");
    assert_true(fabs(r.loss_sum / r.num_tokens - want) <= TOL * fabs(want));
    compare_grads(m, fx, "grad.", file);

    /* --calculate-per-token-loss, where the fixture has its gradients */
    if (mc_fx_get(fx, "grad_per_token.embedding.word_embeddings.weight")) {
        a.calculate_per_token_loss = true;
        mc_forward_backward(&t, mbs, M, &r);
        compare_grads(m, fx, "grad_per_token.", file);
    }
    mc_trainer_free(&t);
    mc_args_free(&a);
    mc_fx_free(fx);
}

static void check_training(const char *file)
{
    mc_fx_t *fx = load(file);
    mc_args_t a;
    args_from_fixture(&a, fx);
    mc_trainer_t t;
    mc_run_config_t cfg;
    mc_run_config(&cfg, &a);
    assert_int_equal(mc_trainer_init(&t, &a, &cfg, mc_backend_cpu(), mc_comm_single()), 0);
    load_params(&t.model, fx);
    const int M = a.num_microbatches, B = a.micro_batch_size, S = a.seq_length;
    const mc_fx_tensor_t *loss = mc_fx_get(fx, "out.step_loss"), *gn = mc_fx_get(fx, "out.step_grad_norm"),
                         *lr = mc_fx_get(fx, "out.step_lr");
    assert_non_null(loss);
    assert_non_null(gn);
    assert_non_null(lr);
    mc_microbatch_t mbs[16];
    assert_true(M <= 16);
    for (int step = 0; step < (int)a.train_iters; step++) {
        for (int i = 0; i < M; i++) {
            char prefix[48];
            snprintf(prefix, sizeof(prefix), "step.%d.batch.%d", step, i);
            mbs[i] = batch(fx, prefix, B, S);
            mbs[i].sample0 = (uint64_t)(step * M + i) * B;
        }
        mc_step_result_t r;
        mc_train_step(&t, mbs, M, &r);
        t.iteration++;
        double l = r.loss_sum / r.num_tokens, wl = ((double *)loss->data)[step];
        double wg = ((double *)gn->data)[step], wlr = ((double *)lr->data)[step];
        printf("# %s step %d loss %.9g (ref %.9g) grad norm %.6g (ref %.6g) lr %.6g\n", file, step,
               l, wl, r.grad_norm, wg, r.lr);
        assert_true(fabs(l - wl) <= TOL * fabs(wl));
        assert_true(fabs(r.grad_norm - wg) <= TOL * fabs(wg));
        assert_true(fabs(r.lr - wlr) <= 1e-12 + 1e-9 * fabs(wlr));
    }
    /* Final parameters, norm-wise over the whole model: element-wise comparison is not
     * meaningful after Adam, which divides by sqrt(v) and so turns rounding noise in gradients
     * that are zero in exact arithmetic (the key bias: softmax ignores a per-query constant)
     * into lr-sized steps in fp32 and fp64 alike, only in different directions. */
    double d2 = 0, r2 = 0;
    for (int i = 0; i < t.model.n_params; i++) {
        const mc_param_t *p = &t.model.params[i];
        char key[160];
        snprintf(key, sizeof(key), "final.param.%s", p->name);
        const mc_fx_tensor_t *w = mc_fx_get(fx, key);
        if (!w) fail_msg("fixture lacks %s", key);
        const double *ref = w->data;
        for (long j = 0; j < p->numel; j++) {
            double d = (double)((const float *)t.model.param_buf)[p->offset + j] - ref[j];
            d2 += d * d;
            r2 += ref[j] * ref[j];
        }
    }
    printf("# %s final parameters: norm-wise rel err %.3g\n", file, sqrt(d2 / r2));
    assert_true(sqrt(d2 / r2) <= TOL);
    mc_trainer_free(&t);
    mc_args_free(&a);
    mc_fx_free(fx);
}

static void test_tied_bias(void **s) { (void)s; check_forward_backward("gpt_tied_bias.mcfx"); }
static void test_untied_nobias(void **s) { (void)s; check_forward_backward("gpt_untied_nobias.mcfx"); }
static void test_postln_pertoken(void **s) { (void)s; check_forward_backward("gpt_postln_pertoken.mcfx"); }
static void test_train_tied_bias(void **s) { (void)s; check_training("train_tied_bias.mcfx"); }
static void test_train_untied_nobias(void **s) { (void)s; check_training("train_untied_nobias.mcfx"); }
static void test_llama_gqa(void **s) { (void)s; check_forward_backward("llama_gqa.mcfx"); }
static void test_llama_variants(void **s) { (void)s; check_forward_backward("llama_variants.mcfx"); }
static void test_llama_qknorm(void **s) { (void)s; check_forward_backward("llama_qknorm.mcfx"); }
static void test_train_llama(void **s) { (void)s; check_training("train_llama.mcfx"); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tied_bias),
        cmocka_unit_test(test_untied_nobias),
        cmocka_unit_test(test_postln_pertoken),
        cmocka_unit_test(test_train_tied_bias),
        cmocka_unit_test(test_train_untied_nobias),
        cmocka_unit_test(test_llama_gqa),
        cmocka_unit_test(test_llama_variants),
        cmocka_unit_test(test_llama_qknorm),
        cmocka_unit_test(test_train_llama),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
