// Causal self-attention on cuDNN's fused flash attention: kernels/cuda/cudnn_sdpa.h.
//
// Why the pattern of primitive operations and not CUDNN_BACKEND_OPERATION_SDPA_FWD/BWD: in cuDNN
// 9.19 those descriptors have no causal mask and no dropout attribute; the Graph API's fused flash
// attention pattern (the one cudnn-frontend emits below 9.21) expresses both and runs on every
// cuDNN 9 (docs/ARCHITECTURE.md, "Attention on cuDNN").
//
// Tensors are 4-D [b, h, s, d] views of Megatron's buffers: qkv [s, b, ng (q-per-group + 2) hd]
// (row width W, a group's heads (q-per-group + 2) hd apart), out and dout [s, b, h hd], the
// statistics [b, h, s] fp32. Q is such a view of qkv for multi-head attention; with grouped-query
// attention the query heads are not one stride apart, and the caller passes a copy.
#ifdef MC_WITH_CUDNN

#include <stdio.h>
#include <string.h>

#include <vector>

#include "kernels/cuda/cudnn_graph.h"
#include "kernels/cuda/cudnn_sdpa.h"

extern "C" {
#include "base/error.h"
}

namespace
{

// Unique ids of the tensors in memory (and by value); virtual tensors count from 100.
enum {
    U_Q = 1,
    U_KT,
    U_V,
    U_O,
    U_STATS,
    U_SCALE,
    U_NINF,
    U_DSCALE,
    U_SEED,
    U_OFFSET,
    U_DO,
    U_DSCALE_INV,
    U_SUM,
    U_DQ,
    U_DK,
    U_DV,
    U_VT,
    U_SKV, // bottom-right alignment: the key and query lengths, by value
    U_SQ,
};

cudnnHandle_t g_handle;

cudnnDataType_t dnn_type(mc_dtype_t dt)
{
    return dt == MC_DT_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
}

// A view: dims, strides (elements) and the element offset from its buffer.
struct View {
    int64_t dims[4], strides[4];
    int64_t off;
};

struct Views {
    View q, dq, kt, k, v, vt, o, rows, sum;
    int64_t ss[4], ts[4], rows_dims[4], bhsd[4], bhkd[4], transposed[4];
};

// The views of a key (their layouts: this file's header; a block's keys and values in the kv
// layout [Sk, b, NG*2*HD] and its statistics in [S, b, NH]).
Views views_of(const mc_sdpa_key &k)
{
    const int64_t B = k.B, NH = k.NH, NG = k.NG, S = k.S, D = k.HD, QPG = NH / NG;
    const int64_t Sk = k.block ? k.Sk : k.S;
    const int64_t W = NG * (QPG + 2) * D, gs = (QPG + 2) * D, R = NH * D;
    Views v;
    v.q = QPG == 1 ? View{{B, NH, S, D}, {W, gs, B * W, 1}, 0}
                   : View{{B, NH, S, D}, {R, D, B * R, 1}, 0};
    if (k.block) {
        const int64_t KW = NG * 2 * D; // a kv row of one batch row
        v.kt = {{B, NG, D, Sk}, {KW, 2 * D, 1, B * KW}, 0};
        v.k = {{B, NG, Sk, D}, {KW, 2 * D, B * KW, 1}, 0};
        v.v = {{B, NG, Sk, D}, {KW, 2 * D, B * KW, 1}, D};
        v.vt = {{B, NG, D, Sk}, {KW, 2 * D, 1, B * KW}, D};
        v.rows = {{B, NH, S, 1}, {NH, 1, B * NH, 1}, 0};
    } else {
        v.kt = {{B, NG, D, S}, {W, gs, 1, B * W}, QPG * D};
        v.k = {{B, NG, S, D}, {W, gs, B * W, 1}, QPG * D};
        v.v = {{B, NG, S, D}, {W, gs, B * W, 1}, (QPG + 1) * D};
        v.vt = {{B, NG, D, S}, {W, gs, 1, B * W}, (QPG + 1) * D};
        v.rows = {{B, NH, S, 1}, {NH * S, S, 1, 1}, 0};
    }
    v.o = {{B, NH, S, D}, {R, D, B * R, 1}, 0};
    v.dq = k.block ? v.o : v.q; // a block's dQ: dense, as its fp32 accumulator
    v.sum = {{B, NH, S, 1}, {NH * S, S, 1, 1}, 0};
    const int64_t ss[4] = {B, NH, S, Sk}, ts[4] = {B, NH, Sk, S}, rows[4] = {B, NH, S, 1},
                  bhsd[4] = {B, NH, S, D}, bhkd[4] = {B, NH, Sk, D},
                  tr[4] = {NH * S * Sk, S * Sk, 1, Sk}; // [b, h, kv, q] over a [b, h, q, kv] tensor
    memcpy(v.ss, ss, sizeof(ss)), memcpy(v.ts, ts, sizeof(ts));
    memcpy(v.rows_dims, rows, sizeof(rows));
    memcpy(v.bhsd, bhsd, sizeof(bhsd)), memcpy(v.bhkd, bhkd, sizeof(bhkd));
    memcpy(v.transposed, tr, sizeof(tr));
    return v;
}

// Builds a key's two graphs with a counter of virtual ids.
struct Pattern {
    const mc_sdpa_key &k;
    mc_dnn_builder &b;
    const Views v;
    int64_t next = 100;
    mc_dnn_desc_t scale, ninf, dscale = nullptr, seed = nullptr, offset = nullptr;
    mc_dnn_desc_t skv = nullptr, sq = nullptr;
    Pattern(const mc_sdpa_key &key, mc_dnn_builder &bl) : k(key), b(bl), v(views_of(key))
    {
        scale = b.scalar(U_SCALE);
        ninf = b.scalar(U_NINF);
        if (k.causal && k.bottom_right) {
            const int64_t one[4] = {1, 1, 1, 1};
            skv = b.tensor(U_SKV, CUDNN_DATA_INT32, one, one, false, true, 4);
            sq = b.tensor(U_SQ, CUDNN_DATA_INT32, one, one, false, true, 4);
        }
        if (k.p > 0) {
            const int64_t one[4] = {1, 1, 1, 1};
            dscale = b.scalar(U_DSCALE);
            seed = b.tensor(U_SEED, CUDNN_DATA_INT64, one, one, false, false, 8);
            offset = b.tensor(U_OFFSET, CUDNN_DATA_INT64, one, one, false, false, 8);
        }
    }
    mc_dnn_desc_t mem(int64_t uid, const View &x, bool fp32 = false)
    {
        return b.tensor(uid, fp32 ? CUDNN_DATA_FLOAT : dnn_type(k.dt), x.dims, x.strides, false,
                        false, 16);
    }
    mc_dnn_desc_t virt(const int64_t dims[4], cudnnDataType_t dt = CUDNN_DATA_FLOAT)
    {
        return b.virt(next++, dims, dt);
    }
    mc_dnn_desc_t transposed(mc_dnn_desc_t x, std::vector<mc_dnn_desc_t> &ops)
    {
        mc_dnn_desc_t y = b.tensor(next++, dnn_type(k.dt), v.ts, v.transposed, true);
        ops.push_back(b.reshape(x, y));
        return y;
    }
    // Megatron's causal mask (key j visible from query i iff j <= i), masked scores -inf; a
    // block without a mask passes s on. Bottom-right alignment shifts the diagonal as the
    // frontend's graph does: the row index plus s_kv minus s_q (INT32, by value).
    mc_dnn_desc_t causal(mc_dnn_desc_t s, std::vector<mc_dnn_desc_t> &ops)
    {
        if (!k.causal) return s;
        mc_dnn_desc_t row = virt(v.ss, CUDNN_DATA_INT32), col = virt(v.ss, CUDNN_DATA_INT32);
        mc_dnn_desc_t vis = virt(v.ss, CUDNN_DATA_BOOLEAN), y = virt(v.ss);
        ops.push_back(
            b.pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, row, CUDNN_DATA_FLOAT, 2));
        if (k.bottom_right) {
            mc_dnn_desc_t plus = virt(v.ss, CUDNN_DATA_INT32),
                          shifted = virt(v.ss, CUDNN_DATA_INT32);
            ops.push_back(
                b.pointwise(CUDNN_POINTWISE_ADD, row, skv, nullptr, plus, CUDNN_DATA_INT32));
            ops.push_back(
                b.pointwise(CUDNN_POINTWISE_SUB, plus, sq, nullptr, shifted, CUDNN_DATA_INT32));
            row = shifted;
        }
        ops.push_back(
            b.pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, col, CUDNN_DATA_FLOAT, 3));
        ops.push_back(
            b.pointwise(CUDNN_POINTWISE_CMP_GE, row, col, nullptr, vis, CUDNN_DATA_BOOLEAN));
        ops.push_back(b.pointwise(CUDNN_POINTWISE_BINARY_SELECT, s, ninf, vis, y));
        return y;
    }
    // x times the dropout mask (the RNG op's Bernoulli(1 - p) draws) and 1/(1-p).
    mc_dnn_desc_t dropped(mc_dnn_desc_t x, mc_dnn_desc_t mask, cudnnDataType_t out,
                          std::vector<mc_dnn_desc_t> &ops)
    {
        mc_dnn_desc_t m = virt(v.ss), y = virt(v.ss, out);
        ops.push_back(b.pointwise(CUDNN_POINTWISE_MUL, x, mask, nullptr, m));
        ops.push_back(b.pointwise(CUDNN_POINTWISE_MUL, m, dscale, nullptr, y));
        return y;
    }
    mc_dnn_desc_t mask(std::vector<mc_dnn_desc_t> &ops)
    {
        mc_dnn_desc_t r = virt(v.ss);
        ops.push_back(b.bernoulli(r, seed, offset, 1.0 - (double)k.p));
        return r;
    }
    // out = a x (query-head operand); summed over each group's query heads when NG < NH.
    void grouped(mc_dnn_desc_t a, mc_dnn_desc_t x, mc_dnn_desc_t out,
                 std::vector<mc_dnn_desc_t> &ops)
    {
        if (k.NG == k.NH) {
            ops.push_back(b.matmul(a, x, out));
            return;
        }
        mc_dnn_desc_t full = virt(v.bhkd, dnn_type(k.dt));
        ops.push_back(b.matmul(a, x, full));
        ops.push_back(b.reduction(CUDNN_REDUCE_TENSOR_ADD, full, out));
    }
};

