// Fused causal attention (flash style: the s x s matrix never exists) for the CUDA backend.
// The algorithm, its tile ranges, masks, dropout words and shared-memory layouts are in
// attention_tiles.h, shared with the host model test/unit/kernels/test_attention_tiled.c that checks
// them against the CPU backend.
//
// Kernels (one CTA of 4 warps each, every tile in shared memory):
//   att_forward_kernel  one CTA per (query tile, head, batch row): online softmax over the key
//                       tiles up to the diagonal, then (rarely) the masked keys after it.
//   att_dsum_kernel     D = rowsum(dout * out) in fp32, one warp per row.
//   att_dkdv_kernel     one CTA per (key tile, query group, batch row): dK and dV over the query
//                       tiles of each query head of the group in turn (grouped-query attention:
//                       the group's heads share its k/v, so one CTA owns their sum, no races).
//   att_dq_kernel       one CTA per (query tile, head, batch row): dQ over the key tiles.
// Tile products go through tile_mm: wmma (mma.sync m16n16k16, fp32 accumulation) for bf16 and
// fp16, fp32 FMA for fp32 (fp32 training must match the CPU to 1e-4, which TF32 would not).
// Softmax, masks and dropout run on fp32 score tiles. The design is the simple one on purpose
// (everything through shared memory, no register-resident softmax, no async copies, no
// atomics): a session with a GPU measures and tunes it against test/gpu/test_gpu_attention.c.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <string.h>
#include <type_traits>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_tiles.h"

extern "C" {
#include "base/error.h"
#include "kernels/device.h"
float mc_cpu_dropout_scale(float p); // kernels/cpu/dropout.c: 1/(1-p) exactly as the CPU has it
}

constexpr int ATT_THREADS = 128;
constexpr int ATT_WARPS = ATT_THREADS / 32;

// What every kernel needs besides its tensors (passed by value).
struct AttArgs {
    int S, B, NH, NG, QPG, HD, head_offset; // QPG = NH / NG query heads per group
    float scale;                            // 1/sqrt(HD), applied to q.k
    float dscale;                           // 1/(1-p) with dropout, else 1
    int drop;                               // dropout on the probabilities (d.p > 0)
    mc_dropout_t d;
    const int32_t *seg; // [B, S] document numbers or NULL
};

// ---- element conversions (round to nearest even, once) ----
__device__ __forceinline__ float att_f32(float x) { return x; }
__device__ __forceinline__ float att_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float att_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T att_from(float x);
template <> __device__ __forceinline__ float att_from<float>(float x) { return x; }
template <> __device__ __forceinline__ __half att_from<__half>(float x)
{
    return __float2half_rn(x);
}
template <> __device__ __forceinline__ __nv_bfloat16 att_from<__nv_bfloat16>(float x)
{
    return __float2bfloat16_rn(x);
}

