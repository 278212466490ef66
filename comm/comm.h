/* Collectives behind one interface (DESIGN decision 3). Implementations: single rank
 * (comm_single.c, every collective is the identity), MPI (comm_mpi.c, host buffers; device
 * buffers of the cuda backend are staged through pinned host memory) and NCCL (comm_nccl.c, the
 * cuda backend's device buffers; host buffers are staged through device memory).
 *
 * Every collective is described by an mc_coll_t and started with start(); wait() blocks until
 * it is complete. Collectives started on one communicator complete in the order they were
 * started (like a stream): a request is complete once wait() returned for it or for a later
 * one. Blocking calls are start+wait (the inline helpers below). Every wait is bounded by
 * timeout_s, and the MPI and NCCL implementations notice dead peers on their node; either aborts
 * the job with a message naming the rank. Buffers are the backend's pointers or host memory: the
 * training loop all-reduces host scalars (losses, norms, flags) whatever the backend.
 *
 * On the cuda backend, collectives on device buffers are ordered with the backend's compute
 * stream: a collective sees everything the compute stream did before start(), and after wait()
 * everything enqueued on the compute stream sees its result (NCCL: the host may return from
 * wait() before the GPU is done; reading device memory goes through the backend, which orders
 * it). Collectives on host buffers are complete for the host when wait() returns. */
#ifndef MC_DIST_COMM_H
#define MC_DIST_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "base/clock.h"
#include "kernels/dtype.h"

/* MC_OP_AVG: the sum divided by the group size, in the collective (NCCL's ncclAvg); only on a
 * communicator with has_avg. */
typedef enum { MC_OP_SUM, MC_OP_MAX, MC_OP_AVG } mc_redop_t;
typedef enum {
    MC_COLL_ALL_REDUCE,     /* recv[0..count) reduced in place over the group (send NULL) */
    MC_COLL_REDUCE_SCATTER, /* send[count*size] reduced; group rank r gets block r in recv[count].
                               recv may be send + r*count (the shard in place, as NCCL allows) */
    MC_COLL_ALL_GATHER,     /* send[count] of every rank into recv[count*size], block r from rank r.
                               send may be recv + r*count (in place) */
    MC_COLL_BROADCAST,      /* recv[0..count) from group rank `root` (send NULL) */
    MC_COLL_BARRIER,
    MC_COLL_P2P_BATCH,    /* p2p[0..n_p2p): sends and receives with other ranks of the group, see
                               below (send, recv, count, dt, op, root unused) */
    MC_COLL_ALL_TO_ALL_V, /* variable all-to-all (torch's all_to_all_single with split sizes, the
                             MoE token dispatcher's): send_counts[r] elements from send +
                             send_displs[r] go to group rank r, which receives them at recv +
                             its recv_displs[me]; recv_counts[r] come from group rank r. Counts
                             and displacements are in elements, per group rank; displacements
                             NULL: packed in group rank order. Every member calls it, also with
                             nothing to move; send and recv must not overlap (count, op, root
                             unused) */
    MC_COLL_KINDS
} mc_coll_kind_t;

const char *mc_coll_name(mc_coll_kind_t kind);

/* A communicator over a subset of the world. rank/size are this rank's position in it;
 * members[i] is the world rank of group rank i (ascending, as Megatron lists them). */
typedef struct mc_group {
    int rank, size;
    int *members;
    const char *name; /* for messages: "dp", "tp", ... */
    /* volume counters of the collectives on this group, as mc_comm_t's */
    uint64_t calls[MC_COLL_KINDS], bytes[MC_COLL_KINDS];
    /* host seconds in the blocking ones (mc_comm_run: start to done; with NCCL the enqueue), and
     * in the waits on --tp-comm-overlap's requests (mc_tp_wait: what the GEMMs did not hide) */
    double seconds[MC_COLL_KINDS];
    void *impl;
} mc_group_t;

/* One send or receive of a p2p batch (Megatron's batch_isend_irecv, NCCL's ncclGroupStart/End
 * around ncclSend/ncclRecv). peer is a rank of the batch's group (this rank itself allowed).
 *
 * A batch is one entry of the communicator's stream: it starts after everything started before it
 * completed, all its operations are posted together (none waits for another, so a batch that
 * sends to a peer and receives from it while the peer does the same completes), and it is
 * complete when all of them are. Matching is per ordered pair of ranks in issue order: the k-th
 * send from A to B (over all batches on the group, in order) is the k-th receive on B from A, with
 * the same count and type; ranks must issue their batches in matching order (the caller's
 * contract, as in Megatron). Operations of zero elements are matched too (buf may be NULL). buf
 * must stay valid, and a send's unchanged, until the batch is complete. */
typedef struct {
    int is_send;
    int peer; /* group rank */
    void *buf;
    size_t count;
    mc_dtype_t dt;
} mc_p2p_t;

