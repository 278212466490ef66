// Whole-buffer reductions that hand one value to the host: sumsq (sum of squares in double,
// for grad and param norms), count_zeros, has_nonfinite (found-inf for the loss scaler).
// Two passes, no atomics: pass 1 runs a grid whose size depends only on n (at most
// RED_BLOCKS blocks), each block reducing its grid-stride share to one partial in the backend's
// scratch; pass 2, one block, reduces the partials in a fixed tree and leaves the result in
// scratch, which is copied to pinned host memory; the call waits for it. The same n gives the
// same summation order on every run and every device.
// sumsq_multi does the same for a list of tensors in two launches and one read: pass 1 runs
// every tensor's blocks in one grid (block b finds its tensor in a table of first blocks), each
// tensor's blocks exactly as sumsq would launch them; pass 2 runs one block per tensor over its
// partials; the per-tensor sums come back together. Each sum is the value sumsq gives.
#include <string.h>

#include "kernels/cuda/common.cuh"

enum { RED_THREADS = 256, RED_BLOCKS = 1024, RED_FINAL_THREADS = 1024 };

// Per-element terms of each reduction: R is the accumulator type.
struct red_sumsq {
    typedef double R;
    typedef mc_op_sum Op;
    static __device__ R identity() { return 0.0; }
    static __device__ R term(float v) { return (double)v * (double)v; }
};
struct red_zeros {
    typedef unsigned long long R;
    typedef mc_op_sum Op;
    static __device__ R identity() { return 0ull; }
    static __device__ R term(float v)
    {
        return v == 0.0f ? 1ull : 0ull;
    } // -0 too; no FTZ in this build
};
struct red_nonfinite {
    typedef unsigned R;
    typedef mc_op_or Op;
    static __device__ R identity() { return 0u; }
    static __device__ R term(float v)
    {
        return isfinite(v) ? 0u : 1u;
    } // a 16-bit inf/nan stays one in fp32
};

