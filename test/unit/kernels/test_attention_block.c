/* The CPU backend's context-parallel attention ops (attention_block_forward/backward,
 * attention_lse_merge, copy_2d) against the whole-sequence attention op: the sequence cut into 2N
 * chunks as context parallelism cuts it, each query chunk's attention assembled from blocks
 * (every key chunk before it whole, its own causally: the ring's schedule) or from one block of
 * the whole prefix (the all-gather's), merged through the log-sum-exp statistics, must give the
 * whole-sequence op's output and gradients, with dropout keyed by global positions, grouped
 * queries, and the heads at a tensor-parallel offset. Also: the merge's identities, the 16-bit
 * wrappers against the fp32 op on rounded inputs, and copy_2d. */
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
#include "kernels/dtype.h"

static const mc_backend_t *be;

static uint64_t rng_s = 0x9E3779B97F4A7C15ull;
static float urand(float lo, float hi)
{
    rng_s ^= rng_s << 13;
    rng_s ^= rng_s >> 7;
    rng_s ^= rng_s << 17;
    return lo + (hi - lo) * (float)((double)(rng_s >> 11) * (1.0 / 9007199254740992.0));
}

typedef struct {
    int S, B, NH, NG, HD, chunks; /* chunks = 2N */
    int head_offset, NH_full;
    float p; /* dropout */
} blk_case_t;

static long qkv_w(const blk_case_t *c) { return (long)(c->NH + 2 * c->NG) * c->HD; }
static long kv_w(const blk_case_t *c) { return 2L * c->NG * c->HD; }

/* |got - want| <= tol * max|want| over the tensor, or fail naming it. */
static void close_to(const float *got, const float *want, long n, double tol, const char *what)
{
    double mx = 0, worst = 0;
    long at = 0;
    for (long i = 0; i < n; i++) mx = fmax(mx, fabs(want[i]));
    for (long i = 0; i < n; i++) {
        const double e = fabs((double)got[i] - want[i]);
        if (e > worst) worst = e, at = i;
    }
    if (worst > tol * (mx > 0 ? mx : 1)) {
        print_error("%s: element %ld is %.9g, want %.9g (max |want| %.3g)\n", what, at, got[at],
                    want[at], mx);
        fail();
    }
}

/* The compact kv tensor of rows [r0, r0 + n) of qkv (each group's key and value heads). */
static void pack_kv(const blk_case_t *c, float *kv, const float *qkv, int r0, int n)
{
    const int qpg = c->NH / c->NG;
    for (int g = 0; g < c->NG; g++)
        be->copy_2d(be, kv + 2L * g * c->HD, MC_DT_F32, kv_w(c),
                    qkv + (long)r0 * c->B * qkv_w(c) + ((long)g * (qpg + 2) + qpg) * c->HD,
                    MC_DT_F32, qkv_w(c), (long)n * c->B, 2L * c->HD);
}

/* The whole-sequence op's forward and backward. */
static void whole(const blk_case_t *c, const mc_dropout_t *d, const float *qkv, const float *dout,
                  float *out, float *dqkv)
{
    size_t st, sc;
    be->attention_sizes(be, MC_DT_F32, c->S, c->B, c->NH, c->HD, &st, &sc);
    void *state = malloc(st), *scratch = malloc(sc);
    const float scale = 1.0f / sqrtf((float)c->HD);
    be->attention_forward(be, MC_DT_F32, out, state, NULL, qkv, c->S, c->B, c->NH, c->NG, c->HD,
                          NULL, scale, d, c->head_offset, c->NH_full);
    be->attention_backward(be, MC_DT_F32, dqkv, scratch, dout, qkv, out, state, c->S, c->B, c->NH,
                           c->NG, c->HD, NULL, scale, d, c->head_offset, c->NH_full);
    free(state);
    free(scratch);
}

/* Query chunk qc's attention from blocks: every key chunk k < qc whole (or, prefix: the keys
 * [0, qc*C] in one causal block), forward merged into out/lse, then the backward accumulating dq
 * and dkv (over the whole sequence's keys). */
