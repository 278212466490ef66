/* Multi-rank test of the runtime and the comm interface (comm/runtime.h, comm/comm.h).
 * Under a launcher (mpirun, srun --mpi=pmix) it uses the MPI communicator, alone the
 * single-rank one; the checks are the same and every expected value is exact.
 *
 *   test_comm_mpi             every check; rank 0 prints one TAP line per check
 *   test_comm_mpi die R       rank R kills itself (SIGKILL) before an all-reduce on the world
 *   test_comm_mpi sleep R     rank R sleeps past a 2 s timeout before an all-reduce on the world
 *   test_comm_mpi fatal R     rank R calls mc_fatal while the others wait in an all-reduce
 *   test_comm_mpi p2pdie R    rank R kills itself while rank R+1 waits in a p2p batch with it
 *   test_comm_mpi p2psleep R  rank R sleeps past a 2 s timeout while rank R+1 waits in a p2p batch
 *   test_comm_mpi p2pshort R  rank R receives 5 floats from rank R+1, which sends 10
 *   test_comm_mpi stop R      rank R stops itself (SIGSTOP) before an all-reduce on the world;
 *                             heartbeat_s is 2 s, the timeout 60 s
 *   test_comm_mpi stop R ring the same with the same-node /proc check off (heartbeat_ring_only):
 *                             the heartbeat ring alone must catch it (rank R+1, its successor)
 *   test_comm_mpi finish R    rank R finishes (finalize, exit) while its successor waits 4 s, past
 *                             a 2 s heartbeat_s, in an all-reduce of the others: no false alarm
 *   test_comm_mpi slow R      rank R computes (sleeps) 4 s before an all-reduce, past a 2 s
 *                             heartbeat_s: no false alarm; the ranks waiting for it print the CPU
 *                             time of their wait and fail when it is over a quarter of the wall time
 *   test_comm_mpi p2pself R   rank R sends to itself without a receive (single rank: mc_fatal)
 *   test_comm_mpi p2ppeer R   rank R sends to group rank 1 (single rank: mc_fatal)
 *   test_comm_mpi a2aself R   rank R's all-to-all sends 2 elements to itself but expects 3 (single
 *                             rank: mc_fatal)
 *
 * Built a second time as test_comm_nccl (MC_TEST_FAKE_NCCL, Makefile): the NCCL communicator
 * (comm/comm_nccl.c) on an emulated GPU (test/fake/fake_cuda.c: streams, events and NCCL on
 * host memory and MPI), with or without a launcher. The checks above run on host buffers there
 * (NCCL stages them, in pieces of MC_NCCL_STAGE_BYTES), and more on device buffers: every
 * collective, their order against the compute stream, many in flight, p2p. The fault modes
 * exercise its watchdog, plus "asyncerr R": NCCL reports an asynchronous error on rank R while
 * it waits in an all-reduce the others never join.
 *
 * A check fails when it fails on any rank (failures are combined with an all-reduce MAX); the
 * exit status is 0 iff this rank saw no failure. */
#define _GNU_SOURCE /* memfd_create */
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/error.h"
#include "config/env.h"
#include "kernels/device.h"
#include "comm/comm.h"
#include "comm/exchange.h"
#include "comm/runtime.h"
#ifdef MC_TEST_FAKE_NCCL
#include "test/fake/fake_device.h"
#endif

typedef struct {
    mc_comm_t *c;
    mc_runtime_t *rt;
    int rank, size, failed;
} T;

static void report(T *t, int local_fail, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void report(T *t, int local_fail, const char *fmt, ...)
{
    int64_t f = local_fail != 0;
    mc_all_reduce(t->c, t->c->world, &f, 1, MC_DT_I64, MC_OP_MAX);
    t->failed += local_fail != 0;
    if (t->rank != 0) return;
    va_list ap;
    va_start(ap, fmt);
    printf("%s - ", f ? "not ok" : "ok");
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
}

/* ---- values: exact in every type, and so are their sums over 8 ranks ---- */

static const mc_dtype_t ALL_DT[] = {MC_DT_F32, MC_DT_F64, MC_DT_I64, MC_DT_I32, MC_DT_U8, MC_DT_BF16, MC_DT_F16};
static const char *dt_name(mc_dtype_t dt) { return mc_dtype_name(dt); }

static double value(mc_dtype_t dt, int rank, size_t i)
{
    double base = (double)(((size_t)rank * 37 + i * 11 + 5) % 61);
    switch (dt) {
    case MC_DT_F32: return base - 30 + rank * 1000;
    case MC_DT_F64: return base - 30 + rank * 0.25;
    case MC_DT_I64: return (double)((int64_t)rank << 35) + base - 30;
    case MC_DT_I32: return base - 30 + rank * 100000;
    case MC_DT_U8: return (double)((int)base % 32);
    /* 16-bit floats: integers whose sums over 8 ranks (and every partial sum) stay exact:
     * |x| <= 256 in bf16's 8-bit significand, <= 2048 in fp16's 11 bits */
    case MC_DT_BF16: return base - 30;
    case MC_DT_F16: return base - 30 + rank * 8;
    }
    return 0;
}

static void put(mc_dtype_t dt, void *buf, size_t i, double v)
{
    switch (dt) {
    case MC_DT_F32: ((float *)buf)[i] = (float)v; break;
    case MC_DT_F64: ((double *)buf)[i] = v; break;
    case MC_DT_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case MC_DT_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case MC_DT_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case MC_DT_BF16:
    case MC_DT_F16: mc_store_f32(buf, dt, (long)i, (float)v); break;
    }
}

static double get(mc_dtype_t dt, const void *buf, size_t i)
{
    switch (dt) {
    case MC_DT_F32: return ((const float *)buf)[i];
    case MC_DT_F64: return ((const double *)buf)[i];
    case MC_DT_I64: return (double)((const int64_t *)buf)[i];
    case MC_DT_I32: return ((const int32_t *)buf)[i];
    case MC_DT_U8: return ((const uint8_t *)buf)[i];
    case MC_DT_BF16:
    case MC_DT_F16: return mc_load_f32(buf, dt, (long)i);
    }
    return 0;
}

/* The reduction over the group's members of value(dt, member, i). */
static double reduced(const mc_group_t *g, mc_dtype_t dt, mc_redop_t op, size_t i)
{
    double acc = value(dt, g->members[0], i);
    for (int q = 1; q < g->size; q++) {
        double v = value(dt, g->members[q], i);
        acc = op == MC_OP_SUM ? acc + v : (v > acc ? v : acc);
    }
    return acc;
}

/* Compares and says where the first difference is (on stderr, from the rank that saw it). */
static int expect(T *t, const char *what, mc_dtype_t dt, const void *buf, size_t i, double want)
{
    double got = get(dt, buf, i);
    if (got == want) return 0;
    fprintf(stderr, "rank %d: %s %s: element %zu is %.17g, expected %.17g\n", t->rank, what, dt_name(dt), i,
            got, want);
    return 1;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) mc_fatal("out of memory (%zu bytes)", n);
    return p;
}

/* ---- groups ---- */

enum { G_WORLD, G_PAIR, G_STRIDED, G_EVEN, G_ENDS, G_SELF, NGROUPS };
static const char *GROUP_NAMES[NGROUPS] = {"world", "pair", "strided", "even", "ends", "self"};

/* Each kind as Megatron would list it: pairs {2k, 2k+1} (tp-like), stride 2 (dp-like with tp=2,
 * pp-like with pp = size/2), only the even ranks (the odd ones are in no group: n = 0), the first
 * and last rank (embedding-like) and each rank alone (any parallelism of size 1). */
static int members_of(int kind, int rank, int size, int *m)
{
    int n = 0;
    switch (kind) {
    case G_PAIR:
        for (int r = rank / 2 * 2; r < size && r < rank / 2 * 2 + 2; r++) m[n++] = r;
        break;
    case G_STRIDED:
        for (int r = rank % 2; r < size; r += 2) m[n++] = r;
        break;
    case G_EVEN:
        if (rank % 2 == 0)
            for (int r = 0; r < size; r += 2) m[n++] = r;
        break;
    case G_ENDS:
        if (rank == 0 || rank == size - 1) {
            m[n++] = 0;
            if (size > 1) m[n++] = size - 1;
        }
        break;
    case G_SELF: m[n++] = rank; break;
    }
    return n;
}

static void make_groups(T *t, mc_group_t *g[NGROUPS])
{
    int *m = xmalloc((size_t)t->size * sizeof(int));
    int bad = 0;
    g[G_WORLD] = t->c->world;
    bad |= !g[G_WORLD] || g[G_WORLD]->size != t->size || g[G_WORLD]->rank != t->rank;
    for (int k = 1; k < NGROUPS; k++) {
        int n = members_of(k, t->rank, t->size, m);
        g[k] = t->c->group_new(t->c, m, n, GROUP_NAMES[k]);
        if (n == 0) {
            bad |= g[k] != NULL;
            continue;
        }
        bad |= !g[k] || g[k]->size != n || strcmp(g[k]->name, GROUP_NAMES[k]) != 0;
        for (int i = 0; !bad && i < n; i++) {
            bad |= g[k]->members[i] != m[i];
            if (m[i] == t->rank) bad |= g[k]->rank != i;
        }
    }
    free(m);
    report(t, bad, "group_new: sizes, ranks and members (n = 0 gives NULL)");
}

/* ---- one check per collective kind and group ---- */

static int one_all_reduce(T *t, mc_group_t *g, mc_dtype_t dt, mc_redop_t op, size_t count)
{
    void *buf = xmalloc(count * mc_dtype_size(dt));
    for (size_t i = 0; i < count; i++) put(dt, buf, i, value(dt, t->rank, i));
    mc_all_reduce(t->c, g, buf, count, dt, op);
    int bad = 0;
    for (size_t i = 0; i < count && !bad; i++)
        bad = expect(t, "all-reduce", dt, buf, i, reduced(g, dt, op, i));
    free(buf);
    return bad;
}

static void check_all_reduce(T *t, mc_group_t *g, const char *gname)
{
    for (int op = MC_OP_SUM; op <= MC_OP_MAX; op++) {
        int bad = 0;
        for (size_t d = 0; g && d < sizeof(ALL_DT) / sizeof(ALL_DT[0]); d++)
            bad |= one_all_reduce(t, g, ALL_DT[d], (mc_redop_t)op, 1000 + d);
        report(t, bad, "all-reduce %s (f32 f64 i64 i32 u8 bf16 fp16) on the %s group", op == MC_OP_SUM ? "sum" : "max",
               gname);
    }
}

