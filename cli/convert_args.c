/* `megatron-c convert-checkpoint` flags (cli/convert_args.h). */
#include "cli/convert_args.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

typedef enum { CA_STRING, CA_INT, CA_INT64, CA_ON, CA_OFF, CA_CHOICE, CA_HELP } ca_type_t;

typedef struct {
    const char *name;
    ca_type_t type;
    size_t field;
    int64_t min;           /* CA_INT, CA_INT64 */
    const char *choices;   /* CA_CHOICE: space-separated */
    const char *help;
} ca_flag_t;

#define F(x) offsetof(mc_convert_args_t, x)
static const ca_flag_t FLAGS[] = {
    {"--help", CA_HELP, 0, 0, NULL, "show this help message and exit"},
    {"--model-type", CA_CHOICE, 0, 0, "GPT", "Type of the model (Megatron's convert.py; GPT only)"},
    {"--load-dir", CA_STRING, F(load_dir), 0, NULL,
     "Directory to load the checkpoint from (megatron-c's or Megatron-LM's legacy torch format; "
     "the tracker's iteration)"},
    {"--save-dir", CA_STRING, F(save_dir), 0, NULL,
     "Directory to save the converted checkpoint to (written atomically, like a save; other "
     "iterations there are kept)"},
    {"--ckpt-step", CA_INT64, F(ckpt_step), 1, NULL,
     "Iteration to convert instead of the tracker's"},
    {"--target-tensor-parallel-size", CA_INT, F(tp), 1, NULL,
     "Target tensor model parallel size (default: the source's)"},
    {"--target-pipeline-parallel-size", CA_INT, F(pp), 1, NULL,
     "Target pipeline model parallel size (default: the source's)"},
    {"--target-num-layers-per-virtual-pipeline-stage", CA_INT, F(layers_per_virtual_stage), 1, NULL,
     "Target --num-layers-per-virtual-pipeline-stage (default: the source's virtual stages when "
     "the pipeline size is unchanged, else none)"},
    {"--target-num-virtual-stages-per-pipeline-rank", CA_INT, F(virtual_stages), 1, NULL,
     "Target --num-virtual-stages-per-pipeline-rank (1: no virtual stages)"},
    {"--target-decoder-first-pipeline-num-layers", CA_INT, F(first_stage_layers), 1, NULL,
     "Target --decoder-first-pipeline-num-layers (uneven first stage)"},
    {"--target-decoder-last-pipeline-num-layers", CA_INT, F(last_stage_layers), 1, NULL,
     "Target --decoder-last-pipeline-num-layers (uneven last stage)"},
    {"--target-use-distributed-optimizer", CA_ON, F(dist_opt), 0, NULL,
     "Write the optimizer state as --use-distributed-optimizer does (distrib_optim.pt)"},
    {"--target-no-use-distributed-optimizer", CA_OFF, F(dist_opt), 0, NULL,
     "Write the optimizer state into model_optim_rng.pt (no distributed optimizer)"},
    {"--target-data-parallel-size", CA_INT, F(dp), 1, NULL,
     "Data-parallel size the target is trained with (the distributed optimizer's bucket padding "
     "and default bucket size; default: the source's)"},
    {"--target-overlap-grad-reduce", CA_ON, F(overlap_grad_reduce), 0, NULL,
     "The target trains with --overlap-grad-reduce (gradient buckets of the distributed "
     "optimizer's file)"},
    {"--target-no-overlap-grad-reduce", CA_OFF, F(overlap_grad_reduce), 0, NULL,
     "The target trains without --overlap-grad-reduce (one bucket)"},
    {"--target-ddp-bucket-size", CA_INT64, F(ddp_bucket_size), 1, NULL,
     "The target's --ddp-bucket-size"},
    {"--saver-transformer-impl", CA_CHOICE, F(transformer_impl), 0, "local transformer_engine",
     "Names of the saved model: local (input_layernorm, ...) or transformer_engine (fused "
     "layer_norm_weight, ...); default: the source's"},
    {"--true-vocab-size", CA_INT64, F(true_vocab_size), 1, NULL,
     "Original size of vocab (without padding), to pad the embeddings for the target tensor "
     "parallel size (default: the checkpoint's --vocab-size)"},
};
#undef F
enum { N_FLAGS = sizeof(FLAGS) / sizeof(FLAGS[0]) };

void mc_convert_args_help(FILE *f)
{
    fprintf(f,
            "usage: megatron-c convert-checkpoint --load-dir DIR --save-dir DIR\n"
            "                                     [--target-tensor-parallel-size T]\n"
            "                                     [--target-pipeline-parallel-size P] [...]\n\n"
            "Reshards a checkpoint in the legacy torch layout (megatron-c's, or Megatron-LM's\n"
            "--ckpt-format torch) to another tensor/pipeline parallel size, virtual pipeline\n"
            "layout and distributed-optimizer setting. Unlike Megatron's tools/checkpoint/convert.py\n"
            "it carries the optimizer state (Adam moments, fp32 master parameters, step), the\n"
            "learning-rate scheduler, the iteration and the consumed samples, so that training\n"
            "continues with the same losses in the new layout.\n\noptions:\n");
    for (int i = 0; i < N_FLAGS; i++) {
        const ca_flag_t *g = &FLAGS[i];
        char name[128];
        if (g->type == CA_CHOICE) snprintf(name, sizeof(name), "%s {%s}", g->name, g->choices);
        else if (g->type == CA_INT || g->type == CA_INT64 || g->type == CA_STRING)
            snprintf(name, sizeof(name), "%s %s", g->name, g->type == CA_STRING ? "DIR" : "N");
        else snprintf(name, sizeof(name), "%s", g->name);
        fprintf(f, "  %s\n                        %s\n", name, g->help);
    }
}

