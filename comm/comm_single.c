/* The single-rank communicator: every group has one member, so every collective is the
 * identity; out-of-place reduce-scatter and all-gather copy send to recv. A p2p batch can only
 * talk to this rank itself: its k-th send is copied to its k-th receive. With the cuda backend
 * (devmem set) the copies of device buffers are the backend's, in order on its stream. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "comm/comm.h"

static int g_world_member = 0;
static mc_group_t g_world = {.rank = 0, .size = 1, .members = &g_world_member, .name = "world"};

static mc_group_t *single_group_new(mc_comm_t *c, const int *members, int n, const char *name)
{
    (void)c;
    if (n == 0) return NULL;
    if (n != 1 || members[0] != 0)
        mc_fatal(
            "group '%s' of %d ranks asked of the single-rank communicator (only rank 0 exists)",
            name ? name : "?", n);
    mc_group_t *g = calloc(1, sizeof(*g));
    int *m = malloc(sizeof(*m));
    if (!g || !m) mc_fatal("out of memory creating group '%s'", name ? name : "?");
    m[0] = 0;
    g->rank = 0, g->size = 1, g->members = m, g->name = name;
    return g;
}

static void single_group_free(mc_comm_t *c, mc_group_t *g)
{
    (void)c;
    if (!g || g == &g_world) return;
    free(g->members);
    free(g);
}

/* The k-th send of the batch goes to its k-th receive; both must exist and agree. */
static void single_p2p(const mc_comm_t *c, const mc_coll_t *op)
{
    const char *gname = op->group && op->group->name ? op->group->name : "?";
    if (op->n_p2p < 0 || (op->n_p2p > 0 && !op->p2p))
        mc_fatal("p2p batch of %d operations on the %s group without its operations", op->n_p2p,
                 gname);
    int nsend = 0, nrecv = 0;
    for (int i = 0; i < op->n_p2p; i++) {
        const mc_p2p_t *p = &op->p2p[i];
        if (p->peer != 0)
            mc_fatal(
                "p2p %s group rank %d on the %s group of the single-rank communicator (only rank 0 "
                "exists)",
                p->is_send ? "send to" : "receive from", p->peer, gname);
        if (mc_dtype_size(p->dt) == 0) mc_fatal("p2p with unknown data type %d", (int)p->dt);
        if (p->count > 0 && !p->buf)
            mc_fatal("p2p %s of %zu elements on the %s group without a buffer",
                     p->is_send ? "send" : "receive", p->count, gname);
        if (p->is_send) nsend++;
        else nrecv++;
    }
    if (nsend != nrecv)
        mc_fatal(
            "p2p batch on the %s group of the single-rank communicator has %d send(s) to itself but %d "
            "receive(s) (each send needs its receive in the same batch)",
            gname, nsend, nrecv);
    int r = 0;
    for (int s = 0; s < op->n_p2p; s++) {
        const mc_p2p_t *snd = &op->p2p[s];
        if (!snd->is_send) continue;
        while (op->p2p[r].is_send) r++;
        const mc_p2p_t *rcv = &op->p2p[r++];
        if (snd->count != rcv->count || snd->dt != rcv->dt)
            mc_fatal(
                "p2p batch on the %s group of the single-rank communicator: a send of %zu elements of "
                "type %d is matched with a receive of %zu elements of type %d",
                gname, snd->count, (int)snd->dt, rcv->count, (int)rcv->dt);
        size_t bytes = snd->count * mc_dtype_size(snd->dt);
        mc_comm_copy(c->devmem, rcv->buf, snd->buf, bytes);
    }
}

/* All-to-all with itself: its one split goes from send to recv. */
static void single_a2av(const mc_comm_t *c, const mc_coll_t *op)
{
    if (!op->group) mc_fatal("all-to-all started on no group");
    if (mc_dtype_size(op->dt) == 0) mc_fatal("all-to-all with unknown data type %d", (int)op->dt);
    mc_a2av_validate(op);
    if (op->send_counts[0] != op->recv_counts[0])
        mc_fatal("all-to-all on the %s group of the single-rank communicator sends %zu elements to "
                 "itself but receives %zu",
                 op->group->name, op->send_counts[0], op->recv_counts[0]);
    size_t es = mc_dtype_size(op->dt), sd = op->send_displs ? op->send_displs[0] : 0,
           rd = op->recv_displs ? op->recv_displs[0] : 0;
    if (op->send_counts[0])
        mc_comm_copy(c->devmem, (char *)op->recv + rd * es, (const char *)op->send + sd * es,
                     op->send_counts[0] * es);
}

static mc_req_t single_start(mc_comm_t *c, const mc_coll_t *op)
{
    if (op->kind == MC_COLL_ALL_TO_ALL_V) {
        single_a2av(c, op);
        mc_comm_count(c, op);
        return MC_REQ_DONE;
    }
    if (op->kind == MC_COLL_P2P_BATCH) {
        single_p2p(c, op);
        mc_comm_count(c, op);
        return MC_REQ_DONE;
    }
    mc_comm_count(c, op);
    size_t bytes = op->count * mc_dtype_size(op->dt);
    bool copies = op->kind == MC_COLL_REDUCE_SCATTER || op->kind == MC_COLL_ALL_GATHER ||
                  (op->kind == MC_COLL_ALL_REDUCE && op->send);
    /* "in place" here is send == recv, which mc_comm_copy leaves alone (memmove otherwise; device
     * buffers of the cuda backend through c->devmem) */
    if (copies) mc_comm_copy(c->devmem, op->recv, op->send, bytes);
    return MC_REQ_DONE;
}

static void single_wait(mc_comm_t *c, mc_req_t req) { (void)c, (void)req; }

static void single_abort(mc_comm_t *c, int code)
{
    (void)c;
    fflush(stdout);
    exit(code);
}

static void single_finalize(mc_comm_t *c) { (void)c; }

mc_comm_t *mc_comm_single(void)
{
    static mc_comm_t comm = {
        .name = "single",
        .rank = 0,
        .size = 1,
        .world = &g_world,
        .timeout_s = 600,
        .group_new = single_group_new,
        .group_free = single_group_free,
        .start = single_start,
        .wait = single_wait,
        .abort = single_abort,
        .finalize = single_finalize,
    };
    return &comm;
}
