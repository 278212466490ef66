/* The MoE layer (model/moe.c) as a block of a tiny model on the CPU: its backward is the gradient
 * of J = sum(dy * forward(x)) + g * aux_loss (g: the aux loss's injected gradient,
 * m->moe_aux_grad, large here so that its path counts), by central differences in double over
 * fp32 runs, for the input (the experts' and the router's paths summed), the router's weight and
 * both experts' weights, at coordinates whose step does not change the routing. An independent
 * check of the backward that test_moe.sh's printed digits of Megatron's grad norm can miss. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/block.h"
#include "model/layer_spec.h"

enum { LAYER = 1, ITER = 3, E = 4, K = 2, H = 16, F = 8, S = 8, B = 2 };
#define AUX_COEFF 1e-2
#define AUX_GRAD 50.0f

static mc_gpt_config_t config(void)
{
    mc_gpt_config_t c = {.num_layers = 2,
                         .hidden = H,
                         .heads = 4,
                         .head_dim = 4,
                         .ffn = F,
                         .seq = S,
                         .max_batch = B,
                         .vocab = 64,
                         .max_pos = S,
                         .eps = 1e-5f,
                         .tied = true,
                         .rms = true,
                         .swiglu = true,
                         .init_std = 0.3f,
                         .embedding_init_std = 0.02f,
                         .seed = 7,
                         .tp = 1};
    c.groups = 4;
    c.moe = (mc_moe_cfg_t){.num_experts = E,
                           .ffn = F,
                           .router = {.num_experts = E, .topk = K},
                           .aux_coeff = AUX_COEFF};
    c.moe.layer[0] = c.moe.layer[1] = true;
    return c;
}

static void model_init(mc_gpt_t *m)
{
    const mc_gpt_config_t c = config();
    mc_gpt_build_params(m, &c);
    assert_int_equal(mc_gpt_alloc(m, mc_backend_cpu()), 0);
    mc_gpt_init_params(m);
    memset(m->grad_buf, 0, (size_t)m->n_elems * sizeof(float));
    m->cur = &m->slots[1][0];
    m->cur_chunk = 0;
    m->cur->batch = B;
    m->cur->segments = NULL;
    m->moe_aux_grad = AUX_GRAD;
}

static void fill(float *x, long n, uint32_t seed)
{
    for (long i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
}

enum { N = S * B };
static float g_in[N * H], g_dy[N * H];
static uint8_t g_map[N * E];

/* J at the model's current weights and input x; the routing map into map. */
static double objective(mc_gpt_t *m, const float *x, uint8_t *map)
{
    mc_layer_run_t lr = mc_gpt_layer_run(m, LAYER, ITER, true);
    mc_moe_acts_t *a = &m->cur->acts[LAYER].mlp.moe;
    mc_gpt_moe_take_aux(m);
    const float *y = mc_moe.forward(&lr, a, x);
    double j = 0;
    for (long i = 0; i < (long)N * H; i++) j += (double)g_dy[i] * y[i];
    memcpy(map, a->map, sizeof(g_map));
    /* aux / coeff as logged, times coeff: the loss whose gradient is g * d(aux) */
    return j + (double)AUX_GRAD * AUX_COEFF * mc_gpt_moe_take_aux(m);
}

/* Central difference of J along element i of v (the input or a weight), or NAN where the step
 * changes the routing. */
static double fd(mc_gpt_t *m, float *v, long i, float *x)
{
    const float h = 1e-2f, keep = v[i];
    uint8_t map[N * E];
    v[i] = keep + h;
    const double jp = objective(m, x, map);
    const bool same_p = memcmp(map, g_map, sizeof(map)) == 0;
    v[i] = keep - h;
    const double jm = objective(m, x, map);
    const bool same_m = memcmp(map, g_map, sizeof(map)) == 0;
    v[i] = keep;
    return same_p && same_m ? (jp - jm) / (2.0 * (double)h) : NAN;
}

static void check(const char *what, mc_gpt_t *m, float *v, const float *grad, long n, float *x)
{
    int checked = 0;
    double worst = 0;
    for (long i = 0; i < n && checked < 24; i += 1 + n / 24) {
        const double want = fd(m, v, i, x);
        if (isnan(want)) continue;
        const double err = fabs(grad[i] - want) / (fabs(want) + 2e-2);
        if (err > worst) worst = err;
        checked++;
    }
    printf("# %s: %d coordinates, worst relative error %.3g\n", what, checked, worst);
    assert_true(checked >= 8);
    assert_true(worst < 2e-3);
}

static void test_backward_is_the_gradient(void **state)
{
    (void)state;
    mc_gpt_t m;
    model_init(&m);
    fill(g_in, N * H, 11);
    fill(g_dy, N * H, 12);
    objective(&m, g_in, g_map);
    mc_layer_run_t lr = mc_gpt_layer_run(&m, LAYER, ITER, true);
    memcpy(m.dtmp_h, g_dy, sizeof(g_dy));
    mc_moe.backward(&lr, &m.cur->acts[LAYER].mlp.moe, g_in, m.dtmp_h, m.dx);
    float din[N * H];
    memcpy(din, m.dx, sizeof(din));
    check("input", &m, g_in, din, N * H, g_in);
    const mc_pkind_t kinds[] = {MC_PK_ROUTER_W, MC_PK_EXPERT_FC1_W, MC_PK_EXPERT_FC2_W};
    for (int k = 0; k < 3; k++) {
        const mc_param_t *p = NULL;
        for (int i = 0; i < m.n_params; i++)
            if (m.params[i].kind == kinds[k] && m.params[i].layer == LAYER) p = &m.params[i];
        assert_non_null(p);
        check(p->name, &m, mc_gpt_param_at(&m, p->offset), mc_gpt_grad_at(&m, p->offset),
              p->numel, g_in);
    }
    mc_gpt_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backward_is_the_gradient),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
