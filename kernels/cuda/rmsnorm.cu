// RMSNorm over the last dim C of N rows (Megatron's --normalization RMSNorm), the CPU
// reference's arithmetic (kernels/cpu/rmsnorm.c) on the GPU, as layernorm.cu does LayerNorm's:
//  forward: one block per row; mean(x^2) = sum(x^2)/C in double, rstd = 1/sqrt(ms + eps) in
//           double, stored as fp32; then out = (x * rstd) * w in fp32, operation by operation
//           (__f*_rn: no FMA contraction, so only the order of the double sum differs).
//  backward: dx += rstd * (dout*w - xhat*c), c = mean(dout*w*xhat) (summed in double, one block
//           per row); dw += sum_n dout*xhat over the rows with the deterministic two-pass column
//           reduction (colsum.cuh), in double, rounded to fp32 then to gdt as the CPU does.
// add_rmsnorm_forward forms the row as the sum of two first (the residual add before a pre-norm
// block), as add_layernorm_forward does, so the sum is not written and read back by another
// kernel.
#include "kernels/cuda/colsum.cuh"

enum { RMS_THREADS = 256 };

// With ADD (add_rmsnorm_forward), the row is first formed as x = ra + rb, rounded to T as the
// add op rounds it, and stored: each thread later reads back only the elements it wrote, so the
// two passes need no synchronisation, and the residual stream is read once instead of twice.
template <typename T, int VEC, bool ADD>
static __device__ __forceinline__ void rms_forward_rows(T *out, float *rstd, T *x, const T *ra,
                                                        const T *rb, const T *w, int N, int C,
                                                        float eps)
{
    for (long n = blockIdx.x; n < N; n += gridDim.x) {
        const T *xr = x + n * C;
        double q = 0.0;
        for (long i0 = (long)threadIdx.x * VEC; i0 < C; i0 += (long)blockDim.x * VEC) {
            float v[VEC];
            if (ADD) {
                float av[VEC], bv[VEC];
                mc_load_vec<T, VEC>(av, ra + n * C, i0, C);
                mc_load_vec<T, VEC>(bv, rb + n * C, i0, C);
#pragma unroll
                for (int k = 0; k < VEC; k++)
                    v[k] = mc_to_f32(mc_from_f32<T>(__fadd_rn(av[k], bv[k])));
                mc_store_vec<T, VEC>(x + n * C, i0, C, v);
            } else {
                mc_load_vec<T, VEC>(v, xr, i0, C); // 0 past C: adds nothing
            }
#pragma unroll
            for (int k = 0; k < VEC; k++) q += (double)v[k] * (double)v[k];
        }
        q = mc_block_reduce(q, mc_op_sum(), 0.0);
        const double ms = C > 0 ? q / C : 0.0;
        const float r = (float)(1.0 / sqrt(ms + (double)eps));
        if (threadIdx.x == 0 && rstd) rstd[n] = r;
        for (long i0 = (long)threadIdx.x * VEC; i0 < C; i0 += (long)blockDim.x * VEC) {
            float v[VEC], wv[VEC];
            mc_load_vec<T, VEC>(v, xr, i0, C);
            mc_load_vec<T, VEC>(wv, w, i0, C);
#pragma unroll
            for (int k = 0; k < VEC; k++) v[k] = __fmul_rn(__fmul_rn(v[k], r), wv[k]);
            mc_store_vec<T, VEC>(out + n * C, i0, C, v);
        }
    }
}

template <typename T, int VEC>
static __global__ void __launch_bounds__(RMS_THREADS)
    k_rms_forward(T *out, float *rstd, const T *x, const T *w, int N, int C, float eps)
{
    rms_forward_rows<T, VEC, false>(out, rstd, (T *)x, NULL, NULL, w, N, C, eps);
}

template <typename T, int VEC>
static __global__ void __launch_bounds__(RMS_THREADS)
    k_add_rms_forward(T *out, float *rstd, T *sum, const T *ra, const T *rb, const T *w, int N,
                      int C, float eps)
{
    rms_forward_rows<T, VEC, true>(out, rstd, sum, ra, rb, w, N, C, eps);
}

template <typename T>
static void rms_forward(const mc_backend_t *be, T *out, float *rstd, const T *x, const T *w, int N,
                        int C, float eps)
{
    MC_ROW_LAUNCH(k_rms_forward, T, N, RMS_THREADS,
                  C % (16 / sizeof(T)) == 0 && mc_cuda_vec_ok(out, x, w), out, rstd, x, w, N, C,
                  eps);
}

void mc_cuda_rmsnorm_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, float *rstd,
                             const void *x, const void *w, int N, int C, float eps)
{
    if (N <= 0) return;
    MC_CUDA_DISPATCH(dt, T, "rmsnorm_forward",
                     rms_forward<T>(be, (T *)out, rstd, (const T *)x, (const T *)w, N, C, eps))
}

