// The MoE router and its losses on the GPU (kernels/moe.h): one thread per token runs the per-token
// arithmetic of kernels/moe_route.h, the code the CPU reference (kernels/cpu/moe_route.c) loops
// over, in the same double precision, so both choose the same experts. Each thread's scratch
// (kernels/moe_route.h's mc_moe_work_t) lives in the backend's scratch, in chunks of tokens.
// Sums over tokens (the aux statistics, the z-loss) run token by token in token order, as the
// CPU's, so they are the CPU's bit for bit; token dropping finds each expert's capacity-th key by
// radix select in one block (no atomics), then fills ties in token order with a block scan.
#include "kernels/cuda/cuda.h"
extern "C" {
#include "base/error.h"
#include "kernels/moe.h"
}

enum { ROUTE_THREADS = 128, CAP_THREADS = 256 };

// The chunk of tokens whose scratch fits the backend's, and where it lies.
typedef struct {
    long tokens; // per chunk
    long nd, ni; // doubles and ints per token
    double *d;
    int *i;
    uint8_t *b;
} chunk_t;

static chunk_t chunk_of(const mc_backend_t *be, int E, int G, long T, size_t reserved)
{
    const mc_cuda_t *c = mc_cuda(be);
    chunk_t k;
    k.nd = mc_moe_work_doubles(E, G), k.ni = mc_moe_work_ints(G);
    const size_t per = (size_t)k.nd * 8 + (size_t)k.ni * 4 + (size_t)E + 8;
    const size_t room = c->scratch_bytes - reserved;
    k.tokens = (long)(room / per);
    if (k.tokens < 1) mc_fatal("the MoE router's scratch for %d experts exceeds the backend's", E);
    if (k.tokens > T) k.tokens = T > 0 ? T : 1;
    char *base = (char *)c->scratch + reserved;
    k.d = (double *)base;
    k.i = (int *)(base + (size_t)k.tokens * k.nd * 8);
    k.b = (uint8_t *)(base + (size_t)k.tokens * (k.nd * 8 + k.ni * 4));
    return k;
}

__device__ static mc_moe_work_t thread_work(const chunk_t &k, long i, int E)
{
    return mc_moe_work(k.d + i * k.nd, k.i + i * k.ni, k.b + i * E, E);
}

__device__ static void load_row(mc_dtype_t dt, const void *x, long t, int E, double *v)
{
    for (int e = 0; e < E; e++) v[e] = mc_moe_load(dt, x, t * E + e);
}

static __global__ void k_route(mc_moe_router_t r, mc_dtype_t rdt, void *probs, uint8_t *map,
                               const void *logits, const float *bias, long t0, long n, chunk_t k)
{
    const long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long t = t0 + i;
    const int E = r.num_experts;
    mc_moe_work_t w = thread_work(k, i, E);
    int idx[MC_MOE_MAX_TOPK];
    double p[MC_MOE_MAX_TOPK];
    load_row(rdt, logits, t, E, w.v);
    mc_moe_route_one(&r, rdt, r.sigmoid ? bias : NULL, &w, idx, p);
    for (int e = 0; e < E; e++) {
        mc_moe_store(rdt, probs, t * E + e, 0);
        map[t * E + e] = 0;
    }
    for (int j = 0; j < r.topk; j++) {
        mc_moe_store(rdt, probs, t * E + idx[j], p[j]);
        map[t * E + idx[j]] = 1;
    }
}

static __global__ void k_route_backward(mc_moe_router_t r, mc_dtype_t rdt, void *dlogits,
                                        const void *dprobs, const void *logits, const float *bias,
                                        const uint8_t *keep, long t0, long n, chunk_t k)
{
    const long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long t = t0 + i;
    const int E = r.num_experts;
    mc_moe_work_t w = thread_work(k, i, E);
    int idx[MC_MOE_MAX_TOPK];
    double p[MC_MOE_MAX_TOPK];
    load_row(rdt, logits, t, E, w.v);
    mc_moe_route_one(&r, rdt, r.sigmoid ? bias : NULL, &w, idx, p);
    load_row(rdt, dprobs, t, E, w.d);
    // the logits' gradient where the logits were: the backward reads only w.d, w.s and w.y
    mc_moe_route_one_backward(&r, rdt, w.d, keep ? keep + t * E : NULL, w.s, w.y, idx, w.v);
    for (int e = 0; e < E; e++) mc_moe_store(rdt, dlogits, t * E + e, w.v[e]);
}

