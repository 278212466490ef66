/* The MoE layer (model/moe.c, model/moe_loss.c) as a block of a tiny model on the CPU: its
 * backward is the gradient of J = sum(dy * forward(x)) + g * loss (g: the losses' injected
 * gradient, m->moe_aux_grad, large here so that their path counts; loss: each of the router's
 * losses in turn, aux_loss, seq_aux_loss, global_aux_loss and the z-loss, as its coefficient
 * times the tracker's loss / coeff), by central differences in double over fp32 runs, for the
 * input (the experts' and the router's paths summed), the router's weight and both experts'
 * weights, at coordinates whose step does not change the routing. The tracked values are
 * Megatron's formulas (router.py, switch_load_balancing_loss_func, z_loss_func) restated here
 * from the router's logits. Dense layers among MoE layers (--moe-layer-freq) get their own MLP
 * and names. The shared expert with its gate (model/moe_shared.c): the backward is the gradient
 * (its weights and gate_weight too), and the forward adds sigmoid(x . gate_weight) times its
 * SwiGLU MLP, restated here, to the routed output. */
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

enum { LAYER = 1, ITER = 3, E = 4, K = 2, H = 16, F = 8, S = 8, B = 2, LAYERS = 2 };
#define AUX_GRAD 50.0f
static const double COEFF[MC_MOE_LOSSES] = {1e-2, 2e-2, 3e-2, 2e-2};

/* the loss of kind `loss` alone (MC_MOE_LOSSES: every one) */
static mc_moe_loss_t g_loss = MC_MOE_LOSSES;
/* token dropping (model/moe_capacity.c): none, or the capacity factor, policy and padding */
static struct {
    bool on;
    double factor;
    bool position, pad;
} g_drop;
/* with the gated shared expert (of F columns) */
static bool g_shared;

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
    c.moe = (mc_moe_cfg_t){.num_experts = E, .ffn = F, .router = {.num_experts = E, .topk = K}};
    for (int k = 0; k < MC_MOE_LOSSES; k++)
        if (g_loss == MC_MOE_LOSSES || g_loss == (mc_moe_loss_t)k) {
            c.moe.coeff[k] = COEFF[k];
            c.moe.tracked[k] = true;
        }
    c.moe.layer[0] = c.moe.layer[1] = true;
    c.moe.drop = g_drop.on;
    c.moe.capacity_factor = g_drop.factor;
    c.moe.drop_by_position = g_drop.position;
    c.moe.pad_to_capacity = g_drop.pad;
    c.moe.shared_ffn = g_shared ? F : 0;
    c.moe.shared_gate = g_shared;
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

/* The tracker's values of layer LAYER since the last call, by kind. */
static void take(mc_gpt_t *m, double out[MC_MOE_LOSSES])
{
    float v[MC_MOE_LOSSES * LAYERS];
    mc_gpt_moe_take_losses(m, v);
    for (int k = 0; k < MC_MOE_LOSSES; k++) out[k] = v[k * LAYERS + LAYER];
}

/* J at the model's current weights and input x (one microbatch of a step: global_aux_loss's
 * running counts start again); the routing map into map. */
