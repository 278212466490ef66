/* The optimizer and scheduler entries of model_optim_rng.pt (MEGATRON.md sections 7 and 9).
 *
 * For fp32 training Megatron wraps the inner Adam in FP32Optimizer, whose state_dict is the
 * inner optimizer's: torch's {state: {index: {...}}, param_groups: [{..., params: [index...]}]};
 * for 16-bit training Float16OptimizerWithFloat16Params adds the fp32 master parameters per
 * group. The parameter groups are _get_param_groups' for the standard overrides: weight-decayed
 * parameters first (wd_mult 1), then biases and 1-D parameters (wd_mult 0), each in the file's
 * named_parameters() order over the model chunks (mc_ckpt_order_t); indices count through the
 * groups in that order. With --decoupled-lr the word embeddings and output layer form a third
 * group (is_decoupled_lr, wd_mult 1) whose max_lr and min_lr are --decoupled-lr and
 * --decoupled-min-lr; _get_param_groups orders groups by their first parameter on the rank and
 * appends the other ranks' keys (every rank has every group, maybe empty), so it is the first
 * group where the word embeddings are (pipeline stage 0) and the last elsewhere.
 * megatron-c writes each parameter's state as torch.optim.AdamW does ({step, exp_avg,
 * exp_avg_sq}) and also the group's `step` that Apex's and Transformer Engine's FusedAdam keep,
 * so either optimizer Megatron may use resumes from the file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "ckpt/state.h"

static const char *const k_lr_styles[] = {[MC_LR_CONSTANT] = "constant",
                                          [MC_LR_LINEAR] = "linear",
                                          [MC_LR_COSINE] = "cosine",
                                          [MC_LR_INVERSE_SQRT] = "inverse-square-root"};
static const char *const k_wd_styles[] = {
    [MC_WD_CONSTANT] = "constant", [MC_WD_LINEAR] = "linear", [MC_WD_COSINE] = "cosine"};

/* ---- parameter groups ---- */

/* The kinds of parameter group: weight decay (wd_mult 1), none (wd_mult 0), and the decoupled
 * learning rate's (wd_mult 1, is_decoupled_lr). */
enum { G_WD, G_NO_WD, G_DECOUPLED, G_KINDS };

static bool decoupled(const mc_trainer_t *t) { return t->args->decoupled_lr >= 0; }

static int group_of(const mc_trainer_t *t, const mc_param_t *p)
{
    if (decoupled(t) && p->embedding_or_output) return G_DECOUPLED;
    return p->no_wd ? G_NO_WD : G_WD;
}

/* The groups of this rank in _get_param_groups' order; returns their number. Megatron keys its
 * groups by first appearance in named_parameters() (o's order), then appends the kinds other
 * ranks have, rank 0's first (the word embeddings' stage: decoupled, weight decay, none). */
static int group_order(const mc_trainer_t *t, const mc_ckpt_order_t *o, int order[G_KINDS])
{
    const int kinds = decoupled(t) ? 3 : 2;
    bool seen[G_KINDS] = {false, false, false};
    int n = 0;
    for (int k = 0; k < o->n && n < kinds; k++) {
        const int g = group_of(t, &t->model.params[o->param[k]]);
        if (!seen[g]) seen[g] = true, order[n++] = g;
    }
    static const int rank0[] = {G_DECOUPLED, G_WD, G_NO_WD};
    for (int j = decoupled(t) ? 0 : 1; j < 3; j++)
        if (!seen[rank0[j]]) seen[rank0[j]] = true, order[n++] = rank0[j];
    return n;
}

/* idx[i]: parameter i's index in the torch state, counting through the groups in group_order,
 * each in the file's order. */
static void param_indices(const mc_trainer_t *t, const mc_ckpt_order_t *o, int *idx)
{
    int order[G_KINDS], next = 0;
    const int ng = group_order(t, o, order);
    for (int gi = 0; gi < ng; gi++)
        for (int k = 0; k < o->n; k++)
            if (group_of(t, &t->model.params[o->param[k]]) == order[gi]) idx[o->param[k]] = next++;
}

/* One of Megatron's param_groups as torch's state_dict packs it: Megatron's fields, the inner
 * optimizer's defaults with the scheduler's current lr and weight decay, then step and params. */
