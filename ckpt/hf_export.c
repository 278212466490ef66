/* `megatron-c export-hf` (ckpt/hf.h): a checkpoint gathered whole (ckpt/convert.c), its
 * tensors renamed and reshaped for the Hugging Face class, written as safetensors shards. */
#include "ckpt/hf.h"

#include <ctype.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/fs.h"
#include "ckpt/convert_int.h"
#include "data/tokenizer.h"
#include "kernels/dtype.h"
#include "torchfmt/safetensors.h"

/* HF's spelling of sizes: "5GB" (10^9), "500MiB" (2^20), or bytes. */
static uint64_t shard_size(const char *s)
{
    static const struct {
        const char *unit;
        uint64_t mult;
    } U[] = {{"", 1},
             {"B", 1},
             {"KB", 1000},
             {"MB", 1000000},
             {"GB", 1000000000},
             {"KIB", 1ULL << 10},
             {"MIB", 1ULL << 20},
             {"GIB", 1ULL << 30}};
    char *end;
    const double v = strtod(s, &end);
    char unit[8] = "";
    for (int i = 0; end[i] && i < 7; i++) unit[i] = (char)toupper((unsigned char)end[i]);
    for (size_t i = 0; i < sizeof(U) / sizeof(U[0]); i++)
        if (end != s && v >= 1 && strlen(end) < 8 && strcmp(unit, U[i].unit) == 0)
            return (uint64_t)(v * (double)U[i].mult);
    mc_user_error("--max-shard-size '%s': give a size such as 5GB, 200MB, 500MiB or bytes", s);
}

static mc_dtype_t dt_of(mc_torch_dtype_t t)
{
    return t == MC_TORCH_BFLOAT16 ? MC_DT_BF16 : t == MC_TORCH_FLOAT16 ? MC_DT_F16 : MC_DT_F32;
}

/* HF tensor h's bytes (malloc'ed) in type dt, from the whole model. */
static void *hf_tensor(const mc_args_t *a, const mc_trainer_t *t, const mc_hf_tensor_t *h,
                       mc_torch_dtype_t dt)
{
    const mc_param_t *p = mc_gpt_find_param(&t->model, h->mc);
    if (!p) mc_fatal("internal error: the model has no %s for %s", h->mc, h->name);
    const long numel = (long)(h->rows * (h->cols ? h->cols : 1));
    float *f = malloc((size_t)numel * sizeof(float));
    void *out = malloc((size_t)numel * mc_st_dtype_size(dt));
    if (!f || !out) mc_fatal("out of host memory");
    mc_hf_copy(a, h, p, (float *)t->model.param_buf + p->offset, f, true);
    for (long i = 0; i < numel; i++) mc_store_f32(out, dt_of(dt), i, f[i]);
    free(f);
    return out;
}

/* ---- shards ---- */

/* Shard k of n's file name: model.safetensors alone, else HF's model-0000k-of-0000n. */
static void shard_name(char *buf, size_t len, int k, int n)
{
    if (n == 1) snprintf(buf, len, "model.safetensors");
    else snprintf(buf, len, "model-%05d-of-%05d.safetensors", k + 1, n);
}

static const char *const META[] = {"format", "pt"};

/* Which shard each tensor goes to: in order, a new shard when the next tensor would pass max
 * (a tensor larger than max gets a shard of its own), as transformers' save_pretrained. */
static int plan_shards(const mc_st_entry_t *e, int n, uint64_t max, int *shard)
{
    int k = 0;
    uint64_t used = 0;
    for (int i = 0; i < n; i++) {
        const uint64_t b = mc_st_nbytes(&e[i]);
        if (used > 0 && used + b > max) {
            k++;
            used = 0;
        }
        shard[i] = k;
        used += b;
    }
    return k + 1;
}

