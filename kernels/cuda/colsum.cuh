// Deterministic column reductions over the rows of an [N, C] tensor, in double (as the CPU
// reference sums them): the linear layer's bias gradient, LayerNorm's dw/db, RMSNorm's dw.
//
// F supplies, for row r and column c, NSUM terms (F::terms), and writes the NSUM column sums
// into its outputs (F::finish, which does the "+=" of the gradient buffer and its rounding).
//
// Two passes, no atomics, so the result depends only on (N, C), never on timing:
//  pass 1: the rows are split into `chunks` contiguous ranges; block (bx, chunk) of 32 x 8
//          threads owns columns [32 bx, 32 bx + 32) of its range: thread (x, y) sums rows
//          y, y + 8, ... of the range for column 32 bx + x, then row y = 0 adds the 8 partial
//          sums in y order. With one chunk it finishes the column itself; else it stores the
//          partial into scratch[chunk][k][c] (double).
//  pass 2: one thread per column adds the chunks' partials in chunk order and finishes.
// The chunk count depends on N and C only (a fixed target of blocks, capped by the backend's
// scratch), so the summation order is the same on every device.
#ifndef MC_KERNELS_CUDA_COLSUM_CUH
#define MC_KERNELS_CUDA_COLSUM_CUH

#include "kernels/cuda/common.cuh"

enum { MC_COLSUM_X = 32, MC_COLSUM_Y = 8, MC_COLSUM_TARGET_BLOCKS = 1024, MC_COLSUM_MIN_ROWS = 64 };

template <int NSUM, typename F>
static __global__ void __launch_bounds__(MC_COLSUM_X *MC_COLSUM_Y)
    k_colsum_partial(F f, int N, int C, long rows_per_chunk, double *partial)
{
    __shared__ double sh[NSUM][MC_COLSUM_Y][MC_COLSUM_X];
    const int c = blockIdx.x * MC_COLSUM_X + threadIdx.x;
    const long r0 = (long)blockIdx.y * rows_per_chunk;
    const long r1 = r0 + rows_per_chunk < N ? r0 + rows_per_chunk : N;
    double s[NSUM];
#pragma unroll
    for (int k = 0; k < NSUM; k++) s[k] = 0.0;
    if (c < C)
        for (long r = r0 + threadIdx.y; r < r1; r += MC_COLSUM_Y) {
            double t[NSUM];
            f.terms(r, c, t);
#pragma unroll
            for (int k = 0; k < NSUM; k++) s[k] += t[k];
        }
#pragma unroll
    for (int k = 0; k < NSUM; k++) sh[k][threadIdx.y][threadIdx.x] = s[k];
    __syncthreads();
    if (threadIdx.y != 0 || c >= C) return;
    double tot[NSUM];
#pragma unroll
    for (int k = 0; k < NSUM; k++) {
        tot[k] = sh[k][0][threadIdx.x];
        for (int y = 1; y < MC_COLSUM_Y; y++) tot[k] += sh[k][y][threadIdx.x];
    }
    if (gridDim.y == 1) {
        f.finish(c, tot);
    } else {
#pragma unroll
        for (int k = 0; k < NSUM; k++) partial[((long)blockIdx.y * NSUM + k) * C + c] = tot[k];
    }
}

template <int NSUM, typename F>
static __global__ void k_colsum_final(F f, int C, int chunks, const double *partial)
{
    for (long c = blockIdx.x * (long)blockDim.x + threadIdx.x; c < C;
         c += (long)gridDim.x * blockDim.x) {
        double tot[NSUM];
#pragma unroll
        for (int k = 0; k < NSUM; k++) {
            tot[k] = 0.0;
            for (int ch = 0; ch < chunks; ch++) tot[k] += partial[((long)ch * NSUM + k) * C + c];
        }
        f.finish((int)c, tot);
    }
}

// Runs both passes on the backend's stream; N <= 0 or C <= 0 does nothing (the sums are zero
// and "+= 0" leaves every gradient buffer as it is).
template <int NSUM, typename F>
static void mc_cuda_colsum(const mc_backend_t *be, F f, int N, int C)
{
    if (N <= 0 || C <= 0) return;
    const mc_cuda_t *cu = mc_cuda(be);
    const long colblocks = (C + MC_COLSUM_X - 1) / MC_COLSUM_X;
    long chunks = (MC_COLSUM_TARGET_BLOCKS + colblocks - 1) / colblocks;
    const long by_rows = (N + MC_COLSUM_MIN_ROWS - 1) / MC_COLSUM_MIN_ROWS;
    const long by_scratch = (long)(cu->scratch_bytes / ((size_t)NSUM * (size_t)C * sizeof(double)));
    if (chunks > by_rows) chunks = by_rows;
    if (chunks > by_scratch) chunks = by_scratch;
    if (chunks < 1) chunks = 1; // no room for partials: one chunk finishes in pass 1
    const long rows_per_chunk = (N + chunks - 1) / chunks;
    chunks = (N + rows_per_chunk - 1) / rows_per_chunk; // no empty chunk at the end
    double *partial = (double *)cu->scratch;
    const dim3 grid((unsigned)colblocks, (unsigned)chunks), block(MC_COLSUM_X, MC_COLSUM_Y);
    MC_LAUNCH(grid, block, 0, mc_cuda_stream(be), k_colsum_partial<NSUM, F>)
    (f, N, C, rows_per_chunk, partial);
    MC_CUDA_LAUNCHED();
    if (chunks > 1) {
        MC_LAUNCH(mc_cuda_blocks(C, 256), 256, 0, mc_cuda_stream(be), k_colsum_final<NSUM, F>)
        (f, C, (int)chunks, partial);
        MC_CUDA_LAUNCHED();
    }
}

#endif