static mc_pyobj_t *param_group(const mc_trainer_t *t, int g, const mc_ckpt_order_t *o,
                               const int *idx, bool with_params)
{
    const mc_args_t *a = t->args;
    const double wd_mult = g == G_NO_WD ? 0.0 : 1.0;
    const bool dec = g == G_DECOUPLED;
    const mc_lr_sched_t *s = &t->sched;
    const int64_t n = s->num_steps;
    mc_pyobj_t *d = mc_py_dict();
    int rc = d ? 0 : -1;
    rc |= mc_py_dict_set_str(d, "is_expert_parallel", mc_py_bool(false));
    rc |= mc_py_dict_set_str(d, "default_config", mc_py_bool(true));
    rc |= mc_py_dict_set_str(d, "wd_mult", mc_py_float(wd_mult));
    rc |= mc_py_dict_set_str(d, "lr_mult", mc_py_float(1.0));
    rc |= mc_py_dict_set_str(d, "is_decoupled_lr", mc_py_bool(dec));
    rc |= mc_py_dict_set_str(d, "max_lr", mc_py_float(dec ? s->decoupled_max_lr : a->lr));
    rc |= mc_py_dict_set_str(d, "min_lr", mc_py_float(dec ? s->decoupled_min_lr : a->min_lr));
    rc |= mc_py_dict_set_str(d, "lr", mc_py_float(dec ? mc_decoupled_lr_at(s, n) : mc_lr_at(s, n)));
    rc |= mc_py_dict_set_str(
        d, "betas", mc_py_tuple(2, mc_py_float(a->adam_beta1), mc_py_float(a->adam_beta2)));
    rc |= mc_py_dict_set_str(d, "eps", mc_py_float(a->adam_eps));
    rc |= mc_py_dict_set_str(d, "weight_decay", mc_py_float(mc_wd_at(&t->sched, n) * wd_mult));
    rc |= mc_py_dict_set_str(d, "amsgrad", mc_py_bool(false));
    rc |= mc_py_dict_set_str(d, "foreach", mc_py_none());
    rc |= mc_py_dict_set_str(d, "maximize", mc_py_bool(false));
    rc |= mc_py_dict_set_str(d, "capturable", mc_py_bool(false));
    rc |= mc_py_dict_set_str(d, "differentiable", mc_py_bool(false));
    rc |= mc_py_dict_set_str(d, "fused", mc_py_none());
    rc |= mc_py_dict_set_str(d, "step", mc_py_int(t->opt.step));
    if (with_params) {
        mc_pyobj_t *params = mc_py_list();
        for (int k = 0; k < o->n; k++)
            if (group_of(t, &t->model.params[o->param[k]]) == g)
                rc |= mc_py_list_append(params, mc_py_int(idx[o->param[k]]));
        rc |= mc_py_dict_set_str(d, "params", params);
    }
    if (rc) {
        mc_py_decref(d);
        return NULL;
    }
    return d;
}

static mc_pyobj_t *param_groups(const mc_trainer_t *t, const mc_ckpt_order_t *o, const int *idx,
                                bool with_params)
{
    mc_pyobj_t *list = mc_py_list();
    int rc = list ? 0 : -1, order[G_KINDS];
    const int ng = group_order(t, o, order);
    for (int gi = 0; gi < ng; gi++)
        rc |= mc_py_list_append(list, param_group(t, order[gi], o, idx, with_params));
    if (rc) {
        mc_py_decref(list);
        return NULL;
    }
    return list;
}

/* ---- model weights and master parameters ---- */

/* In fp32 training the model's parameters are the master parameters. A 16-bit model keeps
 * its fp32 masters in the optimizer (optim/adam.h); these two are where the checkpoint entries
 * of the non-distributed optimizer read and write them (its segment i is parameter i, whole). */
static const float *master_of(const mc_trainer_t *t, const mc_param_t *p)
{
    return mc_opt_param(&t->opt, &t->opt.segs[p - t->model.params]);
}

static int load_master(mc_trainer_t *t, const mc_param_t *p, const mc_pyobj_t *v, const char *what,
                       char *err, size_t n)
{
    return mc_ckpt_tensor_into(t->model.be,
                               mc_opt_param(&t->opt, &t->opt.segs[p - t->model.params]), MC_DT_F32,
                               v, p->ndim, p->local, what, err, n);
}

/* The grad scaler's state_dict: DynamicGradScaler's {scale, growth_tracker, hysteresis_tracker}
 * (scale a one-element float32 tensor), ConstantGradScaler's {}. */
