// Context-parallel attention blocks (backend.h's attention_block_*, attention_lse_merge, copy_2d):
// the project's kernels (kernels/cuda/attention_cp_cudnn.cu sends the blocks cuDNN cannot do here), a reference and fallback, checked against the CPU backend's ops
// (test/gpu/test_gpu_attention_cp.c). No atomics: every output element has one writer.
//
// Forward: one warp per query row (b, h, i), the keys in tiles of 32 (a lane per key: its score
// over the head's channels; the tile's probabilities go through the warp's shared memory to the
// lanes that own the output channels), an online softmax (running max and sum, the output accumulator
// rescaled as the max grows) whose dropout mask is applied term by term: with the sum
// normalising at the end, out = sum_j keep_ij exp(s_ij - m) v_j / (1 - p) / sum_j exp(s_ij - m),
// the dropout of the normalised probabilities. lse = m + log(sum).
// Backward (flash attention's, from the merged statistics): D = dout . out per row and head into
// the scratch; then one warp per query row accumulates dq over its visible keys, and one warp per
// key row (b, group, j) accumulates the key and value gradients over its group's query heads and
// the rows that see it. Dropout keys are the whole-sequence op's, by global positions.
#include <math.h>

extern "C" {
#include "base/error.h"
}
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dropout_map.h"
#include "kernels/philox.h"

enum { CP_ROWS = 4, CP_MAXC = 8 }; // warps per block; channels per lane (head dims up to 256)

struct cp_geom {
    int Sq, Sk, B, NH, NG, HD, q_pos, k_pos, S_full, mask, head_offset;
    float scale;
    long lq, lkv, lo; // row strides of qkv, kv and out/dout
};

struct cp_drop {
    uint64_t seed, sample0;
    uint32_t iteration, layer, site;
    float p, scale;
    int on;
};

static cp_geom geom_of(int Sq, int Sk, int B, int NH, int NG, int HD, int q_pos, int k_pos,
                       int S_full, int mask, float scale, int head_offset)
{
    cp_geom g = {Sq, Sk, B, NH, NG, HD, q_pos, k_pos, S_full, mask, head_offset, scale, 0, 0, 0};
    g.lq = (long)(NH + 2 * NG) * HD * B;
    g.lkv = 2L * NG * HD * B;
    g.lo = (long)NH * HD * B;
    return g;
}

static cp_drop drop_of(const mc_dropout_t *d)
{
    cp_drop x = {0, 0, 0, 0, 0, 0.0f, 1.0f, 0};
    if (!d || d->p <= 0.0f) return x;
    x = {d->seed, d->sample0, d->iteration, d->layer, d->site, d->p, mc_dropout_scale(d->p), 1};
    return x;
}

// Keys [0, n) of the block that query row i sees.
__device__ __forceinline__ int cp_visible(const cp_geom &g, int i)
{
    if (g.mask != MC_ATTN_BLOCK_CAUSAL) return g.Sk;
    const long n = (long)g.q_pos + i - g.k_pos + 1;
    return n < 0 ? 0 : n > g.Sk ? g.Sk : (int)n;
}

// The dropout factor of (b, h, i, j): keep ? 1/(1-p) : 0, or 1 without dropout.
__device__ __forceinline__ float cp_keep(const cp_drop &x, const cp_geom &g, int b, int h, int i,
                                         int j)
{
    if (!x.on) return 1.0f;
    const uint64_t e =
        ((uint64_t)(g.head_offset + h) * (uint64_t)g.S_full + (uint64_t)(g.q_pos + i)) *
            (uint64_t)g.S_full +
        (uint64_t)(g.k_pos + j);
    return mc_dropout_keep(x.seed, x.iteration, x.layer, x.site, x.sample0 + (uint64_t)b, e, x.p)
               ? x.scale
               : 0.0f;
}

