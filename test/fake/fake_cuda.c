/* An emulation of the CUDA runtime and NCCL calls that comm/comm_nccl.c makes, on host memory
 * and MPI, so that test/mpi/test_comm_nccl.c runs the NCCL communicator's own logic (streams and
 * events, the ring of collectives, the watchdog, staging of host buffers, groups and unique ids
 * through PMIx) without a GPU. What it cannot show: NCCL's and CUDA's real behaviour.
 *
 *  - Device memory: a region mapped PROT_NONE, so any host access to a device pointer crashes,
 *    with a writable alias of the same pages (the shadow) that the emulated copies and
 *    collectives use. Allocation is a bump pointer (tests are short).
 *  - Streams: a worker thread each that runs the stream's operations in order. An event
 *    completes when the worker passes its record; waiting for an event holds the worker.
 *  - NCCL: a communicator is an MPI communicator of its members (found through messages to the
 *    unique id's maker, then MPI_Comm_create_group). Collectives and p2p groups run on the
 *    stream's worker with non-blocking MPI calls. NCCL refuses host buffers; so does this.
 *  - One mutex serializes every MPI call (MPI_THREAD_SERIALIZED); workers poll between calls.
 * Data types: fp32, fp64, int64, int32, uint8, and bf16/fp16 through MPI user ops. */
#define _GNU_SOURCE /* memfd_create */
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "kernels/dtype.h"
#include "test/fake/fake_device.h"

/* ---- device memory ---- */

#define DEV_BYTES ((size_t)1 << 30)
static char *g_dev, *g_shadow;
static size_t g_dev_used;
static pthread_mutex_t g_dev_mu = PTHREAD_MUTEX_INITIALIZER;

static bool on_device(const void *p) { return (const char *)p >= g_dev && (const char *)p < g_dev + DEV_BYTES; }

/* The address the host may use for p: the shadow of device memory, host memory itself. */
static void *real(const void *p) { return on_device(p) ? g_shadow + ((const char *)p - g_dev) : (void *)p; }

void *fake_shadow(const void *p)
{
    if (!on_device(p)) mc_fatal("fake_shadow of a pointer that is not device memory");
    return real(p);
}

void *fake_device_alloc(size_t bytes)
{
    pthread_mutex_lock(&g_dev_mu);
    size_t at = (g_dev_used + 255) / 256 * 256;
    if (at + bytes > DEV_BYTES) mc_fatal("the fake device's %zu bytes are used up", DEV_BYTES);
    g_dev_used = at + (bytes ? bytes : 1);
    pthread_mutex_unlock(&g_dev_mu);
    return g_dev + at;
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    *p = fake_device_alloc(bytes);
    return cudaSuccess;
}

cudaError_t cudaFree(void *p) { return !p || on_device(p) ? cudaSuccess : cudaErrorInvalidValue; }

cudaError_t cudaMallocHost(void **p, size_t bytes)
{
    *p = malloc(bytes ? bytes : 1);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFreeHost(void *p)
{
    if (on_device(p)) return cudaErrorInvalidValue;
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int v, size_t bytes)
{
    if (!on_device(p)) return cudaErrorInvalidValue;
    memset(real(p), v, bytes);
    return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
    memset(a, 0, sizeof(*a));
    a->type = on_device(p) ? cudaMemoryTypeDevice : cudaMemoryTypeUnregistered;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "fake CUDA error"; }

/* Ranks get GPUs of their own unless FAKE_GPU_SHARED is set (then all share bus id 0). */
cudaError_t cudaDeviceGetPCIBusId(char *buf, int len, int device)
{
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    snprintf(buf, (size_t)len, "0000:%02x:00.0", getenv("FAKE_GPU_SHARED") ? 0 : rank + device);
    return cudaSuccess;
}

/* ---- MPI, serialized ---- */

static pthread_mutex_t g_mpi = PTHREAD_MUTEX_INITIALIZER;
static MPI_Comm g_world;

/* Polls a request to completion, letting other threads into MPI in between; gives up (leaves
 * the request) when the communicator was aborted. */
static void progress(MPI_Request *req, int n, const atomic_bool *aborted)
{
    long nap = 20000; /* a GPU waits for its peers without host CPU: naps grow to 1 ms */
    for (int polls = 0;; polls++) {
        int done = 0;
        pthread_mutex_lock(&g_mpi);
        MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE);
        pthread_mutex_unlock(&g_mpi);
        if (done || atomic_load(aborted)) return;
        if (polls <= 100) {
            sched_yield();
            continue;
        }
        nanosleep(&(struct timespec){.tv_nsec = nap}, NULL);
        if (polls > 1000 && nap < 1000000) nap += nap / 4;
    }
}