static mc_pyobj_t *scaler_dict(const mc_scaler_t *sc)
{
    mc_pyobj_t *d = mc_py_dict();
    if (!d || !sc->dynamic) return d;
    const float scale = (float)sc->scale;
    const int64_t one[1] = {1};
    int rc = mc_py_dict_set_str(d, "scale", mc_py_tensor_copy(MC_TORCH_FLOAT32, 1, one, &scale));
    rc |= mc_py_dict_set_str(d, "growth_tracker", mc_py_int(sc->growth_tracker));
    rc |= mc_py_dict_set_str(d, "hysteresis_tracker", mc_py_int(sc->hysteresis_tracker));
    if (rc) {
        mc_py_decref(d);
        return NULL;
    }
    return d;
}

/* The grad scaler's state (DynamicGradScaler.load_state_dict), with Megatron's warnings when
 * the checkpoint and this run disagree on having one. */
static int load_scaler(mc_trainer_t *t, const mc_pyobj_t *sd, char *err, size_t n)
{
    const bool printer = t->par.rank == t->par.last_rank;
    if (!sd) {
        if (t->scaler.dynamic && printer)
            printf("***WARNING*** found an old checkpoint, will not load grad scaler ...\n");
        return 0;
    }
    if (!t->scaler.enabled) {
        if (printer && (t->args->bf16 || t->args->fp16))
            printf("***WARNING*** found the grad scaler in the checkpoint but it is None in the "
                   "class. Skipping loading grad scaler ...\n");
        return 0;
    }
    if (!t->scaler.dynamic) return 0; /* ConstantGradScaler keeps its --loss-scale */
    const mc_pyobj_t *scale = mc_py_dict_get_str(sd, "scale");
    int64_t growth, hyst;
    double v;
    if (scale && scale->kind == MC_PY_TENSOR && mc_py_tensor_numel(scale) == 1 &&
        scale->tensor.dtype == MC_TORCH_FLOAT32)
        v = *(const float *)mc_py_tensor_data(scale);
    else if (mc_py_get_float(scale, &v) != 0)
        return mc_errf(err, n, "the grad scaler state has no scale (add --no-load-optim)");
    if (mc_py_get_int(mc_py_dict_get_str(sd, "growth_tracker"), &growth) != 0 ||
        mc_py_get_int(mc_py_dict_get_str(sd, "hysteresis_tracker"), &hyst) != 0)
        return mc_errf(err, n,
                       "the grad scaler state has no growth_tracker/hysteresis_tracker (add "
                       "--no-load-optim)");
    t->scaler.scale = v;
    t->scaler.growth_tracker = (int)growth;
    t->scaler.hysteresis_tracker = (int)hyst;
    return 0;
}

static bool model_16bit(const mc_args_t *a) { return a->bf16 || a->fp16; }

/* ---- save ---- */

/* torch's state: {index: {step, exp_avg, exp_avg_sq}} in index order, each parameter whole */
static mc_pyobj_t *adam_state(const mc_trainer_t *t, const mc_ckpt_order_t *o, const int *idx)
{
    const mc_gpt_t *m = &t->model;
    mc_pyobj_t *state = mc_py_dict();
    int rc = state ? 0 : -1;
    float step = (float)t->opt.step;
    int order[G_KINDS];
    const int ng = group_order(t, o, order);
    for (int gi = 0; gi < ng; gi++)
        for (int k = 0; k < o->n; k++) {
            const mc_param_t *p = &m->params[o->param[k]];
            if (group_of(t, p) != order[gi]) continue;
            mc_pyobj_t *s = mc_py_dict();
            rc |=
                mc_py_dict_set_str(s, "step", mc_py_tensor_copy(MC_TORCH_FLOAT32, 0, NULL, &step));
            rc |= mc_py_dict_set_str(s, "exp_avg",
                                     mc_ckpt_host_tensor(m->be, t->opt.exp_avg + p->offset,
                                                         MC_DT_F32, p->ndim, p->local));
            rc |= mc_py_dict_set_str(s, "exp_avg_sq",
                                     mc_ckpt_host_tensor(m->be, t->opt.exp_avg_sq + p->offset,
                                                         MC_DT_F32, p->ndim, p->local));
            rc |= mc_py_dict_set_int(state, idx[o->param[k]], s);
        }
    if (rc) {
        mc_py_decref(state);
        return NULL;
    }
    return state;
}

