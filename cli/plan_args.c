/* `megatron-c plan`'s command line (plan/plan.h): its own options and training's flags in one
 * parser; the training line is checked as `megatron-c` would check it at --num-gpus ranks
 * (--check stops there), then the plan, or with --search the best layouts. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "cli/cli.h"
#include "config/flags_table.h"
#include "data/tokenizer.h"
#include "plan/plan.h"

typedef struct {
    int num_gpus, gpus_per_node, top;
    const char *gpu, *attention;
    double peak, memory, hbm, intra, inter;
    bool check, search, scatter_gather;
} opts_t;

#define OPT(x) FIELD_OF(opts_t, x)
#define REF(x) REF_OF(opts_t, x)
#define G .group = "plan"

static const mc_flag_t FLAGS[] = {
    {.name = "--num-gpus",
     G,
     INT,
     OPT(num_gpus),
     .def = "1",
     GE(1),
     IMPLEMENTED,
     .help = "GPUs of the job (the world size the command line is validated at)"},
    {.name = "--gpus-per-node",
     G,
     INT,
     OPT(gpus_per_node),
     .def = "8",
     GE(1),
     IMPLEMENTED,
     .help = "GPUs per node: tensor-parallel groups within a node use NVLink, the others the "
             "network"},
    {.name = "--gpu",
     G,
     CHOICE("a100", "h100", "h200"),
     REF(gpu),
     .def = "h100",
     IMPLEMENTED,
     .help = "The GPU and node (plan/hw.c: datasheet peaks, DGX networks)"},
    {.name = "--gpu-peak-tflops",
     G,
     FLOAT,
     OPT(peak),
     .def = "0",
     GE(0),
     IMPLEMENTED,
     .help = "Override the GPU's dense bf16/fp16 peak (TFLOP/s)"},
    {.name = "--gpu-memory-gb",
     G,
     FLOAT,
     OPT(memory),
     .def = "0",
     GE(0),
     IMPLEMENTED,
     .help = "Override the GPU's memory (GB)"},
    {.name = "--hbm-bandwidth-gbps",
     G,
     FLOAT,
     OPT(hbm),
     .def = "0",
     GE(0),
     IMPLEMENTED,
     .help = "Override the GPU's memory bandwidth (GB/s)"},
    {.name = "--intra-node-bandwidth-gbps",
     G,
     FLOAT,
     OPT(intra),
     .def = "0",
     GE(0),
     IMPLEMENTED,
     .help = "Override NVLink bandwidth per GPU and direction (GB/s)"},
    {.name = "--inter-node-bandwidth-gbps",
     G,
     FLOAT,
     OPT(inter),
     .def = "0",
     GE(0),
     IMPLEMENTED,
     .help = "Override the network bandwidth per GPU and direction (GB/s)"},
    {.name = "--attention-kernel",
     G,
     CHOICE("auto", "cudnn", "kernels", "materialized"),
     REF(attention),
     .def = "auto",
     IMPLEMENTED,
     .help =
         "auto: what the run would use (cuDNN's fused flash attention where --attention-backend "
         "and cuDNN's support take the shapes, else the project's kernels); cudnn; kernels: "
         "the project's attention kernels; materialized: the [s, s] scores in memory, as "
         "Megatron-LM's 2021 fused softmax (the paper's runs)"},
    {.name = "--pp-scatter-gather",
     G,
     TRUE_IF_GIVEN,
     OPT(scatter_gather),
     IMPLEMENTED,
     .help = "Pipeline transfers of 1/t of a stage's output per tensor-parallel rank (the "
             "paper's scatter/gather; --sequence-parallel does so by itself)"},
    {.name = "--check",
     G,
     TRUE_IF_GIVEN,
     OPT(check),
     IMPLEMENTED,
     .help = "Only validate the command line at --num-gpus ranks (nothing allocated); exit 0 "
             "when megatron-c would start, 2 with every problem"},
    {.name = "--search",
     G,
     TRUE_IF_GIVEN,
     OPT(search),
     IMPLEMENTED,
     .help = "Rank every layout (t, p, d, expert parallelism of an MoE model, micro batch, "
             "virtual stages, recomputation, sequence parallelism, distributed optimizer) that "
             "is valid and fits, by predicted throughput"},
    {.name = "--search-top",
     G,
     INT,
     OPT(top),
     .def = "5",
     BETWEEN(1, 50),
     IMPLEMENTED,
     .help = "How many layouts --search prints"},
};
#define NFLAGS (sizeof(FLAGS) / sizeof(FLAGS[0]))

static void help(FILE *f)
{
    fputs("usage: megatron-c plan TRAINING-FLAGS --num-gpus N [--gpus-per-node G]\n"
          "                       [--gpu {a100,h100,h200}] [--check] [--search] [...]\n"
          "\n"
          "Before a GPU is spent: validates the training command line at N ranks (--check\n"
          "stops there), then prints the memory per GPU (megatron-c's own start-up memory\n"
          "plan), the time per iteration by part (compute, tensor-parallel collectives,\n"
          "pipeline p2p and bubble, data-parallel reduction, optimizer), tokens/s, TFLOP/s per\n"
          "GPU and MFU. --search ranks the layouts that fit. Data files are not read.\n",
          f);
    mc_flag_set_t set = {FLAGS, NFLAGS, NULL};
    mc_cli_print_flags(f, &set);
}

static bool readable(const char *path)
{
    struct stat st;
    return path && path[0] && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The tokenizer's vocabulary, as training would build it (data/source.c), without reading the
 * data: its files when they are there; GPT-2's 50257 tokens when they are not. 0 when
 * --padded-vocab-size is given (it is used as is). */
