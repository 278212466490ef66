// The local experts' linear layers in one cuBLAS call each (kernels/moe.h): cuBLAS's
// cublasGemmGroupedBatchedEx, one problem per expert with tokens (group_size 1 each, their own
// m), fp32 compute (CUBLAS_COMPUTE_32F: no TF32, fp32 accumulation for 16-bit operands), rather
// than a host loop of small GEMMs. The pointer arrays cuBLAS reads on the device are copied into
// the backend's scratch; sizes, alpha and beta stay on the host (pointer mode host).
//
// Row-major to cuBLAS's column-major (a row-major [r, c] matrix is a column-major [c, r] one):
//   forward  out_g [m, N] = in_g [m, K] W_g^T     ->  C [N, m] = W_g^T [N, K] (op T of K x N)
//                                                      x in_g^T [K, m]
//   din_g [m, K] = dout_g [m, N] W_g [N, K]       ->  C [K, m] = W_g [K, N] x dout_g^T [N, m]
//   dW_g [N, K] += dout_g^T [N, m] in_g [m, K]    ->  C [K, N] += in_g^T [K, m] x (op T of
//                                                      dout_g^T, N x m) [m, N]
#include <cublas_v2.h>
#include <stdlib.h>
#include "kernels/cuda/cuda.h"
extern "C" {
#include "base/error.h"
#include "kernels/moe.h"
}

// The cuBLAS handle: made on first use (one backend per process, ops on one thread).
static cublasHandle_t handle(const mc_backend_t *be)
{
    static cublasHandle_t h;
    if (!h) {
        cublasStatus_t s = cublasCreate(&h);
        if (s != CUBLAS_STATUS_SUCCESS)
            mc_fatal("cannot start cuBLAS for the MoE grouped GEMM: %s", cublasGetStatusString(s));
    }
    cublasStatus_t s = cublasSetStream(h, mc_cuda_stream(be));
    if (s != CUBLAS_STATUS_SUCCESS) mc_fatal("cublasSetStream: %s", cublasGetStatusString(s));
    return h;
}

static cudaDataType_t cuda_type(mc_dtype_t dt)
{
    switch (dt) {
    case MC_DT_F32: return CUDA_R_32F;
    case MC_DT_BF16: return CUDA_R_16BF;
    case MC_DT_F16: return CUDA_R_16F;
    default: mc_cuda_bad_dtype("moe grouped linear", dt);
    }
}

// One grouped call: the problems of the experts with rows (others have nothing to compute).
typedef struct {
    int n; // problems
    cublasOperation_t *ta, *tb;
    int *m, *nn, *k, *lda, *ldb, *ldc;
    float *alpha, *beta;
    int *size;
    const void **A, **B;
    void **C;
} grouped_t;

static grouped_t grouped_new(int G)
{
    grouped_t g;
    g.n = 0;
    g.ta = (cublasOperation_t *)malloc(2 * (size_t)G * sizeof(cublasOperation_t));
    g.m = (int *)malloc(7 * (size_t)G * sizeof(int));
    g.alpha = (float *)malloc(2 * (size_t)G * sizeof(float));
    g.A = (const void **)malloc(3 * (size_t)G * sizeof(void *));
    if (!g.ta || !g.m || !g.alpha || !g.A) mc_fatal("out of host memory for a grouped GEMM");
    g.tb = g.ta + G, g.nn = g.m + G, g.k = g.m + 2 * G, g.lda = g.m + 3 * G, g.ldb = g.m + 4 * G;
    g.ldc = g.m + 5 * G, g.size = g.m + 6 * G, g.beta = g.alpha + G;
    g.B = g.A + G, g.C = (void **)(g.A + 2 * G);
    return g;
}

static void grouped_add(grouped_t *g, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                        int k, const void *A, int lda, const void *B, int ldb, void *C, int ldc,
                        float beta)
{
    const int i = g->n++;
    g->ta[i] = ta, g->tb[i] = tb, g->m[i] = m, g->nn[i] = n, g->k[i] = k;
    g->A[i] = A, g->lda[i] = lda, g->B[i] = B, g->ldb[i] = ldb, g->C[i] = C, g->ldc[i] = ldc;
    g->alpha[i] = 1.0f, g->beta[i] = beta, g->size[i] = 1;
}

