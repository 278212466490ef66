/* `megatron-c convert-checkpoint` (ckpt/convert.h). */
#include "base/fs.h"
#include "ckpt/convert_int.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "torchfmt/torch_save.h"
#include "base/error.h"
#include "kernels/device.h"
#include "parallel/pipeline.h"
#include "ckpt/args.h"
#include "ckpt/torchdist.h"
#include "ckpt/files.h"
#include "ckpt/state.h"
#include "model/param_names.h"

#define ERR_MAX MC_CV_ERR_MAX
#define MODEL_FILE "model_optim_rng.pt"
#define DISTOPT_FILE "distrib_optim.pt"

/* ---- full tensors ---- */

/* One parameter of the whole model, unsharded: fp32 master weights and Adam moments. */
typedef struct {
    char name[96];
    int ndim;
    int64_t shape[2];
    float *v[3]; /* param, exp_avg, exp_avg_sq */
} full_t;

typedef struct {
    full_t *items;
    int n, cap;
} model_t;

static full_t *find_full(model_t *fm, const char *name)
{
    for (int i = 0; i < fm->n; i++)
        if (strcmp(fm->items[i].name, name) == 0) return &fm->items[i];
    return NULL;
}

static full_t *add_named(model_t *fm, const char *name, int ndim, int64_t rows, int64_t cols)
{
    full_t *f = find_full(fm, name);
    if (f) return f;
    if (fm->n == fm->cap) {
        fm->cap = fm->cap ? 2 * fm->cap : 64;
        if (!(fm->items = realloc(fm->items, (size_t)fm->cap * sizeof(full_t))))
            mc_fatal("out of host memory");
    }
    f = &fm->items[fm->n++];
    memset(f, 0, sizeof(*f));
    snprintf(f->name, sizeof(f->name), "%s", name);
    f->ndim = ndim;
    f->shape[0] = rows;
    f->shape[1] = cols;
    for (int k = 0; k < 3; k++)
        if (!(f->v[k] = calloc((size_t)(f->shape[0] * f->shape[1]), sizeof(float))))
            mc_fatal("out of host memory");
    return f;
}

static full_t *add_full(model_t *fm, const mc_param_t *p)
{
    return add_named(fm, p->name, p->ndim, p->shape[0], p->ndim > 1 ? p->shape[1] : 1);
}

/* The routers' expert_bias buffers (--moe-router-enable-expert-bias, replicated over tp) into
 * (to_full) or out of whole tensors named by global layer. */
static void expert_bias_copy(mc_trainer_t *t, model_t *fm, bool to_full)
{
    mc_gpt_t *m = &t->model;
    if (!m->cfg.moe.expert_bias || (to_full && m->cfg.tp_rank != 0)) return;
    const int E = m->cfg.moe.num_experts;
    char name[96];
    for (int l = 0; l < m->n_local_layers; l++) {
        if (!m->cfg.moe.layer[m->layer_no[l]]) continue;
        snprintf(name, sizeof(name), "decoder.layers.%d.%s", m->layer_no[l], MC_EXPERT_BIAS_NAME);
        full_t *f = to_full ? add_named(fm, name, 1, E, 1) : find_full(fm, name);
        if (!f) mc_fatal("internal error: the source checkpoint has no %s", name);
        float *bias = mc_gpt_moe_expert_bias(m, l);
        if (to_full) m->be->memcpy_d2h(m->be, f->v[0], bias, (size_t)E * sizeof(float));
        else m->be->memcpy_h2d(m->be, bias, f->v[0], (size_t)E * sizeof(float));
    }
}

static void free_model(model_t *fm)
{
    for (int i = 0; i < fm->n; i++)
        for (int k = 0; k < 3; k++) free(fm->items[i].v[k]);
    free(fm->items);
    memset(fm, 0, sizeof(*fm));
}

/* Copies between parameter p's slice on its tp rank (local, p->local's shape) and the full tensor
 * f. Reading a target slice, rows past the source's (a vocabulary padded further) take the last
 * row, as Megatron's converter pads them (weights), or zeros (Adam moments). */
static void slice_copy(const mc_param_t *p, int tp_rank, full_t *f, int k, float *local,
                       bool to_full)
{
    const int64_t rows = p->local[0], cols = p->ndim > 1 ? p->local[1] : 1, full_cols = f->shape[1];
    const int64_t col0 = p->split == MC_SPLIT_COLS ? tp_rank * cols : 0;
    for (int64_t r = 0; r < rows; r++) {
        float *l = local + r * cols;
        int64_t fr = mc_param_full_row(p, tp_rank, r);
        if (to_full) {
            memcpy(f->v[k] + fr * full_cols + col0, l, (size_t)cols * sizeof(float));
            continue;
        }
        if (fr >= f->shape[0]) {
            if (k > 0) {
                memset(l, 0, (size_t)cols * sizeof(float));
                continue;
            }
            fr = f->shape[0] - 1;
        }
        memcpy(l, f->v[k] + fr * full_cols + col0, (size_t)cols * sizeof(float));
    }
}

