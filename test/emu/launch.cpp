// Kernel launches on the emulated device: the launch limits of an H100, blocks spread over
// worker threads, and inside a block one fiber per CUDA thread under a chosen schedule, with
// block barriers and warp operations as the only points where a thread waits for others.
//
// A block's threads run until each waits or ends. A warp operation completes when the 32nd
// lane of the warp arrives at it; a block barrier when every thread of the block waits at it.
// Anything else is a defect and stops the run naming the call sites: lanes of a warp at
// different operations, a barrier that threads reach at different call sites or after others
// returned, a warp operation some lanes never reach (deadlock).
//
// Schedules (MC_EMU_SCHED): which ready thread runs next. Between two synchronisation points
// the result of a correct kernel cannot depend on it; a race shows as device memory that
// differs between schedules (MC_EMU_HASH, runtime.cpp).
//   forward   sweeps thread 0, 1, ..., n-1, each to its next wait (the default)
//   reverse   the same sweeps from n-1 down
//   warps     always the lowest ready thread: one warp runs through its warp operations to the
//             next block barrier before the next warp starts
//   rwarps    warp-major from the last warp down
//   random:S  a random ready thread, seeded by S, the launch and the block
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <string>
#include <mutex>
#include <thread>
#include <vector>

#include "test/emu/emu.h"
#include "test/emu/fiber.h"

