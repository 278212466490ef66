/* Megatron's GPT parameters as Hugging Face's GPT2LMHeadModel and LlamaForCausalLM tensors
 * (ckpt/hf.h): which class a model is, the tensors' names and shapes, and the row maps. */
#include "ckpt/hf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

const char *const mc_hf_class_names[2] = {"GPT2LMHeadModel", "LlamaForCausalLM"};

/* What neither class holds, whatever the rest of the model. */
static int refuse_common(const mc_args_t *a, const mc_gpt_config_t *g, char *err, size_t n)
{
    if (g->post_ln_residual)
        return mc_errf(err, n,
                       "--apply-residual-connection-post-layernorm: no Hugging Face "
                       "class here adds the residual after the norm");
    if (g->norm_1p)
        return mc_errf(err, n,
                       "--apply-layernorm-1p: GPT2LMHeadModel and LlamaForCausalLM "
                       "norms multiply by the weight, not 1 + weight");
    if (g->qk_norm)
        return mc_errf(err, n,
                       "--qk-layernorm: neither GPT2LMHeadModel nor LlamaForCausalLM "
                       "normalises queries and keys");
    if (g->act == MC_ACT_SQUARED_RELU)
        return mc_errf(err, n,
                       "--squared-relu: neither GPT2LMHeadModel nor LlamaForCausalLM "
                       "has that activation");
    if (g->pos == MC_POS_NONE)
        return mc_errf(err, n, "--position-embedding-type none: both classes have positions");
    return 0;
}

static int refuse_rope(const mc_args_t *a, char *err, size_t n)
{
    if (a->rotary_percent != 1.0)
        return mc_errf(err, n, "--rotary-percent %g: LlamaForCausalLM rotates the whole head",
                       a->rotary_percent);
    if (a->rotary_interleaved)
        return mc_errf(err, n,
                       "--rotary-interleaved: LlamaForCausalLM rotates halves "
                       "(rotate_half), not interleaved pairs");
    if (a->rotary_seq_len_interpolation_factor && a->use_rope_scaling)
        return mc_errf(err, n,
                       "--rotary-seq-len-interpolation-factor with --use-rope-scaling: "
                       "LlamaForCausalLM's rope_scaling is one or the other");
    return 0;
}

int mc_hf_class_of(const mc_args_t *a, mc_hf_class_t *c, char *err, size_t n)
{
    mc_gpt_config_t g;
    mc_gpt_config_from_args(&g, a);
    if (refuse_common(a, &g, err, n) != 0) return -1;
    if (g.rms && g.swiglu && g.pos == MC_POS_ROPE) {
        if (g.qkv_bias && !g.bias)
            return mc_errf(err, n,
                           "--add-qkv-bias without --add-bias-linear: "
                           "LlamaForCausalLM's attention_bias also biases o_proj");
        *c = MC_HF_LLAMA;
        return refuse_rope(a, err, n);
    }
    if (!g.rms && !g.swiglu && g.pos == MC_POS_LEARNED) {
        if (!g.bias)
            return mc_errf(err, n,
                           "--disable-bias-linear: GPT2LMHeadModel's linears have biases "
                           "(a model without them exports as Llama: --normalization "
                           "RMSNorm --swiglu --position-embedding-type rope)");
        if (g.groups != g.heads)
            return mc_errf(err, n,
                           "--group-query-attention: GPT2LMHeadModel has multi-head "
                           "attention only");
        if (g.head_dim * g.heads != g.hidden)
            return mc_errf(err, n,
                           "--kv-channels %d: GPT2LMHeadModel's heads are hidden-size / "
                           "heads (%d) wide",
                           g.head_dim, g.hidden / g.heads);
        *c = MC_HF_GPT2;
        return 0;
    }
    /* the positions say which class the model is closest to: name what it lacks */
    if (g.pos == MC_POS_ROPE)
        return mc_errf(err, n, "%s with rotary positions: LlamaForCausalLM needs %s",
                       g.rms ? "GeLU (no --swiglu)" : "--normalization LayerNorm",
                       g.rms ? "--swiglu" : "--normalization RMSNorm");
    return mc_errf(err, n,
                   "%s with learned absolute positions: GPT2LMHeadModel has %s (the "
                   "Llama class needs --position-embedding-type rope)",
                   g.rms ? "--normalization RMSNorm" : "--swiglu", g.rms ? "LayerNorm" : "GeLU");
}

