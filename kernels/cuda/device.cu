// Device discovery for backend selection. Any error (no driver, no device, driver too old)
// means "no GPU": a CUDA build must still run on a CPU-only machine (DESIGN build facts).
#include <cuda_runtime.h>

extern "C" int mc_cuda_probe_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); // clear the sticky error
        return 0;
    }
    return n;
}

extern "C" int mc_cuda_runtime_version(void) { return CUDART_VERSION; }
