/* `megatron-c convert-checkpoint` flags: the flags of Megatron-LM's tools/checkpoint/convert.py
 * that apply (--model-type, --load-dir, --save-dir, the saver's --target-tensor-parallel-size,
 * --target-pipeline-parallel-size and --saver-transformer-impl, the loader's --true-vocab-size),
 * plus what the virtual pipeline stages and the distributed optimizer's file need, as a flag
 * table read by the shared parser (cli/cli.h) into ckpt/convert.h's options. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "ckpt/convert.h"
#include "config/flags_table.h"

#define OPT(x) FIELD_OF(mc_convert_args_t, x)
#define REF(x) REF_OF(mc_convert_args_t, x)
#define KEEP .none = "-1" /* not given: the source's */
#define G .group = "options"

static const mc_flag_t FLAGS[] = {
    MC_FLAG_HELP_ROW("options"),
    {.name = "--model-type",
     G,
     CHOICE("GPT"),
     .def = "GPT",
     IMPLEMENTED,
     .help = "Type of the model (Megatron's convert.py; GPT only)"},
    {.name = "--load-dir",
     G,
     STRING,
     REF(load_dir),
     .required = 1,
     IMPLEMENTED,
     .help = "Directory to load the checkpoint from (megatron-c's or Megatron-LM's legacy torch "
             "format; the tracker's iteration)"},
    {.name = "--save-dir",
     G,
     STRING,
     REF(save_dir),
     .required = 2,
     IMPLEMENTED,
     .help = "Directory to save the converted checkpoint to (written atomically, like a save; "
             "other iterations there are kept). Not --load-dir's directory, nor one whose "
             "tracker names a later iteration, unless --overwrite"},
    {.name = "--overwrite",
     G,
     TRUE_IF_GIVEN,
     OPT(overwrite),
     IMPLEMENTED,
     .help = "Write even when --save-dir is --load-dir's directory (the source is replaced) or "
             "holds a later checkpoint (its tracker is set back to the converted iteration)"},
    {.name = "--ckpt-step",
     G,
     INT64,
     OPT(ckpt_step),
     GE(1),
     IMPLEMENTED,
     .help = "Iteration to convert instead of the tracker's"},
    {.name = "--target-tensor-parallel-size",
     G,
     INT,
     OPT(tp),
     KEEP,
     GE(1),
     IMPLEMENTED,
     .help = "Target tensor model parallel size (default: the source's)"},
    {.name = "--target-pipeline-parallel-size",
     G,
     INT,
     OPT(pp),
     KEEP,
     GE(1),
     IMPLEMENTED,
     .help = "Target pipeline model parallel size (default: the source's)"},
    {.name = "--target-num-layers-per-virtual-pipeline-stage",
     G,
     INT,
     OPT(layers_per_virtual_stage),
     KEEP,
     GE(1),
     IMPLEMENTED,
     .help = "Target --num-layers-per-virtual-pipeline-stage (default: the source's virtual "
             "stages when the pipeline size is unchanged, else none)"},
    {.name = "--target-num-virtual-stages-per-pipeline-rank",
     G,
     INT,
     OPT(virtual_stages),
     KEEP,
     GE(1),
     IMPLEMENTED,
     .help = "Target --num-virtual-stages-per-pipeline-rank (1: no virtual stages)"},
    {.name = "--target-decoder-first-pipeline-num-layers",
     G,
     INT,
     OPT(first_stage_layers),
     KEEP,
     GE(1),
     IMPLEMENTED,
     .help = "Target --decoder-first-pipeline-num-layers (uneven first stage)"},
    {.name = "--target-decoder-last-pipeline-num-layers",
     G,
     INT,
     OPT(last_stage_layers),
     KEEP,
     GE(1),
     IMPLEMENTED,
     .help = "Target --decoder-last-pipeline-num-layers (uneven last stage)"},
    {.name = "--target-account-for-embedding-in-pipeline-split",
     G,
     TRUE_IF_GIVEN,
     OPT(account_embedding),
     KEEP,
     IMPLEMENTED,
     .help = "Target --account-for-embedding-in-pipeline-split (default: the source's when the "
             "pipeline layout is unchanged, else off)"},
    {.name = "--target-account-for-loss-in-pipeline-split",
     G,
     TRUE_IF_GIVEN,
     OPT(account_loss),
     KEEP,
     IMPLEMENTED,
     .help = "Target --account-for-loss-in-pipeline-split (default: the source's when the "
             "pipeline layout is unchanged, else off)"},
    {.name = "--target-use-distributed-optimizer",
     G,
     TRUE_IF_GIVEN,
     OPT(dist_opt),
     KEEP,
     IMPLEMENTED,
     .help = "Write the optimizer state as --use-distributed-optimizer does (distrib_optim.pt)"},
    {.name = "--target-no-use-distributed-optimizer",
     G,
     FALSE_IF_GIVEN,
     OPT(dist_opt),
     KEEP,
     IMPLEMENTED,
     .help = "Write the optimizer state into model_optim_rng.pt (no distributed optimizer)"},
    {.name = "--target-data-parallel-size",
     G,
     INT,
     OPT(dp),
     KEEP,
     GE(1),
     IMPLEMENTED,
     .help = "Data-parallel size the target is trained with (the distributed optimizer's bucket "
             "padding and default bucket size; default: the source's)"},
    {.name = "--target-overlap-grad-reduce",
     G,
     TRUE_IF_GIVEN,
     OPT(overlap_grad_reduce),
     KEEP,
     IMPLEMENTED,
     .help = "The target trains with --overlap-grad-reduce (gradient buckets of the distributed "
             "optimizer's file)"},
    {.name = "--target-no-overlap-grad-reduce",
     G,
     FALSE_IF_GIVEN,
     OPT(overlap_grad_reduce),
     KEEP,
     IMPLEMENTED,
     .help = "The target trains without --overlap-grad-reduce (one bucket)"},
    {.name = "--target-ddp-bucket-size",
     G,
     INT64,
     OPT(ddp_bucket_size),
     KEEP,
     GE(1),
     IMPLEMENTED,
     .help = "The target's --ddp-bucket-size"},
    {.name = "--saver-transformer-impl",
     G,
     CHOICE("local", "transformer_engine"),
     REF(transformer_impl),
     IMPLEMENTED,
     .help = "Names of the saved model: local (input_layernorm, ...) or transformer_engine "
             "(fused layer_norm_weight, ...); default: the source's"},
    {.name = "--target-ckpt-format",
     G,
     CHOICE("torch", "torch_dist"),
     REF(target_format),
     IMPLEMENTED,
     .help = "Format of the converted checkpoint: torch (legacy, mp_rank_* files) or torch_dist "
             "(PyTorch Distributed Checkpoint files; the distributed optimizer's state "
             "dp_reshardable); default: the source's"},
    {.name = "--true-vocab-size",
     G,
     INT64,
     OPT(true_vocab_size),
     GE(1),
     IMPLEMENTED,
     .help = "Original size of vocab (without padding), to pad the embeddings for the target "
             "tensor parallel size (default: the checkpoint's --vocab-size)"},
};

