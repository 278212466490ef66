/* The MPI communicator (DESIGN decision 3): host buffers, collectives on one communication
 * thread per process. With the cuda backend (pub.devmem set) device buffers are staged: start()
 * copies them to pinned host memory after the compute stream's work (a synchronous copy), the
 * collective runs on the copy, and wait() copies the results back before it returns, for every
 * staged collective it completes (staging happens on the caller's thread only). Several ranks
 * can so share one GPU.
 *
 * P2P batches (Megatron's batch_isend_irecv) are entries of the same queue: the comm thread
 * posts every MPI_Isend/MPI_Irecv of the batch, in the given order and with one tag, then polls
 * them all together. MPI matches messages between two ranks on one communicator in the order
 * they were posted (non-overtaking), which is NCCL's per-pair issue order; point-to-point
 * traffic never meets the collectives (MPI keeps them apart on the same communicator).
 *
 * Threading: start() puts the collective in a FIFO and returns a ticket; the comm thread
 * (started at the first start()) posts the non-blocking MPI call and polls it, so the caller
 * computes meanwhile, and it can bound every collective by timeout_s and notice dead peers on
 * this node. Only one thread is ever inside MPI: the comm thread while it runs collectives, the
 * caller's thread otherwise (init, group creation and finalize first drain the queue, so the
 * comm thread is idle then). MPI_THREAD_SERIALIZED is therefore enough.
 *
 * Errors: MPI returns error codes (MPI_ERRORS_RETURN) and we turn them into one line naming the
 * rank, then abort the job. The comm thread must not exit() (atexit handlers and MPI's own
 * finalisation could deadlock with the caller's thread), so it prints and calls MPI_Abort. */
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
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
#include "comm/comm.h"
#include "comm/comm_watch.h"
#include "comm/heartbeat.h"
#include "comm/runtime.h"
#include "comm/staging.h"

enum { QUEUE_CAP = 1024 };
/* MPI_Test calls before yielding between polls; also how often the clock is read for the timeout
 * and liveness checks */
#define SPIN_TESTS 64
#define NAP_AFTER_S 0.5 /* a wait this long naps between polls (the peers are elsewhere) */
#define NAP_MIN_S 10e-6 /* naps start here and grow by NAP_SLOPE s per s of waiting */
#define NAP_SLOPE 2e-3
#define NAP_MAX_S 1e-3
#define CHUNK_MAX_BYTES (1L << 30) /* all-reduce/broadcast pieces; MPI counts are int */
#define RSAG_MAX_COUNT (INT_MAX / 2)
#define P2P_TAG 0

typedef struct {
    mc_coll_t op;
    int64_t ticket;
    double timeout_s;   /* c->timeout_s when started: the comm thread never reads c's fields */
    double heartbeat_s; /* c->heartbeat_s when started */
    bool ring_only;     /* c->heartbeat_ring_only when started */
    mc_p2p_t *p2p;      /* P2P: start()'s copy of op.p2p (op.p2p points at it), freed when run */
    size_t *a2av; /* ALL_TO_ALL_V: start()'s copy of the counts and displacements (filled in when
                     packed; op's four pointers point into it), freed when run */
} job_t;

typedef struct {
    MPI_Comm comm;
} group_impl_t;

typedef struct {
    mc_comm_t pub; /* first: an mc_comm_t * is an mpi_comm_t * */
    mc_runtime_t *rt;
    MPI_Group world_group;

    /* The queue. Ticket t lives in ring[(t - 1) % QUEUE_CAP]. */
    pthread_mutex_t mu;
    pthread_cond_t work, space, done;
    job_t ring[QUEUE_CAP];
    int64_t issued, taken, completed;
    bool stop, thread_on;
    pthread_t thread;

    /* Held by whichever thread is inside MPI, so abort() from the caller's thread waits for
     * the comm thread to leave MPI_Test (briefly) instead of racing it. */
    pthread_mutex_t mpi_mu;

    /* Comm thread only. */
    void *scratch; /* reduce-scatter result when recv lies inside send */
    size_t scratch_cap;
    size_t chunk_elems; /* 0: by CHUNK_MAX_BYTES; MC_MPI_CHUNK_ELEMS lowers it (tests) */
    MPI_Request *reqs;  /* a p2p batch's requests and their statuses */
    MPI_Status *stats;
    size_t reqs_cap;

    mc_watch_t w;           /* the peers (dead, stopped, silent), checked by the comm thread */
    mc_group_list_t groups; /* live groups, freed at finalize */

    mc_host_stage_t stage; /* device buffers (pub.devmem set), caller's thread only */
} mpi_comm_t;

static mpi_comm_t *g_mpi; /* for mc_fatal's abort hook */

/* ---- dying ---- */

/* Prints "megatron-c: rank R: error: ..." and ends the job. Safe on the comm thread. */
__attribute__((noreturn, format(printf, 2, 3))) static void comm_die(mpi_comm_t *mc,
                                                                     const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    mc_watch_error_line(line, sizeof(line), mc->pub.rank, fmt, ap);
    va_end(ap);
    fflush(stdout);
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    mc_runtime_abort(mc->rt, 1, line); /* only if MPI_Abort returned */
}

