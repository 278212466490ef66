/* The op table's precision contract (kernels/backend.h) on the CPU backend: with bf16 or fp16
 * tensors every op gives exactly the fp32 op's result on the same (representable) inputs, rounded
 * once to the output's type; accumulating outputs start from their 16-bit values; gradient
 * outputs of type gdt = fp32 are not rounded at all. Aliased outputs (in place) behave as in fp32.
 * A GPU backend is held to the same results within a tolerance (test/gpu). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/backend.h"

static const mc_backend_t *be;

enum { S = 7, B = 3, NH = 2, HD = 5, H = 11, V = 37, FF = 13, N = S * B };

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static double urand(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) * (1.0 / 9007199254740992.0);
}

/* A tensor both ways: ref (fp32 holding values representable in dt) and h (the dt buffer). */
typedef struct {
    mc_dtype_t dt;
    long n;
    float *ref;
    void *h;
} buf_t;

static buf_t mk(mc_dtype_t dt, long n, double lo, double hi)
{
    buf_t b = {.dt = dt, .n = n, .ref = calloc((size_t)n + 1, sizeof(float)), .h = calloc((size_t)n + 1, 4)};
    assert_non_null(b.ref);
    assert_non_null(b.h);
    for (long i = 0; i < n; i++) b.ref[i] = mc_round_to(dt, (float)(lo + (hi - lo) * urand()));
    mc_convert(b.h, dt, b.ref, MC_DT_F32, n);
    return b;
}

static void rm(buf_t *b)
{
    free(b->ref);
    free(b->h);
}

/* The dt buffer holds exactly the fp32 reference rounded to dt. */
static void same(const buf_t *b, const char *what)
{
    for (long i = 0; i < b->n; i++) {
        const float want = mc_round_to(b->dt, b->ref[i]), got = mc_load_f32(b->h, b->dt, i);
        if (!(got == want || (isnan(got) && isnan(want))))
            fail_msg("%s (%s) [%ld]: got %.9g, want %.9g (fp32 %.9g)", what, mc_dtype_name(b->dt), i,
                     (double)got, (double)want, (double)b->ref[i]);
    }
}

static const mc_dtype_t TYPES[] = {MC_DT_BF16, MC_DT_F16};

static void test_linear(void **state)
{
    (void)state;
    for (int t = 0; t < 2; t++)
        for (int gfp32 = 0; gfp32 <= 1; gfp32++) {
            const mc_dtype_t dt = TYPES[t], gdt = gfp32 ? MC_DT_F32 : dt;
            buf_t in = mk(dt, (long)N * H, -1, 1), W = mk(dt, (long)FF * H, -0.5, 0.5), b = mk(dt, FF, -1, 1);
            buf_t out = mk(dt, (long)N * FF, 0, 0);
            be->linear_forward(be, MC_DT_F32, out.ref, in.ref, W.ref, b.ref, N, H, FF);
            be->linear_forward(be, dt, out.h, in.h, W.h, b.h, N, H, FF);
            same(&out, "linear_forward");
            buf_t dout = mk(dt, (long)N * FF, -1, 1), din = mk(dt, (long)N * H, 0, 0);
            buf_t dW = mk(gdt, (long)FF * H, -1, 1), db = mk(gdt, FF, -1, 1); /* accumulate onto these */
            be->linear_backward(be, MC_DT_F32, MC_DT_F32, din.ref, dW.ref, db.ref, dout.ref, in.ref, W.ref, N, H, FF);
            be->linear_backward(be, dt, gdt, din.h, dW.h, db.h, dout.h, in.h, W.h, N, H, FF);
            same(&din, "linear_backward din");
            same(&dW, "linear_backward dW");
            same(&db, "linear_backward dbias");
            buf_t *all[] = {&in, &W, &b, &out, &dout, &din, &dW, &db};
            for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) rm(all[i]);
        }
}

