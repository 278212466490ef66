/* Backend selection pieces (kernels/device.h): the op-table check that refuses an incomplete
 * backend, which GPU a rank drives and how many ranks share it, the memory the plan is checked
 * against, and the CPU choices of mc_backend_select (the CUDA ones need a GPU: scripts/gpu-test.sh). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/device.h"
#include "comm/devmem.h"

/* The table names every required function pointer of mc_backend_t: the struct is name, the
 * capability fields, the ops, the three optional profiling hooks (NULL on the CPU), the three
 * optional device-memory hooks (NULL on the CPU), impl. */
static void test_op_table_covers_the_struct(void **state)
{
    (void)state;
    int n = mc_backend_op_count();
    const size_t first = offsetof(mc_backend_t, alloc), p = sizeof(void *);
    assert_true(first > offsetof(mc_backend_t, gpu));
    assert_int_equal(offsetof(mc_backend_t, profiler), first + (size_t)n * p);
    assert_int_equal(offsetof(mc_backend_t, range_push), first + (size_t)(n + 1) * p);
    assert_int_equal(offsetof(mc_backend_t, range_pop), first + (size_t)(n + 2) * p);
    assert_int_equal(offsetof(mc_backend_t, is_device), first + (size_t)(n + 3) * p);
    assert_int_equal(offsetof(mc_backend_t, pinned_free), first + (size_t)(n + 5) * p);
    assert_int_equal(sizeof(mc_backend_t), first + (size_t)(n + 7) * p);
    for (int i = 0; i < n; i++) { /* the struct's order, right after the capabilities */
        size_t off = 0;
        assert_non_null(mc_backend_op_name(i, &off));
        assert_int_equal(off, first + (size_t)i * p);
    }
    assert_null(mc_backend_op_name(n, NULL));
    assert_null(mc_backend_op_name(-1, NULL));
}

/* What each backend says it is (the code around the op table reads this, never the name). */
static void test_capabilities(void **state)
{
    (void)state;
    const mc_backend_t *cpu = mc_backend_cpu(), *strict = mc_backend_strict();
    assert_false(cpu->device_memory);
    assert_false(cpu->has_nccl);
    assert_int_equal(cpu->gpu, -1);
    assert_null(cpu->is_device);
    assert_true(strict->device_memory);
    assert_false(strict->has_nccl);
    assert_int_equal(strict->gpu, -1);
    void *d = strict->alloc(strict, 64), *h = malloc(64);
    assert_true(strict->is_device(strict, d));
    assert_false(strict->is_device(strict, h));
    strict->free(strict, d);
    free(h);
    const mc_backend_t *cuda = mc_backend_sizing("cuda");
    assert_true(cuda->device_memory);
    assert_true(cuda->has_nccl);
    assert_int_equal(mc_backend_sizing("cpu")->gpu, -1);
    /* the comm layer's view: host memory only for the CPU; the strict backend's by address */
    assert_null(mc_devmem_for(cpu));
    const mc_devmem_t *dm = mc_devmem_for(strict);
    assert_non_null(dm);
    d = strict->alloc(strict, 64);
    assert_true(dm->is_device(dm->ctx, d));
    strict->free(strict, d);
}

static void test_missing_op(void **state)
{
    (void)state;
    const mc_backend_t *cpu = mc_backend_cpu();
    assert_null(mc_backend_missing_op(cpu)); /* the reference backend is complete */
    for (int i = 0; i < mc_backend_op_count(); i++) {
        mc_backend_t be = *cpu;
        size_t off = 0;
        const char *name = mc_backend_op_name(i, &off);
        memset((char *)&be + off, 0, sizeof(void *));
        const char *missing = mc_backend_missing_op(&be);
        assert_non_null(missing);
        assert_string_equal(missing, name);
    }
    mc_backend_t be = *cpu;
    be.attention_forward = NULL, be.adam_step = NULL; /* the first in table order is named */
    assert_string_equal(mc_backend_missing_op(&be), "attention_forward");
}

static void test_gpu_for_rank(void **state)
{
    (void)state;
    assert_int_equal(mc_gpu_for_rank(0, 8), 0);
    assert_int_equal(mc_gpu_for_rank(5, 8), 5);
    assert_int_equal(mc_gpu_for_rank(9, 8), 1);
    assert_int_equal(mc_gpu_for_rank(3, 1), 0);
    assert_int_equal(mc_gpu_for_rank(3, 0), 0);
    /* 8 ranks on 8 GPUs: one each; 4 ranks on 1 GPU: all four; 6 ranks on 4 GPUs: 2, 2, 1, 1 */
    assert_int_equal(mc_ranks_per_gpu(3, 8, 8), 1);
    assert_int_equal(mc_ranks_per_gpu(2, 4, 1), 4);
    assert_int_equal(mc_ranks_per_gpu(0, 6, 4), 2);
    assert_int_equal(mc_ranks_per_gpu(5, 6, 4), 2);
    assert_int_equal(mc_ranks_per_gpu(2, 6, 4), 1);
    assert_int_equal(mc_ranks_per_gpu(3, 6, 4), 1);
    assert_int_equal(mc_ranks_per_gpu(0, 1, 0), 1);
}

static void test_cpu_memory(void **state)
{
    (void)state;
    double f = 0, t = 0;
    assert_int_equal(mc_backend_memory(mc_backend_cpu(), &f, &t), 0);
    assert_true(t > 64.0 * 1024 * 1024);
    assert_true(f == t);
}

static void test_select_cpu(void **state)
{
    (void)state;
    char why[512];
    const mc_backend_t *be = mc_backend_select("cpu", 0, 0, why, sizeof(why));
    assert_ptr_equal(be, mc_backend_cpu());
    assert_non_null(strstr(why, "requested by --device cpu"));
    /* auto: the CPU unless a GPU is visible and the CUDA backend is complete */
    be = mc_backend_select("auto", 0, 3, why, sizeof(why));
    assert_non_null(be);
    if (mc_cuda_device_count() == 0) {
        assert_ptr_equal(be, mc_backend_cpu());
        assert_non_null(strstr(why, "cpu (no CUDA device available"));
    } else if (be == mc_backend_cpu()) {
        assert_non_null(strstr(why, "GPU(s) visible, but"));
    } else {
        assert_string_equal(be->name, "cuda");
        assert_non_null(strstr(why, "local rank 3 modulo"));
    }
    /* the comm layer's view of the CPU backend: host memory only */
    assert_null(mc_devmem_for(mc_backend_cpu()));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_op_table_covers_the_struct),
        cmocka_unit_test(test_capabilities),
        cmocka_unit_test(test_missing_op),
        cmocka_unit_test(test_gpu_for_rank),
        cmocka_unit_test(test_cpu_memory),
        cmocka_unit_test(test_select_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
