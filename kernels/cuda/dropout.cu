// Dropout with the CPU backend's masks (kernels/cpu/dropout.c): out = keep ? x * (1/(1-p)) : 0,
// keep = mc_dropout_keep for the element's (sample, element number) in the [d0, b, inner] view.
// One thread per Philox block of a row (kernels/cuda/dropout_map.h numbers the work items and
// is checked on the CPU), so each block of four mask words is computed once. The product is one
// fp32 multiply, rounded once to dt: the same values as the CPU. out may equal x: each element
// is read and written by one thread, read first. p == 0 (or no d) copies.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dropout_map.h"

template <typename T>
static __global__ void k_dropout(T *out, const T *x, long items, int B, int inner, int d0_offset,
                                 int inner_full, int inner_offset, uint64_t seed,
                                 uint32_t iteration, uint32_t layer, uint32_t site,
                                 uint64_t sample0, float p, float scale)
{
    for (long t = blockIdx.x * (long)blockDim.x + threadIdx.x; t < items;
         t += (long)gridDim.x * blockDim.x) {
        const mc_dropout_item_t it =
            mc_dropout_item(t, B, inner, d0_offset, inner_full, inner_offset, sample0);
        if (it.j0 >= it.j1) continue;
        const mc_philox_ctr_t r =
            mc_dropout_block_words(seed, iteration, layer, site, it.sample, it.block);
        const long base = it.row * inner;
        for (int j = it.j0; j < it.j1; j++) {
            const unsigned k = (unsigned)((it.e0 + (uint64_t)j) & 3u); // the element's word
            const float v = mc_to_f32(x[base + j]);
            out[base + j] = mc_from_f32<T>(mc_u32_to_unit(r.v[k]) >= p ? v * scale : 0.0f);
        }
    }
}

static void dropout_apply(const mc_backend_t *be, const char *op, mc_dtype_t dt, void *out,
                          const void *x, const mc_dropout_t *d, int d0, int B, int inner,
                          int d0_offset, int inner_full, int inner_offset)
{
    if (d0 <= 0 || B <= 0 || inner <= 0) return;
    if (!d || d->p <= 0.0f) {
        if (out != x)
            MC_CUDA_CHECK(
                cudaMemcpyAsync(out, x, (size_t)d0 * (size_t)B * (size_t)inner * mc_dtype_size(dt),
                                cudaMemcpyDeviceToDevice, mc_cuda_stream(be)));
        return;
    }
    const long items = (long)d0 * B * mc_dropout_items_per_row(inner);
    MC_CUDA_DISPATCH(
        dt, T, op,
        MC_LAUNCH(mc_cuda_ew_blocks(items), MC_EW_THREADS, 0, mc_cuda_stream(be), k_dropout<T>)(
            (T *)out, (const T *)x, items, B, inner, d0_offset, inner_full, inner_offset, d->seed,
            d->iteration, d->layer, d->site, d->sample0, d->p, mc_dropout_scale(d->p)))
    MC_CUDA_LAUNCHED();
}

void mc_cuda_dropout_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *x,
                             const mc_dropout_t *d, int d0, int B, int inner, int d0_offset,
                             int inner_full, int inner_offset)
{
    dropout_apply(be, "dropout_forward", dt, out, x, d, d0, B, inner, d0_offset, inner_full,
                  inner_offset);
}

void mc_cuda_dropout_backward(const mc_backend_t *be, mc_dtype_t dt, void *dx, const void *dout,
                              const mc_dropout_t *d, int d0, int B, int inner, int d0_offset,
                              int inner_full, int inner_offset)
{
    dropout_apply(be, "dropout_backward", dt, dx, dout, d, d0, B, inner, d0_offset, inner_full,
                  inner_offset);
}
