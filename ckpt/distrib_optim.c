/* distrib_optim.pt: the distributed optimizer's parameter state in Megatron's
 * get_parameter_state_dp_zero() layout (core/optimizer/distrib_optimizer.py):
 *
 *   {"buckets_coalesced": True,
 *    0: {(param dtype, grad dtype): {"param": [U0], "exp_avg": [U0], "exp_avg_sq": [U0],
 *                                    "numel_unpadded": U0}},
 *    1: {...},  ...                                   one entry per model chunk's buffer
 *    "per_bucket_numel": [{key: [...]}, ...], "per_bucket_numel_unpadded": [{key: [...]}, ...]}
 *
 * Megatron keeps one gradient buffer per model chunk (param_and_grad_buffer.py, param_layout.py):
 * the chunk's parameters in reverse named_parameters() order, each start padded to 64 elements,
 * cut into buckets of --ddp-bucket-size only on chunk 0 of the first pipeline stage (DDP turns
 * bucketing off elsewhere, and everywhere with --overlap-param-gather-with-optimizer-step), a shared embedding in a bucket of its own, each bucket's end padded to
 * lcm(dp, 128). A world tensor is the buffer with every bucket's end padding removed (the padding
 * between parameters stays, as zeros); "param" holds the fp32 master parameters. The world
 * tensors do not depend on dp, so a checkpoint loads at another data-parallel size.
 *
 * megatron-c keeps one buffer per rank for training (parallel/grads.h); the file's layout is
 * computed here from the same rules, per chunk, in the file's parameter order (local or
 * Transformer Engine's, mc_ckpt_order_t). The per_bucket lists (Megatron's older files and its
 * dp_reshardable format have them) let the loader check the buckets match. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "ckpt/state.h"

const char *const mc_ckpt_state_keys[3] = {"param", "exp_avg", "exp_avg_sq"};

void mc_ckpt_buffers_free(mc_ckpt_buffers_t *b)
{
    free(b->pos);
    free(b->chunk);
    for (int c = 0; c < b->n_chunks; c++) mc_grad_layout_free(&b->l[c]);
    memset(b, 0, sizeof(*b));
}

void mc_ckpt_buffers(const mc_trainer_t *t, const mc_ckpt_order_t *o, mc_ckpt_buffers_t *b)
{
    mc_ckpt_buffers_of(t, o, MC_CKPT_ALL, b);
}

/* Whether parameter p belongs to the buffers of sel. */
static bool selected(const mc_param_t *p, mc_ckpt_sel_t sel)
{
    return sel == MC_CKPT_ALL || (sel == MC_CKPT_EXPERTS) == (p->expert >= 0);
}

