/* The Hugging Face bridge: `megatron-c export-hf` writes a checkpoint (any layout, legacy or
 * torch_dist) as a transformers model directory, and `megatron-c import-hf` reads one back into
 * a checkpoint of any tensor / pipeline layout (flags: cli/hf_args.c). Two classes:
 *   GPT2LMHeadModel   learned absolute positions, LayerNorm, GeLU (tanh: gelu_new; erf: gelu),
 *                     biases, multi-head attention; tied or untied output layer;
 *   LlamaForCausalLM  RMSNorm, SwiGLU, rotary positions (rotate-half, full head; rope_scaling
 *                     llama3 for --use-rope-scaling, linear for
 *                     --rotary-seq-len-interpolation-factor), grouped-query attention, with or
 *                     without biases (attention_bias / mlp_bias), tied or not.
 * A model neither class expresses is refused with one line naming the option.
 *
 * The files: model.safetensors (torchfmt/safetensors.h; above --max-shard-size,
 * model-0000k-of-0000n.safetensors with model.safetensors.index.json), config.json,
 * generation_config.json, and the tokenizer files the checkpoint's args name (--vocab-file and
 * --merge-file as vocab.json and merges.txt). Tensors are the model's type: float32, or
 * bfloat16/float16 for a --bf16/--fp16 model (the fp32 master weights rounded, which is what
 * that model computes with).
 *
 * Vocabulary: HF's vocab_size is the tokenizer's (--vocab-size, or the padded size when the
 * checkpoint does not say it); Megatron's padding rows are dropped on export, and on import the
 * embedding (and output layer) are padded for the target tensor-parallel size with copies of the
 * last row, as Megatron's converter pads them. So HF -> megatron-c -> HF gives the same bytes. */
#ifndef MC_CKPT_HF_H
#define MC_CKPT_HF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/args.h"
#include "model/gpt.h"
#include "model/param_names.h"
#include "trainer/config.h"

typedef struct {
    const char *load, *output;  /* --load, --output (required) */
    int64_t ckpt_step;          /* 0: the tracker's iteration */
    const char *max_shard_size; /* "5GB", "200MB", "1000000" (bytes) */
} mc_hf_export_args_t;

typedef struct {
    const char *hf_dir, *save; /* --hf-dir, --save (required) */
    const char *ckpt_format;   /* torch | torch_dist */
} mc_hf_import_args_t;

/* `export-hf`. Returns 0; errors are one line (exit 2). */
int mc_hf_export_run(const mc_hf_export_args_t *o);
/* The model arguments of hf_dir's config.json into a (Megatron's defaults first: a from
 * mc_args_defaults), to be validated at the target layout by the caller. Refuses, with one line
 * in err, a class or option it cannot hold. */
int mc_hf_import_config(const char *hf_dir, mc_args_t *a, char *err, size_t n);
/* `import-hf` into a's layout (validated). Returns 0; errors are one line (exit 2). */
int mc_hf_import_run(const mc_hf_import_args_t *o, const mc_args_t *a);

/* ---- the mapping (ckpt/hf_map.c) ---- */

/* mc_hf_class_t and the HF names of each parameter: model/param_names.h */
extern const char *const mc_hf_class_names[MC_HF_CLASSES]; /* "GPT2LMHeadModel", ... */

/* The class that expresses a's model, or -1 with one line naming the option that none does. */
int mc_hf_class_of(const mc_args_t *a, mc_hf_class_t *c, char *err, size_t n);

/* One HF tensor: rows `rows` x cols of Megatron parameter mc (part of its rows), stored
 * transposed ([cols, rows]: GPT-2's Conv1D) when transpose; a vector when cols is 0. */
typedef struct {
    char name[128];
    char mc[96];
    mc_hf_part_t part;
    int64_t rows, cols;
    bool transpose;
} mc_hf_tensor_t;

/* The HF tensors of class c for model a (vocab: HF's vocab_size), in the order written. Returns
 * their number; *out is malloc'ed. */
int mc_hf_tensors(const mc_args_t *a, mc_hf_class_t c, int64_t vocab, mc_hf_tensor_t **out);
/* Copies between h's HF data (fp32, its stored shape) and Megatron parameter p's full fp32
 * tensor w: to_hf reads w, otherwise writes it. */
void mc_hf_copy(const mc_args_t *a, const mc_hf_tensor_t *h, const mc_param_t *p, float *w,
                float *hf, bool to_hf);

/* ---- the MoE classes (ckpt/hf_moe.c) ---- */

struct json_t;
/* The MoE class that expresses a's model (g: its config, with experts), or -1 with one line
 * naming the option that none does. */
int mc_hf_moe_class_of(const mc_args_t *a, const mc_gpt_config_t *g, mc_hf_class_t *c, char *err,
                       size_t n);
/* Turns Llama's config.json cfg into MoE class c's. */
void mc_hf_moe_config(struct json_t *cfg, const mc_gpt_config_t *g, mc_hf_class_t c);

/* ---- config.json and the tokenizer (ckpt/hf_config.c) ---- */

/* config.json and generation_config.json of class c into dir (vocab: HF's vocab_size; eos: the
 * tokenizer's end-of-document token, bos and eos there, or -1 when unknown). */
int mc_hf_write_config(const char *dir, const mc_args_t *a, mc_hf_class_t c, int64_t vocab,
                       int64_t eos, char *err, size_t n);
/* Copies the checkpoint's tokenizer files into dir under the names Hugging Face's loaders read:
 * GPT-2's --vocab-file / --merge-file as vocab.json / merges.txt; HuggingFaceTokenizer's
 * tokenizer.json (with tokenizer_config.json and special_tokens_map.json when there); a
 * SentencePiece type's .model as tokenizer.model. Returns how many it copied (0: none named,
 * or TikTokenizer, whose vocabulary no Hugging Face loader reads; -1 with err on failure). */
int mc_hf_copy_tokenizer(const char *dir, const mc_args_t *a, char *err, size_t n);
/* Copies src to dst durably. */
int mc_hf_copy_file(const char *src, const char *dst, char *err, size_t n);

#endif