static void test_embedding(void **state)
{
    (void)state;
    int32_t tok[N], pos[N];
    for (int i = 0; i < N; i++) tok[i] = (int32_t)(urand() * 2 * V), pos[i] = i % S; /* half out of the shard */
    for (int t = 0; t < 2; t++) {
        const mc_dtype_t dt = TYPES[t];
        buf_t wte = mk(dt, (long)V * H, -1, 1), wpe = mk(dt, (long)S * H, -1, 1), out = mk(dt, (long)N * H, 0, 0);
        be->embedding_forward(be, MC_DT_F32, out.ref, tok, pos, wte.ref, wpe.ref, S, B, H, 0, V);
        be->embedding_forward(be, dt, out.h, tok, pos, wte.h, wpe.h, S, B, H, 0, V);
        same(&out, "embedding_forward");
        buf_t dout = mk(dt, (long)N * H, -1, 1), dwte = mk(MC_DT_F32, (long)V * H, -1, 1),
              dwpe = mk(dt, (long)S * H, -1, 1); /* fp32 word and 16-bit position gradients */
        be->embedding_backward(be, MC_DT_F32, MC_DT_F32, dwte.ref, NULL, dout.ref, tok, pos, S, B, H, 0, V);
        be->embedding_backward(be, dt, MC_DT_F32, dwte.h, NULL, dout.h, tok, pos, S, B, H, 0, V);
        be->embedding_backward(be, MC_DT_F32, MC_DT_F32, NULL, dwpe.ref, dout.ref, tok, pos, S, B, H, 0, V);
        be->embedding_backward(be, dt, dt, NULL, dwpe.h, dout.h, tok, pos, S, B, H, 0, V);
        same(&dwte, "embedding_backward dwte");
        same(&dwpe, "embedding_backward dwpe");
        buf_t *all[] = {&wte, &wpe, &out, &dout, &dwte, &dwpe};
        for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) rm(all[i]);
    }
}

static void test_layernorm(void **state)
{
    (void)state;
    for (int t = 0; t < 2; t++) {
        const mc_dtype_t dt = TYPES[t];
        buf_t x = mk(dt, (long)N * H, -2, 3), w = mk(dt, H, 0.5, 1.5), b = mk(dt, H, -1, 1), out = mk(dt, (long)N * H, 0, 0);
        float mean[2][N], rstd[2][N];
        be->layernorm_forward(be, MC_DT_F32, out.ref, mean[0], rstd[0], x.ref, w.ref, b.ref, N, H, 1e-5f);
        be->layernorm_forward(be, dt, out.h, mean[1], rstd[1], x.h, w.h, b.h, N, H, 1e-5f);
        same(&out, "layernorm_forward");
        assert_memory_equal(mean[0], mean[1], sizeof(mean[0]));
        assert_memory_equal(rstd[0], rstd[1], sizeof(rstd[0]));
        buf_t dout = mk(dt, (long)N * H, -1, 1), dx = mk(dt, (long)N * H, -1, 1);
        buf_t dw = mk(MC_DT_F32, H, -1, 1), db = mk(MC_DT_F32, H, -1, 1);
        be->layernorm_backward_acc(be, MC_DT_F32, MC_DT_F32, dx.ref, dw.ref, db.ref, dout.ref, x.ref, w.ref,
                                   mean[0], rstd[0], N, H);
        be->layernorm_backward_acc(be, dt, MC_DT_F32, dx.h, dw.h, db.h, dout.h, x.h, w.h, mean[1], rstd[1], N, H);
        same(&dx, "layernorm_backward dx");
        same(&dw, "layernorm_backward dw");
        same(&db, "layernorm_backward db");
        buf_t *all[] = {&x, &w, &b, &out, &dout, &dx, &dw, &db};
        for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) rm(all[i]);
    }
}

