/* The op table's row-major GEMMs in cuBLAS's column-major terms. Plain C (no CUDA), so the unit
 * test test/unit/kernels/test_cuda_gemm_map.c checks every mapping on the CPU against OpenBLAS with a
 * column-major reference GEMM that follows cuBLAS's definition.
 *
 * The one fact used: a row-major matrix X[r, c] with leading dimension ld is, read column-major
 * with the same ld, the matrix X^T (c rows, r columns). So the row-major product
 *     C[M, N] = op(A) op(B)
 * is, column-major, C^T[N, M] = op(B)^T op(A)^T: cuBLAS's first operand is our B, its second
 * our A, and m = N, n = M, k = K. Operand by operand:
 *  - our B not transposed: stored [K, N] row-major = column-major N x K, which is op(B)^T as it
 *    stands: cuBLAS op N on an N x K matrix, ld = ldb.
 *  - our B transposed: stored S = [N, K] row-major, op(B) = S^T, so op(B)^T = S; cuBLAS sees
 *    S^T (column-major K x N) and must transpose it back: op T on a K x N matrix, ld = ldb.
 *  - our A not transposed: stored [M, K] row-major = column-major K x M = op(A)^T: op N on a
 *    K x M matrix, ld = lda.
 *  - our A transposed: stored S = [K, M] row-major, op(A)^T = S; cuBLAS sees S^T (column-major
 *    M x K): op T on an M x K matrix, ld = lda.
 *  - C: stored [M, N] row-major = column-major N x M, ld = ldc.
 * In short: opa' = transb, opb' = transa, and each stored matrix is described column-major as
 * (its row-major columns) x (its row-major rows). */
#ifndef MC_KERNELS_CUDA_GEMM_MAP_H
#define MC_KERNELS_CUDA_GEMM_MAP_H

/* A row-major GEMM as the op table states it: C[M,N] = op(A) op(B), A [M,K] (or [K,M] if
 * transa), B [K,N] (or [N,K] if transb). */
typedef struct {
    int transa, transb, M, N, K, lda, ldb, ldc;
} mc_rowmajor_gemm_t;

/* The same product as cuBLAS computes it, column-major: D[m,n] = op(A') op(B'), where A' is the
 * row-major B and B' the row-major A (swap the pointers). Each stored matrix is a_rows x a_cols
 * (b_rows x b_cols; d is m x n) column-major with its leading dimension; cuBLASLt's matrix
 * layouts take exactly these rows/cols/ld. */
typedef struct {
    int opa, opb, m, n, k;
    int a_rows, a_cols, lda;
    int b_rows, b_cols, ldb;
    int ldd;
} mc_colmajor_gemm_t;

static inline mc_colmajor_gemm_t mc_gemm_to_colmajor(mc_rowmajor_gemm_t r)
{
    mc_colmajor_gemm_t c;
    c.opa = r.transb;
    c.opb = r.transa;
    c.m = r.N;
    c.n = r.M;
    c.k = r.K;
    /* A' = our B: stored [K,N] (or [N,K]) row-major -> column-major N x K (or K x N) */
    c.a_rows = r.transb ? r.K : r.N;
    c.a_cols = r.transb ? r.N : r.K;
    c.lda = r.ldb;
    /* B' = our A: stored [M,K] (or [K,M]) row-major -> column-major K x M (or M x K) */
    c.b_rows = r.transa ? r.M : r.K;
    c.b_cols = r.transa ? r.K : r.M;
    c.ldb = r.lda;
    c.ldd = r.ldc; /* C [M,N] row-major -> column-major N x M */
    return c;
}

/* The linear layer's three products (torch Linear, W stored [out, in] row-major), as row-major
 * GEMMs with the operands in this order: */
/* forward: out[N, out] = in[N, in] @ W^T        (A = in, B = W; the bias, one value per output
 * feature, is per row of the column-major D, which is what cuBLASLt's bias epilogue adds) */
static inline mc_rowmajor_gemm_t mc_linear_forward_gemm(int N, int in_f, int out_f)
{
    mc_rowmajor_gemm_t g = {0, 1, N, out_f, in_f, in_f, in_f, out_f};
    return g;
}
/* data gradient: din[N, in] = dout[N, out] @ W[out, in]   (A = dout, B = W) */
static inline mc_rowmajor_gemm_t mc_linear_dgrad_gemm(int N, int in_f, int out_f)
{
    mc_rowmajor_gemm_t g = {0, 0, N, in_f, out_f, out_f, in_f, in_f};
    return g;
}
/* weight gradient: dW[out, in] (+)= dout^T @ in, dout stored [N, out], in [N, in]
 * (A = dout transposed, B = in) */
static inline mc_rowmajor_gemm_t mc_linear_wgrad_gemm(int N, int in_f, int out_f)
{
    mc_rowmajor_gemm_t g = {1, 0, out_f, in_f, N, out_f, in_f, in_f};
    return g;
}

#endif