static void check_router(const mc_moe_router_t *r)
{
    const char *why = mc_moe_router_unsupported(r);
    if (why) mc_fatal("MoE router: %s", why);
}

static void cuda_route(const mc_backend_t *be, mc_dtype_t rdt, const mc_moe_router_t *r,
                       void *probs, uint8_t *map, const void *logits, const float *bias, long T)
{
    check_router(r);
    const chunk_t k = chunk_of(be, r->num_experts, r->num_groups, T, 0);
    for (long t0 = 0; t0 < T; t0 += k.tokens) {
        const long n = T - t0 < k.tokens ? T - t0 : k.tokens;
        MC_LAUNCH(mc_cuda_blocks(n, ROUTE_THREADS), ROUTE_THREADS, 0, mc_cuda_stream(be), k_route)
        (*r, rdt, probs, map, logits, bias, t0, n, k);
        MC_CUDA_LAUNCHED();
    }
}

static void cuda_route_backward(const mc_backend_t *be, mc_dtype_t rdt, const mc_moe_router_t *r,
                                void *dlogits, const void *dprobs, const void *logits,
                                const float *bias, const uint8_t *keep, long T)
{
    check_router(r);
    const chunk_t k = chunk_of(be, r->num_experts, r->num_groups, T, 0);
    for (long t0 = 0; t0 < T; t0 += k.tokens) {
        const long n = T - t0 < k.tokens ? T - t0 : k.tokens;
        MC_LAUNCH(mc_cuda_blocks(n, ROUTE_THREADS), ROUTE_THREADS, 0, mc_cuda_stream(be),
                  k_route_backward)
        (*r, rdt, dlogits, dprobs, logits, bias, keep, t0, n, k);
        MC_CUDA_LAUNCHED();
    }
}

// ---- aux loss statistics: per token scores and top-k, then per (group, expert) sums ----

static __global__ void k_aux_scores(mc_dtype_t rdt, int sigmoid, int topk, const void *logits,
                                    int E, long t0, long n, chunk_t k)
{
    const long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    mc_moe_work_t w = thread_work(k, i, E);
    int idx[MC_MOE_MAX_TOPK];
    load_row(rdt, logits, t0 + i, E, w.v);
    mc_moe_aux_scores_one(rdt, sigmoid, E, topk, w.v, w.s, idx);
    for (int e = 0; e < E; e++) w.keep[e] = 0;
    for (int j = 0; j < topk; j++) w.keep[idx[j]] = 1;
}

// acc [G, E] (double) and cnt [G, E] (double) += the chunk's tokens of each group, in order.
static __global__ void k_aux_sums(double *acc, double *cnt, int E, int G, long t0, long n,
                                  chunk_t k)
{
    const long c = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (c >= (long)G * E) return;
    const int g = (int)(c / E), e = (int)(c % E);
    long i = (g - t0 % G + G) % G; // the chunk's first token of group g
    for (; i < n; i += G) {
        mc_moe_work_t w = thread_work(k, i, E);
        acc[c] += w.s[e];
        cnt[c] += w.keep[e];
    }
}

static __global__ void k_aux_store(float *counts, float *psum, const double *acc, const double *cnt,
                                   long n)
{
    const long c = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (c >= n) return;
    psum[c] = (float)acc[c];
    counts[c] = (float)cnt[c];
}