// O = dropout(softmax(scale Q K^T, causal)) V; Stats = each row's max + log(sum exp).
std::vector<mc_dnn_desc_t> forward_graph(Pattern &g)
{
    mc_dnn_builder &b = g.b;
    const Views &v = g.v;
    std::vector<mc_dnn_desc_t> ops;
    mc_dnn_desc_t q = g.mem(U_Q, v.q), kt = g.mem(U_KT, v.kt), val = g.mem(U_V, v.v),
                  o = g.mem(U_O, v.o);
    mc_dnn_desc_t stats = g.mem(U_STATS, v.rows, true);
    mc_dnn_desc_t s = g.virt(v.ss), s2 = g.virt(v.ss);
    ops.push_back(b.matmul(q, kt, s));
    ops.push_back(b.pointwise(CUDNN_POINTWISE_MUL, s, g.scale, nullptr, s2));
    mc_dnn_desc_t s3 = g.causal(s2, ops);
    // the softmax as the pattern writes it, with its statistics
    mc_dnn_desc_t mx = g.virt(v.rows_dims), d = g.virt(v.ss), e = g.virt(v.ss),
                  z = g.virt(v.rows_dims);
    mc_dnn_desc_t lz = g.virt(v.rows_dims);
    mc_dnn_desc_t p = g.virt(v.ss, g.k.p > 0 ? CUDNN_DATA_FLOAT : dnn_type(g.k.dt));
    ops.push_back(b.reduction(CUDNN_REDUCE_TENSOR_MAX, s3, mx));
    ops.push_back(b.pointwise(CUDNN_POINTWISE_SUB, s3, mx, nullptr, d));
    ops.push_back(b.pointwise(CUDNN_POINTWISE_EXP, d, nullptr, nullptr, e));
    ops.push_back(b.reduction(CUDNN_REDUCE_TENSOR_ADD, e, z));
    ops.push_back(b.pointwise(CUDNN_POINTWISE_LOG, z, nullptr, nullptr, lz));
    ops.push_back(b.pointwise(CUDNN_POINTWISE_ADD, mx, lz, nullptr, stats));
    ops.push_back(b.pointwise(CUDNN_POINTWISE_DIV, e, z, nullptr, p));
    if (g.k.p > 0) p = g.dropped(p, g.mask(ops), dnn_type(g.k.dt), ops);
    ops.push_back(b.matmul(p, val, o));
    return ops;
}

