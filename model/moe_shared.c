/* The MoE layer's shared expert (Megatron-core's SharedExpertMLP, transformer/moe/
 * shared_experts.py, as moe_layer.py runs it): the dense MLP (model/mlp.c) of
 * --moe-shared-expert-intermediate-size columns over tp, linear_fc1 column- and linear_fc2
 * row-parallel (sequence parallel as the layer's), applied to the MoE layer's input (the
 * pre_mlp_layernorm's output); its output is added to the routed experts' (combine: output +
 * shared_expert_output). With --moe-shared-expert-gate the output is first multiplied per token
 * by sigmoid(x @ gate_weight^T), gate_weight [1, H] (init_method), whose tokens are the rank's
 * sequence rows. --moe-shared-expert-overlap runs it after the router instead of before it
 * (model/moe.c); the numbers are the same (Megatron's differ only in the order autograd sums the
 * input's gradient). The gate's sigmoid and its gradient are the router's op with one expert,
 * top-1, sigmoid scores (probs = sigmoid(logits), as topk 1 leaves them unnormalised). */
#include <math.h>

#include "kernels/moe.h"
#include "model/block.h"

static const mc_moe_router_t k_gate = {.num_experts = 1, .topk = 1, .sigmoid = 1};

void mc_moe_shared_params(mc_gpt_t *m, int layer)
{
    const mc_gpt_config_t *c = &m->cfg;
    const int H = c->hidden, F = c->moe.shared_ffn;
    if (!F) return;
    /* MLP's init: init_method for linear_fc1 (and gate_weight), output_layer_init_method for
     * linear_fc2 */
    const float out_std = c->init_std / sqrtf(2.0f * (float)c->num_layers);
    if (c->moe.shared_gate) mc_gpt_add_param(m, MC_PK_SHARED_GATE_W, layer, 1, H, c->init_std, 0);
    mc_gpt_add_param(m, MC_PK_SHARED_FC1_W, layer, c->swiglu ? 2 * F : F, H, c->init_std, 0);
    mc_gpt_add_param(m, MC_PK_SHARED_FC2_W, layer, H, F, out_std, 0);
}

void mc_moe_shared_plan(mc_gpt_t *m, mc_alloc_t *a, mc_moe_acts_t *s)
{
    const mc_gpt_config_t *c = &m->cfg;
    if (!c->moe.shared_ffn) return;
    mc_mlp_run_plan(m, a, &s->shared, c->moe.shared_ffn / c->tp);
    if (!c->moe.shared_gate) return;
    const long T = (long)mc_gpt_tp_dims(c).seq * c->max_batch, e = (long)mc_dtype_size(c->dt);
    s->sh_out = mc_gpt_take(a, T * c->hidden * e);
    s->sh_logit = mc_gpt_take(a, T * e);
    s->sh_gate = mc_gpt_take(a, T * e);
}

void mc_moe_shared_plan_ws(mc_gpt_t *m, mc_alloc_t *ws)
{
    const mc_gpt_config_t *c = &m->cfg;
    mc_moe_ws_t *w = &m->moe_ws;
    if (!c->moe.shared_ffn) return;
    mc_mlp_run_plan_ws(m, ws, &w->shared, c->moe.shared_ffn / c->tp);
    const long T = (long)mc_gpt_tp_dims(c).seq * c->max_batch, e = (long)mc_dtype_size(c->dt);
    w->sh_y = mc_gpt_take(ws, T * c->hidden * e);
    w->sh_din = mc_gpt_take(ws, T * c->hidden * e);
    if (!c->moe.shared_gate) return;
    w->sh_din_gate = mc_gpt_take(ws, T * c->hidden * e);
    w->sh_dgate = mc_gpt_take(ws, T * e);
    w->sh_dlogit = mc_gpt_take(ws, T * e);
    w->sh_map = mc_gpt_take(ws, T);
}

