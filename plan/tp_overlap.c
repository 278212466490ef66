/* --tp-comm-overlap in the time model: what of a layer's sequence-parallel collectives the GEMMs
 * hide. Constants are Transformer Engine's userbuffers defaults, which Megatron gets when
 * --tp-comm-overlap comes without --tp-comm-overlap-cfg (initialize_ub's get_default_config,
 * transformer_engine/pytorch/module/base.py):
 *   ring_exchange (qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad): the all-gather as tp point-to-point
 *     steps on the copy engines, num_sm 1, no SM margin: each step's GEMM chunk runs while the next
 *     chunk arrives, the local chunk first;
 *   pipeline (proj_fprop, fc2_fprop): the GEMM in num_splits 4, each split's reduce-scatter beside
 *     the next split's GEMM, the last one's exposed; num_sm 16 with set_sm_margin: the GEMM runs
 *     on the SMs less 16;
 *   bulk (qkv_dgrad, fc1_dgrad: the input's re-gather beside the dgrad GEMM; qkv_wgrad, fc1_wgrad:
 *     the dgrad's reduce-scatter beside the wgrad GEMM): the whole collective beside the whole
 *     GEMM, num_sm 16 with the margin. */
#include "plan/plan.h"

#include <math.h>

#define TE_PIPELINE_SPLITS 4 /* num_splits of "pipeline" */
#define TE_SM_MARGIN 16      /* num_sm of "pipeline" and "bulk" (set_sm_margin) */

/* Seconds a GEMM of g seconds and its all-gather take beyond the GEMM: n ring steps, each
 * receiving one of the n - 1 remote chunks (c_step seconds) while a chunk computes. */
static double ring_exchange(double g, double c_step, int n)
{
    return (n - 1) * fmax(g / n, c_step) + g / n - g;
}

/* The GEMM in n splits with the margin's SMs taken, each split's reduce-scatter (c_split) beside
 * the next split's GEMM; the last split's is exposed. */
static double pipeline(double g, double c_split, int n, double margin)
{
    const double gs = g / (1 - margin) / n;
    return gs + (n - 1) * fmax(gs, c_split) + c_split - g;
}

static double bulk(double g, double c, double margin) { return fmax(g / (1 - margin), c) - g; }

double mc_plan_tp_overlap_layer(const mc_args_t *a, const mc_gpu_t *g, double gbps, double e,
                                double share, bool rc)
{
    const int t = a->tensor_model_parallel_size;
    double sh[MC_PLAN_LAYER_GEMMS][3], gs[MC_PLAN_LAYER_GEMMS];
    mc_plan_layer_gemms(a, sh);
    for (int i = 0; i < MC_PLAN_LAYER_GEMMS; i++)
        gs[i] = mc_plan_gemm_seconds(g, 1, sh[i][0], sh[i][1], sh[i][2], e, NULL);
    const double X = sh[0][0] * a->hidden_size * e; /* the full [s, b, h] activation */
    const double step = mc_plan_ring_seconds(X / t, 1, gbps);
    const double split = mc_plan_ring_seconds((t - 1.0) / t * X / TE_PIPELINE_SPLITS, t - 1, gbps);
    const double whole = mc_plan_ring_seconds((t - 1.0) / t * X, t - 1, gbps);
    const double margin = (double)TE_SM_MARGIN / g->sms;
    double s = 0;
    /* the attention pair (0, 1), then the MLP's (2, 3) unless an MoE layer's experts take it */
    for (int p = 0; p < (share < 1 ? 1 : 2); p++) {
        const double col = gs[2 * p], row = gs[2 * p + 1];
        const double fwd =
            ring_exchange(col, step, t) + pipeline(row, split, TE_PIPELINE_SPLITS, margin);
        s += fwd * (rc ? 2 : 1);
        s += ring_exchange(row, step, t); /* the row-parallel dgrad's gathered gradient */
        s += bulk(col, whole, margin) *
             2; /* the re-gather beside dgrad, the reduce-scatter beside wgrad */
    }
    return s;
}