// dQ, dK, dV from dO with the forward's Stats: P = exp(scale Q K^T - Stats) recomputed, the
// dO.O row sums (scaled by 1-p with dropout, which dS's 1/(1-p) undoes) into the scratch.
std::vector<mc_dnn_desc_t> backward_graph(Pattern &g)
{
    mc_dnn_builder &b = g.b;
    const Views &v = g.v;
    std::vector<mc_dnn_desc_t> ops;
    mc_dnn_desc_t q = g.mem(U_Q, v.q), kt = g.mem(U_KT, v.kt), vt = g.mem(U_VT, v.vt),
                  o = g.mem(U_O, v.o);
    mc_dnn_desc_t dout = g.mem(U_DO, v.o), stats = g.mem(U_STATS, v.rows, true),
                  sum = g.mem(U_SUM, v.sum, true);
    mc_dnn_desc_t dq = g.mem(U_DQ, v.dq), dk = g.mem(U_DK, v.k), dv = g.mem(U_DV, v.v),
                  inv = b.scalar(U_DSCALE_INV);
    mc_dnn_desc_t doo = g.virt(v.bhsd), dsum = g.virt(v.rows_dims);
    ops.push_back(b.pointwise(CUDNN_POINTWISE_MUL, dout, o, nullptr, doo));
    ops.push_back(b.reduction(CUDNN_REDUCE_TENSOR_ADD, doo, dsum));
    ops.push_back(b.pointwise(CUDNN_POINTWISE_MUL, dsum, inv, nullptr, sum));
    mc_dnn_desc_t s = g.virt(v.ss), s2 = g.virt(v.ss), s3 = g.virt(v.ss), e = g.virt(v.ss);
    ops.push_back(b.matmul(q, kt, s));
    ops.push_back(b.pointwise(CUDNN_POINTWISE_MUL, s, g.scale, nullptr, s2));
    ops.push_back(b.pointwise(CUDNN_POINTWISE_SUB, s2, stats, nullptr, s3));
    ops.push_back(b.pointwise(CUDNN_POINTWISE_EXP, g.causal(s3, ops), nullptr, nullptr, e));
    mc_dnn_desc_t mask = g.k.p > 0 ? g.mask(ops) : nullptr;
    mc_dnn_desc_t pd = mask ? g.dropped(e, mask, CUDNN_DATA_FLOAT, ops) : e;
    g.grouped(g.transposed(pd, ops), dout, dv, ops); // dV = P^T dO
    mc_dnn_desc_t dp = g.virt(v.ss), dp2 = g.virt(v.ss), ds = g.virt(v.ss), ds2 = g.virt(v.ss);
    ops.push_back(b.matmul(dout, vt, dp)); // dP = dO V^T
    if (mask) {
        mc_dnn_desc_t m = g.virt(v.ss);
        ops.push_back(b.pointwise(CUDNN_POINTWISE_MUL, dp, mask, nullptr, m));
        dp = m;
    }
    ops.push_back(b.pointwise(CUDNN_POINTWISE_SUB, dp, sum, nullptr, dp2));
    ops.push_back(b.pointwise(CUDNN_POINTWISE_MUL, dp2, e, nullptr, ds));
    if (mask) {
        mc_dnn_desc_t m = g.virt(v.ss);
        ops.push_back(b.pointwise(CUDNN_POINTWISE_MUL, ds, g.dscale, nullptr, m));
        ds = m;
    }
    ops.push_back(b.pointwise(CUDNN_POINTWISE_MUL, ds, g.scale, nullptr, ds2)); // dS
    g.grouped(g.transposed(ds2, ops), q, dk, ops);                              // dK = dS^T Q
    mc_dnn_desc_t kn = b.tensor(g.next++, dnn_type(g.k.dt), v.k.dims, v.k.strides, true);
    ops.push_back(b.reshape(kt, kn));
    ops.push_back(b.matmul(ds2, kn, dq)); // dQ = dS K
    return ops;
}

} // namespace

