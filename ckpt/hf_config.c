/* config.json, generation_config.json and the tokenizer files of the Hugging Face bridge
 * (ckpt/hf.h), both ways. */
#include "ckpt/hf.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/fs.h"
#include "ckpt/state.h"
#include "data/tokenizer.h"

/* Floats as their shortest usual spelling (0.1, 1e-05): configs are read by people too. */
#define JSON_FLAGS (JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15))

static const char *torch_dtype(const mc_args_t *a)
{
    return a->bf16 ? "bfloat16" : a->fp16 ? "float16" : "float32";
}

static json_t *gpt2_config(const mc_args_t *a, int64_t vocab)
{
    mc_gpt_config_t g;
    mc_gpt_config_from_args(&g, a);
    return json_pack("{s:[s], s:s, s:I, s:i, s:i, s:i, s:i, s:i, s:s, s:f, s:f, s:f, s:f, s:f, "
                     "s:b, s:b, s:b, s:s}",
                     "architectures", "GPT2LMHeadModel", "model_type", "gpt2", "vocab_size",
                     (json_int_t)vocab, "n_positions", g.max_pos, "n_embd", g.hidden, "n_layer",
                     g.num_layers, "n_head", g.heads, "n_inner", g.ffn, "activation_function",
                     g.act == MC_ACT_GELU_TANH ? "gelu_new" : "gelu", "resid_pdrop",
                     a->hidden_dropout, "embd_pdrop", a->hidden_dropout, "attn_pdrop",
                     a->attention_dropout, "layer_norm_epsilon", a->norm_epsilon,
                     "initializer_range", a->init_method_std, "scale_attn_weights", 1,
                     "tie_word_embeddings", g.tied, "use_cache", 1, "torch_dtype", torch_dtype(a));
}

/* rope_scaling: Llama 3.1's (Megatron's --use-rope-scaling, its fixed constants), or linear
 * (--rotary-seq-len-interpolation-factor: positions divided by it), or none. */
static json_t *rope_scaling(const mc_args_t *a)
{
    if (a->use_rope_scaling)
        return json_pack("{s:s, s:f, s:f, s:f, s:i}", "rope_type", "llama3", "factor",
                         a->rope_scaling_factor, "low_freq_factor", 1.0, "high_freq_factor", 4.0,
                         "original_max_position_embeddings", 8192);
    if (a->rotary_seq_len_interpolation_factor)
        return json_pack("{s:s, s:f}", "rope_type", "linear", "factor",
                         (double)a->rotary_seq_len_interpolation_factor);
    return json_null();
}

static json_t *llama_config(const mc_args_t *a, int64_t vocab)
{
    mc_gpt_config_t g;
    mc_gpt_config_from_args(&g, a);
    return json_pack("{s:[s], s:s, s:I, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:i, s:f, s:f, s:o, "
                     "s:b, s:b, s:f, s:f, s:b, s:b, s:s}",
                     "architectures", "LlamaForCausalLM", "model_type", "llama", "vocab_size",
                     (json_int_t)vocab, "hidden_size", g.hidden, "intermediate_size", g.ffn,
                     "num_hidden_layers", g.num_layers, "num_attention_heads", g.heads,
                     "num_key_value_heads", g.groups, "head_dim", g.head_dim, "hidden_act", "silu",
                     "max_position_embeddings", g.max_pos, "rms_norm_eps", a->norm_epsilon,
                     "rope_theta", (double)a->rotary_base, "rope_scaling", rope_scaling(a),
                     "attention_bias", g.bias, "mlp_bias", g.bias, "attention_dropout",
                     a->attention_dropout, "initializer_range", a->init_method_std,
                     "tie_word_embeddings", g.tied, "use_cache", 1, "torch_dtype", torch_dtype(a));
}

static int dump(json_t *j, const char *dir, const char *name, char *err, size_t n)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    char *text = j ? json_dumps(j, JSON_FLAGS) : NULL;
    json_decref(j);
    if (!text) return mc_errf(err, n, "%s: out of memory", path);
    size_t len = strlen(text);
    text[len] = '\n'; /* replaces the terminator: written with its length */
    int rc = mc_write_file(path, text, len + 1, err, n);
    free(text);
    return rc;
}

