// The CUDA backend: its device, stream and scratch, the memory ops, and the op table. The ops
// live in the files named after their concern (kernels/cuda/*.cu) and are declared in cuda.h.
#include <stdlib.h>
#include <string.h>

#include <cuda_profiler_api.h>
#include <nvtx3/nvToolsExt.h> // header-only (NVTX3): no library to link

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/attention.h"

extern "C" {
#include "base/error.h"
#include "kernels/device.h"
#include "kernels/memstats.h"
}

extern "C" void mc_cuda_die(const char *what, cudaError_t e, const char *file, int line)
{
    mc_fatal("CUDA error in %s (%s:%d): %s", what, file, line, cudaGetErrorString(e));
}

extern "C" void mc_cuda_bad_dtype(const char *op, mc_dtype_t dt)
{
    mc_fatal("internal error: the CUDA op %s does not take %s tensors", op, mc_dtype_name(dt));
}

static void *cuda_alloc(const mc_backend_t *be, size_t bytes)
{
    (void)be;
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        (void)cudaGetLastError(); // out of memory is the caller's to report
        return NULL;
    }
    // zero-filled, as the table promises; ordered before any op on the stream
    if (cudaMemsetAsync(p, 0, bytes ? bytes : 1, mc_cuda_stream(be)) != cudaSuccess) {
        (void)cudaGetLastError();
        cudaFree(p);
        return NULL;
    }
    mc_memstats_alloc(p, bytes ? bytes : 1);
    return p;
}

static void cuda_free(const mc_backend_t *be, void *p)
{
    if (!p) return;
    // the stream may still use it
    MC_CUDA_CHECK(cudaStreamSynchronize(mc_cuda_stream(be)));
    mc_memstats_free(p);
    MC_CUDA_CHECK(cudaFree(p));
}

static void cuda_h2d(const mc_backend_t *be, void *dst, const void *src, size_t bytes)
{
    if (!bytes) return;
    // synchronous for the host: src may be reused as soon as this returns
    MC_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, mc_cuda_stream(be)));
    MC_CUDA_CHECK(cudaStreamSynchronize(mc_cuda_stream(be)));
}

static void cuda_d2h(const mc_backend_t *be, void *dst, const void *src, size_t bytes)
{
    if (!bytes) return;
    MC_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, mc_cuda_stream(be)));
    MC_CUDA_CHECK(cudaStreamSynchronize(mc_cuda_stream(be)));
}

// Pinned host memory: what cudaMemcpyAsync copies without staging, and returns at once for.
static void *cuda_alloc_host(const mc_backend_t *be, size_t bytes)
{
    (void)be;
    void *p = NULL;
    if (cudaMallocHost(&p, bytes ? bytes : 1) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return p;
}

static void cuda_free_host(const mc_backend_t *be, void *p)
{
    if (!p) return;
    MC_CUDA_CHECK(cudaStreamSynchronize(mc_cuda_stream(be))); // a copy may still read it
    MC_CUDA_CHECK(cudaFreeHost(p));
}

static void cuda_h2d_async(const mc_backend_t *be, void *dst, const void *src, size_t bytes)
{
    if (bytes)
        MC_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, mc_cuda_stream(be)));
}

static void cuda_d2h_async(const mc_backend_t *be, void *dst, const void *src, size_t bytes)
{
    if (bytes)
        MC_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, mc_cuda_stream(be)));
}

static void cuda_d2d(const mc_backend_t *be, void *dst, const void *src, size_t bytes)
{
    if (!bytes || dst == src) return;
    MC_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, mc_cuda_stream(be)));
}

static void cuda_memset0(const mc_backend_t *be, void *p, size_t bytes)
{
    if (bytes) MC_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, mc_cuda_stream(be)));
}

static void cuda_synchronize(const mc_backend_t *be)
{
    MC_CUDA_CHECK(cudaStreamSynchronize(mc_cuda_stream(be)));
}

