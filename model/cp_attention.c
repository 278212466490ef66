/* Core attention under context parallelism (model/cp_attention.h): the comm type of each layer,
 * the all-to-all of a2a and a2a+p2p (Transformer Engine's AttnFuncWithCPAndQKVOA2A and
 * flash_attn_a2a_communicate), and the memory every type needs.
 *
 * The all-to-all of a group of a ranks (this one at i) turns this rank's two chunks of every
 * head into the group's 2a chunks of its heads: member j gets the columns of j's query groups
 * (the qkv layout keeps a group's queries, key and value together; the output's heads are in
 * group order), and the chunks arrive in the order [first chunks of members 0..a-1, second
 * chunks of members a-1..0], which is sequence order: with the members holding chunks
 * b..b+a-1 and 2cp-b-a..2cp-1-b, that is a ring of cp/a ranks over chunks a times longer. */
#include <math.h>

#include "base/error.h"
#include "config/cp_layout.h"
#include "model/cp_attention.h"

int mc_cp_layer_comm(const mc_gpt_config_t *c, int layer)
{
    int t = c->cp_comm_one >= 0 ? c->cp_comm_one : c->cp_comm[layer];
    if (t == MC_CP_A2A_P2P && c->cp_a2a <= 1) t = MC_CP_P2P;
    if (t == MC_CP_A2A_P2P && c->cp_a2a >= c->cp) t = MC_CP_A2A;
    return t;
}

/* The a2a group of a layer of type t, its size and this rank's place in it. */
static mc_group_t *a2a_group(const mc_gpt_t *m, int t, int *size, int *rank)
{
    mc_group_t *g = t == MC_CP_A2A ? m->cp_group : m->cp_a2a_group;
    *size = g->size;
    *rank = g->rank;
    return g;
}

/* src [2C, B, a*w] -> dst [2aC, B, w]: member j gets columns [j*w, (j+1)*w) of both chunks. */
static void a2a_gather_seq(const mc_layer_run_t *r, mc_group_t *g, void *dst, const void *src,
                           long C, long w)
{
    const mc_backend_t *be = r->be;
    const mc_dtype_t dt = r->c->dt;
    const int a = g->size;
    const long half = C * r->B * w;
    void *send = r->m->cp_ws.send;
    mc_p2p_t ops[4 * a];
    for (int j = 0; j < a; j++) {
        void *sj = mc_elem(send, dt, 2 * j * half);
        be->copy_2d(be, sj, dt, w, mc_celem(src, dt, j * w), dt, a * w, 2 * C * r->B, w);
        for (int h = 0; h < 2; h++) {
            const long at = h == 0 ? j : 2L * a - 1 - j;
            ops[4 * j + 2 * h] = (mc_p2p_t){.is_send = 1,
                                            .peer = j,
                                            .buf = mc_elem(sj, dt, h * half),
                                            .count = (size_t)half,
                                            .dt = dt};
            ops[4 * j + 2 * h + 1] = (mc_p2p_t){.is_send = 0,
                                                .peer = j,
                                                .buf = mc_elem(dst, dt, at * half),
                                                .count = (size_t)half,
                                                .dt = dt};
        }
    }
    mc_p2p_batch(r->m->comm, g, ops, 4 * a);
}

/* The reverse: src [2aC, B, w] -> dst [2C, B, a*w]. */
static void a2a_scatter_seq(const mc_layer_run_t *r, mc_group_t *g, void *dst, const void *src,
                            long C, long w)
{
    const mc_backend_t *be = r->be;
    const mc_dtype_t dt = r->c->dt;
    const int a = g->size;
    const long half = C * r->B * w;
    void *recv = r->m->cp_ws.recv;
    mc_p2p_t ops[4 * a];
    for (int j = 0; j < a; j++)
        for (int h = 0; h < 2; h++) {
            const long at = h == 0 ? j : 2L * a - 1 - j;
            ops[4 * j + 2 * h] = (mc_p2p_t){.is_send = 1,
                                            .peer = j,
                                            .buf = (void *)mc_celem(src, dt, at * half),
                                            .count = (size_t)half,
                                            .dt = dt};
            ops[4 * j + 2 * h + 1] = (mc_p2p_t){.is_send = 0,
                                                .peer = j,
                                                .buf = mc_elem(recv, dt, (2L * j + h) * half),
                                                .count = (size_t)half,
                                                .dt = dt};
        }
    mc_p2p_batch(r->m->comm, g, ops, 4 * a);
    for (int j = 0; j < a; j++)
        be->copy_2d(be, mc_elem(dst, dt, j * w), dt, a * w, mc_celem(recv, dt, 2 * j * half), dt, w,
                    2 * C * r->B, w);
}

