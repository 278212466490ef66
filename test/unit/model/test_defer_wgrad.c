/* --defer-embedding-wgrad-compute (model/output.c, Megatron's LinearWithGradAccumulationAndAsync
 * Communication with grad_output_buffer and drain_embedding_wgrad_compute): the output layer's
 * weight gradient of the deferred microbatches is absent after their backward, every other
 * gradient is already the same, and the flush gives the undeferred gradients, bit for bit when
 * every microbatch is deferred (the same accumulation order), to rounding with a limit (the
 * undeferred microbatches accumulate first). The data-parallel hook hears of the output layer's
 * gradient once, at the flush. CPU backend, fp32, the whole model on one rank. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt.h"

enum { S = 8, B = 2, V = 64, MBS = 3 };

typedef struct {
    mc_gpt_t m;
    int out_param;  /* table index of output_layer.weight */
    int hook_calls; /* grads-final reports that include it */
} run_t;

static void on_grads_final(void *ctx, int first, int n)
{
    run_t *r = ctx;
    if (r->out_param >= first && r->out_param < first + n) r->hook_calls++;
}

static void setup(run_t *r, int defer, int limit)
{
    mc_gpt_config_t c = {.num_layers = 2,
                         .hidden = 16,
                         .heads = 4,
                         .groups = 4,
                         .head_dim = 4,
                         .ffn = 32,
                         .seq = S,
                         .max_batch = B,
                         .vocab = V,
                         .max_pos = S,
                         .eps = 1e-5f,
                         .bias = true,
                         .act = MC_ACT_GELU_TANH,
                         .init_std = 0.2f,
                         .embedding_init_std = 0.2f,
                         .seed = 7,
                         .tp = 1,
                         .n_chunks = 1,
                         .defer_wgrad = defer,
                         .defer_wgrad_limit = limit};
    c.chunk[0] = (mc_chunk_cfg_t){.first_layer = 0, .n_layers = 2, .pre = true, .post = true};
    c.slots[1] = 1;
    memset(r, 0, sizeof(*r));
    mc_gpt_build_params(&r->m, &c);
    assert_int_equal(mc_gpt_alloc(&r->m, mc_backend_cpu()), 0);
    mc_gpt_init_params(&r->m);
    memset(r->m.grad_buf, 0, (size_t)r->m.n_elems * sizeof(float));
    const mc_param_t *o = mc_gpt_find_param(&r->m, "output_layer.weight");
    assert_non_null(o);
    r->out_param = (int)(o - r->m.params);
    r->m.grads_final_hook = on_grads_final;
    r->m.hook_ctx = r;
}

/* Forward and backward of MBS microbatches, one after the other (slot 0). */
static void train(run_t *r)
{
    int32_t tok[S * B], lab[S * B], pos[S * B];
    float mask[S * B];
    for (int i = 0; i < MBS; i++) {
        for (int j = 0; j < S * B; j++) {
            tok[j] = (i * 7 + j * 3) % V;
            lab[j] = (i * 5 + j * 11 + 1) % V;
            pos[j] = j % S;
            mask[j] = (j + i) % 5 ? 1.0f : 0.0f;
        }
        mc_microbatch_t mb = {.b = B,
                              .s = S,
                              .tokens = tok,
                              .labels = lab,
                              .positions = pos,
                              .loss_mask = mask,
                              .sample0 = (uint64_t)i * B};
        double sum, cnt;
        mc_gpt_forward(&r->m, &mb, 1, true, &sum, &cnt);
        mc_gpt_backward(&r->m, 1, (float)(1.0 / (cnt * MBS)));
    }
}

static const float *grads(const run_t *r) { return r->m.grad_buf; }

/* Whether two runs' gradients agree bit for bit outside (skip) or inside (!skip) the output
 * layer's weight. */
static bool same_grads(const run_t *a, const run_t *b, bool output_only)
{
    const mc_param_t *o = &a->m.params[a->out_param];
    for (long i = 0; i < a->m.n_elems; i++) {
        const bool in_out = i >= o->offset && i < o->offset + o->numel;
        if (in_out == output_only && grads(a)[i] != grads(b)[i]) return false;
    }
    return true;
}

static void test_defer_all(void **state)
{
    (void)state;
    static run_t ref, d;
    setup(&ref, 0, 0);
    train(&ref);
    assert_int_equal(ref.hook_calls, MBS); /* one report per backward */
    mc_gpt_drain_output_wgrad(&ref.m);     /* nothing deferred: no-op */
    assert_int_equal(ref.hook_calls, MBS);

    setup(&d, MBS, 0);
    train(&d);
    assert_int_equal(d.m.defer_n, MBS);
    assert_int_equal(d.hook_calls, 0);
    const mc_param_t *o = &d.m.params[d.out_param];
    for (long i = 0; i < o->numel; i++) assert_true(grads(&d)[o->offset + i] == 0.0f);
    assert_true(same_grads(&d, &ref, false)); /* the rest is there already */
    mc_gpt_drain_output_wgrad(&d.m);
    assert_int_equal(d.m.defer_n, 0);
    assert_int_equal(d.hook_calls, 1);
    assert_memory_equal(grads(&d), grads(&ref), (size_t)ref.m.n_elems * sizeof(float));
    mc_gpt_free(&ref.m);
    mc_gpt_free(&d.m);
}

/* --wgrad-deferral-limit 1: the first microbatch's weight gradient waits, the later ones'
 * accumulate at once. */
static void test_defer_limit(void **state)
{
    (void)state;
    static run_t ref, d;
    setup(&ref, 0, 0);
    train(&ref);
    setup(&d, 1, 1);
    train(&d);
    assert_int_equal(d.m.defer_n, 1);
    assert_false(same_grads(&d, &ref, true)); /* the first microbatch's part is missing */
    mc_gpt_drain_output_wgrad(&d.m);
    assert_int_equal(d.hook_calls, 1);
    assert_true(same_grads(&d, &ref, false));
    const mc_param_t *o = &d.m.params[d.out_param];
    double worst = 0;
    for (long i = 0; i < o->numel; i++) {
        const double a = grads(&d)[o->offset + i], b = grads(&ref)[o->offset + i];
        worst = fmax(worst, fabs(a - b) / fmax(fabs(b), 1e-3));
    }
    assert_true(worst < 1e-5);
    mc_gpt_free(&ref.m);
    mc_gpt_free(&d.m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defer_all),
        cmocka_unit_test(test_defer_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
