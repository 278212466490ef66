/* `megatron-c import-hf` (ckpt/hf.h): config.json into the model's arguments, the safetensors
 * tensors into a whole (tp 1 pp 1) model, saved at the target layout by ckpt/convert.c. */
#include "ckpt/hf.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/fs.h"
#include "ckpt/args.h"
#include "ckpt/convert_int.h"
#include "data/tokenizer.h"
#include "kernels/device.h"
#include "kernels/dtype.h"
#include "torchfmt/safetensors.h"

/* ---- config.json ---- */

typedef struct {
    json_t *cfg;
    const char *path;
    char *err;
    size_t n;
    int rc;
} cfg_t;

/* Number key of the config (def when absent or null; NAN def: required). */
static double num(cfg_t *c, const char *key, double def)
{
    json_t *v = json_object_get(c->cfg, key);
    if ((!v || json_is_null(v)) && !isnan(def)) return def;
    if (c->rc == 0 && !json_is_number(v))
        c->rc = mc_errf(c->err, c->n, "%s: '%s' %s", c->path, key,
                        v ? "is not a number" : "is missing");
    return c->rc == 0 ? json_number_value(v) : 0;
}

static int whole(cfg_t *c, const char *key, double def)
{
    const double v = num(c, key, def);
    if (c->rc == 0 && (v != floor(v) || v < 0 || v > INT_MAX))
        c->rc = mc_errf(c->err, c->n, "%s: '%s' (%g) is not a count", c->path, key, v);
    return c->rc == 0 ? (int)v : 0;
}

static bool flag(cfg_t *c, const char *key, bool def)
{
    json_t *v = json_object_get(c->cfg, key);
    return json_is_boolean(v) ? json_is_true(v) : def;
}

static const char *text(cfg_t *c, const char *key)
{
    json_t *v = json_object_get(c->cfg, key);
    return json_is_string(v) ? json_string_value(v) : "";
}

static void refuse(cfg_t *c, const char *what)
{
    if (c->rc == 0) c->rc = mc_errf(c->err, c->n, "%s: %s", c->path, what);
}

static void gpt2_args(cfg_t *c, mc_args_t *a)
{
    a->num_layers = whole(c, "n_layer", NAN);
    a->hidden_size = whole(c, "n_embd", NAN);
    a->num_attention_heads = whole(c, "n_head", NAN);
    a->ffn_hidden_size = whole(c, "n_inner", 4.0 * a->hidden_size);
    a->max_position_embeddings = whole(c, "n_positions", NAN);
    a->norm_epsilon = num(c, "layer_norm_epsilon", 1e-5);
    a->hidden_dropout = num(c, "resid_pdrop", 0.1);
    a->attention_dropout = num(c, "attn_pdrop", 0.1);
    const char *act = text(c, "activation_function");
    if (strcmp(act, "gelu_new") == 0 || strcmp(act, "gelu_pytorch_tanh") == 0)
        a->bias_gelu_fusion = true; /* Megatron's tanh GeLU */
    else if (strcmp(act, "gelu") == 0) a->bias_gelu_fusion = false;
    else refuse(c, "activation_function: import-hf reads gelu_new, gelu_pytorch_tanh or gelu");
    if (!flag(c, "scale_attn_weights", true))
        refuse(c, "scale_attn_weights false: Megatron always scales attention by 1/sqrt(d)");
    if (flag(c, "scale_attn_by_inverse_layer_idx", false))
        refuse(c, "scale_attn_by_inverse_layer_idx: Megatron has no such scaling");
    a->untie_embeddings_and_output_weights = !flag(c, "tie_word_embeddings", true);
    snprintf(a->normalization, sizeof(a->normalization), "LayerNorm");
    snprintf(a->position_embedding_type, sizeof(a->position_embedding_type), "learned_absolute");
    a->add_bias_linear = true;
}

/* transformers 5's rope_parameters (rope_theta with the scaling's keys, rope_type "default"
 * when none), or NULL */
static json_t *rope_parameters(cfg_t *c)
{
    json_t *r = json_object_get(c->cfg, "rope_parameters");
    return json_is_object(r) ? r : NULL;
}