typedef struct {
    mc_coll_kind_t kind;
    mc_group_t *group;
    const void *send;
    void *recv;
    size_t count;
    mc_dtype_t dt;
    mc_redop_t op;
    int root;
    const mc_p2p_t *p2p; /* MC_COLL_P2P_BATCH: start() copies the array (it may be a temporary) */
    int n_p2p;           /* 0: nothing to do (MC_REQ_DONE) */
    /* MC_COLL_ALL_TO_ALL_V: group->size entries each; start() copies them (they may be
     * temporaries). The displacements may be NULL (packed). */
    const size_t *send_counts, *send_displs, *recv_counts, *recv_displs;
} mc_coll_t;

typedef int64_t mc_req_t; /* a ticket; MC_REQ_DONE when the collective completed at start */
#define MC_REQ_DONE ((mc_req_t)-1)

/* Device memory a communicator may be handed (the cuda backend): how to tell it from host
 * memory and how to copy it. comm_single and comm_mpi use it when mc_comm_t.devmem is set
 * (comm_mpi stages device buffers through host memory with it); NULL: every buffer is host
 * memory (the cpu backend). Copies are ordered after the work the backend enqueued before them;
 * d2h and h2d return with the copy complete (src reusable, dst readable by the host); d2d may
 * return before (it is ordered with the backend's later work). */
typedef struct mc_devmem {
    void *ctx;
    int (*is_device)(void *ctx, const void *p);
    void (*d2h)(void *ctx, void *dst, const void *src, size_t bytes);
    void (*h2d)(void *ctx, void *dst, const void *src, size_t bytes);
    void (*d2d)(void *ctx, void *dst, const void *src, size_t bytes);
    void *(*host_alloc)(void *ctx, size_t bytes); /* pinned host memory; NULL on failure */
    void (*host_free)(void *ctx, void *p);
} mc_devmem_t;

/* dst = src (bytes) for any pair of host and device buffers (memmove for two host buffers);
 * dm may be NULL (host only). */
void mc_comm_copy(const mc_devmem_t *dm, void *dst, const void *src, size_t bytes);

typedef struct mc_comm {
    const char *name; /* "single", "mpi", "nccl" */
    int rank, size;
    mc_group_t *world;
    double timeout_s;   /* bound on every wait (--distributed-timeout-minutes) */
    double heartbeat_s; /* a peer seen stopped or silent this long ends the job (0: never) */
    int heartbeat_ring_only; /* tests: skip the same-node /proc checks; the heartbeat ring alone watches */
    int has_avg;             /* MC_OP_AVG is supported (NCCL) */
    const mc_devmem_t *devmem; /* set before the first collective; see mc_devmem_t */
    /* Volume counters, per kind: calls and bytes of the larger of input and output per rank
     * (all-reduce: count; reduce-scatter and all-gather: count*size; broadcast: count;
     * all-to-all-v: the larger of the sum of send_counts and of recv_counts); a p2p batch is one
     * call of the bytes this rank sends plus those it receives. */
    uint64_t calls[MC_COLL_KINDS], bytes[MC_COLL_KINDS];

    /* Collective over the whole world: every rank calls it once per group kind, passing the
     * world ranks of its own group (n = 0 when it is in no group of that kind, which returns
     * NULL). Groups of one kind are disjoint. name is kept (not copied). */
    mc_group_t *(*group_new)(struct mc_comm *c, const int *members, int n, const char *name);
    void (*group_free)(struct mc_comm *c, mc_group_t *g);
    mc_req_t (*start)(struct mc_comm *c, const mc_coll_t *op);
    void (*wait)(struct mc_comm *c, mc_req_t req);
    /* Ends the whole job (every rank) with this exit code; does not return. */
    void (*abort)(struct mc_comm *c, int code);
    /* Waits for outstanding collectives, then releases everything. */
    void (*finalize)(struct mc_comm *c);
    void *impl;
} mc_comm_t;

/* The single-rank communicator: every collective is the identity (copies where out of place); a
 * p2p batch may only send to and receive from this rank itself, the k-th send of the batch going
 * to its k-th receive (anything else ends the job with mc_fatal). */
mc_comm_t *mc_comm_single(void);

/* The MPI communicator over the runtime's world (MPI_Init_thread on first use; collectives run
 * on a communication thread so they overlap the caller's compute). Returns NULL with one line in
 * err when MPI fails to start or disagrees with the runtime about rank and size. */
struct mc_runtime;
mc_comm_t *mc_comm_mpi(struct mc_runtime *rt, char *err, size_t n);

/* The NCCL communicator over the runtime's world for a backend with has_nccl (the cuda backend:
 * its device and compute stream): one ncclComm per group, unique ids exchanged through the
 * runtime (PMIx). timeout_s bounds communicator set-up and every collective. Returns NULL with
 * one line in err when NCCL cannot start (always in a build without CUDA); ranks sharing a GPU
 * are a user error (NCCL needs one GPU per rank). */
struct mc_backend;
mc_comm_t *mc_comm_nccl(struct mc_runtime *rt, const struct mc_backend *be, double timeout_s,
                        char *err, size_t n);