/* Parameter i's Adam moments in a rank's state (CPU backend), to or from whole local buffers. */
static void moments_copy(mc_trainer_t *t, int i, float *local[2], bool read)
{
    const mc_param_t *p = &t->model.params[i];
    float *state[2] = {t->opt.exp_avg, t->opt.exp_avg_sq};
    for (int s = 0; s < t->opt.n_segs; s++) {
        const mc_opt_seg_t *g = &t->opt.segs[s];
        if (g->param != i) continue;
        for (int k = 0; k < 2; k++) {
            float *a = local[k] + (g->off - p->offset), *b = state[k] + g->state_off;
            memcpy(read ? a : b, read ? b : a, (size_t)g->len * sizeof(float));
        }
    }
}

/* A rank's parameters into (to_full) or out of the full tensors. */
static void rank_copy(mc_trainer_t *t, model_t *fm, bool to_full)
{
    const mc_gpt_t *m = &t->model;
    for (int i = 0; i < m->n_params; i++) {
        const mc_param_t *p = &m->params[i];
        /* the last stage's copy of tied embeddings holds the word embeddings */
        const char *name = p->shared ? mc_param_names[MC_PK_WORD_EMBEDDINGS].local : p->name;
        if (to_full && (p->shared || (p->split == MC_SPLIT_NONE && m->cfg.tp_rank != 0))) continue;
        full_t *f = to_full ? add_full(fm, p) : find_full(fm, name);
        if (!f) mc_fatal("internal error: the source checkpoint has no %s", name);
        float *moments[2] = {malloc((size_t)p->numel * sizeof(float)),
                             malloc((size_t)p->numel * sizeof(float))};
        if (!moments[0] || !moments[1]) mc_fatal("out of host memory");
        if (to_full) moments_copy(t, i, moments, true);
        slice_copy(p, m->cfg.tp_rank, f, 0, (float *)m->param_buf + p->offset,
                   to_full); /* fp32 state */
        for (int k = 0; k < 2; k++) slice_copy(p, m->cfg.tp_rank, f, k + 1, moments[k], to_full);
        if (!to_full) moments_copy(t, i, moments, false);
        free(moments[0]);
        free(moments[1]);
    }
    expert_bias_copy(t, fm, to_full);
}

/* ---- layouts ---- */

static int vpp_of(const mc_args_t *a)
{
    return a->virtual_pipeline_model_parallel_size > 1 ? a->virtual_pipeline_model_parallel_size
                                                       : 1;
}

static void describe(char *buf, size_t n, const mc_args_t *a)
{
    int len = snprintf(buf, n, "tp %d, pp %d", a->tensor_model_parallel_size,
                       a->pipeline_model_parallel_size);
    if (vpp_of(a) > 1 && len < (int)n)
        len += snprintf(buf + len, n - (size_t)len, ", %d virtual stages", vpp_of(a));
    if (a->decoder_first_pipeline_num_layers && len < (int)n)
        len += snprintf(buf + len, n - (size_t)len, ", first stage %d layers",
                        a->decoder_first_pipeline_num_layers);
    if (a->decoder_last_pipeline_num_layers && len < (int)n)
        len += snprintf(buf + len, n - (size_t)len, ", last stage %d layers",
                        a->decoder_last_pipeline_num_layers);
    if (a->account_for_embedding_in_pipeline_split && len < (int)n)
        len += snprintf(buf + len, n - (size_t)len, ", embedding counted in the split");
    if (a->account_for_loss_in_pipeline_split && len < (int)n)
        len += snprintf(buf + len, n - (size_t)len, ", loss counted in the split");
    if (a->use_distributed_optimizer && len < (int)n)
        snprintf(buf + len, n - (size_t)len, ", distributed optimizer (dp %d)",
                 a->data_parallel_size);
}