static void chunk_attention(const blk_case_t *c, const mc_dropout_t *d, const float *qkv,
                            const float *kv, const float *dout, int qc, int prefix, float *out,
                            float *lse, float *dq, float *dkv)
{
    const int C = c->S / c->chunks, B = c->B;
    const long rows = (long)C * B, no = rows * c->NH * c->HD;
    const float scale = 1.0f / sqrtf((float)c->HD);
    size_t fs, bs;
    be->attention_block_sizes(be, MC_DT_F32, C, c->S, B, c->NH, c->HD, &fs, &bs);
    void *scratch = malloc(fs > bs ? fs : bs);
    float *part = malloc((size_t)no * sizeof(float)), *plse = malloc((size_t)rows * c->NH * 4);
    const float *q = qkv + (long)qc * C * B * qkv_w(c);
    float *o = out + (long)qc * C * B * c->NH * c->HD, *l = lse + (long)qc * rows * c->NH;
    for (long i = 0; i < rows * c->NH; i++) l[i] = -INFINITY;
    const int nblk = prefix ? 1 : qc + 1;
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < nblk; k++) {
            const int k0 = prefix ? 0 : k * C, nk = prefix ? (qc + 1) * C : C;
            const int mask = prefix || k == qc ? MC_ATTN_BLOCK_CAUSAL : MC_ATTN_BLOCK_FULL;
            const float *kvb = kv + (long)k0 * B * kv_w(c);
            if (pass == 0) {
                be->attention_block_forward(be, MC_DT_F32, part, plse, scratch, q, kvb, C, nk, B,
                                            c->NH, c->NG, c->HD, qc * C, k0, c->S, mask, scale, d,
                                            c->head_offset, c->NH_full);
                be->attention_lse_merge(be, o, l, part, plse, rows, c->NH, c->HD);
            } else {
                be->attention_block_backward(be, MC_DT_F32, dq + (long)qc * C * B * c->NH * c->HD,
                                             dkv + (long)k0 * B * kv_w(c), scratch,
                                             dout + (long)qc * C * B * c->NH * c->HD, q, kvb, o, l,
                                             C, nk, B, c->NH, c->NG, c->HD, qc * C, k0, c->S, mask,
                                             scale, d, c->head_offset, c->NH_full);
            }
        }
    free(scratch);
    free(part);
    free(plse);
}

/* dqkv from the query gradients and the kv gradients (copy_2d back into the qkv layout). */
static void unpack(const blk_case_t *c, float *dqkv, const float *dq, const float *dkv)
{
    const int qpg = c->NH / c->NG;
    const long R = (long)c->S * c->B;
    for (int g = 0; g < c->NG; g++) {
        float *grp = dqkv + (long)g * (qpg + 2) * c->HD;
        be->copy_2d(be, grp, MC_DT_F32, qkv_w(c), dq + (long)g * qpg * c->HD, MC_DT_F32,
                    (long)c->NH * c->HD, R, (long)qpg * c->HD);
        be->copy_2d(be, grp + (long)qpg * c->HD, MC_DT_F32, qkv_w(c), dkv + 2L * g * c->HD,
                    MC_DT_F32, kv_w(c), R, 2L * c->HD);
    }
}

static void run_case(const blk_case_t *c, int prefix)
{
    const long R = (long)c->S * c->B, nq = R * qkv_w(c), no = R * c->NH * c->HD;
    float *qkv = malloc(nq * 4), *dout = malloc(no * 4), *kv = malloc(R * kv_w(c) * 4);
    float *out = malloc(no * 4), *dqkv = malloc(nq * 4), *lse = malloc(R * c->NH * 4);
    float *bout = malloc(no * 4), *bdq = calloc(no, 4), *bdkv = calloc(R * kv_w(c), 4);
    float *bdqkv = malloc(nq * 4);
    for (long i = 0; i < nq; i++) qkv[i] = urand(-1.5f, 1.5f);
    for (long i = 0; i < no; i++) dout[i] = urand(-1, 1);
    const mc_dropout_t d = {.seed = 91,
                            .iteration = 3,
                            .layer = 2,
                            .site = MC_DROPOUT_SITE_ATTN_PROBS,
                            .sample0 = 17,
                            .p = c->p};
    whole(c, &d, qkv, dout, out, dqkv);
    pack_kv(c, kv, qkv, 0, c->S);
    for (int qc = 0; qc < c->chunks; qc++)
        chunk_attention(c, &d, qkv, kv, dout, qc, prefix, bout, lse, bdq, bdkv);
    unpack(c, bdqkv, bdq, bdkv);
    close_to(bout, out, no, 2e-6, prefix ? "prefix blocks: out" : "ring blocks: out");
    close_to(bdqkv, dqkv, nq, 1e-5, prefix ? "prefix blocks: dqkv" : "ring blocks: dqkv");
    free(qkv), free(dout), free(kv), free(out), free(dqkv), free(lse);
    free(bout), free(bdq), free(bdkv), free(bdqkv);
}

