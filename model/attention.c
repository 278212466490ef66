/* Self-attention (Megatron-core's SelfAttention, transformer/attention.py) of one layer:
 * linear_qkv (column-parallel: this rank's query groups), q/k_layernorm (--qk-layernorm), rotary
 * embeddings on the queries and keys, core attention through the backend's fused op (causal,
 * grouped queries, dropout on the probabilities, per-document masks), and linear_proj
 * (row-parallel, its output summed over tp). The bias-dropout-add after it is the driver's. */
#include <stddef.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config/cp_layout.h"
#include "model/block.h"
#include "model/cp_attention.h"
#include "model/rope.h"

static void attn_params(mc_gpt_t *m, int layer)
{
    const mc_gpt_config_t *c = &m->cfg;
    const int H = c->hidden, QKV = (c->heads + 2 * c->groups) * c->head_dim;
    const int A = c->heads * c->head_dim;
    /* scaled_init_method_normal: std / sqrt(2 * num_layers) for linear_proj, num_layers of the
     * whole model */
    const float out_std = c->init_std / sqrtf(2.0f * (float)c->num_layers);
    /* Megatron's ColumnParallelLinear (qkv) splits output rows; RowParallelLinear (proj) splits
     * input columns and keeps its bias whole */
    mc_gpt_add_param(m, MC_PK_PROJ_W, layer, H, A, out_std, 0);
    if (c->bias) mc_gpt_add_param(m, MC_PK_PROJ_B, layer, H, 0, 0, 0.0f);
    mc_gpt_add_param(m, MC_PK_QKV_W, layer, QKV, H, c->init_std, 0);
    if (c->bias || c->qkv_bias) mc_gpt_add_param(m, MC_PK_QKV_B, layer, QKV, 0, 0, 0.0f);
    if (c->qk_norm) { /* over one head's channels: whole on every tp rank */
        const mc_norm_ops_t *norm = c->rms ? &mc_norm_rmsnorm : &mc_norm_layernorm;
        mc_norm_params(norm, m, MC_PK_Q_NORM_W, layer, c->head_dim);
        mc_norm_params(norm, m, MC_PK_K_NORM_W, layer, c->head_dim);
    }
}

/* Bytes of one layer's saved attention state and of the attention backward's scratch (the
 * backend decides: probabilities on the CPU, softmax statistics in a fused kernel). */
static void attention_bytes(const mc_gpt_t *m, long *state, long *scratch)
{
    const mc_gpt_config_t *c = &m->cfg;
    size_t st, sc;
    if (c->cp > 1) { /* context parallelism plans its own (model/cp_attention.c) */
        *state = *scratch = 0;
        return;
    }
    m->be->attention_sizes(m->be, c->dt, c->seq, c->max_batch, mc_gpt_tp_dims(c).heads, c->head_dim,
                           &st, &sc);
    *state = (long)st;
    *scratch = (long)sc;
}

/* One layer's; with selective recomputation (core attention recomputed in the backward) its
 * state is the one buffer every layer shares. */
static void attn_plan(mc_gpt_t *m, mc_alloc_t *a, void *acts)
{
    const mc_gpt_config_t *c = &m->cfg;
    const mc_tp_dims_t t = mc_gpt_tp_dims(c);
    mc_attention_acts_t *s = acts;
    const long SB = (long)c->seq * c->max_batch, f = sizeof(float);
    const long e = (long)mc_dtype_size(c->dt);
    long state, scratch;
    attention_bytes(m, &state, &scratch);
    s->qkv = mc_gpt_take(a, SB * t.qkv * e);
    if (c->qk_norm) {
        const long heads = SB * t.groups * (t.heads / t.groups + 1);
        s->qkv_in = mc_gpt_take(a, SB * t.qkv * e);
        if (!c->rms) s->qk_mean = mc_gpt_take(a, heads * f);
        s->qk_rstd = mc_gpt_take(a, heads * f);
    }
    if (c->recompute != MC_RECOMPUTE_SELECTIVE) s->state = mc_gpt_take(a, state);
    else s->state = m->attn_ws.state;
    s->out = mc_gpt_take(a, SB * t.attn * e);
    if (c->cp > 1) mc_cp_attention_plan(m, a, s);
}

