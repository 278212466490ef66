// The MoE token permutation on the GPU (kernels/moe.h; kernels/cpu/moe_permute.c is the
// reference): the permuted order from a block scan per expert column, row gathers and copies,
// and the probability-weighted unpermute and its backward, each output element computed as the
// CPU computes it (a token's experts in ascending order; dot products in double and rounded as
// the CPU's are, a block's tree order instead of the CPU's sequence: the test's bound).
#include "kernels/cuda/cuda.h"
extern "C" {
#include "base/error.h"
#include "kernels/moe.h"
}

enum { PERM_THREADS = 256 };

// Inclusive block scan of v over PERM_THREADS threads (every thread calls it).
__device__ static int block_scan(int v, int *smem)
{
    smem[threadIdx.x] = v;
    __syncthreads();
    for (int off = 1; off < PERM_THREADS; off *= 2) {
        const int a = (int)threadIdx.x >= off ? smem[threadIdx.x - off] : 0;
        __syncthreads();
        smem[threadIdx.x] += a;
        __syncthreads();
    }
    const int r = smem[threadIdx.x];
    __syncthreads();
    return r;
}

// One block per expert: its routed tokens, in token order, after the earlier experts' (offsets
// from counts, summed by thread 0).
static __global__ void k_permute_map(mc_dtype_t rdt, int32_t *rows, int32_t *row_of, void *pprobs,
                                     const void *probs, const uint8_t *map, const int32_t *counts,
                                     long T, int E)
{
    const int e = blockIdx.x;
    __shared__ int scan[PERM_THREADS];
    __shared__ long at;
    if (threadIdx.x == 0) {
        at = 0;
        for (int q = 0; q < e; q++) at += counts[q];
    }
    __syncthreads();
    for (long base = 0; base < T; base += PERM_THREADS) {
        const long t = base + threadIdx.x;
        const int on = t < T && map[t * E + e];
        const int incl = block_scan(on, scan);
        if (t < T) {
            const long i = at + incl - 1;
            row_of[t * E + e] = on ? (int32_t)i : -1;
            if (on) rows[i] = (int32_t)t;
            if (on && pprobs) mc_moe_store(rdt, pprobs, i, mc_moe_load(rdt, probs, t * E + e));
        }
        if (threadIdx.x == PERM_THREADS - 1) at += incl;
        __syncthreads();
    }
}

void mc_cuda_moe_permute_map(const mc_backend_t *be, mc_dtype_t rdt, int32_t *rows, int32_t *row_of,
                             void *pprobs, const void *probs, const uint8_t *map, long T, int E,
                             long N)
{
    (void)N; // the ones of map, as the caller counted them (tokens_per_expert)
    if (E == 0) return;
    int32_t *counts = (int32_t *)mc_cuda(be)->scratch;
    mc_cuda_moe_tokens_per_expert(be, counts, map, T, E);
    MC_LAUNCH(E, PERM_THREADS, 0, mc_cuda_stream(be), k_permute_map)
    (rdt, rows, row_of, pprobs, probs, map, counts, T, E);
    MC_CUDA_LAUNCHED();
}

// ---- row copies, by element size ----

template <typename T>
static __global__ void k_gather_rows(T *out, const T *in, const int32_t *rows, long N, int H)
{
    const long n = N * H;
    for (long j = blockIdx.x * (long)blockDim.x + threadIdx.x; j < n;
         j += (long)gridDim.x * blockDim.x)
        out[j] = in[(long)rows[j / H] * H + j % H];
}

void mc_cuda_moe_permute(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *in,
                         const int32_t *rows, long N, int H)
{
    if (N == 0 || H == 0) return;
    const unsigned blocks = mc_cuda_blocks(N * H, PERM_THREADS);
    const cudaStream_t s = mc_cuda_stream(be);
    switch (mc_dtype_size(dt)) {
    case 2:
        MC_LAUNCH(blocks, PERM_THREADS, 0, s, k_gather_rows<uint16_t>)
        ((uint16_t *)out, (const uint16_t *)in, rows, N, H);
        break;
    case 4:
        MC_LAUNCH(blocks, PERM_THREADS, 0, s, k_gather_rows<uint32_t>)
        ((uint32_t *)out, (const uint32_t *)in, rows, N, H);
        break;
    default: mc_cuda_bad_dtype("moe permute", dt);
    }
    MC_CUDA_LAUNCHED();
}

