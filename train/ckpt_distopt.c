/* distrib_optim.pt: the distributed optimizer's parameter state in Megatron's
 * get_parameter_state_dp_zero() layout (core/optimizer/distrib_optimizer.py):
 *
 *   {"buckets_coalesced": True,
 *    0: {(param dtype, grad dtype): {"param": [U], "exp_avg": [U], "exp_avg_sq": [U],
 *                                    "numel_unpadded": U}}}
 *
 * (e.g. (torch.float32, torch.float32) in fp32 training, (torch.bfloat16, torch.float32) with
 * --bf16); "param" holds the fp32 main params: the model's parameters in fp32 training, the
 * optimizer's master copies with a 16-bit model.
 *
 * where each tensor is the gradient buffer with every bucket's end padding removed: bucket b's
 * first numel_unpadded elements, bucket after bucket (the padding between parameters stays, as
 * zeros). Every dp rank's shards are gathered so dp rank 0 can write the world tensors; since
 * the unpadded buckets do not depend on dp, a checkpoint loads at another data-parallel size.
 *
 * Megatron keeps one buffer per model chunk (key 0, 1, ... with virtual pipeline stages);
 * megatron-c keeps one buffer per rank, so its files always have one. megatron-c also records
 * per_bucket_numel_unpadded (as Megatron's files before 2024 did) to check on load that the
 * buckets match. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/error.h"
#include "train/ckpt_state.h"

static const char *const k_keys[] = {"param", "exp_avg", "exp_avg_sq"};

/* Where bucket b starts in the world tensors, and their length. */
static long world_starts(const mc_grad_layout_t *l, long *start)
{
    long u = 0;
    for (int b = 0; b < l->n_buckets; b++) {
        start[b] = u;
        u += l->buckets[b].numel_unpadded;
    }
    return u;
}

static float *host_copy(const mc_backend_t *be, const float *dev, long count)
{
    float *h = malloc((size_t)(count ? count : 1) * sizeof(float));
    if (!h) mc_fatal("out of host memory saving the distributed optimizer state");
    be->memcpy_d2h(be, h, dev, (size_t)count * sizeof(float));
    return h;
}

/* Gathers one Adam state vector of every dp rank (packed shards, bucket after bucket; an
 * all-gather, the comm layer has no gather) and, on dp rank 0, writes its world tensor. */
static void gather_state(mc_trainer_t *t, const float *dev, const long *start, float *world)
{
    const mc_ddp_t *d = &t->ddp;
    const mc_grad_layout_t *l = &d->layout;
    const long L = t->opt.state_len;
    const int dp = d->dp;
    float *mine = host_copy(t->model.be, dev, L);
    float *all = malloc((size_t)(L ? L : 1) * (size_t)dp * sizeof(float));
    if (!all) mc_fatal("out of host memory saving the distributed optimizer state");
    mc_all_gather(t->comm, d->dp_group, mine, all, (size_t)L, MC_DT_F32);
    free(mine);
    long packed = 0; /* bucket b's offset in a rank's packed shards */
    for (int b = 0; world && b < l->n_buckets; b++) {
        const mc_bucket_t *bk = &l->buckets[b];
        const long shard = (bk->end - bk->start) / dp, keep = bk->numel_unpadded;
        for (int r = 0; r < dp; r++) {
            long lo = r * shard, len = lo >= keep ? 0 : keep - lo < shard ? keep - lo : shard;
            memcpy(world + start[b] + lo, all + (size_t)r * (size_t)L + packed, (size_t)len * sizeof(float));
        }
        packed += shard;
    }
    free(all);
}

static const char *torch_name(mc_dtype_t dt)
{
    return dt == MC_DT_BF16 ? "bfloat16" : dt == MC_DT_F16 ? "float16" : "float32";
}

/* Megatron's key of a buffer's state: (param dtype, grad dtype). */
static mc_pyobj_t *dtype_key(const mc_gpt_t *m)
{
    return mc_py_tuple(2, mc_py_global("torch", torch_name(m->cfg.dt)),
                       mc_py_global("torch", torch_name(m->cfg.gdt)));
}

