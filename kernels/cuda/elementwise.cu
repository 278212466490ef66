// add, add_inplace, scale: one fp32 operation per element, rounded once to dt (the CPU's
// values exactly), with 16-byte accesses when the buffers are aligned. Aliasing (out equal to a
// or b, add_inplace's acc equal to x) is safe: each element is read and written by one thread,
// read first.
#include "kernels/cuda/common.cuh"

template <typename T, int VEC> static __global__ void k_add(T *out, const T *a, const T *b, long n)
{
    const long chunks = (n + VEC - 1) / VEC;
    for (long c = blockIdx.x * (long)blockDim.x + threadIdx.x; c < chunks;
         c += (long)gridDim.x * blockDim.x) {
        float va[VEC], vb[VEC];
        mc_load_vec<T, VEC>(va, a, c * VEC, n);
        mc_load_vec<T, VEC>(vb, b, c * VEC, n);
#pragma unroll
        for (int k = 0; k < VEC; k++) va[k] = __fadd_rn(va[k], vb[k]);
        mc_store_vec<T, VEC>(out, c * VEC, n, va);
    }
}

template <typename T, int VEC> static __global__ void k_scale(T *x, float s, long n)
{
    const long chunks = (n + VEC - 1) / VEC;
    for (long c = blockIdx.x * (long)blockDim.x + threadIdx.x; c < chunks;
         c += (long)gridDim.x * blockDim.x) {
        float v[VEC];
        mc_load_vec<T, VEC>(v, x, c * VEC, n);
#pragma unroll
        for (int k = 0; k < VEC; k++) v[k] = __fmul_rn(v[k], s);
        mc_store_vec<T, VEC>(x, c * VEC, n, v);
    }
}

template <typename T>
static void add_launch(const mc_backend_t *be, T *out, const T *a, const T *b, long n)
{
    MC_EW_LAUNCH(k_add, T, n, mc_cuda_vec_ok(out, a, b), out, a, b, n);
}

void mc_cuda_add(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *a, const void *b,
                 long n)
{
    if (n <= 0) return;
    MC_CUDA_DISPATCH(dt, T, "add", add_launch<T>(be, (T *)out, (const T *)a, (const T *)b, n))
}

void mc_cuda_add_inplace(const mc_backend_t *be, mc_dtype_t dt, void *acc, const void *x, long n)
{
    if (n <= 0) return;
    MC_CUDA_DISPATCH(dt, T, "add_inplace",
                     add_launch<T>(be, (T *)acc, (const T *)acc, (const T *)x, n))
}

void mc_cuda_scale(const mc_backend_t *be, mc_dtype_t dt, void *x, float s, long n)
{
    if (n <= 0) return;
    MC_CUDA_DISPATCH(dt, T, "scale", MC_EW_LAUNCH(k_scale, T, n, mc_cuda_vec_ok(x), (T *)x, s, n))
}
