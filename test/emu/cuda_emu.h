// Force-included (g++ -include) before every file of kernels/cuda when it is compiled for the
// emulated device of the tests (test/emu/README.md): the CUDA headers as the host compiler sees
// them, CUDA's qualifiers made plain C++, the built-in variables (threadIdx ...) read from the
// running emulated thread, the device intrinsics the kernels use, and the launcher behind
// MC_LAUNCH (kernels/cuda/cuda.h). The kernels' own source is the one nvcc compiles.
#ifndef MC_TEST_EMU_CUDA_EMU_H
#define MC_TEST_EMU_CUDA_EMU_H

#ifndef MC_CUDA_EMU
#error "test/emu/cuda_emu.h is for the emulated build (-DMC_CUDA_EMU)"
#endif

// Every header the kernels include, first: the redefinitions below must not reach them.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_profiler_api.h>
#include <nvtx3/nvToolsExt.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <tuple>
#include <type_traits>
#include <utility>

#include "test/emu/emu.h"

// CUDA source, compiled as nvcc compiles it: headers shared with plain C (philox.h,
// attention_tiles.h) take their __host__ __device__ (constexpr) definitions. Defined after
// NVIDIA's headers, which must keep their host-compiler paths.
#define __CUDACC__ 1

// ---- qualifiers ----
#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __forceinline__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
// A block's static shared arrays: one per worker thread, which runs one block at a time.
#define __shared__ static thread_local

// ---- built-in variables ----
#define threadIdx (mc_emu::regs->tid)
#define blockIdx (mc_emu::regs->bid)
#define blockDim (mc_emu::regs->bdim)
#define gridDim (mc_emu::regs->gdim)
#define warpSize 32

// ---- intrinsics: barriers and warp operations name their call site when they fail ----
namespace mc_emu {
template <typename T> T shfl_xor(unsigned mask, T v, int lane_mask, int width, const char *file, int line)
{
    static_assert(sizeof(T) <= 8, "a shuffled value fits 64 bits");
    struct Slot {
        T in, out;
        int src;
    } slot;
    slot.in = v;
    const int lane = lane_id();
    // within each width-lane segment, as CUDA defines it
    slot.src = (lane_mask >= width) ? lane : (lane ^ lane_mask);
    if (width <= 0 || width > 32 || (width & (width - 1)))
        fail("__shfl_xor_sync with width %d (a power of two up to 32) at %s:%d", width, file, line);
    warp_collective(
        "__shfl_xor_sync", file, line, mask, &slot,
        [](void *const *args, void *) {
            for (int l = 0; l < 32; l++) {
                Slot *s = (Slot *)args[l];
                s->out = ((Slot *)args[s->src])->in;
            }
        },
        nullptr);
    return slot.out;
}
} // namespace mc_emu

static inline void __syncthreads(const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    mc_emu::block_barrier("__syncthreads", 0, file, line);
}
static inline int __syncthreads_or(int pred, const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    return mc_emu::block_barrier("__syncthreads_or", pred, file, line);
}
static inline void __syncwarp(unsigned mask = 0xffffffffu, const char *file = __builtin_FILE(),
                              int line = __builtin_LINE())
{
    mc_emu::warp_collective("__syncwarp", file, line, mask, nullptr, [](void *const *, void *) {}, nullptr);
}
template <typename T>
static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32, const char *file = __builtin_FILE(),
                                int line = __builtin_LINE())
{
    return mc_emu::shfl_xor<T>(mask, v, lane_mask, width, file, line);
}

// Correctly rounded fp32 arithmetic: the host's (this file is compiled with -ffp-contract=off,
// so no FMA contraction, as the __f*_rn intrinsics promise).
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }

// ---- launches ----
namespace mc_emu {
template <typename... P> struct Launcher {
    LaunchConfig c;
    void (*kernel)(P...);
    // The arguments are converted to the kernel's parameter types once, as CUDA copies them
    // into the launch; every thread then receives them by value.
    template <typename... A> void operator()(A &&...args) const
    {
        std::tuple<P...> bound(std::forward<A>(args)...);
        struct Ctx {
            void (*kernel)(P...);
            std::tuple<P...> *args;
        } ctx{kernel, &bound};
        launch(c, [](void *p) { std::apply(((Ctx *)p)->kernel, *((Ctx *)p)->args); }, &ctx);
    }
};
} // namespace mc_emu

template <typename... P>
static inline mc_emu::Launcher<P...> mc_emu_launch(dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                                                   void (*kernel)(P...), const char *name, const char *file, int line)
{
    return mc_emu::Launcher<P...>{{grid, block, smem, stream, (const void *)kernel, name, file, line}, kernel};
}

#endif
