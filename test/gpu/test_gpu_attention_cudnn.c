/* The CUDA backend's attention on cuDNN's fused flash attention (kernels/cuda/attention_select.cu,
 * kernels/cuda/cudnn_sdpa.cu) against the CPU backend's attention (the fp32 reference rounded
 * once to 16 bits): forward output and backward dqkv for bf16 and fp16, causal, multi-head and
 * grouped-query attention (NG 1 and 2), head dims 64, 80, 96 and 128, sequence lengths around
 * tiles and a long one (1024, 640 emulated), peaked scores, heads placed at a tensor-parallel offset; the per-row
 * log-sum-exp statistics the forward keeps; dropout 0 (the same numbers as the CPU) and dropout
 * 0.25 checked statistically (cuDNN's generator is not the CPU's Philox: the keep rate, the
 * 1/(1-p) scaling, and the backward drawing the forward's mask); two runs bit for bit; the setup's
 * choice and its fallback reasons. Cases and tolerances are test/unit/attention_check.c's (the
 * project's kernels meet the same: both round P and dS to 16 bits before their products). Each
 * test is skipped, saying why, without a CUDA build with cuDNN or a GPU; on the emulated device
 * (test/emu) it runs the emulated cuDNN. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attention_choice.h"
#include "kernels/backend.h"
#include "kernels/device.h"
#include "test/gpu/sampled.h"
#include "test/unit/attention_check.h"
#ifdef MC_WITH_CUDA
#include "kernels/cuda/attention.h"
#endif

/* The CUDA backend on device 0 with cuDNN, or skip() with the reason. */
static const mc_backend_t *gpu(void)
{
#if !defined(MC_WITH_CUDA) || !defined(MC_WITH_CUDNN)
    fprintf(stderr, "# skipped: built without CUDA or without cuDNN\n");
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

/* The attention of a case (training and evaluation rows alike), dropout p. */
static mc_attention_spec_t spec_of(const att_case_t *c, float p)
{
    mc_attention_spec_t s = {.backend = MC_ATTENTION_AUTO,
                             .dt = c->dt,
                             .S = c->S,
                             .B = c->B,
                             .B_eval = c->B,
                             .NH = c->NH,
                             .NG = att_ng(c),
                             .HD = c->HD,
                             .dropout = p};
    return s;
}

/* Chooses cuDNN for the case's shapes, and fails unless the setup took it. */
static void use_cudnn(const mc_backend_t *be, const att_case_t *c, float p)
{
    const mc_attention_spec_t s = spec_of(c, p);
    char line[1024];
    mc_backend_attention_setup(be, &s, line, sizeof(line));
    if (strncmp(line, "cuDNN ", 6) != 0)
        fail_msg("cuDNN was not chosen for %s: %s", att_case_name(c), line);
#ifdef MC_WITH_CUDA
    assert_true(mc_cuda_attention_uses_cudnn(c->dt, c->S, c->B, c->NH, att_ng(c), c->HD, p));
#endif
}

/* Back to the project's kernels for every shape. */
static void use_kernels(const mc_backend_t *be)
{
    const att_case_t c = {.dt = MC_DT_BF16, .S = 1, .B = 1, .NH = 1, .HD = 64};
    mc_attention_spec_t s = spec_of(&c, 0);
    s.backend = MC_ATTENTION_LOCAL;
    mc_backend_attention_setup(be, &s, NULL, 0);
}

typedef struct {
    float *out, *dqkv, *stats; /* fp32 values; stats [B, NH, S] */
} gpu_result_t;

#ifdef MC_WITH_CUDA
static void *upload(const mc_backend_t *be, const void *src, size_t bytes)
{
    void *p = be->alloc(be, bytes ? bytes : 1);
    assert_non_null(p);
    if (src && bytes) be->memcpy_h2d(be, p, src, bytes);
    return p;
}
#endif

/* The case's forward and backward through the op table's entries, with dropout d. Outputs start
 * as NaN, so an element nobody writes fails the comparison. */
static gpu_result_t gpu_run(const mc_backend_t *be, const att_ref_t *r, const void *qkv_host,
                            const mc_dropout_t *d)
{
    const att_case_t *c = &r->c;
    const long rows = (long)c->B * c->NH * c->S;
    gpu_result_t g = {calloc((size_t)r->nout, sizeof(float)),
                      calloc((size_t)r->nqkv, sizeof(float)), calloc((size_t)rows, sizeof(float))};
    assert_non_null(g.out);
    assert_non_null(g.dqkv);
    assert_non_null(g.stats);
#ifdef MC_WITH_CUDA
    const size_t es = mc_dtype_size(c->dt), nq = (size_t)r->nqkv * es, no = (size_t)r->nout * es;
    size_t state_bytes = 0, scratch_bytes = 0;
    mc_cuda_attention_sizes(be, c->dt, c->S, c->B, c->NH, c->HD, &state_bytes, &scratch_bytes);
    assert_true(state_bytes >= sizeof(float) * (size_t)rows);
    size_t most = nq > no ? nq : no;
    most = most > state_bytes ? most : state_bytes;
    most = most > scratch_bytes ? most : scratch_bytes;
    unsigned char *nan = malloc(most);
    assert_non_null(nan);
    memset(nan, 0xff, most); /* all-ones: NaN in fp32, bf16 and fp16 */
    void *qkv = upload(be, qkv_host, nq), *dout = upload(be, r->dout, no),
         *out = upload(be, nan, no);
    void *dqkv = upload(be, nan, nq), *state = upload(be, nan, state_bytes),
         *scratch = upload(be, nan, scratch_bytes);
    mc_cuda_attention_forward(be, c->dt, out, state, scratch, qkv, c->S, c->B, c->NH, att_ng(c),
                              c->HD, NULL, r->scale, d, c->head_offset, c->NH_full);
    be->memcpy_d2h(be, g.stats, state, sizeof(float) * (size_t)rows);
    mc_cuda_attention_backward(be, c->dt, dqkv, scratch, dout, qkv, out, state, c->S, c->B, c->NH,
                               att_ng(c), c->HD, NULL, r->scale, d, c->head_offset, c->NH_full);
    void *host = malloc(nq);
    assert_non_null(host);
    be->memcpy_d2h(be, host, out, no);
    mc_convert(g.out, MC_DT_F32, host, c->dt, r->nout);
    be->memcpy_d2h(be, host, dqkv, nq);
    mc_convert(g.dqkv, MC_DT_F32, host, c->dt, r->nqkv);
    free(host);
    free(nan);
    void *bufs[] = {qkv, dout, out, dqkv, state, scratch};
    for (int i = 0; i < 6; i++) be->free(be, bufs[i]);
#else
    (void)be, (void)qkv_host, (void)d;
#endif
    return g;
}

static void gpu_free(gpu_result_t *g)
{
    free(g->out);
    free(g->dqkv);
    free(g->stats);
}

/* Each query row's log-sum-exp of its causal scores, from the case's 16-bit inputs in double. */
static void lse_reference(const att_ref_t *r, double *lse)
{
    const att_case_t *c = &r->c;
    const int S = c->S, B = c->B, NH = c->NH, HD = c->HD, QPG = NH / att_ng(c);
    const long W = (long)att_ng(c) * (QPG + 2) * HD;
    double *s = malloc(sizeof(double) * (size_t)S);
    assert_non_null(s);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const long qo = (long)(h / QPG * (QPG + 2) + h % QPG) * HD,
                       ko = (long)(h / QPG * (QPG + 2) + QPG) * HD;
            for (int i = 0; i < S; i++) {
                double m = -INFINITY, z = 0;
                for (int j = 0; j <= i; j++) {
                    double dot = 0;
                    for (int e = 0; e < HD; e++)
                        dot += (double)r->qkv32[((long)i * B + b) * W + qo + e] *
                               r->qkv32[((long)j * B + b) * W + ko + e];
                    s[j] = dot * r->scale;
                    m = fmax(m, s[j]);
                }
                for (int j = 0; j <= i; j++) z += exp(s[j] - m);
                lse[((long)b * NH + h) * S + i] = m + log(z);
            }
        }
    free(s);
}

