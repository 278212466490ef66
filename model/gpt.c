/* GPT forward and backward on the backend op table. Layout [s, b, h]; one microbatch in flight.
 *
 * Layer (pre-LN, MCore local spec):
 *   res = x;  y = LN1(x);  x = res + dropout(proj(attention(qkv(y))))
 *   res = x;  y = LN2(x);  x = res + dropout(fc2(gelu(fc1(y))))
 * with res = y under --apply-residual-connection-post-layernorm. */
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "base/error.h"
#include "model/gpt.h"
#include "model/rope.h"

/* ---------------------------------------------------------------- memory */

typedef struct {
    mc_gpt_t *m; /* NULL in the sizing pass */
    long bytes;
    int failed;
} alloc_ctx_t;

/* Every activation and workspace buffer comes from here and is recorded for mc_gpt_free. */
static void *take(alloc_ctx_t *a, long bytes)
{
    if (a->failed) return NULL;
    a->bytes += bytes;
    if (!a->m) return NULL; /* sizing pass */
    mc_gpt_t *m = a->m;
    if (m->n_bufs == m->cap_bufs) {
        int cap = m->cap_bufs ? 2 * m->cap_bufs : 64;
        void **b = realloc(m->bufs, (size_t)cap * sizeof(void *));
        if (!b) {
            a->failed = 1;
            return NULL;
        }
        m->bufs = b;
        m->cap_bufs = cap;
    }
    void *p = m->be->alloc(m->be, (size_t)bytes);
    if (!p) a->failed = 1;
    else m->bufs[m->n_bufs++] = p;
    return p;
}

/* This rank's slice of the tensor-parallel dimensions (Megatron's column/row-parallel layers):
 * heads, attention width, ffn width and vocabulary, and where its vocabulary starts. */
typedef struct {
    int heads, groups, attn, qkv, ffn, ffn1, vocab, vocab_start, head_start;
    /* sequence parallelism: this rank's sequence rows [seq_start, seq_start + seq) of the
     * LayerNorm, dropout and residual regions (the whole sequence without it) */
    bool sp;
    int seq, seq_start;
} tp_dims_t;

