// The emulated device's own checks (test/emu/README.md), each a small kernel compiled like
// kernels/cuda (g++ with cuda_emu.h): what a correct kernel gets (barriers, shuffles, wmma, CUB,
// poisoned memory, schedules that agree) and that each defect the emulation promises to catch
// stops the run with one line naming it (run in a child process: the emulator exits 86).
// Prints TAP lines; exits 1 if any check failed.
#include <mma.h>
#include <cub/device/device_radix_sort.cuh>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/cuda/cuda.h"
#include "test/emu/child.h"

static int g_n, g_failed;
static void report(bool ok, const std::string &what)
{
    printf("%s %d - %s\n", ok ? "ok" : "not ok", ++g_n, what.c_str());
    g_failed += !ok;
}

template <typename T> static T *dev(size_t n)
{
    void *p = nullptr;
    if (cudaMalloc(&p, n * sizeof(T)) != cudaSuccess) abort();
    return (T *)p;
}

// f must end the process with the emulator's status and a line containing `want`.
static void expect_death(const char *what, const char *want, void (*f)())
{
    std::string err;
    const bool ok = in_child(f, &err) == 86 && err.find(want) != std::string::npos;
    while (!err.empty() && err.back() == '\n') err.pop_back();
    report(ok, std::string(what) + (ok ? ": " : ": expected \"") + (ok ? err : std::string(want) + "\", got: " + err));
}

// ---- what a correct kernel gets ----

