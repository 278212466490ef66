// The linear layer (torch Linear, W [out, in]) on cuBLASLt, every precision with fp32
// accumulation (gemm.cu). The three products and how each maps onto cuBLAS's column-major
// GEMM are derived in gemm_map.h (mc_linear_*_gemm) and checked on the CPU by
// test/unit/kernels/test_cuda_gemm_map.c.
//  forward:  out = in @ W^T + bias, the bias added in cuBLASLt's BIAS epilogue (fp32, before the
//            one rounding of out).
//  backward: din = dout @ W (skipped when din is NULL), type dt;
//            dW += dout^T @ in with beta = 1 on dW of type gdt (cuBLASLt takes 16-bit A/B with an
//            fp32 C/D, so an fp32 gradient buffer is accumulated in place, Megatron's gradient
//            accumulation fusion);
//            dbias += column sums of dout, formed by the weight-gradient GEMM itself into an fp32
//            gradient buffer: cuBLASLt's BGRADB epilogue sums op(B) = dout over k = the rows into
//            an fp32 vector in the backend's scratch, then a kernel of out_f threads adds it to
//            dbias, so no pass re-reads dout. For a 16-bit gradient buffer (fp16 without
//            --accumulate-allreduce-grads-in-fp32), where cuBLASLt has no algorithm for it, or
//            with MC_CUDA_GEMM=fallback: a deterministic two-pass reduction in double
//            (colsum.cuh), rounded as the CPU does: to fp32, then once to gdt.
//  with the MLP's GeLU (tanh approximation, Megatron's default bias_gelu fusion), cuBLASLt's
//  epilogues: fc1's forward writes pre = acc + bias to the epilogue's aux matrix and gelu(pre)
//  to the output (GELU_AUX_BIAS), and fc2's input gradient is (dout @ W) * gelu'(pre) (DGELU),
//  each saving a pass over the [N, ffn] activations. For 16-bit types only; where cuBLASLt
//  offers no algorithm, the ffn width is not a multiple of 8, pre is not 16-byte aligned, or
//  the activation is not the tanh GeLU (exact erf GeLU, squared ReLU), the two ops run in
//  sequence.
#include "kernels/cuda/colsum.cuh"

// out[n, j] = bias[j] (or 0): the product with in_f = 0.
template <typename T> static __global__ void k_fill_bias(T *out, const T *bias, int N, int out_f)
{
    const long total = (long)N * out_f;
    for (long t = blockIdx.x * (long)blockDim.x + threadIdx.x; t < total;
         t += (long)gridDim.x * blockDim.x)
        out[t] = bias ? bias[t % out_f] : mc_from_f32<T>(0.0f);
}

void mc_cuda_linear_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *in,
                            const void *W, const void *bias, int N, int in_f, int out_f)
{
    if (N <= 0 || out_f <= 0) return;
    if (in_f <= 0) {
        MC_CUDA_DISPATCH(dt, T, "linear_forward",
                         MC_LAUNCH(mc_cuda_ew_blocks((long)N * out_f), MC_EW_THREADS, 0,
                                   mc_cuda_stream(be),
                                   k_fill_bias<T>)((T *)out, (const T *)bias, N, out_f))
        MC_CUDA_LAUNCHED();
        return;
    }
    mc_cuda_matmul_rowmajor(be, mc_linear_forward_gemm(N, in_f, out_f), in, W, out, dt, dt, 1.0f,
                            0.0f, bias);
}

// dbias[c] += sum over rows of dout[r, c]
template <typename T, typename TG> struct dbias_sum {
    const T *dout;
    TG *dbias;
    int C;
    __device__ void terms(long r, int c, double (&t)[1]) const
    {
        t[0] = (double)mc_to_f32(dout[r * C + c]);
    }
    __device__ void finish(int c, const double (&s)[1]) const
    {
        dbias[c] = mc_from_f32<TG>((float)((double)mc_to_f32(dbias[c]) + s[0]));
    }
};

// acc[c] += part[c], in double, rounded once to TG
template <typename TG> static __global__ void k_add_bias_grad(TG *acc, const TG *part, int n)
{
    for (long c = blockIdx.x * (long)blockDim.x + threadIdx.x; c < n;
         c += (long)gridDim.x * blockDim.x)
        acc[c] = mc_from_f32<TG>((float)((double)mc_to_f32(acc[c]) + (double)mc_to_f32(part[c])));
}

