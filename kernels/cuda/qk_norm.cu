// Megatron's --qk-layernorm on the GPU: q_layernorm and k_layernorm over each query and key head's
// HD channels (LayerNorm, or RMSNorm when rms), the CPU reference's arithmetic (kernels/cpu/
// qk_norm.c, which runs layernorm.c's and rmsnorm.c's row math on each head), as layernorm.cu
// does LayerNorm's. qkv is viewed as [T*NG*(QPG+2), HD] head rows, per group [QPG query heads |
// key | value]; a head is short (HD 64 to 256), so one warp takes a row, QKN_WARPS rows a block:
//  forward: the mean (LayerNorm) and the sum of squares of (x - mean) in double, warp-reduced,
//           rstd = 1/sqrt(var + eps) in double, both stored as fp32 (per normalised head,
//           [T, NG, QPG+1]); then out = ((x - mean) * rstd) * w (+ b) in fp32 operation by
//           operation (__f*_rn, no FMA contraction: RMSNorm is the same with mean 0, exactly its
//           x * rstd * w). Value rows are copied.
//  backward: first the weight gradients, from dqkv as it comes in: dwq += sum dout*xhat,
//           dbq += sum dout over every query head, dwk, dbk over the key heads, with the
//           deterministic two-pass column reduction (colsum.cuh) in double, rounded to fp32 then to
//           gdt as the CPU does (no bias gradient with RMSNorm); then, in place on the query and key
//           rows, dx = rstd * ((dout*w - a) - xhat*c), a = mean(dout*w) (0 with RMSNorm),
//           c = mean(dout*w*xhat), summed in double. The value rows are not touched.
// No atomics: results are reproducible.
#include "kernels/cuda/colsum.cuh"

enum { QKN_WARPS = 8, QKN_THREADS = 32 * QKN_WARPS };

// Launches KERNEL<T, VEC> with a warp per row of `rows` (grid-stride past the grid's cap): VEC =
// 16 / sizeof(T) when every row starts 16-byte aligned (`aligned`), else 1.
#define QKN_LAUNCH(KERNEL, T, rows, aligned, ...)                                                  \
    do {                                                                                           \
        constexpr int VEC_ = 16 / sizeof(T);                                                       \
        const unsigned blocks_ = mc_cuda_blocks((rows), QKN_WARPS);                                \
        if (aligned) {                                                                             \
            MC_LAUNCH(blocks_, QKN_THREADS, 0, mc_cuda_stream(be), KERNEL<T, VEC_>)(__VA_ARGS__);  \
        } else {                                                                                   \
            MC_LAUNCH(blocks_, QKN_THREADS, 0, mc_cuda_stream(be), KERNEL<T, 1>)(__VA_ARGS__);     \
        }                                                                                          \
        MC_CUDA_LAUNCHED();                                                                        \
    } while (0)

// This warp's first row and the stride between its rows.
static __device__ __forceinline__ long qkn_row0(void)
{
    return (long)blockIdx.x * QKN_WARPS + threadIdx.x / 32;
}
static __device__ __forceinline__ long qkn_rows_step(void) { return (long)gridDim.x * QKN_WARPS; }

template <typename T, int VEC>
static __device__ __forceinline__ void qkn_copy_row(T *o, const T *x, int HD)
{
    for (int i0 = (threadIdx.x & 31) * VEC; i0 < HD; i0 += 32 * VEC) {
        float v[VEC];
        mc_load_vec<T, VEC>(v, x, i0, HD);
        mc_store_vec<T, VEC>(o, i0, HD, v);
    }
}

