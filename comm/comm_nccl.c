/* The NCCL communicator (DESIGN decision 3) for the cuda backend.
 *
 * Groups: one ncclComm per group (world, tp, dp, pp, embedding, ...), made collectively over the
 * world like comm_mpi's: the group's first member makes the unique id, which travels through the
 * runtime's key-value store (PMIx put/commit/fence/get, comm/exchange.h), then every member
 * calls ncclCommInitRank with its position in the member list (its group rank).
 *
 * Streams: collectives run on a communication stream of their own, so they overlap the
 * backend's compute stream. start() records an event on the compute stream and makes the
 * communication stream wait for it (a bucket's gradients are final when its all-reduce starts),
 * enqueues the NCCL call and records a completion event; wait() makes the compute stream wait
 * for that event and returns at once. Every collective runs on the one communication stream, so
 * they complete in the order they were started, as comm.h promises. A p2p batch is one
 * ncclGroupStart/ncclGroupEnd.
 *
 * Host buffers (the loop's losses, norms and flags; checkpoint data) are staged: copied to pinned
 * memory, then to a device stage, reduced there and copied back, in pieces of the stage's size;
 * start() returns when the result is in the caller's memory. Barriers block the host as well.
 *
 * Timeouts and dead peers: the host does not wait for device collectives, so a watchdog thread
 * polls the oldest unfinished collective's completion event. It ends the job, with one line
 * naming this rank, the collective and its group, when that collective takes longer than
 * timeout_s (counted from when it became the oldest: the ones before it have their own bound),
 * when NCCL reports an asynchronous error (a network peer gone), or when a peer on this node died
 * or has been stopped (SIGSTOP) for heartbeat_s (their pids, as comm_mpi checks them: comm/comm_watch.h). Ending the
 * job: every communicator is aborted (kernels stuck on a peer return), then PMIx_Abort. Communicator set-up, which blocks the host inside
 * PMIx and NCCL, is guarded the same way. */
#ifdef MC_WITH_CUDA

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/error.h"
#include "config/env.h"
#include "kernels/device.h"
#include "comm/comm.h"
#include "comm/comm_watch.h"
#include "comm/exchange.h"
#include "comm/heartbeat.h"
#include "comm/nccl_calls.h"
#include "comm/runtime.h"
#include "comm/staging.h"

enum { RING = 1024, MAX_PEERS = 8 };
#define STAGE_BYTES ((size_t)16 << 20) /* device stage (and its pinned mirror) for host buffers */
#define NAP_MIN_NS 20000L /* the watchdog's polling interval, doubling up to NAP_MAX_NS */
#define NAP_MAX_NS 1000000L

typedef struct {
    ncclComm_t nccl;
} group_impl_t;

/* One collective in flight on the communication stream. */
typedef struct {
    cudaEvent_t done;
    mc_group_t *group;
    double t_start, timeout_s, heartbeat_s;
    bool ring_only;       /* c->heartbeat_ring_only: no /proc checks */
    char what[96];        /* "all-reduce", "p2p with rank 3" */
    int peers[MAX_PEERS]; /* p2p: the distinct peers (world ranks), for the liveness check */
    int n_peers;          /* 0: the whole group */
} flight_t;

typedef struct {
    mc_comm_t pub; /* first: an mc_comm_t * is an nccl_comm_t * */
    mc_runtime_t *rt;
    int device;
    cudaStream_t compute; /* the backend's */
    cudaStream_t stream;  /* collectives */
    cudaEvent_t ready;    /* the compute stream's work up to a start() */

    /* The collectives in flight: ticket t lives in ring[(t - 1) % RING]. The caller issues and
     * posts, the watchdog completes. */
    pthread_mutex_t mu;
    pthread_cond_t work, space;
    flight_t ring[RING];
    int64_t issued;            /* caller only */
    int64_t posted, completed; /* under mu */
    /* A blocking set-up step the watchdog bounds (under mu). */
    bool guard_on;
    char guard_what[160];
    double guard_t0, guard_timeout_s, guard_heartbeat_s;
    bool guard_ring_only;
    bool stop;
    pthread_t watchdog;
    bool watchdog_on;

    /* Staging of host buffers (caller only). */
    void *stage, *host_stage;
    size_t stage_cap,
        stage_min;         /* stage_min: STAGE_BYTES, or MC_NCCL_STAGE_BYTES (tests: pieces) */
    int32_t *barrier_word; /* device: a barrier is an all-reduce of it (it stays 0) */

    mc_watch_t w;           /* the peers (dead, stopped, silent), checked by the watchdog */
    mc_group_list_t groups; /* live groups, world included (under mu: the watchdog aborts them) */
    int seq;                /* groups made so far: the key of the next unique id */
} nccl_comm_t;

