// The CUDA runtime of the emulated device: one H100 (device 0) whose memory is host memory,
// allocated at exactly the requested size (so AddressSanitizer sees one byte past a buffer) and
// poisoned with 0xff (NaN in fp32, bf16 and fp16; -1 in integers) so reads of what was never
// written show. Streams run their work at once, in order (events are complete when recorded).
// Copies check that each side is the memory their kind says. Failures and the launch log
// (MC_EMU_HASH) live here too.
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>

#include "test/emu/emu.h"

namespace mc_emu {

// ---- failures ----

static void vline(const char *kind, const char *fmt, va_list ap)
{
    char msg[4096];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    const char *loc = current_location();
    fprintf(stderr, "cuda-emu: %s%s%s%s\n", kind, loc, *loc ? ": " : "", msg);
    fflush(stderr);
}

void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline("error: ", fmt, ap);
    va_end(ap);
    const char *a = getenv("MC_EMU_ABORT");
    if (a && *a == '1') abort();
    _exit(86);
}

void note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline("", fmt, ap);
    va_end(ap);
}

// ---- handles ----

static std::mutex g_handles_mu;
static std::map<const void *, HandleKind> g_handles;

void handle_add(const void *h, HandleKind kind)
{
    std::lock_guard<std::mutex> lk(g_handles_mu);
    g_handles[h] = kind;
}

bool handle_live(const void *h, HandleKind kind)
{
    std::lock_guard<std::mutex> lk(g_handles_mu);
    const auto it = g_handles.find(h);
    return it != g_handles.end() && it->second == kind;
}

bool handle_remove(const void *h, HandleKind kind)
{
    std::lock_guard<std::mutex> lk(g_handles_mu);
    const auto it = g_handles.find(h);
    if (it == g_handles.end() || it->second != kind) return false;
    g_handles.erase(it);
    return true;
}

// ---- memory ----

namespace {
struct Alloc {
    uintptr_t base;
    size_t size;
    uint64_t seq; // allocation order: the hash's order (addresses differ between runs)
    MemKind kind;
};
std::mutex g_mem_mu;
std::map<uintptr_t, Alloc> g_by_addr;
std::map<uint64_t, uintptr_t> g_by_seq;
uint64_t g_seq;
size_t g_device_bytes;

const Alloc *find(const void *p) // callers hold g_mem_mu
{
    const uintptr_t a = (uintptr_t)p;
    auto it = g_by_addr.upper_bound(a);
    if (it == g_by_addr.begin()) return nullptr;
    --it;
    const Alloc &al = it->second;
    return a < al.base + (al.size ? al.size : 1) ? &al : nullptr;
}

} // namespace

cudaError_t mem_alloc(void **out, size_t bytes, MemKind kind)
{
    if (!out) return cudaErrorInvalidValue;
    *out = nullptr;
    std::lock_guard<std::mutex> lk(g_mem_mu);
    if (kind != MEM_HOST_PINNED && g_device_bytes + bytes > H100_MEMORY) return cudaErrorMemoryAllocation;
    void *p = nullptr;
    if (posix_memalign(&p, 256, bytes ? bytes : 1)) return cudaErrorMemoryAllocation; // cudaMalloc's alignment
    memset(p, 0xff, bytes);
    const Alloc al = {(uintptr_t)p, bytes, g_seq++, kind};
    g_by_addr[al.base] = al;
    g_by_seq[al.seq] = al.base;
    if (kind != MEM_HOST_PINNED) g_device_bytes += bytes;
    *out = p;
    return cudaSuccess;
}

cudaError_t mem_free(void *p, bool pinned)
{
    if (!p) return cudaSuccess;
    std::lock_guard<std::mutex> lk(g_mem_mu);
    auto it = g_by_addr.find((uintptr_t)p);
    if (it == g_by_addr.end() || (it->second.kind == MEM_HOST_PINNED) != pinned) {
        note("%s(%p): not the start of a live %s allocation", pinned ? "cudaFreeHost" : "cudaFree", p,
             pinned ? "pinned host" : "device");
        return cudaErrorInvalidValue;
    }
    const Alloc al = it->second;
    memset(p, 0xff, al.size); // a use after free reads poison even where the allocator reuses it
    if (al.kind != MEM_HOST_PINNED) g_device_bytes -= al.size;
    g_by_seq.erase(al.seq);
    g_by_addr.erase(it);
    free(p);
    return cudaSuccess;
}

size_t device_bytes()
{
    std::lock_guard<std::mutex> lk(g_mem_mu);
    return g_device_bytes;
}

MemKind mem_kind(const void *p, size_t bytes, bool *overrun)
{
    std::lock_guard<std::mutex> lk(g_mem_mu);
    const Alloc *al = find(p);
    if (overrun) *overrun = al && (uintptr_t)p + bytes > al->base + al->size;
    return al ? al->kind : MEM_NONE;
}