static void attn_plan_shared(mc_gpt_t *m, mc_alloc_t *acts, mc_alloc_t *ws)
{
    const mc_gpt_config_t *c = &m->cfg;
    const long SB = (long)c->seq * c->max_batch, f = sizeof(float);
    long state, scratch;
    attention_bytes(m, &state, &scratch);
    if (c->recompute == MC_RECOMPUTE_SELECTIVE) m->attn_ws.state = mc_gpt_take(acts, state);
    m->attn_ws.d_qkv = mc_gpt_take(ws, SB * mc_gpt_tp_dims(c).qkv * (long)mc_dtype_size(c->dt));
    m->attn_ws.scratch = mc_gpt_take(ws, scratch);
    if (c->pos == MC_POS_ROPE) {
        m->attn_ws.rope_cos = mc_gpt_take(ws, c->seq * (c->rope.rot_dim / 2) * f);
        m->attn_ws.rope_sin = mc_gpt_take(ws, c->seq * (c->rope.rot_dim / 2) * f);
    }
    mc_cp_attention_plan_shared(m, acts, ws);
}

/* The rotary angles of this rank's positions (Megatron's RotaryEmbedding over the whole
 * sequence, for every layer and microbatch): 0..S-1, or with context parallelism the rows of
 * its two chunks (get_pos_emb_on_this_cp_rank). */
static int attn_setup(mc_gpt_t *m)
{
    const mc_gpt_config_t *c = &m->cfg;
    if (c->pos != MC_POS_ROPE) return 0;
    const long half = c->rope.rot_dim / 2, n = (long)c->seq * half, nf = (long)c->seq_full * half;
    float *host = malloc(2 * (size_t)(n + nf) * sizeof(float));
    if (!host) return -1;
    float *all = host + 2 * n;
    mc_rope_tables(&c->rope, c->seq_full, all, all + nf);
    for (int i = 0; i < c->seq; i++) {
        const long g = (long)mc_cp_position(c->seq_full, c->cp, c->cp_rank, i) * half;
        memcpy(host + i * half, all + g, (size_t)half * sizeof(float));
        memcpy(host + n + i * half, all + nf + g, (size_t)half * sizeof(float));
    }
    m->be->memcpy_h2d(m->be, m->attn_ws.rope_cos, host, (size_t)n * sizeof(float));
    m->be->memcpy_h2d(m->be, m->attn_ws.rope_sin, host + n, (size_t)n * sizeof(float));
    free(host);
    return 0;
}

/* Rotary embeddings on the query and key heads of a qkv tensor in place: forward, or the
 * inverse rotation on its gradient. */
static void rope(const mc_layer_run_t *r, void *qkv, int inverse)
{
    const mc_gpt_config_t *c = r->c;
    if (c->pos != MC_POS_ROPE) return;
    r->be->rope(r->be, c->dt, qkv, r->m->attn_ws.rope_cos, r->m->attn_ws.rope_sin, c->seq, r->B,
                r->t.groups, r->t.heads / r->t.groups, c->head_dim, c->rope.rot_dim,
                c->rope.interleaved, inverse);
}

/* Core attention's dropout on the probabilities: p 0 outside training. */
static mc_dropout_t probs_dropout(const mc_layer_run_t *r, bool on)
{
    return mc_gpt_dropout(r->m, r->iteration, r->layer_no, MC_DROPOUT_SITE_ATTN_PROBS,
                          r->sl->sample0, on ? r->c->attention_dropout : 0.0f);
}

static void core_attention(const mc_layer_run_t *r, void *out, mc_attention_acts_t *s,
                           const mc_dropout_t *d)
{
    const mc_gpt_config_t *c = r->c;
    const int HD = c->head_dim;
    if (c->cp > 1) {
        mc_cp_attention_forward(r, out, s, d);
        return;
    }
    r->be->attention_forward(r->be, c->dt, out, s->state, r->m->attn_ws.scratch, s->qkv, c->seq,
                             r->B, r->t.heads, r->t.groups, HD, r->sl->segments,
                             mc_gpt_softmax_scale(c), d, r->t.head_start, c->heads);
}