static int one_reduce_scatter(T *t, mc_group_t *g, mc_dtype_t dt, mc_redop_t op, bool in_place)
{
    size_t count = 333, es = mc_dtype_size(dt), n = (size_t)g->size;
    char *send = xmalloc(count * n * es),
         *recv = in_place ? send + (size_t)g->rank * count * es : xmalloc(count * es);
    for (size_t j = 0; j < count * n; j++) put(dt, send, j, value(dt, t->rank, j));
    mc_reduce_scatter(t->c, g, send, recv, count, dt, op);
    int bad = 0;
    for (size_t i = 0; i < count && !bad; i++)
        bad = expect(t, "reduce-scatter", dt, recv, i, reduced(g, dt, op, (size_t)g->rank * count + i));
    if (!in_place) free(recv);
    free(send);
    return bad;
}

static void check_reduce_scatter(T *t, mc_group_t *g, const char *gname)
{
    for (int in_place = 0; in_place <= 1; in_place++) {
        int bad = 0;
        if (g) {
            bad |= one_reduce_scatter(t, g, MC_DT_F32, MC_OP_SUM, in_place);
            bad |= one_reduce_scatter(t, g, MC_DT_I64, MC_OP_MAX, in_place);
            bad |= one_reduce_scatter(t, g, MC_DT_F64, MC_OP_SUM, in_place);
            bad |= one_reduce_scatter(t, g, MC_DT_BF16, MC_OP_SUM, in_place);
            bad |= one_reduce_scatter(t, g, MC_DT_F16, MC_OP_MAX, in_place);
        }
        report(t, bad, "reduce-scatter %s (f32 sum, i64 max, f64 sum, bf16 sum, fp16 max) on the %s group",
               in_place ? "in place" : "out of place", gname);
    }
}

static int one_all_gather(T *t, mc_group_t *g, mc_dtype_t dt, bool in_place)
{
    size_t count = 257, es = mc_dtype_size(dt), n = (size_t)g->size;
    char *recv = xmalloc(count * n * es),
         *send = in_place ? recv + (size_t)g->rank * count * es : xmalloc(count * es);
    for (size_t j = 0; j < count * n; j++) put(dt, recv, j, 99); /* must all be overwritten */
    for (size_t i = 0; i < count; i++) put(dt, send, i, value(dt, t->rank, i));
    mc_all_gather(t->c, g, send, recv, count, dt);
    int bad = 0;
    for (size_t q = 0; q < n && !bad; q++)
        for (size_t i = 0; i < count && !bad; i++)
            bad = expect(t, "all-gather", dt, recv, q * count + i, value(dt, g->members[q], i));
    if (!in_place) free(send);
    free(recv);
    return bad;
}

static void check_all_gather(T *t, mc_group_t *g, const char *gname)
{
    for (int in_place = 0; in_place <= 1; in_place++) {
        int bad = 0;
        if (g) {
            bad |= one_all_gather(t, g, MC_DT_F32, in_place);
            bad |= one_all_gather(t, g, MC_DT_I32, in_place);
            bad |= one_all_gather(t, g, MC_DT_U8, in_place);
            bad |= one_all_gather(t, g, MC_DT_BF16, in_place);
        }
        report(t, bad, "all-gather %s (f32 i32 u8 bf16) on the %s group", in_place ? "in place" : "out of place",
               gname);
    }
}

static int one_broadcast(T *t, mc_group_t *g, mc_dtype_t dt, size_t count)
{
    int root = g->size - 1; /* not group rank 0 whenever the group has two members or more */
    void *buf = xmalloc(count * mc_dtype_size(dt));
    for (size_t i = 0; i < count; i++) put(dt, buf, i, g->rank == root ? value(dt, t->rank, i) : 7);
    mc_broadcast(t->c, g, buf, count, dt, root);
    int bad = 0;
    for (size_t i = 0; i < count && !bad; i++)
        bad = expect(t, "broadcast", dt, buf, i, value(dt, g->members[root], i));
    free(buf);
    return bad;
}

static void check_broadcast_barrier(T *t, mc_group_t *g, const char *gname)
{
    int bad = 0;
    if (g) {
        bad |= one_broadcast(t, g, MC_DT_F32, 100);
        bad |= one_broadcast(t, g, MC_DT_I64, 101);
        bad |= one_broadcast(t, g, MC_DT_U8, 102);
    }
    report(t, bad, "broadcast from the last group rank (f32 i64 u8) on the %s group", gname);
    if (g) mc_barrier(t->c, g);
    report(t, 0, "barrier on the %s group", gname);
}

/* ---- asynchronous use: several collectives in flight, waited in various orders ---- */

typedef struct {
    float ar[64], pair[64], gathered[8 * 16], bc[32];
    float rs[8 * 16];
    mc_req_t tk[5];
} batch_t;

static void batch_start(T *t, mc_group_t *g[NGROUPS], batch_t *b)
{
    mc_comm_t *c = t->c;
    mc_group_t *w = g[G_WORLD], *pair = g[G_PAIR], *str = g[G_STRIDED];
    for (int i = 0; i < 64; i++) b->ar[i] = (float)value(MC_DT_F32, t->rank, (size_t)i);
    for (int i = 0; i < 64; i++) b->pair[i] = (float)value(MC_DT_F32, t->rank, (size_t)i + 5);
    for (int i = 0; i < 16; i++)
        b->gathered[str->rank * 16 + i] = (float)value(MC_DT_F32, t->rank, (size_t)i);
    for (int i = 0; i < 32; i++) b->bc[i] = w->rank == 0 ? (float)i * 3 : -1;
    for (int j = 0; j < 16 * w->size; j++) b->rs[j] = (float)value(MC_DT_F32, t->rank, (size_t)j);
    b->tk[0] = c->start(c, &(mc_coll_t){.kind = MC_COLL_ALL_REDUCE,
                                        .group = w,
                                        .recv = b->ar,
                                        .count = 64,
                                        .dt = MC_DT_F32,
                                        .op = MC_OP_SUM});
    b->tk[1] = c->start(c, &(mc_coll_t){.kind = MC_COLL_ALL_REDUCE,
                                        .group = pair,
                                        .recv = b->pair,
                                        .count = 64,
                                        .dt = MC_DT_F32,
                                        .op = MC_OP_MAX});
    b->tk[2] = c->start(c, &(mc_coll_t){.kind = MC_COLL_ALL_GATHER,
                                        .group = str,
                                        .send = b->gathered + str->rank * 16,
                                        .recv = b->gathered,
                                        .count = 16,
                                        .dt = MC_DT_F32});
    b->tk[3] = c->start(
        c,
        &(mc_coll_t){
            .kind = MC_COLL_BROADCAST, .group = w, .recv = b->bc, .count = 32, .dt = MC_DT_F32, .root = 0});
    b->tk[4] = c->start(c, &(mc_coll_t){.kind = MC_COLL_REDUCE_SCATTER,
                                        .group = w,
                                        .send = b->rs,
                                        .recv = b->rs + w->rank * 16,
                                        .count = 16,
                                        .dt = MC_DT_F32,
                                        .op = MC_OP_SUM});
}

static int batch_check(T *t, mc_group_t *g[NGROUPS], const batch_t *b)
{
    mc_group_t *w = g[G_WORLD], *pair = g[G_PAIR], *str = g[G_STRIDED];
    int bad = 0;
    for (size_t i = 0; i < 64 && !bad; i++)
        bad = expect(t, "async all-reduce", MC_DT_F32, b->ar, i, reduced(w, MC_DT_F32, MC_OP_SUM, i));
    for (size_t i = 0; i < 64 && !bad; i++)
        bad = expect(t, "async pair all-reduce", MC_DT_F32, b->pair, i,
                     reduced(pair, MC_DT_F32, MC_OP_MAX, i + 5));
    for (size_t q = 0; q < (size_t)str->size && !bad; q++)
        for (size_t i = 0; i < 16 && !bad; i++)
            bad = expect(t, "async all-gather", MC_DT_F32, b->gathered, q * 16 + i,
                         value(MC_DT_F32, str->members[q], i));
    for (size_t i = 0; i < 32 && !bad; i++)
        bad = expect(t, "async broadcast", MC_DT_F32, b->bc, i, (double)i * 3);
    for (size_t i = 0; i < 16 && !bad; i++)
        bad = expect(t, "async reduce-scatter", MC_DT_F32, b->rs + w->rank * 16, i,
                     reduced(w, MC_DT_F32, MC_OP_SUM, (size_t)w->rank * 16 + i));
    return bad;
}

static void check_async(T *t, mc_group_t *g[NGROUPS])
{
    static const int orders[3][5] = {{0, 1, 2, 3, 4}, {4, -1, -1, -1, -1}, {2, 0, 4, 1, 3}};
    static const char *names[3] = {"waited in order", "only the last waited (completes the earlier ones)",
                                   "waited out of order"};
    for (int k = 0; k < 3; k++) {
        batch_t b;
        batch_start(t, g, &b);
        for (int i = 0; i < 5 && orders[k][i] >= 0; i++) t->c->wait(t->c, b.tk[orders[k][i]]);
        report(t, batch_check(t, g, &b), "five collectives on three groups in flight, %s", names[k]);
    }
}

/* More collectives in flight than the comm thread's queue holds (start blocks, then resumes). */
static void check_many_in_flight(T *t)
{
    enum { N = 3000 };
    int64_t *v = xmalloc(N * sizeof(*v));
    mc_req_t last = MC_REQ_DONE;
    for (int k = 0; k < N; k++) {
        v[k] = (int64_t)t->rank * N + k;
        last = t->c->start(t->c, &(mc_coll_t){.kind = MC_COLL_ALL_REDUCE,
                                              .group = t->c->world,
                                              .recv = v + k,
                                              .count = 1,
                                              .dt = MC_DT_I64,
                                              .op = MC_OP_SUM});
    }
    t->c->wait(t->c, last);
    int bad = 0;
    int64_t ranks = (int64_t)t->size * (t->size - 1) / 2;
    for (int k = 0; k < N && !bad; k++)
        bad = expect(t, "queued all-reduce", MC_DT_I64, v, (size_t)k,
                     (double)(ranks * N + (int64_t)t->size * k));
    free(v);
    report(t, bad, "%d all-reduces in flight, then one wait", N);
}

/* Bigger than MC_MPI_CHUNK_ELEMS (set to 1M below): runs in 4 pieces, the last of 1 element. */
static void check_big(T *t)
{
    size_t count = 3000001;
    float *buf = xmalloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++) buf[i] = (float)(i % 1000) + (float)t->rank;
    mc_all_reduce(t->c, t->c->world, buf, count, MC_DT_F32, MC_OP_SUM);
    double ranks = (double)t->size * (t->size - 1) / 2;
    int bad = 0;
    for (size_t i = 0; i < count && !bad; i++)
        bad = expect(t, "big all-reduce", MC_DT_F32, buf, i, (double)(i % 1000) * t->size + ranks);
    report(t, bad, "all-reduce of %zu floats (in chunks)", count);

    double *d = xmalloc(count * sizeof(double));
    for (size_t i = 0; i < count; i++) d[i] = t->rank == 0 ? (double)i * 0.5 : -1;
    mc_broadcast(t->c, t->c->world, d, count, MC_DT_F64, 0);
    bad = 0;
    for (size_t i = 0; i < count && !bad; i++)
        bad = expect(t, "big broadcast", MC_DT_F64, d, i, (double)i * 0.5);
    report(t, bad, "broadcast of %zu doubles (in chunks)", count);
    free(d);
    free(buf);
}

