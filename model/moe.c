/* The MoE layer (Megatron-core's MoELayer, transformer/moe/moe_layer.py) as a layer's MLP block:
 * the router (TopKRouter: logits = linear(x, router.weight), the top-k, the aux loss), the token
 * dispatcher's local steps (permute the tokens expert by expert, unpermute summing each token's
 * expert outputs), and the experts (SequentialMLP: each expert a SwiGLU MLP over its tokens,
 * the routing probability applied after the activation, before linear_fc2, as mlp.py does with
 * per_token_scale), all experts' GEMMs in one grouped call over their separate tensors
 * (SequentialMLP's parameters: local_experts.<j>.linear_fc1 and linear_fc2, expert after expert).
 * With tensor parallelism (sequence parallel) the layer's input is this rank's sequence rows: the
 * router and the permutation see those tokens only. Parallel folding: with
 * --expert-model-parallel-size ep each rank holds E/ep experts, each split over etp
 * (--expert-tensor-parallel-size: linear_fc1 column-, linear_fc2 row-parallel), and the alltoall
 * dispatcher moves the rows to them over the ep group, all-gathers them over etp, and back
 * (reduce-scatter over etp, all-to-all over ep), or (--moe-token-dispatcher-type allgather,
 * Megatron's default) model/moe_allgather.c's dispatcher gathers every token of the etp x ep
 * group and reduce-scatters the outputs back; at ep 1 and etp 1 one rank holds every expert and
 * nothing moves. The router's losses (model/moe_loss.c) are not added to the lm loss:
 * as MoEAuxLossAutoScaler does, the backward injects their gradients, scaled by the loss scale
 * over the microbatches (m->moe_aux_grad), into the router's logits. Token dropping (capacity)
 * is model/moe_capacity.c's: the map it leaves is the one dispatched. The shared expert, added to
 * the routed output, is model/moe_shared.c's. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "kernels/moe.h"
#include "model/block.h"

static int etp_of(const mc_gpt_config_t *c) { return c->moe.etp > 1 ? c->moe.etp : 1; }

static int ep_of(const mc_gpt_config_t *c) { return c->moe.ep > 1 ? c->moe.ep : 1; }

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
    mc_moe_shared_params(m, layer);
}

/* T tokens (this rank's sequence rows), R routed rows of the largest microbatch (padded to
 * capacity: E * capacity of them, more than T * topk with a factor above 1) */
static void sizes(const mc_gpt_config_t *c, long *T, long *R)
{
    *T = (long)mc_gpt_tp_dims(c).seq * c->max_batch;
    *R = *T * c->moe.router.topk;
    if (c->moe.drop && c->moe.pad_to_capacity) {
        const long padded = (long)c->moe.num_experts * mc_moe_capacity_tokens(&c->moe, *T);
        *R = padded > *R ? padded : *R;
    }
}

/* The rows this rank's experts can take: every ep and etp rank's tokens, each to at most
 * min(topk, E/ep) of them, or padded, capacity rows per local expert (R without the
 * dispatcher). */
static long recv_rows(const mc_gpt_config_t *c, long T, long R)
{
    if (!mc_moe_dispatched(&c->moe)) return R;
    int first, n;
    local_experts(c, &first, &n);
    const int k = c->moe.router.topk;
    long per_rank = T * (k < n ? k : n);
    if (c->moe.drop && c->moe.pad_to_capacity && n * mc_moe_capacity_tokens(&c->moe, T) > per_rank)
        per_rank = n * mc_moe_capacity_tokens(&c->moe, T);
    return (long)ep_of(c) * etp_of(c) * per_rank;
}

/* mc_gpt_take, or NULL where the buffer is not wanted (the allgather dispatcher's layer has no
 * permutation of its own tokens, nor the alltoall dispatcher's staging). */
static void *take_unless(mc_alloc_t *a, bool skip, long bytes)
{
    return skip ? NULL : mc_gpt_take(a, bytes);
}

static bool allgather_of(const mc_gpt_config_t *c)
{
    return c->moe.allgather && mc_moe_dispatched(&c->moe);
}

