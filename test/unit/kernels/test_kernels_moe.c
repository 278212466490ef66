/* The CPU backend's MoE ops (kernels/moe.h) against Megatron-LM's own moe_utils arithmetic run
 * by torch (test/ref/moe_ref.py -> test/fixtures/moe_ops.mcfx): routing with every score
 * function, pre/post softmax, expert bias, group-limited routing and scaling, in fp32, fp64 and
 * bf16, with exact ties resolved as CUDA's torch.topk; the gradients autograd takes; token
 * dropping with both policies, padded or not; the aux, seq-aux and z losses and their gradients;
 * permute / unpermute / chunk sorting; the experts' grouped linear layers; the expert bias. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/device.h"
#include "kernels/moe.h"
#include "test/unit/fixture.h"

static mc_fx_t *g_fx;
static const mc_backend_t *g_be;

static const mc_fx_tensor_t *rec(const char *name)
{
    const mc_fx_tensor_t *t = mc_fx_get(g_fx, name);
    if (!t) fail_msg("fixture record %s missing", name);
    return t;
}

/* A record's values in a buffer of type dt (the fixture holds them exactly). */
static void *as_type(const char *name, mc_dtype_t dt)
{
    const mc_fx_tensor_t *t = rec(name);
    void *p = calloc((size_t)t->numel + 1, mc_dtype_size(dt));
    for (int64_t i = 0; i < t->numel; i++) mc_moe_store(dt, p, i, mc_fx_at(t, i));
    return p;
}

/* got (type dt, n) against a record: |got - want| <= atol + rtol |want| everywhere. */
static void expect_close(const char *what, mc_dtype_t dt, const void *got, const char *name,
                         double atol, double rtol)
{
    const mc_fx_tensor_t *t = rec(name);
    for (int64_t i = 0; i < t->numel; i++) {
        const double g = mc_moe_load(dt, got, i), w = mc_fx_at(t, i);
        if (!(fabs(g - w) <= atol + rtol * fabs(w)))
            fail_msg("%s: element %lld is %.9g, Megatron's %.9g", what, (long long)i, g, w);
    }
}

static void expect_bytes(const char *what, const uint8_t *got, const char *name)
{
    const mc_fx_tensor_t *t = rec(name);
    for (int64_t i = 0; i < t->numel; i++)
        if (got[i] != (uint8_t)mc_fx_at(t, i))
            fail_msg("%s: element %lld (token %lld) is %d, Megatron's %d", what, (long long)i,
                     (long long)(i / 8), got[i], (int)mc_fx_at(t, i));
}

static const struct {
    const char *name;
    mc_dtype_t rdt;
    mc_moe_router_t r;
    double tol;
} ROUTERS[] = {
    {"softmax_k2", MC_DT_F32, {8, 2, 0, 0, 0, 0, 0}, 1e-6},
    {"pre_k1", MC_DT_F32, {6, 1, 0, 1, 0, 0, 0}, 1e-6},
    {"sigmoid_bias", MC_DT_F32, {8, 3, 1, 0, 0, 0, 2.5}, 1e-6},
    {"sigmoid_k1_f64", MC_DT_F64, {8, 1, 1, 0, 0, 0, 0}, 1e-7},
    {"group_pre", MC_DT_F32, {16, 4, 0, 1, 4, 2, 0}, 1e-6},
    {"group_sigmoid_bias", MC_DT_F32, {16, 4, 1, 0, 4, 2, 2.5}, 1e-6},
    {"softmax_bf16", MC_DT_BF16, {8, 2, 0, 0, 0, 0, 0}, 8e-3},
};