static void check_counters_and_empty(T *t, mc_group_t *g[NGROUPS])
{
    mc_comm_t *c = t->c;
    mc_group_t *str = g[G_STRIDED];
    uint64_t calls[MC_COLL_KINDS], bytes[MC_COLL_KINDS], gcalls[MC_COLL_KINDS], gbytes[MC_COLL_KINDS];
    memcpy(calls, c->calls, sizeof(calls));
    memcpy(bytes, c->bytes, sizeof(bytes));
    memcpy(gcalls, str->calls, sizeof(gcalls));
    memcpy(gbytes, str->bytes, sizeof(gbytes));
    float f[10] = {0};
    double s[5 * 8], r[5];
    int32_t gi[3 * 8], mine[3] = {1, 2, 3};
    uint8_t u[7] = {0};
    for (int i = 0; i < 5 * t->size; i++) s[i] = i;
    mc_all_reduce(c, c->world, f, 10, MC_DT_F32, MC_OP_SUM);
    mc_reduce_scatter(c, c->world, s, r, 5, MC_DT_F64, MC_OP_SUM);
    mc_all_gather(c, c->world, mine, gi, 3, MC_DT_I32);
    mc_broadcast(c, c->world, u, 7, MC_DT_U8, 0);
    mc_barrier(c, c->world);
    /* p2p on the strided group: 6 f64 to next, 6 from prev, 3 i32 to prev, 3 from next */
    double d6[6] = {1, 2, 3, 4, 5, 6}, r6[6];
    int32_t i3[3] = {7, 8, 9}, r3[3];
    int next = (str->rank + 1) % str->size, prev = (str->rank + str->size - 1) % str->size;
    mc_p2p_batch(c, str,
                 (mc_p2p_t[]){{1, next, d6, 6, MC_DT_F64},
                              {0, prev, r6, 6, MC_DT_F64},
                              {1, prev, i3, 3, MC_DT_I32},
                              {0, next, r3, 3, MC_DT_I32}},
                 4);
    /* all-to-all on the world: 2 i32 to and from every rank */
    size_t *sc = xmalloc(2 * (size_t)t->size * sizeof(size_t)), *rc = sc + t->size;
    int32_t *a2s = xmalloc(8 * (size_t)t->size), *a2r = xmalloc(8 * (size_t)t->size);
    for (int q = 0; q < t->size; q++) sc[q] = rc[q] = 2, a2s[2 * q] = a2s[2 * q + 1] = q;
    mc_all_to_all_v(c, c->world, a2s, sc, NULL, a2r, rc, NULL, MC_DT_I32);
    int a2bad = 0;
    for (int q = 0; q < t->size; q++) a2bad |= a2r[2 * q] != t->rank || a2r[2 * q + 1] != t->rank;
    free(sc), free(a2s), free(a2r);
    uint64_t n = (uint64_t)t->size;
    uint64_t want_bytes[MC_COLL_KINDS] = {40, 5 * 8 * n, 3 * 4 * n, 7, 0, 2 * (48 + 12), 2 * 4 * n};
    int bad = r6[5] != 6 || r3[2] != 9 || a2bad;
    for (int k = 0; k < MC_COLL_KINDS; k++) {
        uint64_t gc = str->calls[k] - gcalls[k], gb = str->bytes[k] - gbytes[k];
        uint64_t gc_want = k == MC_COLL_P2P_BATCH, gb_want = gc_want ? want_bytes[k] : 0;
        if (c->calls[k] - calls[k] != 1 || c->bytes[k] - bytes[k] != want_bytes[k] || gc != gc_want ||
            gb != gb_want) {
            fprintf(stderr,
                    "rank %d: %s: %llu calls, %llu bytes (strided group: %llu, %llu); expected 1 call, %llu "
                    "bytes (strided group: %llu, %llu)\n",
                    t->rank, mc_coll_name((mc_coll_kind_t)k), (unsigned long long)(c->calls[k] - calls[k]),
                    (unsigned long long)(c->bytes[k] - bytes[k]), (unsigned long long)gc,
                    (unsigned long long)gb, (unsigned long long)want_bytes[k], (unsigned long long)gc_want,
                    (unsigned long long)gb_want);
            bad = 1;
        }
    }
    bad |= strcmp(mc_coll_name(MC_COLL_P2P_BATCH), "p2p") != 0;
    bad |= strcmp(mc_coll_name(MC_COLL_ALL_TO_ALL_V), "all-to-all") != 0;
    report(t, bad, "volume counters: calls and bytes per kind (p2p: sent + received; all-to-all: the "
           "larger side), per group too");

    mc_all_reduce(c, c->world, f, 0, MC_DT_F32, MC_OP_SUM);
    mc_all_gather(c, c->world, mine, gi, 0, MC_DT_I32);
    report(t, 0, "collectives of zero elements return");
}

/* ---- p2p batches ---- */

/* Payload of message `tag` sent by world rank `src`: exact in every type. */
static double msg(mc_dtype_t dt, int src, int tag, size_t i) { return value(dt, src, i + (size_t)tag * 101); }

typedef struct {
    void *buf;
    size_t count;
    mc_dtype_t dt;
    int src, tag; /* expected sender (world rank) and tag */
} expect_t;

/* Builds ops and their checks: a send of message `tag` from this rank, or a receive of the
 * message `tag` of world rank `src` (on the group, that is group rank `peer`). */
typedef struct {
    T *t;
    mc_group_t *g;
    mc_p2p_t ops[16];
    expect_t want[16];
    int n, nwant;
} batch_b;

static void add_op(batch_b *b, int is_send, int peer, size_t count, mc_dtype_t dt, int tag)
{
    void *buf = count ? xmalloc(count * mc_dtype_size(dt)) : NULL;
    int src = is_send ? b->t->rank : b->g->members[peer];
    for (size_t i = 0; i < count; i++) put(dt, buf, i, is_send ? msg(dt, src, tag, i) : 77);
    b->ops[b->n++] = (mc_p2p_t){.is_send = is_send, .peer = peer, .buf = buf, .count = count, .dt = dt};
    if (!is_send) b->want[b->nwant++] = (expect_t){buf, count, dt, src, tag};
}

/* Checks every receive, frees every buffer and resets the builder. */
static int batch_done(batch_b *b, const char *what)
{
    int bad = 0;
    for (int k = 0; k < b->nwant; k++)
        for (size_t i = 0; i < b->want[k].count && !bad; i++)
            bad = expect(b->t, what, b->want[k].dt, b->want[k].buf, i,
                         msg(b->want[k].dt, b->want[k].src, b->want[k].tag, i));
    for (int k = 0; k < b->n; k++) free(b->ops[k].buf);
    b->n = b->nwant = 0;
    return bad;
}

/* Every rank sends to the next and receives from the previous in one batch (three types), with
 * the sends first or the receives first. */
static void check_p2p_ring(T *t, mc_group_t *g, const char *gname)
{
    int bad = 0;
    for (int recv_first = 0; g && recv_first <= 1; recv_first++) {
        batch_b b = {.t = t, .g = g};
        int next = (g->rank + 1) % g->size, prev = (g->rank + g->size - 1) % g->size;
        for (int d = 0; d < 3; d++) {
            mc_dtype_t dt = d == 0 ? MC_DT_F32 : d == 1 ? MC_DT_I64 : MC_DT_U8;
            size_t count = 500 + 7 * (size_t)d;
            for (int half = 0; half < 2; half++) {
                if (half == recv_first) add_op(&b, 1, next, count, dt, d);
                else add_op(&b, 0, prev, count, dt, d);
            }
        }
        mc_p2p_batch(t->c, g, b.ops, b.n);
        bad |= batch_done(&b, "p2p ring");
    }
    report(t, bad, "p2p ring: send to next, receive from previous in one batch (f32 i64 u8) on the %s group",
           gname);
}

/* Megatron's pipeline: [send_next, recv_prev] then [send_prev, recv_next], three times, without
 * (first and last stage skip, empty batches on one stage) and with wrap-around (interleaving). */
static void check_p2p_pipeline(T *t, mc_group_t *g, const char *gname)
{
    for (int wrap = 0; wrap <= 1; wrap++) {
        int bad = 0;
        for (int it = 0; g && it < 3; it++) {
            batch_b b = {.t = t, .g = g};
            int r = g->rank, pp = g->size, next = (r + 1) % pp, prev = (r + pp - 1) % pp;
            bool first = r == 0 && !wrap, last = r == pp - 1 && !wrap;
            if (!last) add_op(&b, 1, next, 1000 + (size_t)it, MC_DT_F32, 2 * it);
            if (!first) add_op(&b, 0, prev, 1000 + (size_t)it, MC_DT_F32, 2 * it);
            mc_p2p_batch(t->c, g, b.ops, b.n);
            bad |= batch_done(&b, "p2p pipeline forward");
            if (!first) add_op(&b, 1, prev, 700, MC_DT_F64, 2 * it + 1);
            if (!last) add_op(&b, 0, next, 700, MC_DT_F64, 2 * it + 1);
            mc_p2p_batch(t->c, g, b.ops, b.n);
            bad |= batch_done(&b, "p2p pipeline backward");
        }
        report(t, bad,
               "p2p pipeline %s: [send_next, recv_prev] then [send_prev, recv_next] x3 on the %s group",
               wrap ? "with wrap-around" : "without wrap-around", gname);
    }
}

/* Both directions to one peer in one batch, large enough that blocking sends would deadlock:
 * group rank 0 does send_forward_recv_backward, rank 1 send_backward_recv_forward (both send
 * first). Then two sends and two receives of different sizes to the same peer in one batch:
 * matched in issue order. */
static void check_p2p_same_peer(T *t, mc_group_t *g, const char *gname)
{
    int bad = 0;
    if (g) {
        batch_b b = {.t = t, .g = g};
        int peer = (g->rank + 1) % g->size;
        add_op(&b, 1, peer, 400000, MC_DT_F32, g->rank ? 1 : 0);
        add_op(&b, 0, peer, 400000, MC_DT_F32, g->rank ? 0 : 1);
        if (g->size == 1) b.want[0].tag = 0; /* to itself: its own message */
        mc_p2p_batch(t->c, g, b.ops, b.n);
        bad |= batch_done(&b, "p2p send and receive with one peer");
        add_op(&b, 1, peer, 1000, MC_DT_F32, 5);
        add_op(&b, 1, peer, 10, MC_DT_I32, 6);
        add_op(&b, 0, peer, 1000, MC_DT_F32, 5);
        add_op(&b, 0, peer, 10, MC_DT_I32, 6);
        mc_p2p_batch(t->c, g, b.ops, b.n);
        bad |= batch_done(&b, "p2p two messages each way with one peer");
    }
    report(t, bad, "p2p both directions with one peer in one batch (400k floats; then 2 messages each way) "
           "on the %s group", gname);
}