/* Float16OptimizerWithFloat16Params' fp32_from_fp16_params: per group, the masters in order. */
static mc_pyobj_t *masters(const mc_trainer_t *t, const mc_ckpt_order_t *o)
{
    mc_pyobj_t *groups = mc_py_list();
    int rc = groups ? 0 : -1, order[G_KINDS];
    const int ng = group_order(t, o, order);
    for (int gi = 0; gi < ng; gi++) {
        mc_pyobj_t *list = mc_py_list();
        for (int k = 0; k < o->n; k++) {
            const mc_param_t *p = &t->model.params[o->param[k]];
            if (group_of(t, p) == order[gi])
                rc |= mc_py_list_append(list, mc_ckpt_host_tensor(t->model.be, master_of(t, p),
                                                                  MC_DT_F32, p->ndim, p->local));
        }
        rc |= mc_py_list_append(groups, list);
    }
    if (rc) {
        mc_py_decref(groups);
        return NULL;
    }
    return groups;
}

/* Megatron's torch_dist common_step in place of the per-parameter state, whose tensors are
 * sharded. */
static mc_pyobj_t *common_state(const mc_trainer_t *t)
{
    mc_pyobj_t *state = mc_py_dict();
    if (mc_py_dict_set_str(state, "common_step", mc_py_int(t->opt.step))) {
        mc_py_decref(state);
        return NULL;
    }
    return state;
}

/* tensors: the legacy form; otherwise torch_dist's common part (no tensor at all). */
static mc_pyobj_t *optimizer_dict(const mc_trainer_t *t, const mc_ckpt_order_t *o, bool tensors)
{
    const mc_gpt_t *m = &t->model;
    int *idx = malloc((size_t)(m->n_params ? m->n_params : 1) * sizeof(int));
    mc_pyobj_t *out = mc_py_dict();
    if (!idx || !out) {
        free(idx);
        mc_py_decref(out);
        return NULL;
    }
    param_indices(t, o, idx);
    int rc = 0;
    if (t->ddp.dist_opt) {
        /* DistributedOptimizer.state_dict: the inner state_dict without state, groups without
         * params; the parameter state goes to distrib_optim.pt */
        mc_pyobj_t *inner = mc_py_dict();
        rc |= mc_py_dict_set_str(inner, "param_groups", param_groups(t, o, idx, false));
        rc |= mc_py_dict_set_str(out, "optimizer", inner);
        if (t->scaler.enabled)
            rc |= mc_py_dict_set_str(out, "grad_scaler", scaler_dict(&t->scaler));
    } else if (model_16bit(t->args)) {
        mc_pyobj_t *inner = mc_py_dict();
        rc |= mc_py_dict_set_str(inner, "state", tensors ? adam_state(t, o, idx) : common_state(t));
        rc |= mc_py_dict_set_str(inner, "param_groups", param_groups(t, o, idx, true));
        rc |= mc_py_dict_set_str(out, "optimizer", inner);
        if (t->scaler.enabled)
            rc |= mc_py_dict_set_str(out, "grad_scaler", scaler_dict(&t->scaler));
        if (tensors) rc |= mc_py_dict_set_str(out, "fp32_from_fp16_params", masters(t, o));
    } else {
        rc |= mc_py_dict_set_str(out, "state", tensors ? adam_state(t, o, idx) : common_state(t));
        rc |= mc_py_dict_set_str(out, "param_groups", param_groups(t, o, idx, true));
    }
    free(idx);
    if (rc) {
        mc_py_decref(out);
        return NULL;
    }
    return out;
}

mc_pyobj_t *mc_ckpt_optimizer_dict(const mc_trainer_t *t, const mc_ckpt_order_t *o)
{
    return optimizer_dict(t, o, true);
}

mc_pyobj_t *mc_ckpt_optimizer_common(const mc_trainer_t *t, const mc_ckpt_order_t *o)
{
    return optimizer_dict(t, o, false);
}

mc_pyobj_t *mc_ckpt_optimizer_common_experts(const mc_trainer_t *t, const mc_ckpt_order_t *o)
{
    /* the experts' DistributedOptimizer.state_dict: their one group (2-D weights: weight
     * decay), is_expert_parallel */
    mc_pyobj_t *g = param_group(t, G_WD, o, NULL, false), *groups = mc_py_list();
    mc_pyobj_t *inner = mc_py_dict(), *out = mc_py_dict();
    int rc = g && groups && inner && out ? 0 : -1;
    rc |= mc_py_dict_set_str(g, "is_expert_parallel", mc_py_bool(true));
    rc |= mc_py_list_append(groups, g);
    rc |= mc_py_dict_set_str(inner, "param_groups", groups);
    rc |= mc_py_dict_set_str(out, "optimizer", inner);
    if (t->scaler.enabled) rc |= mc_py_dict_set_str(out, "grad_scaler", scaler_dict(&t->scaler));
    if (rc) {
        mc_py_decref(out);
        return NULL;
    }
    return out;
}

