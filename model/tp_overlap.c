/* --tp-comm-overlap: the sequence-parallel all-gather and reduce-scatter of the parallel linears
 * in chunks beside their GEMMs (model/tp.h). Transformer Engine overlaps them inside its GEMM
 * kernels through userbuffers; here the GEMM is split along the rows and each chunk's
 * collective is a request of the comm interface, which runs it beside the caller (MPI: on its
 * communication thread; NCCL: on its stream), so the same schedule runs on every backend. Rows
 * are independent in these GEMMs: the split changes which rows a call computes, not the math of
 * a row (a GEMM library may still pick other kernels for the smaller shapes: last-bit
 * differences, which fp32 losses do not show and 16-bit roundings may). */
#include "model/tp.h"

#include "base/clock.h"

static size_t bytes(const mc_tp_t *tp, long n) { return (size_t)n * mc_dtype_size(tp->dt); }

bool mc_tp_overlaps(const mc_tp_t *tp, bool on) { return on && tp->sp && tp->ov.chunks > 0; }

/* A block of L rows in ov.chunks chunks, each of one row at least; chunk c's first row. */
static int n_chunks(const mc_tp_t *tp, long L)
{
    return tp->ov.chunks < L ? tp->ov.chunks : (int)L;
}
static long chunk_row(long L, int C, int c) { return L * c / C; }

/* Chunk [r0, r1) of this rank's block (already in its place in full) to every other rank, and
 * theirs into their places: one p2p batch, an all-gather of the chunk that lands in place. */
static mc_req_t exchange(const mc_tp_t *tp, void *full, long L, long r0, long r1, long width)
{
    mc_p2p_t ops[2 * tp->size];
    int n = 0;
    const size_t count = (size_t)((r1 - r0) * width);
    for (int p = 0; p < tp->size; p++) {
        if (p == tp->rank) continue;
        ops[n++] = (mc_p2p_t){.is_send = 1,
                              .peer = p,
                              .buf = mc_elem(full, tp->dt, (tp->rank * L + r0) * width),
                              .count = count,
                              .dt = tp->dt};
        ops[n++] = (mc_p2p_t){.is_send = 0,
                              .peer = p,
                              .buf = mc_elem(full, tp->dt, (p * L + r0) * width),
                              .count = count,
                              .dt = tp->dt};
    }
    mc_coll_t o = {.kind = MC_COLL_P2P_BATCH, .group = tp->group, .p2p = ops, .n_p2p = n};
    return tp->comm->start(tp->comm, &o);
}

const void *mc_tp_gather_rows(const mc_tp_t *tp, const void *local, void *full, long n_local,
                              long width, mc_tp_rows_fn fn, void *ctx)
{
    if (!mc_tp_overlaps(tp, tp->ov.ag)) {
        const void *in = mc_tp_column_input(tp, local, full, n_local);
        fn(ctx, in, NULL, 0, (tp->sp ? n_local * tp->size : n_local) / width);
        return in;
    }
    const long L = n_local / width;
    const int C = n_chunks(tp, L);
    /* full keeps the whole sequence for later readers (the weight-gradient GEMM) */
    tp->be->memcpy_d2d(tp->be, mc_elem(full, tp->dt, tp->rank * n_local), local,
                       bytes(tp, n_local));
    mc_req_t cur = exchange(tp, full, L, 0, chunk_row(L, C, 1), width);
    for (int c = 0; c < C; c++) {
        const long r0 = chunk_row(L, C, c), r1 = chunk_row(L, C, c + 1);
        const mc_req_t next =
            c + 1 < C ? exchange(tp, full, L, r1, chunk_row(L, C, c + 2), width) : MC_REQ_DONE;
        /* this rank's rows need no message: they run while chunk c is in flight */
        const long mine = tp->rank * L + r0;
        fn(ctx, mc_celem(full, tp->dt, mine * width), NULL, mine, r1 - r0);
        mc_tp_wait(tp, cur, MC_COLL_P2P_BATCH);
        for (int p = 0; p < tp->size; p++)
            if (p != tp->rank)
                fn(ctx, mc_celem(full, tp->dt, (p * L + r0) * width), NULL, p * L + r0, r1 - r0);
        cur = next;
    }
    return full;
}

void *mc_tp_rows_reduce_scatter(const mc_tp_t *tp, void *partial, void *local, long n_local,
                                long width, mc_tp_rows_fn fn, void *ctx)
{
    if (!mc_tp_overlaps(tp, tp->ov.rs)) {
        fn(ctx, NULL, partial, 0, (tp->sp ? n_local * tp->size : n_local) / width);
        return mc_tp_row_output(tp, partial, local, n_local);
    }
    const long L = n_local / width;
    const int C = n_chunks(tp, L);
    mc_req_t last = MC_REQ_DONE;
    for (int c = 0; c < C; c++) {
        const long r0 = chunk_row(L, C, c), n = chunk_row(L, C, c + 1) - r0;
        /* chunk c of every rank's block, rank by rank: the reduce-scatter's send buffer */
        void *send = mc_elem(partial, tp->dt, (long)tp->size * r0 * width);
        for (int p = 0; p < tp->size; p++)
            fn(ctx, NULL, mc_elem(send, tp->dt, p * n * width), p * L + r0, n);
        last =
            mc_tp_sp_reduce_scatter_start(tp, send, mc_elem(local, tp->dt, r0 * width), n * width);
    }
    mc_tp_wait(tp, last, MC_COLL_REDUCE_SCATTER); /* requests complete in order: every chunk's */
    return local;
}

mc_req_t mc_tp_sp_gather_start(const mc_tp_t *tp, const void *local, void *full, long n_local)
{
    mc_coll_t o = {.kind = MC_COLL_ALL_GATHER,
                   .group = tp->group,
                   .send = local,
                   .recv = full,
                   .count = (size_t)n_local,
                   .dt = tp->dt};
    return tp->comm->start(tp->comm, &o);
}

mc_req_t mc_tp_sp_reduce_scatter_start(const mc_tp_t *tp, const void *partial, void *local,
                                       long n_local)
{
    mc_coll_t o = {.kind = MC_COLL_REDUCE_SCATTER,
                   .group = tp->group,
                   .send = partial,
                   .recv = local,
                   .count = (size_t)n_local,
                   .dt = tp->dt,
                   .op = MC_OP_SUM};
    return tp->comm->start(tp->comm, &o);
}

/* The wait is the part of an overlapped collective its compute did not hide: counted with the
 * blocking calls' seconds of its kind (the level-2 timers block), so the benchmark of the
 * overlap reads what stays exposed. */
void mc_tp_wait(const mc_tp_t *tp, mc_req_t req, mc_coll_kind_t kind)
{
    const double t0 = mc_now_s();
    tp->comm->wait(tp->comm, req);
    tp->group->seconds[kind] += mc_now_s() - t0;
}
