/* The time model of `megatron-c plan` (plan/plan.h): one microbatch through each pipeline
 * stage, from the layer's GEMMs, memory-bound ops and tensor-parallel collectives, then the
 * schedule, the data-parallel reduction and the optimizer step. */
#include "plan/plan.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "kernels/attention_choice.h"
#include "model/gpt.h"
#include "parallel/pipeline.h"
#include "model/flops.h"

/* The sizes of one microbatch on one GPU. */
typedef struct {
    const mc_gpu_t *g;
    mc_plan_attention_t attn;
    bool flash;            /* the scores never written: cuDNN's or the project's fused attention */
    double e;              /* bytes per activation value */
    double b, s, h, M, Ml; /* M = b*s rows; Ml: the sequence-local rows (M/t with sp) */
    double s_full;         /* the whole sequence; s is this rank's share of it (s_full / cp) */
    double nh, hd, A, Q;   /* this GPU's heads; head size; attention and qkv widths (all heads) */
    double F, fc1, V;      /* ffn, linear_fc1's width (2F with swiglu), padded vocabulary */
    int t;
    bool sp, swiglu, rms;
} dims_t;

double mc_plan_gemm_seconds(const mc_gpu_t *g, double batch, double M, double N, double K, double e,
                            double *eff)
{
    if (M <= 0 || N <= 0 || K <= 0 || batch <= 0) return 0;
    const double tiles = ceil(M / 256) * ceil(N / 128) * batch;
    const double wave = tiles / (ceil(tiles / g->sms) * g->sms);
    const double flops = 2 * M * N * K * batch;
    const double core = flops / (g->peak_tflops * 1e12 * g->gemm_ceiling * wave);
    const double mem =
        (M * K + K * N + M * N) * batch * e / (g->hbm_gbps * 1e9 * MC_PLAN_HBM_FRACTION);
    const double s = core > mem ? core : mem;
    if (eff) *eff = flops / s / (g->peak_tflops * 1e12);
    return s;
}

static double mem_s(const mc_gpu_t *g, double bytes)
{
    return bytes / (g->hbm_gbps * 1e9 * MC_PLAN_HBM_FRACTION);
}

double mc_plan_ring_seconds(double sent, int steps, double gbps)
{
    return sent / (gbps * 1e9 * MC_PLAN_LINK_FRACTION) + steps * MC_PLAN_STEP_LATENCY_S;
}

/* A ring collective over n ranks moving `sent` bytes per rank in `steps` steps. */
static double ring_s(double sent, int steps, double gbps)
{
    return mc_plan_ring_seconds(sent, steps, gbps);
}

const char *const mc_plan_layer_gemm_names[MC_PLAN_LAYER_GEMMS] = {"linear_qkv", "linear_proj",
                                                                   "linear_fc1", "linear_fc2"};

void mc_plan_layer_gemms(const mc_args_t *a, double shapes[MC_PLAN_LAYER_GEMMS][3])
{
    const double t = a->tensor_model_parallel_size, h = a->hidden_size;
    const double M = (double)a->micro_batch_size * a->seq_length / a->context_parallel_size;
    const double hd = a->kv_channels;
    const double Q = (a->num_attention_heads + 2.0 * a->num_query_groups) * hd;
    const double A = a->num_attention_heads * hd, F = a->ffn_hidden_size;
    const double fc1 = a->swiglu ? 2 * F : F;
    const double rows[MC_PLAN_LAYER_GEMMS][3] = {
        {M, Q / t, h}, {M, h, A / t}, {M, fc1 / t, h}, {M, h, F / t}};
    memcpy(shapes, rows, sizeof(rows));
}

/* Forward of one layer's GEMMs on this GPU. */
static double layer_gemms_f(const mc_args_t *a, const dims_t *d)
{
    double sh[MC_PLAN_LAYER_GEMMS][3], s = 0;
    mc_plan_layer_gemms(a, sh);
    for (int i = 0; i < MC_PLAN_LAYER_GEMMS; i++)
        s += mc_plan_gemm_seconds(d->g, 1, sh[i][0], sh[i][1], sh[i][2], d->e, NULL);
    return s;
}

