/* Pieces of the comm interface shared by every implementation. */
#include "comm/comm.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "comm/runtime.h"

const char *mc_coll_name(mc_coll_kind_t kind)
{
    switch (kind) {
    case MC_COLL_ALL_REDUCE: return "all-reduce";
    case MC_COLL_REDUCE_SCATTER: return "reduce-scatter";
    case MC_COLL_ALL_GATHER: return "all-gather";
    case MC_COLL_BROADCAST: return "broadcast";
    case MC_COLL_BARRIER: return "barrier";
    case MC_COLL_P2P_BATCH: return "p2p";
    case MC_COLL_ALL_TO_ALL_V: return "all-to-all";
    case MC_COLL_KINDS: break;
    }
    return "unknown collective";
}

/* Bytes per rank of the larger of input and output, as documented in comm.h; for a p2p batch the
 * bytes sent plus those received. */
void mc_comm_count(mc_comm_t *c, const mc_coll_t *op)
{
    if ((unsigned)op->kind >= MC_COLL_KINDS) return;
    uint64_t bytes = op->count * mc_dtype_size(op->dt);
    int size = op->group ? op->group->size : 1;
    if (op->kind == MC_COLL_REDUCE_SCATTER || op->kind == MC_COLL_ALL_GATHER)
        bytes *= (uint64_t)size;
    if (op->kind == MC_COLL_BARRIER) bytes = 0;
    if (op->kind == MC_COLL_P2P_BATCH) {
        bytes = 0;
        for (int i = 0; op->p2p && i < op->n_p2p; i++)
            bytes += op->p2p[i].count * mc_dtype_size(op->p2p[i].dt);
    }
    if (op->kind == MC_COLL_ALL_TO_ALL_V) {
        uint64_t in = 0, out = 0;
        for (int r = 0; op->send_counts && op->recv_counts && r < size; r++)
            in += op->send_counts[r], out += op->recv_counts[r];
        bytes = (in > out ? in : out) * mc_dtype_size(op->dt);
    }
    c->calls[op->kind]++;
    c->bytes[op->kind] += bytes;
    if (op->group) {
        op->group->calls[op->kind]++;
        op->group->bytes[op->kind] += bytes;
    }
}

void mc_comm_copy(const mc_devmem_t *dm, void *dst, const void *src, size_t bytes)
{
    if (!bytes || dst == src) return;
    int dd = dm && dm->is_device(dm->ctx, dst), sd = dm && dm->is_device(dm->ctx, src);
    if (dd && sd) dm->d2d(dm->ctx, dst, src, bytes);
    else if (dd) dm->h2d(dm->ctx, dst, src, bytes);
    else if (sd) dm->d2h(dm->ctx, dst, src, bytes);
    else memmove(dst, src, bytes);
}

size_t mc_a2av_extent(const size_t *counts, const size_t *displs, int n)
{
    size_t end = 0;
    for (int r = 0; r < n; r++) {
        size_t e = displs ? displs[r] + counts[r] : end + counts[r];
        if (e > end) end = e;
    }
    return end;
}

int mc_p2p_peer(const mc_coll_t *o, int i)
{
    for (int k = 0; k < o->n_p2p; k++) {
        bool seen = false;
        for (int e = 0; e < k && !seen; e++) seen = o->p2p[e].peer == o->p2p[k].peer;
        if (!seen && i-- == 0) return o->group->members[o->p2p[k].peer];
    }
    return -1;
}

const char *mc_coll_what(const mc_coll_t *o, char *buf, size_t n)
{
    if (o->kind != MC_COLL_P2P_BATCH) {
        snprintf(buf, n, "%s", mc_coll_name(o->kind));
        return buf;
    }
    size_t len = (size_t)snprintf(buf, n, "p2p with rank%s", mc_p2p_peer(o, 1) >= 0 ? "s" : "");
    for (int i = 0, r; len < n && (r = mc_p2p_peer(o, i)) >= 0; i++) {
        if (i == 8) {
            snprintf(buf + len, n - len, ", ...");
            break;
        }
        len += (size_t)snprintf(buf + len, n - len, "%s %d", i ? "," : "", r);
    }
    return buf;
}

