/* mc_devmem_t of the backends (comm/devmem.h). */
#include "comm/devmem.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/device.h"

/* The backend's own copies (ctx is the backend), for every backend with device memory. */
static void be_d2h(void *ctx, void *dst, const void *src, size_t bytes)
{
    const mc_backend_t *be = ctx;
    be->memcpy_d2h(be, dst, src, bytes);
}

static void be_h2d(void *ctx, void *dst, const void *src, size_t bytes)
{
    const mc_backend_t *be = ctx;
    be->memcpy_h2d(be, dst, src, bytes);
}

static void be_d2d(void *ctx, void *dst, const void *src, size_t bytes)
{
    const mc_backend_t *be = ctx;
    be->memcpy_d2d(be, dst, src, bytes);
}

#ifdef MC_WITH_CUDA
#include <cuda_runtime_api.h>

/* Device (or managed) memory; host memory, pinned or not, is the host's. Any error: host. */
static int cuda_is_device(void *ctx, const void *p)
{
    (void)ctx;
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

static void *cuda_host_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    void *p = NULL;
    if (cudaMallocHost(&p, bytes ? bytes : 1) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return p;
}

static void cuda_host_free(void *ctx, void *p)
{
    (void)ctx;
    if (p) cudaFreeHost(p);
}
#endif

/* The strict backend (kernels/strict.c): its memory told apart by address, plain host memory
 * for staging. */
static int strict_is_device(void *ctx, const void *p)
{
    (void)ctx;
    return mc_strict_owns(p);
}

static void *strict_host_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    return malloc(bytes ? bytes : 1);
}

static void strict_host_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

const mc_devmem_t *mc_devmem_for(const mc_backend_t *be)
{
    if (strcmp(be->name, "strict") == 0) {
        static mc_devmem_t sdm;
        sdm = (mc_devmem_t){.ctx = (void *)be,
                            .is_device = strict_is_device,
                            .d2h = be_d2h,
                            .h2d = be_h2d,
                            .d2d = be_d2d,
                            .host_alloc = strict_host_alloc,
                            .host_free = strict_host_free};
        return &sdm;
    }
#ifdef MC_WITH_CUDA
    static mc_devmem_t dm;
    if (strcmp(be->name, "cuda") == 0) {
        dm = (mc_devmem_t){.ctx = (void *)be,
                           .is_device = cuda_is_device,
                           .d2h = be_d2h,
                           .h2d = be_h2d,
                           .d2d = be_d2d,
                           .host_alloc = cuda_host_alloc,
                           .host_free = cuda_host_free};
        return &dm;
    }
#endif
    (void)be;
    return NULL;
}