static __global__ void k_shfl_sum(float *out)
{
    float v = (float)(threadIdx.x + 1);
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

static __global__ void k_sync_or(int *out, int who)
{
    out[threadIdx.x] = __syncthreads_or(threadIdx.x == (unsigned)who);
}

// Reverses a block's values through shared memory: right only if the barrier orders the writes
// before the reads.
static __global__ void k_reverse(int *out, const int *in)
{
    __shared__ int sh[256];
    sh[threadIdx.x] = in[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = sh[blockDim.x - 1 - threadIdx.x];
}

static __global__ void k_read_smem(unsigned char *out, int n)
{
    MC_DYNAMIC_SMEM(unsigned char, sm);
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = sm[i];
}

static void test_correct_kernels()
{
    float *d = dev<float>(64), h[64];
    MC_LAUNCH(2, 32, 0, 0, k_shfl_sum)(d);
    cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
    bool ok = true;
    for (int i = 0; i < 64; i++) ok &= h[i] == 528.0f; // 1 + ... + 32 in every lane
    report(ok, "__shfl_xor_sync butterfly: every lane of two warps holds the warp's sum");

    int *o = dev<int>(128), ho[128];
    MC_LAUNCH(1, 128, 0, 0, k_sync_or)(o, 77);
    cudaMemcpy(ho, o, sizeof(ho), cudaMemcpyDeviceToHost);
    ok = true;
    for (int i = 0; i < 128; i++) ok &= ho[i] == 1;
    MC_LAUNCH(1, 128, 0, 0, k_sync_or)(o, -1);
    cudaMemcpy(ho, o, sizeof(ho), cudaMemcpyDeviceToHost);
    for (int i = 0; i < 128; i++) ok &= ho[i] == 0;
    report(ok, "__syncthreads_or: one thread's predicate reaches all, none gives 0");

    int *in = dev<int>(256), *out = dev<int>(256), hi[256], hr[256];
    for (int i = 0; i < 256; i++) hi[i] = i * 7;
    cudaMemcpy(in, hi, sizeof(hi), cudaMemcpyHostToDevice);
    MC_LAUNCH(1, 256, 0, 0, k_reverse)(out, in);
    cudaMemcpy(hr, out, sizeof(hr), cudaMemcpyDeviceToHost);
    ok = true;
    for (int i = 0; i < 256; i++) ok &= hr[i] == hi[255 - i];
    report(ok, "__syncthreads orders shared-memory writes before reads");

    unsigned char *fresh = dev<unsigned char>(100), hb[100];
    cudaMemcpy(hb, fresh, 100, cudaMemcpyDeviceToHost);
    ok = std::all_of(hb, hb + 100, [](unsigned char c) { return c == 0xff; });
    MC_LAUNCH(1, 64, 100, 0, k_read_smem)(fresh, 100);
    cudaMemcpy(hb, fresh, 100, cudaMemcpyDeviceToHost);
    ok &= std::all_of(hb, hb + 100, [](unsigned char c) { return c == 0xff; });
    report(ok, "fresh device memory and dynamic shared memory read as 0xff (NaN, -1)");
    cudaFree(d), cudaFree(o), cudaFree(in), cudaFree(out), cudaFree(fresh);
}

// ---- the launch limits ----

static __global__ void k_nothing(int *p) { (void)p; }

static void test_limits()
{
    (void)cudaGetLastError();
    MC_LAUNCH(1, 2048, 0, 0, k_nothing)(nullptr);
    const cudaError_t e1 = cudaGetLastError();
    MC_LAUNCH(dim3(1, 70000), 32, 0, 0, k_nothing)(nullptr);
    const cudaError_t e2 = cudaGetLastError();
    report(e1 == cudaErrorInvalidConfiguration && e2 == cudaErrorInvalidConfiguration,
           "a block of 2048 threads and a grid y of 70000 are refused (cudaErrorInvalidConfiguration)");
    unsigned char *o = dev<unsigned char>(1);
    MC_LAUNCH(1, 32, 64 << 10, 0, k_read_smem)(o, 0);
    const cudaError_t e3 = cudaGetLastError();
    const cudaError_t g = cudaFuncSetAttribute((const void *)k_read_smem, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               64 << 10);
    MC_LAUNCH(1, 32, 64 << 10, 0, k_read_smem)(o, 0);
    const cudaError_t e4 = cudaGetLastError();
    const cudaError_t g2 = cudaFuncSetAttribute((const void *)k_read_smem,
                                                cudaFuncAttributeMaxDynamicSharedMemorySize, 232448 + 1);
    report(e3 == cudaErrorInvalidValue && g == cudaSuccess && e4 == cudaSuccess && g2 == cudaErrorInvalidValue,
           "dynamic shared memory over 48 KiB only once granted, and no grant over an H100's 227 KiB");
    int host[4];
    report(cudaMemcpy(host, o, 16, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue &&
               cudaMemcpy(o, host, 1, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue,
           "copies past a device allocation or of the wrong kind are refused");
    cudaFree(o);
}

// ---- defects that stop the run ----

static __global__ void k_divergent_barrier()
{
    if (threadIdx.x < 64) __syncthreads();
    else __syncthreads();
}
static __global__ void k_barrier_after_return()
{
    if (threadIdx.x >= 32) return;
    __syncthreads();
}
static __global__ void k_lane_skips_shfl(float *out)
{
    float v = 1.0f;
    if (threadIdx.x != 5) v = __shfl_xor_sync(0xffffffffu, v, 1);
    out[threadIdx.x] = v;
}
static __global__ void k_lanes_apart(float *out)
{
    float v = 1.0f;
    if (threadIdx.x < 16) v = __shfl_xor_sync(0xffffffffu, v, 1);
    else v = __shfl_xor_sync(0xffffffffu, v, 2);
    out[threadIdx.x] = v;
}
static __global__ void k_partial_warp(float *out) { out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1); }

static void test_defects()
{
    expect_death("a divergent __syncthreads stops the run naming both call sites", "divergent barrier",
                 [] { MC_LAUNCH(1, 128, 0, 0, k_divergent_barrier)(); });
    expect_death("a __syncthreads after some threads returned stops the run", "after some threads of the block returned",
                 [] { MC_LAUNCH(1, 64, 0, 0, k_barrier_after_return)(); });
    expect_death("a warp operation one lane never reaches: deadlock, with where each thread waits", "deadlock",
                 [] { MC_LAUNCH(1, 32, 0, 0, k_lane_skips_shfl)(dev<float>(32)); });
    expect_death("lanes of a warp at different warp operations stop the run", "divergent warp",
                 [] { MC_LAUNCH(1, 32, 0, 0, k_lanes_apart)(dev<float>(32)); });
    expect_death("a full-mask shuffle in a warp of 16 threads stops the run", "fewer than 32 threads",
                 [] { MC_LAUNCH(1, 48, 0, 0, k_partial_warp)(dev<float>(48)); });
    expect_death("a library call on host memory stops the run naming the operand", "keys in: ", [] {
        unsigned keys[4] = {3, 1, 2, 0};
        int vals[4] = {0, 1, 2, 3};
        size_t bytes = 0;
        cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, keys, vals, vals, 4);
        void *tmp = dev<char>(bytes);
        cub::DeviceRadixSort::SortPairs(tmp, bytes, keys, dev<unsigned>(4), vals, dev<int>(4), 4);
    });
}

// ---- wmma ----

using namespace nvcuda;
static __global__ void k_mma(float *d, const __half *a, const __half *b, int ldm, int offset)
{
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    wmma::load_matrix_sync(fa, a + offset, ldm);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
}

static void test_wmma()
{
    __half ha[16 * 24], hb[256];
    for (int i = 0; i < 16 * 24; i++) ha[i] = __float2half((float)((i * 37) % 17 - 8) / 8.0f);
    for (int i = 0; i < 256; i++) hb[i] = __float2half((float)((i * 11) % 13 - 6) / 4.0f);
    __half *a = dev<__half>(16 * 24), *b = dev<__half>(256);
    float *d = dev<float>(256), got[256];
    cudaMemcpy(a, ha, sizeof(ha), cudaMemcpyHostToDevice);
    cudaMemcpy(b, hb, sizeof(hb), cudaMemcpyHostToDevice);
    MC_LAUNCH(1, 32, 0, 0, k_mma)(d, a, b, 24, 0);
    cudaMemcpy(got, d, sizeof(got), cudaMemcpyDeviceToHost);
    bool ok = true;
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) {
            float s = 0.0f; // B col_major: B(k, c) = b[c * 16 + k]
            for (int k = 0; k < 16; k++) s += __half2float(ha[r * 24 + k]) * __half2float(hb[c * 16 + k]);
            ok &= got[r * 16 + c] == s;
        }
    report(ok, "wmma m16n16k16: row-major A (ldm 24) times column-major B, as the definition gives");
    static __half *sa, *sb;
    static float *sd;
    sa = a, sb = b, sd = d;
    expect_death("a wmma load from a pointer not 256-bit aligned stops the run", "not 256-bit aligned",
                 [] { MC_LAUNCH(1, 32, 0, 0, k_mma)(sd, sa, sb, 24, 8); });
    expect_death("a wmma ldm that is not a multiple of 16 bytes stops the run", "ldm 20 is not a multiple",
                 [] { MC_LAUNCH(1, 32, 0, 0, k_mma)(sd, sa, sb, 20, 0); });
    cudaFree(a), cudaFree(b), cudaFree(d);
}

// ---- CUB ----

static void test_cub()
{
    const int n = 1000;
    std::vector<unsigned> keys(n);
    std::vector<int> vals(n);
    for (int i = 0; i < n; i++) keys[i] = (unsigned)((i * 7919) % 1024), vals[i] = i;
    unsigned *ki = dev<unsigned>(n), *ko = dev<unsigned>(n);
    int *vi = dev<int>(n), *vo = dev<int>(n);
    cudaMemcpy(ki, keys.data(), n * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(vi, vals.data(), n * 4, cudaMemcpyHostToDevice);
    size_t bytes = 0;
    cub::DeviceRadixSort::SortPairs(nullptr, bytes, ki, ko, vi, vo, n, 0, 10);
    void *tmp = dev<char>(bytes);
    for (int end_bit : {10, 4}) {
        cub::DeviceRadixSort::SortPairs(tmp, bytes, ki, ko, vi, vo, n, 0, end_bit);
        std::vector<unsigned> gk(n);
        std::vector<int> gv(n);
        cudaMemcpy(gk.data(), ko, n * 4, cudaMemcpyDeviceToHost);
        cudaMemcpy(gv.data(), vo, n * 4, cudaMemcpyDeviceToHost);
        std::vector<int> idx(n);
        for (int i = 0; i < n; i++) idx[i] = i;
        const unsigned mask = (1u << end_bit) - 1;
        std::stable_sort(idx.begin(), idx.end(), [&](int x, int y) { return (keys[x] & mask) < (keys[y] & mask); });
        bool ok = true;
        for (int i = 0; i < n; i++) ok &= gk[i] == keys[idx[i]] && gv[i] == idx[i];
        report(ok, "CUB SortPairs with end_bit " + std::to_string(end_bit) +
                       (end_bit == 10 ? ": sorted, stable" : ": orders by the low 4 bits only, as on a GPU"));
    }
    static void *st;
    static unsigned *ski, *sko;
    static int *svi, *svo;
    st = tmp, ski = ki, sko = ko, svi = vi, svo = vo;
    expect_death("CUB SortPairs with less temporary storage than asked for stops the run", "temporary storage", [] {
        size_t small = 64;
        cub::DeviceRadixSort::SortPairs(st, small, ski, sko, svi, svo, 1000, 0, 10);
    });
    cudaFree(tmp), cudaFree(ki), cudaFree(ko), cudaFree(vi), cudaFree(vo);
}

// ---- schedules ----

// Thread i reads its neighbour's slot in the same barrier interval it is written: a race, whose
// result depends on the order the threads run in.
static __global__ void k_racy(int *out)
{
    __shared__ int sh[64];
    sh[threadIdx.x] = (int)threadIdx.x;
    out[threadIdx.x] = sh[(threadIdx.x + 1) % 64];
}

static std::string run_racy(const char *self, const char *sched)
{
    std::string cmd = std::string("MC_EMU_SCHED=") + sched + " " + self + " racy";
    FILE *p = popen(cmd.c_str(), "r");
    char buf[1024] = "";
    if (p) {
        if (!fgets(buf, sizeof(buf), p)) buf[0] = 0;
        pclose(p);
    }
    return buf;
}

// Events time the work between them on the emulated device's clock (a kernel's modelled time
// grows with its threads); CUDA's refusals: an event never recorded, or made without timing.
static __global__ void k_spin(float *out, int n)
{
    float v = 0.0f;
    for (int i = 0; i < n; i++) v = v * 0.5f + (float)i;
    out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

static void test_events()
{
    cudaEvent_t a, b, untimed, unused;
    cudaEventCreate(&a), cudaEventCreate(&b), cudaEventCreate(&unused);
    cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming);
    float *o = dev<float>(64 * 256);
    float short_ms = -1, long_ms = -1, x;
    cudaEventRecord(a, 0);
    MC_LAUNCH(4, 256, 0, 0, k_spin)(o, 10);
    cudaEventRecord(b, 0);
    cudaEventSynchronize(b);
    const cudaError_t e1 = cudaEventElapsedTime(&short_ms, a, b);
    cudaEventRecord(a, 0);
    MC_LAUNCH(64, 256, 0, 0, k_spin)(o, 10);
    cudaEventRecord(b, 0);
    const cudaError_t e2 = cudaEventElapsedTime(&long_ms, a, b);
    report(e1 == cudaSuccess && e2 == cudaSuccess && short_ms >= 0 && long_ms > short_ms,
           "cudaEventElapsedTime: " + std::to_string(short_ms) + " ms for a short kernel, " + std::to_string(long_ms) +
               " ms for a long one");
    cudaEventRecord(untimed, 0);
    const cudaError_t e3 = cudaEventElapsedTime(&x, a, untimed), e4 = cudaEventElapsedTime(&x, a, unused);
    report(e3 == cudaErrorInvalidResourceHandle && e4 == cudaErrorInvalidResourceHandle,
           "cudaEventElapsedTime refuses an event made with cudaEventDisableTiming and one never recorded");
    (void)cudaGetLastError();
    cudaEventDestroy(a), cudaEventDestroy(b), cudaEventDestroy(untimed), cudaEventDestroy(unused);
    cudaFree(o);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "racy")) { // the child of test_schedules: one line of results
        int *o = dev<int>(64), h[64];
        MC_LAUNCH(1, 64, 0, 0, k_racy)(o);
        cudaMemcpy(h, o, sizeof(h), cudaMemcpyDeviceToHost);
        unsigned long sum = 0;
        for (int i = 0; i < 64; i++) sum = sum * 3 + h[i];
        printf("%lu\n", sum);
        fflush(stdout); // LeakSanitizer's exit would not flush it
        cudaFree(o);
        return 0;
    }
    test_correct_kernels();
    test_limits();
    test_defects();
    test_wmma();
    test_cub();
    test_events();
    const std::string f = run_racy(argv[0], "forward"), r = run_racy(argv[0], "reverse");
    report(!f.empty() && !r.empty() && f != r, "a race inside a barrier interval gives different results under the "
                                               "forward and reverse schedules");
    printf("1..%d\n", g_n);
    return g_failed ? 1 : 0;
}
