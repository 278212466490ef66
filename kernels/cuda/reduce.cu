// Whole-buffer reductions that hand one value to the host: sumsq (sum of squares in double,
// for grad and param norms), count_zeros, has_nonfinite (found-inf for the loss scaler).
// Two passes, no atomics: pass 1 runs a grid whose size depends only on n (at most
// RED_BLOCKS blocks), each block reducing its grid-stride share to one partial in the backend's
// scratch; pass 2, one block, reduces the partials in a fixed tree and leaves the result in
// scratch, which is copied to pinned host memory; the call waits for it. The same n gives the
// same summation order on every run and every device.
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

template <typename Red, typename T>
static typename Red::R reduce_run(const mc_backend_t *be, const T *x, long n)
{
    typedef typename Red::R R;
    const mc_cuda_t *cu = mc_cuda(be);
    const cudaStream_t st = mc_cuda_stream(be);
    R *partial = (R *)cu->scratch, *result = partial + RED_BLOCKS;
    constexpr int VEC = 16 / sizeof(T);
    const bool vec = mc_cuda_vec_ok(x);
    const long chunks = vec ? (n + VEC - 1) / VEC : n;
    long blocks = (chunks + RED_THREADS - 1) / RED_THREADS;
    if (blocks > RED_BLOCKS) blocks = RED_BLOCKS;
    if (blocks < 1) blocks = 1;
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
