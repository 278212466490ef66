/* The CUDA backend's fused attention (kernels/cuda/attention.cu) against the CPU backend's
 * attention: forward output and backward dqkv for fp32, bf16 and fp16, with and without
 * dropout, with segments (--reset-attention-mask), sequence lengths around the kernels' tiles
 * (S = 1, tile +- 1, tails), head dims 64, 80 and 128 (and others padded to them), heads placed
 * by head_offset/NH_full as under tensor parallelism, and rows whose masked keys carry the
 * probability. Tolerances and cases are test/unit/attention_check.c's, which also holds the
 * host model of the same kernels to them (test_attention_tiled). Each test is skipped, saying
 * why, without a CUDA build or a GPU. MC_ATT_VERBOSE=1 prints the worst error ratios. */
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
#include "test/unit/attention_check.h"
#ifdef MC_WITH_CUDA
#include "kernels/cuda/attention.h"
#endif

/* The CUDA backend on device 0, or skip() with the reason. */
static const mc_backend_t *gpu(void)
{
#ifndef MC_WITH_CUDA
    fprintf(stderr, "# skipped: built without CUDA (nvcc not found or CUDA=0)\n");
    skip();
    return NULL;
#else
    if (mc_cuda_device_count() == 0) {
        fprintf(stderr, "# skipped: no CUDA device visible\n");
        skip();
    }
    char err[256];
    const mc_backend_t *be = mc_backend_cuda(0, err, sizeof(err));
    if (!be) fail_msg("the CUDA backend does not start: %s", err);
    return be;
#endif
}

/* The GPU's results of a case: out and dqkv as fp32 values. */
typedef struct {
    float *out, *dqkv;
} gpu_result_t;

#ifdef MC_WITH_CUDA
static void *upload(const mc_backend_t *be, const void *src, size_t bytes)
{
    void *p = be->alloc(be, bytes);
    assert_non_null(p);
    if (src) be->memcpy_h2d(be, p, src, bytes);
    return p;
}
#endif

/* Runs the case's forward and backward on the GPU. Outputs start as NaN, so an element the
 * kernels do not write fails the comparison. seg: the segments to pass (may differ from r's). */
static gpu_result_t gpu_run(const mc_backend_t *be, const att_ref_t *r, const int32_t *seg)
{
    gpu_result_t g = {calloc((size_t)r->nout, sizeof(float)), calloc((size_t)r->nqkv, sizeof(float))};
    assert_non_null(g.out);
    assert_non_null(g.dqkv);
#ifdef MC_WITH_CUDA
    const att_case_t *c = &r->c;
    const size_t es = mc_dtype_size(c->dt), nq = (size_t)r->nqkv * es, no = (size_t)r->nout * es;
    size_t state_bytes = 0, scratch_bytes = 0;
    mc_cuda_attention_sizes(be, c->dt, c->S, c->B, c->NH, c->HD, &state_bytes, &scratch_bytes);
    assert_int_equal(state_bytes, 2 * sizeof(float) * (size_t)c->S * c->B * c->NH);
    assert_int_equal(scratch_bytes, sizeof(float) * (size_t)c->S * c->B * c->NH);
    unsigned char *nan = malloc(nq > no ? nq : no);
    assert_non_null(nan);
    memset(nan, 0xff, nq > no ? nq : no); /* all-ones: NaN in fp32, bf16 and fp16 */
    void *qkv = upload(be, r->qkv, nq), *dout = upload(be, r->dout, no), *out = upload(be, nan, no);
    void *dqkv = upload(be, nan, nq), *state = upload(be, NULL, state_bytes), *scratch = upload(be, NULL, scratch_bytes);
    int32_t *dseg = seg ? upload(be, seg, sizeof(int32_t) * (size_t)c->S * c->B) : NULL;
    mc_cuda_attention_forward(be, c->dt, out, state, qkv, c->S, c->B, c->NH, c->HD, dseg, r->scale, &r->d,
                              c->head_offset, c->NH_full);
    mc_cuda_attention_backward(be, c->dt, dqkv, scratch, dout, qkv, out, state, c->S, c->B, c->NH, c->HD, dseg,
                               r->scale, &r->d, c->head_offset, c->NH_full);
    void *host = malloc(nq);
    assert_non_null(host);
    be->memcpy_d2h(be, host, out, no);
    mc_convert(g.out, MC_DT_F32, host, c->dt, r->nout);
    be->memcpy_d2h(be, host, dqkv, nq);
    mc_convert(g.dqkv, MC_DT_F32, host, c->dt, r->nqkv);
    free(host);
    free(nan);
    be->free(be, qkv);
    be->free(be, dout);
    be->free(be, out);
    be->free(be, dqkv);
    be->free(be, state);
    be->free(be, scratch);
    if (dseg) be->free(be, dseg);
#else
    (void)be, (void)seg;
#endif
    return g;
}