namespace mc_emu {

__thread const ThreadRegs *regs;

namespace {

enum Policy { FORWARD, REVERSE, WARPS, RWARPS, RANDOM };
enum State : unsigned char { READY, RUNNING, WAIT_BAR, WAIT_WARP, EXITED };

struct Thread {
    ThreadRegs regs;
    int index;
    State state;
    FiberCtx ctx;
    const char *what, *file; // where it waits
    int line;
    int pred; // __syncthreads_or: its predicate, then the block's OR
    void *warp_arg;
    warp_op_fn warp_op;
    void *warp_ctx;
};

// Which threads may run: a bitset over the block's (at most 1024) threads.
struct ReadySet {
    uint64_t w[16];
    int count;
    void clear() { memset(this, 0, sizeof(*this)); }
    void set(int i)
    {
        if (!(w[i >> 6] >> (i & 63) & 1)) w[i >> 6] |= 1ull << (i & 63), count++;
    }
    void reset(int i)
    {
        if (w[i >> 6] >> (i & 63) & 1) w[i >> 6] &= ~(1ull << (i & 63)), count--;
    }
    int next_from(int i, int n) const; // the first ready at or after i (wrapping), -1 if none
    int prev_from(int i, int n) const; // the last ready at or before i (wrapping)
    int nth(int k) const;              // the k-th ready thread
};

int ReadySet::next_from(int i, int n) const
{
    for (int pass = 0; pass < 2; pass++) {
        for (int k = i; k < n;) {
            uint64_t m = w[k >> 6] >> (k & 63);
            if (m) return k + __builtin_ctzll(m);
            k = (k | 63) + 1;
        }
        i = 0;
    }
    return -1;
}

int ReadySet::prev_from(int i, int n) const
{
    for (int pass = 0; pass < 2; pass++) {
        for (int k = i; k >= 0;) {
            uint64_t m = w[k >> 6] << (63 - (k & 63));
            if (m) return k - __builtin_clzll(m);
            k = (k & ~63) - 1;
        }
        i = n - 1;
    }
    return -1;
}

int ReadySet::nth(int k) const
{
    for (int j = 0; j < 16; j++) {
        const int c = __builtin_popcountll(w[j]);
        if (k >= c) {
            k -= c;
            continue;
        }
        uint64_t m = w[j];
        while (k--) m &= m - 1;
        return j * 64 + __builtin_ctzll(m);
    }
    return -1;
}

struct Block {
    const LaunchConfig *cfg;
    void (*body)(void *);
    void *ctx;
    int n, exited;
    Thread *t;
    FiberCtx sched;
    ReadySet ready;
    int cursor;
    uint64_t rng;
    int warp_arrived[32];
    unsigned char *smem;
};

// What each worker thread keeps: fiber stacks and thread records for up to 1024 threads.
struct Worker {
    unsigned char *stacks = nullptr;
    Thread *threads = nullptr;
};

#if defined(__SANITIZE_ADDRESS__)
constexpr size_t STACK = 256 << 10; // AddressSanitizer's red zones make frames larger
#else
constexpr size_t STACK = 64 << 10;
#endif
constexpr size_t GUARD = 4096;

thread_local Worker tl_worker;
thread_local Block *tl_block;
thread_local Thread *tl_thread;

struct Config {
    Policy policy = FORWARD;
    uint64_t seed = 0;
    int workers = 1;
};

Config read_config()
{
    Config c;
    const char *s = getenv("MC_EMU_SCHED");
    if (!s || !*s || !strcmp(s, "forward")) c.policy = FORWARD;
    else if (!strcmp(s, "reverse")) c.policy = REVERSE;
    else if (!strcmp(s, "warps")) c.policy = WARPS;
    else if (!strcmp(s, "rwarps")) c.policy = RWARPS;
    else if (!strncmp(s, "random:", 7)) c.policy = RANDOM, c.seed = strtoull(s + 7, nullptr, 10);
    else fail("MC_EMU_SCHED=%s: expected forward, reverse, warps, rwarps or random:SEED", s);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    c.workers = cores > 8 ? 8 : cores < 1 ? 1 : (int)cores;
    if ((s = getenv("MC_EMU_WORKERS")) && *s) {
        c.workers = atoi(s);
        if (c.workers < 1 || c.workers > 64) fail("MC_EMU_WORKERS=%s: expected 1 to 64", s);
    }
    return c;
}

const Config &config()
{
    static const Config c = read_config();
    return c;
}

uint64_t splitmix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// ---- describing where threads are, for the failure messages ----

const char *base(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

// "threads 0-31 at __shfl_xor_sync (common.cuh:118); threads 32-127 at __syncthreads (...)"
void describe(const Block &b, char *out, size_t n)
{
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < b.n && len + 1 < n;) {
        const Thread &t = b.t[i];
        int j = i + 1;
        auto same = [&](const Thread &u) {
            const bool waits = t.state == WAIT_BAR || t.state == WAIT_WARP;
            return u.state == t.state && (!waits || (u.what == t.what && u.file == t.file && u.line == t.line));
        };
        while (j < b.n && same(b.t[j])) j++;
        char where[256];
        if (t.state == WAIT_BAR || t.state == WAIT_WARP)
            snprintf(where, sizeof(where), "at %s (%s:%d)", t.what, base(t.file), t.line);
        else
            snprintf(where, sizeof(where), "%s", t.state == EXITED ? "returned" : t.state == READY ? "ready" : "running");
        len += snprintf(out + len, n - len, "%sthread%s %d%s%.0d %s", i ? "; " : "", j - i > 1 ? "s" : "", i,
                        j - i > 1 ? "-" : "", j - i > 1 ? j - 1 : 0, where);
        i = j;
    }
}

[[noreturn]] void block_fail(const Block &b, const char *why)
{
    static char where[4096];
    describe(b, where, sizeof(where));
    tl_thread = nullptr; // the message names the block, not one thread
    fail("%s: %s", why, where);
}

// ---- the fibers of a block ----

Worker &worker()
{
    Worker &w = tl_worker;
    if (!w.stacks) {
        const size_t each = STACK + GUARD, bytes = 1024 * each;
        void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) fail("cannot map the fiber stacks (%zu bytes)", bytes);
        w.stacks = (unsigned char *)p;
        for (int i = 0; i < 1024; i++) mprotect(w.stacks + i * each, GUARD, PROT_NONE); // overflow guard
        w.threads = new Thread[1024];
    }
    return w;
}

int pick(Block &b);
void yield_to_scheduler(bool dying = false);

void fiber_main()
{
    Block *b = tl_block;
    fiber_started(&tl_thread->ctx, &b->sched);
    b->body(b->ctx);
    Thread *t = tl_thread;
    t->state = EXITED;
    b->exited++;
    yield_to_scheduler(true);
    fail("internal error: a returned thread was resumed");
}

int pick(Block &b)
{
    if (!b.ready.count) return -1;
    switch (config().policy) {
    case FORWARD: return b.ready.next_from(b.cursor, b.n);
    case REVERSE: return b.ready.prev_from(b.cursor, b.n);
    case WARPS: return b.ready.next_from(0, b.n);
    case RWARPS: {
        const int hi = b.ready.prev_from(b.n - 1, b.n);
        return b.ready.next_from(hi & ~31, b.n); // the lowest ready lane of the last ready warp
    }
    case RANDOM:
        b.rng = splitmix(b.rng);
        return b.ready.nth((int)(b.rng % (uint64_t)b.ready.count));
    }
    return -1;
}

// Thread i becomes the running one (the switch to it follows).
Thread *make_current(Block &b, int i)
{
    Thread &t = b.t[i];
    b.ready.reset(i);
    t.state = RUNNING;
    tl_thread = &t;
    regs = &t.regs;
    b.cursor = config().policy == REVERSE ? (i == 0 ? b.n - 1 : i - 1) : (i + 1 == b.n ? 0 : i + 1);
    return &t;
}

void run_thread(Block &b, int i)
{
    fiber_switch(&b.sched, &make_current(b, i)->ctx);
    tl_thread = nullptr;
    regs = nullptr;
}

// The running thread waits (or ended: dying): the next ready thread runs, switched to directly
// (half the switches of going through the scheduler); with none, the scheduler decides.
// Returns when this thread runs again.
void yield_to_scheduler(bool dying)
{
    Thread *t = tl_thread;
    Block &b = *tl_block;
    const int i = pick(b);
    fiber_switch(&t->ctx, i >= 0 ? &make_current(b, i)->ctx : &b.sched, dying);
}

// Nothing can run: every thread that has not returned must wait at one block barrier.
void release_barrier(Block &b)
{
    const Thread *first = nullptr;
    int any = 0;
    for (int i = 0; i < b.n; i++) {
        const Thread &t = b.t[i];
        if (t.state == EXITED) continue;
        if (t.state != WAIT_BAR) block_fail(b, "deadlock: a warp operation that some lanes never reach");
        if (!first) first = &t;
        if (t.what != first->what || t.file != first->file || t.line != first->line)
            block_fail(b, "divergent barrier: threads wait at different call sites");
        any |= t.pred != 0;
    }
    if (b.exited) block_fail(b, "a block barrier reached after some threads of the block returned");
    for (int i = 0; i < b.n; i++) {
        b.t[i].state = READY;
        b.t[i].pred = any;
        b.ready.set(i);
    }
}

void run_block(Block &b, uint3 bid)
{
    const LaunchConfig &c = *b.cfg;
    Worker &w = worker();
    b.n = (int)(c.block.x * c.block.y * c.block.z);
    b.exited = 0;
    b.t = w.threads;
    b.ready.clear();
    b.cursor = config().policy == REVERSE ? b.n - 1 : 0;
    memset(b.warp_arrived, 0, sizeof(b.warp_arrived));
    b.sched.stack = nullptr; // learnt by the fibers (AddressSanitizer)
    b.smem = nullptr;
    if (c.smem && posix_memalign((void **)&b.smem, 128, c.smem)) fail("out of memory for %zu bytes of shared memory", c.smem);
    if (b.smem) memset(b.smem, 0xff, c.smem); // NaN in every float type: uninitialised reads show
    for (int i = 0; i < b.n; i++) {
        Thread &t = b.t[i];
        t.index = i;
        t.state = READY;
        t.regs.tid = make_uint3(i % c.block.x, i / c.block.x % c.block.y, i / (c.block.x * c.block.y));
        t.regs.bid = bid;
        t.regs.bdim = c.block;
        t.regs.gdim = c.grid;
        // stack tops staggered by cache lines: equal offsets in every page would make all the
        // fibers' hot frames compete for the same few sets of the L1 cache
        fiber_init(&t.ctx, w.stacks + i * (STACK + GUARD) + GUARD, STACK - (size_t)(i * 320 % 4096), fiber_main);
        b.ready.set(i);
    }
    tl_block = &b;
    for (;;) {
        const int i = pick(b);
        if (i >= 0) {
            run_thread(b, i);
            continue;
        }
        if (b.exited == b.n) break;
        release_barrier(b);
    }
    tl_block = nullptr;
    free(b.smem);
}

// ---- the launch ----

// The launch limits of an H100 (compute capability 9.0): "" when c is valid.
const char *invalid_config(const LaunchConfig &c, cudaError_t *e)
{
    static thread_local char why[256];
    const dim3 g = c.grid, k = c.block;
    *e = cudaErrorInvalidConfiguration;
    if (!k.x || !k.y || !k.z || k.x > 1024 || k.y > 1024 || k.z > 64 || (uint64_t)k.x * k.y * k.z > 1024)
        snprintf(why, sizeof(why), "block (%u,%u,%u): at most 1024 threads, (1024,1024,64)", k.x, k.y, k.z);
    else if (!g.x || !g.y || !g.z || g.x > 2147483647u || g.y > 65535 || g.z > 65535)
        snprintf(why, sizeof(why), "grid (%u,%u,%u): at most (2^31-1, 65535, 65535)", g.x, g.y, g.z);
    else if (c.smem > granted_smem(c.kernel)) {
        *e = cudaErrorInvalidValue;
        snprintf(why, sizeof(why), "%zu bytes of dynamic shared memory, %zu granted (cudaFuncSetAttribute)", c.smem,
                 granted_smem(c.kernel));
    } else
        return nullptr;
    return why;
}

void run_blocks(const LaunchConfig &c, void (*body)(void *), void *ctx, std::atomic<uint64_t> *next, uint64_t total,
                uint64_t launch_no)
{
    Block b;
    b.cfg = &c;
    b.body = body;
    b.ctx = ctx;
    for (uint64_t i; (i = next->fetch_add(1)) < total;) {
        const uint3 bid = make_uint3((unsigned)(i % c.grid.x), (unsigned)(i / c.grid.x % c.grid.y),
                                     (unsigned)(i / ((uint64_t)c.grid.x * c.grid.y)));
        b.rng = splitmix(config().seed ^ splitmix(launch_no * 0x100000001ull + i));
        run_block(b, bid);
    }
}

// Worker threads that take blocks with the launching thread (blocks are independent: a kernel
// whose result depends on how they interleave is wrong on a GPU too).
struct Pool {
    std::mutex m;
    std::condition_variable cv, done_cv;
    uint64_t generation = 0;
    int busy = 0;
    const LaunchConfig *c;
    void (*body)(void *);
    void *ctx;
    std::atomic<uint64_t> next;
    uint64_t total, launch_no;

