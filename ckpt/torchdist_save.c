/* Saving a torch_dist checkpoint (ckpt/torchdist.h): who writes which item. Megatron's replica rules
 * decide: a tensor piece is written by the rank whose replica_id is all zeros (tp rank 0 for
 * replicated tensors, dp rank 0 always), the per-layer _extra_state objects by tp and dp rank 0,
 * rng_state and the optimizer's per-domain objects by dp rank 0 of each (tp, pp) domain. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/fs.h"
#include "ckpt/args.h"
#include "ckpt/torchdist.h"
#include "ckpt/files.h"
#include "ckpt/state.h"
#include "model/param_names.h"

struct mc_torchdist_job {
    char staging[MC_CKPT_PATH_MAX];
    mc_dcp_writer_t *w;
    mc_pyobj_t *common; /* rank 0: common.pt */
    mc_dcp_records_t recs;
    mc_pyobj_t **objs; /* for the asynchronous snapshot */
};

static const char *optim_sharding(const mc_args_t *a)
{
    return a->dist_ckpt_optim_fully_reshardable ? "fully_reshardable" : "dp_reshardable";
}

static void need(int rc)
{
    if (rc) mc_fatal("out of host memory preparing a checkpoint");
}

/* [value]: what a ShardedObject stores. Steals value. */
static void add_object(mc_dcp_writer_t *w, const char *key, mc_pyobj_t *value)
{
    mc_pyobj_t *list = mc_py_list();
    need(mc_py_list_append(list, value));
    need(mc_dcp_writer_add_object(w, key, list));
    mc_py_decref(list);
}

static void add_tensor(mc_dcp_writer_t *w, const char *key, mc_pyobj_t *t, const mc_shard_t *s)
{
    need(!t || mc_dcp_writer_add_tensor(w, key, t, s->global, s->offsets));
    mc_py_decref(t);
}

/* The model's pieces this rank stores: the dense ones on dp rank 0, the experts' on expert dp
 * rank 0 (Megatron's replica_id: the expert data-parallel rank for experts). */
static void add_model(const mc_trainer_t *t, mc_dcp_writer_t *w, const mc_shard_t *s, int n,
                      bool dense, bool experts)
{
    const mc_gpt_t *m = &t->model;
    for (int k = 0; k < n; k++) {
        const bool expert = m->params[s[k].param].expert >= 0;
        if (!s[k].main || !(expert ? experts : dense)) continue;
        const void *at = mc_gpt_param_at(m, m->params[s[k].param].offset + s[k].start);
        add_tensor(
            w, s[k].key,
            mc_ckpt_weight_tensor(m, at, s[k].ndim, s[k].sizes, mc_ckpt_model_dtype(t->args)),
            &s[k]);
    }
}

/* The router's expert_bias of each local MoE layer (--moe-router-enable-expert-bias): fp32,
 * replicated over tp and dp (tp and dp rank 0 write it), a copy (not training memory). */
static void add_expert_bias(mc_trainer_t *t, mc_dcp_writer_t *w, bool dense)
{
    mc_gpt_t *m = &t->model;
    if (!m->cfg.moe.expert_bias || !dense) return;
    for (int l = 0; l < m->n_local_layers; l++) {
        if (!m->cfg.moe.layer[m->layer_no[l]]) continue;
        mc_shard_t s;
        mc_torchdist_expert_bias_shard(m, l, &s);
        if (!s.main) continue;
        mc_pyobj_t *v = mc_py_tensor_new(MC_TORCH_FLOAT32, s.ndim, s.sizes);
        need(!v);
        m->be->memcpy_d2h(m->be, mc_py_tensor_data(v), mc_gpt_moe_expert_bias(m, l),
                          mc_py_tensor_nbytes(v));
        add_tensor(w, s.key, v, &s);
    }
}

/* Each linear's _extra_state (None for megatron-c's modules, as for Megatron's local spec): a
 * layer's tp linears in the order of their parameters (the names table's modules), an MoE
 * layer's experts' as SequentialMLP's sharded_state_dict names them (per layer and global
 * expert: shard_<layer>.<expert>_<L>.<E>; per-layer keys: shard_<expert>_<E>, the dense
 * modules' shard_0_1, Megatron's ShardedObject without offsets). dense/experts: whether this
 * rank writes the dense layers' (tp and dp rank 0) and the experts' (expert tp and expert dp
 * rank 0). */