static void cuda_aux_stats(const mc_backend_t *be, mc_dtype_t rdt, int sigmoid, int topk,
                           float *counts, float *psum, const void *logits, long T, int E, int G)
{
    const size_t acc_bytes = 2 * (size_t)G * E * sizeof(double);
    double *acc = (double *)mc_cuda(be)->scratch, *cnt = acc + (size_t)G * E;
    const chunk_t k = chunk_of(be, E, 0, T, (acc_bytes + 255) / 256 * 256);
    const cudaStream_t s = mc_cuda_stream(be);
    MC_CUDA_CHECK(cudaMemsetAsync(acc, 0, acc_bytes, s));
    for (long t0 = 0; t0 < T; t0 += k.tokens) {
        const long n = T - t0 < k.tokens ? T - t0 : k.tokens;
        MC_LAUNCH(mc_cuda_blocks(n, ROUTE_THREADS), ROUTE_THREADS, 0, s, k_aux_scores)
        (rdt, sigmoid, topk, logits, E, t0, n, k);
        MC_CUDA_LAUNCHED();
        MC_LAUNCH(mc_cuda_blocks((long)G * E, ROUTE_THREADS), ROUTE_THREADS, 0, s, k_aux_sums)
        (acc, cnt, E, G, t0, n, k);
        MC_CUDA_LAUNCHED();
    }
    MC_LAUNCH(mc_cuda_blocks((long)G * E, ROUTE_THREADS), ROUTE_THREADS, 0, s, k_aux_store)
    (counts, psum, acc, cnt, (long)G * E);
    MC_CUDA_LAUNCHED();
}

static __global__ void k_aux_backward(mc_dtype_t rdt, int sigmoid, void *dlogits,
                                      const void *logits, const float *counts, float coef, int E,
                                      int G, long t0, long n, chunk_t k)
{
    const long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long t = t0 + i, g = t % G;
    mc_moe_work_t w = thread_work(k, i, E);
    int idx[1];
    load_row(rdt, logits, t, E, w.v);
    mc_moe_aux_scores_one(rdt, sigmoid, E, 1, w.v, w.s, idx);
    for (int e = 0; e < E; e++) w.y[e] = (double)coef * counts[g * E + e], w.d[e] = 0;
    mc_moe_aux_backward_one(rdt, sigmoid, E, w.v, w.s, w.y, w.d);
    for (int e = 0; e < E; e++) {
        const long j = t * E + e;
        const double add = mc_moe_round(rdt, w.d[e]);
        mc_moe_store(rdt, dlogits, j, mc_moe_round(rdt, mc_moe_load(rdt, dlogits, j) + add));
    }
}

static void cuda_aux_backward(const mc_backend_t *be, mc_dtype_t rdt, int sigmoid, void *dlogits,
                              const void *logits, const float *counts, float coef, long T, int E,
                              int G)
{
    const chunk_t k = chunk_of(be, E, 0, T, 0);
    for (long t0 = 0; t0 < T; t0 += k.tokens) {
        const long n = T - t0 < k.tokens ? T - t0 : k.tokens;
        MC_LAUNCH(mc_cuda_blocks(n, ROUTE_THREADS), ROUTE_THREADS, 0, mc_cuda_stream(be),
                  k_aux_backward)
        (rdt, sigmoid, dlogits, logits, counts, coef, E, G, t0, n, k);
        MC_CUDA_LAUNCHED();
    }
}

// ---- z-loss ----

static __global__ void k_z_terms(mc_dtype_t rdt, const void *logits, int E, long t0, long n,
                                 chunk_t k)
{
    const long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    mc_moe_work_t w = thread_work(k, i, E);
    load_row(rdt, logits, t0 + i, E, w.v);
    const double lse = mc_moe_lse(rdt, E, w.v);
    w.s[0] = mc_moe_round(rdt, lse * lse);
}

// acc[0] += the chunk's terms in token order (one thread: the CPU's order)
static __global__ void k_z_sum(double *acc, float *zsum, int E, long n, chunk_t k, int last)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    for (long i = 0; i < n; i++) acc[0] += thread_work(k, i, E).s[0];
    if (last) zsum[0] = (float)acc[0];
}

static void cuda_z_loss(const mc_backend_t *be, mc_dtype_t rdt, float *zsum, const void *logits,
                        long T, int E)
{
    double *acc = (double *)mc_cuda(be)->scratch;
    const chunk_t k = chunk_of(be, E, 0, T, 256);
    const cudaStream_t s = mc_cuda_stream(be);
    MC_CUDA_CHECK(cudaMemsetAsync(acc, 0, sizeof(double), s));
    if (T == 0) MC_CUDA_CHECK(cudaMemsetAsync(zsum, 0, sizeof(float), s));
    for (long t0 = 0; t0 < T; t0 += k.tokens) {
        const long n = T - t0 < k.tokens ? T - t0 : k.tokens;
        MC_LAUNCH(mc_cuda_blocks(n, ROUTE_THREADS), ROUTE_THREADS, 0, s, k_z_terms)
        (rdt, logits, E, t0, n, k);
        MC_CUDA_LAUNCHED();
        MC_LAUNCH(1, 1, 0, s, k_z_sum)(acc, zsum, E, n, k, t0 + n >= T);
        MC_CUDA_LAUNCHED();
    }
}