static void gpu_free(gpu_result_t *g)
{
    free(g->out);
    free(g->dqkv);
}

/* One case against the CPU backend. */
static void check_case(const mc_backend_t *be, const att_case_t *c)
{
    att_ref_t r;
    att_ref_make(&r, c, (uint64_t)c->S * 977 + (uint64_t)c->HD * 13 + (uint64_t)c->dt);
    gpu_result_t g = gpu_run(be, &r, r.seg);
    att_check("out", c, g.out, r.out32, r.nout, 0);
    att_check("dqkv", c, g.dqkv, r.dqkv32, r.nqkv, 1);
    gpu_free(&g);
    att_ref_free(&r);
}

static const mc_dtype_t DTYPES[] = {MC_DT_F32, MC_DT_BF16, MC_DT_F16};

static void test_table_entries(void **state)
{
    (void)state;
    const mc_backend_t *be = gpu();
#ifdef MC_WITH_CUDA
    assert_ptr_equal(be->attention_forward, mc_cuda_attention_forward);
    assert_ptr_equal(be->attention_backward, mc_cuda_attention_backward);
    assert_ptr_equal(be->attention_sizes, mc_cuda_attention_sizes);
    /* empty sizes touch nothing */
    mc_cuda_attention_forward(be, MC_DT_BF16, NULL, NULL, NULL, 0, 2, 2, 64, NULL, 0.125f, NULL, 0, 2);
    mc_cuda_attention_backward(be, MC_DT_BF16, NULL, NULL, NULL, NULL, NULL, NULL, 5, 0, 2, 64, NULL, 0.125f, NULL, 0, 2);
    be->synchronize(be);
#else
    (void)be;
#endif
}

/* S = 1, one tile, a tile +- 1 and tails for every kernel's tiles (16, 32, 64), and a
 * GPT-length sequence. */
static void test_lengths(void **state)
{
    (void)state;
    const mc_backend_t *be = gpu();
    static const int Ss[] = {1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 130, 257};
    for (int t = 0; t < 3; t++)
        for (unsigned u = 0; u < sizeof(Ss) / sizeof(Ss[0]); u++) {
            const att_case_t c = {.dt = DTYPES[t], .S = Ss[u], .B = 2, .NH = 2, .HD = 64, .NH_full = 2, .dropout = (int)(u & 1)};
            check_case(be, &c);
        }
    for (int t = 1; t < 3; t++) {
        const att_case_t c = {.dt = DTYPES[t], .S = 1024, .B = 1, .NH = 2, .HD = 64, .NH_full = 2, .dropout = 1};
        check_case(be, &c);
    }
}

/* The GPT head dims (64: 124M/350M, 128: 1.3B, 80: 2.7B), dims padded to them (3, 96) or to
 * 256 (200), with this rank's heads at an offset of NH_full (tensor parallelism). */