static void add_extra_states(const mc_trainer_t *t, mc_dcp_writer_t *w, bool dense, bool experts)
{
    const mc_gpt_t *m = &t->model;
    const bool per_layer = m->cfg.dist_per_layer;
    const int L = m->cfg.num_layers, E = m->cfg.moe.num_experts;
    char key[192];
    for (int j = 0; j < m->n_local_layers; j++) {
        const char *prev = NULL;
        const int l = m->layer_no[j];
        for (int i = m->layer_param[j]; i < m->layer_param[j + 1]; i++) {
            const mc_param_t *p = &m->params[i];
            if (p->expert >= 0) {
                if (!experts) continue;
                const char *fc = p->kind == MC_PK_EXPERT_FC1_W ? "linear_fc1" : "linear_fc2";
                if (per_layer)
                    snprintf(key, sizeof(key),
                             "decoder.layers.%d.mlp.experts.experts.%s._extra_state/shard_%d_%d", l,
                             fc, p->expert, E);
                else
                    snprintf(key, sizeof(key),
                             "decoder.layers.mlp.experts.experts.%s._extra_state/shard_%d.%d_%d.%d",
                             fc, l, p->expert, L, E);
                add_object(w, key, mc_py_none());
                continue;
            }
            const char *mod = mc_param_names[p->kind].module_local;
            if (!dense || !mod || (prev && strcmp(prev, mod) == 0)) continue;
            prev = mod;
            if (per_layer)
                snprintf(key, sizeof(key), "decoder.layers.%d.%s._extra_state/shard_0_1", l, mod);
            else
                snprintf(key, sizeof(key), "decoder.layers.%s._extra_state/shard_%d_%d", mod, l, L);
            add_object(w, key, mc_py_none());
        }
    }
    /* no output_layer._extra_state: GPTModel.sharded_state_dict drops it */
}

/* optimizer.state.<name>.<key> for every stored piece: the model-space forms. */
static void add_param_state(mc_dcp_writer_t *w, const mc_param_state_t *ps, const mc_shard_t *s,
                            int n, bool with_master, const char *master_name)
{
    static const char *const names[] = {NULL, "exp_avg", "exp_avg_sq"};
    char key[256];
    for (int k = 0; k < n; k++) {
        if (!s[k].main) continue;
        for (int v = with_master ? 0 : 1; v < 3; v++) {
            snprintf(key, sizeof(key), "optimizer.state.%s.%s", v ? names[v] : master_name,
                     s[k].key);
            add_tensor(w, key,
                       mc_py_tensor_copy(MC_TORCH_FLOAT32, s[k].ndim, s[k].sizes,
                                         ps->v[s[k].param][v] + s[k].start),
                       &s[k]);
        }
    }
}

/* The piece [at, at + len) of a world tensor as a view (its storage shared). */
static mc_pyobj_t *view(const mc_pyobj_t *world, int64_t at, int64_t len)
{
    return mc_py_tensor(mc_py_incref(world->tensor.storage), MC_TORCH_FLOAT32, at, 1, &len, NULL);
}

typedef struct {
    long pos, numel;
} span_t;