/* ---- tensors ---- */

typedef struct {
    mc_hf_tensor_t *t;
    int n;
    char prefix[64]; /* HF's layer prefix */
    int layer;
} list_t;

static void add(list_t *l, const char *hf, const char *mc, mc_hf_part_t part, int64_t rows,
                int64_t cols, bool transpose)
{
    mc_hf_tensor_t *t = &l->t[l->n++];
    memset(t, 0, sizeof(*t));
    if (l->layer >= 0) {
        snprintf(t->name, sizeof(t->name), "%s.%d.%s", l->prefix, l->layer, hf);
        snprintf(t->mc, sizeof(t->mc), "decoder.layers.%d.%s", l->layer, mc);
    } else {
        snprintf(t->name, sizeof(t->name), "%s", hf);
        snprintf(t->mc, sizeof(t->mc), "%s", mc);
    }
    t->part = part;
    t->rows = rows;
    t->cols = cols;
    t->transpose = transpose;
}

static void gpt2_layer(list_t *l, const mc_gpt_config_t *g)
{
    const int64_t H = g->hidden, F = g->ffn, A = (int64_t)g->heads * g->head_dim;
    add(l, "ln_1.weight", "input_layernorm.weight", MC_HF_ALL, H, 0, false);
    add(l, "ln_1.bias", "input_layernorm.bias", MC_HF_ALL, H, 0, false);
    add(l, "attn.c_attn.weight", "self_attention.linear_qkv.weight", MC_HF_QKV, 3 * A, H, true);
    add(l, "attn.c_attn.bias", "self_attention.linear_qkv.bias", MC_HF_QKV, 3 * A, 0, false);
    add(l, "attn.c_proj.weight", "self_attention.linear_proj.weight", MC_HF_ALL, H, A, true);
    add(l, "attn.c_proj.bias", "self_attention.linear_proj.bias", MC_HF_ALL, H, 0, false);
    add(l, "ln_2.weight", "pre_mlp_layernorm.weight", MC_HF_ALL, H, 0, false);
    add(l, "ln_2.bias", "pre_mlp_layernorm.bias", MC_HF_ALL, H, 0, false);
    add(l, "mlp.c_fc.weight", "mlp.linear_fc1.weight", MC_HF_ALL, F, H, true);
    add(l, "mlp.c_fc.bias", "mlp.linear_fc1.bias", MC_HF_ALL, F, 0, false);
    add(l, "mlp.c_proj.weight", "mlp.linear_fc2.weight", MC_HF_ALL, H, F, true);
    add(l, "mlp.c_proj.bias", "mlp.linear_fc2.bias", MC_HF_ALL, H, 0, false);
}

static void llama_layer(list_t *l, const mc_gpt_config_t *g)
{
    const int64_t H = g->hidden, F = g->ffn, d = g->head_dim, Q = g->heads * d, KV = g->groups * d;
    const char *qkv = "self_attention.linear_qkv.weight", *qkvb = "self_attention.linear_qkv.bias";
    add(l, "input_layernorm.weight", "input_layernorm.weight", MC_HF_ALL, H, 0, false);
    add(l, "self_attn.q_proj.weight", qkv, MC_HF_Q, Q, H, false);
    add(l, "self_attn.k_proj.weight", qkv, MC_HF_K, KV, H, false);
    add(l, "self_attn.v_proj.weight", qkv, MC_HF_V, KV, H, false);
    if (g->bias) {
        add(l, "self_attn.q_proj.bias", qkvb, MC_HF_Q, Q, 0, false);
        add(l, "self_attn.k_proj.bias", qkvb, MC_HF_K, KV, 0, false);
        add(l, "self_attn.v_proj.bias", qkvb, MC_HF_V, KV, 0, false);
    }
    add(l, "self_attn.o_proj.weight", "self_attention.linear_proj.weight", MC_HF_ALL, H, Q, false);
    if (g->bias)
        add(l, "self_attn.o_proj.bias", "self_attention.linear_proj.bias", MC_HF_ALL, H, 0, false);
    add(l, "post_attention_layernorm.weight", "pre_mlp_layernorm.weight", MC_HF_ALL, H, 0, false);
    add(l, "mlp.gate_proj.weight", "mlp.linear_fc1.weight", MC_HF_GATE, F, H, false);
    add(l, "mlp.up_proj.weight", "mlp.linear_fc1.weight", MC_HF_UP, F, H, false);
    if (g->bias) {
        add(l, "mlp.gate_proj.bias", "mlp.linear_fc1.bias", MC_HF_GATE, F, 0, false);
        add(l, "mlp.up_proj.bias", "mlp.linear_fc1.bias", MC_HF_UP, F, 0, false);
    }
    add(l, "mlp.down_proj.weight", "mlp.linear_fc2.weight", MC_HF_ALL, H, F, false);
    if (g->bias) add(l, "mlp.down_proj.bias", "mlp.linear_fc2.bias", MC_HF_ALL, H, 0, false);
}

