/* Megatron's DDP buffer layout, bucketed gradient reduction and parameter gather (grads.h). */
#include "parallel/grads.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"

#define NOT_STARTED ((mc_req_t)-2)

static long round_up(long x, long m) { return (x + m - 1) / m * m; }
static long gcd_l(long a, long b) { return b ? gcd_l(b, a % b) : a; }
static long lcm_l(long a, long b) { return a / gcd_l(a, b) * b; }

long mc_ddp_bucket_size(const mc_ddp_config_t *c, long num_params)
{
    if (!c->overlap_grad_reduce) return 0;
    if (c->num_buckets > 0) return num_params / c->num_buckets;
    if (c->bucket_size > 0) return c->bucket_size;
    long by_dp = 1000000L * c->dp_cp_size;
    return by_dp > 40000000L ? by_dp : 40000000L;
}

typedef struct {
    mc_gpt_t *m;
    bool split_experts; /* expert buckets of their own */
    mc_grad_layout_t *out;
    int cap;
    long bucket_start, end_divisor;
    long expert_divisor; /* the expert buckets' (the distributed optimizer shards them over edp) */
    int param_hi;        /* table index one past the bucket's first (highest) parameter */
} builder_t;

/* Closes the bucket that ends at param_end (Megatron's _update_bucket_metadata) and returns its
 * padded end, where the next bucket starts. */
static long close_bucket(builder_t *b, long param_end, int param_lo)
{
    mc_grad_layout_t *o = b->out;
    if (o->n_buckets == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 8;
        o->buckets = realloc(o->buckets, (size_t)b->cap * sizeof(mc_bucket_t));
        if (!o->buckets) mc_fatal("out of host memory laying out gradient buckets");
    }
    const bool expert = b->split_experts && b->m->params[param_lo].expert >= 0;
    const long div = expert ? b->expert_divisor : b->end_divisor;
    long end = div > 1 ? round_up(param_end, div) : param_end;
    mc_bucket_t *bk = &o->buckets[o->n_buckets++];
    bk->start = b->bucket_start;
    bk->end = end;
    bk->numel_unpadded = param_end - b->bucket_start;
    bk->param_lo = param_lo;
    bk->param_hi = b->param_hi;
    bk->expert = expert;
    b->bucket_start = end;
    b->param_hi = param_lo;
    return end;
}

/* Whether table index i is the first parameter of a model chunk after the first. */
static bool chunk_start(const mc_gpt_t *m, int i)
{
    for (int c = 1; c < m->cfg.n_chunks; c++) {
        int first, n;
        mc_gpt_chunk_params(m, c, &first, &n);
        if (n > 0 && first == i) return true;
    }
    return false;
}

static void layout(mc_gpt_t *m, long bucket_size, int dp, bool dist_opt, bool pad_for_busbw,
                   bool split_chunks, mc_grad_layout_t *out)
{
    memset(out, 0, sizeof(*out));
    out->param_bucket = malloc((size_t)(m->n_params ? m->n_params : 1) * sizeof(int));
    if (!out->param_bucket) mc_fatal("out of host memory laying out gradient buckets");
    builder_t b = {
        .m = m, .split_experts = mc_moe_folded(&m->cfg), .out = out, .param_hi = m->n_params};
    /* expert buckets are sharded over edp = dp * tp / (etp * ep) */
    const long edp = b.split_experts ? mc_moe_edp(&m->cfg, dp) : dp;
    if (dist_opt) {
        b.end_divisor = pad_for_busbw ? lcm_l(lcm_l(dp, 128), 65536) : lcm_l(dp, 128);
        b.expert_divisor = pad_for_busbw ? lcm_l(lcm_l(edp, 128), 65536) : lcm_l(edp, 128);
    }
    /* Megatron pads parameter starts only for the distributed optimizer; megatron-c always keeps
     * 16-element alignment for vector kernels (64 is a multiple of it), which moves no bucket
     * boundary that matters for results. */
    const long align = dist_opt ? 64 : 16;
    long start = 0, end = 0;
    for (int i = m->n_params - 1; i >= 0; i--) {
        mc_param_t *p = &m->params[i];
        bool own_bucket = p->shared_embedding && dist_opt;
        /* expert parallelism: a change between expert and dense parameters ends the bucket */
        bool other_kind = b.split_experts && i + 1 < m->n_params &&
                          (p->expert >= 0) != (m->params[i + 1].expert >= 0);
        /* a bucket per model chunk: the next chunk's parameters end here */
        other_kind |= split_chunks && i + 1 < m->n_params && chunk_start(m, i + 1);
        start = round_up(start, align);
        if ((own_bucket || other_kind) && b.param_hi != i + 1)
            start = close_bucket(&b, start, i + 1);
        end = start + p->numel;
        p->offset = start;
        out->param_bucket[i] = out->n_buckets;
        if ((bucket_size > 0 && end - b.bucket_start >= bucket_size) || own_bucket)
            start = close_bucket(&b, end, i);
        else start = end;
    }
    if (b.param_hi > 0) end = close_bucket(&b, end, 0);
    else end = start;
    out->n_elems = round_up(end, 16);
    m->n_elems = out->n_elems;
}