static int by_pos(const void *a, const void *b)
{
    const span_t *x = a, *y = b;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* dp_reshardable: bucket k of chunk c (world range [wstart, wstart + its unpadded length)) as
 * one 1-D tensor per state, a chunk per parameter and per gap (the padding between parameters:
 * zeros here, uninitialised memory in Megatron's). spans: the chunk's parameters by position. */
static void add_bucket(mc_dcp_writer_t *w, const char *prefix, const mc_pyobj_t *const world[3],
                       long len, long wstart, const span_t *spans, int n_spans)
{
    long at = 0;
    int i = 0;
    while (i < n_spans && spans[i].pos < wstart) i++;
    while (at < len) {
        const long next = i < n_spans && spans[i].pos - wstart < len ? spans[i].pos - wstart : len;
        const long piece = next > at ? next - at : spans[i++].numel; /* a gap, else a parameter */
        for (int v = 0; v < 3; v++) {
            char key[320];
            snprintf(key, sizeof(key), "%s.%s", prefix, mc_ckpt_state_keys[v]);
            const int64_t global[1] = {len}, offs[1] = {at};
            mc_pyobj_t *tensor = view(world[v], wstart + at, piece);
            need(!tensor || mc_dcp_writer_add_tensor(w, key, tensor, global, offs));
            mc_py_decref(tensor);
        }
        at += piece;
    }
}

/* The dp_reshardable state of sel's buffers under key prefix (chain, dom) and the domain's
 * objects (opt: its DistributedOptimizer.state_dict() entries), from the rank that writes them
 * (the gather is collective). */
static void add_buffers(mc_trainer_t *t, mc_dcp_writer_t *w, const mc_ckpt_order_t *o,
                        mc_ckpt_sel_t sel, int chain, int dom, const mc_pyobj_t *opt)
{
    const mc_gpt_t *m = &t->model;
    mc_pyobj_t *d = mc_ckpt_distopt_gather_of(t, o, sel);
    if (!d) return;
    mc_ckpt_buffers_t b;
    mc_ckpt_buffers_of(t, o, sel, &b);
    char prefix[256], key[320];
    span_t *spans = malloc((size_t)(m->n_params + 1) * sizeof(span_t));
    if (!spans) mc_fatal("out of host memory preparing a checkpoint");
    for (int c = 0; c < b.n_chunks; c++) {
        const mc_pyobj_t *world[3];
        for (int v = 0; v < 3; v++) world[v] = mc_ckpt_distopt_world(d, c, v);
        int n_spans = 0;
        for (int i = 0; i < m->n_params; i++)
            if (b.chunk[i] == c) spans[n_spans++] = (span_t){b.pos[i], m->params[i].numel};
        qsort(spans, (size_t)n_spans, sizeof(span_t), by_pos);
        long wstart = 0;
        for (int k = 0; k < b.l[c].n_buckets; k++) {
            mc_torchdist_bucket_key(t->args, chain, dom, c, k, prefix, sizeof(prefix));
            const long len = b.l[c].buckets[k].numel_unpadded;
            add_bucket(w, prefix, world, len, wstart, spans, n_spans);
            wstart += len;
        }
    }
    free(spans);
    static const char *const lists[] = {"per_bucket_numel", "per_bucket_numel_unpadded"};
    for (int k = 0; k < 2; k++) {
        mc_torchdist_optim_key(key, sizeof(key), chain, dom, lists[k], true);
        add_object(w, key, mc_py_incref(mc_py_dict_get_str(d, lists[k])));
    }
    for (size_t k = 0; k < opt->dict.len; k++) {
        mc_torchdist_optim_key(key, sizeof(key), chain, dom, mc_py_get_str(opt->dict.keys[k]),
                               true);
        add_object(w, key, mc_py_incref(opt->dict.vals[k]));
    }
    mc_ckpt_buffers_free(&b);
    mc_py_decref(d);
}

/* The distributed optimizer's dp_reshardable state: the buckets of every buffer and the
 * domain's objects. With expert parallelism Megatron's chained optimizer: the dense
 * parameters' (chained_0, written by dp rank 0) and the experts' (chained_1, its domain the
 * rank in the expert tp x ep x pp group, written by expert-dp rank 0). */
static void add_dp_reshardable(mc_trainer_t *t, mc_dcp_writer_t *w, const mc_pyobj_t *opt)
{
    mc_ckpt_order_t o;
    need(mc_ckpt_order_spec(&t->model, mc_ckpt_names_of(t->args), &o));
    const int dom = mc_torchdist_domain(t->args, t->par.me.tp, t->par.me.pp);
    if (t->par.layout.ep <= 1) {
        add_buffers(t, w, &o, MC_CKPT_ALL, -1, dom, opt);
    } else {
        add_buffers(t, w, &o, MC_CKPT_DENSE, 0, dom, opt);
        mc_pyobj_t *eopt = mc_ckpt_optimizer_common_experts(t, &o);
        need(!eopt);
        add_buffers(t, w, &o, MC_CKPT_EXPERTS, 1,
                    mc_torchdist_expert_domain(t->args, t->par.expert_me.etp, t->par.expert_me.ep,
                                               t->par.me.pp),
                    eopt);
        mc_py_decref(eopt);
    }
    mc_ckpt_order_free(&o);
}

static mc_pyobj_t *content_metadata(const mc_args_t *a)
{
    mc_pyobj_t *d = mc_py_dict();
    if (a->use_distributed_optimizer)
        need(mc_py_dict_set_str(d, "distrib_optim_sharding_type", mc_py_str(optim_sharding(a))));
    need(mc_py_dict_set_str(d, "singleton_local_shards", mc_py_bool(false)));
    need(mc_py_dict_set_str(d, "chained_optim_avoid_prefix", mc_py_bool(true)));
    return d;
}

/* common.pt (rank 0): Megatron's state dict less its sharded part. opt: the optimizer's
 * non-tensor part (NULL with --no-save-optim). */
static mc_pyobj_t *common_dict(const mc_trainer_t *t, mc_pyobj_t *opt)
{
    const mc_args_t *a = t->args;
    mc_pyobj_t *sd = mc_py_dict();
    need(mc_py_dict_set_str(
        sd, "args",
        mc_ckpt_args_namespace(a, t->consumed_train_samples, t->consumed_valid_samples)));
    need(mc_py_dict_set_str(sd, "checkpoint_version", mc_py_float(3.0)));
    need(mc_py_dict_set_str(sd, "iteration", mc_py_int(t->iteration)));
    if (opt) {
        need(mc_py_dict_set_str(sd, "optimizer", opt));
        need(mc_py_dict_set_str(sd, "opt_param_scheduler", mc_ckpt_scheduler_dict(&t->sched, a)));
    }
    need(mc_py_dict_set_str(sd, "num_floating_point_operations_so_far",
                            mc_py_float(mc_trainer_flops_so_far(t))));
    need(mc_py_dict_set_str(sd, "content_metadata", content_metadata(a)));
    return sd;
}

/* The optimizer's items (collective: gathers over dp) and its common.pt entry. */
static mc_pyobj_t *add_optimizer(mc_trainer_t *t, mc_dcp_writer_t *w, const mc_shard_t *s, int n)
{
    const mc_args_t *a = t->args;
    mc_ckpt_order_t o;
    need(mc_ckpt_order_spec(&t->model, mc_ckpt_names_of(a), &o));
    mc_pyobj_t *opt = mc_ckpt_optimizer_common(t, &o);
    mc_ckpt_order_free(&o);
    need(!opt);
    if (t->ddp.dist_opt && !a->dist_ckpt_optim_fully_reshardable) {
        add_dp_reshardable(t, w, opt);
        mc_py_decref(opt);
        opt = mc_py_dict();
    } else {
        mc_param_state_t ps;
        mc_param_state_get(t, &ps); /* empty on dp ranks > 0 of the distributed optimizer */
        const bool masters = t->ddp.dist_opt || a->bf16 || a->fp16;
        if (ps.n && mc_ddp_first_replica(&t->ddp))
            add_param_state(w, &ps, s, n, masters, t->ddp.dist_opt ? "param" : "fp32_param");
        mc_param_state_free(&ps);
    }
    if (t->ddp.dist_opt)
        need(mc_py_dict_set_str(opt, "param_state_sharding_type", mc_py_str(optim_sharding(a))));
    if (t->par.layout.ep > 1) { /* ChainedOptimizer's {0: dense, 1: experts} */
        mc_pyobj_t *chained = mc_py_dict(), *experts = mc_py_dict();
        need(
            mc_py_dict_set_str(experts, "param_state_sharding_type", mc_py_str(optim_sharding(a))));
        need(mc_py_dict_set_int(chained, 0, opt));
        need(mc_py_dict_set_int(chained, 1, experts));
        opt = chained;
    }
    return opt;
}

mc_torchdist_job_t *mc_torchdist_prepare(mc_trainer_t *t, const char *staging)
{
    const mc_args_t *a = t->args;
    mc_torchdist_job_t *j = calloc(1, sizeof(*j));
    if (!j || !(j->w = mc_dcp_writer_new(staging, t->par.rank)))
        mc_fatal("out of host memory preparing a checkpoint");
    snprintf(j->staging, sizeof(j->staging), "%s", staging);
    mc_shard_t *s;
    int n;
    need(mc_torchdist_shards(&t->model, &s, &n));
    const bool dp0 = mc_ddp_first_replica(&t->ddp); /* of every dp rank holding the same */
    /* experts: replicas over the expert data-parallel group (the dense dp group at ep 1) */
    const bool edp0 = t->par.layout.ep > 1 ? t->par.expert_me.edp == 0 : dp0;
    const bool etp0 = t->par.layout.ep > 1 ? t->par.expert_me.etp == 0 : t->par.me.tp == 0;
    add_model(t, j->w, s, n, dp0, edp0);
    add_expert_bias(t, j->w, dp0);
    add_extra_states(t, j->w, dp0 && t->par.me.tp == 0, edp0 && etp0);
    mc_pyobj_t *opt = a->no_save_optim ? NULL : add_optimizer(t, j->w, s, n);
    if (dp0 && !a->no_save_rng) {
        char key[96];
        mc_torchdist_rng_key(t, key, sizeof(key));
        mc_pyobj_t *rng = mc_ckpt_rng_state(t);
        need(!rng);
        add_object(j->w, key, rng); /* [[state]], as Megatron's [rng_state_list] */
    }
    free(s);
    if (t->par.rank == 0) j->common = common_dict(t, opt);
    else mc_py_decref(opt);
    return j;
}

size_t mc_torchdist_job_objects(mc_torchdist_job_t *j, mc_pyobj_t ***objs)
{
    const size_t n = mc_dcp_writer_count(j->w);
    mc_pyobj_t **w = mc_dcp_writer_objects(j->w);
    free(j->objs);
    j->objs = malloc((n + 1) * sizeof(mc_pyobj_t *));
    if (!j->objs) mc_fatal("out of host memory");
    memcpy(j->objs, w, n * sizeof(mc_pyobj_t *));
    size_t k = n;
    if (j->common) j->objs[k++] = j->common;
    *objs = j->objs;
    return k;
}

void mc_torchdist_write(mc_torchdist_job_t *j, char *err, size_t n)
{
    if (mc_mkdirs(j->staging, err, n) != 0) return;
    if (j->common) {
        char path[MC_CKPT_PATH_MAX + 16];
        snprintf(path, sizeof(path), "%s/common.pt", j->staging);
        if (mc_ckpt_write_file(path, j->common, err, n) != 0) return;
        mc_py_decref(j->common);
        j->common = NULL;
    }
    mc_dcp_writer_finish(j->w, &j->recs, err, n); /* frees the writer, also on error */
    j->w = NULL;
}

/* Every rank's packed records on rank 0 (the comm layer has no gather: an all-gather of the
 * lengths, then of the buffers padded to the longest). NULL elsewhere. */
static uint8_t *gather_records(mc_trainer_t *t, const uint8_t *mine, size_t len, int64_t **lens,
                               int64_t *stride)
{
    mc_comm_t *c = t->comm;
    const int world = c->size;
    int64_t *l = calloc((size_t)world, sizeof(int64_t)), me = (int64_t)len, longest = 0;
    if (!l) mc_fatal("out of host memory");
    mc_all_gather(c, c->world, &me, l, 1, MC_DT_I64);
    for (int r = 0; r < world; r++) longest = l[r] > longest ? l[r] : longest;
    uint8_t *send = calloc((size_t)longest + 1, 1), *all = calloc((size_t)(longest + 1) * world, 1);
    if (!send || !all) mc_fatal("out of host memory gathering the checkpoint's index");
    memcpy(send, mine, len);
    mc_all_gather(c, c->world, send, all, (size_t)longest + 1, MC_DT_U8);
    free(send);
    if (c->rank != 0) {
        free(all);
        free(l);
        return NULL;
    }
    *stride = longest + 1;
    *lens = l;
    return all;
}

void mc_torchdist_write_index(const char *staging, const char *final, const mc_dcp_records_t *recs,
                              char *err, size_t n)
{
    mc_dcp_meta_t m = {0};
    char path[MC_CKPT_PATH_MAX + 32];
    if (mc_dcp_meta_from_records(recs, &m, err, n) == 0) {
        snprintf(path, sizeof(path), "%s/.metadata", staging);
        if (mc_dcp_meta_write(path, &m, final, err, n) == 0) {
            static const char json[] =
                "{\"sharded_backend\": \"torch_dist\", \"sharded_backend_version\": 1, "
                "\"common_backend\": \"torch\", \"common_backend_version\": 1}";
            snprintf(path, sizeof(path), "%s/metadata.json", staging);
            mc_write_file(path, json, sizeof(json) - 1, err, n);
        }
    }
    mc_dcp_meta_free(&m);
}

mc_pyobj_t *mc_torchdist_job_common(mc_torchdist_job_t *j) { return j->common; }

static void job_free(mc_torchdist_job_t *j)
{
    mc_dcp_records_free(&j->recs);
    if (j->w) mc_dcp_writer_free(j->w);
    mc_py_decref(j->common);
    free(j->objs);
    free(j);
}

void mc_torchdist_collect(mc_torchdist_job_t *j, mc_dcp_records_t *recs)
{
    if (mc_dcp_records_move(recs, &j->recs) != 0)
        mc_fatal("out of host memory collecting a checkpoint's index");
    job_free(j);
}

void mc_torchdist_finish(mc_trainer_t *t, mc_torchdist_job_t *j, const char *final, char *err,
                         size_t n)
{
    uint8_t *mine = NULL, *all;
    size_t len = 0;
    if (mc_dcp_records_pack(&j->recs, &mine, &len) != 0) mc_fatal("out of host memory");
    int64_t *lens = NULL, stride = 0;
    all = gather_records(t, mine, len, &lens, &stride);
    free(mine);
    if (all) {
        /* rank 0: every rank's records, then the index */
        mc_dcp_records_t recs = {0};
        for (int r = 0; r < t->comm->size && !err[0]; r++)
            mc_dcp_records_unpack(all + r * stride, (size_t)lens[r], &recs, err, n);
        if (!err[0]) mc_torchdist_write_index(j->staging, final, &recs, err, n);
        mc_dcp_records_free(&recs);
    }
    free(all);
    free(lens);
    job_free(j);
}