static void moe_plan(mc_gpt_t *m, mc_alloc_t *a, void *acts)
{
    const mc_gpt_config_t *c = &m->cfg;
    mc_moe_acts_t *s = acts;
    const int E = c->moe.num_experts, F = c->moe.ffn / etp_of(c), H = c->hidden;
    const long e = (long)mc_dtype_size(c->dt), i4 = (long)sizeof(int32_t);
    long T, R;
    sizes(c, &T, &R);
    const long Rr = recv_rows(c, T, R);
    s->logits = mc_gpt_take(a, T * E * e);
    s->probs = mc_gpt_take(a, T * E * e);
    s->map = mc_gpt_take(a, T * E);
    s->cap_map = c->moe.drop ? mc_gpt_take(a, T * E) : NULL;
    s->cap_probs = c->moe.drop ? mc_gpt_take(a, T * E * e) : NULL;
    s->aux_counts = mc_gpt_take(a, E * (long)sizeof(float));
    const bool ag = allgather_of(c);
    s->rows = take_unless(a, ag, R * i4);
    s->row_of = take_unless(a, ag, T * E * i4);
    s->pprobs = take_unless(a, ag, R * e);
    s->x = take_unless(a, ag, R * H * e);
    s->fc1 = mc_gpt_take(a, Rr * 2 * F * e);
    s->act = mc_gpt_take(a, Rr * F * e);
    s->scaled = mc_gpt_take(a, Rr * F * e);
    const bool d = mc_moe_dispatched(&c->moe);
    s->ex_x = d ? mc_gpt_take(a, Rr * H * e) : s->x;
    s->ex_p = d ? mc_gpt_take(a, Rr * e) : s->pprobs;
    mc_moe_allgather_plan(m, a, s, T, Rr);
    mc_moe_losses_plan(m, a, s);
    mc_moe_shared_plan(m, a, s);
}

/* The dispatcher's host plan arrays for n chunks and etp ranks, one allocation (host_block,
 * freed by mc_gpt_free). */
static void host_plan(mc_moe_ws_t *w, int n, int etp)
{
    char *h = calloc(1, (size_t)n * (2 * sizeof(long) + 2 * sizeof(int) + sizeof(int32_t)) +
                            (size_t)etp * sizeof(size_t));
    if (!h) mc_fatal("out of host memory for the MoE dispatcher");
    w->host_block = h;
    w->chunk_by_rank = (long *)h;
    w->chunk_by_expert = w->chunk_by_rank + n;
    w->etp_rows = (size_t *)(w->chunk_by_expert + n);
    w->to_expert_major = (int *)(w->etp_rows + etp);
    w->to_rank_major = w->to_expert_major + n;
    w->etp_counts = (int32_t *)(w->to_rank_major + n);
}

static void moe_plan_shared(mc_gpt_t *m, mc_alloc_t *acts, mc_alloc_t *ws)
{
    const mc_gpt_config_t *c = &m->cfg;
    mc_moe_ws_t *w = &m->moe_ws;
    const int E = c->moe.num_experts, F = c->moe.ffn / etp_of(c), H = c->hidden;
    const long e = (long)mc_dtype_size(c->dt);
    long T, R;
    sizes(c, &T, &R);
    const long Rr = recv_rows(c, T, R), Rmax = Rr > R ? Rr : R;
    (void)acts;
    w->y = mc_gpt_take(ws, Rr * H * e);
    const bool ag = allgather_of(c);
    w->d_y = take_unless(ws, ag, R * H * e);
    w->d_scaled = mc_gpt_take(ws, Rr * F * e);
    w->d_act = mc_gpt_take(ws, Rr * F * e);
    w->d_fc1 = mc_gpt_take(ws, Rr * 2 * F * e);
    w->d_x = take_unless(ws, ag, R * H * e);
    w->d_pprobs = take_unless(ws, ag, R * e);
    w->dprobs = mc_gpt_take(ws, T * E * e);
    w->dlogits = mc_gpt_take(ws, T * E * e);
    w->psum = mc_gpt_take(ws, E * (long)sizeof(float));
    w->counts = mc_gpt_take(ws, E * (long)sizeof(int32_t));
    w->kept = c->moe.drop && c->moe.pad_to_capacity ? mc_gpt_take(ws, T * E) : NULL;
    const bool d = mc_moe_dispatched(&c->moe);
    for (int i = 0; i < 2; i++) {
        w->st_h[i] = take_unless(ws, !d || ag, Rmax * H * e);
        w->st_p[i] = take_unless(ws, !d || ag, Rmax * e);
    }
    w->d_x_ex = d ? mc_gpt_take(ws, Rr * H * e) : w->d_x;
    w->d_pprobs_ex = d ? mc_gpt_take(ws, Rr * e) : w->d_pprobs;
    mc_moe_allgather_plan_ws(m, ws, T);
    mc_moe_losses_plan_shared(m, ws);
    mc_moe_shared_plan_ws(m, ws);
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
    be->moe->tokens_per_expert(be, w->counts, map, mc_moe_tokens(r), E);
    be->memcpy_d2h(be, w->counts_host, w->counts, (size_t)E * sizeof(int32_t));
    long n = 0;
    for (int i = 0; i < E; i++) n += w->split[i] = w->counts_host[i];
    return n;
}

