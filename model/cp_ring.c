/* Context parallelism's ring (Transformer Engine's AttnFuncWithCPAndKVP2P) and all-gather
 * (AttnFuncWithCPAndKVAllGather) on the backend's block ops (model/cp_attention.h).
 *
 * Ring: at step s a rank holds the keys and values of rank - s, and sends them on to rank + 1
 * while it computes. Its two query chunks meet the two key chunks: a key chunk before a query
 * chunk is seen whole, the same chunk causally, a later one not at all (skipped): at step 0 the
 * diagonal blocks and the second query chunk against the first key chunk, at steps 1..rank both
 * query chunks against the first key chunk, later the second query chunk against both. Each
 * block's output and log-sum-exp merge into fp32 accumulators. The backward passes the keys and
 * values around again, each rank adding its part of their gradient to an fp32 buffer that
 * travels with them and, after a last pass, reaches their owner complete.
 *
 * All-gather: the keys and values of every rank, put in sequence order; each query chunk meets
 * the keys of its prefix in one causal block; the gradients of the keys and values are
 * reduce-scattered back to their owners. */
#include <math.h>

#include "base/error.h"
#include "model/cp_attention.h"

typedef struct {
    const mc_backend_t *be;
    mc_comm_t *comm;
    mc_cp_ws_t *ws;
    mc_dtype_t dt;
    int B, HD, qpg;
    long wq, wkv, wo; /* row widths: qkv, kv, out */
    float scale;
} ctx_t;

static ctx_t ctx_of(const mc_cp_ring_t *g)
{
    const mc_layer_run_t *r = g->r;
    const int HD = r->c->head_dim, qpg = g->NH / g->NG;
    return (ctx_t){.be = r->be,
                   .comm = r->m->comm,
                   .ws = &r->m->cp_ws,
                   .dt = r->c->dt,
                   .B = r->B,
                   .HD = HD,
                   .qpg = qpg,
                   .wq = (long)g->NG * (qpg + 2) * HD,
                   .wkv = 2L * g->NG * HD,
                   .wo = (long)g->NH * HD,
                   .scale = mc_gpt_softmax_scale(r->c)};
}

/* The chunk of the ring's sequence that half h (0, 1) of rank k holds. */
static int chunk_of(const mc_cp_ring_t *g, int k, int h)
{
    return h == 0 ? k : 2 * g->size - 1 - k;
}

/* kv [rows, B, 2 NG HD] = each group's key and value heads of qkv (type dt). */
static void pack_kv(const mc_cp_ring_t *g, const ctx_t *x, void *kv, long rows)
{
    for (int k = 0; k < g->NG; k++)
        x->be->copy_2d(x->be, mc_elem(kv, x->dt, 2L * k * x->HD), x->dt, x->wkv,
                       mc_celem(g->qkv, x->dt, ((long)k * (x->qpg + 2) + x->qpg) * x->HD), x->dt,
                       x->wq, rows * x->B, 2L * x->HD);
}

/* dqkv (type dt) from the fp32 gradients of the queries [rows, B, NH HD] and of the keys and
 * values [rows, B, 2 NG HD]. */
static void unpack_dqkv(const mc_cp_ring_t *g, const ctx_t *x, void *dqkv, const float *dq,
                        const float *dkv, long rows)
{
    for (int k = 0; k < g->NG; k++) {
        void *grp = mc_elem(dqkv, x->dt, (long)k * (x->qpg + 2) * x->HD);
        x->be->copy_2d(x->be, grp, x->dt, x->wq, dq + (long)k * x->qpg * x->HD, MC_DT_F32, x->wo,
                       rows * x->B, (long)x->qpg * x->HD);
        x->be->copy_2d(x->be, mc_elem(grp, x->dt, (long)x->qpg * x->HD), x->dt, x->wq,
                       dkv + 2L * k * x->HD, MC_DT_F32, x->wkv, rows * x->B, 2L * x->HD);
    }
}

/* Starts passing `send` to the next rank of the ring and receiving the previous one's into recv. */
static mc_req_t ring_pass(const mc_cp_ring_t *g, const ctx_t *x, void *send, void *recv, long n,
                          mc_dtype_t dt)
{
    const mc_p2p_t ops[2] = {
        {.is_send = 1, .peer = (g->rank + 1) % g->size, .buf = send, .count = (size_t)n, .dt = dt},
        {.is_send = 0,
         .peer = (g->rank + g->size - 1) % g->size,
         .buf = recv,
         .count = (size_t)n,
         .dt = dt}};
    const mc_coll_t op = {.kind = MC_COLL_P2P_BATCH, .group = g->group, .p2p = ops, .n_p2p = 2};
    return x->comm->start(x->comm, &op);
}