void mc_grad_layout(mc_gpt_t *m, long bucket_size, int dp, bool dist_opt, bool pad_for_busbw,
                    mc_grad_layout_t *out)
{
    layout(m, bucket_size, dp, dist_opt, pad_for_busbw, false, out);
}

void mc_grad_layout_per_chunk(mc_gpt_t *m, int dp, bool dist_opt, bool pad_for_busbw,
                              mc_grad_layout_t *out)
{
    layout(m, 0, dp, dist_opt, pad_for_busbw, true, out);
}

void mc_grad_layout_free(mc_grad_layout_t *l)
{
    free(l->buckets);
    free(l->param_bucket);
    memset(l, 0, sizeof(*l));
}

void mc_bucket_shard(const mc_bucket_t *b, int dp, int dp_rank, long *lo, long *hi)
{
    long shard = (b->end - b->start) / dp;
    *lo = b->start + dp_rank * shard;
    *hi = *lo + shard;
}

bool mc_ddp_first_replica(const mc_ddp_t *d) { return d->dp_rank == 0 && d->inst_rank == 0; }

void mc_ddp_bucket_shard(const mc_ddp_t *d, int k, long *lo, long *hi)
{
    const mc_bucket_t *bk = &d->layout.buckets[k];
    if (bk->expert) mc_bucket_shard(bk, d->edp, d->edp_rank, lo, hi);
    else mc_bucket_shard(bk, d->dp, d->dp_rank, lo, hi);
}

/* ------------------------------------------------------------------ gradient sync */

static void start_bucket(mc_ddp_t *d, int k)
{
    const mc_bucket_t *bk = &d->layout.buckets[k];
    mc_gpt_t *m = d->model;
    const mc_dtype_t gdt = m->cfg.gdt;
    const long n = bk->end - bk->start;
    const float scale = bk->expert ? d->expert_grad_scale : d->grad_scale;
    if (scale != 1.0f) m->be->scale(m->be, gdt, mc_gpt_grad_at(m, bk->start), scale, n);
    if ((bk->expert ? d->edp : d->dp) * d->n_inst == 1) {
        d->grad_req[k] = MC_REQ_DONE;
        return;
    }
    /* in the gradient buffer's type: fp32 for bf16 (Megatron's grad_reduce_in_fp32), fp16 for
     * fp16 without --accumulate-allreduce-grads-in-fp32; averaged in the collective where the
     * communicator can (NCCL's ncclAvg), else summed and divided in mc_ddp_finish_grad_sync */
    mc_coll_t op = {.group = bk->expert ? d->edp_group : d->dp_group,
                    .dt = gdt,
                    .op = d->average_in_collective && d->comm->has_avg ? MC_OP_AVG : MC_OP_SUM};
    if (d->dist_opt) {
        long lo, hi;
        mc_ddp_bucket_shard(d, k, &lo, &hi);
        op.kind = MC_COLL_REDUCE_SCATTER;
        op.send = mc_gpt_grad_at(m, bk->start);
        op.recv = mc_gpt_grad_at(m, lo);
        op.count = (size_t)(hi - lo);
        d->grad_req[k] = op.group->size > 1 ? d->comm->start(d->comm, &op) : MC_REQ_DONE;
        /* several instances: the shard reduced within this instance is all-reduced across them
         * (Megatron's inter-instance all-reduce); the communicator runs it after the
         * reduce-scatter, in order */
        mc_group_t *inter = bk->expert ? d->inter_edp_group : d->inter_group;
        if (inter) {
            op = (mc_coll_t){.kind = MC_COLL_ALL_REDUCE,
                             .group = inter,
                             .recv = mc_gpt_grad_at(m, lo),
                             .count = (size_t)(hi - lo),
                             .dt = gdt,
                             .op = op.op};
            d->grad_req[k] = d->comm->start(d->comm, &op);
        }
        return;
    }
    op.kind = MC_COLL_ALL_REDUCE;
    op.recv = mc_gpt_grad_at(m, bk->start);
    op.count = (size_t)n;
    d->grad_req[k] = d->comm->start(d->comm, &op);
}

