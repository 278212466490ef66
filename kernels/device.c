#include <cblas.h>
#include <stdio.h>
#include <string.h>

#include "cli/error.h"
#include "kernels/device.h"

#ifdef MC_WITH_CUDA
/* kernels/cuda/device.cu */
int mc_cuda_probe_device_count(void);
int mc_cuda_runtime_version(void);
#endif

void mc_cpu_set_threads(int n) { openblas_set_num_threads(n); }

int mc_cuda_device_count(void)
{
#ifdef MC_WITH_CUDA
    return mc_cuda_probe_device_count();
#else
    return 0;
#endif
}

const char *mc_build_description(void)
{
    static char buf[128];
#ifdef MC_WITH_CUDA
    int v = mc_cuda_runtime_version();
    snprintf(buf, sizeof(buf), "CUDA %d.%d (sm_90a, sm_80); CUDA backend not implemented yet",
             v / 1000, (v % 1000) / 10);
#else
    snprintf(buf, sizeof(buf), "CPU only (built without CUDA)");
#endif
    return buf;
}

const mc_backend_t *mc_backend_select(const char *device, int cpu_threads, char *why, size_t n)
{
    int gpus = mc_cuda_device_count();
    char reason[160];
    if (strcmp(device, "cuda") == 0)
        mc_user_error("--device cuda: the CUDA backend is not implemented yet in megatron-c "
                      "(%d GPU(s) visible; use --device cpu)", gpus);
    if (strcmp(device, "cpu") == 0)
        snprintf(reason, sizeof(reason), "requested by --device cpu");
    else if (gpus > 0)
        snprintf(reason, sizeof(reason), "%d GPU(s) visible, but the CUDA backend is not implemented yet", gpus);
    else
        snprintf(reason, sizeof(reason), "no CUDA device available");
    if (cpu_threads > 0) mc_cpu_set_threads(cpu_threads);
    snprintf(why, n, "cpu (%s; OpenBLAS with %d thread(s))", reason, openblas_get_num_threads());
    return mc_backend_cpu();
}
