/* One rank's model_optim_rng.pt <-> the trainer (Megatron's generate_state_dict and the part of
 * load_checkpoint that applies a loaded file), for files megatron-c or Megatron-LM wrote. */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "ckpt/args.h"
#include "ckpt/state.h"

/* megatron-c's only random state is the dropout seed (DESIGN decision 6). */
mc_pyobj_t *mc_ckpt_rng_state(const mc_trainer_t *t)
{
    mc_pyobj_t *list = mc_py_list(), *d = mc_py_dict();
    if (!list || !d) {
        mc_py_decref(list);
        mc_py_decref(d);
        return NULL;
    }
    int rc = mc_py_dict_set_str(d, "generator", mc_py_str("philox4x32-10"));
    rc |= mc_py_dict_set_str(d, "seed", mc_py_int((int64_t)t->model.cfg.seed));
    rc |= mc_py_list_append(list, d);
    if (rc) {
        mc_py_decref(list);
        return NULL;
    }
    return list;
}

mc_pyobj_t *mc_ckpt_state_dict(const mc_trainer_t *t)
{
    const mc_args_t *a = t->args;
    mc_ckpt_order_t o;
    if (mc_ckpt_order_spec(&t->model, mc_ckpt_names_of(a), &o) != 0) return NULL;
    mc_pyobj_t *sd = mc_py_dict();
    int rc = sd ? 0 : -1;
    rc |= mc_py_dict_set_str(
        sd, "args",
        mc_ckpt_args_namespace(a, t->consumed_train_samples, t->consumed_valid_samples));
    rc |= mc_py_dict_set_str(sd, "checkpoint_version", mc_py_float(3.0));
    rc |= mc_py_dict_set_str(sd, "iteration", mc_py_int(t->iteration));
    for (int c = 0; c < t->model.cfg.n_chunks; c++) {
        char key[32];
        mc_ckpt_model_key(&t->model, c, key, sizeof(key));
        rc |= mc_py_dict_set_str(sd, key,
                                 mc_ckpt_model_dict(&t->model, &o, c, mc_ckpt_model_dtype(a)));
    }
    if (!a->no_save_optim) {
        mc_pyobj_t *opt = mc_ckpt_optimizer_dict(t, &o);
        if (t->par.layout.ep > 1) { /* ChainedOptimizer.state_dict(): [dense, experts] */
            mc_pyobj_t *chained = mc_py_list();
            rc |= mc_py_list_append(chained, opt);
            rc |= mc_py_list_append(chained, mc_ckpt_optimizer_common_experts(t, &o));
            opt = chained;
        }
        rc |= mc_py_dict_set_str(sd, "optimizer", opt);
        rc |= mc_py_dict_set_str(sd, "opt_param_scheduler", mc_ckpt_scheduler_dict(&t->sched, a));
    }
    if (!a->no_save_rng) rc |= mc_py_dict_set_str(sd, "rng_state", mc_ckpt_rng_state(t));
    rc |= mc_py_dict_set_str(sd, "num_floating_point_operations_so_far",
                             mc_py_float(mc_trainer_flops_so_far(t)));
    mc_ckpt_order_free(&o);
    if (rc) {
        mc_py_decref(sd);
        return NULL;
    }
    return sd;
}

/* The dropout seed from rng_state, unless it is Megatron-LM's generator states (Python, numpy,
 * torch, CUDA and the tracker's), which megatron-c's Philox dropout cannot continue: those are
 * ignored, as with --no-load-rng, and reported. */
static int load_rng(mc_trainer_t *t, const mc_pyobj_t *ck, mc_ckpt_applied_t *out, char *err,
                    size_t n)
{
    const mc_pyobj_t *rng = mc_py_item(mc_py_dict_get_str(ck, "rng_state"), 0);
    if (!rng)
        return mc_errf(err, n,
                       "no rng state (saved with --no-save-rng?): add --no-load-rng or --finetune");
    int64_t seed;
    if (mc_py_get_int(mc_py_dict_get_str(rng, "seed"), &seed) == 0) {
        t->model.cfg.seed = (uint64_t)seed; /* the dropout stream continues as saved */
        return 0;
    }
    if (mc_py_dict_get_str(rng, "random_rng_state") || mc_py_dict_get_str(rng, "cuda_rng_state")) {
        out->foreign_rng = true;
        return 0;
    }
    return mc_errf(err, n,
                   "the rng state is neither megatron-c's nor Megatron-LM's: add --no-load-rng");
}