static void on_grads_final(void *ctx, int first, int n)
{
    mc_ddp_t *d = ctx;
    if (!d->grad_armed || !d->overlap_grad) return;
    for (int i = first; i < first + n; i++) {
        if (!d->param_armed_for_sync[i]) continue; /* not this parameter's last backward */
        int k = d->layout.param_bucket[i];
        if (--d->pending[k] == 0) start_bucket(d, k);
        else if (d->pending[k] < 0)
            mc_fatal("internal error: gradient of parameter %s reported final twice",
                     d->model->params[i].name);
    }
}

void mc_ddp_begin_grad_sync(mc_ddp_t *d)
{
    for (int k = 0; k < d->layout.n_buckets; k++) {
        const mc_bucket_t *bk = &d->layout.buckets[k];
        d->pending[k] = bk->param_hi - bk->param_lo;
        d->grad_req[k] = NOT_STARTED;
    }
    memset(d->param_armed_for_sync, 0, (size_t)d->model->n_params * sizeof(bool));
    d->grad_armed = true;
}

void mc_ddp_arm_grad_sync_params(mc_ddp_t *d, int first, int n)
{
    if (!d->grad_armed) mc_ddp_begin_grad_sync(d);
    for (int i = first; i < first + n; i++) d->param_armed_for_sync[i] = true;
}

void mc_ddp_arm_grad_sync(mc_ddp_t *d)
{
    mc_ddp_begin_grad_sync(d);
    mc_ddp_arm_grad_sync_params(d, 0, d->model->n_params);
}

void mc_ddp_finish_grad_sync(mc_ddp_t *d)
{
    if (!d->grad_armed) mc_ddp_arm_grad_sync(d);
    for (int k = 0; k < d->layout.n_buckets; k++)
        if (d->grad_req[k] == NOT_STARTED) start_bucket(d, k);
    for (int k = 0; k < d->layout.n_buckets; k++)
        if (d->grad_req[k] != MC_REQ_DONE) d->comm->wait(d->comm, d->grad_req[k]);
    if (d->average_in_collective && !d->comm->has_avg) {
        /* NCCL's AVG divides the sum; MPI has no such op, so the sum is divided here */
        mc_gpt_t *m = d->model;
        for (int k = 0; k < d->layout.n_buckets; k++) {
            const mc_bucket_t *bk = &d->layout.buckets[k];
            const int size = (bk->expert ? d->edp : d->dp) * d->n_inst;
            if (size == 1) continue;
            long lo = bk->start, hi = bk->end;
            if (d->dist_opt) mc_ddp_bucket_shard(d, k, &lo, &hi);
            m->be->scale(m->be, m->cfg.gdt, mc_gpt_grad_at(m, lo), 1.0f / (float)size, hi - lo);
        }
    }
    d->grad_armed = false;
}