static tp_dims_t tp_dims(const mc_gpt_config_t *c)
{
    tp_dims_t d;
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

long mc_gpt_boundary_elems(const mc_gpt_t *m, int b)
{
    return (long)tp_dims(&m->cfg).seq * b * m->cfg.hidden;
}

/* Full recomputation: whether layer j of a model chunk of n layers keeps only its recompute
 * group's input, and the group's layers [first, last] (Megatron's
 * TransformerBlock._checkpointed_forward, per block, i.e. per model chunk: uniform groups of
 * recompute_num_layers layers, or each of the first recompute_num_layers layers alone). */
static bool recomputed(const mc_gpt_config_t *c, int n, int j, int *first, int *last)
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

/* Buffers of one layer's saved activations: x (its input) when with_x, probs when with_probs. */
/* Bytes of one layer's saved attention state and of the attention backward's scratch (the
 * backend decides: probabilities on the CPU, softmax statistics in a fused kernel). */
static void attention_bytes(const mc_gpt_t *m, long *state, long *scratch)
{
    const mc_gpt_config_t *c = &m->cfg;
    size_t st, sc;
    m->be->attention_sizes(m->be, c->dt, c->seq, c->max_batch, tp_dims(c).heads, c->head_dim, &st,
                           &sc);
    *state = (long)st;
    *scratch = (long)sc;
}

static void take_layer(const mc_gpt_t *m, alloc_ctx_t *acts, mc_layer_acts_t *a, bool with_x,
                       bool with_state)
{
    const mc_gpt_config_t *c = &m->cfg;
    const tp_dims_t t = tp_dims(c);
    const long S = c->seq, B = c->max_batch, H = c->hidden, F = t.ffn;
    const long SB = S * B, LB = (long)t.seq * B, f = sizeof(float), e = (long)mc_dtype_size(c->dt);
    long state, scratch;
    attention_bytes(m, &state, &scratch);
    if (with_x) a->x = take(acts, LB * H * e);
    a->ln1 = take(acts, LB * H * e);
    if (!c->rms) a->ln1_mean = take(acts, LB * f); /* RMSNorm keeps only rstd */
    a->ln1_rstd = take(acts, LB * f);
    a->qkv = take(acts, SB * t.qkv * e);
    if (c->qk_norm) {
        const long heads = SB * t.groups * (t.heads / t.groups + 1);
        a->qkv_in = take(acts, SB * t.qkv * e);
        if (!c->rms) a->qk_mean = take(acts, heads * f);
        a->qk_rstd = take(acts, heads * f);
    }
    if (with_state) a->attn_state = take(acts, state);
    a->attn = take(acts, SB * t.attn * e);
    a->x_mid = take(acts, LB * H * e);
    a->ln2 = take(acts, LB * H * e);
    if (!c->rms) a->ln2_mean = take(acts, LB * f);
    a->ln2_rstd = take(acts, LB * f);
    a->fc1 = take(acts, SB * t.ffn1 * e);
    a->act = take(acts, SB * F * e);
}

/* What the chunks of slot group g need: the most layers of any, and whether one has the
 * embedding; the loss is group 1's. */
static void group_needs(const mc_gpt_config_t *c, int g, int *n_layers, bool *pre, bool *post)
{
    *n_layers = 0;
    *pre = false;
    *post = g == 1;
    for (int k = 0; k < c->n_chunks; k++) {
        if (mc_gpt_slot_group(c, k) != g) continue;
        if (c->chunk[k].n_layers > *n_layers) *n_layers = c->chunk[k].n_layers;
        *pre |= c->chunk[k].pre;
    }
}

/* One slot of group g: the microbatch's data its chunks read, the input and output, and every
 * layer's saved activations, sized for the group's largest chunk (a smaller one uses a prefix:
 * the recomputation groups of a prefix are laid out the same). Recomputed layers keep only their group's input and point at the
 * shared buffers of one recomputed group (m->rc), which the backward refills by running the
 * group's forward again; with selective recomputation every layer's softmax probabilities share
 * one buffer. */
static void plan_slot(mc_gpt_t *m, alloc_ctx_t *acts, int g, mc_gpt_slot_t *s)
{
    const mc_gpt_config_t *c = &m->cfg;
    mc_chunk_cfg_t group;
    group_needs(c, g, &group.n_layers, &group.pre, &group.post);
    const mc_chunk_cfg_t *ch = &group;
    const tp_dims_t t = tp_dims(c);
    const long S = c->seq, B = c->max_batch, H = c->hidden;
    const long SB = S * B, LB = (long)t.seq * B, f = sizeof(float), ib = SB * (long)sizeof(int32_t);
    const long e = (long)mc_dtype_size(c->dt);
    const bool selective = c->recompute == MC_RECOMPUTE_SELECTIVE;
    const int n = ch->n_layers;
    int first, last;

    if (ch->pre) {
        s->tokens = take(acts, ib);
        s->positions = take(acts, ib);
    }
    if (ch->post) {
        s->labels = take(acts, ib);
        s->loss_mask = take(acts, SB * f);
    }
    s->segments_buf = take(acts, ib);
    s->in = take(acts, LB * H * e);
    for (int j = 0; j < n; j++) {
        mc_layer_acts_t *a = &s->acts[j];
        if (recomputed(c, n, j, &first, &last)) {
            if (j == first) a->x = j == 0 ? s->in : take(acts, LB * H * e);
            void *x = j == first ? a->x : m->rc[j - first].x;
            *a = m->rc[j - first];
            a->x = x;
        } else {
            take_layer(m, acts, a, j > 0, !selective);
            if (j == 0) a->x = s->in;
            if (selective) a->attn_state = m->state_scratch;
        }
    }
    if (ch->post) {
        s->x_final = n ? take(acts, LB * H * e) : s->in;
        s->lnf = take(acts, LB * H * e);
        if (!c->rms) s->lnf_mean = take(acts, LB * f);
        s->lnf_rstd = take(acts, LB * f);
        s->logits = take(acts, SB * t.vocab * e);
        s->ce_max = take(acts, SB * f);
        s->ce_sum = take(acts, 2 * SB * f); /* with ce_target: one all-reduce for both */
        s->ce_target = s->ce_sum ? s->ce_sum + SB : NULL;
        s->losses = take(acts, SB * f);
    } else {
        s->out = n ? take(acts, LB * H * e) : s->in;
        s->dout = take(acts, LB * H * e);
    }
}

/* One routine both sizes and allocates, so the logged plan is what is allocated. The slot and
 * rc arrays exist in both passes (host structs); take() hands out NULL when sizing. */
/* --apply-layernorm-1p: whether parameter p is a norm's weight (input_layernorm,
 * pre_mlp_layernorm, q/k_layernorm, final_layernorm: each one TE's zero_centered_gamma
 * covers), and the sizes of the ones vector and of the (1 + w) copies. */
static bool is_norm_weight(const mc_param_t *p)
{
    const size_t n = strlen(p->name), k = strlen("layernorm.weight");
    return n >= k && strcmp(p->name + n - k, "layernorm.weight") == 0;
}

static void norm_1p_sizes(const mc_gpt_t *m, long *most, long *total)
{
    *most = *total = 1;
    for (int i = 0; i < m->n_params; i++)
        if (is_norm_weight(&m->params[i])) {
            *total += m->params[i].numel;
            if (m->params[i].numel > *most) *most = m->params[i].numel;
        }
}

static void plan_activations(mc_gpt_t *m, alloc_ctx_t *acts, alloc_ctx_t *ws)
{
    const mc_gpt_config_t *c = &m->cfg;
    const tp_dims_t t = tp_dims(c);
    const long S = c->seq, B = c->max_batch, H = c->hidden, F = t.ffn;
    const long A = t.attn, QKV = t.qkv;
    const long SB = S * B, f = sizeof(float), e = (long)mc_dtype_size(c->dt);
    const long LB = (long)t.seq * B; /* rows of the sequence-local regions */
    long state, scratch;
    attention_bytes(m, &state, &scratch);

    int groups = 0, first, last;
    for (int ci = 0; ci < c->n_chunks; ci++)
        for (int j = 0; j < c->chunk[ci].n_layers; j++)
            if (recomputed(c, c->chunk[ci].n_layers, j, &first, &last) && last - first + 1 > groups)
                groups = last - first + 1;
    for (int k = 0; k < groups; k++) take_layer(m, acts, &m->rc[k], k > 0, true);
    if (c->recompute == MC_RECOMPUTE_SELECTIVE) m->state_scratch = take(acts, state);
    for (int g = 0; g < MC_SLOT_GROUPS; g++)
        for (int k = 0; k < c->slots[g]; k++) plan_slot(m, acts, g, &m->slots[g][k]);

    m->dloss = take(ws, SB * f);
    m->tmp_h = take(ws, SB * (H > A ? H : A) * e);
    m->dx = take(ws, LB * H * e);
    m->dres = take(ws, LB * H * e);
    /* the whole sequence of a sequence-local activation, gathered for a column-parallel layer */
    m->gath = t.sp ? take(ws, SB * H * e) : NULL;
    m->dtmp_h = take(ws, SB * (H > A ? H : A) * e);
    m->d_ffn = take(ws, SB * t.ffn1 * e);
    m->d_act = c->swiglu ? take(ws, SB * F * e) : NULL;
    m->d_qkv = take(ws, SB * QKV * e);
    m->attn_scratch = take(ws, scratch);
    if (c->norm_1p) {
        long most, total;
        norm_1p_sizes(m, &most, &total);
        m->norm_1p_ones = take(ws, most * e);
        m->norm_1p_eff = take(ws, total * e);
    }
    if (c->pos == MC_POS_ROPE) {
        m->rope_cos = take(ws, S * (c->rope.rot_dim / 2) * f);
        m->rope_sin = take(ws, S * (c->rope.rot_dim / 2) * f);
    }
}

/* The host structs of the slots and the recomputation buffers. */
static int alloc_slot_structs(mc_gpt_t *m)
{
    const mc_gpt_config_t *c = &m->cfg;
    int most = 1;
    for (int ci = 0; ci < c->n_chunks; ci++)
        if (c->chunk[ci].n_layers > most) most = c->chunk[ci].n_layers;
    for (int g = 0; g < MC_SLOT_GROUPS; g++) {
        int n;
        bool pre, post;
        group_needs(c, g, &n, &pre, &post);
        m->slots[g] = calloc((size_t)(c->slots[g] ? c->slots[g] : 1), sizeof(mc_gpt_slot_t));
        if (!m->slots[g]) return -1;
        for (int k = 0; k < c->slots[g]; k++) {
            m->slots[g][k].acts = calloc((size_t)(n + 1), sizeof(mc_layer_acts_t));
            if (!m->slots[g][k].acts) return -1;
        }
    }
    m->rc = calloc((size_t)most + 1, sizeof(mc_layer_acts_t));
    return m->rc ? 0 : -1;
}

static void free_slot_structs(mc_gpt_t *m)
{
    for (int g = 0; g < MC_SLOT_GROUPS; g++) {
        if (!m->slots[g]) continue;
        for (int k = 0; k < m->cfg.slots[g]; k++) free(m->slots[g][k].acts);
        free(m->slots[g]);
        m->slots[g] = NULL;
    }
    free(m->rc);
    m->rc = NULL;
}

void mc_gpt_memory(const mc_gpt_t *m, const mc_backend_t *be, long *param_bytes, long *grad_bytes,
                   long *act_bytes, long *ws_bytes)
{
    mc_gpt_t tmp = *m;
    tmp.be = be;
    memset(tmp.slots, 0, sizeof(tmp.slots));
    tmp.rc = NULL;
    alloc_ctx_t a = {0}, w = {0};
    if (alloc_slot_structs(&tmp) != 0) mc_fatal("out of host memory planning activations");
    plan_activations(&tmp, &a, &w);
    free_slot_structs(&tmp);
    *param_bytes = m->n_elems * (long)mc_dtype_size(m->cfg.dt);
    *grad_bytes = m->n_elems * (long)mc_dtype_size(m->cfg.gdt);
    *act_bytes = a.bytes;
    *ws_bytes = w.bytes;
}

/* The rotary angles of positions 0..S-1 (Megatron's RotaryEmbedding over the whole
 * sequence, for every layer and microbatch). */
static int upload_rope_tables(mc_gpt_t *m)
{
    const long n = (long)m->cfg.seq * (m->cfg.rope.rot_dim / 2);
    float *host = malloc(2 * (size_t)n * sizeof(float));
    if (!host) return -1;
    mc_rope_tables(&m->cfg.rope, m->cfg.seq, host, host + n);
    m->be->memcpy_h2d(m->be, m->rope_cos, host, (size_t)n * sizeof(float));
    m->be->memcpy_h2d(m->be, m->rope_sin, host + n, (size_t)n * sizeof(float));
    free(host);
    return 0;
}

/* The norm weight pointer *w of m->p, redirected to its (1 + w) copy. */
static void to_norm_1p(const mc_gpt_t *m, void **w)
{
    for (int i = 0; *w && i < m->n_params; i++)
        if (m->norm_1p[i] && mc_elem(m->param_buf, m->cfg.dt, m->params[i].offset) == *w) {
            *w = m->norm_1p[i];
            return;
        }
}

/* --apply-layernorm-1p: the ones vector, a (1 + w) copy per norm weight, and m->p's norm
 * weights pointing at the copies (the gradients stay w's: d(1 + w)/dw = 1). */
static int setup_norm_1p(mc_gpt_t *m)
{
    const mc_dtype_t dt = m->cfg.dt;
    long most, total, used = 0;
    norm_1p_sizes(m, &most, &total);
    m->norm_1p = calloc((size_t)m->n_params, sizeof(void *));
    uint16_t *ones = malloc((size_t)most * sizeof(float));
    if (!m->norm_1p || !ones) return -1;
    for (long i = 0; i < most; i++)
        if (dt == MC_DT_F32) ((float *)(void *)ones)[i] = 1.0f;
        else ones[i] = dt == MC_DT_BF16 ? mc_bf16_from_f32(1.0f) : mc_f16_from_f32(1.0f);
    m->be->memcpy_h2d(m->be, m->norm_1p_ones, ones, (size_t)most * mc_dtype_size(dt));
    free(ones);
    for (int i = 0; i < m->n_params; i++)
        if (is_norm_weight(&m->params[i])) {
            m->norm_1p[i] = mc_elem(m->norm_1p_eff, dt, used);
            used += m->params[i].numel;
        }
    to_norm_1p(m, &m->p.lnf_w);
    for (int j = 0; j < m->n_local_layers; j++) {
        mc_layer_ptrs_t *lp = &m->p.layers[j];
        to_norm_1p(m, &lp->ln1_w);
        to_norm_1p(m, &lp->ln2_w);
        to_norm_1p(m, &lp->qln_w);
        to_norm_1p(m, &lp->kln_w);
    }
    return 0;
}

int mc_gpt_alloc(mc_gpt_t *m, const mc_backend_t *be)
{
    m->be = be;
    m->loss_scale = 1.0f;
    m->param_buf = be->alloc(be, (size_t)m->n_elems * mc_dtype_size(m->cfg.dt));
    m->grad_buf = be->alloc(be, (size_t)m->n_elems * mc_dtype_size(m->cfg.gdt));
    m->host_losses = calloc((size_t)m->cfg.seq * (size_t)m->cfg.max_batch, sizeof(float));
    if (!m->param_buf || !m->grad_buf || !m->host_losses || alloc_slot_structs(m) != 0) return -1;
    alloc_ctx_t a = {.m = m}, w = {.m = m};
    plan_activations(m, &a, &w);
    if (a.failed || w.failed) return -1;
    if (m->cfg.pos == MC_POS_ROPE && upload_rope_tables(m) != 0) return -1;
    mc_gpt_bind_ptrs(m, m->param_buf, m->cfg.dt, &m->p);
    mc_gpt_bind_ptrs(m, m->grad_buf, m->cfg.gdt, &m->g);
    return m->cfg.norm_1p ? setup_norm_1p(m) : 0;
}

void mc_gpt_free(mc_gpt_t *m)
{
    const mc_backend_t *be = m->be;
    if (be) {
        for (int i = 0; i < m->n_bufs; i++) be->free(be, m->bufs[i]);
        if (m->param_buf) be->free(be, m->param_buf);
        if (m->grad_buf) be->free(be, m->grad_buf);
    }
    free_slot_structs(m);
    free(m->bufs);
    free(m->host_losses);
    free(m->p.layers);
    free(m->g.layers);
    free(m->norm_1p);
    free(m->params);
    free(m->layer_no);
    memset(m, 0, sizeof(*m));
}

/* ---------------------------------------------------------------- forward */

/* Parameter blocks in table order: 0 = embeddings (pre chunk), 1..n_local_layers = this rank's
 * layers, then the final norm and output layer (post chunk); a block may be empty. The tied
 * output weight of a one-stage model is the word embedding, complete only after the embedding
 * backward. */
static void param_block(const mc_gpt_t *m, int k, int *first, int *n)
{
    const int NL = m->n_local_layers, P = m->params_per_layer;
    if (k == 0) *first = 0, *n = m->layer_param0;
    else if (k <= NL) *first = m->layer_param0 + (k - 1) * P, *n = P;
    else *first = m->layer_param0 + NL * P, *n = m->n_params - *first;
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
    for (int i = first; m->norm_1p && i < first + n; i++)
        if (m->norm_1p[i])
            m->be->add(m->be, m->cfg.dt, m->norm_1p[i],
                       mc_elem(m->param_buf, m->cfg.dt, m->params[i].offset), m->norm_1p_ones,
                       m->params[i].numel);
}

static void grads_final(mc_gpt_t *m, int k)
{
    if (!m->grads_final_hook) return;
    int first, n;
    param_block(m, k, &first, &n);
    if (n) m->grads_final_hook(m->hook_ctx, first, n);
}

/* Sums a partial result over the tp ranks (the forward of a row-parallel layer, the backward of
 * a column-parallel one). */
static void tp_reduce(mc_gpt_t *m, void *buf, long n, mc_dtype_t dt, mc_redop_t op)
{
    if (m->cfg.tp > 1) mc_all_reduce(m->comm, m->tp_group, buf, (size_t)n, dt, op);
}

/* Sequence parallelism (Korthikanti et al.): the input of a column-parallel layer is the
 * sequence-local activation all-gathered over tp (into m->gath); the backward of a row-parallel
 * layer gathers its output gradient the same way. Without it, the tensor itself. */
static const void *seq_gather(mc_gpt_t *m, const tp_dims_t *t, const void *local, long n_local)
{
    if (!t->sp) return local;
    mc_all_gather(m->comm, m->tp_group, local, m->gath, (size_t)n_local, m->cfg.dt);
    return m->gath;
}

/* A partial sum over tp of a whole-sequence tensor (a row-parallel output; a column-parallel
 * input gradient): all-reduced in place, or with sequence parallelism reduce-scattered into this
 * rank's rows in `local`. Returns the summed buffer. */
static void *tp_sum(mc_gpt_t *m, const tp_dims_t *t, void *partial, void *local, long n_local)
{
    if (!t->sp) {
        tp_reduce(m, partial, n_local, m->cfg.dt, MC_OP_SUM);
        return partial;
    }
    mc_reduce_scatter(m->comm, m->tp_group, partial, local, (size_t)n_local, m->cfg.dt, MC_OP_SUM);
    return local;
}

static mc_dropout_t dropout_site(const mc_gpt_t *m, uint32_t iteration, uint32_t layer,
                                 uint32_t site, uint64_t sample0, float p)
{
    mc_dropout_t d = {.seed = m->cfg.seed,
                      .iteration = iteration,
                      .layer = layer,
                      .site = site,
                      .sample0 = sample0,
                      .p = p};
    return d;
}

/* The model's normalization (LayerNorm or RMSNorm) over N rows of the hidden size: the op, the
 * residual add fused with it, and the backward accumulating into dx. */
static void norm_forward(const mc_gpt_t *m, void *out, float *mean, float *rstd, const void *x,
                         const void *w, const void *b, int N)
{
    const mc_gpt_config_t *c = &m->cfg;
    if (c->rms) m->be->rmsnorm_forward(m->be, c->dt, out, rstd, x, w, N, c->hidden, c->eps);
    else m->be->layernorm_forward(m->be, c->dt, out, mean, rstd, x, w, b, N, c->hidden, c->eps);
}

static void add_norm_forward(const mc_gpt_t *m, void *sum, void *out, float *mean, float *rstd,
                             const void *a, const void *b, const void *w, const void *bias, int N)
{
    const mc_gpt_config_t *c = &m->cfg;
    if (c->rms)
        m->be->add_rmsnorm_forward(m->be, c->dt, sum, out, rstd, a, b, w, N, c->hidden, c->eps);
    else
        m->be->add_layernorm_forward(m->be, c->dt, sum, out, mean, rstd, a, b, w, bias, N,
                                     c->hidden, c->eps);
}

static void norm_backward_acc(const mc_gpt_t *m, void *dx, void *dw, void *db, const void *dout,
                              const void *x, const void *w, const float *mean, const float *rstd,
                              int N)
{
    const mc_gpt_config_t *c = &m->cfg;
    if (c->rms)
        m->be->rmsnorm_backward_acc(m->be, c->dt, c->gdt, dx, dw, dout, x, w, rstd, N, c->hidden);
    else
        m->be->layernorm_backward_acc(m->be, c->dt, c->gdt, dx, dw, db, dout, x, w, mean, rstd, N,
                                      c->hidden);
}

/* Rotary embeddings on the query and key heads of a qkv tensor in place: forward, or the
 * inverse rotation on its gradient. */
static void rope(const mc_gpt_t *m, const tp_dims_t *t, void *qkv, int B, int inverse)
{
    const mc_gpt_config_t *c = &m->cfg;
    if (c->pos != MC_POS_ROPE) return;
    m->be->rope(m->be, c->dt, qkv, m->rope_cos, m->rope_sin, c->seq, B, t->groups,
                t->heads / t->groups, c->head_dim, c->rope.rot_dim, c->rope.interleaved, inverse);
}

/* Layer j of the chunk in flight (pre-LN, MCore local spec): reads acts[j].x, fills acts[j] and
 * writes the next layer's input (or the chunk's output). When recomputing, the chunk's output
 * (which may be in flight to the next stage) is not written again: the last layer of a
 * recomputed group writes its unchanged value to scratch instead. */
static void forward_layer(mc_gpt_t *m, int j, uint32_t iteration, bool training, bool recomputing)
{
    const mc_backend_t *be = m->be;
    const mc_gpt_config_t *c = &m->cfg;
    const tp_dims_t t = tp_dims(c);
    mc_gpt_slot_t *sl = m->cur;
    const mc_chunk_cfg_t *ch = &c->chunk[m->cur_chunk];
    const int lj = m->chunk_local0[m->cur_chunk] + j; /* local layer index */
    const int S = c->seq, B = sl->batch, H = c->hidden, F = t.ffn, NH = t.heads, HD = c->head_dim;
    const int A = t.attn, N = S * B, Sl = t.seq, s0 = t.seq_start;
    const long NL = (long)Sl * B * H;
    const bool bias_here = c->tp_rank == 0;
    const float hp = training ? c->hidden_dropout : 0.0f;
    const float ap = training ? c->attention_dropout : 0.0f;
    mc_dropout_t d;
    const mc_dtype_t dt = c->dt;
    mc_layer_acts_t *a = &sl->acts[j];
    const mc_layer_ptrs_t *w = &m->p.layers[lj];
    void *x_out = j + 1 < ch->n_layers ? sl->acts[j + 1].x
                  : recomputing        ? m->dx
                  : ch->post           ? sl->x_final
                                       : sl->out;
    const uint32_t layer_no = (uint32_t)m->layer_no[lj] + 1;

    if (!m->ln_done) {
        params_needed(m, lj + 1);
        norm_forward(m, a->ln1, a->ln1_mean, a->ln1_rstd, a->x, w->ln1_w, w->ln1_b, Sl * B);
    }
    m->ln_done = false;
    be->linear_forward(be, dt, c->qk_norm ? a->qkv_in : a->qkv, seq_gather(m, &t, a->ln1, NL),
                       w->qkv_w, w->qkv_b, N, H, t.qkv);
    if (c->qk_norm)
        be->qk_norm_forward(be, dt, a->qkv, a->qk_mean, a->qk_rstd, a->qkv_in, w->qln_w, w->qln_b,
                            w->kln_w, w->kln_b, N, t.groups, NH / t.groups, HD, c->eps, c->rms);
    rope(m, &t, a->qkv, B, 0); /* the saved qkv holds the rotated queries and keys */
    d = dropout_site(m, iteration, layer_no, MC_DROPOUT_SITE_ATTN_PROBS, sl->sample0, ap);
    be->attention_forward(be, dt, a->attn, a->attn_state, m->attn_scratch, a->qkv, S, B, NH,
                          t.groups, HD, sl->segments, 1.0f / sqrtf((float)HD), &d, t.head_start,
                          c->heads);
    be->linear_forward(be, dt, m->tmp_h, a->attn, w->proj_w, bias_here ? w->proj_b : NULL, N, A, H);
    void *y = tp_sum(m, &t, m->tmp_h, m->dtmp_h, NL); /* dtmp_h: free in forward */
    d = dropout_site(m, iteration, layer_no, MC_DROPOUT_SITE_ATTN_OUT, sl->sample0, hp);
    be->dropout_forward(be, dt, y, y, &d, Sl, B, H, s0, H, 0);
    add_norm_forward(m, a->x_mid, a->ln2, a->ln2_mean, a->ln2_rstd,
                     c->post_ln_residual ? a->ln1 : a->x, y, w->ln2_w, w->ln2_b, Sl * B);

    const void *ln2_full = seq_gather(m, &t, a->ln2, NL);
    if (c->swiglu) {
        be->linear_forward(be, dt, a->fc1, ln2_full, w->fc1_w, w->fc1_b, N, H, t.ffn1);
        be->swiglu_forward(be, dt, a->act, a->fc1, N, F);
    } else {
        be->linear_gelu_forward(be, dt, a->act, a->fc1, ln2_full, w->fc1_w, w->fc1_b, N, H, F,
                                c->act);
    }
    be->linear_forward(be, dt, m->tmp_h, a->act, w->fc2_w, bias_here ? w->fc2_b : NULL, N, F, H);
    y = tp_sum(m, &t, m->tmp_h, m->dtmp_h, NL);
    d = dropout_site(m, iteration, layer_no, MC_DROPOUT_SITE_MLP_OUT, sl->sample0, hp);
    be->dropout_forward(be, dt, y, y, &d, Sl, B, H, s0, H, 0);
    /* The residual add fused with the LayerNorm that reads the sum next, in a plain forward (a
     * recomputation ends its groups elsewhere): the next layer's LN1, or the final LayerNorm. */
    const void *res = c->post_ln_residual ? a->ln2 : a->x_mid;
    if (!recomputing && j + 1 < ch->n_layers) {
        mc_layer_acts_t *na = &sl->acts[j + 1];
        const mc_layer_ptrs_t *nw = &m->p.layers[lj + 1];
        params_needed(m, lj + 2);
        add_norm_forward(m, x_out, na->ln1, na->ln1_mean, na->ln1_rstd, res, y, nw->ln1_w,
                         nw->ln1_b, Sl * B);
        m->ln_done = true;
    } else if (!recomputing && ch->post) {
        params_needed(m, m->n_local_layers + 1);
        add_norm_forward(m, x_out, sl->lnf, sl->lnf_mean, sl->lnf_rstd, res, y, m->p.lnf_w,
                         m->p.lnf_b, Sl * B);
        m->ln_done = true;
    } else {
        be->add(be, dt, x_out, res, y, NL);
    }
}

/* The gradient through a hidden-state dropout of site d: into dst with its mask, or, with
 * probability 0 (the identity), src itself: no copy. */
static const void *dropout_grad(mc_gpt_t *m, const mc_dropout_t *d, void *dst, const void *src,
                                int Sl, int B, int s0)
{
    if (d->p <= 0.0f) return src;
    const int H = m->cfg.hidden;
    m->be->dropout_backward(m->be, m->cfg.dt, dst, src, d, Sl, B, H, s0, H, 0);
    return dst;
}

/* Layer j of the chunk in flight, backward: dres holds the gradient at the layer's output and
 * gets the gradient at its input; parameter gradients accumulate. */
static void backward_layer(mc_gpt_t *m, int j, uint32_t iteration)
{
    const mc_backend_t *be = m->be;
    const mc_gpt_config_t *c = &m->cfg;
    const tp_dims_t t = tp_dims(c);
    const mc_gpt_slot_t *sl = m->cur;
    const int lj = m->chunk_local0[m->cur_chunk] + j;
    const int S = c->seq, B = sl->batch, H = c->hidden, F = t.ffn, NH = t.heads, HD = c->head_dim;
    const int A = t.attn, N = S * B, Sl = t.seq, s0 = t.seq_start, NLr = Sl * B;
    const long NHl = (long)NLr * H;
    const mc_dtype_t dt = c->dt, gdt = c->gdt;
    void *dfull = t.sp ? m->tmp_h : m->dx;
    const float hp = c->hidden_dropout, ap = c->attention_dropout;
    const uint64_t sample0 = sl->sample0;
    const mc_layer_acts_t *a = &sl->acts[j];
    const mc_layer_ptrs_t *w = &m->p.layers[lj];
    const mc_layer_ptrs_t *gw = &m->g.layers[lj];
    const uint32_t layer_no = (uint32_t)m->layer_no[lj] + 1;
    mc_dropout_t d;

    /* ---- MLP block: x_out = res2 + dropout(fc2(gelu(fc1(ln2)))) ---- */
    d = dropout_site(m, iteration, layer_no, MC_DROPOUT_SITE_MLP_OUT, sample0, hp);
    const void *dmlp_full =
        seq_gather(m, &t, dropout_grad(m, &d, m->dtmp_h, m->dres, Sl, B, s0), NHl);
    if (c->swiglu) {
        be->linear_backward(be, dt, gdt, m->d_act, gw->fc2_w, gw->fc2_b, dmlp_full, a->act,
                            w->fc2_w, N, F, H);
        be->swiglu_backward(be, dt, m->d_ffn, m->d_act, a->fc1, N, F);
    } else {
        be->linear_backward_gelu(be, dt, gdt, m->d_ffn, gw->fc2_w, gw->fc2_b, dmlp_full, a->act,
                                 w->fc2_w, a->fc1, N, F, H, c->act);
    }
    /* d ln2 into dx */
    be->linear_backward(be, dt, gdt, dfull, gw->fc1_w, gw->fc1_b, m->d_ffn,
                        seq_gather(m, &t, a->ln2, NHl), w->fc1_w, N, H, t.ffn1);
    tp_sum(m, &t, dfull, m->dx, NHl);
    if (c->post_ln_residual) {
        /* res2 = ln2: its gradient joins d ln2, and x_mid gets only the LN path */
        be->add_inplace(be, dt, m->dx, m->dres, NHl);
        be->memset0(be, m->dres, (size_t)NHl * mc_dtype_size(dt));
    }
    /* dres (d x_mid) += LN2 backward */
    norm_backward_acc(m, m->dres, gw->ln2_w, gw->ln2_b, m->dx, a->x_mid, w->ln2_w, a->ln2_mean,
                      a->ln2_rstd, NLr);

    /* ---- attention block: x_mid = res1 + dropout(proj(attn(qkv(ln1)))) ---- */
    d = dropout_site(m, iteration, layer_no, MC_DROPOUT_SITE_ATTN_OUT, sample0, hp);
    const void *dproj = dropout_grad(m, &d, m->dtmp_h, m->dres, Sl, B, s0);
    /* d attn into tmp_h (free during backward) */
    be->linear_backward(be, dt, gdt, m->tmp_h, gw->proj_w, gw->proj_b,
                        seq_gather(m, &t, dproj, NHl), a->attn, w->proj_w, N, A, H);
    d = dropout_site(m, iteration, layer_no, MC_DROPOUT_SITE_ATTN_PROBS, sample0, ap);
    /* selective recomputation: core attention again (its output into dtmp_h, free here, which
     * the backward then reads as the forward's output) */
    const void *attn_out = a->attn;
    if (c->recompute == MC_RECOMPUTE_SELECTIVE) {
        be->attention_forward(be, dt, m->dtmp_h, a->attn_state, m->attn_scratch, a->qkv, S, B, NH,
                              t.groups, HD, sl->segments, 1.0f / sqrtf((float)HD), &d, t.head_start,
                              c->heads);
        attn_out = m->dtmp_h;
    }
    be->attention_backward(be, dt, m->d_qkv, m->attn_scratch, m->tmp_h, a->qkv, attn_out,
                           a->attn_state, S, B, NH, t.groups, HD, sl->segments,
                           1.0f / sqrtf((float)HD), &d, t.head_start, c->heads);
    rope(m, &t, m->d_qkv, B, 1); /* back through the rotation (and the q/k norms) */
    if (c->qk_norm)
        be->qk_norm_backward(be, dt, gdt, m->d_qkv, gw->qln_w, gw->qln_b, gw->kln_w, gw->kln_b,
                             a->qkv_in, w->qln_w, w->kln_w, a->qk_mean, a->qk_rstd, N, t.groups,
                             NH / t.groups, HD, c->rms);
    /* tmp_h (d attn) is consumed: it may take the whole-sequence d ln1 */
    be->linear_backward(be, dt, gdt, dfull, gw->qkv_w, gw->qkv_b, m->d_qkv,
                        seq_gather(m, &t, a->ln1, NHl), w->qkv_w, N, H, t.qkv);
    tp_sum(m, &t, dfull, m->dx, NHl);
    if (c->post_ln_residual) {
        be->add_inplace(be, dt, m->dx, m->dres, NHl);
        be->memset0(be, m->dres, (size_t)NHl * mc_dtype_size(dt));
    }
    norm_backward_acc(m, m->dres, gw->ln1_w, gw->ln1_b, m->dx, a->x, w->ln1_w, a->ln1_mean,
                      a->ln1_rstd, NLr);
    grads_final(m, lj + 1);
}

static mc_gpt_slot_t *use_slot(mc_gpt_t *m, int c, int k)
{
    if (c < 0 || c >= m->cfg.n_chunks || k < 0 || k >= m->cfg.slots[mc_gpt_slot_group(&m->cfg, c)])
        mc_fatal("internal error: no activation slot %d for model chunk %d", k, c);
    m->cur = &m->slots[mc_gpt_slot_group(&m->cfg, c)][k];
    m->cur_chunk = c;
    return m->cur;
}

/* Vocab-parallel cross-entropy in fp32 (Megatron's _VocabParallelCrossEntropy): the global max,
 * then the global sum-exp and predicted logit, then the loss; in a training forward whose loss
 * weight is known, the loss gradient in the same pass over the logits (left in their place).
 * One rank holding the whole vocabulary needs no reductions between the steps: the one op forms
 * the statistics too. */
static void cross_entropy(mc_gpt_t *m, mc_gpt_slot_t *sl, const tp_dims_t *t,
                          const mc_microbatch_t *mb, bool training)
{
    const mc_backend_t *be = m->be;
    const mc_dtype_t dt = m->cfg.dt;
    const int S = m->cfg.seq, B = mb->b, N = S * B;
    const bool grad = training && mb->loss_weight > 0;
    /* d loss / d loss[b,s] = mask * weight, times the loss scale (Megatron's scale_loss) */
    const float scale = mb->loss_weight * m->loss_scale;
    sl->grad_weight = grad ? mb->loss_weight : 0.0f;
    if (m->cfg.tp > 1) {
        be->ce_max(be, dt, sl->ce_max, sl->logits, N, t->vocab);
        tp_reduce(m, sl->ce_max, N, MC_DT_F32, MC_OP_MAX);
        be->ce_sums(be, dt, sl->ce_sum, sl->ce_target, sl->logits, sl->ce_max, sl->labels, S, B,
                    t->vocab, t->vocab_start);
        tp_reduce(m, sl->ce_sum, 2L * N, MC_DT_F32, MC_OP_SUM);
    }
    const bool stats = m->cfg.tp > 1;
    be->ce_fused(be, dt, sl->losses, sl->logits, stats ? sl->ce_max : NULL,
                 stats ? sl->ce_sum : NULL, stats ? sl->ce_target : NULL, sl->labels,
                 grad ? sl->loss_mask : NULL, scale, S, B, t->vocab, t->vocab_start);
    if (training && !grad && !stats) { /* the backward forms the gradient from these */
        be->ce_max(be, dt, sl->ce_max, sl->logits, N, t->vocab);
        be->ce_sums(be, dt, sl->ce_sum, sl->ce_target, sl->logits, sl->ce_max, sl->labels, S, B,
                    t->vocab, t->vocab_start);
    }
}

void mc_gpt_forward_chunk(mc_gpt_t *m, int c, int k, const mc_microbatch_t *mb, uint32_t iteration,
                          bool training, double *loss_sum, double *num_tokens)
{
    const mc_backend_t *be = m->be;
    const mc_gpt_config_t *cf = &m->cfg;
    const mc_chunk_cfg_t *ch = &cf->chunk[c];
    const tp_dims_t t = tp_dims(cf);
    const int S = cf->seq, B = mb->b, H = cf->hidden, N = S * B, Sl = t.seq, s0 = t.seq_start;
    const long NL = (long)Sl * B * H;        /* elements of a sequence-local [s, b, h] activation */
    const bool bias_here = cf->tp_rank == 0; /* the position embedding joins once, before the sum */
    const float hp = training ? cf->hidden_dropout : 0.0f;
    const mc_dtype_t dt = cf->dt;
    mc_gpt_slot_t *sl = use_slot(m, c, k);

    if (mb->s != S || B > cf->max_batch)
        mc_fatal("microbatch shape [%d, %d] does not fit the planned [%d, %d]", B, mb->s,
                 cf->max_batch, S);
    sl->batch = B;
    sl->sample0 = mb->sample0;
    size_t ib = (size_t)N * sizeof(int32_t), fb = (size_t)N * sizeof(float);
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

    if (ch->pre) {
        /* embedding + dropout: the vocab-parallel lookup summed over tp; the position embedding
         * joins once */
        params_needed(m, 0);
        void *e = t.sp ? m->tmp_h : sl->in;
        be->embedding_forward(be, dt, e, sl->tokens, sl->positions, m->p.wte,
                              bias_here ? m->p.wpe : NULL, S, B, H, t.vocab_start, t.vocab);
        tp_sum(m, &t, e, sl->in, NL);
        mc_dropout_t d = dropout_site(m, iteration, 0, MC_DROPOUT_SITE_EMBEDDING, mb->sample0, hp);
        be->dropout_forward(be, dt, sl->in, sl->in, &d, Sl, B, H, s0, H, 0);
    }

    m->ln_done = false;
    for (int j = 0; j < ch->n_layers; j++) forward_layer(m, j, iteration, training, false);
    void *chunk_out = ch->post ? sl->x_final : sl->out;
    if (ch->n_layers == 0 && chunk_out != sl->in) /* a chunk without layers passes its input on */
        be->memcpy_d2d(be, chunk_out, sl->in, (size_t)NL * mc_dtype_size(dt));

    *loss_sum = *num_tokens = 0;
    if (!ch->post) return;
    if (!m->ln_done) { /* else the last layer's residual add did it */
        params_needed(m, m->n_local_layers + 1);
        norm_forward(m, sl->lnf, sl->lnf_mean, sl->lnf_rstd, sl->x_final, m->p.lnf_w, m->p.lnf_b,
                     Sl * B);
    }
    m->ln_done = false;
    be->linear_forward(be, dt, sl->logits, seq_gather(m, &t, sl->lnf, NL), m->p.out_w, NULL, N, H,
                       t.vocab);
    cross_entropy(m, sl, &t, mb, training);

    /* The loss sum is a [b*s] reduction: done on the host in double for a layout-independent
     * order (the same sum for any backend), now or, with losses_out, after the caller's
     * synchronize (no wait here). */
    *num_tokens = mc_gpt_mb_tokens(mb);
    if (mb->losses_out) {
        be->memcpy_d2h_async(be, mb->losses_out, sl->losses, fb);
        *loss_sum = NAN;
        return;
    }
    be->memcpy_d2h(be, m->host_losses, sl->losses, fb);
    *loss_sum = mc_gpt_loss_sum(mb, m->host_losses);
}

double mc_gpt_loss_sum(const mc_microbatch_t *mb, const float *losses)
{
    double sum = 0;
    for (long i = 0; i < (long)mb->b * mb->s; i++)
        sum += (double)losses[i] * (double)mb->loss_mask[i];
    return sum;
}

double mc_gpt_mb_tokens(const mc_microbatch_t *mb)
{
    double cnt = 0;
    for (long i = 0; i < (long)mb->b * mb->s; i++) cnt += mb->loss_mask[i];
    return cnt;
}

/* ---------------------------------------------------------------- backward */

void mc_gpt_reduce_sequence_parallel_grads(mc_gpt_t *m)
{
    if (m->cfg.tp <= 1) return;
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].seq_parallel)
            tp_reduce(m, mc_gpt_grad_at(m, m->params[i].offset), m->params[i].numel, m->cfg.gdt,
                      MC_OP_SUM);
}

