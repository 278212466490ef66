/* The MoE layer (Megatron-core's MoELayer, transformer/moe/moe_layer.py) as a layer's MLP block:
 * the router (TopKRouter: logits = linear(x, router.weight), the top-k, the aux loss), the token
 * dispatcher's local steps (permute the tokens expert by expert, unpermute summing each token's
 * expert outputs), and the experts (SequentialMLP: each expert a SwiGLU MLP over its tokens,
 * the routing probability applied after the activation, before linear_fc2, as mlp.py does with
 * per_token_scale), all experts' GEMMs in one grouped call over their separate tensors
 * (SequentialMLP's parameters: local_experts.<j>.linear_fc1 and linear_fc2, expert after expert).
 * With --expert-model-parallel-size ep (tp 1) each rank holds E/ep experts and the alltoall
 * dispatcher moves the rows to them and back over the ep group; at ep 1 one rank holds every
 * expert and nothing moves. The router's losses (model/moe_loss.c) are not added to the lm loss:
 * as MoEAuxLossAutoScaler does, the backward injects their gradients, scaled by the loss scale
 * over the microbatches (m->moe_aux_grad), into the router's logits. */
#include <math.h>
#include <stddef.h>

#include "base/error.h"
#include "kernels/moe.h"
#include "model/block.h"

/* The experts this rank holds: E/ep of them from *first (global indices; all at ep 1). */
static void local_experts(const mc_gpt_config_t *c, int *first, int *n)
{
    const int ep = c->moe.ep > 1 ? c->moe.ep : 1;
    *n = c->moe.num_experts / ep;
    *first = ep > 1 ? c->moe.ep_rank * *n : 0;
}

static void moe_params(mc_gpt_t *m, int layer)
{
    const mc_gpt_config_t *c = &m->cfg;
    const int H = c->hidden, E = c->moe.num_experts, F = c->moe.ffn;
    /* the router's init_method and the experts' init / scaled output init, as the dense MLP's */
    const float out_std = c->init_std / sqrtf(2.0f * (float)c->num_layers);
    mc_gpt_add_param(m, MC_PK_ROUTER_W, layer, E, H, c->init_std, 0);
    int first, n;
    local_experts(c, &first, &n);
    /* p->expert and the name keep the global index: the same init as the single rank's */
    for (int e = first; e < first + n; e++) {
        mc_param_t *p = mc_gpt_add_param(m, MC_PK_EXPERT_FC1_W, layer, 2 * F, H, c->init_std, 0);
        p->expert = e;
        mc_param_name_expert(MC_PK_EXPERT_FC1_W, layer, e, p->name, sizeof(p->name));
        p = mc_gpt_add_param(m, MC_PK_EXPERT_FC2_W, layer, H, F, out_std, 0);
        p->expert = e;
        mc_param_name_expert(MC_PK_EXPERT_FC2_W, layer, e, p->name, sizeof(p->name));
    }
}

/* T tokens, R routed rows of the largest microbatch */
static void sizes(const mc_gpt_config_t *c, long *T, long *R)
{
    *T = (long)c->seq * c->max_batch;
    *R = *T * c->moe.router.topk;
}

/* The rows this rank's experts can receive: every ep rank's tokens, each to at most
 * min(topk, E/ep) of them (R at ep 1). */
static long recv_rows(const mc_gpt_config_t *c, long T, long R)
{
    if (c->moe.ep <= 1) return R;
    int first, n;
    local_experts(c, &first, &n);
    const int k = c->moe.router.topk;
    return (long)c->moe.ep * T * (k < n ? k : n);
}