/* The op array is a stack temporary of a returned function: start() must have copied it. */
static mc_req_t start_ring_temp(T *t, mc_group_t *g, float *out, float *in, size_t count)
{
    int next = (g->rank + 1) % g->size, prev = (g->rank + g->size - 1) % g->size;
    mc_p2p_t ops[2] = {{1, next, out, count, MC_DT_F32}, {0, prev, in, count, MC_DT_F32}};
    return t->c->start(t->c, &(mc_coll_t){.kind = MC_COLL_P2P_BATCH, .group = g, .p2p = ops, .n_p2p = 2});
}

static int check_ring_result(T *t, mc_group_t *g, const float *in, size_t count, int tag)
{
    int prev = g->members[(g->rank + g->size - 1) % g->size], bad = 0;
    for (size_t i = 0; i < count && !bad; i++)
        bad = expect(t, "async p2p", MC_DT_F32, in, i, msg(MC_DT_F32, prev, tag, i));
    return bad;
}

/* p2p batches and collectives in one stream, started back to back, only the last waited. */
static void check_p2p_async(T *t, mc_group_t *g[NGROUPS])
{
    mc_comm_t *c = t->c;
    mc_group_t *w = g[G_WORLD], *str = g[G_STRIDED], *pair = g[G_PAIR];
    size_t n = 200000;
    float *out = xmalloc(n * sizeof(float)), *in = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) out[i] = (float)msg(MC_DT_F32, t->rank, 0, i), in[i] = -1;
    int64_t x = t->rank + 1;
    start_ring_temp(t, w, out, in, n);
    mc_req_t a = c->start(c, &(mc_coll_t){.kind = MC_COLL_ALL_REDUCE, .group = w, .recv = &x, .count = 1,
                                         .dt = MC_DT_I64, .op = MC_OP_SUM});
    c->wait(c, a);
    int bad = check_ring_result(t, w, in, n, 0) || x != (int64_t)t->size * (t->size + 1) / 2;
    report(t, bad,
           "p2p batch then all-reduce started back to back: waiting the all-reduce completes the batch");

    /* all-reduce, p2p (strided), all-gather, p2p (pair), p2p (world): only the last waited */
    float *out2 = xmalloc(64 * sizeof(float)), *in2 = xmalloc(64 * sizeof(float));
    float *out3 = xmalloc(32 * sizeof(float)), *in3 = xmalloc(32 * sizeof(float));
    int32_t gath[8], mine = t->rank * 3;
    for (size_t i = 0; i < n; i++) out[i] = (float)msg(MC_DT_F32, t->rank, 1, i), in[i] = -1;
    for (size_t i = 0; i < 64; i++) out2[i] = (float)msg(MC_DT_F32, t->rank, 2, i), in2[i] = -1;
    for (size_t i = 0; i < 32; i++) out3[i] = (float)msg(MC_DT_F32, t->rank, 3, i), in3[i] = -1;
    x = 1;
    c->start(c, &(mc_coll_t){.kind = MC_COLL_ALL_REDUCE, .group = w, .recv = &x, .count = 1, .dt = MC_DT_I64,
                             .op = MC_OP_SUM});
    start_ring_temp(t, str, out2, in2, 64);
    c->start(c, &(mc_coll_t){.kind = MC_COLL_ALL_GATHER, .group = w, .send = &mine, .recv = gath, .count = 1,
                             .dt = MC_DT_I32});
    start_ring_temp(t, pair, out3, in3, 32);
    c->wait(c, start_ring_temp(t, w, out, in, n));
    bad = x != t->size || check_ring_result(t, str, in2, 64, 2) || check_ring_result(t, pair, in3, 32, 3) ||
          check_ring_result(t, w, in, n, 1);
    for (int q = 0; q < t->size && !bad; q++) bad = gath[q] != q * 3;
    report(t, bad, "collectives and p2p batches on three groups in flight, only the last waited");
    free(out), free(in), free(out2), free(in2), free(out3), free(in3);
}

/* Zero-element operations (NULL buffers) are matched like any other; an empty batch is done. */
static void check_p2p_zero(T *t, mc_group_t *g)
{
    batch_b b = {.t = t, .g = g};
    int next = (g->rank + 1) % g->size, prev = (g->rank + g->size - 1) % g->size;
    add_op(&b, 1, next, 0, MC_DT_F32, 0);
    add_op(&b, 0, prev, 0, MC_DT_F32, 0);
    mc_p2p_batch(t->c, g, b.ops, b.n);
    int bad = batch_done(&b, "p2p zero");
    add_op(&b, 0, prev, 0, MC_DT_I64, 0);
    add_op(&b, 1, next, 0, MC_DT_I64, 0);
    add_op(&b, 1, next, 5, MC_DT_I64, 1);
    add_op(&b, 0, prev, 5, MC_DT_I64, 1);
    mc_p2p_batch(t->c, g, b.ops, b.n);
    bad |= batch_done(&b, "p2p zero and five");
    mc_req_t r = t->c->start(t->c, &(mc_coll_t){.kind = MC_COLL_P2P_BATCH, .group = g, .n_p2p = 0});
    bad |= r != MC_REQ_DONE;
    t->c->wait(t->c, r);
    mc_p2p_batch(t->c, g, NULL, 0);
    report(t, bad, "p2p of zero elements (alone and among others) and empty batches");
}

/* Several MB each way (in pieces of MC_MPI_CHUNK_ELEMS = 1M elements). */
static void check_p2p_big(T *t, mc_group_t *g)
{
    batch_b b = {.t = t, .g = g};
    int next = (g->rank + 1) % g->size, prev = (g->rank + g->size - 1) % g->size;
    add_op(&b, 1, next, 3000001, MC_DT_F32, 0);
    add_op(&b, 0, prev, 3000001, MC_DT_F32, 0);
    add_op(&b, 1, prev, 1000003, MC_DT_F64, 1);
    add_op(&b, 0, next, 1000003, MC_DT_F64, 1);
    mc_p2p_batch(t->c, g, b.ops, b.n);
    report(t, batch_done(&b, "big p2p"),
           "p2p of 12 MB to next and 8 MB to previous in one batch (in chunks)");
}

/* ---- all-to-all with variable splits (the MoE token dispatcher's) ---- */

/* Elements world rank src sends to world rank dst in variant v: uneven, zero for some pairs; in
 * the odd variants world rank 1 moves nothing at all (it still takes part). */
static size_t a2a_count(int src, int dst, int v)
{
    if (v % 2 && (src == 1 || dst == 1)) return 0;
    return (size_t)((src + 2 * dst + v) % 3) * (size_t)(5 + v) + (size_t)(src == dst && v == 2);
}

/* Splits of this rank on g: counts per group rank, and displacements that leave gaps of 3 and
 * place the blocks in reverse group order (gapped), or NULL (packed). Returns the extent. */
static size_t a2a_layout(const mc_group_t *g, int me, int v, bool send, bool gapped, size_t *counts,
                         size_t *displs)
{
    size_t at = 0;
    for (int q = 0; q < g->size; q++)
        counts[q] = send ? a2a_count(me, g->members[q], v) : a2a_count(g->members[q], me, v);
    for (int k = 0; k < g->size; k++) {
        int q = gapped ? g->size - 1 - k : k;
        displs[q] = at;
        at += counts[q] + (gapped ? 3 : 0);
    }
    return at;
}

/* Runs one all-to-all of dt on g from buffers made by alloc (host or a device) and checks every
 * received element and that the gaps are untouched. */
typedef void *(*a2a_alloc_t)(size_t bytes);
typedef char *(*a2a_host_t)(const void *p); /* where the host reads and writes the buffer */

static void *host_alloc(size_t bytes) { return xmalloc(bytes); }
static char *host_view(const void *p) { return (char *)p; }

static int one_a2a(T *t, mc_group_t *g, mc_dtype_t dt, int v, bool gapped, a2a_alloc_t alloc, a2a_host_t view,
                   void (*run)(T *, mc_coll_t))
{
    int n = g->size, me = t->rank, bad = 0;
    size_t *sc = xmalloc(4 * (size_t)n * sizeof(size_t)), *sd = sc + n, *rc = sc + 2 * n, *rd = sc + 3 * n;
    size_t es = mc_dtype_size(dt), sn = a2a_layout(g, me, v, true, gapped, sc, sd),
           rn = a2a_layout(g, me, v, false, gapped, rc, rd);
    void *send = sn ? alloc(sn * es) : NULL, *recv = rn ? alloc(rn * es) : NULL;
    for (size_t i = 0; i < rn; i++) put(dt, view(recv), i, 77);
    for (int q = 0; q < n; q++)
        for (size_t i = 0; i < sc[q]; i++) put(dt, view(send), sd[q] + i, msg(dt, me, g->members[q], i));
    run(t, (mc_coll_t){.kind = MC_COLL_ALL_TO_ALL_V, .group = g, .send = send, .recv = recv, .dt = dt,
                       .send_counts = sc, .send_displs = gapped ? sd : NULL, .recv_counts = rc,
                       .recv_displs = gapped ? rd : NULL});
    for (int q = 0; q < n && !bad; q++) {
        for (size_t i = 0; i < rc[q] && !bad; i++)
            bad = expect(t, "all-to-all", dt, view(recv), rd[q] + i, msg(dt, g->members[q], me, i));
        for (size_t i = 0; gapped && i < 3 && !bad; i++)
            bad = expect(t, "all-to-all gap", dt, view(recv), rd[q] + rc[q] + i, 77);
    }
    for (int q = 0; q < n && !bad; q++) /* send unchanged */
        for (size_t i = 0; i < sc[q] && !bad; i++)
            bad = expect(t, "all-to-all send", dt, view(send), sd[q] + i, msg(dt, me, g->members[q], i));
    if (alloc == host_alloc) free(send), free(recv);
    free(sc);
    return bad;
}

static void host_run(T *t, mc_coll_t o) { mc_comm_run(t->c, &o); }

static void check_all_to_all_v(T *t, mc_group_t *g, const char *gname)
{
    int bad = 0;
    for (int v = 0; g && v < 4; v++)
        for (size_t d = 0; d < sizeof(ALL_DT) / sizeof(ALL_DT[0]); d++)
            bad |= one_a2a(t, g, ALL_DT[d], v + (int)d, v >= 2, host_alloc, host_view, host_run);
    report(t, bad, "all-to-all with uneven and zero splits, a rank moving nothing, packed and gapped "
           "(f32 f64 i64 i32 u8 bf16 fp16) on the %s group", gname);
}

