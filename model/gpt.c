/* The GPT driver (Megatron-core's GPTModel and TransformerBlock): a chunk's forward and backward
 * over its layers through the blocks each layer's spec picked (model/layer_spec.h), with the
 * embedding before the first layer and the output layer and loss after the last. Layout
 * [s, b, h]; one microbatch in flight. A layer (pre-norm, Megatron-core's TransformerLayer):
 *   res = x;      y = input_norm(x);      x = res + dropout(attention(y))     (self_attn_bda)
 *   res = x;      y = pre_mlp_norm(x);    x = res + dropout(mlp(y))           (mlp_bda)
 * with res = y under --apply-residual-connection-post-layernorm. The residual add that closes a
 * layer is fused with the norm that reads the sum next (the next layer's input norm, or the final
 * norm): an explicit step of the driver (close_layer), so a layer starts normed or not. Full
 * recomputation reruns a group of layers' forward before its backward, selective recomputation
 * core attention (model/attention.c). Memory: model/gpt_memory.c. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "config/cp_layout.h"
#include "model/block.h"
#include "model/layer_spec.h"

mc_tp_dims_t mc_gpt_tp_dims(const mc_gpt_config_t *c)
{
    mc_tp_dims_t d;
    d.heads = c->heads / c->tp;
    d.groups = (c->groups > 0 ? c->groups : c->heads) / c->tp;
    d.attn = d.heads * c->head_dim;
    d.qkv = (d.heads + 2 * d.groups) * c->head_dim; /* per group: its queries, key, value */
    d.ffn = c->ffn / c->tp;
    d.ffn1 = c->swiglu ? 2 * d.ffn : d.ffn; /* linear_fc1's output: [gate | up] with SwiGLU */
    d.vocab = c->vocab / c->tp;
    d.vocab_start = c->tp_rank * d.vocab;
    d.head_start = c->tp_rank * d.heads;
    d.sp = c->sequence_parallel && c->tp > 1;
    d.seq = d.sp ? c->seq / c->tp : c->seq;
    d.seq_start = d.sp ? c->tp_rank * d.seq : 0;
    return d;
}

mc_tp_t mc_gpt_tp(const mc_gpt_t *m)
{
    const mc_gpt_config_t *c = &m->cfg;
    return (mc_tp_t){.be = m->be,
                     .comm = m->comm,
                     .group = m->tp_group,
                     .size = c->tp,
                     .rank = c->tp_rank,
                     .sp = c->sequence_parallel && c->tp > 1,
                     .dt = c->dt,
                     .ov = c->tp_overlap};
}

mc_dropout_t mc_gpt_dropout(const mc_gpt_t *m, uint32_t iteration, uint32_t layer, uint32_t site,
                            uint64_t sample0, float p)
{
    mc_dropout_t d = {.seed = m->cfg.seed,
                      .iteration = iteration,
                      .layer = layer,
                      .site = site,
                      .sample0 = sample0,
                      .p = p};
    return d;
}

long mc_gpt_boundary_elems(const mc_gpt_t *m, int b)
{
    return (long)mc_gpt_tp_dims(&m->cfg).seq * b * m->cfg.hidden;
}

/* ---------------------------------------------------------------- parameter blocks */

/* Parameter blocks in table order: 0 = embeddings (pre chunk), 1..n_local_layers = this rank's
 * layers, then the final norm and output layer (post chunk); a block may be empty. The tied
 * output weight of a one-stage model is the word embedding, complete only after the embedding
 * backward. */
static void param_block(const mc_gpt_t *m, int k, int *first, int *n)
{
    const int NL = m->n_local_layers;
    if (k == 0) *first = 0, *n = m->layer_param[0];
    else if (k <= NL) *first = m->layer_param[k - 1], *n = m->layer_param[k] - *first;
    else *first = m->layer_param[NL], *n = m->n_params - *first;
}

void mc_gpt_chunk_params(const mc_gpt_t *m, int c, int *first, int *n)
{
    const mc_chunk_cfg_t *ch = &m->cfg.chunk[c];
    int f, k, e;
    param_block(m, 1 + m->chunk_local0[c], &f, &k);
    if (ch->pre) f = 0;
    param_block(m, m->chunk_local0[c] + ch->n_layers + 1, &e, &k);
    if (ch->post) e = m->n_params;
    *first = f;
    *n = e - f;
}