/* One case on cuDNN against the CPU backend: out, dqkv and the statistics. */
static void check_case(const mc_backend_t *be, const att_case_t *c)
{
    if (!gpu_case_sampled()) return;
    att_ref_t r;
    att_ref_make(&r, c, att_case_seed(c));
    use_cudnn(be, c, 0.0f);
    gpu_result_t g = gpu_run(be, &r, r.qkv, &r.d);
    att_check("out", c, g.out, r.out32, r.nout, 0, NULL);
    att_check("dqkv", c, g.dqkv, r.dqkv32, r.nqkv, 1, r.dqkv_bound);
    const long rows = (long)c->B * c->NH * c->S;
    double *lse = malloc(sizeof(double) * (size_t)rows);
    assert_non_null(lse);
    lse_reference(&r, lse);
    for (long i = 0; i < rows; i++) /* fp32 statistics of exact 16-bit products: fp32 sums only */
        if (!(fabs(g.stats[i] - lse[i]) <= 1e-4 * (1.0 + fabs(lse[i]))))
            fail_msg("stats (%s): row %ld is %.8g, want %.8g", att_case_name(c), i,
                     (double)g.stats[i], lse[i]);
    free(lse);
    gpu_free(&g);
    att_ref_free(&r);
    use_kernels(be);
}

