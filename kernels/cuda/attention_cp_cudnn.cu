// Context parallelism's attention blocks on cuDNN's fused flash attention (issue 29, issue 32):
// the op table's attention_block_forward/backward/sizes, which send a block to cuDNN where it can
// do it, as Transformer Engine's context-parallel attention does over cuDNN in Megatron, and to
// the project's kernels (kernels/cuda/attention_cp.cu) otherwise.
//
// cuDNN runs a block when the setup chose it for the run (mc_cuda_cp_cudnn_setup) and the block is
// one the ring or the all-gather makes: no mask (a chunk of keys wholly before the queries) or a
// causal mask whose diagonal ends at the last query and key: the ring's diagonal blocks (the
// query and key chunks at the same positions) and the all-gather's (a query chunk against the
// keys of its whole prefix, Sq <= Sk: cuDNN's bottom-right diagonal alignment), without
// attention dropout. Forward: the block's output (type dt, then fp32 for the log-sum-exp merge)
// and cuDNN's Stats (each row's log-sum-exp) written straight into the block's statistics.
// Backward: from the merged output and merged statistics, dQ, dK and dV (type dt) are added to
// the fp32 accumulators. The project's kernels keep what cuDNN's pattern cannot: dropout (its
// mask is keyed by global positions, cuDNN's generator draws its own), causal blocks whose
// diagonal does not end at the last key (rows that would see no key), fp32.
#include <string>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/cudnn_sdpa.h"

extern "C" {
#include "base/error.h"
#include "kernels/device.h"
}

namespace
{

#ifdef MC_WITH_CUDNN
struct CpSelection {
    bool on;                  // the setup chose cuDNN for the blocks
    mc_attention_spec_t spec; // the run's shapes
    size_t most;              // the most block scratch the sizes asked for
};
CpSelection g_cp;

size_t up256(size_t x) { return (x + 255) / 256 * 256; }

// A block call's scratch when cuDNN runs it (bytes, 256-aligned): the plans' workspace at 0, the
// backward's dO.O row sums (fp32 [B, NH, Sq]), with grouped-query attention the query heads
// copied dense, the output (forward) or dQ (backward) of type dt [Sq, B, NH*HD], then dK and dV
// of type dt in the kv layout [Sk, B, NG*2*HD].
struct Layout {
    size_t sum, q, o, dkv, bytes;
};

Layout layout_of(const mc_sdpa_key &k, size_t ws)
{
    const size_t e = mc_dtype_size(k.dt), heads = (size_t)k.S * k.B * k.NH * k.HD * e;
    Layout l;
    l.sum = up256(ws);
    l.q = l.sum + up256((size_t)k.B * k.NH * k.S * sizeof(float));
    l.o = l.q + (k.NG != k.NH ? up256(heads) : 0);
    l.dkv = l.o + up256(heads);
    l.bytes = l.dkv + up256((size_t)k.Sk * k.B * k.NG * 2 * k.HD * e);
    return l;
}

// A block's key: a causal block of fewer queries than keys is aligned bottom-right.
mc_sdpa_key block_key(mc_dtype_t dt, int Sq, int Sk, int B, int NH, int NG, int HD, bool causal)
{
    return mc_sdpa_key{dt, Sq, B, NH, NG, HD, 0.0f, Sk, causal, true, causal && Sq != Sk};
}

// The block's plans and scratch layout, or NULL when the project's kernels run it.
const mc_sdpa_plans *served(mc_dtype_t dt, int Sq, int Sk, int B, int NH, int NG, int HD, int q_pos,
                            int k_pos, int mask, const mc_dropout_t *d, Layout *l)
{
    const mc_attention_spec_t &s = g_cp.spec;
    const bool causal = mask == MC_ATTN_BLOCK_CAUSAL;
    // causal: the last query at the last key's position (the diagonal ends bottom-right)
    if (!g_cp.on || dt != s.dt || HD != s.HD || (d && d->p > 0) ||
        (causal && (Sq > Sk || q_pos + Sq != k_pos + Sk)))
        return nullptr;
    std::string why;
    const mc_sdpa_plans *p =
        mc_cudnn_sdpa_plans(block_key(dt, Sq, Sk, B, NH, NG, HD, causal), &why);
    if (!p) return nullptr;
    *l = layout_of(block_key(dt, Sq, Sk, B, NH, NG, HD, causal), mc_cudnn_sdpa_workspace(p));
    return l->bytes <= g_cp.most ? p : nullptr; // the model allocated that much
}

// acc (fp32) += x (type T), n elements.
template <typename T> __global__ void k_accumulate(float *acc, const T *x, long n)
{
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
         i += (long)gridDim.x * blockDim.x)
        acc[i] += mc_to_f32(x[i]);
}