struct mc_sdpa_plans {
    mc_sdpa_key key;
    mc_dnn_builder fwd, bwd;
    mc_dnn_desc_t fplan = nullptr, bplan = nullptr;
    int64_t fws = 0, bws = 0;
    std::string why; // when a plan could not be made
};

// The cache lives until the process ends and is never destroyed: static destructors run at exit in
// no set order with cuDNN's own teardown, and a descriptor destroyed after it is a crash.
static std::vector<mc_sdpa_plans *> &g_plans = *new std::vector<mc_sdpa_plans *>;

int mc_cudnn_start(const mc_backend_t *be, char *version, size_t vn, char *why, size_t n)
{
    const size_t v = cudnnGetVersion();
    snprintf(version, vn, "%zu.%zu.%zu", v / 10000, v / 100 % 100, v % 100);
    if (g_handle) return 0;
    cudnnStatus_t st = cudnnCreate(&g_handle);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnSetStream(g_handle, mc_cuda_stream(be));
    if (st != CUDNN_STATUS_SUCCESS) {
        char msg[512] = "";
        cudnnGetLastErrorString(msg, sizeof(msg));
        snprintf(why, n, "cuDNN %s does not start: %s%s%s", version, cudnnGetErrorString(st),
                 msg[0] ? ": " : "", msg);
        if (g_handle) cudnnDestroy(g_handle);
        g_handle = nullptr;
        return -1;
    }
    return 0;
}