static void test_route(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof(ROUTERS) / sizeof(ROUTERS[0]); c++) {
        char n[128], what[160];
        const mc_dtype_t rdt = ROUTERS[c].rdt;
        const mc_moe_router_t *r = &ROUTERS[c].r;
        snprintf(n, sizeof(n), "route.%s.logits", ROUTERS[c].name);
        const long T = (long)rec(n)->dims[0];
        const int E = r->num_experts;
        assert_null(mc_moe_router_unsupported(r));
        void *logits = as_type(n, rdt);
        snprintf(n, sizeof(n), "route.%s.bias", ROUTERS[c].name);
        float *bias = mc_fx_get(g_fx, n) ? as_type(n, MC_DT_F32) : NULL;
        void *probs = calloc((size_t)(T * E), 8), *dl = calloc((size_t)(T * E), 8);
        uint8_t *map = calloc((size_t)(T * E), 1);
        g_be->moe->route(g_be, rdt, r, probs, map, logits, bias, T);
        snprintf(what, sizeof(what), "%s map", ROUTERS[c].name);
        snprintf(n, sizeof(n), "route.%s.map", ROUTERS[c].name);
        expect_bytes(what, map, n);
        snprintf(what, sizeof(what), "%s probs", ROUTERS[c].name);
        snprintf(n, sizeof(n), "route.%s.probs", ROUTERS[c].name);
        expect_close(what, rdt, probs, n, ROUTERS[c].tol, ROUTERS[c].tol);
        snprintf(n, sizeof(n), "route.%s.dprobs", ROUTERS[c].name);
        void *dprobs = as_type(n, rdt);
        g_be->moe->route_backward(g_be, rdt, r, dl, dprobs, logits, bias, NULL, T);
        snprintf(what, sizeof(what), "%s dlogits", ROUTERS[c].name);
        snprintf(n, sizeof(n), "route.%s.dlogits", ROUTERS[c].name);
        expect_close(what, rdt, dl, n, ROUTERS[c].tol, 4 * ROUTERS[c].tol);
        free(logits), free(bias), free(probs), free(dl), free(map), free(dprobs);
    }
}

static void test_capacity(void **state)
{
    (void)state;
    const long T = 40, cap = (long)mc_fx_scalar(g_fx, "capacity.capacity");
    const int E = 8;
    assert_int_equal(cap, 5);
    assert_int_equal(mc_moe_expert_capacity(T * 2, E, 0.5), cap);
    assert_int_equal(mc_moe_expert_capacity(100, 3, 1.0), 34); /* ceil(33.33) */
    assert_int_equal(mc_moe_expert_capacity(96, 8, 1.25), 15);
    float *probs = as_type("route.softmax_k2.probs", MC_DT_F32);
    float *m32 = as_type("route.softmax_k2.map", MC_DT_F32);
    uint8_t map[40 * 8], keep[40 * 8];
    for (int i = 0; i < 40 * 8; i++) map[i] = m32[i] != 0;
    static const char *const names[] = {"probs", "probs_pad", "position", "position_pad"};
    float out[40 * 8];
    for (int v = 0; v < 4; v++) {
        char n[96], what[96];
        g_be->moe->capacity(g_be, MC_DT_F32, out, keep, probs, map, T, E, cap, v >= 2, v % 2);
        snprintf(n, sizeof(n), "capacity.%s.keep", names[v]);
        snprintf(what, sizeof(what), "capacity %s keep", names[v]);
        expect_bytes(what, keep, n);
        snprintf(n, sizeof(n), "capacity.%s.probs", names[v]);
        expect_close(what, MC_DT_F32, out, n, 0, 0);
    }
    /* the dropped probs get no gradient: route_backward with the kept map */
    float dlk[40 * 8], dl[40 * 8], *dprobs = as_type("route.softmax_k2.dprobs", MC_DT_F32);
    float *logits = as_type("route.softmax_k2.logits", MC_DT_F32);
    const mc_moe_router_t r = {8, 2, 0, 0, 0, 0, 0};
    g_be->moe->capacity(g_be, MC_DT_F32, out, keep, probs, map, T, E, cap, 0, 0);
    g_be->moe->route_backward(g_be, MC_DT_F32, &r, dlk, dprobs, logits, NULL, keep, T);
    for (int i = 0; i < 40 * 8; i++)
        if (!keep[i]) dprobs[i] = 0;
    g_be->moe->route_backward(g_be, MC_DT_F32, &r, dl, dprobs, logits, NULL, NULL, T);
    assert_memory_equal(dl, dlk, sizeof(dl));
    free(probs), free(m32), free(dprobs), free(logits);
}