/* ---- load ---- */

/* The kind of a saved group (its identifier keys: wd_mult, lr_mult, is_decoupled_lr): G_WD,
 * G_NO_WD, G_DECOUPLED, or -1 for any other (scaled learning rates, a decoupled group without
 * weight decay). */
static int saved_group_kind(const mc_pyobj_t *g)
{
    double wd = -1, lr_mult = 1;
    bool dec = false;
    if (!g || g->kind != MC_PY_DICT || mc_py_get_float(mc_py_dict_get_str(g, "wd_mult"), &wd) != 0)
        return -1;
    mc_py_get_float(mc_py_dict_get_str(g, "lr_mult"), &lr_mult);
    mc_py_get_bool(mc_py_dict_get_str(g, "is_decoupled_lr"), &dec);
    if (lr_mult != 1.0) return -1;
    if (dec) return wd == 1.0 ? G_DECOUPLED : -1;
    return wd == 1.0 ? G_WD : wd == 0.0 ? G_NO_WD : -1;
}

/* torch's load_state_dict takes a group's hyperparameters from the file: the decoupled group's
 * max_lr and min_lr are the checkpoint's from here on (the scheduler reads them per group). */
static int load_decoupled_bounds(mc_trainer_t *t, const mc_pyobj_t *g, char *err, size_t n)
{
    double max_lr, min_lr;
    if (mc_py_get_float(mc_py_dict_get_str(g, "max_lr"), &max_lr) != 0 ||
        mc_py_get_float(mc_py_dict_get_str(g, "min_lr"), &min_lr) != 0)
        return mc_errf(err, n,
                       "the optimizer's decoupled learning-rate group has no max_lr/min_lr");
    t->sched.decoupled_max_lr = max_lr;
    t->sched.decoupled_min_lr = min_lr;
    return 0;
}

/* Adam's step count: the groups' `step` (Apex/TE FusedAdam, DistributedOptimizer), else the
 * per-parameter `step` tensor of torch's Adam. -1 when absent. */
static int64_t saved_step(const mc_pyobj_t *groups, const mc_pyobj_t *state)
{
    double common; /* Megatron's torch_dist common_step: one step for every parameter */
    if (mc_py_get_float(mc_py_dict_get_str(state, "common_step"), &common) == 0)
        return (int64_t)common;
    for (size_t k = 0; k < mc_py_len(groups); k++) {
        double v;
        if (mc_py_get_float(mc_py_dict_get_str(mc_py_item(groups, k), "step"), &v) == 0)
            return (int64_t)v;
    }
    for (size_t k = 0; state && k < state->dict.len; k++) {
        const mc_pyobj_t *s = mc_py_dict_get_str(state->dict.vals[k], "step");
        double v;
        if (mc_py_get_float(s, &v) == 0) return (int64_t)v;
        if (s && s->kind == MC_PY_TENSOR && mc_py_tensor_numel(s) == 1 &&
            s->tensor.dtype == MC_TORCH_FLOAT32)
            return (int64_t) * (const float *)mc_py_tensor_data(s);
    }
    return -1;
}

/* Checks the saved groups are Megatron's two standard ones and takes the step count. */
static int load_groups(mc_trainer_t *t, const mc_pyobj_t *groups, const mc_pyobj_t *state,
                       char *err, size_t n)
{
    if (!groups || groups->kind != MC_PY_LIST)
        return mc_errf(err, n, "the optimizer has no param_groups list");
    bool have[G_KINDS] = {false, false, false};
    for (size_t k = 0; k < mc_py_len(groups); k++) {
        int g = saved_group_kind(mc_py_item(groups, k));
        if (g < 0 || have[g])
            return mc_errf(err, n,
                           "the optimizer has parameter groups other than Megatron's standard two "
                           "(weight decay, and none for biases and 1-D parameters) and "
                           "--decoupled-lr's: scaled learning rates are not supported (add "
                           "--no-load-optim)");
        have[g] = true;
        if (g == G_DECOUPLED && decoupled(t) &&
            load_decoupled_bounds(t, mc_py_item(groups, k), err, n) != 0)
            return -1;
    }
    if (have[G_DECOUPLED] && !decoupled(t))
        return mc_errf(err, n,
                       "the optimizer was saved with --decoupled-lr (a parameter group of the "
                       "embedding and output layer) but this run has none (give --decoupled-lr, "
                       "or add --no-load-optim)");
    if (!have[G_DECOUPLED] && decoupled(t))
        return mc_errf(err, n,
                       "the optimizer has no parameter group with is_decoupled_lr (saved without "
                       "--decoupled-lr; drop --decoupled-lr or add --no-load-optim)");
    for (int g = 0; g < 2; g++)
        if (!have[g])
            return mc_errf(err, n,
                           "the optimizer has no parameter group with wd_mult %s (saved "
                           "with other parameter groups; add --no-load-optim)",
                           g == 0 ? "1.0" : "0.0");
    int64_t step = saved_step(groups, state);
    if (step < 0)
        return mc_errf(err, n, "the optimizer state has no step count (add --no-load-optim)");
    t->opt.step = (int)step;
    return 0;
}

