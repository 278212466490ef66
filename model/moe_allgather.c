/* Megatron's allgather token dispatcher (core_v0.15.0 token_dispatcher.py,
 * MoEAllGatherTokenDispatcher, --moe-token-dispatcher-type allgather, its default) at ep or
 * etp > 1: every rank of the tp_ep group (expt_tp x ep, members etp rank fastest: Megatron's
 * RankGenerator order) gathers the group's tokens, their routing map and probabilities
 * (gather_from_sequence_parallel_region), keeps the (token, expert) pairs of its own E/ep experts
 * (the map's columns local_expert_indices), permutes them expert by expert in gathered token
 * order (moe_utils.permute), runs its experts on them (each expert's share of etp: partial sums),
 * unpermutes to [n T, H] with zeros for tokens it does not take, and reduce-scatters over tp_ep
 * (reduce_scatter_to_sequence_parallel_region): every rank's expert outputs and etp partial sums
 * added, this rank's T rows back. The backward runs each collective the other way: the output's
 * gradient all-gathered, the input's and the probabilities' reduce-scattered.
 * The local columns are kept on the host: the gathered map comes to the host once per layer (the
 * experts' sizes need it there, as Megatron's tokens_per_expert.cpu()), is masked there and goes
 * back, so that the device's permute_map sees this rank's experts only. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "kernels/moe.h"
#include "model/block.h"

static int group_size(const mc_gpt_config_t *c)
{
    return (c->moe.ep > 1 ? c->moe.ep : 1) * (c->moe.etp > 1 ? c->moe.etp : 1);
}

void mc_moe_allgather_plan(mc_gpt_t *m, mc_alloc_t *a, mc_moe_acts_t *s, long T, long Rr)
{
    const mc_gpt_config_t *c = &m->cfg;
    if (!c->moe.allgather || !mc_moe_dispatched(&c->moe)) return;
    const long nT = group_size(c) * T, E = c->moe.num_experts, i4 = (long)sizeof(int32_t);
    s->ag_rows = mc_gpt_take(a, Rr * i4);
    s->ag_row_of = mc_gpt_take(a, nT * E * i4);
    s->ag_split = mc_gpt_take(a, E * i4);
}

void mc_moe_allgather_plan_ws(mc_gpt_t *m, mc_alloc_t *ws, long T)
{
    const mc_gpt_config_t *c = &m->cfg;
    if (!c->moe.allgather || !mc_moe_dispatched(&c->moe)) return;
    const long nT = group_size(c) * T, E = c->moe.num_experts, e = (long)mc_dtype_size(c->dt);
    mc_moe_ws_t *w = &m->moe_ws;
    w->ag_h = mc_gpt_take(ws, nT * c->hidden * e);
    w->ag_probs = mc_gpt_take(ws, nT * E * e);
    w->ag_map = mc_gpt_take(ws, nT * E);
}

/* The gathered map with this rank's experts' columns only (on the device, through the host),
 * their sizes into split (host) and s->ag_split (device); returns the rows they take. */
static long local_map(mc_layer_run_t *r, mc_moe_acts_t *s, long nT, long *split)
{
    const mc_backend_t *be = r->be;
    const mc_moe_cfg_t *q = &r->c->moe;
    mc_moe_ws_t *w = &r->m->moe_ws;
    const int E = q->num_experts, n = E / (q->ep > 1 ? q->ep : 1), first = q->ep_rank * n;
    const size_t bytes = (size_t)nT * (size_t)E;
    if (!w->ag_map_host && !(w->ag_map_host = malloc(bytes)))
        mc_fatal("out of host memory for the MoE allgather dispatcher");
    be->memcpy_d2h(be, w->ag_map_host, w->ag_map, bytes);
    int32_t counts[MC_MOE_MAX_EXPERTS] = {0};
    long rows = 0;
    for (long t = 0; t < nT; t++) {
        uint8_t *row = w->ag_map_host + t * E;
        memset(row, 0, (size_t)first);
        memset(row + first + n, 0, (size_t)(E - first - n));
        for (int j = 0; j < n; j++) counts[j] += row[first + j] != 0;
    }
    for (int j = 0; j < n; j++) rows += split[j] = counts[j];
    be->memcpy_h2d(be, w->ag_map, w->ag_map_host, bytes);
    be->memcpy_h2d(be, s->ag_split, counts, (size_t)n * sizeof(int32_t));
    return rows;
}

