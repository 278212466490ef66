// The CUDA runtime API calls of the backend and its tests, on the emulated device (runtime.cpp
// has its memory). Defined with the real header's signatures; the emulated build links these
// instead of libcudart.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_profiler_api.h>

#include "test/emu/emu.h"

using namespace mc_emu;

namespace {
// A stream or event is a live handle of its kind; the object itself holds nothing.
template <typename T> cudaError_t make(T *out, HandleKind kind)
{
    if (!out) return cudaErrorInvalidValue;
    char *h = new char;
    handle_add(h, kind);
    *out = (T)(void *)h;
    return cudaSuccess;
}

cudaError_t destroy(void *p, HandleKind kind)
{
    if (!handle_remove(p, kind)) return cudaErrorInvalidResourceHandle;
    delete (char *)p;
    return cudaSuccess;
}

// An event: when it was last recorded, on the emulated device's clock (clock_ms: work runs when it
// is issued, so the time between two records is the modelled time of the work between them).
struct Event {
    double t;
    bool recorded, timing;
};


// The legacy (0) and per-thread default streams are streams too.
bool valid_stream(cudaStream_t s) { return !s || s == cudaStreamPerThread || handle_live((const void *)s, H_STREAM); }

// The errors the emulation returns, with the runtime's names and messages for them.
struct ErrorText {
    cudaError_t e;
    const char *name, *text;
};
const ErrorText ERRORS[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
};

ErrorText error_text(cudaError_t e)
{
    for (const ErrorText &t : ERRORS)
        if (t.e == e) return t;
    return {e, "cudaErrorUnknown", "unknown error"};
}

cudaError_t ret(cudaError_t e)
{
    if (e != cudaSuccess) set_last_error(e);
    return e;
}

// CUDA_VISIBLE_DEVICES empty or starting with -1 hides the device, as the driver does.
int device_count()
{
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    return v && (!*v || !strncmp(v, "-1", 2)) ? 0 : 1;
}

cudaError_t copy_check(void *dst, const void *src, size_t n, cudaMemcpyKind kind, const char *call)
{
    bool over_d = false, over_s = false;
    const MemKind kd = mem_kind(dst, n, &over_d), ks = mem_kind(src, n, &over_s);
    const bool dev_d = kd == MEM_DEVICE || kd == MEM_MANAGED, dev_s = ks == MEM_DEVICE || ks == MEM_MANAGED;
    const bool want_dev_d = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool want_dev_s = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind != cudaMemcpyDefault && (dev_d != want_dev_d || dev_s != want_dev_s)) {
        note("%s: kind %d but dst is %s memory and src %s memory", call, (int)kind, dev_d ? "device" : "host",
             dev_s ? "device" : "host");
        return cudaErrorInvalidValue;
    }
    if ((dev_d && over_d) || (dev_s && over_s)) {
        note("%s: %zu bytes run past the end of a device allocation", call, n);
        return cudaErrorInvalidValue;
    }
    return cudaSuccess;
}
} // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count) return ret(cudaErrorInvalidValue);
    *count = device_count();
    return *count ? cudaSuccess : ret(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device) { return ret(device == 0 && device_count() ? cudaSuccess : cudaErrorInvalidDevice); }

cudaError_t cudaGetDevice(int *device)
{
    if (!device) return ret(cudaErrorInvalidValue);
    *device = 0;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int device)
{
    if (!p || device != 0 || !device_count()) return ret(cudaErrorInvalidDevice);
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "NVIDIA H100 80GB HBM3 (emulated)");
    p->totalGlobalMem = H100_MEMORY;
    p->sharedMemPerBlock = H100_SMEM_DEFAULT;
    p->sharedMemPerBlockOptin = H100_SMEM_OPTIN;
    p->sharedMemPerMultiprocessor = 233472;
    p->regsPerBlock = p->regsPerMultiprocessor = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsPerMultiProcessor = 2048;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647, p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->totalConstMem = 64 << 10;
    p->major = 9, p->minor = 0;
    p->multiProcessorCount = 132;
    p->l2CacheSize = 50 << 20;
    p->memoryBusWidth = 5120;
    p->unifiedAddressing = 1;
    p->managedMemory = 1;
    p->concurrentKernels = 1;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int device)
{
    if (!id || len <= 0 || device != 0) return ret(cudaErrorInvalidValue);
    snprintf(id, (size_t)len, "0000:00:00.0");
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v) { return v ? (*v = CUDART_VERSION, cudaSuccess) : ret(cudaErrorInvalidValue); }
cudaError_t cudaDriverGetVersion(int *v) { return v ? (*v = CUDART_VERSION, cudaSuccess) : ret(cudaErrorInvalidValue); }

cudaError_t cudaPeekAtLastError(void) { return last_error(); }

cudaError_t cudaGetLastError(void)
{
    const cudaError_t e = cudaPeekAtLastError();
    set_last_error(cudaSuccess);
    return e;
}

const char *cudaGetErrorName(cudaError_t e) { return error_text(e).name; }
const char *cudaGetErrorString(cudaError_t e) { return error_text(e).text; }