/* aux_loss and seq_aux_loss: statistics, the loss from them, the gradient. */
static void test_aux_losses(void **state)
{
    (void)state;
    const int S = 10, B = 4, E = 8, k = 2;
    const double coeff = 1e-2;
    for (int sig = 0; sig <= 1; sig++)
        for (int seq = 0; seq <= 1; seq++) {
            char n[96], pre[32];
            snprintf(pre, sizeof(pre), "aux.%s.%s", sig ? "sigmoid" : "softmax", seq ? "seq_" : "");
            const int G = seq ? B : 1;
            const long T = (long)S * B, Ttot = seq ? S : T;
            float *logits = as_type(sig ? "aux.sigmoid.logits" : "aux.softmax.logits", MC_DT_F32);
            float counts[4 * 8], psum[4 * 8], dl[40 * 8] = {0};
            g_be->moe->aux_stats(g_be, MC_DT_F32, sig, k, counts, psum, logits, T, E, G);
            snprintf(n, sizeof(n), "%scounts", pre);
            expect_close(n, MC_DT_F32, counts, n, 0, 0);
            snprintf(n, sizeof(n), "%spsum", pre);
            expect_close(n, MC_DT_F32, psum, n, 1e-5, 1e-6);
            const double f = E * coeff / ((double)k * Ttot * Ttot) / G;
            double loss = 0;
            for (int i = 0; i < G * E; i++) loss += (double)psum[i] * counts[i];
            snprintf(n, sizeof(n), "%sloss", pre);
            const double want = mc_fx_scalar(g_fx, n);
            if (fabs(loss * f - want) > 1e-6 * fabs(want)) fail_msg("%s: %.9g vs %.9g", n, loss * f, want);
            g_be->moe->aux_backward(g_be, MC_DT_F32, sig, dl, logits, counts, (float)f, T, E, G);
            snprintf(n, sizeof(n), "%sdlogits", pre);
            expect_close(n, MC_DT_F32, dl, n, 1e-9, 1e-5);
            free(logits);
        }
    /* z-loss: coeff * mean(lse^2) and its gradient */
    float *logits = as_type("z.logits", MC_DT_F32), zsum, dl[40 * 8] = {0};
    g_be->moe->z_loss(g_be, MC_DT_F32, &zsum, logits, 40, 8);
    const double z = 1e-3 * zsum / 40, want = mc_fx_scalar(g_fx, "z.loss");
    if (fabs(z - want) > 1e-6 * want) fail_msg("z-loss %.9g vs %.9g", z, want);
    g_be->moe->z_loss_backward(g_be, MC_DT_F32, dl, logits, (float)(1e-3 / 40), 40, 8);
    expect_close("z-loss dlogits", MC_DT_F32, dl, "z.dlogits", 1e-10, 1e-5);
    free(logits);
}