/* dlogits in place of the logits: formed by the forward already (ce_fused, with the same weight),
 * else from the statistics: d objective / d loss[b,s] = mask * weight, times the loss scale
 * (Megatron's scale_loss). */
static void loss_backward(mc_gpt_t *m, mc_gpt_slot_t *sl, const tp_dims_t *t, float weight)
{
    const mc_backend_t *be = m->be;
    const int S = m->cfg.seq, B = sl->batch, N = S * B;
    if (sl->grad_weight > 0) {
        if (sl->grad_weight != weight)
            mc_fatal("internal error: the loss gradient was formed with weight %g, the backward "
                     "has %g",
                     (double)sl->grad_weight, (double)weight);
        return;
    }
    be->memcpy_d2d(be, m->dloss, sl->loss_mask, (size_t)N * sizeof(float));
    be->scale(be, MC_DT_F32, m->dloss, weight * m->loss_scale, N);
    be->ce_backward(be, m->cfg.dt, sl->logits, sl->logits, sl->ce_max, sl->ce_sum, sl->labels,
                    m->dloss, S, B, t->vocab, t->vocab_start);
}

void mc_gpt_backward_chunk(mc_gpt_t *m, int c, int k, uint32_t iteration, float weight)
{
    const mc_backend_t *be = m->be;
    const mc_gpt_config_t *cf = &m->cfg;
    const mc_chunk_cfg_t *ch = &cf->chunk[c];
    const tp_dims_t t = tp_dims(cf);
    mc_gpt_slot_t *sl = use_slot(m, c, k);
    const int S = cf->seq, B = sl->batch, H = cf->hidden, N = S * B, Sl = t.seq, s0 = t.seq_start;
    const int NLr = Sl * B;
    const long NHl = (long)NLr * H; /* elements of a sequence-local [s, b, h] activation */
    const mc_dtype_t dt = cf->dt, gdt = cf->gdt;
    const size_t hb = (size_t)NHl * mc_dtype_size(dt); /* bytes of a sequence-local activation */
    /* a column-parallel input gradient is formed over the whole sequence, then summed over tp */
    void *dfull = t.sp ? m->tmp_h : m->dx;
    const float hp = cf->hidden_dropout;

    if (ch->post) {
        loss_backward(m, sl, &t, weight);
        be->linear_backward(be, dt, gdt, dfull, m->g.out_w, NULL, sl->logits,
                            seq_gather(m, &t, sl->lnf, NHl), m->p.out_w, N, H, t.vocab);
        tp_sum(m, &t, dfull, m->dx, NHl); /* column-parallel (vocab) input gradient */
        /* dx now holds d lnf; the final LN backward accumulates into dres (= d x_final) */
        be->memset0(be, m->dres, hb);
        norm_backward_acc(m, m->dres, m->g.lnf_w, m->g.lnf_b, m->dx, sl->x_final, m->p.lnf_w,
                          sl->lnf_mean, sl->lnf_rstd, NLr);
        grads_final(m, m->n_local_layers + 1);
    } else {
        be->memcpy_d2d(be, m->dres, sl->dout, hb);
    }
    /* invariant from here: dres = gradient w.r.t. the residual stream at the current point */

    for (int j = ch->n_layers - 1; j >= 0; j--) {
        /* full recomputation: the forward of a recomputed group runs again from its saved input
         * just before the group's backward (same dropout keys: the same values) */
        int first, last;
        if (recomputed(cf, ch->n_layers, j, &first, &last) && j == last)
            for (int i = first; i <= last; i++) forward_layer(m, i, iteration, true, true);
        backward_layer(m, j, iteration);
    }

    if (!ch->pre) {
        /* the input is dead: it carries the gradient to the previous stage */
        be->memcpy_d2d(be, sl->in, m->dres, hb);
        return;
    }
    /* embedding: x0 = dropout(wte[tok] + wpe[pos]) */
    mc_dropout_t d = dropout_site(m, iteration, 0, MC_DROPOUT_SITE_EMBEDDING, sl->sample0, hp);
    be->dropout_backward(be, dt, m->dres, m->dres, &d, Sl, B, H, s0, H, 0);
    be->embedding_backward(be, dt, gdt, m->g.wte, m->g.wpe, seq_gather(m, &t, m->dres, NHl),
                           sl->tokens, sl->positions, S, B, H, t.vocab_start, t.vocab);
    grads_final(m, 0);
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