// Offsets of query head h's row 0 and of group k's key (its value follows) in batch row b.
__device__ __forceinline__ long cp_q(const cp_geom &g, int b, int h)
{
    const int qpg = g.NH / g.NG;
    return (long)b * (g.NH + 2 * g.NG) * g.HD + ((long)(h / qpg) * (qpg + 2) + h % qpg) * g.HD;
}
__device__ __forceinline__ long cp_k(const cp_geom &g, int b, int k)
{
    return ((long)b * g.NG + k) * 2 * g.HD;
}

template <typename T> __device__ __forceinline__ float cp_dot(const float *a, const T *b, int n)
{
    float s = 0.0f;
    for (int d = 0; d < n; d++) s += a[d] * mc_to_f32(b[d]);
    return s;
}

template <typename T>
static __global__ void k_block_fwd(float *out, float *lse, const T *qkv, const T *kv, cp_geom g,
                                   cp_drop x)
{
    MC_DYNAMIC_SMEM(float, smem);
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int i = blockIdx.x * CP_ROWS + w, b = blockIdx.y / g.NH, h = blockIdx.y % g.NH;
    if (i >= g.Sq) return; // the whole warp: no block barrier below
    float *q = smem + w * (g.HD + 32), *tile = q + g.HD;
    const T *qrow = qkv + (long)i * g.lq + cp_q(g, b, h);
    for (int d = lane; d < g.HD; d += 32) q[d] = mc_to_f32(qrow[d]);
    __syncwarp();
    const T *k0 = kv + cp_k(g, b, h / (g.NH / g.NG)), *v0 = k0 + g.HD;
    const int nv = cp_visible(g, i);
    float m = -INFINITY, l = 0.0f, acc[CP_MAXC];
    for (int c = 0; c < CP_MAXC; c++) acc[c] = 0.0f;
    for (int j0 = 0; j0 < nv; j0 += 32) {
        const int j = j0 + lane;
        const float s = j < nv ? g.scale * cp_dot(q, k0 + (long)j * g.lkv, g.HD) : -INFINITY;
        const float m_new = fmaxf(m, mc_warp_reduce(s, mc_op_max()));
        const float alpha = m == -INFINITY ? 0.0f : expf(m - m_new);
        const float p = j < nv ? expf(s - m_new) : 0.0f;
        l = l * alpha + mc_warp_reduce(p, mc_op_sum());
        tile[lane] = j < nv ? p * cp_keep(x, g, b, h, i, j) : 0.0f;
        __syncwarp();
        for (int c = 0; c < CP_MAXC; c++) acc[c] *= alpha;
        for (int t = 0; t < 32 && j0 + t < nv; t++) {
            const T *v = v0 + (long)(j0 + t) * g.lkv;
            for (int c = 0; c < CP_MAXC && lane + 32 * c < g.HD; c++)
                acc[c] += tile[t] * mc_to_f32(v[lane + 32 * c]);
        }
        __syncwarp(); // the tile is read before the next one is written
        m = m_new;
    }
    float *o = out + (long)i * g.lo + ((long)b * g.NH + h) * g.HD;
    for (int c = 0; c < CP_MAXC && lane + 32 * c < g.HD; c++)
        o[lane + 32 * c] = nv > 0 ? acc[c] / l : 0.0f;
    if (lane == 0) lse[((long)i * g.B + b) * g.NH + h] = nv > 0 ? m + logf(l) : -INFINITY;
}

// D[i, b, h] = dout . out over the head's channels.
template <typename T>
static __global__ void k_block_delta(float *D, const T *dout, const T *out, cp_geom g)
{
    const long rows = (long)g.Sq * g.B * g.NH;
    for (long r = blockIdx.x * (long)blockDim.x + threadIdx.x; r < rows;
         r += (long)gridDim.x * blockDim.x) {
        const T *a = dout + r * g.HD, *o = out + r * g.HD;
        float s = 0.0f;
        for (int d = 0; d < g.HD; d++) s += mc_to_f32(a[d]) * mc_to_f32(o[d]);
        D[r] = s;
    }
}

