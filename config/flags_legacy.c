/* Flag table, part 3: flags Megatron-LM removed that its published recipes still pass (its
 * examples/ from v2.5 on, the SC21 paper's scripts, its functional tests). Each is accepted and
 * taken as what it meant, in today's flags (.modern), with one warning line (cli/legacy.c);
 * the note says when Megatron dropped it (commits of NVIDIA/Megatron-LM). Help texts are those
 * of the Megatron versions that had them. */
#include "config/flags_table.h"

#define TRAIN .group = "training"
#define DIST .group = "distributed"
#define DATA .group = "data and dataloader"
#define LOG .group = "logging"

#define LEGACY(why) .status = MC_FLAG_LEGACY, .note = (why)
/* The old recompute flags had effect only with full recomputation. */
#define ONLY_WHEN_FULL .only_with = "--recompute-granularity full"

/* One flag per entry, its fields packed as written. */
/* clang-format off */
const mc_flag_t mc_flags_legacy[] = {
    /* ---- training: activation checkpointing, renamed recomputation ---- */
    {.name = "--checkpoint-activations", TRAIN, TRUE_IF_GIVEN,
     .modern = "--recompute-granularity full --recompute-method uniform",
     .modern_default = "--recompute-num-layers 1",
     LEGACY("what Megatron took it for from c1e0689d92 (2021-08) until 3e71ad9c62 (2023-04) "
            "made it an error: every layer recomputed, as before"),
     .help = "Checkpoint activation to allow for training with larger models, sequences, and "
             "batch sizes."},
    {.name = "--checkpoint-num-layers", TRAIN, INT, .def = "1",
     .modern = "--recompute-num-layers %s", ONLY_WHEN_FULL,
     LEGACY("the chunk size of --checkpoint-activations until c1e0689d92 (2021-08) renamed it "
            "--activations-checkpoint-num-layers"),
     .help = "chunk size (number of layers) for checkpointing."},
    {.name = "--activations-checkpoint-method", TRAIN, CHOICE("uniform", "block"),
     .modern = "--recompute-granularity full --recompute-method %s",
     .modern_default = "--recompute-num-layers 1",
     LEGACY("renamed --recompute-method in bbab79f869 (2022-05), which named what it did full "
            "granularity"),
     .help = "1) uniform: uniformly divide the total number of Transformer layers and "
             "checkpoint the input activation of each divided chunk, 2) checkpoint the input "
             "activations of only a set number of individual Transformer layers per pipeline "
             "stage and do the rest without any checkpointing default) do not apply activations "
             "checkpoint to any layers"},
    {.name = "--activations-checkpoint-num-layers", TRAIN, INT, .def = "1",
     .modern = "--recompute-num-layers %s", ONLY_WHEN_FULL,
     LEGACY("renamed --recompute-num-layers in bbab79f869 (2022-05)"),
     .help = "1) uniform: the number of Transformer layers in each uniformly divided checkpoint "
             "unit, 2) block: the number of individual Transformer layers to checkpoint within "
             "each pipeline stage."},
    {.name = "--distribute-checkpointed-activations", TRAIN, TRUE_IF_GIVEN,
     .modern = "--distribute-saved-activations",
     LEGACY("renamed --distribute-saved-activations in d19e8ad7ab (2022-05)"),
     .help = "If set, distribute checkpointed activations across model parallel group."},

    /* ---- distributed ---- */
    {.name = "--DDP-impl", DIST, CHOICE("local", "torch"), .def = "local",
     LEGACY("Megatron dropped torch's DistributedDataParallel in 3fb3e95ec6 (2023-08) and kept "
            "its own, local, which megatron-c's data parallelism is; both average the gradients "
            "over the data-parallel ranks"),
     .help = "which DistributedDataParallel implementation to use."},
    {.name = "--use-gpu-initialization", DIST, TRUE_IF_GIVEN,
     LEGACY("Megatron's flag of the week CPU initialisation was its default (3d5f704c91 to "
            "e3da1cd312, 2024-03); megatron-c initialises alike on every device"),
     .help = "If set, initialize weights on the GPU"},
    {.name = "--align-param-gather", DIST, TRUE_IF_GIVEN,
     LEGACY("the default since 655a663df2 (2024-09), which replaced it with "
            "--no-align-param-gather"),
     .help = "If set, all PP stages will launch param all-gathers simultaneously. Otherwise, "
             "each PP stage will independently launch as needed."},
    {.name = "--use-custom-fsdp", DIST, TRUE_IF_GIVEN, .modern = "--use-megatron-fsdp",
     LEGACY("renamed --use-megatron-fsdp in af28b5a559 (2025-08)"),
     .help = "Use the Megatron FSDP code path in DDP."},

    /* ---- data and dataloader ---- */
    {.name = "--data-impl", DATA, CHOICE("lazy", "cached", "mmap", "infer"), .def = "infer",
     .supported = (const char *const[]){"mmap", "infer", NULL},
     LEGACY("megatron-c reads the mmap indexed format, which infer finds in the files "
            "preprocess_data.py writes; Megatron removed lazy and cached in d1a36e5334 (2023-06) "
            "and the flag in 34ac1ad05e (2023-09)"),
     .help = "Implementation of indexed datasets."},

    /* ---- logging ---- */
    {.name = "--log-batch-size-to-tensorboard", LOG, TRUE_IF_GIVEN,
     LEGACY("Megatron writes batch-size to TensorBoard unconditionally since 07659f9f09 "
            "(2024-07), which removed the flag"),
     .help = "If set, write batch-size to tensorboard."},
};
/* clang-format on */

const size_t mc_flags_legacy_count = sizeof(mc_flags_legacy) / sizeof(mc_flags_legacy[0]);