void mc_plan_attention(const mc_args_t *a, const mc_cluster_t *cl, mc_plan_attention_t *out)
{
    const mc_gpu_t *g = &cl->gpu;
    mc_attn_kernel_t kind = cl->attn;
    char why[256] = "";
    if (kind == MC_ATTN_AUTO) {
        mc_attention_spec_t s;
        mc_attention_spec_from_args(a, &s);
        const char *no = mc_attention_cudnn_refusal(&s, g->cc_major, why, sizeof(why));
        /* context parallelism: every comm type's attention runs on cuDNN (p2p's and all_gather's
         * blocks, a2a's whole sequence) but with attention dropout, whose masks the project's
         * kernels key by global positions (kernels/cuda/attention_select.cu) */
        if (!no && s.cp > 1 && s.dropout > 0) {
            snprintf(why, sizeof(why),
                     "context parallelism with attention dropout %g (masks keyed by global "
                     "positions)",
                     (double)s.dropout);
            no = why;
        }
        kind = no ? MC_ATTN_KERNELS : MC_ATTN_CUDNN;
    }
    memset(out, 0, sizeof(*out));
    out->kind = kind;
    if (kind == MC_ATTN_CUDNN) {
        out->fwd_tflops = g->cudnn_fwd_tflops, out->bwd_tflops = g->cudnn_bwd_tflops;
        snprintf(out->what, sizeof(out->what),
                 "cuDNN's fused flash attention, %.0f/%.0f TFLOP/s (%s)", out->fwd_tflops,
                 out->bwd_tflops, g->cudnn_source);
    } else if (kind == MC_ATTN_KERNELS) {
        out->fwd_tflops = g->kernels_fwd_tflops, out->bwd_tflops = g->kernels_bwd_tflops;
        snprintf(out->what, sizeof(out->what), "the project's kernels, %.0f/%.0f TFLOP/s (%s)%s%s",
                 out->fwd_tflops, out->bwd_tflops, g->kernels_source, why[0] ? ": " : "", why);
    } else {
        snprintf(out->what, sizeof(out->what),
                 "materialised [s, s] scores: batched GEMMs and softmax passes over memory");
    }
}

/* Core attention of one layer: forward, backward. Materialised: two batched GEMMs over the full
 * [s, s] scores plus the softmax and dropout passes over them (4 forward, 6 backward); fused
 * (cuDNN or the project's kernels): the causal half of the scores at the implementation's
 * forward and backward rates (plan/hw.c), the backward 2.5 times the forward's work (5 matmuls
 * against 2). */
static void core_attention(const dims_t *d, double *f, double *bwd)
{
    const mc_gpu_t *g = d->g;
    const double heads = d->b * d->nh;
    if (d->flash) { /* with cp, s queries against the causal half of s_full keys on average */
        const double flops = 4 * heads * d->s * d->s_full * d->hd * 0.5;
        *f = flops / (d->attn.fwd_tflops * 1e12);
        *bwd = 2.5 * flops / (d->attn.bwd_tflops * 1e12);
        return;
    }
    const double scores = heads * d->s * d->s_full * d->e;
    const double qk = mc_plan_gemm_seconds(g, heads, d->s, d->s_full, d->hd, d->e, NULL);
    const double pv = mc_plan_gemm_seconds(g, heads, d->s, d->hd, d->s_full, d->e, NULL);
    *f = qk + pv + mem_s(g, 4 * scores);
    *bwd = 2 * (qk + pv) + mem_s(g, 6 * scores);
}

/* Bytes the memory-bound ops of one layer's forward move: two norms, two dropout + residual
 * adds (read two, write one, a byte mask), the activation, rotary embeddings. The backward
 * moves about twice as much. */
static double layer_elementwise_bytes(const dims_t *d)
{
    const double rows = d->Ml * d->h * d->e;
    const double norms = 2 * 2 * rows;
    const double residual = 2 * (3 * rows + d->Ml * d->h);
    const double act = (d->swiglu ? 3 : 2) * d->M * (d->F / d->t) * d->e;
    return norms + residual + act;
}

/* The output layer and the cross-entropy (logits in fp32): forward, backward. */
static void head_compute(const dims_t *d, double *f, double *bwd)
{
    const double V = d->V / d->t;
    const double gemm = mc_plan_gemm_seconds(d->g, 1, d->M, V, d->h, d->e, NULL);
    const double ce = mem_s(d->g, 2 * d->M * V * 4 + d->M * V * d->e);
    *f = gemm + ce;
    *bwd = 2 * gemm + ce;
}