/* A group's cases that cuDNN takes: 16-bit, head dims multiples of 8, no document masks, no
 * masked-dominant rows (cuDNN masks with -inf, Megatron with -10000: backend.h), no dropout
 * (test_dropout). Fails unless some ran. */
static void check_group(int group)
{
    const mc_backend_t *be = gpu();
    att_case_t cases[ATT_CASES_MAX];
    const int n = att_cases(group, cases);
    int ran = 0;
    for (int k = 0; k < n; k++) {
        att_case_t c = cases[k];
        if (c.dt == MC_DT_F32 || c.HD % 8 || c.segments || c.masked_dominant) continue;
        c.dropout = 0;
        check_case(be, &c);
        ran++;
    }
    assert_true(ran > 0);
}

static void test_lengths(void **state) { (void)state, check_group(ATT_LENGTHS); }
static void test_head_dims(void **state) { (void)state, check_group(ATT_HEAD_DIMS); }
static void test_gqa(void **state) { (void)state, check_group(ATT_GQA); }
static void test_peaked(void **state) { (void)state, check_group(ATT_PEAKED); }

/* Head dims 64, 80, 96 and 128, both 16-bit types, multi-head and grouped-query. */
static void test_gpt_head_dims(void **state)
{
    (void)state;
    const mc_backend_t *be = gpu();
    const int hds[4] = {64, 80, 96, 128};
    for (int i = 0; i < 4; i++)
        for (int t = 0; t < 2; t++) {
            const att_case_t c = {.dt = t ? MC_DT_F16 : MC_DT_BF16,
                                  .S = 45,
                                  .B = 2,
                                  .NH = 4,
                                  .NG = i % 2 ? 2 : 0,
                                  .HD = hds[i],
                                  .head_offset = 4,
                                  .NH_full = 8};
            check_case(be, &c);
        }
}

/* Dropout 0.25 on cuDNN: with V's rows one-hot (key j's value is e_j, S <= HD), out is each row's
 * dropped probabilities, so the mask shows. The CPU's probabilities (no dropout) are the
 * reference: the kept share of the causal entries is 0.75 within 4 standard deviations, every
 * kept entry is the probability over 1 - p, the rest 0; the backward's dV is that same matrix's
 * transpose times dO (its mask is the forward's), within the roundings of P the documentation
 * leaves to the engine; the same call gives the same mask, another iteration another. */
