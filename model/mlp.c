/* The dense MLP (Megatron-core's MLP, transformer/mlp.py) of one layer: linear_fc1
 * (column-parallel; [gate; up] with SwiGLU, a tp rank holding its rows of each half), the
 * activation (GeLU, squared ReLU, or SwiGLU's silu(gate) * up), linear_fc2 (row-parallel, its
 * output summed over tp). The bias-dropout-add after it is the driver's. The MoE layer's shared
 * expert (model/moe_shared.c) runs the same MLP over its own tensors (mc_mlp_run_*). */
#include <stddef.h>
#include <math.h>

#include "model/block.h"

static void mlp_params(mc_gpt_t *m, int layer)
{
    const mc_gpt_config_t *c = &m->cfg;
    const int H = c->hidden, F = c->ffn, F1 = c->swiglu ? 2 * F : F;
    /* scaled_init_method_normal for linear_fc2, as linear_proj */
    const float out_std = c->init_std / sqrtf(2.0f * (float)c->num_layers);
    mc_gpt_add_param(m, MC_PK_FC1_W, layer, F1, H, c->init_std, 0);
    if (c->bias) mc_gpt_add_param(m, MC_PK_FC1_B, layer, F1, 0, 0, 0.0f);
    mc_gpt_add_param(m, MC_PK_FC2_W, layer, H, F, out_std, 0);
    if (c->bias) mc_gpt_add_param(m, MC_PK_FC2_B, layer, H, 0, 0, 0.0f);
}

void mc_mlp_run_plan(const mc_gpt_t *m, mc_alloc_t *a, mc_mlp_acts_t *s, int ffn)
{
    const mc_gpt_config_t *c = &m->cfg;
    const long SB = (long)c->seq * c->max_batch, e = (long)mc_dtype_size(c->dt);
    s->fc1 = mc_gpt_take(a, SB * (c->swiglu ? 2 * ffn : ffn) * e);
    s->act = mc_gpt_take(a, SB * ffn * e);
}

void mc_mlp_run_plan_ws(const mc_gpt_t *m, mc_alloc_t *ws, mc_mlp_ws_t *w, int ffn)
{
    const mc_gpt_config_t *c = &m->cfg;
    const long SB = (long)c->seq * c->max_batch, e = (long)mc_dtype_size(c->dt);
    w->d_fc1 = mc_gpt_take(ws, SB * (c->swiglu ? 2 * ffn : ffn) * e);
    w->d_act = c->swiglu ? mc_gpt_take(ws, SB * ffn * e) : NULL;
}

static void mlp_plan(mc_gpt_t *m, mc_alloc_t *a, void *acts)
{
    mc_mlp_run_plan(m, a, acts, mc_gpt_tp_dims(&m->cfg).ffn);
}

static void mlp_plan_shared(mc_gpt_t *m, mc_alloc_t *acts, mc_alloc_t *ws)
{
    (void)acts;
    mc_mlp_run_plan_ws(m, ws, &m->mlp_ws, mc_gpt_tp_dims(&m->cfg).ffn);
}

void *mc_mlp_run_forward(mc_layer_run_t *r, const mc_mlp_run_t *p, mc_mlp_acts_t *s, const void *in)
{
    const mc_backend_t *be = r->be;
    const mc_gpt_config_t *c = r->c;
    const int N = r->N, H = c->hidden, F = p->ffn;

    if (c->swiglu) {
        mc_linear_column_forward(r, s->fc1, NULL, in, p->w1, p->b1, H, 2 * F);
        be->swiglu_forward(be, c->dt, s->act, s->fc1, N, F);
    } else {
        mc_linear_column_forward(r, s->act, s->fc1, in, p->w1, p->b1, H, F);
    }
    /* the row-parallel bias joins once, before the sum */
    return mc_linear_row_forward(r, s->act, p->w2, c->tp_rank == 0 ? p->b2 : NULL, F);
}

void mc_mlp_run_backward(mc_layer_run_t *r, const mc_mlp_run_t *p, mc_mlp_acts_t *s, const void *in,
                         void *dy, void *din)
{
    const mc_backend_t *be = r->be;
    const mc_gpt_config_t *c = r->c;
    const int N = r->N, H = c->hidden, F = p->ffn;
    const mc_mlp_ws_t *w = p->ws;

    if (c->swiglu) {
        mc_linear_row_backward(r, w->d_act, p->dw2, p->db2, dy, s->act, p->w2, NULL, F);
        be->swiglu_backward(be, c->dt, w->d_fc1, w->d_act, s->fc1, N, F);
    } else {
        mc_linear_row_backward(r, w->d_fc1, p->dw2, p->db2, dy, s->act, p->w2, s->fc1, F);
    }
    mc_linear_column_backward(r, din, p->dw1, p->db1, w->d_fc1, in, p->w1, H,
                              c->swiglu ? 2 * F : F);
}

/* The layer's linear_fc1 and linear_fc2 (by kind) and the dense MLP's workspace. */
static mc_mlp_run_t dense(const mc_layer_run_t *r)
{
    void *const *w = r->w, *const *gw = r->gw;
    return (mc_mlp_run_t){
        .ffn = r->t.ffn,
        .w1 = w[MC_PK_FC1_W],
        .b1 = w[MC_PK_FC1_B],
        .w2 = w[MC_PK_FC2_W],
        .b2 = w[MC_PK_FC2_B],
        .dw1 = gw[MC_PK_FC1_W],
        .db1 = gw[MC_PK_FC1_B],
        .dw2 = gw[MC_PK_FC2_W],
        .db2 = gw[MC_PK_FC2_B],
        .ws = &r->m->mlp_ws,
    };
}

static void *mlp_forward(mc_layer_run_t *r, void *acts, const void *in)
{
    const mc_mlp_run_t p = dense(r);
    return mc_mlp_run_forward(r, &p, acts, in);
}

static void mlp_backward(mc_layer_run_t *r, void *acts, const void *in, void *dy, void *din)
{
    const mc_mlp_run_t p = dense(r);
    mc_mlp_run_backward(r, &p, acts, in, dy, din);
}

const mc_block_ops_t mc_mlp = {
    .name = "mlp",
    .acts_at = offsetof(mc_layer_acts_t, mlp.dense),
    .params = mlp_params,
    .plan = mlp_plan,
    .plan_shared = mlp_plan_shared,
    .forward = mlp_forward,
    .backward = mlp_backward,
};
