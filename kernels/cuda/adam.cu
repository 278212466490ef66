// Adam with decoupled weight decay and bias correction on fp32 master params, the formula and
// operation order of kernels/cpu/adam.c (Apex/TE FusedAdam, adam_w_mode):
//   m = b1 m + (1-b1) g;  v = b2 v + ((1-b2) g) g
//   p = p - lr * ((m / bc1) / (sqrt(v / bc2) + eps) + wd * p)
// bc1 = 1 - b1^step and bc2 = 1 - b2^step in double on the host, rounded to fp32 (as the CPU).
// Every operation is an explicit IEEE fp32 intrinsic (__f*_rn: no FMA contraction; division
// and sqrt correctly rounded), so each element gets the CPU's result bit for bit wherever the
// CPU build does not contract either (x86-64's default). 16-byte accesses when aligned.
#include <math.h>

#include "kernels/cuda/common.cuh"

typedef struct {
    float lr, b1, b2, omb1, omb2, bc1, bc2, eps, wd;
} adam_k;

static __device__ __forceinline__ void adam1(const adam_k &k, float &p, float g, float &m, float &v)
{
    const float mi = __fadd_rn(__fmul_rn(k.b1, m), __fmul_rn(k.omb1, g));
    const float vi = __fadd_rn(__fmul_rn(k.b2, v), __fmul_rn(__fmul_rn(k.omb2, g), g));
    const float denom = __fadd_rn(__fsqrt_rn(__fdiv_rn(vi, k.bc2)), k.eps);
    const float upd = __fadd_rn(__fdiv_rn(__fdiv_rn(mi, k.bc1), denom), __fmul_rn(k.wd, p));
    m = mi;
    v = vi;
    p = __fsub_rn(p, __fmul_rn(k.lr, upd));
}

// T (always float) is the element type MC_EW_LAUNCH passes
template <typename T, int VEC> static __global__ void k_adam(float *p, const float *g, float *m, float *v, long n, adam_k k)
{
    const long chunks = (n + VEC - 1) / VEC;
    for (long c = blockIdx.x * (long)blockDim.x + threadIdx.x; c < chunks; c += (long)gridDim.x * blockDim.x) {
        float pv[VEC], gv[VEC], mv[VEC], vv[VEC];
        mc_load_vec<float, VEC>(pv, p, c * VEC, n);
        mc_load_vec<float, VEC>(gv, g, c * VEC, n);
        mc_load_vec<float, VEC>(mv, m, c * VEC, n);
        mc_load_vec<float, VEC>(vv, v, c * VEC, n);
#pragma unroll
        for (int i = 0; i < VEC; i++) adam1(k, pv[i], gv[i], mv[i], vv[i]);
        mc_store_vec<float, VEC>(p, c * VEC, n, pv);
        mc_store_vec<float, VEC>(m, c * VEC, n, mv);
        mc_store_vec<float, VEC>(v, c * VEC, n, vv);
    }
}

void mc_cuda_adam_step(const mc_backend_t *be, float *p, const float *g, float *m, float *v, long n, float lr,
                       float beta1, float beta2, float eps, float wd, int step)
{
    if (n <= 0) return;
    adam_k k;
    k.lr = lr, k.b1 = beta1, k.b2 = beta2, k.omb1 = 1.0f - beta1, k.omb2 = 1.0f - beta2;
    k.bc1 = (float)(1.0 - pow((double)beta1, (double)step));
    k.bc2 = (float)(1.0 - pow((double)beta2, (double)step));
    k.eps = eps, k.wd = wd;
    MC_EW_LAUNCH(k_adam, float, n, mc_cuda_vec_ok(p, g, m, v), p, g, m, v, n, k);
}
