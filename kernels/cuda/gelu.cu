// The MLP's activation (GeLU or squared ReLU) forward and backward, elementwise in fp32 with
// 16-byte accesses (kernels/cpu/gelu.c is the reference, with the same formulas in the same order):
//  MC_ACT_GELU_TANH (Megatron's bias_gelu_impl / bias_gelu_back):
//    y  = 0.5 x (1 + tanh(k0 x (1 + k1 x^2)))
//    dy = g (0.5 x (1 - t^2)(k0 + k2 x^2) + 0.5 (1 + t)),  t = tanh(k0 x (1 + k1 x^2))
//  MC_ACT_GELU_ERF (F.gelu):
//    y  = 0.5 x (1 + erf(x / sqrt 2))
//    dy = g (0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi))
//  MC_ACT_SQUARED_RELU (Megatron's squared_relu): y = r r, dy = (2 r) g, r = relu(x): products
//    only, the CPU's results bit for bit.
// CUDA's tanhf/erff/expf (within 2 ulp) stand for the CPU's vector tanh and libm: GeLU results
// differ from the CPU's by a few fp32 ulp (the test states the bound). out may equal x and dx
// may equal dout: each thread reads its elements before writing them.
#include "kernels/cuda/common.cuh"

#define GELU_K0 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_K1 0.044715f
#define GELU_K2 0.1070322243f /* 3 * 0.044715 * sqrt(2/pi) */
#define GELU_RSQRT2 0.70710678118654752f
#define GELU_RSQRT2PI 0.3989422804014327f

// relu keeping NaN, as torch's: v < 0 is false for NaN
static __device__ __forceinline__ float relu(float v) { return v < 0.0f ? 0.0f : v; }

static __device__ __forceinline__ float gelu(float v, mc_act_t act)
{
    if (act == MC_ACT_SQUARED_RELU) return __fmul_rn(relu(v), relu(v));
    if (act == MC_ACT_GELU_TANH)
        return 0.5f * v * (1.0f + tanhf(GELU_K0 * v * (1.0f + GELU_K1 * v * v)));
    return 0.5f * v * (1.0f + erff(v * GELU_RSQRT2));
}

static __device__ __forceinline__ float gelu_grad(float v, float g, mc_act_t act)
{
    if (act == MC_ACT_SQUARED_RELU) return __fmul_rn(__fmul_rn(2.0f, relu(v)), g);
    if (act == MC_ACT_GELU_TANH) {
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
static __global__ void k_gelu_forward(T *out, const T *x, long n, mc_act_t act)
{
    const long chunks = (n + VEC - 1) / VEC;
    for (long c = blockIdx.x * (long)blockDim.x + threadIdx.x; c < chunks;
         c += (long)gridDim.x * blockDim.x) {
        float v[VEC];
        mc_load_vec<T, VEC>(v, x, c * VEC, n);
#pragma unroll
        for (int k = 0; k < VEC; k++) v[k] = gelu(v[k], act);
        mc_store_vec<T, VEC>(out, c * VEC, n, v);
    }
}

template <typename T, int VEC>
static __global__ void k_gelu_backward(T *dx, const T *dout, const T *x, long n, mc_act_t act)
{
    const long chunks = (n + VEC - 1) / VEC;
    for (long c = blockIdx.x * (long)blockDim.x + threadIdx.x; c < chunks;
         c += (long)gridDim.x * blockDim.x) {
        float v[VEC], g[VEC];
        mc_load_vec<T, VEC>(v, x, c * VEC, n);
        mc_load_vec<T, VEC>(g, dout, c * VEC, n);
#pragma unroll
        for (int k = 0; k < VEC; k++) v[k] = gelu_grad(v[k], g[k], act);
        mc_store_vec<T, VEC>(dx, c * VEC, n, v);
    }
}

void mc_cuda_gelu_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *x, long n,
                          mc_act_t act)
{
    if (n <= 0) return;
    MC_CUDA_DISPATCH(
        dt, T, "gelu_forward",
        MC_EW_LAUNCH(k_gelu_forward, T, n, mc_cuda_vec_ok(out, x), (T *)out, (const T *)x, n, act))
}

void mc_cuda_gelu_backward(const mc_backend_t *be, mc_dtype_t dt, void *dx, const void *dout,
                           const void *x, long n, mc_act_t act)
{
    if (n <= 0) return;
    MC_CUDA_DISPATCH(dt, T, "gelu_backward",
                     MC_EW_LAUNCH(k_gelu_backward, T, n, mc_cuda_vec_ok(dx, dout, x), (T *)dx,
                                  (const T *)dout, (const T *)x, n, act))
}
