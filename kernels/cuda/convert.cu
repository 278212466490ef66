// convert: dst (type ddt) = src (type sdt) elementwise, through fp32, rounded to nearest even.
// bf16 <-> fp16 goes through fp32 exactly as the host's mc_convert (both steps exact but the
// last). dst may equal src when both types have the same size: each thread reads its elements
// before it writes them, and no two threads share an element.
#include "kernels/cuda/common.cuh"

template <typename D, typename S, int VEC>
static __global__ void k_convert(D *dst, const S *src, long n)
{
    const long chunks = (n + VEC - 1) / VEC;
    for (long c = blockIdx.x * (long)blockDim.x + threadIdx.x; c < chunks;
         c += (long)gridDim.x * blockDim.x) {
        float v[VEC];
        mc_load_vec<S, VEC>(v, src, c * VEC, n);
        mc_store_vec<D, VEC>(dst, c * VEC, n, v);
    }
}

template <typename D, typename S>
static void convert_launch(const mc_backend_t *be, void *dst, const void *src, long n)
{
    // 16-byte accesses on the wider side; the narrower side then moves 8 bytes per thread
    constexpr int VEC = sizeof(D) > sizeof(S) ? 16 / sizeof(D) : 16 / sizeof(S);
    if (mc_cuda_vec_ok(dst, src)) {
        MC_LAUNCH(mc_cuda_ew_blocks((n + VEC - 1) / VEC), MC_EW_THREADS, 0, mc_cuda_stream(be),
                  k_convert<D, S, VEC>)
        ((D *)dst, (const S *)src, n);
    } else {
        MC_LAUNCH(mc_cuda_ew_blocks(n), MC_EW_THREADS, 0, mc_cuda_stream(be), k_convert<D, S, 1>)
        ((D *)dst, (const S *)src, n);
    }
    MC_CUDA_LAUNCHED();
}

void mc_cuda_convert(const mc_backend_t *be, void *dst, mc_dtype_t ddt, const void *src,
                     mc_dtype_t sdt, long n)
{
    if (n <= 0) return;
    if (ddt == sdt) {
        if (dst != src)
            MC_CUDA_CHECK(cudaMemcpyAsync(dst, src, (size_t)n * mc_dtype_size(ddt),
                                          cudaMemcpyDeviceToDevice, mc_cuda_stream(be)));
        return;
    }
    MC_CUDA_DISPATCH(ddt, D, "convert",
                     MC_CUDA_DISPATCH(sdt, S, "convert", convert_launch<D, S>(be, dst, src, n)))
}