static atomic_int g_dying;
static nccl_comm_t *g_nccl; /* for mc_fatal's abort hook */

static ncclComm_t group_nccl(const mc_group_t *g) { return ((const group_impl_t *)g->impl)->nccl; }

/* ---- dying ---- */

/* Once the job is ending, a thread that would go on (aborted collectives complete) waits to be
 * ended with the process instead. */
static void stop_if_dying(void)
{
    if (atomic_load(&g_dying))
        for (;;) pause();
}

/* Aborts every communicator, then the job, from either thread; a second thread that gets here
 * waits for the first to end the job. */
__attribute__((noreturn)) static void end_job(nccl_comm_t *nc, int code, const char *line)
{
    if (atomic_exchange(&g_dying, 1))
        for (;;) pause();
    fflush(stdout);
    if (line) {
        fprintf(stderr, "%s\n", line);
        fflush(stderr);
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2; /* the other thread may hold the lock inside a blocking call: go on anyway */
    bool locked = pthread_mutex_timedlock(&nc->mu, &until) == 0;
    for (int i = 0; i < nc->groups.n; i++) ncclCommAbort(group_nccl(nc->groups.g[i]));
    if (locked) pthread_mutex_unlock(&nc->mu);
    mc_runtime_abort(nc->rt, code, line);
}

/* "megatron-c: rank R: error: ...", then the job ends. Safe on the watchdog thread. */
__attribute__((noreturn, format(printf, 2, 3))) static void die(nccl_comm_t *nc, const char *fmt,
                                                                ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    mc_watch_error_line(line, sizeof(line), nc->pub.rank, fmt, ap);
    va_end(ap);
    end_job(nc, 1, line);
}

#define CK(nc, call)                                                                               \
    do {                                                                                           \
        cudaError_t ck_e_ = (call);                                                                \
        if (ck_e_ != cudaSuccess)                                                                  \
            die(nc, "CUDA error in %s (%s:%d): %s", #call, __FILE__, __LINE__,                     \
                cudaGetErrorString(ck_e_));                                                        \
    } while (0)

static const char *nccl_detail(ncclComm_t comm)
{
    const char *s = ncclGetLastError(comm);
    return s && *s ? s : "no detail from NCCL";
}

static void check_nccl(nccl_comm_t *nc, ncclResult_t r, const char *call, const mc_coll_t *o)
{
    if (r == ncclSuccess) return;
    char what[96];
    die(nc, "%s failed in %s on the %s group of %d ranks: %s (%s)", call,
        mc_coll_what(o, what, sizeof(what)), o->group->name, o->group->size, ncclGetErrorString(r),
        nccl_detail(group_nccl(o->group)));
}

static void nccl_abort(mc_comm_t *c, int code) { end_job((nccl_comm_t *)c, code, NULL); }

/* ---- the watchdog ---- */

/* A peer among ranks[0..n) that died, or has been stopped for heartbeat_s (0: not checked), ends
 * the job. during: "all-reduce on the dp group", "setting up the NCCL communicator of the tp
 * group" */
static void check_dead(nccl_comm_t *nc, const int *ranks, int n, const char *during,
                       double heartbeat_s)
{
    char line[768];
    if (mc_watch_peers(&nc->w, ranks, n, heartbeat_s, during, during, line, sizeof(line)))
        die(nc, "%s", line);
}

/* The heartbeat ring (comm/heartbeat.h), when due: beats only while idle (watch_s 0), else the
 * predecessor is judged while this rank waits in `during`. */
static void ring_tick(nccl_comm_t *nc, double watch_s, const char *during)
{
    char line[768];
    if (mc_watch_ring(&nc->w, watch_s, during, during, line, sizeof(line))) die(nc, "%s", line);
}

/* The oldest unfinished collective: done, hung, failed asynchronously, or waiting on a dead peer. */
static bool watch_flight(nccl_comm_t *nc, const flight_t *f, double since, double *next_check)
{
    cudaError_t e = cudaEventQuery(f->done);
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady)
        die(nc, "CUDA error during %s on the %s group: %s", f->what, f->group->name,
            cudaGetErrorString(e));
    double now = mc_now_s();
    if (f->timeout_s > 0 && now - since > f->timeout_s) {
        char line[512];
        mc_watch_timeout_line(line, sizeof(line), f->timeout_s, f->what, f->group);
        die(nc, "%s", line);
    }
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(group_nccl(f->group), &async) == ncclSuccess &&
        async != ncclSuccess && async != ncclInProgress)
        die(nc, "NCCL reported an error during %s on the %s group of %d ranks: %s (%s)", f->what,
            f->group->name, f->group->size, ncclGetErrorString(async),
            nccl_detail(group_nccl(f->group)));
    if (now >= *next_check) {
        char during[160];
        snprintf(during, sizeof(during), "%s on the %s group", f->what, f->group->name);
        if (!f->ring_only)
            check_dead(nc, f->n_peers ? f->peers : f->group->members,
                       f->n_peers ? f->n_peers : f->group->size, during, f->heartbeat_s);
        *next_check = now + MC_WATCH_PERIOD_S;
    }
    if (now >= nc->w.next_beat) {
        char during[160];
        snprintf(during, sizeof(during), "%s on the %s group", f->what, f->group->name);
        ring_tick(nc, f->heartbeat_s, during);
    }
    return false;
}