    void serve()
    {
        uint64_t seen = 0;
        std::unique_lock<std::mutex> lk(m);
        for (;;) {
            cv.wait(lk, [&] { return generation != seen; });
            seen = generation;
            lk.unlock();
            run_blocks(*c, body, ctx, &next, total, launch_no);
            lk.lock();
            if (--busy == 0) done_cv.notify_all();
        }
    }
};

Pool *pool()
{
    static Pool *p = [] {
        Pool *q = new Pool;
        for (int i = 1; i < config().workers; i++) std::thread([q] { q->serve(); }).detach();
        return q;
    }();
    return p;
}

// MC_EMU_PROFILE=1: at exit, the kernels that took the most time (where an emulated run's time
// goes; a GPU's would be elsewhere). MC_EMU_PROFILE=PATH (any other value): the same, and every
// piece of device work as it is issued, one line each, written to PATH (profile_record).
struct ProfileEntry {
    double seconds;
    uint64_t launches, threads;
};
std::mutex g_prof_mu;
std::map<std::string, ProfileEntry> *g_prof;

FILE *profile_list()
{
    static FILE *f = [] {
        const char *s = getenv("MC_EMU_PROFILE");
        if (!s || !*s || !strcmp(s, "1") || !strcmp(s, "0")) return (FILE *)nullptr;
        FILE *o = fopen(s, "w");
        if (!o) fail("MC_EMU_PROFILE=%s: cannot write it", s);
        return o;
    }();
    return f;
}

void print_profile()
{
    std::vector<std::pair<std::string, ProfileEntry>> v(g_prof->begin(), g_prof->end());
    std::sort(v.begin(), v.end(), [](const auto &a, const auto &b) { return a.second.seconds > b.second.seconds; });
    fprintf(stderr, "cuda-emu: profile (seconds, launches, threads, kernel):\n");
    for (size_t i = 0; i < v.size() && i < 20; i++)
        fprintf(stderr, "cuda-emu: %9.3f %8llu %12llu %s\n", v[i].second.seconds,
                (unsigned long long)v[i].second.launches, (unsigned long long)v[i].second.threads, v[i].first.c_str());
}

bool profiling()
{
    static const bool on = [] {
        const char *s = getenv("MC_EMU_PROFILE");
        return s && *s && strcmp(s, "0") != 0;
    }();
    return on;
}

void profile(const LaunchConfig &c, double seconds)
{
    std::lock_guard<std::mutex> lk(g_prof_mu);
    if (!g_prof) {
        g_prof = new std::map<std::string, ProfileEntry>;
        atexit(print_profile);
    }
    ProfileEntry &e = (*g_prof)[c.name];
    e.seconds += seconds;
    e.launches++;
    e.threads += (uint64_t)c.grid.x * c.grid.y * c.grid.z * c.block.x * c.block.y * c.block.z;
}

double now_s()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

} // namespace