static void moe_plan(mc_gpt_t *m, mc_alloc_t *a, void *acts)
{
    const mc_gpt_config_t *c = &m->cfg;
    mc_moe_acts_t *s = acts;
    const int E = c->moe.num_experts, F = c->moe.ffn, H = c->hidden;
    const long e = (long)mc_dtype_size(c->dt), i4 = (long)sizeof(int32_t);
    long T, R;
    sizes(c, &T, &R);
    const long Rr = recv_rows(c, T, R);
    s->logits = mc_gpt_take(a, T * E * e);
    s->probs = mc_gpt_take(a, T * E * e);
    s->map = mc_gpt_take(a, T * E);
    s->aux_counts = mc_gpt_take(a, E * (long)sizeof(float));
    s->rows = mc_gpt_take(a, R * i4);
    s->row_of = mc_gpt_take(a, T * E * i4);
    s->pprobs = mc_gpt_take(a, R * e);
    s->x = mc_gpt_take(a, R * H * e);
    s->fc1 = mc_gpt_take(a, Rr * 2 * F * e);
    s->act = mc_gpt_take(a, Rr * F * e);
    s->scaled = mc_gpt_take(a, Rr * F * e);
    s->ex_x = c->moe.ep > 1 ? mc_gpt_take(a, Rr * H * e) : s->x;
    s->ex_p = c->moe.ep > 1 ? mc_gpt_take(a, Rr * e) : s->pprobs;
    mc_moe_losses_plan(m, a, s);
}

static void moe_plan_shared(mc_gpt_t *m, mc_alloc_t *acts, mc_alloc_t *ws)
{
    const mc_gpt_config_t *c = &m->cfg;
    mc_moe_ws_t *w = &m->moe_ws;
    const int E = c->moe.num_experts, F = c->moe.ffn, H = c->hidden;
    const long e = (long)mc_dtype_size(c->dt);
    long T, R;
    sizes(c, &T, &R);
    const long Rr = recv_rows(c, T, R), Rmax = Rr > R ? Rr : R;
    (void)acts;
    w->y = mc_gpt_take(ws, Rr * H * e);
    w->d_y = mc_gpt_take(ws, R * H * e);
    w->d_scaled = mc_gpt_take(ws, Rr * F * e);
    w->d_act = mc_gpt_take(ws, Rr * F * e);
    w->d_fc1 = mc_gpt_take(ws, Rr * 2 * F * e);
    w->d_x = mc_gpt_take(ws, R * H * e);
    w->d_pprobs = mc_gpt_take(ws, R * e);
    w->dprobs = mc_gpt_take(ws, T * E * e);
    w->dlogits = mc_gpt_take(ws, T * E * e);
    w->psum = mc_gpt_take(ws, E * (long)sizeof(float));
    w->counts = mc_gpt_take(ws, E * (long)sizeof(int32_t));
    const bool ep = c->moe.ep > 1;
    w->a2a_h = ep ? mc_gpt_take(ws, Rmax * H * e) : NULL;
    w->a2a_p = ep ? mc_gpt_take(ws, Rmax * e) : NULL;
    w->d_x_ex = ep ? mc_gpt_take(ws, Rr * H * e) : w->d_x;
    w->d_pprobs_ex = ep ? mc_gpt_take(ws, Rr * e) : w->d_pprobs;
    mc_moe_losses_plan_shared(m, ws);
}

/* Each expert's linear_fc1 and linear_fc2 in the parameter (or, grads, the gradient) buffer. */
static void expert_ptrs(const mc_layer_run_t *r, bool grads, void **fc1, void **fc2)
{
    mc_gpt_t *m = r->m;
    int first, n;
    local_experts(r->c, &first, &n);
    for (int i = m->layer_param[r->local]; i < m->layer_param[r->local + 1]; i++) {
        const mc_param_t *p = &m->params[i];
        void *at = grads ? mc_gpt_grad_at(m, p->offset) : mc_gpt_param_at(m, p->offset);
        if (p->kind == MC_PK_EXPERT_FC1_W) fc1[p->expert - first] = at;
        else if (p->kind == MC_PK_EXPERT_FC2_W) fc2[p->expert - first] = at;
    }
}

/* The experts' sizes (tokens per expert, on the host: the grouped GEMM's) of the map; returns the
 * routed rows. */