static void watch_guard(nccl_comm_t *nc, const char *what, double t0, double timeout_s,
                        double heartbeat_s, bool ring_only, double *next_check)
{
    double now = mc_now_s();
    if (timeout_s > 0 && now - t0 > timeout_s)
        die(nc,
            "timed out after %g s %s (a rank did not arrive; raise --distributed-timeout-minutes if this is "
            "expected)",
            timeout_s, what);
    if (now >= *next_check) {
        for (int r = 0; r < nc->pub.size && !ring_only; r++)
            check_dead(nc, &r, 1, what, heartbeat_s);
        *next_check = now + MC_WATCH_PERIOD_S;
    }
    ring_tick(nc, heartbeat_s, what);
}

/* Whether the watchdog has nothing to watch (nc->mu held): it beats the heartbeat ring meanwhile
 * (the caller computes, evaluates or saves a checkpoint). */
static bool idle(void *arg)
{
    const nccl_comm_t *nc = arg;
    return !nc->stop && nc->completed == nc->posted && !nc->guard_on;
}

static void *watchdog_main(void *arg)
{
    nccl_comm_t *nc = arg;
    if (cudaSetDevice(nc->device) != cudaSuccess) /* the events belong to the backend's device */
        die(nc, "the NCCL watchdog cannot use CUDA device %d", nc->device);
    double oldest_since = mc_now_s(), next_check = 0;
    long nap = NAP_MIN_NS;
    pthread_mutex_lock(&nc->mu);
    for (;;) {
        mc_watch_idle(&nc->w, &nc->mu, &nc->work, idle, nc);
        if (nc->stop && nc->completed == nc->posted) break;
        bool have = nc->completed < nc->posted, guard = nc->guard_on;
        flight_t f = {0};
        if (have) f = nc->ring[nc->completed % RING];
        char what[sizeof(nc->guard_what)];
        double g_t0 = nc->guard_t0, g_timeout = nc->guard_timeout_s,
               g_heartbeat = nc->guard_heartbeat_s;
        bool g_ring_only = nc->guard_ring_only;
        if (guard) memcpy(what, nc->guard_what, sizeof(what));
        pthread_mutex_unlock(&nc->mu);

        /* a collective counts from when it became the oldest: the ones before had their own bound */
        if (have && watch_flight(nc, &f, f.t_start > oldest_since ? f.t_start : oldest_since,
                                 &next_check)) {
            pthread_mutex_lock(&nc->mu);
            nc->completed++;
            pthread_cond_broadcast(&nc->space);
            oldest_since = mc_now_s();
            nap = NAP_MIN_NS;
            continue;
        }
        if (guard) watch_guard(nc, what, g_t0, g_timeout, g_heartbeat, g_ring_only, &next_check);
        nanosleep(&(struct timespec){.tv_nsec = nap}, NULL);
        nap = nap * 2 > NAP_MAX_NS ? NAP_MAX_NS : nap * 2;
        pthread_mutex_lock(&nc->mu);
    }
    pthread_mutex_unlock(&nc->mu);
    return NULL;
}

static void guard_begin(nccl_comm_t *nc, const char *fmt, const char *name)
{
    pthread_mutex_lock(&nc->mu);
    snprintf(nc->guard_what, sizeof(nc->guard_what), fmt, name);
    nc->guard_t0 = mc_now_s();
    nc->guard_timeout_s = nc->pub.timeout_s;
    nc->guard_heartbeat_s = nc->pub.heartbeat_s;
    nc->guard_ring_only = nc->pub.heartbeat_ring_only != 0;
    nc->guard_on = true;
    pthread_cond_signal(&nc->work);
    pthread_mutex_unlock(&nc->mu);
}

static void guard_end(nccl_comm_t *nc)
{
    pthread_mutex_lock(&nc->mu);
    nc->guard_on = false;
    pthread_mutex_unlock(&nc->mu);
}

/* ---- the stream of collectives (caller's thread) ---- */

/* Reserves the next ticket (waiting while RING collectives are unfinished) and orders the
 * communication stream after the compute stream's work so far. */