// Row r of the [T*NG*(QPG+2), HD] view: slot h of group r / (QPG+2); the statistics of a query
// or key head are at group * (QPG+1) + h.
template <typename T, int VEC>
static __global__ void __launch_bounds__(QKN_THREADS)
    k_qkn_forward(T *out, float *mean, float *rstd, const T *x, const T *wq, const T *bq,
                  const T *wk, const T *bk, long rows, int QPG, int HD, float eps, int rms)
{
    const int lane = threadIdx.x & 31;
    for (long r = qkn_row0(); r < rows; r += qkn_rows_step()) { // every lane of a warp: one row
        const long g = r / (QPG + 2);
        const int h = (int)(r % (QPG + 2));
        const T *xr = x + r * HD;
        if (h == QPG + 1) {
            if (out != x) qkn_copy_row<T, VEC>(out + r * HD, xr, HD);
            continue;
        }
        const T *w = h < QPG ? wq : wk, *b = h < QPG ? bq : bk;
        double s = 0.0;
        for (int i0 = lane * VEC; i0 < HD && !rms; i0 += 32 * VEC) {
            float v[VEC];
            mc_load_vec<T, VEC>(v, xr, i0, HD); // 0 past HD: adds nothing
#pragma unroll
            for (int k = 0; k < VEC; k++) s += (double)v[k];
        }
        s = mc_warp_reduce(s, mc_op_sum());
        const double mu = HD > 0 && !rms ? s / HD : 0.0;
        double q = 0.0; // RMSNorm: mu = 0, so d = x and q the sum of squares
        for (int i0 = lane * VEC; i0 < HD; i0 += 32 * VEC) {
            float v[VEC];
            mc_load_vec<T, VEC>(v, xr, i0, HD);
#pragma unroll
            for (int k = 0; k < VEC; k++) {
                const double d = (double)v[k] - mu;
                if (i0 + k < HD) q += d * d;
            }
        }
        q = mc_warp_reduce(q, mc_op_sum());
        const double var = HD > 0 ? q / HD : 0.0;
        const float m = (float)mu, rs = (float)(1.0 / sqrt(var + (double)eps));
        const long si = g * (QPG + 1) + h;
        if (lane == 0) {
            if (mean && !rms) mean[si] = m;
            rstd[si] = rs;
        }
        for (int i0 = lane * VEC; i0 < HD; i0 += 32 * VEC) {
            float v[VEC], wv[VEC], bv[VEC];
            mc_load_vec<T, VEC>(v, xr, i0, HD);
            mc_load_vec<T, VEC>(wv, w, i0, HD);
            if (b && !rms) mc_load_vec<T, VEC>(bv, b, i0, HD);
#pragma unroll
            for (int k = 0; k < VEC; k++) {
                const float y = __fmul_rn(__fmul_rn(__fsub_rn(v[k], m), rs), wv[k]);
                v[k] = b && !rms ? __fadd_rn(y, bv[k]) : y;
            }
            mc_store_vec<T, VEC>(out + r * HD, i0, HD, v);
        }
    }
}

template <typename T>
static void qkn_forward(const mc_backend_t *be, T *out, float *mean, float *rstd, const T *x,
                        const T *wq, const T *bq, const T *wk, const T *bk, int T_, int NG, int QPG,
                        int HD, float eps, int rms)
{
    const long rows = (long)T_ * NG * (QPG + 2);
    const bool vec = HD % (16 / sizeof(T)) == 0 && mc_cuda_vec_ok(out, x, wq, wk) &&
                     mc_cuda_vec_ok(rms ? NULL : bq, rms ? NULL : bk);
    QKN_LAUNCH(k_qkn_forward, T, rows, vec, out, mean, rstd, x, wq, bq, wk, bk, rows, QPG, HD, eps,
               rms);
}

void mc_cuda_qk_norm_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, float *mean,
                             float *rstd, const void *x, const void *wq, const void *bq,
                             const void *wk, const void *bk, int T, int NG, int QPG, int HD,
                             float eps, int rms)
{
    if ((long)T * NG <= 0) return;
    MC_CUDA_DISPATCH(dt, TT, "qk_norm_forward",
                     qkn_forward<TT>(be, (TT *)out, mean, rstd, (const TT *)x, (const TT *)wq,
                                     (const TT *)bq, (const TT *)wk, (const TT *)bk, T, NG, QPG, HD,
                                     eps, rms))
}

// dx of every query and key head, in place on dqkv; row r of the [T*NG*(QPG+1), HD] heads is slot
// r % (QPG+1) of group r / (QPG+1), and its statistics are at r.
template <typename T, int VEC>
static __global__ void __launch_bounds__(QKN_THREADS)
    k_qkn_backward_dx(T *dqkv, const T *x, const T *wq, const T *wk, const float *mean,
                      const float *rstd, long rows, int QPG, int HD, int rms)
{
    const int lane = threadIdx.x & 31;
    for (long r = qkn_row0(); r < rows; r += qkn_rows_step()) {
        const int h = (int)(r % (QPG + 1));
        const long off = (r / (QPG + 1) * (QPG + 2) + h) * HD;
        T *d = dqkv + off; // dout in, dx out: a lane writes only what it read itself
        const T *xr = x + off, *w = h < QPG ? wq : wk;
        const float m = rms ? 0.0f : mean[r], rs = rstd[r];
        double sa = 0.0, sc = 0.0;
        for (int i0 = lane * VEC; i0 < HD; i0 += 32 * VEC) {
            float gv[VEC], xv[VEC], wv[VEC];
            mc_load_vec<T, VEC>(gv, d, i0, HD);
            mc_load_vec<T, VEC>(xv, xr, i0, HD);
            mc_load_vec<T, VEC>(wv, w, i0, HD);
#pragma unroll
            for (int k = 0; k < VEC; k++) {
                const float xh = __fmul_rn(__fsub_rn(xv[k], m), rs), dn = __fmul_rn(gv[k], wv[k]);
                if (i0 + k < HD) {
                    sa += (double)dn;
                    sc += (double)dn * (double)xh;
                }
            }
        }
        sa = mc_warp_reduce(sa, mc_op_sum());
        sc = mc_warp_reduce(sc, mc_op_sum());
        const float a = rms ? 0.0f : (float)(sa / HD), c = (float)(sc / HD);
        for (int i0 = lane * VEC; i0 < HD; i0 += 32 * VEC) {
            float gv[VEC], xv[VEC], wv[VEC];
            mc_load_vec<T, VEC>(gv, d, i0, HD);
            mc_load_vec<T, VEC>(xv, xr, i0, HD);
            mc_load_vec<T, VEC>(wv, w, i0, HD);
#pragma unroll
            for (int k = 0; k < VEC; k++) {
                const float xh = __fmul_rn(__fsub_rn(xv[k], m), rs);
                const float t = __fsub_rn(__fsub_rn(__fmul_rn(gv[k], wv[k]), a), __fmul_rn(xh, c));
                gv[k] = __fmul_rn(rs, t);
            }
            mc_store_vec<T, VEC>(d, i0, HD, gv);
        }
    }
}

