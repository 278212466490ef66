/* Megatron's mixture-of-experts rules (cli/validate_moe.h). Each group stops at its first
 * problem, as validate_args' asserts do; the messages name the flags and say what to do. The
 * rules hold with or without --num-experts where Megatron's hold so (TransformerConfig checks
 * most of them unconditionally). */
#include "cli/validate_moe.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "comm/groups.h"
#include "config/flags.h"
#include "config/moe_pattern.h"
#include "kernels/moe_route.h"
#include "model/gpt.h"

/* The load-balancing types Megatron core_v0.15.0's parser takes, and those megatron-c
 * implements (sinkhorn is refused below). */
static const char *const LB_TYPES[] = {"aux_loss", "seq_aux_loss", "global_aux_loss", "sinkhorn",
                                       "none"};

static const char *lb_type(const mc_args_t *a, int i)
{
    return a->n_moe_router_load_balancing_type ? a->moe_router_load_balancing_type[i] : "aux_loss";
}

static int lb_count(const mc_args_t *a)
{
    return a->n_moe_router_load_balancing_type ? a->n_moe_router_load_balancing_type : 1;
}

/* --moe-router-load-balancing-type and --moe-aux-loss-coeff: argparse's choices and float(),
 * TransformerConfig's equal lengths, the router's sinkhorn assert. */
static void load_balancing(const mc_args_t *a)
{
    for (int i = 0; i < a->n_moe_router_load_balancing_type; i++) {
        bool known = false;
        for (size_t k = 0; k < sizeof(LB_TYPES) / sizeof(LB_TYPES[0]); k++)
            known |= strcmp(lb_type(a, i), LB_TYPES[k]) == 0;
        if (!known)
            mc_user_error("argument --moe-router-load-balancing-type: invalid choice: '%.80s' "
                          "(choose from aux_loss, seq_aux_loss, global_aux_loss, sinkhorn, none)",
                          lb_type(a, i));
    }
    for (int i = 0; i < a->n_moe_aux_loss_coeff; i++) {
        char *end;
        double v = strtod(a->moe_aux_loss_coeff[i], &end);
        if (end == a->moe_aux_loss_coeff[i] || *end || !isfinite(v))
            mc_user_error("argument --moe-aux-loss-coeff: invalid float value: '%.80s'",
                          a->moe_aux_loss_coeff[i]);
    }
    const int nc = a->n_moe_aux_loss_coeff ? a->n_moe_aux_loss_coeff : 1;
    if (nc != lb_count(a))
        mc_user_error("--moe-aux-loss-coeff has %d value(s) for %d "
                      "--moe-router-load-balancing-type value(s) (give one coefficient per type)",
                      nc, lb_count(a));
    for (int i = 0; i < lb_count(a); i++)
        if (strcmp(lb_type(a, i), "sinkhorn") == 0)
            mc_user_error("--moe-router-load-balancing-type sinkhorn is recognised but not "
                          "implemented yet in megatron-c (use aux_loss, seq_aux_loss, "
                          "global_aux_loss or none)");
}

/* Expert parallelism: arguments.py, initialize_model_parallel's generators, MoELayer. */
static void parallel(const mc_args_t *a, int world_size)
{
    const int ep = a->expert_model_parallel_size, tp = a->tensor_model_parallel_size;
    const int etp = a->expert_tensor_parallel_size ? a->expert_tensor_parallel_size : tp;
    if (ep > 1 && !a->num_experts)
        mc_user_error("--expert-model-parallel-size %d needs --num-experts (expert parallelism "
                      "splits the experts of an MoE model)",
                      ep);
    if (a->num_experts && a->num_experts % ep != 0)
        mc_user_error("--num-experts (%d) must be a multiple of --expert-model-parallel-size (%d)",
                      a->num_experts, ep);
    if (ep > 1 && a->fp16)
        mc_user_error("expert parallelism is not supported with --fp16 training (use --bf16)");
    mc_layout_t l;
    char err[512];
    if (mc_layout_init(&l, world_size, tp, a->pipeline_model_parallel_size,
                       a->context_parallel_size, a->use_tp_pp_dp_mapping, err, sizeof(err)) != 0 ||
        mc_layout_set_experts(&l, ep, etp, err, sizeof(err)) != 0)
        mc_user_error("%s (change --expert-model-parallel-size or --expert-tensor-parallel-size)",
                      err);
    if (a->num_experts && tp > 1 && !a->sequence_parallel)
        mc_user_error("MoE layers with --tensor-model-parallel-size %d need --sequence-parallel "
                      "(Megatron's MoELayer refuses to train without it)",
                      tp);
    if (a->num_experts && a->add_bias_linear && etp != 1)
        mc_user_error("biases in MoE layers need --expert-tensor-parallel-size 1 (it is %d; add "
                      "--disable-bias-linear or set --expert-tensor-parallel-size 1)",
                      etp);
}