static const blk_case_t CASES[] = {
    {.S = 24, .B = 2, .NH = 4, .NG = 2, .HD = 8, .chunks = 4, .NH_full = 4},
    {.S = 24,
     .B = 2,
     .NH = 4,
     .NG = 2,
     .HD = 8,
     .chunks = 4,
     .head_offset = 4,
     .NH_full = 8,
     .p = 0.2f},
    {.S = 36, .B = 1, .NH = 3, .NG = 3, .HD = 16, .chunks = 6, .NH_full = 3, .p = 0.1f},
    {.S = 160,
     .B = 2,
     .NH = 2,
     .NG = 1,
     .HD = 8,
     .chunks = 2,
     .head_offset = 2,
     .NH_full = 4,
     .p = 0.3f},
    {.S = 256, .B = 1, .NH = 2, .NG = 2, .HD = 4, .chunks = 8, .NH_full = 2, .p = 0.1f},
};

static void test_ring_blocks(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(CASES) / sizeof(CASES[0]); i++) run_case(&CASES[i], 0);
}

static void test_prefix_blocks(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(CASES) / sizeof(CASES[0]); i++) run_case(&CASES[i], 1);
}

/* A causal block whose first query rows see no key: out 0 and lse -inf, which the merge skips. */
static void test_rows_without_keys(void **state)
{
    (void)state;
    const blk_case_t c = {.S = 8, .B = 1, .NH = 1, .NG = 1, .HD = 4, .chunks = 1, .NH_full = 1};
    float qkv[8 * 12], kv[8 * 8], out[8 * 4], lse[8], acc[8 * 4], alse[8];
    for (int i = 0; i < 8 * 12; i++) qkv[i] = urand(-1, 1);
    pack_kv(&c, kv, qkv, 0, 8);
    size_t fs, bs;
    be->attention_block_sizes(be, MC_DT_F32, 8, 4, 1, 1, 4, &fs, &bs);
    void *scratch = malloc(fs);
    /* queries at 0..7, keys at 4..7 */
    be->attention_block_forward(be, MC_DT_F32, out, lse, scratch, qkv, kv + 4 * 8, 8, 4, 1, 1, 1, 4,
                                0, 4, 8, MC_ATTN_BLOCK_CAUSAL, 0.5f, NULL, 0, 1);
    for (int i = 0; i < 4; i++) {
        assert_true(isinf(lse[i]) && lse[i] < 0);
        for (int k = 0; k < 4; k++) assert_true(out[i * 4 + k] == 0.0f);
    }
    for (int i = 4; i < 8; i++) assert_true(isfinite(lse[i]));
    for (int i = 0; i < 8; i++) alse[i] = 1.0f;
    for (int i = 0; i < 32; i++) acc[i] = 7.0f;
    be->attention_lse_merge(be, acc, alse, out, lse, 8, 1, 4);
    for (int i = 0; i < 4; i++) { /* unchanged */
        assert_true(alse[i] == 1.0f);
        assert_true(acc[i * 4] == 7.0f);
    }
    free(scratch);
}

/* merge(-inf, part) = part exactly; merge(a, b) = the weighted sum. */
static void test_merge(void **state)
{
    (void)state;
    float o[6] = {0}, l[2] = {-INFINITY, -INFINITY}, p[6] = {1, 2, 3, 4, 5, 6}, pl[2] = {0.5f, -2};
    be->attention_lse_merge(be, o, l, p, pl, 1, 2, 3);
    for (int i = 0; i < 6; i++) assert_true(o[i] == p[i]);
    assert_true(l[0] == 0.5f && l[1] == -2.0f);
    float q[6] = {-1, 0, 1, 2, 2, 2}, ql[2] = {0.5f, 1};
    be->attention_lse_merge(be, o, l, q, ql, 1, 2, 3);
    const double L0 = log(2 * exp(0.5)), L1 = log(exp(-2) + exp(1));
    assert_true(fabs(l[0] - L0) < 1e-6 && fabs(l[1] - L1) < 1e-6);
    assert_true(fabs(o[0] - 0.0) < 1e-6 && fabs(o[2] - 2.0) < 1e-6);
    const double w = exp(-2 - L1);
    assert_true(fabs(o[3] - (4 * w + 2 * (1 - w))) < 1e-6);
}

/* bf16 and fp16: the wrappers equal the fp32 op on the rounded inputs (the accumulators and
 * statistics stay fp32), bit for bit. */
