/* Token dropping (Megatron core_v0.15.0's apply_router_token_dropping in moe_utils.py, called by
 * TopKRouter.routing after the top-k): with --moe-expert-capacity-factor each expert keeps at most
 * get_capacity(T * topk, E, factor) of the T tokens this rank routes in a microbatch (its own
 * tokens: under sequence parallelism its sequence rows, under expert parallelism before the
 * all-to-all), the best by probability (--moe-token-drop-policy probs) or the first in token
 * order (position); the others' probabilities become 0 and they skip the expert. With
 * --moe-pad-expert-input-to-capacity the capacity mask itself is the map: every expert takes
 * exactly `capacity` rows, the missing ones filled by tokens not routed to it (probability 0, so
 * their rows add nothing to the output and carry no gradient into the weights).
 * The aux losses read the top-k of their own scores (compute_routing_scores_for_aux_loss): no
 * dropping there; the expert bias counts the map after it (router.py). */
#include "base/error.h"
#include "kernels/moe.h"
#include "model/block.h"

long mc_moe_capacity_tokens(const mc_moe_cfg_t *q, long T)
{
    const long cap = mc_moe_expert_capacity(T * q->router.topk, q->num_experts, q->capacity_factor);
    /* torch.topk(k=capacity) over T tokens needs capacity <= T: Megatron fails beyond; here
     * the op keeps every token then (cap clamped), the plan sizes for that */
    return cap < 0 ? 0 : cap < T ? cap : T;
}

/* The routed (token, expert) pairs kept with padding: the capacity op again without the padding
 * (the same choice among the routed tokens), counted; the log's only. */
static long kept_with_padding(mc_layer_run_t *r, const mc_moe_acts_t *s, long T, long cap)
{
    const mc_backend_t *be = r->be;
    mc_moe_ws_t *w = &r->m->moe_ws;
    const mc_moe_cfg_t *q = &r->c->moe;
    const int E = q->num_experts;
    /* probs_out is not wanted: the workspace's dprobs [T, E] is free during the forward */
    be->moe->capacity(be, r->c->moe.rdt, w->dprobs, w->kept, s->probs, s->map, T, E, cap,
                      q->drop_by_position, 0);
    be->moe->tokens_per_expert(be, w->counts, w->kept, T, E);
    int32_t n[MC_MOE_MAX_EXPERTS];
    be->memcpy_d2h(be, n, w->counts, (size_t)E * sizeof(int32_t));
    long kept = 0;
    for (int e = 0; e < E; e++) kept += n[e];
    return kept;
}

const uint8_t *mc_moe_drop(mc_layer_run_t *r, mc_moe_acts_t *s, const void **probs)
{
    const mc_moe_cfg_t *q = &r->c->moe;
    *probs = s->probs;
    if (!q->drop) return s->map;
    const long T = mc_moe_tokens(r), cap = mc_moe_capacity_tokens(q, T);
    r->be->moe->capacity(r->be, r->c->moe.rdt, s->cap_probs, s->cap_map, s->probs, s->map, T,
                         q->num_experts, cap, q->drop_by_position, q->pad_to_capacity);
    *probs = s->cap_probs;
    return s->cap_map;
}

void mc_moe_count_dropped(mc_layer_run_t *r, const mc_moe_acts_t *s, long kept)
{
    const mc_moe_cfg_t *q = &r->c->moe;
    if (!q->drop || !r->training || !r->grad)
        return; /* once per training forward, as the bias's counts */
    const long T = mc_moe_tokens(r), routed = T * q->router.topk;
    if (q->pad_to_capacity) kept = kept_with_padding(r, s, T, mc_moe_capacity_tokens(q, T));
    r->m->moe_routed += (double)routed;
    r->m->moe_dropped += (double)(routed - kept);
}

void mc_gpt_moe_take_dropped(mc_gpt_t *m, double out[2])
{
    out[0] = m->moe_routed;
    out[1] = m->moe_dropped;
    m->moe_routed = m->moe_dropped = 0;
}
