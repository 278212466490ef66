// The emulated device's internal interface, shared by its parts (test/emu/*.cpp and the headers
// under test/emu/include): device memory, failures, launch records, warp collectives. Test code
// only: nothing of the product includes it. test/emu/README.md describes the whole emulation.
#ifndef MC_TEST_EMU_EMU_H
#define MC_TEST_EMU_EMU_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

namespace mc_emu {

// ---- failures ----
// One line on stderr ("cuda-emu: ..." with the kernel, block and thread when inside one), then
// the process ends with status 86 (MC_EMU_ABORT=1: abort(), for a debugger's backtrace).
[[noreturn]] void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// "kernel K (launched at F:L), block (x,y,z), thread (x,y,z)" when called from a kernel, else "".
const char *current_location();
// One line on stderr, and the run goes on (what a GPU would report only as an error code).
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// ---- the emulated GPU: an H100 SXM (compute capability 9.0) ----
constexpr size_t H100_MEMORY = 80ull << 30;    // bytes of device memory
constexpr size_t H100_SMEM_DEFAULT = 48 << 10; // dynamic shared memory per block without a grant
constexpr size_t H100_SMEM_OPTIN = 232448;     // the most cudaFuncSetAttribute may grant (227 KiB)

// ---- handles (streams, events, cuBLASLt objects, cuDNN handles): the live ones and their kinds ----
enum HandleKind { H_STREAM = 1, H_EVENT, H_LT_HANDLE, H_LT_DESC, H_LT_LAYOUT, H_LT_PREF, H_DNN_HANDLE };
void handle_add(const void *h, HandleKind kind);
bool handle_live(const void *h, HandleKind kind);
// False (nothing removed) unless h is live with that kind.
bool handle_remove(const void *h, HandleKind kind);

// ---- memory ----
enum MemKind { MEM_NONE = 0, MEM_DEVICE = 1, MEM_HOST_PINNED = 2, MEM_MANAGED = 3 };
// The kind of the allocation holding [p, p + bytes): MEM_NONE when p is not inside a registered
// allocation (plain host memory). When p is inside one but the range runs past its end, *overrun
// is set (if given) and the kind is still returned.
MemKind mem_kind(const void *p, size_t bytes, bool *overrun = nullptr);
// cudaMalloc (MEM_DEVICE), cudaMallocManaged, cudaMallocHost (MEM_HOST_PINNED): exactly `bytes`,
// 256-byte aligned, filled with 0xff. mem_free(p, pinned): cudaFree / cudaFreeHost.
cudaError_t mem_alloc(void **out, size_t bytes, MemKind kind);
cudaError_t mem_free(void *p, bool pinned);
size_t device_bytes(); // device and managed bytes allocated
// Fails unless [p, p + bytes) lies inside one device (or managed) allocation; `what` names the
// operand in the message ("cublasLtMatmul: A").
void require_device(const void *p, size_t bytes, const char *what);

// ---- launches ----
// Called after every piece of device work (kernel, cuBLASLt matmul, CUB sort): counts it and,
// with MC_EMU_HASH=FILE, appends "N name hash-of-all-device-memory" to FILE, so two runs under
// different thread schedules can be compared launch by launch.
void after_launch(const char *name);
// The emulated device's clock (what events record), in milliseconds: device work moves it on by a
// modelled duration (a kernel 2 us + 1 ns per thread launched, a cuBLASLt matmul 1 ns per 1000
// multiply-adds, a copy or memset 0.1 ns per byte), so that timings are the same in every run
// whatever the host's load, and the work's order decides what a timing finds.
double clock_ms();
void clock_advance_ns(uint64_t ns);
// MC_EMU_PROFILE=PATH: appends `what` (a kernel as launched, a library call, a copy, a marker) to
// the list of device work at PATH; nothing otherwise.
void profile_record(const char *what);

// ---- kernels ----
// The running emulated thread's built-in variables (cuda_emu.h maps threadIdx ... onto them).
struct ThreadRegs {
    uint3 tid, bid;
    dim3 bdim, gdim;
};
extern __thread const ThreadRegs *regs; // __thread: no C++ TLS wrapper (UBSan mis-checks its address)
// The running block's dynamic shared memory: exactly the launch's bytes, filled with 0xff.
void *dynamic_smem();

struct LaunchConfig {
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
    const void *kernel;
    const char *name, *file; // the kernel as written at the launch, and where
    int line;
};
// Runs body(ctx) as every thread of every block of c (a kernel with its arguments bound), then
// after_launch. An invalid configuration (H100's limits) runs nothing and leaves the error for
// cudaGetLastError, as on a GPU.
void launch(const LaunchConfig &c, void (*body)(void *), void *ctx);
// The error cudaGetLastError returns next (runtime.cpp): set, and read without clearing.
void set_last_error(cudaError_t e);
cudaError_t last_error();
// cudaFuncSetAttribute(kernel, MaxDynamicSharedMemorySize, bytes): up to an H100's opt-in.
cudaError_t grant_smem(const void *kernel, int bytes);
// The dynamic shared memory cudaFuncSetAttribute granted the kernel (48 KiB by default).
size_t granted_smem(const void *kernel);

// __syncthreads (what "__syncthreads") and __syncthreads_or ("__syncthreads_or": returns the OR
// of every thread's pred): every thread of the block must reach the same call site.
int block_barrier(const char *what, int pred, const char *file, int line);

// ---- warp collectives (used by the device intrinsics and the wmma emulation) ----
// Every lane of the calling thread's warp must call it at the same call site (file, line) with
// the same `what`; when the 32nd lane arrives, op(args, ctx) runs once with every lane's arg
// (args[lane]), then all 32 lanes go on. Lanes that exited, lanes waiting elsewhere, or a
// warp of fewer than 32 threads make it fail, naming the sites. mask must be 0xffffffff.
typedef void (*warp_op_fn)(void *const *args, void *ctx);
void warp_collective(const char *what, const char *file, int line, unsigned mask, void *arg, warp_op_fn op,
                     void *ctx);
// The calling CUDA thread's lane (0..31); fails outside a kernel.
int lane_id();

} // namespace mc_emu

#endif
