// A small builder over cuDNN's C backend API (cudnn_graph.h): tensors, the operations the fused
// attention patterns use, the operation graph and its execution plan (kernels/cuda/cudnn_sdpa.cu
// builds the patterns). CUDA C++ only, built with cuDNN (MC_WITH_CUDNN).
//
// Every call is checked: the first that fails is remembered with cuDNN's own reason
// (cudnnGetLastErrorString) and makes the rest no-ops, so a graph is written straight through
// and asked once whether it worked. The builder owns every descriptor it made, for as long as
// its plan is used.
#ifndef MC_KERNELS_CUDA_CUDNN_GRAPH_H
#define MC_KERNELS_CUDA_CUDNN_GRAPH_H

#ifdef MC_WITH_CUDNN

#include <cudnn_graph.h>
#include <stdint.h>

#include <string>
#include <vector>

typedef cudnnBackendDescriptor_t mc_dnn_desc_t;

struct mc_dnn_builder {
    std::vector<mc_dnn_desc_t> owned;
    cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
    std::string error; // "what failed: STATUS (cuDNN's reason)"

    mc_dnn_builder() = default;
    mc_dnn_builder(const mc_dnn_builder &) = delete;
    mc_dnn_builder &operator=(const mc_dnn_builder &) = delete;
    ~mc_dnn_builder();
    bool ok() const { return status == CUDNN_STATUS_SUCCESS; }

    // A tensor of 4 dimensions. align: the byte alignment its pointers keep.
    mc_dnn_desc_t tensor(int64_t uid, cudnnDataType_t dt, const int64_t dims[4],
                         const int64_t strides[4], bool is_virtual, bool by_value = false,
                         int64_t align = 16);
    // A virtual tensor of these dims, row-major (fp32 unless dt says otherwise).
    mc_dnn_desc_t virt(int64_t uid, const int64_t dims[4], cudnnDataType_t dt = CUDNN_DATA_FLOAT);
    // A by-value fp32 scalar ([1, 1, 1, 1]); its value is given at each execution.
    mc_dnn_desc_t scalar(int64_t uid);

    // Operations (each returns its finalized operation descriptor).
    mc_dnn_desc_t pointwise(cudnnPointwiseMode_t mode, mc_dnn_desc_t x, mc_dnn_desc_t b,
                            mc_dnn_desc_t t, mc_dnn_desc_t y,
                            cudnnDataType_t prec = CUDNN_DATA_FLOAT, int64_t axis = -1);
    mc_dnn_desc_t reduction(cudnnReduceTensorOp_t op, mc_dnn_desc_t x, mc_dnn_desc_t y);
    mc_dnn_desc_t matmul(mc_dnn_desc_t a, mc_dnn_desc_t b, mc_dnn_desc_t c);
    mc_dnn_desc_t bernoulli(mc_dnn_desc_t y, mc_dnn_desc_t seed, mc_dnn_desc_t offset, double keep);
    mc_dnn_desc_t reshape(mc_dnn_desc_t x, mc_dnn_desc_t y);

    // The operation graph of ops and the first execution plan the heuristic offers that
    // finalizes on an engine without a NONDETERMINISTIC numerical note (megatron-c's results do
    // not depend on the run): the plan, its workspace in *workspace; NULL when none (error says
    // why).
    mc_dnn_desc_t plan(cudnnHandle_t handle, const std::vector<mc_dnn_desc_t> &ops,
                       int64_t *workspace);

  private:
    mc_dnn_desc_t make(cudnnBackendDescriptorType_t type);
    void set(mc_dnn_desc_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
             int64_t count, const void *elements, const char *what);
    mc_dnn_desc_t finalize(mc_dnn_desc_t d, const char *what);
    void fail(cudnnStatus_t st, const char *what);
    bool deterministic(mc_dnn_desc_t cfg);
};

#endif
#endif