static const char *mpi_errstr(int rc, char buf[MPI_MAX_ERROR_STRING])
{
    int len = 0;
    if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS)
        snprintf(buf, MPI_MAX_ERROR_STRING, "MPI error %d", rc);
    return buf;
}

static void check_job_rc(mpi_comm_t *mc, const job_t *j, const char *call, int rc)
{
    if (rc == MPI_SUCCESS) return;
    char buf[MPI_MAX_ERROR_STRING], what[128];
    int cls = MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    bool mismatch = j->op.kind == MC_COLL_P2P_BATCH && cls == MPI_ERR_TRUNCATE;
    comm_die(
        mc, "%s failed in %s on the %s group of %d ranks: %s%s", call,
        mc_coll_what(&j->op, what, sizeof(what)), j->op.group->name, j->op.group->size,
        mpi_errstr(rc, buf),
        mismatch
            ? " (a receive is shorter than the message matched to it: the ranks' p2p batches do "
              "not match in order, count or type)"
            : "");
}

static void mpi_abort_comm(mc_comm_t *c, int code)
{
    mpi_comm_t *mc = (mpi_comm_t *)c;
    fflush(stdout);
    fflush(stderr);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2; /* the comm thread may be stuck inside a blocking call: go on anyway */
    pthread_mutex_timedlock(&mc->mpi_mu, &until);
    MPI_Abort(MPI_COMM_WORLD, code);
    _exit(code);
}

/* ---- liveness of peers on this node ---- */

/* The peers a job waits on (the whole group for a collective, the distinct peers of a p2p
 * batch): one that died, or that has been stopped for the job's heartbeat_s, ends the job. A dead
 * peer's message names the kind of collective, a stopped one's the collective. */
static void check_peers(mpi_comm_t *mc, const job_t *j)
{
    if (j->ring_only) return;
    const mc_group_t *g = j->op.group;
    char died[160], stopped[160], what[128], line[768];
    snprintf(died, sizeof(died), "%s on the %s group", mc_coll_name(j->op.kind), g->name);
    snprintf(stopped, sizeof(stopped), "%s on the %s group",
             mc_coll_what(&j->op, what, sizeof(what)), g->name);
    bool bad = false;
    if (j->op.kind != MC_COLL_P2P_BATCH)
        bad = mc_watch_peers(&mc->w, g->members, g->size, j->heartbeat_s, died, stopped, line,
                             sizeof(line));
    for (int i = 0, m; !bad && j->op.kind == MC_COLL_P2P_BATCH && (m = mc_p2p_peer(&j->op, i)) >= 0;
         i++)
        bad = mc_watch_peers(&mc->w, &m, 1, j->heartbeat_s, died, stopped, line, sizeof(line));
    if (bad) comm_die(mc, "%s", line);
}

/* The heartbeat ring (comm/heartbeat.h), idle (j NULL: beats only) or waiting in job j (its
 * predecessor judged by the job's heartbeat_s), in the words of check_peers' messages. */
static void ring_tick(mpi_comm_t *mc, const job_t *j)
{
    if (mc_now_s() < mc->w.next_beat) return;
    char gone[160] = "", during[160] = "", what[128], line[768];
    if (j) {
        snprintf(gone, sizeof(gone), "%s on the %s group", mc_coll_name(j->op.kind),
                 j->op.group->name);
        snprintf(during, sizeof(during), "%s on the %s group",
                 mc_coll_what(&j->op, what, sizeof(what)), j->op.group->name);
    }
    if (mc_watch_ring(&mc->w, j ? j->heartbeat_s : 0, gone, during, line, sizeof(line)))
        comm_die(mc, "%s", line);
}

/* How long to sleep before the next poll of a wait that has been idle for `idle` seconds: not
 * at all at first (MPI moves data only inside MPI_Test, see progress_all), then a nap growing
 * with the wait, up to NAP_MAX_S, so a rank waiting seconds for a peer (a straggler, a
 * checkpoint save, a stopped rank) leaves its core alone. */
static long nap_ns(double idle)
{
    if (idle < NAP_AFTER_S) return 0;
    double s = (idle - NAP_AFTER_S) * NAP_SLOPE;
    return (long)((s < NAP_MIN_S ? NAP_MIN_S : s > NAP_MAX_S ? NAP_MAX_S : s) * 1e9);
}

/* Polls posted requests until all are complete (one with MPI_Test; several with MPI_Testall
 * into stats, whose first error is the one reported): spin briefly (fast collectives), then poll
 * yielding the core. Enforces the job's timeout and checks peers about once a second. */
