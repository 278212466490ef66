/* The optimizer and scheduler entries of model_optim_rng.pt (MEGATRON.md sections 7 and 9).
 *
 * For fp32 training Megatron wraps the inner Adam in FP32Optimizer, whose state_dict is the
 * inner optimizer's: torch's {state: {index: {...}}, param_groups: [{..., params: [index...]}]}.
 * The parameter groups are get_param_groups' for the standard overrides: weight-decayed
 * parameters first (wd_mult 1), then biases and 1-D parameters (wd_mult 0), each in
 * model.parameters() order over the model chunks; indices count through the groups in that order.
 * megatron-c writes each parameter's state as torch.optim.AdamW does ({step, exp_avg,
 * exp_avg_sq}) and also the group's `step` that Apex's and Transformer Engine's FusedAdam keep,
 * so either optimizer Megatron may use resumes from the file.
 *
 * With a 16-bit model (--bf16, --fp16) Megatron's Float16OptimizerWithFloat16Params saves
 * {optimizer: <that torch dict>, grad_scaler: <scaler state, when there is a scaler>,
 * fp32_from_fp16_params: [[fp32 master param per parameter of the group] per group]}; the
 * distributed optimizer saves {optimizer: {param_groups}, grad_scaler} and its parameter state in
 * distrib_optim.pt. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/error.h"
#include "train/ckpt_state.h"

static const char *const k_lr_styles[] = {[MC_LR_CONSTANT] = "constant", [MC_LR_LINEAR] = "linear",
                                          [MC_LR_COSINE] = "cosine",
                                          [MC_LR_INVERSE_SQRT] = "inverse-square-root"};
static const char *const k_wd_styles[] = {[MC_WD_CONSTANT] = "constant", [MC_WD_LINEAR] = "linear",
                                          [MC_WD_COSINE] = "cosine"};

/* ---- parameter groups ---- */

/* group 0: weight decay (wd_mult 1); group 1: none (wd_mult 0) */
static int group_of(const mc_param_t *p) { return p->no_wd ? 1 : 0; }

/* idx[i]: parameter i's index in the torch state (through group 0, then group 1); counts[g]. */
static void param_indices(const mc_gpt_t *m, int *idx, int counts[2])
{
    counts[0] = counts[1] = 0;
    for (int i = 0; i < m->n_params; i++) counts[group_of(&m->params[i])]++;
    int next[2] = {0, counts[0]};
    for (int i = 0; i < m->n_params; i++) idx[i] = next[group_of(&m->params[i])]++;
}

/* One of Megatron's param_groups as torch's state_dict packs it: Megatron's fields, the inner
 * optimizer's defaults with the scheduler's current lr and weight decay, then step and params. */
static mc_pyobj_t *param_group(const mc_trainer_t *t, int g, const int *idx, bool with_params)
{
    const mc_args_t *a = t->args;
    const double wd_mult = g == 0 ? 1.0 : 0.0;
    const int64_t n = t->sched.num_steps;
    mc_pyobj_t *d = mc_py_dict();
    int rc = d ? 0 : -1;
    rc |= mc_py_dict_set_str(d, "is_expert_parallel", mc_py_bool(false));
    rc |= mc_py_dict_set_str(d, "default_config", mc_py_bool(true));
    rc |= mc_py_dict_set_str(d, "wd_mult", mc_py_float(wd_mult));
    rc |= mc_py_dict_set_str(d, "lr_mult", mc_py_float(1.0));
    rc |= mc_py_dict_set_str(d, "is_decoupled_lr", mc_py_bool(false));
    rc |= mc_py_dict_set_str(d, "max_lr", mc_py_float(a->lr));
    rc |= mc_py_dict_set_str(d, "min_lr", mc_py_float(a->min_lr));
    rc |= mc_py_dict_set_str(d, "lr", mc_py_float(mc_lr_at(&t->sched, n)));
    rc |= mc_py_dict_set_str(d, "betas", mc_py_tuple(2, mc_py_float(a->adam_beta1), mc_py_float(a->adam_beta2)));
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
        for (int i = 0; i < t->model.n_params; i++)
            if (group_of(&t->model.params[i]) == g) rc |= mc_py_list_append(params, mc_py_int(idx[i]));
        rc |= mc_py_dict_set_str(d, "params", params);
    }
    if (rc) {
        mc_py_decref(d);
        return NULL;
    }
    return d;
}

static mc_pyobj_t *param_groups(const mc_trainer_t *t, const int *idx, bool with_params)
{
    mc_pyobj_t *list = mc_py_list();
    int rc = list ? 0 : -1;
    for (int g = 0; g < 2; g++) rc |= mc_py_list_append(list, param_group(t, g, idx, with_params));
    if (rc) {
        mc_py_decref(list);
        return NULL;
    }
    return list;
}

