/* The mixture-of-experts part of `megatron-c plan` (plan/plan.h): the parameters (all, a token's,
 * a rank's experts) and one MoE layer's work and traffic per microbatch on one GPU. */
#include "plan/plan.h"

#include <string.h>

#include "base/error.h"
#include "model/gpt.h"
#include "parallel/pipeline.h"

/* An expert's parameters (linear_fc1 [fc1, h], linear_fc2 [h, ffn]; MoE layers have no biases
 * here: validation refuses them). */
static double expert_params(const mc_args_t *a)
{
    const double F = a->moe_ffn_hidden_size ? a->moe_ffn_hidden_size : a->ffn_hidden_size;
    return a->hidden_size * (a->swiglu ? 2 * F : F) + F * a->hidden_size;
}

/* A norm of n features: RMSNorm's weight, LayerNorm's weight and bias. */
static double norm_params(const mc_args_t *a, double n)
{
    return strcmp(a->normalization, "RMSNorm") == 0 ? n : 2 * n;
}

/* One layer's parameters outside its MLP: the two norms and the attention. */
static double attention_params(const mc_args_t *a)
{
    const double h = a->hidden_size, hd = a->kv_channels;
    const double A = a->num_attention_heads * hd, Q = A + 2.0 * a->num_query_groups * hd;
    double n = 2 * norm_params(a, h) + h * Q + A * h;
    if (a->add_bias_linear || a->add_qkv_bias) n += Q;
    if (a->add_bias_linear) n += h;
    if (a->qk_layernorm) n += 2 * norm_params(a, hd);
    return n;
}

/* A dense MLP of width F (the shared expert's too), with biases where the model has them. */
static double mlp_params(const mc_args_t *a, double F)
{
    const double h = a->hidden_size, fc1 = a->swiglu ? 2 * F : F;
    return h * fc1 + F * h + (a->add_bias_linear ? fc1 + h : 0);
}

void mc_plan_params(const mc_args_t *a, mc_plan_params_t *p)
{
    memset(p, 0, sizeof(*p));
    mc_gpt_config_t cfg;
    mc_gpt_config_from_args(&cfg, a);
    const double h = a->hidden_size, V = a->padded_vocab_size, E = a->num_experts;
    double n = V * h + norm_params(a, h) + (a->untie_embeddings_and_output_weights ? V * h : 0);
    if (strcmp(a->position_embedding_type, "learned_absolute") == 0)
        n += (double)a->max_position_embeddings * h;
    const double shared = a->moe_shared_expert_intermediate_size
                              ? mlp_params(a, a->moe_shared_expert_intermediate_size) +
                                    (a->moe_shared_expert_gate ? h : 0)
                              : 0;
    for (int l = 0; l < a->num_layers; l++) {
        n += attention_params(a);
        if (!E || l >= MC_MOE_MAX_LAYERS || !cfg.moe.layer[l]) {
            n += mlp_params(a, a->ffn_hidden_size);
            continue;
        }
        p->moe_layers++;
        n += E * h + shared; /* the router's weight [E, h] and the shared expert */
        p->experts += E * expert_params(a);
    }
    p->total = n + p->experts;
    p->active = p->experts > 0 ? p->total - p->experts * (E - a->moe_router_topk) / E : p->total;
}

double mc_plan_rank_expert_params(const mc_args_t *a, int pp_rank, int *moe_layers)
{
    mc_gpt_config_t cfg;
    mc_pp_plan_t plan;
    char err[256];
    mc_gpt_config_from_args(&cfg, a);
    mc_pp_plan_from_args(&plan, a);
    if (mc_pipeline_chunks(&cfg, &plan, pp_rank, err, sizeof(err)) != 0) mc_fatal("%s", err);
    int n = 0;
    for (int c = 0; c < cfg.n_chunks && a->num_experts; c++)
        for (int j = 0; j < cfg.chunk[c].n_layers; j++) {
            const int l = cfg.chunk[c].first_layer + j;
            n += l < MC_MOE_MAX_LAYERS && cfg.moe.layer[l];
        }
    if (moe_layers) *moe_layers = n;
    if (!n) return 0;
    const int ep = a->expert_model_parallel_size > 1 ? a->expert_model_parallel_size : 1;
    const int etp = a->expert_tensor_parallel_size > 1 ? a->expert_tensor_parallel_size : 1;
    return (double)n * (a->num_experts / ep) * expert_params(a) / etp;
}

int mc_plan_edp(const mc_args_t *a)
{
    const int ep = a->expert_model_parallel_size > 1 ? a->expert_model_parallel_size : 1;
    const int etp = a->expert_tensor_parallel_size > 1 ? a->expert_tensor_parallel_size : 1;
    return a->data_parallel_size * a->context_parallel_size * a->tensor_model_parallel_size /
           (ep * etp);
}

