/* The GPT parameter table: names, full shapes, init rules, no-decay groups, and the flat layout
 * of the parameter and gradient buffers. Order is Megatron's model.parameters() order (the
 * distributed optimizer lays buffers out in reverse of it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "base/error.h"
#include "model/gpt.h"

static mc_param_t *add_param(mc_gpt_t *m, int *cap, const char *name, int64_t d0, int64_t d1,
                             mc_split_t split, float std, float value)
{
    if (m->n_params == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        m->params = realloc(m->params, (size_t)*cap * sizeof(mc_param_t));
        if (!m->params) mc_fatal("out of host memory building the parameter table");
    }
    mc_param_t *p = &m->params[m->n_params++];
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "%s", name);
    p->ndim = d1 ? 2 : 1;
    p->shape[0] = d0;
    p->shape[1] = d1;
    p->split = m->cfg.tp > 1 ? split : MC_SPLIT_NONE;
    p->local[0] = p->split == MC_SPLIT_ROWS || p->split == MC_SPLIT_ROWS_GLU ? d0 / m->cfg.tp : d0;
    p->local[1] = p->split == MC_SPLIT_COLS ? d1 / m->cfg.tp : d1;
    p->numel = (long)(d1 ? p->local[0] * p->local[1] : p->local[0]);
    /* Megatron's _allreduce_layernorm_grads: under sequence parallelism every norm, and
     * q_layernorm/k_layernorm always (each tp rank normalises its own heads) */
    const bool qk_ln = strstr(name, "q_layernorm.") || strstr(name, "k_layernorm.");
    p->seq_parallel =
        m->cfg.tp > 1 && (qk_ln || (m->cfg.sequence_parallel && strstr(name, "layernorm") != NULL));
    p->offset = m->n_elems;
    p->init_std = std;
    p->init_value = value;
    /* Megatron's get_standard_config_overrides: no weight decay for 1-D params and biases. */
    p->no_wd = (p->ndim == 1 || strstr(name, ".bias") != NULL) && !(qk_ln && m->cfg.wd_qk_norm);
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

void mc_gpt_build_params(mc_gpt_t *m, const mc_gpt_config_t *cfg)
{
    memset(m, 0, sizeof(*m));
    m->cfg = *cfg;
    mc_gpt_config_t *c = &m->cfg;
    if (c->tp < 1) c->tp = 1; /* a configuration written by hand may leave these 0 */
    if (c->n_chunks < 1) {
        c->n_chunks = 1;
        c->chunk[0] = (mc_chunk_cfg_t){0, c->num_layers, true, true};
    }
    bool pre = false, post = false;
    local_layers(m, &pre, &post);

    if (c->groups < 1) c->groups = c->heads;
    const int L = c->num_layers, H = c->hidden, F = c->ffn, F1 = c->swiglu ? 2 * F : F;
    const int QKV = (c->heads + 2 * c->groups) * c->head_dim, A = c->heads * c->head_dim;
    const mc_split_t fc1_split = c->swiglu ? MC_SPLIT_ROWS_GLU : MC_SPLIT_ROWS;
    const bool ln_bias = !c->rms, qkv_bias = c->bias || c->qkv_bias;
    /* scaled_init_method_normal: std / sqrt(2 * num_layers) for linear_proj and linear_fc2,
     * num_layers of the whole model */
    const float out_std = c->init_std / sqrtf(2.0f * (float)L);
    /* tied embeddings split over pipeline stages: the last stage has its own copy (below) */
    const bool shared = c->tied && pre != post;
    int cap = 0;
    char n[96];

    if (pre) {
        mc_param_t *w = add_param(m, &cap, "embedding.word_embeddings.weight", c->vocab, H,
                                  MC_SPLIT_ROWS, c->embedding_init_std, 0);
        w->shared_embedding = shared;
        w->embedding_or_output = true;
        if (c->pos == MC_POS_LEARNED)
            add_param(m, &cap, "embedding.position_embeddings.weight", c->max_pos, H, MC_SPLIT_NONE,
                      c->embedding_init_std, 0);
    }
    /* --apply-layernorm-1p: Megatron's zero_centered_gamma initialises the weights to zero */
    const float gamma = c->norm_1p ? 0.0f : 1.0f;
    m->layer_param0 = m->n_params;
    for (int j = 0; j < m->n_local_layers; j++) {
        const int l = m->layer_no[j];
#define P(suffix, d0, d1, split, std, val)                                                         \
    do {                                                                                           \
        snprintf(n, sizeof(n), "decoder.layers.%d.%s", l, suffix);                                 \
        add_param(m, &cap, n, d0, d1, split, std, val);                                            \
    } while (0)
        /* Megatron's ColumnParallelLinear (qkv, fc1) splits output rows; RowParallelLinear
         * (proj, fc2) splits input columns and keeps its bias whole */
        P("input_layernorm.weight", H, 0, MC_SPLIT_NONE, 0, gamma);
        if (ln_bias) P("input_layernorm.bias", H, 0, MC_SPLIT_NONE, 0, 0.0f);
        P("self_attention.linear_proj.weight", H, A, MC_SPLIT_COLS, out_std, 0);
        if (c->bias) P("self_attention.linear_proj.bias", H, 0, MC_SPLIT_NONE, 0, 0.0f);
        P("self_attention.linear_qkv.weight", QKV, H, MC_SPLIT_ROWS, c->init_std, 0);
        if (qkv_bias) P("self_attention.linear_qkv.bias", QKV, 0, MC_SPLIT_ROWS, 0, 0.0f);
        if (c->qk_norm) { /* over one head's channels: whole on every tp rank */
            P("self_attention.q_layernorm.weight", c->head_dim, 0, MC_SPLIT_NONE, 0, gamma);
            if (ln_bias)
                P("self_attention.q_layernorm.bias", c->head_dim, 0, MC_SPLIT_NONE, 0, 0.0f);
            P("self_attention.k_layernorm.weight", c->head_dim, 0, MC_SPLIT_NONE, 0, gamma);
            if (ln_bias)
                P("self_attention.k_layernorm.bias", c->head_dim, 0, MC_SPLIT_NONE, 0, 0.0f);
        }
        P("pre_mlp_layernorm.weight", H, 0, MC_SPLIT_NONE, 0, gamma);
        if (ln_bias) P("pre_mlp_layernorm.bias", H, 0, MC_SPLIT_NONE, 0, 0.0f);
        P("mlp.linear_fc1.weight", F1, H, fc1_split, c->init_std, 0);
        if (c->bias) P("mlp.linear_fc1.bias", F1, 0, fc1_split, 0, 0.0f);
        P("mlp.linear_fc2.weight", H, F, MC_SPLIT_COLS, out_std, 0);
        if (c->bias) P("mlp.linear_fc2.bias", H, 0, MC_SPLIT_NONE, 0, 0.0f);
#undef P
    }
    m->params_per_layer =
        m->n_local_layers ? (m->n_params - m->layer_param0) / m->n_local_layers : 0;
    if (post) {
        add_param(m, &cap, "decoder.final_layernorm.weight", H, 0, MC_SPLIT_NONE, 0, gamma);
        if (ln_bias)
            add_param(m, &cap, "decoder.final_layernorm.bias", H, 0, MC_SPLIT_NONE, 0, 0.0f);
        if (!c->tied) {
            add_param(m, &cap, "output_layer.weight", c->vocab, H, MC_SPLIT_ROWS, c->init_std, 0)
                ->embedding_or_output = true;
        } else if (shared) {
            /* Megatron zero-fills the last stage's copy and all-reduces it over the embedding
             * group, which makes it the first stage's initial word embeddings */
            mc_param_t *o =
                add_param(m, &cap, "output_layer.weight", c->vocab, H, MC_SPLIT_ROWS, 0, 0);
            o->shared_embedding = o->shared = o->embedding_or_output = true;
        }
    }
}