/* ---- streams and events ---- */

struct CUevent_st {
    atomic_uint_fast64_t recorded, completed;
};

struct ncclComm {
    MPI_Comm comm;
    int rank, size;
    atomic_bool aborted;
};

typedef enum { OP_COPY, OP_RECORD, OP_WAIT, OP_SLEEP, OP_COLL, OP_P2P } op_kind_t;
typedef enum { C_ALL_REDUCE, C_REDUCE_SCATTER, C_ALL_GATHER, C_BROADCAST } coll_t;

typedef struct {
    int is_send, peer;
    void *buf;
    size_t count;
    ncclDataType_t dt;
} fp2p_t;

typedef struct op {
    struct op *next;
    op_kind_t kind;
    void *dst;
    const void *src;
    size_t bytes;
    cudaEvent_t ev;
    uint64_t seq;
    double seconds;
    coll_t coll;
    size_t count;
    ncclDataType_t dt;
    ncclRedOp_t rop;
    int root;
    ncclComm_t comm;
    fp2p_t *p2p;
    int n_p2p;
} op_t;

struct CUstream_st {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    op_t *head, *tail;
    bool busy, stop;
};

static void run_op(op_t *o);

static void *worker(void *arg)
{
    cudaStream_t s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stop) pthread_cond_wait(&s->cv, &s->mu);
        if (!s->head) break;
        op_t *o = s->head;
        s->head = o->next;
        if (!s->head) s->tail = NULL;
        s->busy = true;
        pthread_mutex_unlock(&s->mu);
        run_op(o);
        free(o->p2p);
        free(o);
        pthread_mutex_lock(&s->mu);
        s->busy = false;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void enqueue(cudaStream_t s, op_t o)
{
    op_t *p = malloc(sizeof(*p));
    if (!p) mc_fatal("fake stream: out of memory");
    *p = o;
    p->next = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->tail) s->tail->next = p;
    else s->head = p;
    s->tail = p;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned flags)
{
    (void)flags;
    cudaStream_t s = calloc(1, sizeof(*s));
    if (!s) return cudaErrorMemoryAllocation;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->thread, NULL, worker, s) != 0) return cudaErrorUnknown;
    *out = s;
    return cudaSuccess;
}

void fake_stream_synchronize(cudaStream_t s)
{
    pthread_mutex_lock(&s->mu);
    while (s->head || s->busy) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    fake_stream_synchronize(s);
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    free(s);
    return cudaSuccess;
}

void fake_stream_delay(cudaStream_t s, double seconds) { enqueue(s, (op_t){.kind = OP_SLEEP, .seconds = seconds}); }

void fake_stream_copy(cudaStream_t s, void *dst, const void *src, size_t bytes)
{
    enqueue(s, (op_t){.kind = OP_COPY, .dst = dst, .src = src, .bytes = bytes});
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned flags)
{
    (void)flags;
    *ev = calloc(1, sizeof(**ev));
    return *ev ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    free(ev);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s)
{
    uint64_t seq = atomic_fetch_add(&ev->recorded, 1) + 1;
    enqueue(s, (op_t){.kind = OP_RECORD, .ev = ev, .seq = seq});
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t ev)
{
    return atomic_load(&ev->completed) >= atomic_load(&ev->recorded) ? cudaSuccess : cudaErrorNotReady;
}

