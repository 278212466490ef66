// SwiGLU (Megatron's --swiglu) forward and backward, elementwise in fp32 with 16-byte accesses
// (kernels/cpu/swiglu.c is the reference, with the same formulas in the same order):
//    out   = (g s) u,                          s = 1 / (1 + exp(-g)), g = gate, u = up
//    dgate = ((dout s) (1 + g (1 - s))) u,     dup = dout (g s)
// Rows of x and dx are [gate | up] (2F wide), of out and dout F wide: thread chunks run over the
// N*F outputs, each finding its row's gate and up. The 16-byte path needs F a multiple of the
// vector width (so a chunk never spans two rows) and aligned buffers. Every operation is an
// __f*_rn intrinsic (no FMA contraction): CUDA's expf (within 2 ulp) for the CPU's vector exp is
// the only difference from the CPU's results (the test states the bound).
#include "kernels/cuda/common.cuh"

static __device__ __forceinline__ float sigmoid(float g)
{
    return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-g)));
}

template <typename T, int VEC>
static __global__ void k_swiglu_forward(T *out, const T *x, long n, int F)
{
    const long chunks = (n + VEC - 1) / VEC;
    for (long c = blockIdx.x * (long)blockDim.x + threadIdx.x; c < chunks;
         c += (long)gridDim.x * blockDim.x) {
        const long r = c * VEC / F, j = c * VEC - r * F;
        float g[VEC], u[VEC];
        mc_load_vec<T, VEC>(g, x + 2 * r * F, j, F);
        mc_load_vec<T, VEC>(u, x + 2 * r * F + F, j, F);
#pragma unroll
        for (int k = 0; k < VEC; k++) g[k] = __fmul_rn(__fmul_rn(g[k], sigmoid(g[k])), u[k]);
        mc_store_vec<T, VEC>(out + r * F, j, F, g);
    }
}

template <typename T, int VEC>
static __global__ void k_swiglu_backward(T *dx, const T *dout, const T *x, long n, int F)
{
    const long chunks = (n + VEC - 1) / VEC;
    for (long c = blockIdx.x * (long)blockDim.x + threadIdx.x; c < chunks;
         c += (long)gridDim.x * blockDim.x) {
        const long r = c * VEC / F, j = c * VEC - r * F;
        float d[VEC], g[VEC], u[VEC];
        mc_load_vec<T, VEC>(d, dout + r * F, j, F);
        mc_load_vec<T, VEC>(g, x + 2 * r * F, j, F);
        mc_load_vec<T, VEC>(u, x + 2 * r * F + F, j, F);
#pragma unroll
        for (int k = 0; k < VEC; k++) {
            const float s = sigmoid(g[k]);
            const float dg = __fadd_rn(1.0f, __fmul_rn(g[k], __fsub_rn(1.0f, s)));
            const float du = __fmul_rn(d[k], __fmul_rn(g[k], s));
            g[k] = __fmul_rn(__fmul_rn(__fmul_rn(d[k], s), dg), u[k]);
            u[k] = du;
        }
        mc_store_vec<T, VEC>(dx + 2 * r * F, j, F, g);
        mc_store_vec<T, VEC>(dx + 2 * r * F + F, j, F, u);
    }
}

void mc_cuda_swiglu_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *x, int N,
                            int F)
{
    const long n = (long)N * F;
    if (n <= 0) return;
    MC_CUDA_DISPATCH(dt, T, "swiglu_forward",
                     MC_EW_LAUNCH(k_swiglu_forward, T, n,
                                  F % (16 / sizeof(T)) == 0 && mc_cuda_vec_ok(out, x), (T *)out,
                                  (const T *)x, n, F))
}

void mc_cuda_swiglu_backward(const mc_backend_t *be, mc_dtype_t dt, void *dx, const void *dout,
                             const void *x, int N, int F)
{
    const long n = (long)N * F;
    if (n <= 0) return;
    MC_CUDA_DISPATCH(dt, T, "swiglu_backward",
                     MC_EW_LAUNCH(k_swiglu_backward, T, n,
                                  F % (16 / sizeof(T)) == 0 && mc_cuda_vec_ok(dx, dout, x), (T *)dx,
                                  (const T *)dout, (const T *)x, n, F))
}
