/* The model's memory (DESIGN decision 1): every activation and workspace buffer planned by one
 * routine that both sizes (the logged plan) and allocates, so the plan is what is allocated.
 * Activations live in slots (a microbatch through a chunk), each layer's in the blocks' own
 * structs (model/block.h), laid out by the blocks; workspaces are shared. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "model/block.h"
#include "model/layer_spec.h"

void *mc_gpt_take(mc_alloc_t *a, long bytes)
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

/* The spec the slots' layers are planned with: a slot holds any chunk of its group and a
 * recomputation buffer any layer, so their norms and attention are laid out alike (every local
 * layer's are of one kind); the MLP may differ (dense or MoE, --moe-layer-freq), each kind
 * planned where a layer can take it (mlp_kinds). */
static const mc_layer_spec_t *slot_spec(const mc_gpt_t *m)
{
    const mc_layer_spec_t *s0 = m->n_local_layers ? m->spec[0] : mc_layer_spec_of(&m->cfg, 0);
    for (int j = 1; j < m->n_local_layers; j++) {
        const mc_layer_spec_t *s = m->spec[j];
        if (s->input_norm != s0->input_norm || s->attention != s0->attention ||
            s->pre_mlp_norm != s0->pre_mlp_norm)
            mc_fatal("layers %d and %d of this rank are of different kinds (%s, %s): activation "
                     "slots for them are not planned yet",
                     m->layer_no[0], m->layer_no[j], s0->name, s->name);
    }
    return s0;
}

/* The MLP kinds (at most 2, each once) layer j of slot group g's chunks holds; g < 0: those of
 * every local layer (the recomputation buffers, which any layer uses). */
static int mlp_kinds(const mc_gpt_t *m, int g, int j, const mc_block_ops_t *kinds[2])
{
    const mc_gpt_config_t *c = &m->cfg;
    int n = 0;
    for (int k = 0; k < c->n_chunks; k++) {
        if (g >= 0 && (mc_gpt_slot_group(c, k) != g || j >= c->chunk[k].n_layers)) continue;
        const int first = g >= 0 ? j : 0, last = g >= 0 ? j : c->chunk[k].n_layers - 1;
        for (int i = first; i <= last; i++) {
            const mc_block_ops_t *b = m->spec[m->chunk_local0[k] + i]->mlp;
            if (n == 0 || (kinds[0] != b && n == 1)) kinds[n++] = b;
        }
    }
    if (n == 0) kinds[n++] = slot_spec(m)->mlp;
    return n;
}

/* One layer's saved activations: x (its input) when with_x, then in the order the layer makes
 * them; the MLP's of each kind layer j of slot group g takes (g < 0: any local layer's). */
