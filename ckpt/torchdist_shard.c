/* The model's sharded state dict in Megatron's keys and sharding (FORMAT.md section 4): layers
 * stacked along a leading axis of global layer numbers, the norms in Transformer Engine's
 * fused names (the local spec's sharded_state_dict renames them too), column-parallel tensors
 * split along their rows, row-parallel weights along their columns, the rest replicated (stored
 * by tp rank 0). SwiGLU's fc1 is stored as [every gate row; every up row], each rank writing its
 * rows of both halves (Megatron's apply_swiglu_sharded_factory). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/torchdist.h"
#include "ckpt/state.h"
#include "model/param_names.h"

/* The key of parameter p (a layer's in Transformer Engine's names, stacked over the layers or
 * per layer with dist_per_layer); a shared output layer is the word embeddings'. *layer its
 * global layer number along the stacking axis (-1: none). */
static void shard_key(const mc_gpt_t *m, const mc_param_t *p, char *buf, size_t n, int *layer)
{
    const mc_param_name_t *row = &mc_param_names[p->shared ? MC_PK_WORD_EMBEDDINGS : p->kind];
    const char *name = row->te ? row->te : row->local;
    *layer = p->layer;
    if (p->layer < 0) snprintf(buf, n, "%s", row->local);
    else if (m->cfg.dist_per_layer) {
        snprintf(buf, n, "decoder.layers.%d.%s", p->layer, name);
        *layer = -1;
    } else snprintf(buf, n, "decoder.layers.%s", name);
}

/* A piece of an MoE layer's expert's tensor in torch_dist's stack of every layer's and
 * expert's: [L, E, rows, cols] ([E, rows, cols] per layer: layer -1), E the global experts
 * (p->expert is the global number), this expert's local rows [row0, row0 + rows) at global row
 * grow and global column gcol (its local columns: an etp rank's of linear_fc2). */
static void add_expert_piece(mc_shard_t *s, const mc_param_t *p, int index, const char *key,
                             int layer, int num_layers, int E, int64_t row0, int64_t rows,
                             int64_t grow, int64_t gcol)
{
    memset(s, 0, sizeof(*s));
    s->param = index;
    snprintf(s->key, sizeof(s->key), "%s", key);
    const int lead = layer >= 0 ? 1 : 0;
    s->ndim = 3 + lead;
    const int64_t g[4] = {num_layers, E, p->shape[0], p->shape[1]};
    const int64_t o[4] = {layer, p->expert, grow, gcol};
    const int64_t z[4] = {1, 1, rows, p->local[1]};
    for (int d = 0; d < s->ndim; d++) {
        s->global[d] = g[d + 1 - lead];
        s->offsets[d] = o[d + 1 - lead];
        s->sizes[d] = z[d + 1 - lead];
    }
    s->start = (long)(row0 * p->local[1]);
    s->numel = (long)(rows * p->local[1]);
    s->main = true;
}

/* An expert's pieces: SwiGLU's linear_fc1 as its gate rows and its up rows (Megatron's
 * apply_swiglu_sharded_factory, as for the dense MLP), each an etp rank's block of them with
 * expert tensor parallelism; linear_fc2 its etp rank's columns; anything else whole. */
static int add_experts(mc_shard_t *s, const mc_gpt_t *m, const mc_param_t *p, int index,
                       const char *key, int layer)
{
    const int L = m->cfg.num_layers, E = m->cfg.moe.num_experts, r = p->shard_rank;
    const int64_t rows = p->local[0];
    if (p->kind != MC_PK_EXPERT_FC1_W || !m->cfg.swiglu) {
        const int64_t grow = p->split == MC_SPLIT_ROWS ? r * rows : 0;
        const int64_t gcol = p->split == MC_SPLIT_COLS ? r * p->local[1] : 0;
        add_expert_piece(s, p, index, key, layer, L, E, 0, rows, grow, gcol);
        return 1;
    }
    const int64_t half = rows / 2, full_half = p->shape[0] / 2;
    const int64_t at = p->split == MC_SPLIT_ROWS_GLU ? r * half : 0;
    add_expert_piece(&s[0], p, index, key, layer, L, E, 0, half, at, 0);
    add_expert_piece(&s[1], p, index, key, layer, L, E, half, half, full_half + at, 0);
    return 2;
}

/* A piece of p: rows [row0, row0 + rows) of the local tensor at global row grow and global
 * column gcol of the unstacked tensor. */
static void add_piece(mc_shard_t *s, const mc_param_t *p, int index, const char *key, int layer,
                      int num_layers, int64_t row0, int64_t rows, int64_t grow, int64_t gcol,
                      bool main)
{
    memset(s, 0, sizeof(*s));
    s->param = index;
    snprintf(s->key, sizeof(s->key), "%s", key);
    const int lead = layer >= 0 ? 1 : 0;
    s->ndim = p->ndim + lead;
    if (lead) {
        s->global[0] = num_layers;
        s->offsets[0] = layer;
        s->sizes[0] = 1;
    }
    const int64_t cols = p->ndim > 1 ? p->local[1] : 1;
    s->global[lead] = p->shape[0];
    s->offsets[lead] = grow;
    s->sizes[lead] = rows;
    if (p->ndim > 1) {
        s->global[lead + 1] = p->shape[1];
        s->offsets[lead + 1] = gcol;
        s->sizes[lead + 1] = cols;
    }
    s->start = (long)(row0 * cols);
    s->numel = (long)(rows * cols);
    s->main = main;
}