void mc_ckpt_buffers_of(const mc_trainer_t *t, const mc_ckpt_order_t *o, mc_ckpt_sel_t sel,
                        mc_ckpt_buffers_t *b)
{
    const mc_gpt_t *m = &t->model;
    const mc_args_t *a = t->args;
    memset(b, 0, sizeof(*b));
    b->n_chunks = m->cfg.n_chunks;
    b->pos = malloc((size_t)(m->n_params ? m->n_params : 1) * sizeof(long));
    b->chunk = malloc((size_t)(m->n_params ? m->n_params : 1) * sizeof(int));
    mc_param_t *tmp = malloc((size_t)(m->n_params ? m->n_params : 1) * sizeof(mc_param_t));
    long *start = malloc((size_t)(m->n_params + 1) * sizeof(long));
    int *at = malloc((size_t)(m->n_params + 1) * sizeof(int));
    if (!b->pos || !b->chunk || !tmp || !start || !at) mc_fatal("out of host memory");
    for (int i = 0; i < m->n_params; i++) b->chunk[i] = -1; /* not in sel's buffers */
    long total = 0;
    for (int i = 0; i < m->n_params; i++) total += m->params[i].numel;
    /* the distributed optimizer shards over dp x cp (Megatron's intra_dp_cp_group: an instance's
     * part of it with --num-distributed-optimizer-instances; only per_bucket_numel's padding
     * depends on it) */
    int dp_cp = (a->data_parallel_size > 0 ? a->data_parallel_size : 1) *
                (a->context_parallel_size > 0 ? a->context_parallel_size : 1);
    /* the experts' buffers shard over the expert data-parallel group: tp x cp x dp / (ep x etp) */
    if (sel == MC_CKPT_EXPERTS) {
        const int tp = a->tensor_model_parallel_size > 0 ? a->tensor_model_parallel_size : 1;
        const int ep = a->expert_model_parallel_size > 0 ? a->expert_model_parallel_size : 1;
        const int etp = a->expert_tensor_parallel_size > 0 ? a->expert_tensor_parallel_size : tp;
        dp_cp = dp_cp * tp / (ep * etp) > 0 ? dp_cp * tp / (ep * etp) : 1;
    }
    const int n_inst = a->num_distributed_optimizer_instances;
    const int dp = n_inst > 1 && dp_cp % n_inst == 0 ? dp_cp / n_inst : dp_cp;
    for (int c = 0; c < b->n_chunks; c++) {
        const int lo = c ? o->chunk_end[c - 1] : 0, hi = o->chunk_end[c];
        int n_sel = 0; /* at: o's index of each selected parameter */
        for (int k = lo; k < hi; k++) {
            if (!selected(&m->params[o->param[k]], sel)) continue;
            at[n_sel] = k;
            tmp[n_sel++] = m->params[o->param[k]];
        }
        mc_gpt_t view = {.n_params = n_sel, .params = tmp};
        /* chunk 0 of pipeline rank 0; none with --overlap-param-gather-with-optimizer-step */
        const bool bucketed =
            c == 0 && m->cfg.chunk[0].pre && !t->cfg.ddp.overlap_param_gather_with_optimizer_step;
        mc_grad_layout(&view, bucketed ? mc_ddp_bucket_size(&t->cfg.ddp, total) : 0, dp, true,
                       t->cfg.ddp.pad_buckets_for_high_nccl_busbw, &b->l[c]);
        long u = 0;
        for (int k = 0; k < b->l[c].n_buckets; k++) {
            start[k] = u;
            u += b->l[c].buckets[k].numel_unpadded;
        }
        b->unpadded[c] = u;
        for (int j = 0; j < n_sel; j++) {
            const mc_bucket_t *bk = &b->l[c].buckets[b->l[c].param_bucket[j]];
            b->pos[o->param[at[j]]] = start[b->l[c].param_bucket[j]] + tmp[j].offset - bk->start;
            b->chunk[o->param[at[j]]] = c;
        }
    }
    free(tmp);
    free(start);
    free(at);
}

static float *host_copy(const mc_backend_t *be, const float *dev, long count)
{
    float *h = malloc((size_t)(count ? count : 1) * sizeof(float));
    if (!h) mc_fatal("out of host memory saving the distributed optimizer state");
    be->memcpy_d2h(be, h, dev, (size_t)count * sizeof(float));
    return h;
}

/* Whether this rank writes sel's buffers: dp rank 0 of the first distributed optimizer
 * instance, for the experts' (expert parallelism) expert-dp rank 0 of it. */
static bool writes(const mc_ddp_t *d, mc_ckpt_sel_t sel)
{
    if (sel == MC_CKPT_EXPERTS) return d->edp_rank == 0 && d->inst_rank == 0;
    return mc_ddp_first_replica(d);
}

/* Every rank's packed shards of one Adam state vector over group g (of size n), NULL at n 1. */
static float *gather_over(mc_trainer_t *t, mc_group_t *g, int n, const float *mine)
{
    const long L = t->opt.state_len;
    if (n <= 1) return NULL;
    float *all = malloc((size_t)(L ? L : 1) * (size_t)n * sizeof(float));
    if (!all) mc_fatal("out of host memory saving the distributed optimizer state");
    mc_all_gather(t->comm, g, mine, all, (size_t)L, MC_DT_F32);
    return all;
}

/* One Adam state vector of every dp rank (packed shards, bucket after bucket; the experts'
 * buckets sharded over edp) as a vector over this rank's training buffer, on the ranks that
 * write sel (NULL on the others): all-gathers (the comm layer has no gather), skipped at 1. */