const mc_sdpa_plans *mc_cudnn_sdpa_plans(const mc_sdpa_key &key, std::string *why)
{
    for (const mc_sdpa_plans *p : g_plans)
        if (p->key == key) {
            if (!p->fplan || !p->bplan) *why = p->why;
            return p->fplan && p->bplan ? p : nullptr;
        }
    mc_sdpa_plans *p = new mc_sdpa_plans;
    p->key = key;
    Pattern f(key, p->fwd), b(key, p->bwd);
    std::vector<mc_dnn_desc_t> fops = forward_graph(f), bops = backward_graph(b);
    if (p->fwd.ok()) p->fplan = p->fwd.plan(g_handle, fops, &p->fws);
    if (p->bwd.ok() && p->fplan) p->bplan = p->bwd.plan(g_handle, bops, &p->bws);
    if (!p->fplan) p->why = "the forward graph: " + p->fwd.error;
    else if (!p->bplan) p->why = "the backward graph: " + p->bwd.error;
    g_plans.push_back(p);
    if (!p->fplan || !p->bplan) *why = p->why;
    return p->fplan && p->bplan ? p : nullptr;
}

size_t mc_cudnn_sdpa_workspace(const mc_sdpa_plans *p)
{
    return (size_t)(p->fws > p->bws ? p->fws : p->bws);
}

// Runs a plan with the (uid, pointer) pairs; a failure ends the job naming cuDNN's reason.
static void execute(mc_dnn_desc_t plan, const std::vector<int64_t> &uids,
                    const std::vector<void *> &ptrs, void *ws, const char *what)
{
    mc_dnn_builder b; // owns the variant pack
    mc_dnn_desc_t vp = nullptr;
    cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    if (st == CUDNN_STATUS_SUCCESS) b.owned.push_back(vp);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
                                      (int64_t)uids.size(), uids.data());
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                      CUDNN_TYPE_VOID_PTR, (int64_t)ptrs.size(), ptrs.data());
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
                                      &ws);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(vp);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendExecute(g_handle, plan, vp);
    if (st != CUDNN_STATUS_SUCCESS) {
        char msg[1024] = "";
        cudnnGetLastErrorString(msg, sizeof(msg));
        mc_fatal("cuDNN's attention %s failed: %s%s%s", what, cudnnGetErrorString(st),
                 msg[0] ? ": " : "", msg);
    }
}

// The dropout mask's seed and offset into the scratch, ahead of the plan on the stream.
static void *put_rng(const mc_backend_t *be, const mc_sdpa_call &c, size_t at)
{
    const int64_t rng[2] = {c.seed, 0};
    void *p = (char *)c.scratch + at;
    MC_CUDA_CHECK(cudaMemcpyAsync(p, rng, sizeof(rng), cudaMemcpyHostToDevice, mc_cuda_stream(be)));
    return p;
}

static const char *elem(const void *base, int64_t off, mc_dtype_t dt)
{
    return (const char *)base + off * (int64_t)mc_dtype_size(dt);
}

