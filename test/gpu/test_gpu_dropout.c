/* The CUDA dropout forward/backward against the CPU backend: the same Philox masks (kernels/
 * philox.h) for the same element numbering, so the results must be bitwise equal (one fp32
 * multiply by the same 1/(1-p), one rounding). Whole tensors and shards (d0_offset, inner_full,
 * inner_offset placing every residue of the element number mod 4), element numbers past 2^32,
 * samples past 2^32, in place, p = 0 (a copy), p = 1 (all dropped), fp32/bf16/fp16. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test/gpu/gpu_test.h"

typedef struct {
    int d0, B, inner, d0_offset, inner_full, inner_offset;
} view_t;

static void dropout_case(const mc_backend_t *be, mc_dtype_t dt, const mc_dropout_t *d, view_t v)
{
    const long n = (long)v.d0 * v.B * v.inner;
    void *x = host_rand(dt, n, -2, 2), *o = host_rand(dt, n, -9, 9);
    void *d_x = dev_put(be, x, dt, n), *d_o = dev_put(be, o, dt, n);
    char what[160];
    snprintf(what, sizeof(what), "dropout p %g view [%d, %d, %d] at (%d, %d of %d)", d ? (double)d->p : 0.0, v.d0, v.B, v.inner,
             v.d0_offset, v.inner_offset, v.inner_full);
    cpu->dropout_forward(cpu, dt, o, x, d, v.d0, v.B, v.inner, v.d0_offset, v.inner_full, v.inner_offset);
    be->dropout_forward(be, dt, d_o, d_x, d, v.d0, v.B, v.inner, v.d0_offset, v.inner_full, v.inner_offset);
    void *got = dev_get(be, d_o, dt, n);
    check_exact(what, dt, got, o, n);
    free(got);
    /* backward in place */
    cpu->dropout_backward(cpu, dt, x, x, d, v.d0, v.B, v.inner, v.d0_offset, v.inner_full, v.inner_offset);
    be->dropout_backward(be, dt, d_x, d_x, d, v.d0, v.B, v.inner, v.d0_offset, v.inner_full, v.inner_offset);
    got = dev_get(be, d_x, dt, n);
    check_exact(what, dt, got, x, n);
    free(got);
    be->free(be, d_x), be->free(be, d_o);
    free(x), free(o);
}

static void test_dropout(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
    static const view_t views[] = {
        {7, 3, 11, 0, 11, 0},             /* a whole [s, b, h] tensor, odd sizes */
        {16, 4, 64, 0, 64, 0},            /* aligned */
        {7, 3, 11, 2, 33, 5},             /* a shard: rows 2.., columns 5..15 of 33 */
        {5, 2, 1, 1, 7, 3},               /* one element per row */
        {3, 2, 6, 0, 6, 3},               /* each residue mod 4 at a row start */
        {1, 3, 1000, 0, 4000, 1001},      /* attention-probs style: d0 = 1 */
        {4, 2, 13, 70000, 70000, 17},     /* element numbers past 2^32 */
        {128, 8, 257, 0, 257, 0},         /* many rows */
    };
    mc_dropout_t d = {.seed = 1234, .iteration = 7, .layer = 3, .site = MC_DROPOUT_SITE_MLP_OUT, .sample0 = 11, .p = 0.1f};
    for (int t = 0; t < 3; t++) {
        const mc_dtype_t dt = GPU_TYPES[t];
        for (size_t i = 0; i < sizeof(views) / sizeof(views[0]); i++) {
            d.p = 0.1f, d.sample0 = 11, d.seed = 1234;
            dropout_case(be, dt, &d, views[i]);
            d.p = 0.5f, d.sample0 = (1ull << 32) + 5, d.seed = 0xDEADBEEF12345678ull; /* high sample bits */
            dropout_case(be, dt, &d, views[i]);
            d.p = 0.0f;
            dropout_case(be, dt, &d, views[i]);
            d.p = 1.0f;
            dropout_case(be, dt, &d, views[i]);
        }
        dropout_case(be, dt, NULL, views[0]);           /* no dropout: a copy */
        dropout_case(be, dt, &d, (view_t){0, 3, 4, 0, 4, 0}); /* empty */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_dropout)};
    return cmocka_run_group_tests(tests, gpu_setup, NULL);
}