void mc_ckpt_warn_foreign_rng(void)
{
    printf("WARNING: the checkpoint's rng state is Megatron-LM's (Python, numpy, torch and CUDA "
           "generators), which megatron-c's dropout (Philox, keyed by --seed) cannot continue: "
           "not loaded, as with --no-load-rng\n");
}

/* Whether the chunks' weights are 16-bit (a --bf16/--fp16 run's). */
static bool weights_16bit(const mc_pyobj_t *ck)
{
    const mc_pyobj_t *m = mc_py_dict_get_str(ck, "model");
    if (!m) m = mc_py_dict_get_str(ck, "model0");
    for (size_t k = 0; m && m->kind == MC_PY_DICT && k < m->dict.len; k++) {
        const mc_pyobj_t *v = m->dict.vals[k];
        if (v->kind == MC_PY_TENSOR)
            return v->tensor.dtype == MC_TORCH_BFLOAT16 || v->tensor.dtype == MC_TORCH_FLOAT16;
    }
    return false;
}

int mc_ckpt_apply(mc_trainer_t *t, const mc_pyobj_t *ck, const mc_ckpt_apply_opts_t *opts,
                  mc_ckpt_applied_t *out, char *err, size_t n)
{
    const mc_args_t *a = t->args;
    memset(out, 0, sizeof(*out));
    if (!ck || ck->kind != MC_PY_DICT)
        return mc_errf(err, n, "not a checkpoint (the file holds a %s, not a dict)",
                       ck ? mc_py_kind_name(ck->kind) : "nothing");
    double version = 0;
    mc_py_get_float(mc_py_dict_get_str(ck, "checkpoint_version"), &version);
    if (version < 3.0)
        return mc_errf(err, n,
                       "checkpoint_version %g: only version 3.0 checkpoints (Megatron-Core's "
                       "layout) are supported",
                       version);
    const mc_pyobj_t *ns = mc_py_dict_get_str(ck, "args");
    if (ns && !a->finetune && mc_ckpt_args_check(ns, a, opts->dist, err, n) != 0) return -1;

    if (mc_ckpt_order_file(&t->model, ck, &out->order, err, n) != 0) return -1;
    for (int c = 0; c < t->model.cfg.n_chunks; c++) {
        char key[32], inner[1024];
        mc_ckpt_model_key(&t->model, c, key, sizeof(key));
        if (mc_ckpt_model_load(&t->model, c, mc_py_dict_get_str(ck, key), inner, sizeof(inner)) !=
            0)
            return mc_errf(err, n, "%s: %s", key, inner);
    }
    /* a 16-bit model's fp32 masters start as its loaded weights (Megatron's reload_model_params);
     * the optimizer state, when loaded, replaces them with the saved masters */
    mc_opt_master_from_model(&t->opt);
    out->weights_16bit = weights_16bit(ck);

    int64_t iteration = 0;
    if (!a->finetune && !opts->release) {
        if (mc_py_get_int(mc_py_dict_get_str(ck, "iteration"), &iteration) != 0 || iteration < 0)
            return mc_errf(err, n, "no valid 'iteration' entry");
    }
    if (opts->load_optim) {
        const mc_pyobj_t *opt = mc_py_dict_get_str(ck, "optimizer");
        const mc_pyobj_t *sched = mc_py_dict_get_str(ck, "opt_param_scheduler");
        if (!opt || !sched)
            return mc_errf(err, n,
                           "no optimizer state (saved with --no-save-optim?): add "
                           "--no-load-optim or --finetune");
        if (mc_ckpt_optimizer_load(t, opt, &out->order, err, n) != 0) return -1;
        if (mc_ckpt_scheduler_load(&t->sched, a, sched, err, n) != 0) return -1;
    }
    if (!opts->release && !a->finetune && !a->no_load_rng && load_rng(t, ck, out, err, n) != 0)
        return -1;
    t->iteration = iteration;
    t->consumed_train_samples = t->consumed_valid_samples = 0;
    if (ns && !a->finetune &&
        !opts->release) { /* a release checkpoint starts over, as --finetune */
        mc_ckpt_args_int(ns, "consumed_train_samples", &t->consumed_train_samples);
        mc_ckpt_args_int(ns, "consumed_valid_samples", &t->consumed_valid_samples);
    }
    return 0;
}
