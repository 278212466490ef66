/* mc_devmem_t of the backends (comm/devmem.h): the backend's own copies and its view of its
 * memory, for every backend with device memory. */
#include "comm/devmem.h"

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

static int be_is_device(void *ctx, const void *p)
{
    const mc_backend_t *be = ctx;
    return be->is_device(be, p);
}

static void *be_host_alloc(void *ctx, size_t bytes)
{
    const mc_backend_t *be = ctx;
    return be->pinned_alloc(be, bytes);
}

static void be_host_free(void *ctx, void *p)
{
    const mc_backend_t *be = ctx;
    be->pinned_free(be, p);
}

const mc_devmem_t *mc_devmem_for(const mc_backend_t *be)
{
    if (!be->device_memory) return NULL;
    if (!be->is_device || !be->pinned_alloc || !be->pinned_free)
        return NULL;       /* a backend that cannot tell its memory apart: nothing can be staged */
    static mc_devmem_t dm; /* one backend per process */
    dm = (mc_devmem_t){.ctx = (void *)be,
                       .is_device = be_is_device,
                       .d2h = be_d2h,
                       .h2d = be_h2d,
                       .d2d = be_d2d,
                       .host_alloc = be_host_alloc,
                       .host_free = be_host_free};
    return &dm;
}