/* The stream waits for the event's latest record at the time of the call, as CUDA's does. */
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned flags)
{
    (void)flags;
    uint64_t seq = atomic_load(&ev->recorded);
    if (seq) enqueue(s, (op_t){.kind = OP_WAIT, .ev = ev, .seq = seq});
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t s)
{
    bool ok = kind == cudaMemcpyHostToDevice   ? on_device(dst) && !on_device(src)
              : kind == cudaMemcpyDeviceToHost ? !on_device(dst) && on_device(src)
              : kind == cudaMemcpyDeviceToDevice ? on_device(dst) && on_device(src)
                                                 : kind == cudaMemcpyDefault;
    if (!ok) return cudaErrorInvalidMemcpyDirection;
    fake_stream_copy(s, dst, src, bytes);
    return cudaSuccess;
}

/* ---- NCCL ---- */

typedef struct {
    char magic[8];
    int root; /* world rank of the maker */
    int serial;
} fake_id_t;

static atomic_bool g_async_fail;
void fake_nccl_fail_async(void) { atomic_store(&g_async_fail, true); }

static MPI_Datatype mpi_type(ncclDataType_t dt)
{
    switch (dt) {
    case ncclFloat32: return MPI_FLOAT;
    case ncclFloat64: return MPI_DOUBLE;
    case ncclInt64: return MPI_INT64_T;
    case ncclInt32: return MPI_INT32_T;
    case ncclUint8: return MPI_UINT8_T;
    case ncclBfloat16:
    case ncclFloat16: return MPI_UINT16_T; /* reduced by the user ops below */
    default: return MPI_DATATYPE_NULL;
    }
}

/* 16-bit sums and maxima in fp32, rounded once per partial result (as NCCL's kernels do). */
static void reduce16(const void *in, void *io, int n, mc_dtype_t dt, bool max)
{
    for (int i = 0; i < n; i++) {
        float a = mc_load_f32(in, dt, i), b = mc_load_f32(io, dt, i);
        mc_store_f32(io, dt, i, max ? (a > b ? a : b) : a + b);
    }
}
static void bf16_sum(void *a, void *b, int *n, MPI_Datatype *t) { (void)t, reduce16(a, b, *n, MC_DT_BF16, false); }
static void bf16_max(void *a, void *b, int *n, MPI_Datatype *t) { (void)t, reduce16(a, b, *n, MC_DT_BF16, true); }
static void f16_sum(void *a, void *b, int *n, MPI_Datatype *t) { (void)t, reduce16(a, b, *n, MC_DT_F16, false); }
static void f16_max(void *a, void *b, int *n, MPI_Datatype *t) { (void)t, reduce16(a, b, *n, MC_DT_F16, true); }
static MPI_Op g_op16[2][2]; /* [bf16, fp16][sum, max] */

static MPI_Op mpi_op(ncclRedOp_t op, ncclDataType_t dt)
{
    if (dt == ncclBfloat16 || dt == ncclFloat16) return g_op16[dt == ncclFloat16][op == ncclMax];
    return op == ncclMax ? MPI_MAX : MPI_SUM;
}

static size_t type_size(ncclDataType_t dt)
{
    int n = 0;
    MPI_Type_size(mpi_type(dt), &n);
    return (size_t)n;
}

const char *ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "no error" : "fake NCCL error"; }
const char *ncclGetLastError(ncclComm_t c)
{
    (void)c;
    return "";
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    static int serial;
    fake_id_t f = {.magic = "FAKEID", .serial = ++serial};
    MPI_Comm_rank(MPI_COMM_WORLD, &f.root);
    memset(id, 0, sizeof(*id));
    memcpy(id, &f, sizeof(f));
    return ncclSuccess;
}

/* The members find each other through the id's maker (group rank 0), then make an MPI
 * communicator in group rank order. */
