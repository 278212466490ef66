// Token + position embedding on a vocab shard (backend.h): tokens/positions are [b, s], rows of
// out and dout are [s, b] (row n = s_i * B + b_i reads tokens[b_i * S + s_i]).
//
// forward: one block per output row; out = (token in the shard ? wte row : 0) (+ wpe row), in
//          fp32, rounded once (the CPU's order: the word row, then "+= position row").
// backward: dst[key] += dout[n] for every row n whose key (token - vocab_start, or position) is
//          valid. Deterministic and exactly the CPU's arithmetic: the rows' keys are sorted
//          with a stable radix sort (CUB), so each key's rows stay in [s, b] order; then for
//          each run of equal keys, one thread per column loads dst's element once, adds the
//          dout rows' in that order in fp32 and stores once (one rounding for a 16-bit gdt,
//          like the CPU backend's fp32 round trip). The sort's buffers live in the backend's scratch; a micro-batch with
//          more rows than fit (more than a million or so with the 32 MiB scratch) is done in
//          consecutive row ranges, which for a 16-bit gdt rounds once per range.
#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/common.cuh"

extern "C" {
#include "base/error.h"
}

template <typename T, int VEC>
static __global__ void k_embed_forward(T *out, const int32_t *tokens, const int32_t *positions,
                                       const T *wte, const T *wpe, int S, int B, int H,
                                       int vocab_start, int V)
{
    const long rows = (long)S * B;
    for (long n = blockIdx.x; n < rows; n += gridDim.x) {
        const long s = n / B, b = n % B;
        const long t = (long)tokens[b * S + s] - vocab_start;
        const bool in_shard = t >= 0 && t < V;
        const T *wp = wpe ? wpe + (long)positions[b * S + s] * H : NULL;
        for (long i0 = (long)threadIdx.x * VEC; i0 < H; i0 += (long)blockDim.x * VEC) {
            float v[VEC];
            if (in_shard) {
                mc_load_vec<T, VEC>(v, wte + t * H, i0, H);
            } else {
#pragma unroll
                for (int k = 0; k < VEC; k++) v[k] = 0.0f;
            }
            if (wp) {
                float p[VEC];
                mc_load_vec<T, VEC>(p, wp, i0, H);
#pragma unroll
                for (int k = 0; k < VEC; k++) v[k] = __fadd_rn(v[k], p[k]);
            }
            mc_store_vec<T, VEC>(out + n * H, i0, H, v);
        }
    }
}

template <typename T>
static void embed_forward(const mc_backend_t *be, T *out, const int32_t *tokens,
                          const int32_t *positions, const T *wte, const T *wpe, int S, int B, int H,
                          int vocab_start, int V)
{
    MC_ROW_LAUNCH(k_embed_forward, T, (long)S * B, 128,
                  H % (16 / sizeof(T)) == 0 && mc_cuda_vec_ok(out, wte, wpe), out, tokens,
                  positions, wte, wpe, S, B, H, vocab_start, V);
}

void mc_cuda_embedding_forward(const mc_backend_t *be, mc_dtype_t dt, void *out,
                               const int32_t *tokens, const int32_t *positions, const void *wte,
                               const void *wpe, int S, int B, int H, int vocab_start, int V)
{
    if (S <= 0 || B <= 0 || H <= 0) return;
    MC_CUDA_DISPATCH(dt, T, "embedding_forward",
                     embed_forward<T>(be, (T *)out, tokens, positions, (const T *)wte,
                                      (const T *)wpe, S, B, H, vocab_start, V))
}

// ---- backward ----

// keys[i], rows[i] for rows n = r0 + i of [s, b] order: key = src[b*S + s] - offset when it is
// in [0, bound), else `invalid` (sorted after every valid key, then skipped).
static __global__ void k_make_keys(unsigned *keys, int *rows, const int32_t *src, long r0,
                                   long count, int S, int B, long offset, long bound,
                                   unsigned invalid)
{
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < count;
         i += (long)gridDim.x * blockDim.x) {
        const long n = r0 + i, s = n / B, b = n % B;
        const long k = (long)src[b * S + s] - offset;
        keys[i] = (k >= 0 && k < bound) ? (unsigned)k : invalid;
        rows[i] = (int)n;
    }
}

// One block per (sorted position i that starts a run of equal valid keys, slice of blockDim.x
// columns): dst[key] += the run's dout rows, in their (stable, [s, b]) order, one column per
// thread, in fp32 from dst's stored value. The columns spread over blockIdx.y, so a frequent
// token (EOD in packed documents, a padding id) is H / blockDim.x blocks whose threads each add
// one column of its rows, not one block adding whole rows for every repeat (the order of each
// column's sum, which makes it the CPU's bit for bit, is fixed: its chain cannot be split).
enum { ADD_THREADS = 128 };