void accumulate(const mc_backend_t *be, float *acc, const void *x, mc_dtype_t dt, long n)
{
    MC_CUDA_DISPATCH(dt, T, "attention_block_backward",
                     MC_LAUNCH(mc_cuda_ew_blocks(n), MC_EW_THREADS, 0, mc_cuda_stream(be),
                               k_accumulate<T>)(acc, (const T *)x, n))
    MC_CUDA_LAUNCHED();
}

// With grouped-query attention, the query heads out of qkv's rows (s, b, group) into a dense
// [Sq, B, NH*HD]; else qkv itself.
const void *dense_q(const mc_backend_t *be, mc_dtype_t dt, char *scratch, const Layout &l,
                    const void *qkv, int Sq, int B, int NH, int NG, int HD)
{
    if (NG == NH) return qkv;
    const long qpg = NH / NG;
    mc_cuda_copy_2d(be, scratch + l.q, dt, qpg * HD, qkv, dt, (qpg + 2) * HD, (long)Sq * B * NG,
                    qpg * HD);
    return scratch + l.q;
}
#endif

} // namespace

const char *mc_cuda_cp_cudnn_setup(const mc_attention_spec_t *s, char *why, size_t n)
{
#ifdef MC_WITH_CUDNN
    g_cp = CpSelection{false, {}, 0};
    if (!s) return nullptr;
    g_cp.spec = *s;
    const int C = s->S / (2 * s->cp), rows[2] = {s->B, s->B_eval};
    for (int i = 0; i < 2; i++)
        for (int causal = 0; causal < 2; causal++) {
            std::string w;
            const mc_sdpa_key k = block_key(s->dt, C, C, rows[i], s->NH, s->NG, s->HD, causal);
            if (!mc_cudnn_sdpa_plans(k, &w)) {
                snprintf(why, n, "cuDNN refuses the ring's %s blocks: %s",
                         causal ? "diagonal" : "unmasked", w.c_str());
                return why;
            }
        }
    g_cp.on = true;
    return nullptr;
#else
    if (!s) return nullptr;
    snprintf(why, n, "this megatron-c was built without cuDNN");
    return why;
#endif
}

void mc_cuda_attention_block_sizes_cudnn(const mc_backend_t *be, mc_dtype_t dt, int Sq, int Sk,
                                         int B, int NH, int HD, size_t *fwd_scratch,
                                         size_t *bwd_scratch)
{
    mc_cuda_attention_block_sizes(be, dt, Sq, Sk, B, NH, HD, fwd_scratch, bwd_scratch);
#ifdef MC_WITH_CUDNN
    const mc_attention_spec_t &s = g_cp.spec;
    if (!g_cp.on || dt != s.dt || HD != s.HD || NH <= 0 || s.NH % NH) return;
    const int NG = s.NG / (s.NH / NH); // a2a+p2p's ring holds NH/a heads of NG/a groups
    if (NG <= 0 || NH % NG) return;
    for (int causal = 0; causal < 2; causal++) {
        if (causal && Sq > Sk) continue;
        std::string why;
        const mc_sdpa_key k = block_key(dt, Sq, Sk, B, NH, NG, HD, causal);
        const mc_sdpa_plans *p = mc_cudnn_sdpa_plans(k, &why);
        if (!p) continue;
        const size_t bytes = layout_of(k, mc_cudnn_sdpa_workspace(p)).bytes;
        if (bytes > *fwd_scratch) *fwd_scratch = bytes;
        if (bytes > *bwd_scratch) *bwd_scratch = bytes;
        if (bytes > g_cp.most) g_cp.most = bytes;
    }
#endif
}