template <typename T>
static void add_rms_forward(const mc_backend_t *be, T *sum, T *out, float *rstd, const T *ra,
                            const T *rb, const T *w, int N, int C, float eps)
{
    const bool vec =
        C % (16 / sizeof(T)) == 0 && mc_cuda_vec_ok(out, sum, w) && mc_cuda_vec_ok(ra, rb);
    MC_ROW_LAUNCH(k_add_rms_forward, T, N, RMS_THREADS, vec, out, rstd, sum, ra, rb, w, N, C, eps);
}

void mc_cuda_add_rmsnorm_forward(const mc_backend_t *be, mc_dtype_t dt, void *sum, void *out,
                                 float *rstd, const void *a, const void *b, const void *w, int N,
                                 int C, float eps)
{
    if (N <= 0) return;
    MC_CUDA_DISPATCH(dt, T, "add_rmsnorm_forward",
                     add_rms_forward<T>(be, (T *)sum, (T *)out, rstd, (const T *)a, (const T *)b,
                                        (const T *)w, N, C, eps))
}

// dx (type T) += ..., one block per row
template <typename T, int VEC>
static __global__ void __launch_bounds__(RMS_THREADS)
    k_rms_backward_dx(T *dx, const T *dout, const T *x, const T *w, const float *rstd, int N, int C)
{
    for (long n = blockIdx.x; n < N; n += gridDim.x) {
        const T *g = dout + n * C, *xr = x + n * C;
        const float r = rstd[n];
        double sc = 0.0;
        for (long i0 = (long)threadIdx.x * VEC; i0 < C; i0 += (long)blockDim.x * VEC) {
            float gv[VEC], xv[VEC], wv[VEC];
            mc_load_vec<T, VEC>(gv, g, i0, C);
            mc_load_vec<T, VEC>(xv, xr, i0, C);
            mc_load_vec<T, VEC>(wv, w, i0, C);
#pragma unroll
            for (int k = 0; k < VEC; k++) // past C: 0 * 0 = 0
                sc += (double)__fmul_rn(gv[k], wv[k]) * (double)__fmul_rn(xv[k], r);
        }
        sc = mc_block_reduce(sc, mc_op_sum(), 0.0);
        const float c = (float)(sc / C);
        for (long i0 = (long)threadIdx.x * VEC; i0 < C; i0 += (long)blockDim.x * VEC) {
            float gv[VEC], xv[VEC], wv[VEC], d[VEC];
            mc_load_vec<T, VEC>(gv, g, i0, C);
            mc_load_vec<T, VEC>(xv, xr, i0, C);
            mc_load_vec<T, VEC>(wv, w, i0, C);
            mc_load_vec<T, VEC>(d, dx + n * C, i0, C);
#pragma unroll
            for (int k = 0; k < VEC; k++) {
                const float xh = __fmul_rn(xv[k], r);
                const float t = __fsub_rn(__fmul_rn(gv[k], wv[k]), __fmul_rn(xh, c));
                d[k] = __fadd_rn(d[k], __fmul_rn(r, t));
            }
            mc_store_vec<T, VEC>(dx + n * C, i0, C, d);
        }
    }
}

// dw[c] += sum_n dout*xhat
template <typename T, typename TG> struct rms_dw {
    const T *dout, *x;
    const float *rstd;
    TG *dw;
    int C;
    __device__ void terms(long r, int c, double (&t)[1]) const
    {
        const float xh = __fmul_rn(mc_to_f32(x[r * C + c]), rstd[r]);
        t[0] = (double)__fmul_rn(mc_to_f32(dout[r * C + c]), xh);
    }
    __device__ void finish(int c, const double (&s)[1]) const
    {
        dw[c] = mc_from_f32<TG>((float)((double)mc_to_f32(dw[c]) + s[0]));
    }
};

template <typename T, typename TG>
static void rms_backward(const mc_backend_t *be, T *dx, TG *dw, const T *dout, const T *x,
                         const T *w, const float *rstd, int N, int C)
{
    if (dx)
        MC_ROW_LAUNCH(k_rms_backward_dx, T, N, RMS_THREADS,
                      C % (16 / sizeof(T)) == 0 && mc_cuda_vec_ok(dx, dout, x, w), dx, dout, x, w,
                      rstd, N, C);
    if (dw) {
        rms_dw<T, TG> f = {dout, x, rstd, dw, C};
        mc_cuda_colsum<1>(be, f, N, C);
    }
}

void mc_cuda_rmsnorm_backward_acc(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dx,
                                  void *dw, const void *dout, const void *x, const void *w,
                                  const float *rstd, int N, int C)
{
    if (C <= 0 || N <= 0) return;
    MC_CUDA_DISPATCH(dt, T, "rmsnorm_backward_acc",
                     MC_CUDA_DISPATCH(gdt, TG, "rmsnorm_backward_acc",
                                      rms_backward<T, TG>(be, (T *)dx, (TG *)dw, (const T *)dout,
                                                          (const T *)x, (const T *)w, rstd, N, C)))
}