long mc_moe_allgather_dispatch(mc_layer_run_t *r, mc_moe_acts_t *s, const void *in,
                               const void *probs, const uint8_t *map, long *split)
{
    const mc_backend_t *be = r->be;
    mc_gpt_t *m = r->m;
    mc_moe_ws_t *w = &m->moe_ws;
    const mc_dtype_t dt = r->c->dt;
    const int E = r->c->moe.num_experts, H = r->c->hidden;
    const long T = mc_moe_tokens(r), nT = group_size(r->c) * T;
    mc_all_gather(m->comm, m->tp_ep_group, map, w->ag_map, (size_t)(T * E), MC_DT_U8);
    mc_all_gather(m->comm, m->tp_ep_group, probs, w->ag_probs, (size_t)(T * E), dt);
    mc_all_gather(m->comm, m->tp_ep_group, in, w->ag_h, (size_t)(T * H), dt);
    const long rows = local_map(r, s, nT, split);
    be->moe->permute_map(be, dt, s->ag_rows, s->ag_row_of, s->ex_p, w->ag_probs, w->ag_map, nT, E,
                         rows);
    be->moe->permute(be, dt, s->ex_x, w->ag_h, s->ag_rows, rows, H);
    return rows;
}

void mc_moe_allgather_combine(mc_layer_run_t *r, mc_moe_acts_t *s, const void *y, void *out)
{
    mc_gpt_t *m = r->m;
    const mc_dtype_t dt = r->c->dt;
    const int E = r->c->moe.num_experts, H = r->c->hidden;
    const long T = mc_moe_tokens(r), nT = group_size(r->c) * T;
    r->be->moe->unpermute(r->be, dt, dt, m->moe_ws.ag_h, y, s->ag_row_of, NULL, nT, E, H);
    mc_reduce_scatter(m->comm, m->tp_ep_group, m->moe_ws.ag_h, out, (size_t)(T * H), dt, MC_OP_SUM);
}

long mc_moe_allgather_dispatch_backward(mc_layer_run_t *r, mc_moe_acts_t *s, const void *dy,
                                        void *d_rows, long *split)
{
    const mc_backend_t *be = r->be;
    mc_gpt_t *m = r->m;
    const int E = r->c->moe.num_experts, n = E / (r->c->moe.ep > 1 ? r->c->moe.ep : 1);
    const long T = mc_moe_tokens(r);
    int32_t counts[MC_MOE_MAX_EXPERTS];
    be->memcpy_d2h(be, counts, s->ag_split, (size_t)n * sizeof(int32_t));
    long rows = 0;
    for (int j = 0; j < n; j++) rows += split[j] = counts[j];
    mc_all_gather(m->comm, m->tp_ep_group, dy, m->moe_ws.ag_h, (size_t)(T * r->c->hidden),
                  r->c->dt);
    be->moe->permute(be, r->c->dt, d_rows, m->moe_ws.ag_h, s->ag_rows, rows, r->c->hidden);
    return rows;
}

void mc_moe_allgather_combine_backward(mc_layer_run_t *r, mc_moe_acts_t *s, const void *d_x,
                                       const void *d_p, void *din, void *dprobs)
{
    const mc_backend_t *be = r->be;
    mc_gpt_t *m = r->m;
    mc_moe_ws_t *w = &m->moe_ws;
    const mc_dtype_t dt = r->c->dt;
    const int E = r->c->moe.num_experts, H = r->c->hidden;
    const long T = mc_moe_tokens(r), nT = group_size(r->c) * T;
    be->moe->unpermute(be, dt, dt, w->ag_h, d_x, s->ag_row_of, NULL, nT, E, H);
    mc_reduce_scatter(m->comm, m->tp_ep_group, w->ag_h, din, (size_t)(T * H), dt, MC_OP_SUM);
    /* the probabilities' gradient: [n T * E] "tokens" of one expert each, 0 outside this rank's
     * experts, summed over the group (the etp ranks' partial sums too) */
    be->moe->unpermute(be, dt, dt, w->ag_probs, d_p, s->ag_row_of, NULL, nT * E, 1, 1);
    mc_reduce_scatter(m->comm, m->tp_ep_group, w->ag_probs, dprobs, (size_t)(T * E), dt, MC_OP_SUM);
}