static long expert_split(mc_layer_run_t *r, const uint8_t *map)
{
    const mc_backend_t *be = r->be;
    mc_moe_ws_t *w = &r->m->moe_ws;
    const int E = r->c->moe.num_experts;
    be->moe->tokens_per_expert(be, w->counts, map, r->N, E);
    be->memcpy_d2h(be, w->counts_host, w->counts, (size_t)E * sizeof(int32_t));
    long n = 0;
    for (int i = 0; i < E; i++) n += w->split[i] = w->counts_host[i];
    return n;
}

/* Expert parallelism, Megatron's alltoall dispatcher (token_dispatcher.py MoEAlltoAllTokenDispatcher)
 * with tp 1: the permuted rows, expert by expert, are already grouped by the ep rank that holds
 * each expert (rank q holds experts [q E/ep, (q+1) E/ep)).
 *
 * The plan of one layer's exchange (preprocess): every ep rank's token counts for this rank's
 * experts, on the host (one all-to-all of E/ep counts per rank), the rows sent to and received
 * from each rank, the local experts' sizes, and the orders that turn the received chunks (source
 * rank by source rank, each local expert by local expert) into chunks local expert by local
 * expert (sort_chunks_by_idxs) and back. Needs expert_split's counts; returns the rows
 * received. */
static long ep_plan(mc_layer_run_t *r)
{
    mc_gpt_t *m = r->m;
    mc_moe_ws_t *w = &m->moe_ws;
    const int ep = r->c->moe.ep;
    int first, n;
    local_experts(r->c, &first, &n);
    size_t per[MC_MOE_MAX_EXPERTS];
    for (int q = 0; q < ep; q++) per[q] = (size_t)n;
    mc_all_to_all_v(m->comm, m->ep_group, w->counts_host, per, NULL, w->all_counts, per, NULL,
                    MC_DT_I32);
    long total = 0;
    for (int j = 0; j < n; j++) w->split_local[j] = 0;
    for (int q = 0; q < ep; q++) {
        long sent = 0, got = 0;
        for (int j = 0; j < n; j++) {
            const long c = w->all_counts[q * n + j];
            sent += w->counts_host[q * n + j];
            got += c;
            w->split_local[j] += c;
            w->chunk_by_rank[q * n + j] = c;
            w->chunk_by_expert[j * ep + q] = c;
            w->to_expert_major[j * ep + q] = q * n + j;
            w->to_rank_major[q * n + j] = j * ep + q;
        }
        w->send_rows[q] = (size_t)sent;
        w->recv_rows[q] = (size_t)got;
        total += got;
    }
    return total;
}

/* The all-to-all of rows of `width` elements over ep: send[q] rows to rank q (packed in rank
 * order), recv[q] rows from it. */
static void exchange(mc_layer_run_t *r, const void *src, const size_t *send, void *dst,
                     const size_t *recv, int width)
{
    const int ep = r->c->moe.ep;
    size_t sc[MC_MOE_MAX_EXPERTS], rc[MC_MOE_MAX_EXPERTS];
    for (int q = 0; q < ep; q++) {
        sc[q] = send[q] * (size_t)width;
        rc[q] = recv[q] * (size_t)width;
    }
    mc_all_to_all_v(r->m->comm, r->m->ep_group, src, sc, NULL, dst, rc, NULL, r->c->dt);
}

/* Received rank-major chunks (src) into local-expert-major order (dst), or back (!to_expert). */
static void sort_rows(mc_layer_run_t *r, void *dst, const void *src, bool to_expert, int width)
{
    const mc_moe_ws_t *w = &r->m->moe_ws;
    r->be->moe->sort_chunks(
        r->be, r->c->dt, dst, src, to_expert ? w->chunk_by_rank : w->chunk_by_expert,
        to_expert ? w->to_expert_major : w->to_rank_major, r->c->moe.num_experts, width);
}

/* The local experts over their rows (s->ex_x, s->ex_p): G experts of split[g] rows each, `rows` in
 * all; linear_fc2's output into moe_ws.y. */