/* The target's padded vocabulary: the tokenizer's vocabulary padded for the target tp. */
static int target_vocab(const mc_args_t *src, const mc_args_t *tgt, int64_t true_vocab)
{
    const int m_src = src->make_vocab_size_divisible_by * src->tensor_model_parallel_size;
    const int m_tgt = tgt->make_vocab_size_divisible_by * tgt->tensor_model_parallel_size;
    const int64_t v = true_vocab > 0        ? true_vocab
                      : src->vocab_size > 0 ? mc_args_vocab_from_size(src)
                                            : 0;
    if (v > src->padded_vocab_size)
        mc_user_error(
            "--true-vocab-size %lld is larger than the checkpoint's padded vocabulary (%d)",
            (long long)v, src->padded_vocab_size);
    if (v > 0)
        return mc_padded_vocab_size((int)v, tgt->make_vocab_size_divisible_by,
                                    tgt->tensor_model_parallel_size);
    /* the true size lies in (padded - m_src, padded]: padding it for m_tgt gives the same
     * size exactly when m_tgt divides it and is no smaller than m_src */
    if (src->padded_vocab_size % m_tgt == 0 && m_tgt >= m_src) return src->padded_vocab_size;
    mc_user_error(
        "the checkpoint does not say its vocabulary size (it was trained with a tokenizer's "
        "vocabulary file), and its padded vocabulary (%d) does not fit tensor-parallel size %d "
        "(give --true-vocab-size, the tokenizer's vocabulary: 50257 for GPT-2)",
        src->padded_vocab_size, tgt->tensor_model_parallel_size);
}

/* The target layout from the flags; checked against the model. */
/* Experts are whole tensors here at ep 1, split over etp = tp as the dense layers: the target's
 * etp follows its tp as the source's follows its own. */
static void target_experts(mc_args_t *t, const mc_args_t *src, int tp)
{
    const int src_tp = src->tensor_model_parallel_size;
    const int src_etp =
        src->expert_tensor_parallel_size > 0 ? src->expert_tensor_parallel_size : src_tp;
    if (!t->num_experts) return;
    if (src_etp != src_tp || src->expert_model_parallel_size > 1)
        mc_user_error("convert-checkpoint of an MoE model with expert parallelism or an expert "
                      "tensor parallel size other than tp (ep %d, etp %d, tp %d) is recognised "
                      "but not implemented yet in megatron-c (MoE checkpoints convert at ep 1 "
                      "with etp = tp: change tp, the pipeline size, the format or the "
                      "distributed optimizer)",
                      src->expert_model_parallel_size, src_etp, src_tp);
    t->expert_tensor_parallel_size = tp;
}