/* Block k's parameters are about to be read: the data-parallel hook (a gather to wait for),
 * then --apply-layernorm-1p's 1 + w of its norms from the parameters just updated. */
static void params_needed(mc_gpt_t *m, int k)
{
    int first, n;
    param_block(m, k, &first, &n);
    if (n && m->params_needed_hook) m->params_needed_hook(m->hook_ctx, first, n);
    mc_norm_1p_refresh(m, first, n);
}

static void grads_final(mc_gpt_t *m, int k)
{
    if (!m->grads_final_hook) return;
    int first, n;
    param_block(m, k, &first, &n);
    if (n) m->grads_final_hook(m->hook_ctx, first, n);
}

/* ---------------------------------------------------------------- layers */

/* Full recomputation: whether layer j of a model chunk of n layers keeps only its recompute
 * group's input, and the group's layers [first, last] (Megatron's
 * TransformerBlock._checkpointed_forward, per block, i.e. per model chunk: uniform groups of
 * recompute_num_layers layers, or each of the first recompute_num_layers layers alone). */
bool mc_gpt_recomputed(const mc_gpt_config_t *c, int n, int j, int *first, int *last)
{
    const int k = c->recompute_num_layers > 0 ? c->recompute_num_layers : 1;
    if (c->recompute == MC_RECOMPUTE_FULL_UNIFORM) {
        *first = j / k * k;
        *last = *first + k - 1 < n - 1 ? *first + k - 1 : n - 1;
        return true;
    }
    if (c->recompute == MC_RECOMPUTE_FULL_BLOCK && j < k) {
        *first = *last = j;
        return true;
    }
    return false;
}

mc_layer_run_t mc_gpt_layer_run(mc_gpt_t *m, int j, uint32_t iteration, bool training)
{
    const int lj = m->chunk_local0[m->cur_chunk] + j; /* local layer index */
    mc_layer_run_t r = {.m = m,
                        .be = m->be,
                        .c = &m->cfg,
                        .t = mc_gpt_tp_dims(&m->cfg),
                        .tp = mc_gpt_tp(m),
                        .sl = m->cur,
                        .B = m->cur->batch,
                        .iteration = iteration,
                        .layer_no = (uint32_t)m->layer_no[lj] + 1,
                        .training = training,
                        .grad = training,
                        .w = m->p.layers[lj].t,
                        .gw = m->g.layers[lj].t,
                        .local = lj};
    r.N = m->cfg.seq * r.B;
    r.NL = (long)r.t.seq * r.B * m->cfg.hidden;
    return r;
}

void mc_gpt_seq_dropout(const mc_gpt_t *m, bool backward, void *out, const void *x,
                        const mc_dropout_t *d, int B)
{
    const mc_backend_t *be = m->be;
    const mc_gpt_config_t *c = &m->cfg;
    const mc_tp_dims_t t = mc_gpt_tp_dims(c);
    const int H = c->hidden, C = c->cp > 1 ? c->seq / 2 : c->seq;
    /* the rows [seq_start, seq_start + seq) of this rank's sequence, cut where a context-parallel
     * chunk ends: each piece's rows are consecutive positions of the whole sequence */
    for (int i0 = t.seq_start; i0 < t.seq_start + t.seq;) {
        const int end = i0 < C ? C : c->seq,
                  i1 = end < t.seq_start + t.seq ? end : t.seq_start + t.seq;
        const long at = (long)(i0 - t.seq_start) * B * H;
        const int pos = mc_cp_position(c->seq_full, c->cp, c->cp_rank, i0);
        if (backward)
            be->dropout_backward(be, c->dt, mc_elem(out, c->dt, at), mc_celem(x, c->dt, at), d,
                                 i1 - i0, B, H, pos, H, 0);
        else
            be->dropout_forward(be, c->dt, mc_elem(out, c->dt, at), mc_celem(x, c->dt, at), d,
                                i1 - i0, B, H, pos, H, 0);
        i0 = i1;
    }
}

/* The bias-dropout-add's dropout (the biases are in the linears, the add in the norm after it),
 * forward in place, or backward from dres into y; returns where the result is: with probability
 * 0 (the identity) the backward's is dres itself, no copy. */
static void *bda_dropout(const mc_layer_run_t *r, uint32_t site, void *y, bool backward)
{
    const float p = backward || r->training ? r->c->hidden_dropout : 0.0f;
    const mc_dropout_t d = mc_gpt_dropout(r->m, r->iteration, r->layer_no, site, r->sl->sample0, p);
    if (backward && p <= 0.0f) return r->m->dres;
    mc_gpt_seq_dropout(r->m, backward, y, backward ? r->m->dres : y, &d, r->B);
    return y;
}