// Device (or managed) memory; host memory, pinned or not, is the host's. Any error: host.
static int cuda_is_device(const mc_backend_t *be, const void *p)
{
    (void)be;
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

static void *cuda_pinned_alloc(const mc_backend_t *be, size_t bytes)
{
    (void)be;
    void *p = NULL;
    if (cudaMallocHost(&p, bytes ? bytes : 1) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return p;
}

static void cuda_pinned_free(const mc_backend_t *be, void *p)
{
    (void)be;
    if (p) cudaFreeHost(p);
}

// --profile: the capture range of nsys --capture-range=cudaProfilerApi, and named ranges. The
// profiler sees the device's work, so the stream is drained at both ends of the range.
static void cuda_profiler(const mc_backend_t *be, int start)
{
    MC_CUDA_CHECK(cudaStreamSynchronize(mc_cuda_stream(be)));
    if (start) MC_CUDA_CHECK(cudaProfilerStart());
    else MC_CUDA_CHECK(cudaProfilerStop());
}

static void cuda_range_push(const mc_backend_t *be, const char *name)
{
    (void)be;
    nvtxRangePushA(name);
}

static void cuda_range_pop(const mc_backend_t *be)
{
    (void)be;
    nvtxRangePop();
}

// One backend per process (one rank drives one GPU).
static mc_cuda_t g_cuda;
static mc_backend_t g_backend;

extern "C" const mc_backend_t *mc_backend_cuda(int device, char *err, size_t n)
{
    if (g_backend.name) {
        if (g_cuda.device == device) return &g_backend;
        snprintf(err, n, "the CUDA backend already runs on device %d (one device per process)",
                 g_cuda.device);
        return NULL;
    }
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || device < 0 || device >= count) {
        (void)cudaGetLastError();
        snprintf(err, n, "CUDA device %d is not available (%d visible%s%s)", device,
                 e == cudaSuccess ? count : 0, e == cudaSuccess ? "" : ": ",
                 e == cudaSuccess ? "" : cudaGetErrorString(e));
        return NULL;
    }
    mc_cuda_t c;
    memset(&c, 0, sizeof(c));
    c.device = device;
    if ((e = cudaSetDevice(device)) != cudaSuccess ||
        (e = cudaGetDeviceProperties(&c.prop, device)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking)) != cudaSuccess) {
        snprintf(err, n, "CUDA device %d: %s", device, cudaGetErrorString(e));
        (void)cudaGetLastError();
        return NULL;
    }
    // 32 MiB: the column reductions' partials (LayerNorm dw/db, dbias) and the embedding
    // backward's sort of a micro-batch's tokens fit whole for the model sizes we train
    c.scratch_bytes = 32u << 20;
    c.host_scratch_bytes = 64u << 10; // sumsq_multi: 40 bytes a tensor
    if ((e = cudaMalloc(&c.scratch, c.scratch_bytes)) != cudaSuccess ||
        (e = cudaMallocHost(&c.host_scratch, c.host_scratch_bytes)) != cudaSuccess) {
        snprintf(err, n, "CUDA device %d: cannot allocate the backend's scratch: %s", device,
                 cudaGetErrorString(e));
        (void)cudaGetLastError();
        return NULL;
    }
    if (mc_cuda_gemm_init(&c, err, n) != 0) return NULL;
    g_cuda = c;
    mc_backend_t b;
    memset(&b, 0, sizeof(b));
    b.name = "cuda";
    b.device_memory = true;
    b.has_nccl = true;
    b.gpu = device;
    b.alloc = cuda_alloc;
    b.free = cuda_free;
    b.memcpy_h2d = cuda_h2d;
    b.memcpy_d2h = cuda_d2h;
    b.memcpy_d2d = cuda_d2d;
    b.memset0 = cuda_memset0;
    b.synchronize = cuda_synchronize;
    b.alloc_host = cuda_alloc_host;
    b.free_host = cuda_free_host;
    b.memcpy_h2d_async = cuda_h2d_async;
    b.memcpy_d2h_async = cuda_d2h_async;
    b.convert = mc_cuda_convert;
    b.gemm = mc_cuda_gemm;
    b.linear_forward = mc_cuda_linear_forward;
    b.linear_backward = mc_cuda_linear_backward;
    b.embedding_forward = mc_cuda_embedding_forward;
    b.embedding_backward = mc_cuda_embedding_backward;
    b.linear_gelu_forward = mc_cuda_linear_gelu_forward;
    b.linear_backward_gelu = mc_cuda_linear_backward_gelu;
    b.layernorm_forward = mc_cuda_layernorm_forward;
    b.add_layernorm_forward = mc_cuda_add_layernorm_forward;
    b.layernorm_backward_acc = mc_cuda_layernorm_backward_acc;
    b.rmsnorm_forward = mc_cuda_rmsnorm_forward;
    b.add_rmsnorm_forward = mc_cuda_add_rmsnorm_forward;
    b.rmsnorm_backward_acc = mc_cuda_rmsnorm_backward_acc;
    b.rope = mc_cuda_rope;
    b.qk_norm_forward = mc_cuda_qk_norm_forward;
    b.qk_norm_backward = mc_cuda_qk_norm_backward;
    b.gelu_forward = mc_cuda_gelu_forward;
    b.gelu_backward = mc_cuda_gelu_backward;
    b.swiglu_forward = mc_cuda_swiglu_forward;
    b.swiglu_backward = mc_cuda_swiglu_backward;
    b.dropout_forward = mc_cuda_dropout_forward;
    b.dropout_backward = mc_cuda_dropout_backward;
    b.attention_forward = mc_cuda_attention_forward;
    b.attention_backward = mc_cuda_attention_backward;
    b.attention_sizes = mc_cuda_attention_sizes;
    b.attention_block_forward = mc_cuda_attention_block_forward;
    b.attention_lse_merge = mc_cuda_attention_lse_merge;
    b.attention_block_backward = mc_cuda_attention_block_backward;
    b.attention_block_sizes = mc_cuda_attention_block_sizes_cudnn;
    b.copy_2d = mc_cuda_copy_2d;
    b.attention_library = true;
    b.ce_max = mc_cuda_ce_max;
    b.ce_sums = mc_cuda_ce_sums;
    b.ce_loss = mc_cuda_ce_loss;
    b.ce_backward = mc_cuda_ce_backward;
    b.ce_fused = mc_cuda_ce_fused;
    b.add = mc_cuda_add;
    b.add_inplace = mc_cuda_add_inplace;
    b.scale = mc_cuda_scale;
    b.sumsq = mc_cuda_sumsq;
    b.sumsq_multi = mc_cuda_sumsq_multi;
    b.count_zeros = mc_cuda_count_zeros;
    b.has_nonfinite = mc_cuda_has_nonfinite;
    b.adam_step = mc_cuda_adam_step;
    b.moe = &mc_cuda_moe_ops;
    b.profiler = cuda_profiler;
    b.range_push = cuda_range_push;
    b.range_pop = cuda_range_pop;
    b.is_device = cuda_is_device;
    b.pinned_alloc = cuda_pinned_alloc;
    b.pinned_free = cuda_pinned_free;
    b.impl = &g_cuda;
    g_backend = b;
    return &g_backend;
}
