/* The GPT parameter table: names, full shapes, init rules, no-decay groups, and the flat layout
 * of the parameter and gradient buffers. Order is Megatron's model.parameters() order (the
 * distributed optimizer lays buffers out in reverse of it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "model/block.h"
#include "model/layer_spec.h"

/* Name, tp split, and gradient and decay rules from the names table. */
mc_param_t *mc_gpt_add_param(mc_gpt_t *m, mc_pkind_t k, int layer, int64_t d0, int64_t d1,
                             float std, float value)
{
    const mc_param_name_t *row = &mc_param_names[k];
    if (m->n_params == m->cap_params) {
        m->cap_params = m->cap_params ? 2 * m->cap_params : 64;
        m->params = realloc(m->params, (size_t)m->cap_params * sizeof(mc_param_t));
        if (!m->params) mc_fatal("out of host memory building the parameter table");
    }
    mc_param_t *p = &m->params[m->n_params++];
    memset(p, 0, sizeof(*p));
    mc_param_name_local(k, layer, p->name, sizeof(p->name));
    p->kind = k;
    p->layer = row->layer ? layer : -1;
    p->expert = -1;
    p->ndim = d1 ? 2 : 1;
    p->shape[0] = d0;
    p->shape[1] = d1;
    const mc_split_t split = row->glu && m->cfg.swiglu ? MC_SPLIT_ROWS_GLU : row->split;
    /* experts split over etp (parallel folding), the rest over tp */
    const int size = row->experts ? m->cfg.moe.etp : m->cfg.tp;
    p->split = size > 1 ? split : MC_SPLIT_NONE;
    p->shard_rank = row->experts ? m->cfg.moe.etp_rank : m->cfg.tp_rank;
    p->local[0] = p->split == MC_SPLIT_ROWS || p->split == MC_SPLIT_ROWS_GLU ? d0 / size : d0;
    p->local[1] = p->split == MC_SPLIT_COLS ? d1 / size : d1;
    p->numel = (long)(d1 ? p->local[0] * p->local[1] : p->local[0]);
    /* Megatron's _allreduce_layernorm_grads: under sequence parallelism every norm, and
     * q_layernorm/k_layernorm always (each tp rank normalises its own heads) */
    p->seq_parallel = m->cfg.tp > 1 && (row->qk_norm || (m->cfg.sequence_parallel && row->norm));
    /* the router's weight and the shared expert's gate_weight: their tokens are this rank's
     * sequence rows (router.py and shared_experts.py set sequence_parallel on them) */
    p->seq_parallel |= (k == MC_PK_ROUTER_W || k == MC_PK_SHARED_GATE_W) && m->cfg.tp > 1 &&
                       m->cfg.sequence_parallel;
    p->offset = m->n_elems;
    p->init_std = std;
    p->init_value = value;
    /* Megatron's get_standard_config_overrides: no weight decay for 1-D params and biases. */
    p->no_wd = (p->ndim == 1 || row->bias) && !(row->qk_norm && m->cfg.wd_qk_norm);
    /* Megatron's get_mup_config_overrides: every parameter of the embedding (is_embedding_
     * parameter) and the output layer is vector-like, and so is any 1-D one */
    p->mup_hidden = p->ndim > 1 && k != MC_PK_WORD_EMBEDDINGS && k != MC_PK_POSITION_EMBEDDINGS &&
                    k != MC_PK_OUTPUT_W;
    /* Keep every tensor 16-float aligned so vector kernels can assume it. */
    m->n_elems += (p->numel + 15) & ~15L;
    return p;
}

/* The chunks' local layers (their global numbers in m->layer_no), whether this rank holds the
 * embedding (pre) and the output layer (post), and each slot group's count. */
static void local_layers(mc_gpt_t *m, bool *pre, bool *post)
{
    mc_gpt_config_t *c = &m->cfg;
    for (int k = 0; k < c->n_chunks; k++) {
        m->chunk_local0[k] = m->n_local_layers;
        m->n_local_layers += c->chunk[k].n_layers;
        *pre |= c->chunk[k].pre;
        *post |= c->chunk[k].post;
    }
    /* a group with chunks has a slot at least; one without has none */
    for (int g = 0; g < MC_SLOT_GROUPS; g++) {
        bool used = false;
        for (int k = 0; k < c->n_chunks; k++) used |= mc_gpt_slot_group(c, k) == g;
        c->slots[g] = !used ? 0 : c->slots[g] < 1 ? 1 : c->slots[g];
    }
    m->layer_no = malloc((size_t)(m->n_local_layers ? m->n_local_layers : 1) * sizeof(int));
    if (!m->layer_no) mc_fatal("out of host memory building the parameter table");
    for (int k = 0, j = 0; k < c->n_chunks; k++)
        for (int i = 0; i < c->chunk[k].n_layers; i++)
            m->layer_no[j++] = c->chunk[k].first_layer + i;
}

