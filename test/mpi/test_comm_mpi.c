/* Multi-rank test of the runtime and the comm interface (parallel/runtime.h, parallel/comm.h).
 * Under a launcher (mpirun, srun --mpi=pmix) it uses the MPI communicator, alone the
 * single-rank one; the checks are the same and every expected value is exact.
 *
 *   test_comm_mpi             every check; rank 0 prints one TAP line per check
 *   test_comm_mpi die R       rank R kills itself (SIGKILL) before an all-reduce on the world
 *   test_comm_mpi sleep R     rank R sleeps past a 2 s timeout before an all-reduce on the world
 *   test_comm_mpi fatal R     rank R calls mc_fatal while the others wait in an all-reduce
 *
 * A check fails when it fails on any rank (failures are combined with an all-reduce MAX); the
 * exit status is 0 iff this rank saw no failure. */
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/error.h"
#include "parallel/comm.h"
#include "parallel/runtime.h"

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

static const mc_dtype_t ALL_DT[] = {MC_DT_F32, MC_DT_F64, MC_DT_I64, MC_DT_I32, MC_DT_U8};
static const char *dt_name(mc_dtype_t dt)
{
    static const char *names[] = {"f32", "f64", "i64", "i32", "u8"};
    return names[dt];
}

static double value(mc_dtype_t dt, int rank, size_t i)
{
    double base = (double)(((size_t)rank * 37 + i * 11 + 5) % 61);
    switch (dt) {
    case MC_DT_F32: return base - 30 + rank * 1000;
    case MC_DT_F64: return base - 30 + rank * 0.25;
    case MC_DT_I64: return (double)((int64_t)rank << 35) + base - 30;
    case MC_DT_I32: return base - 30 + rank * 100000;
    case MC_DT_U8: return (double)((int)base % 32);
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

enum { G_WORLD, G_PAIR, G_STRIDED, G_EVEN, G_ENDS, NGROUPS };
static const char *GROUP_NAMES[NGROUPS] = {"world", "pair", "strided", "even", "ends"};

/* Each kind as Megatron would list it: pairs {2k, 2k+1} (tp-like), stride 2 (dp-like with tp=2),
 * only the even ranks (the odd ones are in no group: n = 0), and the first and last rank
 * (embedding-like). */
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
        report(t, bad, "all-reduce %s (f32 f64 i64 i32 u8) on the %s group", op == MC_OP_SUM ? "sum" : "max",
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
        }
        report(t, bad, "reduce-scatter %s (f32 sum, i64 max, f64 sum) on the %s group",
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
        }
        report(t, bad, "all-gather %s (f32 i32 u8) on the %s group", in_place ? "in place" : "out of place",
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

static void check_counters_and_empty(T *t)
{
    mc_comm_t *c = t->c;
    uint64_t calls[MC_COLL_KINDS], bytes[MC_COLL_KINDS];
    memcpy(calls, c->calls, sizeof(calls));
    memcpy(bytes, c->bytes, sizeof(bytes));
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
    uint64_t n = (uint64_t)t->size;
    uint64_t want_bytes[MC_COLL_KINDS] = {40, 5 * 8 * n, 3 * 4 * n, 7, 0};
    int bad = 0;
    for (int k = 0; k < MC_COLL_KINDS; k++) {
        if (c->calls[k] - calls[k] != 1 || c->bytes[k] - bytes[k] != want_bytes[k]) {
            fprintf(stderr, "rank %d: %s: %llu calls, %llu bytes; expected 1 call, %llu bytes\n", t->rank,
                    mc_coll_name((mc_coll_kind_t)k), (unsigned long long)(c->calls[k] - calls[k]),
                    (unsigned long long)(c->bytes[k] - bytes[k]), (unsigned long long)want_bytes[k]);
            bad = 1;
        }
    }
    report(t, bad, "volume counters: calls and bytes per kind");

    mc_all_reduce(c, c->world, f, 0, MC_DT_F32, MC_OP_SUM);
    mc_all_gather(c, c->world, mine, gi, 0, MC_DT_I32);
    report(t, 0, "collectives of zero elements return");
}

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
}

/* ---- fault modes ---- */

static int fault(T *t, const char *mode, int who)
{
    mc_barrier(t->c, t->c->world); /* everyone is up before the fault */
    if (strcmp(mode, "sleep") == 0) t->c->timeout_s = 2;
    if (t->rank == who) {
        if (strcmp(mode, "die") == 0) raise(SIGKILL);
        if (strcmp(mode, "sleep") == 0) sleep(60);
        if (strcmp(mode, "fatal") == 0) mc_fatal("test failure on purpose");
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
    setenv("MC_MPI_CHUNK_ELEMS", "1000000", 0);
    mc_comm_t *c = rt.launched ? mc_comm_mpi(&rt, err, sizeof(err)) : mc_comm_single();
    if (!c) {
        fprintf(stderr, "test_comm_mpi: rank %d: %s\n", rt.rank, err);
        return 2;
    }
    T t = {.c = c, .rt = &rt, .rank = c->rank, .size = c->size};
    if (argc == 3) return fault(&t, argv[1], atoi(argv[2]));
    if (t.size > 8) mc_fatal("this test expects at most 8 ranks");

    report(&t,
           strcmp(c->name, rt.launched ? "mpi" : "single") != 0 || (!rt.launched && mc_comm_single() != c),
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
    check_counters_and_empty(&t);
    for (int k = 1; k < NGROUPS; k++) c->group_free(c, g[k]);
    report(&t, 0, "group_free");

    int failed = t.failed;
    c->finalize(c);
    mc_runtime_finalize(&rt);
    return failed ? 1 : 0;
}