static void progress_all(mpi_comm_t *mc, const job_t *j, int n, MPI_Request *reqs,
                         MPI_Status *stats, double t0)
{
    double next_check = t0 + MC_WATCH_PERIOD_S, t1 = mc_now_s(); /* t1: this wait's start */
    long nap = 0;
    for (int polls = 0;; polls++) {
        int flag = 0;
        pthread_mutex_lock(&mc->mpi_mu);
        int rc =
            stats ? MPI_Testall(n, reqs, &flag, stats) : MPI_Test(reqs, &flag, MPI_STATUS_IGNORE);
        pthread_mutex_unlock(&mc->mpi_mu);
        for (int i = 0; stats && rc == MPI_ERR_IN_STATUS && i < n; i++)
            if (stats[i].MPI_ERROR != MPI_SUCCESS && stats[i].MPI_ERROR != MPI_ERR_PENDING)
                rc = stats[i].MPI_ERROR;
        check_job_rc(mc, j, stats ? "MPI_Testall" : "MPI_Test", rc);
        if (flag) return;
        if (polls < SPIN_TESTS) continue;
        /* MPI moves data only inside MPI_Test (shared-memory fragments of a few KB), so the
         * thread keeps polling, as MPI_Wait would, but yields the core between polls to any
         * thread that can compute: this rank's own, or other ranks' when they share cores.
         * (Sleeping between polls made a 67 MB all-reduce over 4 ranks on 2 cores 5x slower.)
         * Only a wait idle for NAP_AFTER_S naps instead. */
        if (nap) nanosleep(&(struct timespec){.tv_nsec = nap}, NULL);
        else sched_yield();
        if (polls % SPIN_TESTS && !nap) continue;
        double t = mc_now_s();
        nap = nap_ns(t - t1);
        if (j->timeout_s > 0 && t - t0 > j->timeout_s) {
            char what[128], line[512];
            mc_watch_timeout_line(line, sizeof(line), j->timeout_s,
                                  mc_coll_what(&j->op, what, sizeof(what)), j->op.group);
            comm_die(mc, "%s", line);
        }
        if (t >= next_check) {
            check_peers(mc, j);
            next_check = t + MC_WATCH_PERIOD_S;
        }
        ring_tick(mc, j);
    }
}

static void progress(mpi_comm_t *mc, const job_t *j, MPI_Request *req, double t0)
{
    progress_all(mc, j, 1, req, NULL, t0);
}

/* ---- running one collective (comm thread) ---- */

static MPI_Datatype mpi_dtype(mc_dtype_t dt)
{
    switch (dt) {
    case MC_DT_F32: return MPI_FLOAT;
    case MC_DT_F64: return MPI_DOUBLE;
    case MC_DT_I64: return MPI_INT64_T;
    case MC_DT_I32: return MPI_INT32_T;
    case MC_DT_U8: return MPI_UINT8_T;
    case MC_DT_BF16:
    case MC_DT_F16: return MPI_UINT16_T; /* reduced by the user ops below */
    }
    return MPI_DATATYPE_NULL;
}

/* MPI has no 16-bit float types: sums and maxima of bf16/fp16 buffers are user ops that add in
 * fp32 and round each partial result to the 16-bit type, as a reduction kernel on the GPU does. */
static void reduce16(const void *in, void *inout, int n, mc_dtype_t dt, bool max)
{
    for (int i = 0; i < n; i++) {
        float a = mc_load_f32(in, dt, i), b = mc_load_f32(inout, dt, i);
        mc_store_f32(inout, dt, i, max ? (a > b || a != a ? a : b) : a + b);
    }
}
static void bf16_sum(void *in, void *io, int *n, MPI_Datatype *t)
{
    (void)t, reduce16(in, io, *n, MC_DT_BF16, false);
}
static void bf16_max(void *in, void *io, int *n, MPI_Datatype *t)
{
    (void)t, reduce16(in, io, *n, MC_DT_BF16, true);
}
static void f16_sum(void *in, void *io, int *n, MPI_Datatype *t)
{
    (void)t, reduce16(in, io, *n, MC_DT_F16, false);
}
static void f16_max(void *in, void *io, int *n, MPI_Datatype *t)
{
    (void)t, reduce16(in, io, *n, MC_DT_F16, true);
}

static MPI_Op g_op16[2][2]; /* [bf16, fp16][sum, max], made once after MPI_Init */

static int make_ops16(void)
{
    MPI_User_function *f[2][2] = {{bf16_sum, bf16_max}, {f16_sum, f16_max}};
    for (int t = 0; t < 2; t++)
        for (int k = 0; k < 2; k++)
            if (MPI_Op_create(f[t][k], 1, &g_op16[t][k]) != MPI_SUCCESS) return -1;
    return 0;
}

static MPI_Op mpi_op(mc_redop_t op, mc_dtype_t dt)
{
    if (mc_dtype_is_16bit(dt)) return g_op16[dt == MC_DT_F16][op == MC_OP_MAX];
    return op == MC_OP_MAX ? MPI_MAX : MPI_SUM;
}

static MPI_Comm group_comm(const mc_group_t *g) { return ((group_impl_t *)g->impl)->comm; }

static size_t chunk_elems(const mpi_comm_t *mc, mc_dtype_t dt)
{
    size_t n = (size_t)CHUNK_MAX_BYTES / mc_dtype_size(dt);
    if (n > (size_t)(INT_MAX / 2)) n = INT_MAX / 2;
    if (mc->chunk_elems && mc->chunk_elems < n) n = mc->chunk_elems;
    return n;
}