static void test_elementwise(void **state)
{
    (void)state;
    const long n = 301;
    for (int t = 0; t < 2; t++) {
        const mc_dtype_t dt = TYPES[t];
        for (mc_act_t act = MC_ACT_GELU_ERF; act <= MC_ACT_SQUARED_RELU; act++) {
            buf_t x = mk(dt, n, -4, 4), g = mk(dt, n, -1, 1);
            buf_t o = mk(dt, n, 0, 0);
            be->gelu_forward(be, MC_DT_F32, o.ref, x.ref, n, act);
            be->gelu_forward(be, dt, o.h, x.h, n, act);
            same(&o, "gelu_forward");
            be->gelu_backward(be, MC_DT_F32, g.ref, g.ref, x.ref, n, act); /* in place */
            be->gelu_backward(be, dt, g.h, g.h, x.h, n, act);
            same(&g, "gelu_backward in place");
            rm(&x), rm(&g), rm(&o);
        }
        buf_t a = mk(dt, n, -3, 3), b = mk(dt, n, -3, 3), o = mk(dt, n, 0, 0);
        be->add(be, MC_DT_F32, o.ref, a.ref, b.ref, n);
        be->add(be, dt, o.h, a.h, b.h, n);
        same(&o, "add");
        be->add_inplace(be, MC_DT_F32, a.ref, b.ref, n);
        be->add_inplace(be, dt, a.h, b.h, n);
        same(&a, "add_inplace");
        be->scale(be, MC_DT_F32, b.ref, 0.37f, n);
        be->scale(be, dt, b.h, 0.37f, n);
        same(&b, "scale");
        /* reductions read the 16-bit values */
        double sq = 0;
        long zeros = 0;
        mc_store_f32(b.h, dt, 5, 0.0f), mc_store_f32(b.h, dt, 7, -0.0f);
        for (long i = 0; i < n; i++) {
            const double v = mc_load_f32(b.h, dt, i);
            sq += v * v;
            zeros += v == 0.0;
        }
        assert_true(fabs(be->sumsq(be, dt, b.h, n) - sq) <= 1e-12 * sq);
        assert_true(zeros >= 2);
        assert_int_equal(be->count_zeros(be, dt, b.h, n), zeros);
        assert_int_equal(be->has_nonfinite(be, dt, b.h, n), 0);
        mc_store_f32(b.h, dt, 100, INFINITY);
        assert_int_equal(be->has_nonfinite(be, dt, b.h, n), 1);
        mc_store_f32(b.h, dt, 100, NAN);
        assert_int_equal(be->has_nonfinite(be, dt, b.h, n), 1);
        assert_int_equal(be->has_nonfinite(be, dt, b.h, 100), 0);
        /* fp16 overflow: a product past 65504 becomes inf, which has_nonfinite sees */
        if (dt == MC_DT_F16) {
            mc_store_f32(b.h, dt, 0, 60000.0f);
            be->scale(be, dt, b.h, 2.0f, 1);
            assert_true(isinf(mc_load_f32(b.h, dt, 0)));
        }
        /* convert */
        buf_t c = mk(MC_DT_F32, n, -70000, 70000), d = mk(dt, n, 0, 0);
        be->convert(be, d.h, dt, c.h, MC_DT_F32, n);
        memcpy(d.ref, c.ref, (size_t)n * sizeof(float));
        same(&d, "convert");
        rm(&a), rm(&b), rm(&o), rm(&c), rm(&d);
    }
}

