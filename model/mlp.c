/* The dense MLP (Megatron-core's MLP, transformer/mlp.py) of one layer: linear_fc1
 * (column-parallel; [gate; up] with SwiGLU, a tp rank holding its rows of each half), the
 * activation (GeLU, squared ReLU, or SwiGLU's silu(gate) * up), linear_fc2 (row-parallel, its
 * output summed over tp). The bias-dropout-add after it is the driver's. */
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

static void mlp_plan(mc_gpt_t *m, mc_alloc_t *a, void *acts)
{
    const mc_gpt_config_t *c = &m->cfg;
    const mc_tp_dims_t t = mc_gpt_tp_dims(c);
    mc_mlp_acts_t *s = acts;
    const long SB = (long)c->seq * c->max_batch, e = (long)mc_dtype_size(c->dt);
    s->fc1 = mc_gpt_take(a, SB * t.ffn1 * e);
    s->act = mc_gpt_take(a, SB * t.ffn * e);
}

static void mlp_plan_shared(mc_gpt_t *m, mc_alloc_t *acts, mc_alloc_t *ws)
{
    const mc_gpt_config_t *c = &m->cfg;
    const mc_tp_dims_t t = mc_gpt_tp_dims(c);
    const long SB = (long)c->seq * c->max_batch, e = (long)mc_dtype_size(c->dt);
    m->mlp_ws.d_fc1 = mc_gpt_take(ws, SB * t.ffn1 * e);
    m->mlp_ws.d_act = c->swiglu ? mc_gpt_take(ws, SB * t.ffn * e) : NULL;
}

static void *mlp_forward(mc_layer_run_t *r, void *acts, const void *in)
{
    const mc_backend_t *be = r->be;
    const mc_gpt_config_t *c = r->c;
    const mc_tp_dims_t *t = &r->t;
    mc_mlp_acts_t *s = acts;
    void *const *w = r->w;
    const int N = r->N, H = c->hidden, F = t->ffn;

    if (c->swiglu) {
        mc_linear_column_forward(r, s->fc1, NULL, in, w[MC_PK_FC1_W], w[MC_PK_FC1_B], H, t->ffn1);
        be->swiglu_forward(be, c->dt, s->act, s->fc1, N, F);
    } else {
        mc_linear_column_forward(r, s->act, s->fc1, in, w[MC_PK_FC1_W], w[MC_PK_FC1_B], H, F);
    }
    /* the row-parallel bias joins once, before the sum */
    return mc_linear_row_forward(r, s->act, w[MC_PK_FC2_W], c->tp_rank == 0 ? w[MC_PK_FC2_B] : NULL,
                                 F);
}

static void mlp_backward(mc_layer_run_t *r, void *acts, const void *in, void *dy, void *din)
{
    const mc_backend_t *be = r->be;
    const mc_gpt_config_t *c = r->c;
    const mc_tp_dims_t *t = &r->t;
    mc_mlp_acts_t *s = acts;
    void *const *w = r->w, *const *gw = r->gw;
    const int N = r->N, H = c->hidden, F = t->ffn;
    mc_gpt_t *m = r->m;
    void *d_fc1 = m->mlp_ws.d_fc1;

    if (c->swiglu) {
        mc_linear_row_backward(r, m->mlp_ws.d_act, gw[MC_PK_FC2_W], gw[MC_PK_FC2_B], dy, s->act,
                               w[MC_PK_FC2_W], NULL, F);
        be->swiglu_backward(be, c->dt, d_fc1, m->mlp_ws.d_act, s->fc1, N, F);
    } else {
        mc_linear_row_backward(r, d_fc1, gw[MC_PK_FC2_W], gw[MC_PK_FC2_B], dy, s->act,
                               w[MC_PK_FC2_W], s->fc1, F);
    }
    mc_linear_column_backward(r, din, gw[MC_PK_FC1_W], gw[MC_PK_FC1_B], d_fc1, in, w[MC_PK_FC1_W],
                              H, t->ffn1);
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
