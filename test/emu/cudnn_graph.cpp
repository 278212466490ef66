// The emulated cuDNN's engines: which operation graphs an execution plan takes, and the graph run
// on the CPU. Sources and the API's rules: test/emu/cudnn.cpp's header.
//
// Rules implemented (an execution plan's finalization):
//  - The runtime fusion engines for attention take [G]'s fused flash attention patterns: the
//    forward has two matmuls (S = Q K^T and O = P V, P virtual), the backward five (dP = dO V^T,
//    S = Q K^T, dV = P^T dO, dK = dS^T Q, dQ = dS K); other graphs: NOT_SUPPORTED_GRAPH_PATTERN.
//    Between the matmuls the emulation takes pointwise (ADD SUB MUL DIV MAX MIN EXP LOG IDENTITY
//    GEN_INDEX CMP_* LOGICAL_AND BINARY_SELECT), reduction (ADD, MAX), Bernoulli RNG and reshape
//    operations as written (emulation: it does not match them operation by operation, so an
//    arrangement cuDNN would refuse may run here; one it accepts computes what it says). The
//    masks are index arithmetic on INT32 tensors: GEN_INDEX's row or column, by-value INT32
//    scalars added or subtracted (the causal mask with [F]'s bottom-right diagonal alignment:
//    the row index plus s_kv minus s_q, so query i sees key j iff j <= i + s_kv - s_q), compared,
//    selected; exact, as integers (the emulation's fp32 holds every index below 2^24).
//  - [F]'s support matrix for Hopper: the matmuls' non-virtual operands and results (Q, K, V, O,
//    dO, dQ, dK, dV) all fp16 or all bf16 (NOT_SUPPORTED_DATA_TYPE), 4-D with a head dim d that is
//    a multiple of 8 and at most 256, query heads a multiple of the key and value heads (GQA and
//    MQA) (NOT_SUPPORTED_SHAPE), the head dim contiguous (stride 1) and every other stride a
//    multiple of 16 bytes, as [F]'s BHSD, BSHD and interleaved layouts are
//    (NOT_SUPPORTED_LAYOUT); the statistics in memory (Stats, the dO.O row sums: [b, h, s, 1]
//    tensors that are no matmul's operand) fp32 (NOT_SUPPORTED_DATA_TYPE). Every other tensor in
//    memory is one of the first kind.
//  - Shapes: pointwise inputs equal to the output or broadcast (1) per dimension; matmul
//    [.., M, K] x [.., K, N] -> [.., M, N] with batch dimensions equal, 1, or a divisor of the
//    result's (grouped-query attention: query head h reads key head h / (h_q / h_k), [F]'s
//    "b (hk g)" grouping); reductions to 1, to the same size, or to a divisor (the sum over each
//    group of consecutive heads: dK and dV of grouped-query attention) (BAD_PARAM_SHAPE_MISMATCH).
//  - Workspace (emulation): the forward asks 4 bytes per query row and head, the backward 4 per
//    element of dQ (an fp32 accumulator); execution fills it with 0xff bytes afterwards, so a
//    caller that keeps data there sees it destroyed.
//  - Execution: every non-virtual tensor's unique id in the variant pack with a pointer, device
//    memory spanning the tensor (the emulation stops the process otherwise) aligned to its byte
//    alignment (BAD_PARAM_MISALIGNED_POINTER); by-value tensors point at host memory; the
//    workspace is device memory of the plan's size. Values are computed in fp32 and rounded to
//    each tensor's data type where it is stored or declared (a virtual fp16/bf16 tensor, e.g. P
//    before its matmul, is rounded to it), accumulations in fp32 in index order.
//  - RNG (emulation): Bernoulli(prob) with Philox4x32-10 keyed by the seed, counter
//    offset + the element's row-major index in Y: the same seed, offset and Y give the same mask.
#include "test/emu/cudnn_emu.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <atomic>

#include "test/emu/emu.h"