static void test_permutation(void **state)
{
    (void)state;
    const long T = 40;
    const int E = 8, H = 6;
    float *probs = as_type("route.softmax_k2.probs", MC_DT_F32), *m = as_type("route.softmax_k2.map", MC_DT_F32);
    uint8_t map[40 * 8];
    for (int i = 0; i < 40 * 8; i++) map[i] = m[i] != 0;
    const long N = (long)rec("perm.rows")->numel;
    int32_t rows[80], row_of[40 * 8], counts[8];
    float pprobs[80], out[80 * 6], tokens_out[40 * 6], dx[80 * 6], dpp[80];
    g_be->moe->tokens_per_expert(g_be, counts, map, T, E);
    long sum = 0;
    for (int e = 0; e < E; e++) sum += counts[e];
    assert_int_equal(sum, N);
    g_be->moe->permute_map(g_be, MC_DT_F32, rows, row_of, pprobs, probs, map, T, E, N);
    for (long i = 0; i < N; i++) assert_int_equal(rows[i], (int)mc_fx_at(rec("perm.rows"), i));
    expect_close("permuted probs", MC_DT_F32, pprobs, "perm.pprobs", 0, 0);
    float *tokens = as_type("perm.tokens", MC_DT_F32), *x = as_type("perm.x", MC_DT_F32);
    g_be->moe->permute(g_be, MC_DT_F32, out, tokens, rows, N, H);
    expect_close("permuted tokens", MC_DT_F32, out, "perm.permuted", 0, 0);
    g_be->moe->unpermute(g_be, MC_DT_F32, MC_DT_F32, tokens_out, x, row_of, NULL, T, E, H);
    expect_close("unpermuted", MC_DT_F32, tokens_out, "perm.unpermuted", 1e-6, 1e-6);
    g_be->moe->unpermute(g_be, MC_DT_F32, MC_DT_F32, tokens_out, x, row_of, pprobs, T, E, H);
    expect_close("unpermuted with probs", MC_DT_F32, tokens_out, "perm.unpermuted_probs", 1e-6, 1e-6);
    float *dout = as_type("perm.dout", MC_DT_F32);
    g_be->moe->unpermute_backward(g_be, MC_DT_F32, MC_DT_F32, dx, dpp, dout, x, rows, pprobs, N, H);
    expect_close("unpermute dx", MC_DT_F32, dx, "perm.dx", 1e-6, 1e-6);
    expect_close("unpermute dprobs", MC_DT_F32, dpp, "perm.dpprobs", 1e-6, 1e-5);
    /* sort_chunks_by_idxs */
    const mc_fx_tensor_t *sz = rec("chunks.sizes"), *ord = rec("chunks.order");
    long sizes[4];
    int order[4];
    for (int c = 0; c < 4; c++) sizes[c] = (long)mc_fx_at(sz, c), order[c] = (int)mc_fx_at(ord, c);
    float *in = as_type("chunks.in", MC_DT_F32), sorted[10 * 6];
    g_be->moe->sort_chunks(g_be, MC_DT_F32, sorted, in, sizes, order, 4, H);
    expect_close("sorted chunks", MC_DT_F32, sorted, "chunks.out", 0, 0);
    free(probs), free(m), free(tokens), free(x), free(dout), free(in);
}

