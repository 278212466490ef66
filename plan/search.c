/* `megatron-c plan --search`: every layout of the command line's model and batch on the cluster
 * (t, p, d, context parallelism, expert parallelism, micro batch, virtual stages, recomputation,
 * sequence parallelism, distributed optimizer) that Megatron's validation accepts, ranked by the
 * time model; memory, the costlier part, is planned in rank order until enough of them fit. */
#include "plan/plan.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "kernels/device.h"

/* One layout: the knobs the search turns. */
typedef struct {
    int t, p, c, b, v, rc; /* c: cp; rc: 0 none, 1 selective, 2 full (uniform, 1 layer) */
    int ep;                /* expert parallelism (MoE models), with the alltoall dispatcher */
    bool sp, dist;
    double tokens_per_s, memory;
} knobs_t;

static const char *const RECOMPUTE[] = {"", "selective", "full"};

double mc_plan_memory(const mc_args_t *args, const char *device, mc_memory_plan_t *out)
{
    const mc_backend_t *be = mc_backend_sizing(device);
    mc_attention_spec_t attention; /* the implementation the run would choose sizes its scratch */
    mc_attention_spec_from_args(args, &attention);
    mc_backend_attention_setup(be, &attention, NULL, 0);
    mc_run_config_t cfg;
    mc_run_config(&cfg, args);
    mc_trainer_memory(args, &cfg, be, out);
    return out->params + out->grads + out->optimizer + out->activations + out->workspace;
}

/* base with the layout of k, validated: 0, or -1 when Megatron's rules refuse it. The padded
 * vocabulary follows the tp size, as the tokenizer pads it. */
static int apply(mc_args_t *a, const mc_args_t *base, const knobs_t *k, const mc_cluster_t *cl,
                 mc_plan_check_fn check, int64_t vocab)
{
    *a = *base;
    a->tensor_model_parallel_size = k->t;
    a->pipeline_model_parallel_size = k->p;
    a->context_parallel_size = k->c;
    a->micro_batch_size = k->b;
    a->expert_model_parallel_size = k->ep;
    if (k->ep > 1) /* the dispatcher megatron-c runs expert parallelism with */
        snprintf(a->moe_token_dispatcher_type, sizeof(a->moe_token_dispatcher_type), "alltoall");
    a->num_layers_per_virtual_pipeline_stage = 0;
    a->num_virtual_stages_per_pipeline_rank = k->v > 1 ? k->v : 0;
    a->virtual_pipeline_model_parallel_size = 1;
    a->sequence_parallel = k->sp;
    a->use_distributed_optimizer = k->dist;
    a->recompute_activations = false;
    snprintf(a->recompute_granularity, sizeof(a->recompute_granularity), "%s", RECOMPUTE[k->rc]);
    snprintf(a->recompute_method, sizeof(a->recompute_method), "%s", k->rc == 2 ? "uniform" : "");
    a->recompute_num_layers = k->rc == 2 ? 1 : 0;
    if (vocab > 0)
        a->padded_vocab_size =
            mc_padded_vocab_size((int)vocab, a->make_vocab_size_divisible_by, k->t);
    char first[256];
    return check(a, cl->num_gpus, first, sizeof(first)) == 0 ? 0 : -1;
}

static int by_speed(const void *x, const void *y)
{
    const double a = ((const knobs_t *)x)->tokens_per_s, b = ((const knobs_t *)y)->tokens_per_s;
    return a < b ? 1 : a > b ? -1 : 0;
}

/* Context parallelism is searched while each rank keeps at least 2048 positions: shorter
 * blocks do not hide the ring's passes (and the search stays as fast for the short sequences
 * of most recipes). */
static bool cp_worth(const mc_args_t *base, int c)
{
    return c == 1 || (base->seq_length % (2 * c) == 0 && base->seq_length / c >= 2048);
}

/* A timed layout in the list (grown as needed): false when out of memory. */
static bool keep(knobs_t **all, int *n, int *cap, const knobs_t *k)
{
    if (*n == *cap) {
        knobs_t *g = realloc(*all, (size_t)*cap * 2 * sizeof(knobs_t));
        if (!g) return false;
        *all = g;
        *cap *= 2;
    }
    (*all)[(*n)++] = *k;
    return true;
}

/* Every layout of expert parallelism ep the rules accept, timed, appended to *all. */
static void enumerate(const mc_args_t *base, const mc_cluster_t *cl, mc_plan_check_fn check,
                      int64_t vocab, int ep, knobs_t **all, int *n, int *cap, int *tried)
{
    const int N = cl->num_gpus;
    /* the layers of the split: the embedding and the loss count under the account-for flags */
    const int L = base->num_layers + base->account_for_embedding_in_pipeline_split +
                  base->account_for_loss_in_pipeline_split;
    static mc_args_t a; /* large: not on the stack */
    const double usable = (cl->gpu.memory_gb - MC_PLAN_RESERVED_GB) * 1e9;
    for (int t = 1; t <= cl->gpus_per_node && *all; t *= 2)
        for (int c = 1; c <= 8 && t * c <= N && cp_worth(base, c); c *= 2)
            for (int p = 1; N % (t * c) == 0 && p <= N / t / c && p <= L; p++) {
                if ((N / t / c) % p) continue;
                const int d = N / t / c / p;
                for (int b = 1; b <= 32; b *= 2)
                    for (int v = 1; v <= 8 && base->global_batch_size % (b * d) == 0; v++)
                        for (int rc = 0; rc < 3 && (v == 1 || (p > 1 && L % (p * v) == 0)); rc++)
                            for (int sp = 0; sp <= (t > 1); sp++)
                                for (int dist = 0; dist <= (d * c > 1); dist++) {
                                    knobs_t k = {t, p, c, b, v, rc, ep, sp, dist, 0, 0};
                                    ++*tried;
                                    if (apply(&a, base, &k, cl, check, vocab) != 0) continue;
                                    mc_plan_time_t tm;
                                    mc_memory_plan_t mem;
                                    k.memory = mc_plan_memory(&a, "cuda", &mem);
                                    if (k.memory > usable) continue;
                                    mc_plan_time(&a, cl, &mem, &tm);
                                    k.tokens_per_s = tm.tokens_per_s;
                                    if (!keep(all, n, cap, &k)) return;
                                }
            }
}

int mc_plan_search(const mc_args_t *base, const mc_cluster_t *cl, mc_plan_check_fn check,
                   int64_t vocab, int top, mc_plan_candidate_t *best, int *tried, int *fitting)
{
    int cap = 256;
    knobs_t *all = malloc((size_t)cap * sizeof(knobs_t));
    if (!all) mc_fatal("out of host memory");
    *tried = 0;
    *fitting = 0;
    /* MoE models: every expert parallelism that divides the experts (ep 1 for dense ones) */
    for (int ep = 1;
         ep <= cl->num_gpus && (ep == 1 || (base->num_experts && base->num_experts % ep == 0));
         ep *= 2)
        enumerate(base, cl, check, vocab, ep, &all, fitting, &cap, tried);
    qsort(all, (size_t)*fitting, sizeof(knobs_t), by_speed);
    int n = 0;
    for (; n < top && n < *fitting; n++) {
        mc_plan_candidate_t *c = &best[n];
        if (apply(&c->args, base, &all[n], cl, check, vocab) != 0)
            mc_fatal("plan: search lost a layout");
        c->memory = mc_plan_memory(&c->args, "cuda", &c->mem);
        mc_plan_time(&c->args, cl, &c->mem, &c->time);
    }
    free(all);
    return n;
}
