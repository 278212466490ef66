/* Muon (optim/muon.h) against hand-computed values: the scale modes, Newton-Schulz on diagonal
 * matrices (each singular value s goes to a s + b s^3 + c s^5 per step), the transposed case, and
 * one and two steps of a tiny model's optimizer (2-D weights by Muon, the rest by Adam, as
 * Megatron's chained optimizers). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/backend.h"
#include "optim/muon.h"

static mc_muon_config_t cfg(const char *type, int steps)
{
    mc_muon_config_t c = {.on = true, .momentum = 0.9, .extra_scale = 1.0, .ns_steps = steps};
    snprintf(c.coefficients, sizeof(c.coefficients), "%s", type);
    return c;
}

static void test_scale_modes(void **state)
{
    (void)state;
    assert_true(fabs(mc_muon_scale(4, 8, MC_MUON_SPECTRAL) - sqrt(8.0)) < 1e-15);
    assert_true(fabs(mc_muon_scale(8, 2, MC_MUON_UNIT_RMS_NORM) - 2.0) < 1e-15);
    assert_true(fabs(mc_muon_scale(2, 8, MC_MUON_SHAPE_SCALING) - 1.0) < 1e-15);
    assert_true(fabs(mc_muon_scale(8, 2, MC_MUON_SHAPE_SCALING) - 2.0) < 1e-15);
}

/* s after `steps` of the coefficient sets (a, b, c)[k] (cycled), from s0 */
static double poly(double s, const double (*abc)[3], int n, int steps)
{
    for (int i = 0; i < steps; i++) {
        const double *k = abc[i % n];
        s = k[0] * s + k[1] * s * s * s + k[2] * s * s * s * s * s;
    }
    return s;
}

static const double QUINTIC[5][3] = {{4.0848, -6.8946, 2.9270},
                                     {3.9505, -6.3029, 2.6377},
                                     {3.7418, -5.5913, 2.3037},
                                     {2.8769, -3.1427, 1.2046},
                                     {2.8366, -3.0525, 1.2012}};

static void test_ns_diagonal(void **state)
{
    (void)state;
    const mc_backend_t *be = mc_backend_cpu();
    /* diag(3, 4) as [2, 3]: Frobenius norm 5, singular values 0.6 and 0.8 */
    float x[6] = {3, 0, 0, 0, 4, 0};
    mc_muon_config_t c = cfg("simple", 1);
    assert_true(mc_newton_schulz(be, x, 2, 3, &c));
    const double simple[1][3] = {{3.4445, -4.7750, 2.0315}};
    assert_true(fabs(x[0] - poly(0.6, simple, 1, 1)) < 1e-5);
    assert_true(fabs(x[4] - poly(0.8, simple, 1, 1)) < 1e-5);
    assert_true(fabs(x[1]) + fabs(x[2]) + fabs(x[3]) + fabs(x[5]) == 0);
    /* quintic, 7 steps (the list cycles), on the tall transpose [3, 2] */
    float t[6] = {3, 0, 0, 4, 0, 0};
    c = cfg("quintic", 7);
    assert_true(mc_newton_schulz(be, t, 3, 2, &c));
    assert_true(fabs(t[0] - poly(0.6, QUINTIC, 5, 7)) < 1e-5);
    assert_true(fabs(t[3] - poly(0.8, QUINTIC, 5, 7)) < 1e-5);
    assert_false(mc_newton_schulz(be, t, 3, 2, &(mc_muon_config_t){.coefficients = "custom"}));
}

/* medium precision: the result is bf16 values, within bf16's error of the fp32 iteration (each
 * GEMM's alpha A B + beta C rounded once, as a GPU's bf16 GEMM with fp32 compute; CPU PyTorch's
 * bf16 addmm rounds beta C and alpha A B apart, with bf16 alpha and beta) */
static void test_ns_bf16(void **state)
{
    (void)state;
    const mc_backend_t *be = mc_backend_cpu();
    float x[12], y[12];
    for (int i = 0; i < 12; i++) x[i] = y[i] = sinf(1.0f + (float)(i * i) * 0.37f);
    mc_muon_config_t c = cfg("quintic", 5);
    mc_newton_schulz(be, x, 3, 4, &c);
    c.bf16_matmul = true;
    mc_newton_schulz(be, y, 3, 4, &c);
    float diff = 0;
    for (int i = 0; i < 12; i++) {
        union {
            float f;
            uint32_t u;
        } v = {.f = y[i]};
        assert_int_equal(v.u & 0xffffu, 0); /* a bf16 value */
        diff = fmaxf(diff, fabsf(x[i] - y[i]));
    }
    assert_true(diff > 0 && diff < 0.05f);
}

static int find(const mc_gpt_t *m, mc_pkind_t kind)
{
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].kind == kind) return i;
    fail_msg("no parameter of kind %d", (int)kind);
    return -1;
}

/* A one-layer fp32 model (grouped-query attention: 2 heads, 1 query group) with its optimizer:
 * Muon for the 2-D weights (muon true) or Adam for all. */