/* rope_scaling: llama3 with Megatron's constants (--use-rope-scaling), linear by a whole
 * factor (--rotary-seq-len-interpolation-factor), or none. */
static void rope_scaling_args(cfg_t *c, mc_args_t *a)
{
    json_t *r = json_object_get(c->cfg, "rope_scaling"), *p = rope_parameters(c);
    const char *pt = p ? json_string_value(json_object_get(p, "rope_type")) : NULL;
    if ((!r || json_is_null(r)) && pt && strcmp(pt, "default") != 0) r = p;
    if (!r || json_is_null(r)) return;
    json_t *type = json_object_get(r, "rope_type");
    const char *t = json_string_value(type ? type : json_object_get(r, "type"));
    const double f = json_number_value(json_object_get(r, "factor"));
    if (t && strcmp(t, "llama3") == 0 &&
        json_number_value(json_object_get(r, "low_freq_factor")) == 1.0 &&
        json_number_value(json_object_get(r, "high_freq_factor")) == 4.0 &&
        json_number_value(json_object_get(r, "original_max_position_embeddings")) == 8192 &&
        f > 0) {
        a->use_rope_scaling = true;
        a->rope_scaling_factor = f;
    } else if (t && strcmp(t, "linear") == 0 && f >= 1 && f == floor(f) && f <= INT_MAX) {
        a->rotary_seq_len_interpolation_factor = (int)f;
    } else {
        refuse(c, "rope_scaling: import-hf reads llama3 (low_freq_factor 1, high_freq_factor "
                  "4, original_max_position_embeddings 8192: Megatron's) or linear by a whole "
                  "factor");
    }
}

static void llama_args(cfg_t *c, mc_args_t *a)
{
    a->num_layers = whole(c, "num_hidden_layers", NAN);
    a->hidden_size = whole(c, "hidden_size", NAN);
    a->num_attention_heads = whole(c, "num_attention_heads", NAN);
    a->ffn_hidden_size = whole(c, "intermediate_size", NAN);
    a->max_position_embeddings = whole(c, "max_position_embeddings", NAN);
    a->num_query_groups = whole(c, "num_key_value_heads", a->num_attention_heads);
    a->group_query_attention = a->num_query_groups != a->num_attention_heads;
    if (c->rc == 0 && a->num_attention_heads > 0)
        a->kv_channels = whole(c, "head_dim", a->hidden_size / a->num_attention_heads);
    a->norm_epsilon = num(c, "rms_norm_eps", 1e-6);
    json_t *params = rope_parameters(c),
           *pt = params ? json_object_get(params, "rope_theta") : NULL;
    const double theta = json_is_number(pt) ? json_number_value(pt) : num(c, "rope_theta", 10000.0);
    if (theta != floor(theta) || theta < 1 || theta > INT_MAX)
        refuse(c, "rope_theta is not a whole number (Megatron's --rotary-base is)");
    a->rotary_base = (int)theta;
    a->rotary_percent = 1.0;
    a->attention_dropout = num(c, "attention_dropout", 0.0);
    a->hidden_dropout = 0.0; /* LlamaForCausalLM has none */
    rope_scaling_args(c, a);
    if (strcmp(text(c, "hidden_act"), "silu") != 0)
        refuse(c, "hidden_act: LlamaForCausalLM's SwiGLU needs silu");
    if (flag(c, "attention_bias", false) != flag(c, "mlp_bias", false))
        refuse(c, "attention_bias and mlp_bias differ: Megatron's --disable-bias-linear is one "
                  "switch for both");
    a->add_bias_linear = flag(c, "attention_bias", false);
    a->untie_embeddings_and_output_weights = !flag(c, "tie_word_embeddings", false);
    snprintf(a->normalization, sizeof(a->normalization), "RMSNorm");
    snprintf(a->position_embedding_type, sizeof(a->position_embedding_type), "rope");
    a->swiglu = true;
}

/* Each layer's MLP as Qwen3's decoder_sparse_step and mlp_only_layers say: an MoE layer where
 * (l + 1) % step == 0 and l is not listed. Every layer an MoE layer is --moe-layer-freq 1; dense
 * layers among them would be a list, which megatron-c's checkpoints do not hold yet. */