static void dims_from(dims_t *d, const mc_args_t *a, const mc_cluster_t *cl)
{
    memset(d, 0, sizeof(*d));
    d->g = &cl->gpu;
    mc_plan_attention(a, cl, &d->attn);
    d->flash = d->attn.kind != MC_ATTN_MATERIALIZED;
    d->e = (a->fp16 || a->bf16) ? 2 : 4;
    d->t = a->tensor_model_parallel_size;
    d->sp = a->sequence_parallel && d->t > 1;
    d->b = a->micro_batch_size;
    d->s_full = a->seq_length;
    d->s = d->s_full / a->context_parallel_size;
    d->h = a->hidden_size;
    d->M = d->b * d->s;
    d->Ml = d->sp ? d->M / d->t : d->M;
    d->hd = a->kv_channels;
    d->nh = (double)a->num_attention_heads / d->t;
    d->A = a->num_attention_heads * d->hd;
    d->Q = (a->num_attention_heads + 2.0 * a->num_query_groups) * d->hd;
    d->F = a->ffn_hidden_size;
    d->swiglu = a->swiglu;
    d->fc1 = d->swiglu ? 2 * d->F : d->F;
    d->V = a->padded_vocab_size;
    d->rms = strcmp(a->normalization, "RMSNorm") == 0;
}

/* One microbatch through one stage: seconds of forward and backward work (recomputation in the
 * backward), tensor-parallel collectives and pipeline transfers, and the tp volume as the comm
 * layer counts it (per call the larger of input and output). */
typedef struct {
    double f, b, tp, pp;
    double attn; /* core attention's share of f + b */
    double tp_bytes, pp_bytes;
    int tp_calls;
    double cp, cp_exposed, cp_bytes; /* context parallelism's attention traffic */
    int cp_calls;
    double ep, ep_bytes; /* the MoE dispatcher's all-to-alls and etp collectives */
    int ep_calls;
} stage_t;

/* Context parallelism's traffic of the chunk's layers (rc of them recomputed, or every layer's
 * core attention with selective recomputation: their forward traffic again). */
static void chunk_cp(stage_t *st, const mc_args_t *a, const mc_cluster_t *cl,
                     const mc_chunk_cfg_t *ch, int rc, bool selective, double core_f, double core_b)
{
    for (int j = 0; j < ch->n_layers; j++) {
        mc_plan_cp_t c;
        mc_plan_cp_layer(a, cl, ch->first_layer + j, core_f, core_b, &c);
        const int fwd = 1 + (j < rc || selective ? 1 : 0);
        st->cp += fwd * c.fwd + c.bwd;
        st->cp_exposed += fwd * c.fwd_exposed + c.bwd_exposed;
        st->cp_bytes += fwd * c.fwd_bytes + c.bwd_bytes;
        st->cp_calls += fwd * c.fwd_calls + c.bwd_calls;
    }
}

/* n collectives of X bytes each over the tp group: all-reduces (ar) or gathers/scatters. */
static void tp_calls(stage_t *st, const dims_t *d, double n, double X, bool ar, double gbps)
{
    if (d->t < 2 || n <= 0) return;
    const double share = (double)(d->t - 1) / d->t;
    st->tp +=
        n * (ar ? ring_s(2 * share * X, 2 * (d->t - 1), gbps) : ring_s(share * X, d->t - 1, gbps));
    st->tp_bytes += n * X;
    st->tp_calls += (int)n;
}

/* The collectives of one layer: forward, backward, and the recomputed forward (rc); `share` 1,
 * or 1/2 for an MoE layer, whose attention's pair alone runs over tp (the experts' collectives
 * are the dispatcher's). */
static void layer_tp(stage_t *st, const mc_args_t *a, const dims_t *d, bool rc, double gbps,
                     double share)
{
    const double X = d->M * d->h * d->e;
    const double before = st->tp;
    if (d->sp) { /* an all-gather before and a reduce-scatter after each parallel pair; the
                  * backward re-gathers the column-parallel inputs for the weight gradients */
        tp_calls(st, d, share * (2 + 4 + (rc ? 2 : 0)), X, false, gbps);
        tp_calls(st, d, share * (2 + 2 + (rc ? 2 : 0)), X, false, gbps);
        /* the same calls and bytes; their time what the GEMMs leave exposed */
        if (a->tp_comm_overlap)
            st->tp = before + mc_plan_tp_overlap_layer(a, d->g, gbps, d->e, share, rc);
    } else {
        tp_calls(st, d, share * (4 + (rc ? 2 : 0)), X, true, gbps);
    }
}