static void tiny(mc_gpt_t *m, mc_adam_t *opt, bool muon)
{
    mc_gpt_config_t c = {.num_layers = 1,
                         .hidden = 8,
                         .heads = 2,
                         .groups = 1,
                         .head_dim = 4,
                         .ffn = 16,
                         .seq = 4,
                         .max_batch = 1,
                         .vocab = 16,
                         .max_pos = 4,
                         .eps = 1e-5f,
                         .bias = true,
                         .act = MC_ACT_GELU_TANH,
                         .init_std = 0.2f,
                         .embedding_init_std = 0.2f,
                         .seed = 3,
                         .tp = 1,
                         .dt = MC_DT_F32,
                         .gdt = MC_DT_F32,
                         .n_chunks = 1};
    c.chunk[0] = (mc_chunk_cfg_t){.first_layer = 0, .n_layers = 1, .pre = true, .post = true};
    c.slots[0] = 1;
    memset(m, 0, sizeof(*m));
    mc_gpt_build_params(m, &c);
    assert_int_equal(mc_gpt_alloc(m, mc_backend_cpu()), 0);
    mc_gpt_init_params(m);
    for (long i = 0; i < m->n_elems; i++) ((float *)m->grad_buf)[i] = sinf((float)i * 0.37f) * 0.1f;
    mc_optim_config_t oc = {.adam_beta1 = 0.9, .adam_beta2 = 0.95, .adam_eps = 1e-8};
    oc.muon = cfg("quintic", 5);
    oc.muon.on = muon;
    oc.muon.split_qkv = true;
    mc_opt_seg_t *segs;
    int n;
    long len;
    mc_opt_segments_full(m, &segs, &n, &len);
    assert_int_equal(mc_adam_init(opt, m, &oc, segs, n, len), 0);
}

static float *param(const mc_gpt_t *m, int i)
{
    return (float *)m->param_buf + m->params[i].offset;
}
static float *grad(const mc_gpt_t *m, int i) { return (float *)m->grad_buf + m->params[i].offset; }

static void test_model_steps(void **state)
{
    (void)state;
    mc_gpt_t ma, mm;
    mc_adam_t oa, om;
    tiny(&ma, &oa, false);
    tiny(&mm, &om, true);
    /* linear_proj [8, 8]: W = 0.5 I, g = diag(1..8) */
    const int proj = find(&mm, MC_PK_PROJ_W), qkv = find(&mm, MC_PK_QKV_W);
    float *w = param(&mm, proj), *g = grad(&mm, proj);
    memset(w, 0, 64 * sizeof(float)), memset(g, 0, 64 * sizeof(float));
    double norm = 0;
    for (int i = 0; i < 8; i++)
        w[i * 9] = 0.5f, g[i * 9] = (float)(i + 1), norm += (i + 1) * (i + 1);
    norm = sqrt(norm);
    float qkv_g[16 * 8];
    memcpy(qkv_g, grad(&mm, qkv), sizeof(qkv_g));
    const double lr = 0.01, wd = 0.1;
    double expect[8];
    for (int i = 0; i < 8; i++) expect[i] = 0.5;
    for (int step = 1; step <= 2; step++) {
        mc_adam_step(&oa, lr, -1, wd);
        mc_adam_step(&om, lr, -1, wd);
        /* the same g each step: the momentum's direction stays g's */
        for (int i = 0; i < 8; i++)
            expect[i] =
                expect[i] * (1 - lr * wd) - lr * sqrt(8.0) * poly((i + 1) / norm, QUINTIC, 5, 5);
        for (int i = 0; i < 64; i++) assert_true(fabs(w[i] - (i % 9 ? 0.0 : expect[i / 9])) < 1e-5);
    }
    /* Adam's parameters: the same as an all-Adam optimizer's; Muon's: not */
    for (int i = 0; i < mm.n_params; i++) {
        const mc_param_t *p = &mm.params[i];
        const bool by_muon =
            p->ndim == 2 && p->kind != MC_PK_WORD_EMBEDDINGS && p->kind != MC_PK_OUTPUT_W;
        assert_int_equal(mc_muon_manages(p), by_muon);
        if (i == proj) continue;
        const bool same = memcmp(param(&ma, i), param(&mm, i), p->numel * sizeof(float)) == 0;
        assert_int_equal(same, !by_muon);
    }
    /* linear_qkv [16, 8] = one group of [q 8 rows; k 4; v 4]: each orthogonalised on its own
     * (momentum 0.19 g after two steps, the same direction as g) */
    float want[16 * 8];
    mc_gpt_t m0; /* the same init, unstepped */
    mc_adam_t o0;
    tiny(&m0, &o0, false);
    memcpy(want, param(&m0, qkv), sizeof(want));
    const int rows[3] = {8, 4, 4}, at[3] = {0, 8, 12};
    mc_muon_config_t c = cfg("quintic", 5);
    for (int step = 0; step < 2; step++) {
        float u[16 * 8];
        memcpy(u, qkv_g, sizeof(u));
        for (int j = 0; j < 3; j++) {
            mc_newton_schulz(mc_backend_cpu(), u + at[j] * 8, rows[j], 8, &c);
            for (int k = 0; k < rows[j] * 8; k++) u[at[j] * 8 + k] *= (float)sqrt(8.0);
        }
        for (int k = 0; k < 128; k++) want[k] = want[k] * (float)(1 - lr * wd) - (float)lr * u[k];
    }
    for (int k = 0; k < 128; k++) assert_true(fabsf(param(&mm, qkv)[k] - want[k]) < 1e-5f);
    mc_adam_free(&oa), mc_adam_free(&om), mc_adam_free(&o0);
    mc_gpt_free(&ma), mc_gpt_free(&mm), mc_gpt_free(&m0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scale_modes),
        cmocka_unit_test(test_ns_diagonal),
        cmocka_unit_test(test_ns_bf16),
        cmocka_unit_test(test_model_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