__device__ __forceinline__ float warp_max(float x)
{
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}
__device__ __forceinline__ float warp_sum(float x)
{
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

// C[M][N] (=, or += with ACC) sum_k A(r, k) B(k, c), everything in shared memory, where
//   A(r, k) = A_COL ? A[k * lda + r] : A[r * lda + k],  B(k, c) = B_COL ? B[c * ldb + k] : B[k * ldb + c].
// M, N, K are multiples of 16. The whole CTA calls it; the caller synchronises around it (each
// output element is written by one thread or one warp only, so no synchronisation inside).
template <typename T, bool A_COL, bool B_COL, bool ACC, int M, int N, int K>
__device__ __forceinline__ void tile_mm(float *C, int ldc, const T *A, int lda, const T *B, int ldb)
{
    static_assert(M % 16 == 0 && N % 16 == 0 && K % 16 == 0,
                  "tiles are multiples of the mma shape");
    if constexpr (std::is_same<T, float>::value) {
        for (int idx = threadIdx.x; idx < M * N; idx += ATT_THREADS) {
            const int r = idx / N, c = idx - r * N;
            float s = 0.0f;
            if constexpr (ACC) s = C[r * ldc + c];
            for (int k = 0; k < K; k++)
                s = fmaf(A_COL ? A[k * lda + r] : A[r * lda + k],
                         B_COL ? B[c * ldb + k] : B[k * ldb + c], s);
            C[r * ldc + c] = s;
        }
    } else {
        using namespace nvcuda;
        using LA = typename std::conditional<A_COL, wmma::col_major, wmma::row_major>::type;
        using LB = typename std::conditional<B_COL, wmma::col_major, wmma::row_major>::type;
        const int warp = threadIdx.x / 32;
        // 16x16 output fragments dealt to the warps in turn
        for (int f = warp; f < (M / 16) * (N / 16); f += ATT_WARPS) {
            const int mi = f / (N / 16), ni = f - mi * (N / 16);
            float *cp = C + 16 * mi * ldc + 16 * ni;
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            if constexpr (ACC) wmma::load_matrix_sync(acc, cp, ldc, wmma::mem_row_major);
            else wmma::fill_fragment(acc, 0.0f);
            for (int kk = 0; kk < K / 16; kk++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LA> fa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LB> fb;
                wmma::load_matrix_sync(
                    fa, A_COL ? A + 16 * kk * lda + 16 * mi : A + 16 * mi * lda + 16 * kk, lda);
                wmma::load_matrix_sync(
                    fb, B_COL ? B + 16 * ni * ldb + 16 * kk : B + 16 * kk * ldb + 16 * ni, ldb);
                wmma::mma_sync(acc, fa, fb, acc);
            }
            wmma::store_matrix_sync(cp, acc, ldc, wmma::mem_row_major);
        }
    }
}

// dst[r][d] = row r0 + r, column d of src (rows `stride` elements apart) for r < R, d < HDP;
// zeros past row S - 1 and column HD - 1, so padding never adds to a product.
template <typename T, int R, int HDP>
__device__ __forceinline__ void load_tile(T *dst, int ld, const T *src, long stride, int r0, int S,
                                          int HD)
{
    for (int idx = threadIdx.x; idx < R * HDP; idx += ATT_THREADS) {
        const int r = idx / HDP, d = idx - r * HDP, s = r0 + r;
        dst[r * ld + d] = (s < S && d < HD) ? src[(long)s * stride + d] : att_from<T>(0.0f);
    }
}

// Document numbers of positions s0 .. s0 + n - 1 of this batch row (0 without segments).
__device__ __forceinline__ void load_seg(int32_t *dst, const int32_t *seg, int n, int s0, int S)
{
    for (int r = threadIdx.x; r < n; r += ATT_THREADS)
        dst[r] = (seg && s0 + r < S) ? seg[s0 + r] : 0;
}

// A CTA's shared-memory buffers (attention_tiles.h's layout; a kernel touches only its own).
// row0..row2 are per query: m, l, weight of AFTER keys (forward) or m, 1/l, D (backward).
template <typename T> struct AttSmem {
    T *q, *k, *v, *dout, *p, *ds;
    float *acc0, *acc1, *s, *dp, *row0, *row1, *row2;
    int32_t *seg_q, *seg_k;
};
template <typename T>
__device__ __forceinline__ AttSmem<T> att_carve(unsigned char *base, const mc_att_layout_t L,
                                                int bq)
{
    AttSmem<T> m;
    m.q = (T *)(base + L.q);
    m.k = (T *)(base + L.k);
    m.v = (T *)(base + L.v);
    m.dout = (T *)(base + L.dout);
    m.p = (T *)(base + L.p);
    m.ds = (T *)(base + L.ds);
    m.acc0 = (float *)(base + L.acc0);
    m.acc1 = (float *)(base + L.acc1);
    m.s = (float *)(base + L.s);
    m.dp = (float *)(base + L.dp);
    m.row0 = (float *)(base + L.rows);
    m.row1 = m.row0 + bq;
    m.row2 = m.row1 + bq;
    m.seg_q = (int32_t *)(base + L.seg);
    m.seg_k = m.seg_q + bq;
    return m;
}

// What the CTA working on query head h of batch row b reads: its q, its group's k and v, its
// dout columns (rows lq and lo elements apart), its documents and its dropout sample. Megatron's
// linear_qkv layout: per group, QPG query heads, then the key head, then the value head.
template <typename T> struct AttHead {
    const T *q, *k, *v, *dout;
    const int32_t *seg;
    long lq, lo, qoff, koff, ooff; // row strides; offsets of q, k and out columns in row 0
    uint64_t sample;
    int b, h;
};
template <typename T>
__device__ __forceinline__ AttHead<T> att_head(const T *qkv, const T *dout, const AttArgs &a, int h,
                                               int b)
{
    AttHead<T> hd;
    hd.h = h;
    hd.b = b;
    hd.lq = (long)a.B * (a.NH + 2 * a.NG) * a.HD;
    hd.lo = (long)a.B * a.NH * a.HD;
    const long grp = (long)b * (a.NH + 2 * a.NG) * a.HD + (long)(h / a.QPG) * (a.QPG + 2) * a.HD;
    hd.qoff = grp + (long)(h % a.QPG) * a.HD;
    hd.koff = grp + (long)a.QPG * a.HD;
    hd.ooff = (long)b * a.NH * a.HD + (long)h * a.HD;
    hd.q = qkv + hd.qoff;
    hd.k = qkv + hd.koff;
    hd.v = hd.k + a.HD;
    hd.dout = dout ? dout + hd.ooff : nullptr;
    hd.seg = a.seg ? a.seg + (long)hd.b * a.S : nullptr;
    hd.sample = a.d.sample0 + (uint64_t)hd.b;
    return hd;
}

// ---------------------------------------------------------------------------------------------
// Forward
// ---------------------------------------------------------------------------------------------
template <typename T, int HDP>
__global__ void __launch_bounds__(ATT_THREADS)
    att_forward_kernel(T *out, float *state, const T *qkv, AttArgs a)
{
    constexpr mc_att_tiles_t TL = mc_att_tiles(MC_ATT_FWD, (int)sizeof(T), HDP);
    constexpr int BQ = TL.bq, BK = TL.bk;
    constexpr mc_att_layout_t L = mc_att_layout(MC_ATT_FWD, (int)sizeof(T), HDP, BQ, BK);
    static_assert(BK <= 64 && BK % 16 == 0 && BQ % 16 == 0,
                  "a warp holds a score row as key pairs");
    MC_DYNAMIC_SMEM(unsigned char, att_smem);
    const AttSmem<T> m = att_carve<T>(att_smem, L, BQ);
    float *row_m = m.row0, *row_l = m.row1, *row_w = m.row2, *Os = m.acc0;

    const int S = a.S, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int i0 =
        (mc_att_ntiles(S, BQ) - 1 - (int)blockIdx.x) * BQ; // the longest rows start first
    const AttHead<T> hd = att_head<T>(qkv, nullptr, a, (int)blockIdx.y, (int)blockIdx.z);
    const mc_dropout_t d = a.d;

    load_tile<T, BQ, HDP>(m.q, L.ldt, hd.q, hd.lq, i0, S, a.HD);
    load_seg(m.seg_q, hd.seg, BQ, i0, S);
    for (int r = tid; r < BQ; r += ATT_THREADS) mc_att_row_init(i0 + r, S, &row_m[r], &row_l[r]);
    for (int idx = tid; idx < BQ * L.ldf; idx += ATT_THREADS) Os[idx] = 0.0f;

    // causal pass: key tiles 0 .. the diagonal, online softmax
    const int last = mc_att_last_key_tile(i0, BQ, BK, S);
    for (int J = 0; J <= last; J++) {
        const int j0 = J * BK;
        __syncthreads(); // the previous tile's K, V and P are read no more
        load_tile<T, BK, HDP>(m.k, L.ldt, hd.k, hd.lq, j0, S, a.HD);
        load_tile<T, BK, HDP>(m.v, L.ldt, hd.v, hd.lq, j0, S, a.HD);
        load_seg(m.seg_k, hd.seg, BK, j0, S);
        __syncthreads();
        tile_mm<T, false, true, false, BQ, BK, HDP>(m.s, L.lds, m.q, L.ldt, m.k, L.ldt); // Q K^T
        __syncthreads();
        // one warp per row, lane l holds keys 2l and 2l + 1 of the tile
        for (int r = warp; r < BQ; r += ATT_WARPS) {
            const int i = i0 + r, c = 2 * lane, j = j0 + c;
            float s0 = -INFINITY, s1 = -INFINITY;
            if (c < BK) {
                s0 = mc_att_fwd_score(mc_att_kind(i, j, S, m.seg_q[r] == m.seg_k[c]),
                                      m.s[r * L.lds + c] * a.scale);
                s1 = mc_att_fwd_score(mc_att_kind(i, j + 1, S, m.seg_q[r] == m.seg_k[c + 1]),
                                      m.s[r * L.lds + c + 1] * a.scale);
            }
            const float m_old = row_m[r], l_old = row_l[r];
            const float m_new = fmaxf(m_old, warp_max(fmaxf(s0, s1)));
            const float alpha = m_new == m_old ? 1.0f : mc_att_exp(m_old - m_new);
            const float p0 = s0 == -INFINITY ? 0.0f : mc_att_exp(s0 - m_new);
            const float p1 = s1 == -INFINITY ? 0.0f : mc_att_exp(s1 - m_new);
            const float sum = warp_sum(p0 + p1); // l counts every probability, dropped or not
            if (c < BK) {
                unsigned keep = 3u;
                if (a.drop && (p0 != 0.0f || p1 != 0.0f))
                    keep = mc_att_keep2(&d, hd.sample, mc_att_elem(a.head_offset, hd.h, S, i, j));
                m.p[r * L.ldp + c] = att_from<T>((keep & 1u) ? p0 : 0.0f);
                m.p[r * L.ldp + c + 1] = att_from<T>((keep & 2u) ? p1 : 0.0f);
            }
            __syncwarp(); // every lane has read row_m and row_l
            if (lane == 0) {
                row_m[r] = m_new;
                row_l[r] = l_old * alpha + sum;
            }
            if (alpha != 1.0f)
                for (int dd = lane; dd < HDP; dd += 32) Os[r * L.ldf + dd] *= alpha;
        }
        __syncthreads();
        tile_mm<T, false, false, true, BQ, HDP, BK>(Os, L.ldf, m.p, L.ldp, m.v, L.ldt); // O += P V
    }
    __syncthreads();

    // The keys after each query carry exp(-10000 - m) each: 0 unless every other score of the
    // row is below about -9913, and then the CPU kernel adds them too ("full" rows).
    int any = 0;
    for (int r = tid; r < BQ; r += ATT_THREADS) {
        row_w[r] = mc_att_after_weight(i0 + r, S, row_m[r]);
        any |= row_w[r] != 0.0f;
    }
    if (__syncthreads_or(any)) {
        for (int J = mc_att_first_after_tile(i0, BK); J < mc_att_ntiles(S, BK); J++) {
            const int j0 = J * BK;
            __syncthreads();
            load_tile<T, BK, HDP>(m.v, L.ldt, hd.v, hd.lq, j0, S, a.HD);
            for (int idx = tid; idx < BQ * (BK / 2); idx += ATT_THREADS) {
                const int r = idx / (BK / 2), c = 2 * (idx - r * (BK / 2)), i = i0 + r, j = j0 + c;
                const float p0 = mc_att_kind(i, j, S, 1) == MC_ATT_AFTER ? row_w[r] : 0.0f;
                const float p1 = mc_att_kind(i, j + 1, S, 1) == MC_ATT_AFTER ? row_w[r] : 0.0f;
                unsigned keep = 3u;
                if (a.drop && (p0 != 0.0f || p1 != 0.0f))
                    keep = mc_att_keep2(&d, hd.sample, mc_att_elem(a.head_offset, hd.h, S, i, j));
                m.p[r * L.ldp + c] = att_from<T>((keep & 1u) ? p0 : 0.0f);
                m.p[r * L.ldp + c + 1] = att_from<T>((keep & 2u) ? p1 : 0.0f);
            }
            __syncthreads();
            tile_mm<T, false, false, true, BQ, HDP, BK>(Os, L.ldf, m.p, L.ldp, m.v, L.ldt);
        }
        __syncthreads();
    }

    // out = O / l (and 1/(1-p) with dropout), rounded once; the state: row max, then row sum
    T *o = out + hd.ooff;
    for (int idx = tid; idx < BQ * HDP; idx += ATT_THREADS) {
        const int r = idx / HDP, dd = idx - r * HDP, i = i0 + r;
        if (i < S && dd < a.HD)
            o[(long)i * hd.lo + dd] = att_from<T>(Os[r * L.ldf + dd] * (a.dscale / row_l[r]));
    }
    const long st = ((long)hd.b * a.NH + hd.h) * S, plane = (long)a.B * a.NH * S;
    for (int r = tid; r < BQ; r += ATT_THREADS)
        if (i0 + r < S) {
            state[st + i0 + r] = row_m[r];
            state[plane + st + i0 + r] = row_l[r];
        }
}

// ---------------------------------------------------------------------------------------------
// Backward
// ---------------------------------------------------------------------------------------------

// D[(b * NH + h) * S + i] = sum_d dout * out of that row, in fp32; one warp per row.
template <typename T>
__global__ void __launch_bounds__(ATT_THREADS)
    att_dsum_kernel(float *D, const T *dout, const T *out, AttArgs a)
{
    const long rows = (long)a.B * a.NH * a.S;
    const long row = (long)blockIdx.x * ATT_WARPS + threadIdx.x / 32;
    if (row >= rows) return; // whole warps leave together
    const int lane = threadIdx.x & 31, i = (int)(row % a.S);
    const long bh = row / a.S;
    const int h = (int)(bh % a.NH), b = (int)(bh / a.NH);
    const long off = (long)i * a.B * a.NH * a.HD + (long)b * a.NH * a.HD + (long)h * a.HD;
    float s = 0.0f;
    for (int dd = lane; dd < a.HD; dd += 32) s += att_f32(dout[off + dd]) * att_f32(out[off + dd]);
    s = warp_sum(s);
    if (lane == 0) D[row] = s;
}

// Row statistics of the query tile at i0 into row0..row2: m, 1/l and D (zeros past S). Returns
// whether an AFTER key of these queries carries probability.
template <typename T>
__device__ __forceinline__ int load_rows(const AttSmem<T> &m, int bq, const float *state,
                                         const float *D, const AttArgs &a, const AttHead<T> &hd,
                                         int i0)
{
    const long st = ((long)hd.b * a.NH + hd.h) * a.S, plane = (long)a.B * a.NH * a.S;
    int any = 0;
    for (int r = threadIdx.x; r < bq; r += ATT_THREADS) {
        const int i = i0 + r;
        const bool ok = i < a.S;
        m.row0[r] = ok ? state[st + i] : 0.0f;
        m.row1[r] = ok ? 1.0f / state[plane + st + i] : 0.0f;
        m.row2[r] = ok ? D[st + i] : 0.0f;
        any |= mc_att_after_weight(i, a.S, m.row0[r]) != 0.0f;
    }
    return any;
}

// Entries (i, j) and (i, j + 1) of the backward, at (r, c) of the tiles: Pd = p keep/(1-p) into
// m.p and dS = p (dP keep/(1-p) - D) into m.ds, each only when asked. m.s (scores) is read for
// VISIBLE entries only, m.dp (dout . v) only with dS.
template <typename T>
__device__ __forceinline__ void
att_bwd_pair(const AttSmem<T> &m, bool want_pd, bool want_ds, int lds, int ldp, int r, int c, int i,
             int j, const AttArgs &a, const AttHead<T> &hd, const mc_dropout_t *d)
{
    int kind[2];
    float p[2];
    for (int u = 0; u < 2; u++) {
        kind[u] = mc_att_kind(i, j + u, a.S, m.seg_q[r] == m.seg_k[c + u]);
        const float s = kind[u] == MC_ATT_VISIBLE ? m.s[r * lds + c + u] * a.scale : 0.0f;
        p[u] = mc_att_prob(kind[u], s, m.row0[r], m.row1[r]);
    }
    unsigned keep = 3u;
    if (a.drop && (p[0] != 0.0f || p[1] != 0.0f))
        keep = mc_att_keep2(d, hd.sample, mc_att_elem(a.head_offset, hd.h, a.S, i, j));
    for (int u = 0; u < 2; u++) {
        const bool kept = (keep >> u) & 1u;
        if (want_pd) m.p[r * ldp + c + u] = att_from<T>(kept ? p[u] * a.dscale : 0.0f);
        if (want_ds) {
            const float dp = kept ? m.dp[r * lds + c + u] * a.dscale : 0.0f;
            m.ds[r * ldp + c + u] = att_from<T>(mc_att_dscore(kind[u], p[u], dp, m.row2[r]));
        }
    }
}

template <typename T, int HDP>
__global__ void __launch_bounds__(ATT_THREADS)
    att_dkdv_kernel(T *dqkv, const T *dout, const T *qkv, const float *state, const float *D,
                    AttArgs a)
{
    constexpr mc_att_tiles_t TL = mc_att_tiles(MC_ATT_DKDV, (int)sizeof(T), HDP);
    constexpr int BQ = TL.bq, BK = TL.bk;
    constexpr mc_att_layout_t L = mc_att_layout(MC_ATT_DKDV, (int)sizeof(T), HDP, BQ, BK);
    static_assert(BK % 16 == 0 && BQ % 16 == 0, "tiles are multiples of the mma shape");
    MC_DYNAMIC_SMEM(unsigned char, att_smem);
    const AttSmem<T> m = att_carve<T>(att_smem, L, BQ);
    float *dK = m.acc0, *dV = m.acc1;

    const int S = a.S, tid = threadIdx.x;
    const int j0 = (int)blockIdx.x * BK;    // early keys (the most query tiles) first
    const int h0 = (int)blockIdx.y * a.QPG; // the group's first query head
    const AttHead<T> hd0 = att_head<T>(qkv, dout, a, h0, (int)blockIdx.z);
    const mc_dropout_t d = a.d;

    load_tile<T, BK, HDP>(m.k, L.ldt, hd0.k, hd0.lq, j0, S, a.HD);
    load_tile<T, BK, HDP>(m.v, L.ldt, hd0.v, hd0.lq, j0, S, a.HD);
    load_seg(m.seg_k, hd0.seg, BK, j0, S);
    for (int idx = tid; idx < BK * L.ldf; idx += ATT_THREADS) dK[idx] = dV[idx] = 0.0f;

    const int Ic = mc_att_first_causal_query_tile(j0, BQ), nI = mc_att_ntiles(S, BQ);
    for (int hq = 0; hq < a.QPG; hq++) { // the group's dK and dV sum over its query heads
        const AttHead<T> hd = att_head<T>(qkv, dout, a, h0 + hq, (int)blockIdx.z);
        for (int I = 0; I < nI; I++) {
            const int i0 = I * BQ;
            const bool causal = I >= Ic; // else every key of the tile is after every query
            __syncthreads();             // the previous query tile is read no more
            const int after = load_rows(m, BQ, state, D, a, hd, i0);
            if (!__syncthreads_or(causal || after)) continue; // only zero probabilities here
            load_tile<T, BQ, HDP>(m.dout, L.ldt, hd.dout, hd.lo, i0, S, a.HD);
            load_seg(m.seg_q, hd.seg, BQ, i0, S);
            if (causal) load_tile<T, BQ, HDP>(m.q, L.ldt, hd.q, hd.lq, i0, S, a.HD);
            __syncthreads();
            if (causal) {
                tile_mm<T, false, true, false, BQ, BK, HDP>(m.s, L.lds, m.q, L.ldt, m.k,
                                                            L.ldt); // Q K^T
                tile_mm<T, false, true, false, BQ, BK, HDP>(m.dp, L.lds, m.dout, L.ldt, m.v,
                                                            L.ldt); // dO V^T
                __syncthreads();
            }
            // outside causal tiles no entry is VISIBLE (m.s is not read) and no dS is formed
            for (int idx = tid; idx < BQ * (BK / 2); idx += ATT_THREADS) {
                const int r = idx / (BK / 2), c = 2 * (idx - r * (BK / 2));
                att_bwd_pair(m, true, causal, L.lds, L.ldp, r, c, i0 + r, j0 + c, a, hd, &d);
            }
            __syncthreads();
            tile_mm<T, true, false, true, BK, HDP, BQ>(dV, L.ldf, m.p, L.ldp, m.dout,
                                                       L.ldt); // dV += Pd^T dO
            if (causal)
                tile_mm<T, true, false, true, BK, HDP, BQ>(dK, L.ldf, m.ds, L.ldp, m.q,
                                                           L.ldt); // dK += dS^T Q
        }
    }
    __syncthreads();
    T *dk = dqkv + hd0.koff, *dv = dk + a.HD;
    for (int idx = tid; idx < BK * HDP; idx += ATT_THREADS) {
        const int r = idx / HDP, dd = idx - r * HDP, j = j0 + r;
        if (j < S && dd < a.HD) {
            dk[(long)j * hd0.lq + dd] = att_from<T>(dK[r * L.ldf + dd] * a.scale);
            dv[(long)j * hd0.lq + dd] = att_from<T>(dV[r * L.ldf + dd]);
        }
    }
}

template <typename T, int HDP>
__global__ void __launch_bounds__(ATT_THREADS)
    att_dq_kernel(T *dqkv, const T *dout, const T *qkv, const float *state, const float *D,
                  AttArgs a)
{
    constexpr mc_att_tiles_t TL = mc_att_tiles(MC_ATT_DQ, (int)sizeof(T), HDP);
    constexpr int BQ = TL.bq, BK = TL.bk;
    constexpr mc_att_layout_t L = mc_att_layout(MC_ATT_DQ, (int)sizeof(T), HDP, BQ, BK);
    static_assert(BK % 16 == 0 && BQ % 16 == 0, "tiles are multiples of the mma shape");
    MC_DYNAMIC_SMEM(unsigned char, att_smem);
    const AttSmem<T> m = att_carve<T>(att_smem, L, BQ);
    float *dQ = m.acc0;

    const int S = a.S, tid = threadIdx.x;
    const int i0 =
        (mc_att_ntiles(S, BQ) - 1 - (int)blockIdx.x) * BQ; // the longest rows start first
    const AttHead<T> hd = att_head<T>(qkv, dout, a, (int)blockIdx.y, (int)blockIdx.z);
    const mc_dropout_t d = a.d;

    load_tile<T, BQ, HDP>(m.q, L.ldt, hd.q, hd.lq, i0, S, a.HD);
    load_tile<T, BQ, HDP>(m.dout, L.ldt, hd.dout, hd.lo, i0, S, a.HD);
    load_seg(m.seg_q, hd.seg, BQ, i0, S);
    (void)load_rows(m, BQ, state, D, a, hd, i0);
    for (int idx = tid; idx < BQ * L.ldf; idx += ATT_THREADS) dQ[idx] = 0.0f;

    // masked entries get no score gradient: only the key tiles up to the diagonal matter
    const int last = mc_att_last_key_tile(i0, BQ, BK, S);
    for (int J = 0; J <= last; J++) {
        const int j0 = J * BK;
        __syncthreads();
        load_tile<T, BK, HDP>(m.k, L.ldt, hd.k, hd.lq, j0, S, a.HD);
        load_tile<T, BK, HDP>(m.v, L.ldt, hd.v, hd.lq, j0, S, a.HD);
        load_seg(m.seg_k, hd.seg, BK, j0, S);
        __syncthreads();
        tile_mm<T, false, true, false, BQ, BK, HDP>(m.s, L.lds, m.q, L.ldt, m.k, L.ldt); // Q K^T
        tile_mm<T, false, true, false, BQ, BK, HDP>(m.dp, L.lds, m.dout, L.ldt, m.v,
                                                    L.ldt); // dO V^T
        __syncthreads();
        for (int idx = tid; idx < BQ * (BK / 2); idx += ATT_THREADS) {
            const int r = idx / (BK / 2), c = 2 * (idx - r * (BK / 2));
            att_bwd_pair(m, false, true, L.lds, L.ldp, r, c, i0 + r, j0 + c, a, hd, &d);
        }
        __syncthreads();
        tile_mm<T, false, false, true, BQ, HDP, BK>(dQ, L.ldf, m.ds, L.ldp, m.k,
                                                    L.ldt); // dQ += dS K
    }
    __syncthreads();
    T *dq = dqkv + hd.qoff;
    for (int idx = tid; idx < BQ * HDP; idx += ATT_THREADS) {
        const int r = idx / HDP, dd = idx - r * HDP, i = i0 + r;
        if (i < S && dd < a.HD)
            dq[(long)i * hd.lq + dd] = att_from<T>(dQ[r * L.ldf + dd] * a.scale);
    }
}

// ---------------------------------------------------------------------------------------------
// Host side
// ---------------------------------------------------------------------------------------------

template <typename T, int HDP> struct AttTag {
    using type = T;
    static constexpr int hdp = HDP;
};

// Calls f(AttTag<element type, padded head dim>()) for dt and HD.
template <typename T, typename F> static void att_dispatch_hd(int HD, F &&f)
{
    switch (mc_att_hdp(HD)) {
    case 64: f(AttTag<T, 64>()); break;
    case 80: f(AttTag<T, 80>()); break;
    case 128: f(AttTag<T, 128>()); break;
    case 256: f(AttTag<T, 256>()); break;
    default: mc_fatal("the CUDA attention supports head dims 1 to %d, not %d", MC_ATT_HD_MAX, HD);
    }
}
template <typename F> static void att_dispatch(mc_dtype_t dt, int HD, F &&f)
{
    switch (dt) {
    case MC_DT_F32: att_dispatch_hd<float>(HD, f); break;
    case MC_DT_BF16: att_dispatch_hd<__nv_bfloat16>(HD, f); break;
    case MC_DT_F16: att_dispatch_hd<__half>(HD, f); break;
    default:
        mc_fatal("the CUDA attention takes fp32, bf16 or fp16 tensors, not %s", mc_dtype_name(dt));
    }
}

static AttArgs att_args(int S, int B, int NH, int NG, int HD, const int32_t *segments, float scale,
                        const mc_dropout_t *d, int head_offset)
{
    if (NG <= 0 || NH % NG != 0)
        mc_fatal(
            "the CUDA attention needs query groups that divide the heads (%d heads, %d groups)", NH,
            NG);
    if (NH > 65535 || B > 65535)
        mc_fatal(
            "the CUDA attention takes at most 65535 heads and batch rows per call (%d heads, %d rows)",
            NH, B);
    AttArgs a;
    memset(&a, 0, sizeof(a));
    a.S = S;
    a.B = B;
    a.NH = NH;
    a.NG = NG;
    a.QPG = NH / NG;
    a.HD = HD;
    a.head_offset = head_offset;
    a.scale = scale;
    a.drop = d && d->p > 0.0f;
    if (a.drop) a.d = *d;
    a.dscale = a.drop ? mc_cpu_dropout_scale(d->p) : 1.0f;
    a.seg = segments;
    return a;
}

// Grants a kernel its dynamic shared memory (once per kernel); a device with less per block
// than the kernel needs is an error naming both.
static void att_grant_smem(const mc_backend_t *be, const void *kernel, size_t bytes, bool *ready,
                           const char *what, int HD)
{
    if (*ready) return;
    const cudaDeviceProp *prop = &mc_cuda(be)->prop;
    if (bytes > prop->sharedMemPerBlockOptin)
        mc_fatal(
            "the CUDA attention %s kernel for head dim %d needs %zu bytes of shared memory per block; %s has %zu",
            what, HD, bytes, prop->name, (size_t)prop->sharedMemPerBlockOptin);
    MC_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    *ready = true;
}

template <typename T, int HDP>
static void att_forward_launch(const mc_backend_t *be, void *out, void *state, const void *qkv,
                               const AttArgs &a)
{
    constexpr mc_att_tiles_t TL = mc_att_tiles(MC_ATT_FWD, (int)sizeof(T), HDP);
    constexpr size_t bytes = mc_att_layout(MC_ATT_FWD, (int)sizeof(T), HDP, TL.bq, TL.bk).bytes;
    static bool ready = false;
    att_grant_smem(be, (const void *)att_forward_kernel<T, HDP>, bytes, &ready, "forward", a.HD);
    const dim3 grid((unsigned)mc_att_ntiles(a.S, TL.bq), (unsigned)a.NH, (unsigned)a.B);
    MC_LAUNCH(grid, ATT_THREADS, bytes, mc_cuda_stream(be), att_forward_kernel<T, HDP>)
    ((T *)out, (float *)state, (const T *)qkv, a);
    MC_CUDA_LAUNCHED();
}

template <typename T, int HDP>
static void att_backward_launch(const mc_backend_t *be, void *dqkv, float *D, const void *dout,
                                const void *qkv, const void *out, const float *state,
                                const AttArgs &a)
{
    const cudaStream_t st = mc_cuda_stream(be);
    const long rows = (long)a.B * a.NH * a.S;
    MC_LAUNCH((unsigned)((rows + ATT_WARPS - 1) / ATT_WARPS), ATT_THREADS, 0, st,
              att_dsum_kernel<T>)
    (D, (const T *)dout, (const T *)out, a);
    MC_CUDA_LAUNCHED();

    constexpr mc_att_tiles_t KV = mc_att_tiles(MC_ATT_DKDV, (int)sizeof(T), HDP);
    constexpr size_t kv_bytes = mc_att_layout(MC_ATT_DKDV, (int)sizeof(T), HDP, KV.bq, KV.bk).bytes;
    static bool kv_ready = false;
    att_grant_smem(be, (const void *)att_dkdv_kernel<T, HDP>, kv_bytes, &kv_ready, "dk/dv", a.HD);
    const dim3 kv_grid((unsigned)mc_att_ntiles(a.S, KV.bk), (unsigned)a.NG, (unsigned)a.B);
    MC_LAUNCH(kv_grid, ATT_THREADS, kv_bytes, st, att_dkdv_kernel<T, HDP>)
    ((T *)dqkv, (const T *)dout, (const T *)qkv, state, D, a);
    MC_CUDA_LAUNCHED();

    constexpr mc_att_tiles_t QT = mc_att_tiles(MC_ATT_DQ, (int)sizeof(T), HDP);
    constexpr size_t q_bytes = mc_att_layout(MC_ATT_DQ, (int)sizeof(T), HDP, QT.bq, QT.bk).bytes;
    static bool q_ready = false;
    att_grant_smem(be, (const void *)att_dq_kernel<T, HDP>, q_bytes, &q_ready, "dq", a.HD);
    const dim3 q_grid((unsigned)mc_att_ntiles(a.S, QT.bq), (unsigned)a.NH, (unsigned)a.B);
    MC_LAUNCH(q_grid, ATT_THREADS, q_bytes, st, att_dq_kernel<T, HDP>)
    ((T *)dqkv, (const T *)dout, (const T *)qkv, state, D, a);
    MC_CUDA_LAUNCHED();
}

extern "C" void mc_cuda_local_attention_forward(const mc_backend_t *be, mc_dtype_t dt, void *out,
                                                void *state, const void *qkv, int S, int B, int NH,
                                                int NG, int HD, const int32_t *segments,
                                                float scale, const mc_dropout_t *d, int head_offset,
                                                int NH_full)
{
    (void)NH_full; // the dropout element numbers need only this rank's first head
    if (S <= 0 || B <= 0 || NH <= 0 || HD <= 0) return;
    const AttArgs a = att_args(S, B, NH, NG, HD, segments, scale, d, head_offset);
    att_dispatch(dt, HD, [&](auto tag) {
        using Tag = decltype(tag);
        att_forward_launch<typename Tag::type, Tag::hdp>(be, out, state, qkv, a);
    });
}

extern "C" void mc_cuda_local_attention_backward(const mc_backend_t *be, mc_dtype_t dt, void *dqkv,
                                                 void *scratch, const void *dout, const void *qkv,
                                                 const void *out, const void *state, int S, int B,
                                                 int NH, int NG, int HD, const int32_t *segments,
                                                 float scale, const mc_dropout_t *d,
                                                 int head_offset, int NH_full)
{
    (void)NH_full;
    if (S <= 0 || B <= 0 || NH <= 0 || HD <= 0) return;
    const AttArgs a = att_args(S, B, NH, NG, HD, segments, scale, d, head_offset);
    att_dispatch(dt, HD, [&](auto tag) {
        using Tag = decltype(tag);
        att_backward_launch<typename Tag::type, Tag::hdp>(be, dqkv, (float *)scratch, dout, qkv,
                                                          out, (const float *)state, a);
    });
}
