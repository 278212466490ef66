// cuDNN for the emulated CUDA device of the tests: the C backend API (cudnn_graph.h) that
// kernels/cuda/cudnn_*.cu call, linked instead of libcudnn. Like the emulated cuBLASLt it is
// written from NVIDIA's documentation only, never from the project's use of it, checks what the
// documentation states and computes on the CPU, so that a wrong stride, type, pattern or pointer
// in a caller is an error status or wrong numbers, as on a GPU.
//
// Sources. [H]: /usr/local/cuda/include/cudnn_graph.h of cuDNN 9.19 (descriptor types, attribute
// names and their types, status codes). [B]: the cuDNN backend API reference, "cudnn_graph
// library" (https://docs.nvidia.com/deeplearning/cudnn/backend/latest/api/cudnn-graph-library.html):
// each descriptor's attributes, which are required, and what cudnnBackendSetAttribute,
// cudnnBackendGetAttribute, cudnnBackendFinalize and cudnnBackendExecute return. [G]: the cuDNN
// developer guide, "Graph API", supported graph patterns, "Fused Flash Attention fprop/bprop"
// (https://docs.nvidia.com/deeplearning/cudnn/developer/graph-api.html). [F]: the cuDNN frontend
// documentation, "Attention" (the scaled dot product attention support matrix:
// https://docs.nvidia.com/deeplearning/cudnn/frontend/latest/operations/Attention.html).
// Rules implemented here (the graph's rules are in cudnn_graph.cpp):
//  - Handles from cudnnCreate only; cudnnSetStream takes a live stream or 0 [B].
//  - Descriptors from cudnnBackendCreateDescriptor only, of the types listed below (others:
//    CUDNN_STATUS_NOT_SUPPORTED, "not emulated"). Attributes are set before finalization
//    (after it: CUDNN_STATUS_NOT_INITIALIZED), read after it (before: NOT_INITIALIZED) [B].
//  - An attribute must belong to the descriptor's type with its documented attribute type
//    (else CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE), element count in range (BAD_PARAM), the array
//    not NULL (BAD_PARAM_NULL_POINTER) [B, H].
//  - A descriptor given as an attribute must be live, of the attribute's descriptor type and
//    finalized (BAD_PARAM_NOT_FINALIZED): it is copied, so destroying it afterwards is allowed.
//  - Finalization checks the required attributes and the documented rules of each type:
//    tensors (dims and strides of equal count, at most CUDNN_DIM_MAX, positive; the alignment a
//    positive multiple of the element size; by-value tensors have every dim 1 and are not
//    virtual); pointwise modes and their operands (binary modes need B, BINARY_SELECT needs B
//    and T, GEN_INDEX an axis inside the output's dims); operations' tensors of equal rank; the
//    operation graph's tensors with unique ids (one producer each, BAD_PARAM_DUPLICATED_ENTRIES);
//    heuristics need a graph and a mode; engine configs an engine; execution plans an engine
//    config and a handle; variant packs ids and pointers of equal count.
//  - cudnnGetLastErrorString gives the last failure's reason, as cuDNN 9 does.
// The emulation's own choices, where the documentation says nothing, are marked "(emulation)".
#include <cudnn_graph.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "test/emu/cudnn_emu.h"
#include "test/emu/emu.h"

struct cudnnContext {
    cudaStream_t stream;
};

using namespace mc_dnn;