static void experts_forward(mc_layer_run_t *r, mc_moe_acts_t *s, const long *split, int G,
                            long rows)
{
    const mc_backend_t *be = r->be;
    const mc_dtype_t dt = r->c->dt;
    const int H = r->c->hidden, F = r->c->moe.ffn;
    mc_moe_ws_t *w = &r->m->moe_ws;
    expert_ptrs(r, false, w->fc1, w->fc2);
    be->moe->grouped_linear_forward(be, dt, s->fc1, s->ex_x, (const void *const *)w->fc1, split, G,
                                    H, 2 * F);
    be->swiglu_forward(be, dt, s->act, s->fc1, (int)rows, F);
    be->moe->scale_rows(be, dt, dt, s->scaled, s->act, s->ex_p, rows, F);
    be->moe->grouped_linear_forward(be, dt, w->y, s->scaled, (const void *const *)w->fc2, split, G,
                                    F, H);
}

/* Their backward from d_y (the gradient at linear_fc2's output, rows as experts_forward's): the
 * experts' weight gradients accumulate, the gradients at their input and probabilities go to
 * moe_ws.d_x_ex and d_pprobs_ex. */
static void experts_backward(mc_layer_run_t *r, mc_moe_acts_t *s, const void *d_y,
                             const long *split, int G, long rows)
{
    const mc_backend_t *be = r->be;
    const mc_dtype_t dt = r->c->dt, gdt = r->c->gdt;
    const int H = r->c->hidden, F = r->c->moe.ffn;
    mc_moe_ws_t *w = &r->m->moe_ws;
    expert_ptrs(r, false, w->fc1, w->fc2);
    expert_ptrs(r, true, w->dfc1, w->dfc2);
    be->moe->grouped_linear_backward(be, dt, gdt, w->d_scaled, w->dfc2, d_y, s->scaled,
                                     (const void *const *)w->fc2, split, G, F, H);
    be->moe->scale_rows_backward(be, dt, dt, w->d_act, w->d_pprobs_ex, w->d_scaled, s->act, s->ex_p,
                                 rows, F);
    be->swiglu_backward(be, dt, w->d_fc1, w->d_act, s->fc1, (int)rows, F);
    be->moe->grouped_linear_backward(be, dt, gdt, w->d_x_ex, w->dfc1, w->d_fc1, s->ex_x,
                                     (const void *const *)w->fc1, split, G, H, 2 * F);
}

static void *moe_forward(mc_layer_run_t *r, void *acts, const void *in)
{
    const mc_backend_t *be = r->be;
    const mc_gpt_config_t *c = r->c;
    const mc_moe_cfg_t *q = &c->moe;
    mc_moe_acts_t *s = acts;
    void *const *w = r->w;
    mc_gpt_t *m = r->m;
    mc_moe_ws_t *ws = &m->moe_ws;
    const mc_dtype_t dt = c->dt;
    const int H = c->hidden, E = q->num_experts;
    const long T = r->N;

    be->linear_forward(be, dt, s->logits, in, w[MC_PK_ROUTER_W], NULL, (int)T, H, E);
    be->moe->route(be, dt, &q->router, s->probs, s->map, s->logits,
                   mc_gpt_moe_expert_bias(m, r->local), T);
    mc_moe_losses_forward(r, s);
    const long R = expert_split(r, s->map);
    mc_moe_bias_count(r, ws->counts_host);
    be->moe->permute_map(be, dt, s->rows, s->row_of, s->pprobs, s->probs, s->map, T, E, R);
    be->moe->permute(be, dt, s->x, in, s->rows, R, H);
    if (q->ep <= 1) {
        experts_forward(r, s, ws->split, E, R);
        be->moe->unpermute(be, dt, dt, m->tmp_h, ws->y, s->row_of, NULL, T, E, H);
        return m->tmp_h;
    }
    /* the rows and their probabilities to the ranks of their experts, sorted by local expert */
    const long Rr = ep_plan(r);
    exchange(r, s->x, ws->send_rows, ws->a2a_h, ws->recv_rows, H);
    exchange(r, s->pprobs, ws->send_rows, ws->a2a_p, ws->recv_rows, 1);
    sort_rows(r, s->ex_x, ws->a2a_h, true, H);
    sort_rows(r, s->ex_p, ws->a2a_p, true, 1);
    experts_forward(r, s, ws->split_local, E / q->ep, Rr);
    /* and back: the exact reverse, into this rank's permuted order */
    sort_rows(r, ws->a2a_h, ws->y, false, H);
    exchange(r, ws->a2a_h, ws->recv_rows, ws->d_y, ws->send_rows, H);
    be->moe->unpermute(be, dt, dt, m->tmp_h, ws->d_y, s->row_of, NULL, T, E, H);
    return m->tmp_h;
}

