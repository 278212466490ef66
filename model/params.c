/* The GPT parameter table: names, full shapes, init rules, no-decay groups, and the flat layout
 * of the parameter and gradient buffers. Order is Megatron's model.parameters() order (the
 * distributed optimizer lays buffers out in reverse of it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "config/context_parallel.h"
#include "model/block.h"
#include "model/layer_spec.h"

void mc_gpt_config_from_args(mc_gpt_config_t *c, const mc_args_t *a)
{
    memset(c, 0, sizeof(*c));
    c->num_layers = a->num_layers;
    c->hidden = a->hidden_size;
    c->heads = a->num_attention_heads;
    c->groups = a->num_query_groups > 0 ? a->num_query_groups : a->num_attention_heads;
    c->head_dim = a->kv_channels;
    c->ffn = a->ffn_hidden_size;
    /* context parallelism: this rank's two chunks of the sequence (config/context_parallel.h) */
    c->cp = a->context_parallel_size > 1 ? a->context_parallel_size : 1;
    c->seq_full = a->seq_length;
    c->seq = a->seq_length / c->cp;
    int p2p;
    mc_cp_levels(a, &c->cp_a2a, &p2p);
    c->cp_comm_one = a->n_cp_comm_type > 1 ? -1 : (int)mc_cp_comm_of_layer(a, 0);
    for (int l = 0; c->cp_comm_one < 0 && l < a->num_layers && l < MC_MAX_LAYER_LIST; l++)
        c->cp_comm[l] = (unsigned char)mc_cp_comm_of_layer(a, l);
    c->max_batch = a->micro_batch_size > a->eval_micro_batch_size ? a->micro_batch_size
                                                                  : a->eval_micro_batch_size;
    c->vocab = a->padded_vocab_size;
    c->max_pos = a->max_position_embeddings;
    c->eps = (float)a->norm_epsilon;
    c->bias = a->add_bias_linear;
    c->qkv_bias = a->add_qkv_bias;
    c->tied = !a->untie_embeddings_and_output_weights;
    c->rms = strcmp(a->normalization, "RMSNorm") == 0;
    c->qk_norm = a->qk_layernorm;
    c->wd_qk_norm = a->apply_wd_to_qk_layernorm;
    c->norm_1p = a->apply_layernorm_1p;
    /* Megatron's MLP: squared_relu, else bias_gelu_impl (tanh) with the fusion, else F.gelu */
    c->act = a->squared_relu       ? MC_ACT_SQUARED_RELU
             : a->bias_gelu_fusion ? MC_ACT_GELU_TANH
                                   : MC_ACT_GELU_ERF;
    c->swiglu = a->swiglu;
    c->pos = strcmp(a->position_embedding_type, "rope") == 0   ? MC_POS_ROPE
             : strcmp(a->position_embedding_type, "none") == 0 ? MC_POS_NONE
                                                               : MC_POS_LEARNED;
    if (c->pos == MC_POS_ROPE)
        c->rope = (mc_rope_cfg_t){.rot_dim = (int)(a->kv_channels * a->rotary_percent),
                                  .interleaved = a->rotary_interleaved,
                                  .base = a->rotary_base,
                                  .interp = a->rotary_seq_len_interpolation_factor,
                                  .scaling = a->use_rope_scaling ? a->rope_scaling_factor : 0};
    c->post_ln_residual = a->apply_residual_connection_post_layernorm;
    c->hidden_dropout = (float)a->hidden_dropout;
    c->attention_dropout = (float)a->attention_dropout;
    c->init_std = (float)a->init_method_std;
    c->embedding_init_std = (float)a->embedding_init_method_std;
    c->seed = (uint64_t)a->seed;
    /* section 7: 16-bit params and activations; the grad buffer is fp32 for bf16 (Megatron sets
     * accumulate_allreduce_grads_in_fp32) and the param type for fp16 unless asked for fp32 */
    c->dt = a->bf16 ? MC_DT_BF16 : a->fp16 ? MC_DT_F16 : MC_DT_F32;
    c->gdt = a->fp16 && !a->accumulate_allreduce_grads_in_fp32 ? MC_DT_F16 : MC_DT_F32;
    c->tp = a->tensor_model_parallel_size > 0 ? a->tensor_model_parallel_size : 1;
    c->tp_rank = 0; /* the trainer sets this rank's */
    c->sequence_parallel = a->sequence_parallel && c->tp > 1;
    c->recompute = strcmp(a->recompute_granularity, "selective") == 0 ? MC_RECOMPUTE_SELECTIVE
                   : strcmp(a->recompute_granularity, "full") != 0    ? MC_RECOMPUTE_NONE
                   : strcmp(a->recompute_method, "block") == 0        ? MC_RECOMPUTE_FULL_BLOCK
                                                                      : MC_RECOMPUTE_FULL_UNIFORM;
    c->recompute_num_layers = a->recompute_num_layers;
    c->n_chunks = 1;
    c->chunk[0] =
        (mc_chunk_cfg_t){.first_layer = 0, .n_layers = c->num_layers, .pre = true, .post = true};
    c->slots[0] = 0;
    c->slots[1] = 1;
}

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
    p->ndim = d1 ? 2 : 1;
    p->shape[0] = d0;
    p->shape[1] = d1;
    const mc_split_t split = row->glu && m->cfg.swiglu ? MC_SPLIT_ROWS_GLU : row->split;
    p->split = m->cfg.tp > 1 ? split : MC_SPLIT_NONE;
    p->local[0] = p->split == MC_SPLIT_ROWS || p->split == MC_SPLIT_ROWS_GLU ? d0 / m->cfg.tp : d0;
    p->local[1] = p->split == MC_SPLIT_COLS ? d1 / m->cfg.tp : d1;
    p->numel = (long)(d1 ? p->local[0] * p->local[1] : p->local[0]);
    /* Megatron's _allreduce_layernorm_grads: under sequence parallelism every norm, and
     * q_layernorm/k_layernorm always (each tp rank normalises its own heads) */
    p->seq_parallel = m->cfg.tp > 1 && (row->qk_norm || (m->cfg.sequence_parallel && row->norm));
    p->offset = m->n_elems;
    p->init_std = std;
    p->init_value = value;
    /* Megatron's get_standard_config_overrides: no weight decay for 1-D params and biases. */
    p->no_wd = (p->ndim == 1 || row->bias) && !(row->qk_norm && m->cfg.wd_qk_norm);
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
        out->layers[j].t[p->kind] = at;
    }
    /* tied, on the stage with the embedding */
    if (!out->t[MC_PK_OUTPUT_W]) out->t[MC_PK_OUTPUT_W] = out->t[MC_PK_WORD_EMBEDDINGS];
}