/* model.safetensors.index.json: total_size (the tensors' bytes) and the weight map. */
static void write_index(const char *dir, const mc_st_entry_t *e, int n, const int *shard,
                        int n_shards)
{
    json_t *map = json_object();
    uint64_t total = 0;
    char name[64], path[4200], err[4400];
    for (int i = 0; i < n; i++) {
        shard_name(name, sizeof(name), shard[i], n_shards);
        json_object_set_new(map, e[i].name, json_string(name));
        total += mc_st_nbytes(&e[i]);
    }
    json_t *idx =
        json_pack("{s:{s:I}, s:o}", "metadata", "total_size", (json_int_t)total, "weight_map", map);
    char *text = json_dumps(idx, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(idx);
    if (!text) mc_fatal("out of host memory");
    snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
    size_t len = strlen(text);
    text[len] = '\n';
    if (mc_write_file(path, text, len + 1, err, sizeof(err)) != 0) mc_user_error("%s", err);
    free(text);
}

static void write_shards(const char *dir, const mc_st_entry_t *e, int n, uint64_t max)
{
    int *shard = malloc((size_t)n * sizeof(int));
    if (!shard) mc_fatal("out of host memory");
    const int n_shards = plan_shards(e, n, max, shard);
    char name[64], path[4200], err[4400];
    for (int k = 0, first = 0; k < n_shards; k++) {
        int last = first;
        while (last < n && shard[last] == k) last++;
        shard_name(name, sizeof(name), k, n_shards);
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        if (mc_st_write(path, e + first, (size_t)(last - first), META, 1, err, sizeof(err)) != 0)
            mc_user_error("%s", err);
        first = last;
    }
    if (n_shards > 1) write_index(dir, e, n, shard, n_shards);
    printf("wrote %d tensors in %d file%s\n", n, n_shards, n_shards > 1 ? "s" : "");
    free(shard);
}

/* ---- the subcommand ---- */

/* HF's vocab_size: the tokenizer's (its files', or --vocab-size), else every row; *eos its
 * end-of-document token when its files say it (-1 otherwise). */
static int64_t hf_vocab(const mc_args_t *a, int64_t *eos)
{
    *eos = -1;
    int64_t v = a->vocab_size > 0 ? mc_args_vocab_from_size(a) : 0;
    if ((a->vocab_file[0] && a->merge_file[0]) || a->tokenizer_model[0]) {
        const mc_tokenizer_spec_t spec = mc_tokenizer_spec_of(a);
        char err[4400];
        mc_tokenizer_t *tok = mc_tokenizer_build(&spec, err, sizeof(err));
        if (!tok) mc_user_error("the checkpoint's tokenizer: %s", err);
        v = mc_tokenizer_vocab_size(tok);
        *eos = mc_tokenizer_eod(tok);
        mc_tokenizer_free(tok);
    }
    if (v > 0 && v <= a->padded_vocab_size) return v;
    printf("note: the checkpoint does not say its tokenizer's vocabulary size; vocab_size is the "
           "padded %d rows\n",
           a->padded_vocab_size);
    return a->padded_vocab_size;
}

int mc_hf_export_run(const mc_hf_export_args_t *o)
{
    const uint64_t max = shard_size(o->max_shard_size ? o->max_shard_size : "5GB");
    char err[4400];
    static mc_args_t a; /* the trainer state points at it */
    mc_trainer_t t;
    mc_cv_load_whole(o->load, o->ckpt_step, &a, &t);
    mc_hf_class_t c;
    if (mc_hf_class_of(&a, &c, err, sizeof(err)) != 0)
        mc_user_error("%s: cannot export as Hugging Face: %s", o->load, err);
    int64_t eos;
    const int64_t vocab = hf_vocab(&a, &eos);
    mc_hf_tensor_t *h = NULL;
    const int n = mc_hf_tensors(&a, c, vocab, &h);
    const mc_torch_dtype_t dt = mc_ckpt_model_dtype(&a);
    mc_st_entry_t *e = calloc((size_t)n, sizeof(*e));
    if (!e) mc_fatal("out of host memory");
    for (int i = 0; i < n; i++) {
        e[i] = (mc_st_entry_t){.name = h[i].name, .dtype = dt, .ndim = h[i].cols ? 2 : 1};
        e[i].shape[0] = h[i].transpose ? h[i].cols : h[i].rows;
        if (h[i].cols) e[i].shape[1] = h[i].transpose ? h[i].rows : h[i].cols;
        e[i].data = hf_tensor(&a, &t, &h[i], dt);
    }
    mc_trainer_free(&t);
    if (mc_mkdirs(o->output, err, sizeof(err)) != 0) mc_user_error("%s", err);
    printf("exporting %s as %s (%s, vocab_size %" PRId64 ") to %s\n", o->load, mc_hf_class_names[c],
           mc_st_dtype_name(dt), vocab, o->output);
    write_shards(o->output, e, n, max);
    if (mc_hf_write_config(o->output, &a, c, vocab, eos, err, sizeof(err)) != 0)
        mc_user_error("%s", err);
    const int tok = mc_hf_copy_tokenizer(o->output, &a, err, sizeof(err));
    if (tok < 0) mc_user_error("%s", err);
    if (tok == 0)
        printf("note: no tokenizer files: the checkpoint names none that a Hugging Face loader "
               "reads (--vocab-file and --merge-file, or --tokenizer-model of "
               "HuggingFaceTokenizer or a SentencePiece type); put the tokenizer's files into "
               "%s\n",
               o->output);
    for (int i = 0; i < n; i++) free((void *)e[i].data);
    free(e);
    free(h);
    mc_args_free(&a);
    return 0;
}