static void test_experts(void **state)
{
    (void)state;
    const mc_fx_tensor_t *mt = rec("gemm.m");
    long m[4];
    for (int g = 0; g < 4; g++) m[g] = (long)mc_fx_at(mt, g);
    const int K = 7, N = 5;
    float *W = as_type("gemm.W", MC_DT_F32), *x = as_type("gemm.x", MC_DT_F32);
    float *dout = as_type("gemm.dout", MC_DT_F32), out[10 * 5], dx[10 * 7], dW[4 * 5 * 7] = {0};
    const void *Wp[4];
    void *dWp[4];
    for (int g = 0; g < 4; g++) Wp[g] = W + g * N * K, dWp[g] = dW + g * N * K;
    g_be->moe->grouped_linear_forward(g_be, MC_DT_F32, out, x, Wp, m, 4, K, N);
    expect_close("grouped linear", MC_DT_F32, out, "gemm.out", 1e-5, 1e-5);
    g_be->moe->grouped_linear_backward(g_be, MC_DT_F32, MC_DT_F32, dx, dWp, dout, x, Wp, m, 4, K, N);
    expect_close("grouped linear dx", MC_DT_F32, dx, "gemm.dx", 1e-5, 1e-5);
    expect_close("grouped linear dW", MC_DT_F32, dW, "gemm.dW", 1e-5, 1e-5);
    /* the experts as separate tensors in reverse order with gaps (a gradient buffer's layout):
     * the same numbers, the gaps untouched */
    enum { WS = 5 * 7 + 3 };
    float Ws[4 * WS], dWs[4 * WS] = {0}, outs[10 * 5], dxs2[10 * 7];
    for (int g = 0; g < 4; g++) {
        memcpy(Ws + (3 - g) * WS, W + g * N * K, sizeof(float) * N * K);
        Wp[g] = Ws + (3 - g) * WS, dWp[g] = dWs + (3 - g) * WS;
    }
    g_be->moe->grouped_linear_forward(g_be, MC_DT_F32, outs, x, Wp, m, 4, K, N);
    g_be->moe->grouped_linear_backward(g_be, MC_DT_F32, MC_DT_F32, dxs2, dWp, dout, x, Wp, m, 4, K, N);
    assert_memory_equal(outs, out, sizeof(out));
    assert_memory_equal(dxs2, dx, sizeof(dx));
    for (int g = 0; g < 4; g++) {
        assert_memory_equal(dWs + (3 - g) * WS, dW + g * N * K, sizeof(float) * N * K);
        for (int i = N * K; i < WS; i++) assert_true(dWs[g * WS + i] == 0);
    }
    float *xs = as_type("scale.x", MC_DT_F32), *p = as_type("scale.p", MC_DT_F32);
    float *dy = as_type("scale.dy", MC_DT_F32), y[10 * 7], dxs[10 * 7], dp[10];
    g_be->moe->scale_rows(g_be, MC_DT_F32, MC_DT_F32, y, xs, p, 10, K);
    expect_close("probs applied", MC_DT_F32, y, "scale.y", 0, 0);
    g_be->moe->scale_rows_backward(g_be, MC_DT_F32, MC_DT_F32, dxs, dp, dy, xs, p, 10, K);
    expect_close("probs applied dx", MC_DT_F32, dxs, "scale.dx", 0, 0);
    expect_close("probs applied dp", MC_DT_F32, dp, "scale.dp", 1e-6, 1e-6);
    float *counts = as_type("bias.counts", MC_DT_F32), *bias = as_type("bias.bias", MC_DT_F32);
    g_be->moe->expert_bias_update(g_be, bias, counts, 6, 1e-3f);
    expect_close("expert bias", MC_DT_F32, bias, "bias.updated", 0, 0);
    free(W), free(x), free(dout), free(xs), free(p), free(dy), free(counts), free(bias);
}

static void test_unsupported_router(void **state)
{
    (void)state;
    assert_non_null(mc_moe_router_unsupported(&(mc_moe_router_t){4, 5, 0, 0, 0, 0, 0}));
    assert_non_null(mc_moe_router_unsupported(&(mc_moe_router_t){2000, 2, 0, 0, 0, 0, 0}));
    assert_non_null(mc_moe_router_unsupported(&(mc_moe_router_t){8, 4, 0, 0, 3, 1, 0}));
    assert_non_null(mc_moe_router_unsupported(&(mc_moe_router_t){8, 4, 0, 0, 4, 1, 0}));
    assert_null(mc_moe_router_unsupported(&(mc_moe_router_t){8, 4, 0, 0, 4, 2, 0}));
}

/* The strict test backend (the CPU's ops on memory the host cannot touch) runs the MoE ops on
 * its device views: the CPU's results bit for bit, or a crash where a pointer is not translated. */
static void *sput(const mc_backend_t *sb, const void *h, size_t bytes)
{
    void *d = sb->alloc(sb, bytes);
    assert_non_null(d);
    sb->memcpy_h2d(sb, d, h, bytes);
    return d;
}