/* The layer's shared linear_fc1 and linear_fc2 (no biases: Megatron refuses them). */
static mc_mlp_run_t shared_mlp(const mc_layer_run_t *r)
{
    void *const *w = r->w, *const *gw = r->gw;
    return (mc_mlp_run_t){
        .ffn = r->c->moe.shared_ffn / r->c->tp,
        .w1 = w[MC_PK_SHARED_FC1_W],
        .w2 = w[MC_PK_SHARED_FC2_W],
        .dw1 = gw[MC_PK_SHARED_FC1_W],
        .dw2 = gw[MC_PK_SHARED_FC2_W],
        .ws = &r->m->moe_ws.shared,
    };
}

void mc_moe_shared_forward(mc_layer_run_t *r, mc_moe_acts_t *s, const void *in)
{
    const mc_backend_t *be = r->be;
    const mc_gpt_config_t *c = r->c;
    mc_moe_ws_t *w = &r->m->moe_ws;
    if (!c->moe.shared_ffn) return;
    const mc_mlp_run_t p = shared_mlp(r);
    const long T = mc_moe_tokens(r);
    /* the MLP's output lands in a driver workspace the routed path reuses: keep it */
    const void *o = mc_mlp_run_forward(r, &p, &s->shared, in);
    be->memcpy_d2d(be, s->sh_out ? s->sh_out : w->sh_y, o, (size_t)r->NL * mc_dtype_size(c->dt));
    if (!c->moe.shared_gate) return;
    be->linear_forward(be, c->dt, s->sh_logit, in, r->w[MC_PK_SHARED_GATE_W], NULL, (int)T,
                       c->hidden, 1);
    be->moe->route(be, c->dt, &k_gate, s->sh_gate, w->sh_map, s->sh_logit, NULL, T);
}

void mc_moe_shared_add(mc_layer_run_t *r, mc_moe_acts_t *s, void *y)
{
    const mc_backend_t *be = r->be;
    const mc_gpt_config_t *c = r->c;
    mc_moe_ws_t *w = &r->m->moe_ws;
    if (!c->moe.shared_ffn) return;
    if (c->moe.shared_gate)
        be->moe->scale_rows(be, c->dt, c->dt, w->sh_y, s->sh_out, s->sh_gate, mc_moe_tokens(r),
                            c->hidden);
    be->add(be, c->dt, y, y, w->sh_y, r->NL);
}

void mc_moe_shared_backward(mc_layer_run_t *r, mc_moe_acts_t *s, const void *in, const void *dy,
                            void *din)
{
    const mc_backend_t *be = r->be;
    const mc_gpt_config_t *c = r->c;
    mc_moe_ws_t *w = &r->m->moe_ws;
    if (!c->moe.shared_ffn) return;
    const mc_mlp_run_t p = shared_mlp(r);
    const long T = mc_moe_tokens(r);
    const int H = c->hidden;
    void *d_out = (void *)dy; /* the MLP's backward reads it only */
    if (c->moe.shared_gate) {
        /* output * gate: the MLP's output gradient dy * gate, the gate's dot(dy, output) */
        be->moe->scale_rows_backward(be, c->dt, c->dt, w->sh_y, w->sh_dgate, dy, s->sh_out,
                                     s->sh_gate, T, H);
        be->moe->route_backward(be, c->dt, &k_gate, w->sh_dlogit, w->sh_dgate, s->sh_logit, NULL,
                                NULL, T);
        be->linear_backward(be, c->dt, c->gdt, w->sh_din_gate, r->gw[MC_PK_SHARED_GATE_W], NULL,
                            w->sh_dlogit, in, r->w[MC_PK_SHARED_GATE_W], (int)T, H, 1);
        d_out = w->sh_y;
    }
    mc_mlp_run_backward(r, &p, &s->shared, in, d_out, w->sh_din);
    be->add(be, c->dt, din, din, w->sh_din, r->NL);
    if (c->moe.shared_gate) be->add(be, c->dt, din, din, w->sh_din_gate, r->NL);
}
