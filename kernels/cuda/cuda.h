// Internal header of the CUDA backend (kernels/backend.h documents every op). CUDA C++ only:
// the rest of the program sees the backend through mc_backend_cuda() and the op table.
//
// Every op is enqueued on the backend's one compute stream and returns without waiting, except
// those that hand a value to the host (sumsq, count_zeros, has_nonfinite, memcpy_d2h), which
// synchronize the stream. The communication layer orders its own stream against this one.
#ifndef MC_KERNELS_CUDA_CUDA_H
#define MC_KERNELS_CUDA_CUDA_H

#include <cuda_runtime.h>
#include <stdio.h>

extern "C" {
#include "kernels/backend.h"
}

typedef struct {
    int device;
    cudaStream_t stream;     // every op of the table runs here
    cudaDeviceProp prop;     // SM count, shared memory per block, L2 size
    void *cublaslt;          // cublasLtHandle_t (kernels/cuda/gemm.cu)
    void *gemm_workspace;    // cuBLASLt workspace on the device
    size_t gemm_workspace_bytes;
    void *scratch;           // small device scratch for reductions (sumsq, flags)
    size_t scratch_bytes;
    void *host_scratch;      // pinned host mirror of scratch
} mc_cuda_t;

static inline const mc_cuda_t *mc_cuda(const mc_backend_t *be) { return (const mc_cuda_t *)be->impl; }
static inline cudaStream_t mc_cuda_stream(const mc_backend_t *be) { return mc_cuda(be)->stream; }

// A CUDA error inside an op is a runtime error of this rank: one line naming the call, then the
// job ends (mc_fatal through the C side).
extern "C" void mc_cuda_die(const char *what, cudaError_t e, const char *file, int line);
#define MC_CUDA_CHECK(call)                                                                    \
    do {                                                                                       \
        cudaError_t mc_e_ = (call);                                                            \
        if (mc_e_ != cudaSuccess) mc_cuda_die(#call, mc_e_, __FILE__, __LINE__);               \
    } while (0)
// After a kernel launch: launch configuration errors surface here, execution errors at the
// next synchronizing call.
#define MC_CUDA_LAUNCHED() MC_CUDA_CHECK(cudaGetLastError())

static inline unsigned mc_cuda_blocks(long n, int threads)
{
    long b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b > 65535L * 32 ? 65535L * 32 : b);
}

#endif