/* TopKRouter and topk_routing_with_score_function (TransformerConfig and torch.topk's limits). */
static void router(const mc_args_t *a)
{
    const int k = a->moe_router_topk, E = a->num_experts;
    const bool softmax = strcmp(a->moe_router_score_function, "softmax") == 0;
    if (strcmp(a->moe_router_score_function, "sigmoid") != 0 && !softmax)
        mc_user_error("--moe-router-score-function %.40s is recognised but not implemented yet in "
                      "megatron-c (use softmax or sigmoid, Megatron core_v0.15.0's)",
                      a->moe_router_score_function);
    if (a->moe_router_enable_expert_bias && softmax)
        mc_user_error("--moe-router-enable-expert-bias (aux-loss-free balancing) works with the "
                      "sigmoid score function only (add --moe-router-score-function sigmoid)");
    if (k == 1 && softmax && !a->moe_router_pre_softmax && strcmp(lb_type(a, 0), "sinkhorn") != 0)
        mc_user_error("--moe-router-topk 1 with softmax scores needs --moe-router-pre-softmax (a "
                      "softmax over one expert has no gradient)");
    if (E && k > E)
        mc_user_error("--moe-router-topk (%d) must not exceed --num-experts (%d)", k, E);
    if (E > MC_MOE_MAX_EXPERTS || k > MC_MOE_MAX_TOPK)
        mc_user_error("--num-experts %d with --moe-router-topk %d is more than megatron-c's router "
                      "holds (%d experts, top-%d)",
                      E, k, MC_MOE_MAX_EXPERTS, MC_MOE_MAX_TOPK);
    if (!a->moe_router_group_topk) return;
    const int G = a->moe_router_num_groups, gk = a->moe_router_group_topk;
    if (!G)
        mc_user_error("--moe-router-group-topk needs --moe-router-num-groups (group-limited "
                      "routing divides the experts into groups)");
    if (!E) mc_user_error("group-limited routing (--moe-router-group-topk) needs --num-experts");
    if (E % G != 0)
        mc_user_error("--num-experts (%d) must be divisible by --moe-router-num-groups (%d)", E, G);
    if (gk > G)
        mc_user_error("--moe-router-group-topk (%d) must not exceed --moe-router-num-groups (%d)",
                      gk, G);
    if (k > gk * (E / G))
        mc_user_error("--moe-router-topk (%d) is more than the experts of the "
                      "--moe-router-group-topk (%d) groups chosen (%d each)",
                      k, gk, E / G);
}

/* Token dropping (TransformerConfig) and the dispatchers megatron-c has. */
static void capacity_and_dispatch(mc_args_t *a)
{
    if (a->moe_expert_capacity_factor_set && a->moe_expert_capacity_factor < 0) {
        a->moe_expert_capacity_factor_set = false; /* Megatron: a negative factor is None */
        a->moe_expert_capacity_factor = 0;
    }
    if (a->moe_expert_capacity_factor_set)
        for (int i = 0; i < lb_count(a); i++)
            if (strcmp(lb_type(a, i), "sinkhorn") == 0)
                mc_user_error("--moe-expert-capacity-factor works with the aux_loss, "
                              "seq_aux_loss, global_aux_loss or none load balancing only");
    if (a->moe_pad_expert_input_to_capacity && !a->moe_expert_capacity_factor_set)
        mc_user_error("--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor (the "
                      "capacity it pads to)");
    if (strcmp(a->moe_token_dispatcher_type, "flex") == 0)
        mc_user_error("--moe-token-dispatcher-type flex (DeepEP) is recognised but not "
                      "implemented yet in megatron-c (use alltoall or allgather)");
    if (a->moe_shared_expert_intermediate_size && a->moe_shared_expert_overlap &&
        strcmp(a->moe_token_dispatcher_type, "alltoall") != 0)
        mc_user_error("--moe-shared-expert-overlap works with --moe-token-dispatcher-type "
                      "alltoall only");
}

