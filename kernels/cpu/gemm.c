/* GEMM through OpenBLAS (row-major cblas_sgemm). */
#include <cblas.h>

#include "kernels/cpu/cpu.h"

void mc_cpu_gemm(const mc_backend_t *be, int transa, int transb, int M, int N, int K, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    (void)be;
    if (M <= 0 || N <= 0) return;
    if (K <= 0) { /* C = beta * C; BLAS would do the same, but avoid its checks on lda/ldb. */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++)
                C[(long)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(long)i * ldc + j];
        return;
    }
    cblas_sgemm(CblasRowMajor, transa ? CblasTrans : CblasNoTrans,
                transb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