static float *gather_state(mc_trainer_t *t, const float *dev, mc_ckpt_sel_t sel)
{
    const mc_ddp_t *d = &t->ddp;
    const mc_grad_layout_t *l = &d->layout;
    const long L = t->opt.state_len;
    float *mine = host_copy(t->model.be, dev, L);
    float *all = gather_over(t, d->dp_group, d->dp, mine);
    bool experts = false;
    for (int b = 0; b < l->n_buckets; b++) experts |= l->buckets[b].expert;
    float *eall = experts ? gather_over(t, d->edp_group, d->edp, mine) : NULL;
    float *full = NULL;
    if (writes(d, sel) &&
        !(full = calloc((size_t)(t->model.n_elems ? t->model.n_elems : 1), sizeof(float))))
        mc_fatal("out of host memory saving the distributed optimizer state");
    long packed = 0; /* bucket b's offset in a rank's packed shards */
    for (int b = 0; full && b < l->n_buckets; b++) {
        const mc_bucket_t *bk = &l->buckets[b];
        const int n = bk->expert ? d->edp : d->dp;
        const float *from = n <= 1 ? mine : bk->expert ? eall : all;
        const long shard = (bk->end - bk->start) / n;
        for (int r = 0; r < n; r++)
            memcpy(full + bk->start + r * shard, from + (size_t)r * (size_t)L + packed,
                   (size_t)shard * sizeof(float));
        packed += shard;
    }
    free(mine);
    free(all);
    free(eall);
    return full;
}

void mc_ckpt_buffer_dtypes(const mc_args_t *a, const char **param, const char **grad)
{
    *param = a->bf16 ? "bfloat16" : a->fp16 ? "float16" : "float32";
    *grad = (a->bf16 || a->fp16) && !a->accumulate_allreduce_grads_in_fp32 ? *param : "float32";
}

mc_pyobj_t *mc_ckpt_buffer_dtype_key(const mc_args_t *a)
{
    const char *param, *grad;
    mc_ckpt_buffer_dtypes(a, &param, &grad);
    return mc_py_tuple(2, mc_py_global("torch", param), mc_py_global("torch", grad));
}

/* [{key: [v...]}, ...]: a per-bucket list of every chunk's buffer. */
static mc_pyobj_t *per_bucket(const mc_args_t *a, const mc_ckpt_buffers_t *b, bool unpadded)
{
    mc_pyobj_t *out = mc_py_list();
    int rc = out ? 0 : -1;
    for (int c = 0; c < b->n_chunks; c++) {
        mc_pyobj_t *list = mc_py_list(), *by_dtype = mc_py_dict();
        for (int k = 0; k < b->l[c].n_buckets; k++) {
            const mc_bucket_t *bk = &b->l[c].buckets[k];
            rc |= mc_py_list_append(list,
                                    mc_py_int(unpadded ? bk->numel_unpadded : bk->end - bk->start));
        }
        rc |= mc_py_dict_set(by_dtype, mc_ckpt_buffer_dtype_key(a), list);
        rc |= mc_py_list_append(out, by_dtype);
    }
    if (rc) {
        mc_py_decref(out);
        return NULL;
    }
    return out;
}

mc_pyobj_t *mc_ckpt_distopt_gather(mc_trainer_t *t, const mc_ckpt_order_t *o)
{
    return mc_ckpt_distopt_gather_of(t, o, MC_CKPT_ALL);
}