/* All-reduce and broadcast in pieces of at most chunk_elems elements, one after the other. */
static void run_chunked(mpi_comm_t *mc, const job_t *j, double t0)
{
    const mc_coll_t *o = &j->op;
    size_t es = mc_dtype_size(o->dt), step = chunk_elems(mc, o->dt);
    bool out_of_place = o->kind == MC_COLL_ALL_REDUCE && o->send && o->send != o->recv;
    for (size_t off = 0; off < o->count; off += step) {
        int n = (int)(o->count - off < step ? o->count - off : step);
        char *buf = (char *)o->recv + off * es;
        MPI_Request req;
        int rc;
        pthread_mutex_lock(&mc->mpi_mu);
        if (o->kind == MC_COLL_BROADCAST)
            rc = MPI_Ibcast(buf, n, mpi_dtype(o->dt), o->root, group_comm(o->group), &req);
        else
            rc = MPI_Iallreduce(out_of_place ? (const char *)o->send + off * es : MPI_IN_PLACE, buf,
                                n, mpi_dtype(o->dt), mpi_op(o->op, o->dt), group_comm(o->group),
                                &req);
        pthread_mutex_unlock(&mc->mpi_mu);
        check_job_rc(mc, j, o->kind == MC_COLL_BROADCAST ? "MPI_Ibcast" : "MPI_Iallreduce", rc);
        progress(mc, j, &req, t0);
    }
}

static void *scratch(mpi_comm_t *mc, const job_t *j, size_t bytes)
{
    if (bytes <= mc->scratch_cap) return mc->scratch;
    void *p = realloc(mc->scratch, bytes);
    if (!p)
        comm_die(mc, "out of memory for a %zu-byte %s buffer on the %s group", bytes,
                 mc_coll_name(j->op.kind), j->op.group->name);
    mc->scratch = p, mc->scratch_cap = bytes;
    return p;
}

static void run_reduce_scatter(mpi_comm_t *mc, const job_t *j, double t0)
{
    const mc_coll_t *o = &j->op;
    size_t bytes = o->count * mc_dtype_size(o->dt);
    uintptr_t s = (uintptr_t)o->send, r = (uintptr_t)o->recv;
    /* MPI forbids recv aliasing send; NCCL allows the shard in place, so reduce into scratch */
    bool aliased = r + bytes > s && r < s + bytes * (size_t)o->group->size;
    void *out = aliased ? scratch(mc, j, bytes) : o->recv;
    MPI_Request req;
    pthread_mutex_lock(&mc->mpi_mu);
    int rc = MPI_Ireduce_scatter_block(o->send, out, (int)o->count, mpi_dtype(o->dt),
                                       mpi_op(o->op, o->dt), group_comm(o->group), &req);
    pthread_mutex_unlock(&mc->mpi_mu);
    check_job_rc(mc, j, "MPI_Ireduce_scatter_block", rc);
    progress(mc, j, &req, t0);
    if (aliased) memcpy(o->recv, out, bytes);
}

static void run_all_gather(mpi_comm_t *mc, const job_t *j, double t0)
{
    const mc_coll_t *o = &j->op;
    size_t bytes = o->count * mc_dtype_size(o->dt);
    bool in_place = (uintptr_t)o->send == (uintptr_t)o->recv + (size_t)o->group->rank * bytes;
    MPI_Datatype dt = mpi_dtype(o->dt);
    MPI_Request req;
    pthread_mutex_lock(&mc->mpi_mu);
    int rc = MPI_Iallgather(in_place ? MPI_IN_PLACE : o->send, (int)o->count, dt, o->recv,
                            (int)o->count, dt, group_comm(o->group), &req);
    pthread_mutex_unlock(&mc->mpi_mu);
    check_job_rc(mc, j, "MPI_Iallgather", rc);
    progress(mc, j, &req, t0);
}

static void run_barrier(mpi_comm_t *mc, const job_t *j, double t0)
{
    MPI_Request req;
    pthread_mutex_lock(&mc->mpi_mu);
    int rc = MPI_Ibarrier(group_comm(j->op.group), &req);
    pthread_mutex_unlock(&mc->mpi_mu);
    check_job_rc(mc, j, "MPI_Ibarrier", rc);
    progress(mc, j, &req, t0);
}

/* Every send and receive of the batch posted in order (in pieces of at most chunk_elems, so
 * both sides cut a message alike), then all polled together. */
static void run_p2p(mpi_comm_t *mc, const job_t *j, double t0)
{
    const mc_coll_t *o = &j->op;
    size_t nreq = 0;
    for (int i = 0; i < o->n_p2p; i++) {
        size_t step = chunk_elems(mc, o->p2p[i].dt), c = o->p2p[i].count;
        nreq += c ? (c + step - 1) / step : 1;
    }
    if (nreq > (size_t)INT_MAX)
        comm_die(mc, "p2p batch of %zu messages on the %s group is more than MPI can wait for",
                 nreq, o->group->name);
    if (nreq > mc->reqs_cap) {
        MPI_Request *p = realloc(mc->reqs, nreq * sizeof(*p));
        if (p) mc->reqs = p;
        MPI_Status *st = p ? realloc(mc->stats, nreq * sizeof(*st)) : NULL;
        if (!st) comm_die(mc, "out of memory for a p2p batch of %zu messages", nreq);
        mc->stats = st, mc->reqs_cap = nreq;
    }
    MPI_Comm comm = group_comm(o->group);
    size_t k = 0;
    pthread_mutex_lock(&mc->mpi_mu);
    for (int i = 0; i < o->n_p2p; i++) {
        const mc_p2p_t *p = &o->p2p[i];
        size_t es = mc_dtype_size(p->dt), step = chunk_elems(mc, p->dt), off = 0;
        do {
            int n = (int)(p->count - off < step ? p->count - off : step);
            char *buf = p->count ? (char *)p->buf + off * es : p->buf;
            int rc =
                p->is_send
                    ? MPI_Isend(buf, n, mpi_dtype(p->dt), p->peer, P2P_TAG, comm, &mc->reqs[k])
                    : MPI_Irecv(buf, n, mpi_dtype(p->dt), p->peer, P2P_TAG, comm, &mc->reqs[k]);
            if (rc != MPI_SUCCESS) pthread_mutex_unlock(&mc->mpi_mu);
            check_job_rc(mc, j, p->is_send ? "MPI_Isend" : "MPI_Irecv", rc);
            k++, off += (size_t)n;
        } while (off < p->count);
    }
    pthread_mutex_unlock(&mc->mpi_mu);
    progress_all(mc, j, (int)k, mc->reqs, mc->stats, t0);
}