ncclResult_t ncclCommInitRank(ncclComm_t *out, int n, ncclUniqueId id, int rank)
{
    enum { TAG_JOIN = 7001, TAG_LIST = 7002, TAG_CREATE = 7003 };
    fake_id_t f;
    memcpy(&f, &id, sizeof(f));
    if (memcmp(f.magic, "FAKEID", 7) != 0 || n < 1 || rank < 0 || rank >= n) return ncclInvalidArgument;
    int me = 0;
    int *list = calloc((size_t)n, sizeof(int));
    ncclComm_t c = calloc(1, sizeof(*c));
    if (!list || !c) return ncclSystemError;
    pthread_mutex_lock(&g_mpi);
    MPI_Comm_rank(g_world, &me);
    list[rank] = me;
    if (rank == 0) {
        if (f.root != me) {
            pthread_mutex_unlock(&g_mpi);
            return ncclInvalidUsage;
        }
        for (int i = 1; i < n; i++) {
            int pair[2];
            MPI_Recv(pair, 2, MPI_INT, MPI_ANY_SOURCE, TAG_JOIN, g_world, MPI_STATUS_IGNORE);
            if (pair[0] > 0 && pair[0] < n) list[pair[0]] = pair[1];
        }
        for (int i = 1; i < n; i++) MPI_Send(list, n, MPI_INT, list[i], TAG_LIST, g_world);
    } else {
        int pair[2] = {rank, me};
        MPI_Send(pair, 2, MPI_INT, f.root, TAG_JOIN, g_world);
        MPI_Recv(list, n, MPI_INT, f.root, TAG_LIST, g_world, MPI_STATUS_IGNORE);
    }
    MPI_Group world, g;
    MPI_Comm_group(g_world, &world);
    MPI_Group_incl(world, n, list, &g);
    int rc = MPI_Comm_create_group(g_world, g, TAG_CREATE, &c->comm);
    MPI_Group_free(&g);
    MPI_Group_free(&world);
    int crank = -1;
    if (rc == MPI_SUCCESS) MPI_Comm_rank(c->comm, &crank);
    pthread_mutex_unlock(&g_mpi);
    free(list);
    if (rc != MPI_SUCCESS || crank != rank) return ncclInternalError;
    c->rank = rank, c->size = n;
    *out = c;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t c)
{
    pthread_mutex_lock(&g_mpi);
    MPI_Comm_free(&c->comm);
    pthread_mutex_unlock(&g_mpi);
    free(c);
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t c)
{
    atomic_store(&c->aborted, true); /* no MPI here: another thread may be stuck inside it */
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *r)
{
    (void)c;
    *r = atomic_load(&g_async_fail) ? ncclRemoteError : ncclSuccess;
    return ncclSuccess;
}

/* NCCL reads and writes device memory only. */
static ncclResult_t check_args(const void *a, const void *b, size_t count, ncclDataType_t dt, ncclComm_t c)
{
    if (!c || mpi_type(dt) == MPI_DATATYPE_NULL) return ncclInvalidArgument;
    if (count && ((a && !on_device(a)) || (b && !on_device(b)))) return ncclInvalidArgument;
    return ncclSuccess;
}

static ncclResult_t coll(coll_t k, const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                         int root, ncclComm_t c, cudaStream_t s)
{
    ncclResult_t r = check_args(send, recv, count, dt, c);
    if (r != ncclSuccess) return r;
    if (op != ncclSum && op != ncclMax && op != ncclAvg) return ncclInvalidArgument;
    if (op == ncclAvg && dt != ncclFloat32 && dt != ncclFloat64) return ncclInvalidArgument;
    enqueue(s, (op_t){.kind = OP_COLL, .coll = k, .src = send, .dst = recv, .count = count, .dt = dt, .rop = op,
                      .root = root, .comm = c});
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                           ncclComm_t c, cudaStream_t s)
{
    return coll(C_ALL_REDUCE, send, recv, count, dt, op, 0, c, s);
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                               ncclComm_t c, cudaStream_t s)
{
    return coll(C_REDUCE_SCATTER, send, recv, count, dt, op, 0, c, s);
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclComm_t c,
                           cudaStream_t s)
{
    return coll(C_ALL_GATHER, send, recv, count, dt, ncclSum, 0, c, s);
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t dt, int root, ncclComm_t c,
                           cudaStream_t s)
{
    if (root < 0 || (c && root >= c->size)) return ncclInvalidArgument;
    return coll(C_BROADCAST, send, recv, count, dt, ncclSum, root, c, s);
}