static void target_args(mc_args_t *t, const mc_args_t *src, const mc_convert_args_t *o,
                        mc_ckpt_names_t names)
{
    *t = *src; /* lists stay owned by src */
    if (o->tp > 0) t->tensor_model_parallel_size = o->tp;
    if (o->pp > 0) t->pipeline_model_parallel_size = o->pp;
    /* the pipeline layout: the source's, unless pp changes or a target layout flag is given */
    const bool virtual_given = o->layers_per_virtual_stage > 0 || o->virtual_stages > 0 ||
                               o->first_stage_layers > 0 || o->last_stage_layers > 0 ||
                               o->account_embedding > 0 || o->account_loss > 0;
    if (virtual_given || t->pipeline_model_parallel_size != src->pipeline_model_parallel_size) {
        t->num_layers_per_virtual_pipeline_stage =
            o->layers_per_virtual_stage > 0 ? o->layers_per_virtual_stage : 0;
        t->num_virtual_stages_per_pipeline_rank = o->virtual_stages > 0 ? o->virtual_stages : 0;
        t->decoder_first_pipeline_num_layers =
            o->first_stage_layers > 0 ? o->first_stage_layers : 0;
        t->decoder_last_pipeline_num_layers = o->last_stage_layers > 0 ? o->last_stage_layers : 0;
        t->account_for_embedding_in_pipeline_split = o->account_embedding > 0;
        t->account_for_loss_in_pipeline_split = o->account_loss > 0;
    }
    if (o->dp > 0) t->data_parallel_size = o->dp;
    if (o->dist_opt >= 0) t->use_distributed_optimizer = o->dist_opt;
    if (o->overlap_grad_reduce >= 0) t->overlap_grad_reduce = o->overlap_grad_reduce;
    if (o->ddp_bucket_size > 0) {
        t->ddp_bucket_size = o->ddp_bucket_size;
        t->ddp_num_buckets = 0;
    }
    if (!t->use_distributed_optimizer) t->overlap_param_gather = false;
    snprintf(t->transformer_impl, sizeof(t->transformer_impl), "%s",
             o->transformer_impl         ? o->transformer_impl
             : names == MC_CKPT_NAMES_TE ? "transformer_engine"
                                         : "local");

    const int tp = t->tensor_model_parallel_size, pp = t->pipeline_model_parallel_size;
    target_experts(t, src, tp);
    const int K = t->num_layers_per_virtual_pipeline_stage,
              V = t->num_virtual_stages_per_pipeline_rank;
    if (t->num_attention_heads % tp != 0)
        mc_user_error(
            "the model's %d attention heads are not divisible by --target-tensor-parallel-size %d",
            t->num_attention_heads, tp);
    if (t->num_query_groups % tp != 0 && tp % t->num_query_groups != 0)
        mc_user_error(
            "the model's %d query groups and --target-tensor-parallel-size %d do not divide "
            "one another",
            t->num_query_groups, tp);
    if (t->ffn_hidden_size % tp != 0)
        mc_user_error(
            "the model's FFN size %d is not divisible by --target-tensor-parallel-size %d",
            t->ffn_hidden_size, tp);
    if (K && V)
        mc_user_error("give only one of --target-num-layers-per-virtual-pipeline-stage and "
                      "--target-num-virtual-stages-per-pipeline-rank");
    if (K && (t->decoder_first_pipeline_num_layers || t->decoder_last_pipeline_num_layers))
        mc_user_error(
            "--target-num-layers-per-virtual-pipeline-stage cannot be combined with uneven "
            "first/last stages (use --target-num-virtual-stages-per-pipeline-rank)");
    if ((t->decoder_first_pipeline_num_layers || t->decoder_last_pipeline_num_layers) &&
        (t->account_for_embedding_in_pipeline_split || t->account_for_loss_in_pipeline_split))
        mc_user_error("--target-decoder-first/last-pipeline-num-layers cannot be combined with "
                      "--target-account-for-embedding/loss-in-pipeline-split (Megatron refuses "
                      "uneven stages with the embedding or loss counted)");
    /* validate_args: K counts the embedding and the loss under the account-for flags */
    const int counted = t->num_layers + t->account_for_embedding_in_pipeline_split +
                        t->account_for_loss_in_pipeline_split;
    if (K && (counted % pp != 0 || (counted / pp) % K != 0))
        mc_user_error(
            "the model's %d layers%s do not split into --target-pipeline-parallel-size %d stages "
            "of --target-num-layers-per-virtual-pipeline-stage %d layers",
            t->num_layers, counted > t->num_layers ? " (with the embedding or loss counted)" : "",
            pp, K);
    t->virtual_pipeline_model_parallel_size = K ? counted / pp / K : V ? V : 1;
    if (t->virtual_pipeline_model_parallel_size > 1 && pp < 2)
        mc_user_error("virtual pipeline stages need --target-pipeline-parallel-size > 1");
    if (t->virtual_pipeline_model_parallel_size > 1 && t->num_microbatches > 0 &&
        t->num_microbatches % pp != 0)
        mc_warn(
            "the target's interleaved schedule needs microbatches in multiples of the pipeline size "
            "(%d): the checkpoint's %d will not do without another --global-batch-size",
            pp, t->num_microbatches);
    char err[512];
    mc_pp_plan_t plan;
    mc_pp_plan_from_args(&plan, t);
    for (int r = 0; r < pp; r++) {
        mc_gpt_config_t cfg;
        mc_gpt_config_from_args(&cfg, t);
        if (mc_pipeline_chunks(&cfg, &plan, r, err, sizeof(err)) != 0)
            mc_user_error("%s (the model's %d layers over the target's %d pipeline stages)", err,
                          t->num_layers, pp);
    }
    t->world_size = tp * pp * t->context_parallel_size * t->data_parallel_size;
}

/* ---- the target's files ---- */

/* Target rank (tp, pp)'s state: cut from the full tensors of a legacy source, or loaded from a
 * torch_dist one (which carries its scalars itself). */
static void build_rank(const mc_cv_target_t *tg, const mc_cv_source_t *s, model_t *fm,
                       const mc_backend_t *be, int tp, int pp, mc_trainer_t *t)
{
    if (s->torch_dist) {
        mc_cv_load_dist_rank(s, tg->args, be, tp, pp, t);
        return;
    }
    char err[ERR_MAX];
    if (mc_trainer_init_state(t, tg->args, be, tp, pp, err, sizeof(err)) != 0)
        mc_user_error("%s", err);
    rank_copy(t, fm, false);
    t->opt.step = tg->step;
    t->sched = *tg->sched;
    t->iteration = tg->iteration;
    t->consumed_train_samples = tg->consumed_train;
    t->consumed_valid_samples = tg->consumed_valid;
    t->model.cfg.seed = tg->seed;
}

