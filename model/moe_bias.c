/* Aux-loss-free load balancing (Megatron core_v0.15.0 router.py TopKRouter's expert_bias and
 * local_tokens_per_expert buffers; finalize_model_grads.py _update_router_expert_bias;
 * moe_utils.py get_updated_expert_bias). The bias only chooses the experts (sigmoid scores +
 * bias, kernels/moe_route.h); each training forward adds its routing map's tokens per expert
 * to the layer's count; once per global batch, after the backward, the counts are summed over
 * tp x dp x cp and each bias moves by the rate towards the mean load. */
#include <stdlib.h>

#include "base/error.h"
#include "comm/comm.h"
#include "kernels/moe.h"
#include "model/block.h"

/* The buffers, at first use: the biases zero (Megatron's torch.zeros), the counts zero. */
static void ensure(mc_gpt_t *m)
{
    if (m->moe_expert_bias) return;
    const size_t n = (size_t)m->n_local_layers * (size_t)m->cfg.moe.num_experts;
    m->moe_expert_bias = m->be->alloc(m->be, n * sizeof(float));
    m->moe_local_tokens = calloc(n, sizeof(float));
    if (!m->moe_expert_bias || !m->moe_local_tokens)
        mc_fatal("out of memory for the MoE expert bias");
    m->be->memset0(m->be, m->moe_expert_bias, n * sizeof(float));
}

float *mc_gpt_moe_expert_bias(mc_gpt_t *m, int local)
{
    if (!m->cfg.moe.expert_bias) return NULL;
    ensure(m);
    return m->moe_expert_bias + (long)local * m->cfg.moe.num_experts;
}

void mc_moe_bias_count(mc_layer_run_t *r, const int32_t *counts)
{
    mc_gpt_t *m = r->m;
    /* with torch.is_grad_enabled() only: not in evaluation, once under full recomputation */
    if (!m->cfg.moe.expert_bias || !r->training || !r->grad) return;
    ensure(m);
    const int E = m->cfg.moe.num_experts;
    float *run = m->moe_local_tokens + (long)r->local * E;
    for (int e = 0; e < E; e++) run[e] += (float)counts[e];
}

void mc_gpt_moe_update_expert_bias(mc_gpt_t *m)
{
    const mc_moe_cfg_t *q = &m->cfg.moe;
    if (!q->expert_bias || !m->n_local_layers) return;
    ensure(m);
    const int E = q->num_experts;
    const long n = (long)m->n_local_layers * E;
    mc_group_t *g = m->tp_dp_cp_group;
    /* one all-reduce of the stacked counts (torch.stack), as get_updated_expert_bias */
    if (g && g->size > 1)
        mc_all_reduce(m->comm, g, m->moe_local_tokens, (size_t)n, MC_DT_F32, MC_OP_SUM);
    const mc_backend_t *be = m->be;
    float *counts = m->moe_ws.psum; /* [E] device scratch, free between steps */
    for (int l = 0; l < m->n_local_layers; l++) {
        if (!q->layer[m->layer_no[l]]) continue; /* a dense layer has no router */
        be->memcpy_h2d(be, counts, m->moe_local_tokens + (long)l * E, (size_t)E * sizeof(float));
        be->moe->expert_bias_update(be, m->moe_expert_bias + (long)l * E, counts, E,
                                    q->bias_update_rate);
    }
    for (long i = 0; i < n; i++) m->moe_local_tokens[i] = 0.0f;
}
