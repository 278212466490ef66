/* convert-checkpoint's torch_dist side (ckpt/convert_int.h): a torch_dist source is loaded
 * straight into each target rank's host state (mc_torchdist_load reads any layout), and a
 * torch_dist target is written rank by rank in this process, its index from the records
 * collected here rather than gathered over a communicator. */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "ckpt/args.h"
#include "ckpt/convert_int.h"
#include "ckpt/torchdist.h"
#include "ckpt/files.h"
#include "torchfmt/torch_save.h"

/* The file layer's errors name their file; the source's .metadata is read here once so that a
 * damaged one stops the conversion before anything is written. */
static void check_index(const mc_cv_source_t *s)
{
    char path[MC_CKPT_PATH_MAX + 32], err[MC_CV_ERR_MAX];
    mc_dcp_meta_t m = {0};
    snprintf(path, sizeof(path), "%s/.metadata", s->iter_dir);
    if (mc_dcp_meta_read(path, &m, err, sizeof(err)) != 0) mc_user_error("%s", err);
    mc_dcp_meta_free(&m);
}

mc_pyobj_t *mc_cv_open_dist(mc_cv_source_t *s, const mc_pyobj_t **ns)
{
    char path[MC_CKPT_PATH_MAX + 32], err[MC_CV_ERR_MAX];
    snprintf(path, sizeof(path), "%s/common.pt", s->iter_dir);
    mc_pyobj_t *common = NULL;
    if (mc_torch_load(path, 0, &common, err, sizeof(err)) != 0) mc_user_error("%s", err);
    if (common->kind != MC_PY_DICT)
        mc_user_error("%s: holds a %s, not a dict", path, mc_py_kind_name(common->kind));
    *ns = mc_py_dict_get_str(common, "args");
    if (!*ns) mc_user_error("%s: no 'args' entry (the layout it was saved with is unknown)", path);
    if (mc_ckpt_args_from_namespace(*ns, &s->args, err, sizeof(err)) != 0)
        mc_user_error("%s: %s", path, err);
    if (mc_ckpt_args_supported(*ns, err, sizeof(err)) != 0) mc_user_error("%s: %s", path, err);
    check_index(s);
    s->torch_dist = true;
    s->names = mc_ckpt_names_of(&s->args);
    s->has_optim = mc_py_dict_get_str(common, "optimizer") &&
                   mc_py_dict_get_str(common, "opt_param_scheduler");
    s->dist = s->has_optim && s->args.use_distributed_optimizer;
    /* load everything the checkpoint holds as it is */
    s->args.use_checkpoint_opt_param_scheduler = true;
    s->args.override_opt_param_scheduler = false;
    s->args.finetune = false;
    s->args.no_load_rng = false;
    s->args.no_load_optim = !s->has_optim;
    return common;
}

void mc_cv_load_dist_rank(const mc_cv_source_t *s, const mc_args_t *t_args, const mc_backend_t *be,
                          int tp, int pp, mc_trainer_t *t)
{
    char err[MC_CV_ERR_MAX];
    if (mc_trainer_init_state(t, t_args, be, tp, pp, err, sizeof(err)) != 0)
        mc_user_error("%s", err);
    /* loads print as the last rank: the first target rank speaks, once */
    t->par.rank = pp * t_args->tensor_model_parallel_size + tp;
    t->par.last_rank = 0;
    mc_torchdist_usage_t used; /* --dist-ckpt-strictness is for training runs, not the converter */
    if (mc_torchdist_load(t, s->iter_dir, s->release, &used, err, sizeof(err)) != 0)
        mc_user_error("%s", err);
    if (used.foreign_rng && t->par.rank == 0) mc_ckpt_warn_foreign_rng(); /* once */
    mc_torchdist_usage_free(&used);
}

void mc_cv_write_dist_rank(const mc_cv_target_t *tg, mc_trainer_t *t, int tp, int pp,
                           const char *staging, mc_dcp_records_t *recs)
{
    char err[MC_CV_ERR_MAX] = "";
    /* the rank's global index names its __R_*.distcp file; rank 0 writes common.pt */
    t->par.rank = pp * tg->args->tensor_model_parallel_size + tp;
    t->par.last_rank = -1;
    mc_torchdist_job_t *j = mc_torchdist_prepare(t, staging);
    mc_pyobj_t *common = mc_torchdist_job_common(j);
    if (common && mc_cv_carry(tg, common) != 0)
        mc_fatal("out of host memory building the converted checkpoint");
    mc_torchdist_write(j, err, sizeof(err));
    if (err[0]) mc_user_error("%s", err);
    mc_torchdist_collect(j, recs);
}

void mc_cv_finish_dist(const char *staging, const char *final, const mc_dcp_records_t *recs)
{
    char err[MC_CV_ERR_MAX] = "";
    mc_torchdist_write_index(staging, final, recs, err, sizeof(err));
    if (err[0]) mc_user_error("%s", err);
}