/* Layer j of the chunk in flight up to its closing residual add: reads acts[j].x (its input norm
 * already done when normed) and fills acts[j]. Returns the MLP's output after dropout; *res is
 * the residual it is added to. */
static void *forward_layer(mc_gpt_t *m, int j, uint32_t iteration, bool training, bool normed,
                           bool recomputing, const void **res)
{
    mc_layer_run_t r = mc_gpt_layer_run(m, j, iteration, training);
    int first, last;
    const int n = m->cfg.chunk[m->cur_chunk].n_layers;
    if (training && !recomputing && mc_gpt_recomputed(&m->cfg, n, j, &first, &last)) r.grad = false;
    const mc_layer_spec_t *spec = m->spec[m->chunk_local0[m->cur_chunk] + j];
    const bool post_ln = m->cfg.post_ln_residual;
    const int rows = r.t.seq * r.B;
    mc_layer_acts_t *a = &m->cur->acts[j];
    void *const *w = r.w;

    if (!normed) {
        params_needed(m, m->chunk_local0[m->cur_chunk] + j + 1);
        spec->input_norm->forward(m, &a->ln1, a->x, w[MC_PK_INPUT_NORM_W], w[MC_PK_INPUT_NORM_B],
                                  rows);
    }
    void *y = spec->attention->forward(&r, mc_block_acts(a, spec->attention), a->ln1.out);
    bda_dropout(&r, MC_DROPOUT_SITE_ATTN_OUT, y, false);
    spec->pre_mlp_norm->add_forward(m, a->x_mid, &a->ln2, post_ln ? a->ln1.out : a->x, y,
                                    w[MC_PK_PRE_MLP_NORM_W], w[MC_PK_PRE_MLP_NORM_B], rows);
    y = spec->mlp->forward(&r, mc_block_acts(a, spec->mlp), a->ln2.out);
    bda_dropout(&r, MC_DROPOUT_SITE_MLP_OUT, y, false);
    *res = post_ln ? a->ln2.out : a->x_mid;
    return y;
}

/* The step closing layer j: its output x = res + y, written to the next layer's input (or the
 * chunk's output), fused with the norm that reads the sum next in a plain forward: the next
 * layer's input norm, or on the last stage the final norm. Returns whether it did that norm.
 * When recomputing, the chunk's output (which may be in flight to the next stage) is not written
 * again: the last layer of a recomputed group writes its unchanged value to scratch instead, and
 * a group ends without the fusion (the next layer, or the final norm, norms for itself). */
static bool close_layer(mc_gpt_t *m, int j, const void *res, const void *y, bool recomputing)
{
    mc_gpt_slot_t *sl = m->cur;
    const mc_chunk_cfg_t *ch = &m->cfg.chunk[m->cur_chunk];
    const int lj = m->chunk_local0[m->cur_chunk] + j,
              rows = mc_gpt_tp_dims(&m->cfg).seq * sl->batch;
    void *x_out = j + 1 < ch->n_layers ? sl->acts[j + 1].x
                  : recomputing        ? m->dx
                  : ch->post           ? sl->x_final
                                       : sl->out;
    if (!recomputing && j + 1 < ch->n_layers) {
        void *const *nw = m->p.layers[lj + 1].t;
        params_needed(m, lj + 2);
        m->spec[lj + 1]->input_norm->add_forward(m, x_out, &sl->acts[j + 1].ln1, res, y,
                                                 nw[MC_PK_INPUT_NORM_W], nw[MC_PK_INPUT_NORM_B],
                                                 rows);
        return true;
    }
    if (!recomputing && ch->post) {
        params_needed(m, m->n_local_layers + 1);
        m->final_norm->add_forward(m, x_out, &sl->lnf, res, y, m->p.t[MC_PK_FINAL_NORM_W],
                                   m->p.t[MC_PK_FINAL_NORM_B], rows);
        return true;
    }
    m->be->add(m->be, m->cfg.dt, x_out, res, y, (long)rows * m->cfg.hidden);
    return false;
}

/* The gradient at a norm's input from dx (at its output) and dres (at the residual stream after
 * the add that reads it): with --apply-residual-connection-post-layernorm the residual is the
 * norm's output, so dres joins dx and the residual stream gets only the norm's path. */
