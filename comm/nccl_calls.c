/* The NCCL calls of one collective (comm/nccl_calls.h): comm/comm_nccl.c runs them on its
 * communication stream under its connection set-up guard and ends the job on an error. */
#ifdef MC_WITH_CUDA
#include "comm/nccl_calls.h"

#include <stddef.h>

static ncclDataType_t nccl_dtype(mc_dtype_t dt)
{
    switch (dt) {
    case MC_DT_F32: return ncclFloat32;
    case MC_DT_F64: return ncclFloat64;
    case MC_DT_I64: return ncclInt64;
    case MC_DT_I32: return ncclInt32;
    case MC_DT_U8: return ncclUint8;
    case MC_DT_BF16: return ncclBfloat16;
    case MC_DT_F16: return ncclFloat16;
    }
    return ncclFloat32;
}

static ncclRedOp_t nccl_op(mc_redop_t op)
{
    return op == MC_OP_MAX ? ncclMax : op == MC_OP_AVG ? ncclAvg : ncclSum;
}

/* r, naming it by call when it is an error. */
static ncclResult_t named(ncclResult_t r, const char *name, const char **call)
{
    if (r != ncclSuccess) *call = name;
    return r;
}

/* Zero-element operations are left out on both sides alike, so the per-pair order of the
 * others still matches. */
static ncclResult_t p2p_batch(ncclComm_t comm, cudaStream_t s, const mc_coll_t *o,
                              const char **call)
{
    ncclResult_t r = named(ncclGroupStart(), "ncclGroupStart", call);
    for (int i = 0; r == ncclSuccess && i < o->n_p2p; i++) {
        const mc_p2p_t *p = &o->p2p[i];
        if (!p->count) continue;
        r = p->is_send ? ncclSend(p->buf, p->count, nccl_dtype(p->dt), p->peer, comm, s)
                       : ncclRecv(p->buf, p->count, nccl_dtype(p->dt), p->peer, comm, s);
        if (r != ncclSuccess) {
            ncclGroupEnd();
            return named(r, p->is_send ? "ncclSend" : "ncclRecv", call);
        }
    }
    return r == ncclSuccess ? named(ncclGroupEnd(), "ncclGroupEnd", call) : r;
}

/* NCCL's all-to-all: one ncclSend and one ncclRecv per peer (itself included) in a group, as
 * NCCL's documentation writes it; empty splits are left out on both sides alike (each side
 * knows the other's count). */
static ncclResult_t all_to_all_v(ncclComm_t comm, cudaStream_t s, const mc_coll_t *o,
                                 const char **call)
{
    ncclDataType_t dt = nccl_dtype(o->dt);
    const size_t es = mc_dtype_size(o->dt);
    ncclResult_t e = named(ncclGroupStart(), "ncclGroupStart", call);
    for (int r = 0, n = o->group->size; e == ncclSuccess && r < n; r++) {
        size_t sd = 0, rd = 0;
        for (int q = 0; q < r; q++) sd += o->send_counts[q], rd += o->recv_counts[q];
        if (o->send_displs) sd = o->send_displs[r];
        if (o->recv_displs) rd = o->recv_displs[r];
        if (o->send_counts[r])
            e = ncclSend((const char *)o->send + sd * es, o->send_counts[r], dt, r, comm, s);
        if (e == ncclSuccess && o->recv_counts[r])
            e = ncclRecv((char *)o->recv + rd * es, o->recv_counts[r], dt, r, comm, s);
        if (e != ncclSuccess) {
            ncclGroupEnd();
            return named(e, "ncclSend/ncclRecv", call);
        }
    }
    return e == ncclSuccess ? named(ncclGroupEnd(), "ncclGroupEnd", call) : e;
}

ncclResult_t mc_nccl_calls(ncclComm_t comm, cudaStream_t s, int32_t *barrier_word,
                           const mc_coll_t *o, const char **call)
{
    ncclDataType_t dt = nccl_dtype(o->dt);
    switch (o->kind) {
    case MC_COLL_ALL_REDUCE: {
        const void *send = o->send ? o->send : o->recv; /* in place when equal */
        return named(ncclAllReduce(send, o->recv, o->count, dt, nccl_op(o->op), comm, s),
                     "ncclAllReduce", call);
    }
    case MC_COLL_REDUCE_SCATTER:
        return named(ncclReduceScatter(o->send, o->recv, o->count, dt, nccl_op(o->op), comm, s),
                     "ncclReduceScatter", call);
    case MC_COLL_ALL_GATHER:
        return named(ncclAllGather(o->send, o->recv, o->count, dt, comm, s), "ncclAllGather", call);
    case MC_COLL_BROADCAST:
        return named(ncclBroadcast(o->recv, o->recv, o->count, dt, o->root, comm, s),
                     "ncclBroadcast", call);
    case MC_COLL_BARRIER:
        return named(ncclAllReduce(barrier_word, barrier_word, 1, ncclInt32, ncclSum, comm, s),
                     "ncclAllReduce (barrier)", call);
    case MC_COLL_P2P_BATCH: return p2p_batch(comm, s, o, call);
    case MC_COLL_ALL_TO_ALL_V: return all_to_all_v(comm, s, o, call);
    case MC_COLL_KINDS: break;
    }
    return ncclSuccess;
}
#endif