/* A group collects its sends and receives (one communicator and stream), run together at End. */
static int g_depth;
static fp2p_t *g_ops;
static int g_nops;
static ncclComm_t g_group_comm;
static cudaStream_t g_group_stream;

ncclResult_t ncclGroupStart(void)
{
    g_depth++;
    return ncclSuccess;
}

static ncclResult_t p2p(int is_send, void *buf, size_t count, ncclDataType_t dt, int peer, ncclComm_t c,
                        cudaStream_t s)
{
    ncclResult_t r = check_args(buf, NULL, count, dt, c);
    if (r != ncclSuccess) return r;
    if (peer < 0 || peer >= c->size || !count) return ncclInvalidArgument; /* comm_nccl leaves out empty ones */
    if ((g_nops && (c != g_group_comm || s != g_group_stream))) return ncclInvalidUsage;
    fp2p_t *p = realloc(g_ops, (size_t)(g_nops + 1) * sizeof(*p));
    if (!p) return ncclSystemError;
    g_ops = p;
    g_ops[g_nops++] = (fp2p_t){.is_send = is_send, .peer = peer, .buf = buf, .count = count, .dt = dt};
    g_group_comm = c, g_group_stream = s;
    if (g_depth == 0) { /* outside a group: a group of one */
        g_depth = 1;
        return ncclGroupEnd();
    }
    return ncclSuccess;
}

ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t dt, int peer, ncclComm_t c, cudaStream_t s)
{
    return p2p(1, (void *)buf, count, dt, peer, c, s);
}

ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t dt, int peer, ncclComm_t c, cudaStream_t s)
{
    return p2p(0, buf, count, dt, peer, c, s);
}

ncclResult_t ncclGroupEnd(void)
{
    if (g_depth <= 0) return ncclInvalidUsage;
    if (--g_depth > 0 || g_nops == 0) return ncclSuccess;
    enqueue(g_group_stream, (op_t){.kind = OP_P2P, .p2p = g_ops, .n_p2p = g_nops, .comm = g_group_comm});
    g_ops = NULL, g_nops = 0;
    return ncclSuccess;
}

/* ---- running the operations (stream workers) ---- */

static void run_coll(const op_t *o)
{
    ncclComm_t c = o->comm;
    MPI_Datatype t = mpi_type(o->dt);
    size_t es = type_size(o->dt), bytes = o->count * es;
    char *s = real(o->src), *r = real(o->dst);
    MPI_Op mop = mpi_op(o->rop, o->dt);
    MPI_Request req;
    char *tmp = NULL;
    pthread_mutex_lock(&g_mpi);
    switch (o->coll) {
    case C_ALL_REDUCE: MPI_Iallreduce(s == r ? MPI_IN_PLACE : s, r, (int)o->count, t, mop, c->comm, &req); break;
    case C_REDUCE_SCATTER: /* MPI forbids the in-place shard: reduce into a copy */
        tmp = malloc(bytes ? bytes : 1);
        MPI_Ireduce_scatter_block(s, tmp, (int)o->count, t, mop, c->comm, &req);
        break;
    case C_ALL_GATHER:
        if (s == r + (size_t)c->rank * bytes)
            MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, (int)o->count, t, c->comm, &req);
        else
            MPI_Iallgather(s, (int)o->count, t, r, (int)o->count, t, c->comm, &req);
        break;
    case C_BROADCAST:
        if (c->rank == o->root && s != r) memmove(r, s, bytes);
        MPI_Ibcast(r, (int)o->count, t, o->root, c->comm, &req);
        break;
    }
    pthread_mutex_unlock(&g_mpi);
    progress(&req, 1, &c->aborted);
    if (tmp) memcpy(r, tmp, bytes);
    free(tmp);
    if (o->rop == ncclAvg && (o->coll == C_ALL_REDUCE || o->coll == C_REDUCE_SCATTER))
        for (size_t i = 0; i < o->count; i++) {
            if (o->dt == ncclFloat32) ((float *)r)[i] /= (float)c->size;
            else ((double *)r)[i] /= (double)c->size;
        }
}