/* The ring of a layer of type t over `qkv` (after the all-to-all of a2a+p2p, or this rank's). */
static mc_cp_ring_t ring_of(const mc_layer_run_t *r, int t, const void *qkv)
{
    const mc_gpt_t *m = r->m;
    const int C = r->c->seq / 2;
    mc_cp_ring_t g = {
        .r = r, .qkv = qkv, .NH = r->t.heads, .NG = r->t.groups, .h0 = r->t.head_start};
    if (t == MC_CP_A2A_P2P) {
        int a, i;
        a2a_group(m, t, &a, &i);
        g.group = m->cp_p2p_group;
        g.C = C * a, g.NH /= a, g.NG /= a, g.h0 += i * g.NH;
    } else {
        g.group = m->cp_group;
        g.C = C;
    }
    g.size = g.group->size;
    g.rank = g.group->rank;
    return g;
}

/* a2a and a2a+p2p: the all-to-all, this rank's heads over the group's chunks, and back. */
static void a2a_forward(const mc_layer_run_t *r, int t, void *out, mc_attention_acts_t *s,
                        const mc_dropout_t *d)
{
    const mc_gpt_config_t *c = r->c;
    int a, i;
    mc_group_t *g = a2a_group(r->m, t, &a, &i);
    const int NH = r->t.heads / a, NG = r->t.groups / a, HD = c->head_dim, C = c->seq / 2;
    const long wq = (long)NG * (NH / NG + 2) * HD, wo = (long)NH * HD;
    a2a_gather_seq(r, g, s->cp_qkv, s->qkv, C, wq);
    if (t == MC_CP_A2A) /* the whole sequence in order: the whole-sequence op (on cuDNN, with
                           the scratch its backward uses) */
        r->be->attention_forward(r->be, c->dt, s->cp_out, s->cp_state, r->m->cp_ws.bwd_scratch,
                                 s->cp_qkv, c->seq_full, r->B, NH, NG, HD, NULL,
                                 mc_gpt_softmax_scale(c), d, r->t.head_start + i * NH, c->heads);
    else {
        const mc_cp_ring_t ring = ring_of(r, t, s->cp_qkv);
        mc_cp_ring_forward(&ring, s->cp_out, s->cp_lse, d);
    }
    a2a_scatter_seq(r, g, out, s->cp_out, C, wo);
}

static void a2a_backward(const mc_layer_run_t *r, int t, void *dqkv, const void *dout,
                         const mc_attention_acts_t *s, const mc_dropout_t *d)
{
    const mc_gpt_config_t *c = r->c;
    mc_cp_ws_t *ws = &r->m->cp_ws;
    int a, i;
    mc_group_t *g = a2a_group(r->m, t, &a, &i);
    const int NH = r->t.heads / a, NG = r->t.groups / a, HD = c->head_dim, C = c->seq / 2;
    const long wq = (long)NG * (NH / NG + 2) * HD, wo = (long)NH * HD;
    a2a_gather_seq(r, g, ws->dout2, dout, C, wo);
    if (t == MC_CP_A2A)
        r->be->attention_backward(r->be, c->dt, ws->dqkv2, ws->bwd_scratch, ws->dout2, s->cp_qkv,
                                  s->cp_out, s->cp_state, c->seq_full, r->B, NH, NG, HD, NULL,
                                  mc_gpt_softmax_scale(c), d, r->t.head_start + i * NH, c->heads);
    else {
        const mc_cp_ring_t ring = ring_of(r, t, s->cp_qkv);
        mc_cp_ring_backward(&ring, ws->dqkv2, ws->dout2, s->cp_out, s->cp_lse, d);
    }
    a2a_scatter_seq(r, g, dqkv, ws->dqkv2, C, wq);
}