static void layer_freq_args(cfg_t *c, mc_args_t *a)
{
    const int step = whole(c, "decoder_sparse_step", 1);
    json_t *only = json_object_get(c->cfg, "mlp_only_layers");
    if (c->rc || step < 1 || (only && !json_is_null(only) && !json_is_array(only)))
        return refuse(c, "decoder_sparse_step or mlp_only_layers is not a count or a list");
    for (int l = 0; l < a->num_layers; l++) {
        bool moe = (l + 1) % step == 0;
        for (size_t i = 0; json_is_array(only) && i < json_array_size(only); i++)
            moe &= json_integer_value(json_array_get(only, i)) != l;
        if (!moe)
            return refuse(c, "decoder_sparse_step or mlp_only_layers: dense layers among MoE "
                             "layers (a --moe-layer-freq other than 1) in checkpoints are "
                             "recognised but not implemented yet in megatron-c");
    }
    snprintf(a->moe_layer_freq, sizeof(a->moe_layer_freq), "1");
}

/* MixtralForCausalLM and Qwen3MoeForCausalLM: Llama's, with experts (ckpt/hf_moe.c). */
static void moe_args(cfg_t *c, mc_args_t *a, bool qwen3)
{
    if (qwen3 && flag(c, "attention_bias", false))
        refuse(c, "attention_bias: Megatron's --add-bias-linear would bias the experts too, "
                  "which Qwen3MoeForCausalLM's are not");
    llama_args(c, a);
    /* transformers 5 saves Qwen3's num_experts under Mixtral's name */
    const bool local = !qwen3 || !json_object_get(c->cfg, "num_experts");
    a->num_experts = whole(c, local ? "num_local_experts" : "num_experts", NAN);
    a->moe_ffn_hidden_size = whole(c, qwen3 ? "moe_intermediate_size" : "intermediate_size", NAN);
    a->moe_router_topk = whole(c, "num_experts_per_tok", NAN);
    a->moe_router_pre_softmax = qwen3 && !flag(c, "norm_topk_prob", false);
    json_t *sw = json_object_get(c->cfg, "sliding_window");
    if (qwen3 ? flag(c, "use_sliding_window", false) : sw && !json_is_null(sw))
        refuse(c, "sliding_window: Megatron's attention here sees the whole causal context");
    if (qwen3) {
        a->qk_layernorm = true;
        layer_freq_args(c, a);
    }
}

/* The HF directory's tokenizer, named by the args: GPT-2's vocab.json and merges.txt when both
 * are there, else tokenizer.json (HuggingFaceTokenizer, the directory), else tokenizer.model
 * (a SentencePiece model: Llama2Tokenizer). */
static void tokenizer_args(const char *dir, mc_args_t *a)
{
    char abs[PATH_MAX];
    if (!realpath(dir, abs) || strlen(abs) + 32 > sizeof(a->vocab_file)) return;
    snprintf(a->vocab_file, sizeof(a->vocab_file), "%.4000s/vocab.json", abs);
    snprintf(a->merge_file, sizeof(a->merge_file), "%.4000s/merges.txt", abs);
    if (access(a->vocab_file, R_OK) == 0 && access(a->merge_file, R_OK) == 0) return;
    a->vocab_file[0] = a->merge_file[0] = 0;
    snprintf(a->tokenizer_model, sizeof(a->tokenizer_model), "%.4000s/tokenizer.json", abs);
    if (access(a->tokenizer_model, R_OK) == 0) {
        snprintf(a->tokenizer_type, sizeof(a->tokenizer_type), "HuggingFaceTokenizer");
        snprintf(a->tokenizer_model, sizeof(a->tokenizer_model), "%.4000s", abs);
        return;
    }
    snprintf(a->tokenizer_model, sizeof(a->tokenizer_model), "%.4000s/tokenizer.model", abs);
    if (access(a->tokenizer_model, R_OK) == 0) {
        snprintf(a->tokenizer_type, sizeof(a->tokenizer_type), "Llama2Tokenizer");
        return;
    }
    a->tokenizer_model[0] = 0;
}