static void help(FILE *f)
{
    fputs("usage: megatron-c convert-checkpoint --load-dir DIR --save-dir DIR\n"
          "                                     [--target-tensor-parallel-size T]\n"
          "                                     [--target-pipeline-parallel-size P] [...]\n\n"
          "Reshards a checkpoint (megatron-c's or Megatron-LM's, --ckpt-format torch or\n"
          "torch_dist) to another tensor/pipeline parallel size, virtual pipeline layout,\n"
          "distributed-optimizer setting and format (--target-ckpt-format). Unlike Megatron's\n"
          "tools/checkpoint/convert.py it carries the optimizer state (Adam moments, fp32\n"
          "master parameters, step), the learning-rate scheduler, the iteration and the\n"
          "consumed samples, so that training continues with the same losses in the new\n"
          "layout.\n",
          f);
    mc_flag_set_t set = {FLAGS, sizeof(FLAGS) / sizeof(FLAGS[0]), NULL};
    mc_cli_print_flags(f, &set);
}

int mc_cli_convert(int argc, char **argv)
{
    mc_convert_args_t o;
    memset(&o, 0, sizeof(o));
    mc_cli_t c = {.prog = "megatron-c convert-checkpoint",
                  .sets = {{FLAGS, sizeof(FLAGS) / sizeof(FLAGS[0]), &o}},
                  .nsets = 1,
                  .help = help};
    mc_cli_defaults(&c);
    mc_cli_parse(&c, argc - 1, argv + 1);
    return mc_convert_run(&o);
}
