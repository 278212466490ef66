/* track_moe_metrics (train/moe_metrics.h): reduce_aux_losses_tracker_across_ranks, then
 * `values.float() * loss_scale`, `.sum() / num_moe_layers`, in float32 as Megatron's tensors. */
#include "train/moe_metrics.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/error.h"

int mc_moe_tracked(const mc_gpt_config_t *c, mc_moe_loss_t kinds[MC_MOE_LOSSES])
{
    int n = 0;
    if (!c->moe.num_experts) return 0;
    for (int k = 0; k < MC_MOE_LOSSES; k++)
        if (c->moe.tracked[k]) kinds[n++] = (mc_moe_loss_t)k;
    return n;
}

/* all_reduce(values) over g (SUM), then, avg, divided by the group's size (ReduceOp.AVG). */
static void reduce(mc_trainer_t *t, mc_group_t *g, float *v, long n, bool avg)
{
    if (!g || g->size <= 1) return;
    mc_all_reduce(t->comm, g, v, (size_t)n, MC_DT_F32, MC_OP_SUM);
    if (avg)
        for (long i = 0; i < n; i++) v[i] /= (float)g->size;
}

void mc_moe_metrics(mc_trainer_t *t, int M, float value[MC_MOE_LOSSES], float *layers)
{
    const mc_gpt_config_t *c = &t->model.cfg;
    const int L = c->num_layers;
    for (int k = 0; k < MC_MOE_LOSSES; k++) value[k] = 0.0f;
    if (!c->moe.num_experts) return;
    float *v = malloc((size_t)MC_MOE_LOSSES * (size_t)L * sizeof(float));
    if (!v) mc_fatal("out of host memory for the MoE losses");
    mc_gpt_moe_take_losses(&t->model, v);
    /* over the pipeline stages; aux_loss's and seq_aux_loss's reduce_group (tp x cp),
     * global_aux_loss's (tp x dp x cp); then the average over dp x cp */
    reduce(t, t->par.pp, v, (long)MC_MOE_LOSSES * L, false);
    reduce(t, t->par.tp_cp, v + (long)MC_MOE_AUX * L, 2L * L, false);
    reduce(t, t->par.tp_dp_cp, v + (long)MC_MOE_GLOBAL_AUX * L, L, false);
    reduce(t, t->par.dp_cp, v, (long)MC_MOE_LOSSES * L, true);
    int moe_layers = 0;
    for (int l = 0; l < L && l < MC_MOE_MAX_LAYERS; l++) moe_layers += c->moe.layer[l];
    const float scale = (float)(1.0 / M); /* moe_loss_scale = 1 / get_num_microbatches() */
    for (int k = 0; k < MC_MOE_LOSSES; k++) {
        float sum = 0.0f;
        for (int l = 0; l < L; l++) {
            const float x = v[(long)k * L + l] * scale;
            if (layers) layers[(long)k * L + l] = x;
            sum += x;
        }
        value[k] = moe_layers ? sum / (float)moe_layers : 0.0f;
    }
    free(v);
}

bool mc_moe_dropped_line(mc_trainer_t *t, char *buf, size_t n)
{
    if (!t->model.cfg.moe.num_experts || !t->model.cfg.moe.drop) return false;
    double v[2];
    mc_gpt_moe_take_dropped(&t->model, v);
    /* every rank routes its own tokens through its own layers: the world's sum */
    if (t->comm->world && t->comm->world->size > 1)
        mc_all_reduce(t->comm, t->comm->world, v, 2, MC_DT_F64, MC_OP_SUM);
    snprintf(buf, n,
             " [MoE] tokens dropped for capacity since the last log: %.0f of %.0f routed "
             "(token, expert) assignments (%.2f%%)",
             v[1], v[0], v[0] > 0 ? 100.0 * v[1] / v[0] : 0.0);
    return true;
}
