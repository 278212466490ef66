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
//  ce_fused: ce_loss and ce_backward in one kernel, one block per row, the gradient in place
//           (dloss = mask * grad_scale formed in the kernel); without given statistics (one rank
//           holds the vocabulary) the block first forms the row's max, sum-exp and target logit
//           as ce_max and ce_sums do (the same device functions, so the same values), then the
//           loss and the gradient: the row is read from memory once and again from cache.
// expf (within 2 ulp) stands for the CPU's vector exp (within 2 ulp): sums and gradients differ
// from the CPU's by a few ulp (the test states the bound).
#include <math.h>

#include "kernels/cuda/common.cuh"

extern "C" {
#include "base/error.h"
}

enum { CE_THREADS = 256 };

// ---- one row, by the whole block (every thread calls each; results returned to every thread) ----
template <typename T, int VEC> static __device__ float ce_row_max(const T *x, int V)
{
    float m = -INFINITY;
    for (long i0 = (long)threadIdx.x * VEC; i0 < V; i0 += (long)blockDim.x * VEC) {
        float v[VEC];
        mc_load_vec<T, VEC>(v, x, i0, V);
#pragma unroll
        for (int k = 0; k < VEC; k++)
            if (i0 + k < V) m = fmaxf(m, v[k]);
    }
    return mc_block_reduce(m, mc_op_max(), -INFINITY);
}

// sum of expf(x - m) in double, rounded to fp32 as the statistic is stored
template <typename T, int VEC> static __device__ float ce_row_sumexp(const T *x, int V, float m)
{
    double s = 0.0;
    for (long i0 = (long)threadIdx.x * VEC; i0 < V; i0 += (long)blockDim.x * VEC) {
        float v[VEC];
        mc_load_vec<T, VEC>(v, x, i0, V);
#pragma unroll
        for (int k = 0; k < VEC; k++)
            if (i0 + k < V) s += (double)expf(__fsub_rn(v[k], m));
    }
    return (float)mc_block_reduce(s, mc_op_sum(), 0.0);
}

// dx = expf(x - m) * f, minus g at the target column t (outside [0, V): none); dx may equal x
template <typename T, int VEC>
static __device__ void ce_row_grad(T *dx, const T *x, int V, float m, float f, long t, float g)
{
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

static __device__ float ce_loss_of(float m, float sumexp, float target_logit)
{
    return (float)(log((double)sumexp) + (double)m - (double)target_logit);
}

template <typename T, int VEC>
static __global__ void __launch_bounds__(CE_THREADS)
    k_ce_max(float *rowmax, const T *logits, int N, int V)
{
    for (long n = blockIdx.x; n < N; n += gridDim.x) {
        const float m = ce_row_max<T, VEC>(logits + n * V, V);
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
        const float s = ce_row_sumexp<T, VEC>(x, V, rowmax[n]);
        if (threadIdx.x == 0) {
            const long si = n / B, bi = n % B;
            const long t = (long)targets[bi * S + si] - vocab_start;
            sumexp[n] = s;
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
        losses[bi * S + si] = ce_loss_of(rowmax[n], sumexp[n], target_logit[n]);
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
        ce_row_grad<T, VEC>(dlogits + n * V, logits + n * V, V, m, f, t, g);
    }
}

// The loss and, with a mask, its gradient in place; the row's statistics formed here when not
// given (rowmax NULL). The target logit is read before the reductions' barriers, so before any
// thread of the block overwrites the row.
template <typename T, int VEC>
static __global__ void __launch_bounds__(CE_THREADS)
    k_ce_fused(float *losses, T *logits, const float *rowmax, const float *sumexp,
               const float *target_logit, const int32_t *targets, const float *mask,
               float grad_scale, int S, int B, int V, int vocab_start)
{
    const long N = (long)S * B;
    for (long n = blockIdx.x; n < N; n += gridDim.x) {
        T *x = logits + n * V;
        const long si = n / B, bi = n % B, bs = bi * S + si;
        const long t = (long)targets[bs] - vocab_start;
        float m, se, tl;
        if (rowmax) {
            m = rowmax[n], se = sumexp[n], tl = target_logit[n];
        } else {
            tl = (t >= 0 && t < V) ? mc_to_f32(x[t]) : 0.0f;
            m = ce_row_max<T, VEC>(x, V);
            se = ce_row_sumexp<T, VEC>(x, V, m);
        }
        if (threadIdx.x == 0) losses[bs] = ce_loss_of(m, se, tl);
        if (!mask) continue;
        const float g = __fmul_rn(mask[bs], grad_scale);
        const float f = (float)((double)g / (double)se);
        ce_row_grad<T, VEC>(x, x, V, m, f, t, g);
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

void mc_cuda_ce_fused(const mc_backend_t *be, mc_dtype_t dt, float *losses, void *logits,
                      const float *rowmax, const float *sumexp, const float *target_logit,
                      const int32_t *targets, const float *loss_mask, float grad_scale, int S,
                      int B, int V, int vocab_start)
{
    if (S <= 0 || B <= 0) return;
    if ((rowmax == NULL) != (sumexp == NULL) || (rowmax == NULL) != (target_logit == NULL))
        mc_fatal("internal error: ce_fused with some of its statistics");
    MC_CUDA_DISPATCH(dt, T, "ce_fused",
                     MC_ROW_LAUNCH(k_ce_fused, T, (long)S * B, CE_THREADS,
                                   V % (16 / sizeof(T)) == 0 && mc_cuda_vec_ok(logits), losses,
                                   (T *)logits, rowmax, sumexp, target_logit, targets, loss_mask,
                                   grad_scale, S, B, V, vocab_start))
}
