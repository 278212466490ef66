/* The CUDA dropout kernel's work items (kernels/cuda/dropout_map.h), run on the CPU: over every
 * item of a [d0, b, inner] view, each element is covered exactly once, its mask word is
 * mc_dropout_bits of its (sample, element number) (the CPU backend's numbering, backend.h), and
 * applying the kernel's rule gives the CPU backend's dropout output bit for bit. Views include
 * shards putting every residue of the element number mod 4 at a row start, one-element rows,
 * element numbers past 2^32 and samples past 2^32. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cuda/dropout_map.h"

typedef struct {
    int d0, B, inner, d0_offset, inner_full, inner_offset;
} view_t;

static void map_case(view_t v, const mc_dropout_t *d)
{
    const long n = (long)v.d0 * v.B * v.inner;
    float *x = calloc((size_t)n + 1, sizeof(float)), *out = calloc((size_t)n + 1, sizeof(float)),
          *want = calloc((size_t)n + 1, sizeof(float));
    int *seen = calloc((size_t)n + 1, sizeof(int));
    assert_non_null(x), assert_non_null(out), assert_non_null(want), assert_non_null(seen);
    for (long i = 0; i < n; i++) x[i] = 1.0f + (float)(i % 97) / 8.0f;
    const float scale = mc_dropout_scale(d->p);
    const long items = (long)v.d0 * v.B * mc_dropout_items_per_row(v.inner);
    for (long t = 0; t < items; t++) { /* the kernel's loop body, thread by thread */
        const mc_dropout_item_t it =
            mc_dropout_item(t, v.B, v.inner, v.d0_offset, v.inner_full, v.inner_offset, d->sample0);
        if (it.j0 >= it.j1) continue;
        assert_true(it.j0 >= 0 && it.j1 <= v.inner && it.j1 - it.j0 <= 4);
        const mc_philox_ctr_t r = mc_dropout_block_words(d->seed, d->iteration, d->layer, d->site, it.sample, it.block);
        for (int j = it.j0; j < it.j1; j++) {
            const long idx = it.row * v.inner + j;
            const uint64_t e = it.e0 + (uint64_t)j;
            assert_int_equal(e >> 2, it.block);
            const uint32_t word = r.v[e & 3u];
            assert_int_equal(word, mc_dropout_bits(d->seed, d->iteration, d->layer, d->site, it.sample, e));
            seen[idx]++;
            out[idx] = mc_u32_to_unit(word) >= d->p ? x[idx] * scale : 0.0f;
        }
    }
    for (long i = 0; i < n; i++)
        if (seen[i] != 1) fail_msg("element %ld covered %d times", i, seen[i]);
    const mc_backend_t *cpu = mc_backend_cpu();
    cpu->dropout_forward(cpu, MC_DT_F32, want, x, d, v.d0, v.B, v.inner, v.d0_offset, v.inner_full, v.inner_offset);
    assert_memory_equal(out, want, (size_t)n * sizeof(float));
    free(x), free(out), free(want), free(seen);
}

static void test_dropout_map(void **state)
{
    (void)state;
    static const view_t views[] = {
        {7, 3, 11, 0, 11, 0}, {7, 3, 11, 2, 33, 5}, {5, 2, 1, 1, 7, 3},     {3, 2, 6, 0, 6, 3},
        {2, 2, 4, 0, 4, 1},   {2, 2, 5, 1, 9, 2},   {4, 2, 13, 70000, 70000, 17}, {1, 3, 1000, 0, 4000, 1001},
        {3, 1, 2, 0, 3, 0},   {2, 3, 3, 0, 3, 0},
    };
    mc_dropout_t d = {.seed = 99, .iteration = 4, .layer = 2, .site = MC_DROPOUT_SITE_ATTN_OUT, .sample0 = 5, .p = 0.3f};
    for (size_t i = 0; i < sizeof(views) / sizeof(views[0]); i++) {
        d.sample0 = 5;
        map_case(views[i], &d);
        d.sample0 = (1ull << 32) + 3, d.seed = 0xFEDCBA9876543210ull; /* high sample and seed bits */
        map_case(views[i], &d);
        d.seed = 99;
    }
    /* every residue mod 4 at the row start and every length up to 9 */
    for (int off = 0; off < 4; off++)
        for (int inner = 1; inner <= 9; inner++) map_case((view_t){2, 2, inner, 0, inner + 4, off}, &d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_dropout_map)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