static void test_dropout(void **state)
{
    (void)state;
    const mc_dropout_t d = {.seed = 77, .iteration = 3, .layer = 2, .site = MC_DROPOUT_SITE_MLP_OUT, .sample0 = 11,
                            .p = 0.3f};
    for (int t = 0; t < 2; t++) {
        const mc_dtype_t dt = TYPES[t];
        buf_t x = mk(dt, (long)N * H, -1, 1), o = mk(dt, (long)N * H, 0, 0);
        be->dropout_forward(be, MC_DT_F32, o.ref, x.ref, &d, S, B, H, 0, H, 0);
        be->dropout_forward(be, dt, o.h, x.h, &d, S, B, H, 0, H, 0);
        same(&o, "dropout_forward");
        be->dropout_backward(be, MC_DT_F32, x.ref, x.ref, &d, S, B, H, 2, 3 * H, 5); /* in place, a shard */
        be->dropout_backward(be, dt, x.h, x.h, &d, S, B, H, 2, 3 * H, 5);
        same(&x, "dropout_backward in place");
        rm(&x), rm(&o);
    }
}

static void test_attention(void **state)
{
    (void)state;
    const mc_dropout_t d = {.seed = 5, .iteration = 1, .layer = 1, .site = MC_DROPOUT_SITE_ATTN_PROBS, .sample0 = 3,
                            .p = 0.2f};
    const float scale = 1.0f / sqrtf((float)HD);
    for (int t = 0; t < 2; t++) {
        const mc_dtype_t dt = TYPES[t];
        size_t st[2], sc;
        be->attention_sizes(be, MC_DT_F32, S, B, NH, HD, &st[0], &sc);
        be->attention_sizes(be, dt, S, B, NH, HD, &st[1], &sc);
        assert_true(st[1] <= st[0]); /* the state is never wider than fp32's */
        const long no = (long)N * NH * HD, np = (long)st[0] / 4;
        buf_t qkv = mk(dt, 3 * no, -2, 2), out = mk(dt, no, 0, 0), probs = mk(dt, np, 0, 0);
        float *scratch = calloc(sc / 4 + 1, 4);
        be->attention_forward(be, MC_DT_F32, out.ref, probs.ref, NULL, qkv.ref, S, B, NH, NH, HD, NULL, scale, &d, 1, 4);
        be->attention_forward(be, dt, out.h, probs.h, NULL, qkv.h, S, B, NH, NH, HD, NULL, scale, &d, 1, 4);
        same(&out, "attention_forward");
        same(&probs, "attention_forward saved probabilities");
        /* the backward reads the saved (rounded) probabilities: the reference gets them too */
        for (long i = 0; i < np; i++) probs.ref[i] = mc_round_to(dt, probs.ref[i]);
        for (long i = 0; i < no; i++) out.ref[i] = mc_round_to(dt, out.ref[i]);
        buf_t dout = mk(dt, no, -1, 1), dqkv = mk(dt, 3 * no, 0, 0);
        be->attention_backward(be, MC_DT_F32, dqkv.ref, scratch, dout.ref, qkv.ref, out.ref, probs.ref, S, B, NH, NH,
                               HD, NULL, scale, &d, 1, 4);
        be->attention_backward(be, dt, dqkv.h, scratch, dout.h, qkv.h, out.h, probs.h, S, B, NH, NH, HD, NULL, scale,
                               &d, 1, 4);
        same(&dqkv, "attention_backward");
        free(scratch);
        rm(&qkv), rm(&out), rm(&probs), rm(&dout), rm(&dqkv);
    }
}

static void test_cross_entropy(void **state)
{
    (void)state;
    int32_t tg[N];
    for (int i = 0; i < N; i++) tg[i] = (int32_t)(urand() * V);
    float dloss[N];
    for (int i = 0; i < N; i++) dloss[i] = (float)(urand() - 0.3);
    for (int t = 0; t < 2; t++) {
        const mc_dtype_t dt = TYPES[t];
        buf_t lg = mk(dt, (long)N * V, -6, 6);
        float mx[2][N], se[2][2 * N], loss[2][N];
        be->ce_max(be, MC_DT_F32, mx[0], lg.ref, N, V);
        be->ce_max(be, dt, mx[1], lg.h, N, V);
        assert_memory_equal(mx[0], mx[1], sizeof(mx[0]));
        be->ce_sums(be, MC_DT_F32, se[0], se[0] + N, lg.ref, mx[0], tg, S, B, V, 0);
        be->ce_sums(be, dt, se[1], se[1] + N, lg.h, mx[1], tg, S, B, V, 0);
        assert_memory_equal(se[0], se[1], sizeof(se[0]));
        be->ce_loss(be, loss[0], mx[0], se[0], se[0] + N, S, B);
        be->ce_loss(be, loss[1], mx[1], se[1], se[1] + N, S, B);
        assert_memory_equal(loss[0], loss[1], sizeof(loss[0]));
        be->ce_backward(be, MC_DT_F32, lg.ref, lg.ref, mx[0], se[0], tg, dloss, S, B, V, 0); /* in place */
        be->ce_backward(be, dt, lg.h, lg.h, mx[1], se[1], tg, dloss, S, B, V, 0);
        same(&lg, "ce_backward in place");
        rm(&lg);
    }
}