static void *attn_forward(mc_layer_run_t *r, void *acts, const void *in)
{
    const mc_backend_t *be = r->be;
    const mc_gpt_config_t *c = r->c;
    const mc_tp_dims_t *t = &r->t;
    mc_attention_acts_t *s = acts;
    void *const *w = r->w;
    const int N = r->N, H = c->hidden, HD = c->head_dim;

    mc_linear_column_forward(r, c->qk_norm ? s->qkv_in : s->qkv, NULL, in, w[MC_PK_QKV_W],
                             w[MC_PK_QKV_B], H, t->qkv);
    if (c->qk_norm)
        be->qk_norm_forward(be, c->dt, s->qkv, s->qk_mean, s->qk_rstd, s->qkv_in, w[MC_PK_Q_NORM_W],
                            w[MC_PK_Q_NORM_B], w[MC_PK_K_NORM_W], w[MC_PK_K_NORM_B], N, t->groups,
                            t->heads / t->groups, HD, c->eps, c->rms);
    rope(r, s->qkv, 0); /* the saved qkv holds the rotated queries and keys */
    const mc_dropout_t d = probs_dropout(r, r->training);
    core_attention(r, s->out, s, &d);
    /* the row-parallel bias joins once, before the sum */
    return mc_linear_row_forward(r, s->out, w[MC_PK_PROJ_W],
                                 c->tp_rank == 0 ? w[MC_PK_PROJ_B] : NULL, t->attn);
}

static void attn_backward(mc_layer_run_t *r, void *acts, const void *in, void *dy, void *din)
{
    const mc_backend_t *be = r->be;
    const mc_gpt_config_t *c = r->c;
    const mc_tp_dims_t *t = &r->t;
    mc_attention_acts_t *s = acts;
    void *const *w = r->w, *const *gw = r->gw;
    const int N = r->N, H = c->hidden, HD = c->head_dim;
    const mc_dtype_t dt = c->dt, gdt = c->gdt;
    mc_gpt_t *m = r->m;
    void *d_qkv = m->attn_ws.d_qkv;

    /* d attn into tmp_h */
    mc_linear_row_backward(r, m->tmp_h, gw[MC_PK_PROJ_W], gw[MC_PK_PROJ_B], dy, s->out,
                           w[MC_PK_PROJ_W], NULL, t->attn);
    const mc_dropout_t d = probs_dropout(r, true);
    /* selective recomputation: core attention again, its output into dtmp_h (dy's buffer,
     * consumed, or free when dy is dres itself), which the backward then reads as the forward's
     * output */
    const void *out = s->out;
    if (c->recompute == MC_RECOMPUTE_SELECTIVE) {
        core_attention(r, m->dtmp_h, s, &d);
        out = m->dtmp_h;
    }
    if (c->cp > 1) mc_cp_attention_backward(r, d_qkv, m->tmp_h, out, s, &d);
    else
        be->attention_backward(be, dt, d_qkv, m->attn_ws.scratch, m->tmp_h, s->qkv, out, s->state,
                               c->seq, r->B, t->heads, t->groups, HD, r->sl->segments,
                               mc_gpt_softmax_scale(c), &d, t->head_start, c->heads);
    rope(r, d_qkv, 1); /* back through the rotation (and the q/k norms) */
    if (c->qk_norm)
        be->qk_norm_backward(be, dt, gdt, d_qkv, gw[MC_PK_Q_NORM_W], gw[MC_PK_Q_NORM_B],
                             gw[MC_PK_K_NORM_W], gw[MC_PK_K_NORM_B], s->qkv_in, w[MC_PK_Q_NORM_W],
                             w[MC_PK_K_NORM_W], s->qk_mean, s->qk_rstd, N, t->groups,
                             t->heads / t->groups, HD, c->rms);
    /* tmp_h (d attn) is consumed: it may take the whole-sequence input gradient */
    mc_linear_column_backward(r, din, gw[MC_PK_QKV_W], gw[MC_PK_QKV_B], d_qkv, in, w[MC_PK_QKV_W],
                              H, t->qkv);
}

const mc_block_ops_t mc_self_attention = {
    .name = "self-attention",
    .acts_at = offsetof(mc_layer_acts_t, attn.self),
    .params = attn_params,
    .plan = attn_plan,
    .plan_shared = attn_plan_shared,
    .setup = attn_setup,
    .forward = attn_forward,
    .backward = attn_backward,
};