static void test_dropout(void **state)
{
    (void)state;
    const mc_backend_t *be = gpu();
    const att_case_t c = {.dt = MC_DT_BF16, .S = 48, .B = 2, .NH = 2, .HD = 64, .NH_full = 2};
    const int S = c.S, B = c.B, NH = c.NH, HD = c.HD;
    const long W = 3L * NH * HD;
    att_ref_t r;
    att_ref_make(&r, &c, att_case_seed(&c));
    for (long row = 0; row < (long)S * B; row++) /* V of every head: one-hot by position */
        for (int h = 0; h < NH; h++)
            for (int e = 0; e < HD; e++)
                r.qkv32[row * W + h * 3L * HD + 2 * HD + e] = e == row / B ? 1.0f : 0.0f;
    mc_convert(r.qkv, c.dt, r.qkv32, MC_DT_F32, r.nqkv);
    const mc_backend_t *cpu = mc_backend_cpu(); /* the probabilities, without dropout */
    size_t sb, cb;
    cpu->attention_sizes(cpu, MC_DT_F32, S, B, NH, HD, &sb, &cb);
    float *probs = calloc(r.nout, sizeof(float)), *st = calloc(sb, 1);
    assert_non_null(probs);
    assert_non_null(st);
    cpu->attention_forward(cpu, MC_DT_F32, probs, st, NULL, r.qkv32, S, B, NH, NH, HD, NULL,
                           r.scale, NULL, 0, NH);
    mc_dropout_t d = att_dropout;
    use_cudnn(be, &c, d.p);
    gpu_result_t g = gpu_run(be, &r, r.qkv, &d), again = gpu_run(be, &r, r.qkv, &d);
    d.iteration++;
    gpu_result_t other = gpu_run(be, &r, r.qkv, &d);
    long kept = 0, total = 0, bad = 0, moved = 0;
    for (long row = 0; row < (long)S * B; row++)
        for (int h = 0; h < NH; h++)
            for (int j = 0; j < S; j++) {
                const long at = row * NH * HD + h * HD + j;
                const double want = probs[at] / (1.0 - d.p), got = g.out[at];
                if (j > row / B) {
                    bad += got != 0.0;
                    continue;
                }
                total++, kept += got != 0.0;
                moved += (got != 0.0) != (other.out[at] != 0.0);
                if (got != 0.0 && fabs(got - want) > 7.9e-3 * (fabs(want) + 1e-3)) bad++;
            }
    const double rate = (double)kept / (double)total,
                 sigma = sqrt(d.p * (1.0 - d.p) / (double)total);
    if (fabs(rate - (1.0 - d.p)) > 4 * sigma)
        fail_msg("kept %ld of %ld (%.4f), want %.2f within %.4f", kept, total, rate, 1.0 - d.p,
                 4 * sigma);
    if (bad)
        fail_msg("%ld entries are neither 0 nor the probability over 1 - p (or past the diagonal)",
                 bad);
    assert_memory_equal(g.out, again.out, sizeof(float) * (size_t)r.nout);
    assert_memory_equal(g.dqkv, again.dqkv, sizeof(float) * (size_t)r.nqkv);
    if (moved < total / 10)
        fail_msg("another iteration's mask differs in only %ld of %ld entries", moved, total);
    /* dV[j] = sum_i Pd[i][j] dO[i], Pd as the forward's output shows it (bf16(P m / (1 - p))).
     * cuDNN's backward recomputes P from the Stats and applies the mask and 1/(1-p) itself; where
     * it rounds that P (before or after the scale, to bf16 or not at all: the backward graph
     * declares it fp32) is the engine's, not documented, so each term may differ from the
     * forward's by one bf16 rounding on each side: 2 x 2^-8 of sum_i |Pd dO| (the H200's engine
     * differed from the forward's rounding; a bound relative to |dV| alone failed where terms
     * cancel), plus dV's own rounding. Another mask gives errors of the size of the terms. */
    double worst = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int j = 0; j < S; j++)
                for (int e = 0; e < HD; e++) {
                    double want = 0, mag = 0;
                    for (int i = j; i < S; i++) {
                        const double t = (double)g.out[((long)i * B + b) * NH * HD + h * HD + j] *
                                         r.dout32[((long)i * B + b) * NH * HD + h * HD + e];
                        want += t, mag += fabs(t);
                    }
                    const double got = g.dqkv[((long)j * B + b) * W + h * 3L * HD + 2 * HD + e];
                    worst = fmax(worst, fabs(got - want) / (0x1p-7 * mag + 0x1p-8 * fabs(want) + 1e-6));
                }
    if (worst > 1.0)
        fail_msg("dV is not the forward's dropped probabilities times dO (%.2fx the tolerance)",
                 worst);
    gpu_free(&g), gpu_free(&again), gpu_free(&other);
    free(probs), free(st);
    att_ref_free(&r);
    use_kernels(be);
}