/* ------------------------------------------------------------------ parameter gather */

static void wait_param_bucket(mc_ddp_t *d, int k)
{
    if (d->param_req[k] == MC_REQ_DONE) return;
    d->comm->wait(d->comm, d->param_req[k]);
    d->param_req[k] = MC_REQ_DONE;
}

static void on_params_needed(void *ctx, int first, int n)
{
    mc_ddp_t *d = ctx;
    if (!d->param_armed) return;
    for (int i = first; i < first + n; i++) wait_param_bucket(d, d->layout.param_bucket[i]);
}

static void start_param_bucket(mc_ddp_t *d, int k)
{
    mc_gpt_t *m = d->model;
    const mc_bucket_t *bk = &d->layout.buckets[k];
    d->param_early[k] = false;
    if ((bk->expert ? d->edp : d->dp) == 1) {
        d->param_req[k] = MC_REQ_DONE;
        return;
    }
    long lo, hi;
    mc_ddp_bucket_shard(d, k, &lo, &hi);
    /* the model's parameters, 16-bit in mixed precision (the master copies stay sharded) */
    mc_coll_t op = {.kind = MC_COLL_ALL_GATHER,
                    .group = bk->expert ? d->edp_group : d->dp_group,
                    .send = mc_gpt_param_at(m, lo),
                    .recv = mc_gpt_param_at(m, bk->start),
                    .count = (size_t)(hi - lo),
                    .dt = m->cfg.dt};
    d->param_req[k] = d->comm->start(d->comm, &op);
}

/* Whether the distributed optimizer's shards need gathering: dp > 1, or edp > 1 (experts without
 * etp on tp ranks of one dp rank). */
static bool gathers(const mc_ddp_t *d) { return d->dist_opt && (d->dp > 1 || d->edp > 1); }

void mc_ddp_start_param_gather_of(mc_ddp_t *d, int first, int n)
{
    if (!gathers(d)) return;
    for (int k = d->layout.n_buckets - 1; k >= 0; k--) {
        const mc_bucket_t *bk = &d->layout.buckets[k];
        if (bk->param_lo < first || bk->param_hi > first + n) continue;
        start_param_bucket(d, k);
        d->param_early[k] = true;
    }
    d->param_armed = true;
}

void mc_ddp_start_param_gather(mc_ddp_t *d)
{
    if (!gathers(d)) return;
    /* The forward reads the last bucket (embeddings) first: gather in that order, so that the
     * in-order completion of the communicator delivers buckets as the forward needs them. */
    for (int k = d->layout.n_buckets - 1; k >= 0; k--)
        if (d->param_early[k]) d->param_early[k] = false;
        else start_param_bucket(d, k);
    d->param_armed = true;
    if (!d->overlap_param) mc_ddp_finish_param_gather(d);
}

void mc_ddp_finish_param_gather(mc_ddp_t *d)
{
    if (!d->param_armed) return;
    for (int k = d->layout.n_buckets - 1; k >= 0; k--) wait_param_bucket(d, k);
    d->param_armed = false;
}

/* ------------------------------------------------------------------ set-up */