static int64_t plan_vocab(const mc_args_t *a)
{
    if (a->padded_vocab_size > 0) return 0;
    const bool gpt2 = strcmp(a->tokenizer_type, "GPT2BPETokenizer") == 0;
    if (gpt2 && !readable(a->vocab_file) && !readable(a->merge_file))
        return a->mock_data && !a->vocab_file[0] ? a->vocab_size : 50257;
    char err[512];
    const mc_tokenizer_spec_t spec = mc_tokenizer_spec_of(a);
    mc_tokenizer_t *t = mc_tokenizer_build(&spec, err, sizeof(err));
    if (!t) mc_user_error("%s", err);
    const int64_t v = mc_tokenizer_vocab_size(t);
    mc_tokenizer_free(t);
    return v;
}

static void cluster_from(mc_cluster_t *cl, const opts_t *o)
{
    memset(cl, 0, sizeof(*cl));
    cl->gpu = *mc_gpu_find(o->gpu);
    if (o->peak > 0) cl->gpu.peak_tflops = o->peak;
    if (o->memory > 0) cl->gpu.memory_gb = o->memory;
    if (o->hbm > 0) cl->gpu.hbm_gbps = o->hbm;
    if (o->intra > 0) cl->gpu.intra_gbps = o->intra;
    if (o->inter > 0) cl->gpu.inter_gbps = o->inter;
    cl->num_gpus = o->num_gpus;
    cl->gpus_per_node = o->gpus_per_node;
    cl->attn = strcmp(o->attention, "materialized") == 0 ? MC_ATTN_MATERIALIZED
               : strcmp(o->attention, "cudnn") == 0      ? MC_ATTN_CUDNN
               : strcmp(o->attention, "kernels") == 0    ? MC_ATTN_KERNELS
                                                         : MC_ATTN_AUTO;
    cl->pp_scatter_gather = o->scatter_gather;
}