int mc_hf_import_config(const char *hf_dir, mc_args_t *a, char *err, size_t n)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/config.json", hf_dir);
    json_error_t je;
    cfg_t c = {.cfg = json_load_file(path, 0, &je), .path = path, .err = err, .n = n};
    if (!c.cfg) return mc_errf(err, n, "%s: %s (a Hugging Face model directory?)", path, je.text);
    json_t *arch = json_array_get(json_object_get(c.cfg, "architectures"), 0);
    const char *cls = json_is_string(arch) ? json_string_value(arch) : text(&c, "model_type");
    if (strcmp(cls, "GPT2LMHeadModel") == 0 || strcmp(cls, "gpt2") == 0) gpt2_args(&c, a);
    else if (strcmp(cls, "LlamaForCausalLM") == 0 || strcmp(cls, "llama") == 0) llama_args(&c, a);
    else if (strcmp(cls, "MixtralForCausalLM") == 0 || strcmp(cls, "mixtral") == 0)
        moe_args(&c, a, false);
    else if (strcmp(cls, "Qwen3MoeForCausalLM") == 0 || strcmp(cls, "qwen3_moe") == 0)
        moe_args(&c, a, true);
    else if (strcmp(cls, "Qwen2MoeForCausalLM") == 0 || strcmp(cls, "qwen2_moe") == 0)
        refuse(&c, "Qwen2MoeForCausalLM (shared experts) is recognised but not implemented yet "
                   "in import-hf");
    else
        refuse(&c, "architectures: import-hf reads GPT2LMHeadModel, LlamaForCausalLM, "
                   "MixtralForCausalLM and Qwen3MoeForCausalLM");
    a->vocab_size = whole(&c, "vocab_size", NAN);
    a->seq_length = a->max_position_embeddings;
    a->init_method_std = num(&c, "initializer_range", 0.02);
    const char *dt = text(&c, "torch_dtype");
    a->bf16 = strcmp(dt, "bfloat16") == 0;
    a->fp16 = strcmp(dt, "float16") == 0;
    tokenizer_args(hf_dir, a);
    json_decref(c.cfg);
    return c.rc;
}

/* ---- the tensors ---- */

typedef struct {
    mc_st_file_t *f;
    int n;
    char (*names)[128];
    const char *dir; /* in messages */
} shards_t;

static void open_file(shards_t *s, const char *dir, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0) return;
    s->f = realloc(s->f, (size_t)(s->n + 1) * sizeof(*s->f));
    s->names = realloc(s->names, (size_t)(s->n + 1) * sizeof(*s->names));
    if (!s->f || !s->names) mc_fatal("out of host memory");
    char path[PATH_MAX + 160], err[PATH_MAX + 512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (mc_st_open(path, &s->f[s->n], err, sizeof(err)) != 0) mc_user_error("%s", err);
    snprintf(s->names[s->n++], sizeof(s->names[0]), "%s", name);
}

/* model.safetensors, or the shards model.safetensors.index.json names. */
static void open_shards(shards_t *s, const char *dir)
{
    s->dir = dir;
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
    if (access(path, F_OK) != 0) {
        open_file(s, dir, "model.safetensors");
        return;
    }
    json_error_t je;
    json_t *idx = json_load_file(path, 0, &je);
    json_t *map = json_object_get(idx, "weight_map");
    if (!json_is_object(map))
        mc_user_error("%s: no weight_map object (%s)", path, idx ? "" : je.text);
    const char *k;
    json_t *v;
    json_object_foreach(map, k, v)
    {
        const char *f = json_string_value(v);
        if (!f || strchr(f, '/') || strlen(f) >= 128)
            mc_user_error("%s: weight_map['%s'] is not a file name here", path, k);
        open_file(s, dir, f);
    }
    json_decref(idx);
}

/* Tensors HF files may hold that are not weights: old GPT-2 attention masks, Llama's rotary
 * frequencies, a tied lm_head.weight. */
static bool ignorable(const char *name, bool tied)
{
    const size_t l = strlen(name);
    const char *const ends[] = {".attn.bias", ".attn.masked_bias", "rotary_emb.inv_freq"};
    for (size_t i = 0; i < 3; i++)
        if (l >= strlen(ends[i]) && strcmp(name + l - strlen(ends[i]), ends[i]) == 0) return true;
    return tied && strcmp(name, "lm_head.weight") == 0;
}