/* The embedding (pre) and the output layer with the loss (post). */
static void ends_tp(stage_t *st, const dims_t *d, bool pre, bool post, double gbps)
{
    const double X = d->M * d->h * d->e;
    if (pre) tp_calls(st, d, d->sp ? 2 : 1, X, !d->sp, gbps);
    if (!post) return;
    if (d->sp) tp_calls(st, d, 3, X, false, gbps);
    else tp_calls(st, d, 1, X, true, gbps);
    /* the vocab-parallel cross-entropy's statistics: max, then sum-exp and the target logit */
    tp_calls(st, d, 1, d->M * 4, true, gbps);
    tp_calls(st, d, 1, 2 * d->M * 4, true, gbps);
}

/* Layers of a chunk of n layers whose forward is recomputed. */
static int recomputed_layers(const mc_args_t *a, int n)
{
    if (strcmp(a->recompute_granularity, "full") != 0) return 0;
    if (strcmp(a->recompute_method, "block") == 0)
        return a->recompute_num_layers < n ? a->recompute_num_layers : n;
    return n;
}

static double tp_gbps(const mc_args_t *a, const mc_cluster_t *cl)
{
    return a->tensor_model_parallel_size <= cl->gpus_per_node ? cl->gpu.intra_gbps
                                                              : cl->gpu.inter_gbps;
}

static bool moe_layer(const mc_gpt_config_t *cfg, int l)
{
    return cfg->moe.num_experts && l < MC_MOE_MAX_LAYERS && cfg->moe.layer[l];
}

/* The chunk's MoE layers: the router's and experts' GEMMs and the permutation in place of the
 * dense MLP's GEMMs (the backward twice the forward; selective recomputation's default modules
 * leave them out, full recomputation is refused with experts), the dispatcher's traffic,
 * forward and backward. */
static void stage_moe(stage_t *st, const mc_args_t *a, const mc_cluster_t *cl, const dims_t *d,
                      const mc_gpt_config_t *cfg, const mc_chunk_cfg_t *ch)
{
    int n = 0;
    for (int j = 0; j < ch->n_layers; j++) n += moe_layer(cfg, ch->first_layer + j);
    if (!n) return;
    double sh[MC_PLAN_LAYER_GEMMS][3];
    mc_plan_layer_gemms(a, sh);
    double mlp = 0;
    for (int i = 2; i < MC_PLAN_LAYER_GEMMS; i++) /* linear_fc1, linear_fc2 */
        mlp += mc_plan_gemm_seconds(d->g, 1, sh[i][0], sh[i][1], sh[i][2], d->e, NULL);
    mc_plan_moe_t m;
    mc_plan_moe_layer(a, cl, &m);
    st->f += n * (m.gemm_f + m.mem_f - mlp);
    st->b += n * 2 * (m.gemm_f + m.mem_f - mlp);
    const double comm = m.a2a_f + m.etp_f;
    st->ep += n * 2 * comm;
    st->ep_bytes += n * (2 * (m.a2a_bytes + m.etp_bytes) - m.map_bytes);
    st->ep_calls += n * (2 * (m.a2a_calls + m.etp_calls) - (m.map_bytes > 0));
}