static int64_t begin(nccl_comm_t *nc)
{
    stop_if_dying();
    pthread_mutex_lock(&nc->mu);
    while (nc->issued - nc->completed >= RING) pthread_cond_wait(&nc->space, &nc->mu);
    pthread_mutex_unlock(&nc->mu);
    int64_t t = ++nc->issued;
    CK(nc, cudaEventRecord(nc->ready, nc->compute));
    CK(nc, cudaStreamWaitEvent(nc->stream, nc->ready, 0));
    return t;
}

/* Records ticket t's completion after what was enqueued since begin() and hands it to the
 * watchdog. */
static void post(nccl_comm_t *nc, int64_t t, const mc_coll_t *o)
{
    flight_t *f = &nc->ring[(t - 1) % RING];
    f->group = o->group;
    f->t_start = mc_now_s();
    f->timeout_s = nc->pub.timeout_s;
    f->heartbeat_s = nc->pub.heartbeat_s;
    f->ring_only = nc->pub.heartbeat_ring_only != 0;
    mc_coll_what(o, f->what, sizeof(f->what));
    f->n_peers = 0;
    for (int i = 0, r; o->kind == MC_COLL_P2P_BATCH && (r = mc_p2p_peer(o, i)) >= 0; i++) {
        if (i == MAX_PEERS) { /* many peers: watch the whole group */
            f->n_peers = 0;
            break;
        }
        f->peers[f->n_peers++] = r;
    }
    CK(nc, cudaEventRecord(f->done, nc->stream));
    pthread_mutex_lock(&nc->mu);
    nc->posted = t;
    pthread_cond_signal(&nc->work);
    pthread_mutex_unlock(&nc->mu);
}

/* Returns when ticket t (and every earlier one) is complete on the GPU. No deadline here: the
 * watchdog bounds the collective and ends the job if it hangs. */
static void block_until(nccl_comm_t *nc, int64_t t)
{
    const flight_t *f = &nc->ring[(t - 1) % RING];
    long nap = 20000;
    for (int polls = 0;; polls++) {
        pthread_mutex_lock(&nc->mu);
        bool done = nc->completed >= t; /* then the slot may hold a later ticket: do not query it */
        pthread_mutex_unlock(&nc->mu);
        stop_if_dying();
        if (done) return;
        cudaError_t e = cudaEventQuery(f->done);
        if (e == cudaSuccess) {
            stop_if_dying(); /* complete because the watchdog aborted it */
            return;
        }
        if (e != cudaErrorNotReady)
            die(nc, "CUDA error during %s on the %s group: %s", f->what, f->group->name,
                cudaGetErrorString(e));
        /* spin briefly (small collectives), then yield for a few ms, then nap, longer the longer
         * the wait (a barrier may wait for a rank that writes a checkpoint) */
        if (polls > 2000) {
            nanosleep(&(struct timespec){.tv_nsec = nap}, NULL);
            if (nap < 500000) nap += nap / 8;
        } else if (polls > 64) sched_yield();
    }
}

static void drain(nccl_comm_t *nc)
{
    if (nc->issued > 0) block_until(nc, nc->issued);
}

/* drain, and wait until the watchdog has retired every flight too: it may still hold a copy of
 * the last one and read its group, which must outlive that (group_free). */
static void drain_retired(nccl_comm_t *nc)
{
    drain(nc);
    pthread_mutex_lock(&nc->mu);
    while (nc->completed < nc->posted) pthread_cond_wait(&nc->space, &nc->mu);
    pthread_mutex_unlock(&nc->mu);
    stop_if_dying();
}

/* NCCL sets up a group's (or a peer's) connections lazily, inside its first call on them, which
 * then blocks the host until the peers make it too: bounded like communicator set-up. */
static void enqueue(nccl_comm_t *nc, const mc_coll_t *o)
{
    guard_begin(nc, "in an NCCL call on the %s group (connection set-up)", o->group->name);
    const char *call = NULL;
    ncclResult_t r = mc_nccl_calls(group_nccl(o->group), nc->stream, nc->barrier_word, o, &call);
    check_nccl(nc, r, call, o);
    guard_end(nc);
}

/* ---- host buffers ---- */

/* Host memory, pinned or not, is what NCCL cannot read; any error reading the attributes: host. */
static bool is_host(const void *p)
{
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return true;
    }
    return a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged;
}

/* Whether o's buffers are host memory; a collective mixing host and device buffers is a caller
 * bug. */