static const ca_flag_t *find(const char *name)
{
    for (int i = 0; i < N_FLAGS; i++)
        if (strcmp(FLAGS[i].name, name) == 0) return &FLAGS[i];
    return strcmp(name, "-h") == 0 ? &FLAGS[0] : NULL;
}

static int64_t integer(const ca_flag_t *g, const char *v, int64_t max)
{
    char *end, b[MC_SHOWN_MAX + 4];
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end || errno == ERANGE) mc_user_error("argument %s: invalid int value: '%s'", g->name, mc_shown(v, b));
    if (x < g->min || x > max) mc_user_error("argument %s: invalid value '%s' (must be >= %lld)", g->name,
                                             mc_shown(v, b), (long long)g->min);
    return x;
}

static void set(mc_convert_args_t *a, const ca_flag_t *g, const char *v)
{
    char *p = (char *)a + g->field, b[MC_SHOWN_MAX + 4];
    switch (g->type) {
    case CA_STRING: *(const char **)(void *)p = v; break;
    case CA_INT: *(int *)(void *)p = (int)integer(g, v, INT_MAX); break;
    case CA_INT64: *(int64_t *)(void *)p = integer(g, v, INT64_MAX); break;
    case CA_CHOICE: {
        char list[64];
        snprintf(list, sizeof(list), " %s ", g->choices);
        char want[80];
        snprintf(want, sizeof(want), " %s ", v);
        if (!strstr(list, want))
            mc_user_error("argument %s: invalid choice: '%s' (choose from %s)", g->name, mc_shown(v, b), g->choices);
        if (g->field) *(const char **)(void *)p = v;
        break;
    }
    default: break;
    }
}

void mc_convert_args_parse(mc_convert_args_t *a, int argc, char **argv)
{
    memset(a, 0, sizeof(*a));
    a->tp = a->pp = a->layers_per_virtual_stage = a->virtual_stages = -1;
    a->first_stage_layers = a->last_stage_layers = a->dp = a->dist_opt = a->overlap_grad_reduce = -1;
    a->ddp_bucket_size = -1;
    char b[MC_SHOWN_MAX + 4];
    for (int i = 0; i < argc; i++) {
        char name[128];
        const char *eq = strncmp(argv[i], "--", 2) == 0 ? strchr(argv[i], '=') : NULL;
        size_t len = eq ? (size_t)(eq - argv[i]) : strlen(argv[i]);
        snprintf(name, sizeof(name), "%.*s", (int)(len < sizeof(name) ? len : sizeof(name) - 1), argv[i]);
        const ca_flag_t *g = find(name);
        if (!g) {
            /* a flag the name begins (a shortened name), else one within a typo or two */
            const char *near = NULL;
            size_t best = 4;
            for (int k = 0; k < N_FLAGS && !near; k++)
                if (strlen(name) > 2 && strncmp(FLAGS[k].name, name, strlen(name)) == 0) near = FLAGS[k].name;
            for (int k = 0; k < N_FLAGS && best; k++) {
                size_t d = mc_edit_distance(name, FLAGS[k].name);
                if (d < best && !near) best = d, near = FLAGS[k].name;
            }
            if (near) mc_user_error("unrecognized argument %s (did you mean %s?)", mc_shown(name, b), near);
            mc_user_error("unrecognized argument %s (see megatron-c convert-checkpoint --help)", mc_shown(name, b));
        }
        if (g->type == CA_HELP) {
            mc_convert_args_help(stdout);
            exit(0);
        }
        if (g->type == CA_ON || g->type == CA_OFF) {
            if (eq) mc_user_error("argument %s: ignored explicit argument '%s'", g->name, mc_shown(eq + 1, b));
            *(int *)(void *)((char *)a + g->field) = g->type == CA_ON;
            continue;
        }
        const char *v = eq ? eq + 1 : NULL;
        if (!v) {
            if (i + 1 >= argc || strncmp(argv[i + 1], "--", 2) == 0)
                mc_user_error("argument %s: expected one argument", g->name);
            v = argv[++i];
        }
        set(a, g, v);
    }
    char missing[64] = "";
    if (!a->load_dir) strcat(missing, "--load-dir");
    if (!a->save_dir) strcat(missing, missing[0] ? ", --save-dir" : "--save-dir");
    if (missing[0]) mc_user_error("the following arguments are required: %s", missing);
}