static void test_strict_backend(void **state)
{
    (void)state;
    const mc_backend_t *sb = mc_backend_strict();
    assert_non_null(sb->moe);
    const long T = 40;
    const int E = 8, H = 6;
    const mc_moe_router_t r = {8, 3, 1, 0, 0, 0, 2.5};
    float *logits = as_type("route.sigmoid_bias.logits", MC_DT_F32), *bias = as_type("route.sigmoid_bias.bias", MC_DT_F32);
    float probs[40 * 8], keepp[40 * 8], got[40 * 8], x[120 * 6], out[40 * 6], gout[40 * 6];
    uint8_t map[40 * 8], keep[40 * 8], gmap[40 * 8];
    int32_t rows[120], row_of[40 * 8], grows[120];
    g_be->moe->route(g_be, MC_DT_F32, &r, probs, map, logits, bias, T);
    g_be->moe->capacity(g_be, MC_DT_F32, keepp, keep, probs, map, T, E, 12, 0, 0);
    long N = 0;
    for (int i = 0; i < 40 * 8; i++) N += keep[i];
    for (long i = 0; i < N * H; i++) x[i] = (float)(i % 13) - 6;
    g_be->moe->permute_map(g_be, MC_DT_F32, rows, row_of, NULL, keepp, keep, T, E, N);
    g_be->moe->unpermute(g_be, MC_DT_F32, MC_DT_F32, out, x, row_of, NULL, T, E, H);
    void *d_logits = sput(sb, logits, sizeof(probs)), *d_bias = sput(sb, bias, 8 * 4), *d_probs = sput(sb, probs, sizeof(probs));
    void *d_map = sput(sb, map, sizeof(map)), *d_keepp = sput(sb, probs, sizeof(probs)), *d_keep = sput(sb, map, sizeof(map));
    void *d_rows = sput(sb, rows, sizeof(rows)), *d_row_of = sput(sb, row_of, sizeof(row_of)), *d_x = sput(sb, x, sizeof(x));
    void *d_out = sput(sb, out, sizeof(out));
    sb->moe->route(sb, MC_DT_F32, &r, d_probs, d_map, d_logits, d_bias, T);
    sb->moe->capacity(sb, MC_DT_F32, d_keepp, d_keep, d_probs, d_map, T, E, 12, 0, 0);
    sb->moe->permute_map(sb, MC_DT_F32, d_rows, d_row_of, NULL, d_keepp, d_keep, T, E, N);
    sb->moe->unpermute(sb, MC_DT_F32, MC_DT_F32, d_out, d_x, d_row_of, NULL, T, E, H);
    sb->memcpy_d2h(sb, got, d_keepp, sizeof(got));
    sb->memcpy_d2h(sb, gmap, d_keep, sizeof(gmap));
    sb->memcpy_d2h(sb, grows, d_rows, (size_t)N * 4);
    sb->memcpy_d2h(sb, gout, d_out, sizeof(gout));
    assert_memory_equal(got, keepp, sizeof(got));
    assert_memory_equal(gmap, keep, sizeof(gmap));
    assert_memory_equal(grows, rows, (size_t)N * 4);
    assert_memory_equal(gout, out, sizeof(gout));
    void *all[] = {d_logits, d_bias, d_probs, d_map, d_keepp, d_keep, d_rows, d_row_of, d_x, d_out};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) sb->free(sb, all[i]);
    free(logits), free(bias);
}

/* One token's routing by the CPU op (fp32): its map and probabilities against hand-computed
 * ones (probs within 1e-6). */
static void route_one(const char *what, const mc_moe_router_t *r, const float *logits,
                      const float *bias, const uint8_t *want_map, const double *want_p)
{
    const int E = r->num_experts;
    float probs[8];
    uint8_t map[8];
    g_be->moe->route(g_be, MC_DT_F32, r, probs, map, logits, bias, 1);
    for (int e = 0; e < E; e++) {
        if (map[e] != want_map[e] || fabs(probs[e] - want_p[e]) > 1e-6)
            fail_msg("%s: expert %d map %d prob %.8g, want %d %.8g", what, e, map[e], probs[e],
                     want_map[e], want_p[e]);
    }
}