static bool host_op(nccl_comm_t *nc, const mc_coll_t *o)
{
    mc_stage_region_t r[2];
    int nr = 0, host = 0, seen = 0;
    if (o->kind == MC_COLL_P2P_BATCH) {
        for (int i = 0; i < o->n_p2p; i++)
            if (o->p2p[i].count) seen++, host += is_host(o->p2p[i].buf);
    } else {
        nr = mc_coll_regions(o, r);
        for (int i = 0; i < nr; i++)
            if (r[i].bytes) seen++, host += is_host(r[i].ptr);
    }
    if (host && host != seen)
        die(nc, "internal error: a %s on the %s group mixes host and device buffers",
            mc_coll_name(o->kind), o->group->name);
    return host > 0;
}

/* A device stage and its pinned mirror of at least `bytes` (the stage is idle between host
 * collectives, which block). */
static void ensure_stage(nccl_comm_t *nc, size_t bytes)
{
    if (bytes <= nc->stage_cap) return;
    size_t cap = bytes > nc->stage_min ? bytes : nc->stage_min;
    if (nc->stage) CK(nc, cudaFree(nc->stage));
    if (nc->host_stage) CK(nc, cudaFreeHost(nc->host_stage));
    nc->stage = nc->host_stage = NULL, nc->stage_cap = 0;
    if (cudaMalloc(&nc->stage, cap) != cudaSuccess ||
        cudaMallocHost(&nc->host_stage, cap) != cudaSuccess)
        die(nc, "out of memory for a %zu-byte stage of host buffers for NCCL (CUDA device %d)", cap,
            nc->device);
    nc->stage_cap = cap;
}

/* Runs o on the device stage: host -> pinned -> device, the collective, device -> pinned, then
 * (after the GPU is done) pinned -> host. */
static void run_on_stage(nccl_comm_t *nc, const mc_coll_t *o, const mc_coll_t *staged,
                         size_t in_off, size_t in_len, size_t out_off, size_t out_len)
{
    char *d = nc->stage, *h = nc->host_stage;
    int64_t t = begin(nc);
    if (in_len)
        CK(nc, cudaMemcpyAsync(d + in_off, h + in_off, in_len, cudaMemcpyHostToDevice, nc->stream));
    enqueue(nc, staged);
    if (out_len)
        CK(nc,
           cudaMemcpyAsync(h + out_off, d + out_off, out_len, cudaMemcpyDeviceToHost, nc->stream));
    post(nc, t, o);
    block_until(nc, t);
}

/* A collective on host buffers, in pieces of the stage: complete when this returns. Reading
 * each piece of send before writing the same piece of recv keeps the in-place forms right (an
 * all-gather's send block inside recv, a reduce-scatter's shard inside send). */
static void run_host(nccl_comm_t *nc, const mc_coll_t *o)
{
    const size_t es = mc_dtype_size(o->dt), size = (size_t)o->group->size,
                 me = (size_t)o->group->rank;
    const bool rs = o->kind == MC_COLL_REDUCE_SCATTER, ag = o->kind == MC_COLL_ALL_GATHER;
    const size_t per = rs || ag ? size : 1;
    ensure_stage(nc, per * es);
    const size_t k = nc->stage_cap / (per * es);
    const char *src = rs || ag || (o->send && o->send != o->recv) ? o->send : o->recv;
    char *dst = o->recv, *h = nc->host_stage, *d = nc->stage;
    for (size_t off = 0; off < o->count; off += k) {
        size_t m = o->count - off < k ? o->count - off : k, mb = m * es;
        mc_coll_t s = *o;
        s.count = m;
        if (rs) {
            for (size_t r = 0; r < size; r++)
                memcpy(h + r * mb, src + (r * o->count + off) * es, mb);
            s.send = d, s.recv = d + me * mb;
            run_on_stage(nc, o, &s, 0, size * mb, me * mb, mb);
            memcpy(dst + off * es, h + me * mb, mb);
        } else if (ag) {
            memcpy(h + me * mb, src + off * es, mb);
            s.send = d + me * mb, s.recv = d;
            run_on_stage(nc, o, &s, me * mb, mb, 0, size * mb);
            for (size_t r = 0; r < size; r++)
                memcpy(dst + (r * o->count + off) * es, h + r * mb, mb);
        } else { /* all-reduce, broadcast: in place on the stage */
            memcpy(h, src + off * es, mb);
            s.send = NULL, s.recv = d;
            run_on_stage(nc, o, &s, 0, mb, 0, mb);
            memcpy(dst + off * es, h, mb);
        }
    }
}

/* A p2p batch or an all-to-all of host buffers, staged whole (the pipeline's and the token
 * dispatcher's tensors are device memory; this is for completeness). */