/* A rank's legacy files (model_optim_rng.pt, distrib_optim.pt) into rank_dir. */
static void write_rank(const mc_cv_target_t *tg, mc_trainer_t *t, const char *rank_dir)
{
    char err[ERR_MAX], path[MC_CKPT_PATH_MAX + 128];
    mc_pyobj_t *sd = mc_ckpt_state_dict(t);
    if (!sd || mc_cv_carry(tg, sd) != 0)
        mc_fatal("out of host memory building the converted checkpoint");
    if (mc_mkdirs(rank_dir, err, sizeof(err)) != 0) mc_user_error("%s", err);
    snprintf(path, sizeof(path), "%s/%s", rank_dir, MODEL_FILE);
    if (mc_ckpt_write_file(path, sd, err, sizeof(err)) != 0) mc_user_error("%s", err);
    mc_py_decref(sd);
    if (tg->args->use_distributed_optimizer && !tg->args->no_save_optim) {
        mc_ckpt_order_t o;
        if (mc_ckpt_order_spec(&t->model, mc_ckpt_names_of(tg->args), &o) != 0)
            mc_fatal("out of host memory");
        mc_pyobj_t *d = mc_ckpt_distopt_gather(t, &o);
        mc_ckpt_order_free(&o);
        snprintf(path, sizeof(path), "%s/%s", rank_dir, DISTOPT_FILE);
        if (mc_ckpt_write_file(path, d, err, sizeof(err)) != 0) mc_user_error("%s", err);
        mc_py_decref(d);
    }
    if (mc_ckpt_fsync(rank_dir, err, sizeof(err)) != 0) mc_user_error("%s", err);
}

/* ---- the source's files ---- */


static void read_rank(mc_cv_source_t *s, model_t *fm, const mc_backend_t *be, int tp, int pp,
                      bool first)
{
    char err[ERR_MAX], inner[ERR_MAX], rank[32], path[MC_CKPT_PATH_MAX + 64];
    mc_trainer_t t;
    if (mc_trainer_init_state(&t, &s->args, be, tp, pp, err, sizeof(err)) != 0)
        mc_user_error("%s", err);
    mc_ckpt_rank_name(rank, sizeof(rank), tp, s->args.pipeline_model_parallel_size, pp, 1, 0);
    snprintf(path, sizeof(path), "%s/%s/%s", s->iter_dir, rank, MODEL_FILE);
    if (access(path, F_OK) != 0) {
        char held[512];
        mc_ckpt_list(s->iter_dir, "mp_rank_", held, sizeof(held));
        mc_user_error(
            "%s: missing shard file (the checkpoint's args say tensor_model_parallel_size %d x "
            "pipeline_model_parallel_size %d, but it holds %s)",
            path, s->args.tensor_model_parallel_size, s->args.pipeline_model_parallel_size,
            held[0] ? held : "no mp_rank_* directory");
    }
    mc_pyobj_t *ck = NULL;
    if (mc_torch_load(path, 0, &ck, err, sizeof(err)) != 0) mc_user_error("%s", err);
    const mc_ckpt_apply_opts_t opts = {.release = s->release, .load_optim = s->has_optim};
    mc_ckpt_applied_t got;
    if (mc_ckpt_apply(&t, ck, &opts, &got, inner, sizeof(inner)) != 0)
        mc_user_error("%s: %s", path, inner);
    mc_py_decref(ck);
    if (s->dist) {
        snprintf(path, sizeof(path), "%s/%s/%s", s->iter_dir, rank, DISTOPT_FILE);
        mc_pyobj_t *d = NULL;
        if (access(path, F_OK) != 0)
            mc_user_error("%s: missing (the checkpoint's args say --use-distributed-optimizer)",
                          path);
        if (mc_torch_load(path, 0, &d, err, sizeof(err)) != 0) mc_user_error("%s", err);
        if (mc_ckpt_distopt_load(&t, d, &got.order, inner, sizeof(inner)) != 0)
            mc_user_error("%s: %s", path, inner);
        mc_py_decref(d);
    }
    if (first) {
        s->names = got.order.names;
        s->sched = t.sched;
        s->iteration = t.iteration;
        s->consumed_train = t.consumed_train_samples;
        s->consumed_valid = t.consumed_valid_samples;
        s->step = t.opt.step;
        s->seed = t.model.cfg.seed;
        s->foreign_rng = got.foreign_rng;
    } else if (t.opt.step != s->step || t.iteration != s->iteration ||
               t.sched.num_steps != s->sched.num_steps) {
        mc_user_error("%s/%s: holds iteration %" PRId64
                      ", optimizer step %d, scheduler step %" PRId64 " but rank 0 holds %" PRId64
                      ", %d, %" PRId64 " (files of different saves)",
                      s->iter_dir, rank, t.iteration, t.opt.step, t.sched.num_steps, s->iteration,
                      s->step, s->sched.num_steps);
    }
    mc_ckpt_order_free(&got.order);
    rank_copy(&t, fm, true);
    mc_trainer_free(&t);
}