/* The experts' shapes and implementation flags, and --moe-layer-freq. */
static void experts(mc_args_t *a)
{
    const int E = a->num_experts, tp = a->tensor_model_parallel_size;
    const int etp = a->expert_tensor_parallel_size ? a->expert_tensor_parallel_size : tp;
    if (a->moe_ffn_hidden_size && !E) mc_user_error("--moe-ffn-hidden-size needs --num-experts");
    if (a->moe_grouped_gemm && !a->bf16)
        mc_user_error("--moe-grouped-gemm needs --bf16 (Megatron's grouped GEMM for MoE is bf16 "
                      "only)");
    const int ffn = a->moe_ffn_hidden_size ? a->moe_ffn_hidden_size : a->ffn_hidden_size;
    if (E && ffn % etp != 0)
        mc_user_error("the experts' FFN size (%d, --moe-ffn-hidden-size or --ffn-hidden-size) must "
                      "be divisible by --expert-tensor-parallel-size (%d)",
                      ffn, etp);
    const int shared = a->moe_shared_expert_intermediate_size;
    /* SharedExpertMLP asserts it (shared_experts.py) */
    if (E && shared && a->add_bias_linear)
        mc_user_error("--moe-shared-expert-intermediate-size needs --disable-bias-linear (the "
                      "shared expert has no biases)");
    if (E && shared && shared % tp != 0)
        mc_user_error("--moe-shared-expert-intermediate-size (%d) must be divisible by "
                      "--tensor-model-parallel-size (%d)",
                      shared, tp);
    bool *is_moe = calloc((size_t)a->num_layers + 1, sizeof(bool));
    char err[512];
    if (!is_moe) mc_fatal("out of host memory checking --moe-layer-freq");
    int moe =
        mc_moe_layer_pattern(a->moe_layer_freq, E ? a->num_layers : -1, is_moe, err, sizeof(err));
    free(is_moe);
    if (moe < 0) mc_user_error("%s", err);
}

/* Whether the field of f holds its default (an omitted flag): lists by their count, numbers and
 * texts against what mc_flag_default writes, the *_set companions too. The expert tensor size
 * derived from tp (an earlier validation) counts as its default. */
static bool at_default(const mc_args_t *a, const mc_flag_t *f, mc_args_t *d)
{
    const char *p = (const char *)a + f->field, *q = (const char *)d + f->field;
    if (f->type == MC_FLAG_LIST) return *(const int *)((const char *)a + f->count_field) == 0;
    if (f->set_size && *(const bool *)((const char *)a + f->set_field)) return false;
    if (f->field == offsetof(mc_args_t, expert_tensor_parallel_size))
        return a->expert_tensor_parallel_size == 0 ||
               a->expert_tensor_parallel_size == a->tensor_model_parallel_size;
    mc_flag_default(d, f);
    if (f->type == MC_FLAG_STRING || f->type == MC_FLAG_CHOICE) return strcmp(p, q) == 0;
    return memcmp(p, q, f->field_size) == 0;
}

/* One problem line, formatted, handed to report (which returns: the caller carries on). */
__attribute__((format(printf, 2, 3))) static void problem(void (*report)(const char *line),
                                                          const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    report(line);
}

/* The flags parsed for Megatron's rules whose feature megatron-c lacks: each one given is
 * refused, one line each. */
static void pending(const mc_args_t *a, void (*report)(const char *line))
{
    static mc_args_t d; /* defaults of one field at a time */
    for (size_t i = 0; i < mc_flag_count(); i++) {
        const mc_flag_t *f = mc_flag_at(i);
        if (!f->checked_first || !f->field_size || at_default(a, f, &d)) continue;
        problem(
            report,
            "%s is recognised but not implemented yet in megatron-c (%s; the MoE layer has "
            "a top-k softmax or sigmoid router, the load-balancing and z losses and expert "
            "parallelism with the alltoall and allgather dispatchers for now; see docs/FLAGS.md)",
            f->name, f->note ? f->note : "not implemented");
    }
}

/* Expert parallelism today (model/moe.c's alltoall dispatcher, model/moe_allgather.c's allgather
 * one): any tp (below), pp and vpp,
 * gradients reduced (the distributed optimizer: sharded) over edp; torch_dist checkpoints. */
static void expert_parallel_scope(const mc_args_t *a, void (*report)(const char *line))
{
    const int ep = a->expert_model_parallel_size;
    if (ep <= 1) return;
#define TODO(cond, what)                                                                           \
    if (cond)                                                                                      \
        problem(report,                                                                            \
                "--expert-model-parallel-size %d with %s is recognised but not implemented yet "   \
                "in megatron-c",                                                                   \
                ep, what);
    TODO(a->log_num_zeros_in_grad, "--log-num-zeros-in-grad")
    TODO(a->check_weight_hash_across_dp_replicas_interval,
         "--check-weight-hash-across-dp-replicas-interval")
#undef TODO
}