int mc_hf_write_config(const char *dir, const mc_args_t *a, mc_hf_class_t c, int64_t vocab,
                       int64_t eos, char *err, size_t n)
{
    json_t *cfg = c == MC_HF_GPT2 ? gpt2_config(a, vocab) : llama_config(a, vocab);
    if (cfg && c >= MC_HF_MIXTRAL) {
        mc_gpt_config_t g;
        mc_gpt_config_from_args(&g, a);
        mc_hf_moe_config(cfg, &g, c);
    }
    json_t *gen = json_pack("{s:b}", "_from_model_config", 1);
    if (eos >= 0 && eos < vocab && cfg && gen) {
        json_object_set_new(cfg, "bos_token_id", json_integer(eos));
        json_object_set_new(cfg, "eos_token_id", json_integer(eos));
        json_object_set_new(gen, "bos_token_id", json_integer(eos));
        json_object_set_new(gen, "eos_token_id", json_integer(eos));
    } else if (c == MC_HF_GPT2 && cfg) { /* not GPT2Config's default, GPT-2's 50256 */
        json_object_set_new(cfg, "bos_token_id", json_null());
        json_object_set_new(cfg, "eos_token_id", json_null());
    }
    if (dump(cfg, dir, "config.json", err, n) != 0) {
        json_decref(gen);
        return -1;
    }
    return dump(gen, dir, "generation_config.json", err, n);
}

int mc_hf_copy_file(const char *src, const char *dst, char *err, size_t n)
{
    FILE *f = fopen(src, "rb");
    if (!f) return mc_errf(err, n, "%s: %s", src, strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (len + 65536 > cap && !(buf = realloc(buf, cap = 2 * cap + 65536))) {
            fclose(f);
            return mc_errf(err, n, "%s: out of memory", src);
        }
        len += got = fread(buf + len, 1, cap - len, f);
    } while (got > 0);
    const bool bad = ferror(f);
    fclose(f);
    int rc = bad ? mc_errf(err, n, "%s: read error", src) : mc_write_file(dst, buf, len, err, n);
    free(buf);
    return rc;
}

/* HuggingFaceTokenizer's files: tokenizer.json and, when there, the two JSON files that name
 * its special tokens. */
static int copy_hf_tokenizer(const char *dir, const char *model_dir, char *err, size_t n)
{
    static const char *const names[] = {"tokenizer.json", "tokenizer_config.json",
                                        "special_tokens_map.json"};
    char src[4200], dst[4200];
    int copied = 0;
    for (int i = 0; i < 3; i++) {
        snprintf(src, sizeof(src), "%s/%s", model_dir, names[i]);
        if (i > 0 && access(src, R_OK) != 0) continue;
        snprintf(dst, sizeof(dst), "%s/%s", dir, names[i]);
        if (mc_hf_copy_file(src, dst, err, n) != 0) return -1;
        copied++;
    }
    return copied;
}

int mc_hf_copy_tokenizer(const char *dir, const mc_args_t *a, char *err, size_t n)
{
    char path[4200];
    if (strcmp(a->tokenizer_type, "HuggingFaceTokenizer") == 0 && a->tokenizer_model[0])
        return copy_hf_tokenizer(dir, a->tokenizer_model, err, n);
    if (mc_tokenizer_is_sentencepiece(a->tokenizer_type) && a->tokenizer_model[0]) {
        snprintf(path, sizeof(path), "%s/tokenizer.model", dir);
        return mc_hf_copy_file(a->tokenizer_model, path, err, n) != 0 ? -1 : 1;
    }
    const char *src[2] = {a->vocab_file, a->merge_file}, *dst[2] = {"vocab.json", "merges.txt"};
    int copied = 0;
    for (int i = 0; i < 2; i++) {
        if (!src[i][0]) continue;
        snprintf(path, sizeof(path), "%s/%s", dir, dst[i]);
        if (mc_hf_copy_file(src[i], path, err, n) != 0) return -1;
        copied++;
    }
    return copied;
}