int mc_hf_tensors(const mc_args_t *a, mc_hf_class_t c, int64_t vocab, mc_hf_tensor_t **out)
{
    mc_gpt_config_t g;
    mc_gpt_config_from_args(&g, a);
    list_t l = {.t = calloc((size_t)g.num_layers * 20 + 8, sizeof(mc_hf_tensor_t)), .layer = -1};
    if (!l.t) mc_fatal("out of host memory");
    const int64_t H = g.hidden;
    const bool gpt2 = c == MC_HF_GPT2;
    add(&l, gpt2 ? "transformer.wte.weight" : "model.embed_tokens.weight",
        "embedding.word_embeddings.weight", MC_HF_ALL, vocab, H, false);
    if (gpt2)
        add(&l, "transformer.wpe.weight", "embedding.position_embeddings.weight", MC_HF_ALL,
            g.max_pos, H, false);
    snprintf(l.prefix, sizeof(l.prefix), "%s", gpt2 ? "transformer.h" : "model.layers");
    for (l.layer = 0; l.layer < g.num_layers; l.layer++) (gpt2 ? gpt2_layer : llama_layer)(&l, &g);
    l.layer = -1;
    add(&l, gpt2 ? "transformer.ln_f.weight" : "model.norm.weight",
        "decoder.final_layernorm.weight", MC_HF_ALL, H, 0, false);
    if (gpt2)
        add(&l, "transformer.ln_f.bias", "decoder.final_layernorm.bias", MC_HF_ALL, H, 0, false);
    if (!g.tied) add(&l, "lm_head.weight", "output_layer.weight", MC_HF_ALL, vocab, H, false);
    *out = l.t;
    return l.n;
}

/* ---- rows ---- */

/* The row of Megatron's linear_qkv holding row r of the queries (kind 0), keys (1) or values
 * (2): its rows are per group [the group's query heads, key, value], head_dim rows each. */
static int64_t qkv_row(const mc_gpt_config_t *g, int kind, int64_t r)
{
    const int64_t d = g->head_dim, per = g->heads / g->groups; /* query heads per group */
    const int64_t head = r / d, i = r % d, group = kind == 0 ? head / per : head;
    const int64_t at = kind == 0 ? head % per : kind == 1 ? per : per + 1;
    return group * (per + 2) * d + at * d + i;
}

static int64_t mc_row(const mc_gpt_config_t *g, mc_hf_part_t part, int64_t r)
{
    const int64_t q = (int64_t)g->heads * g->head_dim, kv = (int64_t)g->groups * g->head_dim;
    switch (part) {
    case MC_HF_Q: return qkv_row(g, 0, r);
    case MC_HF_K: return qkv_row(g, 1, r);
    case MC_HF_V: return qkv_row(g, 2, r);
    case MC_HF_QKV:
        return r < q        ? qkv_row(g, 0, r)
               : r < q + kv ? qkv_row(g, 1, r - q)
                            : qkv_row(g, 2, r - q - kv);
    case MC_HF_UP: return g->ffn + r;
    default: return r;
    }
}

void mc_hf_copy(const mc_args_t *a, const mc_hf_tensor_t *h, const mc_param_t *p, float *w,
                float *hf, bool to_hf)
{
    mc_gpt_config_t g;
    mc_gpt_config_from_args(&g, a);
    const int64_t cols = h->cols ? h->cols : 1, wcols = p->ndim > 1 ? p->shape[1] : 1;
    for (int64_t r = 0; r < h->rows; r++) {
        float *src = w + mc_row(&g, h->part, r) * wcols;
        for (int64_t c = 0; c < cols; c++) {
            float *x = hf + (h->transpose ? c * h->rows + r : r * cols + c);
            if (to_hf) *x = src[c];
            else src[c] = *x;
        }
    }
}
