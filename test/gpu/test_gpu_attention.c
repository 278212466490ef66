/* The CUDA backend's fused attention (kernels/cuda/attention.cu) against the CPU backend's
 * attention: forward output and backward dqkv for fp32, bf16 and fp16, with and without
 * dropout, with segments (--reset-attention-mask), sequence lengths around the kernels' tiles
 * (S = 1, tile +- 1, tails), head dims 64, 80 and 128 (and others padded to them), heads placed
 * by head_offset/NH_full as under tensor parallelism, and rows whose masked keys carry the
 * probability. Cases, seeds and tolerances are test/unit/attention_check.c's; the host model of
 * the same kernels (test_attention_tiled) runs every case with the same inputs. Each test is
 * skipped, saying why, without a CUDA build or a GPU. MC_ATT_VERBOSE=1 prints the worst error
 * ratios. */
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
#include "test/gpu/sampled.h"
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
    mc_cuda_attention_forward(be, c->dt, out, state, scratch, qkv, c->S, c->B, c->NH, att_ng(c), c->HD, dseg, r->scale,
                              &r->d, c->head_offset, c->NH_full);
    mc_cuda_attention_backward(be, c->dt, dqkv, scratch, dout, qkv, out, state, c->S, c->B, c->NH, att_ng(c), c->HD,
                               dseg, r->scale, &r->d, c->head_offset, c->NH_full);
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

/* One case against the CPU backend, with the host model's seed and bounds. */
static void check_case(const mc_backend_t *be, const att_case_t *c)
{
    if (!gpu_case_sampled()) return;
    att_ref_t r;
    att_ref_make(&r, c, att_case_seed(c));
    gpu_result_t g = gpu_run(be, &r, r.seg);
    att_check("out", c, g.out, r.out32, r.nout, 0, NULL);
    att_check("dqkv", c, g.dqkv, r.dqkv32, r.nqkv, 1, r.dqkv_bound);
    gpu_free(&g);
    att_ref_free(&r);
}

/* A group of attention_check's cases, which test_attention_tiled runs on the host model too. */
static void check_group(int group)
{
    const mc_backend_t *be = gpu();
    att_case_t cases[ATT_CASES_MAX];
    const int n = att_cases(group, cases);
    for (int k = 0; k < n; k++) check_case(be, &cases[k]);
}

static void test_table_entries(void **state)
{
    (void)state;
    const mc_backend_t *be = gpu();
#ifdef MC_WITH_CUDA
    assert_ptr_equal(be->attention_forward, mc_cuda_attention_forward);
    assert_ptr_equal(be->attention_backward, mc_cuda_attention_backward);
    assert_ptr_equal(be->attention_sizes, mc_cuda_attention_sizes);
    /* empty sizes touch nothing */
    mc_cuda_attention_forward(be, MC_DT_BF16, NULL, NULL, NULL, NULL, 0, 2, 2, 2, 64, NULL, 0.125f, NULL, 0, 2);
    mc_cuda_attention_backward(be, MC_DT_BF16, NULL, NULL, NULL, NULL, NULL, NULL, 5, 0, 2, 2, 64, NULL, 0.125f, NULL, 0,
                               2);
    be->synchronize(be);
#else
    (void)be;
#endif
}

/* The groups (attention_check.h): lengths around the tiles and a long one (S = 1024, 640 emulated); the GPT head dims and
 * padded ones at a head offset; dropout; segments; peaked scores; masked-dominant rows (the
 * after pass of the forward, the tail query tiles of dK/dV). */
static void test_lengths(void **state) { (void)state, check_group(ATT_LENGTHS); }
static void test_head_dims(void **state) { (void)state, check_group(ATT_HEAD_DIMS); }
static void test_dropout(void **state) { (void)state, check_group(ATT_DROPOUT); }
static void test_segments(void **state) { (void)state, check_group(ATT_SEGMENTS); }
static void test_gqa(void **state) { (void)state, check_group(ATT_GQA); }
static void test_peaked(void **state) { (void)state, check_group(ATT_PEAKED); }
static void test_masked_dominant(void **state) { (void)state, check_group(ATT_MASKED_DOMINANT); }

/* All-equal segments give bitwise the results of none; two runs give bitwise the same results
 * (no atomics). */
static void test_bitwise(void **state)
{
    (void)state;
    const mc_backend_t *be = gpu();
    att_case_t cases[ATT_CASES_MAX];
    const int n = att_cases(ATT_BITWISE, cases);
    for (int k = 0; k < n; k++) {
        const att_case_t c = cases[k];
        att_ref_t r;
        att_ref_make(&r, &c, att_case_seed(&c));
        gpu_result_t a = gpu_run(be, &r, r.seg), b = gpu_run(be, &r, NULL), a2 = gpu_run(be, &r, r.seg);
        att_check("out", &c, a.out, r.out32, r.nout, 0, NULL); /* the host model checks these too */
        att_check("dqkv", &c, a.dqkv, r.dqkv32, r.nqkv, 1, r.dqkv_bound);
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
        cmocka_unit_test(test_masked_dominant), cmocka_unit_test(test_bitwise), cmocka_unit_test(test_gqa),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