static void plan_layer(mc_gpt_t *m, mc_alloc_t *acts, mc_layer_acts_t *a, bool with_x, int g, int j)
{
    const mc_layer_spec_t *spec = slot_spec(m);
    const long rows = (long)mc_gpt_tp_dims(&m->cfg).seq * m->cfg.max_batch;
    const long e = (long)mc_dtype_size(m->cfg.dt);
    if (with_x) a->x = mc_gpt_take(acts, rows * m->cfg.hidden * e);
    mc_norm_plan(spec->input_norm, m, acts, &a->ln1, rows);
    spec->attention->plan(m, acts, mc_block_acts(a, spec->attention));
    a->x_mid = mc_gpt_take(acts, rows * m->cfg.hidden * e);
    mc_norm_plan(spec->pre_mlp_norm, m, acts, &a->ln2, rows);
    const mc_block_ops_t *kinds[2];
    const int n = mlp_kinds(m, g, j, kinds);
    for (int k = 0; k < n; k++) kinds[k]->plan(m, acts, mc_block_acts(a, kinds[k]));
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

/* The slot's output end: the final norm and the loss (post), or the output and its gradient. */
static void plan_slot_end(mc_gpt_t *m, mc_alloc_t *acts, mc_gpt_slot_t *s, int n, bool post)
{
    const mc_gpt_config_t *c = &m->cfg;
    const mc_tp_dims_t t = mc_gpt_tp_dims(c);
    const long SB = (long)c->seq * c->max_batch, LB = (long)t.seq * c->max_batch;
    const long f = sizeof(float), e = (long)mc_dtype_size(c->dt), H = c->hidden;
    if (!post) {
        s->out = n ? mc_gpt_take(acts, LB * H * e) : s->in;
        s->dout = mc_gpt_take(acts, LB * H * e);
        return;
    }
    s->x_final = n ? mc_gpt_take(acts, LB * H * e) : s->in;
    mc_norm_plan(m->final_norm, m, acts, &s->lnf, LB);
    s->logits = mc_gpt_take(acts, SB * t.vocab * e);
    s->ce_max = mc_gpt_take(acts, SB * f);
    s->ce_sum = mc_gpt_take(acts, 2 * SB * f); /* with ce_target: one all-reduce for both */
    s->ce_target = s->ce_sum ? s->ce_sum + SB : NULL;
    s->losses = mc_gpt_take(acts, SB * f);
}

/* One slot of group g: the microbatch's data its chunks read, the input and output, and every
 * layer's saved activations, sized for the group's largest chunk (a smaller one uses a prefix:
 * the recomputation groups of a prefix are laid out the same). Recomputed layers keep only their
 * group's input and point at the shared buffers of one recomputed group (m->rc), which the
 * backward refills by running the group's forward again. */
static void plan_slot(mc_gpt_t *m, mc_alloc_t *acts, int g, mc_gpt_slot_t *s)
{
    const mc_gpt_config_t *c = &m->cfg;
    int n, first, last;
    bool pre, post;
    group_needs(c, g, &n, &pre, &post);
    const long SB = (long)c->seq * c->max_batch, f = sizeof(float), ib = SB * (long)sizeof(int32_t);
    const long LB = (long)mc_gpt_tp_dims(c).seq * c->max_batch;
    const long xb = LB * c->hidden * (long)mc_dtype_size(c->dt);

    if (pre) {
        s->tokens = mc_gpt_take(acts, ib);
        s->positions = mc_gpt_take(acts, ib);
    }
    if (post) {
        s->labels = mc_gpt_take(acts, ib);
        s->loss_mask = mc_gpt_take(acts, SB * f);
    }
    s->segments_buf = mc_gpt_take(acts, ib);
    s->in = mc_gpt_take(acts, xb);
    for (int j = 0; j < n; j++) {
        mc_layer_acts_t *a = &s->acts[j];
        if (mc_gpt_recomputed(c, n, j, &first, &last)) {
            if (j == first) a->x = j == 0 ? s->in : mc_gpt_take(acts, xb);
            void *x = j == first ? a->x : m->rc[j - first].x;
            *a = m->rc[j - first];
            a->x = x;
        } else {
            plan_layer(m, acts, a, j > 0, g, j);
            if (j == 0) a->x = s->in;
        }
    }
    plan_slot_end(m, acts, s, n, post);
}

typedef struct {
    mc_gpt_t *m;
    mc_alloc_t *acts, *ws;
    int failed;
} blocks_ctx_t;

static void plan_block(const mc_block_ops_t *b, void *ctx)
{
    blocks_ctx_t *x = ctx;
    b->plan_shared(x->m, x->acts, x->ws);
}

/* The driver's workspace, then the blocks': what every layer of a kind shares. */
static void plan_workspace(mc_gpt_t *m, mc_alloc_t *ws)
{
    const mc_gpt_config_t *c = &m->cfg;
    const mc_tp_dims_t t = mc_gpt_tp_dims(c);
    const long SB = (long)c->seq * c->max_batch, LB = (long)t.seq * c->max_batch;
    const long e = (long)mc_dtype_size(c->dt), H = c->hidden, A = t.attn;
    m->dloss = mc_gpt_take(ws, SB * (long)sizeof(float));
    m->tmp_h = mc_gpt_take(ws, SB * (H > A ? H : A) * e);
    m->dx = mc_gpt_take(ws, LB * H * e);
    m->dres = mc_gpt_take(ws, LB * H * e);
    /* the whole sequence of a sequence-local activation, gathered for a column-parallel layer */
    m->gath = t.sp ? mc_gpt_take(ws, SB * H * e) : NULL;
    m->dtmp_h = mc_gpt_take(ws, SB * (H > A ? H : A) * e);
    if (c->norm_1p) mc_norm_1p_plan(m, ws);
}

/* --defer-embedding-wgrad-compute on the chunk with the loss: each deferred microbatch's output
 * layer input and output gradient, kept until the flush (Megatron keeps the same tensors). */
static void plan_deferred_wgrad(mc_gpt_t *m, mc_alloc_t *acts)
{
    const mc_gpt_config_t *c = &m->cfg;
    const mc_tp_dims_t t = mc_gpt_tp_dims(c);
    const long e = (long)mc_dtype_size(c->dt);
    const long SB = (long)c->seq * c->max_batch, LB = (long)t.seq * c->max_batch;
    bool post = false;
    for (int ci = 0; ci < c->n_chunks; ci++) post |= c->chunk[ci].post;
    for (int k = 0; post && k < c->defer_wgrad; k++) {
        m->defer_in[k] = mc_gpt_take(acts, LB * c->hidden * e);
        m->defer_dout[k] = mc_gpt_take(acts, SB * t.vocab * e);
    }
}

/* The slot and rc arrays exist in both passes (host structs); mc_gpt_take hands out NULL when
 * sizing. */
static void plan_activations(mc_gpt_t *m, mc_alloc_t *acts, mc_alloc_t *ws)
{
    const mc_gpt_config_t *c = &m->cfg;
    blocks_ctx_t b = {.m = m, .acts = acts, .ws = ws};
    mc_layer_spec_each_block(c, plan_block, &b);

    int groups = 0, first, last;
    for (int ci = 0; ci < c->n_chunks; ci++)
        for (int j = 0; j < c->chunk[ci].n_layers; j++)
            if (mc_gpt_recomputed(c, c->chunk[ci].n_layers, j, &first, &last) &&
                last - first + 1 > groups)
                groups = last - first + 1;
    for (int k = 0; k < groups; k++) plan_layer(m, acts, &m->rc[k], k > 0, -1, k);
    for (int g = 0; g < MC_SLOT_GROUPS; g++)
        for (int k = 0; k < c->slots[g]; k++) plan_slot(m, acts, g, &m->slots[g][k]);
    plan_deferred_wgrad(m, acts);
    plan_workspace(m, ws);
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
    const size_t nd = (size_t)(c->defer_wgrad > 0 ? c->defer_wgrad : 1);
    m->defer_in = calloc(nd, sizeof(void *));
    m->defer_dout = calloc(nd, sizeof(void *));
    m->defer_batch = calloc(nd, sizeof(int));
    m->defer_n = 0;
    return m->rc && m->defer_in && m->defer_dout && m->defer_batch ? 0 : -1;
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
    free(m->defer_in);
    free(m->defer_dout);
    free(m->defer_batch);
    m->defer_in = m->defer_dout = NULL;
    m->defer_batch = NULL;
}

void mc_gpt_memory(const mc_gpt_t *m, const mc_backend_t *be, long *param_bytes, long *grad_bytes,
                   long *act_bytes, long *ws_bytes)
{
    mc_gpt_t tmp = *m;
    tmp.be = be;
    memset(tmp.slots, 0, sizeof(tmp.slots));
    tmp.rc = NULL;
    mc_alloc_t a = {0}, w = {0};
    if (alloc_slot_structs(&tmp) != 0) mc_fatal("out of host memory planning activations");
    plan_activations(&tmp, &a, &w);
    free_slot_structs(&tmp);
    *param_bytes = m->n_elems * (long)mc_dtype_size(m->cfg.dt);
    *grad_bytes = m->n_elems * (long)mc_dtype_size(m->cfg.gdt);
    *act_bytes = a.bytes;
    *ws_bytes = w.bytes;
}

static void setup_block(const mc_block_ops_t *b, void *ctx)
{
    blocks_ctx_t *x = ctx;
    if (!x->failed && b->setup && b->setup(x->m) != 0) x->failed = 1;
}

int mc_gpt_alloc(mc_gpt_t *m, const mc_backend_t *be)
{
    m->be = be;
    m->loss_scale = 1.0f;
    m->param_buf = be->alloc(be, (size_t)m->n_elems * mc_dtype_size(m->cfg.dt));
    m->grad_buf = be->alloc(be, (size_t)m->n_elems * mc_dtype_size(m->cfg.gdt));
    m->host_losses = calloc((size_t)m->cfg.seq * (size_t)m->cfg.max_batch, sizeof(float));
    if (!m->param_buf || !m->grad_buf || !m->host_losses || alloc_slot_structs(m) != 0) return -1;
    mc_alloc_t a = {.m = m}, w = {.m = m};
    plan_activations(m, &a, &w);
    if (a.failed || w.failed) return -1;
    blocks_ctx_t b = {.m = m};
    mc_layer_spec_each_block(&m->cfg, setup_block, &b);
    if (b.failed) return -1;
    mc_gpt_bind_ptrs(m, m->param_buf, m->cfg.dt, &m->p);
    mc_gpt_bind_ptrs(m, m->grad_buf, m->cfg.gdt, &m->g);
    return m->cfg.norm_1p ? mc_norm_1p_setup(m) : 0;
}

void mc_gpt_free(mc_gpt_t *m)
{
    const mc_backend_t *be = m->be;
    if (be) {
        for (int i = 0; i < m->n_bufs; i++) be->free(be, m->bufs[i]);
        if (m->param_buf) be->free(be, m->param_buf);
        if (m->grad_buf) be->free(be, m->grad_buf);
        if (m->moe_expert_bias) be->free(be, m->moe_expert_bias);
    }
    free_slot_structs(m);
    free(m->bufs);
    free(m->host_losses);
    free(m->moe_tracker);
    free(m->moe_ws.host_block);
    free(m->moe_ws.ag_map_host);
    free(m->moe_global_tokens);
    free(m->moe_ga_steps);
    free(m->moe_local_tokens);
    free(m->p.layers);
    free(m->g.layers);
    free(m->norm_1p);
    free(m->params);
    free(m->layer_no);
    free(m->layer_param);
    free(m->spec);
    memset(m, 0, sizeof(*m));
}