// dq of query row (b, h, i) over its visible keys.
template <typename T>
static __global__ void k_block_dq(float *dq, const T *dout, const T *qkv, const T *kv,
                                  const float *lse, const float *D, cp_geom g, cp_drop x)
{
    MC_DYNAMIC_SMEM(float, smem);
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int i = blockIdx.x * CP_ROWS + w, b = blockIdx.y / g.NH, h = blockIdx.y % g.NH;
    if (i >= g.Sq) return;
    float *q = smem + w * (2 * g.HD + 32), *a = q + g.HD, *tile = a + g.HD;
    const T *qrow = qkv + (long)i * g.lq + cp_q(g, b, h);
    const long ro = (long)i * g.lo + ((long)b * g.NH + h) * g.HD;
    for (int d = lane; d < g.HD; d += 32) q[d] = mc_to_f32(qrow[d]), a[d] = mc_to_f32(dout[ro + d]);
    __syncwarp();
    const T *k0 = kv + cp_k(g, b, h / (g.NH / g.NG)), *v0 = k0 + g.HD;
    const long sr = ((long)i * g.B + b) * g.NH + h;
    const float L = lse[sr], Di = D[sr];
    const int nv = cp_visible(g, i);
    float acc[CP_MAXC];
    for (int c = 0; c < CP_MAXC; c++) acc[c] = 0.0f;
    for (int j0 = 0; j0 < nv; j0 += 32) {
        const int j = j0 + lane;
        float dS = 0.0f;
        if (j < nv) {
            const float P = expf(g.scale * cp_dot(q, k0 + (long)j * g.lkv, g.HD) - L);
            const float dP = cp_dot(a, v0 + (long)j * g.lkv, g.HD) * cp_keep(x, g, b, h, i, j);
            dS = P * (dP - Di);
        }
        tile[lane] = dS;
        __syncwarp();
        for (int t = 0; t < 32 && j0 + t < nv; t++) {
            const T *k = k0 + (long)(j0 + t) * g.lkv;
            for (int c = 0; c < CP_MAXC && lane + 32 * c < g.HD; c++)
                acc[c] += tile[t] * mc_to_f32(k[lane + 32 * c]);
        }
        __syncwarp();
    }
    for (int c = 0; c < CP_MAXC && lane + 32 * c < g.HD; c++)
        dq[ro + lane + 32 * c] += g.scale * acc[c];
}

// The key and value gradients of key row (b, group kg, j) over the group's query heads and the
// query rows that see it.
template <typename T>
static __global__ void k_block_dkv(float *dkv, const T *dout, const T *qkv, const T *kv,
                                   const float *lse, const float *D, cp_geom g, cp_drop x)
{
    MC_DYNAMIC_SMEM(float, smem);
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, qpg = g.NH / g.NG;
    const int j = blockIdx.x * CP_ROWS + w, b = blockIdx.y / g.NG, kg = blockIdx.y % g.NG;
    if (j >= g.Sk) return;
    float *k = smem + w * (2 * g.HD + 64), *v = k + g.HD, *tp = v + g.HD, *ts = tp + 32;
    const long ko = (long)j * g.lkv + cp_k(g, b, kg);
    for (int d = lane; d < g.HD; d += 32)
        k[d] = mc_to_f32(kv[ko + d]), v[d] = mc_to_f32(kv[ko + g.HD + d]);
    __syncwarp();
    // the first query row that sees key j
    const long first = g.mask == MC_ATTN_BLOCK_CAUSAL ? (long)g.k_pos + j - g.q_pos : 0;
    const int i_min = first < 0 ? 0 : first > g.Sq ? g.Sq : (int)first;
    float ak[CP_MAXC], av[CP_MAXC];
    for (int c = 0; c < CP_MAXC; c++) ak[c] = av[c] = 0.0f;
    for (int hh = 0; hh < qpg; hh++) {
        const int h = kg * qpg + hh;
        for (int i0 = i_min; i0 < g.Sq; i0 += 32) {
            const int i = i0 + lane;
            float Pd = 0.0f, dS = 0.0f;
            if (i < g.Sq) {
                const T *q = qkv + (long)i * g.lq + cp_q(g, b, h);
                const long ro = (long)i * g.lo + ((long)b * g.NH + h) * g.HD;
                const long sr = ((long)i * g.B + b) * g.NH + h;
                const float P = expf(g.scale * cp_dot(k, q, g.HD) - lse[sr]);
                const float keep = cp_keep(x, g, b, h, i, j);
                Pd = P * keep;
                dS = P * (cp_dot(v, dout + ro, g.HD) * keep - D[sr]);
            }
            tp[lane] = Pd, ts[lane] = dS;
            __syncwarp();
            for (int t = 0; t < 32 && i0 + t < g.Sq; t++) {
                const T *q = qkv + (long)(i0 + t) * g.lq + cp_q(g, b, h);
                const T *a = dout + (long)(i0 + t) * g.lo + ((long)b * g.NH + h) * g.HD;
                for (int c = 0; c < CP_MAXC && lane + 32 * c < g.HD; c++) {
                    av[c] += tp[t] * mc_to_f32(a[lane + 32 * c]);
                    ak[c] += ts[t] * mc_to_f32(q[lane + 32 * c]);
                }
            }
            __syncwarp();
        }
    }
    for (int c = 0; c < CP_MAXC && lane + 32 * c < g.HD; c++) {
        dkv[ko + lane + 32 * c] += g.scale * ak[c];
        dkv[ko + g.HD + lane + 32 * c] += av[c];
    }
}