/* Group position gi of the saved list holds the k-th parameters of kind g in the file's order:
 * their Adam moments from state, and their fp32 masters from masters[gi] (16-bit checkpoints). */
static int load_group(mc_trainer_t *t, const mc_ckpt_order_t *o, const mc_pyobj_t *group, int g,
                      const mc_pyobj_t *state, const mc_pyobj_t *master_list, char *err, size_t n)
{
    const mc_gpt_t *m = &t->model;
    const mc_pyobj_t *params = mc_py_dict_get_str(group, "params");
    int count = 0;
    for (int k = 0; k < o->n; k++) count += group_of(t, &m->params[o->param[k]]) == g;
    const char *what = g == G_DECOUPLED ? "is_decoupled_lr"
                       : g == G_WD      ? "wd_mult 1.0"
                                        : "wd_mult 0.0";
    if (mc_py_len(params) != (size_t)count)
        return mc_errf(err, n,
                       "the optimizer's group with %s has %zu parameters but this "
                       "run's has %d (saved with another model or pipeline layout)",
                       what, mc_py_len(params), count);
    if (master_list && mc_py_len(master_list) != (size_t)count)
        return mc_errf(err, n,
                       "fp32_from_fp16_params of the group with %s has %zu "
                       "tensors but the group %d parameters (a model mixing 16-bit and fp32 "
                       "parameters is not supported; add --no-load-optim)",
                       what, mc_py_len(master_list), count);
    char name[160];
    for (int k = 0, j = 0; k < o->n; k++) {
        const mc_param_t *p = &m->params[o->param[k]];
        if (group_of(t, p) != g) continue;
        int64_t saved;
        const mc_pyobj_t *s = NULL;
        if (mc_py_get_int(mc_py_item(params, (size_t)j), &saved) == 0)
            s = mc_py_dict_get_int(state, saved);
        if (!s) return mc_errf(err, n, "the optimizer state of %s is missing", p->name);
        snprintf(name, sizeof(name), "exp_avg of %s", p->name);
        if (mc_ckpt_tensor_into(m->be, t->opt.exp_avg + p->offset, MC_DT_F32,
                                mc_py_dict_get_str(s, "exp_avg"), p->ndim, p->local, name, err,
                                n) != 0)
            return -1;
        snprintf(name, sizeof(name), "exp_avg_sq of %s", p->name);
        if (mc_ckpt_tensor_into(m->be, t->opt.exp_avg_sq + p->offset, MC_DT_F32,
                                mc_py_dict_get_str(s, "exp_avg_sq"), p->ndim, p->local, name, err,
                                n) != 0)
            return -1;
        snprintf(name, sizeof(name), "the fp32 master of %s", p->name);
        if (master_list && load_master(t, p, mc_py_item(master_list, (size_t)j), name, err, n) != 0)
            return -1;
        j++;
    }
    return 0;
}