mc_pyobj_t *mc_ckpt_distopt_gather_of(mc_trainer_t *t, const mc_ckpt_order_t *o, mc_ckpt_sel_t sel)
{
    const mc_gpt_t *m = &t->model;
    /* one state vector at a time bounds the memory of the gather */
    float *src[3] = {NULL, gather_state(t, t->opt.exp_avg, sel), NULL};
    src[2] = gather_state(t, t->opt.exp_avg_sq, sel);
    /* a 16-bit model's fp32 masters are sharded like the moments */
    if (t->opt.master) src[0] = gather_state(t, t->opt.master, sel);
    if (!writes(&t->ddp, sel)) return NULL;
    /* fp32 parameters: every rank holds all of them after the parameter gather */
    if (!src[0]) src[0] = host_copy(m->be, m->param_buf, m->n_elems);
    mc_ckpt_buffers_t b;
    mc_ckpt_buffers_of(t, o, sel, &b);
    mc_pyobj_t *out = mc_py_dict();
    int rc = out ? 0 : -1;
    rc |= mc_py_dict_set_str(out, "buckets_coalesced", mc_py_bool(true));
    for (int c = 0; c < b.n_chunks && !rc; c++) {
        const int64_t shape[1] = {b.unpadded[c]};
        mc_pyobj_t *state = mc_py_dict(), *by_dtype = mc_py_dict();
        rc |= state && by_dtype ? 0 : -1;
        for (int k = 0; k < 3 && !rc; k++) {
            mc_pyobj_t *w = mc_py_tensor_new(MC_TORCH_FLOAT32, 1, shape);
            if (!w) {
                rc = -1;
                break;
            }
            float *world = mc_py_tensor_data(w);
            for (int i = 0; i < m->n_params; i++)
                if (b.chunk[i] == c)
                    memcpy(world + b.pos[i], src[k] + m->params[i].offset,
                           (size_t)m->params[i].numel * sizeof(float));
            rc |= mc_py_dict_set_str(state, mc_ckpt_state_keys[k], w);
        }
        rc |= mc_py_dict_set_str(state, "numel_unpadded", mc_py_int(b.unpadded[c]));
        rc |= mc_py_dict_set(by_dtype, mc_ckpt_buffer_dtype_key(t->args), state);
        rc |= mc_py_dict_set_int(out, c, by_dtype);
    }
    rc |= mc_py_dict_set_str(out, "per_bucket_numel", per_bucket(t->args, &b, false));
    rc |= mc_py_dict_set_str(out, "per_bucket_numel_unpadded", per_bucket(t->args, &b, true));
    for (int k = 0; k < 3; k++) free(src[k]);
    mc_ckpt_buffers_free(&b);
    if (rc) mc_fatal("out of host memory saving the distributed optimizer state");
    return out;
}

/* The only value of a one-entry dict (the dtype key of a buffer), or NULL. */
static const mc_pyobj_t *only_value(const mc_pyobj_t *d)
{
    return d && d->kind == MC_PY_DICT && d->dict.len == 1 ? d->dict.vals[0] : NULL;
}

const mc_pyobj_t *mc_ckpt_distopt_world(const mc_pyobj_t *d, int c, int k)
{
    return mc_py_dict_get_str(only_value(mc_py_dict_get_int(d, c)), mc_ckpt_state_keys[k]);
}

/* Buffer c of the file against this run's: its size, and its buckets when the file lists them. */
static int check_buffer(const mc_pyobj_t *d, const mc_ckpt_buffers_t *b, int c,
                        const mc_pyobj_t **state, char *err, size_t n)
{
    const mc_pyobj_t *entry = mc_py_dict_get_int(d, c);
    *state = only_value(entry);
    if (!*state || (*state)->kind != MC_PY_DICT)
        return mc_errf(err, n,
                       "has no buffer %d with one parameter type (%d model chunks expected; "
                       "not a distributed-optimizer state of the dp_zero_gather_scatter kind)",
                       c, b->n_chunks);
    if (mc_py_dict_get_str(d, "buckets_coalesced") == NULL &&
        mc_py_len(mc_py_dict_get_str(*state, "param")) > 0)
        return mc_errf(
            err, n,
            "holds per-bucket tensors (Megatron's format before February 2024), "
            "which megatron-c does not read (re-save it with a newer Megatron-LM, or add "
            "--no-load-optim)");
    int64_t saved_u = -1;
    mc_py_get_int(mc_py_dict_get_str(*state, "numel_unpadded"), &saved_u);
    if (saved_u != b->unpadded[c])
        return mc_errf(
            err, n,
            "buffer %d holds %lld unpadded elements but this run's has %ld (saved "
            "with another model, pipeline layout, parameter order or gradient buckets: "
            "use the same --ddp-bucket-size / --ddp-num-buckets / --overlap-grad-reduce, or "
            "add --no-load-optim)",
            c, (long long)saved_u, b->unpadded[c]);
    const mc_pyobj_t *per =
        only_value(mc_py_item(mc_py_dict_get_str(d, "per_bucket_numel_unpadded"), (size_t)c));
    if (per) {
        const mc_grad_layout_t *l = &b->l[c];
        bool same = mc_py_len(per) == (size_t)l->n_buckets;
        for (int k = 0; same && k < l->n_buckets; k++) {
            int64_t v = -1;
            mc_py_get_int(mc_py_item(per, (size_t)k), &v);
            same = v == l->buckets[k].numel_unpadded;
        }
        if (!same)
            return mc_errf(err, n,
                           "buffer %d was saved with other gradient buckets (%zu, this run has "
                           "%d): use the same --ddp-bucket-size / --ddp-num-buckets / "
                           "--overlap-grad-reduce, or add --no-load-optim",
                           c, mc_py_len(per), l->n_buckets);
    }
    for (int k = 0; k < 3; k++) {
        const mc_pyobj_t *w = mc_py_dict_get_str(*state, mc_ckpt_state_keys[k]);
        if (!w || w->kind != MC_PY_TENSOR || w->tensor.dtype != MC_TORCH_FLOAT32 ||
            w->tensor.ndim != 1 || w->tensor.shape[0] != b->unpadded[c] ||
            !mc_py_tensor_contiguous(w))
            return mc_errf(err, n, "buffer %d: '%s' is not a float32 vector of %ld elements", c,
                           mc_ckpt_state_keys[k], b->unpadded[c]);
    }
    return 0;
}