static void stage_time(const mc_args_t *a, const dims_t *d, const mc_gpt_config_t *cfg,
                       const mc_cluster_t *cl, stage_t *st)
{
    memset(st, 0, sizeof(*st));
    double core_f, core_b, head_f, head_b;
    core_attention(d, &core_f, &core_b);
    const double ew = layer_elementwise_bytes(d);
    const double gemms = layer_gemms_f(a, d);
    const double lf = gemms + core_f + mem_s(d->g, ew);
    const double lb = 2 * gemms + core_b + mem_s(d->g, 2 * ew);
    const bool selective = strcmp(a->recompute_granularity, "selective") == 0;
    const double tgbps = tp_gbps(a, cl);
    /* Megatron's rank order (tp, dp, pp): stages meet on the network unless one node holds all */
    const double pgbps = cl->num_gpus > cl->gpus_per_node ? cl->gpu.inter_gbps : cl->gpu.intra_gbps;
    const double X_pp = (d->sp || cl->pp_scatter_gather ? d->M / d->t : d->M) * d->h * d->e;
    for (int c = 0; c < cfg->n_chunks; c++) {
        const mc_chunk_cfg_t *ch = &cfg->chunk[c];
        const int rc = recomputed_layers(a, ch->n_layers);
        st->f += ch->n_layers * lf;
        st->b += ch->n_layers * lb + rc * lf + (selective ? ch->n_layers * core_f : 0);
        st->attn +=
            ch->n_layers * (core_f + core_b) + (rc + (selective ? ch->n_layers : 0)) * core_f;
        for (int j = 0; j < ch->n_layers; j++)
            layer_tp(st, a, d, j < rc, tgbps, moe_layer(cfg, ch->first_layer + j) ? 0.5 : 1);
        stage_moe(st, a, cl, d, cfg, ch);
        chunk_cp(st, a, cl, ch, rc, selective, core_f, core_b);
        if (ch->pre) st->f += mem_s(d->g, 2 * d->M * d->h * d->e);
        if (ch->post) {
            head_compute(d, &head_f, &head_b);
            st->f += head_f;
            st->b += head_b;
        }
        ends_tp(st, d, ch->pre, ch->post, tgbps);
        /* p2p: receive the forward input and the backward gradient unless first, send them on
         * unless last */
        const int transfers = 2 * ((ch->pre ? 0 : 1) + (ch->post ? 0 : 1));
        st->pp += transfers * ring_s(X_pp, 1, pgbps);
        st->pp_bytes += transfers * X_pp;
    }
}

/* Per step: the sequence-parallel norms' and MoE routers' gradient sums over tp (a tensor
 * each). */
static void step_tp(const mc_args_t *a, const dims_t *d, const mc_gpt_config_t *cfg, double gsize,
                    double gbps, stage_t *st)
{
    if (!d->sp) return;
    const int tensors = d->rms ? 1 : 2;
    for (int c = 0; c < cfg->n_chunks; c++) {
        const mc_chunk_cfg_t *ch = &cfg->chunk[c];
        const int n = 2 * tensors * ch->n_layers + (ch->post ? tensors : 0);
        tp_calls(st, d, n, d->h * gsize, true, gbps);
        int routers = 0;
        for (int j = 0; j < ch->n_layers; j++) routers += moe_layer(cfg, ch->first_layer + j);
        tp_calls(st, d, routers, (double)a->num_experts * d->h * gsize, true, gbps);
    }
}

/* A gradient reduction over n ranks `stride` GPUs apart (and with dist the distributed
 * optimizer's parameter gather): --num-distributed-optimizer-instances n_inst shards over n /
 * n_inst ranks whose reduced shards are all-reduced across the instances. *shard: the elements
 * of the rank's optimizer step. */
typedef struct {
    double reduce, gather, bytes, shard;
} reduction_t;

static void reduce_over(const mc_cluster_t *cl, int n, int stride, int n_inst, bool dist,
                        double grads, double params, double elems, reduction_t *r)
{
    memset(r, 0, sizeof(*r));
    r->shard = elems;
    if (n <= 1 || grads <= 0) return;
    const double gbps = stride * n <= cl->gpus_per_node ? cl->gpu.intra_gbps : cl->gpu.inter_gbps;
    const int sh = dist ? n / n_inst : n;
    /* an instance's consecutive ranks may share a node where the whole group does not */
    const double sh_gbps =
        stride * sh <= cl->gpus_per_node ? cl->gpu.intra_gbps : cl->gpu.inter_gbps;
    const double share = (double)(n - 1) / n, sh_share = (double)(sh - 1) / sh;
    r->reduce = dist ? ring_s(sh_share * grads, sh - 1, sh_gbps)
                     : ring_s(2 * share * grads, 2 * (n - 1), gbps);
    if (dist && n_inst > 1)
        r->reduce += ring_s(2.0 * (n_inst - 1) / n_inst * grads / sh, 2 * (n_inst - 1), gbps);
    r->gather = dist ? ring_s(sh_share * params, sh - 1, sh_gbps) : 0;
    r->bytes = grads + (dist ? params : 0);
    r->shard = dist ? elems / sh : elems;
}

