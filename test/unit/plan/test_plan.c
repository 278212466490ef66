/* The pieces of `megatron-c plan`'s time model (plan/time.c) with hand-computed values: the GEMM
 * roofline with wave quantisation, the GPU table, and the sizing backend the memory plan uses
 * for a GPU it does not have. The whole plan is checked against runs and the paper in
 * test/integration/test_plan.sh. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "kernels/device.h"
#include "plan/plan.h"

/* A large GEMM whose tiles fill whole waves reaches the cuBLAS ceiling. */
static void test_gemm_ceiling(void **state)
{
    (void)state;
    const mc_gpu_t *g = mc_gpu_find("a100");
    assert_non_null(g);
    /* 256*108 x 128*16 tiles: 16 full waves on 108 SMs */
    const double M = 256 * 108, N = 128 * 16, K = 8192;
    double eff;
    const double s = mc_plan_gemm_seconds(g, 1, M, N, K, 2, &eff);
    assert_true(fabs(eff - g->gemm_ceiling) < 1e-12);
    assert_true(fabs(s - 2 * M * N * K / (312e12 * 0.80)) < 1e-12);
}

/* One tile more than the SMs takes two waves: the second is nearly empty. */
static void test_wave_quantisation(void **state)
{
    (void)state;
    const mc_gpu_t *g = mc_gpu_find("h100");
    double eff;
    mc_plan_gemm_seconds(g, 1, 256 * 7, 128 * 19, 16384, 2, &eff); /* 133 tiles */
    assert_true(fabs(eff - g->gemm_ceiling * 133.0 / (2 * 132)) < 1e-12);
}

/* A GEMM with K = 1 is memory-bound: its time is its bytes at the HBM fraction. */
static void test_memory_bound(void **state)
{
    (void)state;
    const mc_gpu_t *g = mc_gpu_find("h200");
    const double M = 8192, N = 8192, K = 1;
    const double s = mc_plan_gemm_seconds(g, 1, M, N, K, 2, NULL);
    const double bytes = (M * K + K * N + M * N) * 2;
    assert_true(fabs(s - bytes / (4800e9 * MC_PLAN_HBM_FRACTION)) < 1e-15);
    assert_true(mc_plan_gemm_seconds(g, 1, 0, N, K, 2, NULL) == 0);
}

static void test_gpu_table(void **state)
{
    (void)state;
    assert_null(mc_gpu_find("v100"));
    const mc_gpu_t *a = mc_gpu_find("a100"), *h = mc_gpu_find("h200");
    assert_int_equal((int)a->peak_tflops, 312);
    assert_int_equal((int)a->memory_gb, 80);
    assert_int_equal((int)h->memory_gb, 141);
    assert_int_equal(h->sms, 132);
}

/* The sizing backend has the CUDA attention's sizes (row statistics only) and no compute op;
 * the CPU one keeps the probabilities. */
static void test_sizing_backend(void **state)
{
    (void)state;
    const mc_backend_t *cuda = mc_backend_sizing("cuda"), *cpu = mc_backend_sizing("cpu");
    assert_non_null(cuda);
    assert_non_null(cpu);
    assert_null(mc_backend_sizing("tpu"));
    assert_string_equal(cuda->name, "cuda");
    assert_null(cuda->linear_forward);
    size_t st, sc;
    cuda->attention_sizes(cuda, MC_DT_BF16, 2048, 2, 16, 128, &st, &sc);
    assert_int_equal(st, 2 * 2048 * 2 * 16 * sizeof(float));
    assert_int_equal(sc, 2048 * 2 * 16 * sizeof(float));
    cpu->attention_sizes(cpu, MC_DT_BF16, 64, 2, 4, 16, &st, &sc);
    assert_int_equal(st, 2 * 4 * 64 * 64 * 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_ceiling),   cmocka_unit_test(test_wave_quantisation),
        cmocka_unit_test(test_memory_bound),   cmocka_unit_test(test_gpu_table),
        cmocka_unit_test(test_sizing_backend),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