/* MPI_Ialltoallv with int counts and displacements (validate bounded them). */
static void run_all_to_all_v(mpi_comm_t *mc, const job_t *j, double t0)
{
    const mc_coll_t *o = &j->op;
    int n = o->group->size, *v = malloc(4 * (size_t)n * sizeof(int));
    if (!v) comm_die(mc, "out of memory for an all-to-all on the %s group", o->group->name);
    for (int r = 0; r < n; r++) {
        v[r] = (int)o->send_counts[r], v[n + r] = (int)o->send_displs[r];
        v[2 * n + r] = (int)o->recv_counts[r], v[3 * n + r] = (int)o->recv_displs[r];
    }
    MPI_Datatype dt = mpi_dtype(o->dt);
    MPI_Request req;
    pthread_mutex_lock(&mc->mpi_mu);
    int rc = MPI_Ialltoallv(o->send, v, v + n, dt, o->recv, v + 2 * n, v + 3 * n, dt,
                            group_comm(o->group), &req);
    pthread_mutex_unlock(&mc->mpi_mu);
    check_job_rc(mc, j, "MPI_Ialltoallv", rc);
    progress(mc, j, &req, t0);
    free(v);
}

static void run_job(mpi_comm_t *mc, const job_t *j)
{
    double t0 = mc_now_s();
    switch (j->op.kind) {
    case MC_COLL_ALL_REDUCE:
    case MC_COLL_BROADCAST: run_chunked(mc, j, t0); break;
    case MC_COLL_REDUCE_SCATTER: run_reduce_scatter(mc, j, t0); break;
    case MC_COLL_ALL_GATHER: run_all_gather(mc, j, t0); break;
    case MC_COLL_BARRIER: run_barrier(mc, j, t0); break;
    case MC_COLL_P2P_BATCH: run_p2p(mc, j, t0); break;
    case MC_COLL_ALL_TO_ALL_V: run_all_to_all_v(mc, j, t0); break;
    case MC_COLL_KINDS: break;
    }
}

static bool idle(void *arg)
{
    const mpi_comm_t *mc = arg;
    return !mc->stop && mc->taken == mc->issued;
}

static void *comm_thread(void *arg)
{
    mpi_comm_t *mc = arg;
    pthread_mutex_lock(&mc->mu);
    for (;;) {
        /* idle (the caller computes, evaluates, saves): keep beating */
        mc_watch_idle(&mc->w, &mc->mu, &mc->work, idle, mc);
        if (mc->taken == mc->issued) break; /* stopping, queue drained */
        job_t j = mc->ring[mc->taken % QUEUE_CAP];
        mc->taken++;
        pthread_mutex_unlock(&mc->mu);
        ring_tick(mc, NULL); /* short jobs back to back: beat between them */
        run_job(mc, &j);
        free(j.p2p);
        free(j.a2av);
        pthread_mutex_lock(&mc->mu);
        mc->completed = j.ticket;
        pthread_cond_broadcast(&mc->done);
        pthread_cond_signal(&mc->space);
    }
    pthread_mutex_unlock(&mc->mu);
    return NULL;
}

/* ---- the caller's side ---- */

/* Caller errors, reported on the caller's thread (mc_fatal aborts the job through the hook). */
static void validate(const mc_comm_t *c, const mc_coll_t *o)
{
    mc_coll_validate(c, o);
    bool rsag = o->kind == MC_COLL_REDUCE_SCATTER || o->kind == MC_COLL_ALL_GATHER;
    if (rsag && (o->count > RSAG_MAX_COUNT || o->count * (size_t)o->group->size > (size_t)INT_MAX))
        mc_fatal(
            "%s of %zu elements per rank on the %s group of %d ranks is more than the MPI backend "
            "moves in one call (%d per rank, %d in all; use --distributed-backend nccl or smaller buckets)",
            mc_coll_name(o->kind), o->count, o->group->name, o->group->size, RSAG_MAX_COUNT,
            INT_MAX);
    int n = o->group->size;
    size_t ext = o->kind == MC_COLL_ALL_TO_ALL_V
                     ? mc_a2av_extent(o->send_counts, o->send_displs, n) +
                           mc_a2av_extent(o->recv_counts, o->recv_displs, n)
                     : 0;
    if (ext > (size_t)INT_MAX)
        mc_fatal("all-to-all spanning %zu elements on the %s group is more than the MPI backend "
                 "moves in one call (%d; use --distributed-backend nccl)",
                 ext, o->group->name, INT_MAX);
}