/* Small cases computed by hand from Megatron's topk_routing_with_score_function and
 * group_limited_topk, ties taken as torch.topk takes them (the lower index first among equal
 * values), and get_updated_expert_bias. */
static void test_route_by_hand(void **state)
{
    (void)state;
    const float l3 = logf(3.0f); /* sigmoid(ln 3) = 3/4, sigmoid(-ln 3) = 1/4 */
    /* sigmoid top-2 with a tie at 3/4 (experts 1 and 3 beat expert 0's 1/2): 3/4 / (3/4 + 3/4),
     * scaled by 2 */
    const mc_moe_router_t sig2 = {4, 2, 1, 0, 0, 0, 2.0};
    route_one("sigmoid top-2, scaled", &sig2, (const float[]){0, l3, -l3, l3}, NULL,
              (const uint8_t[]){0, 1, 0, 1}, (const double[]){0, 1.0, 0, 1.0});
    /* softmax after the top-k, three equal logits: the two lowest indices, half each */
    const mc_moe_router_t soft2 = {4, 2, 0, 0, 0, 0, 0};
    route_one("softmax top-2, ties", &soft2, (const float[]){1, 2, 2, 2}, NULL,
              (const uint8_t[]){0, 1, 1, 0}, (const double[]){0, 0.5, 0.5, 0});
    /* the expert bias chooses (scores 3/4, 1/2, 1/2, 1/4 + 0.6) but the unbiased scores weigh:
     * experts 0 and 3, 3/4 and 1/4 over their sum 1 */
    const mc_moe_router_t sig2b = {4, 2, 1, 0, 0, 0, 0};
    route_one("sigmoid top-2, expert bias", &sig2b, (const float[]){l3, 0, 0, -l3},
              (const float[]){0, 0, 0, 0.6f}, (const uint8_t[]){1, 0, 0, 1},
              (const double[]){0.75, 0, 0, 0.25});
    /* group-limited: 4 groups of 2, the best 2 by the sum of their top 4/2 = 2 scores (5, 8,
     * 4.5, 2: groups 1 and 0); top-4 of experts 0..3 (plain top-4 would take expert 4's 4.5),
     * softmax over 5, 4, 4, 0 */
    const mc_moe_router_t grp = {8, 4, 0, 0, 4, 2, 0};
    const double z = exp(5.0) + 2 * exp(4.0) + 1;
    route_one("group-limited top-4", &grp, (const float[]){5, 0, 4, 4, 4.5f, 0, 1, 1}, NULL,
              (const uint8_t[]){1, 1, 1, 1, 0, 0, 0, 0},
              (const double[]){exp(5.0) / z, 1 / z, exp(4.0) / z, exp(4.0) / z, 0, 0, 0, 0});
    /* groups tied (3, 3, 3, 0) with one kept: the lowest, group 0 */
    const mc_moe_router_t grp1 = {8, 2, 0, 0, 4, 1, 0};
    const double z1 = exp(3.0) + 1;
    route_one("group-limited, tied groups", &grp1, (const float[]){3, 0, 1, 2, 3, 0, 0, 0}, NULL,
              (const uint8_t[]){1, 1, 0, 0, 0, 0, 0, 0},
              (const double[]){exp(3.0) / z1, 1 / z1, 0, 0, 0, 0, 0, 0});
    /* the bias update: mean 4 of 10, 2, 4, 0 tokens; bias += rate * sign(4 - count) */
    float counts[4] = {10, 2, 4, 0}, bias[4] = {0.5f, 0, -0.25f, 0};
    g_be->moe->expert_bias_update(g_be, bias, counts, 4, 0.125f);
    const float want[4] = {0.375f, 0.125f, -0.25f, 0.125f};
    for (int e = 0; e < 4; e++) assert_true(bias[e] == want[e]);
}