namespace mc_dnn
{

const char *dtype_name(cudnnDataType_t t)
{
    switch (t) {
    case CUDNN_DATA_FLOAT: return "FLOAT";
    case CUDNN_DATA_HALF: return "HALF";
    case CUDNN_DATA_BFLOAT16: return "BFLOAT16";
    case CUDNN_DATA_INT32: return "INT32";
    case CUDNN_DATA_INT64: return "INT64";
    case CUDNN_DATA_BOOLEAN: return "BOOLEAN";
    default: return "another type";
    }
}

size_t dtype_size(cudnnDataType_t t)
{
    switch (t) {
    case CUDNN_DATA_FLOAT:
    case CUDNN_DATA_INT32: return 4;
    case CUDNN_DATA_HALF:
    case CUDNN_DATA_BFLOAT16: return 2;
    case CUDNN_DATA_INT64: return 8;
    case CUDNN_DATA_BOOLEAN: return 1;
    default: return 0;
    }
}

namespace
{

enum Pattern { NONE, FPROP, BPROP };

Pattern pattern_of(const Graph &g)
{
    int mm = 0;
    for (const Op &o : g.ops) mm += o.kind == OP_MATMUL;
    return mm == 2 ? FPROP : mm == 5 ? BPROP : NONE;
}

bool is16(cudnnDataType_t t) { return t == CUDNN_DATA_HALF || t == CUDNN_DATA_BFLOAT16; }

bool mode_emulated(cudnnPointwiseMode_t m)
{
    switch (m) {
    case CUDNN_POINTWISE_ADD:
    case CUDNN_POINTWISE_SUB:
    case CUDNN_POINTWISE_MUL:
    case CUDNN_POINTWISE_DIV:
    case CUDNN_POINTWISE_MAX:
    case CUDNN_POINTWISE_MIN:
    case CUDNN_POINTWISE_EXP:
    case CUDNN_POINTWISE_LOG:
    case CUDNN_POINTWISE_IDENTITY:
    case CUDNN_POINTWISE_GEN_INDEX:
    case CUDNN_POINTWISE_CMP_EQ:
    case CUDNN_POINTWISE_CMP_NEQ:
    case CUDNN_POINTWISE_CMP_GT:
    case CUDNN_POINTWISE_CMP_GE:
    case CUDNN_POINTWISE_CMP_LT:
    case CUDNN_POINTWISE_CMP_LE:
    case CUDNN_POINTWISE_LOGICAL_AND:
    case CUDNN_POINTWISE_BINARY_SELECT: return true;
    default: return false;
    }
}

std::string shape(const Tensor &t)
{
    std::string s = "[";
    for (size_t i = 0; i < t.dims.size(); i++) s += (i ? "," : "") + std::to_string(t.dims[i]);
    s += "] strides [";
    for (size_t i = 0; i < t.strides.size(); i++)
        s += (i ? "," : "") + std::to_string(t.strides[i]);
    return s + "]";
}

// A dimension of `in` read for an output of size `out`: equal, broadcast (1) or grouped.
bool fits(int64_t in, int64_t out) { return in == out || in == 1 || (in > 0 && out % in == 0); }

cudnnStatus_t shapes_ok(const Op &o, std::string *why)
{
    const Tensor &y = o.out;
    const size_t n = y.dims.size();
    char buf[256];
    switch (o.kind) {
    case OP_POINTWISE:
        for (const Tensor &x : o.in)
            for (size_t i = 0; i < n; i++)
                if (x.dims[i] != y.dims[i] && x.dims[i] != 1) {
                    snprintf(buf, sizeof(buf),
                             "pointwise: input %lld %s does not broadcast to Y %lld %s",
                             (long long)x.uid, shape(x).c_str(), (long long)y.uid,
                             shape(y).c_str());
                    *why = buf;
                    return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
                }
        return CUDNN_STATUS_SUCCESS;
    case OP_REDUCTION:
        for (size_t i = 0; i < n; i++)
            if (!fits(y.dims[i], o.in[0].dims[i])) {
                snprintf(buf, sizeof(buf), "reduction: Y %s is not X %s reduced", shape(y).c_str(),
                         shape(o.in[0]).c_str());
                *why = buf;
                return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
            }
        return CUDNN_STATUS_SUCCESS;
    case OP_MATMUL: {
        const Tensor &a = o.in[0], &b = o.in[1];
        bool ok = a.dims[n - 1] == b.dims[n - 2] && a.dims[n - 2] == y.dims[n - 2] &&
                  b.dims[n - 1] == y.dims[n - 1];
        for (size_t i = 0; i + 2 < n; i++)
            ok = ok && fits(a.dims[i], y.dims[i]) && fits(b.dims[i], y.dims[i]);
        if (!ok) {
            snprintf(buf, sizeof(buf), "matmul: A %s x B %s does not give C %s", shape(a).c_str(),
                     shape(b).c_str(), shape(y).c_str());
            *why = buf;
            return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
        }
        return CUDNN_STATUS_SUCCESS;
    }
    default: return CUDNN_STATUS_SUCCESS;
    }
}

// [F]'s support matrix on the matmuls' non-virtual operands and results, and the statistics.
cudnnStatus_t support_ok(const Graph &g, std::string *why)
{
    char buf[320];
    cudnnDataType_t dt = CUDNN_DATA_FLOAT;
    int64_t d = 0;
    const Op *qk =
        nullptr; // the first matmul of two operands in memory: S = Q K^T (or dP = dO V^T)
    for (const Op &o : g.ops)
        if (o.kind == OP_MATMUL && !o.in[0].virt && !o.in[1].virt && !o.in[0].by_value &&
            qk == nullptr && o.in[0].dims.size() == 4 && o.in[1].dims[2] == o.in[0].dims[3])
            qk = &o;
    if (!qk) {
        *why = "no matmul S = Q K^T of two tensors in memory";
        return CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN;
    }
    d = qk->in[0].dims[3];
    if (qk->in[0].dims[1] % qk->in[1].dims[1] != 0) {
        snprintf(buf, sizeof(buf), "%lld query heads are not a multiple of %lld key heads",
                 (long long)qk->in[0].dims[1], (long long)qk->in[1].dims[1]);
        *why = buf;
        return CUDNN_STATUS_NOT_SUPPORTED_SHAPE;
    }
    if (d % 8 != 0 || d > 256) {
        snprintf(buf, sizeof(buf), "head dim %lld (a multiple of 8, at most 256 on Hopper)",
                 (long long)d);
        *why = buf;
        return CUDNN_STATUS_NOT_SUPPORTED_SHAPE;
    }
    dt = qk->in[0].dt;
    std::map<int64_t, bool> operand; // the matmuls' operands and results
    for (const Op &o : g.ops)
        if (o.kind == OP_MATMUL)
            operand[o.in[0].uid] = operand[o.in[1].uid] = operand[o.out.uid] = true;
    for (const Op &o : g.ops) {
        std::vector<const Tensor *> ts = {&o.out};
        for (const Tensor &t : o.in) ts.push_back(&t);
        for (const Tensor *t : ts) {
            if (t->virt || t->by_value || t->dt == CUDNN_DATA_INT64)
                continue; // RNG seed and offset
            if (!operand.count(t->uid) && t->dims.size() == 4 &&
                t->dims[3] == 1) { // Stats, dO.O sums
                if (t->dt == CUDNN_DATA_FLOAT) continue;
                snprintf(buf, sizeof(buf),
                         "tensor %lld (%s %s): the statistics are FLOAT [b, h, s, 1]",
                         (long long)t->uid, dtype_name(t->dt), shape(*t).c_str());
                *why = buf;
                return CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
            }
            if (!is16(t->dt) || t->dt != dt || t->dims.size() != 4) {
                snprintf(
                    buf, sizeof(buf),
                    "tensor %lld is %s with %zu dimensions; Q is %s (fp16 or bf16, all the same, 4-D)",
                    (long long)t->uid, dtype_name(t->dt), t->dims.size(), dtype_name(dt));
                *why = buf;
                return CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE;
            }
            int contiguous = -1;
            for (size_t i = 0; i < 4; i++)
                if (t->dims[i] == d && t->strides[i] == 1) contiguous = (int)i;
            bool aligned = contiguous >= 0;
            for (size_t i = 0; i < 4 && aligned; i++)
                if ((int)i != contiguous && t->dims[i] > 1) aligned = (t->strides[i] * 2) % 16 == 0;
            if (!aligned) {
                snprintf(
                    buf, sizeof(buf),
                    "tensor %lld %s: the head dim (%lld) must be contiguous, the other strides multiples of 16 bytes",
                    (long long)t->uid, shape(*t).c_str(), (long long)d);
                *why = buf;
                return CUDNN_STATUS_NOT_SUPPORTED_LAYOUT;
            }
        }
    }
    return CUDNN_STATUS_SUCCESS;
}

// ---- values: dense fp32 arrays over a tensor's dims (row-major) ----
struct Val {
    std::vector<int64_t> dims;
    std::vector<float> v;
};

float load(const void *p, cudnnDataType_t t, int64_t i)
{
    switch (t) {
    case CUDNN_DATA_FLOAT: return ((const float *)p)[i];
    case CUDNN_DATA_HALF: return __half2float(((const __half *)p)[i]);
    case CUDNN_DATA_BFLOAT16: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    case CUDNN_DATA_INT32: return (float)((const int32_t *)p)[i];
    case CUDNN_DATA_INT64: return (float)((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i] ? 1.0f : 0.0f;
    }
}

// x rounded to t (truncated toward zero when trunc: engine 0's varying last bit)
float rounded(float x, cudnnDataType_t t, bool trunc = false)
{
    switch (t) {
    case CUDNN_DATA_HALF: return __half2float(trunc ? __float2half_rz(x) : __float2half_rn(x));
    case CUDNN_DATA_BFLOAT16:
        return __bfloat162float(trunc ? __float2bfloat16_rz(x) : __float2bfloat16_rn(x));
    case CUDNN_DATA_INT32:
    case CUDNN_DATA_INT64: return truncf(x);
    case CUDNN_DATA_BOOLEAN: return x != 0.0f ? 1.0f : 0.0f;
    default: return x;
    }
}

void store(void *p, cudnnDataType_t t, int64_t i, float x, bool trunc)
{
    switch (t) {
    case CUDNN_DATA_FLOAT: ((float *)p)[i] = x; break;
    case CUDNN_DATA_HALF: ((__half *)p)[i] = trunc ? __float2half_rz(x) : __float2half_rn(x); break;
    case CUDNN_DATA_BFLOAT16:
        ((__nv_bfloat16 *)p)[i] = trunc ? __float2bfloat16_rz(x) : __float2bfloat16_rn(x);
        break;
    case CUDNN_DATA_INT32: ((int32_t *)p)[i] = (int32_t)x; break;
    case CUDNN_DATA_INT64: ((int64_t *)p)[i] = (int64_t)x; break;
    default: ((uint8_t *)p)[i] = x != 0.0f; break;
    }
}

// Row-major index -> per-dimension index.
void unravel(int64_t i, const std::vector<int64_t> &dims, int64_t *idx)
{
    for (size_t k = dims.size(); k-- > 0;) {
        idx[k] = i % dims[k];
        i /= dims[k];
    }
}

int64_t offset(const int64_t *idx, const Tensor &t)
{
    int64_t o = 0;
    for (size_t k = 0; k < t.dims.size(); k++) o += idx[k] * t.strides[k];
    return o;
}

// The element of `in` (dims) read for output index idx: broadcast or grouped dimensions.
int64_t source(const int64_t *idx, const std::vector<int64_t> &out, const std::vector<int64_t> &in)
{
    int64_t o = 0;
    for (size_t k = 0; k < in.size(); k++) o = o * in[k] + idx[k] / (out[k] / in[k]);
    return o;
}

Val gather(const Tensor &t, const void *p)
{
    Val v{t.dims, std::vector<float>((size_t)t.elements())};
    int64_t idx[CUDNN_DIM_MAX];
    for (int64_t i = 0; i < (int64_t)v.v.size(); i++) {
        unravel(i, t.dims, idx);
        v.v[(size_t)i] = load(p, t.dt, offset(idx, t));
    }
    return v;
}

uint32_t philox(uint64_t seed, uint64_t counter)
{
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        const uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1, c3 = (uint32_t)p0, c0 = n0, c2 = n2;
        k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    }
    return c0;
}

float pointwise(cudnnPointwiseMode_t m, float x, float b, float t)
{
    switch (m) {
    case CUDNN_POINTWISE_ADD: return x + b;
    case CUDNN_POINTWISE_SUB: return x - b;
    case CUDNN_POINTWISE_MUL: return x * b;
    case CUDNN_POINTWISE_DIV: return x / b;
    case CUDNN_POINTWISE_MAX: return fmaxf(x, b);
    case CUDNN_POINTWISE_MIN: return fminf(x, b);
    case CUDNN_POINTWISE_EXP: return expf(x);
    case CUDNN_POINTWISE_LOG: return logf(x);
    case CUDNN_POINTWISE_IDENTITY: return x;
    case CUDNN_POINTWISE_CMP_EQ: return x == b;
    case CUDNN_POINTWISE_CMP_NEQ: return x != b;
    case CUDNN_POINTWISE_CMP_GT: return x > b;
    case CUDNN_POINTWISE_CMP_GE: return x >= b;
    case CUDNN_POINTWISE_CMP_LT: return x < b;
    case CUDNN_POINTWISE_CMP_LE: return x <= b;
    case CUDNN_POINTWISE_LOGICAL_AND: return x != 0 && b != 0;
    case CUDNN_POINTWISE_BINARY_SELECT: return t != 0 ? x : b;
    default: return NAN;
    }
}

// Element (r, c) of a matmul operand with dims xd, at the batch index of C's index idx.
int64_t mm_source(const int64_t *idx, int64_t r, int64_t c, const std::vector<int64_t> &y,
                  const std::vector<int64_t> &xd)
{
    const size_t n = xd.size();
    int64_t o = 0;
    for (size_t k = 0; k + 2 < n; k++) o = o * xd[k] + idx[k] / (y[k] / xd[k]);
    return (o * xd[n - 2] + r) * xd[n - 1] + c;
}

// One operation on values (its inputs present in vals), its output in fp32.
Val run_op(const Op &o, const std::map<int64_t, Val> &vals, const std::map<int64_t, void *> &ptrs)
{
    const Tensor &y = o.out;
    Val out{y.dims, std::vector<float>((size_t)y.elements(), 0.0f)};
    const size_t n = y.dims.size();
    int64_t idx[CUDNN_DIM_MAX];
    if (o.kind == OP_POINTWISE) {
        const Val *in[3] = {nullptr, nullptr, nullptr};
        for (size_t k = 0; k < o.in.size(); k++) in[k] = &vals.at(o.in[k].uid);
        for (int64_t i = 0; i < (int64_t)out.v.size(); i++) {
            unravel(i, y.dims, idx);
            float a[3] = {0, 0, 0};
            for (int k = 0; k < 3; k++)
                if (in[k]) a[k] = in[k]->v[(size_t)source(idx, y.dims, in[k]->dims)];
            out.v[(size_t)i] = o.pw == CUDNN_POINTWISE_GEN_INDEX
                                   ? (float)idx[o.axis]
                                   : pointwise(o.pw, a[0], a[1], a[2]);
        }
    } else if (o.kind == OP_REDUCTION) {
        const Val &x = vals.at(o.in[0].uid);
        std::vector<bool> first(out.v.size(), true);
        for (int64_t i = 0; i < (int64_t)x.v.size(); i++) {
            unravel(i, x.dims, idx);
            for (size_t k = 0; k < n; k++) idx[k] /= x.dims[k] / y.dims[k];
            int64_t j = 0;
            for (size_t k = 0; k < n; k++) j = j * y.dims[k] + idx[k];
            float &acc = out.v[(size_t)j];
            const float v = x.v[(size_t)i];
            acc = first[(size_t)j] ? v : o.red == CUDNN_REDUCE_TENSOR_MAX ? fmaxf(acc, v) : acc + v;
            first[(size_t)j] = false;
        }
    } else if (o.kind == OP_MATMUL) {
        const Val &a = vals.at(o.in[0].uid), &b = vals.at(o.in[1].uid);
        const int64_t M = y.dims[n - 2], N = y.dims[n - 1], K = a.dims[n - 1];
        const int64_t batches = (int64_t)out.v.size() / (M * N);
        std::vector<float> bt((size_t)(K * N));
        for (int64_t bi = 0; bi < batches; bi++) {
            unravel(bi * M * N, y.dims, idx);
            const float *av = &a.v[(size_t)mm_source(idx, 0, 0, y.dims, a.dims)];
            const float *bv = &b.v[(size_t)mm_source(idx, 0, 0, y.dims, b.dims)];
            for (int64_t k = 0; k < K; k++) // B transposed, so each sum walks memory in order
                for (int64_t c = 0; c < N; c++) bt[(size_t)(c * K + k)] = bv[k * N + c];
            float *ov = &out.v[(size_t)(bi * M * N)];
            for (int64_t r = 0; r < M; r++)
                for (int64_t c = 0; c < N; c++) {
                    float acc = 0;
                    for (int64_t k = 0; k < K; k++) acc += av[r * K + k] * bt[(size_t)(c * K + k)];
                    ov[r * N + c] = acc;
                }
        }
    } else if (o.kind == OP_RNG) {
        uint64_t seed = (uint64_t)o.seed_value, off = 0;
        if (!o.seed_is_value) {
            seed = (uint64_t) * (const int64_t *)ptrs.at(o.in[0].uid);
            off = (uint64_t) * (const int64_t *)ptrs.at(o.in[1].uid);
        }
        for (int64_t i = 0; i < (int64_t)out.v.size(); i++)
            out.v[(size_t)i] =
                (double)philox(seed, off + (uint64_t)i) * (1.0 / 4294967296.0) < o.prob ? 1.0f
                                                                                        : 0.0f;
    } else { // reshape: Y's strides index the storage X's strides lay out
        const Tensor &xt = o.in[0];
        const Val &x = vals.at(xt.uid);
        std::vector<float> storage((size_t)xt.extent(), NAN);
        for (int64_t i = 0; i < (int64_t)x.v.size(); i++) {
            unravel(i, x.dims, idx);
            storage[(size_t)offset(idx, xt)] = x.v[(size_t)i];
        }
        for (int64_t i = 0; i < (int64_t)out.v.size(); i++) {
            unravel(i, y.dims, idx);
            const int64_t at = offset(idx, y);
            if (at >= (int64_t)storage.size())
                mc_emu::fail("cudnn: reshape %lld -> %lld: Y %s reaches element %lld of X's %lld",
                             (long long)xt.uid, (long long)y.uid, shape(y).c_str(), (long long)at,
                             (long long)storage.size());
            out.v[(size_t)i] = storage[(size_t)at];
        }
    }
    return out; // not yet rounded to Y's type: the caller stores it, then rounds it
}

// The pointers of the graph's tensors in memory: each present, spanning its tensor, aligned.
cudnnStatus_t check_pointers(const Graph &g, const std::map<int64_t, void *> &ptrs,
                             std::string *why)
{
    char buf[256];
    for (const Op &o : g.ops) {
        std::vector<const Tensor *> ts = {&o.out};
        for (const Tensor &t : o.in) ts.push_back(&t);
        for (const Tensor *t : ts) {
            if (t->virt) continue;
            auto it = ptrs.find(t->uid);
            if (it == ptrs.end() || !it->second) {
                snprintf(buf, sizeof(buf), "the variant pack has no pointer for tensor %lld",
                         (long long)t->uid);
                *why = buf;
                return CUDNN_STATUS_BAD_PARAM;
            }
            if (t->by_value) {
                if (mc_emu::mem_kind(it->second, dtype_size(t->dt)) == mc_emu::MEM_DEVICE)
                    mc_emu::fail(
                        "cudnnBackendExecute: by-value tensor %lld points at device memory %p",
                        (long long)t->uid, it->second);
                continue;
            }
            snprintf(buf, sizeof(buf), "cudnnBackendExecute: tensor %lld %s", (long long)t->uid,
                     shape(*t).c_str());
            mc_emu::require_device(it->second, (size_t)t->extent() * dtype_size(t->dt), buf);
            if ((uintptr_t)it->second % (uintptr_t)t->align != 0) {
                snprintf(buf, sizeof(buf), "tensor %lld at %p is not aligned to its %lld bytes",
                         (long long)t->uid, it->second, (long long)t->align);
                *why = buf;
                return CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER;
            }
        }
    }
    return CUDNN_STATUS_SUCCESS;
}

std::atomic<unsigned> g_runs{0};

} // namespace

std::vector<int64_t> engines_for(const Graph &g)
{
    switch (pattern_of(g)) {
    case FPROP: return {1};
    case BPROP: return {0, 1};
    default: return {};
    }
}

std::vector<cudnnBackendNumericalNote_t> engine_notes(const Graph &g, int64_t engine)
{
    if (engine == 0 && pattern_of(g) == BPROP)
        return {CUDNN_NUMERICAL_NOTE_TENSOR_CORE, CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC};
    return {CUDNN_NUMERICAL_NOTE_TENSOR_CORE};
}

cudnnStatus_t plan_check(const Graph &g, int64_t engine, int64_t *workspace, std::string *why)
{
    const Pattern p = pattern_of(g);
    if (p == NONE) {
        *why =
            "the graph is not a fused flash attention pattern (two matmuls forward, five backward)";
        return CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN;
    }
    bool known = false;
    for (int64_t e : engines_for(g)) known |= e == engine;
    if (!known) {
        *why = "engine " + std::to_string(engine) + " does not take this graph";
        return CUDNN_STATUS_NOT_SUPPORTED;
    }
    for (const Op &o : g.ops) {
        if ((o.kind == OP_POINTWISE && !mode_emulated(o.pw)) ||
            (o.kind == OP_REDUCTION && o.red != CUDNN_REDUCE_TENSOR_ADD &&
             o.red != CUDNN_REDUCE_TENSOR_MAX)) {
            *why = "an operation mode outside the attention patterns (pointwise " +
                   std::to_string((int)o.pw) + ")";
            return CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN;
        }
        const cudnnStatus_t st = shapes_ok(o, why);
        if (st != CUDNN_STATUS_SUCCESS) return st;
    }
    const cudnnStatus_t st = support_ok(g, why);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    // the emulation's workspace: per query row and head (forward), per dQ element (backward)
    const Op *qk = nullptr;
    for (const Op &o : g.ops)
        if (o.kind == OP_MATMUL && !o.in[0].virt && !o.in[1].virt && !qk) qk = &o;
    const int64_t rows = qk->out.dims[0] * qk->out.dims[1] * qk->out.dims[2];
    *workspace = 4 * rows * (p == BPROP ? qk->in[0].dims[3] : 1);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t execute(const Graph &g, int64_t engine, const std::map<int64_t, void *> &ptrs,
                      void *ws, int64_t ws_bytes, std::string *why)
{
    cudnnStatus_t st = check_pointers(g, ptrs, why);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (ws_bytes > 0) {
        if (!ws) {
            *why = "the plan needs " + std::to_string(ws_bytes) +
                   " bytes of workspace; the variant pack has none";
            return CUDNN_STATUS_BAD_PARAM;
        }
        mc_emu::require_device(ws, (size_t)ws_bytes, "cudnnBackendExecute: the workspace");
    }
    const bool vary = engine == 0 && pattern_of(g) == BPROP && (g_runs++ & 1);
    std::map<int64_t, bool> produced;
    for (const Op &o : g.ops) produced[o.out.uid] = true;
    std::map<int64_t, Val> vals;
    std::vector<bool> done(g.ops.size(), false);
    for (size_t left = g.ops.size(); left > 0;) {
        size_t ran = 0;
        for (size_t i = 0; i < g.ops.size(); i++) {
            const Op &o = g.ops[i];
            bool ready = !done[i];
            for (const Tensor &t : o.in)
                ready = ready && (vals.count(t.uid) || !produced.count(t.uid) || o.kind == OP_RNG);
            if (!ready) continue;
            for (const Tensor &t : o.in)
                if (!vals.count(t.uid) && o.kind != OP_RNG) vals[t.uid] = gather(t, ptrs.at(t.uid));
            Val v = run_op(o, vals, ptrs);
            if (!o.out.virt) {
                int64_t idx[CUDNN_DIM_MAX];
                void *p = ptrs.at(o.out.uid);
                for (int64_t k = 0; k < (int64_t)v.v.size(); k++) {
                    unravel(k, o.out.dims, idx);
                    store(p, o.out.dt, offset(idx, o.out), v.v[(size_t)k],
                          vary && o.kind == OP_MATMUL);
                }
            }
            for (float &x : v.v) x = rounded(x, o.out.dt);
            vals[o.out.uid] = std::move(v);
            done[i] = true;
            ran++, left--;
        }
        if (!ran) {
            *why = "the operation graph has a cycle";
            return CUDNN_STATUS_BAD_PARAM;
        }
    }
    if (ws_bytes > 0) memset(ws, 0xff, (size_t)ws_bytes);
    return CUDNN_STATUS_SUCCESS;
}

} // namespace mc_dnn