/* The job's own copy of an all-to-all's counts and displacements, packed ones filled in. */
static size_t *copy_a2av(const mc_coll_t *op)
{
    size_t n = (size_t)op->group->size, *v = malloc(4 * n * sizeof(*v));
    if (!v) mc_fatal("out of memory for an all-to-all on the %s group", op->group->name);
    const size_t *in[4] = {op->send_counts, op->send_displs, op->recv_counts, op->recv_displs};
    for (int k = 0; k < 4; k += 2) {
        memcpy(v + k * n, in[k], n * sizeof(*v));
        for (size_t r = 0, at = 0; r < n; at += in[k][r], r++)
            v[(k + 1) * n + r] = in[k + 1] ? in[k + 1][r] : at;
    }
    return v;
}

static void ensure_thread(mpi_comm_t *mc)
{
    if (mc->thread_on) return;
    int rc = pthread_create(&mc->thread, NULL, comm_thread, mc);
    if (rc != 0) mc_fatal("cannot start the communication thread: %s", strerror(rc));
    mc->thread_on = true;
}

static mc_req_t enqueue(mpi_comm_t *mc, const mc_coll_t *op)
{
    job_t job = {.op = *op,
                 .timeout_s = mc->pub.timeout_s,
                 .heartbeat_s = mc->pub.heartbeat_s,
                 .ring_only = mc->pub.heartbeat_ring_only != 0};
    if (op->kind == MC_COLL_P2P_BATCH) {
        size_t bytes = (size_t)op->n_p2p * sizeof(*op->p2p);
        job.p2p = malloc(bytes);
        if (!job.p2p) mc_fatal("out of memory for a p2p batch of %d operations", op->n_p2p);
        memcpy(job.p2p, op->p2p, bytes);
        job.op.p2p = job.p2p;
    }
    if (op->kind == MC_COLL_ALL_TO_ALL_V) {
        size_t n = (size_t)op->group->size;
        job.a2av = copy_a2av(op);
        job.op.send_counts = job.a2av, job.op.send_displs = job.a2av + n;
        job.op.recv_counts = job.a2av + 2 * n, job.op.recv_displs = job.a2av + 3 * n;
    }
    ensure_thread(mc);
    pthread_mutex_lock(&mc->mu);
    while (mc->issued - mc->completed >= QUEUE_CAP) pthread_cond_wait(&mc->space, &mc->mu);
    int64_t t = ++mc->issued;
    job.ticket = t;
    mc->ring[(t - 1) % QUEUE_CAP] = job;
    pthread_cond_signal(&mc->work);
    pthread_mutex_unlock(&mc->mu);
    return t;
}

/* ---- staging device buffers (the cuda backend under --distributed-backend mpi) ---- */

/* When some of op's buffers are device memory: starts op on a pinned copy (comm/staging.h) and
 * returns true with its ticket. The results go back in mpi_wait. */
static bool stage_start(mpi_comm_t *mc, const mc_coll_t *op, mc_req_t *req)
{
    mc_coll_t on_stage;
    mc_p2p_t *p2p;
    if (!mc_host_stage_begin(&mc->stage, mc->pub.devmem, op, &on_stage, &p2p)) return false;
    *req = enqueue(mc, &on_stage); /* copies the p2p operations */
    free(p2p);
    mc_host_stage_started(&mc->stage, *req);
    return true;
}

static mc_req_t mpi_start(mc_comm_t *c, const mc_coll_t *op)
{
    mpi_comm_t *mc = (mpi_comm_t *)c;
    validate(c, op);
    mc_comm_count(c, op);
    /* an all-to-all is collective: a rank with nothing to move still takes part */
    bool none = op->kind == MC_COLL_P2P_BATCH ? op->n_p2p == 0
                                              : op->count == 0 && op->kind != MC_COLL_BARRIER &&
                                                    op->kind != MC_COLL_ALL_TO_ALL_V;
    if (none) return MC_REQ_DONE;
    mc_req_t req;
    if (c->devmem && stage_start(mc, op, &req)) return req;
    return enqueue(mc, op);
}

/* No timeout here: the comm thread bounds every collective and ends the job itself. */
static void mpi_wait(mc_comm_t *c, mc_req_t req)
{
    mpi_comm_t *mc = (mpi_comm_t *)c;
    if (req == MC_REQ_DONE) return;
    pthread_mutex_lock(&mc->mu);
    bool bad = req <= 0 || req > mc->issued;
    while (!bad && mc->completed < req) pthread_cond_wait(&mc->done, &mc->mu);
    pthread_mutex_unlock(&mc->mu);
    if (bad) mc_fatal("wait on collective ticket %lld, which was never started", (long long)req);
    if (mc->stage.n > 0) mc_host_stage_finish(&mc->stage, req);
}

/* Waits for everything started so far: afterwards the comm thread is idle, so this thread
 * may call MPI itself. */