cudaError_t cudaMalloc(void **p, size_t n) { return ret(mem_alloc(p, n, MEM_DEVICE)); }
cudaError_t cudaMallocManaged(void **p, size_t n, unsigned int) { return ret(mem_alloc(p, n, MEM_MANAGED)); }
cudaError_t cudaMallocHost(void **p, size_t n) { return ret(mem_alloc(p, n, MEM_HOST_PINNED)); }
cudaError_t cudaFree(void *p) { return ret(mem_free(p, false)); }
cudaError_t cudaFreeHost(void *p) { return ret(mem_free(p, true)); }

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    if (!free_bytes || !total) return ret(cudaErrorInvalidValue);
    *total = H100_MEMORY;
    *free_bytes = *total - device_bytes();
    return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *a, const void *p)
{
    if (!a) return ret(cudaErrorInvalidValue);
    memset(a, 0, sizeof(*a));
    switch (mem_kind(p, 1)) {
    case MEM_DEVICE: a->type = cudaMemoryTypeDevice; break;
    case MEM_MANAGED: a->type = cudaMemoryTypeManaged; break;
    case MEM_HOST_PINNED: a->type = cudaMemoryTypeHost; break;
    default: a->type = cudaMemoryTypeUnregistered; break;
    }
    a->device = 0;
    if (a->type != cudaMemoryTypeUnregistered) a->devicePointer = a->hostPointer = (void *)p;
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t s)
{
    if (!valid_stream(s)) return ret(cudaErrorInvalidResourceHandle);
    if (!n) return cudaSuccess;
    const cudaError_t e = copy_check(dst, src, n, kind, "cudaMemcpyAsync");
    if (e != cudaSuccess) return ret(e);
    memmove(dst, src, n);
    clock_advance_ns(1000 + n / 10);
    static const char *const kinds[] = {"HostToHost", "HostToDevice", "DeviceToHost", "DeviceToDevice",
                                        "Default"};
    // the host side's memory: pinned (cudaMallocHost) or pageable
    const void *host = kind == cudaMemcpyHostToDevice ? src : kind == cudaMemcpyDeviceToHost ? dst : nullptr;
    char what[96];
    snprintf(what, sizeof(what), "cudaMemcpyAsync %s %zu%s", kinds[kind <= cudaMemcpyDefault ? kind : 4], n,
             !host ? "" : mem_kind(host, n) == MEM_HOST_PINNED ? " pinned" : " pageable");
    profile_record(what);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind)
{
    return cudaMemcpyAsync(dst, src, n, kind, 0);
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t s)
{
    if (!valid_stream(s)) return ret(cudaErrorInvalidResourceHandle);
    if (!n) return cudaSuccess;
    bool over = false;
    const MemKind k = mem_kind(p, n, &over);
    if ((k != MEM_DEVICE && k != MEM_MANAGED) || over) {
        note("cudaMemsetAsync: %zu bytes at %p are not inside one device allocation", n, p);
        return ret(cudaErrorInvalidValue);
    }
    memset(p, value, n);
    clock_advance_ns(1000 + n / 10);
    char what[64];
    snprintf(what, sizeof(what), "cudaMemsetAsync %zu", n);
    profile_record(what);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int value, size_t n) { return cudaMemsetAsync(p, value, n, 0); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int) { return ret(make(s, H_STREAM)); }
cudaError_t cudaStreamCreate(cudaStream_t *s) { return ret(make(s, H_STREAM)); }
cudaError_t cudaStreamDestroy(cudaStream_t s) { return ret(destroy((void *)s, H_STREAM)); }
cudaError_t cudaStreamSynchronize(cudaStream_t s) { return valid_stream(s) ? cudaSuccess : ret(cudaErrorInvalidResourceHandle); }
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    if (!e) return ret(cudaErrorInvalidValue);
    Event *ev = new Event{0.0, false, (flags & cudaEventDisableTiming) == 0};
    handle_add(ev, H_EVENT);
    *e = (cudaEvent_t)(void *)ev;
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    if (!handle_remove((void *)e, H_EVENT)) return ret(cudaErrorInvalidResourceHandle);
    delete (Event *)(void *)e;
    return cudaSuccess;
}

// The stream's work so far has run (it runs when issued): the event takes the device's clock.
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    if (!handle_live((void *)e, H_EVENT) || !valid_stream(s)) return ret(cudaErrorInvalidResourceHandle);
    Event *ev = (Event *)(void *)e;
    ev->t = clock_ms();
    ev->recorded = true;
    return cudaSuccess;
}

// CUDA's rules: both events recorded and made with timing, else cudaErrorInvalidResourceHandle.
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    if (!ms) return ret(cudaErrorInvalidValue);
    if (!handle_live((void *)start, H_EVENT) || !handle_live((void *)end, H_EVENT))
        return ret(cudaErrorInvalidResourceHandle);
    const Event *a = (const Event *)(void *)start, *b = (const Event *)(void *)end;
    if (!a->recorded || !b->recorded || !a->timing || !b->timing) return ret(cudaErrorInvalidResourceHandle);
    *ms = (float)(b->t - a->t);
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) { return handle_live((void *)e, H_EVENT) ? cudaSuccess : ret(cudaErrorInvalidResourceHandle); }
cudaError_t cudaEventSynchronize(cudaEvent_t e) { return cudaEventQuery(e); }

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int)
{
    return valid_stream(s) && handle_live((void *)e, H_EVENT) ? cudaSuccess : ret(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *data)
{
    if (!valid_stream(s) || !fn) return ret(cudaErrorInvalidValue);
    fn(data); // the stream's earlier work is done: it ran when enqueued
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr, int value)
{
    if (!func) return ret(cudaErrorInvalidDeviceFunction);
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) {
        note("cudaFuncSetAttribute: attribute %d is not emulated", (int)attr);
        return ret(cudaErrorInvalidValue);
    }
    return ret(grant_smem(func, value));
}

// --profile's capture range: nothing to capture here, so each call is said on stderr, where a
// test can see at which iteration of the log it came.
cudaError_t cudaProfilerStart(void)
{
    fprintf(stderr, "cuda-emu: cudaProfilerStart\n");
    profile_record("cudaProfilerStart");
    return cudaSuccess;
}

cudaError_t cudaProfilerStop(void)
{
    fprintf(stderr, "cuda-emu: cudaProfilerStop\n");
    profile_record("cudaProfilerStop");
    return cudaSuccess;
}

} // extern "C"