/* The mask between query chunk qc and key chunk kc, or -1 when the query sees none of it. */
static int block_mask(int qc, int kc)
{
    return kc < qc ? MC_ATTN_BLOCK_FULL : kc == qc ? MC_ATTN_BLOCK_CAUSAL : -1;
}

void mc_cp_ring_forward(const mc_cp_ring_t *g, void *out, float *lse, const mc_dropout_t *d)
{
    const ctx_t x = ctx_of(g);
    const mc_layer_run_t *r = g->r;
    const long C = g->C, half_o = C * x.B * x.wo, half_l = C * x.B * g->NH;
    const long kvn = 2 * C * x.B * x.wkv;
    mc_cp_ws_t *ws = x.ws;
    bool first[2] = {true, true};
    int cur = 0;
    pack_kv(g, &x, ws->kv[0], 2 * C);
    for (int s = 0; s < g->size; s++) {
        const int src = (g->rank - s + g->size) % g->size;
        const mc_req_t req = s + 1 < g->size
                                 ? ring_pass(g, &x, ws->kv[cur], ws->kv[cur ^ 1], kvn, x.dt)
                                 : MC_REQ_DONE;
        for (int qh = 0; qh < 2; qh++)
            for (int kh = 0; kh < 2; kh++) {
                const int qc = chunk_of(g, g->rank, qh), kc = chunk_of(g, src, kh);
                const int mask = block_mask(qc, kc);
                if (mask < 0) continue;
                /* the first block of a query chunk writes the accumulators, later ones merge */
                float *o = first[qh] ? ws->acc + qh * half_o : ws->part;
                float *l = first[qh] ? lse + qh * half_l : ws->plse;
                x.be->attention_block_forward(
                    x.be, x.dt, o, l, ws->scratch, mc_celem(g->qkv, x.dt, qh * C * x.B * x.wq),
                    mc_celem(ws->kv[cur], x.dt, kh * C * x.B * x.wkv), g->C, g->C, x.B, g->NH,
                    g->NG, x.HD, qc * g->C, kc * g->C, r->c->seq_full, mask, x.scale, d, g->h0,
                    r->c->heads);
                if (!first[qh])
                    x.be->attention_lse_merge(x.be, ws->acc + qh * half_o, lse + qh * half_l,
                                              ws->part, ws->plse, C * x.B, g->NH, x.HD);
                first[qh] = false;
            }
        if (req != MC_REQ_DONE) x.comm->wait(x.comm, req);
        cur ^= 1;
    }
    x.be->convert(x.be, out, x.dt, ws->acc, MC_DT_F32, 2 * half_o);
}

void mc_cp_ring_backward(const mc_cp_ring_t *g, void *dqkv, const void *dout, const void *out,
                         const float *lse, const mc_dropout_t *d)
{
    const ctx_t x = ctx_of(g);
    const mc_layer_run_t *r = g->r;
    const long C = g->C, half_o = C * x.B * x.wo, half_l = C * x.B * g->NH;
    const long kvn = 2 * C * x.B * x.wkv, half_kv = C * x.B * x.wkv;
    mc_cp_ws_t *ws = x.ws;
    int cur = 0, dc = 0;
    pack_kv(g, &x, ws->kv[0], 2 * C);
    x.be->memset0(x.be, ws->dq, (size_t)(2 * half_o) * sizeof(float));
    x.be->memset0(x.be, ws->dkv[0], (size_t)kvn * sizeof(float));
    for (int s = 0; s < g->size; s++) {
        const int src = (g->rank - s + g->size) % g->size;
        const mc_req_t req = s + 1 < g->size
                                 ? ring_pass(g, &x, ws->kv[cur], ws->kv[cur ^ 1], kvn, x.dt)
                                 : MC_REQ_DONE;
        for (int qh = 0; qh < 2; qh++)
            for (int kh = 0; kh < 2; kh++) {
                const int qc = chunk_of(g, g->rank, qh), kc = chunk_of(g, src, kh);
                const int mask = block_mask(qc, kc);
                if (mask < 0) continue;
                x.be->attention_block_backward(
                    x.be, x.dt, ws->dq + qh * half_o, ws->dkv[dc] + kh * half_kv, ws->scratch,
                    mc_celem(dout, x.dt, qh * half_o), mc_celem(g->qkv, x.dt, qh * C * x.B * x.wq),
                    mc_celem(ws->kv[cur], x.dt, kh * half_kv), mc_celem(out, x.dt, qh * half_o),
                    lse + qh * half_l, g->C, g->C, x.B, g->NH, g->NG, x.HD, qc * g->C, kc * g->C,
                    r->c->seq_full, mask, x.scale, d, g->h0, r->c->heads);
            }
        if (req != MC_REQ_DONE) x.comm->wait(x.comm, req);
        cur ^= 1;
        /* the gradient goes on with its keys and values; after the last step, to their owner */
        if (g->size > 1) {
            x.comm->wait(x.comm, ring_pass(g, &x, ws->dkv[dc], ws->dkv[dc ^ 1], kvn, MC_DT_F32));
            dc ^= 1;
        }
    }
    unpack_dqkv(g, &x, dqkv, ws->dq, ws->dkv[dc], 2 * C);
}