/* mc_fatal's abort hook ends the job through c->abort from now on (the communicator that runs),
 * or with NULL through the runtime (PMIx) again, as before any communicator ran. */
void mc_comm_abort_through(mc_comm_t *c);

/* Counts an op in c->calls/bytes and its group's; implementations call it from start(). */
void mc_comm_count(mc_comm_t *c, const mc_coll_t *op);

/* Caller errors of a collective that every implementation refuses (mc_fatal): unknown kind or
 * type, no group, a root or p2p peer outside the group, a missing buffer, MC_OP_AVG where the
 * communicator has none. */
void mc_coll_validate(const mc_comm_t *c, const mc_coll_t *op);

/* MC_COLL_ALL_TO_ALL_V: the elements a buffer spans, max over r of displs[r] + counts[r] (the
 * sum of counts when displs is NULL), for n group ranks. */
size_t mc_a2av_extent(const size_t *counts, const size_t *displs, int n);

/* MC_COLL_ALL_TO_ALL_V's caller errors (mc_fatal, part of mc_coll_validate): counts missing, a
 * buffer missing where its counts span elements, send and recv overlapping. */
void mc_a2av_validate(const mc_coll_t *op);

/* The world rank of the i-th distinct peer of a p2p batch (i counts distinct peers), or -1. */
int mc_p2p_peer(const mc_coll_t *op, int i);

/* The collective for messages, written into buf and returned: "all-reduce", "p2p with rank 3",
 * "p2p with ranks 1, 3". */
const char *mc_coll_what(const mc_coll_t *op, char *buf, size_t n);

/* group_new's argument check (mc_fatal): ascending world ranks below world_size that include
 * world_rank, or n = 0. */
void mc_group_check_members(int world_rank, int world_size, const int *members, int n,
                            const char *name);

/* Blocking helpers. */
static inline void mc_comm_run(mc_comm_t *c, const mc_coll_t *op)
{
    const double t0 = mc_now_s();
    c->wait(c, c->start(c, op));
    if (op->group && (unsigned)op->kind < MC_COLL_KINDS)
        op->group->seconds[op->kind] += mc_now_s() - t0;
}
static inline void mc_all_reduce(mc_comm_t *c, mc_group_t *g, void *buf, size_t count,
                                 mc_dtype_t dt, mc_redop_t op)
{
    mc_coll_t o = {
        .kind = MC_COLL_ALL_REDUCE, .group = g, .recv = buf, .count = count, .dt = dt, .op = op};
    mc_comm_run(c, &o);
}
static inline void mc_reduce_scatter(mc_comm_t *c, mc_group_t *g, const void *send, void *recv,
                                     size_t count, mc_dtype_t dt, mc_redop_t op)
{
    mc_coll_t o = {.kind = MC_COLL_REDUCE_SCATTER,
                   .group = g,
                   .send = send,
                   .recv = recv,
                   .count = count,
                   .dt = dt,
                   .op = op};
    mc_comm_run(c, &o);
}
static inline void mc_all_gather(mc_comm_t *c, mc_group_t *g, const void *send, void *recv,
                                 size_t count, mc_dtype_t dt)
{
    mc_coll_t o = {.kind = MC_COLL_ALL_GATHER,
                   .group = g,
                   .send = send,
                   .recv = recv,
                   .count = count,
                   .dt = dt};
    mc_comm_run(c, &o);
}
static inline void mc_broadcast(mc_comm_t *c, mc_group_t *g, void *buf, size_t count, mc_dtype_t dt,
                                int root)
{
    mc_coll_t o = {
        .kind = MC_COLL_BROADCAST, .group = g, .recv = buf, .count = count, .dt = dt, .root = root};
    mc_comm_run(c, &o);
}
static inline void mc_barrier(mc_comm_t *c, mc_group_t *g)
{
    mc_coll_t o = {.kind = MC_COLL_BARRIER, .group = g};
    mc_comm_run(c, &o);
}
/* Variable all-to-all over g (MC_COLL_ALL_TO_ALL_V); displs may be NULL (packed). */
static inline void mc_all_to_all_v(mc_comm_t *c, mc_group_t *g, const void *send,
                                   const size_t *send_counts, const size_t *send_displs, void *recv,
                                   const size_t *recv_counts, const size_t *recv_displs,
                                   mc_dtype_t dt)
{
    mc_coll_t o = {.kind = MC_COLL_ALL_TO_ALL_V,
                   .group = g,
                   .send = send,
                   .recv = recv,
                   .dt = dt,
                   .send_counts = send_counts,
                   .send_displs = send_displs,
                   .recv_counts = recv_counts,
                   .recv_displs = recv_displs};
    mc_comm_run(c, &o);
}
static inline void mc_p2p_batch(mc_comm_t *c, mc_group_t *g, const mc_p2p_t *ops, int n)
{
    mc_coll_t o = {.kind = MC_COLL_P2P_BATCH, .group = g, .p2p = ops, .n_p2p = n};
    mc_comm_run(c, &o);
}

#endif
