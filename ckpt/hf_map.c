/* Megatron's GPT parameters as Hugging Face's GPT2LMHeadModel, LlamaForCausalLM and the MoE
 * classes' tensors (ckpt/hf.h): which class a model is, the tensors' names and shapes, and the row maps. */
#include "ckpt/hf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

const char *const mc_hf_class_names[MC_HF_CLASSES] = {"GPT2LMHeadModel", "LlamaForCausalLM",
                                                      "MixtralForCausalLM", "Qwen3MoeForCausalLM"};

/* What neither class holds, whatever the rest of the model. */
static int refuse_common(const mc_args_t *a, const mc_gpt_config_t *g, char *err, size_t n)
{
    if (a->use_mup && (mc_gpt_softmax_scale(g) != 1.0f / sqrtf((float)g->head_dim) ||
                       (g->embedding_mult > 0 && g->embedding_mult != 1.0f) ||
                       (g->output_mult > 0 && g->output_mult != 1.0f)))
        return mc_errf(err, n,
                       "--use-mup: GPT2LMHeadModel and LlamaForCausalLM have neither MuP's "
                       "softmax scale nor its embedding and output multipliers");
    if (g->post_ln_residual)
        return mc_errf(err, n,
                       "--apply-residual-connection-post-layernorm: no Hugging Face "
                       "class here adds the residual after the norm");
    if (g->norm_1p)
        return mc_errf(err, n,
                       "--apply-layernorm-1p: GPT2LMHeadModel and LlamaForCausalLM "
                       "norms multiply by the weight, not 1 + weight");
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
    if (g.rms && g.swiglu && g.pos == MC_POS_ROPE && g.moe.num_experts)
        return mc_hf_moe_class_of(a, &g, c, err, n) != 0 ? -1 : refuse_rope(a, err, n);
    if (g.qk_norm)
        return mc_errf(err, n,
                       "--qk-layernorm: neither GPT2LMHeadModel nor LlamaForCausalLM "
                       "normalises queries and keys (Qwen3MoeForCausalLM does: an MoE model "
                       "with --normalization RMSNorm --swiglu and rope)");
    if (g.moe.num_experts)
        return mc_errf(err, n,
                       "--num-experts: the MoE classes (MixtralForCausalLM, "
                       "Qwen3MoeForCausalLM) have --normalization RMSNorm, --swiglu and "
                       "--position-embedding-type rope");
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

/* The rows of the part of parameter p an HF tensor holds (vocab: HF's vocabulary, the rows of
 * the embeddings and output layer it keeps). */
static int64_t part_rows(const mc_gpt_config_t *g, const mc_param_t *p, mc_hf_part_t part,
                         int64_t vocab)
{
    switch (part) {
    case MC_HF_Q: return (int64_t)g->heads * g->head_dim;
    case MC_HF_K:
    case MC_HF_V: return (int64_t)g->groups * g->head_dim;
    case MC_HF_GATE:
    case MC_HF_UP: return p->shape[0] / 2; /* the dense MLP's ffn or an expert's */
    default:
        return p->kind == MC_PK_WORD_EMBEDDINGS || p->kind == MC_PK_OUTPUT_W ? vocab : p->shape[0];
    }
}

/* HF name `name` of parameter p in class c: a layer's after its prefix, an expert's <j> its
 * number. */
static void hf_name(char *buf, size_t len, const char *name, const mc_param_t *p, mc_hf_class_t c)
{
    const char *j = strstr(name, "<j>");
    if (p->layer < 0) snprintf(buf, len, "%s", name);
    else if (!j) snprintf(buf, len, "%s.%d.%s", mc_hf_layer_prefix[c], p->layer, name);
    else
        snprintf(buf, len, "%s.%d.%.*s%d%s", mc_hf_layer_prefix[c], p->layer, (int)(j - name), name,
                 p->expert, j + 3);
}

/* Parameter p's HF tensors of class c (the names table's) at t; returns how many. */
static int param_tensors(const mc_gpt_config_t *g, const mc_param_t *p, mc_hf_class_t c,
                         int64_t vocab, mc_hf_tensor_t *t)
{
    const mc_hf_name_t *h = mc_hf_names_of(p->kind, c);
    int n = 0;
    for (; n < 3 && h[n].name; n++) {
        memset(&t[n], 0, sizeof(t[n]));
        hf_name(t[n].name, sizeof(t[n].name), h[n].name, p, c);
        snprintf(t[n].mc, sizeof(t[n].mc), "%s", p->name);
        t[n].part = h[n].part;
        t[n].rows = part_rows(g, p, h[n].part, vocab);
        t[n].cols = p->ndim > 1 ? p->shape[1] : 0;
        t[n].transpose = h[n].transpose;
    }
    if (!n) mc_fatal("internal error: %s has no %s tensor", p->name, mc_hf_class_names[c]);
    return n;
}

int mc_hf_tensors(const mc_args_t *a, mc_hf_class_t c, int64_t vocab, mc_hf_tensor_t **out)
{
    /* the whole model's parameter table on one rank says which tensors there are */
    mc_gpt_config_t g;
    mc_gpt_config_from_args(&g, a);
    g.tp = 1;
    g.sequence_parallel = false;
    mc_gpt_t m;
    mc_gpt_build_params(&m, &g);
    mc_hf_tensor_t *t = calloc((size_t)m.n_params * 3 + 1, sizeof(mc_hf_tensor_t));
    if (!t) mc_fatal("out of host memory");
    int n = 0;
    /* the embeddings, each layer, the final norm and output layer: each group in HF's order */
    for (int i = 0; i < m.n_params;) {
        int j = i;
        while (j < m.n_params && m.params[j].layer == m.params[i].layer) j++;
        for (int r = 0; r < MC_PK_COUNT; r++)
            for (int k = i; k < j; k++)
                if (m.params[k].kind == mc_hf_kind_order[r])
                    n += param_tensors(&g, &m.params[k], c, vocab, t + n);
        i = j;
    }
    mc_gpt_free(&m);
    *out = t;
    return n;
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

/* half: linear_fc1's gate rows (SwiGLU's up rows follow them) */
static int64_t mc_row(const mc_gpt_config_t *g, mc_hf_part_t part, int64_t half, int64_t r)
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
    case MC_HF_UP: return half + r;
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
        float *src = w + mc_row(&g, h->part, p->shape[0] / 2, r) * wcols;
        for (int64_t c = 0; c < cols; c++) {
            float *x = hf + (h->transpose ? c * h->rows + r : r * cols + c);
            if (to_hf) *x = src[c];
            else src[c] = *x;
        }
    }
}
