/* Saving and loading checkpoints across ranks: who writes which file when, the atomic publish,
 * and agreement on errors. What goes into the files is train/ckpt_state.h's and
 * train/ckpt_args.h's; the filesystem steps are train/ckpt_files.h's. */
#include "train/checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/torch_save.h"
#include "cli/error.h"
#include "train/ckpt_args.h"
#include "train/ckpt_files.h"
#include "train/ckpt_state.h"
#include "train/log.h"

#define MODEL_FILE "model_optim_rng.pt"
#define DISTOPT_FILE "distrib_optim.pt"
#define ERR_MAX 1024

static bool printer(const mc_trainer_t *t) { return t->par.rank == t->par.last_rank; }

/* Megatron's "[%Y-%m-%d %H:%M:%S.%f]" prefix. */
static void stamp(char *buf, size_t n)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    char date[32];
    strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S", localtime(&tv.tv_sec));
    snprintf(buf, n, "[%s.%06ld]", date, (long)tv.tv_usec);
}

/* Every rank passes its error (empty when fine). When any rank has one, the lowest such rank's
 * line is broadcast and the job ends with it, printed once (rank 0), exit 2, like a flag error:
 * no rank is left waiting in a collective. Also a barrier. */
static void agree(mc_trainer_t *t, const char *err)
{
    mc_comm_t *c = t->comm;
    int64_t worst = err[0] ? c->size - c->rank : 0; /* MAX picks the lowest failing rank */
    mc_all_reduce(c, c->world, &worst, 1, MC_DT_I64, MC_OP_MAX);
    if (worst == 0) return;
    char line[ERR_MAX];
    snprintf(line, sizeof(line), "%s", err);
    mc_broadcast(c, c->world, line, sizeof(line), MC_DT_U8, (int)(c->size - worst));
    line[sizeof(line) - 1] = '\0';
    fflush(stdout);
    mc_error_set_rank_local(false);
    mc_user_error("%s", line);
}

/* ---- save ---- */