static void check_hd(int HD)
{
    if (HD > 32 * CP_MAXC)
        mc_fatal("the CUDA attention blocks support head dims 1 to %d, not %d", 32 * CP_MAXC, HD);
}

void mc_cuda_local_attention_block_forward(const mc_backend_t *be, mc_dtype_t dt, float *out,
                                           float *lse, void *scratch, const void *qkv,
                                           const void *kv, int Sq, int Sk, int B, int NH, int NG,
                                           int HD, int q_pos, int k_pos, int S_full, int mask,
                                           float scale, const mc_dropout_t *d, int head_offset,
                                           int NH_full)
{
    (void)scratch, (void)NH_full;
    if (Sq <= 0 || B <= 0 || NH <= 0 || NG <= 0 || HD <= 0) return;
    check_hd(HD);
    const cp_geom g =
        geom_of(Sq, Sk, B, NH, NG, HD, q_pos, k_pos, S_full, mask, scale, head_offset);
    const dim3 grid((unsigned)((Sq + CP_ROWS - 1) / CP_ROWS), (unsigned)(B * NH));
    const size_t smem = (size_t)CP_ROWS * (HD + 32) * sizeof(float);
    MC_CUDA_DISPATCH(dt, T, "attention_block_forward",
                     MC_LAUNCH(grid, CP_ROWS * 32, smem, mc_cuda_stream(be), k_block_fwd<T>)(
                         out, lse, (const T *)qkv, (const T *)kv, g, drop_of(d)))
    MC_CUDA_LAUNCHED();
}