/* HF tensor h into the whole model; every tensor of the shards is used once (used[]). */
static void load_tensor(const shards_t *s, bool **used, const mc_args_t *a, const mc_hf_tensor_t *h,
                        mc_trainer_t *t, mc_hf_class_t c)
{
    for (int i = 0; i < s->n; i++) {
        const mc_st_tensor_t *x = mc_st_find(&s->f[i], h->name);
        if (!x) continue;
        const int64_t d0 = h->transpose ? h->cols : h->rows, d1 = h->transpose ? h->rows : h->cols;
        if (x->ndim != (h->cols ? 2 : 1) || x->shape[0] != d0 || (h->cols && x->shape[1] != d1))
            mc_user_error("%s/%s: tensor %s has shape [%lld%s%lld], the config says [%lld, %lld]",
                          s->dir, s->names[i], h->name, (long long)x->shape[0],
                          x->ndim > 1 ? ", " : "", x->ndim > 1 ? (long long)x->shape[1] : 0LL,
                          (long long)d0, (long long)d1);
        const mc_dtype_t dt = x->dtype == MC_TORCH_FLOAT32    ? MC_DT_F32
                              : x->dtype == MC_TORCH_BFLOAT16 ? MC_DT_BF16
                              : x->dtype == MC_TORCH_FLOAT16  ? MC_DT_F16
                                                              : (mc_dtype_t)-1;
        if ((int)dt < 0)
            mc_user_error("%s/%s: tensor %s is %s (import-hf reads F32, BF16 and F16)", s->dir,
                          s->names[i], h->name, mc_st_dtype_name(x->dtype));
        const long numel = (long)(h->rows * (h->cols ? h->cols : 1));
        float *f = malloc((size_t)numel * sizeof(float));
        if (!f) mc_fatal("out of host memory");
        const void *src = mc_st_bytes(&s->f[i], x);
        for (long e = 0; e < numel; e++) f[e] = mc_load_f32(src, dt, e);
        const mc_param_t *p = mc_gpt_find_param(&t->model, h->mc);
        if (!p) mc_fatal("internal error: the model has no %s for %s", h->mc, h->name);
        mc_hf_copy(a, h, p, (float *)t->model.param_buf + p->offset, f, false);
        free(f);
        used[i][x - s->f[i].t] = true;
        return;
    }
    mc_user_error("%s: no tensor %s in its safetensors files (the config describes a %s)", s->dir,
                  h->name, mc_hf_class_names[c]);
}

/* The vocabulary rows past HF's: copies of the last, as Megatron's converter pads. */
static void pad_vocab(mc_trainer_t *t, const char *name, int64_t vocab)
{
    const mc_param_t *p = mc_gpt_find_param(&t->model, name);
    if (!p) return;
    float *w = (float *)t->model.param_buf + p->offset;
    for (int64_t r = vocab; r < p->shape[0]; r++)
        memcpy(w + r * p->shape[1], w + (vocab - 1) * p->shape[1],
               (size_t)p->shape[1] * sizeof(float));
}

/* Every tensor of the files read, or one line naming the first that is not. */
static void check_used(const shards_t *s, bool **used, bool tied)
{
    for (int i = 0; i < s->n; i++)
        for (size_t k = 0; k < s->f[i].n; k++)
            if (!used[i][k] && !ignorable(s->f[i].t[k].name, tied))
                mc_user_error("%s/%s: tensor %s is not part of the model config.json describes",
                              s->dir, s->names[i], s->f[i].t[k].name);
}

/* a's model at tp 1, pp 1: the whole model on one rank. */
static void whole_args(mc_args_t *w, const mc_args_t *a)
{
    *w = *a;
    w->tensor_model_parallel_size = w->pipeline_model_parallel_size = 1;
    w->virtual_pipeline_model_parallel_size = 1;
    w->num_layers_per_virtual_pipeline_stage = w->num_virtual_stages_per_pipeline_rank = 0;
    w->decoder_first_pipeline_num_layers = w->decoder_last_pipeline_num_layers = 0;
    w->account_for_embedding_in_pipeline_split = w->account_for_loss_in_pipeline_split = false;
    w->data_parallel_size = w->world_size = 1;
    w->expert_model_parallel_size = w->expert_tensor_parallel_size = 1;
    w->use_distributed_optimizer = w->overlap_param_gather = w->sequence_parallel = false;
    w->padded_vocab_size = mc_padded_vocab_size(a->vocab_size, a->make_vocab_size_divisible_by, 1);
}

