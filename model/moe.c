/* The MoE layer (Megatron-core's MoELayer, transformer/moe/moe_layer.py) as a layer's MLP block:
 * the router (TopKRouter: logits = linear(x, router.weight), the top-k, the aux loss), the token
 * dispatcher's local steps (permute the tokens expert by expert, unpermute summing each token's
 * expert outputs), and the experts (SequentialMLP: each expert a SwiGLU MLP over its tokens,
 * the routing probability applied after the activation, before linear_fc2, as mlp.py does with
 * per_token_scale), all experts' GEMMs in one grouped call over their separate tensors
 * (SequentialMLP's parameters: local_experts.<j>.linear_fc1 and linear_fc2, expert after expert). One rank holds every expert (ep 1,
 * tp 1): the alltoall and allgather dispatchers then move nothing. The router's losses
 * (model/moe_loss.c) are not added to the lm loss: as MoEAuxLossAutoScaler does, the backward
 * injects their gradients, scaled by the loss scale over the microbatches (m->moe_aux_grad), into
 * the router's logits. */
#include <math.h>
#include <stddef.h>

#include "base/error.h"
#include "kernels/moe.h"
#include "model/block.h"

static void moe_params(mc_gpt_t *m, int layer)
{
    const mc_gpt_config_t *c = &m->cfg;
    const int H = c->hidden, E = c->moe.num_experts, F = c->moe.ffn;
    /* the router's init_method and the experts' init / scaled output init, as the dense MLP's */
    const float out_std = c->init_std / sqrtf(2.0f * (float)c->num_layers);
    mc_gpt_add_param(m, MC_PK_ROUTER_W, layer, E, H, c->init_std, 0);
    for (int e = 0; e < E; e++) {
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

static void moe_plan(mc_gpt_t *m, mc_alloc_t *a, void *acts)
{
    const mc_gpt_config_t *c = &m->cfg;
    mc_moe_acts_t *s = acts;
    const int E = c->moe.num_experts, F = c->moe.ffn, H = c->hidden;
    const long e = (long)mc_dtype_size(c->dt), i4 = (long)sizeof(int32_t);
    long T, R;
    sizes(c, &T, &R);
    s->logits = mc_gpt_take(a, T * E * e);
    s->probs = mc_gpt_take(a, T * E * e);
    s->map = mc_gpt_take(a, T * E);
    s->aux_counts = mc_gpt_take(a, E * (long)sizeof(float));
    s->rows = mc_gpt_take(a, R * i4);
    s->row_of = mc_gpt_take(a, T * E * i4);
    s->pprobs = mc_gpt_take(a, R * e);
    s->x = mc_gpt_take(a, R * H * e);
    s->fc1 = mc_gpt_take(a, R * 2 * F * e);
    s->act = mc_gpt_take(a, R * F * e);
    s->scaled = mc_gpt_take(a, R * F * e);
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
    (void)acts;
    w->y = mc_gpt_take(ws, R * H * e);
    w->d_y = mc_gpt_take(ws, R * H * e);
    w->d_scaled = mc_gpt_take(ws, R * F * e);
    w->d_act = mc_gpt_take(ws, R * F * e);
    w->d_fc1 = mc_gpt_take(ws, R * 2 * F * e);
    w->d_x = mc_gpt_take(ws, R * H * e);
    w->d_pprobs = mc_gpt_take(ws, R * e);
    w->dprobs = mc_gpt_take(ws, T * E * e);
    w->dlogits = mc_gpt_take(ws, T * E * e);
    w->psum = mc_gpt_take(ws, E * (long)sizeof(float));
    w->counts = mc_gpt_take(ws, E * (long)sizeof(int32_t));
    mc_moe_losses_plan_shared(m, ws);
}

/* Each expert's linear_fc1 and linear_fc2 in the parameter (or, grads, the gradient) buffer. */
static void expert_ptrs(const mc_layer_run_t *r, bool grads, void **fc1, void **fc2)
{
    mc_gpt_t *m = r->m;
    for (int i = m->layer_param[r->local]; i < m->layer_param[r->local + 1]; i++) {
        const mc_param_t *p = &m->params[i];
        void *at = grads ? mc_gpt_grad_at(m, p->offset) : mc_gpt_param_at(m, p->offset);
        if (p->kind == MC_PK_EXPERT_FC1_W) fc1[p->expert] = at;
        else if (p->kind == MC_PK_EXPERT_FC2_W) fc2[p->expert] = at;
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

static void *moe_forward(mc_layer_run_t *r, void *acts, const void *in)
{
    const mc_backend_t *be = r->be;
    const mc_gpt_config_t *c = r->c;
    const mc_moe_cfg_t *q = &c->moe;
    mc_moe_acts_t *s = acts;
    void *const *w = r->w;
    mc_gpt_t *m = r->m;
    const mc_dtype_t dt = c->dt;
    const int H = c->hidden, E = q->num_experts, F = q->ffn;
    const long T = r->N;

    be->linear_forward(be, dt, s->logits, in, w[MC_PK_ROUTER_W], NULL, (int)T, H, E);
    be->moe->route(be, dt, &q->router, s->probs, s->map, s->logits, NULL, T);
    mc_moe_losses_forward(r, s);
    const long R = expert_split(r, s->map);
    expert_ptrs(r, false, m->moe_ws.fc1, m->moe_ws.fc2);
    be->moe->permute_map(be, dt, s->rows, s->row_of, s->pprobs, s->probs, s->map, T, E, R);
    be->moe->permute(be, dt, s->x, in, s->rows, R, H);
    be->moe->grouped_linear_forward(be, dt, s->fc1, s->x, (const void *const *)m->moe_ws.fc1,
                                    m->moe_ws.split, E, H, 2 * F);
    be->swiglu_forward(be, dt, s->act, s->fc1, (int)R, F);
    be->moe->scale_rows(be, dt, dt, s->scaled, s->act, s->pprobs, R, F);
    be->moe->grouped_linear_forward(be, dt, m->moe_ws.y, s->scaled,
                                    (const void *const *)m->moe_ws.fc2, m->moe_ws.split, E, F, H);
    be->moe->unpermute(be, dt, dt, m->tmp_h, m->moe_ws.y, s->row_of, NULL, T, E, H);
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
    be->moe->route_backward(be, dt, &q->router, w->dlogits, w->dprobs, s->logits, NULL, NULL, T);
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
    const mc_dtype_t dt = c->dt, gdt = c->gdt;
    const int H = c->hidden, E = q->num_experts, F = q->ffn;
    const long T = r->N, R = expert_split(r, s->map);

    be->moe->unpermute_backward(be, dt, dt, w->d_y, NULL, dy, NULL, s->rows, NULL, R, H);
    expert_ptrs(r, false, w->fc1, w->fc2);
    expert_ptrs(r, true, w->dfc1, w->dfc2);
    be->moe->grouped_linear_backward(be, dt, gdt, w->d_scaled, w->dfc2, w->d_y, s->scaled,
                                     (const void *const *)w->fc2, w->split, E, F, H);
    be->moe->scale_rows_backward(be, dt, dt, w->d_act, w->d_pprobs, w->d_scaled, s->act, s->pprobs,
                                 R, F);
    be->swiglu_backward(be, dt, w->d_fc1, w->d_act, s->fc1, (int)R, F);
    be->moe->grouped_linear_backward(be, dt, gdt, w->d_x, w->dfc1, w->d_fc1, s->x,
                                     (const void *const *)w->fc1, w->split, E, H, 2 * F);
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