/* The router's backward: the probabilities' gradient (d_pprobs per row, scattered back to
 * [T, E]: unpermute over T * E "tokens" of one expert each), the top-k softmax's, the aux loss's
 * injected gradient, then router.weight's and the input's (into m->tmp_h). */
static void router_backward(mc_layer_run_t *r, mc_moe_acts_t *s, const void *in)
{
    const mc_backend_t *be = r->be;
    const mc_gpt_config_t *c = r->c;
    const mc_moe_cfg_t *q = &c->moe;
    mc_moe_ws_t *w = &r->m->moe_ws;
    const mc_dtype_t dt = c->dt;
    const int E = q->num_experts, H = c->hidden;
    const long T = r->N;
    be->moe->unpermute(be, dt, dt, w->dprobs, w->d_pprobs, s->row_of, NULL, T * E, 1, 1);
    be->moe->route_backward(be, dt, &q->router, w->dlogits, w->dprobs, s->logits,
                            mc_gpt_moe_expert_bias(r->m, r->local), NULL, T);
    mc_moe_losses_backward(r, s, w->dlogits);
    be->linear_backward(be, dt, c->gdt, r->m->tmp_h, r->gw[MC_PK_ROUTER_W], NULL, w->dlogits, in,
                        r->w[MC_PK_ROUTER_W], (int)T, H, E);
}

static void moe_backward(mc_layer_run_t *r, void *acts, const void *in, void *dy, void *din)
{
    const mc_backend_t *be = r->be;
    const mc_gpt_config_t *c = r->c;
    const mc_moe_cfg_t *q = &c->moe;
    mc_moe_acts_t *s = acts;
    mc_moe_ws_t *w = &r->m->moe_ws;
    const mc_dtype_t dt = c->dt;
    const int H = c->hidden, E = q->num_experts;
    const long T = r->N, R = expert_split(r, s->map);

    be->moe->unpermute_backward(be, dt, dt, w->d_y, NULL, dy, NULL, s->rows, NULL, R, H);
    if (q->ep <= 1) {
        experts_backward(r, s, w->d_y, w->split, E, R);
    } else {
        /* the dispatcher's backward: the combine's all-to-all runs forward's way, the dispatch's
         * the reverse (the counts exchanged again: the same plan as the forward's) */
        const long Rr = ep_plan(r);
        exchange(r, w->d_y, w->send_rows, w->a2a_h, w->recv_rows, H);
        sort_rows(r, w->y, w->a2a_h, true, H);
        experts_backward(r, s, w->y, w->split_local, E / q->ep, Rr);
        sort_rows(r, w->a2a_h, w->d_x_ex, false, H);
        exchange(r, w->a2a_h, w->recv_rows, w->d_x, w->send_rows, H);
        sort_rows(r, w->a2a_p, w->d_pprobs_ex, false, 1);
        exchange(r, w->a2a_p, w->recv_rows, w->d_pprobs, w->send_rows, 1);
    }
    be->moe->unpermute(be, dt, dt, din, w->d_x, s->row_of, NULL, T, E, H);
    router_backward(r, s, in);
    /* the input feeds the router and the dispatcher: autograd's sum of the two */
    be->add(be, dt, din, din, r->m->tmp_h, T * H);
}

const mc_block_ops_t mc_moe = {
    .name = "moe",
    .acts_at = offsetof(mc_layer_acts_t, mlp.moe),
    .params = moe_params,
    .plan = moe_plan,
    .plan_shared = moe_plan_shared,
    .forward = moe_forward,
    .backward = moe_backward,
};
