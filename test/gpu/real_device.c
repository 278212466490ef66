/* test/fake/fake_device.h over a real GPU: test/mpi/test_comm_mpi.c's device checks (its
 * MC_TEST_FAKE_NCCL part, written for the emulation) built as test_comm_nccl_gpu against the real
 * CUDA runtime and NCCL, so scripts/gpu-test.sh runs the NCCL communicator on real hardware with
 * one GPU: one rank (NCCL refuses two ranks on one GPU), every group of size one, which still
 * exercises the stream and event ordering, the watchdog's ring, host staging and NCCL's calls.
 * Device buffers are managed memory, so the host reads and writes them itself (a buffer is its
 * own "shadow") once the stream is synchronized, as the checks do. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "kernels/device.h"
#include "test/fake/fake_device.h"

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) mc_fatal("test_comm_nccl_gpu: %s: %s", #call, cudaGetErrorString(e_)); \
    } while (0)

const mc_backend_t *fake_backend(void)
{
    char why[256] = "";
    const mc_backend_t *be = mc_backend_select("cuda", 1, 0, why, sizeof(why));
    if (!be) mc_fatal("test_comm_nccl_gpu: no CUDA backend: %s", why);
    return be;
}

/* Pinned copies of the sources of fake_stream_copy, freed at the end (a stream's host function
 * may not call CUDA, so they cannot be freed when their copy has run). */
static void *g_pinned[64];
static int g_npinned;

void fake_finalize(void)
{
    for (int i = 0; i < g_npinned; i++) cudaFreeHost(g_pinned[i]);
    g_npinned = 0;
}

void *fake_shadow(const void *device_ptr) { return (void *)device_ptr; }

void *fake_device_alloc(size_t bytes)
{
    void *p = NULL;
    CK(cudaMallocManaged(&p, bytes ? bytes : 1, cudaMemAttachGlobal));
    memset(p, 0, bytes);
    return p;
}

void fake_stream_synchronize(cudaStream_t s) { CK(cudaStreamSynchronize(s)); }

static void CUDART_CB pause_host(void *arg)
{
    const double s = *(double *)arg;
    free(arg);
    nanosleep(&(struct timespec){.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)}, NULL);
}

void fake_stream_delay(cudaStream_t s, double seconds)
{
    double *arg = malloc(sizeof(*arg));
    if (!arg) mc_fatal("out of memory");
    *arg = seconds;
    CK(cudaLaunchHostFunc(s, pause_host, arg)); /* in stream order, like a slow kernel */
}

/* A source in pageable host memory is first copied to pinned memory: CUDA stages a copy from
 * pageable memory synchronously (the host would wait for the stream's earlier work, a delay
 * included), so the ordering checks would test less. Device (managed) sources are copied as
 * they stand, in stream order. */
void fake_stream_copy(cudaStream_t s, void *dst, const void *src, size_t bytes)
{
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, src) != cudaSuccess) (void)cudaGetLastError(), a.type = cudaMemoryTypeUnregistered;
    if (a.type != cudaMemoryTypeUnregistered) {
        CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
        return;
    }
    if (g_npinned == (int)(sizeof(g_pinned) / sizeof(g_pinned[0])))
        mc_fatal("test_comm_nccl_gpu: more than %d stream copies", g_npinned);
    void *p = NULL;
    CK(cudaMallocHost(&p, bytes ? bytes : 1));
    memcpy(p, src, bytes);
    g_pinned[g_npinned++] = p;
    CK(cudaMemcpyAsync(dst, p, bytes, cudaMemcpyDefault, s));
}

void fake_nccl_fail_async(void)
{
    mc_fatal("test_comm_nccl_gpu: the asyncerr mode needs the emulation (test_comm_nccl)");
}
