// The emulated cuDNN's internal interface (test/emu/cudnn.cpp: the C API, descriptors and their
// attributes; test/emu/cudnn_graph.cpp: what an execution plan supports and how it computes).
// Test code only. The sources and the rules are listed at the top of cudnn.cpp.
#ifndef MC_TEST_EMU_CUDNN_EMU_H
#define MC_TEST_EMU_CUDNN_EMU_H

#include <cudnn_graph.h>
#include <stdint.h>

#include <map>
#include <string>
#include <vector>

namespace mc_dnn
{

// A finalized tensor descriptor [B: CUDNN_BACKEND_TENSOR_DESCRIPTOR].
struct Tensor {
    int64_t uid = 0;
    cudnnDataType_t dt = CUDNN_DATA_FLOAT;
    std::vector<int64_t> dims, strides;
    int64_t align = 0;
    bool virt = false, by_value = false;
    int64_t elements() const; // product of the dims
    int64_t extent() const;   // 1 + sum (dim - 1) * stride: the elements its strides span
};

enum OpKind { OP_POINTWISE, OP_REDUCTION, OP_MATMUL, OP_RNG, OP_RESHAPE };

// A finalized operation: its inputs and output by role, and its mode. Roles: pointwise X, B, T
// (B and T absent: uid 0); reduction X; matmul A, B; RNG seed and offset tensors (absent when
// the seed is a value); reshape X.
struct Op {
    OpKind kind = OP_POINTWISE;
    std::vector<Tensor> in;
    Tensor out;
    cudnnPointwiseMode_t pw = CUDNN_POINTWISE_ADD;
    cudnnDataType_t prec =
        CUDNN_DATA_FLOAT; // pointwise math precision, reduction/matmul compute type
    int64_t axis = -1;    // GEN_INDEX
    cudnnReduceTensorOp_t red = CUDNN_REDUCE_TENSOR_ADD;
    double prob = 0; // Bernoulli probability of a 1
    bool seed_is_value = false;
    int64_t seed_value = 0;
};

struct Graph {
    std::vector<Op> ops;
};

// The engines the emulated heuristic offers for a graph (its global indices, best first) and
// their numerical notes: for the backward pattern engine 0 accumulates dQ with atomics
// (CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC, and its results vary from run to run as such a
// kernel's would), engine 1 is deterministic; the forward pattern has engine 1 only.
std::vector<int64_t> engines_for(const Graph &g);
std::vector<cudnnBackendNumericalNote_t> engine_notes(const Graph &g, int64_t engine);

// Whether an engine runs the graph (the documented support matrix): CUDNN_STATUS_SUCCESS with the
// workspace bytes it needs, or the NOT_SUPPORTED_* status with why.
cudnnStatus_t plan_check(const Graph &g, int64_t engine, int64_t *workspace, std::string *why);

// Runs the graph: uid -> pointer (device memory; by-value tensors: host memory), the workspace.
// Failures of the caller's that a GPU would not report stop the process (mc_emu::fail).
cudnnStatus_t execute(const Graph &g, int64_t engine, const std::map<int64_t, void *> &ptrs,
                      void *ws, int64_t ws_bytes, std::string *why);

const char *dtype_name(cudnnDataType_t t);
size_t dtype_size(cudnnDataType_t t); // 0 for types the emulation does not take

} // namespace mc_dnn

#endif
