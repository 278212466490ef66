/* The CUDA backend's row-major -> column-major GEMM mapping (kernels/cuda/gemm_map.h), checked
 * on the CPU: a column-major GEMM written here from cuBLAS's definition, fed the mapped
 * arguments (operands swapped), must give the row-major op table's result (OpenBLAS through the
 * CPU backend) for every transposition, padded leading dimensions, and the linear layer's
 * three products. Matrices hold small integers, so every sum is exact and the comparison is
 * equality. Also checks that each mapped leading dimension is at least its matrix's rows, as
 * cuBLASLt requires, and that every element the reference reads is inside its buffer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cuda/gemm_map.h"

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float small_int(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((int)(g_rng >> 40) % 7 - 3);
}

static float *mat(long n)
{
    float *x = calloc((size_t)n + 1, sizeof(float));
    assert_non_null(x);
    for (long i = 0; i < n; i++) x[i] = small_int();
    return x;
}

/* cuBLAS: D[m,n] = op(A) op(B), column-major; op(A) is m x k: A stored m x k (op N) or k x m
 * (op T) with leading dimension lda; op(B) is k x n: B stored k x n or n x k. Reads check
 * their index against the buffer lengths na/nb/nd. */
static void colmajor_gemm(int opa, int opb, int m, int n, int k, const float *A, int lda, long na, const float *B,
                          int ldb, long nb, float *D, int ldd, long nd)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float acc = 0.0f;
            for (int p = 0; p < k; p++) {
                const long ia = opa ? p + (long)i * lda : i + (long)p * lda;
                const long ib = opb ? j + (long)p * ldb : p + (long)j * ldb;
                assert_true(ia >= 0 && ia < na);
                assert_true(ib >= 0 && ib < nb);
                acc += A[ia] * B[ib];
            }
            const long id = i + (long)j * ldd;
            assert_true(id < nd);
            D[id] = acc;
        }
}

/* The mapped call's stored shapes agree with cuBLAS's rule and fit their leading dimensions. */
static void check_layout(mc_colmajor_gemm_t c)
{
    assert_int_equal(c.a_rows, c.opa ? c.k : c.m);
    assert_int_equal(c.a_cols, c.opa ? c.m : c.k);
    assert_int_equal(c.b_rows, c.opb ? c.n : c.k);
    assert_int_equal(c.b_cols, c.opb ? c.k : c.n);
    assert_true(c.lda >= c.a_rows);
    assert_true(c.ldb >= c.b_rows);
    assert_true(c.ldd >= c.m);
}

/* Row-major C = op(A) op(B) through the mapping vs the CPU backend's gemm. */
static void rowmajor_case(mc_rowmajor_gemm_t r, const float *A, long na, const float *B, long nb)
{
    const long nc = (long)r.M * r.ldc;
    float *want = calloc((size_t)nc + 1, sizeof(float)), *got = calloc((size_t)nc + 1, sizeof(float));
    assert_non_null(want), assert_non_null(got);
    const mc_backend_t *cpu = mc_backend_cpu();
    cpu->gemm(cpu, r.transa, r.transb, r.M, r.N, r.K, 1.0f, A, r.lda, B, r.ldb, 0.0f, want, r.ldc);
    const mc_colmajor_gemm_t c = mc_gemm_to_colmajor(r);
    check_layout(c);
    assert_int_equal(c.m, r.N);
    assert_int_equal(c.n, r.M);
    colmajor_gemm(c.opa, c.opb, c.m, c.n, c.k, B, c.lda, nb, A, c.ldb, na, got, c.ldd, nc); /* operands swapped */
    for (long i = 0; i < r.M; i++)
        for (long j = 0; j < r.N; j++)
            if (got[i * r.ldc + j] != want[i * r.ldc + j])
                fail_msg("ta %d tb %d M %d N %d K %d: C[%ld,%ld] = %g, want %g", r.transa, r.transb, r.M, r.N, r.K, i,
                         j, (double)got[i * r.ldc + j], (double)want[i * r.ldc + j]);
    free(want), free(got);
}