static void run_p2p(const op_t *o)
{
    MPI_Request *req = malloc((size_t)o->n_p2p * sizeof(*req));
    if (!req) mc_fatal("fake NCCL: out of memory");
    pthread_mutex_lock(&g_mpi);
    for (int i = 0; i < o->n_p2p; i++) {
        const fp2p_t *p = &o->p2p[i];
        if (p->is_send)
            MPI_Isend(real(p->buf), (int)p->count, mpi_type(p->dt), p->peer, 0, o->comm->comm, &req[i]);
        else
            MPI_Irecv(real(p->buf), (int)p->count, mpi_type(p->dt), p->peer, 0, o->comm->comm, &req[i]);
    }
    pthread_mutex_unlock(&g_mpi);
    progress(req, o->n_p2p, &o->comm->aborted);
    free(req);
}

static void run_op(op_t *o)
{
    switch (o->kind) {
    case OP_COPY: memmove(real(o->dst), real(o->src), o->bytes); break;
    case OP_RECORD: {
        uint_fast64_t cur = atomic_load(&o->ev->completed);
        while (cur < o->seq && !atomic_compare_exchange_weak(&o->ev->completed, &cur, o->seq)) {
        }
        break;
    }
    case OP_WAIT:
        while (atomic_load(&o->ev->completed) < o->seq) nanosleep(&(struct timespec){.tv_nsec = 20000}, NULL);
        break;
    case OP_SLEEP: {
        struct timespec ts = {.tv_sec = (time_t)o->seconds,
                              .tv_nsec = (long)((o->seconds - (double)(time_t)o->seconds) * 1e9)};
        nanosleep(&ts, NULL);
        break;
    }
    case OP_COLL: run_coll(o); break;
    case OP_P2P: run_p2p(o); break;
    }
}

/* ---- the backend ---- */

typedef struct {
    int device;
    cudaStream_t stream;
} fake_impl_t;

static fake_impl_t g_impl;
static mc_backend_t g_backend;

int mc_cuda_backend_device(const mc_backend_t *be) { return ((const fake_impl_t *)be->impl)->device; }
void *mc_cuda_backend_stream(const mc_backend_t *be) { return ((const fake_impl_t *)be->impl)->stream; }

const mc_backend_t *fake_backend(void)
{
    int provided = 0, inited = 0;
    MPI_Initialized(&inited);
    if (!inited) MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_dup(MPI_COMM_WORLD, &g_world);
    MPI_User_function *f16[2][2] = {{bf16_sum, bf16_max}, {f16_sum, f16_max}};
    for (int t = 0; t < 2; t++)
        for (int k = 0; k < 2; k++) MPI_Op_create(f16[t][k], 1, &g_op16[t][k]);
    int fd = memfd_create("fake-device", 0);
    if (fd < 0 || ftruncate(fd, (off_t)DEV_BYTES) != 0) mc_fatal("fake device: memfd failed");
    g_dev = mmap(NULL, DEV_BYTES, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    g_shadow = mmap(NULL, DEV_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    close(fd);
    if (g_dev == MAP_FAILED || g_shadow == MAP_FAILED) mc_fatal("fake device: mmap failed");
    if (cudaStreamCreateWithFlags(&g_impl.stream, 0) != cudaSuccess) mc_fatal("fake device: no stream");
    g_backend.name = "cuda";
    g_backend.device_memory = true;
    g_backend.has_nccl = true;
    g_backend.gpu = g_impl.device;
    g_backend.impl = &g_impl;
    return &g_backend;
}

void fake_finalize(void)
{
    cudaStreamDestroy(g_impl.stream);
    MPI_Comm_free(&g_world);
    MPI_Finalize();
    munmap(g_dev, DEV_BYTES);
    munmap(g_shadow, DEV_BYTES);
}
