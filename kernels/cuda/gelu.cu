// GeLU forward and backward, elementwise in fp32 with 16-byte accesses (kernels/cpu/gelu.c is
// the reference, with the same formulas in the same order):
//  tanh_approx (Megatron's bias_gelu_impl / bias_gelu_back):
//    y  = 0.5 x (1 + tanh(k0 x (1 + k1 x^2)))
//    dy = g (0.5 x (1 - t^2)(k0 + k2 x^2) + 0.5 (1 + t)),  t = tanh(k0 x (1 + k1 x^2))
//  exact (F.gelu):
//    y  = 0.5 x (1 + erf(x / sqrt 2))
//    dy = g (0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi))
// CUDA's tanhf/erff/expf (within 2 ulp) stand for the CPU's vector tanh and libm: results
// differ from the CPU's by a few fp32 ulp (the test states the bound). out may equal x and dx
// may equal dout: each thread reads its elements before writing them.
#include "kernels/cuda/common.cuh"

#define GELU_K0 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_K1 0.044715f
#define GELU_K2 0.1070322243f /* 3 * 0.044715 * sqrt(2/pi) */
#define GELU_RSQRT2 0.70710678118654752f
#define GELU_RSQRT2PI 0.3989422804014327f

static __device__ __forceinline__ float gelu(float v, bool tanh_approx)
{
    if (tanh_approx) return 0.5f * v * (1.0f + tanhf(GELU_K0 * v * (1.0f + GELU_K1 * v * v)));
    return 0.5f * v * (1.0f + erff(v * GELU_RSQRT2));
}

static __device__ __forceinline__ float gelu_grad(float v, float g, bool tanh_approx)
{
    if (tanh_approx) {
        const float t = tanhf(GELU_K0 * v * (1.0f + GELU_K1 * v * v));
        const float ff =
            0.5f * v * ((1.0f - t * t) * (GELU_K0 + GELU_K2 * v * v)) + 0.5f * (1.0f + t);
        return ff * g;
    }
    const float ff =
        0.5f * (1.0f + erff(v * GELU_RSQRT2)) + v * expf(-0.5f * v * v) * GELU_RSQRT2PI;
    return ff * g;
}

template <typename T, int VEC>
static __global__ void k_gelu_forward(T *out, const T *x, long n, bool tanh_approx)
{
    const long chunks = (n + VEC - 1) / VEC;
    for (long c = blockIdx.x * (long)blockDim.x + threadIdx.x; c < chunks;
         c += (long)gridDim.x * blockDim.x) {
        float v[VEC];
        mc_load_vec<T, VEC>(v, x, c * VEC, n);
#pragma unroll
        for (int k = 0; k < VEC; k++) v[k] = gelu(v[k], tanh_approx);
        mc_store_vec<T, VEC>(out, c * VEC, n, v);
    }
}

template <typename T, int VEC>
static __global__ void k_gelu_backward(T *dx, const T *dout, const T *x, long n, bool tanh_approx)
{
    const long chunks = (n + VEC - 1) / VEC;
    for (long c = blockIdx.x * (long)blockDim.x + threadIdx.x; c < chunks;
         c += (long)gridDim.x * blockDim.x) {
        float v[VEC], g[VEC];
        mc_load_vec<T, VEC>(v, x, c * VEC, n);
        mc_load_vec<T, VEC>(g, dout, c * VEC, n);
#pragma unroll
        for (int k = 0; k < VEC; k++) v[k] = gelu_grad(v[k], g[k], tanh_approx);
        mc_store_vec<T, VEC>(dx, c * VEC, n, v);
    }
}

void mc_cuda_gelu_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *x, long n,
                          int tanh_approx)
{
    if (n <= 0) return;
    MC_CUDA_DISPATCH(dt, T, "gelu_forward",
                     MC_EW_LAUNCH(k_gelu_forward, T, n, mc_cuda_vec_ok(out, x), (T *)out,
                                  (const T *)x, n, tanh_approx != 0))
}

void mc_cuda_gelu_backward(const mc_backend_t *be, mc_dtype_t dt, void *dx, const void *dout,
                           const void *x, long n, int tanh_approx)
{
    if (n <= 0) return;
    MC_CUDA_DISPATCH(dt, T, "gelu_backward",
                     MC_EW_LAUNCH(k_gelu_backward, T, n, mc_cuda_vec_ok(dx, dout, x), (T *)dx,
                                  (const T *)dout, (const T *)x, n, tanh_approx != 0))
}