static __global__ void k_z_backward(mc_dtype_t rdt, void *dlogits, const void *logits, float coef,
                                    int E, long t0, long n, chunk_t k)
{
    const long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long t = t0 + i;
    mc_moe_work_t w = thread_work(k, i, E);
    load_row(rdt, logits, t, E, w.v);
    const double lse = mc_moe_lse(rdt, E, w.v);
    for (int e = 0; e < E; e++) {
        const long j = t * E + e;
        const double g = mc_moe_round(rdt, 2.0 * coef * lse * exp(w.v[e] - lse));
        mc_moe_store(rdt, dlogits, j, mc_moe_round(rdt, mc_moe_load(rdt, dlogits, j) + g));
    }
}

static void cuda_z_loss_backward(const mc_backend_t *be, mc_dtype_t rdt, void *dlogits,
                                 const void *logits, float coef, long T, int E)
{
    const chunk_t k = chunk_of(be, E, 0, T, 0);
    for (long t0 = 0; t0 < T; t0 += k.tokens) {
        const long n = T - t0 < k.tokens ? T - t0 : k.tokens;
        MC_LAUNCH(mc_cuda_blocks(n, ROUTE_THREADS), ROUTE_THREADS, 0, mc_cuda_stream(be),
                  k_z_backward)
        (rdt, dlogits, logits, coef, E, t0, n, k);
        MC_CUDA_LAUNCHED();
    }
}

// ---- token counts and the expert bias ----

static __global__ void k_tokens_per_expert(int32_t *counts, const uint8_t *map, long T, int E)
{
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= E) return;
    int32_t c = 0;
    for (long t = 0; t < T; t++) c += map[t * E + e] != 0;
    counts[e] = c;
}

void mc_cuda_moe_tokens_per_expert(const mc_backend_t *be, int32_t *counts, const uint8_t *map,
                                   long T, int E)
{
    MC_LAUNCH(mc_cuda_blocks(E, ROUTE_THREADS), ROUTE_THREADS, 0, mc_cuda_stream(be),
              k_tokens_per_expert)
    (counts, map, T, E);
    MC_CUDA_LAUNCHED();
}

// One thread, the CPU's fp32 arithmetic in its order.
static __global__ void k_expert_bias(float *bias, const float *counts, int E, float rate)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    float sum = 0;
    for (int e = 0; e < E; e++) sum = __fadd_rn(sum, counts[e]);
    const float mean = __fdiv_rn(sum, (float)E);
    for (int e = 0; e < E; e++) {
        const float off = __fsub_rn(mean, counts[e]);
        bias[e] = __fadd_rn(bias[e], __fmul_rn((float)((off > 0) - (off < 0)), rate));
    }
}

static void cuda_expert_bias_update(const mc_backend_t *be, float *bias, const float *counts, int E,
                                    float rate)
{
    MC_LAUNCH(1, 1, 0, mc_cuda_stream(be), k_expert_bias)(bias, counts, E, rate);
    MC_CUDA_LAUNCHED();
}

// ---- capacity: one block per expert ----

__device__ static uint64_t cap_key(mc_dtype_t rdt, const void *probs, const uint8_t *map, long t,
                                   int E, int e, int by_position)
{
    return mc_moe_key(by_position ? (double)map[t * E + e] : mc_moe_load(rdt, probs, t * E + e));
}