/* The data-parallel reduction, what of it the backward hides (--overlap-grad-reduce: bucket by
 * bucket during the last microbatch's backward; --overlap-param-gather: the distributed
 * optimizer's gather during the next forward), and the optimizer step. The experts' gradients
 * (MoE) reduce, and their optimizer shards, over the expert-data-parallel group instead. */
static void dp_and_optimizer(const mc_args_t *a, const mc_cluster_t *cl,
                             const mc_memory_plan_t *mem, const stage_t *slow, mc_plan_time_t *o)
{
    /* gradients are reduced, and the distributed optimizer sharded, over dp x cp */
    const int dp = a->data_parallel_size * a->context_parallel_size,
              t = a->tensor_model_parallel_size;
    const double esize = mc_dtype_size(mem->dt), gsize = mc_dtype_size(mem->gdt);
    const double elems = mem->params / esize;
    const bool dist = a->use_distributed_optimizer && dp > 1;
    const int n_inst = dist && a->num_distributed_optimizer_instances > 1
                           ? a->num_distributed_optimizer_instances
                           : 1;
    /* the experts of the memory plan's stage: E/ep of 1/etp each, over edp */
    const double x = mc_plan_rank_expert_params(a, mem->stage, NULL);
    const int edp = mc_plan_edp(a),
              ept = a->expert_model_parallel_size *
                    (a->expert_tensor_parallel_size > 1 ? a->expert_tensor_parallel_size : 1);
    reduction_t dense, expert;
    reduce_over(cl, dp, t, n_inst, dist, mem->grads - x * gsize, mem->params - x * esize, elems - x,
                &dense);
    reduce_over(cl, edp, ept, 1, a->use_distributed_optimizer && edp > 1, x * gsize, x * esize, x,
                &expert);
    const double reduce = dense.reduce + expert.reduce, gather = dense.gather + expert.gather;
    o->dp_bytes = dense.bytes + expert.bytes;
    o->edp_comm = expert.reduce + expert.gather;
    o->edp_bytes = expert.bytes;
    const double bucket = a->ddp_bucket_size > 0 ? (double)a->ddp_bucket_size
                          : 40e6 > 1e6 * dp      ? 40e6
                                                 : 1e6 * dp;
    const double buckets = a->overlap_grad_reduce ? ceil(elems / bucket) : 1;
    double exposed = reduce, g_exposed = gather;
    if (a->overlap_grad_reduce && reduce > 0) exposed = fmax(reduce - slow->b, reduce / buckets);
    if (a->overlap_param_gather && gather > 0) g_exposed = fmax(gather - slow->f, gather / buckets);
    /* tied embeddings over stages: the first and the last stage sum the word embeddings' grads */
    double tied = 0;
    if (a->pipeline_model_parallel_size > 1 && !a->untie_embeddings_and_output_weights)
        tied = ring_s((double)a->padded_vocab_size / t * a->hidden_size * gsize, 1,
                      cl->gpu.inter_gbps);
    o->dp_comm = reduce + gather + tied;
    o->dp_exposed = exposed + g_exposed + tied;
    /* Adam: read the gradients twice (norm, step), read and write fp32 main params and both
     * moments, write the 16-bit params */
    const double shard = dense.shard + expert.shard;
    o->optimizer = mem_s(&cl->gpu, shard * (2 * gsize + 24 + (esize < 4 ? esize : 0)));
}

/* Floating-point operations the GPUs execute per iteration: three passes of every layer, the
 * recomputed forward, the output layer; attention over the full [s, s] when materialised, its
 * causal half with flash. The paper's Table 1 counts this way (96 B s l h^2 (1 + s/6h +
 * V/16lh) with full recomputation). */
