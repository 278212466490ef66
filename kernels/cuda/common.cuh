// Device helpers shared by the op kernels (CUDA C++): element types through fp32, 16-byte
// vector loads and stores, warp and block reductions, and the dispatch on mc_dtype_t.
//
// Precision (backend.h): every kernel loads its 16-bit operands as fp32, computes in fp32 (or
// double where the CPU reference does), and rounds each 16-bit output once, to nearest even
// (__float2bfloat16_rn / __float2half_rn, as kernels/dtype.h does on the host).
#ifndef MC_KERNELS_CUDA_COMMON_CUH
#define MC_KERNELS_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "kernels/cuda/cuda.h"

// ---- element types ----
__device__ __forceinline__ float mc_to_f32(float x) { return x; }
__device__ __forceinline__ float mc_to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float mc_to_f32(__half x) { return __half2float(x); }

template <typename T> __device__ __forceinline__ T mc_from_f32(float x);
template <> __device__ __forceinline__ float mc_from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 mc_from_f32<__nv_bfloat16>(float x)
{
    return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ __half mc_from_f32<__half>(float x)
{
    return __float2half_rn(x);
}

// ---- VEC consecutive elements as one access ----
// VEC = 16 / sizeof(T) gives 16-byte loads and stores (the pointer must be 16-byte aligned:
// mc_cuda_vec_ok); VEC = 1 is the plain path. Elements at or past n are not touched (loads give
// 0 there), so a tail shorter than VEC goes element by element.
template <typename T, int VEC> struct alignas(sizeof(T) * VEC) mc_vec {
    T v[VEC];
};

template <typename T, int VEC>
__device__ __forceinline__ void mc_load_vec(float (&dst)[VEC], const T *p, long i0, long n)
{
    if (VEC > 1 && i0 + VEC <= n) {
        const mc_vec<T, VEC> v = *reinterpret_cast<const mc_vec<T, VEC> *>(p + i0);
#pragma unroll
        for (int k = 0; k < VEC; k++) dst[k] = mc_to_f32(v.v[k]);
    } else {
#pragma unroll
        for (int k = 0; k < VEC; k++) dst[k] = i0 + k < n ? mc_to_f32(p[i0 + k]) : 0.0f;
    }
}

template <typename T, int VEC>
__device__ __forceinline__ void mc_store_vec(T *p, long i0, long n, const float (&src)[VEC])
{
    if (VEC > 1 && i0 + VEC <= n) {
        mc_vec<T, VEC> v;
#pragma unroll
        for (int k = 0; k < VEC; k++) v.v[k] = mc_from_f32<T>(src[k]);
        *reinterpret_cast<mc_vec<T, VEC> *>(p + i0) = v;
    } else {
#pragma unroll
        for (int k = 0; k < VEC; k++)
            if (i0 + k < n) p[i0 + k] = mc_from_f32<T>(src[k]);
    }
}

// True when every pointer given (NULLs ignored) is 16-byte aligned, so the VEC = 16/sizeof(T)
// path may be used. Buffers from cudaMalloc are; views at odd offsets take the plain path.
static inline bool mc_cuda_vec_ok(const void *a, const void *b = NULL, const void *c = NULL,
                                  const void *d = NULL)
{
    return (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d) & 15u) == 0;
}

// Threads per block of the elementwise kernels, and their grid for `chunks` work items (a
// grid-stride loop covers the rest when the grid is capped).
enum { MC_EW_THREADS = 256 };
static inline unsigned mc_cuda_ew_blocks(long chunks)
{
    return mc_cuda_blocks(chunks, MC_EW_THREADS);
}

// Launches the elementwise KERNEL<T, VEC> over n elements (one VEC-element chunk per thread and
// grid-stride step) on be's stream: VEC = 16 / sizeof(T) when `aligned` (mc_cuda_vec_ok of its
// pointers), else 1. The kernel's arguments follow.
#define MC_EW_LAUNCH(KERNEL, T, n, aligned, ...)                                                   \
    do {                                                                                           \
        constexpr int VEC_ = 16 / sizeof(T);                                                       \
        if (aligned) {                                                                             \
            MC_LAUNCH(mc_cuda_ew_blocks(((n) + VEC_ - 1) / VEC_), MC_EW_THREADS, 0,                \
                      mc_cuda_stream(be), KERNEL<T, VEC_>)                                         \
            (__VA_ARGS__);                                                                         \
        } else {                                                                                   \
            MC_LAUNCH(mc_cuda_ew_blocks(n), MC_EW_THREADS, 0, mc_cuda_stream(be), KERNEL<T, 1>)    \
            (__VA_ARGS__);                                                                         \
        }                                                                                          \
        MC_CUDA_LAUNCHED();                                                                        \
    } while (0)

// Launches the row kernel KERNEL<T, VEC> with one block of `threads` per row (grid-stride over
// rows past the grid's cap): VEC = 16 / sizeof(T) when `aligned` (every row starts 16-byte
// aligned: the row length a multiple of VEC and the pointers aligned), else 1.
#define MC_ROW_LAUNCH(KERNEL, T, rows, threads, aligned, ...)                                      \
    do {                                                                                           \
        constexpr int VEC_ = 16 / sizeof(T);                                                       \
        const unsigned blocks_ = mc_cuda_blocks((rows), 1);                                        \
        if (aligned) {                                                                             \
            MC_LAUNCH(blocks_, (threads), 0, mc_cuda_stream(be), KERNEL<T, VEC_>)(__VA_ARGS__);    \
        } else {                                                                                   \
            MC_LAUNCH(blocks_, (threads), 0, mc_cuda_stream(be), KERNEL<T, 1>)(__VA_ARGS__);       \
        }                                                                                          \
        MC_CUDA_LAUNCHED();                                                                        \
    } while (0)

// ---- reductions ----
struct mc_op_sum {
    template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct mc_op_max {
    __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct mc_op_or {
    __device__ __forceinline__ unsigned operator()(unsigned a, unsigned b) const { return a | b; }
};

// Butterfly over the warp: every lane ends with the same value (a + b == b + a exactly, so the
// two lanes of each exchange agree), and the tree is fixed: deterministic.
template <typename T, typename Op> __device__ __forceinline__ T mc_warp_reduce(T v, Op op)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// The reduction of v over the block, returned to every thread. blockDim.x must be a multiple of
// 32 (at most 1024); every thread of the block must call it. Fixed tree: deterministic.
template <typename T, typename Op> __device__ T mc_block_reduce(T v, Op op, T identity)
{
    __shared__ T sh[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = mc_warp_reduce(v, op);
    __syncthreads(); // sh may still be read by a previous call's broadcast
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < nwarps ? sh[lane] : identity;
        v = mc_warp_reduce(v, op);
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}

// ---- dispatch on the element type ----
// Runs the statements with T the device type of dt (float, __nv_bfloat16 or __half).
#define MC_CUDA_DISPATCH(dt, T, OPNAME, ...)                                                       \
    switch (dt) {                                                                                  \
    case MC_DT_F32: {                                                                              \
        typedef float T;                                                                           \
        __VA_ARGS__;                                                                               \
    } break;                                                                                       \
    case MC_DT_BF16: {                                                                             \
        typedef __nv_bfloat16 T;                                                                   \
        __VA_ARGS__;                                                                               \
    } break;                                                                                       \
    case MC_DT_F16: {                                                                              \
        typedef __half T;                                                                          \
        __VA_ARGS__;                                                                               \
    } break;                                                                                       \
    default: mc_cuda_bad_dtype(OPNAME, dt);                                                        \
    }

#endif