// One block per token: its rows (row_of, experts ascending) gathered by thread 0, then the
// hidden elements by the threads.
static __global__ void k_unpermute(mc_dtype_t dt, mc_dtype_t pdt, void *out, const void *x,
                                   const int32_t *row_of, const void *pprobs, int E, int H)
{
    const long t = blockIdx.x;
    __shared__ int32_t list[MC_MOE_MAX_EXPERTS];
    __shared__ int n;
    if (threadIdx.x == 0) {
        n = 0;
        for (int e = 0; e < E; e++)
            if (row_of[t * E + e] >= 0) list[n++] = row_of[t * E + e];
    }
    __syncthreads();
    const bool wide = pprobs && pdt == MC_DT_F64;
    for (int h = threadIdx.x; h < H; h += blockDim.x) {
        double acc = 0;
        for (int q = 0; q < n; q++) {
            double v = mc_moe_load(dt, x, (long)list[q] * H + h);
            if (pprobs) {
                v *= mc_moe_load(pdt, pprobs, list[q]);
                v = wide ? v : (float)v;
            }
            acc = wide ? acc + v : (float)(acc + v);
        }
        mc_moe_store(dt, out, t * H + h, acc);
    }
}

void mc_cuda_moe_unpermute(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t pdt, void *out,
                           const void *x, const int32_t *row_of, const void *pprobs, long T, int E,
                           int H)
{
    if (T == 0 || H == 0) return;
    MC_LAUNCH((unsigned)T, PERM_THREADS, 0, mc_cuda_stream(be), k_unpermute)
    (dt, pdt, out, x, row_of, pprobs, E, H);
    MC_CUDA_LAUNCHED();
}

// dx = g * p (rounded to dt) over a row; dp = the row's dot(g, x) in pdt's precision (block tree
// in double, rounded once). One block per row.
__device__ static void row_scaled_grad(mc_dtype_t dt, mc_dtype_t pdt, void *dx, void *dp,
                                       const void *g_row, long g_off, const void *x, long i, int H,
                                       const void *p)
{
    __shared__ double part[PERM_THREADS];
    const double pi = p ? mc_moe_load(pdt, p, i) : 1.0;
    const bool wide = pdt == MC_DT_F64;
    double dot = 0;
    for (int h = threadIdx.x; h < H; h += blockDim.x) {
        const double g = mc_moe_load(dt, g_row, g_off + h);
        if (p && dp) dot += g * mc_moe_load(dt, x, i * H + h);
        mc_moe_store(dt, dx, i * H + h, p ? (wide ? g * pi : (float)(g * pi)) : g);
    }
    part[threadIdx.x] = dot;
    __syncthreads();
    for (int s = PERM_THREADS / 2; s > 0; s /= 2) {
        if ((int)threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0 && p && dp) mc_moe_store(pdt, dp, i, wide ? part[0] : (float)part[0]);
}

static __global__ void k_unpermute_backward(mc_dtype_t dt, mc_dtype_t pdt, void *dx, void *dpp,
                                            const void *dout, const void *x, const int32_t *rows,
                                            const void *pprobs, int H)
{
    const long i = blockIdx.x;
    row_scaled_grad(dt, pdt, dx, dpp, dout, (long)rows[i] * H, x, i, H, pprobs);
}

void mc_cuda_moe_unpermute_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t pdt, void *dx,
                                    void *dpprobs, const void *dout, const void *x,
                                    const int32_t *rows, const void *pprobs, long N, int H)
{
    if (N == 0) return;
    MC_LAUNCH((unsigned)N, PERM_THREADS, 0, mc_cuda_stream(be), k_unpermute_backward)
    (dt, pdt, dx, dpprobs, dout, x, rows, pprobs, H);
    MC_CUDA_LAUNCHED();
}

// ---- the probs inside the experts ----