// The scratch layout of a call of the plans' key.
static mc_attention_scratch_t scratch_of(const mc_sdpa_plans *p)
{
    const mc_sdpa_key &k = p->key;
    mc_attention_spec_t s = {};
    s.dt = k.dt, s.S = k.S, s.NH = k.NH, s.NG = k.NG, s.HD = k.HD;
    mc_attention_scratch_t sc;
    mc_attention_cudnn_scratch(&s, k.B, mc_cudnn_sdpa_workspace(p), &sc);
    return sc;
}

void mc_cudnn_sdpa_forward(const mc_backend_t *be, const mc_sdpa_plans *p, const mc_sdpa_call &c)
{
    const mc_sdpa_key &k = p->key;
    const Views v = views_of(k);
    const mc_attention_scratch_t sc = scratch_of(p);
    float scale = c.scale, ninf = -INFINITY, dscale = k.p > 0 ? 1.0f / (1.0f - k.p) : 1.0f;
    const void *kv = k.block ? c.kv : c.qkv;
    void *q = (void *)c.q, *kt = (void *)elem(kv, v.kt.off, k.dt);
    std::vector<int64_t> uids = {U_Q, U_KT, U_V, U_O, U_STATS, U_SCALE};
    std::vector<void *> ptrs = {q, kt, (void *)elem(kv, v.v.off, k.dt), c.out, c.stats, &scale};
    int32_t lens[2] = {k.Sk, k.S}; // bottom-right alignment's s_kv and s_q
    if (k.causal) uids.push_back(U_NINF), ptrs.push_back(&ninf);
    if (k.causal && k.bottom_right)
        uids.insert(uids.end(), {U_SKV, U_SQ}), ptrs.insert(ptrs.end(), {&lens[0], &lens[1]});
    if (k.p > 0) {
        char *rng = (char *)put_rng(be, c, sc.rng);
        uids.insert(uids.end(), {U_DSCALE, U_SEED, U_OFFSET});
        ptrs.insert(ptrs.end(), {&dscale, rng, rng + 8});
    }
    execute(p->fplan, uids, ptrs, c.scratch, "forward");
}

void mc_cudnn_sdpa_backward(const mc_backend_t *be, const mc_sdpa_plans *p, const mc_sdpa_call &c)
{
    const mc_sdpa_key &k = p->key;
    const Views v = views_of(k);
    const mc_attention_scratch_t sc = scratch_of(p);
    float scale = c.scale, ninf = -INFINITY, inv = 1.0f - k.p;
    float dscale = k.p > 0 ? 1.0f / (1.0f - k.p) : 1.0f;
    const void *kv = k.block ? c.kv : c.qkv;
    void *q = (void *)c.q, *kt = (void *)elem(kv, v.kt.off, k.dt);
    const float *stats = c.stats; // the forward's log-sum-exp of each row (a block's: merged)
    void *sum = c.sum ? (void *)c.sum : (char *)c.scratch + sc.sum;
    std::vector<int64_t> uids = {U_Q,     U_KT,         U_VT,  U_O,  U_DO, U_STATS,
                                 U_SCALE, U_DSCALE_INV, U_SUM, U_DQ, U_DK, U_DV};
    std::vector<void *> ptrs = {q,
                                kt,
                                (void *)elem(kv, v.vt.off, k.dt),
                                c.out,
                                (void *)c.dout,
                                (void *)stats,
                                &scale,
                                &inv,
                                sum,
                                c.dq,
                                (void *)elem(c.dqkv, v.k.off, k.dt),
                                (void *)elem(c.dqkv, v.v.off, k.dt)};
    int32_t lens[2] = {k.Sk, k.S}; // bottom-right alignment's s_kv and s_q
    if (k.causal) uids.push_back(U_NINF), ptrs.push_back(&ninf);
    if (k.causal && k.bottom_right)
        uids.insert(uids.end(), {U_SKV, U_SQ}), ptrs.insert(ptrs.end(), {&lens[0], &lens[1]});
    if (k.p > 0) {
        char *rng = (char *)put_rng(be, c, sc.rng);
        uids.insert(uids.end(), {U_DSCALE, U_SEED, U_OFFSET});
        ptrs.insert(ptrs.end(), {&dscale, rng, rng + 8});
    }
    execute(p->bplan, uids, ptrs, c.scratch, "backward");
}

#endif
