/* What a converted checkpoint carries from its source beyond the trainer's state
 * (ckpt/convert_int.h): the source's args Namespace with the target's layout, the optimizer
 * groups' fields that megatron-c does not hold, the grad scaler, the floating-point operations
 * so far. */
#include <stdio.h>
#include <string.h>

#include "ckpt/args.h"
#include "ckpt/convert_int.h"

/* The source's Namespace with the target's layout. */
mc_pyobj_t *mc_cv_target_namespace(const mc_pyobj_t *ns, const mc_args_t *t, bool torch_dist)
{
    mc_pyobj_t *out = mc_ckpt_args_copy(ns);
    if (!out) return NULL;
#define INT_OR_NONE(v) ((v) > 0 ? mc_py_int(v) : mc_py_none())
    int rc =
        mc_py_attr_set(out, "tensor_model_parallel_size", mc_py_int(t->tensor_model_parallel_size));
    rc |= mc_py_attr_set(out, "pipeline_model_parallel_size",
                         mc_py_int(t->pipeline_model_parallel_size));
    rc |= mc_py_attr_set(out, "virtual_pipeline_model_parallel_size",
                         t->virtual_pipeline_model_parallel_size > 1
                             ? mc_py_int(t->virtual_pipeline_model_parallel_size)
                             : mc_py_none());
    rc |= mc_py_attr_set(out, "num_layers_per_virtual_pipeline_stage",
                         INT_OR_NONE(t->num_layers_per_virtual_pipeline_stage));
    rc |= mc_py_attr_set(out, "num_virtual_stages_per_pipeline_rank",
                         INT_OR_NONE(t->num_virtual_stages_per_pipeline_rank));
    rc |= mc_py_attr_set(out, "decoder_first_pipeline_num_layers",
                         INT_OR_NONE(t->decoder_first_pipeline_num_layers));
    rc |= mc_py_attr_set(out, "decoder_last_pipeline_num_layers",
                         INT_OR_NONE(t->decoder_last_pipeline_num_layers));
    rc |= mc_py_attr_set(out, "account_for_embedding_in_pipeline_split",
                         mc_py_bool(t->account_for_embedding_in_pipeline_split));
    rc |= mc_py_attr_set(out, "account_for_loss_in_pipeline_split",
                         mc_py_bool(t->account_for_loss_in_pipeline_split));
    rc |= mc_py_attr_set(out, "padded_vocab_size", mc_py_int(t->padded_vocab_size));
    rc |= mc_py_attr_set(out, "data_parallel_size", mc_py_int(t->data_parallel_size));
    rc |= mc_py_attr_set(out, "world_size", mc_py_int(t->world_size));
    rc |=
        mc_py_attr_set(out, "use_distributed_optimizer", mc_py_bool(t->use_distributed_optimizer));
    rc |= mc_py_attr_set(out, "overlap_grad_reduce", mc_py_bool(t->overlap_grad_reduce));
    rc |= mc_py_attr_set(out, "overlap_param_gather", mc_py_bool(t->overlap_param_gather));
    rc |= mc_py_attr_set(out, "ddp_bucket_size", INT_OR_NONE(t->ddp_bucket_size));
    rc |= mc_py_attr_set(out, "ddp_num_buckets", INT_OR_NONE(t->ddp_num_buckets));
    rc |= mc_py_attr_set(out, "transformer_impl", mc_py_str(t->transformer_impl));
    rc |= mc_py_attr_set(out, "ckpt_format", mc_py_str(torch_dist ? "torch_dist" : "torch"));
    if (t->num_experts) /* the experts split as the target's tp (ckpt/convert.c) */
        rc |= mc_py_attr_set(out, "expert_tensor_parallel_size",
                             mc_py_int(t->expert_tensor_parallel_size));
#undef INT_OR_NONE
    if (rc) {
        mc_py_decref(out);
        return NULL;
    }
    return out;
}

