// The builder over cuDNN's C backend API: kernels/cuda/cudnn_graph.h.
#ifdef MC_WITH_CUDNN

#include <stdio.h>

#include "kernels/cuda/cudnn_graph.h"

mc_dnn_builder::~mc_dnn_builder()
{
    for (size_t i = owned.size(); i-- > 0;) cudnnBackendDestroyDescriptor(owned[i]);
}

void mc_dnn_builder::fail(cudnnStatus_t st, const char *what)
{
    if (!ok()) return;
    char why[1024] = "";
    cudnnGetLastErrorString(why, sizeof(why));
    status = st;
    error = std::string(what) + ": " + cudnnGetErrorString(st) +
            (why[0] ? std::string(" (") + why + ")" : "");
}

mc_dnn_desc_t mc_dnn_builder::make(cudnnBackendDescriptorType_t type)
{
    mc_dnn_desc_t d = nullptr;
    if (!ok()) return nullptr;
    const cudnnStatus_t st = cudnnBackendCreateDescriptor(type, &d);
    if (st != CUDNN_STATUS_SUCCESS) {
        fail(st, "cudnnBackendCreateDescriptor");
        return nullptr;
    }
    owned.push_back(d);
    return d;
}

void mc_dnn_builder::set(mc_dnn_desc_t d, cudnnBackendAttributeName_t name,
                         cudnnBackendAttributeType_t type, int64_t count, const void *elements,
                         const char *what)
{
    if (!ok()) return;
    const cudnnStatus_t st = cudnnBackendSetAttribute(d, name, type, count, elements);
    if (st != CUDNN_STATUS_SUCCESS) fail(st, what);
}

mc_dnn_desc_t mc_dnn_builder::finalize(mc_dnn_desc_t d, const char *what)
{
    if (!ok()) return nullptr;
    const cudnnStatus_t st = cudnnBackendFinalize(d);
    if (st != CUDNN_STATUS_SUCCESS) fail(st, what);
    return ok() ? d : nullptr;
}

mc_dnn_desc_t mc_dnn_builder::tensor(int64_t uid, cudnnDataType_t dt, const int64_t dims[4],
                                     const int64_t strides[4], bool is_virtual, bool by_value,
                                     int64_t align)
{
    mc_dnn_desc_t d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor unique id");
    set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, "tensor data type");
    set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims, "tensor dimensions");
    set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides, "tensor strides");
    set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment");
    set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual, "tensor is virtual");
    if (by_value)
        set(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value,
            "tensor is by value");
    return finalize(d, "a tensor");
}