template <typename Red, typename T, int VEC>
static __global__ void __launch_bounds__(RED_THREADS)
    k_reduce_partial(typename Red::R *partial, const T *x, long n)
{
    typename Red::R acc = Red::identity();
    const typename Red::Op op{};
    const long chunks = (n + VEC - 1) / VEC;
    for (long c = blockIdx.x * (long)blockDim.x + threadIdx.x; c < chunks;
         c += (long)gridDim.x * blockDim.x) {
        float v[VEC];
        mc_load_vec<T, VEC>(v, x, c * VEC, n);
#pragma unroll
        for (int k = 0; k < VEC; k++)
            if (c * VEC + k < n) acc = op(acc, Red::term(v[k]));
    }
    acc = mc_block_reduce(acc, op, Red::identity());
    if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

template <typename Red>
static __global__ void __launch_bounds__(RED_FINAL_THREADS)
    k_reduce_final(typename Red::R *result, const typename Red::R *partial, int parts)
{
    const typename Red::Op op{};
    typename Red::R acc = (int)threadIdx.x < parts ? partial[threadIdx.x] : Red::identity();
    acc = mc_block_reduce(acc, op, Red::identity());
    if (threadIdx.x == 0) *result = acc;
}

// ---- many tensors: one entry per tensor, its blocks [first, first + blocks) of pass 1; its
// elements at base + off bytes (offsets, not pointers: the table in device memory has the same
// bytes in every run when the tensors share one buffer, as a model's gradients do) ----
typedef struct {
    long off;
    long n;
    long first;
    int blocks, vec;
} red_tensor_t;

// Block `local` of `blocks` over x's chunks, as k_reduce_partial's block of a grid of `blocks`.
template <typename Red, typename T, int VEC>
static __device__ typename Red::R reduce_share(const T *x, long n, long local, int blocks)
{
    typename Red::R acc = Red::identity();
    const typename Red::Op op{};
    const long chunks = (n + VEC - 1) / VEC;
    for (long c = local * (long)blockDim.x + threadIdx.x; c < chunks;
         c += (long)blocks * blockDim.x) {
        float v[VEC];
        mc_load_vec<T, VEC>(v, x, c * VEC, n);
#pragma unroll
        for (int k = 0; k < VEC; k++)
            if (c * VEC + k < n) acc = op(acc, Red::term(v[k]));
    }
    return acc;
}

template <typename Red, typename T>
static __global__ void __launch_bounds__(RED_THREADS)
    k_reduce_multi_partial(typename Red::R *partial, const char *base, const red_tensor_t *ts,
                           int count)
{
    int lo = 0, hi = count - 1; // the last tensor whose first block is <= this block
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (ts[mid].first <= (long)blockIdx.x) lo = mid;
        else hi = mid - 1;
    }
    const red_tensor_t t = ts[lo];
    const long local = (long)blockIdx.x - t.first;
    constexpr int VEC = 16 / sizeof(T);
    const T *x = (const T *)(base + t.off);
    typename Red::R acc = t.vec ? reduce_share<Red, T, VEC>(x, t.n, local, t.blocks)
                                : reduce_share<Red, T, 1>(x, t.n, local, t.blocks);
    acc = mc_block_reduce(acc, typename Red::Op{}, Red::identity());
    if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

template <typename Red>
static __global__ void __launch_bounds__(RED_FINAL_THREADS)
    k_reduce_multi_final(typename Red::R *result, const typename Red::R *partial,
                         const red_tensor_t *ts)
{
    const red_tensor_t t = ts[blockIdx.x];
    const typename Red::Op op{};
    typename Red::R acc =
        (int)threadIdx.x < t.blocks ? partial[t.first + threadIdx.x] : Red::identity();
    acc = mc_block_reduce(acc, op, Red::identity());
    if (threadIdx.x == 0) result[blockIdx.x] = acc;
}

// Pass 1's block count for n elements at x: what both the one-tensor and the many-tensor
// reductions launch, so they sum in the same order.
template <typename T> static long reduce_blocks(const T *x, long n)
{
    constexpr int VEC = 16 / sizeof(T);
    const long chunks = mc_cuda_vec_ok(x) ? (n + VEC - 1) / VEC : n;
    long blocks = (chunks + RED_THREADS - 1) / RED_THREADS;
    return blocks > (long)RED_BLOCKS ? (long)RED_BLOCKS : blocks < 1 ? 1 : blocks;
}

template <typename Red, typename T>
static typename Red::R reduce_run(const mc_backend_t *be, const T *x, long n)
{
    typedef typename Red::R R;
    const mc_cuda_t *cu = mc_cuda(be);
    const cudaStream_t st = mc_cuda_stream(be);
    R *partial = (R *)cu->scratch, *result = partial + RED_BLOCKS;
    constexpr int VEC = 16 / sizeof(T);
    const bool vec = mc_cuda_vec_ok(x);
    const long blocks = reduce_blocks(x, n);
    if (vec) {
        MC_LAUNCH((unsigned)blocks, RED_THREADS, 0, st, k_reduce_partial<Red, T, VEC>)
        (partial, x, n);
    } else {
        MC_LAUNCH((unsigned)blocks, RED_THREADS, 0, st, k_reduce_partial<Red, T, 1>)(partial, x, n);
    }
    MC_CUDA_LAUNCHED();
    MC_LAUNCH(1, RED_FINAL_THREADS, 0, st, k_reduce_final<Red>)(result, partial, (int)blocks);
    MC_CUDA_LAUNCHED();
    MC_CUDA_CHECK(cudaMemcpyAsync(cu->host_scratch, result, sizeof(R), cudaMemcpyDeviceToHost, st));
    MC_CUDA_CHECK(cudaStreamSynchronize(st));
    R r;
    memcpy(&r, cu->host_scratch, sizeof(R));
    return r;
}

double mc_cuda_sumsq(const mc_backend_t *be, mc_dtype_t dt, const void *x, long n)
{
    if (n <= 0) return 0.0;
    double r = 0.0;
    MC_CUDA_DISPATCH(dt, T, "sumsq", r = reduce_run<red_sumsq, T>(be, (const T *)x, n))
    return r;
}

long mc_cuda_count_zeros(const mc_backend_t *be, mc_dtype_t dt, const void *x, long n)
{
    if (n <= 0) return 0;
    long r = 0;
    MC_CUDA_DISPATCH(dt, T, "count_zeros", r = (long)reduce_run<red_zeros, T>(be, (const T *)x, n))
    return r;
}

int mc_cuda_has_nonfinite(const mc_backend_t *be, mc_dtype_t dt, const void *x, long n)
{
    if (n <= 0) return 0;
    int r = 0;
    MC_CUDA_DISPATCH(dt, T, "has_nonfinite",
                     r = reduce_run<red_nonfinite, T>(be, (const T *)x, n) != 0)
    return r;
}

// One batch of sumsq_multi (tensors that fit the scratch): the table to the device, the two
// passes, the sums back.
template <typename T>
static void sumsq_batch(const mc_backend_t *be, const void *const *x, const long *n, int count,
                        long blocks, double *out)
{
    const mc_cuda_t *cu = mc_cuda(be);
    const cudaStream_t st = mc_cuda_stream(be);
    red_tensor_t *host = (red_tensor_t *)cu->host_scratch;
    const char *base = (const char *)x[0];
    for (int i = 1; i < count; i++)
        if ((const char *)x[i] < base) base = (const char *)x[i];
    long first = 0;
    for (int i = 0; i < count; i++) {
        const int b = (int)reduce_blocks((const T *)x[i], n[i]);
        host[i] = {(long)((const char *)x[i] - base), n[i], first, b, mc_cuda_vec_ok(x[i]) ? 1 : 0};
        first += b;
    }
    red_tensor_t *dev = (red_tensor_t *)cu->scratch;
    double *partial = (double *)(dev + count), *result = partial + blocks;
    MC_CUDA_CHECK(
        cudaMemcpyAsync(dev, host, (size_t)count * sizeof(*host), cudaMemcpyHostToDevice, st));
    MC_LAUNCH((unsigned)blocks, RED_THREADS, 0, st, k_reduce_multi_partial<red_sumsq, T>)
    (partial, base, dev, count);
    MC_CUDA_LAUNCHED();
    MC_LAUNCH((unsigned)count, RED_FINAL_THREADS, 0, st, k_reduce_multi_final<red_sumsq>)
    (result, partial, dev);
    MC_CUDA_LAUNCHED();
    double *back = (double *)(host + count);
    MC_CUDA_CHECK(
        cudaMemcpyAsync(back, result, (size_t)count * sizeof(double), cudaMemcpyDeviceToHost, st));
    MC_CUDA_CHECK(cudaStreamSynchronize(st));
    memcpy(out, back, (size_t)count * sizeof(double));
}

// Batches as large as the host and device scratch allow (every tensor of a model in one, for the
// sizes we train: the table and the sums take 40 bytes a tensor of the pinned scratch, the
// partials at most 8 KiB a tensor of the device's); empty tensors sum to 0 without a block.
template <typename T>
static void sumsq_multi_run(const mc_backend_t *be, const void *const *x, const long *n, int count,
                            double *out)
{
    const mc_cuda_t *cu = mc_cuda(be);
    const size_t per_host = sizeof(red_tensor_t) + sizeof(double);
    int i = 0;
    while (i < count) {
        if (n[i] <= 0) {
            out[i++] = 0.0;
            continue;
        }
        int c = 0;
        long blocks = 0;
        size_t dev_bytes = 0;
        while (i + c < count && n[i + c] > 0) {
            const long b = reduce_blocks((const T *)x[i + c], n[i + c]);
            const size_t more = sizeof(red_tensor_t) + (size_t)(b + 1) * sizeof(double);
            if (c > 0 && ((size_t)(c + 1) * per_host > cu->host_scratch_bytes ||
                          dev_bytes + more > cu->scratch_bytes))
                break;
            blocks += b, dev_bytes += more, c++;
        }
        sumsq_batch<T>(be, x + i, n + i, c, blocks, out + i);
        i += c;
    }
}

void mc_cuda_sumsq_multi(const mc_backend_t *be, mc_dtype_t dt, const void *const *x, const long *n,
                         int count, double *out)
{
    if (count <= 0) return;
    MC_CUDA_DISPATCH(dt, T, "sumsq_multi", sumsq_multi_run<T>(be, x, n, count, out))
}