int mc_ckpt_optimizer_load(mc_trainer_t *t, const mc_pyobj_t *opt, const mc_ckpt_order_t *o,
                           char *err, size_t n)
{
    /* Megatron's ChainedOptimizer (expert parallelism): [dense, experts]; with the distributed
     * optimizer their scalars agree and the states are in distrib_optim.pt */
    if (opt && opt->kind == MC_PY_LIST) {
        if (mc_py_len(opt) != 2 || !t->ddp.dist_opt)
            return mc_errf(err, n,
                           "'optimizer' is a list of %zu optimizers (Megatron's chained "
                           "optimizer): read only as the dense and the experts' distributed "
                           "optimizers (give --use-distributed-optimizer, or add --no-load-optim)",
                           mc_py_len(opt));
        opt = mc_py_item(opt, 0);
    }
    if (!opt || opt->kind != MC_PY_DICT) return mc_errf(err, n, "'optimizer' is not a dict");
    /* Megatron's three forms: Float16OptimizerWithFloat16Params ({optimizer, grad_scaler,
     * fp32_from_fp16_params}), DistributedOptimizer ({optimizer: {param_groups}, grad_scaler}),
     * FP32Optimizer (the inner {state, param_groups}) */
    const mc_pyobj_t *all_masters = mc_py_dict_get_str(opt, "fp32_from_fp16_params");
    if (!all_masters) all_masters = mc_py_dict_get_str(opt, "fp32_from_fp16"); /* older name */
    const mc_pyobj_t *inner = mc_py_dict_get_str(opt, "optimizer");
    const bool saved_dist = inner && !all_masters;
    if (!inner) inner = opt;
    if (inner->kind != MC_PY_DICT)
        return mc_errf(err, n, "'optimizer' holds no optimizer state dict");
    if (saved_dist != t->ddp.dist_opt)
        return mc_errf(err, n,
                       "the optimizer was saved %s --use-distributed-optimizer but this run "
                       "%s it (use the same setting, convert the checkpoint with megatron-c "
                       "convert-checkpoint, or add --no-load-optim)",
                       saved_dist ? "with" : "without", t->ddp.dist_opt ? "uses" : "does not use");
    const mc_pyobj_t *groups = mc_py_dict_get_str(inner, "param_groups");
    if (load_scaler(t, inner != opt ? mc_py_dict_get_str(opt, "grad_scaler") : NULL, err, n) != 0)
        return -1;
    if (saved_dist) return load_groups(t, groups, NULL, err, n);

    const mc_pyobj_t *state = mc_py_dict_get_str(inner, "state");
    if (!state || state->kind != MC_PY_DICT)
        return mc_errf(err, n, "the optimizer has no state dict");
    if (load_groups(t, groups, state, err, n) != 0) return -1;
    if (all_masters &&
        (all_masters->kind != MC_PY_LIST || mc_py_len(all_masters) != mc_py_len(groups)))
        return mc_errf(err, n,
                       "fp32_from_fp16_params is not a list with one entry per parameter group");
    for (size_t gi = 0; gi < mc_py_len(groups); gi++) {
        const mc_pyobj_t *group = mc_py_item(groups, gi);
        if (load_group(t, o, group, saved_group_kind(group), state,
                       all_masters ? mc_py_item(all_masters, gi) : NULL, err, n) != 0)
            return -1;
    }
    return 0;
}

int mc_ckpt_optimizer_load_scalars(mc_trainer_t *t, const mc_pyobj_t *opt, char *err, size_t n)
{
    if (!opt || opt->kind != MC_PY_DICT) return mc_errf(err, n, "'optimizer' is not a dict");
    const mc_pyobj_t *inner = mc_py_dict_get_str(opt, "optimizer");
    if (!inner) inner = opt;
    if (inner->kind != MC_PY_DICT)
        return mc_errf(err, n, "'optimizer' holds no optimizer state dict");
    if (load_scaler(t, inner != opt ? mc_py_dict_get_str(opt, "grad_scaler") : NULL, err, n) != 0)
        return -1;
    const mc_pyobj_t *state = mc_py_dict_get_str(inner, "state");
    return load_groups(t, mc_py_dict_get_str(inner, "param_groups"),
                       state && state->kind == MC_PY_DICT ? state : NULL, err, n);
}

mc_pyobj_t *mc_ckpt_scheduler_dict(const mc_lr_sched_t *s, const mc_args_t *a)
{
    mc_pyobj_t *d = mc_py_dict();
    int rc = d ? 0 : -1;
    /* warmup is a float only when it came from --lr-warmup-fraction, as in Python */
    mc_pyobj_t *warmup = a->lr_warmup_fraction >= 0 ? mc_py_float(s->warmup_steps)
                                                    : mc_py_int((int64_t)s->warmup_steps);
    rc |= mc_py_dict_set_str(d, "max_lr", mc_py_float(s->max_lr));
    rc |= mc_py_dict_set_str(d, "lr_warmup_steps", warmup);
    rc |= mc_py_dict_set_str(d, "num_steps", mc_py_int(s->num_steps));
    rc |= mc_py_dict_set_str(d, "lr_decay_style", mc_py_str(k_lr_styles[s->decay_style]));
    rc |= mc_py_dict_set_str(d, "lr_decay_steps", mc_py_int(s->decay_steps));
    rc |= mc_py_dict_set_str(d, "min_lr", mc_py_float(s->min_lr));
    rc |= mc_py_dict_set_str(d, "start_wd", mc_py_float(s->start_wd));
    rc |= mc_py_dict_set_str(d, "end_wd", mc_py_float(s->end_wd));
    rc |= mc_py_dict_set_str(d, "wd_incr_style", mc_py_str(k_wd_styles[s->wd_incr_style]));
    rc |= mc_py_dict_set_str(d, "wd_incr_steps", mc_py_int(s->wd_incr_steps));
    if (rc) {
        mc_py_decref(d);
        return NULL;
    }
    return d;
}

