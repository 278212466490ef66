/* What ckpt/convert.c and ckpt/convert_torchdist.c (the torch_dist source and target of
 * convert-checkpoint) share. Internal to ckpt/. */
#ifndef MC_CKPT_CONVERT_INT_H
#define MC_CKPT_CONVERT_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "ckpt/convert.h"
#include "ckpt/files.h"
#include "ckpt/state.h"
#include "torchfmt/dcp.h"
#include "trainer/trainer.h"

#define MC_CV_ERR_MAX 1024

/* The checkpoint converted. */
typedef struct {
    mc_args_t args;
    bool release, has_optim, dist; /* dist: the distributed optimizer's file */
    bool torch_dist;               /* a torch_dist checkpoint (ckpt/torchdist.h) */
    char iter_dir[MC_CKPT_PATH_MAX];
    mc_ckpt_names_t names;
    mc_lr_sched_t sched;
    int64_t iteration, consumed_train, consumed_valid;
    int step;
    uint64_t seed;
    bool foreign_rng;
} mc_cv_source_t;

/* What every target rank's files carry. */
typedef struct {
    const mc_args_t *args;
    const mc_pyobj_t *ck0; /* the source's first file (torch_dist: common.pt): templates */
    mc_pyobj_t *ns;        /* the target's Namespace */
    const mc_lr_sched_t *sched;
    int64_t iteration, consumed_train, consumed_valid;
    int step;
    uint64_t seed;
    bool torch_dist; /* the target's format */
} mc_cv_target_t;

/* ---- ckpt/convert_carry.c ---- */

/* The source's Namespace ns with the target's layout t and format. NULL when out of memory. */
mc_pyobj_t *mc_cv_target_namespace(const mc_pyobj_t *ns, const mc_args_t *t, bool torch_dist);
/* A target state dict's entries from the source: the Namespace, the optimizer groups' fields
 * and grad scaler, the floating-point operations so far. Returns nonzero when out of memory. */
int mc_cv_carry(const mc_cv_target_t *tg, mc_pyobj_t *sd);

/* ---- ckpt/convert_torchdist.c ---- */

/* The torch_dist source in s->iter_dir: its common.pt (returned), whose args fill s->args
 * (*ns: that Namespace). */
mc_pyobj_t *mc_cv_open_dist(mc_cv_source_t *s, const mc_pyobj_t **ns);
/* Target rank (tp, pp)'s host state at t_args, loaded from the torch_dist source. */
void mc_cv_load_dist_rank(const mc_cv_source_t *s, const mc_args_t *t_args, const mc_backend_t *be,
                          int tp, int pp, mc_trainer_t *t);
/* Target rank (tp, pp)'s torch_dist files into staging; their records appended to recs. */
void mc_cv_write_dist_rank(const mc_cv_target_t *tg, mc_trainer_t *t, int tp, int pp,
                           const char *staging, mc_dcp_records_t *recs);
/* The index of every rank's records (.metadata, then metadata.json) into staging. */
void mc_cv_finish_dist(const char *staging, const char *final, const mc_dcp_records_t *recs);

/* ---- ckpt/convert.c: whole models (export-hf, import-hf) ---- */

/* load_dir's checkpoint (the tracker's iteration, or ckpt_step; any layout, legacy or
 * torch_dist) as one tp 1 pp 1 rank's host state t: every parameter whole, fp32 weights (the
 * master values); *args its arguments at that layout, the source's padded vocabulary kept.
 * Errors are one line (exit 2). Free with mc_trainer_free (args' lists stay allocated). */
void mc_cv_load_whole(const char *load_dir, int64_t ckpt_step, mc_args_t *args, mc_trainer_t *t);
/* The weights of t (a tp 1 pp 1 rank's host state, no optimizer) saved as a `release`
 * checkpoint of target's layout (legacy, or torch_dist) in save_dir, with the args Namespace
 * ns, as convert-checkpoint writes one: vocabulary rows the target pads beyond t's are copies of
 * the last row (Megatron's converter). */
void mc_cv_save_whole(const char *save_dir, const mc_args_t *target, mc_trainer_t *t,
                      mc_pyobj_t *ns, bool torch_dist);

#endif