/* Token dropping by hand (apply_router_token_dropping): 6 tokens, 2 experts, top-1, factor 0.6:
 * get_capacity(6 * 1, 2, 0.6) = ceil(1.7999999999999998) = 2 per expert. Expert 0 is routed
 * tokens 0, 1, 3, 4, 5 with probs .5, .6, .6, .6, .4; expert 1 token 2 (.7). By probs expert 0
 * keeps two of the three tied .6, the lower indices 1 and 3; by position the first two routed, 0
 * and 1. Padded, expert 1's second row is the lowest-index token of probability 0 (token 0; by
 * position the same: the routed ones first, then the rest in token order), kept with
 * probability 0. */
static void test_capacity_by_hand(void **state)
{
    (void)state;
    /* get_capacity in Python's double arithmetic: ceil((50 / 1) * 1.1) = ceil(55.00000000000001) */
    assert_int_equal(mc_moe_expert_capacity(50, 1, 1.1), 56);
    assert_int_equal(mc_moe_expert_capacity(6, 2, 1.0), 3);
    assert_int_equal(mc_moe_expert_capacity(6, 4, 1.0), 2); /* ceil(1.5) */
    assert_int_equal(mc_moe_expert_capacity(8, 4, 0.0), 0); /* a factor of 0 drops all */
    enum { T = 6, E = 2 };
    const float probs[T * E] = {.5f, 0, .6f, 0, 0, .7f, .6f, 0, .6f, 0, .4f, 0};
    uint8_t map[T * E], keep[T * E];
    for (int i = 0; i < T * E; i++) map[i] = probs[i] != 0;
    const long cap = mc_moe_expert_capacity(T * 1, E, 0.6);
    assert_int_equal(cap, 2);
    static const struct {
        const char *what;
        int position, pad;
        uint8_t keep[T * E];
    } want[] = {
        {"probs", 0, 0, {0, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0}},
        {"probs, padded", 0, 1, {0, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0}},
        {"position", 1, 0, {1, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0}},
        {"position, padded", 1, 1, {1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0}},
    };
    for (size_t v = 0; v < sizeof(want) / sizeof(want[0]); v++) {
        float out[T * E];
        g_be->moe->capacity(g_be, MC_DT_F32, out, keep, probs, map, T, E, cap, want[v].position,
                            want[v].pad);
        for (int i = 0; i < T * E; i++) {
            if (keep[i] != want[v].keep[i])
                fail_msg("%s: keep[token %d, expert %d] = %d, want %d", want[v].what, i / E, i % E,
                         keep[i], want[v].keep[i]);
            if (out[i] != (keep[i] ? probs[i] : 0.0f))
                fail_msg("%s: probs[token %d, expert %d] = %g", want[v].what, i / E, i % E,
                         (double)out[i]);
        }
    }
    /* a capacity above the tokens (where torch.topk fails) keeps every routed token */
    float out[T * E];
    g_be->moe->capacity(g_be, MC_DT_F32, out, keep, probs, map, T, E, T + 3, 0, 0);
    assert_memory_equal(keep, map, sizeof(map));
}

static int setup(void **state)
{
    (void)state;
    g_fx = mc_fx_open("moe_ops.mcfx");
    g_be = mc_backend_cpu();
    return g_fx ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    mc_fx_free(g_fx);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route),       cmocka_unit_test(test_capacity),
        cmocka_unit_test(test_aux_losses),  cmocka_unit_test(test_permutation),
        cmocka_unit_test(test_experts),     cmocka_unit_test(test_unsupported_router),
        cmocka_unit_test(test_strict_backend),
        cmocka_unit_test(test_route_by_hand),
        cmocka_unit_test(test_capacity_by_hand),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