static double objective(mc_gpt_t *m, const float *x, uint8_t *map)
{
    mc_layer_run_t lr = mc_gpt_layer_run(m, LAYER, ITER, true);
    mc_moe_acts_t *a = &m->cur->acts[LAYER].mlp.moe;
    double logged[MC_MOE_LOSSES];
    take(m, logged);
    mc_gpt_moe_step_end(m);
    const float *y = mc_moe.forward(&lr, a, x);
    double j = 0;
    for (long i = 0; i < (long)N * H; i++) j += (double)g_dy[i] * y[i];
    memcpy(map, g_drop.on ? a->cap_map : a->map, sizeof(g_map)); /* the map dispatched */
    /* loss / coeff as logged, times coeff: the loss whose gradient is g * d(loss) */
    take(m, logged);
    for (int k = 0; k < MC_MOE_LOSSES; k++) j += (double)AUX_GRAD * m->cfg.moe.coeff[k] * logged[k];
    return j;
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

static void backward_is_the_gradient(mc_moe_loss_t loss)
{
    g_loss = loss;
    printf("# with %s\n", mc_moe_loss_name(loss));
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
    const mc_pkind_t kinds[] = {MC_PK_ROUTER_W,      MC_PK_EXPERT_FC1_W, MC_PK_EXPERT_FC2_W,
                                MC_PK_SHARED_GATE_W, MC_PK_SHARED_FC1_W, MC_PK_SHARED_FC2_W};
    for (int k = 0; k < (g_shared ? 6 : 3); k++) {
        const mc_param_t *p = NULL;
        for (int i = 0; i < m.n_params; i++)
            if (m.params[i].kind == kinds[k] && m.params[i].layer == LAYER) p = &m.params[i];
        assert_non_null(p);
        check(p->name, &m, mc_gpt_param_at(&m, p->offset), mc_gpt_grad_at(&m, p->offset), p->numel,
              g_in);
    }
    mc_gpt_free(&m);
}

static void test_backward_is_the_gradient(void **state)
{
    (void)state;
    for (int k = 0; k < MC_MOE_LOSSES; k++) backward_is_the_gradient((mc_moe_loss_t)k);
}

/* Token dropping (apply_router_token_dropping): the backward is still the gradient (no gradient
 * through a dropped token's probability), by probs and by position, padded to capacity (rows of
 * probability 0; with factor 1.25 more rows than the tokens' assignments); padding changes the
 * output only by the GEMMs' rounding; the dropped assignments are counted. T = 16 tokens x top-2 over 4 experts: capacity
 * ceil(8 * factor). */
static void test_dropping(void **state)
{
    (void)state;
    static const struct {
        double factor;
        bool position, pad;
    } cases[] = {{0.75, false, false}, {1.0, true, true}, {1.25, false, true}};
    float y[3][N * H];
    double dropped[3];
    for (int v = 0; v < 3; v++) {
        g_drop.on = true, g_drop.factor = cases[v].factor;
        g_drop.position = cases[v].position, g_drop.pad = cases[v].pad;
        printf("# capacity factor %g, by %s%s\n", cases[v].factor,
               cases[v].position ? "position" : "probs", cases[v].pad ? ", padded" : "");
        backward_is_the_gradient(MC_MOE_AUX);
        /* the forward alone, and without padding: the same output */
        for (int pad = cases[v].pad; pad >= 0; pad--) {
            g_drop.pad = pad;
            mc_gpt_t m;
            model_init(&m);
            fill(g_in, N * H, 11);
            mc_layer_run_t lr = mc_gpt_layer_run(&m, LAYER, ITER, true);
            const float *out = mc_moe.forward(&lr, &m.cur->acts[LAYER].mlp.moe, g_in);
            double counts[2];
            mc_gpt_moe_take_dropped(&m, counts);
            assert_true(counts[0] == (double)N * K);
            if (pad == cases[v].pad) {
                memcpy(y[v], out, sizeof(y[v]));
                dropped[v] = counts[1];
            } else {
                /* the same up to the GEMMs' rounding, whose blocking follows the row counts */
                for (long i = 0; i < (long)N * H; i++)
                    if (fabsf(out[i] - y[v][i]) > 1e-5f * (fabsf(y[v][i]) + 1e-2f))
                        fail_msg("output %ld: %g padded, %g not", i, (double)y[v][i],
                                 (double)out[i]);
                assert_true(counts[1] == dropped[v]);
            }
            mc_gpt_free(&m);
        }
        printf("# %g of %d assignments dropped\n", dropped[v], N * K);
    }
    assert_true(dropped[0] > 0 && dropped[1] > 0);
    assert_true(dropped[0] > dropped[2]);
    memset(&g_drop, 0, sizeof(g_drop));
}

static void test_shared_expert_backward_is_the_gradient(void **state)
{
    (void)state;
    g_shared = true;
    backward_is_the_gradient(MC_MOE_AUX);
    g_shared = false;
}

static const mc_param_t *layer_param(const mc_gpt_t *m, mc_pkind_t k)
{
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].kind == k && m->params[i].layer == LAYER) return &m->params[i];
    fail_msg("no parameter of kind %d", (int)k);
    return NULL;
}