// The call: A and B of type ab, C of type c; the pointer arrays go to the device first.
static void grouped_run(const mc_backend_t *be, grouped_t *g, mc_dtype_t ab, mc_dtype_t c)
{
    if (g->n > 0) {
        const mc_cuda_t *cu = mc_cuda(be);
        const size_t bytes = 3 * (size_t)g->n * sizeof(void *);
        if (bytes > cu->scratch_bytes)
            mc_fatal("%d experts' GEMM pointers exceed the scratch", g->n);
        void **d = (void **)cu->scratch;
        const void *host[3 * 1024], **h = g->n <= 1024 ? host : (const void **)malloc(bytes);
        if (!h) mc_fatal("out of host memory for a grouped GEMM");
        for (int i = 0; i < g->n; i++)
            h[i] = g->A[i], h[g->n + i] = g->B[i], h[2 * g->n + i] = g->C[i];
        MC_CUDA_CHECK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, mc_cuda_stream(be)));
        if (h != host) free(h);
        cublasStatus_t s = cublasGemmGroupedBatchedEx(
            handle(be), g->ta, g->tb, g->m, g->nn, g->k, g->alpha, (const void *const *)d,
            cuda_type(ab), g->lda, (const void *const *)(d + g->n), cuda_type(ab), g->ldb, g->beta,
            d + 2 * g->n, cuda_type(c), g->ldc, g->n, g->size, CUBLAS_COMPUTE_32F);
        if (s != CUBLAS_STATUS_SUCCESS)
            mc_fatal("cublasGemmGroupedBatchedEx of %d experts failed: %s", g->n,
                     cublasGetStatusString(s));
    }
    free(g->ta), free(g->m), free(g->alpha), free(g->A);
}

void mc_cuda_moe_grouped_linear_forward(const mc_backend_t *be, mc_dtype_t dt, void *out,
                                        const void *in, const void *const *W, const long *m, int G,
                                        int K, int N)
{
    const size_t es = mc_dtype_size(dt);
    grouped_t g = grouped_new(G);
    long row = 0;
    for (int e = 0; e < G; row += m[e], e++)
        if (m[e] > 0 && N > 0)
            grouped_add(&g, CUBLAS_OP_T, CUBLAS_OP_N, N, (int)m[e], K, W[e], K,
                        (const char *)in + (size_t)row * K * es, K,
                        (char *)out + (size_t)row * N * es, N, 0.0f);
    grouped_run(be, &g, dt, dt);
}

void mc_cuda_moe_grouped_linear_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt,
                                         void *din, void *const *dW, const void *dout,
                                         const void *in, const void *const *W, const long *m, int G,
                                         int K, int N)
{
    const size_t es = mc_dtype_size(dt);
    long row = 0;
    if (din) {
        grouped_t g = grouped_new(G);
        for (int e = 0; e < G; row += m[e], e++)
            if (m[e] > 0 && K > 0)
                grouped_add(&g, CUBLAS_OP_N, CUBLAS_OP_N, K, (int)m[e], N, W[e], K,
                            (const char *)dout + (size_t)row * N * es, N,
                            (char *)din + (size_t)row * K * es, K, 0.0f);
        grouped_run(be, &g, dt, dt);
    }
    grouped_t g = grouped_new(G);
    row = 0;
    for (int e = 0; e < G; row += m[e], e++)
        if (m[e] > 0 && K > 0 && N > 0)
            grouped_add(&g, CUBLAS_OP_N, CUBLAS_OP_T, K, N, (int)m[e],
                        (const char *)in + (size_t)row * K * es, K,
                        (const char *)dout + (size_t)row * N * es, N, dW[e], K, 1.0f);
    grouped_run(be, &g, dt, gdt);
}