// dW += dout^T @ in with the bias gradient from the same GEMM (BGRADB into scratch, then added to
// dbias): false, computing nothing, when cuBLASLt has no algorithm for it.
static bool wgrad_with_bias_grad(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dW,
                                 void *dbias, const void *dout, const void *in, int N, int in_f,
                                 int out_f)
{
    const mc_cuda_t *cu = mc_cuda(be);
    // a 16-bit gradient buffer would take the epilogue's vector rounded to 16 bits, then the sum
    // rounded again: the column sums keep its one rounding
    if (gdt != MC_DT_F32 || (size_t)out_f * sizeof(float) > cu->scratch_bytes) return false;
    mc_cuda_matmul_t g = mc_cuda_matmul_of(mc_linear_wgrad_gemm(N, in_f, out_f), dout, in, dW, dt,
                                           gdt, 1.0f, 1.0f, NULL);
    g.bgradb = cu->scratch; // n = out_f values: one per column of the column-major dW
    if (!mc_cuda_matmul_fused(be, &g)) return false;
    MC_CUDA_DISPATCH(gdt, TG, "linear_backward",
                     MC_LAUNCH(mc_cuda_blocks(out_f, 256), 256, 0, mc_cuda_stream(be),
                               k_add_bias_grad<TG>)((TG *)dbias, (const TG *)cu->scratch, out_f))
    MC_CUDA_LAUNCHED();
    return true;
}

void mc_cuda_linear_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *din,
                             void *dW, void *dbias, const void *dout, const void *in, const void *W,
                             int N, int in_f, int out_f)
{
    if (in_f <= 0 || out_f <= 0 || N <= 0) return; // no rows: nothing to accumulate, din is empty
    if (din)
        mc_cuda_matmul_rowmajor(be, mc_linear_dgrad_gemm(N, in_f, out_f), dout, W, din, dt, dt,
                                1.0f, 0.0f, NULL);
    if (!dW) return; // the input gradient alone (a deferred weight gradient)
    if (dbias && wgrad_with_bias_grad(be, dt, gdt, dW, dbias, dout, in, N, in_f, out_f)) return;
    mc_cuda_matmul_rowmajor(be, mc_linear_wgrad_gemm(N, in_f, out_f), dout, in, dW, dt, gdt, 1.0f,
                            1.0f, NULL);
    if (dbias) {
        MC_CUDA_DISPATCH(
            dt, T, "linear_backward",
            MC_CUDA_DISPATCH(gdt, TG, "linear_backward",
                             dbias_sum<T, TG> f = {(const T *)dout, (TG *)dbias, out_f};
                             mc_cuda_colsum<1>(be, f, N, out_f)))
    }
}

// 16-bit only: cuBLASLt's GeLU is closed code (it may use a fast tanh); in fp32, the reference
// precision compared with the CPU to 1e-4 in training, the two ops run in sequence.
static bool gelu_epilogue_ok(mc_dtype_t dt, mc_act_t act, int rows, const void *aux)
{
    return dt != MC_DT_F32 && act == MC_ACT_GELU_TANH && rows % 8 == 0 &&
           ((uintptr_t)aux & 15u) == 0;
}

void mc_cuda_linear_gelu_forward(const mc_backend_t *be, mc_dtype_t dt, void *act, void *pre,
                                 const void *in, const void *W, const void *bias, int N, int in_f,
                                 int out_f, mc_act_t activation)
{
    if (N <= 0 || out_f <= 0) return;
    if (in_f > 0 && gelu_epilogue_ok(dt, activation, out_f, pre)) {
        mc_cuda_matmul_t g = mc_cuda_matmul_of(mc_linear_forward_gemm(N, in_f, out_f), in, W, act,
                                               dt, dt, 1.0f, 0.0f, bias);
        g.gelu = MC_GEMM_GELU, g.aux = pre,
        g.ldaux = out_f; // pre: act's layout (column-major out_f x N)
        if (mc_cuda_matmul_fused(be, &g)) return;
    }
    mc_cuda_linear_forward(be, dt, pre, in, W, bias, N, in_f, out_f);
    mc_cuda_gelu_forward(be, dt, act, pre, (long)N * out_f, activation);
}

void mc_cuda_linear_backward_gelu(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *din,
                                  void *dW, void *dbias, const void *dout, const void *act,
                                  const void *W, const void *pre, int N, int in_f, int out_f,
                                  mc_act_t activation)
{
    if (in_f <= 0 || out_f <= 0 || N <= 0) return;
    bool fused = din == NULL; // no input gradient wanted: nothing to fuse or compute
    if (!fused && gelu_epilogue_ok(dt, activation, in_f, pre)) {
        mc_cuda_matmul_t g = mc_cuda_matmul_of(mc_linear_dgrad_gemm(N, in_f, out_f), dout, W, din,
                                               dt, dt, 1.0f, 0.0f, NULL);
        g.gelu = MC_GEMM_DGELU, g.aux = (void *)pre, g.ldaux = in_f; // pre: din's layout
        fused = mc_cuda_matmul_fused(be, &g);
    }
    if (!fused) {
        mc_cuda_matmul_rowmajor(be, mc_linear_dgrad_gemm(N, in_f, out_f), dout, W, din, dt, dt,
                                1.0f, 0.0f, NULL);
        mc_cuda_gelu_backward(be, dt, din, din, pre, (long)N * in_f, activation);
    }
    mc_cuda_linear_backward(be, dt, gdt, NULL, dW, dbias, dout, act, W, N, in_f, out_f);
}