static void norm_backward(const mc_layer_run_t *r, const mc_norm_ops_t *norm, mc_pkind_t weight,
                          const void *x, const mc_norm_acts_t *a)
{
    mc_gpt_t *m = r->m;
    const long n = r->NL;
    if (r->c->post_ln_residual) {
        m->be->add_inplace(m->be, r->c->dt, m->dx, m->dres, n);
        m->be->memset0(m->be, m->dres, (size_t)n * mc_dtype_size(r->c->dt));
    }
    norm->backward_acc(m, m->dres, r->gw[weight], r->gw[weight + 1], m->dx, x, r->w[weight], a,
                       r->t.seq * r->B);
}

/* Layer j of the chunk in flight, backward: dres holds the gradient at the layer's output and
 * gets the gradient at its input; parameter gradients accumulate. */
static void backward_layer(mc_gpt_t *m, int j, uint32_t iteration)
{
    mc_layer_run_t r = mc_gpt_layer_run(m, j, iteration, true);
    const int lj = m->chunk_local0[m->cur_chunk] + j;
    const mc_layer_spec_t *spec = m->spec[lj];
    mc_layer_acts_t *a = &m->cur->acts[j];

    void *dy = bda_dropout(&r, MC_DROPOUT_SITE_MLP_OUT, m->dtmp_h, true);
    spec->mlp->backward(&r, mc_block_acts(a, spec->mlp), a->ln2.out, dy, m->dx);
    norm_backward(&r, spec->pre_mlp_norm, MC_PK_PRE_MLP_NORM_W, a->x_mid, &a->ln2);
    dy = bda_dropout(&r, MC_DROPOUT_SITE_ATTN_OUT, m->dtmp_h, true);
    spec->attention->backward(&r, mc_block_acts(a, spec->attention), a->ln1.out, dy, m->dx);
    norm_backward(&r, spec->input_norm, MC_PK_INPUT_NORM_W, a->x, &a->ln1);
    grads_final(m, lj + 1);
}

/* ---------------------------------------------------------------- chunks */

static mc_gpt_slot_t *use_slot(mc_gpt_t *m, int c, int k)
{
    if (c < 0 || c >= m->cfg.n_chunks || k < 0 || k >= m->cfg.slots[mc_gpt_slot_group(&m->cfg, c)])
        mc_fatal("internal error: no activation slot %d for model chunk %d", k, c);
    m->cur = &m->slots[mc_gpt_slot_group(&m->cfg, c)][k];
    m->cur_chunk = c;
    return m->cur;
}

/* The microbatch's data the chunk reads, onto the backend. */
static void load_microbatch(mc_gpt_t *m, const mc_chunk_cfg_t *ch, mc_gpt_slot_t *sl,
                            const mc_microbatch_t *mb)
{
    const mc_backend_t *be = m->be;
    const mc_gpt_config_t *cf = &m->cfg;
    if (mb->s != cf->seq || mb->b > cf->max_batch)
        mc_fatal("microbatch shape [%d, %d] does not fit the planned [%d, %d]", mb->b, mb->s,
                 cf->max_batch, cf->seq);
    sl->batch = mb->b;
    sl->sample0 = mb->sample0;
    const size_t N = (size_t)mb->s * mb->b, ib = N * sizeof(int32_t), fb = N * sizeof(float);
    /* pinned staging is copied without waiting */
    void (*h2d)(const mc_backend_t *, void *, const void *, size_t) =
        mb->pinned ? be->memcpy_h2d_async : be->memcpy_h2d;
    if (ch->pre) {
        h2d(be, sl->tokens, mb->tokens, ib);
        h2d(be, sl->positions, mb->positions, ib);
    }
    if (ch->post) {
        h2d(be, sl->labels, mb->labels, ib);
        h2d(be, sl->loss_mask, mb->loss_mask, fb);
    }
    sl->segments = NULL;
    if (mb->segments) {
        h2d(be, sl->segments_buf, mb->segments, ib);
        sl->segments = sl->segments_buf;
    }
}