/* Tensor parallelism in MoE layers today (model/moe.c): sequence parallel (parallel() above),
 * the alltoall and allgather dispatchers with etp tp or 1, the load-balancing and z losses,
 * checkpoints with etp tp: both formats at ep 1, torch_dist at ep > 1 with the distributed
 * optimizer. */
static void tensor_parallel_scope(const mc_args_t *a, void (*report)(const char *line))
{
    const int tp = a->tensor_model_parallel_size;
    const int etp = a->expert_tensor_parallel_size ? a->expert_tensor_parallel_size : tp;
    if (tp <= 1 && etp <= 1) return;
#define TODO(cond, what)                                                                           \
    if (cond)                                                                                      \
        problem(                                                                                   \
            report,                                                                                \
            "MoE layers with --tensor-model-parallel-size %d and --expert-tensor-parallel-size "   \
            "%d with %s are recognised but not implemented yet in megatron-c (see issue 31)",      \
            tp, etp, what);
    TODO(etp != tp && etp != 1, "an --expert-tensor-parallel-size other than 1 or tp")
    /* with the experts split as the dense layers (etp tp): at ep 1 both formats and every
     * optimizer form; at ep > 1 torch_dist (a legacy file's load is refused by
     * ckpt/checkpoint.c) with the distributed optimizer's dp_reshardable state (Megatron's
     * chained optimizer, the tp2sp-ep2 reference's layout) */
    const int ep = a->expert_model_parallel_size;
    TODO((a->save[0] && ep > 1 && strcmp(a->ckpt_format, "torch_dist") != 0) ||
             ((a->load[0] || a->save[0]) &&
              (etp != tp || (ep > 1 && (!a->use_distributed_optimizer ||
                                        a->dist_ckpt_optim_fully_reshardable)))),
         "--load or --save with an --expert-tensor-parallel-size other than tp, or at "
         "--expert-model-parallel-size > 1 other than torch_dist with --use-distributed-optimizer "
         "(dp_reshardable)")
#undef TODO
}

/* What the MoE layer does today (model/moe.c): E/ep experts on every rank, each split over etp,
 * with cp 1 (any tp, dp and pp), SwiGLU experts without biases in fp32, bf16 or fp16 (ep 1),
 * per-token loss or not, dense layers among MoE layers (--moe-layer-freq), the aux, seq-aux,
 * global aux and z losses, checkpoints (with per-layer torch_dist keys under --moe-layer-freq,
 * the routers' expert_bias buffers). The rest is refused by name, every
 * part at once. */
static void scope(const mc_args_t *a, void (*report)(const char *line))
{
    if (!a->num_experts) return;
#define TODO(cond, what)                                                                           \
    if (cond)                                                                                      \
        problem(report,                                                                            \
                "MoE layers with %s are recognised but not implemented yet in megatron-c (see "    \
                "docs/FLAGS.md and issue 31)",                                                     \
                what);
    TODO(a->context_parallel_size > 1, "--context-parallel-size > 1")
    TODO(!a->swiglu, "experts without --swiglu")
    TODO(a->add_bias_linear, "biases (add --disable-bias-linear)")
    /* at ep > 1 Megatron's chained optimizer (the experts' own distributed optimizer) is mapped
     * for the distributed optimizer only (legacy loads without it: ckpt/checkpoint.c) */
    TODO(a->save[0] && a->expert_model_parallel_size > 1 &&
             (!a->use_distributed_optimizer ||
              (strcmp(a->ckpt_format, "torch_dist") == 0 && a->dist_ckpt_optim_fully_reshardable)),
         "--save and --expert-model-parallel-size > 1 other than with "
         "--use-distributed-optimizer (torch, or torch_dist's dp_reshardable state)")
    TODO(a->num_layers > MC_MOE_MAX_LAYERS, "more than 1024 layers")
#undef TODO
    expert_parallel_scope(a, report);
    tensor_parallel_scope(a, report);
}

void mc_moe_unimplemented(const mc_args_t *a, void (*report)(const char *line))
{
    pending(a, report);
    scope(a, report);
}

void mc_validate_moe(mc_args_t *a, int world_size)
{
    load_balancing(a);
    parallel(a, world_size);
    router(a);
    capacity_and_dispatch(a);
    experts(a);
    /* what Megatron derives (TransformerConfig) */
    if (!a->expert_tensor_parallel_size)
        a->expert_tensor_parallel_size = a->tensor_model_parallel_size;
    if (a->num_experts && !a->moe_ffn_hidden_size) a->moe_ffn_hidden_size = a->ffn_hidden_size;
}