/* Every rank's keys and values (ws->kv_all, by rank: its two chunks) in sequence order
 * (ws->kv_seq). */
static void gather_kv(const mc_cp_ring_t *g, const ctx_t *x)
{
    mc_cp_ws_t *ws = x->ws;
    const long half = (long)g->C * x->B * x->wkv;
    const size_t hb = (size_t)half * mc_dtype_size(x->dt);
    pack_kv(g, x, ws->kv[0], 2L * g->C);
    mc_all_gather(x->comm, g->group, ws->kv[0], ws->kv_all, (size_t)(2 * half), x->dt);
    for (int k = 0; k < g->size; k++)
        for (int h = 0; h < 2; h++)
            x->be->memcpy_d2d(x->be, mc_elem(ws->kv_seq, x->dt, chunk_of(g, k, h) * half),
                              mc_celem(ws->kv_all, x->dt, (2L * k + h) * half), hb);
}

void mc_cp_allgather_forward(const mc_cp_ring_t *g, void *out, float *lse, const mc_dropout_t *d)
{
    const ctx_t x = ctx_of(g);
    const long C = g->C, half_o = C * x.B * x.wo, half_l = C * x.B * g->NH;
    mc_cp_ws_t *ws = x.ws;
    gather_kv(g, &x);
    for (int qh = 0; qh < 2; qh++) { /* query chunk qc against keys [0, (qc + 1) C) */
        const int qc = chunk_of(g, g->rank, qh);
        x.be->attention_block_forward(x.be, x.dt, ws->acc + qh * half_o, lse + qh * half_l,
                                      ws->scratch, mc_celem(g->qkv, x.dt, qh * C * x.B * x.wq),
                                      ws->kv_seq, g->C, (qc + 1) * g->C, x.B, g->NH, g->NG, x.HD,
                                      qc * g->C, 0, g->r->c->seq_full, MC_ATTN_BLOCK_CAUSAL,
                                      x.scale, d, g->h0, g->r->c->heads);
    }
    x.be->convert(x.be, out, x.dt, ws->acc, MC_DT_F32, 2 * half_o);
}

void mc_cp_allgather_backward(const mc_cp_ring_t *g, void *dqkv, const void *dout, const void *out,
                              const float *lse, const mc_dropout_t *d)
{
    const ctx_t x = ctx_of(g);
    const long C = g->C, half_o = C * x.B * x.wo, half_l = C * x.B * g->NH;
    const long half_kv = C * x.B * x.wkv;
    mc_cp_ws_t *ws = x.ws;
    gather_kv(g, &x);
    x.be->memset0(x.be, ws->dq, (size_t)(2 * half_o) * sizeof(float));
    x.be->memset0(x.be, ws->dkv_seq, (size_t)(2 * g->size * half_kv) * sizeof(float));
    for (int qh = 0; qh < 2; qh++) {
        const int qc = chunk_of(g, g->rank, qh);
        x.be->attention_block_backward(
            x.be, x.dt, ws->dq + qh * half_o, ws->dkv_seq, ws->scratch,
            mc_celem(dout, x.dt, qh * half_o), mc_celem(g->qkv, x.dt, qh * C * x.B * x.wq),
            ws->kv_seq, mc_celem(out, x.dt, qh * half_o), lse + qh * half_l, g->C, (qc + 1) * g->C,
            x.B, g->NH, g->NG, x.HD, qc * g->C, 0, g->r->c->seq_full, MC_ATTN_BLOCK_CAUSAL, x.scale,
            d, g->h0, g->r->c->heads);
    }
    /* back to the ranks' order, then each rank's sum over the group */
    for (int k = 0; k < g->size; k++)
        for (int h = 0; h < 2; h++)
            x.be->memcpy_d2d(x.be, ws->dkv_all + (2L * k + h) * half_kv,
                             ws->dkv_seq + chunk_of(g, k, h) * half_kv,
                             (size_t)half_kv * sizeof(float));
    mc_reduce_scatter(x.comm, g->group, ws->dkv_all, ws->dkv[0], (size_t)(2 * half_kv), MC_DT_F32,
                      MC_OP_SUM);
    unpack_dqkv(g, &x, dqkv, ws->dq, ws->dkv[0], 2 * C);
}