static void run_host_whole(nccl_comm_t *nc, const mc_coll_t *o)
{
    int nops = o->kind == MC_COLL_P2P_BATCH ? o->n_p2p : 0;
    mc_stage_region_t *r = malloc((size_t)(nops + 2) * sizeof(*r));
    mc_p2p_t *p2p = malloc((size_t)(nops + 1) * sizeof(*p2p));
    if (!r || !p2p) die(nc, "out of memory staging a %s", mc_coll_name(o->kind));
    int nr = mc_coll_regions(o, r);
    for (int i = 0; i < nr; i++) r[i].staged = r[i].bytes > 0;
    size_t total = mc_stage_plan(r, nr);
    ensure_stage(nc, total);
    char *h = nc->host_stage;
    for (int i = 0; i < nr; i++)
        if (r[i].staged && r[i].in) memcpy(h + r[i].offset, r[i].ptr, r[i].bytes);
    mc_coll_t s;
    mc_stage_apply(o, r, nc->stage, &s, p2p);
    run_on_stage(nc, o, &s, 0, total, 0, total);
    for (int i = 0; i < nr; i++)
        if (r[i].staged && r[i].out) memcpy(r[i].ptr, h + r[i].offset, r[i].bytes);
    free(p2p);
    free(r);
}

static mc_req_t nccl_start(mc_comm_t *c, const mc_coll_t *op)
{
    nccl_comm_t *nc = (nccl_comm_t *)c;
    mc_coll_validate(c, op);
    mc_comm_count(c, op);
    bool a2av = op->kind == MC_COLL_ALL_TO_ALL_V; /* a rank with nothing to move takes part */
    if (op->kind == MC_COLL_P2P_BATCH ? op->n_p2p == 0
                                      : op->count == 0 && op->kind != MC_COLL_BARRIER && !a2av)
        return MC_REQ_DONE;
    if (op->kind != MC_COLL_BARRIER && host_op(nc, op)) {
        if (op->kind == MC_COLL_P2P_BATCH || a2av) run_host_whole(nc, op);
        else run_host(nc, op);
        return MC_REQ_DONE;
    }
    int64_t t = begin(nc);
    enqueue(nc, op);
    post(nc, t, op);
    if (op->kind == MC_COLL_BARRIER) { /* a barrier holds the host until every member is there */
        block_until(nc, t);
        return MC_REQ_DONE;
    }
    return t;
}

/* The compute stream waits for ticket req (and so for every earlier one); the host goes on. */
static void nccl_wait(mc_comm_t *c, mc_req_t req)
{
    nccl_comm_t *nc = (nccl_comm_t *)c;
    if (req == MC_REQ_DONE) return;
    if (req <= 0 || req > nc->issued)
        mc_fatal("wait on collective ticket %lld, which was never started", (long long)req);
    pthread_mutex_lock(&nc->mu);
    bool done = nc->completed >= req; /* then its slot may hold a later ticket */
    pthread_mutex_unlock(&nc->mu);
    if (!done) CK(nc, cudaStreamWaitEvent(nc->compute, nc->ring[(req - 1) % RING].done, 0));
    stop_if_dying();
}

/* ---- groups ---- */

static mc_group_t *add_group(nccl_comm_t *nc, ncclComm_t comm, const int *members, int n, int rank,
                             const char *name)
{
    pthread_mutex_lock(&nc->mu);
    mc_group_t *g = mc_group_list_add(&nc->groups, members, n, rank, name, sizeof(group_impl_t));
    if (g) ((group_impl_t *)g->impl)->nccl = comm;
    pthread_mutex_unlock(&nc->mu);
    if (!g) die(nc, "out of memory creating group '%s'", name);
    return g;
}

/* Collective over the world: the unique id from the group's first member, then
 * ncclCommInitRank on the members. Nothing may be in flight (a communicator being created while
 * kernels of another wait for a peer that is creating it can deadlock). */
static mc_group_t *make_group(nccl_comm_t *nc, const int *members, int n, const char *name)
{
    drain(nc);
    int me = -1;
    for (int i = 0; i < n; i++)
        if (members[i] == nc->pub.rank) me = i;
    ncclUniqueId id;
    memset(&id, 0, sizeof(id));
    bool root = n > 0 && me == 0;
    if (root) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess)
            die(nc, "ncclGetUniqueId for the %s group failed: %s (%s)", name, ncclGetErrorString(r),
                nccl_detail(NULL));
    }
    char key[64], err[512];
    snprintf(key, sizeof(key), "mc.nccl.id.%d", ++nc->seq);
    guard_begin(nc, "setting up the NCCL communicator of the %s group", name);
    if (mc_exchange_from(nc->rt, key, root, &id, n > 0 ? members[0] : -1, &id, sizeof(id),
                         nc->pub.timeout_s, err, sizeof(err)) != 0)
        die(nc, "%s (setting up the %s group)", err, name);
    if (n == 0) {
        guard_end(nc);
        return NULL;
    }
    ncclComm_t comm;
    ncclResult_t r = ncclCommInitRank(&comm, n, id, me);
    guard_end(nc);
    if (r != ncclSuccess)
        die(nc, "ncclCommInitRank of the %s group of %d ranks failed: %s (%s)", name, n,
            ncclGetErrorString(r), nccl_detail(NULL));
    return add_group(nc, comm, members, n, me, name);
}