/* A collective over n ranks moving X bytes per rank (the larger of its input and output): the
 * (n-1)/n that leaves the rank, in n-1 steps. */
static double spread_s(double X, int n, double gbps)
{
    return n > 1 ? mc_plan_ring_seconds(X * (n - 1) / n, n - 1, gbps) : 0;
}

/* The allgather dispatcher (model/moe_allgather.c) over tp_ep (n = etp x ep ranks): the forward
 * all-gathers the routing map (bytes), the probabilities and the rows of the group's n T tokens
 * and reduce-scatters the output [n T, h]; the backward all-gathers the output's gradient and
 * reduce-scatters the input's and the probabilities' (the forward's traffic without the map's
 * gather: map_bytes). */
static void allgather_traffic(double T, double h, double E, double e, int n, double gbps,
                              mc_plan_moe_t *o)
{
    if (n <= 1) return;
    const double X = n * T * h * e, P = n * T * E * e, M = n * T * E;
    o->a2a_f = 2 * spread_s(X, n, gbps) + spread_s(P, n, gbps) + spread_s(M, n, gbps) / 2;
    o->a2a_bytes = 2 * X + P + M;
    o->a2a_calls = 4;
    o->map_bytes = M;
}

void mc_plan_moe_layer(const mc_args_t *a, const mc_cluster_t *cl, mc_plan_moe_t *o)
{
    memset(o, 0, sizeof(*o));
    const mc_gpu_t *g = &cl->gpu;
    const int t = a->tensor_model_parallel_size, cp = a->context_parallel_size;
    const int ep = a->expert_model_parallel_size > 1 ? a->expert_model_parallel_size : 1;
    const int etp = a->expert_tensor_parallel_size > 1 ? a->expert_tensor_parallel_size : 1;
    const double e = (a->fp16 || a->bf16) ? 2 : 4, h = a->hidden_size, E = a->num_experts;
    const double F = a->moe_ffn_hidden_size ? a->moe_ffn_hidden_size : a->ffn_hidden_size;
    const double fc1 = a->swiglu ? 2 * F : F, k = a->moe_router_topk;
    /* this rank's tokens (its sequence rows under tensor parallelism, which MoE needs with
     * --sequence-parallel), the rows its experts receive on average (balanced routing), all
     * of them after the all-gather over etp */
    const double T = (double)a->micro_batch_size * a->seq_length / cp / t, R = T * k;
    const double rows = R * etp, local = E / ep;
    const double per_expert = rows / local;
    o->gemm_f = mc_plan_gemm_seconds(g, 1, T, E, h, e, NULL) +
                mc_plan_gemm_seconds(g, local, per_expert, fc1 / etp, h, e, NULL) +
                mc_plan_gemm_seconds(g, local, per_expert, h, F / etp, e, NULL);
    const double S = a->moe_shared_expert_intermediate_size;
    if (S > 0) /* the shared expert: a dense MLP over tp on the gathered sequence */
        o->gemm_f += mc_plan_gemm_seconds(g, 1, T * t, (a->swiglu ? 2 * S : S) / t, h, e, NULL) +
                     mc_plan_gemm_seconds(g, 1, T * t, h, S / t, e, NULL);
    /* the permutation and its inverse read and write each routed row; the probabilities
     * weigh them */
    o->mem_f = 5 * rows * h * e / (g->hbm_gbps * 1e9 * MC_PLAN_HBM_FRACTION);
    /* the dispatcher, as model/moe.c runs it: over ep, the experts' token counts, then the rows
     * and their probabilities dispatched and the rows combined in the forward; the backward
     * exchanges the counts again, dispatches the output gradient and combines the input's and
     * the probabilities' (4 all-to-alls each way); over etp the same with the counts
     * all-gathered and the rows reduce-scattered. Expert groups of ep x etp consecutive ranks
     * (Megatron's tp-cp-ep-dp order folded) stay on NVLink within a node. */
    const double gbps = ep * etp <= cl->gpus_per_node ? g->intra_gbps : g->inter_gbps;
    if (strcmp(a->moe_token_dispatcher_type, "allgather") == 0) {
        allgather_traffic(T, h, E, e, ep * etp, gbps, o);
        return;
    }
    const double X_a2a = R * h * e, X_etp = rows * h * e;
    o->a2a_f = 2 * spread_s(X_a2a, ep, gbps) + spread_s(R * e, ep, gbps);
    o->etp_f = 2 * spread_s(X_etp, etp, gbps) + spread_s(rows * e, etp, gbps);
    o->a2a_bytes = ep > 1 ? 2 * X_a2a + R * e + E * 4 : 0;
    o->a2a_calls = ep > 1 ? 4 : 0;
    o->etp_bytes = etp > 1 ? 2 * X_etp + rows * e + E * etp * 4 : 0;
    o->etp_calls = etp > 1 ? 4 : 0;
}