// dw[c] += sum dout*xhat, db[c] += sum dout over `per` heads of each group from slot h0 (the QPG
// query heads, or the key head): row r of the reduction is head h0 + r % per of group r / per.
template <typename T, typename TG> struct qkn_dwdb {
    const T *dqkv, *x;
    const float *mean, *rstd; // mean NULL with RMSNorm
    TG *dw, *db;
    int per, h0, QPG, HD;
    __device__ void terms(long r, int c, double (&t)[2]) const
    {
        const long g = r / per;
        const int h = h0 + (int)(r % per);
        const long e = (g * (QPG + 2) + h) * HD + c, si = g * (QPG + 1) + h;
        const float gv = mc_to_f32(dqkv[e]), m = mean ? mean[si] : 0.0f;
        const float xh = __fmul_rn(__fsub_rn(mc_to_f32(x[e]), m), rstd[si]);
        t[0] = (double)__fmul_rn(gv, xh);
        t[1] = (double)gv;
    }
    __device__ void finish(int c, const double (&s)[2]) const
    {
        if (dw) dw[c] = mc_from_f32<TG>((float)((double)mc_to_f32(dw[c]) + s[0]));
        if (db) db[c] = mc_from_f32<TG>((float)((double)mc_to_f32(db[c]) + s[1]));
    }
};

template <typename T, typename TG>
static void qkn_backward(const mc_backend_t *be, T *dqkv, TG *dwq, TG *dbq, TG *dwk, TG *dbk,
                         const T *x, const T *wq, const T *wk, const float *mean, const float *rstd,
                         int T_, int NG, int QPG, int HD, int rms)
{
    const long G = (long)T_ * NG;
    if (rms) mean = NULL, dbq = dbk = NULL;
    // the weight gradients read dout, so they go first; then dx overwrites it (one stream)
    if (dwq || dbq) {
        qkn_dwdb<T, TG> f = {dqkv, x, mean, rstd, dwq, dbq, QPG, 0, QPG, HD};
        mc_cuda_colsum<2>(be, f, (int)(G * QPG), HD);
    }
    if (dwk || dbk) {
        qkn_dwdb<T, TG> f = {dqkv, x, mean, rstd, dwk, dbk, 1, QPG, QPG, HD};
        mc_cuda_colsum<2>(be, f, (int)G, HD);
    }
    const long rows = G * (QPG + 1);
    QKN_LAUNCH(k_qkn_backward_dx, T, rows,
               HD % (16 / sizeof(T)) == 0 && mc_cuda_vec_ok(dqkv, x, wq, wk), dqkv, x, wq, wk, mean,
               rstd, rows, QPG, HD, rms);
}

void mc_cuda_qk_norm_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dqkv,
                              void *dwq, void *dbq, void *dwk, void *dbk, const void *x,
                              const void *wq, const void *wk, const float *mean, const float *rstd,
                              int T, int NG, int QPG, int HD, int rms)
{
    if ((long)T * NG <= 0 || HD <= 0) return;
    MC_CUDA_DISPATCH(
        dt, TT, "qk_norm_backward",
        MC_CUDA_DISPATCH(gdt, TG, "qk_norm_backward",
                         qkn_backward<TT, TG>(be, (TT *)dqkv, (TG *)dwq, (TG *)dbq, (TG *)dwk,
                                              (TG *)dbk, (const TT *)x, (const TT *)wq,
                                              (const TT *)wk, mean, rstd, T, NG, QPG, HD, rms)))
}