/* Two runs give the same bits (cuDNN's engines with a NONDETERMINISTIC note are not used). */
static void test_bitwise(void **state)
{
    (void)state;
    const mc_backend_t *be = gpu();
    const att_case_t c = {
        .dt = MC_DT_BF16, .S = 70, .B = 2, .NH = 4, .NG = 2, .HD = 64, .NH_full = 4};
    att_ref_t r;
    att_ref_make(&r, &c, att_case_seed(&c));
    use_cudnn(be, &c, 0.0f);
    gpu_result_t a = gpu_run(be, &r, r.qkv, &r.d), b = gpu_run(be, &r, r.qkv, &r.d);
    assert_memory_equal(a.out, b.out, sizeof(float) * (size_t)r.nout);
    assert_memory_equal(a.dqkv, b.dqkv, sizeof(float) * (size_t)r.nqkv);
    gpu_free(&a), gpu_free(&b);
    att_ref_free(&r);
    use_kernels(be);
}

/* The setup's line: cuDNN where it can, the project's kernels with the reason where not; the
 * calls of other shapes stay on the project's kernels. */
static void test_choice(void **state)
{
    (void)state;
    const mc_backend_t *be = gpu();
    const att_case_t ok = {.dt = MC_DT_BF16, .S = 64, .B = 2, .NH = 4, .HD = 64};
    const struct {
        const char *what, *want;
        mc_attention_backend_t backend;
        mc_dtype_t dt;
        int HD, segments;
    } cases[] = {
        {"bf16, head dim 64", "cuDNN 9.", MC_ATTENTION_AUTO, MC_DT_BF16, 64, 0},
        {"--attention-backend fused", "cuDNN 9.", MC_ATTENTION_FUSED, MC_DT_F16, 128, 0},
        {"--attention-backend local",
         "the project's kernels: --attention-backend local asks for them", MC_ATTENTION_LOCAL,
         MC_DT_BF16, 64, 0},
        {"--attention-backend unfused", "the project's kernels: --attention-backend unfused",
         MC_ATTENTION_UNFUSED, MC_DT_BF16, 64, 0},
        {"fp32", "the project's kernels: fp32 tensors", MC_ATTENTION_AUTO, MC_DT_F32, 64, 0},
        {"head dim 20", "the project's kernels: head dim 20", MC_ATTENTION_FLASH, MC_DT_BF16, 20,
         0},
        {"--reset-attention-mask", "the project's kernels: --reset-attention-mask",
         MC_ATTENTION_AUTO, MC_DT_BF16, 64, 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        mc_attention_spec_t s = spec_of(&ok, 0);
        s.backend = cases[i].backend, s.dt = cases[i].dt, s.HD = cases[i].HD,
        s.segments = cases[i].segments;
        char line[1024];
        mc_backend_attention_setup(be, &s, line, sizeof(line));
        if (strncmp(line, cases[i].want, strlen(cases[i].want)) != 0)
            fail_msg("%s: the setup says \"%s\", want \"%s...\"", cases[i].what, line,
                     cases[i].want);
        assert_string_equal(line, mc_backend_attention_line(be));
    }
#ifdef MC_WITH_CUDA
    mc_attention_spec_t s = spec_of(&ok, 0);
    mc_backend_attention_setup(be, &s, NULL, 0);
    assert_true(mc_cuda_attention_uses_cudnn(MC_DT_BF16, 64, 2, 4, 4, 64, 0.0f));
    assert_true(mc_cuda_attention_uses_cudnn(MC_DT_BF16, 64, 1, 4, 4, 64, 0.0f));  /* fewer rows */
    assert_false(mc_cuda_attention_uses_cudnn(MC_DT_BF16, 64, 3, 4, 4, 64, 0.0f)); /* more rows */
    assert_false(
        mc_cuda_attention_uses_cudnn(MC_DT_BF16, 32, 2, 4, 4, 64, 0.0f)); /* another length */
    assert_false(mc_cuda_attention_uses_cudnn(MC_DT_F32, 64, 2, 4, 4, 64, 0.0f)); /* fp32 */
    assert_false(
        mc_cuda_attention_uses_cudnn(MC_DT_BF16, 64, 2, 4, 4, 64, 0.1f)); /* another dropout */
#endif
    use_kernels(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_choice),  cmocka_unit_test(test_gpt_head_dims),
        cmocka_unit_test(test_lengths), cmocka_unit_test(test_head_dims),
        cmocka_unit_test(test_gqa),     cmocka_unit_test(test_peaked),
        cmocka_unit_test(test_dropout), cmocka_unit_test(test_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
