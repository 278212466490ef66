// Vocab-parallel cross-entropy in fp32 (backend.h; kernels/cpu/cross_entropy.c is the
// reference). Logits rows are [s, b] (row n = s_i * B + b_i); targets, losses and dloss are
// [b, s] (index b_i * S + s_i). One block per logits row for the row passes (ce_max, ce_sums,
// ce_backward), 16-byte loads along the row when its length allows; nothing is materialised
// besides the [N] statistics (no normalised logits are kept).
//  ce_max:  rowmax = max over the row (a block max: exact, order-free); -inf for V = 0.
//  ce_sums: sumexp = sum of expf(x - rowmax) accumulated in double (fixed block tree),
//           target_logit = the target's logit when it is in this slice, else 0.
//  ce_loss: log(sumexp) + rowmax - target_logit in double, rounded to fp32.
//  ce_backward: dlogits = expf(x - rowmax) * f (f = dloss / sumexp in double, rounded to fp32),
//           then minus dloss at the target; fp32 operation by operation (no FMA), rounded once.
//           dlogits may equal logits: each element is read then written by one thread.
// expf (within 2 ulp) stands for the CPU's vector exp (within 2 ulp): sums and gradients differ
// from the CPU's by a few ulp (the test states the bound).
#include <math.h>

#include "kernels/cuda/common.cuh"

enum { CE_THREADS = 256 };

template <typename T, int VEC>
static __global__ void __launch_bounds__(CE_THREADS)
    k_ce_max(float *rowmax, const T *logits, int N, int V)
{
    for (long n = blockIdx.x; n < N; n += gridDim.x) {
        const T *x = logits + n * V;
        float m = -INFINITY;
        for (long i0 = (long)threadIdx.x * VEC; i0 < V; i0 += (long)blockDim.x * VEC) {
            float v[VEC];
            mc_load_vec<T, VEC>(v, x, i0, V);
#pragma unroll
            for (int k = 0; k < VEC; k++)
                if (i0 + k < V) m = fmaxf(m, v[k]);
        }
        m = mc_block_reduce(m, mc_op_max(), -INFINITY);
        if (threadIdx.x == 0) rowmax[n] = m;
    }
}

template <typename T, int VEC>
static __global__ void __launch_bounds__(CE_THREADS)
    k_ce_sums(float *sumexp, float *target_logit, const T *logits, const float *rowmax,
              const int32_t *targets, int S, int B, int V, int vocab_start)
{
    const long N = (long)S * B;
    for (long n = blockIdx.x; n < N; n += gridDim.x) {
        const T *x = logits + n * V;
        const float m = rowmax[n];
        double s = 0.0;
        for (long i0 = (long)threadIdx.x * VEC; i0 < V; i0 += (long)blockDim.x * VEC) {
            float v[VEC];
            mc_load_vec<T, VEC>(v, x, i0, V);
#pragma unroll
            for (int k = 0; k < VEC; k++)
                if (i0 + k < V) s += (double)expf(__fsub_rn(v[k], m));
        }
        s = mc_block_reduce(s, mc_op_sum(), 0.0);
        if (threadIdx.x == 0) {
            const long si = n / B, bi = n % B;
            const long t = (long)targets[bi * S + si] - vocab_start;
            sumexp[n] = (float)s;
            target_logit[n] = (t >= 0 && t < V) ? mc_to_f32(x[t]) : 0.0f;
        }
    }
}

static __global__ void k_ce_loss(float *losses, const float *rowmax, const float *sumexp,
                                 const float *target_logit, int S, int B)
{
    const long N = (long)S * B;
    for (long n = blockIdx.x * (long)blockDim.x + threadIdx.x; n < N;
         n += (long)gridDim.x * blockDim.x) {
        const long si = n / B, bi = n % B;
        losses[bi * S + si] =
            (float)(log((double)sumexp[n]) + (double)rowmax[n] - (double)target_logit[n]);
    }
}

template <typename T, int VEC>
static __global__ void __launch_bounds__(CE_THREADS)
    k_ce_backward(T *dlogits, const T *logits, const float *rowmax, const float *sumexp,
                  const int32_t *targets, const float *dloss, int S, int B, int V, int vocab_start)
{
    const long N = (long)S * B;
    for (long n = blockIdx.x; n < N; n += gridDim.x) {
        const long si = n / B, bi = n % B;
        const float m = rowmax[n], g = dloss[bi * S + si];
        const float f = (float)((double)g / (double)sumexp[n]);
        const long t =
            (long)targets[bi * S + si] - vocab_start; // outside [0, V): no one-hot term here
        const T *x = logits + n * V;
        T *dx = dlogits + n * V;
        for (long i0 = (long)threadIdx.x * VEC; i0 < V; i0 += (long)blockDim.x * VEC) {
            float v[VEC];
            mc_load_vec<T, VEC>(v, x, i0, V);
#pragma unroll
            for (int k = 0; k < VEC; k++) {
                float d = __fmul_rn(expf(__fsub_rn(v[k], m)), f);
                if (i0 + k == t) d = __fsub_rn(d, g);
                v[k] = d;
            }
            mc_store_vec<T, VEC>(dx, i0, V, v);
        }
    }
}

void mc_cuda_ce_max(const mc_backend_t *be, mc_dtype_t dt, float *rowmax, const void *logits, int N,
                    int V)
{
    if (N <= 0) return;
    MC_CUDA_DISPATCH(dt, T, "ce_max",
                     MC_ROW_LAUNCH(k_ce_max, T, N, CE_THREADS,
                                   V % (16 / sizeof(T)) == 0 && mc_cuda_vec_ok(logits), rowmax,
                                   (const T *)logits, N, V))
}

void mc_cuda_ce_sums(const mc_backend_t *be, mc_dtype_t dt, float *sumexp, float *target_logit,
                     const void *logits, const float *rowmax, const int32_t *targets, int S, int B,
                     int V, int vocab_start)
{
    if (S <= 0 || B <= 0) return;
    MC_CUDA_DISPATCH(dt, T, "ce_sums",
                     MC_ROW_LAUNCH(k_ce_sums, T, (long)S * B, CE_THREADS,
                                   V % (16 / sizeof(T)) == 0 && mc_cuda_vec_ok(logits), sumexp,
                                   target_logit, (const T *)logits, rowmax, targets, S, B, V,
                                   vocab_start))
}

void mc_cuda_ce_loss(const mc_backend_t *be, float *losses, const float *rowmax,
                     const float *sumexp, const float *target_logit, int S, int B)
{
    if (S <= 0 || B <= 0) return;
    MC_LAUNCH(mc_cuda_ew_blocks((long)S * B), MC_EW_THREADS, 0, mc_cuda_stream(be), k_ce_loss)
    (losses, rowmax, sumexp, target_logit, S, B);
    MC_CUDA_LAUNCHED();
}

void mc_cuda_ce_backward(const mc_backend_t *be, mc_dtype_t dt, void *dlogits, const void *logits,
                         const float *rowmax, const float *sumexp, const int32_t *targets,
                         const float *dloss, int S, int B, int V, int vocab_start)
{
    if (S <= 0 || B <= 0 || V <= 0) return;
    MC_CUDA_DISPATCH(dt, T, "ce_backward",
                     MC_ROW_LAUNCH(k_ce_backward, T, (long)S * B, CE_THREADS,
                                   V % (16 / sizeof(T)) == 0 && mc_cuda_vec_ok(logits, dlogits),
                                   (T *)dlogits, (const T *)logits, rowmax, sumexp, targets, dloss,
                                   S, B, V, vocab_start))
}