static int setup(void **state)
{
    (void)state;
    be = mc_backend_cpu();
    return 0;
}

/* ---- the Llama block: RMSNorm and SwiGLU ---- */

static void test_rmsnorm(void **state)
{
    (void)state;
    for (int t = 0; t < 2; t++)
        for (int gfp32 = 0; gfp32 <= 1; gfp32++) {
            const mc_dtype_t dt = TYPES[t], gdt = gfp32 ? MC_DT_F32 : dt;
            buf_t x = mk(dt, (long)N * H, -2, 3), w = mk(dt, H, 0.5, 1.5), out = mk(dt, (long)N * H, 0, 0);
            float rstd[2][N];
            be->rmsnorm_forward(be, MC_DT_F32, out.ref, rstd[0], x.ref, w.ref, N, H, 1e-5f);
            be->rmsnorm_forward(be, dt, out.h, rstd[1], x.h, w.h, N, H, 1e-5f);
            same(&out, "rmsnorm_forward");
            assert_memory_equal(rstd[0], rstd[1], sizeof(rstd[0]));
            buf_t dout = mk(dt, (long)N * H, -1, 1), dx = mk(dt, (long)N * H, -1, 1), dw = mk(gdt, H, -1, 1);
            be->rmsnorm_backward_acc(be, MC_DT_F32, MC_DT_F32, dx.ref, dw.ref, dout.ref, x.ref, w.ref, rstd[0], N, H);
            be->rmsnorm_backward_acc(be, dt, gdt, dx.h, dw.h, dout.h, x.h, w.h, rstd[1], N, H);
            same(&dx, "rmsnorm_backward dx");
            same(&dw, "rmsnorm_backward dw");
            buf_t *all[] = {&x, &w, &out, &dout, &dx, &dw};
            for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) rm(all[i]);
        }
}

static void test_swiglu(void **state)
{
    (void)state;
    for (int t = 0; t < 2; t++) {
        const mc_dtype_t dt = TYPES[t];
        buf_t x = mk(dt, (long)N * 2 * FF, -5, 5), out = mk(dt, (long)N * FF, 0, 0);
        be->swiglu_forward(be, MC_DT_F32, out.ref, x.ref, N, FF);
        be->swiglu_forward(be, dt, out.h, x.h, N, FF);
        same(&out, "swiglu_forward");
        buf_t dout = mk(dt, (long)N * FF, -1, 1), dx = mk(dt, (long)N * 2 * FF, 0, 0);
        be->swiglu_backward(be, MC_DT_F32, dx.ref, dout.ref, x.ref, N, FF);
        be->swiglu_backward(be, dt, dx.h, dout.h, x.h, N, FF);
        same(&dx, "swiglu_backward");
        rm(&x), rm(&out), rm(&dout), rm(&dx);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear),    cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_layernorm), cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_dropout),   cmocka_unit_test(test_attention),
        cmocka_unit_test(test_cross_entropy),
        cmocka_unit_test(test_rmsnorm),   cmocka_unit_test(test_swiglu),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
