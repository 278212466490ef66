/* Context parallelism in the time model (plan/plan.h): per layer and microbatch, the traffic
 * of the layer's --cp-comm-type as model/cp_attention.c moves it, on the links its group spans
 * (the cp ranks are tp apart in Megatron's rank order: inside a node while tp x cp fits).
 *   p2p        cp - 1 passes of this rank's keys and values forward, each behind a step's
 *              blocks; backward the same passes and cp passes of their fp32 gradients
 *   a2a        all-to-alls of the queries, keys and values and of the output, forward; of the
 *              output's gradient and of the qkv gradient, backward
 *   all_gather the keys and values gathered forward and again backward, their fp32 gradients
 *              reduce-scattered
 *   a2a+p2p    the all-to-alls in the first level, the ring over the second
 * Bytes are what the comm layer counts: a p2p batch (an all-to-all is one) the bytes a rank sends
 * and receives, its own share included; an all-gather or reduce-scatter count x size. */
#include "plan/plan.h"

#include "config/context_parallel.h"

typedef struct {
    double L, W, O; /* bytes of this rank's keys and values, qkv, and attention output */
    double e;
} sizes_t;

static double link_gbps(const mc_args_t *a, const mc_cluster_t *cl, int span)
{
    return a->tensor_model_parallel_size * span <= cl->gpus_per_node ? cl->gpu.intra_gbps
                                                                     : cl->gpu.inter_gbps;
}

/* The ring over n ranks of keys and values of L bytes. */
static void ring(mc_plan_cp_t *o, const sizes_t *z, int n, double gbps, double core_f,
                 double core_b)
{
    if (n < 2) return;
    const double pass = mc_plan_ring_seconds(z->L, 1, gbps);
    const double dpass = mc_plan_ring_seconds(z->L * 4 / z->e, 1, gbps);
    o->fwd += (n - 1) * pass;
    o->bwd += (n - 1) * pass + n * dpass;
    o->fwd_exposed += (n - 1) * (pass > core_f / n ? pass - core_f / n : 0);
    o->bwd_exposed += (n - 1) * (pass > core_b / n ? pass - core_b / n : 0) + n * dpass;
    o->fwd_bytes += (n - 1) * 2 * z->L;
    o->bwd_bytes += (n - 1) * 2 * z->L + n * 2 * z->L * 4 / z->e;
    o->fwd_calls += n - 1;
    o->bwd_calls += 2 * n - 1;
}

/* The all-to-alls over a ranks (one of qkv and one of the output each way). */
static void a2a(mc_plan_cp_t *o, const sizes_t *z, int a, double gbps)
{
    const double share = (double)(a - 1) / a;
    const double s =
        mc_plan_ring_seconds(share * z->W, 1, gbps) + mc_plan_ring_seconds(share * z->O, 1, gbps);
    o->fwd += s, o->bwd += s, o->fwd_exposed += s, o->bwd_exposed += s;
    o->fwd_bytes += 2 * (z->W + z->O);
    o->bwd_bytes += 2 * (z->W + z->O);
    o->fwd_calls += 2, o->bwd_calls += 2;
}

static void allgather(mc_plan_cp_t *o, const sizes_t *z, int n, double gbps)
{
    const double g = mc_plan_ring_seconds((n - 1) * z->L, n - 1, gbps);
    const double rs = mc_plan_ring_seconds((n - 1) * z->L * 4 / z->e, n - 1, gbps);
    o->fwd += g, o->fwd_exposed += g;
    o->bwd += g + rs, o->bwd_exposed += g + rs;
    o->fwd_bytes += n * z->L;
    o->bwd_bytes += n * z->L * (1 + 4 / z->e);
    o->fwd_calls += 1, o->bwd_calls += 2;
}

void mc_plan_cp_layer(const mc_args_t *a, const mc_cluster_t *cl, int layer, double core_f,
                      double core_b, mc_plan_cp_t *o)
{
    *o = (mc_plan_cp_t){0};
    const int cp = a->context_parallel_size, t = a->tensor_model_parallel_size;
    if (cp <= 1) return;
    sizes_t z = {.e = (a->fp16 || a->bf16) ? 2 : 4};
    const double rows = (double)a->micro_batch_size * a->seq_length / cp;
    const double hd = a->kv_channels, heads = (double)a->num_attention_heads / t;
    const double groups = (double)a->num_query_groups / t;
    z.L = rows * 2 * groups * hd * z.e;
    z.W = rows * (heads + 2 * groups) * hd * z.e;
    z.O = rows * heads * hd * z.e;
    int inner, outer;
    mc_cp_levels(a, &inner, &outer);
    switch (mc_cp_comm_of_layer(a, layer)) {
    case MC_CP_P2P: ring(o, &z, cp, link_gbps(a, cl, cp), core_f, core_b); break;
    case MC_CP_ALLGATHER: allgather(o, &z, cp, link_gbps(a, cl, cp)); break;
    case MC_CP_A2A: a2a(o, &z, cp, link_gbps(a, cl, cp)); break;
    case MC_CP_A2A_P2P:
        if (inner > 1) a2a(o, &z, inner, link_gbps(a, cl, inner));
        /* the ring's blocks: each of its steps is 1/outer of the layer's attention */
        ring(o, &z, outer, link_gbps(a, cl, cp), core_f, core_b);
        break;
    }
}