static int search(const mc_args_t *raw, const mc_cluster_t *cl, int64_t vocab, int top)
{
    mc_plan_candidate_t *best = calloc((size_t)top, sizeof(*best));
    if (!best) mc_fatal("out of host memory");
    int tried, fitting;
    const int n = mc_plan_search(raw, cl, mc_args_check, vocab, top, best, &tried, &fitting);
    if (n == 0)
        mc_user_error("plan --search: none of the %d layouts of this model and batch on %d x %s "
                      "is valid and fits in %.0f GB (reduce the model or --seq-length, or use "
                      "more GPUs)",
                      tried, cl->num_gpus, cl->gpu.long_name, cl->gpu.memory_gb);
    printf("> search: %d layouts of %d x %s (%d per node) tried, %d valid and fitting\n", tried,
           cl->num_gpus, cl->gpu.long_name, cl->gpus_per_node, fitting);
    printf("%4s %12s %12s %12s %7s %11s  %s\n", "rank", "tokens/s", "TFLOP/s/GPU", "(paper's)",
           "MFU", "memory/GPU", "flags");
    for (int i = 0; i < n; i++) {
        char flags[512];
        mc_plan_layout_flags(&best[i].args, flags, sizeof(flags));
        printf("%4d %12.0f %12.1f %12.1f %6.1f%% %8.2f GB  %s\n", i + 1, best[i].time.tokens_per_s,
               best[i].time.model_tflops_per_gpu, best[i].time.hw_tflops_per_gpu,
               100 * best[i].time.mfu, best[i].memory / 1e9, flags);
    }
    free(best);
    return 0;
}

int mc_cli_plan(int argc, char **argv)
{
    static mc_args_t args, raw;
    opts_t o;
    memset(&o, 0, sizeof(o));
    mc_args_defaults(&args);
    mc_cli_t c = {
        .prog = "megatron-c plan", .sets = {{FLAGS, NFLAGS, &o}}, .nsets = 1, .help = help};
    c.nsets += mc_flag_training_sets(c.sets + 1, &args);
    for (size_t i = 0; i < NFLAGS; i++) mc_flag_default(&o, &FLAGS[i]);
    mc_flag_seen_t *seen = mc_cli_parse(&c, argc - 1, argv + 1);
    mc_cli_legacy_map(&c, seen, &args);
    mc_cli_check_status(&c, seen, 1, c.nsets - 1);
    mc_cli_legacy_warn();
    mc_args_run_hook(&args);
    raw = args; /* before validation derives values: --search re-validates each layout */
    /* --search replaces the layout: the line's own is checked at its tp x pp ranks only (the
     * model and training flags), each candidate at --num-gpus */
    mc_args_finalize(&args,
                     o.search ? args.tensor_model_parallel_size * args.pipeline_model_parallel_size
                              : o.num_gpus);
    if (o.check) {
        printf("plan --check: valid at %d ranks: tp %d, pp %d, vpp %d, dp %d, %d microbatches\n",
               o.num_gpus, args.tensor_model_parallel_size, args.pipeline_model_parallel_size,
               args.virtual_pipeline_model_parallel_size, args.data_parallel_size,
               args.num_microbatches);
        mc_args_free(&args);
        return 0;
    }
    mc_cluster_t cl;
    cluster_from(&cl, &o);
    /* --attention-kernel other than auto: the memory plan sizes the implementation the time
     * model charges (the project's kernels for materialized too: megatron-c has no such path) */
    if (cl.attn != MC_ATTN_AUTO) {
        const char *be = cl.attn == MC_ATTN_CUDNN ? "auto" : "local";
        snprintf(args.attention_backend, sizeof(args.attention_backend), "%s", be);
        snprintf(raw.attention_backend, sizeof(raw.attention_backend), "%s", be);
    }
    const int64_t vocab = plan_vocab(&args);
    if (vocab > 0)
        args.padded_vocab_size = mc_padded_vocab_size((int)vocab, args.make_vocab_size_divisible_by,
                                                      args.tensor_model_parallel_size);
    int rc = 0;
    if (o.search) {
        rc = search(&raw, &cl, vocab, o.top);
    } else {
        mc_memory_plan_t mem;
        mc_plan_time_t t;
        /* --device cpu: the CPU backend's plan, which a run on the CPU prints at start-up */
        const char *device = strcmp(args.device, "cpu") == 0 ? "cpu" : "cuda";
        mc_plan_memory(&args, device, &mem);
        mc_plan_time(&args, &cl, &mem, &t);
        mc_plan_print(stdout, &args, &cl, device, &mem, &t);
    }
    mc_args_free(&args);
    return rc;
}