int mc_torchdist_shards(const mc_gpt_t *m, mc_shard_t **out, int *n)
{
    mc_shard_t *s = malloc((size_t)(2 * m->n_params + 1) * sizeof(mc_shard_t));
    if (!s) return -1;
    const int tp = m->cfg.tp_rank;
    int k = 0;
    for (int i = 0; i < m->n_params; i++) {
        const mc_param_t *p = &m->params[i];
        char key[128];
        int layer;
        shard_key(m, p, key, sizeof(key), &layer);
        const int64_t rows = p->local[0];
        const int L = m->cfg.num_layers;
        if (mc_param_names[p->kind].experts) {
            k += add_experts(&s[k], m, p, i, key, layer);
            continue;
        }
        switch (p->split) {
        case MC_SPLIT_NONE:
            add_piece(&s[k++], p, i, key, layer, L, 0, rows, 0, 0, tp == 0 && !p->shared);
            break;
        case MC_SPLIT_ROWS:
            add_piece(&s[k++], p, i, key, layer, L, 0, rows, tp * rows, 0, !p->shared);
            break;
        case MC_SPLIT_COLS:
            add_piece(&s[k++], p, i, key, layer, L, 0, rows, 0, tp * p->local[1], true);
            break;
        case MC_SPLIT_ROWS_GLU: {
            const int64_t half = rows / 2, full_half = p->shape[0] / 2;
            add_piece(&s[k++], p, i, key, layer, L, 0, half, tp * half, 0, true);
            add_piece(&s[k++], p, i, key, layer, L, half, half, full_half + tp * half, 0, true);
            break;
        }
        }
    }
    *out = s;
    *n = k;
    return 0;
}

void mc_torchdist_expert_bias_shard(const mc_gpt_t *m, int local, mc_shard_t *s)
{
    memset(s, 0, sizeof(*s));
    s->param = -1;
    const int layer = m->layer_no[local], E = m->cfg.moe.num_experts;
    const int lead = m->cfg.dist_per_layer ? 0 : 1;
    if (lead) snprintf(s->key, sizeof(s->key), "decoder.layers.%s", MC_EXPERT_BIAS_NAME);
    else snprintf(s->key, sizeof(s->key), "decoder.layers.%d.%s", layer, MC_EXPERT_BIAS_NAME);
    s->ndim = 1 + lead;
    if (lead) {
        s->global[0] = m->cfg.num_layers;
        s->offsets[0] = layer;
        s->sizes[0] = 1;
    }
    s->global[lead] = s->sizes[lead] = E;
    s->numel = E;
    s->main = m->cfg.tp_rank == 0; /* replicated over tp (and dp: dp rank 0 writes) */
}

void mc_torchdist_rng_key(const mc_trainer_t *t, char *buf, size_t n)
{
    snprintf(buf, n, "rng_state/shard_%d.%d_%d.%d", t->par.me.pp, t->par.me.tp,
             t->args->pipeline_model_parallel_size, t->args->tensor_model_parallel_size);
}

int mc_torchdist_domain(const mc_args_t *a, int tp, int pp)
{
    return pp * a->tensor_model_parallel_size + tp;
}

int mc_torchdist_expert_domain(const mc_args_t *a, int etp, int ep, int pp)
{
    const int tp = a->tensor_model_parallel_size > 0 ? a->tensor_model_parallel_size : 1;
    const int etps = a->expert_tensor_parallel_size > 0 ? a->expert_tensor_parallel_size : tp;
    const int eps = a->expert_model_parallel_size > 0 ? a->expert_model_parallel_size : 1;
    return (pp * eps + ep) * etps + etp;
}

void mc_torchdist_optim_key(char *buf, size_t n, int chain, int domain, const char *what,
                            bool object)
{
    char pre[24] = "";
    if (chain >= 0) snprintf(pre, sizeof(pre), "chained_%d.", chain);
    snprintf(buf, n, "%soptimizer.distributed.dp_group_idx_%d.%s%s", pre, domain, what,
             object ? "/shard_0_1" : "");
}

void mc_torchdist_bucket_key(const mc_args_t *a, int chain, int domain, int chunk, int bucket,
                             char *buf, size_t n)
{
    const char *param, *grad;
    mc_ckpt_buffer_dtypes(a, &param, &grad);
    char what[160];
    snprintf(what, sizeof(what), "gbuf_idx_%d.dtype_(torch.%s, torch.%s).bucket_idx_%d", chunk,
             param, grad, bucket);
    mc_torchdist_optim_key(buf, n, chain, domain, what, false);
}