/* Megatron's alltoall dispatcher (token_dispatcher.py MoEAlltoAllTokenDispatcher) with parallel
 * folding: the permuted rows, expert by expert, are already grouped by the ep rank that holds
 * each expert (rank q holds experts [q E/ep, (q+1) E/ep)); after the all-to-all over ep each etp
 * rank's rows are all-gathered over etp, so that every etp rank of an expert sees all its rows.
 *
 * The plan of one layer's exchange (preprocess): every ep rank's token counts for this rank's
 * experts (one all-to-all of E/ep counts per rank over ep) and every etp rank's of those (an
 * all-gather over etp: Megatron gathers the counts over tp_ep), on the host; the rows sent to and
 * received from each ep rank, each etp rank's rows, the local experts' sizes, and the orders
 * that turn the gathered chunks (etp rank by etp rank, then ep rank by ep rank, each local expert
 * by local expert) into chunks local expert by local expert (sort_chunks_by_idxs) and back.
 * Needs expert_split's counts; returns the rows the local experts take. */
static long ep_plan(mc_layer_run_t *r)
{
    mc_gpt_t *m = r->m;
    mc_moe_ws_t *w = &m->moe_ws;
    const int ep = ep_of(r->c), etp = etp_of(r->c), E = r->c->moe.num_experts, ranks = ep * etp;
    int first, n;
    local_experts(r->c, &first, &n);
    if (!w->host_block) host_plan(w, etp * E, etp); /* at first use: planning copies the model */
    if (ep > 1) {
        size_t per[MC_MOE_MAX_EXPERTS];
        for (int q = 0; q < ep; q++) per[q] = (size_t)n;
        mc_all_to_all_v(m->comm, m->ep_group, w->counts_host, per, NULL, w->all_counts, per, NULL,
                        MC_DT_I32);
    } else {
        memcpy(w->all_counts, w->counts_host, (size_t)E * sizeof(int32_t));
    }
    if (etp > 1)
        mc_all_gather(m->comm, m->etp_group, w->all_counts, w->etp_counts, (size_t)E, MC_DT_I32);
    else memcpy(w->etp_counts, w->all_counts, (size_t)E * sizeof(int32_t));
    for (int q = 0; q < ep; q++) {
        long sent = 0, got = 0;
        for (int j = 0; j < n; j++) {
            sent += w->counts_host[q * n + j];
            got += w->all_counts[q * n + j];
        }
        w->send_rows[q] = (size_t)sent;
        w->recv_rows[q] = (size_t)got;
    }
    for (int j = 0; j < n; j++) w->split_local[j] = 0;
    long total = 0;
    for (int t = 0; t < etp; t++) {
        long rows = 0;
        for (int q = 0; q < ep; q++)
            for (int j = 0; j < n; j++) {
                const int c = (t * ep + q) * n + j, x = j * ranks + t * ep + q;
                const long k = w->etp_counts[c];
                rows += k;
                w->split_local[j] += k;
                w->chunk_by_rank[c] = k;
                w->chunk_by_expert[x] = k;
                w->to_expert_major[x] = c;
                w->to_rank_major[c] = x;
            }
        w->etp_rows[t] = (size_t)rows;
        total += rows;
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

/* gather_from_sequence_parallel_region over etp with output_split_sizes: this rank's rows (src,
 * etp_rows[etp_rank] of them) to every etp rank, dst their rows in rank order. */
static void etp_gather(mc_layer_run_t *r, const void *src, void *dst, int width)
{
    const int etp = etp_of(r->c);
    const mc_moe_ws_t *w = &r->m->moe_ws;
    const size_t mine = w->etp_rows[r->c->moe.etp_rank] * (size_t)width;
    size_t sc[etp], sd[etp], rc[etp];
    for (int t = 0; t < etp; t++) {
        sc[t] = mine;
        sd[t] = 0;
        rc[t] = w->etp_rows[t] * (size_t)width;
    }
    mc_all_to_all_v(r->m->comm, r->m->etp_group, src, sc, sd, dst, rc, NULL, r->c->dt);
}

/* reduce_scatter_to_sequence_parallel_region over etp with input_split_sizes: src holds every
 * etp rank's rows in rank order, partial sums over this rank's block of the experts; this
 * rank's rows summed over the etp ranks into work (etp blocks of them, the sum in the first). */
static void etp_reduce_scatter(mc_layer_run_t *r, const void *src, void *work, int width)
{
    const int etp = etp_of(r->c);
    const mc_moe_ws_t *w = &r->m->moe_ws;
    const size_t mine = w->etp_rows[r->c->moe.etp_rank] * (size_t)width;
    size_t sc[etp], rc[etp];
    for (int t = 0; t < etp; t++) {
        sc[t] = w->etp_rows[t] * (size_t)width;
        rc[t] = mine;
    }
    mc_all_to_all_v(r->m->comm, r->m->etp_group, src, sc, NULL, work, rc, NULL, r->c->dt);
    const size_t bytes = mine * mc_dtype_size(r->c->dt);
    for (int t = 1; t < etp; t++)
        r->be->add(r->be, r->c->dt, work, work, (const char *)work + (size_t)t * bytes, (long)mine);
}

/* Gathered rank-major chunks (src) into local-expert-major order (dst), or back (!to_expert). */
static void sort_rows(mc_layer_run_t *r, void *dst, const void *src, bool to_expert, int width)
{
    const mc_moe_ws_t *w = &r->m->moe_ws;
    r->be->moe->sort_chunks(r->be, r->c->dt, dst, src,
                            to_expert ? w->chunk_by_rank : w->chunk_by_expert,
                            to_expert ? w->to_expert_major : w->to_rank_major,
                            etp_of(r->c) * r->c->moe.num_experts, width);
}

/* The dispatch of rows of `width` elements: this rank's permuted rows (src) to the local experts'
 * (dst, local expert by local expert): all-to-all over ep, all-gather over etp, sorted; st two
 * staging buffers. */
static void dispatch(mc_layer_run_t *r, const void *src, void *dst, void *const st[2], int width)
{
    const void *x = src;
    if (ep_of(r->c) > 1) {
        exchange(r, x, r->m->moe_ws.send_rows, st[0], r->m->moe_ws.recv_rows, width);
        x = st[0];
    }
    if (etp_of(r->c) > 1) {
        etp_gather(r, x, st[1], width);
        x = st[1];
    }
    sort_rows(r, dst, x, true, width);
}

/* The combine, its exact reverse: the local experts' rows (src) back to this rank's permuted
 * order, summed over etp; returns the buffer holding them (dst, or a staging buffer). */
static const void *combine(mc_layer_run_t *r, const void *src, void *dst, void *const st[2],
                           int width)
{
    sort_rows(r, st[1], src, false, width);
    const void *x = st[1];
    if (etp_of(r->c) > 1) {
        etp_reduce_scatter(r, x, st[0], width);
        x = st[0];
    }
    if (ep_of(r->c) <= 1) return x;
    exchange(r, x, r->m->moe_ws.recv_rows, dst, r->m->moe_ws.send_rows, width);
    return dst;
}

/* The local experts over their rows (s->ex_x, s->ex_p): G experts of split[g] rows each, `rows` in
 * all; linear_fc2's output into moe_ws.y. */
static void experts_forward(mc_layer_run_t *r, mc_moe_acts_t *s, const long *split, int G,
                            long rows)
{
    const mc_backend_t *be = r->be;
    const mc_dtype_t dt = r->c->dt;
    const int H = r->c->hidden, F = r->c->moe.ffn / etp_of(r->c);
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
    const int H = r->c->hidden, F = r->c->moe.ffn / etp_of(r->c);
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
    const long T = mc_moe_tokens(r);

    /* the shared expert before the router, or (--moe-shared-expert-overlap) after it */
    if (!q->shared_overlap) mc_moe_shared_forward(r, s, in);
    be->linear_forward(be, dt, s->logits, in, w[MC_PK_ROUTER_W], NULL, (int)T, H, E);
    be->moe->route(be, dt, &q->router, s->probs, s->map, s->logits,
                   mc_gpt_moe_expert_bias(m, r->local), T);
    mc_moe_losses_forward(r, s);
    const void *probs;
    const uint8_t *map = mc_moe_drop(r, s, &probs);
    const long R = expert_split(r, map);
    mc_moe_count_dropped(r, s, R);
    mc_moe_bias_count(r, ws->counts_host);
    if (allgather_of(c)) {
        /* (the shared expert ran before the router: overlap is the alltoall dispatcher's) */
        const long Rx = mc_moe_allgather_dispatch(r, s, in, probs, map, ws->split_local);
        experts_forward(r, s, ws->split_local, E / ep_of(c), Rx);
        mc_moe_allgather_combine(r, s, ws->y, m->tmp_h);
        mc_moe_shared_add(r, s, m->tmp_h);
        return m->tmp_h;
    }
    be->moe->permute_map(be, dt, s->rows, s->row_of, s->pprobs, probs, map, T, E, R);
    be->moe->permute(be, dt, s->x, in, s->rows, R, H);
    if (q->shared_overlap) mc_moe_shared_forward(r, s, in);
    if (!mc_moe_dispatched(q)) {
        experts_forward(r, s, ws->split, E, R);
        be->moe->unpermute(be, dt, dt, m->tmp_h, ws->y, s->row_of, NULL, T, E, H);
        mc_moe_shared_add(r, s, m->tmp_h);
        return m->tmp_h;
    }
    /* the rows and their probabilities to the ranks of their experts, sorted by local expert,
     * and back: the exact reverse, into this rank's permuted order */
    const long Rx = ep_plan(r);
    dispatch(r, s->x, s->ex_x, ws->st_h, H);
    dispatch(r, s->pprobs, s->ex_p, ws->st_p, 1);
    experts_forward(r, s, ws->split_local, E / ep_of(c), Rx);
    const void *y = combine(r, ws->y, ws->d_y, ws->st_h, H);
    be->moe->unpermute(be, dt, dt, m->tmp_h, y, s->row_of, NULL, T, E, H);
    mc_moe_shared_add(r, s, m->tmp_h);
    return m->tmp_h;
}

/* The router's backward from the probabilities' gradient (moe_ws.dprobs [T, E]): the top-k
 * softmax's, the aux loss's injected gradient, then router.weight's and the input's (into
 * m->tmp_h). */
static void router_backward(mc_layer_run_t *r, mc_moe_acts_t *s, const void *in)
{
    const mc_backend_t *be = r->be;
    const mc_gpt_config_t *c = r->c;
    const mc_moe_cfg_t *q = &c->moe;
    mc_moe_ws_t *w = &r->m->moe_ws;
    const mc_dtype_t dt = c->dt;
    const int E = q->num_experts, H = c->hidden;
    const long T = mc_moe_tokens(r);
    /* dropping multiplied the probs by the capacity's map: no gradient outside it */
    be->moe->route_backward(be, dt, &q->router, w->dlogits, w->dprobs, s->logits,
                            mc_gpt_moe_expert_bias(r->m, r->local), q->drop ? s->cap_map : NULL, T);
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
    const long T = mc_moe_tokens(r), R = expert_split(r, q->drop ? s->cap_map : s->map);

    if (allgather_of(c)) {
        const long Rx = mc_moe_allgather_dispatch_backward(r, s, dy, w->y, w->split_local);
        experts_backward(r, s, w->y, w->split_local, E / ep_of(c), Rx);
        mc_moe_allgather_combine_backward(r, s, w->d_x_ex, w->d_pprobs_ex, din, w->dprobs);
        router_backward(r, s, in);
        be->add(be, dt, din, din, r->m->tmp_h, T * H);
        mc_moe_shared_backward(r, s, in, dy, din);
        return;
    }
    be->moe->unpermute_backward(be, dt, dt, w->d_y, NULL, dy, NULL, s->rows, NULL, R, H);
    const void *dx = w->d_x, *dp = w->d_pprobs;
    if (!mc_moe_dispatched(q)) {
        experts_backward(r, s, w->d_y, w->split, E, R);
    } else {
        /* the dispatcher's backward: the combine's collectives run the dispatch's way, the
         * dispatch's the combine's (the counts exchanged again: the same plan as the forward's) */
        const long Rx = ep_plan(r);
        dispatch(r, w->d_y, w->y, w->st_h, H);
        experts_backward(r, s, w->y, w->split_local, E / ep_of(c), Rx);
        dx = combine(r, w->d_x_ex, w->d_x, w->st_h, H);
        dp = combine(r, w->d_pprobs_ex, w->d_pprobs, w->st_p, 1);
    }
    be->moe->unpermute(be, dt, dt, din, dx, s->row_of, NULL, T, E, H);
    /* the probabilities' gradient per row scattered back to [T, E]: unpermute over T * E
     * "tokens" of one expert each */
    be->moe->unpermute(be, dt, dt, w->dprobs, dp, s->row_of, NULL, T * E, 1, 1);
    router_backward(r, s, in);
    /* the input feeds the router and the dispatcher: autograd's sum of the two (and the shared
     * expert's, after: its linears reuse m->tmp_h) */
    be->add(be, dt, din, din, r->m->tmp_h, T * H);
    mc_moe_shared_backward(r, s, in, dy, din);
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