const char *current_location()
{
    static thread_local char buf[512];
    const Block *b = tl_block;
    if (!b) return "";
    const Thread *t = tl_thread;
    int n = snprintf(buf, sizeof(buf), "kernel %s (launched at %s:%d), block (%u,%u,%u)", b->cfg->name,
                     base(b->cfg->file), b->cfg->line, b->t[0].regs.bid.x, b->t[0].regs.bid.y, b->t[0].regs.bid.z);
    if (t) snprintf(buf + n, sizeof(buf) - n, ", thread (%u,%u,%u)", t->regs.tid.x, t->regs.tid.y, t->regs.tid.z);
    return buf;
}

void *dynamic_smem()
{
    if (!tl_block) fail("dynamic shared memory used outside a kernel");
    return tl_block->smem;
}

int lane_id()
{
    if (!tl_thread) fail("a warp operation outside a kernel");
    return tl_thread->index & 31;
}

int block_barrier(const char *what, int pred, const char *file, int line)
{
    Thread *t = tl_thread;
    if (!t) fail("%s outside a kernel (%s:%d)", what, file, line);
    t->state = WAIT_BAR;
    t->what = what, t->file = file, t->line = line;
    t->pred = pred;
    yield_to_scheduler();
    return t->pred;
}

void warp_collective(const char *what, const char *file, int line, unsigned mask, void *arg, warp_op_fn op, void *ctx)
{
    Thread *t = tl_thread;
    Block &b = *tl_block;
    if (!t) fail("%s outside a kernel (%s:%d)", what, file, line);
    if (mask != 0xffffffffu) fail("%s with mask %#x at %s:%d: the emulation supports full warps only", what, mask, file, line);
    const int w = t->index >> 5;
    if ((w + 1) * 32 > b.n)
        block_fail(b, "a full-mask warp operation in a warp of fewer than 32 threads");
    t->state = WAIT_WARP;
    t->what = what, t->file = file, t->line = line;
    t->warp_arg = arg, t->warp_op = op, t->warp_ctx = ctx;
    if (++b.warp_arrived[w] < 32) {
        yield_to_scheduler();
        return;
    }
    // the 32nd lane: every lane must be at this very operation
    Thread *lanes = b.t + w * 32;
    void *args[32];
    for (int l = 0; l < 32; l++) {
        if (lanes[l].state != WAIT_WARP || lanes[l].what != what || lanes[l].file != file || lanes[l].line != line)
            block_fail(b, "divergent warp: lanes at different warp operations");
        args[l] = lanes[l].warp_arg;
    }
    op(args, ctx);
    b.warp_arrived[w] = 0;
    for (int l = 0; l < 32; l++)
        if (&lanes[l] != t) {
            lanes[l].state = READY;
            b.ready.set(w * 32 + l);
        }
    t->state = RUNNING;
}