const mc_param_t *mc_gpt_find_param(const mc_gpt_t *m, const char *name)
{
    for (int i = 0; i < m->n_params; i++)
        if (strcmp(m->params[i].name, name) == 0) return &m->params[i];
    return NULL;
}

/* Resolves the named tensors of a flat buffer into pointers. */
static void *at(const mc_gpt_t *m, void *base, mc_dtype_t dt, const char *name)
{
    const mc_param_t *p = mc_gpt_find_param(m, name);
    return p ? mc_elem(base, dt, p->offset) : NULL;
}

void mc_gpt_bind_ptrs(const mc_gpt_t *m, void *base, mc_dtype_t dt, mc_gpt_ptrs_t *out)
{
    char n[96];
    out->wte = at(m, base, dt, "embedding.word_embeddings.weight");
    out->wpe = at(m, base, dt, "embedding.position_embeddings.weight");
    out->lnf_w = at(m, base, dt, "decoder.final_layernorm.weight");
    out->lnf_b = at(m, base, dt, "decoder.final_layernorm.bias");
    out->out_w = at(m, base, dt, "output_layer.weight");
    if (!out->out_w) out->out_w = out->wte; /* tied, on the stage with the embedding */
    out->layers =
        calloc((size_t)(m->n_local_layers ? m->n_local_layers : 1), sizeof(mc_layer_ptrs_t));
    if (!out->layers) mc_fatal("out of host memory");
    for (int j = 0; j < m->n_local_layers; j++) {
        const int l = m->layer_no[j];
        mc_layer_ptrs_t *lp = &out->layers[j];
#define B(field, suffix)                                                                           \
    do {                                                                                           \
        snprintf(n, sizeof(n), "decoder.layers.%d.%s", l, suffix);                                 \
        lp->field = at(m, base, dt, n);                                                            \
    } while (0)
        B(ln1_w, "input_layernorm.weight");
        B(ln1_b, "input_layernorm.bias");
        B(qkv_w, "self_attention.linear_qkv.weight");
        B(qkv_b, "self_attention.linear_qkv.bias");
        B(qln_w, "self_attention.q_layernorm.weight");
        B(qln_b, "self_attention.q_layernorm.bias");
        B(kln_w, "self_attention.k_layernorm.weight");
        B(kln_b, "self_attention.k_layernorm.bias");
        B(proj_w, "self_attention.linear_proj.weight");
        B(proj_b, "self_attention.linear_proj.bias");
        B(ln2_w, "pre_mlp_layernorm.weight");
        B(ln2_b, "pre_mlp_layernorm.bias");
        B(fc1_w, "mlp.linear_fc1.weight");
        B(fc1_b, "mlp.linear_fc1.bias");
        B(fc2_w, "mlp.linear_fc2.weight");
        B(fc2_b, "mlp.linear_fc2.bias");
#undef B
    }
}