// The key of expert e's capacity-th largest entry (8 radix passes of 8 bits from the top: each
// thread counts one digit value, thread 0 picks), and how many of the entries equal to it are
// in (the ones before them in token order).
__device__ static void cap_select(mc_dtype_t rdt, const void *probs, const uint8_t *map, long T,
                                  int E, int e, long cap, int by_position, uint64_t *kth,
                                  long *ties)
{
    __shared__ long cnt[256];
    __shared__ uint64_t prefix, mask;
    __shared__ long remaining;
    if (threadIdx.x == 0) prefix = 0, mask = 0, remaining = cap;
    __syncthreads();
    for (int shift = 56; shift >= 0; shift -= 8) {
        const uint64_t d = threadIdx.x;
        long c = 0;
        for (long t = 0; t < T; t++) {
            const uint64_t key = cap_key(rdt, probs, map, t, E, e, by_position);
            c += (key & mask) == prefix && ((key >> shift) & 0xff) == d;
        }
        cnt[threadIdx.x] = c;
        __syncthreads();
        if (threadIdx.x == 0) {
            long acc = 0;
            for (int b = 255; b >= 0; b--) {
                if (acc + cnt[b] >= remaining) {
                    prefix |= (uint64_t)b << shift, mask |= (uint64_t)0xff << shift;
                    remaining -= acc;
                    break;
                }
                acc += cnt[b];
            }
        }
        __syncthreads();
    }
    *kth = prefix, *ties = remaining;
}

static __global__ void k_capacity(mc_dtype_t rdt, void *probs_out, uint8_t *keep, const void *probs,
                                  const uint8_t *map, long T, int E, long cap, int by_position,
                                  int pad)
{
    const int e = blockIdx.x;
    __shared__ int scan[CAP_THREADS];
    __shared__ long taken;
    uint64_t kth = 0;
    long ties = 0;
    const bool all = cap >= T;
    if (!all) cap_select(rdt, probs, map, T, E, e, cap, by_position, &kth, &ties);
    if (threadIdx.x == 0) taken = 0;
    __syncthreads();
    for (long base = 0; base < T; base += CAP_THREADS) {
        const long t = base + threadIdx.x;
        const uint64_t key = t < T ? cap_key(rdt, probs, map, t, E, e, by_position) : 0;
        const int tie = t < T && !all && key == kth;
        scan[threadIdx.x] = tie;
        __syncthreads();
        for (int off = 1; off < CAP_THREADS; off *= 2) { // inclusive scan (Hillis-Steele)
            const int v = (int)threadIdx.x >= off ? scan[threadIdx.x - off] : 0;
            __syncthreads();
            scan[threadIdx.x] += v;
            __syncthreads();
        }
        if (t < T) {
            const bool in = all || key > kth || (tie && taken + scan[threadIdx.x] <= ties);
            const long j = t * E + e;
            keep[j] = in ? (pad ? 1 : map[j] != 0) : 0;
            mc_moe_store(rdt, probs_out, j, keep[j] ? mc_moe_load(rdt, probs, j) : 0.0);
        }
        __syncthreads();
        if (threadIdx.x == 0) taken += scan[CAP_THREADS - 1];
        __syncthreads();
    }
}

static void cuda_capacity(const mc_backend_t *be, mc_dtype_t rdt, void *probs_out, uint8_t *keep,
                          const void *probs, const uint8_t *map, long T, int E, long capacity,
                          int by_position, int pad)
{
    if (E == 0 || T == 0) return;
    MC_LAUNCH(E, CAP_THREADS, 0, mc_cuda_stream(be), k_capacity)
    (rdt, probs_out, keep, probs, map, T, E, capacity, by_position, pad);
    MC_CUDA_LAUNCHED();
}

// The permutation, chunk sort and grouped GEMM are in moe_permute.cu and moe_gemm.cu.
extern const mc_moe_ops_t mc_cuda_moe_ops;
const mc_moe_ops_t mc_cuda_moe_ops = {
    cuda_route,
    cuda_route_backward,
    cuda_capacity,
    cuda_aux_stats,
    cuda_aux_backward,
    cuda_z_loss,
    cuda_z_loss_backward,
    mc_cuda_moe_tokens_per_expert,
    cuda_expert_bias_update,
    mc_cuda_moe_permute_map,
    mc_cuda_moe_permute,
    mc_cuda_moe_unpermute,
    mc_cuda_moe_unpermute_backward,
    mc_cuda_moe_sort_chunks,
    mc_cuda_moe_scale_rows,
    mc_cuda_moe_scale_rows_backward,
    mc_cuda_moe_grouped_linear_forward,
    mc_cuda_moe_grouped_linear_backward,
};