static __global__ void k_scale_rows(mc_dtype_t dt, mc_dtype_t pdt, void *out, const void *x,
                                    const void *p, long N, int H)
{
    const bool wide = pdt == MC_DT_F64;
    for (long j = blockIdx.x * (long)blockDim.x + threadIdx.x; j < N * H;
         j += (long)gridDim.x * blockDim.x) {
        const double v = mc_moe_load(dt, x, j) * mc_moe_load(pdt, p, j / H);
        mc_moe_store(dt, out, j, wide ? v : (float)v);
    }
}

void mc_cuda_moe_scale_rows(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t pdt, void *out,
                            const void *x, const void *p, long N, int H)
{
    if (N == 0 || H == 0) return;
    MC_LAUNCH(mc_cuda_blocks(N * H, PERM_THREADS), PERM_THREADS, 0, mc_cuda_stream(be),
              k_scale_rows)
    (dt, pdt, out, x, p, N, H);
    MC_CUDA_LAUNCHED();
}

static __global__ void k_scale_rows_backward(mc_dtype_t dt, mc_dtype_t pdt, void *dx, void *dp,
                                             const void *dout, const void *x, const void *p, int H)
{
    const long i = blockIdx.x;
    row_scaled_grad(dt, pdt, dx, dp, dout, i * H, x, i, H, p);
}

void mc_cuda_moe_scale_rows_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t pdt,
                                     void *dx, void *dp, const void *dout, const void *x,
                                     const void *p, long N, int H)
{
    if (N == 0) return;
    MC_LAUNCH((unsigned)N, PERM_THREADS, 0, mc_cuda_stream(be), k_scale_rows_backward)
    (dt, pdt, dx, dp, dout, x, p, H);
    MC_CUDA_LAUNCHED();
}

// ---- sort_chunks_by_idxs: one kernel over the output rows, the chunk table in the scratch ----

// table: for each output chunk c, [dst_start, src_start] (rows); n + 1 dst starts.
static __global__ void k_sort_chunks(char *out, const char *in, const long *table, int n, long rows,
                                     size_t row_bytes)
{
    for (long r = blockIdx.x * (long)blockDim.x + threadIdx.x; r < rows;
         r += (long)gridDim.x * blockDim.x) {
        int lo = 0, hi = n - 1; // the last chunk starting at or before r
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (table[2 * mid] <= r) lo = mid;
            else hi = mid - 1;
        }
        const long src = table[2 * lo + 1] + (r - table[2 * lo]);
        for (size_t b = 0; b < row_bytes; b++) out[r * row_bytes + b] = in[src * row_bytes + b];
    }
}

void mc_cuda_moe_sort_chunks(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *in,
                             const long *sizes, const int *order, int n, int H)
{
    if (n == 0) return;
    long *table = (long *)malloc(2 * (size_t)n * sizeof(long)), *start = table;
    long rows = 0;
    if (!table) mc_fatal("out of host memory sorting MoE chunks");
    long *src = (long *)malloc((size_t)n * sizeof(long));
    if (!src) mc_fatal("out of host memory sorting MoE chunks");
    for (int c = 0, at = 0; c < n; at += (int)sizes[c], c++) src[c] = at;
    for (int c = 0; c < n; rows += sizes[order[c]], c++)
        start[2 * c] = rows, start[2 * c + 1] = src[order[c]];
    const mc_cuda_t *cu = mc_cuda(be);
    if (2 * (size_t)n * sizeof(long) > cu->scratch_bytes)
        mc_fatal("%d MoE chunks do not fit the CUDA backend's scratch", n);
    MC_CUDA_CHECK(cudaMemcpyAsync(cu->scratch, table, 2 * (size_t)n * sizeof(long),
                                  cudaMemcpyHostToDevice, mc_cuda_stream(be)));
    free(table);
    free(src);
    if (rows > 0 && H > 0)
        MC_LAUNCH(mc_cuda_blocks(rows, PERM_THREADS), PERM_THREADS, 0, mc_cuda_stream(be),
                  k_sort_chunks)
    ((char *)out, (const char *)in, (const long *)cu->scratch, n, rows,
     mc_dtype_size(dt) * (size_t)H);
    MC_CUDA_LAUNCHED();
}