static void test_16bit(void **state)
{
    (void)state;
    const mc_dtype_t dts[] = {MC_DT_BF16, MC_DT_F16};
    const int Sq = 10, Sk = 14, B = 2, NH = 4, NG = 2, HD = 8;
    const long nq = (long)Sq * B * (NH + 2 * NG) * HD, nkv = (long)Sk * B * 2 * NG * HD;
    const long no = (long)Sq * B * NH * HD, nl = (long)Sq * B * NH;
    const mc_dropout_t d = {.seed = 5, .iteration = 1, .layer = 1, .site = 2, .p = 0.25f};
    float *q32 = malloc(nq * 4), *kv32 = malloc(nkv * 4), *o32 = malloc(no * 4),
          *dO32 = malloc(no * 4);
    uint16_t *q16 = malloc(nq * 2), *kv16 = malloc(nkv * 2), *o16 = malloc(no * 2),
             *dO16 = malloc(no * 2);
    float *a_out = malloc(no * 4), *a_lse = malloc(nl * 4), *b_out = malloc(no * 4),
          *b_lse = malloc(nl * 4);
    float *a_dq = calloc(no, 4), *a_dkv = calloc(nkv, 4), *b_dq = calloc(no, 4),
          *b_dkv = calloc(nkv, 4);
    size_t fs, bs;
    be->attention_block_sizes(be, MC_DT_F32, Sq, Sk, B, NH, HD, &fs, &bs);
    void *scratch = malloc(fs > bs ? fs : bs);
    for (int t = 0; t < 2; t++) {
        for (long i = 0; i < nq; i++) q32[i] = urand(-1, 1);
        for (long i = 0; i < nkv; i++) kv32[i] = urand(-1, 1);
        for (long i = 0; i < no; i++) o32[i] = urand(-1, 1), dO32[i] = urand(-1, 1);
        mc_convert(q16, dts[t], q32, MC_DT_F32, nq), mc_convert(q32, MC_DT_F32, q16, dts[t], nq);
        mc_convert(kv16, dts[t], kv32, MC_DT_F32, nkv),
            mc_convert(kv32, MC_DT_F32, kv16, dts[t], nkv);
        mc_convert(o16, dts[t], o32, MC_DT_F32, no), mc_convert(o32, MC_DT_F32, o16, dts[t], no);
        mc_convert(dO16, dts[t], dO32, MC_DT_F32, no),
            mc_convert(dO32, MC_DT_F32, dO16, dts[t], no);
        be->attention_block_forward(be, MC_DT_F32, a_out, a_lse, scratch, q32, kv32, Sq, Sk, B, NH,
                                    NG, HD, 20, 9, 40, MC_ATTN_BLOCK_CAUSAL, 0.3f, &d, 1, 8);
        be->attention_block_forward(be, dts[t], b_out, b_lse, scratch, q16, kv16, Sq, Sk, B, NH, NG,
                                    HD, 20, 9, 40, MC_ATTN_BLOCK_CAUSAL, 0.3f, &d, 1, 8);
        assert_memory_equal(a_out, b_out, no * 4);
        assert_memory_equal(a_lse, b_lse, nl * 4);
        be->attention_block_backward(be, MC_DT_F32, a_dq, a_dkv, scratch, dO32, q32, kv32, o32,
                                     a_lse, Sq, Sk, B, NH, NG, HD, 20, 9, 40, MC_ATTN_BLOCK_CAUSAL,
                                     0.3f, &d, 1, 8);
        be->attention_block_backward(be, dts[t], b_dq, b_dkv, scratch, dO16, q16, kv16, o16, b_lse,
                                     Sq, Sk, B, NH, NG, HD, 20, 9, 40, MC_ATTN_BLOCK_CAUSAL, 0.3f,
                                     &d, 1, 8);
        assert_memory_equal(a_dq, b_dq, no * 4);
        assert_memory_equal(a_dkv, b_dkv, nkv * 4);
    }
    free(q32), free(kv32), free(o32), free(dO32), free(q16), free(kv16), free(o16), free(dO16);
    free(a_out), free(a_lse), free(b_out), free(b_lse), free(a_dq), free(a_dkv), free(b_dq);
    free(b_dkv), free(scratch);
}

/* copy_2d: strided rows, with and without a conversion. */
static void test_copy_2d(void **state)
{
    (void)state;
    float src[5 * 7], dst[4 * 6];
    uint16_t h[4 * 6];
    for (int i = 0; i < 35; i++) src[i] = (float)i + 0.25f;
    for (int i = 0; i < 24; i++) dst[i] = -1;
    be->copy_2d(be, dst + 1, MC_DT_F32, 6, src + 2, MC_DT_F32, 7, 4, 3);
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 6; c++)
            assert_true(dst[r * 6 + c] == (c >= 1 && c < 4 ? src[r * 7 + 2 + c - 1] : -1.0f));
    be->copy_2d(be, h, MC_DT_BF16, 6, src, MC_DT_F32, 7, 4, 6);
    be->copy_2d(be, dst, MC_DT_F32, 6, h, MC_DT_BF16, 6, 4, 6);
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 6; c++)
            assert_true(dst[r * 6 + c] == mc_f32_from_bf16(mc_bf16_from_f32(src[r * 7 + c])));
}

int main(void)
{
    be = mc_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_blocks),
        cmocka_unit_test(test_prefix_blocks),
        cmocka_unit_test(test_rows_without_keys),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_16bit),
        cmocka_unit_test(test_copy_2d),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