void require_device(const void *p, size_t bytes, const char *what)
{
    bool over = false;
    const MemKind k = mem_kind(p, bytes, &over);
    if (k != MEM_DEVICE && k != MEM_MANAGED)
        fail("%s: %p is not device memory (%s)", what, p, k == MEM_HOST_PINNED ? "pinned host memory" : "host memory");
    if (over) fail("%s: %zu bytes at %p run past the end of their device allocation", what, bytes, p);
}

// ---- the launch log ----

namespace {
// A word holding an address inside device memory (cuBLAS's grouped GEMM reads its operands'
// addresses from device arrays) hashes as its allocation's number and offset: addresses differ
// between runs (the host's address randomisation), the allocation order does not. [lo, hi)
// bounds every device allocation (a quick test for the words that are no address).
uint64_t canonical_word(uint64_t w, uintptr_t lo, uintptr_t hi)
{
    if (w < lo || w >= hi) return w;
    auto it = g_by_addr.upper_bound((uintptr_t)w);
    if (it == g_by_addr.begin()) return w;
    --it;
    const Alloc &al = it->second;
    if (al.kind == MEM_HOST_PINNED || w > al.base + al.size) return w;
    return 0xA11C0000000000ull ^ (al.seq << 32) ^ (w - al.base);
}

uint64_t hash_bytes(uint64_t h, const unsigned char *p, size_t n, uintptr_t lo, uintptr_t hi)
{
    uint64_t lane[4] = {h, h ^ 0x9E3779B97F4A7C15ull, h ^ 0xC2B2AE3D27D4EB4Full, h ^ 0x165667B19E3779F9ull};
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            uint64_t w;
            memcpy(&w, p + i + 8 * k, 8);
            w = canonical_word(w, lo, hi);
            lane[k] = ((lane[k] ^ w) * 0x100000001B3ull);
            lane[k] ^= lane[k] >> 29;
        }
    for (; i < n; i++) lane[0] = (lane[0] ^ p[i]) * 0x100000001B3ull;
    return lane[0] ^ (lane[1] * 3) ^ (lane[2] * 5) ^ (lane[3] * 7) ^ n;
}
} // namespace

static std::atomic<uint64_t> g_clock_ns{0};

double clock_ms() { return (double)g_clock_ns.load() * 1e-6; }
void clock_advance_ns(uint64_t ns) { g_clock_ns += ns; }

void after_launch(const char *name)
{
    static uint64_t n;
    static FILE *log = [] {
        const char *path = getenv("MC_EMU_HASH");
        if (!path || !*path) return (FILE *)nullptr;
        FILE *f = fopen(path, "w");
        if (!f) fail("MC_EMU_HASH=%s: cannot write it", path);
        return f;
    }();
    n++;
    if (!log) return;
    uint64_t h = 0xcbf29ce484222325ull;
    {
        std::lock_guard<std::mutex> lk(g_mem_mu);
        uintptr_t lo = UINTPTR_MAX, hi = 0;
        for (const auto &a : g_by_addr)
            if (a.second.kind != MEM_HOST_PINNED) {
                lo = a.first < lo ? a.first : lo;
                hi = a.first + a.second.size + 1 > hi ? a.first + a.second.size + 1 : hi;
            }
        for (const auto &s : g_by_seq) {
            const Alloc &al = g_by_addr[s.second];
            if (al.kind == MEM_HOST_PINNED) continue;
            h = hash_bytes(h ^ al.seq, (const unsigned char *)al.base, al.size, lo, hi);
        }
    }
    fprintf(log, "%" PRIu64 " %s %016" PRIx64 "\n", n, name, h);
    fflush(log);
}

// ---- errors and attributes ----

static thread_local cudaError_t g_last = cudaSuccess;
void set_last_error(cudaError_t e) { g_last = e; }
cudaError_t last_error() { return g_last; }

static std::mutex g_attr_mu;
static std::map<const void *, size_t> g_granted;

cudaError_t grant_smem(const void *kernel, int bytes)
{
    if (bytes < 0 || (size_t)bytes > H100_SMEM_OPTIN) {
        note("cudaFuncSetAttribute: %d bytes of dynamic shared memory asked, an H100 grants at most %zu", bytes,
             H100_SMEM_OPTIN);
        return cudaErrorInvalidValue;
    }
    std::lock_guard<std::mutex> lk(g_attr_mu);
    g_granted[kernel] = (size_t)bytes;
    return cudaSuccess;
}

size_t granted_smem(const void *kernel)
{
    std::lock_guard<std::mutex> lk(g_attr_mu);
    auto it = g_granted.find(kernel);
    return it == g_granted.end() ? H100_SMEM_DEFAULT : it->second;
}

} // namespace mc_emu