static void drain(mpi_comm_t *mc)
{
    pthread_mutex_lock(&mc->mu);
    int64_t last = mc->issued;
    pthread_mutex_unlock(&mc->mu);
    if (last > 0) mpi_wait(&mc->pub, last);
}

/* ---- groups ---- */

/* The new communicator must hold exactly `members` in that order (a rank that passed another
 * member list would otherwise silently get a different group). */
static int verify_group(mpi_comm_t *mc, MPI_Comm comm, const int *members, int n)
{
    int size = 0;
    MPI_Group g;
    if (MPI_Comm_size(comm, &size) != MPI_SUCCESS || size != n) return -1;
    if (MPI_Comm_group(comm, &g) != MPI_SUCCESS) return -1;
    int *idx = malloc(2 * (size_t)n * sizeof(int)), *world = idx + n, bad = !idx;
    for (int i = 0; !bad && i < n; i++) idx[i] = i;
    if (!bad) bad = MPI_Group_translate_ranks(g, n, idx, mc->world_group, world) != MPI_SUCCESS;
    for (int i = 0; !bad && i < n; i++) bad = world[i] != members[i];
    free(idx);
    MPI_Group_free(&g);
    return bad ? -1 : 0;
}

static mc_group_t *make_group(mpi_comm_t *mc, MPI_Comm comm, const int *members, int n,
                              const char *name)
{
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    mc_group_t *g = mc_group_list_add(&mc->groups, members, n, rank, name, sizeof(group_impl_t));
    if (!g) mc_fatal("out of memory creating group '%s'", name);
    ((group_impl_t *)g->impl)->comm = comm;
    return g;
}

static mc_group_t *mpi_group_new(mc_comm_t *c, const int *members, int n, const char *name)
{
    mpi_comm_t *mc = (mpi_comm_t *)c;
    if (!name) name = "unnamed";
    mc_group_check_members(c->rank, c->size, members, n, name);
    /* MPI_Comm_split blocks without a timeout: first a world barrier through the comm thread,
     * which does watch the clock and the peers, so a rank that died or hangs before group
     * creation ends the job instead of hanging it. Not counted in the volume counters. Being
     * last in the queue, its completion also means the comm thread is idle. */
    mc_coll_t barrier = {.kind = MC_COLL_BARRIER, .group = c->world};
    mpi_wait(c, enqueue(mc, &barrier));
    MPI_Comm comm = MPI_COMM_NULL;
    char buf[MPI_MAX_ERROR_STRING];
    pthread_mutex_lock(&mc->mpi_mu);
    int rc = MPI_Comm_split(group_comm(c->world), n ? members[0] : MPI_UNDEFINED, c->rank, &comm);
    int bad = rc == MPI_SUCCESS && n > 0 ? verify_group(mc, comm, members, n) : 0;
    if (rc == MPI_SUCCESS && n > 0 && !bad) rc = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    pthread_mutex_unlock(&mc->mpi_mu);
    if (rc != MPI_SUCCESS)
        mc_fatal("MPI_Comm_split for the %s group failed: %s", name, mpi_errstr(rc, buf));
    if (bad)
        mc_fatal(
            "the %s group came out different from its %d members starting at rank %d (ranks passed "
            "inconsistent member lists)",
            name, n, members[0]);
    return n ? make_group(mc, comm, members, n, name) : NULL;
}

static void release_group(mpi_comm_t *mc, mc_group_t *g)
{
    group_impl_t *gi = g->impl;
    pthread_mutex_lock(&mc->mpi_mu);
    MPI_Comm_free(&gi->comm);
    pthread_mutex_unlock(&mc->mpi_mu);
    mc_group_destroy(g);
}

static void mpi_group_free(mc_comm_t *c, mc_group_t *g)
{
    mpi_comm_t *mc = (mpi_comm_t *)c;
    if (!g || g == c->world) return; /* the world lives until finalize */
    drain(mc);
    if (!mc_group_list_remove(&mc->groups, g))
        mc_fatal("group_free of a group this communicator did not create");
    release_group(mc, g);
}

/* ---- start-up and shutdown ---- */

static void mpi_finalize(mc_comm_t *c)
{
    mpi_comm_t *mc = (mpi_comm_t *)c;
    drain(mc);
    if (mc->thread_on) {
        pthread_mutex_lock(&mc->mu);
        mc->stop = true;
        pthread_cond_signal(&mc->work);
        pthread_mutex_unlock(&mc->mu);
        pthread_join(mc->thread, NULL);
    }
    /* finished: the successor stops watching this rank before MPI_Finalize (which may wait for
     * ranks still working) */
    mc_heartbeat_bye(mc->rt->heartbeat);
    while (mc->groups.n > 0) release_group(mc, mc->groups.g[--mc->groups.n]);
    MPI_Group_free(&mc->world_group);
    MPI_Finalize();
    mc_comm_abort_through(NULL);
    g_mpi = NULL;
    pthread_mutex_destroy(&mc->mu);
    pthread_mutex_destroy(&mc->mpi_mu);
    pthread_cond_destroy(&mc->work);
    pthread_cond_destroy(&mc->space);
    pthread_cond_destroy(&mc->done);
    mc_host_stage_free(&mc->stage);
    free(mc->groups.g);
    free(mc->scratch);
    free(mc->reqs);
    free(mc->stats);
    mc_watch_free(&mc->w);
    free(mc);
}

