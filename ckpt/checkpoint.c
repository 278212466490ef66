/* Saving and loading checkpoints across ranks: who writes which file when, the atomic publish,
 * and agreement on errors. What goes into the files is ckpt/state.h's and
 * ckpt/args.h's; the filesystem steps are ckpt/files.h's. */
#include "base/fs.h"
#include "ckpt/checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "torchfmt/torch_save.h"
#include "base/error.h"
#include "ckpt/args.h"
#include "ckpt/async.h"
#include "ckpt/torchdist.h"
#include "ckpt/files.h"
#include "ckpt/state.h"
#include "config/env.h"

#define MODEL_FILE "model_optim_rng.pt"
#define DISTOPT_FILE "distrib_optim.pt"
#define ERR_MAX 1024

static bool printer(const mc_trainer_t *t) { return t->par.rank == t->par.last_rank; }

static bool is_dist(const mc_args_t *a) { return strcmp(a->ckpt_format, "torch_dist") == 0; }

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

/* One save of this rank: the files it writes (dp rank 0 of each tp, pp writes; the others none)
 * and the tree they go into. Built on the training thread; written there, or on the writer
 * thread with --async-save, which then owns it until it is handed back for publishing. */
typedef struct {
    int64_t iteration;
    char tmp[32], staging[MC_CKPT_PATH_MAX], final[MC_CKPT_PATH_MAX];
    char rank_dir[MC_CKPT_PATH_MAX + 32];
    int n;
    struct {
        char path[MC_CKPT_PATH_MAX + 64];
        mc_pyobj_t *obj;
    } file[2];
    mc_torchdist_job_t *dist; /* --ckpt-format torch_dist: this rank's items (ckpt/torchdist.h) */
    long delay_ms; /* MC_TEST_CKPT_WRITE_DELAY_MS: tests hold the writer after writing the files
                    * (not yet durable nor published), to watch training go on or kill it */
    char err[ERR_MAX];
} save_job_t;

static void add_file(save_job_t *j, const char *name, mc_pyobj_t *obj)
{
    snprintf(j->file[j->n].path, sizeof(j->file[j->n].path), "%s/%s", j->rank_dir, name);
    j->file[j->n].obj = obj;
    j->n++;
}

/* distrib_optim.pt (collective: gathers over dp and edp), NULL on the ranks that write none. At
 * ep > 1 Megatron's ChainedOptimizer.save_parameter_state: the list [dense, experts], each the
 * dp_zero dict on its group's rank 0 and None elsewhere, written by a rank holding either. */
static mc_pyobj_t *distopt_file(mc_trainer_t *t)
{
    mc_ckpt_order_t o;
    if (mc_ckpt_order_spec(&t->model, mc_ckpt_names_of(t->args), &o) != 0)
        mc_fatal("out of host memory");
    mc_pyobj_t *out;
    if (t->par.layout.ep <= 1) {
        out = mc_ckpt_distopt_gather(t, &o); /* NULL on dp ranks > 0 */
    } else {
        mc_pyobj_t *dense = mc_ckpt_distopt_gather_of(t, &o, MC_CKPT_DENSE);
        mc_pyobj_t *experts = mc_ckpt_distopt_gather_of(t, &o, MC_CKPT_EXPERTS);
        out = dense || experts ? mc_py_list() : NULL;
        if (out && (mc_py_list_append(out, dense ? dense : mc_py_none()) ||
                    mc_py_list_append(out, experts ? experts : mc_py_none())))
            mc_fatal("out of host memory");
    }
    mc_ckpt_order_free(&o);
    return out;
}


/* Rank 0 prepares the directory and names the staging tree; every rank builds what it writes
 * (the distributed optimizer's gather is collective). */
