// Rotary position embedding in place on the query and key heads of linear_qkv's output
// (kernels/cpu/rope.c is the reference): each rotated pair (a, b), a = i and b = i + rot/2, or
// a = 2i and b = 2i+1 when interleaved, turned by the angle of its position:
//   y_a = x_a cos - x_b sin,  y_b = x_b cos + x_a sin     (sin negated: inverse)
// in fp32 operation by operation (__f*_rn: no FMA contraction), so the results are the CPU's bit
// for bit, 16-bit ones rounded once as its wrapper rounds them. One block per [s, b] row (grid-
// stride over rows), its threads over the row's pairs, consecutive threads on consecutive i of
// one head, so a warp's loads cover contiguous elements; the index math within a row is 32-bit.
// The value heads and the elements past rot_dim are not read or written.
#include "kernels/cuda/common.cuh"

template <typename T>
static __global__ void k_rope(T *qkv, const float *cos_t, const float *sin_t, long rows, int B,
                              int NG, int QPG, int HD, int half, int interleaved, float sg)
{
    const int pairs = NG * (QPG + 1) * half; // per row: QPG query heads and the key per group
    const long row = (long)NG * (QPG + 2) * HD;
    for (long r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *c = cos_t + r / B * half, *sn = sin_t + r / B * half; // position r / B
        for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
            const int i = p % half, h = p / half; // h: the rotated head
            T *x = qkv + r * row + (h / (QPG + 1) * (QPG + 2) + h % (QPG + 1)) * HD;
            const int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
            const float xa = mc_to_f32(x[a]), xb = mc_to_f32(x[b]), s = sg * sn[i];
            x[a] = mc_from_f32<T>(__fsub_rn(__fmul_rn(xa, c[i]), __fmul_rn(xb, s)));
            x[b] = mc_from_f32<T>(__fadd_rn(__fmul_rn(xb, c[i]), __fmul_rn(xa, s)));
        }
    }
}

void mc_cuda_rope(const mc_backend_t *be, mc_dtype_t dt, void *qkv, const float *cos_t,
                  const float *sin_t, int S, int B, int NG, int QPG, int HD, int rot_dim,
                  int interleaved, int inverse)
{
    const int half = rot_dim / 2, pairs = NG * (QPG + 1) * half;
    const long rows = (long)S * B;
    if (rows <= 0 || pairs <= 0) return;
    // whole warps, up to the elementwise kernels' block: no more warps than a row has pairs for
    const int threads = pairs >= MC_EW_THREADS ? MC_EW_THREADS : (pairs + 31) / 32 * 32;
    const float sg = inverse ? -1.0f : 1.0f;
    MC_CUDA_DISPATCH(dt, T, "rope", {
        MC_LAUNCH(mc_cuda_blocks(rows, 1), threads, 0, mc_cuda_stream(be), k_rope<T>)
        ((T *)qkv, cos_t, sin_t, rows, B, NG, QPG, HD, half, interleaved, sg);
        MC_CUDA_LAUNCHED();
    })
}
