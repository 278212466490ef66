// The emulated cuBLAS (test/emu/cublas.cpp): the type tables of cublasGemmGroupedBatchedEx and
// cublasGemmEx as NVIDIA's documentation gives them (a combination outside a table is
// CUBLAS_STATUS_NOT_SUPPORTED), and cublasGemmEx's numbers against a naive column-major reference
// written from its definition (C = alpha op(A) op(B) + beta C). TAP on stdout; exit status 1 when
// a check fails. Device memory comes from the emulator's cudaMalloc.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "test/emu/tap.h"

namespace
{

void *device(size_t bytes)
{
    void *p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        printf("Bail out! cudaMalloc of %zu bytes\n", bytes);
        exit(1);
    }
    return p;
}

// One 4 x 4 x 4 problem of the grouped call with the given types: its status.
cublasStatus_t grouped(cublasHandle_t h, cudaDataType_t ab, cudaDataType_t c,
                       cublasComputeType_t ct)
{
    static void *mats[3], **ptrs;
    if (!ptrs) {
        for (void *&m : mats) {
            m = device(16 * 8);
            cudaMemset(m, 0, 16 * 8);
        }
        ptrs = (void **)device(3 * sizeof(void *));
        cudaMemcpy(ptrs, mats, sizeof(mats), cudaMemcpyHostToDevice);
    }
    const cublasOperation_t op = CUBLAS_OP_N;
    const int four = 4, one = 1;
    const double dal[1] = {1.0}, dbe[1] = {0.0};
    const float fal[1] = {1.0f}, fbe[1] = {0.0f};
    const bool wide = ct == CUBLAS_COMPUTE_64F;
    return cublasGemmGroupedBatchedEx(
        h, &op, &op, &four, &four, &four, wide ? (const void *)dal : fal, (const void *const *)ptrs,
        ab, &four, (const void *const *)(ptrs + 1), ab, &four, wide ? (const void *)dbe : fbe,
        ptrs + 2, c, &four, 1, &one, ct);
}

void test_grouped_table(cublasHandle_t h)
{
    struct {
        cudaDataType_t ab, c;
        cublasComputeType_t ct;
        bool ok;
        const char *what;
    } rows[] = {
        {CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, true, "bf16 x bf16 -> bf16, compute 32F"},
        {CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, true, "fp16 x fp16 -> fp16, compute 32F"},
        {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, true, "fp32 x fp32 -> fp32, compute 32F"},
        {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, true, "fp32, compute 32F_FAST_TF32"},
        {CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F, true, "fp64, compute 64F"},
        {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, false,
         "bf16 x bf16 -> fp32 (not in the table)"},
        {CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F, false,
         "fp16 x fp16 -> fp32 (not in the table)"},
        {CUDA_R_16BF, CUDA_R_16F, CUBLAS_COMPUTE_32F, false, "bf16 x bf16 -> fp16"},
        {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_16BF, false,
         "fp32, compute 32F_FAST_16BF"},
        {CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F_PEDANTIC, false,
         "bf16, compute 32F_PEDANTIC"},
    };
    for (const auto &r : rows) {
        const cublasStatus_t s = grouped(h, r.ab, r.c, r.ct);
        const cublasStatus_t want = r.ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
        tap(s == want, "grouped: %s: %s (want %s)", r.what, cublasGetStatusString(s),
            cublasGetStatusString(want));
    }
}

// cublasGemmEx bf16 x bf16 -> fp32, op T on A, accumulating (beta 1): against the definition.
void test_gemmex_bf16_f32(cublasHandle_t h)
{
    const int m = 5, n = 3, k = 7, lda = 9, ldb = 8, ldc = 6; // A stored k x m (op T), B k x n
    __nv_bfloat16 A[lda * m], B[ldb * n];
    float C[ldc * n], want[ldc * n];
    for (int i = 0; i < lda * m; i++) A[i] = __float2bfloat16_rn((float)((i * 37) % 11 - 5) / 4.0f);
    for (int i = 0; i < ldb * n; i++) B[i] = __float2bfloat16_rn((float)((i * 17) % 13 - 6) / 8.0f);
    for (int i = 0; i < ldc * n; i++) C[i] = want[i] = (float)(i % 5) - 2.0f;
    const float alpha = 0.5f, beta = 1.0f;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double acc = 0;
            for (int l = 0; l < k; l++)
                acc += (double)__bfloat162float(A[i * lda + l]) * __bfloat162float(B[j * ldb + l]);
            want[j * ldc + i] = (float)(alpha * acc + beta * want[j * ldc + i]);
        }
    void *dA = device(sizeof(A)), *dB = device(sizeof(B)), *dC = device(sizeof(C));
    cudaMemcpy(dA, A, sizeof(A), cudaMemcpyHostToDevice);
    cudaMemcpy(dB, B, sizeof(B), cudaMemcpyHostToDevice);
    cudaMemcpy(dC, C, sizeof(C), cudaMemcpyHostToDevice);
    cublasStatus_t s = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, dA, CUDA_R_16BF,
                                    lda, dB, CUDA_R_16BF, ldb, &beta, dC, CUDA_R_32F, ldc,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    cudaMemcpy(C, dC, sizeof(C), cudaMemcpyDeviceToHost);
    double worst = 0;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < ldc; i++) {
            const double e = fabs((double)C[j * ldc + i] - want[j * ldc + i]);
            if (e > worst) worst = e;
        }
    tap(s == CUBLAS_STATUS_SUCCESS && worst <= 1e-5,
        "cublasGemmEx bf16 x bf16 -> fp32 (op T, N; beta 1; rows past m untouched): %s, largest error %.2e",
        cublasGetStatusString(s), worst);
    s = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, dA, CUDA_R_16BF, lda, dB,
                     CUDA_R_16BF, ldb, &beta, dC, CUDA_R_16F, ldc, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT);
    tap(s == CUBLAS_STATUS_NOT_SUPPORTED, "cublasGemmEx bf16 x bf16 -> fp16: %s",
        cublasGetStatusString(s));
    s = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, dA, CUDA_R_16BF, m - 1, dB,
                     CUDA_R_16BF, ldb, &beta, dC, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT);
    tap(s == CUBLAS_STATUS_INVALID_VALUE, "cublasGemmEx with lda < k for op T: %s",
        cublasGetStatusString(s));
    cudaFree(dA), cudaFree(dB), cudaFree(dC);
}

} // namespace

int main()
{
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
        printf("Bail out! cublasCreate\n");
        return 1;
    }
    test_grouped_table(h);
    test_gemmex_bf16_f32(h);
    cublasDestroy(h);
    printf("1..%d\n", g_tests);
    return g_failed ? 1 : 0;
}