static mc_group_t *nccl_group_new(mc_comm_t *c, const int *members, int n, const char *name)
{
    if (!name) name = "unnamed";
    mc_group_check_members(c->rank, c->size, members, n, name);
    return make_group((nccl_comm_t *)c, members, n, name);
}

static void release_group(mc_group_t *g)
{
    ncclCommDestroy(group_nccl(g));
    mc_group_destroy(g);
}

static void nccl_group_free(mc_comm_t *c, mc_group_t *g)
{
    nccl_comm_t *nc = (nccl_comm_t *)c;
    if (!g || g == c->world) return; /* the world lives until finalize */
    drain_retired(nc);
    pthread_mutex_lock(&nc->mu);
    bool found = mc_group_list_remove(&nc->groups, g);
    pthread_mutex_unlock(&nc->mu);
    if (!found) mc_fatal("group_free of a group this communicator did not create");
    release_group(g);
}

/* ---- start-up and shutdown ---- */

static void nccl_finalize(mc_comm_t *c)
{
    nccl_comm_t *nc = (nccl_comm_t *)c;
    drain(nc);
    if (nc->watchdog_on) {
        pthread_mutex_lock(&nc->mu);
        nc->stop = true;
        pthread_cond_signal(&nc->work);
        pthread_mutex_unlock(&nc->mu);
        pthread_join(nc->watchdog, NULL);
    }
    mc_heartbeat_bye(nc->rt->heartbeat); /* finished: the successor stops watching this rank */
    mc_comm_abort_through(NULL);
    g_nccl = NULL;
    while (nc->groups.n > 0) release_group(nc->groups.g[--nc->groups.n]);
    for (int i = 0; i < RING; i++) cudaEventDestroy(nc->ring[i].done);
    cudaEventDestroy(nc->ready);
    cudaStreamDestroy(nc->stream);
    cudaFree(nc->stage);
    cudaFreeHost(nc->host_stage);
    cudaFree(nc->barrier_word);
    pthread_mutex_destroy(&nc->mu);
    pthread_cond_destroy(&nc->work);
    pthread_cond_destroy(&nc->space);
    free(nc->groups.g);
    mc_watch_free(&nc->w);
    free(nc);
}

static int cuda_errf(char *err, size_t n, const char *what, cudaError_t e)
{
    (void)cudaGetLastError();
    return mc_errf(err, n, "%s: %s", what, cudaGetErrorString(e));
}

/* The communication stream, the events and the barrier word on the backend's device. */
static int init_cuda(nccl_comm_t *nc, const struct mc_backend *be, char *err, size_t n)
{
    nc->device = mc_cuda_backend_device(be);
    nc->compute = (cudaStream_t)mc_cuda_backend_stream(be);
    cudaError_t e = cudaSetDevice(nc->device);
    if (e != cudaSuccess) return cuda_errf(err, n, "cudaSetDevice for NCCL", e);
    if ((e = cudaStreamCreateWithFlags(&nc->stream, cudaStreamNonBlocking)) != cudaSuccess)
        return cuda_errf(err, n, "creating the NCCL stream", e);
    if ((e = cudaEventCreateWithFlags(&nc->ready, cudaEventDisableTiming)) != cudaSuccess)
        return cuda_errf(err, n, "creating CUDA events for NCCL", e);
    for (int i = 0; i < RING; i++)
        if ((e = cudaEventCreateWithFlags(&nc->ring[i].done, cudaEventDisableTiming)) !=
            cudaSuccess)
            return cuda_errf(err, n, "creating CUDA events for NCCL", e);
    if ((e = cudaMalloc((void **)&nc->barrier_word, sizeof(int32_t))) != cudaSuccess ||
        (e = cudaMemset(nc->barrier_word, 0, sizeof(int32_t))) != cudaSuccess)
        return cuda_errf(err, n, "allocating NCCL's barrier word", e);
    return 0;
}

/* What each rank tells the others at start-up: its GPU (ranks sharing one cannot use NCCL) and
 * its pid namespace (for the liveness check). */
typedef struct {
    char gpu[MC_HOST_MAX + 32]; /* "host/PCI bus id" */
    char space[MC_PID_SPACE_LEN];
} ident_t;