mc_pyobj_t *mc_ckpt_distopt_gather(mc_trainer_t *t)
{
    const mc_ddp_t *d = &t->ddp;
    const mc_grad_layout_t *l = &d->layout;
    const bool root = d->dp_rank == 0;
    long *start = malloc((size_t)(l->n_buckets + 1) * sizeof(long));
    if (!start) mc_fatal("out of host memory");
    const long U = world_starts(l, start);
    const int64_t shape[1] = {U};
    mc_pyobj_t *w[3] = {NULL, NULL, NULL};
    for (int k = 0; root && k < 3; k++)
        if (!(w[k] = mc_py_tensor_new(MC_TORCH_FLOAT32, 1, shape))) mc_fatal("out of host memory");
    /* one state vector at a time bounds the memory of the gather; the master params of a 16-bit
     * model are sharded like the moments */
    gather_state(t, t->opt.exp_avg, start, root ? mc_py_tensor_data(w[1]) : NULL);
    gather_state(t, t->opt.exp_avg_sq, start, root ? mc_py_tensor_data(w[2]) : NULL);
    if (t->opt.master) gather_state(t, t->opt.master, start, root ? mc_py_tensor_data(w[0]) : NULL);
    if (!root) {
        free(start);
        return NULL;
    }
    if (!t->opt.master) { /* fp32 parameters: every rank holds all of them after the gather */
        float *params = host_copy(t->model.be, t->model.param_buf, t->model.n_elems);
        for (int b = 0; b < l->n_buckets; b++)
            memcpy((float *)mc_py_tensor_data(w[0]) + start[b], params + l->buckets[b].start,
                   (size_t)l->buckets[b].numel_unpadded * sizeof(float));
        free(params);
    }
    free(start);

    mc_pyobj_t *state = mc_py_dict(), *per_bucket = mc_py_list(), *by_dtype = mc_py_dict();
    mc_pyobj_t *per_bucket_by_dtype = mc_py_dict(), *buffers = mc_py_list(), *out = mc_py_dict();
    int rc = state && per_bucket && by_dtype && per_bucket_by_dtype && buffers && out ? 0 : -1;
    for (int k = 0; k < 3; k++) rc |= mc_py_dict_set_str(state, k_keys[k], w[k]);
    rc |= mc_py_dict_set_str(state, "numel_unpadded", mc_py_int(U));
    rc |= mc_py_dict_set(by_dtype, dtype_key(&t->model), state);
    for (int b = 0; b < l->n_buckets; b++)
        rc |= mc_py_list_append(per_bucket, mc_py_int(l->buckets[b].numel_unpadded));
    rc |= mc_py_dict_set(per_bucket_by_dtype, dtype_key(&t->model), per_bucket);
    rc |= mc_py_list_append(buffers, per_bucket_by_dtype);
    rc |= mc_py_dict_set_str(out, "buckets_coalesced", mc_py_bool(true));
    rc |= mc_py_dict_set_int(out, 0, by_dtype);
    rc |= mc_py_dict_set_str(out, "per_bucket_numel_unpadded", buffers);
    if (rc) mc_fatal("out of host memory saving the distributed optimizer state");
    return out;
}

/* The only value of a one-entry dict (the dtype key of a buffer), or NULL. */
static const mc_pyobj_t *only_value(const mc_pyobj_t *d)
{
    return d && d->kind == MC_PY_DICT && d->dict.len == 1 ? d->dict.vals[0] : NULL;
}

int mc_ckpt_distopt_load(mc_trainer_t *t, const mc_pyobj_t *d, char *err, size_t n)
{
    const mc_grad_layout_t *l = &t->ddp.layout;
    if (!d || d->kind != MC_PY_DICT) return mc_errf(err, n, "not a dict");
    if (mc_py_dict_get_int(d, 1))
        return mc_errf(err, n, "holds several gradient buffers (Megatron's one per model chunk "
                       "with virtual pipeline stages); megatron-c keeps one per rank and cannot "
                       "read it yet (add --no-load-optim)");
    const mc_pyobj_t *state = only_value(mc_py_dict_get_int(d, 0));
    if (!state || state->kind != MC_PY_DICT)
        return mc_errf(err, n, "has no buffer 0 with one parameter type (not a distributed-optimizer "
                       "state of the dp_zero_gather_scatter kind)");
    long *start = malloc((size_t)(l->n_buckets + 1) * sizeof(long));
    if (!start) return mc_errf(err, n, "out of host memory");
    const long U = world_starts(l, start);
    int64_t saved_u = -1;
    mc_py_get_int(mc_py_dict_get_str(state, "numel_unpadded"), &saved_u);
    int rc = 0;
    if (saved_u != U)
        rc = mc_errf(err, n, "holds %lld unpadded elements but this run's buffer has %ld (saved with "
                     "another model or pipeline layout)", (long long)saved_u, U);
    const mc_pyobj_t *per = only_value(mc_py_item(mc_py_dict_get_str(d, "per_bucket_numel_unpadded"), 0));
    if (!rc && per) {
        bool same = mc_py_len(per) == (size_t)l->n_buckets;
        for (int b = 0; same && b < l->n_buckets; b++) {
            int64_t v = -1;
            mc_py_get_int(mc_py_item(per, (size_t)b), &v);
            same = v == l->buckets[b].numel_unpadded;
        }
        if (!same)
            rc = mc_errf(err, n, "was saved with other gradient buckets (%zu, this run has %d): use "
                         "the same --ddp-bucket-size / --ddp-num-buckets / --overlap-grad-reduce, or "
                         "add --no-load-optim", mc_py_len(per), l->n_buckets);
    }
    float *dst[3] = {t->opt.master, t->opt.exp_avg, t->opt.exp_avg_sq};
    for (int k = 0; k < 3 && !rc; k++) {
        const mc_pyobj_t *w = mc_py_dict_get_str(state, k_keys[k]);
        char what[64];
        snprintf(what, sizeof(what), "'%s'", k_keys[k]);
        /* check the whole tensor once, then copy this rank's segments out of it */
        if (!w || w->kind != MC_PY_TENSOR || w->tensor.dtype != MC_TORCH_FLOAT32 ||
            w->tensor.ndim != 1 || w->tensor.shape[0] != U || !mc_py_tensor_contiguous(w)) {
            rc = mc_errf(err, n, "%s is not a float32 vector of %ld elements", what, U);
            break;
        }
        const float *src = mc_py_tensor_data(w);
        for (int s = 0; s < t->opt.n_segs; s++) {
            const mc_opt_seg_t *g = &t->opt.segs[s];
            const mc_bucket_t *bk = &l->buckets[l->param_bucket[g->param]];
            const long at = start[l->param_bucket[g->param]] + (g->off - bk->start);
            float *to = k == 0 ? mc_opt_param(&t->opt, g) : dst[k] + g->state_off;
            t->model.be->memcpy_h2d(t->model.be, to, src + at, (size_t)g->len * sizeof(float));
        }
    }
    free(start);
    return rc;
}