/* The tokenizer's files into save/tokenizer, named there by the checkpoint's args (t). */
static void keep_tokenizer(const char *save, const mc_args_t *a, mc_args_t *t)
{
    if (!a->vocab_file[0] && !a->tokenizer_model[0]) return;
    char dir[PATH_MAX], err[PATH_MAX + 512];
    if (mc_mkdirs(save, err, sizeof(err)) != 0) mc_user_error("%s", err);
    if (!realpath(save, dir) || strlen(dir) > 4000)
        mc_user_error("%s: cannot resolve the directory", save);
    strcat(dir, "/tokenizer");
    if (mc_mkdirs(dir, err, sizeof(err)) != 0 || mc_hf_copy_tokenizer(dir, a, err, sizeof(err)) < 0)
        mc_user_error("%s", err);
    if (a->vocab_file[0]) {
        snprintf(t->vocab_file, sizeof(t->vocab_file), "%.4000s/vocab.json", dir);
        snprintf(t->merge_file, sizeof(t->merge_file), "%.4000s/merges.txt", dir);
    } else if (mc_tokenizer_is_sentencepiece(a->tokenizer_type)) {
        snprintf(t->tokenizer_model, sizeof(t->tokenizer_model), "%.4000s/tokenizer.model", dir);
    } else {
        snprintf(t->tokenizer_model, sizeof(t->tokenizer_model), "%.4000s", dir);
    }
}

int mc_hf_import_run(const mc_hf_import_args_t *o, const mc_args_t *a)
{
    char err[PATH_MAX + 512], why[256];
    static mc_args_t w; /* the trainer state points at it */
    whole_args(&w, a);
    mc_hf_class_t c;
    if (mc_hf_class_of(&w, &c, err, sizeof(err)) != 0) mc_user_error("%s", err);
    const mc_backend_t *be = mc_backend_select("cpu", 0, 0, why, sizeof(why));
    mc_trainer_t t;
    if (mc_trainer_init_state(&t, &w, be, 0, 0, err, sizeof(err)) != 0) mc_user_error("%s", err);
    shards_t s = {0};
    open_shards(&s, o->hf_dir);
    bool **used = calloc((size_t)s.n, sizeof(bool *));
    for (int i = 0; used && i < s.n; i++) used[i] = calloc(s.f[i].n + 1, sizeof(bool));
    mc_hf_tensor_t *h = NULL;
    const int n = mc_hf_tensors(&w, c, w.vocab_size, &h);
    for (int i = 0; i < n; i++) load_tensor(&s, used, &w, &h[i], &t, c);
    check_used(&s, used, !w.untie_embeddings_and_output_weights);
    pad_vocab(&t, mc_param_names[MC_PK_WORD_EMBEDDINGS].local, w.vocab_size);
    pad_vocab(&t, mc_param_names[MC_PK_OUTPUT_W].local, w.vocab_size);
    printf("imported %d tensors of a %s from %s\n", n, mc_hf_class_names[c], o->hf_dir);
    mc_args_t named = *a; /* the args the checkpoint carries: its tokenizer files */
    keep_tokenizer(o->save, a, &named);
    mc_pyobj_t *ns = mc_ckpt_args_namespace(&named, 0, 0);
    if (!ns) mc_fatal("out of host memory");
    mc_cv_save_whole(o->save, a, &t, ns,
                     o->ckpt_format && strcmp(o->ckpt_format, "torch_dist") == 0);
    mc_py_decref(ns);
    for (int i = 0; i < s.n; i++) {
        mc_st_close(&s.f[i]);
        free(used[i]);
    }
    free(used);
    free(s.f);
    free(s.names);
    free(h);
    mc_trainer_free(&t);
    return 0;
}