static save_job_t *prepare(mc_trainer_t *t)
{
    const mc_args_t *a = t->args;
    const char *dir = a->save;
    char err[ERR_MAX] = "";
    save_job_t *j = calloc(1, sizeof(*j));
    if (!j) snprintf(err, sizeof(err), "out of host memory preparing a checkpoint");
    int64_t token = 0;
    if (j && t->par.rank == 0 && mc_mkdirs(dir, err, sizeof(err)) == 0) {
        mc_ckpt_remove_stale(dir); /* trees of saves that were killed */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        /* unique per save: a leftover of a killed save never collides with this one */
        uint64_t u = (uint64_t)getpid() << 24 ^ (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 32;
        token = (int64_t)(u & INT64_MAX);
    }
    agree(t, err);
    mc_broadcast(t->comm, t->comm->world, &token, 1, MC_DT_I64, 0);
    j->iteration = t->iteration;
    snprintf(j->tmp, sizeof(j->tmp), "%" PRIx64, (uint64_t)token);
    mc_ckpt_iter_dir(j->staging, sizeof(j->staging), dir, t->iteration, false, j->tmp);
    mc_ckpt_iter_dir(j->final, sizeof(j->final), dir, t->iteration, false, NULL);
    char rank_name[32];
    mc_ckpt_rank_name(rank_name, sizeof(rank_name), t->par.me.tp, a->pipeline_model_parallel_size,
                      t->par.me.pp, t->par.layout.ep, t->par.expert_me.ep);
    snprintf(j->rank_dir, sizeof(j->rank_dir), "%s/%s", j->staging, rank_name);
    const char *delay = mc_env_text(MC_ENV_TEST_CKPT_WRITE_DELAY_MS);
    j->delay_ms = delay ? strtol(delay, NULL, 10) : 0;

    if (is_dist(a)) {
        j->dist = mc_torchdist_prepare(t, j->staging);
        return j;
    }
    /* Megatron: expert data-parallel rank 0 writes (every dp rank of its ep group at ep > 1) */
    const bool writer =
        t->par.layout.ep > 1 ? t->par.expert_me.edp == 0 : mc_ddp_first_replica(&t->ddp);
    if (writer) add_file(j, MODEL_FILE, mc_ckpt_state_dict(t));
    if (t->ddp.dist_opt && !a->no_save_optim) {
        mc_pyobj_t *d = distopt_file(t);
        if (d) add_file(j, DISTOPT_FILE, d);
    }
    return j;
}

/* Writes the job's files and makes them durable (any thread; no communication). Releases the
 * objects; errors go to j->err. */
/* MC_TEST_CKPT_WRITE_DELAY_MS: the writer waits after writing its files. */
static void hold(const save_job_t *j)
{
    if (j->delay_ms > 0)
        nanosleep(&(struct timespec){.tv_sec = j->delay_ms / 1000,
                                     .tv_nsec = j->delay_ms % 1000 * 1000000L},
                  NULL);
}

static void write_job(void *p)
{
    save_job_t *j = p;
    if (j->dist) {
        mc_torchdist_write(j->dist, j->err, sizeof(j->err));
        hold(j);
        return;
    }
    if (j->n && mc_mkdirs(j->rank_dir, j->err, sizeof(j->err)) == 0) {
        for (int i = 0; i < j->n && !j->err[0]; i++)
            mc_ckpt_write_file(j->file[i].path, j->file[i].obj, j->err, sizeof(j->err));
        hold(j);
        if (!j->err[0]) mc_ckpt_fsync(j->rank_dir, j->err, sizeof(j->err));
    }
    for (int i = 0; i < j->n; i++) {
        mc_py_decref(j->file[i].obj);
        j->file[i].obj = NULL;
    }
}

/* The iteration the tracker names before this save (0 for none, release or unreadable), read
 * only with --save-retain-interval, as Megatron's iter_finalize_fn. */
static int64_t previous_iteration(const mc_args_t *a)
{
    bool found, release;
    int64_t it = 0;
    char err[ERR_MAX];
    if (a->save_retain_interval <= 0) return 0;
    if (mc_ckpt_read_tracker(a->save, &found, &it, &release, err, sizeof(err)) != 0 || release)
        return 0;
    return it;
}

/* --save-retain-interval on rank 0: the previous checkpoint goes unless its iteration is a
 * multiple of the interval (Megatron's save_checkpoint; a symbolic link is kept, and a failed
 * delete is only reported). */
static void retire_previous(const mc_args_t *a, int64_t prev, int64_t iteration)
{
    if (a->save_retain_interval <= 0 || prev <= 0 || prev == iteration ||
        prev % a->save_retain_interval == 0)
        return;
    char dir[MC_CKPT_PATH_MAX], err[MC_CKPT_PATH_MAX + ERR_MAX] = "";
    struct stat st;
    mc_ckpt_iter_dir(dir, sizeof(dir), a->save, prev, false, NULL);
    if (lstat(dir, &st) != 0) /* shutil.rmtree's OSError, as Python prints it */
        snprintf(err, sizeof(err), "[Errno %d] %s: '%s'", errno, strerror(errno), dir);
    else if (S_ISLNK(st.st_mode))
        printf("  skipping deleting checkpoint from iteration %7" PRId64
               " at %s since it is a symbolic link\n",
               prev, a->save);
    else mc_ckpt_rmtree(dir, err, sizeof(err));
    if (err[0])
        printf("  encountered exception \"%s\" when trying to delete checkpoint from iteration "
               "%7" PRId64 " at %s\n",
               err, prev, a->save);
    else if (!S_ISLNK(st.st_mode))
        printf("  successfully deleted checkpoint from iteration %7" PRId64 " at %s\n", prev,
               a->save);
    fflush(stdout);
}

/* Collective: once every rank's files are complete, rank 0 publishes the iteration's tree, then
 * the tracker, each in one rename. Frees the job. */
static void publish(mc_trainer_t *t, save_job_t *j)
{
    const mc_args_t *a = t->args;
    char err[ERR_MAX] = "", when[64];
    int64_t prev = 0;
    agree(t, j->err); /* every file is complete */
    if (j->dist) {    /* rank 0 indexes every rank's items */
        mc_torchdist_finish(t, j->dist, j->final, err, sizeof(err));
        j->dist = NULL;
        agree(t, err);
    }
    if (t->par.rank == 0) {
        prev = previous_iteration(a);
        char text[32];
        snprintf(text, sizeof(text), "%" PRId64, j->iteration);
        if (mc_ckpt_fsync(j->staging, err, sizeof(err)) == 0 &&
            mc_ckpt_publish_dir(j->staging, j->final, err, sizeof(err)) == 0)
            mc_ckpt_write_tracker(a->save, text, j->tmp, err, sizeof(err));
    }
    agree(t, err);
    if (printer(t)) {
        stamp(when, sizeof(when));
        printf("  %s successfully saved checkpoint from iteration %7" PRId64
               " to %s [ t 1/%d, p 1/%d ]\n",
               when, j->iteration, a->save, a->tensor_model_parallel_size,
               a->pipeline_model_parallel_size);
        fflush(stdout);
    }
    if (t->par.rank == 0) retire_previous(a, prev, j->iteration);
    free(j);
}

/* Publishes the asynchronous save in flight once every rank's writer finished; blocking waits
 * for it, first saying so (Megatron's words) when announce is set. */
static void finalize(mc_trainer_t *t, mc_ckpt_async_t *async, bool blocking, bool announce)
{
    if (!mc_ckpt_async_pending(async)) return;
    if (blocking && announce && printer(t)) {
        printf("Unfinalized async checkpoint saves. Finalizing them synchronously now.\n");
        fflush(stdout);
    }
    save_job_t *j = mc_ckpt_async_finish(async, t->comm, blocking);
    if (j) publish(t, j);
}

void mc_ckpt_finalize(mc_trainer_t *t, mc_ckpt_async_t *async, bool blocking)
{
    finalize(t, async, blocking, true);
}

void mc_ckpt_save(mc_trainer_t *t, mc_ckpt_async_t *async)
{
    const mc_args_t *a = t->args;
    char err[ERR_MAX] = "", when[64];
    if (mc_ckpt_async_pending(async)) {
        if (printer(t)) {
            printf("WARNING: Starting a checkpoint save before previous has finished. Consider "
                   "increasing the checkpoint interval.\n");
            fflush(stdout);
        }
        finalize(t, async, true, false); /* one save in flight: the snapshot buffer is reused */
    }
    if (printer(t)) {
        stamp(when, sizeof(when));
        printf("%s saving checkpoint at iteration %7" PRId64 " to %s in %s format\n", when,
               t->iteration, a->save, a->ckpt_format);
        if (is_dist(a) && a->use_distributed_optimizer && !a->no_save_optim)
            printf("Storing distributed optimizer sharded state of type %s\n",
                   a->dist_ckpt_optim_fully_reshardable ? "fully_reshardable" : "dp_reshardable");
        fflush(stdout);
    }
    mc_ddp_finish_param_gather(&t->ddp); /* every rank's parameters complete */
    save_job_t *j = prepare(t);
    if (!async) {
        write_job(j);
        publish(t, j);
        return;
    }
    mc_pyobj_t *pair[2] = {j->file[0].obj, j->file[1].obj}, **objs = pair;
    int n_objs = j->n;
    if (j->dist) n_objs = (int)mc_torchdist_job_objects(j->dist, &objs);
    if (mc_ckpt_async_snapshot(async, objs, n_objs, err, sizeof(err)) == 0)
        mc_ckpt_async_start(async, write_job, j, err, sizeof(err));
    agree(t, err);
    if (printer(t)) {
        stamp(when, sizeof(when));
        printf("  %s scheduled an async checkpoint save at iteration %7" PRId64 " to %s\n", when,
               t->iteration, a->save);
        fflush(stdout);
    }
}

mc_ckpt_async_t *mc_ckpt_init(const mc_trainer_t *t)
{
    const mc_args_t *a = t->args;
    if (!a->async_save || !a->save[0]) return NULL;
    /* the snapshot holds what the files would otherwise read from training memory */
    mc_pyobj_t *sd = mc_ckpt_state_dict(t);
    if (!sd) mc_fatal("out of host memory");
    const size_t bytes = mc_ckpt_borrowed_bytes(sd);
    mc_py_decref(sd);
    mc_ckpt_async_t *async = mc_ckpt_async_new(bytes);
    if (!async)
        mc_fatal("not enough host memory for the asynchronous checkpoint snapshot (%.2f GiB; save "
                 "without --async-save)",
                 (double)bytes / (1024.0 * 1024 * 1024));
    return async;
}

void mc_ckpt_free(mc_ckpt_async_t *async) { mc_ckpt_async_free(async); }

/* ---- load ---- */

/* Why path cannot be read, with what the checkpoint holds instead. */
static void missing(const char *path, const char *iter_dir, const char *load, char *err, size_t n)
{
    char held[512];
    if (access(iter_dir, F_OK) != 0) {
        mc_ckpt_list(load, "iter_", held, sizeof(held));
        mc_path_errf(err, n, iter_dir,
                     "missing; %s holds %s (fix latest_checkpointed_iteration.txt "
                     "or give --ckpt-step)",
                     load, held[0] ? held : "no iter_* directory");
        return;
    }
    mc_ckpt_list(iter_dir, "mp_rank_", held, sizeof(held));
    mc_path_errf(err, n, path,
                 "missing shard file (the checkpoint holds %s: it was saved with another "
                 "tensor or pipeline-parallel layout, or a rank failed to write it)",
                 held[0] ? held : "no mp_rank_* directory");
}

static void loaded(const mc_trainer_t *t, const char *dir)
{
    const mc_args_t *a = t->args;
    if (printer(t)) {
        printf(" checkpoint version 3.0\n"
               "  successfully loaded checkpoint from %s [ t 1/%d, p 1/%d ] at iteration %" PRId64
               "\n",
               dir, a->tensor_model_parallel_size, a->pipeline_model_parallel_size, t->iteration);
        fflush(stdout);
    }
}
/* rank_dir's distrib_optim.pt into this rank's shards of sel's buffers (ep > 1: entry sel of
 * Megatron's chained list). */
static void load_distopt(mc_trainer_t *t, const char *iter_dir, const char *rank_dir,
                         const mc_ckpt_order_t *order, mc_ckpt_sel_t sel, char *err, size_t n)
{
    char path[MC_CKPT_PATH_MAX + 64], inner[ERR_MAX];
    snprintf(path, sizeof(path), "%s/%s/%s", iter_dir, rank_dir, DISTOPT_FILE);
    mc_pyobj_t *d = NULL;
    if (access(path, F_OK) != 0) {
        mc_path_errf(err, n, path,
                     "missing (the checkpoint was saved without the distributed optimizer's "
                     "state: add --no-load-optim)");
        return;
    }
    if (mc_torch_load(path, 0, &d, err, n) != 0) return;
    const mc_pyobj_t *state = d;
    if (sel != MC_CKPT_ALL && !(d->kind == MC_PY_LIST && mc_py_len(d) == 2))
        mc_path_errf(err, n, path,
                     "not Megatron's chained optimizer's list [dense, experts] (saved at ep 1? "
                     "load it at ep 1, or add --no-load-optim)");
    else if (sel != MC_CKPT_ALL) state = mc_py_item(d, sel == MC_CKPT_DENSE ? 0 : 1);
    if (!err[0] && mc_ckpt_distopt_load_of(t, state, order, sel, inner, sizeof(inner)) != 0)
        mc_path_errf(err, n, path, "%s", inner);
    mc_py_decref(d);
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
            snprintf(err, sizeof(err),
                     "%.800s/%s: missing, and --exit-on-missing-checkpoint is set (no "
                     "checkpoint to load: check the --load path)",
                     dir, MC_CKPT_TRACKER);
            agree(t, err);
        }
        if (printer(t)) {
            printf("WARNING: could not find the metadata file %s/%s\n"
                   "    will not load any checkpoints and will start from random\n",
                   dir, MC_CKPT_TRACKER);
            fflush(stdout);
        }
        return false;
    }
    mc_all_reduce(t->comm, t->comm->world, &iteration, 1, MC_DT_I64, MC_OP_MAX); /* read_metadata */
    if (a->ckpt_step > 0) {
        iteration = a->ckpt_step;
        release = false;
    }
    char iter_dir[MC_CKPT_PATH_MAX], rank_name[32], path[MC_CKPT_PATH_MAX + 64];
    mc_ckpt_iter_dir(iter_dir, sizeof(iter_dir), dir, iteration, release, NULL);
    /* the format on disk decides, whatever --ckpt-format says (Megatron's
     * _get_checkpoint_format) */
    const bool dist = mc_torchdist_is_checkpoint(iter_dir);
    if (printer(t)) {
        const char *infix = dist ? "distributed " : "";
        if (release) printf(" loading release %scheckpoint from %s\n", infix, dir);
        else
            printf(" loading %scheckpoint from %s at iteration %" PRId64 "\n", infix, dir,
                   iteration);
        fflush(stdout);
    }
    if (dist) {
        mc_torchdist_usage_t u;
        mc_torchdist_load(t, iter_dir, release, &u, err, sizeof(err));
        agree(t, err);
        if (printer(t) && u.foreign_rng) mc_ckpt_warn_foreign_rng();
        mc_torchdist_strictness(t, &u, err, sizeof(err));
        mc_torchdist_usage_free(&u);
        agree(t, err);
        loaded(t, dir);
        return true;
    }
    /* Megatron's legacy files at ep > 1 hold the chained optimizer's two states: read with the
     * distributed optimizer only */
    if (t->par.layout.ep > 1 && !t->ddp.dist_opt && !a->finetune && !a->no_load_optim)
        mc_path_errf(err, sizeof(err), iter_dir,
                     "loading a legacy (torch format) checkpoint's optimizer state with "
                     "--expert-model-parallel-size %d without --use-distributed-optimizer is "
                     "recognised but not implemented yet in megatron-c (add "
                     "--use-distributed-optimizer or --no-load-optim)",
                     t->par.layout.ep);
    /* experts split over etp (tp > 1) at ep > 1 in legacy files (mp_rank_TT_PPP_EEE, the
     * folded expert ranks): not mapped yet (torch_dist is); at ep 1 they are the dense tp's */
    if (t->model.cfg.moe.num_experts && t->model.cfg.tp > 1 && t->par.layout.ep > 1)
        mc_path_errf(err, sizeof(err), iter_dir,
                     "loading a legacy (torch format) checkpoint of an MoE model with "
                     "--tensor-model-parallel-size %d and --expert-model-parallel-size %d is "
                     "recognised but not implemented yet in megatron-c (save it as torch_dist)",
                     t->model.cfg.tp, t->par.layout.ep);
    agree(t, err);
    mc_ckpt_rank_name(rank_name, sizeof(rank_name), t->par.me.tp, a->pipeline_model_parallel_size,
                      t->par.me.pp, t->par.layout.ep, t->par.expert_me.ep);
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
        if (t->par.layout.ep <= 1) {
            load_distopt(t, iter_dir, rank_name, &got.order, MC_CKPT_ALL, err, sizeof(err));
        } else { /* the dense state in ep rank 0's file, the experts' in this ep rank's */
            char rank0[32];
            mc_ckpt_rank_name(rank0, sizeof(rank0), t->par.me.tp, a->pipeline_model_parallel_size,
                              t->par.me.pp, t->par.layout.ep, 0);
            load_distopt(t, iter_dir, rank0, &got.order, MC_CKPT_DENSE, err, sizeof(err));
            if (!err[0])
                load_distopt(t, iter_dir, rank_name, &got.order, MC_CKPT_EXPERTS, err, sizeof(err));
        }
        agree(t, err);
    }
    mc_ckpt_order_free(&got.order);
    if (printer(t) && got.foreign_rng) mc_ckpt_warn_foreign_rng();
    if (printer(t) && got.weights_16bit && !a->bf16 && !a->fp16)
        printf("WARNING: the checkpoint's model weights are 16-bit and this run trains in fp32%s\n",
               opts.load_optim ? " from its fp32 master parameters"
                               : " (without --no-load-optim the "
                                 "fp32 master parameters would be loaded)");
    loaded(t, dir);
    return true;
}
