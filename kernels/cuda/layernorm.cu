// LayerNorm over the last dim C of N rows, the CPU reference's arithmetic (kernels/cpu/
// layernorm.c) on the GPU:
//  forward: one block per row; mean = sum(x)/C and the biased variance sum((x - mean)^2)/C in
//           double, rstd = 1/sqrt(var + eps) in double, both stored as fp32; then
//           out = ((x - mean) * rstd) * w + b in fp32, operation by operation (__f*_rn: no FMA
//           contraction, so the elementwise math is the CPU's exactly and only the order of the
//           double sums differs).
//  backward: dx += rstd * ((dout*w - a) - xhat*c), a = mean(dout*w), c = mean(dout*w*xhat)
//           (sums in double, one block per row); dw += sum_n dout*xhat, db += sum_n dout over
//           the rows with the deterministic two-pass column reduction (colsum.cuh), in double,
//           rounded to fp32 then to gdt as the CPU does. No atomics: results are reproducible.
// Rows are read two or three times; a row (C*2 or C*4 bytes) stays in L1/L2 between passes.
// add_layernorm_forward is the same forward on a row it first forms as the sum of two (the
// residual add before a pre-LN block), so the sum is not written and read back by another kernel.
#include "kernels/cuda/colsum.cuh"

enum { LN_THREADS = 256 };

// With ADD (add_layernorm_forward), the row is first formed as x = ra + rb, rounded to T as the
// add op rounds it, and stored: each thread later reads back only the elements it wrote, so the
// passes need no synchronisation, and the residual stream is read once instead of twice.
template <typename T, int VEC, bool ADD>
static __device__ __forceinline__ void ln_forward_rows(T *out, float *mean, float *rstd, T *x,
                                                       const T *ra, const T *rb, const T *w,
                                                       const T *b, int N, int C, float eps)
{
    for (long n = blockIdx.x; n < N; n += gridDim.x) {
        const T *xr = x + n * C;
        double s = 0.0;
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
            for (int k = 0; k < VEC; k++) s += (double)v[k]; // past C: 0 + 0 = 0
        }
        s = mc_block_reduce(s, mc_op_sum(), 0.0);
        const double mu = C > 0 ? s / C : 0.0;
        double q = 0.0;
        for (long i0 = (long)threadIdx.x * VEC; i0 < C; i0 += (long)blockDim.x * VEC) {
            float v[VEC];
            mc_load_vec<T, VEC>(v, xr, i0, C);
#pragma unroll
            for (int k = 0; k < VEC; k++) {
                const double d = (double)v[k] - mu;
                if (i0 + k < C) q += d * d;
            }
        }
        q = mc_block_reduce(q, mc_op_sum(), 0.0);
        const double var = C > 0 ? q / C : 0.0;
        const float m = (float)mu, r = (float)(1.0 / sqrt(var + (double)eps));
        if (threadIdx.x == 0) {
            if (mean) mean[n] = m;
            if (rstd) rstd[n] = r;
        }
        for (long i0 = (long)threadIdx.x * VEC; i0 < C; i0 += (long)blockDim.x * VEC) {
            float v[VEC], wv[VEC], bv[VEC];
            mc_load_vec<T, VEC>(v, xr, i0, C);
            mc_load_vec<T, VEC>(wv, w, i0, C);
            if (b) {
                mc_load_vec<T, VEC>(bv, b, i0, C);
            } else {
#pragma unroll
                for (int k = 0; k < VEC; k++) bv[k] = 0.0f;
            }
#pragma unroll
            for (int k = 0; k < VEC; k++) {
                const float y = __fmul_rn(__fmul_rn(__fsub_rn(v[k], m), r), wv[k]);
                v[k] = b ? __fadd_rn(y, bv[k]) : y;
            }
            mc_store_vec<T, VEC>(out + n * C, i0, C, v);
        }
    }
}

template <typename T, int VEC>
static __global__ void __launch_bounds__(LN_THREADS)
    k_ln_forward(T *out, float *mean, float *rstd, const T *x, const T *w, const T *b, int N, int C,
                 float eps)
{
    ln_forward_rows<T, VEC, false>(out, mean, rstd, (T *)x, NULL, NULL, w, b, N, C, eps);
}

template <typename T, int VEC>
static __global__ void __launch_bounds__(LN_THREADS)
    k_add_ln_forward(T *out, float *mean, float *rstd, T *sum, const T *ra, const T *rb, const T *w,
                     const T *b, int N, int C, float eps)
{
    ln_forward_rows<T, VEC, true>(out, mean, rstd, sum, ra, rb, w, b, N, C, eps);
}

template <typename T>
static void ln_forward(const mc_backend_t *be, T *out, float *mean, float *rstd, const T *x,
                       const T *w, const T *b, int N, int C, float eps)
{
    MC_ROW_LAUNCH(k_ln_forward, T, N, LN_THREADS,
                  C % (16 / sizeof(T)) == 0 && mc_cuda_vec_ok(out, x, w, b), out, mean, rstd, x, w,
                  b, N, C, eps);
}

void mc_cuda_layernorm_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, float *mean,
                               float *rstd, const void *x, const void *w, const void *b, int N,
                               int C, float eps)
{
    if (N <= 0) return;
    MC_CUDA_DISPATCH(dt, T, "layernorm_forward",
                     ln_forward<T>(be, (T *)out, mean, rstd, (const T *)x, (const T *)w,
                                   (const T *)b, N, C, eps))
}