/* The layer's output with the shared expert, less the output with its linear_fc2 zeroed (the
 * routed part alone), is sigmoid(x . gate_weight) * linear_fc2(silu(gate) * up) per token. */
static void test_shared_expert_forward(void **state)
{
    (void)state;
    g_shared = true;
    mc_gpt_t m;
    model_init(&m);
    fill(g_in, N * H, 21);
    fill(g_dy, N * H, 22);
    mc_layer_run_t lr = mc_gpt_layer_run(&m, LAYER, ITER, true);
    mc_moe_acts_t *a = &m.cur->acts[LAYER].mlp.moe;
    static float y[N * H];
    memcpy(y, mc_moe.forward(&lr, a, g_in), sizeof(y));
    const float *gw = mc_gpt_param_at(&m, layer_param(&m, MC_PK_SHARED_GATE_W)->offset);
    const float *w1 = mc_gpt_param_at(&m, layer_param(&m, MC_PK_SHARED_FC1_W)->offset);
    float *w2 = mc_gpt_param_at(&m, layer_param(&m, MC_PK_SHARED_FC2_W)->offset);
    static float w2_keep[H * F];
    memcpy(w2_keep, w2, sizeof(w2_keep));
    memset(w2, 0, sizeof(w2_keep));
    const float *routed = mc_moe.forward(&lr, a, g_in);
    double worst = 0;
    for (int t = 0; t < N; t++) {
        const float *x = g_in + (long)t * H;
        double logit = 0, act[F];
        for (int h = 0; h < H; h++) logit += (double)x[h] * gw[h];
        const double gate = 1.0 / (1.0 + exp(-logit));
        for (int j = 0; j < F; j++) {
            double g = 0, u = 0;
            for (int h = 0; h < H; h++) {
                g += (double)w1[j * H + h] * x[h];
                u += (double)w1[(F + j) * H + h] * x[h];
            }
            act[j] = g / (1.0 + exp(-g)) * u;
        }
        for (int h = 0; h < H; h++) {
            double o = 0;
            for (int j = 0; j < F; j++) o += (double)w2_keep[h * F + j] * act[j];
            const double got = (double)y[t * H + h] - routed[t * H + h];
            const double err = fabs(got - gate * o) / (fabs(gate * o) + 1e-2);
            if (err > worst) worst = err;
        }
    }
    printf("# shared expert's output: worst relative error %.3g\n", worst);
    assert_true(worst < 1e-4);
    mc_gpt_free(&m);
    g_shared = false;
}

/* Megatron's formulas from the router's logits (fp32 softmax in double here): the aux loss's
 * E / (k T^2) sum_e (sum_t p[t, e]) (tokens to e); seq_aux_loss's the same per sequence over its
 * S tokens, / B; global_aux_loss's, after one microbatch on one rank, the aux loss's; the z-loss's
 * mean over tokens of logsumexp^2. Each tracked as loss / coeff. */
static void want_losses(const float *logits, double want[MC_MOE_LOSSES])
{
    double psum[B][E] = {{0}}, count[B][E] = {{0}}, z = 0;
    for (int t = 0; t < N; t++) {
        const float *l = logits + (long)t * E;
        double mx = l[0], sum = 0, p[E];
        for (int e = 1; e < E; e++) mx = l[e] > mx ? l[e] : mx;
        for (int e = 0; e < E; e++) sum += p[e] = exp((double)l[e] - mx);
        z += pow(mx + log(sum), 2);
        for (int e = 0; e < E; e++) psum[t % B][e] += p[e] / sum;
        for (int e = 0; e < E; e++) { /* in the top K: fewer than K larger */
            int larger = 0;
            for (int f = 0; f < E; f++) larger += l[f] > l[e] || (l[f] == l[e] && f < e);
            count[t % B][e] += larger < K;
        }
    }
    double aux = 0, seq = 0;
    for (int e = 0; e < E; e++) {
        double ps = 0, c = 0;
        for (int b = 0; b < B; b++) {
            ps += psum[b][e], c += count[b][e];
            seq += psum[b][e] * count[b][e] * E / ((double)K * S * S) / B;
        }
        aux += ps * c * E / ((double)K * N * N);
    }
    want[MC_MOE_AUX] = want[MC_MOE_GLOBAL_AUX] = aux;
    want[MC_MOE_SEQ_AUX] = seq;
    want[MC_MOE_Z] = z / N;
}