static void validate_p2p(const mc_coll_t *o)
{
    if (o->n_p2p < 0 || (o->n_p2p > 0 && !o->p2p))
        mc_fatal("p2p batch of %d operations on the %s group without its operations", o->n_p2p,
                 o->group->name);
    for (int i = 0; i < o->n_p2p; i++) {
        const mc_p2p_t *p = &o->p2p[i];
        const char *dir = p->is_send ? "send" : "receive";
        if (p->peer < 0 || p->peer >= o->group->size)
            mc_fatal("p2p %s with group rank %d on the %s group of %d ranks", dir, p->peer,
                     o->group->name, o->group->size);
        if (mc_dtype_size(p->dt) == 0)
            mc_fatal("p2p %s with unknown data type %d", dir, (int)p->dt);
        if (p->count > 0 && !p->buf)
            mc_fatal("p2p %s of %zu elements on the %s group without a buffer", dir, p->count,
                     o->group->name);
    }
}

/* Counts present; buffers present where they span elements and apart from each other (MPI
 * forbids aliasing them, and an in-place exchange has no meaning with unequal splits). */
void mc_a2av_validate(const mc_coll_t *o)
{
    const char *g = o->group->name;
    if (!o->send_counts || !o->recv_counts)
        mc_fatal("all-to-all on the %s group without its %s counts", g,
                 o->send_counts ? "receive" : "send");
    size_t es = mc_dtype_size(o->dt), n = (size_t)o->group->size;
    size_t sb = mc_a2av_extent(o->send_counts, o->send_displs, (int)n) * es;
    size_t rb = mc_a2av_extent(o->recv_counts, o->recv_displs, (int)n) * es;
    if ((sb && !o->send) || (rb && !o->recv))
        mc_fatal("all-to-all of %zu elements on the %s group without a %s buffer",
                 (sb && !o->send ? sb : rb) / es, g, sb && !o->send ? "send" : "receive");
    uintptr_t s = (uintptr_t)o->send, r = (uintptr_t)o->recv;
    if (sb && rb && s < r + rb && r < s + sb)
        mc_fatal("all-to-all on the %s group with overlapping send and receive buffers (it runs "
                 "out of place only)",
                 g);
}

void mc_coll_validate(const mc_comm_t *c, const mc_coll_t *o)
{
    const char *what = mc_coll_name(o->kind);
    if ((unsigned)o->kind >= MC_COLL_KINDS) mc_fatal("unknown collective kind %d", (int)o->kind);
    if (!o->group || !o->group->impl)
        mc_fatal("%s started on no group (this rank is not in that group)", what);
    if (o->kind == MC_COLL_P2P_BATCH) {
        validate_p2p(o);
        return;
    }
    if (mc_dtype_size(o->dt) == 0) mc_fatal("%s with unknown data type %d", what, (int)o->dt);
    if (o->kind == MC_COLL_ALL_TO_ALL_V) {
        mc_a2av_validate(o);
        return;
    }
    bool reduces = o->kind == MC_COLL_ALL_REDUCE || o->kind == MC_COLL_REDUCE_SCATTER;
    if (reduces && (unsigned)o->op > MC_OP_AVG)
        mc_fatal("%s with unknown reduction %d", what, (int)o->op);
    if (reduces && o->op == MC_OP_AVG && !c->has_avg)
        mc_fatal("%s with an average on the %s communicator, which has none (sum, then divide)",
                 what, c->name);
    if (o->kind == MC_COLL_BROADCAST && (o->root < 0 || o->root >= o->group->size))
        mc_fatal("broadcast from root %d on the %s group of %d ranks", o->root, o->group->name,
                 o->group->size);
    bool rsag = o->kind == MC_COLL_REDUCE_SCATTER || o->kind == MC_COLL_ALL_GATHER;
    if (o->count > 0 && (!o->recv || (rsag && !o->send)))
        mc_fatal("%s of %zu elements on the %s group without a %s buffer", what, o->count,
                 o->group->name, o->recv ? "send" : "receive");
}

void mc_group_check_members(int world_rank, int world_size, const int *members, int n,
                            const char *name)
{
    bool mine = n == 0;
    for (int i = 0; i < n; i++) {
        if (members[i] < 0 || members[i] >= world_size || (i > 0 && members[i] <= members[i - 1]))
            mc_fatal("group '%s': member list is not ascending world ranks below %d", name,
                     world_size);
        mine |= members[i] == world_rank;
    }
    if (n < 0 || !mine) mc_fatal("group '%s': this rank is not among its %d members", name, n);
}

static mc_comm_t *g_abort_comm;

static void abort_through_comm(int code)
{
    if (g_abort_comm) g_abort_comm->abort(g_abort_comm, code);
}

static void abort_through_runtime(int code) { mc_runtime_abort(mc_runtime(), code, NULL); }

void mc_comm_abort_through(mc_comm_t *c)
{
    g_abort_comm = c;
    mc_error_set_abort_hook(c ? abort_through_comm : abort_through_runtime);
}