/* The blocks of each local layer (the layer spec) and the final norm. */
static void choose_blocks(mc_gpt_t *m)
{
    m->spec = malloc((size_t)(m->n_local_layers ? m->n_local_layers : 1) * sizeof(*m->spec));
    m->layer_param = malloc((size_t)(m->n_local_layers + 1) * sizeof(int));
    if (!m->spec || !m->layer_param) mc_fatal("out of host memory building the parameter table");
    for (int j = 0; j < m->n_local_layers; j++)
        m->spec[j] = mc_layer_spec_of(&m->cfg, m->layer_no[j]);
    m->final_norm = mc_final_norm_of(&m->cfg);
}

void mc_gpt_build_params(mc_gpt_t *m, const mc_gpt_config_t *cfg)
{
    memset(m, 0, sizeof(*m));
    m->cfg = *cfg;
    mc_gpt_config_t *c = &m->cfg;
    if (c->tp < 1) c->tp = 1; /* a configuration written by hand may leave these 0 */
    if (c->cp < 1) c->cp = 1;
    if (c->seq_full < 1) c->seq_full = c->seq * c->cp;
    if (c->n_chunks < 1) {
        c->n_chunks = 1;
        c->chunk[0] = (mc_chunk_cfg_t){0, c->num_layers, true, true};
    }
    if (c->groups < 1) c->groups = c->heads;
    bool pre = false, post = false;
    local_layers(m, &pre, &post);
    choose_blocks(m);
    /* tied embeddings split over pipeline stages: the last stage has its own copy */
    const bool shared = c->tied && pre != post;

    if (pre) mc_embedding_params(m, shared);
    /* a layer: input_layernorm, self_attention, pre_mlp_layernorm, mlp (Megatron's order) */
    for (int j = 0; j < m->n_local_layers; j++) {
        const mc_layer_spec_t *s = m->spec[j];
        const int l = m->layer_no[j];
        m->layer_param[j] = m->n_params;
        mc_norm_params(s->input_norm, m, MC_PK_INPUT_NORM_W, l, c->hidden);
        s->attention->params(m, l);
        mc_norm_params(s->pre_mlp_norm, m, MC_PK_PRE_MLP_NORM_W, l, c->hidden);
        s->mlp->params(m, l);
    }
    m->layer_param[m->n_local_layers] = m->n_params;
    if (post) mc_output_params(m, shared);
}

const mc_param_t *mc_gpt_find_param(const mc_gpt_t *m, const char *name)
{
    for (int i = 0; i < m->n_params; i++)
        if (strcmp(m->params[i].name, name) == 0) return &m->params[i];
    return NULL;
}

/* Points out at the tensors of a flat buffer laid out like the parameter table, by kind: the
 * table says each parameter's layer, so no name is looked up. */
void mc_gpt_bind_ptrs(const mc_gpt_t *m, void *base, mc_dtype_t dt, mc_gpt_ptrs_t *out)
{
    memset(out->t, 0, sizeof(out->t));
    out->layers =
        calloc((size_t)(m->n_local_layers ? m->n_local_layers : 1), sizeof(mc_layer_ptrs_t));
    if (!out->layers) mc_fatal("out of host memory");
    int j = -1; /* the local layer of the parameters in turn (they come layer after layer) */
    for (int i = 0; i < m->n_params; i++) {
        const mc_param_t *p = &m->params[i];
        void *at = mc_elem(base, dt, p->offset);
        if (p->layer < 0) {
            out->t[p->kind] = at;
            continue;
        }
        while (j < 0 || m->layer_no[j] != p->layer) j++;
        if (!out->layers[j].t[p->kind])
            out->layers[j].t[p->kind] = at; /* an MoE layer's expert 0 */
    }
    /* tied, on the stage with the embedding */
    if (!out->t[MC_PK_OUTPUT_W]) out->t[MC_PK_OUTPUT_W] = out->t[MC_PK_WORD_EMBEDDINGS];
}