void mc_cuda_local_attention_block_backward(const mc_backend_t *be, mc_dtype_t dt, float *dq,
                                            float *dkv, void *scratch, const void *dout,
                                            const void *qkv, const void *kv, const void *out,
                                            const float *lse, int Sq, int Sk, int B, int NH, int NG,
                                            int HD, int q_pos, int k_pos, int S_full, int mask,
                                            float scale, const mc_dropout_t *d, int head_offset,
                                            int NH_full)
{
    (void)NH_full;
    if (Sq <= 0 || Sk <= 0 || B <= 0 || NH <= 0 || NG <= 0 || HD <= 0) return;
    check_hd(HD);
    const cp_geom g =
        geom_of(Sq, Sk, B, NH, NG, HD, q_pos, k_pos, S_full, mask, scale, head_offset);
    const cp_drop x = drop_of(d);
    float *D = (float *)scratch;
    const size_t smem = (size_t)CP_ROWS * (2 * HD + 64) * sizeof(float);
    const dim3 gq((unsigned)((Sq + CP_ROWS - 1) / CP_ROWS), (unsigned)(B * NH));
    const dim3 gk((unsigned)((Sk + CP_ROWS - 1) / CP_ROWS), (unsigned)(B * NG));
    MC_CUDA_DISPATCH(
        dt, T, "attention_block_backward",
        MC_LAUNCH(mc_cuda_ew_blocks((long)Sq * B * NH), MC_EW_THREADS, 0, mc_cuda_stream(be),
                  k_block_delta<T>)(D, (const T *)dout, (const T *)out, g);
        MC_CUDA_LAUNCHED(); MC_LAUNCH(gq, CP_ROWS * 32, smem, mc_cuda_stream(be), k_block_dq<T>)(
            dq, (const T *)dout, (const T *)qkv, (const T *)kv, lse, D, g, x);
        MC_CUDA_LAUNCHED(); MC_LAUNCH(gk, CP_ROWS * 32, smem, mc_cuda_stream(be), k_block_dkv<T>)(
            dkv, (const T *)dout, (const T *)qkv, (const T *)kv, lse, D, g, x))
    MC_CUDA_LAUNCHED();
}

// One (row, head) per thread: the merge of its statistics and its HD outputs, as the CPU's (in
// double).
static __global__ void k_lse_merge(float *out, float *lse, const float *part, const float *plse,
                                   long n, int HD)
{
    for (long r = blockIdx.x * (long)blockDim.x + threadIdx.x; r < n;
         r += (long)gridDim.x * blockDim.x) {
        const float a = lse[r], b = plse[r];
        float *o = out + r * HD;
        const float *p = part + r * HD;
        if (b == -INFINITY) continue;
        if (a == -INFINITY) {
            for (int c = 0; c < HD; c++) o[c] = p[c];
            lse[r] = b;
            continue;
        }
        const double mx = a > b ? a : b;
        const double ea = exp((double)a - mx), eb = exp((double)b - mx), s = ea + eb;
        const float wa = (float)(ea / s), wb = (float)(eb / s);
        for (int c = 0; c < HD; c++) o[c] = o[c] * wa + p[c] * wb;
        lse[r] = (float)(mx + log(s));
    }
}

void mc_cuda_attention_lse_merge(const mc_backend_t *be, float *out, float *lse, const float *part,
                                 const float *part_lse, long rows, int NH, int HD)
{
    const long n = rows * NH;
    if (n <= 0) return;
    MC_LAUNCH(mc_cuda_ew_blocks(n), MC_EW_THREADS, 0, mc_cuda_stream(be), k_lse_merge)
    (out, lse, part, part_lse, n, HD);
    MC_CUDA_LAUNCHED();
}

template <typename Dt, typename St>
static __global__ void k_copy_2d(Dt *dst, long ld_dst, const St *src, long ld_src, long rows,
                                 long cols)
{
    const long n = rows * cols;
    for (long t = blockIdx.x * (long)blockDim.x + threadIdx.x; t < n;
         t += (long)gridDim.x * blockDim.x) {
        const long r = t / cols, c = t % cols;
        dst[r * ld_dst + c] = mc_from_f32<Dt>(mc_to_f32(src[r * ld_src + c]));
    }
}

void mc_cuda_copy_2d(const mc_backend_t *be, void *dst, mc_dtype_t ddt, long ld_dst,
                     const void *src, mc_dtype_t sdt, long ld_src, long rows, long cols)
{
    if (rows <= 0 || cols <= 0) return;
    MC_CUDA_DISPATCH(ddt, Dt, "copy_2d",
                     MC_CUDA_DISPATCH(sdt, St, "copy_2d",
                                      MC_LAUNCH(mc_cuda_ew_blocks(rows * cols), MC_EW_THREADS, 0,
                                                mc_cuda_stream(be), k_copy_2d<Dt, St>)(
                                          (Dt *)dst, ld_dst, (const St *)src, ld_src, rows, cols)))
    MC_CUDA_LAUNCHED();
}