void mc_cp_attention_forward(const mc_layer_run_t *r, void *out, mc_attention_acts_t *s,
                             const mc_dropout_t *d)
{
    const int t = mc_cp_layer_comm(r->c, (int)r->layer_no - 1);
    const mc_cp_ring_t ring = ring_of(r, t, s->qkv);
    switch (t) {
    case MC_CP_P2P: mc_cp_ring_forward(&ring, out, s->cp_lse, d); break;
    case MC_CP_ALLGATHER: mc_cp_allgather_forward(&ring, out, s->cp_lse, d); break;
    default: a2a_forward(r, t, out, s, d);
    }
}

void mc_cp_attention_backward(const mc_layer_run_t *r, void *dqkv, const void *dout,
                              const void *out, const mc_attention_acts_t *s, const mc_dropout_t *d)
{
    const int t = mc_cp_layer_comm(r->c, (int)r->layer_no - 1);
    const mc_cp_ring_t ring = ring_of(r, t, s->qkv);
    switch (t) {
    case MC_CP_P2P: mc_cp_ring_backward(&ring, dqkv, dout, out, s->cp_lse, d); break;
    case MC_CP_ALLGATHER: mc_cp_allgather_backward(&ring, dqkv, dout, out, s->cp_lse, d); break;
    default: a2a_backward(r, t, dqkv, dout, s, d);
    }
}

/* ---------------------------------------------------------------- memory */

typedef struct {
    bool ring, allgather, a2a, whole; /* some layer runs: a ring, the all-gather, an all-to-all,
                                         the whole-sequence op after it (a2a) */
} needs_t;

static needs_t needs_of(const mc_gpt_config_t *c)
{
    needs_t n = {0};
    for (int l = 0; l < c->num_layers; l++) {
        const int t = mc_cp_layer_comm(c, l);
        n.ring |= t == MC_CP_P2P || t == MC_CP_A2A_P2P;
        n.allgather |= t == MC_CP_ALLGATHER;
        n.a2a |= t == MC_CP_A2A || t == MC_CP_A2A_P2P;
        n.whole |= t == MC_CP_A2A;
    }
    return n;
}

/* The whole-sequence op's state and scratch for a2a's heads. */
static void whole_bytes(const mc_gpt_t *m, long *state, long *scratch)
{
    const mc_gpt_config_t *c = &m->cfg;
    size_t st, sc;
    m->be->attention_sizes(m->be, c->dt, c->seq_full, c->max_batch, mc_gpt_tp_dims(c).heads / c->cp,
                           c->head_dim, &st, &sc);
    *state = (long)st;
    *scratch = (long)sc;
}

/* One layer's state: the merged statistics, a2a's tensors after the all-to-all. */
static void plan_state(mc_gpt_t *m, mc_alloc_t *a, float **lse, void **qkv, void **out,
                       void **state)
{
    const mc_gpt_config_t *c = &m->cfg;
    const mc_tp_dims_t t = mc_gpt_tp_dims(c);
    const needs_t n = needs_of(c);
    const long SB = (long)c->seq * c->max_batch, e = (long)mc_dtype_size(c->dt);
    long st, sc;
    if (n.ring || n.allgather) *lse = mc_gpt_take(a, SB * t.heads * (long)sizeof(float));
    if (n.a2a) {
        *qkv = mc_gpt_take(a, SB * t.qkv * e);
        *out = mc_gpt_take(a, SB * t.attn * e);
    }
    if (n.whole) {
        whole_bytes(m, &st, &sc);
        *state = mc_gpt_take(a, st);
    }
}

