// What the C side of the program needs to know of the CUDA backend: its device and compute
// stream (comm/comm_nccl.c orders its communication stream against it). Declared in
// kernels/device.h.
#include "kernels/cuda/cuda.h"

extern "C" int mc_cuda_backend_device(const mc_backend_t *be) { return mc_cuda(be)->device; }

extern "C" void *mc_cuda_backend_stream(const mc_backend_t *be)
{
    return (void *)mc_cuda_stream(be);
}