namespace
{

thread_local std::string g_last_error;

const char *status_name(cudnnStatus_t s);

// One line on stderr (as cuBLASLt's emulation does: a GPU reports only the code) and the status;
// the message is what cudnnGetLastErrorString returns next.
cudnnStatus_t refuse(cudnnStatus_t s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
cudnnStatus_t refuse(cudnnStatus_t s, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    g_last_error = msg;
    mc_emu::note("cudnn: %s -> %s", msg, status_name(s));
    return s;
}

const char *status_name(cudnnStatus_t s)
{
    switch (s) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_BAD_PARAM_NULL_POINTER: return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
    case CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER:
        return "CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER";
    case CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED: return "CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED";
    case CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND: return "CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND";
    case CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT:
        return "CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT";
    case CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH: return "CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH";
    case CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES:
        return "CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES";
    case CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE: return "CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE";
    case CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE: return "CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN:
        return "CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN";
    case CUDNN_STATUS_NOT_SUPPORTED_SHAPE: return "CUDNN_STATUS_NOT_SUPPORTED_SHAPE";
    case CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE: return "CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE";
    case CUDNN_STATUS_NOT_SUPPORTED_LAYOUT: return "CUDNN_STATUS_NOT_SUPPORTED_LAYOUT";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
    default: return "a cuDNN status";
    }
}

// ---- descriptors ----

const cudnnBackendDescriptorType_t EMULATED[] = {
    CUDNN_BACKEND_TENSOR_DESCRIPTOR,
    CUDNN_BACKEND_POINTWISE_DESCRIPTOR,
    CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR,
    CUDNN_BACKEND_REDUCTION_DESCRIPTOR,
    CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR,
    CUDNN_BACKEND_MATMUL_DESCRIPTOR,
    CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR,
    CUDNN_BACKEND_RNG_DESCRIPTOR,
    CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR,
    CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR,
    CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,
    CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR,
    CUDNN_BACKEND_ENGINE_DESCRIPTOR,
    CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
    CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
    CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR,
};

bool is_operation(cudnnBackendDescriptorType_t t)
{
    return t == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR ||
           t == CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR ||
           t == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR ||
           t == CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR ||
           t == CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR;
}

struct Desc;
typedef std::shared_ptr<const Desc> Snap;

// An attribute as set: its type, count and raw elements, or the descriptors it names (copied).
struct Attr {
    cudnnBackendAttributeType_t type;
    int64_t count = 0;
    std::vector<unsigned char> bytes;
    std::vector<Snap> descs;
};

struct Desc {
    cudnnBackendDescriptorType_t type;
    bool finalized = false;
    std::map<int, Attr> attrs;
    // what finalization made of them
    Tensor tensor; // TENSOR
    Op op;         // the OPERATION_* types; POINTWISE/REDUCTION/MATMUL/RNG: mode only
    std::shared_ptr<Graph> graph;   // OPERATIONGRAPH, ENGINEHEUR, ENGINE, ENGINECFG, EXECUTION_PLAN
    int64_t engine = -1;            // ENGINE, ENGINECFG, EXECUTION_PLAN
    int64_t workspace = 0;          // EXECUTION_PLAN
    cudnnHandle_t handle = nullptr; // EXECUTION_PLAN
    std::vector<int64_t> engines;   // ENGINEHEUR: the configs it offers
    std::map<int64_t, void *> ptrs; // VARIANT_PACK
    void *ws = nullptr;             // VARIANT_PACK
};

std::mutex g_mu;
std::map<const void *, Desc *> g_descs; // live descriptors

Desc *live(void *p)
{
    std::lock_guard<std::mutex> lk(g_mu);
    auto it = g_descs.find(p);
    return it == g_descs.end() ? nullptr : it->second;
}

// ---- the attribute table [B, H]: descriptor type, attribute, attribute type, element counts ----
struct AttrRule {
    cudnnBackendDescriptorType_t desc;
    int attr;
    const char *name;
    cudnnBackendAttributeType_t type;
    int64_t min, max;
    cudnnBackendDescriptorType_t ref; // for CUDNN_TYPE_BACKEND_DESCRIPTOR: the type it names
};
#define R_(d, a, t, lo, hi, ref)                                                                   \
    {                                                                                              \
        CUDNN_BACKEND_##d##_DESCRIPTOR, CUDNN_ATTR_##a, #a, CUDNN_TYPE_##t, lo, hi,                \
            CUDNN_BACKEND_##ref##_DESCRIPTOR                                                       \
    }
const AttrRule RULES[] = {
    R_(TENSOR, TENSOR_BYTE_ALIGNMENT, INT64, 1, 1, TENSOR),
    R_(TENSOR, TENSOR_DATA_TYPE, DATA_TYPE, 1, 1, TENSOR),
    R_(TENSOR, TENSOR_DIMENSIONS, INT64, 1, CUDNN_DIM_MAX, TENSOR),
    R_(TENSOR, TENSOR_STRIDES, INT64, 1, CUDNN_DIM_MAX, TENSOR),
    R_(TENSOR, TENSOR_UNIQUE_ID, INT64, 1, 1, TENSOR),
    R_(TENSOR, TENSOR_IS_VIRTUAL, BOOLEAN, 1, 1, TENSOR),
    R_(TENSOR, TENSOR_IS_BY_VALUE, BOOLEAN, 1, 1, TENSOR),
    R_(POINTWISE, POINTWISE_MODE, POINTWISE_MODE, 1, 1, TENSOR),
    R_(POINTWISE, POINTWISE_MATH_PREC, DATA_TYPE, 1, 1, TENSOR),
    R_(POINTWISE, POINTWISE_AXIS, INT64, 1, 1, TENSOR),
    R_(OPERATION_POINTWISE, OPERATION_POINTWISE_PW_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, 1, POINTWISE),
    R_(OPERATION_POINTWISE, OPERATION_POINTWISE_XDESC, BACKEND_DESCRIPTOR, 1, 1, TENSOR),
    R_(OPERATION_POINTWISE, OPERATION_POINTWISE_BDESC, BACKEND_DESCRIPTOR, 1, 1, TENSOR),
    R_(OPERATION_POINTWISE, OPERATION_POINTWISE_YDESC, BACKEND_DESCRIPTOR, 1, 1, TENSOR),
    R_(OPERATION_POINTWISE, OPERATION_POINTWISE_TDESC, BACKEND_DESCRIPTOR, 1, 1, TENSOR),
    R_(REDUCTION, REDUCTION_OPERATOR, REDUCTION_OPERATOR_TYPE, 1, 1, TENSOR),
    R_(REDUCTION, REDUCTION_COMP_TYPE, DATA_TYPE, 1, 1, TENSOR),
    R_(REDUCTION, REDUCTION_IS_DETERMINISTIC, BOOLEAN, 1, 1, TENSOR),
    R_(OPERATION_REDUCTION, OPERATION_REDUCTION_XDESC, BACKEND_DESCRIPTOR, 1, 1, TENSOR),
    R_(OPERATION_REDUCTION, OPERATION_REDUCTION_YDESC, BACKEND_DESCRIPTOR, 1, 1, TENSOR),
    R_(OPERATION_REDUCTION, OPERATION_REDUCTION_DESC, BACKEND_DESCRIPTOR, 1, 1, REDUCTION),
    R_(MATMUL, MATMUL_COMP_TYPE, DATA_TYPE, 1, 1, TENSOR),
    R_(OPERATION_MATMUL, OPERATION_MATMUL_ADESC, BACKEND_DESCRIPTOR, 1, 1, TENSOR),
    R_(OPERATION_MATMUL, OPERATION_MATMUL_BDESC, BACKEND_DESCRIPTOR, 1, 1, TENSOR),
    R_(OPERATION_MATMUL, OPERATION_MATMUL_CDESC, BACKEND_DESCRIPTOR, 1, 1, TENSOR),
    R_(OPERATION_MATMUL, OPERATION_MATMUL_DESC, BACKEND_DESCRIPTOR, 1, 1, MATMUL),
    R_(RNG, RNG_DISTRIBUTION, RNG_DISTRIBUTION, 1, 1, TENSOR),
    R_(RNG, RNG_BERNOULLI_DIST_PROBABILITY, DOUBLE, 1, 1, TENSOR),
    R_(OPERATION_RNG, OPERATION_RNG_YDESC, BACKEND_DESCRIPTOR, 1, 1, TENSOR),
    R_(OPERATION_RNG, OPERATION_RNG_DESC, BACKEND_DESCRIPTOR, 1, 1, RNG),
    R_(OPERATION_RNG, OPERATION_RNG_OFFSET_DESC, BACKEND_DESCRIPTOR, 1, 1, TENSOR),
    // the seed: an INT64 value or a tensor descriptor (two rows, either type)
    R_(OPERATION_RNG, OPERATION_RNG_SEED, INT64, 1, 1, TENSOR),
    R_(OPERATION_RNG, OPERATION_RNG_SEED, BACKEND_DESCRIPTOR, 1, 1, TENSOR),
    R_(OPERATION_RESHAPE, OPERATION_RESHAPE_XDESC, BACKEND_DESCRIPTOR, 1, 1, TENSOR),
    R_(OPERATION_RESHAPE, OPERATION_RESHAPE_YDESC, BACKEND_DESCRIPTOR, 1, 1, TENSOR),
    R_(OPERATIONGRAPH, OPERATIONGRAPH_HANDLE, HANDLE, 1, 1, TENSOR),
    R_(OPERATIONGRAPH, OPERATIONGRAPH_OPS, BACKEND_DESCRIPTOR, 1, 1 << 20, TENSOR), // any operation
    R_(ENGINEHEUR, ENGINEHEUR_OPERATION_GRAPH, BACKEND_DESCRIPTOR, 1, 1, OPERATIONGRAPH),
    R_(ENGINEHEUR, ENGINEHEUR_MODE, HEUR_MODE, 1, 1, TENSOR),
    R_(ENGINE, ENGINE_OPERATION_GRAPH, BACKEND_DESCRIPTOR, 1, 1, OPERATIONGRAPH),
    R_(ENGINE, ENGINE_GLOBAL_INDEX, INT64, 1, 1, TENSOR),
    R_(ENGINECFG, ENGINECFG_ENGINE, BACKEND_DESCRIPTOR, 1, 1, ENGINE),
    R_(EXECUTION_PLAN, EXECUTION_PLAN_HANDLE, HANDLE, 1, 1, TENSOR),
    R_(EXECUTION_PLAN, EXECUTION_PLAN_ENGINE_CONFIG, BACKEND_DESCRIPTOR, 1, 1, ENGINECFG),
    R_(VARIANT_PACK, VARIANT_PACK_UNIQUE_IDS, INT64, 0, 1 << 20, TENSOR),
    R_(VARIANT_PACK, VARIANT_PACK_DATA_POINTERS, VOID_PTR, 0, 1 << 20, TENSOR),
    R_(VARIANT_PACK, VARIANT_PACK_WORKSPACE, VOID_PTR, 1, 1, TENSOR),
};
#undef R_

size_t type_size(cudnnBackendAttributeType_t t)
{
    switch (t) {
    case CUDNN_TYPE_HANDLE: return sizeof(cudnnHandle_t);
    case CUDNN_TYPE_DATA_TYPE: return sizeof(cudnnDataType_t);
    case CUDNN_TYPE_BOOLEAN: return sizeof(bool);
    case CUDNN_TYPE_INT64: return sizeof(int64_t);
    case CUDNN_TYPE_DOUBLE: return sizeof(double);
    case CUDNN_TYPE_VOID_PTR: return sizeof(void *);
    case CUDNN_TYPE_HEUR_MODE: return sizeof(cudnnBackendHeurMode_t);
    case CUDNN_TYPE_POINTWISE_MODE: return sizeof(cudnnPointwiseMode_t);
    case CUDNN_TYPE_BACKEND_DESCRIPTOR: return sizeof(cudnnBackendDescriptor_t);
    case CUDNN_TYPE_REDUCTION_OPERATOR_TYPE: return sizeof(cudnnReduceTensorOp_t);
    case CUDNN_TYPE_RNG_DISTRIBUTION: return sizeof(cudnnRngDistribution_t);
    case CUDNN_TYPE_NUMERICAL_NOTE: return sizeof(cudnnBackendNumericalNote_t);
    default: return 0;
    }
}

const AttrRule *find_rule(cudnnBackendDescriptorType_t d, int attr, cudnnBackendAttributeType_t t,
                          bool *other_type)
{
    *other_type = false;
    for (const AttrRule &r : RULES)
        if (r.desc == d && r.attr == attr) {
            if (r.type == t) return &r;
            *other_type = true;
        }
    return nullptr;
}

template <typename T> T scalar(const Desc *d, int attr, T def)
{
    auto it = d->attrs.find(attr);
    if (it == d->attrs.end() || it->second.bytes.size() < sizeof(T)) return def;
    T v;
    memcpy(&v, it->second.bytes.data(), sizeof(T));
    return v;
}

std::vector<int64_t> ints(const Desc *d, int attr)
{
    std::vector<int64_t> v;
    auto it = d->attrs.find(attr);
    if (it == d->attrs.end()) return v;
    v.resize((size_t)it->second.count);
    memcpy(v.data(), it->second.bytes.data(), v.size() * sizeof(int64_t));
    return v;
}

const Desc *ref(const Desc *d, int attr, size_t i = 0)
{
    auto it = d->attrs.find(attr);
    return it == d->attrs.end() || it->second.descs.size() <= i ? nullptr
                                                                : it->second.descs[i].get();
}

bool has(const Desc *d, int attr) { return d->attrs.count(attr) != 0; }

// ---- finalization, per type ----

cudnnStatus_t fin_tensor(Desc *d)
{
    Tensor &t = d->tensor;
    if (!has(d, CUDNN_ATTR_TENSOR_UNIQUE_ID) || !has(d, CUDNN_ATTR_TENSOR_DATA_TYPE) ||
        !has(d, CUDNN_ATTR_TENSOR_DIMENSIONS) || !has(d, CUDNN_ATTR_TENSOR_STRIDES) ||
        !has(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT))
        return refuse(
            CUDNN_STATUS_BAD_PARAM,
            "tensor: unique id, data type, dimensions, strides and byte alignment are required");
    t.uid = scalar<int64_t>(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, 0);
    t.dt = scalar<cudnnDataType_t>(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_DATA_FLOAT);
    t.dims = ints(d, CUDNN_ATTR_TENSOR_DIMENSIONS);
    t.strides = ints(d, CUDNN_ATTR_TENSOR_STRIDES);
    t.align = scalar<int64_t>(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 0);
    t.virt = scalar<bool>(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, false);
    t.by_value = scalar<bool>(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, false);
    if (t.dims.size() != t.strides.size())
        return refuse(CUDNN_STATUS_BAD_PARAM, "tensor %lld: %zu dimensions but %zu strides",
                      (long long)t.uid, t.dims.size(), t.strides.size());
    for (size_t i = 0; i < t.dims.size(); i++)
        if (t.dims[i] <= 0 || t.strides[i] <= 0)
            return refuse(
                CUDNN_STATUS_BAD_PARAM,
                "tensor %lld: dimension %zu is %lld with stride %lld (both must be positive)",
                (long long)t.uid, i, (long long)t.dims[i], (long long)t.strides[i]);
    const size_t es = dtype_size(t.dt);
    if (!es)
        return refuse(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE,
                      "tensor %lld: data type %d is not emulated", (long long)t.uid, (int)t.dt);
    if (t.align <= 0 || t.align % (int64_t)es != 0)
        return refuse(
            CUDNN_STATUS_BAD_PARAM,
            "tensor %lld: byte alignment %lld is not a positive multiple of its %zu-byte elements",
            (long long)t.uid, (long long)t.align, es);
    if (t.by_value && (t.virt || t.elements() != 1))
        return refuse(CUDNN_STATUS_BAD_PARAM,
                      "tensor %lld: a by-value tensor is a scalar (every dimension 1), not virtual",
                      (long long)t.uid);
    return CUDNN_STATUS_SUCCESS;
}

bool pw_binary(cudnnPointwiseMode_t m)
{
    switch (m) {
    case CUDNN_POINTWISE_ADD:
    case CUDNN_POINTWISE_ADD_SQUARE:
    case CUDNN_POINTWISE_DIV:
    case CUDNN_POINTWISE_MAX:
    case CUDNN_POINTWISE_MIN:
    case CUDNN_POINTWISE_MOD:
    case CUDNN_POINTWISE_MUL:
    case CUDNN_POINTWISE_POW:
    case CUDNN_POINTWISE_SUB:
    case CUDNN_POINTWISE_ATAN2:
    case CUDNN_POINTWISE_CMP_EQ:
    case CUDNN_POINTWISE_CMP_NEQ:
    case CUDNN_POINTWISE_CMP_GT:
    case CUDNN_POINTWISE_CMP_GE:
    case CUDNN_POINTWISE_CMP_LT:
    case CUDNN_POINTWISE_CMP_LE:
    case CUDNN_POINTWISE_LOGICAL_AND:
    case CUDNN_POINTWISE_LOGICAL_OR: return true;
    default: return false;
    }
}

// The mode descriptors (POINTWISE, REDUCTION, MATMUL, RNG) keep their mode in op.
cudnnStatus_t fin_mode(Desc *d)
{
    Op &o = d->op;
    switch (d->type) {
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR:
        if (!has(d, CUDNN_ATTR_POINTWISE_MODE) || !has(d, CUDNN_ATTR_POINTWISE_MATH_PREC))
            return refuse(CUDNN_STATUS_BAD_PARAM,
                          "pointwise: mode and math precision are required");
        o.pw = scalar<cudnnPointwiseMode_t>(d, CUDNN_ATTR_POINTWISE_MODE, CUDNN_POINTWISE_ADD);
        o.prec = scalar<cudnnDataType_t>(d, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_DATA_FLOAT);
        o.axis = scalar<int64_t>(d, CUDNN_ATTR_POINTWISE_AXIS, -1);
        if (o.pw == CUDNN_POINTWISE_GEN_INDEX && !has(d, CUDNN_ATTR_POINTWISE_AXIS))
            return refuse(CUDNN_STATUS_BAD_PARAM,
                          "pointwise: GEN_INDEX needs CUDNN_ATTR_POINTWISE_AXIS");
        return CUDNN_STATUS_SUCCESS;
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR:
        if (!has(d, CUDNN_ATTR_REDUCTION_OPERATOR) || !has(d, CUDNN_ATTR_REDUCTION_COMP_TYPE))
            return refuse(CUDNN_STATUS_BAD_PARAM,
                          "reduction: operator and compute type are required");
        o.red = scalar<cudnnReduceTensorOp_t>(d, CUDNN_ATTR_REDUCTION_OPERATOR,
                                              CUDNN_REDUCE_TENSOR_ADD);
        o.prec = scalar<cudnnDataType_t>(d, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_DATA_FLOAT);
        return CUDNN_STATUS_SUCCESS;
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR:
        if (!has(d, CUDNN_ATTR_MATMUL_COMP_TYPE))
            return refuse(CUDNN_STATUS_BAD_PARAM, "matmul: compute type is required");
        o.prec = scalar<cudnnDataType_t>(d, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_DATA_FLOAT);
        return CUDNN_STATUS_SUCCESS;
    default: { // RNG
        const auto dist = scalar<cudnnRngDistribution_t>(d, CUDNN_ATTR_RNG_DISTRIBUTION,
                                                         CUDNN_RNG_DISTRIBUTION_BERNOULLI);
        if (!has(d, CUDNN_ATTR_RNG_DISTRIBUTION))
            return refuse(CUDNN_STATUS_BAD_PARAM, "rng: the distribution is required");
        if (dist != CUDNN_RNG_DISTRIBUTION_BERNOULLI)
            return refuse(CUDNN_STATUS_NOT_SUPPORTED,
                          "rng: only the Bernoulli distribution is emulated");
        o.prob = scalar<double>(d, CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY, 0.5);
        if (!(o.prob >= 0 && o.prob <= 1))
            return refuse(CUDNN_STATUS_BAD_PARAM, "rng: Bernoulli probability %g is not in [0, 1]",
                          o.prob);
        return CUDNN_STATUS_SUCCESS;
    }
    }
}

bool same_rank(const std::vector<Tensor> &in, const Tensor &out)
{
    for (const Tensor &t : in)
        if (t.dims.size() != out.dims.size()) return false;
    return true;
}

cudnnStatus_t fin_operation(Desc *d)
{
    Op &o = d->op;
    const Desc *mode = nullptr;
    auto tensor = [&](int attr) {
        const Desc *t = ref(d, attr);
        return t ? t->tensor : Tensor();
    };
    switch (d->type) {
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
        o.kind = OP_POINTWISE;
        mode = ref(d, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR);
        if (!mode || !ref(d, CUDNN_ATTR_OPERATION_POINTWISE_XDESC) ||
            !ref(d, CUDNN_ATTR_OPERATION_POINTWISE_YDESC))
            return refuse(CUDNN_STATUS_BAD_PARAM,
                          "pointwise operation: the pointwise descriptor, X and Y are required");
        o.pw = mode->op.pw, o.prec = mode->op.prec, o.axis = mode->op.axis;
        o.in = {tensor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC),
                tensor(CUDNN_ATTR_OPERATION_POINTWISE_BDESC),
                tensor(CUDNN_ATTR_OPERATION_POINTWISE_TDESC)};
        o.out = tensor(CUDNN_ATTR_OPERATION_POINTWISE_YDESC);
        if ((pw_binary(o.pw) || o.pw == CUDNN_POINTWISE_BINARY_SELECT) && !o.in[1].uid)
            return refuse(CUDNN_STATUS_BAD_PARAM,
                          "pointwise operation: mode %d takes a second input (BDESC)", (int)o.pw);
        if (o.pw == CUDNN_POINTWISE_BINARY_SELECT && !o.in[2].uid)
            return refuse(CUDNN_STATUS_BAD_PARAM,
                          "pointwise operation: BINARY_SELECT takes a condition (TDESC)");
        if (o.pw == CUDNN_POINTWISE_GEN_INDEX &&
            (o.axis < 0 || o.axis >= (int64_t)o.out.dims.size()))
            return refuse(CUDNN_STATUS_BAD_PARAM,
                          "pointwise operation: GEN_INDEX axis %lld outside Y's %zu dimensions",
                          (long long)o.axis, o.out.dims.size());
        while (!o.in.empty() && !o.in.back().uid) o.in.pop_back();
        break;
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR:
        o.kind = OP_REDUCTION;
        mode = ref(d, CUDNN_ATTR_OPERATION_REDUCTION_DESC);
        if (!mode || !ref(d, CUDNN_ATTR_OPERATION_REDUCTION_XDESC) ||
            !ref(d, CUDNN_ATTR_OPERATION_REDUCTION_YDESC))
            return refuse(CUDNN_STATUS_BAD_PARAM,
                          "reduction operation: the reduction descriptor, X and Y are required");
        o.red = mode->op.red, o.prec = mode->op.prec;
        o.in = {tensor(CUDNN_ATTR_OPERATION_REDUCTION_XDESC)};
        o.out = tensor(CUDNN_ATTR_OPERATION_REDUCTION_YDESC);
        break;
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
        o.kind = OP_MATMUL;
        mode = ref(d, CUDNN_ATTR_OPERATION_MATMUL_DESC);
        if (!mode || !ref(d, CUDNN_ATTR_OPERATION_MATMUL_ADESC) ||
            !ref(d, CUDNN_ATTR_OPERATION_MATMUL_BDESC) ||
            !ref(d, CUDNN_ATTR_OPERATION_MATMUL_CDESC))
            return refuse(CUDNN_STATUS_BAD_PARAM,
                          "matmul operation: the matmul descriptor, A, B and C are required");
        o.prec = mode->op.prec;
        o.in = {tensor(CUDNN_ATTR_OPERATION_MATMUL_ADESC),
                tensor(CUDNN_ATTR_OPERATION_MATMUL_BDESC)};
        o.out = tensor(CUDNN_ATTR_OPERATION_MATMUL_CDESC);
        if (o.out.dims.size() < 2)
            return refuse(CUDNN_STATUS_BAD_PARAM,
                          "matmul operation: C has fewer than 2 dimensions");
        break;
    case CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR: {
        o.kind = OP_RNG;
        mode = ref(d, CUDNN_ATTR_OPERATION_RNG_DESC);
        const auto seed = d->attrs.find(CUDNN_ATTR_OPERATION_RNG_SEED);
        if (!mode || !ref(d, CUDNN_ATTR_OPERATION_RNG_YDESC) || seed == d->attrs.end())
            return refuse(CUDNN_STATUS_BAD_PARAM,
                          "rng operation: the rng descriptor, Y and the seed are required");
        o.prob = mode->op.prob;
        o.out = tensor(CUDNN_ATTR_OPERATION_RNG_YDESC);
        o.seed_is_value = seed->second.type == CUDNN_TYPE_INT64;
        if (o.seed_is_value) {
            o.seed_value = scalar<int64_t>(d, CUDNN_ATTR_OPERATION_RNG_SEED, 0);
        } else {
            if (!ref(d, CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC))
                return refuse(CUDNN_STATUS_BAD_PARAM,
                              "rng operation: a seed tensor needs an offset tensor");
            o.in = {seed->second.descs[0]->tensor, tensor(CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC)};
        }
        return CUDNN_STATUS_SUCCESS; // Y's rank is free of the seed's
    }
    default:
        o.kind = OP_RESHAPE;
        if (!ref(d, CUDNN_ATTR_OPERATION_RESHAPE_XDESC) ||
            !ref(d, CUDNN_ATTR_OPERATION_RESHAPE_YDESC))
            return refuse(CUDNN_STATUS_BAD_PARAM, "reshape operation: X and Y are required");
        o.in = {tensor(CUDNN_ATTR_OPERATION_RESHAPE_XDESC)};
        o.out = tensor(CUDNN_ATTR_OPERATION_RESHAPE_YDESC);
        if (o.in[0].elements() != o.out.elements())
            return refuse(CUDNN_STATUS_BAD_PARAM, "reshape operation: X has %lld elements, Y %lld",
                          (long long)o.in[0].elements(), (long long)o.out.elements());
        return CUDNN_STATUS_SUCCESS;
    }
    if (!same_rank(o.in, o.out))
        return refuse(CUDNN_STATUS_BAD_PARAM,
                      "operation: its tensors differ in rank (%zu dimensions in Y)",
                      o.out.dims.size());
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t fin_graph(Desc *d)
{
    auto it = d->attrs.find(CUDNN_ATTR_OPERATIONGRAPH_OPS);
    if (it == d->attrs.end() || it->second.descs.empty())
        return refuse(CUDNN_STATUS_BAD_PARAM,
                      "operation graph: CUDNN_ATTR_OPERATIONGRAPH_OPS is required");
    auto g = std::make_shared<Graph>();
    std::map<int64_t, const Tensor *> seen;
    for (const Snap &s : it->second.descs) {
        if (!is_operation(s->type))
            return refuse(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE,
                          "operation graph: descriptor type %d is not an operation", (int)s->type);
        g->ops.push_back(s->op);
    }
    // one description per unique id, one producer per tensor
    std::map<int64_t, int> producers;
    for (const Op &o : g->ops) {
        if (++producers[o.out.uid] > 1)
            return refuse(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES,
                          "operation graph: tensor %lld is the output of two operations",
                          (long long)o.out.uid);
        std::vector<const Tensor *> all;
        for (const Tensor &t : o.in) all.push_back(&t);
        all.push_back(&o.out);
        for (const Tensor *t : all) {
            auto p = seen.find(t->uid);
            if (p == seen.end()) {
                seen[t->uid] = t;
            } else if (p->second->dims != t->dims || p->second->strides != t->strides ||
                       p->second->dt != t->dt || p->second->virt != t->virt ||
                       p->second->by_value != t->by_value) {
                return refuse(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES,
                              "operation graph: two different tensors have unique id %lld",
                              (long long)t->uid);
            }
        }
    }
    for (const auto &p : seen)
        if (p.second->virt && !producers.count(p.first))
            return refuse(CUDNN_STATUS_BAD_PARAM,
                          "operation graph: virtual tensor %lld is read but never produced",
                          (long long)p.first);
    d->graph = g;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t fin_engine_side(Desc *d)
{
    switch (d->type) {
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: {
        const Desc *g = ref(d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH);
        if (!g || !has(d, CUDNN_ATTR_ENGINEHEUR_MODE))
            return refuse(CUDNN_STATUS_BAD_PARAM,
                          "engine heuristics: the operation graph and the mode are required");
        d->graph = g->graph;
        d->engines = engines_for(*d->graph);
        return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR: {
        const Desc *g = ref(d, CUDNN_ATTR_ENGINE_OPERATION_GRAPH);
        if (!g || !has(d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX))
            return refuse(CUDNN_STATUS_BAD_PARAM,
                          "engine: the operation graph and the global index are required");
        d->graph = g->graph;
        d->engine = scalar<int64_t>(d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, -1);
        std::vector<int64_t> e = engines_for(*d->graph);
        bool known = false;
        for (int64_t x : e) known |= x == d->engine;
        if (!known)
            return refuse(CUDNN_STATUS_NOT_SUPPORTED,
                          "engine: global index %lld does not take this graph",
                          (long long)d->engine);
        return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: {
        const Desc *e = ref(d, CUDNN_ATTR_ENGINECFG_ENGINE);
        if (!e) return refuse(CUDNN_STATUS_BAD_PARAM, "engine config: the engine is required");
        d->graph = e->graph;
        d->engine = e->engine;
        return CUDNN_STATUS_SUCCESS;
    }
    default: { // EXECUTION_PLAN
        const Desc *c = ref(d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG);
        if (!c || !has(d, CUDNN_ATTR_EXECUTION_PLAN_HANDLE))
            return refuse(CUDNN_STATUS_BAD_PARAM,
                          "execution plan: the engine config and the handle are required");
        d->graph = c->graph;
        d->engine = c->engine;
        d->handle = scalar<cudnnHandle_t>(d, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, nullptr);
        if (!mc_emu::handle_live(d->handle, mc_emu::H_DNN_HANDLE))
            return refuse(CUDNN_STATUS_BAD_PARAM,
                          "execution plan: %p is not a handle from cudnnCreate", (void *)d->handle);
        std::string why;
        const cudnnStatus_t st = plan_check(*d->graph, d->engine, &d->workspace, &why);
        if (st != CUDNN_STATUS_SUCCESS) return refuse(st, "execution plan: %s", why.c_str());
        return CUDNN_STATUS_SUCCESS;
    }
    }
}

cudnnStatus_t fin_variant_pack(Desc *d)
{
    const std::vector<int64_t> uids = ints(d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
    auto p = d->attrs.find(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
    const size_t np = p == d->attrs.end() ? 0 : (size_t)p->second.count;
    if (uids.size() != np)
        return refuse(CUDNN_STATUS_BAD_PARAM, "variant pack: %zu unique ids but %zu data pointers",
                      uids.size(), np);
    for (size_t i = 0; i < np; i++) {
        void *ptr;
        memcpy(&ptr, p->second.bytes.data() + i * sizeof(void *), sizeof(void *));
        if (!d->ptrs.emplace(uids[i], ptr).second)
            return refuse(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES,
                          "variant pack: unique id %lld given twice", (long long)uids[i]);
    }
    d->ws = scalar<void *>(d, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, nullptr);
    return CUDNN_STATUS_SUCCESS;
}

} // namespace

int64_t Tensor::elements() const
{
    int64_t n = 1;
    for (int64_t x : dims) n *= x;
    return n;
}

int64_t Tensor::extent() const
{
    int64_t e = 1;
    for (size_t i = 0; i < dims.size(); i++) e += (dims[i] - 1) * strides[i];
    return e;
}

// ---- the C API ----

extern "C" {

size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

const char *cudnnGetErrorString(cudnnStatus_t status) { return status_name(status); }

void cudnnGetLastErrorString(char *message, size_t max_size)
{
    if (!message || !max_size) return;
    snprintf(message, max_size, "%s", g_last_error.c_str());
    g_last_error.clear();
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle)
{
    if (!handle) return refuse(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnCreate: handle is NULL");
    cudnnContext *c = new (std::nothrow) cudnnContext{nullptr};
    if (!c) return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    mc_emu::handle_add(c, mc_emu::H_DNN_HANDLE);
    *handle = c;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle)
{
    if (!mc_emu::handle_remove(handle, mc_emu::H_DNN_HANDLE))
        return refuse(CUDNN_STATUS_BAD_PARAM, "cudnnDestroy: %p is not a live handle",
                      (void *)handle);
    delete handle;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream)
{
    if (!mc_emu::handle_live(handle, mc_emu::H_DNN_HANDLE))
        return refuse(CUDNN_STATUS_BAD_PARAM, "cudnnSetStream: %p is not a live handle",
                      (void *)handle);
    if (stream && !mc_emu::handle_live(stream, mc_emu::H_STREAM))
        return refuse(CUDNN_STATUS_BAD_PARAM, "cudnnSetStream: %p is not a live stream",
                      (void *)stream);
    handle->stream = stream;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type,
                                           cudnnBackendDescriptor_t *descriptor)
{
    if (!descriptor)
        return refuse(CUDNN_STATUS_BAD_PARAM_NULL_POINTER,
                      "cudnnBackendCreateDescriptor: descriptor is NULL");
    bool ok = false;
    for (cudnnBackendDescriptorType_t t : EMULATED) ok |= t == type;
    if (!ok)
        return refuse(CUDNN_STATUS_NOT_SUPPORTED,
                      "cudnnBackendCreateDescriptor: descriptor type %d is not emulated",
                      (int)type);
    Desc *d = new (std::nothrow) Desc;
    if (!d) return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    d->type = type;
    std::lock_guard<std::mutex> lk(g_mu);
    g_descs[d] = d;
    *descriptor = d;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor)
{
    std::lock_guard<std::mutex> lk(g_mu);
    auto it = g_descs.find(descriptor);
    if (it == g_descs.end())
        return refuse(CUDNN_STATUS_BAD_PARAM,
                      "cudnnBackendDestroyDescriptor: %p is not a live descriptor", descriptor);
    delete it->second;
    g_descs.erase(it);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor,
                                       cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t count,
                                       const void *elements)
{
    Desc *d = live(descriptor);
    if (!d)
        return refuse(CUDNN_STATUS_BAD_PARAM,
                      "cudnnBackendSetAttribute: %p is not a live descriptor", descriptor);
    if (d->finalized)
        return refuse(CUDNN_STATUS_NOT_INITIALIZED,
                      "cudnnBackendSetAttribute: attribute %d on a finalized descriptor",
                      (int)name);
    bool other_type;
    const AttrRule *r = find_rule(d->type, name, type, &other_type);
    if (!r && other_type)
        return refuse(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
                      "cudnnBackendSetAttribute: attribute %d does not take type %d", (int)name,
                      (int)type);
    if (!r)
        return refuse(
            CUDNN_STATUS_NOT_SUPPORTED,
            "cudnnBackendSetAttribute: attribute %d is not one of descriptor type %d's, or is not emulated",
            (int)name, (int)d->type);
    if (count < r->min || count > r->max)
        return refuse(CUDNN_STATUS_BAD_PARAM,
                      "cudnnBackendSetAttribute: %s takes %lld to %lld elements, given %lld",
                      r->name, (long long)r->min, (long long)r->max, (long long)count);
    if (count > 0 && !elements)
        return refuse(CUDNN_STATUS_BAD_PARAM_NULL_POINTER,
                      "cudnnBackendSetAttribute: %s's elements are NULL", r->name);
    Attr a;
    a.type = type;
    a.count = count;
    a.bytes.resize((size_t)count * type_size(type));
    if (count) memcpy(a.bytes.data(), elements, a.bytes.size());
    if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
        for (int64_t i = 0; i < count; i++) {
            Desc *s = live(((void *const *)elements)[i]);
            if (!s)
                return refuse(CUDNN_STATUS_BAD_PARAM,
                              "cudnnBackendSetAttribute: %s[%lld] is not a live descriptor",
                              r->name, (long long)i);
            const bool want_op = name == CUDNN_ATTR_OPERATIONGRAPH_OPS;
            if (want_op ? !is_operation(s->type) : s->type != r->ref)
                return refuse(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE,
                              "cudnnBackendSetAttribute: %s[%lld] has descriptor type %d", r->name,
                              (long long)i, (int)s->type);
            if (!s->finalized)
                return refuse(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED,
                              "cudnnBackendSetAttribute: %s[%lld] is not finalized", r->name,
                              (long long)i);
            a.descs.push_back(std::make_shared<const Desc>(*s));
        }
    }
    d->attrs[name] = a;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor)
{
    Desc *d = live(descriptor);
    if (!d)
        return refuse(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize: %p is not a live descriptor",
                      descriptor);
    if (d->finalized)
        return refuse(CUDNN_STATUS_NOT_INITIALIZED, "cudnnBackendFinalize: already finalized");
    cudnnStatus_t st;
    switch (d->type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: st = fin_tensor(d); break;
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR:
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR:
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR:
    case CUDNN_BACKEND_RNG_DESCRIPTOR: st = fin_mode(d); break;
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: st = fin_graph(d); break;
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: st = fin_variant_pack(d); break;
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: st = fin_engine_side(d); break;
    default: st = fin_operation(d); break;
    }
    if (st == CUDNN_STATUS_SUCCESS) d->finalized = true;
    return st;
}

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor,
                                       cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t requested,
                                       int64_t *count, void *elements)
{
    Desc *d = live(descriptor);
    if (!d)
        return refuse(CUDNN_STATUS_BAD_PARAM,
                      "cudnnBackendGetAttribute: %p is not a live descriptor", descriptor);
    if (!d->finalized)
        return refuse(CUDNN_STATUS_NOT_INITIALIZED,
                      "cudnnBackendGetAttribute: attribute %d of a descriptor not finalized",
                      (int)name);
    if (requested < 0 || (requested > 0 && !elements))
        return refuse(CUDNN_STATUS_BAD_PARAM,
                      "cudnnBackendGetAttribute: %lld elements requested into %p",
                      (long long)requested, elements);
    // the results the emulation computes (the others are read back as set)
    if (d->type == CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR && name == CUDNN_ATTR_ENGINEHEUR_RESULTS) {
        if (type != CUDNN_TYPE_BACKEND_DESCRIPTOR)
            return refuse(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, "ENGINEHEUR_RESULTS: descriptors");
        const int64_t n = std::min<int64_t>(requested, (int64_t)d->engines.size());
        for (int64_t i = 0; i < n; i++) {
            Desc *c = live(((void **)elements)[i]);
            if (!c || c->type != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR || c->finalized)
                return refuse(CUDNN_STATUS_BAD_PARAM,
                              "ENGINEHEUR_RESULTS[%lld]: not a new engine config descriptor",
                              (long long)i);
            c->graph = d->graph, c->engine = d->engines[(size_t)i], c->finalized = true;
        }
        if (count) *count = requested ? n : (int64_t)d->engines.size();
        return CUDNN_STATUS_SUCCESS;
    }
    if (d->type == CUDNN_BACKEND_ENGINECFG_DESCRIPTOR && name == CUDNN_ATTR_ENGINECFG_ENGINE) {
        if (type != CUDNN_TYPE_BACKEND_DESCRIPTOR || requested != 1)
            return refuse(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
                          "ENGINECFG_ENGINE: one descriptor");
        Desc *e = live(((void **)elements)[0]);
        if (!e || e->type != CUDNN_BACKEND_ENGINE_DESCRIPTOR || e->finalized)
            return refuse(CUDNN_STATUS_BAD_PARAM, "ENGINECFG_ENGINE: not a new engine descriptor");
        e->graph = d->graph, e->engine = d->engine, e->finalized = true;
        if (count) *count = 1;
        return CUDNN_STATUS_SUCCESS;
    }
    if (d->type == CUDNN_BACKEND_ENGINE_DESCRIPTOR && name == CUDNN_ATTR_ENGINE_NUMERICAL_NOTE) {
        if (type != CUDNN_TYPE_NUMERICAL_NOTE)
            return refuse(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, "ENGINE_NUMERICAL_NOTE");
        const std::vector<cudnnBackendNumericalNote_t> notes = engine_notes(*d->graph, d->engine);
        const int64_t n = std::min<int64_t>(requested, (int64_t)notes.size());
        if (n) memcpy(elements, notes.data(), (size_t)n * sizeof(notes[0]));
        if (count) *count = requested ? n : (int64_t)notes.size();
        return CUDNN_STATUS_SUCCESS;
    }
    if (d->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR &&
        name == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE) {
        if (type != CUDNN_TYPE_INT64)
            return refuse(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
                          "EXECUTION_PLAN_WORKSPACE_SIZE: INT64");
        if (requested >= 1) memcpy(elements, &d->workspace, sizeof(int64_t));
        if (count) *count = 1;
        return CUDNN_STATUS_SUCCESS;
    }
    auto it = d->attrs.find(name);
    if (it == d->attrs.end() || it->second.type != type || type == CUDNN_TYPE_BACKEND_DESCRIPTOR)
        return refuse(CUDNN_STATUS_NOT_SUPPORTED,
                      "cudnnBackendGetAttribute: attribute %d of type %d is not emulated here",
                      (int)name, (int)type);
    const int64_t n = std::min(requested, it->second.count);
    if (n) memcpy(elements, it->second.bytes.data(), (size_t)n * type_size(type));
    if (count) *count = requested ? n : it->second.count;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                                  cudnnBackendDescriptor_t pack)
{
    if (!mc_emu::handle_live(handle, mc_emu::H_DNN_HANDLE))
        return refuse(CUDNN_STATUS_BAD_PARAM, "cudnnBackendExecute: %p is not a live handle",
                      (void *)handle);
    Desc *p = live(plan), *v = live(pack);
    if (!p || p->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR || !v ||
        v->type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
        return refuse(CUDNN_STATUS_BAD_PARAM,
                      "cudnnBackendExecute: an execution plan and a variant pack are required");
    if (!p->finalized || !v->finalized)
        return refuse(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED,
                      "cudnnBackendExecute: the plan or the variant pack is not finalized");
    std::string why;
    const cudnnStatus_t st = execute(*p->graph, p->engine, v->ptrs, v->ws, p->workspace, &why);
    if (st != CUDNN_STATUS_SUCCESS) return refuse(st, "cudnnBackendExecute: %s", why.c_str());
    mc_emu::profile_record("cudnnBackendExecute");
    mc_emu::after_launch("cudnnBackendExecute");
    return CUDNN_STATUS_SUCCESS;
}

} // extern "C"
