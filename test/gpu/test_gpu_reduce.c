/* The CUDA sumsq, count_zeros and has_nonfinite against the CPU backend, fp32/bf16/fp16,
 * lengths with and without a tail after the 16-byte vectors, long enough for the full grid of
 * partial sums, unaligned buffers, n = 0, and the same call twice (determinism).
 *  - sumsq: both sum the exact squares in double, in different orders: relative 1e-12 (a sum
 *    of n positive doubles is within n * 2^-53 relative of the exact one; n <= 2.1e6 here gives
 *    ~5e-10 in the worst case but ~1e-14 in practice; we allow 1e-12 * n / 1e4 + 1e-13).
 *  - count_zeros, has_nonfinite: exact (+0 and -0 count as zeros; an inf or NaN anywhere,
 *    including the tail, is found; the elements past n are not looked at).
 *  - sumsq_multi: each tensor's sum bit for bit what sumsq gives for it alone (the gradient norm
 *    is the same whichever is used), so the CPU's tolerance above. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test/gpu/gpu_test.h"

static void reduce_case(const mc_backend_t *be, mc_dtype_t dt, long n, int off)
{
    if (!gpu_case_sampled()) return;
    const size_t es = mc_dtype_size(dt);
    void *x = host_rand(dt, n + 2, -3, 3);
    char *px = (char *)x + off * es;
    for (long i = 0; i < n; i += 7) mc_store_f32(px, dt, i, (i / 7) % 2 ? -0.0f : 0.0f);
    mc_store_f32(px, dt, n, INFINITY); /* just past the end: must not count */
    void *d_x = dev_put(be, x, dt, n + 2);
    char *qx = (char *)d_x + off * es;
    char what[96];
    snprintf(what, sizeof(what), "%s n %ld offset %d", mc_dtype_name(dt), n, off);

    const double want = cpu->sumsq(cpu, dt, px, n), got = be->sumsq(be, dt, qx, n), again = be->sumsq(be, dt, qx, n);
    const double tol = (1e-12 * (double)n / 1e4 + 1e-13) * want;
    if (!(fabs(got - want) <= tol)) fail_msg("sumsq %s: got %.17g, want %.17g", what, got, want);
    if (memcmp(&got, &again, sizeof(got)) != 0) fail_msg("sumsq %s: not deterministic (%.17g, %.17g)", what, got, again);
    if (cpu->count_zeros(cpu, dt, px, n) != be->count_zeros(be, dt, qx, n))
        fail_msg("count_zeros %s: got %ld, want %ld", what, be->count_zeros(be, dt, qx, n), cpu->count_zeros(cpu, dt, px, n));
    assert_int_equal(be->has_nonfinite(be, dt, qx, n), 0);
    /* an inf or a NaN at the start, the middle, the last element */
    const long at[3] = {0, n / 2, n - 1};
    const float bad[2] = {INFINITY, NAN};
    for (int k = 0; k < 3 && n > 0; k++)
        for (int b = 0; b < 2; b++) {
            const float one = bad[b], keep = mc_load_f32(px, dt, at[k]);
            char tmp[4];
            mc_store_f32(tmp, dt, 0, one);
            be->memcpy_h2d(be, qx + at[k] * es, tmp, es);
            if (be->has_nonfinite(be, dt, qx, n) != 1) fail_msg("has_nonfinite %s: missed %g at %ld", what, (double)one, at[k]);
            mc_store_f32(tmp, dt, 0, keep);
            be->memcpy_h2d(be, qx + at[k] * es, tmp, es);
        }
    be->free(be, d_x);
    free(x);
}

static void test_reduce(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
    static const long lens[] = {0, 1, 7, 8, 9, 1000, 262147};
    for (int t = 0; t < 3; t++) {
        for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
            for (int off = 0; off <= 1; off++) reduce_case(be, GPU_TYPES[t], lens[i], off);
        /* past one full grid of the type's 16-byte chunks (1024 blocks x 256 threads x 4 fp32 or
         * 8 16-bit elements) by a 17-element tail, unaligned: the grid-stride loop's second lap
         * (once per type: these are the test's longest cases on the emulated device) */
        const long grid = 1024L * 256 * (16 / (long)mc_dtype_size(GPU_TYPES[t]));
        reduce_case(be, GPU_TYPES[t], grid + 17, 1);
    }
}

/* A list like a model's gradients: sizes from empty to beyond one grid of partials, aligned and
 * not (offsets of one element), in one buffer as the gradient buffer holds them. */
static void multi_case(const mc_backend_t *be, mc_dtype_t dt, int count)
{
    const size_t es = mc_dtype_size(dt);
    static const long sizes[] = {1000, 0, 7, 262147, 64, 1, 4096, 33, 9, 8};
    long *n = calloc((size_t)count, sizeof(long)), total = 0;
    const void **hx = calloc((size_t)count, sizeof(void *)), **dx = calloc((size_t)count, sizeof(void *));
    double *got = calloc((size_t)count, sizeof(double));
    assert_true(n && hx && dx && got);
    for (int i = 0; i < count; i++) total += (n[i] = sizes[i % 10]) + (i % 3 == 1);
    void *x = host_rand(dt, total, -3, 3), *d_x = dev_put(be, x, dt, total);
    long at = 0;
    for (int i = 0; i < count; i++) {
        at += i % 3 == 1; /* this one starts one element on: not 16-byte aligned */
        hx[i] = (const char *)x + at * es, dx[i] = (const char *)d_x + at * es;
        at += n[i];
    }
    be->sumsq_multi(be, dt, dx, n, count, got);
    for (int i = 0; i < count; i++) {
        const double alone = be->sumsq(be, dt, dx[i], n[i]), want = cpu->sumsq(cpu, dt, hx[i], n[i]);
        if (memcmp(&got[i], &alone, sizeof(alone)) != 0)
            fail_msg("sumsq_multi %s tensor %d of %d (n %ld): %.17g, sumsq alone %.17g", mc_dtype_name(dt), i, count,
                     n[i], got[i], alone);
        if (!(fabs(got[i] - want) <= (1e-12 * (double)n[i] / 1e4 + 1e-13) * want))
            fail_msg("sumsq_multi %s tensor %d: got %.17g, want %.17g", mc_dtype_name(dt), i, got[i], want);
    }
    double cpu_got[64];
    assert_true(count <= 64);
    cpu->sumsq_multi(cpu, dt, hx, n, count, cpu_got);
    for (int i = 0; i < count; i++) assert_true(cpu_got[i] == cpu->sumsq(cpu, dt, hx[i], n[i]));
    be->free(be, d_x);
    free(x), free(n), free(hx), free(dx), free(got);
}

static void test_sumsq_multi(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
    for (int t = 0; t < 3; t++) {
        multi_case(be, GPU_TYPES[t], 1);
        multi_case(be, GPU_TYPES[t], 13);
    }
    be->sumsq_multi(be, MC_DT_F32, NULL, NULL, 0, NULL); /* an empty list: nothing */
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_reduce), cmocka_unit_test(test_sumsq_multi)};
    return cmocka_run_group_tests(tests, gpu_setup, NULL);
}