void launch(const LaunchConfig &c, void (*body)(void *), void *ctx)
{
    static std::atomic<uint64_t> launches{0};
    if (tl_block) fail("kernel %s launched from device code (%s:%d): not emulated", c.name, base(c.file), c.line);
    cudaError_t e;
    if (const char *why = invalid_config(c, &e)) {
        note("launch of %s at %s:%d refused: %s", c.name, base(c.file), c.line, why);
        set_last_error(e);
        return;
    }
    const uint64_t total = (uint64_t)c.grid.x * c.grid.y * c.grid.z, no = launches++;
    clock_advance_ns(2000 + total * c.block.x * c.block.y * c.block.z);
    const double t0 = profiling() ? now_s() : 0.0; // no clock reads on every launch otherwise
    Pool *p = total > 1 && config().workers > 1 ? pool() : nullptr;
    if (!p) {
        std::atomic<uint64_t> next{0};
        run_blocks(c, body, ctx, &next, total, no);
    } else {
        {
            std::lock_guard<std::mutex> lk(p->m);
            p->c = &c, p->body = body, p->ctx = ctx, p->total = total, p->launch_no = no;
            p->next = 0;
            p->busy = config().workers - 1;
            p->generation++;
        }
        p->cv.notify_all();
        run_blocks(c, body, ctx, &p->next, total, no);
        std::unique_lock<std::mutex> lk(p->m);
        p->done_cv.wait(lk, [&] { return p->busy == 0; });
    }
    if (profiling()) {
        profile(c, now_s() - t0);
        profile_record(c.name);
    }
    after_launch(c.name);
}

void profile_record(const char *what)
{
    if (!profiling()) return;
    FILE *f = profile_list();
    if (!f) return;
    std::lock_guard<std::mutex> lk(g_prof_mu);
    fprintf(f, "%s\n", what);
    fflush(f); // a run that dies keeps what it issued
}

} // namespace mc_emu