#ifndef MC_TEST_FAKE_NCCL /* NCCL stages host buffers itself and takes no devmem */
/* ---- staging of device buffers (mc_comm_t.devmem: the cuda backend under MPI) ----
 *
 * A fake device: memory this process cannot touch (mapped PROT_NONE), with a second, writable
 * mapping of the same pages (the "shadow") through which the fake copies and the checks go. A
 * communicator that handed a device pointer to MPI, or touched it itself, would crash here. */

static char *g_dev, *g_shadow;
static size_t g_dev_size, g_dev_used;
static long g_d2h, g_h2d; /* staging copies made */

static void fake_device_init(void)
{
    g_dev_size = (size_t)64 << 20;
    int fd = memfd_create("mc-fake-device", 0);
    if (fd < 0 || ftruncate(fd, (off_t)g_dev_size) != 0) mc_fatal("memfd for the fake device failed");
    g_dev = mmap(NULL, g_dev_size, PROT_NONE, MAP_SHARED, fd, 0);
    g_shadow = mmap(NULL, g_dev_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (g_dev == MAP_FAILED || g_shadow == MAP_FAILED) mc_fatal("mmap of the fake device failed");
}

static void *dev_alloc(size_t bytes)
{
    size_t at = (g_dev_used + 255) / 256 * 256;
    if (at + bytes > g_dev_size) mc_fatal("the fake device is full");
    g_dev_used = at + bytes;
    return g_dev + at;
}

static char *shadow(const void *dev) { return g_shadow + ((const char *)dev - g_dev); }

static int fake_is_device(void *ctx, const void *p)
{
    (void)ctx;
    return (const char *)p >= g_dev && (const char *)p < g_dev + g_dev_size;
}
static void fake_d2h(void *ctx, void *dst, const void *src, size_t n) { (void)ctx, g_d2h++, memcpy(dst, shadow(src), n); }
static void fake_h2d(void *ctx, void *dst, const void *src, size_t n) { (void)ctx, g_h2d++, memcpy(shadow(dst), src, n); }
static void fake_d2d(void *ctx, void *dst, const void *src, size_t n) { (void)ctx, memmove(shadow(dst), shadow(src), n); }
static void *fake_host_alloc(void *ctx, size_t n) { (void)ctx; return malloc(n); }
static void fake_host_free(void *ctx, void *p) { (void)ctx, free(p); }
static const mc_devmem_t FAKE = {.is_device = fake_is_device, .d2h = fake_d2h, .h2d = fake_h2d, .d2d = fake_d2d,
                                 .host_alloc = fake_host_alloc, .host_free = fake_host_free};

/* A device buffer of count elements of dt, element i = value(dt, rank, i + shift). */
static void *dev_values(T *t, mc_dtype_t dt, size_t count, size_t shift)
{
    void *d = dev_alloc(count * mc_dtype_size(dt));
    for (size_t i = 0; i < count; i++) put(dt, shadow(d), i, value(dt, t->rank, i + shift));
    return d;
}

static void check_staged_collectives(T *t, mc_group_t *g, const char *gname)
{
    int bad = 0;
    long d2h = g_d2h, h2d = g_h2d;
    for (int oop = 0; g && oop <= 1; oop++) {
        /* all-reduce: in place and out of place, sum and max, 32-, 64- and 16-bit */
        const mc_dtype_t dts[3] = {MC_DT_F32, MC_DT_I64, MC_DT_BF16};
        for (int d = 0; d < 3; d++) {
            size_t count = 77 + (size_t)d;
            mc_redop_t op = d == 1 ? MC_OP_MAX : MC_OP_SUM;
            void *send = dev_values(t, dts[d], count, 0), *recv = oop ? dev_alloc(count * mc_dtype_size(dts[d])) : send;
            mc_comm_run(t->c, &(mc_coll_t){.kind = MC_COLL_ALL_REDUCE, .group = g, .send = oop ? send : NULL,
                                           .recv = recv, .count = count, .dt = dts[d], .op = op});
            for (size_t i = 0; i < count && !bad; i++)
                bad = expect(t, "staged all-reduce", dts[d], shadow(recv), i, reduced(g, dts[d], op, i));
            for (size_t i = 0; oop && i < count && !bad; i++) /* send unchanged */
                bad = expect(t, "staged all-reduce send", dts[d], shadow(send), i, value(dts[d], t->rank, i));
        }
        /* reduce-scatter: the shard in place inside send, or a buffer of its own */
        size_t c = 33, n = (size_t)g->size;
        float *rs = dev_values(t, MC_DT_F32, c * n, 0), *rr = oop ? dev_alloc(c * 4) : rs + (size_t)g->rank * c;
        mc_reduce_scatter(t->c, g, rs, rr, c, MC_DT_F32, MC_OP_SUM);
        for (size_t i = 0; i < c && !bad; i++)
            bad = expect(t, "staged reduce-scatter", MC_DT_F32, shadow(rr), i,
                         reduced(g, MC_DT_F32, MC_OP_SUM, (size_t)g->rank * c + i));
        /* all-gather: send as this rank's block of recv, or a buffer of its own */
        int32_t *ag = dev_alloc(c * n * 4), *as = oop ? dev_values(t, MC_DT_I32, c, 0) : ag + (size_t)g->rank * c;
        if (!oop)
            for (size_t i = 0; i < c; i++) put(MC_DT_I32, shadow(as), i, value(MC_DT_I32, t->rank, i));
        mc_all_gather(t->c, g, as, ag, c, MC_DT_I32);
        for (size_t q = 0; q < n && !bad; q++)
            for (size_t i = 0; i < c && !bad; i++)
                bad = expect(t, "staged all-gather", MC_DT_I32, shadow(ag), q * c + i, value(MC_DT_I32, g->members[q], i));
        /* broadcast from the last group rank */
        double *bc = dev_values(t, MC_DT_F64, 21, 3);
        mc_broadcast(t->c, g, bc, 21, MC_DT_F64, g->size - 1);
        for (size_t i = 0; i < 21 && !bad; i++)
            bad = expect(t, "staged broadcast", MC_DT_F64, shadow(bc), i, value(MC_DT_F64, g->members[g->size - 1], i + 3));
        g_dev_used = 0;
    }
    /* MPI stages: per pass 3 all-reduces, a reduce-scatter, an all-gather and a broadcast, each
     * one copy in (what it reads) and one back (what it writes). The single-rank communicator
     * copies device to device instead. */
    long want = strcmp(t->c->name, "mpi") == 0 ? 12 : 0;
    if (g) bad |= g_d2h - d2h != want || g_h2d - h2d != want;
    if (g && bad) fprintf(stderr, "rank %d: staging made %ld d2h and %ld h2d copies\n", t->rank, g_d2h - d2h, g_h2d - h2d);
    report(t, bad, "staged device buffers: all-reduce (f32 i64 bf16), reduce-scatter, all-gather (in place and "
           "out of place), broadcast on the %s group", gname);
}

/* Several staged collectives in flight, only the last waited (wait copies every earlier one
 * back, in order); then waits out of order; host buffers among them are not staged. */
static void check_staged_async(T *t, mc_group_t *g[NGROUPS])
{
    mc_comm_t *c = t->c;
    mc_group_t *w = g[G_WORLD], *pair = g[G_PAIR];
    int bad = 0;
    for (int order = 0; order < 2; order++) {
        float *a = dev_values(t, MC_DT_F32, 50, 0), *b = dev_values(t, MC_DT_F32, 60, 9);
        int64_t host = t->rank + 1;
        int64_t *gath = dev_alloc(8 * (size_t)w->size), *mine = dev_values(t, MC_DT_I64, 1, 0);
        long d2h = g_d2h;
        mc_req_t tk[4];
        tk[0] = c->start(c, &(mc_coll_t){.kind = MC_COLL_ALL_REDUCE, .group = w, .recv = a, .count = 50,
                                         .dt = MC_DT_F32, .op = MC_OP_SUM});
        tk[1] = c->start(c, &(mc_coll_t){.kind = MC_COLL_ALL_REDUCE, .group = pair, .recv = b, .count = 60,
                                         .dt = MC_DT_F32, .op = MC_OP_MAX});
        tk[2] = c->start(c, &(mc_coll_t){.kind = MC_COLL_ALL_REDUCE, .group = w, .recv = &host, .count = 1,
                                         .dt = MC_DT_I64, .op = MC_OP_SUM});
        tk[3] = c->start(c, &(mc_coll_t){.kind = MC_COLL_ALL_GATHER, .group = w, .send = mine, .recv = gath,
                                         .count = 1, .dt = MC_DT_I64});
        bad |= g_d2h - d2h != (strcmp(c->name, "mpi") == 0 ? 3 : 0); /* the host buffer is not staged */
        if (order == 0) {
            c->wait(c, tk[3]);
        } else {
            c->wait(c, tk[1]);
            c->wait(c, tk[0]);
            c->wait(c, tk[3]);
            c->wait(c, tk[2]);
        }
        for (size_t i = 0; i < 50 && !bad; i++)
            bad = expect(t, "staged async all-reduce", MC_DT_F32, shadow(a), i, reduced(w, MC_DT_F32, MC_OP_SUM, i));
        for (size_t i = 0; i < 60 && !bad; i++)
            bad = expect(t, "staged async pair all-reduce", MC_DT_F32, shadow(b), i,
                         reduced(pair, MC_DT_F32, MC_OP_MAX, i + 9));
        bad |= host != (int64_t)t->size * (t->size + 1) / 2;
        for (int q = 0; q < w->size && !bad; q++)
            bad = expect(t, "staged async all-gather", MC_DT_I64, shadow(gath), (size_t)q, value(MC_DT_I64, q, 0));
        g_dev_used = 0;
    }
    report(t, bad, "staged collectives in flight with a host one: the last waited, then out of order");

    /* more staged collectives in flight than the comm thread's queue holds */
    enum { N = 1500 };
    int64_t *v = dev_alloc(N * 8);
    mc_req_t last = MC_REQ_DONE;
    for (int k = 0; k < N; k++) {
        put(MC_DT_I64, shadow(v), (size_t)k, (double)((int64_t)t->rank * N + k));
        last = c->start(c, &(mc_coll_t){.kind = MC_COLL_ALL_REDUCE, .group = w, .recv = v + k, .count = 1,
                                        .dt = MC_DT_I64, .op = MC_OP_SUM});
    }
    c->wait(c, last);
    bad = 0;
    int64_t ranks = (int64_t)t->size * (t->size - 1) / 2;
    for (int k = 0; k < N && !bad; k++)
        bad = expect(t, "staged queued all-reduce", MC_DT_I64, shadow(v), (size_t)k,
                     (double)(ranks * N + (int64_t)t->size * k));
    g_dev_used = 0;
    report(t, bad, "%d staged all-reduces in flight, then one wait", N);
}

/* A p2p ring with device buffers, and a batch mixing a device send with a host receive. */
static void check_staged_p2p(T *t, mc_group_t *g)
{
    int next = (g->rank + 1) % g->size, prev = (g->rank + g->size - 1) % g->size, bad = 0;
    int src = g->members[prev];
    float *out = dev_alloc(300 * 4), *in = dev_alloc(300 * 4);
    for (size_t i = 0; i < 300; i++) put(MC_DT_F32, shadow(out), i, msg(MC_DT_F32, t->rank, 0, i));
    mc_p2p_batch(t->c, g, (mc_p2p_t[]){{1, next, out, 300, MC_DT_F32}, {0, prev, in, 300, MC_DT_F32}}, 2);
    for (size_t i = 0; i < 300 && !bad; i++)
        bad = expect(t, "staged p2p", MC_DT_F32, shadow(in), i, msg(MC_DT_F32, src, 0, i));
    double host[40];
    double *dout = dev_alloc(40 * 8);
    for (size_t i = 0; i < 40; i++) put(MC_DT_F64, shadow(dout), i, msg(MC_DT_F64, t->rank, 1, i));
    mc_p2p_batch(t->c, g, (mc_p2p_t[]){{0, prev, host, 40, MC_DT_F64}, {1, next, dout, 40, MC_DT_F64}}, 2);
    for (size_t i = 0; i < 40 && !bad; i++) bad = expect(t, "staged p2p to host", MC_DT_F64, host, i, msg(MC_DT_F64, src, 1, i));
    g_dev_used = 0;
    report(t, bad, "staged p2p: a ring of device buffers; a device send with a host receive in one batch");
}

static void *dev_alloc_a2a(size_t bytes) { return dev_alloc(bytes); }

/* All-to-all of device buffers: staged (MPI: send copied out; recv back, and out first when
 * gapped, so the gaps keep their values) or copied device to device (one rank). */
static void check_staged_a2a(T *t, mc_group_t *g, const char *gname)
{
    int bad = 0; /* MPI reading or writing the device memory would crash: PROT_NONE */
    for (int v = 0; g && v < 2; v++) {
        bad |= one_a2a(t, g, v ? MC_DT_BF16 : MC_DT_F32, v, v == 1, dev_alloc_a2a, shadow, host_run);
        g_dev_used = 0;
    }
    report(t, bad, "staged all-to-all of device buffers (f32 packed, bf16 gapped) on the %s group", gname);
}

static void check_staged(T *t, mc_group_t *g[NGROUPS])
{
    fake_device_init();
    t->c->devmem = &FAKE;
    for (int k = 0; k < NGROUPS; k++) check_staged_collectives(t, g[k], GROUP_NAMES[k]);
    check_staged_a2a(t, g[G_WORLD], "world");
    check_staged_a2a(t, g[G_STRIDED], "strided");
    check_staged_async(t, g);
    check_staged_p2p(t, g[G_WORLD]);
    t->c->devmem = NULL;
    munmap(g_dev, g_dev_size);
    munmap(g_shadow, g_dev_size);
}

#endif

#ifdef MC_TEST_FAKE_NCCL
/* ---- device buffers on the emulated GPU (NCCL) ---- */

static cudaStream_t g_compute; /* the fake backend's compute stream */

/* A device buffer of count elements of dt, element i = value(dt, rank, i + shift). */
static void *dvals(T *t, mc_dtype_t dt, size_t count, size_t shift)
{
    void *d = fake_device_alloc(count * mc_dtype_size(dt));
    for (size_t i = 0; i < count; i++) put(dt, fake_shadow(d), i, value(dt, t->rank, i + shift));
    return d;
}

/* Runs a collective as the program does (start, wait), then lets the compute stream finish, so
 * the host may read the result. */
static void drun(T *t, mc_coll_t o)
{
    t->c->wait(t->c, t->c->start(t->c, &o));
    fake_stream_synchronize(g_compute);
}

static void check_device_collectives(T *t, mc_group_t *g, const char *gname)
{
    int bad = 0;
    const mc_dtype_t dts[5] = {MC_DT_F32, MC_DT_F64, MC_DT_I64, MC_DT_I32, MC_DT_U8};
    for (int oop = 0; g && oop <= 1; oop++) {
        for (int d = 0; d < 5; d++)
            for (int op = MC_OP_SUM; op <= MC_OP_MAX; op++) {
                size_t count = 100 + (size_t)d;
                void *send = dvals(t, dts[d], count, 0), *recv = oop ? fake_device_alloc(count * 8) : send;
                drun(t, (mc_coll_t){.kind = MC_COLL_ALL_REDUCE, .group = g, .send = oop ? send : NULL, .recv = recv,
                                    .count = count, .dt = dts[d], .op = (mc_redop_t)op});
                for (size_t i = 0; i < count && !bad; i++)
                    bad = expect(t, "device all-reduce", dts[d], fake_shadow(recv), i,
                                 reduced(g, dts[d], (mc_redop_t)op, i));
            }
        /* ncclAvg (the group sizes here are powers of two: the average is exact) */
        float *avg = dvals(t, MC_DT_F32, 64, 0), *avg_out = oop ? fake_device_alloc(64 * 4) : avg;
        drun(t, (mc_coll_t){.kind = MC_COLL_ALL_REDUCE, .group = g, .send = oop ? avg : NULL, .recv = avg_out,
                            .count = 64, .dt = MC_DT_F32, .op = MC_OP_AVG});
        for (size_t i = 0; i < 64 && !bad; i++)
            bad = expect(t, "device all-reduce avg", MC_DT_F32, fake_shadow(avg_out), i,
                         reduced(g, MC_DT_F32, MC_OP_SUM, i) / g->size);
        size_t c = 37, n = (size_t)g->size;
        for (int d = 0; d < 2; d++) {
            mc_dtype_t dt = d ? MC_DT_I64 : MC_DT_F32;
            mc_redop_t op = d ? MC_OP_MAX : MC_OP_SUM;
            char *rs = dvals(t, dt, c * n, 0);
            char *rr = oop ? fake_device_alloc(c * 8) : rs + (size_t)g->rank * c * mc_dtype_size(dt);
            drun(t, (mc_coll_t){.kind = MC_COLL_REDUCE_SCATTER, .group = g, .send = rs, .recv = rr, .count = c,
                                .dt = dt, .op = op});
            for (size_t i = 0; i < c && !bad; i++)
                bad = expect(t, "device reduce-scatter", dt, fake_shadow(rr), i,
                             reduced(g, dt, op, (size_t)g->rank * c + i));
            dt = d ? MC_DT_U8 : MC_DT_F32;
            size_t es = mc_dtype_size(dt);
            char *ag = fake_device_alloc(c * n * es), *as = oop ? dvals(t, dt, c, 0) : ag + (size_t)g->rank * c * es;
            for (size_t i = 0; !oop && i < c; i++) put(dt, fake_shadow(as), i, value(dt, t->rank, i));
            drun(t, (mc_coll_t){.kind = MC_COLL_ALL_GATHER, .group = g, .send = as, .recv = ag, .count = c, .dt = dt});
            for (size_t q = 0; q < n && !bad; q++)
                for (size_t i = 0; i < c && !bad; i++)
                    bad = expect(t, "device all-gather", dt, fake_shadow(ag), q * c + i, value(dt, g->members[q], i));
        }
        double *bc = dvals(t, MC_DT_F64, 50, 7);
        drun(t, (mc_coll_t){.kind = MC_COLL_BROADCAST, .group = g, .recv = bc, .count = 50, .dt = MC_DT_F64,
                            .root = g->size - 1});
        for (size_t i = 0; i < 50 && !bad; i++)
            bad = expect(t, "device broadcast", MC_DT_F64, fake_shadow(bc), i,
                         value(MC_DT_F64, g->members[g->size - 1], i + 7));
    }
    if (g) mc_barrier(t->c, g);
    report(t, bad, "device buffers: all-reduce sum/max (f32 f64 i64 i32 u8) and avg, reduce-scatter, all-gather "
           "(in place and out of place), broadcast, barrier on the %s group", gname);
}

/* The collective sees the compute stream's earlier work, and the compute stream's later work sees
 * the collective's result, while the host returns from wait() at once. */
static void check_device_order(T *t)
{
    mc_comm_t *c = t->c;
    float host[32], *d = fake_device_alloc(sizeof(host));
    memset(fake_shadow(d), 0, sizeof(host));
    for (size_t i = 0; i < 32; i++) host[i] = (float)value(MC_DT_F32, t->rank, i);
    fake_stream_delay(g_compute, 0.3); /* a slow kernel, then the values land */
    fake_stream_copy(g_compute, d, host, sizeof(host));
    drun(t, (mc_coll_t){.kind = MC_COLL_ALL_REDUCE, .group = c->world, .recv = d, .count = 32, .dt = MC_DT_F32});
    int bad = 0;
    for (size_t i = 0; i < 32 && !bad; i++)
        bad = expect(t, "ordered after compute", MC_DT_F32, fake_shadow(d), i,
                     reduced(c->world, MC_DT_F32, MC_OP_SUM, i));
    report(t, bad, "a collective waits for the compute stream's work started before it");

    /* rank 0 joins late: the others' wait() returns before the result exists, and a copy the
     * compute stream makes afterwards still reads the result */
    for (size_t i = 0; i < 32; i++) put(MC_DT_F32, fake_shadow(d), i, value(MC_DT_F32, t->rank, i));
    float out[32] = {0};
    if (t->rank == 0) nanosleep(&(struct timespec){.tv_sec = 1}, NULL);
    double t0 = mc_now_s();
    c->wait(c, c->start(c, &(mc_coll_t){.kind = MC_COLL_ALL_REDUCE, .group = c->world, .recv = d, .count = 32,
                                        .dt = MC_DT_F32}));
    double took = mc_now_s() - t0;
    fake_stream_copy(g_compute, out, d, sizeof(out));
    fake_stream_synchronize(g_compute);
    bad = t->rank != 0 && took > 0.5;
    if (bad) fprintf(stderr, "rank %d: start+wait took %.3f s while the collective waited for rank 0\n", t->rank, took);
    for (size_t i = 0; i < 32 && !bad; i++)
        bad = expect(t, "compute after wait", MC_DT_F32, out, i, reduced(c->world, MC_DT_F32, MC_OP_SUM, i));
    report(t, bad, "wait() orders the compute stream after the collective and does not hold the host");
}

/* Several on three groups in flight, only the last waited; then more than the ring holds. */
static void check_device_in_flight(T *t, mc_group_t *g[NGROUPS])
{
    mc_comm_t *c = t->c;
    mc_group_t *w = g[G_WORLD], *pair = g[G_PAIR], *str = g[G_STRIDED];
    float *a = dvals(t, MC_DT_F32, 40, 0), *b = dvals(t, MC_DT_F32, 40, 3);
    int64_t *gath = fake_device_alloc(8 * (size_t)str->size), *mine = dvals(t, MC_DT_I64, 1, 0);
    double *bc = dvals(t, MC_DT_F64, 10, 0);
    c->start(c, &(mc_coll_t){.kind = MC_COLL_ALL_REDUCE, .group = w, .recv = a, .count = 40, .dt = MC_DT_F32});
    c->start(c, &(mc_coll_t){.kind = MC_COLL_ALL_REDUCE, .group = pair, .recv = b, .count = 40, .dt = MC_DT_F32,
                             .op = MC_OP_MAX});
    c->start(c, &(mc_coll_t){.kind = MC_COLL_ALL_GATHER, .group = str, .send = mine, .recv = gath, .count = 1,
                             .dt = MC_DT_I64});
    c->wait(c, c->start(c, &(mc_coll_t){.kind = MC_COLL_BROADCAST, .group = w, .recv = bc, .count = 10,
                                        .dt = MC_DT_F64, .root = 0}));
    fake_stream_synchronize(g_compute);
    int bad = 0;
    for (size_t i = 0; i < 40 && !bad; i++)
        bad = expect(t, "in flight all-reduce", MC_DT_F32, fake_shadow(a), i, reduced(w, MC_DT_F32, MC_OP_SUM, i)) ||
              expect(t, "in flight pair all-reduce", MC_DT_F32, fake_shadow(b), i,
                     reduced(pair, MC_DT_F32, MC_OP_MAX, i + 3));
    for (int q = 0; q < str->size && !bad; q++)
        bad = expect(t, "in flight all-gather", MC_DT_I64, fake_shadow(gath), (size_t)q,
                     value(MC_DT_I64, str->members[q], 0));
    for (size_t i = 0; i < 10 && !bad; i++)
        bad = expect(t, "in flight broadcast", MC_DT_F64, fake_shadow(bc), i, value(MC_DT_F64, 0, i));
    report(t, bad, "device collectives on three groups in flight, only the last waited");

    enum { N = 2500 }; /* more than the ring of 1024 */
    int64_t *v = fake_device_alloc(N * 8);
    mc_req_t last = MC_REQ_DONE;
    for (int k = 0; k < N; k++) {
        put(MC_DT_I64, fake_shadow(v), (size_t)k, (double)((int64_t)t->rank * N + k));
        last = c->start(c, &(mc_coll_t){.kind = MC_COLL_ALL_REDUCE, .group = w, .recv = v + k, .count = 1,
                                        .dt = MC_DT_I64});
    }
    c->wait(c, last);
    fake_stream_synchronize(g_compute);
    bad = 0;
    int64_t ranks = (int64_t)t->size * (t->size - 1) / 2;
    for (int k = 0; k < N && !bad; k++)
        bad = expect(t, "device queued all-reduce", MC_DT_I64, fake_shadow(v), (size_t)k,
                     (double)(ranks * N + (int64_t)t->size * k));
    report(t, bad, "%d device all-reduces in flight (more than the ring holds), then one wait", N);
}

/* p2p batches of device buffers: to both neighbours and from both in one batch. */
static void check_device_p2p(T *t, mc_group_t *g, const char *gname)
{
    int next = (g->rank + 1) % g->size, prev = (g->rank + g->size - 1) % g->size, bad = 0;
    float *out = fake_device_alloc(500 * 4), *in = fake_device_alloc(500 * 4);
    double *back = fake_device_alloc(70 * 8), *bin = fake_device_alloc(70 * 8);
    for (size_t i = 0; i < 500; i++) put(MC_DT_F32, fake_shadow(out), i, msg(MC_DT_F32, t->rank, 0, i));
    for (size_t i = 0; i < 70; i++) put(MC_DT_F64, fake_shadow(back), i, msg(MC_DT_F64, t->rank, 1, i));
    mc_p2p_t ops[5] = {{0, prev, in, 500, MC_DT_F32}, {1, next, out, 500, MC_DT_F32}, {1, prev, back, 70, MC_DT_F64},
                       {0, next, bin, 70, MC_DT_F64}, {1, next, NULL, 0, MC_DT_F32}};
    t->c->wait(t->c, t->c->start(t->c, &(mc_coll_t){.kind = MC_COLL_P2P_BATCH, .group = g, .p2p = ops, .n_p2p = 5}));
    fake_stream_synchronize(g_compute);
    for (size_t i = 0; i < 500 && !bad; i++)
        bad = expect(t, "device p2p ring", MC_DT_F32, fake_shadow(in), i, msg(MC_DT_F32, g->members[prev], 0, i));
    for (size_t i = 0; i < 70 && !bad; i++)
        bad = expect(t, "device p2p ring back", MC_DT_F64, fake_shadow(bin), i, msg(MC_DT_F64, g->members[next], 1, i));
    report(t, bad, "device p2p: to next and previous, from previous and next (and an empty send) in one batch "
           "on the %s group", gname);
}

/* Host collectives larger than the stage run in pieces; in place too. */
static void check_host_pieces(T *t, mc_group_t *g)
{
    size_t count = 5000, n = (size_t)g->size;
    double *ag = xmalloc(count * n * 8), *rs = xmalloc(count * n * 8);
    for (size_t i = 0; i < count; i++) ag[(size_t)g->rank * count + i] = value(MC_DT_F64, t->rank, i);
    for (size_t j = 0; j < count * n; j++) rs[j] = value(MC_DT_F64, t->rank, j);
    mc_all_gather(t->c, g, ag + (size_t)g->rank * count, ag, count, MC_DT_F64);
    mc_reduce_scatter(t->c, g, rs, rs + (size_t)g->rank * count, count, MC_DT_F64, MC_OP_SUM);
    int bad = 0;
    for (size_t q = 0; q < n && !bad; q++)
        for (size_t i = 0; i < count && !bad; i++)
            bad = expect(t, "pieces all-gather", MC_DT_F64, ag, q * count + i, value(MC_DT_F64, g->members[q], i));
    for (size_t i = 0; i < count && !bad; i++)
        bad = expect(t, "pieces reduce-scatter", MC_DT_F64, rs + (size_t)g->rank * count, i,
                     reduced(g, MC_DT_F64, MC_OP_SUM, (size_t)g->rank * count + i));
    free(ag);
    free(rs);
    report(t, bad, "host all-gather and reduce-scatter in place, larger than the stage (in pieces)");
}

static void *dev_alloc_fake(size_t bytes) { return fake_device_alloc(bytes); }
static char *dev_view_fake(const void *p) { return fake_shadow(p); }
static void dev_run(T *t, mc_coll_t o) { drun(t, o); }

/* All-to-all of device buffers: grouped ncclSend/ncclRecv, itself included. */
static void check_device_a2a(T *t, mc_group_t *g, const char *gname)
{
    int bad = 0;
    for (int v = 0; g && v < 4; v++)
        bad |= one_a2a(t, g, v % 2 ? MC_DT_I64 : MC_DT_BF16, v, v >= 2, dev_alloc_fake, dev_view_fake, dev_run);
    report(t, bad, "device all-to-all with uneven and zero splits, packed and gapped (bf16 i64) on the %s group",
           gname);
}

static void check_nccl_device(T *t, mc_group_t *g[NGROUPS])
{
    for (int k = 0; k < NGROUPS; k++) check_device_a2a(t, g[k], GROUP_NAMES[k]);
    for (int k = 0; k < NGROUPS; k++) check_device_collectives(t, g[k], GROUP_NAMES[k]);
    check_device_order(t);
    check_device_in_flight(t, g);
    check_device_p2p(t, g[G_WORLD], "world");
    check_device_p2p(t, g[G_STRIDED], "strided");
    check_host_pieces(t, g[G_WORLD]);
}
#endif

/* ---- the runtime ---- */

static void check_runtime(T *t)
{
    mc_runtime_t *rt = t->rt;
    char host[MC_HOST_MAX] = "";
    gethostname(host, sizeof(host) - 1);
    int bad = rt != mc_runtime() || rt->size != t->c->size || rt->rank != t->c->rank || rt->local_rank < 0 ||
              rt->local_rank >= rt->local_size || rt->local_size > rt->size ||
              rt->pids[rt->rank] != getpid() || strcmp(rt->hosts[rt->rank], host) != 0 ||
              strcmp(rt->host, host) != 0;
    if (bad)
        fprintf(stderr, "rank %d: runtime: rank %d size %d local %d/%d pid %d host %s\n", t->rank, rt->rank,
                rt->size, rt->local_rank, rt->local_size, (int)rt->pids[rt->rank], rt->hosts[rt->rank]);
    report(t, bad, "runtime: rank, size, local rank, own pid and host (%s)",
           rt->launched ? "launched" : "single");

    int32_t mine = t->rank * 3 + 1, theirs = -1;
    int next = (t->rank + 1) % t->size;
    bad = mc_runtime_put(rt, "test.value", &mine, sizeof(mine)) != 0 || mc_runtime_commit(rt) != 0 ||
          mc_runtime_fence(rt, 60) != 0 ||
          mc_runtime_get(rt, next, "test.value", &theirs, sizeof(theirs)) != (long)sizeof(theirs) ||
          theirs != next * 3 + 1 || mc_runtime_get(rt, next, "test.absent", &theirs, sizeof(theirs)) != -1;
    report(t, bad, "runtime: put, commit, fence, get of the next rank's value");

    /* comm/exchange.h, as the NCCL communicator shares unique ids: in pairs {2k, 2k+1} the
     * first publishes and both read it; rank 3 reads nothing but takes part in the fence */
    char id[32], got[32] = "";
    int root = t->rank / 2 * 2;
    snprintf(id, sizeof(id), "id-of-%d", t->rank);
    char err[256] = "";
    bad = mc_exchange_from(rt, "test.id", t->rank == root, id, t->rank == 3 ? -1 : root, got, sizeof(got), 60, err,
                           sizeof(err)) != 0;
    char want[32];
    snprintf(want, sizeof(want), "id-of-%d", root);
    if (t->rank != 3) bad |= strcmp(got, want) != 0;
    else bad |= got[0] != '\0';
    int32_t mine7 = t->rank * 7, *all = xmalloc((size_t)t->size * sizeof(*all));
    bad |= mc_exchange_all(rt, "test.all", &mine7, all, sizeof(mine7), 60, err, sizeof(err)) != 0;
    for (int r = 0; r < t->size && !bad; r++) bad = all[r] != r * 7;
    /* a value of another length than asked for is an error, not a short read */
    int64_t wide = 0;
    if (t->rank == 0) bad |= mc_runtime_put(rt, "test.len", &mine7, sizeof(mine7)) != 0;
    bad |= mc_exchange_from(rt, "test.len", false, NULL, 0, &wide, sizeof(wide), 60, err, sizeof(err)) == 0;
    bad |= strstr(err, "wrong length") == NULL;
    if (bad) fprintf(stderr, "rank %d: exchange: got '%s', error '%s'\n", t->rank, got, err);
    free(all);
    report(t, bad, "exchange: a group root's value to its members, every rank's value to all, length checked");
}

/* ---- fault modes ---- */

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Rank `who` is busy for 4 s, longer than heartbeat_s, while the others wait for it in an
 * all-reduce: it must complete (busy is not silent), and the waiting ranks must not burn a core. */
static int slow_peer(T *t, int who)
{
    if (t->rank == who) sleep(4);
    float x = 1;
    double w0 = mc_now_s(), c0 = cpu_s();
    mc_all_reduce(t->c, t->c->world, &x, 1, MC_DT_F32, MC_OP_SUM);
    double wall = mc_now_s() - w0, cpu = cpu_s() - c0;
    bool bad = x != (float)t->size;
    if (t->rank != who) {
        fprintf(stderr, "rank %d: waited %.1f s in the all-reduce using %.2f s of CPU\n", t->rank, wall, cpu);
        bad |= wall > 2 && cpu > 0.25 * wall;
    }
    mc_barrier(t->c, t->c->world);
    return bad ? 1 : 0;
}

/* Rank `who` finishes first (its bye ends its successor's watch); its successor then waits past
 * heartbeat_s in an all-reduce with the others, who compute meanwhile: without the bye, `who`
 * would be a silent (or dead) predecessor. Returns 0 on every rank when the job ends normally. */
static int finish_early(T *t, int who)
{
    int *rest = xmalloc((size_t)t->size * sizeof(*rest)), n = 0;
    for (int r = 0; r < t->size; r++)
        if (r != who) rest[n++] = r;
    mc_group_t *g = t->rank == who ? t->c->group_new(t->c, &who, 1, "alone")
                                   : t->c->group_new(t->c, rest, n, "rest");
    free(rest);
    t->c->heartbeat_s = 2;
    mc_barrier(t->c, t->c->world);
    if (t->rank == who) return 0;
    if (t->rank != (who + 1) % t->size) sleep(4); /* its successor waits for them meanwhile */
    float x = 1;
    mc_all_reduce(t->c, g, &x, 1, MC_DT_F32, MC_OP_SUM);
    return x == (float)(t->size - 1) ? 0 : 1;
}

static int fault(T *t, const char *mode, int who, bool ring_only)
{
    t->c->heartbeat_ring_only = ring_only;
    if (strcmp(mode, "finish") == 0) return finish_early(t, who);
    mc_barrier(t->c, t->c->world); /* everyone is up before the fault */
    bool p2p = strncmp(mode, "p2p", 3) == 0;
    if (strcmp(mode, "sleep") == 0 || strcmp(mode, "p2psleep") == 0) t->c->timeout_s = 2;
    if (strcmp(mode, "stop") == 0 || strcmp(mode, "slow") == 0) t->c->timeout_s = 60, t->c->heartbeat_s = 2;
    if (strcmp(mode, "slow") == 0) return slow_peer(t, who);
#ifdef MC_TEST_FAKE_NCCL
    if (strcmp(mode, "asyncerr") == 0) { /* rank `who` waits in an all-reduce the others never join */
        t->c->timeout_s = 60;
        if (t->rank == who) {
            fake_nccl_fail_async();
            float x = 1;
            mc_all_reduce(t->c, t->c->world, &x, 1, MC_DT_F32, MC_OP_SUM);
            fprintf(stderr, "rank %d: the all-reduce with an asynchronous NCCL error returned\n", t->rank);
        } else {
            sleep(60);
        }
        return 3;
    }
#endif
    if (t->rank == who) {
        if (strcmp(mode, "die") == 0 || strcmp(mode, "p2pdie") == 0) raise(SIGKILL);
        if (strcmp(mode, "stop") == 0) raise(SIGSTOP);
        if (strcmp(mode, "sleep") == 0 || strcmp(mode, "p2psleep") == 0) sleep(60);
        if (strcmp(mode, "fatal") == 0) mc_fatal("test failure on purpose");
        float one = 1;
        if (strcmp(mode, "p2pself") == 0)
            mc_p2p_batch(t->c, t->c->world,
                         &(mc_p2p_t){.is_send = 1, .peer = t->rank, .buf = &one, .count = 1}, 1);
        if (strcmp(mode, "a2aself") == 0) { /* sends 2 elements to itself, expects 3 */
            size_t two = 2, three = 3;
            float in[3];
            mc_all_to_all_v(t->c, t->c->world, (float[2]){1, 2}, &two, NULL, in, &three, NULL, MC_DT_F32);
        }
        if (strcmp(mode, "p2ppeer") == 0)
            mc_p2p_batch(t->c, t->c->world, &(mc_p2p_t){.is_send = 1, .peer = 1, .buf = &one, .count = 1}, 1);
    }
    if (strcmp(mode, "p2pshort") == 0 && t->size > 1 && (t->rank == who || t->rank == (who + 1) % t->size)) {
        float buf[10] = {0};
        bool recv = t->rank == who;
        mc_p2p_t op = {.is_send = !recv, .peer = recv ? (who + 1) % t->size : who, .buf = buf,
                       .count = recv ? 5 : 10};
        mc_p2p_batch(t->c, t->c->world, &op, 1);
        mc_barrier(t->c, t->c->world);
        fprintf(stderr, "rank %d: the mismatched p2p batch returned\n", t->rank);
        return 3;
    }
    if (p2p) {
        /* rank who+1 waits for rank who in a p2p batch; the others stay out of MPI */
        if (t->rank == (who + 1) % t->size) {
            float out = 1, in = 0;
            mc_p2p_t ops[2] = {{1, who, &out, 1, MC_DT_F32}, {0, who, &in, 1, MC_DT_F32}};
            mc_p2p_batch(t->c, t->c->world, ops, 2);
            fprintf(stderr, "rank %d: the p2p batch after the fault returned\n", t->rank);
        } else {
            sleep(60);
        }
        return 3;
    }
    float x = 1;
    mc_all_reduce(t->c, t->c->world, &x, 1, MC_DT_F32, MC_OP_SUM);
    fprintf(stderr, "rank %d: the all-reduce after the fault returned\n", t->rank);
    return 3;
}

int main(int argc, char **argv)
{
    mc_runtime_t rt;
    char err[512];
    if (mc_runtime_init(&rt, err, sizeof(err)) != 0) {
        fprintf(stderr, "test_comm_mpi: %s\n", err);
        return 2;
    }
    /* "late R": rank R arrives 30 s late at the start-up exchange, which waits 2 s at most */
    const bool late = argc == 3 && strcmp(argv[1], "late") == 0;
    if (late && rt.rank == atoi(argv[2])) sleep(30);
    if (mc_runtime_connect(&rt, late ? 2 : 60, err, sizeof(err)) != 0) {
        fprintf(stderr, "test_comm_mpi: rank %d: %s\n", rt.rank, err);
        return 1;
    }
    if (late) {
        fprintf(stderr, "test_comm_mpi: rank %d: the late start was not caught\n", rt.rank);
        return 3;
    }
    setenv("MC_MPI_CHUNK_ELEMS", "1000000", 0);
    mc_env_load(); /* the knobs are read once: after setting them */
#ifdef MC_TEST_FAKE_NCCL
    setenv("MC_NCCL_STAGE_BYTES", "65536", 0);
    mc_env_load(); /* the knobs are read once: after setting them */
    const mc_backend_t *be = fake_backend();
    g_compute = mc_cuda_backend_stream(be);
    mc_comm_t *c = mc_comm_nccl(&rt, be, 60, err, sizeof(err));
    const char *want_name = "nccl";
#else
    mc_comm_t *c = rt.launched ? mc_comm_mpi(&rt, err, sizeof(err)) : mc_comm_single();
    const char *want_name = rt.launched ? "mpi" : "single";
#endif
    if (!c) {
        fprintf(stderr, "test_comm_mpi: rank %d: %s\n", rt.rank, err);
        return 2;
    }
    T t = {.c = c, .rt = &rt, .rank = c->rank, .size = c->size};
    if (argc == 3 || argc == 4) {
        int rc = fault(&t, argv[1], atoi(argv[2]), argc == 4 && strcmp(argv[3], "ring") == 0);
        if (rc == 0) { /* a mode that must not end the job ("slow", "finish") ends as a job does */
            c->finalize(c);
#ifdef MC_TEST_FAKE_NCCL
            fake_finalize();
#endif
            mc_runtime_finalize(&rt);
        }
        return rc;
    }
    if (t.size > 8) mc_fatal("this test expects at most 8 ranks");

    report(&t, strcmp(c->name, want_name) != 0 || (!strcmp(want_name, "single") && mc_comm_single() != c),
           "communicator '%s' over %d rank(s)", c->name, c->size);
    check_runtime(&t);
    mc_group_t *g[NGROUPS];
    make_groups(&t, g);
    for (int k = 0; k < NGROUPS; k++) {
        check_all_reduce(&t, g[k], GROUP_NAMES[k]);
        check_reduce_scatter(&t, g[k], GROUP_NAMES[k]);
        check_all_gather(&t, g[k], GROUP_NAMES[k]);
        check_broadcast_barrier(&t, g[k], GROUP_NAMES[k]);
    }
    check_async(&t, g);
    check_many_in_flight(&t);
    check_big(&t);
    for (int k = 0; k < NGROUPS; k++) check_p2p_ring(&t, g[k], GROUP_NAMES[k]);
    check_p2p_pipeline(&t, g[G_STRIDED], "strided (pp-like)");
    check_p2p_pipeline(&t, g[G_WORLD], "world");
    check_p2p_same_peer(&t, g[G_PAIR], GROUP_NAMES[G_PAIR]);
    check_p2p_same_peer(&t, g[G_ENDS], GROUP_NAMES[G_ENDS]);
    check_p2p_async(&t, g);
    check_p2p_zero(&t, g[G_WORLD]);
    check_p2p_big(&t, g[G_WORLD]);
    for (int k = 0; k < NGROUPS; k++) check_all_to_all_v(&t, g[k], GROUP_NAMES[k]);
    check_counters_and_empty(&t, g);
#ifdef MC_TEST_FAKE_NCCL
    check_nccl_device(&t, g); /* NCCL stages host buffers itself: no devmem */
#else
    check_staged(&t, g);
#endif
    for (int k = 1; k < NGROUPS; k++) c->group_free(c, g[k]);
    report(&t, 0, "group_free");

    int failed = t.failed;
    c->finalize(c);
#ifdef MC_TEST_FAKE_NCCL
    fake_finalize();
#endif
    mc_runtime_finalize(&rt);
    return failed ? 1 : 0;
}