/* ---- scheduler ---- */

/* OptimizerParamScheduler._check_and_set for one number or style. */
static int check_number(const mc_args_t *a, double *have, const mc_pyobj_t *sd, const char *key,
                        const char *what, char *err, size_t n)
{
    double saved;
    if (mc_py_get_float(mc_py_dict_get_str(sd, key), &saved) != 0)
        return mc_errf(err, n, "opt_param_scheduler has no number '%s'", key);
    if (a->override_opt_param_scheduler) return 0;
    if (a->use_checkpoint_opt_param_scheduler) {
        *have = saved;
        return 0;
    }
    if (saved != *have)
        return mc_errf(err, n,
                       "the scheduler's %s is %.17g in the checkpoint but %.17g in this run "
                       "(give the same flags, or --override-opt-param-scheduler to keep this "
                       "run's, or --use-checkpoint-opt-param-scheduler to take the checkpoint's)",
                       what, saved, *have);
    return 0;
}

static int check_style(const mc_args_t *a, int *have, const char *const *names, int count,
                       const mc_pyobj_t *sd, const char *key, const char *what, char *err, size_t n)
{
    const char *saved = mc_py_get_str(mc_py_dict_get_str(sd, key));
    if (!saved) return mc_errf(err, n, "opt_param_scheduler has no string '%s'", key);
    int s = -1;
    for (int i = 0; i < count; i++)
        if (strcmp(names[i], saved) == 0) s = i;
    if (a->override_opt_param_scheduler) return 0;
    char shown[MC_SHOWN_MAX + 4];
    if (s < 0)
        return mc_errf(err, n, "the scheduler's %s '%s' is not supported", what,
                       mc_shown(saved, shown));
    if (a->use_checkpoint_opt_param_scheduler) {
        *have = s;
        return 0;
    }
    if (s != *have)
        return mc_errf(err, n,
                       "the scheduler's %s is %s in the checkpoint but %s in this run (give "
                       "the same flags, or --override-opt-param-scheduler or "
                       "--use-checkpoint-opt-param-scheduler)",
                       what, saved, names[*have]);
    return 0;
}

int mc_ckpt_scheduler_load(mc_lr_sched_t *s, const mc_args_t *a, const mc_pyobj_t *sd, char *err,
                           size_t n)
{
    if (!sd || sd->kind != MC_PY_DICT)
        return mc_errf(err, n, "'opt_param_scheduler' is not a dict");
    mc_lr_sched_t x = *s;
    double decay = (double)x.decay_steps, incr = (double)x.wd_incr_steps;
    if (check_number(a, &x.max_lr, sd, "max_lr", "learning rate", err, n) ||
        check_number(a, &x.min_lr, sd, "min_lr", "minimum learning rate", err, n) ||
        check_number(a, &x.warmup_steps, sd, "lr_warmup_steps", "warmup length (samples)", err,
                     n) ||
        check_number(a, &decay, sd, "lr_decay_steps", "decay length (samples)", err, n) ||
        check_style(a, &x.decay_style, k_lr_styles, 4, sd, "lr_decay_style", "decay style", err, n))
        return -1;
    /* older checkpoints have no weight-decay schedule (Megatron checks it only when present) */
    if (mc_py_dict_get_str(sd, "start_wd") &&
        (check_number(a, &x.start_wd, sd, "start_wd", "start weight decay", err, n) ||
         check_number(a, &x.end_wd, sd, "end_wd", "end weight decay", err, n) ||
         check_number(a, &incr, sd, "wd_incr_steps", "weight-decay length (samples)", err, n) ||
         check_style(a, &x.wd_incr_style, k_wd_styles, 3, sd, "wd_incr_style", "weight-decay style",
                     err, n)))
        return -1;
    int64_t steps;
    if (mc_py_get_int(mc_py_dict_get_str(sd, "num_steps"), &steps) != 0 || steps < 0)
        return mc_errf(err, n, "opt_param_scheduler has no valid num_steps");
    x.decay_steps = (int64_t)decay;
    x.wd_incr_steps = (int64_t)incr;
    x.num_steps = steps; /* load_state_dict's step(increment=num_steps) from 0 */
    *s = x;
    return 0;
}