static double hw_flops(const mc_args_t *a, const dims_t *d)
{
    const double h = d->h, s = d->s_full;
    const double gemms = 2 * h * d->Q + 2 * d->A * h + 2 * h * d->fc1 + 2 * d->F * h;
    const double core = 4 * s * d->A * (d->flash ? 0.5 : 1);
    const int L = a->num_layers;
    double rc = 0;
    if (strcmp(a->recompute_granularity, "selective") == 0) rc = L * core;
    else if (strcmp(a->recompute_granularity, "full") == 0) {
        const int per_chunk =
            L / (a->pipeline_model_parallel_size * a->virtual_pipeline_model_parallel_size);
        const int chunks = L / (per_chunk > 0 ? per_chunk : 1);
        rc = chunks * recomputed_layers(a, per_chunk) * (gemms + core);
    }
    double per_token = L * 3 * (gemms + core) + rc + 6 * h * d->V;
    if (a->num_experts) { /* MoE layers: the router and top-k experts (and a shared expert) */
        mc_plan_params_t p;
        mc_plan_params(a, &p);
        const double F = a->moe_ffn_hidden_size ? a->moe_ffn_hidden_size : d->F;
        const double S = a->moe_shared_expert_intermediate_size, g = d->swiglu ? 3 : 2;
        const double moe = 2 * h * a->num_experts + 2 * h * g * (F * a->moe_router_topk + S);
        per_token += p.moe_layers * 3 * (moe - 2 * h * d->fc1 - 2 * d->F * h);
    }
    return (double)a->global_batch_size * s * per_token;
}

void mc_plan_time(const mc_args_t *args, const mc_cluster_t *cl, const mc_memory_plan_t *mem,
                  mc_plan_time_t *o)
{
    memset(o, 0, sizeof(*o));
    dims_t d;
    dims_from(&d, args, cl);
    const int pp = args->pipeline_model_parallel_size;
    stage_t slow = {0}, per_step = {0}; /* per microbatch; once per step */
    double worst = -1;
    mc_pp_plan_t plan;
    mc_pp_plan_from_args(&plan, args);
    for (int r = 0; r < pp; r++) {
        mc_gpt_config_t cfg;
        char err[256];
        mc_gpt_config_from_args(&cfg, args);
        if (mc_pipeline_chunks(&cfg, &plan, r, err, sizeof(err)) != 0) mc_fatal("%s", err);
        stage_t st, step = {0};
        stage_time(args, &d, &cfg, cl, &st);
        step_tp(args, &d, &cfg, mc_dtype_size(mem->gdt), tp_gbps(args, cl), &step);
        if (st.f + st.b + st.tp + st.ep + st.pp + st.cp_exposed > worst) {
            worst = st.f + st.b + st.tp + st.ep + st.pp + st.cp_exposed;
            slow = st;
            per_step = step;
        }
    }
    const int m = args->num_microbatches, v = args->virtual_pipeline_model_parallel_size;
    o->microbatches = m;
    o->bubble_fraction = (double)(pp - 1) / ((double)v * m);
    o->compute = m * (slow.f + slow.b);
    o->attention = m * slow.attn;
    o->attn = d.attn;
    o->tp_comm = m * slow.tp + per_step.tp;
    o->pp_comm = m * slow.pp;
    o->bubble = (double)(pp - 1) / v * worst;
    o->tp_bytes = slow.tp_bytes * m + per_step.tp_bytes;
    o->tp_calls = slow.tp_calls * m + per_step.tp_calls;
    o->pp_bytes = slow.pp_bytes * m;
    o->cp_comm = slow.cp * m;
    o->cp_exposed = slow.cp_exposed * m;
    o->cp_bytes = slow.cp_bytes * m;
    o->cp_calls = slow.cp_calls * m;
    o->ep_comm = slow.ep * m;
    o->ep_bytes = slow.ep_bytes * m;
    o->ep_calls = slow.ep_calls * m;
    dp_and_optimizer(args, cl, mem, &slow, o);
    o->iteration = o->compute + o->tp_comm + o->ep_comm + o->pp_comm + o->cp_exposed + o->bubble +
                   o->dp_exposed + o->optimizer;
    mc_gpt_config_t model;
    mc_gpt_config_from_args(&model, args);
    o->model_flops = mc_gpt_flops(&model, args->global_batch_size);
    o->hw_flops = hw_flops(args, &d);
    const double n = cl->num_gpus;
    o->tokens_per_s = (double)args->global_batch_size * args->seq_length / o->iteration;
    o->model_tflops_per_gpu = o->model_flops / o->iteration / n / 1e12;
    o->hw_tflops_per_gpu = o->hw_flops / o->iteration / n / 1e12;
    o->mfu = o->model_tflops_per_gpu / cl->gpu.peak_tflops;
}