static int exchange_idents(nccl_comm_t *nc, char *err, size_t n)
{
    mc_runtime_t *rt = nc->rt;
    ident_t mine;
    memset(&mine, 0, sizeof(mine));
    char bus[32] = "";
    cudaError_t e = cudaDeviceGetPCIBusId(bus, sizeof(bus), nc->device);
    if (e != cudaSuccess) return cuda_errf(err, n, "cudaDeviceGetPCIBusId", e);
    snprintf(mine.gpu, sizeof(mine.gpu), "%s/%s", rt->host, bus);
    mc_pid_space(mine.space);
    ident_t *all = calloc((size_t)rt->size, sizeof(*all));
    char *gpus = malloc((size_t)rt->size * sizeof(mine.gpu)),
         *spaces = malloc((size_t)rt->size * MC_PID_SPACE_LEN);
    int rc = -1;
    if (!all || !gpus || !spaces) mc_errf(err, n, "out of memory for %d ranks", rt->size);
    else if (mc_exchange_all(rt, "mc.nccl.ident", &mine, all, sizeof(mine), nc->pub.timeout_s, err,
                             n) == 0)
        rc = 0;
    if (rc == 0) {
        for (int r = 0; r < rt->size; r++) {
            memcpy(gpus + (size_t)r * sizeof(mine.gpu), all[r].gpu, sizeof(mine.gpu));
            memcpy(spaces + (size_t)r * MC_PID_SPACE_LEN, all[r].space, MC_PID_SPACE_LEN);
        }
        rc = mc_watch_init(&nc->w, rt, spaces, err, n);
        int a, b;
        mc_exchange_first_duplicate(gpus, rt->size, sizeof(mine.gpu), &a, &b);
        if (a >= 0)
            mc_user_error(
                "--distributed-backend nccl: ranks %d and %d share the GPU %s, and NCCL needs a GPU "
                "of its own for every rank (use --distributed-backend mpi to share GPUs, or start "
                "at most as many ranks per node as it has GPUs)",
                a, b, all[a].gpu);
    }
    free(all);
    free(gpus);
    free(spaces);
    return rc;
}

mc_comm_t *mc_comm_nccl(mc_runtime_t *rt, const struct mc_backend *be, double timeout_s, char *err,
                        size_t n)
{
    if (!rt) rt = mc_runtime();
    if (!rt || !rt->pids) {
        mc_errf(err, n,
                "the NCCL communicator needs the runtime (mc_runtime_init, "
                "mc_runtime_connect) first");
        return NULL;
    }
    if (g_nccl) {
        mc_errf(err, n, "the NCCL communicator is already running");
        return NULL;
    }
    nccl_comm_t *nc = calloc(1, sizeof(*nc));
    if (!nc) {
        mc_errf(err, n, "out of memory");
        return NULL;
    }
    nc->pub = (mc_comm_t){
        .name = "nccl",
        .rank = rt->rank,
        .size = rt->size,
        .timeout_s = timeout_s,
        .heartbeat_s = 30,
        .has_avg = 1,
        .group_new = nccl_group_new,
        .group_free = nccl_group_free,
        .start = nccl_start,
        .wait = nccl_wait,
        .abort = nccl_abort,
        .finalize = nccl_finalize,
        .impl = nc,
    };
    nc->rt = rt;
    const char *stage = mc_env_text(MC_ENV_NCCL_STAGE_BYTES);
    nc->stage_min = stage && atol(stage) > 0 ? (size_t)atol(stage) : STAGE_BYTES;
    pthread_mutex_init(&nc->mu, NULL);
    mc_cond_init_monotonic(&nc->work); /* the idle watchdog's timed wait for work */
    pthread_cond_init(&nc->space, NULL);
    if (init_cuda(nc, be, err, n) != 0 || exchange_idents(nc, err, n) != 0) return NULL;
    int rc = pthread_create(&nc->watchdog, NULL, watchdog_main, nc);
    if (rc != 0) {
        mc_errf(err, n, "cannot start the NCCL watchdog thread: %s", strerror(rc));
        return NULL;
    }
    nc->watchdog_on = true;
    g_nccl = nc;
    mc_comm_abort_through(&nc->pub);
    int *all = malloc((size_t)rt->size * sizeof(*all));
    if (!all) mc_fatal("out of memory for %d ranks", rt->size);
    for (int r = 0; r < rt->size; r++) all[r] = r;
    nc->pub.world = make_group(nc, all, rt->size, "world");
    free(all);
    return &nc->pub;
}

#else
/* Built without CUDA: no NCCL. */
#include "base/error.h"
#include "comm/comm.h"

mc_comm_t *mc_comm_nccl(struct mc_runtime *rt, const struct mc_backend *be, double timeout_s,
                        char *err, size_t n)
{
    (void)rt, (void)be, (void)timeout_s;
    mc_errf(err, n, "this megatron-c was built without CUDA, so without NCCL");
    return NULL;
}
#endif