/* The inner optimizer's param_groups of an `optimizer` entry (any of Megatron's forms). */
static mc_pyobj_t *groups_of(const mc_pyobj_t *opt)
{
    const mc_pyobj_t *inner = mc_py_dict_get_str(opt, "optimizer");
    return mc_py_dict_get_str(inner ? inner : opt, "param_groups");
}

/* A group's identifier keys as Megatron matches groups on load (_filter_and_reorder_param_groups:
 * wd_mult, lr_mult, is_expert_parallel, is_decoupled_lr; megatron-c's groups are never expert
 * parallel). */
static bool same_group(const mc_pyobj_t *a, const mc_pyobj_t *b)
{
    double wa = -1, wb = -2, la = 1, lb = 1;
    bool da = false, db = false;
    mc_py_get_float(mc_py_dict_get_str(a, "wd_mult"), &wa);
    mc_py_get_float(mc_py_dict_get_str(b, "wd_mult"), &wb);
    mc_py_get_float(mc_py_dict_get_str(a, "lr_mult"), &la);
    mc_py_get_float(mc_py_dict_get_str(b, "lr_mult"), &lb);
    mc_py_get_bool(mc_py_dict_get_str(a, "is_decoupled_lr"), &da);
    mc_py_get_bool(mc_py_dict_get_str(b, "is_decoupled_lr"), &db);
    return wa == wb && la == lb && da == db;
}

static const mc_pyobj_t *group_like(const mc_pyobj_t *groups, const mc_pyobj_t *g)
{
    for (size_t k = 0; k < mc_py_len(groups); k++)
        if (same_group(mc_py_item(groups, k), g)) return mc_py_item(groups, k);
    return NULL;
}

/* What the source's optimizer entry holds beyond megatron-c's: its groups' fields (Apex or
 * Transformer Engine's FusedAdam keep bias_correction, adam_w_mode, ... there, and torch
 * replaces a group with the saved one on load) and the grad scaler. */
static int carry_optimizer(mc_pyobj_t *opt, const mc_pyobj_t *src_opt)
{
    int rc = 0;
    mc_pyobj_t *groups = groups_of(opt);
    const mc_pyobj_t *src_groups = groups_of(src_opt);
    for (size_t k = 0; k < mc_py_len(groups); k++) {
        mc_pyobj_t *g = mc_py_item(groups, k);
        const mc_pyobj_t *like = group_like(src_groups, g);
        for (size_t j = 0; like && like->kind == MC_PY_DICT && j < like->dict.len; j++) {
            const char *key = mc_py_get_str(like->dict.keys[j]);
            if (key && strcmp(key, "params") != 0 && strcmp(key, "step") != 0)
                rc |= mc_py_dict_set(g, mc_py_incref(like->dict.keys[j]),
                                     mc_py_incref(like->dict.vals[j]));
        }
    }
    const mc_pyobj_t *scaler = mc_py_dict_get_str(src_opt, "grad_scaler");
    if (scaler && mc_py_dict_get_str(opt, "optimizer"))
        rc |= mc_py_dict_set_str(opt, "grad_scaler", mc_py_incref((mc_pyobj_t *)scaler));
    return rc;
}

int mc_cv_carry(const mc_cv_target_t *tg, mc_pyobj_t *sd)
{
    int rc = mc_py_dict_set_str(sd, "args", mc_py_incref(tg->ns));
    const mc_pyobj_t *src_opt = mc_py_dict_get_str(tg->ck0, "optimizer");
    mc_pyobj_t *opt = mc_py_dict_get_str(sd, "optimizer");
    if (opt && src_opt) rc |= carry_optimizer(opt, src_opt);
    const mc_pyobj_t *flops = mc_py_dict_get_str(tg->ck0, "num_floating_point_operations_so_far");
    if (flops)
        rc |= mc_py_dict_set_str(sd, "num_floating_point_operations_so_far",
                                 mc_py_incref((mc_pyobj_t *)flops));
    return rc;
}