/* ---- the subcommand ---- */

/* Writing into the source's own directory replaces the source while it is read, and writing
 * an older iteration over a later checkpoint rewinds that checkpoint's tracker: both only when
 * asked with --overwrite. */
static void refuse_replacing(const mc_convert_args_t *o, const mc_cv_source_t *s)
{
    if (o->overwrite) return;
    char src[PATH_MAX], dst[PATH_MAX], err[ERR_MAX];
    if (realpath(o->load_dir, src) && realpath(o->save_dir, dst) && strcmp(src, dst) == 0)
        mc_user_error("--save-dir %s is the directory of --load-dir %s: converting would replace "
                      "the source (give another --save-dir, or --overwrite to replace it)",
                      o->save_dir, o->load_dir);
    bool found = false, release = false;
    int64_t held = 0;
    if (mc_ckpt_read_tracker(o->save_dir, &found, &held, &release, err, sizeof(err)) != 0)
        return; /* no readable tracker: nothing to rewind */
    if (found && !release && !s->release && held > s->iteration)
        mc_user_error("--save-dir %s holds a later checkpoint (its tracker says iteration %" PRId64
                      "): converting iteration %" PRId64 " there would rewind it (give another "
                      "--save-dir, or --overwrite to write it anyway)",
                      o->save_dir, held, s->iteration);
}

/* The source: the tracker (or --ckpt-step) says the iteration, its first file the layout and
 * the arguments it was saved with. Returns that file's state dict; *ns is its args. */
static mc_pyobj_t *open_source(const mc_convert_args_t *o, mc_cv_source_t *s, const mc_pyobj_t **ns,
                               char *path, size_t path_n)
{
    char err[ERR_MAX];
    bool found;
    if (mc_ckpt_read_tracker(o->load_dir, &found, &s->iteration, &s->release, err, sizeof(err)) !=
        0)
        mc_user_error("%s", err);
    if (!found)
        mc_user_error("%s/%s: missing (no checkpoint to convert: check --load-dir)", o->load_dir,
                      MC_CKPT_TRACKER);
    if (o->ckpt_step > 0) {
        s->iteration = o->ckpt_step;
        s->release = false;
    }
    refuse_replacing(o, s);
    mc_ckpt_iter_dir(s->iter_dir, sizeof(s->iter_dir), o->load_dir, s->iteration, s->release, NULL);
    if (mc_torchdist_is_checkpoint(s->iter_dir)) {
        snprintf(path, path_n, "%s/common.pt", s->iter_dir);
        return mc_cv_open_dist(s, ns);
    }
    mc_pyobj_t *ck0 = NULL;
    if (mc_ckpt_load_rank0(o->load_dir, o->ckpt_step, path, path_n, &ck0, err, sizeof(err)) != 0)
        mc_user_error("%s", err);
    if (!ck0) {
        char held[512];
        mc_ckpt_list(access(s->iter_dir, F_OK) == 0 ? s->iter_dir : o->load_dir,
                     access(s->iter_dir, F_OK) == 0 ? "mp_rank_" : "iter_", held, sizeof(held));
        mc_user_error("%s: no mp_rank_00 or mp_rank_00_000 shard (it holds %s)", s->iter_dir,
                      held[0] ? held : "nothing of a checkpoint");
    }
    *ns = mc_py_dict_get_str(ck0, "args");
    if (!*ns) mc_user_error("%s: no 'args' entry (the layout it was saved with is unknown)", path);
    if (mc_ckpt_args_from_namespace(*ns, &s->args, err, sizeof(err)) != 0)
        mc_user_error("%s: %s", path, err);
    if (mc_ckpt_args_supported(*ns, err, sizeof(err)) != 0) mc_user_error("%s: %s", path, err);
    s->has_optim =
        mc_py_dict_get_str(ck0, "optimizer") && mc_py_dict_get_str(ck0, "opt_param_scheduler");
    s->dist = s->has_optim && s->args.use_distributed_optimizer;
    /* take the file's scheduler and seed as they are */
    s->args.use_checkpoint_opt_param_scheduler = true;
    s->args.override_opt_param_scheduler = false;
    s->args.finetune = false;
    s->args.no_load_rng = mc_py_dict_get_str(ck0, "rng_state") == NULL;
    return ck0;
}