template <typename T, typename TG>
static __global__ void k_add_runs(TG *dst, const T *dout, const unsigned *keys, const int *rows,
                                  long count, int H, unsigned invalid)
{
    const long c = (long)blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= H) return;
    for (long i = blockIdx.x; i < count; i += gridDim.x) {
        const unsigned key = keys[i];
        if (key == invalid || (i > 0 && keys[i - 1] == key)) continue;
        float acc = mc_to_f32(dst[(long)key * H + c]);
        for (long j = i; j < count && keys[j] == key; j++)
            acc = __fadd_rn(acc, mc_to_f32(dout[(long)rows[j] * H + c]));
        dst[(long)key * H + c] = mc_from_f32<TG>(acc);
    }
}

static size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

// The scratch bytes for sorting `count` keys: keys and rows in and out, then CUB's storage.
static size_t sort_bytes(long count, int end_bit, size_t *cub_bytes)
{
    size_t tb = 0;
    MC_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(NULL, tb, (const unsigned *)NULL,
                                                  (unsigned *)NULL, (const int *)NULL, (int *)NULL,
                                                  (int)count, 0, end_bit));
    *cub_bytes = tb;
    return 4 * align256((size_t)count * 4) + align256(tb);
}

template <typename T, typename TG>
static void scatter_add_rows(const mc_backend_t *be, TG *dst, const T *dout, const int32_t *src,
                             int S, int B, int H, long offset, long bound, unsigned invalid,
                             int end_bit)
{
    const mc_cuda_t *cu = mc_cuda(be);
    const cudaStream_t st = mc_cuda_stream(be);
    const long N = (long)S * B;
    long R = N; // rows per range
    size_t cub_bytes = 0;
    while (sort_bytes(R, end_bit, &cub_bytes) > cu->scratch_bytes) {
        if (R == 1)
            mc_fatal("internal error: the CUDA backend's scratch (%zu bytes) cannot sort one key",
                     cu->scratch_bytes);
        R = (R + 1) / 2;
    }
    char *sc = (char *)cu->scratch;
    const size_t slot = align256((size_t)R * 4);
    unsigned *keys_in = (unsigned *)sc, *keys_out = (unsigned *)(sc + slot);
    int *rows_in = (int *)(sc + 2 * slot), *rows_out = (int *)(sc + 3 * slot);
    void *cub_tmp = sc + 4 * slot;
    for (long r0 = 0; r0 < N; r0 += R) {
        const long count = N - r0 < R ? N - r0 : R;
        MC_LAUNCH(mc_cuda_ew_blocks(count), MC_EW_THREADS, 0, st, k_make_keys)
        (keys_in, rows_in, src, r0, count, S, B, offset, bound, invalid);
        MC_CUDA_LAUNCHED();
        size_t tb = cub_bytes;
        MC_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(cub_tmp, tb, keys_in, keys_out, rows_in,
                                                      rows_out, (int)count, 0, end_bit, st));
        const dim3 blocks(mc_cuda_blocks(count, 1),
                          (unsigned)((H + ADD_THREADS - 1) / ADD_THREADS));
        MC_LAUNCH(blocks, ADD_THREADS, 0, st, k_add_runs<T, TG>)
        (dst, dout, keys_out, rows_out, count, H, invalid);
        MC_CUDA_LAUNCHED();
    }
}

// Bits a radix sort needs for keys in [0, x].
static int bits_for(unsigned long x)
{
    int b = 1;
    while (b < 32 && (x >> b) != 0) b++;
    return b;
}

void mc_cuda_embedding_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dwte,
                                void *dwpe, const void *dout, const int32_t *tokens,
                                const int32_t *positions, int S, int B, int H, int vocab_start,
                                int V)
{
    if (S <= 0 || B <= 0 || H <= 0) return;
    MC_CUDA_DISPATCH(
        dt, T, "embedding_backward",
        MC_CUDA_DISPATCH(
            gdt, TG, "embedding_backward",
            // words: keys token - vocab_start in [0, V); V itself marks "outside the shard"
            if (dwte && V > 0)
                scatter_add_rows<T, TG>(be, (TG *)dwte, (const T *)dout, tokens, S, B, H,
                                        vocab_start, V, (unsigned)V, bits_for((unsigned long)V));
            // positions: every non-negative position is a row of wpe (the CPU does not bound them)
            if (dwpe) scatter_add_rows<T, TG>(be, (TG *)dwpe, (const T *)dout, positions, S, B, H,
                                              0, 0x7fffffffL, 0x7fffffffu, 31)))
}