void mc_ckpt_save(mc_trainer_t *t)
{
    const mc_args_t *a = t->args;
    const char *dir = a->save;
    char err[ERR_MAX] = "", when[64];
    if (printer(t)) {
        stamp(when, sizeof(when));
        printf("%s saving checkpoint at iteration %7" PRId64 " to %s in torch format\n", when,
               t->iteration, dir);
        fflush(stdout);
    }
    mc_ddp_finish_param_gather(&t->ddp); /* every rank's parameters complete */

    /* rank 0 prepares the directory and names the staging tree for everyone */
    int64_t token = 0;
    if (t->par.rank == 0 && mc_ckpt_mkdirs(dir, err, sizeof(err)) == 0) {
        mc_ckpt_remove_stale(dir); /* trees of saves that were killed */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        /* unique per save: a leftover of a killed save never collides with this one */
        uint64_t u = (uint64_t)getpid() << 24 ^ (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 32;
        token = (int64_t)(u & INT64_MAX);
    }
    agree(t, err);
    mc_broadcast(t->comm, t->comm->world, &token, 1, MC_DT_I64, 0);
    char tmp[32], staging[MC_CKPT_PATH_MAX], final[MC_CKPT_PATH_MAX], rank_dir[MC_CKPT_PATH_MAX + 32],
        path[MC_CKPT_PATH_MAX + 64], rank_name[32];
    snprintf(tmp, sizeof(tmp), "%" PRIx64, (uint64_t)token);
    mc_ckpt_iter_dir(staging, sizeof(staging), dir, t->iteration, false, tmp);
    mc_ckpt_iter_dir(final, sizeof(final), dir, t->iteration, false, NULL);
    mc_ckpt_rank_name(rank_name, sizeof(rank_name), t->par.me.tp, a->pipeline_model_parallel_size,
                      t->par.me.pp);
    snprintf(rank_dir, sizeof(rank_dir), "%s/%s", staging, rank_name);

    /* dp rank 0 of each (tp, pp) writes; the distributed optimizer's shards come from all */
    const bool writer = t->ddp.dp_rank == 0;
    if (writer && mc_ckpt_mkdirs(rank_dir, err, sizeof(err)) == 0) {
        mc_pyobj_t *sd = mc_ckpt_state_dict(t);
        snprintf(path, sizeof(path), "%s/%s", rank_dir, MODEL_FILE);
        mc_ckpt_write_file(path, sd, err, sizeof(err));
        mc_py_decref(sd);
    }
    if (t->ddp.dist_opt && !a->no_save_optim) {
        mc_ckpt_order_t o;
        if (mc_ckpt_order_spec(&t->model, mc_ckpt_names_of(a), &o) != 0) mc_fatal("out of host memory");
        mc_pyobj_t *d = mc_ckpt_distopt_gather(t, &o);
        mc_ckpt_order_free(&o);
        snprintf(path, sizeof(path), "%s/%s", rank_dir, DISTOPT_FILE);
        if (writer && !err[0]) mc_ckpt_write_file(path, d, err, sizeof(err));
        mc_py_decref(d);
    }
    if (writer && !err[0]) mc_ckpt_fsync(rank_dir, err, sizeof(err));
    agree(t, err); /* every file is complete */

    /* rank 0 publishes: the iteration's tree, then the tracker, each in one rename */
    if (t->par.rank == 0) {
        char text[32];
        snprintf(text, sizeof(text), "%" PRId64, t->iteration);
        if (mc_ckpt_fsync(staging, err, sizeof(err)) == 0 &&
            mc_ckpt_publish_dir(staging, final, err, sizeof(err)) == 0)
            mc_ckpt_write_tracker(dir, text, tmp, err, sizeof(err));
    }
    agree(t, err);
    if (printer(t)) {
        stamp(when, sizeof(when));
        printf("  %s successfully saved checkpoint from iteration %7" PRId64 " to %s [ t 1/%d, p 1/%d ]\n",
               when, t->iteration, dir, a->tensor_model_parallel_size, a->pipeline_model_parallel_size);
        fflush(stdout);
    }
}

/* ---- load ---- */

/* Why path cannot be read, with what the checkpoint holds instead. */
static void missing(const char *path, const char *iter_dir, const char *load, char *err, size_t n)
{
    char held[512];
    if (access(iter_dir, F_OK) != 0) {
        mc_ckpt_list(load, "iter_", held, sizeof(held));
        mc_path_errf(err, n, iter_dir, "missing; %s holds %s (fix latest_checkpointed_iteration.txt "
                     "or give --ckpt-step)", load, held[0] ? held : "no iter_* directory");
        return;
    }
    char meta[MC_CKPT_PATH_MAX + 32];
    snprintf(meta, sizeof(meta), "%s/metadata.json", iter_dir);
    if (access(meta, F_OK) == 0) {
        mc_path_errf(err, n, iter_dir, "is a distributed checkpoint (--ckpt-format torch_dist or "
                     "torch_dcp), which megatron-c does not read (save it in Megatron-LM with "
                     "--ckpt-format torch, e.g. by loading it with --ckpt-convert-format torch "
                     "--ckpt-convert-save DIR)");
        return;
    }
    mc_ckpt_list(iter_dir, "mp_rank_", held, sizeof(held));
    mc_path_errf(err, n, path, "missing shard file (the checkpoint holds %s: it was saved with another "
                 "tensor or pipeline-parallel layout, or a rank failed to write it)",
                 held[0] ? held : "no mp_rank_* directory");
}

bool mc_ckpt_load(mc_trainer_t *t)
{
    const mc_args_t *a = t->args;
    const char *dir = a->load;
    if (!dir[0]) return false;
    char err[ERR_MAX] = "";
    bool found, release;
    int64_t iteration;
    mc_ckpt_read_tracker(dir, &found, &iteration, &release, err, sizeof(err));
    agree(t, err);
    if (!found) {
        if (a->exit_on_missing_checkpoint) {
            snprintf(err, sizeof(err), "%.800s/%s: missing, and --exit-on-missing-checkpoint is set (no "
                     "checkpoint to load: check the --load path)", dir, MC_CKPT_TRACKER);
            agree(t, err);
        }
        if (printer(t)) {
            printf("WARNING: could not find the metadata file %s/%s\n"
                   "    will not load any checkpoints and will start from random\n", dir, MC_CKPT_TRACKER);
            fflush(stdout);
        }
        return false;
    }
    mc_all_reduce(t->comm, t->comm->world, &iteration, 1, MC_DT_I64, MC_OP_MAX); /* read_metadata */
    if (a->ckpt_step > 0) {
        iteration = a->ckpt_step;
        release = false;
    }
    if (printer(t)) {
        if (release) printf(" loading release checkpoint from %s\n", dir);
        else printf(" loading checkpoint from %s at iteration %" PRId64 "\n", dir, iteration);
        fflush(stdout);
    }
    char iter_dir[MC_CKPT_PATH_MAX], rank_name[32], path[MC_CKPT_PATH_MAX + 64];
    mc_ckpt_iter_dir(iter_dir, sizeof(iter_dir), dir, iteration, release, NULL);
    mc_ckpt_rank_name(rank_name, sizeof(rank_name), t->par.me.tp, a->pipeline_model_parallel_size,
                      t->par.me.pp);
    snprintf(path, sizeof(path), "%s/%s/%s", iter_dir, rank_name, MODEL_FILE);

    /* a release checkpoint is weights only, as --finetune */
    const mc_ckpt_apply_opts_t opts = {.release = release,
                                       .load_optim = !release && !a->finetune && !a->no_load_optim};
    mc_ckpt_applied_t got = {0};
    mc_pyobj_t *ck = NULL;
    if (access(path, F_OK) != 0) missing(path, iter_dir, dir, err, sizeof(err));
    else if (mc_torch_load(path, 0, &ck, err, sizeof(err)) == 0) {
        char inner[ERR_MAX];
        if (mc_ckpt_apply(t, ck, &opts, &got, inner, sizeof(inner)) != 0)
            mc_path_errf(err, sizeof(err), path, "%s", inner);
    }
    mc_py_decref(ck);
    agree(t, err);

    if (opts.load_optim && t->ddp.dist_opt) {
        snprintf(path, sizeof(path), "%s/%s/%s", iter_dir, rank_name, DISTOPT_FILE);
        mc_pyobj_t *d = NULL;
        if (access(path, F_OK) != 0)
            mc_path_errf(err, sizeof(err), path, "missing (the checkpoint was saved without the "
                         "distributed optimizer's state: add --no-load-optim)");
        else if (mc_torch_load(path, 0, &d, err, sizeof(err)) == 0) {
            char inner[ERR_MAX];
            if (mc_ckpt_distopt_load(t, d, &got.order, inner, sizeof(inner)) != 0)
                mc_path_errf(err, sizeof(err), path, "%s", inner);
        }
        mc_py_decref(d);
        agree(t, err);
    }
    mc_ckpt_order_free(&got.order);
    if (printer(t) && got.foreign_rng)
        printf("WARNING: the checkpoint's rng state is Megatron-LM's (Python, numpy, torch and CUDA "
               "generators), which megatron-c's dropout (Philox, keyed by --seed) cannot continue: "
               "not loaded, as with --no-load-rng\n");
    if (printer(t) && got.weights_16bit && !a->bf16 && !a->fp16)
        printf("WARNING: the checkpoint's model weights are 16-bit and this run trains in fp32%s\n",
               opts.load_optim ? " from its fp32 master parameters" : " (without --no-load-optim the "
               "fp32 master parameters would be loaded)");
    if (printer(t)) {
        printf(" checkpoint version 3.0\n"
               "  successfully loaded checkpoint from %s [ t 1/%d, p 1/%d ] at iteration %" PRId64 "\n",
               dir, a->tensor_model_parallel_size, a->pipeline_model_parallel_size, t->iteration);
        fflush(stdout);
    }
    return true;
}
