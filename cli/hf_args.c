/* `megatron-c export-hf` and `megatron-c import-hf` flags (ckpt/hf.h), as flag tables read by
 * the shared parser (cli/cli.h). import-hf validates the model config.json describes at the
 * target layout with training's rules (mc_args_finalize) before anything is written. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "cli/cli.h"
#include "data/tokenizer.h"
#include "ckpt/hf.h"
#include "config/flags_table.h"

#define G .group = "options"
#define EOPT(x) FIELD_OF(mc_hf_export_args_t, x)
#define EREF(x) REF_OF(mc_hf_export_args_t, x)

static const mc_flag_t EXPORT_FLAGS[] = {
    MC_FLAG_HELP_ROW("options"),
    {.name = "--load",
     G,
     STRING,
     EREF(load),
     .required = 1,
     IMPLEMENTED,
     .help = "Checkpoint directory to export (megatron-c's or Megatron-LM's; legacy torch or "
             "torch_dist; any tensor / pipeline / virtual pipeline layout)"},
    {.name = "--output",
     G,
     STRING,
     EREF(output),
     .required = 2,
     IMPLEMENTED,
     .help = "Directory of the Hugging Face model (model.safetensors, config.json, "
             "generation_config.json, tokenizer files); created, files there replaced"},
    {.name = "--ckpt-step",
     G,
     INT64,
     EOPT(ckpt_step),
     GE(1),
     IMPLEMENTED,
     .help = "Iteration to export instead of the tracker's"},
    {.name = "--max-shard-size",
     G,
     STRING,
     EREF(max_shard_size),
     .def = "5GB",
     IMPLEMENTED,
     .help = "Largest safetensors file (transformers' spelling: 5GB, 200MB, 500MiB, or bytes); "
             "a larger model is split into model-0000k-of-0000n.safetensors with "
             "model.safetensors.index.json"},
};

/* import-hf's own options, and the layout into training's args (IOPT) */
typedef struct {
    mc_hf_import_args_t o;
    int tp, pp, virtual_stages;
} import_opts_t;
#define IOPT(x) FIELD_OF(import_opts_t, x)
#define IREF(x) REF_OF(import_opts_t, x)

static const mc_flag_t IMPORT_FLAGS[] = {
    MC_FLAG_HELP_ROW("options"),
    {.name = "--hf-dir",
     G,
     STRING,
     IREF(o.hf_dir),
     .required = 1,
     IMPLEMENTED,
     .help = "Hugging Face model directory (config.json of a GPT2LMHeadModel, "
             "LlamaForCausalLM, MixtralForCausalLM or Qwen3MoeForCausalLM, model.safetensors or "
             "its sharded index, tokenizer files)"},
    {.name = "--save",
     G,
     STRING,
     IREF(o.save),
     .required = 2,
     IMPLEMENTED,
     .help = "Checkpoint directory to write (a `release` checkpoint: weights, no optimizer "
             "state; training starts from it at iteration 0)"},
    {.name = "--tensor-model-parallel-size",
     G,
     INT,
     IOPT(tp),
     .def = "1",
     GE(1),
     IMPLEMENTED,
     .help = "Tensor model parallel size of the checkpoint"},
    {.name = "--pipeline-model-parallel-size",
     G,
     INT,
     IOPT(pp),
     .def = "1",
     GE(1),
     IMPLEMENTED,
     .help = "Pipeline model parallel size of the checkpoint"},
    {.name = "--num-virtual-stages-per-pipeline-rank",
     G,
     INT,
     IOPT(virtual_stages),
     .def = "1",
     GE(1),
     IMPLEMENTED,
     .help = "Virtual pipeline stages per pipeline rank of the checkpoint (1: none)"},
    {.name = "--ckpt-format",
     G,
     CHOICE("torch", "torch_dist"),
     IREF(o.ckpt_format),
     .def = "torch",
     IMPLEMENTED,
     .help = "Format of the checkpoint: torch (legacy mp_rank_* files) or torch_dist"},
};