void mc_gpt_forward_chunk(mc_gpt_t *m, int c, int k, const mc_microbatch_t *mb, uint32_t iteration,
                          bool training, double *loss_sum, double *num_tokens)
{
    const mc_chunk_cfg_t *ch = &m->cfg.chunk[c];
    mc_gpt_slot_t *sl = use_slot(m, c, k);
    load_microbatch(m, ch, sl, mb);
    if (ch->pre) {
        params_needed(m, 0);
        mc_embedding_forward(m, sl, iteration, training);
    }

    bool normed = false;
    for (int j = 0; j < ch->n_layers; j++) {
        const void *res;
        const void *y = forward_layer(m, j, iteration, training, normed, false, &res);
        normed = close_layer(m, j, res, y, false);
    }
    void *chunk_out = ch->post ? sl->x_final : sl->out;
    if (ch->n_layers == 0 && chunk_out != sl->in) /* a chunk without layers passes its input on */
        m->be->memcpy_d2d(m->be, chunk_out, sl->in,
                          (size_t)mc_gpt_boundary_elems(m, sl->batch) * mc_dtype_size(m->cfg.dt));

    *loss_sum = *num_tokens = 0;
    if (!ch->post) return;
    if (!normed) { /* else the last layer's closing step did it */
        params_needed(m, m->n_local_layers + 1);
        mc_output_norm(m, sl);
    }
    mc_output_forward(m, sl, mb, training, loss_sum, num_tokens);
}

void mc_gpt_reduce_sequence_parallel_grads(mc_gpt_t *m)
{
    const mc_tp_t tp = mc_gpt_tp(m);
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].seq_parallel)
            mc_tp_all_reduce(&tp, mc_gpt_grad_at(m, m->params[i].offset), m->params[i].numel,
                             m->cfg.gdt, MC_OP_SUM);
}

void mc_gpt_backward_chunk(mc_gpt_t *m, int c, int k, uint32_t iteration, float weight)
{
    const mc_backend_t *be = m->be;
    const mc_gpt_config_t *cf = &m->cfg;
    const mc_chunk_cfg_t *ch = &cf->chunk[c];
    mc_gpt_slot_t *sl = use_slot(m, c, k);
    /* bytes of a sequence-local activation */
    const size_t hb = (size_t)mc_gpt_boundary_elems(m, sl->batch) * mc_dtype_size(cf->dt);

    if (ch->post) {
        mc_output_backward(m, sl, weight);
        /* with deferred weight gradients the output layer's is complete after the flush */
        if (cf->defer_wgrad == 0) grads_final(m, m->n_local_layers + 1);
    } else {
        be->memcpy_d2d(be, m->dres, sl->dout, hb);
    }
    /* invariant from here: dres = gradient w.r.t. the residual stream at the current point */

    for (int j = ch->n_layers - 1; j >= 0; j--) {
        /* full recomputation: the forward of a recomputed group runs again from its saved input
         * just before the group's backward (same dropout keys: the same values) */
        int first, last;
        if (mc_gpt_recomputed(cf, ch->n_layers, j, &first, &last) && j == last)
            for (int i = first; i <= last; i++) {
                const void *res;
                const void *y = forward_layer(m, i, iteration, true, false, true, &res);
                close_layer(m, i, res, y, true);
            }
        backward_layer(m, j, iteration);
    }

    if (!ch->pre) {
        /* the input is dead: it carries the gradient to the previous stage */
        be->memcpy_d2d(be, sl->in, m->dres, hb);
        return;
    }
    mc_embedding_backward(m, sl, iteration);
    grads_final(m, 0);
}

void mc_gpt_drain_output_wgrad(mc_gpt_t *m)
{
    if (m->cfg.defer_wgrad == 0) return;
    mc_output_drain_wgrad(m);
    grads_final(m, m->n_local_layers + 1);
}

/* The one-stage model (a single chunk with the embedding and the loss) in slot 0. */
static void check_whole(const mc_gpt_t *m)
{
    if (m->cfg.n_chunks != 1 || !m->cfg.chunk[0].pre || !m->cfg.chunk[0].post)
        mc_fatal("internal error: mc_gpt_forward/backward need the whole model on one rank");
}

void mc_gpt_forward(mc_gpt_t *m, const mc_microbatch_t *mb, uint32_t iteration, bool training,
                    double *loss_sum, double *num_tokens)
{
    check_whole(m);
    mc_gpt_forward_chunk(m, 0, 0, mb, iteration, training, loss_sum, num_tokens);
}

void mc_gpt_backward(mc_gpt_t *m, uint32_t iteration, float weight)
{
    check_whole(m);
    mc_gpt_backward_chunk(m, 0, 0, iteration, weight);
}