static void test_head_dims(void **state)
{
    (void)state;
    const mc_backend_t *be = gpu();
    static const int HDs[] = {64, 80, 128, 3, 96, 200};
    for (int t = 0; t < 3; t++)
        for (int u = 0; u < 6; u++)
            for (int drop = 0; drop <= 1; drop++) {
                const att_case_t c = {.dt = DTYPES[t], .S = 77, .B = 2, .NH = 2, .HD = HDs[u], .head_offset = 2,
                                      .NH_full = 6, .dropout = drop};
                check_case(be, &c);
            }
}

static void test_dropout(void **state)
{
    (void)state;
    const mc_backend_t *be = gpu();
    for (int t = 0; t < 3; t++) {
        const att_case_t c = {.dt = DTYPES[t], .S = 197, .B = 3, .NH = 3, .HD = 64, .head_offset = 1, .NH_full = 4,
                              .dropout = 1};
        check_case(be, &c);
        const att_case_t odd = {.dt = DTYPES[t], .S = 33, .B = 2, .NH = 3, .HD = 80, .NH_full = 3, .dropout = 1};
        check_case(be, &odd); /* odd S: key pairs straddle Philox blocks */
    }
}

static void test_segments(void **state)
{
    (void)state;
    const mc_backend_t *be = gpu();
    for (int t = 0; t < 3; t++)
        for (int drop = 0; drop <= 1; drop++) {
            const att_case_t c = {.dt = DTYPES[t], .S = 131, .B = 3, .NH = 2, .HD = 64, .NH_full = 2, .dropout = drop,
                                  .segments = 1};
            check_case(be, &c);
        }
}

/* Scores up to about +-50: the online softmax rescales a lot. */
static void test_peaked(void **state)
{
    (void)state;
    const mc_backend_t *be = gpu();
    for (int t = 0; t < 3; t++) {
        const att_case_t c = {.dt = DTYPES[t], .S = 150, .B = 2, .NH = 1, .HD = 128, .NH_full = 1, .dropout = 1,
                              .qk_range = 4.0f};
        check_case(be, &c);
    }
}

/* Every visible score far below -10000: the masked keys carry the probability (the after pass
 * of the forward, the tail query tiles of dK/dV). */
static void test_masked_dominant(void **state)
{
    (void)state;
    const mc_backend_t *be = gpu();
    for (int t = 0; t < 3; t++)
        for (int pass = 0; pass < 4; pass++) {
            const att_case_t c = {.dt = DTYPES[t], .S = 70, .B = 2, .NH = 1, .HD = 4, .NH_full = 1, .dropout = pass & 1,
                                  .segments = pass >> 1, .masked_dominant = 1};
            check_case(be, &c);
        }
}

/* All-equal segments give bitwise the results of none; two runs give bitwise the same results
 * (no atomics). */
static void test_bitwise(void **state)
{
    (void)state;
    const mc_backend_t *be = gpu();
    for (int t = 0; t < 3; t++) {
        const att_case_t c = {.dt = DTYPES[t], .S = 131, .B = 2, .NH = 2, .HD = 64, .NH_full = 2, .dropout = 1,
                              .segments = 2};
        att_ref_t r;
        att_ref_make(&r, &c, 5);
        gpu_result_t a = gpu_run(be, &r, r.seg), b = gpu_run(be, &r, NULL), a2 = gpu_run(be, &r, r.seg);
        assert_memory_equal(a.out, b.out, sizeof(float) * (size_t)r.nout);
        assert_memory_equal(a.dqkv, b.dqkv, sizeof(float) * (size_t)r.nqkv);
        assert_memory_equal(a.out, a2.out, sizeof(float) * (size_t)r.nout);
        assert_memory_equal(a.dqkv, a2.dqkv, sizeof(float) * (size_t)r.nqkv);
        gpu_free(&a);
        gpu_free(&b);
        gpu_free(&a2);
        att_ref_free(&r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_entries), cmocka_unit_test(test_lengths),     cmocka_unit_test(test_head_dims),
        cmocka_unit_test(test_dropout),       cmocka_unit_test(test_segments),    cmocka_unit_test(test_peaked),
        cmocka_unit_test(test_masked_dominant), cmocka_unit_test(test_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