/* Written like a save: every target rank's files into a temporary tree (a torch_dist target's
 * index last, from every rank's records), renamed into place, then the tracker. Returns the
 * final iteration directory in final. */
static void write_target(const mc_convert_args_t *o, const mc_cv_source_t *s,
                         const mc_cv_target_t *tg, model_t *fm, const mc_backend_t *be,
                         char final[MC_CKPT_PATH_MAX])
{
    const mc_args_t *t_args = tg->args;
    char err[ERR_MAX], path[MC_CKPT_PATH_MAX + 64];
    if (mc_mkdirs(o->save_dir, err, sizeof(err)) != 0) mc_user_error("%s", err);
    mc_ckpt_remove_stale(o->save_dir);
    char tmp[32], staging[MC_CKPT_PATH_MAX], rank[32];
    snprintf(tmp, sizeof(tmp), "%lx", (unsigned long)getpid() ^ (unsigned long)time(NULL) << 16);
    mc_ckpt_iter_dir(staging, sizeof(staging), o->save_dir, s->iteration, s->release, tmp);
    mc_ckpt_iter_dir(final, MC_CKPT_PATH_MAX, o->save_dir, s->iteration, s->release, NULL);
    mc_dcp_records_t recs = {0};
    for (int pp = 0; pp < t_args->pipeline_model_parallel_size; pp++)
        for (int tp = 0; tp < t_args->tensor_model_parallel_size; tp++) {
            mc_trainer_t t;
            build_rank(tg, s, fm, be, tp, pp, &t);
            if (tg->torch_dist) {
                mc_cv_write_dist_rank(tg, &t, tp, pp, staging, &recs);
            } else {
                mc_ckpt_rank_name(rank, sizeof(rank), tp, t_args->pipeline_model_parallel_size, pp,
                                  1, 0);
                snprintf(path, sizeof(path), "%s/%s", staging, rank);
                write_rank(tg, &t, path);
            }
            mc_trainer_free(&t);
        }
    if (tg->torch_dist) mc_cv_finish_dist(staging, final, &recs);
    mc_dcp_records_free(&recs);
    char text[32];
    if (s->release) snprintf(text, sizeof(text), "release");
    else snprintf(text, sizeof(text), "%" PRId64, s->iteration);
    if (mc_ckpt_fsync(staging, err, sizeof(err)) != 0 ||
        mc_ckpt_publish_dir(staging, final, err, sizeof(err)) != 0 ||
        mc_ckpt_write_tracker(o->save_dir, text, tmp, err, sizeof(err)) != 0)
        mc_user_error("%s", err);
}

int mc_convert_run(const mc_convert_args_t *o)
{
    char why[256], path[MC_CKPT_PATH_MAX + 64];
    const mc_backend_t *be = mc_backend_select("cpu", 0, 0, why, sizeof(why));
    mc_cv_source_t s;
    memset(&s, 0, sizeof(s));
    const mc_pyobj_t *ns = NULL;
    mc_pyobj_t *ck0 = open_source(o, &s, &ns, path, sizeof(path));

    model_t fm = {0};
    const int tp_s = s.args.tensor_model_parallel_size, pp_s = s.args.pipeline_model_parallel_size;
    char layout[256];
    describe(layout, sizeof(layout), &s.args);
    printf("loading %s checkpoint from %s at iteration %" PRId64 " (%s)\n",
           s.torch_dist ? "torch_dist" : "legacy torch", o->load_dir, s.iteration, layout);
    fflush(stdout);
    /* a torch_dist source is read by each target rank itself (build_rank) */
    for (int pp = 0; pp < pp_s && !s.torch_dist; pp++)
        for (int tp = 0; tp < tp_s; tp++) read_rank(&s, &fm, be, tp, pp, pp == 0 && tp == 0);

    /* the target */
    mc_args_t t_args;
    target_args(&t_args, &s.args, o, s.names);
    t_args.padded_vocab_size = target_vocab(&s.args, &t_args, o->true_vocab_size);
    if (t_args.padded_vocab_size % t_args.tensor_model_parallel_size != 0)
        mc_user_error(
            "the padded vocabulary (%d) is not divisible by --target-tensor-parallel-size %d "
            "(give --true-vocab-size)",
            t_args.padded_vocab_size, t_args.tensor_model_parallel_size);
    t_args.no_save_optim = !s.has_optim;
    t_args.no_save_rng = false;
    const bool to_dist =
        o->target_format ? strcmp(o->target_format, "torch_dist") == 0 : s.torch_dist;
    mc_cv_target_t tg = {.args = &t_args,
                         .ck0 = ck0,
                         .ns = mc_cv_target_namespace(ns, &t_args, to_dist),
                         .torch_dist = to_dist,
                         .sched = &s.sched,
                         .iteration = s.iteration,
                         .consumed_train = s.consumed_train,
                         .consumed_valid = s.consumed_valid,
                         .step = s.step,
                         .seed = s.seed};
    if (!tg.ns) mc_fatal("out of host memory");
    describe(layout, sizeof(layout), &t_args);
    printf("saving it to %s (%s, %s format)\n", o->save_dir, layout,
           to_dist ? "torch_dist" : "legacy torch");
    fflush(stdout);
    char final[MC_CKPT_PATH_MAX];
    write_target(o, &s, &tg, &fm, be, final);
    if (s.foreign_rng)
        printf("note: the source's rng state is Megatron-LM's, which megatron-c does not use; the "
               "converted checkpoint holds megatron-c's (the dropout seed %" PRIu64
               "): Megatron-LM loads it with --no-load-rng\n",
               s.seed);
    printf("converted iteration %" PRId64 " to %s\n", s.iteration, final);
    mc_py_decref(tg.ns);
    mc_py_decref(ck0);
    free_model(&fm);
    mc_args_free(&s.args);
    return 0;
}