extern "C" int mc_cuda_attention_block_uses_cudnn(mc_dtype_t dt, int Sq, int Sk, int B, int NH,
                                                  int NG, int HD, int q_pos, int k_pos, int mask,
                                                  float p)
{
#ifdef MC_WITH_CUDNN
    Layout l;
    mc_dropout_t d = {};
    d.p = p;
    return served(dt, Sq, Sk, B, NH, NG, HD, q_pos, k_pos, mask, &d, &l) != nullptr;
#else
    (void)dt, (void)Sq, (void)Sk, (void)B, (void)NH, (void)NG, (void)HD, (void)q_pos;
    (void)k_pos, (void)mask, (void)p;
    return 0;
#endif
}

void mc_cuda_attention_block_forward(const mc_backend_t *be, mc_dtype_t dt, float *out, float *lse,
                                     void *scratch, const void *qkv, const void *kv, int Sq, int Sk,
                                     int B, int NH, int NG, int HD, int q_pos, int k_pos,
                                     int S_full, int mask, float scale, const mc_dropout_t *d,
                                     int head_offset, int NH_full)
{
#ifdef MC_WITH_CUDNN
    Layout l;
    const mc_sdpa_plans *p = Sq > 0 && Sk > 0 && B > 0
                                 ? served(dt, Sq, Sk, B, NH, NG, HD, q_pos, k_pos, mask, d, &l)
                                 : nullptr;
    if (p) {
        char *s = (char *)scratch;
        mc_sdpa_call c = {};
        c.qkv = qkv, c.kv = kv, c.out = s + l.o, c.stats = lse, c.scratch = s, c.scale = scale;
        c.q = dense_q(be, dt, s, l, qkv, Sq, B, NH, NG, HD);
        mc_cudnn_sdpa_forward(be, p, c);
        mc_cuda_copy_2d(be, out, MC_DT_F32, (long)NH * HD, s + l.o, dt, (long)NH * HD, (long)Sq * B,
                        (long)NH * HD);
        return;
    }
#endif
    mc_cuda_local_attention_block_forward(be, dt, out, lse, scratch, qkv, kv, Sq, Sk, B, NH, NG, HD,
                                          q_pos, k_pos, S_full, mask, scale, d, head_offset,
                                          NH_full);
}

void mc_cuda_attention_block_backward(const mc_backend_t *be, mc_dtype_t dt, float *dq, float *dkv,
                                      void *scratch, const void *dout, const void *qkv,
                                      const void *kv, const void *out, const float *lse, int Sq,
                                      int Sk, int B, int NH, int NG, int HD, int q_pos, int k_pos,
                                      int S_full, int mask, float scale, const mc_dropout_t *d,
                                      int head_offset, int NH_full)
{
#ifdef MC_WITH_CUDNN
    Layout l;
    const mc_sdpa_plans *p = Sq > 0 && Sk > 0 && B > 0
                                 ? served(dt, Sq, Sk, B, NH, NG, HD, q_pos, k_pos, mask, d, &l)
                                 : nullptr;
    if (p) {
        char *s = (char *)scratch;
        mc_sdpa_call c = {};
        c.qkv = qkv, c.kv = kv, c.out = (void *)out, c.dout = dout, c.stats = (float *)lse;
        c.dq = s + l.o, c.dqkv = s + l.dkv, c.sum = (float *)(s + l.sum), c.scratch = s;
        c.scale = scale;
        c.q = dense_q(be, dt, s, l, qkv, Sq, B, NH, NG, HD);
        mc_cudnn_sdpa_backward(be, p, c);
        accumulate(be, dq, s + l.o, dt, (long)Sq * B * NH * HD);
        accumulate(be, dkv, s + l.dkv, dt, (long)Sk * B * NG * 2 * HD);
        return;
    }
#endif
    mc_cuda_local_attention_block_backward(be, dt, dq, dkv, scratch, dout, qkv, kv, out, lse, Sq,
                                           Sk, B, NH, NG, HD, q_pos, k_pos, S_full, mask, scale, d,
                                           head_offset, NH_full);
}