void mc_ddp_plan(mc_ddp_t *d, mc_gpt_t *m, const mc_ddp_config_t *c, int dp, int dp_rank)
{
    memset(d, 0, sizeof(*d));
    d->model = m;
    d->dp = dp;
    d->dp_rank = dp_rank;
    d->dist_opt = c->use_distributed_optimizer;
    d->overlap_grad = c->overlap_grad_reduce;
    d->overlap_param = c->overlap_param_gather;
    /* Megatron's gradient_scaling_factor: 1/dp before a SUM, or 1 with an averaging collective
     * (--ddp-average-in-collective) or --calculate-per-token-loss */
    d->average_in_collective = c->average_in_collective;
    /* dp is an instance's size with several distributed optimizer instances: the average is
     * over all of them */
    d->n_inst = c->num_instances > 1 ? c->num_instances : 1;
    d->grad_scale = c->calculate_per_token_loss || d->average_in_collective
                        ? 1.0f
                        : 1.0f / (float)(dp * d->n_inst);
    d->edp = dp; /* until mc_ddp_bind_experts */
    d->edp_rank = dp_rank;
    d->expert_grad_scale = d->grad_scale;
    d->expert_scale_edp = d->average_in_collective && !c->calculate_per_token_loss;
    long num_params = 0;
    for (int i = 0; i < m->n_params; i++) num_params += m->params[i].numel;
    if (c->overlap_param_gather_with_optimizer_step)
        mc_grad_layout_per_chunk(m, dp, d->dist_opt, c->pad_buckets_for_high_nccl_busbw,
                                 &d->layout);
    else
        mc_grad_layout(m, mc_ddp_bucket_size(c, num_params), dp, d->dist_opt,
                       c->pad_buckets_for_high_nccl_busbw, &d->layout);
    const size_t nb = (size_t)d->layout.n_buckets;
    d->pending = calloc(nb, sizeof(int));
    d->grad_req = calloc(nb, sizeof(mc_req_t));
    d->param_req = calloc(nb, sizeof(mc_req_t));
    d->param_early = calloc(nb ? nb : 1, sizeof(bool));
    d->param_armed_for_sync = calloc((size_t)(m->n_params ? m->n_params : 1), sizeof(bool));
    if (!d->pending || !d->grad_req || !d->param_req || !d->param_armed_for_sync || !d->param_early)
        mc_fatal("out of host memory");
}

void mc_ddp_bind(mc_ddp_t *d, mc_comm_t *comm, mc_group_t *dp_group, mc_group_t *inter_group)
{
    d->comm = comm;
    d->dp_group = dp_group;
    if (d->n_inst > 1 && (!inter_group || inter_group->size != d->n_inst || !d->dist_opt))
        mc_fatal("internal error: %d distributed optimizer instances without their group",
                 d->n_inst);
    d->inter_group = d->n_inst > 1 ? inter_group : NULL;
    d->inst_rank = d->inter_group ? d->inter_group->rank : 0;
    d->model->grads_final_hook = on_grads_final;
    d->model->params_needed_hook = on_params_needed;
    d->model->hook_ctx = d;
}

void mc_ddp_bind_experts(mc_ddp_t *d, mc_group_t *edp_group, mc_group_t *inter_edp_group)
{
    bool any = false;
    for (int k = 0; k < d->layout.n_buckets; k++) any |= d->layout.buckets[k].expert;
    if (!any) return;
    if (!edp_group)
        mc_fatal("internal error: expert buckets without an expert-data-parallel group");
    d->edp_group = edp_group;
    d->edp = edp_group->size;
    d->edp_rank = edp_group->rank;
    if (d->n_inst > 1 && (!inter_edp_group || inter_edp_group->size != d->n_inst))
        mc_fatal("internal error: %d distributed optimizer instances without the experts' group",
                 d->n_inst);
    d->inter_edp_group = d->n_inst > 1 ? inter_edp_group : NULL;
    if (d->edp != mc_moe_edp(&d->model->cfg, d->dp))
        mc_fatal("internal error: the expert-data-parallel group has %d ranks, the buckets were "
                 "laid out for %d",
                 d->edp, mc_moe_edp(&d->model->cfg, d->dp));
    /* Megatron's expert_gradient_scaling_factor: the collective averages over edp only */
    if (d->expert_scale_edp) d->expert_grad_scale = (float)d->edp / (float)d->dp;
}

void mc_ddp_free(mc_ddp_t *d)
{
    if (d->model && d->model->hook_ctx == d) {
        d->model->grads_final_hook = NULL;
        d->model->params_needed_hook = NULL;
        d->model->hook_ctx = NULL;
    }
    mc_grad_layout_free(&d->layout);
    free(d->pending);
    free(d->param_armed_for_sync);
    free(d->grad_req);
    free(d->param_req);
    free(d->param_early);
    memset(d, 0, sizeof(*d));
}