template <typename T>
static void add_ln_forward(const mc_backend_t *be, T *sum, T *out, float *mean, float *rstd,
                           const T *ra, const T *rb, const T *w, const T *b, int N, int C,
                           float eps)
{
    const bool vec =
        C % (16 / sizeof(T)) == 0 && mc_cuda_vec_ok(out, sum, w, b) && mc_cuda_vec_ok(ra, rb);
    MC_ROW_LAUNCH(k_add_ln_forward, T, N, LN_THREADS, vec, out, mean, rstd, sum, ra, rb, w, b, N, C,
                  eps);
}

void mc_cuda_add_layernorm_forward(const mc_backend_t *be, mc_dtype_t dt, void *sum, void *out,
                                   float *mean, float *rstd, const void *a, const void *b,
                                   const void *w, const void *bias, int N, int C, float eps)
{
    if (N <= 0) return;
    MC_CUDA_DISPATCH(dt, T, "add_layernorm_forward",
                     add_ln_forward<T>(be, (T *)sum, (T *)out, mean, rstd, (const T *)a,
                                       (const T *)b, (const T *)w, (const T *)bias, N, C, eps))
}

// dx (type T) += ..., one block per row
template <typename T, int VEC>
static __global__ void __launch_bounds__(LN_THREADS)
    k_ln_backward_dx(T *dx, const T *dout, const T *x, const T *w, const float *mean,
                     const float *rstd, int N, int C)
{
    for (long n = blockIdx.x; n < N; n += gridDim.x) {
        const T *g = dout + n * C, *xr = x + n * C;
        const float m = mean[n], r = rstd[n];
        double sa = 0.0, sc = 0.0;
        for (long i0 = (long)threadIdx.x * VEC; i0 < C; i0 += (long)blockDim.x * VEC) {
            float gv[VEC], xv[VEC], wv[VEC];
            mc_load_vec<T, VEC>(gv, g, i0, C);
            mc_load_vec<T, VEC>(xv, xr, i0, C);
            mc_load_vec<T, VEC>(wv, w, i0, C);
#pragma unroll
            for (int k = 0; k < VEC; k++) {
                const float xh = __fmul_rn(__fsub_rn(xv[k], m), r), dn = __fmul_rn(gv[k], wv[k]);
                if (i0 + k < C) {
                    sa += (double)dn;
                    sc += (double)dn * (double)xh;
                }
            }
        }
        sa = mc_block_reduce(sa, mc_op_sum(), 0.0);
        sc = mc_block_reduce(sc, mc_op_sum(), 0.0);
        const float a = (float)(sa / C), c = (float)(sc / C);
        for (long i0 = (long)threadIdx.x * VEC; i0 < C; i0 += (long)blockDim.x * VEC) {
            float gv[VEC], xv[VEC], wv[VEC], d[VEC];
            mc_load_vec<T, VEC>(gv, g, i0, C);
            mc_load_vec<T, VEC>(xv, xr, i0, C);
            mc_load_vec<T, VEC>(wv, w, i0, C);
            mc_load_vec<T, VEC>(d, dx + n * C, i0, C);
#pragma unroll
            for (int k = 0; k < VEC; k++) {
                const float xh = __fmul_rn(__fsub_rn(xv[k], m), r);
                const float t = __fsub_rn(__fsub_rn(__fmul_rn(gv[k], wv[k]), a), __fmul_rn(xh, c));
                d[k] = __fadd_rn(d[k], __fmul_rn(r, t));
            }
            mc_store_vec<T, VEC>(dx + n * C, i0, C, d);
        }
    }
}

// dw[c] += sum_n dout*xhat, db[c] += sum_n dout (either may be NULL)
template <typename T, typename TG> struct ln_dwdb {
    const T *dout, *x;
    const float *mean, *rstd;
    TG *dw, *db;
    int C;
    __device__ void terms(long r, int c, double (&t)[2]) const
    {
        const float g = mc_to_f32(dout[r * C + c]);
        const float xh = __fmul_rn(__fsub_rn(mc_to_f32(x[r * C + c]), mean[r]), rstd[r]);
        t[0] = (double)__fmul_rn(g, xh);
        t[1] = (double)g;
    }
    __device__ void finish(int c, const double (&s)[2]) const
    {
        if (dw) dw[c] = mc_from_f32<TG>((float)((double)mc_to_f32(dw[c]) + s[0]));
        if (db) db[c] = mc_from_f32<TG>((float)((double)mc_to_f32(db[c]) + s[1]));
    }
};

template <typename T, typename TG>
static void ln_backward(const mc_backend_t *be, T *dx, TG *dw, TG *db, const T *dout, const T *x,
                        const T *w, const float *mean, const float *rstd, int N, int C)
{
    if (dx)
        MC_ROW_LAUNCH(k_ln_backward_dx, T, N, LN_THREADS,
                      C % (16 / sizeof(T)) == 0 && mc_cuda_vec_ok(dx, dout, x, w), dx, dout, x, w,
                      mean, rstd, N, C);
    if (dw || db) {
        ln_dwdb<T, TG> f = {dout, x, mean, rstd, dw, db, C};
        mc_cuda_colsum<2>(be, f, N, C);
    }
}

void mc_cuda_layernorm_backward_acc(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dx,
                                    void *dw, void *db, const void *dout, const void *x,
                                    const void *w, const float *mean, const float *rstd, int N,
                                    int C)
{
    if (C <= 0 || N <= 0) return;
    MC_CUDA_DISPATCH(
        dt, T, "layernorm_backward_acc",
        MC_CUDA_DISPATCH(gdt, TG, "layernorm_backward_acc",
                         ln_backward<T, TG>(be, (T *)dx, (TG *)dw, (TG *)db, (const T *)dout,
                                            (const T *)x, (const T *)w, mean, rstd, N, C)))
}