/* ---- save ---- */

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

mc_pyobj_t *mc_ckpt_optimizer_dict(const mc_trainer_t *t)
{
    const mc_gpt_t *m = &t->model;
    int *idx = malloc((size_t)(m->n_params ? m->n_params : 1) * sizeof(int)), counts[2];
    mc_pyobj_t *out = mc_py_dict();
    if (!idx || !out) {
        free(idx);
        mc_py_decref(out);
        return NULL;
    }
    param_indices(m, idx, counts);
    int rc = 0;
    if (t->ddp.dist_opt) {
        /* DistributedOptimizer.state_dict: the inner state_dict without state, groups without
         * params; the parameter state goes to distrib_optim.pt */
        mc_pyobj_t *inner = mc_py_dict();
        rc |= mc_py_dict_set_str(inner, "param_groups", param_groups(t, idx, false));
        rc |= mc_py_dict_set_str(out, "optimizer", inner);
        if (t->scaler.enabled) rc |= mc_py_dict_set_str(out, "grad_scaler", scaler_dict(&t->scaler));
        free(idx);
        if (rc) {
            mc_py_decref(out);
            return NULL;
        }
        return out;
    }
    /* torch's state: parameters in index order, each whole (one segment per parameter, whose
     * optimizer state is laid out like the parameter buffer) */
    mc_pyobj_t *state = mc_py_dict(), *masters = mc_py_list();
    rc |= state && masters ? 0 : -1;
    float step = (float)t->opt.step;
    for (int g = 0; g < 2; g++) {
        mc_pyobj_t *group_masters = mc_py_list();
        for (int i = 0; i < m->n_params; i++) {
            const mc_param_t *p = &m->params[i];
            if (group_of(p) != g) continue;
            mc_pyobj_t *st = mc_py_dict();
            rc |= mc_py_dict_set_str(st, "step", mc_py_tensor_copy(MC_TORCH_FLOAT32, 0, NULL, &step));
            rc |= mc_py_dict_set_str(st, "exp_avg", mc_ckpt_host_tensor(m->be, t->opt.exp_avg + p->offset,
                                                                        MC_DT_F32, p->ndim, p->local));
            rc |= mc_py_dict_set_str(st, "exp_avg_sq", mc_ckpt_host_tensor(m->be, t->opt.exp_avg_sq + p->offset,
                                                                           MC_DT_F32, p->ndim, p->local));
            rc |= mc_py_dict_set_int(state, idx[i], st);
            if (t->opt.master)
                rc |= mc_py_list_append(group_masters, mc_ckpt_host_tensor(m->be, t->opt.master + p->offset,
                                                                           MC_DT_F32, p->ndim, p->local));
        }
        rc |= mc_py_list_append(masters, group_masters);
    }
    mc_pyobj_t *torch_dict = mc_py_dict();
    rc |= mc_py_dict_set_str(torch_dict, "state", state);
    rc |= mc_py_dict_set_str(torch_dict, "param_groups", param_groups(t, idx, true));
    free(idx);
    if (!t->opt.master) { /* FP32Optimizer: the inner optimizer's dict itself */
        mc_py_decref(out);
        mc_py_decref(masters);
        if (rc) {
            mc_py_decref(torch_dict);
            return NULL;
        }
        return torch_dict;
    }
    rc |= mc_py_dict_set_str(out, "optimizer", torch_dict);
    if (t->scaler.enabled) rc |= mc_py_dict_set_str(out, "grad_scaler", scaler_dict(&t->scaler));
    rc |= mc_py_dict_set_str(out, "fp32_from_fp16_params", masters);
    if (rc) {
        mc_py_decref(out);
        return NULL;
    }
    return out;
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

/* ---- load ---- */

/* The saved group with this wd_mult (Megatron matches groups by their overrides, not position). */
static const mc_pyobj_t *find_group(const mc_pyobj_t *groups, double wd_mult)
{
    for (size_t k = 0; k < mc_py_len(groups); k++) {
        double w;
        const mc_pyobj_t *g = mc_py_item(groups, k);
        if (g && g->kind == MC_PY_DICT && mc_py_get_float(mc_py_dict_get_str(g, "wd_mult"), &w) == 0 &&
            w == wd_mult)
            return g;
    }
    return NULL;
}

/* Adam's step count: the groups' `step` (Apex/TE FusedAdam, DistributedOptimizer), else the
 * per-parameter `step` tensor of torch's Adam. -1 when absent. */
static int64_t saved_step(const mc_pyobj_t *groups, const mc_pyobj_t *state)
{
    for (size_t k = 0; k < mc_py_len(groups); k++) {
        double v;
        if (mc_py_get_float(mc_py_dict_get_str(mc_py_item(groups, k), "step"), &v) == 0) return (int64_t)v;
    }
    for (size_t k = 0; state && k < state->dict.len; k++) {
        const mc_pyobj_t *s = mc_py_dict_get_str(state->dict.vals[k], "step");
        double v;
        if (mc_py_get_float(s, &v) == 0) return (int64_t)v;
        if (s && s->kind == MC_PY_TENSOR && mc_py_tensor_numel(s) == 1 && s->tensor.dtype == MC_TORCH_FLOAT32)
            return (int64_t)*(const float *)mc_py_tensor_data(s);
    }
    return -1;
}

static int load_groups(mc_trainer_t *t, const mc_pyobj_t *groups, const mc_pyobj_t *state, char *err, size_t n)
{
    if (!groups || groups->kind != MC_PY_LIST) return mc_errf(err, n, "the optimizer has no param_groups list");
    for (int g = 0; g < 2; g++)
        if (!find_group(groups, g == 0 ? 1.0 : 0.0))
            return mc_errf(err, n, "the optimizer has no parameter group with wd_mult %s (saved "
                           "with other parameter groups; add --no-load-optim)", g == 0 ? "1.0" : "0.0");
    int64_t step = saved_step(groups, state);
    if (step < 0) return mc_errf(err, n, "the optimizer state has no step count (add --no-load-optim)");
    t->opt.step = (int)step;
    return 0;
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
        if (printer)
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
        return mc_errf(err, n, "the grad scaler state has no growth_tracker/hysteresis_tracker (add "
                       "--no-load-optim)");
    t->scaler.scale = v;
    t->scaler.growth_tracker = (int)growth;
    t->scaler.hysteresis_tracker = (int)hyst;
    return 0;
}

int mc_ckpt_optimizer_load(mc_trainer_t *t, const mc_pyobj_t *opt, char *err, size_t n)
{
    if (!opt || opt->kind != MC_PY_DICT) return mc_errf(err, n, "'optimizer' is not a dict");
    /* FP32Optimizer saves the torch dict itself; Float16Optimizer and DistributedOptimizer wrap
     * it as 'optimizer' (the distributed one without 'state') */
    const mc_pyobj_t *inner = mc_py_dict_get_str(opt, "optimizer");
    const mc_pyobj_t *torch_dict = inner ? inner : opt;
    const bool saved_dist = mc_py_dict_get_str(torch_dict, "state") == NULL;
    if (saved_dist != t->ddp.dist_opt)
        return mc_errf(err, n, "the optimizer was saved %s --use-distributed-optimizer but this run "
                       "%s it (use the same setting, or add --no-load-optim)",
                       saved_dist ? "with" : "without", t->ddp.dist_opt ? "uses" : "does not use");
    if (load_scaler(t, inner ? mc_py_dict_get_str(opt, "grad_scaler") : NULL, err, n) != 0) return -1;
    if (saved_dist) return load_groups(t, mc_py_dict_get_str(torch_dict, "param_groups"), NULL, err, n);

    const mc_gpt_t *m = &t->model;
    const mc_pyobj_t *groups = mc_py_dict_get_str(torch_dict, "param_groups"),
                     *state = mc_py_dict_get_str(torch_dict, "state");
    /* fp32 master params: a 16-bit run needs them; an fp32 run takes them as its weights (the
     * model entry of a 16-bit checkpoint holds them rounded) */
    const mc_pyobj_t *masters = inner ? mc_py_dict_get_str(opt, "fp32_from_fp16_params") : NULL;
    if (t->opt.master && !masters)
        return mc_errf(err, n, "the optimizer state has no fp32_from_fp16_params (saved by a run "
                       "without --bf16/--fp16): add --no-load-optim to start this run's optimizer "
                       "from the loaded weights");
    if (!state || state->kind != MC_PY_DICT) return mc_errf(err, n, "the optimizer has no state dict");
    if (load_groups(t, groups, state, err, n) != 0) return -1;
    int *idx = malloc((size_t)(m->n_params ? m->n_params : 1) * sizeof(int)), counts[2];
    if (!idx) return mc_errf(err, n, "out of host memory");
    param_indices(m, idx, counts);
    int rc = 0;
    for (int g = 0; g < 2 && !rc; g++) {
        const double wd_mult = g == 0 ? 1.0 : 0.0;
        const mc_pyobj_t *params = mc_py_dict_get_str(find_group(groups, wd_mult), "params");
        if (mc_py_len(params) != (size_t)counts[g])
            rc = mc_errf(err, n, "the optimizer's group with wd_mult %d.0 has %zu parameters but this "
                         "run's has %d (saved with another model or pipeline layout)",
                         1 - g, mc_py_len(params), counts[g]);
        /* fp32_from_fp16_params follows the groups' order in the inner optimizer */
        size_t gpos = 0;
        for (size_t k = 0; k < mc_py_len(groups); k++)
            if (mc_py_item(groups, k) == find_group(groups, wd_mult)) gpos = k;
        const mc_pyobj_t *group_masters = masters ? mc_py_item(masters, gpos) : NULL;
        if (!rc && masters && mc_py_len(group_masters) != (size_t)counts[g])
            rc = mc_errf(err, n, "fp32_from_fp16_params has %zu tensors for the group with wd_mult "
                         "%d.0 but this run has %d parameters there", mc_py_len(group_masters), 1 - g,
                         counts[g]);
        /* the i-th parameter of a group is the i-th of this run's in that group */
        for (int i = 0, k = 0; i < m->n_params && !rc; i++) {
            const mc_param_t *p = &m->params[i];
            if (group_of(p) != g) continue;
            int64_t saved;
            const mc_pyobj_t *s = NULL, *master = mc_py_item(group_masters, (size_t)k);
            if (mc_py_get_int(mc_py_item(params, (size_t)k++), &saved) == 0) s = mc_py_dict_get_int(state, saved);
            char what[160];
            snprintf(what, sizeof(what), "the optimizer state of %s", p->name);
            if (!s) {
                rc = mc_errf(err, n, "%s is missing", what);
                break;
            }
            snprintf(what, sizeof(what), "exp_avg of %s", p->name);
            rc = mc_ckpt_tensor_into(m->be, t->opt.exp_avg + p->offset, MC_DT_F32,
                                     mc_py_dict_get_str(s, "exp_avg"), p->ndim, p->local, what, err, n);
            snprintf(what, sizeof(what), "exp_avg_sq of %s", p->name);
            if (!rc)
                rc = mc_ckpt_tensor_into(m->be, t->opt.exp_avg_sq + p->offset, MC_DT_F32,
                                         mc_py_dict_get_str(s, "exp_avg_sq"), p->ndim, p->local, what, err, n);
            snprintf(what, sizeof(what), "the fp32 master copy of %s", p->name);
            if (!rc && masters)
                rc = mc_ckpt_tensor_into(m->be, mc_opt_param(&t->opt, &t->opt.segs[i]), MC_DT_F32,
                                         master, p->ndim, p->local, what, err, n);
        }
    }
    free(idx);
    return rc;
}

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
        return mc_errf(err, n, "the scheduler's %s is %.17g in the checkpoint but %.17g in this run "
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
    if (s < 0) return mc_errf(err, n, "the scheduler's %s '%s' is not supported", what, mc_shown(saved, shown));
    if (a->use_checkpoint_opt_param_scheduler) {
        *have = s;
        return 0;
    }
    if (s != *have)
        return mc_errf(err, n, "the scheduler's %s is %s in the checkpoint but %s in this run (give "
                       "the same flags, or --override-opt-param-scheduler or "
                       "--use-checkpoint-opt-param-scheduler)", what, saved, names[*have]);
    return 0;
}

int mc_ckpt_scheduler_load(mc_lr_sched_t *s, const mc_args_t *a, const mc_pyobj_t *sd, char *err, size_t n)
{
    if (!sd || sd->kind != MC_PY_DICT) return mc_errf(err, n, "'opt_param_scheduler' is not a dict");
    mc_lr_sched_t x = *s;
    double decay = (double)x.decay_steps, incr = (double)x.wd_incr_steps;
    if (check_number(a, &x.max_lr, sd, "max_lr", "learning rate", err, n) ||
        check_number(a, &x.min_lr, sd, "min_lr", "minimum learning rate", err, n) ||
        check_number(a, &x.warmup_steps, sd, "lr_warmup_steps", "warmup length (samples)", err, n) ||
        check_number(a, &decay, sd, "lr_decay_steps", "decay length (samples)", err, n) ||
        check_style(a, &x.decay_style, k_lr_styles, 4, sd, "lr_decay_style", "decay style", err, n))
        return -1;
    /* older checkpoints have no weight-decay schedule (Megatron checks it only when present) */
    if (mc_py_dict_get_str(sd, "start_wd") &&
        (check_number(a, &x.start_wd, sd, "start_wd", "start weight decay", err, n) ||
         check_number(a, &x.end_wd, sd, "end_wd", "end weight decay", err, n) ||
         check_number(a, &incr, sd, "wd_incr_steps", "weight-decay length (samples)", err, n) ||
         check_style(a, &x.wd_incr_style, k_wd_styles, 3, sd, "wd_incr_style", "weight-decay style", err, n)))
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