int mc_ckpt_distopt_load(mc_trainer_t *t, const mc_pyobj_t *d, const mc_ckpt_order_t *o, char *err,
                         size_t n)
{
    return mc_ckpt_distopt_load_of(t, d, o, MC_CKPT_ALL, err, n);
}

int mc_ckpt_distopt_load_of(mc_trainer_t *t, const mc_pyobj_t *d, const mc_ckpt_order_t *o,
                            mc_ckpt_sel_t sel, char *err, size_t n)
{
    const mc_gpt_t *m = &t->model;
    if (!d || d->kind != MC_PY_DICT) return mc_errf(err, n, "not a dict");
    mc_ckpt_buffers_t b;
    mc_ckpt_buffers_of(t, o, sel, &b);
    int rc = 0;
    if (mc_py_dict_get_int(d, b.n_chunks))
        rc = mc_errf(err, n,
                     "holds more gradient buffers than this run's %d model chunks (saved with "
                     "another virtual pipeline layout)",
                     b.n_chunks);
    const mc_pyobj_t *state[MC_MAX_CHUNKS];
    for (int c = 0; c < b.n_chunks && !rc; c++) rc = check_buffer(d, &b, c, &state[c], err, n);
    for (int c = 0; c < b.n_chunks && !rc; c++) {
        const float *world[3];
        for (int k = 0; k < 3; k++)
            world[k] = mc_py_tensor_data(mc_py_dict_get_str(state[c], mc_ckpt_state_keys[k]));
        /* fp32 training: every parameter's fp32 master is the model's weight, and ranks must agree
         * on all of them, not only their shards (a 16-bit model's weights came from the model
         * entry; its masters are sharded, below) */
        for (int i = 0; i < m->n_params && !t->opt.master; i++)
            if (b.chunk[i] == c)
                m->be->memcpy_h2d(m->be, mc_gpt_param_at(m, m->params[i].offset),
                                  world[0] + b.pos[i], (size_t)m->params[i].numel * sizeof(float));
        for (int s = 0; s < t->opt.n_segs; s++) {
            const mc_opt_seg_t *g = &t->opt.segs[s];
            if (b.chunk[g->param] != c) continue;
            const long at = b.pos[g->param] + (g->off - m->params[g->param].offset);
            m->be->memcpy_h2d(m->be, t->opt.exp_avg + g->state_off, world[1] + at,
                              (size_t)g->len * sizeof(float));
            m->be->memcpy_h2d(m->be, t->opt.exp_avg_sq + g->state_off, world[2] + at,
                              (size_t)g->len * sizeof(float));
            if (t->opt.master)
                m->be->memcpy_h2d(m->be, t->opt.master + g->state_off, world[0] + at,
                                  (size_t)g->len * sizeof(float));
        }
    }
    mc_ckpt_buffers_free(&b);
    return rc;
}