void mc_cp_attention_plan(mc_gpt_t *m, mc_alloc_t *a, mc_attention_acts_t *s)
{
    if (m->cfg.recompute == MC_RECOMPUTE_SELECTIVE) { /* recomputed: one layer's, shared */
        s->cp_lse = m->attn_ws.cp_lse;
        s->cp_qkv = m->attn_ws.cp_qkv;
        s->cp_out = m->attn_ws.cp_out;
        s->cp_state = m->attn_ws.cp_state;
        return;
    }
    plan_state(m, a, &s->cp_lse, &s->cp_qkv, &s->cp_out, &s->cp_state);
}

/* The block ops' scratch: the ring's blocks (of p2p's chunks and heads, or a2a+p2p's) and the
 * all-gather's (a chunk of queries against up to the whole sequence). */
static long block_scratch(const mc_gpt_t *m, needs_t n)
{
    const mc_gpt_config_t *c = &m->cfg;
    const int C = c->seq / 2, NH = mc_gpt_tp_dims(c).heads, a = c->cp_a2a > 0 ? c->cp_a2a : 1;
    size_t f, b, most = 0;
    const int sq[3] = {C, C * a, C}, sk[3] = {C, C * a, c->seq_full}, nh[3] = {NH, NH / a, NH};
    const bool use[3] = {n.ring, n.ring && a > 1, n.allgather};
    for (int k = 0; k < 3; k++) {
        if (!use[k]) continue;
        m->be->attention_block_sizes(m->be, c->dt, sq[k], sk[k], c->max_batch, nh[k], c->head_dim,
                                     &f, &b);
        if (f > most) most = f;
        if (b > most) most = b;
    }
    return (long)most;
}

void mc_cp_attention_plan_shared(mc_gpt_t *m, mc_alloc_t *acts, mc_alloc_t *ws)
{
    const mc_gpt_config_t *c = &m->cfg;
    if (c->cp <= 1) return;
    const mc_tp_dims_t t = mc_gpt_tp_dims(c);
    const needs_t n = needs_of(c);
    mc_cp_ws_t *w = &m->cp_ws;
    const long SB = (long)c->seq * c->max_batch, e = (long)mc_dtype_size(c->dt), f = sizeof(float);
    const long kv = SB * 2 * t.groups * c->head_dim, o = SB * t.attn;
    if (c->recompute == MC_RECOMPUTE_SELECTIVE)
        plan_state(m, acts, &m->attn_ws.cp_lse, &m->attn_ws.cp_qkv, &m->attn_ws.cp_out,
                   &m->attn_ws.cp_state);
    if (n.ring || n.allgather) {
        w->kv[0] = mc_gpt_take(ws, kv * e);
        w->dkv[0] = mc_gpt_take(ws, kv * f);
        w->acc = mc_gpt_take(ws, o * f);
        w->dq = mc_gpt_take(ws, o * f);
        w->scratch = mc_gpt_take(ws, block_scratch(m, n));
    }
    if (n.ring) {
        w->kv[1] = mc_gpt_take(ws, kv * e);
        w->dkv[1] = mc_gpt_take(ws, kv * f);
        w->part = mc_gpt_take(ws, o / 2 * f);
        w->plse = mc_gpt_take(ws, SB / 2 * t.heads * f);
    }
    if (n.allgather) {
        w->kv_all = mc_gpt_take(ws, kv * c->cp * e);
        w->kv_seq = mc_gpt_take(ws, kv * c->cp * e);
        w->dkv_all = mc_gpt_take(ws, kv * c->cp * f);
        w->dkv_seq = mc_gpt_take(ws, kv * c->cp * f);
    }
    if (n.a2a) {
        const long wide = t.qkv > t.attn ? t.qkv : t.attn;
        w->send = mc_gpt_take(ws, SB * wide * e);
        w->recv = mc_gpt_take(ws, SB * wide * e);
        w->dout2 = mc_gpt_take(ws, o * e);
        w->dqkv2 = mc_gpt_take(ws, SB * t.qkv * e);
    }
    if (n.whole) {
        long st, sc;
        whole_bytes(m, &st, &sc);
        w->bwd_scratch = mc_gpt_take(ws, sc);
    }
}