/* Peers whose death we can see: same host name and same pid space, not ourselves. */
static int init_watch(mpi_comm_t *mc, char *err, size_t n)
{
    int size = mc->pub.size;
    char mine[MC_PID_SPACE_LEN], *all = malloc((size_t)size * MC_PID_SPACE_LEN);
    if (!all) return mc_errf(err, n, "out of memory for %d ranks", size);
    mc_pid_space(mine);
    char buf[MPI_MAX_ERROR_STRING];
    int rc = MPI_Allgather(mine, MC_PID_SPACE_LEN, MPI_CHAR, all, MC_PID_SPACE_LEN, MPI_CHAR,
                           MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
        free(all);
        return mc_errf(err, n, "MPI_Allgather of pid namespaces failed: %s", mpi_errstr(rc, buf));
    }
    rc = mc_watch_init(&mc->w, mc->rt, all, err, n);
    free(all);
    return rc;
}

static int start_mpi(mc_runtime_t *rt, char *err, size_t n)
{
    int inited = 0, finalized = 0, provided = 0, rank = -1, size = -1;
    char buf[MPI_MAX_ERROR_STRING];
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (inited || finalized)
        return mc_errf(err, n, "MPI was already %s; mc_comm_mpi initialises it once",
                       finalized ? "finalized" : "initialised");
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS)
        return mc_errf(err, n, "MPI_Init_thread failed: %s", mpi_errstr(rc, buf));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (provided < MPI_THREAD_SERIALIZED)
        return mc_errf(err, n, "MPI provides thread level %d, below MPI_THREAD_SERIALIZED (%d)",
                       provided, MPI_THREAD_SERIALIZED);
    if (make_ops16() != 0) return mc_errf(err, n, "MPI_Op_create of the 16-bit reductions failed");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != rt->rank || size != rt->size)
        return mc_errf(err, n, "MPI sees rank %d of %d but the launcher (PMIx) says rank %d of %d",
                       rank, size, rt->rank, rt->size);
    return 0;
}

/* The world group on a duplicate of MPI_COMM_WORLD, so our traffic never meets anyone else's. */
static int make_world(mpi_comm_t *mc, char *err, size_t n)
{
    char buf[MPI_MAX_ERROR_STRING];
    int size = mc->pub.size;
    MPI_Comm dup;
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_group(MPI_COMM_WORLD, &mc->world_group);
    if (rc != MPI_SUCCESS)
        return mc_errf(err, n, "MPI_Comm_dup of the world failed: %s", mpi_errstr(rc, buf));
    int *members = malloc((size_t)size * sizeof(*members));
    if (!members) return mc_errf(err, n, "out of memory for %d ranks", size);
    for (int r = 0; r < size; r++) members[r] = r;
    mc->pub.world = make_group(mc, dup, members, size, "world");
    free(members);
    return 0;
}

static mpi_comm_t *new_comm(mc_runtime_t *rt)
{
    mpi_comm_t *mc = calloc(1, sizeof(*mc));
    if (!mc) return NULL;
    mc->pub = (mc_comm_t){
        .name = "mpi",
        .rank = rt->rank,
        .size = rt->size,
        .timeout_s = 600,
        .heartbeat_s = 30,
        .group_new = mpi_group_new,
        .group_free = mpi_group_free,
        .start = mpi_start,
        .wait = mpi_wait,
        .abort = mpi_abort_comm,
        .finalize = mpi_finalize,
        .impl = mc,
    };
    mc->rt = rt;
    pthread_mutex_init(&mc->mu, NULL);
    pthread_mutex_init(&mc->mpi_mu, NULL);
    mc_cond_init_monotonic(&mc->work); /* the idle comm thread's timed wait for work */
    pthread_cond_init(&mc->space, NULL);
    pthread_cond_init(&mc->done, NULL);
    const char *chunk =
        mc_env_text(MC_ENV_MPI_CHUNK_ELEMS); /* tests: exercise chunking with small buffers */
    if (chunk && atol(chunk) > 0) mc->chunk_elems = (size_t)atol(chunk);
    return mc;
}

mc_comm_t *mc_comm_mpi(struct mc_runtime *rt, char *err, size_t n)
{
    if (!rt) rt = mc_runtime();
    if (!rt || !rt->pids) {
        mc_errf(err, n,
                "the MPI communicator needs the runtime (mc_runtime_init, "
                "mc_runtime_connect) first");
        return NULL;
    }
    if (g_mpi) {
        mc_errf(err, n, "the MPI communicator is already running");
        return NULL;
    }
    if (start_mpi(rt, err, n) != 0) return NULL; /* MPI cannot be re-initialised: leave it be */
    mpi_comm_t *mc = new_comm(rt);
    if (!mc) {
        mc_errf(err, n, "out of memory");
        return NULL;
    }
    if (make_world(mc, err, n) != 0 || init_watch(mc, err, n) != 0) return NULL;
    g_mpi = mc;
    mc_comm_abort_through(&mc->pub);
    /* the thread beats from now on (the heartbeat ring connects within the ranks' skew here,
     * just after init_watch's all-gather), though no collective has started yet */
    ensure_thread(mc);
    return &mc->pub;
}