/* ---- whole models (export-hf, import-hf: ckpt/hf.h) ---- */

void mc_cv_load_whole(const char *load_dir, int64_t ckpt_step, mc_args_t *args, mc_trainer_t *t)
{
    char why[256], path[MC_CKPT_PATH_MAX + 64];
    const mc_backend_t *be = mc_backend_select("cpu", 0, 0, why, sizeof(why));
    /* nothing is written: no directory to protect */
    const mc_convert_args_t o = {.load_dir = load_dir,
                                 .ckpt_step = ckpt_step,
                                 .overwrite = true,
                                 .tp = 1,
                                 .pp = 1,
                                 .layers_per_virtual_stage = -1,
                                 .virtual_stages = -1,
                                 .first_stage_layers = -1,
                                 .last_stage_layers = -1,
                                 .dp = 1,
                                 .dist_opt = 0,
                                 .overlap_grad_reduce = -1,
                                 .ddp_bucket_size = -1};
    mc_cv_source_t s;
    memset(&s, 0, sizeof(s));
    const mc_pyobj_t *ns = NULL;
    mc_pyobj_t *ck0 = open_source(&o, &s, &ns, path, sizeof(path));
    model_t fm = {0};
    for (int pp = 0; pp < s.args.pipeline_model_parallel_size && !s.torch_dist; pp++)
        for (int tp = 0; tp < s.args.tensor_model_parallel_size; tp++)
            read_rank(&s, &fm, be, tp, pp, pp == 0 && tp == 0);
    target_args(args, &s.args, &o, s.names);
    /* every row the source holds: the caller keeps the tokenizer's */
    args->padded_vocab_size = s.args.padded_vocab_size;
    mc_cv_target_t tg = {.args = args,
                         .sched = &s.sched,
                         .iteration = s.iteration,
                         .consumed_train = s.consumed_train,
                         .consumed_valid = s.consumed_valid,
                         .step = s.step,
                         .seed = s.seed};
    build_rank(&tg, &s, &fm, be, 0, 0, t);
    free_model(&fm);
    mc_py_decref(ck0); /* args keeps s.args' lists */
}

void mc_cv_save_whole(const char *save_dir, const mc_args_t *target, mc_trainer_t *t,
                      mc_pyobj_t *ns, bool torch_dist)
{
    char why[256];
    const mc_backend_t *be = mc_backend_select("cpu", 0, 0, why, sizeof(why));
    model_t fm = {0};
    rank_copy(t, &fm, true);
    const mc_convert_args_t o = {.save_dir = save_dir};
    mc_cv_source_t s = {.release = true};
    const mc_lr_sched_t sched = t->sched;
    mc_cv_target_t tg = {.args = target,
                         .ns = ns,
                         .sched = &sched,
                         .seed = t->model.cfg.seed,
                         .torch_dist = torch_dist};
    char final[MC_CKPT_PATH_MAX];
    write_target(&o, &s, &tg, &fm, be, final);
    printf("saved %s\n", final);
    free_model(&fm);
}