static void export_help(FILE *f)
{
    fputs("usage: megatron-c export-hf --load DIR --output DIR [--max-shard-size 5GB]\n\n"
          "Writes a checkpoint as a Hugging Face transformers model: GPT2LMHeadModel (learned\n"
          "positions, LayerNorm, GeLU, biases), LlamaForCausalLM (RMSNorm, SwiGLU, rope,\n"
          "grouped-query attention), or with --num-experts MixtralForCausalLM (every layer\n"
          "MoE) or Qwen3MoeForCausalLM (--qk-layernorm); a model no class expresses is\n"
          "refused, naming the option.\n",
          f);
    mc_flag_set_t set = {EXPORT_FLAGS, sizeof(EXPORT_FLAGS) / sizeof(EXPORT_FLAGS[0]), NULL};
    mc_cli_print_flags(f, &set);
}

static void import_help(FILE *f)
{
    fputs("usage: megatron-c import-hf --hf-dir DIR --save DIR [--tensor-model-parallel-size T]\n"
          "                            [--pipeline-model-parallel-size P]\n\n"
          "Reads a Hugging Face GPT2LMHeadModel, LlamaForCausalLM, MixtralForCausalLM or\n"
          "Qwen3MoeForCausalLM into a megatron-c checkpoint of the given layout, from which\n"
          "training continues (--load, with --use-checkpoint-args or the model's flags).\n",
          f);
    mc_flag_set_t set = {IMPORT_FLAGS, sizeof(IMPORT_FLAGS) / sizeof(IMPORT_FLAGS[0]), NULL};
    mc_cli_print_flags(f, &set);
}

int mc_cli_export_hf(int argc, char **argv)
{
    mc_hf_export_args_t o;
    memset(&o, 0, sizeof(o));
    mc_cli_t c = {.prog = "megatron-c export-hf",
                  .sets = {{EXPORT_FLAGS, sizeof(EXPORT_FLAGS) / sizeof(EXPORT_FLAGS[0]), &o}},
                  .nsets = 1,
                  .help = export_help};
    mc_cli_defaults(&c);
    mc_cli_parse(&c, argc - 1, argv + 1);
    return mc_hf_export_run(&o);
}

int mc_cli_import_hf(int argc, char **argv)
{
    import_opts_t io;
    memset(&io, 0, sizeof(io));
    mc_cli_t c = {.prog = "megatron-c import-hf",
                  .sets = {{IMPORT_FLAGS, sizeof(IMPORT_FLAGS) / sizeof(IMPORT_FLAGS[0]), &io}},
                  .nsets = 1,
                  .help = import_help};
    mc_cli_defaults(&c);
    mc_cli_parse(&c, argc - 1, argv + 1);
    static mc_args_t a;
    mc_args_defaults(&a);
    char err[8192];
    if (mc_hf_import_config(io.o.hf_dir, &a, err, sizeof(err)) != 0) mc_user_error("%s", err);
    if (a.num_experts && io.tp > 1) /* MoE checkpoints convert at tp 1 (ckpt/convert.c) */
        mc_user_error("import-hf of an MoE model at --tensor-model-parallel-size %d is recognised "
                      "but not implemented yet in megatron-c (import at tp 1: pipeline stages "
                      "and torch_dist work)",
                      io.tp);
    a.tensor_model_parallel_size = io.tp;
    a.pipeline_model_parallel_size = io.pp;
    a.num_virtual_stages_per_pipeline_rank = io.virtual_stages > 1 ? io.virtual_stages : 0;
    /* the layout's rules are training's: a microbatch of one, one data-parallel rank; no
     * training arguments (Megatron's converters save none: --use-checkpoint-args takes the
     * model's only) */
    a.micro_batch_size = 1;
    a.lr_set = true;
    a.train_iters = 1;
    mc_args_finalize(&a, io.tp * io.pp);
    /* a tokenizer that sizes the vocabulary itself (GPT-2's files, tokenizer.json, a
     * SentencePiece model) leaves the padding to training's start-up; config.json's
     * vocab_size is that size */
    if (a.padded_vocab_size == 0)
        a.padded_vocab_size = mc_padded_vocab_size((int)mc_args_vocab_from_size(&a),
                                                   a.make_vocab_size_divisible_by, io.tp);
    return mc_hf_import_run(&io.o, &a);
}
