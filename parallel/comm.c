/* Pieces of the comm interface shared by every implementation. */
#include "parallel/comm.h"

const char *mc_coll_name(mc_coll_kind_t kind)
{
    switch (kind) {
    case MC_COLL_ALL_REDUCE: return "all-reduce";
    case MC_COLL_REDUCE_SCATTER: return "reduce-scatter";
    case MC_COLL_ALL_GATHER: return "all-gather";
    case MC_COLL_BROADCAST: return "broadcast";
    case MC_COLL_BARRIER: return "barrier";
    case MC_COLL_P2P_BATCH: return "p2p";
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
    if (op->kind == MC_COLL_REDUCE_SCATTER || op->kind == MC_COLL_ALL_GATHER) bytes *= (uint64_t)size;
    if (op->kind == MC_COLL_BARRIER) bytes = 0;
    if (op->kind == MC_COLL_P2P_BATCH) {
        bytes = 0;
        for (int i = 0; op->p2p && i < op->n_p2p; i++)
            bytes += op->p2p[i].count * mc_dtype_size(op->p2p[i].dt);
    }
    c->calls[op->kind]++;
    c->bytes[op->kind] += bytes;
    if (op->group) {
        op->group->calls[op->kind]++;
        op->group->bytes[op->kind] += bytes;
    }
}
