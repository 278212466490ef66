// The local experts' linear layers in one cuBLAS call each (kernels/moe.h): cuBLAS's
// cublasGemmGroupedBatchedEx, one problem per expert with tokens (group_size 1 each, their own
// m), fp32 compute (CUBLAS_COMPUTE_32F: no TF32, fp32 accumulation for 16-bit operands), rather
// than a host loop of small GEMMs. The pointer arrays cuBLAS reads on the device are copied into
// the backend's scratch; sizes, alpha and beta stay on the host (pointer mode host).
//
// The grouped call's documented types are narrower than cublasGemmEx's: 16-bit A and B only with
// C of the same type (no bf16 x bf16 -> fp32), which the H200's cuBLAS confirmed with
// CUBLAS_STATUS_NOT_SUPPORTED for the weight gradient accumulated into fp32 (docs/PERF.md). Such
// a call, and any call the library refuses as NOT_SUPPORTED at run time (remembered per type
// pair, said once), runs as one cublasGemmEx per expert instead: each the expert's whole GEMM
// (not a loop of tiny ones), same compute type and one rounding of C, so the numbers are the
// grouped call's.
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

// What the grouped call's table in cuBLAS's documentation lists for CUBLAS_COMPUTE_32F without
// TF32: A, B and C all of one type.
static bool grouped_documented(mc_dtype_t ab, mc_dtype_t c) { return ab == c; }

// Type pairs the library refused at run time (NOT_SUPPORTED): not asked again.
enum { REFUSED_MAX = 8 };
static int g_refused[REFUSED_MAX][2], g_nrefused;

static bool grouped_refused(mc_dtype_t ab, mc_dtype_t c)
{
    for (int i = 0; i < g_nrefused; i++)
        if (g_refused[i][0] == (int)ab && g_refused[i][1] == (int)c) return true;
    return false;
}

static void grouped_refuse(mc_dtype_t ab, mc_dtype_t c)
{
    mc_warn("cuBLAS refuses the grouped GEMM for %s x %s -> %s (CUBLAS_STATUS_NOT_SUPPORTED): the "
            "experts' GEMMs of these types run one cublasGemmEx per expert",
            mc_dtype_name(ab), mc_dtype_name(ab), mc_dtype_name(c));
    if (g_nrefused < REFUSED_MAX)
        g_refused[g_nrefused][0] = (int)ab, g_refused[g_nrefused++][1] = (int)c;
}

// The grouped call; false, computing nothing, when cuBLAS answers NOT_SUPPORTED.
static bool grouped_call(const mc_backend_t *be, const grouped_t *g, mc_dtype_t ab, mc_dtype_t c)
{
    const mc_cuda_t *cu = mc_cuda(be);
    const size_t bytes = 3 * (size_t)g->n * sizeof(void *);
    if (bytes > cu->scratch_bytes) mc_fatal("%d experts' GEMM pointers exceed the scratch", g->n);
    void **d = (void **)cu->scratch;
    static const void *host[3 * 1024]; // (ops run on one thread)
    const void **h = g->n <= 1024 ? host : (const void **)malloc(bytes);
    if (!h) mc_fatal("out of host memory for a grouped GEMM");
    for (int i = 0; i < g->n; i++) h[i] = g->A[i], h[g->n + i] = g->B[i], h[2 * g->n + i] = g->C[i];
    MC_CUDA_CHECK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, mc_cuda_stream(be)));
    if (h != host) free(h);
    cublasStatus_t s = cublasGemmGroupedBatchedEx(
        handle(be), g->ta, g->tb, g->m, g->nn, g->k, g->alpha, (const void *const *)d,
        cuda_type(ab), g->lda, (const void *const *)(d + g->n), cuda_type(ab), g->ldb, g->beta,
        d + 2 * g->n, cuda_type(c), g->ldc, g->n, g->size, CUBLAS_COMPUTE_32F);
    if (s == CUBLAS_STATUS_NOT_SUPPORTED) return false;
    if (s != CUBLAS_STATUS_SUCCESS)
        mc_fatal("cublasGemmGroupedBatchedEx of %d experts failed: %s", g->n,
                 cublasGetStatusString(s));
    return true;
}

// The same problems, one cublasGemmEx each (its table has 16-bit A/B with an fp32 C).
static void per_expert_calls(const mc_backend_t *be, const grouped_t *g, mc_dtype_t ab,
                             mc_dtype_t c)
{
    for (int i = 0; i < g->n; i++) {
        cublasStatus_t s = cublasGemmEx(
            handle(be), g->ta[i], g->tb[i], g->m[i], g->nn[i], g->k[i], &g->alpha[i], g->A[i],
            cuda_type(ab), g->lda[i], g->B[i], cuda_type(ab), g->ldb[i], &g->beta[i], g->C[i],
            cuda_type(c), g->ldc[i], CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (s != CUBLAS_STATUS_SUCCESS)
            mc_fatal("cublasGemmEx of expert problem %d of %d (%s x %s -> %s) failed: %s", i, g->n,
                     mc_dtype_name(ab), mc_dtype_name(ab), mc_dtype_name(c),
                     cublasGetStatusString(s));
    }
}

// The problems of g: A and B of type ab, C of type c; the grouped call where cuBLAS takes it.
static void grouped_run(const mc_backend_t *be, grouped_t *g, mc_dtype_t ab, mc_dtype_t c)
{
    if (g->n > 0) {
        bool done = false;
        if (grouped_documented(ab, c) && !grouped_refused(ab, c)) {
            done = grouped_call(be, g, ab, c);
            if (!done) grouped_refuse(ab, c);
        }
        if (!done) per_expert_calls(be, g, ab, c);
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