static void test_gemm_map(void **state)
{
    (void)state;
    static const int sizes[][4] = {{5, 7, 3, 0}, {1, 9, 4, 2}, {8, 1, 6, 1}, {13, 11, 1, 3}};
    for (int ta = 0; ta <= 1; ta++)
        for (int tb = 0; tb <= 1; tb++)
            for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
                const int M = sizes[s][0], N = sizes[s][1], K = sizes[s][2], pad = sizes[s][3];
                const int a_rows = ta ? K : M, a_cols = ta ? M : K, b_rows = tb ? N : K, b_cols = tb ? K : N;
                mc_rowmajor_gemm_t r = {ta, tb, M, N, K, a_cols + pad, b_cols + pad, N + pad};
                float *A = mat((long)a_rows * r.lda), *B = mat((long)b_rows * r.ldb);
                rowmajor_case(r, A, (long)a_rows * r.lda, B, (long)b_rows * r.ldb);
                free(A), free(B);
            }
}

/* The linear layer's products (W [out, in]) vs the CPU backend's linear ops. */
static void test_linear_map(void **state)
{
    (void)state;
    const mc_backend_t *cpu = mc_backend_cpu();
    const int N = 6, in_f = 5, out_f = 7;
    float *in = mat((long)N * in_f), *W = mat((long)out_f * in_f), *dout = mat((long)N * out_f);
    float *want = calloc(64, sizeof(float)), *got = calloc(64, sizeof(float)), *dW = calloc(64, sizeof(float));
    assert_non_null(want), assert_non_null(got), assert_non_null(dW);

    /* forward: out = in @ W^T; the bias epilogue adds bias[row of the column-major D] = per
     * output feature */
    mc_rowmajor_gemm_t r = mc_linear_forward_gemm(N, in_f, out_f);
    mc_colmajor_gemm_t c = mc_gemm_to_colmajor(r);
    check_layout(c);
    assert_int_equal(c.m, out_f);
    cpu->linear_forward(cpu, MC_DT_F32, want, in, W, NULL, N, in_f, out_f);
    colmajor_gemm(c.opa, c.opb, c.m, c.n, c.k, W, c.lda, (long)out_f * in_f, in, c.ldb, (long)N * in_f, got, c.ldd, 64);
    assert_memory_equal(got, want, (size_t)N * out_f * sizeof(float));

    /* dgrad: din = dout @ W */
    memset(want, 0, 64 * sizeof(float)), memset(got, 0, 64 * sizeof(float));
    r = mc_linear_dgrad_gemm(N, in_f, out_f);
    c = mc_gemm_to_colmajor(r);
    check_layout(c);
    cpu->linear_backward(cpu, MC_DT_F32, MC_DT_F32, want, dW, NULL, dout, in, W, N, in_f, out_f);
    colmajor_gemm(c.opa, c.opb, c.m, c.n, c.k, W, c.lda, (long)out_f * in_f, dout, c.ldb, (long)N * out_f, got, c.ldd,
                  64);
    assert_memory_equal(got, want, (size_t)N * in_f * sizeof(float));

    /* wgrad: dW = dout^T @ in (dW above was accumulated from zero by the CPU backend) */
    memset(got, 0, 64 * sizeof(float));
    r = mc_linear_wgrad_gemm(N, in_f, out_f);
    c = mc_gemm_to_colmajor(r);
    check_layout(c);
    colmajor_gemm(c.opa, c.opb, c.m, c.n, c.k, in, c.lda, (long)N * in_f, dout, c.ldb, (long)N * out_f, got, c.ldd, 64);
    assert_memory_equal(got, dW, (size_t)out_f * in_f * sizeof(float));
    free(in), free(W), free(dout), free(want), free(got), free(dW);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_map),
        cmocka_unit_test(test_linear_map),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