mc_dnn_desc_t mc_dnn_builder::virt(int64_t uid, const int64_t dims[4], cudnnDataType_t dt)
{
    const int64_t strides[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
    return tensor(uid, dt, dims, strides, true, false, 16);
}

mc_dnn_desc_t mc_dnn_builder::scalar(int64_t uid)
{
    const int64_t one[4] = {1, 1, 1, 1};
    return tensor(uid, CUDNN_DATA_FLOAT, one, one, false, true, 4);
}

mc_dnn_desc_t mc_dnn_builder::pointwise(cudnnPointwiseMode_t mode, mc_dnn_desc_t x, mc_dnn_desc_t b,
                                        mc_dnn_desc_t t, mc_dnn_desc_t y, cudnnDataType_t prec,
                                        int64_t axis)
{
    mc_dnn_desc_t p = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    set(p, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise mode");
    set(p, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, "pointwise precision");
    if (axis >= 0) set(p, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, "pointwise axis");
    finalize(p, "a pointwise descriptor");
    mc_dnn_desc_t o = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    set(o, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p,
        "pointwise op mode");
    set(o, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x,
        "pointwise op X");
    if (b)
        set(o, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b,
            "pointwise op B");
    if (t)
        set(o, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t,
            "pointwise op T");
    set(o, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y,
        "pointwise op Y");
    return finalize(o, "a pointwise operation");
}

mc_dnn_desc_t mc_dnn_builder::reduction(cudnnReduceTensorOp_t op, mc_dnn_desc_t x, mc_dnn_desc_t y)
{
    const cudnnDataType_t f = CUDNN_DATA_FLOAT;
    mc_dnn_desc_t r = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    set(r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &op,
        "reduction operator");
    set(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f, "reduction compute type");
    finalize(r, "a reduction descriptor");
    mc_dnn_desc_t o = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    set(o, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &r,
        "reduction op mode");
    set(o, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x,
        "reduction op X");
    set(o, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y,
        "reduction op Y");
    return finalize(o, "a reduction operation");
}

mc_dnn_desc_t mc_dnn_builder::matmul(mc_dnn_desc_t a, mc_dnn_desc_t b, mc_dnn_desc_t c)
{
    const cudnnDataType_t f = CUDNN_DATA_FLOAT;
    mc_dnn_desc_t m = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    set(m, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f, "matmul compute type");
    finalize(m, "a matmul descriptor");
    mc_dnn_desc_t o = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    set(o, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &m,
        "matmul op mode");
    set(o, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a, "matmul op A");
    set(o, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, "matmul op B");
    set(o, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c, "matmul op C");
    return finalize(o, "a matmul operation");
}

mc_dnn_desc_t mc_dnn_builder::bernoulli(mc_dnn_desc_t y, mc_dnn_desc_t seed, mc_dnn_desc_t offset,
                                        double keep)
{
    const cudnnRngDistribution_t dist = CUDNN_RNG_DISTRIBUTION_BERNOULLI;
    mc_dnn_desc_t r = make(CUDNN_BACKEND_RNG_DESCRIPTOR);
    set(r, CUDNN_ATTR_RNG_DISTRIBUTION, CUDNN_TYPE_RNG_DISTRIBUTION, 1, &dist, "rng distribution");
    set(r, CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY, CUDNN_TYPE_DOUBLE, 1, &keep,
        "rng probability");
    finalize(r, "an rng descriptor");
    mc_dnn_desc_t o = make(CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR);
    set(o, CUDNN_ATTR_OPERATION_RNG_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &r, "rng op mode");
    set(o, CUDNN_ATTR_OPERATION_RNG_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, "rng op Y");
    set(o, CUDNN_ATTR_OPERATION_RNG_SEED, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &seed, "rng op seed");
    set(o, CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &offset,
        "rng op offset");
    return finalize(o, "an rng operation");
}

mc_dnn_desc_t mc_dnn_builder::reshape(mc_dnn_desc_t x, mc_dnn_desc_t y)
{
    mc_dnn_desc_t o = make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    set(o, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x,
        "reshape op X");
    set(o, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y,
        "reshape op Y");
    return finalize(o, "a reshape operation");
}

// Whether an engine config's engine has no NONDETERMINISTIC numerical note.
bool mc_dnn_builder::deterministic(mc_dnn_desc_t cfg)
{
    mc_dnn_desc_t e = make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    int64_t n = 0;
    if (!ok()) return false;
    cudnnStatus_t st = cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE,
                                                CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e);
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    if (st == CUDNN_STATUS_SUCCESS)
        st =
            cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                     CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes);
    if (st != CUDNN_STATUS_SUCCESS) {
        fail(st, "an engine's numerical notes");
        return false;
    }
    for (int64_t i = 0; i < n; i++)
        if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) return false;
    return true;
}

mc_dnn_desc_t mc_dnn_builder::plan(cudnnHandle_t handle, const std::vector<mc_dnn_desc_t> &ops,
                                   int64_t *workspace)
{
    mc_dnn_desc_t g = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    set(g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "the graph's handle");
    set(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, (int64_t)ops.size(),
        ops.data(), "the graph's operations");
    finalize(g, "the operation graph");
    mc_dnn_desc_t heur = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g,
        "the heuristic's graph");
    set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "the heuristic's mode");
    finalize(heur, "the engine heuristic");
    int64_t n = 0;
    if (ok()) {
        const cudnnStatus_t st = cudnnBackendGetAttribute(
            heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, nullptr);
        if (st != CUDNN_STATUS_SUCCESS) fail(st, "the heuristic's results");
    }
    std::vector<mc_dnn_desc_t> cfgs;
    for (int64_t i = 0; i < n && ok(); i++)
        cfgs.push_back(make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    if (ok() && n > 0) {
        const cudnnStatus_t st = cudnnBackendGetAttribute(
            heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &n, cfgs.data());
        if (st != CUDNN_STATUS_SUCCESS) fail(st, "the heuristic's engine configs");
    }
    if (!ok()) return nullptr;
    std::string last = "the heuristic offers no engine for the graph";
    for (int64_t i = 0; i < n; i++) {
        if (!deterministic(cfgs[(size_t)i])) {
            if (!ok()) return nullptr;
            last = "the heuristic's engines are all nondeterministic";
            continue;
        }
        mc_dnn_desc_t p = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        set(p, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle,
            "the plan's handle");
        set(p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
            &cfgs[(size_t)i], "the plan's engine");
        if (!ok()) return nullptr;
        const cudnnStatus_t st = cudnnBackendFinalize(p);
        if (st != CUDNN_STATUS_SUCCESS) { // this engine does not take it: the next may
            char why[1024] = "";
            cudnnGetLastErrorString(why, sizeof(why));
            last = std::string("the execution plan: ") + cudnnGetErrorString(st) +
                   (why[0] ? std::string(" (") + why + ")" : "");
            continue;
        }
        int64_t count = 0;
        const cudnnStatus_t ws = cudnnBackendGetAttribute(
            p, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &count, workspace);
        if (ws != CUDNN_STATUS_SUCCESS) {
            fail(ws, "the plan's workspace size");
            return nullptr;
        }
        return p;
    }
    status = CUDNN_STATUS_NOT_SUPPORTED;
    error = last;
    return nullptr;
}

#endif