static void test_losses_are_megatrons(void **state)
{
    (void)state;
    g_loss = MC_MOE_LOSSES;
    mc_gpt_t m;
    model_init(&m);
    fill(g_in, N * H, 21);
    mc_layer_run_t lr = mc_gpt_layer_run(&m, LAYER, ITER, true);
    mc_moe_acts_t *a = &m.cur->acts[LAYER].mlp.moe;
    mc_moe.forward(&lr, a, g_in);
    double got[MC_MOE_LOSSES], want[MC_MOE_LOSSES];
    take(&m, got);
    want_losses(a->logits, want);
    for (int k = 0; k < MC_MOE_LOSSES; k++) {
        printf("# %s: %.9g, Megatron's formula %.9g\n", mc_moe_loss_name(k), got[k], want[k]);
        assert_true(fabs(got[k] - want[k]) <= 1e-5 * fabs(want[k]));
    }
    /* global_aux_loss averages the counts over the step's microbatches: a second forward of the
     * same tokens counts them twice over two steps, the same average */
    mc_moe.forward(&lr, a, g_in);
    take(&m, got);
    assert_true(fabs(got[MC_MOE_GLOBAL_AUX] - want[MC_MOE_GLOBAL_AUX]) <= 1e-5 * want[MC_MOE_AUX]);
    /* evaluation computes none */
    lr.training = false;
    mc_moe.forward(&lr, a, g_in);
    take(&m, got);
    for (int k = 0; k < MC_MOE_LOSSES; k++) assert_true(got[k] == 0.0);
    mc_gpt_free(&m);
}

/* --moe-layer-freq [1, 0, 1]: layer 1 is a dense layer with its MLP (linear_fc1, linear_fc2), the
 * others MoE layers with the router and experts, each with its pre_mlp_layernorm; a slot's layer
 * has the activations of its kind. */
static void test_dense_among_moe_layers(void **state)
{
    (void)state;
    mc_gpt_config_t c = config();
    c.num_layers = 3;
    c.moe.layer[0] = c.moe.layer[2] = true;
    c.moe.layer[1] = false;
    mc_gpt_t m;
    mc_gpt_build_params(&m, &c);
    assert_non_null(mc_gpt_find_param(&m, "decoder.layers.0.mlp.router.weight"));
    assert_non_null(mc_gpt_find_param(&m, "decoder.layers.0.pre_mlp_layernorm.weight"));
    assert_null(mc_gpt_find_param(&m, "decoder.layers.1.mlp.router.weight"));
    assert_non_null(mc_gpt_find_param(&m, "decoder.layers.1.mlp.linear_fc1.weight"));
    assert_non_null(mc_gpt_find_param(&m, "decoder.layers.1.pre_mlp_layernorm.weight"));
    assert_non_null(
        mc_gpt_find_param(&m, "decoder.layers.2.mlp.experts.local_experts.3.linear_fc2.weight"));
    assert_null(mc_gpt_find_param(&m, "decoder.layers.2.mlp.linear_fc1.weight"));
    assert_int_equal(mc_gpt_alloc(&m, mc_backend_cpu()), 0);
    const mc_layer_acts_t *acts = m.slots[1][0].acts;
    assert_non_null(acts[0].mlp.moe.logits);
    assert_null(acts[0].mlp.dense.fc1);
    assert_non_null(acts[1].mlp.dense.fc1);
    assert_null(acts[1].mlp.moe.logits);
    mc_gpt_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backward_is_the_gradient),
        cmocka_unit_test(test_shared_expert_backward_is_the_gradient),
        cmocka_unit_test(test_shared_expert_forward),
        cmocka_unit_test(test_losses_are_megatrons),
        cmocka_unit_test(test_dense_among_moe_layers),
        cmocka_unit_test(test_dropping),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
